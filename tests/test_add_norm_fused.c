/* test_add_norm_fused.c — ts_add_layer_norm / ts_add_rms_norm (decision 0031): h = x + residual
 * and the norm of h in one pass of the layer-norm kernels (cpu and sim run the CPU kernels, under
 * every vector ISA the host has; cuda:0 its own). Checked: h against the exact sum rounded once
 * to the dtype (computed here in long double) and against ts_add's bits; y against a long-double
 * layer norm / RMSNorm of h (tolerance from the arithmetic) and against the unfused norm's bits on
 * h; float32 / float64 / float16 / bfloat16 (the cpu's halves through the composition), row
 * lengths across the CPU's vectors and CUDA's warp / block rows; the gradients of x, residual,
 * weight and bias bit for bit against the composition's, with h used again downstream (its
 * gradient accumulates); ts_gradcheck in float64 (first derivatives, and second through the norm
 * node's composite backward); the nodes recorded; every ISA's bits; the composition's cases
 * (meta, empty, autocast-free halves on cpu); the errors (shapes, dtypes, devices, NULLs). */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_kernels.h"
#include "same_bits.h"
#include "tol_check.h"
#include "ts_test.h"

static ts_device devs[TS_TEST_MAX_DEVICES];
static int ndev;

static uint64_t lcg = 0x9E3779B97F4A7C15ULL;
static double uniform(double lo, double hi) {
    lcg = lcg * 6364136223846793005ULL + 1442695040888963407ULL;
    return lo + (hi - lo) * (double)(lcg >> 11) / 9007199254740992.0;
}

/* y = add_norm(x, r) and *h, through the fused entry (fused) or the composition */
static ts_tensor *run(bool fused, bool rms, ts_tensor *x, ts_tensor *r, ts_shape ns, ts_tensor *w,
                      ts_tensor *b, double eps, ts_tensor **h) {
    if (fused)
        return rms ? ts_add_rms_norm(x, r, ns, w, eps, h)
                   : ts_add_layer_norm(x, r, ns, w, b, eps, h);
    *h = ts_add(x, r);
    return rms ? ts_rms_norm(*h, ns, w, eps) : ts_layer_norm(*h, ns, w, b, eps);
}

/* ------------------------------------------------------------------ against long double */
/* Per element: h = the exact sum rounded once to the dtype (inputs in [-3, 3]: for float32 and
 * the halves the sum is exact in double, so rounding it is ts_add's one rounding; for float64 the
 * double sum is that rounding). y from h in long double; tolerance (the
 * kernels' arithmetic in float32 for the halves, widened by their final rounding): mean and rstd
 * from double sums (growth = cols / 16 + 8 additions a lane, ud each) rounded to the dtype (u
 * each), y = (h - mean) rstd w + b in three more roundings: (6u + 4 growth ud) (|xh w| + |b|) +
 * (2u |mean| + 2 growth ud mean(|h|)) rstd |w| (the mean's summation error and rounding, carried
 * through h - mean). */
typedef struct an_case {
    int64_t rows, cols;
    bool rms, affine;
} an_case;

