/* tessera/linalg.h — torch.linalg's decompositions and solvers (issue 52; via tessera.h).
 *
 * Every op takes matrices in the last two dims, batched over the leading ones, float32 or float64
 * (other dtypes: TS_ERR_DTYPE naming the op). The arithmetic runs on the host in float64 through
 * LAPACKE (src/ops/linalg_lapack.c) whatever the device: a cuda or sim tensor is read to the host
 * and the results are copied back to its device in its dtype. Results are owned like any result;
 * an optional out-pointer left NULL is not computed. Gradients follow PyTorch's formulas
 * (src/ops/linalg_grad.c). Built without LAPACKE, every op here fails with TS_ERR_UNSUPPORTED.
 *
 * Errors: non-square where a square matrix is needed, mismatched shapes (TS_ERR_SHAPE), a singular
 * matrix where an inverse is needed and a non-positive-definite one in cholesky (TS_ERR_ARG,
 * PyTorch's messages); the *_ex forms return those as int32 `info` (0: success; k > 0: the k-th
 * pivot or leading minor failed) instead when info is non-NULL. */
#ifndef TESSERA_LINALG_H
#define TESSERA_LINALG_H

#include <stdbool.h>
#include <stdint.h>

/* ---------------------------------------------------------------- LU, inverse, solve, det */
/* linalg.lu_factor_ex: packed LU (L unit lower below the diagonal, U on and above) and *pivots
 * (int32, 1-based row swaps as LAPACK's getrf); info NULL: a singular matrix is no error either
 * (lu_factor's packed factors are still returned). Any m x n. No gradient. */
TS_API ts_tensor *ts_linalg_lu_factor_ex(ts_tensor *A, ts_tensor **pivots, ts_tensor **info);
/* torch.lu_unpack: P, and *L, *U (either may be NULL) from lu_factor's LU and pivots */
TS_API ts_tensor *ts_lu_unpack(ts_tensor *LU, ts_tensor *pivots, ts_tensor **L, ts_tensor **U);
/* linalg.lu: P, *L, *U with A = P L U (differentiable through L and U for square A) */
TS_API ts_tensor *ts_linalg_lu(ts_tensor *A, ts_tensor **L, ts_tensor **U);
/* linalg.lu_solve: X with A X = B (left) or X A = B, adjoint: with A^T, A given by lu_factor */
TS_API ts_tensor *ts_linalg_lu_solve(ts_tensor *LU, ts_tensor *pivots, ts_tensor *B, bool left,
                                     bool adjoint);
/* linalg.inv_ex / inv: info NULL raises "linalg.inv: The diagonal element k is zero, ..." */
TS_API ts_tensor *ts_linalg_inv_ex(ts_tensor *A, ts_tensor **info);
TS_API ts_tensor *ts_linalg_inv(ts_tensor *A);
/* linalg.solve_ex / solve: X with A X = B (left) or X A = B (!left); B [..., n, k] or, when it
 * is 1-D or A's batch shape plus n, a batch of vectors; batch dims broadcast */
TS_API ts_tensor *ts_linalg_solve_ex(ts_tensor *A, ts_tensor *B, bool left, ts_tensor **info);
TS_API ts_tensor *ts_linalg_solve(ts_tensor *A, ts_tensor *B, bool left);
/* linalg.det; linalg.slogdet returns the sign and sets *logabsdet; torch.logdet (NaN for a
 * negative determinant, -inf for a singular matrix) */
TS_API ts_tensor *ts_linalg_det(ts_tensor *A);
TS_API ts_tensor *ts_linalg_slogdet(ts_tensor *A, ts_tensor **logabsdet);
TS_API ts_tensor *ts_logdet(ts_tensor *A);

/* ---------------------------------------------------------------- triangular and Cholesky */
/* linalg.solve_triangular: X with A X = B (left) or X A = B, A upper or lower triangular (the
 * other triangle is ignored), unitriangular: a diagonal of ones assumed; batch dims broadcast */
