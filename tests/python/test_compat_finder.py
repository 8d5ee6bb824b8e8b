"""tessera.compat: `import torch` / `import torchvision` answered by Tessera (the finder, the
package metadata, TorchVersion's comparisons, refusing to hide a real PyTorch, and the
`python -m tessera.compat` entry point)."""
import importlib
import importlib.metadata as md
import os
import subprocess
import sys

import pytest

import tessera
import tessera.compat as compat
from tessera.compat import TorchVersion, RealTorchError
from tessera.compat._version import version_key, InvalidVersion


@pytest.fixture
def installed():
    compat.uninstall()
    compat.install()
    yield
    compat.uninstall()


def test_version_constant_is_pep440_with_local_label():
    assert compat.TORCH_VERSION == "2.15.0+tessera"
    assert version_key(compat.TORCH_VERSION)[1] == (2, 15)


@pytest.mark.parametrize("a,b", [  # each pair: a < b in packaging.version's order
    ("2.6.0", "2.15.0"), ("2.15.0", "2.15.0+tessera"), ("2.15.0rc1", "2.15.0"),
    ("2.15.0.dev1", "2.15.0a1"), ("2.15.0a1", "2.15.0b1"), ("2.15.0", "2.15.0.post1"),
    ("2.15.0+abc", "2.15.0+1"), ("1.13.1", "2.0"), ("2.9", "2.10")])
def test_pep440_order(a, b):
    assert version_key(a) < version_key(b)
    assert TorchVersion(a) < b and TorchVersion(b) > a


def test_torchversion_compares_like_pytorch():
    v = TorchVersion("2.15.0+tessera")
    assert isinstance(v, str) and v == "2.15.0+tessera"
    assert v >= "2.6" and v >= (2, 15) and v > (2, 14, 9) and not v < (2, 15)
    assert v != "2.14.0" and v <= "2.16"
    assert {v: 1}["2.15.0+tessera"] == 1  # still hashes as its string
    assert v.startswith("2.15")
    with pytest.raises(InvalidVersion):
        version_key("parrot")
    assert TorchVersion("parrot") < "zebra"  # not a version: plain string order


def test_packaging_accepts_it_if_present():
    packaging = pytest.importorskip("packaging.version")
    V = packaging.Version
    assert V(compat.TORCH_VERSION) >= V("2.6.0")
    assert V(V(compat.TORCH_VERSION).base_version) == V("2.15.0")
    assert TorchVersion(compat.TORCH_VERSION) >= V("2.6")


def test_submodules_are_tesseras_own(installed):
    import torch
    import torch.nn.functional as F
    from torch.utils.data import DataLoader
    import torchvision
    import torchvision.transforms.functional as TF
    assert torch.nn is tessera.nn and F is tessera.nn.functional
    assert sys.modules["torch.nn.functional"] is tessera.nn.functional
    assert DataLoader is tessera.utils.data.DataLoader
    assert torch.Tensor is tessera.Tensor and isinstance(torch.zeros(1), tessera.Tensor)
    assert TF is tessera.vision.transforms_functional
    assert torchvision.models is tessera.vision.models
    assert tessera.nn.functional.__spec__.name == "tessera.nn.functional"  # its own spec kept
    assert torch.__version__ == compat.TORCH_VERSION and isinstance(torch.__version__, TorchVersion)
    assert torchvision.__version__ == compat.TORCHVISION_VERSION
    assert torch.version.__version__ == torch.__version__ and torch.version.cuda is None
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("torch.no_such_module")
    with pytest.raises(AttributeError, match="Tessera does not implement"):
        torch.no_such_name


def test_writes_land_on_tessera(installed):
    import torch
    torch._compat_test_attr = 5
    try:
        assert tessera._compat_test_attr == 5
    finally:
        del torch._compat_test_attr
    assert not hasattr(tessera, "_compat_test_attr")


def test_metadata(installed):
    assert md.version("torch") == compat.TORCH_VERSION
    assert md.version("torchvision") == compat.TORCHVISION_VERSION
    assert md.distribution("torch").metadata["Name"] == "torch"
    assert any(r.startswith("filelock") for r in md.requires("torch"))
    files = md.files("torch")
    assert files and any(str(f).endswith("__init__.py") for f in files)
    assert all(os.path.exists(f.locate()) for f in files[:20])
    assert "torch" in md.packages_distributions().get("torch", [])


