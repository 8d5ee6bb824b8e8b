/* test_grid_sample.c — ts_grid_sample and ts_affine_grid (src/nn/grid_sample.c) on every device
 * against a float64 transcription of PyTorch's GridSampler.h (bilinear / trilinear, nearest,
 * bicubic, 4-D and 5-D; zeros, border, reflection; align_corners both ways), ts_gradcheck in
 * input, grid and theta, and the refusals. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "host_read_util.h"
#include "tessera.h"
#include "ts_test.h"

static ts_device devs[TS_TEST_MAX_DEVICES];
static int ndev;

static void fill(double *v, int64_t n, int seed, double scale) {
    for (int64_t i = 0; i < n; i++) v[i] = sin(1.9 * (double)(i + 1) + 0.7 * seed) * scale;
}
static ts_tensor *mk(ts_shape s, const double *v, ts_device d, ts_dtype dt, bool rg) {
    ts_tensor *t = ts_to(ts_to_dtype(ts_tensor_f64(s, v, (ts_opts){.dtype = TS_F64}), dt), d);
    t = ts_detach(t);
    if (rg) ts_set_requires_grad(t, true);
    return t;
}

/* ------------------------------------------------------------------ the reference */
static double unnorm(double c, int64_t n, bool ac) {
    return ac ? (c + 1) / 2 * (double)(n - 1) : ((c + 1) * (double)n - 1) / 2;
}
static double reflect(double in, double lo2, double hi2) {
    if (lo2 == hi2) return 0;
    double mn = lo2 / 2, span = (hi2 - lo2) / 2;
    in = fabs(in - mn);
    double extra = fmod(in, span);
    int flips = (int)floor(in / span);
    return flips % 2 == 0 ? extra + mn : span - extra + mn;
}
static double coord(double c, int64_t n, ts_grid_padding pad, bool ac) {
    if (pad == TS_GRID_BORDER) return fmin(fmax(c, 0), (double)n - 1);
    if (pad == TS_GRID_REFLECTION) {
        c = ac ? reflect(c, 0, 2 * (double)(n - 1)) : reflect(c, -1, 2 * (double)n - 1);
        return fmin(fmax(c, 0), (double)n - 1);
    }
    return c;
}
static double cc1(double x) { return ((-0.75 + 2) * x - (-0.75 + 3)) * x * x + 1; }
static double cc2(double x) { return ((-0.75 * x + 3.75) * x - 6) * x + 3; }

/* x [C, S0, S1(, S2)] of one batch at integer position idx (0 outside) */
static double at(const double *x, int nd, const int64_t *s, int c, const int64_t *idx) {
    int64_t off = c;
    for (int k = 0; k < nd; k++) {
        if (idx[k] < 0 || idx[k] >= s[k]) return 0;
        off = off * s[k] + idx[k];
    }
    return x[off];
}

/* one output value: coordinates pos[k] (grid units, k = 0 the outermost dim) */
static double sample(const double *x, int nd, const int64_t *s, int c_ch, const double *pos,
                     ts_grid_mode mode, ts_grid_padding pad, bool ac) {
    double u[3];
    for (int k = 0; k < nd; k++) u[k] = unnorm(pos[k], s[k], ac);
    int64_t idx[3] = {0, 0, 0};
    if (mode == TS_GRID_NEAREST) {
        for (int k = 0; k < nd; k++) idx[k] = (int64_t)nearbyint(coord(u[k], s[k], pad, ac));
        return at(x, nd, s, c_ch, idx);
    }
    if (mode == TS_GRID_BILINEAR) {
        double src[3], sum = 0;
        for (int k = 0; k < nd; k++) src[k] = coord(u[k], s[k], pad, ac);
        for (int corner = 0; corner < (1 << nd); corner++) {
            double w = 1;
            for (int k = 0; k < nd; k++) {
                int bit = (corner >> k) & 1;
                double f = floor(src[k]), t = src[k] - f;
                idx[k] = (int64_t)f + bit;
                w *= bit ? t : 1 - t;
            }
            sum += w * at(x, nd, s, c_ch, idx);
        }
        return sum;
    }
    /* bicubic: 4 taps per dim around the floor, each tap's coordinate padded, then truncated */
    double f[3], w[3][4];
    for (int k = 0; k < nd; k++) {
        f[k] = floor(u[k]);
        double t = u[k] - f[k];
        w[k][0] = cc2(t + 1), w[k][1] = cc1(t), w[k][2] = cc1(1 - t), w[k][3] = cc2(2 - t);
    }
    double sum = 0;
    for (int c = 0; c < (nd == 2 ? 16 : 64); c++) {
        double wt = 1;
        for (int k = 0, r = c; k < nd; k++, r /= 4) {
            idx[k] = (int64_t)coord(f[k] - 1 + r % 4, s[k], pad, ac);
            wt *= w[k][r % 4];
        }
        sum += wt * at(x, nd, s, c_ch, idx);
    }
    return sum;
}

