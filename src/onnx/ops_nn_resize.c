/* ops_nn_resize.c — ONNX's Resize (opsets 10, 11, 13) and Upsample (7, 9): separable, one dim at a
 * time, as ONNX's reference; each output position's source coordinate, its neighbours and their
 * weights are computed on the device, the neighbours gathered with index_select and weighted. */
#include <math.h>
#include <string.h>

#include "onnx/ops_nn.h"

typedef enum rmode { M_NEAREST, M_LINEAR, M_CUBIC, M_BAD } rmode;
typedef enum ctmode {
    CT_HALF_PIXEL,
    CT_PYTORCH_HALF_PIXEL,
    CT_ALIGN_CORNERS,
    CT_ASYMMETRIC,
    CT_TF_HALF_PIXEL_FOR_NN,
    CT_TF_CROP_AND_RESIZE,
    CT_BAD
} ctmode;
typedef enum nmode { NM_ROUND_PREFER_FLOOR, NM_ROUND_PREFER_CEIL, NM_FLOOR, NM_CEIL, NM_BAD } nmode;

typedef struct rcfg {
    rmode mode;
    ctmode ct;
    nmode nearest;
    double cubic_a, extrapolation;
    bool exclude_outside;
} rcfg;

static int lookup(const char *s, const char *const *names, int count) {
    for (int i = 0; i < count; i++)
        if (!strcmp(s, names[i])) return i;
    return count;
}

static const char *const mode_names[] = {"nearest", "linear", "cubic"};
static const char *const ct_names[] = {"half_pixel", "pytorch_half_pixel",   "align_corners",
                                       "asymmetric", "tf_half_pixel_for_nn", "tf_crop_and_resize"};
static const char *const nearest_names[] = {"round_prefer_floor", "round_prefer_ceil", "floor",
                                            "ceil"};

/* the attributes as the opset reads them; Resize-10 and Upsample map output to input
 * coordinates asymmetrically and take the nearest pixel by flooring */
static bool read_cfg(const tso_node *n, bool legacy, rcfg *r) {
    char buf[64];
    const char *m = tso_attr_string(n, "mode", "nearest", buf, sizeof buf);
    /* opset 7's Upsample and Resize-10 call linear interpolation "linear"; Upsample-1 "bilinear" */
    r->mode = !strcmp(m, "bilinear") ? M_LINEAR : (rmode)lookup(m, mode_names, 3);
    if (r->mode == M_BAD || (legacy && r->mode == M_CUBIC))
        return tso_fail(n, TS_ERR_UNSUPPORTED, "mode '%s' is not supported", m);
    if (legacy) {
        *r = (rcfg){.mode = r->mode, .ct = CT_ASYMMETRIC, .nearest = NM_FLOOR};
        return true;
    }
    const char *ct =
        tso_attr_string(n, "coordinate_transformation_mode", "half_pixel", buf, sizeof buf);
    r->ct = (ctmode)lookup(ct, ct_names, CT_BAD);
    if (r->ct == CT_BAD)
        return tso_fail(n, TS_ERR_UNSUPPORTED,
                        "coordinate_transformation_mode '%s' is not supported", ct);
    const char *nm = tso_attr_string(n, "nearest_mode", "round_prefer_floor", buf, sizeof buf);
    r->nearest = (nmode)lookup(nm, nearest_names, NM_BAD);
    if (r->nearest == NM_BAD)
        return tso_fail(n, TS_ERR_UNSUPPORTED, "nearest_mode '%s' is not supported", nm);
    r->cubic_a = tso_attr_float(n, "cubic_coeff_a", -0.75f);
    r->exclude_outside = tso_attr_int(n, "exclude_outside", 0) != 0;
    r->extrapolation = tso_attr_float(n, "extrapolation_value", 0.0f);
    return true;
}

TSO_NN_CHECK(tso_nn_check_resize) {
    rcfg r;
    return read_cfg(n, n->opset < 11, &r);
}

TSO_NN_CHECK(tso_nn_check_upsample) {
    rcfg r;
    if (!read_cfg(n, true, &r)) return false;
    const float *s;
    if (n->opset < 9 && tso_attr_floats(n, "scales", &s) < 1)
        return tso_fail(n, TS_ERR_FORMAT, "needs the scales attribute");
    return true;
}

/* ------------------------------------------------------------------ one dim */
/* The geometry of one resized dim: input and output length, the scale, and roi's two ends
 * (tf_crop_and_resize). */
typedef struct rdim {
    int dim;
    int64_t len, out;
    double scale, roi0, roi1;
} rdim;

/* each output position's coordinate in the input, float64 on the device, as ONNX's reference
 * computes it: the output width it divides by is scale * len, not the rounded size */
