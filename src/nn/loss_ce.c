/* loss_ce.c — cross_entropy (class indices or probabilities, label smoothing) and nll_loss,
 * composed from log_softmax, gather and reductions; class indices without class weights on an
 * [N, C] or [C] input take the backend's fused kernels where it has them (loss_ce_fused.c). */
#include "amp/autocast.h"
#include "core/capture.h"
#include "nn/functional_internal.h"

/* What the class-index path needs beyond its operands (all scope-owned). */
typedef struct nll_ctx {
    int cd;               /* the class dim: 1, or 0 for an unbatched [C] input */
    int64_t n_ign, n_tgt; /* ignored targets (-1: counted on the device), all targets */
    int64_t classes;
    ts_tensor *ign_mask; /* bool, target's shape; NULL when nothing is ignored */
    ts_tensor *safe;     /* the target with ignored entries pointing at class 0 */
    ts_tensor *wt;       /* each target's class weight, 0 where ignored; NULL without weights */
} nll_ctx;

/* the target value that is ignored: PyTorch's default -100 unless the options set one */
static int64_t ignore_index_of(ts_loss_opts o) {
    return o.has_ignore_index ? o.ignore_index : -100;
}

static bool check_common(const char *op, ts_tensor *in, ts_tensor *tg, ts_loss_opts o) {
    if (!tsi_check_input(op, in, "input") || !tsi_check_input(op, tg, "target")) return false;
    ts_tensor *all[3] = {in, tg, o.weight};
    ts_device dev;
    if (!tsi_same_device(op, all, 3, false, &dev) || !tsi_check_reduction(op, o.reduction))
        return false;
    if (!tsi_is_float(in->dtype))
        return tsi_error_set(TS_ERR_DTYPE, "%s: expected a floating point input, got %s", op,
                             tsi_desc(in)),
               false;
    if (in->shape.ndim < 1)
        return tsi_error_set(TS_ERR_SHAPE, "%s: Expected 1 or more dimensions (got 0)", op), false;
    const int64_t c = in->shape.dims[in->shape.ndim == 1 ? 0 : 1];
    if (o.weight && (o.weight->shape.ndim != 1 || o.weight->shape.dims[0] != c))
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s: weight tensor should be defined either for all %lld classes or "
                             "no classes but got weight tensor of shape: %s",
                             op, (long long)c, tsi_shape_str(o.weight->shape)),
               false;
    if (o.weight && o.weight->dtype != in->dtype)
        return tsi_error_set(TS_ERR_DTYPE, "%s: expected scalar type %s but found %s (weight %s)",
                             op, tsi_torch_scalar_name(in->dtype),
                             tsi_torch_scalar_name(o.weight->dtype), tsi_desc(o.weight)),
               false;
    return true;
}

/* Class-index targets: dtype, shape against the input, range; fills c->n_ign and c->n_tgt. */
static bool check_indices(const char *op, ts_tensor *in, ts_tensor *tg, ts_loss_opts o,
                          nll_ctx *c) {
    if (tg->dtype != TS_I64)
        return tsi_error_set(TS_ERR_DTYPE,
                             "%s: expected scalar type Long but found %s (target %s: class indices "
                             "must be int64)",
                             op, tsi_torch_scalar_name(tg->dtype), tsi_desc(tg)),
               false;
    const ts_shape is = in->shape, ts = tg->shape;
    if (is.ndim == 1 && ts.ndim != 0)
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s: expected a 0-dim target for an unbatched input %s, got target %s",
                             op, tsi_shape_str(is), tsi_shape_str(ts)),
               false;
    if (is.ndim > 1 && (ts.ndim < 1 || ts.dims[0] != is.dims[0]))
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s: Expected input batch_size (%lld) to match target batch_size "
                             "(%lld).",
                             op, (long long)is.dims[0], ts.ndim ? (long long)ts.dims[0] : 0LL),
               false;
    bool fits = is.ndim <= 1 || ts.ndim == is.ndim - 1;
    for (int i = 1; fits && i < ts.ndim; i++) fits = ts.dims[i] == is.dims[i + 1];
    if (!fits) {
        ts_shape want = is;
        want.ndim = is.ndim - 1;
        for (int i = 1; i < want.ndim; i++) want.dims[i] = is.dims[i + 1];
        return tsi_error_set(TS_ERR_SHAPE, "%s: Expected target size %s, got %s", op,
                             tsi_shape_str(want), tsi_shape_str(ts)),
               false;
    }
    c->cd = is.ndim == 1 ? 0 : 1;
    c->n_tgt = tsi_numel(ts);
    const int64_t ignore = ignore_index_of(o), classes = is.dims[c->cd];
    c->classes = classes;
    if (tsi_capturing_on(tsi_device(tg))) {
        /* a captured step reads nothing on the host: the ignored targets are counted on the
         * device and the indices clamped into range (docs/CAPTURE.md) */
        c->n_ign = -1;
        return true;
    }
    int64_t bad;
    if (!tsi_nn_index_scan(op, tg, classes, true, ignore, &c->n_ign, &bad))
        return tsi_error_set(TS_ERR_ARG, "%s: Target %lld is out of bounds.", op, (long long)bad),
               false;
    return true;
}

