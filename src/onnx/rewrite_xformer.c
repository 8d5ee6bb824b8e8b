/* rewrite_xformer.c — the transformer rewrites of ts_onnx_opts.optimize: the erf GELU exporters
 * write as five ops becomes one ts_gelu; MatMul + Add (and Gemm) with an initializer weight and
 * bias becomes one linear; the decomposed attention (MatMul, scalings, an additive mask, Softmax,
 * MatMul) becomes one ts_scaled_dot_product_attention, causal where the mask provably is; the
 * head split (a Gather of the packed q, k, v; Reshape, Transpose, Reshape) becomes views. A rewrite
 * happens only where every value inside the pattern has no reader outside it. Each fused node keeps
 * the nodes it replaced and runs them as they were whenever its fast path does not apply to what a
 * run brings (a dtype, a rank, a broadcast, a scale that is not one number), so the rewrites change
 * results by float rounding only. They run Tessera's differentiable ops: an optimized model still
 * trains, its weights being the module's parameters. This file: the fused nodes' fast paths and the
 * making of a fused node from a pattern; the matchers and the passes: rewrite_xformer_match.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "onnx/memo.h"
#include "onnx/onnx_internal.h"
#include "onnx/rewrite_xformer_internal.h"

void tso_xf_free(void *p) {
    xf_state *s = p;
    if (!s) return;
    for (int i = 0; i < s->n_steps; i++) tso_node_free(&s->steps[i]);
    free(s);
}

/* ------------------------------------------------------------------ the replay */
/* The value v among the fused node's inputs and the steps' results so far. */
static ts_tensor *lookup(const int *ids, ts_tensor *const *ts, int n, int v) {
    for (int i = 0; i < n; i++)
        if (ids[i] == v) return ts[i];
    return NULL;
}

/* Runs the replaced nodes as they were: the fast path's fallback. */
static bool replay(tso_ctx *c, const tso_node *n, ts_tensor *const *in, ts_tensor **out) {
    const xf_state *s = n->state;
    int ids[XF_MAX_IO + XF_MAX_NODES];
    ts_tensor *ts[XF_MAX_IO + XF_MAX_NODES];
    int count = 0;
    for (int i = 0; i < n->n_in; i++) ids[count] = n->in[i], ts[count++] = in[i];
    for (int k = 0; k < s->n_steps; k++) {
        const tso_node *st = &s->steps[k];
        ts_tensor *sin[XF_MAX_IO] = {0}, *sout[XF_MAX_IO] = {0};
        for (int i = 0; i < st->n_in; i++)
            sin[i] = st->in[i] >= 0 ? lookup(ids, ts, count, st->in[i]) : NULL;
        if (!st->def->run(c, st, sin, sout)) return tso_fail_pending(st);
        ids[count] = st->out[0], ts[count++] = sout[0];
    }
    out[0] = ts[count - 1];
    return true;
}

/* ------------------------------------------------------------------ GELU */
static ts_tensor *gelu_fast(const xf_state *s, ts_tensor *const *in) {
    ts_tensor *x = in[s->x];
    if (ts_dtype_of(x) != s->const_dtype || !tsi_is_float(ts_dtype_of(x)) ||
        ts_ndim(x) < s->const_rank)
        return NULL;
    return ts_gelu(x);
}

/* ------------------------------------------------------------------ linear */
static bool shape_is(ts_tensor *t, int ndim, int64_t d0, int64_t d1) {
    return t && ts_ndim(t) == ndim && ts_size(t, 0) == d0 && (ndim < 2 || ts_size(t, 1) == d1);
}

