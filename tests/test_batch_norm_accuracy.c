/* test_batch_norm_accuracy.c — the float32 batch norm's per-channel reductions (the training
 * forward's mean and variance, the backward's sum(dy) and sum(dy * xhat)) at the counts real
 * networks give a channel (n * h * w = 2, 98, 1568 and 100352: a late stage of batch 2 to an early
 * one of batch 32) and with data whose mean is many times its spread, in x (1000x and 30000x) and
 * in dy (a gradient with a channel mean, or correlated with x, so its terms have one sign), on
 * contiguous (NCHW) and channels_last (NHWC) inputs: each result within a bound derived below from
 * the arithmetic, against a long-double reference of the same float32 data. The kernels sum in
 * double (kern_batch_norm_impl.h, kern_batch_norm_nhwc_impl.h). Planted and caught: a float32
 * accumulator in the backward's sums, either layout (dbias from 98 values a channel; the older
 * test_batch_norm misses it, test_batch_norm_nhwc fails once), in the forward's moments (NCHW at
 * 100352, NHWC from 2), and the variance's sums without their shift (either layout, the 30000x
 * channels).
 *
 * The bounds, per channel of n values (u = 2^-24, ud = 2^-53, g = (n + 80) ud: a double sum of
 * at most n + 64 terms one after another and the 16-lane tree; D = max |x - mean|; S1 = sum |dy|):
 *   mean: the shifted sum of d = x - k (|k - mean| <= D, so sum |d| <= 2 n D) in double, the
 *     division and the addition of k, then one rounding to float:
 *       tmean = u |mean| + 4 g (D + |mean|).
 *   running_var (momentum 1: the unbiased variance): the double moments' error <= 4 g (var + D^2)
 *     (sum d^2 <= n (var + D^2), sum(d)^2 / n <= n D^2), rounded to float, times n / (n - 1)
 *     rounded again (and the factor itself): tvar = 4 u rv + 8 g (var + D^2) n / (n - 1).
 *   dbias = sum(dy): float terms exact in double, the double sum's error <= g S1, one rounding:
 *       tdb = u |db| + g S1.
 *   dweight = fl(fl(sum fl(dy * fl(x - mf))) * invf): each term carries <= 2.01 u of itself; the
 *     float mean mf is off by <= tmean, which shifts the sum by <= tmean |sum dy|; the double sum
 *     adds g G with G = sum |dy| (|x - mean| + tmean); invf = 1 / sqrt(var + eps) to within
 *     rho = 2u + 4 g (var + D^2) / (var + eps) (the variance's error, the square root's and the
 *     rounding); the product's rounding u |dw|:
 *       tdw = (rho + 2u) |dw| + 1.01 inv (tmean |sum dy| + (2.01 u + g) G).
 * A float32 accumulator of L terms of one sign errs by up to ~L u times its sum (at L = 16
 * already past these), so data whose terms keep their sign catch it; a variance from
 * unshifted double sums errs by ~L ud mean^2, past tvar once mean >> spread. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tol_check.h"
#include "ts_test.h"

static ts_device devs[TS_TEST_MAX_DEVICES];
static int ndev;

static uint64_t lcg = 0x243F6A8885A308D3ULL;
static double uniform(double lo, double hi) {
    lcg = lcg * 6364136223846793005ULL + 1442695040888963407ULL;
    return lo + (hi - lo) * (double)(lcg >> 11) / 9007199254740992.0;
}

typedef struct acc_case {
    int64_t n, c, h, w;
} acc_case;

/* x, dy in [n, c, hw] order (float32 values); channel c: x = off + sd * U(-1, 1) with off / sd
 * 3e4 (c % 4 = 3), 1000 (c % 4 = 1) or 0.3; dy a gradient with a channel mean 30x its spread (c % 4
 * < 2) or one correlated with x (so dy * (x - mean) keeps its sign), plus noise. */
static void make_data(const acc_case *k, double *x, double *dy, double *w) {
    const int64_t hw = k->h * k->w;
    for (int64_t c = 0; c < k->c; c++) {
        const double far = c % 4 == 3 ? 3e4 : c % 2 ? 1e3 : 0.3;
        const double sd = uniform(0.5, 2.0), off = far * sd * (c % 3 ? 1 : -1);
        const double beta = c % 4 < 2 ? uniform(0.5, 1.5) : 0.01, gam = c % 4 < 2 ? 0.01 : 0.5;
        for (int64_t i = 0; i < k->n; i++)
            for (int64_t j = 0; j < hw; j++) {
                const int64_t at = (i * k->c + c) * hw + j;
                const double t = uniform(-1, 1);
                x[at] = (float)(off + sd * t);
                dy[at] = (float)(beta + gam * t + 0.02 * uniform(-1, 1));
            }
        w[c] = (float)uniform(0.5, 2.0);
    }
}

/* The reference in long double and the bounds above, per channel. */
typedef struct acc_ref {
    double *mean, *rv, *db, *dw, *tmean, *tvar, *tdb, *tdw;
} acc_ref;

