/* test_layer_norm.c — layer_norm's fused kernels (cpu and sim run the same CPU kernels, under
 * every vector ISA the host has; cuda:0 its own, cuda_layer_norm.cu) against a reference computed
 * here in long double: the output and the gradients of input, weight and bias, with and without
 * weight and bias, row lengths 1 .. 8195 (CUDA's warp rows up to 1024, block rows beyond; 16-byte
 * vectors where the length allows) and 1 .. 8192 rows (several runs of partial sums of dweight and
 * dbias), a normalized_shape of two dims, non-contiguous inputs, weights and output gradients,
 * eps, constant rows, rows far from zero and rows whose sums overflow float; tolerances from the
 * arithmetic (unit roundoff times the operations an element goes through, and the double sums'
 * growth); the autograd node; results independent of the thread count; no tensor of the input's
 * size kept for backward (memory statistics); float16 and bfloat16 through the float32 kernels on
 * the CPU (casts around them: the output and gradients rounded once to the half dtype), through
 * CUDA's half kernels as they are (float math, rounded once: the same bounds); the composition
 * where the kernels decline (mixed dtypes) and under autocast; an input modified in place after
 * the forward. */
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
static uint64_t lcg = 0x9E3779B97F4A7C15ULL;
static double uniform(double lo, double hi) {
    lcg = lcg * 6364136223846793005ULL + 1442695040888963407ULL;
    return lo + (hi - lo) * (double)(lcg >> 11) / 9007199254740992.0;
}

typedef enum { X_RANDOM, X_CONSTANT_ROWS, X_FAR, X_TINY_VAR, X_HUGE } x_kind;

typedef struct ln_case {
    int64_t rows, cols;
    int nnorm;    /* normalized_shape's dims: 1 ([cols]) or 2 ([2, cols / 2]) */
    bool w, b;    /* affine parameters present (and requiring grad) */
    double eps;   /* 0: the default 1e-5 */
    x_kind xk;    /* the input's values */
    bool strided; /* x, weight and dy non-contiguous */
    bool x_grad;  /* x requires grad */
} ln_case;

/* host data, in double, already rounded to the tensors' dtype */
typedef struct ln_data {
    int64_t rows, cols;
    double *x, *w, *b, *dy;
} ln_data;

static ln_data make_data(const ln_case *c, ts_dtype dt) {
    const int64_t R = c->rows, C = c->cols;
    ln_data d = {R,
                 C,
                 malloc(sizeof(double) * R * C),
                 malloc(sizeof(double) * C),
                 malloc(sizeof(double) * C),
                 malloc(sizeof(double) * R * C)};
    for (int64_t i = 0; i < R; i++) {
        const double off = c->xk == X_FAR ? 100.0 * (double)(i % 5 + 1) : uniform(-0.5, 0.5);
        const double k = uniform(0.25, 3.0);
        for (int64_t j = 0; j < C; j++) {
            double v = off + k * uniform(-1, 1);
            if (c->xk == X_CONSTANT_ROWS && i % 2 == 0) v = off;
            if (c->xk == X_TINY_VAR) v = 0.75 + 1e-3 * uniform(-1, 1);
            if (c->xk == X_HUGE) v = 3e37 * uniform(0.5, 1); /* sums overflow float */
            d.x[i * C + j] = ts_test_round_to(dt, v);
            d.dy[i * C + j] = ts_test_round_to(dt, uniform(-1, 1));
        }
    }
    for (int64_t j = 0; j < C; j++) {
        d.w[j] = ts_test_round_to(dt, (j % 3 ? 1 : -1) * uniform(0.5, 1.5));
        d.b[j] = ts_test_round_to(dt, uniform(-1, 1));
    }
    return d;
}

static void free_data(ln_data *d) { free(d->x), free(d->w), free(d->b), free(d->dy); }

/* ------------------------------------------------------------------ the reference */
/* Results in long double and, per element, the tolerance: `u` is the dtype's unit roundoff, `ud`
 * double's (the kernels' sums). The forward rounds mean and rstd to the dtype and makes ~5
 * roundings per element; dx ~10; the sums of dx's means add their terms in double over 16 lanes
 * (cols / 16 + 4 additions per lane and tree); dweight and dbias add theirs in the dtype over
 * runs of up to 32 rows, and those run sums in double. */
