/* tensor_args.c — turning Python arguments into C values (shapes, dims, ints, numbers, factory
 * options) with TypeErrors that name the function and the argument; a fastcall parser that does
 * not allocate, for the hot methods. */
#include "tensor_impl.h"

#include <string.h>

/* index of keyword k among names, or -1 */
static int keyword_index(PyObject *k, const char *const *names, int nnames) {
    for (int i = 0; i < nnames; i++)
        if (PyUnicode_CompareWithASCIIString(k, names[i]) == 0) return i;
    return -1;
}

/* PyTorch's NumPy spellings (its argument parser's numpy_compatibility_arg_names): axis= for a
 * parameter named dim, keepdims= for keepdim */
static int numpy_alias_index(PyObject *key, const char *const *names, int nnames) {
    static const char *const alias[][2] = {{"axis", "dim"}, {"keepdims", "keepdim"}};
    for (int a = 0; a < 2; a++)
        if (PyUnicode_CompareWithASCIIString(key, alias[a][0]) == 0)
            for (int i = 0; i < nnames; i++)
                if (!strcmp(names[i], alias[a][1])) return i;
    return -1;
}

int tsp_parse(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames, const char *fn,
              const char *const *names, int nnames, int required, PyObject **out) {
    if (nargs > nnames) {
        PyErr_Format(PyExc_TypeError, "%s() takes at most %d positional arguments (%zd given)", fn,
                     nnames, nargs);
        return -1;
    }
    for (int i = 0; i < nnames; i++) out[i] = i < nargs ? args[i] : NULL;
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    for (Py_ssize_t k = 0; k < nkw; k++) {
        PyObject *key = PyTuple_GET_ITEM(kwnames, k);
        int i = keyword_index(key, names, nnames);
        if (i < 0) i = numpy_alias_index(key, names, nnames);
        if (i < 0) {
            PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument '%U'", fn, key);
            return -1;
        }
        if (out[i]) {
            PyErr_Format(PyExc_TypeError, "%s() got multiple values for argument '%s'", fn,
                         names[i]);
            return -1;
        }
        out[i] = args[nargs + k];
    }
    for (int i = 0; i < required; i++)
        if (!out[i]) {
            PyErr_Format(PyExc_TypeError, "%s() missing required argument '%s' (pos %d)", fn,
                         names[i], i + 1);
            return -1;
        }
    return 0;
}

int tsp_parse_input(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                    const char *fn, const char *const *names, int nnames, int required,
                    PyObject **out) {
    if (self) {
        out[0] = self;
        return tsp_parse(args, nargs, kwnames, fn, names + 1, nnames - 1, required, out + 1);
    }
    if (tsp_parse(args, nargs, kwnames, fn, names, nnames, required + 1, out) < 0) return -1;
    return tsp_tensor_arg(out[0], fn, "input") ? 0 : -1;
}

PyObject *tsp_tuple_of(ts_tensor **pieces, int n) {
    PyObject *tup = PyTuple_New(n < 0 ? 0 : n);
    int i = 0;
    for (; tup && i < n; i++) {
        PyObject *o = tsp_wrap(pieces[i]);
        if (!o) break;
        PyTuple_SET_ITEM(tup, i, o);
    }
    if (tup && i == n) return tup;
    for (int k = i + 1; k < n; k++) tsp_drop(pieces[k]); /* the ones not wrapped */
    Py_XDECREF(tup);
    return NULL;
}

int tsp_number(PyObject *o, double *v) {
    if (PyFloat_CheckExact(o)) return *v = PyFloat_AS_DOUBLE(o), 1;
    if (PyLong_Check(o)) { /* bool too */
        *v = PyLong_AsDouble(o);
        return *v == -1.0 && PyErr_Occurred() ? -1 : 1;
    }
    if (PyFloat_Check(o)) return *v = PyFloat_AS_DOUBLE(o), 1;
    if (tsp_tensor_of(o) || PyUnicode_Check(o)) return 0;
    PyNumberMethods *nb = Py_TYPE(o)->tp_as_number;
    if (!nb || (!nb->nb_float && !nb->nb_index)) return 0;
    *v = PyFloat_AsDouble(o); /* numpy scalars and the like */
    return *v == -1.0 && PyErr_Occurred() ? -1 : 1;
}

