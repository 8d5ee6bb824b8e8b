/* cuda_dtype.cuh — storage types per dtype and the conversions between them, for the CUDA
 * elementwise kernels. The rules are kern_copy.c's (CPU), built on kernel_math.h: each dtype loads
 * into float (f32, f16, bf16), double (f64) or int64 (integers, bool), and stores from any of the
 * three. */
#ifndef TS_CUDA_DTYPE_CUH
#define TS_CUDA_DTYPE_CUH

#include <cstdint>

#include "backend/cuda/cuda_internal.h"

/* "#pragma unroll" for loops in __host__ __device__ code: the host compiler does not know it. */
#ifdef __CUDA_ARCH__
#define TSC_UNROLL _Pragma("unroll")
#else
#define TSC_UNROLL
#endif

/* f16, bf16 and bool get types of their own so that overloads tell them apart from uint16/uint8. */
struct tsc_f16 {
    uint16_t bits;
};
struct tsc_bf16 {
    uint16_t bits;
};
struct tsc_b8 {
    uint8_t v;
};

/* ------------------------------------------------------------------ loads (compute type) */
TS_HD inline float tsc_ld(float x) { return x; }
TS_HD inline double tsc_ld(double x) { return x; }
TS_HD inline float tsc_ld(tsc_f16 x) { return ts_f16_to_f32(x.bits); }
TS_HD inline float tsc_ld(tsc_bf16 x) { return ts_bf16_to_f32(x.bits); }
TS_HD inline int64_t tsc_ld(int64_t x) { return x; }
TS_HD inline int64_t tsc_ld(int32_t x) { return x; }
TS_HD inline int64_t tsc_ld(uint8_t x) { return x; }
TS_HD inline int64_t tsc_ld(tsc_b8 x) { return x.v != 0; }
TS_HD inline int64_t tsc_ld(int8_t x) { return x; }
TS_HD inline int64_t tsc_ld(int16_t x) { return x; }
TS_HD inline int64_t tsc_ld(uint16_t x) { return x; }
TS_HD inline int64_t tsc_ld(uint32_t x) { return x; }
/* uint64 as its bits in int64: sums, products and casts to integers wrap alike; the CUDA kernels
 * order and divide values from 2^63 up as negative (the CPU's are exact); conversions to float and
 * double are exact (tsc_convert below) */
TS_HD inline int64_t tsc_ld(uint64_t x) { return (int64_t)x; }

/* The compute type of storage type T: float, double or int64_t (backend.h's rules). */
template <typename T> using tsc_ct = decltype(tsc_ld(T{}));

/* ------------------------------------------------------------------ stores */
template <typename D> struct tsc_to;
template <> struct tsc_to<float> {
    TS_HD static float from(float x) { return x; }
    TS_HD static float from(double x) { return (float)x; }
    TS_HD static float from(int64_t x) { return (float)x; }
};
template <> struct tsc_to<double> {
    TS_HD static double from(float x) { return (double)x; }
    TS_HD static double from(double x) { return x; }
    TS_HD static double from(int64_t x) { return (double)x; }
};
/* through float, as c10::Half and c10::BFloat16 are built */
template <> struct tsc_to<tsc_f16> {
    TS_HD static tsc_f16 from(float x) { return {ts_f32_to_f16(x)}; }
    TS_HD static tsc_f16 from(double x) { return {ts_f32_to_f16((float)x)}; }
    TS_HD static tsc_f16 from(int64_t x) { return {ts_f32_to_f16((float)x)}; }
};
template <> struct tsc_to<tsc_bf16> {
    TS_HD static tsc_bf16 from(float x) { return {ts_f32_to_bf16(x)}; }
    TS_HD static tsc_bf16 from(double x) { return {ts_f32_to_bf16((float)x)}; }
    TS_HD static tsc_bf16 from(int64_t x) { return {ts_f32_to_bf16((float)x)}; }
};
/* the integer dtypes: from float through kernel_math.h's conversion (x86's
 * answers out of range), from int64 by C's wrapping cast */
#define TSC_TO_INT(T, D2)                                                                          \
    template <> struct tsc_to<T> {                                                                 \
        TS_HD static T from(float x) { return D2((double)x); }                                     \
        TS_HD static T from(double x) { return D2(x); }                                            \
        TS_HD static T from(int64_t x) { return (T)x; }                                            \
    };
TSC_TO_INT(int64_t, ts_d2i64)
TSC_TO_INT(int32_t, ts_d2i32)
TSC_TO_INT(uint8_t, ts_d2u8)
TSC_TO_INT(int8_t, ts_d2i8)
TSC_TO_INT(int16_t, ts_d2i16)
TSC_TO_INT(uint16_t, ts_d2u16)
TSC_TO_INT(uint32_t, ts_d2u32)
TSC_TO_INT(uint64_t, ts_d2u64)
#undef TSC_TO_INT

template <> struct tsc_to<tsc_b8> {
    TS_HD static tsc_b8 from(float x) { return {(uint8_t)(x != 0)}; }
    TS_HD static tsc_b8 from(double x) { return {(uint8_t)(x != 0)}; }
    TS_HD static tsc_b8 from(int64_t x) { return {(uint8_t)(x != 0)}; }
};

template <typename D, typename C> TS_HD inline D tsc_st(C c) { return tsc_to<D>::from(c); }

/* Stores compute value c (float, double or int64_t) into an element of dtype dt chosen at run time,
 * with the conversions above: one definition for the strided casts and the compute kernels. */