typedef struct ln_ref {
    double *y, *dx, *dw, *db;
    double *ty, *tdx, *tdw, *tdb;
} ln_ref;

static ln_ref reference(const ln_data *d, bool has_w, bool has_b, double eps, ts_dtype dt) {
    const int64_t R = d->rows, C = d->cols;
    const double u = dt == TS_F32 ? ldexp(1, -24) : ldexp(1, -53), ud = ldexp(1, -53);
    ln_ref r = {calloc(R * C, sizeof(double)), calloc(R * C, sizeof(double)),
                calloc(C, sizeof(double)),     calloc(C, sizeof(double)),
                calloc(R * C, sizeof(double)), calloc(R * C, sizeof(double)),
                calloc(C, sizeof(double)),     calloc(C, sizeof(double))};
    long double *dw = calloc(C, sizeof(long double)), *db = calloc(C, sizeof(long double));
    double *sw = calloc(C, sizeof(double)), *sb = calloc(C, sizeof(double));
    const double row_growth = (double)C / 16 + 8;
    const double sub = R < 32 ? (double)R : 32; /* rows summed in the dtype before double */
    for (int64_t i = 0; i < R; i++) {
        const double *x = d->x + i * C, *dy = d->dy + i * C;
        long double m = 0, v = 0, A = 0;
        for (int64_t j = 0; j < C; j++) m += x[j], A += fabs(x[j]);
        m /= C, A /= C;
        for (int64_t j = 0; j < C; j++) v += (x[j] - m) * (x[j] - m);
        v /= C;
        const long double rs = 1 / sqrtl(v + eps);
        long double c1 = 0, c2 = 0, G1 = 0, G2 = 0;
        for (int64_t j = 0; j < C; j++) {
            const long double xh = (x[j] - m) * rs, w = has_w ? d->w[j] : 1;
            const long double g = dy[j] * w;
            const double xerr = (double)((fabsl(xh) + (fabs(x[j]) + fabsl(m) + A) * rs));
            c1 += g, c2 += g * xh;
            G1 += fabsl(g), G2 += fabsl(g) * xerr;
            r.y[i * C + j] = (double)(xh * w + (has_b ? d->b[j] : 0));
            r.ty[i * C + j] = (8 * u + 2 * row_growth * ud) *
                              ((double)((fabs(x[j]) + fabsl(m) + A) * rs) * fabs((double)w) +
                               (has_b ? fabs(d->b[j]) : 0));
            dw[j] += dy[j] * xh, db[j] += dy[j];
            sw[j] += fabs(dy[j]) * xerr, sb[j] += fabs(dy[j]);
        }
        c1 /= C, c2 /= C, G1 /= C, G2 /= C;
        for (int64_t j = 0; j < C; j++) {
            const long double xh = (x[j] - m) * rs, w = has_w ? d->w[j] : 1;
            const long double g = dy[j] * w;
            const double xerr = (double)((fabsl(xh) + (fabs(x[j]) + fabsl(m) + A) * rs));
            r.dx[i * C + j] = (double)(rs * (g - c1 - xh * c2));
            r.tdx[i * C + j] =
                (16 * u + 4 * row_growth * ud) * (double)(rs * (fabsl(g) + G1 + xerr * G2));
        }
    }
    for (int64_t j = 0; j < C; j++) {
        r.dw[j] = (double)dw[j], r.db[j] = (double)db[j];
        r.tdw[j] = ((8 + 2 * sub) * u + 2 * ((double)R + row_growth + 72) * ud) * sw[j];
        r.tdb[j] = ((2 + 2 * sub) * u + 2 * ((double)R + 72) * ud) * sb[j];
    }
    free(dw), free(db), free(sw), free(sb);
    return r;
}

static void free_ref(ln_ref *r) {
    free(r->y), free(r->dx), free(r->dw), free(r->db);
    free(r->ty), free(r->tdx), free(r->tdw), free(r->tdb);
}

/* ------------------------------------------------------------------ the cases */
/* x as a tensor of the case's layout: [rows, cols] (a transposed [cols, rows] when strided) or
 * [rows, 2, cols / 2] for a 2-dim normalized_shape. */