static void check_reference(const an_case *c, ts_dtype dt, ts_device dev) {
    const int64_t R = c->rows, C = c->cols, n = R * C;
    char label[160];
    snprintf(label, sizeof label, "[%lld x %lld %s%s, %s, %s]", (long long)R, (long long)C,
             c->rms ? "rms" : "layer", c->affine ? ", affine" : "", ts_dtype_name(dt),
             ts_device_str(dev));
    double *x = malloc(sizeof(double) * n), *r = malloc(sizeof(double) * n);
    double *w = malloc(sizeof(double) * C), *b = malloc(sizeof(double) * C);
    double *hr = malloc(sizeof(double) * n), *yr = malloc(sizeof(double) * n);
    double *th = calloc(n, sizeof(double)), *ty = malloc(sizeof(double) * n);
    for (int64_t i = 0; i < R; i++) {
        const double off = uniform(-0.5, 0.5);
        for (int64_t j = 0; j < C; j++) {
            x[i * C + j] = ts_test_round_to(dt, off + uniform(-2, 2));
            r[i * C + j] = ts_test_round_to(dt, uniform(-1, 1));
            hr[i * C + j] = ts_test_round_to(dt, x[i * C + j] + r[i * C + j]);
        }
    }
    for (int64_t j = 0; j < C; j++) {
        w[j] = ts_test_round_to(dt, uniform(0.5, 1.5) * (j % 3 ? 1 : -1));
        b[j] = ts_test_round_to(dt, uniform(-1, 1));
    }
    const ts_dtype kdt = ts_test_is_half(dt) ? TS_F32 : dt;
    const double u = ts_test_unit_roundoff(kdt), ud = ldexp(1, -53), eps = 1e-5;
    const double growth = (double)C / 16 + 8;
    for (int64_t i = 0; i < R; i++) {
        const double *h = hr + i * C;
        long double m = 0, v = 0, mabs = 0;
        for (int64_t j = 0; j < C; j++) mabs += fabsl((long double)h[j]);
        mabs /= C;
        if (!c->rms) {
            for (int64_t j = 0; j < C; j++) m += h[j];
            m /= C;
        }
        for (int64_t j = 0; j < C; j++) v += (h[j] - m) * (h[j] - m);
        v /= C;
        const long double rs = 1 / sqrtl(v + eps);
        for (int64_t j = 0; j < C; j++) {
            const long double wj = c->affine ? w[j] : 1, bj = c->affine && !c->rms ? b[j] : 0;
            const long double xh = (h[j] - m) * rs;
            yr[i * C + j] = (double)(xh * wj + bj);
            ty[i * C + j] = (6 * u + 4 * growth * ud) * (double)(fabsl(xh * wj) + fabsl(bj)) +
                            (2 * u * (double)fabsl(m) + 2 * growth * ud * (double)mabs) *
                                (double)(rs * fabsl(wj));
        }
    }
    ts_test_widen_for_half(dt, yr, ty, n);
    ts_scope_begin();
    const ts_opts o = {.dtype = dt, .device = dev};
    ts_tensor *xt = ts_tensor_f64(TS_SHAPE(R, C), x, o), *rt = ts_tensor_f64(TS_SHAPE(R, C), r, o);
    ts_tensor *wt = c->affine ? ts_tensor_f64(TS_SHAPE(C), w, o) : NULL;
    ts_tensor *bt = c->affine && !c->rms ? ts_tensor_f64(TS_SHAPE(C), b, o) : NULL;
    ts_tensor *h = NULL;
    ts_tensor *y = run(true, c->rms, xt, rt, TS_SHAPE(C), wt, bt, eps, &h);
    CHECK_OK();
    CHECK(y && h && ts_dtype_of(y) == dt && ts_dtype_of(h) == dt);
    CHECK_TOL(label, "h", h, hr, th, n);
    CHECK_TOL(label, "y", y, yr, ty, n);
    /* the bits of ts_add and of the unfused norm on h */
    ts_tensor *h2 = NULL;
    ts_tensor *y2 = run(false, c->rms, xt, rt, TS_SHAPE(C), wt, bt, eps, &h2);
    const bool hb = same_bits(h, h2), yb = same_bits(y, y2);
    CHECK(hb && yb);
    if (!hb || !yb) printf("  %s: h same bits %d, y same bits %d\n", label, hb, yb);
    ts_scope_end();
    free(x), free(r), free(w), free(b), free(hr), free(yr), free(th), free(ty);
}

static void test_against_reference(void) {
    /* CPU vectors of 2 .. 16 elements with partial tails; CUDA warp rows up to 1024, block rows
     * beyond, 16-byte vectors where the length allows */
    static const int64_t cols[] = {1, 3, 7, 15, 16, 17, 33, 64, 255, 768, 1024, 1025, 4099};
    static const int64_t rows[] = {1, 7, 130};
    static const ts_dtype dts[] = {TS_F32, TS_F64, TS_F16, TS_BF16};
    for (int di = 0; di < ndev; di++)
        for (int k = 0; k < 4; k++)
            for (size_t ci = 0; ci < sizeof cols / sizeof cols[0]; ci++)
                for (int ri = 0; ri < 3; ri++)
                    for (int rms = 0; rms < 2; rms++) {
                        const an_case c = {rows[ri], cols[ci], rms, (ri + ci + rms) % 3 != 0};
                        check_reference(&c, dts[k], devs[di]);
                    }
}

