"""tessera.utils.hooks — torch.utils.hooks: RemovableHandle (the handle that libraries' own hook
registries return; tessera.nn.Module's hooks return nn.module's handle, which has the same
remove() and context manager), unserializable_hook and warn_if_has_hooks. Libraries that import
torch (accelerate) import it by name (issue 75)."""
import warnings
import weakref

__all__ = ["RemovableHandle", "unserializable_hook", "warn_if_has_hooks"]


class RemovableHandle:
    """the handle of a hook stored in hooks_dict under self.id (the caller stores it there):
    remove() deletes it from hooks_dict and from each of extra_dict; a context manager that
    removes it on exit. The dicts are held weakly, as in PyTorch."""
    next_id = 0

    def __init__(self, hooks_dict, *, extra_dict=None):
        self.hooks_dict_ref = weakref.ref(hooks_dict)
        self.id = RemovableHandle.next_id
        RemovableHandle.next_id += 1
        extra = [] if extra_dict is None else (
            [extra_dict] if isinstance(extra_dict, dict) else list(extra_dict))
        self.extra_dict_ref = tuple(weakref.ref(d) for d in extra)

    def remove(self):
        for ref in (self.hooks_dict_ref,) + self.extra_dict_ref:
            d = ref()
            if d is not None and self.id in d:
                del d[self.id]

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


def unserializable_hook(f):
    """marks a hook as not to be serialized (PyTorch warns when pickling a tensor with others)"""
    f.__torch_unserializable__ = True
    return f


def warn_if_has_hooks(tensor):
    """PyTorch's warning for a tensor saved with backward hooks that are not marked
    unserializable_hook"""
    for hook in (getattr(tensor, "_backward_hooks", None) or {}).values():
        if not hasattr(hook, "__torch_unserializable__"):
            warnings.warn(f"backward hook {hook} on tensor will not be serialized.  If this is "
                          "expected, you can decorate the function with "
                          "@torch.utils.hooks.unserializable_hook to suppress this warning")
