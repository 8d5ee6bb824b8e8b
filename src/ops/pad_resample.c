/* pad_resample.c — torch.nn.functional.pad, interpolate, pixel_shuffle and pixel_unshuffle,
 * composed from differentiable ops (index_select, cat, mul, add, adaptive_avg_pool2d, reshape,
 * permute), so they run and differentiate on every device.
 *
 * Each padded or resized dim is one gather: the source positions (and, for the interpolating
 * modes, their weights) of the output positions are computed on the host with PyTorch's own
 * arithmetic (aten/src/ATen/native/UpSample.h, PadNd / ReflectionPad / ReplicationPad: the same
 * float or double types, floorf and all), so the indices are PyTorch's exactly; they go to the
 * device as one small tensor and index_select gathers (its backward, index_add, is the scatter of
 * PyTorch's backward kernels). Without autograd, reflect / replicate / circular padding gathers all
 * its dims in one pass of the backend's gather_dims kernel from the same indices. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "autograd/autograd.h"
#include "autograd/trace.h"
#include "ops/pad_resample.h"

/* ------------------------------------------------------------------ shared pieces */
/* x's entries at positions idx[0..out) along dim */
static ts_tensor *take(ts_tensor *x, int dim, const int64_t *idx, int64_t out) {
    ts_tensor *i =
        ts_tensor_i64(TS_SHAPE(out), idx, (ts_opts){.dtype = TS_I64, .device = ts_device_of(x)});
    return i ? ts_index_select(x, dim, i) : NULL;
}

/* per-position weights w[0..out) as a tensor of x's dtype shaped to broadcast along dim */
static ts_tensor *along(ts_tensor *x, int dim, const double *w, int64_t out) {
    ts_shape s = {.ndim = ts_ndim(x)};
    for (int i = 0; i < s.ndim; i++) s.dims[i] = i == dim ? out : 1;
    ts_tensor *t = ts_tensor_f64(s, w, (ts_opts){.dtype = TS_F64, .device = ts_device_of(x)});
    return t ? ts_to_dtype(t, ts_dtype_of(x)) : NULL;
}

/* y = sum_k x[idx_k] * w_k along dim: k taps, idx and w tap-major ([k][out]); w NULL: one tap,
 * no weight */
static ts_tensor *gather_taps(ts_tensor *x, int dim, int k, const int64_t *idx, const double *w,
                              int64_t out) {
    ts_tensor *acc = NULL;
    for (int j = 0; j < k; j++) {
        ts_tensor *v = take(x, dim, idx + (size_t)j * (size_t)out, out);
        if (v && w) v = ts_mul(v, along(x, dim, w + (size_t)j * (size_t)out, out));
        acc = !v ? NULL : acc ? ts_add(acc, v) : v;
        if (!acc) return NULL;
    }
    return acc;
}

static void *host_alloc(const char *op, size_t n, size_t size) {
    void *p = calloc(n ? n : 1, size);
    if (!p) tsi_error_set(TS_ERR_OOM, "%s: out of host memory for %zu indices", op, n);
    return p;
}

/* ================================================================== pad */
static const char *const pad_mode_names[] = {"constant", "reflect", "replicate", "circular"};

/* the entries of the output along one padded dim of size len, PyTorch's formulas (pl, pr may be
 * negative: they crop) */
static void pad_positions(ts_pad_mode m, int64_t len, int64_t pl, int64_t pr, int64_t *idx) {
    const int64_t out = len + pl + pr;
    const int64_t in_start = pl < 0 ? -pl : 0, out_start = pl > 0 ? pl : 0;
    if (m == TS_PAD_CIRCULAR) {
        /* crop, then wrap around the cropped part */
        const int64_t kept = len - in_start - (pr < 0 ? -pr : 0);
        for (int64_t j = 0; j < out; j++) {
            int64_t r = (j - out_start) % kept;
            idx[j] = in_start + (r < 0 ? r + kept : r);
        }
        return;
    }
    for (int64_t j = 0; j < out; j++) {
        int64_t p;
        if (m == TS_PAD_REFLECT)
            p = j < pl ? 2 * pl - j : j < len + pl ? j : 2 * (len + pl - 1) - j;
        else
            p = j < pl ? pl : j < len + pl ? j : len + pl - 1;
        idx[j] = p - out_start + in_start;
    }
}

/* Constant padding of one dim: `before` / `after` entries of value, negative amounts crop (a
 * crop past the other end leaves the dim empty); the ONNX importer's Pad and padded pools too. */
ts_tensor *tsi_pad_constant_dim(ts_tensor *x, int dim, int64_t before, int64_t after,
                                double value) {
    if (!x) return NULL;
    const int64_t len = ts_size(x, dim);
    if (before < 0 || after < 0) {
        int64_t start = before < 0 ? -before : 0, end = after < 0 ? len + after : len;
        if (end < start) end = start;
        x = ts_slice(x, dim, start, end, 1);
        before = before > 0 ? before : 0;
        after = after > 0 ? after : 0;
    }
    if (!x || (!before && !after)) return x;
    ts_opts o = {.dtype = ts_dtype_of(x), .device = ts_device_of(x)};
    ts_shape s = ts_shape_of(x);
    ts_tensor *parts[3];
    int k = 0;
    if (before) {
        s.dims[dim] = before;
        parts[k++] = ts_full(s, value, o);
    }
    parts[k++] = x;
    if (after) {
        s.dims[dim] = after;
        parts[k++] = ts_full(s, value, o);
    }
    for (int i = 0; i < k; i++)
        if (!parts[i]) return NULL;
    return ts_cat(parts, k, dim);
}