static ts_tensor *make_x(const ln_case *c, const double *x, ts_dtype dt, ts_device dev) {
    const int64_t R = c->rows, C = c->cols;
    ts_opts o = {.dtype = dt, .device = dev};
    ts_tensor *t;
    if (c->strided) {
        double *xt = malloc(sizeof(double) * R * C);
        for (int64_t i = 0; i < R; i++)
            for (int64_t j = 0; j < C; j++) xt[j * R + i] = x[i * C + j];
        t = ts_detach(ts_transpose(ts_tensor_f64(TS_SHAPE(C, R), xt, o), 0, 1));
        free(xt);
    } else if (c->nnorm == 2) {
        t = ts_tensor_f64(TS_SHAPE(R, 2, C / 2), x, o);
    } else {
        t = ts_tensor_f64(TS_SHAPE(R, C), x, o);
    }
    if (c->x_grad) ts_set_requires_grad(t, true);
    return t;
}

/* weight or bias: [cols] or [2, cols / 2]; strided: every other element of a [2 cols] tensor */
static ts_tensor *make_param(const ln_case *c, const double *p, ts_dtype dt, ts_device dev) {
    ts_opts o = {.dtype = dt, .device = dev};
    ts_tensor *t;
    if (c->strided) {
        double *p2 = malloc(sizeof(double) * 2 * c->cols);
        for (int64_t j = 0; j < c->cols; j++) p2[2 * j] = p[j], p2[2 * j + 1] = 1e30;
        t = ts_detach(ts_select(ts_tensor_f64(TS_SHAPE(c->cols, 2), p2, o), 1, 0));
        free(p2);
    } else {
        t = ts_tensor_f64(c->nnorm == 2 ? TS_SHAPE(2, c->cols / 2) : TS_SHAPE(c->cols), p, o);
    }
    ts_set_requires_grad(t, true);
    return t;
}

static void run_case(const ln_case *c, ts_dtype dt, ts_device dev) {
    /* 3e37 is no float16 (bfloat16 has float's range) */
    if (dt == TS_F16 && c->xk == X_HUGE) return;
    static const char *kinds[] = {"random", "constant rows", "far from 0", "tiny variance", "huge"};
    char label[200];
    snprintf(label, sizeof label, "[%lld x %lld%s%s%s%s, eps %g, %s, %s, %s]", (long long)c->rows,
             (long long)c->cols, c->nnorm == 2 ? ", 2-dim shape" : "", c->w ? ", weight" : "",
             c->b ? ", bias" : "", c->strided ? ", strided" : "", c->eps, kinds[c->xk],
             ts_dtype_name(dt), ts_device_str(dev));
    ln_data d = make_data(c, dt);
    const double eps = c->eps ? c->eps : 1e-5;
    ln_ref r = reference(&d, c->w, c->b, eps, ts_test_is_half(dt) ? TS_F32 : dt);
    const int64_t n = c->rows * c->cols;
    ts_test_widen_for_half(dt, r.y, r.ty, n);
    ts_test_widen_for_half(dt, r.dx, r.tdx, n);
    ts_test_widen_for_half(dt, r.dw, r.tdw, c->cols);
    ts_test_widen_for_half(dt, r.db, r.tdb, c->cols);
    ts_scope_begin();
    ts_tensor *x = make_x(c, d.x, dt, dev);
    ts_tensor *w = c->w ? make_param(c, d.w, dt, dev) : NULL;
    ts_tensor *b = c->b ? make_param(c, d.b, dt, dev) : NULL;
    ts_shape ns = c->nnorm == 2 ? TS_SHAPE(2, c->cols / 2) : TS_SHAPE(c->cols);
    ts_tensor *y = ts_layer_norm(x, ns, w, b, c->eps);
    CHECK_OK();
    CHECK_TOL(label, "y", y, r.y, r.ty, n);
    CHECK(y && ts_dtype_of(y) == dt && ts_shape_of(y).ndim == ts_shape_of(x).ndim);
    const char *name = y ? ts_grad_fn_name(y) : NULL;
    if (c->x_grad || c->w || c->b) {
        /* a half input on the CPU: the float32 kernels' node under the cast back; CUDA's
         * kernels take the halves as they are */
        if (ts_test_is_half(dt) && dev.type != TS_CUDA) {
            CHECK_STREQ(name, "ToCopyBackward0");
            CHECK_STREQ(ts_test_inner_fn_name(y), "NativeLayerNormBackward0");
        } else {
            CHECK_STREQ(name, "NativeLayerNormBackward0");
        }
        /* the output gradient, strided when the case is */
        ts_tensor *dy =
            ts_tensor_f64(TS_SHAPE(c->rows, c->cols), d.dy, (ts_opts){.dtype = dt, .device = dev});
        if (c->strided) dy = ts_transpose(ts_contiguous(ts_transpose(dy, 0, 1)), 0, 1);
        ts_backward_with(y, ts_reshape(dy, ts_shape_of(y)));
        CHECK_OK();
        if (c->x_grad) CHECK_TOL(label, "dx", ts_grad(x), r.dx, r.tdx, n);
        if (c->w) CHECK_TOL(label, "dweight", ts_grad(w), r.dw, r.tdw, c->cols);
        if (c->b) CHECK_TOL(label, "dbias", ts_grad(b), r.db, r.tdb, c->cols);
    } else {
        CHECK(name == NULL);
    }
    ts_scope_end();
    free_ref(&r);
    free_data(&d);
}

