/* ops_shape.c — ONNX's shape operators (Reshape, Slice, Pad, Tile, CumSum, ...) on Tessera's
 * views and differentiable ops; only shape-like inputs (shapes, axes, pads) go to the host. */
#include <stdlib.h>
#include <string.h>

#include "onnx/onnx_internal.h"

#define MAX_INTS (2 * TS_MAX_DIMS) /* the longest shape-like list a node here reads (pads) */

/* ------------------------------------------------------------------ helpers */
/* an optional input: NULL when the node has fewer inputs or leaves it empty */
static ts_tensor *opt_in(const tso_node *n, ts_tensor *const *in, int i) {
    return i < n->n_in ? in[i] : NULL;
}

/* axis in [-rank, rank) ([-rank, rank] when `inclusive`) as a dim; -1 with the error set */
/* an ints attribute into v; its count, -1 when absent, -2 (error set) when longer than max */
static int attr_list(const tso_node *n, const char *name, int64_t *v, int max) {
    const int64_t *a;
    int count = tso_attr_ints(n, name, &a);
    if (count > max)
        return tso_fail(n, TS_ERR_SHAPE, "attribute '%s' has %d values (at most %d)", name, count,
                        max),
               -2;
    if (count > 0) memcpy(v, a, (size_t)count * sizeof *v);
    return count;
}

/* the same where an empty list means the default, as for absent (ONNX's reference) */
static int attr_list_or_default(const tso_node *n, const char *name, int64_t *v, int max) {
    int count = attr_list(n, name, v, max);
    return count == 0 ? -1 : count;
}

/* an optional integer input into v; its count, -1 when absent, -2 on error */
static int input_list(const tso_node *n, ts_tensor *const *in, int i, const char *what, int64_t *v,
                      int max) {
    ts_tensor *t = opt_in(n, in, i);
    if (!t) return -1;
    int count = tso_read_ints(n, t, v, max, what);
    return count < 0 ? -2 : count;
}

static ts_shape shape_with(ts_shape s, int dim, int64_t size) {
    s.dims[dim] = size;
    return s;
}

/* rank ones: a one-element tensor reshaped to broadcast against any shape of that rank */
static ts_shape ones_shape(int rank) {
    ts_shape s = {.ndim = rank};
    for (int d = 0; d < rank; d++) s.dims[d] = 1;
    return s;
}

/* a result rank Tessera can hold */
static bool check_rank(const tso_node *n, int rank) {
    if (rank <= TS_MAX_DIMS) return true;
    return tso_fail(n, TS_ERR_SHAPE, "a shape of %d dims (Tessera has at most %d)", rank,
                    TS_MAX_DIMS);
}

/* the input itself as a result (a new reference owned by the node's scope) */
static ts_tensor *same(ts_tensor *x) { return tsi_own(ts_retain(x)); }

/* ------------------------------------------------------------ Reshape, Shape, Size, Flatten */
/* ONNX's target shape: 0 copies the input's dim (unless allowzero), one -1 is inferred */
static bool reshape_to(const tso_node *n, ts_tensor *x, const int64_t *v, int count, bool allowzero,
                       ts_tensor **out) {
    if (!check_rank(n, count)) return false;
    ts_shape s = {.ndim = count};
    int infer = -1;
    int64_t known = 1;
    for (int i = 0; i < count; i++) {
        int64_t d = v[i];
        if (d == 0 && !allowzero) {
            if (i >= ts_ndim(x))
                return tso_fail(n, TS_ERR_SHAPE,
                                "shape[%d] is 0 (copy the input's dim) but %s has no dim %d", i,
                                tsi_desc(x), i);
            d = ts_size(x, i);
        }
        if (d == -1) {
            if (infer >= 0) return tso_fail(n, TS_ERR_SHAPE, "the shape has more than one -1");
            infer = i;
            continue;
        }
        if (d < 0 || (d > 0 && known > INT64_MAX / d))
            return tso_fail(n, TS_ERR_SHAPE, "shape[%d] is %lld", i, (long long)d);
        s.dims[i] = d;
        known *= d;
    }
    if (infer >= 0) {
        int64_t total = ts_numel(x);
        if (known == 0 || total % known)
            return tso_fail(n, TS_ERR_SHAPE, "cannot infer the -1 in the shape for input %s",
                            tsi_desc(x));
        s.dims[infer] = total / known;
    }
    return (out[0] = ts_reshape(x, s)) != NULL || tso_fail_pending(n);
}

/* opsets 1-4: the shape is an attribute */
TSO_RUN(run_reshape1) {
    (void)c;
    int64_t v[TS_MAX_DIMS + 1];
    int count = attr_list(n, "shape", v, TS_MAX_DIMS + 1);
    if (count < 0) return count == -1 ? tso_fail(n, TS_ERR_FORMAT, "needs a 'shape'") : false;
    return reshape_to(n, in[0], v, count, false, out);
}

/* opset 5 on: the shape is an input; allowzero (opset 14) makes 0 a real zero dim */
TSO_RUN(run_reshape5) {
    (void)c;
    int64_t v[TS_MAX_DIMS + 1];
    int count = tso_read_ints(n, in[1], v, TS_MAX_DIMS + 1, "shape");
    if (count < 0) return false;
    return reshape_to(n, in[0], v, count, tso_attr_int(n, "allowzero", 0) != 0, out);
}

