/* ops_signal.c — ONNX's DFT and STFT as matrix products with cosine and sine matrices built on the
 * tensor's device: O(n^2) per transform rather than an FFT's O(n log n), but every device runs it
 * and autograd differentiates it like any matmul. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "onnx/onnx_internal.h"

#define TWO_PI 6.283185307179586476925286766559 /* C11 has no M_PI */

/* ------------------------------------------------------------------ the transform */
/* cos (or sin) of 2 pi k t / n for t in [0, len) (rows) and k in [0, bins) (columns), as dt on
 * dev. k * t is reduced mod n in integers first, so the angle stays in [0, 2 pi) and exact. */
static ts_tensor *twiddle(int64_t len, int64_t bins, int64_t n, bool sine, ts_dtype dt,
                          ts_device dev) {
    ts_opts i64 = {.dtype = TS_I64, .device = dev};
    ts_tensor *t = ts_reshape(ts_arange(0, (double)len, 1, i64), TS_SHAPE(len, 1));
    ts_tensor *k = ts_reshape(ts_arange(0, (double)bins, 1, i64), TS_SHAPE(1, bins));
    ts_tensor *kt = ts_fmod_scalar(ts_mul(t, k), (double)n);
    ts_tensor *angle = ts_mul_scalar(ts_to_dtype(kt, TS_F64), TWO_PI / (double)n);
    return ts_to_dtype(sine ? ts_sin(angle) : ts_cos(angle), dt);
}

/* What one transform computes. */
typedef struct dft_spec {
    int axis;      /* the signal dim of x (never its last, the real / imaginary one) */
    int64_t n;     /* the transform's length: the signal is cut or zero-padded to it */
    bool onesided; /* only bins 0 .. n / 2 */
    bool inverse;  /* e^{+i...} and 1 / n */
} dft_spec;

/* (re, im) [..., len] -> the transform's real and imaginary parts [..., bins]; im NULL: a real
 * signal. Samples past n are cut; zero padding up to n adds nothing, so only the first len
 * samples (len <= n) take part. */
static void dft_last(ts_tensor *re, ts_tensor *im, const dft_spec *s, ts_tensor **ore,
                     ts_tensor **oim) {
    int64_t len = ts_size(re, -1) < s->n ? ts_size(re, -1) : s->n;
    int64_t bins = s->onesided ? s->n / 2 + 1 : s->n;
    re = ts_narrow(re, ts_ndim(re) - 1, 0, len);
    im = im ? ts_narrow(im, ts_ndim(im) - 1, 0, len) : NULL;
    ts_tensor *cm = twiddle(len, bins, s->n, false, ts_dtype_of(re), ts_device_of(re));
    ts_tensor *sm = twiddle(len, bins, s->n, true, ts_dtype_of(re), ts_device_of(re));
    /* forward: (re + i im)(cos - i sin); inverse: (re + i im)(cos + i sin) / n */
    double sign = s->inverse ? -1.0 : 1.0;
    ts_tensor *r = ts_matmul(re, cm), *i = ts_mul_scalar(ts_matmul(re, sm), -sign);
    if (im) {
        r = ts_add_alpha(r, ts_matmul(im, sm), sign);
        i = ts_add(i, ts_matmul(im, cm));
    }
    if (s->inverse) {
        r = ts_div_scalar(r, (double)s->n);
        i = ts_div_scalar(i, (double)s->n);
    }
    *ore = r;
    *oim = i;
}

/* x [..., 1 or 2] (real, or real and imaginary) -> its DFT along s->axis, [..., 2], x's dtype */
static ts_tensor *dft(ts_tensor *x, const dft_spec *s) {
    ts_dtype dt = ts_dtype_of(x), work = dt == TS_F64 ? TS_F64 : TS_F32;
    int last = ts_ndim(x) - 2; /* the last signal dim once the complex dim is selected away */
    ts_tensor *xw = ts_to_dtype(x, work);
    ts_tensor *re = ts_transpose(ts_select(xw, -1, 0), s->axis, last);
    ts_tensor *im = ts_size(x, -1) == 2 ? ts_transpose(ts_select(xw, -1, 1), s->axis, last) : NULL;
    ts_tensor *ore = NULL, *oim = NULL;
    dft_last(re, im, s, &ore, &oim);
    ts_tensor *parts[2] = {ts_transpose(ore, s->axis, last), ts_transpose(oim, s->axis, last)};
    if (!parts[0] || !parts[1]) return NULL;
    return ts_to_dtype(ts_stack(parts, 2, -1), dt);
}

/* a float signal of rank >= min_rank whose last dim is 1 (real) or 2 (complex) */
static bool check_signal(const tso_node *n, ts_tensor *x, int min_rank, const char *what) {
    if (!ts_dtype_is_floating(ts_dtype_of(x)))
        return tso_fail(n, TS_ERR_DTYPE, "the %s must be a float tensor, got %s", what,
                        tsi_desc(x));
    if (ts_ndim(x) < min_rank || (ts_size(x, -1) != 1 && ts_size(x, -1) != 2))
        return tso_fail(n, TS_ERR_SHAPE,
                        "the %s must have rank >= %d and a last dim of 1 (real) or 2 (complex), "
                        "got %s",
                        what, min_rank, tsi_desc(x));
    return true;
}

/* a 0/1 attribute */
static bool check_flag(const tso_node *n, const char *name, int64_t def) {
    int64_t v = tso_attr_int(n, name, def);
    if (v != 0 && v != 1)
        return tso_fail(n, TS_ERR_FORMAT, "%s must be 0 or 1, got %lld", name, (long long)v);
    return true;
}

