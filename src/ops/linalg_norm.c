/* linalg_norm.c — torch.linalg.norm (PyTorch's dispatch between vector_norm and matrix_norm) and
 * torch.linalg.vecdot, composed of the differentiable reductions (reduce_norm.c), so autograd and
 * every device come with them (issue 76). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/linalg_internal.h"

/* ord as a number: "2", "-1", "inf", "0.5"...; false when it is not one */
static bool ord_number(const char *ord, double *v) {
    char *end = NULL;
    *v = strtod(ord, &end);
    return end != ord && *end == '\0';
}

ts_tensor *ts_linalg_norm(ts_tensor *A, const char *ord, const ts_dims *dim, bool keepdim,
                          ts_dtype dtype) {
    const char *op = "linalg.norm";
    tsi_init();
    if (!tsi_check_input(op, A, "A")) return NULL;
    const bool is_str = ord && (!strcmp(ord, "fro") || !strcmp(ord, "nuc"));
    double v = 2.0;
    if (ord && !is_str && !ord_number(ord, &v)) {
        tsi_error_set(TS_ERR_ARG, "%s: ord must be a number, 'fro' or 'nuc', got '%s'", op, ord);
        return NULL;
    }
    if (dim && (dim->n < 0 || dim->n > TS_MAX_DIMS)) {
        tsi_error_set(TS_ERR_ARG, "%s: dim must list at most %d dims, got %d", op, TS_MAX_DIMS,
                      dim->n);
        return NULL;
    }
    const bool pair = dim && dim->n == 2;
    const int nd = A->shape.ndim;
    if (ord && (is_str || pair || (!dim && nd == 2))) { /* a matrix norm */
        char buf[64];
        if (!is_str) {
            if (isinf(v))
                snprintf(buf, sizeof buf, "%s", v > 0 ? "inf" : "-inf");
            else
                snprintf(buf, sizeof buf, "%.17g", v);
        }
        if (dim && !pair) {
            tsi_error_set(TS_ERR_ARG, "%s: dim must be a 2-tuple for a matrix norm. Got %d dims",
                          op, dim->n);
            return NULL;
        }
        return ts_matrix_norm(A, is_str ? ord : buf, pair ? dim->d[0] : -2, pair ? dim->d[1] : -1,
                              keepdim, dtype);
    }
    if (ord && !dim && nd != 1) {
        tsi_error_set(TS_ERR_SHAPE,
                      "%s: If dim is not specified but ord is, the input must be 1D or 2D. Got "
                      "%dD.",
                      op, nd);
        return NULL;
    }
    if (!ord && pair) return ts_matrix_norm(A, "fro", dim->d[0], dim->d[1], keepdim, dtype);
    return ts_vector_norm(A, v, dim ? *dim : (ts_dims){0}, keepdim, dtype);
}

ts_tensor *ts_linalg_vecdot(ts_tensor *x, ts_tensor *y, int dim) {
    const char *op = "linalg.vecdot";
    tsi_init();
    if (!x || !y) { /* complex operands too: mul and sum check them (their complex paths) */
        tsi_error_set(TS_ERR_ARG, "%s: %s is NULL", op, x ? "y" : "x");
        return NULL;
    }
    ts_scope_begin();
    ts_tensor *p = ts_mul(ts_conj(x), y);
    if (p) {
        const int d = tsi_wrap_dim(op, dim, p->shape.ndim);
        p = d >= 0 ? ts_sum_dims(p, (ts_dims){.n = 1, .d = {d}}, false) : NULL;
    }
    return tsl_finish(p);
}
