/* gelu_tanh.c — GELU's tanh approximation (functional and nn.GELU(approximate='tanh')), composed
 * from differentiable ops so autograd derives its backward. */
#include <math.h>

#include "nn/layers_internal.h"
#include "nn/module_internal.h"

ts_tensor *ts_gelu_tanh(ts_tensor *x) {
    tsi_init();
    if (!tsi_check_input("gelu_tanh", x, "input")) return NULL;
    if (!tsi_is_float(x->dtype))
        return tsi_error_set(TS_ERR_DTYPE, "gelu_tanh: expected a floating point input, got %s",
                             tsi_desc(x)),
               NULL;
    const double k = 0.79788456080286535588; /* sqrt(2 / pi) */
    ts_scope_begin();
    /* inner = k * (x + 0.044715 x^3) = k * x * (1 + 0.044715 x^2) */
    ts_tensor *inner =
        ts_mul(ts_mul_scalar(x, k), ts_add_scalar(ts_mul_scalar(ts_square(x), 0.044715), 1.0));
    ts_tensor *y = ts_mul(ts_mul_scalar(x, 0.5), ts_add_scalar(ts_tanh(inner), 1.0));
    y = ts_keep(y);
    ts_scope_end();
    return y;
}

static ts_tensor *gelu_tanh_forward(ts_module *self, ts_tensor *x) {
    (void)self;
    return ts_gelu_tanh(x);
}

bool tsi_module_is_gelu_tanh(const ts_module *m) { return m && m->forward == gelu_tanh_forward; }

static void gelu_tanh_extra(ts_module *self, char *buf, size_t n) {
    (void)self;
    snprintf(buf, n, "approximate='tanh'");
}

ts_module *ts_gelu_new_ex(ts_gelu_approximate approximate) {
    tsi_init();
    if (approximate == TS_GELU_NONE) return ts_gelu_new();
    if (approximate != TS_GELU_TANH)
        return tsi_error_set(TS_ERR_ARG,
                             "GELU: approximate must be TS_GELU_NONE or TS_GELU_TANH, "
                             "got %d",
                             (int)approximate),
               NULL;
    ts_module *m = ts_module_alloc(sizeof *m, "GELU", gelu_tanh_forward);
    if (m) m->extra_repr = gelu_tanh_extra;
    return m;
}
