"""tools/functional_torch_check.py — python/tessera/_autograd_functional.py run on PyTorch's own
autograd engine (its primitives bound to torch's grad, zeros_like, stack...; double backward
enabled) against torch.autograd.functional: every function (jacobian, hessian, vjp, jvp, vhp,
hvp) over a set of functions and input / output structures, strict and create_graph on and off, v
given or not, vectorize: results (values, shapes, structure, requires_grad) or the exception and
its message must be PyTorch's. This checks the code paths Tessera cannot run yet (double
backward); run it after changing that module:

  /opt/torch2/bin/torch-python tools/functional_torch_check.py
"""
import os
import sys, types, itertools, torch
import torch.autograd.functional as TF
src = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'python', 'tessera', '_autograd_functional.py')).read()
fake = types.ModuleType('_fakeC')
fake.Tensor = torch.Tensor; fake.is_grad_enabled = torch.is_grad_enabled
fake.zeros_like = torch.zeros_like; fake.stack = torch.stack; fake.ones_like = torch.ones_like
sys.modules['_fakeC'] = fake
src = src.replace('from . import _C', 'import _fakeC as _C')
M = types.ModuleType('mine'); exec(compile(src, 'mine', 'exec'), M.__dict__)
M._grad = torch.autograd.grad; M._enable_grad = torch.enable_grad
# the double-vjp helper it calls (python/tessera/_double_vjp.py), on the same primitives
dsrc = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'python', 'tessera', '_double_vjp.py')).read()
D = types.ModuleType('mine_double_vjp'); exec(compile(dsrc.replace('from . import _C', 'import _fakeC as _C'), 'mine_double_vjp', 'exec'), D.__dict__)
D._grad = torch.autograd.grad; M._double_vjp = D.double_vjp
M._set_grad_enabled = torch.set_grad_enabled; M._DOUBLE_BACKWARD = True
torch.manual_seed(0)
x = torch.randn(3, dtype=torch.float64); y = torch.randn(2, 3, dtype=torch.float64)
s = torch.randn(1, dtype=torch.float64)
w = torch.randn(3, dtype=torch.float64, requires_grad=True)
fns = {
 'cube': (lambda a: a ** 3, x),
 'sumcube': (lambda a: (a ** 3).sum(), x),
 'two_in': (lambda a, b: (a * b).sum() + (a ** 2).sum(), (x, y[0])),
 'two_in_two_out': (lambda a, b: (a * b, a.exp().sum()), (x, y[0])),
 'tuple1': (lambda a: (a.sin(),), (x,)),
 'indep': (lambda a, b: a ** 2, (x, y[0])),
 'indep_out': (lambda a, b: (a ** 2, b.detach() * 2), (x, y[0])),
 'linear': (lambda a: 2 * a, x),
 'scalar_lin': (lambda a: (2 * a).sum(), x),
 'ext_param': (lambda a: (a * w).sum(), x),
 'mat': (lambda a: a @ a.t(), y),
 'scal_in': (lambda a: a * 3, s),
 'list_in': (lambda a: a, [x]),
}
def cmp(a, b, path=''):
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor), path
        assert a.shape == b.shape, (path, a.shape, b.shape)
        assert torch.allclose(a, b, atol=1e-12), (path, a, b)
        assert a.requires_grad == b.requires_grad, (path, 'requires_grad', a.requires_grad, b.requires_grad)
        return
    assert type(a) == type(b) and len(a) == len(b), (path, type(a), type(b))
    for i, (u, v) in enumerate(zip(a, b)): cmp(u, v, path + '/%d' % i)
def run(f, *a, **k):
    try: return ('ok', f(*a, **k))
    except Exception as e: return ('err', type(e).__name__, str(e))
n = 0; bad = 0
def vfor(inp, outs):
    return None
for name, (f, inp) in fns.items():
    tin = inp if isinstance(inp, tuple) else (inp,)
    with torch.no_grad():
        try: out = f(*[t.detach() for t in tin])
        except Exception: out = None
    vin = tuple(torch.randn_like(t) for t in tin) if isinstance(tin[0], torch.Tensor) else None
    vin = vin if isinstance(inp, tuple) else (vin[0] if vin else None)
    vout = None
    if out is not None:
        vout = tuple(torch.randn_like(o) for o in out) if isinstance(out, tuple) else torch.randn_like(out)
    for fn, kwv in [('jacobian', [dict()]), ('hessian', [dict()]), ('vjp', [dict(v=vout), dict()]),
                    ('jvp', [dict(v=vin), dict()]), ('vhp', [dict(v=vin), dict()]), ('hvp', [dict(v=vin), dict()])]:
        for kw in kwv:
            for strict, cg in itertools.product([False, True], [False, True]):
                extra = dict(kw, strict=strict, create_graph=cg)
                r1 = run(getattr(TF, fn), f, inp, **extra)
                r2 = run(getattr(M, fn), f, inp, **extra)
                n += 1
                try:
                    assert r1[0] == r2[0], (r1, r2)
                    if r1[0] == 'ok': cmp(r1[1], r2[1])
                    else: assert r1[1:] == r2[1:], (r1, r2)
                except AssertionError as e:
                    bad += 1; print('MISMATCH', name, fn, sorted(extra), strict, cg, 'v' in kw and kw['v'] is not None, e)
    # jacobian vectorize
    for strict in [False, True]:
        r1 = run(TF.jacobian, f, inp, vectorize=True, strict=strict); r2 = run(M.jacobian, f, inp, vectorize=True, strict=strict)
        n += 1
        try:
            assert r1[0] == r2[0], (r1, r2)
            if r1[0] == 'ok': cmp(r1[1], r2[1])
            else: assert r1[1:] == r2[1:], (r1, r2)
        except AssertionError as e:
            bad += 1; print('MISMATCH vec', name, strict, e)
print(n, 'cases', bad, 'mismatches')
sys.exit(1 if bad else 0)