static bool shape_of(const tso_node *n, ts_tensor *x, int64_t start, int64_t end, ts_tensor **out) {
    ts_shape s = ts_shape_of(x);
    int r = s.ndim;
    /* start and end clamp to [0, rank] (opset 15) */
    if (start < 0) start += r;
    if (end < 0) end += r;
    start = start < 0 ? 0 : start > r ? r : start;
    end = end < start ? start : end > r ? r : end;
    ts_shape o = {.ndim = 1, .dims = {end - start}};
    return (out[0] = ts_from_data(o, TS_I64, s.dims + start, tso_opts_of(x, TS_I64))) != NULL ||
           tso_fail_pending(n);
}

TSO_RUN(run_shape1) {
    (void)c;
    return shape_of(n, in[0], 0, TS_MAX_DIMS, out);
}

TSO_RUN(run_shape15) {
    (void)c;
    return shape_of(n, in[0], tso_attr_int(n, "start", 0), tso_attr_int(n, "end", TS_MAX_DIMS),
                    out);
}

TSO_RUN(run_size) {
    (void)c;
    TSO_DONE(ts_full(TS_SHAPE(), (double)ts_numel(in[0]), tso_opts_of(in[0], TS_I64)));
}

/* [d0 * ... * d(axis-1), d(axis) * ... * d(r-1)] (a negative axis counts from the end, opset 11) */
TSO_RUN(run_flatten) {
    (void)c;
    ts_tensor *x = in[0];
    ts_shape s = ts_shape_of(x);
    int axis = tso_wrap_axis(n, tso_attr_int(n, "axis", 1), s.ndim, true);
    if (axis < 0) return false;
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < s.ndim; d++) *(d < axis ? &outer : &inner) *= s.dims[d];
    TSO_DONE(ts_reshape(x, TS_SHAPE(outer, inner)));
}

/* ------------------------------------------------------------ Squeeze, Unsqueeze, Transpose */
/* axes < 0 count: every size-1 dim goes */
static bool squeeze(const tso_node *n, ts_tensor *x, const int64_t *axes, int count,
                    ts_tensor **out) {
    ts_shape s = ts_shape_of(x), o = {.ndim = 0};
    bool drop[TS_MAX_DIMS] = {false};
    for (int i = 0; i < count; i++) {
        int d = tso_wrap_axis(n, axes[i], s.ndim, false);
        if (d < 0) return false;
        if (s.dims[d] != 1)
            return tso_fail(n, TS_ERR_SHAPE, "cannot squeeze dim %d of %s (its size is not 1)", d,
                            tsi_desc(x));
        drop[d] = true;
    }
    for (int d = 0; d < s.ndim; d++)
        if (!(count < 0 ? s.dims[d] == 1 : drop[d])) o.dims[o.ndim++] = s.dims[d];
    return (out[0] = ts_reshape(x, o)) != NULL || tso_fail_pending(n);
}

/* opsets 1-12: axes is an attribute */
TSO_RUN(run_squeeze1) {
    (void)c;
    int64_t axes[TS_MAX_DIMS];
    int count = attr_list_or_default(n, "axes", axes, TS_MAX_DIMS);
    return count >= -1 && squeeze(n, in[0], axes, count, out);
}

/* opset 13 on: axes is an optional input */
TSO_RUN(run_squeeze13) {
    (void)c;
    int64_t axes[TS_MAX_DIMS];
    int count = input_list(n, in, 1, "axes", axes, TS_MAX_DIMS);
    return count >= -1 && squeeze(n, in[0], axes, count, out);
}

/* axes index the result (rank r + count) */
static bool unsqueeze(const tso_node *n, ts_tensor *x, const int64_t *axes, int count,
                      ts_tensor **out) {
    if (count < 0) return tso_fail(n, TS_ERR_FORMAT, "needs axes");
    ts_shape s = ts_shape_of(x);
    int rank = s.ndim + count;
    if (!check_rank(n, rank)) return false;
    bool one[TS_MAX_DIMS] = {false};
    for (int i = 0; i < count; i++) {
        int d = tso_wrap_axis(n, axes[i], rank, false);
        if (d < 0) return false;
        if (one[d]) return tso_fail(n, TS_ERR_ARG, "axis %lld repeats", (long long)axes[i]);
        one[d] = true;
    }
    ts_shape o = {.ndim = rank};
    for (int d = 0, j = 0; d < rank; d++) o.dims[d] = one[d] ? 1 : s.dims[j++];
    return (out[0] = ts_reshape(x, o)) != NULL || tso_fail_pending(n);
}

TSO_RUN(run_unsqueeze1) {
    (void)c;
    int64_t axes[TS_MAX_DIMS];
    int count = attr_list(n, "axes", axes, TS_MAX_DIMS);
    return count >= -1 && unsqueeze(n, in[0], axes, count, out);
}

