"""tessera.func.functional_call and stack_module_state (PyTorch 2.x semantics).

functional_call runs a module with other tensors in place of its parameters and buffers and puts
the module's own back afterwards, also when the call raises. For a Python module the tensors are
swapped in its `_parameters` / `_buffers` dicts (PyTorch's NamedMemberAccessor does the same), so
the forward computes with the given tensors and gradients reach them, not the module's own.

A C-backed module (nn.models.CModule: MultiheadAttention, TransformerEncoderLayer, RNN/LSTM/GRU,
the model zoo) reads the tensors its C module holds, not the Python dicts. Such a tensor takes a
substitute's values by sharing its storage (Tensor.data) for the call, which autograd does not
see. Where no gradient is recorded (grad mode off, or nothing in the call requires grad) that is
all. Otherwise the whole call runs inside one autograd Function (_CRoute): its forward computes
with the C module's tensors sharing the substitutes' storage and keeps that graph; its backward
shares the storage again and differentiates with respect to the C module's tensors, returning
those gradients as the substitutes' (and the other inputs', the module's own parameters'). The
Function is once differentiable: differentiating its gradients again (create_graph: grad of grad,
hessian) raises instead of giving second derivatives without the C module's part.
"""
from collections.abc import Sequence

from .. import _C

Tensor = _C.Tensor
_MISSING = object()


def _merge_dicts(parameter_and_buffer_dicts):
    if isinstance(parameter_and_buffer_dicts, dict):
        return parameter_and_buffer_dicts
    if isinstance(parameter_and_buffer_dicts, Sequence) and \
            not isinstance(parameter_and_buffer_dicts, str):
        if not all(isinstance(d, dict) for d in parameter_and_buffer_dicts):
            raise ValueError("Expected all elements of parameter_and_buffer_dicts to be "
                             "dictionaries")
        counts = {}
        for d in parameter_and_buffer_dicts:
            for k in d:
                counts[k] = counts.get(k, 0) + 1
        repeated = [k for k, n in counts.items() if n > 1]
        if repeated:
            raise ValueError(f"{repeated} appeared in multiple dictionaries; behavior of "
                             "functional call is ambiguous")
        return {k: v for d in parameter_and_buffer_dicts for k, v in d.items()}
    raise ValueError("Expected parameter_and_buffer_dicts to be a dict, or a list/tuple of dicts, "
                     f"but got {type(parameter_and_buffer_dicts)}")


def _untie(module, given):
    """PyTorch's _untie_named_tensors_map: a value given for one of several names of the same
    tensor goes to all of them"""
    names_of = {}
    for name, t in list(module.named_parameters(remove_duplicate=False)) + \
            list(module.named_buffers(remove_duplicate=False)):
        names_of.setdefault(id(t), set()).add(name)
    tied = {n: names for names in names_of.values() if len(names) > 1 for n in names}
    given_tied = [n for n in given if n in tied]
    for n in given_tied:
        names = tied[n]
        vals = {id(given[m]) for m in names if m in given}
        if len(vals) > 1:
            raise ValueError(f"functional_call got multiple values for keys {sorted(names)}, "
                             "which are tied. Consider using tie_weights=False")
    out = dict(given)
    for n in given_tied:
        for m in tied[n]:
            out[m] = given[n]
    return out


def _check_keys(module, names):
    own = {n for n, _ in module.named_parameters(remove_duplicate=False)}
    own |= {n for n, _ in module.named_buffers(remove_duplicate=False)}
    missing = sorted(own - set(names))
    unexpected = sorted(set(names) - own)
    errors = []
    if unexpected:
        errors.append(f"Unexpected key(s): {', '.join(map(repr, unexpected))}.")
    if missing:
        errors.append(f"Missing key(s): {', '.join(map(repr, missing))}.")
    if errors:
        raise RuntimeError("Error(s) in reparametrizing for {}:\n\t{}".format(
            module._get_name(), "\n\t".join(errors)))


