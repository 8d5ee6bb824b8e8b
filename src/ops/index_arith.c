/* index_arith.c — issue 76's small integer forms: torch.frexp (composed of elementwise ops in
 * double: every device), torch.unravel_index (floor remainders and quotients; the range checked on
 * the host, as PyTorch's) and torch.combinations (the index rows enumerated on the host, one
 * index_select: differentiable). */
#include <stdlib.h>

#include "autograd/autograd.h"
#include "host_values.h"

/* PyTorch's derivative of the mantissa: grad / 2^exponent (the exponent recomputed from x) */
static void frexp_backward(ts_node *n, ts_tensor *const *grad_out, ts_tensor **grad_in) {
    if (!grad_out[0] || !tsi_node_needs(n, 0)) return;
    ts_tensor *x = tsi_node_saved(n, 0), *m = NULL, *e = NULL;
    if (!x || ts_frexp(x, &m, &e) != TS_OK) return;
    grad_in[0] = ts_div(grad_out[0], ts_exp2(ts_to_dtype(e, grad_out[0]->dtype)));
}

ts_status ts_frexp(ts_tensor *input, ts_tensor **mantissa, ts_tensor **exponent) {
    const char *op = "torch.frexp";
    tsi_init();
    if (!tsi_check_input(op, input, "input")) return ts_error();
    if (!mantissa || !exponent)
        return tsi_error_set(TS_ERR_ARG, "%s: mantissa and exponent must not be NULL", op);
    if (!tsi_is_float(input->dtype))
        return tsi_error_set(TS_ERR_DTYPE, "%s only supports floating-point dtypes, got %s", op,
                             tsi_desc(input));
    ts_scope_begin();
    ts_no_grad_begin();
    ts_tensor *x = ts_to_dtype(input, TS_F64);
    ts_tensor *ok = ts_logical_and(ts_isfinite(x), ts_ne_scalar(x, 0));
    ts_tensor *safe = ts_where(ok, ts_abs(x), ts_ones_like(x));
    ts_tensor *e = ts_add_scalar(ts_floor(ts_log2(safe)), 1);
    /* 2^-e in two halves (e may reach 1075 for subnormals); one correction step each way where
     * log2 rounded across a power of two */
    ts_tensor *half = ts_floor(ts_div_scalar(e, 2));
    ts_tensor *m = ts_mul(ts_mul(safe, ts_exp2(ts_neg(half))), ts_exp2(ts_neg(ts_sub(e, half))));
    ts_tensor *low = ts_lt_scalar(m, 0.5);
    e = ts_where(low, ts_sub_scalar(e, 1), e);
    m = ts_where(low, ts_mul_scalar(m, 2), m);
    ts_tensor *big = ts_ge_scalar(m, 1);
    e = ts_where(big, ts_add_scalar(e, 1), e);
    m = ts_where(big, ts_div_scalar(m, 2), m);
    ts_tensor *mant = ts_where(ok, ts_to_dtype(ts_copysign(m, x), input->dtype), ts_detach(input));
    ts_tensor *ex = ts_to_dtype(ts_where(ok, e, ts_zeros_like(e)), TS_I32);
    ts_no_grad_end();
    ts_status st = mant && ex ? ts_error() : (ts_error() ? ts_error() : TS_ERR_OOM);
    ts_tensor *const ins[1] = {input};
    if (st == TS_OK && tsi_needs_graph(ins, 1) &&
        !tsi_record("FrexpBackward0", op, frexp_backward, ins, 1, mant, ins, 1))
        st = ts_error() ? ts_error() : TS_ERR_OOM;
    *mantissa = st == TS_OK ? ts_keep(mant) : NULL;
    *exponent = st == TS_OK ? ts_keep(ex) : NULL;
    ts_scope_end();
    return st;
}

