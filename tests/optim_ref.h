/* optim_ref.h — the two parameters and five steps of gradients of the optimizer tests' PyTorch
 * reference runs (test_optim.c, whose comment has the Python; test_clip_grad.c): P0 [2, 3] and
 * P1 [4], step s's gradients G * C[s] - 0.2 * s. */
#ifndef TS_TEST_OPTIM_REF_H
#define TS_TEST_OPTIM_REF_H

#include <math.h>
#include <stdio.h>

#include "ts_test.h"

static const double P0[6] = {0.5, -1.2, 0.3, 2.0, -0.7, 1.1}, P1[4] = {0.05, -0.4, 0.9, -1.5};
static const double G0[6] = {0.3, -0.8, 0.5, 0.1, -0.2, 0.9}, G1[4] = {-0.6, 0.25, 0.4, -0.05};
static const double C[5] = {1.0, 2.5, 0.5, 1.5, 0.25};

/* The two parameters of the reference runs (caller-owned: call outside any scope's tensors). */
static inline void make_params(ts_tensor **p, ts_device dev, ts_dtype dt) {
    ts_opts o = {.dtype = dt, .device = dev, .requires_grad = true};
    p[0] = ts_tensor_f64(TS_SHAPE(2, 3), P0, o);
    p[1] = ts_tensor_f64(TS_SHAPE(4), P1, o);
}

/* The gradients of step s: G * C[s] - 0.2 * s, as the Python snippet computes them in f64. */
static inline void set_grads(ts_tensor **p, int s, bool skip1) {
    double g0[6], g1[4];
    for (int j = 0; j < 6; j++) g0[j] = G0[j] * C[s] - 0.2 * s;
    for (int j = 0; j < 4; j++) g1[j] = G1[j] * C[s] - 0.2 * s;
    ts_opts o = {.dtype = ts_dtype_of(p[0]), .device = ts_device_of(p[0])};
    ts_scope_begin();
    CHECK_EQ(ts_set_grad(p[0], ts_tensor_f64(TS_SHAPE(2, 3), g0, o)), TS_OK);
    CHECK_EQ(ts_set_grad(p[1], skip1 ? NULL : ts_tensor_f64(TS_SHAPE(4), g1, o)), TS_OK);
    ts_scope_end();
}

static inline int check_close(const char *what, const double *got, const double *want, int n,
                              double rtol) {
    int bad = 0;
    for (int j = 0; j < n; j++) {
        double tol = rtol * fmax(1.0, fabs(want[j]));
        if (!(fabs(got[j] - want[j]) <= tol)) {
            if (!bad) printf("  %s: element %d: %.17g, want %.17g\n", what, j, got[j], want[j]);
            bad++;
        }
    }
    CHECK_EQ(bad, 0);
    return bad;
}

#endif /* TS_TEST_OPTIM_REF_H */
