/* test_storage_set.c — tessera/storage.h on cpu and sim: the storage as a tensor of bytes or
 * elements, set_ in its three forms, as_strided_, is_set_to; writes through one handle seen by
 * the other; the extent, dtype, device and autograd refusals; no tensor or byte leaked. */
#include <string.h>

#include "tessera/inplace.h"
#include "tessera/storage.h"
#include "ts_test.h"

static double at(ts_tensor *t, int64_t i) { /* element i of a 1-D tensor */
    return ts_item(ts_select(t, 0, i));
}

static void test_storage_view(ts_device dev) {
    ts_scope_begin();
    const ts_opts o = {.dtype = TS_F32, .device = dev};
    ts_tensor *x = ts_narrow(ts_arange(0, 6, 1, o), 0, 2, 3); /* offset 2: the view starts at 0 */
    ts_tensor *bytes = ts_storage_view(x, TS_U8);
    CHECK(bytes && ts_dtype_of(bytes) == TS_U8 && ts_numel(bytes) == 24 && ts_ndim(bytes) == 1);
    ts_tensor *elems = ts_storage_view(x, TS_F32);
    CHECK(elems && ts_numel(elems) == 6 && ts_storage_offset(elems) == 0);
    for (int i = 0; i < 6; i++) CHECK(at(elems, i) == i);
    float three = 3.0f; /* the bytes of element 4 (x[2]) rewritten to 3.0f reach x */
    unsigned char b[4];
    memcpy(b, &three, 4);
    for (int k = 0; k < 4; k++) CHECK(ts_fill_(ts_select(bytes, 0, 16 + k), b[k]) != NULL);
    CHECK(at(x, 2) == 3.0);
    ts_tensor *d = ts_storage_view(x, TS_F64); /* 24 bytes: three doubles */
    CHECK(d && ts_numel(d) == 3);
    ts_tensor *odd = ts_storage_view(ts_ones(TS_SHAPE(5), (ts_opts){.dtype = TS_U8, .device = dev}),
                                     TS_F32); /* 5 bytes: one whole float */
    CHECK(odd && ts_numel(odd) == 1);
    CHECK(ts_data_ptr(x) == ts_data_ptr(elems) + 2 * sizeof(float)); /* offset 2 */
    CHECK(ts_data_ptr(ts_narrow(x, 0, 1, 2)) == ts_data_ptr(x) + sizeof(float));
    CHECK(ts_data_ptr(ts_zeros(TS_SHAPE(0), o)) == 0);
    ts_error_clear();
    CHECK(!ts_data_ptr(NULL));
    CHECK_ERR_HAS(TS_ERR_ARG, "data_ptr: tensor is NULL");
    ts_error_clear();
    CHECK(!ts_storage_view(x, (ts_dtype)99));
    CHECK_ERR(TS_ERR_DTYPE);
    CHECK(!ts_storage_view(NULL, TS_U8));
    ts_error_clear();
    ts_scope_end();
}

static void test_set_tensor(ts_device dev) {
    ts_scope_begin();
    const ts_opts o = {.dtype = TS_F32, .device = dev};
    ts_tensor *src = ts_t(ts_reshape(ts_arange(0, 6, 1, o), TS_SHAPE(2, 3))); /* [3, 2], strided */
    ts_tensor *x = ts_zeros(TS_SHAPE(4), o);
    CHECK(ts_set_(x, src) == x && ts_is_set_to(x, src) && ts_is_set_to(src, x));
    CHECK(ts_ndim(x) == 2 && ts_size(x, 0) == 3 && ts_stride(x, 0) == 1 && ts_stride(x, 1) == 3);
    CHECK(ts_item(ts_select(ts_select(x, 0, 2), 0, 1)) == 5); /* x[2][1] = src[2][1] = 5 */
    CHECK(ts_fill_(ts_select(ts_select(x, 0, 1), 0, 0), 42) != NULL);
    CHECK(ts_item(ts_select(ts_select(src, 0, 1), 0, 0)) == 42); /* the write reached src */
    CHECK(ts_set_(x, x) == x);
    /* set_(y, y) leaves y as it was: not a view, so an in-place op whose operand requires grad
     * is still allowed on it (as in PyTorch, where y._is_view() stays False) */
    ts_tensor *y = ts_zeros(TS_SHAPE(3), o);
    const uint64_t v0 = ts_version(y);
    CHECK(ts_set_(y, y) == y && ts_numel(y) == 3);
    CHECK(ts_version(y) == v0 + 1); /* still a write for PyTorch: y._version goes up */
    CHECK(ts_check_inplace(y, true, "mul_") == TS_OK);
    CHECK(!ts_is_set_to(x, ts_contiguous(src)));
    CHECK(!ts_is_set_to(x, ts_narrow(src, 0, 0, 2)));
    CHECK_OK();
    CHECK(!ts_set_(x, ts_zeros(TS_SHAPE(2), (ts_opts){.dtype = TS_F64, .device = dev})));
    CHECK_ERR_HAS(TS_ERR_DTYPE, "set_: could not set tensor of type float64");
    ts_device other = ts_device_equal(dev, ts_cpu()) ? ts_sim(0) : ts_cpu();
    CHECK(!ts_set_(x, ts_zeros(TS_SHAPE(2), (ts_opts){.dtype = TS_F32, .device = other})));
    CHECK_ERR_HAS(TS_ERR_DEVICE, "set_");
    CHECK(!ts_set_(x, NULL));
    CHECK_ERR(TS_ERR_ARG);
    ts_error_clear();
    CHECK(!ts_set_(NULL, x)); /* the message names the argument */
    CHECK_ERR_HAS(TS_ERR_ARG, "set_: self is NULL");
    ts_error_clear();
    ts_scope_end();
}

