/* test_rms_norm_fused.c — rms_norm through the fused layer-norm kernels' rms variant (cpu and sim
 * run the CPU kernels, under every vector ISA the host has; cuda:0 its own, cuda_layer_norm.cu)
 * against a reference computed here in long double: the output and the gradients of input and
 * weight, with and without weight, row lengths 1 .. 4099 (CUDA's warp rows up to 1024, block rows
 * beyond; 16-byte vectors where the length allows, the CPU's vectors of 2 .. 16 and their partial
 * tails) and 1 .. 4096 rows (several blocks of dweight's partial sums); tolerances from the
 * arithmetic (unit roundoff times the roundings an element goes through, and the double sums'
 * growth); float16 / bfloat16 (the CPU through float32 copies, CUDA as they are: float math
 * rounded once); the default eps (the opmath type's epsilon, PyTorch's); the RmsNormBackward0
 * node; ts_gradcheck in float64, first and second derivatives (the second through the composite
 * backward under create_graph); the fused gradients against the composition's; bits independent
 * of the thread count and of the vector ISA; the composition where the kernels do not apply
 * (mixed dtypes, meta). */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_kernels.h"
#include "tol_check.h"
#include "ts_test.h"

static ts_device devs[TS_TEST_MAX_DEVICES];
static int ndev;

/* ------------------------------------------------------------------ inputs */
static uint64_t lcg = 0x2545F4914F6CDD1DULL;
static double uniform(double lo, double hi) {
    lcg = lcg * 6364136223846793005ULL + 1442695040888963407ULL;
    return lo + (hi - lo) * (double)(lcg >> 11) / 9007199254740992.0;
}

typedef enum { X_RANDOM, X_TINY, X_ZERO_ROWS } x_kind;

typedef struct rms_case {
    int64_t rows, cols;
    bool w;     /* weight present (and requiring grad) */
    double eps; /* 0: the default (None) */
    x_kind xk;
} rms_case;

/* host data in double, already rounded to the tensors' dtype */
typedef struct rms_data {
    double *x, *w, *dy;
} rms_data;

static rms_data make_data(const rms_case *c, ts_dtype dt) {
    const int64_t R = c->rows, C = c->cols;
    rms_data d = {malloc(sizeof(double) * R * C), malloc(sizeof(double) * C),
                  malloc(sizeof(double) * R * C)};
    for (int64_t i = 0; i < R; i++) {
        const double k = uniform(0.25, 3.0), off = uniform(-0.5, 0.5);
        for (int64_t j = 0; j < C; j++) {
            double v = off + k * uniform(-1, 1);
            if (c->xk == X_TINY) v = 1e-4 * uniform(0.5, 1); /* eps matters */
            if (c->xk == X_ZERO_ROWS && i % 2 == 0) v = 0;
            d.x[i * C + j] = ts_test_round_to(dt, v);
            d.dy[i * C + j] = ts_test_round_to(dt, uniform(-1, 1));
        }
    }
    for (int64_t j = 0; j < C; j++)
        d.w[j] = ts_test_round_to(dt, (j % 3 ? 1 : -1) * uniform(0.5, 1.5));
    return d;
}

static void free_data(rms_data *d) { free(d->x), free(d->w), free(d->dy); }

/* ------------------------------------------------------------------ the reference */
/* Results in long double and, per element, the tolerance. u: the kernels' dtype's unit roundoff
 * (float32 for the halves, widened afterwards by their one final rounding), ud: double's (the
 * kernels' sums). growth = cols / 16 + 8: additions per lane of the 16-lane double sums and their
 * tree. Forward: rstd from the double sum (growth ud), rounded to the dtype (u), y = x * rstd * w
 * (two roundings): 4u + 2 growth ud relative to |x| rstd |w|. dx = rstd (g - xh c2) with
 * g = dy w, xh = x rstd, c2 = mean(g xh): g, xh, g xh, c2, xh c2, the difference and the product
 * by rstd each rounded once, and rstd's own rounding: at most 16u + 4 growth ud of rstd (|g| +
 * |xh| mean(|g xh|)). dweight: the terms dy xh (3 roundings) summed in the dtype over runs of up
 * to 32 rows (the CPU's sub-blocks: 2 x 32 u of the absolute sum), those sums in double. */
