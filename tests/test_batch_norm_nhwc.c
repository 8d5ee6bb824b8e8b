/* test_batch_norm_nhwc.c — batch_norm's channels_last kernels (kern_batch_norm_nhwc.c: x, y, dy,
 * dx in [n, hw, c] order) and the front end that runs them on a channels_last input:
 *   - the kernels against a reference computed here in long double (f32, f64, and f16 / bf16 with
 *     float32 parameters), 1, 3, 17, 64 and 100 channels, 1, 7 and 1024 pixels, 1, 2 and 5
 *     samples, with and without weight, bias and var; tolerances from the arithmetic (as
 *     test_batch_norm.c's, the double sums taking a block's rows one after another: up to n * hw
 *     terms and the blocks' combination);
 *   - the NHWC kernels against the NCHW ones on the same data (within both bounds);
 *   - the same bits with 1 and 2 threads, and under every vector ISA the host has;
 *   - ts_batch_norm and BatchNorm2d (training and evaluation) on a channels_last input on cpu,
 *     sim and cuda:0 (cuda_batch_norm.cu's NHWC kernels: 3, 17, 64 and 1000 channels, n * hw
 *     from 2 to 10^6): a channels_last output, output, gradients and running statistics within
 *     the reference's bounds, evaluation's bits those of the NCHW input; a NaN stays in its
 *     channel. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_kernels.h"
#include "backend/kernel_math.h"
#include "bn_ref.h"
#include "fault_sweep.h"
#include "tol_check.h"
#include "ts_test.h"

static ts_device devs[TS_TEST_MAX_DEVICES];
static int ndev;

static uint64_t lcg = 0x6A09E667F3BCC909ULL;
static double uniform(double lo, double hi) {
    lcg = lcg * 6364136223846793005ULL + 1442695040888963407ULL;
    return lo + (hi - lo) * (double)(lcg >> 11) / 9007199254740992.0;
}

/* ------------------------------------------------------------------ data and reference */
typedef struct bn_case {
    int64_t n, c, hw;
    bool weight, bias, var;
} bn_case;

/* host data in [n, c, hw] order, rounded to its dtype (x, dy: dt; the rest: pt) */
static ts_bn_data make_data(const bn_case *k, ts_dtype dt, ts_dtype pt) {
    const int64_t hw = k->hw, tot = k->n * k->c * hw;
    ts_bn_data d = {malloc(sizeof(double) * tot),  malloc(sizeof(double) * tot),
                    malloc(sizeof(double) * k->c), malloc(sizeof(double) * k->c),
                    malloc(sizeof(double) * k->c), malloc(sizeof(double) * k->c)};
    for (int64_t c = 0; c < k->c; c++) {
        /* some channels far from zero: the shifted sums' cancellation */
        const double off = c % 4 == 3 ? 20.0 * (double)(c % 7 + 1) : uniform(-0.5, 0.5);
        const double sc = uniform(0.25, 3.0);
        for (int64_t i = 0; i < k->n; i++)
            for (int64_t j = 0; j < hw; j++) {
                const int64_t at = (i * k->c + c) * hw + j;
                d.x[at] = ts_test_round_to(dt, off + sc * uniform(-1, 1));
                d.dy[at] = ts_test_round_to(dt, uniform(-1, 1));
            }
        d.w[c] = ts_test_round_to(pt, uniform(0.5, 2));
        d.b[c] = ts_test_round_to(pt, uniform(-1, 1));
        d.rm[c] = ts_test_round_to(pt, uniform(-1, 1));
        d.rv[c] = ts_test_round_to(pt, uniform(0.5, 2));
    }
    return d;
}

/* bn_ref.h's reference: a channel's double sums take up to growth terms one after another (a
 * block's rows, then the blocks: at most 32; the NCHW kernels' 16 lanes of n * ceil(hw / 16) and
 * their tree stay under it too). */
static ts_bn_ref reference(const bn_case *k, const ts_bn_data *d, ts_dtype dt, double eps,
                           double mom) {
    return ts_bn_reference(d, k->n, k->c, k->hw, k->weight, k->bias, eps, mom,
                           (double)(k->n * k->hw) + 32 + 8, dt);
}

