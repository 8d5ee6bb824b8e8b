"""tessera.func's autodiff transforms: grad, grad_and_value, vjp, jvp, jacrev, jacfwd, hessian.

All are built on tessera.autograd.grad (reverse mode). Each call differentiates at the values it
is given: an input that does not require grad becomes a fresh leaf that does; one that does (an
outer transform's input, or a tensor the caller differentiates later) is aliased by view_as, so
the result stays connected to it. The gradients are computed with create_graph=True when some
outer computation may differentiate them again: inside another transform of this module (grad of
grad, jacfwd(jacrev), hessian) or when an argument already requires grad; otherwise the results
are returned detached, as torch.func's are at the top level. (A tensor that requires grad and is
only captured by the function, not passed, is then not connected: pass it as an argument.)

jvp uses the double-backward trick (J t = d/du <J^T u, t>), so it needs double backward of the
ops involved; jacfwd computes the same numbers as jacrev, by reverse mode (Tessera has no forward
mode AD). jacrev / jacfwd take one backward pass per output element.
"""
import functools

from .. import _C
from ._pytree import tree_flatten, tree_unflatten, tree_map

Tensor = _C.Tensor

# how many transforms of this module are running (an inner one must record its gradients' graph)
_depth = [0]


def _autograd_grad(*args, **kwargs):
    from ..autograd import grad
    return grad(*args, **kwargs)


def _enable_grad():
    from ..autograd import enable_grad
    return enable_grad()


def _prep(x):
    """the tensor a transform differentiates with respect to (see the module docstring)"""
    if not isinstance(x, Tensor):
        return x
    if x.requires_grad:
        return x.view_as(x)
    return x.detach().requires_grad_()


def _any_requires_grad(tree):
    return any(isinstance(t, Tensor) and t.requires_grad for t in tree_flatten(tree)[0])


def _needs_graph(*trees):
    """whether the gradients must be differentiable (an outer transform or caller may use them)"""
    from .. import is_grad_enabled
    return _depth[0] > 0 or (is_grad_enabled() and any(_any_requires_grad(t) for t in trees))


def _call(func, args, kwargs):
    _depth[0] += 1
    try:
        return func(*args, **kwargs)
    finally:
        _depth[0] -= 1


def _detach(tree):
    return tree_map(lambda t: t.detach() if isinstance(t, Tensor) else t, tree)


def _grads(outputs, inputs, grad_outputs, create):
    """d outputs / d inputs (zeros where an input is unused; outputs that do not require grad are
    left out)"""
    pairs = [(o, g) for o, g in zip(outputs, grad_outputs)
             if isinstance(o, Tensor) and o.requires_grad]
    diff = [i for i, x in enumerate(inputs) if isinstance(x, Tensor) and x.requires_grad]
    res = [None] * len(inputs)
    if pairs and diff:
        got = _autograd_grad([o for o, _ in pairs], [inputs[i] for i in diff],
                             [g for _, g in pairs], retain_graph=True, create_graph=create,
                             allow_unused=True)
        for i, g in zip(diff, got):
            res[i] = g
    return [_C.zeros_like(x) if g is None and isinstance(x, Tensor) else g
            for x, g in zip(inputs, res)]


def _check_argnums(argnums, nargs):
    """argnums -> tuple of non-negative indices, and whether it was one int"""
    if isinstance(argnums, bool) or not isinstance(argnums, (int, tuple)):
        raise RuntimeError(f"argnums must be int or Tuple[int, ...], got: {type(argnums)}")
    single = isinstance(argnums, int)
    nums = (argnums,) if single else argnums
    if not nums:
        raise RuntimeError("argnums must be non-empty")
    out = []
    for a in nums:
        if isinstance(a, bool) or not isinstance(a, int):
            raise RuntimeError(f"argnums must be int or Tuple[int, ...], got: {type(argnums)}")
        if not -nargs <= a < nargs:
            raise RuntimeError(f"Got argnum={a}, but only {nargs} positional inputs")
        out.append(a % nargs)
    if len(set(out)) != len(out):
        raise RuntimeError(f"argnums elements must be unique, got {argnums}")
    return tuple(out), single