/* PyTorch's checks of reflect / replicate / circular padding over the last k dims */
static bool pad_check_nonconstant(const char *op, ts_tensor *x, const int64_t *pad, int k,
                                  ts_pad_mode m) {
    const int nd = ts_ndim(x);
    const ts_shape s = ts_shape_of(x);
    const char *mname = pad_mode_names[m];
    if (m != TS_PAD_CIRCULAR) {
        const bool batch = nd == k + 2;
        for (int d = batch ? 1 : 0; d < nd; d++)
            if (s.dims[d] == 0)
                return tsi_error_set(TS_ERR_SHAPE,
                                     "%s: Expected %dD or %dD (batch mode) tensor with possibly 0 "
                                     "batch size and other non-zero dimensions for input, but "
                                     "got: %s",
                                     op, k + 1, k + 2, tsi_shape_str(s)),
                       false;
    }
    bool small = false;
    for (int i = 0; i < k; i++) {
        const int d = nd - 1 - i;
        const int64_t len = s.dims[d], pl = pad[2 * i], pr = pad[2 * i + 1];
        if (m == TS_PAD_REFLECT && !(pl < len && pr < len))
            return tsi_error_set(TS_ERR_ARG,
                                 "%s: Argument #%d: Padding size should be less than the "
                                 "corresponding input dimension, but got: padding (%lld, %lld) at "
                                 "dimension %d of input %s (mode '%s')",
                                 op, 4 + 2 * i, (long long)pl, (long long)pr, d, tsi_shape_str(s),
                                 mname),
                   false;
        if (m == TS_PAD_CIRCULAR) {
            if (pl > len || pr > len)
                return tsi_error_set(TS_ERR_ARG,
                                     "%s: Padding value causes wrapping around more than once. "
                                     "(circular padding (%lld, %lld) of dimension %d of input %s)",
                                     op, (long long)pl, (long long)pr, d, tsi_shape_str(s)),
                       false;
            if (len + pl + pr < 0)
                return tsi_error_set(TS_ERR_ARG,
                                     "%s: Negative padding value is resulting in an empty "
                                     "dimension (circular padding (%lld, %lld) of dimension %d of "
                                     "input %s)",
                                     op, (long long)pl, (long long)pr, d, tsi_shape_str(s)),
                       false;
            const int64_t kept = len - (pl < 0 ? -pl : 0) - (pr < 0 ? -pr : 0);
            if (len + pl + pr > 0 && (pl > 0 || pr > 0) && (kept <= 0 || pl > kept || pr > kept))
                return tsi_error_set(TS_ERR_ARG,
                                     "%s: circular padding (%lld, %lld) of dimension %d of input "
                                     "%s wraps around the %lld entries left after cropping more "
                                     "than once (PyTorch refuses it too)",
                                     op, (long long)pl, (long long)pr, d, tsi_shape_str(s),
                                     (long long)(kept > 0 ? kept : 0)),
                       false;
        } else if (len + pl + pr < 1) {
            small = true;
        }
    }
    if (small) { /* "input (H: 3, W: 3) is too small. Calculated output H: 1 W: 0" */
        static const char letters[] = "WHD";
        char in_s[160] = "", out_s[160] = "";
        size_t a = 0, b = 0;
        for (int i = k - 1; i >= 0; i--) {
            const int d = nd - 1 - i;
            a += (size_t)snprintf(in_s + a, sizeof in_s - a, "%s%c: %lld", i == k - 1 ? "" : ", ",
                                  letters[i], (long long)s.dims[d]);
            b += (size_t)snprintf(out_s + b, sizeof out_s - b, "%s%c: %lld", i == k - 1 ? "" : " ",
                                  letters[i], (long long)(s.dims[d] + pad[2 * i] + pad[2 * i + 1]));
        }
        return tsi_error_set(TS_ERR_SHAPE, "%s: input (%s) is too small. Calculated output %s", op,
                             in_s, out_s),
               false;
    }
    return true;
}

/* Reflect / replicate / circular padding of the last k dims in one pass through the backend's
 * gather_dims (the same source positions as the index_selects below); NULL with no error set when
 * the backend has none, the input or output is empty, a graph is needed (index_select's backward
 * is the scatter) or ONNX export traces (it records the index_selects). */
