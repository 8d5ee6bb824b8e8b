/* tensor_factory.c — making tensors from Python: tessera.tensor (its data: tensor_data.c), zeros /
 * ones / empty / full / rand / randn / randint / arange / linspace / eye and their *_like forms,
 * manual_seed. Every factory takes dtype=, device=, requires_grad= (and pin_memory=). */
#include "tensor_impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* torch.set_default_dtype's dtype: what factories make when no dtype= is given */
ts_dtype tsp_default_float = TS_F32;

/* tensor(data, dtype=None, device=None, requires_grad=False, pin_memory=False) */
static PyObject *f_tensor(PyObject *mod, PyObject *const *args, Py_ssize_t nargs, PyObject *kw) {
    (void)mod;
    static const char *const names[] = {"data", "dtype", "device", "requires_grad", "pin_memory"};
    PyObject *a[5];
    ts_opts o = {0};
    if (tsp_parse(args, nargs, kw, "tensor", names, 5, 1, a) < 0 ||
        tsp_opts_args(a[1], a[2], a[3], a[4], &o, "tensor") < 0)
        return NULL;
    ts_dtype dt = o.dtype;
    o.dtype = TS_DTYPE_DEFAULT;
    return tsp_wrap(tsp_tensor_from_data(a[0], dt, o));
}

/* ------------------------------------------------------------------ shape factories */
typedef ts_tensor *(*shape_factory)(ts_shape, ts_opts);

static ts_tensor *full_double(ts_shape s, double v, ts_opts o) {
    ts_tensor *t;
    TSP_NOGIL(t = ts_full(s, v, o));
    return t;
}

/* full / full_like / new_full: ts_full takes a double, which holds integers exactly up to 2^53;
 * a Python int past that, for an integer dtype, fills from a one-element tensor of its exact
 * value instead (torch.full((2,), 2**63 + 5, dtype=torch.uint64)). */
static ts_tensor *full_exact(ts_shape s, PyObject *value, double v, ts_opts o) {
    const ts_dtype dt = o.dtype;
    if (!value || !PyLong_Check(value) || PyBool_Check(value) || dt == TS_DTYPE_DEFAULT ||
        ts_dtype_is_floating(dt) || dt == TS_BOOL || fabs(v) < 9007199254740992.0)
        return full_double(s, v, o);
    int overflow;
    long long x = PyLong_AsLongLongAndOverflow(value, &overflow);
    ts_dtype src = TS_I64;
    if (overflow > 0) x = (long long)PyLong_AsUnsignedLongLong(value), src = TS_U64;
    if (PyErr_Occurred() || overflow < 0) {
        PyErr_Clear();
        return full_double(s, v, o); /* past uint64 too: the double's conversion, as before */
    }
    ts_tensor *t = NULL;
    Py_BEGIN_ALLOW_THREADS;
    ts_scope_begin();
    ts_tensor *one = ts_from_data(TS_SHAPE(), src, &x, o);
    t = ts_keep(ts_contiguous(ts_expand(one, s)));
    ts_scope_end();
    Py_END_ALLOW_THREADS;
    return t;
}

/* out= of a factory: the tensor (borrowed) whose dtype and device the result takes unless given,
 * NULL when absent or None; -1 with TypeError when not a Tensor */
static int out_arg(PyObject *out, ts_tensor **ot, ts_opts *o, const char *fn) {
    *ot = NULL;
    if (!out || out == Py_None) return 0;
    if (!(*ot = tsp_tensor_arg(out, fn, "out"))) return -1;
    if (!o->dtype) o->dtype = ts_dtype_of(*ot);
    if (!o->device.type) o->device = ts_device_of(*ot);
    return 0;
}

/* t (a new result) written into out (of t's shape: Tessera does not resize an out= tensor) and
 * out returned; t alone when there is no out */
static PyObject *into_out(PyObject *out, ts_tensor *ot, ts_tensor *t, const char *fn) {
    if (!ot || !t) return tsp_wrap(t);
    ts_shape a = ts_shape_of(ot), b = ts_shape_of(t);
    bool same = a.ndim == b.ndim;
    for (int d = 0; same && d < a.ndim; d++) same = a.dims[d] == b.dims[d];
    if (!same) {
        tsp_drop(t);
        PyObject *sa = tsp_size_obj(a), *sb = tsp_size_obj(b);
        if (sa && sb)
            PyErr_Format(PyExc_RuntimeError,
                         "%s(): out= has shape %R but the result has shape %R; Tessera does not "
                         "resize out= tensors",
                         fn, sa, sb);
        Py_XDECREF(sa);
        Py_XDECREF(sb);
        return NULL;
    }
    ts_tensor *r;
    TSP_NOGIL(r = ts_copy_(ot, t));
    tsp_drop(t);
    return tsp_inplace_result(out, r);
}

