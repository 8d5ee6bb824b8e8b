"""tessera.autograd.functional — PyTorch's jacobian, hessian, vjp, jvp, hvp and vhp (issue 53).

The same signatures, argument checks, error messages and result structures as
torch.autograd.functional (PyTorch 2.15), on tessera.autograd.grad:

* `inputs` is a Tensor or a tuple of Tensors (a list is refused, as PyTorch); each is detached into
  a fresh leaf that requires grad, so the function is differentiated at these values.
* Results keep the structure PyTorch gives: `jacobian` of a tensor function of a tensor is one
  tensor of shape out.shape + in.shape, of a tuple function of tuple inputs a tuple (per output)
  of tuples (per input); `vjp` / `jvp` / `vhp` / `hvp` return (outputs, result).
* An output independent of an input gives zeros with strict=False and PyTorch's RuntimeError with
  strict=True.
* `vectorize=True` is accepted and computes the same by the loop over output elements (Tessera
  has no vmap); `strategy="forward-mode"` raises NotImplementedError (no forward-mode AD).
* `jvp` (strict or not, create_graph=False) is J v computed row by row: one reverse pass per
  output element (PyTorch's double-vjp trick needs double backward).
* What needs double backward — `hessian`, `vhp`, `hvp`, and `create_graph=True` anywhere —
  follows PyTorch's algorithm through `grad(..., create_graph=True)`; an op whose backward is not
  differentiable again raises there (docs/PYTHON_AUTOGRAD.md, "Higher-order gradients").
"""
from . import _C

__all__ = ["vjp", "jvp", "jacobian", "hessian", "hvp", "vhp"]

# The primitives used, in one place (a check may bind them to another implementation).
Tensor = _C.Tensor


def _grad(*args, **kwargs):
    from .autograd import grad
    return grad(*args, **kwargs)


def _double_vjp(*args, **kwargs):
    from ._double_vjp import double_vjp
    return double_vjp(*args, **kwargs)


def _enable_grad():
    from .autograd import enable_grad
    return enable_grad()


def _set_grad_enabled(mode):
    from .autograd import set_grad_enabled
    return set_grad_enabled(mode)


# grad(create_graph=True) works (the C engine's create_graph)
_DOUBLE_BACKWARD = True


def _need_double_backward(fn, why):
    if not _DOUBLE_BACKWARD:
        raise NotImplementedError(
            f"tessera.autograd.functional.{fn}: {why} needs double backward "
            "(tessera.autograd.grad(create_graph=True)), which Tessera's C core does not have yet")


_is_grad_enabled = _C.is_grad_enabled
_zeros_like = _C.zeros_like
_stack = _C.stack


# ---------------------------------------------------------------- PyTorch's helpers
def _as_tuple(inp, arg_name, fn_name):
    is_inp_tuple = True
    if not isinstance(inp, tuple):
        inp = (inp,)
        is_inp_tuple = False
    for i, el in enumerate(inp):
        if not isinstance(el, Tensor):
            if is_inp_tuple:
                raise TypeError(f"The {arg_name} given to {fn_name} must be either a Tensor or a "
                                f"tuple of Tensors but the value at index {i} has type "
                                f"{type(el)}.")
            raise TypeError(f"The {arg_name} given to {fn_name} must be either a Tensor or a "
                            f"tuple of Tensors but the given {arg_name} has type {type(el)}.")
    return is_inp_tuple, inp


def _tuple_postprocess(res, to_unpack):
    if isinstance(to_unpack, tuple):
        if not to_unpack[1]:
            res = tuple(el[0] for el in res)
        if not to_unpack[0]:
            res = res[0]
    elif not to_unpack:
        res = res[0]
    return res


def _grad_preprocess(inputs, create_graph, need_graph):
    res = []
    for inp in inputs:
        if create_graph and inp.requires_grad:
            res.append(inp.view_as(inp))
        else:
            res.append(inp.detach().requires_grad_(need_graph))
    return tuple(res)


def _grad_postprocess(inputs, create_graph):
    if isinstance(inputs[0], Tensor):
        if not create_graph:
            return tuple(inp.detach() for inp in inputs)
        return inputs
    return tuple(_grad_postprocess(inp, create_graph) for inp in inputs)


