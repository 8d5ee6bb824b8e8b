/* ops_extra.c — ONNX's signal windows and other operators outside the main families (MaxUnpool,
 * Det, GridSample, NonMaxSuppression, RoiAlign, uint8 quantization), composed from Tessera's
 * differentiable ops so they run on any device. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "onnx/onnx_internal.h"

#define RUN(name)                                                                                  \
    static bool name(tso_ctx *c, const tso_node *n, ts_tensor *const *in, ts_tensor **out)
#define DONE(x) return (out[0] = (x)) != NULL || tso_fail_pending(n)

static const double PI = 3.14159265358979323846;

static ts_opts opts_like(ts_tensor *t, ts_dtype dt) {
    return (ts_opts){.dtype = dt, .device = ts_device_of(t)};
}

/* ------------------------------------------------------------------ windows */
/* one integer of a scalar input (read to the host) */
static bool read_one(const tso_node *n, ts_tensor *t, int64_t *v, const char *what) {
    int count = tso_read_ints(n, t, v, 1, what);
    if (count < 0) return false;
    return count == 1 || tso_fail(n, TS_ERR_ARG, "%s must be one integer", what);
}

typedef enum window_kind { WIN_HANN, WIN_HAMMING, WIN_BLACKMAN } window_kind;

static bool check_window(const tso_node *n) {
    int32_t t = (int32_t)tso_attr_int(n, "output_datatype", 1);
    if (tso_dtype_from_onnx(t) == TS_DTYPE_DEFAULT)
        return tso_fail(n, TS_ERR_UNSUPPORTED, "output_datatype %s, which Tessera lacks",
                        tso_onnx_type_name(t));
    return true;
}

/* scale * cos(f * ni) */
static ts_tensor *cos_term(ts_tensor *ni, double f, double scale) {
    return ts_mul_scalar(ts_cos(ts_mul_scalar(ni, f)), scale);
}

/* The window is computed in float64 (as the reference does) and cast to output_datatype. */
static bool run_window(tso_ctx *c, const tso_node *n, ts_tensor *const *in, ts_tensor **out,
                       window_kind kind) {
    int64_t size;
    if (!read_one(n, in[0], &size, "size")) return false;
    if (size < 0) return tso_fail(n, TS_ERR_ARG, "size must be non-negative");
    /* a periodic window is the first size points of a symmetric window of size + 1 */
    double denom = tso_attr_int(n, "periodic", 1) ? (double)size : (double)size - 1;
    ts_tensor *ni = ts_arange(0, (double)size, 1, (ts_opts){.dtype = TS_F64, .device = c->device});
    ts_tensor *w = NULL;
    switch (kind) {
    case WIN_HANN:
        w = ts_square(ts_sin(ts_mul_scalar(ni, PI / denom)));
        break;
    case WIN_HAMMING: {
        double alpha = 25.0 / 46.0;
        w = ts_add_scalar(cos_term(ni, 2 * PI / denom, -(1 - alpha)), alpha);
        break;
    }
    case WIN_BLACKMAN:
        w = ts_add_scalar(
            ts_add(cos_term(ni, 2 * PI / denom, -0.5), cos_term(ni, 4 * PI / denom, 0.08)), 0.42);
        break;
    }
    ts_dtype dt = tso_dtype_from_onnx((int32_t)tso_attr_int(n, "output_datatype", 1));
    DONE(ts_to_dtype(w, dt));
}

RUN(run_hann) { return run_window(c, n, in, out, WIN_HANN); }
RUN(run_hamming) { return run_window(c, n, in, out, WIN_HAMMING); }
RUN(run_blackman) { return run_window(c, n, in, out, WIN_BLACKMAN); }

/* ------------------------------------------------------------------ MaxUnpool */
static bool check_max_unpool(const tso_node *n) {
    const int64_t *k, *p, *s;
    int nk = tso_attr_ints(n, "kernel_shape", &k);
    int np = tso_attr_ints(n, "pads", &p), ns = tso_attr_ints(n, "strides", &s);
    if (nk < 1 || nk > TS_MAX_DIMS - 2 || (np >= 0 && np != 2 * nk) || (ns >= 0 && ns != nk))
        return tso_fail(n, TS_ERR_UNSUPPORTED, "kernel_shape, pads and strides must agree");
    return true;
}

/* t with `extra` zeros appended along dim */
static ts_tensor *pad_end(ts_tensor *t, int dim, int64_t extra) {
    if (!t || extra == 0) return t;
    ts_shape s = ts_shape_of(t);
    s.dims[dim] = extra;
    ts_tensor *parts[2] = {t, ts_zeros(s, opts_like(t, ts_dtype_of(t)))};
    return ts_cat(parts, 2, dim);
}

/* Y's default shape: what MaxPool with these attributes maps back from X's shape */
static bool unpool_shape(const tso_node *n, ts_tensor *x, ts_shape *s) {
    const int64_t *k, *p, *st;
    int nk = tso_attr_ints(n, "kernel_shape", &k);
    int np = tso_attr_ints(n, "pads", &p), ns = tso_attr_ints(n, "strides", &st);
    *s = ts_shape_of(x);
    if (s->ndim != nk + 2)
        return tso_fail(n, TS_ERR_SHAPE, "X %s does not match kernel_shape", tsi_desc(x));
    for (int d = 0; d < nk; d++) {
        int64_t stride = ns > 0 ? st[d] : 1, pad = np > 0 ? p[d] + p[nk + d] : 0;
        s->dims[d + 2] = (s->dims[d + 2] - 1) * stride - pad + k[d];
        if (s->dims[d + 2] < 0) return tso_fail(n, TS_ERR_SHAPE, "negative output size");
    }
    return true;
}

/* The indices are MaxPool's, into the whole flattened tensor: X is scattered into zeros of the
 * inferred shape, which output_shape then extends with zeros at the end of each dim. */
