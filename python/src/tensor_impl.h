/* tensor_impl.h — what the Tensor files (tensor*.c, autograd.c) share beyond tsp.h: the fast
 * argument parser, scalar/dims helpers and each file's method and function tables. */
#ifndef TSP_TENSOR_IMPL_H
#define TSP_TENSOR_IMPL_H

#include "tsp.h"

/* METH_FASTCALL|METH_KEYWORDS parsing without allocating: names[i] is parameter i; out[i] gets a
 * borrowed reference or stays NULL when not passed. The first `required` are mandatory. Raises
 * TypeError naming fn and the argument (unknown keyword, too many, missing, given twice). */
int tsp_parse(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames, const char *fn,
              const char *const *names, int nnames, int required, PyObject **out);
/* tsp_parse for a function that is also a Tensor method: names[0] is the input, which is self
 * for the method (the rest of the names shift by one) and the first argument, required and a
 * Tensor, for the function. */
int tsp_parse_input(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                    const char *fn, const char *const *names, int nnames, int required,
                    PyObject **out);
/* pieces[0..n) as a tuple of Tensors (their references move into it; on failure the ones not
 * wrapped are dropped); NULL with the exception set */
PyObject *tsp_tuple_of(ts_tensor **pieces, int n);
/* A Python number beside tensor t, as a 0-dim tensor on t's device, with the dtype a "weak"
 * Python scalar has in torch: t's own unless the number's kind is wider (a float beside an int
 * tensor: the default float; an int beside a bool tensor: int64). */
ts_tensor *tsp_scalar_beside(ts_tensor *t, PyObject *num, double v);
#define TSP_NARGS(a) ((int)(sizeof(a) / sizeof *(a)))
/* A fastcall function's parse in one line, for files whose functions take SIG's arguments:
 * PARSE(fn, required, names...) declares `names` and `a` (the arguments as objects, NULL when
 * absent) and returns NULL with the exception set on a bad call; TARG(i, fn) is argument i as a
 * tensor (NULL with the exception set). */
#define SIG (PyObject * mod, PyObject *const *args, Py_ssize_t nargs, PyObject *kw)
#define PARSE(fn, required, ...)                                                                   \
    static const char *const names[] = {__VA_ARGS__};                                              \
    PyObject *a[TSP_NARGS(names)] = {0};                                                           \
    if (tsp_parse(args, nargs, kw, fn, names, TSP_NARGS(names), required, a) < 0) return NULL
#define TARG(i, fn) tsp_tensor_arg(a[i], fn, names[i])
/* An op's n results (at most 8; their references move in) as the tensor (n == 1) or a tuple; when
 * one is NULL or an error is pending, all are dropped and the error raised (`op` names the call
 * when no error was recorded). */
PyObject *tsp_results(const char *op, ts_tensor *const *r, int n);
/* A str argument: *out = its UTF-8 (alive while o is), dflt for None or absent; -1 with a
 * TypeError naming fn and arg for another type. */
int tsp_str_arg(PyObject *o, const char *dflt, const char **out, const char *fn, const char *arg);

/* A Python number (bool, int, float, or anything with __float__ that is not a Tensor) -> *v;
 * 1 when o is a number, 0 when it is not (no exception), -1 on error. */
int tsp_number(PyObject *o, double *v);
/* dim=: one int or a sequence of ints -> ts_dims (an empty sequence: all dims) */
int tsp_dims_arg(PyObject *o, ts_dims *out, const char *fn, const char *arg);
/* bool-like argument (None -> dflt) */
int tsp_bool_arg(PyObject *o, bool dflt, bool *out, const char *fn, const char *arg);
/* a float argument (None -> dflt) */
int tsp_double_arg(PyObject *o, double dflt, double *out, const char *fn, const char *arg);
/* the same, or a 0-dim Tensor's value (torch takes one where it takes a number) */
int tsp_scalar_arg(PyObject *o, double dflt, double *out, const char *fn, const char *arg);
/* an int, or a 0-dim integral Tensor's value (narrow's start) */
int tsp_int_or_tensor_arg(PyObject *o, int64_t *out, const char *fn, const char *arg);

/* m_NAME (a Tensor method: self is the input) and f_NAME (tessera.NAME: the input comes first
 * among the arguments) over one body: call(self or NULL, args, nargs, kwnames, extra) */
#define TSP_METHOD_AND_FUNCTION(name, call, extra)                                                 \
    static PyObject *m_##name(PyObject *self, PyObject *const *a, Py_ssize_t n, PyObject *kw) {    \
        return call(self, a, n, kw, extra);                                                        \
    }                                                                                              \
    static PyObject *f_##name(PyObject *mod, PyObject *const *a, Py_ssize_t n, PyObject *kw) {     \
        (void)mod;                                                                                 \
        return call(NULL, a, n, kw, extra);                                                        \
    }