TSO_RUN(run_unsqueeze13) {
    (void)c;
    int64_t axes[TS_MAX_DIMS];
    int count = input_list(n, in, 1, "axes", axes, TS_MAX_DIMS);
    return count >= -1 && unsqueeze(n, in[0], axes, count, out);
}

/* perm defaults to the dims reversed */
TSO_RUN(run_transpose) {
    (void)c;
    ts_tensor *x = in[0];
    int r = ts_ndim(x);
    int64_t perm[TS_MAX_DIMS];
    int count = attr_list_or_default(n, "perm", perm, TS_MAX_DIMS);
    if (count == -2) return false;
    if (count < 0)
        for (int d = 0; d < r; d++) perm[d] = r - 1 - d;
    else if (count != r)
        return tso_fail(n, TS_ERR_SHAPE, "perm has %d values for %s", count, tsi_desc(x));
    ts_dims dims = {.n = r};
    bool seen[TS_MAX_DIMS] = {false};
    for (int d = 0; d < r; d++) {
        int p = tso_wrap_axis(n, perm[d], r, false);
        if (p < 0) return false;
        if (seen[p]) return tso_fail(n, TS_ERR_ARG, "perm repeats %d", p);
        seen[p] = true;
        dims.d[d] = p;
    }
    TSO_DONE(ts_permute(x, dims));
}

/* ------------------------------------------------------------------ Concat, Split */
/* opsets 1-3 default axis to 1; from 4 it is required */
TSO_RUN(run_concat) {
    (void)c;
    if (n->n_in < 1 || !in[0]) return tso_fail(n, TS_ERR_ARG, "needs at least one input");
    for (int i = 1; i < n->n_in; i++)
        if (!in[i] || ts_dtype_of(in[i]) != ts_dtype_of(in[0]))
            return tso_fail(n, TS_ERR_DTYPE, "input %d is %s, input 0 %s", i,
                            in[i] ? tsi_desc(in[i]) : "absent", tsi_desc(in[0]));
    int axis = tso_wrap_axis(n, tso_attr_int(n, "axis", 1), ts_ndim(in[0]), false);
    if (axis < 0) return false;
    TSO_DONE(ts_cat(in, n->n_in, axis));
}

/* split sizes come from an input (opsets 1 and 13 on) or the attribute (opsets 2-12): reading
 * whichever the node has covers every version; without them the parts are equal. */
TSO_RUN(run_split) {
    (void)c;
    ts_tensor *x = in[0];
    int parts = n->n_out;
    int axis = tso_wrap_axis(n, tso_attr_int(n, "axis", 0), ts_ndim(x), false);
    if (axis < 0) return false;
    int64_t dim = ts_size(x, axis);
    int64_t *sizes = malloc((size_t)(parts > 0 ? parts : 1) * sizeof *sizes);
    if (!sizes) return tso_fail(n, TS_ERR_OOM, "out of host memory");
    int count = input_list(n, in, 1, "split", sizes, parts);
    if (count == -1) count = attr_list_or_default(n, "split", sizes, parts);
    bool ok = count >= -1;
    /* opset 18's num_outputs: parts of ceil(dim / num_outputs), the last one smaller */
    const bool by_num = n->opset >= 18 && count == -1 && tso_attr(n, "num_outputs");
    if (ok && by_num) {
        int64_t num = tso_attr_int(n, "num_outputs", 0);
        if (num != parts || dim < parts - 1)
            ok = tso_fail(n, TS_ERR_SHAPE, "num_outputs %lld for %d outputs and dim %d of %s",
                          (long long)num, parts, axis, tsi_desc(x));
        int64_t chunk = parts > 0 ? (dim + parts - 1) / parts : 0;
        for (int i = 0; ok && i < parts; i++) {
            int64_t left = dim - chunk * i;
            sizes[i] = left < 0 ? 0 : left < chunk ? left : chunk;
        }
    } else if (ok && count < 0) {
        if (dim % parts)
            ok = tso_fail(n, TS_ERR_SHAPE, "dim %d of %s does not split into %d equal parts", axis,
                          tsi_desc(x), parts);
        for (int i = 0; i < parts; i++) sizes[i] = dim / parts;
    } else if (ok && count != parts) {
        ok = tso_fail(n, TS_ERR_SHAPE, "split has %d sizes for %d outputs", count, parts);
    }
    for (int64_t i = 0, at = 0; ok && i < parts; at += sizes[i++]) {
        if (sizes[i] < 0 || at + sizes[i] > dim)
            ok =
                tso_fail(n, TS_ERR_SHAPE, "split sizes do not fit dim %d of %s", axis, tsi_desc(x));
        else if (!(out[i] = ts_narrow(x, axis, at, sizes[i])))
            ok = tso_fail_pending(n);
        else if (i == parts - 1 && at + sizes[i] != dim)
            ok = tso_fail(n, TS_ERR_SHAPE, "split sizes do not add up to dim %d of %s", axis,
                          tsi_desc(x));
    }
    free(sizes);
    return ok;
}

/* ------------------------------------------------------------------ Slice */
/* One axis of a Slice, start and end clamped as ONNX (NumPy) does. A positive step is a view; a
 * negative one an index_select of the positions counted down (differentiable, on the device). */
