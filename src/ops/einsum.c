/* einsum.c — torch.einsum (issue 76): the equation parsed once with PyTorch's checks and messages;
 * each operand's repeated labels taken as a diagonal (a view); a size-1 dim whose label is larger
 * elsewhere dropped (broadcasting: the operand does not vary along it); then the operands
 * contracted left to right, each pair as one batched matmul [batch, kept, contracted] @
 * [batch, contracted, kept], every label summed out as soon as nothing later reads it. Composed of
 * differentiable ops (diagonal, sum, permute, reshape, matmul), so autograd and every device come
 * with them. The ONNX importer's Einsum calls it too. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"

#define N_LETTERS  52
#define ELL        (-1)
#define MAX_LABELS (N_LETTERS + TS_MAX_DIMS)

/* a letter's label: A..Z 0..25, a..z 26..51 (the implicit output's order is ASCII's) */
static int letter(char ch) {
    if (ch >= 'A' && ch <= 'Z') return ch - 'A';
    if (ch >= 'a' && ch <= 'z') return ch - 'a' + 26;
    return -1;
}
static char label_char(int l) { return (char)(l < 26 ? 'A' + l : 'a' + l - 26); }

/* one term of the equation: letters and ELL (at most once) */
typedef struct term {
    int n;
    int sym[TS_MAX_DIMS + 1];
} term;

/* a tensor with one label per dim; t is a reference of the open scope (or an operand) */
typedef struct lt {
    ts_tensor *t;
    int n;
    int lab[TS_MAX_DIMS];
} lt;

static bool arg_error(const char *msg) { return tsi_error_set(TS_ERR_ARG, "%s", msg), false; }

/* the term of operand `which` starting at eq[*pos] (up to ',', '-' or the end); *pos advances */
static bool parse_term(const char *eq, size_t *pos, term *t, int which, bool output) {
    t->n = 0;
    bool ell = false;
    size_t i = *pos;
    for (; eq[i] && eq[i] != ',' && eq[i] != '-'; i++) {
        char ch = eq[i];
        if (ch == ' ') continue;
        if (ch == '.') {
            if (ell) {
                if (output)
                    return arg_error("einsum(): found '.' for output but an ellipsis (...) was "
                                     "already found");
                return tsi_error_set(TS_ERR_ARG,
                                     "einsum(): found '.' for operand %d for which an ellipsis "
                                     "was already found",
                                     which),
                       false;
            }
            if (strncmp(eq + i, "...", 3) != 0) {
                if (output)
                    return arg_error("einsum(): found '.' for output that is not part of any "
                                     "ellipsis (...)");
                return tsi_error_set(TS_ERR_ARG,
                                     "einsum(): found '.' for operand %d that is not part of any "
                                     "ellipsis (...)",
                                     which),
                       false;
            }
            ell = true;
            if (t->n > TS_MAX_DIMS) goto too_many;
            t->sym[t->n++] = ELL;
            i += 2;
            continue;
        }
        if (letter(ch) < 0)
            return tsi_error_set(TS_ERR_ARG,
                                 "einsum(): invalid subscript given at index %zu in the equation "
                                 "string, subscripts must be in [a-zA-Z]",
                                 i),
                   false;
        if (t->n > TS_MAX_DIMS) goto too_many;
        t->sym[t->n++] = letter(ch);
    }
    *pos = i;
    return true;
too_many:
    return tsi_error_set(TS_ERR_SHAPE, "einsum(): a term has more than %d subscripts", TS_MAX_DIMS),
           false;
}

static int find(const int *labs, int n, int l) {
    for (int i = 0; i < n; i++)
        if (labs[i] == l) return i;
    return -1;
}

/* operand `which`'s labels: its letters, the ellipsis as the last of `ell` ellipsis labels
 * N_LETTERS.. (right-aligned, as broadcasting aligns) */