/* the common keywords of factories: dtype=, device=, requires_grad=, pin_memory= */
int tsp_opts_args(PyObject *dtype, PyObject *device, PyObject *requires_grad, PyObject *pin,
                  ts_opts *o, const char *fn);

/* Calls f(t) with the GIL released, after the Ctrl-C check; wraps the result. */
PyObject *tsp_unary(ts_tensor *(*f)(ts_tensor *), ts_tensor *t);
/* m_NAME (the Tensor method) and f_NAME (the function, whose argument must be a tensor) of a
 * unary op cfn: the tables' one line per op (tensor_ops.c, tensor_special.c) */
#define TSP_DEF_UNARY(name, cfn)                                                                   \
    static PyObject *m_##name(PyObject *self, PyObject *unused) {                                  \
        (void)unused;                                                                              \
        return tsp_unary(cfn, ((tsp_tensor *)(self))->t);                                          \
    }                                                                                              \
    static PyObject *f_##name(PyObject *mod, PyObject *x) {                                        \
        (void)mod;                                                                                 \
        ts_tensor *t = tsp_tensor_arg(x, #name, "input");                                          \
        return t ? tsp_unary(cfn, t) : NULL;                                                       \
    }

/* the end of an in-place method: r (the C op's result, self's tensor) checked and its reference
 * dropped; a new reference to self, or NULL with the error raised */
PyObject *tsp_inplace_result(PyObject *self, ts_tensor *r);
/* r wrapped as a new Tensor, or (in_place) the end of an in-place method on self */
static inline PyObject *tsp_result(PyObject *self, ts_tensor *r, bool in_place) {
    return in_place ? tsp_inplace_result(self, r) : tsp_wrap(r);
}
#define TSP_T(self) (((tsp_tensor *)(self))->t)

/* o is a tessera.dtype object (dtype_device.c) */
int tsp_is_dtype(PyObject *o);
/* nested lists / scalars / a Tensor -> a new tensor of dtype dt (DEFAULT: inferred like torch:
 * bools -> bool, ints -> int64, floats -> float32) with o's device/requires_grad; NULL with an
 * exception set (tensor_factory.c) */
ts_tensor *tsp_tensor_from_data(PyObject *data, ts_dtype dt, ts_opts o);

/* torch.set_default_dtype's dtype (tensor_factory.c): what factories make when no dtype= is
 * given and the values are floating (float32 until set_default_dtype changes it) */
extern ts_dtype tsp_default_float;
/* dlpack.c: 1 when o is a numpy.ndarray (ndim_min: and has at least that many dims), 0 when not
 * (also without NumPy), -1 on error; tsp_numpy_tensor: a NumPy array or scalar as a new cpu
 * tensor of its dtype (a copy: tessera.tensor's path), NULL with the exception set */
int tsp_is_ndarray(PyObject *o, int ndim_min);
int tsp_is_numpy_scalar(PyObject *o);
ts_tensor *tsp_numpy_tensor(PyObject *o);

/* generator= (tensor_generator.c): between begin and end a tessera.Generator g is the calling
 * thread's random stream (nothing for None or tessera.default_generator); end stores where it
 * stopped back into g, keeping a pending exception. TypeError naming fn for a non-generator. */
typedef struct tsp_generator_scope {
    PyObject *g; /* borrowed; NULL: nothing swapped */
    bool on;
    ts_rng_state state;
} tsp_generator_scope;
int tsp_generator_begin(PyObject *g, const char *fn, tsp_generator_scope *sc);
int tsp_generator_end(tsp_generator_scope *sc);
/* end, then result (NULL, result dropped, when end fails) */
PyObject *tsp_generator_finish(tsp_generator_scope *sc, PyObject *result);
PyObject *tsp_f_rng_thread_swap(PyObject *mod, PyObject *args);

/* tessera.Size: a tuple of ints with numel() */
PyObject *tsp_size_obj(ts_shape s);

/* the method / function tables of the files making the Tensor (NULL-terminated) */
extern PyMethodDef tsp_tensor_core_methods[], tsp_tensor_core_functions[];
extern PyMethodDef tsp_tensor_factory_methods[];
extern PyMethodDef tsp_tensor_values_methods[], tsp_tensor_values_functions[];
extern PyMethodDef tsp_tensor_move_methods[];
/* tensor_values.c: the type's slots for values */
PyObject *tsp_tensor_float(PyObject *self);
PyObject *tsp_tensor_int(PyObject *self);
PyObject *tsp_tensor_index(PyObject *self);
int tsp_tensor_bool(PyObject *self);
Py_ssize_t tsp_tensor_length(PyObject *self);
PyObject *tsp_tensor_repr(PyObject *self);
extern PyMethodDef tsp_tensor_ops_methods[], tsp_tensor_ops_functions[];
extern PyMethodDef tsp_tensor_select_methods[], tsp_tensor_select_functions[];
extern PyMethodDef tsp_tensor_shape_methods[], tsp_tensor_shape_functions[];
extern PyMethodDef tsp_tensor_reduce_methods[], tsp_tensor_reduce_functions[];
extern PyMethodDef tsp_tensor_special_methods[], tsp_tensor_special_functions[];
/* tensor_quant.c: quantized tensors (tessera/quant.h) */
extern PyMethodDef tsp_tensor_quant_methods[], tsp_tensor_quant_functions[];
extern PyMethodDef tsp_tensor_qops_functions[];      /* tensor_qops.c */
extern PyMethodDef tsp_tensor_qobserver_functions[]; /* tensor_qobserver.c */
extern PyGetSetDef tsp_tensor_quant_getset[];
/* whether t is quantized; PyTorch's repr of one (its dequantized values, then size, dtype,
 * quantization_scheme, scale and zero_point or the per-channel ones) */
