/* tensor_view_inplace.c — PyTorch's in-place view methods (issue 53: the tutorials'
 * batch_me.unsqueeze_(0)): unsqueeze_, squeeze_, t_, transpose_, swapdims_, swapaxes_ and
 * as_strided_ change the tensor's own shape and strides, never its data, and return it. Each takes
 * the out-of-place view (self.unsqueeze(...), whose argument checks and errors are PyTorch's) and
 * gives its geometry to self:
 *  - a leaf that requires grad: refused with grad mode on (PyTorch's message); with it off, the
 *    same C tensor takes the view's geometry (ts_tensor_set_data), so it stays the leaf that
 *    optimizers and modules hold, and its version is bumped (graphs that saved it refuse backward,
 *    as PyTorch's);
 *  - any other tensor: the object now holds the view itself, with its grad_fn when the tensor has
 *    history (PyTorch rebases it the same way); graphs that saved the tensor keep the old shape;
 *  - a tensor with history under no_grad: refused (the history would be of the old shape). */
#include "tensor_impl.h"

static PyObject *view_inplace(const char *name, PyObject *self, PyObject *args, PyObject *kw) {
    ts_tensor *t = TSP_T(self);
    bool grad_mode = ts_grad_enabled(), rg = ts_requires_grad(t), leaf = ts_is_leaf(t);
    if (rg && leaf && grad_mode) {
        PyErr_SetString(
            PyExc_RuntimeError,
            "a leaf Variable that requires grad is being used in an in-place operation.");
        return NULL;
    }
    if (rg && !leaf && !grad_mode)
        return PyErr_Format(PyExc_NotImplementedError,
                            "%s_(): changing the shape of a tensor with autograd history (grad_fn "
                            "%s) under no_grad is not supported; use %s() and keep its result",
                            name, ts_grad_fn_name(t) ? ts_grad_fn_name(t) : "?", name);
    PyObject *method = PyObject_GetAttrString(self, name);
    if (!method) return NULL;
    PyObject *r = PyObject_Call(method, args, kw);
    Py_DECREF(method);
    if (!r) return NULL;
    if (!PyObject_TypeCheck(r, tsp_tensor_type)) {
        Py_DECREF(r);
        return PyErr_Format(PyExc_TypeError, "%s_(): %s() did not return a Tensor", name, name);
    }
    ts_tensor *v = TSP_T(r);
    if (rg && leaf) { /* grad mode is off: the handle stays */
        ts_status st = ts_tensor_set_data(t, v);
        Py_DECREF(r);
        if (st != TS_OK || tsp_check()) return tsp_raise_pending();
        /* bump the storage's version, as PyTorch's in-place view ops do: a graph that saved this
         * leaf then refuses backward instead of reading the new geometry. t requires grad, so it
         * is floating point, where t * 1 is exact. */
        ts_tensor *bumped = ts_mul_scalar_(t, 1.0);
        if (!bumped || tsp_check()) return tsp_drop(bumped), tsp_raise_pending();
        tsp_drop(bumped);
    } else {
        TSP_T(self) = ts_retain(v);
        Py_DECREF(r);
        ts_release(t); /* the object's own reference to the old tensor */
    }
    return Py_NewRef(self);
}

#define VIEW_INPLACE_METHODS(X)                                                                    \
    X(unsqueeze, "unsqueeze_(dim): in place, a dim of size 1 inserted at dim")                     \
    X(squeeze, "squeeze_(dim=None): in place, the size-1 dims (or those of dim) removed")          \
    X(t, "t_(): in place, a 2-D tensor transposed (0- and 1-D left as they are)")                  \
    X(transpose, "transpose_(dim0, dim1): in place, the two dims swapped")                         \
    X(swapdims, "swapdims_(dim0, dim1): transpose_'s alias")                                       \
    X(swapaxes, "swapaxes_(axis0, axis1): transpose_'s alias")                                     \
    X(as_strided, "as_strided_(size, stride, storage_offset=None): in place, a view of the "       \
                  "storage")

#define DEF(name, doc)                                                                             \
    static PyObject *m_##name##_(PyObject *self, PyObject *args, PyObject *kw) {                   \
        return view_inplace(#name, self, args, kw);                                                \
    }
VIEW_INPLACE_METHODS(DEF)
#undef DEF

#define ENTRY(name, doc)                                                                           \
    {#name "_", (PyCFunction)(void (*)(void))m_##name##_, METH_VARARGS | METH_KEYWORDS, doc},
PyMethodDef tsp_tensor_view_inplace_methods[] = {VIEW_INPLACE_METHODS(ENTRY){NULL, NULL, 0, NULL}};
