/* loss_margin.c — the margin and embedding losses (soft_margin, margin_ranking, hinge_embedding,
 * cosine_embedding, triplet_margin, multilabel_soft_margin, multilabel_margin, multi_margin),
 * composed from differentiable ops as PyTorch's aten/src/ATen/native/Loss*.cpp and
 * torch/nn/functional.py compute them: every device, autograd for free. The ops on PyTorch's
 * autocast fp32 list run in float32 under autocast (gaussian_nll and multilabel_soft_margin are
 * Python composites there, not listed). */
#include <math.h>

#include "amp/autocast.h"
#include "nn/loss_checks.h"

/* -------------------------------------------------------------------------- soft_margin_loss */
static ts_tensor *soft_margin_loss_op(ts_tensor *input, ts_tensor *target, ts_reduction r) {
    tsi_init();
    if (!pointwise2("soft_margin_loss", input, target, r)) return NULL;
    /* log(1 + exp(-y x)) */
    LOSS_BODY(tsi_loss_reduce(ts_softplus(ts_neg(ts_mul(input, target))), r));
}

ts_tensor *ts_soft_margin_loss(ts_tensor *input, ts_tensor *target, ts_reduction r) {
    tsi_ac_frame ac; /* autocast: float32 */
    TSI_AUTOCAST_ENTER(&ac, "soft_margin_loss", &input, &target);
    return tsi_autocast_exit(&ac, soft_margin_loss_op(input, target, r));
}

/* ---------------------------------------------------------------------- margin_ranking_loss */
static ts_tensor *margin_ranking_loss_op(ts_tensor *input1, ts_tensor *input2, ts_tensor *target,
                                         double margin, ts_reduction r) {
    const char *op = "margin_ranking_loss";
    tsi_init();
    ts_tensor *ts[3] = {input1, input2, target};
    static const char *const names[3] = {"input1", "input2", "target"};
    if (!check_all(op, ts, names, 3, 3, r)) return NULL;
    if (input1->shape.ndim != input2->shape.ndim || input1->shape.ndim != target->shape.ndim)
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s: All input tensors should have same dimension but got sizes: "
                             "input1: %s, input2: %s, target: %s",
                             op, tsi_shape_str(input1->shape), tsi_shape_str(input2->shape),
                             tsi_shape_str(target->shape)),
               NULL;
    if (!need_float(op, input1, "input1") || !broadcastable(op, input1, input2) ||
        !broadcastable(op, input1, target))
        return NULL;
    /* max(0, -y (x1 - x2) + margin) */
    LOSS_BODY(tsi_loss_reduce(
        ts_clamp_min(ts_add_scalar(ts_neg(ts_mul(target, ts_sub(input1, input2))), margin), 0), r));
}

ts_tensor *ts_margin_ranking_loss(ts_tensor *input1, ts_tensor *input2, ts_tensor *target,
                                  double margin, ts_reduction r) {
    tsi_ac_frame ac; /* autocast: float32 */
    TSI_AUTOCAST_ENTER(&ac, "margin_ranking_loss", &input1, &input2, &target);
    return tsi_autocast_exit(&ac, margin_ranking_loss_op(input1, input2, target, margin, r));
}

/* --------------------------------------------------------------------- hinge_embedding_loss */
static ts_tensor *hinge_body(ts_tensor *in, ts_tensor *tg, double margin, ts_reduction r) {
    ts_tensor *zeros = ts_zeros_like(in);
    ts_tensor *margin_clamp = ts_clamp_min(ts_rsub_scalar(in, margin), 0);
    ts_tensor *out_margin = ts_where(ts_ne_scalar(tg, 1), margin_clamp, zeros);
    ts_tensor *out_self = ts_where(ts_ne_scalar(tg, -1), in, zeros);
    return tsi_loss_reduce(ts_add(out_margin, out_self), r);
}

static ts_tensor *hinge_embedding_loss_op(ts_tensor *input, ts_tensor *target, double margin,
                                          ts_reduction r) {
    tsi_init();
    if (!pointwise2("hinge_embedding_loss", input, target, r)) return NULL;
    LOSS_BODY(hinge_body(input, target, margin, r));
}

