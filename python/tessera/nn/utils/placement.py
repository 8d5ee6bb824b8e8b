"""tessera.nn.utils.place: a model spread over devices by memory budget (accelerate's
device_map="auto" with max_memory), over the C library's ts_module_place
(include/tessera/placement.h; docs/PLACEMENT.md)."""


def _budget_string(max_memory):
    if isinstance(max_memory, str):
        return max_memory
    if not isinstance(max_memory, dict) or not max_memory:
        raise TypeError("place: max_memory must be a non-empty dict {device: size} or a string "
                        "'sim:0=2MiB,cpu=64GiB', got %r" % (max_memory,))
    items = []
    for dev, size in max_memory.items():
        if isinstance(size, bool) or not isinstance(size, (int, str)):
            raise TypeError("place: the size for %s must be bytes (int) or a string such as "
                            "'2GiB', got %r" % (dev, size))
        if isinstance(size, int) and size < 0:
            raise ValueError("place: the size for %s is negative (%d)" % (dev, size))
        items.append("%s=%s" % (dev, size))
    return ",".join(items)


def _override_string(overrides):
    if overrides is None or isinstance(overrides, str):
        return overrides
    if not isinstance(overrides, dict):
        raise TypeError("place: overrides must be a dict {pattern: device} or a string "
                        "'pattern=device,...', got %r" % (overrides,))
    items = []
    for pattern, dev in overrides.items():
        if not isinstance(pattern, str) or "," in pattern:
            raise ValueError("place: override pattern %r must be a string without ','"
                             % (pattern,))
        items.append("%s=%s" % (pattern, dev))
    return ",".join(items)


def place(model, max_memory, example_input=None, training=False, output_device=None,
          dry_run=False, overrides=None):
    """Assigns the model's units (a GPT's embeddings, blocks and final norm; a C Sequential's
    children; a tessera.onnx.load model's graph nodes), in execution order, to the devices of
    max_memory in order ({"sim:0": "2MiB", "cpu": "64GiB"} or "sim:0=2MiB,cpu=64GiB"), moves them
    there and joins them with transfers
    (outputs follow the next unit's device, gradients flow back). training=True charges the
    gradients too; example_input charges each unit's output; output_device moves the model's
    output there. overrides ({"tok_emb\\.": "cpu"} or "tok_emb\\.=cpu,...", llama.cpp's
    --override-tensor) stores each parameter or buffer whose dotted name matches a pattern (a
    POSIX extended regex, searched; the first match wins) on that device, charged to its budget,
    and copies it to its unit's device for each forward. Returns the plan as text. A budget too
    small raises MemoryError (tessera's out-of-memory error) naming every device and its size;
    nothing is moved then."""
    c = getattr(model, "_c", None)
    if c is None:
        raise NotImplementedError(
            "place: %s is a Python module; placement by budget works on the models the C "
            "library builds (tessera.nn.GPT, tessera.vision.models' ResNets, "
            "tessera.onnx.load)"
            % type(model).__name__)
    return c.place(_budget_string(max_memory), example_input, bool(training),
                   None if output_device is None else str(output_device), bool(dry_run),
                   _override_string(overrides))
