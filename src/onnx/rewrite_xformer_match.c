/* rewrite_xformer_match.c — the transformer rewrites' matchers: the erf GELU, MatMul + Add and
 * Gemm as a linear, the decomposed attention, the head split and the shapes read around it, found
 * in the graph and replaced by fused nodes (rewrite_xformer.c runs them); then the passes in their
 * order. A pattern is taken only where every value inside it has no reader outside it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx/memo.h"
#include "onnx/rewrite_xformer_internal.h"

/* ------------------------------------------------------------------ matching */

/* The node producing v when it is a live node of type op with one output that only one reader
 * reads (a graph output counts as a reader); -1 otherwise. */
static int sole(const matcher *mt, int v, const char *op) {
    if (v < 0) return -1;
    const tso_value *val = &mt->g->values[v];
    if (val->kind != TSO_V_NODE || val->uses != 1 || val->producer < 0) return -1;
    const tso_node *n = &mt->g->nodes[val->producer];
    if (mt->dead[val->producer] || n->n_out != 1 || n->n_sub || strcmp(n->op_type, op)) return -1;
    return val->producer;
}

/* the node producing v when it is of type op, whatever else reads it; -1 otherwise */
static int made_by(const matcher *mt, int v, const char *op) {
    if (v < 0 || mt->g->values[v].kind != TSO_V_NODE || mt->g->values[v].producer < 0) return -1;
    int k = mt->g->values[v].producer;
    return mt->dead[k] || strcmp(mt->g->nodes[k].op_type, op) ? -1 : k;
}

static ts_tensor *const_of(const matcher *mt, int v) {
    if (v < 0 || mt->g->values[v].kind != TSO_V_CONST) return NULL;
    return mt->g->values[v].tensor;
}

/* A constant of one element and a floating dtype: its value, dtype and rank. */
static bool const_scalar(const matcher *mt, int v, double *x, ts_dtype *dt, int *rank) {
    ts_tensor *t = const_of(mt, v);
    if (!t || ts_numel(t) != 1) return false;
    if (dt) *dt = ts_dtype_of(t);
    if (rank) *rank = ts_ndim(t);
    *x = ts_item(t);
    return !ts_error();
}

/* c equals want within the rounding of c's dtype (sqrt(2) written as a float32 is 1.41421354) */
static bool near(double c, double want, ts_dtype dt) {
    const double eps = dt == TS_F64   ? 0x1p-52
                       : dt == TS_F32 ? 0x1p-23
                       : dt == TS_F16 ? 0x1p-10
                                      : 0x1p-7;
    return tsi_is_float(dt) && fabs(c - want) <= eps * fabs(want);
}

/* A floating initializer, directly or through Identity nodes (exporters share equal weights). */
static ts_tensor *param_of(const matcher *mt, int v) {
    for (int hops = 0; v >= 0 && hops < 16; hops++) {
        const tso_value *val = &mt->g->values[v];
        if (val->kind == TSO_V_PARAM)
            return val->tensor && ts_dtype_is_floating(ts_dtype_of(val->tensor)) ? val->tensor
                                                                                 : NULL;
        int k = made_by(mt, v, "Identity");
        if (k < 0 || mt->g->nodes[k].n_in < 1) return NULL;
        v = mt->g->nodes[k].in[0];
    }
    return NULL;
}

/* ---- GELU: x * 0.5 * (1 + erf(x / sqrt 2)), the three factors in any grouping and order */
typedef struct gelu_consts {
    ts_dtype dtype;
    int rank;
    bool ok;
} gelu_consts;

static bool gelu_const(const matcher *mt, int v, double want, gelu_consts *c) {
    double x;
    ts_dtype dt;
    int rank;
    if (!const_scalar(mt, v, &x, &dt, &rank) || !near(x, want, dt)) return false;
    if (c->ok && dt != c->dtype) return false;
    c->dtype = dt;
    c->ok = true;
    if (rank > c->rank) c->rank = rank;
    return true;
}

