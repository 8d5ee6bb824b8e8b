/* sort_radix.c — the stable argsort of each row of order keys (sort_keys.h): an LSD radix sort by
 * bytes, stable by construction, skipping the bytes every key of the row shares, of keys of 32 bits
 * packed with their positions (one number each) or of 64-bit keys with their positions beside; an
 * insertion sort for short rows; rows split among OpenMP threads when there are many keys. */
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "ops/sort_keys.h"

#define INSERTION_MAX 32 /* rows up to this long: an insertion sort */

/* perm[0..n) = the positions of src[j] ^ flip in stable ascending order; ka: n keys of scratch */
static void insertion_row(const uint64_t *src, int64_t n, uint64_t flip, int64_t *perm,
                          uint64_t *ka) {
    for (int64_t j = 0; j < n; j++) {
        const uint64_t v = src[j] ^ flip;
        int64_t i = j;
        for (; i > 0 && v < ka[i - 1]; i--) ka[i] = ka[i - 1], perm[i] = perm[i - 1];
        ka[i] = v, perm[i] = j;
    }
}

/* the same by `digits` passes of 8 bits; ka, kb: n keys, ib: n positions of scratch */
static void radix_row(const uint64_t *src, int64_t n, int digits, uint64_t flip, int64_t *perm,
                      uint64_t *ka, uint64_t *kb, int64_t *ib) {
    int64_t count[8][256];
    memset(count, 0, (size_t)digits * sizeof count[0]);
    for (int64_t j = 0; j < n; j++) {
        const uint64_t v = src[j] ^ flip;
        for (int d = 0; d < digits; d++) count[d][(v >> (8 * d)) & 255]++;
    }
    const uint64_t *ks = NULL; /* NULL: the keys are still src ^ flip, in position order */
    const int64_t *is = NULL;
    uint64_t *kd = ka, *kspare = kb;
    int64_t *id = perm, *ispare = ib;
    for (int d = 0; d < digits; d++) {
        int64_t *c = count[d];
        const int sh = 8 * d;
        if (c[(src[0] ^ flip) >> sh & 255] == n) continue; /* a byte every key shares */
        int64_t sum = 0;
        for (int b = 0; b < 256; b++) {
            const int64_t t = c[b];
            c[b] = sum, sum += t;
        }
        if (!ks) {
            for (int64_t j = 0; j < n; j++) {
                const uint64_t v = src[j] ^ flip;
                const int64_t o = c[v >> sh & 255]++;
                kd[o] = v, id[o] = j;
            }
        } else {
            for (int64_t j = 0; j < n; j++) {
                const uint64_t v = ks[j];
                const int64_t o = c[v >> sh & 255]++;
                kd[o] = v, id[o] = is[j];
            }
        }
        ks = kd, is = id;
        uint64_t *kt = kd;
        int64_t *it = id;
        kd = kspare, kspare = kt, id = ispare, ispare = it;
    }
    if (!is) { /* every key equal */
        for (int64_t j = 0; j < n; j++) perm[j] = j;
    } else if (is != perm) {
        memcpy(perm, is, (size_t)n * sizeof *perm);
    }
}

/* a[0..n) (distinct numbers) ascending by `digits` passes of 8 bits from bit 64 - 8 * digits up;
 * tmp: n of scratch. Returns a or tmp, whichever holds the result. */
static uint64_t *radix_packed(uint64_t *a, uint64_t *tmp, int64_t n, int digits) {
    int64_t count[8][256];
    const int d0 = 8 - digits;
    memset(count, 0, sizeof count);
    for (int64_t j = 0; j < n; j++)
        for (int d = d0; d < 8; d++) count[d][(a[j] >> (8 * d)) & 255]++;
    for (int d = d0; d < 8; d++) {
        int64_t *c = count[d];
        const int sh = 8 * d;
        if (c[a[0] >> sh & 255] == n) continue; /* a byte every key shares */
        int64_t sum = 0;
        for (int b = 0; b < 256; b++) {
            const int64_t t = c[b];
            c[b] = sum, sum += t;
        }
        for (int64_t j = 0; j < n; j++) tmp[c[a[j] >> sh & 255]++] = a[j];
        uint64_t *t = a;
        a = tmp, tmp = t;
    }
    return a;
}

/* the packed form (tsi_okeys_packs): rows [r0, r1); false on OOM */
static bool sort_rows_packed(const tsi_okeys *k, uint64_t flip, int64_t r0, int64_t r1,
                             int64_t *perm) {
    const int64_t n = k->n;
    uint64_t *a = malloc((size_t)n * 2 * sizeof *a);
    if (!a) return false;
    for (int64_t r = r0; r < r1; r++) {
        tsi_okeys_row_packed(k, r, flip, a);
        const uint64_t *s = a;
        if (n > INSERTION_MAX) {
            s = radix_packed(a, a + n, n, 4);
        } else {
            for (int64_t j = 1; j < n; j++) {
                const uint64_t v = a[j];
                int64_t i = j;
                for (; i > 0 && v < a[i - 1]; i--) a[i] = a[i - 1];
                a[i] = v;
            }
        }
        int64_t *p = perm + r * n;
        for (int64_t j = 0; j < n; j++) p[j] = (int64_t)(uint32_t)s[j];
    }
    free(a);
    return true;
}

/* rows [r0, r1); false on OOM */
static bool sort_rows(const tsi_okeys *k, uint64_t flip, int64_t r0, int64_t r1, int64_t *perm) {
    if (tsi_okeys_packs(k)) return sort_rows_packed(k, flip, r0, r1, perm);
    const int64_t n = k->n;
    const bool radix = n > INSERTION_MAX;
    uint64_t *row = malloc((size_t)n * (radix ? 4 : 2) * sizeof *row); /* row, ka, kb, ib */
    if (!row) return false;
    uint64_t *ka = row + n;
    for (int64_t r = r0; r < r1; r++) {
        tsi_okeys_row(k, r, row);
        if (radix)
            radix_row(row, n, k->bits / 8, flip, perm + r * n, ka, ka + n, (int64_t *)(ka + 2 * n));
        else
            insertion_row(row, n, flip, perm + r * n, ka);
    }
    free(row);
    return true;
}

typedef struct sort_job {
    uint64_t flip;
    int64_t *perm;
} sort_job;
static bool sort_block(const tsi_okeys *k, void *ctx, int64_t r0, int64_t r1) {
    const sort_job *j = ctx;
    return sort_rows(k, j->flip, r0, r1, j->perm);
}

bool tsi_okeys_argsort(const char *op, const tsi_okeys *k, bool descending, int64_t *perm) {
    if (k->n == 0 || k->rows == 0) return true;
    sort_job job = {tsi_okeys_flip(k, descending), perm};
    return tsi_okeys_for_rows(op, k, sort_block, &job);
}