int tsp_int_arg(PyObject *o, int64_t *out, const char *fn, const char *arg) {
    if (!o || !PyIndex_Check(o) || tsp_tensor_of(o) || PyBool_Check(o)) {
        PyErr_Format(PyExc_TypeError, "%s(): argument '%s' must be int, not %.100s", fn, arg,
                     o ? Py_TYPE(o)->tp_name : "nothing");
        return -1;
    }
    long long v = PyLong_AsLongLong(o);
    if (v == -1 && PyErr_Occurred()) {
        if (!PyLong_Check(o)) return -1;
        PyErr_Format(PyExc_OverflowError, "%s(): argument '%s' out of range", fn, arg);
        return -1;
    }
    *out = v;
    return 0;
}

int tsp_bool_arg(PyObject *o, bool dflt, bool *out, const char *fn, const char *arg) {
    if (!o || o == Py_None) return *out = dflt, 0;
    if (PyBool_Check(o)) return *out = o == Py_True, 0;
    if (PyLong_Check(o)) return *out = PyLong_AsLong(o) != 0, 0;
    PyErr_Format(PyExc_TypeError, "%s(): argument '%s' must be bool, not %.100s", fn, arg,
                 Py_TYPE(o)->tp_name);
    return -1;
}

int tsp_double_arg(PyObject *o, double dflt, double *out, const char *fn, const char *arg) {
    if (!o || o == Py_None) return *out = dflt, 0;
    int r = tsp_number(o, out);
    if (r > 0) return 0;
    if (r == 0)
        PyErr_Format(PyExc_TypeError, "%s(): argument '%s' must be a number, not %.100s", fn, arg,
                     Py_TYPE(o)->tp_name);
    return -1;
}

int tsp_scalar_arg(PyObject *o, double dflt, double *out, const char *fn, const char *arg) {
    ts_tensor *t = o ? tsp_tensor_of(o) : NULL;
    if (!t) return tsp_double_arg(o, dflt, out, fn, arg);
    if (ts_ndim(t) != 0) {
        PyErr_Format(PyExc_TypeError,
                     "%s(): argument '%s' must be a number or a 0-dim Tensor, not a %d-dim Tensor",
                     fn, arg, ts_ndim(t));
        return -1;
    }
    double v;
    Py_BEGIN_ALLOW_THREADS;
    v = ts_item(t);
    Py_END_ALLOW_THREADS;
    if (tsp_check()) return -1;
    return *out = v, 0;
}

int tsp_int_or_tensor_arg(PyObject *o, int64_t *out, const char *fn, const char *arg) {
    ts_tensor *t = o ? tsp_tensor_of(o) : NULL;
    if (!t) return tsp_int_arg(o, out, fn, arg);
    ts_dtype dt = ts_dtype_of(t);
    if (ts_ndim(t) != 0 || ts_dtype_is_floating(dt) || dt == TS_BOOL) {
        PyErr_Format(PyExc_TypeError,
                     "%s(): argument '%s' must be an int or a 0-dim integral Tensor, not a "
                     "%d-dim %s Tensor",
                     fn, arg, ts_ndim(t), ts_dtype_name(dt));
        return -1;
    }
    double v;
    Py_BEGIN_ALLOW_THREADS;
    v = ts_item(t);
    Py_END_ALLOW_THREADS;
    if (tsp_check()) return -1;
    return *out = (int64_t)v, 0;
}

/* a sequence of ints (list, tuple, Size) into dims[] (up to max); the count, or -1 */
static int int_sequence(PyObject *o, int64_t *dims, int max, const char *fn, const char *arg) {
    PyObject *seq = PySequence_Fast(o, "");
    if (!seq) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "%s(): argument '%s' must be a sequence of ints, not %.100s",
                     fn, arg, Py_TYPE(o)->tp_name);
        return -1;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (n > max) {
        Py_DECREF(seq);
        PyErr_Format(PyExc_ValueError, "%s(): argument '%s' has %zd dims, at most %d are supported",
                     fn, arg, n, max);
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++)
        if (tsp_int_arg(PySequence_Fast_GET_ITEM(seq, i), &dims[i], fn, arg) < 0) {
            Py_DECREF(seq);
            return -1;
        }
    Py_DECREF(seq);
    return (int)n;
}

