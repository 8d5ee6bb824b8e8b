#!/usr/bin/env python3
"""PyTorch's own OpInfo and ModuleInfo databases as the judge of Tessera (issue 52).

Draws every OpInfo's sample inputs (torch.testing._internal.common_methods_invocations.op_db)
and every ModuleInfo's module inputs (torch.testing._internal.common_modules.module_db) on the
CPU in float32 and float64 (an op with neither: its first integer/bool dtype), runs PyTorch and
Tessera on the same values on cpu and on sim:0, and compares outputs, the argument tensors after
the call (what an op writes into them: running statistics, out= buffers; issue 76), and gradients (backward of
sum(out * g) with the same random g on both sides) within the dtype's tolerance (the largest of
torch.testing's default and the op's own toleranceOverride/precisionOverride decorators).

Outcome of a sample: pass, wrong (a value, shape, dtype or structure differs: the worst), error
(Tessera raised where PyTorch gave a result), missing (Tessera has no such name). Of an op or
module: pass (every sample passes), partial (some fail: which), wrong (any sample wrong), error
(none pass, some raise), missing (none pass, a name is missing). Excluded entries are listed with
their reason.

Run under PyTorch's interpreter (same CPython minor version as the built extension):
    PYTHONPATH=build/python /opt/torch2/bin/torch-python tools/opinfo_check.py [options]
Options: --ops a,b (subset by name or name.variant), --modules (module_db; alone: modules only),
--module-names A,B, --device cpu|sim:0|both|meta, --dtypes float32,float64, --limit-samples N,
--jobs N (worker processes: a crash or hang costs one op, not the run), --timeout S (per op),
--json out.json, -v (per-sample details).
Needs PyTorch 2.x (../shared/tools/install-torch.sh, with expecttest and hypothesis); not part of
`make test`. --device meta runs Tessera on the meta device (tensors without data) and compares
each output's structure, shape and dtype only: a data-dependent op raises there (error), and a
shape or dtype that differs from PyTorch's is wrong.
"""
import argparse
import collections
import functools
import json
import os
import re
import select
import subprocess
import sys
import time
import types

# ---------------------------------------------------------------------------------------------
# Static classification (parent and workers)

PRIVATE_OK = ("__",)  # dunder methods are public

# Names whose outputs are random or uninitialised: compared by shape and dtype only.
RANDOM_OPS = {
    "bernoulli", "normal", "multinomial", "rand_like", "randn_like", "randint_like", "randint",
    "uniform", "cauchy", "exponential", "geometric", "log_normal", "poisson", "randn", "rand",
    "randperm", "nn.functional.dropout", "nn.functional.dropout1d", "nn.functional.dropout2d",
    "nn.functional.dropout3d", "nn.functional.alpha_dropout", "nn.functional.feature_alpha_dropout",
    "nn.functional.rrelu", "nn.functional.fractional_max_pool2d",
    "nn.functional.fractional_max_pool3d", "nn.functional.gumbel_softmax", "empty", "empty_like",
    "new_empty", "new_empty_strided", "empty_strided", "empty_permuted", "native_dropout_backward",
}
RANDOM_MODULES = {"nn.FractionalMaxPool2d", "nn.FractionalMaxPool3d", "nn.RReLU"}
# Gradients PyTorch itself gets wrong (torch.autograd.gradcheck fails on its own op): outputs
# compared, gradients not (Tessera's are checked against finite differences in its own tests).
TORCH_GRAD_WRONG = {
    # 2.15: the input's gradient goes to the overwritten elements instead of the others
    "as_strided_scatter",
}

# Outputs defined up to the sign of each singular/eigen vector: compared in absolute value.
SIGN_AMBIGUOUS = {"svd", "linalg.svd", "linalg.eigh", "linalg.eig", "linalg.svdvals", "pca_lowrank",
                  "svd_lowrank", "linalg.eigvalsh", "linalg.qr", "qr", "symeig"}

# torch.testing defaults (assert_close)
DEFAULT_TOL = {"float32": (1.3e-6, 1e-5), "float64": (1e-7, 1e-7), "float16": (1e-3, 1e-5),
               "bfloat16": (1.6e-2, 1e-5), "complex64": (1.3e-6, 1e-5),
               "complex128": (1e-7, 1e-7)}
TOL_CLASSES = {"TestCommon", "TestGradients", "TestBwdGradients", "TestFwdGradients",
               "TestUnaryUfuncs", "TestBinaryUfuncs", "TestReductions", "TestMathBits",
               "TestDecomp", "TestModule", None}


def op_key(op):
    return op.name + ("." + op.variant_test_name if op.variant_test_name else "")


def real_dtypes(op_or_mod, torch):
    """float32/float64 where supported on the cpu; else the first supported int/bool dtype."""
    if hasattr(op_or_mod, "supports_dtype"):
        sup = lambda d: op_or_mod.supports_dtype(d, "cpu")
    else:
        ds = set(op_or_mod.supported_dtypes("cpu") if callable(getattr(op_or_mod, "supported_dtypes", None))
                 else op_or_mod.dtypes)
        sup = lambda d: d in ds
    fl = [d for d in (torch.float32, torch.float64) if sup(d)]
    if fl:
        return fl
    for d in (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool):
        if sup(d):
            return [d]
    return []


def op_exclusion(op, torch):
    """None if testable, else the reason it is not a real-valued testable entry."""
    n = op.name
    if "sparse" in n:
        return "sparse layout (no sparse tensors in Tessera)"
    if "nested" in n or "jagged" in n:
        return "nested tensors"
    if n.startswith("jiterator_"):
        return "CUDA-only (jiterator)"
    if n.startswith("torch.ops.") or (n.startswith("_") and not n.startswith("__")):
        return "private ATen op, no public torch name"
    if type(op.op).__name__ in ("OpOverload", "OpOverloadPacket"):
        return "ATen overload (torch.ops.aten), no public torch name"
    if n.startswith("torch._"):
        return "private torch function"
    cpu = op.supported_dtypes("cpu")
    if not cpu:
        return "CUDA-only (no cpu dtypes)"
    if not real_dtypes(op, torch):
        if all(d.is_complex for d in cpu):
            return "complex-only"
        return "only low-precision/quantized dtypes on cpu"
    return None


# ---------------------------------------------------------------------------------------------
# Worker side


class Missing(Exception):
    def __init__(self, name):
        super().__init__(name)
        self.name = name


class Skip(Exception):
    pass


