/* clip.c — torch.nn.utils.clip_grad_norm_: the total norm of all gradients, scaled in place. */
#include <math.h>

#include "optim/optim_internal.h"

/* The norm of one gradient as a double: max |g| for inf (min for -inf), sum(|g|^p)^(1/p) else;
 * the elementwise work runs on the gradient's device. */
static double grad_norm(ts_tensor *g, double p) {
    ts_tensor *r;
    if (isinf(p)) {
        ts_tensor *a = ts_abs(g);
        r = p > 0 ? ts_max(a) : ts_min(a);
        return ts_item(r);
    }
    if (p == 2) return sqrt(ts_item(ts_sum(ts_square(g))));
    if (p == 1) return ts_item(ts_sum(ts_abs(g)));
    r = ts_sum(ts_pow_scalar(ts_abs(g), p));
    return pow(ts_item(r), 1.0 / p);
}

double ts_clip_grad_norm(ts_tensor *const *params, int n, double max_norm, double norm_type) {
    static const char op[] = "clip_grad_norm";
    tsi_init();
    if (n < 0 || (n > 0 && !params))
        return tsi_error_set(TS_ERR_ARG, "%s: invalid parameter list (%d tensors at %p)", op, n,
                             (const void *)params),
               NAN;
    if (max_norm != max_norm) return tsi_error_set(TS_ERR_ARG, "%s: max_norm is NaN", op), NAN;
    double p = norm_type == 0 ? 2 : norm_type;
    if (p != p) return tsi_error_set(TS_ERR_ARG, "%s: norm_type is NaN", op), NAN;
    for (int i = 0; i < n; i++)
        if (!tsi_check_input(op, params[i], "a parameter")) return NAN;
    if (ts_error() != TS_OK) return NAN;
    ts_scope_begin();
    ts_no_grad_begin();
    /* combine the per-gradient norms as torch does: norm of the norms (max for inf) */
    double total = isinf(p) ? (p > 0 ? 0 : INFINITY) : 0;
    int count = 0;
    for (int i = 0; i < n; i++) {
        ts_tensor *g = params[i]->grad;
        if (!g) continue;
        if (!tsi_is_float(g->dtype)) {
            tsi_error_set(TS_ERR_DTYPE,
                          "%s: the gradient of parameter %d (%s) is not floating "
                          "point",
                          op, i, tsi_desc(g));
            break;
        }
        double v = tsi_numel(g->shape) > 0 ? grad_norm(g, p) : (p < 0 ? INFINITY : 0);
        count++;
        if (isinf(p))
            total = p > 0 ? fmax(total, v) : fmin(total, v);
        else if (p == 1)
            total += v;
        else if (p == 2)
            total += v * v;
        else
            total += pow(v, p);
    }
    if (count == 0)
        total = 0;
    else if (p == 2)
        total = sqrt(total);
    else if (!isinf(p) && p != 1)
        total = pow(total, 1.0 / p);
    double coef = max_norm / (total + 1e-6);
    if (ts_error() == TS_OK && coef < 1) { /* torch multiplies by the clamped coefficient */
        for (int i = 0; i < n; i++)
            if (params[i]->grad) ts_mul_scalar_(params[i]->grad, coef);
    }
    ts_no_grad_end();
    ts_scope_end();
    return ts_error() == TS_OK ? total : NAN;
}

double ts_clip_grad_norm_module(ts_module *m, double max_norm) {
    tsi_init();
    if (!m) return tsi_error_set(TS_ERR_ARG, "clip_grad_norm: module is NULL"), NAN;
    ts_tensor_list l = ts_module_named_parameters(m);
    double r = ts_error() == TS_OK ? ts_clip_grad_norm(l.tensors, l.n, max_norm, 2) : NAN;
    ts_tensor_list_free(&l);
    return r;
}
