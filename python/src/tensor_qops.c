/* tensor_qops.c — the quantized ops behind tessera.ao.nn.quantized (include/tessera/quant.h) in
 * tessera._C: _quantized_conv2d / _add / _mul / _cat / _max_pool2d / _avg_pool2d /
 * _adaptive_avg_pool2d / _hardswish / _hardsigmoid / _reshape,
 * _make_per_tensor_quantized_tensor / _make_per_channel_quantized_tensor (PyTorch's names) and
 * _calculate_qparams (the observers' qparams). */
#include "tensor_impl.h"
#include "tessera/quant.h"

/* a pair of ints: one int (both) or a sequence of two */
static int pair_arg(PyObject *o, int64_t out[2], const char *fn, const char *arg) {
    if (o && PyLong_Check(o)) {
        if (tsp_int_arg(o, &out[0], fn, arg) < 0) return -1;
        out[1] = out[0];
        return 0;
    }
    if (!o || !PySequence_Check(o) || PySequence_Size(o) != 2) {
        PyErr_Format(PyExc_TypeError, "%s(): %s must be an int or a pair of ints", fn, arg);
        return -1;
    }
    for (Py_ssize_t i = 0; i < 2; i++) {
        PyObject *e = PySequence_GetItem(o, i);
        int rc = e ? tsp_int_arg(e, &out[i], fn, arg) : -1;
        Py_XDECREF(e);
        if (rc < 0) return -1;
    }
    return 0;
}

/* _quantized_conv2d(input, weight, bias, stride, padding, dilation, groups, scale, zero_point,
 * relu=False): bias int32 or None */
static PyObject *f__quantized_conv2d SIG {
    (void)mod;
    const char *fn = "quantized_conv2d";
    PARSE("quantized_conv2d", 9, "input", "weight", "bias", "stride", "padding", "dilation",
          "groups", "scale", "zero_point", "relu");
    ts_tensor *x = TARG(0, fn), *w = x ? TARG(1, fn) : NULL, *b = NULL;
    int64_t st[2], pd[2], dl[2], groups, zp;
    double s;
    bool relu = false;
    if (!w) return NULL;
    if (a[2] != Py_None && !(b = TARG(2, fn))) return NULL;
    if (pair_arg(a[3], st, fn, "stride") < 0 || pair_arg(a[4], pd, fn, "padding") < 0 ||
        pair_arg(a[5], dl, fn, "dilation") < 0 || tsp_int_arg(a[6], &groups, fn, "groups") < 0 ||
        tsp_double_arg(a[7], 0, &s, fn, "scale") < 0 ||
        tsp_int_arg(a[8], &zp, fn, "zero_point") < 0 ||
        tsp_bool_arg(a[9], false, &relu, fn, "relu") < 0 || tsp_enter())
        return NULL;
    ts_tensor *r;
    TSP_NOGIL(r = ts_quantized_conv2d(x, w, b, st, pd, dl, groups, s, zp, relu));
    return tsp_wrap(r);
}

/* _quantized_add / _quantized_mul(a, b, scale, zero_point, relu=False) */
static PyObject *binary(const char *fn, PyObject *const *args, Py_ssize_t nargs, PyObject *kw,
                        ts_tensor *(*op)(ts_tensor *, ts_tensor *, double, int64_t, bool)) {
    PARSE(fn, 4, "input", "other", "scale", "zero_point", "relu");
    ts_tensor *x = TARG(0, fn), *y = x ? TARG(1, fn) : NULL;
    double s;
    int64_t zp;
    bool relu = false;
    if (!y || tsp_double_arg(a[2], 0, &s, fn, "scale") < 0 ||
        tsp_int_arg(a[3], &zp, fn, "zero_point") < 0 ||
        tsp_bool_arg(a[4], false, &relu, fn, "relu") < 0 || tsp_enter())
        return NULL;
    ts_tensor *r;
    TSP_NOGIL(r = op(x, y, s, zp, relu));
    return tsp_wrap(r);
}