/* d = x / sqrt 2 (Div) or x * (1 / sqrt 2) (Mul, either order): its node, x into *x */
static int gelu_scaled_x(const matcher *mt, int d, int *x, gelu_consts *c) {
    int div = sole(mt, d, "Div"), mul = sole(mt, d, "Mul");
    gelu_consts t = *c;
    if (div >= 0 && gelu_const(mt, mt->g->nodes[div].in[1], sqrt(2.0), &t)) {
        *x = mt->g->nodes[div].in[0];
        *c = t;
        return div;
    }
    for (int side = 0; mul >= 0 && side < 2; side++) {
        t = *c;
        if (!gelu_const(mt, mt->g->nodes[mul].in[1 - side], sqrt(0.5), &t)) continue;
        *x = mt->g->nodes[mul].in[side];
        *c = t;
        return mul;
    }
    return -1;
}

/* erf(x / sqrt 2) + 1, either order: its nodes into p, x into *x */
static bool gelu_erf_part(const matcher *mt, int v, pattern *p, int *x, gelu_consts *c) {
    int add = sole(mt, v, "Add");
    if (add < 0) return false;
    const tso_node *a = &mt->g->nodes[add];
    for (int side = 0; side < 2; side++) {
        gelu_consts t = *c;
        int erf = sole(mt, a->in[side], "Erf");
        if (erf < 0 || !gelu_const(mt, a->in[1 - side], 1.0, &t)) continue;
        int scaled_x = gelu_scaled_x(mt, mt->g->nodes[erf].in[0], x, &t);
        if (scaled_x < 0) continue;
        tso_xf_take_node(p, add);
        tso_xf_take_node(p, erf);
        tso_xf_take_node(p, scaled_x);
        *c = t;
        return true;
    }
    return false;
}

/* leaves: the three factors; one is 0.5, one the erf part, the third x itself */
static bool gelu_leaves(const matcher *mt, const int *leaf, pattern *p, int *x, gelu_consts *c) {
    for (int h = 0; h < 3; h++)
        for (int e = 0; e < 3; e++) {
            int xi = 3 - h - e;
            if (h == e) continue;
            pattern q = *p;
            gelu_consts cq = *c;
            int xv = -1;
            if (!gelu_const(mt, leaf[h], 0.5, &cq) || !gelu_erf_part(mt, leaf[e], &q, &xv, &cq) ||
                xv != leaf[xi])
                continue;
            *p = q;
            *c = cq;
            *x = xv;
            return true;
        }
    return false;
}

static bool match_gelu(matcher *mt, int k) {
    const tso_node *root = &mt->g->nodes[k];
    if (strcmp(root->op_type, "Mul") || root->n_in != 2 || root->n_out != 1) return true;
    for (int side = 0; side < 2; side++) {
        int inner = sole(mt, root->in[side], "Mul");
        if (inner < 0) continue;
        const tso_node *m = &mt->g->nodes[inner];
        int leaf[3] = {m->in[0], m->in[1], root->in[1 - side]};
        pattern p = {.n = 0};
        tso_xf_take_node(&p, k);
        tso_xf_take_node(&p, inner);
        gelu_consts c = {0};
        int x = -1;
        if (!gelu_leaves(mt, leaf, &p, &x, &c)) continue;
        xf_state *s = tso_xf_state_new(XF_GELU);
        if (!s) return false;
        s->const_dtype = c.dtype;
        s->const_rank = c.rank;
        role roles[] = {{x, &s->x}};
        return tso_xf_fuse(mt->g, mt->dead, &p, s, roles, 1);
    }
    return true;
}

