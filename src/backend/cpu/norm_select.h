/* norm_select.h — which kernel runs a CPU normalisation, and how its work is shared among
 * threads: a small family of functions (one per norm, the arguments differ) reading one table of
 * thresholds (tsi_norm_limits), each row of norm_select.c commented with the measurement that
 * justifies it. The fused layer norm (kern_layer_norm.c, which group_norm also runs) and batch norm
 * (kern_batch_norm.c, kern_batch_norm_nhwc.c) ask it for their path, their vector variant, their
 * thread cut-off and their partition of the work; what they decline src/nn/norm.c composes from
 * public ops. The ONNX import's LayerNormalization and BatchNormalization call ts_layer_norm /
 * ts_batch_norm, so they reach the same choice. */
#ifndef TS_NORM_SELECT_H
#define TS_NORM_SELECT_H

#include <stdbool.h>
#include <stdint.h>

#include "backend/backend.h"

typedef enum {
    TSI_NORM_PATH_COMPOSED, /* the kernels decline: src/nn/norm.c's composition of public ops */
    TSI_NORM_PATH_ROWS,     /* kern_layer_norm.c: rows among the threads */
    TSI_NORM_PATH_CHANNELS, /* kern_batch_norm.c: [n, c, hw], groups of channels among threads */
    TSI_NORM_PATH_NHWC,     /* kern_batch_norm_nhwc.c: [n, hw, c], blocks of rows among threads */
} tsi_norm_path;

/* The most channels of one kern_batch_norm.c task: its sums live in arrays of this size on the
 * stack, so the table's bn_max_group is this constant */
#define TSI_NORM_BN_MAX_GROUP 64

/* The thresholds (norm_select.c's one instance, tsi_norm_limits_get) */
typedef struct tsi_norm_limits {
    /* a pass over fewer elements than this runs on one thread (every pass of the three kernels) */
    int64_t parallel_min_elems;
    /* layer norm's backward with dweight or dbias: blocks of at least this many rows, at most
     * this many blocks (each block's partial sums are added in block order: the partition fixes
     * the bits of dweight and dbias) */
    int64_t ln_block_min_rows, ln_max_blocks;
    /* NCHW batch norm: a task's channels hold at least this many elements of each sample, at
     * most bn_max_group channels, and there are at least bn_min_tasks tasks where the channels
     * allow (a channel's sums never depend on its task) */
    int64_t bn_group_min_elems, bn_max_group, bn_min_tasks;
    /* NHWC batch norm: blocks of rows of at least this many elements, at most this many blocks
     * (the blocks' sums are added in block order: the partition fixes the bits) */
    int64_t bn_nhwc_block_min_elems, bn_nhwc_max_blocks;
} tsi_norm_limits;

const tsi_norm_limits *tsi_norm_limits_get(void);

/* The path of a layer norm over a->rows rows of a->cols elements of dtype a->x.dtype: ROWS or
 * COMPOSED. */
tsi_norm_path tsi_norm_select_layer(const ts_layer_norm_args *a);

/* The path of a training-mode batch norm over [a->n, a->c, a->hw] of dtype a->x.dtype, laid out
 * [n, hw, c] when a->channels_last: CHANNELS, NHWC or COMPOSED. */
tsi_norm_path tsi_norm_select_batch(const ts_batch_norm_args *a);

/* The vector variant the kernels run (kern_norm_isa.h: 0 portable, 1 AVX2, 2 AVX-512) */
int tsi_norm_variant(void);

/* Whether a pass over elems elements cut into tasks tasks runs on threads */
bool tsi_norm_parallel(int64_t elems, int64_t tasks);

/* Layer norm's backward: the number of blocks of consecutive rows (each row one block when
 * neither dweight nor dbias is wanted, sums false) */
int64_t tsi_norm_layer_blocks(int64_t rows, bool sums);

/* NCHW batch norm: channels per task, for c channels of hw elements */
int64_t tsi_norm_batch_group(int64_t c, int64_t hw);

/* NHWC batch norm: rows (of c channels) per block, *rb, and blocks, *nb, for rows rows */
void tsi_norm_batch_nhwc_blocks(int64_t rows, int64_t c, int64_t *rb, int64_t *nb);

#endif /* TS_NORM_SELECT_H */
