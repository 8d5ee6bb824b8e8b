"""tessera.onnx — ONNX models in and out (the C library's ONNX support, docs/ONNX.md).

load(path) gives a Module that runs the graph in C on any device, with autograd: its initializers
are Parameters under the file's names, so state_dict, optimizers, .to(device) and
DistributedDataParallel work on it. export(model, args, f) writes any Module — written in Python
or built in — as an ONNX file (opset 17): one forward on the example input runs in eval mode under
the C library's trace, which records each op; parameters and buffers become initializers named by
their state-dict names.
"""
from tessera import _C
from tessera.nn.models import CModule

__all__ = ["load", "export", "OnnxModule"]


class OnnxModule(CModule):
    """An ONNX model as a Module: forward(*inputs) gives the graph's output (a tuple when it has
    several)."""

    def forward(self, *inputs):
        self._sync_mode()
        outs = self._c.run(list(inputs))
        return outs[0] if len(outs) == 1 else tuple(outs)

    @property
    def input_names(self):
        return self._c.input_names

    @property
    def output_names(self):
        return self._c.output_names


def load(f, device=None, optimize=False):
    """The ONNX file f as an OnnxModule with its parameters on device (the default device when
    None). optimize=True folds BatchNormalization into convolutions and fuses activations
    (inference only: the parameters are then the folded ones)."""
    return OnnxModule(_C._onnx_load(f, device, optimize))


def export(model, args, f, export_params=True, verbose=False, training=None, input_names=None,
           output_names=None, opset_version=None, dynamic_axes=None, **kwargs):
    """torch.onnx.export for a model of one input: args is the example input (or a 1-tuple).
    dynamic_axes may make dim 0 of the input and the output symbolic ("batch"); other dynamic
    axes are not supported."""
    if isinstance(args, tuple):
        if len(args) != 1:
            raise NotImplementedError("onnx.export: models of one input only (got %d)" % len(args))
        args = args[0]
    if not export_params:
        raise NotImplementedError("onnx.export: export_params=False is not supported")
    dynamic = False
    if dynamic_axes:
        axes = [list(a) if not isinstance(a, dict) else list(a) for a in dynamic_axes.values()]
        if any(a != [0] for a in axes):
            raise NotImplementedError("onnx.export: only dim 0 (the batch) can be dynamic")
        dynamic = True
    was_training = model.training
    model.eval()
    try:
        _C._onnx_export(model, list(model.named_parameters()), list(model.named_buffers()), args,
                        f, dynamic, input_names, output_names, int(opset_version or 0))
    finally:
        model.train(was_training)
