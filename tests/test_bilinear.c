/* test_bilinear.c — ts_bilinear (src/nn/bilinear.c), torch.nn.functional.bilinear, on every device
 * against float64 loops (batched 3-D, 2-D and unbatched 1-D inputs, with and without bias),
 * ts_gradcheck in all four inputs, and the refusals. */
#include <math.h>
#include <stdio.h>

#include "host_read_util.h"
#include "tessera.h"
#include "ts_test.h"

static ts_device devs[TS_TEST_MAX_DEVICES];
static int ndev;

enum { OUT = 3, IN1 = 4, IN2 = 2, NMAX = 6 };
static double x1v[NMAX * IN1], x2v[NMAX * IN2], wv[OUT * IN1 * IN2], bv[OUT];

static void fill(double *v, int n, int seed) {
    for (int i = 0; i < n; i++) v[i] = sin(1.7 * (i + 1) + 0.9 * seed);
}
static ts_tensor *mk(ts_shape s, const double *v, ts_device d, ts_dtype dt, bool rg) {
    ts_tensor *t = ts_to(ts_to_dtype(ts_tensor_f64(s, v, (ts_opts){.dtype = TS_F64}), dt), d);
    t = ts_detach(t);
    if (rg) ts_set_requires_grad(t, true);
    return t;
}
/* input1 / input2 of batch shape batch (nb dims) */
static ts_shape with_last(const int64_t *batch, int nb, int64_t last) {
    ts_shape s = {.ndim = nb + 1};
    for (int i = 0; i < nb; i++) s.dims[i] = batch[i];
    s.dims[nb] = last;
    return s;
}

static void test_values(void) {
    const int64_t batches[3][2] = {{2, 3}, {5, 0}, {0, 0}};
    const int nbs[3] = {2, 1, 0};
    const ts_dtype dts[] = {TS_F64, TS_F32};
    double ref[NMAX * OUT];
    for (int di = 0; di < ndev; di++)
        for (int ti = 0; ti < 2; ti++)
            for (int bi = 0; bi < 3; bi++)
                for (int hb = 0; hb < 2; hb++) {
                    ts_scope_begin();
                    int nb = nbs[bi];
                    int64_t n = 1;
                    for (int k = 0; k < nb; k++) n *= batches[bi][k];
                    for (int64_t r = 0; r < n; r++)
                        for (int o = 0; o < OUT; o++) {
                            double s = hb ? bv[o] : 0;
                            for (int i = 0; i < IN1; i++)
                                for (int j = 0; j < IN2; j++)
                                    s += x1v[r * IN1 + i] * wv[(o * IN1 + i) * IN2 + j] *
                                         x2v[r * IN2 + j];
                            ref[r * OUT + o] = s;
                        }
                    ts_tensor *y = ts_bilinear(
                        mk(with_last(batches[bi], nb, IN1), x1v, devs[di], dts[ti], false),
                        mk(with_last(batches[bi], nb, IN2), x2v, devs[di], dts[ti], false),
                        mk(TS_SHAPE(OUT, IN1, IN2), wv, devs[di], dts[ti], false),
                        hb ? mk(TS_SHAPE(OUT), bv, devs[di], dts[ti], false) : NULL);
                    /* sums of 8 products of values within 1: a few roundings of each */
                    double tol = ti == 0 ? 1e-14 : 2e-6;
                    bool ok = y && ts_dtype_of(y) == dts[ti] && ts_ndim(y) == nb + 1 &&
                              ts_size(y, nb) == OUT && near_all(y, ref, n * OUT, tol);
                    ts_test_record(ok);
                    if (!ok)
                        ts_test_failf(__FILE__, __LINE__, "bilinear batch %d bias %d %s on %s%s",
                                      bi, hb, ts_dtype_name(dts[ti]), ts_device_str(devs[di]),
                                      ts_test_error_str());
                    ts_error_clear();
                    ts_scope_end();
                }
}

static ts_tensor *bl_fn(ts_tensor *const *in, int n, void *ctx) {
    (void)ctx;
    return ts_bilinear(in[0], in[1], in[2], n > 3 ? in[3] : NULL);
}

