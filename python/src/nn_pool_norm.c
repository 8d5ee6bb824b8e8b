/* nn_pool_norm.c — tessera._C's 1-d / 3-d / adaptive / power-average pooling, max unpooling and
 * group / instance / local response norms (src/nn/pool_nd.c, src/nn/group_norm.c), each one C
 * call; tessera.nn.functional_pool_norm parses PyTorch's argument forms. */
#include "nn_impl.h"
#include "tessera/pool_norm.h"

/* a tuple of nd ints into v[] */
static int ints(PyObject *o, int nd, int64_t *v, const char *fn, const char *arg) {
    PyObject *seq = PySequence_Fast(o, "");
    if (!seq || PySequence_Fast_GET_SIZE(seq) != nd) {
        Py_XDECREF(seq);
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "%s(): argument '%s' must be a tuple of %d ints", fn, arg,
                     nd);
        return -1;
    }
    for (int k = 0; k < nd; k++) {
        v[k] = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(seq, k));
        if (PyErr_Occurred()) {
            Py_DECREF(seq);
            return -1;
        }
    }
    Py_DECREF(seq);
    return 0;
}

/* the pair (y, idx) or y alone */
static PyObject *pair(ts_tensor *y, ts_tensor *idx, bool with_idx) {
    if (!with_idx) return tsp_wrap(y);
    PyObject *yo = tsp_wrap(y);
    if (!yo) return tsp_drop(idx), NULL;
    PyObject *io = tsp_wrap(idx);
    return io ? Py_BuildValue("(NN)", yo, io) : (Py_DECREF(yo), NULL);
}

/* _nn_pool_nd(kind, x, nd, kernel, stride, padding, dilation, ceil_mode, exclude_pad,
 * divisor_override, return_indices, p): kind 0 max, 1 avg, 2 lp (norm type p) */
static PyObject *nn_pool_nd(PyObject *self, PyObject *args) {
    (void)self;
    int kind, nd, ceil, excl, div, with_idx;
    double p;
    PyObject *xo, *ko, *so, *po, *dobj;
    if (!PyArg_ParseTuple(args, "iOiOOOOppipd:_nn_pool_nd", &kind, &xo, &nd, &ko, &so, &po, &dobj,
                          &ceil, &excl, &div, &with_idx, &p))
        return NULL;
    static const char *const fns[] = {"max_pool", "avg_pool", "lp_pool"};
    const char *fn = fns[kind < 0 || kind > 2 ? 0 : kind];
    int64_t k[3], s[3], pd[3], d[3];
    if (nd < 1 || nd > 3) return PyErr_Format(PyExc_ValueError, "%s: nd must be 1..3", fn);
    if (ints(ko, nd, k, fn, "kernel_size") < 0 || ints(so, nd, s, fn, "stride") < 0 ||
        ints(po, nd, pd, fn, "padding") < 0 || ints(dobj, nd, d, fn, "dilation") < 0)
        return NULL;
    ts_pool_opts o = {.ceil_mode = ceil, .exclude_pad = excl, .divisor_override = div};
    for (int i = 0; i < nd; i++) {
        if (k[i] > INT32_MAX || s[i] > INT32_MAX || pd[i] > INT32_MAX || d[i] > INT32_MAX ||
            k[i] < INT32_MIN || s[i] < INT32_MIN || pd[i] < INT32_MIN || d[i] < INT32_MIN)
            return PyErr_Format(PyExc_OverflowError, "%s: a pooling argument is out of range", fn);
        o.kernel[i] = (int)k[i], o.stride[i] = (int)s[i], o.padding[i] = (int)pd[i],
        o.dilation[i] = (int)d[i];
    }
    ts_tensor *x = tsp_tensor_arg(xo, fn, "input"), *y, *idx = NULL;
    if (!x || tsp_enter() < 0) return NULL;
    TSP_NOGIL(y = kind == 2   ? ts_lp_pool_nd(x, nd, p, o)
                  : kind == 1 ? ts_avg_pool_nd(x, nd, o)
                              : ts_max_pool_nd(x, nd, o, with_idx ? &idx : NULL));
    return pair(y, idx, kind == 0 && with_idx);
}

