/* feature_dropout.c — ATen's feature dropout (torch.nn.functional.dropout1d / 2d / 3d, issue 76):
 * one Bernoulli(1 - p) draw per channel (mask [N, C, 1, ...], or [C, 1, ...] for an unbatched
 * input), the kept channels scaled by 1 / (1 - p); p = 1 is input * 0 (NaN kept, as PyTorch).
 * Composed of ts_bernoulli_p and ts_mul, so the gradient is the mask's and every device runs it. */
#include "core/internal.h"

#define FD_OP "feature_dropout"

static ts_tensor *feature_dropout(ts_tensor *x, double p, bool training, bool unbatched) {
    tsi_init();
    if (!tsi_check_input(FD_OP, x, "input")) return NULL;
    if (!(p >= 0 && p <= 1))
        return tsi_error_set(TS_ERR_ARG,
                             "%s: dropout probability has to be between 0 and 1, but got %g", FD_OP,
                             p),
               NULL;
    if (!tsi_is_float(x->dtype))
        return tsi_error_set(TS_ERR_DTYPE, "%s: expected a floating point input, got %s", FD_OP,
                             tsi_desc(x)),
               NULL;
    const int ch = unbatched ? 0 : 1; /* the channel dim: the mask spans dims 0..ch */
    if (x->shape.ndim < ch + 1 || (!unbatched && x->shape.ndim < 2))
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s: Feature dropout requires at least 2 dimensions in the input "
                             "(got %s)",
                             FD_OP, tsi_desc(x)),
               NULL;
    if (!training || p == 0 || tsi_numel(x->shape) == 0) return tsi_own(ts_retain(x));
    ts_scope_begin();
    ts_tensor *y;
    if (p == 1) {
        y = ts_mul_scalar(x, 0.0);
    } else {
        ts_shape ms = x->shape;
        for (int i = ch + 1; i < ms.ndim; i++) ms.dims[i] = 1;
        ts_tensor *noise = ts_bernoulli_p(
            ts_empty(ms, (ts_opts){.dtype = x->dtype, .device = tsi_device(x)}), 1 - p);
        if (noise) ts_div_scalar_(noise, 1 - p);
        y = ts_mul(x, noise);
    }
    y = ts_error() == TS_OK && y ? ts_keep(y) : NULL;
    ts_scope_end();
    return y;
}

ts_tensor *ts_feature_dropout(ts_tensor *x, double p, bool training, bool unbatched) {
    return feature_dropout(x, p, training, unbatched);
}

ts_tensor *ts_feature_dropout_(ts_tensor *x, double p, bool training, bool unbatched) {
    ts_scope_begin();
    ts_tensor *y = feature_dropout(x, p, training, unbatched);
    bool ok = y && (y == x || ts_copy_(x, y) != NULL);
    ts_scope_end();
    return ok ? tsi_own(ts_retain(x)) : NULL;
}
