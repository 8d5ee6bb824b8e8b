/* ops_reduce.c — ONNX's reductions (Reduce*, ArgMax / ArgMin, TopK) and losses
 * (NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss) on Tessera's differentiable ops. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "onnx/onnx_internal.h"

/* ------------------------------------------------------------------ axes */
/* An axis in [-rank, rank - 1] made non-negative; -1 (error named after the node) when out of
 * range. */
static int norm_axis(const tso_node *n, int64_t axis, int rank) {
    if (axis < -rank || axis >= rank) {
        tso_fail(n, TS_ERR_ARG, "axis %lld is out of range for rank %d", (long long)axis, rank);
        return -1;
    }
    return (int)(axis < 0 ? axis + rank : axis);
}

/* The reduced axes of x: the `axes` attribute, or (axes_input) the optional second input. An empty
 * list reduces every axis, or none when noop_with_empty_axes is set (*noop). Returns false on
 * error. */
static bool reduce_axes(const tso_node *n, ts_tensor *const *in, bool axes_input, ts_tensor *x,
                        ts_dims *d, bool *noop) {
    int rank = ts_ndim(x);
    int64_t v[TS_MAX_DIMS + 1];
    int count = 0;
    *noop = false;
    if (axes_input) {
        if (n->n_in > 1 && in[1]) count = tso_read_ints(n, in[1], v, TS_MAX_DIMS + 1, "axes");
    } else {
        const int64_t *a;
        count = tso_attr_ints(n, "axes", &a);
        if (count > TS_MAX_DIMS) return tso_fail(n, TS_ERR_ARG, "%d axes for rank %d", count, rank);
        for (int i = 0; i < count; i++) v[i] = a[i];
    }
    if (count < 0) {
        if (axes_input) return false;
        count = 0;
    }
    bool seen[TS_MAX_DIMS] = {false};
    d->n = 0;
    if (count == 0) {
        *noop = tso_attr_int(n, "noop_with_empty_axes", 0) != 0;
        for (int i = 0; i < rank; i++) d->d[d->n++] = i;
        return true;
    }
    for (int i = 0; i < count; i++) {
        int a = norm_axis(n, v[i], rank);
        if (a < 0) return false;
        if (seen[a]) return tso_fail(n, TS_ERR_ARG, "axis %d appears twice in axes", a);
        seen[a] = true;
        d->d[d->n++] = a;
    }
    return true;
}

/* ------------------------------------------------------------------ Reduce* */
typedef enum red_kind {
    R_SUM,
    R_MEAN,
    R_MAX,
    R_MIN,
    R_PROD,
    R_L1,
    R_L2,
    R_LOG_SUM,
    R_LOG_SUM_EXP,
    R_SUM_SQUARE,
} red_kind;

/* Tessera has prod over one dim: the axes one at a time, the highest first so that the lower
 * ones keep their index when dims are dropped. */
static ts_tensor *prod_dims(ts_tensor *x, ts_dims d, bool keep) {
    if (d.n == 0) return ts_prod(x);
    bool red[TS_MAX_DIMS] = {false};
    for (int i = 0; i < d.n; i++) red[d.d[i]] = true;
    for (int a = TS_MAX_DIMS - 1; a >= 0 && x; a--)
        if (red[a]) x = ts_prod_dim(x, a, keep);
    return x;
}

static ts_tensor *reduce_core(red_kind k, ts_tensor *x, ts_dims d, bool keep) {
    switch (k) {
    case R_SUM:
        return ts_sum_dims(x, d, keep);
    case R_MEAN:
        return ts_mean_dims(x, d, keep);
    case R_MAX:
        return ts_amax_dims(x, d, keep);
    case R_MIN:
        return ts_amin_dims(x, d, keep);
    case R_PROD:
        return prod_dims(x, d, keep);
    case R_L1:
        return ts_sum_dims(ts_abs(x), d, keep);
    case R_L2:
        return ts_sqrt(ts_sum_dims(ts_square(x), d, keep));
    case R_LOG_SUM:
        return ts_log(ts_sum_dims(x, d, keep));
    case R_LOG_SUM_EXP:
        return ts_logsumexp_dims(x, d, keep);
    case R_SUM_SQUARE:
        return ts_sum_dims(ts_square(x), d, keep);
    }
    return NULL;
}

