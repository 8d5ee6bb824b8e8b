"""PyTorch call forms that transformers' models use (issue 75; test_transformers_arches.py runs
the models): torch.full with a 0-dim Tensor fill_value (beam search writes torch.full(shape,
pad_token_tensor)): the fill's Python number decides the dtype as in PyTorch (int tensor ->
int64, float -> the default float, bool -> bool), integers past 2**53 stay exact, and a fill of
more than one element raises naming the argument; torch.where(condition), which is
nonzero(condition, as_tuple=True) (Mixtral's and Qwen2-MoE's experts); the long names
torch.greater / less_equal / not_equal / subtract / divide...; and the legacy
torch.nn.utils.weight_norm / remove_weight_norm (Wav2Vec2 looks it up)."""
import math

import pytest

import tessera as torch


def test_zero_dim_tensor_fill_dtype_and_value():
    t = torch.full((2, 3), torch.tensor(3, dtype=torch.int32))
    assert t.dtype == torch.int64 and t.tolist() == [[3] * 3] * 2
    t = torch.full((2,), torch.tensor(3.5))
    assert t.dtype == torch.get_default_dtype() and t.tolist() == [3.5, 3.5]
    t = torch.full((2,), torch.tensor(True))
    assert t.dtype == torch.bool and t.tolist() == [True, True]
    t = torch.full(size=(2,), fill_value=torch.tensor(1.25), dtype=torch.float64)
    assert t.dtype == torch.float64 and t.tolist() == [1.25, 1.25]


def test_integer_fill_past_2_pow_53_is_exact():
    big = 2 ** 53 + 1
    assert torch.full((2,), big).tolist() == [big, big]
    assert torch.full((2,), torch.tensor(big)).tolist() == [big, big]
    assert torch.full((1,), 2 ** 53).tolist() == [2 ** 53]


def test_fill_of_many_elements_raises():
    with pytest.raises(TypeError, match="fill_value.*0-dim Tensor, not a 1-dim"):
        torch.full((2,), torch.ones(2))


def test_where_of_condition_alone_is_nonzero_as_tuple():
    m = torch.tensor([[True, False, True], [False, True, False]])
    rows, cols = torch.where(m)
    assert rows.tolist() == [0, 0, 1] and cols.tolist() == [0, 2, 1]
    assert rows.dtype == torch.int64
    (i,) = torch.where(torch.tensor([0.0, 2.0, 0.0, -1.0]))
    assert i.tolist() == [1, 3]
    assert [t.tolist() for t in torch.where(torch.tensor(True))] == [[0]]
    with pytest.raises(TypeError, match="where.*condition"):
        torch.where([True, False])


def test_long_names_are_the_same_functions():
    a, b = torch.tensor([1.0, 2.0, 3.0]), torch.tensor([2.0, 2.0, 2.0])
    assert torch.greater(a, b).tolist() == [False, False, True]
    assert torch.greater_equal(a, b).tolist() == [False, True, True]
    assert torch.less(a, b).tolist() == [True, False, False]
    assert torch.less_equal(a, b).tolist() == [True, True, False]
    assert torch.not_equal(a, b).tolist() == [True, False, True]
    assert torch.subtract(a, b, alpha=2).tolist() == [-3.0, -2.0, -1.0]
    assert torch.divide(a, b, rounding_mode="floor").tolist() == [0.0, 1.0, 1.0]
    out = torch.empty(3)
    torch.subtract(a, b, out=out)
    assert out.tolist() == [-1.0, 0.0, 1.0]


def test_legacy_weight_norm():
    lin = torch.nn.Linear(3, 2)
    with torch.no_grad():
        lin.weight.copy_(torch.tensor([[3.0, 0.0, 4.0], [1.0, 2.0, 2.0]]))
    with pytest.warns(FutureWarning, match="parametrizations.weight_norm"):
        torch.nn.utils.weight_norm(lin)
    assert sorted(n for n, _ in lin.named_parameters()) == ["bias", "weight_g", "weight_v"]
    assert lin.weight_g.tolist() == [[5.0], [3.0]]  # the rows' 2-norms (dim=0)
    with torch.no_grad():
        lin.weight_g.mul_(2.0)
    x = torch.tensor([[1.0, 1.0, 1.0]])
    y = lin(x)  # recomputed before the forward: w = 2 * the old rows
    assert y.tolist()[0] == pytest.approx([14.0 + lin.bias[0].item(), 10.0 + lin.bias[1].item()])
    y.sum().backward()
    # d/dg of g * (v / |v|) . x is (v / |v|) . x: 7/5 and 5/3
    assert lin.weight_g.grad.reshape(-1).tolist() == pytest.approx([7.0 / 5.0, 5.0 / 3.0])
    # d/dv: g / |v| (x - (v.x) v / |v|^2), row 0: 10/5 ([1,1,1] - 7/25 [3,0,4])
    assert lin.weight_v.grad[0].tolist() == pytest.approx(
        [2.0 * (1 - 21.0 / 25.0), 2.0, 2.0 * (1 - 28.0 / 25.0)])
    torch.nn.utils.remove_weight_norm(lin)
    assert sorted(n for n, _ in lin.named_parameters()) == ["bias", "weight"]
    assert lin.weight.reshape(-1).tolist() == pytest.approx([6.0, 0.0, 8.0, 2.0, 4.0, 4.0])
    with pytest.raises(ValueError, match="weight_norm of 'weight' not found"):
        torch.nn.utils.remove_weight_norm(lin)
    assert math.isfinite(lin(x).sum().item())


def test_utils_hooks_removable_handle():
    from collections import OrderedDict

    from tessera.utils.hooks import RemovableHandle, unserializable_hook
    hooks, extra = OrderedDict(), OrderedDict()
    h1 = RemovableHandle(hooks, extra_dict=extra)
    hooks[h1.id] = "a"
    extra[h1.id] = True
    with RemovableHandle(hooks) as h2:
        hooks[h2.id] = "b"
        assert h2.id != h1.id and list(hooks.values()) == ["a", "b"]
    assert list(hooks.values()) == ["a"]
    h1.remove()
    assert not hooks and not extra
    h1.remove()  # a second remove does nothing

    @unserializable_hook
    def f(grad):
        return grad
    assert f.__torch_unserializable__ is True


def test_dataloader_takes_trainers_keywords():
    """transformers' Trainer passes multiprocessing_context=, in_order= and pin_memory_device="""
    ds = torch.utils.data.TensorDataset(torch.arange(6.0))
    dl = torch.utils.data.DataLoader(ds, batch_size=4, multiprocessing_context=None,
                                     in_order=True, pin_memory_device="")
    assert [b[0].tolist() for b in dl] == [[0.0, 1.0, 2.0, 3.0], [4.0, 5.0]]
    dl = torch.utils.data.DataLoader(ds, batch_size=2, num_workers=2, in_order=False,
                                     multiprocessing_context="spawn")
    assert [b[0].tolist() for b in dl] == [[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]]
    with pytest.raises(ValueError, match="multiprocessing_context can only be used"):
        torch.utils.data.DataLoader(ds, multiprocessing_context="spawn")
