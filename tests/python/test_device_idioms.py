"""test_device_idioms.py — the device idioms of PyTorch programs (issue 53): tessera.accelerator,
tessera.backends, set_default_device / get_default_device and `with tessera.device(...)`, and
the tessera.cuda calls tutorials make (seeds, synchronize, memory queries, Event, Stream), which
must run on a machine without a GPU. Where CUDA is present the cuda-only checks run too."""
import threading
import time

import pytest

import tessera

CUDA = tessera.cuda.is_available()
needs_cuda = pytest.mark.skipif(not CUDA, reason="no CUDA device")
no_cuda = pytest.mark.skipif(CUDA, reason="checks the behaviour without CUDA")


@pytest.fixture(autouse=True)
def default_device_back():
    yield
    tessera.set_default_device(None)


# ------------------------------------------------------------------ accelerator
def test_accelerator_idiom():
    acc = tessera.accelerator
    assert acc.is_available() == CUDA
    assert acc.device_count() == tessera.cuda.device_count()
    device = acc.current_accelerator().type if acc.is_available() else "cpu"
    x = tessera.ones(3, device=device)
    assert x.device.type == device and x.sum().item() == 3.0
    acc.synchronize()  # nothing pending on the cpu: returns


@no_cuda
def test_accelerator_without_cuda():
    acc = tessera.accelerator
    assert acc.current_accelerator() is None
    assert acc.current_accelerator(check_available=True) is None
    assert acc.device_count() == 0
    with pytest.raises(RuntimeError, match="no accelerator"):
        acc.current_device_index()
    with pytest.raises(RuntimeError, match="no accelerator"):
        acc.set_device_index(0)


@needs_cuda
def test_accelerator_with_cuda():
    acc = tessera.accelerator
    assert acc.current_accelerator() == tessera.device("cuda")
    acc.set_device_index(0)
    assert acc.current_device_index() == 0
    acc.synchronize(0)


# ------------------------------------------------------------------ backends
def test_backends_flags_read_set_and_restore():
    import tessera.backends.cudnn as cudnn  # the import form programs use
    b = tessera.backends
    assert cudnn is b.cudnn
    assert (cudnn.enabled, cudnn.benchmark, cudnn.deterministic, cudnn.allow_tf32) == \
        (True, False, False, True)  # PyTorch's defaults
    cudnn.benchmark, cudnn.deterministic = True, True
    assert cudnn.benchmark and cudnn.deterministic
    with cudnn.flags(enabled=False, benchmark=False, deterministic=False):
        assert not cudnn.enabled and not cudnn.benchmark
    assert cudnn.enabled and cudnn.benchmark and cudnn.deterministic
    cudnn.benchmark, cudnn.deterministic = False, False
    assert cudnn.is_available() is False and cudnn.version() is None
    assert b.mps.is_available() is False and b.mps.is_built() is False
    assert b.openmp.is_available() is True
    assert b.mkldnn.is_available() is False and b.mkl.is_available() is False
    assert b.cuda.is_built() in (True, False)
    if CUDA:
        assert b.cuda.is_built()


def test_backends_tf32_is_the_c_library_switch():
    m = tessera.backends.cuda.matmul
    assert m.allow_tf32 is False  # PyTorch's default
    m.allow_tf32 = True
    assert m.allow_tf32 is True and tessera._C._cuda_allow_tf32() is True
    m.allow_tf32 = False
    assert tessera._C._cuda_allow_tf32() is False
    m.allow_fp16_reduced_precision_reduction = False  # stored
    assert m.allow_fp16_reduced_precision_reduction is False
    m.allow_fp16_reduced_precision_reduction = True
    with pytest.raises(AttributeError):
        m.allow_tf3 = True  # a misspelt switch is an error, not a silent new attribute


def test_use_deterministic_algorithms():
    assert tessera.are_deterministic_algorithms_enabled() is False
    tessera.use_deterministic_algorithms(True, warn_only=True)
    assert tessera.are_deterministic_algorithms_enabled()
    assert tessera.is_deterministic_algorithms_warn_only_enabled()
    tessera.use_deterministic_algorithms(False)
    assert not tessera.are_deterministic_algorithms_enabled()
    with pytest.raises(TypeError):
        tessera.use_deterministic_algorithms(1)


# ------------------------------------------------------------------ default device
def test_set_default_device_is_honoured_by_factories_and_modules():
    assert tessera.get_default_device() == tessera.device("cpu")
    tessera.set_default_device("sim:0")
    sim = tessera.device("sim:0")
    assert tessera.get_default_device() == sim
    made = [tessera.zeros(2), tessera.ones(2, 2), tessera.empty(1), tessera.rand(2),
            tessera.randn(2), tessera.full((2,), 3.0), tessera.arange(3), tessera.tensor([1.0]),
            tessera.linspace(0, 1, 3), tessera.eye(2), tessera.randint(5, (2,)),
            tessera.FloatTensor(2).to("sim:0"), tessera.nn.Linear(2, 2).weight]
    for t in made:
        assert t.device == sim
    assert tessera.zeros(2, device="cpu").device == tessera.device("cpu")  # device= still wins
    lin = tessera.nn.Linear(3, 2)
    y = lin(tessera.ones(4, 3))
    assert y.device == sim and tuple(y.shape) == (4, 2)
    tessera.set_default_device(None)
    assert tessera.zeros(1).device == tessera.device("cpu")


