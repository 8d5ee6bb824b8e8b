/* test_conv_dnnl.c — float32 convolutions through oneDNN (src/backend/cpu/conv_dnnl.c) against
 * the built-in kernels in float64: forward (with and without bias), the input and weight
 * gradients, over padding, stride, dilation, groups, 1x1 and rectangular kernels, on cpu and
 * sim:0; each case checks that oneDNN itself ran (not a silent fallback). A repeated large
 * convolution touches no fresh pages (its reorder buffers and scratchpad are cached) and gives the
 * same bits. Skips without oneDNN. */
#include <math.h>
#include <stdio.h>
#include <sys/resource.h>

#include "backend/cpu/conv_dnnl.h"
#include "ts_test.h"

typedef struct conv_case {
    int64_t n, c, h, w, o, kh, kw;
    ts_conv2d_opts o_;
    bool bias;
} conv_case;

static double max_abs_diff(ts_tensor *a, ts_tensor *b) {
    return ts_item(ts_max(ts_abs(ts_sub(ts_to_dtype(ts_to(a, ts_cpu()), TS_F64), b))));
}
static double max_abs(ts_tensor *t) { return ts_item(ts_max(ts_abs(t))); }

static void run(const conv_case *k, ts_device dev) {
    ts_scope_begin();
    ts_manual_seed(7);
    ts_opts o64 = {.dtype = TS_F64, .requires_grad = true};
    const int64_t g = k->o_.groups ? k->o_.groups : 1;
    ts_tensor *x = ts_randn(TS_SHAPE(k->n, k->c, k->h, k->w), o64);
    ts_tensor *w = ts_randn(TS_SHAPE(k->o, k->c / g, k->kh, k->kw), o64);
    ts_tensor *b = k->bias ? ts_randn(TS_SHAPE(k->o), o64) : NULL;
    /* the float64 reference: the built-in kernels */
    ts_tensor *y64 = ts_conv2d(x, w, b, k->o_);
    ts_tensor *gy = ts_randn(ts_shape_of(y64), (ts_opts){.dtype = TS_F64});
    ts_backward_with(y64, gy);
    /* float32 through oneDNN on dev */
    ts_tensor *xf = ts_detach(ts_to(ts_to_dtype(x, TS_F32), dev));
    ts_tensor *wf = ts_detach(ts_to(ts_to_dtype(w, TS_F32), dev));
    ts_tensor *bf = b ? ts_detach(ts_to(ts_to_dtype(b, TS_F32), dev)) : NULL;
    ts_set_requires_grad(xf, true), ts_set_requires_grad(wf, true);
    if (bf) ts_set_requires_grad(bf, true);
    const uint64_t before = tsi_dnnl_conv_count();
    ts_tensor *y = ts_conv2d(xf, wf, bf, k->o_);
    ts_backward_with(y, ts_to(ts_to_dtype(gy, TS_F32), dev));
    CHECK_OK();
    const uint64_t ran = tsi_dnnl_conv_count() - before;
    /* forward, backward data, backward weight */
    if (ran != 3)
        printf("case c%lld o%lld k%lldx%lld: oneDNN ran %llu of 3\n", (long long)k->c,
               (long long)k->o, (long long)k->kh, (long long)k->kw, (unsigned long long)ran);
    CHECK_EQ(ran, 3);
    /* float32 sums of (C/g) KH KW (or N OH OW for the weights) products: within that many unit
     * roundoffs of the sum of |products| (bounded by the terms' maxima) */
    const double u = ldexp(1, -24);
    const double kx = (double)(k->c / g * k->kh * k->kw), kw_ = (double)(k->n * k->h * k->w);
    const double tol_y = 4 * u * kx * max_abs(x) * max_abs(w) * 4;
    const double tol_x = 4 * u * (double)(k->o * k->kh * k->kw) * max_abs(gy) * max_abs(w) * 4;
    const double tol_w = 4 * u * kw_ * max_abs(gy) * max_abs(x) * 4;
    CHECK(max_abs_diff(y, y64) <= tol_y);
    CHECK(max_abs_diff(ts_grad(xf), ts_grad(x)) <= tol_x);
    CHECK(max_abs_diff(ts_grad(wf), ts_grad(w)) <= tol_w);
    if (b) CHECK(max_abs_diff(ts_grad(bf), ts_grad(b)) <= 4 * u * kw_ * max_abs(gy) * 4);
    ts_scope_end();
}

static long minor_faults(void) {
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return u.ru_minflt;
}

/* ResNet-18's first stage at CIFAR batch 64: 16 MiB activations, each call reordering them into
 * oneDNN's blocked layout and back. With fresh buffers per call (malloc: mapped, faulted in page by
 * page, unmapped: glibc keeps blocks below about 16 MiB, not these) the four timed rounds took
 * 98,512 page faults; cached, none beyond noise. */
