/* tensor_special_more.c — torch.special's remaining functions (include/tessera/special_more.h) as
 * tessera._C functions behind tessera.special (ndtr ... the polynomials), igamma / igammac and
 * mvlgamma as Tensor methods and functions. One table entry per op. */
#include "tensor_impl.h"
#include "tessera/special_more.h"

#define T TSP_T

/* ------------------------------------------------------------------ one tensor */
/* clang-format off: one entry a line */
#define MORE_UNARY_LIST(X)                                                                         \
    X(_special_ndtr, ts_ndtr)                                                                      \
    X(_special_ndtri, ts_ndtri)                                                                    \
    X(_special_log_ndtr, ts_log_ndtr)                                                              \
    X(_special_erfcx, ts_erfcx)                                                                    \
    X(_special_entr, ts_entr)                                                                      \
    X(_special_bessel_j0, ts_bessel_j0)                                                            \
    X(_special_bessel_j1, ts_bessel_j1)                                                            \
    X(_special_bessel_y0, ts_bessel_y0)                                                            \
    X(_special_bessel_y1, ts_bessel_y1)                                                            \
    X(_special_modified_bessel_k0, ts_modified_bessel_k0)                                          \
    X(_special_modified_bessel_k1, ts_modified_bessel_k1)                                          \
    X(_special_scaled_modified_bessel_k0, ts_scaled_modified_bessel_k0)                            \
    X(_special_scaled_modified_bessel_k1, ts_scaled_modified_bessel_k1)                            \
    X(_special_spherical_bessel_j0, ts_spherical_bessel_j0)                                        \
    X(_special_airy_ai, ts_airy_ai)
/* (name, second argument's name, C function): tessera._C.<name>(input, <other>) */
#define MORE_BINARY_LIST(X)                                                                        \
    X(_special_zeta, other, ts_zeta)                                                               \
    X(_special_chebyshev_polynomial_t, n, ts_chebyshev_polynomial_t)                               \
    X(_special_chebyshev_polynomial_u, n, ts_chebyshev_polynomial_u)                               \
    X(_special_chebyshev_polynomial_v, n, ts_chebyshev_polynomial_v)                               \
    X(_special_chebyshev_polynomial_w, n, ts_chebyshev_polynomial_w)                               \
    X(_special_shifted_chebyshev_polynomial_t, n, ts_shifted_chebyshev_polynomial_t)               \
    X(_special_shifted_chebyshev_polynomial_u, n, ts_shifted_chebyshev_polynomial_u)               \
    X(_special_shifted_chebyshev_polynomial_v, n, ts_shifted_chebyshev_polynomial_v)               \
    X(_special_shifted_chebyshev_polynomial_w, n, ts_shifted_chebyshev_polynomial_w)               \
    X(_special_hermite_polynomial_h, n, ts_hermite_polynomial_h)                                   \
    X(_special_hermite_polynomial_he, n, ts_hermite_polynomial_he)                                 \
    X(_special_laguerre_polynomial_l, n, ts_laguerre_polynomial_l)                                 \
    X(_special_legendre_polynomial_p, n, ts_legendre_polynomial_p)
/* also Tensor methods */
#define MORE_BINARY_METHOD_LIST(X)                                                                 \
    X(igamma, other, ts_igamma)                                                                    \
    X(igammac, other, ts_igammac)
// clang-format on

#define DEF_UNARY(name, cfn)                                                                       \
    static PyObject *f_##name(PyObject *mod, PyObject *x) {                                        \
        (void)mod;                                                                                 \
        ts_tensor *t = tsp_tensor_arg(x, #name, "input");                                          \
        return t ? tsp_unary(cfn, t) : NULL;                                                       \
    }
MORE_UNARY_LIST(DEF_UNARY)

/* ------------------------------------------------------------------ two tensors */
typedef struct more_binop {
    const char *name, *other;
    ts_tensor *(*f)(ts_tensor *, ts_tensor *);
} more_binop;

/* f(input, other): Tensors or Python numbers (one of them a Tensor) */
static PyObject *more_binary(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kw,
                             const more_binop *op) {
    const char *const mnames[] = {op->other};
    const char *const fnames[] = {"input", op->other};
    PyObject *a[2] = {0};
    int r = self ? tsp_parse(args, nargs, kw, op->name, mnames, 1, 1, a + 1)
                 : tsp_parse(args, nargs, kw, op->name, fnames, 2, 2, a);
    if (r < 0) return NULL;
    PyObject *x = self ? self : a[0], *y = a[1];
    ts_tensor *ta = tsp_tensor_of(x), *tb = tsp_tensor_of(y), *res = NULL, *sa = NULL, *sb = NULL;
    double va = 0, vb = 0;
    if (!ta && !tb) {
        PyErr_Format(PyExc_TypeError, "%s(): expected a Tensor argument, got %.100s and %.100s",
                     op->name, Py_TYPE(x)->tp_name, Py_TYPE(y)->tp_name);
        return NULL;
    }
    if ((!ta && tsp_number(x, &va) <= 0) || (!tb && tsp_number(y, &vb) <= 0)) {
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_TypeError, "%s(): arguments must be Tensors or numbers", op->name);
        return NULL;
    }
    if (tsp_enter()) return NULL;
    Py_BEGIN_ALLOW_THREADS;
    if (!ta) ta = sa = tsp_scalar_beside(tb, x, va);
    if (!tb) tb = sb = tsp_scalar_beside(ta, y, vb);
    if (ta && tb) res = op->f(ta, tb);
    tsp_drop(sa);
    tsp_drop(sb);
    Py_END_ALLOW_THREADS;
    return tsp_wrap(res);
}