/* _nn_adaptive_pool(max, x, nd, output_size, return_indices) */
static PyObject *nn_adaptive_pool(PyObject *self, PyObject *args) {
    (void)self;
    int max, nd, with_idx;
    PyObject *xo, *oo;
    if (!PyArg_ParseTuple(args, "pOiOp:_nn_adaptive_pool", &max, &xo, &nd, &oo, &with_idx))
        return NULL;
    const char *fn = max ? "adaptive_max_pool" : "adaptive_avg_pool";
    int64_t out[3];
    if (nd < 1 || nd > 3) return PyErr_Format(PyExc_ValueError, "%s: nd must be 1..3", fn);
    if (ints(oo, nd, out, fn, "output_size") < 0) return NULL;
    ts_tensor *x = tsp_tensor_arg(xo, fn, "input"), *y, *idx = NULL;
    if (!x || tsp_enter() < 0) return NULL;
    TSP_NOGIL(y = max ? ts_adaptive_max_pool_nd(x, nd, out, with_idx ? &idx : NULL)
                      : ts_adaptive_avg_pool_nd(x, nd, out));
    return pair(y, idx, max && with_idx);
}

/* _nn_max_unpool(x, indices, nd, output_size) */
static PyObject *nn_max_unpool(PyObject *self, PyObject *args) {
    (void)self;
    int nd;
    PyObject *xo, *io, *oo;
    if (!PyArg_ParseTuple(args, "OOiO:_nn_max_unpool", &xo, &io, &nd, &oo)) return NULL;
    int64_t out[3];
    if (nd < 1 || nd > 3) return PyErr_Format(PyExc_ValueError, "max_unpool: nd must be 1..3");
    if (ints(oo, nd, out, "max_unpool", "output_size") < 0) return NULL;
    ts_tensor *x = tsp_tensor_arg(xo, "max_unpool", "input"), *y;
    ts_tensor *idx = x ? tsp_tensor_arg(io, "max_unpool", "indices") : NULL;
    if (!idx || tsp_enter() < 0) return NULL;
    TSP_NOGIL(y = ts_max_unpool_nd(x, idx, nd, out));
    return tsp_wrap(y);
}

/* _nn_native_group_norm(x, weight, bias, N, C, HxW, group, eps) -> (y, mean, rstd) */
static PyObject *nn_native_group_norm(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *xo, *wo, *bo;
    long long n, c, hxw, g;
    double eps;
    if (!PyArg_ParseTuple(args, "OOOLLLLd:native_group_norm", &xo, &wo, &bo, &n, &c, &hxw, &g,
                          &eps))
        return NULL;
    ts_tensor *x = tsp_tensor_arg(xo, "native_group_norm", "input"), *w, *b, *y, *m, *r;
    if (!x || tspn_opt_tensor(wo, &w, "native_group_norm", "weight") < 0 ||
        tspn_opt_tensor(bo, &b, "native_group_norm", "bias") < 0 || tsp_enter() < 0)
        return NULL;
    TSP_NOGIL(y = ts_native_group_norm(x, w, b, n, c, hxw, g, eps, &m, &r));
    PyObject *yo = tsp_wrap(y);
    if (!yo) return tsp_drop(m), tsp_drop(r), NULL;
    PyObject *mo = tsp_wrap(m);
    if (!mo) return Py_DECREF(yo), tsp_drop(r), NULL;
    PyObject *ro = tsp_wrap(r);
    if (!ro) return Py_DECREF(yo), Py_DECREF(mo), NULL;
    return Py_BuildValue("(NNN)", yo, mo, ro);
}