typedef struct rms_ref {
    double *y, *dx, *dw;
    double *ty, *tdx, *tdw;
} rms_ref;

static rms_ref reference(const rms_case *c, const rms_data *d, double eps, ts_dtype dt) {
    const int64_t R = c->rows, C = c->cols;
    const double u = ts_test_unit_roundoff(dt), ud = ldexp(1, -53);
    rms_ref r = {calloc(R * C, sizeof(double)), calloc(R * C, sizeof(double)),
                 calloc(C, sizeof(double)),     calloc(R * C, sizeof(double)),
                 calloc(R * C, sizeof(double)), calloc(C, sizeof(double))};
    long double *dw = calloc(C, sizeof(long double));
    double *sw = calloc(C, sizeof(double));
    const double growth = (double)C / 16 + 8, sub = R < 32 ? (double)R : 32;
    for (int64_t i = 0; i < R; i++) {
        const double *x = d->x + i * C, *dy = d->dy + i * C;
        long double ms = 0;
        for (int64_t j = 0; j < C; j++) ms += (long double)x[j] * x[j];
        ms /= C;
        const long double rs = 1 / sqrtl(ms + eps);
        long double c2 = 0, G2 = 0;
        for (int64_t j = 0; j < C; j++) {
            const long double w = c->w ? d->w[j] : 1, xh = x[j] * rs, g = dy[j] * w;
            c2 += g * xh, G2 += fabsl(g * xh);
            r.y[i * C + j] = (double)(xh * w);
            r.ty[i * C + j] = (4 * u + 2 * growth * ud) * (double)fabsl(xh * w);
            dw[j] += dy[j] * xh;
            sw[j] += (double)fabsl(dy[j] * xh);
        }
        c2 /= C, G2 /= C;
        for (int64_t j = 0; j < C; j++) {
            const long double w = c->w ? d->w[j] : 1, xh = x[j] * rs, g = dy[j] * w;
            r.dx[i * C + j] = (double)(rs * (g - xh * c2));
            r.tdx[i * C + j] =
                (16 * u + 4 * growth * ud) * (double)(rs * (fabsl(g) + fabsl(xh) * G2));
        }
    }
    for (int64_t j = 0; j < C; j++) {
        r.dw[j] = (double)dw[j];
        r.tdw[j] = ((8 + 2 * sub) * u + 2 * ((double)R + 72) * ud) * sw[j];
    }
    free(dw), free(sw);
    return r;
}

static void free_ref(rms_ref *r) {
    free(r->y), free(r->dx), free(r->dw), free(r->ty), free(r->tdx), free(r->tdw);
}

/* PyTorch's default eps: the epsilon of the type the op computes in (float32 for the halves) */
static double default_eps(ts_dtype dt) { return dt == TS_F64 ? DBL_EPSILON : FLT_EPSILON; }

/* ------------------------------------------------------------------ against the reference */
static void run_case(const rms_case *c, ts_dtype dt, ts_device dev) {
    char label[160];
    static const char *kinds[] = {"random", "tiny", "zero rows"};
    snprintf(label, sizeof label, "[%lld x %lld%s, eps %g, %s, %s, %s]", (long long)c->rows,
             (long long)c->cols, c->w ? ", weight" : "", c->eps, kinds[c->xk], ts_dtype_name(dt),
             ts_device_str(dev));
    const int64_t n = c->rows * c->cols;
    rms_data d = make_data(c, dt);
    const ts_dtype kdt = ts_test_is_half(dt) ? TS_F32 : dt; /* the kernels' arithmetic */
    rms_ref r = reference(c, &d, c->eps ? c->eps : default_eps(dt), kdt);
    ts_test_widen_for_half(dt, r.y, r.ty, n);
    ts_test_widen_for_half(dt, r.dx, r.tdx, n);
    ts_test_widen_for_half(dt, r.dw, r.tdw, c->cols);
    ts_scope_begin();
    const ts_opts o = {.dtype = dt, .device = dev};
    ts_tensor *x = ts_tensor_f64(TS_SHAPE(c->rows, c->cols), d.x, o);
    ts_set_requires_grad(x, true);
    ts_tensor *w = c->w ? ts_tensor_f64(TS_SHAPE(c->cols), d.w, o) : NULL;
    if (w) ts_set_requires_grad(w, true);
    ts_tensor *y = ts_rms_norm(x, TS_SHAPE(c->cols), w, c->eps);
    CHECK_OK();
    CHECK(y && ts_dtype_of(y) == dt);
    CHECK_TOL(label, "y", y, r.y, r.ty, n);
    /* a half input on the CPU: the float32 kernels' node under the cast back */
    if (ts_test_is_half(dt) && dev.type != TS_CUDA)
        CHECK_STREQ(y ? ts_test_inner_fn_name(y) : NULL, "RmsNormBackward0");
    else
        CHECK_STREQ(y ? ts_grad_fn_name(y) : NULL, "RmsNormBackward0");
    ts_backward_with(y, ts_tensor_f64(TS_SHAPE(c->rows, c->cols), d.dy, o));
    CHECK_OK();
    CHECK_TOL(label, "dx", ts_grad(x), r.dx, r.tdx, n);
    if (w) CHECK_TOL(label, "dweight", ts_grad(w), r.dw, r.tdw, c->cols);
    ts_scope_end();
    free_ref(&r);
    free_data(&d);
}