/* ---- linear: MatMul(x, W) + b, Gemm(x, W, b) */
/* W [K, N] an initializer, or Transpose(W [N, K]) of one (Tessera's own exporter): *nk set */
static bool weight_of(const matcher *mt, int v, pattern *p, int *wv, bool *nk) {
    ts_tensor *w = param_of(mt, v);
    if (w && ts_ndim(w) == 2) {
        *wv = v;
        *nk = false;
        return true;
    }
    int t = sole(mt, v, "Transpose");
    if (t < 0) return false;
    const int64_t *perm;
    int np = tso_attr_ints(&mt->g->nodes[t], "perm", &perm);
    w = param_of(mt, mt->g->nodes[t].in[0]);
    if (!w || ts_ndim(w) != 2 || (np >= 0 && (np != 2 || perm[0] != 1 || perm[1] != 0)))
        return false;
    tso_xf_take_node(p, t);
    *wv = mt->g->nodes[t].in[0];
    *nk = true;
    return true;
}

static bool bias_fits(const matcher *mt, int bv, ts_tensor *w, bool nk) {
    ts_tensor *b = param_of(mt, bv);
    return b && ts_ndim(b) == 1 && ts_size(b, 0) == ts_size(w, nk ? 0 : 1) &&
           ts_dtype_of(b) == ts_dtype_of(w);
}

static bool fuse_linear(matcher *mt, pattern *p, int x, int w, int b, bool nk, bool gemm) {
    xf_state *s = tso_xf_state_new(XF_LINEAR);
    if (!s) return false;
    s->w_nk = nk;
    s->gemm = gemm;
    role roles[] = {{x, &s->x}, {w, &s->w}, {b, &s->b}};
    return tso_xf_fuse(mt->g, mt->dead, p, s, roles, 3);
}

static bool match_linear(matcher *mt, int k) {
    const tso_node *root = &mt->g->nodes[k];
    if (!strcmp(root->op_type, "Gemm")) {
        bool nk = tso_attr_int(root, "transB", 0) != 0;
        ts_tensor *w = param_of(mt, root->in[1]);
        if (root->n_in != 3 || tso_attr_int(root, "transA", 0) || !w || ts_ndim(w) != 2 ||
            tso_attr_float(root, "alpha", 1.0f) != 1.0f ||
            tso_attr_float(root, "beta", 1.0f) != 1.0f || !bias_fits(mt, root->in[2], w, nk))
            return true;
        pattern p = {.n = 0};
        tso_xf_take_node(&p, k);
        return fuse_linear(mt, &p, root->in[0], root->in[1], root->in[2], nk, true);
    }
    if (!strcmp(root->op_type, "MatMul") && root->n_in == 2) { /* no bias (a tied LM head) */
        pattern p = {.n = 0};
        tso_xf_take_node(&p, k);
        int wv;
        bool nk;
        if (!weight_of(mt, root->in[1], &p, &wv, &nk)) return true;
        return fuse_linear(mt, &p, root->in[0], wv, -1, nk, false);
    }
    if (strcmp(root->op_type, "Add") || root->n_in != 2) return true;
    for (int side = 0; side < 2; side++) {
        int mm = sole(mt, root->in[side], "MatMul");
        if (mm < 0) continue;
        pattern p = {.n = 0};
        tso_xf_take_node(&p, k);
        tso_xf_take_node(&p, mm);
        int wv;
        bool nk;
        if (!weight_of(mt, mt->g->nodes[mm].in[1], &p, &wv, &nk) ||
            !bias_fits(mt, root->in[1 - side], param_of(mt, wv), nk))
            continue;
        return fuse_linear(mt, &p, mt->g->nodes[mm].in[0], wv, root->in[1 - side], nk, false);
    }
    return true;
}

/* ---- attention */
typedef struct attn_match {
    pattern p;
    int q, sq, kt, sk, ss, mask;
    bool q_div, k_div, s_div;
} attn_match;

static bool shape_only(const matcher *mt, int v) {
    return v >= 0 && (mt->shape[v] & TSO_SHAPE_ONLY);
}

/* v = Mul(data, scale) | Mul(scale, data) | Div(data, scale) with scale a function of the input
 * shapes or a constant (a parameter's value is never read as a number: it may be trained) and
 * data not: the node into p. Otherwise data = v. */
