/* cuda_copy.cu — strided copy with a cast between any two dtypes, and fill (kern_copy.c's rules).
 */
#include <cstring>
#include <type_traits>

#include "backend/complex_view.h"
#include "backend/cuda/cuda_elementwise.h"
#include "backend/cuda/cuda_iter.cuh"

/* Same dtype: a bit copy by element size (bool bytes are copied as they are, like the CPU). */
template <typename U> struct CopyBitsF {
    static constexpr int NOPS = 2;
    template <int V> TS_HD void vec(const tsc_ptrs<2> &b, uint32_t i, unsigned bcast) const {
        tsc_stv<U, V>(b.p[0], i, tsc_ldv<U, V>(b.p[1], i, bcast & 2u));
    }
    TS_HD void one(char *const *p) const { *(U *)p[0] = *(const U *)p[1]; }
};

/* Dense casts, one kernel per dtype pair: the conversions autocast leans on stay vectorised. */
template <typename D, typename S> struct CopyCastF {
    static constexpr int NOPS = 2;
    template <int V> TS_HD void vec(const tsc_ptrs<2> &b, uint32_t i, unsigned bcast) const {
        tsc_vec<S, V> x = tsc_ldv<S, V>(b.p[1], i, bcast & 2u);
        tsc_vec<D, V> o;
        TSC_UNROLL
        for (int k = 0; k < V; k++) o.v[k] = tsc_convert<D>(x.v[k]);
        tsc_stv<D, V>(b.p[0], i, o);
    }
    TS_HD void one(char *const *p) const { *(D *)p[0] = tsc_convert<D>(*(const S *)p[1]); }
};

/* clang-format off */
/* Strided casts: the dtypes are looked at per element (one kernel for all 56 pairs). */
struct CopyAnyF {
    static constexpr int NOPS = 2;
    ts_dtype dst, src;
    template <typename C> TS_HD void store(char *o, C c) const { tsc_store_as(o, dst, c); }
    TS_HD void one(char *const *p) const {
        const char *x = p[1];
        switch (src) {
        case TS_F32:
            store(p[0], tsc_ld(*(const float *)x));
            break;
        case TS_F64:
            store(p[0], tsc_ld(*(const double *)x));
            break;
        case TS_F16:
            store(p[0], tsc_ld(*(const tsc_f16 *)x));
            break;
        case TS_BF16:
            store(p[0], tsc_ld(*(const tsc_bf16 *)x));
            break;
        case TS_I64:
            store(p[0], tsc_ld(*(const int64_t *)x));
            break;
        case TS_I32:
            store(p[0], tsc_ld(*(const int32_t *)x));
            break;
        case TS_U8:
            store(p[0], tsc_ld(*(const uint8_t *)x));
            break;
        case TS_I8:
            store(p[0], tsc_ld(*(const int8_t *)x));
            break;
        case TS_I16:
            store(p[0], tsc_ld(*(const int16_t *)x));
            break;
        case TS_U16:
            store(p[0], tsc_ld(*(const uint16_t *)x));
            break;
        case TS_U32:
            store(p[0], tsc_ld(*(const uint32_t *)x));
            break;
        case TS_U64:
            store(p[0], tsc_ld(*(const uint64_t *)x));
            break;
        default:
            store(p[0], tsc_ld(*(const tsc_b8 *)x));
            break;
        }
    }
};

/* clang-format on */
template <typename D>
static void launch_cast(int index, ts_dtype src, const tsc_iter *it, unsigned bcast) {
    TSC_DISPATCH(src, S, {
        if constexpr (!std::is_same<D, S>::value)
            tsc_launch_linear(index, CopyCastF<D, S>{}, it, bcast);
    });
}

void tsc_copy(const ts_backend *be, int index, const ts_kview *dst, const ts_kview *src) {
    if (tsi_kview_complex(dst) || tsi_kview_complex(src)) {
        tsi_copy_complex(be, index, dst, src); /* as two float copies: no complex kernels */
        return;
    }
    if (!tsc_set_device(index)) return;
    const ts_kview *views[2] = {dst, src};
    tsc_iter it;
    tsc_iter_init(&it, 2, views, false);
    if (it.numel <= 0) return;
    unsigned bcast;
    bool linear = tsc_use_linear(&it, &bcast);
    if (dst->dtype == src->dtype) {
        if (linear && !bcast) {
            size_t n = (size_t)it.numel * (size_t)it.esz[0];
            tsc_check(tsc_memcpy_async(it.data[0], it.data[1], n, tsc_stream(index)),
                      "copy on cuda", index);
            return;
        }
        TSC_DISPATCH_BITS(dst->dtype, U, {
            if (linear)
                tsc_launch_linear(index, CopyBitsF<U>{}, &it, bcast);
            else
                tsc_launch_strided(index, CopyBitsF<U>{}, &it);
        });
    } else if (linear) {
        TSC_DISPATCH(dst->dtype, D, launch_cast<D>(index, src->dtype, &it, bcast));
    } else {
        tsc_launch_strided(index, CopyAnyF{dst->dtype, src->dtype}, &it);
    }
    tsc_launch_check("copy kernel", index);
}

/* ------------------------------------------------------------------ fill */
template <typename U> struct FillF {
    static constexpr int NOPS = 1;
    U value;
    template <int V> TS_HD void vec(const tsc_ptrs<1> &b, uint32_t i, unsigned bcast) const {
        tsc_vec<U, V> o;
        TSC_UNROLL
        for (int k = 0; k < V; k++) o.v[k] = value;
        tsc_stv<U, V>(b.p[0], i, o);
    }
    TS_HD void one(char *const *p) const { *(U *)p[0] = value; }
};

void tsc_fill(const ts_backend *be, int index, const ts_kview *dst, double value) {
    if (tsi_kview_complex(dst)) {
        tsi_fill_complex(be, index, dst, value);
        return;
    }
    if (!tsc_set_device(index)) return;
    /* the value in dst's dtype, as the CPU converts it (kern_copy.c's TO_<dtype>_D) */
    unsigned char bits[8] = {0};
    size_t es = tsc_dtype_size(dst->dtype);
    TSC_DISPATCH(dst->dtype, T, {
        T v = tsc_st<T>(value);
        memcpy(bits, &v, sizeof v);
    });
    const ts_kview *views[1] = {dst};
    tsc_iter it;
    tsc_iter_init(&it, 1, views, false);
    if (it.numel <= 0) return;
    unsigned bcast;
    bool same_bytes = true;
    for (size_t k = 1; k < es; k++) same_bytes &= bits[k] == bits[0];
    if (same_bytes && tsc_use_linear(&it, &bcast)) { /* zeros, bytes, all-ones patterns */
        tsc_check(tsc_memset_async(it.data[0], bits[0], (size_t)it.numel * es, tsc_stream(index)),
                  "fill on cuda", index);
        return;
    }
    TSC_DISPATCH_BITS(dst->dtype, U, {
        FillF<U> f;
        memcpy(&f.value, bits, sizeof f.value);
        tsc_run("fill kernel", index, f, views);
    });
}
