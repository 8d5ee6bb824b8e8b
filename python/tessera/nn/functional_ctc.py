"""tessera.nn.functional.ctc_loss: Graves et al.'s CTC forward (alpha) recursion in log space,
one step per time frame over [batch, 2 * max_target + 1] states, composed from tensor ops (so
autograd gives the backward recursion). The label bookkeeping (extended labels, allowed skips,
feasibility) is done on the host.

Gradient with respect to log_probs: PyTorch's, exp(log_probs) - occupancy (its CTC backward
assumes log_probs come from log_softmax; through log_softmax both equal the true gradient of the
loss with respect to the logits). The exp(log_probs) term is added as e - e.detach(), which is
exactly 0 in the forward."""
from .. import _C

_REDUCTIONS = ("none", "mean", "sum")


def _lengths(v, n, name):
    if isinstance(v, _C.Tensor):
        if v.is_floating_point():
            raise RuntimeError(f"ctc_loss: {name} must be integral, got {v.dtype}")
        v = v.reshape(-1).tolist()
    elif isinstance(v, int):
        v = [v]
    v = [int(x) for x in v]
    if len(v) != n:
        raise RuntimeError(f"ctc_loss: {name} must have one entry per batch element ({n}), got "
                           f"{len(v)}")
    if any(x < 0 for x in v):
        raise RuntimeError(f"ctc_loss: {name} must be non-negative, got {v}")
    return v


def _labels(targets, tl, n, c):
    """targets ([N, S] padded or the 1-D concatenation) -> one list of labels per batch element"""
    tg = targets.tolist()
    if targets.ndim == 2:
        if targets.shape[0] != n:
            raise RuntimeError(f"ctc_loss: targets has {targets.shape[0]} rows for a batch of {n}")
        if any(t > targets.shape[1] for t in tl):
            raise RuntimeError(f"ctc_loss: a target length ({max(tl)}) exceeds targets' width "
                               f"({targets.shape[1]})")
        labels = [row[:t] for row, t in zip(tg, tl)]
    elif targets.ndim == 1:
        if sum(tl) > len(tg):
            raise RuntimeError(f"ctc_loss: the target lengths add up to {sum(tl)}, more than the "
                               f"{len(tg)} concatenated targets")
        labels, at = [], 0
        for t in tl:
            labels.append(tg[at:at + t])
            at += t
    else:
        raise RuntimeError(f"ctc_loss: targets must be 1-D or 2-D, got {targets.ndim}-D")
    for lab in labels:
        if any(x < 0 or x >= c for x in lab):
            raise RuntimeError(f"ctc_loss: target labels must be in [0, {c}), got {lab}")
    return labels


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction="mean",
             zero_infinity=False):
    """log_probs [T, N, C] (or unbatched [T, C]), targets [N, S] or the 1-D concatenation of the
    targets -> the negative log likelihood of each target (reduced: 'mean' divides each by its
    target length, then averages)"""
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{reduction} is not a valid value for reduction")
    if not log_probs.is_floating_point():
        raise RuntimeError(f"ctc_loss: log_probs must be floating point, got {log_probs.dtype}")
    unbatched = log_probs.ndim == 2
    if unbatched:
        log_probs = log_probs.unsqueeze(1)
        if targets.ndim == 1:
            targets = targets.unsqueeze(0)
    if log_probs.ndim != 3:
        raise RuntimeError(f"ctc_loss: log_probs must be [T, N, C] or [T, C], got "
                           f"{tuple(log_probs.shape)}")
    T, N, C = log_probs.shape
    if not 0 <= blank < C:
        raise RuntimeError(f"ctc_loss: blank must be in label range [0, {C}), got {blank}")
    il = _lengths(input_lengths, N, "input_lengths")
    tl = _lengths(target_lengths, N, "target_lengths")
    if any(x > T for x in il):
        raise RuntimeError(f"ctc_loss: input length {max(il)} exceeds the {T} frames of "
                           "log_probs")
    labels = _labels(targets, tl, N, C)
    L = max(tl, default=0)
    S = 2 * L + 1
    ext = [[blank if s % 2 == 0 or s >= 2 * len(lab) + 1 else lab[(s - 1) // 2]
            for s in range(S)] for lab in labels]
    skip = [[s % 2 == 1 and s >= 3 and s < 2 * len(lab) + 1 and e[s] != e[s - 2]
             for s in range(S)] for lab, e in zip(labels, ext)]
    repeats = [sum(1 for a, b in zip(lab, lab[1:]) if a == b) for lab in labels]
    feasible = [i >= len(lab) + r for i, lab, r in zip(il, labels, repeats)]
    dev, dt = log_probs.device, log_probs.dtype
    neg = -1e30  # stands for log(0): finite, so that no inf - inf reaches the backward

    def t_(v, dtype):
        return _C.tensor(v, dtype=dtype, device=dev)
    ext_t = t_(ext, _C.int64)
    emit = log_probs.gather(2, ext_t.unsqueeze(0).expand(T, N, S).contiguous())  # [T, N, S]
    skip_t = t_(skip, _C.bool)
    start = t_([[s < 2 and s < 2 * len(lab) + 1 for s in range(S)] for lab in labels], _C.bool)
    negs = _C.full((N, S), neg, dtype=dt, device=dev)
    alpha = _C.where(start, emit[0], negs)
    pad1 = _C.full((N, 1), neg, dtype=dt, device=dev)
    pad2 = _C.full((N, 2), neg, dtype=dt, device=dev)
    for t in range(1, max(il, default=0)):
        a1 = _C.cat([pad1, alpha[:, :-1]], dim=1)
        a2 = _C.where(skip_t, _C.cat([pad2, alpha[:, :-2]], dim=1) if S > 2 else negs, negs)
        new = _C.stack([alpha, a1, a2]).logsumexp(dim=0) + emit[t]
        active = t_([[t < i] for i in il], _C.bool)
        alpha = _C.where(active, new, alpha)
    last = t_([[2 * len(lab)] for lab in labels], _C.int64)
    prev = t_([[max(2 * len(lab) - 1, 0)] for lab in labels], _C.int64)
    has_prev = t_([[len(lab) > 0] for lab in labels], _C.bool)
    end2 = _C.where(has_prev, alpha.gather(1, prev), pad1)
    ll = _C.cat([alpha.gather(1, last), end2], dim=1).logsumexp(dim=1)  # [N]
    if 0 in il:  # no frames: the empty target has probability 1 (the others are infeasible)
        ll = _C.where(t_([i > 0 for i in il], _C.bool), ll, _C.zeros_like(ll))
    # PyTorch's gradient term exp(log_probs) over each element's frames (see the docstring)
    e = log_probs.exp()
    frames = t_([[[float(t < i)] for i in il] for t in range(T)], dt)  # [T, N, 1]
    extra = ((e - e.detach()) * frames).sum(dim=2).sum(dim=0)
    loss = -ll + extra
    ok = t_(feasible, _C.bool)
    fill = _C.zeros_like(loss) if zero_infinity else _C.full_like(loss, float("inf"))
    loss = _C.where(ok, loss, fill)
    if unbatched and reduction == "none":
        return loss.squeeze(0)
    if reduction == "none":
        return loss
    if reduction == "sum":
        return loss.sum()
    return (loss / t_([max(x, 1) for x in tl], dt)).mean()
