/* tessera/indexing.h — joining (cat, stack), splitting, indexing (index_select, gather, scatter,
 * masks, take, put...), sorting and selection, counting (histc, bincount, unique) and softmax.
 * Included by tessera.h. */
#ifndef TESSERA_INDEXING_H
#define TESSERA_INDEXING_H

#include "tessera.h"

#ifdef __cplusplus
extern "C" {
#endif

TS_API ts_tensor *ts_cat(ts_tensor *const *ts, int n, int dim);
TS_API ts_tensor *ts_stack(ts_tensor *const *ts, int n, int dim);
/* split into pieces of split_size along dim (the last may be smaller); writes up to max_out views
 * into out and returns how many pieces there are (-1 on error) */
TS_API int ts_split(ts_tensor *t, int64_t split_size, int dim, ts_tensor **out, int max_out);
TS_API int ts_chunk(ts_tensor *t, int chunks, int dim, ts_tensor **out, int max_out);
/* the selects along dim (torch.unbind): writes up to max_out views into out and returns how many
 * there are (-1 on error). As split's and chunk's, these views are one multi-output op's: writing
 * one in place while the graph would record it is PyTorch's error. */
TS_API int ts_unbind(ts_tensor *t, int dim, ts_tensor **out, int max_out);
TS_API ts_tensor *ts_index_select(ts_tensor *t, int dim, ts_tensor *index);
TS_API ts_tensor *ts_gather(ts_tensor *t, int dim, ts_tensor *index);
TS_API ts_tensor *ts_scatter_add(ts_tensor *t, int dim, ts_tensor *index, ts_tensor *src);
TS_API ts_tensor *ts_scatter_add_(ts_tensor *t, int dim, ts_tensor *index, ts_tensor *src);

/* PyTorch's shape and indexing forms (issue 52; src/ops/rearrange.c, diagonal.c, repeat.c,
 * join.c's splits, take.c, nonzero.c, scatter.c), composed from the differentiable ops above
 * (gradients follow; results are copies, not views). Errors name the op and the argument
 * (TS_ERR_ARG, TS_ERR_SHAPE, TS_ERR_DTYPE, TS_ERR_DEVICE). */
TS_API ts_tensor *ts_flip(ts_tensor *t, ts_dims dims); /* reverse the order along each of dims */
TS_API ts_tensor *ts_fliplr(ts_tensor *t);             /* flip dim 1 (ndim >= 2) */
TS_API ts_tensor *ts_flipud(ts_tensor *t);             /* flip dim 0 (ndim >= 1) */
TS_API ts_tensor *ts_rot90(ts_tensor *t, int64_t k, int d0,
                           int d1); /* k quarter turns, d0 towards d1 */
/* roll by shifts[i] along dims.d[i] (dims.n == 0: one shift over the flattened tensor) */
TS_API ts_tensor *ts_roll(ts_tensor *t, const int64_t *shifts, int nshifts, ts_dims dims);
TS_API ts_tensor *ts_tril(ts_tensor *t,
                          int64_t diagonal); /* last two dims; zero above the diagonal */
TS_API ts_tensor *ts_triu(ts_tensor *t, int64_t diagonal);
TS_API ts_tensor *ts_tril_(ts_tensor *t, int64_t diagonal);
TS_API ts_tensor *ts_triu_(ts_tensor *t, int64_t diagonal);
/* the diagonal of the (dim1, dim2) planes as the last dim (offset > 0: above the main one) */
TS_API ts_tensor *ts_diagonal(ts_tensor *t, int64_t offset, int dim1, int dim2);
/* the last dim of t as the diagonal of new (dim1, dim2) planes of size n + |offset| */
TS_API ts_tensor *ts_diag_embed(ts_tensor *t, int64_t offset, int dim1, int dim2);
TS_API ts_tensor *ts_diag(ts_tensor *t, int64_t diagonal);   /* 1-D: a matrix; 2-D: its diagonal */
TS_API ts_tensor *ts_diagflat(ts_tensor *t, int64_t offset); /* diag of t flattened */
/* each element repeated along dim (has_dim false: over the flattened tensor) */
TS_API ts_tensor *ts_repeat_interleave(ts_tensor *t, int64_t repeats, bool has_dim, int dim);
/* repeats: an integer tensor of one element or of t's size along dim (read on the host) */
TS_API ts_tensor *ts_repeat_interleave_tensor(ts_tensor *t, ts_tensor *repeats, bool has_dim,
                                              int dim);
TS_API ts_tensor *ts_movedim(ts_tensor *t, ts_dims source, ts_dims destination); /* a view */
/* Tensor.unfold: windows of size along dim every step, as a new last dim */
TS_API ts_tensor *ts_unfold(ts_tensor *t, int dim, int64_t size, int64_t step);
/* pieces of the given sizes (summing to t's size along dim) / cut at indices / n sections as
 * even as possible (torch.tensor_split); up to max_out views in out; the count, -1 on error */
TS_API int ts_split_with_sizes(ts_tensor *t, const int64_t *sizes, int n, int dim, ts_tensor **out,
                               int max_out);
TS_API int ts_tensor_split_indices(ts_tensor *t, const int64_t *indices, int n, int dim,
                                   ts_tensor **out, int max_out);
TS_API int ts_tensor_split_sections(ts_tensor *t, int64_t sections, int dim, ts_tensor **out,
                                    int max_out);
TS_API ts_tensor *ts_take(ts_tensor *t,
                          ts_tensor *index); /* t flattened at index (negatives wrap) */
/* gather with t and index broadcast apart from dim (has_dim false: over the flattened tensor) */
TS_API ts_tensor *ts_take_along_dim(ts_tensor *t, ts_tensor *index, bool has_dim, int dim);
/* t with alpha * src's slices added at / copied to / value filled into the 1-D index along dim */
TS_API ts_tensor *ts_index_add(ts_tensor *t, int dim, ts_tensor *index, ts_tensor *src,
                               double alpha);
TS_API ts_tensor *ts_index_add_(ts_tensor *t, int dim, ts_tensor *index, ts_tensor *src,
                                double alpha);
TS_API ts_tensor *ts_index_copy(ts_tensor *t, int dim, ts_tensor *index, ts_tensor *src);
TS_API ts_tensor *ts_index_copy_(ts_tensor *t, int dim, ts_tensor *index, ts_tensor *src);
TS_API ts_tensor *ts_index_fill(ts_tensor *t, int dim, ts_tensor *index, double value);
TS_API ts_tensor *ts_index_fill_(ts_tensor *t, int dim, ts_tensor *index, double value);
/* t with src's slices reduced into the rows index (1-D int32/int64, in [0, size)) names along
 * dim: reduce "prod", "mean", "amax" or "amin"; include_self false leaves t's own value out of the
 * rows indexed (torch.index_reduce; src of t's dtype, t's shape apart from dim) */
TS_API ts_tensor *ts_index_reduce(ts_tensor *t, int dim, ts_tensor *index, ts_tensor *src,
                                  const char *reduce, bool include_self);
TS_API ts_tensor *ts_index_reduce_(ts_tensor *t, int dim, ts_tensor *index, ts_tensor *src,
                                   const char *reduce, bool include_self);
/* t with source's values written (accumulate: added) at its flat (row-major) positions index
 * (int64, negatives count from the end; source of t's dtype, as many elements as index) */
TS_API ts_tensor *ts_put(ts_tensor *t, ts_tensor *index, ts_tensor *source, bool accumulate);
TS_API ts_tensor *ts_put_(ts_tensor *t, ts_tensor *index, ts_tensor *source, bool accumulate);
/* scatters into a view (src/ops/scatter_views.c): a copy of t whose select(dim, index) /
 * slice(dim, start, end, step) / diagonal(offset, dim1, dim2) holds src (cast to t's dtype, of
 * the view's shape); slice's start and end as Python's (negatives count from the end, clamped;
 * INT64_MAX for the end). Differentiable in t and src. */
TS_API ts_tensor *ts_select_scatter(ts_tensor *t, ts_tensor *src, int dim, int64_t index);
TS_API ts_tensor *ts_slice_scatter(ts_tensor *t, ts_tensor *src, int dim, int64_t start,
                                   int64_t end, int64_t step);
TS_API ts_tensor *ts_diagonal_scatter(ts_tensor *t, ts_tensor *src, int64_t offset, int dim1,
                                      int dim2);
/* coordinate tables (src/ops/coordinates.c): the [2, count] (row, col) pairs of the lower /
 * upper triangle of a row x col matrix (offset: the diagonal, as tril / triu's), row-major, of
 * o.dtype (int64 by default, or int32) on o.device */
TS_API ts_tensor *ts_tril_indices(int64_t row, int64_t col, int64_t offset, ts_opts o);
TS_API ts_tensor *ts_triu_indices(int64_t row, int64_t col, int64_t offset, ts_opts o);
/* torch.meshgrid: n 0-/1-D tensors of one dtype and device -> n views of the grid's shape (the
 * inputs' sizes; indexing "xy" swaps the first two dims, "ij" or NULL does not); writes them into
 * out when max_out >= n and returns n (-1 on error) */
TS_API int ts_meshgrid(ts_tensor *const *ts, int n, const char *indexing, ts_tensor **out,
                       int max_out);
/* scatter: src's values (or value) written at index along dim; reduce NULL, "add" or "multiply"
 * (a position written twice without reduce keeps the last write, as PyTorch's CPU) */
TS_API ts_tensor *ts_scatter(ts_tensor *t, int dim, ts_tensor *index, ts_tensor *src,
                             const char *reduce);
TS_API ts_tensor *ts_scatter_(ts_tensor *t, int dim, ts_tensor *index, ts_tensor *src,
                              const char *reduce);
TS_API ts_tensor *ts_scatter_value(ts_tensor *t, int dim, ts_tensor *index, double value,
                                   const char *reduce);
TS_API ts_tensor *ts_scatter_value_(ts_tensor *t, int dim, ts_tensor *index, double value,
                                    const char *reduce);
/* scatter_reduce: reduce "sum", "prod", "mean", "amax" or "amin" */
TS_API ts_tensor *ts_scatter_reduce(ts_tensor *t, int dim, ts_tensor *index, ts_tensor *src,
                                    const char *reduce, bool include_self);
TS_API ts_tensor *ts_scatter_reduce_(ts_tensor *t, int dim, ts_tensor *index, ts_tensor *src,
                                     const char *reduce, bool include_self);
TS_API ts_tensor *ts_nonzero(ts_tensor *t); /* int64 [count, ndim] (read on the host) */
TS_API ts_tensor *ts_masked_select(ts_tensor *t, ts_tensor *mask); /* 1-D, t and mask broadcast */
/* t with the positions where mask (broadcast to t) is true taken from src's first elements */
TS_API ts_tensor *ts_masked_scatter(ts_tensor *t, ts_tensor *mask, ts_tensor *src);
TS_API ts_tensor *ts_masked_scatter_(ts_tensor *t, ts_tensor *mask, ts_tensor *src);
TS_API ts_tensor *ts_block_diag(ts_tensor *const *ts,
                                int n); /* 0-, 1- or 2-D blocks, dtypes promoted */
TS_API ts_tensor *ts_one_hot(ts_tensor *index, int64_t num_classes); /* -1: max+1; result i64 */

/* Sorting and selection (issue 52; src/ops/sort.c, quantile.c, search.c). Orders are planned on
 * the host (one read of the values) and the values gathered on t's device; uint64 is refused.
 * Order: stable, NaN above every number (first when descending); where PyTorch leaves the index
 * of equal values open (stable=false, topk, kthvalue, median, mode) it is that of this order.
 * Functions with `indices` return the values and set *indices (int64; NULL: not wanted); the
 * values' gradient is scattered back through the indices. */
TS_API ts_tensor *ts_sort(ts_tensor *t, int dim, bool descending, bool stable, ts_tensor **indices);
TS_API ts_tensor *ts_argsort(ts_tensor *t, int dim, bool descending, bool stable);
TS_API ts_tensor *ts_msort(ts_tensor *t); /* sort along dim 0 */
/* the k largest (smallest) along dim, in sorted order; k in [0, size] */
TS_API ts_tensor *ts_topk(ts_tensor *t, int64_t k, int dim, bool largest, bool sorted,
                          ts_tensor **indices);
TS_API ts_tensor *ts_kthvalue(ts_tensor *t, int64_t k, int dim, bool keepdim, ts_tensor **indices);
/* lower median of all elements (NaN when any is NaN; NaN for an empty float tensor); nanmedian
 * ignores NaNs. Gradient shared among the elements equal to the result. */
TS_API ts_tensor *ts_median(ts_tensor *t);
TS_API ts_tensor *ts_nanmedian(ts_tensor *t);
TS_API ts_tensor *ts_median_dim(ts_tensor *t, int dim, bool keepdim, ts_tensor **indices);
TS_API ts_tensor *ts_nanmedian_dim(ts_tensor *t, int dim, bool keepdim, ts_tensor **indices);
/* most frequent value along dim (the smallest of ties), at its last index */
TS_API ts_tensor *ts_mode(ts_tensor *t, int dim, bool keepdim, ts_tensor **indices);
/* q: a 0-dim or 1-D tensor of t's dtype (its dim first in the result), or NULL and q_scalar;
 * has_dim false: over all elements. interpolation "linear", "lower", "higher", "midpoint" or
 * "nearest". float32 / float64 only; nanquantile ignores NaNs. Differentiable. */
TS_API ts_tensor *ts_quantile(ts_tensor *t, ts_tensor *q, double q_scalar, bool has_dim, int dim,
                              bool keepdim, const char *interpolation);
TS_API ts_tensor *ts_nanquantile(ts_tensor *t, ts_tensor *q, double q_scalar, bool has_dim, int dim,
                                 bool keepdim, const char *interpolation);
/* indices into sorted_sequence's last dim (1-D, or matching values' leading dims) where values
 * would be inserted: first (right false) or last place; sorter: int64 argsort of the sequence or
 * NULL. Result values' shape, int64 (int32 with out_int32). */
TS_API ts_tensor *ts_searchsorted(ts_tensor *sorted_sequence, ts_tensor *values, bool out_int32,
                                  bool right, ts_tensor *sorter);
TS_API ts_tensor *ts_bucketize(ts_tensor *input, ts_tensor *boundaries, bool out_int32, bool right);
/* unique elements (has_dim false, 1-D result) or slices along dim, ascending; *inverse (int64,
 * t's shape; along dim: 1-D) and *counts when asked (NULL: not wanted) */
TS_API ts_tensor *ts_unique(ts_tensor *t, bool sorted, bool has_dim, int dim, ts_tensor **inverse,
                            ts_tensor **counts);
TS_API ts_tensor *ts_unique_consecutive(ts_tensor *t, bool has_dim, int dim, ts_tensor **inverse,
                                        ts_tensor **counts);
/* histogram of bins equal bins over [min, max] (min == max: the data's range); float32/64 */
TS_API ts_tensor *ts_histc(ts_tensor *t, int64_t bins, double min, double max);
/* counts of each value of a 1-D non-negative integer tensor (weights: their sums; float32 weights
 * give float32, others float64), at least minlength long */
TS_API ts_tensor *ts_bincount(ts_tensor *t, ts_tensor *weights, int64_t minlength);
/* bool, elements' shape: whether each element is in test_elements (negated with invert) */
TS_API ts_tensor *ts_isin(ts_tensor *elements, ts_tensor *test_elements, bool assume_unique,
                          bool invert);
TS_API ts_tensor *ts_softmax(ts_tensor *t, int dim);
TS_API ts_tensor *ts_log_softmax(ts_tensor *t, int dim);

#ifdef __cplusplus
}
#endif

#endif /* TESSERA_INDEXING_H */
