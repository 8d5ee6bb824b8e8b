/* test_errors.c — every kind of user error: its code, a message naming the op and operands, NULL
 * propagation that keeps the first error, thread-local state, and no leaks on any error path. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ts_test.h"

/* The pending error has `code` and its message contains every one of the NULL-terminated
 * fragments; clears it. */
static bool err_is(ts_status code, const char *const *frags) {
    bool ok = ts_error() == code;
    for (int i = 0; frags[i]; i++) ok = ok && strstr(ts_error_message(), frags[i]) != NULL;
    if (!ok)
        fprintf(stderr, "  expected %s, got %s: \"%s\"\n", ts_status_string(code),
                ts_status_string(ts_error()), ts_error_message());
    ts_error_clear();
    return ok;
}
#define ERR_IS(code, ...) err_is(code, (const char *const[]){__VA_ARGS__, NULL})

static ts_tensor *ones(ts_shape s, ts_dtype dt, ts_device d) {
    return ts_ones(s, (ts_opts){.dtype = dt, .device = d});
}

static void test_device_errors(void) {
    ts_scope_begin();
    const ts_device s0 = ts_sim(0), s1 = ts_sim(1), cpu = ts_cpu();
    ts_tensor *a = ones(TS_SHAPE(3), TS_F32, s0), *c = ones(TS_SHAPE(3), TS_F32, cpu);
    CHECK(ts_add(a, c) == NULL);
    CHECK_EQ(ts_error(), TS_ERR_DEVICE);
    CHECK_STREQ(ts_error_message(), "add: expected all tensors to be on the same device, but found "
                                    "at least two devices, sim:0 and cpu");
    ts_error_clear();
    CHECK_STREQ(ts_error_message(), "");
    /* the program goes on working */
    ts_tensor *two = ts_add(a, a);
    CHECK(two && ts_item(ts_select(two, 0, 2)) == 2);
    CHECK_OK();
    CHECK(ts_mul(c, a) == NULL);
    CHECK(ERR_IS(TS_ERR_DEVICE, "mul: ", "cpu and sim:0"));
    ts_tensor *b = ones(TS_SHAPE(3), TS_F32, s1);
    CHECK(ts_sub(a, b) == NULL);
    CHECK(ERR_IS(TS_ERR_DEVICE, "sub: ", "sim:0 and sim:1"));
    CHECK(ts_add_(a, c) == NULL);
    CHECK(ERR_IS(TS_ERR_DEVICE, "add_", "sim:0", "cpu"));
    CHECK(ts_matmul(ones(TS_SHAPE(2, 3), TS_F32, s0), ones(TS_SHAPE(3, 2), TS_F32, s1)) == NULL);
    CHECK(ERR_IS(TS_ERR_DEVICE, "sim:0", "sim:1"));
    ts_tensor *list[3] = {a, a, b};
    CHECK(ts_cat(list, 3, 0) == NULL);
    CHECK(ERR_IS(TS_ERR_DEVICE, "cat", "sim:0", "sim:1"));
    CHECK(ts_where(ts_gt_scalar(a, 0), a, c) == NULL);
    CHECK(ERR_IS(TS_ERR_DEVICE, "where", "sim:0", "cpu"));
    /* a 1-element cpu tensor that is not 0-dim does not get the scalar exemption */
    CHECK(ts_add(a, ones(TS_SHAPE(1), TS_F32, cpu)) == NULL);
    CHECK(ERR_IS(TS_ERR_DEVICE, "add", "sim:0 and cpu"));

    /* a 0-dim cpu tensor combines with a tensor on any device (PyTorch's rule) */
    ts_tensor *sc = ts_scalar(2.5, (ts_opts){.device = cpu});
    ts_tensor *r1 = ts_add(a, sc), *r2 = ts_sub(sc, a), *r3 = ts_mul(b, sc);
    CHECK(r1 && ts_device_equal(ts_device_of(r1), s0) && ts_item(ts_select(r1, 0, 0)) == 3.5);
    CHECK(r2 && ts_device_equal(ts_device_of(r2), s0) && ts_item(ts_select(r2, 0, 1)) == 1.5);
    CHECK(r3 && ts_device_equal(ts_device_of(r3), s1) && ts_item(ts_select(r3, 0, 2)) == 2.5);
    ts_tensor *isc = ts_scalar(3, (ts_opts){.device = cpu, .dtype = TS_I64});
    ts_tensor *r4 = ts_mul(ones(TS_SHAPE(2), TS_I32, s0), isc);
    CHECK(r4 && ts_dtype_of(r4) == TS_I32 && ts_device_equal(ts_device_of(r4), s0));
    CHECK(r4 && ts_item(ts_select(r4, 0, 1)) == 3);
    CHECK(ts_add_(a, sc) == a && ts_item(ts_select(a, 0, 0)) == 3.5);
    CHECK_OK();
    /* factories and transfers name the device they cannot use */
    CHECK(ts_zeros(TS_SHAPE(2), (ts_opts){.device = ts_sim(9)}) == NULL);
    CHECK(ERR_IS(TS_ERR_DEVICE, "zeros", "sim:9"));
    {
        ts_device absent = ts_cuda(ts_device_count(TS_CUDA)); /* the first GPU not present */
        char name[16];
        snprintf(name, sizeof name, "%s", ts_device_str(absent));
        CHECK(ts_to(a, absent) == NULL);
        CHECK(ERR_IS(TS_ERR_DEVICE, "to", name, "CUDA"));
    }
    CHECK(ts_pin_memory(a) == NULL);
    CHECK(ERR_IS(TS_ERR_DEVICE, "pin_memory", "sim:0"));
    ts_scope_end();
}

