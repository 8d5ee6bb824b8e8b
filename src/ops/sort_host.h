/* sort_host.h — the host side of the search ops (search.c: searchsorted, unique, isin): a tensor's
 * values read to the host as exact keys (float dtypes as double, integer and bool dtypes as int64)
 * and a stable merge sort in PyTorch's order (NaN above every number). The plans built from them
 * (indices) are then applied on the tensor's device, so the values keep their dtype and bits on
 * every device. sort.c's ops use order keys instead (sort_keys.h). */
#ifndef TS_OPS_SORT_HOST_H
#define TS_OPS_SORT_HOST_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "tessera.h"

/* rows x n keys, row-major */
typedef struct tsi_keys {
    int64_t rows, n;
    bool is_float; /* f holds the keys; otherwise i */
    double *f;
    int64_t *i;
} tsi_keys;

/* the keys of the flattened tensor (one row; 0-dim tensors too); as_float: float keys whatever
 * the dtype (comparisons with a float tensor) */
bool tsi_keys_read_flat(const char *op, ts_tensor *t, bool as_float, tsi_keys *k);
void tsi_keys_free(tsi_keys *k);

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
