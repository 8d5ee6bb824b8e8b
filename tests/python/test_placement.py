"""tessera.nn.utils.place (ts_module_place, docs/PLACEMENT.md): a GPT placed over sim:0,
sim:1 and the cpu gives the unplaced run's logits and gradients bit for bit (sim runs the cpu
kernels), budgets as dicts or strings, clear errors for a budget too small and bad input."""
import pytest

np = pytest.importorskip("numpy")
import tessera  # noqa: E402
import tessera.nn as nn  # noqa: E402
from tessera.nn.utils import place  # noqa: E402


def gpt():
    tessera.manual_seed(3)
    return nn.GPT(vocab_size=16, context=8, n_layer=3, n_head=2, n_embd=16)


def run(m, idx):
    y = m(idx)
    (y * y).sum().backward()
    grads = [np.array(p.grad.cpu().tolist()) for p in m.parameters()]
    return np.array(y.cpu().tolist()), grads


def test_gpt_placed_equals_unplaced():
    if tessera.sim.device_count() < 2:
        pytest.skip("needs TS_SIM_DEVICES=2")
    idx = tessera.randint(0, 16, (2, 8))
    y0, g0 = run(gpt(), idx)
    m = gpt()
    # embeddings 1536 B, blocks 13120 B: the embeddings and one block on sim:0, one on sim:1
    plan = place(m, {"sim:0": "16KiB", "sim:1": 15000, "cpu": "1GiB"}, output_device="cpu")
    assert "blocks.0                 -> sim:0" in plan
    assert "blocks.1                 -> sim:1" in plan
    assert "blocks.2                 -> cpu" in plan
    assert str(dict(m.named_parameters())["blocks.1.linear1.weight"].device) == "sim:1"
    y1, g1 = run(m, idx)
    assert str(m(idx).device) == "cpu"
    assert y0.tobytes() == y1.tobytes()
    assert all(a.tobytes() == b.tobytes() for a, b in zip(g0, g1))


def test_errors():
    m = gpt()
    with pytest.raises(MemoryError, match="the budgets cannot hold the model"):
        place(m, "cpu=1KiB")
    assert str(m.tok_emb.weight.device) == "cpu"  # nothing moved
    with pytest.raises(ValueError, match="bad size '2XB' for cpu"):
        place(m, "cpu=2XB")
    with pytest.raises(TypeError, match="max_memory must be"):
        place(m, {})
    with pytest.raises(NotImplementedError, match="is a Python module"):
        place(nn.Sequential(nn.Linear(2, 2)), "cpu=1GiB")
    assert "cpu: " in place(m, "cpu=1GiB", training=True, dry_run=True)


def test_overrides_equal_unplaced():
    if tessera.sim.device_count() < 2:
        pytest.skip("needs TS_SIM_DEVICES=2")
    idx = tessera.randint(0, 16, (2, 8))
    y0, g0 = run(gpt(), idx)
    m = gpt()
    # the token embedding (tied to the head) and block 1's first Linear stored on the cpu, used
    # on their units' devices; the rest as in test_gpt_placed_equals_unplaced
    plan = place(m, {"sim:0": "16KiB", "sim:1": 15000, "cpu": "1GiB"}, output_device="cpu",
                 overrides={r"^tok_emb\.": "cpu", r"blocks\.1\.linear1\.": "cpu"})
    assert "tok_emb.weight           -> cpu      1.00 KiB (override, used on sim:0)" in plan
    assert "blocks.1.linear1.bias    -> cpu" in plan
    params = dict(m.named_parameters())
    assert str(params["tok_emb.weight"].device) == "cpu"
    assert str(params["blocks.1.linear1.weight"].device) == "cpu"
    assert str(params["blocks.1.linear2.weight"].device) == "sim:1"
    y1, g1 = run(m, idx)
    assert y0.tobytes() == y1.tobytes()
    assert all(a.tobytes() == b.tobytes() for a, b in zip(g0, g1))
    assert str(m.tok_emb.weight.grad.device) == "cpu"


def test_override_errors():
    m = gpt()
    with pytest.raises(ValueError, match="bad regular expression 'a\\('"):
        place(m, "cpu=1GiB", overrides="a(=cpu")
    with pytest.raises(ValueError, match="matches none of the model's parameters"):
        place(m, "cpu=1GiB", overrides={"nothing": "cpu"})
    with pytest.raises(ValueError, match="without ','"):
        place(m, "cpu=1GiB", overrides={"a{1,2}": "cpu"})
    with pytest.raises(TypeError, match="overrides must be"):
        place(m, "cpu=1GiB", overrides=["a=cpu"])
    if tessera.sim.device_count() >= 1:
        with pytest.raises(ValueError, match="sim:0 has no budget"):
            place(m, "cpu=1GiB", overrides="tok_emb=sim:0")