static void test_against_reference(void) {
    /* CUDA: a warp per row up to 1024, a block beyond; 16-byte vectors where the row length is a
     * multiple of them (64, 768, 1024, 4096: every dtype), element by element otherwise */
    static const int64_t cols[] = {1, 3, 7, 17, 64, 256, 768, 1024, 1025, 4096, 4099};
    enum { NCOLS = sizeof cols / sizeof cols[0] };
    static const int64_t rows[] = {1, 7, 300};
    /* the halves (on the CPU through the float32 kernels), with and without weight and bias */
    static const ts_dtype dts[] = {TS_F32, TS_F64, TS_F16, TS_BF16};
    for (int di = 0; di < ndev; di++)
        for (int k = 0; k < 4; k++) {
            /* every shape with weight and bias */
            for (int ci = 0; ci < NCOLS; ci++)
                for (int ri = 0; ri < 3; ri++) {
                    ln_case c = {rows[ri], cols[ci], 1, true, true, 0, X_RANDOM, false, true};
                    run_case(&c, dts[k], devs[di]);
                }
            /* the affine variants, layouts and values on a few shapes */
            const ln_case more[] = {
                {7, 17, 1, false, false, 0, X_RANDOM, false, true},
                {300, 256, 1, true, false, 0, X_RANDOM, false, true},
                {7, 1024, 1, false, true, 0, X_RANDOM, false, true},
                {300, 33, 1, false, false, 1e-3, X_RANDOM, false, true},
                {7, 4099, 1, true, true, 0, X_RANDOM, true, true},   /* strided */
                {300, 17, 1, true, true, 0.5, X_RANDOM, true, true}, /* strided, large eps */
                {7, 24, 2, true, true, 0, X_RANDOM, false, true},    /* normalized_shape [2, 12] */
                {300, 1024, 2, true, false, 0, X_RANDOM, false, true},
                {7, 1, 1, true, true, 0, X_RANDOM, false, true},
                {8, 100, 1, true, true, 0, X_CONSTANT_ROWS, false, true},
                {8, 1025, 1, true, true, 0, X_FAR, false, true},
                {5, 64, 1, true, true, 1e-3, X_TINY_VAR, false, true}, /* eps matters */
                {5, 64, 1, true, true, 1e-8, X_TINY_VAR, false, true},
                {4, 1024, 1, true, true, 0, X_HUGE, false, true},
                {40, 100, 1, true, true, 0, X_RANDOM, false, false},   /* only the parameters */
                {40, 100, 1, false, false, 0, X_RANDOM, false, false}, /* no graph at all */
                /* many rows: dweight and dbias from many runs of partial sums (CUDA: ceil(rows /
                 * 64) runs, up to 128 here; runs of 60 and 61 rows for 1030) */
                {8192, 64, 1, true, true, 0, X_RANDOM, false, true},
                {8192, 1, 1, true, true, 0, X_RANDOM, false, true},
                {2048, 768, 1, true, true, 0, X_RANDOM, false, true},
                {1030, 1025, 1, true, true, 0, X_RANDOM, false, true},
                {600, 2048, 1, false, true, 0, X_RANDOM, false, true},  /* dbias without dweight */
                {600, 2048, 1, true, false, 0, X_RANDOM, false, false}, /* dweight alone */
                {65, 8195, 1, true, true, 0, X_RANDOM, false, true},
                {4, 4096, 1, true, true, 0, X_HUGE, false, true}, /* block rows, vectors */
            };
            for (size_t i = 0; i < sizeof more / sizeof more[0]; i++)
                run_case(&more[i], dts[k], devs[di]);
        }
}