def _result_pair(outputs, res, create_graph, outputs_tuple, res_tuple):
    """(outputs, res) as the functions return them: detached unless create_graph, unpacked to a
    tensor where the caller passed one"""
    return (_tuple_postprocess(_grad_postprocess(outputs, create_graph), outputs_tuple),
            _tuple_postprocess(_grad_postprocess(res, create_graph), res_tuple))


def _validate_v(v, other, is_other_tuple):
    if len(other) != len(v):
        if is_other_tuple:
            raise RuntimeError(f"v is a tuple of invalid length: should be {len(other)} but got "
                               f"{len(v)}.")
        raise RuntimeError("The given v should contain a single Tensor.")
    for idx, (el_v, el_other) in enumerate(zip(v, other)):
        if tuple(el_v.size()) != tuple(el_other.size()):
            prepend = f"Entry {idx} in " if is_other_tuple else ""
            raise RuntimeError(f"{prepend}v has invalid size: should be {el_other.size()} but got "
                               f"{el_v.size()}.")


def _check_requires_grad(inputs, input_type, strict):
    if not strict:
        return
    for i, inp in enumerate(inputs):
        if inp is None:
            raise RuntimeError(f"The output of the user-provided function is independent of input "
                               f"{i}. This is not allowed in strict mode.")
        if not inp.requires_grad:
            if input_type == "hessian":
                raise RuntimeError(
                    f"The hessian of the user-provided function with respect to input {i} is "
                    "independent of the input. This is not allowed in strict mode. You should "
                    "ensure that your function is thrice differentiable and that the hessian "
                    "depends on the inputs.")
            if input_type == "jacobian":
                raise RuntimeError(
                    "While computing the hessian, found that the jacobian of the user-provided "
                    f"function with respect to input {i} is independent of the input. This is "
                    "not allowed in strict mode. You should ensure that your function is twice "
                    "differentiable and that the jacobian depends on the inputs (this would be "
                    "violated by a linear function for example).")
            if input_type == "grad_inputs":
                raise RuntimeError(f"The gradient with respect to input {i} is independent of the "
                                   "inputs of the user-provided function. This is not allowed in "
                                   "strict mode.")
            raise RuntimeError(f"Output {i} of the user-provided function does not require "
                               "gradients. The outputs must be computed in a differentiable "
                               "manner from the input when running in strict mode.")


def _autograd_grad(outputs, inputs, grad_outputs=None, create_graph=False, retain_graph=None):
    if grad_outputs is None:
        grad_outputs = (None,) * len(outputs)
    new_outputs, new_grad_outputs = (), ()
    for out, grad_out in zip(outputs, grad_outputs):
        if out is not None and out.requires_grad:
            new_outputs += (out,)
            new_grad_outputs += (grad_out,)
    if len(new_outputs) == 0:
        return (None,) * len(inputs)
    return _grad(new_outputs, inputs, new_grad_outputs, allow_unused=True,
                 create_graph=create_graph, retain_graph=retain_graph)


def _fill_in_zeros(grads, refs, strict, create_graph, stage):
    res = ()
    for i, grads_i in enumerate(grads):
        if grads_i is None:
            if strict:
                if stage == "back":
                    raise RuntimeError("The output of the user-provided function is independent "
                                       f"of input {i}. This is not allowed in strict mode.")
                if stage == "back_trick":
                    raise RuntimeError(
                        f"The gradient with respect to the input is independent of entry {i} in "
                        "the grad_outputs when using the double backward trick to compute forward "
                        "mode gradients. This is not allowed in strict mode.")
                if stage == "double_back":
                    raise RuntimeError("The jacobian of the user-provided function is independent "
                                       f"of input {i}. This is not allowed in strict mode.")
                raise RuntimeError(
                    "The hessian of the user-provided function is independent of entry "
                    f"{i} in the grad_jacobian. This is not allowed in strict mode as it prevents "
                    "from using the double backward trick to replace forward mode AD.")
            grads_i = _zeros_like(refs[i])
        elif strict and create_graph and not grads_i.requires_grad:
            if "double" not in stage:
                raise RuntimeError("The jacobian of the user-provided function is independent of "
                                   f"input {i}. This is not allowed in strict mode when "
                                   "create_graph=True.")
            raise RuntimeError("The hessian of the user-provided function is independent of "
                               f"input {i}. This is not allowed in strict mode when "
                               "create_graph=True.")
        res += (grads_i,)
    return res