static void scaled(const matcher *mt, int v, pattern *p, int *data, int *scale, bool *div) {
    *data = v;
    *scale = -1;
    *div = false;
    for (int op = 0; op < 2; op++) {
        int k = sole(mt, v, op ? "Div" : "Mul");
        if (k < 0) continue;
        const tso_node *n = &mt->g->nodes[k];
        for (int side = 0; side < (op ? 1 : 2); side++)
            if (n->n_in == 2 && shape_only(mt, n->in[1 - side]) && !shape_only(mt, n->in[side])) {
                tso_xf_take_node(p, k);
                *data = n->in[side];
                *scale = n->in[1 - side];
                *div = op == 1;
                return;
            }
    }
}

/* the scores: MatMul(Q', K^T'), optionally scaled: the nodes into a */
static bool scores(const matcher *mt, int v, attn_match *a) {
    attn_match b = *a;
    int mm_out;
    scaled(mt, v, &b.p, &mm_out, &b.ss, &b.s_div);
    int mm = sole(mt, mm_out, "MatMul");
    if (mm < 0 || mt->g->nodes[mm].n_in != 2) return false;
    tso_xf_take_node(&b.p, mm);
    scaled(mt, mt->g->nodes[mm].in[0], &b.p, &b.q, &b.sq, &b.q_div);
    scaled(mt, mt->g->nodes[mm].in[1], &b.p, &b.kt, &b.sk, &b.k_div);
    *a = b;
    return true;
}

/* An additive constant mask that is 0 where key j <= query i and -inf elsewhere, in every [L, S]
 * block. */
static bool causal_const(ts_tensor *m) {
    if (!m || ts_ndim(m) < 2 || !tsi_is_float(ts_dtype_of(m)) || ts_error()) return false;
    const int64_t L = ts_size(m, -2), S = ts_size(m, -1), n = ts_numel(m);
    double *h = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    ts_scope_begin();
    ts_tensor *d = h ? ts_to_dtype(m, TS_F64) : NULL;
    bool ok = d && ts_copy_to_host(d, h, sizeof(double) * (size_t)n) == TS_OK;
    ts_scope_end();
    for (int64_t e = 0; ok && e < n; e++) {
        int64_t i = e / S % L, j = e % S;
        ok = j <= i ? h[e] == 0 : h[e] == -INFINITY;
    }
    free(h);
    if (ts_error()) ts_error_clear(); /* a mask that cannot be read is not proved causal */
    return ok;
}

/* Where(Equal(Trilu(Expand(c, shape), upper=0), 0), -inf, 0) with c != 0: the mask
 * torch.onnx writes for is_causal; a tril of non-zeros is 0 exactly on and below the diagonal. */
static bool causal_graph(const matcher *mt, int v) {
    double x;
    int wh = made_by(mt, v, "Where");
    if (wh < 0 || mt->g->nodes[wh].n_in != 3) return false;
    const tso_node *w = &mt->g->nodes[wh];
    if (!const_scalar(mt, w->in[1], &x, NULL, NULL) || x != -INFINITY ||
        !const_scalar(mt, w->in[2], &x, NULL, NULL) || x != 0)
        return false;
    int eq = made_by(mt, w->in[0], "Equal");
    if (eq < 0) return false;
    const tso_node *e = &mt->g->nodes[eq];
    for (int side = 0; side < 2; side++) {
        int tr = made_by(mt, e->in[side], "Trilu");
        if (tr < 0 || !const_scalar(mt, e->in[1 - side], &x, NULL, NULL) || x != 0) continue;
        const tso_node *t = &mt->g->nodes[tr];
        if (tso_attr_int(t, "upper", 1) != 0) return false;
        if (t->n_in > 1 && t->in[1] >= 0) {
            ts_tensor *kt = const_of(mt, t->in[1]);
            if (!kt || ts_numel(kt) != 1 || ts_item(kt) != 0) return false;
        }
        int ex = made_by(mt, t->in[0], "Expand");
        return ex >= 0 && const_scalar(mt, mt->g->nodes[ex].in[0], &x, NULL, NULL) && x != 0;
    }
    return false;
}

