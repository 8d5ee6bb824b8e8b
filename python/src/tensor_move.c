/* tensor_move.c — moving and casting Tensors: .to(device / dtype / tensor), .cuda(), .cpu(),
 * .float() and the other casts, .type(), pin_memory(), contiguous(), clone(), copy_(). */
#include "tensor_impl.h"

#include <stdlib.h>
#include <string.h>

#define T TSP_T

/* ------------------------------------------------------------------ moves and casts */
/* t moved to device d (when given) and cast to dt (when not DEFAULT); self when nothing changes
 * and no copy was asked for */
static PyObject *moved(PyObject *self, bool has_device, ts_device d, ts_dtype dt, bool async,
                       bool copy) {
    if (tsp_enter()) return NULL;
    ts_tensor *t = T(self), *r; /* r: the C ops' result, NULL standing for t itself */
    Py_BEGIN_ALLOW_THREADS;
    r = has_device ? (async ? ts_to_async(t, d) : ts_to(t, d)) : NULL;
    ts_tensor *src = r ? r : t;
    if ((r || !has_device) && dt != TS_DTYPE_DEFAULT && dt != ts_dtype_of(src)) {
        ts_tensor *cast = ts_to_dtype(src, dt);
        tsp_drop(r);
        r = cast;
    }
    if (copy && (r == NULL || r == t) && ts_error() == TS_OK) {
        tsp_drop(r);
        r = ts_clone(t);
    }
    Py_END_ALLOW_THREADS;
    if (ts_error() == TS_OK && (r == NULL || r == t)) {
        tsp_drop(r);
        return Py_NewRef(self);
    }
    return tsp_wrap(r);
}

/* A memory_format argument (tessera.contiguous_format / channels_last / preserve_format, objects
 * of tessera.memory_format carrying the code in _ts_memory_format): 0 contiguous, 1 channels_last,
 * -1 preserve (or absent / None). -2 with a TypeError set for anything else. */
int tsp_memory_format_arg(PyObject *o, const char *fn) {
    if (!o || o == Py_None) return -1;
    PyObject *c = PyObject_GetAttrString(o, "_ts_memory_format");
    const long v = c && PyLong_Check(c) ? PyLong_AsLong(c) : -3;
    Py_XDECREF(c);
    if (v < -1 || v > 1) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError,
                     "%s(): argument 'memory_format' must be torch.memory_format, not %s", fn,
                     Py_TYPE(o)->tp_name);
        return -2;
    }
    return (int)v;
}

/* t in memory format f (tsp_memory_format_arg's codes): t itself when it already is or f is
 * preserve */
static PyObject *in_format(PyObject *self, int f) {
    ts_tensor *t = T(self);
    if (f < 0 || ts_is_contiguous_format(t, (ts_memory_format)f)) return Py_NewRef(self);
    return tsp_wrap(ts_contiguous_format(t, (ts_memory_format)f));
}

/* .to(device), .to(dtype), .to(device, dtype), .to(tensor), .to(device=, dtype=, non_blocking=,
 * copy=), .to(dtype, non_blocking, copy), .to(tensor, non_blocking, copy) */
static PyObject *m_to(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kw) {
    static const char *const names[] = {"device", "dtype", "non_blocking", "copy", "memory_format"};
    PyObject *a[5];
    if (tsp_parse(args, nargs, kw, "to", names, 5, 0, a) < 0) return NULL;
    PyObject *dev = a[0], *dty = a[1];
    ts_tensor *other = dev ? tsp_tensor_of(dev) : NULL;
    if ((other || (dev && tsp_is_dtype(dev))) && nargs >= 2) {
        /* .to(dtype, non_blocking, copy) and .to(tensor, non_blocking, copy): PyTorch's other
         * overloads, whose second and third positions are the flags */
        if (nargs > 3) {
            PyErr_SetString(PyExc_TypeError,
                            "to(): after a dtype or a tensor only non_blocking and copy follow");
            return NULL;
        }
        if (nargs == 3) a[3] = a[2];
        a[2] = a[1];
        a[1] = dty = NULL;
    }
    bool has_device = false, async, copy;
    ts_device d = {0};
    ts_dtype dt = TS_DTYPE_DEFAULT;
    if (other) { /* .to(tensor): its device and dtype */
        d = ts_device_of(other), dt = ts_dtype_of(other), has_device = true;
    } else if (dev && tsp_is_dtype(dev)) {
        if (dty) {
            PyErr_SetString(PyExc_TypeError, "to(): dtype given twice");
            return NULL;
        }
        dty = dev; /* .to(dtype) */
    } else if (dev && dev != Py_None) {
        if (tsp_device_arg(dev, &d, "to", "device") < 0) return NULL;
        has_device = true;
    }
    if (tsp_dtype_arg(dty, &dt, "to", "dtype") < 0 ||
        tsp_bool_arg(a[2], false, &async, "to", "non_blocking") < 0 ||
        tsp_bool_arg(a[3], false, &copy, "to", "copy") < 0)
        return NULL;
    const int f = tsp_memory_format_arg(a[4], "to");
    if (f == -2) return NULL;
    PyObject *r = moved(self, has_device, d, dt, async, copy);
    if (!r || f < 0) return r;
    PyObject *out = in_format(r, f);
    Py_DECREF(r);
    return out;
}

