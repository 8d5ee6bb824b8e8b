/* cuda_emulation.cu — the CUDA backend's elementwise kernels (copy, fill, unary, binary,
 * binary_scalar, where, random) and its reductions compiled for the host: every elementwise launch
 * runs as a loop over its thread indices (TSC_HOST_EMULATION in cuda_iter.cuh), every reduction as
 * host loops folding the same lanes and combining them in its shuffle trees' order
 * (cuda_reduce.cu). The conformance test runs the elementwise "backend" against the CPU bit for
 * bit, so the kernels' logic — op tables, conversions, broadcasting, strides, the vector and
 * grid-stride loops, chunked launches, 32/64-bit offsets, the Philox mapping — is checked in CI on
 * machines without a GPU; and the reductions within PyTorch's tolerances (the summation order is
 * the GPU's, not the CPU's), which checks their accumulation rule (double, as the CPU) on inputs
 * that overflow float and their plans on the large shapes. Only device math (expf on the GPU
 * rather than glibc's) and real concurrency remain for a GPU run. */
#include <stdlib.h>
#include <string.h>

/* every header the kernels' files include, first: inside the namespace below they must be no-ops */
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "backend/cuda/cuda_compute.h"
#include "backend/cuda/cuda_dtype.cuh"
#include "backend/cuda/cuda_elementwise.h"
#include "backend/philox.h"

#define TSC_HOST_EMULATION 1

/* The kernels' files, in a namespace of their own so that they neither clash with the real CUDA
 * backend in the library nor call its runtime: the helpers below stand in for the runtime's.
 * (tsc_check stays the library's: it is only ever given cudaSuccess here.) */
namespace tsc_emu {

int tsc_emulation_mode;

static bool tsc_set_device(int) { return true; }
static cudaStream_t tsc_stream(int) { return nullptr; }
static bool tsc_launch_check(const char *, int) { return true; }
/* scratch memory (a reduction's partial states) is host memory here */
static void *tsc_scratch_alloc(int, size_t n) { return malloc(n ? n : 1); }
static void tsc_scratch_free(int, void *p) { free(p); }
/* few blocks, so the grid-stride loops go round several times */
static unsigned tsc_grid_size(int, int64_t items, unsigned threads) {
    int64_t need = (items + threads - 1) / threads;
    return (unsigned)(need < 1 ? 1 : need > 3 ? 3 : need);
}

#include "../../src/backend/cuda/cuda_binary.cu"
#include "../../src/backend/cuda/cuda_binary_scalar.cu"
#include "../../src/backend/cuda/cuda_copy.cu"
#include "../../src/backend/cuda/cuda_random.cu"
#include "../../src/backend/cuda/cuda_reduce.cu"
#include "../../src/backend/cuda/cuda_scan.cu"
#include "../../src/backend/cuda/cuda_ternary.cu"
#include "../../src/backend/cuda/cuda_unary.cu"

} // namespace tsc_emu

/* The cpu backend's memory with the emulated elementwise kernels, and no compute kernels (the
 * conformance test skips those). mode: bit 0 no vector accesses, bit 1 no linear kernel, bit 2
 * 64-bit strided offsets. */
extern "C" const ts_backend *bc_cuda_emulation(int mode) {
    static ts_backend be;
    const ts_backend *cpu = tsi_backend_for(TS_CPU);
    if (!cpu) return nullptr;
    be = *cpu; /* memory: host memory */
    be.name = "cuda (host emulation)";
    /* the compute kernels are another file's: here they would only be the cpu's again */
    be.reduce = nullptr;
    be.scan = nullptr;
    be.matmul = nullptr;
    be.index_select = nullptr;
    be.gather = nullptr;
    be.scatter_add = nullptr;
    be.softmax = nullptr;
    be.conv2d = nullptr;
    be.conv2d_backward_data = nullptr;
    be.conv2d_backward_weight = nullptr;
    be.pool2d = nullptr;
    be.pool2d_backward = nullptr;
    be.optim_step = nullptr;
    be.amp_unscale = nullptr;
    be.amp_update_scale = nullptr;
    be.copy = tsc_emu::tsc_copy;
    be.fill = tsc_emu::tsc_fill;
    be.unary = tsc_emu::tsc_unary;
    be.binary = tsc_emu::tsc_binary;
    be.binary_scalar = tsc_emu::tsc_binary_scalar;
    be.where = tsc_emu::tsc_where;
    be.ternary = tsc_emu::tsc_ternary;
    be.random = tsc_emu::tsc_random;
    tsc_emu::tsc_emulation_mode = mode;
    return &be;
}

/* The cpu backend with the emulated reductions and nothing else of the CUDA backend's. */
extern "C" const ts_backend *bc_cuda_emulation_reduce(void) {
    static ts_backend be;
    const ts_backend *cpu = tsi_backend_for(TS_CPU);
    if (!cpu) return nullptr;
    be = *cpu;
    be.name = "cuda reductions (host emulation)";
    be.reduce = tsc_emu::tsc_reduce;
    be.scan = tsc_emu::tsc_scan;
    return &be;
}