/* K^T = Transpose(K_source, perm) taken in when nothing else reads it: *rank set */
static void key_source(const matcher *mt, attn_match *a, xf_state *s, int *kv) {
    *kv = a->kt;
    int t = sole(mt, a->kt, "Transpose");
    const int64_t *perm;
    int np = t >= 0 ? tso_attr_ints(&mt->g->nodes[t], "perm", &perm) : -1;
    if (np < 2 || np > TS_MAX_DIMS) return;
    unsigned seen = 0;
    for (int i = 0; i < np; i++) {
        if (perm[i] < 0 || perm[i] >= np || (seen >> perm[i] & 1u)) return;
        seen |= 1u << perm[i];
    }
    tso_xf_take_node(&a->p, t);
    *kv = mt->g->nodes[t].in[0];
    s->k_rank = np;
    memcpy(s->k_perm, perm, sizeof(int64_t) * (size_t)np);
}

static bool fuse_attention(matcher *mt, attn_match *a, int v, int axis) {
    xf_state *s = tso_xf_state_new(XF_ATTN);
    if (!s) return false;
    int kv;
    key_source(mt, a, s, &kv);
    s->q_div = a->q_div, s->k_div = a->k_div, s->s_div = a->s_div;
    s->axis = axis;
    s->causal = a->mask >= 0 && (causal_const(const_of(mt, a->mask)) || causal_graph(mt, a->mask));
    role roles[] = {{a->q, &s->q},   {kv, &s->k},     {v, &s->v},         {a->sq, &s->sq},
                    {a->sk, &s->sk}, {a->ss, &s->ss}, {a->mask, &s->mask}};
    return tso_xf_fuse(mt->g, mt->dead, &a->p, s, roles, 7);
}

static bool match_attention(matcher *mt, int k) {
    const tso_node *root = &mt->g->nodes[k];
    if (strcmp(root->op_type, "MatMul") || root->n_in != 2) return true;
    int sm = sole(mt, root->in[0], "Softmax");
    if (sm < 0) return true;
    const tso_node *smn = &mt->g->nodes[sm];
    /* before opset 13 the default axis is 1 (and the input is seen as a matrix: the same as the
     * last dim only when axis is the last dim, which the fast path checks) */
    const int axis = (int)tso_attr_int(smn, "axis", smn->opset < 13 ? 1 : -1);
    attn_match a = {.mask = -1};
    tso_xf_take_node(&a.p, k);
    tso_xf_take_node(&a.p, sm);
    int add = sole(mt, smn->in[0], "Add");
    bool found = false;
    for (int side = 0; add >= 0 && side < 2 && !found; side++) {
        attn_match b = a;
        tso_xf_take_node(&b.p, add);
        b.mask = mt->g->nodes[add].in[1 - side];
        if (scores(mt, mt->g->nodes[add].in[side], &b)) a = b, found = true;
    }
    if (!found && !scores(mt, smn->in[0], &a)) return true;
    return fuse_attention(mt, &a, root->in[1], axis);
}

/* ---- the head split */
/* Gather(x, i) with i a constant integer scalar and x computed from data (the shape arithmetic
 * is the memo's) */
static bool match_select(matcher *mt, int k) {
    const tso_node *n = &mt->g->nodes[k];
    ts_tensor *i = n->n_in == 2 ? const_of(mt, n->in[1]) : NULL;
    if (strcmp(n->op_type, "Gather") || n->n_out != 1 || !i || ts_ndim(i) != 0 ||
        (ts_dtype_of(i) != TS_I64 && ts_dtype_of(i) != TS_I32) || shape_only(mt, n->in[0]))
        return true;
    xf_state *s = tso_xf_state_new(XF_SELECT);
    if (!s) return false;
    s->index = (int64_t)ts_item(i);
    s->axis = (int)tso_attr_int(n, "axis", 0);
    pattern p = {.n = 0};
    tso_xf_take_node(&p, k);
    role roles[] = {{n->in[0], &s->x}};
    return tso_xf_fuse(mt->g, mt->dead, &p, s, roles, 1);
}