/* _nn_group_norm(x, groups, weight, bias, eps, stats): stats gives (y, mean, rstd) */
static PyObject *nn_group_norm(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *xo, *wo, *bo;
    long long g;
    double eps;
    int stats;
    if (!PyArg_ParseTuple(args, "OLOOdp:_nn_group_norm", &xo, &g, &wo, &bo, &eps, &stats))
        return NULL;
    ts_tensor *x = tsp_tensor_arg(xo, "group_norm", "input"), *w, *b, *y, *m = NULL, *r = NULL;
    if (!x || tspn_opt_tensor(wo, &w, "group_norm", "weight") < 0 ||
        tspn_opt_tensor(bo, &b, "group_norm", "bias") < 0 || tsp_enter() < 0)
        return NULL;
    TSP_NOGIL(y = ts_group_norm(x, g, w, b, eps, stats ? &m : NULL, stats ? &r : NULL));
    if (!stats) return tsp_wrap(y);
    PyObject *yo = tsp_wrap(y);
    if (!yo) return tsp_drop(m), tsp_drop(r), NULL;
    PyObject *mo = tsp_wrap(m);
    if (!mo) return Py_DECREF(yo), tsp_drop(r), NULL;
    PyObject *ro = tsp_wrap(r);
    if (!ro) return Py_DECREF(yo), Py_DECREF(mo), NULL;
    return Py_BuildValue("(NNN)", yo, mo, ro);
}

/* _nn_instance_norm(x, running_mean, running_var, weight, bias, use_input_stats, momentum, eps) */
static PyObject *nn_instance_norm(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o[5];
    int use;
    double momentum, eps;
    if (!PyArg_ParseTuple(args, "OOOOOpdd:_nn_instance_norm", &o[0], &o[1], &o[2], &o[3], &o[4],
                          &use, &momentum, &eps))
        return NULL;
    static const char *const names[] = {"input", "running_mean", "running_var", "weight", "bias"};
    ts_tensor *t[5], *y;
    if (!(t[0] = tsp_tensor_arg(o[0], "instance_norm", "input"))) return NULL;
    for (int i = 1; i < 5; i++)
        if (tspn_opt_tensor(o[i], &t[i], "instance_norm", names[i]) < 0) return NULL;
    if (tsp_enter() < 0) return NULL;
    TSP_NOGIL(y = ts_instance_norm(t[0], t[1], t[2], t[3], t[4], use, momentum, eps));
    return tsp_wrap(y);
}

/* _nn_local_response_norm(x, size, alpha, beta, k) */
static PyObject *nn_local_response_norm(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *xo;
    long long size;
    double alpha, beta, k;
    if (!PyArg_ParseTuple(args, "OLddd:_nn_local_response_norm", &xo, &size, &alpha, &beta, &k))
        return NULL;
    ts_tensor *x = tsp_tensor_arg(xo, "local_response_norm", "input"), *y;
    if (!x || tsp_enter() < 0) return NULL;
    TSP_NOGIL(y = ts_local_response_norm(x, size, alpha, beta, k));
    return tsp_wrap(y);
}

static PyMethodDef pool_norm_functions[] = {
    {"_nn_pool_nd", FN(nn_pool_nd), METH_VARARGS,
     "_nn_pool_nd(kind, x, nd, k, s, p, d, ceil, excl, divisor, return_indices, norm_type)"},
    {"_nn_adaptive_pool", FN(nn_adaptive_pool), METH_VARARGS,
     "_nn_adaptive_pool(max, x, nd, output_size, return_indices)"},
    {"_nn_max_unpool", FN(nn_max_unpool), METH_VARARGS, "_nn_max_unpool(x, indices, nd, size)"},
    {"_nn_native_group_norm", FN(nn_native_group_norm), METH_VARARGS, NULL},
    {"_nn_group_norm", FN(nn_group_norm), METH_VARARGS,
     "_nn_group_norm(x, groups, weight, bias, eps, stats)"},
    {"_nn_instance_norm", FN(nn_instance_norm), METH_VARARGS,
     "_nn_instance_norm(x, rm, rv, weight, bias, use_input_stats, momentum, eps)"},
    {"_nn_local_response_norm", FN(nn_local_response_norm), METH_VARARGS,
     "_nn_local_response_norm(x, size, alpha, beta, k)"},
    {NULL, NULL, 0, NULL},
};

int tsp_init_nn_pool_norm(PyObject *m) { return PyModule_AddFunctions(m, pool_norm_functions); }