static PyObject *f__quantized_add SIG {
    (void)mod;
    return binary("quantized_add", args, nargs, kw, ts_quantized_add);
}

static PyObject *f__quantized_mul SIG {
    (void)mod;
    return binary("quantized_mul", args, nargs, kw, ts_quantized_mul);
}

/* _quantized_cat(tensors, dim, scale, zero_point) */
static PyObject *f__quantized_cat SIG {
    (void)mod;
    const char *fn = "quantized_cat";
    PARSE("quantized_cat", 4, "tensors", "dim", "scale", "zero_point");
    int64_t dim, zp;
    double s;
    if (tsp_int_arg(a[1], &dim, fn, "dim") < 0 || tsp_double_arg(a[2], 0, &s, fn, "scale") < 0 ||
        tsp_int_arg(a[3], &zp, fn, "zero_point") < 0)
        return NULL;
    PyObject *seq = PySequence_Fast(a[0], "quantized_cat(): tensors must be a sequence");
    if (!seq) return NULL;
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    ts_tensor **ts = PyMem_Malloc((size_t)(n ? n : 1) * sizeof *ts);
    PyObject *res = NULL;
    if (!ts) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++)
        if (!(ts[i] = tsp_tensor_arg(PySequence_Fast_GET_ITEM(seq, i), fn, "tensors"))) goto done;
    if (tsp_enter()) goto done;
    ts_tensor *r;
    TSP_NOGIL(r = ts_quantized_cat(ts, (int)n, (int)dim, s, zp));
    res = tsp_wrap(r);
done:
    PyMem_Free(ts);
    Py_DECREF(seq);
    return res;
}

/* _quantized_max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode) */
static PyObject *f__quantized_max_pool2d SIG {
    (void)mod;
    const char *fn = "quantized_max_pool2d";
    PARSE("quantized_max_pool2d", 5, "input", "kernel_size", "stride", "padding", "dilation",
          "ceil_mode");
    ts_tensor *x = TARG(0, fn);
    int64_t k[2], st[2], pd[2], dl[2];
    bool ceil_mode = false;
    if (!x || pair_arg(a[1], k, fn, "kernel_size") < 0 || pair_arg(a[2], st, fn, "stride") < 0 ||
        pair_arg(a[3], pd, fn, "padding") < 0 || pair_arg(a[4], dl, fn, "dilation") < 0 ||
        tsp_bool_arg(a[5], false, &ceil_mode, fn, "ceil_mode") < 0 || tsp_enter())
        return NULL;
    ts_tensor *r;
    TSP_NOGIL(r = ts_quantized_max_pool2d(x, k, st, pd, dl, ceil_mode));
    return tsp_wrap(r);
}

/* _quantized_adaptive_avg_pool2d(input, output_size) */
static PyObject *f__quantized_adaptive_avg_pool2d SIG {
    (void)mod;
    const char *fn = "quantized_adaptive_avg_pool2d";
    PARSE("quantized_adaptive_avg_pool2d", 2, "input", "output_size");
    ts_tensor *x = TARG(0, fn);
    int64_t o[2];
    if (!x || pair_arg(a[1], o, fn, "output_size") < 0 || tsp_enter()) return NULL;
    ts_tensor *r;
    TSP_NOGIL(r = ts_quantized_adaptive_avg_pool2d(x, o[0], o[1]));
    return tsp_wrap(r);
}

/* _quantized_avg_pool2d(input, kernel_size, stride, padding, ceil_mode, count_include_pad,
 * divisor_override=None) */
