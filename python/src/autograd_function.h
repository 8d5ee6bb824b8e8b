/* autograd_function.h — custom autograd Functions and the graph's Python surface
 * (autograd_function.c), called from autograd.c. */
#ifndef TSP_AUTOGRAD_FUNCTION_H
#define TSP_AUTOGRAD_FUNCTION_H

#include "tsp.h"

/* Adds _function_apply and the Node types to m; 0, or -1 with an exception. */
int tsp_init_autograd_function(PyObject *m);
/* Tensor.register_hook(hook) -> a removable handle (METH_O). */
PyObject *tsp_tensor_register_hook(PyObject *self, PyObject *hook);
/* Tensor.register_post_accumulate_grad_hook(hook) -> a removable handle (METH_O). */
PyObject *tsp_tensor_register_post_accumulate_grad_hook(PyObject *self, PyObject *hook);
/* t.grad_fn: a Node object for t's node, or None for a leaf (new reference). */
PyObject *tsp_grad_fn_of(ts_tensor *t);
/* Before a backward pass: forget an exception a previous pass left. After it (rc: tsp_check's
 * result): when a custom Function's backward raised during the pass, its exception replaces the
 * pending C error (cleared) and -1 is returned; else rc. */
void tsp_function_exception_reset(void);
int tsp_function_exception_restore(int rc);

#endif /* TSP_AUTOGRAD_FUNCTION_H */