static ts_tensor *slice_axis(ts_tensor *x, int axis, int64_t start, int64_t end, int64_t step) {
    int64_t dim = ts_size(x, axis), most = dim > 0 ? dim : 1;
    if (start < 0) start += dim;
    if (end < 0) end += dim;
    /* a step longer than the dim takes one element at most: clamped, no arithmetic overflows */
    step = step > most ? most : step < -most ? -most : step;
    if (step > 0) {
        start = start < 0 ? 0 : start > dim ? dim : start;
        end = end < 0 ? 0 : end > dim ? dim : end;
        return ts_slice(x, axis, start, end < start ? start : end, step);
    }
    start = start < 0 ? 0 : start > dim - 1 ? dim - 1 : start;
    end = end < -1 ? -1 : end > dim - 1 ? dim - 1 : end;
    int64_t len = start > end ? (start - end + (-step) - 1) / (-step) : 0;
    if (len == 0) return ts_slice(x, axis, 0, 0, 1);
    ts_tensor *idx = ts_arange((double)start, (double)(start + len * step), (double)step,
                               tso_opts_of(x, TS_I64));
    return ts_index_select(x, axis, idx);
}

static bool slice(const tso_node *n, ts_tensor *x, const int64_t *starts, const int64_t *ends,
                  int count, const int64_t *axes, int n_axes, const int64_t *steps, int n_steps,
                  ts_tensor **out) {
    int r = ts_ndim(x);
    if (count < 0 || count > r)
        return tso_fail(n, TS_ERR_ARG,
                        "starts and ends must have one count, at most the rank of %s", tsi_desc(x));
    if ((n_axes >= 0 && n_axes != count) || (n_steps >= 0 && n_steps != count))
        return tso_fail(n, TS_ERR_ARG, "axes and steps must have as many values as starts");
    bool seen[TS_MAX_DIMS] = {false};
    ts_tensor *y = x;
    for (int i = 0; i < count && y; i++) {
        int axis = tso_wrap_axis(n, n_axes >= 0 ? axes[i] : i, r, false);
        if (axis < 0) return false;
        if (seen[axis]) return tso_fail(n, TS_ERR_ARG, "axis %d repeats", axis);
        seen[axis] = true;
        int64_t step = n_steps >= 0 ? steps[i] : 1;
        if (step == 0) return tso_fail(n, TS_ERR_ARG, "step 0 on axis %d", axis);
        y = slice_axis(y, axis, starts[i], ends[i], step);
    }
    TSO_DONE(y == x ? same(x) : y);
}

/* opsets 1-9: starts, ends and axes are attributes */
TSO_RUN(run_slice1) {
    (void)c;
    int64_t starts[TS_MAX_DIMS], ends[TS_MAX_DIMS], axes[TS_MAX_DIMS];
    int count = attr_list(n, "starts", starts, TS_MAX_DIMS);
    int n_ends = attr_list(n, "ends", ends, TS_MAX_DIMS);
    int n_axes = attr_list_or_default(n, "axes", axes, TS_MAX_DIMS);
    if (count == -2 || n_ends == -2 || n_axes == -2) return false;
    if (count != n_ends) return tso_fail(n, TS_ERR_ARG, "starts and ends differ in count");
    return slice(n, in[0], starts, ends, count, axes, n_axes, NULL, -1, out);
}

/* opset 10 on: inputs, and steps */
TSO_RUN(run_slice10) {
    (void)c;
    int64_t starts[TS_MAX_DIMS], ends[TS_MAX_DIMS], axes[TS_MAX_DIMS], steps[TS_MAX_DIMS];
    int count = input_list(n, in, 1, "starts", starts, TS_MAX_DIMS);
    int n_ends = input_list(n, in, 2, "ends", ends, TS_MAX_DIMS);
    int n_axes = input_list(n, in, 3, "axes", axes, TS_MAX_DIMS);
    int n_steps = input_list(n, in, 4, "steps", steps, TS_MAX_DIMS);
    if (count == -2 || n_ends == -2 || n_axes == -2 || n_steps == -2) return false;
    if (count != n_ends) return tso_fail(n, TS_ERR_ARG, "starts and ends differ in count");
    return slice(n, in[0], starts, ends, count, axes, n_axes, steps, n_steps, out);
}

/* ------------------------------------------------------------------ Expand, Tile */
/* bidirectional (NumPy) broadcasting of the input with the given shape */
TSO_RUN(run_expand) {
    (void)c;
    ts_tensor *x = in[0];
    int64_t v[TS_MAX_DIMS + 1];
    int count = tso_read_ints(n, in[1], v, TS_MAX_DIMS + 1, "shape");
    if (count < 0) return false;
    ts_shape s = ts_shape_of(x);
    int rank = count > s.ndim ? count : s.ndim;
    if (!check_rank(n, rank)) return false;
    ts_shape o = {.ndim = rank};
    for (int d = 0; d < rank; d++) {
        int i = d - (rank - s.ndim), j = d - (rank - count);
        int64_t a = i >= 0 ? s.dims[i] : 1, b = j >= 0 ? v[j] : 1;
        if (a != b && a != 1 && b != 1)
            return tso_fail(n, TS_ERR_SHAPE, "cannot broadcast %s to the shape's dim %d (%lld)",
                            tsi_desc(x), j, (long long)b);
        o.dims[d] = a == 1 ? b : a;
    }
    TSO_DONE(ts_expand(x, o));
}

