/* tensor_ops.c — the Tensor's arithmetic: Python operators with broadcasting and scalars on either
 * side, their in-place forms, comparisons, and the binary methods / tessera.* functions (add, mul,
 * maximum, round, mm, softmax...); clamp, where and masked_fill are tensor_select.c's. Every op is
 * one call of the C API. */
#include "tensor_impl.h"

#include <math.h>

#define T TSP_T

/* ------------------------------------------------------------------ binary ops */
typedef struct binop {
    const char *name;
    ts_tensor *(*tt)(ts_tensor *, ts_tensor *);
    ts_tensor *(*ts)(ts_tensor *, double);       /* tensor op scalar (NULL: scalar made a tensor) */
    ts_tensor *(*st)(ts_tensor *, double);       /* scalar op tensor, as f(tensor, scalar) */
    ts_tensor *(*tt_)(ts_tensor *, ts_tensor *); /* in place */
    ts_tensor *(*ts_)(ts_tensor *, double);
} binop;

static const binop op_add = {"add", ts_add, ts_add_scalar, ts_add_scalar, ts_add_, ts_add_scalar_};
static const binop op_sub = {"sub", ts_sub, ts_sub_scalar, ts_rsub_scalar, ts_sub_, ts_sub_scalar_};
static const binop op_mul = {"mul", ts_mul, ts_mul_scalar, ts_mul_scalar, ts_mul_, ts_mul_scalar_};
static const binop op_div = {"div", ts_div, ts_div_scalar, NULL, ts_div_, ts_div_scalar_};
static const binop op_pow = {"pow", ts_pow, ts_pow_scalar, ts_rpow_scalar, ts_pow_, ts_pow_scalar_};
static const binop op_matmul = {"matmul", ts_matmul, NULL, NULL, NULL, NULL};
static const binop op_maximum = {"maximum",         ts_maximum, ts_maximum_scalar,
                                 ts_maximum_scalar, NULL,       NULL};
static const binop op_minimum = {"minimum",         ts_minimum, ts_minimum_scalar,
                                 ts_minimum_scalar, NULL,       NULL};
static const binop op_fmod = {"fmod", ts_fmod, ts_fmod_scalar, NULL, NULL, NULL};
static const binop op_eq = {"eq", ts_eq, ts_eq_scalar, ts_eq_scalar, NULL, NULL};
static const binop op_ne = {"ne", ts_ne, ts_ne_scalar, ts_ne_scalar, NULL, NULL};
static const binop op_lt = {"lt", ts_lt, ts_lt_scalar, ts_gt_scalar, NULL, NULL};
static const binop op_le = {"le", ts_le, ts_le_scalar, ts_ge_scalar, NULL, NULL};
static const binop op_gt = {"gt", ts_gt, ts_gt_scalar, ts_lt_scalar, NULL, NULL};
static const binop op_ge = {"ge", ts_ge, ts_ge_scalar, ts_le_scalar, NULL, NULL};
static const binop op_and = {"logical_and", ts_logical_and, NULL, NULL, NULL, NULL};
static const binop op_or = {"logical_or", ts_logical_or, NULL, NULL, NULL, NULL};
/* integer and bool bitwise ops (a Python number beside: a 0-dim tensor, promoted as torch's) */
static const binop op_bitand = {"bitwise_and", ts_bitwise_and, NULL, NULL, ts_bitwise_and_, NULL};
static const binop op_bitor = {"bitwise_or", ts_bitwise_or, NULL, NULL, ts_bitwise_or_, NULL};
static const binop op_bitxor = {"bitwise_xor", ts_bitwise_xor, NULL, NULL, ts_bitwise_xor_, NULL};
static const binop op_lshift = {
    "bitwise_left_shift", ts_bitwise_left_shift, NULL, NULL, ts_bitwise_left_shift_, NULL};
static const binop op_rshift = {
    "bitwise_right_shift", ts_bitwise_right_shift, NULL, NULL, ts_bitwise_right_shift_, NULL};
static ts_tensor *floor_div(ts_tensor *a, ts_tensor *b) {
    return ts_div_rounding(a, b, TS_ROUNDING_FLOOR);
}
static const binop op_floordiv = {"floor_divide", floor_div, NULL, NULL, NULL, NULL};

