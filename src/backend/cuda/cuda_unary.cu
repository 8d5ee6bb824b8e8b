/* cuda_unary.cu — elementwise unary ops (ts_unary_op) for every dtype, with kern_unary.c's rules:
 * f32/f16/bf16 compute in float, f64 in double, integers and bool in int64 (wrapping). */
#include <cmath>

#include "backend/cuda/cuda_elementwise.h"
#include "backend/cuda/cuda_iter.cuh"

static_assert(TS_U_COUNT == 82, "a ts_unary_op was added or removed: give it its float and double "
                                "kernel (a row of kernel_math.h's lists or a case below) and its "
                                "integer case; then update the count");

/* Clamp bounds already in each compute type (NaN = unbounded side, resolved on the host). */
struct tsc_unary_params {
    int op;
    float lo_f, hi_f;
    double lo_d, hi_d;
    int64_t lo_i, hi_i;
    double p0, p1; /* as given: the special ops' numbers */
};

/* A case of unary_ct's switch for each of kernel_math.h's TS_LIBM_UNARY functions. */
#define UNARY_LIBM_CASE(U, FN, FAM)                                                                \
    case U:                                                                                        \
        return TS_LIBM_##FAM(FN)(a);
/* ... and for each of its TS_SPECIAL_UNARY and TS_SPECIAL_PARAM_UNARY ops (issue 52) */
#define UNARY_SPECIAL_CASE(U, FN, FAM)                                                             \
    case U:                                                                                        \
        return TS_SPECIAL_##FAM(FN)(a);
#define UNARY_PARAM_CASE(U, EXPR, unused)                                                          \
    case U:                                                                                        \
        return EXPR;

/* clang-format off */
TS_HD inline float unary_ct(const tsc_unary_params &p, float a) {
    const double p0 = p.p0, p1 = p.p1;
    switch (p.op) {
    case TS_U_NEG:
        return -a;
    case TS_U_ABS:
        return fabsf(a);
    case TS_U_EXP:
        return expf(a);
    case TS_U_LOG:
        return logf(a);
    case TS_U_LOG1P:
        return log1pf(a);
    case TS_U_SQRT:
        return sqrtf(a);
    case TS_U_RSQRT:
        return ts_rsqrt_f(a);
        TS_LIBM_UNARY(UNARY_LIBM_CASE, f)
        TS_SPECIAL_UNARY(UNARY_SPECIAL_CASE, f)
        TS_SPECIAL_PARAM_UNARY(UNARY_PARAM_CASE, f, float, 0)
    case TS_U_TANH:
        return tanhf(a);
    case TS_U_SIGMOID:
        return ts_sigmoid_f(a);
    case TS_U_RELU:
        return ts_relu_f(a);
    case TS_U_GELU:
        return ts_gelu_f(a);
    case TS_U_SILU:
        return ts_silu_f(a);
    case TS_U_SOFTPLUS:
        return ts_softplus_f(a);
    case TS_U_SIGN:
        return ts_sign_f(a);
    case TS_U_FLOOR:
        return floorf(a);
    case TS_U_CEIL:
        return ceilf(a);
    case TS_U_ROUND:
        return ts_round_even_f(a);
    case TS_U_RECIPROCAL:
        return ts_reciprocal_f(a);
    case TS_U_SQUARE:
        return a * a;
    case TS_U_CLAMP:
        return ts_clamp_f(a, p.lo_f, p.hi_f);
    default:
        return a;
    }
}

TS_HD inline double unary_ct(const tsc_unary_params &p, double a) {
    const double p0 = p.p0, p1 = p.p1;
    switch (p.op) {
    case TS_U_NEG:
        return -a;
    case TS_U_ABS:
        return fabs(a);
    case TS_U_EXP:
        return exp(a);
    case TS_U_LOG:
        return log(a);
    case TS_U_LOG1P:
        return log1p(a);
    case TS_U_SQRT:
        return sqrt(a);
    case TS_U_RSQRT:
        return ts_rsqrt_d(a);
        TS_LIBM_UNARY(UNARY_LIBM_CASE, d)
        TS_SPECIAL_UNARY(UNARY_SPECIAL_CASE, d)
        TS_SPECIAL_PARAM_UNARY(UNARY_PARAM_CASE, d, double, 0)
    case TS_U_TANH:
        return tanh(a);
    case TS_U_SIGMOID:
        return ts_sigmoid_d(a);
    case TS_U_RELU:
        return ts_relu_d(a);
    case TS_U_GELU:
        return ts_gelu_d(a);
    case TS_U_SILU:
        return ts_silu_d(a);
    case TS_U_SOFTPLUS:
        return ts_softplus_d(a);
    case TS_U_SIGN:
        return ts_sign_d(a);
    case TS_U_FLOOR:
        return floor(a);
    case TS_U_CEIL:
        return ceil(a);
    case TS_U_ROUND:
        return ts_round_even_d(a);
    case TS_U_RECIPROCAL:
        return ts_reciprocal_d(a);
    case TS_U_SQUARE:
        return a * a;
    case TS_U_CLAMP:
        return ts_clamp_d(a, p.lo_d, p.hi_d);
    default:
        return a;
    }
}

