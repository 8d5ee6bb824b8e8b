/* tessera/reductions.h — reductions (sum, mean, prod, amax / amin, var / std, logsumexp...),
 * products (mm, bmm, matmul and their relatives) and norms and moments. Included by tessera.h. */
#ifndef TESSERA_REDUCTIONS_H
#define TESSERA_REDUCTIONS_H

#include "tessera.h"

#ifdef __cplusplus
extern "C" {
#endif

/* dims: TS_DIMS(0, 2); an empty ts_dims reduces over all dims */
TS_API ts_tensor *ts_sum(ts_tensor *t); /* over all elements: 0-dim result */
TS_API ts_tensor *ts_mean(ts_tensor *t);
TS_API ts_tensor *ts_prod(ts_tensor *t);
TS_API ts_tensor *ts_max(ts_tensor *t);
TS_API ts_tensor *ts_min(ts_tensor *t);
TS_API ts_tensor *ts_var(ts_tensor *t);    /* correction 1 */
TS_API ts_tensor *ts_std(ts_tensor *t);    /* correction 1 */
TS_API ts_tensor *ts_argmax(ts_tensor *t); /* index into the flattened tensor */
TS_API ts_tensor *ts_argmin(ts_tensor *t);
TS_API ts_tensor *ts_logsumexp(ts_tensor *t);
TS_API ts_tensor *ts_sum_dim(ts_tensor *t, int dim, bool keepdim);
TS_API ts_tensor *ts_mean_dim(ts_tensor *t, int dim, bool keepdim);
TS_API ts_tensor *ts_prod_dim(ts_tensor *t, int dim, bool keepdim);
TS_API ts_tensor *ts_amax_dim(ts_tensor *t, int dim, bool keepdim);
TS_API ts_tensor *ts_amin_dim(ts_tensor *t, int dim, bool keepdim);
/* torch.max(t, dim): values and (when indices != NULL) indices, both owned like any result */
TS_API ts_tensor *ts_max_dim(ts_tensor *t, int dim, bool keepdim, ts_tensor **indices);
TS_API ts_tensor *ts_min_dim(ts_tensor *t, int dim, bool keepdim, ts_tensor **indices);
TS_API ts_tensor *ts_argmax_dim(ts_tensor *t, int dim, bool keepdim);
TS_API ts_tensor *ts_argmin_dim(ts_tensor *t, int dim, bool keepdim);
TS_API ts_tensor *ts_var_dim(ts_tensor *t, int dim, bool keepdim, double correction);
TS_API ts_tensor *ts_std_dim(ts_tensor *t, int dim, bool keepdim, double correction);
TS_API ts_tensor *ts_logsumexp_dim(ts_tensor *t, int dim, bool keepdim);
TS_API ts_tensor *ts_sum_dims(ts_tensor *t, ts_dims dims, bool keepdim);
TS_API ts_tensor *ts_mean_dims(ts_tensor *t, ts_dims dims, bool keepdim);
TS_API ts_tensor *ts_amax_dims(ts_tensor *t, ts_dims dims, bool keepdim);
TS_API ts_tensor *ts_amin_dims(ts_tensor *t, ts_dims dims, bool keepdim);
TS_API ts_tensor *ts_var_dims(ts_tensor *t, ts_dims dims, bool keepdim, double correction);
TS_API ts_tensor *ts_std_dims(ts_tensor *t, ts_dims dims, bool keepdim, double correction);
TS_API ts_tensor *ts_logsumexp_dims(ts_tensor *t, ts_dims dims, bool keepdim);

/* ==================================================================== linear algebra */
TS_API ts_tensor *ts_mm(ts_tensor *a, ts_tensor *b);     /* [n,k] @ [k,m] */
TS_API ts_tensor *ts_bmm(ts_tensor *a, ts_tensor *b);    /* [B,n,k] @ [B,k,m] */
TS_API ts_tensor *ts_matmul(ts_tensor *a, ts_tensor *b); /* torch.matmul, batch dims broadcast */
/* Products with PyTorch's names and checks (src/ops/products.c), composed of differentiable ops.
 * addX: beta * input + alpha * product, input broadcast to the product's shape (never the other
 * way); beta == 0 ignores input's values (NaN and inf too) and gives it no gradient; integer
 * operands need integral beta and alpha (TS_ERR_ARG); all operands share one dtype. The in-place
 * forms write into input, whose shape must be the product's. */
TS_API ts_tensor *ts_addmm(ts_tensor *input, ts_tensor *mat1, ts_tensor *mat2, double beta,
                           double alpha);
TS_API ts_tensor *ts_addmv(ts_tensor *input, ts_tensor *mat, ts_tensor *vec, double beta,
                           double alpha);
TS_API ts_tensor *ts_addr(ts_tensor *input, ts_tensor *vec1, ts_tensor *vec2, double beta,
                          double alpha);
TS_API ts_tensor *ts_baddbmm(ts_tensor *input, ts_tensor *batch1, ts_tensor *batch2, double beta,
                             double alpha);
TS_API ts_tensor *ts_addbmm(ts_tensor *input, ts_tensor *batch1, ts_tensor *batch2, double beta,
                            double alpha); /* the batch of products summed: [n, m] */
TS_API ts_tensor *ts_addmm_(ts_tensor *input, ts_tensor *mat1, ts_tensor *mat2, double beta,
                            double alpha);
TS_API ts_tensor *ts_addmv_(ts_tensor *input, ts_tensor *mat, ts_tensor *vec, double beta,
                            double alpha);
TS_API ts_tensor *ts_addr_(ts_tensor *input, ts_tensor *vec1, ts_tensor *vec2, double beta,
                           double alpha);
TS_API ts_tensor *ts_baddbmm_(ts_tensor *input, ts_tensor *batch1, ts_tensor *batch2, double beta,
                              double alpha);
TS_API ts_tensor *ts_addbmm_(ts_tensor *input, ts_tensor *batch1, ts_tensor *batch2, double beta,
                             double alpha);
TS_API ts_tensor *ts_mv(ts_tensor *mat, ts_tensor *vec); /* [n, m] @ [m] */
TS_API ts_tensor *ts_dot(ts_tensor *a, ts_tensor *b);    /* 1-D, same size and dtype: 0-dim */
TS_API ts_tensor *ts_vdot(ts_tensor *a, ts_tensor *b);   /* dot (real tensors: no conjugate) */
TS_API ts_tensor *ts_outer(ts_tensor *a, ts_tensor *b);  /* 1-D a, b: [n, m] (torch.ger) */
TS_API ts_tensor *ts_inner(ts_tensor *a,
                           ts_tensor *b); /* over the last dims; a 0-dim operand: a * b */
/* sum over a's dims da[i] paired with b's db[i] (same count; a size-1 dim broadcasts): the
 * result's dims are a's others then b's others. torch.tensordot(dims=k): da = a's last k dims,
 * db = b's first k. */
TS_API ts_tensor *ts_tensordot(ts_tensor *a, ts_tensor *b, ts_dims da, ts_dims db);
TS_API ts_tensor *ts_kron(ts_tensor *a,
                          ts_tensor *b);  /* up to 4 dims after padding to the same ndim */
TS_API ts_tensor *ts_trace(ts_tensor *t); /* 2-D: the diagonal's sum (integers: int64) */
/* torch.linalg.multi_dot: n >= 2 tensors, 2-D but the first and last, which may be 1-D; the
 * cheapest order of products (PyTorch's) */
TS_API ts_tensor *ts_multi_dot(ts_tensor *const *ts, int n);
/* torch.einsum: n >= 1 operands of one dtype and device labelled by the equation ("ij,jk->ik",
 * "...ij,...jk", "ii->i"; implicit output: the ellipsis, then the letters used once in ASCII
 * order); repeated labels in one operand take the diagonal, size-1 dims broadcast; contracted as
 * batched matmuls (src/ops/einsum.c). Errors name einsum() with PyTorch's messages: the equation
 * (TS_ERR_ARG), sizes and ranks (TS_ERR_SHAPE), mixed dtypes (TS_ERR_DTYPE). */
TS_API ts_tensor *ts_einsum(const char *equation, ts_tensor *const *operands, int n);

/* ==================================================================== norms and moments */
/* (src/ops/reduce_norm.c) torch.linalg.vector_norm: (sum |x|^ord)^(1/ord) over dims (n == 0: all
 * dims), ord any number: INFINITY max |x|, -INFINITY min |x|, 0 the count of non-zeros. Float
 * inputs only; dtype (TS_DTYPE_DEFAULT: t's) casts t first. PyTorch's gradients, including 0 where
 * the norm is 0 (ord = 2, general ord) and ties sharing evenly (inf). */
TS_API ts_tensor *ts_vector_norm(ts_tensor *t, double ord, ts_dims dims, bool keepdim,
                                 ts_dtype dtype);
/* torch.linalg.matrix_norm over dims (d0, d1): ord "fro", "1", "-1", "inf", "-inf", and "nuc",
 * "2", "-2" from the singular values (tessera/linalg.h: LAPACK; TS_ERR_UNSUPPORTED in a build
 * without LAPACKE). */
TS_API ts_tensor *ts_matrix_norm(ts_tensor *t, const char *ord, int d0, int d1, bool keepdim,
                                 ts_dtype dtype);
/* F.normalize: t / max(||t||_p over dim, eps) (ts_normalize is data.h's transform) */
TS_API ts_tensor *ts_lp_normalize(ts_tensor *t, double p, int dim, double eps);
/* var and mean (std and mean) over dims (n == 0: all) in one call; *mean gets the mean */
TS_API ts_tensor *ts_var_mean(ts_tensor *t, ts_dims dims, bool keepdim, double correction,
                              ts_tensor **mean);
TS_API ts_tensor *ts_std_mean(ts_tensor *t, ts_dims dims, bool keepdim, double correction,
                              ts_tensor **mean);
/* torch.aminmax: returns the min, *max gets the max; over dim, or all elements when !has_dim */
TS_API ts_tensor *ts_aminmax(ts_tensor *t, bool has_dim, int dim, bool keepdim, ts_tensor **max);
TS_API ts_tensor *ts_count_nonzero(ts_tensor *t, ts_dims dims); /* int64; n == 0: all dims */
/* statistics of variables (src/ops/statistics.c). torch.cov: the covariance of t's rows
 * (variables; a 1-D t is one) over its columns (observations); fweights (integral) and aweights
 * (floating), each 1-D of one value per observation, none negative, or NULL; degrees of freedom
 * <= 0 give a factor 0 (inf / nan), as PyTorch's. Integer t computes in float32. */
TS_API ts_tensor *ts_cov(ts_tensor *t, int64_t correction, ts_tensor *fweights,
                         ts_tensor *aweights);
/* torch.corrcoef: Pearson's coefficients of t's rows (cov / the outer product of the standard
 * deviations), clamped to [-1, 1] */
TS_API ts_tensor *ts_corrcoef(ts_tensor *t);
/* torch.cross: the cross product along dim (has_dim false: the first dim of size 3) of a and b
 * (one dtype, as many dims, broadcast); linalg.cross: along dim (-1 is torch's default) */
TS_API ts_tensor *ts_cross(ts_tensor *a, ts_tensor *b, bool has_dim, int dim);
TS_API ts_tensor *ts_linalg_cross(ts_tensor *a, ts_tensor *b, int dim);
/* (src/ops/norm_forms.c) torch.dist: the p-norm of a - b (broadcast; floating dtypes) */
TS_API ts_tensor *ts_dist(ts_tensor *a, ts_tensor *b, double p);
/* torch.renorm: each slice of t along dim (t at least 2-D) whose p-norm (p > 0) exceeds maxnorm
 * (>= 0) scaled by PyTorch's maxnorm / (norm + 1e-7); differentiable through the norm */
TS_API ts_tensor *ts_renorm(ts_tensor *t, double p, int dim, double maxnorm);
/* (src/ops/integration.c) torch.trapezoid: the trapezoidal rule along dim with sample points x
 * (1-D of y's size along dim, or broadcastable to y) or, x NULL, spacing dx; an empty dim sums
 * to 0. torch.cumulative_trapezoid: the running sums (one fewer element along dim). */
TS_API ts_tensor *ts_trapezoid(ts_tensor *y, ts_tensor *x, double dx, int dim);
TS_API ts_tensor *ts_cumulative_trapezoid(ts_tensor *y, ts_tensor *x, double dx, int dim);
/* F.cosine_similarity: sum over dim of (a / max(||a||, eps)) * (b / max(||b||, eps)), a and b
 * broadcast; PyTorch's gradient (the clamp does not stop it) */
TS_API ts_tensor *ts_cosine_similarity(ts_tensor *a, ts_tensor *b, int dim, double eps);
/* F.pairwise_distance: ||a - b + eps||_p over the last dim */
TS_API ts_tensor *ts_pairwise_distance(ts_tensor *a, ts_tensor *b, double p, double eps,
                                       bool keepdim);
/* torch.cdist: [..., P, M] and [..., R, M] (batch dims broadcast) -> [..., P, R], p >= 0 */
TS_API ts_tensor *ts_cdist(ts_tensor *a, ts_tensor *b, double p);

#ifdef __cplusplus
}
#endif
#endif /* TESSERA_REDUCTIONS_H */
