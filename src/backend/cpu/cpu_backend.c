/* cpu_backend.c — the "cpu" backend: 64-byte aligned host memory and the CPU kernel table. */
#define _POSIX_C_SOURCE 200809L
#include "backend/cpu/cpu_backend.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/cpu/cpu_kernels.h"
#include "backend/cpu/omp_wait.h"

#define CPU_ALIGN ((size_t)64) /* a cache line, and enough for any SIMD load the kernels use */

static int cpu_device_count(const ts_backend *be) { return 1; }

static void cpu_memory_info(const ts_backend *be, int index, size_t *free_bytes,
                            size_t *total_bytes) {
    long page = sysconf(_SC_PAGESIZE);
    long total = sysconf(_SC_PHYS_PAGES);
    long avail = sysconf(_SC_AVPHYS_PAGES);
    if (page < 0) page = 0;
    if (total_bytes) *total_bytes = total > 0 ? (size_t)total * (size_t)page : 0;
    if (free_bytes) *free_bytes = avail > 0 ? (size_t)avail * (size_t)page : 0;
}

static void *cpu_raw_alloc(const ts_backend *be, int index, size_t nbytes) {
    if (nbytes > SIZE_MAX - CPU_ALIGN) return NULL;
    /* C11 wants the size to be a multiple of the alignment */
    size_t n = nbytes ? (nbytes + CPU_ALIGN - 1) & ~(CPU_ALIGN - 1) : CPU_ALIGN;
    return aligned_alloc(CPU_ALIGN, n);
}

static void cpu_raw_free(const ts_backend *be, int index, void *p, size_t nbytes) { free(p); }

static void cpu_copy_bytes(const ts_backend *be, int index, void *dst, const void *src, size_t n) {
    if (n) memcpy(dst, src, n);
}

static void cpu_copy_d2d(const ts_backend *be, int dst_index, void *dst, int src_index,
                         const void *src, size_t n) {
    if (n) memmove(dst, src, n); /* views of one storage may overlap */
}

static void cpu_memset_zero(const ts_backend *be, int index, void *p, size_t n) {
    if (n) memset(p, 0, n);
}

static void cpu_synchronize(const ts_backend *be, int index) {}

void ts_cpu_kernels_install(ts_backend *be) {
    be->copy = ts_cpu_copy;
    be->fill = ts_cpu_fill;
    be->unary = ts_cpu_unary;
    be->binary = ts_cpu_binary;
    be->binary_widening = ts_cpu_binary_widening;
    be->binary_scalar = ts_cpu_binary_scalar;
    be->where = ts_cpu_where;
    be->reduce = ts_cpu_reduce;
    be->scan = ts_cpu_scan;
    be->matmul = ts_cpu_matmul;
    be->matmul_bias = ts_cpu_matmul_bias;
    be->index_select = ts_cpu_index_select;
    be->gather = ts_cpu_gather;
    be->scatter_add = ts_cpu_scatter_add;
    be->softmax = ts_cpu_softmax;
    be->softmax_backward = ts_cpu_softmax_backward;
    be->random = ts_cpu_random;
    be->conv2d = ts_cpu_conv2d;
    be->conv2d_backward_data = ts_cpu_conv2d_backward_data;
    be->conv2d_backward_weight = ts_cpu_conv2d_backward_weight;
    be->conv2d_channels_last = ts_cpu_conv2d_channels_last;
    be->conv2d_block = ts_cpu_conv2d_block;
    be->conv2d_blocked = ts_cpu_conv2d_blocked;
    be->global_avg_pool_blocked = ts_cpu_global_avg_pool_blocked;
    be->mul_channels_blocked = ts_cpu_mul_channels_blocked;
    be->pool2d = ts_cpu_pool2d;
    be->pool2d_channels_last = ts_cpu_pool2d_channels_last;
    be->pool2d_backward = ts_cpu_pool2d_backward;
    be->optim_step = ts_cpu_optim_step;
    be->amp_unscale = ts_cpu_amp_unscale;
    be->amp_update_scale = ts_cpu_amp_update_scale;
    ts_cpu_sdpa_install(be);
    ts_cpu_layer_norm_install(be);
    ts_cpu_batch_norm_install(be);
}

static ts_backend cpu_backend = {
    .name = "cpu",
    .type = TS_CPU,
    .device_count = cpu_device_count,
    .memory_info = cpu_memory_info,
    .raw_alloc = cpu_raw_alloc,
    .raw_free = cpu_raw_free,
    .copy_h2d = cpu_copy_bytes,
    .copy_d2h = cpu_copy_bytes,
    .copy_d2d = cpu_copy_d2d,
    .memset_zero = cpu_memset_zero,
    .synchronize = cpu_synchronize,
    /* the cpu's own, not a kernel the sim device shares: sim stands in for a GPU, which multiplies
     * halves natively, so autocast keeps its half operands there on every host */
    .half_products_native = ts_cpu_half_products_native,
};

void ts_cpu_backend_init(void) {
    /* once: re-installing while other threads read the table would be a data race */
    if (ts_backend_for(TS_CPU) == &cpu_backend) return;
    tsi_omp_wait_init();
    ts_cpu_kernels_install(&cpu_backend);
    ts_backend_register(&cpu_backend);
}
