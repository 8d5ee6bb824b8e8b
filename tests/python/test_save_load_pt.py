"""test_save_load_pt.py — tessera.save / tessera.load in PyTorch's checkpoint format (issue 53):
files written by PyTorch 2.15 (tests/data/pt, made by tools/make_pt_fixtures.py, values beside
them in .npz) load with equal values; Tessera's files follow the format (checked here with zipfile
and pickletools, and with PyTorch when it is importable); round trips; map_location; the
weights_only allow-list; hostile files (truncated, lying sizes, os.system) give clear errors."""
import collections
import io
import os
import pathlib
import pickle
import pickletools
import struct
import zipfile

import pytest

import tessera

np = pytest.importorskip("numpy")

DATA = pathlib.Path(__file__).resolve().parent.parent / "data" / "pt"


@pytest.fixture(autouse=True)
def _sim():
    if tessera.sim.device_count() < 2:
        tessera.sim.configure(2)


def as_np(t):
    t = t.detach()
    if t.dtype == tessera.bfloat16:
        t = t.to(tessera.float32)
    return t.numpy()


def expected(name):
    with np.load(DATA / (name + ".npz")) as z:
        return {k: z[k] for k in z.files}


def assert_same(t, ref, key=""):
    assert isinstance(t, tessera.Tensor), key
    assert tuple(t.shape) == ref.shape, key
    got = as_np(t)
    assert got.dtype == ref.dtype, (key, got.dtype, ref.dtype)
    np.testing.assert_array_equal(got, ref, err_msg=key)  # bytes copied: exactly equal


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


# ------------------------------------------------------------------ files written by PyTorch

@pytest.mark.parametrize("name, keys", [
    ("linear", ["weight", "bias"]),
    ("conv2d", ["weight", "bias"]),
    ("mlp", ["0.weight", "0.bias", "2.weight", "2.bias"]),
])
def test_pytorch_state_dicts(name, keys):
    sd = tessera.load(DATA / (name + ".pt"))
    assert isinstance(sd, collections.OrderedDict)
    assert list(sd) == keys
    ref = expected(name)
    for k in keys:
        assert_same(sd[k], ref[k], k)
        assert sd[k].dtype == tessera.float32 and not sd[k].requires_grad


@pytest.mark.parametrize("name, make", [
    ("linear", lambda: tessera.nn.Linear(4, 3)),
    ("conv2d", lambda: tessera.nn.Conv2d(2, 3, kernel_size=3, padding=1)),
])
def test_pytorch_state_dict_names_match_tessera_modules(name, make):
    m = make()
    m.load_state_dict(tessera.load(DATA / (name + ".pt")))  # strict: the same names
    ref = expected(name)
    sd = m.state_dict()
    assert sorted(sd) == sorted(ref)
    for k in ref:
        assert_same(sd[k], ref[k], k)


def test_pytorch_state_dict_of_many_layers():
    """Embedding, Conv2d, BatchNorm2d (running stats, num_batches_tracked), LayerNorm and a
    nested Sequential: PyTorch's names are tessera.nn's"""
    nn = tessera.nn

    class Zoo(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(10, 4)
            self.conv = nn.Conv2d(1, 2, 3)
            self.bn = nn.BatchNorm2d(2)
            self.ln = nn.LayerNorm(4)
            self.fc = nn.Sequential(nn.Linear(8, 3))

    z = Zoo()
    z.load_state_dict(tessera.load(DATA / "zoo.pt"))
    ref = expected("zoo")
    sd = z.state_dict()
    assert sorted(sd) == sorted(ref)
    for k in ref:
        assert_same(sd[k], ref[k], k)
    assert sd["bn.num_batches_tracked"].item() == 1


def test_pytorch_state_dict_loads_into_tessera_modules():
    net = tessera.nn.Sequential(tessera.nn.Linear(4, 8), tessera.nn.ReLU(),
                                tessera.nn.Linear(8, 3))
    net.load_state_dict(tessera.load(DATA / "mlp.pt"))
    ref = {k: v.astype(np.float64) for k, v in expected("mlp").items()}
    x = np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4)
    want = np.maximum(x @ ref["0.weight"].T + ref["0.bias"], 0) @ ref["2.weight"].T + ref["2.bias"]
    got = as_np(net(tessera.from_numpy(x)))
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-5)  # float32 sums of 8 terms ~1


