"""The PyTorch API level Tessera answers under tessera.compat, and TorchVersion: a str that compares
with strings, tuples and packaging Versions by PEP 440 (as torch.torch_version.TorchVersion does).
No dependency on `packaging`: a small PEP 440 key of our own (release, pre, post, dev, local)."""
import re

# The PyTorch release whose Python surface Tessera mirrors (the reference it is tested against),
# with a local label naming the backend as PyTorch's wheels do (+cu132): `torch.__version__` and
# importlib.metadata.version("torch") both answer it. PEP 440 ignores nothing here: "2.15.0+tessera"
# >= "2.15.0" and its base_version is "2.15.0", so `version.parse(v) >= version.parse("2.6")` holds.
TORCH_API_VERSION = "2.15.0"
TORCHVISION_API_VERSION = "0.29.2"
LOCAL_LABEL = "tessera"
TORCH_VERSION = TORCH_API_VERSION + "+" + LOCAL_LABEL
TORCHVISION_VERSION = TORCHVISION_API_VERSION + "+" + LOCAL_LABEL

_PEP440 = re.compile(
    r"^\s*v?(?:(?P<epoch>[0-9]+)!)?(?P<release>[0-9]+(?:\.[0-9]+)*)"
    r"(?:[-_\.]?(?P<pre_l>a|b|c|rc|alpha|beta|pre|preview)[-_\.]?(?P<pre_n>[0-9]+)?)?"
    r"(?:(?:-(?P<post_n1>[0-9]+))|(?:[-_\.]?(?P<post_l>post|rev|r)[-_\.]?(?P<post_n2>[0-9]+)?))?"
    r"(?:[-_\.]?(?P<dev_l>dev)[-_\.]?(?P<dev_n>[0-9]+)?)?"
    r"(?:\+(?P<local>[a-z0-9]+(?:[-_\.][a-z0-9]+)*))?\s*$", re.IGNORECASE)
_PRE = {"a": "a", "alpha": "a", "b": "b", "beta": "b", "c": "rc", "rc": "rc", "pre": "rc",
        "preview": "rc"}
_INF, _NINF = (1, ()), (-1, ())  # sort above / below any (0, n)


class InvalidVersion(ValueError):
    """not a PEP 440 version"""


def version_key(s):
    """the PEP 440 sort key of the version string s (packaging.version's ordering)"""
    m = _PEP440.match(str(s))
    if not m:
        raise InvalidVersion("Invalid version: %r" % (s,))
    rel = [int(x) for x in m.group("release").split(".")]
    while len(rel) > 1 and rel[-1] == 0:
        rel.pop()
    pre = (_PRE[m.group("pre_l").lower()], int(m.group("pre_n") or 0)) if m.group("pre_l") else None
    post_n = m.group("post_n1") or m.group("post_n2")
    post = int(post_n or 0) if (m.group("post_n1") or m.group("post_l")) else None
    dev = int(m.group("dev_n") or 0) if m.group("dev_l") else None
    # packaging: a dev release without pre/post sorts before the pre-releases
    pre_k = (_NINF if (pre is None and post is None and dev is not None)
             else _INF if pre is None else (0, pre))
    post_k = _NINF if post is None else (0, post)
    dev_k = _INF if dev is None else (0, dev)
    local = m.group("local")
    local_k = (() if local is None else
               tuple((1, int(p), "") if p.isdigit() else (0, 0, p.lower())
                     for p in re.split(r"[-_\.]", local)))
    return (int(m.group("epoch") or 0), tuple(rel), pre_k, post_k, dev_k, local_k)


def _as_version_string(other):
    if isinstance(other, str):
        return other
    if hasattr(other, "release") and hasattr(other, "public"):  # a packaging Version
        return str(other)
    if isinstance(other, (tuple, list)):
        return ".".join(str(x) for x in other)
    raise InvalidVersion(other)


class TorchVersion(str):
    """torch.__version__: a str that compares with '2.1', (2, 1), (2, 1, 0) and packaging Versions by
    PEP 440 order; a string that is not a version falls back to plain str comparison."""
    __slots__ = ()

    def _cmp(self, other, op):
        try:
            a, b = version_key(self), version_key(_as_version_string(other))
        except InvalidVersion:
            return getattr(str, op)(self, other)
        return getattr(a, op)(b)

    def __lt__(self, other):
        return self._cmp(other, "__lt__")

    def __le__(self, other):
        return self._cmp(other, "__le__")

    def __gt__(self, other):
        return self._cmp(other, "__gt__")

    def __ge__(self, other):
        return self._cmp(other, "__ge__")

    def __eq__(self, other):
        return self._cmp(other, "__eq__")

    def __ne__(self, other):
        return not self.__eq__(other)

    __hash__ = str.__hash__