/* ------------------------------------------------------------------ gradients, bit for bit */
/* loss = sum(y gy) + sum(h gh): h is used again downstream, so its gradient is the norm's plus
 * gh, and x and residual both get that sum. The fused graph against the composition's, bits of
 * y, h and of the four gradients; the nodes: y's the norm's, h's AddBackward0. */
static void check_grads(bool rms, ts_dtype dt, ts_device dev, int64_t R, int64_t C, bool affine) {
    char label[128];
    snprintf(label, sizeof label, "%s [%lld x %lld]%s %s %s",
             rms ? "add_rms_norm" : "add_layer_norm", (long long)R, (long long)C,
             affine ? " affine" : "", ts_dtype_name(dt), ts_device_str(dev));
    ts_scope_begin();
    const ts_opts p = {.dtype = dt, .device = dev};
    ts_tensor *x0 = ts_randn(TS_SHAPE(2, R, C), p), *r0 = ts_randn(TS_SHAPE(2, R, C), p);
    ts_tensor *w0 = ts_randn(TS_SHAPE(C), p), *b0 = ts_randn(TS_SHAPE(C), p);
    ts_tensor *gy = ts_randn(TS_SHAPE(2, R, C), p), *gh = ts_randn(TS_SHAPE(2, R, C), p);
    ts_tensor *got[2][6];
    for (int f = 0; f < 2; f++) {
        ts_tensor *x = ts_clone(x0), *r = ts_clone(r0);
        ts_tensor *w = affine ? ts_clone(w0) : NULL, *b = affine && !rms ? ts_clone(b0) : NULL;
        ts_tensor *leaves[4] = {x, r, w, b};
        for (int i = 0; i < 4; i++)
            if (leaves[i]) ts_set_requires_grad(leaves[i], true);
        ts_tensor *h = NULL;
        ts_tensor *y = run(f == 0, rms, x, r, TS_SHAPE(C), w, b, 1e-5, &h);
        CHECK_OK();
        if (f == 0 && dt != TS_F16 && dt != TS_BF16) {
            CHECK_STREQ(y ? ts_grad_fn_name(y) : NULL,
                        rms ? "RmsNormBackward0" : "NativeLayerNormBackward0");
            CHECK_STREQ(h ? ts_grad_fn_name(h) : NULL, "AddBackward0");
        }
        ts_tensor *loss = ts_add(ts_sum(ts_mul(y, gy)), ts_sum(ts_mul(h, gh)));
        CHECK(ts_backward(loss) == TS_OK);
        ts_tensor *out[6] = {
            y, h, ts_grad(x), ts_grad(r), w ? ts_grad(w) : NULL, b ? ts_grad(b) : NULL};
        memcpy(got[f], out, sizeof out);
    }
    static const char *what[6] = {"y", "h", "dx", "dresidual", "dweight", "dbias"};
    for (int i = 0; i < 6; i++) {
        if (!got[1][i]) {
            CHECK(!got[0][i]);
            continue;
        }
        const bool same = same_bits(got[0][i], got[1][i]);
        ts_test_record(same);
        if (!same)
            ts_test_failf(__FILE__, __LINE__, "%s: %s differs from the composition's", label,
                          what[i]);
    }
    ts_scope_end();
}

static void test_grads_bits(void) {
    static const ts_dtype dts[] = {TS_F32, TS_F64, TS_F16, TS_BF16};
    static const int64_t shapes[][2] = {{3, 1}, {5, 17}, {70, 64}, {9, 768}, {4, 1025}};
    ts_manual_seed(3);
    for (int di = 0; di < ndev; di++)
        for (int k = 0; k < 4; k++)
            for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
                for (int rms = 0; rms < 2; rms++)
                    check_grads(rms, dts[k], devs[di], shapes[s][0], shapes[s][1],
                                (s + rms) % 3 != 2);
}

/* ------------------------------------------------------------------ gradcheck */
typedef struct gc_ctx {
    bool rms, affine;
    int nnorm;
} gc_ctx;

