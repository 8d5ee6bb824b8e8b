/* cuda_compute.cu — installs the CUDA compute kernels (reduce, scan, matmul, index ops, softmax,
 * conv2d and its channels_last form, pooling, optimizer steps, amp, and the fused attention, layer
 * norm, batch norm and cross-entropy) into the backend table, and the helpers they share. */
#include "backend/cuda/cuda_compute.h"
#include "backend/cuda/cuda_fft.h"
#include "backend/cuda/cuda_linalg.h"

tsc_dims tsc_coalesce(int nd, const int64_t *shape, const int64_t *s0, const int64_t *s1) {
    tsc_dims r;
    r.nd = 0;
    for (int d = 0; d < nd; d++) {
        if (shape[d] == 0) {
            r.nd = 1;
            r.shape[0] = 0;
            r.s0[0] = r.s1[0] = 0;
            return r;
        }
    }
    for (int d = 0; d < nd; d++) {
        if (shape[d] == 1) continue;
        const int64_t t1 = s1 ? s1[d] : 0;
        if (r.nd > 0 && r.s0[r.nd - 1] == s0[d] * shape[d] && r.s1[r.nd - 1] == t1 * shape[d]) {
            r.shape[r.nd - 1] *= shape[d];
            r.s0[r.nd - 1] = s0[d];
            r.s1[r.nd - 1] = t1;
        } else {
            r.shape[r.nd] = shape[d];
            r.s0[r.nd] = s0[d];
            r.s1[r.nd] = t1;
            r.nd++;
        }
    }
    if (r.nd == 0) {
        r.nd = 1;
        r.shape[0] = 1;
        r.s0[0] = r.s1[0] = 0;
    }
    return r;
}

void tsc_install_compute_kernels(ts_backend *be) {
    be->reduce = tsc_reduce;
    be->scan = tsc_scan;
    be->matmul = tsc_matmul;
    be->matmul_bias = tsc_matmul_bias;
    be->matmul_bgrad = tsc_matmul_bgrad;
    be->matmul_bias_act = tsc_matmul_bias_act;
    be->matmul_dact_bgrad = tsc_matmul_dact_bgrad;
    be->index_select = tsc_index_select;
    be->gather = tsc_gather;
    be->scatter_add = tsc_scatter_add;
    be->cdist = tsc_cdist;
    be->embedding_bag = tsc_embedding_bag;
    be->nms = tsc_nms;
    be->roi_align = tsc_roi_align;
    be->roi_pool = tsc_roi_pool;
    be->gather_dims = tsc_gather_dims;
    be->rnn_cell_forward = tsc_rnn_cell_forward;
    be->rnn_cell_backward = tsc_rnn_cell_backward;
    be->fft = tsc_fft;
    be->linalg = tsc_linalg;
    be->softmax = tsc_softmax;
    be->softmax_backward = tsc_softmax_backward;
    be->conv2d = tsc_conv2d;
    be->conv2d_backward_data = tsc_conv2d_backward_data;
    be->conv2d_backward_weight = tsc_conv2d_backward_weight;
    be->conv2d_channels_last = tsc_conv2d_channels_last;
    be->pool2d = tsc_pool2d;
    be->pool2d_backward = tsc_pool2d_backward;
    be->optim_step = tsc_optim_step;
    be->amp_unscale = tsc_amp_unscale;
    be->amp_update_scale = tsc_amp_update_scale;
    be->sdpa_supports = tsc_sdpa_supports;
    be->sdpa_workspace = tsc_sdpa_workspace;
    be->sdpa_forward = tsc_sdpa_forward;
    be->sdpa_backward = tsc_sdpa_backward;
    be->cross_entropy_forward = tsc_cross_entropy_forward;
    be->cross_entropy_backward = tsc_cross_entropy_backward;
    be->layer_norm_supports = tsc_layer_norm_supports;
    be->layer_norm_workspace = tsc_layer_norm_workspace;
    be->layer_norm_forward = tsc_layer_norm_forward;
    be->layer_norm_backward = tsc_layer_norm_backward;
    be->batch_norm_supports = tsc_batch_norm_supports;
    be->batch_norm_forward = tsc_batch_norm_forward;
    be->batch_norm_backward = tsc_batch_norm_backward;
    be->quant = tsc_quant;
    be->qlinear = tsc_qlinear;
    be->wo_linear = tsc_wo_linear;
}
