/* rewrite_xformer.c — the transformer rewrites of ts_onnx_opts.optimize: the erf GELU exporters
 * write as five ops becomes one ts_gelu; MatMul + Add (and Gemm) with an initializer weight and
 * bias becomes one linear; the decomposed attention (MatMul, scalings, an additive mask, Softmax,
 * MatMul) becomes one ts_scaled_dot_product_attention, causal where the mask provably is; the
 * head split (a Gather of the packed q, k, v; Reshape, Transpose, Reshape) becomes views. A rewrite
 * happens only where every value inside the pattern has no reader outside it. Each fused node keeps
 * the nodes it replaced and runs them as they were whenever its fast path does not apply to what a
 * run brings (a dtype, a rank, a broadcast, a scale that is not one number), so the rewrites change
 * results by float rounding only. They run Tessera's differentiable ops: an optimized model still
 * trains, its weights being the module's parameters. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/gemm_provider.h"
#include "backend/cpu/sdpa_select.h"
#include "onnx/memo.h"
#include "onnx/onnx_internal.h"

#define XF_MAX_NODES 12 /* the largest pattern: attention with every optional part */
#define XF_MAX_IO    16 /* an operator may read absent trailing inputs up to here (run.c) */

typedef enum xf_kind {
    XF_GELU,
    XF_LINEAR,
    XF_ATTN,
    XF_SELECT,
    XF_HEADS,
    XF_HEAD_SHAPE,
    XF_FLAT_LINEAR,
    XF_LIN_SHAPE
} xf_kind;

/* A fused node's state: the replaced nodes in graph order, and where the fast path finds its
 * operands among the fused node's inputs (-1: absent). */
typedef struct xf_state {
    xf_kind kind;
    int n_steps;
    tso_node steps[XF_MAX_NODES];
    /* GELU: x; the constants' dtype and highest rank (x must have at least it) */
    int x;
    ts_dtype const_dtype;
    int const_rank;
    /* LINEAR: x @ w + b (b may be absent); w_nk: w is [N, K] (Gemm's transB, or a Transpose of
     * the weight taken in); gemm: x must be a matrix, as Gemm's A */
    int w, b;
    bool w_nk, gemm;
    /* ATTN: softmax(Q K^T * scales + mask) V. sq, sk, ss scale Q, K^T and the scores (Mul, or Div
     * when *_div); k_rank > 0: in[k] is K's source, K^T = Transpose(in[k], k_perm); else in[k] is
     * K^T itself */
    int q, k, v, sq, sk, ss, mask;
    bool q_div, k_div, s_div, causal;
    int k_rank, axis;
    int64_t k_perm[TS_MAX_DIMS];
    /* SELECT: Gather(in[x], index) at axis (the attribute), index a constant scalar. HEADS:
     * Reshape(Transpose(Reshape(in[x], in[sq]), [1, 0, 2]), in[sk]) (the head split). HEAD_SHAPE:
     * Shape(Transpose(Reshape(in[x], in[sq]), [1, 0, 2])). FLAT_LINEAR: Reshape(Linear(Reshape(
     * in[x], in[sq]), in[w], in[b]), in[sk]). LIN_SHAPE: Shape(Linear(Reshape(in[x], in[sq]),
     * in[w], ...)) */
    int64_t index;
} xf_state;

static void xf_free(void *p) {
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
 * provider's NN GEMM while its NT form stays with the primitive (gemm_provider.c: an AVX2 host,
 * where OpenBLAS runs the NN products): there it is copied transposed, so the GEMM reads it
 * transposed. Measured on two Zen 3 cores (AVX2) for GPT-mini's products of 4096 rows, copy
 * included: K 256, N 768: 11.1 ms against 12.2; N 1024: 15.1 against 18.8; but K 1024, N 256:
 * 19.0 against 17.2, so a long K keeps W. Where the primitive takes both forms (AVX-512) they
 * run alike and the copy, made on every run, is a loss (bench/results/onnx-blocked.md). (cuBLAS
 * takes either form.) The copy is recorded by autograd and traces like any op: the gradient
 * reaches the parameter. */
