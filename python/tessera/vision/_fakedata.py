"""tessera.vision.datasets.FakeData — torchvision's FakeData: `size` random images, each drawn from a
generator seeded by its index (the same image every time it is read), with a random label."""
import tessera as _t
from tessera.utils.data import Dataset


class FakeData(Dataset):
    """Random uint8 HWC images of image_size (C, H, W) (float CHW after transforms.ToTensor()) and
    int labels in [0, num_classes). Like torchvision, item i is the same on every read; the pixels are
    not torchvision's (a different generator)."""

    def __init__(self, size=1000, image_size=(3, 224, 224), num_classes=10, transform=None,
                 target_transform=None, random_offset=0):
        if len(image_size) != 3:
            raise ValueError("FakeData: image_size must be (C, H, W), got %r" % (image_size,))
        self.size, self.image_size, self.num_classes = int(size), tuple(image_size), int(num_classes)
        self.transform, self.target_transform = transform, target_transform
        self.random_offset = int(random_offset)

    def __len__(self):
        return self.size

    def __getitem__(self, index):
        if not -self.size <= index < self.size:
            raise IndexError("FakeData: index %d out of range for %d images" % (index, self.size))
        index %= self.size
        # as torchvision: seed the global generator by the index, then put its state back
        state = _t.get_rng_state()
        try:
            _t.manual_seed(index + self.random_offset)
            c, h, w = self.image_size
            img = _t.randint(0, 256, (h, w, c)).to(_t.uint8)
            target = int(_t.randint(0, self.num_classes, (1,)).item())
        finally:
            _t.set_rng_state(state)
        if self.transform is not None:
            img = self.transform(img)
        if self.target_transform is not None:
            target = self.target_transform(target)
        return img, target
