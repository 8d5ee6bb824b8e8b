/* kern_access.h — raw buffers and kernel views for the tests that call CPU kernels directly:
 * plain double-precision f16/bf16 references, element access by dtype, view builders
 * (kern_elem_ref.h adds the elementwise tests' value checks). */
#ifndef TS_TEST_KERN_ACCESS_H
#define TS_TEST_KERN_ACCESS_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "backend/cpu/cpu_kernels.h"

/* ------------------------------------------------------------------ reference f16 / bf16
 * Written with double arithmetic (frexp/ldexp/nearbyint), independent of the bit tricks under
 * test: round |x| to a multiple of the format's quantum at x's binade, ties to even. */
static inline uint16_t ref_encode(float xf, int mant_bits, int emin, int emax_bias,
                                  double overflow) {
    double x = xf, ax = fabs(x);
    uint16_t sign = signbit(x) ? 0x8000 : 0;
    uint16_t inf = (uint16_t)(((1 << (15 - mant_bits)) - 1) << mant_bits);
    if (isnan(x)) return (uint16_t)(sign | inf | (1 << (mant_bits - 1)));
    if (ax >= overflow) return (uint16_t)(sign | inf);
    int e;
    frexp(ax, &e);
    double q = ax < ldexp(1.0, emin) ? ldexp(1.0, emin - mant_bits) : ldexp(1.0, e - 1 - mant_bits);
    double v = nearbyint(ax / q) * q;
    if (v >= overflow) return (uint16_t)(sign | inf);
    if (v < ldexp(1.0, emin))
        return (uint16_t)(sign | (uint16_t)(v / ldexp(1.0, emin - mant_bits)));
    frexp(v, &e);
    double mant = v / ldexp(1.0, e - 1) - 1.0;
    return (uint16_t)(sign | ((e - 1 + emax_bias) << mant_bits) | (int)(mant * (1 << mant_bits)));
}
static inline uint16_t ref_f16(float x) { return ref_encode(x, 10, -14, 15, 65520.0); }
static inline uint16_t ref_bf16(float x) {
    return ref_encode(x, 7, -126, 127, ldexp(2.0 - ldexp(1.0, -8), 127));
}
static inline double ref_decode(uint16_t h, int mant_bits, int bias) {
    int e = (h & 0x7fff) >> mant_bits, m = h & ((1 << mant_bits) - 1);
    int emax = (1 << (15 - mant_bits)) - 1;
    double v = e == emax ? (m ? NAN : INFINITY)
               : e == 0  ? ldexp(m, 1 - bias - mant_bits)
                         : ldexp(m + (1 << mant_bits), e - bias - mant_bits);
    return (h & 0x8000) ? -v : v;
}
static inline double ref_f16_val(uint16_t h) { return ref_decode(h, 10, 15); }
static inline double ref_bf16_val(uint16_t h) { return ref_decode(h, 7, 127); }

/* ------------------------------------------------------------------ element access */
static inline size_t esz(ts_dtype dt) {
    return dt == TS_F64 || dt == TS_I64    ? 8
           : dt == TS_F32 || dt == TS_I32  ? 4
           : dt == TS_F16 || dt == TS_BF16 ? 2
                                           : 1;
}
static inline bool isflt(ts_dtype dt) {
    return dt == TS_F32 || dt == TS_F64 || dt == TS_F16 || dt == TS_BF16;
}
static inline double get(ts_dtype dt, const void *base, int64_t i) {
    const char *p = (const char *)base + (size_t)i * esz(dt);
    switch (dt) {
    case TS_F32:
        return *(const float *)p;
    case TS_F64:
        return *(const double *)p;
    case TS_F16:
        return ref_f16_val(*(const uint16_t *)p);
    case TS_BF16:
        return ref_bf16_val(*(const uint16_t *)p);
    case TS_I64:
        return (double)*(const int64_t *)p;
    case TS_I32:
        return *(const int32_t *)p;
    default:
        return *(const uint8_t *)p;
    }
}
/* Stores v rounded to the dtype; integers wrap like C casts through int64, bool is v != 0. */
static inline void put(ts_dtype dt, void *base, int64_t i, double v) {
    char *p = (char *)base + (size_t)i * esz(dt);
    switch (dt) {
    case TS_F32:
        *(float *)p = (float)v;
        break;
    case TS_F64:
        *(double *)p = v;
        break;
    case TS_F16:
        *(uint16_t *)p = ref_f16((float)v);
        break;
    case TS_BF16:
        *(uint16_t *)p = ref_bf16((float)v);
        break;
    case TS_I64:
        *(int64_t *)p = (int64_t)v;
        break;
    case TS_I32:
        *(int32_t *)p = (int32_t)(int64_t)v;
        break;
    case TS_U8:
        *(uint8_t *)p = (uint8_t)(int64_t)v;
        break;
    default:
        *(uint8_t *)p = v != 0;
        break;
    }
}
/* v as stored in dt and read back */
static inline double as_dtype(ts_dtype dt, double v) {
    char buf[8];
    put(dt, buf, 0, v);
    return get(dt, buf, 0);
}

static inline ts_kview kv(void *data, ts_dtype dt, int ndim, const int64_t *shape,
                          const int64_t *st) {
    ts_kview v;
    memset(&v, 0, sizeof v);
    v.data = data;
    v.dtype = dt;
    v.ndim = ndim;
    for (int d = 0; d < ndim; d++) v.shape[d] = shape[d], v.strides[d] = st[d];
    return v;
}
static inline ts_kview kv1(void *data, ts_dtype dt, int64_t n) {
    int64_t st = 1;
    return kv(data, dt, 1, &n, &st);
}

#endif /* TS_TEST_KERN_ACCESS_H */