template <typename C> TS_HD inline void tsc_store_as(char *o, ts_dtype dt, C c) {
    switch (dt) {
    case TS_F32:
        *(float *)o = tsc_st<float>(c);
        break;
    case TS_F64:
        *(double *)o = tsc_st<double>(c);
        break;
    case TS_F16:
        *(tsc_f16 *)o = tsc_st<tsc_f16>(c);
        break;
    case TS_BF16:
        *(tsc_bf16 *)o = tsc_st<tsc_bf16>(c);
        break;
    case TS_I64:
        *(int64_t *)o = tsc_st<int64_t>(c);
        break;
    case TS_I32:
        *(int32_t *)o = tsc_st<int32_t>(c);
        break;
    case TS_U8:
        *(uint8_t *)o = tsc_st<uint8_t>(c);
        break;
    case TS_I8:
        *(int8_t *)o = tsc_st<int8_t>(c);
        break;
    case TS_I16:
        *(int16_t *)o = tsc_st<int16_t>(c);
        break;
    case TS_U16:
        *(uint16_t *)o = tsc_st<uint16_t>(c);
        break;
    case TS_U32:
        *(uint32_t *)o = tsc_st<uint32_t>(c);
        break;
    case TS_U64:
        *(uint64_t *)o = tsc_st<uint64_t>(c);
        break;
    default:
        *(tsc_b8 *)o = tsc_st<tsc_b8>(c);
        break;
    }
}

/* dst = (dst dtype) src for any pair (kern_copy.c's CONVERT). */
template <typename D, typename S> TS_HD inline D tsc_convert(S x) { return tsc_st<D>(tsc_ld(x)); }
/* uint64 to float: the unsigned value, rounded once, as the CPU converts (tsc_ld's int64 bits
 * would make values from 2^63 up negative) */
template <> TS_HD inline float tsc_convert<float, uint64_t>(uint64_t x) { return (float)x; }
template <> TS_HD inline double tsc_convert<double, uint64_t>(uint64_t x) { return (double)x; }

/* ------------------------------------------------------------------ host dispatch */
inline size_t tsc_dtype_size(ts_dtype dt) {
    switch (dt) {
    case TS_C128: /* the complex binary kernels (cuda_complex.cu) */
        return 16;
    case TS_C64:
    case TS_F64:
    case TS_I64:
    case TS_U64:
        return 8;
    case TS_F32:
    case TS_I32:
    case TS_U32:
        return 4;
    case TS_F16:
    case TS_BF16:
    case TS_I16:
    case TS_U16:
        return 2;
    default:
        return 1;
    }
}

/* Runs BODY with T the storage type of dtype DT. */
#define TSC_DISPATCH(DT, T, ...)                                                                   \
    do {                                                                                           \
        switch (DT) {                                                                              \
        case TS_F32: {                                                                             \
            using T = float;                                                                       \
            __VA_ARGS__;                                                                           \
        } break;                                                                                   \
        case TS_F64: {                                                                             \
            using T = double;                                                                      \
            __VA_ARGS__;                                                                           \
        } break;                                                                                   \
        case TS_F16: {                                                                             \
            using T = tsc_f16;                                                                     \
            __VA_ARGS__;                                                                           \
        } break;                                                                                   \
        case TS_BF16: {                                                                            \
            using T = tsc_bf16;                                                                    \
            __VA_ARGS__;                                                                           \
        } break;                                                                                   \
        case TS_I64: {                                                                             \
            using T = int64_t;                                                                     \
            __VA_ARGS__;                                                                           \
        } break;                                                                                   \
        case TS_I32: {                                                                             \
            using T = int32_t;                                                                     \
            __VA_ARGS__;                                                                           \
        } break;                                                                                   \
        case TS_U8: {                                                                              \
            using T = uint8_t;                                                                     \
            __VA_ARGS__;                                                                           \
        } break;                                                                                   \
        case TS_I8: {                                                                              \
            using T = int8_t;                                                                      \
            __VA_ARGS__;                                                                           \
        } break;                                                                                   \
        case TS_I16: {                                                                             \
            using T = int16_t;                                                                     \
            __VA_ARGS__;                                                                           \
        } break;                                                                                   \
        case TS_U16: {                                                                             \
            using T = uint16_t;                                                                    \
            __VA_ARGS__;                                                                           \
        } break;                                                                                   \
        case TS_U32: {                                                                             \
            using T = uint32_t;                                                                    \
            __VA_ARGS__;                                                                           \
        } break;                                                                                   \
        case TS_U64: {                                                                             \
            using T = uint64_t;                                                                    \
            __VA_ARGS__;                                                                           \
        } break;                                                                                   \
        default: {                                                                                 \
            using T = tsc_b8;                                                                      \
            __VA_ARGS__;                                                                           \
        } break;                                                                                   \
        }                                                                                          \
    } while (0)

/* Runs BODY with U the unsigned integer type of DT's element size (bit copies). */
#define TSC_DISPATCH_BITS(DT, U, ...)                                                              \
    do {                                                                                           \
        switch (tsc_dtype_size(DT)) {                                                              \
        case 8: {                                                                                  \
            using U = uint64_t;                                                                    \
            __VA_ARGS__;                                                                           \
        } break;                                                                                   \
        case 4: {                                                                                  \
            using U = uint32_t;                                                                    \
            __VA_ARGS__;                                                                           \
        } break;                                                                                   \
        case 2: {                                                                                  \
            using U = uint16_t;                                                                    \
            __VA_ARGS__;                                                                           \
        } break;                                                                                   \
        default: {                                                                                 \
            using U = uint8_t;                                                                     \
            __VA_ARGS__;                                                                           \
        } break;                                                                                   \
        }                                                                                          \
    } while (0)

#endif /* TS_CUDA_DTYPE_CUH */
