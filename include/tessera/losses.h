/* tessera/losses.h — the loss functions (cross-entropy, nll, mse, bce, margin and ranking losses,
 * ...) and their reduction options; included by tessera/nn.h. */
#ifndef TESSERA_LOSSES_H
#define TESSERA_LOSSES_H

typedef enum ts_reduction {
    TS_REDUCTION_MEAN = 0,
    TS_REDUCTION_SUM,
    TS_REDUCTION_NONE
} ts_reduction;
typedef struct ts_loss_opts {
    ts_reduction reduction;
    ts_tensor *weight;     /* per-class weight [C] (cross_entropy, nll) or per-element (bce) */
    bool has_ignore_index; /* false: PyTorch's default ignore_index = -100 */
    int64_t ignore_index;
    double label_smoothing; /* cross_entropy */
    double beta;            /* smooth_l1: 0 -> 1.0 */
    ts_tensor *pos_weight;  /* bce_with_logits */
} ts_loss_opts;
/* logits [N, C] or [N, C, d1...]; target class indices (i64 [N, d1...]) or probabilities (float,
 * logits' shape) */
TS_API ts_tensor *ts_cross_entropy(ts_tensor *logits, ts_tensor *target);
TS_API ts_tensor *ts_cross_entropy_ex(ts_tensor *logits, ts_tensor *target, ts_loss_opts o);
/* torch.nn.functional.linear_cross_entropy: cross_entropy_ex(logits, target, o) of the logits
 * input @ weight^T + bias reshaped to [N, C, d1..dK] ([C] for an unbatched input): input [N, in] or
 * [in], weight [C, d1..dK, in], bias NULL or [C, d1..dK]; target class indices or probabilities
 * (the logits' shape; then has_ignore_index is TS_ERR_ARG). chunk_rows 0: that composition;
 * chunk_rows > 0 with a 2-D weight and a target that needs no gradient: the same losses computed
 * chunk_rows rows at a time, with a backward that recomputes each chunk's logits (at most
 * chunk_rows x C of them live at once; not twice differentiable). PyTorch's messages. */
TS_API ts_tensor *ts_linear_cross_entropy(ts_tensor *input, ts_tensor *weight, ts_tensor *bias,
                                          ts_tensor *target, ts_loss_opts o, int64_t chunk_rows);
TS_API ts_tensor *ts_nll_loss(ts_tensor *log_probs, ts_tensor *target, ts_loss_opts o);
TS_API ts_tensor *ts_mse_loss(ts_tensor *input, ts_tensor *target); /* mean */
TS_API ts_tensor *ts_mse_loss_ex(ts_tensor *input, ts_tensor *target, ts_loss_opts o);
TS_API ts_tensor *ts_l1_loss(ts_tensor *input, ts_tensor *target, ts_loss_opts o);
TS_API ts_tensor *ts_smooth_l1_loss(ts_tensor *input, ts_tensor *target, ts_loss_opts o);
/* torch.nn.functional.smooth_l1_loss with PyTorch's beta: 0 is the L1 loss (ts_smooth_l1_loss reads
 * its opts' beta 0 as 1.0), negative is TS_ERR_ARG */
TS_API ts_tensor *ts_smooth_l1_loss_beta(ts_tensor *input, ts_tensor *target,
                                         ts_reduction reduction, double beta);
TS_API ts_tensor *ts_bce_with_logits(ts_tensor *input, ts_tensor *target, ts_loss_opts o);
/* torchvision.ops.generalized_box_iou_loss: 1 - GIoU of paired xyxy boxes [..., 4] (one shape),
 * torchvision's formula with eps in both divisions; reduced by r (mean of none: 0) */
/* torchvision.ops.sigmoid_focal_loss: bce_with_logits(inputs, targets) (1 - p_t)^gamma, times
 * alpha t + (1 - alpha)(1 - t) when alpha >= 0; torchvision's order of operations; reduced by r */
TS_API ts_tensor *ts_sigmoid_focal_loss(ts_tensor *inputs, ts_tensor *targets, double alpha,
                                        double gamma, ts_reduction r);
