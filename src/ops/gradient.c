/* gradient.c — torch.gradient (issue 76): along each requested dim, second-order central
 * differences inside (with coordinates: the second-order formula for unequal steps) and first- or
 * second-order one-sided differences at the two ends, PyTorch's formulas term for term, composed of
 * differentiable ops (narrow, mul, div, cat): every device, autograd. */
#include "autograd/autograd.h"
#include "core/internal.h"

#define N(t, s, len) ts_narrow(t, d, s, len)

/* uniform step h */
static ts_tensor *along_step(ts_tensor *f, int d, double h, int order) {
    const int64_t n = f->shape.dims[d];
    ts_tensor *inner = ts_div_scalar(ts_sub(N(f, 2, n - 2), N(f, 0, n - 2)), 2 * h), *first, *last;
    if (order == 1) {
        first = ts_div_scalar(ts_sub(N(f, 1, 1), N(f, 0, 1)), h);
        last = ts_div_scalar(ts_sub(N(f, n - 1, 1), N(f, n - 2, 1)), h);
    } else {
        first = ts_div_scalar(
            ts_add(ts_sub(ts_mul_scalar(N(f, 1, 1), 2.0), ts_mul_scalar(N(f, 0, 1), 1.5)),
                   ts_mul_scalar(N(f, 2, 1), -0.5)),
            h);
        last = ts_div_scalar(
            ts_add(ts_sub(ts_mul_scalar(N(f, n - 3, 1), 0.5), ts_mul_scalar(N(f, n - 2, 1), 2.0)),
                   ts_mul_scalar(N(f, n - 1, 1), 1.5)),
            h);
    }
    return ts_cat((ts_tensor *[]){first, inner, last}, 3, d);
}

/* coordinates x (1-D, the dim's size) */
static ts_tensor *along_coords(ts_tensor *f, int d, ts_tensor *x, int order) {
    const int64_t n = f->shape.dims[d];
    ts_shape s = {.ndim = f->shape.ndim};
    for (int i = 0; i < s.ndim; i++) s.dims[i] = i == d ? n : 1;
    ts_tensor *dx = ts_diff(ts_reshape(ts_to_dtype(x, f->dtype), s), 1, d, NULL, NULL);
    ts_tensor *a = N(dx, 0, n - 2), *b = N(dx, 1, n - 2);
    ts_tensor *fm = N(f, 0, n - 2), *f0 = N(f, 1, n - 2), *fp = N(f, 2, n - 2);
    ts_tensor *aa = ts_mul(a, a), *bb = ts_mul(b, b);
    /* (a^2 fp - b^2 fm + (b^2 - a^2) f0) / (a b (a + b)) */
    ts_tensor *num = ts_add(ts_sub(ts_mul(aa, fp), ts_mul(bb, fm)), ts_mul(ts_sub(bb, aa), f0));
    ts_tensor *inner = ts_div(num, ts_mul(ts_mul(a, b), ts_add(a, b))), *first, *last;
    if (order == 1) {
        first = ts_div(ts_sub(N(f, 1, 1), N(f, 0, 1)), N(dx, 0, 1));
        last = ts_div(ts_sub(N(f, n - 1, 1), N(f, n - 2, 1)), N(dx, n - 2, 1));
    } else {
        ts_tensor *h1 = N(dx, 0, 1), *h2 = N(dx, 1, 1), *h12 = ts_add(h1, h2);
        /* -(2 h1 + h2) / (h1 (h1 + h2)) f0 + (h1 + h2) / (h1 h2) f1 - h1 / (h2 (h1 + h2)) f2 */
        ts_tensor *c0 = ts_neg(ts_div(ts_add(ts_mul_scalar(h1, 2.0), h2), ts_mul(h1, h12)));
        ts_tensor *c1 = ts_div(h12, ts_mul(h1, h2)), *c2 = ts_div(h1, ts_mul(h2, h12));
        first =
            ts_sub(ts_add(ts_mul(c0, N(f, 0, 1)), ts_mul(c1, N(f, 1, 1))), ts_mul(c2, N(f, 2, 1)));
        ts_tensor *g1 = N(dx, n - 2, 1), *g2 = N(dx, n - 3, 1), *g12 = ts_add(g1, g2);
        /* g1 / (g2 (g1 + g2)) f[n-3] - (g1 + g2) / (g1 g2) f[n-2] + (2 g1 + g2) / (g1 (g1 + g2))
         * f[n-1] */
        ts_tensor *e0 = ts_div(g1, ts_mul(g2, g12)), *e1 = ts_div(g12, ts_mul(g1, g2));
        ts_tensor *e2 = ts_div(ts_add(ts_mul_scalar(g1, 2.0), g2), ts_mul(g1, g12));
        last = ts_add(ts_sub(ts_mul(e0, N(f, n - 3, 1)), ts_mul(e1, N(f, n - 2, 1))),
                      ts_mul(e2, N(f, n - 1, 1)));
    }
    return ts_cat((ts_tensor *[]){first, inner, last}, 3, d);
}

