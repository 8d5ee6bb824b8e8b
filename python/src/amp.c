/* amp.c — mixed precision for tessera.amp: autocast regions (begin/end around a `with` block) and
 * _C.CGradScaler over the C gradient scaler. */
#include "nn_impl.h"

#include <stdio.h>
#include <string.h>

/* "cpu", "cuda", "sim" -> the device type; ValueError otherwise */
static int device_type_arg(const char *s, ts_device_type *out) {
    static const struct {
        const char *name;
        ts_device_type type;
    } types[] = {{"cpu", TS_CPU}, {"cuda", TS_CUDA}, {"sim", TS_SIM}};
    for (size_t i = 0; i < sizeof types / sizeof *types; i++)
        if (!strcmp(s, types[i].name)) return *out = types[i].type, 0;
    PyErr_Format(PyExc_ValueError,
                 "autocast(): device_type must be 'cpu', 'cuda' or 'sim', not '%s'", s);
    return -1;
}

/* _amp_begin(device_type, dtype or None, enabled, cache_enabled) */
static PyObject *amp_begin(PyObject *self, PyObject *args) {
    (void)self;
    const char *dev;
    PyObject *dto;
    int enabled, cache;
    ts_device_type t;
    ts_autocast_opts o = {0};
    if (!PyArg_ParseTuple(args, "sOpp:autocast", &dev, &dto, &enabled, &cache)) return NULL;
    if (device_type_arg(dev, &t) < 0 ||
        (dto != Py_None && tsp_dtype_arg(dto, &o.dtype, "autocast", "dtype") < 0))
        return NULL;
    o.disabled = !enabled, o.no_cache = !cache;
    ts_autocast_begin_ex(t, o);
    /* the region opened even when the dtype was refused: close it so begin/end stay paired */
    if (ts_error() != TS_OK) {
        ts_status s = ts_error();
        char msg[512];
        snprintf(msg, sizeof msg, "%s", ts_error_message());
        ts_error_clear();
        ts_autocast_end();
        ts_error_clear();
        ts_error_set(s, "%s", msg);
        return tsp_raise_pending();
    }
    Py_RETURN_NONE;
}

static PyObject *amp_end(PyObject *self, PyObject *unused) {
    (void)self, (void)unused;
    ts_autocast_end();
    if (tsp_check()) return NULL;
    Py_RETURN_NONE;
}

/* _amp_state(device_type) -> (enabled, dtype) */
static PyObject *amp_state(PyObject *self, PyObject *args) {
    (void)self;
    const char *dev;
    ts_device_type t;
    if (!PyArg_ParseTuple(args, "s:autocast_state", &dev) || device_type_arg(dev, &t) < 0)
        return NULL;
    return Py_BuildValue("(NN)", PyBool_FromLong(ts_autocast_is_enabled(t)),
                         tsp_dtype_obj(ts_autocast_get_dtype(t)));
}

static PyObject *amp_clear_cache(PyObject *self, PyObject *unused) {
    (void)self, (void)unused;
    ts_autocast_clear_cache();
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------------ the grad scaler */
typedef struct {
    PyObject_HEAD ts_grad_scaler *s;
} cscaler;

static ts_grad_scaler *S(PyObject *self) { return ((cscaler *)self)->s; }

/* CGradScaler(init_scale, growth_factor, backoff_factor, growth_interval, enabled) */
static PyObject *scaler_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
    ts_grad_scaler_opts o = {0};
    int enabled;
    static char *names[] = {"init_scale",      "growth_factor", "backoff_factor",
                            "growth_interval", "enabled",       NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kw, "dddip:GradScaler", names, &o.init_scale,
                                     &o.growth_factor, &o.backoff_factor, &o.growth_interval,
                                     &enabled))
        return NULL;
    o.disabled = !enabled;
    ts_grad_scaler *s = ts_grad_scaler_new(o);
    if (!s || tsp_check()) return ts_grad_scaler_free(s), tsp_raise_pending();
    cscaler *r = (cscaler *)type->tp_alloc(type, 0);
    if (!r) return ts_grad_scaler_free(s), NULL;
    r->s = s;
    return (PyObject *)r;
}

static void scaler_dealloc(PyObject *self) {
    ts_grad_scaler_free(S(self));
    Py_TYPE(self)->tp_free(self);
}