/* The weight as ts_linear wants it, [N, K]. A [K, N] weight goes as its transposed view
 * (ts_linear then multiplies by W itself, an NN product) unless, on the cpu (or sim), a float32
 * product of 1024 rows or more with K <= N would leave oneDNN's matmul primitive for the
 * provider's NN GEMM while its NT form stays with the primitive (the backend's
 * hint_weight_transposed, gemm_provider.c: an AVX2 host,
 * where OpenBLAS runs the NN products): there it is copied transposed, so the GEMM reads it
 * transposed. Measured on two Zen 3 cores (AVX2) for GPT-mini's products of 4096 rows, copy
 * included: K 256, N 768: 11.1 ms against 12.2; N 1024: 15.1 against 18.8; but K 1024, N 256:
 * 19.0 against 17.2, so a long K keeps W. Where the primitive takes both forms (AVX-512) they
 * run alike and the copy, made on every run, is a loss (bench/results/onnx-blocked.md). (cuBLAS
 * takes either form.) The copy is recorded by autograd and traces like any op: the gradient
 * reaches the parameter. */
static bool weight_copy_pays(ts_tensor *w, int64_t rows, int64_t k, int64_t n) {
    const ts_backend *be = tsi_backend_for(ts_device_of(w).type);
    return rows >= 1024 && k <= n && ts_dtype_of(w) == TS_F32 && be && be->hint_weight_transposed &&
           be->hint_weight_transposed(be, rows, k, n);
}

static ts_tensor *weight_nk(const xf_state *s, ts_tensor *x, ts_tensor *w) {
    if (s->w_nk) return w;
    const int64_t k = ts_size(x, -1), rows = k > 0 ? ts_numel(x) / k : 0;
    return weight_copy_pays(w, rows, k, ts_size(w, 1)) ? ts_contiguous(ts_t(w)) : ts_t(w);
}

/* x viewed with its leading dims in memory order (x itself when they are, or when no order makes
 * it contiguous); *perm gets the order. The exporters feed attention's projections a transposed
 * view ([L, B, E] of a [B, L, E] tensor): row-wise, the product runs on the rows where they lie
 * and its result is viewed back, instead of copying x first. */
static ts_tensor *rows_in_memory(ts_tensor *x, ts_dims *perm) {
    const int r = ts_ndim(x);
    perm->n = r;
    for (int i = 0; i < r; i++) perm->d[i] = i;
    if (ts_is_contiguous(x) || ts_stride(x, -1) != 1) return x;
    for (int i = 1; i < r - 1; i++) /* insertion sort of the leading dims, widest stride first */
        for (int j = i; j > 0 && ts_stride(x, perm->d[j]) > ts_stride(x, perm->d[j - 1]); j--) {
            int t = perm->d[j];
            perm->d[j] = perm->d[j - 1];
            perm->d[j - 1] = t;
        }
    ts_tensor *p = ts_permute(x, *perm);
    if (p && ts_is_contiguous(p)) return p;
    for (int i = 0; i < r; i++) perm->d[i] = i;
    return x;
}

/* x @ W + b over x's rows where they lie; NULL when the dtypes or shapes do not fit */
static ts_tensor *linear_rows(const xf_state *s, ts_tensor *x, ts_tensor *w, ts_tensor *b) {
    ts_dtype dt = ts_dtype_of(x);
    if (!tsi_is_float(dt) || ts_dtype_of(w) != dt || (b && ts_dtype_of(b) != dt) ||
        ts_ndim(x) < 2 || ts_ndim(w) != 2)
        return NULL;
    const int64_t k = ts_size(x, -1), n = ts_size(w, s->w_nk ? 0 : 1);
    if (!shape_is(w, 2, s->w_nk ? n : k, s->w_nk ? k : n) || (b && !shape_is(b, 1, n, 0)))
        return NULL;
    ts_dims perm, back = {.n = ts_ndim(x)};
    ts_tensor *xm = rows_in_memory(x, &perm), *wt = weight_nk(s, x, w);
    ts_tensor *y = xm && wt ? ts_linear(xm, wt, b) : NULL;
    if (!y || xm == x) return y;
    for (int i = 0; i < perm.n; i++) back.d[perm.d[i]] = i;
    return ts_permute(y, back);
}

static ts_tensor *linear_fast(const xf_state *s, ts_tensor *const *in) {
    ts_tensor *x = in[s->x];
    if (s->gemm && ts_ndim(x) != 2) return NULL;
    return linear_rows(s, x, in[s->w], s->b >= 0 ? in[s->b] : NULL);
}

