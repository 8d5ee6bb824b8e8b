"""tessera.vision.datasets — torchvision.datasets' MNIST, FashionMNIST and CIFAR10, read by the C
library (tessera.utils.data)."""
from tessera.utils.data import CIFAR10, MNIST, FashionMNIST  # noqa: F401

__all__ = ["MNIST", "FashionMNIST", "CIFAR10"]