ts_status ts_gradient(ts_tensor *input, const int *dims, int ndims, const double *h,
                      ts_tensor *const *coords, int edge_order, ts_tensor **out) {
    const char *op = "torch.gradient";
    tsi_init();
    if (input && tsi_is_complex(input->dtype)) /* before the complex gate's generic refusal */
        return tsi_error_set(TS_ERR_DTYPE,
                             "%s: complex input is not supported (a real computation would drop "
                             "its imaginary part): %s",
                             op, tsi_desc(input));
    if (!tsi_check_input(op, input, "input")) return ts_error();
    if (!out || (ndims > 0 && !dims) || ndims < 0)
        return tsi_error_set(TS_ERR_ARG, "%s: dims and out must be given", op);
    if (edge_order != 1 && edge_order != 2)
        return tsi_error_set(TS_ERR_ARG, "%s only supports edge_order=1 and edge_order=2, got %d",
                             op, edge_order);
    if (input->dtype == TS_BOOL)
        return tsi_error_set(TS_ERR_DTYPE, "%s: input must not be bool, got %s", op,
                             tsi_desc(input));
    const int nd = input->shape.ndim;
    int dd[TS_MAX_DIMS];
    if (ndims > nd)
        return tsi_error_set(TS_ERR_ARG, "%s: %d dims given for a %d-dim input", op, ndims, nd);
    for (int i = 0; i < ndims; i++) {
        if ((dd[i] = tsi_wrap_dim(op, dims[i], nd)) < 0) return ts_error();
        for (int k = 0; k < i; k++)
            if (dd[k] == dd[i])
                return tsi_error_set(TS_ERR_ARG, "%s: dim %d appears multiple times", op, dd[i]);
        const int64_t n = input->shape.dims[dd[i]];
        if (n < edge_order + 1)
            return tsi_error_set(TS_ERR_SHAPE,
                                 "%s expected each dimension size to be at least edge_order+1 "
                                 "(dim %d has size %lld)",
                                 op, dd[i], (long long)n);
        ts_tensor *c = coords ? coords[i] : NULL;
        if (c) {
            if (!tsi_check_input(op, c, "spacing")) return ts_error();
            if (c->shape.ndim != 1 || c->shape.dims[0] != n)
                return tsi_error_set(TS_ERR_SHAPE,
                                     "%s expected each tensor to be on the same device as the "
                                     "input and 1-D of the dim's size %lld, got %s (dim %d)",
                                     op, (long long)n, tsi_desc(c), dd[i]);
            if (!tsi_device_eq(tsi_device(c), tsi_device(input)))
                return tsi_error_set(TS_ERR_DEVICE,
                                     "%s expected each tensor to be on the same device, but got "
                                     "devices %s and %s",
                                     op, tsi_desc(c), tsi_desc(input));
        }
    }
    ts_scope_begin();
    ts_tensor *f = tsi_is_float(input->dtype) ? input : ts_to_dtype(input, TS_F32);
    ts_tensor *r[TS_MAX_DIMS] = {0};
    for (int i = 0; i < ndims && f; i++) {
        ts_tensor *c = coords ? coords[i] : NULL;
        r[i] = c ? along_coords(f, dd[i], c, edge_order)
                 : along_step(f, dd[i], h ? h[i] : 1.0, edge_order);
        if (!r[i]) break;
    }
    const ts_status st = ts_error();
    for (int i = 0; i < ndims; i++) out[i] = st == TS_OK ? ts_keep(r[i]) : NULL;
    ts_scope_end();
    return st;
}