static void test_against_reference(void) {
    /* CPU vectors of 2 .. 16 elements with partial tails, 16-lane sums; CUDA warp rows up to
     * 1024, block rows beyond, 16-byte vectors where the length is a multiple of them */
    static const int64_t cols[] = {1,  3,   7,   15,   16,   17,   31,  33,
                                   64, 255, 768, 1023, 1024, 1025, 4099};
    static const int64_t rows[] = {1, 7, 300};
    static const ts_dtype dts[] = {TS_F32, TS_F64, TS_F16, TS_BF16};
    for (int di = 0; di < ndev; di++)
        for (int k = 0; k < 4; k++) {
            for (size_t ci = 0; ci < sizeof cols / sizeof cols[0]; ci++)
                for (int ri = 0; ri < 3; ri++) {
                    const rms_case c = {rows[ri], cols[ci], (ri + ci) % 3 != 0, 0, X_RANDOM};
                    run_case(&c, dts[k], devs[di]);
                }
            const rms_case more[] = {
                {7, 1024, true, 1e-3, X_RANDOM},
                {5, 64, true, 0, X_TINY}, /* the default eps matters */
                {5, 64, false, 1e-2, X_TINY},
                {6, 100, true, 0, X_ZERO_ROWS},
                {4096, 64, true, 0, X_RANDOM}, /* 64 blocks of dweight's partial sums */
                {1030, 1025, true, 0, X_RANDOM},
                {33, 4096, true, 0, X_RANDOM},
            };
            for (size_t i = 0; i < sizeof more / sizeof more[0]; i++)
                run_case(&more[i], dts[k], devs[di]);
        }
}

/* ------------------------------------------------------------------ the composition */
/* The composition rms_norm ran before the kernels (and still runs where they do not apply):
 * x rsqrt(mean(x^2) + eps) w, from public ops */
static ts_tensor *composed(ts_tensor *x, int nnorm, ts_tensor *w, double eps) {
    ts_dims red = {.n = nnorm};
    const int nd = ts_shape_of(x).ndim;
    for (int i = 0; i < nnorm; i++) red.d[i] = nd - nnorm + i;
    ts_tensor *y = ts_mul(x, ts_rsqrt(ts_add_scalar(ts_mean_dims(ts_square(x), red, true), eps)));
    return w ? ts_mul(y, w) : y;
}

static double max_abs_diff(ts_tensor *a, ts_tensor *b) {
    return a && b ? ts_item(ts_max(ts_abs(ts_sub(a, b)))) : INFINITY;
}

/* float64, a 2-dim normalized_shape: the fused output and gradients against the composition's
 * (both within a few ulps of the exact values: the difference bounded by 64 ulps of the largest
 * value) */
