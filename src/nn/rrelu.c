/* rrelu.c — torch.nn.functional.rrelu (issue 76): in training x where x > 0, else a x with a drawn
 * from U(lower, upper) per element (ATen's rrelu_with_noise, the gradient a there and 1 elsewhere);
 * in evaluation leaky_relu with the mean slope (lower + upper) / 2. Composed of ts_rand_like,
 * ts_where and arithmetic, so every device runs it with its gradient. */
#include "core/internal.h"

#define RR_OP "rrelu"

static ts_tensor *rrelu(ts_tensor *x, double lower, double upper, bool training) {
    tsi_init();
    if (!tsi_check_input(RR_OP, x, "input")) return NULL;
    if (!tsi_is_float(x->dtype))
        return tsi_error_set(TS_ERR_DTYPE, "%s: \"rrelu\" not implemented for %s", RR_OP,
                             tsi_desc(x)),
               NULL;
    if (!(lower <= upper))
        return tsi_error_set(TS_ERR_ARG,
                             "%s: Lower bound should be less than or equal to the upper bound "
                             "(got lower %g, upper %g)",
                             RR_OP, lower, upper),
               NULL;
    if (!training) return ts_leaky_relu(x, (lower + upper) / 2);
    ts_scope_begin();
    ts_tensor *a = ts_add_scalar(ts_mul_scalar(ts_rand_like(x), upper - lower), lower);
    ts_tensor *y = ts_where(ts_gt_scalar(x, 0), x, ts_mul(x, a));
    y = ts_error() == TS_OK && y ? ts_keep(y) : NULL;
    ts_scope_end();
    return y;
}

ts_tensor *ts_rrelu(ts_tensor *x, double lower, double upper, bool training) {
    return rrelu(x, lower, upper, training);
}

ts_tensor *ts_rrelu_(ts_tensor *x, double lower, double upper, bool training) {
    ts_scope_begin();
    ts_tensor *y = rrelu(x, lower, upper, training);
    bool ok = y && ts_copy_(x, y) != NULL;
    ts_scope_end();
    return ok ? tsi_own(ts_retain(x)) : NULL;
}