ts_tensor *ts_hinge_embedding_loss(ts_tensor *input, ts_tensor *target, double margin,
                                   ts_reduction r) {
    tsi_ac_frame ac; /* autocast: float32 */
    TSI_AUTOCAST_ENTER(&ac, "hinge_embedding_loss", &input, &target);
    return tsi_autocast_exit(&ac, hinge_embedding_loss_op(input, target, margin, r));
}

/* ------------------------------------------------------------------- cosine_embedding_loss */
static ts_tensor *cosine_body(ts_tensor *x1, ts_tensor *x2, ts_tensor *tg, double margin,
                              ts_reduction r) {
    const double eps = 1e-12; /* PyTorch's EPSILON */
    int d = tg->shape.ndim;
    ts_tensor *prod = ts_sum_dim(ts_mul(x1, x2), d, false);
    ts_tensor *m1 = ts_add_scalar(ts_sum_dim(ts_mul(x1, x1), d, false), eps);
    ts_tensor *m2 = ts_add_scalar(ts_sum_dim(ts_mul(x2, x2), d, false), eps);
    ts_tensor *cosv = ts_div(prod, ts_sqrt(ts_mul(m1, m2)));
    ts_tensor *zeros = ts_zeros_like(cosv);
    ts_tensor *pos = ts_rsub_scalar(cosv, 1);
    ts_tensor *neg = ts_clamp_min(ts_sub_scalar(cosv, margin), 0);
    ts_tensor *out = ts_add(ts_where(ts_eq_scalar(tg, 1), pos, zeros),
                            ts_where(ts_eq_scalar(tg, -1), neg, zeros));
    return tsi_loss_reduce(out, r);
}

static ts_tensor *cosine_embedding_loss_op(ts_tensor *input1, ts_tensor *input2, ts_tensor *target,
                                           double margin, ts_reduction r) {
    const char *op = "cosine_embedding_loss";
    tsi_init();
    ts_tensor *ts[3] = {input1, input2, target};
    static const char *const names[3] = {"input1", "input2", "target"};
    if (!check_all(op, ts, names, 3, 3, r)) return NULL;
    int td = target->shape.ndim;
    if (td > 1)
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s: 0D or 1D target tensor expected, multi-target not supported", op),
               NULL;
    if (input1->shape.ndim != td + 1 || input2->shape.ndim != td + 1)
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s: %dD target tensor expects %dD input tensors, but found inputs "
                             "with sizes %s and %s.",
                             op, td, td + 1, tsi_shape_str(input1->shape),
                             tsi_shape_str(input2->shape)),
               NULL;
    if (!need_float(op, input1, "input1") || !need_float(op, input2, "input2") ||
        !broadcastable(op, input1, input2))
        return NULL;
    if (td == 1 && input1->shape.dims[0] != target->shape.dims[0] && input1->shape.dims[0] != 1 &&
        target->shape.dims[0] != 1)
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s: the size of target %s does not match the batch of input1 %s", op,
                             tsi_shape_str(target->shape), tsi_shape_str(input1->shape)),
               NULL;
    LOSS_BODY(cosine_body(input1, input2, target, margin, r));
}

ts_tensor *ts_cosine_embedding_loss(ts_tensor *input1, ts_tensor *input2, ts_tensor *target,
                                    double margin, ts_reduction r) {
    tsi_ac_frame ac; /* autocast: float32 */
    TSI_AUTOCAST_ENTER(&ac, "cosine_embedding_loss", &input1, &input2, &target);
    return tsi_autocast_exit(&ac, cosine_embedding_loss_op(input1, input2, target, margin, r));
}

/* ---------------------------------------------------------------------- triplet_margin_loss */
static ts_tensor *triplet_body(ts_tensor *a, ts_tensor *p, ts_tensor *n, double margin, double pn,
                               double eps, bool swap, ts_reduction r) {
    ts_tensor *dpos = ts_pairwise_distance(a, p, pn, eps, false);
    ts_tensor *dneg = ts_pairwise_distance(a, n, pn, eps, false);
    if (swap) dneg = ts_minimum(dneg, ts_pairwise_distance(p, n, pn, eps, false));
    return tsi_loss_reduce(ts_clamp_min(ts_add_scalar(ts_sub(dpos, dneg), margin), 0), r);
}

