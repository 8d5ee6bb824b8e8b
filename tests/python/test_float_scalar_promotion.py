"""A Python float beside an integer or bool tensor promotes to the default float dtype, whatever
its value (torch.result_type(int tensor, 1.0) is float32): `arange(4) * 1.0` is float32, not int64.
The C core's scalar ops read an integral double as a Python int, so the binding must route a
Python float through a 0-dim float tensor (python/src/tensor_ops.c)."""
import pytest

import tessera as ts


def _pow(x, y):
    try:
        return x ** y
    except ZeroDivisionError:
        return float("inf")


# (name, the tensor op, the same op on Python floats)
OPS = [
    ("mul", lambda a, s: a * s, lambda x, s: x * s),
    ("rmul", lambda a, s: s * a, lambda x, s: s * x),
    ("add", lambda a, s: a + s, lambda x, s: x + s),
    ("sub", lambda a, s: a - s, lambda x, s: x - s),
    ("rsub", lambda a, s: s - a, lambda x, s: s - x),
    ("pow", lambda a, s: a ** s, lambda x, s: _pow(x, s)),
    ("rpow", lambda a, s: s ** a, lambda x, s: _pow(s, x)),
    ("mul_method", lambda a, s: a.mul(s), lambda x, s: x * s),
    ("add_function", lambda a, s: ts.add(a, s), lambda x, s: x + s),
    ("div", lambda a, s: a / s if s else a / 4.0, lambda x, s: x / s if s else x / 4.0),
]


@pytest.mark.parametrize("name,f,ref", OPS)
@pytest.mark.parametrize("s", [1.0, -2.0, 0.0, 3.5])
@pytest.mark.parametrize("dt", [ts.int64, ts.int32, ts.uint8, ts.bool])
def test_float_scalar_gives_float(name, f, ref, s, dt):
    a = ts.tensor([1, 0, 1, 1]).to(dt)
    if dt == ts.bool and name in ("sub", "rsub"):
        with pytest.raises(Exception, match="Subtraction"):  # torch refuses bool subtraction
            f(a, s)
        return
    r = f(a, s)
    assert r.dtype == ts.float32, (name, s, dt, r.dtype)
    expect = [ref(float(v), s) for v in a.tolist()]
    assert r.tolist() == pytest.approx(expect)


def test_int_scalar_keeps_int_and_default_dtype_follows():
    a = ts.arange(4)
    assert (a * 2).dtype == ts.int64
    assert (a == 1.0).dtype == ts.bool
    old = ts.get_default_dtype()
    try:
        ts.set_default_dtype(ts.float64)
        assert (a * 1.0).dtype == ts.float64
    finally:
        ts.set_default_dtype(old)


def test_inplace_float_into_int_is_refused():
    a = ts.arange(4)
    with pytest.raises(Exception, match="can't be cast"):
        a.mul_(1.0)
    assert a.tolist() == [0, 1, 2, 3]  # nothing written
    b = ts.arange(4.0)
    b.mul_(2.0)
    assert b.tolist() == [0.0, 2.0, 4.0, 6.0]
