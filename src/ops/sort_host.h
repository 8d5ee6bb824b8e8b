/* sort_host.h — the host side of the sorting and selection ops (sort.c, quantile.c, search.c):
 * a tensor's values read to the host as exact keys (float dtypes as double, integer and bool
 * dtypes as int64), rows along one dim, and a stable argsort of each row in PyTorch's order (NaN
 * above every number). The plans built from them (indices) are then applied on the tensor's
 * device by gather, so the values keep their dtype and bits on every device. */
#ifndef TS_OPS_SORT_HOST_H
#define TS_OPS_SORT_HOST_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "tessera.h"

/* rows x n keys, row-major: the tensor with `dim` swapped with its last dim (ts_transpose) */
typedef struct tsi_keys {
    int64_t rows, n;
    bool is_float; /* f holds the keys; otherwise i */
    double *f;
    int64_t *i;
} tsi_keys;

/* t's keys with dim (already wrapped; t->shape.ndim > 0) moved last; false with the error set
 * (uint64, out of memory). `op` names the caller in messages. Call inside a scope. */
bool tsi_keys_read(const char *op, ts_tensor *t, int dim, tsi_keys *k);
/* the keys of the flattened tensor (one row; 0-dim tensors too); as_float: float keys whatever
 * the dtype (comparisons with a float tensor) */
bool tsi_keys_read_flat(const char *op, ts_tensor *t, bool as_float, tsi_keys *k);
void tsi_keys_free(tsi_keys *k);

/* perm[r * n + j] = the position within row r of its j-th key in sorted order: a stable sort,
 * ascending with NaN last, or descending with NaN first (PyTorch's sort). False on OOM. */
bool tsi_keys_argsort(const char *op, const tsi_keys *k, bool descending, int64_t *perm);

/* pos[r * m + i] = the position within row r of its i-th key in the order tsi_keys_argsort gives,
 * for i < m, without sorting the row (an insertion buffer of m: for small m, as topk's) */
void tsi_keys_top(const tsi_keys *k, bool descending, int64_t m, int64_t *pos);
/* *place = the position within row r of its q-th key (0-based) in ascending tsi_keys_argsort
 * order, by quickselect on scratch[0..n); false on OOM (its rare fallback sorts) */
bool tsi_keys_nth(const char *op, const tsi_keys *k, int64_t r, int64_t q, int64_t *scratch,
                  int64_t *place);

/* a stable merge sort of idx[0..n) by before(ctx, a, b): a strictly before b. False on OOM. */
typedef bool (*tsi_before_fn)(const void *ctx, int64_t a, int64_t b);
bool tsi_stable_sort(const char *op, int64_t *idx, int64_t n, tsi_before_fn before,
                     const void *ctx);

/* key a (flat index) before key b in ascending order, NaN last */
static inline bool tsi_key_less(const tsi_keys *k, int64_t a, int64_t b) {
    if (k->is_float) {
        double x = k->f[a], y = k->f[b];
        return !isnan(x) && (isnan(y) || x < y);
    }
    return k->i[a] < k->i[b];
}
/* keys equal as values (NaN equals nothing) */
static inline bool tsi_key_equal(const tsi_keys *k, int64_t a, int64_t b) {
    return k->is_float ? k->f[a] == k->f[b] : k->i[a] == k->i[b];
}
static inline bool tsi_key_isnan(const tsi_keys *k, int64_t a) {
    return k->is_float && isnan(k->f[a]);
}

/* PyTorch's refusal of uint64 in sorting ops; false with the error set */
bool tsi_sort_dtype_ok(const char *op, ts_tensor *t);

#endif /* TS_OPS_SORT_HOST_H */
