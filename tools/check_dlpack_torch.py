#!/usr/bin/env python3
"""check_dlpack_torch.py — DLPack exchange between Tessera and NumPy / PyTorch, in one process.

Usage: /opt/torch2/bin/torch-python tools/check_dlpack_torch.py [BUILD]   (BUILD defaults to build)

Builds a small shared helper at run time (cc -shared: the few C functions below, linked with
BUILD/libtessera.a, which is position independent, and the libraries BUILD/tessera.pc lists), loads
it with ctypes and checks, both ways and with NumPy and with PyTorch, that a tensor crosses without
a copy: the same data pointer, the same strides (views included), writes on one side seen on the
other, and each side's memory released exactly when the other side lets go (Tessera's live-tensor
count, NumPy's reference count, PyTorch's storage use count). Tessera's capsules reach NumPy through
a small object with __dlpack__; PyTorch takes them with torch.utils.dlpack.from_dlpack. A capsule
Tessera consumed is renamed "used_dltensor" (the DLPack rule), so that its producer's capsule
destructor leaves it alone; one Tessera refuses stays the producer's.
Prints what it checked and exits 0; prints "SKIP: ..." and exits 0 when this Python lacks NumPy and
PyTorch (the part whose module is missing is skipped alone); exits 1 on a failed check.
"""
import ctypes
import os
import re
import subprocess
import sys
import tempfile

HELPER_C = r"""
/* helper for tools/check_dlpack_torch.py: thin wrappers over the public API (no scopes: every
 * tensor returned is the caller's to release with h_release). */
#include <dlpack/dlpack.h>
#include <tessera.h>

ts_tensor *h_arange(int64_t rows, int64_t cols, int dtype) {
    ts_scope_begin();
    ts_tensor *t = ts_view(ts_to_dtype(ts_arange(0, (double)(rows * cols), 1, (ts_opts){0}),
                                       (ts_dtype)dtype),
                           TS_SHAPE(rows, cols));
    t = ts_keep(t);
    ts_scope_end();
    return t;
}
ts_tensor *h_transpose(ts_tensor *t) {
    ts_scope_begin();
    ts_tensor *r = ts_keep(ts_transpose(t, 0, 1));
    ts_scope_end();
    return r;
}
ts_tensor *h_slice(ts_tensor *t, int dim, int64_t start, int64_t end, int64_t step) {
    ts_scope_begin();
    ts_tensor *r = ts_keep(ts_slice(t, dim, start, end, step));
    ts_scope_end();
    return r;
}
void h_release(ts_tensor *t) { ts_release(t); }
DLManagedTensor *h_to_dlpack(ts_tensor *t) { return ts_to_dlpack(t); }
ts_tensor *h_from_dlpack(DLManagedTensor *m) { return ts_from_dlpack(m); }
void h_dl_delete(DLManagedTensor *m) {
    if (m && m->deleter) m->deleter(m);
}
void *h_dl_data(DLManagedTensor *m) { return (char *)m->dl_tensor.data + m->dl_tensor.byte_offset; }
/* the address of t's first element, as Tessera exports it */
void *h_data_ptr(ts_tensor *t) {
    DLManagedTensor *m = ts_to_dlpack(t);
    if (!m) return NULL;
    void *p = m->dl_tensor.data;
    m->deleter(m);
    return p;
}
int h_ndim(ts_tensor *t) { return ts_ndim(t); }
int64_t h_stride(ts_tensor *t, int d) { return ts_stride(t, d); }
int h_dtype(ts_tensor *t) { return (int)ts_dtype_of(t); }
double h_sum(ts_tensor *t) {
    ts_scope_begin();
    double v = ts_item(ts_sum(ts_to_dtype(t, TS_F64)));
    ts_scope_end();
    return v;
}
int h_fill(ts_tensor *t, double v) {
    ts_scope_begin();
    ts_fill_(t, v);
    ts_scope_end();
    return (int)ts_error();
}
int64_t h_live(void) {
    ts_mem_stats s;
    ts_memory_stats(ts_cpu(), &s);
    return s.live_tensors;
}
int h_error(void) { return (int)ts_error(); }
const char *h_error_message(void) { return ts_error_message(); }
void h_error_clear(void) { ts_error_clear(); }
"""

