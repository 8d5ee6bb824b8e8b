/* test_pad_resample.c — ts_pad (constant / reflect / replicate / circular, negative pads),
 * ts_interpolate (nearest, nearest-exact, linear, bilinear, bicubic, trilinear, area) and
 * ts_pixel_shuffle / ts_pixel_unshuffle on every device: float64 references written here
 * independently of the library's index code (per output element, from the definitions), PyTorch's
 * own outputs for a few cases (printed by torch 2.15), ts_gradcheck of each mode, and the
 * refusals (bad pads, shapes, dtypes, modes, antialias) with their messages. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "host_read_util.h"
#include "tessera.h"
#include "ts_test.h"

static ts_device devs[TS_TEST_MAX_DEVICES];
static int ndev;

#define MAXN 4096

static ts_tensor *mk(ts_shape s, const double *v, ts_dtype dt, ts_device d) {
    return ts_to(ts_to_dtype(ts_tensor_f64(s, v, (ts_opts){.device = ts_cpu()}), dt), d);
}
static int64_t numel(ts_shape s) {
    int64_t n = 1;
    for (int i = 0; i < s.ndim; i++) n *= s.dims[i];
    return n;
}
static void fill(double *v, int64_t n, int seed) {
    for (int64_t i = 0; i < n; i++)
        v[i] = sin(0.37 * (double)(i + 1) * (seed + 1)) * 3 + 0.1 * seed;
}
/* y (computed on device) against the reference r, elementwise */
static void check_all(const char *what, ts_tensor *y, ts_shape want, const double *r, double tol) {
    static double got[MAXN];
    const int64_t n = numel(want);
    bool ok = y && ts_ndim(y) == want.ndim;
    for (int i = 0; ok && i < want.ndim; i++) ok = ts_size(y, i) == want.dims[i];
    ok = ok && rd(y, got, n);
    double worst = 0;
    int64_t at = -1;
    for (int64_t i = 0; ok && i < n; i++) {
        const double e = fabs(got[i] - r[i]);
        if (!(e <= tol)) ok = false, at = i;
        if (e > worst) worst = e;
    }
    ts_test_record(ok);
    if (!ok)
        ts_test_failf(__FILE__, __LINE__,
                      "%s: wrong (shape %s, first bad element %lld: %g vs %g)%s", what,
                      y ? "ok?" : "none", (long long)at, at >= 0 ? got[at] : 0, at >= 0 ? r[at] : 0,
                      ts_test_error_str());
    ts_error_clear();
}

/* ================================================================== pad references */
/* the source index of output position j of a dim of length L padded (pl, pr), or -1 for the
 * constant; from the definitions: reflect / replicate map j to the original position p = j - pl
 * and mirror / clamp it; circular crops first, then wraps */
static int64_t pad_src(int mode, int64_t L, int64_t pl, int64_t pr, int64_t j) {
    int64_t p = j - pl;
    switch (mode) {
    case TS_PAD_CONSTANT:
        return p >= 0 && p < L ? p : -1;
    case TS_PAD_REFLECT:
        return p < 0 ? -p : p > L - 1 ? 2 * (L - 1) - p : p;
    case TS_PAD_REPLICATE:
        return p < 0 ? 0 : p > L - 1 ? L - 1 : p;
    default: {
        const int64_t lo = pl < 0 ? -pl : 0, kept = L - lo - (pr < 0 ? -pr : 0);
        int64_t q = (j - (pl > 0 ? pl : 0)) % kept;
        return lo + (q < 0 ? q + kept : q);
    }
    }
}

/* reference of padding the last k dims of x (shape s) */
static ts_shape pad_ref(int mode, ts_shape s, const double *x, const int64_t *pad, int k,
                        double value, double *out) {
    ts_shape o = s;
    for (int i = 0; i < k; i++) o.dims[s.ndim - 1 - i] += pad[2 * i] + pad[2 * i + 1];
    const int64_t n = numel(o);
    for (int64_t f = 0; f < n; f++) {
        int64_t rem = f, src = 0, stride = 1;
        bool constant = false;
        int64_t idx[TS_MAX_DIMS];
        for (int d = o.ndim - 1; d >= 0; d--) idx[d] = rem % o.dims[d], rem /= o.dims[d];
        for (int d = s.ndim - 1; d >= 0; d--) {
            const int i = s.ndim - 1 - d;
            int64_t p = idx[d];
            if (i < k) p = pad_src(mode, s.dims[d], pad[2 * i], pad[2 * i + 1], idx[d]);
            if (p < 0) constant = true;
            src += p * stride;
            stride *= s.dims[d];
        }
        out[f] = constant ? value : x[src];
    }
    return o;
}

