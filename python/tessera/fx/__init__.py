"""tessera.fx — torch.fx's names that libraries call outside tracing. `wrap` registers a function
as a leaf for symbolic tracing; outside tracing (all Tessera ever does) it is a no-op that returns
its argument, as in PyTorch. Tessera has no symbolic tracer: symbolic_trace, Tracer.trace and
GraphModule raise NotImplementedError naming the limit."""
import inspect

__all__ = ["wrap", "symbolic_trace", "Tracer", "GraphModule", "Graph", "Node", "Proxy",
           "has_side_effect"]

_wrapped = []  # (module globals' name, function name) registered with wrap(), as PyTorch keeps


def _no_tracer(what):
    return NotImplementedError(
        "%s: Tessera has no symbolic tracer (torch.fx graphs are not supported); run the module "
        "eagerly, or extract features with the module's own forward_features / hooks" % what)


def wrap(fn_or_name):
    """torch.fx.wrap: registers a module-level function as a leaf for symbolic tracing and
    returns it unchanged (a no-op outside tracing, which is all Tessera does)"""
    if callable(fn_or_name):
        name = fn_or_name.__name__
    elif isinstance(fn_or_name, str):
        name = fn_or_name
    else:
        raise TypeError("torch.fx.wrap(): expected a function or its name, got %s"
                        % type(fn_or_name).__name__)
    frame = inspect.currentframe().f_back
    _wrapped.append((frame.f_globals.get("__name__"), name))
    return fn_or_name


def has_side_effect(fn):
    """torch.fx.has_side_effect: fn unchanged"""
    return fn


def symbolic_trace(root, concrete_args=None):
    """torch.fx.symbolic_trace: not supported"""
    raise _no_tracer("torch.fx.symbolic_trace")


class Tracer:
    """torch.fx.Tracer: constructible (libraries subclass it to set leaf modules); trace() raises"""

    def __init__(self, autowrap_modules=(), autowrap_functions=(),
                 param_shapes_constant=False):
        self.autowrap_modules, self.autowrap_functions = autowrap_modules, autowrap_functions

    def is_leaf_module(self, m, module_qualified_name):
        return m.__module__.startswith(("torch.nn", "tessera.nn"))

    def trace(self, root, concrete_args=None):
        raise _no_tracer("torch.fx.Tracer.trace")


class GraphModule:
    """torch.fx.GraphModule: never built under Tessera"""

    def __init__(self, *args, **kwargs):
        raise _no_tracer("torch.fx.GraphModule")


class Graph:
    """torch.fx.Graph: never built under Tessera"""

    def __init__(self, *args, **kwargs):
        raise _no_tracer("torch.fx.Graph")


class Node:
    """torch.fx.Node: never built under Tessera (isinstance checks answer False)"""


class Proxy:
    """torch.fx.Proxy: never built under Tessera (isinstance checks answer False)"""


def _assert(condition, message):
    """torch._assert: Python's assert as a function (symbolically traceable in PyTorch)"""
    if type(condition) is not bool and hasattr(condition, "item"):
        condition = bool(condition)
    assert condition, message
