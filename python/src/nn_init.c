/* nn_init.c — _nn_init_more: torch.nn.init's calculate_gain, kaiming (any mode / nonlinearity),
 * xavier_normal_, trunc_normal_, orthogonal_, sparse_ and dirac_ (src/nn/init.c). */
#include "nn_impl.h"

#include <math.h>

/* _nn_calculate_gain(nonlinearity, param or None) -> float */
static PyObject *calculate_gain(PyObject *self, PyObject *args) {
    (void)self;
    const char *name;
    PyObject *param;
    if (!PyArg_ParseTuple(args, "sO:calculate_gain", &name, &param)) return NULL;
    double p = NAN;
    if (param != Py_None) {
        if (PyBool_Check(param) || !(PyLong_Check(param) || PyFloat_Check(param)))
            return PyErr_Format(PyExc_ValueError, "negative_slope %R not a valid number", param);
        if ((p = PyFloat_AsDouble(param)) == -1 && PyErr_Occurred()) return NULL;
    }
    double g = ts_init_calculate_gain(name, p);
    if (isnan(g)) {
        ts_error_clear();
        return PyErr_Format(PyExc_ValueError, "Unsupported nonlinearity %s", name);
    }
    return PyFloat_FromDouble(g);
}

/* _nn_init_more(kind, tensor, a, b, c, d, name) -> tensor (the same object, filled in place):
 * kind 0 kaiming_uniform_ (a slope, b fan_out, name nonlinearity), 1 kaiming_normal_ (same),
 * 2 xavier_normal_ (a gain), 3 trunc_normal_ (a mean, b std, c lo, d hi), 4 orthogonal_ (a gain),
 * 5 sparse_ (a sparsity, b std), 6 dirac_ (a groups) */
static PyObject *init_more(PyObject *self, PyObject *args) {
    (void)self;
    int kind;
    PyObject *to;
    double a, b, c, d;
    const char *name;
    if (!PyArg_ParseTuple(args, "iOdddds:init", &kind, &to, &a, &b, &c, &d, &name)) return NULL;
    ts_tensor *t = tsp_tensor_arg(to, "init", "tensor"), *r = NULL;
    if (!t || tsp_enter() < 0) return NULL;
    TSP_NOGIL(switch (kind) {
        case 0:
        case 1:
            r = ts_init_kaiming_(t, a, b != 0 ? TS_FAN_OUT : TS_FAN_IN, name, kind == 1);
            break;
        case 2:
            r = ts_init_xavier_normal_(t, a);
            break;
        case 3:
            r = ts_init_trunc_normal_(t, a, b, c, d);
            break;
        case 4:
            r = ts_init_orthogonal_(t, a);
            break;
        case 5:
            r = ts_init_sparse_(t, a, b);
            break;
        case 6:
            r = ts_init_dirac_(t, (int64_t)a);
            break;
        default:
            ts_error_set(TS_ERR_ARG, "init: unknown kind %d", kind);
    });
    ts_status st = ts_error();
    if (st == TS_ERR_SHAPE || st == TS_ERR_ARG) { /* PyTorch raises ValueError for these */
        PyErr_SetString(PyExc_ValueError, ts_error_message());
        ts_error_clear();
        return NULL;
    }
    if (!r || tsp_check()) return tsp_raise_pending();
    return Py_NewRef(to);
}

static PyMethodDef init_functions[] = {
    {"_nn_calculate_gain", FN(calculate_gain), METH_VARARGS, NULL},
    {"_nn_init_more", FN(init_more), METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

int tsp_init_nn_init(PyObject *m) { return PyModule_AddFunctions(m, init_functions); }