class W:
    """Worker state: torch, tessera and the maps between them."""

    def __init__(self, verbose=False):
        import numpy
        import torch
        torch.set_num_threads(1)
        import tessera
        tessera.set_num_threads(1)
        if not tessera.sim.is_available():
            tessera.sim.configure(1)
        self.np, self.torch, self.ts = numpy, torch, tessera
        self.verbose = verbose
        self._rev = None

    # ---- name mapping ------------------------------------------------------------------------
    def rev(self):
        """id(torch callable) -> dotted path, over torch's public namespaces."""
        if self._rev is None:
            torch = self.torch
            import torch.nn.functional  # noqa
            spaces = [("torch", torch), ("torch.nn.functional", torch.nn.functional),
                      ("torch.linalg", torch.linalg), ("torch.special", torch.special),
                      ("torch.fft", torch.fft), ("torch.Tensor", torch.Tensor)]
            for extra in ("masked", "signal.windows", "sparse", "nn.init"):
                try:
                    obj = torch
                    for p in extra.split("."):
                        obj = getattr(obj, p)
                    spaces.append(("torch." + extra, obj))
                except AttributeError:
                    pass
            r = {}
            for prefix, ns in reversed(spaces):  # torch.* wins over torch.Tensor.*
                for k in dir(ns):
                    try:
                        v = getattr(ns, k)
                    except Exception:
                        continue
                    if callable(v) and not isinstance(v, type):
                        r[id(v)] = prefix + "." + k
            self._rev = r
        return self._rev

    def ts_path(self, path):
        """tessera object for a 'torch.a.b' path; Tensor methods as a function of self."""
        parts = path.split(".")[1:]
        if parts[0] == "Tensor":
            name = parts[1]
            if not hasattr(self.ts.Tensor, name):
                raise Missing("Tensor." + name)
            return lambda self_, *a, **k: getattr(self_, name)(*a, **k)
        obj = self.ts
        for i, p in enumerate(parts):
            if not hasattr(obj, p):
                raise Missing("torch." + ".".join(parts))
            obj = getattr(obj, p)
        return obj

    def map_callable(self, f):
        if isinstance(f, functools.partial):
            g = self.map_callable(f.func)
            return functools.partial(g, *self.conv(f.args, "cpu"), **self.conv(f.keywords, "cpu"))
        if isinstance(f, types.FunctionType) and (f.__module__ or "").startswith("torch.testing"):
            return self.transplant(f)
        path = self.rev().get(id(f))
        if path is None:
            raise Skip("cannot map %r to a torch name" % (f,))
        return self.ts_path(path)

    def shim(self):
        w = self

        class Shim(types.ModuleType):
            def __init__(self, obj, path):
                super().__init__(path)
                self._obj, self._path = obj, path

            def __getattr__(self, name):
                if name.startswith("__"):
                    raise AttributeError(name)
                if not hasattr(self._obj, name):
                    return _MissingName(self._path + "." + name)
                v = getattr(self._obj, name)
                if isinstance(v, types.ModuleType):
                    return Shim(v, self._path + "." + name)
                return v
        return Shim(w.ts, "torch")

    def transplant(self, f):
        """The same Python function (a lambda or wrapper of the test suite) with torch -> tessera."""
        g = dict(f.__globals__)
        sh = self.shim()
        for k, v in list(g.items()):
            if v is self.torch:
                g[k] = sh
            elif isinstance(v, types.ModuleType) and v.__name__ == "torch.nn.functional":
                g[k] = sh.nn.functional if hasattr(self.ts.nn, "functional") else v
            elif isinstance(v, types.ModuleType) and v.__name__.startswith("torch.") and \
                    v.__name__.count(".") == 1 and not v.__name__.startswith("torch.testing"):
                sub = v.__name__.split(".")[1]
                g[k] = _LazyMissing(sh, sub)
        closure = None
        if f.__closure__:
            cells = []
            for c in f.__closure__:
                try:
                    v = c.cell_contents
                except ValueError:
                    cells.append(c)
                    continue
                cells.append(types.CellType(self.conv_obj(v)))
            closure = tuple(cells)
        defaults = tuple(self.conv_obj(d) for d in f.__defaults__) if f.__defaults__ else None
        kwd = {k: self.conv_obj(v) for k, v in f.__kwdefaults__.items()} if f.__kwdefaults__ else None
        nf = types.FunctionType(f.__code__, g, f.__name__, defaults, closure)
        nf.__kwdefaults__ = kwd
        return nf

    def conv_obj(self, v):
        """Non-tensor objects of torch in closures/defaults."""
        torch = self.torch
        if isinstance(v, (torch.dtype, torch.device, torch.memory_format, torch.layout)):
            return self.conv(v, "cpu")
        if v is torch:
            return self.shim()
        if callable(v) and not isinstance(v, type) and id(v) in self.rev():
            try:
                return self.map_callable(v)
            except Exception:
                return v
        if isinstance(v, types.FunctionType) and (v.__module__ or "").startswith("torch.testing"):
            return self.transplant(v)
        return v

    # ---- values ------------------------------------------------------------------------------
    def conv(self, v, dev, leaves=None):
        """torch value -> tessera value on dev. leaves: id(torch leaf) -> tessera leaf."""
        torch, ts = self.torch, self.ts
        if isinstance(v, torch.Tensor):
            if leaves is not None and id(v) in leaves:
                return leaves[id(v)]
            if v.layout != torch.strided:
                raise Skip("non-strided layout")
            if v.dtype == torch.bfloat16:
                x = ts.from_numpy(v.detach().float().numpy().copy()).to(ts.bfloat16)
            else:
                x = ts.from_numpy(v.detach().resolve_conj().resolve_neg().numpy().copy())
            if dev != "cpu":
                x = x.to(dev)
            if v.requires_grad and v.is_leaf:
                x.requires_grad_(True)
            if leaves is not None:
                leaves[id(v)] = x
            return x
        if isinstance(v, torch.Size):
            return tuple(v)
        if isinstance(v, torch.dtype):
            name = str(v).split(".")[-1]
            if not hasattr(ts, name):
                raise Missing("torch." + name)
            return getattr(ts, name)
        if isinstance(v, torch.device):
            return dev
        if isinstance(v, torch.memory_format):
            name = str(v).split(".")[-1]
            if not hasattr(ts, name):
                raise Missing("torch." + name)
            return getattr(ts, name)
        if isinstance(v, torch.layout):
            name = str(v).split(".")[-1]
            if not hasattr(ts, name):
                raise Missing("torch." + name)
            return getattr(ts, name)
        if isinstance(v, torch.Generator):
            raise Missing("torch.Generator")
        if isinstance(v, torch.nn.Module):
            raise Skip("a torch Module as an argument")
        if isinstance(v, tuple) and hasattr(v, "_fields"):
            return type(v)(*[self.conv(x, dev, leaves) for x in v]) if not hasattr(v, "n_fields") \
                else tuple(self.conv(x, dev, leaves) for x in v)
        if isinstance(v, (list, tuple)):
            return type(v)(self.conv(x, dev, leaves) for x in v)
        if isinstance(v, dict):
            return {k: self.conv(x, dev, leaves) for k, x in v.items()}
        if callable(v) and not isinstance(v, type):
            if isinstance(v, types.FunctionType) and (v.__module__ or "").startswith("torch.testing"):
                return self.transplant(v)
            if id(v) in self.rev():
                return self.map_callable(v)
        return v

    def fresh(self, v, memo):
        """A detached copy of a torch sample value, leaves kept leaves (aliases kept)."""
        torch = self.torch
        if isinstance(v, torch.Tensor):
            if id(v) not in memo:
                c = v.detach().clone()
                if v.requires_grad and (v.dtype.is_floating_point or v.is_complex()):
                    c.requires_grad_(True)
                memo[id(v)] = c
            return memo[id(v)]
        if isinstance(v, tuple) and hasattr(v, "_fields"):
            return v
        if isinstance(v, (list, tuple)):
            return type(v)(self.fresh(x, memo) for x in v)
        if isinstance(v, dict):
            return {k: self.fresh(x, memo) for k, x in v.items()}
        return v

    def meta_compare(self, exp, got, where="out"):
        """--device meta: torch's output (on the cpu) against Tessera's on the meta device, by
        structure, shape and dtype; None when they agree, else what differs."""
        torch = self.torch
        if isinstance(exp, torch.Tensor):
            if not isinstance(got, self.ts.Tensor):
                return "%s: a %s, torch a tensor" % (where, type(got).__name__)
            # a factory told device='cpu' by the sample makes it there, as PyTorch does
            if not got.is_meta and str(got.device) != str(exp.device):
                return "%s: on %s, not on meta" % (where, got.device)
            de, dg = str(exp.dtype).split(".")[-1], str(got.dtype).split(".")[-1]
            if tuple(exp.shape) != tuple(got.shape) or de != dg:
                return "%s: %s %s, torch %s %s" % (where, dg, tuple(got.shape), de, tuple(exp.shape))
            return None
        if isinstance(exp, (list, tuple)) and not isinstance(exp, torch.Size):
            if not isinstance(got, (list, tuple)) or len(got) != len(exp):
                return "%s: %r, torch %d outputs" % (where, type(got).__name__, len(exp))
            for i, (e, g) in enumerate(zip(exp, got)):
                r = self.meta_compare(e, g, "%s[%d]" % (where, i))
                if r:
                    return r
            return None
        e, g = self.to_np(exp, "torch"), self.to_np(got, "ts")
        return None if e == g else "%s: %r, torch %r" % (where, g, e)

    def to_np(self, v, side):
        """Outputs to a comparable tree: ('T', ndarray, dtype name) / ('S', number) / lists."""
        np = self.np
        T = self.torch.Tensor if side == "torch" else self.ts.Tensor
        if isinstance(v, T):
            dt = str(v.dtype).split(".")[-1]
            if side == "torch":
                x = v.detach()
                if x._is_zerotensor():  # a gradient PyTorch knows is zero (sgn's of a real input)
                    x = self.torch.zeros(x.shape, dtype=x.dtype)
                a = (x.float() if x.dtype == self.torch.bfloat16 else x).resolve_conj().numpy()
            else:
                x = v.detach().cpu()
                a = (x.float() if dt == "bfloat16" else x).numpy()
            return ("T", np.array(a, copy=True), dt, tuple(v.shape))
        if isinstance(v, (list, tuple)):
            return ("L", [self.to_np(x, side) for x in v])
        if isinstance(v, (bool, int, float)) or v is None:
            return ("S", v)
        if side == "torch" and isinstance(v, self.torch.Size):
            return ("L", [("S", int(x)) for x in v])
        if side == "torch" and isinstance(v, self.torch.dtype):
            return ("S", str(v).split(".")[-1])
        if side == "ts" and isinstance(v, self.ts.dtype):
            return ("S", str(v).split(".")[-1])
        if isinstance(v, str):
            return ("S", v)
        return ("O", type(v).__name__)

    def compare(self, e, a, rtol, atol, shape_only=False, absval=False, where="out", ref=None):
        """None when a (tessera) matches e (torch), else the reason. ref: the same computation by
        torch in float64 (float32 samples): a float32 value off torch's by more than the tolerance
        passes when its distance to the float64 value is within the tolerance plus 4 times
        torch's own float32 error on this sample."""
        np = self.np
        if e[0] == "T" and a[0] == "S" and a[1] is not None and e[3] == ():
            a = ("T", np.array(a[1]), e[2], ())
        if e[0] == "S" and a[0] == "T" and a[3] == () and e[1] is not None:
            e = ("T", np.array(e[1]), a[2], ())
        if e[0] != a[0]:
            kinds = {"T": "Tensor", "L": "sequence", "S": "number", "O": "object"}
            return "%s: %s where torch gives %s" % (where, kinds[a[0]], kinds[e[0]])
        if e[0] == "L":
            if len(e[1]) != len(a[1]):
                return "%s: %d outputs, torch %d" % (where, len(a[1]), len(e[1]))
            for i, (x, y) in enumerate(zip(e[1], a[1])):
                rf = ref[1][i] if ref and ref[0] == "L" and len(ref[1]) == len(e[1]) else None
                r = self.compare(x, y, rtol, atol, shape_only, absval, "%s[%d]" % (where, i), rf)
                if r:
                    return r
            return None
        if e[0] == "S":
            if e[1] == a[1]:
                return None
            if isinstance(e[1], (int, float)) and isinstance(a[1], (int, float)) and \
                    not isinstance(e[1], bool) and not isinstance(a[1], bool):
                if shape_only or abs(e[1] - a[1]) <= atol + rtol * abs(e[1]) or \
                        (e[1] != e[1] and a[1] != a[1]):
                    return None
            return "%s: %r, torch %r" % (where, a[1], e[1])
        if e[0] == "O":
            return None if e[1] == a[1] else "%s: %s, torch %s" % (where, a[1], e[1])
        _, ea, edt, esh = e
        _, aa, adt, ash = a
        if tuple(esh) != tuple(ash):
            return "%s: shape %s, torch %s" % (where, list(ash), list(esh))
        if edt != adt:
            return "%s: dtype %s, torch %s" % (where, adt, edt)
        if shape_only or ea.size == 0:
            return None
        if ea.dtype.kind in "fc":
            wide = np.complex128 if "c" in (ea.dtype.kind, aa.dtype.kind) else np.float64
            x, y = ea.astype(wide), aa.astype(wide)
            if absval:
                x, y = np.abs(x), np.abs(y)
            ok = np.isclose(y, x, rtol=rtol, atol=atol, equal_nan=True)
            if ok.all():
                return None
            if ref is not None and ref[0] == "T" and ref[3] == esh:
                z = ref[1].astype(np.float64)
                if absval:
                    z = np.abs(z)
                with np.errstate(invalid="ignore"):
                    e_torch = np.abs(x - z)
                    excess = np.abs(y - z) - (atol + rtol * np.abs(z))
                fin = np.isfinite(z) & np.isfinite(y) & np.isfinite(x)
                same_nonfin = ~fin & ok
                if (fin | same_nonfin).all():
                    slack = 4 * float(e_torch[fin].max()) if fin.any() else 0.0
                    if not fin.any() or float(excess[fin].max()) <= slack:
                        return None
            bad = np.argwhere(~ok.reshape(x.shape) if x.shape else ~ok.reshape(()))
            idx = tuple(bad[0]) if len(bad) else ()
            diff = np.abs(x - y)
            diff = diff[np.isfinite(diff)]
            return "%s: %d of %d values differ (max abs diff %.3g; at %s %r vs torch %r; rtol %.2g atol %.2g)" % (
                where, int((~ok).sum()), ok.size, float(diff.max()) if diff.size else float("nan"),
                list(idx), y[idx].item(), x[idx].item(), rtol, atol)
        if np.array_equal(ea, aa):
            return None
        neq = ea != aa
        idx = tuple(np.argwhere(neq)[0]) if ea.shape else ()
        return "%s: %d of %d values differ (at %s %r vs torch %r)" % (
            where, int(neq.sum()), neq.size, list(idx), aa[idx].item(), ea[idx].item())

    # ---- tolerances --------------------------------------------------------------------------
    def tol(self, entry, dtype):
        name = str(dtype).split(".")[-1]
        rtol, atol = DEFAULT_TOL.get(name, (0.0, 0.0))
        try:
            from torch.testing._internal.common_device_type import toleranceOverride, precisionOverride
            for di in getattr(entry, "decorators", ()) or ():
                decs = getattr(di, "decorators", [di])
                if getattr(di, "cls_name", None) not in TOL_CLASSES:
                    continue
                if getattr(di, "device_type", None) not in (None, "cpu"):
                    continue
                for d in decs:
                    if isinstance(d, toleranceOverride) and dtype in d.d:
                        atol = max(atol, d.d[dtype].atol)
                        rtol = max(rtol, d.d[dtype].rtol)
                    elif isinstance(d, precisionOverride) and dtype in d.d:
                        atol = max(atol, d.d[dtype])
        except Exception:
            pass
        return rtol, atol

    # ---- classify an exception ---------------------------------------------------------------
    def exc(self, e):
        if isinstance(e, Missing):
            return "missing", e.name
        if isinstance(e, AttributeError):
            m = re.search(r"'([\w.]+)' (?:object )?has no attribute '(\w+)'", str(e))
            if m:
                owner = m.group(1).split(".")[-1]
                return "missing", ("Tensor." if owner == "Tensor" else owner + ".") + m.group(2)
            m = re.search(r"module '([\w.]+)' has no attribute '(\w+)'", str(e))
            if m:
                return "missing", m.group(1).replace("tessera", "torch") + "." + m.group(2)
        if isinstance(e, Skip):
            return "skip", str(e)
        first = (str(e).strip().splitlines() or [""])[0][:200]
        return "error", "%s: %s" % (type(e).__name__, first)

    # ---- gradient helper ---------------------------------------------------------------------
    def float_outputs(self, out, T):
        res = []
        def walk(v):
            if isinstance(v, T):
                if v.dtype.is_floating_point or v.dtype.is_complex:
                    res.append(v)
            elif isinstance(v, (list, tuple)):
                for x in v:
                    walk(x)
        walk(out)
        return res

    # ---- one op ------------------------------------------------------------------------------
    def run_op(self, op, dtypes, devices, limit):
        torch, ts = self.torch, self.ts
        key = op_key(op)
        shape_only = op.name in RANDOM_OPS or key in RANDOM_OPS
        absval = op.name in SIGN_AMBIGUOUS
        try:
            fn, pre = None, None
            try:
                obj = torch
                for p in op.name.split("."):
                    obj = getattr(obj, p)
            except AttributeError:
                obj = None
            if obj is not None and obj is op.op:
                fn = self.ts_path("torch." + op.name)
            else:
                fn = self.map_callable(op.op)
        except Missing as e:
            fn, pre = None, e.name
        except Skip as e:
            return {"outcome": "excluded", "reason": str(e), "samples": []}
        if fn is None:
            meth = op.name.split(".")[-1]
            note = pre + (" (Tensor.%s exists)" % meth if hasattr(ts.Tensor, meth) else "")
            return {"outcome": "missing", "reason": note, "missing": [pre], "samples": []}
        custom_wrapper = getattr(op.gradcheck_wrapper, "__name__", "") != "gradcheck_wrapper"
        samples = []
        for dtype in dtypes:
            rtol, atol = self.tol(op, dtype)
            grad_ok = op.supports_autograd and (dtype.is_floating_point or dtype.is_complex) \
                and not shape_only and op.name not in TORCH_GRAD_WRONG
            try:
                torch.manual_seed(0)
                sl = list(op.sample_inputs("cpu", dtype, requires_grad=grad_ok))
            except Exception as e:
                samples.append({"id": "%s:gen" % dtype, "outcome": "skip",
                                "reason": "torch sample_inputs raised: %s" % e})
                continue
            if limit:
                sl = sl[:limit]
            for si, s in enumerate(sl):
                sid = "%s#%d" % (str(dtype).split(".")[-1], si)
                for dev in devices:
                    r = self.one_sample(op, fn, s, dev, rtol, atol, grad_ok, shape_only, absval,
                                        custom_wrapper)
                    r["id"] = sid + "@" + dev
                    if self.verbose:
                        r["desc"] = _sample_desc(s)
                    samples.append(r)
                    if r["outcome"] == "skip" and r.get("all_devices"):
                        break
        return summarize(samples)

    # An SVD with full_matrices=True of a matrix that is not square: the singular vectors past the
    # k = min(m, n) singular values span a null space in any orthonormal basis (LAPACK builds
    # differ), so only the first k (up to sign) are compared with torch's, and the rest must make
    # U and V orthonormal.
    def svd_determined(self, name, out):
        if out[0] != "L" or len(out[1]) != 3 or any(t[0] != "T" for t in out[1]):
            return out
        (_, u, udt, _), s_, (_, v, vdt, _) = out[1]
        k = s_[1].shape[-1] if s_[1].ndim else 0
        u = u[..., :, :k]
        # torch.svd returns V [.., n, n]: its columns; linalg.svd Vh: its rows
        v = v[..., :, :k] if name == "svd" else v[..., :k, :]
        return ("L", [("T", u, udt, u.shape), s_, ("T", v, vdt, v.shape)])

    def svd_null_space(self, name, out, rtol, atol):
        np = self.np
        if out[0] != "L" or len(out[1]) != 3 or any(t[0] != "T" for t in out[1]):
            return None
        u, v = out[1][0][1], out[1][2][1]
        for what, q in (("U", u), ("V", v if name == "svd" else np.swapaxes(v, -1, -2))):
            if q.size == 0 or q.shape[-1] == 0:
                continue
            g = np.swapaxes(q, -1, -2).astype(np.float64) @ q.astype(np.float64)
            eye = np.eye(g.shape[-1])
            # a column of U or V is orthonormal when computed with the output's rounding
            tol = 4 * q.shape[-2] * np.finfo(q.dtype).eps + atol
            if np.abs(g - eye).max() > tol:
                return "out: %s is not orthonormal (|Q^T Q - I| = %.3g)" % (
                    what, np.abs(g - eye).max())
        return None

    def one_sample(self, op, fn, s, dev, rtol, atol, grad_ok, shape_only, absval, custom_wrapper):
        torch, ts = self.torch, self.ts
        memo = {}
        inp, args, kw = self.fresh(s.input, memo), self.fresh(tuple(s.args), memo), self.fresh(dict(s.kwargs), memo)
        # the argument tensors as given: an op that writes into one (running statistics, an out=
        # buffer, a trailing-underscore op) is compared on what it wrote (mutated_compare)
        before = {k: v.detach().clone() for k, v in memo.items()}
        try:
            torch.manual_seed(0)
            out = op.op(inp, *args, **kw)
            exp = self.to_np(out, "torch")
            after = {k: self.to_np(v, "torch") for k, v in memo.items()}
            if not shape_only:  # random (dropout_p > 0...): a second seed gives other values
                torch.manual_seed(12345)
                seed = torch.manual_seed  # the suite's wrapper_set_seed seeds 42 inside the op
                torch.manual_seed = lambda _s: seed(12345)
                try:
                    with torch.no_grad():
                        again = self.to_np(op.op(inp, *args, **kw), "torch")
                finally:
                    torch.manual_seed = seed
                if self.compare(exp, again, 0.0, 0.0):
                    shape_only, grad_ok = True, False
        except Skip as e:
            return {"outcome": "skip", "reason": str(e), "all_devices": True}
        except Exception as e:
            return {"outcome": "skip", "reason": "torch raised: %s" % (str(e).splitlines() or [""])[0][:120],
                    "all_devices": True}
        f32 = any(isinstance(t, torch.Tensor) and t.dtype in (torch.float32, torch.complex64)
                  for t in memo.values())
        refc = {}

        def ref(part, tleaves=None, gs=None):
            if not f32:
                return None
            if "out" not in refc:
                refc.update(self.ref_op(op, s, inp, args, kw, tleaves, gs, custom_wrapper))
            return refc.get(part)
        leaves = {}
        try:
            # Tessera gets the arguments as they were before torch's runs wrote into them
            for k, v in memo.items():
                if not self.same_bits(self.to_np(before[k], "torch"), after[k]):
                    x = self.conv(before[k], dev)
                    if v.requires_grad and v.is_leaf:
                        x.requires_grad_(True)
                    leaves[id(v)] = x
            tinp, targs, tkw = self.conv(inp, dev, leaves), self.conv(args, dev, leaves), self.conv(kw, dev, leaves)
        except Exception as e:
            k, msg = self.exc(e)
            return {"outcome": k, "reason": "converting the inputs: " + msg if k == "error" else msg,
                    "all_devices": k == "skip"}
        try:
            ts.manual_seed(0)
            tout = fn(tinp, *targs, **tkw)
        except Exception as e:
            k, msg = self.exc(e)
            return {"outcome": k, "reason": msg}
        if dev == "meta":  # no values: the outputs' structure, shapes and dtypes are the result
            r = self.meta_compare(out, tout)
            return {"outcome": "wrong", "reason": r} if r else {"outcome": "pass"}
        try:
            got = self.to_np(tout, "ts")
        except Exception as e:
            k, msg = self.exc(e)
            return {"outcome": "error", "reason": "reading the output: " + msg}
        if op.name in ("svd", "linalg.svd"):
            r = self.svd_null_space(op.name, got, rtol, atol)
            if r:
                return {"outcome": "wrong", "reason": r}
            exp, got = self.svd_determined(op.name, exp), self.svd_determined(op.name, got)
        r = self.compare(exp, got, rtol, atol, shape_only, absval)
        if r and f32 and ref("out") is not None:
            rf = ref("out")
            if op.name in ("svd", "linalg.svd"):
                rf = self.svd_determined(op.name, rf)
            r = self.compare(exp, got, rtol, atol, shape_only, absval, ref=rf)
        if r:
            return {"outcome": "wrong", "reason": r}
        r = self.mutated_compare(memo, after, leaves, rtol, atol, shape_only)
        if r:
            return {"outcome": "wrong", "reason": r}
        if not grad_ok:
            return {"outcome": "pass"}
        # ---- gradients
        tleaves = [t for t in memo.values() if t.requires_grad and t.is_leaf]
        if not tleaves:
            return {"outcome": "pass"}
        try:
            if custom_wrapper:
                out_g = op.gradcheck_wrapper(op.op, inp, *args, **kw)
            else:
                out_g = out
            out_g = s.output_process_fn_grad(out_g)
            outs = [o for o in self.float_outputs(out_g, torch.Tensor) if o.requires_grad]
            if not outs:
                return {"outcome": "pass"}
            gen = torch.Generator().manual_seed(1)
            # a complex output as its (real, imaginary) pairs: the loss stays real
            outs = [torch.view_as_real(o) if o.is_complex() else o for o in outs]
            gs = [torch.randn(o.shape, dtype=o.dtype, generator=gen) for o in outs]
            loss = sum((o * g).sum() for o, g in zip(outs, gs))
            tg = torch.autograd.grad(loss, tleaves, allow_unused=True)
        except Exception as e:
            return {"outcome": "pass", "note": "torch backward raised: %s" % str(e).splitlines()[0][:100]}
        try:
            if custom_wrapper:
                tout_g = self.transplant(op.gradcheck_wrapper)(fn, tinp, *targs, **tkw)
            else:
                tout_g = tout
            tout_g = self.transplant(s.output_process_fn_grad)(tout_g) \
                if isinstance(s.output_process_fn_grad, types.FunctionType) else tout_g
            touts = self.float_outputs(tout_g, ts.Tensor)
            # same selection as torch: by position among float tensors that require grad there
            tall = self.float_outputs(out_g, torch.Tensor)
            sel = [i for i, o in enumerate(tall) if o.requires_grad]
            if len(touts) != len(tall):
                return {"outcome": "wrong", "reason": "grad: %d float outputs, torch %d" % (len(touts), len(tall))}
            touts = [touts[i] for i in sel]
            for o in touts:
                if not o.requires_grad:
                    return {"outcome": "error", "reason": "grad: output does not require grad (no backward)"}
            tloss = None
            for o, g in zip(touts, gs):
                o = ts.view_as_real(o) if o.is_complex() else o
                gt = self.conv(g, "cpu").to(o.device)  # where the op put its output
                term = (o * gt).sum()
                tloss = term if tloss is None else tloss + term
            tsl = [leaves[id(t)] for t in tleaves]
            for x in tsl:
                x.grad = None
            tloss.backward()
            tgr = [x.grad for x in tsl]
        except Exception as e:
            k, msg = self.exc(e)
            return {"outcome": k, "reason": "grad: " + msg}
        for i, (a, b) in enumerate(zip(tg, tgr)):
            if a is None:
                a = torch.zeros_like(tleaves[i])
            e1 = self.to_np(a, "torch")
            if b is None:
                b = ts.zeros(tuple(a.shape), dtype=self.conv(a.dtype, dev))
            e2 = self.to_np(b, "ts")
            r = self.compare(e1, e2, rtol, atol, False, absval, where="grad[%d]" % i)
            if r and f32:
                refc.clear()
                rg = ref("grads", tleaves, gs)
                if rg is not None:
                    r = self.compare(e1, e2, rtol, atol, False, absval, where="grad[%d]" % i, ref=rg[i])
            if r:
                return {"outcome": "wrong", "reason": r}
        return {"outcome": "pass"}

    def same_bits(self, e, a):
        """Two to_np trees hold the very same values (NaN equal to NaN)."""
        np = self.np
        if e[0] != "T" or a[0] != "T":
            return e == a
        return e[3] == a[3] and np.array_equal(e[1], a[1], equal_nan=e[1].dtype.kind in "fc")

    def mutated_compare(self, memo, after, leaves, rtol, atol, shape_only):
        """Every argument tensor after the op, Tessera's against torch's: the values an op wrote
        into its arguments (F.batch_norm's running statistics, an out= buffer) are results too,
        and an argument torch leaves alone must stay as it was. None when all agree."""
        for i, (k, v) in enumerate(memo.items()):
            t = leaves.get(id(v))
            if t is None:  # not passed on (an argument Tessera's signature never saw)
                continue
            try:
                got = self.to_np(t, "ts")
            except Exception as e:
                return "argument %d after the op: %s" % (i, self.exc(e)[1])
            r = self.compare(after[k], got, rtol, atol, shape_only,
                             where="argument %d %s" % (i, tuple(v.shape)) + " after the op")
            if r:
                return r
        return None

    def up(self, v, memo):
        """A float64 copy of a torch value (float32 tensors upcast; leaves kept leaves)."""
        torch = self.torch
        if isinstance(v, torch.Tensor):
            if id(v) not in memo:
                c = v.detach().clone()
                if c.dtype == torch.float32:
                    c = c.double()
                elif c.dtype == torch.complex64:
                    c = c.to(torch.complex128)
                if v.requires_grad:
                    c.requires_grad_(True)
                memo[id(v)] = c
            return memo[id(v)]
        if isinstance(v, tuple) and hasattr(v, "_fields"):
            return v
        if isinstance(v, (list, tuple)):
            return type(v)(self.up(x, memo) for x in v)
        if isinstance(v, dict):
            return {k: self.up(x, memo) for k, x in v.items()}
        return v

    def ref_op(self, op, s, inp, args, kw, tleaves, gs, custom_wrapper):
        """torch's float64 (complex128) run of a float32 (complex64) sample: {out, grads}."""
        torch = self.torch
        res = {"out": None}
        try:
            memo = {}
            i2, a2, k2 = self.up(inp, memo), self.up(args, memo), self.up(kw, memo)
            torch.manual_seed(0)
            out = op.op(i2, *a2, **k2)
            res["out"] = self.to_np(out, "torch")
            if tleaves is not None:
                og = op.gradcheck_wrapper(op.op, i2, *a2, **k2) if custom_wrapper else out
                og = s.output_process_fn_grad(og)
                outs = [o for o in self.float_outputs(og, torch.Tensor) if o.requires_grad]
                outs = [torch.view_as_real(o) if o.is_complex() else o for o in outs]
                loss = sum((o * g.to(o.dtype)).sum() for o, g in zip(outs, gs))
                lv = [memo[id(t)] for t in tleaves]
                gr = torch.autograd.grad(loss, lv, allow_unused=True)
                res["grads"] = [self.to_np(g if g is not None else torch.zeros_like(l), "torch")
                                for g, l in zip(gr, lv)]
        except Exception:
            pass
        return res

    # ---- one module --------------------------------------------------------------------------
    def run_module(self, mi, dtypes, devices, limit):
        torch, ts = self.torch, self.ts
        name = mi.name
        try:
            cls_t = self.ts_path("torch." + name)
        except Missing as e:
            return {"outcome": "missing", "reason": e.name, "missing": [e.name], "samples": []}
        shape_only = name in RANDOM_MODULES
        samples = []
        modes = [True, False] if mi.train_and_eval_differ else [True]
        for dtype in dtypes:
            rtol, atol = self.tol(mi, dtype)
            for training in modes:
                try:
                    torch.manual_seed(0)
                    ins = mi.module_inputs_func(mi, device="cpu", dtype=dtype, requires_grad=True,
                                                training=training)
                except Exception as e:
                    samples.append({"id": "%s:gen" % dtype, "outcome": "skip", "reason": str(e)[:120]})
                    continue
                if limit:
                    ins = ins[:limit]
                for si, mi_in in enumerate(ins):
                    sid = "%s%s#%d" % (str(dtype).split(".")[-1], "" if training else ":eval", si)
                    if mi_in.forward_input is None:
                        continue
                    for dev in devices:
                        r = self.one_module(mi, cls_t, mi_in, dtype, dev, training, rtol, atol, shape_only)
                        r["id"] = sid + "@" + dev
                        if self.verbose:
                            r["desc"] = (mi_in.desc or "") + " ctor=%s" % _short(mi_in.constructor_input.args, mi_in.constructor_input.kwargs)
                        samples.append(r)
                        if r["outcome"] == "skip" and r.get("all_devices"):
                            break
        return summarize(samples)

    def one_module(self, mi, cls_t, mi_in, dtype, dev, training, rtol, atol, shape_only):
        torch, ts = self.torch, self.ts
        ca, ck = mi_in.constructor_input.args, mi_in.constructor_input.kwargs
        fa, fk = mi_in.forward_input.args, mi_in.forward_input.kwargs
        memo = {}
        try:
            torch.manual_seed(0)
            m = mi.module_cls(*ca, **ck)
            m.to(dtype)
            m.train(training)
            a, k = self.fresh(tuple(fa), memo), self.fresh(dict(fk), memo)
            if mi.is_lazy:
                with torch.no_grad():
                    m(*self.fresh(tuple(fa), {}), **self.fresh(dict(fk), {}))
            sd = {kk: v.detach().clone() for kk, v in m.state_dict().items()}
            torch.manual_seed(0)
            out = m(*a, **k)
            exp = self.to_np(out, "torch")
            if not shape_only:  # random (dropout > 0 in training...): another seed, other values
                m2 = mi.module_cls(*ca, **ck)
                m2.to(dtype)
                m2.load_state_dict(sd)
                m2.train(training)
                torch.manual_seed(12345)
                with torch.no_grad():
                    again = self.to_np(m2(*self.fresh(tuple(fa), {}), **self.fresh(dict(fk), {})), "torch")
                if self.compare(exp, again, 0.0, 0.0):
                    shape_only = True
        except Skip as e:
            return {"outcome": "skip", "reason": str(e), "all_devices": True}
        except Exception as e:
            return {"outcome": "skip", "reason": "torch raised: %s" % (str(e).splitlines() or [""])[0][:120],
                    "all_devices": True}
        leaves = {}
        try:
            tca, tck = self.conv(tuple(ca), "cpu"), self.conv(dict(ck), "cpu")
            ta, tk = self.conv(a, dev, leaves), self.conv(k, dev, leaves)
            tsd = {kk: self.conv(v, "cpu") for kk, v in sd.items()}
        except Exception as e:
            kind, msg = self.exc(e)
            return {"outcome": kind, "reason": "converting: " + msg, "all_devices": kind == "skip"}
        try:
            ts.manual_seed(0)
            mt = cls_t(*tca, **tck)
            mt.to(self.conv(dtype, "cpu"))
            mt.load_state_dict(tsd)
            if dev != "cpu":
                mt.to(dev)
            mt.train(training)
            tout = mt(*ta, **tk)
            if dev == "meta":  # no values: the outputs' structure, shapes and dtypes
                r = self.meta_compare(out, tout)
                return {"outcome": "wrong", "reason": r} if r else {"outcome": "pass"}
            got = self.to_np(tout, "ts")
        except Exception as e:
            kind, msg = self.exc(e)
            return {"outcome": kind, "reason": msg}
        f32 = dtype == torch.float32
        refc = {}

        def ref(part, tleaves=None, gs=None):
            if not f32:
                return None
            if part not in refc:
                refc.update(self.ref_module(mi, ca, ck, fa, fk, sd, training, memo, tleaves, gs))
            return refc.get(part)
        r = self.compare(exp, got, rtol, atol, shape_only)
        if r and f32 and not shape_only:
            r = self.compare(exp, got, rtol, atol, shape_only, ref=ref("out"))
        if r:
            return {"outcome": "wrong", "reason": r}
        # buffers after the forward (running statistics)
        try:
            tbuf = {kk: v for kk, v in mt.state_dict().items()}
            for kk, v in m.state_dict().items():
                if kk in sd and not any(kk == n for n, _ in m.named_parameters()):
                    if kk not in tbuf:
                        return {"outcome": "error", "reason": "buffer %s missing after forward" % kk}
                    e1, e2 = self.to_np(v, "torch"), self.to_np(tbuf[kk], "ts")
                    rr = self.compare(e1, e2, rtol, atol, shape_only, where="buffer " + kk)
                    if rr and f32 and not shape_only and (ref("buffers") or {}).get(kk):
                        rr = self.compare(e1, e2, rtol, atol, shape_only, where="buffer " + kk,
                                          ref=ref("buffers")[kk])
                    if rr:
                        return {"outcome": "wrong", "reason": rr}
        except Exception as e:
            kind, msg = self.exc(e)
            return {"outcome": "error", "reason": "reading buffers: " + msg}
        if shape_only:
            return {"outcome": "pass"}
        # gradients: inputs and parameters
        tleaves = [t for t in memo.values() if t.requires_grad and t.is_leaf]
        params = [(n, p) for n, p in m.named_parameters() if p.requires_grad]
        try:
            outs = [o for o in self.float_outputs(out, torch.Tensor) if o.requires_grad]
            if not outs:
                return {"outcome": "pass"}
            gen = torch.Generator().manual_seed(1)
            # a complex output as its (real, imaginary) pairs: the loss stays real
            outs = [torch.view_as_real(o) if o.is_complex() else o for o in outs]
            gs = [torch.randn(o.shape, dtype=o.dtype, generator=gen) for o in outs]
            loss = sum((o * g).sum() for o, g in zip(outs, gs))
            tg = torch.autograd.grad(loss, tleaves + [p for _, p in params], allow_unused=True)
        except Exception as e:
            return {"outcome": "pass", "note": "torch backward raised: %s" % str(e).splitlines()[0][:100]}
        try:
            tall = self.float_outputs(out, torch.Tensor)
            sel = [i for i, o in enumerate(tall) if o.requires_grad]
            touts = self.float_outputs(tout, ts.Tensor)
            if len(touts) != len(tall):
                return {"outcome": "wrong", "reason": "grad: %d outputs, torch %d" % (len(touts), len(tall))}
            touts = [touts[i] for i in sel]
            for o in touts:
                if not o.requires_grad:
                    return {"outcome": "error", "reason": "grad: output does not require grad"}
            tloss = None
            for o, g in zip(touts, gs):
                term = (o * self.conv(g, "cpu").to(o.device)).sum()
                tloss = term if tloss is None else tloss + term
            tparams = dict(mt.named_parameters())
            for _, p in tparams.items():
                p.grad = None
            tloss.backward()
            tgr = [leaves[id(t)].grad for t in tleaves]
            for n, _ in params:
                if n not in tparams:
                    return {"outcome": "error", "reason": "grad: no parameter %s" % n}
                tgr.append(tparams[n].grad)
        except Exception as e:
            kind, msg = self.exc(e)
            return {"outcome": kind, "reason": "grad: " + msg}
        names = ["input[%d]" % i for i in range(len(tleaves))] + [n for n, _ in params]
        for i, (a_, b_) in enumerate(zip(tg, tgr)):
            leaf = (tleaves + [p for _, p in params])[i]
            if a_ is None:
                a_ = torch.zeros_like(leaf)
            e1 = self.to_np(a_, "torch")
            if b_ is None:
                b_ = ts.zeros(tuple(a_.shape), dtype=self.conv(a_.dtype, dev))
            e2 = self.to_np(b_, "ts")
            rr = self.compare(e1, e2, rtol, atol, where="grad " + names[i])
            if rr and f32:
                refc.clear()
                rg = ref("grads", tleaves, gs)
                if rg is not None:
                    rr = self.compare(e1, e2, rtol, atol, where="grad " + names[i], ref=rg[i])
            if rr:
                return {"outcome": "wrong", "reason": rr}
        return {"outcome": "pass"}

    def ref_module(self, mi, ca, ck, fa, fk, sd, training, memo, tleaves, gs):
        """torch's float64 run of a float32 module sample: outputs, buffers, grads."""
        torch = self.torch
        res = {"out": None, "buffers": None, "grads": None}
        try:
            m = mi.module_cls(*ca, **ck)
            m.to(torch.float64)
            m.load_state_dict({k: (v.double() if v.dtype == torch.float32 else v) for k, v in sd.items()})
            m.train(training)
            # the same leaves as the float32 run, upcast
            up = {}
            for t in memo.values():
                self.up(t, up)
            # rebuild the inputs from the float32 sample's fresh copies
            a2 = _map_tree(tuple(fa), lambda t: up[id(memo[id(t)])] if id(t) in memo else t, torch)
            k2 = _map_tree(dict(fk), lambda t: up[id(memo[id(t)])] if id(t) in memo else t, torch)
            torch.manual_seed(0)
            out = m(*a2, **k2)
            res["out"] = self.to_np(out, "torch")
            res["buffers"] = {k: self.to_np(v, "torch") for k, v in m.state_dict().items()}
            if tleaves is not None:
                params = [(n, p) for n, p in m.named_parameters() if p.requires_grad]
                outs = [o for o in self.float_outputs(out, torch.Tensor) if o.requires_grad]
                loss = sum((o * g.to(o.dtype)).sum() for o, g in zip(outs, gs))
                lv = [up[id(t)] for t in tleaves] + [p for _, p in params]
                gr = torch.autograd.grad(loss, lv, allow_unused=True)
                res["grads"] = [self.to_np(g if g is not None else torch.zeros_like(l), "torch")
                                for g, l in zip(gr, lv)]
        except Exception:
            pass
        return res