/* ------------------------------------------------------------------ attention */
/* The number a scale tensor holds, when it is one number of dtype dt that broadcasts into a
 * tensor of rank `rank` without changing its shape; NAN otherwise. */
static double scale_of(const tso_node *n, ts_tensor *t, ts_dtype dt, int rank, bool div) {
    if (!t) return 1.0;
    if (ts_numel(t) != 1 || ts_dtype_of(t) != dt || ts_ndim(t) > rank) return NAN;
    double v;
    if (!tso_read_scalar(n, t, &v, "attention scale")) return NAN;
    return div ? 1.0 / v : v;
}

/* K from what the node reads: a permutation of K's source (the Transpose it took in, followed by
 * the swap of the last two dims) or K^T transposed back. NULL when the ranks do not fit. */
static ts_tensor *key_of(const xf_state *s, ts_tensor *src) {
    const int r = ts_ndim(src);
    if (!s->k_rank) return r >= 2 ? ts_transpose(src, -2, -1) : NULL;
    if (r != s->k_rank || r < 2) return NULL;
    ts_dims p = {.n = r};
    for (int i = 0; i < r; i++) p.d[i] = (int)s->k_perm[i];
    p.d[r - 2] = (int)s->k_perm[r - 1];
    p.d[r - 1] = (int)s->k_perm[r - 2];
    return ts_permute(src, p);
}

/* The scores' shape [batch.., L, S] from q [.., L, E] and k [.., S, E]; false when the batch
 * dims do not broadcast. */
static bool scores_shape(ts_tensor *q, ts_tensor *k, ts_shape *out) {
    ts_shape a = ts_shape_of(q), b = ts_shape_of(k);
    int n = a.ndim > b.ndim ? a.ndim : b.ndim;
    out->ndim = n;
    for (int i = 0; i < n - 2; i++) {
        int ia = i - (n - a.ndim), ib = i - (n - b.ndim);
        int64_t da = ia >= 0 ? a.dims[ia] : 1, db = ib >= 0 ? b.dims[ib] : 1;
        if (da != db && da != 1 && db != 1) return false;
        out->dims[i] = da == 1 ? db : da;
    }
    out->dims[n - 2] = a.dims[a.ndim - 2];
    out->dims[n - 1] = b.dims[b.ndim - 2];
    return true;
}

/* Whether adding mask to scores of shape s leaves that shape (the mask broadcasts into it). */
static bool fits(ts_tensor *mask, ts_shape s) {
    ts_shape m = ts_shape_of(mask);
    if (m.ndim > s.ndim) return false;
    for (int i = 0; i < m.ndim; i++) {
        int64_t d = m.dims[i], want = s.dims[s.ndim - m.ndim + i];
        if (d != 1 && d != want) return false;
    }
    return true;
}

/* Softmax runs along the scores' last dim (before opset 13 it runs along the rows of the matrix
 * [prod(dims[:axis]), prod(dims[axis:])], the same when axis is the last dim). */
static bool softmax_last(const xf_state *s, int rank) {
    int axis = s->axis < 0 ? s->axis + rank : s->axis;
    return axis == rank - 1;
}

/* k itself, or a copy when the device's backend says its rows lie too evenly apart
 * (the cpu's hint_keys_copy, the attention selector's tsi_sdpa_keys_copy: a multiple of 4 KiB,
 * where the fused kernel's gathers of a key block fall in one cache set; the exporters' head split,
 * left as the file has it, leaves GPT-mini's rows 16 KiB apart: rewritten, they lie 3 KiB apart). Q
 * and V are read row by row: no cost. */
static ts_tensor *keys_apart(ts_tensor *k) {
    const int64_t row = ts_stride(k, -2) * (int64_t)tsi_dtype_size(ts_dtype_of(k));
    const ts_backend *be = tsi_backend_for(ts_device_of(k).type);
    return be && be->hint_keys_copy && be->hint_keys_copy(be, ts_size(k, -2), row)
               ? ts_contiguous(k)
               : k;
}