/* the whole op: x [N, C, S...], grid [N, P..., nd] (P points per batch) -> out [N, C, P] */
static void ref_grid_sample(const double *x, const double *g, int nd, int64_t n, int64_t ch,
                            const int64_t *s, int64_t p, ts_grid_mode mode, ts_grid_padding pad,
                            bool ac, double *out) {
    int64_t numel = 1;
    for (int k = 0; k < nd; k++) numel *= s[k];
    for (int64_t b = 0; b < n; b++)
        for (int64_t q = 0; q < p; q++) {
            double pos[3];
            for (int k = 0; k < nd; k++) pos[k] = g[(b * p + q) * nd + (nd - 1 - k)];
            for (int64_t c = 0; c < ch; c++)
                out[(b * ch + c) * p + q] =
                    sample(x + b * ch * numel, nd, s, (int)c, pos, mode, pad, ac);
        }
}

/* ------------------------------------------------------------------ values */
static void test_values(void) {
    double x[2 * 3 * 60], g[2 * 24 * 3], ref[2 * 3 * 24];
    fill(x, 2 * 3 * 60, 1, 1);
    fill(g, 2 * 24 * 3, 2, 1.4);          /* inside and outside [-1, 1] */
    g[0] = 1.0, g[1] = -1.0, g[2] = 0.25; /* borders and a half-way point */
    const ts_dtype dts[2] = {TS_F64, TS_F32};
    for (int di = 0; di < ndev; di++)
        for (int ti = 0; ti < 2; ti++)
            for (int nd = 2; nd <= 3; nd++)
                for (int mode = 0; mode < 3; mode++)
                    for (int pad = 0; pad < 3; pad++)
                        for (int ac = 0; ac < 2; ac++) {
                            ts_scope_begin();
                            const int64_t s2[2] = {4, 5}, s3[3] = {3, 4, 5};
                            const int64_t *s = nd == 2 ? s2 : s3;
                            ts_shape xs = nd == 2 ? TS_SHAPE(2, 3, 4, 5) : TS_SHAPE(2, 3, 3, 4, 5);
                            ts_shape gs = nd == 2 ? TS_SHAPE(2, 4, 6, 2) : TS_SHAPE(2, 2, 3, 4, 3);
                            int64_t p = 24;
                            ts_tensor *xt = mk(xs, x, devs[di], dts[ti], false),
                                      *gt = mk(gs, g, devs[di], dts[ti], false);
                            ts_tensor *y = ts_grid_sample(xt, gt, (ts_grid_mode)mode,
                                                          (ts_grid_padding)pad, ac);
                            ref_grid_sample(x, g, nd, 2, 3, s, p, (ts_grid_mode)mode,
                                            (ts_grid_padding)pad, ac, ref);
                            /* float32: the grid's rounding moves a coordinate by 2^-24 * size,
                             * times the largest slope (|x| <= 1, cubic weights' slope < 3) */
                            double tol = ti == 0 ? 1e-13 : 64 * 0x1p-24;
                            bool ok = y && ts_dtype_of(y) == dts[ti] && ts_ndim(y) == nd + 2 &&
                                      ts_size(y, 1) == 3 && ts_size(y, nd + 1) == gs.dims[nd];
                            /* nearest in float32: a coordinate within rounding of a half
                             * may pick the other pixel; compare float64 only */
                            if (!(ti == 1 && mode == TS_GRID_NEAREST))
                                ok = ok && near_all(y, ref, 2 * 3 * p, tol);
                            ts_test_record(ok);
                            if (!ok)
                                ts_test_failf(__FILE__, __LINE__,
                                              "grid_sample %dd mode %d pad %d ac %d %s on %s%s", nd,
                                              mode, pad, ac, ts_dtype_name(dts[ti]),
                                              ts_device_str(devs[di]), ts_test_error_str());
                            ts_error_clear();
                            ts_scope_end();
                        }
}