/* A Python number beside tensor t, as a 0-dim tensor on t's device, with the dtype a "weak"
 * Python scalar has in torch: t's own unless the number's kind is wider (a float beside an int
 * tensor: the default float; an int beside a bool tensor: int64). */
ts_tensor *tsp_scalar_beside(ts_tensor *t, PyObject *num, double v) {
    ts_dtype dt = ts_dtype_of(t);
    if (PyFloat_Check(num) && !ts_dtype_is_floating(dt))
        dt = tsp_default_float; /* torch.set_default_dtype's */
    else if (!PyBool_Check(num) && dt == TS_BOOL)
        dt = TS_I64;
    return ts_scalar(v, (ts_opts){.dtype = dt, .device = ts_device_of(t)});
}

/* a Python float beside an integer or bool tensor (torch: the result is the default float dtype) */
static bool float_beside_integer(ts_tensor *x, PyObject *num) {
    const ts_dtype dt = ts_dtype_of(x);
    return PyFloat_Check(num) && !ts_dtype_is_floating(dt) && !ts_dtype_is_complex(dt);
}

/* r = op(x, num) or op(num, x) (scalar_left) through a 0-dim tensor */
static ts_tensor *with_scalar_tensor(ts_tensor *(*tt)(ts_tensor *, ts_tensor *), ts_tensor *x,
                                     PyObject *num, double v, bool scalar_left) {
    ts_tensor *s = tsp_scalar_beside(x, num, v), *r = NULL;
    if (s) r = scalar_left ? tt(s, x) : tt(x, s);
    tsp_drop(s);
    return r;
}

/* a op b with either side a Tensor and the other a Tensor or a Python number; NotImplemented for
 * other types (Python then tries the reflected op, or raises its TypeError) */
static PyObject *binary(PyObject *a, PyObject *b, const binop *op) {
    ts_tensor *ta = tsp_tensor_of(a), *tb = tsp_tensor_of(b), *r;
    double v;
    if (ta && tb) {
        if (tsp_enter()) return NULL;
        TSP_NOGIL(r = op->tt(ta, tb));
        return tsp_wrap(r);
    }
    PyObject *num = ta ? b : a;
    if (PyComplex_Check(num)) { /* a complex number: a 0-dim complex tensor beside the other */
        ts_tensor *x = ta ? ta : tb;
        ts_dtype dt = ts_dtype_of(x);
        dt = ts_dtype_is_complex(dt) ? dt : dt == TS_F64 ? TS_C128 : TS_C64;
        ts_tensor *c = tsp_tensor_from_data(num, dt, (ts_opts){.device = ts_device_of(x)});
        if (!c) return NULL;
        if (tsp_enter()) return tsp_drop(c), NULL;
        TSP_NOGIL(r = ta ? op->tt(x, c) : op->tt(c, x));
        tsp_drop(c);
        return tsp_wrap(r);
    }
    int k = tsp_number(num, &v);
    if (k <= 0) {
        if (k < 0) return NULL;
        Py_RETURN_NOTIMPLEMENTED;
    }
    if (tsp_enter()) return NULL;
    ts_tensor *x = ta ? ta : tb;
    ts_tensor *(*f)(ts_tensor *, double) = ta ? op->ts : op->st;
    /* a Python bool beside a bool tensor stays bool (torch: tensor([True]) + True is bool), where
     * the C core's scalar ops take every number as wider than bool */
    /* the C core's scalar ops take an integral double for a Python int (a * 1.0 would stay
     * int64): a Python float beside an integer or bool tensor is a 0-dim tensor of the default
     * float dtype instead, as torch promotes it */
    const bool float_beside_int = float_beside_integer(x, num);
    if (f && !float_beside_int && !(PyBool_Check(num) && ts_dtype_of(x) == TS_BOOL))
        TSP_NOGIL(r = f(x, v));
    else
        TSP_NOGIL(r = with_scalar_tensor(op->tt, x, num, v, !ta));
    return tsp_wrap(r);
}