/* Reshape(Transpose(Reshape(g, t1), perm [1, 0, 2]), t2) */
static bool match_heads(matcher *mt, int k) {
    const tso_node *r2 = &mt->g->nodes[k];
    if (strcmp(r2->op_type, "Reshape") || r2->n_in != 2) return true;
    int tr = sole(mt, r2->in[0], "Transpose");
    const int64_t *perm;
    if (tr < 0 || tso_attr_ints(&mt->g->nodes[tr], "perm", &perm) != 3 || perm[0] != 1 ||
        perm[1] != 0 || perm[2] != 2)
        return true;
    int r1 = sole(mt, mt->g->nodes[tr].in[0], "Reshape");
    if (r1 < 0 || mt->g->nodes[r1].n_in != 2) return true;
    xf_state *s = tso_xf_state_new(XF_HEADS);
    if (!s) return false;
    pattern p = {.n = 0};
    tso_xf_take_node(&p, k);
    tso_xf_take_node(&p, tr);
    tso_xf_take_node(&p, r1);
    const tso_node *first = &mt->g->nodes[r1];
    role roles[] = {{first->in[0], &s->x}, {first->in[1], &s->sq}, {r2->in[1], &s->sk}};
    return tso_xf_fuse(mt->g, mt->dead, &p, s, roles, 3);
}

/* A copy of node n (no sub-graph, no state) for a fused node's steps; false on OOM. */
static bool node_copy(tso_node *dst, const tso_node *n) {
    *dst = *n;
    dst->label = tsi_strdup(n->label);
    dst->in = malloc(sizeof(int) * (size_t)(n->n_in + n->n_out + 1));
    if (!dst->label || !dst->in) {
        free(dst->label);
        free(dst->in);
        *dst = (tso_node){0};
        return false;
    }
    memcpy(dst->in, n->in, sizeof(int) * (size_t)(n->n_in + n->n_out));
    dst->out = dst->in + n->n_in;
    return true;
}

/* How many live nodes other than Shapes read value v (*reader: one of them); -1 when a graph
 * output or a sub-graph reads it, or a node reads it twice. */
static int readers_but_shapes(const matcher *mt, int v, int *reader) {
    const tso_graph *g = mt->g;
    if (g->values[v].pinned) return -1;
    for (int i = 0; i < g->n_outputs; i++)
        if (g->outputs[i] == v) return -1;
    int count = 0;
    for (int k = 0; k < g->n_nodes; k++) {
        const tso_node *n = &g->nodes[k];
        int reads = 0;
        for (int i = 0; !mt->dead[k] && i < n->n_in; i++) reads += n->in[i] == v;
        if (reads > 1) return -1;
        if (reads && !(tso_is_op(n, "Shape") && n->n_in == 1)) count++, *reader = k;
    }
    return count;
}

/* Shape(T), T = Transpose(Reshape(g, t1), [1, 0, 2]) read otherwise by one Reshape only (the head
 * split's second): the Shape becomes a node reading g and t1 that computes the shape from them
 * (or runs copies of the Reshape and the Transpose, then the Shape, where it cannot), so that the
 * head split's pass finds T with one reader. */