def _c_held(module):
    """{dotted name: (the C-backed module's dotted name, the module)} of every tensor a C module
    holds (its forward reads the C module's handle, not the Python dicts)"""
    from ..nn.models import CModule
    held = {}
    for prefix, m in module.named_modules(remove_duplicate=False):
        if not isinstance(m, CModule) or m.__dict__.get("_c") is None:
            continue
        for store, buffers in (("_parameters", False), ("_buffers", True)):
            for name, _ in m._c.named_tensors(buffers, Tensor):
                held[prefix + ("." if prefix else "") + name] = (prefix, m)
    return held


def _owner(module, name):
    prefix, _, attr = name.rpartition(".")
    if "." in attr or attr == "":
        raise KeyError('tensor name can\'t contain "."' if "." in attr else
                       'tensor name can\'t be empty string ""')
    return module.get_submodule(prefix), attr


def _swap(mod, attr, value):
    """put value at mod.attr (a parameter, buffer or plain attribute); returns what was there"""
    if value is not _MISSING and value is not None and not isinstance(value, Tensor):
        raise TypeError(f"{value} is not an instance of torch.Tensor")
    d = mod.__dict__
    for store in ("_parameters", "_buffers"):
        if attr in d[store]:
            old = d[store][attr]
            if value is _MISSING:
                del d[store][attr]
            else:
                d[store][attr] = value
            return old
    old = d[attr] if attr in d else _MISSING
    if value is _MISSING:
        d.pop(attr, None)
    else:
        d[attr] = value
    return old


def _leaf_tensors(tree):
    from ._pytree import tree_flatten
    return [t for t in tree_flatten(tree)[0] if isinstance(t, Tensor)]


class _Reparametrized:
    """the swap and its undo (a context manager)"""

    def __init__(self, module, values, args, kwargs):
        self.module, self.values = module, values
        self.python, self.c = [], []
        held = _c_held(module) if values else {}
        for name, v in values.items():
            mod, attr = _owner(module, name)
            if name in held:
                cur = _swap_peek(mod, attr)
                if v is not cur:
                    self.c.append((name, held[name], cur, v))
            else:
                self.python.append((mod, attr, v))
        self.no_grad = self.route = False
        if self.c:
            self._check_c(args, kwargs)

    def _check_c(self, args, kwargs):
        from .. import is_grad_enabled
        for name, (prefix, m), cur, v in self.c:
            if not isinstance(v, Tensor):
                raise TypeError(f"tessera.func.functional_call: {name} is held by the C module of "
                                f"{type(m).__name__} '{prefix}' and needs a Tensor, got "
                                f"{type(v).__name__}")
            if tuple(v.shape) != tuple(cur.shape) or v.dtype != cur.dtype or \
                    v.device != cur.device:
                raise RuntimeError(f"tessera.func.functional_call: {name} is held by the C "
                                   f"module of {type(m).__name__} '{prefix}', which needs a "
                                   f"substitute of its shape {tuple(cur.shape)}, dtype {cur.dtype} "
                                   f"and device {cur.device}; got {tuple(v.shape)}, {v.dtype}, "
                                   f"{v.device}")
        if not is_grad_enabled():
            return
        sub = {name for name, *_ in self.c}
        tensors = [v for *_, v in self.c] + _leaf_tensors((args, kwargs))
        tensors += [v for _, _, v in self.python if isinstance(v, Tensor)]
        tensors += [t for n, t in list(self.module.named_parameters(remove_duplicate=False)) +
                    list(self.module.named_buffers(remove_duplicate=False))
                    if n not in sub and n not in self.values]
        if any(t.requires_grad for t in tensors):
            self.route = True  # gradients: the call runs inside _CRoute
            return
        self.no_grad = True  # nothing requires grad: the same results, no graph kept

    def __enter__(self):
        self.undo_python, self.undo_c = [], []
        try:
            for mod, attr, v in self.python:
                self.undo_python.append((mod, attr, _swap(mod, attr, v)))
            for name, _, cur, v in self.c:
                saved = cur.data
                cur.data = v
                self.undo_c.append((cur, saved))
            if self.no_grad:
                from ..autograd import no_grad
                self.grad_mode = no_grad()
                self.grad_mode.__enter__()
        except BaseException:
            self._undo()
            raise
        return self

    def _undo(self):
        for cur, saved in reversed(self.undo_c):
            cur.data = saved
        for mod, attr, old in reversed(self.undo_python):
            _swap(mod, attr, old)
        self.undo_c, self.undo_python = [], []

    def __exit__(self, *exc):
        try:
            if self.no_grad:
                self.grad_mode.__exit__(*exc)
        finally:
            self._undo()
        return False


