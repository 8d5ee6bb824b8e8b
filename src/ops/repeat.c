/* repeat.c — repetitions of a tensor's elements, composed from index_select (differentiable, every
 * device): repeat / tile (whole copies along each dim), repeat_interleave (each element repeated,
 * by one count or by a tensor of counts). */
#include <stdlib.h>

#include "autograd/autograd.h"
#include "ops/compose.h"

/* ------------------------------------------------------------------ repeat_interleave */
/* x repeated along d by reps (one value: every element; else one per element) */
static ts_tensor *repeat_run(const char *op, ts_tensor *t, const int64_t *reps, int64_t nreps,
                             bool has_dim, int dim) {
    ts_tensor *x = t;
    int d = 0;
    if (!has_dim || t->shape.ndim == 0) {
        if (has_dim && tsi_wrap_dim(op, dim, t->shape.ndim) < 0) return NULL;
        x = NULL;
    } else if ((d = tsi_wrap_dim(op, dim, t->shape.ndim)) < 0)
        return NULL;
    const int64_t n = x ? t->shape.dims[d] : ts_numel(t);
    if (nreps != 1 && nreps != n)
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s: repeats must have the same size as input along dim, but got "
                             "repeats.size(0) = %lld and input.size(%d) = %lld",
                             op, (long long)nreps, d, (long long)n),
               NULL;
    int64_t total = 0;
    for (int64_t i = 0; i < nreps; i++) {
        if (reps[i] < 0)
            return tsi_error_set(TS_ERR_ARG, "%s: repeats can not be negative (got %lld)", op,
                                 (long long)reps[i]),
                   NULL;
        total += reps[i];
    }
    if (nreps == 1) total = reps[0] * n;
    int64_t *v = host_alloc(op, total, sizeof *v);
    if (!v) return NULL;
    for (int64_t i = 0, k = 0; i < n; i++)
        for (int64_t r = 0; r < reps[nreps == 1 ? 0 : i]; r++) v[k++] = i;
    ts_scope_begin();
    ts_tensor *idx = index_on(t, v, total);
    free(v);
    if (!x) x = ts_reshape(t, reshape1(t));
    return finish(idx && x ? ts_index_select(x, d, idx) : NULL);
}

ts_tensor *ts_repeat_interleave(ts_tensor *t, int64_t repeats, bool has_dim, int dim) {
    tsi_init();
    if (!tsi_check_input("repeat_interleave", t, "input")) return NULL;
    return repeat_run("repeat_interleave", t, &repeats, 1, has_dim, dim);
}

ts_tensor *ts_repeat_interleave_tensor(ts_tensor *t, ts_tensor *repeats, bool has_dim, int dim) {
    const char *op = "repeat_interleave";
    tsi_init();
    if (!check_two(op, t, "input", repeats, "repeats") ||
        !check_index_dtype(op, repeats, "repeats"))
        return NULL;
    if (repeats->shape.ndim > 1)
        return tsi_error_set(TS_ERR_SHAPE, "%s: repeats must be 0-dim or 1-dim tensor (got %s)", op,
                             tsi_shape_str(repeats->shape)),
               NULL;
    ts_scope_begin();
    int64_t *r = host_i64(op, repeats);
    ts_tensor *y = r ? repeat_run(op, t, r, ts_numel(repeats), has_dim, dim) : NULL;
    free(r);
    return finish(y);
}

/* ------------------------------------------------------------------ repeat, tile */
/* x tiled r times along dim d: index_select with 0..s-1 repeated (differentiable, any device) */
static ts_tensor *tile_dim(ts_tensor *x, int d, int64_t r) {
    const int64_t s = ts_size(x, d);
    if (r == 1) return x;
    int64_t m = s * r;
    int64_t *idx = malloc(sizeof *idx * (size_t)(m > 0 ? m : 1));
    if (!idx) return tsi_error_set(TS_ERR_OOM, "repeat: out of host memory"), NULL;
    for (int64_t i = 0; i < m; i++) idx[i] = i % s;
    ts_tensor *it = ts_tensor_i64((ts_shape){1, {m}}, idx, (ts_opts){.device = ts_device_of(x)});
    free(idx);
    return it ? ts_index_select(x, d, it) : NULL;
}

static ts_tensor *tile_run(const char *op, ts_tensor *t, const int64_t *reps, int n) {
    tsi_init();
    if (!tsi_check_input(op, t, "input")) return NULL;
    if (!reps && n > 0) return tsi_error_set(TS_ERR_ARG, "%s: reps is NULL", op), NULL;
    if (n < t->shape.ndim || n > TS_MAX_DIMS)
        return tsi_error_set(TS_ERR_ARG,
                             "%s: Number of dimensions of repeat dims (%d) can not be smaller than "
                             "number of dimensions of tensor (%d)%s",
                             op, n, t->shape.ndim, n > TS_MAX_DIMS ? " or larger than 8" : ""),
               NULL;
    ts_shape out = {.ndim = n};
    double total = 1;
    for (int i = 0; i < n; i++) {
        if (reps[i] < 0)
            return tsi_error_set(TS_ERR_ARG,
                                 "%s: Trying to create tensor with negative dimension %lld", op,
                                 (long long)reps[i]),
                   NULL;
        int64_t s = i < n - t->shape.ndim ? 1 : t->shape.dims[i - (n - t->shape.ndim)];
        out.dims[i] = s * reps[i];
        total *= (double)out.dims[i];
    }
    if (total > 9e18) return tsi_error_set(TS_ERR_ARG, "%s: the result is too large", op), NULL;
    ts_scope_begin();
    ts_shape padded = {.ndim = n};
    for (int i = 0; i < n; i++)
        padded.dims[i] = i < n - t->shape.ndim ? 1 : t->shape.dims[i - (n - t->shape.ndim)];
    ts_tensor *x = ts_reshape(t, padded);
    for (int i = 0; i < n && x; i++) x = tile_dim(x, i, reps[i]);
    if (x && x == t) x = ts_clone(x); /* a new tensor, as PyTorch's repeat */
    return finish(x);
}

ts_tensor *ts_repeat(ts_tensor *t, const int64_t *reps, int n) {
    return tile_run("repeat", t, reps, n);
}

ts_tensor *ts_tile(ts_tensor *t, const int64_t *reps, int n) {
    const char *op = "tile";
    tsi_init();
    if (!tsi_check_input(op, t, "input")) return NULL;
    if (n < 0 || n > TS_MAX_DIMS || (!reps && n > 0))
        return tsi_error_set(TS_ERR_ARG, "%s: %d dims given", op, n), NULL;
    int64_t full[TS_MAX_DIMS];
    int m = n < t->shape.ndim ? t->shape.ndim : n;
    for (int i = 0; i < m; i++) full[i] = i < m - n ? 1 : reps[i - (m - n)];
    return tile_run(op, t, full, m);
}
