/* test_conv_crop.c — conv2d's cut of the kernel taps that only ever meet the padding
 * (src/nn/conv.c, crop_dim: 3x3 convolutions at 1x1 and 2x2, a ResNet's last stages on 28x28
 * images) under allocation failures: every allocation of the forward and both gradients failing
 * in turn (the cut weight's view, its contiguous copy, the narrow's gradient) ends in TS_ERR_OOM
 * or the fault-free result, leaks nothing, and succeeds once cleared; the float32 results within
 * their rounding of the float64 ones, the cut taps' weight gradient exactly zero. Values against
 * an independent float64 NumPy convolution: tests/python/test_conv_crop.py. */
#include <math.h>
#include <stdio.h>

#include "conv_sweep.h"
#include "fault_sweep.h"
#include "ts_test.h"

static ts_tensor *random_f32(ts_shape s) {
    return ts_randn(s, (ts_opts){.dtype = TS_F32, .device = ts_cpu()});
}

/* x [4, 8, 1, 1], w [6, 8, 3, 3], padding 1: only the centre tap meets the input */
static const ts_conv_sweep_spec CENTRE = {4,          8,    1, 1, 6, 3, 3, {.padding = {1, 1}},
                                          random_f32, false};
/* x [3, 5, 2, 2], w [4, 5, 3, 3], stride 2, padding 1: taps 1 and 2 of each dim, channels_last */
static const ts_conv_sweep_spec STRIDED = {
    3, 5, 2, 2, 4, 3, 3, {.stride = {2, 2}, .padding = {1, 1}}, random_f32, true};
static const ts_conv_sweep_spec *g_spec;

static void *setup(void) { return ts_conv_sweep_setup(g_spec); }

/* |a - e| <= k 2^-24 m + tiny element by element (m: the same sums over magnitudes) */
static bool within(ts_tensor *a, ts_tensor *e, ts_tensor *m, double k) {
    ts_tensor *d = ts_abs(ts_sub(ts_to_dtype(a, TS_F64), e));
    ts_tensor *bound = ts_add_scalar(ts_mul_scalar(m, k * ldexp(1.0, -24)), 1e-30);
    return ts_item(ts_sum(ts_gt(d, bound))) == 0;
}

static void check(void *p, bool ok) {
    ts_conv_sweep *s = p;
    if (!ok) return;
    const ts_conv_sweep_spec *sp = s->spec;
    ts_scope_begin();
    CHECK(within(s->y, s->y64, s->ya, (double)(sp->c + 2)));
    CHECK(within(s->gx, s->gx64, s->gxa, (double)(sp->o * 4 + 2)));
    CHECK(within(s->gw, s->gw64, s->gwa, (double)(sp->n * 4 + 2)));
    /* the cut taps: row and column 0 of every 3x3 kernel (both specs) */
    CHECK(ts_item(ts_sum(ts_abs(ts_narrow(s->gw, 2, 0, 1)))) == 0);
    CHECK(ts_item(ts_sum(ts_abs(ts_narrow(s->gw, 3, 0, 1)))) == 0);
    CHECK_OK();
    ts_scope_end();
}

int main(void) {
    const ts_conv_sweep_spec *specs[2] = {&CENTRE, &STRIDED};
    const char *names[2] = {"conv2d 3x3 on 1x1", "conv2d 3x3 stride 2 on 2x2 (channels_last)"};
    for (int i = 0; i < 2; i++) {
        g_spec = specs[i];
        const ts_sweep_case c = {.name = names[i],
                                 .setup = setup,
                                 .run = ts_conv_sweep_run,
                                 .teardown = ts_conv_sweep_teardown,
                                 .check = check};
        const ts_sweep_stats st = ts_fault_sweep(&c, 400);
        CHECK(st.allocations > 0);
        CHECK_EQ(st.errors, st.oom);
    }
    return ts_test_finish();
}