static PyObject *sc_scale(PyObject *self, PyObject *lo) {
    ts_tensor *loss = tsp_tensor_arg(lo, "GradScaler.scale", "outputs"), *y;
    if (!loss || tsp_enter() < 0) return NULL;
    TSP_NOGIL(y = ts_grad_scaler_scale(S(self), loss));
    return tsp_wrap(y);
}

static PyObject *sc_unscale_(PyObject *self, PyObject *opt) {
    ts_optim *o = tspo_optim_of(opt, "GradScaler.unscale_");
    if (!o || tsp_enter() < 0) return NULL;
    TSP_NOGIL(ts_grad_scaler_unscale_(S(self), o););
    if (tsp_check()) return NULL;
    Py_RETURN_NONE;
}

/* step(optimizer) -> True when the optimizer stepped (no Inf/NaN gradient) */
static PyObject *sc_step(PyObject *self, PyObject *opt) {
    ts_optim *o = tspo_optim_of(opt, "GradScaler.step");
    bool stepped = false;
    if (!o || tsp_enter() < 0) return NULL;
    TSP_NOGIL(ts_grad_scaler_step(S(self), o, &stepped););
    if (tsp_check()) return NULL;
    return PyBool_FromLong(stepped);
}

/* update(new_scale or None) */
static PyObject *sc_update(PyObject *self, PyObject *arg) {
    if (arg == Py_None)
        TSP_NOGIL(ts_grad_scaler_update(S(self)););
    else {
        double v = PyFloat_AsDouble(arg);
        if (v == -1.0 && PyErr_Occurred()) return NULL;
        ts_grad_scaler_set_scale(S(self), v);
    }
    if (tsp_check()) return NULL;
    Py_RETURN_NONE;
}

static PyObject *sc_get_scale(PyObject *self, PyObject *unused) {
    (void)unused;
    double v = ts_grad_scaler_get_scale(S(self));
    if (tsp_check()) return NULL;
    return PyFloat_FromDouble(v);
}

static PyObject *sc_growth_tracker(PyObject *self, PyObject *unused) {
    (void)unused;
    int v = ts_grad_scaler_growth_tracker(S(self));
    if (tsp_check()) return NULL;
    return PyLong_FromLong(v);
}

static PyObject *sc_state_dict(PyObject *self, PyObject *unused) {
    (void)unused;
    ts_tensor_list l = ts_grad_scaler_state_dict(S(self));
    return tspo_dict_of_list(&l);
}

static PyObject *sc_load_state_dict(PyObject *self, PyObject *d) {
    ts_tensor_list l;
    if (tspo_list_of_dict(d, &l, "GradScaler.load_state_dict") < 0) return NULL;
    ts_grad_scaler_load_state_dict(S(self), &l);
    ts_tensor_list_free(&l);
    if (tsp_check()) return NULL;
    Py_RETURN_NONE;
}

static PyMethodDef scaler_methods[] = {
    {"scale", sc_scale, METH_O, "scale(loss): loss * scale"},
    {"unscale_", sc_unscale_, METH_O, "unscale_(c_optimizer)"},
    {"step", sc_step, METH_O, "step(c_optimizer) -> stepped"},
    {"update", sc_update, METH_O, "update(new_scale or None)"},
    {"get_scale", sc_get_scale, METH_NOARGS, NULL},
    {"growth_tracker", sc_growth_tracker, METH_NOARGS, NULL},
    {"state_dict", sc_state_dict, METH_NOARGS, NULL},
    {"load_state_dict", sc_load_state_dict, METH_O, NULL},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject scaler_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "tessera._C.CGradScaler",
    .tp_basicsize = sizeof(cscaler),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The C gradient scaler (tessera.amp.GradScaler wraps it).",
    .tp_new = scaler_new,
    .tp_dealloc = scaler_dealloc,
    .tp_methods = scaler_methods,
};

static PyMethodDef amp_functions[] = {
    {"_amp_begin", FN(amp_begin), METH_VARARGS, "_amp_begin(device_type, dtype, enabled, cache)"},
    {"_amp_end", amp_end, METH_NOARGS, NULL},
    {"_amp_state", FN(amp_state), METH_VARARGS, "_amp_state(device_type) -> (enabled, dtype)"},
    {"_amp_clear_cache", amp_clear_cache, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};

int tsp_init_amp(PyObject *m) {
    if (PyType_Ready(&scaler_type) < 0) return -1;
    if (PyModule_AddObjectRef(m, "CGradScaler", (PyObject *)&scaler_type) < 0) return -1;
    return PyModule_AddFunctions(m, amp_functions);
}