/* ReduceMax / ReduceMin over an empty set (opset 18's definition; earlier opsets leave it
 * undefined): -inf / +inf, false / true for bool; the integers' limits are not implemented. */
static bool empty_extreme(const tso_node *n, ts_tensor *x, ts_dims d, bool keep, red_kind k,
                          ts_tensor **out) {
    ts_dtype dt = ts_dtype_of(x);
    bool max = k == R_MAX;
    double v = dt == TS_BOOL ? (max ? 0.0 : 1.0) : max ? -INFINITY : INFINITY;
    if (dt != TS_BOOL && !ts_dtype_is_floating(dt))
        return tso_fail(n, TS_ERR_UNSUPPORTED, "%s of the empty %s (an integer type's limit)",
                        n->op_type, tsi_desc(x));
    bool red[TS_MAX_DIMS] = {false};
    for (int i = 0; i < d.n; i++) red[d.d[i]] = true;
    ts_shape in = ts_shape_of(x), s = {.ndim = 0};
    for (int i = 0; i < in.ndim; i++)
        if (!red[i])
            s.dims[s.ndim++] = in.dims[i];
        else if (keep)
            s.dims[s.ndim++] = 1;
    TSO_DONE(ts_full(s, v, tso_opts_of(x, dt)));
}

/* ONNX's reductions keep the input's type. Those whose value is fractional (mean, L2, the logs) run
 * on integers in float64 and are truncated back, as NumPy's astype in ONNX's reference; the others
 * run on the integers themselves (Tessera's integer sums are int64, cast back). */
static bool reduce(const tso_node *n, ts_tensor *const *in, ts_tensor **out, red_kind k,
                   bool axes_input) {
    ts_tensor *x = in[0];
    ts_dims d;
    bool noop;
    if (!reduce_axes(n, in, axes_input, x, &d, &noop)) return false;
    if (noop) TSO_DONE(ts_clone(x));
    bool keep = tso_attr_int(n, "keepdims", 1) != 0;
    ts_dtype dt = ts_dtype_of(x);
    bool fractional = k == R_MEAN || k == R_L2 || k == R_LOG_SUM || k == R_LOG_SUM_EXP;
    if ((k == R_MAX || k == R_MIN) && ts_numel(x) == 0) return empty_extreme(n, x, d, keep, k, out);
    ts_tensor *src = x;
    if (fractional && !ts_dtype_is_floating(dt)) src = ts_to_dtype(x, TS_F64);
    ts_tensor *r = src ? reduce_core(k, src, d, keep) : NULL;
    if (r && ts_dtype_of(r) != dt) r = ts_to_dtype(r, dt);
    TSO_DONE(r);
}

#define REDUCE(fname, kind, axes_input)                                                            \
    TSO_RUN(fname) {                                                                               \
        (void)c;                                                                                   \
        return reduce(n, in, out, kind, axes_input);                                               \
    }
REDUCE(run_reduce_sum, R_SUM, false)
REDUCE(run_reduce_sum13, R_SUM, true)
REDUCE(run_reduce_mean, R_MEAN, false)
REDUCE(run_reduce_max, R_MAX, false)
REDUCE(run_reduce_min, R_MIN, false)
REDUCE(run_reduce_prod, R_PROD, false)
REDUCE(run_reduce_l1, R_L1, false)
REDUCE(run_reduce_l2, R_L2, false)
REDUCE(run_reduce_log_sum, R_LOG_SUM, false)
REDUCE(run_reduce_log_sum_exp, R_LOG_SUM_EXP, false)
REDUCE(run_reduce_sum_square, R_SUM_SQUARE, false)
/* opset 18: axes is the optional second input of every reduction (ReduceSum's since 13) */
REDUCE(run_reduce_mean18, R_MEAN, true)
REDUCE(run_reduce_max18, R_MAX, true)
REDUCE(run_reduce_min18, R_MIN, true)
REDUCE(run_reduce_prod18, R_PROD, true)
REDUCE(run_reduce_l1_18, R_L1, true)
REDUCE(run_reduce_l2_18, R_L2, true)
REDUCE(run_reduce_log_sum18, R_LOG_SUM, true)
REDUCE(run_reduce_log_sum_exp18, R_LOG_SUM_EXP, true)
REDUCE(run_reduce_sum_square18, R_SUM_SQUARE, true)