static ts_tensor *source_coords(const rcfg *r, const rdim *d, ts_device dev) {
    ts_tensor *y = ts_arange(0, (double)d->out, 1, (ts_opts){.dtype = TS_F64, .device = dev});
    double width = d->scale * (double)d->len, len1 = (double)(d->len - 1);
    switch (r->ct) {
    case CT_HALF_PIXEL:
        return ts_sub_scalar(ts_div_scalar(ts_add_scalar(y, 0.5), d->scale), 0.5);
    case CT_PYTORCH_HALF_PIXEL:
        if (d->out == 1) return ts_full_like(y, -0.5);
        return ts_sub_scalar(ts_div_scalar(ts_add_scalar(y, 0.5), d->scale), 0.5);
    case CT_ALIGN_CORNERS:
        if (width == 1) return ts_zeros_like(y);
        return ts_mul_scalar(y, len1 / (width - 1));
    case CT_ASYMMETRIC:
        return ts_div_scalar(y, d->scale);
    case CT_TF_HALF_PIXEL_FOR_NN:
        return ts_div_scalar(ts_add_scalar(y, 0.5), d->scale);
    case CT_TF_CROP_AND_RESIZE:
        if (width == 1) return ts_full_like(y, (d->roi1 - d->roi0) * len1 / 2 + d->roi0 * len1);
        return ts_add_scalar(ts_mul_scalar(y, (d->roi1 - d->roi0) * len1 / (width - 1)),
                             d->roi0 * len1);
    default:
        return NULL;
    }
}

/* x's elements at positions idx (float64 holding integers, clamped to the dim) along d */
static ts_tensor *take(ts_tensor *x, const rdim *d, ts_tensor *idx) {
    ts_tensor *i = ts_to_dtype(ts_clamp(idx, 0, (double)(d->len - 1)), TS_I64);
    return i ? ts_index_select(x, d->dim, i) : NULL;
}

/* a per-position weight [out] shaped to broadcast along d, of x's type */
static ts_tensor *along(ts_tensor *w, ts_tensor *x, const rdim *d) {
    return ts_to_dtype(ts_reshape(w, tso_nn_along(ts_ndim(x), d->dim, d->out)), ts_dtype_of(x));
}

static ts_tensor *nearest(const rcfg *r, ts_tensor *x, const rdim *d, ts_tensor *pos) {
    ts_tensor *idx;
    switch (r->nearest) {
    case NM_ROUND_PREFER_FLOOR:
        idx = ts_ceil(ts_sub_scalar(pos, 0.5));
        break;
    case NM_ROUND_PREFER_CEIL:
        idx = ts_floor(ts_add_scalar(pos, 0.5));
        break;
    case NM_FLOOR:
        idx = ts_floor(pos);
        break;
    default:
        idx = ts_ceil(pos);
        break;
    }
    return take(x, d, idx);
}

static ts_tensor *linear(ts_tensor *x, const rdim *d, ts_tensor *pos) {
    ts_tensor *i0 = ts_floor(pos);
    ts_tensor *w1 = ts_sub(pos, i0);
    ts_tensor *a = take(x, d, i0), *b = take(x, d, ts_add_scalar(i0, 1));
    return ts_add(ts_mul(a, along(ts_rsub_scalar(w1, 1), x, d)), ts_mul(b, along(w1, x, d)));
}

/* Keys' cubic convolution weight of a neighbour at distance t (0 <= t < 2) */
static ts_tensor *cubic_weight(ts_tensor *t, double a) {
    /* |t| <= 1: ((a + 2) t - (a + 3)) t^2 + 1;  1 < |t| < 2: ((a t - 5 a) t + 8 a) t - 4 a */
    ts_tensor *near =
        ts_add_scalar(ts_mul(ts_sub_scalar(ts_mul_scalar(t, a + 2), a + 3), ts_mul(t, t)), 1);
    ts_tensor *far = ts_sub_scalar(
        ts_mul(ts_add_scalar(ts_mul(ts_sub_scalar(ts_mul_scalar(t, a), 5 * a), t), 8 * a), t),
        4 * a);
    return ts_where(ts_le_scalar(t, 1), near, far);
}

/* cubic: the four neighbours i0 - 1 .. i0 + 2 of i0 = ceil(pos) - 1 (ONNX prefers the left pixel:
 * an integer position is the right end of its interval), weighted by Keys' kernel; with
 * exclude_outside the neighbours outside the input get no weight and the rest are renormalised */
