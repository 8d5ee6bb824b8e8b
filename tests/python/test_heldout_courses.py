"""Pieces the held-back corpus of course programs (udacity/deep-learning-v2-pytorch,
mrdbourke/pytorch-deep-learning, d2l) needed, issue 53: NumPy functions of a tensor give a tensor
back (Tensor.__array_wrap__: the denoising autoencoder's np.clip(noisy_imgs, 0., 1.)), and a
data set's root has its ~ expanded (the intro notebooks' datasets.MNIST('~/.pytorch/MNIST_data/'))."""
import gzip
import os
import shutil

import numpy as np
import pytest

import tessera as t
from tessera.vision import datasets, transforms

FASHION = "/usr/share/datasets/fashion-mnist"


def test_numpy_functions_of_a_tensor_give_a_tensor():
    x = t.tensor([[-1.0, 0.25, 2.0], [0.5, -0.5, 3.0]])
    ref = x.numpy().astype(np.float64)
    # a ufunc (np.exp), and functions NumPy runs on the array after the method call fails
    # (np.clip calls x.clip(0., 1., out=None), np.transpose x.transpose(None))
    for f, want in ((np.exp, np.exp(ref)), (lambda a: np.clip(a, 0.0, 1.0), np.clip(ref, 0, 1)),
                    (np.transpose, ref.T), (lambda a: np.reshape(a, (3, 2)), ref.reshape(3, 2)),
                    (lambda a: np.add(a, 1), ref + 1)):
        r = f(x)
        assert isinstance(r, t.Tensor) and r.dtype == t.float32
        np.testing.assert_allclose(r.numpy(), want, rtol=1e-6)
    r = np.argmax(x)  # a NumPy scalar result: a 0-dim int64 tensor, as PyTorch gives
    assert isinstance(r, t.Tensor) and r.dtype == t.int64 and r.dim() == 0 and int(r) == 5
    r = np.isnan(x)  # PyTorch's: a bool result comes back as uint8
    assert isinstance(r, t.Tensor) and r.dtype == t.uint8 and r.sum().item() == 0
    y = t.tensor([1, 2], dtype=t.int64).__array_wrap__(np.array([True, False]))
    assert y.dtype == t.uint8 and y.tolist() == [1, 0]
    with pytest.raises(TypeError):
        x.__array_wrap__()


@pytest.mark.skipif(not os.path.isdir(FASHION), reason="needs dataset-fashion-mnist")
def test_dataset_root_expands_the_home_folder(tmp_path, monkeypatch):
    raw = tmp_path / "data" / "MNIST" / "raw"
    raw.mkdir(parents=True)
    for name in ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"):
        with gzip.open(os.path.join(FASHION, name + ".gz"), "rb") as src, \
                open(raw / name, "wb") as dst:
            shutil.copyfileobj(src, dst)
    monkeypatch.setenv("HOME", str(tmp_path))
    ds = datasets.MNIST("~/data", train=False, download=True, transform=transforms.ToTensor())
    assert ds.root == str(tmp_path / "data") and len(ds) == 10000
    assert ds[0][0].shape == (1, 28, 28)
    (tmp_path / "imgs" / "a").mkdir(parents=True)
    with pytest.raises(FileNotFoundError, match=str(tmp_path / "imgs")):
        datasets.ImageFolder("~/imgs")  # expanded too: the class folder holds no image


