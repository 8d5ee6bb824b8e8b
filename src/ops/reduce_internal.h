/* reduce_internal.h — reductions that only other op families call (reduce.c; not public). */
#ifndef TS_OPS_REDUCE_INTERNAL_H
#define TS_OPS_REDUCE_INTERNAL_H

#include "core/internal.h"

/* sqrt(sum of x^2) over dims (all of them when dims.n == 0) in one pass, accumulated in double;
 * float inputs only. Records no backward: linalg.vector_norm (reduce_norm.c) records its own. */
ts_tensor *tsi_norm2_dims(ts_tensor *t, ts_dims dims, bool keepdim);

#endif /* TS_OPS_REDUCE_INTERNAL_H */
