/* tensor_special.c — issue 52's special elementwise functions as Tensor methods and tessera.*
 * functions (lgamma, digamma, polygamma, erfinv, i0, sinc, logit, nan_to_num, expm1 ... xlogy,
 * hypot, atan2, logaddexp ...), `%` (remainder), and the _special_* functions behind
 * tessera.special. One table entry per op over the C API. */
#include "tensor_impl.h"

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

#define M_UNARY(name, cfn)         {#name, m_##name, METH_NOARGS, NULL},
#define F_UNARY(name, cfn)         {#name, f_##name, METH_O, NULL},
#define M_BINARY(name, other, cfn) {#name, FN(m_##name), FAST, NULL},
#define F_BINARY(name, other, cfn) {#name, FN(f_##name), FAST, NULL},

PyMethodDef tsp_tensor_special_methods[] = {
    SPECIAL_UNARY_LIST(M_UNARY)
        SPECIAL_BINARY_LIST(M_BINARY){"polygamma", FN(m_polygamma), FAST, "polygamma(n)"},
    {"logit", FN(m_logit), FAST, "logit(eps=None)"},
    {"nan_to_num", FN(m_nan_to_num), FAST, "nan_to_num(nan=0.0, posinf=None, neginf=None)"},
    {NULL, NULL, 0, NULL},
};
PyMethodDef tsp_tensor_special_functions[] = {
    SPECIAL_UNARY_LIST(F_UNARY) SPECIAL_ONLY_LIST(F_UNARY)
        SPECIAL_BINARY_LIST(F_BINARY){"polygamma", FN(f_polygamma), FAST, NULL},
    {"logit", FN(f_logit), FAST, NULL},
    {"nan_to_num", FN(f_nan_to_num), FAST, NULL},
    {"_special_xlog1py", FN(f__special_xlog1py), FAST, NULL},
    {NULL, NULL, 0, NULL},
};

void tsp_init_tensor_special(void) { tsp_tensor_as_number.nb_remainder = nb_remainder; }
