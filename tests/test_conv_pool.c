/* test_conv_pool.c — conv2d, max/avg/adaptive-avg pool2d on cpu and sim:0: forward and gradients
 * against naive double-precision references written here and against PyTorch 1.13 values,
 * gradcheck, dtypes, thread-count independence and the error paths. Pooling of a channels_last
 * input runs the NHWC kernels (kern_pool_nhwc.c) and gives the NCHW kernels' bits, forward (with
 * and without indices) and backward, channels_last out. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_kernels.h"
#include "backend/cpu/kern_conv.h"
#include "same_bits.h"
#include "tol_check.h"
#include "ts_test.h"

/* PyTorch 1.13 float64 values, from this script (inputs are exact binary fractions, made the same
 * way by seq_vec() below):
 *
 * import torch, torch.nn.functional as F
 * def seq(n, a, m, off, div): return torch.tensor([((i * a) % m - off) / div for i in range(n)],
 * dtype=torch.float64) def dump(name, t): print("static const double %s[%d] = {%s};" % (name,
 * t.numel(), ", ".join("%.17g" % v for v in t.flatten().tolist()))) def grads(y): g =
 * seq(y.numel(), 3, 5, 2, 2.0).reshape(y.shape); (y * g).sum().backward() x = seq(120, 7, 11,
 * 5, 4.0).reshape(1,4,5,6).requires_grad_(); w = seq(48, 5, 7,
 * 3, 8.0).reshape(4,2,3,2).requires_grad_() b = torch.tensor([0.5, -0.25, 0.125, 1.0],
 * dtype=torch.float64, requires_grad=True) y = F.conv2d(x, w, b, stride=(2,1), padding=(1,1),
 * dilation=(1,2), groups=2); grads(y) dump("conv_a_y", y.detach()); dump("conv_a_gx", x.grad);
 * dump("conv_a_gw", w.grad); dump("conv_a_gb", b.grad) x = seq(50, 7, 11,
 * 5, 4.0).reshape(1,2,5,5).requires_grad_() y = F.max_pool2d(x, 3, stride=2, padding=1,
 * dilation=(2,1), ceil_mode=True); grads(y)   # -> pool_b_y, pool_b_gx x = seq(25, 7, 11,
 * 5, 4.0).reshape(1,1,5,5).requires_grad_() y = F.avg_pool2d(x, 3, stride=2, padding=1,
 * ceil_mode=True, count_include_pad=False); grads(y)   # -> pool_c_* x = seq(70, 7, 11,
 * 5, 4.0).reshape(1,2,5,7).requires_grad_(); y = F.adaptive_avg_pool2d(x, (3,4)); grads(y)   # ->
 * pool_d_*
 */