static ts_tensor *cubic(const rcfg *r, ts_tensor *x, const rdim *d, ts_tensor *pos) {
    ts_tensor *i0 = ts_sub_scalar(ts_ceil(pos), 1);
    ts_tensor *ratio = ts_sub(pos, i0);
    ts_tensor *w[4], *acc = NULL, *total = NULL;
    for (int k = 0; k < 4; k++) {
        /* distance from pos to i0 + k - 1 */
        ts_tensor *dist = ts_abs(ts_sub_scalar(ratio, (double)(k - 1)));
        w[k] = cubic_weight(dist, r->cubic_a);
        if (r->exclude_outside && w[k]) {
            ts_tensor *idx = ts_add_scalar(i0, (double)(k - 1));
            ts_tensor *inside =
                ts_logical_and(ts_ge_scalar(idx, 0), ts_le_scalar(idx, (double)(d->len - 1)));
            w[k] = ts_where(inside, w[k], ts_zeros_like(w[k]));
            total = !w[k] ? NULL : total ? ts_add(total, w[k]) : w[k];
        }
        if (!w[k]) return NULL;
    }
    for (int k = 0; k < 4; k++) {
        ts_tensor *wk = r->exclude_outside ? ts_div(w[k], total) : w[k];
        ts_tensor *v = ts_mul(take(x, d, ts_add_scalar(i0, (double)(k - 1))), along(wk, x, d));
        acc = !v ? NULL : acc ? ts_add(acc, v) : v;
        if (!acc) return NULL;
    }
    return acc;
}

static ts_tensor *resize_dim(const rcfg *r, ts_tensor *x, const rdim *d) {
    ts_tensor *pos = source_coords(r, d, ts_device_of(x));
    if (!pos) return NULL;
    ts_tensor *y = r->mode == M_NEAREST  ? nearest(r, x, d, pos)
                   : r->mode == M_LINEAR ? linear(x, d, pos)
                                         : cubic(r, x, d, pos);
    if (!y || r->ct != CT_TF_CROP_AND_RESIZE) return y;
    /* TF's CropAndResize: positions outside the input get extrapolation_value */
    ts_tensor *outside =
        ts_logical_or(ts_lt_scalar(pos, 0), ts_gt_scalar(pos, (double)(d->len - 1)));
    outside = ts_reshape(outside, tso_nn_along(ts_ndim(x), d->dim, d->out));
    return ts_where(outside, ts_full_like(y, r->extrapolation), y);
}

/* Resizes x to sizes[] with scales[] (per dim), dim by dim; a dim whose size and scale stay (and
 * no crop) is left as it is. Interpolation runs in float64 for integer tensors, and for cubic
 * (whose four weights of both signs cancel: float32 sums lose digits ONNX's float64 reference
 * keeps), cast back. */
static ts_tensor *resize(const tso_node *n, const rcfg *r, ts_tensor *x, const double *scales,
                         const int64_t *sizes, const double *roi) {
    ts_dtype dt = ts_dtype_of(x);
    bool cast =
        r->mode != M_NEAREST && (!ts_dtype_is_floating(dt) || (r->mode == M_CUBIC && dt != TS_F64));
    ts_tensor *y = cast ? ts_to_dtype(x, TS_F64) : x;
    int rank = ts_ndim(x);
    bool changed = false;
    for (int i = 0; y && i < rank; i++) {
        rdim d = {.dim = i,
                  .len = ts_size(x, i),
                  .out = sizes[i],
                  .scale = scales[i],
                  .roi0 = roi ? roi[i] : 0,
                  .roi1 = roi ? roi[rank + i] : 1};
        if (d.out < 0 || (d.out > 0 && d.len == 0))
            return tso_fail(n, TS_ERR_SHAPE, "cannot resize dim %d of %s to %lld", i, tsi_desc(x),
                            (long long)d.out),
                   NULL;
        if (d.out == d.len && d.scale == 1 &&
            (r->ct != CT_TF_CROP_AND_RESIZE || (d.roi0 == 0 && d.roi1 == 1)))
            continue;
        changed = true;
        y = resize_dim(r, y, &d);
    }
    if (y && !changed) return ts_clone(x);
    return y && cast ? ts_to_dtype(y, dt) : y;
}

/* ------------------------------------------------------------------ inputs */
/* a small float vector (scales, roi) read to the host */
static int read_floats(const tso_node *n, ts_tensor *t, double *v, int max, const char *what) {
    if (!ts_dtype_is_floating(ts_dtype_of(t)))
        return tso_fail(n, TS_ERR_DTYPE, "%s must be a float tensor, got %s", what, tsi_desc(t)),
               -1;
    if (ts_ndim(t) != 1 || ts_numel(t) > max)
        return tso_fail(n, TS_ERR_SHAPE, "%s must be a vector of at most %d values, got %s", what,
                        max, tsi_desc(t)),
               -1;
    int64_t count = ts_numel(t);
    ts_tensor *h = ts_to_dtype(ts_to(t, ts_cpu()), TS_F64);
    if (!h || ts_copy_to_host(h, v, (size_t)count * sizeof *v) != TS_OK)
        return tso_fail_pending(n), -1;
    return (int)count;
}