#define DEF_BINARY(name, other, cfn)                                                               \
    static const more_binop op_##name = {#name, #other, cfn};                                      \
    static PyObject *f_##name(PyObject *mod, PyObject *const *a, Py_ssize_t n, PyObject *kw) {     \
        (void)mod;                                                                                 \
        return more_binary(NULL, a, n, kw, &op_##name);                                            \
    }
MORE_BINARY_LIST(DEF_BINARY)
#define DEF_BINARY_METHOD(name, other, cfn)                                                        \
    static const more_binop op_##name = {#name, #other, cfn};                                      \
    TSP_METHOD_AND_FUNCTION(name, more_binary, &op_##name)
MORE_BINARY_METHOD_LIST(DEF_BINARY_METHOD)

/* mvlgamma(input, p) / Tensor.mvlgamma(p) */
static PyObject *mvlgamma(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kw,
                          int unused) {
    (void)unused;
    static const char *const mnames[] = {"p"};
    static const char *const fnames[] = {"input", "p"};
    PyObject *a[2] = {0};
    int r = self ? tsp_parse(args, nargs, kw, "mvlgamma", mnames, 1, 1, a + 1)
                 : tsp_parse(args, nargs, kw, "mvlgamma", fnames, 2, 2, a);
    if (r < 0) return NULL;
    ts_tensor *t = self ? T(self) : tsp_tensor_arg(a[0], "mvlgamma", "input"), *res;
    int64_t p;
    if (!t || tsp_int_arg(a[1], &p, "mvlgamma", "p") < 0 || tsp_enter()) return NULL;
    TSP_NOGIL(res = ts_mvlgamma(t, p));
    return tsp_wrap(res);
}
TSP_METHOD_AND_FUNCTION(mvlgamma, mvlgamma, 0)

/* Tensor.sum_to_size(*size): the sum over the dims that broadcasting size to the tensor's shape
 * would expand (leading dims, and size-1 dims), reshaped to size (differentiable) */
static PyObject *m_sum_to_size(PyObject *self, PyObject *args) {
    ts_tensor *t = T(self), *r;
    ts_shape want, have = ts_shape_of(t);
    if (tsp_shape_args(args, 0, &want, "sum_to_size") < 0) return NULL;
    ts_dims dims = {0};
    bool ok = want.ndim <= have.ndim;
    const int lead = have.ndim - want.ndim;
    for (int i = 0; ok && i < have.ndim; i++) {
        const int64_t w = i < lead ? 1 : want.dims[i - lead], h = have.dims[i];
        if (w != h && w != 1)
            ok = false;
        else if (i < lead || (w == 1 && h != 1))
            dims.d[dims.n++] = i;
    }
    if (!ok) {
        PyObject *shape = PyObject_GetAttrString(self, "shape");
        if (shape)
            PyErr_Format(PyExc_RuntimeError, "sum_to_size: size %R is not expandable to size %R",
                         args, shape);
        Py_XDECREF(shape);
        return NULL;
    }
    if (tsp_enter()) return NULL;
    if (dims.n == 0) {
        TSP_NOGIL(r = ts_reshape(t, want));
        return tsp_wrap(r);
    }
    ts_tensor *s = NULL;
    TSP_NOGIL(s = ts_sum_dims(t, dims, true); r = s ? ts_reshape(s, want) : NULL; tsp_drop(s));
    return tsp_wrap(r);
}

#define F_UNARY(name, cfn)         {#name, f_##name, METH_O, NULL},
#define F_BINARY(name, other, cfn) {#name, FN(f_##name), FAST, NULL},
#define M_BINARY(name, other, cfn) {#name, FN(m_##name), FAST, NULL},

PyMethodDef tsp_tensor_special_more_methods[] = {
    MORE_BINARY_METHOD_LIST(M_BINARY){"mvlgamma", FN(m_mvlgamma), FAST, "mvlgamma(p)"},
    {"sum_to_size", m_sum_to_size, METH_VARARGS, "sum_to_size(*size)"},
    {NULL, NULL, 0, NULL},
};
PyMethodDef tsp_tensor_special_more_functions[] = {
    MORE_UNARY_LIST(F_UNARY) MORE_BINARY_LIST(F_BINARY)
        MORE_BINARY_METHOD_LIST(F_BINARY){"mvlgamma", FN(f_mvlgamma), FAST, NULL},
    {NULL, NULL, 0, NULL},
};
