/* image.c — tessera.vision's C image functions: _image_save_png(path, tensor), _image_read(path,
 * channels=0) and _image_decode(data: bytes, channels=0) (ts_image_save_png / read / decode). */
#include "tessera/image.h"
#include "tsp.h"

static PyObject *py_image_save_png(PyObject *self, PyObject *args, PyObject *kw) {
    (void)self;
    static char *kwlist[] = {"path", "tensor", NULL};
    PyObject *path, *obj;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O&O:_image_save_png", kwlist, PyUnicode_FSConverter,
                                     &path, &obj))
        return NULL;
    ts_tensor *t = tsp_tensor_arg(obj, "_image_save_png", "tensor");
    ts_status s = TS_ERR_ARG;
    if (t) TSP_NOGIL(s = ts_image_save_png(PyBytes_AS_STRING(path), t););
    Py_DECREF(path);
    if (!t) return NULL;
    if (s) return tsp_raise_pending();
    Py_RETURN_NONE;
}

static PyObject *py_image_read(PyObject *self, PyObject *args, PyObject *kw) {
    (void)self;
    static char *kwlist[] = {"path", "channels", NULL};
    PyObject *path;
    int channels = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O&|i:_image_read", kwlist, PyUnicode_FSConverter,
                                     &path, &channels))
        return NULL;
    ts_tensor *t;
    TSP_NOGIL(t = ts_image_read(PyBytes_AS_STRING(path), channels););
    Py_DECREF(path);
    return tsp_wrap_owned(t);
}

static PyObject *py_image_decode(PyObject *self, PyObject *args, PyObject *kw) {
    (void)self;
    static char *kwlist[] = {"data", "channels", NULL};
    Py_buffer buf;
    int channels = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "y*|i:_image_decode", kwlist, &buf, &channels))
        return NULL;
    ts_tensor *t;
    TSP_NOGIL(t = ts_image_decode(buf.buf, (size_t)buf.len, channels););
    PyBuffer_Release(&buf);
    return tsp_wrap_owned(t);
}

static PyMethodDef image_methods[] = {
    {"_image_save_png", TSP_KW(py_image_save_png),
     "_image_save_png(path, tensor): writes a uint8 [C,H,W] (C 1, 3, 4) or [H,W] tensor as PNG."},
    {"_image_read", TSP_KW(py_image_read),
     "_image_read(path, channels=0): an image file decoded to a uint8 [C,H,W] cpu tensor."},
    {"_image_decode", TSP_KW(py_image_decode),
     "_image_decode(data, channels=0): encoded image bytes decoded to a uint8 [C,H,W] tensor."},
    {NULL, NULL, 0, NULL},
};

int tsp_init_image(PyObject *m) { return PyModule_AddFunctions(m, image_methods); }
