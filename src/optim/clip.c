/* clip.c — torch.nn.utils.clip_grad_norm_: the total norm of all gradients, scaled in place. */
#include <math.h>

#include "optim/optim_internal.h"

/* One gradient's share of the total, as a 0-d tensor on its device in dtype acc: max |g| for inf
 * (min for -inf), sum |g|^p otherwise (sum g^2 for 2, sum |g| for 1); the work runs on the
 * gradient's device, in acc (float32 for the half types, so a float16 square cannot overflow). */
static ts_tensor *grad_share(ts_tensor *g, double p, ts_dtype acc) {
    ts_tensor *x = ts_to_dtype(g, acc);
    if (isinf(p)) return p > 0 ? ts_max(ts_abs(x)) : ts_min(ts_abs(x));
    if (p == 2) return ts_sum(ts_square(x));
    if (p == 1) return ts_sum(ts_abs(x));
    return ts_sum(ts_pow_scalar(ts_abs(x), p));
}

/* the dtype the total is formed in: float64 when a gradient is, float32 otherwise */
static ts_dtype accumulation_dtype(ts_tensor *const *params, int n) {
    for (int i = 0; i < n; i++)
        if (params[i]->grad && params[i]->grad->dtype == TS_F64) return TS_F64;
    return TS_F32;
}

/* Checks the arguments; false with the error set */
static bool clip_args_ok(const char *op, ts_tensor *const *params, int n, double max_norm,
                         double norm_type) {
    if (n < 0 || (n > 0 && !params))
        return tsi_error_set(TS_ERR_ARG, "%s: invalid parameter list (%d tensors at %p)", op, n,
                             (const void *)params),
               false;
    if (max_norm != max_norm) return tsi_error_set(TS_ERR_ARG, "%s: max_norm is NaN", op), false;
    if (norm_type != norm_type) return tsi_error_set(TS_ERR_ARG, "%s: norm_type is NaN", op), false;
    for (int i = 0; i < n; i++) {
        if (!tsi_check_input(op, params[i], "a parameter")) return false;
        ts_tensor *g = params[i]->grad;
        if (g && !tsi_is_float(g->dtype))
            return tsi_error_set(TS_ERR_DTYPE,
                                 "%s: the gradient of parameter %d (%s) is not floating point", op,
                                 i, tsi_desc(g)),
                   false;
    }
    return ts_error() == TS_OK;
}

/* torch.nn.utils.clip_grad_norm_ (foreach=False): the norm of the gradients' norms, and every
 * gradient multiplied by min(max_norm / (total + 1e-6), 1), all on the device with no host read,
 * so a captured step can clip (docs/CAPTURE.md). Gradients on other devices than the first's send
 * their shares there. */
ts_tensor *ts_clip_grad_norm_tensor(ts_tensor *const *params, int n, double max_norm,
                                    double norm_type) {
    static const char op[] = "clip_grad_norm";
    tsi_init();
    if (!clip_args_ok(op, params, n, max_norm, norm_type)) return NULL;
    double p = norm_type == 0 ? 2 : norm_type;
    ts_dtype acc = accumulation_dtype(params, n);
    ts_scope_begin();
    ts_no_grad_begin();
    ts_tensor *total = NULL;
    for (int i = 0; i < n && ts_error() == TS_OK; i++) {
        ts_tensor *g = params[i]->grad;
        if (!g) continue;
        ts_tensor *v = grad_share(g, p, acc);
        if (tsi_numel(g->shape) == 0) v = ts_full_like(v, p < 0 ? INFINITY : 0);
        if (total && !tsi_device_eq(ts_device_of(v), ts_device_of(total)))
            v = ts_to(v, ts_device_of(total));
        if (!total)
            total = v;
        else if (isinf(p))
            total = p > 0 ? ts_maximum(total, v) : ts_minimum(total, v);
        else
            total = ts_add(total, v);
    }
    if (!total)
        total = ts_zeros(TS_SHAPE(), (ts_opts){.dtype = acc});
    else if (p == 2)
        total = ts_sqrt(total);
    else if (!isinf(p) && p != 1)
        total = ts_pow_scalar(total, 1.0 / p);
    /* the clamped coefficient, as torch: a factor of 1 leaves the gradients as they are */
    ts_tensor *coef =
        ts_clamp_max(ts_div(ts_full_like(total, max_norm), ts_add_scalar(total, 1e-6)), 1.0);
    ts_tensor *as[TS_DTYPE_COUNT] = {0};
    for (int i = 0; i < n && ts_error() == TS_OK; i++) {
        ts_tensor *g = params[i]->grad;
        if (!g) continue;
        ts_tensor *c = as[g->dtype];
        if (!c || !tsi_device_eq(ts_device_of(c), ts_device_of(g)))
            c = as[g->dtype] = ts_to(ts_to_dtype(coef, g->dtype), ts_device_of(g));
        ts_mul_(g, c);
    }
    ts_no_grad_end();
    total = ts_error() == TS_OK ? ts_keep(total) : NULL;
    ts_scope_end();
    return total;
}

double ts_clip_grad_norm(ts_tensor *const *params, int n, double max_norm, double norm_type) {
    ts_scope_begin();
    ts_tensor *total = ts_clip_grad_norm_tensor(params, n, max_norm, norm_type);
    double r = total ? ts_item(total) : NAN;
    ts_scope_end();
    return ts_error() == TS_OK ? r : NAN;
}

ts_tensor *ts_clip_grad_norm_module_tensor(ts_module *m, double max_norm) {
    tsi_init();
    if (!m) return tsi_error_set(TS_ERR_ARG, "clip_grad_norm: module is NULL"), NULL;
    ts_tensor_list l = ts_module_named_parameters(m);
    ts_tensor *r =
        ts_error() == TS_OK ? ts_clip_grad_norm_tensor(l.tensors, l.n, max_norm, 2) : NULL;
    ts_tensor_list_free(&l);
    return r;
}

double ts_clip_grad_norm_module(ts_module *m, double max_norm) {
    ts_scope_begin();
    ts_tensor *total = ts_clip_grad_norm_module_tensor(m, max_norm);
    double r = total ? ts_item(total) : NAN;
    ts_scope_end();
    return ts_error() == TS_OK ? r : NAN;
}