/* self op= other: the C in-place op; self returned */
static PyObject *inplace(PyObject *self, PyObject *other, const binop *op) {
    ts_tensor *t = T(self), *o = tsp_tensor_of(other), *r;
    double v;
    if (!o && PyComplex_Check(other) && op->tt_) { /* a complex number: a 0-dim tensor of t's */
        ts_dtype dt = ts_dtype_of(t);
        dt = ts_dtype_is_complex(dt) ? dt : dt == TS_F64 ? TS_C128 : TS_C64;
        ts_tensor *c = tsp_tensor_from_data(other, dt, (ts_opts){.device = ts_device_of(t)});
        if (!c) return NULL;
        if (tsp_enter()) return tsp_drop(c), NULL;
        TSP_NOGIL(r = op->tt_(t, c));
        tsp_drop(c);
        return tsp_inplace_result(self, r);
    }
    if (!o) {
        int k = tsp_number(other, &v);
        if (k <= 0) {
            if (k < 0) return NULL;
            Py_RETURN_NOTIMPLEMENTED;
        }
    }
    if (tsp_enter()) return NULL;
    if (o)
        TSP_NOGIL(r = op->tt_(t, o));
    else if (op->ts_ && !float_beside_integer(t, other))
        TSP_NOGIL(r = op->ts_(t, v));
    else {
        ts_tensor *s = tsp_scalar_beside(t, other, v);
        r = s ? op->tt_(t, s) : NULL;
        tsp_drop(s);
    }
    return tsp_inplace_result(self, r);
}

#define NB_BINARY(name, op)                                                                        \
    static PyObject *nb_##name(PyObject *a, PyObject *b) { return binary(a, b, &op); }
NB_BINARY(add, op_add)
NB_BINARY(sub, op_sub)
NB_BINARY(mul, op_mul)
NB_BINARY(div, op_div)
NB_BINARY(matmul, op_matmul)

static PyObject *nb_pow(PyObject *a, PyObject *b, PyObject *mod) {
    if (mod != Py_None) Py_RETURN_NOTIMPLEMENTED;
    return binary(a, b, &op_pow);
}

/* &, |, ^, <<, >>, ~: the bitwise ops (integer and bool tensors; on bool the logical ones) */
NB_BINARY(and, op_bitand)
NB_BINARY(or, op_bitor)
NB_BINARY(xor, op_bitxor)
NB_BINARY(lshift, op_lshift)
NB_BINARY(rshift, op_rshift)
NB_BINARY(floordiv, op_floordiv)
static PyObject *nb_invert(PyObject *a) { return tsp_unary(ts_bitwise_not, T(a)); }
static PyObject *nb_neg(PyObject *a) { return tsp_unary(ts_neg, T(a)); }
static PyObject *nb_pos(PyObject *a) { return Py_NewRef(a); }
static PyObject *nb_abs(PyObject *a) { return tsp_unary(ts_abs, T(a)); }

#define NB_INPLACE(name, op)                                                                       \
    static PyObject *nb_i##name(PyObject *a, PyObject *b) { return inplace(a, b, &op); }
NB_INPLACE(add, op_add)
NB_INPLACE(sub, op_sub)
NB_INPLACE(mul, op_mul)
NB_INPLACE(div, op_div)
static PyObject *nb_ipow(PyObject *a, PyObject *b, PyObject *mod) {
    (void)mod;
    return inplace(a, b, &op_pow);
}
NB_INPLACE(and, op_bitand)
NB_INPLACE(or, op_bitor)
NB_INPLACE(xor, op_bitxor)
NB_INPLACE(lshift, op_lshift)
NB_INPLACE(rshift, op_rshift)

PyNumberMethods tsp_tensor_as_number = {
    .nb_add = nb_add,
    .nb_subtract = nb_sub,
    .nb_multiply = nb_mul,
    .nb_true_divide = nb_div,
    .nb_power = nb_pow,
    .nb_matrix_multiply = nb_matmul,
    .nb_negative = nb_neg,
    .nb_positive = nb_pos,
    .nb_absolute = nb_abs,
    .nb_and = nb_and,
    .nb_or = nb_or,
    .nb_xor = nb_xor,
    .nb_invert = nb_invert,
    .nb_lshift = nb_lshift,
    .nb_rshift = nb_rshift,
    .nb_floor_divide = nb_floordiv,
    .nb_inplace_and = nb_iand,
    .nb_inplace_or = nb_ior,
    .nb_inplace_xor = nb_ixor,
    .nb_inplace_lshift = nb_ilshift,
    .nb_inplace_rshift = nb_irshift,
    .nb_inplace_add = nb_iadd,
    .nb_inplace_subtract = nb_isub,
    .nb_inplace_multiply = nb_imul,
    .nb_inplace_true_divide = nb_idiv,
    .nb_inplace_power = nb_ipow,
    /* nb_float, nb_int, nb_index, nb_bool: tensor.c */
};