class _MissingName:
    """A name Tessera lacks, met inside a transplanted function: using it raises Missing."""

    def __init__(self, path):
        self._path = path

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _MissingName(self._path + "." + name)

    def __call__(self, *a, **k):
        raise Missing(self._path)

    def __bool__(self):
        raise Missing(self._path)


class _LazyMissing:
    """torch.<sub> (linalg, special, ...) inside a transplanted function."""

    def __init__(self, shim, sub):
        self._shim, self._sub = shim, sub

    def __getattr__(self, name):
        return getattr(getattr(self._shim, self._sub), name)


def _map_tree(v, f, torch):
    if isinstance(v, torch.Tensor):
        return f(v)
    if isinstance(v, tuple) and hasattr(v, "_fields"):
        return v
    if isinstance(v, (list, tuple)):
        return type(v)(_map_tree(x, f, torch) for x in v)
    if isinstance(v, dict):
        return {k: _map_tree(x, f, torch) for k, x in v.items()}
    return v


def _short(args, kwargs):
    def s(v):
        try:
            import torch
            if isinstance(v, torch.Tensor):
                return "T%s" % list(v.shape)
        except Exception:
            pass
        if isinstance(v, (list, tuple)):
            return "(" + ",".join(s(x) for x in v) + ")"
        if isinstance(v, dict):
            return "{" + ",".join("%s=%s" % (k, s(x)) for k, x in v.items()) + "}"
        return repr(v)[:40]
    return s(tuple(args)) + (s(dict(kwargs)) if kwargs else "")


