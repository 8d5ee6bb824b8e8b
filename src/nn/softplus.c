/* softplus.c — torch.nn.functional.softplus(x, beta, threshold) (issue 76): x where beta x >
 * threshold, else log(1 + exp(beta x)) / beta, composed of differentiable ops around ts_softplus
 * (beta 1, threshold 20) so the gradient is PyTorch's (1 in the linear region, sigmoid(beta x)
 * elsewhere) on every device. */
#include "core/internal.h"

ts_tensor *ts_softplus_ex(ts_tensor *t, double beta, double threshold) {
    const char *op = "softplus";
    tsi_init();
    if (!tsi_check_input(op, t, "input")) return NULL;
    if (!tsi_is_float(t->dtype))
        return tsi_error_set(TS_ERR_DTYPE, "%s: \"softplus\" not implemented for %s", op,
                             tsi_desc(t)),
               NULL;
    if (beta == 1 && threshold == 20) return ts_softplus(t);
    ts_scope_begin();
    ts_tensor *z = beta == 1 ? t : ts_mul_scalar(t, beta);
    ts_tensor *s = ts_softplus(z); /* exact up to z = 20, z itself past it */
    if (threshold > 20) {
        /* past 20 and up to the threshold: z + log1p(exp(-z)), from z clamped at 20 so the
         * branch where() drops stays finite (and so does its zero gradient) */
        ts_tensor *zc = ts_clamp_min(z, 20);
        s = ts_where(ts_gt_scalar(z, 20), ts_add(zc, ts_log1p(ts_exp(ts_neg(zc)))), s);
    }
    if (beta != 1) s = ts_div_scalar(s, beta);
    ts_tensor *y = ts_where(ts_gt_scalar(z, threshold), t, s);
    y = ts_error() == TS_OK && y ? ts_keep(y) : NULL;
    ts_scope_end();
    return y;
}
