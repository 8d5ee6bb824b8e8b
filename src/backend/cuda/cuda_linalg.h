/* cuda_linalg.h — the CUDA backend's linalg slot (backend.h), through cuSOLVER: cuda_linalg.cu. */
#ifndef TS_CUDA_LINALG_H
#define TS_CUDA_LINALG_H

#include "backend/cuda/cuda_internal.h"

#ifdef __cplusplus
extern "C" {
#endif

bool tsc_linalg(const ts_backend *be, int index, const ts_linalg_args *a);

#ifdef __cplusplus
}
#endif

#endif /* TS_CUDA_LINALG_H */