static void test_shape_dim_dtype_errors(void) {
    ts_scope_begin();
    const ts_device d = ts_sim(0);
    ts_tensor *a = ones(TS_SHAPE(2, 3), TS_F32, d), *v4 = ones(TS_SHAPE(4), TS_F32, d);
    CHECK(ts_add(a, v4) == NULL);
    CHECK(ERR_IS(TS_ERR_SHAPE, "add: ", "[2, 3]", "[4]", "broadcast"));
    CHECK(ts_mul(ones(TS_SHAPE(5, 1, 3), TS_F32, d), ones(TS_SHAPE(4, 2), TS_F32, d)) == NULL);
    CHECK(ERR_IS(TS_ERR_SHAPE, "mul: ", "[5, 1, 3]", "[4, 2]"));
    CHECK(ts_add(a, ones(TS_SHAPE(3), TS_F32, d)) != NULL);  /* broadcasting that works */
    CHECK(ts_add_(ones(TS_SHAPE(3), TS_F32, d), a) == NULL); /* in place cannot grow */
    CHECK(ERR_IS(TS_ERR_SHAPE, "add_", "[3]", "[2, 3]"));
    CHECK(ts_mm(a, a) == NULL);
    CHECK(ERR_IS(TS_ERR_SHAPE, "mm", "2x3"));
    ts_tensor *pair[2] = {a, ones(TS_SHAPE(2, 4), TS_F32, d)};
    CHECK(ts_cat(pair, 2, 0) == NULL);
    CHECK(ERR_IS(TS_ERR_SHAPE, "cat"));
    CHECK(ts_view(a, TS_SHAPE(4, -1)) == NULL);
    CHECK(ERR_IS(TS_ERR_SHAPE, "view", "[4, -1]", "6"));
    CHECK(ts_item(a) != ts_item(a)); /* NaN */
    CHECK_EQ(ts_error(), TS_ERR_SHAPE);
    CHECK_STREQ(ts_error_message(), "item: a Tensor with 6 elements cannot be converted to Scalar");
    ts_error_clear();
    CHECK(isnan(ts_item(ts_zeros(TS_SHAPE(0), (ts_opts){.device = d}))));
    CHECK(ERR_IS(TS_ERR_SHAPE, "item", "0 elements"));

    /* dims out of range */
    CHECK(ts_sum_dim(a, 2, false) == NULL);
    CHECK(ERR_IS(TS_ERR_ARG, "sum", "out of range", "[-2, 1]", "2"));
    CHECK(ts_softmax(a, -3) == NULL);
    CHECK(ERR_IS(TS_ERR_ARG, "softmax", "out of range", "-3"));
    CHECK(ts_transpose(a, 0, 2) == NULL);
    CHECK(ERR_IS(TS_ERR_ARG, "transpose", "out of range"));
    CHECK(ts_select(a, 0, 2) == NULL);
    CHECK(ERR_IS(TS_ERR_ARG, "select", "index 2"));
    CHECK(ts_narrow(a, 1, 2, 2) == NULL);
    CHECK(ERR_IS(TS_ERR_ARG, "narrow"));
    CHECK(ts_size(a, 5) == -1);
    CHECK(ERR_IS(TS_ERR_ARG, "size", "out of range"));

    /* dtypes */
    ts_tensor *li = ones(TS_SHAPE(3), TS_I64, d);
    CHECK(ts_add_(li, ones(TS_SHAPE(3), TS_F32, d)) == NULL);
    CHECK(ERR_IS(TS_ERR_DTYPE, "add_", "Float", "Long"));
    ts_tensor *bb = ones(TS_SHAPE(3), TS_BOOL, d);
    CHECK(ts_sub(bb, bb) == NULL);
    CHECK(ERR_IS(TS_ERR_DTYPE, "sub", "bool"));
    CHECK(ts_mean(li) == NULL);
    CHECK(ERR_IS(TS_ERR_DTYPE, "mean", "Long"));
    CHECK(ts_mm(a, ts_t(ones(TS_SHAPE(2, 3), TS_F64, d))) == NULL);
    CHECK(ERR_IS(TS_ERR_DTYPE, "mm", "float", "double"));
    CHECK(ts_index_select(a, 0, ones(TS_SHAPE(1), TS_F32, d)) == NULL);
    CHECK(ERR_IS(TS_ERR_DTYPE, "index_select", "float32"));
    CHECK(ts_zeros(TS_SHAPE(2), (ts_opts){.device = d, .dtype = TS_I32, .requires_grad = true}) ==
          NULL);
    CHECK(ERR_IS(TS_ERR_DTYPE, "zeros", "floating point", "int32"));
    CHECK(ts_to_dtype(a, (ts_dtype)42) == NULL);
    CHECK(ERR_IS(TS_ERR_DTYPE, "to_dtype", "42"));
    CHECK(ts_zeros(TS_SHAPE(2), (ts_opts){.device = d, .dtype = (ts_dtype)99}) == NULL);
    CHECK(ERR_IS(TS_ERR_DTYPE, "99"));
    /* bad argument values */
    CHECK(ts_arange(0, 1, 0, (ts_opts){.device = d}) == NULL);
    CHECK(ERR_IS(TS_ERR_ARG, "arange", "step"));
    CHECK(ts_slice(a, 0, 0, 2, 0) == NULL);
    CHECK(ERR_IS(TS_ERR_ARG, "slice", "step"));
    CHECK(ts_zeros(TS_SHAPE(2, -3), (ts_opts){.device = d}) == NULL);
    CHECK(ERR_IS(TS_ERR_SHAPE, "zeros", "-3"));
    CHECK_OK();
    ts_scope_end();
}