PyObject *tsp_tensor_richcompare(PyObject *a, PyObject *b, int op) {
    static const binop *const ops[] = {[Py_LT] = &op_lt, [Py_LE] = &op_le, [Py_EQ] = &op_eq,
                                       [Py_NE] = &op_ne, [Py_GT] = &op_gt, [Py_GE] = &op_ge};
    return binary(a, b, ops[op]);
}

/* ------------------------------------------------------------------ binary methods/functions */
/* res, or the TypeError naming fn's 'other' argument when res is NotImplemented */
static PyObject *or_type_error(PyObject *res, const char *fn, const char *suffix, PyObject *other) {
    if (res != Py_NotImplemented) return res;
    Py_DECREF(res);
    if (tsp_sparse_arg_error(other, fn, "other")) return NULL;
    PyErr_Format(PyExc_TypeError, "%s%s(): argument 'other' must be Tensor or a number, not %.100s",
                 fn, suffix, Py_TYPE(other)->tp_name);
    return NULL;
}

/* div(input, other, rounding_mode='trunc' | 'floor'): x and other (a Tensor or a number) through
 * ts_div_rounding; mode None: true division */
static ts_tensor *div_rounding(PyObject *x, PyObject *other, PyObject *mode_obj) {
    ts_rounding_mode mode;
    if (mode_obj == Py_None)
        mode = TS_ROUNDING_NONE;
    else if (PyUnicode_Check(mode_obj) && !PyUnicode_CompareWithASCIIString(mode_obj, "trunc"))
        mode = TS_ROUNDING_TRUNC;
    else if (PyUnicode_Check(mode_obj) && !PyUnicode_CompareWithASCIIString(mode_obj, "floor"))
        mode = TS_ROUNDING_FLOOR;
    else {
        PyErr_Format(PyExc_ValueError,
                     "div expected rounding_mode to be one of None, 'trunc', or 'floor' but found "
                     "%R",
                     mode_obj);
        return NULL;
    }
    ts_tensor *a = tsp_tensor_of(x), *b = tsp_tensor_of(other), *sa = NULL, *sb = NULL, *r = NULL;
    double v;
    if (!a && !b) {
        PyErr_SetString(PyExc_TypeError, "div(): argument 'input' must be Tensor");
        return NULL;
    }
    if ((!a && tsp_double_arg(x, 0, &v, "div", "input") < 0) ||
        (!b && tsp_double_arg(other, 0, &v, "div", "other") < 0) || tsp_enter())
        return NULL;
    if (!a) a = sa = tsp_scalar_beside(b, x, v);
    if (!b) b = sb = tsp_scalar_beside(a, other, v);
    if (a && b) TSP_NOGIL(r = ts_div_rounding(a, b, mode));
    tsp_drop(sa);
    tsp_drop(sb);
    if (!r) tsp_check();
    return r;
}

/* torch's deprecated overloads, still accepted (with a warning): add(Number alpha, Tensor other)
 * and sub(...), the pair given positionally in that order, swapped here; and two numbers
 * add(Number other, Number alpha), made the one number other * alpha (*prod, a new reference the
 * caller releases). -1 on error. */
static int deprecated_alpha(PyObject **other, PyObject **alpha, int positional, const char *fn,
                            PyObject **prod) {
    *prod = NULL;
    if (!*alpha || tsp_tensor_of(*other)) return 0;
    int num_other = PyLong_Check(*other) || PyFloat_Check(*other);
    if (positional && num_other && tsp_tensor_of(*alpha)) {
        if (PyErr_WarnFormat(PyExc_UserWarning, 1,
                             "This overload of %s is deprecated: %s(Number alpha, Tensor other); "
                             "use %s(Tensor other, *, Number alpha=1)",
                             fn, fn, fn) < 0)
            return -1;
        PyObject *t = *other;
        *other = *alpha, *alpha = t;
        return 0;
    }
    if (num_other && (PyLong_Check(*alpha) || PyFloat_Check(*alpha))) {
        if (!(*prod = PyNumber_Multiply(*other, *alpha))) return -1;
        *other = *prod, *alpha = NULL;
    }
    return 0;
}

