/* test_smooth_l1_loss.c — ts_smooth_l1_loss_beta (src/nn/loss.c),
 * torch.nn.functional.smooth_l1_loss with PyTorch's beta (0: the L1 loss; negative: refused), every
 * reduction, on every device against float64 loops, ts_gradcheck in input and target, and
 * ts_smooth_l1_loss's opts reading beta 0 as 1.0. */
#include <math.h>
#include <stdio.h>

#include "host_read_util.h"
#include "tessera.h"
#include "ts_test.h"

static ts_device devs[TS_TEST_MAX_DEVICES];
static int ndev;

#define N 12
/* |x - t| spread below and above every beta below, none on a beta or at 0 */
static const double xv[N] = {0.31, -1.7, 2.9, 0.05, -0.42, 1.13, 3.6, -2.2, 0.77, -0.08, 1.61, 0.9};
static const double tv[N] = {0.1, 0.4, -0.3, 0.33, -0.9, 1.5, 0.2, -2.61, -0.47, 0.6, 1.0, -1.4};
static const double betas[] = {0, 0.5, 1, 2.3};

static double ref_elem(double x, double t, double beta) {
    double d = fabs(x - t);
    if (beta == 0) return d;
    return d < beta ? 0.5 * d * d / beta : d - 0.5 * beta;
}

static ts_tensor *mk(const double *v, ts_device d, ts_dtype dt, bool rg) {
    ts_tensor *t =
        ts_to(ts_to_dtype(ts_tensor_f64(TS_SHAPE(3, 4), v, (ts_opts){.dtype = TS_F64}), dt), d);
    t = ts_detach(t);
    if (rg) ts_set_requires_grad(t, true);
    return t;
}

static void test_values(void) {
    const ts_dtype dts[] = {TS_F64, TS_F32};
    const ts_reduction reds[] = {TS_REDUCTION_NONE, TS_REDUCTION_SUM, TS_REDUCTION_MEAN};
    double ref[N];
    for (int di = 0; di < ndev; di++)
        for (int ti = 0; ti < 2; ti++)
            for (int bi = 0; bi < 4; bi++)
                for (int ri = 0; ri < 3; ri++) {
                    ts_scope_begin();
                    double sum = 0;
                    for (int i = 0; i < N; i++) sum += ref[i] = ref_elem(xv[i], tv[i], betas[bi]);
                    int64_t n = reds[ri] == TS_REDUCTION_NONE ? N : 1;
                    if (reds[ri] == TS_REDUCTION_SUM) ref[0] = sum;
                    if (reds[ri] == TS_REDUCTION_MEAN) ref[0] = sum / N;
                    double tol = ti == 0 ? 1e-14 : 1e-6;
                    ts_tensor *y = ts_smooth_l1_loss_beta(mk(xv, devs[di], dts[ti], false),
                                                          mk(tv, devs[di], dts[ti], false),
                                                          reds[ri], betas[bi]);
                    bool ok = y && ts_dtype_of(y) == dts[ti] && near_all(y, ref, n, tol);
                    ts_test_record(ok);
                    if (!ok)
                        ts_test_failf(__FILE__, __LINE__,
                                      "smooth_l1 beta %g reduction %d %s on %s%s", betas[bi],
                                      (int)reds[ri], ts_dtype_name(dts[ti]),
                                      ts_device_str(devs[di]), ts_test_error_str());
                    ts_error_clear();
                    ts_scope_end();
                }
}

static ts_tensor *l_fn(ts_tensor *const *in, int n, void *ctx) {
    (void)n;
    return ts_smooth_l1_loss_beta(in[0], in[1], TS_REDUCTION_MEAN, *(const double *)ctx);
}

static void test_grads(void) {
    const ts_gradcheck_opts go = {.eps = 1e-6, .atol = 1e-7, .rtol = 1e-6};
    for (int di = 0; di < ndev; di++)
        for (int bi = 0; bi < 4; bi++) {
            ts_scope_begin();
            ts_tensor *in[2] = {mk(xv, devs[di], TS_F64, true), mk(tv, devs[di], TS_F64, true)};
            bool ok = ts_gradcheck(l_fn, (void *)&betas[bi], in, 2, go);
            /* d/dx of the mean: sign(x - t) (beta 0, or |x - t| >= beta), else (x - t) / beta */
            double ref[N];
            for (int i = 0; i < N; i++) {
                double d = xv[i] - tv[i];
                ref[i] =
                    (betas[bi] == 0 || fabs(d) >= betas[bi] ? (d > 0 ? 1 : -1) : d / betas[bi]) / N;
            }
            ts_tensor *x = mk(xv, devs[di], TS_F64, true);
            ts_tensor *y = ts_smooth_l1_loss_beta(x, mk(tv, devs[di], TS_F64, false),
                                                  TS_REDUCTION_MEAN, betas[bi]);
            ok = ok && y && ts_backward(y) == TS_OK && near_all(ts_grad(x), ref, N, 1e-14);
            ts_test_record(ok);
            if (!ok)
                ts_test_failf(__FILE__, __LINE__, "smooth_l1 grad beta %g on %s%s", betas[bi],
                              ts_device_str(devs[di]), ts_test_error_str());
            ts_error_clear();
            ts_scope_end();
        }
}

static void test_opts_and_errors(void) {
    ts_scope_begin();
    ts_tensor *x = mk(xv, ts_cpu(), TS_F64, false), *t = mk(tv, ts_cpu(), TS_F64, false);
    /* ts_smooth_l1_loss: zeroed opts are beta 1.0, the mean */
    double sum = 0, ref;
    for (int i = 0; i < N; i++) sum += ref_elem(xv[i], tv[i], 1);
    ref = sum / N;
    CHECK(near_all(ts_smooth_l1_loss(x, t, (ts_loss_opts){0}), &ref, 1, 1e-14));
    CHECK(ts_smooth_l1_loss_beta(x, t, TS_REDUCTION_MEAN, -0.5) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "negative values for beta");
    CHECK(ts_smooth_l1_loss_beta(x, t, (ts_reduction)7, 1) == NULL);
    CHECK(ts_error() != TS_OK);
    ts_error_clear();
    CHECK(ts_smooth_l1_loss_beta(NULL, t, TS_REDUCTION_MEAN, 1) == NULL);
    CHECK(ts_error() != TS_OK);
    ts_error_clear();
    ts_scope_end();
}

int main(void) {
    ndev = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    test_values();
    test_grads();
    test_opts_and_errors();
    CHECK_OK();
    return ts_test_finish();
}
