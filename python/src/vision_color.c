/* vision_color.c — tessera.vision.transforms.functional's colour and blur kernels: each calls its
 * one C function (tessera/vision_ops.h, src/ops/vision_color.c). */
#include "tsp.h"

#include <string.h>

/* _vision_rgb_to_grayscale(img, num_output_channels) */
static PyObject *rgb_to_grayscale(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *io;
    int n;
    if (!PyArg_ParseTuple(args, "Oi:rgb_to_grayscale", &io, &n)) return NULL;
    ts_tensor *img = tsp_tensor_arg(io, "rgb_to_grayscale", "img"), *y;
    if (!img || tsp_enter() < 0) return NULL;
    TSP_NOGIL(y = ts_rgb_to_grayscale(img, n));
    return tsp_wrap(y);
}

/* _vision_adjust(kind, img, factor): kind "brightness", "contrast", "saturation" or "hue" */
static PyObject *adjust(PyObject *self, PyObject *args) {
    (void)self;
    const char *kind;
    PyObject *io;
    double f;
    if (!PyArg_ParseTuple(args, "sOd:adjust", &kind, &io, &f)) return NULL;
    static const struct {
        const char *name;
        ts_tensor *(*fn)(ts_tensor *, double);
    } kinds[] = {{"brightness", ts_adjust_brightness},
                 {"contrast", ts_adjust_contrast},
                 {"saturation", ts_adjust_saturation},
                 {"hue", ts_adjust_hue}};
    size_t k = 0;
    while (k < sizeof kinds / sizeof *kinds && strcmp(kinds[k].name, kind) != 0) k++;
    if (k == sizeof kinds / sizeof *kinds)
        return PyErr_Format(PyExc_ValueError, "adjust: unknown adjustment '%s'", kind);
    ts_tensor *img = tsp_tensor_arg(io, "adjust", "img"), *y;
    if (!img || tsp_enter() < 0) return NULL;
    TSP_NOGIL(y = kinds[k].fn(img, f));
    return tsp_wrap(y);
}

/* _vision_gaussian_blur(img, kx, ky, sigma_x, sigma_y) */
static PyObject *gaussian_blur(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *io;
    long long kx, ky;
    double sx, sy;
    if (!PyArg_ParseTuple(args, "OLLdd:gaussian_blur", &io, &kx, &ky, &sx, &sy)) return NULL;
    ts_tensor *img = tsp_tensor_arg(io, "gaussian_blur", "img"), *y;
    if (!img || tsp_enter() < 0) return NULL;
    TSP_NOGIL(y = ts_gaussian_blur(img, kx, ky, sx, sy));
    return tsp_wrap(y);
}

/* _vision_convert_image_dtype(img, dtype) */
static PyObject *convert_image_dtype(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *io, *dto;
    if (!PyArg_ParseTuple(args, "OO:convert_image_dtype", &io, &dto)) return NULL;
    ts_tensor *img = tsp_tensor_arg(io, "convert_image_dtype", "image"), *y;
    ts_dtype dt = TS_F32;
    if (!img || tsp_dtype_arg(dto, &dt, "convert_image_dtype", "dtype") < 0 || tsp_enter() < 0)
        return NULL;
    TSP_NOGIL(y = ts_convert_image_dtype(img, dt));
    return tsp_wrap(y);
}

/* a sequence of floats into a PyMem array (*n of them); NULL with an exception */
static double *doubles(PyObject *seq, int *n, const char *what) {
    PyObject *fast = PySequence_Fast(seq, what);
    if (!fast) return NULL;
    Py_ssize_t len = PySequence_Fast_GET_SIZE(fast);
    double *v = PyMem_Calloc((size_t)len + 1, sizeof *v);
    if (!v) PyErr_NoMemory();
    for (Py_ssize_t i = 0; v && i < len; i++)
        if ((v[i] = PyFloat_AsDouble(PySequence_Fast_GET_ITEM(fast, i))) == -1 && PyErr_Occurred())
            PyMem_Free(v), v = NULL;
    Py_DECREF(fast);
    *n = (int)len;
    return v;
}

/* _vision_normalize(img, mean, std, inplace) */
static PyObject *normalize(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *io, *mo, *so;
    int inplace, nm = 0, ns = 0;
    if (!PyArg_ParseTuple(args, "OOOp:normalize", &io, &mo, &so, &inplace)) return NULL;
    ts_tensor *img = tsp_tensor_arg(io, "normalize", "tensor"), *y = NULL;
    if (!img) return NULL;
    double *m = doubles(mo, &nm, "normalize(): mean must be a sequence of numbers");
    double *s = m ? doubles(so, &ns, "normalize(): std must be a sequence of numbers") : NULL;
    if (!s || tsp_enter() < 0) return PyMem_Free(m), PyMem_Free(s), NULL;
    TSP_NOGIL(y = ts_image_normalize(img, m, nm, s, ns, inplace));
    PyMem_Free(m), PyMem_Free(s);
    return tsp_wrap(y);
}

/* _vision_resize_antialias(x, oh, ow) */
static PyObject *resize_antialias(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *xo;
    long long oh, ow;
    if (!PyArg_ParseTuple(args, "OLL:resize_antialias", &xo, &oh, &ow)) return NULL;
    ts_tensor *x = tsp_tensor_arg(xo, "resize_antialias", "x"), *y;
    if (!x || tsp_enter() < 0) return NULL;
    TSP_NOGIL(y = ts_resize_antialias(x, oh, ow));
    return tsp_wrap(y);
}

static PyMethodDef color_functions[] = {
    {"_vision_rgb_to_grayscale", rgb_to_grayscale, METH_VARARGS, NULL},
    {"_vision_adjust", adjust, METH_VARARGS, NULL},
    {"_vision_gaussian_blur", gaussian_blur, METH_VARARGS, NULL},
    {"_vision_convert_image_dtype", convert_image_dtype, METH_VARARGS, NULL},
    {"_vision_normalize", normalize, METH_VARARGS, NULL},
    {"_vision_resize_antialias", resize_antialias, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

int tsp_init_vision_color(PyObject *m) { return PyModule_AddFunctions(m, color_functions); }