TS_API ts_tensor *ts_generalized_box_iou_loss(ts_tensor *boxes1, ts_tensor *boxes2, ts_reduction r,
                                              double eps);
/* binary_cross_entropy on probabilities (src/nn/loss_bce.c): PyTorch's loss (each log clamped at
 * -100) and gradient (x - t) / max(x (1 - x), 1e-12), finite at x = 0 and 1; target the input's
 * shape, o.weight broadcast to it; o.reduction. An input or target outside [0, 1] (NaN too) is
 * refused with TS_ERR_ARG on cpu / sim (PyTorch's message); CUDA does not test it (NaN). */
TS_API ts_tensor *ts_binary_cross_entropy(ts_tensor *input, ts_tensor *target, ts_loss_opts o);
/* The other PyTorch losses (src/nn/loss_pointwise.c, loss_margin.c), composed from differentiable
 * ops: every device, autograd. r is the reduction; errors name the op and the argument
 * (TS_ERR_SHAPE, TS_ERR_DTYPE, TS_ERR_ARG, TS_ERR_DEVICE), with PyTorch's messages. */
/* batchmean: the sum divided by input's size(0) (r is then ignored) */
TS_API ts_tensor *ts_kl_div(ts_tensor *input, ts_tensor *target, ts_reduction r, bool batchmean,
                            bool log_target);
TS_API ts_tensor *ts_huber_loss(ts_tensor *input, ts_tensor *target, ts_reduction r, double delta,
                                ts_tensor *weight /* NULL or broadcastable to input */);
TS_API ts_tensor *ts_soft_margin_loss(ts_tensor *input, ts_tensor *target, ts_reduction r);
TS_API ts_tensor *ts_margin_ranking_loss(ts_tensor *input1, ts_tensor *input2, ts_tensor *target,
                                         double margin, ts_reduction r);
TS_API ts_tensor *ts_hinge_embedding_loss(ts_tensor *input, ts_tensor *target, double margin,
                                          ts_reduction r);
TS_API ts_tensor *ts_cosine_embedding_loss(ts_tensor *input1, ts_tensor *input2, ts_tensor *target,
                                           double margin, ts_reduction r);
TS_API ts_tensor *ts_triplet_margin_loss(ts_tensor *anchor, ts_tensor *positive,
                                         ts_tensor *negative, double margin, double p, double eps,
                                         bool swap, ts_reduction r);
/* triplet_margin_with_distance_loss from the distances a distance function gave (one shape):
 * max(margin + dist_pos - dist_neg, 0), dist_neg replaced by min(dist_neg, dist_swap) when
 * dist_swap (the positive-negative distances) is not NULL; margin > 0
 * (src/nn/loss_triplet_distance.c) */
TS_API ts_tensor *ts_triplet_margin_distance_loss(ts_tensor *dist_pos, ts_tensor *dist_neg,
                                                  ts_tensor *dist_swap, double margin,
                                                  ts_reduction r);
TS_API ts_tensor *ts_poisson_nll_loss(ts_tensor *input, ts_tensor *target, bool log_input,
                                      bool full, double eps, ts_reduction r);
/* var: input's shape, or it without the last dim, or with last dim 1; clamped at eps without a
 * gradient through the clamp; a negative entry is TS_ERR_ARG */
TS_API ts_tensor *ts_gaussian_nll_loss(ts_tensor *input, ts_tensor *target, ts_tensor *var,
                                       bool full, double eps, ts_reduction r);
/* input [C] or [N, C]; target i64 of input's shape, class indices ended by the first -1 */
TS_API ts_tensor *ts_multilabel_margin_loss(ts_tensor *input, ts_tensor *target, ts_reduction r);
TS_API ts_tensor *ts_multilabel_soft_margin_loss(ts_tensor *input, ts_tensor *target,
                                                 ts_tensor *weight /* NULL or [C] */,
                                                 ts_reduction r);
/* input [C] or [N, C]; target i64 [N] (or 0-dim/[1]); p 1 or 2; weight NULL or [C] */
TS_API ts_tensor *ts_multi_margin_loss(ts_tensor *input, ts_tensor *target, int p, double margin,
                                       ts_tensor *weight, ts_reduction r);

#endif /* TESSERA_LOSSES_H */
