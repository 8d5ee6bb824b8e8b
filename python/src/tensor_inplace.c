/* tensor_inplace.c — PyTorch's in-place Tensor methods that have no C in-place op of their own
 * (sin_, atan2_, lerp_, eq_, nan_to_num_...) and a few out-of-place aliases (arccos, greater...).
 * The type is immutable from Python, so each method here forwards its name, self and arguments to
 * one generic function, tessera._inplace_methods._apply: the out-of-place op (on a clone when the
 * graph is recorded) copied back with copy_, after ts_check_inplace (tessera/inplace.h). */
#include "tensor_impl.h"
#include "tessera/inplace.h"

static PyObject *apply_fn;

static PyObject *forward(const char *name, PyObject *self, PyObject *args, PyObject *kw) {
    if (!apply_fn) {
        PyObject *mod = PyImport_ImportModule("tessera._inplace_methods");
        if (!mod) return NULL;
        apply_fn = PyObject_GetAttrString(mod, "_apply");
        Py_DECREF(mod);
        if (!apply_fn) return NULL;
    }
    PyObject *n = PyUnicode_FromString(name);
    if (!n) return NULL;
    PyObject *r = PyObject_CallFunctionObjArgs(apply_fn, n, self, args, kw ? kw : Py_None, NULL);
    Py_DECREF(n);
    return r;
}

/* t._check_inplace(op, operand_requires_grad): ts_check_inplace, raising its error */
static PyObject *m_check_inplace(PyObject *self, PyObject *args) {
    const char *op;
    int operand_grad;
    if (!PyArg_ParseTuple(args, "sp:_check_inplace", &op, &operand_grad)) return NULL;
    if (ts_check_inplace(TSP_T(self), operand_grad != 0, op) != TS_OK) return tsp_raise_pending();
    Py_RETURN_NONE;
}

#define FORWARD(name)                                                                              \
    static PyObject *m_##name(PyObject *self, PyObject *args, PyObject *kw) {                      \
        return forward(#name, self, args, kw);                                                     \
    }
#define ENTRY(name)                                                                                \
    {#name, (PyCFunction)(void (*)(void))m_##name, METH_VARARGS | METH_KEYWORDS,                   \
     #name ": PyTorch's, through the out-of-place op (tessera/_inplace_methods.py)"},

// clang-format off: one name a line (the names _inplace_methods.py knows)
#define INPLACE_METHODS(X)                                                                         \
    X(absolute_)                                                                                   \
    X(acos_)                                                                                       \
    X(acosh_)                                                                                      \
    X(addcdiv_)                                                                                    \
    X(addcmul_)                                                                                    \
    X(arccos_)                                                                                     \
    X(arccosh_)                                                                                    \
    X(arcsin_)                                                                                     \
    X(arcsinh_)                                                                                    \
    X(arctan2_)                                                                                    \
    X(arctan_)                                                                                     \
    X(arctanh_)                                                                                    \
    X(asin_)                                                                                       \
    X(asinh_)                                                                                      \
    X(atan2_)                                                                                      \
    X(atan_)                                                                                       \
    X(atanh_)                                                                                      \
    X(bernoulli_)                                                                                  \
    X(bitwise_not_)                                                                                \
    X(ceil_)                                                                                       \
    X(clamp_max_)                                                                                  \
    X(clamp_min_)                                                                                  \
    X(clip_)                                                                                       \
    X(copysign_)                                                                                   \
    X(conj_physical_)                                                                              \
    X(cos_)                                                                                        \
    X(cosh_)                                                                                       \
    X(cumprod_)                                                                                    \
    X(cumsum_)                                                                                     \
    X(deg2rad_)                                                                                    \
    X(digamma_)                                                                                    \
    X(divide_)                                                                                     \
    X(eq_)                                                                                         \
    X(erf_)                                                                                        \
    X(erfc_)                                                                                       \
    X(erfinv_)                                                                                     \
    X(exp2_)                                                                                       \
    X(expm1_)                                                                                      \
    X(fix_)                                                                                        \
    X(float_power_)                                                                                \
    X(floor_)                                                                                      \
    X(floor_divide_)                                                                               \
    X(fmod_)                                                                                       \
    X(frac_)                                                                                       \
    X(gcd_)                                                                                        \
    X(ge_)                                                                                         \
    X(greater_)                                                                                    \
    X(greater_equal_)                                                                              \
    X(gt_)                                                                                         \
    X(heaviside_)                                                                                  \
    X(hypot_)                                                                                      \
    X(i0_)                                                                                         \
    X(igamma_)                                                                                     \
    X(igammac_)                                                                                    \
    X(lcm_)                                                                                        \
    X(ldexp_)                                                                                      \
    X(le_)                                                                                         \
    X(lerp_)                                                                                       \
    X(less_)                                                                                       \
    X(less_equal_)                                                                                 \
    X(lgamma_)                                                                                     \
    X(log10_)                                                                                      \
    X(log1p_)                                                                                      \
    X(log2_)                                                                                       \
    X(logical_and_)                                                                                \
    X(logical_not_)                                                                                \
    X(logical_or_)                                                                                 \
    X(logical_xor_)                                                                                \
    X(logit_)                                                                                      \
    X(lt_)                                                                                         \
    X(multiply_)                                                                                   \
    X(mvlgamma_)                                                                                   \
    X(nan_to_num_)                                                                                 \
    X(ne_)                                                                                         \
    X(negative_)                                                                                   \
    X(nextafter_)                                                                                  \
    X(not_equal_)                                                                                  \
    X(polygamma_)                                                                                  \
    X(rad2deg_)                                                                                    \
    X(reciprocal_)                                                                                 \
    X(remainder_)                                                                                  \
    X(renorm_)                                                                                     \
    X(round_)                                                                                      \
    X(rsqrt_)                                                                                      \
    X(sgn_)                                                                                        \
    X(sign_)                                                                                       \
    X(sin_)                                                                                        \
    X(sinc_)                                                                                       \
    X(sinh_)                                                                                       \
    X(square_)                                                                                     \
    X(subtract_)                                                                                   \
    X(tan_)                                                                                        \
    X(true_divide_)                                                                                \
    X(trunc_)                                                                                      \
    X(xlogy_)                                                                                      \
    X(fill_diagonal_)                                                                              \
    X(random_)                                                                                     \
    X(apply_)                                                                                      \
    X(map_)                                                                                        \
    X(map2_)                                                                                       \
    X(absolute)                                                                                    \
    X(arccos)                                                                                      \
    X(arccosh)                                                                                     \
    X(arcsin)                                                                                      \
    X(arcsinh)                                                                                     \
    X(arctan)                                                                                      \
    X(arctanh)                                                                                     \
    X(bernoulli)                                                                                   \
    X(divide)                                                                                      \
    X(greater)                                                                                     \
    X(greater_equal)                                                                               \
    X(less)                                                                                        \
    X(less_equal)                                                                                  \
    X(multiply)                                                                                    \
    X(not_equal)                                                                                   \
    X(renorm)                                                                                      \
    X(subtract)
// clang-format on

INPLACE_METHODS(FORWARD)

PyMethodDef tsp_tensor_inplace_methods[] = {
    INPLACE_METHODS(ENTRY){"_check_inplace", m_check_inplace, METH_VARARGS,
                           "_check_inplace(op, operand_requires_grad): PyTorch's refusals before "
                           "an in-place op (ts_check_inplace)"},
    {NULL, NULL, 0, NULL}};
