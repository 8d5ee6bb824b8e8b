"""Tensor.register_hook on leaves and Tensor.register_post_accumulate_grad_hook
(src/autograd/leaf_hooks.c, src/autograd/hooks.c, python/src/autograd_function.c), against
PyTorch's documented behaviour; the expected values were also checked with torch 2.x itself
(/opt/torch2/bin/torch-python; this file does not need torch). Every value is a small integer:
exact, compared with ==."""
import gc
import weakref

import pytest

import tessera
from tessera import nn


def _leaf(device, n=3):
    return tessera.ones(n, device=device, requires_grad=True)


# ------------------------------------------------------------------ register_hook on a leaf
def test_leaf_hook_changes_grad(device):
    x = _leaf(device)
    seen = []
    h = x.register_hook(lambda g: (seen.append(g.tolist()), g * 2)[1])
    (x * 3).sum().backward()
    assert seen == [[3.0] * 3]
    assert x.grad.tolist() == [6.0] * 3  # torch: tensor([6., 6., 6.])
    (x * 3).sum().backward()  # the hook runs on the new gradient, before it is added
    assert x.grad.tolist() == [12.0] * 3
    h.remove()
    h.remove()  # twice is harmless
    (x * 3).sum().backward()
    assert x.grad.tolist() == [15.0] * 3 and len(seen) == 2


def test_leaf_hooks_run_in_order(device):
    x = _leaf(device)
    x.register_hook(lambda g: g + 1)
    kept = []
    x.register_hook(lambda g: g * 10)
    x.register_hook(lambda g: kept.append(g.tolist()))  # None: the gradient as it came
    (x * 3).sum().backward()
    assert kept == [[40.0] * 3]
    assert x.grad.tolist() == [40.0] * 3  # torch: (3 + 1) * 10, not 3 * 10 + 1


def test_leaf_hook_seed_and_handle_context(device):
    x = _leaf(device)
    with x.register_hook(lambda g: g * 2):
        x.backward(tessera.full((3,), 0.5, device=device))  # the root is the leaf itself
    assert x.grad.tolist() == [1.0] * 3
    (x * 1).sum().backward()  # removed on leaving the with block
    assert x.grad.tolist() == [2.0] * 3


def test_leaf_hook_removes_itself(device):
    x = _leaf(device)
    handle = []

    def once(g):
        handle[0].remove()
        return g * 2

    handle.append(x.register_hook(once))
    (x * 1).sum().backward()
    (x * 1).sum().backward()
    assert x.grad.tolist() == [3.0] * 3  # torch: 2 + 1


def test_leaf_hook_errors(device):
    x = _leaf(device)

    class Boom(Exception):
        pass

    def boom(g):
        raise Boom("from the hook")

    h = x.register_hook(boom)
    with pytest.raises(Boom, match="from the hook"):  # as itself, as torch raises it
        (x * 2).sum().backward()
    assert x.grad is None
    h.remove()

    h = x.register_hook(lambda g: g.sum())
    with pytest.raises(tessera.ShapeError, match="register_hook"):  # torch: a RuntimeError
        (x * 2).sum().backward()
    assert x.grad is None  # torch: None too
    h.remove()

    h = x.register_hook(lambda g: 3)
    with pytest.raises(TypeError, match="register_hook"):
        (x * 2).sum().backward()
    h.remove()
    (x * 2).sum().backward()  # the failed passes left nothing behind
    assert x.grad.tolist() == [2.0] * 3

    with pytest.raises(RuntimeError, match="doesn't require gradient"):
        tessera.ones(2, device=device).register_hook(lambda g: g)


def test_leaf_hook_once_per_pass_on_the_sum(device):
    x = _leaf(device)
    seen = []
    x.register_hook(lambda g: seen.append(g.tolist()))
    (x * 2 + x * 3).sum().backward()
    assert seen == [[5.0] * 3]  # torch