static ts_tensor *triplet_margin_loss_op(ts_tensor *anchor, ts_tensor *positive,
                                         ts_tensor *negative, double margin, double p, double eps,
                                         bool swap, ts_reduction r) {
    const char *op = "triplet_margin_loss";
    tsi_init();
    ts_tensor *ts[3] = {anchor, positive, negative};
    static const char *const names[3] = {"anchor", "positive", "negative"};
    if (!check_all(op, ts, names, 3, 3, r)) return NULL;
    int ad = anchor->shape.ndim, pd = positive->shape.ndim, nd = negative->shape.ndim;
    if (ad != pd || pd != nd)
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s: The anchor, positive, and negative tensors are expected to have "
                             "the same number of dimensions, but got: anchor %dD, positive %dD, "
                             "and negative %dD inputs",
                             op, ad, pd, nd),
               NULL;
    if (!need_float(op, anchor, "anchor")) return NULL;
    LOSS_BODY(triplet_body(anchor, positive, negative, margin, p, eps, swap, r));
}

ts_tensor *ts_triplet_margin_loss(ts_tensor *anchor, ts_tensor *positive, ts_tensor *negative,
                                  double margin, double p, double eps, bool swap, ts_reduction r) {
    tsi_ac_frame ac; /* autocast: float32 */
    TSI_AUTOCAST_ENTER(&ac, "triplet_margin_loss", &anchor, &positive, &negative);
    return tsi_autocast_exit(
        &ac, triplet_margin_loss_op(anchor, positive, negative, margin, p, eps, swap, r));
}

/* -------------------------------------------------------------- multilabel_soft_margin_loss */
static ts_tensor *mlsm_body(ts_tensor *in, ts_tensor *tg, ts_tensor *w, ts_reduction r) {
    /* -(t logsigmoid(x) + (1 - t) logsigmoid(-x)) = t softplus(-x) + (1 - t) softplus(x) */
    ts_tensor *loss =
        ts_add(ts_mul(tg, ts_softplus(ts_neg(in))), ts_mul(ts_rsub_scalar(tg, 1), ts_softplus(in)));
    if (w) loss = ts_mul(loss, w);
    int cd = in->shape.ndim - 1;
    loss = ts_div_scalar(ts_sum_dim(loss, cd, false), (double)in->shape.dims[cd]);
    return tsi_loss_reduce(loss, r);
}

ts_tensor *ts_multilabel_soft_margin_loss(ts_tensor *input, ts_tensor *target, ts_tensor *weight,
                                          ts_reduction r) {
    const char *op = "multilabel_soft_margin_loss";
    tsi_init();
    ts_tensor *ts[3] = {input, target, weight};
    static const char *const names[3] = {"input", "target", "weight"};
    if (!check_all(op, ts, names, 3, 2, r) || !need_float(op, input, "input") ||
        !broadcastable(op, input, target) || (weight && !broadcastable(op, input, weight)))
        return NULL;
    if (input->shape.ndim < 1)
        return tsi_error_set(TS_ERR_SHAPE, "%s: expected input with a class dim, got %s", op,
                             tsi_shape_str(input->shape)),
               NULL;
    LOSS_BODY(mlsm_body(input, target, weight, r));
}

/* ------------------------------------------------------- the class-index margin losses */
/* [nframe, dim] views of input (0-, 1- or 2-dim) */
static ts_tensor *as_frames(ts_tensor *in, int64_t nframe, int64_t dim) {
    return ts_reshape(in, (ts_shape){2, {nframe, dim}});
}

/* min and max of an i64 tensor (false with the error set) */
static bool int_range(ts_tensor *t, double *lo, double *hi) {
    if (ts_numel(t) == 0) return *lo = 0, *hi = -1, true;
    ts_scope_begin();
    *lo = ts_item(ts_min(t));
    *hi = ts_item(ts_max(t));
    ts_scope_end();
    return !isnan(*lo) && !isnan(*hi);
}