static void test_null_and_first_error(void) {
    ts_scope_begin();
    const ts_device d = ts_sim(0);
    ts_tensor *a = ones(TS_SHAPE(3), TS_F32, d);
    CHECK(ts_add(NULL, a) == NULL);
    CHECK_EQ(ts_error(), TS_ERR_ARG);
    CHECK_STREQ(ts_error_message(), "add: a is NULL");
    ts_error_clear();
    CHECK(ts_mul(a, NULL) == NULL);
    CHECK(ERR_IS(TS_ERR_ARG, "mul: b is NULL"));
    ts_tensor *(*unaries[])(ts_tensor *) = {ts_exp,   ts_neg,        ts_sum, ts_contiguous,
                                            ts_clone, ts_zeros_like, ts_t,   ts_squeeze};
    const char *names[] = {"exp",   "neg",        "sum", "contiguous",
                           "clone", "zeros_like", "t",   "squeeze"};
    for (int i = 0; i < 8; i++) {
        CHECK(unaries[i](NULL) == NULL);
        CHECK(ERR_IS(TS_ERR_ARG, names[i], "NULL"));
    }
    CHECK(ts_view(NULL, TS_SHAPE(2)) == NULL);
    CHECK(ERR_IS(TS_ERR_ARG, "view", "NULL"));
    CHECK(ts_to(NULL, ts_cpu()) == NULL);
    CHECK(ERR_IS(TS_ERR_ARG, "to", "NULL"));
    CHECK(ts_copy_(a, NULL) == NULL);
    CHECK(ERR_IS(TS_ERR_ARG, "copy_", "NULL"));
    CHECK_EQ(ts_copy_to_host(NULL, NULL, 0), TS_ERR_ARG);
    ts_error_clear();

    /* a chain after a failure returns NULL and keeps the first error */
    ts_tensor *c = ones(TS_SHAPE(3), TS_F32, ts_cpu());
    ts_tensor *x = ts_add(a, c);                /* fails: devices */
    ts_tensor *y = ts_mul_scalar(ts_exp(x), 2); /* NULL in, NULL out */
    ts_tensor *z = ts_sum(ts_add(y, ts_view(x, TS_SHAPE(3))));
    ts_tensor *w = ts_matmul(z, ts_reshape(ts_t(y), TS_SHAPE(-1)));
    CHECK(!x && !y && !z && !w);
    CHECK_EQ(ts_error(), TS_ERR_DEVICE);
    CHECK(strncmp(ts_error_message(), "add: expected all tensors", 25) == 0);
    /* a later, different error does not overwrite it either */
    CHECK(ts_mm(a, a) == NULL && ts_zeros(TS_SHAPE(-1), (ts_opts){0}) == NULL);
    ts_scope_end();
    ts_scope_end(); /* underflow, but the first error is still the device one */
    CHECK(ERR_IS(TS_ERR_DEVICE, "add: "));
    /* with no pending error, an underflowing scope_end is reported */
    ts_scope_end();
    CHECK(ERR_IS(TS_ERR_STATE, "scope_end"));
    CHECK_EQ(ts_scope_depth(), 0);
    ts_device_pop();
    CHECK(ERR_IS(TS_ERR_STATE, "device_pop"));
    CHECK_STREQ(ts_error_message(), "");
    CHECK_EQ(ts_error(), TS_OK);
}