/* each dim repeated: unsqueeze before it, expand the new dim, merge the two */
TSO_RUN(run_tile) {
    (void)c;
    ts_tensor *x = in[0];
    int r = ts_ndim(x);
    int64_t reps[TS_MAX_DIMS];
    int count = tso_read_ints(n, in[1], reps, TS_MAX_DIMS, "repeats");
    if (count < 0) return false;
    if (count != r)
        return tso_fail(n, TS_ERR_SHAPE, "repeats has %d values for %s", count, tsi_desc(x));
    ts_tensor *y = x;
    for (int d = 0; d < r && y; d++) {
        if (reps[d] < 0 || (reps[d] > 0 && ts_size(y, d) > INT64_MAX / reps[d]))
            return tso_fail(n, TS_ERR_ARG, "repeats[%d] is %lld", d, (long long)reps[d]);
        if (reps[d] == 1) continue;
        if (r == TS_MAX_DIMS)
            return tso_fail(n, TS_ERR_SHAPE, "tiling a tensor of %d dims is not supported", r);
        ts_shape s = ts_shape_of(y), e = {.ndim = r + 1};
        for (int k = 0, j = 0; k <= r; k++) e.dims[k] = k == d ? reps[d] : s.dims[j++];
        ts_tensor *u = ts_expand(ts_unsqueeze(y, d), e);
        y = u ? ts_reshape(u, shape_with(s, d, s.dims[d] * reps[d])) : NULL;
    }
    TSO_DONE(y == x ? same(x) : y);
}

/* ------------------------------------------------------------------ Pad */
typedef enum pad_mode { PAD_CONSTANT, PAD_REFLECT, PAD_EDGE, PAD_WRAP } pad_mode;

/* wrap is a mode from opset 19 on */
static bool pad_mode_of(const tso_node *n, pad_mode *m) {
    static const char *const names[] = {"constant", "reflect", "edge", "wrap"};
    int i = tso_attr_choice(n, "mode", "constant", names, n->opset >= 19 ? 4 : 3);
    if (i < 0) return false;
    *m = (pad_mode)i;
    return true;
}

static bool check_pad(const tso_node *n) {
    pad_mode m = PAD_CONSTANT;
    return pad_mode_of(n, &m);
}

/* The source position of each output position along a padded dim of size dim, on the device:
 * edge clamps into [0, dim); reflect mirrors without repeating the border (NumPy's "reflect",
 * periodic with period 2 (dim - 1): shifted by whole periods to count from a non-negative start,
 * then folded back with min(m, period - m)). */
static ts_tensor *pad_index(ts_tensor *x, pad_mode m, int64_t dim, int64_t before, int64_t after) {
    ts_opts o = tso_opts_of(x, TS_I64);
    if (m == PAD_WRAP) { /* periodic with period dim, shifted to count from >= 0 */
        int64_t shift = (before + dim - 1) / dim * dim;
        return ts_fmod_scalar(
            ts_arange((double)(shift - before), (double)(shift + dim + after), 1, o), (double)dim);
    }
    if (m == PAD_EDGE || dim == 1)
        return ts_clamp(ts_arange((double)-before, (double)(dim + after), 1, o), 0,
                        (double)(dim - 1));
    int64_t period = 2 * (dim - 1), shift = (before + period - 1) / period * period;
    ts_tensor *p = ts_fmod_scalar(
        ts_arange((double)(shift - before), (double)(shift + dim + after), 1, o), (double)period);
    return ts_minimum(p, ts_rsub_scalar(p, (double)period));
}

/* the constant border for a dim: the value input broadcast (differentiable), or the attribute */
static ts_tensor *pad_block(ts_tensor *x, ts_shape s, ts_tensor *value, double attr_value) {
    if (!value) return ts_full(s, attr_value, tso_opts_of(x, ts_dtype_of(x)));
    ts_tensor *v =
        ts_dtype_of(value) == ts_dtype_of(x) ? value : ts_to_dtype(value, ts_dtype_of(x));
    return ts_expand(ts_reshape(v, ones_shape(s.ndim)), s);
}

