/* cpu_kernels.h — the CPU kernel entry points (shared by the cpu and sim backends). */
#ifndef TS_CPU_KERNELS_H
#define TS_CPU_KERNELS_H

#include "backend/backend.h"
#include "backend/cpu/cpu_isa.h"

/* kern_copy.c */
void tsi_cpu_copy(const ts_backend *be, int index, const ts_kview *dst, const ts_kview *src);
void tsi_cpu_fill(const ts_backend *be, int index, const ts_kview *dst, double value);
/* kern_unary.c */
void tsi_cpu_unary(const ts_backend *be, int index, ts_unary_op op, const ts_kview *out,
                   const ts_kview *a, double p0, double p1);
/* kern_binary.c */
void tsi_cpu_binary(const ts_backend *be, int index, ts_binary_op op, const ts_kview *out,
                    const ts_kview *a, const ts_kview *b);
/* backend.h's binary_widening */
void tsi_cpu_binary_widening(const ts_backend *be, int index, ts_binary_op op, const ts_kview *out,
                             const ts_kview *a, const ts_kview *b);
void tsi_cpu_binary_scalar(const ts_backend *be, int index, ts_binary_op op, const ts_kview *out,
                           const ts_kview *a, double s);
void tsi_cpu_where(const ts_backend *be, int index, const ts_kview *out, const ts_kview *cond,
                   const ts_kview *a, const ts_kview *b);
/* kern_ternary.c: addcmul, addcdiv, lerp (backend.h's ternary) */
void tsi_cpu_ternary(const ts_backend *be, int index, ts_ternary_op op, const ts_kview *out,
                     const ts_kview *a, const ts_kview *b, const ts_kview *c, double p);
/* kern_bce.c: binary_cross_entropy's loss and domain test (backend.h's bce) */
int tsi_cpu_bce(const ts_backend *be, int index, const ts_kview *out, const ts_kview *x,
                const ts_kview *t);
/* kern_reduce.c */
void tsi_cpu_reduce(const ts_backend *be, int index, ts_reduce_op op, const ts_kview *out,
                    const ts_kview *in, int nred, double param);
/* kern_scan.c: cumsum, cumprod, cummax, cummin, logcumsumexp (backend.h's scan) */
void tsi_cpu_scan(const ts_backend *be, int index, ts_scan_op op, const ts_kview *out,
                  const ts_kview *idx, const ts_kview *in, int dim);
/* kern_matmul.c (OpenBLAS when built with it, else gemm_blocked.c) */
void tsi_cpu_matmul(const ts_backend *be, int index, const ts_kview *out, const ts_kview *a,
                    const ts_kview *b);
void tsi_cpu_matmul_bias(const ts_backend *be, int index, const ts_kview *out, const ts_kview *a,
                         const ts_kview *b, const ts_kview *bias);
/* bf16 where oneDNN runs bf16 instructions here (AVX512-BF16, AMX: tsi_dnnl_bf16_native); f16
 * never (matmul_half widens it on every CPU) */
bool tsi_cpu_half_products_native(const ts_backend *be, int index, ts_dtype dt);
/* kern_index.c */
void tsi_cpu_index_select(const ts_backend *be, int index, const ts_kview *out, const ts_kview *in,
                          int dim, const ts_kview *idx);
void tsi_cpu_gather(const ts_backend *be, int index, const ts_kview *out, const ts_kview *in,
                    int dim, const ts_kview *idx);
void tsi_cpu_scatter_add(const ts_backend *be, int index, const ts_kview *dst, int dim,
                         const ts_kview *idx, const ts_kview *src);
/* kern_embedding_bag.c */
void tsi_cpu_embedding_bag(const ts_backend *be, int index, const ts_kview *out,
                           const ts_bag_args *a);