def _split_aux(out, has_aux, api):
    if not has_aux:
        return out, None
    if not (isinstance(out, tuple) and len(out) == 2):
        raise RuntimeError(f"{api}(f)(*args): output of function f should be a tuple: "
                           "(output, aux) if has_aux is True")
    return out


def _diff_args(args, argnums):
    """(args with the differentiated ones prepared, the differentiated pytree, its leaves, spec)"""
    nums, single = argnums
    args = list(args)
    for a in nums:
        args[a] = tree_map(_prep, args[a])
    diff = args[nums[0]] if single else tuple(args[a] for a in nums)
    leaves, spec = tree_flatten(diff)
    return tuple(args), leaves, spec


def _grad_and_value_impl(func, argnums, has_aux, args, kwargs, api):
    nums = _check_argnums(argnums, len(args))
    create = _needs_graph(args, kwargs)
    with _enable_grad():
        new_args, leaves, spec = _diff_args(args, nums)
        out, aux = _split_aux(_call(func, new_args, kwargs), has_aux, api)
        if not isinstance(out, Tensor):
            raise RuntimeError(f"{api}(f)(*args): Expected f(*args) to return a Tensor, got "
                               f"{type(out)}")
        if out.dim() != 0:
            raise RuntimeError(f"{api}(f)(*args): Expected f(*args) to return a scalar Tensor, "
                               f"got tensor with {out.dim()} dims. Maybe you wanted to use the "
                               "vjp or jacrev APIs instead?")
        grads = _grads([out], leaves, [None], create)
    grads = tree_unflatten(grads, spec)
    if not create:
        grads, out, aux = _detach(grads), out.detach(), _detach(aux)
    return grads, ((out, aux) if has_aux else out)


def grad_and_value(func, argnums=0, has_aux=False):
    """torch.func.grad_and_value: a function returning (gradient, value), or
    (gradient, (value, aux)) with has_aux."""
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        return _grad_and_value_impl(func, argnums, has_aux, args, kwargs, "grad_and_value")
    return wrapper


def grad(func, argnums=0, has_aux=False):
    """torch.func.grad: the gradient of a scalar-valued func with respect to the arguments at
    argnums (an int: that argument's pytree of gradients; a tuple: a tuple of them); with has_aux
    func returns (value, aux) and the result is (gradient, aux)."""
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        g, v = _grad_and_value_impl(func, argnums, has_aux, args, kwargs, "grad_and_value")
        return (g, v[1]) if has_aux else g
    return wrapper


def _check_tensors(tree, what, api):
    leaves, spec = tree_flatten(tree)
    for x in leaves:
        if not isinstance(x, Tensor):
            raise RuntimeError(f"{api}: Expected {what} to be a Tensor or a pytree of Tensors, "
                               f"got {type(x)} as part of it")
    return leaves, spec