/* output sizes from scales: floor(len * scale), the product in float64 */
static bool sizes_from_scales(const tso_node *n, ts_tensor *x, const double *scales, int count,
                              int64_t *sizes) {
    if (count != ts_ndim(x))
        return tso_fail(n, TS_ERR_SHAPE, "%d scales for the input %s", count, tsi_desc(x));
    for (int i = 0; i < count; i++) {
        if (!(scales[i] > 0)) return tso_fail(n, TS_ERR_ARG, "scale %g is not positive", scales[i]);
        sizes[i] = (int64_t)floor(scales[i] * (double)ts_size(x, i));
    }
    return true;
}

static bool run_legacy(const tso_node *n, ts_tensor *x, const double *scales, int count,
                       ts_tensor **out) {
    rcfg r;
    int64_t sizes[TS_MAX_DIMS];
    if (!read_cfg(n, true, &r) || !sizes_from_scales(n, x, scales, count, sizes)) return false;
    for (int i = 0; i < count && r.mode == M_NEAREST; i++)
        if (scales[i] < 1) /* the opset says nothing of downsampling's rounding (runtimes differ) */
            return tso_fail(n, TS_ERR_UNSUPPORTED,
                            "nearest downsampling (scale %g) is not defined before Resize-11",
                            scales[i]);
    out[0] = resize(n, &r, x, scales, sizes, NULL);
    return out[0] || tso_fail_pending(n);
}

TSO_NN_RUN(tso_nn_run_upsample7) {
    (void)c;
    const float *s;
    int count = tso_attr_floats(n, "scales", &s);
    double scales[TS_MAX_DIMS];
    if (count > TS_MAX_DIMS) return tso_fail(n, TS_ERR_SHAPE, "%d scales", count);
    for (int i = 0; i < count; i++) scales[i] = s[i];
    return run_legacy(n, in[0], scales, count, out);
}

/* Upsample-9 and Resize-10: the scales are the second input */
TSO_NN_RUN(tso_nn_run_upsample9) {
    (void)c;
    double scales[TS_MAX_DIMS];
    int count = read_floats(n, in[1], scales, TS_MAX_DIMS, "scales");
    return count >= 0 && run_legacy(n, in[0], scales, count, out);
}

TSO_NN_RUN(tso_nn_run_resize10) { return tso_nn_run_upsample9(c, n, in, out); }

/* Resize-11 and 13: X, roi, scales, sizes (sizes given: scales empty or absent) */
TSO_NN_RUN(tso_nn_run_resize11) {
    (void)c;
    ts_tensor *x = in[0], *roi_t = tso_nn_opt(n, in, 1), *scales_t = tso_nn_opt(n, in, 2);
    ts_tensor *sizes_t = tso_nn_opt(n, in, 3);
    rcfg r;
    if (!read_cfg(n, false, &r)) return false;
    int rank = ts_ndim(x);
    double scales[TS_MAX_DIMS], roi[2 * TS_MAX_DIMS];
    int64_t sizes[TS_MAX_DIMS];
    if (sizes_t) {
        if (scales_t) return tso_fail(n, TS_ERR_ARG, "scales and sizes are both given");
        int cnt = tso_read_ints(n, sizes_t, sizes, TS_MAX_DIMS, "sizes");
        if (cnt < 0) return false;
        if (cnt != rank)
            return tso_fail(n, TS_ERR_SHAPE, "%d sizes for the input %s", cnt, tsi_desc(x));
        for (int i = 0; i < rank; i++)
            scales[i] = ts_size(x, i) ? (double)sizes[i] / (double)ts_size(x, i) : 1;
    } else if (scales_t) {
        int cnt = read_floats(n, scales_t, scales, TS_MAX_DIMS, "scales");
        if (cnt < 0 || !sizes_from_scales(n, x, scales, cnt, sizes)) return false;
    } else {
        return tso_fail(n, TS_ERR_ARG, "needs scales or sizes");
    }
    bool crop = r.ct == CT_TF_CROP_AND_RESIZE;
    if (crop) {
        if (!roi_t) return tso_fail(n, TS_ERR_ARG, "tf_crop_and_resize needs roi");
        int cnt = read_floats(n, roi_t, roi, 2 * TS_MAX_DIMS, "roi");
        if (cnt < 0) return false;
        if (cnt != 2 * rank)
            return tso_fail(n, TS_ERR_SHAPE, "roi has %d values for rank %d", cnt, rank);
    }
    out[0] = resize(n, &r, x, scales, sizes, crop ? roi : NULL);
    return out[0] || tso_fail_pending(n);
}