static acc_ref reference(const acc_case *k, const double *x, const double *dy, double eps) {
    const int64_t hw = k->h * k->w, n = k->n * hw, C = k->c;
    const double u = ldexp(1, -24), ud = ldexp(1, -53), g = (double)(n + 80) * ud;
    acc_ref r;
    double **all[] = {&r.mean, &r.rv, &r.db, &r.dw, &r.tmean, &r.tvar, &r.tdb, &r.tdw};
    for (int i = 0; i < 8; i++) *all[i] = calloc((size_t)C, sizeof(double));
    for (int64_t c = 0; c < C; c++) {
        long double s = 0, v = 0, D = 0, sdy = 0, s1 = 0, p = 0;
#define EACH(...)                                                                                  \
    for (int64_t i = 0; i < k->n; i++)                                                             \
        for (int64_t j = 0; j < hw; j++) {                                                         \
            const int64_t at = (i * C + c) * hw + j;                                               \
            const long double xv = x[at], dv = dy[at];                                             \
            (void)dv;                                                                              \
            __VA_ARGS__;                                                                           \
        }
        EACH(s += xv);
        const long double mean = s / n;
        EACH(v += (xv - mean) * (xv - mean); D = fmaxl(D, fabsl(xv - mean)));
        const long double var = v / n, inv = 1 / sqrtl(var + eps);
        const double tmean = u * (double)fabsl(mean) + 4 * g * (double)(D + fabsl(mean));
        long double G = 0;
        EACH(sdy += dv; s1 += fabsl(dv); p += dv * (xv - mean);
             G += fabsl(dv) * (fabsl(xv - mean) + tmean));
#undef EACH
        const double f = (double)n / (double)(n - 1), rel = (double)((var + D * D) / (var + eps));
        r.mean[c] = (double)mean, r.tmean[c] = tmean;
        r.rv[c] = (double)var * f;
        r.tvar[c] = 4 * u * r.rv[c] + 8 * g * (double)(var + D * D) * f;
        r.db[c] = (double)sdy, r.tdb[c] = u * fabs(r.db[c]) + g * (double)s1;
        r.dw[c] = (double)(p * inv);
        const double rho = 2 * u + 4 * g * rel;
        r.tdw[c] = (rho + 2 * u) * fabs(r.dw[c]) +
                   1.01 * (double)inv * (tmean * (double)fabsl(sdy) + (2.01 * u + g) * (double)G);
    }
    return r;
}

static void free_ref(acc_ref *r) {
    double *all[] = {r->mean, r->rv, r->db, r->dw, r->tmean, r->tvar, r->tdb, r->tdw};
    for (int i = 0; i < 8; i++) free(all[i]);
}

static void run_case(const acc_case *k, bool nhwc, ts_device dev) {
    const int64_t hw = k->h * k->w, tot = k->n * k->c * hw, C = k->c;
    const double eps = 1e-5;
    char label[160];
    snprintf(label, sizeof label, "[%lld, %lld, %lld, %lld] %s, n*hw %lld, %s", (long long)k->n,
             (long long)C, (long long)k->h, (long long)k->w, nhwc ? "channels_last" : "contiguous",
             (long long)(k->n * hw), ts_device_str(dev));
    double *x = malloc(sizeof(double) * tot), *dy = malloc(sizeof(double) * tot);
    double *wv = malloc(sizeof(double) * C), *zero = calloc((size_t)C, sizeof(double));
    double *one = malloc(sizeof(double) * C);
    for (int64_t c = 0; c < C; c++) one[c] = 1;
    make_data(k, x, dy, wv);
    acc_ref r = reference(k, x, dy, eps);
    ts_scope_begin();
    const ts_opts o = {.dtype = TS_F32, .device = dev};
    const ts_shape s = TS_SHAPE(k->n, C, k->h, k->w);
    ts_tensor *xt = ts_tensor_f64(s, x, o), *dyt = ts_tensor_f64(s, dy, o);
    if (nhwc) {
        xt = ts_contiguous_format(xt, TS_CHANNELS_LAST);
        dyt = ts_contiguous_format(dyt, TS_CHANNELS_LAST);
    }
    xt = ts_detach(xt);
    ts_set_requires_grad(xt, true);
    ts_tensor *w = ts_tensor_f64(TS_SHAPE(C), wv, o), *b = ts_tensor_f64(TS_SHAPE(C), zero, o);
    ts_set_requires_grad(w, true), ts_set_requires_grad(b, true);
    ts_tensor *rm = ts_tensor_f64(TS_SHAPE(C), zero, o), *rv = ts_tensor_f64(TS_SHAPE(C), one, o);
    /* momentum 1: running_mean = 0 * 0 + 1 * mean, the kernel's mean itself */
    ts_tensor *y = ts_batch_norm(xt, rm, rv, w, b, true, 1.0, eps);
    CHECK_OK();
    CHECK_STREQ(y ? ts_grad_fn_name(y) : NULL, "NativeBatchNormBackward0");
    ts_backward_with(y, dyt);
    CHECK_OK();
    CHECK_TOL(label, "mean", rm, r.mean, r.tmean, C);
    CHECK_TOL(label, "running_var", rv, r.rv, r.tvar, C);
    CHECK_TOL(label, "dbias", ts_grad(b), r.db, r.tdb, C);
    CHECK_TOL(label, "dweight", ts_grad(w), r.dw, r.tdw, C);
    ts_scope_end();
    free_ref(&r);
    free(x), free(dy), free(wv), free(zero), free(one);
}

int main(void) {
    if (ts_test_isa_gate()) return 77;
    ndev = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    static const acc_case cases[] = {
        {2, 4, 1, 1},    /* two values a channel (hw = 1 takes the NHWC kernels either way) */
        {2, 8, 7, 7},    /* 98: a late stage at batch 2 */
        {8, 4, 14, 14},  /* 1568 */
        {32, 4, 56, 56}, /* 100352: an early stage at batch 32 */
    };
    for (int d = 0; d < ndev; d++)
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
            for (int nhwc = 0; nhwc < 2; nhwc++) run_case(&cases[i], nhwc, devs[d]);
    return ts_test_finish();
}
