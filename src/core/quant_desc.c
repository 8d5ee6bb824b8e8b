/* quant_desc.c — the quantization descriptor a quantized tensor carries (quant_desc.h). */
#include "core/quant_desc.h"

#include <stdlib.h>

#include "backend/kernel_math.h"
#include "core/internal.h"

tsi_quant *tsi_quant_new(const char *op, ts_qscheme scheme, int64_t count) {
    tsi_quant *q = calloc(1, sizeof *q);
    if (!q || count < 1 || (uint64_t)count > SIZE_MAX / sizeof(double)) {
        free(q);
        return tsi_error_set(TS_ERR_OOM, "%s: out of host memory for quantization parameters", op),
               NULL;
    }
    q->scales = malloc((size_t)count * sizeof *q->scales);
    q->zero_points = malloc((size_t)count * sizeof *q->zero_points);
    if (!q->scales || !q->zero_points) {
        free(q->scales);
        free(q->zero_points);
        free(q);
        return tsi_error_set(TS_ERR_OOM, "%s: out of host memory for quantization parameters", op),
               NULL;
    }
    atomic_init(&q->refs, 1);
    q->scheme = scheme;
    q->axis = -1;
    q->group_size = 0;
    q->count = count;
    atomic_init(&q->kparams, NULL);
    return q;
}

void tsi_quant_release(tsi_quant *q) {
    if (!q || atomic_fetch_sub_explicit(&q->refs, 1, memory_order_acq_rel) != 1) return;
    tsi_quant_kparams *k = atomic_load(&q->kparams);
    if (k) free(k->scales), free(k);
    free(q->scales);
    free(q->zero_points);
    free(q);
}

const tsi_quant_kparams *tsi_quant_kparams_get(const char *op, tsi_quant *q) {
    tsi_quant_kparams *k = atomic_load_explicit(&q->kparams, memory_order_acquire);
    if (k) return k;
    k = malloc(sizeof *k);
    /* one block: count floats, count int32, count float16 */
    if (k)
        k->scales = malloc((size_t)q->count * (sizeof(float) + sizeof(int32_t) + sizeof(uint16_t)));
    if (!k || !k->scales) {
        free(k);
        return tsi_error_set(TS_ERR_OOM, "%s: out of host memory for quantization parameters", op),
               NULL;
    }
    k->zero_points = (int32_t *)(void *)(k->scales + q->count);
    k->scales_f16 = (uint16_t *)(void *)(k->zero_points + q->count);
    k->uniform_zp = true;
    bool f16 = true;
    for (int64_t i = 0; i < q->count; i++) {
        k->scales[i] = (float)q->scales[i];
        k->zero_points[i] = (int32_t)q->zero_points[i];
        k->uniform_zp = k->uniform_zp && k->zero_points[i] == k->zero_points[0];
        k->scales_f16[i] = ts_f32_to_f16(k->scales[i]);
        f16 = f16 && k->scales[i] > 0 && ts_f16_to_f32(k->scales_f16[i]) == k->scales[i];
    }
    if (!f16) k->scales_f16 = NULL;
    tsi_quant_kparams *none = NULL;
    if (atomic_compare_exchange_strong(&q->kparams, &none, k)) return k;
    free(k->scales), free(k); /* another thread made it first */
    return none;
}

void tsi_quant_range(ts_dtype dt, int64_t *qmin, int64_t *qmax) {
    switch (dt) {
    case TS_QINT8:
        *qmin = -128, *qmax = 127;
        return;
    case TS_QUINT8:
        *qmin = 0, *qmax = 255;
        return;
    case TS_QINT32:
        *qmin = INT32_MIN, *qmax = INT32_MAX;
        return;
    default: /* TS_QUINT4X2 */
        *qmin = 0, *qmax = 15;
        return;
    }
}