/* clang-format off */
static const double conv_a_y[72] = {0.46875, 0.03125, 0.78125, 0.15625, -0.125, 0.53125, 0.125, 0.28125, -0.0625, 0.28125, 0.28125, 0.25, 0.21875, 0.15625, 0.78125, 0.03125, 0.3125, 1.40625, -0.40625, 0.875, 0.125, -0.28125, 0, -0.40625, 0, 0.75, -0.15625, -0.375, -0.25, -0.1875, 0.5625, -0.03125, -0.9375, -0.125, 0, -1.3125, 0, 0.4375, 1.25, 0.34375, -0.5625, 0.4375, 0.125, 1.4375, 1, -0.46875, -0.21875, 0.375, 0.03125, 0.90625, -0.15625, 0.15625, 0.125, -0.21875, 1.09375, 0.625, 0.59375, 0.90625, 0.875, 1.03125, 1.15625, 0.59375, 0.4375, 0.96875, 1.5, 0.65625, 0.75, 0.5625, 1.25, 1.25, 1.25, 1.3125};
static const double conv_a_gx[120] = {0, 0.875, -0.3125, 0.0625, -0.5, -0.125, 0.25, -0.75, 0.375, 0.875, -0.5, -0.25, 0.375, -0.3125, 0.0625, -0.5, -0.125, 0.5, -0.5, 0.375, 0.875, -0.5, 0, -0.25, -0.1875, 0.0625, -0.5, -0.125, 0.875, -0.125, 0.125, -0.375, 0.1875, 0.4375, -0.5625, 0.1875, -0.4375, -0.625, -0.0625, -0.125, 0.75, 0.5, 0, 0.1875, 0.4375, -0.5625, 0.3125, -0.375, -0.0625, -0.0625, -0.125, 0.75, 0.0625, -0.5625, 0.1875, 0.4375, -0.5625, 0.3125, -0.375, 0, 0.1875, -0.0625, -0.1875, -0.3125, -0.125, 0.5, -0.0625, -0.5, 0.8125, 0.5625, -0.625, -0.1875, 0, -0.1875, -0.3125, -0.125, 0.6875, -0.0625, -0.4375, 0.8125, 0.5625, -0.625, -0.25, -0.0625, 0.125, -0.3125, -0.125, 0.6875, -0.0625, -0.3125, -0.1875, 0.4375, 0.1875, -0.375, 0.3125, -0.375, -0.5, -0.0625, -0.625, 0.0625, 0.75, 0.375, 0.375, 0.1875, -0.375, 0.3125, -0.5625, 0.0625, 0.25, -0.625, 0.0625, 0.75, -0.125, -0.3125, 0, -0.375, 0.3125, -0.5625, 0.4375, 0.1875};
static const double conv_a_gw[48] = {-1.625, 5.25, -4.625, -4.125, -1.625, -2.75, -1.625, 5.25, -4.625, 0, -1.625, -2.75, 2.75, 0.5, -3.875, 0.25, -2.25, 0, 2.75, 0.5, 0.25, 8.5, -2.25, 0, 0, -3, 5.5, -3.25, -0.25, 5.25, -2.75, -3, 5.5, -3.25, 5.25, -0.25, -3, -2.75, -1.375, -3.875, 5.5, 0.5, -3, 0, -1.375, -3.875, 0, -2.25};
static const double conv_a_gb[4] = {-1, 0, 1, -0.5};
static const double pool_b_y[12] = {1, 1, 0.75, 1, 1, 0.75, 0.75, 0.75, 0.5, 0.75, 0.75, 0.5};
static const double pool_b_gx[50] = {0, 0, 0, 0, 0, 0, 0.5, 0, 0, -1.5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, -1, 0, 0, 1.5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
static const double pool_c_y[9] = {-0.125, 0.20833333333333334, 0.3125, -0.29166666666666669, -0.1111111111111111, -0.083333333333333329, 0, -0.125, -0.25};
static const double pool_c_gx[25] = {-0.25, -0.16666666666666669, 0.083333333333333329, -0.041666666666666671, -0.125, -0.083333333333333343, -2.7755575615628914e-17, 0.083333333333333329, -0.20833333333333331, -0.29166666666666663, 0.16666666666666666, 0.16666666666666666, 0, -0.16666666666666666, -0.16666666666666666, 0.29166666666666663, 0.20833333333333331, -0.083333333333333329, 0, 0.083333333333333343, 0.125, 0.041666666666666671, -0.083333333333333329, 0.16666666666666669, 0.25};
static const double pool_d_y[24] = {-0.4375, 0.125, -0.041666666666666664, 0.0625, -0.16666666666666666, -0.1388888888888889, 0, -0.125, -0.125, -0.25, 0.041666666666666664, -0.3125, 0.3125, -0.041666666666666664, 0.25, 0.125, 0.125, 0, 0.1388888888888889, 0.16666666666666666, -0.0625, 0.041666666666666664, -0.125, 0.4375};
static const double pool_d_gx[70] = {-0.25, -0.16666666666666669, 0.083333333333333329, 0, -0.083333333333333329, 0.16666666666666669, 0.25, -0.25, -0.27777777777777779, -0.027777777777777776, -0.055555555555555552, -0.027777777777777776, 0.1388888888888889, 0.16666666666666669, 0, -0.1111111111111111, -0.1111111111111111, -0.055555555555555552, 0.055555555555555552, -0.027777777777777776, -0.083333333333333329, 0.25, 0.1388888888888889, -0.1111111111111111, -0.22222222222222221, -0.1111111111111111, -0.06944444444444442, 0.041666666666666671, 0.25, 0.25, 0, -0.16666666666666666, -0.16666666666666666, -0.041666666666666657, 0.125, -0.125, 0.041666666666666657, 0.16666666666666666, 0.16666666666666666, 0, -0.25, -0.25, -0.041666666666666671, 0.069444444444444434, 0.1111111111111111, 0.22222222222222221, 0.1111111111111111, -0.1388888888888889, -0.25, 0.083333333333333329, 0.027777777777777776, -0.055555555555555552, 0.055555555555555552, 0.1111111111111111, 0.1111111111111111, 0, -0.16666666666666669, -0.1388888888888889, 0.027777777777777776, 0.055555555555555566, 0.027777777777777776, 0.27777777777777779, 0.25, -0.25, -0.16666666666666669, 0.083333333333333329, 0, -0.083333333333333329, 0.16666666666666669, 0.25};
/* clang-format on */

/* ------------------------------------------------------------------ helpers */
static uint64_t rng_state = 0x9E3779B97F4A7C15ULL;
static double urand(void) { /* [-1, 1) */
    rng_state ^= rng_state << 13, rng_state ^= rng_state >> 7, rng_state ^= rng_state << 17;
    return (double)(rng_state >> 11) / 4503599627370496.0 - 1.0;
}
static double *rand_vec(int64_t n) {
    double *v = malloc((size_t)(n > 0 ? n : 1) * sizeof *v);
    for (int64_t i = 0; i < n; i++) v[i] = urand();
    return v;
}
static double *seq_vec(int64_t n, int a, int m, int off, double div) {
    double *v = malloc((size_t)n * sizeof *v);
    for (int64_t i = 0; i < n; i++) v[i] = (double)((i * a) % m - off) / div;
    return v;
}
static double *host(ts_tensor *t) {
    int64_t n = ts_numel(t);
    double *h = calloc((size_t)(n > 0 ? n : 1), sizeof *h);
    if (ts_copy_to_host(ts_to_dtype(t, TS_F64), h, (size_t)n * sizeof *h) != TS_OK) h[0] = NAN;
    return h;
}
/* A leaf of dtype dt on dev holding v (optionally requiring grad). */
static ts_tensor *leaf(ts_shape s, const double *v, ts_dtype dt, ts_device dev, bool rg) {
    ts_tensor *t = ts_to_dtype(ts_tensor_f64(s, v, (ts_opts){.device = dev}), dt);
    if (rg) ts_set_requires_grad(t, true);
    return t;
}
/* Every element within tol * (1 + |ref|); prints the first mismatch. */
static void check_close(const char *what, ts_tensor *t, const double *ref, int64_t n, double tol) {
    CHECK(t != NULL);
    if (!t) return;
    CHECK_EQ(ts_numel(t), n);
    double *h = host(t);
    int64_t bad = -1;
    for (int64_t i = 0; i < n && i < ts_numel(t) && bad < 0; i++)
        if (!ts_test_near(h[i], ref[i], tol * (1 + fabs(ref[i])))) bad = i;
    if (bad >= 0) printf("  %s[%lld]: %.17g vs %.17g\n", what, (long long)bad, h[bad], ref[bad]);
    CHECK(bad < 0);
    free(h);
}
static bool shape_is(ts_tensor *t, ts_shape s) {
    if (!t || ts_ndim(t) != s.ndim) return false;
    for (int i = 0; i < s.ndim; i++)
        if (ts_size(t, i) != s.dims[i]) return false;
    return true;
}
static const char *dev_name(ts_device d) { return ts_device_str(d); }

/* Every element within the bound of a sum of k products computed from inputs already in dtype dt:
 * accumulated in f32 (f64 for f64), each partial sum off by at most k roundings of the
 * accumulator (Higham's gamma_k), and the result rounded once or twice to dt (the kernel's output,
 * and a cast of an f32 intermediate). The bound scales with mag = the sum of |products|, the
 * reference computed on absolute values; an all-zero or sign-flipped result misses it by far. */
static void check_bound(const char *what, ts_tensor *t, const double *ref, const double *mag,
                        int64_t n, ts_dtype dt, int64_t k) {
    CHECK(t != NULL);
    if (!t) return;
    CHECK_EQ(ts_numel(t), n);
    const double acc = ts_test_unit_roundoff(dt == TS_F64 ? TS_F64 : TS_F32);
    const double rel = 2 * ts_test_unit_roundoff(dt) + (double)k * acc;
    double *h = host(t);
    int64_t bad = -1;
    for (int64_t i = 0; i < n && i < ts_numel(t) && bad < 0; i++)
        if (!ts_test_near(h[i], ref[i], rel * mag[i] + 1e-300)) bad = i;
    if (bad >= 0)
        printf("  %s[%lld]: %.17g vs %.17g (bound %.3g)\n", what, (long long)bad, h[bad], ref[bad],
               rel * mag[bad]);
    CHECK(bad < 0);
    free(h);
}

/* ------------------------------------------------------------------ conv reference */
typedef struct conv_case {
    int n, c, h, w, o, kh, kw;
    ts_conv2d_opts opt;
    bool bias, unbatched, strided_input;
} conv_case;

static int dflt(int v, int d) { return v ? v : d; }
/* >= 0: rows 0 and 1 of the first input plane get +-inf in this column */
static int conv_inf_col = -1;

static void conv_out_size(const conv_case *k, int *oh, int *ow) {
    const ts_conv2d_opts *o = &k->opt;
    *oh = (k->h + 2 * o->padding[0] - dflt(o->dilation[0], 1) * (k->kh - 1) - 1) /
              dflt(o->stride[0], 1) +
          1;
    *ow = (k->w + 2 * o->padding[1] - dflt(o->dilation[1], 1) * (k->kw - 1) - 1) /
              dflt(o->stride[1], 1) +
          1;
}

/* y = conv(x, w) + b and, from gy, the gradients gx, gw, gb (all zeroed here first). r[4] are
 * the same four computed on absolute values (the error bounds' scale), or NULL. */
static void ref_conv(const conv_case *k, const double *x, const double *w, const double *b,
                     const double *gy, double *y, double *gx, double *gw, double *gb,
                     double *const *r) {
    int oh, ow;
    conv_out_size(k, &oh, &ow);
    const int G = dflt(k->opt.groups, 1), cg = k->c / G, og = k->o / G;
    const int sh = dflt(k->opt.stride[0], 1), sw = dflt(k->opt.stride[1], 1);
    const int dh = dflt(k->opt.dilation[0], 1), dw = dflt(k->opt.dilation[1], 1);
    memset(gx, 0, sizeof(double) * (size_t)(k->n * k->c * k->h * k->w));
    memset(gw, 0, sizeof(double) * (size_t)(k->o * cg * k->kh * k->kw));
    memset(gb, 0, sizeof(double) * (size_t)k->o);
    if (r) {
        double *ax = malloc(sizeof(double) * (size_t)(k->n * k->c * k->h * k->w)),
               *aw = malloc(sizeof(double) * (size_t)(k->o * cg * k->kh * k->kw)),
               *ab = malloc(sizeof(double) * (size_t)k->o),
               *agy = malloc(sizeof(double) * (size_t)(k->n * k->o * oh * ow));
        for (int i = 0; i < k->n * k->c * k->h * k->w; i++) ax[i] = fabs(x[i]);
        for (int i = 0; i < k->o * cg * k->kh * k->kw; i++) aw[i] = fabs(w[i]);
        for (int i = 0; i < k->o; i++) ab[i] = k->bias ? fabs(b[i]) : 0;
        for (int i = 0; i < k->n * k->o * oh * ow; i++) agy[i] = fabs(gy[i]);
        ref_conv(k, ax, aw, ab, agy, r[0], r[1], r[2], r[3], NULL);
        free(ax), free(aw), free(ab), free(agy);
    }
    for (int n = 0; n < k->n; n++)
        for (int o = 0; o < k->o; o++)
            for (int i = 0; i < oh; i++)
                for (int j = 0; j < ow; j++) {
                    const int yi = ((n * k->o + o) * oh + i) * ow + j;
                    double s = k->bias ? b[o] : 0;
                    gb[o] += gy[yi];
                    for (int c = 0; c < cg; c++)
                        for (int p = 0; p < k->kh; p++)
                            for (int q = 0; q < k->kw; q++) {
                                int iy = i * sh - k->opt.padding[0] + p * dh;
                                int ix = j * sw - k->opt.padding[1] + q * dw;
                                if (iy < 0 || iy >= k->h || ix < 0 || ix >= k->w) continue;
                                int xi = ((n * k->c + (o / og) * cg + c) * k->h + iy) * k->w + ix;
                                int wi = ((o * cg + c) * k->kh + p) * k->kw + q;
                                s += x[xi] * w[wi];
                                gx[xi] += gy[yi] * w[wi];
                                gw[wi] += gy[yi] * x[xi];
                            }
                    y[yi] = s;
                }
}

/* The input as a tensor; strided_input makes it a transposed view of a [.., W, H] tensor. */
static ts_tensor *conv_input(const conv_case *k, const double *x, ts_dtype dt, ts_device dev) {
    ts_shape s = k->unbatched ? TS_SHAPE(k->c, k->h, k->w) : TS_SHAPE(k->n, k->c, k->h, k->w);
    if (!k->strided_input) return leaf(s, x, dt, dev, true);
    int nd = s.ndim;
    int64_t plane = (int64_t)k->h * k->w, nplanes = (int64_t)k->n * k->c;
    double *xt = malloc(sizeof(double) * (size_t)(plane * nplanes));
    for (int64_t p = 0; p < nplanes; p++)
        for (int i = 0; i < k->h; i++)
            for (int j = 0; j < k->w; j++)
                xt[p * plane + j * k->h + i] = x[p * plane + i * k->w + j];
    ts_shape st = s;
    st.dims[nd - 2] = k->w, st.dims[nd - 1] = k->h;
    ts_tensor *base = leaf(st, xt, dt, dev, false);
    free(xt);
    /* a leaf that is itself a non-contiguous view */
    ts_tensor *t = ts_detach(ts_transpose(base, nd - 2, nd - 1));
    ts_set_requires_grad(t, true);
    return t;
}

static void run_conv_case(const conv_case *k, ts_device dev, ts_dtype dt) {
    ts_scope_begin();
    int oh, ow;
    conv_out_size(k, &oh, &ow);
    const int G = dflt(k->opt.groups, 1);
    const int64_t nx = (int64_t)k->n * k->c * k->h * k->w,
                  nw = (int64_t)k->o * (k->c / G) * k->kh * k->kw;
    const int64_t ny = (int64_t)k->n * k->o * oh * ow;
    double *x = rand_vec(nx), *w = rand_vec(nw), *b = rand_vec(k->o), *gy = rand_vec(ny);
    if (conv_inf_col >= 0) x[conv_inf_col] = INFINITY, x[k->w + conv_inf_col] = -INFINITY;
    /* what the low-precision dtypes can hold, so the reference sees the same inputs */
    ts_tensor *tx = conv_input(k, x, dt, dev);
    ts_tensor *tw = leaf(TS_SHAPE(k->o, k->c / G, k->kh, k->kw), w, dt, dev, true);
    ts_tensor *tb = k->bias ? leaf(TS_SHAPE(k->o), b, dt, dev, true) : NULL;
    free(x), free(w), free(b);
    x = host(tx), w = host(tw), b = k->bias ? host(tb) : rand_vec(k->o);
    double *y = malloc(sizeof(double) * (size_t)(ny + 1)),
           *gx = malloc(sizeof(double) * (size_t)nx + 8);
    double *gw = malloc(sizeof(double) * (size_t)nw), *gb = malloc(sizeof(double) * (size_t)k->o);
    ts_shape ys = k->unbatched ? TS_SHAPE(k->o, oh, ow) : TS_SHAPE(k->n, k->o, oh, ow);
    ts_tensor *tgy = leaf(ys, gy, dt, dev, false);
    free(gy);
    gy = host(tgy);
    double *mag[4] = {malloc(sizeof(double) * (size_t)(ny + 1)),
                      malloc(sizeof(double) * (size_t)nx + 8), malloc(sizeof(double) * (size_t)nw),
                      malloc(sizeof(double) * (size_t)k->o)};
    ref_conv(k, x, w, b, gy, y, gx, gw, gb, mag);
    ts_tensor *ty = ts_conv2d(tx, tw, tb, k->opt);
    CHECK_OK();
    CHECK(shape_is(ty, ys));
    CHECK(ty && ts_dtype_of(ty) == dt && ts_device_equal(ts_device_of(ty), dev));
    CHECK_STREQ(ts_grad_fn_name(ty), "ConvolutionBackward0");
    printf("conv %dx%dx%dx%d o%d k%dx%d g%d on %s %s\n", k->n, k->c, k->h, k->w, k->o, k->kh, k->kw,
           G, dev_name(dev), ts_dtype_name(dt));
    /* terms per output: y sums c/G * kh * kw products (+ bias), gx at most o/G * kh * kw, gw
     * n * oh * ow, gb n * oh * ow */
    const int64_t ky = nw / k->o + 1, kx = (int64_t)(k->o / G) * k->kh * k->kw,
                  kw = (int64_t)k->n * oh * ow;
    check_bound("y", ty, y, mag[0], ny, dt, ky);
    ts_backward_with(ty, tgy);
    CHECK_OK();
    check_bound("gx", ts_grad(tx), gx, mag[1], nx, dt, kx);
    check_bound("gw", ts_grad(tw), gw, mag[2], nw, dt, kw);
    if (k->bias) check_bound("gb", ts_grad(tb), gb, mag[3], k->o, dt, kw);
    free(x), free(w), free(b), free(gy), free(y), free(gx), free(gw), free(gb);
    for (int i = 0; i < 4; i++) free(mag[i]);
    ts_scope_end();
}

/* clang-format off */
static const conv_case conv_cases[] = {
    {2, 3, 7, 6, 4, 3, 3, {.groups = 0}, true, false, false},
    {2, 4, 8, 7, 6, 3, 2, {.stride = {2, 1}, .padding = {1, 2}, .dilation = {1, 2}, .groups = 2}, true, false, false},
    {1, 4, 6, 6, 4, 3, 3, {.padding = {1, 1}, .groups = 4}, false, false, true}, /* depthwise */
    {3, 6, 9, 9, 6, 5, 5, {.stride = {2, 2}, .padding = {2, 2}, .groups = 3}, true, false, false},
    {2, 5, 4, 3, 3, 1, 1, {.groups = 1}, true, false, false}, /* 1x1 direct */
    {2, 5, 4, 3, 3, 1, 1, {.groups = 1}, true, false, true}, /* 1x1, strided x */
    {2, 3, 5, 5, 4, 1, 1, {.stride = {2, 2}}, false, false, false}, /* 1x1 strided */
    {2, 2, 10, 10, 3, 3, 3, {.stride = {3, 3}, .padding = {3, 3}, .dilation = {2, 2}}, true, false, false},
    {1, 2, 5, 5, 3, 3, 3, {.padding = {1, 1}}, true, true, false}, /* unbatched */
    {9, 3, 16, 16, 6, 5, 5, {.groups = 1}, true, false, false}, /* batch-parallel */
    {2, 6, 9, 8, 16, 3, 3, {.padding = {1, 1}, .stride = {2, 1}}, true, false, false}, /* 16 outputs */
    {3, 4, 7, 9, 16, 3, 2, {.dilation = {2, 1}, .groups = 2}, true, false, false}, /* 8 per group */
    {18, 2, 5, 5, 3, 3, 3, {.padding = {1, 1}}, true, false, false}, /* 18 images: chunks of the weight gradient sum two */
};
/* clang-format on */
#define N_CONV_CASES ((int)(sizeof conv_cases / sizeof conv_cases[0]))

/* ------------------------------------------------------------------ pool reference */
enum { P_MAX, P_AVG, P_AVG_EX, P_ADAPT };
typedef struct pool_case {
    int n, c, h, w, kind;
    ts_pool2d_opts opt;
    int aoh, aow; /* adaptive output */
    bool unbatched;
} pool_case;

/* PyTorch's pooling_output_shape, restated */
static int pool_out(int in, int k, int pad, int s, int d, bool ceil) {
    int num = in + 2 * pad - d * (k - 1) - 1 + (ceil ? s - 1 : 0);
    int out = (int)floor((double)num / s) + 1;
    if (ceil && (out - 1) * s >= in + pad) out--;
    return out;
}

static void pool_out_size(const pool_case *k, int *oh, int *ow) {
    if (k->kind == P_ADAPT) {
        *oh = k->aoh, *ow = k->aow;
        return;
    }
    const ts_pool2d_opts *o = &k->opt;
    *oh = pool_out(k->h, o->kernel[0], o->padding[0], dflt(o->stride[0], o->kernel[0]),
                   dflt(o->dilation[0], 1), o->ceil_mode);
    *ow = pool_out(k->w, o->kernel[1], o->padding[1], dflt(o->stride[1], o->kernel[1]),
                   dflt(o->dilation[1], 1), o->ceil_mode);
}

/* Window taps along one axis: positions p0 + t*d for t < k that land in [0, in) (and, counting
 * padding, in [-pad, in + pad)). */
static void ref_pool(const pool_case *k, const double *x, const double *gy, double *y, double *gx) {
    int oh, ow;
    pool_out_size(k, &oh, &ow);
    const ts_pool2d_opts *o = &k->opt;
    const int kh = o->kernel[0], kw = o->kernel[1];
    const int sh = dflt(o->stride[0], kh), sw = dflt(o->stride[1], kw);
    const int dh = dflt(o->dilation[0], 1), dw = dflt(o->dilation[1], 1);
    memset(gx, 0, sizeof(double) * (size_t)(k->n * k->c * k->h * k->w));
    for (int pl = 0; pl < k->n * k->c; pl++) {
        const double *xp = x + pl * k->h * k->w;
        double *gp = gx + pl * k->h * k->w;
        for (int i = 0; i < oh; i++)
            for (int j = 0; j < ow; j++) {
                const int yi = (pl * oh + i) * ow + j;
                int y0, y1, x0, x1, stepy = 1, stepx = 1, padcount = 0;
                if (k->kind == P_ADAPT) {
                    y0 = i * k->h / oh, y1 = ((i + 1) * k->h + oh - 1) / oh;
                    x0 = j * k->w / ow, x1 = ((j + 1) * k->w + ow - 1) / ow;
                } else {
                    y0 = i * sh - o->padding[0], y1 = y0 + (kh - 1) * dh + 1, stepy = dh;
                    x0 = j * sw - o->padding[1], x1 = x0 + (kw - 1) * dw + 1, stepx = dw;
                    for (int p = y0; p < y1; p += dh)
                        for (int q = x0; q < x1; q += dw)
                            padcount += p < k->h + o->padding[0] && q < k->w + o->padding[1];
                }
                double m = -INFINITY, s = 0;
                int best = -1, cnt = 0;
                for (int p = y0; p < y1; p += stepy)
                    for (int q = x0; q < x1; q += stepx) {
                        if (p < 0 || p >= k->h || q < 0 || q >= k->w) continue;
                        double v = xp[p * k->w + q];
                        if (best < 0) best = p * k->w + q;
                        if (v > m || isnan(v)) m = v, best = p * k->w + q;
                        s += v, cnt++;
                    }
                if (k->kind == P_MAX) {
                    y[yi] = m;
                    gp[best] += gy[yi];
                    continue;
                }
                const int div = k->kind == P_AVG ? padcount : cnt;
                y[yi] = cnt ? s / div : 0;
                for (int p = y0; cnt && p < y1; p += stepy)
                    for (int q = x0; q < x1; q += stepx)
                        if (p >= 0 && p < k->h && q >= 0 && q < k->w)
                            gp[p * k->w + q] += gy[yi] / div;
            }
    }
}

static ts_tensor *pool_call(const pool_case *k, ts_tensor *x) {
    switch (k->kind) {
    case P_MAX:
        return ts_max_pool2d(x, k->opt);
    case P_AVG:
        return ts_avg_pool2d(x, k->opt);
    case P_AVG_EX: {
        ts_pool2d_opts o = k->opt;
        o.exclude_pad = true;
        return ts_avg_pool2d(x, o);
    }
    default:
        return ts_adaptive_avg_pool2d(x, k->aoh, k->aow);
    }
}
static const char *pool_grad_names[] = {"MaxPool2DWithIndicesBackward0", "AvgPool2DBackward0",
                                        "AvgPool2DBackward0", "AdaptiveAvgPool2DBackward0"};

/* The case's input x (a leaf requiring grad) and output gradient gy: random values of dtype dt on
 * dev, NaN planted at nan_at >= 0 (and -inf on the element after it). */
static void pool_inputs(const pool_case *k, ts_device dev, ts_dtype dt, int nan_at, ts_tensor **tx,
                        ts_tensor **tgy) {
    int oh, ow;
    pool_out_size(k, &oh, &ow);
    const int64_t nx = (int64_t)k->n * k->c * k->h * k->w, ny = (int64_t)k->n * k->c * oh * ow;
    double *x = rand_vec(nx), *gy = rand_vec(ny);
    if (nan_at >= 0) x[nan_at] = NAN, x[nan_at + 1] = -INFINITY;
    ts_shape xs = k->unbatched ? TS_SHAPE(k->c, k->h, k->w) : TS_SHAPE(k->n, k->c, k->h, k->w);
    ts_shape ys = k->unbatched ? TS_SHAPE(k->c, oh, ow) : TS_SHAPE(k->n, k->c, oh, ow);
    *tx = leaf(xs, x, dt, dev, true), *tgy = leaf(ys, gy, dt, dev, false);
    free(x), free(gy);
}

/* nan_at >= 0 plants NaN there (and -inf on the element after it). */
static void run_pool_case(const pool_case *k, ts_device dev, ts_dtype dt, int nan_at) {
    ts_scope_begin();
    int oh, ow;
    pool_out_size(k, &oh, &ow);
    const int64_t nx = (int64_t)k->n * k->c * k->h * k->w, ny = (int64_t)k->n * k->c * oh * ow;
    const ts_shape ys = k->unbatched ? TS_SHAPE(k->c, oh, ow) : TS_SHAPE(k->n, k->c, oh, ow);
    ts_tensor *tx, *tgy;
    pool_inputs(k, dev, dt, nan_at, &tx, &tgy);
    double *x = host(tx), *gy = host(tgy);
    double *y = malloc(sizeof(double) * (size_t)(ny + 1)),
           *gx = malloc(sizeof(double) * (size_t)nx);
    ref_pool(k, x, gy, y, gx);
    /* the error bounds' scale: the same windows over |x| (average) or |y| (max), and |gy| */
    double *ax = calloc((size_t)nx + 1, sizeof(double)),
           *agy = calloc((size_t)ny + 1, sizeof(double));
    double *ymag = calloc((size_t)ny + 1, sizeof(double)),
           *gxmag = calloc((size_t)nx + 1, sizeof(double)),
           *unused = calloc((size_t)(nx + ny) + 1, sizeof(double));
    for (int64_t i = 0; i < nx; i++) ax[i] = fabs(x[i]);
    for (int64_t i = 0; i < ny; i++) agy[i] = fabs(gy[i]);
    ref_pool(k, x, agy, unused, gxmag);
    if (k->kind == P_MAX)
        for (int64_t i = 0; i < ny; i++) ymag[i] = fabs(y[i]);
    else
        ref_pool(k, ax, agy, ymag, unused);
    /* terms per output: a window (at most kh * kw, the whole plane when adaptive) */
    const int64_t terms =
        k->kind == P_ADAPT ? (int64_t)k->h * k->w : (int64_t)k->opt.kernel[0] * k->opt.kernel[1];
    printf("pool kind %d %dx%dx%dx%d -> %dx%d on %s %s\n", k->kind, k->n, k->c, k->h, k->w, oh, ow,
           dev_name(dev), ts_dtype_name(dt));
    ts_tensor *ty = pool_call(k, tx);
    CHECK_OK();
    CHECK(shape_is(ty, ys));
    CHECK_STREQ(ts_grad_fn_name(ty), pool_grad_names[k->kind]);
    check_bound("y", ty, y, ymag, ny, dt, terms);
    ts_backward_with(ty, tgy);
    CHECK_OK();
    check_bound("gx", ts_grad(tx), gx, gxmag, nx, dt, terms);
    /* without a graph (no indices kept) the values are the same */
    ts_no_grad_begin();
    check_bound("y (no grad)", pool_call(k, tx), y, ymag, ny, dt, terms);
    ts_no_grad_end();
    free(x), free(gy), free(y), free(gx), free(ax), free(agy), free(ymag), free(gxmag),
        free(unused);
    ts_scope_end();
}

/* The same case with x channels_last: the NHWC kernels ran (forward, and backward), the output and
 * the input gradient are channels_last and hold the NCHW path's bits (run_pool_case checks those
 * against the float64 reference). nan_at as run_pool_case's. */
static void run_pool_case_cl(const pool_case *k, ts_device dev, ts_dtype dt, int nan_at) {
    if (k->unbatched || k->c < 2) return; /* one channel: the two layouts are the same memory */
    ts_scope_begin();
    ts_tensor *tx, *tgy;
    pool_inputs(k, dev, dt, nan_at, &tx, &tgy);
    ts_tensor *cx = ts_detach(ts_contiguous_format(tx, TS_CHANNELS_LAST));
    ts_set_requires_grad(cx, true);
    ts_tensor *y = pool_call(k, tx);
    ts_backward_with(y, tgy);
    const uint64_t before = tsi_pool_nhwc_count();
    ts_tensor *cy = pool_call(k, cx);
    const uint64_t fwd = tsi_pool_nhwc_count() - before;
    ts_backward_with(cy, ts_contiguous_format(tgy, TS_CHANNELS_LAST));
    const uint64_t both = tsi_pool_nhwc_count() - before;
    ts_no_grad_begin();
    ts_tensor *cy_ng = pool_call(k, cx);
    ts_no_grad_end();
    CHECK_OK();
    CHECK_EQ(fwd, 1);
    CHECK_EQ(both, 2);
    CHECK(ts_is_contiguous_format(cy, TS_CHANNELS_LAST) &&
          ts_is_contiguous_format(cy_ng, TS_CHANNELS_LAST));
    CHECK(ts_is_contiguous_format(ts_grad(cx), TS_CHANNELS_LAST));
    const bool ok = same_bits(cy, y) && same_bits(cy_ng, y) && same_bits(ts_grad(cx), ts_grad(tx));
    if (!ok)
        printf("  channels_last pool kind %d on %s %s: not the NCHW bits\n", k->kind, dev_name(dev),
               ts_dtype_name(dt));
    CHECK(ok);
    ts_scope_end();
}

/* A max pool over windows of -inf only: no tap beats the start, so each window's index is its
 * first tap's (where backward puts the gradient), in both layouts alike. */
static void test_pool_cl_all_minus_inf(ts_dtype dt) {
    ts_scope_begin();
    const ts_pool2d_opts o = {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}};
    ts_tensor *x = ts_full(TS_SHAPE(2, 3, 5, 6), -INFINITY, (ts_opts){.dtype = dt});
    ts_set_requires_grad(x, true);
    ts_tensor *cx = ts_detach(ts_contiguous_format(x, TS_CHANNELS_LAST));
    ts_set_requires_grad(cx, true);
    ts_tensor *y = ts_max_pool2d(x, o), *cy = ts_max_pool2d(cx, o);
    ts_backward(ts_sum(y));
    ts_backward(ts_sum(cy));
    CHECK_OK();
    CHECK(same_bits(cy, y) && same_bits(ts_grad(cx), ts_grad(x)));
    ts_scope_end();
}

