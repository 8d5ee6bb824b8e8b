/* ops_grid_sample.c — ONNX's GridSample (bilinear, nearest and bicubic sampling with zeros, border
 * or reflection padding) on [N, C, H, W], composed from Tessera's differentiable ops (gather and
 * arithmetic on the grid's positions and weights) so it runs on any device. */
#include <string.h>

#include "onnx/onnx_internal.h"

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

TSO_RUN(run_grid_sample) {
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
    TSO_DONE(ts_reshape(y, TS_SHAPE(nb, ch, ho, wo)));
}

const tso_op_def tso_ops_grid_sample[] = {
    {"GridSample", 16, run_grid_sample, check_grid_sample, false},
    {NULL, 0, NULL, NULL, false},
};