/* op(input, other, alpha=1) (div: rounding_mode=None too) */
static PyObject *call_binary(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kw,
                             const binop *op) {
    static const char *const mnames[] = {"other", "alpha", "rounding_mode"};
    static const char *const fnames[] = {"input", "other", "alpha", "rounding_mode"};
    PyObject *a[4] = {0};
    int r = self ? tsp_parse(args, nargs, kw, op->name, mnames, 3, 1, a + 1)
                 : tsp_parse(args, nargs, kw, op->name, fnames, 4, 2, a);
    if (r < 0) return NULL;
    if (self) a[0] = self;
    if (a[3]) {
        if (op != &op_div) {
            PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument 'rounding_mode'",
                         op->name);
            return NULL;
        }
        ts_tensor *res = div_rounding(a[0], a[1], a[3]);
        return res ? tsp_wrap(res) : NULL;
    }
    PyObject *prod = NULL;
    if ((op == &op_add || op == &op_sub) && tsp_tensor_of(a[0]) &&
        deprecated_alpha(&a[1], &a[2], nargs >= (self ? 2 : 3), op->name, &prod) < 0)
        return NULL;
    if (prod) {
        PyObject *res = or_type_error(binary(a[0], prod, op), op->name, "", prod);
        Py_DECREF(prod);
        return res;
    }
    if (!tsp_tensor_of(a[0]) && !tsp_tensor_of(a[1])) {
        PyErr_Format(PyExc_TypeError, "%s(): argument 'input' must be Tensor, not %.100s", op->name,
                     Py_TYPE(a[0])->tp_name);
        return NULL;
    }
    if (a[2]) { /* alpha: a + alpha * b (add, sub) */
        double alpha;
        ts_tensor *x = tsp_tensor_arg(a[0], op->name, "input"), *y, *res;
        if (!x || !(y = tsp_tensor_arg(a[1], op->name, "other")) ||
            tsp_double_arg(a[2], 1, &alpha, op->name, "alpha") < 0 || tsp_enter())
            return NULL;
        if (op != &op_add && op != &op_sub) {
            PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument 'alpha'",
                         op->name);
            return NULL;
        }
        TSP_NOGIL(res = ts_add_alpha(x, y, op == &op_sub ? -alpha : alpha));
        return tsp_wrap(res);
    }
    return or_type_error(binary(a[0], a[1], op), op->name, "", a[1]);
}

/* self.op_(other): in place */
static PyObject *call_inplace(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kw,
                              const binop *op) {
    static const char *const names[] = {"other", "alpha", "rounding_mode"};
    PyObject *a[3];
    if (tsp_parse(args, nargs, kw, op->name, names, 3, 1, a) < 0) return NULL;
    if (a[2]) { /* div_(other, rounding_mode=): the rounded quotient copied into self */
        if (op != &op_div) {
            PyErr_Format(PyExc_TypeError,
                         "%s_() got an unexpected keyword argument 'rounding_mode'", op->name);
            return NULL;
        }
        ts_tensor *q = div_rounding(self, a[0], a[2]), *res;
        if (!q) return NULL;
        TSP_NOGIL(res = ts_copy_(T(self), q));
        tsp_drop(q);
        return tsp_inplace_result(self, res);
    }
    PyObject *prod = NULL;
    if ((op == &op_add || op == &op_sub) &&
        deprecated_alpha(&a[0], &a[1], nargs >= 2, op->name, &prod) < 0)
        return NULL;
    if (prod) {
        PyObject *res = or_type_error(inplace(self, prod, op), op->name, "_", prod);
        Py_DECREF(prod);
        return res;
    }
    if (a[1]) { /* alpha: self += alpha * other, through the out-of-place op and copy_ */
        double alpha;
        ts_tensor *y = tsp_tensor_arg(a[0], op->name, "other"), *res = NULL, *sum;
        if (!y || tsp_double_arg(a[1], 1, &alpha, op->name, "alpha") < 0 || tsp_enter())
            return NULL;
        Py_BEGIN_ALLOW_THREADS;
        sum = ts_add_alpha(T(self), y, op == &op_sub ? -alpha : alpha);
        if (sum) res = ts_copy_(T(self), sum);
        tsp_drop(sum);
        Py_END_ALLOW_THREADS;
        return tsp_inplace_result(self, res);
    }
    return or_type_error(inplace(self, a[0], op), op->name, "_", a[0]);
}