RUN(run_max_unpool) {
    (void)c;
    ts_tensor *x = in[0];
    ts_shape s;
    if (!unpool_shape(n, x, &s)) return false;
    int64_t total = 1;
    for (int d = 0; d < s.ndim; d++) total *= s.dims[d];
    ts_tensor *flat =
        ts_scatter_add(ts_zeros(TS_SHAPE(total), opts_like(x, ts_dtype_of(x))), 0,
                       ts_flatten(ts_to_dtype(in[1], TS_I64), 0, -1), ts_flatten(x, 0, -1));
    ts_tensor *y = ts_reshape(flat, s);
    if (in[2]) {
        int64_t want[TS_MAX_DIMS];
        int count = tso_read_ints(n, in[2], want, TS_MAX_DIMS, "output_shape");
        if (count < 0) return false;
        if (count != s.ndim) return tso_fail(n, TS_ERR_SHAPE, "output_shape has %d dims", count);
        for (int d = 0; d < s.ndim; d++) {
            if (want[d] < s.dims[d])
                return tso_fail(n, TS_ERR_SHAPE, "output_shape smaller than the unpooled shape");
            y = pad_end(y, d, want[d] - s.dims[d]);
        }
    }
    DONE(y);
}

/* ------------------------------------------------------------------ Det */
/* One step of Gaussian elimination on a [B, M, M]: the row with the largest |a[:, i, k]| (i >= k)
 * is swapped into row k (the sign flips when it moves), the pivot multiplies *det and the rows
 * below lose their multiple of row k. */
static ts_tensor *lu_step(ts_tensor *a, int64_t k, ts_tensor *rows, ts_tensor **det) {
    int64_t b = ts_size(a, 0), m = ts_size(a, 1);
    ts_opts io = opts_like(a, TS_I64);
    ts_tensor *col = ts_select(ts_slice(a, 1, k, m, 1), 2, k);
    ts_tensor *p = ts_add_scalar(ts_argmax_dim(ts_abs(col), 1, true), (double)k); /* [B, 1] */
    ts_tensor *perm = ts_where(ts_eq_scalar(rows, (double)k), p,
                               ts_where(ts_eq(rows, p), ts_scalar((double)k, io), rows));
    a = ts_gather(a, 1, ts_expand(ts_unsqueeze(perm, 2), TS_SHAPE(b, m, m)));
    ts_tensor *flip = ts_to_dtype(ts_ne_scalar(ts_flatten(p, 0, -1), (double)k), ts_dtype_of(a));
    ts_tensor *prow = ts_slice(a, 1, k, k + 1, 1);   /* [B, 1, M] */
    ts_tensor *piv = ts_slice(prow, 2, k, k + 1, 1); /* [B, 1, 1] */
    *det = ts_mul(ts_mul(*det, ts_rsub_scalar(ts_mul_scalar(flip, 2), 1)), ts_flatten(piv, 0, -1));
    if (k + 1 == m) return a;
    /* a zero pivot (singular) already made det 0: dividing by 1 keeps the rest finite */
    ts_tensor *safe = ts_where(ts_eq_scalar(piv, 0), ts_ones_like(piv), piv);
    ts_tensor *below = ts_slice(a, 1, k + 1, m, 1);
    ts_tensor *f = ts_div(ts_slice(below, 2, k, k + 1, 1), safe);
    ts_tensor *parts[2] = {ts_slice(a, 1, 0, k + 1, 1), ts_sub(below, ts_mul(f, prow))};
    return ts_cat(parts, 2, 1);
}

RUN(run_det) {
    (void)c;
    ts_tensor *a = in[0];
    ts_shape s = ts_shape_of(a);
    ts_dtype dt = ts_dtype_of(a);
    if (s.ndim < 2 || s.dims[s.ndim - 1] != s.dims[s.ndim - 2])
        return tso_fail(n, TS_ERR_SHAPE, "Det needs [..., M, M], got %s", tsi_desc(a));
    if (!ts_dtype_is_floating(dt))
        return tso_fail(n, TS_ERR_DTYPE, "Det needs a float tensor, got %s", tsi_desc(a));
    int64_t m = s.dims[s.ndim - 1], b = 1;
    ts_shape bs = {.ndim = s.ndim - 2};
    for (int d = 0; d < bs.ndim; d++) b *= (bs.dims[d] = s.dims[d]);
    a = ts_reshape(a, TS_SHAPE(b, m, m));
    ts_tensor *rows = ts_reshape(ts_arange(0, (double)m, 1, opts_like(a, TS_I64)), TS_SHAPE(1, m));
    ts_tensor *det = ts_ones(TS_SHAPE(b), opts_like(a, dt));
    for (int64_t k = 0; k < m && a; k++) a = lu_step(a, k, rows, &det);
    DONE(a ? ts_reshape(det, bs) : NULL);
}

/* ------------------------------------------------------------------ GridSample */
typedef enum gs_mode { GS_BILINEAR, GS_NEAREST, GS_BICUBIC } gs_mode;
typedef enum gs_pad { GS_ZEROS, GS_BORDER, GS_REFLECTION } gs_pad;

static int pick(const char *v, const char *const *names, int count) {
    for (int i = 0; i < count; i++)
        if (!strcmp(v, names[i])) return i;
    return -1;
}

static const char *const GS_MODES[] = {"bilinear", "nearest", "bicubic"};
static const char *const GS_PADS[] = {"zeros", "border", "reflection"};

static bool gs_options(const tso_node *n, gs_mode *mode, gs_pad *pad) {
    char b1[32], b2[32];
    const char *m = tso_attr_string(n, "mode", "bilinear", b1, sizeof b1);
    const char *p = tso_attr_string(n, "padding_mode", "zeros", b2, sizeof b2);
    int im = pick(m, GS_MODES, 3), ip = pick(p, GS_PADS, 3);
    if (im < 0) return tso_fail(n, TS_ERR_UNSUPPORTED, "mode '%s'", m);
    if (ip < 0) return tso_fail(n, TS_ERR_UNSUPPORTED, "padding_mode '%s'", p);
    *mode = (gs_mode)im;
    *pad = (gs_pad)ip;
    return true;
}