static ts_tensor *pad_gather_dims(const char *op, ts_tensor *x, const int64_t *pad, int k,
                                  ts_pad_mode mode) {
    const ts_backend *be = tsi_be(x);
    if (!be->gather_dims || tsi_trace_active || tsi_needs_graph(&x, 1) || !ts_numel(x)) return NULL;
    const int nd = ts_ndim(x);
    ts_shape s = ts_shape_of(x);
    int64_t total = 0;
    for (int i = 0; i < k; i++) {
        s.dims[nd - 1 - i] += pad[2 * i] + pad[2 * i + 1];
        total += s.dims[nd - 1 - i];
    }
    if (!tsi_numel(s)) return NULL;
    int64_t *idx = host_alloc(op, (size_t)total, sizeof *idx);
    if (!idx) return NULL;
    ts_tensor *tab[3] = {NULL, NULL, NULL};
    int64_t at = 0;
    bool ok = true;
    for (int i = 0; i < k && ok; i++) {
        const int d = nd - 1 - i;
        const int64_t len = ts_size(x, d);
        pad_positions(mode, len, pad[2 * i], pad[2 * i + 1], idx + at);
        for (int64_t j = 0; j < s.dims[d] && ok; j++) ok = idx[at + j] >= 0 && idx[at + j] < len;
        if (!ok) break; /* never for checked paddings: index_select's checks then speak */
        tab[i] = ts_tensor_i64(TS_SHAPE(s.dims[d]), idx + at,
                               (ts_opts){.dtype = TS_I64, .device = ts_device_of(x)});
        ok = tab[i] != NULL;
        at += s.dims[d];
    }
    free(idx);
    ts_tensor *y = ok ? tsi_own(tsi_new(op, s, ts_dtype_of(x), ts_device_of(x))) : NULL;
    if (!y) return NULL;
    ts_kview kt[3];
    for (int i = 0; i < k; i++) kt[i] = tsi_kview(tab[i]);
    const ts_kview ko = tsi_kview(y), ki = tsi_kview(x);
    be->gather_dims(be, tsi_dev_index(y), &ko, &ki, k, kt);
    return y;
}

static ts_tensor *pad_body(const char *op, ts_tensor *x, const int64_t *pad, int k,
                           ts_pad_mode mode, double value) {
    const int nd = ts_ndim(x);
    if (mode != TS_PAD_CONSTANT) {
        ts_tensor *g = pad_gather_dims(op, x, pad, k, mode);
        if (g || ts_error() != TS_OK) return g;
    }
    ts_tensor *y = x;
    for (int i = 0; i < k && y; i++) {
        const int d = nd - 1 - i;
        const int64_t pl = pad[2 * i], pr = pad[2 * i + 1];
        if (mode == TS_PAD_CONSTANT) {
            y = tsi_pad_constant_dim(y, d, pl, pr, value);
            continue;
        }
        if (!pl && !pr) continue;
        const int64_t len = ts_size(y, d), out = len + pl + pr;
        int64_t *idx = host_alloc(op, (size_t)out, sizeof *idx);
        if (!idx) return NULL;
        pad_positions(mode, len, pl, pr, idx);
        y = take(y, d, idx, out);
        free(idx);
    }
    return y == x && y ? ts_clone(x) : y;
}

ts_tensor *ts_pad(ts_tensor *x, const int64_t *pad, int npad, ts_pad_mode mode, double value) {
    const char *op = "pad";
    tsi_init();
    if (!tsi_check_input(op, x, "input")) return NULL;
    if ((unsigned)mode > TS_PAD_CIRCULAR)
        return tsi_error_set(TS_ERR_ARG, "%s: Unrecognised padding mode %d", op, (int)mode), NULL;
    if (npad < 0 || (npad > 0 && !pad))
        return tsi_error_set(TS_ERR_ARG, "%s: pad is NULL or npad (%d) is negative", op, npad),
               NULL;
    if (npad % 2 != 0)
        return tsi_error_set(TS_ERR_ARG, "%s: Padding length must be divisible by 2", op), NULL;
    const int nd = ts_ndim(x), k = npad / 2;
    if (k > nd)
        return tsi_error_set(TS_ERR_ARG,
                             "%s: Padding length should be less than or equal to two times the "
                             "input dimension but got padding length %d and input of dimension %d",
                             op, npad, nd),
               NULL;
    if (mode == TS_PAD_CONSTANT) {
        for (int i = 0; i < k; i++) {
            const int d = nd - 1 - i;
            const int64_t len = ts_size(x, d), out = len + pad[2 * i] + pad[2 * i + 1];
            if (out < 0)
                return tsi_error_set(TS_ERR_ARG,
                                     "%s: The input size %lld, plus negative padding %lld and "
                                     "%lld resulted in a negative output size, which is invalid. "
                                     "Check dimension %d of your input.",
                                     op, (long long)len, (long long)pad[2 * i],
                                     (long long)pad[2 * i + 1], d),
                       NULL;
        }
    } else {
        if (value != 0)
            return tsi_error_set(TS_ERR_ARG,
                                 "%s: Padding mode \"%s\" doesn't take in value argument", op,
                                 pad_mode_names[mode]),
                   NULL;
        if (!(k >= 1 && k <= 3 && (nd == k + 1 || nd == k + 2)))
            return tsi_error_set(TS_ERR_ARG,
                                 "%s: Padding size %d is not supported for %dD input tensor. "
                                 "Supported combinations for non-constant padding: 2D or 3D "
                                 "input: padding size = 2 (pads last dimension); 3D or 4D input: "
                                 "padding size = 4 (pads last 2 dimensions); 4D or 5D input: "
                                 "padding size = 6 (pads last 3 dimensions) (mode '%s')",
                                 op, npad, nd, pad_mode_names[mode]),
                   NULL;
        const ts_dtype dt = ts_dtype_of(x);
        if (dt == TS_BOOL && mode != TS_PAD_CIRCULAR)
            return tsi_error_set(TS_ERR_DTYPE, "%s: \"%s_pad%dd\" not implemented for 'Bool'", op,
                                 mode == TS_PAD_REFLECT ? "reflection" : "replication", k),
                   NULL;
        if (!pad_check_nonconstant(op, x, pad, k, mode)) return NULL;
    }
    tsi_log_op(op, tsi_device(x)); /* its parts run in a scope of their own: one span */
    ts_scope_begin();
    ts_tensor *y = pad_body(op, x, pad, k, mode, value);
    y = ts_error() == TS_OK && y ? ts_retain(y) : NULL;
    ts_scope_end();
    return tsi_own(y);
}