#define BINARY_LIST(X)                                                                             \
    X(add, op_add)                                                                                 \
    X(sub, op_sub)                                                                                 \
    X(mul, op_mul)                                                                                 \
    X(div, op_div)                                                                                 \
    X(pow, op_pow)                                                                                 \
    X(matmul, op_matmul)                                                                           \
    X(maximum, op_maximum)                                                                         \
    X(minimum, op_minimum)                                                                         \
    X(fmod, op_fmod)                                                                               \
    X(eq, op_eq)                                                                                   \
    X(ne, op_ne)                                                                                   \
    X(lt, op_lt)                                                                                   \
    X(le, op_le)                                                                                   \
    X(gt, op_gt)                                                                                   \
    X(ge, op_ge)                                                                                   \
    X(logical_and, op_and)                                                                         \
    X(logical_or, op_or)                                                                           \
    X(bitwise_and, op_bitand)                                                                      \
    X(bitwise_or, op_bitor)                                                                        \
    X(bitwise_xor, op_bitxor)                                                                      \
    X(bitwise_left_shift, op_lshift)                                                               \
    X(bitwise_right_shift, op_rshift)                                                              \
    X(floor_divide, op_floordiv)
#define INPLACE_LIST(X)                                                                            \
    X(add, op_add)                                                                                 \
    X(sub, op_sub)                                                                                 \
    X(mul, op_mul)                                                                                 \
    X(div, op_div)                                                                                 \
    X(pow, op_pow)                                                                                 \
    X(bitwise_and, op_bitand)                                                                      \
    X(bitwise_or, op_bitor)                                                                        \
    X(bitwise_xor, op_bitxor) X(bitwise_left_shift, op_lshift) X(bitwise_right_shift, op_rshift)

#define DEF_BINARY(name, op) TSP_METHOD_AND_FUNCTION(name, call_binary, &op)
BINARY_LIST(DEF_BINARY)
#define DEF_INPLACE(name, op)                                                                      \
    static PyObject *m_##name##_(PyObject *self, PyObject *const *args, Py_ssize_t nargs,          \
                                 PyObject *kw) {                                                   \
        return call_inplace(self, args, nargs, kw, &op);                                           \
    }
INPLACE_LIST(DEF_INPLACE)

/* ------------------------------------------------------------------ unary ops */
/* clang-format off: one entry a line (clang-format lays out a long X-macro list differently on
 * each pass) */
#define UNARY_LIST(X)                                                                              \
    X(neg, ts_neg)                                                                                 \
    X(negative, ts_neg)                                                                            \
    X(abs, ts_abs)                                                                                 \
    X(exp, ts_exp)                                                                                 \
    X(log, ts_log)                                                                                 \
    X(log1p, ts_log1p)                                                                             \
    X(sqrt, ts_sqrt)                                                                               \
    X(rsqrt, ts_rsqrt)                                                                             \
    X(sin, ts_sin)                                                                                 \
    X(cos, ts_cos)                                                                                 \
    X(tan, ts_tan)                                                                                 \
    X(asin, ts_asin)                                                                               \
    X(acos, ts_acos)                                                                               \
    X(atan, ts_atan)                                                                               \
    X(sinh, ts_sinh)                                                                               \
    X(cosh, ts_cosh)                                                                               \
    X(asinh, ts_asinh)                                                                             \
    X(acosh, ts_acosh)                                                                             \
    X(atanh, ts_atanh)                                                                             \
    X(erf, ts_erf)                                                                                 \
    X(tanh, ts_tanh)                                                                               \
    X(sigmoid, ts_sigmoid)                                                                         \
    X(relu, ts_relu)                                                                               \
    X(sign, ts_sign)                                                                               \
    X(floor, ts_floor)                                                                             \
    X(ceil, ts_ceil)                                                                               \
    X(reciprocal, ts_reciprocal)                                                                   \
    X(square, ts_square)                                                                           \
    X(logical_not, ts_logical_not)                                                                 \
    X(bitwise_not, ts_bitwise_not)
// clang-format on
#define UNARY_INPLACE_LIST(X)                                                                      \
    X(neg_, ts_neg_)                                                                               \
    X(abs_, ts_abs_)                                                                               \
    X(exp_, ts_exp_)                                                                               \
    X(log_, ts_log_)                                                                               \
    X(sqrt_, ts_sqrt_)                                                                             \
    X(sigmoid_, ts_sigmoid_) X(relu_, ts_relu_) X(tanh_, ts_tanh_) X(zero_, ts_zero_)

