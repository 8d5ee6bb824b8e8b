"""tessera.cuda.graphs — torch.cuda.graphs' names. Tessera captures and replays whole steps in C
(ts_graph_capture_begin / ts_graph_replay, docs/CAPTURE.md), with no Python binding yet: CUDAGraph
and graph raise NotImplementedError naming that limit, and no stream is ever capturing from
Python. Libraries that name torch.cuda.CUDAGraph in annotations (Hugging Face transformers)
import."""

__all__ = ["CUDAGraph", "graph", "graph_pool_handle", "is_current_stream_capturing",
           "make_graphed_callables"]

_LIMIT = ("Tessera's captured steps (ts_graph_capture_begin / ts_graph_replay in the C library, "
          "docs/CAPTURE.md) have no Python binding yet")


class CUDAGraph:
    def __init__(self, *args, **kwargs):
        raise NotImplementedError("torch.cuda.CUDAGraph: " + _LIMIT)


class graph:  # noqa: N801 (torch's name)
    def __init__(self, *args, **kwargs):
        raise NotImplementedError("torch.cuda.graph: " + _LIMIT)


def graph_pool_handle():
    raise NotImplementedError("torch.cuda.graph_pool_handle: " + _LIMIT)


def make_graphed_callables(*args, **kwargs):
    raise NotImplementedError("torch.cuda.make_graphed_callables: " + _LIMIT)


def is_current_stream_capturing():
    """False: no capture is ever under way from Python."""
    return False
