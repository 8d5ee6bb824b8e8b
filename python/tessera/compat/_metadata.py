"""Package metadata for `torch` and `torchvision` under tessera.compat: importlib.metadata's
version(), metadata(), requires(), files() and packages_distributions() answer them from this
Distribution (found through the finder's find_distributions), so that a library's
`importlib.metadata.version("torch")` check sees the PyTorch API level Tessera implements."""
import importlib.metadata as _md
import os

from ._version import TORCH_VERSION, TORCHVISION_VERSION

_SUMMARY = "Tessera under PyTorch's name (tessera.compat): the PyTorch API level Tessera implements"


class TesseraDistribution(_md.Distribution):
    """a Distribution named `name` whose files are the package it stands in for (torch -> tessera,
    torchvision -> tessera.vision)"""

    def __init__(self, name, version, package_dir, requires=()):
        self._name, self._version = name, version
        self._dir = package_dir
        self._requires = list(requires)

    def _record(self):
        base = os.path.dirname(self._dir)
        rows = []
        for root, dirs, files in os.walk(self._dir):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for f in sorted(files):
                rel = os.path.relpath(os.path.join(root, f), base)
                rows.append(rel.replace(os.sep, "/") + ",,")
        return "\n".join(rows) + "\n"

    def read_text(self, filename):
        if filename in ("METADATA", "PKG-INFO"):
            lines = ["Metadata-Version: 2.1", "Name: " + self._name, "Version: " + self._version,
                     "Summary: " + _SUMMARY, "Home-page: https://pytorch.org",
                     "License: BSD-3-Clause", "Requires-Python: >=3.9"]
            lines += ["Requires-Dist: " + r for r in self._requires]
            return "\n".join(lines) + "\n\n"
        if filename == "top_level.txt":
            return self._name + "\n"
        if filename == "RECORD":
            return self._record()
        if filename == "INSTALLER":
            return "tessera.compat\n"
        return None

    def locate_file(self, path):
        return os.path.join(os.path.dirname(self._dir), str(path))

    # RECORD lists tessera's files under their own paths (tessera/...): `files` answers what exists
    # on disk; top_level.txt says `torch`, which is what packages_distributions() maps.


def distributions():
    """the stand-in distributions, {name: Distribution}"""
    import tessera
    tdir = os.path.dirname(tessera.__file__)
    return {
        "torch": TesseraDistribution("torch", TORCH_VERSION, tdir,
                                     requires=("filelock", "typing-extensions>=4.10.0")),
        "torchvision": TesseraDistribution("torchvision", TORCHVISION_VERSION,
                                           os.path.join(tdir, "vision"),
                                           requires=("numpy", "torch==" + TORCH_VERSION)),
    }