def _sample_desc(s):
    return _short((s.input,) + tuple(s.args), s.kwargs)


def summarize(samples):
    counted = [s for s in samples if s["outcome"] != "skip"]
    res = {"samples": samples, "n": len(counted), "passed": sum(s["outcome"] == "pass" for s in counted)}
    if not counted:
        reasons = collections.Counter(s.get("reason", "") for s in samples)
        res["outcome"] = "excluded"
        res["reason"] = "no testable sample: " + (reasons.most_common(1)[0][0] if reasons else "none")
        return res
    kinds = collections.Counter(s["outcome"] for s in counted)
    first = lambda k: next(s for s in counted if s["outcome"] == k)
    if kinds["wrong"]:
        res["outcome"], f = "wrong", first("wrong")
    elif kinds["pass"] == len(counted):
        res["outcome"], f = "pass", None
    elif kinds["pass"]:
        res["outcome"] = "partial"
        f = next(s for s in counted if s["outcome"] != "pass")
    elif kinds["error"]:
        res["outcome"], f = "error", first("error")
    else:
        res["outcome"], f = "missing", first("missing")
    if f:
        res["reason"] = "%s %s: %s" % (f["id"], f["outcome"], f.get("reason", ""))
    res["missing"] = sorted({s["reason"] for s in counted if s["outcome"] == "missing"})
    res["errors"] = sorted({s["reason"] for s in counted if s["outcome"] == "error"})
    res["failing"] = [s["id"] for s in counted if s["outcome"] != "pass"]
    return res