/* y + h^2 / 2: both outputs reach the result, h along a second path */
static ts_tensor *f_add_norm(ts_tensor *const *in, int n, void *ctx) {
    const gc_ctx *c = ctx;
    (void)n;
    ts_shape s = ts_shape_of(in[0]), ns = {.ndim = c->nnorm};
    for (int i = 0; i < c->nnorm; i++) ns.dims[i] = s.dims[s.ndim - c->nnorm + i];
    ts_tensor *h = NULL;
    ts_tensor *w = c->affine ? in[2] : NULL, *b = c->affine && !c->rms ? in[3] : NULL;
    ts_tensor *y = c->rms ? ts_add_rms_norm(in[0], in[1], ns, w, 0.1, &h)
                          : ts_add_layer_norm(in[0], in[1], ns, w, b, 0.1, &h);
    return y && h ? ts_add(y, ts_mul_scalar(ts_square(h), 0.5)) : NULL;
}

/* Second derivatives (the norm node's composite backward under create_graph, then back through
 * h's add node): v . grad f differentiated again, fused against the composition, bit for bit
 * (the same nodes over the same values; the composite backward itself is checked against
 * central differences in test_layer_norm / test_rms_norm_fused). */
static void second_order_bits(gc_ctx *c, ts_tensor *const *in0, int n, ts_device dev) {
    const ts_opts p = {.dtype = TS_F64, .device = dev};
    ts_tensor *v = ts_randn(ts_shape_of(in0[0]), p), *res[2][4];
    for (int f = 0; f < 2; f++) {
        ts_tensor *in[4], *g[4] = {NULL, NULL, NULL, NULL}, *gg[4] = {NULL, NULL, NULL, NULL};
        for (int i = 0; i < 4; i++) {
            in[i] = ts_detach(in0[i]);
            ts_set_requires_grad(in[i], true);
        }
        ts_shape s = ts_shape_of(in[0]), ns = {.ndim = c->nnorm};
        for (int i = 0; i < c->nnorm; i++) ns.dims[i] = s.dims[s.ndim - c->nnorm + i];
        ts_tensor *w = c->affine ? in[2] : NULL, *b = c->affine && !c->rms ? in[3] : NULL, *h;
        ts_tensor *y = run(f == 0, c->rms, in[0], in[1], ns, w, b, 0.1, &h);
        ts_tensor *fo = ts_sum(ts_mul(ts_add(y, ts_mul_scalar(ts_square(h), 0.5)), v));
        CHECK(ts_autograd_grad(&fo, NULL, 1, in, n, (ts_grad_opts){.create_graph = true}, g) ==
              TS_OK);
        ts_tensor *sq = ts_sum(ts_square(g[0]));
        for (int i = 1; i < n; i++) sq = ts_add(sq, ts_sum(ts_square(g[i])));
        CHECK(ts_autograd_grad(&sq, NULL, 1, in, n, (ts_grad_opts){.allow_unused = true}, gg) ==
              TS_OK);
        memcpy(res[f], gg, sizeof gg);
    }
    for (int i = 0; i < n; i++) CHECK(res[0][i] ? same_bits(res[0][i], res[1][i]) : !res[1][i]);
}

static void test_gradcheck(void) {
    for (int di = 0; di < ndev; di++) {
        if (devs[di].type == TS_CUDA) continue; /* float64 central differences: cpu and sim */
        ts_scope_begin();
        ts_manual_seed(12);
        const ts_opts o = {.dtype = TS_F64, .device = devs[di], .requires_grad = true};
        for (int k = 0; k < 6; k++) {
            gc_ctx c = {.rms = k & 1, .affine = k < 4, .nnorm = k >= 2 && k < 4 ? 2 : 1};
            const ts_shape ps = c.nnorm == 2 ? TS_SHAPE(4, 5) : TS_SHAPE(5);
            ts_tensor *in[4] = {ts_randn(TS_SHAPE(3, 4, 5), o), ts_randn(TS_SHAPE(3, 4, 5), o),
                                ts_randn(ps, o), ts_randn(ps, o)};
            const int n = !c.affine ? 2 : c.rms ? 3 : 4;
            CHECK(ts_gradcheck(f_add_norm, &c, in, n, (ts_gradcheck_opts){0}));
            second_order_bits(&c, in, n, devs[di]);
            CHECK_OK();
        }
        ts_scope_end();
    }
}