/* ================================================================== interpolate */
/* PyTorch's compute_scales_value / area_pixel_compute_scale / area_pixel_compute_source_index
 * (UpSample.h), in float (the opmath of float32, float16 and bfloat16) and in double. has_scale:
 * the user's scale factor is used (recompute_scale_factor not true). */
#define SCALE_FNS(T, SUF)                                                                          \
    static T scales_value_##SUF(bool has_scale, double scale, int64_t in, int64_t out) {           \
        return has_scale && scale > 0. ? (T)(1.0 / scale) : (T)in / (T)out;                        \
    }                                                                                              \
    static T pixel_scale_##SUF(int64_t in, int64_t out, bool ac, bool has_scale, double scale) {   \
        if (ac) return out > 1 ? (T)(in - 1) / (T)(out - 1) : (T)0;                                \
        return scales_value_##SUF(has_scale, scale, in, out);                                      \
    }                                                                                              \
    static T source_index_##SUF(T scale, int64_t dst, bool ac, bool cubic) {                       \
        if (ac) return scale * (T)dst;                                                             \
        T src = scale * ((T)dst + (T)0.5) - (T)0.5;                                                \
        return (!cubic && src < (T)0) ? (T)0 : src;                                                \
    }                                                                                              \
    /* guard_index_and_lambda: floorf even for double, as PyTorch */                               \
    static int64_t guard_##SUF(T real, int64_t in, T *lambda) {                                    \
        int64_t i = (int64_t)floorf((float)real);                                                  \
        if (i > in - 1) i = in - 1;                                                                \
        T l = real - (T)i;                                                                         \
        *lambda = l < (T)0 ? (T)0 : l > (T)1 ? (T)1 : l;                                           \
        return i;                                                                                  \
    }                                                                                              \
    static T cubic1_##SUF(T x, T a) { return ((a + 2) * x - (a + 3)) * x * x + 1; }                \
    static T cubic2_##SUF(T x, T a) { return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a; }

SCALE_FNS(float, f)
SCALE_FNS(double, d)

typedef struct resize_dim {
    int64_t in, out;
    bool has_scale; /* use scale (PyTorch's scales_h etc.) */
    double scale;
    bool align_corners;
    bool nearest_idx; /* nearest modes: UpSample.h's nearest_idx / nearest_exact_idx */
} resize_dim;

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t clamp64(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : v > hi ? hi : v; }

/* nearest and nearest-exact as PyTorch's CPU kernels compute them. 1-D and 3-D (and 2-D with a
 * large output) run HelperInterpNearest / HelperInterpNearestExact (UpSampleKernel.cpp): the scale
 * in the opmath type, floor(scale * j) and floor(max(scale * (j + 0.5) - 0.5, 0) + 0.5), through
 * floorf, no special sizes. 2-D outputs of H + W <= 128 (and channels_last inputs of more than 3
 * channels) run the channels-last kernel over UpSample.h's nearest_idx / nearest_exact_idx: a
 * float scale, floor(j * scale) and floor((j + 0.5) * scale), an unchanged size the identity and
 * a doubled one j >> 1. (CUDA's kernels differ again; CPU's are the reference.) */
static void nearest_idx_taps(const resize_dim *r, bool exact, int64_t *idx) {
    const float s = scales_value_f(r->has_scale, r->scale, r->in, r->out);
    for (int64_t j = 0; j < r->out; j++) {
        if (exact)
            idx[j] = min64((int64_t)floorf((float)(((double)j + 0.5) * (double)s)), r->in - 1);
        else if (r->out == r->in)
            idx[j] = j;
        else if (r->out == 2 * r->in)
            idx[j] = j >> 1;
        else
            idx[j] = min64((int64_t)floorf((float)j * s), r->in - 1);
    }
}