def test_pytorch_checkpoint_with_optimizer_state():
    ck = tessera.load(DATA / "checkpoint.pt")
    assert ck["epoch"] == 3 and ck["loss"] == 0.25 and ck["name"] == "mlp" and ck["best"] is None
    assert ck["flags"] == (True, False) and ck["history"] == [1.0, 2.5]
    assert ck["nested"] == {"a": {"b": [1, 2, {"c": "d"}]}}
    assert ck["big"] == 2 ** 40 and ck["neg"] == -7
    opt = ck["optimizer"]
    assert sorted(opt["state"]) == [0, 1, 2, 3]
    g = opt["param_groups"][0]
    assert g["lr"] == 0.01 and g["betas"] == (0.9, 0.999) and g["params"] == [0, 1, 2, 3]
    assert g["amsgrad"] is False and g["foreach"] is None
    for i in range(4):
        assert opt["state"][i]["step"].item() == 2.0
    ref = expected("checkpoint")
    tensors = flat("", ck, {})
    assert sorted(tensors) == sorted(ref)
    for k, t in tensors.items():
        assert_same(t, ref[k], k)
    # a PyTorch optimizer's state resumes a Tessera optimizer
    net = tessera.nn.Sequential(tessera.nn.Linear(4, 8), tessera.nn.ReLU(),
                                tessera.nn.Linear(8, 3))
    net.load_state_dict(ck["model"])
    adam = tessera.optim.Adam(net.parameters(), lr=1.0)
    adam.load_state_dict(opt)
    assert adam.param_groups[0]["lr"] == 0.01


def test_pytorch_dtypes():
    d = tessera.load(DATA / "dtypes.pt")
    want = {"f32": "float32", "f64": "float64", "f16": "float16", "bf16": "bfloat16",
            "i64": "int64", "i32": "int32", "i16": "int16", "i8": "int8", "u8": "uint8",
            "bool": "bool", "u16": "uint16", "u32": "uint32", "u64": "uint64",
            "scalar": "float32", "empty": "float32"}
    ref = expected("dtypes")
    assert sorted(d) == sorted(want)
    for k, dt in want.items():
        assert d[k].dtype == getattr(tessera, dt), k
        assert_same(d[k], ref[k], k)
    assert d["scalar"].shape == () and d["empty"].shape == (0, 3)


def test_pytorch_views_share_one_storage():
    d = tessera.load(DATA / "views.pt")
    ref = expected("views")
    for k in ref:
        assert_same(d[k], ref[k], k)
    assert d["t"].stride() == (1, 6) and d["row"].stride() == (1,)
    assert d["expanded"].stride() == (0, 0)
    d["base"][2, 3] = -1.0  # memory is shared as in PyTorch: the views see the write
    assert d["t"][3, 2].item() == -1.0
    assert d["row"][3].item() == -1.0
    assert d["cols"][2, 1].item() == -1.0
    assert d["corner"][1, 1].item() == -1.0
    # saved again, the views are one storage again (their memory overlaps)
    buf = io.BytesIO()
    tessera.save(d, buf)
    with zipfile.ZipFile(buf) as z:
        assert [n for n in z.namelist() if "/data/" in n] == ["archive/data/0"]
    buf.seek(0)
    again = tessera.load(buf)
    for k in ref:
        assert again[k].tolist() == d[k].tolist(), k


def test_pytorch_numpy_values_need_trust():
    with pytest.raises(pickle.UnpicklingError, match="numpy.*was not an allowed global"):
        tessera.load(DATA / "numpy.pt")
    d = tessera.load(DATA / "numpy.pt", weights_only=False)
    np.testing.assert_array_equal(d["array"], expected("numpy")["array"])
    assert d["scalar"] == 1.5 and d["t"].tolist() == [1.0, 1.0]
    rec = getattr(np, "_core", None) or np.core
    with tessera.serialization.safe_globals([rec.multiarray._reconstruct, np.ndarray, np.dtype,
                                              type(np.dtype(np.float64)),
                                              rec.multiarray.scalar]):
        d = tessera.load(DATA / "numpy.pt")
    np.testing.assert_array_equal(d["array"], expected("numpy")["array"])
    assert tessera.serialization.get_safe_globals() == []


def test_pytorch_whole_module():
    with pytest.raises(pickle.UnpicklingError, match="torch.nn.modules.container.Sequential"):
        tessera.load(DATA / "module.pt")
    m = tessera.load(DATA / "module.pt", weights_only=False)
    assert isinstance(m, tessera.nn.Sequential) and isinstance(m[0], tessera.nn.Linear)
    assert isinstance(m[0].weight, tessera.nn.Parameter) and m[0].weight.requires_grad
    ref = {k: v.astype(np.float64) for k, v in expected("module").items()}
    x = np.linspace(-1, 1, 8, dtype=np.float32).reshape(2, 4)
    want = np.maximum(x @ ref["0.weight"].T + ref["0.bias"], 0) @ ref["2.weight"].T + ref["2.bias"]
    np.testing.assert_allclose(as_np(m(tessera.from_numpy(x))), want, rtol=0, atol=1e-5)
    assert sorted(m.state_dict()) == sorted(ref)


