"""The C reader of PyTorch checkpoints (ts_load_pt, through tessera._C._load_pt_c) against the
Python one (tessera.load, python/tessera/serialization.py) and the NumPy arrays beside the
checkpoints PyTorch wrote (tests/data/pt): the same names in the same order, dtypes, shapes and
bits; files written by tessera.save (every dtype, views, extreme values) read back by C; refusals.
Needs no torch."""
import collections
import pathlib

import pytest

import tessera

np = pytest.importorskip("numpy")

DATA = pathlib.Path(__file__).resolve().parent.parent / "data" / "pt"
FIXTURES = ["linear", "conv2d", "mlp", "zoo", "checkpoint", "dtypes", "views"]


@pytest.fixture(autouse=True)
def _sim():
    if tessera.sim.device_count() < 2:
        tessera.sim.configure(2)


def bits(t):
    """the values of a tensor as bits NumPy compares exactly (bfloat16 widened to float32, which
    is exact: its bits << 16)"""
    t = t.detach().contiguous()
    if t.dtype == tessera.bfloat16:
        t = t.to(tessera.float32)
    a = t.numpy()
    return a.view(np.dtype("u%d" % a.itemsize)) if a.dtype.kind == "f" else a


def flat(prefix, obj, out):
    if isinstance(obj, tessera.Tensor):
        out[prefix] = obj
    elif isinstance(obj, dict):
        for k, v in obj.items():
            flat("%s.%s" % (prefix, k) if prefix else str(k), v, out)
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            flat("%s.%d" % (prefix, i) if prefix else str(i), v, out)
    return out


def assert_same_tensors(got, want):
    assert list(got) == list(want)
    for k in want:
        a, b = got[k], want[k]
        assert a.dtype == b.dtype and tuple(a.shape) == tuple(b.shape), k
        np.testing.assert_array_equal(bits(a), bits(b), err_msg=k)


@pytest.mark.parametrize("name", FIXTURES)
def test_pytorch_files_as_the_python_reader_reads_them(name):
    got = tessera._C._load_pt_c(DATA / (name + ".pt"))
    assert_same_tensors(got, flat("", tessera.load(DATA / (name + ".pt")), {}))
    with np.load(DATA / (name + ".npz")) as z:
        assert list(got) == z.files
        for k in z.files:
            t = got[k]
            if t.dtype == tessera.bfloat16:
                t = t.to(tessera.float32)  # the .npz widened it, exactly
            np.testing.assert_array_equal(t.numpy(), z[k], err_msg=k)
            assert t.numpy().dtype == z[k].dtype, k


def test_map_location():
    got = tessera._C._load_pt_c(DATA / "checkpoint.pt", map_location="sim:1")
    assert all(str(t.device) == "sim:1" for t in got.values())
    assert_same_tensors({k: v.to("cpu") for k, v in got.items()},
                        tessera._C._load_pt_c(DATA / "checkpoint.pt"))


ALL_DTYPES = ["float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8",
              "uint8", "bool", "uint16", "uint32", "uint64"]


def test_written_by_tessera_save(tmp_path):
    obj = collections.OrderedDict()
    for dt in ALL_DTYPES:
        vals = [0, 1, 5, 3, 1, 0] if dt != "bool" else [True, False, True, True, False, False]
        x = tessera.tensor(vals, dtype=getattr(tessera, dt)).reshape(2, 3)
        obj[dt] = {"x": x, "xt": x.t(), "one": x[1, 2], "cols": x[:, ::2]}
    base = tessera.arange(30.0).reshape(5, 6)
    obj["views"] = [base, base.t(), base[3:], base[0, :2].unsqueeze(0).expand(3, 2), base[:0]]
    obj["extreme"] = {"f32": tessera.tensor([3.4e38, -1e-45, float("inf"), float("nan")]),
                      "bf16": tessera.tensor([3.0e38, -1.5, 1e-38], dtype=tessera.bfloat16),
                      "i64": tessera.tensor([-(2 ** 63), 2 ** 63 - 1], dtype=tessera.int64),
                      "u64": tessera.tensor([2 ** 64 - 1, 0], dtype=tessera.uint64)}
    obj["numbers"] = [1, 2.5, "text", None, (True, b"\x00")]
    obj[7] = tessera.nn.Parameter(tessera.ones(2))
    tessera.save(obj, tmp_path / "w.pt")
    got = tessera._C._load_pt_c(tmp_path / "w.pt")
    assert_same_tensors(got, flat("", obj, {}))
    assert "7" in got and "views.3" in got and "float16.xt" in got


def test_one_tensor_and_shared_objects(tmp_path):
    t = tessera.arange(6.0).reshape(2, 3)
    tessera.save(t[:, 1], tmp_path / "one.pt")
    got = tessera._C._load_pt_c(tmp_path / "one.pt")
    assert list(got) == [""] and got[""].tolist() == [1.0, 4.0]
    tessera.save({"a": t, "b": t}, tmp_path / "tied.pt")
    got = tessera._C._load_pt_c(tmp_path / "tied.pt")
    assert got["a"].tolist() == got["b"].tolist() == t.tolist()


@pytest.mark.parametrize("name, fragment", [
    ("module", "Unsupported global: GLOBAL torch.nn.modules.container.Sequential"),
    ("numpy", "Unsupported global: GLOBAL numpy._core.multiarray._reconstruct"),
])
def test_weights_only_refusals(name, fragment):
    with pytest.raises(Exception, match=fragment):
        tessera._C._load_pt_c(DATA / (name + ".pt"))


def test_malformed(tmp_path):
    raw = (DATA / "views.pt").read_bytes()
    (tmp_path / "cut.pt").write_bytes(raw[:len(raw) // 2])
    with pytest.raises(Exception, match="not a readable zip archive"):
        tessera._C._load_pt_c(tmp_path / "cut.pt")
    with pytest.raises(Exception, match="cannot open"):
        tessera._C._load_pt_c(tmp_path / "missing.pt")