/* HelperInterpNearest / HelperInterpNearestExact (UpSampleKernel.cpp): the scale in the opmath
 * type, floor(scale * j) and floor(max(scale * (j + 0.5) - 0.5, 0) + 0.5), each through floorf as
 * there (no special case for an unchanged or doubled size) */
#define NEAREST_TAPS(T, SUF)                                                                       \
    static void nearest_taps_##SUF(const resize_dim *r, bool exact, int64_t *idx) {                \
        const T scale = pixel_scale_##SUF(r->in, r->out, false, r->has_scale, r->scale);           \
        for (int64_t j = 0; j < r->out; j++) {                                                     \
            const double real = exact ? (double)source_index_##SUF(scale, j, false, false) + 0.5   \
                                      : (double)(scale * (T)j);                                    \
            idx[j] = min64((int64_t)floorf((float)real), r->in - 1);                               \
        }                                                                                          \
    }

NEAREST_TAPS(float, f)
NEAREST_TAPS(double, d)

/* compute_source_index_and_lambda: two taps */
#define LINEAR_TAPS(T, SUF)                                                                        \
    static void linear_taps_##SUF(const resize_dim *r, int64_t *idx, double *w) {                  \
        const int64_t n = r->out;                                                                  \
        const T scale =                                                                            \
            pixel_scale_##SUF(r->in, r->out, r->align_corners, r->has_scale, r->scale);            \
        for (int64_t j = 0; j < n; j++) {                                                          \
            T l1;                                                                                  \
            int64_t i0 =                                                                           \
                guard_##SUF(source_index_##SUF(scale, j, r->align_corners, false), r->in, &l1);    \
            idx[j] = i0;                                                                           \
            idx[n + j] = i0 + (i0 < r->in - 1 ? 1 : 0);                                            \
            w[j] = (double)((T)1 - l1);                                                            \
            w[n + j] = (double)l1;                                                                 \
        }                                                                                          \
    }                                                                                              \
    /* get_cubic_upsample_coefficients, taps i0 - 1 .. i0 + 2 clamped into the input */            \
    static void cubic_taps_##SUF(const resize_dim *r, int64_t *idx, double *w) {                   \
        const int64_t n = r->out;                                                                  \
        const T scale =                                                                            \
            pixel_scale_##SUF(r->in, r->out, r->align_corners, r->has_scale, r->scale);            \
        const T a = (T)-0.75;                                                                      \
        for (int64_t j = 0; j < n; j++) {                                                          \
            T t;                                                                                   \
            int64_t i0 =                                                                           \
                guard_##SUF(source_index_##SUF(scale, j, r->align_corners, true), r->in, &t);      \
            T x2 = (T)(1.0 - t);                                                                   \
            T c[4] = {cubic2_##SUF((T)(t + 1.0), a), cubic1_##SUF(t, a), cubic1_##SUF(x2, a),      \
                      cubic2_##SUF((T)(x2 + 1.0), a)};                                             \
            for (int k = 0; k < 4; k++) {                                                          \
                idx[k * n + j] = clamp64(i0 - 1 + k, 0, r->in - 1);                                \
                w[k * n + j] = (double)c[k];                                                       \
            }                                                                                      \
        }                                                                                          \
    }

LINEAR_TAPS(float, f)
LINEAR_TAPS(double, d)

/* antialias=True (_upsample_bilinear2d_aa / _upsample_bicubic2d_aa, UpSampleKernel.cpp's
 * _compute_weights_aa): output j takes inputs [xmin, xmin + xsize) around center = scale (j + 0.5)
 * within support = taps / 2 * max(scale, 1), weighted by the filter (triangle; Keys' cubic with
 * a = -0.5, PIL's) at (i - center + 0.5) / max(scale, 1), renormalised to sum 1; weights in double
 * (PyTorch's float32 kernel computes them in float: a rounding apart). Taps tap-major, padded
 * with weight 0; returns the taps per output, 0 when out of memory. */
static double aa_filter(double x, bool cubic) {
    x = fabs(x);
    if (!cubic) return x < 1.0 ? 1.0 - x : 0.0;
    return x < 1.0 ? cubic1_d(x, -0.5) : x < 2.0 ? cubic2_d(x, -0.5) : 0.0;
}

static int aa_taps(const char *op, const resize_dim *r, bool cubic, int64_t **idx, double **w) {
    const double scale = pixel_scale_d(r->in, r->out, r->align_corners, r->has_scale, r->scale);
    const double support = (cubic ? 2.0 : 1.0) * (scale >= 1.0 ? scale : 1.0);
    const double invscale = scale >= 1.0 ? 1.0 / scale : 1.0;
    const int k = (int)ceil(support) * 2 + 1;
    const int64_t n = r->out;
    *idx = host_alloc(op, (size_t)k * (size_t)n, sizeof **idx);
    *w = host_alloc(op, (size_t)k * (size_t)n, sizeof **w);
    if (!*idx || !*w) return 0;
    for (int64_t j = 0; j < n; j++) {
        const double center = scale * ((double)j + 0.5);
        int64_t lo = (int64_t)(center - support + 0.5), hi = (int64_t)(center + support + 0.5);
        lo = lo < 0 ? 0 : lo;
        hi = hi > r->in ? r->in : hi;
        double total = 0.0;
        for (int t = 0; t < k; t++) {
            const int64_t i = lo + t;
            const double f = i < hi ? aa_filter(((double)i - center + 0.5) * invscale, cubic) : 0;
            (*idx)[(size_t)t * (size_t)n + (size_t)j] = i < hi ? i : lo;
            (*w)[(size_t)t * (size_t)n + (size_t)j] = f;
            total += f;
        }
        if (total != 0.0)
            for (int t = 0; t < k; t++) (*w)[(size_t)t * (size_t)n + (size_t)j] /= total;
    }
    return k;
}

