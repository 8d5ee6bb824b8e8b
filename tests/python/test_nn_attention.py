"""tessera.nn.attention (torch.nn.attention): SDPBackend has PyTorch 2.15's members and values,
sdpa_kernel checks its argument as PyTorch's does (the same AssertionError text), records the
request, warns once that Tessera selects no kernel by it, and leaves scaled_dot_product_attention's
result unchanged; flex_attention is importable and raises NotImplementedError when used."""
import warnings

import pytest

import tessera
import tessera.nn.attention as A
import tessera.nn.functional as F
from tessera.nn.attention import SDPBackend, sdpa_kernel


def test_backend_enum_matches_pytorch():
    assert [(b.name, int(b)) for b in SDPBackend] == [
        ("ERROR", -1), ("MATH", 0), ("FLASH_ATTENTION", 1), ("EFFICIENT_ATTENTION", 2),
        ("CUDNN_ATTENTION", 3), ("OVERRIDEABLE", 4)]
    assert str(SDPBackend.MATH) == "SDPBackend.MATH" and SDPBackend.MATH.name == "MATH"
    assert "SDPBackend" in A.__all__ and "sdpa_kernel" in A.__all__
    assert A.WARN_FOR_UNFUSED_KERNELS is False


def test_bad_arguments_raise_as_pytorch():
    with pytest.raises(AssertionError) as e:
        with sdpa_kernel("math"):
            pass
    assert str(e.value) == ("Backend must be an instance of SDPBackend or a list of SDPBackend "
                            "instances, got str")
    with pytest.raises(AssertionError, match="list holding int"):
        with sdpa_kernel([0]):
            pass


def test_records_request_restores_and_warns_once(monkeypatch):
    monkeypatch.setattr(A, "_warned", False)
    everything = A._cur_sdpa_kernel_backends()
    assert SDPBackend.MATH in everything and SDPBackend.FLASH_ATTENTION in everything
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        with sdpa_kernel(SDPBackend.MATH) as ctx:
            assert ctx == {}
            assert A._cur_sdpa_kernel_backends() == [SDPBackend.MATH]
            with sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.MATH,
                              SDPBackend.FLASH_ATTENTION], set_priority=True):
                assert A._cur_sdpa_kernel_backends() == [SDPBackend.FLASH_ATTENTION,
                                                         SDPBackend.MATH]
            assert A._cur_sdpa_kernel_backends() == [SDPBackend.MATH]
        with pytest.raises(KeyError):
            with sdpa_kernel([SDPBackend.EFFICIENT_ATTENTION]):
                raise KeyError("inside")
    assert A._cur_sdpa_kernel_backends() == everything
    msgs = [str(x.message) for x in w if "sdpa_kernel" in str(x.message)]
    assert len(msgs) == 1 and "has no effect in Tessera" in msgs[0]


def test_results_unchanged_inside_the_block(device):
    tessera.manual_seed(3)
    q, k, v = (tessera.randn(2, 3, 5, 8).to(device) for _ in range(3))
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with sdpa_kernel(SDPBackend.MATH):
            got = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert got.cpu().tolist() == ref.cpu().tolist()


def test_flex_attention_is_importable_and_refuses():
    from tessera.nn.attention.flex_attention import (_DEFAULT_SPARSE_BLOCK_SIZE, BlockMask,
                                                     create_block_mask, flex_attention)
    assert _DEFAULT_SPARSE_BLOCK_SIZE == 128
    for call in (lambda: flex_attention(None, None, None), lambda: create_block_mask(None),
                 lambda: BlockMask()):
        with pytest.raises(NotImplementedError, match="flex attention is not implemented"):
            call()
