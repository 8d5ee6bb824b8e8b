/* nn_resample.c — tessera._C's padding and resampling functions (_nn_pad, _nn_interpolate,
 * _nn_pixel_shuffle), each one C call (src/ops/pad_resample.c); tessera.nn.functional parses
 * PyTorch's argument forms and passes plain values here. */
#include "nn_impl.h"

/* a tuple / list of at most max ints (or floats when d != NULL) into i[] / d[]; -1: TypeError */
static int read_numbers(PyObject *o, int64_t *i, double *d, int max, const char *fn,
                        const char *arg) {
    PyObject *seq = PySequence_Fast(o, "");
    if (!seq) {
        PyErr_Format(PyExc_TypeError, "%s(): argument '%s' must be a tuple of %s, not %s", fn, arg,
                     d ? "floats" : "ints", Py_TYPE(o)->tp_name);
        return -1;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (n > max) {
        Py_DECREF(seq);
        PyErr_Format(PyExc_ValueError, "%s(): argument '%s' has %zd values, at most %d allowed", fn,
                     arg, n, max);
        return -1;
    }
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *v = PySequence_Fast_GET_ITEM(seq, k);
        if (d)
            d[k] = PyFloat_AsDouble(v);
        else
            i[k] = PyLong_AsLongLong(v);
        if (PyErr_Occurred()) {
            Py_DECREF(seq);
            PyErr_Format(PyExc_TypeError, "%s(): argument '%s' must hold %s", fn, arg,
                         d ? "numbers" : "ints");
            return -1;
        }
    }
    Py_DECREF(seq);
    return (int)n;
}

/* _nn_pad(x, pad, mode, value): mode 0 constant, 1 reflect, 2 replicate, 3 circular */
static PyObject *nn_pad(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *xo, *po;
    int mode;
    double value;
    if (!PyArg_ParseTuple(args, "OOid:_nn_pad", &xo, &po, &mode, &value)) return NULL;
    int64_t pad[2 * TS_MAX_DIMS + 2];
    int n = read_numbers(po, pad, NULL, 2 * TS_MAX_DIMS + 2, "pad", "pad");
    ts_tensor *x = n < 0 ? NULL : tsp_tensor_arg(xo, "pad", "input"), *y;
    if (!x || tsp_enter() < 0) return NULL;
    TSP_NOGIL(y = ts_pad(x, pad, n, (ts_pad_mode)mode, value));
    return tsp_wrap(y);
}

/* _nn_interpolate(x, size or None, scale_factor or None, mode, align_corners,
 * recompute_scale_factor, antialias) */
static PyObject *nn_interpolate(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *xo, *so, *fo;
    int mode, ac, recompute, aa;
    if (!PyArg_ParseTuple(args, "OOOippp:_nn_interpolate", &xo, &so, &fo, &mode, &ac, &recompute,
                          &aa))
        return NULL;
    int64_t size[3];
    double scale[3];
    ts_interp_opts o = {.mode = (ts_interp_mode)mode,
                        .align_corners = ac,
                        .recompute_scale_factor = recompute,
                        .antialias = aa};
    if (so != Py_None) {
        if ((o.n = read_numbers(so, size, NULL, 3, "interpolate", "size")) < 0) return NULL;
        o.size = size;
    }
    if (fo != Py_None) {
        int n = read_numbers(fo, NULL, scale, 3, "interpolate", "scale_factor");
        if (n < 0) return NULL;
        o.n = n, o.scale_factor = scale;
    }
    ts_tensor *x = tsp_tensor_arg(xo, "interpolate", "input"), *y;
    if (!x || tsp_enter() < 0) return NULL;
    TSP_NOGIL(y = ts_interpolate(x, o));
    return tsp_wrap(y);
}

/* _nn_pixel_shuffle(x, factor, inverse) */
static PyObject *nn_pixel_shuffle(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *xo;
    long long r;
    int inverse;
    if (!PyArg_ParseTuple(args, "OLp:_nn_pixel_shuffle", &xo, &r, &inverse)) return NULL;
    const char *fn = inverse ? "pixel_unshuffle" : "pixel_shuffle";
    ts_tensor *x = tsp_tensor_arg(xo, fn, "input"), *y;
    if (!x || tsp_enter() < 0) return NULL;
    TSP_NOGIL(y = inverse ? ts_pixel_unshuffle(x, r) : ts_pixel_shuffle(x, r));
    return tsp_wrap(y);
}

static PyMethodDef resample_functions[] = {
    {"_nn_pad", FN(nn_pad), METH_VARARGS, "_nn_pad(x, pad, mode, value)"},
    {"_nn_interpolate", FN(nn_interpolate), METH_VARARGS,
     "_nn_interpolate(x, size, scale_factor, mode, align_corners, recompute, antialias)"},
    {"_nn_pixel_shuffle", FN(nn_pixel_shuffle), METH_VARARGS,
     "_nn_pixel_shuffle(x, factor, inverse)"},
    {NULL, NULL, 0, NULL},
};

int tsp_init_nn_resample(PyObject *m) { return PyModule_AddFunctions(m, resample_functions); }