/* f(*size, dtype=, device=, requires_grad=, pin_memory=, out=None, layout=None), the size also
 * as one sequence or size=; full(size, fill_value, ...) with either also by keyword. Without
 * dtype=: the default float (set_default_dtype), and for full a bool or int fill's dtype. */
static PyObject *sized(shape_factory f, const char *fn, PyObject *args, PyObject *kwargs,
                       double *fill_value) {
    static char *kw[] = {"size",       "fill_value", "dtype",  "device",    "requires_grad",
                         "pin_memory", "out",        "layout", "generator", NULL};
    PyObject *a[9] = {0};
    PyObject *empty = PyTuple_New(0);
    if (!empty) return NULL;
    char format[32];
    PyOS_snprintf(format, sizeof format, "|$OOOOOOOOO:%s", fn);
    int ok = PyArg_ParseTupleAndKeywords(empty, kwargs, format, kw, &a[0], &a[1], &a[2], &a[3],
                                         &a[4], &a[5], &a[6], &a[7], &a[8]);
    Py_DECREF(empty);
    if (!ok) return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(args);
    if (!fill_value && a[1]) {
        PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument 'fill_value'", fn);
        return NULL;
    }
    if (fill_value) { /* full(size, fill_value): at most these two by position */
        if (n > 2) {
            PyErr_Format(PyExc_TypeError, "full() takes at most 2 positional arguments (%zd given)",
                         n);
            return NULL;
        }
        for (Py_ssize_t i = 0; i < n; i++) {
            if (a[i]) {
                PyErr_Format(PyExc_TypeError, "full() got multiple values for argument '%s'",
                             kw[i]);
                return NULL;
            }
            a[i] = PyTuple_GET_ITEM(args, i);
        }
        if (!a[0] || !a[1]) {
            PyErr_Format(PyExc_TypeError, "full() missing required argument '%s'",
                         a[0] ? "fill_value" : "size");
            return NULL;
        }
    } else if (a[0] && n) {
        PyErr_Format(PyExc_TypeError, "%s() got multiple values for argument 'size'", fn);
        return NULL;
    }
    ts_opts o = {0};
    ts_shape s;
    ts_tensor *ot;
    if ((a[0] ? tsp_shape_arg(a[0], &s, fn, "size") : tsp_shape_args(args, 0, &s, fn)) < 0 ||
        tsp_opts_args(a[2], a[3], a[4], a[5], &o, fn) < 0 || out_arg(a[6], &ot, &o, fn) < 0 ||
        tsp_layout_arg(a[7], fn) < 0)
        return NULL;
    PyObject *fill = NULL; /* a 0-dim Tensor fill as its Python number, as torch.full takes it */
    if (fill_value && tsp_tensor_of(a[1])) {
        if (ts_ndim(tsp_tensor_of(a[1])) != 0) {
            PyErr_Format(PyExc_TypeError,
                         "full(): argument 'fill_value' must be a number or a 0-dim Tensor, not "
                         "a %d-dim Tensor",
                         ts_ndim(tsp_tensor_of(a[1])));
            return NULL;
        }
        if (!(fill = PyObject_CallMethod(a[1], "item", NULL))) return NULL;
        a[1] = fill;
    }
    if ((fill_value && tsp_double_arg(a[1], 0, fill_value, fn, "fill_value") < 0) || tsp_enter()) {
        Py_XDECREF(fill);
        return NULL;
    }
    if (!o.dtype)
        o.dtype = fill_value && PyBool_Check(a[1])   ? TS_BOOL
                  : fill_value && PyLong_Check(a[1]) ? TS_I64 /* torch's full((2,), 3): int64 */
                                                     : tsp_default_float;
    ts_tensor *t;
    tsp_generator_scope gs;
    if (tsp_generator_begin(a[8], fn, &gs) < 0) {
        Py_XDECREF(fill);
        return NULL;
    }
    if (fill_value)
        t = full_exact(s, a[1], *fill_value, o);
    else
        TSP_NOGIL(t = f(s, o););
    Py_XDECREF(fill);
    if (tsp_generator_end(&gs) < 0) {
        tsp_drop(t);
        return NULL;
    }
    return into_out(a[6], ot, t, fn);
}

#define SIZED(name, f)                                                                             \
    static PyObject *f_##name(PyObject *mod, PyObject *args, PyObject *kwargs) {                   \
        (void)mod;                                                                                 \
        return sized(f, #name, args, kwargs, NULL);                                                \
    }
SIZED(zeros, ts_zeros)
SIZED(ones, ts_ones)
SIZED(empty, ts_empty)
SIZED(rand, ts_rand)
SIZED(randn, ts_randn)