static void test_against_composition(void) {
    for (int di = 0; di < ndev; di++) {
        ts_scope_begin();
        ts_manual_seed(11);
        const ts_opts o = {.dtype = TS_F64, .device = devs[di], .requires_grad = true};
        ts_tensor *x = ts_randn(TS_SHAPE(5, 3, 4, 9), o), *w = ts_randn(TS_SHAPE(4, 9), o);
        ts_tensor *x2 = ts_detach(x), *w2 = ts_detach(w);
        ts_set_requires_grad(x2, true), ts_set_requires_grad(w2, true);
        ts_tensor *g =
            ts_randn(TS_SHAPE(5, 3, 4, 9), (ts_opts){.dtype = TS_F64, .device = devs[di]});
        ts_tensor *y = ts_rms_norm(x, TS_SHAPE(4, 9), w, 0.25);
        ts_tensor *y2 = composed(x2, 2, w2, 0.25);
        CHECK_STREQ(y ? ts_grad_fn_name(y) : NULL, "RmsNormBackward0");
        ts_backward_with(y, g), ts_backward_with(y2, g);
        CHECK_OK();
        ts_tensor *got[3] = {y, ts_grad(x), ts_grad(w)}, *want[3] = {y2, ts_grad(x2), ts_grad(w2)};
        for (int i = 0; i < 3; i++) {
            const double scale = want[i] ? ts_item(ts_max(ts_abs(want[i]))) : 0;
            const double diff = max_abs_diff(got[i], want[i]);
            CHECK(diff <= 64 * DBL_EPSILON * scale);
            if (!(diff <= 64 * DBL_EPSILON * scale))
                printf("  %s output %d: %.3g against scale %.3g\n", ts_device_str(devs[di]), i,
                       diff, scale);
        }
        ts_scope_end();
    }
}

/* ------------------------------------------------------------------ gradcheck */
typedef struct gc_ctx {
    int nnorm;
    bool w;
    ts_tensor *v[2]; /* second order: the vectors the first gradients are contracted with */
} gc_ctx;

static ts_tensor *f_rms(ts_tensor *const *in, int n, void *ctx) {
    const gc_ctx *c = ctx;
    (void)n;
    ts_shape s = ts_shape_of(in[0]);
    ts_shape ns = {.ndim = c->nnorm};
    for (int i = 0; i < c->nnorm; i++) ns.dims[i] = s.dims[s.ndim - c->nnorm + i];
    return ts_rms_norm(in[0], ns, c->w ? in[1] : NULL, 0.1);
}

/* Second derivatives (through the composite backward, under create_graph): the Hessian of
 * f = sum(rms_norm(x, w)^3) along v, contracted with u, against the central difference along u of
 * the first-order directional derivative v . grad f. Step 1e-5: truncation ~1e-10 of f's fourth
 * derivatives, rounding ~1e-16 / 1e-5 of the gradient's size. */
static ts_tensor *f_cube(ts_tensor *const *in, const gc_ctx *c) {
    return ts_sum(ts_pow_scalar(f_rms(in, 2, (void *)c), 3));
}

/* v . grad f at in + h u (first order) */
static double directional(const gc_ctx *c, ts_tensor *const *in0, ts_tensor *const *u, double h,
                          ts_tensor *const *v) {
    const int n = c->w ? 2 : 1;
    ts_tensor *in[2] = {NULL, NULL}, *g[2] = {NULL, NULL};
    for (int i = 0; i < n; i++) {
        in[i] = ts_detach(ts_add(in0[i], ts_mul_scalar(u[i], h)));
        ts_set_requires_grad(in[i], true);
    }
    if (!c->w) in[1] = in0[1];
    ts_tensor *f = f_cube(in, c);
    if (ts_autograd_grad(&f, NULL, 1, in, n, (ts_grad_opts){0}, g) != TS_OK) return NAN;
    double s = 0;
    for (int i = 0; i < n; i++) s += ts_item(ts_sum(ts_mul(g[i], v[i])));
    return s;
}