/* clang-format off */
static const pool_case pool_cases[] = {
    {2, 3, 7, 6, P_MAX, {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}}, 0, 0, false},
    {2, 2, 9, 8, P_MAX, {.kernel = {3, 2}, .stride = {2, 1}, .padding = {1, 0}, .dilation = {2, 1}, .ceil_mode = true}, 0, 0, false},
    {2, 3, 8, 6, P_MAX, {.kernel = {2, 2}}, 0, 0, false}, /* the 2x2 fast path */
    {1, 1, 5, 5, P_MAX, {.kernel = {3, 3}, .stride = {3, 3}, .padding = {1, 1}, .ceil_mode = true}, 0, 0, false},
    {1, 3, 7, 5, P_MAX, {.kernel = {2, 3}, .stride = {1, 2}, .padding = {1, 1}}, 0, 0, true},
    {2, 3, 6, 6, P_AVG, {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}, .ceil_mode = true}, 0, 0, false},
    {2, 3, 6, 6, P_AVG_EX, {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}, .ceil_mode = true}, 0, 0, false},
    {2, 2, 5, 7, P_AVG, {.kernel = {2, 3}, .stride = {1, 2}, .padding = {1, 1}}, 0, 0, false},
    {2, 2, 5, 7, P_AVG_EX, {.kernel = {2, 3}, .stride = {1, 2}, .padding = {1, 1}}, 0, 0, false},
    {2, 2, 7, 5, P_ADAPT, {.kernel = {0}}, 3, 2, false},
    {1, 3, 6, 6, P_ADAPT, {.kernel = {0}}, 4, 4, false},
    {2, 2, 5, 3, P_ADAPT, {.kernel = {0}}, 7, 5, false}, /* windows overlap and repeat */
    {2, 2, 5, 6, P_ADAPT, {.kernel = {0}}, 1, 1, false},
    {1, 3, 13, 11, P_ADAPT, {.kernel = {0}}, 1, 1, false}, /* 16-sum chunks and a tail */
    {1, 5, 7, 4, P_ADAPT, {.kernel = {0}}, 2, 3, true},
    /* stride 2 without a 2x2 window: the generic loop, not the 2x2 fast path */
    {2, 3, 6, 7, P_MAX, {.kernel = {2, 3}, .stride = {2, 2}}, 0, 0, false},
    {2, 3, 6, 6, P_MAX, {.kernel = {1, 2}, .stride = {2, 2}}, 0, 0, false},
};
/* clang-format on */
#define N_POOL_CASES ((int)(sizeof pool_cases / sizeof pool_cases[0]))

