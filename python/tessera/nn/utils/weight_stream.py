"""tessera.nn.utils.stream / unstream / stream_stats: weight streaming, a model whose weights do
not fit on a device run there anyway (its parameters and buffers on the host, each unit's copied
in just before it runs, `prefetch` units ahead, and freed after), over the C library's
ts_module_stream (include/tessera/weight_stream.h; docs/MEMORY_PLANNING.md)."""


def _cmodule(model, fn):
    c = getattr(model, "_c", None)
    if c is None:
        raise NotImplementedError(
            "%s: %s is a Python module; weight streaming works on the models the C library "
            "builds (tessera.nn.GPT, tessera.vision.models' ResNets)" % (fn, type(model).__name__))
    return c


def stream(model, device, prefetch=2):
    """Streams model on device (a sim or cuda device): its parameters and buffers move to the
    host (pinned; the same Parameter objects, values and dtypes) and each forward runs its units
    (a GPT's embeddings, each block, the final norm; a ResNet's stem, blocks, pool and classifier)
    on device, each unit's weights copied in `prefetch` units ahead (on the copy stream, or the
    simulated link) and freed after it ran. The input moves to device; the output stays there.
    In training the weights come in again for each unit's backward and the gradients land in the
    host parameters' .grad, so an optimizer over model.parameters() steps on the host. Errors:
    RuntimeError for a device that is not a sim or cuda device or not available, ValueError for
    a negative prefetch, RuntimeError (tessera's state error) for a model streamed already or
    placed by tessera.nn.utils.place."""
    if isinstance(prefetch, bool) or not isinstance(prefetch, int):
        raise TypeError("stream: prefetch must be an int, got %r" % (prefetch,))
    _cmodule(model, "stream").stream(str(device), prefetch)


def unstream(model):
    """Puts every parameter and buffer (and gradient) of a streamed model back on the device it
    had before stream(). MemoryError when the device cannot hold the model (nothing changed)."""
    _cmodule(model, "unstream").unstream()


def stream_stats(model):
    """The stream's counters since stream(): units, copies, bytes, unit_fetches, prefetched,
    backward_fetches, max_resident_units, max_resident_bytes, cache_flushes (a dict); None when
    the model is not streamed."""
    return _cmodule(model, "stream_stats").stream_stats()
