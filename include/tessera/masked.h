/* masked.h — torch.masked's reductions and normalizations on strided tensors (src/ops/masked.c).
 * mask (bool, or cast to it; NULL: every element in) broadcasts to input's shape; each masked-out
 * element counts as the op's identity (0 for sums, 1 for products, NaN for median) and the plain
 * op runs, so autograd and every device come with it. dims n == 0 means every dim; dtype
 * TS_DTYPE_DEFAULT means the op's default (the input's; int64 for a sum of bool or a smaller
 * integer type). A wrong dim, mask shape or device, or dtype is TS_ERR_ARG / _SHAPE / _DEVICE /
 * _DTYPE naming the op. */
#ifndef TESSERA_MASKED_H
#define TESSERA_MASKED_H

#include "tessera.h"

TS_API ts_tensor *ts_masked_sum(ts_tensor *input, ts_dims dims, bool keepdim, ts_dtype dtype,
                                ts_tensor *mask);
/* the mean of the masked-in elements (none: NaN); a float dtype (input's or given), else
 * TS_ERR_ARG as PyTorch's ValueError */
TS_API ts_tensor *ts_masked_mean(ts_tensor *input, ts_dims dims, bool keepdim, ts_dtype dtype,
                                 ts_tensor *mask);
TS_API ts_tensor *ts_masked_cumsum(ts_tensor *input, int dim, ts_dtype dtype, ts_tensor *mask);
TS_API ts_tensor *ts_masked_cumprod(ts_tensor *input, int dim, ts_dtype dtype, ts_tensor *mask);
/* nanmedian of the masked-in elements along dim (values only); an integer input is taken as
 * float32 and its result cast to dtype, TS_ERR_ARG when a row is fully masked out (it reads
 * the result on the host for that check) */
TS_API ts_tensor *ts_masked_median(ts_tensor *input, int dim, bool keepdim, ts_dtype dtype,
                                   ts_tensor *mask);
/* the masked input over max(its masked vector norm of order ord along dim, eps) */
TS_API ts_tensor *ts_masked_normalize(ts_tensor *input, double ord, int dim, double eps,
                                      ts_dtype dtype, ts_tensor *mask);

#endif /* TESSERA_MASKED_H */