static void test_oom_and_status(void) {
    ts_scope_begin();
    /* 2^63 bytes: more than any allocator hands out, refused before any malloc; an OOM, not an
     * abort */
    ts_tensor *huge = ts_empty(TS_SHAPE((int64_t)1 << 60), (ts_opts){.dtype = TS_F64});
    CHECK(huge == NULL);
    CHECK(ERR_IS(TS_ERR_OOM, "empty", "out of memory", "cpu", "tried to allocate"));
    /* more elements than int64 can count */
    CHECK(ts_zeros(TS_SHAPE(INT64_MAX / 8, 16), (ts_opts){.device = ts_sim(1)}) == NULL);
    CHECK(ERR_IS(TS_ERR_SHAPE, "zeros", "too many elements"));
    ts_tensor *one = ones(TS_SHAPE(1), TS_F64, ts_sim(0));
    ts_tensor *big = ts_expand(one, TS_SHAPE((int64_t)1 << 30, (int64_t)1 << 30));
    CHECK(big != NULL);                /* a view: no memory */
    CHECK(ts_contiguous(big) == NULL); /* 8 EiB */
    CHECK(ERR_IS(TS_ERR_OOM, "contiguous", "sim:0", "tried to allocate"));
    CHECK(ts_add(big, one) == NULL);
    CHECK(ERR_IS(TS_ERR_OOM, "add", "sim:0"));
    ts_scope_end();

    const struct {
        ts_status s;
        const char *name;
    } names[] = {{TS_OK, "TS_OK"},
                 {TS_ERR_DEVICE, "TS_ERR_DEVICE"},
                 {TS_ERR_SHAPE, "TS_ERR_SHAPE"},
                 {TS_ERR_DTYPE, "TS_ERR_DTYPE"},
                 {TS_ERR_ARG, "TS_ERR_ARG"},
                 {TS_ERR_OOM, "TS_ERR_OOM"},
                 {TS_ERR_IO, "TS_ERR_IO"},
                 {TS_ERR_FORMAT, "TS_ERR_FORMAT"},
                 {TS_ERR_CUDA, "TS_ERR_CUDA"},
                 {TS_ERR_UNSUPPORTED, "TS_ERR_UNSUPPORTED"},
                 {TS_ERR_STATE, "TS_ERR_STATE"}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        CHECK_STREQ(ts_status_string(names[i].s), names[i].name);
    CHECK(ts_status_string((ts_status)77) != NULL);
}

/* ------------------------------------------------------------------ threads */
typedef struct {
    ts_status seen_at_start, made, seen_after_clear;
    char msg[256];
} thread_report;

static void *thread_body(void *arg) {
    thread_report *r = arg;
    r->seen_at_start = ts_error(); /* main's pending error is not visible here */
    ts_scope_begin();
    ts_tensor *a = ones(TS_SHAPE(2), TS_F32, ts_sim(2));
    CHECK(ts_add(a, ones(TS_SHAPE(3), TS_F32, ts_sim(2))) == NULL);
    r->made = ts_error();
    snprintf(r->msg, sizeof r->msg, "%s", ts_error_message());
    ts_scope_end();
    ts_error_clear();
    r->seen_after_clear = ts_error();
    return NULL;
}

static void test_threads(void) {
    ts_scope_begin();
    CHECK(ts_add(ones(TS_SHAPE(2), TS_F32, ts_sim(0)), ones(TS_SHAPE(2), TS_F32, ts_cpu())) ==
          NULL); /* main has a pending device error while the thread runs */
    thread_report r = {TS_ERR_STATE, TS_OK, TS_ERR_STATE, ""};
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, thread_body, &r), 0);
    pthread_join(t, NULL);
    CHECK_EQ(r.seen_at_start, TS_OK);
    CHECK_EQ(r.made, TS_ERR_SHAPE);
    CHECK(strstr(r.msg, "add: ") && strstr(r.msg, "[2]") && strstr(r.msg, "[3]"));
    CHECK_EQ(r.seen_after_clear, TS_OK);
    /* main still has its own error, untouched by the thread's clear */
    CHECK(ERR_IS(TS_ERR_DEVICE, "add: ", "sim:0 and cpu"));
    /* and a thread with no errors leaves main clean */
    CHECK_EQ(pthread_create(&t, NULL, thread_body, &r), 0);
    pthread_join(t, NULL);
    CHECK_EQ(ts_error(), TS_OK);
    ts_scope_end();
}

int main(void) {
    if (ts_device_count(TS_SIM) < 3) ts_sim_configure(4, 0);
    const ts_device devs[4] = {ts_cpu(), ts_sim(0), ts_sim(1), ts_sim(2)};
    ts_mem_stats before[4], after[4];
    for (int i = 0; i < 4; i++) ts_memory_stats(devs[i], &before[i]);
    test_device_errors();
    test_shape_dim_dtype_errors();
    test_null_and_first_error();
    test_oom_and_status();
    test_threads();
    /* no error path leaked a tensor or a byte */
    for (int i = 0; i < 4; i++) {
        ts_memory_stats(devs[i], &after[i]);
        CHECK_EQ(after[i].live_tensors, before[i].live_tensors);
        CHECK_EQ(after[i].allocated, before[i].allocated);
    }
    CHECK_EQ(ts_scope_depth(), 0);
    return ts_test_finish();
}