static void hessian_check(gc_ctx *c, ts_tensor *const *in, ts_device dev) {
    const int n = c->w ? 2 : 1;
    const ts_opts p = {.dtype = TS_F64, .device = dev};
    ts_tensor *u[2], *g[2] = {NULL, NULL}, *hv[2] = {NULL, NULL};
    for (int i = 0; i < 2; i++) u[i] = ts_randn(ts_shape_of(in[i]), p);
    ts_tensor *f = f_cube(in, c);
    CHECK(ts_autograd_grad(&f, NULL, 1, in, n, (ts_grad_opts){.create_graph = true}, g) == TS_OK);
    ts_tensor *s = ts_sum(ts_mul(g[0], c->v[0]));
    if (c->w) s = ts_add(s, ts_sum(ts_mul(g[1], c->v[1])));
    CHECK(ts_autograd_grad(&s, NULL, 1, in, n, (ts_grad_opts){0}, hv) == TS_OK);
    double ana = 0, scale = 0;
    for (int i = 0; i < n; i++) {
        ana += ts_item(ts_sum(ts_mul(hv[i], u[i])));
        scale += ts_item(ts_sum(ts_abs(ts_mul(hv[i], u[i]))));
    }
    const double h = 1e-5;
    const double num = (directional(c, in, u, h, c->v) - directional(c, in, u, -h, c->v)) / (2 * h);
    CHECK(fabs(ana - num) <= 1e-6 * scale + 1e-8);
    if (!(fabs(ana - num) <= 1e-6 * scale + 1e-8))
        printf("  second derivative on %s: %.12g against %.12g\n", ts_device_str(dev), ana, num);
}

static void test_gradcheck(void) {
    for (int di = 0; di < ndev; di++) {
        if (devs[di].type == TS_CUDA) continue; /* float64 central differences: cpu and sim */
        ts_scope_begin();
        ts_manual_seed(12);
        const ts_opts o = {.dtype = TS_F64, .device = devs[di], .requires_grad = true};
        const ts_opts p = {.dtype = TS_F64, .device = devs[di]};
        for (int k = 0; k < 3; k++) {
            gc_ctx c = {.nnorm = k == 2 ? 2 : 1, .w = k != 1};
            ts_tensor *in[2] = {ts_randn(TS_SHAPE(3, 4, 5), o),
                                ts_randn(k == 2 ? TS_SHAPE(4, 5) : TS_SHAPE(5), o)};
            c.v[0] = ts_randn(TS_SHAPE(3, 4, 5), p);
            c.v[1] = ts_randn(k == 2 ? TS_SHAPE(4, 5) : TS_SHAPE(5), p);
            ts_tensor *y = f_rms(in, 2, &c);
            CHECK_STREQ(y ? ts_grad_fn_name(y) : NULL, "RmsNormBackward0");
            CHECK(ts_gradcheck(f_rms, &c, in, c.w ? 2 : 1, (ts_gradcheck_opts){0}));
            hessian_check(&c, in, devs[di]);
            CHECK_OK();
        }
        ts_scope_end();
    }
}

/* ------------------------------------------------------------------ threads, ISAs */
/* The same bits with 1, 2 and 3 threads, float32 and float64 */
static void test_thread_independence(void) {
    enum { R = 300, C = 1024 };
    static double res[3][3][R * C];
    const int saved = ts_get_num_threads();
    for (int k = 0; k < 2; k++) {
        const ts_dtype dt = k ? TS_F64 : TS_F32;
        const size_t es = k ? sizeof(double) : sizeof(float);
        ts_scope_begin();
        ts_manual_seed(5);
        ts_opts o = {.dtype = dt, .requires_grad = true};
        ts_tensor *x = ts_randn(TS_SHAPE(R, C), o), *w = ts_randn(TS_SHAPE(C), o);
        ts_tensor *g = ts_randn(TS_SHAPE(R, C), (ts_opts){.dtype = dt});
        for (int t = 0; t < 3; t++) {
            ts_set_num_threads(t + 1);
            ts_tensor *y = ts_rms_norm(x, TS_SHAPE(C), w, 0);
            ts_backward_with(y, g);
            ts_tensor *out[3] = {y, ts_grad(x), ts_grad(w)};
            for (int i = 0; i < 3; i++)
                CHECK(out[i] && ts_copy_to_host(out[i], res[t][i], ts_nbytes(out[i])) == TS_OK);
            ts_set_grad(x, NULL), ts_set_grad(w, NULL);
        }
        for (int t = 1; t < 3; t++)
            for (int i = 0; i < 3; i++)
                CHECK(!memcmp(res[0][i], res[t][i], (size_t)(i < 2 ? R * C : C) * es));
        ts_scope_end();
    }
    ts_set_num_threads(saved);
}

