/* elementwise.h — helpers shared by the elementwise op front ends: PyTorch's result_type, can_cast,
 * the in-place checks and the tensor-with-scalar core. */
#ifndef TS_OPS_ELEMENTWISE_H
#define TS_OPS_ELEMENTWISE_H

#include <math.h>

#include "autograd/autograd.h"
#include "core/internal.h"

/* ------------------------------------------------------------------ type promotion
 * torch.result_type keeps three running results: dimensioned tensors, 0-dim tensors and Python
 * numbers ("wrapped"). TS_DTYPE_DEFAULT stands for "none yet" (c10's Undefined). */

static inline ts_dtype tsi_ew_promote(ts_dtype a, ts_dtype b) {
    if (a == TS_DTYPE_DEFAULT) return b;
    if (b == TS_DTYPE_DEFAULT || a == b) return a;
    return ts_promote_types(a, b);
}

/* c10's combine_categories: a lower-priority result only matters when it is of a higher category
 * (bool < integer < floating < complex) than the higher-priority one; a complex one joining a
 * floating one keeps its width (float64 with complex64: complex128). */
static inline ts_dtype tsi_ew_combine(ts_dtype higher, ts_dtype lower) {
    if (tsi_is_complex(higher)) return higher;
    if (tsi_is_complex(lower)) return tsi_is_float(higher) ? tsi_complex_of(higher) : lower;
    if (tsi_is_float(higher)) return higher;
    if (higher == TS_BOOL || tsi_is_float(lower)) return tsi_ew_promote(higher, lower);
    return higher != TS_DTYPE_DEFAULT ? higher : lower;
}

/* torch.result_type(a, b) for two tensors. */
static inline ts_dtype tsi_ew_result_type2(const ts_tensor *a, const ts_tensor *b) {
    if (a->dtype == b->dtype) return a->dtype;
    ts_dtype dim = TS_DTYPE_DEFAULT, zero = TS_DTYPE_DEFAULT;
    if (a->shape.ndim)
        dim = a->dtype;
    else
        zero = a->dtype;
    if (b->shape.ndim)
        dim = tsi_ew_promote(dim, b->dtype);
    else
        zero = tsi_ew_promote(zero, b->dtype);
    return tsi_ew_combine(dim, zero);
}

/* A double stands for a Python int when it is integral and fits int64, else for a Python float. */
static inline bool tsi_ew_integral(double s) { return fabs(s) < 9.2e18 && s == (double)(int64_t)s; }

/* torch.result_type(tensor of dtype t, Python number s): ints are int64, floats the default f32. */
static inline ts_dtype tsi_ew_scalar_result(ts_dtype t, double s) {
    return tsi_ew_combine(t, tsi_ew_integral(s) ? TS_I64 : TS_F32);
}

/* c10::canCast: no float into an integer tensor, nothing but bool into a bool tensor. */
static inline bool tsi_ew_can_cast(ts_dtype from, ts_dtype to) {
    if (tsi_is_float(from) && tsi_is_int(to)) return false;
    if (from != TS_BOOL && to == TS_BOOL) return false;
    return true;
}

/* binary_ops.def's dtype column (elementwise.c's table) */
typedef enum tsi_ew_binary_rule {
    TSI_BR_ANY,
    TSI_BR_TO_FLOAT,
    TSI_BR_BOOL_OUT,
    TSI_BR_SUB,
    TSI_BR_NO_BOOL,
    TSI_BR_FLOAT_ONLY
} tsi_ew_binary_rule;
extern const unsigned char tsi_ew_binary_rules[TS_B_COUNT];

static inline bool tsi_ew_bool_out(ts_binary_op op) {
    return tsi_ew_binary_rules[op] == TSI_BR_BOOL_OUT;
}

static inline bool tsi_ew_shape_eq(const ts_shape *a, const ts_shape *b) {
    return tsi_shape_equal(*a, *b);
}

/* t's kernel view broadcast to s (the plain view when t already has shape s: cheaper). */
static inline ts_kview tsi_ew_kview_to(const ts_tensor *t, const ts_shape *s) {
    return tsi_ew_shape_eq(&t->shape, s) ? tsi_kview(t) : tsi_kview_broadcast(t, *s);
}

/* Same device, on-device data, shape and strides: an elementwise kernel may read one and write the
 * other at the same index. */
static inline bool tsi_ew_same_view(const ts_tensor *a, const ts_tensor *b) {
    if (a->storage != b->storage || a->offset != b->offset || a->dtype != b->dtype ||
        !tsi_ew_shape_eq(&a->shape, &b->shape))
        return false;
    for (int i = 0; i < a->shape.ndim; i++)
        if (a->shape.dims[i] > 1 && a->strides[i] != b->strides[i]) return false;
    return true;
}