static PyObject *f_full(PyObject *mod, PyObject *args, PyObject *kwargs) {
    (void)mod;
    double v;
    return sized(NULL, "full", args, kwargs, &v);
}

/* randint(high, size) / randint(low, high, size), dtype=int64 unless given */
static PyObject *f_randint(PyObject *mod, PyObject *const *args, Py_ssize_t nargs, PyObject *kw) {
    (void)mod;
    static const char *const names[] = {"low",    "high",          "size",      "dtype",
                                        "device", "requires_grad", "generator", "pin_memory"};
    PyObject *a[8];
    if (tsp_parse(args, nargs, kw, "randint", names, 8, 0, a) < 0) return NULL;
    if (!a[2]) /* randint(high, size) */
        a[2] = a[1], a[1] = a[0], a[0] = NULL;
    else if (!a[1]) /* randint(high, size=...) */
        a[1] = a[0], a[0] = NULL;
    if (!a[1] || !a[2]) {
        PyErr_Format(PyExc_TypeError, "randint() missing required argument '%s'",
                     a[1] ? "size" : "high");
        return NULL;
    }
    int64_t low = 0, high;
    ts_shape s;
    ts_opts o = {0};
    if ((a[0] && tsp_int_arg(a[0], &low, "randint", "low") < 0) ||
        tsp_int_arg(a[1], &high, "randint", "high") < 0 ||
        tsp_shape_arg(a[2], &s, "randint", "size") < 0 ||
        tsp_opts_args(a[3], a[4], a[5], a[7], &o, "randint") < 0 || tsp_enter())
        return NULL;
    ts_tensor *t;
    tsp_generator_scope gs;
    if (tsp_generator_begin(a[6], "randint", &gs) < 0) return NULL;
    TSP_NOGIL(t = ts_randint(low, high, s, o););
    return tsp_generator_finish(&gs, tsp_wrap(t));
}

/* arange(end) / arange(start, end, step=1): int64 when all are ints, else the default float */
static PyObject *f_arange(PyObject *mod, PyObject *const *args, Py_ssize_t nargs, PyObject *kw) {
    (void)mod;
    static const char *const names[] = {"start",  "end",    "step",          "dtype",
                                        "device", "layout", "requires_grad", "out"};
    PyObject *a[8];
    if (tsp_parse(args, nargs, kw, "arange", names, 8, 1, a) < 0) return NULL;
    if (!a[1] || a[1] == Py_None) a[1] = a[0], a[0] = NULL; /* arange(end) */
    double start, end, step;
    ts_opts o = {0};
    if (tsp_double_arg(a[0], 0, &start, "arange", "start") < 0 ||
        tsp_double_arg(a[1], 0, &end, "arange", "end") < 0 ||
        tsp_double_arg(a[2], 1, &step, "arange", "step") < 0 ||
        tsp_opts_args(a[3], a[4], a[6], NULL, &o, "arange") < 0 ||
        tsp_layout_arg(a[5], "arange") < 0 || tsp_enter())
        return NULL;
    ts_tensor *ot;
    if (out_arg(a[7], &ot, &o, "arange") < 0) return NULL;
    if (o.dtype == TS_DTYPE_DEFAULT) {
        bool ints = true;
        for (int i = 0; i < 3; i++) ints &= !a[i] || PyLong_Check(a[i]);
        o.dtype = ints ? TS_I64 : tsp_default_float;
    }
    bool rg = o.requires_grad;
    o.requires_grad = false;
    ts_tensor *t;
    TSP_NOGIL(t = ts_arange(start, end, step, o););
    if (t && rg) ts_set_requires_grad(t, true);
    return into_out(a[7], ot, t, "arange");
}

static PyObject *f_linspace(PyObject *mod, PyObject *const *args, Py_ssize_t nargs, PyObject *kw) {
    (void)mod;
    static const char *const names[] = {"start", "end",    "steps",
                                        "dtype", "device", "requires_grad"};
    PyObject *a[6];
    double start, end;
    int64_t steps;
    ts_opts o = {0};
    if (tsp_parse(args, nargs, kw, "linspace", names, 6, 3, a) < 0 ||
        tsp_scalar_arg(a[0], 0, &start, "linspace", "start") < 0 ||
        tsp_scalar_arg(a[1], 0, &end, "linspace", "end") < 0 ||
        tsp_int_arg(a[2], &steps, "linspace", "steps") < 0 ||
        tsp_opts_args(a[3], a[4], a[5], NULL, &o, "linspace") < 0 || tsp_enter())
        return NULL;
    if (!o.dtype) o.dtype = tsp_default_float;
    ts_tensor *t;
    TSP_NOGIL(t = ts_linspace(start, end, steps, o););
    return tsp_wrap(t);
}

