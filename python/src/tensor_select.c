/* tensor_select.c — bounds and selection as Tensor methods and tessera.* functions: clamp / clip
 * (numbers or tensors as bounds), clamp_min / clamp_max, where (three arguments, or one:
 * nonzero's tuple), masked_fill and their in-place forms. Every op is one call of the C API. */
#include "tensor_impl.h"

#include <math.h>

#define T TSP_T

/* clamp with a Tensor bound: ts_clamp_tensor (a number beside it as a 0-dim tensor, None: none) */
static PyObject *clamp_tensors(PyObject *self, ts_tensor *t, PyObject *lo, PyObject *hi,
                               const char *fn, bool in_place) {
    PyObject *o[2] = {lo, hi};
    static const char *const names[2] = {"min", "max"};
    ts_tensor *b[2] = {NULL, NULL}, *made[2] = {NULL, NULL}, *res = NULL;
    double v[2];
    for (int i = 0; i < 2; i++) {
        if (!o[i] || o[i] == Py_None || (b[i] = tsp_tensor_of(o[i]))) continue;
        if (tsp_double_arg(o[i], 0, &v[i], fn, names[i]) < 0) return NULL;
    }
    if (tsp_enter()) return NULL;
    for (int i = 0; i < 2; i++)
        if (o[i] && o[i] != Py_None && !b[i]) b[i] = made[i] = tsp_scalar_beside(t, o[i], v[i]);
    TSP_NOGIL(res = in_place ? ts_clamp_tensor_(t, b[0], b[1]) : ts_clamp_tensor(t, b[0], b[1]));
    tsp_drop(made[0]);
    tsp_drop(made[1]);
    return tsp_result(self, res, in_place);
}

/* clamp(input, min=None, max=None) and clamp_ (NAN: no bound, the C API's convention) */
static PyObject *clamp(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kw,
                       bool in_place) {
    static const char *const mnames[] = {"min", "max"};
    static const char *const fnames[] = {"input", "min", "max"};
    PyObject *a[3] = {0};
    const char *fn = in_place ? "clamp_" : "clamp";
    int r = self ? tsp_parse(args, nargs, kw, fn, mnames, 2, 0, a + 1)
                 : tsp_parse(args, nargs, kw, fn, fnames, 3, 1, a);
    if (r < 0) return NULL;
    ts_tensor *t = self ? T(self) : tsp_tensor_arg(a[0], fn, "input"), *res;
    if (t && ((a[1] && tsp_tensor_of(a[1])) || (a[2] && tsp_tensor_of(a[2]))))
        return clamp_tensors(self, t, a[1], a[2], fn, in_place);
    double lo, hi;
    if (!t || tsp_double_arg(a[1], NAN, &lo, fn, "min") < 0 ||
        tsp_double_arg(a[2], NAN, &hi, fn, "max") < 0 || tsp_enter())
        return NULL;
    TSP_NOGIL(res = in_place ? ts_clamp_(t, lo, hi) : ts_clamp(t, lo, hi));
    return tsp_result(self, res, in_place);
}
static PyObject *m_clamp(PyObject *self, PyObject *const *args, Py_ssize_t n, PyObject *kw) {
    return clamp(self, args, n, kw, false);
}
static PyObject *m_clamp_(PyObject *self, PyObject *const *args, Py_ssize_t n, PyObject *kw) {
    return clamp(self, args, n, kw, true);
}
/* clamp_min(min) / clamp_max(max): one bound */
static PyObject *one_bound(PyObject *self, PyObject *bound, const char *fn,
                           ts_tensor *(*f)(ts_tensor *, double)) {
    double v;
    ts_tensor *r;
    if (tsp_tensor_of(bound))
        return clamp_tensors(self, T(self), f == ts_clamp_min ? bound : NULL,
                             f == ts_clamp_min ? NULL : bound, fn, false);
    if (tsp_double_arg(bound, 0, &v, fn, fn + 6) < 0 || tsp_enter()) return NULL;
    TSP_NOGIL(r = f(T(self), v));
    return tsp_wrap(r);
}
static PyObject *m_clamp_min(PyObject *self, PyObject *v) {
    return one_bound(self, v, "clamp_min", ts_clamp_min);
}
static PyObject *m_clamp_max(PyObject *self, PyObject *v) {
    return one_bound(self, v, "clamp_max", ts_clamp_max);
}
static PyObject *f_clamp(PyObject *mod, PyObject *const *args, Py_ssize_t n, PyObject *kw) {
    (void)mod;
    return clamp(NULL, args, n, kw, false);
}