def test_default_device_with_scopes_nests():
    cpu, s0, s1 = tessera.device("cpu"), tessera.device("sim:0"), tessera.device("sim:1")
    with tessera.device("sim:1"):
        assert tessera.zeros(1).device == s1
        tessera.set_default_device("sim:0")  # under the open scope: the block still wins
        assert tessera.zeros(1).device == s1
    assert tessera.zeros(1).device == s0
    with tessera.device_scope("sim:1"):
        tessera.set_default_device("cpu")
        with tessera.device("sim:0"):
            assert tessera.zeros(1).device == s0
        assert tessera.zeros(1).device == s1
    assert tessera.zeros(1).device == cpu
    tessera.set_default_device("sim:1")
    tessera.set_default_device("sim:0")  # replaces, does not stack
    tessera.set_default_device(None)
    assert tessera.zeros(1).device == cpu and tessera.get_default_device() == cpu


def test_device_context_manager():
    with tessera.device("sim:0") as d:
        assert d == tessera.device("sim:0")
        assert tessera.zeros(1).device == d and tessera.tensor([1, 2]).device == d
    assert tessera.zeros(1).device == tessera.device("cpu")
    with pytest.raises(ZeroDivisionError):
        with tessera.device("sim:0"):
            raise ZeroDivisionError
    assert tessera.zeros(1).device == tessera.device("cpu")


def test_default_device_is_per_thread():
    tessera.set_default_device("sim:0")
    seen = []
    th = threading.Thread(target=lambda: seen.append(tessera.zeros(1).device))
    th.start()
    th.join()
    assert seen == [tessera.device("cpu")] and tessera.zeros(1).device == tessera.device("sim:0")


def test_set_default_device_errors():
    with pytest.raises(ValueError, match="invalid device"):
        tessera.set_default_device("gpu")
    if not CUDA:
        with pytest.raises(tessera.TesseraError, match="not available"):
            tessera.set_default_device("cuda")
    assert tessera.get_default_device() == tessera.device("cpu")


# ------------------------------------------------------------------ tessera.cuda
def test_cuda_calls_tutorials_make_are_safe():
    c = tessera.cuda
    c.manual_seed(1)
    c.manual_seed_all(1)
    c.synchronize()
    c.empty_cache()
    c.reset_peak_memory_stats()
    for f in (c.memory_allocated, c.max_memory_allocated, c.memory_reserved):
        assert isinstance(f(), int) and f() >= 0
    assert c.current_device() >= 0
    assert isinstance(c.initial_seed(), int)


@no_cuda
def test_cuda_without_gpu():
    c = tessera.cuda
    tessera.manual_seed(3)
    tessera.rand(2)
    a = tessera.rand(2).tolist()
    tessera.manual_seed(3)
    tessera.rand(2)
    c.manual_seed_all(99)  # ignored without CUDA, as torch: the cpu stream goes on
    c.manual_seed(98)
    b = tessera.rand(2).tolist()
    assert b == a
    assert (c.memory_allocated(), c.max_memory_allocated(), c.memory_reserved()) == (0, 0, 0)
    assert c.is_bf16_supported() is False
    for f in (c.get_device_name, c.get_device_properties, c.get_device_capability):
        with pytest.raises(RuntimeError, match="no CUDA device"):
            f()
    with pytest.raises(RuntimeError, match="no CUDA device"):
        c.set_device(0)


@no_cuda
def test_host_events_time_the_host():
    start, end = tessera.cuda.Event(enable_timing=True), tessera.cuda.Event(enable_timing=True)
    with pytest.raises(RuntimeError, match="recorded"):
        start.elapsed_time(end)
    start.record()
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < 0.02:
        pass
    end.record()
    end.synchronize()
    ms = start.elapsed_time(end)
    assert 20.0 <= ms < 5000.0 and start.query() and end.query()
    with pytest.raises(RuntimeError, match="enable_timing"):
        tessera.cuda.Event().elapsed_time(end)


@no_cuda
def test_host_streams():
    s = tessera.cuda.Stream()
    assert s.query() and s == tessera.cuda.current_stream() == tessera.cuda.default_stream()
    with tessera.cuda.stream(s):
        x = tessera.ones(2) * 2
    with tessera.cuda.stream(None):
        pass
    s.synchronize()
    s.wait_stream(tessera.cuda.current_stream())
    s.wait_event(s.record_event())
    tessera.cuda.set_stream(s)
    assert x.tolist() == [2.0, 2.0]


@needs_cuda
def test_cuda_streams_and_events():
    c = tessera.cuda
    props = c.get_device_properties(0)
    assert props.total_memory > 0 and props.major >= 1 and c.get_device_name(0) == props.name
    s = c.Stream()
    assert s != c.default_stream() and s.device == tessera.device("cuda:0")
    start, end = c.Event(enable_timing=True), c.Event(enable_timing=True)
    a = tessera.randn(512, 512, device="cuda")
    with c.stream(s):
        assert c.current_stream() == s
        start.record()
        b = a @ a
        end.record()
    assert c.current_stream() == c.default_stream()
    end.synchronize()
    assert start.elapsed_time(end) >= 0.0 and end.query()
    s.synchronize()
    ref = a.cpu().double() @ a.cpu().double()
    assert (b.cpu().double() - ref).abs().max().item() < 1e-2 * ref.abs().max().item()


@needs_cuda
def test_cuda_legacy_types():
    x = tessera.cuda.FloatTensor(2, 3)
    assert x.device.type == "cuda" and isinstance(x, tessera.cuda.FloatTensor)
    assert not isinstance(x, tessera.FloatTensor)
