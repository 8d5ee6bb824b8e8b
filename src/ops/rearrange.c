/* rearrange.c — reorderings of a tensor's elements along dims, composed from the differentiable
 * ops (index_select, permute, narrow, cat...) so that they run and differentiate on every device:
 * flip / fliplr / flipud / rot90 / roll, movedim, unfold (windows along a dim). */
#include <stdlib.h>

#include "autograd/autograd.h"
#include "ops/compose.h"

/* ------------------------------------------------------------------ flip, rot90, roll */
ts_tensor *ts_flip(ts_tensor *t, ts_dims dims) {
    const char *op = "flip";
    tsi_init();
    if (!tsi_check_input(op, t, "input")) return NULL;
    if (dims.n < 0 || dims.n > TS_MAX_DIMS)
        return tsi_error_set(TS_ERR_ARG, "%s: dims has %d entries", op, dims.n), NULL;
    bool seen[TS_MAX_DIMS] = {0};
    int wd[TS_MAX_DIMS];
    for (int i = 0; i < dims.n; i++) {
        wd[i] = tsi_wrap_dim(op, dims.d[i], t->shape.ndim);
        if (wd[i] < 0) return NULL;
        if (seen[wd[i]])
            return tsi_error_set(TS_ERR_ARG,
                                 "%s: dim %d appears multiple times in the list of dims", op,
                                 wd[i]),
                   NULL;
        seen[wd[i]] = true;
    }
    ts_scope_begin();
    ts_tensor *y = t;
    for (int i = 0; i < dims.n && y && t->shape.ndim > 0; i++) {
        const int64_t n = t->shape.dims[wd[i]];
        if (n <= 1) continue;
        int64_t *v = host_alloc(op, n, sizeof *v);
        if (!v) break;
        for (int64_t k = 0; k < n; k++) v[k] = n - 1 - k;
        y = ts_index_select(y, wd[i], index_on(t, v, n));
        free(v);
    }
    if (y == t) y = ts_clone(t);
    return finish(y);
}

ts_tensor *ts_fliplr(ts_tensor *t) {
    tsi_init();
    if (!tsi_check_input("fliplr", t, "input")) return NULL;
    if (t->shape.ndim < 2)
        return tsi_error_set(TS_ERR_SHAPE, "fliplr: Input must be >= 2-d (input: %s)", tsi_desc(t)),
               NULL;
    return ts_flip(t, TS_DIMS(1));
}

ts_tensor *ts_flipud(ts_tensor *t) {
    tsi_init();
    if (!tsi_check_input("flipud", t, "input")) return NULL;
    if (t->shape.ndim < 1)
        return tsi_error_set(TS_ERR_SHAPE, "flipud: Input must be >= 1-d (input: %s)", tsi_desc(t)),
               NULL;
    return ts_flip(t, TS_DIMS(0));
}

ts_tensor *ts_rot90(ts_tensor *t, int64_t k, int d0, int d1) {
    const char *op = "rot90";
    tsi_init();
    if (!tsi_check_input(op, t, "input")) return NULL;
    if (t->shape.ndim < 2)
        return tsi_error_set(TS_ERR_SHAPE, "%s: expected total dims >= 2, but got total dims = %d",
                             op, t->shape.ndim),
               NULL;
    const int a = tsi_wrap_dim(op, d0, t->shape.ndim), b = tsi_wrap_dim(op, d1, t->shape.ndim);
    if (a < 0 || b < 0) return NULL;
    if (a == b)
        return tsi_error_set(TS_ERR_ARG,
                             "%s: expected rotation dims to be different, got %d and %d", op, d0,
                             d1),
               NULL;
    const int64_t q = ((k % 4) + 4) % 4;
    ts_scope_begin();
    ts_tensor *y;
    if (q == 1)
        y = ts_transpose(ts_flip(t, TS_DIMS(b)), a, b);
    else if (q == 2)
        y = ts_flip(t, TS_DIMS(a, b));
    else if (q == 3)
        y = ts_transpose(ts_flip(t, TS_DIMS(a)), a, b);
    else
        y = ts_clone(t);
    return finish(y);
}

static ts_tensor *roll_dim(ts_tensor *x, int d, int64_t shift) {
    const int64_t n = ts_shape_of(x).dims[d];
    if (n == 0) return x;
    const int64_t s = ((shift % n) + n) % n;
    if (s == 0) return x;
    ts_tensor *parts[2] = {ts_narrow(x, d, n - s, s), ts_narrow(x, d, 0, n - s)};
    return parts[0] && parts[1] ? ts_cat(parts, 2, d) : NULL;
}