static bool pad(const tso_node *n, ts_tensor *x, const int64_t *pads, int count, ts_tensor *value,
                double attr_value, ts_tensor **out) {
    pad_mode m = PAD_CONSTANT;
    if (!pad_mode_of(n, &m)) return false;
    int r = ts_ndim(x);
    if (count != 2 * r)
        return tso_fail(n, TS_ERR_SHAPE, "pads has %d values for %s", count, tsi_desc(x));
    if (value && ts_numel(value) != 1)
        return tso_fail(n, TS_ERR_SHAPE, "constant_value must hold one value, got %s",
                        tsi_desc(value));
    ts_tensor *y = x;
    for (int d = 0; d < r && y; d++) {
        int64_t before = pads[d], after = pads[d + r];
        if (before < 0 || after < 0) { /* negative pads crop */
            int64_t size = ts_size(y, d);
            int64_t lo = before < 0 ? -before : 0, hi = size - (after < 0 ? -after : 0);
            if (lo > hi)
                return tso_fail(n, TS_ERR_SHAPE, "pads crop all of dim %d of %s", d, tsi_desc(x));
            y = ts_narrow(y, d, lo, hi - lo);
            before = before < 0 ? 0 : before;
            after = after < 0 ? 0 : after;
        }
        if (!y || (before == 0 && after == 0)) continue;
        int64_t dim = ts_size(y, d);
        if (m != PAD_CONSTANT) {
            if (dim == 0)
                return tso_fail(n, TS_ERR_SHAPE, "cannot pad the empty dim %d of %s in mode %s", d,
                                tsi_desc(x),
                                m == PAD_EDGE   ? "edge"
                                : m == PAD_WRAP ? "wrap"
                                                : "reflect");
            y = ts_index_select(y, d, pad_index(y, m, dim, before, after));
            continue;
        }
        ts_shape s = ts_shape_of(y);
        ts_tensor *parts[3] = {NULL, y, NULL};
        int k = 0;
        if (before) parts[k++] = pad_block(y, shape_with(s, d, before), value, attr_value);
        parts[k++] = y;
        if (after) parts[k++] = pad_block(y, shape_with(s, d, after), value, attr_value);
        y = ts_cat(parts, k, d);
    }
    TSO_DONE(y == x ? same(x) : y);
}

/* opsets 1-10: pads (opset 1: paddings) and value are attributes */
TSO_RUN(run_pad2) {
    (void)c;
    int64_t pads[MAX_INTS];
    int count = attr_list(n, "pads", pads, MAX_INTS);
    if (count == -1) count = attr_list(n, "paddings", pads, MAX_INTS);
    if (count == -2) return false;
    return pad(n, in[0], pads, count, NULL, tso_attr_float(n, "value", 0.0f), out);
}

/* opset 11 on: pads and constant_value are inputs; from 18 the optional axes input names the
 * dims the pads are for (the others unpadded) */
TSO_RUN(run_pad11) {
    (void)c;
    int64_t pads[MAX_INTS];
    int count = tso_read_ints(n, in[1], pads, MAX_INTS, "pads");
    if (count < 0) return false;
    ts_tensor *axes_in = n->opset >= 18 ? opt_in(n, in, 3) : NULL;
    if (!axes_in) return pad(n, in[0], pads, count, opt_in(n, in, 2), 0, out);
    int64_t axes[TS_MAX_DIMS + 1], full[2 * TS_MAX_DIMS] = {0};
    int na = tso_read_ints(n, axes_in, axes, TS_MAX_DIMS + 1, "axes"), r = ts_ndim(in[0]);
    if (na < 0) return false;
    if (count != 2 * na)
        return tso_fail(n, TS_ERR_SHAPE, "pads has %d values for %d axes", count, na);
    bool seen[TS_MAX_DIMS] = {false};
    for (int i = 0; i < na; i++) {
        int a = tso_wrap_axis(n, axes[i], r, false);
        if (a < 0) return false;
        if (seen[a]) return tso_fail(n, TS_ERR_ARG, "axis %d repeats in axes", a);
        seen[a] = true;
        full[a] = pads[i];
        full[a + r] = pads[i + na];
    }
    return pad(n, in[0], full, 2 * r, opt_in(n, in, 2), 0, out);
}

/* ------------------------------------------------------------------ ConstantOfShape, Range */
static bool check_constant_of_shape(const tso_node *n) {
    const Onnx__AttributeProto *a = tso_attr(n, "value");
    if (!a || !a->t) return true;
    int64_t count = 1;
    for (size_t i = 0; i < a->t->n_dims; i++) count *= a->t->dims[i];
    if (count != 1) return tso_fail(n, TS_ERR_FORMAT, "value must hold one element");
    if (tso_dtype_from_onnx(a->t->data_type) == TS_DTYPE_DEFAULT)
        return tso_fail(n, TS_ERR_UNSUPPORTED, "value of type %s, which Tessera lacks",
                        tso_onnx_type_name(a->t->data_type));
    return true;
}

TSO_RUN(run_constant_of_shape) {
    int64_t v[TS_MAX_DIMS + 1];
    int count = tso_read_ints(n, in[0], v, TS_MAX_DIMS + 1, "shape");
    if (count < 0 || !check_rank(n, count)) return false;
    for (int i = 0; i < count; i++)
        if (v[i] < 0) return tso_fail(n, TS_ERR_SHAPE, "shape[%d] is %lld", i, (long long)v[i]);
    ts_shape s = ts_shape_make((size_t)count, v);
    bool present;
    ts_tensor *value = tso_attr_tensor(n, "value", ts_device_of(in[0]), &present);
    if (!present) TSO_DONE(ts_zeros(s, (ts_opts){.dtype = TS_F32, .device = ts_device_of(in[0])}));
    if (!value) return false;
    (void)c;
    /* the one-element value broadcast, then materialised (the result owns its memory) */
    TSO_DONE(ts_contiguous(ts_expand(ts_reshape(value, TS_SHAPE()), s)));
}