def _one_hot(out, j):
    e = _zeros_like(out).reshape(-1)
    e[j] = 1
    return e.reshape(out.shape)


def _rows(out, inputs, create_graph):
    """d out.flatten()[j] / d inputs, for each j: lists (one per input) of gradients or None"""
    rows = tuple([] for _ in inputs)
    if not out.requires_grad:
        for r in rows:
            r.extend([None] * out.numel())
        return rows
    for j in range(out.numel()):
        g = _grad((out,), inputs, (_one_hot(out, j),), retain_graph=True,
                  create_graph=create_graph, allow_unused=True)
        for r, gj in zip(rows, g):
            r.append(gj)
    return rows


# ---------------------------------------------------------------- the six functions
def vjp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), v^T J): the vector-Jacobian product at inputs (torch.autograd.functional)"""
    if create_graph:
        _need_double_backward("vjp", "create_graph=True")
    with _enable_grad():
        is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "vjp")
        inputs = _grad_preprocess(inputs, create_graph=create_graph, need_graph=True)
        outputs = func(*inputs)
        is_outputs_tuple, outputs = _as_tuple(outputs, "outputs of the user-provided function",
                                              "vjp")
        _check_requires_grad(outputs, "outputs", strict=strict)
        if v is not None:
            _, v = _as_tuple(v, "v", "vjp")
            v = _grad_preprocess(v, create_graph=create_graph, need_graph=False)
            _validate_v(v, outputs, is_outputs_tuple)
        elif len(outputs) != 1 or outputs[0].nelement() != 1:
            raise RuntimeError("The vector v can only be None if the user-provided function "
                               "returns a single Tensor with a single element.")
    with _set_grad_enabled(True if create_graph else _is_grad_enabled()):
        grad_res = _autograd_grad(outputs, inputs, v, create_graph=create_graph)
        res = _fill_in_zeros(grad_res, inputs, strict, create_graph, "back")
    return _result_pair(outputs, res, create_graph, is_outputs_tuple, is_inputs_tuple)


def jvp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), J v): the Jacobian-vector product at inputs (torch.autograd.functional).
    create_graph=False: J v row by row, one reverse pass per output element; create_graph=True:
    PyTorch's double-vjp trick (needs double backward)."""
    if create_graph:
        _need_double_backward("jvp", "create_graph=True")
    with _enable_grad():
        is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "jvp")
        inputs = _grad_preprocess(inputs, create_graph=create_graph, need_graph=True)
        if v is not None:
            _, v = _as_tuple(v, "v", "jvp")
            v = _grad_preprocess(v, create_graph=create_graph, need_graph=False)
            _validate_v(v, inputs, is_inputs_tuple)
        elif len(inputs) != 1 or inputs[0].nelement() != 1:
            raise RuntimeError("The vector v can only be None if the input to the user-provided "
                               "function is a single Tensor with a single element.")
        outputs = func(*inputs)
        is_outputs_tuple, outputs = _as_tuple(outputs, "outputs of the user-provided function",
                                              "jvp")
        _check_requires_grad(outputs, "outputs", strict=strict)
        if create_graph:
            res = _jvp_double_back(outputs, inputs, v, strict)
        else:
            res = _jvp_rows(outputs, inputs, v, strict)
    return _result_pair(outputs, res, create_graph, is_outputs_tuple, is_outputs_tuple)


def _jvp_double_back(outputs, inputs, v, strict):
    _, grad_res = _double_vjp(outputs, inputs, (None,) * len(inputs) if v is None else v, True,
                              lambda first: _check_requires_grad(first, "grad_inputs", strict))
    return _fill_in_zeros(grad_res, outputs, strict, True, "back_trick")