/* ------------------------------------------------------------------ threads */
/* The same bits with 1, 2 and 3 threads: rows are independent, and dweight / dbias sum their rows
 * in blocks fixed by the shape. In float64 too, where a different order of the double sums shows
 * in the last bits (float32 would round most such differences away). */
static void test_thread_independence(void) {
    enum { R = 300, C = 1024 };
    static double res[3][4][R * C];
    const int saved = ts_get_num_threads();
    for (int k = 0; k < 2; k++) {
        const ts_dtype dt = k ? TS_F64 : TS_F32;
        const size_t es = k ? sizeof(double) : sizeof(float);
        ts_scope_begin();
        ts_manual_seed(5);
        ts_opts o = {.dtype = dt, .requires_grad = true};
        ts_tensor *x = ts_randn(TS_SHAPE(R, C), o), *w = ts_randn(TS_SHAPE(C), o);
        ts_tensor *b = ts_randn(TS_SHAPE(C), o),
                  *g = ts_randn(TS_SHAPE(R, C), (ts_opts){.dtype = dt});
        for (int t = 0; t < 3; t++) {
            ts_set_num_threads(t + 1);
            ts_tensor *y = ts_layer_norm(x, TS_SHAPE(C), w, b, 0);
            ts_backward_with(y, g);
            ts_tensor *out[4] = {y, ts_grad(x), ts_grad(w), ts_grad(b)};
            for (int i = 0; i < 4; i++)
                CHECK(out[i] && ts_copy_to_host(out[i], res[t][i], ts_nbytes(out[i])) == TS_OK);
            ts_set_grad(x, NULL), ts_set_grad(w, NULL), ts_set_grad(b, NULL);
        }
        for (int t = 1; t < 3; t++)
            for (int i = 0; i < 4; i++)
                CHECK(!memcmp(res[0][i], res[t][i], (size_t)(i < 2 ? R * C : C) * es));
        ts_scope_end();
    }
    ts_set_num_threads(saved);
}

/* ------------------------------------------------------------------ vector ISAs */
static ts_kview kv(void *p, ts_dtype dt, int64_t d0, int64_t d1) {
    ts_kview v = {.data = p, .dtype = dt, .ndim = 2, .shape = {d0, d1}, .strides = {d1, 1}};
    return v;
}

/* Every vector ISA this CPU has gives the portable variant's bits, forward and backward (no FMA
 * contraction; sums in 16 logical lanes whatever the vector width), on rows with and without a
 * partial last vector. */
