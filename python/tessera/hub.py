"""tessera.hub — torch.hub's cache: get_dir / set_dir ($TORCH_HOME/hub, $TORCH_HOME defaulting to
$XDG_CACHE_HOME/torch, ~/.cache/torch), load_state_dict_from_url (a file already in
<hub_dir>/checkpoints loads with tessera.load; a missing one is downloaded with urllib, and with no
network the error says so and names the path where the file is expected), download_url_to_file,
and load / list / help of a local directory's hubconf.py (source='local'). GitHub repositories
(source='github') are not fetched."""
import hashlib
import importlib.util
import os
import re
import shutil
import sys
import tempfile
import warnings
from urllib.parse import urlparse  # noqa: F401  (torch.hub.urlparse, imported by timm)

__all__ = ["get_dir", "set_dir", "load_state_dict_from_url", "download_url_to_file", "load",
           "list", "help", "HASH_REGEX"]

ENV_TORCH_HOME = "TORCH_HOME"
ENV_XDG_CACHE_HOME = "XDG_CACHE_HOME"
DEFAULT_CACHE_DIR = "~/.cache"
MODULE_HUBCONF = "hubconf.py"
VAR_DEPENDENCY = "dependencies"
HASH_REGEX = re.compile(r"-([a-f0-9]*)\.")
READ_DATA_CHUNK = 128 * 1024
_hub_dir = None
_builtin_list = list


def _get_torch_home():
    return os.path.expanduser(os.getenv(ENV_TORCH_HOME, os.path.join(
        os.getenv(ENV_XDG_CACHE_HOME, DEFAULT_CACHE_DIR), "torch")))


def get_dir():
    """the hub cache directory: set_dir's, else $TORCH_HOME/hub"""
    if os.getenv("TORCH_HUB"):
        warnings.warn("TORCH_HUB is deprecated, please use env TORCH_HOME instead", stacklevel=2)
    if _hub_dir is not None:
        return _hub_dir
    return os.path.join(_get_torch_home(), "hub")


def set_dir(d):
    """sets the hub cache directory"""
    global _hub_dir
    _hub_dir = os.path.expanduser(os.fspath(d))


def download_url_to_file(url, dst, hash_prefix=None, progress=True):
    """downloads url to dst (urllib; a partial file never replaces dst); with no network access,
    a RuntimeError naming the URL and dst"""
    import urllib.error
    import urllib.request
    dst = os.path.expanduser(dst)
    tmp = tempfile.NamedTemporaryFile(delete=False, dir=os.path.dirname(os.path.abspath(dst)),
                                      prefix=".tmp-hub-")
    try:
        sha = hashlib.sha256()
        try:
            with urllib.request.urlopen(urllib.request.Request(
                    url, headers={"User-Agent": "tessera.hub"}), timeout=30) as u:
                while True:
                    buf = u.read(READ_DATA_CHUNK)
                    if not buf:
                        break
                    tmp.write(buf)
                    sha.update(buf)
        except (urllib.error.URLError, OSError) as e:
            raise RuntimeError(
                "torch.hub: could not download %s (%s): no network access? Put the file at %s "
                "to use it from the cache" % (url, getattr(e, "reason", e), dst)) from None
        tmp.close()
        if hash_prefix is not None and not sha.hexdigest().startswith(hash_prefix):
            raise RuntimeError('invalid hash value (expected "%s", got "%s")'
                               % (hash_prefix, sha.hexdigest()))
        shutil.move(tmp.name, dst)
    finally:
        tmp.close()
        if os.path.exists(tmp.name):
            os.remove(tmp.name)


def load_state_dict_from_url(url, model_dir=None, map_location=None, progress=True,
                             check_hash=False, file_name=None, weights_only=False):
    """torch.hub.load_state_dict_from_url: <model_dir or hub_dir/checkpoints>/<file name> loaded
    with tessera.load, downloaded first if it is not there"""
    if model_dir is None:
        model_dir = os.path.join(get_dir(), "checkpoints")
    os.makedirs(model_dir, exist_ok=True)
    filename = file_name if file_name is not None else os.path.basename(urlparse(url).path)
    cached_file = os.path.join(model_dir, filename)
    if not os.path.exists(cached_file):
        sys.stderr.write('Downloading: "{}" to {}\n'.format(url, cached_file))
        hash_prefix = None
        if check_hash:
            r = HASH_REGEX.search(filename)
            hash_prefix = r.group(1) if r else None
        download_url_to_file(url, cached_file, hash_prefix, progress=progress)
    from .serialization import load as _load
    return _load(cached_file, map_location=map_location, weights_only=weights_only)


def _load_hubconf(repo_dir):
    path = os.path.join(repo_dir, MODULE_HUBCONF)
    if not os.path.isfile(path):
        raise FileNotFoundError("torch.hub: no %s in %s" % (MODULE_HUBCONF, repo_dir))
    sys.path.insert(0, repo_dir)
    try:
        spec = importlib.util.spec_from_file_location("hubconf", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    finally:
        sys.path.remove(repo_dir)
    missing = [d for d in getattr(mod, VAR_DEPENDENCY, []) if importlib.util.find_spec(d) is None]
    if missing:
        raise RuntimeError("Missing dependencies: %s" % ", ".join(missing))
    return mod


def _repo_dir(repo_or_dir, source):
    if source not in ("github", "local"):
        raise ValueError('Unknown source: "%s". Allowed values: "github" | "local".' % source)
    if source == "github":
        raise NotImplementedError(
            "torch.hub: source='github' (%s) is not supported by Tessera: it has no network "
            "access; clone the repository and pass its directory with source='local'"
            % repo_or_dir)
    return os.path.expanduser(repo_or_dir)


def _entry(mod, model):
    fn = getattr(mod, model, None)
    if fn is None or not callable(fn):
        raise RuntimeError("Cannot find callable %s in hubconf" % model)
    return fn


def list(github, force_reload=False, skip_validation=False, trust_repo=None,  # noqa: A001
         verbose=True, source="github"):
    """the entry points of a local directory's hubconf.py"""
    mod = _load_hubconf(_repo_dir(github, source))
    return [f for f in dir(mod) if callable(getattr(mod, f)) and not f.startswith("_")]


def help(github, model, force_reload=False, skip_validation=False, trust_repo=None,  # noqa: A001
         source="github"):
    """an entry point's docstring"""
    return _entry(_load_hubconf(_repo_dir(github, source)), model).__doc__


def load(repo_or_dir, model, *args, source="github", trust_repo=None, force_reload=False,
         verbose=True, skip_validation=False, **kwargs):
    """torch.hub.load with source='local': calls the entry point `model` of repo_or_dir's
    hubconf.py with args and kwargs"""
    return _entry(_load_hubconf(_repo_dir(repo_or_dir, source)), model)(*args, **kwargs)


del _builtin_list