static bool expand(const term *t, int nd, int ell, int which, int *labs) {
    bool has_ell = find(t->sym, t->n, ELL) >= 0;
    int letters = t->n - has_ell, e = nd - letters;
    if (!has_ell && e != 0)
        return tsi_error_set(TS_ERR_SHAPE,
                             "einsum(): the number of subscripts in the equation (%d) does not "
                             "match the number of dimensions (%d) for operand %d and no ellipsis "
                             "was given",
                             letters, nd, which),
               false;
    if (e < 0)
        return tsi_error_set(TS_ERR_SHAPE,
                             "einsum(): the number of subscripts in the equation (%d) is more "
                             "than the number of dimensions (%d) for operand %d",
                             letters, nd, which),
               false;
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

/* x's dims a < b (the same label) replaced by their diagonal, as the last dim */
static bool diagonal(lt *x, int a, int b, int which) {
    int64_t sa = ts_size(x->t, a), sb = ts_size(x->t, b);
    if (sa != sb)
        return tsi_error_set(TS_ERR_SHAPE,
                             "einsum(): subscript %c is repeated for operand %d but the sizes "
                             "don't match, %lld != %lld",
                             label_char(x->lab[a]), which, (long long)sa, (long long)sb),
               false;
    int l = x->lab[a], k = 0;
    for (int i = 0; i < x->n; i++)
        if (i != a && i != b) x->lab[k++] = x->lab[i];
    x->lab[k] = l;
    x->n--;
    x->t = ts_diagonal(x->t, 0, a, b);
    return x->t != NULL;
}

/* sums out the dims of x whose label `needed` (a count per label) lacks; integer sums back in
 * the operands' dtype */
static bool sum_unneeded(lt *x, const int *needed, ts_dtype dt) {
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
    if (x->t && ts_dtype_of(x->t) != dt) x->t = ts_to_dtype(x->t, dt);
    x->n = k;
    return x->t != NULL;
}

static void order(const lt *x, const int *labs, int cnt, ts_dims *p) {
    for (int i = 0; i < cnt; i++) p->d[p->n++] = find(x->lab, x->n, labs[i]);
}

static int64_t prod_sizes(const lt *x, const int *labs, int cnt) {
    int64_t p = 1;
    for (int i = 0; i < cnt; i++) p *= ts_size(x->t, find(x->lab, x->n, labs[i]));
    return p;
}

/* a @ b over their shared labels: those `keep` counts stay as batch dims, the others contract
 * (shared labels have one size: size-1 broadcasts were dropped before) */
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
    if (nb + 2 > TS_MAX_DIMS || nb + na + nbo > TS_MAX_DIMS)
        return tsi_error_set(TS_ERR_UNSUPPORTED, "einsum(): a product has more than %d dims",
                             TS_MAX_DIMS),
               false;
    ts_dims pa = {0}, pb = {0};
    order(a, batch, nb, &pa), order(a, ao, na, &pa), order(a, con, nc, &pa);
    order(b, batch, nb, &pb), order(b, con, nc, &pb), order(b, bo, nbo, &pb);
    ts_shape sa = {.ndim = nb + 2}, sb = {.ndim = nb + 2}, sr = {.ndim = nb + na + nbo};
    for (int i = 0; i < nb; i++)
        sa.dims[i] = sb.dims[i] = sr.dims[i] = ts_size(a->t, find(a->lab, a->n, batch[i]));
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

/* the sizes of every label over all operands: equal, or 1 (broadcast); *size -1: unseen */
static bool check_sizes(const lt *ops, int n, int64_t *size) {
    for (int l = 0; l < MAX_LABELS; l++) size[l] = -1;
    for (int i = 0; i < n; i++)
        for (int d = 0; d < ops[i].n; d++) {
            int l = ops[i].lab[d];
            int64_t s = ts_size(ops[i].t, d);
            if (size[l] < 0 || size[l] == 1) {
                size[l] = s;
                continue;
            }
            if (s == size[l] || s == 1) continue;
            if (l < N_LETTERS)
                return tsi_error_set(TS_ERR_SHAPE,
                                     "einsum(): subscript %c has size %lld for operand %d which "
                                     "does not broadcast with previously seen size %lld",
                                     label_char(l), (long long)s, i, (long long)size[l]),
                       false;
            return tsi_error_set(TS_ERR_SHAPE,
                                 "einsum(): dimension %d covered by ellipsis in operand %d has "
                                 "size %lld which does not broadcast with previously seen "
                                 "ellipsis with size %lld for the respective dimension",
                                 l - N_LETTERS, i, (long long)s, (long long)size[l]),
                   false;
        }
    return true;
}

/* a size-1 dim whose label is larger in another operand: the operand does not vary along it */
static bool drop_broadcast(lt *x, const int64_t *size) {
    ts_dims d = {0};
    int k = 0;
    for (int i = 0; i < x->n; i++) {
        if (ts_size(x->t, i) == 1 && size[x->lab[i]] != 1)
            d.d[d.n++] = i;
        else
            x->lab[k++] = x->lab[i];
    }
    if (!d.n) return true;
    x->t = ts_squeeze_dims(x->t, d);
    x->n = k;
    return x->t != NULL;
}

/* the output's labels: explicit, or PyTorch's implicit rule (the ellipsis, then the letters used
 * once, in ASCII order) */
static bool output_labels(const term *out, bool explicit_out, const int *uses, int ell, int *outl,
                          int *n_out) {
    int k = 0;
    if (!explicit_out) {
        for (int j = 0; j < ell; j++) outl[k++] = N_LETTERS + j;
        for (int l = 0; l < N_LETTERS; l++)
            if (uses[l] == 1) outl[k++] = l;
        *n_out = k;
        return true;
    }
    for (int i = 0; i < out->n; i++) {
        int l = out->sym[i];
        if (l == ELL) {
            for (int j = 0; j < ell; j++) outl[k++] = N_LETTERS + j;
            continue;
        }
        if (find(out->sym, i, l) >= 0)
            return tsi_error_set(TS_ERR_ARG,
                                 "einsum(): output subscript %c appears more than once in the "
                                 "output",
                                 label_char(l)),
                   false;
        if (!uses[l])
            return tsi_error_set(TS_ERR_ARG,
                                 "einsum(): output subscript %c does not appear in the equation "
                                 "for any input operand",
                                 label_char(l)),
                   false;
        outl[k++] = l;
    }
    *n_out = k;
    return true;
}

static bool check_operands(ts_tensor *const *ops, int n) {
    if (n < 1 || !ops) return arg_error("einsum(): must provide at least one operand");
    for (int i = 0; i < n; i++) {
        char what[32];
        snprintf(what, sizeof what, "operand %d", i);
        if (!tsi_check_input("einsum", ops[i], what)) return false;
    }
    ts_device dev;
    if (!tsi_same_device("einsum", ops, n, false, &dev)) return false;
    for (int i = 1; i < n; i++)
        if (ts_dtype_of(ops[i]) != ts_dtype_of(ops[0]))
            return tsi_error_set(TS_ERR_DTYPE,
                                 "einsum(): operand %d is %s but operand 0 is %s: the operands "
                                 "must have one dtype",
                                 i, ts_dtype_name(ts_dtype_of(ops[i])),
                                 ts_dtype_name(ts_dtype_of(ops[0]))),
                   false;
    return true;
}

/* parses the equation into terms[0..n) and *out; false with the error */
static bool parse(const char *equation, int n, term *terms, term *out, bool *explicit_out) {
    if (!equation) return arg_error("einsum(): equation is NULL");
    size_t pos = 0;
    int count = 0;
    for (;;) {
        term scratch;
        if (!parse_term(equation, &pos, count < n ? &terms[count] : &scratch, count, false))
            return false;
        count++;
        if (equation[pos] != ',') break;
        pos++;
    }
    if (count != n)
        return arg_error(count < n ? "einsum(): more operands were provided than specified in "
                                     "the equation"
                                   : "einsum(): fewer operands were provided than specified in "
                                     "the equation");
    *explicit_out = false;
    if (equation[pos] == '-') {
        if (equation[pos + 1] != '>')
            return tsi_error_set(TS_ERR_ARG,
                                 "einsum(): invalid subscript given at index %zu in the equation "
                                 "string, subscripts must be in [a-zA-Z]",
                                 pos),
                   false;
        *explicit_out = true;
        pos += 2;
        if (!parse_term(equation, &pos, out, -1, true)) return false;
        if (equation[pos])
            return tsi_error_set(TS_ERR_ARG,
                                 "einsum(): invalid subscript given at index %zu in the equation "
                                 "string, subscripts must be in [a-zA-Z]",
                                 pos),
                   false;
    }
    return true;
}

static ts_tensor *einsum_body(const char *equation, ts_tensor *const *operands, int n) {
    term *terms = calloc((size_t)n, sizeof *terms);
    lt *ops = calloc((size_t)n, sizeof *ops);
    ts_tensor *result = NULL;
    if (!terms || !ops) {
        tsi_error_set(TS_ERR_OOM, "einsum(): out of host memory for %d operands", n);
        goto done;
    }
    term out = {0};
    bool explicit_out;
    if (!parse(equation, n, terms, &out, &explicit_out)) goto done;
    ts_dtype dt = ts_dtype_of(operands[0]);
    int ell = 0, uses[MAX_LABELS] = {0}, outl[MAX_LABELS], n_out = 0;
    for (int i = 0; i < n; i++) {
        int letters = terms[i].n - (find(terms[i].sym, terms[i].n, ELL) >= 0);
        if (ts_ndim(operands[i]) - letters > ell) ell = ts_ndim(operands[i]) - letters;
    }
    for (int i = 0; i < n; i++) {
        ops[i] = (lt){.t = operands[i], .n = ts_ndim(operands[i])};
        if (!expand(&terms[i], ops[i].n, ell, i, ops[i].lab)) goto done;
        for (int a = 0; a < terms[i].n; a++)
            if (terms[i].sym[a] != ELL) uses[terms[i].sym[a]]++;
    }
    if (!output_labels(&out, explicit_out, uses, ell, outl, &n_out)) goto done;
    ts_scope_begin();
    /* repeated labels within an operand: the diagonal */
    for (int i = 0; i < n; i++)
        for (int a = 0; a < ops[i].n; a++)
            for (int b = a + 1; b < ops[i].n; b++)
                if (ops[i].lab[a] == ops[i].lab[b]) {
                    if (!diagonal(&ops[i], a, b, i)) goto fail;
                    a = -1;
                    break;
                }
    int64_t size[MAX_LABELS];
    if (!check_sizes(ops, n, size)) goto fail;
    for (int i = 0; i < n; i++)
        if (!drop_broadcast(&ops[i], size)) goto fail;
    /* need[l]: how many later operands and the output read label l */
    int need[MAX_LABELS] = {0};
    for (int i = 0; i < n_out; i++) need[outl[i]]++;
    for (int i = 1; i < n; i++)
        for (int a = 0; a < ops[i].n; a++) need[ops[i].lab[a]]++;
    lt cur = ops[0];
    if (!sum_unneeded(&cur, need, dt)) goto fail;
    for (int i = 1; i < n; i++) {
        for (int a = 0; a < ops[i].n; a++) need[ops[i].lab[a]]--;
        /* first each side's labels that neither the other side nor anything later reads */
        int keep_a[MAX_LABELS], keep_b[MAX_LABELS];
        for (int l = 0; l < MAX_LABELS; l++) {
            keep_a[l] = need[l] + (find(ops[i].lab, ops[i].n, l) >= 0);
            keep_b[l] = need[l] + (find(cur.lab, cur.n, l) >= 0);
        }
        if (!sum_unneeded(&cur, keep_a, dt) || !sum_unneeded(&ops[i], keep_b, dt) ||
            !contract(&cur, &ops[i], need))
            goto fail;
    }
    /* the output's order; a label every operand dropped as size 1 comes back as a size-1 dim */
    ts_dims p = {.n = 0};
    for (int i = 0; i < n_out; i++) {
        int at = find(cur.lab, cur.n, outl[i]);
        if (at < 0) {
            cur.t = ts_unsqueeze(cur.t, cur.n);
            if (!cur.t) goto fail;
            cur.lab[cur.n] = outl[i];
            at = cur.n++;
        }
        p.d[p.n++] = at;
    }
    result = ts_permute(cur.t, p); /* a view when nothing else was done (PyTorch's too) */
    if (result && ts_error() == TS_OK)
        result = ts_keep(result);
    else
        result = NULL;
fail:
    ts_scope_end();
done:
    free(terms);
    free(ops);
    return result;
}

ts_tensor *ts_einsum(const char *equation, ts_tensor *const *operands, int n) {
    tsi_init();
    if (!check_operands(operands, n)) return NULL;
    return einsum_body(equation, operands, n);
}