static ts_tensor *resize_one_dim(const char *op, ts_tensor *x, int dim, ts_interp_mode mode,
                                 const resize_dim *r, bool antialias) {
    const bool dbl = ts_dtype_of(x) == TS_F64;
    const bool linear =
        mode == TS_INTERP_LINEAR || mode == TS_INTERP_BILINEAR || mode == TS_INTERP_TRILINEAR;
    if (antialias) {
        int64_t *idx = NULL;
        double *w = NULL;
        const int k = aa_taps(op, r, mode == TS_INTERP_BICUBIC, &idx, &w);
        ts_tensor *y = k ? gather_taps(x, dim, k, idx, w, r->out) : NULL;
        free(idx);
        free(w);
        return y;
    }
    /* an unchanged size: linear is the identity in PyTorch's kernel (compute_source_index_and_
     * lambda) and nearest in nearest_idx, whatever the scale; the others only without a scale */
    if (r->out == r->in &&
        (linear || !r->has_scale || (mode == TS_INTERP_NEAREST && r->nearest_idx)))
        return x;
    const int k = linear ? 2 : mode == TS_INTERP_BICUBIC ? 4 : 1;
    int64_t *idx = host_alloc(op, (size_t)k * (size_t)r->out, sizeof *idx);
    double *w = k > 1 ? host_alloc(op, (size_t)k * (size_t)r->out, sizeof *w) : NULL;
    ts_tensor *y = NULL;
    if (idx && (k == 1 || w)) {
        if (k == 1)
            r->nearest_idx ? nearest_idx_taps(r, mode == TS_INTERP_NEAREST_EXACT, idx)
            : dbl          ? nearest_taps_d(r, mode == TS_INTERP_NEAREST_EXACT, idx)
                           : nearest_taps_f(r, mode == TS_INTERP_NEAREST_EXACT, idx);
        else if (linear)
            dbl ? linear_taps_d(r, idx, w) : linear_taps_f(r, idx, w);
        else
            dbl ? cubic_taps_d(r, idx, w) : cubic_taps_f(r, idx, w);
        y = gather_taps(x, dim, k, idx, w, r->out);
    }
    free(idx);
    free(w);
    return y;
}

/* 'area': adaptive average pooling over the k spatial dims (adaptive_avg_pool1d/2d/3d), on the
 * 2-D pooling kernel: 1-D as [N, C, 1, L]; 3-D as H, W pooled then D (a W of H' W' kept as is) */
static ts_tensor *area(ts_tensor *x, int k, const int64_t *out) {
    ts_shape s = ts_shape_of(x);
    if (k == 1) return ts_squeeze_dim(ts_adaptive_avg_pool2d(ts_unsqueeze(x, 2), 1, out[0]), 2);
    if (k == 2) return ts_adaptive_avg_pool2d(x, out[0], out[1]);
    const int64_t n = s.dims[0], c = s.dims[1], d = s.dims[2];
    ts_tensor *y = ts_reshape(x, TS_SHAPE(n, c * d, s.dims[3], s.dims[4]));
    y = ts_adaptive_avg_pool2d(y, out[1], out[2]);
    y = ts_reshape(y, TS_SHAPE(n, c, d, out[1] * out[2]));
    y = ts_adaptive_avg_pool2d(y, out[0], out[1] * out[2]);
    return ts_reshape(y, TS_SHAPE(n, c, out[0], out[1], out[2]));
}

static const char *interp_kernel_name(ts_interp_mode m, int k) {
    static const char *const names[][3] = {
        {"upsample_nearest1d", "upsample_nearest2d", "upsample_nearest3d"},
        {"_upsample_nearest_exact1d", "_upsample_nearest_exact2d", "_upsample_nearest_exact3d"},
        {"upsample_linear1d", "upsample_linear1d", "upsample_linear1d"},
        {"upsample_bilinear2d", "upsample_bilinear2d", "upsample_bilinear2d"},
        {"upsample_bicubic2d", "upsample_bicubic2d", "upsample_bicubic2d"},
        {"upsample_trilinear3d", "upsample_trilinear3d", "upsample_trilinear3d"},
        {"adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d"}};
    return names[m][k - 1];
}

