/* test_tensor_move.c — ts_tensor_move_ / ts_tensor_cast_: in-place moves between devices and
 * dtypes keep the handle, values, requires_grad and grad, on every device pair the build has;
 * ts_tensor_set_data makes a handle share another tensor's storage. */
#include <math.h>

#include "ts_test.h"

static double at(ts_tensor *t, int64_t i) {
    ts_scope_begin();
    double v = ts_item(ts_select(ts_flatten(ts_to_dtype(t, TS_F64), 0, -1), 0, i));
    ts_scope_end();
    return v;
}

static int64_t live(ts_device d) {
    ts_mem_stats s;
    ts_memory_stats(d, &s);
    return s.live_tensors;
}

static void check_move(ts_device from, ts_device to) {
    ts_tensor *p = ts_tensor_f32(TS_SHAPE(2, 2), (const float[]){1, 2, 3, 4},
                                 (ts_opts){.device = from, .requires_grad = true});
    ts_tensor *g = ts_full(TS_SHAPE(2, 2), 0.5, (ts_opts){.device = from});
    CHECK(ts_set_grad(p, g) == TS_OK);
    ts_release(g);
    CHECK(ts_tensor_move_(p, to) == TS_OK);
    CHECK(ts_device_equal(ts_device_of(p), to));
    CHECK(ts_device_equal(ts_device_of(ts_grad(p)), to));
    CHECK(ts_requires_grad(p) && ts_is_leaf(p));
    CHECK_NEAR(at(p, 3), 4.0, 0);
    CHECK_NEAR(at(ts_grad(p), 1), 0.5, 0);
    ts_release(p);
}

static void check_cast(ts_device d) {
    ts_tensor *v = ts_arange(0, 6, 1, (ts_opts){.device = d});
    ts_tensor *view = ts_slice(v, 0, 1, 6, 2); /* 1, 3, 5: a strided view becomes contiguous */
    CHECK(ts_tensor_cast_(view, TS_F64) == TS_OK);
    CHECK_EQ(ts_dtype_of(view), TS_F64);
    CHECK(ts_is_contiguous(view));
    CHECK_NEAR(at(view, 2), 5.0, 0);
    CHECK_NEAR(at(v, 5), 5.0, 0); /* the base is untouched */
    ts_release(view);
    ts_release(v);
}

static void check_set_data(ts_device from, ts_device to) {
    ts_tensor *p = ts_zeros(TS_SHAPE(3), (ts_opts){.device = from, .requires_grad = true});
    ts_tensor *src = ts_arange(0, 6, 1, (ts_opts){.device = to, .dtype = TS_F64});
    ts_tensor *view = ts_slice(src, 0, 1, 6, 2); /* 1, 3, 5 */
    CHECK(ts_tensor_set_data(p, view) == TS_OK);
    CHECK(ts_device_equal(ts_device_of(p), to));
    CHECK_EQ(ts_dtype_of(p), TS_F64);
    CHECK(ts_requires_grad(p) && ts_is_leaf(p));
    CHECK(ts_shares_storage(p, src));
    CHECK_NEAR(at(p, 2), 5.0, 0);
    ts_release(view);
    ts_release(src); /* p keeps the storage alive */
    CHECK_NEAR(at(p, 1), 3.0, 0);
    ts_release(p);
}

static void check_errors(void) {
    CHECK(ts_tensor_set_data(NULL, NULL) == TS_ERR_ARG);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_tensor_move_(NULL, ts_cpu()) == TS_ERR_ARG);
    CHECK_ERR_HAS(TS_ERR_ARG, "tensor_move_");
    ts_tensor *t = ts_zeros(TS_SHAPE(2), (ts_opts){0});
    CHECK(ts_tensor_cast_(t, (ts_dtype)99) == TS_ERR_DTYPE);
    CHECK_ERR(TS_ERR_DTYPE);
    CHECK(ts_tensor_move_(t, ts_sim(99)) != TS_OK);
    CHECK(ts_device_equal(ts_device_of(t), ts_cpu()));
    ts_error_clear();
    ts_release(t);
}

int main(void) {
    ts_device devs[TS_TEST_MAX_DEVICES];
    int n = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    for (int i = 0; i < n; i++) {
        check_cast(devs[i]);
        for (int j = 0; j < n; j++) check_move(devs[i], devs[j]), check_set_data(devs[i], devs[j]);
    }
    check_errors();
    for (int i = 0; i < n; i++) CHECK_EQ(live(devs[i]), 0); /* nothing leaked, counts right */
    return ts_test_finish();
}