ts_tensor *ts_roll(ts_tensor *t, const int64_t *shifts, int nshifts, ts_dims dims) {
    const char *op = "roll";
    tsi_init();
    if (!tsi_check_input(op, t, "input")) return NULL;
    if (nshifts < 1 || !shifts) return tsi_error_set(TS_ERR_ARG, "%s: `shifts` required", op), NULL;
    if (dims.n < 0 || dims.n > TS_MAX_DIMS || (dims.n == 0 && nshifts != 1) ||
        (dims.n > 0 && nshifts != dims.n))
        return tsi_error_set(TS_ERR_ARG,
                             "%s: shifts and dimensions must align. shifts: %d, dims:%d", op,
                             nshifts, dims.n),
               NULL;
    int wd[TS_MAX_DIMS];
    for (int i = 0; i < dims.n; i++)
        if ((wd[i] = tsi_wrap_dim(op, dims.d[i], t->shape.ndim)) < 0) return NULL;
    ts_scope_begin();
    ts_tensor *y;
    if (dims.n == 0) {
        y = roll_dim(ts_reshape(t, reshape1(t)), 0, shifts[0]);
        y = y ? ts_reshape(y, t->shape) : NULL;
    } else {
        ts_tensor *x = t->shape.ndim == 0 ? ts_reshape(t, TS_SHAPE(1)) : t;
        y = x;
        for (int i = 0; i < dims.n && y; i++) y = roll_dim(y, t->shape.ndim ? wd[i] : 0, shifts[i]);
        if (y && t->shape.ndim == 0) y = ts_reshape(y, t->shape);
    }
    if (y && ts_shares_storage(y, t)) y = ts_clone(y);
    return finish(y);
}

/* ------------------------------------------------------------------ movedim */
ts_tensor *ts_movedim(ts_tensor *t, ts_dims src, ts_dims dst) {
    const char *op = "movedim";
    tsi_init();
    if (!tsi_check_input(op, t, "input")) return NULL;
    const int nd = t->shape.ndim;
    if (src.n != dst.n || src.n < 0 || src.n > TS_MAX_DIMS)
        return tsi_error_set(TS_ERR_ARG,
                             "%s: Invalid source or destination dims: source (%d dims) should "
                             "contain the same number of dims as destination (%d dims)",
                             op, src.n, dst.n),
               NULL;
    int perm[TS_MAX_DIMS], used_src[TS_MAX_DIMS] = {0};
    for (int i = 0; i < TS_MAX_DIMS; i++) perm[i] = -1;
    for (int i = 0; i < src.n; i++) {
        const int s = tsi_wrap_dim(op, src.d[i], nd), d = tsi_wrap_dim(op, dst.d[i], nd);
        if (s < 0 || d < 0) return NULL;
        if (nd == 0) continue;
        if (used_src[s])
            return tsi_error_set(TS_ERR_ARG, "%s: repeated dim in `source` (%d)", op, src.d[i]),
                   NULL;
        if (perm[d] >= 0)
            return tsi_error_set(TS_ERR_ARG, "%s: repeated dim in `destination` (%d)", op,
                                 dst.d[i]),
                   NULL;
        used_src[s] = 1, perm[d] = s;
    }
    if (nd == 0) return ts_view(t, t->shape);
    int next = 0;
    for (int d = 0; d < nd; d++) {
        if (perm[d] >= 0) continue;
        while (used_src[next]) next++;
        perm[d] = next++;
    }
    ts_dims p = {.n = nd};
    for (int d = 0; d < nd; d++) p.d[d] = perm[d];
    return ts_permute(t, p);
}

/* ------------------------------------------------------------------ unfold */
ts_tensor *ts_unfold(ts_tensor *t, int dim, int64_t size, int64_t step) {
    const char *op = "unfold";
    tsi_init();
    if (!tsi_check_input(op, t, "input")) return NULL;
    const int d = tsi_wrap_dim(op, dim, t->shape.ndim);
    if (d < 0) return NULL;
    const int64_t n = t->shape.ndim ? t->shape.dims[d] : 1;
    if (step <= 0)
        return tsi_error_set(TS_ERR_ARG, "%s: step is %lld but must be > 0", op, (long long)step),
               NULL;
    if (size < 0 || size > n)
        return tsi_error_set(TS_ERR_ARG,
                             "%s: maximum size for tensor at dimension %d is %lld but size is %lld",
                             op, d, (long long)n, (long long)size),
               NULL;
    if (t->shape.ndim >= TS_MAX_DIMS)
        return tsi_error_set(TS_ERR_SHAPE, "%s: the result would have more than %d dims", op,
                             TS_MAX_DIMS),
               NULL;
    const int64_t windows = (n - size) / step + 1;
    int64_t *v = host_alloc(op, windows * size, sizeof *v);
    if (!v) return NULL;
    for (int64_t w = 0; w < windows; w++)
        for (int64_t j = 0; j < size; j++) v[w * size + j] = w * step + j;
    ts_scope_begin();
    ts_tensor *idx = index_on(t, v, windows * size);
    free(v);
    ts_tensor *y = NULL;
    if (idx && t->shape.ndim == 0) {
        y = ts_index_select(ts_reshape(t, TS_SHAPE(1)), 0, idx);
    } else if (idx) {
        y = ts_index_select(t, d, idx);
        ts_shape s = {.ndim = t->shape.ndim + 1};
        for (int i = 0, j = 0; i < t->shape.ndim; i++) {
            if (i == d)
                s.dims[j++] = windows, s.dims[j++] = size;
            else
                s.dims[j++] = t->shape.dims[i];
        }
        y = y ? ts_reshape(y, s) : NULL;
        y = y ? ts_movedim(y, TS_DIMS(d + 1), TS_DIMS(-1)) : NULL;
    }
    return finish(y);
}
