"""tessera.compiler — torch.compiler's names for eager code. Tessera has no graph compiler:
tessera.compile (torch.compile) returns the model or function unchanged and warns once that it
runs eagerly; is_compiling / is_dynamo_compiling / is_exporting are False; disable and
allow_in_graph return their argument."""
import functools
import warnings

__all__ = ["compile", "is_compiling", "is_dynamo_compiling", "is_exporting", "disable",
           "allow_in_graph", "assume_constant_result", "reset", "list_backends",
           "cudagraph_mark_step_begin", "set_stance"]

_warned = []


def compile(model=None, *, fullgraph=False, dynamic=None, backend="inductor", mode=None,  # noqa
            options=None, disable=False):
    """torch.compile: the model or function unchanged (runs eagerly); warns once. Usable as
    compile(m), @compile and @compile(mode=...)"""
    if model is None:
        return functools.partial(compile, fullgraph=fullgraph, dynamic=dynamic, backend=backend,
                                 mode=mode, options=options, disable=disable)
    if not _warned:
        _warned.append(True)
        warnings.warn("torch.compile: Tessera has no graph compiler; the model runs eagerly, "
                      "unchanged (tessera.compiler, a documented limit)", UserWarning,
                      stacklevel=2)
    return model


def is_compiling():
    """False: nothing is ever compiled"""
    return False


def is_dynamo_compiling():
    """False: there is no Dynamo"""
    return False


def is_exporting():
    """False: there is no torch.export"""
    return False


def disable(fn=None, recursive=True, *, reason=None):
    """torch.compiler.disable: fn unchanged (usable as a decorator with or without arguments)"""
    if fn is None:
        return lambda f: f
    return fn


def allow_in_graph(fn):
    """fn unchanged"""
    return fn


def assume_constant_result(fn):
    """fn unchanged"""
    return fn


def reset():
    """nothing is cached"""


def list_backends(exclude_tags=("debug", "experimental")):
    """no compiler backends"""
    return []


def cudagraph_mark_step_begin():
    """nothing to mark (no CUDA graphs from a compiler)"""


def set_stance(stance="default", *, skip_guard_eval_unsafe=False, force_backend=None):
    """accepted; nothing is compiled in any stance"""
    return None