static PyObject *f__quantized_avg_pool2d SIG {
    (void)mod;
    const char *fn = "quantized_avg_pool2d";
    PARSE("quantized_avg_pool2d", 6, "input", "kernel_size", "stride", "padding", "ceil_mode",
          "count_include_pad", "divisor_override");
    ts_tensor *x = TARG(0, fn);
    int64_t k[2], st[2], pd[2], div = 0;
    bool ceil_mode = false, include_pad = true;
    if (!x || pair_arg(a[1], k, fn, "kernel_size") < 0 || pair_arg(a[2], st, fn, "stride") < 0 ||
        pair_arg(a[3], pd, fn, "padding") < 0 ||
        tsp_bool_arg(a[4], false, &ceil_mode, fn, "ceil_mode") < 0 ||
        tsp_bool_arg(a[5], true, &include_pad, fn, "count_include_pad") < 0 ||
        (a[6] && a[6] != Py_None && tsp_int_arg(a[6], &div, fn, "divisor_override") < 0) ||
        tsp_enter())
        return NULL;
    if (a[6] && a[6] != Py_None && div <= 0) { /* 0 means none in C: PyTorch refuses it */
        PyErr_Format(PyExc_ValueError, "%s(): divisor_override must be positive, but got %lld", fn,
                     (long long)div);
        return NULL;
    }
    ts_tensor *r;
    TSP_NOGIL(r = ts_quantized_avg_pool2d(x, k, st, pd, ceil_mode, include_pad, div));
    return tsp_wrap(r);
}

/* _quantized_hardswish(input, scale=None, zero_point=None): None, the input's (F.hardswish's) */
static PyObject *f__quantized_hardswish SIG {
    (void)mod;
    const char *fn = "quantized_hardswish";
    PARSE("quantized_hardswish", 1, "input", "scale", "zero_point");
    ts_tensor *x = TARG(0, fn);
    if (!x) return NULL;
    const bool own = !a[1] || a[1] == Py_None;
    if (own != (!a[2] || a[2] == Py_None)) {
        PyErr_Format(PyExc_TypeError, "%s(): give both scale and zero_point, or neither", fn);
        return NULL;
    }
    double s = own ? ts_q_scale(x) : 0;
    int64_t zp = 0;
    if (own && ts_q_zero_point(x, &zp) != TS_OK) return tsp_raise_pending();
    if ((!own && (tsp_double_arg(a[1], 0, &s, fn, "scale") < 0 ||
                  tsp_int_arg(a[2], &zp, fn, "zero_point") < 0)) ||
        tsp_enter())
        return NULL;
    ts_tensor *r;
    TSP_NOGIL(r = ts_quantized_hardswish(x, s, zp));
    return tsp_wrap(r);
}

/* _quantized_hardsigmoid(input) */
static PyObject *f__quantized_hardsigmoid SIG {
    (void)mod;
    const char *fn = "quantized_hardsigmoid";
    PARSE("quantized_hardsigmoid", 1, "input");
    ts_tensor *x = TARG(0, fn);
    if (!x || tsp_enter()) return NULL;
    ts_tensor *r;
    TSP_NOGIL(r = ts_quantized_hardsigmoid(x));
    return tsp_wrap(r);
}

/* _quantized_reshape(input, shape): shape a sequence of ints, all known */
static PyObject *f__quantized_reshape SIG {
    (void)mod;
    const char *fn = "quantized_reshape";
    PARSE("quantized_reshape", 2, "input", "shape");
    ts_tensor *x = TARG(0, fn);
    ts_dims d;
    if (!x || tsp_dims_arg(a[1], &d, fn, "shape") < 0 || tsp_enter()) return NULL;
    ts_shape s = {.ndim = d.n};
    for (int i = 0; i < d.n && i < TS_MAX_DIMS; i++) s.dims[i] = d.d[i];
    ts_tensor *r;
    TSP_NOGIL(r = ts_quantized_reshape(x, s));
    return tsp_wrap(r);
}

/* _make_per_tensor_quantized_tensor(input, scale, zero_point) */
static PyObject *f__make_per_tensor_quantized_tensor SIG {
    (void)mod;
    const char *fn = "_make_per_tensor_quantized_tensor";
    PARSE("_make_per_tensor_quantized_tensor", 3, "input", "scale", "zero_point");
    ts_tensor *x = TARG(0, fn);
    double s;
    int64_t zp;
    if (!x || tsp_scalar_arg(a[1], 0, &s, fn, "scale") < 0 ||
        tsp_int_or_tensor_arg(a[2], &zp, fn, "zero_point") < 0 || tsp_enter())
        return NULL;
    ts_tensor *r;
    TSP_NOGIL(r = ts_make_per_tensor_quantized_tensor(x, s, zp));
    return tsp_wrap(r);
}

