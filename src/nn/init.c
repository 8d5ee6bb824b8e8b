/* init.c — torch.nn.init's formulas, in place, without a graph, from the global generator. */
#include <math.h>

#include "nn/module_internal.h"

/* Runs one in-place fill under no-grad (parameters that require grad may be written) in a scope of
 * its own (the op's returned reference dies here). Returns t, borrowed, or NULL on failure. */
enum { FILL_UNIFORM, FILL_NORMAL, FILL_CONST };
static ts_tensor *fill(ts_tensor *t, int kind, double a, double b) {
    int depth = ts_scope_depth();
    ts_no_grad_begin();
    ts_scope_begin();
    ts_tensor *r = NULL;
    if (ts_scope_depth() == depth + 1) {
        if (kind == FILL_UNIFORM)
            r = ts_uniform_(t, a, b);
        else if (kind == FILL_NORMAL)
            r = ts_normal_(t, a, b);
        else
            r = ts_fill_(t, a);
        ts_scope_end();
    }
    ts_no_grad_end();
    return r ? t : NULL;
}

/* torch.nn.init._calculate_fan_in_and_fan_out */
static bool fans(const char *op, ts_tensor *t, double *fan_in, double *fan_out) {
    if (t->shape.ndim < 2)
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s: Fan in and fan out can not be computed for tensor with fewer "
                             "than 2 dimensions (got %s)",
                             op, tsi_desc(t)),
               false;
    double receptive = 1;
    for (int i = 2; i < t->shape.ndim; i++) receptive *= (double)t->shape.dims[i];
    *fan_in = (double)t->shape.dims[1] * receptive;
    *fan_out = (double)t->shape.dims[0] * receptive;
    return true;
}

/* kaiming_uniform_(t, a, mode='fan_in', nonlinearity='leaky_relu'): U(-b, b) with
 * b = sqrt(3) * gain / sqrt(fan_in), gain = sqrt(2 / (1 + a^2)). */
ts_tensor *ts_init_kaiming_uniform_(ts_tensor *t, double a) {
    const char *op = "init_kaiming_uniform_";
    if (!tsi_check_input(op, t, "tensor")) return NULL;
    if (tsi_numel(t->shape) == 0)
        return t; /* PyTorch: "Initializing zero-element tensors is a no-op" */
    double fan_in, fan_out;
    if (!fans(op, t, &fan_in, &fan_out)) return NULL;
    double gain = sqrt(2.0 / (1.0 + a * a));
    double bound = sqrt(3.0) * gain / sqrt(fan_in);
    return fill(t, FILL_UNIFORM, -bound, bound);
}

/* kaiming_normal_(t, a, mode, 'leaky_relu'): N(0, std), std = gain / sqrt(fan_in or fan_out). */
ts_tensor *ts_init_kaiming_normal_(ts_tensor *t, double a, ts_fan_mode mode) {
    const char *op = "init_kaiming_normal_";
    if (!tsi_check_input(op, t, "tensor")) return NULL;
    if (mode != TS_FAN_IN && mode != TS_FAN_OUT)
        return tsi_error_set(TS_ERR_ARG, "%s: mode must be TS_FAN_IN or TS_FAN_OUT, got %d", op,
                             (int)mode),
               NULL;
    if (tsi_numel(t->shape) == 0) return t;
    double fan_in, fan_out;
    if (!fans(op, t, &fan_in, &fan_out)) return NULL;
    double gain = sqrt(2.0 / (1.0 + a * a));
    return fill(t, FILL_NORMAL, 0.0, gain / sqrt(mode == TS_FAN_IN ? fan_in : fan_out));
}

/* xavier_uniform_(t, gain): U(-b, b) with b = gain * sqrt(6 / (fan_in + fan_out)). */
ts_tensor *ts_init_xavier_uniform_(ts_tensor *t, double gain) {
    const char *op = "init_xavier_uniform_";
    if (!tsi_check_input(op, t, "tensor")) return NULL;
    double fan_in, fan_out;
    if (!fans(op, t, &fan_in, &fan_out)) return NULL;
    double bound = gain * sqrt(6.0 / (fan_in + fan_out));
    return fill(t, FILL_UNIFORM, -bound, bound);
}

ts_tensor *ts_init_uniform_(ts_tensor *t, double low, double high) {
    if (!tsi_check_input("init_uniform_", t, "tensor")) return NULL;
    return fill(t, FILL_UNIFORM, low, high);
}

ts_tensor *ts_init_normal_(ts_tensor *t, double mean, double std) {
    if (!tsi_check_input("init_normal_", t, "tensor")) return NULL;
    return fill(t, FILL_NORMAL, mean, std);
}

ts_tensor *ts_init_zeros_(ts_tensor *t) {
    if (!tsi_check_input("init_zeros_", t, "tensor")) return NULL;
    return fill(t, FILL_CONST, 0, 0);
}

ts_tensor *ts_init_ones_(ts_tensor *t) {
    if (!tsi_check_input("init_ones_", t, "tensor")) return NULL;
    return fill(t, FILL_CONST, 1, 0);
}