static bool match_head_shape(matcher *mt, int k) {
    const tso_node *sh = &mt->g->nodes[k];
    if (strcmp(sh->op_type, "Shape") || sh->n_in != 1 || sh->n_out != 1 || sh->state) return true;
    int tr = made_by(mt, sh->in[0], "Transpose"), reader = -1;
    const int64_t *perm;
    if (tr < 0 || mt->g->nodes[tr].n_out != 1 || mt->g->nodes[tr].state || mt->g->nodes[tr].n_sub ||
        tso_attr_ints(&mt->g->nodes[tr], "perm", &perm) != 3 || perm[0] != 1 || perm[1] != 0 ||
        perm[2] != 2 || readers_but_shapes(mt, sh->in[0], &reader) != 1 ||
        !tso_is_op(&mt->g->nodes[reader], "Reshape"))
        return true;
    const int r1 = sole(mt, mt->g->nodes[tr].in[0], "Reshape");
    if (r1 < 0 || mt->g->nodes[r1].n_in != 2 || mt->g->nodes[r1].in[1] < 0 ||
        mt->g->nodes[r1].state)
        return true;
    xf_state *s = tso_xf_state_new(XF_HEAD_SHAPE);
    if (!s) return false;
    int *io = malloc(sizeof(int) * 3);
    char *lab = tso_xf_label(sh->label, XF_HEAD_SHAPE);
    bool ok = io && lab && node_copy(&s->steps[0], &mt->g->nodes[r1]);
    if (ok) s->n_steps = 1, ok = node_copy(&s->steps[1], &mt->g->nodes[tr]);
    if (!ok) {
        free(io);
        free(lab);
        tso_xf_free(s);
        return tsi_error_set(TS_ERR_OOM, "onnx_load: out of host memory (rewrites)"), false;
    }
    io[0] = mt->g->nodes[r1].in[0]; /* g */
    io[1] = mt->g->nodes[r1].in[1]; /* t1 */
    io[2] = sh->out[0];
    s->x = 0;
    s->sq = 1;
    s->n_steps = 3;
    s->steps[2] = *sh; /* the step owns the Shape's label and value list now */
    mt->g->nodes[k] = tso_xf_node(s, lab, io, 2);
    return true;
}

/* Reshape(tessera.Linear(Reshape(x, t1)), t2): the flattened linear (after the linear pass) */
static bool match_flat_linear(matcher *mt, int k) {
    const tso_node *r2 = &mt->g->nodes[k];
    if (strcmp(r2->op_type, "Reshape") || r2->n_in != 2) return true;
    const int li = sole(mt, r2->in[0], "tessera.Linear");
    const tso_node *ln = li >= 0 ? &mt->g->nodes[li] : NULL;
    const xf_state *ls = ln ? ln->state : NULL;
    const int r1 = ls && ls->x >= 0 ? sole(mt, ln->in[ls->x], "Reshape") : -1;
    if (r1 < 0 || mt->g->nodes[r1].n_in != 2) return true;
    xf_state *s = tso_xf_state_new(XF_FLAT_LINEAR);
    if (!s) return false;
    s->w_nk = ls->w_nk;
    pattern p = {.n = 0};
    tso_xf_take_node(&p, k);
    tso_xf_take_node(&p, li);
    tso_xf_take_node(&p, r1);
    const tso_node *first = &mt->g->nodes[r1];
    role roles[] = {{first->in[0], &s->x},
                    {first->in[1], &s->sq},
                    {r2->in[1], &s->sk},
                    {ln->in[ls->w], &s->w},
                    {ls->b >= 0 ? ln->in[ls->b] : -1, &s->b}};
    return tso_xf_fuse(mt->g, mt->dead, &p, s, roles, 5);
}

/* Shape(Y), Y = tessera.Linear(Reshape(x, t1)) read otherwise by one Reshape only (the flattened
 * linear's second): the Shape becomes a node reading x, t1 and the linear's other inputs that
 * computes [rows, N] from them (or runs copies of the Reshape, the linear's nodes and the Shape,
 * where it cannot), so that the flattened linear's pass finds Y with one reader. */
