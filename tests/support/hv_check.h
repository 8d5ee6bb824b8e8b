/* hv_check.h — the double-backward tests' check of one case (test_double_backward_norm_pool.c,
 * test_double_backward_fused.c, _select_scan.c, _math.c): with p every input and v a direction, in
 * float64 on a device, the gradients recorded under create_graph equal the first-order ones (1e-12
 * relative), and the Hessian-vector product by double backward equals the central differences (grad
 * f(p + e v) - grad f(p - e v)) / 2e of first-order gradients (1e-6 relative); optionally the node
 * the case is about lies in the result's history. */
#ifndef TS_TEST_HV_CHECK_H
#define TS_TEST_HV_CHECK_H

#include "tessera.h"

#define TS_HV_MAXIN 7   /* inputs of a case */
#define TS_HV_MAXN  512 /* elements of an input */

typedef ts_tensor *(*ts_hv_fn)(ts_tensor *const *in); /* the inputs -> a scalar */

/* an input's shape as a constant: ndim, then the dims */
typedef struct ts_hv_dims {
    int ndim;
    int64_t d[5];
} ts_hv_dims;
#define TS_HV_SH(n, ...)                                                                           \
    {                                                                                              \
        n, { __VA_ARGS__ }                                                                         \
    }

typedef struct ts_hv_case {
    const char *name;
    ts_hv_fn f;
    int n_in;
    ts_hv_dims shape[TS_HV_MAXIN];
    const char *node; /* the node the case is about: y's history must hold it (NULL: not checked) */
} ts_hv_case;

ts_shape ts_hv_shape(ts_hv_dims s);
/* float64 on like's device */
ts_opts ts_hv_f64_on(ts_tensor *like);
/* a fixed pattern of values in [-1, 1) (ts_test_fill_uniform of seed) as a float64 tensor of shape
 * s on like's device */
ts_tensor *ts_hv_pattern(ts_shape s, int seed, ts_tensor *like);
/* sum(tanh(y + r / 2)) with r a fixed pattern of y's shape: a nonlinear scalar of y with no
 * symmetry that would hide a wrong term (NULL for NULL) */
ts_tensor *ts_hv_head(ts_tensor *y);
/* whether a node called name is in t's history (a walk over grad_fn's inputs) */
bool ts_hv_has_node(ts_tensor *t, const char *name);
/* the whole check of case c on device d; failures counted by the harness (CHECK) */
void ts_hv_check(const ts_hv_case *c, ts_device d);

#endif /* TS_TEST_HV_CHECK_H */