def vjp(func, *primals, has_aux=False):
    """torch.func.vjp: (func(*primals), vjp_fn[, aux]); vjp_fn(cotangents) returns a tuple with
    the gradient for each primal (pytrees like them). vjp_fn may be called more than once."""
    create_outer = _needs_graph(primals)
    with _enable_grad():
        prepped = tree_map(_prep, primals)
        out, aux = _split_aux(_call(func, prepped, {}), has_aux, "vjp")
    flat_out, out_spec = _check_tensors(out, "the output of f", "vjp(f, *primals)")
    flat_in, in_spec = tree_flatten(prepped)

    def vjp_fn(cotangents, *, retain_graph=True, create_graph=None):
        flat_ct, ct_spec = tree_flatten(cotangents)
        if ct_spec != out_spec:
            raise RuntimeError("Expected pytree structure of cotangents to be the same as pytree "
                               "structure of outputs to the function. cotangents: "
                               f"{ct_spec}, primal output: {out_spec}")
        for o, c in zip(flat_out, flat_ct):
            if not isinstance(c, Tensor) or tuple(c.shape) != tuple(o.shape):
                got = tuple(c.shape) if isinstance(c, Tensor) else type(c)
                raise RuntimeError("Mismatch in shape: grad_output[0] has a shape of "
                                   f"{got} and output[0] has a shape of {tuple(o.shape)}.")
        create = create_graph if create_graph is not None else (
            create_outer or _needs_graph(cotangents))
        with _enable_grad():
            gs = _grads(flat_out, flat_in, flat_ct, create)
        gs = tree_unflatten(gs, in_spec)
        return gs if create else _detach(gs)

    if not create_outer:
        out, aux = _detach(out), _detach(aux)
    return (out, vjp_fn, aux) if has_aux else (out, vjp_fn)


def _jvp_double_backward(flat_out, flat_in, flat_t, create):
    """J t = d<J^T u, t>/du: u a dummy cotangent per output (J^T u is linear in u)"""
    from .._double_vjp import double_vjp
    _, jv = double_vjp(flat_out, flat_in, flat_t, create)
    return [_C.zeros_like(o) if v is None else v for o, v in zip(flat_out, jv)]


def _jvp_rows(flat_out, flat_in, flat_t, create):
    """J t one output element at a time (one backward pass each; no double backward needed)"""
    jv = []
    for o in flat_out:
        n = o.numel()
        if not (o.requires_grad and n):
            jv.append(_C.zeros_like(o))
            continue
        eye = _C.eye(n, dtype=o.dtype, device=o.device)
        rows = []
        for k in range(n):
            g = _grads([o], flat_in, [eye[k].reshape(o.shape)], create)
            rows.append(sum((gi * t).sum() for gi, t in zip(g, flat_t)))
        jv.append(_C.stack(rows).reshape(o.shape))
    return jv


def jvp(func, primals, tangents, *, strict=False, has_aux=False):
    """torch.func.jvp: (func(*primals), J tangents[, aux]), by the double-backward trick (one
    row at a time, one backward pass per output element, where an op has no double backward)."""
    api = "jvp(f, primals, tangents)"
    if not isinstance(primals, tuple):
        raise RuntimeError(f"{api}: Expected primals to be a tuple. E.g. it should be valid to "
                           "call f(*primals).")
    if not isinstance(tangents, tuple):
        raise RuntimeError(f"{api}: Expected tangents to be a tuple. E.g. it should be valid to "
                           "call f(*primals).")
    if strict:
        raise RuntimeError(f"{api}: strict=True is not supported (neither in torch.func).")
    flat_p, p_spec = _check_tensors(primals, "primals", api)
    flat_t, t_spec = _check_tensors(tangents, "tangents", api)
    if p_spec != t_spec:
        raise RuntimeError(f"{api}: Expected primals and tangents to have the same python "
                           f"structure. For example, if primals is a tuple of 3 tensors, "
                           "tangents also must be. Got primals with structure "
                           f"{p_spec} and tangents with structure {t_spec}")
    for p, t in zip(flat_p, flat_t):
        if tuple(p.shape) != tuple(t.shape):
            raise RuntimeError(f"{api}: Expected primals and tangents to have the same shape. "
                               f"Got primal of shape {tuple(p.shape)} and tangent of shape "
                               f"{tuple(t.shape)}.")
    create = _needs_graph(primals, tangents)
    with _enable_grad():
        prepped = tree_map(_prep, primals)
        out, aux = _split_aux(_call(func, prepped, {}), has_aux, "jvp")
        flat_out, out_spec = _check_tensors(out, "the output of f", api)
        flat_in = tree_flatten(prepped)[0]
        try:
            jv = _jvp_double_backward(flat_out, flat_in, flat_t, create)
        except _C.UnsupportedError:  # an op without double backward: J t row by row
            jv = _jvp_rows(flat_out, flat_in, flat_t, create)
    jv = tree_unflatten(jv, out_spec)
    if not create:
        out, jv, aux = _detach(out), _detach(jv), _detach(aux)
    return (out, jv, aux) if has_aux else (out, jv)


