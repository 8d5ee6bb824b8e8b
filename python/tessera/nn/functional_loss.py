"""tessera.nn.functional's other losses (kl_div, huber_loss, the margin and embedding losses,
poisson/gaussian NLL): PyTorch's signatures, each one call of src/nn/loss_pointwise.c or
loss_margin.c through _C._nn_loss_kind (python/src/nn_loss_kinds.c);
triplet_margin_with_distance_loss with a
distance_function calls that function here and hands its distances to
ts_triplet_margin_distance_loss (src/nn/loss_triplet_distance.c)."""
from .. import _C

# kinds of _C._nn_loss_kind (nn_loss_kinds.c's enum)
(_KL_DIV, _HUBER, _SOFT_MARGIN, _MARGIN_RANKING, _HINGE_EMBEDDING, _COSINE_EMBEDDING,
 _TRIPLET_MARGIN, _POISSON_NLL, _GAUSSIAN_NLL, _MULTILABEL_MARGIN, _MULTILABEL_SOFT_MARGIN,
 _MULTI_MARGIN, _TRIPLET_DISTANCES) = range(13)


def _red(reduction, size_average=None, reduce=None):
    from .functional import _reduction
    return _reduction(reduction, size_average, reduce)


def _lm(kind, t0, t1, t2, red, a=0.0, b=0.0, c=0.0, f1=False, f2=False):
    return _C._nn_loss_kind(kind, t0, t1, t2, red, float(a), float(b), float(c), bool(f1),
                            bool(f2))


def kl_div(input, target, size_average=None, reduce=None, reduction="mean", log_target=False):
    if size_average is not None or reduce is not None:
        reduction = ["mean", "sum", "none"][_red(reduction, size_average, reduce)]
    if reduction == "batchmean":
        return _lm(_KL_DIV, input, target, None, 1, f1=True, f2=log_target)
    return _lm(_KL_DIV, input, target, None, _red(reduction), f2=log_target)


def huber_loss(input, target, reduction="mean", delta=1.0, weight=None):
    return _lm(_HUBER, input, target, weight, _red(reduction), a=delta)


def soft_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    return _lm(_SOFT_MARGIN, input, target, None, _red(reduction, size_average, reduce))


def margin_ranking_loss(input1, input2, target, margin=0, size_average=None, reduce=None,
                        reduction="mean"):
    return _lm(_MARGIN_RANKING, input1, input2, target, _red(reduction, size_average, reduce),
               a=margin)


def hinge_embedding_loss(input, target, margin=1.0, size_average=None, reduce=None,
                         reduction="mean"):
    return _lm(_HINGE_EMBEDDING, input, target, None, _red(reduction, size_average, reduce),
               a=margin)


def cosine_embedding_loss(input1, input2, target, margin=0, size_average=None, reduce=None,
                          reduction="mean"):
    return _lm(_COSINE_EMBEDDING, input1, input2, target, _red(reduction, size_average, reduce),
               a=margin)


def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2, eps=1e-6, swap=False,
                        size_average=None, reduce=None, reduction="mean"):
    red = _red(reduction, size_average, reduce)
    if margin <= 0:
        raise ValueError(f"margin must be greater than 0, got {margin}")
    return _lm(_TRIPLET_MARGIN, anchor, positive, negative, red, a=margin, b=p, c=eps, f1=swap)


def triplet_margin_with_distance_loss(anchor, positive, negative, *, distance_function=None,
                                      margin=1.0, swap=False, reduction="mean"):
    red = _red(reduction)
    if margin <= 0:
        raise ValueError(f"triplet_margin_with_distance_loss: expected margin to be greater "
                         f"than 0, got {margin} instead")
    if distance_function is None:  # pairwise_distance's defaults: p 2, eps 1e-6
        return _lm(_TRIPLET_MARGIN, anchor, positive, negative, red, a=margin, b=2.0, c=1e-6,
                   f1=swap)
    a_dim, p_dim, n_dim = anchor.ndim, positive.ndim, negative.ndim
    if not (a_dim == p_dim and p_dim == n_dim):
        raise RuntimeError(f"The anchor, positive, and negative tensors are expected to have the "
                           f"same number of dimensions, but got: anchor {a_dim}D, positive "
                           f"{p_dim}D, and negative {n_dim}D inputs")
    dist_pos = distance_function(anchor, positive)
    dist_neg = distance_function(anchor, negative)
    dist_swap = distance_function(positive, negative) if swap else None
    return _lm(_TRIPLET_DISTANCES, dist_pos, dist_neg, dist_swap, red, a=margin)


def poisson_nll_loss(input, target, log_input=True, full=False, size_average=None, eps=1e-8,
                     reduce=None, reduction="mean"):
    return _lm(_POISSON_NLL, input, target, None, _red(reduction, size_average, reduce), a=eps,
               f1=log_input, f2=full)


def gaussian_nll_loss(input, target, var, full=False, eps=1e-6, reduction="mean"):
    if not isinstance(var, _C.Tensor):  # a float: one variance for every element
        if var < 0:
            raise ValueError("var has negative entry/entries")
        var = _C.full_like(input, float(var))
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{reduction} is not valid")
    return _lm(_GAUSSIAN_NLL, input, target, var, _red(reduction), a=eps, f1=full)


def multilabel_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    return _lm(_MULTILABEL_MARGIN, input, target, None, _red(reduction, size_average, reduce))


def multilabel_soft_margin_loss(input, target, weight=None, size_average=None, reduce=None,
                                reduction="mean"):
    return _lm(_MULTILABEL_SOFT_MARGIN, input, target, weight,
               _red(reduction, size_average, reduce))


def multi_margin_loss(input, target, p=1, margin=1.0, weight=None, size_average=None,
                      reduce=None, reduction="mean"):
    red = _red(reduction, size_average, reduce)
    if p != 1 and p != 2:
        raise ValueError("only p == 1 and p == 2 supported")
    if weight is not None and weight.dim() != 1:
        raise ValueError("weight must be one-dimensional")
    return _lm(_MULTI_MARGIN, input, target, weight, red, a=margin, b=p)
