"""torch's deprecated positional overloads that older course code still calls, and PyTorch 2.15
still accepts with a UserWarning (issue 53: char_rnn_generation_tutorial's
p.data.add_(-learning_rate, p.grad.data), old optimizers' addcmul_(1 - beta2, grad, grad)):
add / sub (Number alpha, Tensor other), add / sub (Number other, Number alpha), addcmul / addcdiv
(Number value, Tensor tensor1, Tensor tensor2); in place, as methods and as functions. References
in float64 NumPy; the values are exact in float32 (small integers and halves)."""
import warnings

import numpy as np
import pytest

import tessera as ts

A = np.array([1.0, 2.0, 3.0])
G = np.array([10.0, 20.0, 30.0])


def _t(v):
    return ts.tensor(v.astype(np.float32))


def _quiet(f):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return f()


@pytest.mark.parametrize("form", ["method", "inplace", "function"])
@pytest.mark.parametrize("name,sign", [("add", 1), ("sub", -1)])
def test_alpha_first(form, name, sign):
    a, g = _t(A), _t(G)
    if form == "method":
        r = _quiet(lambda: getattr(a, name)(-0.5, g))
    elif form == "inplace":
        r = _quiet(lambda: getattr(a, name + "_")(-0.5, g))
        assert r is a
    else:
        r = _quiet(lambda: getattr(ts, name)(a, -0.5, g))
    np.testing.assert_array_equal(r.numpy(), A + sign * -0.5 * G)
    assert g.tolist() == G.tolist()


def test_alpha_first_warns_and_keeps_autograd():
    w = ts.tensor([1.0, 2.0], requires_grad=True)
    g = ts.tensor([4.0, 8.0])
    with pytest.warns(UserWarning, match=r"overload of add is deprecated"):
        y = w.add(2.0, g)
    y.sum().backward()
    assert y.tolist() == [9.0, 18.0] and w.grad.tolist() == [1.0, 1.0]
    with pytest.warns(UserWarning, match="overload of addcmul is deprecated"):
        ts.tensor([1.0]).addcmul(0.5, g[:1], g[:1])


@pytest.mark.parametrize("name,sign", [("add", 1), ("sub", -1)])
def test_two_numbers(name, sign):
    # torch's add(Number other, Number alpha): self + alpha * other, keeping an integer dtype
    a = _t(A)
    np.testing.assert_array_equal(getattr(a, name)(2, 3).numpy(), A + sign * 6)
    np.testing.assert_array_equal(getattr(a, name)(2, alpha=3).numpy(), A + sign * 6)
    i = ts.tensor([1, 2, 3])
    r = getattr(i, name + "_")(2, 3)
    assert r is i and i.dtype == ts.int64
    assert i.tolist() == (np.array([1, 2, 3]) + sign * 6).tolist()


@pytest.mark.parametrize("form", ["method", "inplace", "function"])
@pytest.mark.parametrize("name", ["addcmul", "addcdiv"])
def test_value_first(form, name):
    a, g, h = _t(A), _t(G), _t(G / 5)
    if form == "method":
        r = _quiet(lambda: getattr(a, name)(0.5, g, h))
    elif form == "inplace":
        r = _quiet(lambda: getattr(a, name + "_")(0.5, g, h))
        assert r is a
    else:
        r = _quiet(lambda: getattr(ts, name)(a, 0.5, g, h))
    want = A + 0.5 * (G * (G / 5) if name == "addcmul" else G / (G / 5))
    np.testing.assert_array_equal(r.numpy(), want)


def test_current_forms_unchanged():
    a, g = _t(A), _t(G)
    np.testing.assert_array_equal(a.add(g, alpha=-0.5).numpy(), A - 0.5 * G)
    np.testing.assert_array_equal(ts.sub(a, g, alpha=2).numpy(), A - 2 * G)
    np.testing.assert_array_equal(a.add(2).numpy(), A + 2)
    np.testing.assert_array_equal(ts.addcmul(a, g, g, value=0.5).numpy(), A + 0.5 * G * G)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning on the current forms
        a.add(g, alpha=2)
        a.addcdiv(g, g, value=2)
    with pytest.raises(TypeError):
        a.add(2.0, [1.0])  # neither overload
    with pytest.raises(TypeError):
        a.mul(2.0, g)  # mul has no alpha
