"""torchvision.transforms.InterpolationMode: the interpolation names (str values, torchvision's).
Tessera's resize takes "nearest" and "bilinear"; the others are names a transform may be given
and refuses with a clear error where it cannot compute them."""
from enum import Enum


class InterpolationMode(Enum):
    NEAREST = "nearest"
    NEAREST_EXACT = "nearest-exact"
    BILINEAR = "bilinear"
    BICUBIC = "bicubic"
    BOX = "box"
    HAMMING = "hamming"
    LANCZOS = "lanczos"