class _Route:
    """a call of a module whose C module must use substitutes that gradients reach (see the
    module docstring): the Function's inputs are the substitutes, the arguments' tensors and the
    module's own parameters and buffers that require grad (a tensor the forward reads from
    elsewhere, a plain attribute or a closure, gets no gradient); inside, each is the tensor the
    forward reads (the C module's handle sharing the substitute's storage, a detached leaf, the
    parameter itself)"""

    def __init__(self, module, rep, args, kwargs):
        from ._pytree import tree_flatten
        self.module, self.rep = module, rep
        self.flat_in, self.in_spec = tree_flatten((args, kwargs))
        outer, kinds = [], []
        for k, (_, _, _, v) in enumerate(rep.c):
            outer.append(v)
            kinds.append(("c", k))
        for k, (_, _, v) in enumerate(rep.python):
            if isinstance(v, Tensor):
                outer.append(v)
                kinds.append(("py", k))
        for i, x in enumerate(self.flat_in):
            if isinstance(x, Tensor):
                outer.append(x)
                kinds.append(("arg", i))
        seen = set()
        for n, q in list(module.named_parameters(remove_duplicate=False)) + \
                list(module.named_buffers(remove_duplicate=False)):
            if n in rep.values or id(q) in seen or not q.requires_grad:
                continue
            seen.add(id(q))
            outer.append(q)
            kinds.append(("own", None))
        self.outer, self.kinds = outer, kinds

    def _share(self, tensors):
        """the C module's handles on the substitutes' storage, requiring grad; returns the undo"""
        undo = []
        try:
            for (kind, k), v, x in zip(self.kinds, tensors, self.outer):
                if kind == "c":
                    cur = self.rep.c[k][2]
                    undo.append((cur, cur.data, cur.requires_grad))
                    cur.data = v.detach()
                    if x.requires_grad:  # the substitute's: its gradient is wanted
                        cur.requires_grad_(True)
        except BaseException:
            _unshare(undo)
            raise
        return undo

    def forward(self, tensors):
        from ..autograd import enable_grad
        from ._pytree import tree_flatten, tree_unflatten
        inner, targets = [], []
        flat_in = list(self.flat_in)
        python = list(self.rep.python)
        for (kind, k), t in zip(self.kinds, tensors):
            if kind == "c":
                inner.append(None)
                targets.append(self.rep.c[k][2])
                continue
            if kind == "own":
                d = t
            else:
                d = t.detach()
                if t.requires_grad:
                    d.requires_grad_()
                if kind == "py":
                    python[k] = python[k][:2] + (d,)
                else:
                    flat_in[k] = d
            targets.append(d)
        args, kwargs = tree_unflatten(flat_in, self.in_spec)
        with enable_grad():
            undo_c = self._share(tensors)
            undo_py = []
            try:
                for mod, attr, v in python:
                    undo_py.append((mod, attr, _swap(mod, attr, v)))
                out = self.module(*args, **kwargs)
            finally:
                for mod, attr, old in reversed(undo_py):
                    _swap(mod, attr, old)
                _unshare(undo_c)
        flat_out, self.out_spec = tree_flatten(out)
        self.flat_out = flat_out
        self.pos = [i for i, o in enumerate(flat_out) if isinstance(o, Tensor)]
        self.outs = [flat_out[i] for i in self.pos]
        self.targets = targets
        self.saved = tuple(t.detach() for t in tensors)
        return tuple(o.detach() for o in self.outs)

    def backward(self, grads):
        from ..autograd import enable_grad, grad
        pairs = [(o, g) for o, g in zip(self.outs, grads) if g is not None and o.requires_grad]
        want = [j for j, (x, t) in enumerate(zip(self.outer, self.targets))
                if x.requires_grad]
        res = [None] * len(self.outer)
        if not pairs or not want:
            return tuple(res)
        with enable_grad():
            undo = self._share(self.saved)
            try:
                got = grad([o for o, _ in pairs], [self.targets[j] for j in want],
                           [g for _, g in pairs], retain_graph=True, allow_unused=True)
            finally:
                _unshare(undo)
        for j, g in zip(want, got):
            res[j] = g
        return tuple(res)

    def call(self):
        from ._pytree import tree_unflatten
        outs = _c_route().apply(self, *self.outer)
        if not isinstance(outs, tuple):
            outs = (outs,)
        flat = list(self.flat_out)
        for i, o in zip(self.pos, outs):
            flat[i] = o
        return tree_unflatten(flat, self.out_spec)


