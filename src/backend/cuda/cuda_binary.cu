/* cuda_binary.cu — elementwise tensor-tensor binary ops (broadcast by stride 0) and where. */
#include "backend/cuda/cuda_binary_ops.cuh"
#include "backend/cuda/cuda_elementwise.h"
#include "backend/cuda/cuda_iter.cuh"

/* out = a op b in a's dtype (arithmetic) */
template <typename T> struct BinaryF {
    static constexpr int NOPS = 3;
    int op;
    TS_HD T apply(T x, T y) const { return tsc_st<T>(tsc_bin_arith(op, tsc_ld(x), tsc_ld(y))); }
    template <int V> TS_HD void vec(const tsc_ptrs<3> &b, uint32_t i, unsigned bcast) const {
        tsc_vec<T, V> x = tsc_ldv<T, V>(b.p[1], i, bcast & 2u);
        tsc_vec<T, V> y = tsc_ldv<T, V>(b.p[2], i, bcast & 4u), o;
        TSC_UNROLL
        for (int k = 0; k < V; k++) o.v[k] = apply(x.v[k], y.v[k]);
        tsc_stv<T, V>(b.p[0], i, o);
    }
    TS_HD void one(char *const *p) const { *(T *)p[0] = apply(*(const T *)p[1], *(const T *)p[2]); }
};

/* out (bool) = a op b: comparisons and logical ops */
template <typename T> struct CompareF {
    static constexpr int NOPS = 3;
    int op;
    TS_HD tsc_b8 apply(T x, T y) const { return tsc_bin_cmp(op, tsc_ld(x), tsc_ld(y)); }
    template <int V> TS_HD void vec(const tsc_ptrs<3> &b, uint32_t i, unsigned bcast) const {
        tsc_vec<T, V> x = tsc_ldv<T, V>(b.p[1], i, bcast & 2u);
        tsc_vec<T, V> y = tsc_ldv<T, V>(b.p[2], i, bcast & 4u);
        tsc_vec<tsc_b8, V> o;
        TSC_UNROLL
        for (int k = 0; k < V; k++) o.v[k] = apply(x.v[k], y.v[k]);
        tsc_stv<tsc_b8, V>(b.p[0], i, o);
    }
    TS_HD void one(char *const *p) const {
        *(tsc_b8 *)p[0] = apply(*(const T *)p[1], *(const T *)p[2]);
    }
};

void tsc_binary(const ts_backend *be, int index, ts_binary_op op, const ts_kview *out,
                const ts_kview *a, const ts_kview *b) {
    if (a->dtype == TS_C64 || a->dtype == TS_C128) { /* cuda_complex.cu */
        tsc_complex_binary(be, index, op, out, a, b);
        return;
    }
    if (!tsc_set_device(index)) return;
    const ts_kview *views[3] = {out, a, b};
    if (tsc_binary_is_bool(op))
        TSC_DISPATCH(a->dtype, T, tsc_run("compare kernel", index, CompareF<T>{(int)op}, views));
    else
        TSC_DISPATCH(a->dtype, T, tsc_run("binary kernel", index, BinaryF<T>{(int)op}, views));
}

/* ------------------------------------------------------------------ where */
/* out = cond ? a : b, a bit select by element size (cond: any non-zero byte is true) */
template <typename U> struct WhereF {
    static constexpr int NOPS = 4;
    template <int V> TS_HD void vec(const tsc_ptrs<4> &b, uint32_t i, unsigned bcast) const {
        tsc_vec<uint8_t, V> c = tsc_ldv<uint8_t, V>(b.p[1], i, bcast & 2u);
        tsc_vec<U, V> x = tsc_ldv<U, V>(b.p[2], i, bcast & 4u);
        tsc_vec<U, V> y = tsc_ldv<U, V>(b.p[3], i, bcast & 8u), o;
        TSC_UNROLL
        for (int k = 0; k < V; k++) o.v[k] = c.v[k] ? x.v[k] : y.v[k];
        tsc_stv<U, V>(b.p[0], i, o);
    }
    TS_HD void one(char *const *p) const {
        *(U *)p[0] = *(const uint8_t *)p[1] ? *(const U *)p[2] : *(const U *)p[3];
    }
};

void tsc_where(const ts_backend *be, int index, const ts_kview *out, const ts_kview *cond,
               const ts_kview *a, const ts_kview *b) {
    if (!tsc_set_device(index)) return;
    const ts_kview *views[4] = {out, cond, a, b};
    TSC_DISPATCH_BITS(out->dtype, U, tsc_run("where kernel", index, WhereF<U>{}, views));
}