static bool weight_copy_pays(ts_tensor *w, int64_t rows, int64_t k, int64_t n) {
    return rows >= 1024 && k <= n && ts_dtype_of(w) == TS_F32 && ts_device_of(w).type != TS_CUDA &&
           !tsi_lib_sgemm_primitive(false, false, rows, n, k) &&
           tsi_lib_sgemm_primitive(false, true, rows, n, k);
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

/* k itself, or a copy when the attention selector says its rows lie too evenly apart
 * (tsi_sdpa_keys_copy: a multiple of 4 KiB, where the fused kernel's gathers of a key block fall
 * in one cache set; the exporters' head split, left as the file has it, leaves GPT-mini's rows
 * 16 KiB apart: rewritten, they lie 3 KiB apart). Q and V are read row by row: no cost. */
static ts_tensor *keys_apart(ts_tensor *k) {
    const int64_t row = ts_stride(k, -2) * (int64_t)tsi_dtype_size(ts_dtype_of(k));
    return tsi_sdpa_keys_copy(ts_size(k, -2), row) ? ts_contiguous(k) : k;
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

static const tso_op_def fused_defs[] = {
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
typedef struct pattern {
    int nodes[XF_MAX_NODES]; /* graph indices of the nodes replaced */
    int n;
} pattern;

static void take_node(pattern *p, int k) {
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

static int position(const int *ins, int n, int v) {
    for (int i = 0; v >= 0 && i < n; i++)
        if (ins[i] == v) return i;
    return -1;
}

/* A value the fast path reads and the field of the state that gets its position among the fused
 * node's inputs. */
typedef struct role {
    int value;
    int *field;
} role;

/* Replaces the pattern's nodes by one fused node at its last node's place (the one whose output
 * is the result: every other node of the pattern is before it); the others are marked dead. false
 * with TS_ERR_OOM, the graph unchanged. Takes s (freed when no node is made). */
static bool fuse(tso_graph *g, bool *dead, pattern *p, xf_state *s, const role *roles,
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
    char label[320];
    snprintf(label, sizeof label, "%.200s, fused as %s", r->label, fused_defs[s->kind].op_type);
    char *lab = tsi_strdup(label);
    int *io = malloc(sizeof(int) * (size_t)(n_in + 2));
    if (!lab || !io) {
        free(lab);
        free(io);
        free(s);
        return tsi_error_set(TS_ERR_OOM, "onnx_load: out of host memory (rewrites)"), false;
    }
    for (int i = 0; i < n_roles; i++) *roles[i].field = position(ins, n_in, roles[i].value);
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
    *r = (tso_node){.proto = s->steps[p->n - 1].proto,
                    .label = lab,
                    .op_type = fused_defs[s->kind].op_type,
                    .opset = s->steps[p->n - 1].opset,
                    .def = &fused_defs[s->kind],
                    .n_in = n_in,
                    .n_out = 1,
                    .in = io,
                    .out = io + n_in,
                    .state = s,
                    .free_state = xf_free};
    return true;
}

static xf_state *state_new(xf_kind kind) {
    xf_state *s = calloc(1, sizeof *s);
    if (!s) return tsi_error_set(TS_ERR_OOM, "onnx_load: out of host memory (rewrites)"), NULL;
    s->kind = kind;
    s->x = s->w = s->b = s->q = s->k = s->v = s->sq = s->sk = s->ss = s->mask = -1;
    return s;
}

/* ------------------------------------------------------------------ matching */
typedef struct matcher {
    tso_graph *g;
    bool *dead;
    unsigned char *shape; /* tso_shape_values: what is a function of the input shapes */
} matcher;

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
        take_node(p, add);
        take_node(p, erf);
        take_node(p, scaled_x);
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
        take_node(&p, k);
        take_node(&p, inner);
        gelu_consts c = {0};
        int x = -1;
        if (!gelu_leaves(mt, leaf, &p, &x, &c)) continue;
        xf_state *s = state_new(XF_GELU);
        if (!s) return false;
        s->const_dtype = c.dtype;
        s->const_rank = c.rank;
        role roles[] = {{x, &s->x}};
        return fuse(mt->g, mt->dead, &p, s, roles, 1);
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
    take_node(p, t);
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
    xf_state *s = state_new(XF_LINEAR);
    if (!s) return false;
    s->w_nk = nk;
    s->gemm = gemm;
    role roles[] = {{x, &s->x}, {w, &s->w}, {b, &s->b}};
    return fuse(mt->g, mt->dead, p, s, roles, 3);
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
        take_node(&p, k);
        return fuse_linear(mt, &p, root->in[0], root->in[1], root->in[2], nk, true);
    }
    if (!strcmp(root->op_type, "MatMul") && root->n_in == 2) { /* no bias (a tied LM head) */
        pattern p = {.n = 0};
        take_node(&p, k);
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
        take_node(&p, k);
        take_node(&p, mm);
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
                take_node(p, k);
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
    take_node(&b.p, mm);
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
    take_node(&a->p, t);
    *kv = mt->g->nodes[t].in[0];
    s->k_rank = np;
    memcpy(s->k_perm, perm, sizeof(int64_t) * (size_t)np);
}

static bool fuse_attention(matcher *mt, attn_match *a, int v, int axis) {
    xf_state *s = state_new(XF_ATTN);
    if (!s) return false;
    int kv;
    key_source(mt, a, s, &kv);
    s->q_div = a->q_div, s->k_div = a->k_div, s->s_div = a->s_div;
    s->axis = axis;
    s->causal = a->mask >= 0 && (causal_const(const_of(mt, a->mask)) || causal_graph(mt, a->mask));
    role roles[] = {{a->q, &s->q},   {kv, &s->k},     {v, &s->v},         {a->sq, &s->sq},
                    {a->sk, &s->sk}, {a->ss, &s->ss}, {a->mask, &s->mask}};
    return fuse(mt->g, mt->dead, &a->p, s, roles, 7);
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
    take_node(&a.p, k);
    take_node(&a.p, sm);
    int add = sole(mt, smn->in[0], "Add");
    bool found = false;
    for (int side = 0; add >= 0 && side < 2 && !found; side++) {
        attn_match b = a;
        take_node(&b.p, add);
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
    xf_state *s = state_new(XF_SELECT);
    if (!s) return false;
    s->index = (int64_t)ts_item(i);
    s->axis = (int)tso_attr_int(n, "axis", 0);
    pattern p = {.n = 0};
    take_node(&p, k);
    role roles[] = {{n->in[0], &s->x}};
    return fuse(mt->g, mt->dead, &p, s, roles, 1);
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
    xf_state *s = state_new(XF_HEADS);
    if (!s) return false;
    pattern p = {.n = 0};
    take_node(&p, k);
    take_node(&p, tr);
    take_node(&p, r1);
    const tso_node *first = &mt->g->nodes[r1];
    role roles[] = {{first->in[0], &s->x}, {first->in[1], &s->sq}, {r2->in[1], &s->sk}};
    return fuse(mt->g, mt->dead, &p, s, roles, 3);
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
    xf_state *s = state_new(XF_HEAD_SHAPE);
    if (!s) return false;
    int *io = malloc(sizeof(int) * 3);
    char label[320];
    snprintf(label, sizeof label, "%.200s, fused as %s", sh->label,
             fused_defs[XF_HEAD_SHAPE].op_type);
    char *lab = tsi_strdup(label);
    bool ok = io && lab && node_copy(&s->steps[0], &mt->g->nodes[r1]);
    if (ok) s->n_steps = 1, ok = node_copy(&s->steps[1], &mt->g->nodes[tr]);
    if (!ok) {
        free(io);
        free(lab);
        xf_free(s);
        return tsi_error_set(TS_ERR_OOM, "onnx_load: out of host memory (rewrites)"), false;
    }
    io[0] = mt->g->nodes[r1].in[0]; /* g */
    io[1] = mt->g->nodes[r1].in[1]; /* t1 */
    io[2] = sh->out[0];
    s->x = 0;
    s->sq = 1;
    s->n_steps = 3;
    s->steps[2] = *sh; /* the step owns the Shape's label and value list now */
    mt->g->nodes[k] = (tso_node){.proto = s->steps[2].proto,
                                 .label = lab,
                                 .op_type = fused_defs[XF_HEAD_SHAPE].op_type,
                                 .opset = s->steps[2].opset,
                                 .def = &fused_defs[XF_HEAD_SHAPE],
                                 .n_in = 2,
                                 .n_out = 1,
                                 .in = io,
                                 .out = io + 2,
                                 .state = s,
                                 .free_state = xf_free};
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
    xf_state *s = state_new(XF_FLAT_LINEAR);
    if (!s) return false;
    s->w_nk = ls->w_nk;
    pattern p = {.n = 0};
    take_node(&p, k);
    take_node(&p, li);
    take_node(&p, r1);
    const tso_node *first = &mt->g->nodes[r1];
    role roles[] = {{first->in[0], &s->x},
                    {first->in[1], &s->sq},
                    {r2->in[1], &s->sk},
                    {ln->in[ls->w], &s->w},
                    {ls->b >= 0 ? ln->in[ls->b] : -1, &s->b}};
    return fuse(mt->g, mt->dead, &p, s, roles, 5);
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
    xf_state *s = state_new(XF_LIN_SHAPE);
    if (!s) return false;
    int *io = malloc(sizeof(int) * (XF_MAX_IO + 1)), n_in = 0;
    char label[320];
    snprintf(label, sizeof label, "%.200s, fused as %s", sh->label,
             fused_defs[XF_LIN_SHAPE].op_type);
    char *lab = tsi_strdup(label);
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
        xf_free(s);
        if (!ok) tsi_error_set(TS_ERR_OOM, "onnx_load: out of host memory (rewrites)");
        return ok; /* !fits: too many inputs, left as it is */
    }
    s->x = position(io, n_in, mt->g->nodes[r1].in[0]);
    s->sq = position(io, n_in, mt->g->nodes[r1].in[1]);
    s->w = position(io, n_in, ln->in[ls->w]);
    s->w_nk = ls->w_nk;
    io[n_in] = sh->out[0];
    s->steps[s->n_steps++] = *sh; /* the step owns the Shape's label and value list now */
    mt->g->nodes[k] = (tso_node){.proto = s->steps[s->n_steps - 1].proto,
                                 .label = lab,
                                 .op_type = fused_defs[XF_LIN_SHAPE].op_type,
                                 .opset = s->steps[s->n_steps - 1].opset,
                                 .def = &fused_defs[XF_LIN_SHAPE],
                                 .n_in = n_in,
                                 .n_out = 1,
                                 .in = io,
                                 .out = io + n_in,
                                 .state = s,
                                 .free_state = xf_free};
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
