/* tensor_quant.c — quantized tensors in tessera._C (include/tessera/quant.h): quantize_per_tensor
 * / quantize_per_channel / dequantize as functions, dequantize / int_repr / q_scale /
 * q_zero_point / q_per_channel_* as Tensor methods, and the functions behind
 * tessera.ao.nn.quantized.dynamic.Linear (_dynamic_quantized_linear, _choose_qparams_per_tensor).
 */
#include "tensor_impl.h"
#include "tessera/quant.h"

#define T TSP_T

static PyObject *f_quantize_per_tensor SIG {
    (void)mod;
    PARSE("quantize_per_tensor", 4, "input", "scale", "zero_point", "dtype");
    ts_tensor *x = TARG(0, "quantize_per_tensor");
    double scale;
    int64_t zp;
    ts_dtype dt = TS_DTYPE_COUNT;
    if (!x || tsp_scalar_arg(a[1], 0, &scale, "quantize_per_tensor", "scale") < 0 ||
        tsp_int_or_tensor_arg(a[2], &zp, "quantize_per_tensor", "zero_point") < 0 ||
        tsp_dtype_arg(a[3], &dt, "quantize_per_tensor", "dtype") < 0 || tsp_enter())
        return NULL;
    ts_tensor *r;
    TSP_NOGIL(r = ts_quantize_per_tensor(x, scale, zp, dt));
    return tsp_wrap(r);
}

static PyObject *f_quantize_per_channel SIG {
    (void)mod;
    PARSE("quantize_per_channel", 5, "input", "scales", "zero_points", "axis", "dtype");
    ts_tensor *x = TARG(0, "quantize_per_channel"), *s = x ? TARG(1, "quantize_per_channel") : NULL,
              *z = s ? TARG(2, "quantize_per_channel") : NULL;
    int64_t axis;
    ts_dtype dt = TS_DTYPE_COUNT;
    if (!z || tsp_int_arg(a[3], &axis, "quantize_per_channel", "axis") < 0 ||
        tsp_dtype_arg(a[4], &dt, "quantize_per_channel", "dtype") < 0 || tsp_enter())
        return NULL;
    ts_tensor *r;
    TSP_NOGIL(r = ts_quantize_per_channel(x, s, z, (int)axis, dt));
    return tsp_wrap(r);
}

/* _quantize_per_group(input, scales, zero_points, group_size, dtype) */
static PyObject *f__quantize_per_group SIG {
    (void)mod;
    PARSE("quantize_per_group", 5, "input", "scales", "zero_points", "group_size", "dtype");
    ts_tensor *x = TARG(0, "quantize_per_group"), *s = x ? TARG(1, "quantize_per_group") : NULL,
              *z = s ? TARG(2, "quantize_per_group") : NULL;
    int64_t gs;
    ts_dtype dt = TS_DTYPE_COUNT;
    if (!z || tsp_int_arg(a[3], &gs, "quantize_per_group", "group_size") < 0 ||
        tsp_dtype_arg(a[4], &dt, "quantize_per_group", "dtype") < 0 || tsp_enter())
        return NULL;
    ts_tensor *r;
    TSP_NOGIL(r = ts_quantize_per_group(x, s, z, gs, dt));
    return tsp_wrap(r);
}

TSP_DEF_UNARY(dequantize, ts_dequantize)
TSP_DEF_UNARY(int_repr, ts_int_repr)
TSP_DEF_UNARY(q_per_channel_scales, ts_q_per_channel_scales)
TSP_DEF_UNARY(q_per_channel_zero_points, ts_q_per_channel_zero_points)

static PyObject *m_q_scale(PyObject *self, PyObject *unused) {
    (void)unused;
    double s = ts_q_scale(T(self));
    return tsp_check() ? NULL : PyFloat_FromDouble(s);
}
static PyObject *m_q_zero_point(PyObject *self, PyObject *unused) {
    (void)unused;
    int64_t z = 0;
    ts_q_zero_point(T(self), &z);
    return tsp_check() ? NULL : PyLong_FromLongLong((long long)z);
}
static PyObject *m_q_per_channel_axis(PyObject *self, PyObject *unused) {
    (void)unused;
    int axis = ts_q_per_channel_axis(T(self));
    return tsp_check() ? NULL : PyLong_FromLong(axis);
}
static PyObject *m__q_group_size(PyObject *self, PyObject *unused) {
    (void)unused;
    int64_t g = ts_q_group_size(T(self));
    return tsp_check() ? NULL : PyLong_FromLongLong((long long)g);
}
/* the qscheme as PyTorch's name ("per_tensor_affine"...); tessera.qscheme objects are those str */
static PyObject *m_qscheme(PyObject *self, PyObject *unused) {
    (void)unused;
    ts_qscheme q = ts_qscheme_of(T(self));
    if (tsp_check()) return NULL;
    return PyUnicode_FromString(q == TS_PER_TENSOR_AFFINE    ? "per_tensor_affine"
                                : q == TS_PER_CHANNEL_AFFINE ? "per_channel_affine"
                                                             : "per_group_affine");
}
int tsp_tensor_is_quantized(ts_tensor *t) {
    ts_dtype dt = ts_dtype_of(t);
    return dt == TS_QINT8 || dt == TS_QUINT8 || dt == TS_QINT32 || dt == TS_QUINT4X2;
}
static PyObject *get_is_quantized(PyObject *self, void *unused) {
    (void)unused;
    return PyBool_FromLong(tsp_tensor_is_quantized(T(self)));
}