TS_API ts_tensor *ts_linalg_solve_triangular(ts_tensor *A, ts_tensor *B, bool upper, bool left,
                                             bool unitriangular);
/* linalg.cholesky_ex / cholesky: L with A = L L^T (upper: U with A = U^T U); only the lower
 * triangle of A is read; info NULL raises "linalg.cholesky: The factorization could not be
 * completed because the input is not positive-definite (the leading minor of order k is not
 * positive-definite)." */
TS_API ts_tensor *ts_linalg_cholesky_ex(ts_tensor *A, bool upper, ts_tensor **info);
TS_API ts_tensor *ts_linalg_cholesky(ts_tensor *A, bool upper);
/* torch.cholesky_solve(B, L, upper): X with (L L^T) X = B; torch.cholesky_inverse(L, upper).
 * Only L's triangle is read, but L's gradient is PyTorch's dense one (decision 0039). */
TS_API ts_tensor *ts_cholesky_solve(ts_tensor *B, ts_tensor *L, bool upper);
TS_API ts_tensor *ts_cholesky_inverse(ts_tensor *L, bool upper);

/* ---------------------------------------------------------------- orthogonal factorizations */
/* linalg.qr: Q (NULL for mode "r") and *R; mode "reduced" (Q m x k, R k x n, k = min(m, n)),
 * "complete" (Q m x m, R m x n) or "r" (R alone, no gradient) */
TS_API ts_tensor *ts_linalg_qr(ts_tensor *A, const char *mode, ts_tensor **R);
/* torch.geqrf: LAPACK's compact QR (R above the diagonal, Householder vectors below) and *tau
 * ([..., min(m, n)]); float64 arithmetic, A's dtype; no gradient */
TS_API ts_tensor *ts_geqrf(ts_tensor *A, ts_tensor **tau);
/* linalg.svd: U, *S (descending), *Vh with A = U diag(S) Vh; full_matrices: U m x m, Vh n x n */
TS_API ts_tensor *ts_linalg_svd(ts_tensor *A, bool full_matrices, ts_tensor **S, ts_tensor **Vh);
TS_API ts_tensor *ts_linalg_svdvals(ts_tensor *A);
/* linalg.eigh: the eigenvalues (ascending) of the symmetric A read from its lower (uplo "L") or
 * upper ("U") triangle, *V the eigenvectors as columns (NULL: eigvalsh) */
TS_API ts_tensor *ts_linalg_eigh(ts_tensor *A, const char *uplo, ts_tensor **V);
TS_API ts_tensor *ts_linalg_eigvalsh(ts_tensor *A, const char *uplo);

/* linalg.eig: the eigenvalues of the square real A as complex (complex64 for float32, complex128
 * for float64; LAPACK geev's order) and *V (NULL: not returned) the unit-norm eigenvectors as
 * columns, each with its largest component real (geev's normalisation); A = V diag(L) V^-1.
 * Differentiable as PyTorch's (the loss must not depend on the eigenvectors' phases). */
TS_API ts_tensor *ts_linalg_eig(ts_tensor *A, ts_tensor **V);
TS_API ts_tensor *ts_linalg_eigvals(ts_tensor *A);
/* torch.ormqr: Q C (left, !transpose), Q^T C, C Q or C Q^T, Q = H_1 ... H_k the m x m product of
 * the Householder reflectors in input ([..., m, n], below the diagonal, as geqrf's) scaled by tau
 * ([..., k], k = min(m, n)); other C [..., m, p] (left) or
 * [..., p, m]; same batch dims, one dtype. Differentiable in all three. */
TS_API ts_tensor *ts_ormqr(ts_tensor *input, ts_tensor *tau, ts_tensor *other, bool left,
                           bool transpose);
