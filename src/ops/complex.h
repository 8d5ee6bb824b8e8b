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
/* add, sub, mul, div with a complex operand (the other complex, real or a 0-dim cpu tensor) */
ts_tensor *tsi_complex_binary(const char *op, ts_binary_op bop, ts_tensor *a, ts_tensor *b);
/* neg, abs of a complex tensor (abs is real) */
ts_tensor *tsi_complex_unary(const char *op, ts_unary_op u, ts_tensor *t);
/* sum, mean over dims (all: every dim) of a complex tensor */
ts_tensor *tsi_complex_reduce(const char *op, ts_reduce_op rop, ts_tensor *t, const int *dims,
                              int ndims, bool all, bool keepdim);

#endif /* TS_OPS_COMPLEX_H */
