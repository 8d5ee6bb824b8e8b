/* cuda_emulation_quant.cu — the CUDA backend's quantization kernels (cuda_quant.cu: quantize /
 * dequantize / int_repr / fake quantize, the int8 linear layer's sums, dp4a GEMM and epilogue, the
 * weight-only int8 / int4 layer) compiled for the host as cuda_emulation.cu compiles the
 * elementwise kernels: every launch a loop over its thread indices (TSC_HOST_EMULATION in
 * cuda_iter.cuh), over a grid of at most 3 blocks so that the grid-stride loops go round.
 * tests/test_cuda_quant_emulated.c compares these slots with the CPU's bit for bit, so the
 * kernels' formulas, rounding, parameter indexing and nibble packing are checked in CI without a
 * GPU. Under emulation every int8 linear shape takes the dp4a kernel (cuBLASLt cannot run on the
 * host): the cuBLASLt path, the device's own rounding intrinsics and real concurrency are checked
 * only on a GPU (tests/test_cuda_quant.c). A file and a namespace of its own (not
 * cuda_emulation.cu's): cuda_quant.cu's file-local names would clash with the elementwise files'.
 */
#include <stdlib.h>
#include <string.h>

/* every header the kernels' file includes, first: inside the namespace below they must be no-ops */
#include <math.h>
#include <pthread.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "backend/cuda/cuda_compute.h"
#include "backend/cuda/cuda_compute_blas.h"
#include "backend/cuda/cuda_dtype.cuh"
#include "backend/env_config.h"
#include "backend/quant_math.h"

#define TSC_HOST_EMULATION 1

namespace tsc_emu_quant {

int tsc_emulation_mode; /* cuda_iter.cuh's; the quant kernels do not read it */

static bool tsc_set_device(int) { return true; }
static cudaStream_t tsc_stream(int) { return nullptr; }
static bool tsc_launch_check(const char *, int) { return true; }
/* scratch and the parameter tables are host memory here (the tables freed with scratch_free) */
static void *tsc_scratch_alloc(int, size_t n) { return malloc(n ? n : 1); }
static void tsc_scratch_free(int, void *p) { free(p); }
static void *tsc_table_alloc(int, size_t n) { return malloc(n ? n : 1); }
static bool tsc_copy_table_h2d(int, void *d, const void *s, size_t n, const char *) {
    memcpy(d, s, n);
    return true;
}
/* few blocks, so the grid-stride loops go round several times */
static unsigned tsc_grid_size(int, int64_t items, unsigned threads) {
    int64_t need = (items + threads - 1) / threads;
    return (unsigned)(need < 1 ? 1 : need > 3 ? 3 : need);
}

#include "../../src/backend/cuda/cuda_quant.cu"

} // namespace tsc_emu_quant

/* The cpu backend with the emulated quant, qlinear and wo_linear slots and nothing else of the
 * CUDA backend's (memory: host memory). */
extern "C" const ts_backend *bc_cuda_emulation_quant(void) {
    static ts_backend be;
    const ts_backend *cpu = tsi_backend_for(TS_CPU);
    if (!cpu) return nullptr;
    be = *cpu;
    be.name = "cuda quantization (host emulation)";
    be.quant = tsc_emu_quant::tsc_quant;
    be.qlinear = tsc_emu_quant::tsc_qlinear;
    be.wo_linear = tsc_emu_quant::tsc_wo_linear;
    return &be;
}