static bool check_grid_sample(const tso_node *n) {
    gs_mode m;
    gs_pad p;
    return gs_options(n, &m, &p);
}

/* v reflected by the nearer border until it lies in [lo, hi] (the reference's _gs_reflect) */
static ts_tensor *gs_reflect(ts_tensor *v, double lo, double hi) {
    double range = hi - lo;
    if (range <= 0) return ts_full_like(v, lo);
    ts_tensor *low = ts_lt_scalar(v, lo);
    ts_tensor *dx = ts_where(low, ts_rsub_scalar(v, lo), ts_sub_scalar(v, hi));
    ts_tensor *q = ts_floor(ts_div_scalar(dx, range));
    ts_tensor *r = ts_sub(dx, ts_mul_scalar(q, range));
    ts_tensor *odd = ts_eq_scalar(ts_fmod_scalar(q, 2), 1);
    ts_tensor *back = ts_where(ts_ne(low, odd), ts_add_scalar(r, lo), ts_rsub_scalar(r, hi));
    return ts_where(ts_logical_or(low, ts_gt_scalar(v, hi)), back, v);
}

/* Keys' cubic convolution weights (A = -0.75): near for |d| <= 1, far for 1 < |d| < 2 */
static ts_tensor *cubic_near(ts_tensor *u) {
    const double a = -0.75;
    return ts_add_scalar(ts_mul(ts_sub_scalar(ts_mul_scalar(u, a + 2), a + 3), ts_square(u)), 1);
}
static ts_tensor *cubic_far(ts_tensor *u) {
    const double a = -0.75;
    ts_tensor *t = ts_add_scalar(ts_mul(ts_sub_scalar(ts_mul_scalar(u, a), 5 * a), u), 8 * a);
    return ts_sub_scalar(ts_mul(t, u), 4 * a);
}

/* One axis of the sampling: the source positions (taps) and their weights (NULL: 1). */
typedef struct gs_axis {
    int taps;
    ts_tensor *idx[4], *w[4];
    int64_t len;
    double lo, hi; /* the reflection borders */
} gs_axis;

static void gs_axis_make(gs_axis *ax, ts_tensor *g, int64_t len, bool align, gs_mode mode,
                         gs_pad pad) {
    ax->len = len;
    ax->lo = align ? 0 : -0.5;
    ax->hi = align ? (double)len - 1 : (double)len - 0.5;
    ts_tensor *x =
        align ? ts_mul_scalar(ts_add_scalar(g, 1), ((double)len - 1) / 2)
              : ts_div_scalar(ts_sub_scalar(ts_mul_scalar(ts_add_scalar(g, 1), (double)len), 1), 2);
    if (mode == GS_NEAREST) x = ts_round(x);
    ts_tensor *outside = ts_logical_or(ts_lt_scalar(x, ax->lo), ts_gt_scalar(x, ax->hi));
    if (pad == GS_BORDER) x = ts_where(outside, ts_clamp(x, 0, (double)len - 1), x);
    if (pad == GS_REFLECTION) x = gs_reflect(x, ax->lo, ax->hi);
    memset(ax->w, 0, sizeof ax->w);
    if (mode == GS_NEAREST) {
        ax->taps = 1;
        ax->idx[0] = x;
        return;
    }
    ts_tensor *f = ts_floor(x), *t = ts_sub(x, f);
    if (mode == GS_BILINEAR) {
        ax->taps = 2;
        ax->idx[0] = f;
        ax->idx[1] = ts_add_scalar(f, 1);
        ax->w[0] = ts_rsub_scalar(t, 1);
        ax->w[1] = t;
        return;
    }
    ax->taps = 4;
    for (int i = 0; i < 4; i++) ax->idx[i] = ts_add_scalar(f, i - 1);
    ax->w[0] = cubic_far(ts_add_scalar(t, 1));
    ax->w[1] = cubic_near(t);
    ax->w[2] = cubic_near(ts_rsub_scalar(t, 1));
    ax->w[3] = cubic_far(ts_rsub_scalar(t, 2));
}

/* A source index brought inside [0, len) as padding_mode says; *valid (zeros) is where it was. */
static ts_tensor *gs_index(ts_tensor *i, const gs_axis *ax, gs_pad pad, ts_tensor **valid) {
    double last = (double)ax->len - 1;
    if (pad == GS_ZEROS) {
        ts_tensor *ok = ts_logical_and(ts_ge_scalar(i, 0), ts_le_scalar(i, last));
        *valid = *valid ? ts_logical_and(*valid, ok) : ok;
    }
    /* reflected indices lie in [lo, hi], lo >= -0.5: truncation (the reference's int()) is the
     * floor of the non-negative part */
    if (pad == GS_REFLECTION) i = ts_floor(ts_clamp_min(gs_reflect(i, ax->lo, ax->hi), 0));
    return ts_clamp(i, 0, last);
}

/* x [N, C, H*W] at (iy, ix) [N, P]: [N, C, P] */
static ts_tensor *gs_fetch(ts_tensor *xf, ts_tensor *iy, ts_tensor *ix, const gs_axis *ay,
                           const gs_axis *ax, gs_pad pad) {
    ts_tensor *valid = NULL;
    iy = gs_index(iy, ay, pad, &valid);
    ix = gs_index(ix, ax, pad, &valid);
    ts_tensor *flat = ts_to_dtype(ts_add(ts_mul_scalar(iy, (double)ax->len), ix), TS_I64);
    int64_t nb = ts_size(xf, 0), ch = ts_size(xf, 1), p = ts_size(flat, 1);
    ts_tensor *v = ts_gather(xf, 2, ts_expand(ts_unsqueeze(flat, 1), TS_SHAPE(nb, ch, p)));
    if (!valid) return v;
    return ts_where(ts_unsqueeze(valid, 1), v, ts_zeros_like(v));
}

