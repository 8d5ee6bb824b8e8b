"""tessera.utils.checkpoint (activation checkpointing, src/autograd/checkpoint.c) on cpu and sim:0:
gradients of a checkpointed function — its tensor inputs and the parameters of the modules it
calls — equal the plain run's exactly (the same ops on the same values), with dropout (the random
state replayed), keyword and non-tensor arguments, several outputs, nested checkpoints and
checkpoint_sequential; the function runs once more, in backward; a function that runs other ops
the second time, and bad arguments, raise."""
import pytest

import tessera
from tessera import nn
from tessera.utils.checkpoint import checkpoint, checkpoint_sequential


def make_net(device):
    tessera.manual_seed(3)
    return nn.Sequential(nn.Linear(6, 12), nn.Tanh(), nn.Dropout(0.3), nn.Linear(12, 12),
                         nn.ReLU(), nn.Linear(12, 4)).to(device)


def grads(net, x):
    return [p.grad.tolist() for p in net.parameters()] + [x.grad.tolist()]


def run(device, wrap):
    """Loss of net(x) through wrap(net, x) and every gradient; the same seeds each time."""
    net = make_net(device)
    tessera.manual_seed(5)
    x = tessera.randn(7, 6, device=device, requires_grad=True)
    tessera.manual_seed(11)
    out = wrap(net, x)
    tessera.manual_seed(12345)  # the recomputation must not read the generator's state now
    (out * out).sum().backward()
    return out.tolist(), grads(net, x)


def test_checkpoint_matches_plain_run(device):
    plain = run(device, lambda net, x: net(x))
    ck = run(device, lambda net, x: checkpoint(net, x, use_reentrant=False))
    assert ck == plain


def test_checkpoint_sequential_matches(device):
    plain = run(device, lambda net, x: net(x))
    for segments in (1, 2, 3, 6, 10):
        ck = run(device, lambda net, x: checkpoint_sequential(net, segments, x,
                                                              use_reentrant=False))
        assert ck == plain, segments
    listed = run(device, lambda net, x: checkpoint_sequential(list(net.children()), 2, x))
    assert listed == plain


def test_nested_kwargs_and_several_outputs(device):
    calls = []

    def inner(a, scale):
        return (a.tanh() * scale).sigmoid()

    def fn(a, b, scale=1.0, nested=False):
        calls.append(1)
        h = checkpoint(inner, a, scale) if nested else inner(a, scale)
        return h * b, (h * h).sum(), "label"

    results = []
    for use_ck in (False, True):
        tessera.manual_seed(2)
        a = tessera.randn(4, 5, device=device, requires_grad=True)
        b = tessera.randn(4, 5, device=device, requires_grad=True)
        calls.clear()
        if use_ck:
            y, s, label = checkpoint(fn, a, b, scale=0.7, nested=True)
        else:
            y, s, label = fn(a, b, scale=0.7)
        assert label == "label"
        assert len(calls) == 1
        (y.sum() + s).backward()
        assert len(calls) == (2 if use_ck else 1)  # recomputed once, in backward
        results.append((y.tolist(), a.grad.tolist(), b.grad.tolist()))
    assert results[0] == results[1]


def test_retain_graph_recomputes_once(device):
    calls = []

    def fn(a):
        calls.append(1)
        return (a.exp() * a).sum()

    a = tessera.randn(3, 3, device=device, requires_grad=True)
    s = checkpoint(fn, a)
    s.backward(retain_graph=True)
    first = a.grad.tolist()
    a.grad = None
    s.backward()
    assert a.grad.tolist() == first
    assert len(calls) == 2


def test_no_grad_is_a_plain_call(device):
    calls = []

    def fn(a):
        calls.append(1)
        return a * 2

    a = tessera.ones(2, device=device, requires_grad=True)
    with tessera.no_grad():
        y = checkpoint(fn, a)
    assert y.grad_fn is None and len(calls) == 1


def test_a_function_that_changes_fails_in_backward(device):
    state = {"n": 0}

    def fn(a):
        state["n"] += 1
        return a.exp() if state["n"] == 1 else a.exp().exp()

    a = tessera.randn(3, device=device, requires_grad=True)
    y = checkpoint(fn, a)
    with pytest.raises(tessera.TesseraError, match="checkpoint"):
        y.sum().backward()


def test_an_error_in_the_recomputation_is_raised(device):
    state = {"n": 0}

    def fn(a):
        state["n"] += 1
        if state["n"] > 1:
            raise ValueError("planted")
        return a.exp()

    a = tessera.randn(3, device=device, requires_grad=True)
    y = checkpoint(fn, a)
    with pytest.raises(tessera.TesseraError, match="planted"):
        y.sum().backward()


def test_refusals():
    a = tessera.ones(2, requires_grad=True)
    with pytest.raises(TypeError):
        checkpoint(3, a)
    with pytest.raises(NotImplementedError):
        checkpoint(lambda t: t, a, context_fn=lambda: None)
    with pytest.raises(ValueError):
        checkpoint_sequential([], 2, a)
    with pytest.raises(ValueError):
        checkpoint_sequential([nn.Tanh()], 0, a)


def test_frame_is_closed_once():
    frame = tessera._C._checkpoint_begin(lambda *t: None, [])
    tessera._C._checkpoint_end(frame)
    with pytest.raises(ValueError):
        tessera._C._checkpoint_end(frame)


def gpt_run(device, every, sublayers):
    """A GPT with dropout: its logits and every parameter's gradient after one backward."""
    tessera.manual_seed(7)
    g = nn.GPT(vocab_size=13, context=8, n_layer=3, n_head=2, n_embd=8, dropout=0.2).to(device)
    g.checkpoint_blocks(every, sublayers)
    tessera.manual_seed(8)
    idx = tessera.randint(0, 13, (2, 8), device=device)
    tessera.manual_seed(9)
    out = g(idx)
    (out * out).mean().backward()
    return out.tolist(), [p.grad.tolist() for p in g.parameters()]


def test_gpt_checkpoint_blocks_and_sublayers_match(device):
    plain = gpt_run(device, 0, False)
    for every, sublayers in ((1, False), (1, True), (2, True)):
        assert gpt_run(device, every, sublayers) == plain, (every, sublayers)
    g = nn.GPT(vocab_size=5, context=4, n_layer=1, n_head=1, n_embd=4)
    with pytest.raises(Exception, match="every must be >= 0"):
        g.checkpoint_blocks(-1, True)
