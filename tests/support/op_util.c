/* op_util.c — dtype arithmetic for the op harness, written independently of the library's own. */
#include <math.h>
#include <string.h>

#include "op_table.h"

int64_t ot_numel(ts_shape s) {
    int64_t n = 1;
    for (int i = 0; i < s.ndim; i++) n *= s.dims[i];
    return n;
}

bool ot_broadcast(ts_shape a, ts_shape b, ts_shape *out) {
    ts_shape r = {0};
    r.ndim = a.ndim > b.ndim ? a.ndim : b.ndim;
    for (int i = 0; i < r.ndim; i++) {
        int ia = a.ndim - r.ndim + i, ib = b.ndim - r.ndim + i;
        int64_t da = ia >= 0 ? a.dims[ia] : 1, db = ib >= 0 ? b.dims[ib] : 1;
        if (da != db && da != 1 && db != 1) return false;
        r.dims[i] = da == 1 ? db : da;
    }
    *out = r;
    return true;
}

int64_t ot_bcast_offset(ts_shape s, ts_shape to, const int64_t *idx) {
    int64_t off = 0;
    for (int i = 0; i < s.ndim; i++) {
        int it = to.ndim - s.ndim + i;
        int64_t k = s.dims[i] == 1 ? 0 : idx[it];
        off = off * s.dims[i] + k;
    }
    return off;
}

bool ot_next_index(ts_shape s, int64_t *idx) {
    for (int i = s.ndim - 1; i >= 0; i--) {
        if (++idx[i] < s.dims[i]) return true;
        idx[i] = 0;
    }
    return false;
}

/* ------------------------------------------------------------------ small floats */
/* Rounds |v| to a binary format with mbits mantissa bits and exponents [emin, emax]; the same
 * code gives half and bfloat16, subnormals included, ties to even. */
static uint16_t small_from(double v, int mbits, int emin, int emax) {
    uint16_t sign = signbit(v) ? 0x8000 : 0;
    int bias = emax;
    if (isnan(v)) return (uint16_t)(((2 * emax + 1) << mbits) | (1 << (mbits - 1)));
    double a = fabs(v);
    if (a == 0) return sign;
    uint16_t inf = (uint16_t)(sign | ((2 * emax + 1) << mbits));
    if (isinf(a)) return inf;
    int e;
    frexp(a, &e);
    int E = e - 1;
    if (E > emax + 1) return inf;
    if (E < emin) E = emin;
    double m = nearbyint(ldexp(a, mbits - E)); /* exact scaling by a power of two */
    if (m >= ldexp(1, mbits + 1)) {
        m /= 2;
        E++;
    }
    if (E > emax) return inf;
    int64_t mi = (int64_t)m;
    if (mi < (1 << mbits)) return (uint16_t)(sign | mi); /* subnormal, or zero */
    return (uint16_t)(sign | ((E + bias) << mbits) | (mi - (1 << mbits)));
}

static double small_to(uint16_t h, int mbits, int emax) {
    int ebits_mask = (1 << (15 - mbits)) - 1;
    int ex = (h >> mbits) & ebits_mask;
    int man = h & ((1 << mbits) - 1);
    double sign = (h & 0x8000) ? -1.0 : 1.0;
    if (ex == ebits_mask) return man ? NAN : sign * INFINITY;
    if (ex == 0) return sign * ldexp(man, 1 - emax - mbits);
    return sign * ldexp(man + (1 << mbits), ex - emax - mbits);
}

uint16_t ot_f16_from(double v) { return small_from(v, 10, -14, 15); }
double ot_f16_to(uint16_t h) { return small_to(h, 10, 15); }
uint16_t ot_bf16_from(double v) { return small_from(v, 7, -126, 127); }
double ot_bf16_to(uint16_t h) { return small_to(h, 7, 127); }

/* ------------------------------------------------------------------ elements */
static int64_t to_i64(double v) {
    if (isnan(v)) return 0;
    if (v >= 9.2e18) return INT64_MAX;
    if (v <= -9.2e18) return INT64_MIN;
    return (int64_t)v;
}