TS_F32, TS_F64, TS_F16, TS_BF16, TS_I64, TS_I32, TS_U8, TS_BOOL = range(1, 9)
TS_ERR_UNSUPPORTED = 9

DLTENSOR_NAME = b"dltensor"  # kept alive for the capsules that point at it
USED_NAME = b"used_dltensor"

checks = 0


def check(cond, what):
    global checks
    if not cond:
        print("FAILED:", what)
        sys.exit(1)
    checks += 1


def build_helper(build, tmp):
    src_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    lib = os.path.join(build, "libtessera.a")
    pc = os.path.join(build, "tessera.pc")
    if not os.path.exists(lib) or not os.path.exists(pc):
        print(f"check_dlpack_torch: {lib} or {pc} is missing: build Tessera first", file=sys.stderr)
        sys.exit(2)
    libs = []
    with open(pc) as f:
        for line in f:
            if line.startswith("Libs.private:"):
                libs = line.split(":", 1)[1].split()
    c = os.path.join(tmp, "helper.c")
    so = os.path.join(tmp, "libts_dlpack_helper.so")
    with open(c, "w") as f:
        f.write(HELPER_C)
    # -L for libraries Debian keeps outside the default path (Open MPI)
    extra = [f"-L{d}" for d in ("/usr/lib/x86_64-linux-gnu/openmpi/lib",) if os.path.isdir(d)]
    cmd = ["cc", "-std=c11", "-shared", "-fPIC", "-o", so, c, f"-I{src_root}/include", lib,
           *extra, *libs]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        print("check_dlpack_torch: building the helper failed:\n" + " ".join(cmd) + "\n" + r.stderr,
              file=sys.stderr)
        sys.exit(1)
    h = ctypes.CDLL(so)
    P = ctypes.c_void_p
    sigs = {
        "h_arange": (P, [ctypes.c_int64, ctypes.c_int64, ctypes.c_int]),
        "h_transpose": (P, [P]),
        "h_slice": (P, [P, ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64]),
        "h_release": (None, [P]),
        "h_to_dlpack": (P, [P]),
        "h_from_dlpack": (P, [P]),
        "h_dl_delete": (None, [P]),
        "h_dl_data": (P, [P]),
        "h_data_ptr": (P, [P]),
        "h_ndim": (ctypes.c_int, [P]),
        "h_stride": (ctypes.c_int64, [P, ctypes.c_int]),
        "h_dtype": (ctypes.c_int, [P]),
        "h_sum": (ctypes.c_double, [P]),
        "h_fill": (ctypes.c_int, [P, ctypes.c_double]),
        "h_live": (ctypes.c_int64, []),
        "h_error": (ctypes.c_int, []),
        "h_error_message": (ctypes.c_char_p, []),
        "h_error_clear": (None, []),
    }
    for name, (res, args) in sigs.items():
        fn = getattr(h, name)
        fn.restype, fn.argtypes = res, args
    return h


# ------------------------------------------------------------------ capsules through ctypes
api = ctypes.pythonapi
DESTRUCTOR = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
api.PyCapsule_New.restype = ctypes.py_object
api.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, DESTRUCTOR]
api.PyCapsule_IsValid.restype = ctypes.c_int
api.PyCapsule_IsValid.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
api.PyCapsule_GetPointer.restype = ctypes.c_void_p
api.PyCapsule_GetPointer.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
api.PyCapsule_SetName.restype = ctypes.c_int
api.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]

H = None  # the helper library