static void test_set_storage(ts_device dev) {
    ts_scope_begin();
    const ts_opts o = {.dtype = TS_F32, .device = dev};
    ts_tensor *src = ts_arange(0, 10, 1, o);
    ts_tensor *x = ts_zeros(TS_SHAPE(1), o);
    CHECK(ts_set_storage_(x, src, 1, TS_SHAPE(3, 2), (const int64_t[]){3, 1}) == x);
    CHECK(ts_storage_offset(x) == 1 && ts_stride(x, 0) == 3 && ts_stride(x, 1) == 1);
    CHECK(ts_item(ts_select(ts_select(x, 0, 2), 0, 1)) == 8); /* 1 + 2*3 + 1 */
    CHECK(ts_set_storage_(x, src, 4, TS_SHAPE(2, 3), NULL) == x && ts_stride(x, 0) == 3);
    CHECK(ts_item(ts_select(ts_select(x, 0, 1), 0, 2)) == 9); /* the last element: in bounds */
    /* the storage's bytes, read as another dtype: two floats of 1.0 as one double's halves */
    ts_tensor *d = ts_zeros(TS_SHAPE(1), (ts_opts){.dtype = TS_F64, .device = dev});
    CHECK(ts_set_storage_(d, src, 2, TS_SHAPE(2), NULL) == d && ts_dtype_of(d) == TS_F64);
    double ref[2];
    float f[10];
    for (int i = 0; i < 10; i++) f[i] = (float)i;
    memcpy(ref, f + 4, sizeof ref); /* doubles 2 and 3 of the storage: floats 4..7 */
    CHECK(at(d, 0) == ref[0] && at(d, 1) == ref[1]);
    CHECK(ts_set_storage_(x, src, 10, TS_SHAPE(0), NULL) == x &&
          ts_numel(x) == 0); /* empty, at end */
    CHECK_OK();
    /* a storage of no bytes takes empty geometries (they need none) */
    ts_tensor *none = ts_zeros(TS_SHAPE(0), o);
    CHECK(ts_set_storage_(x, none, 0, TS_SHAPE(0, 3), NULL) == x && ts_numel(x) == 0 &&
          ts_ndim(x) == 2);
    CHECK(ts_as_strided_(none, TS_SHAPE(2, 0), (const int64_t[]){1, 1}, 0) == none &&
          ts_ndim(none) == 2 && ts_numel(none) == 0);
    CHECK_OK();
    /* a 0-dim geometry: one element, at the offset */
    CHECK(ts_set_storage_(x, src, 7, TS_SHAPE(), NULL) == x && ts_ndim(x) == 0 && ts_item(x) == 7);
    CHECK_OK();
    CHECK(!ts_set_storage_(x, src, 5, TS_SHAPE(2, 3), NULL)); /* 5 + 6 = 11 > 10 */
    CHECK_ERR_HAS(TS_ERR_ARG,
                  "requiring a storage size of 44 are out of bounds for storage of size 40");
    CHECK(!ts_set_storage_(d, src, 4, TS_SHAPE(2), NULL)); /* doubles 4, 5: 48 > 40 bytes */
    CHECK_ERR_HAS(TS_ERR_ARG, "storage size of 48");
    CHECK(!ts_set_storage_(x, src, -1, TS_SHAPE(2), NULL));
    CHECK_ERR_HAS(TS_ERR_ARG, "storage_offset must be >= 0");
    CHECK(!ts_set_storage_(x, src, 0, TS_SHAPE(2), (const int64_t[]){-1}));
    CHECK_ERR_HAS(TS_ERR_ARG, "negative");
    CHECK(!ts_set_storage_(x, src, 0, TS_SHAPE(-2), NULL));
    CHECK_ERR_HAS(TS_ERR_ARG, "negative");
    ts_scope_end();
}

