/* tessera/numeric.h — numeric forms of issue 76 ("C first"): the CTC loss, histograms, pairwise
 * distances, numerical gradients, frexp and index arithmetic (src/ops/ctc_loss.c, histogram.c,
 * pdist.c, gradient.c, index_arith.c). Every device (cpu, sim; cuda where its building blocks
 * are); errors name the op and the argument (TS_ERR_ARG, TS_ERR_SHAPE, TS_ERR_DTYPE). */
#ifndef TESSERA_NUMERIC_H
#define TESSERA_NUMERIC_H

#include "tessera.h"

/* torch.nn.functional.ctc_loss: log_probs [T, N, C] (or unbatched [T, C]), targets int [N, S]
 * (padded) or the 1-D concatenation of the N targets (unbatched: [S]); input_lengths and
 * target_lengths n values each (n = N, 1 unbatched). Graves' forward-backward in log space,
 * accumulated in double on the host (device tensors make a round trip). Per element: the negative
 * log likelihood (inf when infeasible; 0 with zero_infinity), reduced by r (mean: each divided by
 * max(target length, 1), then averaged). Gradient w.r.t. log_probs PyTorch's: exp(log_probs) -
 * occupancy / likelihood over each element's frames (0 past its length; 0 for zero_infinity's
 * elements, NaN for other infeasible ones, as PyTorch's); not twice differentiable. */
TS_API ts_tensor *ts_ctc_loss(ts_tensor *log_probs, ts_tensor *targets,
                              const int64_t *input_lengths, const int64_t *target_lengths,
                              int64_t n, int64_t blank, ts_reduction r, bool zero_infinity);

/* torch.histogram of a floating input: bins equal-width bins over [lo, hi] (has_range false: the
 * finite data's min and max, [0, 1] for none; equal ends widened by 1/2 each way), or, edges not
 * NULL, those increasing edges (1-D, >= 1 element). weight NULL or input's shape; density: hist /
 * (sum(hist) * bin widths). Counts in double on the host; the last bin includes its right edge.
 * Returns hist (input's dtype and device) and sets *edges_out (bins + 1 edges). No gradient. */
TS_API ts_tensor *ts_histogram(ts_tensor *input, int64_t bins, ts_tensor *edges, bool has_range,
                               double lo, double hi, ts_tensor *weight, bool density,
                               ts_tensor **edges_out);
/* torch.histogramdd of the rows of input [..., D]: per dim d bins[d] equal-width bins over
 * range[2d], range[2d + 1] (range NULL: the data's) or, edges[d] not NULL, those edges (edges
 * may be NULL). weight NULL or input.shape[:-1]. Sets edges_out[0..D-1]; hist [bins...]. */
TS_API ts_tensor *ts_histogramdd(ts_tensor *input, const int64_t *bins, ts_tensor *const *edges,
                                 const double *range, ts_tensor *weight, bool density,
                                 ts_tensor **edges_out);

/* torch.pdist: the p-norm distances between the rows i < j of an N x M input, row-major
 * (N (N - 1) / 2 values); differentiable (the vector norm's gradient: 0 at equal rows) */
TS_API ts_tensor *ts_pdist(ts_tensor *input, double p);

/* torch.gradient along dims[0..ndims-1] (negative counting from the end): central differences
 * inside (unequal spacing: second order), edge_order 1 or 2 at the ends. Spacing per dim: coords[i]
 * not NULL (a 1-D tensor of the dim's size: coordinates), else the step h[i] (h NULL: 1). Integer
 * inputs compute in float32. out[i] receives the i-th result. Differentiable. */
TS_API ts_status ts_gradient(ts_tensor *input, const int *dims, int ndims, const double *h,
                             ts_tensor *const *coords, int edge_order, ts_tensor **out);

/* torch.frexp: mantissa (input's dtype, |m| in [0.5, 1); 0, inf, NaN themselves) and int32
 * exponent with input = m * 2^e. No gradient (PyTorch's has none). */
TS_API ts_status ts_frexp(ts_tensor *input, ts_tensor **mantissa, ts_tensor **exponent);

/* torch.unravel_index: integer indices (in [-prod, prod): negative ones count from the end) ->
 * ndims int64 coordinate tensors of indices' shape, into out[0..ndims-1] */
TS_API ts_status ts_unravel_index(ts_tensor *indices, const int64_t *shape, int ndims,
                                  ts_tensor **out);

/* torch.combinations: the r-element combinations (with_replacement: multisets) of a 1-D
 * tensor's elements as the rows of [count, r] (r = 0: an empty 1-D tensor); differentiable */
TS_API ts_tensor *ts_combinations(ts_tensor *input, int64_t r, bool with_replacement);

#endif
