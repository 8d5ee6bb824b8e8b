"""The meta device from Python (PyTorch's): tensors without data, modules built under
`with tessera.device("meta")`, load_state_dict(assign=True), Module.to_empty, the reads refused."""
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
