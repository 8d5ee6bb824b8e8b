/* tensor_sparse.c — the dense Tensor's side of sparse COO tensors (issue 53): the methods
 * to_sparse / to_sparse_coo / to_dense and the attributes layout / is_sparse / is_sparse_csr,
 * whose bodies are Python (python/tessera/sparse.py: a sparse tensor is a Python object over two
 * dense tensors); and the message a dense op gives when an argument is such a sparse tensor
 * (its type has the attribute _ts_sparse), so that the op names sparse tensors as what it does not
 * support instead of "must be Tensor". */
#include "tensor_impl.h"

static PyObject *call_sparse(const char *name, PyObject *self, PyObject *args, PyObject *kw) {
    PyObject *mod = PyImport_ImportModule("tessera.sparse");
    if (!mod) return NULL;
    PyObject *fn = PyObject_GetAttrString(mod, name);
    Py_DECREF(mod);
    if (!fn) return NULL;
    Py_ssize_t n = args ? PyTuple_GET_SIZE(args) : 0;
    PyObject *all = PyTuple_New(n + 1);
    if (!all) return Py_DECREF(fn), NULL;
    PyTuple_SET_ITEM(all, 0, Py_NewRef(self));
    for (Py_ssize_t i = 0; i < n; i++)
        PyTuple_SET_ITEM(all, i + 1, Py_NewRef(PyTuple_GET_ITEM(args, i)));
    PyObject *r = PyObject_Call(fn, all, kw);
    Py_DECREF(all);
    Py_DECREF(fn);
    return r;
}

static PyObject *m_to_sparse(PyObject *self, PyObject *args, PyObject *kw) {
    return call_sparse("dense_to_sparse", self, args, kw);
}

static PyObject *m_to_dense(PyObject *self, PyObject *args, PyObject *kw) {
    return call_sparse("dense_to_dense", self, args, kw);
}

static PyObject *get_layout(PyObject *self, void *closure) {
    (void)closure;
    return call_sparse("dense_layout", self, NULL, NULL);
}

static PyObject *get_false(PyObject *self, void *closure) {
    (void)self, (void)closure;
    Py_RETURN_FALSE;
}

PyMethodDef tsp_tensor_sparse_methods[] = {
    {"to_sparse", (PyCFunction)(void (*)(void))m_to_sparse, METH_VARARGS | METH_KEYWORDS,
     "to_sparse(sparse_dim=None): the nonzero entries as a sparse COO tensor (tessera.sparse)"},
    {"to_sparse_coo", (PyCFunction)(void (*)(void))m_to_sparse, METH_VARARGS | METH_KEYWORDS,
     "to_sparse_coo(): to_sparse()"},
    {"to_dense", (PyCFunction)(void (*)(void))m_to_dense, METH_VARARGS | METH_KEYWORDS,
     "to_dense(dtype=None): a dense tensor is its own dense form"},
    {NULL, NULL, 0, NULL},
};

PyGetSetDef tsp_tensor_sparse_getset[] = {
    {"layout", get_layout, NULL, "tessera.strided (sparse tensors: tessera.sparse_coo)", NULL},
    {"is_sparse", get_false, NULL, "False (a sparse COO tensor is a tessera.sparse object)", NULL},
    {"is_sparse_csr", get_false, NULL, "False (no CSR tensors)", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

int tsp_sparse_arg_error(PyObject *o, const char *fn, const char *arg) {
    if (!o || !PyObject_HasAttrString((PyObject *)Py_TYPE(o), "_ts_sparse")) return 0;
    PyErr_Format(PyExc_NotImplementedError,
                 "%s(): sparse tensors (layout tessera.sparse_coo) are not supported there "
                 "(argument '%s' is one); convert with .to_dense() first",
                 fn, arg);
    return 1;
}

int tsp_layout_arg(PyObject *o, const char *fn) {
    if (!o || o == Py_None) return 0;
    PyObject *mod = PyImport_ImportModule("tessera._strided");
    PyObject *strided = mod ? PyObject_GetAttrString(mod, "strided") : NULL;
    Py_XDECREF(mod);
    if (!strided) return -1;
    Py_DECREF(strided); /* the module keeps it */
    if (o == strided) return 0;
    PyErr_Format(PyExc_NotImplementedError,
                 "%s(): layout=%R is not supported (only tessera.strided); build sparse tensors "
                 "with tessera.sparse_coo_tensor or Tensor.to_sparse()",
                 fn, o);
    return -1;
}