static void test_pad_values(void) {
    static double x[MAXN], r[MAXN];
    struct {
        int mode, nd;
        int64_t shape[5];
        int npad;
        int64_t pad[8];
        double value;
    } cases[] = {
        {TS_PAD_CONSTANT, 2, {3, 4}, 2, {1, 2}, 0},
        {TS_PAD_CONSTANT, 3, {2, 3, 4}, 4, {2, -1, -1, 3}, 2.5},
        {TS_PAD_CONSTANT, 4, {1, 2, 3, 4}, 8, {1, 1, 0, 2, 1, 0, 1, 1}, -1},
        {TS_PAD_CONSTANT, 1, {5}, 2, {-2, -3}, 7}, /* crops everything: [0] */
        {TS_PAD_REFLECT, 3, {2, 2, 5}, 2, {3, 4}, 0},
        {TS_PAD_REFLECT, 2, {2, 5}, 2, {-2, 3}, 0},
        {TS_PAD_REFLECT, 3, {1, 1, 5}, 2, {2, -1}, 0},
        {TS_PAD_REFLECT, 4, {2, 1, 3, 4}, 4, {2, 3, 1, 2}, 0},
        {TS_PAD_REFLECT, 5, {1, 2, 3, 3, 4}, 6, {1, 2, 2, 1, 2, 1}, 0},
        {TS_PAD_REPLICATE, 3, {2, 2, 3}, 2, {4, 5}, 0},
        {TS_PAD_REPLICATE, 3, {1, 1, 5}, 2, {-2, 3}, 0},
        {TS_PAD_REPLICATE, 3, {2, 3, 4}, 4, {1, 2, 3, -1}, 0},
        {TS_PAD_REPLICATE, 4, {2, 2, 3, 2}, 6, {1, 1, 2, 0, 1, 3}, 0},
        {TS_PAD_CIRCULAR, 3, {2, 2, 5}, 2, {2, 3}, 0},
        {TS_PAD_CIRCULAR, 3, {1, 1, 5}, 2, {2, -1}, 0},
        {TS_PAD_CIRCULAR, 2, {2, 5}, 2, {-2, 3}, 0},
        {TS_PAD_CIRCULAR, 4, {1, 2, 3, 4}, 4, {1, 2, 3, 0}, 0},
        {TS_PAD_CIRCULAR, 5, {1, 1, 2, 3, 4}, 6, {4, 1, 0, 3, 2, 1}, 0},
    };
    const ts_dtype dts[] = {TS_F64, TS_F32, TS_I64, TS_F16};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        ts_shape s = ts_shape_make((size_t)cases[c].nd, cases[c].shape);
        fill(x, numel(s), (int)c);
        for (int64_t i = 0; i < numel(s); i++) x[i] = round(x[i] * 8) / 8; /* exact in f16, i64 */
        ts_shape o =
            pad_ref(cases[c].mode, s, x, cases[c].pad, cases[c].npad / 2, cases[c].value, r);
        for (int di = 0; di < ndev; di++)
            for (size_t t = 0; t < sizeof dts / sizeof *dts; t++) {
                ts_dtype dt = dts[t];
                double xi[MAXN];
                memcpy(xi, x, sizeof(double) * (size_t)numel(s));
                double ri[MAXN];
                if (dt == TS_I64) { /* integer values */
                    for (int64_t i = 0; i < numel(s); i++) xi[i] = round(x[i] * 8);
                    pad_ref(cases[c].mode, s, xi, cases[c].pad, cases[c].npad / 2,
                            trunc(cases[c].value), ri);
                } else {
                    memcpy(ri, r, sizeof(double) * (size_t)numel(o));
                }
                ts_scope_begin();
                ts_tensor *y = ts_pad(mk(s, xi, dt, devs[di]), cases[c].pad, cases[c].npad,
                                      (ts_pad_mode)cases[c].mode, cases[c].value);
                char what[96];
                snprintf(what, sizeof what, "pad case %zu on %s, %s", c, ts_device_str(devs[di]),
                         ts_dtype_name(dt));
                CHECK(y && ts_dtype_of(y) == dt);
                check_all(what, y, o, ri, 0);
                ts_scope_end();
            }
    }
    /* bool: constant (value true) and circular */
    for (int di = 0; di < ndev; di++) {
        ts_scope_begin();
        const double b[] = {1, 0, 0, 1, 1, 0};
        ts_tensor *x2 = mk(TS_SHAPE(1, 2, 3), b, TS_BOOL, devs[di]);
        ts_tensor *y = ts_pad(x2, (int64_t[]){1, 1}, 2, TS_PAD_CONSTANT, 2.5);
        check_all("pad bool constant", y, TS_SHAPE(1, 2, 5),
                  (double[]){1, 1, 0, 0, 1, 1, 1, 1, 0, 1}, 0);
        y = ts_pad(x2, (int64_t[]){2, 1}, 2, TS_PAD_CIRCULAR, 0);
        check_all("pad bool circular", y, TS_SHAPE(1, 2, 6),
                  (double[]){0, 0, 1, 0, 0, 1, 1, 0, 1, 1, 0, 1}, 0);
        ts_scope_end();
    }
}

/* reflect / replicate / circular of the last 1-3 dims in one gather (gather_dims) from
 * non-contiguous inputs, large enough to run threaded, and through the index_select route (an
 * input that requires grad) with the same values */