static ts_tensor *attn_fast(const tso_node *n, const xf_state *s, ts_tensor *const *in) {
    ts_tensor *q = in[s->q], *v = in[s->v], *mask = s->mask >= 0 ? in[s->mask] : NULL;
    ts_dtype dt = ts_dtype_of(q);
    if (!tsi_is_float(dt) || ts_dtype_of(in[s->k]) != dt || ts_dtype_of(v) != dt ||
        ts_ndim(q) < 2 || ts_ndim(v) < 2 || (mask && ts_dtype_of(mask) != dt))
        return NULL;
    ts_tensor *k = key_of(s, in[s->k]);
    ts_shape sc;
    if (!k || ts_size(q, -1) != ts_size(k, -1) || ts_size(k, -2) != ts_size(v, -2) ||
        !scores_shape(q, k, &sc) || !softmax_last(s, sc.ndim) || (mask && !fits(mask, sc)))
        return NULL;
    double scale = scale_of(n, s->sq >= 0 ? in[s->sq] : NULL, dt, ts_ndim(q), s->q_div) *
                   scale_of(n, s->sk >= 0 ? in[s->sk] : NULL, dt, ts_ndim(k), s->k_div) *
                   scale_of(n, s->ss >= 0 ? in[s->ss] : NULL, dt, sc.ndim, s->s_div);
    if (ts_error() || !(scale > 0) || isinf(scale)) return NULL;
    /* a mask proved causal at load is exactly the causal mask when it spans [L, S] */
    bool causal = mask && s->causal && ts_ndim(mask) >= 2 &&
                  ts_size(mask, -2) == sc.dims[sc.ndim - 2] &&
                  ts_size(mask, -1) == sc.dims[sc.ndim - 1];
    return ts_scaled_dot_product_attention(q, keys_apart(k), v, causal ? NULL : mask, 0.0, causal,
                                           scale);
}

/* ------------------------------------------------------------------ the head split */
/* Gather with one index is a select: a view where ONNX's Gather copies (the exporters split the
 * packed q, k, v projection so). */
static ts_tensor *select_fast(const xf_state *s, ts_tensor *const *in) {
    ts_tensor *x = in[s->x];
    const int r = ts_ndim(x), axis = s->axis < 0 ? s->axis + r : s->axis;
    if (axis < 0 || axis >= r) return NULL;
    const int64_t dim = ts_size(x, axis), i = s->index < 0 ? s->index + dim : s->index;
    return i >= 0 && i < dim ? ts_select(x, axis, i) : NULL;
}

/* ONNX Reshape's target (allowzero 0: a 0 copies the input's dim, one -1 is inferred) for an
 * input of shape in; false when it is not a valid target. */
static bool reshape_target(const tso_node *n, ts_tensor *target, ts_shape in, ts_shape *out) {
    int64_t t[TS_MAX_DIMS], known = 1, total = 1;
    int count = tso_read_ints(n, target, t, TS_MAX_DIMS, "shape"), infer = -1;
    if (count < 0) return false;
    for (int d = 0; d < in.ndim; d++) total *= in.dims[d];
    out->ndim = count;
    for (int d = 0; d < count; d++) {
        if (t[d] == 0 && d < in.ndim) t[d] = in.dims[d];
        if (t[d] == -1 && infer < 0)
            infer = d;
        else if (t[d] < 0)
            return false;
        else
            known *= t[d];
        out->dims[d] = t[d];
    }
    if (infer >= 0) out->dims[infer] = known > 0 ? total / known : -1;
    return infer >= 0 ? known > 0 && total % known == 0 : known == total;
}

/* The head split: g [L, B, D] reshaped to [L, B*H, E], transposed to [B*H, L, E] and reshaped to
 * [B, H, L, E] is g viewed as [L, B, H, E] and permuted, with no copy: the exporters' form
 * copies twice (the merged B*H dim is not a view of g), and leaves the heads' rows B*H*E apart,
 * where the fused attention's key gathers fall in one cache set. */
