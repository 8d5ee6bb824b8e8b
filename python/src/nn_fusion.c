/* nn_fusion.c — _nn_fuse_bn_weights: torch.nn.utils.fusion's fuse_conv_bn_weights and
 * fuse_linear_bn_weights (ts_fuse_conv_bn_weights / ts_fuse_linear_bn_weights, src/nn/bn_fuse.c).
 */
#include "nn_impl.h"

/* _nn_fuse_bn_weights(kind, w, b, running_mean, running_var, eps, bn_w, bn_b, transpose) ->
 * (weight, bias); kind 0: a convolution, 1: a linear layer */
static PyObject *fuse_bn_weights(PyObject *self, PyObject *args) {
    (void)self;
    int kind, transpose;
    PyObject *ow, *ob, *om, *ov, *og, *obeta;
    double eps;
    if (!PyArg_ParseTuple(args, "iOOOOdOOp:fuse_bn_weights", &kind, &ow, &ob, &om, &ov, &eps, &og,
                          &obeta, &transpose))
        return NULL;
    const char *fn = kind ? "fuse_linear_bn_weights" : "fuse_conv_bn_weights";
    ts_tensor *w = tsp_tensor_arg(ow, fn, "weight"), *b, *m, *v, *g, *beta;
    if (!w || tspn_opt_tensor(ob, &b, fn, "bias") || tspn_opt_tensor(om, &m, fn, "bn_rm") ||
        tspn_opt_tensor(ov, &v, fn, "bn_rv") || tspn_opt_tensor(og, &g, fn, "bn_w") ||
        tspn_opt_tensor(obeta, &beta, fn, "bn_b") || tsp_enter() < 0)
        return NULL;
    ts_tensor *wo = NULL, *bo = NULL;
    ts_status st;
    TSP_NOGIL(st = kind ? ts_fuse_linear_bn_weights(w, b, m, v, eps, g, beta, &wo, &bo)
                        : ts_fuse_conv_bn_weights(w, b, m, v, eps, g, beta, transpose, &wo, &bo));
    if (st) return tsp_raise_pending();
    PyObject *a = tsp_wrap(wo), *c = a ? tsp_wrap(bo) : (ts_release(bo), NULL);
    if (!c) return Py_XDECREF(a), NULL;
    return Py_BuildValue("NN", a, c);
}

static PyMethodDef fusion_functions[] = {
    {"_nn_fuse_bn_weights", FN(fuse_bn_weights), METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

int tsp_init_nn_fusion(PyObject *m) { return PyModule_AddFunctions(m, fusion_functions); }