#define PS_H 30
#define PS_W 31
#define PS_N (4 * 3 * 8 * PS_H * PS_W)
static void test_pad_strided(void) {
    static double x[PS_N], xt[PS_N], r[2 * PS_N], got[2 * PS_N];
    const struct {
        int mode, k;
        int64_t pad[6];
    } cases[] = {{TS_PAD_REFLECT, 2, {2, 3, 1, 2}},
                 {TS_PAD_REPLICATE, 3, {1, 2, 2, 1, 0, 1}},
                 {TS_PAD_CIRCULAR, 1, {3, -1}},
                 {TS_PAD_REFLECT, 3, {1, 1, 2, 2, 1, 1}}};
    fill(x, PS_N, 9);
    /* xt: x stored with its last two dims swapped */
    for (int64_t o = 0; o < PS_N / (PS_H * PS_W); o++)
        for (int64_t i = 0; i < PS_H; i++)
            for (int64_t j = 0; j < PS_W; j++)
                xt[(o * PS_W + j) * PS_H + i] = x[(o * PS_H + i) * PS_W + j];
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        const int k = cases[c].k;
        /* k + 2 dims: [N, C, (8,) H, W] with the leading dims folded into N */
        const ts_shape in = k == 3   ? TS_SHAPE(4, 3, 8, PS_H, PS_W)
                            : k == 2 ? TS_SHAPE(12, 8, PS_H, PS_W)
                                     : TS_SHAPE(96, PS_H, PS_W);
        const ts_shape o = pad_ref(cases[c].mode, in, x, cases[c].pad, k, 0, r);
        CHECK(numel(o) <= 2 * PS_N);
        for (int di = 0; di < ndev; di++)
            for (int g = 0; g < 2; g++) {
                ts_scope_begin();
                ts_shape st = in;
                st.dims[in.ndim - 1] = PS_H, st.dims[in.ndim - 2] = PS_W;
                ts_tensor *t = ts_transpose(mk(st, xt, TS_F64, devs[di]), -1, -2);
                if (g) ts_set_requires_grad(t = ts_detach(t), true);
                CHECK(t && !ts_is_contiguous(t));
                ts_tensor *y = ts_pad(t, cases[c].pad, 2 * k, (ts_pad_mode)cases[c].mode, 0);
                bool ok = y && ts_ndim(y) == o.ndim && rd(y, got, numel(o));
                for (int64_t e = 0; ok && e < numel(o); e++) ok = got[e] == r[e];
                ts_test_record(ok);
                if (!ok)
                    ts_test_failf(__FILE__, __LINE__, "pad strided case %zu on %s%s%s", c,
                                  ts_device_str(devs[di]), g ? " (graph)" : "",
                                  ts_test_error_str());
                ts_error_clear();
                ts_scope_end();
            }
    }
}

/* ================================================================== interpolate references */
/* PyTorch's mapping, written out in double from its definition (UpSample.h); the sizes used keep
 * every source coordinate away from integer ties, so float and double agree on the indices */
static double src_coord(int64_t in, int64_t out, bool ac, double sf, int64_t j, bool cubic) {
    if (ac) return out > 1 ? (double)(in - 1) / (double)(out - 1) * (double)j : 0;
    const double scale = sf > 0 ? 1 / sf : (double)in / (double)out;
    const double s = scale * (j + 0.5) - 0.5;
    return !cubic && s < 0 ? 0 : s;
}
static double cubic_w(double t) { /* Keys, A = -0.75 */
    const double A = -0.75;
    t = fabs(t);
    return t <= 1  ? ((A + 2) * t - (A + 3)) * t * t + 1
           : t < 2 ? ((A * t - 5 * A) * t + 8 * A) * t - 4 * A
                   : 0;
}
/* weights W[out][in] of one dim */
static void dim_weights(int mode, int64_t in, int64_t out, bool ac, double sf, double *W) {
    memset(W, 0, sizeof(double) * (size_t)(in * out));
    for (int64_t j = 0; j < out; j++) {
        double *w = W + j * in;
        if (mode == TS_INTERP_NEAREST || mode == TS_INTERP_NEAREST_EXACT) {
            const double scale = sf > 0 ? 1 / sf : (double)in / (double)out;
            int64_t i = (int64_t)floor((mode == TS_INTERP_NEAREST ? j : j + 0.5) * scale);
            w[i < in - 1 ? i : in - 1] = 1;
        } else if (mode == TS_INTERP_AREA) {
            const int64_t a = (j * in) / out, b = ((j + 1) * in + out - 1) / out;
            for (int64_t i = a; i < b; i++) w[i] = 1.0 / (double)(b - a);
        } else if (mode == TS_INTERP_BICUBIC) {
            const double s = src_coord(in, out, ac, sf, j, true);
            const int64_t f = (int64_t)floor(s);
            for (int64_t i = f - 1; i <= f + 2; i++)
                w[i < 0 ? 0 : i > in - 1 ? in - 1 : i] += cubic_w(s - (double)i);
        } else if (in == out) {
            w[j] = 1;
        } else {
            const double s = src_coord(in, out, ac, sf, j, false);
            int64_t f = (int64_t)floor(s);
            const double l = s - (double)f;
            w[f] += 1 - l;
            w[f + 1 < in ? f + 1 : in - 1] += l;
        }
    }
}
/* y = x resized along every spatial dim (separable: one dim's weights at a time) */
static ts_shape interp_ref(int mode, ts_shape s, const double *x, const int64_t *outs, bool ac,
                           const double *sf, double *y) {
    static double a[MAXN * 4], b[MAXN * 4], W[MAXN];
    const int k = s.ndim - 2;
    memcpy(a, x, sizeof(double) * (size_t)numel(s));
    ts_shape cur = s;
    for (int i = 0; i < k; i++) {
        const int d = 2 + i;
        const int64_t in = cur.dims[d], out = outs[i];
        dim_weights(mode, in, out, ac, sf ? sf[i] : 0, W);
        int64_t outer = 1, inner = 1;
        for (int e = 0; e < d; e++) outer *= cur.dims[e];
        for (int e = d + 1; e < cur.ndim; e++) inner *= cur.dims[e];
        for (int64_t o = 0; o < outer; o++)
            for (int64_t j = 0; j < out; j++)
                for (int64_t q = 0; q < inner; q++) {
                    double acc = 0;
                    for (int64_t p = 0; p < in; p++)
                        acc += W[j * in + p] * a[(o * in + p) * inner + q];
                    b[(o * out + j) * inner + q] = acc;
                }
        cur.dims[d] = out;
        memcpy(a, b, sizeof(double) * (size_t)numel(cur));
    }
    memcpy(y, a, sizeof(double) * (size_t)numel(cur));
    return cur;
}