static ts_tensor *heads_fast(const tso_node *n, const xf_state *s, ts_tensor *const *in) {
    ts_tensor *g = in[s->x];
    if (ts_ndim(g) != 3 || tso_attr_int(&s->steps[0], "allowzero", 0) ||
        tso_attr_int(&s->steps[2], "allowzero", 0))
        return NULL;
    const int64_t L = ts_size(g, 0), B = ts_size(g, 1), D = ts_size(g, 2);
    ts_shape t1, t2;
    if (!reshape_target(n, in[s->sq], ts_shape_of(g), &t1) || t1.ndim != 3 || t1.dims[0] != L ||
        t1.dims[2] < 1 || D % t1.dims[2] || t1.dims[1] != B * (D / t1.dims[2]))
        return NULL;
    const int64_t E = t1.dims[2], H = D / E;
    if (!reshape_target(n, in[s->sk], TS_SHAPE(B * H, L, E), &t2) || t2.ndim != 4 ||
        t2.dims[0] != B || t2.dims[1] != H || t2.dims[2] != L || t2.dims[3] != E)
        return NULL;
    ts_tensor *v = ts_view(g, TS_SHAPE(L, B, H, E));
    return v ? ts_permute(v, (ts_dims){4, {1, 2, 0, 3}}) : NULL;
}

/* The head split's shape as the exporters read it (the keys' length, from the transposed keys):
 * Shape(Transpose(Reshape(g, t1), [1, 0, 2])) from g's shape and t1's values, no data touched.
 * Read from the Transpose, that Shape kept the keys' head split from being rewritten, which cost
 * two copies of the keys a layer (the Reshape's, and the attention's of rows 16 KiB apart). */
static ts_tensor *head_shape_fast(const tso_node *n, const xf_state *s, ts_tensor *const *in) {
    ts_tensor *g = in[s->x];
    const tso_node *sh = &s->steps[2];
    ts_shape t1;
    if (ts_ndim(g) != 3 || tso_attr_int(&s->steps[0], "allowzero", 0) || tso_attr(sh, "start") ||
        tso_attr(sh, "end") || !reshape_target(n, in[s->sq], ts_shape_of(g), &t1) || t1.ndim != 3)
        return NULL;
    const int64_t d[3] = {t1.dims[1], t1.dims[0], t1.dims[2]};
    return ts_from_data(TS_SHAPE(3), TS_I64, d, tso_opts_of(g, TS_I64));
}

/* The flattened linear: Reshape(Linear(Reshape(x, t1), W, b), t2) with t1 flattening x to
 * [rows, K] and t2 giving the rows x's leading dims back is the linear of x viewed with those
 * dims, run on its rows where they lie. The exporters' Gemm of attention's output reads
 * [L, B, H, E] (the fused attention's [B, L, H, E] transposed) as [L * B, H * E], a copy, and
 * hands back [L, B, N], whose [B, L, N] transpose the residual Add then read strided; here x is
 * a view and the result's transpose is contiguous. */
static ts_tensor *flat_linear_fast(const tso_node *n, const xf_state *s, ts_tensor *const *in) {
    ts_tensor *x = in[s->x], *w = in[s->w];
    const ts_shape xs = ts_shape_of(x);
    ts_shape t1, t2;
    if (ts_ndim(w) != 2 || tso_attr_int(&s->steps[0], "allowzero", 0) ||
        tso_attr_int(&s->steps[s->n_steps - 1], "allowzero", 0) ||
        !reshape_target(n, in[s->sq], xs, &t1) || t1.ndim != 2)
        return NULL;
    const int64_t nn = ts_size(w, s->w_nk ? 0 : 1);
    if (!reshape_target(n, in[s->sk], TS_SHAPE(t1.dims[0], nn), &t2) || t2.ndim < 2 ||
        t2.ndim > xs.ndim || t2.dims[t2.ndim - 1] != nn)
        return NULL;
    const int m = t2.ndim - 1;
    ts_shape v = {.ndim = m + 1};
    int64_t k = 1;
    for (int d = 0; d < xs.ndim; d++) {
        if (d < m && xs.dims[d] != t2.dims[d]) return NULL;
        if (d < m)
            v.dims[d] = xs.dims[d];
        else
            k *= xs.dims[d];
    }
    if (k != t1.dims[1]) return NULL;
    v.dims[m] = k;
    ts_tensor *xv = ts_reshape(x, v);
    return xv ? linear_rows(s, xv, w, s->b >= 0 ? in[s->b] : NULL) : NULL;
}