UNARY_LIST(TSP_DEF_UNARY)

static PyObject *unary_inplace(PyObject *self, ts_tensor *(*f)(ts_tensor *)) {
    ts_tensor *r;
    if (tsp_enter()) return NULL;
    TSP_NOGIL(r = f(T(self)));
    return tsp_inplace_result(self, r);
}
#define DEF_UNARY_INPLACE(name, cfn)                                                               \
    static PyObject *m_##name(PyObject *self, PyObject *unused) {                                  \
        (void)unused;                                                                              \
        return unary_inplace(self, cfn);                                                           \
    }
UNARY_INPLACE_LIST(DEF_UNARY_INPLACE)

/* ------------------------------------------------------------------ the rest */
/* fill_(value) with a complex value (a Python complex or a 0-dim complex tensor): the value copied
 * into every element (copy_ broadcasts it; a real self refuses the complex value) */
static PyObject *fill_complex(PyObject *self, PyObject *value) {
    ts_tensor *v = tsp_tensor_of(value), *own = NULL, *r;
    if (v && ts_ndim(v) != 0)
        return PyErr_Format(PyExc_RuntimeError,
                            "fill_ only supports 0-dimension value tensor but got tensor with %d "
                            "dimensions.",
                            ts_ndim(v));
    if (!v) {
        ts_dtype dt = ts_dtype_of(T(self));
        own = tsp_tensor_from_data(value, ts_dtype_is_complex(dt) ? dt : TS_C128,
                                   (ts_opts){.device = ts_cpu()});
        if (!own) return NULL;
        v = own;
    }
    if (tsp_enter()) return tsp_drop(own), NULL;
    TSP_NOGIL(r = ts_copy_(T(self), v));
    tsp_drop(own);
    return tsp_inplace_result(self, r);
}

/* fill_(value): a number or a 0-dim tensor */
static PyObject *m_fill_(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kw) {
    static const char *const names[] = {"value"};
    PyObject *a[1];
    double v;
    ts_tensor *r;
    if (tsp_parse(args, nargs, kw, "fill_", names, 1, 1, a) < 0) return NULL;
    ts_tensor *vt = tsp_tensor_of(a[0]);
    if (PyComplex_Check(a[0]) || (vt && ts_dtype_is_complex(ts_dtype_of(vt))))
        return fill_complex(self, a[0]);
    if (tsp_scalar_arg(a[0], 0, &v, "fill_", "value") < 0 || tsp_enter()) return NULL;
    TSP_NOGIL(r = ts_fill_(T(self), v));
    return tsp_inplace_result(self, r);
}

/* round(input, decimals=0) */
static PyObject *call_round(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kw,
                            const char *fn) {
    static const char *const names[] = {"input", "decimals"};
    PyObject *a[2] = {0};
    int r = self ? tsp_parse(args, nargs, kw, fn, names + 1, 1, 0, a + 1)
                 : tsp_parse(args, nargs, kw, fn, names, 2, 1, a);
    ts_tensor *t = r < 0 ? NULL : self ? T(self) : tsp_tensor_arg(a[0], fn, "input"), *res;
    int64_t d = 0;
    if (!t || (a[1] && tsp_int_arg(a[1], &d, fn, "decimals") < 0) || tsp_enter()) return NULL;
    TSP_NOGIL(res = ts_round_decimals(t, d));
    return tsp_wrap(res);
}
TSP_METHOD_AND_FUNCTION(round, call_round, "round")

/* mm / bmm: two tensors */
static PyObject *two_tensors(PyObject *x, PyObject *y, const char *fn,
                             ts_tensor *(*f)(ts_tensor *, ts_tensor *)) {
    ts_tensor *a = tsp_tensor_arg(x, fn, "input"), *b, *r;
    if (!a || !(b = tsp_tensor_arg(y, fn, "mat2")) || tsp_enter()) return NULL;
    TSP_NOGIL(r = f(a, b));
    return tsp_wrap(r);
}
static PyObject *m_mm(PyObject *self, PyObject *other) {
    return two_tensors(self, other, "mm", ts_mm);
}
static PyObject *m_bmm(PyObject *self, PyObject *other) {
    return two_tensors(self, other, "bmm", ts_bmm);
}
static PyObject *f_mm(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    (void)mod;
    if (nargs != 2)
        return PyErr_Format(PyExc_TypeError, "mm() takes 2 arguments (%zd given)", nargs);
    return two_tensors(args[0], args[1], "mm", ts_mm);
}
static PyObject *f_bmm(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    (void)mod;
    if (nargs != 2)
        return PyErr_Format(PyExc_TypeError, "bmm() takes 2 arguments (%zd given)", nargs);
    return two_tensors(args[0], args[1], "bmm", ts_bmm);
}