/* _make_per_channel_quantized_tensor(input, scale, zero_point, axis) */
static PyObject *f__make_per_channel_quantized_tensor SIG {
    (void)mod;
    const char *fn = "_make_per_channel_quantized_tensor";
    PARSE("_make_per_channel_quantized_tensor", 4, "input", "scale", "zero_point", "axis");
    ts_tensor *x = TARG(0, fn), *s = x ? TARG(1, fn) : NULL, *z = s ? TARG(2, fn) : NULL;
    int64_t axis;
    if (!z || tsp_int_arg(a[3], &axis, fn, "axis") < 0 || tsp_enter()) return NULL;
    ts_tensor *r;
    TSP_NOGIL(r = ts_make_per_channel_quantized_tensor(x, s, z, (int)axis));
    return tsp_wrap(r);
}

/* _choose_qparams_minmax(min_val, max_val, quant_min, quant_max, preserve_sparsity) */
static PyObject *f__choose_qparams_minmax SIG {
    (void)mod;
    const char *fn = "choose_qparams_minmax";
    PARSE("choose_qparams_minmax", 5, "min_val", "max_val", "quant_min", "quant_max",
          "preserve_sparsity");
    ts_tensor *mn = TARG(0, fn), *mx = mn ? TARG(1, fn) : NULL;
    int64_t qmin, qmax;
    bool sym;
    if (!mx || tsp_int_arg(a[2], &qmin, fn, "quant_min") < 0 ||
        tsp_int_arg(a[3], &qmax, fn, "quant_max") < 0 ||
        tsp_bool_arg(a[4], false, &sym, fn, "preserve_sparsity") < 0 || tsp_enter())
        return NULL;
    ts_tensor *r[2] = {NULL, NULL};
    ts_status st;
    TSP_NOGIL(st = ts_choose_qparams_minmax(mn, mx, qmin, qmax, sym, &r[0], &r[1]));
    if (st != TS_OK) return tsp_raise_pending();
    return tsp_results(fn, r, 2);
}

/* _calculate_qparams(min_val, max_val, quant_min, quant_max, symmetric, symmetric_zero_point,
 * eps) -> (scale float32, zero_point int64) */
static PyObject *f__calculate_qparams SIG {
    (void)mod;
    const char *fn = "calculate_qparams";
    PARSE("calculate_qparams", 7, "min_val", "max_val", "quant_min", "quant_max", "symmetric",
          "symmetric_zero_point", "eps");
    ts_tensor *mn = TARG(0, fn), *mx = mn ? TARG(1, fn) : NULL;
    int64_t qmin, qmax, szp;
    bool sym;
    double eps;
    if (!mx || tsp_int_arg(a[2], &qmin, fn, "quant_min") < 0 ||
        tsp_int_arg(a[3], &qmax, fn, "quant_max") < 0 ||
        tsp_bool_arg(a[4], false, &sym, fn, "symmetric") < 0 ||
        tsp_int_arg(a[5], &szp, fn, "symmetric_zero_point") < 0 ||
        tsp_double_arg(a[6], 0, &eps, fn, "eps") < 0 || tsp_enter())
        return NULL;
    ts_tensor *r[2] = {NULL, NULL};
    ts_status st;
    TSP_NOGIL(st = ts_calculate_qparams(mn, mx, qmin, qmax, sym, szp, eps, &r[0], &r[1]));
    if (st != TS_OK) return tsp_raise_pending();
    return tsp_results(fn, r, 2);
}

/* fake_quantize_per_tensor_affine(input, scale, zero_point, quant_min, quant_max, cachemask=False)
 * -> y, or (y, mask) */
