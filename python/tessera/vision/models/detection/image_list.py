"""tessera.vision.models.detection.image_list — ImageList: a padded batch of images and the
size (height, width) of each before padding."""

__all__ = ["ImageList"]


class ImageList:
    def __init__(self, tensors, image_sizes):
        self.tensors = tensors
        self.image_sizes = image_sizes

    def to(self, device):
        return ImageList(self.tensors.to(device), self.image_sizes)
