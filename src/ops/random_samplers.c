/* random_samplers.c — the in-place samplers of distributions over Tessera's generator (issue 76),
 * PyTorch's formulas (its CPU kernels' transformations of uniform and normal draws):
 *   cauchy_(median, sigma):  median + sigma * tan(pi * (u - 1/2))
 *   geometric_(p):           ceil(log(1 - u) / log(1 - p)), at least 1 (trials to the first
 * success) log_normal_(mean, std):  exp(mean + std * z) u uniform in [0, 1) and z standard normal,
 * drawn as ts_rand_like / ts_randn_like draw them (so a seed gives the same numbers on every
 * device); the values are computed out of place and copied into t without a graph (random draws
 * have no gradient), the version bumped once. */
#include <math.h>

#define PI 3.14159265358979323846

#include "autograd/autograd.h"
#include "core/internal.h"
#include "tessera/autograd.h"

/* t <- v (no graph); returns t (retained) or NULL */
static ts_tensor *write_back(ts_tensor *t, ts_tensor *v) {
    ts_tensor *r = v ? ts_copy_(t, v) : NULL;
    ts_no_grad_end();
    r = r ? ts_keep(r) : NULL;
    ts_scope_end();
    return r;
}

static bool check_float(const char *op, ts_tensor *t) {
    tsi_init();
    if (!tsi_check_input(op, t, "self")) return false;
    if (tsi_is_float(t->dtype)) return true;
    tsi_error_set(TS_ERR_DTYPE, "%s(): expected a floating-point tensor, got %s", op,
                  ts_dtype_name(t->dtype));
    return false;
}

ts_tensor *ts_cauchy_(ts_tensor *t, double median, double sigma) {
    const char *op = "cauchy_";
    if (!check_float(op, t)) return NULL;
    if (!(sigma > 0)) {
        tsi_error_set(TS_ERR_ARG, "%s(): expects sigma > 0.0, but found sigma=%g", op, sigma);
        return NULL;
    }
    ts_scope_begin();
    ts_no_grad_begin();
    ts_tensor *u = ts_rand_like(t);
    ts_tensor *v =
        u ? ts_add_scalar(ts_mul_scalar(ts_tan(ts_mul_scalar(ts_sub_scalar(u, 0.5), PI)), sigma),
                          median)
          : NULL;
    return write_back(t, v);
}

ts_tensor *ts_geometric_(ts_tensor *t, double p) {
    const char *op = "geometric_";
    tsi_init();
    if (!tsi_check_input(op, t, "self")) return NULL;
    if (!(p > 0 && p < 1)) {
        tsi_error_set(TS_ERR_ARG, "%s(): expects p to be in (0, 1), but got p=%g", op, p);
        return NULL;
    }
    if (t->dtype == TS_BOOL || tsi_is_complex(t->dtype)) {
        tsi_error_set(TS_ERR_DTYPE, "%s(): not implemented for %s", op, ts_dtype_name(t->dtype));
        return NULL;
    }
    ts_scope_begin();
    ts_no_grad_begin();
    /* integer tensors draw in float64 (the count is then exact up to 2^53) */
    ts_tensor *u = tsi_is_float(t->dtype)
                       ? ts_rand_like(t)
                       : ts_rand(t->shape, (ts_opts){.dtype = TS_F64, .device = ts_device_of(t)});
    /* P(X = k) = (1-p)^(k-1) p, k >= 1: ceil(log(1-u) / log(1-p)), u in [0, 1) */
    ts_tensor *k =
        u ? ts_clamp(ts_ceil(ts_div_scalar(ts_log1p(ts_neg(u)), log1p(-p))), 1.0, NAN) : NULL;
    return write_back(t, k && k->dtype != t->dtype ? ts_to_dtype(k, t->dtype) : k);
}

ts_tensor *ts_log_normal_(ts_tensor *t, double mean, double std) {
    const char *op = "log_normal_";
    if (!check_float(op, t)) return NULL;
    if (!(std > 0)) {
        tsi_error_set(TS_ERR_ARG, "%s(): expects std > 0.0, but found std=%g", op, std);
        return NULL;
    }
    ts_scope_begin();
    ts_no_grad_begin();
    ts_tensor *z = ts_randn_like(t);
    return write_back(t, z ? ts_exp(ts_add_scalar(ts_mul_scalar(z, std), mean)) : NULL);
}
