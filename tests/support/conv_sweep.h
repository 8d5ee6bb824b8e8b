/* conv_sweep.h — the allocation-failure sweep of conv2d forward and both gradients that
 * test_conv_bf16 and test_channels_last share (fault_sweep.h): the state, the float64 results to
 * hold each run's to (exact, and the same sums over absolute values), the run and the teardown.
 * Each test keeps its own setup (which spec), check (its bound) and sweep call. */
#ifndef TS_CONV_SWEEP_H
#define TS_CONV_SWEEP_H

#include <stdbool.h>
#include <stdint.h>

#include "tessera.h"

/* A float64 leaf on the cpu with t's values (|t|'s when absolute), NCHW, requiring grad when asked:
 * the operands of the float64 convolutions the conv tests hold their results to. */
ts_tensor *ts_test_f64_leaf(ts_tensor *t, bool absolute, bool grad);

/* float64 convolution results: the output and the gradients of input, weight and bias (NULL
 * without one) */
typedef struct ts_conv_f64 {
    ts_tensor *y, *gx, *gw, *gb;
} ts_conv_f64;

/* ts_conv2d(x, w, b, o) and its backward with gy, in float64 on the cpu (the current scope's
 * tensors): exact, on the operands' values, and mag, on their absolute values (the same sums over
 * magnitudes that bound a float sum's error). */
void ts_test_conv_f64(ts_tensor *x, ts_tensor *w, ts_tensor *b, ts_tensor *gy, ts_conv2d_opts o,
                      ts_conv_f64 *exact, ts_conv_f64 *mag);

typedef struct ts_conv_sweep_spec {
    int64_t n, c, h, w, o, kh, kw; /* x [n, c, h, w], weight [o, c, kh, kw], bias [o] */
    ts_conv2d_opts opts;
    /* a tensor of random values of shape s (x, weight, bias and the output gradient, in turn) */
    ts_tensor *(*random)(ts_shape s);
    bool channels_last; /* x and the output gradient channels_last */
} ts_conv_sweep_spec;

typedef struct ts_conv_sweep {
    const ts_conv_sweep_spec *spec;
    ts_tensor *x, *w, *b, *gy;
    ts_tensor *y64, *ya, *gx64, *gxa, *gw64, *gwa; /* float64: exact and over magnitudes */
    ts_tensor *y, *gx, *gw;                        /* the last run's */
} ts_conv_sweep;

/* The sweep case's setup (a ts_conv_sweep; NULL when out of memory), run and teardown. */
void *ts_conv_sweep_setup(const ts_conv_sweep_spec *spec);
bool ts_conv_sweep_run(void *st);
void ts_conv_sweep_teardown(void *st);

#endif /* TS_CONV_SWEEP_H */