/* ------------------------------------------------------------------ ISA variants */
static ts_kview kv(void *p, ts_dtype dt, int64_t d0, int64_t d1) {
    ts_kview v = {.data = p, .dtype = dt, .ndim = 2, .shape = {d0, d1}, .strides = {d1, 1}};
    return v;
}

/* Every vector ISA this CPU has writes the portable variant's bits of h, y and the statistics;
 * h is x + residual element by element (checked against the scalar sum). */
static void test_isa_variants(void) {
    static const int64_t shapes[][2] = {{37, 4099}, {70, 17}, {5, 1}, {3, 48}};
    for (int k = 0; k < 4; k++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            const ts_dtype dt = k & 1 ? TS_F64 : TS_F32;
            const bool rms = k >= 2;
            const size_t es = k & 1 ? sizeof(double) : sizeof(float);
            const int64_t R = shapes[s][0], C = shapes[s][1];
            char *in = malloc(es * (2 * R * C + 2 * C)), *out[TS_ISA_COUNT];
            const size_t out_bytes = es * (2 * R * C + 2 * R);
            for (int64_t i = 0; i < 2 * R * C + 2 * C; i++) {
                const double v = uniform(-2, 2) + (i % 7 == 0 ? 30 : 0);
                const float f = (float)v;
                memcpy(in + i * es, es == sizeof f ? (const void *)&f : (const void *)&v, es);
            }
            ts_layer_norm_args a = {.rows = R, .cols = C, .eps = 1e-5, .rms = rms};
            a.x = kv(in, dt, R, C), a.residual = kv(in + es * R * C, dt, R, C);
            a.weight = kv(in + es * 2 * R * C, dt, 1, C);
            if (!rms) a.bias = kv(in + es * (2 * R * C + C), dt, 1, C);
            for (int isa = 0; isa < TS_ISA_COUNT; isa++) {
                char *o = out[isa] = calloc(1, out_bytes);
                a.h = kv(o, dt, R, C), a.y = kv(o + es * R * C, dt, R, C);
                if (!rms) a.mean = kv(o + es * 2 * R * C, dt, 1, R);
                a.rstd = kv(o + es * (2 * R * C + R), dt, 1, R);
                if (!tsi_cpu_layer_norm_isa((ts_cpu_isa)isa, &a, false, NULL)) {
                    free(o), out[isa] = NULL;
                    continue;
                }
                if (isa == 0) {
                    bool sum_ok = true;
                    for (int64_t i = 0; i < R * C; i++) {
                        if (dt == TS_F32) {
                            const float *xf = (const float *)in, *hf = (const float *)o;
                            sum_ok &= hf[i] == xf[i] + xf[R * C + i];
                        } else {
                            const double *xd = (const double *)in, *hd = (const double *)o;
                            sum_ok &= hd[i] == xd[i] + xd[R * C + i];
                        }
                    }
                    CHECK(sum_ok);
                } else {
                    const bool same = !memcmp(out[0], o, out_bytes);
                    ts_test_record(same);
                    if (!same)
                        ts_test_failf(__FILE__, __LINE__, "%s%s [%lld x %lld]: isa %s differs",
                                      ts_dtype_name(dt), rms ? " rms" : "", (long long)R,
                                      (long long)C, tsi_cpu_isa_name((ts_cpu_isa)isa));
                }
            }
            for (int isa = 0; isa < TS_ISA_COUNT; isa++) free(out[isa]);
            free(in);
        }
}

