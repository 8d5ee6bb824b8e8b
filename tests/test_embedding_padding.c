/* test_embedding_padding.c — ts_embedding_padded (PyTorch's embedding with padding_idx) on every
 * device: the values are the rows, the padding row's included; the weight's gradient is each row's
 * sum of the upstream gradients of its uses (exact in float64 with small integers), zero for the
 * padding row whatever its uses; -1 is ts_embedding; a row out of range is refused. */
#include <math.h>

#include "host_values.h"
#include "ts_test.h"

#define ROWS 5
#define DIM  3
#define N    7

static const int64_t IDX[N] = {2, 0, 4, 2, 2, 1, 0};

/* the gradient of weight for upstream g[i][d] = i * DIM + d + 1 and padding row pad (-1: none):
 * each row's sum over its uses, the padding row 0 */
static void ref_grad(int64_t pad, double out[ROWS][DIM]) {
    for (int r = 0; r < ROWS; r++)
        for (int d = 0; d < DIM; d++) out[r][d] = 0;
    for (int i = 0; i < N; i++)
        if (IDX[i] != pad)
            for (int d = 0; d < DIM; d++) out[IDX[i]][d] += i * DIM + d + 1;
}

static void check_on(ts_device dev, ts_dtype dt) {
    double w[ROWS * DIM], up[N * DIM], got[ROWS * DIM], y[N * DIM];
    ts_test_fill_uniform(w, ROWS * DIM, 7);
    for (int i = 0; i < N * DIM; i++) up[i] = i + 1;
    for (int64_t pad = -1; pad < ROWS; pad++) {
        ts_scope_begin();
        ts_tensor *wt = ts_test_tensor_f64(TS_SHAPE(ROWS, DIM), w, dt, dev);
        ts_set_requires_grad(wt, true);
        ts_tensor *idx = ts_tensor_i64(TS_SHAPE(N), IDX, (ts_opts){.device = dev});
        ts_tensor *out = ts_embedding_padded(wt, idx, pad);
        CHECK(ts_test_shape_is(out, TS_SHAPE(N, DIM)));
        /* the values: every use's row, the padding row's too (PyTorch's forward) */
        bool same = ts_test_read_f64(out, y, N * DIM);
        double wr[ROWS * DIM];
        same = same && ts_test_read_f64(wt, wr, ROWS * DIM);
        for (int i = 0; same && i < N; i++)
            for (int d = 0; d < DIM; d++) same &= y[i * DIM + d] == wr[IDX[i] * DIM + d];
        CHECK(same);
        ts_tensor *g = ts_test_tensor_f64(TS_SHAPE(N, DIM), up, dt, dev);
        CHECK(ts_backward(ts_sum(ts_mul(out, g))) == TS_OK);
        double want[ROWS][DIM];
        ref_grad(pad, want);
        bool ok = ts_test_read_f64(ts_grad(wt), got, ROWS * DIM);
        for (int r = 0; ok && r < ROWS; r++)
            for (int d = 0; d < DIM; d++) ok &= got[r * DIM + d] == want[r][d];
        CHECK(ok);
        if (!ok)
            ts_test_failf(__FILE__, __LINE__, "padding_idx %lld on %s (%s): row 0 grad %g %g %g",
                          (long long)pad, ts_device_str(dev), ts_dtype_name(dt), got[0], got[1],
                          got[2]);
        ts_scope_end();
    }
}

static void test_values_and_grads(const ts_device *devs, int nd) {
    for (int k = 0; k < nd; k++) {
        check_on(devs[k], TS_F64);
        check_on(devs[k], TS_F32);
    }
}

/* -1 is ts_embedding's graph; no graph needed: the plain rows; refusals */
static void test_edges(void) {
    ts_scope_begin();
    double w[ROWS * DIM];
    ts_test_fill_uniform(w, ROWS * DIM, 3);
    ts_tensor *wt = ts_test_tensor_f64(TS_SHAPE(ROWS, DIM), w, TS_F32, ts_cpu());
    ts_tensor *idx = ts_tensor_i64(TS_SHAPE(N), IDX, (ts_opts){0});
    ts_tensor *a = ts_embedding_padded(wt, idx, 2), *b = ts_embedding(wt, idx);
    CHECK(a && b && ts_equal(a, b));
    CHECK(!ts_embedding_padded(wt, idx, ROWS));
    CHECK_ERR_HAS(TS_ERR_ARG, "padding_idx must be within num_embeddings");
    CHECK(!ts_embedding_padded(wt, idx, -2));
    CHECK_ERR(TS_ERR_ARG);
    ts_scope_end();
}

int main(void) {
    ts_device devs[TS_TEST_MAX_DEVICES];
    const int nd = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    test_values_and_grads(devs, nd);
    test_edges();
    return ts_test_finish();
}