static ts_tensor *gs_weight(ts_tensor *wy, ts_tensor *wx) {
    if (!wy) return wx;
    return wx ? ts_mul(wy, wx) : wy;
}

RUN(run_grid_sample) {
    (void)c;
    ts_tensor *x = in[0], *grid = in[1];
    gs_mode mode;
    gs_pad pad;
    if (!gs_options(n, &mode, &pad)) return false;
    bool align = tso_attr_int(n, "align_corners", 0) != 0;
    if (ts_ndim(x) != 4 || ts_ndim(grid) != 4 || ts_size(grid, 3) != 2 ||
        ts_size(grid, 0) != ts_size(x, 0))
        return tso_fail(n, TS_ERR_UNSUPPORTED,
                        "GridSample needs X [N, C, H, W] and grid "
                        "[N, Ho, Wo, 2], got %s and %s",
                        tsi_desc(x), tsi_desc(grid));
    ts_dtype xdt = ts_dtype_of(x);
    if (mode != GS_NEAREST && !ts_dtype_is_floating(xdt))
        return tso_fail(n, TS_ERR_UNSUPPORTED, "interpolating %s (not float)", tsi_desc(x));
    int64_t nb = ts_size(x, 0), ch = ts_size(x, 1), h = ts_size(x, 2), w = ts_size(x, 3);
    int64_t ho = ts_size(grid, 1), wo = ts_size(grid, 2);
    ts_dtype gdt = ts_dtype_of(grid) == TS_F64 ? TS_F64 : TS_F32;
    ts_tensor *g = ts_reshape(ts_to_dtype(grid, gdt), TS_SHAPE(nb, ho * wo, 2));
    gs_axis ax, ay;
    gs_axis_make(&ax, ts_select(g, 2, 0), w, align, mode, pad);
    gs_axis_make(&ay, ts_select(g, 2, 1), h, align, mode, pad);
    ts_tensor *xf = ts_reshape(x, TS_SHAPE(nb, ch, h * w)), *y = NULL;
    for (int ky = 0; ky < ay.taps; ky++)
        for (int kx = 0; kx < ax.taps; kx++) {
            ts_tensor *v = gs_fetch(xf, ay.idx[ky], ax.idx[kx], &ay, &ax, pad);
            ts_tensor *wt = gs_weight(ay.w[ky], ax.w[kx]);
            if (wt) v = ts_mul(v, ts_unsqueeze(ts_to_dtype(wt, xdt), 1));
            y = y ? ts_add(y, v) : v;
        }
    DONE(ts_reshape(y, TS_SHAPE(nb, ch, ho, wo)));
}

/* ------------------------------------------------------------------ MelWeightMatrix */
/* The triangle edges are integer spectrogram bins computed from the scalar inputs on the host
 * (shape-like numbers, as the reference computes them); the matrix is built on the device. */
static bool mel_edges(const tso_node *n, ts_tensor *const *in, int64_t *mels, int64_t *dft,
                      int64_t **edges) {
    int64_t rate;
    double lo_hz, hi_hz;
    if (!read_one(n, in[0], mels, "num_mel_bins") || !read_one(n, in[1], dft, "dft_length") ||
        !read_one(n, in[2], &rate, "sample_rate") ||
        !tso_read_scalar(n, in[3], &lo_hz, "lower_edge_hertz") ||
        !tso_read_scalar(n, in[4], &hi_hz, "upper_edge_hertz"))
        return false;
    if (*mels <= 0 || *dft <= 0 || rate <= 0 || *mels > (1 << 20))
        return tso_fail(n, TS_ERR_ARG, "num_mel_bins, dft_length and sample_rate must be > 0");
    int64_t count = *mels + 2;
    *edges = malloc((size_t)count * sizeof **edges);
    if (!*edges) return tso_fail(n, TS_ERR_OOM, "out of host memory");
    double lo_mel = 2595 * log10(1 + lo_hz / 700), hi_mel = 2595 * log10(1 + hi_hz / 700);
    double step = (hi_mel - lo_mel) / (double)count;
    for (int64_t i = 0; i < count; i++) {
        double hz = 700 * expm1((i * step + lo_mel) / 2595 * log(10));
        (*edges)[i] = (int64_t)floor((double)(*dft + 1) * hz / (double)rate);
    }
    return true;
}

static bool check_mel(const tso_node *n) { return check_window(n); }

/* a [1, mels] row of edges[first .. first + mels - 1] as float64 */
static ts_tensor *mel_row(tso_ctx *c, const int64_t *edges, int64_t first, int64_t mels) {
    return ts_to_dtype(
        ts_reshape(tso_ints_tensor(c, edges + first, (int)mels, true), TS_SHAPE(1, mels)), TS_F64);
}

RUN(run_mel) {
    int64_t mels, dft, *edges = NULL;
    if (!mel_edges(n, in, &mels, &dft, &edges)) return false;
    ts_tensor *lo = mel_row(c, edges, 0, mels), *ce = mel_row(c, edges, 1, mels);
    ts_tensor *hi = mel_row(c, edges, 2, mels);
    free(edges);
    ts_tensor *j = ts_reshape(
        ts_arange(0, (double)(dft / 2 + 1), 1, (ts_opts){.dtype = TS_F64, .device = c->device}),
        TS_SHAPE(dft / 2 + 1, 1));
    /* the reference writes the rising side (j in [lo, ce]; only 1 at ce when lo == ce), then the
     * falling side (j in [ce, hi)) over it */
    ts_tensor *rise = ts_div(ts_sub(j, lo), ts_clamp_min(ts_sub(ce, lo), 1));
    ts_tensor *in_rise = ts_logical_and(ts_ge(j, lo), ts_le(j, ce));
    ts_tensor *fall = ts_div(ts_sub(hi, j), ts_clamp_min(ts_sub(hi, ce), 1));
    ts_tensor *in_fall = ts_logical_and(ts_ge(j, ce), ts_lt(j, hi));
    ts_tensor *peak = ts_logical_and(ts_eq(j, ce), ts_eq(lo, ce));
    ts_tensor *zero = ts_zeros_like(rise);
    ts_tensor *w =
        ts_where(in_fall, fall, ts_where(peak, ts_ones_like(zero), ts_where(in_rise, rise, zero)));
    ts_dtype dt = tso_dtype_from_onnx((int32_t)tso_attr_int(n, "output_datatype", 1));
    DONE(ts_to_dtype(w, dt));
}