static void test_interp_values(void) {
    static double x[MAXN], r[MAXN];
    struct {
        int mode, nd;
        int64_t shape[5];
        int64_t size[3]; /* 0: from scale */
        double scale[3];
        bool ac;
    } cases[] = {
        {TS_INTERP_NEAREST, 3, {2, 2, 5}, {3}, {0}, false},
        {TS_INTERP_NEAREST, 3, {1, 2, 4}, {9}, {0}, false},
        {TS_INTERP_NEAREST, 4, {1, 2, 3, 4}, {0}, {2.5, 1.5}, false},
        {TS_INTERP_NEAREST_EXACT, 3, {2, 2, 5}, {3}, {0}, false},
        {TS_INTERP_NEAREST_EXACT, 5, {1, 1, 2, 3, 4}, {3, 5, 2}, {0}, false},
        {TS_INTERP_LINEAR, 3, {2, 2, 4}, {7}, {0}, false},
        {TS_INTERP_LINEAR, 3, {2, 2, 4}, {7}, {0}, true},
        {TS_INTERP_LINEAR, 3, {1, 2, 6}, {4}, {0}, false},
        {TS_INTERP_LINEAR, 3, {1, 1, 3}, {0}, {1.5}, false},
        {TS_INTERP_BILINEAR, 4, {1, 2, 3, 4}, {5, 3}, {0}, false},
        {TS_INTERP_BILINEAR, 4, {2, 1, 3, 4}, {5, 7}, {0}, true},
        {TS_INTERP_BICUBIC, 4, {1, 2, 3, 4}, {5, 6}, {0}, false},
        {TS_INTERP_BICUBIC, 4, {1, 1, 4, 4}, {3, 2}, {0}, true},
        {TS_INTERP_BICUBIC, 4, {1, 1, 2, 2}, {0}, {1.7, 2}, false},
        {TS_INTERP_TRILINEAR, 5, {1, 2, 2, 3, 4}, {3, 5, 3}, {0}, false},
        {TS_INTERP_TRILINEAR, 5, {1, 1, 2, 3, 3}, {4, 2, 5}, {0}, true},
        {TS_INTERP_AREA, 3, {2, 2, 7}, {3}, {0}, false},
        {TS_INTERP_AREA, 4, {1, 2, 5, 7}, {3, 4}, {0}, false},
        {TS_INTERP_AREA, 5, {1, 2, 5, 4, 3}, {2, 3, 2}, {0}, false},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        ts_shape s = ts_shape_make((size_t)cases[c].nd, cases[c].shape);
        const int k = s.ndim - 2;
        const bool by_scale = cases[c].size[0] == 0;
        int64_t outs[3];
        for (int i = 0; i < k; i++)
            outs[i] = by_scale ? (int64_t)floor((double)s.dims[2 + i] * cases[c].scale[i])
                               : cases[c].size[i];
        fill(x, numel(s), (int)c);
        ts_shape o =
            interp_ref(cases[c].mode, s, x, outs, cases[c].ac, by_scale ? cases[c].scale : NULL, r);
        for (int di = 0; di < ndev; di++)
            for (int t = 0; t < 2; t++) {
                const ts_dtype dt = t ? TS_F32 : TS_F64;
                ts_scope_begin();
                ts_interp_opts opt = {
                    .mode = (ts_interp_mode)cases[c].mode, .n = k, .align_corners = cases[c].ac};
                if (by_scale)
                    opt.scale_factor = cases[c].scale;
                else
                    opt.size = cases[c].size;
                ts_tensor *y = ts_interpolate(mk(s, x, dt, devs[di]), opt);
                char what[96];
                snprintf(what, sizeof what, "interpolate case %zu on %s, %s", c,
                         ts_device_str(devs[di]), ts_dtype_name(dt));
                CHECK(y && ts_dtype_of(y) == dt);
                check_all(what, y, o, r, dt == TS_F64 ? 1e-12 : 2e-5);
                ts_scope_end();
            }
    }
}

