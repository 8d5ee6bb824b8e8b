/* kern_quant.c — quantize, dequantize and unpack (backend.h's quant) with PyTorch's formulas
 * (include/tessera/quant.h): the same bits as its x86 kernels; the per-element formulas are
 * backend/quant_math.h's, which the CUDA kernels share. */
#include <math.h>

#include "backend/backend.h"
#include "backend/cpu/cpu_kernels.h"
#include "backend/omp_if.h"
#include "backend/quant_math.h"
#include "core/clones.h"

static inline int64_t load_q(const ts_quant_args *a, int64_t e) {
    switch (a->qdtype) {
    case TS_QINT8:
        return ((const int8_t *)a->q)[e];
    case TS_QUINT8:
        return ((const uint8_t *)a->q)[e];
    case TS_QINT32:
        return ((const int32_t *)a->q)[e];
    default: /* TS_QUINT4X2 */
        return (((const uint8_t *)a->q)[e >> 1] >> (4 * (e & 1))) & 15;
    }
}

/* fake quantization of one row (quant_math.h's ts_qm_fake) */
static void fake_row(const ts_quant_args *a, int64_t e0, double scale, int64_t zp) {
    const float sc = (float)scale, inv = ts_qm_inv(scale);
    const double lo = (double)a->qmin, hi = (double)a->qmax;
    for (int64_t i = 0; i < a->inner; i++)
        a->y[e0 + i] = ts_qm_fake(a->x[e0 + i], sc, inv, zp, lo, hi, &a->u[e0 + i]);
}

/* ts_qm_quantize8 over a row, branch-free so that it vectorizes (the AVX2 variant) */
TS_CPU_BODY void q8_body(const float *x, int64_t n, float inv, float zp, float lo, float hi,
                         float nan_to, bool is_signed, void *out) {
    if (is_signed)
        for (int64_t i = 0; i < n; i++)
            ((int8_t *)out)[i] = (int8_t)(int32_t)ts_qm_quantize8(x[i], inv, zp, lo, hi, nan_to);
    else
        for (int64_t i = 0; i < n; i++)
            ((uint8_t *)out)[i] = (uint8_t)(int32_t)ts_qm_quantize8(x[i], inv, zp, lo, hi, nan_to);
}
TS_CPU_VARIANTS(q8,
                (const float *x, int64_t n, float inv, float zp, float lo, float hi, float nan_to,
                 bool is_signed, void *out),
                (x, n, inv, zp, lo, hi, nan_to, is_signed, out))

/* one row of inner elements starting at element e0, all of parameter p */
static void quant_row(const ts_quant_args *a, int64_t e0, int64_t p) {
    const int64_t n = a->inner;
    const double scale = a->scales[p];
    const int64_t zp = a->zero_points[p];
    if (a->kind == TS_QK_FAKE) {
        fake_row(a, e0, scale, zp);
        return;
    }
    if (a->kind == TS_QK_QUANTIZE) {
        const float inv = ts_qm_inv(scale), zpf = (float)zp;
        const double lo = (double)a->qmin, hi = (double)a->qmax;
        const int64_t nan_to = a->qdtype == TS_QINT32 ? a->qmin : a->qmax;
        const float *x = a->x + e0;
        switch (a->qdtype) {
        case TS_QINT8:
        case TS_QUINT8: {
            const bool sg = a->qdtype == TS_QINT8;
            q8(x, n, inv, zpf, (float)lo, (float)hi, (float)nan_to, sg,
               sg ? (void *)((int8_t *)a->q + e0) : (void *)((uint8_t *)a->q + e0));
            return;
        }
        case TS_QINT32:
            for (int64_t i = 0; i < n; i++)
                ((int32_t *)a->q)[e0 + i] = (int32_t)ts_qm_quantize(x[i], inv, zpf, lo, hi, nan_to);
            return;
        default: { /* quint4x2: rows start at even elements (the front end's rule), so pairs do */
            uint8_t *b = (uint8_t *)a->q;
            for (int64_t i = 0; i < n; i++) {
                const uint8_t v = (uint8_t)ts_qm_quantize(x[i], inv, zpf, lo, hi, nan_to);
                const int64_t e = e0 + i;
                b[e >> 1] = (e & 1) ? (uint8_t)((b[e >> 1] & 0x0F) | (v << 4)) : v;
            }
            return;
        }
        }
    }
    if (a->kind == TS_QK_DEQUANTIZE) {
        if (a->per_tensor)
            for (int64_t i = 0; i < n; i++)
                a->x[e0 + i] = ts_qm_dequantize(load_q(a, e0 + i), zp, scale, true);
        else
            for (int64_t i = 0; i < n; i++)
                a->x[e0 + i] = ts_qm_dequantize(load_q(a, e0 + i), zp, scale, false);
        return;
    }
    for (int64_t i = 0; i < n; i++) a->u[e0 + i] = (uint8_t)load_q(a, e0 + i); /* TS_QK_INT_REPR */
}

void tsi_cpu_quant(const ts_backend *be, int index, const ts_quant_args *a) {
    const int64_t rows = a->outer * a->channels;
    /* quint4x2 rows of odd length would share a byte between two threads: kept serial */
    const bool par = rows > 1 && rows * a->inner >= ((int64_t)1 << 16) &&
                     !(a->qdtype == TS_QUINT4X2 && (a->inner & 1));
    TS_PARALLEL_FOR_IF(
        par, for (int64_t r = 0; r < rows; r++) {
            const int64_t p = a->grouped ? r : r % a->channels;
            quant_row(a, r * a->inner, p);
        });
}
