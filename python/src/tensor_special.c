/* tensor_special.c — the special elementwise functions as Tensor methods and tessera.* functions
 * (lgamma, digamma, polygamma, erfinv, i0, sinc, logit, nan_to_num, expm1 ... xlogy, hypot, atan2,
 * logaddexp ...), `%` (remainder), the _special_* functions behind tessera.special, and
 * include/tessera/special.h's (ndtr ... the orthogonal polynomials, igamma / igammac, mvlgamma),
 * with sum_to_size. One table entry per op over the C API. */
#include "tensor_impl.h"
#include "tessera/special.h"

#include <math.h>

#define T TSP_T

/* ------------------------------------------------------------------ one tensor */
/* clang-format off: one entry a line */
#define SPECIAL_UNARY_LIST(X)                                                                      \
    X(lgamma, ts_lgamma)                                                                           \
    X(digamma, ts_digamma)                                                                         \
    X(erfinv, ts_erfinv)                                                                           \
    X(erfc, ts_erfc)                                                                               \
    X(i0, ts_i0)                                                                                   \
    X(sinc, ts_sinc)                                                                               \
    X(expm1, ts_expm1)                                                                             \
    X(exp2, ts_exp2)                                                                               \
    X(log2, ts_log2)                                                                               \
    X(log10, ts_log10)                                                                             \
    X(trunc, ts_trunc)                                                                             \
    X(fix, ts_fix)                                                                                 \
    X(frac, ts_frac)                                                                               \
    X(sgn, ts_sgn)                                                                                 \
    X(signbit, ts_signbit)                                                                         \
    X(deg2rad, ts_deg2rad)                                                                         \
    X(rad2deg, ts_rad2deg)
/* torch.special only (no Tensor method): tessera.special's names without the prefix */
#define SPECIAL_ONLY_LIST(X)                                                                       \
    X(_special_i0e, ts_i0e)                                                                        \
    X(_special_i1, ts_i1)                                                                          \
    X(_special_i1e, ts_i1e)
// clang-format on

SPECIAL_UNARY_LIST(TSP_DEF_UNARY)
#define DEF_SPECIAL_ONLY(name, cfn)                                                                \
    static PyObject *f_##name(PyObject *mod, PyObject *x) {                                        \
        (void)mod;                                                                                 \
        ts_tensor *t = tsp_tensor_arg(x, #name + 9, "input");                                      \
        return t ? tsp_unary(cfn, t) : NULL;                                                       \
    }
SPECIAL_ONLY_LIST(DEF_SPECIAL_ONLY)

/* ------------------------------------------------------------------ with numbers */
/* polygamma(n, input) / Tensor.polygamma(n) */
static PyObject *polygamma(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kw,
                           int unused) {
    (void)unused;
    static const char *const mnames[] = {"n"};
    static const char *const fnames[] = {"n", "input"};
    PyObject *a[2] = {0};
    int r = self ? tsp_parse(args, nargs, kw, "polygamma", mnames, 1, 1, a)
                 : tsp_parse(args, nargs, kw, "polygamma", fnames, 2, 2, a);
    if (r < 0) return NULL;
    ts_tensor *t = self ? T(self) : tsp_tensor_arg(a[1], "polygamma", "input"), *res;
    int64_t n;
    if (!t || tsp_int_arg(a[0], &n, "polygamma", "n") < 0 || tsp_enter()) return NULL;
    if (n < INT32_MIN || n > INT32_MAX) n = n < 0 ? -1 : INT32_MAX;
    TSP_NOGIL(res = ts_polygamma((int)n, t));
    return tsp_wrap(res);
}
TSP_METHOD_AND_FUNCTION(polygamma, polygamma, 0)

/* logit(input, eps=None) */
static PyObject *logit(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kw,
                       int unused) {
    (void)unused;
    static const char *const mnames[] = {"eps"};
    static const char *const fnames[] = {"input", "eps"};
    PyObject *a[2] = {0};
    int r = self ? tsp_parse(args, nargs, kw, "logit", mnames, 1, 0, a + 1)
                 : tsp_parse(args, nargs, kw, "logit", fnames, 2, 1, a);
    if (r < 0) return NULL;
    ts_tensor *t = self ? T(self) : tsp_tensor_arg(a[0], "logit", "input"), *res;
    double eps;
    if (!t || tsp_double_arg(a[1], NAN, &eps, "logit", "eps") < 0 || tsp_enter()) return NULL;
    TSP_NOGIL(res = ts_logit(t, eps));
    return tsp_wrap(res);
}
TSP_METHOD_AND_FUNCTION(logit, logit, 0)