int tsp_shape_arg(PyObject *o, ts_shape *out, const char *fn, const char *arg) {
    ts_shape s = {0};
    if (PyIndex_Check(o) && !tsp_tensor_of(o)) {
        s.ndim = 1;
        if (tsp_int_arg(o, &s.dims[0], fn, arg) < 0) return -1;
    } else if ((s.ndim = int_sequence(o, s.dims, TS_MAX_DIMS, fn, arg)) < 0)
        return -1;
    *out = s;
    return 0;
}

int tsp_shape_args(PyObject *args, Py_ssize_t first, ts_shape *out, const char *fn) {
    Py_ssize_t n = PyTuple_GET_SIZE(args) - first;
    if (n == 1 && !PyIndex_Check(PyTuple_GET_ITEM(args, first)))
        return tsp_shape_arg(PyTuple_GET_ITEM(args, first), out, fn, "size");
    if (n > TS_MAX_DIMS) {
        PyErr_Format(PyExc_ValueError, "%s(): %zd dims, at most %d are supported", fn, n,
                     TS_MAX_DIMS);
        return -1;
    }
    ts_shape s = {.ndim = (int)n};
    for (Py_ssize_t i = 0; i < n; i++)
        if (tsp_int_arg(PyTuple_GET_ITEM(args, first + i), &s.dims[i], fn, "size") < 0) return -1;
    *out = s;
    return 0;
}

int tsp_dims_arg(PyObject *o, ts_dims *out, const char *fn, const char *arg) {
    int64_t d[TS_MAX_DIMS];
    int n;
    if (PyIndex_Check(o) && !tsp_tensor_of(o)) {
        n = 1;
        if (tsp_int_arg(o, &d[0], fn, arg) < 0) return -1;
    } else if ((n = int_sequence(o, d, TS_MAX_DIMS, fn, arg)) < 0)
        return -1;
    out->n = n;
    for (int i = 0; i < n; i++) out->d[i] = (int)d[i];
    return 0;
}

int tsp_opts_args(PyObject *dtype, PyObject *device, PyObject *requires_grad, PyObject *pin,
                  ts_opts *o, const char *fn) {
    if (tsp_dtype_arg(dtype, &o->dtype, fn, "dtype") < 0 ||
        tsp_device_arg(device, &o->device, fn, "device") < 0 ||
        tsp_bool_arg(requires_grad, false, &o->requires_grad, fn, "requires_grad") < 0 ||
        tsp_bool_arg(pin, false, &o->pin_memory, fn, "pin_memory") < 0)
        return -1;
    return 0;
}

PyObject *tsp_results(const char *op, ts_tensor *const *r, int n) {
    bool ok = ts_error() == TS_OK && n >= 1 && n <= 8;
    for (int i = 0; i < n; i++) ok &= r[i] != NULL;
    if (!ok) {
        for (int i = 0; i < n; i++) tsp_drop(r[i]);
        if (ts_error() == TS_OK) {
            PyErr_Format(PyExc_RuntimeError, "%s: an op returned no result", op);
            return NULL;
        }
        return tsp_raise_pending();
    }
    ts_tensor *p[8];
    memcpy(p, r, (size_t)n * sizeof *p);
    return n == 1 ? tsp_wrap(p[0]) : tsp_tuple_of(p, n);
}

int tsp_str_arg(PyObject *o, const char *dflt, const char **out, const char *fn, const char *arg) {
    *out = dflt;
    if (!o || o == Py_None) return 0;
    if (!PyUnicode_Check(o)) {
        PyErr_Format(PyExc_TypeError, "%s(): argument '%s' must be str, not %.100s", fn, arg,
                     Py_TYPE(o)->tp_name);
        return -1;
    }
    *out = PyUnicode_AsUTF8(o);
    return *out ? 0 : -1;
}