@DESTRUCTOR
def _capsule_destructor(cap):
    """A capsule nobody consumed still owns its DLManagedTensor (DLPack's rule)."""
    if api.PyCapsule_IsValid(cap, DLTENSOR_NAME):
        H.h_dl_delete(api.PyCapsule_GetPointer(cap, DLTENSOR_NAME))


def to_capsule(t):
    m = H.h_to_dlpack(t)
    check(m, f"ts_to_dlpack: {H.h_error_message()}")
    return api.PyCapsule_New(m, DLTENSOR_NAME, _capsule_destructor)


class Exported:
    """What numpy.from_dlpack takes: an object with __dlpack__ (a capsule made by Tessera)."""

    def __init__(self, t):
        self.cap = to_capsule(t)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        cap, self.cap = self.cap, None
        return cap

    def __dlpack_device__(self):
        return (1, 0)  # kDLCPU


def import_capsule(cap):
    """ts_from_dlpack of a producer's capsule; on success the capsule is marked used."""
    m = api.PyCapsule_GetPointer(ctypes.c_void_p(id(cap)), DLTENSOR_NAME)
    t = H.h_from_dlpack(m)
    if t:
        api.PyCapsule_SetName(cap, USED_NAME)
    return t


def error_message():
    msg = H.h_error_message().decode()
    H.h_error_clear()
    return msg


# ------------------------------------------------------------------ NumPy
def check_numpy(np):
    live0 = H.h_live()
    # Tessera -> NumPy: a [3, 4] float32 tensor and its transpose
    t = H.h_arange(3, 4, TS_F32)
    tt = H.h_transpose(t)
    a = np.from_dlpack(Exported(t))
    at = np.from_dlpack(Exported(tt))
    check(a.ctypes.data == H.h_data_ptr(t), "numpy sees Tessera's pointer")
    check(at.ctypes.data == H.h_data_ptr(tt), "numpy sees the transpose's pointer")
    check(a.shape == (3, 4) and a.strides == (16, 4), f"numpy strides {a.strides}")
    check(at.shape == (4, 3) and at.strides == (4, 16), f"numpy transpose strides {at.strides}")
    check((a == np.arange(12, dtype=np.float32).reshape(3, 4)).all(), "numpy values")
    check(np.shares_memory(a, at), "both numpy arrays share Tessera's memory")
    sl = H.h_slice(t, 1, 1, 4, 2)  # t[:, 1::2]: offset 1, strides [4, 2]
    asl = np.from_dlpack(Exported(sl))
    check(asl.ctypes.data == a.ctypes.data + 4 and asl.strides == (16, 8),
          f"numpy slice: pointer +{asl.ctypes.data - a.ctypes.data}, strides {asl.strides}")
    # NumPy makes arrays from unversioned (DLPack < 1.0) capsules read-only: they cannot say
    # whether writing is allowed. Tessera writes; numpy sees it.
    check(not a.flags.writeable, "numpy marks a DLPack 0.x import read-only")
    check(H.h_fill(sl, 100) == 0 and a[1, 3] == 100 and a[1, 2] == 6,
          "a Tessera write is seen by numpy")
    for x in (t, tt, sl):
        H.h_release(x)
    check(H.h_live() == live0 + 3, "the arrays hold Tessera's memory after ts_release")
    check(at[3, 1] == 100 and at[2, 1] == 6, "values survive the Tessera handles")
    del a, at, asl
    check(H.h_live() == live0, "the deleters ran when the arrays died")
    print("numpy: Tessera -> NumPy shares the pointer (views, strides, slice offset), Tessera's "
          "writes seen (numpy marks the arrays read-only), memory kept until the arrays die")

    # NumPy -> Tessera: an array, a strided view of it
    base = np.arange(20, dtype=np.float64).reshape(4, 5)
    view = base[1:, ::2]  # pointer + 40 bytes, strides (40, 16) -> elements (5, 2)
    r0 = sys.getrefcount(base)
    cap = base.__dlpack__()
    u = import_capsule(cap)
    check(u, f"ts_from_dlpack of a numpy capsule: {H.h_error_message()}")
    del cap
    vcap = view.__dlpack__()
    v = import_capsule(vcap)
    check(v, f"ts_from_dlpack of a numpy view: {H.h_error_message()}")
    del vcap
    check(H.h_data_ptr(u) == base.ctypes.data, "Tessera sees numpy's pointer")
    check(H.h_data_ptr(v) == view.ctypes.data, "Tessera sees the view's pointer")
    check(H.h_dtype(v) == TS_F64 and H.h_stride(v, 0) == 5 and H.h_stride(v, 1) == 2,
          "the view's strides")
    check(H.h_sum(v) == sum(view.flat), "the view's values")
    check(sys.getrefcount(base) > r0, "Tessera holds the array")
    check(H.h_fill(v, -1) == 0 and base[1, 0] == -1 and base[1, 1] == 6,
          "a Tessera write is seen by numpy")
    H.h_release(u)
    H.h_release(v)
    check(sys.getrefcount(base) == r0, "ts_release called numpy's deleters")
    flags = np.array([True, False, True, True])
    w = import_capsule(flags.__dlpack__())  # numpy 2 exports bool as kDLBool (code 6)
    check(w and H.h_dtype(w) == TS_BOOL and H.h_sum(w) == 3, "numpy bool -> Tessera bool")
    H.h_release(w)
    # refused: a negative stride; the capsule stays numpy's (its destructor frees it)
    rev = base[::-1]
    r1 = sys.getrefcount(rev)
    rcap = rev.__dlpack__()
    check(sys.getrefcount(rev) == r1 + 1, "numpy's capsule holds the array")
    check(not import_capsule(rcap), "a negative stride is refused")
    check(H.h_error() == TS_ERR_UNSUPPORTED, "refused with TS_ERR_UNSUPPORTED")
    msg = error_message()
    check(msg.startswith("from_dlpack: negative strides"), msg)
    del rcap
    check(sys.getrefcount(rev) == r1, "the refused capsule went back to numpy and was freed")
    print("numpy: NumPy -> Tessera shares the pointer (view strides kept, bool as kDLBool), writes "
          "seen, numpy's "
          "deleter runs at ts_release; a negative stride is refused and the capsule stays numpy's")