/* The float32 bounds of a half run widened by the rounding of its half outputs */
static ts_bn_ref reference_for(const bn_case *k, const ts_bn_data *d, ts_dtype dt, double eps,
                               double mom) {
    ts_bn_ref r = reference(k, d, ts_test_is_half(dt) ? TS_F32 : dt, eps, mom);
    if (ts_test_is_half(dt)) {
        const int64_t tot = k->n * k->c * k->hw;
        ts_test_widen_for_half(dt, r.y, r.ty, tot);
        ts_test_widen_for_half(dt, r.dx, r.tdx, tot);
    }
    return r;
}

/* ------------------------------------------------------------------ the kernels, directly */
static size_t dsize(ts_dtype dt) { return dt == TS_F64 ? 8 : dt == TS_F32 ? 4 : 2; }

static void put(void *p, ts_dtype dt, int64_t i, double v) {
    if (dt == TS_F64)
        ((double *)p)[i] = v;
    else if (dt == TS_F32)
        ((float *)p)[i] = (float)v;
    else if (dt == TS_BF16)
        ((uint16_t *)p)[i] = ts_f32_to_bf16((float)v);
    else
        ((uint16_t *)p)[i] = ts_f32_to_f16((float)v);
}

static double get(const void *p, ts_dtype dt, int64_t i) {
    if (dt == TS_F64) return ((const double *)p)[i];
    if (dt == TS_F32) return ((const float *)p)[i];
    if (dt == TS_BF16) return ts_bf16_to_f32(((const uint16_t *)p)[i]);
    return ts_f16_to_f32(((const uint16_t *)p)[i]);
}

/* [n, c, hw] index i at its place in the layout */
static int64_t place(const bn_case *k, bool nhwc, int64_t i) {
    if (!nhwc) return i;
    const int64_t j = i % k->hw, c = i / k->hw % k->c, s = i / (k->hw * k->c);
    return (s * k->hw + j) * k->c + c;
}

/* One run of the kernels (forward, then backward), its outputs in [n, c, hw] order */
typedef struct bn_out {
    char *mem; /* the raw outputs, for comparing bits */
    size_t bytes;
    double *y, *dx, *mean, *inv, *var, *dw, *db;
} bn_out;

static void free_out(bn_out *o) {
    free(o->mem), free(o->y), free(o->dx), free(o->mean), free(o->inv), free(o->var);
    free(o->dw), free(o->db);
}

static bool run_kernels(const bn_case *k, const ts_bn_data *d, ts_dtype dt, bool nhwc, int isa,
                        bn_out *o) {
    const ts_dtype pt = ts_test_is_half(dt) ? TS_F32 : dt;
    const int64_t C = k->c, tot = k->n * C * k->hw;
    const size_t es = dsize(dt), ps = dsize(pt);
    char *in = malloc(2 * tot * es + 2 * C * ps);
    o->bytes = 2 * tot * es + 5 * C * ps;
    o->mem = calloc(1, o->bytes);
    for (int64_t i = 0; i < tot; i++) {
        put(in, dt, place(k, nhwc, i), d->x[i]);
        put(in + tot * es, dt, place(k, nhwc, i), d->dy[i]);
    }
    for (int64_t c = 0; c < C; c++) {
        put(in + 2 * tot * es, pt, c, d->w[c]);
        put(in + 2 * tot * es + C * ps, pt, c, d->b[c]);
    }
    ts_batch_norm_args a = {.n = k->n, .c = C, .hw = k->hw, .eps = 1e-5, .channels_last = nhwc};
    a.x = (ts_kview){.data = in, .dtype = dt};
    a.dy = (ts_kview){.data = in + tot * es, .dtype = dt};
    a.weight = (ts_kview){.data = k->weight ? in + 2 * tot * es : NULL, .dtype = pt};
    a.bias = (ts_kview){.data = k->bias ? in + 2 * tot * es + C * ps : NULL, .dtype = pt};
    char *m = o->mem;
    a.y = (ts_kview){.data = m, .dtype = dt};
    a.dx = (ts_kview){.data = m + tot * es, .dtype = dt};
    char *st = m + 2 * tot * es;
    a.mean = (ts_kview){.data = st, .dtype = pt};
    a.invstd = (ts_kview){.data = st + C * ps, .dtype = pt};
    a.var = (ts_kview){.data = k->var ? st + 2 * C * ps : NULL, .dtype = pt};
    a.dweight = (ts_kview){.data = k->weight ? st + 3 * C * ps : NULL, .dtype = pt};
    a.dbias = (ts_kview){.data = k->bias ? st + 4 * C * ps : NULL, .dtype = pt};
    const bool ok = tsi_cpu_batch_norm_isa((ts_cpu_isa)isa, &a, false) &&
                    tsi_cpu_batch_norm_isa((ts_cpu_isa)isa, &a, true);
    free(in);
    if (!ok) {
        free(o->mem), o->mem = NULL;
        return false;
    }
    o->y = malloc(sizeof(double) * tot), o->dx = malloc(sizeof(double) * tot);
    for (int64_t i = 0; i < tot; i++) {
        o->y[i] = get(m, dt, place(k, nhwc, i));
        o->dx[i] = get(m + tot * es, dt, place(k, nhwc, i));
    }
    double **per[] = {&o->mean, &o->inv, &o->var, &o->dw, &o->db};
    for (int s = 0; s < 5; s++) {
        *per[s] = malloc(sizeof(double) * C);
        for (int64_t c = 0; c < C; c++) (*per[s])[c] = get(st + s * C * ps, pt, c);
    }
    return true;
}