ts_status ts_unravel_index(ts_tensor *indices, const int64_t *shape, int ndims, ts_tensor **out) {
    const char *op = "torch.unravel_index";
    tsi_init();
    if (!tsi_check_input(op, indices, "indices")) return ts_error();
    if (!out || ndims < 0 || (ndims && !shape))
        return tsi_error_set(TS_ERR_ARG, "%s: shape and out must be given", op);
    if (!tsi_is_int(indices->dtype))
        return tsi_error_set(TS_ERR_DTYPE, "%s: expected 'indices' to be integer dtype, but got %s",
                             op, tsi_desc(indices));
    int64_t total = 1;
    for (int i = 0; i < ndims; i++) {
        if (shape[i] < 0)
            return tsi_error_set(TS_ERR_ARG,
                                 "%s: 'shape' cannot have negative values, but got %lld", op,
                                 (long long)shape[i]);
        if (shape[i] && total > INT64_MAX / shape[i])
            return tsi_error_set(TS_ERR_ARG, "%s: 'shape' is too large (its product overflows)",
                                 op);
        total *= shape[i];
    }
    ts_scope_begin();
    const int64_t n = ts_numel(indices);
    int64_t *v = n ? tsi_host_values(op, indices, TS_I64) : NULL;
    for (int64_t i = 0; i < n && v; i++)
        if (v[i] >= total || v[i] < -total) {
            tsi_error_set(TS_ERR_ARG, "%s: 'indices' must be in range [-%lld, %lld), got %lld", op,
                          (long long)total, (long long)total, (long long)v[i]);
            break;
        }
    free(v);
    ts_tensor *idx = ts_error() == TS_OK ? ts_to_dtype(indices, TS_I64) : NULL;
    ts_tensor *r[TS_MAX_DIMS * 2] = {0};
    for (int i = ndims - 1; i >= 0 && idx; i--) {
        if (shape[i] == 0) { /* no index passed the range check: an empty tensor */
            r[i] = ts_mul_scalar(idx, 0);
            continue;
        }
        ts_tensor *s =
            ts_scalar((double)shape[i], (ts_opts){.dtype = TS_I64, .device = tsi_device(idx)});
        r[i] = ts_remainder(idx, s);
        idx = ts_floor_divide(idx, s);
    }
    const ts_status st = ts_error();
    for (int i = 0; i < ndims; i++) out[i] = st == TS_OK ? ts_keep(r[i]) : NULL;
    ts_scope_end();
    return st;
}

ts_tensor *ts_combinations(ts_tensor *input, int64_t r, bool with_replacement) {
    const char *op = "torch.combinations";
    tsi_init();
    if (!tsi_check_input(op, input, "input")) return NULL;
    if (input->shape.ndim != 1)
        return tsi_error_set(TS_ERR_SHAPE, "%s: Expect a 1D vector, but got %s", op,
                             tsi_desc(input)),
               NULL;
    if (r < 0)
        return tsi_error_set(TS_ERR_ARG, "%s: Expect a non-negative number, but got %lld", op,
                             (long long)r),
               NULL;
    const int64_t n = input->shape.dims[0];
    ts_scope_begin();
    ts_tensor *y = NULL;
    if (r == 0) {
        y = ts_mul_scalar(ts_narrow(input, 0, 0, 0), 1.0);
        goto done;
    }
    /* count the rows: C(n, r) or C(n + r - 1, r), refusing more than 2^31 indices */
    int64_t count = 0, *c = malloc((size_t)r * sizeof *c), *idx = NULL;
    if (!c) {
        tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op);
        goto done;
    }
    const int64_t cap = (int64_t)1 << 31;
    for (int pass = 0; pass < 2; pass++) {
        int64_t at = 0;
        for (int64_t k = 0; k < r; k++) c[k] = with_replacement ? 0 : k;
        bool any = with_replacement ? n > 0 : r <= n;
        while (any) {
            if (pass == 0 && ++count * r > cap) {
                tsi_error_set(TS_ERR_ARG, "%s: more than 2^31 indices (%lld elements, r %lld)", op,
                              (long long)n, (long long)r);
                free(c);
                goto done;
            }
            if (pass == 1)
                for (int64_t k = 0; k < r; k++) idx[at++] = c[k];
            int64_t k = r - 1; /* the next combination in lexicographic order */
            while (k >= 0 && c[k] == (with_replacement ? n - 1 : n - r + k)) k--;
            if (k < 0) break;
            c[k]++;
            for (int64_t j = k + 1; j < r; j++) c[j] = with_replacement ? c[k] : c[j - 1] + 1;
        }
        if (pass == 0 && !(idx = malloc((size_t)(count > 0 ? count * r : 1) * sizeof *idx))) {
            tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op);
            free(c);
            goto done;
        }
    }
    free(c);
    ts_tensor *it = ts_to(ts_tensor_i64(TS_SHAPE(count * r), idx, (ts_opts){.dtype = TS_I64}),
                          tsi_device(input));
    free(idx);
    y = ts_reshape(ts_index_select(input, 0, it), TS_SHAPE(count, r));
done:
    y = ts_error() == TS_OK && y ? ts_keep(y) : NULL;
    ts_scope_end();
    return y;
}
