# tessera-corpus: source pytorch/tutorials@04deff56f6db9f3446e45f2a7cb13cc2134632e4 beginner_source/basics/transforms_tutorial.py
"""
Transforms
===================
(the tutorial's prose comments are left out here; the code is as written)
"""

from tessera.vision import datasets  # tessera-corpus: was `from torchvision import datasets`
from tessera.vision.transforms import ToTensor, Lambda  # tessera-corpus: was `from torchvision.transforms import ToTensor, Lambda`

ds = datasets.FashionMNIST(
    root="data",
    train=True,
    download=True,
    transform=ToTensor(),
    target_transform=Lambda(lambda y: torch.zeros(10, dtype=torch.float).scatter_(0, torch.tensor(y), value=1))
)

target_transform = Lambda(lambda y: torch.zeros(
    10, dtype=torch.float).scatter_(dim=0, index=torch.tensor(y), value=1))
