"""The meta device from Python (PyTorch's): tensors without data, modules built under
`with tessera.device("meta")`, load_state_dict(assign=True), Module.to_empty, the reads refused;
pickle, copy.deepcopy and tessera.save / load of meta tensors as PyTorch (no data, no storage
record), files read both ways with PyTorch."""
import warnings

import pytest

import tessera as torch
from tessera import nn


def test_device_names_and_flags():
    d = torch.device("meta")
    assert d.type == "meta" and d.index is None and str(d) == "meta"
    assert repr(d) == "device(type='meta')"
    x = torch.empty(3, 4, device="meta")
    assert x.is_meta and not x.is_cpu and x.device == d
    assert x.shape == (3, 4) and x.dtype == torch.float32
    assert x.data_ptr() == 0
    assert not torch.ones(2).is_meta
    with pytest.raises(ValueError):
        torch.device("meta:1")


def test_repr():
    assert repr(torch.empty(2, 3, device="meta")) == "tensor(..., device='meta', size=(2, 3))"
    assert repr(torch.zeros(4, dtype=torch.int64, device="meta")) == \
        "tensor(..., device='meta', size=(4,), dtype=tessera.int64)"


def test_ops_give_shapes_and_gradients():
    x = torch.empty(8, 5, device="meta")
    w = torch.empty(5, 3, device="meta", requires_grad=True)
    y = torch.nn.functional.softmax(x @ w, dim=1)
    assert y.is_meta and y.shape == (8, 3)
    y.sum().backward()
    assert w.grad.is_meta and w.grad.shape == (5, 3)
    idx = torch.zeros(7, dtype=torch.int64, device="meta")
    e = torch.nn.functional.embedding(idx, torch.empty(10, 4, device="meta"))
    assert e.is_meta and e.shape == (7, 4)
    with pytest.raises(RuntimeError, match="same device"):
        x + torch.ones(8, 5)


def test_reads_are_refused():
    x = torch.empty(2, 2, device="meta")
    with pytest.raises(RuntimeError, match="meta"):
        x.sum().item()
    with pytest.raises(RuntimeError, match="cannot copy out of meta tensor"):
        x.cpu()
    with pytest.raises(RuntimeError, match="meta"):
        x.tolist()
    with pytest.raises(RuntimeError, match="meta"):
        x.nonzero()  # a size that depends on the data


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)
        self.bn = nn.BatchNorm1d(3)

    def forward(self, x):
        return self.bn(self.fc(x))


def test_module_built_on_meta_then_assigned():
    with torch.device("meta"):
        m = Net()
    assert all(t.is_meta for t in m.parameters())
    assert all(t.is_meta for t in m.buffers())
    assert m(torch.empty(6, 4, device="meta")).shape == (6, 3)
    torch.manual_seed(0)
    src = Net()
    sd = src.state_dict()
    weight = m.fc.weight
    m.load_state_dict(sd, assign=True)
    assert m.fc.weight is weight  # the Tensor object stays (C modules and optimizers hold it)
    assert not m.fc.weight.is_meta and m.fc.weight.requires_grad and m.fc.weight.grad is None
    # assigned, not copied: the module's tensors share the state dict's memory
    assert m.fc.weight.data_ptr() == sd["fc.weight"].data_ptr()
    assert m.bn.running_var.data_ptr() == sd["bn.running_var"].data_ptr()
    m.eval(), src.eval()
    x = torch.randn(5, 4)
    assert torch.equal(m(x), src(x))
    # training the assigned module updates it like any other
    before = m.fc.weight.detach().clone()
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    m.train()
    m(x).square().sum().backward()
    assert m.fc.weight.grad is not None and m.fc.weight.grad.shape == (3, 4)
    opt.step()
    assert not torch.equal(m.fc.weight, before)
    assert torch.equal(m.fc.weight, src.fc.weight)  # one memory, as PyTorch's assign


def test_copying_into_meta_warns_and_is_a_no_op():
    with torch.device("meta"):
        m = nn.Linear(2, 2)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        m.load_state_dict(nn.Linear(2, 2).state_dict())
    assert any("assign=True" in str(x.message) for x in w)
    assert m.weight.is_meta


def test_to_empty_and_to():
    with torch.device("meta"):
        m = Net()
    w = m.fc.weight
    m.to_empty(device="cpu")
    assert m.fc.weight is w and w.device.type == "cpu" and w.shape == (3, 4) and w.requires_grad
    assert m.bn.running_mean.device.type == "cpu"
    with torch.no_grad():
        m.fc.weight.fill_(1.0)
    assert torch.equal(m.fc.weight, torch.ones(3, 4))
    m.to("meta")  # moving into meta keeps shapes, drops the data
    assert m.fc.weight.is_meta and m.fc.weight.shape == (3, 4)
    with pytest.raises(RuntimeError, match="to_empty"):
        m.to("cpu")
    m2 = Net()
    m2.to_empty(device="meta", recurse=False)  # only its own tensors: it has none
    assert not m2.fc.weight.is_meta


