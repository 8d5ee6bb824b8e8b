/* sort_host.c — keys of a tensor on the host and their stable merge sort (sort_host.h). */
#include "ops/sort_host.h"

#include <stdlib.h>
#include <string.h>

#include "core/internal.h"

bool tsi_sort_dtype_ok(const char *op, ts_tensor *t) {
    if (t->dtype != TS_U64) return true;
    tsi_error_set(TS_ERR_UNSUPPORTED, "%s: not implemented for 'UInt64'", op);
    return false;
}

static bool read_rows(const char *op, ts_tensor *x, int64_t rows, int64_t n, bool as_float,
                      tsi_keys *k) {
    memset(k, 0, sizeof *k);
    k->rows = rows, k->n = n;
    k->is_float = as_float || tsi_is_float(x->dtype);
    const int64_t total = rows * n;
    const size_t bytes = (size_t)(total > 0 ? total : 1) * 8;
    void *buf = malloc(bytes);
    if (!buf) {
        tsi_error_set(TS_ERR_OOM, "%s: out of host memory for %lld keys", op, (long long)total);
        return false;
    }
    if (k->is_float)
        k->f = buf;
    else
        k->i = buf;
    if (total == 0) return true;
    ts_tensor *c = ts_to_dtype(x, k->is_float ? TS_F64 : TS_I64);
    c = c ? ts_contiguous(ts_to(c, ts_cpu())) : NULL;
    if (!c || ts_copy_to_host(c, buf, (size_t)total * 8) != TS_OK) {
        tsi_keys_free(k);
        return false;
    }
    return true;
}

bool tsi_keys_read_flat(const char *op, ts_tensor *t, bool as_float, tsi_keys *k) {
    if (!tsi_sort_dtype_ok(op, t)) return false;
    return read_rows(op, t, 1, ts_numel(t), as_float, k);
}

void tsi_keys_free(tsi_keys *k) {
    free(k->f), free(k->i);
    k->f = NULL, k->i = NULL;
}

/* stable merge sort of idx[0..n) using tmp[0..n) */
static void merge_sort(int64_t *idx, int64_t *tmp, int64_t n, tsi_before_fn before,
                       const void *ctx) {
    if (n < 2) return;
    if (n <= 16) { /* insertion sort: stable */
        for (int64_t i = 1; i < n; i++) {
            int64_t v = idx[i], j = i;
            while (j > 0 && before(ctx, v, idx[j - 1])) idx[j] = idx[j - 1], j--;
            idx[j] = v;
        }
        return;
    }
    const int64_t h = n / 2;
    merge_sort(idx, tmp, h, before, ctx);
    merge_sort(idx + h, tmp + h, n - h, before, ctx);
    if (!before(ctx, idx[h], idx[h - 1])) return; /* already in order */
    int64_t a = 0, b = h, o = 0;
    while (a < h && b < n) tmp[o++] = before(ctx, idx[b], idx[a]) ? idx[b++] : idx[a++];
    while (a < h) tmp[o++] = idx[a++];
    while (b < n) tmp[o++] = idx[b++];
    memcpy(idx, tmp, (size_t)n * sizeof *idx);
}

bool tsi_stable_sort(const char *op, int64_t *idx, int64_t n, tsi_before_fn before,
                     const void *ctx) {
    int64_t *tmp = malloc((size_t)(n > 0 ? n : 1) * sizeof *tmp);
    if (!tmp) {
        tsi_error_set(TS_ERR_OOM, "%s: out of host memory for %lld indices", op, (long long)n);
        return false;
    }
    merge_sort(idx, tmp, n, before, ctx);
    free(tmp);
    return true;
}
