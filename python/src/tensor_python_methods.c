/* tensor_python_methods.c — Tensor methods whose bodies are exact Python compositions, each
 * forwarded with self and its arguments to the function of the same name in the module named next
 * to it: the random fills (tessera/_random_fill.py), index_put / nonzero_static (_index_put.py),
 * as_strided_scatter / new_empty_strided (_strided.py), angle (_real_forms.py), untyped_storage /
 * storage (_storage.py), retain_grad (_retain_grad.py). The type is immutable from Python, so
 * the methods live here. */
#include "tensor_impl.h"

static PyObject *forward(const char *module, const char *name, PyObject *self, PyObject *args,
                         PyObject *kw) {
    PyObject *mod = PyImport_ImportModule(module);
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

#define FORWARD(name, module)                                                                      \
    static PyObject *m_##name(PyObject *self, PyObject *args, PyObject *kw) {                      \
        return forward("tessera." module, #name, self, args, kw);                                  \
    }
#define ENTRY(name, module, doc)                                                                   \
    {#name, (PyCFunction)(void (*)(void))m_##name, METH_VARARGS | METH_KEYWORDS, doc},

#define PYTHON_METHODS(X)                                                                          \
    X(cauchy_, "_random_fill",                                                                     \
      "cauchy_(median=0, sigma=1): in place, Cauchy draws (seeded generator)")                     \
    X(exponential_, "_random_fill", "exponential_(lambd=1): in place, exponential draws")          \
    X(geometric_, "_random_fill", "geometric_(p): in place, geometric draws (k >= 1)")             \
    X(log_normal_, "_random_fill", "log_normal_(mean=1, std=2): in place, exp of normal draws")    \
    X(index_put, "_index_put", "index_put(indices, values, accumulate=False)")                     \
    X(index_put_, "_index_put", "index_put_(indices, values, accumulate=False): in place")         \
    X(as_strided_scatter, "_strided",                                                              \
      "as_strided_scatter(src, size, stride, storage_offset=None)")                                \
    X(nonzero_static, "_index_put", "nonzero_static(*, size, fill_value=-1)")                      \
    X(new_empty_strided, "_strided",                                                               \
      "new_empty_strided(size, stride, *, dtype=None, device=None)")                               \
    X(angle, "_real_forms", "angle(): 0 or pi (real input; NaN stays NaN)")                        \
    X(untyped_storage, "_storage", "untyped_storage(): the bytes of the whole storage (shared)")   \
    X(storage, "_storage",                                                                         \
      "storage(): the whole storage as elements of the tensor's dtype (shared)")                   \
    X(retain_grad, "_retain_grad",                                                                 \
      "retain_grad(): a non-leaf keeps its .grad after backward, as a leaf does")

#define DEF(name, module, doc) FORWARD(name, module)
PYTHON_METHODS(DEF)
#undef DEF

PyMethodDef tsp_tensor_python_methods[] = {PYTHON_METHODS(ENTRY){NULL, NULL, 0, NULL}};