static PyObject *f_logspace(PyObject *mod, PyObject *const *args, Py_ssize_t nargs, PyObject *kw) {
    (void)mod;
    static const char *const names[] = {"start", "end",    "steps",        "base",
                                        "dtype", "device", "requires_grad"};
    PyObject *a[7];
    double start, end, base;
    int64_t steps;
    ts_opts o = {0};
    if (tsp_parse(args, nargs, kw, "logspace", names, 7, 3, a) < 0 ||
        tsp_scalar_arg(a[0], 0, &start, "logspace", "start") < 0 ||
        tsp_scalar_arg(a[1], 0, &end, "logspace", "end") < 0 ||
        tsp_int_arg(a[2], &steps, "logspace", "steps") < 0 ||
        tsp_double_arg(a[3], 10.0, &base, "logspace", "base") < 0 ||
        tsp_opts_args(a[4], a[5], a[6], NULL, &o, "logspace") < 0 || tsp_enter())
        return NULL;
    if (!o.dtype) o.dtype = tsp_default_float;
    ts_tensor *t;
    TSP_NOGIL(t = ts_logspace(start, end, steps, base, o););
    return tsp_wrap(t);
}

static PyObject *f_eye(PyObject *mod, PyObject *const *args, Py_ssize_t nargs, PyObject *kw) {
    (void)mod;
    static const char *const names[] = {"n", "m", "dtype", "device", "requires_grad"};
    PyObject *a[5];
    int64_t n, m = 0;
    ts_opts o = {0};
    if (tsp_parse(args, nargs, kw, "eye", names, 5, 1, a) < 0 ||
        tsp_int_arg(a[0], &n, "eye", "n") < 0 ||
        (a[1] && a[1] != Py_None && tsp_int_arg(a[1], &m, "eye", "m") < 0) ||
        tsp_opts_args(a[2], a[3], a[4], NULL, &o, "eye") < 0 || tsp_enter())
        return NULL;
    if (!o.dtype) o.dtype = tsp_default_float;
    if (m == 0 && a[1] && a[1] != Py_None) return tsp_wrap(ts_empty(TS_SHAPE(n, 0), o));
    ts_tensor *t;
    TSP_NOGIL(t = ts_eye(n, m, o););
    return tsp_wrap(t);
}

/* _signal_window(kind, M, params, sym, dtype=None, device=None, requires_grad=False): kind a
 * ts_window_kind, params a sequence of floats (tessera.signal.windows names them) */
static PyObject *f_signal_window(PyObject *mod, PyObject *const *args, Py_ssize_t nargs,
                                 PyObject *kw) {
    (void)mod;
    static const char *const names[] = {"kind",  "M",      "params",       "sym",
                                        "dtype", "device", "requires_grad"};
    const char *fn = "signal_window";
    PyObject *a[7];
    int64_t kind, m;
    ts_opts o = {0};
    double params[8];
    if (tsp_parse(args, nargs, kw, fn, names, 7, 4, a) < 0 ||
        tsp_int_arg(a[0], &kind, fn, "kind") < 0 || tsp_int_arg(a[1], &m, fn, "M") < 0 ||
        tsp_opts_args(a[4], a[5], a[6], NULL, &o, fn) < 0)
        return NULL;
    PyObject *seq = PySequence_Fast(a[2], "signal_window(): argument 'params' must be a sequence");
    if (!seq) return NULL;
    Py_ssize_t np = PySequence_Fast_GET_SIZE(seq);
    if (np > 8) {
        Py_DECREF(seq);
        PyErr_Format(PyExc_ValueError, "%s(): at most 8 parameters, got %zd", fn, np);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < np; i++)
        params[i] = PyFloat_AsDouble(PySequence_Fast_GET_ITEM(seq, i));
    Py_DECREF(seq);
    int sym = PyObject_IsTrue(a[3]);
    if (PyErr_Occurred() || sym < 0 || tsp_enter()) return NULL;
    if (!o.dtype) o.dtype = tsp_default_float;
    ts_tensor *t;
    TSP_NOGIL(t = ts_signal_window((ts_window_kind)kind, m, params, (int)np, sym, o););
    return tsp_wrap(t);
}

/* ------------------------------------------------------------------ *_like */
/* f_like(input, [fill_value,] dtype=None, device=None, requires_grad=False): input's shape, and
 * its dtype and device unless given */
