"""tessera.nn.utils.place (ts_module_place, docs/MEMORY_PLANNING.md): a GPT placed over sim:0,
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
