/* sort_select.c — selection without a full sort, on order keys (sort_keys.h): the first m places of
 * each row's stable order (topk) by an insertion buffer, and the element at one place (kthvalue,
 * median) by quickselect. Both rank by the stable sort's total order (the keys, ties by position),
 * so they give exactly the elements tsi_okeys_argsort would put there. Keys of 32 bits select
 * packed with their positions (sort_keys.h): distinct numbers, the one of the rank names its place.
 * Keys of 64 bits select the key's value (three-way partitions), then its place among the equal
 * keys by position. */
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "ops/sort_keys.h"

/* top_row_64 / top_row_32 (keys of 64 / 32 bits): p[0..m) = the positions of the m first keys of
 * key[0..n) ^ flip (stable ascending), 0 < m <= n; buf: m keys. Past the first m, blocks of 8 keys
 * none of which beats the last kept are skipped by one branch-free test. An insertion goes after
 * equal keys (they come earlier in position) and drops the last when full. */
#define TOP_ROW(NAME, T)                                                                           \
    static inline void NAME##_insert(T v, int64_t j, int64_t *have, int64_t m, T *buf,             \
                                     int64_t *p) {                                                 \
        if (*have == m && !(v < buf[m - 1])) return;                                               \
        int64_t at = *have < m ? (*have)++ : m - 1;                                                \
        for (; at > 0 && v < buf[at - 1]; at--) buf[at] = buf[at - 1], p[at] = p[at - 1];          \
        buf[at] = v, p[at] = j;                                                                    \
    }                                                                                              \
    static void NAME(const T *key, int64_t n, T flip, int64_t m, int64_t *p, T *buf) {             \
        int64_t have = 0, j = 0;                                                                   \
        for (; j < m; j++) NAME##_insert(key[j] ^ flip, j, &have, m, buf, p);                      \
        for (; j + 8 <= n; j += 8) {                                                               \
            const T last = buf[m - 1];                                                             \
            int beats = 0;                                                                         \
            for (int i = 0; i < 8; i++) beats |= (T)(key[j + i] ^ flip) < last;                    \
            if (beats)                                                                             \
                for (int i = 0; i < 8; i++)                                                        \
                    NAME##_insert(key[j + i] ^ flip, j + i, &have, m, buf, p);                     \
        }                                                                                          \
        for (; j < n; j++) NAME##_insert(key[j] ^ flip, j, &have, m, buf, p);                      \
    }
TOP_ROW(top_row_64, uint64_t)
TOP_ROW(top_row_32, uint32_t)
#undef TOP_ROW

/* top_row_32 of a float32 row x[0..n) read as it is: a block's test compares the floats with the
 * last kept one's value (val: the kept values), never missing a key that beats it (NaN always
 * passes, -0.0 and +0.0 tie as their keys do); the keys are made for the blocks that pass only */
static inline void top_f32_insert(uint32_t v, float xv, int64_t j, int64_t *have, int64_t m,
                                  uint32_t *buf, float *val, int64_t *p) {
    if (*have == m && !(v < buf[m - 1])) return;
    int64_t at = *have < m ? (*have)++ : m - 1;
    for (; at > 0 && v < buf[at - 1]; at--)
        buf[at] = buf[at - 1], val[at] = val[at - 1], p[at] = p[at - 1];
    buf[at] = v, val[at] = xv, p[at] = j;
}
static void top_row_f32(const float *x, int64_t n, bool desc, int64_t m, int64_t *p, uint32_t *buf,
                        float *val) {
    const uint32_t flip = desc ? UINT32_MAX : 0;
    int64_t have = 0, j = 0;
    for (; j < m; j++)
        top_f32_insert((uint32_t)tsi_okey_f32(x[j]) ^ flip, x[j], j, &have, m, buf, val, p);
    for (; j + 8 <= n; j += 8) {
        const float last = val[m - 1];
        int beats = 0;
        if (desc)
            for (int i = 0; i < 8; i++) beats |= !(x[j + i] <= last);
        else
            for (int i = 0; i < 8; i++) beats |= !(x[j + i] >= last);
        if (beats)
            for (int64_t i = j; i < j + 8; i++)
                top_f32_insert((uint32_t)tsi_okey_f32(x[i]) ^ flip, x[i], i, &have, m, buf, val, p);
    }
    for (; j < n; j++)
        top_f32_insert((uint32_t)tsi_okey_f32(x[j]) ^ flip, x[j], j, &have, m, buf, val, p);
}

typedef struct top_job {
    uint64_t flip;
    int64_t m, *pos;
} top_job;
static bool top_block(const tsi_okeys *k, void *ctx, int64_t r0, int64_t r1) {
    const top_job *t = ctx;
    uint64_t *row = malloc((size_t)k->n * sizeof *row), buf[TSI_OKEYS_TOP_MAX];
    uint32_t buf32[TSI_OKEYS_TOP_MAX];
    float val[TSI_OKEYS_TOP_MAX];
    if (!row) return false;
    for (int64_t r = r0; r < r1; r++) {
        int64_t *p = t->pos + r * t->m;
        if (k->dtype == TS_F32) {
            const float *x = (const float *)(const void *)(k->src + r * k->n * (int64_t)sizeof *x);
            top_row_f32(x, k->n, t->flip != 0, t->m, p, buf32, val);
        } else if (k->bits == 32) {
            tsi_okeys_row32(k, r, (uint32_t *)row);
            top_row_32((uint32_t *)row, k->n, (uint32_t)t->flip, t->m, p, buf32);
        } else {
            tsi_okeys_row(k, r, row);
            top_row_64(row, k->n, t->flip, t->m, p, buf);
        }
    }
    free(row);
    return true;
}

