/* test_conv3d_direct.c — conv3d's float32 inference calls on the CPU through oneDNN's 3-d
 * primitive (src/backend/cpu/conv3d_dnnl.c, taken by nn/conv_nd.c) against the float64
 * composition (conv2d over depth slices, which test_conv_nd checks against loops): stride,
 * padding, dilation, groups, bias, unbatched and non-contiguous inputs, each case checking that
 * the primitive ran; calls that need the composition (a graph to record, float64, sim:0) not
 * taking it; every allocation of a direct call failing in turn. Skips without oneDNN. */
#include <math.h>
#include <stdio.h>

#include "backend/cpu/conv3d_dnnl.h"
#include "ts_test.h"

typedef struct c3_case {
    int64_t n, c, o, g, in[3], k[3];
    int s[3], p[3], d[3];
    bool bias, unbatched, strided_x;
} c3_case;

static ts_convnd_opts opts_of(const c3_case *k) {
    ts_convnd_opts o = {.groups = (int)k->g};
    for (int i = 0; i < 3; i++)
        o.stride[i] = k->s[i], o.padding[i] = k->p[i], o.dilation[i] = k->d[i];
    return o;
}

/* float32 x, w, b (b may be NULL) through conv3d, against the float64 composition of the same
 * (rounded) inputs: within 2 u (terms + 1) of the products' magnitudes summed, u = 2^-24, terms
 * the products summed per output (each product and each addition rounds once, relative u) */
static void check_close(const c3_case *k, ts_tensor *xf, ts_tensor *wf, ts_tensor *bf) {
    const ts_convnd_opts o = opts_of(k);
    const uint64_t before = tsi_dnnl_conv3d_count();
    ts_tensor *y = ts_conv3d(xf, wf, bf, o);
    CHECK_OK();
    CHECK_EQ(tsi_dnnl_conv3d_count(), before + 1); /* the primitive, not the composition */
    ts_tensor *x64 = ts_to_dtype(xf, TS_F64), *w64 = ts_to_dtype(wf, TS_F64);
    ts_tensor *b64 = bf ? ts_to_dtype(bf, TS_F64) : NULL;
    ts_tensor *ref = ts_conv3d(x64, w64, b64, o);
    ts_tensor *mag = ts_conv3d(ts_abs(x64), ts_abs(w64), b64 ? ts_abs(b64) : NULL, o);
    CHECK(y && ref && ts_shape_of(y).ndim == ts_shape_of(ref).ndim);
    if (!y || !ref) return;
    for (int i = 0; i < ts_shape_of(y).ndim; i++)
        CHECK_EQ(ts_shape_of(y).dims[i], ts_shape_of(ref).dims[i]);
    const double terms = (double)(k->c / k->g * k->k[0] * k->k[1] * k->k[2] + 1);
    ts_tensor *err = ts_sub(ts_abs(ts_sub(ts_to_dtype(y, TS_F64), ref)),
                            ts_mul_scalar(mag, 2.0 * 0x1p-24 * (terms + 1)));
    const double worst = ts_item(ts_max(err));
    if (!(worst <= 0))
        printf("  case n=%lld c=%lld: error above the bound by %.3g\n", (long long)k->n,
               (long long)k->c, worst);
    CHECK(worst <= 0);
}

static void run_case(const c3_case *k) {
    ts_scope_begin();
    ts_manual_seed(11);
    const ts_opts o32 = {.dtype = TS_F32};
    ts_shape xs = k->unbatched ? TS_SHAPE(k->c, k->in[0], k->in[1], k->in[2])
                               : TS_SHAPE(k->n, k->c, k->in[0], k->in[1], k->in[2]);
    ts_tensor *x;
    if (k->strided_x) { /* the same values, read through a permuted (non-contiguous) view */
        x = ts_permute(ts_randn(TS_SHAPE(k->n, k->in[0], k->c, k->in[1], k->in[2]), o32),
                       TS_DIMS(0, 2, 1, 3, 4));
        CHECK(!ts_is_contiguous_format(x, TS_CONTIGUOUS_FORMAT));
    } else {
        x = ts_randn(xs, o32);
    }
    ts_tensor *w = ts_randn(TS_SHAPE(k->o, k->c / k->g, k->k[0], k->k[1], k->k[2]), o32);
    ts_tensor *b = k->bias ? ts_randn(TS_SHAPE(k->o), o32) : NULL;
    check_close(k, x, w, b);
    ts_scope_end();
}