def worker_main(verbose):
    import torch
    from torch.testing._internal.common_methods_invocations import op_db
    from torch.testing._internal.common_modules import module_db
    w = W(verbose)
    ops = {op_key(o): o for o in op_db}
    mods = {m.name: m for m in module_db}
    out = sys.stdout
    sys.stdout = sys.stderr  # prints of the libraries must not mix with the protocol
    out.write(json.dumps({"ready": True}) + "\n")
    out.flush()
    for line in sys.stdin:
        task = json.loads(line)
        t0 = time.time()
        devices = task["devices"]
        try:
            if task["kind"] == "op":
                o = ops[task["key"]]
                ds = real_dtypes(o, torch)
                if ds[0].is_floating_point:
                    ds = [d for d in ds if str(d).split(".")[-1] in task["dtypes"]]
                for cd in (torch.complex64, torch.complex128):  # --dtypes ...,complex64
                    if str(cd).split(".")[-1] in task["dtypes"] and o.supports_dtype(cd, "cpu"):
                        ds.append(cd)
                res = w.run_op(o, ds, devices, task["limit"])
            else:
                m = mods[task["key"]]
                res = w.run_module(m, [d for d in real_dtypes(m, torch) if str(d).split(".")[-1] in task["dtypes"]],
                                   devices, task["limit"])
        except Exception as e:
            import traceback
            res = {"outcome": "error", "reason": "harness: %s: %s" % (type(e).__name__, e),
                   "trace": traceback.format_exc()[-800:], "samples": []}
        res["key"], res["kind"], res["secs"] = task["key"], task["kind"], round(time.time() - t0, 2)
        if not verbose:
            res["samples"] = [s for s in res.get("samples", []) if s["outcome"] != "pass"][:50]
        out.write(json.dumps(res, default=str) + "\n")
        out.flush()


