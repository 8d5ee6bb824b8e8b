/* nn_conv.c — tessera._C's convolutions beyond conv2d (_nn_convnd: conv1d, conv3d and the
 * transposed ones) and unfold / fold (_nn_im2col, _nn_col2im), each one C call
 * (include/tessera/conv.h); tessera.nn.functional parses PyTorch's argument forms and passes
 * 3-tuples here (a k-dim op reads the first k entries). */
#include "nn_impl.h"
#include "tessera/conv.h"

/* _nn_convnd(transposed, k, x, w, b, stride, padding, dilation, output_padding, groups) */
static PyObject *nn_convnd(PyObject *self, PyObject *args) {
    (void)self;
    int transposed, k;
    PyObject *xo, *wo, *bo;
    ts_convnd_opts c = {0};
    if (!PyArg_ParseTuple(args, "piOOO(iii)(iii)(iii)(iii)i:_nn_convnd", &transposed, &k, &xo, &wo,
                          &bo, &c.stride[0], &c.stride[1], &c.stride[2], &c.padding[0],
                          &c.padding[1], &c.padding[2], &c.dilation[0], &c.dilation[1],
                          &c.dilation[2], &c.output_padding[0], &c.output_padding[1],
                          &c.output_padding[2], &c.groups))
        return NULL;
    static const char *const names[2][3] = {
        {"conv1d", "conv2d", "conv3d"},
        {"conv_transpose1d", "conv_transpose2d", "conv_transpose3d"}};
    if (k < 1 || k > 3) return PyErr_Format(PyExc_ValueError, "_nn_convnd: k must be 1, 2 or 3");
    const char *fn = names[transposed][k - 1];
    ts_tensor *x = tsp_tensor_arg(xo, fn, "input"), *w, *b = NULL, *y;
    if (!x || !(w = tsp_tensor_arg(wo, fn, "weight")) || tspn_opt_tensor(bo, &b, fn, "bias") < 0 ||
        tsp_enter() < 0)
        return NULL;
    if (!transposed && k == 2) {
        const ts_conv2d_opts o2 = {.stride = {c.stride[0], c.stride[1]},
                                   .padding = {c.padding[0], c.padding[1]},
                                   .dilation = {c.dilation[0], c.dilation[1]},
                                   .groups = c.groups};
        TSP_NOGIL(y = ts_conv2d(x, w, b, o2));
    } else if (!transposed) {
        TSP_NOGIL(y = k == 1 ? ts_conv1d(x, w, b, c) : ts_conv3d(x, w, b, c));
    } else {
        TSP_NOGIL(y = k == 1   ? ts_conv_transpose1d(x, w, b, c)
                      : k == 2 ? ts_conv_transpose2d(x, w, b, c)
                               : ts_conv_transpose3d(x, w, b, c));
    }
    return tsp_wrap(y);
}

/* _nn_conv_padded(k, x, w, b, stride, padding, dilation, groups, pad, same): conv1d / 2d / 3d
 * (ts_conv_padded); pad None or 6 ints (before / after per spatial dim, first dim first; o.padding
 * then 0); same: PyTorch's padding='same' */
static PyObject *nn_conv_padded(PyObject *self, PyObject *args) {
    (void)self;
    int k, same, pad[6] = {0, 0, 0, 0, 0, 0};
    PyObject *xo, *wo, *bo, *po;
    ts_convnd_opts c = {0};
    if (!PyArg_ParseTuple(args, "iOOO(iii)(iii)(iii)iOp:_nn_conv_padded", &k, &xo, &wo, &bo,
                          &c.stride[0], &c.stride[1], &c.stride[2], &c.padding[0], &c.padding[1],
                          &c.padding[2], &c.dilation[0], &c.dilation[1], &c.dilation[2], &c.groups,
                          &po, &same))
        return NULL;
    if (po != Py_None && !PyArg_ParseTuple(po, "iiiiii:_nn_conv_padded", &pad[0], &pad[1], &pad[2],
                                           &pad[3], &pad[4], &pad[5]))
        return NULL;
    static const char *const names[3] = {"conv1d", "conv2d", "conv3d"};
    if (k < 1 || k > 3)
        return PyErr_Format(PyExc_ValueError, "_nn_conv_padded: k must be 1, 2 or 3");
    const char *fn = names[k - 1];
    c.padding_same = same;
    ts_tensor *x = tsp_tensor_arg(xo, fn, "input"), *w, *b = NULL, *y;
    if (!x || !(w = tsp_tensor_arg(wo, fn, "weight")) || tspn_opt_tensor(bo, &b, fn, "bias") < 0)
        return NULL;
    if (ts_ndim(w) != k + 2)
        return PyErr_Format(PyExc_RuntimeError,
                            "%s: expected a %d-D weight [out_channels, in_channels/groups, "
                            "*kernel], but got weight of %d dims",
                            fn, k + 2, ts_ndim(w));
    if (tsp_enter() < 0) return NULL;
    TSP_NOGIL(y = ts_conv_padded(x, w, b, c, po == Py_None ? NULL : pad));
    return tsp_wrap(y);
}

/* _nn_im2col(x, (kh, kw), (dh, dw), (ph, pw), (sh, sw)) */
static PyObject *nn_im2col(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *xo;
    int kernel[2];
    ts_conv2d_opts o = {0};
    if (!PyArg_ParseTuple(args, "O(ii)(ii)(ii)(ii):unfold", &xo, &kernel[0], &kernel[1],
                          &o.dilation[0], &o.dilation[1], &o.padding[0], &o.padding[1],
                          &o.stride[0], &o.stride[1]))
        return NULL;
    ts_tensor *x = tsp_tensor_arg(xo, "unfold", "input"), *y;
    if (!x || tsp_enter() < 0) return NULL;
    TSP_NOGIL(y = ts_im2col(x, kernel, o));
    return tsp_wrap(y);
}

/* _nn_col2im(x, (oh, ow), (kh, kw), (dh, dw), (ph, pw), (sh, sw)) */
static PyObject *nn_col2im(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *xo;
    int kernel[2];
    long long size[2];
    ts_conv2d_opts o = {0};
    if (!PyArg_ParseTuple(args, "O(LL)(ii)(ii)(ii)(ii):fold", &xo, &size[0], &size[1], &kernel[0],
                          &kernel[1], &o.dilation[0], &o.dilation[1], &o.padding[0], &o.padding[1],
                          &o.stride[0], &o.stride[1]))
        return NULL;
    ts_tensor *x = tsp_tensor_arg(xo, "fold", "input"), *y;
    if (!x || tsp_enter() < 0) return NULL;
    const int64_t out_size[2] = {size[0], size[1]};
    TSP_NOGIL(y = ts_col2im(x, out_size, kernel, o));
    return tsp_wrap(y);
}

static PyMethodDef conv_functions[] = {
    {"_nn_convnd", FN(nn_convnd), METH_VARARGS,
     "_nn_convnd(transposed, k, x, w, b, stride, padding, dilation, output_padding, groups)"},
    {"_nn_conv_padded", FN(nn_conv_padded), METH_VARARGS,
     "_nn_conv_padded(k, x, w, b, stride, padding, dilation, groups, pad, same)"},
    {"_nn_im2col", FN(nn_im2col), METH_VARARGS, "_nn_im2col(x, kernel, dilation, padding, stride)"},
    {"_nn_col2im", FN(nn_col2im), METH_VARARGS,
     "_nn_col2im(x, output_size, kernel, dilation, padding, stride)"},
    {NULL, NULL, 0, NULL},
};

int tsp_init_nn_conv(PyObject *m) { return PyModule_AddFunctions(m, conv_functions); }
