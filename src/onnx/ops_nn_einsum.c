/* ops_nn_einsum.c — ONNX's Einsum (NumPy's einsum with explicit or implicit output and an
 * ellipsis): repeated labels of one operand become a diagonal (a strided slice of the two dims
 * merged), labels no one else needs are summed out, and operands are contracted left to right as a
 * batched matmul: [batch..., kept, contracted] @ [batch..., contracted, kept]. */
#include <stdlib.h>
#include <string.h>

#include "onnx/ops_nn.h"

#define N_LETTERS    52
#define ELL          (-1)
#define MAX_OPERANDS 16
#define MAX_LABELS   (N_LETTERS + TS_MAX_DIMS)

/* one side of the equation: the terms as letters (0..51) and ELL for the ellipsis */
typedef struct term {
    int n;
    int sym[TS_MAX_DIMS + 1];
} term;

typedef struct equation {
    int n_in;
    term in[MAX_OPERANDS];
    bool explicit_out;
    term out;
} equation;

static int letter(char ch) {
    if (ch >= 'a' && ch <= 'z') return ch - 'a' + 26; /* NumPy's implicit order: A..Z, a..z */
    if (ch >= 'A' && ch <= 'Z') return ch - 'A';
    return -1;
}

/* parses one term from s up to a ',' or '-' or the end; returns the next position or NULL */
static const char *parse_term(const char *s, term *t, const char **why) {
    t->n = 0;
    bool ell = false;
    for (; *s && *s != ',' && *s != '-'; s++) {
        if (*s == ' ') continue;
        if (t->n > TS_MAX_DIMS) return *why = "a term has more labels than Tessera's dims", NULL;
        if (*s == '.') {
            if (ell || strncmp(s, "...", 3)) return *why = "a malformed ellipsis", NULL;
            ell = true;
            t->sym[t->n++] = ELL;
            s += 2;
            continue;
        }
        int l = letter(*s);
        if (l < 0) return *why = "a character that is not a letter", NULL;
        t->sym[t->n++] = l;
    }
    return s;
}

static bool parse(const tso_node *n, equation *e) {
    char buf[512];
    const char *s = tso_attr_string(n, "equation", NULL, buf, sizeof buf);
    if (!s) return tso_fail(n, TS_ERR_FORMAT, "needs the equation attribute");
    const char *why = NULL;
    memset(e, 0, sizeof *e);
    for (;;) {
        if (e->n_in == MAX_OPERANDS)
            return tso_fail(n, TS_ERR_UNSUPPORTED, "more than %d operands", MAX_OPERANDS);
        s = parse_term(s, &e->in[e->n_in++], &why);
        if (!s) return tso_fail(n, TS_ERR_UNSUPPORTED, "equation '%s': %s", buf, why);
        if (*s != ',') break;
        s++;
    }
    if (*s == '-') {
        if (s[1] != '>')
            return tso_fail(n, TS_ERR_UNSUPPORTED, "equation '%s': a '-' without '>'", buf);
        e->explicit_out = true;
        s = parse_term(s + 2, &e->out, &why);
        if (!s || *s)
            return tso_fail(n, TS_ERR_UNSUPPORTED, "equation '%s': %s", buf,
                            why ? why : "a second '->' or ','");
    }
    if (e->n_in != n->n_in)
        return tso_fail(n, TS_ERR_FORMAT, "equation '%s' has %d operands, the node %d inputs", buf,
                        e->n_in, n->n_in);
    /* the output names each label once, and only labels of the operands */
    for (int i = 0; e->explicit_out && i < e->out.n; i++) {
        bool found = false;
        for (int j = 0; j < e->out.n; j++)
            if (j != i && e->out.sym[j] == e->out.sym[i])
                return tso_fail(n, TS_ERR_FORMAT, "equation '%s': an output label repeats", buf);
        for (int k = 0; k < e->n_in && !found; k++)
            for (int j = 0; j < e->in[k].n && !found; j++) found = e->in[k].sym[j] == e->out.sym[i];
        if (!found && e->out.sym[i] != ELL)
            return tso_fail(n, TS_ERR_FORMAT, "equation '%s': an output label no operand has", buf);
    }
    return true;
}

TSO_NN_CHECK(tso_nn_check_einsum) {
    equation e;
    return parse(n, &e);
}

/* ------------------------------------------------------------------ labelled tensors */
typedef struct lt {
    ts_tensor *t;
    int n;
    int lab[TS_MAX_DIMS];
} lt;

static int find(const int *labs, int n, int l) {
    for (int i = 0; i < n; i++)
        if (labs[i] == l) return i;
    return -1;
}

/* a term's labels for a tensor of rank nd: the ellipsis covers the dims the letters leave, as the
 * last of `ell` ellipsis labels N_LETTERS.. (right-aligned, NumPy's broadcasting) */
