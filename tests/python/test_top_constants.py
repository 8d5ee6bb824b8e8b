"""torch.pi / e / inf / nan / newaxis at tessera's top level (timm's csatv2 builds its DCT
kernel from torch.pi): Python's float constants, and None for newaxis."""
import math

import tessera


def test_constants_are_pythons():
    assert tessera.pi == math.pi and isinstance(tessera.pi, float)
    assert tessera.e == math.e
    assert tessera.inf == math.inf and -tessera.inf == -math.inf
    assert math.isnan(tessera.nan)
    assert tessera.newaxis is None


def test_newaxis_indexes_like_none():
    x = tessera.arange(6.0).reshape(2, 3)
    assert tuple(x[tessera.newaxis].shape) == (1, 2, 3)
    assert tuple(x[:, tessera.newaxis].shape) == (2, 1, 3)
