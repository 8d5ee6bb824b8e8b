/* masked.c — torch.masked's sum, mean, median, cumsum, cumprod and normalize over (input, mask)
 * (torch/masked/_ops.py): the masked-out elements become the op's identity (where), then the
 * plain op runs; each composes differentiable public ops, so autograd and every device come
 * with them. */
#include <math.h>

#include "autograd/autograd.h"
#include "ops/compose.h"

/* input checked, and mask (NULL: none) against it: same device, broadcastable to its shape */
static bool check_args(const char *op, ts_tensor *input, ts_tensor *mask) {
    if (!tsi_check_input(op, input, "input")) return false;
    if (!mask) return true;
    if (!tsi_check_input(op, mask, "mask")) return false;
    if (!tsi_device_eq(tsi_device(mask), tsi_device(input))) {
        tsi_error_set(TS_ERR_DEVICE, "%s: mask on %s, input on %s", op, tsi_desc(mask),
                      tsi_desc(input));
        return false;
    }
    const ts_shape m = mask->shape, s = input->shape;
    bool ok = m.ndim <= s.ndim;
    for (int i = 0; ok && i < m.ndim; i++) {
        const int64_t a = m.dims[m.ndim - 1 - i], b = s.dims[s.ndim - 1 - i];
        ok = a == b || a == 1;
    }
    if (!ok)
        tsi_error_set(TS_ERR_SHAPE, "%s: mask of shape %s does not broadcast to input's shape %s",
                      op, tsi_shape_str(m), tsi_shape_str(s));
    return ok;
}

/* dims wrapped and sorted without repeats (torch.masked's _canonical_dim; a 0-dim input reduces
 * over its one element) */
static bool canonical_dims(const char *op, ts_dims in, int ndim, ts_dims *out) {
    *out = (ts_dims){0};
    const int n1 = ndim > 0 ? ndim : 1;
    bool seen[TS_MAX_DIMS] = {false};
    if (in.n < 0 || in.n > TS_MAX_DIMS)
        return tsi_error_set(TS_ERR_ARG, "%s: invalid number of dims %d", op, in.n), false;
    for (int i = 0; i < in.n; i++) {
        const int d = in.d[i];
        if (d >= n1 || d < -n1)
            return tsi_error_set(TS_ERR_ARG,
                                 "%s: dim %d out of range (expected to be in range of [%d, %d])",
                                 op, d, -n1, n1 - 1),
                   false;
        const int w = d < 0 ? d + n1 : d;
        if (seen[w])
            return tsi_error_set(TS_ERR_ARG,
                                 "%s: dim=%d appears multiple times in the list of dims", op, d),
                   false;
        seen[w] = true;
    }
    if (ndim == 0) return true; /* the one element: every dim */
    for (int k = 0; k < ndim; k++)
        if (seen[k]) out->d[out->n++] = k;
    return true;
}

/* mask as bool of input's shape, and where(mask, input, identity) (inside a scope) */
static ts_tensor *bool_mask(ts_tensor *input, ts_tensor *mask) {
    ts_tensor *m = ts_to_dtype(mask, TS_BOOL);
    return m ? ts_expand(m, input->shape) : NULL;
}

static ts_tensor *combine(ts_tensor *input, ts_tensor *mask, double identity) {
    if (!mask) return input;
    ts_tensor *m = bool_mask(input, mask);
    return m ? ts_where(m, input, ts_full_like(input, identity)) : NULL;
}

static ts_dtype sum_dtype(ts_tensor *input, ts_dtype dtype) {
    if (dtype != TS_DTYPE_DEFAULT) return dtype;
    switch (input->dtype) {
    case TS_U8:
    case TS_BOOL:
    case TS_I8:
    case TS_I16:
    case TS_I32:
        return TS_I64;
    default:
        return input->dtype;
    }
}

static ts_tensor *masked_sum(ts_tensor *input, ts_dims dims, bool keepdim, ts_dtype dt,
                             ts_tensor *mask) {
    ts_tensor *x = combine(input, mask, 0);
    x = x ? ts_to_dtype(x, dt) : NULL;
    return x ? ts_sum_dims(x, dims, keepdim) : NULL;
}

ts_tensor *ts_masked_sum(ts_tensor *input, ts_dims dims, bool keepdim, ts_dtype dtype,
                         ts_tensor *mask) {
    const char *op = "masked_sum";
    tsi_init();
    ts_dims d;
    if (!check_args(op, input, mask) || !canonical_dims(op, dims, input->shape.ndim, &d))
        return NULL;
    ts_scope_begin();
    return finish(masked_sum(input, d, keepdim, sum_dtype(input, dtype), mask));
}