/* ------------------------------------------------------------------ NonMaxSuppression */
/* NonMaxSuppression's result size depends on the data (which boxes survive), which only the host
 * can size the result from: boxes and scores are read to the host (f32, as the reference computes
 * in the inputs' float32) and the greedy algorithm of ONNX's reference runs there. */
static float *floats_on_host(const tso_node *n, ts_tensor *x) {
    int64_t count = ts_numel(x);
    float *v = malloc((size_t)(count > 0 ? count : 1) * sizeof *v);
    if (!v) return tso_fail(n, TS_ERR_OOM, "out of host memory"), NULL;
    ts_tensor *h = ts_to_dtype(ts_to(x, ts_cpu()), TS_F32);
    if (!h || ts_copy_to_host(h, v, (size_t)count * sizeof *v) != TS_OK) {
        free(v);
        tso_fail_pending(n);
        return NULL;
    }
    return v;
}

typedef struct nms_box {
    float lo[2], hi[2];
} nms_box; /* y then x extents */

static float nms_min(float a, float b) { return a < b ? a : b; }
static float nms_max(float a, float b) { return a < b ? b : a; }

static nms_box nms_corners(const float *b, bool center) {
    nms_box r;
    for (int d = 0; d < 2; d++) {
        if (center) { /* [x_center, y_center, width, height] */
            float half = b[3 - d] / 2;
            r.lo[d] = b[1 - d] - half;
            r.hi[d] = b[1 - d] + half;
        } else { /* [y1, x1, y2, x2], either corner first */
            r.lo[d] = nms_min(b[d], b[d + 2]);
            r.hi[d] = nms_max(b[d], b[d + 2]);
        }
    }
    return r;
}

/* the reference's suppress_by_iou: strict comparisons, degenerate boxes never suppress */
static bool nms_suppress(const float *b1, const float *b2, bool center, float iou) {
    nms_box p = nms_corners(b1, center), q = nms_corners(b2, center);
    float ext[2];
    for (int d = 1; d >= 0; d--) { /* x first, as the reference */
        float lo = nms_max(p.lo[d], q.lo[d]), hi = nms_min(p.hi[d], q.hi[d]);
        if (hi <= lo) return false;
        ext[d] = hi - lo;
    }
    float inter = ext[1] * ext[0];
    if (inter <= 0) return false;
    float a1 = (p.hi[1] - p.lo[1]) * (p.hi[0] - p.lo[0]);
    float a2 = (q.hi[1] - q.lo[1]) * (q.hi[0] - q.lo[0]);
    float uni = a1 + a2 - inter;
    if (a1 <= 0 || a2 <= 0 || uni <= 0) return false;
    return inter / uni > iou;
}

typedef struct nms_cand {
    float score;
    int64_t idx;
} nms_cand;

/* the reference's order: score descending, then box index ascending */
static int nms_cmp(const void *a, const void *b) {
    const nms_cand *x = a, *y = b;
    if (x->score != y->score) return x->score > y->score ? -1 : 1;
    return (x->idx > y->idx) - (x->idx < y->idx);
}

/* an optional scalar input; false when absent or empty (the reference's "not given") */
static bool nms_opt(const tso_node *n, ts_tensor *t, double *v, bool *ok, const char *what) {
    *ok = true;
    if (!t || ts_numel(t) == 0) return false;
    *ok = tso_read_scalar(n, t, v, what);
    return *ok;
}

typedef struct nms_params {
    int64_t max_out;
    float iou, score;
    bool has_score, center;
} nms_params;

/* appends the selected boxes of one (batch, class) to sel (rows of 3) */
static int64_t nms_class(const float *boxes, const float *scores, int64_t nb, nms_params p,
                         nms_cand *cand, int64_t *chosen, int64_t *sel, int64_t batch,
                         int64_t cls) {
    int64_t m = 0, k = 0, rows = 0;
    for (int64_t i = 0; i < nb; i++)
        if (!p.has_score || scores[i] > p.score) cand[m++] = (nms_cand){scores[i], i};
    qsort(cand, (size_t)m, sizeof *cand, nms_cmp);
    for (int64_t i = 0; i < m && k < p.max_out; i++) {
        bool keep = true;
        for (int64_t j = 0; j < k && keep; j++)
            keep = !nms_suppress(boxes + 4 * cand[i].idx, boxes + 4 * chosen[j], p.center, p.iou);
        if (!keep) continue;
        chosen[k++] = cand[i].idx;
        sel[3 * rows] = batch;
        sel[3 * rows + 1] = cls;
        sel[3 * rows + 2] = cand[i].idx;
        rows++;
    }
    return rows;
}

static bool nms_params_of(const tso_node *n, ts_tensor *const *in, nms_params *p) {
    double v;
    bool ok;
    *p = (nms_params){.center = tso_attr_int(n, "center_point_box", 0) != 0};
    if (in[2] && ts_numel(in[2]) > 0) {
        int64_t m;
        if (!read_one(n, in[2], &m, "max_output_boxes_per_class")) return false;
        p->max_out = m > 0 ? m : 0;
    }
    if (nms_opt(n, in[3], &v, &ok, "iou_threshold")) p->iou = (float)v;
    if (!ok) return false;
    if (nms_opt(n, in[4], &v, &ok, "score_threshold")) p->score = (float)v, p->has_score = true;
    return ok;
}

