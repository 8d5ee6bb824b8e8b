/* conv_select.h — which kernel runs a CPU convolution: one function (tsi_conv_select) reading one
 * table of thresholds (tsi_conv_limits), each row of conv_select.c commented with the measurement
 * that justifies it. Every CPU convolution entry asks it: the plain NCHW passes (kern_conv.c), the
 * half-precision ones (kern_conv_half.c), channels_last (kern_conv_nhwc.c) and the blocked layout
 * of ONNX inference (conv_dnnl_blocked.c), so the C API's models and the ONNX import choose alike.
 * The thread-count rules of those paths and oneDNN's layout rule (conv_dnnl.c) read the same
 * table. */
#ifndef TS_CONV_SELECT_H
#define TS_CONV_SELECT_H

#include "backend/conv_select_query.h"
#include "backend/cpu/kern_conv.h"

typedef enum {
    TSI_CONV_PASS_FORWARD,
    TSI_CONV_PASS_DATA,   /* the input gradient */
    TSI_CONV_PASS_WEIGHT, /* the weight gradient */
} tsi_conv_pass;

typedef enum {
    TSI_CONV_PATH_DNNL,    /* oneDNN's primitive (conv_dnnl.c) */
    TSI_CONV_PATH_BUILTIN, /* the direct kernels where tsi_conv_direct_for takes g, else im2col */
    TSI_CONV_PATH_DW_BLOCKED, /* conv_dw_blocked.c's depthwise kernel (blocked in and out) */
    TSI_CONV_PATH_FC_BLOCKED, /* conv_fc_blocked.c's 1x1-image kernel (blocked in and out) */
    TSI_CONV_PATH_DW_WEIGHT,  /* conv_dw_weight.c's depthwise weight gradient (float32, NCHW) */
} tsi_conv_path;

/* The thresholds (conv_select.c's one instance, tsi_conv_limits_get) */
typedef struct tsi_conv_limits {
    /* float32 depthwise forwards of this many groups and more go to oneDNN */
    int64_t dnnl_depthwise_min_groups;
    /* the direct kernels: at most this many outputs per group, rows at least this wide */
    int64_t direct_max_outputs_per_group, direct_min_row;
    /* built-in drivers: images shared by the threads when the batch fills them or an image is
     * below this many flops; one image's groups shared from this many flops */
    double batch_parallel_max_flops, group_parallel_min_flops;
    /* oneDNN forwards below this many flops run on one thread */
    double dnnl_one_thread_flops;
    /* conv_dw_blocked.c: one thread below this many multiply-adds */
    double dw_blocked_parallel_min_macs;
    /* oneDNN's layout for channels_last without AVX-512: blocked from this many multiply-adds
     * per output element and this many in all */
    double nhwc_blocked_min_taps, nhwc_blocked_min_macs;
    /* with AVX-512: forwards of outputs at most this wide (batch >= 2, dense, not 1x1) and input
     * gradients of this many multiply-adds per input element run blocked */
    int64_t avx512_blocked_fwd_max_ow;
    double avx512_blocked_data_min_taps;
} tsi_conv_limits;

const tsi_conv_limits *tsi_conv_limits_get(void);

/* The kernel for pass over g in dtype dt (F32, F64, F16, BF16; for half dtypes DNNL means oneDNN
 * in that dtype where the CPU has it, else the float32 path). blk: 0 for plain (NCHW, or NHWC when
 * g->nhwc) activations, else the channel block both x and y are kept in (forward only). Where the
 * chosen path declines at run time (oneDNN not built in, out of memory) the caller falls back to
 * the built-in kernels, or for blocked activations to the plain path. TS_CONV=dnnl|builtin
 * (tsi_conv_provider) forces the provider. */
tsi_conv_path tsi_conv_select(const ts_cgeom *g, tsi_conv_pass pass, ts_dtype dt, int blk);

/* The built-in forward's parallel split (kern_conv.c): images among the threads, or one image's
 * groups */
bool tsi_conv_batch_parallel(const ts_cgeom *g, int nt);
bool tsi_conv_group_parallel(const ts_cgeom *g, int nt, bool batch_parallel);

#endif /* TS_CONV_SELECT_H */