/* nan_to_num(input, nan=0.0, posinf=None, neginf=None) */
static PyObject *nan_to_num(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kw,
                            int unused) {
    (void)unused;
    static const char *const mnames[] = {"nan", "posinf", "neginf"};
    static const char *const fnames[] = {"input", "nan", "posinf", "neginf"};
    PyObject *a[4] = {0};
    int r = self ? tsp_parse(args, nargs, kw, "nan_to_num", mnames, 3, 0, a + 1)
                 : tsp_parse(args, nargs, kw, "nan_to_num", fnames, 4, 1, a);
    if (r < 0) return NULL;
    ts_tensor *t = self ? T(self) : tsp_tensor_arg(a[0], "nan_to_num", "input"), *res;
    double nan_v, pos, neg;
    if (!t || tsp_double_arg(a[1], 0, &nan_v, "nan_to_num", "nan") < 0 ||
        tsp_double_arg(a[2], NAN, &pos, "nan_to_num", "posinf") < 0 ||
        tsp_double_arg(a[3], NAN, &neg, "nan_to_num", "neginf") < 0 || tsp_enter())
        return NULL;
    TSP_NOGIL(res = ts_nan_to_num(t, nan_v, pos, neg));
    return tsp_wrap(res);
}
TSP_METHOD_AND_FUNCTION(nan_to_num, nan_to_num, 0)

/* ------------------------------------------------------------------ two tensors */
typedef ts_tensor *(*binfn)(ts_tensor *, ts_tensor *);

/* f(input, other): a Tensor and a Tensor or a Python number (on either side) */
static PyObject *binary_call(PyObject *x, PyObject *y, const char *fn, const char *yname, binfn f) {
    ts_tensor *a = tsp_tensor_of(x), *b = tsp_tensor_of(y), *r = NULL, *sa = NULL, *sb = NULL;
    double va = 0, vb = 0;
    if (!a && !b) {
        PyErr_Format(PyExc_TypeError, "%s(): argument 'input' must be Tensor, not %.100s", fn,
                     Py_TYPE(x)->tp_name);
        return NULL;
    }
    if (!a && tsp_number(x, &va) <= 0) {
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_TypeError,
                         "%s(): argument 'input' must be Tensor or a number, "
                         "not %.100s",
                         fn, Py_TYPE(x)->tp_name);
        return NULL;
    }
    if (!b && tsp_number(y, &vb) <= 0) {
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_TypeError,
                         "%s(): argument '%s' must be Tensor or a number, "
                         "not %.100s",
                         fn, yname, Py_TYPE(y)->tp_name);
        return NULL;
    }
    if (tsp_enter()) return NULL;
    Py_BEGIN_ALLOW_THREADS;
    if (!a) a = sa = tsp_scalar_beside(b, x, va);
    if (!b) b = sb = tsp_scalar_beside(a, y, vb);
    if (a && b) r = f(a, b);
    tsp_drop(sa);
    tsp_drop(sb);
    Py_END_ALLOW_THREADS;
    return tsp_wrap(r);
}

typedef struct special_binop {
    const char *name, *other; /* the second argument's name */
    binfn f;
} special_binop;

static PyObject *call_special_binary(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                                     PyObject *kw, const special_binop *op) {
    const char *const mnames[] = {op->other};
    const char *const fnames[] = {"input", op->other};
    PyObject *a[2] = {0};
    int r = self ? tsp_parse(args, nargs, kw, op->name, mnames, 1, 1, a + 1)
                 : tsp_parse(args, nargs, kw, op->name, fnames, 2, 2, a);
    if (r < 0) return NULL;
    return binary_call(self ? self : a[0], a[1], op->name, op->other, op->f);
}

