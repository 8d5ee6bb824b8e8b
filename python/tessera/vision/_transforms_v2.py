"""tessera.vision.transforms.v2: torchvision.transforms.v2's names over tessera.vision.transforms
(the same classes where v2's semantics on plain tensors and PIL images are v1's), plus v2's
ToImage, ToDtype and ToPureTensor. Bounding boxes, masks and the other tv_tensors are not
supported."""
from . import transforms as _t
from .transforms import (CenterCrop, ColorJitter, Compose, GaussianBlur, Grayscale,  # noqa: F401
                         Lambda, Normalize, Pad, PILToTensor, RandomAffine, RandomApply,
                         RandomChoice, RandomCrop, RandomErasing, RandomHorizontalFlip,
                         RandomResizedCrop, RandomRotation, RandomVerticalFlip, Resize,
                         ToPILImage, ToTensor)
from . import transforms_functional as functional  # noqa: F401


class ToImage:
    """a PIL image or an HWC NumPy array -> a [C, H, W] tensor of its own dtype (uint8 stays
    uint8); a tensor passes through"""

    def __call__(self, inpt):
        import numpy as np
        import tessera as ts
        if isinstance(inpt, ts.Tensor):
            return inpt
        if isinstance(inpt, np.ndarray):
            a = inpt[:, :, None] if inpt.ndim == 2 else inpt
            return ts.tensor(np.ascontiguousarray(a.transpose(2, 0, 1)))
        return functional.pil_to_tensor(inpt)

    def __repr__(self):
        return "ToImage()"


class ToDtype:
    """to dtype; scale=True rescales the values as ConvertImageDtype (uint8 <-> float)"""

    def __init__(self, dtype, scale=False):
        if isinstance(dtype, dict):
            raise ValueError("ToDtype: a dict of dtypes per tv_tensor type is not supported")
        self.dtype, self.scale = dtype, scale

    def __call__(self, inpt):
        if self.scale:
            return _t.ConvertImageDtype(self.dtype)(inpt)
        return inpt.to(self.dtype)

    def __repr__(self):
        return f"ToDtype(dtype={self.dtype}, scale={self.scale})"


class ToPureTensor:
    def __call__(self, inpt):
        return inpt


ConvertImageDtype = _t.ConvertImageDtype