def test_lazy_linear_takes_its_input_features_and_keeps_its_parameter_objects():
    t.manual_seed(0)
    m = t.nn.LazyLinear(3)
    assert isinstance(m.weight, t.nn.parameter.UninitializedParameter)
    assert m.in_features == 0 and m.has_uninitialized_params()
    assert repr(m) == "LazyLinear(in_features=0, out_features=3, bias=True)"
    w, b = m.weight, m.bias
    m.weight.data.normal_(0, 0.01)  # d2l's habit before the first forward: touches nothing
    opt = t.optim.SGD(m.parameters(), lr=0.5)  # made before the parameters have a shape
    x = t.randn(4, 5, dtype=t.float32)
    y = m(x)
    assert type(m) is t.nn.Linear and m.in_features == 5  # d2l's type(m) == nn.Linear
    assert m.weight is w and m.bias is b and type(w) is t.nn.Parameter
    assert w.shape == (3, 5) and b.shape == (3,) and w.requires_grad
    bound = 1 / 5 ** 0.5  # Linear's reset_parameters: kaiming_uniform_(a=sqrt(5)), U(-1/sqrt(in), ..)
    assert float(w.abs().max()) <= bound and float(b.abs().max()) <= bound
    assert float(w.std()) > 0.1  # initialised, not left at the ignored normal_(0, 0.01)
    ref = x.numpy().astype(np.float64) @ w.detach().numpy().astype(np.float64).T + \
        b.detach().numpy().astype(np.float64)
    np.testing.assert_allclose(y.detach().numpy(), ref, rtol=1e-5, atol=1e-6)
    w0 = w.detach().clone()
    y.sum().backward()
    opt.step()  # the optimizer made before the first forward updates the same objects
    want = w0.numpy() - 0.5 * np.tile(x.numpy().sum(0), (3, 1))
    np.testing.assert_allclose(w.detach().numpy(), want, rtol=1e-5, atol=1e-6)
    m2 = t.nn.LazyLinear(2, bias=False, dtype=t.float64)
    m2(t.ones(1, 3, dtype=t.float64))
    assert m2.bias is None and m2.weight.dtype == t.float64 and m2.weight.shape == (2, 3)


