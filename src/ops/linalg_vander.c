/* linalg_vander.c — torch.linalg.vander: x[..., i] ** j for j < N, the powers built by repeated
 * products (x ** 0, x, x * x, ...) and joined by cat, so differentiable on every device, integers
 * kept integral (issue 76). */
#include <stdint.h>
#include <stdlib.h>

#include "ops/linalg_internal.h"

ts_tensor *ts_linalg_vander(ts_tensor *x, int64_t N) {
    const char *op = "linalg.vander";
    tsi_init();
    if (!tsi_check_input(op, x, "x")) return NULL;
    if (x->dtype == TS_BOOL) {
        tsi_error_set(TS_ERR_DTYPE, "%s: x must not be a bool tensor", op);
        return NULL;
    }
    ts_scope_begin();
    ts_tensor *c = x->shape.ndim < 1 ? ts_reshape(x, TS_SHAPE(1)) : x;
    const int64_t n = N < 0 ? (c ? c->shape.dims[c->shape.ndim - 1] : 0) : N;
    if (c && n < 1) {
        tsi_error_set(TS_ERR_ARG, "%s: N must be greater than 1.", op);
        return tsl_finish(NULL);
    }
    ts_tensor **cols = c && n <= INT32_MAX ? malloc((size_t)n * sizeof *cols) : NULL;
    if (c && !cols) tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op);
    ts_tensor *y = NULL;
    if (cols) {
        c = ts_unsqueeze(c, -1);
        bool ok = (cols[0] = c ? ts_pow_scalar(c, 0.0) : NULL) != NULL;
        for (int64_t j = 1; j < n && ok; j++)
            ok = (cols[j] = j == 1 ? c : ts_mul(cols[j - 1], c)) != NULL;
        y = ok ? ts_cat(cols, (int)n, -1) : NULL;
        free(cols);
    }
    return tsl_finish(y);
}