static void test_grads(void) {
    const ts_gradcheck_opts go = {.eps = 1e-6, .atol = 1e-7, .rtol = 1e-6};
    for (int di = 0; di < ndev; di++)
        for (int hb = 0; hb < 2; hb++) {
            ts_scope_begin();
            ts_tensor *in[4] = {mk(TS_SHAPE(2, 3, IN1), x1v, devs[di], TS_F64, true),
                                mk(TS_SHAPE(2, 3, IN2), x2v, devs[di], TS_F64, true),
                                mk(TS_SHAPE(OUT, IN1, IN2), wv, devs[di], TS_F64, true),
                                mk(TS_SHAPE(OUT), bv, devs[di], TS_F64, true)};
            bool ok = ts_gradcheck(bl_fn, NULL, in, hb ? 4 : 3, go);
            ts_test_record(ok);
            if (!ok)
                ts_test_failf(__FILE__, __LINE__, "bilinear gradcheck bias %d on %s%s", hb,
                              ts_device_str(devs[di]), ts_test_error_str());
            ts_error_clear();
            ts_scope_end();
        }
}

static void test_errors(void) {
    ts_scope_begin();
    ts_device c = ts_cpu();
    ts_tensor *a = mk(TS_SHAPE(2, IN1), x1v, c, TS_F64, false);
    ts_tensor *b = mk(TS_SHAPE(2, IN2), x2v, c, TS_F64, false);
    ts_tensor *w = mk(TS_SHAPE(OUT, IN1, IN2), wv, c, TS_F64, false);
    CHECK(ts_bilinear(b, b, w, NULL) == NULL);
    CHECK_ERR_HAS(TS_ERR_SHAPE, "input1 size does not match");
    CHECK(ts_bilinear(a, a, w, NULL) == NULL);
    CHECK_ERR_HAS(TS_ERR_SHAPE, "input2 size does not match");
    CHECK(ts_bilinear(a, mk(TS_SHAPE(3, IN2), x2v, c, TS_F64, false), w, NULL) == NULL);
    CHECK_ERR_HAS(TS_ERR_SHAPE, "batch dimensions do not match");
    CHECK(ts_bilinear(a, mk(TS_SHAPE(1, 2, IN2), x2v, c, TS_F64, false), w, NULL) == NULL);
    CHECK_ERR_HAS(TS_ERR_SHAPE, "input dimensions do not match");
    CHECK(ts_bilinear(a, b, mk(TS_SHAPE(OUT, IN1 * IN2), wv, c, TS_F64, false), NULL) == NULL);
    CHECK_ERR_HAS(TS_ERR_SHAPE, "weight must be 3-D");
    CHECK(ts_bilinear(a, b, w, mk(TS_SHAPE(OUT + 1), wv, c, TS_F64, false)) == NULL);
    CHECK_ERR_HAS(TS_ERR_SHAPE, "bias size");
    CHECK(ts_bilinear(a, mk(TS_SHAPE(2, IN2), x2v, c, TS_F32, false), w, NULL) == NULL);
    CHECK_ERR_HAS(TS_ERR_DTYPE, "bilinear");
    CHECK(ts_bilinear(NULL, b, w, NULL) == NULL);
    CHECK(ts_error() != TS_OK);
    ts_error_clear();
    if (ndev > 1) {
        CHECK(ts_bilinear(a, mk(TS_SHAPE(2, IN2), x2v, devs[1], TS_F64, false), w, NULL) == NULL);
        CHECK_ERR_HAS(TS_ERR_DEVICE, "bilinear");
    }
    ts_scope_end();
}

int main(void) {
    ndev = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    fill(x1v, NMAX * IN1, 1);
    fill(x2v, NMAX * IN2, 2);
    fill(wv, OUT * IN1 * IN2, 3);
    fill(bv, OUT, 4);
    test_values();
    test_grads();
    test_errors();
    CHECK_OK();
    return ts_test_finish();
}