/* ------------------------------------------------------------------ ArgMax / ArgMin */
/* The index along axis of the first maximum (minimum), or with select_last_index of the last one:
 * the first one of the input reversed along axis, counted from the end. */
static bool arg_extreme(tso_ctx *c, const tso_node *n, ts_tensor *x, ts_tensor **out, bool max) {
    int axis = norm_axis(n, tso_attr_int(n, "axis", 0), ts_ndim(x));
    if (axis < 0) return false;
    bool keep = tso_attr_int(n, "keepdims", 1) != 0;
    ts_tensor *(*arg)(ts_tensor *, int, bool) = max ? ts_argmax_dim : ts_argmin_dim;
    if (!tso_attr_int(n, "select_last_index", 0)) TSO_DONE(arg(x, axis, keep));
    int64_t size = ts_size(x, axis);
    ts_tensor *rev =
        ts_arange((double)size - 1, -1, -1, (ts_opts){.dtype = TS_I64, .device = c->device});
    ts_tensor *i = arg(ts_index_select(x, axis, rev), axis, keep);
    TSO_DONE(ts_rsub_scalar(i, (double)(size - 1)));
}

TSO_RUN(run_argmax) { return arg_extreme(c, n, in[0], out, true); }
TSO_RUN(run_argmin) { return arg_extreme(c, n, in[0], out, false); }

/* ------------------------------------------------------------------ TopK */
/* "any" along axis (kept as a size-1 dim) of a bool tensor */
static ts_tensor *any_dim(ts_tensor *b, int axis) {
    return ts_ne_scalar(ts_amax_dim(ts_to_dtype(b, TS_U8), axis, true), 0);
}

/* One step of the selection: the index along axis (kept as a size-1 dim) of the best element not
 * yet taken, in NumPy's sort order (NaN above everything) with ties going to the lower index, as
 * ONNX's reference. nan is isnan(x) (NULL for integers); fill stands in for the elements out of
 * the race (no better than any of them: -inf or the row's minimum when largest). */
static ts_tensor *topk_step(ts_tensor *x, ts_tensor *nan, ts_tensor *fill, ts_tensor *taken,
                            int axis, bool largest) {
    ts_tensor *left = ts_logical_not(taken);
    ts_tensor *ordinary = nan ? ts_logical_and(left, ts_logical_not(nan)) : left;
    ts_tensor *masked = ts_where(ordinary, x, fill);
    ts_tensor *best = largest ? ts_amax_dim(masked, axis, true) : ts_amin_dim(masked, axis, true);
    ts_tensor *cand = ts_logical_and(ts_eq(x, best), ordinary);
    if (nan) {
        ts_tensor *nan_left = ts_logical_and(nan, left);
        cand = largest ? ts_where(any_dim(nan_left, axis), nan_left, cand)
                       : ts_where(any_dim(cand, axis), cand, nan_left);
    }
    return ts_argmax_dim(ts_to_dtype(cand, TS_U8), axis, true);
}

/* k rounds of selection over the whole input (Tessera has no sort): O(k n), each round in a scope
 * of its own so that memory stays that of a few copies of the input. */