def test_load_map_location_meta(tmp_path):
    p = tmp_path / "w.pt"
    torch.save({"w": torch.ones(3, 2)}, str(p))
    sd = torch.load(str(p), map_location="meta")
    assert sd["w"].is_meta and sd["w"].shape == (3, 2)


def test_host_planned_ops_give_shapes():
    x = torch.empty(4, 6, device="meta", requires_grad=True)
    v, i = torch.sort(x, dim=1, descending=True)
    assert v.is_meta and v.shape == (4, 6) and i.dtype == torch.int64
    v, i = torch.topk(x, 2)
    assert v.shape == (4, 2) and i.shape == (4, 2)
    v.sum().backward()
    assert x.grad.is_meta and x.grad.shape == (4, 6)
    assert torch.median(x, dim=0)[0].shape == (6,)
    assert torch.quantile(x, 0.5, dim=1).shape == (4,)
    idx = torch.empty(3, 6, dtype=torch.int64, device="meta")
    assert x.scatter_reduce(0, idx, torch.empty(3, 6, device="meta"), "amax").shape == (4, 6)
    h, e = torch.histogram(torch.empty(10, device="meta"), bins=5)
    assert h.is_meta and h.shape == (5,) and e.shape == (6,)
    h, es = torch.histogramdd(torch.empty(7, 2, device="meta"), bins=[3, 4])
    assert h.shape == (3, 4) and [t.shape for t in es] == [(4,), (5,)]
    assert torch.nonzero_static(torch.empty(3, 4, device="meta"), size=5).shape == (5, 2)
    assert torch.linalg.pinv(torch.empty(2, 5, 3, device="meta")).shape == (2, 3, 5)
    tol = torch.empty((), device="meta")  # a meta tolerance: no value, none needed on meta
    r = torch.linalg.matrix_rank(torch.empty(3, 4, 4, device="meta"), rtol=tol)
    assert r.is_meta and r.shape == (3,) and r.dtype == torch.int64
    with pytest.raises(RuntimeError, match="meta"):  # but a cpu matrix needs its value
        torch.linalg.matrix_rank(torch.ones(4, 4), rtol=tol)
    with pytest.raises(RuntimeError, match="unique: the size of its result depends on the values"):
        torch.unique(torch.empty(5, device="meta"))
    w, v = torch.linalg.eig(torch.empty(2, 4, 4, device="meta", dtype=torch.float64))
    assert w.is_meta and w.shape == (2, 4) and v.shape == (2, 4, 4) and v.dtype == torch.complex128
    ld, piv, info = torch.linalg.ldl_factor_ex(torch.empty(3, 3, device="meta"), check_errors=True)
    assert ld.shape == (3, 3) and piv.dtype == info.dtype == torch.int32 and info.shape == ()
    x = torch.linalg.ldl_solve(ld, piv, torch.empty(4, 3, 2, device="meta"))
    assert x.is_meta and x.shape == (4, 3, 2)
    r = torch.linalg.lstsq(torch.empty(2, 6, 3, device="meta"), torch.empty(2, 6, 2, device="meta"),
                           driver="gelsd")  # taken as of full rank: residuals per column
    assert r.solution.shape == (2, 3, 2) and r.residuals.shape == (2, 2)
    assert r.rank.shape == (2,) and r.singular_values.shape == (2, 3)


# ---- pickle, copy.deepcopy, tessera.save / load (PyTorch: no data and no storage for a meta
# tensor; it comes back on meta with its size, stride, dtype and requires_grad)

def _same_meta(a, b):
    assert a.is_meta and b.is_meta
    assert tuple(a.shape) == tuple(b.shape) and tuple(a.stride()) == tuple(b.stride())
    assert a.dtype == b.dtype and a.requires_grad == b.requires_grad
    assert type(a) is type(b)


def _meta_objects():
    return {"a": torch.empty(2, 3, device="meta"),
            "t": torch.empty(3, 4, device="meta").t(),  # strides (1, 4): kept
            "h": torch.empty(2, 2, dtype=torch.float16, device="meta", requires_grad=True),
            "i": torch.empty(0, 5, dtype=torch.int64, device="meta"),
            "s": torch.empty((), device="meta"),
            "p": nn.Parameter(torch.empty(5, device="meta"))}