/* ------------------------------------------------------------------ the composition's cases */
static void test_composition_cases(void) {
    ts_scope_begin();
    /* meta: shapes and the composition's nodes */
    const ts_opts m = {.device = ts_meta(), .requires_grad = true};
    ts_tensor *xm = ts_empty(TS_SHAPE(6, 40), m), *rm = ts_empty(TS_SHAPE(6, 40), m), *hm = NULL;
    ts_tensor *ym = ts_add_layer_norm(xm, rm, TS_SHAPE(40), NULL, NULL, 0, &hm);
    CHECK_OK();
    CHECK(ym && hm && ts_shape_of(ym).dims[1] == 40 && ts_shape_of(hm).dims[1] == 40);
    CHECK_STREQ(hm ? ts_grad_fn_name(hm) : NULL, "AddBackward0");
    /* empty rows */
    ts_tensor *xe = ts_randn(TS_SHAPE(0, 8), (ts_opts){.requires_grad = true}), *he = NULL;
    ts_tensor *ye = ts_add_rms_norm(xe, xe, TS_SHAPE(8), NULL, 0, &he);
    CHECK_OK();
    CHECK(ye && he && ts_numel(ye) == 0 && ts_numel(he) == 0);
    /* a 2-dim normalized_shape over a non-contiguous input */
    ts_manual_seed(9);
    ts_tensor *xt = ts_transpose(ts_randn(TS_SHAPE(5, 4, 3), (ts_opts){0}), 0, 2);
    ts_tensor *rt = ts_randn(TS_SHAPE(3, 4, 5), (ts_opts){0}), *h1 = NULL;
    ts_tensor *y1 = ts_add_layer_norm(xt, rt, TS_SHAPE(4, 5), NULL, NULL, 0, &h1);
    ts_tensor *h2 = ts_add(xt, rt), *y2 = ts_layer_norm(h2, TS_SHAPE(4, 5), NULL, NULL, 0);
    CHECK(same_bits(h1, h2) && same_bits(y1, y2));
    /* inputs one element off a 16-byte boundary (contiguous views at an odd offset), h and y
     * fresh: the bits of the composition (CUDA keeps the unfused kernel's vector width, which
     * fixes the order of the row's sums) */
    for (int di = 0; di < ndev; di++)
        for (int rms = 0; rms < 2; rms++) {
            const ts_opts o = {.device = devs[di]};
            ts_tensor *xo = ts_reshape(ts_narrow(ts_randn(TS_SHAPE(6 * 64 + 1), o), 0, 1, 6 * 64),
                                       TS_SHAPE(6, 64));
            ts_tensor *ro = ts_reshape(ts_narrow(ts_randn(TS_SHAPE(6 * 64 + 3), o), 0, 3, 6 * 64),
                                       TS_SHAPE(6, 64));
            ts_tensor *wo = ts_randn(TS_SHAPE(64), o), *ha = NULL, *hb = NULL;
            ts_tensor *ya = run(true, rms, xo, ro, TS_SHAPE(64), wo, NULL, 0, &ha);
            ts_tensor *yb = run(false, rms, xo, ro, TS_SHAPE(64), wo, NULL, 0, &hb);
            CHECK_OK();
            CHECK(same_bits(ha, hb) && same_bits(ya, yb));
        }
    ts_scope_end();
}

/* ------------------------------------------------------------------ errors */
static void test_errors(void) {
    ts_scope_begin();
    ts_tensor *x = ts_randn(TS_SHAPE(4, 8), (ts_opts){0}), *h = x;
    ts_tensor *y =
        ts_add_layer_norm(x, ts_randn(TS_SHAPE(8), (ts_opts){0}), TS_SHAPE(8), NULL, NULL, 0, &h);
    CHECK(!y && !h);
    CHECK_ERR_HAS(TS_ERR_SHAPE, "add_layer_norm: expected residual of the input's shape");
    h = x;
    y = ts_add_rms_norm(x, ts_randn(TS_SHAPE(4, 8), (ts_opts){.dtype = TS_F64}), TS_SHAPE(8), NULL,
                        0, &h);
    CHECK(!y && !h);
    CHECK_ERR_HAS(TS_ERR_DTYPE, "add_rms_norm: expected residual of the input's dtype");
    ts_tensor *xs = ts_randn(TS_SHAPE(4, 8), (ts_opts){.device = ts_sim(0)});
    h = x;
    y = ts_add_layer_norm(x, xs, TS_SHAPE(8), NULL, NULL, 0, &h);
    CHECK(!y && !h);
    CHECK_ERR(TS_ERR_DEVICE);
    y = ts_add_layer_norm(x, x, TS_SHAPE(8), ts_ones(TS_SHAPE(8), (ts_opts){.device = ts_sim(0)}),
                          NULL, 0, &h);
    CHECK(!y && !h);
    CHECK_ERR(TS_ERR_DEVICE);
    y = ts_add_layer_norm(x, NULL, TS_SHAPE(8), NULL, NULL, 0, &h);
    CHECK(!y && !h);
    CHECK_ERR_HAS(TS_ERR_ARG, "residual is NULL");
    CHECK(!ts_add_rms_norm(x, x, TS_SHAPE(8), NULL, 0, NULL));
    CHECK_ERR_HAS(TS_ERR_ARG, "add_rms_norm: the output h is NULL");
    /* the norm's own checks: a normalized_shape that does not end x's shape, a weight of the
     * wrong shape */
    h = x;
    y = ts_add_layer_norm(x, x, TS_SHAPE(7), NULL, NULL, 0, &h);
    CHECK(!y && !h);
    CHECK_ERR(TS_ERR_SHAPE);
    y = ts_add_rms_norm(x, x, TS_SHAPE(8), ts_ones(TS_SHAPE(4), (ts_opts){0}), 0, &h);
    CHECK(!y && !h);
    CHECK_ERR(TS_ERR_SHAPE);
    ts_scope_end();
}