static void test_as_strided_empty(ts_device dev) {
    ts_scope_begin();
    const ts_opts o = {.dtype = TS_F32, .device = dev};
    ts_tensor *x = ts_arange(0, 4, 1, o);
    ts_tensor *alias = ts_reshape(x, TS_SHAPE(4)); /* another handle on the storage */
    CHECK(ts_as_strided_(x, TS_SHAPE(2), (const int64_t[]){2}, 1) == x);
    CHECK(ts_stride(x, 0) == 2 && ts_storage_offset(x) == 1 && at(x, 0) == 1 && at(x, 1) == 3);
    CHECK(ts_as_strided_(x, TS_SHAPE(2), (const int64_t[]){1}, -1) == x); /* keeps offset 1 */
    CHECK(ts_storage_offset(x) == 1 && at(x, 1) == 2);
    CHECK(ts_fill_(x, 7) != NULL && at(alias, 1) == 7 && at(alias, 2) == 7 && at(alias, 3) == 3);
    CHECK_OK();
    CHECK(!ts_as_strided_(x, TS_SHAPE(3), (const int64_t[]){2}, 0));
    CHECK_ERR_HAS(TS_ERR_ARG, "as_strided_: sizes [3], storage offset 0 and itemsize 4 requiring a "
                              "storage size of 20 are out of bounds for storage of size 16");
    CHECK(!ts_as_strided_(x, TS_SHAPE(2), NULL, 0));
    CHECK_ERR(TS_ERR_ARG);
    /* set_(): a new empty storage; the old one stays with its other holders */
    CHECK(ts_set_empty_(x) == x && ts_ndim(x) == 1 && ts_numel(x) == 0);
    CHECK(ts_numel(ts_storage_view(x, TS_U8)) == 0 && ts_device_equal(ts_device_of(x), dev));
    CHECK(at(alias, 1) == 7);
    CHECK_OK();
    /* autograd: refused for a leaf that requires grad and for a tensor with history */
    ts_tensor *g = ts_ones(TS_SHAPE(3), o);
    ts_set_requires_grad(g, true);
    CHECK(!ts_set_(g, ts_zeros(TS_SHAPE(3), o)));
    CHECK_ERR_HAS(TS_ERR_STATE, "set_: a leaf Variable that requires grad is being used in an "
                                "in-place operation.");
    CHECK(!ts_as_strided_(g, TS_SHAPE(1), (const int64_t[]){1}, 0));
    CHECK_ERR_HAS(TS_ERR_STATE, "as_strided_: a leaf Variable");
    ts_tensor *h = ts_mul_scalar(g, 2.0);
    ts_no_grad_begin(); /* a leaf's data swapped under no_grad: allowed */
    CHECK(ts_set_(g, ts_zeros(TS_SHAPE(5), o)) == g && ts_numel(g) == 5 && ts_requires_grad(g));
    CHECK(!ts_set_empty_(h)); /* history: still refused */
    CHECK_ERR(TS_ERR_UNSUPPORTED);
    ts_no_grad_end();
    CHECK(!ts_set_empty_(h));
    CHECK_ERR_HAS(TS_ERR_UNSUPPORTED, "autograd history");
    CHECK(!ts_set_storage_(h, g, 0, TS_SHAPE(1), NULL));
    CHECK_ERR(TS_ERR_UNSUPPORTED);
    ts_scope_end();
}

int main(void) {
    if (ts_device_count(TS_SIM) < 1) ts_sim_configure(2, 0);
    const ts_device devs[2] = {ts_cpu(), ts_sim(0)};
    for (int i = 0; i < 2; i++) {
        ts_mem_stats before, after;
        ts_memory_stats(devs[i], &before);
        test_storage_view(devs[i]);
        test_set_tensor(devs[i]);
        test_set_storage(devs[i]);
        test_as_strided_empty(devs[i]);
        ts_memory_stats(devs[i], &after);
        CHECK_EQ(after.live_tensors, before.live_tensors);
        CHECK_EQ(after.allocated, before.allocated);
    }
    CHECK_EQ(ts_scope_depth(), 0);
    return ts_test_finish();
}