/* outputs PyTorch 2.15 printed for these inputs (float32) */
static void test_torch_values(void) {
    for (int di = 0; di < ndev; di++) {
        ts_scope_begin();
        /* linear, scale_factor 1.5 used as 1 / 1.5 (recompute_scale_factor None) */
        ts_tensor *x = mk(TS_SHAPE(1, 1, 3), (double[]){0, 1, 2}, TS_F32, devs[di]);
        ts_tensor *y = ts_interpolate(
            x, (ts_interp_opts){.mode = TS_INTERP_LINEAR, .scale_factor = (double[]){1.5}, .n = 1});
        check_all("torch linear 1.5", y, TS_SHAPE(1, 1, 4),
                  (double[]){0.0, 0.5, 1.1666667461395264, 1.8333334922790527}, 2e-7);
        /* in = 2, scale 1.7: out 3 */
        x = mk(TS_SHAPE(1, 1, 2), (double[]){0, 1}, TS_F32, devs[di]);
        y = ts_interpolate(
            x, (ts_interp_opts){.mode = TS_INTERP_LINEAR, .scale_factor = (double[]){1.7}, .n = 1});
        check_all("torch linear 1.7", y, TS_SHAPE(1, 1, 3),
                  (double[]){0.0, 0.38235294818878174, 0.9705883264541626}, 2e-7);
        /* bicubic of [[0, 1], [2, 3]] by (1.7, 2): taps clamped at the border */
        x = mk(TS_SHAPE(1, 1, 2, 2), (double[]){0, 1, 2, 3}, TS_F32, devs[di]);
        y = ts_interpolate(x, (ts_interp_opts){.mode = TS_INTERP_BICUBIC,
                                               .scale_factor = (double[]){1.7, 2},
                                               .n = 2});
        check_all("torch bicubic", y, TS_SHAPE(1, 1, 3, 4),
                  (double[]){-0.3002204895019531, 0.03181073069572449, 0.5786856412887573,
                             0.9107168912887573, 0.6314533948898315, 0.9634846448898315,
                             1.510359764099121, 1.8423912525177002, 1.8491414785385132,
                             2.1811726093292236, 2.7280476093292236, 3.0600786209106445},
                  2e-6);
        /* nearest 10 -> 3 (floor(j * 10/3) in float) and nearest-exact */
        double v[10];
        for (int i = 0; i < 10; i++) v[i] = i;
        x = mk(TS_SHAPE(1, 1, 10), v, TS_F32, devs[di]);
        y = ts_interpolate(
            x, (ts_interp_opts){.mode = TS_INTERP_NEAREST, .size = (int64_t[]){3}, .n = 1});
        check_all("torch nearest", y, TS_SHAPE(1, 1, 3), (double[]){0, 3, 6}, 0);
        y = ts_interpolate(
            x, (ts_interp_opts){.mode = TS_INTERP_NEAREST_EXACT, .size = (int64_t[]){3}, .n = 1});
        check_all("torch nearest-exact", y, TS_SHAPE(1, 1, 3), (double[]){1, 5, 8}, 0);
        /* scale 1.2 on 4: the size stays 4, nearest and nearest-exact still use 1 / 1.2,
         * linear is the identity (PyTorch's kernels) */
        x = mk(TS_SHAPE(1, 1, 4), v, TS_F64, devs[di]);
        const ts_interp_mode m3[] = {TS_INTERP_NEAREST, TS_INTERP_NEAREST_EXACT, TS_INTERP_LINEAR};
        const double want3[][4] = {{0, 0, 1, 2}, {0, 1, 2, 2}, {0, 1, 2, 3}};
        for (int i = 0; i < 3; i++) {
            y = ts_interpolate(
                x, (ts_interp_opts){.mode = m3[i], .scale_factor = (double[]){1.2}, .n = 1});
            check_all("torch scale 1.2", y, TS_SHAPE(1, 1, 4), want3[i], 0);
        }
        /* 2-D outputs of H + W <= 128: nearest_idx, an unchanged size the identity (torch: rows
         * 0, 1, 2 of [3, 6] by (1.2, 3)); above 128: floor(j / 1.2) (rows 0, 0, 1, 2 of 4) */
        double big[240];
        for (int i = 0; i < 240; i++) big[i] = i;
        y = ts_interpolate(mk(TS_SHAPE(1, 1, 3, 6), big, TS_F32, devs[di]),
                           (ts_interp_opts){.mode = TS_INTERP_NEAREST,
                                            .scale_factor = (double[]){1.2, 3.0},
                                            .n = 2});
        y = y ? ts_select(ts_select(ts_select(y, 3, 0), 0, 0), 0, 0) : NULL;
        check_all("nearest 2-D small", y, TS_SHAPE(3), (double[]){0, 6, 12}, 0);
        y = ts_interpolate(mk(TS_SHAPE(1, 1, 4, 60), big, TS_F32, devs[di]),
                           (ts_interp_opts){.mode = TS_INTERP_NEAREST,
                                            .scale_factor = (double[]){1.2, 2.2},
                                            .n = 2});
        CHECK(y && ts_size(y, 3) == 132);
        y = y ? ts_select(ts_select(ts_select(y, 3, 0), 0, 0), 0, 0) : NULL;
        check_all("nearest 2-D large", y, TS_SHAPE(4), (double[]){0, 0, 60, 120}, 0);
        /* doubling: floor(j / 2) */
        y = ts_interpolate(
            x, (ts_interp_opts){.mode = TS_INTERP_NEAREST, .size = (int64_t[]){8}, .n = 1});
        check_all("nearest x2", y, TS_SHAPE(1, 1, 8), (double[]){0, 0, 1, 1, 2, 2, 3, 3}, 0);
        x = mk(TS_SHAPE(1, 1, 10), v, TS_F32, devs[di]);
        /* uint8 nearest */
        y = ts_interpolate(
            ts_to_dtype(x, TS_U8),
            (ts_interp_opts){.mode = TS_INTERP_NEAREST, .size = (int64_t[]){4}, .n = 1});
        CHECK(y && ts_dtype_of(y) == TS_U8);
        check_all("uint8 nearest", y, TS_SHAPE(1, 1, 4), (double[]){0, 2, 5, 7}, 0);
        ts_scope_end();
    }
}