/* ------------------------------------------------------------------ PyTorch values */
static void test_pytorch_values(ts_device dev) {
    ts_scope_begin();
    double *x = seq_vec(120, 7, 11, 5, 4.0), *w = seq_vec(48, 5, 7, 3, 8.0);
    const double bv[4] = {0.5, -0.25, 0.125, 1.0};
    ts_tensor *tx = leaf(TS_SHAPE(1, 4, 5, 6), x, TS_F64, dev, true);
    ts_tensor *tw = leaf(TS_SHAPE(4, 2, 3, 2), w, TS_F64, dev, true);
    ts_tensor *tb = leaf(TS_SHAPE(4), bv, TS_F64, dev, true);
    ts_tensor *y = ts_conv2d(
        tx, tw, tb,
        (ts_conv2d_opts){.stride = {2, 1}, .padding = {1, 1}, .dilation = {1, 2}, .groups = 2});
    double *g = seq_vec(72, 3, 5, 2, 2.0);
    check_close("conv_a_y", y, conv_a_y, 72, 1e-12);
    ts_backward_with(y, leaf(TS_SHAPE(1, 4, 3, 6), g, TS_F64, dev, false));
    check_close("conv_a_gx", ts_grad(tx), conv_a_gx, 120, 1e-12);
    check_close("conv_a_gw", ts_grad(tw), conv_a_gw, 48, 1e-12);
    check_close("conv_a_gb", ts_grad(tb), conv_a_gb, 4, 1e-12);
    free(x), free(w), free(g);

    struct {
        ts_shape xs, ys;
        int kind;
        ts_pool2d_opts o;
        const double *ry, *rgx;
    } pc[3] = {
        {TS_SHAPE(1, 2, 5, 5),
         TS_SHAPE(1, 2, 2, 3),
         P_MAX,
         {.kernel = {3, 3},
          .stride = {2, 2},
          .padding = {1, 1},
          .dilation = {2, 1},
          .ceil_mode = true},
         pool_b_y,
         pool_b_gx},
        {TS_SHAPE(1, 1, 5, 5),
         TS_SHAPE(1, 1, 3, 3),
         P_AVG_EX,
         {.kernel = {3, 3},
          .stride = {2, 2},
          .padding = {1, 1},
          .ceil_mode = true,
          .exclude_pad = true},
         pool_c_y,
         pool_c_gx},
        {TS_SHAPE(1, 2, 5, 7), TS_SHAPE(1, 2, 3, 4), P_ADAPT, {.kernel = {0}}, pool_d_y, pool_d_gx},
    };
    for (int i = 0; i < 3; i++) {
        const int64_t nx = pc[i].xs.dims[1] * pc[i].xs.dims[2] * pc[i].xs.dims[3];
        const int64_t ny = pc[i].ys.dims[1] * pc[i].ys.dims[2] * pc[i].ys.dims[3];
        x = seq_vec(nx, 7, 11, 5, 4.0), g = seq_vec(ny, 3, 5, 2, 2.0);
        ts_tensor *px = leaf(pc[i].xs, x, TS_F64, dev, true);
        ts_tensor *py = pc[i].kind == P_MAX     ? ts_max_pool2d(px, pc[i].o)
                        : pc[i].kind == P_ADAPT ? ts_adaptive_avg_pool2d(px, 3, 4)
                                                : ts_avg_pool2d(px, pc[i].o);
        CHECK(shape_is(py, pc[i].ys));
        check_close("pool y", py, pc[i].ry, ny, 1e-12);
        ts_backward_with(py, leaf(pc[i].ys, g, TS_F64, dev, false));
        check_close("pool gx", ts_grad(px), pc[i].rgx, nx, 1e-12);
        free(x), free(g);
    }
    CHECK_OK();
    ts_scope_end();
}