static void test_isa_variants(void) {
    static const int64_t shapes[][2] = {{37, 4099}, {70, 17}, {5, 1}, {3, 48}};
    const ts_backend *be = tsi_backend_for(TS_CPU);
    for (int k = 0; k < 2; k++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            const ts_dtype dt = k ? TS_F64 : TS_F32;
            const size_t es = k ? sizeof(double) : sizeof(float);
            const int64_t R = shapes[s][0], C = shapes[s][1];
            char *in = malloc(es * (2 * R * C + 2 * C)), *out[TS_ISA_COUNT];
            const size_t out_bytes = es * (2 * R * C + 2 * R + 2 * C);
            for (int64_t i = 0; i < 2 * R * C + 2 * C; i++) {
                const double v = uniform(-2, 2) + (i % 7 == 0 ? 30 : 0);
                if (k)
                    memcpy(in + i * es, &v, es);
                else {
                    const float f = (float)v;
                    memcpy(in + i * es, &f, es);
                }
            }
            ts_layer_norm_args a = {.rows = R, .cols = C, .eps = 1e-5};
            a.x = kv(in, dt, R, C), a.dy = kv(in + es * R * C, dt, R, C);
            a.weight = kv(in + es * 2 * R * C, dt, 1, C);
            a.bias = kv(in + es * (2 * R * C + C), dt, 1, C);
            for (int isa = 0; isa < TS_ISA_COUNT; isa++) {
                char *o = out[isa] = calloc(1, out_bytes);
                a.y = kv(o, dt, R, C), a.dx = kv(o + es * R * C, dt, R, C);
                a.mean = kv(o + es * 2 * R * C, dt, 1, R);
                a.rstd = kv(o + es * (2 * R * C + R), dt, 1, R);
                a.dweight = kv(o + es * (2 * R * C + 2 * R), dt, 1, C);
                a.dbias = kv(o + es * (2 * R * C + 2 * R + C), dt, 1, C);
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
                        ts_test_failf(__FILE__, __LINE__,
                                      "%s [%lld x %lld]: isa %s differs from "
                                      "generic",
                                      ts_dtype_name(dt), (long long)R, (long long)C,
                                      tsi_cpu_isa_name((ts_cpu_isa)isa));
                }
            }
            for (int isa = 0; isa < TS_ISA_COUNT; isa++) free(out[isa]);
            free(in);
        }
}

/* ------------------------------------------------------------------ memory */
/* Forward and backward on [64, 1024] float32: beyond the output, the three gradients and O(rows)
 * statistics, the extra peak stays under a quarter of the input's size (the partial sums of the
 * weight's and bias's gradients take 3/16 of it, 48 KiB here): nothing of the input's size is saved
 * or made in between. The composition keeps several such tensors (about 3 inputs' worth more). */
static void test_memory(void) {
    const int64_t R = 64, C = 1024;
    ts_scope_begin();
    ts_manual_seed(6);
    ts_tensor *x = ts_randn(TS_SHAPE(R, C), (ts_opts){.requires_grad = true});
    ts_tensor *w = ts_randn(TS_SHAPE(C), (ts_opts){.requires_grad = true});
    ts_tensor *b = ts_randn(TS_SHAPE(C), (ts_opts){.requires_grad = true});
    ts_tensor *g = ts_randn(TS_SHAPE(R, C), (ts_opts){0});
    ts_mem_stats before, after;
    CHECK(ts_memory_stats(ts_cpu(), &before) == TS_OK);
    CHECK(ts_memory_reset_peak(ts_cpu()) == TS_OK);
    ts_tensor *y = ts_layer_norm(x, TS_SHAPE(C), w, b, 0);
    ts_backward_with(y, g);
    CHECK_OK();
    CHECK(ts_memory_stats(ts_cpu(), &after) == TS_OK);
    const double full = (double)(R * C * 4), vec = (double)(C * 4);
    const double extra = (double)after.peak_allocated - (double)before.allocated;
    /* y and dx; dweight and dbias; mean and rstd; each allocation rounded up to 512 bytes */
    const double need = 2 * full + 2 * vec + 2 * (double)(R * 4) + 8 * 512;
    const double limit = need + full / 4;
    printf("layer_norm [64, 1024] forward + backward: %.0f KiB extra peak (outputs and gradients "
           "%.0f KiB, limit %.0f KiB)\n",
           extra / 1024, need / 1024, limit / 1024);
    CHECK(extra <= limit);
    CHECK(ts_grad(x) && ts_grad(w) && ts_grad(b));
    ts_scope_end();
}

/* ------------------------------------------------------------------ the composition's cases */
/* Where the kernels decline (parameters of another dtype than the input's) the composition runs;
 * under the cpu's autocast the op runs in float32, through the kernels, and rounds to bf16. */