/* tensor([...dequantized...], size=(2,), dtype=tessera.qint8,
 *        quantization_scheme=tessera.per_tensor_affine, scale=0.5, zero_point=0) */
PyObject *tsp_quant_repr(PyObject *self) {
    PyObject *d = m_dequantize(self, NULL);
    if (!d) return NULL;
    PyObject *vals = PyObject_CallMethod(d, "tolist", NULL), *size = NULL, *extra = NULL, *r = NULL;
    Py_DECREF(d);
    ts_tensor *t = T(self);
    ts_qscheme q = ts_qscheme_of(t);
    if (vals) size = PyObject_GetAttrString(self, "shape");
    if (size && q == TS_PER_TENSOR_AFFINE) {
        int64_t z = 0;
        ts_q_zero_point(t, &z);
        PyObject *sc = PyFloat_FromDouble(ts_q_scale(t));
        if (sc) extra = PyUnicode_FromFormat("scale=%R, zero_point=%lld", sc, (long long)z);
        Py_XDECREF(sc);
    } else if (size) {
        PyObject *s = m_q_per_channel_scales(self, NULL),
                 *z = s ? m_q_per_channel_zero_points(self, NULL) : NULL;
        if (z)
            extra = PyUnicode_FromFormat("scale=%R, zero_point=%R, axis=%d", s, z,
                                         ts_q_per_channel_axis(t));
        Py_XDECREF(s);
        Py_XDECREF(z);
    }
    if (extra)
        r = PyUnicode_FromFormat("tensor(%R, size=%R, dtype=tessera.%s, "
                                 "quantization_scheme=tessera.%s, %U)",
                                 vals, size, ts_dtype_name(ts_dtype_of(t)),
                                 q == TS_PER_TENSOR_AFFINE    ? "per_tensor_affine"
                                 : q == TS_PER_CHANNEL_AFFINE ? "per_channel_affine"
                                                              : "per_group_affine",
                                 extra);
    Py_XDECREF(vals);
    Py_XDECREF(size);
    Py_XDECREF(extra);
    return r;
}

/* _dynamic_quantized_linear(input, weight, bias=None, reduce_range=True) */
static PyObject *f__dynamic_quantized_linear SIG {
    (void)mod;
    PARSE("dynamic_quantized_linear", 2, "input", "weight", "bias", "reduce_range");
    ts_tensor *x = TARG(0, "dynamic_quantized_linear"),
              *w = x ? TARG(1, "dynamic_quantized_linear") : NULL, *b = NULL;
    bool rr = true;
    if (!w) return NULL;
    if (a[2] && a[2] != Py_None && !(b = TARG(2, "dynamic_quantized_linear"))) return NULL;
    if (tsp_bool_arg(a[3], true, &rr, "dynamic_quantized_linear", "reduce_range") < 0 ||
        tsp_enter())
        return NULL;
    ts_tensor *r;
    TSP_NOGIL(r = ts_dynamic_quantized_linear(x, w, b, rr));
    return tsp_wrap(r);
}

/* _dynamic_quantized_lstm(input, h0, c0, params, num_layers, bidirectional, batch_first, bias,
 * reduce_range=True) -> (output, h_n, c_n); h0 / c0 None: zeros; params a sequence of tensors
 * (ts_dynamic_quantized_lstm's order) */
