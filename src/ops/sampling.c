/* sampling.c — draws by weight (issue 76): multinomial, on the global Philox stream through ts_rand
 * (so a seed or a generator scope fixes it, on every device). With replacement: each draw is the
 * first category whose cumulative probability exceeds a uniform (searchsorted, right); without:
 * the k smallest of E_i / p_i (E_i exponential), an exact draw without replacement (the
 * exponential race), by topk. PyTorch's distribution, not its random stream. */
#include <math.h>
#include <stdlib.h>

#include "autograd/autograd.h"
#include "ops/compose.h"

/* float64 p's e values on the host (inside a scope) */
static bool rd_host(ts_tensor *p, double *v, int64_t e) {
    ts_tensor *x = ts_contiguous(ts_to(p, ts_cpu()));
    return x && ts_copy_to_host(x, v, (size_t)e * sizeof *v) == TS_OK;
}

/* the rows' weights checked on the host: finite, none negative, each row's sum > 0, and (without
 * replacement) at least k positive ones; false with the error set */
static bool check_weights(const char *op, ts_tensor *p, int64_t rows, int64_t n, int64_t k,
                          bool replacement) {
    const int64_t e = rows * n;
    double *v = host_alloc(op, e, sizeof *v);
    if (!v) return false;
    ts_scope_begin();
    const bool got = rd_host(p, v, e);
    ts_scope_end();
    bool ok = got;
    for (int64_t r = 0; ok && r < rows; r++) {
        double sum = 0;
        int64_t pos = 0;
        for (int64_t j = 0; j < n; j++) {
            const double x = v[r * n + j];
            if (!isfinite(x) || x < 0) {
                tsi_error_set(TS_ERR_ARG,
                              "%s: probability tensor contains either inf, nan or element < 0", op);
                ok = false;
                break;
            }
            sum += x;
            pos += x > 0;
        }
        if (ok && !(sum > 0)) {
            tsi_error_set(TS_ERR_ARG,
                          "%s: invalid multinomial distribution (sum of probabilities <= 0)", op);
            ok = false;
        }
        if (ok && !replacement && pos < k) {
            tsi_error_set(TS_ERR_ARG,
                          "%s: invalid multinomial distribution (with replacement=False, not "
                          "enough non-negative category to sample)",
                          op);
            ok = false;
        }
    }
    free(v);
    return ok && ts_error() == TS_OK;
}

ts_tensor *ts_multinomial(ts_tensor *t, int64_t num_samples, bool replacement) {
    const char *op = "multinomial";
    tsi_init();
    if (!tsi_check_input(op, t, "input")) return NULL;
    if (t->shape.ndim != 1 && t->shape.ndim != 2)
        return tsi_error_set(TS_ERR_SHAPE, "%s: prob_dist must be 1 or 2 dim, got %s", op,
                             tsi_desc(t)),
               NULL;
    if (!tsi_is_float(t->dtype))
        return tsi_error_set(TS_ERR_DTYPE, "%s: expected a floating-point input, got %s", op,
                             ts_dtype_name(t->dtype)),
               NULL;
    const int64_t n = t->shape.dims[t->shape.ndim - 1];
    const int64_t rows = t->shape.ndim == 2 ? t->shape.dims[0] : 1;
    if (num_samples <= 0)
        return tsi_error_set(TS_ERR_ARG, "%s: cannot sample n_sample <= 0 samples", op), NULL;
    if (!replacement && num_samples > n)
        return tsi_error_set(TS_ERR_ARG,
                             "%s: cannot sample n_sample > prob_dist.size(-1) samples without "
                             "replacement",
                             op),
               NULL;
    if (n == 0)
        return tsi_error_set(TS_ERR_ARG, "%s: the number of categories cannot be zero", op), NULL;
    const bool meta = tsi_device(t).type == TS_META;
    ts_scope_begin();
    ts_tensor *p = ts_reshape(ts_detach(t), TS_SHAPE(rows, n));
    p = p ? ts_to_dtype(p, TS_F64) : NULL;
    if (!p || (!meta && !check_weights(op, p, rows, n, num_samples, replacement)))
        return finish(NULL);
    ts_tensor *idx = NULL;
    if (replacement) {
        ts_tensor *c = ts_cumsum(ts_div(p, ts_sum_dim(p, 1, true)), 1, TS_F64);
        ts_tensor *u = ts_rand(TS_SHAPE(rows, num_samples), opts_on(t, TS_F64));
        idx = c && u ? ts_searchsorted(ts_contiguous(c), u, false, true, NULL) : NULL;
        /* a uniform at or above the last sum's rounding: the last category */
        idx = idx ? ts_clamp(idx, NAN, (double)(n - 1)) : NULL;
    } else {
        ts_tensor *u = ts_rand(TS_SHAPE(rows, n), opts_on(t, TS_F64));
        ts_tensor *key = u ? ts_div(ts_neg(ts_log1p(ts_neg(u))), p) : NULL;
        if (key && !ts_topk(key, num_samples, 1, false, true, &idx)) idx = NULL;
    }
    if (idx && ts_dtype_of(idx) != TS_I64) idx = ts_to_dtype(idx, TS_I64);
    if (idx && t->shape.ndim == 1) idx = ts_reshape(idx, TS_SHAPE(num_samples));
    return finish(idx);
}

/* ------------------------------------------------------------------ normal */
/* false with the error set unless every element of std is >= 0 (one host read; meta: true) */
static bool check_std(const char *op, ts_tensor *std) {
    if (tsi_device(std).type == TS_META || ts_numel(std) == 0) return true;
    ts_scope_begin();
    const double lo = ts_item(ts_min(ts_detach(std)));
    ts_scope_end();
    if (ts_error() != TS_OK) return false;
    if (!(lo >= 0))
        return tsi_error_set(TS_ERR_ARG, "%s: expects all elements of std >= 0.0", op), false;
    return true;
}

ts_tensor *ts_normal(ts_tensor *mean, double mean_s, ts_tensor *std, double std_s) {
    const char *op = "normal";
    tsi_init();
    if (!mean && !std)
        return tsi_error_set(TS_ERR_ARG, "%s: mean or std must be a tensor (ts_randn otherwise)",
                             op),
               NULL;
    if (mean && std ? !check_two(op, mean, "mean", std, "std")
                    : !tsi_check_input(op, mean ? mean : std, mean ? "mean" : "std"))
        return NULL;
    ts_tensor *ref = mean ? mean : std;
    if (!tsi_is_float(ref->dtype) || (mean && std && !tsi_is_float(std->dtype)))
        return tsi_error_set(
                   TS_ERR_DTYPE, "%s: expected a floating-point mean and std, got %s", op,
                   ts_dtype_name(mean && tsi_is_float(ref->dtype) ? std->dtype : ref->dtype)),
               NULL;
    ts_shape s = ref->shape;
    if (mean && std && !tsi_broadcast_shapes(op, mean->shape, std->shape, &s)) return NULL;
    if (std ? !check_std(op, std) : false) return NULL;
    if (!std && !(std_s >= 0))
        return tsi_error_set(TS_ERR_ARG, "%s: expects std >= 0.0, but found std %g", op, std_s),
               NULL;
    ts_scope_begin();
    ts_tensor *z = ts_randn(s, opts_on(ref, ref->dtype));
    ts_tensor *r = z ? (std ? ts_mul(z, std) : ts_mul_scalar(z, std_s)) : NULL;
    r = r ? (mean ? ts_add(r, mean) : ts_add_scalar(r, mean_s)) : NULL;
    return finish(r);
}
