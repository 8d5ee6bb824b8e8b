/* index_check.h — the argument checks the scatter family shares (index.c's scatter_add, and
 * scatter.c's scatter and scatter_reduce): PyTorch's rules and messages in one place. */
#ifndef TS_OPS_INDEX_CHECK_H
#define TS_OPS_INDEX_CHECK_H

#include "tessera.h"

/* self t, index and src of a scatter along dim under op's name: same device, an int32/int64
 * index, src of t's dtype, index no larger than src (and than t off dim), as many dims; returns
 * the wrapped dim, or -1 with the error set. */
int tsi_scatter_check(const char *op, ts_tensor *t, int dim, ts_tensor *index, ts_tensor *src);

#endif /* TS_OPS_INDEX_CHECK_H */