static void test_half(void) {
    static double x[64], r[256];
    for (int di = 0; di < ndev; di++) {
        ts_scope_begin();
        fill(x, 12, 3);
        ts_shape s = TS_SHAPE(1, 1, 3, 4);
        interp_ref(TS_INTERP_BILINEAR, s, x, (int64_t[]){5, 6}, false, NULL, r);
        ts_tensor *y = ts_interpolate(
            mk(s, x, TS_BF16, devs[di]),
            (ts_interp_opts){.mode = TS_INTERP_BILINEAR, .size = (int64_t[]){5, 6}, .n = 2});
        CHECK(y && ts_dtype_of(y) == TS_BF16);
        check_all("bilinear bf16", y, TS_SHAPE(1, 1, 5, 6), r, 0.05);
        ts_scope_end();
    }
}

static void test_shuffle(void) {
    static double x[MAXN], r[MAXN], back[MAXN];
    /* [2, 8, 2, 3] -> [2, 2, 4, 6], r = 2: out[n, c, h*2+i, w*2+j] = in[n, c*4 + i*2 + j, h, w] */
    const int64_t N = 2, C = 2, H = 2, W = 3, R = 2;
    fill(x, N * C * R * R * H * W, 1);
    for (int64_t n = 0; n < N; n++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t h = 0; h < H * R; h++)
                for (int64_t w = 0; w < W * R; w++) {
                    const int64_t ci = c * R * R + (h % R) * R + (w % R);
                    r[((n * C + c) * H * R + h) * W * R + w] =
                        x[((n * C * R * R + ci) * H + h / R) * W + w / R];
                }
    for (int di = 0; di < ndev; di++) {
        ts_scope_begin();
        ts_tensor *in = mk(TS_SHAPE(N, C * R * R, H, W), x, TS_F64, devs[di]);
        ts_tensor *y = ts_pixel_shuffle(in, R);
        check_all("pixel_shuffle", y, TS_SHAPE(N, C, H * R, W * R), r, 0);
        ts_tensor *z = ts_pixel_unshuffle(y, R);
        check_all("pixel_unshuffle", z, TS_SHAPE(N, C * R * R, H, W), x, 0);
        /* leading batch dims and an integer dtype */
        ts_tensor *xi = ts_to_dtype(ts_reshape(in, TS_SHAPE(1, N, C * R * R, H, W)), TS_I32);
        CHECK(rd(ts_pixel_shuffle(xi, R), back, N * C * R * R * H * W));
        bool same = true;
        for (int64_t i = 0; i < N * C * R * R * H * W; i++) same = same && back[i] == trunc(r[i]);
        CHECK(same);
        ts_scope_end();
    }
}

/* ================================================================== gradients */
typedef struct gctx {
    int kind; /* 0 pad, 1 interpolate, 2 pixel_shuffle, 3 pixel_unshuffle */
    ts_pad_mode pmode;
    int npad;
    int64_t pad[6];
    ts_interp_opts io;
} gctx;

static ts_tensor *g_fn(ts_tensor *const *in, int n, void *p) {
    (void)n;
    const gctx *c = p;
    switch (c->kind) {
    case 0:
        return ts_pad(in[0], c->pad, c->npad, c->pmode, c->pmode ? 0 : 1.5);
    case 1:
        return ts_interpolate(in[0], c->io);
    case 2:
        return ts_pixel_shuffle(in[0], 2);
    default:
        return ts_pixel_unshuffle(in[0], 2);
    }
}