bool tsi_okeys_top(const char *op, const tsi_okeys *k, bool descending, int64_t m, int64_t *pos) {
    if (m <= 0 || k->rows == 0) return true;
    top_job job = {tsi_okeys_flip(k, descending), m, pos};
    return tsi_okeys_for_rows(op, k, top_block, &job);
}

static int cmp_u64(const void *a, const void *b) {
    const uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* the q-th smallest of v[0..n) (v reordered): quickselect, three-way partitions about a median of
 * three; a sort of what is left after a bad run of pivots */
static uint64_t select_value(uint64_t *v, int64_t n, int64_t q) {
    int64_t lo = 0, hi = n - 1;
    for (int rounds = 0; lo < hi; rounds++) {
        if (rounds > 64) {
            qsort(v + lo, (size_t)(hi - lo + 1), sizeof *v, cmp_u64);
            break;
        }
        const uint64_t a = v[lo], b = v[lo + (hi - lo) / 2], c = v[hi];
        const uint64_t p = a < b ? (b < c ? b : (a < c ? c : a)) : (a < c ? a : (b < c ? c : b));
        int64_t lt = lo, i = lo, gt = hi; /* [lo, lt) < p, [lt, i) == p, (gt, hi] > p */
        while (i <= gt) {
            const uint64_t x = v[i];
            if (x < p) {
                v[i++] = v[lt], v[lt++] = x;
            } else if (x > p) {
                v[i] = v[gt], v[gt--] = x;
            } else {
                i++;
            }
        }
        if (q < lt)
            hi = lt - 1;
        else if (q > gt)
            lo = gt + 1;
        else
            return p;
    }
    return v[q];
}

/* the q-th smallest of v[0..n) of distinct numbers (v and w, n of scratch, reordered):
 * quickselect about a median of three, each partition from one buffer to the other with no
 * branch and no store reloaded; a sort of what is left after a bad run of pivots */
static uint64_t select_distinct(uint64_t *v, uint64_t *w, int64_t n, int64_t q) {
    int64_t lo = 0, hi = n - 1;
    for (int rounds = 0; lo < hi; rounds++) {
        if (rounds > 64) {
            qsort(v + lo, (size_t)(hi - lo + 1), sizeof *v, cmp_u64);
            break;
        }
        const int64_t mid = lo + (hi - lo) / 2;
        const uint64_t x = v[lo], y = v[mid], z = v[hi];
        const int64_t med =
            x < y ? (y < z ? mid : (x < z ? hi : lo)) : (x < z ? lo : (y < z ? hi : mid));
        const uint64_t p = v[med];
        v[med] = v[hi];
        /* v[lo..hi) to w: those below p from lo up, the rest from hi down; p in the slot left */
        int64_t a = lo, b = hi;
        for (int64_t j = lo; j < hi; j++) {
            const uint64_t e = v[j];
            const int64_t below = e < p;
            w[a] = e, w[b] = e;
            a += below, b -= 1 - below;
        }
        w[a] = p;
        uint64_t *t = v;
        v = w, w = t;
        if (q == a) return p;
        if (q < a)
            hi = a - 1;
        else
            lo = a + 1;
    }
    return v[q];
}

/* the rank q stands for in a row of keys (sort_keys.h: TSI_RANK_*) */
static int64_t rank_of(const tsi_okeys *k, const uint64_t *key, int64_t q) {
    if (q >= 0) return q;
    const int64_t n = k->n;
    int64_t nans = 0;
    for (int64_t j = 0; j < n && k->is_float; j++) nans += key[j] == k->nan_key;
    if (q == TSI_RANK_MEDIAN) return nans ? n - nans : (n - 1) / 2;
    return nans < n ? (n - nans - 1) / 2 : 0;
}

/* the position in key[0..n) of its q-th key in stable ascending order; v: n keys of scratch */
static int64_t nth_row(const uint64_t *key, int64_t n, int64_t q, uint64_t *v) {
    memcpy(v, key, (size_t)n * sizeof *v);
    const uint64_t x = select_value(v, n, q);
    int64_t below = 0;
    for (int64_t j = 0; j < n; j++) below += key[j] < x;
    /* the (q - below)-th key equal to x, counting by position */
    for (int64_t j = 0, seen = 0; j < n; j++)
        if (key[j] == x && seen++ == q - below) return j;
    return -1; /* not reached: x is one of the keys, with at least q - below + 1 copies */
}

typedef struct nth_job {
    int64_t q, *pos;
} nth_job;
static bool nth_block(const tsi_okeys *k, void *ctx, int64_t r0, int64_t r1) {
    const nth_job *t = ctx;
    const int64_t n = k->n;
    uint64_t *row = malloc((size_t)(n > 0 ? n : 1) * 2 * sizeof *row);
    if (!row) return false;
    for (int64_t r = r0; r < r1; r++) {
        tsi_okeys_row(k, r, row);
        const int64_t rank = rank_of(k, row, t->q);
        if (tsi_okeys_packs(k)) { /* each key with its position: the element of that rank */
            for (int64_t j = 0; j < n; j++) row[j] = row[j] << 32 | (uint64_t)j;
            t->pos[r] = (int64_t)(uint32_t)select_distinct(row, row + n, n, rank);
        } else {
            t->pos[r] = nth_row(row, n, rank, row + n);
        }
    }
    free(row);
    return true;
}

bool tsi_okeys_nth(const char *op, const tsi_okeys *k, int64_t q, int64_t *pos) {
    nth_job job = {q, pos};
    return tsi_okeys_for_rows(op, k, nth_block, &job);
}
