"""tessera.distributed._functional_collectives — the functional collectives transformers imports
(torch.distributed._functional_collectives): wait_tensor and all_to_all_single_autograd.

tessera.distributed's collectives are synchronous, so a result never waits: wait_tensor returns
its argument. all_to_all_single_autograd is the identity in a world of one (a differentiable
copy); over more ranks it raises NotImplementedError (the C library has no all-to-all)."""
from tessera import _C

__all__ = ["wait_tensor", "all_to_all_single_autograd"]


def wait_tensor(tensor):
    """The tensor itself: tessera's collectives have finished when they return."""
    return tensor


def all_to_all_single_autograd(self, output_split_sizes=None, input_split_sizes=None, group=None,
                               tag=""):
    from . import get_world_size
    world = get_world_size()
    if world != 1:
        raise NotImplementedError("all_to_all_single_autograd: tessera.distributed has no "
                                  "all-to-all over %d ranks (a world of one only)" % world)
    n = self.shape[0] if self.dim() else 1
    for name, sizes in (("output_split_sizes", output_split_sizes),
                        ("input_split_sizes", input_split_sizes)):
        if sizes is not None and list(sizes) != [n]:
            raise ValueError("all_to_all_single_autograd: %s=%s, but a world of one has one block "
                             "of %d rows" % (name, list(sizes), n))
    return _C.Tensor.clone(self)