static bool expand(const tso_node *n, const term *t, int nd, int ell, int *labs) {
    int letters = t->n - (find(t->sym, t->n, ELL) >= 0);
    int e = nd - letters;
    if (e < 0 || (e > 0 && find(t->sym, t->n, ELL) < 0))
        return tso_fail(n, TS_ERR_SHAPE, "an operand of rank %d does not fit its term", nd);
    int k = 0;
    for (int i = 0; i < t->n; i++) {
        if (t->sym[i] != ELL) {
            labs[k++] = t->sym[i];
            continue;
        }
        for (int j = 0; j < e; j++) labs[k++] = N_LETTERS + ell - e + j;
    }
    return true;
}

/* x with dims a < b (the same label) replaced by their diagonal, as the last dim */
static bool diagonal(lt *x, int a, int b) {
    ts_dims p = {.n = x->n};
    int k = 0;
    int lab[TS_MAX_DIMS];
    for (int i = 0; i < x->n; i++)
        if (i != a && i != b) lab[k] = x->lab[i], p.d[k++] = i;
    lab[k] = x->lab[a];
    p.d[k] = a, p.d[k + 1] = b;
    int64_t len = ts_size(x->t, a);
    ts_tensor *t = ts_flatten(ts_permute(x->t, p), x->n - 2, x->n - 1);
    x->t = ts_slice(t, x->n - 2, 0, len * len, len + 1);
    x->n--;
    memcpy(x->lab, lab, sizeof lab);
    return x->t != NULL;
}

/* sums out the labels of x that `needed` (count per label elsewhere) lacks */
static bool sum_unneeded(lt *x, const int *needed) {
    ts_dims d = {0};
    int k = 0;
    for (int i = 0; i < x->n; i++) {
        if (needed[x->lab[i]])
            x->lab[k++] = x->lab[i];
        else
            d.d[d.n++] = i;
    }
    if (!d.n) return true;
    x->t = ts_sum_dims(x->t, d, false);
    x->n = k;
    return x->t != NULL;
}

/* dims of x in the order of labels labs[0..cnt-1] appended to p */
static void order(const lt *x, const int *labs, int cnt, ts_dims *p) {
    for (int i = 0; i < cnt; i++) p->d[p->n++] = find(x->lab, x->n, labs[i]);
}

static int64_t prod_sizes(const lt *x, const int *labs, int cnt) {
    int64_t p = 1;
    for (int i = 0; i < cnt; i++) p *= ts_size(x->t, find(x->lab, x->n, labs[i]));
    return p;
}

/* a @ b over their shared labels: those `keep` counts stay as batch dims, the others contract */
static bool contract(lt *a, const lt *b, const int *keep) {
    int batch[TS_MAX_DIMS], con[TS_MAX_DIMS], ao[TS_MAX_DIMS], bo[TS_MAX_DIMS];
    int nb = 0, nc = 0, na = 0, nbo = 0;
    for (int i = 0; i < a->n; i++) {
        int l = a->lab[i];
        if (find(b->lab, b->n, l) < 0)
            ao[na++] = l;
        else if (keep[l])
            batch[nb++] = l;
        else
            con[nc++] = l;
    }
    for (int i = 0; i < b->n; i++)
        if (find(a->lab, a->n, b->lab[i]) < 0) bo[nbo++] = b->lab[i];
    if (nb + na + nbo > TS_MAX_DIMS)
        return tsi_error_set(TS_ERR_UNSUPPORTED, "einsum: the product has more than %d dims",
                             TS_MAX_DIMS),
               false;
    ts_dims pa = {0}, pb = {0};
    order(a, batch, nb, &pa), order(a, ao, na, &pa), order(a, con, nc, &pa);
    order(b, batch, nb, &pb), order(b, con, nc, &pb), order(b, bo, nbo, &pb);
    ts_shape sa = {.ndim = nb + 2}, sb = {.ndim = nb + 2}, sr = {.ndim = nb + na + nbo};
    for (int i = 0; i < nb; i++) {
        sa.dims[i] = ts_size(a->t, find(a->lab, a->n, batch[i]));
        sb.dims[i] = ts_size(b->t, find(b->lab, b->n, batch[i]));
        sr.dims[i] = sa.dims[i] > sb.dims[i] ? sa.dims[i] : sb.dims[i];
    }
    int64_t k = prod_sizes(a, con, nc);
    sa.dims[nb] = prod_sizes(a, ao, na), sa.dims[nb + 1] = k;
    sb.dims[nb] = k, sb.dims[nb + 1] = prod_sizes(b, bo, nbo);
    for (int i = 0; i < na; i++) sr.dims[nb + i] = ts_size(a->t, find(a->lab, a->n, ao[i]));
    for (int i = 0; i < nbo; i++) sr.dims[nb + na + i] = ts_size(b->t, find(b->lab, b->n, bo[i]));
    ts_tensor *ma = ts_reshape(ts_permute(a->t, pa), sa),
              *mb = ts_reshape(ts_permute(b->t, pb), sb);
    a->t = ts_reshape(ts_matmul(ma, mb), sr);
    a->n = sr.ndim;
    memcpy(a->lab, batch, (size_t)nb * sizeof *batch);
    memcpy(a->lab + nb, ao, (size_t)na * sizeof *ao);
    memcpy(a->lab + nb + na, bo, (size_t)nbo * sizeof *bo);
    return a->t != NULL;
}