static bool check_nms(const tso_node *n) {
    int64_t cpb = tso_attr_int(n, "center_point_box", 0);
    if (cpb != 0 && cpb != 1)
        return tso_fail(n, TS_ERR_UNSUPPORTED, "center_point_box %lld (must be 0 or 1)",
                        (long long)cpb);
    return true;
}

RUN(run_nms) {
    ts_shape bs = ts_shape_of(in[0]), ss = ts_shape_of(in[1]);
    if (bs.ndim != 3 || bs.dims[2] != 4 || ss.ndim != 3 || ss.dims[0] != bs.dims[0] ||
        ss.dims[2] != bs.dims[1])
        return tso_fail(n, TS_ERR_SHAPE, "boxes %s and scores %s must be [B, N, 4] and [B, C, N]",
                        tsi_desc(in[0]), tsi_desc(in[1]));
    nms_params p;
    if (!nms_params_of(n, in, &p)) return false;
    int64_t nbatch = bs.dims[0], ncls = ss.dims[1], nb = bs.dims[1];
    float *boxes = floats_on_host(n, in[0]);
    float *scores = boxes ? floats_on_host(n, in[1]) : NULL;
    int64_t cap = nbatch * ncls * (p.max_out < nb ? p.max_out : nb);
    nms_cand *cand = malloc((size_t)(nb > 0 ? nb : 1) * sizeof *cand);
    int64_t *chosen = malloc((size_t)(nb > 0 ? nb : 1) * sizeof *chosen);
    int64_t *sel = malloc((size_t)(cap > 0 ? 3 * cap : 1) * sizeof *sel);
    bool ok = boxes && scores;
    if (ok && (!cand || !chosen || !sel)) ok = tso_fail(n, TS_ERR_OOM, "out of host memory");
    int64_t rows = 0;
    for (int64_t b = 0; ok && b < nbatch; b++)
        for (int64_t k = 0; k < ncls; k++)
            rows += nms_class(boxes + 4 * nb * b, scores + nb * (b * ncls + k), nb, p, cand, chosen,
                              sel + 3 * rows, b, k);
    if (ok)
        out[0] = ts_from_data(TS_SHAPE(rows, 3), TS_I64, sel,
                              (ts_opts){.dtype = TS_I64, .device = c->device});
    free(boxes);
    free(scores);
    free(cand);
    free(chosen);
    free(sel);
    return (ok && out[0]) || tso_fail_pending(n);
}

/* ------------------------------------------------------------------ RoiAlign */
/* The sampling grid (how many bilinear samples a bin averages, where they fall) depends on the
 * ROIs' values, so the ROIs and batch indices are read to the host, which computes each sample's
 * four flattened H*W positions and weights as ONNX's reference does (op_roi_align.py); the input
 * stays on the device and is gathered and weighted there (differentiable in X). */
typedef struct roi_cfg {
    int64_t h, w, ph, pw, sampling;
    double scale;
    bool half_pixel, max_mode;
} roi_cfg;

static bool check_roi_align(const tso_node *n) {
    char buf[32];
    const char *mode = tso_attr_string(n, "mode", "avg", buf, sizeof buf);
    if (strcmp(mode, "avg") && strcmp(mode, "max"))
        return tso_fail(n, TS_ERR_UNSUPPORTED, "mode '%s'", mode);
    const char *ct =
        tso_attr_string(n, "coordinate_transformation_mode", "half_pixel", buf, sizeof buf);
    if (strcmp(ct, "half_pixel") && strcmp(ct, "output_half_pixel"))
        return tso_fail(n, TS_ERR_UNSUPPORTED, "coordinate_transformation_mode '%s'", ct);
    if (tso_attr_int(n, "output_height", 1) < 1 || tso_attr_int(n, "output_width", 1) < 1)
        return tso_fail(n, TS_ERR_UNSUPPORTED, "output_height and output_width must be >= 1");
    return true;
}

/* one sample at (y, x): pos[k * stride] and wt[k * stride] for the four corners */
static void roi_sample(const roi_cfg *g, double y, double x, int64_t *pos, double *wt,
                       int64_t stride) {
    for (int k = 0; k < 4; k++) pos[k * stride] = 0, wt[k * stride] = 0;
    if (y < -1.0 || y > (double)g->h || x < -1.0 || x > (double)g->w) return;
    y = y > 0 ? y : 0;
    x = x > 0 ? x : 0;
    int64_t yl = (int64_t)y, xl = (int64_t)x, yh, xh;
    if (yl >= g->h - 1)
        yh = yl = g->h - 1, y = (double)yl;
    else
        yh = yl + 1;
    if (xl >= g->w - 1)
        xh = xl = g->w - 1, x = (double)xl;
    else
        xh = xl + 1;
    double ly = y - (double)yl, lx = x - (double)xl, hy = 1 - ly, hx = 1 - lx;
    int64_t p[4] = {yl * g->w + xl, yl * g->w + xh, yh * g->w + xl, yh * g->w + xh};
    double w[4] = {hy * hx, hy * lx, ly * hx, ly * lx};
    for (int k = 0; k < 4; k++) pos[k * stride] = p[k], wt[k * stride] = w[k];
}