/* the count is data-dependent: start, limit and delta are read as numbers (shape-like scalars) */
TSO_RUN(run_range) {
    (void)c;
    double start, limit, delta;
    if (!tso_read_scalar(n, in[0], &start, "start") ||
        !tso_read_scalar(n, in[1], &limit, "limit") || !tso_read_scalar(n, in[2], &delta, "delta"))
        return false;
    if (delta == 0) return tso_fail(n, TS_ERR_ARG, "delta is 0");
    ts_opts o = tso_opts_of(in[0], ts_dtype_of(in[0]));
    if ((delta > 0 && limit <= start) || (delta < 0 && limit >= start))
        TSO_DONE(ts_empty(TS_SHAPE(0), o));
    TSO_DONE(ts_arange(start, limit, delta, o));
}

/* ------------------------------------------------------------------ DepthToSpace, SpaceToDepth */
/* a 4-D input reshaped to 6 dims, permuted, and reshaped to the result */
static bool reshuffle(const tso_node *n, ts_tensor *x, ts_shape mid, ts_dims perm, ts_shape o,
                      ts_tensor **out) {
    TSO_DONE(ts_reshape(ts_permute(ts_reshape(x, mid), perm), o));
}

static bool block_of(const tso_node *n, ts_tensor *x, int64_t *b) {
    *b = tso_attr_int(n, "blocksize", 0);
    if (*b < 1) return tso_fail(n, TS_ERR_ARG, "blocksize must be positive");
    if (ts_ndim(x) != 4) return tso_fail(n, TS_ERR_SHAPE, "needs a 4-D input, got %s", tsi_desc(x));
    return true;
}

static bool dcr_mode(const tso_node *n, bool *dcr) {
    char buf[8];
    const char *m = tso_attr_string(n, "mode", "DCR", buf, sizeof buf);
    *dcr = !strcmp(m, "DCR");
    if (!*dcr && strcmp(m, "CRD"))
        return tso_fail(n, TS_ERR_UNSUPPORTED, "mode '%s' is unknown", m);
    return true;
}

static bool check_depth_to_space(const tso_node *n) {
    bool dcr;
    return dcr_mode(n, &dcr);
}

TSO_RUN(run_depth_to_space) {
    (void)c;
    ts_tensor *x = in[0];
    int64_t b;
    bool dcr;
    if (!block_of(n, x, &b) || !dcr_mode(n, &dcr)) return false;
    ts_shape s = ts_shape_of(x);
    int64_t N = s.dims[0], C = s.dims[1], H = s.dims[2], W = s.dims[3];
    if (C % (b * b))
        return tso_fail(n, TS_ERR_SHAPE, "channels of %s do not divide by blocksize^2",
                        tsi_desc(x));
    int64_t C2 = C / (b * b);
    ts_shape o = TS_SHAPE(N, C2, H * b, W * b);
    /* DCR: depth is (b1, b2, c); CRD: (c, b1, b2) */
    if (dcr) return reshuffle(n, x, TS_SHAPE(N, b, b, C2, H, W), TS_DIMS(0, 3, 4, 1, 5, 2), o, out);
    return reshuffle(n, x, TS_SHAPE(N, C2, b, b, H, W), TS_DIMS(0, 1, 4, 2, 5, 3), o, out);
}

TSO_RUN(run_space_to_depth) {
    (void)c;
    ts_tensor *x = in[0];
    int64_t b;
    if (!block_of(n, x, &b)) return false;
    ts_shape s = ts_shape_of(x);
    int64_t N = s.dims[0], C = s.dims[1], H = s.dims[2], W = s.dims[3];
    if (H % b || W % b)
        return tso_fail(n, TS_ERR_SHAPE, "height and width of %s do not divide by blocksize",
                        tsi_desc(x));
    return reshuffle(n, x, TS_SHAPE(N, C, H / b, b, W / b, b), TS_DIMS(0, 3, 5, 1, 2, 4),
                     TS_SHAPE(N, C * b * b, H / b, W / b), out);
}

/* ------------------------------------------------------------------ Trilu, EyeLike */
/* col - row for a rows x cols matrix, on the device */
static ts_tensor *diagonal_offset(ts_tensor *x, int64_t rows, int64_t cols) {
    ts_opts o = tso_opts_of(x, TS_I64);
    ts_tensor *r = ts_reshape(ts_arange(0, (double)rows, 1, o), TS_SHAPE(rows, 1));
    ts_tensor *k = ts_reshape(ts_arange(0, (double)cols, 1, o), TS_SHAPE(1, cols));
    return ts_sub(k, r);
}

/* the upper (col - row >= k) or lower (col - row <= k) triangle of the last two dims */
TSO_RUN(run_trilu) {
    (void)c;
    ts_tensor *x = in[0];
    if (ts_ndim(x) < 2)
        return tso_fail(n, TS_ERR_SHAPE, "needs at least 2 dims, got %s", tsi_desc(x));
    int64_t k = 0;
    ts_tensor *kt = opt_in(n, in, 1);
    if (kt && tso_read_ints(n, kt, &k, 1, "k") != 1)
        return tso_fail(n, TS_ERR_ARG, "k must hold one value");
    ts_tensor *off = diagonal_offset(x, ts_size(x, -2), ts_size(x, -1));
    bool upper = tso_attr_int(n, "upper", 1) != 0;
    ts_tensor *keep = upper ? ts_ge_scalar(off, (double)k) : ts_le_scalar(off, (double)k);
    TSO_DONE(ts_where(keep, x, ts_zeros_like(x)));
}