static void test_grads(void) {
    static double x[512];
    const ts_gradcheck_opts go = {.eps = 1e-6, .atol = 1e-6, .rtol = 1e-5};
    static const int64_t sz1[] = {7}, sz2[] = {5, 3}, sz3[] = {3, 2, 5}, sz1d[] = {3};
    static const double sc2[] = {1.7, 0.6};
    struct {
        gctx c;
        int nd;
        int64_t shape[5];
    } cases[] = {
        {{.kind = 0, .pmode = TS_PAD_CONSTANT, .npad = 4, .pad = {2, -1, 1, 1}}, 3, {2, 3, 4}},
        {{.kind = 0, .pmode = TS_PAD_REFLECT, .npad = 2, .pad = {3, 2}}, 3, {1, 2, 4}},
        {{.kind = 0, .pmode = TS_PAD_REFLECT, .npad = 4, .pad = {2, 1, 1, 2}}, 4, {1, 1, 3, 4}},
        {{.kind = 0, .pmode = TS_PAD_REPLICATE, .npad = 6, .pad = {2, 1, 1, 2, 1, 1}},
         5,
         {1, 1, 2, 3, 2}},
        {{.kind = 0, .pmode = TS_PAD_CIRCULAR, .npad = 4, .pad = {2, -1, 3, 1}}, 4, {1, 2, 3, 4}},
        {{.kind = 1, .io = {.mode = TS_INTERP_NEAREST, .size = sz1, .n = 1}}, 3, {1, 2, 4}},
        {{.kind = 1, .io = {.mode = TS_INTERP_NEAREST_EXACT, .size = sz1d, .n = 1}}, 3, {1, 2, 5}},
        {{.kind = 1, .io = {.mode = TS_INTERP_LINEAR, .size = sz1, .n = 1}}, 3, {1, 2, 4}},
        {{1,
          .io = {.mode = TS_INTERP_BILINEAR, .scale_factor = sc2, .n = 2, .align_corners = true}},
         4,
         {1, 2, 3, 5}},
        {{.kind = 1, .io = {.mode = TS_INTERP_BICUBIC, .size = sz2, .n = 2}}, 4, {1, 1, 3, 4}},
        {{.kind = 1, .io = {.mode = TS_INTERP_TRILINEAR, .size = sz3, .n = 3}}, 5, {1, 1, 2, 3, 3}},
        {{.kind = 1, .io = {.mode = TS_INTERP_AREA, .size = sz3, .n = 3}}, 5, {1, 1, 5, 3, 7}},
        {{.kind = 2}, 4, {1, 8, 2, 3}},
        {{.kind = 3}, 4, {1, 2, 4, 6}},
    };
    for (int di = 0; di < ndev; di++)
        for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
            ts_shape s = ts_shape_make((size_t)cases[k].nd, cases[k].shape);
            fill(x, numel(s), (int)k);
            ts_scope_begin();
            ts_tensor *t = ts_detach(mk(s, x, TS_F64, devs[di]));
            ts_set_requires_grad(t, true);
            const bool ok = ts_gradcheck(g_fn, &cases[k].c, &t, 1, go);
            ts_scope_end();
            ts_test_record(ok);
            if (!ok)
                ts_test_failf(__FILE__, __LINE__, "gradcheck case %zu on %s%s", k,
                              ts_device_str(devs[di]), ts_test_error_str());
            ts_error_clear();
        }
}