static ts_kview kv(void *p, ts_dtype dt, int64_t d0, int64_t d1) {
    ts_kview v = {.data = p, .dtype = dt, .ndim = 2, .shape = {d0, d1}, .strides = {d1, 1}};
    return v;
}

/* Every vector ISA this CPU has gives the portable variant's bits, forward and backward, with
 * and without weight, on rows with and without a partial last vector. */
static void test_isa_variants(void) {
    static const int64_t shapes[][2] = {{37, 4099}, {70, 17}, {5, 1}, {3, 48}};
    const ts_backend *be = tsi_backend_for(TS_CPU);
    for (int k = 0; k < 4; k++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            const ts_dtype dt = k & 1 ? TS_F64 : TS_F32;
            const bool has_w = k < 2;
            const size_t es = k & 1 ? sizeof(double) : sizeof(float);
            const int64_t R = shapes[s][0], C = shapes[s][1];
            char *in = malloc(es * (2 * R * C + C)), *out[TS_ISA_COUNT];
            const size_t out_bytes = es * (2 * R * C + R + C);
            for (int64_t i = 0; i < 2 * R * C + C; i++) {
                const double v = uniform(-2, 2) + (i % 7 == 0 ? 30 : 0);
                const float f = (float)v;
                memcpy(in + i * es, es == sizeof f ? (const void *)&f : (const void *)&v, es);
            }
            ts_layer_norm_args a = {.rows = R, .cols = C, .eps = 1e-5, .rms = true};
            a.x = kv(in, dt, R, C), a.dy = kv(in + es * R * C, dt, R, C);
            if (has_w) a.weight = kv(in + es * 2 * R * C, dt, 1, C);
            for (int isa = 0; isa < TS_ISA_COUNT; isa++) {
                char *o = out[isa] = calloc(1, out_bytes);
                a.y = kv(o, dt, R, C), a.dx = kv(o + es * R * C, dt, R, C);
                a.rstd = kv(o + es * 2 * R * C, dt, 1, R);
                if (has_w) a.dweight = kv(o + es * (2 * R * C + R), dt, 1, C);
                const size_t wsb = be->layer_norm_workspace(be, 0, &a);
                void *ws = aligned_alloc(64, (wsb + 63) / 64 * 64 + 64);
                const bool have = tsi_cpu_layer_norm_isa((ts_cpu_isa)isa, &a, false, NULL) &&
                                  tsi_cpu_layer_norm_isa((ts_cpu_isa)isa, &a, true, ws);
                free(ws);
                if (!have) {
                    free(o), out[isa] = NULL;
                    continue;
                }
                if (isa > 0) {
                    const bool same = !memcmp(out[0], o, out_bytes);
                    ts_test_record(same);
                    if (!same)
                        ts_test_failf(__FILE__, __LINE__, "%s [%lld x %lld]: isa %s differs",
                                      ts_dtype_name(dt), (long long)R, (long long)C,
                                      tsi_cpu_isa_name((ts_cpu_isa)isa));
                }
            }
            for (int isa = 0; isa < TS_ISA_COUNT; isa++) free(out[isa]);
            free(in);
        }
}

/* ------------------------------------------------------------------ where the kernels do not run
 */
/* A weight of another dtype than the input's: the composition (its promotion, the output in x's
 * dtype, as PyTorch); meta tensors: the composition's nodes and shapes; an empty input. */
