/* test_channel_shuffle.c — ts_channel_shuffle (src/nn/channel_shuffle.c),
 * torch.nn.functional.channel_shuffle: output channel c' = j g + i takes input channel i (C / g) +
 * j, checked by index on every device for 3-, 4- and 5-D inputs, floating and integer;
 * ts_gradcheck; the refusals. */
#include <math.h>
#include <stdio.h>

#include "host_read_util.h"
#include "tessera.h"
#include "ts_test.h"

static ts_device devs[TS_TEST_MAX_DEVICES];
static int ndev;

static void test_values(void) {
    const ts_shape shapes[] = {TS_SHAPE(2, 6, 5), TS_SHAPE(2, 12, 2, 3), TS_SHAPE(1, 8, 2, 1, 3)};
    const int64_t groups[] = {3, 4, 2};
    const ts_dtype dts[] = {TS_F64, TS_F32, TS_I64};
    static double v[512], ref[512];
    for (int di = 0; di < ndev; di++)
        for (int si = 0; si < 3; si++)
            for (int ti = 0; ti < 3; ti++) {
                ts_scope_begin();
                ts_shape s = shapes[si];
                int64_t n = s.dims[0], c = s.dims[1], rest = 1, g = groups[si], total;
                for (int k = 2; k < s.ndim; k++) rest *= s.dims[k];
                total = n * c * rest;
                for (int64_t i = 0; i < total; i++) v[i] = (double)(i * 7 % 101) - 50;
                for (int64_t b = 0; b < n; b++)
                    for (int64_t co = 0; co < c; co++) {
                        int64_t j = co / g, i = co % g, ci = i * (c / g) + j;
                        for (int64_t r = 0; r < rest; r++)
                            ref[(b * c + co) * rest + r] = v[(b * c + ci) * rest + r];
                    }
                ts_tensor *x =
                    ts_to(ts_to_dtype(ts_tensor_f64(s, v, (ts_opts){.dtype = TS_F64}), dts[ti]),
                          devs[di]);
                ts_tensor *y = ts_channel_shuffle(x, g);
                bool ok = y && ts_dtype_of(y) == dts[ti] && ts_ndim(y) == s.ndim &&
                          near_all(y, ref, total, 0);
                for (int k = 0; ok && k < s.ndim; k++) ok = ts_size(y, k) == s.dims[k];
                ts_test_record(ok);
                if (!ok)
                    ts_test_failf(__FILE__, __LINE__, "channel_shuffle shape %d %s on %s%s", si,
                                  ts_dtype_name(dts[ti]), ts_device_str(devs[di]),
                                  ts_test_error_str());
                ts_error_clear();
                ts_scope_end();
            }
}

static ts_tensor *cs_fn(ts_tensor *const *in, int n, void *ctx) {
    (void)n;
    return ts_channel_shuffle(in[0], *(const int64_t *)ctx);
}

static void test_grads(void) {
    double v[2 * 6 * 3];
    for (int i = 0; i < 36; i++) v[i] = sin(1.3 * i + 0.2);
    const int64_t g = 3;
    for (int di = 0; di < ndev; di++) {
        ts_scope_begin();
        ts_tensor *x = ts_detach(
            ts_to(ts_tensor_f64(TS_SHAPE(2, 6, 3), v, (ts_opts){.dtype = TS_F64}), devs[di]));
        ts_set_requires_grad(x, true);
        bool ok = ts_gradcheck(cs_fn, (void *)&g, &x, 1, (ts_gradcheck_opts){0});
        ts_test_record(ok);
        if (!ok)
            ts_test_failf(__FILE__, __LINE__, "channel_shuffle gradcheck on %s%s",
                          ts_device_str(devs[di]), ts_test_error_str());
        ts_error_clear();
        ts_scope_end();
    }
}

static void test_errors(void) {
    ts_scope_begin();
    double v[24] = {0};
    ts_tensor *x = ts_tensor_f64(TS_SHAPE(1, 6, 4), v, (ts_opts){.dtype = TS_F64});
    CHECK(ts_channel_shuffle(x, 4) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "divisible by groups");
    CHECK(ts_channel_shuffle(x, 0) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "must be positive");
    CHECK(ts_channel_shuffle(ts_tensor_f64(TS_SHAPE(6, 4), v, (ts_opts){.dtype = TS_F64}), 2) ==
          NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "at least 3 dimensions");
    CHECK(ts_channel_shuffle(NULL, 2) == NULL);
    CHECK(ts_error() != TS_OK);
    ts_error_clear();
    ts_scope_end();
}

int main(void) {
    ndev = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    test_values();
    test_grads();
    test_errors();
    CHECK_OK();
    return ts_test_finish();
}