def _jvp_rows(outputs, inputs, v, strict):
    if v is None:
        v = (_C.ones_like(inputs[0]),)
    used = [False] * len(inputs)
    per_out = []
    for out in outputs:
        rows = _rows(out, inputs, False)
        vals, dep = [], False
        for j in range(out.numel()):
            acc = None
            for i, (r, vi) in enumerate(zip(rows, v)):
                if r[j] is None:
                    continue
                used[i] = dep = True
                term = (r[j].to(vi.dtype) * vi).sum()
                acc = term if acc is None else acc + term
            vals.append(acc)
        per_out.append((out, vals, dep))
    if strict:  # PyTorch's order: a gradient input none of the outputs reaches, then an output
        for i, u in enumerate(used):
            if not u:
                raise RuntimeError("The output of the user-provided function is independent of "
                                   f"input {i}. This is not allowed in strict mode.")
    res = ()
    for k, (out, vals, dep) in enumerate(per_out):
        if not dep:
            if strict:
                raise RuntimeError(
                    f"The gradient with respect to the input is independent of entry {k} in "
                    "the grad_outputs when using the double backward trick to compute forward "
                    "mode gradients. This is not allowed in strict mode.")
            res += (_zeros_like(out),)
            continue
        flat = [(val if val is not None else _zeros_like(out).reshape(-1)[0]) for val in vals]
        res += (_stack(flat).reshape(out.shape).to(out.dtype) if flat else _zeros_like(out),)
    return res


def _check_strategy(strategy, what="strategy"):
    if strategy not in ("forward-mode", "reverse-mode"):
        raise AssertionError(f'Expected {what} to be either "forward-mode" or "reverse-mode". '
                             'Hint: If your function has more outputs than inputs, "forward-mode" '
                             'tends to be more performant. Otherwise, prefer to use '
                             '"reverse-mode".')
    if strategy == "forward-mode":
        raise NotImplementedError(f'{what}="forward-mode": Tessera has no forward-mode AD; use '
                                  f'{what}="reverse-mode" (the default)')


def jacobian(func, inputs, create_graph=False, strict=False, vectorize=False,
             strategy="reverse-mode"):
    """The Jacobian of func at inputs (torch.autograd.functional.jacobian): out.shape + in.shape
    per (output, input) pair, by one reverse pass per output element. vectorize=True computes the
    same by the same loop."""
    _check_strategy(strategy)
    if create_graph:
        _need_double_backward("jacobian", "create_graph=True")
    with _enable_grad():
        is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "jacobian")
        inputs = _grad_preprocess(inputs, create_graph=create_graph, need_graph=True)
        outputs = func(*inputs)
        is_outputs_tuple, outputs = _as_tuple(outputs, "outputs of the user-provided function",
                                              "jacobian")
        _check_requires_grad(outputs, "outputs", strict=strict)
        if vectorize and strict:
            raise RuntimeError("torch.autograd.functional.jacobian: `strict=True` and "
                               "`vectorized=True` are not supported together. Please either set "
                               "`strict=False` or `vectorize=False`.")
        jac = ()
        for i, out in enumerate(outputs):
            rows = _rows(out, inputs, create_graph)
            jac_i = ()
            for el_idx, (r, inp) in enumerate(zip(rows, inputs)):
                parts = []
                for g in r:
                    if g is None:
                        if strict:
                            raise RuntimeError(f"Output {i} of the user-provided function is "
                                               f"independent of input {el_idx}. This is not "
                                               "allowed in strict mode.")
                        g = _zeros_like(inp)
                    elif strict and create_graph and not g.requires_grad:
                        raise RuntimeError("The jacobian of the user-provided function is "
                                           f"independent of input {i}. This is not allowed in "
                                           "strict mode when create_graph=True.")
                    parts.append(g)
                shape = tuple(out.shape) + tuple(inp.shape)
                jac_i += (_stack(parts, 0).reshape(shape) if parts
                          else _zeros_like(inp).new_zeros(shape),)
            jac += (jac_i,)
        jac = _grad_postprocess(jac, create_graph) if jac else jac
        return _tuple_postprocess(jac, (is_outputs_tuple, is_inputs_tuple))