# ------------------------------------------------------------------ PyTorch
def check_torch(torch):
    from torch.utils.dlpack import from_dlpack, to_dlpack

    live0 = H.h_live()
    kinds = [(TS_F32, torch.float32), (TS_F64, torch.float64), (TS_F16, torch.float16),
             (TS_BF16, torch.bfloat16), (TS_I64, torch.int64), (TS_I32, torch.int32),
             (TS_U8, torch.uint8), (TS_BOOL, torch.uint8)]  # bool leaves as kDLUInt 8 (0.6)
    for dt, tdt in kinds:
        t = H.h_arange(3, 4, dt)
        x = from_dlpack(to_capsule(t))
        check(x.dtype == tdt, f"torch dtype {x.dtype} for Tessera dtype {dt}")
        check(x.data_ptr() == H.h_data_ptr(t), f"torch sees Tessera's pointer ({tdt})")
        want = torch.arange(12).reshape(3, 4)
        if dt == TS_BOOL:
            want = (want != 0).to(torch.uint8)
        check(torch.equal(x.to(torch.float64), want.to(torch.float64)), f"torch values ({tdt})")
        H.h_release(t)
        del x
    check(H.h_live() == live0, "every torch tensor let go of Tessera's memory")

    t = H.h_arange(4, 6, TS_F32)
    tt = H.h_transpose(t)
    sl = H.h_slice(tt, 0, 1, 6, 2)  # [3, 4], strides [2, 6], offset 1
    x = from_dlpack(to_capsule(t))
    xs = from_dlpack(to_capsule(sl))
    check(xs.stride() == (2, 6) and xs.data_ptr() == x.data_ptr() + 4,
          f"torch view: strides {xs.stride()}, pointer +{xs.data_ptr() - x.data_ptr()}")
    check(torch.equal(xs, x.t()[1::2]), "torch view values")
    xs.mul_(10)  # written by torch in Tessera's memory
    check(H.h_sum(t) == sum(range(24)) + 9 * sum(x.t()[1::2].flatten().tolist()) / 10,
          "a torch write is seen by Tessera")
    for h in (t, tt, sl):
        H.h_release(h)
    del x, xs
    check(H.h_live() == live0, "torch let go")
    print("torch: Tessera -> PyTorch shares the pointer for every dtype (bool as uint8), views "
          "keep strides and offsets, writes seen, deleters run when the torch tensors die")

    # PyTorch -> Tessera
    base = torch.arange(30, dtype=torch.float32).reshape(5, 6)
    view = base.t()[2:5]  # [3, 5], strides (1, 6), offset 2
    n0 = base._use_count() + view._use_count()  # a torch capsule holds its tensor
    u = import_capsule(to_dlpack(base))
    v = import_capsule(to_dlpack(view))
    check(u and v, f"ts_from_dlpack of torch capsules: {H.h_error_message()}")
    check(H.h_data_ptr(u) == base.data_ptr() and H.h_data_ptr(v) == view.data_ptr(),
          "Tessera sees torch's pointers")
    check(H.h_stride(v, 0) == 1 and H.h_stride(v, 1) == 6, "the torch view's strides")
    check(H.h_sum(v) == view.sum().item(), "the torch view's values")
    check(base._use_count() + view._use_count() == n0 + 2, "Tessera holds torch's tensors")
    check(H.h_fill(v, 0.5) == 0 and base[0, 2].item() == 0.5, "a Tessera write is seen by torch")
    H.h_release(u)
    check(base._use_count() + view._use_count() == n0 + 1, "one deleter ran")
    H.h_release(v)
    check(base._use_count() + view._use_count() == n0, "both deleters ran")
    for tdt, ts_dt in ((torch.bool, TS_BOOL), (torch.bfloat16, TS_BF16), (torch.float16, TS_F16),
                       (torch.int32, TS_I32), (torch.uint8, TS_U8)):
        src = (torch.arange(6) % 3).to(tdt)
        w = import_capsule(to_dlpack(src))
        check(w and H.h_dtype(w) == ts_dt, f"torch {tdt} -> Tessera dtype {H.h_dtype(w)}")
        check(H.h_sum(w) == src.to(torch.float64).sum().item(), f"torch {tdt} values")
        H.h_release(w)
    # refused: int8 (no Tessera dtype); the capsule stays torch's
    cap = to_dlpack(torch.zeros(3, dtype=torch.int8))
    check(not import_capsule(cap), "int8 is refused")
    msg = error_message()
    check(msg.startswith("from_dlpack: unsupported DLPack dtype int8"), msg)
    del cap
    print("torch: PyTorch -> Tessera shares the pointer (views, bool as kDLBool, bfloat16), "
          "writes seen, torch's deleter runs at ts_release; int8 is refused, the capsule stays "
          "torch's")


def main():
    global H
    build = sys.argv[1] if len(sys.argv) > 1 else "build"
    try:
        import numpy as np
    except ImportError:
        np = None
    try:
        import torch
    except ImportError:
        torch = None
    if np is None and torch is None:
        print(f"SKIP: {sys.executable} has neither numpy nor torch "
              "(try /opt/torch2/bin/torch-python)")
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        H = build_helper(build, tmp)
    if np is not None:
        check_numpy(np)
    else:
        print("SKIP: numpy is not importable: the NumPy checks did not run")
    if torch is not None:
        check_torch(torch)
    else:
        print("SKIP: torch is not importable: the PyTorch checks did not run")
    check(H.h_error() == 0, f"no Tessera error left: {H.h_error_message()}")
    print(f"check_dlpack_torch: {checks} checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
