"""Tensor.set_ (three forms), as_strided_, is_set_to, untyped_storage() / storage() and
tessera.UntypedStorage: shared memory both ways, PyTorch's refusals, on cpu and sim:0."""
import struct

import pytest

import tessera as torch

DEVICES = ["cpu", "sim:0"]


@pytest.mark.parametrize("dev", DEVICES)
def test_set_tensor_shares_storage_and_geometry(dev):
    src = torch.arange(6., device=dev).reshape(2, 3).t()
    x = torch.zeros(4, device=dev)
    assert x.set_(src) is x
    assert x.shape == (3, 2) and x.stride() == (1, 3) and x.is_set_to(src)
    x[1, 0] = 42
    assert src[1, 0].item() == 42
    assert not x.is_set_to(src.contiguous())
    with pytest.raises(RuntimeError, match="could not set tensor of type float64"):
        x.set_(torch.zeros(2, dtype=torch.float64, device=dev))


@pytest.mark.parametrize("dev", DEVICES)
def test_set_storage_with_geometry(dev):
    src = torch.arange(10., device=dev)
    x = torch.zeros(1, device=dev)
    x.set_(src, 1, (3, 2), (3, 1))
    assert x.storage_offset() == 1 and x.tolist() == [[1, 2], [4, 5], [7, 8]]
    x.set_(src.untyped_storage(), 4, (2, 3))  # stride omitted: contiguous
    assert x.tolist() == [[4, 5, 6], [7, 8, 9]]
    d = torch.zeros(1, dtype=torch.float64, device=dev)
    d.set_(src.untyped_storage(), 2, (2,))  # the bytes read as doubles
    want = struct.unpack("<2d", struct.pack("<4f", 4, 5, 6, 7))
    assert tuple(d.tolist()) == want
    whole = torch.zeros(1, device=dev).set_(src.untyped_storage())  # the whole storage, 1-D
    assert whole.tolist() == list(range(10))
    with pytest.raises(RuntimeError, match="requiring a storage size of 44 are out of bounds "
                                           "for storage of size 40"):
        x.set_(src, 5, (2, 3))
    with pytest.raises(RuntimeError, match="mismatch in length of strides"):
        x.set_(src, 0, (2, 3), (1,))
    with pytest.raises(TypeError, match="must be a Tensor or a storage"):
        x.set_([1, 2], 0, (2,))
    with pytest.raises(TypeError, match="needs size"):
        x.set_(src, 1)


@pytest.mark.parametrize("dev", DEVICES)
def test_set_empty_and_as_strided_(dev):
    x = torch.arange(4., device=dev)
    alias = x.view(4)
    assert x.as_strided_((2,), (2,), 1) is x
    assert x.stride() == (2,) and x.storage_offset() == 1 and x.tolist() == [1, 3]
    x.fill_(7)
    assert alias.tolist() == [0, 7, 2, 7]
    with pytest.raises(RuntimeError, match="as_strided"):
        x.as_strided_((3,), (2,), 0)
    assert x.set_() is x and x.shape == (0,) and x.untyped_storage().nbytes() == 0
    assert alias.tolist() == [0, 7, 2, 7]  # the old storage stays with its other holder


def test_autograd_refusals_and_no_grad_swap():
    leaf = torch.zeros(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        leaf.set_(torch.ones(3))
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        leaf.as_strided_((1,), (1,))
    with torch.no_grad():
        leaf.set_(torch.ones(3))  # swapping a parameter's data: allowed
    assert leaf.shape == (3,) and leaf.requires_grad
    with pytest.raises(RuntimeError, match="autograd history"):
        (leaf * 2).set_(torch.ones(3))


@pytest.mark.parametrize("dev", DEVICES)
def test_storages_share_memory(dev):
    t = torch.arange(4., device=dev)
    u = t.untyped_storage()
    assert isinstance(u, torch.UntypedStorage)
    assert (u.nbytes(), u.size(), len(u), u.element_size()) == (16, 16, 16, 1)
    assert str(u.device) == dev and u.data_ptr() == t.data_ptr()
    assert t[1:].data_ptr() == t.data_ptr() + 4
    if dev == "cpu":
        assert t.data_ptr() == torch._C._data_ptr(t)  # the address DLPack exports
    assert u.tolist()[4:8] == list(struct.pack("<f", 1.0))
    u[4:8] = torch.tensor(list(struct.pack("<f", 9.5)), dtype=torch.uint8, device=dev)
    assert t[1].item() == 9.5
    s = t.storage()
    assert isinstance(s, torch.TypedStorage) and s.dtype == torch.float32
    assert (s.size(), s.nbytes(), s[1], s[-1]) == (4, 16, 9.5, 3.0)
    s[0] = -1
    assert t[0].item() == -1 and s.untyped().nbytes() == 16
    with pytest.raises(IndexError, match="out of range"):
        s[4]
    c = s.clone()
    c[2] = 100
    assert t[2].item() == 2  # a clone has its own memory
    assert t[1:].untyped_storage().nbytes() == 16  # a view's storage is the whole storage
    assert "UntypedStorage(device=%s) of size 3" % dev in repr(t.untyped_storage()[:3])


def test_untyped_storage_constructor():
    u = torch.UntypedStorage(8)
    assert u.nbytes() == 8 and u.tolist() == [0] * 8
    t = torch.tensor([]).set_(u)
    assert t.tolist() == [0.0, 0.0]
    t.fill_(1.0)
    assert u.tolist()[:4] == list(struct.pack("<f", 1.0))
    assert torch.UntypedStorage([1, 2, 3]).tolist() == [1, 2, 3]
    with pytest.raises(RuntimeError, match="size must be >= 0"):
        torch.UntypedStorage(-1)