static bool check_eye_like(const tso_node *n) {
    const Onnx__AttributeProto *a = tso_attr(n, "dtype");
    if (a && tso_dtype_from_onnx((int32_t)a->i) == TS_DTYPE_DEFAULT)
        return tso_fail(n, TS_ERR_UNSUPPORTED, "dtype %s, which Tessera lacks",
                        tso_onnx_type_name((int32_t)a->i));
    return true;
}

TSO_RUN(run_eye_like) {
    (void)c;
    ts_tensor *x = in[0];
    if (ts_ndim(x) != 2) return tso_fail(n, TS_ERR_SHAPE, "needs a 2-D input, got %s", tsi_desc(x));
    const Onnx__AttributeProto *a = tso_attr(n, "dtype");
    ts_dtype dt = a ? tso_dtype_from_onnx((int32_t)a->i) : ts_dtype_of(x);
    ts_tensor *off = diagonal_offset(x, ts_size(x, 0), ts_size(x, 1));
    TSO_DONE(ts_to_dtype(ts_eq_scalar(off, (double)tso_attr_int(n, "k", 0)), dt));
}

/* ------------------------------------------------------------------ CumSum */
/* x moved by s positions along axis (toward the end, or the start when reverse), zeros entering */
static ts_tensor *shift(ts_tensor *x, int axis, int64_t s, bool reverse) {
    ts_shape sh = ts_shape_of(x);
    int64_t len = sh.dims[axis];
    if (s >= len) return ts_zeros_like(x);
    ts_tensor *zeros = ts_zeros(shape_with(sh, axis, s), tso_opts_of(x, ts_dtype_of(x)));
    ts_tensor *kept = reverse ? ts_slice(x, axis, s, len, 1) : ts_slice(x, axis, 0, len - s, 1);
    ts_tensor *parts[2] = {reverse ? kept : zeros, reverse ? zeros : kept};
    return ts_cat(parts, 2, axis);
}

/* Tessera has no cumsum: a Hillis-Steele scan (log2(len) shifted adds) of differentiable ops; the
 * exclusive sum is the inclusive sum of the input shifted by one. */
TSO_RUN(run_cumsum) {
    (void)c;
    ts_tensor *x = in[0];
    int64_t a;
    if (tso_read_ints(n, in[1], &a, 1, "axis") != 1)
        return tso_fail(n, TS_ERR_ARG, "axis must hold one value");
    int axis = tso_wrap_axis(n, a, ts_ndim(x), false);
    if (axis < 0) return false;
    bool reverse = tso_attr_int(n, "reverse", 0) != 0;
    int64_t len = ts_size(x, axis);
    ts_tensor *y = tso_attr_int(n, "exclusive", 0) ? shift(x, axis, 1, reverse) : x;
    for (int64_t s = 1; s < len && y; s *= 2) y = ts_add(y, shift(y, axis, s, reverse));
    TSO_DONE(y == x ? same(x) : y);
}

const tso_op_def tso_ops_shape[] = {
    {"Reshape", 1, run_reshape1, NULL, false},
    {"Reshape", 5, run_reshape5, NULL, false},
    {"Shape", 1, run_shape1, NULL, false},
    {"Shape", 15, run_shape15, NULL, false},
    {"Size", 1, run_size, NULL, false},
    {"Flatten", 1, run_flatten, NULL, false},
    {"Squeeze", 1, run_squeeze1, NULL, false},
    {"Squeeze", 13, run_squeeze13, NULL, false},
    {"Unsqueeze", 1, run_unsqueeze1, NULL, false},
    {"Unsqueeze", 13, run_unsqueeze13, NULL, false},
    {"Transpose", 1, run_transpose, NULL, false},
    {"Concat", 1, run_concat, NULL, false},
    {"Split", 1, run_split, NULL, false},
    {"Slice", 1, run_slice1, NULL, false},
    {"Slice", 10, run_slice10, NULL, false},
    {"Expand", 8, run_expand, NULL, false},
    {"Tile", 6, run_tile, NULL, false},
    {"Pad", 1, run_pad2, check_pad, false},
    {"Pad", 11, run_pad11, check_pad, false},
    {"ConstantOfShape", 9, run_constant_of_shape, check_constant_of_shape, false},
    {"Range", 11, run_range, NULL, false},
    {"DepthToSpace", 1, run_depth_to_space, check_depth_to_space, false},
    {"SpaceToDepth", 1, run_space_to_depth, NULL, false},
    {"Trilu", 14, run_trilu, NULL, false},
    {"EyeLike", 9, run_eye_like, check_eye_like, false},
    {"CumSum", 11, run_cumsum, NULL, false},
    {NULL, 0, NULL, NULL, false},
};