ts_tensor *ts_masked_mean(ts_tensor *input, ts_dims dims, bool keepdim, ts_dtype dtype,
                          ts_tensor *mask) {
    const char *op = "masked_mean";
    tsi_init();
    ts_dims d;
    if (!check_args(op, input, mask) || !canonical_dims(op, dims, input->shape.ndim, &d))
        return NULL;
    const ts_dtype dt = dtype == TS_DTYPE_DEFAULT ? input->dtype : dtype;
    if (!tsi_is_float(dt))
        return tsi_error_set(TS_ERR_ARG,
                             "%s: could not infer output dtype. %s dtype must be either a "
                             "floating point or complex dtype. Got: %s",
                             op, dtype == TS_DTYPE_DEFAULT ? "Input" : "Optional",
                             ts_dtype_name(dt)),
               NULL;
    ts_scope_begin();
    /* the count of masked-in elements over dims (int64), and their sum */
    ts_tensor *in = mask ? bool_mask(input, mask) : ts_ones(input->shape, opts_on(input, TS_BOOL));
    ts_tensor *count = in ? masked_sum(in, d, keepdim, TS_I64, NULL) : NULL;
    ts_tensor *total = count ? masked_sum(input, d, keepdim, dt, mask) : NULL;
    return finish(total ? ts_div(total, count) : NULL);
}

static ts_tensor *masked_cumulative(const char *op, bool prod, ts_tensor *input, int dim,
                                    ts_dtype dtype, ts_tensor *mask) {
    tsi_init();
    if (!check_args(op, input, mask)) return NULL;
    ts_dims d;
    if (!canonical_dims(op, (ts_dims){.n = 1, .d = {dim}}, input->shape.ndim, &d)) return NULL;
    const int w = d.n ? d.d[0] : 0;
    const ts_dtype dt = dtype == TS_DTYPE_DEFAULT ? input->dtype : dtype;
    ts_scope_begin();
    ts_tensor *x = combine(input, mask, prod ? 1 : 0);
    ts_tensor *y = x ? (prod ? ts_cumprod(x, w, dt) : ts_cumsum(x, w, dt)) : NULL;
    return finish(y ? ts_to_dtype(y, dt) : NULL);
}

ts_tensor *ts_masked_cumsum(ts_tensor *input, int dim, ts_dtype dtype, ts_tensor *mask) {
    return masked_cumulative("masked_cumsum", false, input, dim, dtype, mask);
}

ts_tensor *ts_masked_cumprod(ts_tensor *input, int dim, ts_dtype dtype, ts_tensor *mask) {
    return masked_cumulative("masked_cumprod", true, input, dim, dtype, mask);
}

ts_tensor *ts_masked_median(ts_tensor *input, int dim, bool keepdim, ts_dtype dtype,
                            ts_tensor *mask) {
    const char *op = "masked_median";
    tsi_init();
    if (!check_args(op, input, mask)) return NULL;
    ts_dims d;
    if (!canonical_dims(op, (ts_dims){.n = 1, .d = {dim}}, input->shape.ndim, &d)) return NULL;
    const int w = d.n ? d.d[0] : 0;
    const bool is_float = tsi_is_float(input->dtype);
    const ts_dtype dt = dtype == TS_DTYPE_DEFAULT ? input->dtype : dtype;
    ts_scope_begin();
    ts_tensor *x = is_float ? input : ts_to_dtype(input, TS_F32);
    x = x ? combine(x, mask, NAN) : NULL;
    ts_tensor *y = x ? ts_nanmedian_dim(x, w, keepdim, NULL) : NULL;
    if (!y || is_float) return finish(y);
    /* an integer result cannot hold the NaN of a fully masked-out row */
    ts_tensor *nan = ts_any(ts_isnan(y), (ts_dims){0}, false);
    const double any = nan ? ts_item(nan) : NAN;
    if (any != 0 && ts_error() == TS_OK)
        tsi_error_set(TS_ERR_ARG,
                      "%s: expects no fully masked out rows if dtype is not floating "
                      "point",
                      op);
    return finish(ts_to_dtype(y, dt));
}

ts_tensor *ts_masked_normalize(ts_tensor *input, double ord, int dim, double eps, ts_dtype dtype,
                               ts_tensor *mask) {
    const char *op = "masked_normalize";
    tsi_init();
    if (!check_args(op, input, mask)) return NULL;
    ts_dims d;
    if (!canonical_dims(op, (ts_dims){.n = 1, .d = {dim}}, input->shape.ndim, &d)) return NULL;
    if (!tsi_is_float(input->dtype))
        return tsi_error_set(TS_ERR_DTYPE, "%s: expected a floating-point input, got %s", op,
                             ts_dtype_name(input->dtype)),
               NULL;
    const ts_dtype dt = dtype == TS_DTYPE_DEFAULT ? input->dtype : dtype;
    ts_scope_begin();
    /* torch.masked.norm's identity is +inf for ord -inf (a min), else 0 */
    ts_tensor *xn = combine(input, mask, ord == -INFINITY ? INFINITY : 0);
    ts_tensor *nrm = xn ? ts_vector_norm(xn, ord, d, true, dt) : NULL;
    ts_tensor *denom = nrm ? ts_maximum(nrm, ts_full_like(nrm, eps)) : NULL;
    ts_tensor *x = denom ? combine(input, mask, 0) : NULL;
    return finish(x ? ts_div(x, denom) : NULL);
}
