"""tessera.ao.quantization.stubs — QuantStub / DeQuantStub: where quantization starts and ends in
an eager-mode model (identities until convert swaps them for Quantize / DeQuantize)."""
from tessera.nn.module import Module

__all__ = ["QuantStub", "DeQuantStub"]


class QuantStub(Module):
    """torch.ao.quantization.QuantStub: observed by prepare, Quantize after convert"""

    def __init__(self, qconfig=None):
        super().__init__()
        if qconfig:
            self.qconfig = qconfig

    def forward(self, x):
        return x


class DeQuantStub(Module):
    """torch.ao.quantization.DeQuantStub: DeQuantize after convert"""

    def __init__(self, qconfig=None):
        super().__init__()
        if qconfig:
            self.qconfig = qconfig

    def forward(self, x):
        return x