/* LIN_SHAPE: Shape(Linear(Reshape(in[x], in[sq]))) as torch.onnx reads it from a flattened Gemm
 * (its output's width) to unflatten the result: [rows, N] from x's shape, the target and the
 * weight's shape, no data touched. Read from the linear, that Shape kept the flattened linear
 * from being rewritten. */
static ts_tensor *lin_shape_fast(const tso_node *n, const xf_state *s, ts_tensor *const *in) {
    ts_tensor *x = in[s->x], *w = in[s->w];
    const tso_node *sh = &s->steps[s->n_steps - 1];
    ts_shape t1;
    if (ts_ndim(w) != 2 || tso_attr_int(&s->steps[0], "allowzero", 0) || tso_attr(sh, "start") ||
        tso_attr(sh, "end") || !reshape_target(n, in[s->sq], ts_shape_of(x), &t1) || t1.ndim != 2 ||
        ts_size(w, s->w_nk ? 1 : 0) != t1.dims[1])
        return NULL;
    const int64_t d[2] = {t1.dims[0], ts_size(w, s->w_nk ? 0 : 1)};
    return ts_from_data(TS_SHAPE(2), TS_I64, d, tso_opts_of(x, TS_I64));
}

/* ------------------------------------------------------------------ the fused operator */
static bool run_fused(tso_ctx *c, const tso_node *n, ts_tensor *const *in, ts_tensor **out) {
    const xf_state *s = n->state;
    ts_tensor *y = s->kind == XF_GELU          ? gelu_fast(s, in)
                   : s->kind == XF_LINEAR      ? linear_fast(s, in)
                   : s->kind == XF_ATTN        ? attn_fast(n, s, in)
                   : s->kind == XF_SELECT      ? select_fast(s, in)
                   : s->kind == XF_HEADS       ? heads_fast(n, s, in)
                   : s->kind == XF_HEAD_SHAPE  ? head_shape_fast(n, s, in)
                   : s->kind == XF_FLAT_LINEAR ? flat_linear_fast(n, s, in)
                                               : lin_shape_fast(n, s, in);
    if (ts_error()) return tso_fail_pending(n);
    if (!y) return replay(c, n, in, out); /* the fast path does not apply: run the originals */
    out[0] = y;
    return true;
}

const tso_op_def tso_xf_defs[] = {
    [XF_GELU] = {"tessera.Gelu", 1, run_fused, NULL, false},
    [XF_LINEAR] = {"tessera.Linear", 1, run_fused, NULL, false},
    [XF_ATTN] = {"tessera.Attention", 1, run_fused, NULL, false},
    [XF_SELECT] = {"tessera.Select", 1, run_fused, NULL, false},
    [XF_HEADS] = {"tessera.HeadSplit", 1, run_fused, NULL, false},
    [XF_HEAD_SHAPE] = {"tessera.HeadShape", 1, run_fused, NULL, false},
    [XF_FLAT_LINEAR] = {"tessera.FlatLinear", 1, run_fused, NULL, false},
    [XF_LIN_SHAPE] = {"tessera.LinearShape", 1, run_fused, NULL, false},
};

/* ------------------------------------------------------------------ building fused nodes */

void tso_xf_take_node(pattern *p, int k) {
    if (p->n < XF_MAX_NODES) p->nodes[p->n++] = k;
}

static int cmp_int(const void *a, const void *b) {
    return (*(const int *)a > *(const int *)b) - (*(const int *)a < *(const int *)b);
}

static bool in_pattern(const pattern *p, int k) {
    for (int i = 0; i < p->n; i++)
        if (p->nodes[i] == k) return true;
    return false;
}