static PyObject *like(shape_factory f, const char *fn, PyObject *const *args, Py_ssize_t nargs,
                      PyObject *kw, double *fill_value) {
    static const char *const names[] = {"input",         "fill_value",    "dtype",  "device",
                                        "requires_grad", "memory_format", "layout", "pin_memory"};
    static const char *const names_nofill[] = {
        "input", "dtype", "device", "requires_grad", "memory_format", "layout", "pin_memory"};
    PyObject *a[8] = {0};
    int r = fill_value ? tsp_parse(args, nargs, kw, fn, names, 8, 2, a)
                       : tsp_parse(args, nargs, kw, fn, names_nofill, 7, 1, a + 1);
    if (r < 0) return NULL;
    if (!fill_value) a[0] = a[1], a[1] = NULL;
    ts_tensor *t = tsp_tensor_arg(a[0], fn, "input");
    ts_opts o = {0};
    if (!t || tsp_opts_args(a[2], a[3], a[4], a[7], &o, fn) < 0 || tsp_layout_arg(a[6], fn) < 0)
        return NULL;
    if (fill_value && tsp_double_arg(a[1], 0, fill_value, fn, "fill_value") < 0) return NULL;
    if (tsp_enter()) return NULL;
    if (!o.dtype) o.dtype = ts_dtype_of(t);
    if (!o.device.type) o.device = ts_device_of(t);
    ts_tensor *res;
    if (fill_value)
        res = full_exact(ts_shape_of(t), a[1], *fill_value, o);
    else
        TSP_NOGIL(res = f(ts_shape_of(t), o););
    return tsp_wrap(res);
}