/* got within tol of want (scale: the tolerance's multiple), the worst element reported */
static void check_near(const char *label, const char *what, const double *got, const double *want,
                       const double *tol, double scale, int64_t n) {
    int64_t bad = -1;
    for (int64_t i = 0; i < n && bad < 0; i++)
        if (!ts_test_near(got[i], want[i], scale * tol[i])) bad = i;
    ts_test_record(bad < 0);
    if (bad >= 0)
        ts_test_failf(__FILE__, __LINE__, "%s %s[%lld]: got %.17g, want %.17g (tolerance %.3g)",
                      label, what, (long long)bad, got[bad], want[bad], scale * tol[bad]);
}

static void kernel_case(const bn_case *k, ts_dtype dt) {
    char label[160];
    snprintf(label, sizeof label, "kernels [%lld, %lld, %lld]%s%s%s %s", (long long)k->n,
             (long long)k->c, (long long)k->hw, k->weight ? " weight" : "", k->bias ? " bias" : "",
             k->var ? " var" : "", ts_dtype_name(dt));
    const ts_dtype pt = ts_test_is_half(dt) ? TS_F32 : dt;
    ts_bn_data d = make_data(k, dt, pt);
    ts_bn_ref r = reference_for(k, &d, dt, 1e-5, 0.1);
    const int64_t tot = k->n * k->c * k->hw, C = k->c;
    bn_out g, nchw;
    CHECK(run_kernels(k, &d, dt, true, TS_ISA_GENERIC, &g));
    CHECK(run_kernels(k, &d, dt, false, TS_ISA_GENERIC, &nchw));
    /* the reference */
    check_near(label, "y", g.y, r.y, r.ty, 1, tot);
    check_near(label, "dx", g.dx, r.dx, r.tdx, 1, tot);
    check_near(label, "mean", g.mean, r.mean, r.tmean, 1, C);
    check_near(label, "invstd", g.inv, r.inv, r.tinv, 1, C);
    if (k->var) check_near(label, "var", g.var, r.var, r.tvar, 1, C);
    if (k->weight) check_near(label, "dweight", g.dw, r.dw, r.tdw, 1, C);
    if (k->bias) check_near(label, "dbias", g.db, r.db, r.tdb, 1, C);
    /* the NCHW kernels: each within the bound of the reference, so within twice of each other */
    check_near(label, "y vs NCHW", g.y, nchw.y, r.ty, 2, tot);
    check_near(label, "dx vs NCHW", g.dx, nchw.dx, r.tdx, 2, tot);
    check_near(label, "mean vs NCHW", g.mean, nchw.mean, r.tmean, 2, C);
    check_near(label, "invstd vs NCHW", g.inv, nchw.inv, r.tinv, 2, C);
    if (k->weight) check_near(label, "dweight vs NCHW", g.dw, nchw.dw, r.tdw, 2, C);
    if (k->bias) check_near(label, "dbias vs NCHW", g.db, nchw.db, r.tdb, 2, C);
    /* every vector ISA: the portable variant's bits */
    for (int isa = 1; isa < TS_ISA_COUNT; isa++) {
        bn_out v;
        if (!run_kernels(k, &d, dt, true, isa, &v)) continue;
        const bool same = !memcmp(v.mem, g.mem, g.bytes);
        ts_test_record(same);
        if (!same)
            ts_test_failf(__FILE__, __LINE__, "%s: isa %s differs from generic", label,
                          tsi_cpu_isa_name((ts_cpu_isa)isa));
        free_out(&v);
    }
    free_out(&g), free_out(&nchw);
    ts_bn_ref_free(&r);
    ts_bn_data_free(&d);
}