static bool match_lin_shape(matcher *mt, int k) {
    const tso_node *sh = &mt->g->nodes[k];
    if (strcmp(sh->op_type, "Shape") || sh->n_in != 1 || sh->n_out != 1 || sh->state) return true;
    const int li = made_by(mt, sh->in[0], "tessera.Linear");
    int reader = -1;
    if (li < 0 || readers_but_shapes(mt, sh->in[0], &reader) != 1 ||
        !tso_is_op(&mt->g->nodes[reader], "Reshape"))
        return true;
    const tso_node *ln = &mt->g->nodes[li];
    const xf_state *ls = ln->state;
    const int r1 = ls->x >= 0 ? sole(mt, ln->in[ls->x], "Reshape") : -1;
    if (r1 < 0 || mt->g->nodes[r1].n_in != 2 || mt->g->nodes[r1].in[1] < 0 ||
        mt->g->nodes[r1].state || ls->n_steps + 2 > XF_MAX_NODES)
        return true;
    for (int i = 0; i < ls->n_steps; i++)
        if (ls->steps[i].state || ls->steps[i].n_sub) return true;
    xf_state *s = tso_xf_state_new(XF_LIN_SHAPE);
    if (!s) return false;
    int *io = malloc(sizeof(int) * (XF_MAX_IO + 1)), n_in = 0;
    char *lab = tso_xf_label(sh->label, XF_LIN_SHAPE);
    bool ok = io && lab && node_copy(&s->steps[0], &mt->g->nodes[r1]);
    if (ok) s->n_steps = 1;
    for (int i = 0; ok && i < ls->n_steps; i++)
        if ((ok = node_copy(&s->steps[i + 1], &ls->steps[i]))) s->n_steps = i + 2;
    /* the values the steps read from outside them, in order of first reading */
    bool fits = true;
    for (int i = 0; ok && i < s->n_steps; i++)
        for (int j = 0; j < s->steps[i].n_in; j++) {
            const int v = s->steps[i].in[j];
            bool known = v < 0;
            for (int e = 0; !known && e < i; e++) known = s->steps[e].out[0] == v;
            for (int e = 0; !known && e < n_in; e++) known = io[e] == v;
            if (known) continue;
            if (n_in == XF_MAX_IO)
                fits = false;
            else
                io[n_in++] = v;
        }
    if (!ok || !fits) {
        free(io);
        free(lab);
        tso_xf_free(s);
        if (!ok) tsi_error_set(TS_ERR_OOM, "onnx_load: out of host memory (rewrites)");
        return ok; /* !fits: too many inputs, left as it is */
    }
    s->x = tso_xf_position(io, n_in, mt->g->nodes[r1].in[0]);
    s->sq = tso_xf_position(io, n_in, mt->g->nodes[r1].in[1]);
    s->w = tso_xf_position(io, n_in, ln->in[ls->w]);
    s->w_nk = ls->w_nk;
    io[n_in] = sh->out[0];
    s->steps[s->n_steps++] = *sh; /* the step owns the Shape's label and value list now */
    mt->g->nodes[k] = tso_xf_node(s, lab, io, n_in);
    return true;
}

/* ------------------------------------------------------------------ the passes */
typedef bool (*match_fn)(matcher *mt, int k);

/* One rewrite over the graph, its replaced nodes dropped after. */
static bool pass(tso_graph *g, unsigned char *shape, match_fn match) {
    bool *dead = calloc((size_t)g->n_nodes + 1, sizeof *dead);
    if (!dead) return tsi_error_set(TS_ERR_OOM, "onnx_load: out of host memory (rewrites)"), false;
    matcher mt = {.g = g, .dead = dead, .shape = shape};
    bool ok = true;
    for (int k = g->n_nodes - 1; ok && k >= 0; k--)
        if (!dead[k]) ok = match(&mt, k);
    tso_graph_drop_dead(g, dead);
    free(dead);
    return ok;
}

bool tso_rewrite_xformer(tso_model *m) {
    tso_graph *g = m->graph;
    unsigned char *shape = tso_shape_values(g);
    if (!shape) return false;
    bool ok = pass(g, shape, match_select) && pass(g, shape, match_head_shape) &&
              pass(g, shape, match_heads) && pass(g, shape, match_attention) &&
              pass(g, shape, match_gelu) && pass(g, shape, match_linear) &&
              pass(g, shape, match_lin_shape) && pass(g, shape, match_flat_linear);
    free(shape);
    return ok;
}