/* affine_grid: base (x, y[, z], 1) times theta^T against loops */
static void test_affine(void) {
    double th[2 * 12], ref[2 * 2 * 3 * 4 * 3];
    fill(th, 24, 4, 1);
    for (int di = 0; di < ndev; di++)
        for (int nd = 2; nd <= 3; nd++)
            for (int ac = 0; ac < 2; ac++) {
                ts_scope_begin();
                const int64_t sp[3] = {nd == 2 ? 3 : 2, nd == 2 ? 4 : 3, 4};
                ts_shape size = nd == 2 ? TS_SHAPE(2, 1, 3, 4) : TS_SHAPE(2, 1, 2, 3, 4);
                ts_tensor *t = mk(nd == 2 ? TS_SHAPE(2, 2, 3) : TS_SHAPE(2, 3, 4), th, devs[di],
                                  TS_F64, false);
                int64_t p = sp[0] * sp[1] * (nd == 3 ? sp[2] : 1), k = 0;
                for (int b = 0; b < 2; b++)
                    for (int64_t q = 0; q < p; q++) {
                        double base[4];
                        int64_t r = q;
                        for (int d = nd - 1; d >= 0; d--) { /* d: spatial dim, outermost 0 */
                            int64_t n = sp[d], i = r % n;
                            r /= n;
                            double v = n <= 1 ? 0 : -1 + 2 * (double)i / (double)(n - 1);
                            base[nd - 1 - d] = ac ? v : v * (double)(n - 1) / (double)n;
                        }
                        base[nd] = 1;
                        for (int c = 0; c < nd; c++) {
                            double sum = 0;
                            for (int j = 0; j <= nd; j++)
                                sum += base[j] * th[(b * nd + c) * (nd + 1) + j];
                            ref[k++] = sum;
                        }
                    }
                ts_tensor *y = ts_affine_grid(t, size, ac);
                bool ok = y && ts_ndim(y) == nd + 2 && ts_size(y, nd + 1) == nd &&
                          near_all(y, ref, k, 1e-15);
                ts_test_record(ok);
                if (!ok)
                    ts_test_failf(__FILE__, __LINE__, "affine_grid %dd ac %d on %s%s", nd, ac,
                                  ts_device_str(devs[di]), ts_test_error_str());
                ts_error_clear();
                ts_scope_end();
            }
}

/* ------------------------------------------------------------------ gradients */
typedef struct gctx {
    ts_grid_mode mode;
    ts_grid_padding pad;
    bool ac;
} gctx;
static ts_tensor *gs_fn(ts_tensor *const *in, int n, void *ctx) {
    (void)n;
    const gctx *c = ctx;
    return ts_grid_sample(in[0], in[1], c->mode, c->pad, c->ac);
}
static ts_tensor *ag_fn(ts_tensor *const *in, int n, void *ctx) {
    (void)n;
    return ts_affine_grid(in[0], *(const ts_shape *)ctx, true);
}

static void test_grads(void) {
    double x[60], g[32];
    fill(x, 60, 7, 1);
    /* grid points away from integer pixel positions and the reflection borders, where the
     * sampling is not differentiable (central differences straddle the kink) */
    for (int i = 0; i < 32; i++) g[i] = -1.1 + 0.0713 * i;
    const ts_gradcheck_opts go = {.eps = 1e-6, .atol = 1e-6, .rtol = 1e-5};
    const gctx cases[] = {
        {TS_GRID_BILINEAR, TS_GRID_ZEROS, false},      {TS_GRID_BILINEAR, TS_GRID_BORDER, true},
        {TS_GRID_BILINEAR, TS_GRID_REFLECTION, false}, {TS_GRID_BICUBIC, TS_GRID_ZEROS, true},
        {TS_GRID_BICUBIC, TS_GRID_REFLECTION, false},  {TS_GRID_NEAREST, TS_GRID_ZEROS, false},
    };
    for (int di = 0; di < ndev; di++) {
        for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
            ts_scope_begin();
            ts_tensor *in[2] = {
                mk(TS_SHAPE(1, 2, 3, 4), x, devs[di], TS_F64, true),
                mk(TS_SHAPE(1, 2, 3, 2), g, devs[di], TS_F64, cases[c].mode != TS_GRID_NEAREST)};
            bool ok = ts_gradcheck(gs_fn, (void *)&cases[c], in, 2, go);
            ts_scope_end();
            ts_test_record(ok);
            if (!ok)
                ts_test_failf(__FILE__, __LINE__, "gradcheck grid_sample case %d on %s%s", (int)c,
                              ts_device_str(devs[di]), ts_test_error_str());
            ts_error_clear();
        }
        ts_scope_begin(); /* trilinear */
        const gctx tri = {TS_GRID_BILINEAR, TS_GRID_BORDER, false};
        ts_tensor *in[2] = {mk(TS_SHAPE(1, 1, 2, 3, 4), x, devs[di], TS_F64, true),
                            mk(TS_SHAPE(1, 1, 2, 2, 3), g + 3, devs[di], TS_F64, true)};
        CHECK(ts_gradcheck(gs_fn, (void *)&tri, in, 2, go));
        ts_shape size = TS_SHAPE(2, 1, 2, 3);
        ts_tensor *th = mk(TS_SHAPE(2, 2, 3), x, devs[di], TS_F64, true);
        CHECK(ts_gradcheck(ag_fn, &size, &th, 1, go));
        ts_error_clear();
        ts_scope_end();
    }
}