static void test_fallbacks(void) {
    ts_scope_begin();
    ts_manual_seed(7);
    ts_tensor *x = ts_randn(TS_SHAPE(6, 40), (ts_opts){0});
    ts_tensor *w = ts_randn(TS_SHAPE(40), (ts_opts){0}), *b = ts_randn(TS_SHAPE(40), (ts_opts){0});
    ts_tensor *want = ts_layer_norm(ts_to_dtype(x, TS_F64), TS_SHAPE(40), ts_to_dtype(w, TS_F64),
                                    ts_to_dtype(b, TS_F64), 0);
    const double big = ts_item(ts_max(ts_abs(want)));

    /* a float16 input with float32 parameters: the composition's promotion, then a cast back to
     * float16 (only parameters of the input's dtype take the float32 kernels) */
    ts_tensor *xh = ts_to_dtype(x, TS_F16);
    ts_set_requires_grad(xh, true);
    ts_tensor *yh = ts_layer_norm(xh, TS_SHAPE(40), w, b, 0);
    CHECK_OK();
    CHECK(yh && ts_dtype_of(yh) == TS_F16);
    CHECK(yh && strcmp(ts_grad_fn_name(yh), "NativeLayerNormBackward0") != 0);
    CHECK(yh && ts_test_inner_fn_name(yh) &&
          strcmp(ts_test_inner_fn_name(yh), "NativeLayerNormBackward0") != 0);
    CHECK(yh && ts_item(ts_max(ts_abs(ts_sub(ts_to_dtype(yh, TS_F64), want)))) < 1e-2 * big);

    ts_tensor *xm = ts_detach(x);
    ts_set_requires_grad(xm, true);
    ts_tensor *ym = ts_layer_norm(xm, TS_SHAPE(40), ts_to_dtype(w, TS_F64), b, 0);
    CHECK_OK();
    CHECK(ym && ts_dtype_of(ym) == TS_F32);
    CHECK(ym && strcmp(ts_grad_fn_name(ym), "NativeLayerNormBackward0") != 0);
    CHECK(ym && ts_item(ts_max(ts_abs(ts_sub(ts_to_dtype(ym, TS_F64), want)))) < 1e-5 * big);

    ts_tensor *xb = ts_to_dtype(x, TS_BF16);
    ts_set_requires_grad(xb, true);
    ts_autocast_begin(TS_CPU, TS_BF16); /* the CPU's lists: float32 inside, bf16 out */
    ts_tensor *ya = ts_layer_norm(xb, TS_SHAPE(40), w, b, 0);
    ts_autocast_end();
    CHECK_OK();
    CHECK(ya && ts_dtype_of(ya) == TS_BF16);
    CHECK_STREQ(ya ? ts_test_inner_fn_name(ya) : NULL, "NativeLayerNormBackward0");
    ts_scope_end();
}

/* The node keeps the input: modifying it in place after the forward makes backward refuse. */
static void test_inplace_after_forward(void) {
    ts_scope_begin();
    ts_tensor *leaf = ts_randn(TS_SHAPE(3, 8), (ts_opts){.requires_grad = true});
    ts_tensor *x = ts_mul_scalar(leaf, 2.0);
    ts_tensor *y = ts_layer_norm(x, TS_SHAPE(8), NULL, NULL, 0);
    ts_add_scalar_(x, 1.0);
    ts_backward_with(y, ts_ones_like(y));
    CHECK(strstr(ts_error_message(), "modified by an inplace operation"));
    CHECK_ERR(TS_ERR_STATE);
    ts_scope_end();
}

/* The LayerNorm module: its default eps is PyTorch's 1e-5, and its forward is the function's with
 * its own weight and bias (ones and zeros at first, then moved off them), bit for bit. */