# ------------------------------------------------------------------ the format Tessera writes

def test_written_format(tmp_path):
    x = tessera.arange(12.0).reshape(3, 4)
    tessera.save({"w": x, "t": x.t(), "row": x[1]}, tmp_path / "model.pt")
    with zipfile.ZipFile(tmp_path / "model.pt") as z:
        names = z.namelist()
        assert names[0] == "model/data.pkl"
        assert "model/byteorder" in names and z.read("model/byteorder") == b"little"
        assert z.read("model/version") == b"3\n" and z.read("model/.format_version") == b"1"
        assert len(z.read("model/.data/serialization_id")) == 40
        assert [n for n in names if "/data/" in n] == ["model/data/0"]  # one storage for three
        raw = (tmp_path / "model.pt").read_bytes()
        for info in z.infolist():
            assert info.compress_type == zipfile.ZIP_STORED
            n, e = struct.unpack("<HH", raw[info.header_offset + 26:info.header_offset + 30])
            assert (info.header_offset + 30 + n + e) % 64 == 0, info.filename
        assert struct.unpack("<12f", z.read("model/data/0")) == tuple(float(i) for i in range(12))
        ops = list(pickletools.genops(z.read("model/data.pkl")))
    assert ops[0][0].name == "PROTO" and ops[0][1] == 2
    globals_ = {arg for op, arg, _ in ops if op.name == "GLOBAL"}
    assert globals_ == {"torch._utils _rebuild_tensor_v2", "torch FloatStorage",
                        "collections OrderedDict"}
    pids = [arg for op, arg, _ in ops if op.name == "BINUNICODE"]
    assert "storage" in pids and "cpu" in pids


def test_written_file_loads_in_pytorch(tmp_path):
    """runs where PyTorch is importable (not in CI)"""
    torch = pytest.importorskip("torch")
    x = tessera.arange(6.0).reshape(2, 3)
    tessera.save({"w": x, "t": x.t(), "bf": x.to(tessera.bfloat16), "n": 3,
                  "p": tessera.nn.Parameter(tessera.ones(2))}, tmp_path / "a.pt")
    d = torch.load(tmp_path / "a.pt")
    assert d["n"] == 3 and d["t"].tolist() == [[0.0, 3.0], [1.0, 4.0], [2.0, 5.0]]
    assert d["w"].untyped_storage().data_ptr() == d["t"].untyped_storage().data_ptr()
    assert d["bf"].dtype == torch.bfloat16 and isinstance(d["p"], torch.nn.Parameter)


# ------------------------------------------------------------------ round trips

ALL_DTYPES = ["float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8",
              "uint8", "bool", "uint16", "uint32", "uint64"]


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_round_trip_dtypes(tmp_path, dtype):
    vals = [0, 1, 5, 3, 1, 0] if dtype != "bool" else [True, False, True, True, False, False]
    x = tessera.tensor(vals, dtype=getattr(tessera, dtype)).reshape(2, 3)
    tessera.save({"x": x, "xt": x.t(), "one": x[1, 2]}, tmp_path / "d.pt")
    d = tessera.load(tmp_path / "d.pt")
    for k, ref in (("x", x), ("xt", x.t()), ("one", x[1, 2])):
        assert d[k].dtype == ref.dtype and d[k].shape == ref.shape and d[k].tolist() == ref.tolist()


def test_round_trip_extreme_values(tmp_path):
    src = {"f32": tessera.tensor([3.4e38, -1e-45, float("inf"), float("-inf")]),
           "f64": tessera.tensor([1e308, -5e-324, 0.1], dtype=tessera.float64),
           "f16": tessera.tensor([65504.0, -6e-8, 0.5], dtype=tessera.float16),
           "bf16": tessera.tensor([3.0e38, -1.5, 1e-38], dtype=tessera.bfloat16),
           "i64": tessera.tensor([-(2 ** 63), 2 ** 63 - 1], dtype=tessera.int64),
           "u64": tessera.tensor([2 ** 64 - 1, 0], dtype=tessera.uint64),
           "nan": tessera.tensor([float("nan")])}
    buf = io.BytesIO()
    tessera.save(src, buf)
    buf.seek(0)
    back = tessera.load(buf)
    for k, v in src.items():
        assert back[k].dtype == v.dtype
        np.testing.assert_array_equal(as_np(back[k]), as_np(v), err_msg=k)


