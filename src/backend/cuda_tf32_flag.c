/* cuda_tf32_flag.c — the TF32 switch of the CUDA compute kernels (tessera/cuda.h). Plain C outside
 * the cuda folder, so builds without CUDA have it too. */
#include <stdatomic.h>

#include "tessera.h"

static atomic_bool allow_tf32; /* false: float32 matmuls and convolutions stay in full float32 */

void ts_cuda_set_allow_tf32(bool allow) {
    atomic_store_explicit(&allow_tf32, allow, memory_order_relaxed);
}

bool ts_cuda_allow_tf32(void) { return atomic_load_explicit(&allow_tf32, memory_order_relaxed); }
