"""tessera.vision.models.detection.transform — GeneralizedRCNNTransform: normalizes each image,
resizes it (bilinear, so that its short side is min_size and its long side at most max_size, or
to fixed_size), pads the batch to a multiple of size_divisible, scales the targets' boxes /
keypoints / masks with it; postprocess maps detections back to the original sizes."""
import math

import tessera as ts
from tessera import nn
from tessera.nn import functional as F

from .image_list import ImageList

__all__ = ["GeneralizedRCNNTransform", "resize_boxes", "resize_keypoints"]


def _resize_image_and_masks(image, self_min_size, self_max_size, target=None, fixed_size=None):
    im_shape = tuple(image.shape[-2:])
    size = scale_factor = recompute = None
    if fixed_size is not None:
        size = [fixed_size[1], fixed_size[0]]
    else:
        scale_factor = min(self_min_size / min(im_shape), self_max_size / max(im_shape))
        recompute = True
    image = F.interpolate(image[None], size=size, scale_factor=scale_factor, mode="bilinear",
                          recompute_scale_factor=recompute, align_corners=False)[0]
    if target is not None and "masks" in target:
        mask = F.interpolate(target["masks"][:, None].float(), size=size,
                             scale_factor=scale_factor, recompute_scale_factor=recompute)
        target["masks"] = mask[:, 0].to(ts.uint8)
    return image, target


def _ratios(original_size, new_size, device):
    return [ts.tensor(float(s), dtype=ts.float32, device=device)
            / ts.tensor(float(o), dtype=ts.float32, device=device)
            for s, o in zip(new_size, original_size)]


def resize_keypoints(keypoints, original_size, new_size):
    """keypoints [N, K, 3] with x, y scaled from original_size (h, w) to new_size."""
    ratio_h, ratio_w = _ratios(original_size, new_size, keypoints.device)
    return ts.stack((keypoints[..., 0] * ratio_w, keypoints[..., 1] * ratio_h,
                     keypoints[..., 2]), dim=-1)


def resize_boxes(boxes, original_size, new_size):
    """boxes [N, 4] scaled from original_size (h, w) to new_size."""
    ratio_h, ratio_w = _ratios(original_size, new_size, boxes.device)
    xmin, ymin, xmax, ymax = boxes.unbind(1)
    return ts.stack((xmin * ratio_w, ymin * ratio_h, xmax * ratio_w, ymax * ratio_h), dim=1)


class GeneralizedRCNNTransform(nn.Module):
    """forward(images: list of [C, H, W] floats, targets=None) -> (ImageList, targets)."""

    def __init__(self, min_size, max_size, image_mean, image_std, size_divisible=32,
                 fixed_size=None, **kwargs):
        super().__init__()
        if not isinstance(min_size, (list, tuple)):
            min_size = (min_size,)
        self.min_size = min_size
        self.max_size = max_size
        self.image_mean = image_mean
        self.image_std = image_std
        self.size_divisible = size_divisible
        self.fixed_size = fixed_size
        self._skip_resize = kwargs.pop("_skip_resize", False)
        if kwargs:
            raise TypeError("GeneralizedRCNNTransform: unexpected arguments %s"
                            % ", ".join(sorted(kwargs)))

    def forward(self, images, targets=None):
        images = list(images)
        if targets is not None:
            targets = [dict(t) for t in targets]
        for i in range(len(images)):
            image = images[i]
            if image.dim() != 3:
                raise ValueError("images is expected to be a list of 3d tensors of shape "
                                 "[C, H, W], got %s" % (list(image.shape),))
            target = targets[i] if targets is not None else None
            image = self.normalize(image)
            image, target = self.resize(image, target)
            images[i] = image
            if targets is not None and target is not None:
                targets[i] = target
        image_sizes = [(int(img.shape[-2]), int(img.shape[-1])) for img in images]
        batched = self.batch_images(images, size_divisible=self.size_divisible)
        return ImageList(batched, image_sizes), targets

    def normalize(self, image):
        if not image.is_floating_point():
            raise TypeError("Expected input images to be of floating type (in range [0, 1]), "
                            "but found type %s instead" % (image.dtype,))
        mean = ts.as_tensor(self.image_mean, dtype=image.dtype, device=image.device)
        std = ts.as_tensor(self.image_std, dtype=image.dtype, device=image.device)
        return (image - mean[:, None, None]) / std[:, None, None]

    def torch_choice(self, k):
        index = int(ts.empty(1).uniform_(0.0, float(len(k))).item())
        return k[index]

    def resize(self, image, target=None):
        h, w = image.shape[-2:]
        if self.training:
            if self._skip_resize:
                return image, target
            size = self.torch_choice(self.min_size)
        else:
            size = self.min_size[-1]
        image, target = _resize_image_and_masks(image, size, self.max_size, target,
                                                self.fixed_size)
        if target is None:
            return image, target
        new = tuple(image.shape[-2:])
        target["boxes"] = resize_boxes(target["boxes"], (h, w), new)
        if "keypoints" in target:
            target["keypoints"] = resize_keypoints(target["keypoints"], (h, w), new)
        return image, target

    def max_by_axis(self, the_list):
        maxes = list(the_list[0])
        for sub in the_list[1:]:
            for i, item in enumerate(sub):
                maxes[i] = max(maxes[i], item)
        return maxes

    def batch_images(self, images, size_divisible=32):
        """[N, C, H', W'] zero-padded (bottom / right) to the largest image, H' and W' rounded
        up to multiples of size_divisible."""
        max_size = self.max_by_axis([list(img.shape) for img in images])
        stride = float(size_divisible)
        max_size[1] = int(math.ceil(float(max_size[1]) / stride) * stride)
        max_size[2] = int(math.ceil(float(max_size[2]) / stride) * stride)
        padded = [F.pad(img, (0, max_size[2] - img.shape[2], 0, max_size[1] - img.shape[1],
                              0, max_size[0] - img.shape[0])) for img in images]
        return ts.stack(padded)

    def postprocess(self, result, image_shapes, original_image_sizes):
        if self.training:
            return result
        from .roi_heads import paste_masks_in_image
        for i, (pred, im_s, o_im_s) in enumerate(zip(result, image_shapes, original_image_sizes)):
            boxes = resize_boxes(pred["boxes"], im_s, o_im_s)
            result[i]["boxes"] = boxes
            if "masks" in pred:
                result[i]["masks"] = paste_masks_in_image(pred["masks"], boxes, o_im_s)
            if "keypoints" in pred:
                result[i]["keypoints"] = resize_keypoints(pred["keypoints"], im_s, o_im_s)
        return result

    def __repr__(self):
        ind = "\n    "
        return (f"{self.__class__.__name__}({ind}Normalize(mean={self.image_mean}, "
                f"std={self.image_std}){ind}Resize(min_size={self.min_size}, "
                f"max_size={self.max_size}, mode='bilinear')\n)")
