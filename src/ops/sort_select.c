/* sort_select.c — selection without a full sort (sort_host.h): the first m places of each row's
 * stable order (topk) by an insertion buffer, and the element at one place (kthvalue, median) by
 * quickselect. Both rank by the stable sort's total order (the keys, ties by position), so they
 * give exactly the elements tsi_keys_argsort would put there. */
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "ops/sort_host.h"

/* a before b (flat indices of one row) in the stable sort's order: ties (NaN with NaN too) by
 * position */
static bool rank_before(const tsi_keys *k, bool desc, int64_t a, int64_t b) {
    if (desc ? tsi_key_less(k, b, a) : tsi_key_less(k, a, b)) return true;
    if (desc ? tsi_key_less(k, a, b) : tsi_key_less(k, b, a)) return false;
    return a < b;
}

void tsi_keys_top(const tsi_keys *k, bool descending, int64_t m, int64_t *pos) {
    for (int64_t r = 0; r < k->rows; r++) {
        int64_t *p = pos + r * m, have = 0;
        const int64_t base = r * k->n;
        for (int64_t j = base; j < base + k->n && m > 0; j++) {
            if (have == m && !rank_before(k, descending, j, p[m - 1])) continue;
            int64_t at = have < m ? have++ : m - 1; /* the last one drops out when full */
            while (at > 0 && rank_before(k, descending, j, p[at - 1])) p[at] = p[at - 1], at--;
            p[at] = j;
        }
        for (int64_t i = 0; i < m; i++) p[i] -= base;
    }
}

typedef struct ascending {
    const tsi_keys *k;
} ascending;
static bool asc_before(const void *ctx, int64_t a, int64_t b) {
    return rank_before(((const ascending *)ctx)->k, false, a, b);
}

bool tsi_keys_nth(const char *op, const tsi_keys *k, int64_t r, int64_t q, int64_t *scratch,
                  int64_t *place) {
    const int64_t n = k->n, base = r * n;
    int64_t *v = scratch;
    for (int64_t j = 0; j < n; j++) v[j] = base + j;
    int64_t lo = 0, hi = n - 1; /* q lies in v[lo..hi] */
    for (int rounds = 0; lo < hi; rounds++) {
        if (rounds > 64) { /* a bad run of pivots: sort what is left (the same total order) */
            const ascending ctx = {k};
            if (!tsi_stable_sort(op, v + lo, hi - lo + 1, asc_before, &ctx)) return false;
            break;
        }
        /* median of three to v[hi], then Lomuto's partition (every key is distinct in this
         * order, so no run of equal keys can make it quadratic) */
        const int64_t mid = lo + (hi - lo) / 2;
        int64_t a = v[lo], b = v[mid], c = v[hi], med;
        if (rank_before(k, false, a, b))
            med = rank_before(k, false, b, c) ? mid : (rank_before(k, false, a, c) ? hi : lo);
        else
            med = rank_before(k, false, a, c) ? lo : (rank_before(k, false, b, c) ? hi : mid);
        int64_t t = v[med];
        v[med] = v[hi], v[hi] = t;
        const int64_t pivot = v[hi];
        int64_t s = lo;
        for (int64_t j = lo; j < hi; j++) {
            if (rank_before(k, false, v[j], pivot)) t = v[j], v[j] = v[s], v[s] = t, s++;
        }
        v[hi] = v[s], v[s] = pivot;
        if (s == q) {
            lo = hi = q;
        } else if (q < s) {
            hi = s - 1;
        } else {
            lo = s + 1;
        }
    }
    *place = v[q] - base;
    return true;
}