# ---------------------------------------------------------------------------------------------
# Parent: task list, worker pool, table, summary


class Pool:
    def __init__(self, n, verbose, timeout):
        self.n, self.verbose, self.timeout = n, verbose, timeout
        self.workers = []

    def spawn(self):
        env = dict(os.environ)
        env.setdefault("TS_SIM_DEVICES", "1")
        env["OMP_NUM_THREADS"] = "1"
        p = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker"] +
                             (["-v"] if self.verbose else []),
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, env=env, text=True, bufsize=1)
        return {"p": p, "task": None, "t0": None, "ready": False, "buf": ""}

    def run(self, tasks, on_result):
        pending = list(tasks)
        self.workers = [self.spawn() for _ in range(min(self.n, len(tasks)))]
        busy = 0
        while pending or any(w["task"] for w in self.workers):
            for w in self.workers:
                if w["ready"] and w["task"] is None and pending:
                    w["task"] = pending.pop(0)
                    w["t0"] = time.time()
                    w["p"].stdin.write(json.dumps(w["task"]) + "\n")
                    w["p"].stdin.flush()
            fds = {w["p"].stdout.fileno(): w for w in self.workers}
            r, _, _ = select.select(list(fds), [], [], 1.0)
            for fd in r:
                w = fds[fd]
                line = w["p"].stdout.readline()
                if not line:  # died
                    self.died(w, "crashed (exit %s)" % w["p"].wait(), on_result)
                    continue
                msg = json.loads(line)
                if msg.get("ready"):
                    w["ready"] = True
                    continue
                on_result(w["task"], msg)
                w["task"] = None
            for w in self.workers:
                if w["task"] and time.time() - w["t0"] > self.timeout:
                    w["p"].kill()
                    w["p"].wait()
                    self.died(w, "timeout after %ds" % self.timeout, on_result)
            if not pending and not any(w["task"] for w in self.workers):
                break
        for w in self.workers:
            try:
                w["p"].stdin.close()
                w["p"].wait(timeout=10)
            except Exception:
                w["p"].kill()

    def died(self, w, why, on_result):
        t = w["task"]
        if t is not None:
            on_result(t, {"key": t["key"], "kind": t["kind"], "outcome": "error",
                          "reason": "harness: worker " + why, "samples": [], "n": 0, "passed": 0,
                          "secs": round(time.time() - w["t0"], 1)})
        i = self.workers.index(w)
        self.workers[i] = self.spawn()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ops", help="comma-separated op names (name or name.variant)")
    ap.add_argument("--modules", action="store_true", help="run module_db (alone: only modules)")
    ap.add_argument("--module-names", help="comma-separated module names (nn.Linear or Linear)")
    ap.add_argument("--device", default="both", choices=["cpu", "sim:0", "both", "meta"],
                    help="meta: outputs' shapes and dtypes only (no values on the meta device)")
    ap.add_argument("--dtypes", default="float32,float64")
    ap.add_argument("--limit-samples", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1))
    ap.add_argument("--timeout", type=int, default=300, help="seconds per op or module")
    ap.add_argument("--json")
    ap.add_argument("-v", "--verbose", action="store_true")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        return worker_main(a.verbose)

    t_start = time.time()
    import torch
    from torch.testing._internal.common_methods_invocations import op_db
    from torch.testing._internal.common_modules import module_db
    devices = ["cpu", "sim:0"] if a.device == "both" else [a.device]
    dtypes = a.dtypes.split(",")
    run_ops = bool(a.ops) or not (a.modules or a.module_names)
    run_mods = a.modules or bool(a.module_names) or not a.ops

    results, excluded = {}, {}
    tasks = []
    if run_ops:
        want = set(a.ops.split(",")) if a.ops else None
        for op in op_db:
            k = op_key(op)
            if want and k not in want and op.name not in want:
                continue
            why = op_exclusion(op, torch)
            if why:
                excluded[("op", k)] = why
                continue
            _NAMES[k] = op.name
            tasks.append({"kind": "op", "key": k})
    if run_mods:
        want = set(a.module_names.split(",")) if a.module_names else None
        for m in module_db:
            if want and m.name not in want and m.name.split(".")[-1] not in want:
                continue
            if not real_dtypes(m, torch):
                excluded[("module", m.name)] = "no real dtype on cpu"
                continue
            tasks.append({"kind": "module", "key": m.name})
    for t in tasks:
        t.update(devices=devices, dtypes=dtypes, limit=a.limit_samples)

    total = len(tasks)
    done = [0]

    def on_result(task, res):
        done[0] += 1
        results[(task["kind"], task["key"])] = res
        sys.stderr.write("[%d/%d %5.0fs] %-6s %-45s %-8s %s/%s %.1fs\n" % (
            done[0], total, time.time() - t_start, task["kind"], task["key"], res["outcome"],
            res.get("passed", 0), res.get("n", 0), res.get("secs", 0)))
        sys.stderr.flush()

    Pool(a.jobs, a.verbose, a.timeout).run(tasks, on_result)

    # excluded at run time (no testable sample: complex outputs...)
    for (kind, k), r in list(results.items()):
        if r["outcome"] == "excluded":
            excluded[(kind, k)] = r.get("reason", "")
            del results[(kind, k)]

    report(results, excluded, a, devices, dtypes, time.time() - t_start)


