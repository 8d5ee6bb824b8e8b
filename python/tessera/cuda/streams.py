"""tessera.cuda's streams and events: torch.cuda.Stream, Event, current_stream, default_stream,
stream(...) / StreamContext, set_stream, over the C API's (tessera/cuda.h).

Without CUDA they are host stand-ins, so timing code runs unchanged on any machine: Tessera's cpu
and sim ops have finished when they return, so a stream has nothing pending (synchronize()
returns at once, query() is True), and an Event records the host clock (elapsed_time() in
milliseconds between two records). With CUDA an Event with enable_timing=True times the GPU's
work as torch.cuda.Event does."""
import time

from .. import _C

__all__ = ["Stream", "Event", "current_stream", "default_stream", "stream", "StreamContext",
           "set_stream"]


def _cuda():
    return _C._cuda_is_available()


def _index(device):
    """a CUDA device index from None / int / "cuda:1" / tessera.device (None: current)"""
    if device is None or isinstance(device, int):
        return device
    d = _C.device(device)
    if d.type != "cuda":
        raise ValueError("tessera.cuda: expected a cuda device, got %s" % d)
    return d.index


class Stream:
    """torch.cuda.Stream(device=None, priority=0): a CUDA stream of its own (the C library's
    pool), or without CUDA a host stand-in with nothing ever pending."""

    def __init__(self, device=None, priority=0, **kwargs):
        self._cap = None
        self.device_index = None
        if "_cap" in kwargs:
            self._cap = kwargs["_cap"]
        elif _cuda():
            self._cap = _C._cuda_stream_new(_index(device))
        if self._cap is not None:
            self.device_index, self.cuda_stream = _C._cuda_stream_info(self._cap)
        else:
            self.cuda_stream = 0
        self.priority = priority

    @property
    def device(self):
        return _C.device("cpu") if self._cap is None else _C.device("cuda", self.device_index)

    def synchronize(self):
        if self._cap is not None:
            _C._cuda_stream_synchronize(self._cap)

    def query(self):
        return True if self._cap is None else _C._cuda_stream_query(self._cap)

    def wait_event(self, event):
        if self._cap is not None and event._cap is not None:
            _C._cuda_stream_wait_event(self._cap, event._cap)

    def wait_stream(self, stream):
        """work queued on self from now on waits for what is queued on stream so far"""
        self.wait_event(stream.record_event())

    def record_event(self, event=None):
        event = Event() if event is None else event
        event.record(self)
        return event

    def __eq__(self, other):
        return isinstance(other, Stream) and (self.cuda_stream, self.device_index) == (
            other.cuda_stream, other.device_index)

    def __hash__(self):
        return hash((self.cuda_stream, self.device_index))

    def __repr__(self):
        return "<tessera.cuda.Stream device=%s cuda_stream=%#x>" % (self.device, self.cuda_stream)


def current_stream(device=None):
    """The thread's current stream on the device (None: the current device)."""
    if not _cuda():
        return Stream()
    return Stream(_cap=_C._cuda_stream_current(_index(device)))


def default_stream(device=None):
    if not _cuda():
        return Stream()
    return Stream(_cap=_C._cuda_stream_default(_index(device)))


def set_stream(stream):
    """Makes stream the thread's current one on its device (None: every device back to its
    default stream)."""
    if stream is None or stream._cap is None:
        if _cuda() and stream is None:
            _C._cuda_set_stream(None)
        return
    _C._cuda_set_stream(stream._cap)


class StreamContext:
    """with tessera.cuda.stream(s): ops of the block queue on s; the previous current stream is
    back after it. stream(None) does nothing, as in PyTorch."""

    def __init__(self, stream):
        self.stream = stream
        self._prev = None

    def __enter__(self):
        s = self.stream
        if s is None or s._cap is None:
            return s
        self._prev = Stream(_cap=_C._cuda_stream_current(s.device_index))
        _C._cuda_set_stream(s._cap)
        return s

    def __exit__(self, *exc):
        if self._prev is not None:
            _C._cuda_set_stream(self._prev._cap)
            self._prev = None
        return False


def stream(stream):
    return StreamContext(stream)


class Event:
    """torch.cuda.Event(enable_timing=False, blocking=False, interprocess=False): a CUDA event,
    or without CUDA the host clock at record()."""

    def __init__(self, enable_timing=False, blocking=False, interprocess=False):
        self.enable_timing = enable_timing
        self._cap = _C._cuda_event_new(bool(enable_timing)) if _cuda() else None
        self._host_time = None

    def record(self, stream=None):
        if self._cap is None:
            self._host_time = time.perf_counter()
            return
        _C._cuda_event_record(self._cap, None if stream is None else stream._cap)

    def wait(self, stream=None):
        (current_stream() if stream is None else stream).wait_event(self)

    def query(self):
        return True if self._cap is None else _C._cuda_event_query(self._cap)

    def synchronize(self):
        if self._cap is not None:
            _C._cuda_event_synchronize(self._cap)

    def elapsed_time(self, end_event):
        """Milliseconds from this event's record to end_event's (both need enable_timing)."""
        if not (self.enable_timing and end_event.enable_timing):
            raise RuntimeError("Both events must be created with argument 'enable_timing=True'.")
        if self._cap is None or end_event._cap is None:
            if self._host_time is None or end_event._host_time is None:
                raise RuntimeError("Both events must be recorded before calculating elapsed "
                                   "time.")
            return (end_event._host_time - self._host_time) * 1000.0
        return _C._cuda_event_elapsed(self._cap, end_event._cap)

    def __repr__(self):
        return "<tessera.cuda.Event %s>" % ("cuda" if self._cap is not None else "host")
