/* sdpa_select.h — how a CPU attention runs: one function (tsi_sdpa_select) reading one table of
 * thresholds (tsi_sdpa_limits), each row of sdpa_select.c commented with the measurement that
 * justifies it or marked NOT MEASURED. It picks the path (bf16 on AMX tiles, kern_sdpa_amx.c, or
 * the vector flash kernels, kern_sdpa_impl.h), the thread count and the backward's chunking;
 * kern_sdpa.c's workspace query and kernels and kern_sdpa_amx.c ask it. The ONNX import's fused
 * attention (src/onnx/rewrite_xformer.c) asks tsi_sdpa_keys_copy, through the backend's
 * hint_keys_copy, whether to copy the keys first, and otherwise reaches the same selector through
 * ts_scaled_dot_product_attention.
 *
 * Decisions that live elsewhere, being capabilities rather than choices between paths:
 *   - fused kernels or the reference composition: src/nn/attention_fused.c's
 *     tsi_sdpa_fused_applies (the backend has the entries, q, k and v share their batch dims,
 *     the mask broadcasts and wants no gradient) and kern_sdpa.c's cpu_sdpa_supports (the float
 *     dtypes, a bool or same-dtype mask); everything else composes, whatever the size;
 *   - which compiled body of the flash kernels runs (AVX-512, AVX2 + FMA, portable; f32, f64, or
 *     the f32 body on widened halves): kern_sdpa.c's variant_for, the best the CPU has under the
 *     TS_CPU_ISA cap (ts_cpu_isa_get), with no threshold;
 *   - whether the tiles can run at all (AMX-BF16, Linux's grant, TS_AMX_GEMM not off):
 *     tsi_amx_gemm_ready, passed in as tsi_sdpa_host.tiles. */
#ifndef TS_SDPA_SELECT_H
#define TS_SDPA_SELECT_H

#include <stdbool.h>
#include <stdint.h>

#include "backend/backend.h"

typedef enum {
    TSI_SDPA_PATH_FLASH, /* the vector flash kernels (kern_sdpa_impl.h), every float dtype */
    TSI_SDPA_PATH_AMX,   /* bf16 block products on AMX tiles (kern_sdpa_amx.c) */
} tsi_sdpa_path;

/* The thresholds (sdpa_select.c's one instance, tsi_sdpa_limits_get) */
typedef struct tsi_sdpa_limits {
    /* the AMX path: at most this many scores (L x S) a batch */
    int64_t amx_max_scores;
    /* one thread below this many multiply-adds, N L S (E + Ev) */
    double parallel_min_macs;
    /* the flash backward: a batch's key blocks are dealt into chunks until there are this many
     * (batch, chunk) items in all */
    int64_t backward_min_items;
    /* keys whose rows lie a multiple of this many bytes apart (and at least that far) are copied
     * contiguous before the flash kernels gather them (the ONNX import) */
    int64_t keys_copy_row_bytes;
} tsi_sdpa_limits;

const tsi_sdpa_limits *tsi_sdpa_limits_get(void);

/* What the host offers a call: the threads of a parallel region (omp_get_max_threads, 1 without
 * OpenMP) and whether the AMX kernel can run (tsi_amx_gemm_ready). */
typedef struct tsi_sdpa_host {
    int threads;
    bool tiles;
} tsi_sdpa_host;

tsi_sdpa_host tsi_sdpa_host_now(void);

typedef struct tsi_sdpa_choice {
    tsi_sdpa_path path;
    int threads;    /* the kernels' team (>= 1): a->threads */
    int64_t chunks; /* flash backward: chunks of each batch's key blocks (>= 1; 1 forward, AMX) */
} tsi_sdpa_choice;

/* The path, threads and chunking for the call a (q, k, v views, dtype, dropout) forward or
 * backward. blk: the flash variant's block of queries and keys (kern_sdpa.c's variant_for; read
 * for the flash path only). The choice is a function of the shapes and the host alone, so the
 * workspace query and the kernels agree, and the chunking (the order dq's partial sums are added
 * in) never depends on the thread count. */
tsi_sdpa_choice tsi_sdpa_select(const ts_sdpa_args *a, bool backward, int64_t blk,
                                tsi_sdpa_host host);

/* Whether keys of S rows lying row_bytes apart are to be copied contiguous before attention: rows
 * a multiple of keys_copy_row_bytes apart fall in one cache set when a key block is gathered. */
bool tsi_sdpa_keys_copy(int64_t S, int64_t row_bytes);

#endif /* TS_SDPA_SELECT_H */