/* one ROI's output [1, C, ph, pw] from xb [C, H*W] */
static ts_tensor *roi_one(const tso_node *n, const roi_cfg *g, ts_tensor *xb, const float *roi) {
    double off = g->half_pixel ? 0.5 : 0.0;
    double sw = roi[0] * g->scale - off, sh = roi[1] * g->scale - off;
    double rw = roi[2] * g->scale - off - sw, rh = roi[3] * g->scale - off - sh;
    if (!g->half_pixel) rw = rw > 1 ? rw : 1, rh = rh > 1 ? rh : 1;
    double bh = rh / (double)g->ph, bw = rw / (double)g->pw;
    int64_t gh = g->sampling > 0 ? g->sampling : (int64_t)ceil(bh);
    int64_t gw = g->sampling > 0 ? g->sampling : (int64_t)ceil(bw);
    int64_t count = gh * gw > 1 ? gh * gw : 1, cells = g->ph * g->pw;
    int64_t per = gh * gw > 0 ? gh * gw : 1; /* an empty grid: one zero-weight sample */
    int64_t total = cells * per;
    int64_t *pos = malloc((size_t)(4 * total) * sizeof *pos);
    double *wt = malloc((size_t)(4 * total) * sizeof *wt);
    if (!pos || !wt) {
        free(pos);
        free(wt);
        return tso_fail(n, TS_ERR_OOM, "out of host memory"), NULL;
    }
    for (int64_t i = 0; i < 4 * total; i++) pos[i] = 0, wt[i] = 0;
    for (int64_t ph = 0; ph < g->ph; ph++)
        for (int64_t pw = 0; pw < g->pw; pw++)
            for (int64_t iy = 0; iy < gh; iy++)
                for (int64_t ix = 0; ix < gw; ix++) {
                    double y = sh + (double)ph * bh + ((double)iy + 0.5) * bh / (double)gh;
                    double x = sw + (double)pw * bw + ((double)ix + 0.5) * bw / (double)gw;
                    int64_t at = (ph * g->pw + pw) * per + iy * gw + ix;
                    roi_sample(g, y, x, pos + at, wt + at, total);
                }
    ts_device dev = ts_device_of(xb);
    ts_tensor *idx = ts_from_data(TS_SHAPE(4 * total), TS_I64, pos, opts_like(xb, TS_I64));
    ts_tensor *w = ts_from_data(TS_SHAPE(4, cells, per), TS_F64, wt,
                                (ts_opts){.dtype = TS_F64, .device = dev});
    free(pos);
    free(wt);
    int64_t ch = ts_shape_of(xb).dims[0];
    ts_tensor *v = ts_reshape(ts_index_select(xb, 1, idx), TS_SHAPE(ch, 4, cells, per));
    v = ts_mul(v, ts_to_dtype(w, ts_dtype_of(xb)));
    /* max mode takes the largest weighted corner, not the interpolated value: the reference's
     * (and the test data's) known quirk */
    ts_tensor *r = g->max_mode ? ts_amax_dim(ts_amax_dim(v, 3, false), 1, false)
                               : ts_div_scalar(ts_sum_dims(v, TS_DIMS(1, 3), false), (double)count);
    return ts_reshape(r, TS_SHAPE(1, ch, g->ph, g->pw));
}

static bool run_roi_align(tso_ctx *c, const tso_node *n, ts_tensor *const *in, ts_tensor **out,
                          bool half_pixel) {
    ts_tensor *x = in[0];
    ts_shape xs = ts_shape_of(x), rs = ts_shape_of(in[1]);
    if (xs.ndim != 4 || rs.ndim != 2 || rs.dims[1] != 4 || ts_numel(in[2]) != rs.dims[0])
        return tso_fail(n, TS_ERR_SHAPE,
                        "X %s, rois %s, batch_indices %s must be [N, C, H, W], [R, 4], [R]",
                        tsi_desc(x), tsi_desc(in[1]), tsi_desc(in[2]));
    char buf[32];
    roi_cfg g = {.h = xs.dims[2],
                 .w = xs.dims[3],
                 .ph = tso_attr_int(n, "output_height", 1),
                 .pw = tso_attr_int(n, "output_width", 1),
                 .sampling = tso_attr_int(n, "sampling_ratio", 0),
                 .scale = tso_attr_float(n, "spatial_scale", 1.0f),
                 .half_pixel = half_pixel,
                 .max_mode = !strcmp(tso_attr_string(n, "mode", "avg", buf, sizeof buf), "max")};
    int64_t nr = rs.dims[0];
    if (nr == 0) {
        out[0] = ts_zeros(TS_SHAPE(0, xs.dims[1], g.ph, g.pw), opts_like(x, ts_dtype_of(x)));
        return out[0] != NULL || tso_fail_pending(n);
    }
    float *rois = floats_on_host(n, in[1]);
    int64_t *bi = malloc((size_t)nr * sizeof *bi);
    ts_tensor **parts = calloc((size_t)nr, sizeof *parts);
    bool ok = rois && bi && parts;
    if (!ok && rois) tso_fail(n, TS_ERR_OOM, "out of host memory");
    if (ok) ok = tso_read_ints(n, in[2], bi, (int)nr, "batch_indices") == nr;
    ts_tensor *flat = ok ? ts_reshape(x, TS_SHAPE(xs.dims[0], xs.dims[1], g.h * g.w)) : NULL;
    for (int64_t r = 0; ok && r < nr; r++) {
        if (bi[r] < 0 || bi[r] >= xs.dims[0]) {
            ok = tso_fail(n, TS_ERR_ARG, "batch index %lld out of range", (long long)bi[r]);
            break;
        }
        parts[r] = roi_one(n, &g, ts_select(flat, 0, bi[r]), rois + 4 * r);
        ok = parts[r] != NULL;
    }
    if (ok) out[0] = ts_cat(parts, (int)nr, 0);
    free(rois);
    free(bi);
    free(parts);
    (void)c;
    return (ok && out[0]) || tso_fail_pending(n);
}

/* opset 10 has no coordinate_transformation_mode: its behaviour is output_half_pixel */
RUN(run_roi_align10) { return run_roi_align(c, n, in, out, false); }
RUN(run_roi_align16) {
    char buf[32];
    return run_roi_align(
        c, n, in, out,
        !strcmp(tso_attr_string(n, "coordinate_transformation_mode", "half_pixel", buf, sizeof buf),
                "half_pixel"));
}

/* ------------------------------------------------------------------ quantization */
/* QuantizeLinear to uint8, int8, uint16 or int16 (the zero point's type; uint8 without one). */