def test_round_trip_views_and_strides(tmp_path):
    base = tessera.arange(30.0).reshape(5, 6)
    obj = {"base": base, "t": base.t(), "cols": base[:, 1::2], "tail": base[3:],
           "exp": base[0, :2].unsqueeze(0).expand(3, 2), "empty": base[:0]}
    tessera.save(obj, tmp_path / "v.pt")
    with zipfile.ZipFile(tmp_path / "v.pt") as z:
        stores = [n for n in z.namelist() if "/data/" in n]
    assert len(stores) == 2  # base and its views: one; the empty slice: its own (0 bytes)
    d = tessera.load(tmp_path / "v.pt")
    for k, v in obj.items():
        assert d[k].shape == v.shape and d[k].tolist() == v.tolist(), k
    assert d["cols"].stride() == (6, 2)
    d["base"][4, 5] = 100.0
    assert d["t"][5, 4].item() == 100.0 and d["cols"][4, 2].item() == 100.0
    assert d["tail"][1, 5].item() == 100.0


def test_round_trip_disjoint_views_and_devices(tmp_path):
    base = tessera.arange(10.0)
    a, b = base[:3], base[6:]
    s = tessera.tensor([1.0, 2.0], device="sim:0")
    tessera.save([a, b, s, s], tmp_path / "x.pt")
    d = tessera.load(tmp_path / "x.pt")
    assert [t.tolist() for t in d] == [[0.0, 1.0, 2.0], [6.0, 7.0, 8.0, 9.0], [1.0, 2.0],
                                       [1.0, 2.0]]
    assert d[2] is d[3]  # one object stays one object
    assert all(str(t.device) == "cpu" for t in d)  # sim is tagged 'cpu' (PyTorch has no sim)


def test_round_trip_containers_and_parameters(tmp_path):
    p = tessera.nn.Parameter(tessera.ones(2, 2))
    g = tessera.tensor([1.0, 2.0]).requires_grad_(True)
    obj = {"p": p, "g": g, "i": 1, "f": -0.5, "s": "é\n", "b": b"\x00\xff", "n": None,
           "t": (1, (2, 3)), "l": [1, [2.0]], "set": {1, 2}, "c": 1 + 2j, "dt": tessera.float16,
           "dev": tessera.device("cpu"), "size": tessera.Size([2, 3]),
           "od": collections.OrderedDict([("z", 1), ("a", 2)]), "ctr": collections.Counter("aab"),
           "ba": bytearray(b"xy"), 7: "int key"}
    f = tmp_path / "c.pt"
    with open(f, "wb") as fh:
        tessera.save(obj, fh)
    with open(f, "rb") as fh:
        d = tessera.load(fh)
    assert type(d["p"]) is tessera.nn.Parameter and d["p"].requires_grad
    assert type(d["g"]) is tessera.Tensor and d["g"].requires_grad and d["g"].is_leaf
    for k in ("i", "f", "s", "b", "n", "t", "l", "set", "c", "od", "ctr", "ba", 7):
        assert d[k] == obj[k] and type(d[k]) is type(obj[k]), k
    assert d["dt"] == tessera.float16 and d["dev"] == tessera.device("cpu")
    assert d["size"] == (2, 3) and isinstance(d["size"], tessera.Size)
    assert list(d["od"]) == ["z", "a"]


def test_round_trip_module_and_optimizer(tmp_path):
    tessera.manual_seed(0)
    net = tessera.nn.Sequential(tessera.nn.Linear(3, 4), tessera.nn.Tanh(), tessera.nn.Linear(4, 2))
    opt = tessera.optim.Adam(net.parameters(), lr=0.1)
    x = tessera.randn(5, 3)
    for _ in range(2):
        opt.zero_grad()
        net(x).pow(2).mean().backward()
        opt.step()
    tessera.save({"model": net.state_dict(), "opt": opt.state_dict(), "epoch": 2},
                 tmp_path / "ck.pth")
    tessera.save(net, tmp_path / "net.pth")
    ck = tessera.load(tmp_path / "ck.pth")
    net2 = tessera.nn.Sequential(tessera.nn.Linear(3, 4), tessera.nn.Tanh(),
                                 tessera.nn.Linear(4, 2))
    net2.load_state_dict(ck["model"])
    opt2 = tessera.optim.Adam(net2.parameters(), lr=0.1)
    opt2.load_state_dict(ck["opt"])
    assert as_np(net2(x)).tolist() == as_np(net(x)).tolist()
    with pytest.raises(pickle.UnpicklingError, match="tessera.nn"):
        tessera.load(tmp_path / "net.pth")  # a whole module needs weights_only=False
    net3 = tessera.load(tmp_path / "net.pth", weights_only=False)
    assert type(net3) is tessera.nn.Sequential
    assert as_np(net3(x)).tolist() == as_np(net(x)).tolist()


