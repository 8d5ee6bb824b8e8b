/* cuda_binary_scalar.cu — elementwise tensor-scalar binary ops (out = a op s), with the CPU's
 * treatment of the scalar: kept in float for f32/f16/bf16 (PyTorch's opmath), rounded to the
 * tensor's dtype for comparisons, cast to the tensor's integer dtype for integers; pow by 0.5, 2,
 * 3, -0.5, -1 and -2 take PyTorch's shortcuts. */
#include <type_traits>

#include "backend/cuda/cuda_binary_ops.cuh"
#include "backend/cuda/cuda_elementwise.h"
#include "backend/cuda/cuda_iter.cuh"
#include "backend/scalar_int.h"

enum { POW_GENERIC, POW_SQRT, POW_SQUARE, POW_CUBE, POW_RSQRT, POW_RECIP, POW_RECIP_SQUARE };

struct tsc_scalar_params {
    int op, pow_kind;
    double sd;    /* f64 */
    float sf;     /* f32, f16, bf16 */
    float sf_cmp; /* comparisons on f32, f16, bf16: the scalar rounded to the tensor's dtype */
    int64_t si;   /* integers and bool */
};

/* clang-format off */
TS_HD inline float scalar_pow(int kind, float a, float b) {
    switch (kind) {
    case POW_SQRT:
        return sqrtf(a);
    case POW_SQUARE:
        return a * a;
    case POW_CUBE:
        return a * a * a;
    case POW_RSQRT:
        return ts_rsqrt_f(a);
    case POW_RECIP:
        return 1.0f / a;
    case POW_RECIP_SQUARE:
        return 1.0f / (a * a);
    default:
        return powf(a, b);
    }
}

TS_HD inline double scalar_pow(int kind, double a, double b) {
    switch (kind) {
    case POW_SQRT:
        return sqrt(a);
    case POW_SQUARE:
        return a * a;
    case POW_CUBE:
        return a * a * a;
    case POW_RSQRT:
        return ts_rsqrt_d(a);
    case POW_RECIP:
        return 1.0 / a;
    case POW_RECIP_SQUARE:
        return 1.0 / (a * a);
    default:
        return pow(a, b);
    }
}

/* clang-format on */
template <typename T> struct ScalarF {
    static constexpr int NOPS = 2;
    tsc_scalar_params p;
    TS_HD T apply(T x) const {
        using C = tsc_ct<T>;
        C a = tsc_ld(x);
        if constexpr (std::is_same<C, int64_t>::value) {
            return tsc_st<T>(tsc_bin_arith(p.op, a, p.si));
        } else {
            C b = std::is_same<C, double>::value ? (C)p.sd : (C)p.sf;
            if (p.op == TS_B_POW) return tsc_st<T>(scalar_pow(p.pow_kind, a, b));
            return tsc_st<T>(tsc_bin_arith(p.op, a, b));
        }
    }
    template <int V> TS_HD void vec(const tsc_ptrs<2> &b, uint32_t i, unsigned bcast) const {
        tsc_vec<T, V> x = tsc_ldv<T, V>(b.p[1], i, bcast & 2u), o;
        TSC_UNROLL
        for (int k = 0; k < V; k++) o.v[k] = apply(x.v[k]);
        tsc_stv<T, V>(b.p[0], i, o);
    }
    TS_HD void one(char *const *p) const { *(T *)p[0] = apply(*(const T *)p[1]); }
};

template <typename T> struct ScalarCompareF {
    static constexpr int NOPS = 2;
    tsc_scalar_params p;
    TS_HD tsc_b8 apply(T x) const {
        using C = tsc_ct<T>;
        C b = std::is_same<C, int64_t>::value  ? (C)p.si
              : std::is_same<C, double>::value ? (C)p.sd
                                               : (C)p.sf_cmp;
        return tsc_bin_cmp(p.op, tsc_ld(x), b);
    }
    template <int V> TS_HD void vec(const tsc_ptrs<2> &b, uint32_t i, unsigned bcast) const {
        tsc_vec<T, V> x = tsc_ldv<T, V>(b.p[1], i, bcast & 2u);
        tsc_vec<tsc_b8, V> o;
        TSC_UNROLL
        for (int k = 0; k < V; k++) o.v[k] = apply(x.v[k]);
        tsc_stv<tsc_b8, V>(b.p[0], i, o);
    }
    TS_HD void one(char *const *p) const { *(tsc_b8 *)p[0] = apply(*(const T *)p[1]); }
};

void tsc_binary_scalar(const ts_backend *be, int index, ts_binary_op op, const ts_kview *out,
                       const ts_kview *a, double s) {
    if (!tsc_set_device(index)) return;
    tsc_scalar_params p = {(int)op, POW_GENERIC, s, (float)s, (float)s, 0};
    if (a->dtype == TS_F16) p.sf_cmp = ts_f16_to_f32(ts_f32_to_f16((float)s));
    if (a->dtype == TS_BF16) p.sf_cmp = ts_bf16_to_f32(ts_f32_to_bf16((float)s));
    p.si = ts_scalar_as_int(a->dtype, s);
    if (op == TS_B_POW)
        p.pow_kind = s == 0.5    ? POW_SQRT
                     : s == 2.0  ? POW_SQUARE
                     : s == 3.0  ? POW_CUBE
                     : s == -0.5 ? POW_RSQRT
                     : s == -1.0 ? POW_RECIP
                     : s == -2.0 ? POW_RECIP_SQUARE
                                 : POW_GENERIC;
    const ts_kview *views[2] = {out, a};
    if (tsc_binary_is_bool(op))
        TSC_DISPATCH(a->dtype, T,
                     tsc_run("scalar compare kernel", index, ScalarCompareF<T>{p}, views));
    else
        TSC_DISPATCH(a->dtype, T, tsc_run("scalar binary kernel", index, ScalarF<T>{p}, views));
}