static void test_composition_cases(void) {
    ts_scope_begin();
    ts_manual_seed(7);
    ts_tensor *x = ts_randn(TS_SHAPE(6, 40), (ts_opts){0}),
              *w = ts_randn(TS_SHAPE(40), (ts_opts){0});
    ts_tensor *want = composed(ts_to_dtype(x, TS_F64), 1, ts_to_dtype(w, TS_F64), FLT_EPSILON);
    const double big = ts_item(ts_max(ts_abs(want)));

    ts_tensor *xh = ts_to_dtype(x, TS_F16);
    ts_set_requires_grad(xh, true);
    ts_tensor *yh = ts_rms_norm(xh, TS_SHAPE(40), w, 0);
    CHECK_OK();
    CHECK(yh && ts_dtype_of(yh) == TS_F16);
    CHECK(yh && strcmp(ts_grad_fn_name(yh), "RmsNormBackward0") != 0);
    CHECK(yh && ts_test_inner_fn_name(yh) &&
          strcmp(ts_test_inner_fn_name(yh), "RmsNormBackward0") != 0);
    CHECK(max_abs_diff(ts_to_dtype(yh, TS_F64), want) < 1e-2 * big);

    ts_tensor *xm = ts_empty(TS_SHAPE(6, 40), (ts_opts){.device = ts_meta()});
    ts_set_requires_grad(xm, true);
    ts_tensor *ym = ts_rms_norm(xm, TS_SHAPE(40), NULL, 0);
    CHECK_OK();
    CHECK(ym && ts_shape_of(ym).ndim == 2 && ts_shape_of(ym).dims[1] == 40);
    CHECK(ym && strcmp(ts_grad_fn_name(ym), "RmsNormBackward0") != 0);

    ts_tensor *xe = ts_randn(TS_SHAPE(0, 8), (ts_opts){.requires_grad = true});
    ts_tensor *ye = ts_rms_norm(xe, TS_SHAPE(8), NULL, 0);
    CHECK_OK();
    CHECK(ye && ts_numel(ye) == 0);
    ts_scope_end();
}

/* Forward and backward on [64, 1024] float32 with a weight: beyond the output, the two gradients
 * and rstd ([rows]) the extra peak stays under a quarter of the input's size (the workspace of
 * dweight's partial sums: 2 blocks x 2 x 1024 values of 12 bytes, 48 KiB): nothing of the input's
 * size is saved or made in between, where the composition keeps several such tensors. */
static void test_memory(void) {
    const int64_t R = 64, C = 1024;
    ts_scope_begin();
    ts_manual_seed(6);
    ts_tensor *x = ts_randn(TS_SHAPE(R, C), (ts_opts){.requires_grad = true});
    ts_tensor *w = ts_randn(TS_SHAPE(C), (ts_opts){.requires_grad = true});
    ts_tensor *g = ts_randn(TS_SHAPE(R, C), (ts_opts){0});
    ts_mem_stats before, after;
    CHECK(ts_memory_stats(ts_cpu(), &before) == TS_OK);
    CHECK(ts_memory_reset_peak(ts_cpu()) == TS_OK);
    ts_tensor *y = ts_rms_norm(x, TS_SHAPE(C), w, 0);
    ts_backward_with(y, g);
    CHECK_OK();
    CHECK(ts_memory_stats(ts_cpu(), &after) == TS_OK);
    const double full = (double)(R * C * 4), vec = (double)(C * 4);
    const double extra = (double)after.peak_allocated - (double)before.allocated;
    /* y and dx; dweight; rstd; each allocation rounded up to 512 bytes */
    const double need = 2 * full + vec + (double)(R * 4) + 6 * 512;
    const double limit = need + full / 4;
    printf("rms_norm [64, 1024] forward + backward: %.0f KiB extra peak (outputs and gradients "
           "%.0f KiB, limit %.0f KiB)\n",
           extra / 1024, need / 1024, limit / 1024);
    CHECK(extra <= limit);
    CHECK(ts_grad(x) && ts_grad(w));
    ts_scope_end();
}

/* The node keeps the input: modifying it in place after the forward makes backward refuse. */
static void test_inplace_after_forward(void) {
    ts_scope_begin();
    ts_tensor *leaf = ts_randn(TS_SHAPE(3, 8), (ts_opts){.requires_grad = true});
    ts_tensor *x = ts_mul_scalar(leaf, 2.0);
    ts_tensor *y = ts_rms_norm(x, TS_SHAPE(8), NULL, 0);
    ts_add_scalar_(x, 1.0);
    ts_backward_with(y, ts_ones_like(y));
    CHECK(strstr(ts_error_message(), "modified by an inplace operation"));
    CHECK_ERR(TS_ERR_STATE);
    ts_scope_end();
}

int main(void) {
    ndev = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    test_against_reference();
    test_against_composition();
    test_gradcheck();
    test_thread_independence();
    test_isa_variants();
    test_memory();
    test_composition_cases();
    test_inplace_after_forward();
    return ts_test_finish();
}