class _Fresh:
    """pickles a tensor made anew at each pickling"""

    def __getstate__(self):
        return {"t": tessera.arange(3.0) * 2}


def test_tensors_made_while_pickling(tmp_path):
    tessera.save({"f": _Fresh(), "x": tessera.ones(1)}, tmp_path / "f.pt")
    d = tessera.load(tmp_path / "f.pt", weights_only=False)
    assert d["f"].t.tolist() == [0.0, 2.0, 4.0] and d["x"].tolist() == [1.0]


def test_file_objects_and_paths(tmp_path):
    t = tessera.tensor([1.0, 2.0])
    for target in (str(tmp_path / "a.pt"), tmp_path / "b.pt", os.fsencode(tmp_path / "c.pt")):
        tessera.save(t, target)
        assert tessera.load(target).tolist() == [1.0, 2.0]
    buf = io.BytesIO(b"junk")  # a stream that does not start at 0
    buf.seek(4)
    tessera.save({"t": t}, buf)
    buf.seek(4)
    assert tessera.load(buf)["t"].tolist() == [1.0, 2.0]
    # the safetensors files of earlier versions still load, from paths and file objects
    tessera.save({"t": t}, tmp_path / "s.safetensors")
    assert tessera.load(tmp_path / "s.safetensors")["t"].tolist() == [1.0, 2.0]
    with open(tmp_path / "s.safetensors", "rb") as fh:
        assert tessera.load(io.BytesIO(fh.read()))["t"].tolist() == [1.0, 2.0]
    os.replace(tmp_path / "s.safetensors", tmp_path / "s.bin")
    assert tessera.load(tmp_path / "s.bin")["t"].tolist() == [1.0, 2.0]

    class Pipe(io.RawIOBase):  # read only, no seeking (a pipe, a socket)
        def __init__(self, data):
            self._b = io.BytesIO(data)

        def readable(self):
            return True

        def readinto(self, b):
            return self._b.readinto(b)

    out = io.BytesIO()
    tessera.save({"t": t}, out)
    assert tessera.load(Pipe(out.getvalue()))["t"].tolist() == [1.0, 2.0]
    with open(tmp_path / "a.pt", "r") as text:
        with pytest.raises(TypeError, match="binary mode"):
            tessera.load(text)
    with pytest.raises(TypeError, match="argument 'f'"):
        tessera.load(3)


def test_failed_save_keeps_the_old_file(tmp_path):
    f = tmp_path / "keep.pt"
    tessera.save({"a": 1}, f)
    with pytest.raises(Exception):
        tessera.save({"fn": lambda: 0}, f)  # a lambda cannot be pickled
    assert tessera.load(f) == {"a": 1}
    assert os.listdir(tmp_path) == ["keep.pt"]  # no temporary file left behind
    with pytest.raises(TypeError, match="argument 'f'"):
        tessera.save({"a": 1}, 12.5)


# ------------------------------------------------------------------ map_location

def test_map_location_forms(tmp_path):
    x = tessera.arange(6.0).reshape(2, 3)
    tessera.save({"x": x, "t": x.t()}, tmp_path / "m.pt")
    f = tmp_path / "m.pt"

    def devs(d):
        return {k: str(v.device) for k, v in d.items()}

    assert devs(tessera.load(f)) == {"x": "cpu", "t": "cpu"}
    assert devs(tessera.load(f, map_location="sim:0")) == {"x": "sim:0", "t": "sim:0"}
    assert devs(tessera.load(f, map_location=tessera.device("sim:1"))) == {"x": "sim:1",
                                                                           "t": "sim:1"}
    assert devs(tessera.load(f, map_location={"cpu": "sim:1"})) == {"x": "sim:1", "t": "sim:1"}
    assert devs(tessera.load(f, map_location={"cuda:0": "cpu"})) == {"x": "cpu", "t": "cpu"}
    seen = []

    def where(storage, loc):
        seen.append((loc, storage.nbytes()))
        return storage.to("sim:0")

    d = tessera.load(f, map_location=where)
    assert seen == [("cpu", 24)] and devs(d) == {"x": "sim:0", "t": "sim:0"}
    assert d["t"].tolist() == x.t().tolist()
    assert devs(tessera.load(f, map_location=lambda s, loc: s)) == {"x": "cpu", "t": "cpu"}
    assert devs(tessera.load(f, map_location=lambda s, loc: None)) == {"x": "cpu", "t": "cpu"}
    assert devs(tessera.load(f, map_location=lambda s, loc: "sim:1")) == {"x": "sim:1",
                                                                         "t": "sim:1"}
    with pytest.raises(TypeError, match="map_location"):
        tessera.load(f, map_location=1.5)
    with pytest.raises((ValueError, tessera.TesseraError)) as e:
        tessera.load(f, map_location="gpu:0")
    assert not isinstance(e.value, tessera.FormatError)  # the user's error, not the file's
    with pytest.raises(TypeError, match="map_location"):
        tessera.load(f, map_location=lambda s, loc: 1.5)