/* The values the pattern reads from outside it, in order of first reading. -1 when too many. */
static int outside_inputs(const tso_graph *g, const pattern *p, int *ins) {
    int count = 0;
    for (int i = 0; i < p->n; i++) {
        const tso_node *nd = &g->nodes[p->nodes[i]];
        for (int j = 0; j < nd->n_in; j++) {
            int v = nd->in[j];
            if (v < 0 || (g->values[v].kind == TSO_V_NODE && in_pattern(p, g->values[v].producer)))
                continue;
            bool seen = false;
            for (int e = 0; e < count; e++) seen = seen || ins[e] == v;
            if (seen) continue;
            if (count == XF_MAX_IO) return -1;
            ins[count++] = v;
        }
    }
    return count;
}

int tso_xf_position(const int *ins, int n, int v) {
    for (int i = 0; v >= 0 && i < n; i++)
        if (ins[i] == v) return i;
    return -1;
}

char *tso_xf_label(const char *last_label, xf_kind kind) {
    char label[320];
    snprintf(label, sizeof label, "%.200s, fused as %s", last_label, tso_xf_defs[kind].op_type);
    return tsi_strdup(label);
}

tso_node tso_xf_node(xf_state *s, char *label, int *io, int n_in) {
    const tso_node *last = &s->steps[s->n_steps - 1];
    return (tso_node){.proto = last->proto,
                      .label = label,
                      .op_type = tso_xf_defs[s->kind].op_type,
                      .opset = last->opset,
                      .def = &tso_xf_defs[s->kind],
                      .n_in = n_in,
                      .n_out = 1,
                      .in = io,
                      .out = io + n_in,
                      .state = s,
                      .free_state = tso_xf_free};
}

/* Replaces the pattern's nodes by one fused node at its last node's place (the one whose output
 * is the result: every other node of the pattern is before it); the others are marked dead. false
 * with TS_ERR_OOM, the graph unchanged. Takes s (freed when no node is made). */
bool tso_xf_fuse(tso_graph *g, bool *dead, pattern *p, xf_state *s, const role *roles,
                 int n_roles) {
    qsort(p->nodes, (size_t)p->n, sizeof *p->nodes, cmp_int);
    const int root = p->nodes[p->n - 1];
    tso_node *r = &g->nodes[root];
    int ins[XF_MAX_IO];
    int n_in = outside_inputs(g, p, ins);
    if (n_in < 0 || r->n_out != 1) {
        free(s);
        return true; /* not a pattern after all: left as it is */
    }
    char *lab = tso_xf_label(r->label, s->kind);
    int *io = malloc(sizeof(int) * (size_t)(n_in + 2));
    if (!lab || !io) {
        free(lab);
        free(io);
        free(s);
        return tsi_error_set(TS_ERR_OOM, "onnx_load: out of host memory (rewrites)"), false;
    }
    for (int i = 0; i < n_roles; i++) *roles[i].field = tso_xf_position(ins, n_in, roles[i].value);
    memcpy(io, ins, sizeof(int) * (size_t)n_in);
    io[n_in] = r->out[0];
    s->n_steps = p->n;
    for (int i = 0; i < p->n; i++) {
        tso_node *nd = &g->nodes[p->nodes[i]];
        s->steps[i] = *nd; /* the step owns the label and the value lists now */
        if (p->nodes[i] != root) {
            *nd = (tso_node){.proto = nd->proto, .op_type = nd->op_type, .def = nd->def};
            dead[p->nodes[i]] = true;
        }
    }
    *r = tso_xf_node(s, lab, io, n_in);
    return true;
}

xf_state *tso_xf_state_new(xf_kind kind) {
    xf_state *s = calloc(1, sizeof *s);
    if (!s) return tsi_error_set(TS_ERR_OOM, "onnx_load: out of host memory (rewrites)"), NULL;
    s->kind = kind;
    s->x = s->w = s->b = s->q = s->k = s->v = s->sq = s->sk = s->ss = s->mask = -1;
    return s;
}
