/* test_feature_dropout.c — ts_feature_dropout / ts_feature_dropout_ (src/nn/feature_dropout.c),
 * torch.nn.functional.dropout1d / 2d / 3d, on every device: each channel (of each batch entry)
 * entirely kept and scaled by 1 / (1 - p) or entirely zero, the kept fraction within a binomial
 * bound of 1 - p, the gradient equal to the mask, p = 1, evaluation returning x itself, the
 * unbatched form (one draw per channel of [C, ...]), the in-place form, and the refusals. */
#include <math.h>
#include <stdio.h>

#include "host_read_util.h"
#include "tessera.h"
#include "ts_test.h"

static ts_device devs[TS_TEST_MAX_DEVICES];
static int ndev;

enum { NB = 4, C = 50, L = 6 };
static double xv[NB * C * L], yv[NB * C * L], gv[NB * C * L];

/* y's channels (groups of L elements; nch of them) each x/(1-p) or 0 in full; the kept count */
static bool channels_ok(const double *x, const double *y, int nch, double p, int *kept) {
    *kept = 0;
    for (int c = 0; c < nch; c++) {
        bool keep = y[c * L] != 0;
        *kept += keep;
        for (int i = 0; i < L; i++) {
            double want = keep ? x[c * L + i] / (1 - p) : 0;
            if (!(fabs(y[c * L + i] - want) <= 1e-15 * (1 + fabs(want)))) return false;
        }
    }
    return true;
}

static void test_masks(void) {
    const double ps[] = {0.2, 0.5, 0.8};
    for (int i = 0; i < NB * C * L; i++) xv[i] = 0.5 + 0.01 * (i % 97); /* never 0 */
    for (int di = 0; di < ndev; di++)
        for (int pi = 0; pi < 3; pi++)
            for (int ub = 0; ub < 2; ub++) {
                ts_scope_begin();
                ts_manual_seed(1234 + pi);
                double p = ps[pi];
                ts_shape s = ub ? TS_SHAPE(C, 2, L / 2) : TS_SHAPE(NB, C, L);
                int nch = ub ? C : NB * C;
                ts_tensor *x =
                    ts_detach(ts_to(ts_tensor_f64(s, xv, (ts_opts){.dtype = TS_F64}), devs[di]));
                ts_set_requires_grad(x, true);
                ts_tensor *y = ts_feature_dropout(x, p, true, ub);
                int kept = 0;
                bool ok = y && rd(y, yv, (int64_t)nch * L) && channels_ok(xv, yv, nch, p, &kept);
                /* kept ~ Binomial(nch, 1 - p): within 5 standard deviations */
                double mean = nch * (1 - p), sd = sqrt(nch * p * (1 - p));
                ok = ok && fabs(kept - mean) <= 5 * sd;
                /* the gradient of sum(y) is the mask: y / x */
                ok = ok && ts_backward(ts_sum(y)) == TS_OK && rd(ts_grad(x), gv, (int64_t)nch * L);
                for (int i = 0; ok && i < nch * L; i++)
                    ok = fabs(gv[i] - yv[i] / xv[i]) <= 1e-14 * (1 + fabs(gv[i]));
                ts_test_record(ok);
                if (!ok)
                    ts_test_failf(__FILE__, __LINE__,
                                  "feature_dropout p %g unbatched %d (kept %d) on %s%s", p, ub,
                                  kept, ts_device_str(devs[di]), ts_test_error_str());
                ts_error_clear();
                ts_scope_end();
            }
}

static void test_edges(void) {
    for (int di = 0; di < ndev; di++) {
        ts_scope_begin();
        double v[6] = {1, NAN, -2, 3, 4, 5}, z[6] = {0, NAN, -0.0, 0, 0, 0};
        ts_tensor *x =
            ts_to(ts_tensor_f64(TS_SHAPE(1, 3, 2), v, (ts_opts){.dtype = TS_F64}), devs[di]);
        /* p = 1: x * 0, NaN kept */
        ts_tensor *y = ts_feature_dropout(x, 1, true, false);
        double got[6];
        bool ok = y && rd(y, got, 6);
        for (int i = 0; ok && i < 6; i++) ok = isnan(z[i]) ? isnan(got[i]) : got[i] == 0;
        /* evaluation and p = 0: x itself */
        ok = ok && ts_feature_dropout(x, 0.5, false, false) == x &&
             ts_feature_dropout(x, 0, true, true) == x;
        /* in place: x gets the result, and comes back */
        ts_tensor *w = ts_to(ts_ones(TS_SHAPE(2, 8, 3), (ts_opts){.dtype = TS_F32}), devs[di]);
        ts_manual_seed(7);
        ts_tensor *r = ts_feature_dropout_(w, 0.5, true, false);
        float wf[48];
        ok = ok && r == w && ts_copy_to_host(ts_to(w, ts_cpu()), wf, sizeof wf) == TS_OK;
        for (int c = 0; ok && c < 16; c++)
            for (int i = 0; i < 3; i++)
                ok = ok && (wf[c * 3 + i] == 0 || wf[c * 3 + i] == 2) && wf[c * 3 + i] == wf[c * 3];
        ts_test_record(ok);
        if (!ok)
            ts_test_failf(__FILE__, __LINE__, "feature_dropout edges on %s%s",
                          ts_device_str(devs[di]), ts_test_error_str());
        ts_error_clear();
        ts_scope_end();
    }
}

static void test_errors(void) {
    ts_scope_begin();
    double v[4] = {1, 2, 3, 4};
    ts_tensor *x = ts_tensor_f64(TS_SHAPE(2, 2), v, (ts_opts){.dtype = TS_F64});
    CHECK(ts_feature_dropout(x, 1.5, true, false) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "between 0 and 1");
    CHECK(ts_feature_dropout(x, -0.1, true, false) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "between 0 and 1");
    CHECK(ts_feature_dropout(ts_tensor_f64(TS_SHAPE(4), v, (ts_opts){.dtype = TS_F64}), 0.5, true,
                             false) == NULL);
    CHECK_ERR_HAS(TS_ERR_SHAPE, "at least 2 dimensions");
    const int64_t iv[4] = {1, 2, 3, 4};
    CHECK(ts_feature_dropout(ts_tensor_i64(TS_SHAPE(2, 2), iv, (ts_opts){.dtype = TS_I64}), 0.5,
                             true, false) == NULL);
    CHECK_ERR_HAS(TS_ERR_DTYPE, "floating point");
    CHECK(ts_feature_dropout_(NULL, 0.5, true, false) == NULL);
    CHECK(ts_error() != TS_OK);
    ts_error_clear();
    ts_scope_end();
}

int main(void) {
    ndev = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    test_masks();
    test_edges();
    test_errors();
    CHECK_OK();
    return ts_test_finish();
}