def cuda_file(tmp_path):
    """linear.pt with its storages tagged cuda:0 (BINUNICODE holds its own length)"""
    return rewrite(tmp_path, DATA / "linear.pt",
                   lambda p: p.replace(b"X\x03\x00\x00\x00cpu", b"X\x06\x00\x00\x00cuda:0"))


def test_map_location_of_cuda_files(tmp_path):
    f = cuda_file(tmp_path)
    ref = expected("linear")
    if not tessera.cuda.is_available():
        with pytest.raises(RuntimeError, match="map_location"):
            tessera.load(f)
    d = tessera.load(f, map_location="cpu")
    assert_same(d["weight"], ref["weight"])
    d = tessera.load(f, map_location={"cuda:0": "sim:0"})
    assert str(d["weight"].device) == "sim:0"
    np.testing.assert_array_equal(as_np(d["weight"].cpu()), ref["weight"])
    d = tessera.load(f, map_location=lambda s, loc: s.cpu() if loc == "cuda:0" else None)
    assert str(d["bias"].device) == "cpu"


# ------------------------------------------------------------------ hostile files

def rewrite(tmp_path, src, fix_pkl=lambda p: p, fix=None, name="hostile.pt"):
    """src's archive with data.pkl (and optionally other records) changed"""
    out = tmp_path / name
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(out, "w") as zout:
        for info in zin.infolist():
            data = zin.read(info)
            if info.filename.endswith("/data.pkl"):
                data = fix_pkl(data)
            if fix:
                data = fix(info.filename, data)
            if data is not None:
                zout.writestr(info.filename, data)
    return out


def make_archive(tmp_path, pkl, records=None, name="hand.pt", byteorder=b"little"):
    out = tmp_path / name
    with zipfile.ZipFile(out, "w") as z:
        z.writestr("archive/data.pkl", pkl)
        for k, v in (records or {}).items():
            z.writestr("archive/" + k, v)
        z.writestr("archive/byteorder", byteorder)
    return out