static PyObject *f__dynamic_quantized_lstm SIG {
    (void)mod;
    static const char *fn = "dynamic_quantized_lstm";
    PARSE("dynamic_quantized_lstm", 8, "input", "h0", "c0", "params", "num_layers", "bidirectional",
          "batch_first", "bias", "reduce_range");
    ts_tensor *x = TARG(0, fn), *h0 = NULL, *c0 = NULL;
    if (!x) return NULL;
    if (a[1] != Py_None && !(h0 = TARG(1, fn))) return NULL;
    if (a[2] != Py_None && !(c0 = TARG(2, fn))) return NULL;
    int64_t layers;
    ts_dqlstm_opts o = {0};
    if (tsp_int_arg(a[4], &layers, fn, "num_layers") < 0 ||
        tsp_bool_arg(a[5], false, &o.bidirectional, fn, "bidirectional") < 0 ||
        tsp_bool_arg(a[6], false, &o.batch_first, fn, "batch_first") < 0 ||
        tsp_bool_arg(a[7], true, &o.bias, fn, "bias") < 0 ||
        tsp_bool_arg(a[8], true, &o.reduce_range, fn, "reduce_range") < 0)
        return NULL;
    if (layers < 1) {
        PyErr_Format(PyExc_ValueError, "%s: num_layers must be positive (got %lld)", fn,
                     (long long)layers);
        return NULL;
    }
    o.num_layers = layers;
    PyObject *seq = PySequence_Fast(a[3], "dynamic_quantized_lstm: params must be a sequence");
    if (!seq) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    ts_tensor **ps = PyMem_Calloc((size_t)n + 1, sizeof *ps);
    PyObject *r = NULL;
    if (!ps) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++)
        if (!(ps[i] = tsp_tensor_arg(PySequence_Fast_GET_ITEM(seq, i), fn, "params"))) goto done;
    if (tsp_enter()) goto done;
    ts_tensor *out[3] = {NULL, NULL, NULL};
    TSP_NOGIL(out[0] = ts_dynamic_quantized_lstm(x, h0, c0, ps, (int64_t)n, o, &out[1], &out[2]));
    r = tsp_results(fn, out, 3);
done:
    PyMem_Free(ps);
    Py_DECREF(seq);
    return r;
}

/* _quantized_linear(input, weight, bias, scale, zero_point, relu=False): bias int32 or None */
static PyObject *f__quantized_linear SIG {
    (void)mod;
    PARSE("quantized_linear", 5, "input", "weight", "bias", "scale", "zero_point", "relu");
    ts_tensor *x = TARG(0, "quantized_linear"), *w = x ? TARG(1, "quantized_linear") : NULL,
              *b = NULL;
    double s;
    int64_t z;
    bool relu = false;
    if (!w) return NULL;
    if (a[2] && a[2] != Py_None && !(b = TARG(2, "quantized_linear"))) return NULL;
    if (tsp_double_arg(a[3], 0, &s, "quantized_linear", "scale") < 0 ||
        tsp_int_arg(a[4], &z, "quantized_linear", "zero_point") < 0 ||
        tsp_bool_arg(a[5], false, &relu, "quantized_linear", "relu") < 0 || tsp_enter())
        return NULL;
    ts_tensor *r;
    TSP_NOGIL(r = ts_quantized_linear(x, w, b, s, z, relu));
    return tsp_wrap(r);
}

/* _weight_only_linear(input, weight, bias=None): torchao's int8 / int4 weight-only linear */
static PyObject *f__weight_only_linear SIG {
    (void)mod;
    PARSE("weight_only_linear", 2, "input", "weight", "bias");
    ts_tensor *x = TARG(0, "weight_only_linear"), *w = x ? TARG(1, "weight_only_linear") : NULL,
              *b = NULL;
    if (!w) return NULL;
    if (a[2] && a[2] != Py_None && !(b = TARG(2, "weight_only_linear"))) return NULL;
    if (tsp_enter()) return NULL;
    ts_tensor *r;
    TSP_NOGIL(r = ts_weight_only_linear(x, w, b));
    return tsp_wrap(r);
}

/* _int8_dynamic_activation_linear(input, weight, bias=None): torchao's 8da8w / 8da4w linear */
static PyObject *f__int8_dynamic_activation_linear SIG {
    (void)mod;
    PARSE("int8_dynamic_activation_linear", 2, "input", "weight", "bias");
    ts_tensor *x = TARG(0, "int8_dynamic_activation_linear"),
              *w = x ? TARG(1, "int8_dynamic_activation_linear") : NULL, *b = NULL;
    if (!w) return NULL;
    if (a[2] && a[2] != Py_None && !(b = TARG(2, "int8_dynamic_activation_linear"))) return NULL;
    if (tsp_enter()) return NULL;
    ts_tensor *r;
    TSP_NOGIL(r = ts_int8_dynamic_activation_linear(x, w, b));
    return tsp_wrap(r);
}