#define LIKE(name, sf)                                                                             \
    static PyObject *f_##name##_like(PyObject *mod, PyObject *const *args, Py_ssize_t nargs,       \
                                     PyObject *kw) {                                               \
        (void)mod;                                                                                 \
        return like(sf, #name "_like", args, nargs, kw, NULL);                                     \
    }
LIKE(zeros, ts_zeros)
LIKE(ones, ts_ones)
LIKE(empty, ts_empty)
LIKE(rand, ts_rand)
LIKE(randn, ts_randn)

static PyObject *f_full_like(PyObject *mod, PyObject *const *args, Py_ssize_t nargs, PyObject *kw) {
    (void)mod;
    double v;
    return like(NULL, "full_like", args, nargs, kw, &v);
}

/* ------------------------------------------------------------------ new_* methods */
/* t.new_zeros(size, dtype=None, device=None, requires_grad=False): t's dtype and device unless
 * given; new_full(size, fill_value, ...); new_tensor(data, ...) */
static PyObject *new_sized(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kw,
                           const char *fn, shape_factory f, bool fill, bool data) {
    static const char *const names[] = {"size",          "fill_value", "dtype", "device",
                                        "requires_grad", "pin_memory", "layout"};
    static const char *const names_nofill[] = {"size",          "dtype",      "device",
                                               "requires_grad", "pin_memory", "layout"};
    PyObject *a[7] = {0};
    ts_shape s = {0};
    Py_ssize_t nsizes = 0; /* new_ones(5, 3): the sizes as separate ints */
    if (!fill && !data && nargs > 1 && PyIndex_Check(args[0]) && !tsp_tensor_of(args[0])) {
        if (nargs > TS_MAX_DIMS) {
            PyErr_Format(PyExc_ValueError, "%s(): %zd dims, at most %d are supported", fn, nargs,
                         TS_MAX_DIMS);
            return NULL;
        }
        for (Py_ssize_t i = 0; i < nargs; i++)
            if (tsp_int_arg(args[i], &s.dims[i], fn, "size") < 0) return NULL;
        s.ndim = (int)nargs, nsizes = nargs;
    }
    int r = fill ? tsp_parse(args, nargs, kw, fn, names, 7, 2, a)
                 : tsp_parse(args + nsizes, nargs - nsizes, kw, fn, names_nofill, 6, nsizes ? 0 : 1,
                             a + 1);
    if (r < 0) return NULL;
    if (!fill) a[0] = a[1], a[1] = NULL;
    if (nsizes && a[0]) {
        PyErr_Format(PyExc_TypeError, "%s() got multiple values for argument 'size'", fn);
        return NULL;
    }
    ts_tensor *t = TSP_T(self), *res;
    ts_opts o = {0};
    double v = 0;
    if (tsp_opts_args(a[2], a[3], a[4], a[5], &o, fn) < 0 || tsp_layout_arg(a[6], fn) < 0 ||
        (!data && !nsizes && tsp_shape_arg(a[0], &s, fn, "size") < 0) ||
        (fill && tsp_double_arg(a[1], 0, &v, fn, "fill_value") < 0) || tsp_enter())
        return NULL;
    if (!o.dtype) o.dtype = ts_dtype_of(t);
    if (!o.device.type) o.device = ts_device_of(t);
    if (data) {
        ts_dtype dt = o.dtype;
        o.dtype = TS_DTYPE_DEFAULT;
        return tsp_wrap(tsp_tensor_from_data(a[0], dt, o));
    }
    if (fill)
        res = full_exact(s, a[1], v, o);
    else
        TSP_NOGIL(res = f(s, o));
    return tsp_wrap(res);
}
static PyObject *m_new_zeros(PyObject *self, PyObject *const *a, Py_ssize_t n, PyObject *kw) {
    return new_sized(self, a, n, kw, "new_zeros", ts_zeros, false, false);
}
static PyObject *m_new_ones(PyObject *self, PyObject *const *a, Py_ssize_t n, PyObject *kw) {
    return new_sized(self, a, n, kw, "new_ones", ts_ones, false, false);
}
static PyObject *m_new_empty(PyObject *self, PyObject *const *a, Py_ssize_t n, PyObject *kw) {
    return new_sized(self, a, n, kw, "new_empty", ts_empty, false, false);
}
static PyObject *m_new_full(PyObject *self, PyObject *const *a, Py_ssize_t n, PyObject *kw) {
    return new_sized(self, a, n, kw, "new_full", NULL, true, false);
}
static PyObject *m_new_tensor(PyObject *self, PyObject *const *a, Py_ssize_t n, PyObject *kw) {
    return new_sized(self, a, n, kw, "new_tensor", NULL, false, true);
}

/* t.uniform_(a=0, b=1) / t.normal_(mean=0, std=1): in place, from the seeded generator */
static PyObject *random_(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kw,
                         bool normal) {
    static const char *const uniform_names[] = {"a", "b", "generator"};
    static const char *const normal_names[] = {"mean", "std", "generator"};
    const char *fn = normal ? "normal_" : "uniform_";
    const char *const *names = normal ? normal_names : uniform_names;
    PyObject *a[3];
    double x, y;
    ts_tensor *r;
    if (tsp_parse(args, nargs, kw, fn, names, 3, 0, a) < 0 ||
        tsp_double_arg(a[0], 0, &x, fn, names[0]) < 0 ||
        tsp_double_arg(a[1], 1, &y, fn, names[1]) < 0 || tsp_enter())
        return NULL;
    tsp_generator_scope gs;
    if (tsp_generator_begin(a[2], fn, &gs) < 0) return NULL;
    if (normal)
        TSP_NOGIL(r = ts_normal_(TSP_T(self), x, y));
    else
        TSP_NOGIL(r = ts_uniform_(TSP_T(self), x, y));
    return tsp_generator_finish(&gs, tsp_inplace_result(self, r));
}
static PyObject *m_uniform_(PyObject *self, PyObject *const *a, Py_ssize_t n, PyObject *kw) {
    return random_(self, a, n, kw, false);
}
static PyObject *m_normal_(PyObject *self, PyObject *const *a, Py_ssize_t n, PyObject *kw) {
    return random_(self, a, n, kw, true);
}

/* randperm(n, dtype=int64, device=None, requires_grad=False) */
static PyObject *f_randperm(PyObject *mod, PyObject *const *args, Py_ssize_t nargs, PyObject *kw) {
    (void)mod;
    static const char *const names[] = {"n", "dtype", "device", "requires_grad", "generator"};
    PyObject *a[5];
    int64_t n;
    ts_opts o = {0};
    ts_tensor *t;
    if (tsp_parse(args, nargs, kw, "randperm", names, 5, 1, a) < 0 ||
        tsp_int_arg(a[0], &n, "randperm", "n") < 0 ||
        tsp_opts_args(a[1], a[2], a[3], NULL, &o, "randperm") < 0 || tsp_enter())
        return NULL;
    tsp_generator_scope gs;
    if (tsp_generator_begin(a[4], "randperm", &gs) < 0) return NULL;
    TSP_NOGIL(t = ts_randperm(n, o));
    return tsp_generator_finish(&gs, tsp_wrap(t));
}
/* bernoulli(input, p=None): 1 with probability input (or p) per element */
static PyObject *f_bernoulli(PyObject *mod, PyObject *const *args, Py_ssize_t nargs, PyObject *kw) {
    (void)mod;
    static const char *const names[] = {"input", "p", "generator"};
    PyObject *a[3];
    ts_tensor *x, *t;
    double p;
    if (tsp_parse(args, nargs, kw, "bernoulli", names, 3, 1, a) < 0 ||
        !(x = tsp_tensor_arg(a[0], "bernoulli", "input")) ||
        tsp_double_arg(a[1], NAN, &p, "bernoulli", "p") < 0 || tsp_enter())
        return NULL;
    tsp_generator_scope gs;
    if (tsp_generator_begin(a[2], "bernoulli", &gs) < 0) return NULL;
    if (isnan(p))
        TSP_NOGIL(t = ts_bernoulli(x));
    else
        TSP_NOGIL(t = ts_bernoulli_p(x, p));
    return tsp_generator_finish(&gs, tsp_wrap(t));
}

static PyObject *f_is_tensor(PyObject *mod, PyObject *o) {
    (void)mod;
    return PyBool_FromLong(tsp_tensor_of(o) != NULL);
}
static PyObject *f_numel(PyObject *mod, PyObject *o) {
    (void)mod;
    ts_tensor *t = tsp_tensor_arg(o, "numel", "input");
    return t ? PyLong_FromLongLong(ts_numel(t)) : NULL;
}
static PyObject *f_get_default_dtype(PyObject *mod, PyObject *unused) {
    (void)mod, (void)unused;
    return tsp_dtype_obj(tsp_default_float);
}
/* set_default_dtype(d): torch's, a floating dtype only (process-wide, as torch's) */
static PyObject *f_set_default_dtype(PyObject *mod, PyObject *d) {
    (void)mod;
    ts_dtype dt = TS_DTYPE_DEFAULT;
    if (!tsp_is_dtype(d)) {
        PyErr_Format(PyExc_TypeError,
                     "set_default_dtype(): argument 'd' must be tessera.dtype, not %.100s",
                     Py_TYPE(d)->tp_name);
        return NULL;
    }
    if (tsp_dtype_arg(d, &dt, "set_default_dtype", "d") < 0) return NULL;
    if (!ts_dtype_is_floating(dt)) {
        PyErr_SetString(PyExc_TypeError,
                        "only floating-point types are supported as the default type");
        return NULL;
    }
    tsp_default_float = dt;
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------------ random state */
static PyObject *f_manual_seed(PyObject *mod, PyObject *seed) {
    (void)mod;
    unsigned long long s = PyLong_AsUnsignedLongLongMask(seed);
    if (s == (unsigned long long)-1 && PyErr_Occurred()) {
        PyErr_Format(PyExc_TypeError, "manual_seed(): argument 'seed' must be int, not %.100s",
                     Py_TYPE(seed)->tp_name);
        return NULL;
    }
    ts_manual_seed(s);
    Py_RETURN_NONE;
}
/* get_rng_state(): the generator's (seed, offset) as an int64 tensor; set_rng_state(state) */
static PyObject *f_get_rng_state(PyObject *mod, PyObject *unused) {
    (void)mod, (void)unused;
    ts_rng_state st = ts_rng_get_state();
    int64_t v[2] = {(int64_t)st.seed, (int64_t)st.offset};
    return tsp_wrap(ts_tensor_i64(TS_SHAPE(2), v, (ts_opts){0}));
}
static PyObject *f_set_rng_state(PyObject *mod, PyObject *state) {
    (void)mod;
    ts_tensor *t = tsp_tensor_arg(state, "set_rng_state", "new_state");
    int64_t v[2];
    if (!t) return NULL;
    if (ts_numel(t) != 2 || ts_dtype_of(t) != TS_I64 || ts_device_of(t).type != TS_CPU) {
        PyErr_SetString(PyExc_ValueError,
                        "set_rng_state(): new_state must be what get_rng_state() returned");
        return NULL;
    }
    ts_tensor *c = ts_contiguous(t);
    if (c) ts_copy_to_host(c, v, sizeof v);
    tsp_drop(c);
    if (tsp_check()) return NULL;
    ts_rng_set_state((ts_rng_state){(uint64_t)v[0], (uint64_t)v[1]});
    Py_RETURN_NONE;
}

/* set_printoptions(precision=None, threshold=None, edgeitems=None, linewidth=None): torch's */
static PyObject *f_set_printoptions(PyObject *mod, PyObject *const *args, Py_ssize_t nargs,
                                    PyObject *kw) {
    (void)mod;
    static const char *const names[] = {"precision", "threshold", "edgeitems",
                                        "linewidth", "profile",   "sci_mode"};
    static int64_t current[4] = {4, 1000, 3, 80}; /* torch's defaults, the C core's too */
    PyObject *a[6];
    int64_t v[4];
    if (tsp_parse(args, nargs, kw, "set_printoptions", names, 6, 0, a) < 0) return NULL;
    for (int i = 0; i < 4; i++) {
        v[i] = current[i];
        if (a[i] && a[i] != Py_None && tsp_int_arg(a[i], &v[i], "set_printoptions", names[i]) < 0)
            return NULL;
    }
    if (a[4] && a[4] != Py_None) { /* "default" / "short" / "full", torch's profiles */
        const char *p = PyUnicode_AsUTF8(a[4]);
        if (!p) return NULL;
        if (!strcmp(p, "short"))
            v[0] = 2, v[1] = 1000, v[2] = 2, v[3] = 80;
        else if (!strcmp(p, "full"))
            v[0] = 4, v[1] = INT32_MAX, v[2] = 3, v[3] = 80;
        else
            v[0] = 4, v[1] = 1000, v[2] = 3, v[3] = 80;
    }
    if (ts_print_options((int)v[0], (int)v[1], (int)v[2], (int)v[3]) != TS_OK)
        return tsp_raise_pending();
    for (int i = 0; i < 4; i++) current[i] = v[i];
    Py_RETURN_NONE;
}

static PyObject *f_initial_seed(PyObject *mod, PyObject *unused) {
    (void)mod, (void)unused;
    return PyLong_FromUnsignedLongLong(ts_initial_seed());
}

#define KWARGS (METH_VARARGS | METH_KEYWORDS)
PyMethodDef tsp_tensor_core_functions[] = {
    {"tensor", FN(f_tensor), FAST,
     "tensor(data, dtype=None, device=None, requires_grad=False): from nested lists / numbers"},
    {"zeros", FN(f_zeros), KWARGS, "zeros(*size, dtype=None, device=None, requires_grad=False)"},
    {"ones", FN(f_ones), KWARGS, "ones(*size, dtype=None, device=None, requires_grad=False)"},
    {"empty", FN(f_empty), KWARGS, "empty(*size, dtype=None, device=None, requires_grad=False)"},
    {"rand", FN(f_rand), KWARGS, "rand(*size, ...): U[0, 1)"},
    {"randn", FN(f_randn), KWARGS, "randn(*size, ...): N(0, 1)"},
    {"full", FN(f_full), KWARGS, "full(size, fill_value, dtype=None, device=None)"},
    {"randint", FN(f_randint), FAST, "randint(low=0, high, size, dtype=int64, device=None)"},
    {"arange", FN(f_arange), FAST, "arange(start=0, end, step=1, dtype=None, device=None)"},
    {"linspace", FN(f_linspace), FAST, "linspace(start, end, steps, dtype=None, device=None)"},
    {"logspace", FN(f_logspace), FAST, "logspace(start, end, steps, base=10.0, dtype=None)"},
    {"eye", FN(f_eye), FAST, "eye(n, m=None, dtype=None, device=None)"},
    {"_signal_window", FN(f_signal_window), FAST,
     "_signal_window(kind, M, params, sym, dtype=None, device=None, requires_grad=False)"},
    {"zeros_like", FN(f_zeros_like), FAST, NULL},
    {"ones_like", FN(f_ones_like), FAST, NULL},
    {"empty_like", FN(f_empty_like), FAST, NULL},
    {"rand_like", FN(f_rand_like), FAST, NULL},
    {"randn_like", FN(f_randn_like), FAST, NULL},
    {"full_like", FN(f_full_like), FAST, "full_like(input, fill_value, dtype=None, device=None)"},
    {"manual_seed", f_manual_seed, METH_O, "manual_seed(seed): seeds every device's generator"},
    {"randperm", FN(f_randperm), FAST, "randperm(n, dtype=int64, device=None)"},
    {"bernoulli", FN(f_bernoulli), FAST, "bernoulli(input, p=None)"},
    {"is_tensor", f_is_tensor, METH_O, NULL},
    {"numel", f_numel, METH_O, NULL},
    {"get_default_dtype", f_get_default_dtype, METH_NOARGS, "the dtype of float factories"},
    {"set_default_dtype", f_set_default_dtype, METH_O,
     "set_default_dtype(d): float32, float64, float16 or bfloat16 for float factories"},
    {"initial_seed", f_initial_seed, METH_NOARGS, NULL},
    {"get_rng_state", f_get_rng_state, METH_NOARGS, "the generator's state (a tensor)"},
    {"set_rng_state", f_set_rng_state, METH_O, "set_rng_state(new_state)"},
    {"_rng_thread_swap", tsp_f_rng_thread_swap, METH_VARARGS,
     "_rng_thread_swap(on, seed, offset) -> (on, seed, offset): the thread's own random stream"},
    {"set_printoptions", FN(f_set_printoptions), FAST,
     "set_printoptions(precision=None, threshold=None, edgeitems=None, linewidth=None)"},
    {NULL, NULL, 0, NULL},
};

PyMethodDef tsp_tensor_factory_methods[] = {
    {"new_zeros", FN(m_new_zeros), FAST, "new_zeros(size, dtype=None, device=None)"},
    {"new_ones", FN(m_new_ones), FAST, "new_ones(size, dtype=None, device=None)"},
    {"new_empty", FN(m_new_empty), FAST, "new_empty(size, dtype=None, device=None)"},
    {"new_full", FN(m_new_full), FAST, "new_full(size, fill_value, dtype=None, device=None)"},
    {"new_tensor", FN(m_new_tensor), FAST, "new_tensor(data, dtype=None, device=None)"},
    {"uniform_", FN(m_uniform_), FAST, "uniform_(a=0, b=1)"},
    {"normal_", FN(m_normal_), FAST, "normal_(mean=0, std=1)"},
    {NULL, NULL, 0, NULL},
};