/* linalg.ldl_factor_ex: the compact LDL^T (Bunch-Kaufman) of the symmetric A read from its lower
 * triangle (LAPACK sytrf, uplo L; zeros above the diagonal) and *pivots (int32, sytrf's:
 * 1-based, negative for 2 x 2 blocks); *info (int32, NULL: a singular D is an error, as
 * linalg.ldl_factor) > 0 where D has an exact zero. hermitian is accepted (real: the same). No
 * gradient. */
TS_API ts_tensor *ts_linalg_ldl_factor_ex(ts_tensor *A, bool hermitian, ts_tensor **pivots,
                                          ts_tensor **info);
/* linalg.ldl_solve: X with A X = B from ldl_factor's LD and pivots (B [..., n, k]; batch dims
 * broadcast). No gradient. */
TS_API ts_tensor *ts_linalg_ldl_solve(ts_tensor *LD, ts_tensor *pivots, ts_tensor *B,
                                      bool hermitian);
/* linalg.polar: U (m x n, orthonormal columns) and *H (n x n, symmetric positive semi-definite)
 * with A = U H, for m >= n, through the SVD (U = W Vh, H = Vh^T diag(S) Vh) in float64 */
TS_API ts_tensor *ts_linalg_polar(ts_tensor *A, ts_tensor **H);
/* linalg.matrix_sqrth: the symmetric positive-definite X with X X = A for a symmetric positive-
 * definite A read from its lower triangle (eigh: V diag(sqrt(L)) V^T, in float64; a negative
 * eigenvalue gives NaN) */
TS_API ts_tensor *ts_linalg_matrix_sqrth(ts_tensor *A);

/* ---------------------------------------------------------------- least squares, rank */
/* linalg.lstsq: the solution of min ||A X - B|| (A [..., m, n], B [..., m, k] or [..., m]);
 * driver "gelsy" (NULL: default), "gelsd", "gelss" or "gels"; rcond < 0: eps * max(m, n).
 * *residuals: squared residual norms per column when m > n and every A has full rank (gelsy,
 * gelsd, gelss, gels), else an empty tensor; *rank (int64) for all but gels; *sv (singular
 * values) for gelsd and gelss, else empty. Gradient through the pseudoinverse, as PyTorch. */
TS_API ts_tensor *ts_linalg_lstsq(ts_tensor *A, ts_tensor *B, double rcond, const char *driver,
                                  ts_tensor **residuals, ts_tensor **rank, ts_tensor **sv);
/* linalg.pinv: singular values <= max(atol, rtol * largest) dropped; atol < 0: 0; rtol < 0: 0
 * when atol > 0 was given, else eps * max(m, n); hermitian: via eigh (lower triangle) */
TS_API ts_tensor *ts_linalg_pinv(ts_tensor *A, double atol, double rtol, bool hermitian);
/* linalg.matrix_rank (int64), the same tolerances */
TS_API ts_tensor *ts_linalg_matrix_rank(ts_tensor *A, double atol, double rtol, bool hermitian);

/* ---------------------------------------------------------------- matrix functions */
TS_API ts_tensor *ts_linalg_matrix_power(ts_tensor *A, int64_t n); /* n < 0: inv(A)^-n */
TS_API ts_tensor *ts_linalg_matrix_exp(ts_tensor *A); /* Pade 13 with scaling and squaring */
/* linalg.cond: p NULL or "2" (S max / S min), "-2", "fro", "nuc", "inf", "-inf", "1", "-1" */
TS_API ts_tensor *ts_linalg_cond(ts_tensor *A, const char *p);

/* ---------------------------------------------------------------- randomized low-rank SVD */
/* q argument of the two below meaning PyTorch's default */
#define TS_LOWRANK_Q_DEFAULT INT64_MIN
/* torch.svd_lowrank: U [..., m, k], *S [..., k], *V [..., n, k] (k = min(q, m, n)) with
 * A - M ~= U diag(S) V^T, by Halko et al.'s randomized algorithm with niter subspace iterations,
 * as PyTorch's torch/_lowrank.py (q TS_LOWRANK_Q_DEFAULT: 6). M NULL or of A's dtype and device,
 * broadcastable to A. The random test matrix comes from the global generator (ts_randn): the
 * result depends on the seed; for A - M of rank <= q it is its truncated SVD up to the signs of
 * the singular vectors. Composed of matmul, qr and svd: differentiable, every device. q < 0,
 * niter < 0: TS_ERR_ARG. */
