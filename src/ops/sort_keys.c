/* sort_keys.c — a tensor's elements as order-preserving unsigned keys (sort_keys.h), a row at a
 * time: on the cpu straight from the tensor's memory, elsewhere from one copy to the host in the
 * tensor's own dtype; float16 / bfloat16 through float32 (exact). */
#include "ops/sort_keys.h"

#include <stdlib.h>
#include <string.h>

#include "core/capture.h"
#include "core/internal.h"
#include "ops/sort_host.h"

#ifdef TS_HAVE_OPENMP
#include <omp.h>
#endif

#define SORT_GRAIN 32768 /* elements below which the threads cost more than they save */

bool tsi_okeys_for_rows(const char *op, const tsi_okeys *k, tsi_okeys_rows_fn fn, void *ctx) {
    const int64_t rows = k->rows;
    bool ok = true;
#ifdef TS_HAVE_OPENMP
    const int nt = omp_get_max_threads();
    if (rows > 1 && rows * k->n >= SORT_GRAIN && nt > 1 && !omp_in_parallel()) {
        const int64_t blocks = rows < 16 * nt ? rows : 16 * nt; /* a busy core takes fewer */
        int bad = 0;
#pragma omp parallel for schedule(dynamic, 1) reduction(| : bad)
        for (int64_t b = 0; b < blocks; b++)
            bad |= !fn(k, ctx, rows * b / blocks, rows * (b + 1) / blocks);
        ok = !bad;
    } else {
        ok = fn(k, ctx, 0, rows);
    }
#else
    ok = fn(k, ctx, 0, rows);
#endif
    if (!ok)
        tsi_error_set(TS_ERR_OOM, "%s: out of host memory for a row of %lld keys", op,
                      (long long)k->n);
    return ok;
}

#define MAP(T, expr)                                                                               \
    do {                                                                                           \
        const T *s = (const T *)src;                                                               \
        if (key32)                                                                                 \
            for (int64_t i = lo; i < hi; i++) key32[i] = (uint32_t)(expr);                         \
        else                                                                                       \
            for (int64_t i = lo; i < hi; i++) key[i] = (expr);                                     \
    } while (0)

/* key[lo..hi) (or key32[lo..hi) when not NULL: keys of 32 bits) from src[lo..hi) of dtype dt
 * (never float16 / bfloat16 / uint64 here) */
static void map_keys(ts_dtype dt, const void *src, uint64_t *key, uint32_t *key32, int64_t lo,
                     int64_t hi) {
    switch (dt) {
    case TS_F32:
        MAP(float, tsi_okey_f32(s[i]));
        break;
    case TS_F64:
        MAP(double, tsi_okey_f64(s[i]));
        break;
    case TS_I64:
        MAP(int64_t, (uint64_t)s[i] ^ (UINT64_C(1) << 63));
        break;
    case TS_I32:
        MAP(int32_t, (uint32_t)s[i] ^ 0x80000000u);
        break;
    case TS_I16:
        MAP(int16_t, (uint32_t)(int32_t)s[i] ^ 0x80000000u);
        break;
    case TS_I8:
        MAP(int8_t, (uint32_t)(int32_t)s[i] ^ 0x80000000u);
        break;
    case TS_U8:
    case TS_BOOL:
        MAP(uint8_t, s[i]);
        break;
    case TS_U16:
        MAP(uint16_t, s[i]);
        break;
    case TS_U32:
        MAP(uint32_t, s[i]);
        break;
    default:
        break;
    }
}
#undef MAP

void tsi_okeys_row(const tsi_okeys *k, int64_t r, uint64_t *out) {
    const int64_t es = (int64_t)tsi_dtype_size(k->dtype);
    map_keys(k->dtype, k->src + r * k->n * es, out, NULL, 0, k->n);
}

void tsi_okeys_row32(const tsi_okeys *k, int64_t r, uint32_t *out) {
    const int64_t es = (int64_t)tsi_dtype_size(k->dtype);
    map_keys(k->dtype, k->src + r * k->n * es, NULL, out, 0, k->n);
}

void tsi_okeys_row_packed(const tsi_okeys *k, int64_t r, uint64_t flip, uint64_t *out) {
    tsi_okeys_row(k, r, out);
    for (int64_t j = 0; j < k->n; j++) out[j] = (out[j] ^ flip) << 32 | (uint64_t)j;
}

bool tsi_okeys_read(const char *op, ts_tensor *t, int dim, tsi_okeys *k) {
    memset(k, 0, sizeof *k);
    if (!tsi_sort_dtype_ok(op, t)) return false;
    const int last = t->shape.ndim - 1;
    ts_tensor *x = dim == last ? t : ts_transpose(t, dim, last);
    if (x && (x->dtype == TS_F16 || x->dtype == TS_BF16)) x = ts_to_dtype(x, TS_F32);
    ts_tensor *c = x ? tsi_contiguous(op, x) : NULL;
    if (!c) return false;
    k->holder = c;
    k->rows = 1;
    for (int i = 0; i < t->shape.ndim; i++)
        if (i != dim) k->rows *= t->shape.dims[i];
    k->n = t->shape.dims[dim];
    k->dtype = c->dtype;
    k->is_float = tsi_is_float(c->dtype);
    k->bits = tsi_dtype_size(c->dtype) == 8 ? 64 : 32;
    k->nan_key = k->bits == 64 ? UINT64_MAX : UINT32_MAX;
    const size_t es = tsi_dtype_size(c->dtype), bytes = (size_t)(k->rows * k->n) * es;
    k->src = c->storage->data + c->offset * (int64_t)es;
    /* cpu memory is the host's; a capture on it refuses the read in ts_copy_to_host */
    if (bytes && (tsi_device(c).type != TS_CPU || tsi_capturing_on(tsi_device(c)))) {
        k->src = k->staged = malloc(bytes);
        if (!k->staged)
            tsi_error_set(TS_ERR_OOM, "%s: out of host memory for %zu bytes", op, bytes);
        if (!k->staged || ts_copy_to_host(c, k->staged, bytes) != TS_OK) {
            tsi_okeys_free(k);
            return false;
        }
    }
    return true;
}

void tsi_okeys_free(tsi_okeys *k) {
    free(k->staged);
    if (k->holder) ts_release(k->holder);
    k->staged = NULL, k->holder = NULL, k->src = NULL;
}