def pint(n):
    if 0 <= n < 256:
        return b"K" + bytes([n])
    if -(2 ** 31) <= n < 2 ** 31:
        return b"J" + struct.pack("<i", n)
    raw = n.to_bytes((n.bit_length() + 8) // 8, "little", signed=True)
    return b"\x8a" + bytes([len(raw)]) + raw


def tensor_pkl(numel, offset, size, stride, storage=b"FloatStorage", key=b"0"):
    """data.pkl of one tensor, opcode by opcode (what torch.save writes)"""
    tup = lambda xs: b"(" + b"".join(pint(v) for v in xs) + b"t"  # noqa: E731
    s = lambda b: b"X" + struct.pack("<I", len(b)) + b  # noqa: E731
    return (b"\x80\x02ctorch._utils\n_rebuild_tensor_v2\n((" + s(b"storage") + b"ctorch\n" +
            storage + b"\n" + s(key) + s(b"cpu") + pint(numel) + b"tQ" + pint(offset) +
            tup(size) + tup(stride) + b"\x89ccollections\nOrderedDict\n)RtR.")


def test_hand_built_file(tmp_path):
    """the hand builder is right: a well-formed file gives its tensor"""
    f = make_archive(tmp_path, tensor_pkl(4, 1, [3], [1]),
                     {"data/0": struct.pack("<4f", 1, 2, 3, 4)})
    assert tessera.load(f).tolist() == [2.0, 3.0, 4.0]


def test_big_endian_file(tmp_path):
    f = make_archive(tmp_path, tensor_pkl(3, 0, [3], [1]), {"data/0": struct.pack(">3f", 1, -2, 3)},
                     byteorder=b"big")
    assert tessera.load(f).tolist() == [1.0, -2.0, 3.0]
    f = make_archive(tmp_path, tensor_pkl(2, 0, [2], [1], storage=b"BFloat16Storage"),
                     {"data/0": bytes([0x3F, 0xC0, 0xC0, 0x00])}, byteorder=b"big")
    assert tessera.load(f).tolist() == [1.5, -2.0]
    f = make_archive(tmp_path, tensor_pkl(3, 0, [3], [1]), {"data/0": 12 * b"\0"},
                     byteorder=b"middle")
    with pytest.raises(tessera.FormatError, match="byte order"):
        tessera.load(f)


@pytest.mark.parametrize("numel, offset, size, stride, data, match", [
    (12, 0, [3, 4], [4, 1], 48 * b"\0" + b"\0", "holds 49 bytes, but data.pkl claims 48"),
    (2 ** 60, 0, [3], [1], 12 * b"\0", "claims"),  # a huge claim, no allocation
    (3, 0, [4], [1], 12 * b"\0", "needs 4 elements of float32, but its storage holds 3"),
    (3, 2, [2], [1], 12 * b"\0", "needs 4 elements"),
    (3, 0, [2, 2], [1, 2], 12 * b"\0", "needs 4 elements"),
    (3, 0, [2 ** 40, 2 ** 40], [1, 1], 12 * b"\0", "larger than any memory"),
    (3, 0, [2 ** 20, 2 ** 20], [1, 1], 12 * b"\0", "needs 2097151 elements"),
    (3, 0, [3], [-1], 12 * b"\0", "negative"),
    (3, -1, [1], [1], 12 * b"\0", "offset"),
    (3, 0, [1] * 9, [1] * 9, 12 * b"\0", "9 dimensions"),
    (3, 0, [0] * 70, [1] * 70, 12 * b"\0", "70 dimensions"),
    (3, 0, [2 ** 62], [0], 12 * b"\0", "larger than any memory"),
    (3, 0, [3], [2 ** 70], 12 * b"\0", "larger than any memory"),
    (3, 2 ** 70, [1], [1], 12 * b"\0", "larger than any memory"),
    (3, 0, [0, 2 ** 70], [1, 1], 12 * b"\0", "larger than any memory"),
])
def test_lying_sizes(tmp_path, numel, offset, size, stride, data, match):
    f = make_archive(tmp_path, tensor_pkl(numel, offset, size, stride), {"data/0": data})
    with pytest.raises((tessera.FormatError, tessera.UnsupportedError, pickle.UnpicklingError),
                       match=match):
        tessera.load(f)


def test_missing_and_foreign_storages(tmp_path):
    f = make_archive(tmp_path, tensor_pkl(3, 0, [3], [1]), {})
    with pytest.raises(tessera.FormatError, match="no record 'archive/data/0'"):
        tessera.load(f)
    f = make_archive(tmp_path, tensor_pkl(1, 0, [1], [1], storage=b"ComplexFloatStorage"),
                     {"data/0": 8 * b"\0"})
    with pytest.raises(tessera.UnsupportedError, match="complex64"):
        tessera.load(f)
    f = make_archive(tmp_path, tensor_pkl(1, 0, [1], [1], key=b"../x"), {"data/0": 4 * b"\0"})
    with pytest.raises((tessera.FormatError, pickle.UnpicklingError)):
        tessera.load(f)


def test_truncated_and_damaged_files(tmp_path):
    raw = (DATA / "linear.pt").read_bytes()
    for cut in (len(raw) // 2, len(raw) - 30, 10, 0):
        f = tmp_path / ("cut%d.pt" % cut)
        f.write_bytes(raw[:cut])
        with pytest.raises(tessera.FormatError):
            tessera.load(f)
    # a storage record whose bytes were damaged (CRC) or whose size field lies
    f = tmp_path / "crc.pt"
    bad = bytearray(raw)
    with zipfile.ZipFile(io.BytesIO(raw)) as z:
        info = z.getinfo("linear/data/0")
    bad[info.header_offset + 30 + len(info.filename) + 4 + 64] ^= 0xFF  # inside the payload
    f.write_bytes(bytes(bad))
    with pytest.raises(tessera.FormatError, match="damaged"):
        tessera.load(f)
    # the central directory says data/0 is 2 GiB
    cd = raw.find(b"linear/data/0", raw.find(b"PK\x01\x02")) - 46
    assert raw[cd:cd + 4] == b"PK\x01\x02"
    lie = bytearray(raw)
    lie[cd + 24:cd + 28] = struct.pack("<I", 2 ** 31)
    f.write_bytes(bytes(lie))
    with pytest.raises(tessera.FormatError):
        tessera.load(f)
    f = tmp_path / "garbage.pt"
    f.write_bytes(b"\x00" * 100)
    with pytest.raises(tessera.FormatError, match="not a PyTorch checkpoint"):
        tessera.load(f)
    f.write_bytes(b"\x80\x02\x8a\x0al\xfc\x9cF\xf9 j\xa8P\x19.rest")
    with pytest.raises(tessera.UnsupportedError, match="legacy"):
        tessera.load(f)
    f = make_archive(tmp_path, b"\x80\x02}q\x00(X", {})  # data.pkl cut short
    with pytest.raises((tessera.FormatError, pickle.UnpicklingError)):
        tessera.load(f)
    with pytest.raises(tessera.FileError) as e:
        tessera.load(tmp_path / "absent.pt")
    assert isinstance(e.value, FileNotFoundError)


class _Evil:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, ("touch " + self.marker,))


class _Custom:
    pass


def test_pickle_asking_for_os_system_is_refused(tmp_path):
    marker = tmp_path / "pwned"
    for protocol in (2, 4):
        f = make_archive(tmp_path, pickle.dumps({"x": _Evil(str(marker))}, protocol=protocol))
        with pytest.raises(pickle.UnpicklingError, match="(posix|os)\\.system.*blocked"):
            tessera.load(f)
        with pytest.raises(pickle.UnpicklingError):  # even when the user trusts it
            with tessera.serialization.safe_globals([os.system]):
                tessera.load(f)
        assert not marker.exists()
    f = make_archive(tmp_path, pickle.dumps(_Custom(), protocol=2))
    with pytest.raises(pickle.UnpicklingError, match="Unsupported global: GLOBAL "
                       "test_save_load_pt._Custom was not an allowed global"):
        tessera.load(f)
    for bad in (b"\x80\x02cbuiltins\neval\n(X\x01\x00\x00\x001tR.",
                b"\x80\x02c__builtin__\ngetattr\n.",
                b"\x80\x02csubprocess\nPopen\n."):
        with pytest.raises(pickle.UnpicklingError):
            tessera.load(make_archive(tmp_path, bad))
    # a persistent id other than a storage
    f = make_archive(tmp_path, b"\x80\x02(X\x04\x00\x00\x00evilK\x00K\x00K\x00K\x00tQ.")
    with pytest.raises(pickle.UnpicklingError, match="storage"):
        tessera.load(f)


def test_weights_only_false_resolves_classes(tmp_path):
    f = make_archive(tmp_path, pickle.dumps({"c": collections.deque([1, 2])}, protocol=2))
    with pytest.raises(pickle.UnpicklingError, match="collections.deque"):
        tessera.load(f)
    assert tessera.load(f, weights_only=False) == {"c": collections.deque([1, 2])}
    with tessera.serialization.safe_globals([collections.deque]):
        with pytest.raises(pickle.UnpicklingError, match="Can only APPENDS for list"):
            tessera.load(f)  # as PyTorch: a trusted class, but APPENDS only onto lists
    c = _Custom()
    c.x = [1, "a"]
    f = make_archive(tmp_path, pickle.dumps({"c": c}, protocol=2))
    with pytest.raises(pickle.UnpicklingError, match="_Custom"):
        tessera.load(f)
    with tessera.serialization.safe_globals([_Custom]):
        back = tessera.load(f)["c"]
    assert type(back) is _Custom and back.x == [1, "a"]
    # BUILD may not change the allow-list's own objects (a file poisoning later loads)
    f = make_archive(tmp_path, b"\x80\x02ctorch\nFloatStorage\n}X\x05\x00\x00\x00dtypeX\x05"
                               b"\x00\x00\x00int64sb.")
    with pytest.raises(pickle.UnpicklingError, match="Can only build"):
        tessera.load(f)
    with pytest.raises(pickle.UnpicklingError, match="BYTEARRAY8 claims"):
        tessera.load(make_archive(tmp_path, b"\x80\x05\x96" + struct.pack("<Q", 2 ** 40) + b"."))
    with pytest.raises(pickle.UnpicklingError, match="bytearray"):
        tessera.load(make_archive(tmp_path, b"\x80\x02c__builtin__\nbytearray\n" + pint(2 ** 40) +
                                  b"\x85R."))