/* softmax(dim) / log_softmax(dim) */
static PyObject *softmax_like(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kw,
                              const char *fn, ts_tensor *(*f)(ts_tensor *, int)) {
    static const char *const mnames[] = {"dim", "dtype"};
    static const char *const fnames[] = {"input", "dim", "dtype"};
    PyObject *a[3] = {0};
    int r = self ? tsp_parse(args, nargs, kw, fn, mnames, 2, 1, a + 1)
                 : tsp_parse(args, nargs, kw, fn, fnames, 3, 2, a);
    ts_tensor *t = r < 0  ? NULL
                   : self ? T(self)
                          : tsp_tensor_arg(a[0], fn, "input"),
              *res, *c = NULL;
    int64_t dim;
    ts_dtype dt = TS_DTYPE_DEFAULT;
    if (!t || tsp_int_arg(a[1], &dim, fn, "dim") < 0 || tsp_dtype_arg(a[2], &dt, fn, "dtype") < 0 ||
        tsp_enter())
        return NULL;
    Py_BEGIN_ALLOW_THREADS;
    if (dt != TS_DTYPE_DEFAULT) t = c = ts_to_dtype(t, dt);
    res = t ? f(t, (int)dim) : NULL;
    tsp_drop(c);
    Py_END_ALLOW_THREADS;
    return tsp_wrap(res);
}
#define SOFTMAX(name)                                                                              \
    static PyObject *m_##name(PyObject *self, PyObject *const *a, Py_ssize_t n, PyObject *kw) {    \
        return softmax_like(self, a, n, kw, #name, ts_##name);                                     \
    }                                                                                              \
    static PyObject *f_##name(PyObject *mod, PyObject *const *a, Py_ssize_t n, PyObject *kw) {     \
        (void)mod;                                                                                 \
        return softmax_like(NULL, a, n, kw, #name, ts_##name);                                     \
    }
SOFTMAX(softmax)
SOFTMAX(log_softmax)

#define M_BINARY(name, op)  {#name, FN(m_##name), FAST, NULL},
#define F_BINARY(name, op)  {#name, FN(f_##name), FAST, NULL},
#define M_INPLACE(name, op) {#name "_", FN(m_##name##_), FAST, NULL},
#define M_UNARY(name, cfn)  {#name, m_##name, METH_NOARGS, NULL},
#define F_UNARY(name, cfn)  {#name, f_##name, METH_O, NULL},

PyMethodDef tsp_tensor_ops_methods[] = {
    BINARY_LIST(M_BINARY) INPLACE_LIST(M_INPLACE) UNARY_LIST(M_UNARY)
        UNARY_INPLACE_LIST(M_UNARY){"fill_", FN(m_fill_), FAST, "fill_(value)"},
    {"round", FN(m_round), FAST, "round(decimals=0)"},
    {"mm", m_mm, METH_O, NULL},
    {"bmm", m_bmm, METH_O, NULL},
    {"softmax", FN(m_softmax), FAST, "softmax(dim)"},
    {"log_softmax", FN(m_log_softmax), FAST, "log_softmax(dim)"},
    {NULL, NULL, 0, NULL},
};
PyMethodDef tsp_tensor_ops_functions[] = {
    BINARY_LIST(F_BINARY)
        UNARY_LIST(F_UNARY){"round", FN(f_round), FAST, "round(input, decimals=0)"},
    {"mm", FN(f_mm), METH_FASTCALL, NULL},
    {"bmm", FN(f_bmm), METH_FASTCALL, NULL},
    {"softmax", FN(f_softmax), FAST, NULL},
    {"log_softmax", FN(f_log_softmax), FAST, NULL},
    {NULL, NULL, 0, NULL},
};

int tsp_init_tensor_ops(PyObject *m) {
    (void)m;
    return 0;
}
