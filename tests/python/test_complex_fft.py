"""test_complex_fft.py — complex tensors and tessera.fft on cpu and sim:0 against NumPy (its
pocketfft in float64 is the reference): creation from Python complex numbers, repr / tolist /
item, arithmetic, the views, every transform with n, dim and norm in complex64 and complex128,
the n-d forms, fftfreq / fftshift, gradients by central differences, and the refusals of ops
without a complex path."""
import numpy as np
import pytest

import tessera

DEVICES = ["cpu", "sim:0"]
NORMS = [None, "forward", "ortho"]


def arr(t):
    return np.array(t.detach().to("cpu").tolist())


def close(got, want, dtype):
    """float32 parts: a transform of length n is off by ~eps * log2(n) * |x| * sqrt(n); float64 the
    same with eps 2^-53 (both well inside these bounds for n <= 64 and |x| <= 3)"""
    rtol, atol = (3e-6, 3e-5) if dtype in (tessera.complex64, tessera.float32) else (1e-13, 1e-12)
    np.testing.assert_allclose(arr(got), want, rtol=rtol, atol=atol)


def cvals(shape, seed):
    rng = np.random.default_rng(seed)
    return rng.uniform(-3, 3, shape) + 1j * rng.uniform(-3, 3, shape)


def ctensor(v, dtype, device, requires_grad=False):
    return tessera.tensor(v.tolist(), dtype=dtype, device=device, requires_grad=requires_grad)


# ------------------------------------------------------------------ tensors
def test_creation_repr_values():
    x = tessera.tensor([1 + 2j, 3, -1j])
    assert x.dtype == tessera.complex64 and x.is_complex() and x.dtype.is_complex
    assert tessera.cfloat is tessera.complex64 and tessera.cdouble is tessera.complex128
    assert repr(x) == "tensor([1.+2.j, 3.+0.j, -0.-1.j])"
    assert x.tolist() == [1 + 2j, 3 + 0j, -1j] and x[0].item() == 1 + 2j
    y = tessera.tensor([[1, 2j]], dtype=tessera.complex128)
    assert repr(y) == "tensor([[1.+0.j, 0.+2.j]], dtype=tessera.complex128)"
    assert tessera.tensor([0.5]).to(tessera.complex64).tolist() == [0.5 + 0j]
    np.testing.assert_array_equal(arr(x.real), [1, 3, -0.0])
    np.testing.assert_array_equal(arr(x.imag), [2, 0, -1])
    with pytest.raises(TypeError):
        tessera.tensor([1j], dtype=tessera.float32)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [tessera.complex64, tessera.complex128])
def test_arithmetic(device, dtype):
    a, b = cvals((3, 4), 1), cvals((4,), 2)
    x, y = ctensor(a, dtype, device), ctensor(b, dtype, device)
    a, b = arr(x), arr(y)  # the values the dtype holds
    for got, want in [(x + y, a + b), (x - y, a - b), (x * y, a * b), (x / y, a / b),
                      (-x, -a), (x.conj(), np.conj(a)), (x * 2.5, a * 2.5), (1 / x, 1 / a)]:
        close(got, want, dtype)
    close(x.abs(), np.abs(a), dtype)
    close(x.angle(), np.angle(a), dtype)
    close(x.sum(), a.sum(), dtype)
    close(x.mean(1), a.mean(1), dtype)
    close(tessera.view_as_real(x), np.stack([a.real, a.imag], -1), dtype)
    r = tessera.tensor(np.stack([a.real, a.imag], -1).tolist(), device=device)
    close(tessera.view_as_complex(r), a, tessera.complex64)
    close(tessera.complex(x.real, x.imag), a, dtype)
    close(tessera.polar(x.abs(), x.angle()), a, dtype)
    # conj materialises: resolve_conj / resolve_neg have nothing to resolve
    for f in (tessera.resolve_conj, tessera.resolve_neg, lambda t: t.resolve_conj()):
        close(f(x), a, dtype)
    close(tessera.conj_physical(x), np.conj(a), dtype)