/* The per-target masks and weights, inside the caller's scope. */
static void nll_prepare(ts_tensor *tg, ts_loss_opts o, nll_ctx *c) {
    const int64_t ignore = ignore_index_of(o);
    c->ign_mask = NULL;
    c->safe = tg;
    c->wt = NULL;
    if (c->n_ign != 0) {
        c->ign_mask = ts_eq_scalar(tg, (double)ignore);
        c->safe = ts_masked_fill(tg, c->ign_mask, 0);
        if (c->n_ign < 0) c->safe = ts_clamp(c->safe, 0, (double)(c->classes - 1));
        /* the ignored targets made class 0 and the rest checked: the gather and its backward
         * need not read them again */
        else if (c->safe && c->classes > 0)
            tsi_index_range_note(c->safe, c->classes);
    }
    if (o.weight) {
        ts_tensor *flat = ts_reshape(c->safe, TS_SHAPE(c->n_tgt));
        c->wt = ts_reshape(ts_index_select(o.weight, 0, flat), tg->shape);
        if (c->ign_mask) c->wt = ts_masked_fill(c->wt, c->ign_mask, 0);
    }
}

/* The mean over the targets that count: divided by their weights' sum (PyTorch's rule) or
 * their number. sum is the sum of the positive log-likelihood terms; returns its negative mean. */
static ts_tensor *neg_mean(ts_tensor *sum, const nll_ctx *c) {
    if (c->wt) return ts_neg(ts_div(sum, ts_sum(c->wt)));
    if (c->n_ign < 0) { /* sum / -count, -count = ignored - targets (exact), as below: the same
                           bits, a NaN's sign included */
        ts_tensor *ignored = ts_sum(ts_to_dtype(c->ign_mask, ts_dtype_of(sum)));
        return ts_div(sum, ts_sub_scalar(ignored, (double)c->n_tgt));
    }
    return ts_div_scalar(sum, -(double)(c->n_tgt - c->n_ign));
}

/* -log_probs[target] * weight[target], 0 where ignored, reduced */
static ts_tensor *nll_core(ts_tensor *lp, ts_reduction r, const nll_ctx *c) {
    ts_tensor *picked = ts_squeeze_dim(ts_gather(lp, c->cd, ts_unsqueeze(c->safe, c->cd)), c->cd);
    if (c->wt) picked = ts_mul(picked, c->wt);
    if (c->ign_mask) picked = ts_masked_fill(picked, c->ign_mask, 0);
    switch (r) {
    case TS_REDUCTION_NONE:
        return ts_neg(picked);
    case TS_REDUCTION_SUM:
        return ts_neg(ts_sum(picked));
    default:
        return neg_mean(ts_sum(picked), c);
    }
}

static ts_tensor *nll_loss_op(ts_tensor *log_probs, ts_tensor *target, ts_loss_opts o) {
    const char *op = "nll_loss";
    tsi_init();
    nll_ctx c;
    if (!check_common(op, log_probs, target, o) || !check_indices(op, log_probs, target, o, &c))
        return NULL;
    ts_scope_begin();
    nll_prepare(target, o, &c);
    ts_tensor *y = nll_core(log_probs, o.reduction, &c);
    y = ts_keep(y);
    ts_scope_end();
    return y;
}

ts_tensor *ts_nll_loss(ts_tensor *log_probs, ts_tensor *target, ts_loss_opts o) {
    tsi_ac_frame ac; /* autocast: float32, the class weights too */
    TSI_AUTOCAST_ENTER(&ac, "nll_loss", &log_probs, &target, &o.weight);
    return tsi_autocast_exit(&ac, nll_loss_op(log_probs, target, o));
}

/* [1, C, 1, ...] (or [C] unbatched): class weights broadcast along the class dim */
static ts_tensor *class_view(ts_tensor *w, ts_tensor *in, int cd) {
    ts_shape s = {.ndim = in->shape.ndim};
    for (int i = 0; i < s.ndim; i++) s.dims[i] = i == cd ? w->shape.dims[0] : 1;
    return ts_reshape(w, s);
}

/* Probability targets: -sum_c w_c p_c log q_c, the mean over the positions (numel / C). */
static ts_tensor *ce_probs(ts_tensor *x, ts_tensor *tg, ts_loss_opts o, int cd) {
    const int64_t classes = x->shape.dims[cd];
    ts_tensor *lp = ts_log_softmax(x, cd);
    if (o.label_smoothing > 0)
        tg = ts_add_scalar(ts_mul_scalar(tg, 1 - o.label_smoothing),
                           o.label_smoothing / (double)classes);
    ts_tensor *prod = ts_mul(lp, tg);
    if (o.weight) prod = ts_mul(prod, class_view(o.weight, x, cd));
    switch (o.reduction) {
    case TS_REDUCTION_NONE:
        return ts_neg(ts_sum_dim(prod, cd, false));
    case TS_REDUCTION_SUM:
        return ts_neg(ts_sum(prod));
    default:
        return ts_div_scalar(ts_sum(prod), -(double)(tsi_numel(x->shape) / classes));
    }
}

