/* quant_desc.c — the quantization descriptor a quantized tensor carries (quant_desc.h). */
#include "core/quant_desc.h"

#include <stdlib.h>

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
    return q;
}

void tsi_quant_release(tsi_quant *q) {
    if (!q || atomic_fetch_sub_explicit(&q->refs, 1, memory_order_acq_rel) != 1) return;
    free(q->scales);
    free(q->zero_points);
    free(q);
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
