/* nn_resample.c — tessera._C's padding and resampling functions (_nn_pad, _nn_interpolate,
 * _nn_pixel_shuffle, _nn_grid_sample, _nn_affine_grid), each one C call (src/ops/pad_resample.c,
 * src/nn/grid_sample.c); tessera.nn.functional parses
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
 * recompute_scale_factor, antialias): size / scale_factor a sequence or one number for every
 * spatial dim */
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
    ts_tensor *x = tsp_tensor_arg(xo, "interpolate", "input"), *y;
    if (!x) return NULL;
    /* one number (not a sequence) stands for every spatial dim */
    const int spatial = ts_ndim(x) - 2 < 0 ? 0 : ts_ndim(x) - 2 > 3 ? 3 : ts_ndim(x) - 2;
    if (so != Py_None && !PySequence_Check(so)) {
        size[0] = PyLong_AsLongLong(so);
        if (PyErr_Occurred()) return NULL;
        for (int k = 1; k < spatial; k++) size[k] = size[0];
        o.n = spatial, o.size = size;
    } else if (so != Py_None) {
        if ((o.n = read_numbers(so, size, NULL, 3, "interpolate", "size")) < 0) return NULL;
        o.size = size;
    }
    if (fo != Py_None && !PySequence_Check(fo)) {
        scale[0] = PyFloat_AsDouble(fo);
        if (PyErr_Occurred()) return NULL;
        for (int k = 1; k < spatial; k++) scale[k] = scale[0];
        o.n = spatial, o.scale_factor = scale;
    } else if (fo != Py_None) {
        int n = read_numbers(fo, NULL, scale, 3, "interpolate", "scale_factor");
        if (n < 0) return NULL;
        o.n = n, o.scale_factor = scale;
    }
    if (tsp_enter() < 0) return NULL;
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

/* _nn_channel_shuffle(x, groups) */
static PyObject *nn_channel_shuffle(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *xo;
    long long g;
    if (!PyArg_ParseTuple(args, "OL:_nn_channel_shuffle", &xo, &g)) return NULL;
    ts_tensor *x = tsp_tensor_arg(xo, "channel_shuffle", "input"), *y;
    if (!x || tsp_enter() < 0) return NULL;
    TSP_NOGIL(y = ts_channel_shuffle(x, (int64_t)g));
    return tsp_wrap(y);
}

/* _nn_grid_sample(input, grid, mode, padding_mode, align_corners): mode and padding_mode as
 * ts_grid_mode / ts_grid_padding (tessera.nn.functional_grid names them) */
static PyObject *nn_grid_sample(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *xo, *go;
    int mode, pad, ac;
    if (!PyArg_ParseTuple(args, "OOiip:_nn_grid_sample", &xo, &go, &mode, &pad, &ac)) return NULL;
    ts_tensor *x = tsp_tensor_arg(xo, "grid_sample", "input");
    ts_tensor *g = x ? tsp_tensor_arg(go, "grid_sample", "grid") : NULL, *y;
    if (!g || tsp_enter() < 0) return NULL;
    TSP_NOGIL(y = ts_grid_sample(x, g, (ts_grid_mode)mode, (ts_grid_padding)pad, ac));
    return tsp_wrap(y);
}

/* _nn_affine_grid(theta, size, align_corners) */
static PyObject *nn_affine_grid(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *to, *so;
    int ac;
    if (!PyArg_ParseTuple(args, "OOp:_nn_affine_grid", &to, &so, &ac)) return NULL;
    ts_shape size = {0};
    int n = read_numbers(so, size.dims, NULL, TS_MAX_DIMS, "affine_grid", "size");
    ts_tensor *t = n < 0 ? NULL : tsp_tensor_arg(to, "affine_grid", "theta"), *y;
    if (!t || tsp_enter() < 0) return NULL;
    size.ndim = n;
    TSP_NOGIL(y = ts_affine_grid(t, size, ac));
    return tsp_wrap(y);
}

static PyMethodDef resample_functions[] = {
    {"_nn_pad", FN(nn_pad), METH_VARARGS, "_nn_pad(x, pad, mode, value)"},
    {"_nn_interpolate", FN(nn_interpolate), METH_VARARGS,
     "_nn_interpolate(x, size, scale_factor, mode, align_corners, recompute, antialias)"},
    {"_nn_pixel_shuffle", FN(nn_pixel_shuffle), METH_VARARGS,
     "_nn_pixel_shuffle(x, factor, inverse)"},
    {"_nn_channel_shuffle", FN(nn_channel_shuffle), METH_VARARGS, "_nn_channel_shuffle(x, groups)"},
    {"_nn_grid_sample", FN(nn_grid_sample), METH_VARARGS,
     "_nn_grid_sample(input, grid, mode, padding_mode, align_corners)"},
    {"_nn_affine_grid", FN(nn_affine_grid), METH_VARARGS,
     "_nn_affine_grid(theta, size, align_corners)"},
    {NULL, NULL, 0, NULL},
};

int tsp_init_nn_resample(PyObject *m) { return PyModule_AddFunctions(m, resample_functions); }