def test_leaf_hook_freed_with_the_tensor(device):
    class Hook:
        def __call__(self, g):
            return g

    x = _leaf(device)
    hook = Hook()
    r = weakref.ref(hook)
    x.register_hook(hook)
    del hook
    gc.collect()
    assert r() is not None  # the tensor holds it
    del x
    gc.collect()
    assert r() is None

    x = _leaf(device)
    hook = Hook()
    r = weakref.ref(hook)
    h = x.register_hook(hook)
    del hook
    h.remove()
    gc.collect()
    assert r() is None  # removal lets it go


# ------------------------------------------------------------------ post-accumulate-grad hooks
def test_post_accumulate_grad_hook(device):
    p = _leaf(device)
    seen = []
    h = p.register_post_accumulate_grad_hook(lambda t: seen.append((t is p, t.grad.tolist())))
    (p * 2).sum().backward()
    (p * 3).sum().backward()
    assert seen == [(True, [2.0] * 3), (True, [5.0] * 3)]  # torch: the tensor itself, after .grad
    h.remove()
    (p * 3).sum().backward()
    assert len(seen) == 2 and p.grad.tolist() == [8.0] * 3

    # once per pass, after the last gradient of the pass arrived; after the leaf's own hooks
    q = _leaf(device)
    calls = []
    q.register_post_accumulate_grad_hook(lambda t: calls.append(t.grad.tolist()))
    q.register_hook(lambda g: g * 10)
    (q * 2 + q * 3).sum().backward()
    assert calls == [[50.0] * 3]


def test_post_accumulate_grad_hook_errors(device):
    with pytest.raises(RuntimeError, match="doesn't require gradient"):
        tessera.ones(2, device=device).register_post_accumulate_grad_hook(lambda t: None)
    x = _leaf(device)
    with pytest.raises(RuntimeError, match="cannot be registered on non-leaf tensors"):
        (x * 2).register_post_accumulate_grad_hook(lambda t: None)

    class Boom(Exception):
        pass

    def boom(t):
        raise Boom("post")

    h = x.register_post_accumulate_grad_hook(boom)
    with pytest.raises(Boom, match="post"):
        (x * 2).sum().backward()
    h.remove()
    h = x.register_post_accumulate_grad_hook(lambda t: 5)
    with pytest.raises(TypeError, match="None"):  # torch: a TypeError too
        (x * 2).sum().backward()
    h.remove()


def test_post_accumulate_grad_hook_lifetime(device):
    class Hook:
        def __init__(self):
            self.grads = []

        def __call__(self, t):
            self.grads.append(t.grad.tolist())

    x = _leaf(device)
    hook = Hook()
    r = weakref.ref(hook)
    x.register_post_accumulate_grad_hook(hook)
    y = x * 4
    del x  # the graph still holds the tensor: the hook gets a Tensor of it
    y.sum().backward()
    assert hook.grads == [[4.0] * 3]
    del hook, y
    gc.collect()
    assert r() is None  # the tensor died with the graph, and its hooks with it


def test_optimizer_step_in_backward(device):
    """PyTorch's recipe: one optimizer per parameter, stepped from its post-accumulate-grad hook;
    the same parameters as a plain step afterwards."""
    tessera.manual_seed(0)
    a = nn.Linear(4, 3).to(device)
    b = nn.Linear(4, 3).to(device)
    b.load_state_dict(a.state_dict())
    opt = {p: tessera.optim.SGD([p], lr=0.5) for p in a.parameters()}

    def step(p):
        opt[p].step()
        opt[p].zero_grad()

    for p in a.parameters():
        p.register_post_accumulate_grad_hook(step)
    plain = tessera.optim.SGD(b.parameters(), lr=0.5)
    x = tessera.arange(8, dtype=tessera.float32, device=device).reshape(2, 4) / 8
    for _ in range(2):
        a(x).square().sum().backward()
        b(x).square().sum().backward()
        plain.step()
        plain.zero_grad()
    for pa, pb in zip(a.parameters(), b.parameters()):
        assert pa.tolist() == pb.tolist()
        assert pa.grad is None
