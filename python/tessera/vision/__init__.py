"""tessera.vision — torchvision's names for the C library's image data sets and transforms:
`import tessera.vision.transforms as transforms`, `from tessera.vision.datasets import CIFAR10`."""
from . import datasets, io, models, transforms, utils  # noqa: F401