/* where(condition, input, other): numbers allowed for input, other or both */
static PyObject *where3(PyObject *cond, PyObject *x, PyObject *y) {
    ts_tensor *c = tsp_tensor_arg(cond, "where", "condition"), *tx = tsp_tensor_of(x),
              *ty = tsp_tensor_of(y), *r = NULL, *sx = NULL, *sy = NULL;
    double vx, vy;
    if (!c) return NULL;
    if ((!tx && tsp_double_arg(x, 0, &vx, "where", "input") < 0) ||
        (!ty && tsp_double_arg(y, 0, &vy, "where", "other") < 0) || tsp_enter())
        return NULL;
    /* two numbers (torch.where(c, 1, 0)): 0-dim tensors on the condition's device, bool for
     * bools, int64 for ints, the default float dtype for floats; ts_where promotes the pair as
     * PyTorch's result_type of two numbers does */
    const ts_dtype nx = PyBool_Check(x) ? TS_BOOL : PyFloat_Check(x) ? tsp_default_float : TS_I64;
    const ts_dtype ny = PyBool_Check(y) ? TS_BOOL : PyFloat_Check(y) ? tsp_default_float : TS_I64;
    Py_BEGIN_ALLOW_THREADS;
    if (!tx && !ty) {
        tx = sx = ts_scalar(vx, (ts_opts){.dtype = nx, .device = ts_device_of(c)});
        ty = sy = tx ? ts_scalar(vy, (ts_opts){.dtype = ny, .device = ts_device_of(c)}) : NULL;
    }
    if (!tx) tx = sx = tsp_scalar_beside(ty, x, vx);
    if (!ty) ty = sy = tsp_scalar_beside(tx, y, vy);
    if (tx && ty) r = ts_where(c, tx, ty);
    tsp_drop(sx);
    tsp_drop(sy);
    Py_END_ALLOW_THREADS;
    return tsp_wrap(r);
}
static PyObject *f_where(PyObject *mod, PyObject *const *args, Py_ssize_t nargs, PyObject *kw) {
    static const char *const names[] = {"condition", "input", "other"};
    PyObject *a[3];
    if (nargs == 1 && (!kw || PyTuple_GET_SIZE(kw) == 0)) {
        /* where(condition): PyTorch's nonzero(condition, as_tuple=True) */
        if (!tsp_tensor_arg(args[0], "where", "condition")) return NULL;
        PyObject *nz = PyObject_GetAttrString(mod, "nonzero");
        PyObject *pos = nz ? PyTuple_Pack(1, args[0]) : NULL;
        PyObject *opt = pos ? Py_BuildValue("{s:O}", "as_tuple", Py_True) : NULL;
        PyObject *r = opt ? PyObject_Call(nz, pos, opt) : NULL;
        Py_XDECREF(nz);
        Py_XDECREF(pos);
        Py_XDECREF(opt);
        return r;
    }
    if (tsp_parse(args, nargs, kw, "where", names, 3, 3, a) < 0) return NULL;
    return where3(a[0], a[1], a[2]);
}
static PyObject *m_where(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kw) {
    static const char *const names[] = {"condition", "other"};
    PyObject *a[2];
    if (tsp_parse(args, nargs, kw, "where", names, 2, 2, a) < 0) return NULL;
    return where3(a[0], self, a[1]);
}

static PyObject *masked_fill(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kw,
                             bool in_place) {
    static const char *const names[] = {"mask", "value"};
    const char *fn = in_place ? "masked_fill_" : "masked_fill";
    PyObject *a[2];
    ts_tensor *mask, *r;
    double v;
    if (tsp_parse(args, nargs, kw, fn, names, 2, 2, a) < 0 ||
        !(mask = tsp_tensor_arg(a[0], fn, "mask")))
        return NULL;
    ts_tensor *vt = tsp_tensor_of(a[1]);
    if (vt && ts_requires_grad(vt)) { /* differentiable in value: where(mask, value, self) */
        if (ts_ndim(vt) != 0)
            return PyErr_Format(PyExc_TypeError,
                                "%s(): only supports a 0-dimensional value tensor, but got a "
                                "tensor with %d dimension(s)",
                                fn, ts_ndim(vt));
        if (tsp_enter()) return NULL;
        Py_BEGIN_ALLOW_THREADS;
        ts_tensor *w = ts_where(mask, vt, T(self)), *c = NULL;
        if (w && ts_dtype_of(w) != ts_dtype_of(T(self))) c = ts_to_dtype(w, ts_dtype_of(T(self)));
        r = c ? c : w;
        if (c) tsp_drop(w);
        if (r && in_place) {
            ts_tensor *res = ts_copy_(T(self), r);
            tsp_drop(r);
            r = res;
        }
        Py_END_ALLOW_THREADS;
        return tsp_result(self, r, in_place);
    }
    if (tsp_scalar_arg(a[1], 0, &v, fn, "value") < 0 || tsp_enter()) return NULL;
    TSP_NOGIL(r = in_place ? ts_masked_fill_(T(self), mask, v) : ts_masked_fill(T(self), mask, v));
    return tsp_result(self, r, in_place);
}
static PyObject *m_masked_fill(PyObject *self, PyObject *const *a, Py_ssize_t n, PyObject *kw) {
    return masked_fill(self, a, n, kw, false);
}
static PyObject *m_masked_fill_(PyObject *self, PyObject *const *a, Py_ssize_t n, PyObject *kw) {
    return masked_fill(self, a, n, kw, true);
}

PyMethodDef tsp_tensor_select_methods[] = {
    {"clamp", FN(m_clamp), FAST, "clamp(min=None, max=None)"},
    {"clip", FN(m_clamp), FAST, "clip(min=None, max=None)"},
    {"clamp_", FN(m_clamp_), FAST, "clamp_(min=None, max=None)"},
    {"clamp_min", m_clamp_min, METH_O, "clamp_min(min)"},
    {"clamp_max", m_clamp_max, METH_O, "clamp_max(max)"},
    {"where", FN(m_where), FAST, "where(condition, other)"},
    {"masked_fill", FN(m_masked_fill), FAST, "masked_fill(mask, value)"},
    {"masked_fill_", FN(m_masked_fill_), FAST, "masked_fill_(mask, value)"},
    {NULL, NULL, 0, NULL},
};
PyMethodDef tsp_tensor_select_functions[] = {
    {"clamp", FN(f_clamp), FAST, NULL},
    {"clip", FN(f_clamp), FAST, NULL},
    {"where", FN(f_where), FAST, "where(condition, input, other) / where(condition)"},
    {NULL, NULL, 0, NULL},
};