static void test_module_defaults(void) {
    ts_scope_begin();
    ts_manual_seed(5);
    ts_module *m = ts_layer_norm_new(TS_SHAPE(33), (ts_norm_opts){0});
    ts_tensor *x = ts_add_scalar(ts_randn(TS_SHAPE(4, 33), (ts_opts){0}), 3.0);
    ts_tensor_list ps = ts_module_named_parameters(m);
    CHECK(ps.n == 2);
    if (ps.n == 2) {
        ts_no_grad_begin();
        ts_add_(ps.tensors[0], ts_rand(TS_SHAPE(33), (ts_opts){0}));
        ts_add_(ps.tensors[1], ts_rand(TS_SHAPE(33), (ts_opts){0}));
        ts_no_grad_end();
        ts_tensor *y = ts_forward(m, x);
        ts_tensor *want = ts_layer_norm(x, TS_SHAPE(33), ps.tensors[0], ps.tensors[1], 1e-5);
        ts_tensor *eps1 = ts_layer_norm(x, TS_SHAPE(33), ps.tensors[0], ps.tensors[1], 1.0);
        CHECK(y && want && ts_item(ts_max(ts_abs(ts_sub(y, want)))) == 0);
        CHECK(y && eps1 && ts_item(ts_max(ts_abs(ts_sub(y, eps1)))) > 1e-3);
    }
    ts_tensor_list_free(&ps);
    ts_module_free(m);
    CHECK_OK();
    ts_scope_end();
}
/* Under create_graph the node's backward is the composite one (public ops over statistics
 * recomputed from x, so that it can be differentiated again): in float64 its gradients equal the
 * kernels' within a few ulps, for a normalized_shape of the last dim and of the last two, with and
 * without weight and bias; and dx can be differentiated again. */
static void test_create_graph_backward(void) {
    for (int di = 0; di < ndev; di++)
        for (int k = 0; k < 4; k++) {
            ts_scope_begin();
            ts_manual_seed(40 + k);
            const bool two = k & 1, affine = k < 2;
            const ts_opts o = {.dtype = TS_F64, .device = devs[di], .requires_grad = true};
            ts_tensor *x = ts_randn(TS_SHAPE(3, 4, 5), o);
            ts_shape ns = two ? TS_SHAPE(4, 5) : TS_SHAPE(5);
            ts_tensor *w = affine ? ts_randn(ns, o) : NULL, *b = affine ? ts_randn(ns, o) : NULL;
            ts_tensor *g =
                ts_randn(TS_SHAPE(3, 4, 5), (ts_opts){.dtype = TS_F64, .device = devs[di]});
            ts_tensor *in[3] = {x, w, b}, *fused[3] = {NULL}, *comp[3] = {NULL};
            const int n = affine ? 3 : 1;
            ts_tensor *y = ts_layer_norm(x, ns, w, b, 1e-5);
            CHECK_STREQ(y ? ts_grad_fn_name(y) : NULL, "NativeLayerNormBackward0");
            CHECK_EQ(
                ts_autograd_grad(&y, &g, 1, in, n, (ts_grad_opts){.retain_graph = true}, fused),
                TS_OK);
            CHECK_EQ(ts_autograd_grad(&y, &g, 1, in, n, (ts_grad_opts){.create_graph = true}, comp),
                     TS_OK);
            for (int i = 0; i < n; i++) {
                CHECK(fused[i] && comp[i]);
                if (!fused[i] || !comp[i]) continue;
                if (i < 2) CHECK(ts_requires_grad(comp[i])); /* dbias = sum(g): no graph */
                const double scale = ts_item(ts_max(ts_abs(fused[i])));
                const double diff = ts_item(ts_max(ts_abs(ts_sub(fused[i], comp[i]))));
                if (!(diff <= 64 * 2.220446049250313e-16 * scale))
                    printf("  %s, case %d, gradient %d: %.3g against scale %.3g\n",
                           ts_device_str(devs[di]), k, i, diff, scale);
                CHECK(diff <= 64 * 2.220446049250313e-16 * scale);
            }
            /* and differentiated again: the gradient of sum(dx v) with respect to x */
            ts_tensor *v =
                ts_randn(TS_SHAPE(3, 4, 5), (ts_opts){.dtype = TS_F64, .device = devs[di]});
            ts_tensor *s = comp[0] ? ts_sum(ts_mul(comp[0], v)) : NULL, *h = NULL;
            CHECK(s && ts_autograd_grad(&s, NULL, 1, &x, 1, (ts_grad_opts){0}, &h) == TS_OK);
            CHECK(h && isfinite(ts_item(ts_sum(ts_abs(h)))));
            ts_error_clear();
            ts_scope_end();
        }
}

int main(void) {
    if (ts_test_isa_gate()) return 77;
    test_module_defaults();
    ndev = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    test_against_reference();
    test_thread_independence();
    test_isa_variants();
    test_memory();
    test_fallbacks();
    test_inplace_after_forward();
    test_create_graph_backward();
    return ts_test_finish();
}