/* ------------------------------------------------------------------ gradcheck */
static ts_tensor *conv_fn(ts_tensor *const *in, int n, void *ctx) {
    return ts_conv2d(in[0], in[1], n > 2 ? in[2] : NULL, *(const ts_conv2d_opts *)ctx);
}
static ts_tensor *pool_fn(ts_tensor *const *in, int n, void *ctx) {
    return pool_call((const pool_case *)ctx, in[0]);
}

static void test_gradcheck(ts_device dev) {
    ts_scope_begin();
    const ts_conv2d_opts opts[2] = {
        {.stride = {2, 1}, .padding = {1, 2}, .dilation = {1, 2}, .groups = 2},
        {.padding = {1, 1}}};
    for (int i = 0; i < 2; i++) {
        double *x = rand_vec(2 * 4 * 5 * 6), *w = rand_vec(4 * 4 * 3 * 3), *b = rand_vec(4);
        const int cg = i == 0 ? 2 : 4;
        ts_tensor *in[3] = {leaf(TS_SHAPE(2, 4, 5, 6), x, TS_F64, dev, true),
                            leaf(TS_SHAPE(4, cg, 3, 3), w, TS_F64, dev, true),
                            leaf(TS_SHAPE(4), b, TS_F64, dev, true)};
        CHECK(ts_gradcheck(conv_fn, (void *)&opts[i], in, 3, (ts_gradcheck_opts){0}));
        CHECK_OK();
        free(x), free(w), free(b);
    }
    /* clang-format off */
    const pool_case pcs[4] = {
        {2, 2, 6, 5, P_MAX, {.kernel = {3, 2}, .stride = {2, 1}, .padding = {1, 1}, .dilation = {1, 2}, .ceil_mode = true}, 0, 0, false},
        {2, 2, 6, 5, P_AVG, {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}, .ceil_mode = true}, 0, 0, false},
        {2, 2, 6, 5, P_AVG_EX, {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}, .ceil_mode = true}, 0, 0, false},
        {2, 2, 6, 5, P_ADAPT, {.kernel = {0}}, 4, 3, false}
    };
    /* clang-format on */
    for (int i = 0; i < 4; i++) {
        double *x = rand_vec(2 * 2 * 6 * 5);
        ts_tensor *in = leaf(TS_SHAPE(2, 2, 6, 5), x, TS_F64, dev, true);
        CHECK(ts_gradcheck(pool_fn, (void *)&pcs[i], &in, 1, (ts_gradcheck_opts){0}));
        CHECK_OK();
        free(x);
    }
    ts_scope_end();
}

