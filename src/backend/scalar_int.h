/* scalar_int.h — a binary op's scalar in the tensor's integer dtype, the one definition for the
 * CPU (kern_binary.c) and CUDA (cuda_binary_scalar.cu) scalar kernels. */
#ifndef TS_SCALAR_INT_H
#define TS_SCALAR_INT_H

#include "backend/kernel_math.h"
#include "tessera.h"

/* PyTorch casts a wrapped scalar to the common dtype: through int64, wrapped to the dtype's width;
 * uint64 keeps the bits of its value (through int64 for a negative one). */
static inline int64_t ts_scalar_as_int(ts_dtype dt, double s) {
    int64_t v = ts_d2i64(s);
    switch (dt) {
    case TS_I32:
        return (int32_t)v;
    case TS_U8:
        return (uint8_t)v;
    case TS_I8:
        return (int8_t)v;
    case TS_I16:
        return (int16_t)v;
    case TS_U16:
        return (uint16_t)v;
    case TS_U32:
        return (uint32_t)v;
    case TS_U64:
        return (int64_t)ts_d2u64(s);
    case TS_BOOL:
        return s != 0;
    default:
        return v;
    }
}

#endif /* TS_SCALAR_INT_H */
