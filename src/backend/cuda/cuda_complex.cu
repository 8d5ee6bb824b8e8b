/* cuda_complex.cu — complex64 / complex128 add, sub, mul and div (the binary slot on a complex
 * dtype, reached from tsc_binary) and abs (the unary slot on one, from tsc_unary), with
 * kernel_math_complex.h's formulas, which the CPU shares. */
#include "backend/cuda/cuda_elementwise.h"
#include "backend/cuda/cuda_iter.cuh"
#include "backend/kernel_math_complex.h"

/* one element: the parts of a complex64 / complex128 (8- / 16-byte aligned, as stored) */
template <typename R> struct alignas(2 * sizeof(R)) tsc_cx { R r, i; };

TS_HD inline void tsc_cx_op(int op, float a, float b, float c, float d, float *yr, float *yi) {
    switch (op) {
    case TS_B_ADD:
        ts_cadd_f32(a, b, c, d, yr, yi);
        break;
    case TS_B_SUB:
        ts_csub_f32(a, b, c, d, yr, yi);
        break;
    case TS_B_MUL:
        ts_cmul_f32(a, b, c, d, yr, yi);
        break;
    case TS_B_DIV:
        ts_cdiv_f32(a, b, c, d, yr, yi);
        break;
    default:
        *yr = *yi = NAN;
        break; /* the front end sends only these: never a number */
    }
}
TS_HD inline void tsc_cx_op(int op, double a, double b, double c, double d, double *yr,
                            double *yi) {
    switch (op) {
    case TS_B_ADD:
        ts_cadd_f64(a, b, c, d, yr, yi);
        break;
    case TS_B_SUB:
        ts_csub_f64(a, b, c, d, yr, yi);
        break;
    case TS_B_MUL:
        ts_cmul_f64(a, b, c, d, yr, yi);
        break;
    case TS_B_DIV:
        ts_cdiv_f64(a, b, c, d, yr, yi);
        break;
    default:
        *yr = *yi = NAN;
        break;
    }
}

template <typename R> struct ComplexBinaryF {
    using T = tsc_cx<R>;
    static constexpr int NOPS = 3;
    int op;
    TS_HD T apply(T x, T y) const {
        T o;
        tsc_cx_op(op, x.r, x.i, y.r, y.i, &o.r, &o.i);
        return o;
    }
    template <int V> TS_HD void vec(const tsc_ptrs<3> &b, uint32_t i, unsigned bcast) const {
        tsc_vec<T, V> x = tsc_ldv<T, V>(b.p[1], i, bcast & 2u);
        tsc_vec<T, V> y = tsc_ldv<T, V>(b.p[2], i, bcast & 4u), o;
        TSC_UNROLL
        for (int k = 0; k < V; k++) o.v[k] = apply(x.v[k], y.v[k]);
        tsc_stv<T, V>(b.p[0], i, o);
    }
    TS_HD void one(char *const *p) const { *(T *)p[0] = apply(*(const T *)p[1], *(const T *)p[2]); }
};

void tsc_complex_binary(const ts_backend *be, int index, ts_binary_op op, const ts_kview *out,
                        const ts_kview *a, const ts_kview *b) {
    (void)be;
    if (!tsc_set_device(index)) return;
    const ts_kview *views[3] = {out, a, b};
    if (a->dtype == TS_C64)
        tsc_run("complex binary kernel", index, ComplexBinaryF<float>{(int)op}, views);
    else
        tsc_run("complex binary kernel", index, ComplexBinaryF<double>{(int)op}, views);
}

/* abs: the real part's dtype out, ts_cabs_f32 / f64 (PyTorch's hypot); any other op NaN (the front
 * end sends only abs: never a number) */
template <typename R> struct ComplexAbsF {
    using T = tsc_cx<R>;
    static constexpr int NOPS = 2;
    int op;
    TS_HD R apply(T x) const;
    template <int V> TS_HD void vec(const tsc_ptrs<2> &b, uint32_t i, unsigned bcast) const {
        tsc_vec<T, V> x = tsc_ldv<T, V>(b.p[1], i, bcast & 2u);
        tsc_vec<R, V> o;
        TSC_UNROLL
        for (int k = 0; k < V; k++) o.v[k] = apply(x.v[k]);
        tsc_stv<R, V>(b.p[0], i, o);
    }
    TS_HD void one(char *const *p) const { *(R *)p[0] = apply(*(const T *)p[1]); }
};
template <> TS_HD inline float ComplexAbsF<float>::apply(tsc_cx<float> x) const {
    return op == TS_U_ABS ? ts_cabs_f32(x.r, x.i) : NAN;
}
template <> TS_HD inline double ComplexAbsF<double>::apply(tsc_cx<double> x) const {
    return op == TS_U_ABS ? ts_cabs_f64(x.r, x.i) : NAN;
}

void tsc_complex_unary(const ts_backend *be, int index, ts_unary_op op, const ts_kview *out,
                       const ts_kview *a) {
    (void)be;
    if (!tsc_set_device(index)) return;
    const ts_kview *views[2] = {out, a};
    if (a->dtype == TS_C64)
        tsc_run("complex abs kernel", index, ComplexAbsF<float>{(int)op}, views);
    else
        tsc_run("complex abs kernel", index, ComplexAbsF<double>{(int)op}, views);
}