/* ------------------------------------------------------------------ the pre-norm encoder layer */
/* A norm_first TransformerEncoderLayer fuses the attention sublayer's residual add with norm2
 * (transformer.c): its output and every gradient (input and parameters) have the bits of the
 * same layer's children run one after the other as the unfused code did. */
static void test_encoder_layer_bits(void) {
    for (int di = 0; di < ndev; di++) {
        if (devs[di].type == TS_CUDA) continue;
        ts_scope_begin();
        ts_manual_seed(21);
        ts_transformer_opts to = {.dim_feedforward = 64,
                                  .has_dropout = true,
                                  .dropout = 0,
                                  .batch_first = true,
                                  .norm_first = true};
        ts_module *layer = ts_module_to(ts_transformer_encoder_layer_new(32, 4, to), devs[di]);
        ts_tensor *x0 = ts_randn(TS_SHAPE(2, 5, 32), (ts_opts){.device = devs[di]});
        ts_tensor *g = ts_randn(TS_SHAPE(2, 5, 32), (ts_opts){.device = devs[di]});
        ts_tensor *got[2][16] = {{NULL}};
        int np = 0;
        for (int f = 0; f < 2; f++) {
            ts_tensor *x = ts_clone(x0);
            ts_set_requires_grad(x, true);
            ts_tensor *out;
            if (f == 0) {
                out = ts_transformer_encoder_layer(layer, x, NULL, true, NULL);
            } else {
                ts_module *sa = ts_module_child(layer, "self_attn");
                ts_tensor *n1 = ts_forward(ts_module_child(layer, "norm1"), x);
                ts_tensor *a = ts_forward(
                    ts_module_child(layer, "dropout1"),
                    ts_multihead_attention(sa, n1, n1, n1, NULL, NULL, true, false, NULL));
                ts_tensor *h = ts_add(x, a);
                ts_tensor *n2 = ts_forward(ts_module_child(layer, "norm2"), h);
                ts_tensor *ff = ts_forward(
                    ts_module_child(layer, "linear2"),
                    ts_forward(ts_module_child(layer, "dropout"),
                               ts_relu(ts_forward(ts_module_child(layer, "linear1"), n2))));
                out = ts_add(h, ts_forward(ts_module_child(layer, "dropout2"), ff));
            }
            CHECK(ts_backward_with(out, g) == TS_OK);
            ts_tensor_list ps = ts_module_named_parameters(layer);
            got[f][0] = out, got[f][1] = ts_grad(x);
            np = ps.n < 14 ? ps.n : 14;
            for (int i = 0; i < np; i++) {
                got[f][2 + i] = ts_clone(ts_grad(ps.tensors[i]));
                ts_set_grad(ps.tensors[i], NULL);
            }
            ts_tensor_list_free(&ps);
        }
        CHECK(np >= 10);
        for (int i = 0; i < 2 + np; i++) {
            const bool same = same_bits(got[0][i], got[1][i]);
            ts_test_record(same);
            if (!same)
                ts_test_failf(__FILE__, __LINE__, "encoder layer on %s: tensor %d differs",
                              ts_device_str(devs[di]), i);
        }
        ts_module_free(layer);
        ts_scope_end();
    }
}

int main(void) {
    ndev = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    test_against_reference();
    test_grads_bits();
    test_gradcheck();
    test_isa_variants();
    test_composition_cases();
    test_errors();
    test_encoder_layer_bits();
    return ts_test_finish();
}