static ts_tensor *mlm_body(ts_tensor *in, ts_tensor *tg, int64_t nframe, int64_t dim,
                           ts_reduction r, bool scalar_out) {
    ts_tensor *x = as_frames(in, nframe, dim);
    ts_tensor *t = as_frames(tg, nframe, dim);
    ts_opts lo = {.dtype = TS_I64, .device = tsi_device(tg)};
    ts_tensor *k = ts_arange(0, (double)dim, 1, lo); /* [dim] */
    /* the targets end at the first negative entry: valid[n, k] = k < first[n] */
    ts_tensor *first =
        ts_amin_dim(ts_where(ts_lt_scalar(t, 0), k, ts_full_like(t, (double)dim)), 1, true);
    ts_tensor *valid = ts_to_dtype(ts_lt(k, first), in->dtype);                  /* [N, K] */
    ts_tensor *tc = ts_clamp_min(t, 0);                                          /* [N, K] */
    ts_tensor *oh = ts_to_dtype(ts_one_hot(tc, dim), in->dtype);                 /* [N, K, C] */
    ts_tensor *is_t = ts_amax_dim(ts_mul(oh, ts_unsqueeze(valid, 2)), 1, false); /* [N, C] */
    ts_tensor *xy = ts_gather(x, 1, tc);                                         /* [N, K] */
    /* relu(1 - x[y_k] + x[i]) over valid k and non-target i */
    ts_tensor *z = ts_relu(ts_add(ts_rsub_scalar(ts_unsqueeze(xy, 2), 1), ts_unsqueeze(x, 1)));
    z = ts_mul(ts_mul(z, ts_unsqueeze(valid, 2)), ts_unsqueeze(ts_rsub_scalar(is_t, 1), 1));
    ts_tensor *loss = ts_div_scalar(ts_sum_dims(z, (ts_dims){2, {1, 2}}, false), (double)dim);
    if (scalar_out && r == TS_REDUCTION_NONE) return ts_reshape(loss, (ts_shape){0, {0}});
    return tsi_loss_reduce(loss, r);
}

static ts_tensor *multilabel_margin_loss_op(ts_tensor *input, ts_tensor *target, ts_reduction r) {
    const char *op = "multilabel_margin_loss";
    tsi_init();
    ts_tensor *ts[2] = {input, target};
    static const char *const names[2] = {"input", "target"};
    if (!check_all(op, ts, names, 2, 2, r) || !need_float(op, input, "input") ||
        !need_long(op, target, "target"))
        return NULL;
    int nd = input->shape.ndim;
    if (!((nd <= 1 && ts_numel(input) > 0) || (nd == 2 && input->shape.dims[1] > 0)))
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s: Expected non-empty vector or matrix with optional 0-dim batch "
                             "size, but got: %s",
                             op, tsi_shape_str(input->shape)),
               NULL;
    int64_t nframe = nd <= 1 ? 1 : input->shape.dims[0];
    int64_t dim = nd == 0 ? 1 : input->shape.dims[nd - 1];
    bool ok = nd <= 1 ? target->shape.ndim <= 1 && ts_numel(target) == dim
                      : target->shape.ndim == 2 && target->shape.dims[0] == nframe &&
                            target->shape.dims[1] == dim;
    if (!ok)
        return tsi_error_set(TS_ERR_SHAPE, "%s: inconsistent target size: %s for input of size: %s",
                             op, tsi_shape_str(target->shape), tsi_shape_str(input->shape)),
               NULL;
    double lo, hi;
    if (!int_range(target, &lo, &hi)) return NULL;
    if (lo < -1 || hi >= (double)dim)
        return tsi_error_set(TS_ERR_ARG, "%s: target out of range", op), NULL;
    LOSS_BODY(mlm_body(input, target, nframe, dim, r, target->shape.ndim <= 1));
}

ts_tensor *ts_multilabel_margin_loss(ts_tensor *input, ts_tensor *target, ts_reduction r) {
    tsi_ac_frame ac; /* autocast: float32 */
    TSI_AUTOCAST_ENTER(&ac, "multilabel_margin_loss", &input);
    return tsi_autocast_exit(&ac, multilabel_margin_loss_op(input, target, r));
}

