/* sort_keys.h — the sort order of sort.c's ops as unsigned integers: each element of a tensor read
 * once (in its own dtype: no float64 copy) to a key whose unsigned order is PyTorch's sort order
 * (sort_keys.c): floats with the sign flipped so that bits compare as numbers, -0.0 as +0.0 (equal,
 * so ties by position), every NaN one key above +inf; integers offset by the sign. On those keys:
 * a stable argsort of each row (sort_radix.c: an LSD radix sort, rows on OpenMP threads), the first
 * m places of each row (topk) and the place of one rank (kthvalue, median) (sort_select.c), all in
 * the same total order: the keys, ties by position. Descending is the complement of the key, still
 * ties by position (NaN first, as PyTorch's descending sort). */
#ifndef TS_OPS_SORT_KEYS_H
#define TS_OPS_SORT_KEYS_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "tessera.h"

/* rows x n keys, row-major: the tensor with `dim` swapped with its last dim (ts_transpose), read
 * a row at a time (tsi_okeys_row) from the tensor's memory (cpu) or a host copy of it */
typedef struct tsi_okeys {
    int64_t rows, n;
    int bits;      /* 32: every key fits in the low 32 bits (dtypes of up to 4 bytes); else 64 */
    bool is_float; /* nan_key is NaN's key (the largest of `bits`); integers have no NaN */
    uint64_t nan_key;
    ts_dtype dtype;    /* of src */
    const char *src;   /* rows x n elements, contiguous */
    void *staged;      /* src's host copy (not the cpu), owned */
    ts_tensor *holder; /* the tensor src lies in, held */
} tsi_okeys;

/* a float's key: bits with the sign flipped so that unsigned order is numeric order; -0.0 as +0.0,
 * NaN (any sign or payload) the largest key, above +inf's. No branch: loops over a row vectorise.
 */
static inline uint64_t tsi_okey_f32(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    const uint32_t mag = u & 0x7fffffffu, flip = (uint32_t)((int32_t)u >> 31) | 0x80000000u;
    const uint32_t key = mag == 0 ? 0x80000000u : u ^ flip;
    return mag > 0x7f800000u ? UINT32_MAX : key;
}
static inline uint64_t tsi_okey_f64(double f) {
    uint64_t u;
    memcpy(&u, &f, sizeof u);
    const uint64_t sign = UINT64_C(1) << 63;
    const uint64_t mag = u & ~sign, flip = (uint64_t)((int64_t)u >> 63) | sign;
    const uint64_t key = mag == 0 ? sign : u ^ flip;
    return mag > UINT64_C(0x7ff0000000000000) ? UINT64_MAX : key;
}

/* t's keys with dim (already wrapped; t->shape.ndim > 0) moved last; false with the error set
 * (uint64, out of memory). `op` names the caller in messages. Call inside a scope. */
bool tsi_okeys_read(const char *op, ts_tensor *t, int dim, tsi_okeys *k);
void tsi_okeys_free(tsi_okeys *k);
/* out[0..n) = the keys of row r */
void tsi_okeys_row(const tsi_okeys *k, int64_t r, uint64_t *out);
/* the same for keys of 32 bits (k->bits 32) */
void tsi_okeys_row32(const tsi_okeys *k, int64_t r, uint32_t *out);
/* keys of 32 bits in rows that count positions in 32 bits pack each key with its position: a
 * distinct number per element whose order is the stable order of the keys ^ flip */
static inline bool tsi_okeys_packs(const tsi_okeys *k) {
    return k->bits == 32 && k->n <= (int64_t)UINT32_MAX;
}
/* out[j] = (key ^ flip) << 32 | j for row r (tsi_okeys_packs) */
void tsi_okeys_row_packed(const tsi_okeys *k, int64_t r, uint64_t flip, uint64_t *out);

/* what descending XORs into every key: the complement within `bits` */
static inline uint64_t tsi_okeys_flip(const tsi_okeys *k, bool descending) {
    return !descending ? 0 : k->bits == 64 ? UINT64_MAX : UINT32_MAX;
}
static inline bool tsi_okey_isnan(const tsi_okeys *k, uint64_t key) {
    return k->is_float && key == k->nan_key;
}
/* fn(k, ctx, r0, r1) over blocks of rows [r0, r1) covering k's rows, on OpenMP threads (blocks
 * taken as threads come free) when there are many keys; false (with `op`'s out-of-memory error
 * set) when a block returned false: fn returns false only when it could not allocate its scratch */
typedef bool (*tsi_okeys_rows_fn)(const tsi_okeys *k, void *ctx, int64_t r0, int64_t r1);
bool tsi_okeys_for_rows(const char *op, const tsi_okeys *k, tsi_okeys_rows_fn fn, void *ctx);

/* perm[r * n + j] = the position within row r of its j-th key in sorted order: stable, ascending
 * with NaN last, or descending with NaN first (PyTorch's sort). False on OOM (error set). */
bool tsi_okeys_argsort(const char *op, const tsi_okeys *k, bool descending, int64_t *perm);

/* pos[r * m + i] = the position within row r of its i-th key in tsi_okeys_argsort's order, for
 * i < m <= TSI_OKEYS_TOP_MAX, without sorting the row (an insertion buffer of m: topk's few);
 * false on OOM (error set) */
#define TSI_OKEYS_TOP_MAX 32
bool tsi_okeys_top(const char *op, const tsi_okeys *k, bool descending, int64_t m, int64_t *pos);
/* pos[r] = the position within row r of its q-th key (0-based) in ascending tsi_okeys_argsort
 * order, by quickselect; q TSI_RANK_MEDIAN: the lower median's, or the first NaN's when the row has
 * any (median); TSI_RANK_NANMEDIAN: the lower median of the numbers, the first NaN when all are
 * (nanmedian). False on OOM (error set). */
enum { TSI_RANK_MEDIAN = -1, TSI_RANK_NANMEDIAN = -2 };
bool tsi_okeys_nth(const char *op, const tsi_okeys *k, int64_t q, int64_t *pos);

#endif /* TS_OPS_SORT_KEYS_H */