static void test_buffers_cached(void) {
    ts_scope_begin();
    ts_manual_seed(3);
    ts_tensor *x = ts_randn(TS_SHAPE(64, 64, 32, 32), (ts_opts){.requires_grad = true});
    ts_tensor *w = ts_randn(TS_SHAPE(64, 64, 3, 3), (ts_opts){.requires_grad = true});
    ts_tensor *first = NULL;
    long faults = 0;
    for (int i = 0; i < 6; i++) {
        ts_scope_begin();
        ts_set_grad(x, NULL), ts_set_grad(w, NULL);
        const long before = minor_faults();
        ts_tensor *y = ts_conv2d(x, w, NULL, (ts_conv2d_opts){.padding = {1, 1}});
        ts_backward(ts_sum(y));
        if (i >= 2) faults += minor_faults() - before; /* after two warm-up rounds */
        if (i == 0) first = ts_keep(ts_clone(ts_grad(x)));
        if (i == 5) CHECK(ts_item(ts_max(ts_abs(ts_sub(ts_grad(x), first)))) == 0);
        ts_scope_end();
    }
    CHECK_OK();
    /* 4 rounds of 3 convolutions, each reordering 16 MiB tensors: 4,096 pages a buffer, so fresh
     * buffers fault at least 16,384 times. The bound is half of one buffer: room for what the
     * rest of a round touches anew (581 faults under AddressSanitizer, whose allocator keeps freed
     * memory in quarantine; 0 in the release build). */
    if (faults > 2048) printf("repeated convolutions took %ld page faults\n", faults);
    CHECK(faults <= 2048);
    ts_scope_end();
}

/* oneDNN fixes a primitive's thread count when it is made: the cache keys on it, so the same
 * shape under another ts_set_num_threads gets a primitive of its own (before, one made under one
 * thread served every later call: half speed on two cores), and the same count reuses it. A
 * forward of under 1 MFLOP runs on one thread whatever the count (conv_dnnl.c's
 * ONE_THREAD_FLOPS): no second primitive for it. c channels in and out, side x side images. */
static void check_primitive_per_thread_count(int64_t c, int64_t side, bool small) {
    ts_scope_begin();
    const int saved = ts_get_num_threads();
    ts_tensor *x = ts_randn(TS_SHAPE(1, c, side, side), (ts_opts){0});
    ts_tensor *w = ts_randn(TS_SHAPE(c, c, 3, 3), (ts_opts){0});
    const ts_conv2d_opts o = {.padding = {1, 1}, .stride = {1, 2}}; /* a shape no other case has */
    ts_set_num_threads(1);
    ts_tensor *y1 = ts_conv2d(x, w, NULL, o);
    const uint64_t built = tsi_dnnl_conv_builds();
    ts_tensor *y1b = ts_conv2d(x, w, NULL, o);
    CHECK_EQ(tsi_dnnl_conv_builds(), built); /* the same count: the cached primitive */
    ts_set_num_threads(2);
    const int more = ts_get_num_threads() == 2 && !small ? 1 : 0;
    ts_tensor *y2 = ts_conv2d(x, w, NULL, o);
    CHECK_EQ(tsi_dnnl_conv_builds(), built + more);
    ts_set_num_threads(1);
    ts_tensor *y1c = ts_conv2d(x, w, NULL, o);
    CHECK_EQ(tsi_dnnl_conv_builds(), built + more); /* both kept */
    CHECK_OK();
    CHECK(ts_item(ts_max(ts_abs(ts_sub(y1, y1b)))) == 0);
    CHECK(ts_item(ts_max(ts_abs(ts_sub(y1, y1c)))) == 0);
    /* another thread count may sum in another order: each side within K u K max|x| max|w| of
     * the exact sums, K = 9 c products */
    const double k = 9.0 * (double)c, bound = 2 * k * k * ldexp(1, -24) *
                                              ts_item(ts_max(ts_abs(x))) *
                                              ts_item(ts_max(ts_abs(w)));
    CHECK(ts_item(ts_max(ts_abs(ts_sub(y1, y2)))) <= bound);
    ts_set_num_threads(saved);
    ts_scope_end();
}

static void test_primitive_per_thread_count(void) {
    check_primitive_per_thread_count(8, 6, true);    /* 2 * 8 * 72 * 18: 20.7 KFLOP */
    check_primitive_per_thread_count(32, 24, false); /* 2 * 32 * 288 * 288: 5.3 MFLOP */
}

int main(void) {
    if (!ts_device_count(TS_SIM)) ts_sim_configure(1, 0);
#ifndef TS_HAVE_DNNL
    return ts_test_skip("built without oneDNN (libdnnl-dev)");
#endif
    tsi_conv_force_provider("dnnl");
    static const conv_case cases[] = {
        {2, 3, 9, 8, 8, 3, 3, {.padding = {1, 1}}, true},
        {2, 16, 12, 12, 32, 3, 3, {.stride = {2, 2}, .padding = {1, 1}}, false},
        {1, 4, 11, 10, 6, 3, 2, {.dilation = {2, 1}, .padding = {2, 0}}, true},
        {2, 8, 7, 7, 12, 3, 3, {.groups = 4, .padding = {1, 1}}, true},
        {3, 24, 6, 5, 20, 1, 1, {.groups = 1}, false},
        {2, 5, 10, 9, 7, 5, 3, {.stride = {2, 3}, .padding = {2, 1}}, true},
        {1, 64, 8, 8, 64, 3, 3, {.padding = {1, 1}}, false},
        {2, 3, 7, 7, 4, 2, 2, {.stride = {3, 3}}, false}, /* the last rows and columns unused */
    };
    const ts_device devs[2] = {ts_cpu(), ts_sim(0)};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        for (int d = 0; d < 2; d++) run(&cases[i], devs[d]);
    test_buffers_cached();
    test_primitive_per_thread_count();
    tsi_conv_force_provider(NULL);
    return ts_test_finish();
}