/* kern_quant.c, kern_qlinear.c: backend.h's quant and qlinear (tessera/quant.h) */
void tsi_cpu_quant(const ts_backend *be, int index, const ts_quant_args *a);
bool tsi_cpu_qlinear(const ts_backend *be, int index, const ts_qlinear_args *a);
/* kern_qconv.c, kern_qpool.c: backend.h's qconv and qpool */
bool tsi_cpu_qconv(const ts_backend *be, int index, const ts_qconv_args *a);
bool tsi_cpu_qconv_channels_last(const ts_backend *be, int index);
/* kern_qlinear_add.c: backend.h's qlinear_add */
void tsi_cpu_qlinear_add(const ts_backend *be, int index, const ts_qlinear_add_args *a);
/* kern_qweight_only.c: backend.h's wo_linear */
bool tsi_cpu_wo_linear(const ts_backend *be, int index, const ts_wo_args *a);
/* kern_qdynamic_act.c: wo_linear with act_int8 set (called by tsi_cpu_wo_linear) */
bool tsi_cpu_da8_linear(const ts_wo_args *a);
void tsi_cpu_qpool(const ts_backend *be, int index, const ts_qpool_args *a);
/* kern_roi.c, kern_nms.c: backend.h's roi_align, roi_pool and nms (torchvision.ops) */
void tsi_cpu_roi_align(const ts_backend *be, int index, const ts_roi_args *a, bool backward);
void tsi_cpu_roi_pool(const ts_backend *be, int index, const ts_roi_args *a, bool backward);
bool tsi_cpu_nms(const ts_backend *be, int index, const ts_kview *keep, const ts_kview *boxes,
                 const ts_kview *cls, double iou_threshold);
/* kern_cdist.c */
void tsi_cpu_cdist(const ts_backend *be, int index, const ts_kview *out, const ts_kview *x1,
                   const ts_kview *x2, double p);
/* kern_rnn_cell.c: backend.h's rnn_cell_forward / rnn_cell_backward */
void tsi_cpu_rnn_cell_forward(const ts_backend *be, int index, const ts_rnn_cell_args *a);
void tsi_cpu_rnn_cell_backward(const ts_backend *be, int index, const ts_rnn_cell_args *a);
void tsi_cpu_rnn_seq_forward(const ts_backend *be, int index, const ts_rnn_seq_args *a);
void tsi_cpu_rnn_seq_backward(const ts_backend *be, int index, const ts_rnn_seq_args *a);
/* kern_gather_dims.c */
void tsi_cpu_gather_dims(const ts_backend *be, int index, const ts_kview *out, const ts_kview *in,
                         int k, const ts_kview *idx);
/* kern_softmax.c */
void tsi_cpu_softmax(const ts_backend *be, int index, const ts_kview *out, const ts_kview *in,
                     int dim, bool log);
/* kern_softmax_bwd.c */
bool tsi_cpu_softmax_backward(const ts_backend *be, int index, const ts_kview *gx,
                              const ts_kview *y, const ts_kview *g, int dim, bool log);
/* kern_random.c */
void tsi_cpu_random(const ts_backend *be, int index, ts_random_kind kind, const ts_kview *out,
                    double p0, double p1, uint64_t seed, uint64_t offset);

/* conv_dnnl_blocked.c: backend.h's conv2d_block / conv2d_blocked */
int tsi_cpu_conv2d_block(const ts_backend *be);
bool tsi_cpu_conv2d_blocked(const ts_backend *be, int index, float *out, int out_block,
                            const float *x, int x_block, const float *w, const float *bias,
                            const int64_t nchw[4], const int64_t o_ohw[3], const int64_t khw[2],
                            const ts_conv2d_params *p);
/* blocked_planes.c: backend.h's global_avg_pool_blocked / mul_channels_blocked */
void tsi_cpu_global_avg_pool_blocked(const ts_backend *be, int index, float *out, const float *x,
                                     int64_t n_cb, int64_t hw, int blk);
void tsi_cpu_mul_channels_blocked(const ts_backend *be, int index, float *out, const float *x,
                                  const float *s, int64_t n_cb, int64_t hw, int blk);

/* kern_conv.c */
void tsi_cpu_conv2d(const ts_backend *be, int index, const ts_kview *out, const ts_kview *x,
                    const ts_kview *w, const ts_kview *bias, const ts_conv2d_params *p);
void tsi_cpu_conv2d_backward_data(const ts_backend *be, int index, const ts_kview *gx,
                                  const ts_kview *gout, const ts_kview *w,
                                  const ts_conv2d_params *p);