/* ------------------------------------------------------------------ threads, empty, errors */
/* The built-in kernels sum the weight gradient in a fixed order: the same bits with 1 and 2
 * threads. oneDNN's primitives split sums by thread (a primitive is made for a thread count,
 * conv_dnnl.c): there each side is within K u K max|a| max|b| of the exact sums, K the products in
 * a sum. Each provider is forced in turn (the automatic choice mixes them: the direct kernels
 * forward, oneDNN for the weight gradient of this shape), then the run's own choice (TS_CONV) is
 * restored. Without oneDNN, "dnnl" falls back to the built-in kernels: equal bits pass its bound.
 */
static void thread_independence_with(const char *provider) {
    ts_scope_begin();
    tsi_conv_force_provider(provider);
    double *x = rand_vec(20 * 3 * 12 * 12), *w = rand_vec(6 * 3 * 5 * 5),
           *g = rand_vec(20 * 6 * 8 * 8);
    float *r[2][3];
    const int saved = ts_get_num_threads();
    for (int t = 0; t < 2; t++) {
        ts_set_num_threads(t + 1);
        ts_tensor *tx = leaf(TS_SHAPE(20, 3, 12, 12), x, TS_F32, ts_cpu(), true);
        ts_tensor *tw = leaf(TS_SHAPE(6, 3, 5, 5), w, TS_F32, ts_cpu(), true);
        ts_tensor *y = ts_conv2d(tx, tw, NULL, (ts_conv2d_opts){0});
        ts_backward_with(y, leaf(TS_SHAPE(20, 6, 8, 8), g, TS_F32, ts_cpu(), false));
        ts_tensor *outs[3] = {y, ts_grad(tx), ts_grad(tw)};
        for (int k = 0; k < 3; k++) {
            int64_t n = outs[k] ? ts_numel(outs[k]) : 0;
            r[t][k] = calloc((size_t)n + 1, sizeof(float));
            CHECK(outs[k] && ts_copy_to_host(outs[k], r[t][k], (size_t)n * sizeof(float)) == TS_OK);
        }
    }
    ts_set_num_threads(saved);
    tsi_conv_force_provider(getenv("TS_CONV"));
    const size_t sizes[3] = {20 * 6 * 8 * 8, 20 * 3 * 12 * 12, 6 * 3 * 5 * 5};
    const bool dnnl = !strcmp(provider, "dnnl");
    const double terms[3] = {3 * 5 * 5, 6 * 5 * 5, 20 * 8 * 8}; /* |x|, |w|, |g| <= 1 (urand) */
    for (int k = 0; k < 3; k++) {
        if (dnnl) {
            double diff = 0;
            for (size_t i = 0; i < sizes[k]; i++) diff = fmax(diff, fabs(r[0][k][i] - r[1][k][i]));
            CHECK(diff <= 2 * terms[k] * terms[k] * ldexp(1, -24));
        } else {
            CHECK(memcmp(r[0][k], r[1][k], sizes[k] * sizeof(float)) == 0);
        }
        free(r[0][k]), free(r[1][k]);
    }
    free(x), free(w), free(g);
    CHECK_OK();
    ts_scope_end();
}

