/* tensor_data.c — tessera.tensor's data: nested lists and tuples of numbers, bools, 0-dim tensors
 * and NumPy scalars (shape inferred, dtypes promoted as torch.tensor does), NumPy arrays (their
 * dtype kept) and existing tensors (a detached copy): tsp_tensor_from_data (tensor_impl.h). */
#include "tensor_impl.h"
#include "tessera/complex.h"

#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ tensor(data) */
enum { KIND_BOOL, KIND_INT, KIND_FLOAT, KIND_COMPLEX };

typedef struct flat {
    ts_shape shape;
    int64_t n, cap;
    double *f;       /* every value as a double (a complex number's real part) */
    double *im;      /* the imaginary parts (0 for real numbers) */
    int64_t *i;      /* and as an int64 (exact for ints) */
    int kind;        /* the widest kind seen */
    ts_dtype dt;     /* torch's inferred dtype: the leaves' dtypes promoted (DEFAULT: none yet) */
    bool past_int64; /* an int in [2^63, 2^64) is held as its uint64 bits: only uint64 takes it */
} flat;

/* a list, tuple or other sequence (a NumPy array of 1 or more dims too), not a leaf */
static bool is_nested(PyObject *o) {
    if (PyList_Check(o) || PyTuple_Check(o)) return true;
    if (tsp_tensor_of(o) || PyUnicode_Check(o) || PyBytes_Check(o) || PyFloat_Check(o) ||
        !PySequence_Check(o))
        return false;
    if (!PyIndex_Check(o)) return true;
    int r = tsp_is_ndarray(o, 1); /* an ndarray has __index__ too */
    if (r < 0) PyErr_Clear();
    return r > 0;
}

/* each leaf's dtype, promoted into fl->dt as torch.tensor infers it */
static int promote_leaf(flat *fl, ts_dtype leaf) {
    ts_dtype p = fl->dt == TS_DTYPE_DEFAULT ? leaf : ts_promote_types(fl->dt, leaf);
    if (p == TS_DTYPE_COUNT) {
        PyErr_Format(PyExc_TypeError, "tensor(): no common dtype for %s and %s in the data",
                     ts_dtype_name(fl->dt), ts_dtype_name(leaf));
        return -1;
    }
    fl->dt = p;
    return 0;
}

/* the shape, from the first element at each depth */
static int infer_shape(PyObject *data, ts_shape *s) {
    s->ndim = 0;
    Py_INCREF(data);
    while (is_nested(data)) {
        Py_ssize_t n = PySequence_Size(data);
        if (n < 0) return Py_DECREF(data), -1;
        if (s->ndim == TS_MAX_DIMS) {
            Py_DECREF(data);
            PyErr_Format(PyExc_ValueError, "tensor(): data has more than %d dims", TS_MAX_DIMS);
            return -1;
        }
        s->dims[s->ndim++] = n;
        PyObject *first = n ? PySequence_GetItem(data, 0) : NULL;
        Py_DECREF(data);
        if (!n) return 0;
        if (!first) return -1;
        data = first;
    }
    Py_DECREF(data);
    return 0;
}

static int add_leaf(flat *fl, PyObject *o);

/* a NumPy array or scalar: 1, else 0; -1 on error */
static int is_numpy_data(PyObject *o) {
    int r = tsp_is_ndarray(o, 0);
    return r ? r : tsp_is_numpy_scalar(o);
}

/* a one-element tensor inside the list: its value, and its dtype for the inference */
static int add_tensor_leaf(flat *fl, PyObject *o, ts_tensor *t) {
    PyObject *item = PyObject_CallMethod(o, "item", NULL);
    if (!item) return -1;
    ts_dtype before = fl->dt;
    int r = add_leaf(fl, item);
    Py_DECREF(item);
    fl->dt = before;
    return r < 0 ? -1 : promote_leaf(fl, ts_dtype_of(t));
}