static PyObject *m_cuda(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kw) {
    static const char *const names[] = {"device", "non_blocking", "memory_format"};
    PyObject *a[3];
    if (tsp_parse(args, nargs, kw, "cuda", names, 3, 0, a) < 0) return NULL;
    ts_device d = ts_cuda(-1);
    bool async;
    if ((a[0] && a[0] != Py_None && tsp_device_arg(a[0], &d, "cuda", "device") < 0) ||
        tsp_bool_arg(a[1], false, &async, "cuda", "non_blocking") < 0)
        return NULL;
    return moved(self, true, d, TS_DTYPE_DEFAULT, async, false);
}
static PyObject *m_cpu(PyObject *self, PyObject *unused) {
    (void)unused;
    return moved(self, true, ts_cpu(), TS_DTYPE_DEFAULT, false, false);
}

static PyObject *m_type(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kw) {
    static const char *const names[] = {"dtype", "non_blocking"};
    PyObject *a[2];
    if (tsp_parse(args, nargs, kw, "type", names, 2, 0, a) < 0) return NULL;
    if (!a[0] || a[0] == Py_None) {
        static const char *const tnames[TS_DTYPE_COUNT] = {"",
                                                           "FloatTensor",
                                                           "DoubleTensor",
                                                           "HalfTensor",
                                                           "BFloat16Tensor",
                                                           "LongTensor",
                                                           "IntTensor",
                                                           "ByteTensor",
                                                           "BoolTensor",
                                                           "CharTensor",
                                                           "ShortTensor",
                                                           "UInt16Tensor",
                                                           "UInt32Tensor",
                                                           "UInt64Tensor",
                                                           "ComplexFloatTensor",
                                                           "ComplexDoubleTensor",
                                                           "QInt8Tensor",
                                                           "QUInt8Tensor",
                                                           "QInt32Tensor",
                                                           "QUInt4x2Tensor"};
        return PyUnicode_FromFormat("tessera.%s", tnames[ts_dtype_of(T(self))]);
    }
    ts_dtype dt = TS_DTYPE_DEFAULT;
    if (tsp_dtype_arg(a[0], &dt, "type", "dtype") < 0) return NULL;
    return moved(self, false, (ts_device){0}, dt, false, false);
}

/* type_as(other): PyTorch's self.type(other.type()), whose type string names the device too:
 * other's dtype on other's device */
static PyObject *m_type_as(PyObject *self, PyObject *other) {
    ts_tensor *o = tsp_tensor_of(other);
    if (!o) {
        PyErr_Format(PyExc_TypeError, "type_as(): argument 'other' must be Tensor, not %.100s",
                     Py_TYPE(other)->tp_name);
        return NULL;
    }
    return moved(self, true, ts_device_of(o), ts_dtype_of(o), false, false);
}

/* x.float(memory_format=torch.preserve_format) and the other casts */
static PyObject *cast_method(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kw,
                             ts_dtype dt, const char *fn) {
    static const char *const names[] = {"memory_format"};
    PyObject *a[1];
    if (tsp_parse(args, nargs, kw, fn, names, 1, 0, a) < 0) return NULL;
    const int f = tsp_memory_format_arg(a[0], fn);
    if (f == -2) return NULL;
    PyObject *r = moved(self, false, (ts_device){0}, dt, false, false);
    if (!r || f < 0) return r;
    PyObject *r2 = in_format(r, f);
    Py_DECREF(r);
    return r2;
}
#define CAST_METHOD(name, dt)                                                                      \
    static PyObject *m_##name(PyObject *self, PyObject *const *a, Py_ssize_t n, PyObject *kw) {    \
        return cast_method(self, a, n, kw, dt, #name);                                             \
    }