static PyObject *f__fake_quantize_per_tensor_affine SIG {
    (void)mod;
    const char *fn = "fake_quantize_per_tensor_affine";
    PARSE("fake_quantize_per_tensor_affine", 5, "input", "scale", "zero_point", "quant_min",
          "quant_max", "cachemask");
    ts_tensor *x = TARG(0, fn);
    double s;
    int64_t zp, qmin, qmax;
    bool cm = false;
    if (!x || tsp_double_arg(a[1], 0, &s, fn, "scale") < 0 ||
        tsp_int_arg(a[2], &zp, fn, "zero_point") < 0 ||
        tsp_int_arg(a[3], &qmin, fn, "quant_min") < 0 ||
        tsp_int_arg(a[4], &qmax, fn, "quant_max") < 0 ||
        tsp_bool_arg(a[5], false, &cm, fn, "cachemask") < 0 || tsp_enter())
        return NULL;
    ts_tensor *r[2] = {NULL, NULL};
    ts_status st;
    TSP_NOGIL(st =
                  ts_fake_quantize_per_tensor_affine_cachemask(x, s, zp, qmin, qmax, &r[0], &r[1]));
    if (st != TS_OK) return tsp_raise_pending();
    if (cm) return tsp_results(fn, r, 2);
    ts_release(r[1]); /* the caller owns it outside a scope */
    return tsp_wrap(r[0]);
}

/* fake_quantize_per_channel_affine(input, scale, zero_point, axis, quant_min, quant_max,
 * cachemask=False) -> y, or (y, mask) */
static PyObject *f__fake_quantize_per_channel_affine SIG {
    (void)mod;
    const char *fn = "fake_quantize_per_channel_affine";
    PARSE("fake_quantize_per_channel_affine", 6, "input", "scale", "zero_point", "axis",
          "quant_min", "quant_max", "cachemask");
    ts_tensor *x = TARG(0, fn), *s = x ? TARG(1, fn) : NULL, *z = s ? TARG(2, fn) : NULL;
    int64_t axis, qmin, qmax;
    bool cm = false;
    if (!z || tsp_int_arg(a[3], &axis, fn, "axis") < 0 ||
        tsp_int_arg(a[4], &qmin, fn, "quant_min") < 0 ||
        tsp_int_arg(a[5], &qmax, fn, "quant_max") < 0 ||
        tsp_bool_arg(a[6], false, &cm, fn, "cachemask") < 0 || tsp_enter())
        return NULL;
    if (axis < 0) axis += ts_shape_of(x).ndim; /* PyTorch's maybe_wrap_dim */
    ts_tensor *r[2] = {NULL, NULL};
    ts_status st;
    TSP_NOGIL(st = ts_fake_quantize_per_channel_affine_cachemask(x, s, z, (int)axis, qmin, qmax,
                                                                 &r[0], &r[1]));
    if (st != TS_OK) return tsp_raise_pending();
    if (cm) return tsp_results(fn, r, 2);
    ts_release(r[1]); /* the caller owns it outside a scope */
    return tsp_wrap(r[0]);
}

#define QFN(name)                                                                                  \
    { #name, (PyCFunction)(void (*)(void))f_##name, METH_FASTCALL | METH_KEYWORDS, NULL }
PyMethodDef tsp_tensor_qops_functions[] = {
    QFN(_quantized_conv2d),
    QFN(_quantized_add),
    QFN(_quantized_mul),
    QFN(_quantized_avg_pool2d),
    QFN(_quantized_hardswish),
    QFN(_quantized_hardsigmoid),
    QFN(_quantized_cat),
    QFN(_quantized_max_pool2d),
    QFN(_quantized_adaptive_avg_pool2d),
    QFN(_quantized_reshape),
    QFN(_make_per_tensor_quantized_tensor),
    QFN(_make_per_channel_quantized_tensor),
    QFN(_calculate_qparams),
    QFN(_choose_qparams_minmax),
    QFN(_fake_quantize_per_tensor_affine),
    QFN(_fake_quantize_per_channel_affine),
    {NULL, NULL, 0, NULL},
};