static void test_kernels(void) {
    static const ts_dtype dts[] = {TS_F32, TS_F64, TS_BF16, TS_F16};
    static const int64_t cs[] = {1, 3, 17, 64, 100}, hws[] = {1, 7, 1024}, ns[] = {1, 2, 5};
    int flags = 0;
    for (int t = 0; t < 4; t++)
        for (int ci = 0; ci < 5; ci++)
            for (int hi = 0; hi < 3; hi++)
                for (int ni = 0; ni < 3; ni++) {
                    if (ns[ni] * hws[hi] < 2) continue;
                    /* weight, bias and var each present in half the cases, in every mix */
                    flags++;
                    const bn_case k = {ns[ni], cs[ci], hws[hi], flags & 1, flags & 2, flags & 4};
                    kernel_case(&k, dts[t]);
                }
    /* more channels than a tile takes (the half rows converted a channel range at a time) */
    for (int t = 0; t < 4; t++) kernel_case(&(bn_case){3, 300, 7, true, true, true}, dts[t]);
}

/* 1 and 2 threads: the same bits (the blocks are the shape's, not the threads') */
static void test_threads(void) {
    static const bn_case cases[] = {{5, 64, 1024, true, true, true},
                                    {3, 100, 49, true, false, true}};
    static const ts_dtype dts[] = {TS_F32, TS_F64, TS_BF16};
    const int saved = ts_get_num_threads();
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (int t = 0; t < 3; t++) {
            ts_bn_data d = make_data(&cases[i], dts[t], ts_test_is_half(dts[t]) ? TS_F32 : dts[t]);
            bn_out o[2];
            for (int th = 0; th < 2; th++) {
                ts_set_num_threads(th + 1);
                CHECK(run_kernels(&cases[i], &d, dts[t], true, (int)ts_cpu_isa_get(), &o[th]));
            }
            const bool same = o[0].mem && o[1].mem && !memcmp(o[0].mem, o[1].mem, o[0].bytes);
            ts_test_record(same);
            if (!same)
                ts_test_failf(__FILE__, __LINE__, "[%lld, %lld, %lld] %s: 1 and 2 threads differ",
                              (long long)cases[i].n, (long long)cases[i].c, (long long)cases[i].hw,
                              ts_dtype_name(dts[t]));
            free_out(&o[0]), free_out(&o[1]);
            ts_bn_data_free(&d);
        }
    ts_set_num_threads(saved);
}

/* ------------------------------------------------------------------ the front end */
static ts_tensor *leaf(ts_shape s, const double *v, ts_dtype dt, ts_device dev, bool grad) {
    ts_tensor *t = ts_tensor_f64(s, v, (ts_opts){.dtype = dt, .device = dev});
    ts_set_requires_grad(t, grad);
    return t;
}

/* A channels_last leaf of [n, c, h, w] data */
static ts_tensor *leaf_cl(ts_shape s, const double *v, ts_dtype dt, ts_device dev, bool grad) {
    ts_tensor *t = ts_detach(ts_contiguous_format(leaf(s, v, dt, dev, false), TS_CHANNELS_LAST));
    ts_set_requires_grad(t, grad);
    return t;
}

static bool is_cl(ts_tensor *t) {
    return t && ts_is_contiguous_format(t, TS_CHANNELS_LAST) && !ts_is_contiguous(t);
}

