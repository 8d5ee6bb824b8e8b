/* torch_forms.c — PyTorch's argument forms composed from the differentiable ops: clamp with tensor
 * bounds, round with decimals, logspace. */
#include <math.h>

#include "autograd/autograd.h"
#include "autograd/trace.h"
#include "tessera/inplace.h"

/* ------------------------------------------------------------------ clamp(Tensor min, max) */
/* minimum(maximum(t, lo), hi): NaN anywhere propagates, lo > hi gives hi, and the gradients are
 * PyTorch 2.x's (the maximum's and minimum's: a tie splits the gradient in halves). */
ts_tensor *ts_clamp_tensor(ts_tensor *t, ts_tensor *min, ts_tensor *max) {
    const char *op = "clamp";
    tsi_init();
    if (!tsi_check_input(op, t, "input") || (min && !tsi_check_input(op, min, "min")) ||
        (max && !tsi_check_input(op, max, "max")))
        return NULL;
    if (!min && !max)
        return tsi_error_set(TS_ERR_ARG,
                             "%s: At least one of 'min' or 'max' must not be None (input: %s)", op,
                             tsi_desc(t)),
               NULL;
    ts_scope_begin();
    ts_tensor *y = min ? ts_maximum(t, min) : t;
    if (y && max) y = ts_minimum(y, max);
    y = ts_error() == TS_OK && y ? ts_keep(y) : NULL;
    ts_scope_end();
    return y;
}

/* In place: computed from a clone when the graph is recorded (maximum / minimum save their input,
 * which the copy_ would change under them: backward would then refuse the changed version). */
ts_tensor *ts_clamp_tensor_(ts_tensor *t, ts_tensor *min, ts_tensor *max) {
    tsi_init();
    if (!tsi_check_input("clamp_", t, "input")) return NULL;
    ts_tensor *const ins[3] = {t, min, max};
    const bool graph = tsi_needs_graph(ins, 3);
    if (ts_check_inplace(t, (min && min->requires_grad) || (max && max->requires_grad), "clamp_") !=
        TS_OK)
        return NULL;
    ts_scope_begin();
    ts_tensor *src = graph ? ts_clone(t) : t;
    ts_tensor *v = src ? ts_clamp_tensor(src, min, max) : NULL;
    ts_tensor *r = v ? ts_copy_(t, v) : NULL;
    r = r ? ts_keep(r) : NULL;
    ts_scope_end();
    return r;
}

/* ------------------------------------------------------------------ round(decimals) */
/* PyTorch's round_decimals: nearbyint(x * 10^d) / 10^d, or for d < 0 nearbyint(x / 10^-d) *
 * 10^-d, in the dtype's opmath (f32 for f16 / bf16, rounded once at the end); the power of ten as
 * the dtype's number (the scalar ops read it so). Gradient zero, as round's. */
ts_tensor *ts_round_decimals(ts_tensor *t, int64_t decimals) {
    const char *op = "round";
    tsi_init();
    if (!tsi_check_input(op, t, "input")) return NULL;
    if (decimals == 0) return ts_round(t);
    const ts_dtype dt = ts_dtype_of(t);
    if (!ts_dtype_is_floating(dt))
        return tsi_error_set(TS_ERR_DTYPE,
                             "%s: decimals=%lld is not implemented for '%s' (PyTorch has no "
                             "integer round with decimals; input: %s)",
                             op, (long long)decimals, tsi_torch_scalar_name(dt), tsi_desc(t)),
               NULL;
    const bool half = dt == TS_F16 || dt == TS_BF16;
    const double p = pow(10.0, (double)(decimals < 0 ? -decimals : decimals));
    ts_scope_begin();
    ts_tensor *x = half ? ts_to_dtype(t, TS_F32) : t;
    ts_tensor *y = decimals > 0 ? ts_div_scalar(ts_round(ts_mul_scalar(x, p)), p)
                                : ts_mul_scalar(ts_round(ts_div_scalar(x, p)), p);
    if (y && half) y = ts_to_dtype(y, dt);
    y = ts_error() == TS_OK && y ? ts_keep(y) : NULL;
    ts_scope_end();
    return y;
}

/* ------------------------------------------------------------------ logspace */
/* base ** linspace(start, end, steps), computed in float64 and converted to o.dtype (integers
 * truncate, as PyTorch's). */
ts_tensor *ts_logspace(double start, double end, int64_t steps, double base, ts_opts o) {
    tsi_init();
    const bool rg = o.requires_grad;
    ts_opts o64 = o;
    o64.dtype = TS_F64, o64.requires_grad = false, o64.pin_memory = false;
    ts_scope_begin();
    ts_tensor *y = ts_rpow_scalar(ts_linspace(start, end, steps, o64), base);
    const ts_dtype dt = o.dtype == TS_DTYPE_DEFAULT ? TS_F32 : o.dtype;
    if (y && dt != TS_F64) y = ts_to_dtype(y, dt);
    if (y && o.pin_memory) y = ts_pin_memory(y);
    if (y && rg) ts_set_requires_grad(y, true);
    y = ts_error() == TS_OK && y ? ts_keep(y) : NULL;
    ts_scope_end();
    return y;
}
