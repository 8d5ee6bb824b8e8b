"""tessera.nn.utils.stream / unstream / stream_stats (ts_module_stream, docs/MEMORY_PLANNING.md):
a GPT trained streamed on sim:0 equals plain training there bit for bit (losses and weights; sim
runs the cpu kernels), its parameters live on the host while streamed and go back with unstream,
the counters say what crossed, and bad input raises clear errors."""
import pytest

np = pytest.importorskip("numpy")
import tessera  # noqa: E402
import tessera.nn as nn  # noqa: E402
import tessera.nn.functional as F  # noqa: E402
from tessera.nn.utils import place, stream, stream_stats, unstream  # noqa: E402


def gpt():
    tessera.manual_seed(3)
    return nn.GPT(vocab_size=16, context=8, n_layer=3, n_head=2, n_embd=16)


def train(m, steps=3):
    tessera.manual_seed(11)
    tok = tessera.randint(0, 16, (steps, 2, 9))
    opt = tessera.optim.AdamW(m.parameters(), lr=1e-2, weight_decay=0.01)
    losses = []
    for s in range(steps):
        x = tok[s, :, :8].to("sim:0")
        y = tok[s, :, 1:].reshape(-1).to("sim:0")
        opt.zero_grad()
        loss = F.cross_entropy(m(x).reshape(-1, 16), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    weights = [np.array(p.detach().cpu().tolist(), dtype=np.float32).tobytes()
               for p in m.parameters()]
    return losses, weights


def test_streamed_training_equals_plain():
    plain = train(gpt().to("sim:0"))
    m = gpt()
    stream(m, "sim:0", prefetch=2)
    w = m.tok_emb.weight
    assert str(w.device) == "cpu"
    got = train(m)
    assert got[0] == plain[0]
    assert got[1] == plain[1]
    st = stream_stats(m)
    assert st["units"] == 1 + 3 + 1  # embeddings, blocks, final norm
    assert st["backward_fetches"] == 3 * st["units"]
    assert 0 < st["max_resident_units"] <= 3
    assert st["bytes"] > 0 and st["copies"] > 0
    assert str(w.grad.device) == "cpu"
    unstream(m)
    assert stream_stats(m) is None
    assert m.tok_emb.weight is w and str(w.device) == "cpu"


def test_inference_on_device():
    x = tessera.randint(0, 16, (2, 8))
    ref = gpt().to("sim:0").eval()
    with tessera.no_grad():
        y0 = ref(x.to("sim:0"))
    m = gpt().eval()
    stream(m, "sim:0", prefetch=0)
    with tessera.no_grad():
        y1 = m(x)  # the input moves to sim:0; the output stays there
    assert str(y1.device) == "sim:0"
    assert np.array(y0.cpu().tolist()).tobytes() == np.array(y1.cpu().tolist()).tobytes()
    assert stream_stats(m)["max_resident_units"] == 1
    unstream(m)


def test_errors():
    m = gpt()
    with pytest.raises(ValueError, match="prefetch"):
        stream(m, "sim:0", prefetch=-1)
    with pytest.raises(TypeError, match="prefetch must be an int"):
        stream(m, "sim:0", prefetch=1.5)
    with pytest.raises(tessera.DeviceError, match="a sim or cuda device"):
        stream(m, "cpu")
    with pytest.raises(ValueError, match="not streamed"):
        unstream(m)
    stream(m, "sim:0")
    with pytest.raises(tessera.StateError, match="streamed already"):
        stream(m, "sim:0")
    with pytest.raises(tessera.StateError, match="is streamed"):
        place(m, "cpu=1GiB")
    unstream(m)
    with pytest.raises(NotImplementedError, match="is a Python module"):
        stream(nn.Sequential(nn.Linear(2, 2)), "sim:0")
