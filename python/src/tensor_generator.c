/* tensor_generator.c — generator= on the random factories and methods (torch.Generator): a
 * tessera.Generator (python/tessera/_generator.py) keeps its own Philox (seed, offset) in
 * `_ts_rng`; for the length of one call it becomes the calling thread's stream
 * (ts_rng_thread_swap), so the call draws from it and leaves the global generator, and every other
 * thread, alone; afterwards the generator keeps where the drawing stopped. `_ts_rng` None is the
 * global generator itself (tessera.default_generator). */
#include "tensor_impl.h"

int tsp_generator_begin(PyObject *g, const char *fn, tsp_generator_scope *sc) {
    sc->g = NULL;
    if (!g || g == Py_None) return 0;
    PyObject *st = PyObject_GetAttrString(g, "_ts_rng");
    if (!st) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError,
                     "%s(): argument 'generator' must be tessera.Generator, not %.100s", fn,
                     Py_TYPE(g)->tp_name);
        return -1;
    }
    if (st == Py_None) { /* the global generator */
        Py_DECREF(st);
        return 0;
    }
    unsigned long long seed = 0, offset = 0;
    int ok = PyTuple_Check(st) && PyTuple_GET_SIZE(st) == 2;
    if (ok) {
        seed = PyLong_AsUnsignedLongLongMask(PyTuple_GET_ITEM(st, 0));
        offset = PyLong_AsUnsignedLongLongMask(PyTuple_GET_ITEM(st, 1));
        ok = !PyErr_Occurred();
    }
    Py_DECREF(st);
    if (!ok) {
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_TypeError,
                         "%s(): argument 'generator': its state is not a "
                         "(seed, offset) pair",
                         fn);
        return -1;
    }
    sc->g = g;
    sc->on = true;
    sc->state = (ts_rng_state){seed, offset};
    ts_rng_thread_swap(&sc->on, &sc->state);
    return 0;
}

int tsp_generator_end(tsp_generator_scope *sc) {
    if (!sc->g) return 0;
    ts_rng_thread_swap(&sc->on, &sc->state); /* the thread's own stream back; the generator's out */
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb); /* the call's error, if any, survives the bookkeeping */
    PyObject *st = Py_BuildValue("(KK)", (unsigned long long)sc->state.seed,
                                 (unsigned long long)sc->state.offset);
    int rc = st ? PyObject_SetAttrString(sc->g, "_ts_rng", st) : -1;
    Py_XDECREF(st);
    if (et) {
        PyErr_Restore(et, ev, tb);
        return -1;
    }
    sc->g = NULL;
    return rc;
}

PyObject *tsp_generator_finish(tsp_generator_scope *sc, PyObject *result) {
    if (tsp_generator_end(sc) < 0) {
        Py_XDECREF(result);
        return NULL;
    }
    return result;
}

/* _rng_thread_swap(on, seed, offset) -> (on, seed, offset): ts_rng_thread_swap, for the Python
 * compositions that take generator= (tessera/_generator.py) */
PyObject *tsp_f_rng_thread_swap(PyObject *mod, PyObject *args) {
    (void)mod;
    int on;
    unsigned long long seed, offset;
    if (!PyArg_ParseTuple(args, "pKK:_rng_thread_swap", &on, &seed, &offset)) return NULL;
    bool b = on;
    ts_rng_state s = {seed, offset};
    ts_rng_thread_swap(&b, &s);
    return Py_BuildValue("(OKK)", b ? Py_True : Py_False, (unsigned long long)s.seed,
                         (unsigned long long)s.offset);
}