double ot_cast(double v, ts_dtype dt) {
    switch (dt) {
    case TS_F32:
        return (double)(float)v;
    case TS_F16:
        return ot_f16_to(ot_f16_from(v));
    case TS_BF16:
        return ot_bf16_to(ot_bf16_from(v));
    case TS_I64:
        return (double)to_i64(v);
    case TS_I32:
        return (double)(int32_t)(uint32_t)(uint64_t)to_i64(v);
    case TS_U8:
        return (double)(uint8_t)(uint64_t)to_i64(v);
    case TS_BOOL:
        return v != 0 ? 1.0 : 0.0;
    default:
        return v;
    }
}

void ot_store(void *p, ts_dtype dt, double v) {
    switch (dt) {
    case TS_F32:
        *(float *)p = (float)v;
        break;
    case TS_F64:
        *(double *)p = v;
        break;
    case TS_F16:
        *(uint16_t *)p = ot_f16_from(v);
        break;
    case TS_BF16:
        *(uint16_t *)p = ot_bf16_from(v);
        break;
    case TS_I64:
        *(int64_t *)p = to_i64(v);
        break;
    case TS_I32:
        *(int32_t *)p = (int32_t)(uint32_t)(uint64_t)to_i64(v);
        break;
    case TS_U8:
        *(uint8_t *)p = (uint8_t)(uint64_t)to_i64(v);
        break;
    case TS_BOOL:
        *(uint8_t *)p = v != 0;
        break;
    default:
        break;
    }
}

double ot_load(const void *p, ts_dtype dt) {
    switch (dt) {
    case TS_F32:
        return *(const float *)p;
    case TS_F64:
        return *(const double *)p;
    case TS_F16:
        return ot_f16_to(*(const uint16_t *)p);
    case TS_BF16:
        return ot_bf16_to(*(const uint16_t *)p);
    case TS_I64:
        return (double)*(const int64_t *)p;
    case TS_I32:
        return *(const int32_t *)p;
    case TS_U8:
        return *(const uint8_t *)p;
    case TS_BOOL:
        return *(const uint8_t *)p ? 1.0 : 0.0; /* any non-zero byte reads as true */
    default:
        return NAN;
    }
}

/* ------------------------------------------------------------------ type promotion */
static bool is_float(ts_dtype d) {
    return d == TS_F32 || d == TS_F64 || d == TS_F16 || d == TS_BF16;
}

static int rank_in_kind(ts_dtype d) {
    switch (d) {
    case TS_U8:
        return 1;
    case TS_I32:
        return 2;
    case TS_I64:
        return 3;
    case TS_F16:
    case TS_BF16:
        return 1;
    case TS_F32:
        return 2;
    case TS_F64:
        return 3;
    default:
        return 0;
    }
}

ts_dtype ot_promote(ts_dtype a, ts_dtype b) {
    if (a == b) return a;
    if (a == TS_BOOL) return b;
    if (b == TS_BOOL) return a;
    bool fa = is_float(a), fb = is_float(b);
    if (fa != fb) return fa ? a : b;
    if (fa && rank_in_kind(a) == 1 && rank_in_kind(b) == 1) return TS_F32; /* f16 with bf16 */
    return rank_in_kind(a) >= rank_in_kind(b) ? a : b;
}

static ts_dtype promote_skip_undef(ts_dtype a, ts_dtype b) {
    if (a == TS_DTYPE_DEFAULT) return b;
    if (b == TS_DTYPE_DEFAULT) return a;
    return ot_promote(a, b);
}

/* c10's combine_categories: a lower-priority operand only counts when its category is higher. */
static ts_dtype combine(ts_dtype higher, ts_dtype lower) {
    if (is_float(higher)) return higher;
    if (higher == TS_BOOL || is_float(lower)) return promote_skip_undef(higher, lower);
    return higher != TS_DTYPE_DEFAULT ? higher : lower;
}

ts_dtype ot_result_type(int n, const ts_dtype *dts, const int *ndims, bool has_scalar,
                        double scalar) {
    ts_dtype dim = TS_DTYPE_DEFAULT, zero = TS_DTYPE_DEFAULT, wrapped = TS_DTYPE_DEFAULT;
    for (int i = 0; i < n; i++) {
        if (ndims[i] > 0)
            dim = promote_skip_undef(dim, dts[i]);
        else
            zero = promote_skip_undef(zero, dts[i]);
    }
    if (has_scalar) wrapped = scalar == floor(scalar) ? TS_I64 : TS_F32;
    return combine(dim, combine(zero, wrapped));
}