/* ------------------------------------------------------------------ refusals */
static void test_errors(void) {
    ts_scope_begin();
    double v[64];
    fill(v, 64, 3, 1);
    ts_tensor *x = mk(TS_SHAPE(1, 2, 3, 4), v, ts_cpu(), TS_F64, false);
    ts_tensor *g = mk(TS_SHAPE(1, 2, 2, 2), v, ts_cpu(), TS_F64, false);
    CHECK(ts_grid_sample(x, mk(TS_SHAPE(1, 2, 2, 3), v, ts_cpu(), TS_F64, false), TS_GRID_BILINEAR,
                         TS_GRID_ZEROS, false) == NULL);
    CHECK_ERR_HAS(TS_ERR_SHAPE, "grid_sample");
    CHECK(ts_grid_sample(x, mk(TS_SHAPE(2, 2, 2, 2), v, ts_cpu(), TS_F64, false), TS_GRID_BILINEAR,
                         TS_GRID_ZEROS, false) == NULL);
    CHECK_ERR_HAS(TS_ERR_SHAPE, "grid_sample");
    CHECK(ts_grid_sample(mk(TS_SHAPE(2, 3, 4), v, ts_cpu(), TS_F64, false), g, TS_GRID_BILINEAR,
                         TS_GRID_ZEROS, false) == NULL);
    CHECK_ERR_HAS(TS_ERR_SHAPE, "4-D or 5-D");
    CHECK(ts_grid_sample(x, mk(TS_SHAPE(1, 2, 2, 2), v, ts_cpu(), TS_F32, false), TS_GRID_BILINEAR,
                         TS_GRID_ZEROS, false) == NULL);
    CHECK_ERR_HAS(TS_ERR_DTYPE, "same dtype");
    CHECK(ts_grid_sample(mk(TS_SHAPE(1, 2, 3, 4), v, ts_cpu(), TS_I64, false),
                         mk(TS_SHAPE(1, 2, 2, 2), v, ts_cpu(), TS_I64, false), TS_GRID_NEAREST,
                         TS_GRID_ZEROS, false) == NULL);
    CHECK_ERR_HAS(TS_ERR_DTYPE, "floating");
    CHECK(ts_grid_sample(x, g, (ts_grid_mode)7, TS_GRID_ZEROS, false) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "mode");
    CHECK(ts_grid_sample(x, g, TS_GRID_BILINEAR, (ts_grid_padding)7, false) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "padding_mode");
    CHECK(ts_grid_sample(NULL, g, TS_GRID_BILINEAR, TS_GRID_ZEROS, false) == NULL);
    CHECK(ts_error() != TS_OK);
    ts_error_clear();
    if (ndev > 1) {
        CHECK(ts_grid_sample(x, mk(TS_SHAPE(1, 2, 2, 2), v, devs[1], TS_F64, false),
                             TS_GRID_BILINEAR, TS_GRID_ZEROS, false) == NULL);
        CHECK_ERR_HAS(TS_ERR_DEVICE, "grid_sample");
    }
    ts_tensor *th = mk(TS_SHAPE(2, 2, 3), v, ts_cpu(), TS_F64, false);
    CHECK(ts_affine_grid(th, TS_SHAPE(2, 1, 3, 4, 5), false) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "Nx3x4");
    CHECK(ts_affine_grid(th, TS_SHAPE(2, 1, 3), false) == NULL);
    CHECK_ERR_HAS(TS_ERR_UNSUPPORTED, "4D and 5D");
    CHECK(ts_affine_grid(th, TS_SHAPE(2, 1, 0, 4), false) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "positive");
    CHECK(ts_affine_grid(th, TS_SHAPE(3, 1, 2, 4), false) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "theta has 2 matrices");
    CHECK(ts_affine_grid(mk(TS_SHAPE(2, 2, 3), v, ts_cpu(), TS_I64, false), TS_SHAPE(2, 1, 2, 4),
                         false) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "floating point");
    ts_scope_end();
}

int main(void) {
    ndev = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    test_values();
    test_affine();
    test_grads();
    test_errors();
    CHECK_OK();
    return ts_test_finish();
}