TS_API ts_tensor *ts_svd_lowrank(ts_tensor *A, int64_t q, int64_t niter, ts_tensor *M,
                                 ts_tensor **S, ts_tensor **V);
/* torch.pca_lowrank: svd_lowrank of A minus its column means (center) or of A; q
 * TS_LOWRANK_Q_DEFAULT: min(6, m, n); q outside [0, min(m, n)] or niter < 0: TS_ERR_ARG with
 * PyTorch's message. */
TS_API ts_tensor *ts_pca_lowrank(ts_tensor *A, int64_t q, bool center, int64_t niter, ts_tensor **S,
                                 ts_tensor **V);

/* ---------------------------------------------------------------- forms over the above (issue 76)
 * Composed of the differentiable ops and decompositions, so autograd and every device come with
 * them; errors name the op and the argument. */
/* torch.linalg.norm: ord NULL (None), "fro", "nuc" or a number's text ("2", "-inf", "0.5"); dim
 * NULL (None) or a list of dims. PyTorch's dispatch: a string ord, two dims, or (dim NULL) a 2-D A
 * with an ord is ts_matrix_norm; otherwise ts_vector_norm (ord NULL: 2 over the dims, all when
 * NULL); an ord without dim needs a 1-D or 2-D A (src/ops/linalg_norm.c). */
TS_API ts_tensor *ts_linalg_norm(ts_tensor *A, const char *ord, const ts_dims *dim, bool keepdim,
                                 ts_dtype dtype);
/* torch.linalg.vecdot: sum(conj(x) * y, dim) with broadcasting (complex operands too) */
TS_API ts_tensor *ts_linalg_vecdot(ts_tensor *x, ts_tensor *y, int dim);
/* torch.linalg.vander: [..., n, N] of x[..., i] ** j, j < N (N < 0: x.size(-1)); 0-dim x as 1-D */
TS_API ts_tensor *ts_linalg_vander(ts_tensor *x, int64_t N);
/* torch.linalg.tensorinv: inv of A reshaped to prod(shape[:ind]) x prod(shape[ind:]), given the
 * shape shape[ind:] + shape[:ind] (src/ops/linalg_tensor.c) */
TS_API ts_tensor *ts_linalg_tensorinv(ts_tensor *A, int64_t ind);
/* torch.linalg.tensorsolve: X with tensordot(A, X, X.ndim) = B; dims (NULL: none) are A's dims
 * moved to the end first */
TS_API ts_tensor *ts_linalg_tensorsolve(ts_tensor *A, ts_tensor *B, const ts_dims *dims);
/* torch.linalg.householder_product: the first n columns of H_1 ... H_k from A [..., m, n]
 * (m >= n) and tau [..., k] (k <= n) (src/ops/linalg_householder.c) */
TS_API ts_tensor *ts_linalg_householder_product(ts_tensor *A, ts_tensor *tau);
/* torch.svd: U, *S, *V (V = Vh^T); some: reduced; !compute_uv: U and V zero-filled m x m and n x n
 * (src/ops/linalg_rank_svd.c) */
TS_API ts_tensor *ts_svd(ts_tensor *A, bool some, bool compute_uv, ts_tensor **S, ts_tensor **V);
/* linalg.matrix_rank with tolerance tensors (NULL: None) broadcast against the batch:
 * count of singular values > max(atol, rtol * largest); rtol NULL: 0 with atol, else
 * eps * max(m, n) (int64) */
TS_API ts_tensor *ts_linalg_matrix_rank_tol(ts_tensor *A, ts_tensor *atol, ts_tensor *rtol,
                                            bool hermitian);

#endif /* TESSERA_LINALG_H */