static void test_thread_independence(void) {
    thread_independence_with("builtin");
    thread_independence_with("dnnl");
}

static void test_empty_batch(ts_device dev) {
    ts_scope_begin();
    ts_tensor *x = ts_zeros(TS_SHAPE(0, 3, 6, 6), (ts_opts){.dtype = TS_F64, .device = dev});
    ts_tensor *w = ts_ones(TS_SHAPE(4, 3, 3, 3), (ts_opts){.dtype = TS_F64, .device = dev});
    ts_set_requires_grad(w, true);
    ts_tensor *y = ts_conv2d(x, w, NULL, (ts_conv2d_opts){0});
    CHECK(shape_is(y, TS_SHAPE(0, 4, 4, 4)));
    ts_backward(ts_sum(y));
    CHECK_OK();
    CHECK(shape_is(ts_grad(w), TS_SHAPE(4, 3, 3, 3)));
    CHECK_NEAR(ts_item(ts_sum(ts_abs(ts_grad(w)))), 0, 0);
    CHECK(shape_is(ts_max_pool2d(x, (ts_pool2d_opts){.kernel = {2, 2}}), TS_SHAPE(0, 3, 3, 3)));
    CHECK(shape_is(ts_adaptive_avg_pool2d(x, 0, 2), TS_SHAPE(0, 3, 0, 2)));
    CHECK(shape_is(
        ts_adaptive_avg_pool2d(ts_ones(TS_SHAPE(2, 3, 4, 4), (ts_opts){.device = dev}), 0, 2),
        TS_SHAPE(2, 3, 0, 2)));
    CHECK_OK();
    ts_scope_end();
}

/* An op that must fail with code and a message containing text. */
#define CHECK_FAILS(expr, code, text)                                                              \
    do {                                                                                           \
        CHECK((expr) == NULL);                                                                     \
        bool has_ = strstr(ts_error_message(), (text)) != NULL;                                    \
        if (!has_) printf("  message: %s\n", ts_error_message());                                  \
        CHECK(has_);                                                                               \
        CHECK_ERR(code);                                                                           \
    } while (0)