/* a scale or zero point shaped to broadcast against x: one value, or one per element of axis */
static ts_tensor *quant_param(const tso_node *n, ts_tensor *v, ts_tensor *x) {
    int r = ts_ndim(x);
    int64_t count = ts_numel(v);
    int64_t axis = tso_attr_int(n, "axis", 1);
    if (axis < 0) axis += r;
    bool per_axis = ts_ndim(v) == 1 && axis >= 0 && axis < r && ts_shape_of(x).dims[axis] == count;
    if (count != 1 && !per_axis)
        return tso_fail(n, TS_ERR_SHAPE, "scale/zero point %s does not fit input %s on axis %lld",
                        tsi_desc(v), tsi_desc(x), (long long)axis),
               NULL;
    ts_shape s = {.ndim = r};
    for (int d = 0; d < r; d++) s.dims[d] = d == axis ? count : 1;
    return ts_reshape(v, s);
}

/* the quantized types and their saturation ranges */
static bool quant_range(ts_dtype dt, double *lo, double *hi) {
    switch (dt) {
    case TS_U8:
        *lo = 0, *hi = 255;
        return true;
    case TS_I8:
        *lo = -128, *hi = 127;
        return true;
    case TS_U16:
        *lo = 0, *hi = 65535;
        return true;
    case TS_I16:
        *lo = -32768, *hi = 32767;
        return true;
    default:
        return false;
    }
}

static bool check_zero_point(const tso_node *n, ts_tensor *zp) {
    double lo, hi;
    if (!zp || quant_range(ts_dtype_of(zp), &lo, &hi)) return true;
    return tso_fail(n, TS_ERR_UNSUPPORTED,
                    "zero point of type %s (uint8, int8, uint16 and int16 are supported)",
                    tsi_desc(zp));
}

/* saturate(round_half_even(x / scale) + zp) as zp's type (uint8 without one); x / scale in the
 * scale's float type */
static ts_tensor *quantize(ts_tensor *x, ts_tensor *scale, ts_tensor *zp) {
    ts_tensor *q = ts_round(ts_div(ts_to_dtype(x, ts_dtype_of(scale)), scale));
    q = ts_to_dtype(q, TS_F64);
    if (zp) q = ts_add(q, ts_to_dtype(zp, TS_F64));
    const ts_dtype qt = zp ? ts_dtype_of(zp) : TS_U8;
    double lo = 0, hi = 255;
    quant_range(qt, &lo, &hi);
    return ts_to_dtype(ts_clamp(q, lo, hi), qt);
}

RUN(run_quantize) {
    (void)c;
    if (!check_zero_point(n, in[2])) return false;
    ts_tensor *scale = quant_param(n, in[1], in[0]);
    ts_tensor *zp = in[2] ? quant_param(n, in[2], in[0]) : NULL;
    if (!scale || (in[2] && !zp)) return tso_fail_pending(n);
    DONE(quantize(in[0], scale, zp));
}

/* (x - zp) * scale in float32, in the scale's type */
RUN(run_dequantize) {
    (void)c;
    if (in[2] && ts_dtype_of(in[2]) != ts_dtype_of(in[0]))
        return tso_fail(n, TS_ERR_ARG, "x %s and zero point %s differ in type", tsi_desc(in[0]),
                        tsi_desc(in[2]));
    ts_tensor *scale = quant_param(n, in[1], in[0]);
    ts_tensor *zp = in[2] ? quant_param(n, in[2], in[0]) : NULL;
    if (!scale || (in[2] && !zp)) return tso_fail_pending(n);
    ts_tensor *dx = ts_to_dtype(in[0], TS_F32);
    if (zp) dx = ts_sub(dx, ts_to_dtype(zp, TS_F32));
    DONE(ts_to_dtype(ts_mul(dx, ts_to_dtype(scale, TS_F32)), ts_dtype_of(in[1])));
}

/* the scale from x's range including 0 (1 when it is empty), the zero point that maps 0 exactly */
RUN(run_dynamic_quantize) {
    (void)c;
    ts_tensor *x = ts_to_dtype(in[0], TS_F32);
    ts_tensor *hi = ts_maximum_scalar(ts_max(x), 0), *lo = ts_minimum_scalar(ts_min(x), 0);
    ts_tensor *range = ts_sub(hi, lo);
    range = ts_where(ts_eq(hi, lo), ts_ones_like(range), range);
    ts_tensor *scale = ts_div_scalar(range, 255);
    ts_tensor *zp = ts_round(ts_clamp(ts_neg(ts_div(lo, scale)), 0, 255));
    out[2] = ts_to_dtype(zp, TS_U8);
    out[0] = quantize(x, scale, out[2]);
    out[1] = ts_to_dtype(scale, ts_dtype_of(in[0]));
    return (out[0] && out[1] && out[2]) || tso_fail_pending(n);
}

const tso_op_def tso_ops_extra[] = {
    {"HannWindow", 17, run_hann, check_window, false},
    {"HammingWindow", 17, run_hamming, check_window, false},
    {"BlackmanWindow", 17, run_blackman, check_window, false},
    {"MaxUnpool", 9, run_max_unpool, check_max_unpool, false},
    {"Det", 11, run_det, NULL, false},
    {"GridSample", 16, run_grid_sample, check_grid_sample, false},
    {"MelWeightMatrix", 17, run_mel, check_mel, false},
    {"NonMaxSuppression", 10, run_nms, check_nms, false},
    {"RoiAlign", 10, run_roi_align10, check_roi_align, false},
    {"RoiAlign", 16, run_roi_align16, check_roi_align, false},
    {"QuantizeLinear", 10, run_quantize, NULL, false},
    {"DequantizeLinear", 10, run_dequantize, NULL, false},
    {"DynamicQuantizeLinear", 11, run_dynamic_quantize, NULL, false},
    {NULL, 0, NULL, NULL, false},
};