static bool interp_check(const char *op, ts_tensor *x, const ts_interp_opts *o, int64_t *out,
                         resize_dim *rd) {
    static const char *const mode_names[] = {"nearest", "nearest-exact", "linear", "bilinear",
                                             "bicubic", "trilinear",     "area"};
    if ((unsigned)o->mode > TS_INTERP_AREA)
        return tsi_error_set(TS_ERR_ARG, "%s: unknown mode %d", op, (int)o->mode), false;
    const char *mname = mode_names[o->mode];
    const int nd = ts_ndim(x), k = nd - 2;
    if (nd < 3 || nd > 5)
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s: Input Error: Only 3D, 4D and 5D input Tensors supported (got "
                             "%dD) for the modes: nearest | linear | bilinear | bicubic | "
                             "trilinear | area | nearest-exact (got %s)",
                             op, nd, mname),
               false;
    static const int need[] = {0, 0, 1, 2, 2, 3, 0};
    if (need[o->mode] && need[o->mode] != k)
        return tsi_error_set(TS_ERR_SHAPE, "%s: Got %dD input, but %s mode needs %dD input", op, nd,
                             mname, need[o->mode] + 2),
               false;
    if (o->antialias &&
        !((o->mode == TS_INTERP_BILINEAR || o->mode == TS_INTERP_BICUBIC) && k == 2))
        return tsi_error_set(TS_ERR_ARG,
                             "%s: Anti-alias option is restricted to bilinear and bicubic modes "
                             "and requires a 4-D tensor as input (mode '%s', %dD input)",
                             op, mname, nd),
               false;
    const bool nearest_like = o->mode == TS_INTERP_NEAREST || o->mode == TS_INTERP_NEAREST_EXACT ||
                              o->mode == TS_INTERP_AREA;
    if (nearest_like && o->align_corners)
        return tsi_error_set(TS_ERR_ARG,
                             "%s: align_corners option can only be set with the interpolating "
                             "modes: linear | bilinear | bicubic | trilinear (mode '%s')",
                             op, mname),
               false;
    if ((o->size != NULL) == (o->scale_factor != NULL))
        return tsi_error_set(TS_ERR_ARG,
                             o->size ? "%s: only one of size or scale_factor should be defined"
                                     : "%s: either size or scale_factor should be defined",
                             op),
               false;
    if (o->n != k)
        return tsi_error_set(TS_ERR_ARG,
                             "%s: Input and %s must have the same number of spatial dimensions, "
                             "but got input %s with %d spatial dimensions and %d values",
                             op, o->size ? "output" : "scale_factor", tsi_desc(x), k, o->n),
               false;
    if (o->recompute_scale_factor && o->size)
        return tsi_error_set(TS_ERR_ARG,
                             "%s: recompute_scale_factor is not meaningful with an explicit size.",
                             op),
               false;
    const ts_dtype dt = ts_dtype_of(x);
    const bool dt_ok =
        tsi_is_float(dt) ||
        (dt == TS_U8 && (o->mode == TS_INTERP_NEAREST || o->mode == TS_INTERP_NEAREST_EXACT));
    if (!dt_ok)
        return tsi_error_set(TS_ERR_DTYPE, "%s: \"%s\" not implemented for '%s' (input %s)", op,
                             interp_kernel_name(o->mode, k), tsi_torch_scalar_name(dt),
                             tsi_desc(x)),
               false;
    const ts_shape s = ts_shape_of(x);
    bool positive = true;
    for (int i = 0; i < k; i++) {
        const int64_t in = s.dims[2 + i];
        if (o->size) {
            out[i] = o->size[i];
            if (out[i] < 0)
                return tsi_error_set(TS_ERR_ARG, "%s: output size %lld is negative", op,
                                     (long long)out[i]),
                       false;
        } else {
            const double f = o->scale_factor[i];
            if (!(f > 0) || !isfinite(f))
                return tsi_error_set(TS_ERR_ARG, "%s: scale_factor %g must be positive and finite",
                                     op, f),
                       false;
            const double v = floor((double)in * f);
            if (v > 9.0e15)
                return tsi_error_set(TS_ERR_ARG, "%s: scale_factor %g gives too large a size", op,
                                     f),
                       false;
            out[i] = (int64_t)v;
        }
        rd[i] = (resize_dim){.in = in,
                             .out = out[i],
                             .has_scale = o->scale_factor && !o->recompute_scale_factor &&
                                          o->mode != TS_INTERP_AREA,
                             .scale = o->scale_factor ? o->scale_factor[i] : 0,
                             .align_corners = o->align_corners};
        positive = positive && in > 0 && out[i] > 0;
    }
    if (!positive && o->mode != TS_INTERP_AREA) {
        static const char letters[] = "DHW";
        char in_s[96] = "", out_s[96] = "";
        size_t a = 0, b = 0;
        for (int i = 0; i < k; i++) {
            const char l = letters[3 - k + i];
            a += (size_t)snprintf(in_s + a, sizeof in_s - a, "%s%c: %lld", i ? ", " : "", l,
                                  (long long)s.dims[2 + i]);
            b += (size_t)snprintf(out_s + b, sizeof out_s - b, "%s%c: %lld", i ? ", " : "", l,
                                  (long long)out[i]);
        }
        return tsi_error_set(TS_ERR_SHAPE,
                             k == 1 ? "%s: Input and output sizes should be greater than 0, but "
                                      "got input (%s) and output (%s)"
                                    : "%s: Input and output sizes should be greater than 0, but "
                                      "got input (%s) output (%s)",
                             op, in_s, out_s),
               false;
    }
    return true;
}

