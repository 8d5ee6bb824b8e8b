/* integration.c — PyTorch's trapezoidal rule (issue 76): trapezoid and cumulative_trapezoid along
 * one dim, with sample points or a constant spacing. Each checks its operands under its own name,
 * then composes the differentiable ops (narrow, diff, add, mul, sum, cumsum), so autograd and
 * every device come with them; the formulas are ATen's (Integration.cpp). */
#include "autograd/autograd.h"
#include "ops/compose.h"

/* the spacing along dim d as a tensor that broadcasts with y's slices: a 1-D x of y's size along
 * d, diffed and viewed along d; any other x diffed along d (broadcast by the caller's mul) */
static ts_tensor *spacing(const char *op, ts_tensor *y, ts_tensor *x, int d) {
    if (x->shape.ndim == 1) {
        if (x->shape.dims[0] != y->shape.dims[d])
            return tsi_error_set(TS_ERR_SHAPE,
                                 "%s: There must be one `x` value for each sample point", op),
                   NULL;
        ts_tensor *dx = ts_diff(x, 1, 0, NULL, NULL);
        ts_shape s = y->shape;
        for (int k = 0; k < s.ndim; k++) s.dims[k] = k == d ? s.dims[d] - 1 : 1;
        return dx ? ts_reshape(dx, s) : NULL;
    }
    const int xd = tsi_wrap_dim(op, d - y->shape.ndim, x->shape.ndim);
    return xd < 0 ? NULL : ts_diff(x, 1, xd, NULL, NULL);
}

/* checks shared by both; the wrapped dim or -1 with the error set */
static int check_args(const char *op, ts_tensor *y, ts_tensor *x, int dim) {
    tsi_init();
    if (x ? !check_two(op, y, "y", x, "x") : !tsi_check_input(op, y, "y")) return -1;
    if (y->dtype == TS_BOOL)
        return tsi_error_set(TS_ERR_DTYPE, "%s: bool dtype is not supported for y", op), -1;
    if (y->shape.ndim == 0)
        return tsi_error_set(TS_ERR_SHAPE, "%s: y must have at least one dimension", op), -1;
    return tsi_wrap_dim(op, dim, y->shape.ndim);
}

ts_tensor *ts_trapezoid(ts_tensor *y, ts_tensor *x, double dx, int dim) {
    const char *op = "trapezoid";
    const int d = check_args(op, y, x, dim);
    if (d < 0) return NULL;
    const int64_t n = y->shape.ndim ? y->shape.dims[d] : 1;
    ts_scope_begin();
    if (n == 0) { /* zeros of the reduced shape, still on y's graph as PyTorch's */
        ts_tensor *s = ts_sum_dim(y, d, false);
        return finish(s ? ts_mul_scalar(s, 0.0) : NULL);
    }
    if (x) {
        ts_tensor *h = spacing(op, y, x, d);
        ts_tensor *pair = h ? ts_add(ts_narrow(y, d, 1, n - 1), ts_narrow(y, d, 0, n - 1)) : NULL;
        ts_tensor *s = pair ? ts_sum_dim(ts_mul(h, pair), d, false) : NULL;
        return finish(s ? ts_div_scalar(s, 2.0) : NULL);
    }
    /* (sum(y) - (y[0] + y[-1]) / 2) * dx */
    ts_tensor *ends = ts_add(ts_select(y, d, 0), ts_select(y, d, n - 1));
    ts_tensor *s = ends ? ts_sub(ts_sum_dim(y, d, false), ts_mul_scalar(ends, 0.5)) : NULL;
    return finish(s ? ts_mul_scalar(s, dx) : NULL);
}

ts_tensor *ts_cumulative_trapezoid(ts_tensor *y, ts_tensor *x, double dx, int dim) {
    const char *op = "cumulative_trapezoid";
    const int d = check_args(op, y, x, dim);
    if (d < 0) return NULL;
    const int64_t n = y->shape.dims[d];
    ts_scope_begin();
    if (n == 0) return finish(ts_mul_scalar(ts_narrow(y, d, 0, 0), 1.0));
    ts_tensor *avg = ts_add(ts_narrow(y, d, 1, n - 1), ts_narrow(y, d, 0, n - 1));
    avg = avg ? ts_div_scalar(avg, 2.0) : NULL;
    if (avg && x) {
        ts_tensor *h = spacing(op, y, x, d);
        avg = h ? ts_mul(avg, h) : NULL;
    } else if (avg) {
        avg = ts_mul_scalar(avg, dx);
    }
    return finish(avg ? ts_cumsum(avg, d, TS_DTYPE_DEFAULT) : NULL);
}
