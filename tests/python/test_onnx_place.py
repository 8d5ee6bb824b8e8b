"""tessera.nn.utils.place on a model from tessera.onnx.load (ts_module_place on an ONNX graph,
src/onnx/place.c, docs/PLACEMENT.md): the graph's nodes split over sim:0, sim:1 and the
cpu give the unsplit model's outputs and gradients bit for bit (sim runs the cpu kernels), each
initializer on its run's device; a budget too small raises MemoryError naming each device."""
import pytest

np = pytest.importorskip("numpy")
import tessera  # noqa: E402
import tessera.nn as nn  # noqa: E402
import tessera.onnx  # noqa: E402
from tessera.nn.utils import place  # noqa: E402


@pytest.fixture
def mlp_file(tmp_path):
    # Linear(8, 16), ReLU, Linear(16, 16), ReLU, Linear(16, 4): 576, 1088 and 272 bytes
    tessera.manual_seed(5)
    net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 16), nn.ReLU(),
                        nn.Linear(16, 4))
    path = str(tmp_path / "mlp.onnx")
    tessera.onnx.export(net, tessera.zeros(2, 8), path)
    return path


def run(m, x, g):
    x = x.clone().requires_grad_(True)
    y = m(x)
    (y * g.to(y.device)).sum().backward()
    grads = [np.array(p.grad.cpu().tolist()) for p in m.parameters()]
    return np.array(y.cpu().tolist()), np.array(x.grad.tolist()), grads, str(y.device)


def test_split_equals_unsplit(mlp_file):
    if tessera.sim.device_count() < 2:
        pytest.skip("needs TS_SIM_DEVICES=2")
    x, g = tessera.randn(2, 8), tessera.randn(2, 4)
    y0, gx0, g0, _ = run(tessera.onnx.load(mlp_file, device="cpu"), x, g)
    m = tessera.onnx.load(mlp_file, device="cpu")
    plan = place(m, {"sim:0": 600, "sim:1": "1100B", "cpu": "1GiB"})
    assert "-> sim:0    576 B" in plan and "-> cpu      272 B" in plan
    params = dict(m.named_parameters())
    assert [str(params[n].device) for n in ("0.weight", "2.weight", "4.weight")] == \
        ["sim:0", "sim:1", "cpu"]
    y1, gx1, g1, dev = run(m, x, g)
    assert dev == "cpu"  # the last run's device
    assert y0.tobytes() == y1.tobytes() and gx0.tobytes() == gx1.tobytes()
    assert all(a.tobytes() == b.tobytes() for a, b in zip(g0, g1))


def test_budget_too_small(mlp_file):
    if tessera.sim.device_count() < 2:
        pytest.skip("needs TS_SIM_DEVICES=2")
    m = tessera.onnx.load(mlp_file, device="cpu")
    with pytest.raises(MemoryError, match="sim:0=100 B .*sim:1=700 B"):
        place(m, "sim:0=100B,sim:1=700B")
    assert all(str(p.device) == "cpu" for p in m.parameters())  # nothing moved