static int add_leaf(flat *fl, PyObject *o) {
    ts_tensor *t = tsp_tensor_of(o);
    double v;
    int kind;
    if (t) return add_tensor_leaf(fl, o, t);
    if (!PyFloat_CheckExact(o) && !PyLong_CheckExact(o) && !PyBool_Check(o)) {
        int np = is_numpy_data(o); /* np.float64(1), np.array(2) */
        if (np < 0) return -1;
        if (np) {
            PyObject *w = tsp_wrap(tsp_numpy_tensor(o));
            int r = w ? add_tensor_leaf(fl, w, TSP_T(w)) : -1;
            Py_XDECREF(w);
            return r;
        }
    }
    fl->im[fl->n] = 0;
    if (PyComplex_Check(o)) {
        kind = KIND_COMPLEX;
        v = PyComplex_RealAsDouble(o);
        fl->im[fl->n] = PyComplex_ImagAsDouble(o);
        if (PyErr_Occurred()) return -1;
    } else if (PyBool_Check(o))
        kind = KIND_BOOL, v = o == Py_True;
    else if (PyLong_Check(o) || (PyIndex_Check(o) && !PyFloat_Check(o))) {
        int overflow;
        long long x = PyLong_AsLongLongAndOverflow(o, &overflow);
        if (x == -1 && PyErr_Occurred()) return -1;
        if (overflow > 0) { /* past int64: uint64's range, as torch.tensor(..., dtype=uint64) */
            unsigned long long u = PyLong_AsUnsignedLongLong(o);
            if (u == (unsigned long long)-1 && PyErr_Occurred()) return -1;
            fl->past_int64 = true;
            x = (long long)u;
            v = (double)u;
        } else if (overflow < 0) {
            PyErr_SetString(PyExc_OverflowError, "tensor(): an int below -2^63 fits no dtype");
            return -1;
        } else {
            v = (double)x;
        }
        kind = KIND_INT;
        fl->i[fl->n] = x;
    } else {
        int r = tsp_number(o, &v);
        if (r <= 0) {
            if (r == 0)
                PyErr_Format(PyExc_TypeError,
                             "tensor(): data must be numbers or nested sequences of numbers, not "
                             "%.100s",
                             Py_TYPE(o)->tp_name);
            return -1;
        }
        kind = KIND_FLOAT;
    }
    if (kind != KIND_INT) fl->i[fl->n] = (int64_t)v;
    fl->f[fl->n++] = v;
    if (kind > fl->kind) fl->kind = kind;
    static const ts_dtype leaf_dtype[] = {TS_BOOL, TS_I64, TS_DTYPE_DEFAULT};
    const ts_dtype cdt = tsp_default_float == TS_F64 ? TS_C128 : TS_C64;
    return promote_leaf(fl, kind == KIND_COMPLEX ? cdt
                            : kind == KIND_FLOAT ? tsp_default_float
                                                 : leaf_dtype[kind]);
}

static int fill(flat *fl, PyObject *o, int d) {
    if (d == fl->shape.ndim) {
        if (is_nested(o)) {
            PyErr_SetString(PyExc_ValueError, "tensor(): nested sequences of unequal depth");
            return -1;
        }
        return add_leaf(fl, o);
    }
    PyObject *seq = is_nested(o) ? PySequence_Fast(o, "tensor(): data") : NULL;
    if (!seq) {
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_ValueError, "tensor(): expected a sequence at dim %d, got %.100s", d,
                         Py_TYPE(o)->tp_name);
        return -1;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    int r = 0;
    if (n != fl->shape.dims[d]) {
        PyErr_Format(PyExc_ValueError,
                     "tensor(): expected sequence of length %lld at dim %d (got %zd)",
                     (long long)fl->shape.dims[d], d, n);
        r = -1;
    }
    for (Py_ssize_t k = 0; r == 0 && k < n; k++)
        r = fill(fl, PySequence_Fast_GET_ITEM(seq, k), d + 1);
    Py_DECREF(seq);
    return r;
}

