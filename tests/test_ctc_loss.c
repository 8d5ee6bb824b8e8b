/* test_ctc_loss.c — ts_ctc_loss (src/ops/ctc_loss.c) against PyTorch 2's values and gradients
 * stored in tests/data/ctc_ref.h (tests/data/gen_ctc_ref.py): float64 log_probs, reductions none /
 * sum / mean, repeated labels, empty targets, a blank that is not 0, infeasible targets with and
 * without zero_infinity (inf loss; NaN or zero gradient as PyTorch's), input lengths of 0 and
 * below T; padded and concatenated targets, the unbatched form, float32, and the refusals; on
 * every device.
 *
 * Tolerances: both sides run the same log-space recursion in double over at most 7 frames and 7
 * states; the sums differ only in order, a few ulp of the largest term: 1e-12 relative. float32:
 * the input rounded (2^-24 relative on each log_prob, |log_prob| < 8) moves the loss by at most
 * T * sum_c |dL/dlp| * 8 * 2^-24 <= 7 * 2 * 8 * 6e-8 < 7e-6, plus the output's rounding. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "data/ctc_ref.h"
#include "host_read_util.h"
#include "tessera.h"
#include "ts_test.h"

static ts_device devs[TS_TEST_MAX_DEVICES];
static int ndev;

/* y's n values against ref: NaN where ref is NaN, equal infinities, else within tol (1 + |ref|) */
static bool same(ts_tensor *y, const double *ref, int64_t n, double tol, const char *what) {
    double got[512];
    if (n > 512 || !rd(y, got, n)) {
        fprintf(stderr, "  %s: no values%s\n", what, ts_test_error_str());
        return false;
    }
    for (int64_t i = 0; i < n; i++) {
        const bool ok = isnan(ref[i])   ? isnan(got[i])
                        : isinf(ref[i]) ? got[i] == ref[i]
                                        : fabs(got[i] - ref[i]) <= tol * (1 + fabs(ref[i]));
        if (!ok) {
            fprintf(stderr, "  %s: element %lld: %.17g vs %.17g\n", what, (long long)i, got[i],
                    ref[i]);
            return false;
        }
    }
    return true;
}

static const ts_reduction reds[3] = {TS_REDUCTION_NONE, TS_REDUCTION_SUM, TS_REDUCTION_MEAN};

static void test_against_pytorch(void) {
    for (int d = 0; d < ndev; d++)
        for (size_t k = 0; k < sizeof ctc_cases / sizeof *ctc_cases; k++) {
            const ctc_case *c = &ctc_cases[k];
            ts_scope_begin();
            ts_opts o = {.dtype = TS_F64, .device = devs[d]},
                    oi = {.dtype = TS_I64, .device = devs[d]};
            ts_tensor *tg = ts_tensor_i64(TS_SHAPE(c->N, c->S), c->targets, oi);
            for (int r = 0; r < 3; r++) {
                ts_tensor *lp = ts_tensor_f64(TS_SHAPE(c->T, c->N, c->C), c->log_probs, o);
                ts_set_requires_grad(lp, true);
                ts_tensor *y = ts_ctc_loss(lp, tg, c->input_lengths, c->target_lengths, c->N,
                                           c->blank, reds[r], c->zero_infinity);
                char what[96];
                snprintf(what, sizeof what, "case %zu reduction %d on device %d: loss", k, r, d);
                CHECK(same(y, c->loss[r], r == 0 ? c->N : 1, 1e-12, what));
                ts_status st =
                    r == 0 ? ts_backward_with(y, ts_tensor_f64(TS_SHAPE(c->N), c->weights, o))
                           : ts_backward(y);
                CHECK(st == TS_OK);
                snprintf(what, sizeof what, "case %zu reduction %d on device %d: grad", k, r, d);
                CHECK(same(ts_grad(lp), c->grad[r], c->T * c->N * c->C, 1e-12, what));
                CHECK_OK();
            }
            ts_scope_end();
        }
}