static void test_errors(void) {
    ts_scope_begin();
    ts_opts f = {0}, d = {.dtype = TS_F64}, s = {.device = ts_sim(0)};
    ts_tensor *x = ts_ones(TS_SHAPE(2, 3, 8, 8), f), *w = ts_ones(TS_SHAPE(6, 3, 3, 3), f);
    ts_conv2d_opts o0 = {0};
    ts_pool2d_opts k2 = {.kernel = {2, 2}};
    /* clang-format off */
    CHECK_FAILS(ts_conv2d(NULL, w, NULL, o0), TS_ERR_ARG, "conv2d");
    CHECK_FAILS(ts_conv2d(x, NULL, NULL, o0), TS_ERR_ARG, "weight");
    CHECK_FAILS( ts_conv2d(ts_ones(TS_SHAPE(3, 8), f), w, NULL, o0), TS_ERR_SHAPE, "expected 3D (unbatched) or 4D (batched) input to conv2d, but got input of size: [3, 8]");
    CHECK_FAILS(ts_conv2d(x, ts_ones(TS_SHAPE(6, 3, 3), f), NULL, o0), TS_ERR_SHAPE, "weight of size [6, 3, 3]");
    CHECK_FAILS(ts_conv2d(x, ts_ones(TS_SHAPE(6, 4, 3, 3), f), NULL, o0), TS_ERR_SHAPE, "given groups=1, weight of size [6, 4, 3, 3], expected input[2, 3, 8, 8] to have 4 channels, but got 3 channels instead");
    CHECK_FAILS(ts_conv2d(ts_ones(TS_SHAPE(2, 4, 8, 8), f), ts_ones(TS_SHAPE(5, 2, 3, 3), f), NULL, (ts_conv2d_opts){.groups = 2}), TS_ERR_SHAPE, "expected weight to be divisible by 2 at dimension 0");
    CHECK_FAILS(ts_conv2d(x, w, ts_ones(TS_SHAPE(5), f), o0), TS_ERR_SHAPE, "expected bias to be 1-dimensional with 6 elements, but got bias of size [5]");
    CHECK_FAILS( ts_conv2d(x, ts_ones(TS_SHAPE(6, 3, 9, 9), f), NULL, o0), TS_ERR_SHAPE, "(8 x 8). Kernel size: (9 x 9). Kernel size can't be greater than actual input size");
    CHECK_FAILS(ts_conv2d(x, w, NULL, (ts_conv2d_opts){.dilation = {4, 4}}), TS_ERR_SHAPE, "Kernel size: (9 x 9)");
    CHECK_FAILS(ts_conv2d(x, w, NULL, (ts_conv2d_opts){.stride = {-1, 1}}), TS_ERR_ARG, "non-positive stride");
    CHECK_FAILS(ts_conv2d(x, w, NULL, (ts_conv2d_opts){.padding = {0, -1}}), TS_ERR_ARG, "negative padding");
    CHECK_FAILS(ts_conv2d(x, w, NULL, (ts_conv2d_opts){.dilation = {-2, 1}}), TS_ERR_ARG, "non-positive dilation");
    CHECK_FAILS(ts_conv2d(x, w, NULL, (ts_conv2d_opts){.groups = -1}), TS_ERR_ARG, "non-positive groups");
    CHECK_FAILS(ts_conv2d(ts_to_dtype(x, TS_F64), w, NULL, o0), TS_ERR_DTYPE, "input type (float64) and weight type (float32) should be the same");
    CHECK_FAILS(ts_conv2d(x, w, ts_ones(TS_SHAPE(6), d), o0), TS_ERR_DTYPE, "bias type (float64)");
    CHECK_FAILS(ts_conv2d(ts_to_dtype(x, TS_I64), ts_to_dtype(w, TS_I64), NULL, o0), TS_ERR_DTYPE, "floating");
    CHECK_FAILS(ts_conv2d(ts_to(x, ts_sim(0)), w, NULL, o0), TS_ERR_DEVICE, "sim:0");
    CHECK_FAILS(ts_conv2d(x, w, ts_ones(TS_SHAPE(6), s), o0), TS_ERR_DEVICE, "same device");
    CHECK_FAILS(ts_max_pool2d(NULL, k2), TS_ERR_ARG, "max_pool2d");
    CHECK_FAILS(ts_max_pool2d(x, (ts_pool2d_opts){0}), TS_ERR_ARG, "kernel size should be greater than zero");
    CHECK_FAILS(ts_max_pool2d(x, (ts_pool2d_opts){.kernel = {3, 3}, .padding = {2, 2}}), TS_ERR_ARG, "pad should be at most half of kernel size, but got pad=2 and kernel_size=3");
    CHECK_FAILS(ts_max_pool2d(x, (ts_pool2d_opts){.kernel = {2, 2}, .stride = {-1, 2}}), TS_ERR_ARG, "stride should be greater than zero");
    CHECK_FAILS(ts_max_pool2d(x, (ts_pool2d_opts){.kernel = {2, 2}, .padding = {-1, 0}}), TS_ERR_ARG, "pad must be non-negative");
    CHECK_FAILS(ts_max_pool2d(x, (ts_pool2d_opts){.kernel = {2, 2}, .dilation = {-1, 0}}), TS_ERR_ARG, "dilation should be greater than zero");
    CHECK_FAILS( ts_max_pool2d(x, (ts_pool2d_opts){.kernel = {9, 9}}), TS_ERR_SHAPE, "given input size: (3x8x8). Calculated output size: (3x0x0). Output size is too small");
    CHECK_FAILS(ts_max_pool2d(ts_ones(TS_SHAPE(8, 8), f), k2), TS_ERR_SHAPE, "3D or 4D");
    CHECK_FAILS(ts_max_pool2d(ts_ones(TS_SHAPE(2, 0, 8, 8), f), k2), TS_ERR_SHAPE, "[2, 0, 8, 8]");
    CHECK_FAILS(ts_max_pool2d(ts_to_dtype(x, TS_I64), k2), TS_ERR_DTYPE, "int64");
    CHECK_FAILS(ts_avg_pool2d(ts_to_dtype(x, TS_U8), k2), TS_ERR_DTYPE, "avg_pool2d");
    CHECK_FAILS(ts_avg_pool2d(x, (ts_pool2d_opts){.kernel = {2, 2}, .dilation = {2, 2}}), TS_ERR_ARG, "dilation is not supported");
    CHECK_FAILS(ts_avg_pool2d(x, (ts_pool2d_opts){.kernel = {3, 3}, .padding = {2, 0}}), TS_ERR_ARG, "pad should be at most half");
    CHECK_FAILS(ts_adaptive_avg_pool2d(x, -1, 2), TS_ERR_ARG, "elements of output_size must be greater than or equal to 0 but received {-1, 2}");
    CHECK_FAILS(ts_adaptive_avg_pool2d(ts_ones(TS_SHAPE(8, 8), f), 2, 2), TS_ERR_SHAPE, "3D or 4D");
    CHECK_FAILS(ts_adaptive_avg_pool2d(ts_ones(TS_SHAPE(2, 3, 0, 8), f), 2, 2), TS_ERR_SHAPE, "[2, 3, 0, 8]");
    CHECK_FAILS(ts_adaptive_avg_pool2d(NULL, 2, 2), TS_ERR_ARG, "adaptive_avg_pool2d");
    /* clang-format on */
    ts_scope_end();
}

int main(void) {
    const ts_device devs[2] = {ts_cpu(), ts_sim(0)};
    const ts_dtype dts[4] = {TS_F64, TS_F32, TS_F16, TS_BF16};
    for (int di = 0; di < 2; di++) {
        for (int i = 0; i < N_CONV_CASES; i++)
            for (int t = 0; t < 2; t++) run_conv_case(&conv_cases[i], devs[di], dts[t]);
        for (int i = 0; i < N_POOL_CASES; i++)
            for (int t = 0; t < 2; t++) run_pool_case(&pool_cases[i], devs[di], dts[t], -1);
        for (int i = 0; i < N_POOL_CASES; i++)
            for (int t = 0; t < 4; t++) run_pool_case_cl(&pool_cases[i], devs[di], dts[t], -1);
        test_pytorch_values(devs[di]);
        test_gradcheck(devs[di]);
        test_empty_batch(devs[di]);
    }
    /* half types: a few cases, on cpu */
    for (int t = 2; t < 4; t++) {
        run_conv_case(&conv_cases[1], ts_cpu(), dts[t]);
        run_conv_case(&conv_cases[4], ts_cpu(), dts[t]);
        run_pool_case(&pool_cases[0], ts_cpu(), dts[t], -1);
        run_pool_case(&pool_cases[6], ts_cpu(), dts[t], -1);
        run_pool_case(&pool_cases[9], ts_cpu(), dts[t], -1);
    }
    /* NaN propagates (the last NaN of a window wins) and -inf windows keep their first index:
     * the 2x2 fast path and the generic loop */
    for (int t = 0; t < 2; t++) {
        run_pool_case(&pool_cases[2], ts_cpu(), dts[t], 13);
        run_pool_case(&pool_cases[0], ts_cpu(), dts[t], 20);
    }
    for (int t = 0; t < 4; t++) {
        test_pool_cl_all_minus_inf(dts[t]);
        run_pool_case_cl(&pool_cases[2], ts_cpu(), dts[t], 13);
        run_pool_case_cl(&pool_cases[0], ts_cpu(), dts[t], 20);
        run_pool_case_cl(&pool_cases[1], ts_cpu(), dts[t], 31);
    }
    /* f32 through each kernel family this CPU has: direct AVX-512 / AVX2 / portable, im2col + GEMM
     */
    const conv_case cnn = {8, 3, 32, 32, 6, 5, 5, {.groups = 0}, true, false, false};
    const char *isas[4] = {"avx512", "avx2", "generic", "none"};
    for (int is = 0; is < 4; is++) {
        if (!tsi_conv_direct_force_isa(isas[is])) continue;
        printf("conv kernels: %s\n", isas[is]);
        for (int i = 0; i < N_CONV_CASES; i++) run_conv_case(&conv_cases[i], ts_cpu(), TS_F32);
        run_conv_case(&cnn, ts_cpu(), TS_F32); /* SimpleCNN's first layer */
        /* infinite inputs near a row's end must not leak NaN into unrelated weight gradients */
        conv_inf_col = 30;
        run_conv_case(&cnn, ts_cpu(), TS_F32);
        conv_inf_col = 4;
        run_conv_case(&conv_cases[1], ts_cpu(), TS_F64);
        conv_inf_col = -1;
    }
    CHECK(tsi_conv_direct_force_isa(NULL));
    CHECK(!tsi_conv_direct_force_isa("sse9"));
    test_thread_independence();
    test_errors();
    return ts_test_finish();
}
