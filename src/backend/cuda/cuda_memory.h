/* cuda_memory.h — installs the raw-memory entries (cuda_memory.cu) into the backend table. */
#ifndef TS_CUDA_MEMORY_H
#define TS_CUDA_MEMORY_H

#include "backend/cuda/cuda_internal.h"

/* device_count, memory_info, raw_alloc/raw_free (cudaMalloc/cudaFree), the copies (peer copies
 * between devices), memset_zero and synchronize. */
void tsc_install_memory(ts_backend *be);

#endif /* TS_CUDA_MEMORY_H */