/* a positive length from a scalar integer input */
static bool read_length(const tso_node *n, ts_tensor *t, const char *what, int64_t *v) {
    if (tso_read_ints(n, t, v, 1, what) != 1)
        return ts_error() ? false : tso_fail(n, TS_ERR_SHAPE, "%s must hold one value", what);
    if (*v < 1)
        return tso_fail(n, TS_ERR_ARG, "%s must be positive, got %lld", what, (long long)*v);
    return true;
}

/* ------------------------------------------------------------------ DFT */
static bool check_dft(const tso_node *n) {
    if (!check_flag(n, "inverse", 0) || !check_flag(n, "onesided", 0)) return false;
    /* ONNX 17 leaves an inverse one-sided transform undefined (later opsets define it as irfft) */
    if (tso_attr_int(n, "inverse", 0) && tso_attr_int(n, "onesided", 0))
        return tso_fail(n, TS_ERR_UNSUPPORTED, "an inverse one-sided DFT is not supported");
    return true;
}

TSO_RUN(run_dft) {
    (void)c;
    ts_tensor *x = in[0];
    if (!check_signal(n, x, 2, "input")) return false;
    int rank = ts_ndim(x);
    /* the axis attribute (default 1) until opset 20, then the optional input 2 (default -2) */
    int64_t ax = tso_attr_int(n, "axis", 1);
    if (n->opset >= 20) {
        ax = -2;
        if (n->n_in > 2 && in[2] && !tso_read_int(n, in[2], &ax, "axis")) return false;
    }
    int axis = tso_wrap_axis(n, ax, rank, false);
    if (axis < 0) return false;
    if (axis == rank - 1)
        return tso_fail(n, TS_ERR_ARG,
                        "axis %d is the last dim (real / imaginary parts), not a signal dim", axis);
    dft_spec s = {.axis = axis,
                  .n = ts_size(x, axis),
                  .onesided = tso_attr_int(n, "onesided", 0),
                  .inverse = tso_attr_int(n, "inverse", 0)};
    if (in[1] && !read_length(n, in[1], "dft_length", &s.n)) return false;
    out[0] = dft(x, &s);
    return out[0] || tso_fail_pending(n);
}

/* ------------------------------------------------------------------ STFT */
static bool check_stft(const tso_node *n) { return check_flag(n, "onesided", 1); }

/* The frame length: frame_length's value, else the window's length, else the whole signal; both
 * given must agree. */
static bool frame_length(const tso_node *n, ts_tensor *x, ts_tensor *window, ts_tensor *len,
                         int64_t *f) {
    if (window && ts_ndim(window) != 1)
        return tso_fail(n, TS_ERR_SHAPE, "the window must be a vector, got %s", tsi_desc(window));
    *f = window ? ts_size(window, 0) : ts_size(x, 1);
    if (len) {
        int64_t v;
        if (!read_length(n, len, "frame_length", &v)) return false;
        if (window && v != *f)
            return tso_fail(n, TS_ERR_SHAPE, "frame_length %lld does not match the window %s",
                            (long long)v, tsi_desc(window));
        *f = v;
    }
    if (*f > ts_size(x, 1))
        return tso_fail(n, TS_ERR_SHAPE, "frames of %lld samples do not fit the signal %s",
                        (long long)*f, tsi_desc(x));
    return true;
}

/* signal [B, L, c] -> frames [B, count, f, c]: frame j starts at sample j * step */
static ts_tensor *frames(ts_tensor *x, int64_t count, int64_t f, int64_t step) {
    ts_opts i64 = {.dtype = TS_I64, .device = ts_device_of(x)};
    ts_tensor *starts = ts_mul_scalar(ts_arange(0, (double)count, 1, i64), (double)step);
    ts_tensor *idx = ts_add(ts_reshape(starts, TS_SHAPE(count, 1)),
                            ts_reshape(ts_arange(0, (double)f, 1, i64), TS_SHAPE(1, f)));
    ts_tensor *picked = ts_index_select(x, 1, ts_reshape(idx, TS_SHAPE(count * f)));
    return ts_reshape(picked, TS_SHAPE(ts_size(x, 0), count, f, ts_size(x, 2)));
}

TSO_RUN(run_stft) {
    (void)c;
    ts_tensor *x = in[0], *window = in[2] && ts_numel(in[2]) ? in[2] : NULL;
    if (!check_signal(n, x, 3, "signal")) return false;
    if (ts_ndim(x) != 3)
        return tso_fail(n, TS_ERR_SHAPE, "the signal must be [batch, length, 1 or 2], got %s",
                        tsi_desc(x));
    int64_t step = 1, f = 1;
    if (!read_length(n, in[1], "frame_step", &step) || !frame_length(n, x, window, in[3], &f))
        return false;
    int64_t count = 1 + (ts_size(x, 1) - f) / step;
    ts_tensor *fr = frames(x, count, f, step);
    if (window)
        fr = ts_mul(fr, ts_reshape(ts_to_dtype(window, ts_dtype_of(x)), TS_SHAPE(1, 1, f, 1)));
    dft_spec s = {.axis = 2, .n = f, .onesided = tso_attr_int(n, "onesided", 1)};
    out[0] = fr ? dft(fr, &s) : NULL;
    return out[0] || tso_fail_pending(n);
}

/* ------------------------------------------------------------------ the table */
const tso_op_def tso_ops_signal[] = {
    {"DFT", 17, run_dft, check_dft, false},
    {"DFT", 20, run_dft, check_dft, false}, /* axis as an input */
    {"STFT", 17, run_stft, check_stft, false},
    {NULL, 0, NULL, NULL, false},
};