static bool topk(tso_ctx *c, const tso_node *n, ts_tensor *x, int64_t k, ts_tensor **out) {
    int rank = ts_ndim(x);
    if (rank == 0) return tso_fail(n, TS_ERR_ARG, "the input must have at least one dim");
    int axis = norm_axis(n, tso_attr_int(n, "axis", -1), rank);
    if (axis < 0) return false;
    int64_t size = ts_size(x, axis);
    if (k < 0 || k > size)
        return tso_fail(n, TS_ERR_ARG, "k = %lld, the axis has %lld elements", (long long)k,
                        (long long)size);
    bool largest = tso_attr_int(n, "largest", 1) != 0;
    ts_shape ps = {.ndim = rank};
    for (int i = 0; i < rank; i++) ps.dims[i] = i == axis ? size : 1;
    ts_tensor *pos = ts_reshape(
        ts_arange(0, (double)size, 1, (ts_opts){.dtype = TS_I64, .device = c->device}), ps);
    bool fl = ts_dtype_is_floating(ts_dtype_of(x));
    ts_tensor *nan = fl ? ts_ne(x, x) : NULL;
    ts_tensor *fill = !k        ? NULL
                      : fl      ? ts_full(TS_SHAPE(), largest ? -INFINITY : INFINITY,
                                          (ts_opts){.dtype = ts_dtype_of(x), .device = c->device})
                      : largest ? ts_amin_dim(x, axis, true)
                                : ts_amax_dim(x, axis, true);
    ts_tensor **picked = calloc((size_t)(k ? k : 1), sizeof *picked);
    ts_tensor *taken =
        ts_retain(ts_zeros(ts_shape_of(x), (ts_opts){.dtype = TS_BOOL, .device = c->device}));
    bool ok = picked && taken && pos && (fill || !k);
    ts_no_grad_begin(); /* the selection: only the final gather carries gradients */
    for (int64_t i = 0; ok && i < k; i++) {
        ts_scope_begin();
        ts_tensor *idx = topk_step(x, nan, fill, taken, axis, largest);
        ts_tensor *now = idx ? ts_logical_or(taken, ts_eq(pos, idx)) : NULL;
        ok = now != NULL;
        if (ok) {
            ts_release(taken);
            taken = ts_retain(now);
            picked[i] = ts_retain(idx);
        }
        ts_scope_end();
    }
    ts_no_grad_end();
    ts_release(taken);
    ts_tensor *indices = NULL;
    if (ok) {
        if (k)
            indices = ts_cat(picked, (int)k, axis);
        else {
            ts_shape s = ts_shape_of(x);
            s.dims[axis] = 0;
            indices = ts_zeros(s, (ts_opts){.dtype = TS_I64, .device = c->device});
        }
    }
    for (int64_t i = 0; picked && i < k; i++) ts_release(picked[i]);
    free(picked);
    if (!ok && !ts_error()) return tso_fail(n, TS_ERR_OOM, "out of host memory");
    if (n->n_out > 1) out[1] = indices;
    out[0] = indices ? ts_gather(x, axis, indices) : NULL;
    return out[0] != NULL || tso_fail_pending(n);
}

TSO_RUN(run_topk1) { return topk(c, n, in[0], tso_attr_int(n, "k", -1), out); }

TSO_RUN(run_topk10) {
    int64_t k;
    if (tso_read_ints(n, in[1], &k, 1, "k") != 1)
        return ts_error() ? false : tso_fail(n, TS_ERR_SHAPE, "k must hold one value");
    return topk(c, n, in[0], k, out);
}

/* ------------------------------------------------------------------ losses */
static bool check_reduction(const tso_node *n) {
    char buf[16];
    const char *r = tso_attr_string(n, "reduction", "mean", buf, sizeof buf);
    if (strcmp(r, "mean") && strcmp(r, "sum") && strcmp(r, "none"))
        return tso_fail(n, TS_ERR_UNSUPPORTED, "reduction '%s' is not one of none, sum, mean", r);
    return true;
}

/* ONNX's options as Tessera's: without an ignore_index attribute nothing is ignored (Tessera's
 * default would ignore -100), so the ignored class is one no target can hold. */
