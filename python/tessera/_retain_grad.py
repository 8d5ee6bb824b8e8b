"""Tensor.retain_grad / Tensor.retains_grad (python/src/tensor_python_methods.c and autograd.c
forward here): a non-leaf keeps its .grad after backward through a hook that stores it."""

_RETAINING = {}  # id(tensor) -> weakref: the non-leaves whose .grad is kept (one hook each)


def retain_grad(self):
    """Tensor.retain_grad(): after backward a non-leaf's .grad holds its gradient, accumulated
    over backward passes as a leaf's (a hook that stores it); a leaf keeps its .grad anyway"""
    import weakref
    if not self.requires_grad:
        raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
    if self.is_leaf or id(self) in _RETAINING:
        return None
    key = id(self)
    ref = weakref.ref(self, lambda _r, key=key: _RETAINING.pop(key, None))
    _RETAINING[key] = ref

    def keep(grad):
        t = ref()
        if t is not None:
            g = grad.detach()
            t.grad = g.clone() if t.grad is None else t.grad + g
        return None
    self.register_hook(keep)
    return None


def _retains_grad(self):
    """Tensor.retains_grad (python/src/autograd.c): retain_grad() was called on this non-leaf"""
    ref = _RETAINING.get(id(self))
    return ref is not None and ref() is self
