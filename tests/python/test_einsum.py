"""tessera.einsum against numpy.einsum in float64: explicit and implicit outputs, repeated labels
(diagonals, traces), the ellipsis with broadcasting, several operands, the sublist form, the
gradient against central differences, and the errors."""
import numpy as np
import pytest

import tessera as T

RNG = np.random.default_rng(3)
CASES = [
    ("ij,jk->ik", [(3, 4), (4, 5)]),
    ("ij,jk", [(3, 4), (4, 5)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 2)]),
    ("ii->i", [(4, 4)]),
    ("ii", [(4, 4)]),
    ("iji->j", [(3, 2, 3)]),
    ("i,j->ij", [(3,), (4,)]),
    ("ij->", [(3, 4)]),
    ("ij->ji", [(3, 4)]),
    ("...ij,...jk->...ik", [(2, 1, 3, 4), (5, 4, 2)]),
    ("i...->...", [(3, 2, 2)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 2)]),
    ("bn,anm,bm->ba", [(2, 3), (4, 3, 5), (2, 5)]),
    ("ijk,ikj->i", [(2, 3, 3), (2, 3, 3)]),
    ("Ab,bC->AC", [(2, 3), (3, 2)]),
    ("Ab,bc", [(2, 3), (3, 4)]),  # implicit output in ASCII order: "Ac"
    ("zA", [(2, 3)]),
]


def ref(eq, arrs):
    return np.einsum(eq, *arrs)


@pytest.mark.parametrize("eq,shapes", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("device", ["cpu", "sim:0"])
def test_einsum_values(eq, shapes, device):
    arrs = [RNG.standard_normal(s) for s in shapes]
    got = T.einsum(eq, *[T.tensor(a).to(device) for a in arrs]).to("cpu").numpy()
    want = ref(eq, arrs)
    assert got.shape == np.shape(want)
    # float64 sums of at most 60 products: 64 * 2^-53 relative to the sum of |terms|
    mag = np.einsum(eq, *[np.abs(a) for a in arrs])
    assert np.all(np.abs(got - want) <= 64 * 2.0 ** -53 * (np.abs(mag) + 1))


def test_einsum_list_and_sublist_forms():
    a, b = RNG.standard_normal((3, 4)), RNG.standard_normal((4, 2))
    ta, tb = T.tensor(a), T.tensor(b)
    want = a @ b
    assert np.allclose(T.einsum("ij,jk->ik", [ta, tb]).numpy(), want, rtol=1e-12)
    assert np.allclose(T.einsum(ta, [0, 1], tb, [1, 2], [0, 2]).numpy(), want, rtol=1e-12)
    assert np.allclose(T.einsum(ta, [0, 1], tb, [1, 2]).numpy(), want, rtol=1e-12)


def test_einsum_gradient():
    a, b = RNG.standard_normal((3, 4)), RNG.standard_normal((4, 4))
    ta, tb = T.tensor(a, requires_grad=True), T.tensor(b, requires_grad=True)
    g = RNG.standard_normal((3,))
    (T.einsum("ij,jj->i", ta, tb) * T.tensor(g)).sum().backward()
    # d/da[i,j] = g[i] b[j,j]; d/db[j,k] = [j == k] sum_i g[i] a[i,j]
    assert np.allclose(ta.grad.numpy(), g[:, None] * np.diag(b)[None, :], rtol=1e-12)
    assert np.allclose(tb.grad.numpy(), np.diag(g @ a), rtol=1e-12)


def test_einsum_errors():
    a = T.ones(3, 4)
    with pytest.raises(ValueError):
        T.einsum("ij,jk->ik", a)
    with pytest.raises(RuntimeError):
        T.einsum("ijk->i", a)
    with pytest.raises(RuntimeError):
        T.einsum("ii->i", a)
    with pytest.raises(ValueError):
        T.einsum("ij->ik", a)
    with pytest.raises(ValueError):
        T.einsum("ij->ii", a)