def test_pickle_and_deepcopy_meta():
    import copy
    import pickle
    objs = _meta_objects()
    objs["t"].note = "kept"  # a tensor's attributes travel too
    for back in (pickle.loads(pickle.dumps(objs)), pickle.loads(pickle.dumps(objs, protocol=2)),
                 copy.deepcopy(objs)):
        assert set(back) == set(objs)
        for k in objs:
            _same_meta(objs[k], back[k])
        assert back["t"].note == "kept"
    assert isinstance(pickle.loads(pickle.dumps(objs["p"])), nn.Parameter)
    with torch.device("meta"):
        m = nn.Linear(4, 3)
    m2 = pickle.loads(pickle.dumps(m))
    assert m2.weight.is_meta and m2.weight.shape == (3, 4) and m2.weight.requires_grad
    assert copy.deepcopy(m).bias.is_meta


def test_save_load_meta(tmp_path):
    import pickle
    import zipfile
    objs = _meta_objects()
    objs["cpu"] = torch.arange(4.0)
    p = tmp_path / "m.pt"
    torch.save(objs, str(p))
    with zipfile.ZipFile(p) as z:
        names = z.namelist()
        pkl = z.read("m/data.pkl")
    # one storage record: the cpu tensor's; the meta tensors have none
    assert [n for n in names if "/data/" in n] == ["m/data/0"]
    assert pkl.count(b"_rebuild_meta_tensor_no_storage") == 1  # written once, then memoised
    for kw in ({}, {"map_location": "cpu"}, {"weights_only": False}):
        back = torch.load(str(p), **kw)
        for k in objs:
            if k != "cpu":
                _same_meta(objs[k], back[k])
        assert torch.equal(back["cpu"], torch.arange(4.0))
    with torch.device("meta"):
        m = nn.Linear(4, 3)
    torch.save(m.state_dict(), str(p))
    sd = torch.load(str(p))
    assert sd["weight"].is_meta and sd["weight"].shape == (3, 4)
    # a size the file cannot mean is refused before any tensor is made
    with pytest.raises(pickle.UnpicklingError):
        torch.serialization._rebuild_meta_tensor_no_storage(torch.float32, (2, -1), (1, 1))


# data.pkl as PyTorch 2.15's torch.save writes {"a": empty(2, 3), "t": empty(3, 4).t(),
# "p": Parameter(empty(5)), "h": empty(2, 2, float16, requires_grad=True)}, all on meta
_TORCH_META_PKL = (
    b"\x80\x02}q\x00(X\x01\x00\x00\x00aq\x01ctorch._utils\n_rebuild_meta_tensor_no_storage\nq\x02("
    b"ctorch\nfloat32\nq\x03K\x02K\x03\x86q\x04K\x03K\x01\x86q\x05\x89tq\x06Rq\x07X\x01\x00\x00\x00"
    b"tq\x08h\x02(h\x03K\x04K\x03\x86q\tK\x01K\x04\x86q\n\x89tq\x0bRq\x0cX\x01\x00\x00\x00pq\rctorch."
    b"_utils\n_rebuild_parameter\nq\x0eh\x02(h\x03K\x05\x85q\x0fK\x01\x85q\x10\x89tq\x11Rq\x12\x88cc"
    b"ollections\nOrderedDict\nq\x13)Rq\x14\x87q\x15Rq\x16X\x01\x00\x00\x00hq\x17h\x02(ctorch\nfloa"
    b"t16\nq\x18K\x02K\x02\x86q\x19K\x02K\x01\x86q\x1a\x88tq\x1bRq\x1cu.")


def test_load_pytorch_written_meta(tmp_path):
    import zipfile
    p = tmp_path / "torch_meta.pt"
    with zipfile.ZipFile(p, "w") as z:
        z.writestr("archive/data.pkl", _TORCH_META_PKL)
        z.writestr("archive/byteorder", "little")
        z.writestr("archive/version", "3\n")
    d = torch.load(str(p))
    assert d["a"].is_meta and d["a"].shape == (2, 3) and d["a"].stride() == (3, 1)
    assert d["t"].shape == (4, 3) and d["t"].stride() == (1, 4)
    assert isinstance(d["p"], nn.Parameter) and d["p"].is_meta and d["p"].requires_grad
    assert d["h"].dtype == torch.float16 and d["h"].requires_grad and d["h"].is_leaf


def test_written_meta_loads_in_pytorch(tmp_path):
    real = pytest.importorskip("torch")
    if real is torch:
        pytest.skip("tessera is imported as torch")
    objs = _meta_objects()
    p = tmp_path / "m.pt"
    torch.save(objs, str(p))
    d = real.load(str(p))
    for k, v in objs.items():
        assert d[k].is_meta and tuple(d[k].shape) == tuple(v.shape)
        assert tuple(d[k].stride()) == tuple(v.stride()) and d[k].requires_grad == v.requires_grad
        assert str(d[k].dtype) == "torch." + str(v.dtype).rsplit(".", 1)[-1]
    assert isinstance(d["p"], real.nn.Parameter)