/* True when the memory of a and b may overlap without being the same view (then an in-place op
 * must compute into a temporary first). */
bool tsi_ew_overlaps(const ts_tensor *a, const ts_tensor *b);

/* ------------------------------------------------------------------ in-place checks */
/* The destination of an in-place op: not a leaf that requires grad, no element reachable twice
 * (stride 0), the op's result dtype castable to it, and (when bshape is given) the broadcast shape
 * equal to its shape. Records the error and returns false otherwise. */
bool tsi_ew_check_inplace(const char *op, ts_tensor *dst, ts_dtype result, const ts_shape *bshape);

/* "sub" with a bool operand, "pow" / "fmod" computing in bool: PyTorch's errors. b_dtype is
 * TS_DTYPE_DEFAULT for a scalar operand. */
bool tsi_ew_check_binary_dtypes(const char *op, ts_binary_op bop, const ts_tensor *a,
                                const ts_tensor *b, ts_dtype r);

/* The dtype a binary op computes in for result type r (true division makes integers float). */
static inline ts_dtype tsi_ew_compute_dtype(ts_binary_op op, ts_dtype r) {
    return tsi_ew_binary_rules[op] == TSI_BR_TO_FLOAT && !tsi_is_float(r) ? TS_F32 : r;
}

/* ------------------------------------------------------------------ cores */
/* a op s computed in result type r (c10's rules decided by the caller), validated and logged
 * here. dst is NULL (new tensor) or a itself (in place). Returns a new reference, not in a scope:
 * the output, or dst retained. */
ts_tensor *tsi_ew_scalar(const char *op, ts_binary_op bop, ts_tensor *a, double s, ts_dtype r,
                         ts_tensor *dst);

/* u(t) with the backend's numbers p0, p1 (checked by the caller), out of place or into t: the
 * unary front end's checks, dtype rule, autocast by name, autograd node and trace (with `nums`);
 * the result in the caller's scope (unary.c; issue 52's activations in activation.c use it). */
ts_tensor *tsi_unary_param(const char *op, ts_unary_op u, ts_tensor *t, double p0, double p1,
                           bool inplace, const double *nums, int n_nums);
/* binary.c: a binary op validated, promoted, run and traced, with no autograd node (scope-owned) */
ts_tensor *tsi_binary_plain(const char *op, ts_binary_op bop, ts_tensor *a, ts_tensor *b);

/* Fresh contiguous copy of x on its device, no graph (a new reference, not in a scope). */
ts_tensor *tsi_ew_clone(const char *op, ts_tensor *x);

/* ------------------------------------------------------------------ autograd (elementwise_grad.c)
 * Callers check tsi_needs_graph() first. An out-of-place op computes, then records: record_* take
 * the new output (NULL passes through) and return it, or NULL with the output released when the
 * node cannot be made. An in-place op makes its node before it runs, so that the node's inputs
 * are the destination's pre-op state (begin_*: NULL + error on failure), then hands the op's
 * result to tsi_ew_finish, which rebases the destination onto the node (NULL: the op failed, the
 * node is dropped). Ops whose result is not floating record nothing. */
ts_tensor *tsi_ew_record_unary(const char *op, ts_unary_op u, ts_tensor *t, ts_tensor *out,
                               double p0, double p1);
ts_tensor *tsi_ew_record_binary(const char *op, ts_binary_op bop, ts_tensor *a, ts_tensor *b,
                                ts_tensor *out, double alpha);
ts_tensor *tsi_ew_record_scalar(const char *op, ts_binary_op bop, ts_tensor *a, double s,
                                ts_tensor *out);
ts_tensor *tsi_ew_record_where(ts_tensor *cond, ts_tensor *a, ts_tensor *b, ts_tensor *out);
ts_tensor *tsi_ew_record_masked_fill(const char *op, ts_tensor *t, ts_tensor *mask, ts_tensor *out);
ts_node *tsi_ew_begin_unary(const char *op, ts_unary_op u, ts_tensor *t, double p0, double p1);
ts_node *tsi_ew_begin_binary(const char *op, ts_binary_op bop, ts_tensor *a, ts_tensor *b);
ts_node *tsi_ew_begin_scalar(const char *op, ts_binary_op bop, ts_tensor *a, double s);
ts_node *tsi_ew_begin_masked_fill(const char *op, ts_tensor *t, ts_tensor *mask);
ts_tensor *tsi_ew_finish(ts_node *n, ts_tensor *res);

#endif /* TS_OPS_ELEMENTWISE_H */
