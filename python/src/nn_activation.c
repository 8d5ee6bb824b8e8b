/* nn_activation.c — tessera._C._nn_act_kind, _nn_glu, _nn_prelu, _nn_softmin: issue 52's
 * activations (src/ops/activation.c), each one C call; tessera.nn.functional parses PyTorch's
 * arguments and passes plain values here. */
#include "nn_impl.h"

#include "tensor_impl.h"

/* the kinds of _nn_act_kind (functional_act.py names them) */
enum {
    AM_ELU,
    AM_CELU,
    AM_SELU,
    AM_HARDTANH,
    AM_RELU6,
    AM_THRESHOLD,
    AM_HARDSHRINK,
    AM_SOFTSHRINK,
    AM_TANHSHRINK,
    AM_SOFTSIGN,
    AM_LOGSIGMOID,
    AM_MISH,
    AM_HARDSIGMOID,
    AM_HARDSWISH,
    AM_LEAKY_RELU,
    AM_SOFTPLUS,
    AM_COUNT
};

static const char *const am_names[AM_COUNT] = {
    "elu",         "celu",       "selu",       "hardtanh", "relu6",      "threshold",
    "hardshrink",  "softshrink", "tanhshrink", "softsign", "logsigmoid", "mish",
    "hardsigmoid", "hardswish",  "leaky_relu", "softplus"};

static ts_tensor *run(int k, ts_tensor *x, double a, double b, bool inplace) {
    switch (k) {
    case AM_ELU:
        return inplace ? ts_elu_(x, a) : ts_elu(x, a);
    case AM_CELU:
        return inplace ? ts_celu_(x, a) : ts_celu(x, a);
    case AM_SELU:
        return inplace ? ts_selu_(x) : ts_selu(x);
    case AM_HARDTANH:
        return inplace ? ts_hardtanh_(x, a, b) : ts_hardtanh(x, a, b);
    case AM_RELU6:
        return inplace ? ts_relu6_(x) : ts_relu6(x);
    case AM_THRESHOLD:
        return inplace ? ts_threshold_(x, a, b) : ts_threshold(x, a, b);
    case AM_HARDSHRINK:
        return ts_hardshrink(x, a);
    case AM_SOFTSHRINK:
        return ts_softshrink(x, a);
    case AM_TANHSHRINK:
        return ts_tanhshrink(x);
    case AM_SOFTSIGN:
        return ts_softsign(x);
    case AM_LOGSIGMOID:
        return ts_logsigmoid(x);
    case AM_MISH:
        return inplace ? ts_mish_(x) : ts_mish(x);
    case AM_HARDSIGMOID:
        return inplace ? ts_hardsigmoid_(x) : ts_hardsigmoid(x);
    case AM_LEAKY_RELU:
        return inplace ? ts_leaky_relu_(x, a) : ts_leaky_relu(x, a);
    case AM_SOFTPLUS:
        return ts_softplus_ex(x, a, b);
    default:
        return inplace ? ts_hardswish_(x) : ts_hardswish(x);
    }
}

static bool has_inplace(int k) {
    return k <= AM_THRESHOLD || k == AM_MISH || k == AM_HARDSIGMOID || k == AM_HARDSWISH ||
           k == AM_LEAKY_RELU;
}

/* _nn_act_kind(kind, x, a, b, inplace): a, b the kind's numbers in the C signature's order; in
 * place: x itself comes back */
static PyObject *nn_act_kind(PyObject *self, PyObject *args) {
    (void)self;
    int kind, inplace;
    PyObject *xo;
    double a, b;
    ts_tensor *y;
    if (!PyArg_ParseTuple(args, "iOddp:_nn_act_kind", &kind, &xo, &a, &b, &inplace)) return NULL;
    if (kind < 0 || kind >= AM_COUNT || (inplace && !has_inplace(kind)))
        return PyErr_Format(PyExc_ValueError, "_nn_act_kind: bad kind %d (inplace %d)", kind,
                            inplace);
    ts_tensor *x = tsp_tensor_arg(xo, am_names[kind], "input");
    if (!x || tsp_enter() < 0) return NULL;
    TSP_NOGIL(y = run(kind, x, a, b, inplace));
    return tsp_result(xo, y, inplace);
}

/* _nn_glu(x, dim) and _nn_softmin(x, dim) */
static PyObject *dim_op(PyObject *args, const char *fmt, const char *fn,
                        ts_tensor *(*f)(ts_tensor *, int)) {
    PyObject *xo;
    int dim;
    ts_tensor *y;
    if (!PyArg_ParseTuple(args, fmt, &xo, &dim)) return NULL;
    ts_tensor *x = tsp_tensor_arg(xo, fn, "input");
    if (!x || tsp_enter() < 0) return NULL;
    TSP_NOGIL(y = f(x, dim));
    return tsp_wrap(y);
}
static PyObject *nn_glu(PyObject *self, PyObject *args) {
    (void)self;
    return dim_op(args, "Oi:glu", "glu", ts_glu);
}
static PyObject *nn_softmin(PyObject *self, PyObject *args) {
    (void)self;
    return dim_op(args, "Oi:softmin", "softmin", ts_softmin);
}

/* _nn_prelu(x, weight) */
static PyObject *nn_prelu(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *xo, *wo;
    ts_tensor *y;
    if (!PyArg_ParseTuple(args, "OO:prelu", &xo, &wo)) return NULL;
    ts_tensor *x = tsp_tensor_arg(xo, "prelu", "input"), *w;
    if (!x || !(w = tsp_tensor_arg(wo, "prelu", "weight")) || tsp_enter() < 0) return NULL;
    TSP_NOGIL(y = ts_prelu(x, w));
    return tsp_wrap(y);
}

static PyMethodDef activation_functions[] = {
    {"_nn_act_kind", FN(nn_act_kind), METH_VARARGS, "_nn_act_kind(kind, x, a, b, inplace)"},
    {"_nn_glu", FN(nn_glu), METH_VARARGS, "_nn_glu(x, dim)"},
    {"_nn_prelu", FN(nn_prelu), METH_VARARGS, "_nn_prelu(x, weight)"},
    {"_nn_softmin", FN(nn_softmin), METH_VARARGS, "_nn_softmin(x, dim)"},
    {NULL, NULL, 0, NULL},
};

int tsp_init_nn_activation(PyObject *m) { return PyModule_AddFunctions(m, activation_functions); }