void tsi_cpu_conv2d_backward_weight(const ts_backend *be, int index, const ts_kview *gw,
                                    const ts_kview *gout, const ts_kview *x,
                                    const ts_conv2d_params *p);
/* kern_conv_nhwc.c: the entry points' channels_last path (x / out, gx / gout NHWC views), and
 * backend.h's conv2d_channels_last; tsi_conv_view_nhwc: v is NHWC-dense and not also NCHW */
bool tsi_cpu_conv2d_channels_last(const ts_backend *be, int index, ts_dtype dt);
bool tsi_conv_view_nhwc(const ts_kview *v);
void tsi_conv2d_nhwc(const ts_backend *be, int index, const ts_kview *out, const ts_kview *x,
                     const ts_kview *w, const ts_kview *bias, const ts_conv2d_params *p);
void tsi_conv2d_backward_data_nhwc(const ts_backend *be, int index, const ts_kview *gx,
                                   const ts_kview *gout, const ts_kview *w,
                                   const ts_conv2d_params *p);
void tsi_conv2d_backward_weight_nhwc(const ts_backend *be, int index, const ts_kview *gw,
                                     const ts_kview *gout, const ts_kview *x,
                                     const ts_conv2d_params *p);
/* kern_pool.c (NCHW planes; channels_last views go to kern_pool_nhwc.c) */
void tsi_cpu_pool2d(const ts_backend *be, int index, const ts_kview *out, const ts_kview *x,
                    const ts_kview *indices, const ts_pool2d_params *p);
void tsi_cpu_pool2d_backward(const ts_backend *be, int index, const ts_kview *gx,
                             const ts_kview *gout, const ts_kview *indices,
                             const ts_pool2d_params *p);
/* kern_pool_nhwc.c: backend.h's pool2d_channels_last, and the kernels for NHWC-dense views
 * (tsi_pool_view_nhwc: C > 1) that tsi_cpu_pool2d / tsi_cpu_pool2d_backward hand over; indices
 * NHWC-dense like out. tsi_pool_nhwc_count: the calls so far (tests check the path ran). */
bool tsi_cpu_pool2d_channels_last(const ts_backend *be, int index, ts_dtype dt);
bool tsi_pool_view_nhwc(const ts_kview *v);
void tsi_pool2d_nhwc(const ts_kview *out, const ts_kview *x, const ts_kview *indices,
                     const ts_pool2d_params *p);
void tsi_pool2d_backward_nhwc(const ts_kview *gx, const ts_kview *gout, const ts_kview *indices,
                              const ts_pool2d_params *p);
uint64_t tsi_pool_nhwc_count(void);
/* kern_optim.c */
void tsi_cpu_optim_step(const ts_backend *be, int index, const struct ts_optim_step_args *args);
/* kern_sdpa.c: sets the fused attention entries (sdpa_*) */
void tsi_cpu_sdpa_install(ts_backend *be);
/* kern_layer_norm.c: sets the fused layer norm entries (layer_norm_*); tests: the forward or
 * backward of one ISA's variant (false when this CPU or build lacks it) */
void tsi_cpu_layer_norm_install(ts_backend *be);
bool tsi_cpu_layer_norm_isa(ts_cpu_isa isa, const ts_layer_norm_args *a, bool backward, void *ws);
/* kern_batch_norm.c: sets the fused batch norm entries (batch_norm_*); tests: the forward or
 * backward of one ISA's variant (false when this CPU or build lacks it) */
void tsi_cpu_batch_norm_install(ts_backend *be);
bool tsi_cpu_batch_norm_isa(ts_cpu_isa isa, const ts_batch_norm_args *a, bool backward);
/* kern_amp.c */
void tsi_cpu_amp_unscale(const ts_backend *be, int index, const ts_kview *grads, int n,
                         const ts_kview *found_inf, const ts_kview *inv_scale);
void tsi_cpu_amp_update_scale(const ts_backend *be, int index, const ts_kview *scale,
                              const ts_kview *growth_tracker, const ts_kview *found_inf,
                              double growth_factor, double backoff_factor, int growth_interval);

#endif /* TS_CPU_KERNELS_H */