def hessian(func, inputs, create_graph=False, strict=False, vectorize=False,
            outer_jacobian_strategy="reverse-mode"):
    """The Hessian of a scalar function at inputs (torch.autograd.functional.hessian): the
    jacobian of the gradient, so it needs double backward (grad(create_graph=True))."""
    is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "hessian")
    _check_strategy(outer_jacobian_strategy, "outer_jacobian_strategy")
    _need_double_backward("hessian", "the Hessian")

    def ensure_single_output_function(*inp):
        out = func(*inp)
        is_out_tuple, t_out = _as_tuple(out, "outputs of the user-provided function", "hessian")
        _check_requires_grad(t_out, "outputs", strict=strict)
        if is_out_tuple or not isinstance(out, Tensor):
            raise RuntimeError("The function given to hessian should return a single Tensor")
        if out.nelement() != 1:
            raise RuntimeError("The Tensor returned by the function given to hessian should "
                               "contain a single element")
        return out.squeeze()

    def jac_func(*inp):
        jac = jacobian(ensure_single_output_function, inp, create_graph=True)
        _check_requires_grad(jac, "jacobian", strict=strict)
        return jac

    res = jacobian(jac_func, inputs, create_graph=create_graph, strict=strict,
                   vectorize=vectorize)
    return _tuple_postprocess(res, (is_inputs_tuple, is_inputs_tuple))


def _second_order_prologue(func, inputs, v, create_graph, strict, name):
    is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", name)
    inputs = _grad_preprocess(inputs, create_graph=create_graph, need_graph=True)
    if v is not None:
        _, v = _as_tuple(v, "v", name)
        v = _grad_preprocess(v, create_graph=create_graph, need_graph=False)
        _validate_v(v, inputs, is_inputs_tuple)
    elif len(inputs) != 1 or inputs[0].nelement() != 1:
        raise RuntimeError("The vector v can only be None if the input to the user-provided "
                           "function is a single Tensor with a single element.")
    outputs = func(*inputs)
    is_outputs_tuple, outputs = _as_tuple(outputs, "outputs of the user-provided function", name)
    _check_requires_grad(outputs, "outputs", strict=strict)
    if is_outputs_tuple or not isinstance(outputs[0], Tensor):
        raise RuntimeError(f"The function given to {name} should return a single Tensor")
    if outputs[0].nelement() != 1:
        raise RuntimeError(f"The Tensor returned by the function given to {name} should contain "
                           "a single element")
    jac = _autograd_grad(outputs, inputs, create_graph=True)
    _check_requires_grad(jac, "jacobian", strict=strict)
    return is_inputs_tuple, inputs, v, outputs, is_outputs_tuple, jac


def vhp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), v^T H) (torch.autograd.functional.vhp); needs double backward"""
    _need_double_backward("vhp", "the vector-Hessian product")
    with _enable_grad():
        is_inputs_tuple, inputs, v, outputs, is_outputs_tuple, jac = _second_order_prologue(
            func, inputs, v, create_graph, strict, "vhp")
    with _set_grad_enabled(True if create_graph else _is_grad_enabled()):
        grad_res = _autograd_grad(jac, inputs, v, create_graph=create_graph)
        res = _fill_in_zeros(grad_res, inputs, strict, create_graph, "double_back")
    return _result_pair(outputs, res, create_graph, is_outputs_tuple, is_inputs_tuple)


def hvp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), H v) (torch.autograd.functional.hvp), by PyTorch's double-vjp trick; needs
    double backward"""
    _need_double_backward("hvp", "the Hessian-vector product")
    with _enable_grad():
        is_inputs_tuple, inputs, v, outputs, is_outputs_tuple, jac = _second_order_prologue(
            func, inputs, v, create_graph, strict, "hvp")
        grad_jac = tuple(_zeros_like(inp).requires_grad_(True) for inp in inputs)
        double_back = _autograd_grad(jac, inputs, grad_jac, create_graph=True)
        _check_requires_grad(jac, "hessian", strict=strict)
    with _set_grad_enabled(True if create_graph else _is_grad_enabled()):
        grad_res = _autograd_grad(double_back, grad_jac, v, create_graph=create_graph)
        res = _fill_in_zeros(grad_res, inputs, strict, create_graph, "double_back_trick")
    return _result_pair(outputs, res, create_graph, is_outputs_tuple, is_inputs_tuple)