ts_tensor *ts_interpolate(ts_tensor *x, ts_interp_opts o) {
    const char *op = "interpolate";
    tsi_init();
    if (!tsi_check_input(op, x, "input")) return NULL;
    int64_t out[3];
    resize_dim rd[3];
    if (!interp_check(op, x, &o, out, rd)) return NULL;
    const int k = ts_ndim(x) - 2;
    const ts_dtype dt = ts_dtype_of(x);
    /* _use_channels_last_kernel_2d (UpSampleKernel.cpp) */
    const bool idx2d =
        k == 2 && (out[0] + out[1] <= 128 ||
                   (ts_is_contiguous_format(x, TS_CHANNELS_LAST) && ts_size(x, 1) > 3));
    for (int i = 0; i < k; i++) rd[i].nearest_idx = idx2d;
    ts_scope_begin();
    ts_tensor *y;
    if (o.mode == TS_INTERP_AREA) {
        y = area(x, k, out);
    } else {
        /* interpolation in float for float16 / bfloat16 (PyTorch's opmath), rounded once */
        const bool up = o.mode != TS_INTERP_NEAREST && o.mode != TS_INTERP_NEAREST_EXACT &&
                        (dt == TS_F16 || dt == TS_BF16);
        y = up ? ts_to_dtype(x, TS_F32) : x;
        for (int i = 0; i < k && y; i++)
            y = resize_one_dim(op, y, 2 + i, o.mode, &rd[i], o.antialias);
        if (y == x)
            y = ts_clone(x); /* every size unchanged: a copy, as PyTorch */
        else if (up)
            y = ts_to_dtype(y, dt);
    }
    y = ts_error() == TS_OK && y ? ts_keep(y) : NULL;
    ts_scope_end();
    return y;
}

/* ================================================================== pixel_shuffle */
static ts_tensor *shuffle(ts_tensor *x, int64_t r, bool inverse) {
    const char *op = inverse ? "pixel_unshuffle" : "pixel_shuffle";
    const char *what = inverse ? "downscale_factor" : "upscale_factor";
    tsi_init();
    if (!tsi_check_input(op, x, "input")) return NULL;
    const int nd = ts_ndim(x);
    if (nd < 3)
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s expects input to have at least 3 dimensions, but got input with "
                             "%d dimension(s)",
                             op, nd),
               NULL;
    if (r <= 0)
        return tsi_error_set(TS_ERR_ARG, "%s expects a positive %s, but got %lld", op, what,
                             (long long)r),
               NULL;
    ts_shape s = ts_shape_of(x);
    const int64_t c = s.dims[nd - 3], h = s.dims[nd - 2], w = s.dims[nd - 1];
    if (!inverse && c % (r * r) != 0)
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s expects its input's 'channel' dimension to be divisible by the "
                             "square of upscale_factor, but input.size(-3)=%lld is not divisible "
                             "by %lld",
                             op, (long long)c, (long long)(r * r)),
               NULL;
    if (inverse && (h % r != 0 || w % r != 0))
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s expects %s to be divisible by downscale_factor, but "
                             "input.size(%d)=%lld is not divisible by %lld",
                             op, h % r ? "height" : "width", h % r ? -2 : -1,
                             (long long)(h % r ? h : w), (long long)r),
               NULL;
    int64_t b = 1;
    for (int i = 0; i < nd - 3; i++) b *= s.dims[i];
    ts_shape o = s;
    ts_scope_begin();
    ts_tensor *y;
    if (!inverse) { /* [B, C, r, r, H, W] -> [B, C, H, r, W, r] */
        y = ts_reshape(x, TS_SHAPE(b, c / (r * r), r, r, h, w));
        y = ts_permute(y, TS_DIMS(0, 1, 4, 2, 5, 3));
        o.dims[nd - 3] = c / (r * r), o.dims[nd - 2] = h * r, o.dims[nd - 1] = w * r;
    } else { /* [B, C, H/r, r, W/r, r] -> [B, C, r, r, H/r, W/r] */
        y = ts_reshape(x, TS_SHAPE(b, c, h / r, r, w / r, r));
        y = ts_permute(y, TS_DIMS(0, 1, 3, 5, 2, 4));
        o.dims[nd - 3] = c * r * r, o.dims[nd - 2] = h / r, o.dims[nd - 1] = w / r;
    }
    y = ts_contiguous(y);
    y = y ? ts_reshape(y, o) : NULL;
    y = ts_error() == TS_OK && y ? ts_keep(y) : NULL;
    ts_scope_end();
    return y;
}

ts_tensor *ts_pixel_shuffle(ts_tensor *x, int64_t upscale_factor) {
    return shuffle(x, upscale_factor, false);
}

ts_tensor *ts_pixel_unshuffle(ts_tensor *x, int64_t downscale_factor) {
    return shuffle(x, downscale_factor, true);
}