def test_lazy_batch_norm_takes_the_channels_and_tracks_statistics():
    t.manual_seed(1)
    net = t.nn.Sequential(t.nn.LazyBatchNorm2d(), t.nn.ReLU())
    assert len(list(net.parameters())) == 2
    x = t.randn(4, 3, 2, 2, dtype=t.float32)
    y = net(x)
    bn = net[0]
    assert type(bn) is t.nn.BatchNorm2d and bn.num_features == 3
    assert bn.running_mean.shape == (3,) and int(bn.num_batches_tracked) == 1
    xd = x.numpy().astype(np.float64)
    mean, var = xd.mean((0, 2, 3)), xd.var((0, 2, 3))
    ref = np.maximum((xd - mean[None, :, None, None]) / np.sqrt(var[None, :, None, None] + 1e-5), 0)
    np.testing.assert_allclose(y.detach().numpy(), ref, rtol=1e-4, atol=1e-5)
    n = xd.size / 3
    np.testing.assert_allclose(bn.running_mean.numpy(), 0.1 * mean, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(bn.running_var.numpy(), 0.9 + 0.1 * var * n / (n - 1), rtol=1e-5)
    assert bn.weight.tolist() == [1, 1, 1] and bn.bias.tolist() == [0, 0, 0]
    b1 = t.nn.LazyBatchNorm1d(affine=False, track_running_stats=False)
    b1(t.randn(5, 4))
    assert type(b1) is t.nn.BatchNorm1d and b1.weight is None and b1.running_mean is None
    assert b1.num_features == 0  # PyTorch's: nothing to initialise, so it stays 0


def test_version_multiply_range_and_manual_seed_by_name():
    import tessera.vision
    assert isinstance(t.__version__, str) and isinstance(tessera.vision.__version__, str)
    a = t.tensor([1.0, 2.0])
    assert t.multiply(a, a).tolist() == [1, 4] and t.multiply(a, 3).tolist() == [3, 6]
    with pytest.warns(UserWarning, match="deprecated"):
        r = t.range(1, 4)
    assert r.dtype == t.float32 and r.tolist() == [1, 2, 3, 4]  # end included, default dtype
    cases = [((0, 1, 0.25), {}), ((5, 1, -2), {}), ((0, 0.3, 0.1), {}),
             ((0, 1, 0.1), {"dtype": t.float64})]
    with pytest.warns(UserWarning):
        for args, kw in cases:
            start, end, step = args
            n = int(np.floor((end - start) / step)) + 1
            want = start + np.arange(n, dtype=np.float64) * step  # in double, then the dtype
            r = t.range(*args, **kw)
            assert r.dtype == kw.get("dtype", t.float32)
            np.testing.assert_array_equal(r.numpy(), want.astype(r.numpy().dtype))
        r = t.range(1.5, 4, dtype=t.int32)  # whole numbers: the bounds cut to integers first
        assert r.dtype == t.int32 and r.tolist() == [1, 2, 3, 4]
        for bad in ((1, 4, 0), (4, 1, 1), (1, 0.5, 1)):
            with pytest.raises(RuntimeError):
                t.range(*bad)
    assert t.manual_seed(seed=5) is t.default_generator
    x = t.rand(3)
    t.manual_seed(5)
    assert t.rand(3).tolist() == x.tolist()


def test_rnn_flat_weights_names_list_every_parameter_in_pytorch_order():
    gru = t.nn.GRU(3, 4, num_layers=2)
    assert gru._flat_weights_names == ["weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0",
                                       "weight_ih_l1", "weight_hh_l1", "bias_ih_l1", "bias_hh_l1"]
    lstm = t.nn.LSTM(3, 4, bidirectional=True, bias=False, proj_size=2)
    assert lstm._flat_weights_names == ["weight_ih_l0", "weight_hh_l0", "weight_hr_l0",
                                        "weight_ih_l0_reverse", "weight_hh_l0_reverse",
                                        "weight_hr_l0_reverse"]
    assert [tuple(w.shape) for w in lstm._flat_weights] == [(16, 3), (16, 2), (2, 4)] * 2
    for name in gru._flat_weights_names:  # d2l's init_seq2seq
        if "weight" in name:
            t.nn.init.zeros_(gru._parameters[name])
    assert float(gru.weight_hh_l1.abs().sum()) == 0 and float(gru.bias_hh_l1.abs().sum()) > 0


def test_the_random_module_seeds_and_forks_the_default_generator():
    assert t.random.manual_seed(seed=42) is t.default_generator
    a = t.rand(4)
    t.random.manual_seed(42)
    assert t.rand(4).tolist() == a.tolist() and t.random.initial_seed() == 42
    t.random.manual_seed(7)
    with t.random.fork_rng():
        t.rand(5)  # drawn inside: the state outside is as before
    b = t.rand(3)
    t.manual_seed(7)
    assert t.rand(3).tolist() == b.tolist()
    s = t.seed()
    assert isinstance(s, int) and t.initial_seed() == s
    state = t.random.get_rng_state()
    c = t.rand(2)
    t.random.set_rng_state(state)
    assert t.rand(2).tolist() == c.tolist()


def test_lazy_convolutions_become_the_eager_module():
    t.manual_seed(2)
    m = t.nn.LazyConv2d(4, 3, padding=1)
    x = t.randn(2, 3, 5, 5)
    y = m(x)
    assert type(m) is t.nn.Conv2d and m.in_channels == 3 and m.weight.shape == (4, 3, 3, 3)
    ref = t.nn.functional.conv2d(x, m.weight.detach(), m.bias.detach(), 1, 1)
    np.testing.assert_allclose(y.detach().numpy(), ref.numpy(), rtol=1e-5, atol=1e-6)
    assert m(x).tolist() == y.tolist()  # the eager forward afterwards, same parameters
    c1 = t.nn.LazyConv1d(2, 3)
    c1(t.randn(1, 5, 7))
    assert type(c1) is t.nn.Conv1d and c1.weight.shape == (2, 5, 3)
    ct = t.nn.LazyConvTranspose2d(2, 2, stride=2)
    assert ct(t.randn(1, 3, 4, 4)).shape == (1, 2, 8, 8) and type(ct) is t.nn.ConvTranspose2d


def _gradcheck(f, inputs, h=1e-6, tol=1e-6):
    """f(*inputs).sum()'s autograd gradients against float64 central differences"""
    out = f(*inputs).sum()
    grads = t.autograd.grad(out, inputs)
    for x, g in zip(inputs, grads):
        base = x.detach().numpy().copy()
        num = np.zeros_like(base)
        for i in np.ndindex(base.shape):
            vals = []
            for d in (h, -h):
                b = base.copy()
                b[i] += d
                xs = [t.tensor(b) if y is x else y.detach() for y in inputs]
                vals.append(float(f(*xs).sum()))
            num[i] = (vals[0] - vals[1]) / (2 * h)
        np.testing.assert_allclose(g.numpy(), num, rtol=tol, atol=tol)
    return True


def test_categorical_log_prob_entropy_gradient_and_samples():
    from tessera.distributions import Categorical
    p = t.tensor([[0.1, 0.6, 0.3], [2.0, 1.0, 1.0]], dtype=t.float64, requires_grad=True)
    c = Categorical(p)
    assert c.batch_shape == (2,) and c.event_shape == ()
    pn = p.detach().numpy() / p.detach().numpy().sum(-1, keepdims=True)
    np.testing.assert_allclose(c.probs.detach().numpy(), pn, rtol=1e-12)
    a = t.tensor([1, 0])
    lp = c.log_prob(a)
    np.testing.assert_allclose(lp.detach().numpy(), np.log([pn[0, 1], pn[1, 0]]), rtol=1e-12)
    np.testing.assert_allclose(c.entropy().detach().numpy(), -(pn * np.log(pn)).sum(-1), rtol=1e-12)
    assert _gradcheck(lambda q: Categorical(q).log_prob(a), (p,))
    t.manual_seed(0)
    s = c.sample((2000,))
    assert s.shape == (2000, 2) and s.dtype == t.int64
    freq = np.stack([(s[:, j].numpy()[:, None] == np.arange(3)).mean(0) for j in range(2)])
    np.testing.assert_allclose(freq, pn, atol=0.05)  # 2000 draws: a few standard errors
    lg = Categorical(logits=t.tensor([0.5, -1.0, 2.0], dtype=t.float64))
    ref = np.array([0.5, -1.0, 2.0]) - np.log(np.exp([0.5, -1.0, 2.0]).sum())
    np.testing.assert_allclose(lg.logits.numpy(), ref, rtol=1e-12)
    np.testing.assert_allclose(lg.probs.numpy(), np.exp(ref), rtol=1e-12)
    assert lg.sample().shape == () and lg.enumerate_support().tolist() == [0, 1, 2]
    with pytest.raises(ValueError):
        Categorical(p, logits=p)


def test_normal_log_prob_entropy_and_rsample_gradient():
    from tessera.distributions import Normal
    loc = t.tensor([0.0, 1.0], dtype=t.float64, requires_grad=True)
    scale = t.tensor([1.0, 2.0], dtype=t.float64, requires_grad=True)
    n = Normal(loc, scale)
    v = np.array([0.5, -1.0])
    want = -((v - [0, 1]) ** 2) / (2 * np.array([1, 4.0])) - np.log([1, 2.0]) - 0.5 * np.log(2 * np.pi)
    np.testing.assert_allclose(n.log_prob(t.tensor(v)).detach().numpy(), want, rtol=1e-12)
    np.testing.assert_allclose(n.entropy().detach().numpy(), 0.5 + 0.5 * np.log(2 * np.pi) +
                               np.log([1, 2.0]), rtol=1e-12)
    assert _gradcheck(lambda m, s: Normal(m, s).log_prob(t.tensor(v)), (loc, scale))
    t.manual_seed(3)
    r = n.rsample((5,))
    assert r.shape == (5, 2) and r.requires_grad
    r.sum().backward()
    assert loc.grad.tolist() == [5.0, 5.0]  # d(loc + eps * scale) / d loc
    assert n.sample((3,)).shape == (3, 2) and not n.sample().requires_grad
