"""tessera.func — PyTorch's torch.func (functorch) transforms: functional_call,
stack_module_state, grad, grad_and_value, vjp, jvp, jacrev, jacfwd, hessian and vmap.

The autodiff transforms run on tessera.autograd.grad (reverse mode, with create_graph for the
nested ones); jvp uses the double-backward trick and jacfwd computes jacrev's numbers by reverse
mode; vmap is a loop over the samples (see each submodule's docstring for what differs from
PyTorch's batching rules). docs/PYTHON_AUTOGRAD.md, "tessera.func"."""
from ._functional_call import functional_call, stack_module_state
from ._grad import grad, grad_and_value, vjp, jvp, jacrev, jacfwd, hessian, linearize
from ._vmap import vmap


def functionalize(func, *, remove="mutations"):
    """torch.func.functionalize: func itself (Tessera's transforms run the mutations eagerly,
    which gives the same results)."""
    if remove not in ("mutations", "mutations_and_views"):
        raise RuntimeError(f"functionalize(f, remove='mutations'): received invalid argument "
                             f"for remove={remove}. Valid options are:\n     remove='mutations': "
                             "all inplace and out= operators will be removed from the program, "
                             "and replaced with their out-of-place equivalents.\n     "
                             "remove='mutations_and_views': In addition to the above, all "
                             "aliasing operators {view} will be replaced with their non-aliasing "
                             "counterparts, {view}_copy.\n")
    return func

__all__ = ["functional_call", "stack_module_state", "grad", "grad_and_value", "vjp", "jvp",
           "jacrev", "jacfwd", "hessian", "linearize", "vmap", "functionalize"]

from ..nn.utils import stateless  # noqa: E402,F401  (torch.nn.utils.stateless, bound on nn.utils)
del stateless