CAST_METHOD(float, TS_F32)
CAST_METHOD(double, TS_F64)
CAST_METHOD(half, TS_F16)
CAST_METHOD(bfloat16, TS_BF16)
CAST_METHOD(long, TS_I64)
CAST_METHOD(int, TS_I32)
CAST_METHOD(byte, TS_U8)
CAST_METHOD(char, TS_I8)
CAST_METHOD(short, TS_I16)
CAST_METHOD(bool, TS_BOOL)
CAST_METHOD(cfloat, TS_C64)
CAST_METHOD(cdouble, TS_C128)

static PyObject *m_pin_memory(PyObject *self, PyObject *unused) {
    (void)unused;
    return tsp_unary(ts_pin_memory, T(self));
}
static PyObject *m_contiguous(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                              PyObject *kw) {
    static const char *const names[] = {"memory_format"};
    PyObject *a[1];
    if (tsp_parse(args, nargs, kw, "contiguous", names, 1, 0, a) < 0) return NULL;
    const int f = tsp_memory_format_arg(a[0], "contiguous");
    if (f == -2) return NULL;
    return in_format(self, f < 0 ? 0 : f);
}
static PyObject *m_clone(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kw) {
    static const char *const names[] = {"memory_format"};
    PyObject *a[1];
    if (tsp_parse(args, nargs, kw, "clone", names, 1, 0, a) < 0) return NULL;
    const int f = tsp_memory_format_arg(a[0], "clone");
    if (f == -2) return NULL;
    if (f < 0 || ts_is_contiguous_format(T(self), (ts_memory_format)f))
        return tsp_unary(ts_clone, T(self)); /* keeps a channels_last input's format */
    return tsp_wrap(ts_contiguous_format(T(self), (ts_memory_format)f)); /* a copy: not in f */
}
/* dst.copy_(src): src moved to dst's device first (torch copies across devices) */
static PyObject *m_copy_(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kw) {
    static const char *const names[] = {"src", "non_blocking"};
    PyObject *a[2];
    if (tsp_parse(args, nargs, kw, "copy_", names, 2, 1, a) < 0) return NULL;
    ts_tensor *src = tsp_tensor_arg(a[0], "copy_", "src"), *dst = T(self), *r = NULL;
    if (!src || tsp_enter()) return NULL;
    Py_BEGIN_ALLOW_THREADS;
    ts_tensor *moved_src = ts_to(src, ts_device_of(dst));
    if (moved_src) r = ts_copy_(dst, moved_src);
    tsp_drop(moved_src);
    Py_END_ALLOW_THREADS;
    return tsp_inplace_result(self, r);
}

PyMethodDef tsp_tensor_move_methods[] = {
    {"to", FN(m_to), FAST, "to(device=None, dtype=None, non_blocking=False, copy=False)"},
    {"cuda", FN(m_cuda), FAST, "cuda(device=None, non_blocking=False)"},
    {"cpu", m_cpu, METH_NOARGS, "a copy on the cpu (self when already there)"},
    {"type", FN(m_type), FAST, "type(dtype=None): the type name, or a cast"},
    {"type_as", m_type_as, METH_O, "type_as(other): other's dtype on other's device"},
    {"float", FN(m_float), FAST, NULL},
    {"double", FN(m_double), FAST, NULL},
    {"half", FN(m_half), FAST, NULL},
    {"bfloat16", FN(m_bfloat16), FAST, NULL},
    {"long", FN(m_long), FAST, NULL},
    {"int", FN(m_int), FAST, NULL},
    {"byte", FN(m_byte), FAST, NULL},
    {"bool", FN(m_bool), FAST, NULL},
    {"char", FN(m_char), FAST, NULL},
    {"short", FN(m_short), FAST, NULL},
    {"cfloat", FN(m_cfloat), FAST, NULL},
    {"cdouble", FN(m_cdouble), FAST, NULL},
    {"pin_memory", m_pin_memory, METH_NOARGS, "a copy in page-locked memory"},
    {"contiguous", FN(m_contiguous), FAST, NULL},
    {"clone", FN(m_clone), FAST, NULL},
    {"copy_", FN(m_copy_), FAST, "copy_(src, non_blocking=False)"},
    {NULL, NULL, 0, NULL},
};