static void frontend_case(int64_t n, int64_t c, int64_t h, int64_t w, ts_dtype dt, ts_device dev) {
    const ts_dtype pt = ts_test_is_half(dt) ? TS_F32 : dt;
    const bn_case k = {n, c, h * w, true, true, true};
    const int64_t tot = n * c * h * w;
    const ts_shape s = TS_SHAPE(n, c, h, w);
    char label[160];
    snprintf(label, sizeof label, "ts_batch_norm [%lld, %lld, %lld, %lld] channels_last %s %s",
             (long long)n, (long long)c, (long long)h, (long long)w, ts_dtype_name(dt),
             ts_device_str(dev));
    ts_bn_data d = make_data(&k, dt, pt);
    ts_bn_ref r = reference_for(&k, &d, dt, 1e-5, 0.1);
    ts_scope_begin();
    ts_tensor *x = leaf_cl(s, d.x, dt, dev, true);
    CHECK(is_cl(x));
    ts_tensor *wt = leaf(TS_SHAPE(c), d.w, pt, dev, true),
              *b = leaf(TS_SHAPE(c), d.b, pt, dev, true);
    ts_tensor *rm = leaf(TS_SHAPE(c), d.rm, pt, dev, false);
    ts_tensor *rv = leaf(TS_SHAPE(c), d.rv, pt, dev, false);
    ts_tensor *y = ts_batch_norm(x, rm, rv, wt, b, true, 0.1, 0);
    CHECK_OK();
    CHECK(is_cl(y));
    CHECK(y && ts_dtype_of(y) == dt);
    CHECK_STREQ(y ? ts_grad_fn_name(y) : NULL, "NativeBatchNormBackward0");
    CHECK_TOL(label, "y", y, r.y, r.ty, tot);
    CHECK_TOL(label, "running_mean", rm, r.rm, r.trm, c);
    CHECK_TOL(label, "running_var", rv, r.rv, r.trv, c);
    /* dy contiguous: backward brings it to channels_last */
    ts_backward_with(y, leaf(s, d.dy, dt, dev, false));
    CHECK_OK();
    CHECK(ts_grad(x) && ts_dtype_of(ts_grad(x)) == dt);
    CHECK_TOL(label, "dx", ts_grad(x), r.dx, r.tdx, tot);
    CHECK(is_cl(ts_grad(x))); /* the kernels' dx, accumulated as it is */
    CHECK_TOL(label, "dweight", ts_grad(wt), r.dw, r.tdw, c);
    CHECK_TOL(label, "dbias", ts_grad(b), r.db, r.tdb, c);
    /* a channels_last dy too */
    ts_set_grad(x, NULL);
    ts_tensor *y2 = ts_batch_norm(x, NULL, NULL, wt, b, true, 0, 0);
    ts_backward_with(y2, leaf_cl(s, d.dy, dt, dev, false));
    CHECK_OK();
    CHECK_TOL(label, "dx (channels_last dy)", ts_grad(x), r.dx, r.tdx, tot);

    /* evaluation: the composition of elementwise ops keeps the format, and its values do not
     * depend on it */
    ts_tensor *xc = leaf(s, d.x, dt, dev, false);
    ts_tensor *ye = ts_batch_norm(x, rm, rv, wt, b, false, 0, 0);
    ts_tensor *yc = ts_batch_norm(xc, rm, rv, wt, b, false, 0, 0);
    CHECK_OK();
    CHECK(is_cl(ye));
    double *he = ts_test_host_f64(ye, tot), *hc = ts_test_host_f64(yc, tot);
    CHECK(!memcmp(he, hc, sizeof(double) * (size_t)tot));
    free(he), free(hc);
    ts_scope_end();
    ts_bn_ref_free(&r);
    ts_bn_data_free(&d);
}

