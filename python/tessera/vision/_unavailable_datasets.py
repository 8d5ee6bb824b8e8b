"""torchvision.datasets' names whose loaders Tessera does not have (KMNIST, QMNIST, ImageNet,
Places365, INaturalist, SVHN, STL10, ...): the classes exist so that code importing them (timm's
dataset factory) imports, and constructing one raises NotImplementedError naming the data set and
what Tessera does load (MNIST, FashionMNIST, CIFAR10, CIFAR100, ImageFolder, FakeData)."""
from tessera.utils import data as _data

NAMES = ("KMNIST", "QMNIST", "EMNIST", "ImageNet", "Places365", "INaturalist", "SVHN", "STL10",
         "CelebA", "Caltech101", "Caltech256", "Flowers102", "Food101", "OxfordIIITPet",
         "StanfordCars", "FGVCAircraft", "DTD", "EuroSAT", "GTSRB", "LSUN", "CocoDetection",
         "CocoCaptions", "VOCDetection", "VOCSegmentation", "Cityscapes", "SBDataset", "USPS",
         "Omniglot", "PCAM", "Country211", "RenderedSST2", "SUN397", "CLEVRClassification",
         "Kinetics", "HMDB51", "UCF101", "LFWPeople", "LFWPairs", "WIDERFace", "SEMEION",
         "PhotoTour", "SBU", "Flickr8k", "Flickr30k", "Imagenette", "MovingMNIST")
__all__ = list(NAMES)


class _Unavailable(_data.Dataset):
    def __init__(self, *args, **kwargs):
        raise NotImplementedError(
            "torchvision.datasets.%s is not available in Tessera (tessera.vision.datasets loads "
            "MNIST, FashionMNIST, CIFAR10, CIFAR100, ImageFolder / DatasetFolder and FakeData); "
            "an ImageFolder over the extracted files often serves" % type(self).__name__)


for _n in NAMES:
    globals()[_n] = type(_n, (_Unavailable,), {
        "__doc__": "torchvision.datasets.%s: not available in Tessera (constructing it raises "
                   "NotImplementedError)" % _n, "__module__": "tessera.vision.datasets"})
del _n
