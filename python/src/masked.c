/* masked.c — tessera.masked's sum, mean, median, cumsum, cumprod and normalize: each calls its
 * one C function (tessera/masked.h, src/ops/masked.c). */
#include "tensor_impl.h"
#include "tsp.h"

/* input, dim (None: every dim; masked_dims false: one int), dtype, mask: the shared arguments */
static int masked_args(const char *fn, PyObject *in, PyObject *dim, bool many, PyObject *dtype,
                       PyObject *mask, ts_tensor **t, ts_dims *d, ts_dtype *dt, ts_tensor **m) {
    *t = tsp_tensor_arg(in, fn, "input");
    if (!*t) return -1;
    *d = (ts_dims){0};
    if (dim != Py_None) {
        if (many) {
            if (tsp_dims_arg(dim, d, fn, "dim") < 0) return -1;
        } else {
            int64_t v;
            if (tsp_int_arg(dim, &v, fn, "dim") < 0) return -1;
            d->n = 1, d->d[0] = (int)v;
        }
    }
    *dt = TS_DTYPE_DEFAULT;
    if (tsp_dtype_arg(dtype, dt, fn, "dtype") < 0) return -1;
    *m = NULL;
    if (mask != Py_None && !(*m = tsp_tensor_arg(mask, fn, "mask"))) return -1;
    return tsp_enter();
}

/* _masked_sum / _masked_mean(input, dim, keepdim, dtype, mask) */
static PyObject *reduce(PyObject *args, const char *fn,
                        ts_tensor *(*f)(ts_tensor *, ts_dims, bool, ts_dtype, ts_tensor *)) {
    PyObject *in, *dim, *dtype, *mask;
    int keepdim;
    ts_tensor *t, *m, *r;
    ts_dims d;
    ts_dtype dt;
    if (!PyArg_ParseTuple(args, "OOpOO", &in, &dim, &keepdim, &dtype, &mask) ||
        masked_args(fn, in, dim, true, dtype, mask, &t, &d, &dt, &m) < 0)
        return NULL;
    TSP_NOGIL(r = f(t, d, keepdim, dt, m));
    return tsp_wrap(r);
}

static PyObject *masked_sum(PyObject *self, PyObject *args) {
    (void)self;
    return reduce(args, "masked.sum", ts_masked_sum);
}

static PyObject *masked_mean(PyObject *self, PyObject *args) {
    (void)self;
    return reduce(args, "masked.mean", ts_masked_mean);
}

/* _masked_cumsum / _masked_cumprod(input, dim, dtype, mask) */
static PyObject *cumulative(PyObject *args, const char *fn,
                            ts_tensor *(*f)(ts_tensor *, int, ts_dtype, ts_tensor *)) {
    PyObject *in, *dim, *dtype, *mask;
    ts_tensor *t, *m, *r;
    ts_dims d;
    ts_dtype dt;
    if (!PyArg_ParseTuple(args, "OOOO", &in, &dim, &dtype, &mask) ||
        masked_args(fn, in, dim, false, dtype, mask, &t, &d, &dt, &m) < 0)
        return NULL;
    TSP_NOGIL(r = f(t, d.d[0], dt, m));
    return tsp_wrap(r);
}

static PyObject *masked_cumsum(PyObject *self, PyObject *args) {
    (void)self;
    return cumulative(args, "masked.cumsum", ts_masked_cumsum);
}

static PyObject *masked_cumprod(PyObject *self, PyObject *args) {
    (void)self;
    return cumulative(args, "masked.cumprod", ts_masked_cumprod);
}

/* _masked_median(input, dim, keepdim, dtype, mask) */
static PyObject *masked_median(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *in, *dim, *dtype, *mask;
    int keepdim;
    ts_tensor *t, *m, *r;
    ts_dims d;
    ts_dtype dt;
    if (!PyArg_ParseTuple(args, "OOpOO", &in, &dim, &keepdim, &dtype, &mask) ||
        masked_args("masked.median", in, dim, false, dtype, mask, &t, &d, &dt, &m) < 0)
        return NULL;
    TSP_NOGIL(r = ts_masked_median(t, d.d[0], keepdim, dt, m));
    return tsp_wrap(r);
}

/* _masked_normalize(input, ord, dim, eps, dtype, mask) */
static PyObject *masked_normalize(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *in, *dim, *dtype, *mask;
    double ord, eps;
    ts_tensor *t, *m, *r;
    ts_dims d;
    ts_dtype dt;
    if (!PyArg_ParseTuple(args, "OdOdOO", &in, &ord, &dim, &eps, &dtype, &mask) ||
        masked_args("masked.normalize", in, dim, false, dtype, mask, &t, &d, &dt, &m) < 0)
        return NULL;
    TSP_NOGIL(r = ts_masked_normalize(t, ord, d.d[0], eps, dt, m));
    return tsp_wrap(r);
}

static PyMethodDef masked_functions[] = {
    {"_masked_sum", masked_sum, METH_VARARGS, NULL},
    {"_masked_mean", masked_mean, METH_VARARGS, NULL},
    {"_masked_cumsum", masked_cumsum, METH_VARARGS, NULL},
    {"_masked_cumprod", masked_cumprod, METH_VARARGS, NULL},
    {"_masked_median", masked_median, METH_VARARGS, NULL},
    {"_masked_normalize", masked_normalize, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

int tsp_init_masked(PyObject *m) { return PyModule_AddFunctions(m, masked_functions); }