/* BatchNorm2d on a channels_last input: a channels_last output in training and evaluation */
static void module_case(ts_dtype dt, ts_device dev) {
    const int64_t c = 24;
    ts_module *m = ts_batch_norm2d_new(c, (ts_norm_opts){0});
    m = ts_module_to(m, dev);
    CHECK_OK();
    ts_scope_begin();
    ts_manual_seed(3);
    ts_tensor *x0 = ts_randn(TS_SHAPE(4, c, 6, 6), (ts_opts){.dtype = dt, .device = dev});
    ts_tensor *x = ts_detach(ts_contiguous_format(x0, TS_CHANNELS_LAST));
    ts_set_requires_grad(x, true);
    ts_tensor *y = ts_forward(m, x);
    CHECK_OK();
    CHECK(is_cl(y));
    /* float64 input, float32 parameters: the composition (which keeps the format too) */
    if (dt != TS_F64) CHECK_STREQ(y ? ts_grad_fn_name(y) : NULL, "NativeBatchNormBackward0");
    ts_backward(ts_sum(ts_mul(y, y)));
    CHECK_OK();
    CHECK(ts_grad(x) != NULL);
    /* the same module on the NCHW copy: the same output within a few roundings of each */
    ts_tensor *x1 = ts_detach(x0);
    ts_tensor *y1 = ts_forward(m, x1);
    const double u = ts_test_unit_roundoff(dt);
    CHECK(y1 && ts_item(ts_max(ts_abs(ts_sub(ts_to_dtype(y, TS_F64), ts_to_dtype(y1, TS_F64))))) <=
                    64 * u * 8);
    ts_module_train(m, false);
    ts_tensor *ye = ts_forward(m, x);
    CHECK_OK();
    CHECK(is_cl(ye));
    ts_scope_end();
    ts_module_free(m);
}

/* A NaN stays in its channel: its statistics, output and gradients are NaN, the others' not */
static void test_nan(ts_device dev) {
    const int64_t n = 2, c = 20, h = 3, w = 5, tot = n * c * h * w, bad = 7;
    ts_scope_begin();
    double *v = malloc(sizeof(double) * tot);
    for (int64_t i = 0; i < tot; i++) v[i] = uniform(-1, 1);
    v[(1 * c + bad) * h * w + 4] = NAN;
    ts_tensor *x = leaf_cl(TS_SHAPE(n, c, h, w), v, TS_F32, dev, true);
    ts_tensor *wt = ts_ones(TS_SHAPE(c), (ts_opts){.device = dev, .requires_grad = true});
    ts_tensor *b = ts_zeros(TS_SHAPE(c), (ts_opts){.device = dev, .requires_grad = true});
    ts_tensor *y = ts_batch_norm(x, NULL, NULL, wt, b, true, 0, 0);
    ts_tensor *g =
        ts_reshape(ts_arange(0, (double)tot, 1, (ts_opts){.device = dev}), TS_SHAPE(n, c, h, w));
    ts_backward(ts_sum(ts_mul(y, g)));
    CHECK_OK();
    double *hy = ts_test_host_f64(y, tot), *hx = ts_test_host_f64(ts_grad(x), tot);
    double *hw = ts_test_host_f64(ts_grad(wt), c);
    bool ok = true;
    for (int64_t i = 0; i < tot; i++) {
        const bool in_bad = i / (h * w) % c == bad;
        ok = ok && (isnan(hy[i]) == in_bad) && (isnan(hx[i]) == in_bad);
    }
    for (int64_t ch = 0; ch < c; ch++) ok = ok && (isnan(hw[ch]) == (ch == bad));
    ts_test_record(ok);
    if (!ok) ts_test_failf(__FILE__, __LINE__, "%s: a NaN left its channel", ts_device_str(dev));
    free(hy), free(hx), free(hw), free(v);
    ts_scope_end();
}

static void test_frontend(void) {
    static const ts_dtype dts[] = {TS_F32, TS_BF16, TS_F64};
    for (int di = 0; di < ndev; di++) {
        for (int t = 0; t < 3; t++) {
            frontend_case(4, 17, 6, 5, dts[t], devs[di]);
            frontend_case(2, 64, 8, 8, dts[t], devs[di]);
            /* cuda_batch_norm.cu's rows kernels: 1000 channels of n * hw = 2 (32 a block), and
             * 3 and 64 channels over many chunks of rows (3 * 2^20 elements: 1024 chunks) */
            frontend_case(1, 1000, 1, 2, dts[t], devs[di]);
            frontend_case(2, 64, 64, 64, dts[t], devs[di]);
            frontend_case(4, 3, 512, 512, dts[t], devs[di]);
            module_case(dts[t], devs[di]);
        }
        test_nan(devs[di]);
    }
}