def test_uninstall_removes_everything(installed):
    import torch  # noqa: F401
    compat.uninstall()
    assert "torch" not in sys.modules and not compat.is_installed()
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("torch")
    with pytest.raises(md.PackageNotFoundError):
        md.version("torch")


def _fake_torch(tmp_path):
    pkg = tmp_path / "torch"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("__version__ = 'real'\n")
    dist = tmp_path / "torch-2.5.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: torch\nVersion: 2.5.0\n")
    return str(tmp_path)


def test_real_torch_is_never_hidden_unless_asked(tmp_path, monkeypatch):
    compat.uninstall()
    monkeypatch.syspath_prepend(_fake_torch(tmp_path))
    importlib.invalidate_caches()
    monkeypatch.delenv(compat.FORCE_ENV, raising=False)
    with pytest.raises(RealTorchError, match="a real PyTorch is importable"):
        compat.install()
    assert not compat.is_installed()
    try:
        compat.install(force=True)
        import torch
        assert torch.__version__ == compat.TORCH_VERSION
        assert md.version("torch") == compat.TORCH_VERSION  # ours is found first
    finally:
        compat.uninstall()
    monkeypatch.setenv(compat.FORCE_ENV, "1")
    try:
        compat.install()
        assert compat.is_installed()
    finally:
        compat.uninstall()
    sys.modules.pop("torch", None)


def test_real_torch_already_imported_is_refused(tmp_path, monkeypatch):
    compat.uninstall()
    monkeypatch.syspath_prepend(_fake_torch(tmp_path))
    importlib.invalidate_caches()
    import torch
    try:
        assert torch.__version__ == "real"
        with pytest.raises(RealTorchError, match="already imported"):
            compat.install(force=True)
    finally:
        sys.modules.pop("torch", None)


def _run(args, tmp_path, env_extra=None):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [os.path.dirname(os.path.dirname(tessera.__file__))] + sys.path[1:])
    env.update(env_extra or {})
    return subprocess.run([sys.executable, "-m", "tessera.compat"] + args, cwd=str(tmp_path),
                          env=env, capture_output=True, text=True, timeout=120)


def test_cli_script_module_and_code(tmp_path):
    (tmp_path / "prog.py").write_text(
        "import sys, torch, torch.nn as nn\n"
        "print('ARGV', sys.argv)\nprint('VER', torch.__version__)\n"
        "print('NAME', __name__, nn.Linear(2, 3)(torch.ones(1, 2)).shape)\n")
    r = _run(["prog.py", "a", "--b"], tmp_path)
    assert r.returncode == 0, r.stderr
    assert "ARGV ['prog.py', 'a', '--b']" in r.stdout and "VER 2.15.0+tessera" in r.stdout
    assert "NAME __main__" in r.stdout
    r = _run(["-m", "prog", "x"], tmp_path)
    assert r.returncode == 0, r.stderr
    assert "'x']" in r.stdout and "prog.py" in r.stdout
    r = _run(["-c", "import sys, torchvision; print(sys.argv, torchvision.__version__)", "y"],
             tmp_path)
    assert r.returncode == 0, r.stderr
    assert "['-c', 'y'] 0.29.2+tessera" in r.stdout
    r = _run([], tmp_path)
    assert r.returncode == 2 and "usage" in r.stderr


def test_cli_refuses_real_torch(tmp_path):
    _fake_torch(tmp_path)
    r = _run(["-c", "import torch; print(torch.__version__)"], tmp_path,
             {"PYTHONPATH": str(tmp_path) + os.pathsep + os.path.dirname(
                 os.path.dirname(tessera.__file__)) + os.pathsep + os.pathsep.join(sys.path[1:])})
    assert r.returncode == 1 and "real PyTorch is importable" in r.stderr
    r = _run(["--force", "-c", "import torch; print(torch.__version__)"], tmp_path,
             {"PYTHONPATH": str(tmp_path) + os.pathsep + os.path.dirname(
                 os.path.dirname(tessera.__file__)) + os.pathsep + os.pathsep.join(sys.path[1:])})
    assert r.returncode == 0 and "2.15.0+tessera" in r.stdout, r.stderr