int tsp_tensor_is_quantized(ts_tensor *t);
PyObject *tsp_quant_repr(PyObject *self);
/* tensor_complex.c: complex tensors and torch.fft */
extern PyMethodDef tsp_tensor_complex_methods[], tsp_tensor_complex_functions[];
extern PyGetSetDef tsp_tensor_complex_getset[];
/* tensor_sparse.c (issue 53): to_sparse / to_dense / layout / is_sparse; the error a dense op gives
 * for a sparse argument (1 when o is one and the NotImplementedError is set, else 0) */
extern PyMethodDef tsp_tensor_sparse_methods[];
extern PyGetSetDef tsp_tensor_sparse_getset[];
int tsp_sparse_arg_error(PyObject *o, const char *fn, const char *arg);
/* 0 for layout= None or tessera.strided; else -1 with NotImplementedError naming fn */
int tsp_layout_arg(PyObject *o, const char *fn);
void tsp_init_tensor_special(void); /* tensor_special.c: `%` */
/* tensor_linalg.c: products and norms (issue 52), the mT / mH / H properties */
extern PyMethodDef tsp_tensor_linalg_methods[], tsp_tensor_linalg_functions[];
extern PyGetSetDef tsp_tensor_linalg_getset[];
int tsp_init_tensor_linalg(void); /* the aminmax (min, max) type */
/* tensor_linalg_decomp.c: torch.linalg's decompositions as _C._linalg_* (issue 52) */
extern PyMethodDef tsp_tensor_linalg_decomp_functions[], tsp_tensor_linalg_decomp_methods[];
/* tensor_linalg_forms.c: linalg.norm, vecdot, vander, tensorinv / tensorsolve, householder_product,
 * torch.svd, matrix_rank with tolerance tensors (issue 76) */
extern PyMethodDef tsp_tensor_linalg_forms_functions[];
/* tensor_torch_forms.c: *_copy forms, fill, nonzero_static, range, rsub, cauchy_ / geometric_ /
 * log_normal_ (issue 76) */
extern PyMethodDef tsp_tensor_torch_forms_functions[];
/* tensor_sparse_coo.c: sparse COO construction, coalesce, to_sparse, transpose, mul, sum, addmm */
extern PyMethodDef tsp_tensor_sparse_coo_functions[];
/* tensor_rearrange.c: flip, roll, tril, diagonal, splits... (issue 52) */
extern PyMethodDef tsp_tensor_rearrange_methods[], tsp_tensor_rearrange_functions[];
/* tensor_index_forms.c: take, index_add, scatter, nonzero, masked_select... (issue 52) */
extern PyMethodDef tsp_tensor_index_forms_methods[], tsp_tensor_index_forms_functions[];
/* tensor_scatter.c: select / slice / diagonal_scatter, index_reduce, put (issue 76) */
extern PyMethodDef tsp_tensor_scatter_methods[], tsp_tensor_scatter_functions[];
/* tensor_statistics.c: cov, corrcoef, cross, tril / triu_indices, meshgrid (issue 76) */
extern PyMethodDef tsp_tensor_statistics_methods[], tsp_tensor_statistics_functions[];
/* tensor_numeric.c: ctc_loss, histogram(dd), pdist, gradient, frexp, unravel_index, combinations */
extern PyMethodDef tsp_tensor_numeric_functions[];
/* tensor_logic.c: isnan, any / all, isclose, cumsum..., addcmul, lerp, repeat (issue 52) */
extern PyMethodDef tsp_tensor_logic_methods[], tsp_tensor_logic_functions[];
/* tensor_sort.c: sort, topk, median, quantile, unique... (issue 52) */
extern PyMethodDef tsp_tensor_sort_methods[], tsp_tensor_sort_functions[];
int tsp_init_tensor_sort(void); /* the (values, indices) types */
extern PyMethodDef tsp_autograd_methods[];
extern PyGetSetDef tsp_autograd_getset[];
extern PyNumberMethods tsp_tensor_as_number;
PyObject *tsp_tensor_richcompare(PyObject *a, PyObject *b, int op);
/* tensor_ops.c: its types (the values/indices pair of max(dim)) */
int tsp_init_tensor_ops(PyObject *m);
int tsp_init_tensor_reduce(PyObject *m);

#endif