/* ------------------------------------------------------------------ allocation failures */
/* A channels_last training step of batch_norm (forward with running statistics, backward) with
 * each allocation failing in turn, the NHWC kernels' scratch among them: a clear TS_ERR_OOM, no
 * leak, and the running statistics changed wholly or not at all (a kernel without scratch writes
 * nothing, and nothing unwritten reaches them). */
typedef struct bn_sweep {
    ts_tensor *x, *w, *b, *rm, *rv, *gy;
} bn_sweep;

static ts_tensor *kept_cl(ts_tensor *t, bool grad) {
    ts_tensor *c = ts_contiguous_format(t, TS_CHANNELS_LAST);
    ts_retain(c);
    if (grad) ts_set_requires_grad(c, true);
    return c;
}

static void *sweep_setup(void) {
    bn_sweep *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    ts_scope_begin();
    ts_manual_seed(5); /* the same data at every point of the sweep */
    const ts_opts o = {.dtype = TS_F32};
    s->x = kept_cl(ts_randn(TS_SHAPE(4, 48, 8, 8), o), true);
    s->gy = kept_cl(ts_randn(TS_SHAPE(4, 48, 8, 8), o), false);
    s->w = ts_retain(ts_randn(TS_SHAPE(48), (ts_opts){.dtype = TS_F32, .requires_grad = true}));
    s->b = ts_retain(ts_randn(TS_SHAPE(48), (ts_opts){.dtype = TS_F32, .requires_grad = true}));
    s->rm = ts_retain(ts_zeros(TS_SHAPE(48), o));
    s->rv = ts_retain(ts_ones(TS_SHAPE(48), o));
    ts_scope_end();
    return s;
}

/* the forward alone: its running statistics change wholly or not at all */
static bool sweep_forward(void *p) {
    bn_sweep *s = p;
    ts_scope_begin();
    ts_tensor *y = ts_batch_norm(s->x, s->rm, s->rv, s->w, s->b, true, 0.1, 0);
    const bool ok = y && is_cl(y) && ts_error() == TS_OK;
    ts_scope_end();
    return ok;
}

/* forward and backward (the gradients of a failed backward may be anything) */
static bool sweep_step(void *p) {
    bn_sweep *s = p;
    ts_set_grad(s->x, NULL), ts_set_grad(s->w, NULL), ts_set_grad(s->b, NULL);
    ts_scope_begin();
    ts_tensor *y = ts_batch_norm(s->x, NULL, NULL, s->w, s->b, true, 0, 0);
    if (y) ts_backward_with(y, s->gy);
    const bool ok = y && is_cl(y) && ts_grad(s->x) && is_cl(ts_grad(s->x)) && ts_error() == TS_OK;
    ts_scope_end();
    return ok;
}

static ts_snapshot sweep_snap(void *p) {
    bn_sweep *s = p;
    ts_snapshot snap = {0};
    ts_tensor_list l = {0};
    ts_tensor_list_add(&l, "running_mean", s->rm);
    ts_tensor_list_add(&l, "running_var", s->rv);
    ts_snapshot_add(&snap, "bn.", &l);
    ts_tensor_list_free(&l);
    return snap;
}

static void sweep_teardown(void *p) {
    bn_sweep *s = p;
    ts_tensor *all[] = {s->x, s->w, s->b, s->rm, s->rv, s->gy};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) ts_release(all[i]);
    free(s);
}

static void test_allocation_failures(void) {
    const ts_sweep_case fwd = {.name = "channels_last batch_norm forward",
                               .setup = sweep_setup,
                               .run = sweep_forward,
                               .teardown = sweep_teardown,
                               .snap = sweep_snap};
    const ts_sweep_case step = {.name = "channels_last batch_norm step",
                                .setup = sweep_setup,
                                .run = sweep_step,
                                .teardown = sweep_teardown};
    for (int i = 0; i < 2; i++) {
        const ts_sweep_stats st = ts_fault_sweep(i ? &step : &fwd, 300);
        CHECK(st.errors > 0);
        CHECK_EQ(st.errors, st.oom);
    }
    CHECK_OK();
}

int main(void) {
    if (ts_test_isa_gate()) return 77;
    ndev = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    test_kernels();
    test_threads();
    test_frontend();
    test_allocation_failures();
    return ts_test_finish();
}