def test_refusals():
    z = tessera.tensor([1 + 1j, 2])
    for f in [lambda: z.asin(), lambda: z.max(), lambda: z < z, lambda: z.expm1(),
              lambda: z.cumsum(0), lambda: z.outer(z), lambda: z.sort(),
              lambda: tessera.cov(tessera.stack([z, z]))]:
        with pytest.raises(tessera.DtypeError, match="ComplexFloat"):
            f()
    with pytest.raises(tessera.DtypeError):
        tessera.imag(tessera.tensor([1.0]))
    # casts to a real dtype drop the imaginary part: refused, and with them the composites that
    # cast "to float" first (they returned real parts only)
    for f in [lambda: z.float(), lambda: z.to(tessera.float64), lambda: tessera.zeros(2).copy_(z),
              lambda: tessera.gradient(z)]:
        with pytest.raises(tessera.DtypeError, match="imaginary part"):
            f()


# ------------------------------------------------------------------ transforms
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [tessera.complex64, tessera.complex128])
@pytest.mark.parametrize("norm", NORMS)
def test_fft_1d(device, dtype, norm):
    rdt = tessera.float32 if dtype == tessera.complex64 else tessera.float64
    for n_in in [1, 5, 8, 12, 61]:
        a = cvals((3, n_in), n_in)
        x = ctensor(a, dtype, device)
        a = arr(x)
        for n in [None, n_in + 3, max(1, n_in - 2)]:
            close(tessera.fft.fft(x, n=n, norm=norm), np.fft.fft(a, n=n, norm=norm), dtype)
            close(tessera.fft.ifft(x, n=n, norm=norm), np.fft.ifft(a, n=n, norm=norm), dtype)
            close(tessera.fft.fft(x, n=n, dim=0, norm=norm),
                  np.fft.fft(a, n=n, axis=0, norm=norm), dtype)
            r = tessera.tensor(a.real.tolist(), dtype=rdt, device=device)
            close(tessera.fft.rfft(r, n=n, norm=norm), np.fft.rfft(a.real, n=n, norm=norm), dtype)
            close(tessera.fft.ihfft(r, n=n, norm=norm), np.fft.ihfft(a.real, n=n, norm=norm),
                  dtype)
            m = n if n is not None else 2 * (n_in - 1)
            if m >= 1:
                close(tessera.fft.irfft(x, n=n, norm=norm), np.fft.irfft(a, n=n, norm=norm), rdt)
                close(tessera.fft.hfft(x, n=n, norm=norm), np.fft.hfft(a, n=n, norm=norm), rdt)
    # a real input of fft is taken as complex; integers as float32
    close(tessera.fft.fft(tessera.arange(6, device=device)), np.fft.fft(np.arange(6)),
          tessera.complex64)


@pytest.mark.parametrize("device", DEVICES)
def test_fft_nd_helpers(device):
    a = cvals((4, 6, 5), 7)
    x = ctensor(a, tessera.complex128, device)
    close(tessera.fft.fft2(x), np.fft.fft2(a), tessera.complex128)
    close(tessera.fft.ifftn(x, s=(3, 7), dim=(0, 2), norm="ortho"),
          np.fft.ifftn(a, s=(3, 7), axes=(0, 2), norm="ortho"), tessera.complex128)
    close(tessera.fft.fftn(x), np.fft.fftn(a), tessera.complex128)
    r = tessera.tensor(a.real.tolist(), dtype=tessera.float64, device=device)
    close(tessera.fft.rfftn(r), np.fft.rfftn(a.real), tessera.complex128)
    close(tessera.fft.rfft2(r, s=(5, 8)), np.fft.rfft2(a.real, s=(5, 8)), tessera.complex128)
    close(tessera.fft.irfftn(x, s=(4, 6, 8)), np.fft.irfftn(a, s=(4, 6, 8)), tessera.float64)
    close(tessera.fft.irfft2(x), np.fft.irfft2(a), tessera.float64)
    for n in [1, 4, 7]:
        close(tessera.fft.fftfreq(n, 0.5), np.fft.fftfreq(n, 0.5), tessera.float32)
        close(tessera.fft.rfftfreq(n, dtype=tessera.float64), np.fft.rfftfreq(n), tessera.float64)
    close(tessera.fft.fftshift(x, dim=(0, 1)), np.fft.fftshift(a, axes=(0, 1)), tessera.complex128)
    close(tessera.fft.ifftshift(x), np.fft.ifftshift(a), tessera.complex128)
    close(tessera.fft.fftshift(r), np.fft.fftshift(a.real), tessera.float64)
    with pytest.raises(RuntimeError):
        tessera.fft.fft(x, n=0)
    with pytest.raises(tessera.DtypeError):
        tessera.fft.rfft(x)
    with pytest.raises(ValueError):
        tessera.fft.fft(x, norm="both")


