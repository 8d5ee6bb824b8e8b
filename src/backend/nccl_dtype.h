/* nccl_dtype.h — Tessera's dtypes as NCCL's: the one map for tessera.distributed's collectives
 * (dist/nccl.c) and data parallel's (backend/cuda/cuda_nccl.cu). Plain C and C++; include it after
 * <nccl.h>. bool travels as uint8: a reduction of bools must pick a logical NCCL op itself (sum
 * and max as ncclMax, product and min as ncclMin, as PyTorch does). */
#ifndef TS_NCCL_DTYPE_H
#define TS_NCCL_DTYPE_H

#include <stdbool.h>

#include "tessera.h"

/* false for a dtype NCCL cannot carry (complex, and bfloat16 before NCCL 2.10) */
static inline bool tsi_nccl_dtype(ts_dtype dt, ncclDataType_t *out) {
    switch (dt) {
    case TS_F32:
        *out = ncclFloat32;
        return true;
    case TS_F64:
        *out = ncclFloat64;
        return true;
    case TS_F16:
        *out = ncclFloat16;
        return true;
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 10, 0)
    case TS_BF16:
        *out = ncclBfloat16;
        return true;
#endif
    case TS_I64:
        *out = ncclInt64;
        return true;
    case TS_I32:
        *out = ncclInt32;
        return true;
    case TS_I8:
        *out = ncclInt8;
        return true;
    case TS_U32:
        *out = ncclUint32;
        return true;
    case TS_U64:
        *out = ncclUint64;
        return true;
    case TS_U8:
    case TS_BOOL:
        *out = ncclUint8;
        return true;
    default:
        return false;
    }
}

#endif /* TS_NCCL_DTYPE_H */
