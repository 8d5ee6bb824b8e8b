/* kern_quant.c — quantize, dequantize and unpack (backend.h's quant) with PyTorch's formulas
 * (include/tessera/quant.h): the same bits as its x86 kernels. */
#include <math.h>

#include "backend/backend.h"
#include "backend/cpu/cpu_kernels.h"
#include "backend/omp_if.h"
#include "core/clones.h"

/* PyTorch's qvalue: zero_point + nearbyint(x * inv) in float32, clamped in double; NaN gives
 * nan_to (qmax for 8 and 4 bits, qmin for qint32, as PyTorch's x86 kernels) */
static inline int64_t quantize_one(float x, float inv, float zp, double qmin, double qmax,
                                   int64_t nan_to) {
    const float v = zp + nearbyintf(x * inv);
    if (isnan(v)) return nan_to;
    const double d = v;
    return (int64_t)(d < qmin ? qmin : d > qmax ? qmax : d);
}

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

/* PyTorch's fake_quantize_*_cachemask CPU kernels: sc = (float)scale, inv = 1.0f / sc,
 * qval = (int64)(zp + nearbyint(x * inv)) (the sum in float32), y = (clamp(qval, qmin, qmax) - zp)
 * * sc (in double, rounded to float32 once), mask = qmin <= qval <= qmax. Where the float32 sum
 * is outside int64 (+-inf, huge x) PyTorch's cast is undefined: here it saturates (y the range's
 * end, mask 0); NaN gives y NaN and mask 0 (PyTorch's x86 gives (qmin - zp) * scale). */
static void fake_row(const ts_quant_args *a, int64_t e0, double scale, int64_t zp) {
    const float sc = (float)scale, inv = 1.0f / sc, zpf = (float)zp;
    const double lo = (double)a->qmin, hi = (double)a->qmax;
    const float *x = a->x + e0;
    float *y = a->y + e0;
    uint8_t *m = a->u + e0;
    for (int64_t i = 0; i < a->inner; i++) {
        const float v = zpf + nearbyintf(x[i] * inv);
        if (isnan(v)) {
            y[i] = NAN, m[i] = 0;
            continue;
        }
        const double d = v; /* an integer (or +-inf): exact in double */
        m[i] = (uint8_t)(d >= lo && d <= hi);
        const double c = d < lo ? lo : d > hi ? hi : d;
        y[i] = (float)((c - (double)zp) * (double)sc);
    }
}

/* quantize_one for 8-bit outputs, branch-free so that it vectorizes (the AVX2 variant): the
 * clamp in float32 is the same as in double (v an integer or +-inf, the ends 8-bit integers) */
TS_CPU_BODY void q8_body(const float *x, int64_t n, float inv, float zp, float lo, float hi,
                         float nan_to, bool is_signed, void *out) {
    if (is_signed)
        for (int64_t i = 0; i < n; i++) {
            float v = zp + nearbyintf(x[i] * inv);
            v = v != v ? nan_to : v < lo ? lo : v > hi ? hi : v;
            ((int8_t *)out)[i] = (int8_t)(int32_t)v;
        }
    else
        for (int64_t i = 0; i < n; i++) {
            float v = zp + nearbyintf(x[i] * inv);
            v = v != v ? nan_to : v < lo ? lo : v > hi ? hi : v;
            ((uint8_t *)out)[i] = (uint8_t)(int32_t)v;
        }
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
        const float inv = 1.0f / (float)scale, zpf = (float)zp;
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
                ((int32_t *)a->q)[e0 + i] = (int32_t)quantize_one(x[i], inv, zpf, lo, hi, nan_to);
            return;
        default: { /* quint4x2: rows start at even elements (the front end's rule), so pairs do */
            uint8_t *b = (uint8_t *)a->q;
            for (int64_t i = 0; i < n; i++) {
                const uint8_t v = (uint8_t)quantize_one(x[i], inv, zpf, lo, hi, nan_to);
                const int64_t e = e0 + i;
                b[e >> 1] = (e & 1) ? (uint8_t)((b[e >> 1] & 0x0F) | (v << 4)) : v;
            }
            return;
        }
        }
    }
    if (a->kind == TS_QK_DEQUANTIZE) {
        float *x = a->x + e0;
        if (a->per_tensor) { /* fbgemm's Dequantize: float scale * int32 difference */
            const float s = (float)scale;
            for (int64_t i = 0; i < n; i++) x[i] = s * (float)(load_q(a, e0 + i) - zp);
        } else { /* PyTorch's dequantize_val: float difference times the double scale */
            const float zpf = (float)zp;
            for (int64_t i = 0; i < n; i++)
                x[i] = (float)((double)((float)load_q(a, e0 + i) - zpf) * scale);
        }
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