static ts_tensor *from_flat(flat *fl, ts_dtype dt, ts_opts o) {
    o.dtype = dt != TS_DTYPE_DEFAULT ? dt : fl->dt != TS_DTYPE_DEFAULT ? fl->dt : tsp_default_float;
    bool rg = o.requires_grad;
    o.requires_grad = false; /* set after the conversion: the leaf is the result */
    ts_tensor *t;
    if (fl->kind == KIND_INT && fl->past_int64 && o.dtype != TS_U64) {
        if (ts_dtype_is_floating(o.dtype)) { /* a float dtype takes the value, rounded */
            fl->kind = KIND_FLOAT;
        } else {
            PyErr_Format(PyExc_OverflowError,
                         "tensor(): an int of 2^63 or more fits uint64 only, not %s",
                         ts_dtype_name(o.dtype));
            return NULL;
        }
    }
    if (fl->kind == KIND_COMPLEX && !ts_dtype_is_complex(o.dtype)) {
        PyErr_Format(PyExc_TypeError, "tensor(): complex values cannot be converted to %s",
                     ts_dtype_name(o.dtype));
        return NULL;
    }
    if (fl->kind == KIND_COMPLEX) { /* (real, imag) pairs as float64 [..., 2], then complex */
        double *pairs = malloc(sizeof(double) * 2 * (size_t)(fl->n ? fl->n : 1));
        if (!pairs) return (ts_tensor *)PyErr_NoMemory();
        for (int64_t k = 0; k < fl->n; k++) pairs[2 * k] = fl->f[k], pairs[2 * k + 1] = fl->im[k];
        ts_shape ps = fl->shape;
        ps.dims[ps.ndim++] = 2;
        ts_dtype want = o.dtype;
        o.dtype = TS_F64;
        Py_BEGIN_ALLOW_THREADS;
        ts_tensor *r = ts_from_data(ps, TS_F64, pairs, o);
        ts_tensor *c = r ? ts_view_as_complex(r) : NULL;
        t = c ? ts_to_dtype(c, want) : NULL;
        if (t && t == c) { /* complex128: not a view of the private pairs but a tensor of its
                            * own (a leaf that requires grad; in-place ops) */
            ts_tensor *own = ts_clone(c);
            tsp_drop(t);
            t = own;
        }
        tsp_drop(c);
        tsp_drop(r);
        Py_END_ALLOW_THREADS;
        free(pairs);
    } else if (fl->kind == KIND_FLOAT)
        TSP_NOGIL(t = ts_from_data(fl->shape, TS_F64, fl->f, o););
    else /* uint64: the same bits as uint64's, exactly */
        TSP_NOGIL(t = ts_from_data(fl->shape, o.dtype == TS_U64 ? TS_U64 : TS_I64, fl->i, o););
    if (t && ts_error() == TS_OK && rg) ts_set_requires_grad(t, true);
    if (!t || ts_error() != TS_OK) {
        tsp_drop(t);
        tsp_raise_pending();
        return NULL;
    }
    return t;
}

/* an existing tensor: a detached copy with the requested dtype / device */
static ts_tensor *from_tensor(ts_tensor *src, ts_dtype dt, ts_opts o) {
    ts_tensor *t = NULL, *a;
    Py_BEGIN_ALLOW_THREADS;
    a = ts_detach(src);
    if (a && o.device.type != TS_DEVICE_DEFAULT) t = ts_to(a, o.device), tsp_drop(a), a = t;
    if (a && dt != TS_DTYPE_DEFAULT) t = ts_to_dtype(a, dt), tsp_drop(a), a = t;
    t = a ? ts_clone(a) : NULL;
    tsp_drop(a);
    if (t && o.requires_grad) ts_set_requires_grad(t, true);
    Py_END_ALLOW_THREADS;
    if (!t || ts_error() != TS_OK) {
        tsp_drop(t);
        tsp_raise_pending();
        return NULL;
    }
    return t;
}

ts_tensor *tsp_tensor_from_data(PyObject *data, ts_dtype dt, ts_opts o) {
    ts_tensor *src = tsp_tensor_of(data);
    if (src) return from_tensor(src, dt, o);
    if (!PyList_Check(data) && !PyTuple_Check(data) && !PyFloat_CheckExact(data) &&
        !PyLong_CheckExact(data) &&
        !PyComplex_CheckExact(data)) { /* a NumPy array or scalar: its dtype, as torch.tensor */
        int np = is_numpy_data(data);
        if (np < 0) return NULL;
        if (np) {
            ts_tensor *a = tsp_numpy_tensor(data);
            if (!a) return NULL;
            if (o.device.type == TS_DEVICE_DEFAULT) o.device = ts_default_device();
            ts_tensor *t =
                ts_device_equal(o.device, ts_cpu()) && dt == TS_DTYPE_DEFAULT && !o.requires_grad
                    ? a
                    : from_tensor(a, dt, o);
            if (t != a) tsp_drop(a);
            return t;
        }
    }
    flat fl = {.kind = KIND_BOOL};
    if (infer_shape(data, &fl.shape) < 0) return NULL;
    int64_t n = 1;
    for (int d = 0; d < fl.shape.ndim; d++) n *= fl.shape.dims[d];
    fl.f = malloc((size_t)(n ? n : 1) * sizeof *fl.f);
    fl.i = malloc((size_t)(n ? n : 1) * sizeof *fl.i);
    fl.im = malloc((size_t)(n ? n : 1) * sizeof *fl.im);
    ts_tensor *t = NULL;
    if (!fl.f || !fl.i || !fl.im)
        PyErr_NoMemory();
    else if (fill(&fl, data, 0) == 0) {
        if (n == 0) fl.kind = KIND_FLOAT; /* tensor([]) is float32, as in torch */
        t = from_flat(&fl, dt, o);
    }
    free(fl.f);
    free(fl.i);
    free(fl.im);
    return t;
}