/* _quantize_int4_symmetric_weight(weight, group_size): 8da4w's int4 weights */
static PyObject *f__quantize_int4_symmetric_weight SIG {
    (void)mod;
    PARSE("quantize_int4_symmetric_weight", 2, "weight", "group_size");
    ts_tensor *w = TARG(0, "quantize_int4_symmetric_weight");
    int64_t gs;
    if (!w || tsp_int_arg(a[1], &gs, "quantize_int4_symmetric_weight", "group_size") < 0 ||
        tsp_enter())
        return NULL;
    ts_tensor *r;
    TSP_NOGIL(r = ts_quantize_int4_symmetric_weight(w, gs));
    return tsp_wrap(r);
}

/* _quantize_int8_weight_only(weight) / _quantize_int4_weight_only(weight, group_size) */
static PyObject *f__quantize_int8_weight_only SIG {
    (void)mod;
    PARSE("quantize_int8_weight_only", 1, "weight");
    ts_tensor *w = TARG(0, "quantize_int8_weight_only");
    if (!w || tsp_enter()) return NULL;
    ts_tensor *r;
    TSP_NOGIL(r = ts_quantize_int8_weight_only(w));
    return tsp_wrap(r);
}

static PyObject *f__quantize_int4_weight_only SIG {
    (void)mod;
    PARSE("quantize_int4_weight_only", 2, "weight", "group_size");
    ts_tensor *w = TARG(0, "quantize_int4_weight_only");
    int64_t gs;
    if (!w || tsp_int_arg(a[1], &gs, "quantize_int4_weight_only", "group_size") < 0 || tsp_enter())
        return NULL;
    ts_tensor *r;
    TSP_NOGIL(r = ts_quantize_int4_weight_only(w, gs));
    return tsp_wrap(r);
}

/* _choose_qparams_per_tensor(input, reduce_range=False, dtype=quint8) -> (scale, zero_point) */
static PyObject *f__choose_qparams_per_tensor SIG {
    (void)mod;
    PARSE("choose_qparams_per_tensor", 1, "input", "reduce_range", "dtype");
    ts_tensor *x = TARG(0, "choose_qparams_per_tensor");
    bool rr = false;
    ts_dtype dt = TS_QUINT8;
    if (!x || tsp_bool_arg(a[1], false, &rr, "choose_qparams_per_tensor", "reduce_range") < 0 ||
        tsp_dtype_arg(a[2], &dt, "choose_qparams_per_tensor", "dtype") < 0 || tsp_enter())
        return NULL;
    double s = 0;
    int64_t z = 0;
    ts_status st;
    TSP_NOGIL(st = ts_choose_qparams_per_tensor(x, dt, rr, &s, &z));
    if (st != TS_OK) return tsp_raise_pending();
    return Py_BuildValue("(dL)", s, (long long)z);
}

#define QFN(name)                                                                                  \
    { #name, (PyCFunction)(void (*)(void))f_##name, METH_FASTCALL | METH_KEYWORDS, NULL }
PyMethodDef tsp_tensor_quant_methods[] = {
    {"dequantize", m_dequantize, METH_NOARGS, NULL},
    {"int_repr", m_int_repr, METH_NOARGS, NULL},
    {"q_scale", m_q_scale, METH_NOARGS, NULL},
    {"q_zero_point", m_q_zero_point, METH_NOARGS, NULL},
    {"q_per_channel_scales", m_q_per_channel_scales, METH_NOARGS, NULL},
    {"q_per_channel_zero_points", m_q_per_channel_zero_points, METH_NOARGS, NULL},
    {"q_per_channel_axis", m_q_per_channel_axis, METH_NOARGS, NULL},
    {"_q_group_size", m__q_group_size, METH_NOARGS, NULL},
    {"qscheme", m_qscheme, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};
PyMethodDef tsp_tensor_quant_functions[] = {
    QFN(quantize_per_tensor),
    QFN(quantize_per_channel),
    QFN(_quantize_per_group),
    {"dequantize", f_dequantize, METH_O, NULL},
    {"int_repr", f_int_repr, METH_O, NULL},
    {"q_per_channel_scales", f_q_per_channel_scales, METH_O, NULL},
    {"q_per_channel_zero_points", f_q_per_channel_zero_points, METH_O, NULL},
    QFN(_dynamic_quantized_linear),
    QFN(_dynamic_quantized_lstm),
    QFN(_quantized_linear),
    QFN(_choose_qparams_per_tensor),
    QFN(_weight_only_linear),
    QFN(_quantize_int8_weight_only),
    QFN(_quantize_int4_weight_only),
    QFN(_int8_dynamic_activation_linear),
    QFN(_quantize_int4_symmetric_weight),
    {NULL, NULL, 0, NULL},
};
PyGetSetDef tsp_tensor_quant_getset[] = {
    {"is_quantized", get_is_quantized, NULL, "whether the tensor is quantized", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};