/* Class-index targets with label smoothing: (1 - ls) nll + ls / C * (-sum_c w_c log q_c). */
static ts_tensor *ce_indices(ts_tensor *x, ts_tensor *tg, ts_loss_opts o, nll_ctx *c) {
    const double ls = o.label_smoothing;
    nll_prepare(tg, o, c);
    ts_tensor *lp = ts_log_softmax(x, c->cd);
    ts_tensor *nll = nll_core(lp, o.reduction, c);
    if (!(ls > 0)) return nll;
    ts_tensor *all = o.weight ? ts_mul(lp, class_view(o.weight, x, c->cd)) : lp;
    ts_tensor *smooth = ts_sum_dim(all, c->cd, false);
    if (c->ign_mask) smooth = ts_masked_fill(smooth, c->ign_mask, 0);
    switch (o.reduction) {
    case TS_REDUCTION_NONE:
        smooth = ts_neg(smooth);
        break;
    case TS_REDUCTION_SUM:
        smooth = ts_neg(ts_sum(smooth));
        break;
    default:
        smooth = neg_mean(ts_sum(smooth), c);
    }
    const double classes = (double)x->shape.dims[c->cd];
    return ts_add(ts_mul_scalar(nll, 1 - ls), ts_mul_scalar(smooth, ls / classes));
}

/* The mean of the per-row losses' sum over the targets not ignored: counted on the host, or on
 * the device while capturing (neg_mean's count). */
static ts_tensor *counted_mean(ts_tensor *sum, ts_tensor *tg, ts_loss_opts o, const nll_ctx *c) {
    if (c->n_ign >= 0) return ts_div_scalar(sum, (double)(c->n_tgt - c->n_ign));
    ts_tensor *ign_mask = ts_eq_scalar(tg, (double)ignore_index_of(o));
    ts_tensor *ignored = ts_sum(ts_to_dtype(ign_mask, ts_dtype_of(sum)));
    return ts_div(sum, ts_rsub_scalar(ignored, (double)c->n_tgt));
}

/* Class-index targets through the backend's fused kernels: the per-row losses (float32 for
 * float16 / bfloat16 logits) reduced as nll_core reduces, the result rounded once to the logits'
 * dtype. */
static ts_tensor *ce_indices_fused(ts_tensor *x, ts_tensor *tg, ts_loss_opts o, nll_ctx *c) {
    ts_tensor *rows = tsi_cross_entropy_fused(x, tg, ignore_index_of(o), o.label_smoothing);
    ts_tensor *y;
    switch (o.reduction) {
    case TS_REDUCTION_NONE:
        y = rows;
        break;
    case TS_REDUCTION_SUM:
        y = ts_sum(rows);
        break;
    default:
        y = counted_mean(ts_sum(rows), tg, o, c);
    }
    return ts_to_dtype(y, x->dtype);
}

static ts_tensor *cross_entropy_op(ts_tensor *logits, ts_tensor *target, ts_loss_opts o) {
    const char *op = "cross_entropy";
    tsi_init();
    if (!check_common(op, logits, target, o)) return NULL;
    if (!(o.label_smoothing >= 0 && o.label_smoothing <= 1))
        return tsi_error_set(TS_ERR_ARG, "%s: label_smoothing must be between 0.0 and 1.0. Got: %g",
                             op, o.label_smoothing),
               NULL;
    bool probs = logits->shape.ndim == target->shape.ndim;
    for (int i = 0; probs && i < logits->shape.ndim; i++)
        probs = logits->shape.dims[i] == target->shape.dims[i];
    nll_ctx c;
    if (probs && !tsi_is_float(target->dtype))
        return tsi_error_set(TS_ERR_DTYPE,
                             "%s: Expected floating point type for target with class "
                             "probabilities, got %s",
                             op, tsi_torch_scalar_name(target->dtype)),
               NULL;
    if (!probs && !check_indices(op, logits, target, o, &c)) return NULL;
    ts_scope_begin();
    ts_tensor *y = probs ? ce_probs(logits, target, o, logits->shape.ndim == 1 ? 0 : 1)
                   : tsi_cross_entropy_fused_takes(logits, o.weight)
                       ? ce_indices_fused(logits, target, o, &c)
                       : ce_indices(logits, target, o, &c);
    y = ts_keep(y);
    ts_scope_end();
    return y;
}

ts_tensor *ts_cross_entropy_ex(ts_tensor *logits, ts_tensor *target, ts_loss_opts o) {
    tsi_ac_frame ac; /* autocast: float32, the class weights too */
    TSI_AUTOCAST_ENTER(&ac, "cross_entropy", &logits, &target, &o.weight);
    return tsi_autocast_exit(&ac, cross_entropy_op(logits, target, o));
}

ts_tensor *ts_cross_entropy(ts_tensor *logits, ts_tensor *target) {
    return ts_cross_entropy_ex(logits, target, (ts_loss_opts){0});
}