# ------------------------------------------------------------------ gradients
def numeric_grad(f, x, eps=1e-6):
    """d f / d x for real x (float64 numpy), central differences"""
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        xp, xm = x.copy(), x.copy()
        xp[i] += eps
        xm[i] -= eps
        g[i] = (f(xp) - f(xm)) / (2 * eps)
    return g


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("kind", ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft", "fft2",
                                  "rfftn", "irfftn", "fft_of_real"])
def test_fft_grads(device, kind):
    """the real loss sum(w * view_as_real(y)): autograd against central differences over the
    real (and imaginary) parts of the input; n crops or pads where the transform takes it"""
    real_in = kind in ("rfft", "ihfft", "rfftn", "fft_of_real")  # fft takes a real input too
    kind = "fft" if kind == "fft_of_real" else kind
    shape = (3, 6) if kind in ("fft2", "rfftn", "irfftn") else (7,)
    rng = np.random.default_rng(3)
    x0 = rng.uniform(-1, 1, shape + (() if real_in else (2,)))
    kw = {"norm": "ortho"} if kind in ("ifft", "hfft") else {}
    if kind in ("fft", "rfft", "irfft", "hfft"):
        kw["n"] = 9 if kind != "irfft" else 10
    fn = getattr(tessera.fft, kind)

    def run(xv, grad):
        x = tessera.tensor(xv.tolist(), dtype=tessera.float64, device=device,
                           requires_grad=grad)
        y = fn(x if real_in else tessera.view_as_complex(x), **kw)
        yr = tessera.view_as_real(y) if y.is_complex() else y
        w = tessera.tensor(np.cos(np.arange(yr.numel()) * 0.7).reshape(tuple(yr.shape)).tolist(),
                           dtype=tessera.float64, device=device)
        return x, (yr * w).sum()

    x, loss = run(x0, True)
    loss.backward()
    want = numeric_grad(lambda v: run(v, False)[1].item(), x0)
    np.testing.assert_allclose(arr(x.grad), want, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("device", DEVICES)
def test_complex_grads(device):
    """a complex leaf: PyTorch's convention, grad = dL/dx + i dL/dy"""
    z = tessera.tensor([1 + 2j, -0.5 + 1j, 2 - 1j], dtype=tessera.complex128, device=device,
                       requires_grad=True)
    w = tessera.tensor([0.5 - 1j, 1 + 1j, -2 + 0.5j], dtype=tessera.complex128, device=device)
    loss = ((z * w / (z + 3)).abs() + (z.conj() * z).real).sum()
    loss.backward()
    zv, wv = np.array([1 + 2j, -0.5 + 1j, 2 - 1j]), np.array([0.5 - 1j, 1 + 1j, -2 + 0.5j])

    def f(v):
        zz = v[..., 0] + 1j * v[..., 1]
        return float(np.sum(np.abs(zz * wv / (zz + 3)) + (np.conj(zz) * zz).real))

    g = numeric_grad(f, np.stack([zv.real, zv.imag], -1))
    np.testing.assert_allclose(arr(z.grad), g[..., 0] + 1j * g[..., 1], rtol=1e-6, atol=1e-8)


# ------------------------------------------------------------------ every method
# the Tensor methods that take a complex tensor (the rest must raise): structural ones, casts
# (complex to a real dtype keeps the real part, as PyTorch's), and those with a complex path
TAKES_COMPLEX = {
    "abs", "absolute", "add", "angle", "bfloat16", "byte", "char", "clone", "conj",
    "conj_physical", "contiguous", "cpu", "detach", "detach_", "dim", "div", "divide", "double",
    "element_size", "expand_as", "fill_", "flatten", "float", "get_device", "half", "int",
    "is_complex", "is_conj", "is_contiguous", "is_floating_point", "is_pinned", "long", "mean",
    "mul", "multiply", "ndimension", "neg", "negative", "nelement", "new_empty", "new_ones",
    "new_zeros", "numel", "positive", "ravel", "requires_grad_", "reshape_as", "resolve_conj",
    "short", "size", "squeeze", "storage_offset", "stride", "sub", "subtract", "sum",
    "sum_to_size", "t", "to", "true_divide", "type", "unbind", "unsqueeze", "view_as",
    "view_as_real", "zero_", "reshape", "view", "permute", "transpose", "narrow", "select",
    "expand", "repeat", "split", "chunk", "tensor_split", "swapaxes", "swapdims", "movedim",
    "moveaxis", "unflatten", "squeeze_", "unsqueeze_", "t_", "transpose_", "copy_", "new_full",
    "new_tensor", "cfloat", "cdouble", "numpy", "tolist", "item", "type_as", "clone", "cuda",
    "sim", "pin_memory", "share_memory_", "requires_grad_", "retain_grad", "register_hook",
    "is_shared",  # test_multiprocessing.py: shared memory holds any dtype's bytes
    # test_complex_linalg_math.py: the matmul family, the functions, comparisons, in place
    "matmul", "mm", "bmm", "mv", "dot", "vdot", "exp", "log", "log2", "log10", "sqrt", "rsqrt",
    "reciprocal", "sin", "cos", "tan", "sinh", "cosh", "tanh", "sigmoid", "sgn", "square", "pow",
    "eq", "ne", "not_equal", "isnan", "isinf", "isfinite", "isreal", "isclose", "allclose",
    "add_", "sub_", "subtract_", "mul_", "multiply_", "div_", "divide_", "true_divide_", "pow_",
    "neg_", "negative_", "exp_", "log_", "sqrt_", "sigmoid_", "tanh_",
    # test_storage_set.py: storage identity holds for any dtype
    "is_set_to",
    # test_complex_linalg_math.py: the in-place forms composed from an out-of-place op with a complex
    # path (and eq_ / ne_, whose results 0 / 1 are complex numbers too, as PyTorch's)
    "sgn_", "sin_", "cos_", "tan_", "sinh_", "cosh_", "log2_", "log10_", "reciprocal_", "rsqrt_",
    "square_", "eq_", "ne_", "not_equal_",
    # test_complex_inplace.py: conj_physical_ (the imaginary parts negated in place)
    "conj_physical_",
    # test_sparse.py: a dense tensor's to_dense() is itself; to_sparse(0) / to_sparse_coo(0) wrap
    # it whole (no index op; other sparse conversions of complex data refuse: index_select)
    "to_dense", "to_sparse", "to_sparse_coo",
}
SKIP = {"backward", "data_ptr", "record_stream", "apply_", "map_", "map2_", "storage",
        "untyped_storage", "resize_", "resize_as_", "set_"}


def test_methods_sweep():
    """each method with a few argument patterns: a result only where listed, else an error; the
    sweep also shows that none crashes on complex data"""
    taken = set()
    for name in sorted(n for n in dir(tessera.Tensor) if not n.startswith("_")):
        if name in SKIP:
            continue
        for args in [(), (0,), ("z",), (1.0,)]:
            z = tessera.tensor([[1 + 2j, 3 - 1j], [0.5j, -2]])
            f = getattr(z, name, None)
            if not callable(f):
                break
            try:
                f(*[z if a == "z" else a for a in args])
            except Exception:
                continue
            taken.add(name)
            break
    assert taken <= TAKES_COMPLEX, sorted(taken - TAKES_COMPLEX)
    with pytest.raises(tessera.DtypeError, match="bool"):
        tessera.tensor([0.5j]).bool()