static ts_tensor *mm_body(ts_tensor *in, ts_tensor *tg, int p, double margin, ts_tensor *w,
                          int64_t nframe, int64_t dim, ts_reduction r, bool scalar_out) {
    ts_tensor *x = as_frames(in, nframe, dim);
    ts_tensor *y = ts_reshape(tg, (ts_shape){1, {nframe}});
    ts_tensor *xy = ts_gather(x, 1, ts_unsqueeze(y, 1)); /* [N, 1] */
    /* max(0, margin - x[y] + x[i])^p w[y] over i != y */
    ts_tensor *z = ts_relu(ts_add(ts_rsub_scalar(xy, margin), x));
    if (p == 2) z = ts_mul(z, z);
    z = ts_mul(z, ts_rsub_scalar(ts_to_dtype(ts_one_hot(y, dim), in->dtype), 1));
    if (w)
        z = ts_mul(z, ts_unsqueeze(ts_index_select(ts_reshape(w, (ts_shape){1, {dim}}), 0, y), 1));
    ts_tensor *loss = ts_div_scalar(ts_sum_dim(z, 1, false), (double)dim);
    if (scalar_out && r == TS_REDUCTION_NONE) return ts_reshape(loss, (ts_shape){0, {0}});
    return tsi_loss_reduce(loss, r);
}

static ts_tensor *multi_margin_loss_op(ts_tensor *input, ts_tensor *target, int p, double margin,
                                       ts_tensor *weight, ts_reduction r) {
    const char *op = "multi_margin_loss";
    tsi_init();
    ts_tensor *ts[3] = {input, target, weight};
    static const char *const names[3] = {"input", "target", "weight"};
    if (!check_all(op, ts, names, 3, 2, r) || !need_float(op, input, "input") ||
        !need_long(op, target, "target") || (weight && !need_float(op, weight, "weight")))
        return NULL;
    if (p != 1 && p != 2)
        return tsi_error_set(TS_ERR_ARG, "%s: only p == 1 and p == 2 supported (got p = %d)", op,
                             p),
               NULL;
    int nd = input->shape.ndim;
    if (!((nd == 2 && input->shape.dims[1] != 0) || (nd == 1 && input->shape.dims[0] != 0) ||
          nd == 0))
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s: Expected non-empty vector or matrix with optional 0-dim batch "
                             "size, but got: %s",
                             op, tsi_shape_str(input->shape)),
               NULL;
    int64_t nframe = nd <= 1 ? 1 : input->shape.dims[0];
    int64_t dim = nd == 0 ? 1 : input->shape.dims[nd - 1];
    if (!(target->shape.ndim <= 1 && ts_numel(target) == nframe))
        return tsi_error_set(TS_ERR_SHAPE, "%s: inconsistent target size, expected %lld but got %s",
                             op, (long long)nframe, tsi_shape_str(target->shape)),
               NULL;
    if (weight && !(weight->shape.ndim <= 1 && ts_numel(weight) == dim))
        return tsi_error_set(TS_ERR_SHAPE, "%s: inconsistent weight size, expected %lld but got %s",
                             op, (long long)dim, tsi_shape_str(weight->shape)),
               NULL;
    double lo, hi;
    if (!int_range(target, &lo, &hi)) return NULL;
    if (lo < 0 || hi >= (double)dim)
        return tsi_error_set(TS_ERR_ARG, "%s: target out of range", op), NULL;
    LOSS_BODY(mm_body(input, target, p, margin, weight, nframe, dim, r, target->shape.ndim == 0));
}

ts_tensor *ts_multi_margin_loss(ts_tensor *input, ts_tensor *target, int p, double margin,
                                ts_tensor *weight, ts_reduction r) {
    tsi_ac_frame ac; /* autocast: float32 */
    TSI_AUTOCAST_ENTER(&ac, "multi_margin_loss", &input, &weight);
    return tsi_autocast_exit(&ac, multi_margin_loss_op(input, target, p, margin, weight, r));
}