/* clang-format off */
#define SPECIAL_BINARY_LIST(X)                                                                     \
    X(xlogy, other, ts_xlogy)                                                                      \
    X(hypot, other, ts_hypot)                                                                      \
    X(copysign, other, ts_copysign)                                                                \
    X(atan2, other, ts_atan2)                                                                      \
    X(arctan2, other, ts_atan2)                                                                    \
    X(nextafter, other, ts_nextafter)                                                              \
    X(ldexp, other, ts_ldexp)                                                                      \
    X(float_power, exponent, ts_float_power)                                                       \
    X(logaddexp, other, ts_logaddexp)                                                              \
    X(logaddexp2, other, ts_logaddexp2)                                                            \
    X(remainder, other, ts_remainder)
// clang-format on
#define DEF_SPECIAL_BINARY(name, other, cfn)                                                       \
    static const special_binop op_##name = {#name, #other, cfn};                                   \
    TSP_METHOD_AND_FUNCTION(name, call_special_binary, &op_##name)
SPECIAL_BINARY_LIST(DEF_SPECIAL_BINARY)

/* tessera.special.xlog1py(input, other) */
static const special_binop op_xlog1py = {"xlog1py", "other", ts_xlog1py};
static PyObject *f__special_xlog1py(PyObject *mod, PyObject *const *a, Py_ssize_t n, PyObject *kw) {
    (void)mod;
    return call_special_binary(NULL, a, n, kw, &op_xlog1py);
}

/* a % b: Python's modulo (torch.remainder); NotImplemented for other types */
static PyObject *nb_remainder(PyObject *a, PyObject *b) {
    double v;
    if ((!tsp_tensor_of(a) && tsp_number(a, &v) <= 0) ||
        (!tsp_tensor_of(b) && tsp_number(b, &v) <= 0)) {
        if (PyErr_Occurred()) return NULL;
        Py_RETURN_NOTIMPLEMENTED;
    }
    return binary_call(a, b, "remainder", "other", ts_remainder);
}

/* ------------------------------------------------------------------ include/tessera/special.h:
 * ndtr ... the polynomials (tessera.special), igamma / igammac, mvlgamma; one tensor */
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

#define M_UNARY(name, cfn)         {#name, m_##name, METH_NOARGS, NULL},
#define F_UNARY(name, cfn)         {#name, f_##name, METH_O, NULL},
#define M_BINARY(name, other, cfn) {#name, FN(m_##name), FAST, NULL},
#define F_BINARY(name, other, cfn) {#name, FN(f_##name), FAST, NULL},

PyMethodDef tsp_tensor_special_methods[] = {
    SPECIAL_UNARY_LIST(M_UNARY)
        SPECIAL_BINARY_LIST(M_BINARY){"polygamma", FN(m_polygamma), FAST, "polygamma(n)"},
    {"logit", FN(m_logit), FAST, "logit(eps=None)"},
    {"nan_to_num", FN(m_nan_to_num), FAST, "nan_to_num(nan=0.0, posinf=None, neginf=None)"},
    MORE_BINARY_METHOD_LIST(M_BINARY){"mvlgamma", FN(m_mvlgamma), FAST, "mvlgamma(p)"},
    {"sum_to_size", m_sum_to_size, METH_VARARGS, "sum_to_size(*size)"},
    {NULL, NULL, 0, NULL},
};
PyMethodDef tsp_tensor_special_functions[] = {
    SPECIAL_UNARY_LIST(F_UNARY) SPECIAL_ONLY_LIST(F_UNARY)
        SPECIAL_BINARY_LIST(F_BINARY){"polygamma", FN(f_polygamma), FAST, NULL},
    {"logit", FN(f_logit), FAST, NULL},
    {"nan_to_num", FN(f_nan_to_num), FAST, NULL},
    {"_special_xlog1py", FN(f__special_xlog1py), FAST, NULL},
    MORE_UNARY_LIST(F_UNARY) MORE_BINARY_LIST(F_BINARY)
        MORE_BINARY_METHOD_LIST(F_BINARY){"mvlgamma", FN(f_mvlgamma), FAST, NULL},
    {NULL, NULL, 0, NULL},
};

void tsp_init_tensor_special(void) { tsp_tensor_as_number.nb_remainder = nb_remainder; }
