"""tessera.nn.DataParallel — PyTorch's nn.DataParallel for Python Modules: the batch is split
along dim 0 over the devices, each piece runs the module with its parameters and buffers copied to
that device (Tensor.to is differentiable, so backward sums each replica's gradient into the
original Parameters on device_ids[0]) and the outputs are gathered on output_device.

The replicas run one after the other on the calling thread (a Python forward holds the GIL); on
CUDA the kernels they launch still overlap. A C-built module (nn.GPT, ResNets) runs on one
device."""
from .. import _C
from .module import Module
from .models import CModule


def _all_devices():
    """PyTorch's default: every CUDA device; without any, every sim device (none: run as is)"""
    for kind in ("cuda", "sim"):
        n = _C._device_count(kind)
        if n:
            return [f"{kind}:{i}" for i in range(n)]
    return []


def _name(d):
    return f"cuda:{d}" if isinstance(d, int) else str(d)


class DataParallel(Module):
    def __init__(self, module, device_ids=None, output_device=None, dim=0):
        super().__init__()
        if dim != 0:
            raise NotImplementedError("tessera: DataParallel(dim != 0)")
        self.module = module
        ids = _all_devices() if device_ids is None else [_name(d) for d in device_ids]
        if len(set(ids)) != len(ids):
            raise ValueError("DataParallel: device_ids must be distinct")
        if len(ids) > 1 and isinstance(module, CModule):
            raise NotImplementedError("tessera: DataParallel over a C-built module")
        object.__setattr__(self, "device_ids", ids)
        object.__setattr__(self, "output_device",
                           _name(output_device) if output_device is not None else
                           (ids[0] if ids else None))
        self._check_placement()

    def _check_placement(self):
        if len(self.device_ids) < 2:
            return
        first = _C.device(self.device_ids[0])
        for t in self.module._tensors():
            if t.device != first:
                raise RuntimeError("module must have its parameters and buffers on device "
                                   f"{first} (device_ids[0]) but found one of them on device: "
                                   f"{t.device}")

    def _stores(self):
        """(dict, key, tensor) of every parameter and buffer slot of the module's tree"""
        for m in self.module.modules():
            for store in (m._parameters, m._buffers):
                for k, t in store.items():
                    if t is not None:
                        yield store, k, t

    def _run_replica(self, device, args, kwargs):
        slots = list(self._stores())
        try:
            for store, k, t in slots:
                store[k] = t.to(device)  # a differentiable copy (t itself on device_ids[0])
            return self.module(*args, **kwargs)
        finally:
            for store, k, t in slots:
                store[k] = t

    def forward(self, *inputs, **kwargs):
        if len(self.device_ids) < 2:
            return self.module(*inputs, **kwargs)
        self._check_placement()
        n = len(self.device_ids)
        pieces = [x.chunk(n, 0) if isinstance(x, _C.Tensor) else None for x in inputs]
        count = min(len(p) for p in pieces if p is not None)
        outputs = []
        for i in range(count):
            dev = self.device_ids[i]
            args = [p[i].to(dev) if p is not None else x for p, x in zip(pieces, inputs)]
            outputs.append(self._run_replica(dev, args, kwargs))
        return _C.cat([o.to(self.output_device) for o in outputs], 0)


def __getattr__(name):
    # torch.nn.parallel.DistributedDataParallel: the class tessera.distributed makes on first use
    if name == "DistributedDataParallel":
        from .. import distributed
        return distributed.DistributedDataParallel
    raise AttributeError("module 'tessera.nn.parallel' has no attribute %r" % name)
