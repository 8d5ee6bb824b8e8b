/* complex.h — the complex paths of ops that also take real tensors (src/ops/complex_arith.c):
 * their public functions branch here before their input checks, which refuse complex tensors
 * (src/core/complex_gate.c). */
#ifndef TS_OPS_COMPLEX_H
#define TS_OPS_COMPLEX_H

#include "backend/backend.h"
#include "core/internal.h"

static inline bool tsi_complex_in(const ts_tensor *a, const ts_tensor *b) {
    return (a && tsi_is_complex(a->dtype)) || (b && tsi_is_complex(b->dtype));
}
/* add, sub, mul, div, pow, eq, ne with a complex operand (the other complex, real or a 0-dim cpu
 * tensor) */
ts_tensor *tsi_complex_binary(const char *op, ts_binary_op bop, ts_tensor *a, ts_tensor *b);
/* the same with a number: add, sub, rsub, mul, div, pow, rpow, eq, ne */
ts_tensor *tsi_complex_scalar(const char *op, ts_binary_op bop, ts_tensor *a, double s);
/* neg, abs (real) and complex_math.c's functions of a complex tensor */
ts_tensor *tsi_complex_unary(const char *op, ts_unary_op u, ts_tensor *t);
/* complex_native.c: a op b (add, sub, mul, div) in one backend kernel, recording its own node when
 * the graph needs one; r is the complex result dtype, both operands non-NULL */
bool tsi_complex_native_ok(ts_binary_op bop, ts_tensor *a, ts_tensor *b);
ts_tensor *tsi_complex_binary_native(const char *op, ts_binary_op bop, ts_tensor *a, ts_tensor *b,
                                     ts_dtype r);
/* a op= b (add, sub, mul, div) for a complex a: the kernel writes a (a's history rebased onto the
 * op's node when the graph needs one); a new reference to a in the caller's scope, or NULL */
ts_tensor *tsi_complex_native_inplace(const char *op, ts_binary_op bop, ts_tensor *a, ts_tensor *b);
/* complex_native_grad.c: the node of a op b (PyTorch's name, formulas and saves; in place: a's old
 * value saved as a clone), a reference the caller releases after setting its output; and out
 * recorded as the node's output (out released and NULL on failure) */
struct ts_node *tsi_complex_native_node(const char *op, ts_binary_op bop, ts_tensor *a,
                                        ts_tensor *b, bool inplace);
ts_tensor *tsi_complex_native_record(const char *op, ts_binary_op bop, ts_tensor *a, ts_tensor *b,
                                     ts_tensor *out);
/* |t| of a complex t in one backend kernel (the unary slot's abs), when no graph is recorded */
bool tsi_complex_abs_native_ok(ts_tensor *t);
ts_tensor *tsi_complex_abs_native(const char *op, ts_tensor *t);
/* a complex tensor from real parts of one float dtype that broadcast */
ts_tensor *tsi_complex_combine(const char *op, ts_tensor *re, ts_tensor *im);

/* complex_math.c: exp, log, log2, log10, sqrt, rsqrt, reciprocal, sin, cos, tan, sinh, cosh,
 * tanh, sigmoid, square and sgn (op "sgn"; "sign" is refused, as PyTorch's) */
ts_tensor *tsi_complex_math(const char *op, ts_unary_op u, ts_tensor *t);
/* a^b with a or b complex; a^s and s^a for a number s */
ts_tensor *tsi_complex_pow(const char *op, ts_tensor *a, ts_tensor *b);
ts_tensor *tsi_complex_pow_scalar(const char *op, ts_tensor *a, double s);
ts_tensor *tsi_complex_rpow_scalar(const char *op, ts_tensor *a, double s);

/* complex_linalg.c: f (ts_matmul, ts_mm, ts_bmm, ts_mv, ts_dot) of complex a and b of one dtype,
 * as four real products over the parts; conj_a: a conjugated first (vdot) */
ts_tensor *tsi_complex_matmul(const char *op, ts_tensor *(*f)(ts_tensor *, ts_tensor *),
                              ts_tensor *a, ts_tensor *b, bool conj_a);

/* complex_inplace.c: a op= b, a op= s, t = f(t) for a complex a / t, through an out-of-place
 * result copied into a (ts_copy_), computed from a clone of a when the graph is recorded */
ts_tensor *tsi_complex_binary_(const char *op, ts_binary_op bop, ts_tensor *a, ts_tensor *b);
ts_tensor *tsi_complex_scalar_(const char *op, ts_binary_op bop, ts_tensor *a, double s);
ts_tensor *tsi_complex_unary_(const char *op, ts_unary_op u, ts_tensor *t);
/* sum, mean over dims (all: every dim) of a complex tensor */
ts_tensor *tsi_complex_reduce(const char *op, ts_reduce_op rop, ts_tensor *t, const int *dims,
                              int ndims, bool all, bool keepdim);

#endif /* TS_OPS_COMPLEX_H */
