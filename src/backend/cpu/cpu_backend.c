/* cpu_backend.c — the "cpu" backend: 64-byte aligned host memory and the CPU kernel table. */
#define _POSIX_C_SOURCE 200809L
#include "backend/cpu/cpu_backend.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/cpu/conv3d_dnnl.h"
#include "backend/cpu/cpu_kernels.h"
#include "backend/cpu/gemm_provider.h"
#include "backend/cpu/kern_complex.h"
#include "backend/cpu/kern_fft.h"
#include "backend/cpu/omp_wait.h"
#include "backend/cpu/sdpa_select.h"

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

static bool cpu_hint_keys_copy(const ts_backend *be, int64_t S, int64_t row_bytes) {
    return tsi_sdpa_keys_copy(S, row_bytes);
}

static bool cpu_hint_weight_transposed(const ts_backend *be, int64_t rows, int64_t k, int64_t n) {
    return !tsi_lib_sgemm_primitive(false, false, rows, n, k) &&
           tsi_lib_sgemm_primitive(false, true, rows, n, k);
}

void tsi_cpu_kernels_install(ts_backend *be) {
    be->hint_keys_copy = cpu_hint_keys_copy; /* sim too: it runs these kernels */
    be->hint_weight_transposed = cpu_hint_weight_transposed;
    be->copy = tsi_cpu_copy;
    be->fill = tsi_cpu_fill;
    be->unary = tsi_cpu_unary_cx;   /* abs of a complex: kern_complex.c */
    be->binary = tsi_cpu_binary_cx; /* complex dtypes: kern_complex.c */
    be->binary_widening = tsi_cpu_binary_widening;
    be->binary_scalar = tsi_cpu_binary_scalar;
    be->where = tsi_cpu_where;
    be->ternary = tsi_cpu_ternary;
    be->bce = tsi_cpu_bce;
    be->reduce = tsi_cpu_reduce;
    be->scan = tsi_cpu_scan;
    be->matmul = tsi_cpu_matmul;
    be->matmul_bias = tsi_cpu_matmul_bias;
    be->index_select = tsi_cpu_index_select;
    be->gather = tsi_cpu_gather;
    be->scatter_add = tsi_cpu_scatter_add;
    be->cdist = tsi_cpu_cdist;
    be->embedding_bag = tsi_cpu_embedding_bag;
    be->nms = tsi_cpu_nms;
    be->roi_align = tsi_cpu_roi_align;
    be->roi_pool = tsi_cpu_roi_pool;
    be->quant = tsi_cpu_quant;
    be->qlinear = tsi_cpu_qlinear;
    be->qconv = tsi_cpu_qconv;
    be->qconv_channels_last = tsi_cpu_qconv_channels_last;
    be->qlinear_add = tsi_cpu_qlinear_add;
    be->qpool = tsi_cpu_qpool;
    be->wo_linear = tsi_cpu_wo_linear;
    be->gather_dims = tsi_cpu_gather_dims;
    be->rnn_cell_forward = tsi_cpu_rnn_cell_forward;
    be->rnn_cell_backward = tsi_cpu_rnn_cell_backward;
    be->rnn_seq_forward = tsi_cpu_rnn_seq_forward;
    be->rnn_seq_backward = tsi_cpu_rnn_seq_backward;
    be->fft = tsi_cpu_fft;
    be->softmax = tsi_cpu_softmax;
    be->softmax_backward = tsi_cpu_softmax_backward;
    be->random = tsi_cpu_random;
    be->conv2d = tsi_cpu_conv2d;
    be->conv2d_backward_data = tsi_cpu_conv2d_backward_data;
    be->conv2d_backward_weight = tsi_cpu_conv2d_backward_weight;
    be->conv2d_channels_last = tsi_cpu_conv2d_channels_last;
    be->conv2d_block = tsi_cpu_conv2d_block;
    be->conv2d_blocked = tsi_cpu_conv2d_blocked;
    be->global_avg_pool_blocked = tsi_cpu_global_avg_pool_blocked;
    be->mul_channels_blocked = tsi_cpu_mul_channels_blocked;
    be->pool2d = tsi_cpu_pool2d;
    be->pool2d_channels_last = tsi_cpu_pool2d_channels_last;
    be->pool2d_backward = tsi_cpu_pool2d_backward;
    be->optim_step = tsi_cpu_optim_step;
    be->amp_unscale = tsi_cpu_amp_unscale;
    be->amp_update_scale = tsi_cpu_amp_update_scale;
    tsi_cpu_sdpa_install(be);
    tsi_cpu_layer_norm_install(be);
    tsi_cpu_batch_norm_install(be);
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
    .half_products_native = tsi_cpu_half_products_native,
};

void tsi_cpu_backend_init(void) {
    /* once: re-installing while other threads read the table would be a data race */
    if (tsi_backend_for(TS_CPU) == &cpu_backend) return;
    tsi_omp_wait_init();
    tsi_cpu_kernels_install(&cpu_backend);
    cpu_backend.conv3d_forward = tsi_cpu_conv3d_forward; /* the cpu's alone: sim composes */
    tsi_backend_register(&cpu_backend);
}