/* Integers: float-only ops (off the contract: the front ends promote first) compute in double
 * and truncate, like the CPU, so the kernel stays total. */
TS_HD inline int64_t unary_ct(const tsc_unary_params &p, int64_t a) {
    switch (p.op) {
    case TS_U_NEG:
        return (int64_t)(0u - (uint64_t)a);
    case TS_U_ABS:
        return a < 0 ? (int64_t)(0u - (uint64_t)a) : a;
    case TS_U_SIGN:
        return (int64_t)((a > 0) - (a < 0));
    case TS_U_SQUARE:
        return (int64_t)((uint64_t)a * (uint64_t)a);
    case TS_U_RELU:
        return a < 0 ? 0 : a;
    case TS_U_FLOOR:
    case TS_U_CEIL:
    case TS_U_ROUND:
        return a;
    case TS_U_CLAMP:
        return ts_clamp_i64(a, p.lo_i, p.hi_i);
    default:
        return ts_d2i64(unary_ct(p, (double)a));
    }
}

/* clang-format on */
template <typename T> struct UnaryF {
    static constexpr int NOPS = 2;
    tsc_unary_params p;
    TSC_EMU_NOINLINE TS_HD T apply(T x) const { return tsc_st<T>(unary_ct(p, tsc_ld(x))); }
    template <int V> TS_HD void vec(const tsc_ptrs<2> &b, uint32_t i, unsigned bcast) const {
        tsc_vec<T, V> x = tsc_ldv<T, V>(b.p[1], i, bcast & 2u), o;
        TSC_UNROLL
        for (int k = 0; k < V; k++) o.v[k] = apply(x.v[k]);
        tsc_stv<T, V>(b.p[0], i, o);
    }
    TS_HD void one(char *const *p) const { *(T *)p[0] = apply(*(const T *)p[1]); }
};

/* logical_not writes bool whatever the input dtype */
template <typename T> struct NotF {
    static constexpr int NOPS = 2;
    TS_HD static tsc_b8 apply(T x) { return {(uint8_t)(tsc_ld(x) == 0)}; }
    template <int V> TS_HD void vec(const tsc_ptrs<2> &b, uint32_t i, unsigned bcast) const {
        tsc_vec<T, V> x = tsc_ldv<T, V>(b.p[1], i, bcast & 2u);
        tsc_vec<tsc_b8, V> o;
        TSC_UNROLL
        for (int k = 0; k < V; k++) o.v[k] = apply(x.v[k]);
        tsc_stv<tsc_b8, V>(b.p[0], i, o);
    }
    TS_HD void one(char *const *p) const { *(tsc_b8 *)p[0] = apply(*(const T *)p[1]); }
};

/* kern_unary.c's clamp_bound_i64: NaN is unbounded; out-of-range bounds saturate */
static int64_t clamp_bound_i64(double v, int64_t unbounded) {
    if (std::isnan(v)) return unbounded;
    if (v <= -9223372036854775808.0) return INT64_MIN;
    if (v >= 9223372036854775807.0) return INT64_MAX;
    return (int64_t)v;
}

void tsc_unary(const ts_backend *be, int index, ts_unary_op op, const ts_kview *out,
               const ts_kview *a, double p0, double p1) {
    if (a->dtype == TS_C64 || a->dtype == TS_C128) { /* abs: cuda_complex.cu */
        tsc_complex_unary(be, index, op, out, a);
        return;
    }
    if (!tsc_set_device(index)) return;
    const ts_kview *views[2] = {out, a};
    if (op == TS_U_LOGICAL_NOT) {
        TSC_DISPATCH(a->dtype, T, tsc_run("logical_not kernel", index, NotF<T>{}, views));
        return;
    }
    tsc_unary_params p;
    p.op = (int)op;
    p.p0 = p0;
    p.p1 = p1;
    p.lo_d = std::isnan(p0) ? -INFINITY : p0;
    p.hi_d = std::isnan(p1) ? INFINITY : p1;
    p.lo_f = (float)p.lo_d;
    p.hi_f = (float)p.hi_d;
    p.lo_i = clamp_bound_i64(p0, INT64_MIN);
    p.hi_i = clamp_bound_i64(p1, INT64_MAX);
    TSC_DISPATCH(a->dtype, T, tsc_run("unary kernel", index, UnaryF<T>{p}, views));
}