static ts_loss_opts loss_opts(const tso_node *n, ts_tensor *weight) {
    char buf[16];
    const char *r = tso_attr_string(n, "reduction", "mean", buf, sizeof buf);
    ts_loss_opts o = {.weight = weight, .has_ignore_index = true};
    o.reduction = !strcmp(r, "none")  ? TS_REDUCTION_NONE
                  : !strcmp(r, "sum") ? TS_REDUCTION_SUM
                                      : TS_REDUCTION_MEAN;
    o.ignore_index = tso_attr(n, "ignore_index") ? tso_attr_int(n, "ignore_index", 0) : INT64_MIN;
    return o;
}

/* the target as Tessera's losses take it (int64); ONNX allows int32 too */
static ts_tensor *target_i64(ts_tensor *t) {
    return ts_dtype_of(t) == TS_I64 ? t : ts_to_dtype(t, TS_I64);
}

TSO_RUN(run_nll_loss) {
    (void)c;
    ts_tensor *w = n->n_in > 2 ? in[2] : NULL;
    TSO_DONE(ts_nll_loss(in[0], target_i64(in[1]), loss_opts(n, w)));
}

/* the loss, and the log-probabilities as a second output when asked */
TSO_RUN(run_softmax_ce_loss) {
    (void)c;
    ts_tensor *w = n->n_in > 2 ? in[2] : NULL;
    if (ts_ndim(in[0]) < 2)
        return tso_fail(n, TS_ERR_SHAPE, "scores must be [N, C] or [N, C, d1, ...], got %s",
                        tsi_desc(in[0]));
    ts_tensor *lp = ts_log_softmax(in[0], 1);
    out[0] = lp ? ts_nll_loss(lp, target_i64(in[1]), loss_opts(n, w)) : NULL;
    if (n->n_out > 1 && n->out[1] >= 0) out[1] = lp;
    return out[0] != NULL || tso_fail_pending(n);
}

const tso_op_def tso_ops_reduce[] = {
    {"ReduceSum", 1, run_reduce_sum, NULL, false},
    {"ReduceSum", 13, run_reduce_sum13, NULL, false},
    {"ReduceMean", 1, run_reduce_mean, NULL, false},
    {"ReduceMax", 1, run_reduce_max, NULL, false},
    {"ReduceMin", 1, run_reduce_min, NULL, false},
    {"ReduceProd", 1, run_reduce_prod, NULL, false},
    {"ReduceL1", 1, run_reduce_l1, NULL, false},
    {"ReduceL2", 1, run_reduce_l2, NULL, false},
    {"ReduceLogSum", 1, run_reduce_log_sum, NULL, false},
    {"ReduceLogSumExp", 1, run_reduce_log_sum_exp, NULL, false},
    {"ReduceSumSquare", 1, run_reduce_sum_square, NULL, false},
    {"ReduceMean", 18, run_reduce_mean18, NULL, false},
    {"ReduceMax", 18, run_reduce_max18, NULL, false},
    {"ReduceMin", 18, run_reduce_min18, NULL, false},
    {"ReduceProd", 18, run_reduce_prod18, NULL, false},
    {"ReduceL1", 18, run_reduce_l1_18, NULL, false},
    {"ReduceL2", 18, run_reduce_l2_18, NULL, false},
    {"ReduceLogSum", 18, run_reduce_log_sum18, NULL, false},
    {"ReduceLogSumExp", 18, run_reduce_log_sum_exp18, NULL, false},
    {"ReduceSumSquare", 18, run_reduce_sum_square18, NULL, false},
    {"ArgMax", 1, run_argmax, NULL, false},
    {"ArgMin", 1, run_argmin, NULL, false},
    {"TopK", 1, run_topk1, NULL, false},
    {"TopK", 10, run_topk10, NULL, false},
    {"NegativeLogLikelihoodLoss", 12, run_nll_loss, check_reduction, false},
    {"SoftmaxCrossEntropyLoss", 12, run_softmax_ce_loss, check_reduction, false},
    {NULL, 0, NULL, NULL, false},
};
