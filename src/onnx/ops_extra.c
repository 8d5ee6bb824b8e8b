/* ops_extra.c — ONNX's signal windows and other operators outside the main families (MaxUnpool,
 * Det, GridSample), composed from Tessera's differentiable ops so they run on any device. */
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

const tso_op_def tso_ops_extra[] = {
    {"HannWindow", 17, run_hann, check_window, false},
    {"HammingWindow", 17, run_hamming, check_window, false},
    {"BlackmanWindow", 17, run_blackman, check_window, false},
    {"MaxUnpool", 9, run_max_unpool, check_max_unpool, false},
    {"Det", 11, run_det, NULL, false},
    {"GridSample", 16, run_grid_sample, check_grid_sample, false},
    {"MelWeightMatrix", 17, run_mel, check_mel, false},
    {NULL, 0, NULL, NULL, false},
};