def _unshare(undo):
    for cur, data, req in reversed(undo):
        cur.data = data
        cur.requires_grad_(req)


_C_ROUTE = []


def _c_route():
    """the autograd Function of _Route (made once, on first use)"""
    if not _C_ROUTE:
        from .._autograd_function import Function, once_differentiable

        class _CRoute(Function):
            @staticmethod
            def forward(ctx, route, *tensors):
                ctx.route = route
                outs = route.forward(tensors)
                ctx.mark_non_differentiable(*[o for o in outs if not o.is_floating_point()])
                return outs

            @staticmethod
            @once_differentiable
            def backward(ctx, *grads):
                return (None,) + ctx.route.backward(grads)
        _C_ROUTE.append(_CRoute)
    return _C_ROUTE[0]


def _swap_peek(mod, attr):
    d = mod.__dict__
    for store in ("_parameters", "_buffers"):
        if attr in d[store]:
            return d[store][attr]
    return getattr(mod, attr, None)


def functional_call(module, parameter_and_buffer_dicts, args=None, kwargs=None, *,
                    tie_weights=True, strict=False):
    """torch.func.functional_call: module(*args, **kwargs) computed with the tensors of
    parameter_and_buffer_dicts (a dict name -> Tensor, or a sequence of such dicts with distinct
    keys) in place of its parameters and buffers; the module's own are back afterwards. args that
    is not a tuple is one argument. tie_weights: a value given for one of several names of one
    tensor is used for all of them. strict: the names must be exactly the module's."""
    values = _merge_dicts(parameter_and_buffer_dicts)
    from ..nn.parallel import DataParallel
    if isinstance(module, DataParallel):
        raise RuntimeError("The stateless API can't be used with nn.DataParallel module")
    if kwargs is None:
        kwargs = {}
    if args is None:
        args = ()
    elif not isinstance(args, tuple):
        args = (args,)
    if tie_weights:
        values = _untie(module, values)
    if strict:
        _check_keys(module, values)
    rep = _Reparametrized(module, values, args, kwargs)
    if rep.route:
        return _Route(module, rep, args, kwargs).call()
    with rep:
        return module(*args, **kwargs)


def _stacked_leaf(tensors, name):
    req = [t.requires_grad for t in tensors]
    if any(req) and not all(req):
        raise RuntimeError(f"Expected {name} from each model to have the same .requires_grad")
    out = _C.stack(list(tensors))
    if all(req):
        out = out.detach().requires_grad_()
    return out


def stack_module_state(models):
    """torch.func.stack_module_state: (params, buffers), each a dict name -> the models' tensors
    stacked along a new first dimension (new leaves that require grad where the models' do), for
    vmap over functional_call (model ensembling)."""
    models = list(models)
    if len(models) == 0:
        raise RuntimeError("stack_module_state: Expected at least one model, got 0.")
    if not (all(m.training for m in models) or all(not m.training for m in models)):
        raise RuntimeError("stack_module_state: Expected all models to have the same training/"
                           "eval mode.")
    if not all(type(m) is type(models[0]) for m in models):
        raise RuntimeError("stack_module_state: Expected all models to be of the same class.")
    all_params = [dict(m.named_parameters()) for m in models]
    params = {k: _stacked_leaf([p[k] for p in all_params], k) for k in all_params[0]}
    all_buffers = [dict(m.named_buffers()) for m in models]
    buffers = {k: _stacked_leaf([b[k] for b in all_buffers], k) for k in all_buffers[0]}
    return params, buffers
