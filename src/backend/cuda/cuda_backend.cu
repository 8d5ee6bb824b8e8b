/* cuda_backend.cu — the "cuda" backend table: registered at start-up when the runtime reports at
 * least one device (memory from cuda_memory.cu, elementwise kernels, the compute kernels). */
#include "backend/cuda/cuda_bridge.h"
#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_elementwise.h"
#include "backend/cuda/cuda_memory.h"

static ts_backend g_cuda_backend;

extern "C" int tsc_backend_init(void) {
    int n = tsc_runtime_probe();
    if (n <= 0) return 0; /* not registered: cuda:N is "not available", with the reason */
    tsc_streams_init(n);
    g_cuda_backend.name = "cuda";
    g_cuda_backend.type = TS_CUDA;
    tsc_install_memory(&g_cuda_backend);
    tsc_install_elementwise(&g_cuda_backend);
    tsc_install_compute_kernels(&g_cuda_backend);
    tsc_install_graph(&g_cuda_backend);
    tsi_backend_register(&g_cuda_backend);
    return n;
}