/* case 0 with its targets concatenated, one element unbatched, and in float32 */
static void test_forms(void) {
    const ctc_case *c = &ctc_cases[0];
    for (int d = 0; d < ndev; d++) {
        ts_scope_begin();
        ts_opts o = {.dtype = TS_F64, .device = devs[d]}, oi = {.dtype = TS_I64, .device = devs[d]};
        int64_t cat[64], at = 0;
        for (int64_t b = 0; b < c->N; b++)
            for (int64_t j = 0; j < c->target_lengths[b]; j++) cat[at++] = c->targets[b * c->S + j];
        ts_tensor *lp = ts_tensor_f64(TS_SHAPE(c->T, c->N, c->C), c->log_probs, o);
        CHECK(!ts_ctc_loss(lp, NULL, c->input_lengths, c->target_lengths, c->N, 0,
                           TS_REDUCTION_NONE, false));
        CHECK_ERR(TS_ERR_ARG); /* NULL targets */
        ts_tensor *flat = ts_tensor_i64(TS_SHAPE(at), cat, oi);
        ts_tensor *y = ts_ctc_loss(lp, flat, c->input_lengths, c->target_lengths, c->N, c->blank,
                                   TS_REDUCTION_NONE, false);
        CHECK(same(y, c->loss[0], c->N, 1e-12, "concatenated targets"));
        /* element 0 alone, unbatched: [T, C] and its targets 1-D */
        double one[64];
        for (int64_t t = 0; t < c->T; t++)
            for (int64_t j = 0; j < c->C; j++)
                one[t * c->C + j] = c->log_probs[(t * c->N + 0) * c->C + j];
        ts_tensor *u = ts_tensor_f64(TS_SHAPE(c->T, c->C), one, o);
        ts_set_requires_grad(u, true);
        ts_tensor *yu =
            ts_ctc_loss(u, ts_tensor_i64(TS_SHAPE(c->target_lengths[0]), c->targets, oi),
                        c->input_lengths, c->target_lengths, 1, c->blank, TS_REDUCTION_NONE, false);
        CHECK(yu && ts_ndim(yu) == 0 && same(yu, c->loss[0], 1, 1e-12, "unbatched"));
        CHECK(ts_backward_with(yu, ts_scalar(c->weights[0], o)) == TS_OK);
        double g0[64];
        for (int64_t t = 0; t < c->T; t++)
            for (int64_t j = 0; j < c->C; j++)
                g0[t * c->C + j] = c->grad[0][(t * c->N + 0) * c->C + j];
        CHECK(same(ts_grad(u), g0, c->T * c->C, 1e-12, "unbatched grad"));
        /* float32 */
        ts_tensor *lp32 = ts_to_dtype(lp, TS_F32);
        ts_tensor *tg = ts_tensor_i64(TS_SHAPE(c->N, c->S), c->targets, oi);
        ts_tensor *y32 = ts_ctc_loss(lp32, tg, c->input_lengths, c->target_lengths, c->N, c->blank,
                                     TS_REDUCTION_NONE, false);
        CHECK(y32 && ts_dtype_of(y32) == TS_F32 && same(y32, c->loss[0], c->N, 7e-6, "float32"));
        CHECK_OK();
        ts_scope_end();
    }
}

static void test_errors(void) {
    ts_scope_begin();
    const ctc_case *c = &ctc_cases[0];
    ts_opts o = {.dtype = TS_F64}, oi = {.dtype = TS_I64};
    ts_tensor *lp = ts_tensor_f64(TS_SHAPE(c->T, c->N, c->C), c->log_probs, o);
    ts_tensor *tg = ts_tensor_i64(TS_SHAPE(c->N, c->S), c->targets, oi);
    const int64_t *il = c->input_lengths, *tl = c->target_lengths;
    CHECK(!ts_ctc_loss(lp, tg, il, tl, c->N, 5, TS_REDUCTION_MEAN, false));
    CHECK_ERR_HAS(TS_ERR_ARG, "blank must be in label range [0, 5)");
    CHECK(!ts_ctc_loss(lp, tg, (int64_t[]){6, 7, 1, 1}, tl, c->N, 0, TS_REDUCTION_MEAN, false));
    CHECK_ERR_HAS(TS_ERR_ARG, "input length 7 of element 1");
    CHECK(!ts_ctc_loss(lp, tg, il, (int64_t[]){1, -1, 0, 0}, c->N, 0, TS_REDUCTION_MEAN, false));
    CHECK_ERR_HAS(TS_ERR_ARG, "target length -1");
    CHECK(!ts_ctc_loss(lp, tg, il, (int64_t[]){1, 4, 0, 0}, c->N, 0, TS_REDUCTION_MEAN, false));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "exceeds targets' width 3");
    CHECK(!ts_ctc_loss(lp, tg, il, tl, 3, 0, TS_REDUCTION_MEAN, false));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "one entry per batch element (4), got 3");
    ts_tensor *bad = ts_tensor_i64(TS_SHAPE(4, 1), (int64_t[]){1, 9, 1, 1}, oi);
    CHECK(!ts_ctc_loss(lp, bad, il, (int64_t[]){1, 1, 1, 1}, c->N, 0, TS_REDUCTION_MEAN, false));
    CHECK_ERR_HAS(TS_ERR_ARG, "target labels must be in [0, 5), got 9");
    CHECK(!ts_ctc_loss(lp, ts_to_dtype(tg, TS_F32), il, tl, c->N, 0, TS_REDUCTION_MEAN, false));
    CHECK_ERR_HAS(TS_ERR_DTYPE, "targets must be integral");
    CHECK(!ts_ctc_loss(ts_to_dtype(lp, TS_I64), tg, il, tl, c->N, 0, TS_REDUCTION_MEAN, false));
    CHECK_ERR_HAS(TS_ERR_DTYPE, "log_probs must be floating point");
    CHECK(!ts_ctc_loss(ts_sum(lp), tg, il, tl, c->N, 0, TS_REDUCTION_MEAN, false));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "log_probs must be [T, N, C] or [T, C]");
    CHECK(!ts_ctc_loss(lp, tg, NULL, tl, c->N, 0, TS_REDUCTION_MEAN, false));
    CHECK_ERR(TS_ERR_ARG);
    ts_scope_end();
}

int main(void) {
    ndev = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    test_against_pytorch();
    test_forms();
    test_errors();
    CHECK_OK();
    return ts_test_finish();
}