/* ================================================================== refusals */
static void test_errors(void) {
    ts_scope_begin();
    ts_tensor *x3 = ts_ones(TS_SHAPE(1, 2, 3), (ts_opts){0});
    ts_tensor *x2 = ts_ones(TS_SHAPE(2, 3), (ts_opts){0});
    CHECK(!ts_pad(x2, (int64_t[]){1, 1, 1}, 3, TS_PAD_CONSTANT, 0));
    CHECK_ERR_HAS(TS_ERR_ARG, "Padding length must be divisible by 2");
    CHECK(!ts_pad(x2, (int64_t[]){1, 1, 1, 1, 1, 1}, 6, TS_PAD_CONSTANT, 0));
    CHECK_ERR_HAS(TS_ERR_ARG, "padding length 6 and input of dimension 2");
    CHECK(!ts_pad(x2, (int64_t[]){-2, -2}, 2, TS_PAD_CONSTANT, 0));
    CHECK_ERR_HAS(TS_ERR_ARG, "resulted in a negative output size");
    CHECK(!ts_pad(x3, (int64_t[]){3, 3}, 2, TS_PAD_REFLECT, 0));
    CHECK_ERR_HAS(TS_ERR_ARG, "Argument #4: Padding size should be less than the corresponding "
                              "input dimension, but got: padding (3, 3) at dimension 2 of input "
                              "[1, 2, 3]");
    CHECK(!ts_pad(ts_ones(TS_SHAPE(1, 1, 3, 3), (ts_opts){0}), (int64_t[]){1, 1, 3, 3}, 4,
                  TS_PAD_REFLECT, 0));
    CHECK_ERR_HAS(TS_ERR_ARG, "Argument #6");
    CHECK(!ts_pad(x2, (int64_t[]){1, 1, 1, 1}, 4, TS_PAD_REFLECT, 0));
    CHECK_ERR_HAS(TS_ERR_ARG, "Padding size 4 is not supported for 2D input tensor");
    CHECK(!ts_pad(x3, (int64_t[]){1, 1}, 2, TS_PAD_REFLECT, 1));
    CHECK_ERR_HAS(TS_ERR_ARG, "Padding mode \"reflect\" doesn't take in value argument");
    CHECK(!ts_pad(x3, (int64_t[]){4, 0}, 2, TS_PAD_CIRCULAR, 0));
    CHECK_ERR_HAS(TS_ERR_ARG, "Padding value causes wrapping around more than once.");
    CHECK(!ts_pad(x3, (int64_t[]){-2, -2}, 2, TS_PAD_CIRCULAR, 0));
    CHECK_ERR_HAS(TS_ERR_ARG, "Negative padding value is resulting in an empty dimension");
    CHECK(!ts_pad(x3, (int64_t[]){-2, -2}, 2, TS_PAD_REPLICATE, 0));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "input (W: 3) is too small. Calculated output W: -1");
    CHECK(!ts_pad(ts_ones(TS_SHAPE(1, 2, 0), (ts_opts){0}), (int64_t[]){1, 1}, 2, TS_PAD_REPLICATE,
                  0));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "Expected 2D or 3D (batch mode) tensor with possibly 0 batch size");
    CHECK(!ts_pad(ts_ones(TS_SHAPE(1, 2, 3), (ts_opts){.dtype = TS_BOOL}), (int64_t[]){1, 1}, 2,
                  TS_PAD_REFLECT, 0));
    CHECK_ERR_HAS(TS_ERR_DTYPE, "not implemented for 'Bool'");
    CHECK(!ts_pad(x3, (int64_t[]){1, 1}, 2, (ts_pad_mode)9, 0));
    CHECK_ERR(TS_ERR_ARG);
    CHECK(!ts_pad(NULL, (int64_t[]){1, 1}, 2, TS_PAD_CONSTANT, 0));
    CHECK_ERR(TS_ERR_ARG);
    /* an empty batch pads fine */
    ts_tensor *e =
        ts_pad(ts_ones(TS_SHAPE(0, 2, 3), (ts_opts){0}), (int64_t[]){1, 1}, 2, TS_PAD_REFLECT, 0);
    CHECK(e && ts_size(e, 0) == 0 && ts_size(e, 2) == 5);
    CHECK_OK();

    const int64_t s3[] = {4}, s0[] = {0}, s2[] = {4, 4};
    const double f2[] = {2};
    CHECK(!ts_interpolate(x3, (ts_interp_opts){.mode = TS_INTERP_BILINEAR, .size = s3, .n = 1}));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "Got 3D input, but bilinear mode needs 4D input");
    CHECK(!ts_interpolate(x2, (ts_interp_opts){.mode = TS_INTERP_NEAREST, .size = s3, .n = 1}));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "Only 3D, 4D and 5D input Tensors supported (got 2D)");
    CHECK(!ts_interpolate(x3, (ts_interp_opts){.mode = TS_INTERP_NEAREST, .size = s0, .n = 1}));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "Input and output sizes should be greater than 0, but got input "
                                "(W: 3) and output (W: 0)");
    CHECK(!ts_interpolate(
        x3, (ts_interp_opts){.mode = TS_INTERP_NEAREST, .size = s3, .scale_factor = f2, .n = 1}));
    CHECK_ERR_HAS(TS_ERR_ARG, "only one of size or scale_factor");
    CHECK(!ts_interpolate(x3, (ts_interp_opts){.mode = TS_INTERP_NEAREST, .n = 1}));
    CHECK_ERR_HAS(TS_ERR_ARG, "either size or scale_factor");
    CHECK(!ts_interpolate(x3, (ts_interp_opts){.mode = TS_INTERP_NEAREST, .size = s2, .n = 2}));
    CHECK_ERR_HAS(TS_ERR_ARG, "same number of spatial dimensions");
    CHECK(!ts_interpolate(
        x3,
        (ts_interp_opts){.mode = TS_INTERP_NEAREST, .size = s3, .n = 1, .align_corners = true}));
    CHECK_ERR_HAS(TS_ERR_ARG, "align_corners option can only be set");
    CHECK(!ts_interpolate(
        ts_ones(TS_SHAPE(1, 1, 3, 3), (ts_opts){0}),
        (ts_interp_opts){.mode = TS_INTERP_NEAREST, .size = s2, .n = 2, .antialias = true}));
    CHECK_ERR_HAS(TS_ERR_ARG, "Anti-alias option is restricted to bilinear and bicubic");
    CHECK(!ts_interpolate(ts_ones(TS_SHAPE(1, 1, 3), (ts_opts){.dtype = TS_I64}),
                          (ts_interp_opts){.mode = TS_INTERP_NEAREST, .size = s3, .n = 1}));
    CHECK_ERR_HAS(TS_ERR_DTYPE, "\"upsample_nearest1d\" not implemented for 'Long'");
    CHECK(!ts_interpolate(ts_ones(TS_SHAPE(1, 1, 3), (ts_opts){.dtype = TS_U8}),
                          (ts_interp_opts){.mode = TS_INTERP_LINEAR, .size = s3, .n = 1}));
    CHECK_ERR_HAS(TS_ERR_DTYPE, "not implemented for 'Byte'");
    CHECK(!ts_interpolate(
        x3, (ts_interp_opts){.mode = TS_INTERP_LINEAR, .scale_factor = (double[]){-1}, .n = 1}));
    CHECK_ERR(TS_ERR_ARG);

    CHECK(!ts_pixel_shuffle(ts_ones(TS_SHAPE(1, 3, 3), (ts_opts){0}), 2));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "input.size(-3)=1 is not divisible by 4");
    CHECK(!ts_pixel_shuffle(x2, 2));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "at least 3 dimensions, but got input with 2 dimension(s)");
    CHECK(!ts_pixel_shuffle(x3, 0));
    CHECK_ERR_HAS(TS_ERR_ARG, "pixel_shuffle expects a positive upscale_factor, but got 0");
    CHECK(!ts_pixel_unshuffle(ts_ones(TS_SHAPE(4, 4, 3), (ts_opts){0}), 2));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "expects width to be divisible by downscale_factor, but "
                                "input.size(-1)=3 is not divisible by 2");
    /* mixed devices are impossible (one input); a NULL input keeps the first error */
    CHECK(!ts_interpolate(NULL, (ts_interp_opts){.mode = TS_INTERP_NEAREST, .size = s3, .n = 1}));
    CHECK_ERR(TS_ERR_ARG);
    ts_scope_end();
}

int main(void) {
    ndev = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    test_pad_values();
    test_pad_strided();
    test_interp_values();
    test_torch_values();
    test_half();
    test_shuffle();
    test_grads();
    test_errors();
    CHECK_OK();
    return ts_test_finish();
}
