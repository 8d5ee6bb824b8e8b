/* cuda_ternary.cu — pointwise ops of three operands (backend.h's ternary: addcmul, addcdiv, lerp)
 * with kernel_math.h's ts_ternary_f / _d; f16 and bf16 compute in float. */
#include "backend/cuda/cuda_elementwise.h"
#include "backend/cuda/cuda_iter.cuh"
#include "backend/kernel_math.h"

TS_HD inline float tsc_ternary(int op, float a, float b, float c, float p) {
    return ts_ternary_f(op, a, b, c, p);
}
TS_HD inline double tsc_ternary(int op, double a, double b, double c, double p) {
    return ts_ternary_d(op, a, b, c, p);
}

/* out = op(a, b, c) in the dtype's compute type (float for f16 / bf16); C the compute type */
template <typename T, typename C> struct TernaryF {
    static constexpr int NOPS = 4;
    int op;
    C pv;
    TS_HD T apply(T x, T y, T z) const {
        return tsc_st<T>(tsc_ternary(op, (C)tsc_ld(x), (C)tsc_ld(y), (C)tsc_ld(z), pv));
    }
    template <int V> TS_HD void vec(const tsc_ptrs<4> &b, uint32_t i, unsigned bcast) const {
        tsc_vec<T, V> x = tsc_ldv<T, V>(b.p[1], i, bcast & 2u);
        tsc_vec<T, V> y = tsc_ldv<T, V>(b.p[2], i, bcast & 4u);
        tsc_vec<T, V> z = tsc_ldv<T, V>(b.p[3], i, bcast & 8u), o;
        TSC_UNROLL
        for (int k = 0; k < V; k++) o.v[k] = apply(x.v[k], y.v[k], z.v[k]);
        tsc_stv<T, V>(b.p[0], i, o);
    }
    TS_HD void one(char *const *p) const {
        *(T *)p[0] = apply(*(const T *)p[1], *(const T *)p[2], *(const T *)p[3]);
    }
};

void tsc_ternary(const ts_backend *be, int index, ts_ternary_op op, const ts_kview *out,
                 const ts_kview *a, const ts_kview *b, const ts_kview *c, double pv) {
    (void)be;
    if (!tsc_set_device(index)) return;
    /* lerp with a scalar weight reads no c: b in its place */
    const ts_kview *views[4] = {out, a, b, op == TS_T_LERP_SCALAR ? b : c};
    const float pf = (float)pv;
    switch (out->dtype) {
    case TS_F32:
        tsc_run("ternary kernel", index, TernaryF<float, float>{(int)op, pf}, views);
        break;
    case TS_F64:
        tsc_run("ternary kernel", index, TernaryF<double, double>{(int)op, pv}, views);
        break;
    case TS_F16:
        tsc_run("ternary kernel", index, TernaryF<tsc_f16, float>{(int)op, pf}, views);
        break;
    case TS_BF16:
        tsc_run("ternary kernel", index, TernaryF<tsc_bf16, float>{(int)op, pf}, views);
        break;
    default:
        break; /* float dtypes only (backend.h) */
    }
}