def _check_chunk(chunk_size, api):
    if chunk_size is not None and (isinstance(chunk_size, bool) or
                                   not isinstance(chunk_size, int) or chunk_size <= 0):
        raise ValueError(f"{api}: `chunk_size` should be greater than 0.")


def _jacobian(func, argnums, has_aux, args, kwargs, api):
    nums = _check_argnums(argnums, len(args))
    create = _needs_graph(args, kwargs)
    with _enable_grad():
        new_args, leaves, in_spec = _diff_args(args, nums)
        for x in leaves:
            if not isinstance(x, Tensor):
                raise RuntimeError(f"{api}(func, argnums): Expected the differentiated inputs "
                                   f"to be Tensors, got {type(x)}")
        out, aux = _split_aux(_call(func, new_args, kwargs), has_aux, api)
        flat_out, out_spec = _check_tensors(out, "f's outputs", f"{api}(func, ...)(*args)")
        per_out = []
        for o in flat_out:
            n = o.numel()
            rows = []
            if o.requires_grad and n:
                eye = _C.eye(n, dtype=o.dtype, device=o.device)
                for k in range(n):
                    rows.append(_grads([o], leaves, [eye[k].reshape(o.shape)], create))
            jac = []
            for j, x in enumerate(leaves):
                shape = tuple(o.shape) + tuple(x.shape)
                if rows:
                    jac.append(_C.stack([r[j] for r in rows]).reshape(shape))
                else:
                    jac.append(_C.zeros(shape, dtype=x.dtype, device=x.device))
            per_out.append(tree_unflatten(jac, in_spec))
    res = tree_unflatten(per_out, out_spec)
    if not create:
        res, aux = _detach(res), _detach(aux)
    return (res, aux) if has_aux else res


def jacrev(func, argnums=0, *, has_aux=False, chunk_size=None, _preallocate_and_copy=False):
    """torch.func.jacrev: the Jacobian of func with respect to the arguments at argnums, by one
    backward pass per output element. Each output leaf gives a pytree like the differentiated
    arguments (a tuple of them when argnums is a tuple) of tensors of shape out.shape +
    in.shape. chunk_size is accepted and does not change the result."""
    _check_chunk(chunk_size, "jacrev")

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        return _jacobian(func, argnums, has_aux, args, kwargs, "jacrev")
    return wrapper


def jacfwd(func, argnums=0, has_aux=False, *, randomness="error"):
    """torch.func.jacfwd: the same Jacobian as jacrev — Tessera computes it by reverse mode (no
    forward-mode AD), so the numbers are jacrev's; randomness is accepted for vmap's values."""
    if randomness not in ("error", "different", "same"):
        raise RuntimeError("Only allowed values for randomness are 'error', 'different', or "
                           f"'same'. Got {randomness}")

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        return _jacobian(func, argnums, has_aux, args, kwargs, "jacfwd")
    return wrapper


def hessian(func, argnums=0):
    """torch.func.hessian: jacfwd(jacrev(func, argnums), argnums)."""
    return jacfwd(jacrev(func, argnums), argnums)


def linearize(func, *primals):
    """torch.func.linearize: (func(*primals), jvp_fn) with jvp_fn(*tangents) = J tangents at
    primals (each call runs jvp again: nothing is traced)."""
    out = func(*primals)
    if not _needs_graph(primals):
        out = _detach(out)

    def jvp_fn(*tangents):
        return jvp(func, primals, tangents)[1]
    return out, jvp_fn