def report(results, excluded, a, devices, dtypes, secs):
    P = print
    for kind in ("op", "module"):
        rows = sorted((k, r) for (kd, k), r in results.items() if kd == kind)
        exc = sorted((k, why) for (kd, k), why in excluded.items() if kd == kind)
        if not rows and not exc:
            continue
        P("\n== %s (%s; %s) ==" % ("OpInfo entries (op_db)" if kind == "op" else "ModuleInfo entries (module_db)",
                                     ", ".join(devices), ", ".join(dtypes)))
        P("%-50s %-8s %9s  %s" % ("name", "outcome", "samples", "first failure"))
        for k, r in rows:
            reason = r.get("reason", "") if r["outcome"] != "pass" else ""
            P("%-50s %-8s %4d/%-4d  %s" % (k, r["outcome"], r.get("passed", 0), r.get("n", 0), reason[:160]))
            if a.verbose:
                for s in r.get("samples", []):
                    P("      %-22s %-7s %s %s" % (s["id"], s["outcome"], s.get("desc", ""), s.get("reason", "")[:200]))
            elif r["outcome"] == "partial":
                P("      failing: %s" % ", ".join(r.get("failing", [])[:12]) +
                  (" ..." if len(r.get("failing", [])) > 12 else ""))
        P("\n-- excluded %s entries (%d) --" % (kind, len(exc)))
        byreason = collections.defaultdict(list)
        for k, why in exc:
            byreason[why].append(k)
        for why, ks in sorted(byreason.items(), key=lambda x: -len(x[1])):
            P("  %s (%d): %s" % (why, len(ks), ", ".join(ks)))

    P("\n== summary ==")
    summary = {}
    for kind in ("op", "module"):
        rows = [r for (kd, _), r in results.items() if kd == kind]
        if not rows:
            continue
        c = collections.Counter(r["outcome"] for r in rows)
        names = collections.defaultdict(list)
        for (kd, k), r in results.items():
            if kd == kind:
                names[_NAMES.get(k, k)].append(r["outcome"])
        npass = sum(all(o == "pass" for o in v) for v in names.values())
        nex = sum(1 for (kd, _) in excluded if kd == kind)
        P("%-7s testable %d (excluded %d): pass %d, partial %d, wrong %d, error %d, missing %d; "
          "entries passing every sample %.1f%%; distinct names %d, passing %d (%.1f%%)" % (
              kind + "s", len(rows), nex, c["pass"], c["partial"], c["wrong"], c["error"], c["missing"],
              100.0 * c["pass"] / len(rows), len(names), npass, 100.0 * npass / max(1, len(names))))
        summary[kind] = dict(c, testable=len(rows), excluded=nex, names=len(names), names_pass=npass)
    wrong = [(kd, k, r) for (kd, k), r in sorted(results.items()) if r["outcome"] == "wrong"]
    P("\nWRONG results (%d):" % len(wrong))
    for kd, k, r in wrong:
        P("  !! %s %s: %s" % (kd, k, r.get("reason", "")))
    miss = collections.Counter()
    errs = collections.Counter()
    for r in results.values():
        for m in r.get("missing", []) or ([] if r["outcome"] != "missing" else [r.get("reason", "")]):
            miss[m] += 1
        es = {_norm_err(e) for e in r.get("errors", [])}
        if r["outcome"] == "error" and not r.get("errors"):
            es.add(_norm_err(r.get("reason", "")))
        for e in es:
            errs[e] += 1
    P("\nmost common missing names (entries needing them): " +
      ", ".join("%s (%d)" % x for x in miss.most_common(40)))
    P("\nmost common errors (entries):")
    for e, n in errs.most_common(25):
        P("  %3d  %s" % (n, e[:170]))
    P("\nrun time %.0f s (jobs %d)" % (secs, a.jobs))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"summary": summary, "devices": devices, "dtypes": dtypes, "seconds": round(secs),
                       "results": {"%s:%s" % k: r for k, r in results.items()},
                       "excluded": {"%s:%s" % k: v for k, v in excluded.items()}}, f, indent=1, default=str)


_NAMES = {}


def _norm_err(e):
    e = re.sub(r"^(\S+@\S+ )", "", e)
    e = re.sub(r"0x[0-9a-f]+", "0x..", e)
    e = re.sub(r"\[[0-9, ]+\]", "[..]", e)
    e = re.sub(r"\b\d+\b", "N", e)
    e = re.sub(r"\b(on (cpu|sim:N|cuda:N))\b", "on <dev>", e)
    e = re.sub(r"\b(float32|float64|int64|int32|bool)\b", "<dtype>", e)
    return e


if __name__ == "__main__":
    sys.exit(main())
