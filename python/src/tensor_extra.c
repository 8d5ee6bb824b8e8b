/* tensor_extra.c — issue 52's remaining Tensor methods whose bodies are exact Python
 * compositions in python/tessera/_ops_extra.py (the random family's cauchy_ / exponential_ /
 * geometric_ / log_normal_, index_put, as_strided_scatter,
 * nonzero_static, new_empty_strided; untyped_storage / storage from _storage.py). The type is
 * immutable from Python, so each method here forwards self and its arguments to the function of the
 * same name there. */
#include "tensor_impl.h"

static PyObject *forward(const char *name, PyObject *self, PyObject *args, PyObject *kw) {
    PyObject *mod = PyImport_ImportModule("tessera._ops_extra");
    if (!mod) return NULL;
    PyObject *fn = PyObject_GetAttrString(mod, name);
    Py_DECREF(mod);
    if (!fn) return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(args);
    PyObject *all = PyTuple_New(n + 1);
    if (!all) return Py_DECREF(fn), NULL;
    Py_INCREF(self);
    PyTuple_SET_ITEM(all, 0, self);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *a = PyTuple_GET_ITEM(args, i);
        Py_INCREF(a);
        PyTuple_SET_ITEM(all, i + 1, a);
    }
    PyObject *r = PyObject_Call(fn, all, kw);
    Py_DECREF(all);
    Py_DECREF(fn);
    return r;
}

#define FORWARD(name)                                                                              \
    static PyObject *m_##name(PyObject *self, PyObject *args, PyObject *kw) {                      \
        return forward(#name, self, args, kw);                                                     \
    }
#define ENTRY(name, doc)                                                                           \
    {#name, (PyCFunction)(void (*)(void))m_##name, METH_VARARGS | METH_KEYWORDS, doc},

#define EXTRA_METHODS(X)                                                                           \
    X(cauchy_, "cauchy_(median=0, sigma=1): in place, Cauchy draws (seeded generator)")            \
    X(exponential_, "exponential_(lambd=1): in place, exponential draws")                          \
    X(geometric_, "geometric_(p): in place, geometric draws (k >= 1)")                             \
    X(log_normal_, "log_normal_(mean=1, std=2): in place, exp of normal draws")                    \
    X(index_put, "index_put(indices, values, accumulate=False)")                                   \
    X(index_put_, "index_put_(indices, values, accumulate=False): in place")                       \
    X(as_strided_scatter, "as_strided_scatter(src, size, stride, storage_offset=None)")            \
    X(nonzero_static, "nonzero_static(*, size, fill_value=-1)")                                    \
    X(new_empty_strided, "new_empty_strided(size, stride, *, dtype=None, device=None)")            \
    X(angle, "angle(): 0 or pi (real input; NaN stays NaN)")                                       \
    X(untyped_storage, "untyped_storage(): the bytes of the whole storage (shared)")               \
    X(storage, "storage(): the whole storage as elements of the tensor's dtype (shared)")          \
    X(retain_grad, "retain_grad(): a non-leaf keeps its .grad after backward, as a leaf does")

#define DEF(name, doc) FORWARD(name)
EXTRA_METHODS(DEF)
#undef DEF

PyMethodDef tsp_tensor_extra_methods[] = {EXTRA_METHODS(ENTRY){NULL, NULL, 0, NULL}};