/* the output's labels: explicit, or NumPy's implicit rule (the ellipsis, then the letters used
 * once, in order) */
static int output_labels(const equation *e, const int *uses, int ell, int *out) {
    int k = 0;
    if (e->explicit_out) {
        for (int i = 0; i < e->out.n; i++) {
            if (e->out.sym[i] != ELL)
                out[k++] = e->out.sym[i];
            else
                for (int j = 0; j < ell; j++) out[k++] = N_LETTERS + j;
        }
        return k;
    }
    for (int j = 0; j < ell; j++) out[k++] = N_LETTERS + j;
    for (int l = 0; l < N_LETTERS; l++)
        if (uses[l] == 1) out[k++] = l;
    return k;
}

TSO_NN_RUN(tso_nn_run_einsum) {
    (void)c;
    equation e;
    if (!parse(n, &e)) return false;
    lt ops[MAX_OPERANDS];
    int ell = 0, uses[MAX_LABELS] = {0}, outl[MAX_LABELS];
    for (int i = 0; i < e.n_in; i++) {
        int letters = e.in[i].n - (find(e.in[i].sym, e.in[i].n, ELL) >= 0);
        if (ts_ndim(in[i]) - letters > ell) ell = ts_ndim(in[i]) - letters;
    }
    for (int i = 0; i < e.n_in; i++) {
        ops[i] = (lt){.t = in[i], .n = ts_ndim(in[i])};
        if (!expand(n, &e.in[i], ops[i].n, ell, ops[i].lab)) return false;
        /* repeated labels: the diagonal */
        for (int a = 0; a < ops[i].n; a++)
            for (int b = a + 1; b < ops[i].n; b++)
                if (ops[i].lab[a] == ops[i].lab[b]) {
                    if (!diagonal(&ops[i], a, b)) return tso_fail_pending(n);
                    a = -1;
                    break;
                }
        for (int a = 0; a < e.in[i].n; a++)
            if (e.in[i].sym[a] != ELL) uses[e.in[i].sym[a]]++; /* the implicit output's count */
    }
    int n_out = output_labels(&e, uses, ell, outl);
    if (e.explicit_out && ell && find(e.out.sym, e.out.n, ELL) < 0)
        return tso_fail(n, TS_ERR_UNSUPPORTED, "operands have ellipsis dims the output omits");
    /* need[l]: later operands and the output that still read label l */
    int need[MAX_LABELS] = {0};
    for (int i = 0; i < n_out; i++) need[outl[i]]++;
    for (int i = 1; i < e.n_in; i++)
        for (int a = 0; a < ops[i].n; a++) need[ops[i].lab[a]]++;
    lt cur = ops[0];
    if (!sum_unneeded(&cur, need)) return tso_fail_pending(n);
    for (int i = 1; i < e.n_in; i++) {
        for (int a = 0; a < ops[i].n; a++) need[ops[i].lab[a]]--;
        /* first each side's labels that neither the other side nor anything later reads */
        int keep_a[MAX_LABELS], keep_b[MAX_LABELS];
        for (int l = 0; l < MAX_LABELS; l++) {
            keep_a[l] = need[l] + (find(ops[i].lab, ops[i].n, l) >= 0);
            keep_b[l] = need[l] + (find(cur.lab, cur.n, l) >= 0);
        }
        if (!sum_unneeded(&cur, keep_a) || !sum_unneeded(&ops[i], keep_b) ||
            !contract(&cur, &ops[i], need))
            return tso_fail_pending(n);
    }
    ts_dims p = {.n = 0};
    for (int i = 0; i < n_out; i++) {
        int at = find(cur.lab, cur.n, outl[i]);
        if (at < 0) return tso_fail(n, TS_ERR_SHAPE, "an output label has no dim");
        p.d[p.n++] = at;
    }
    ts_tensor *y = cur.t == in[0] ? ts_clone(in[0]) : cur.t;
    if (y && p.n > 1) y = ts_permute(y, p);
    if (y && ts_dtype_of(y) != ts_dtype_of(in[0])) y = ts_to_dtype(y, ts_dtype_of(in[0]));
    return (out[0] = y) != NULL || tso_fail_pending(n);
}