/* clang-format off */
static const c3_case cases[] = {
    /* n  c   o   g  in            k          s          p          d          bias  unb    strided */
    {2, 16, 32, 1, {8, 8, 8},    {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, false, false, false},
    {2, 4,  6,  2, {5, 4, 6},    {3, 2, 2}, {2, 1, 2}, {1, 0, 1}, {1, 2, 1}, true,  false, false},
    {1, 2,  3,  1, {4, 5, 3},    {2, 3, 1}, {1, 2, 1}, {0, 1, 0}, {2, 1, 1}, true,  true,  false},
    {3, 5,  7,  1, {6, 7, 5},    {1, 1, 1}, {2, 3, 1}, {0, 0, 0}, {1, 1, 1}, true,  false, false},
    {2, 8,  8,  8, {4, 6, 5},    {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, true,  false, false},
    {2, 3,  4,  1, {7, 7, 7},    {2, 2, 2}, {3, 3, 3}, {0, 0, 0}, {1, 1, 1}, false, false, false},
    {2, 6,  5,  1, {5, 6, 7},    {3, 1, 2}, {1, 1, 2}, {2, 0, 1}, {2, 1, 3}, true,  false, true},
};
/* clang-format on */
#define N_CASES ((int)(sizeof cases / sizeof *cases))

/* calls that need the composition do not take the primitive: a graph to record (and its
 * gradients still flow), float64, sim:0; under no_grad the same inputs take it */
static void test_not_taken(void) {
    ts_scope_begin();
    ts_manual_seed(3);
    ts_tensor *x = ts_randn(TS_SHAPE(1, 2, 3, 4, 4), (ts_opts){.requires_grad = true});
    ts_tensor *w = ts_randn(TS_SHAPE(3, 2, 2, 2, 2), (ts_opts){0});
    const ts_convnd_opts o = {.padding = {1, 0, 1}};
    uint64_t before = tsi_dnnl_conv3d_count();
    ts_tensor *y = ts_conv3d(x, w, NULL, o);
    CHECK(y && ts_requires_grad(y));
    CHECK_EQ(tsi_dnnl_conv3d_count(), before);
    CHECK(ts_backward(ts_sum(y)) == TS_OK && ts_grad(x) != NULL);
    ts_no_grad_begin();
    ts_tensor *y2 = ts_conv3d(x, w, NULL, o);
    ts_no_grad_end();
    CHECK_EQ(tsi_dnnl_conv3d_count(), before + 1);
    CHECK(y2 && !ts_requires_grad(y2));
    CHECK(y && y2 && ts_item(ts_max(ts_abs(ts_sub(y, y2)))) <= 1e-5);
    before = tsi_dnnl_conv3d_count();
    CHECK(ts_conv3d(ts_to_dtype(ts_detach(x), TS_F64), ts_to_dtype(w, TS_F64), NULL, o));
    CHECK(ts_conv3d(ts_to(ts_detach(x), ts_sim(0)), ts_to(w, ts_sim(0)), NULL, o));
    CHECK_EQ(tsi_dnnl_conv3d_count(), before);
    CHECK_OK();
    ts_scope_end();
}

/* every allocation of a direct call failing in turn (a strided x: the contiguous copy too): a
 * clean TS_ERR_OOM and no result, or (a buffer of the primitive's call failing) the composition's
 * result; then the call whole, the same bits (leaks: the sanitizer builds) */
static void test_alloc_failures(void) {
    ts_scope_begin();
    ts_manual_seed(5);
    ts_tensor *x =
        ts_permute(ts_randn(TS_SHAPE(2, 3, 4, 5, 5), (ts_opts){0}), TS_DIMS(0, 2, 1, 3, 4));
    ts_tensor *w = ts_randn(TS_SHAPE(6, 4, 2, 2, 2), (ts_opts){0});
    ts_tensor *b = ts_randn(TS_SHAPE(6), (ts_opts){0});
    const ts_convnd_opts o = {.padding = {1, 1, 1}};
    ts_tensor *want = ts_conv3d(x, w, b, o);
    CHECK(want != NULL);
    int failed = 0, composed = 0;
    bool whole = false;
    for (int64_t n = 1; n <= 200 && !whole; n++) {
        ts_scope_begin();
        ts_fault_alloc_set(n);
        ts_tensor *y = ts_conv3d(x, w, b, o);
        const bool fired = ts_fault_alloc_fired();
        ts_fault_alloc_set(-1);
        if (!y) {
            CHECK(fired);
            CHECK_ERR(TS_ERR_OOM);
            failed++;
        } else if (fired) { /* the composition: float32 sums in another order */
            CHECK_OK();
            CHECK(ts_item(ts_max(ts_abs(ts_sub(y, want)))) <= 1e-5);
            composed++;
        } else {
            CHECK(ts_item(ts_max(ts_abs(ts_sub(y, want)))) == 0);
            whole = true;
        }
        ts_error_clear();
        ts_scope_end();
    }
    CHECK(whole);
    CHECK(failed >= 2); /* x's contiguous copy, the result */
    printf("  allocation failures: %d errors, %d composed results\n", failed, composed);
    CHECK_OK();
    ts_scope_end();
}

int main(void) {
    if (!ts_device_count(TS_SIM)) ts_sim_configure(1, 0);
#ifndef TS_HAVE_DNNL
    return ts_test_skip("built without oneDNN (libdnnl-dev)");
#endif
    for (int i = 0; i < N_CASES; i++) run_case(&cases[i]);
    test_not_taken();
    test_alloc_failures();
    return ts_test_finish();
}
