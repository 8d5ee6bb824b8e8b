/* cuda_compute_blas.h — the strided batched GEMM of cuda_matmul.cu, shared with the im2col
 * convolution (cuda_conv_im2col.cu), and its layout and copy helpers, shared with the cuBLASLt
 * epilogues (cuda_matmul_lt.cu). */
#ifndef TS_CUDA_COMPUTE_BLAS_H
#define TS_CUDA_COMPUTE_BLAS_H

#include "backend/cuda/cuda_compute.h"

/* A batch of matrices: element strides between matrices, rows and columns. */
typedef struct tsc_mat_strides {
    int64_t sb, sr, sc;
} tsc_mat_strides;

typedef struct tsc_mat {
    char *data;
    tsc_mat_strides s;
} tsc_mat;

/* C[i] = A[i] @ B[i] + beta * C[i] for i < batch; A is m x k, B k x n, C m x n, any strides (a
 * batch stride of 0 broadcasts A or B). ab_dt: the dtype of A and B; c_dt: C's, the same or f32
 * for f16/bf16 inputs. beta is 0 or 1. Returns false with the error recorded. */
bool tsc_gemm(int index, const char *what, ts_dtype ab_dt, ts_dtype c_dt, int64_t batch, int64_t m,
              int64_t n, int64_t k, tsc_mat a, tsc_mat b, tsc_mat c, double beta);

/* dst(b, r, c) = src(b, r, c) over a batch of rows x cols matrices of es-byte elements, queued on
 * the current stream (a stride may be 0: a broadcast source). False with the error recorded. */
bool tsc_mat_copy(int index, const char *what, size_t es, char *dst, tsc_mat_strides ds,
                  const char *src, tsc_mat_strides ss, int64_t batch, int64_t rows, int64_t cols);

/* How a rows x cols matrix with row stride rs and column stride cs can be read by cuBLAS in place:
 * TSC_LAYOUT_ROW (row-major, *ld the row stride), TSC_LAYOUT_COL (column-major, *ld the column
 * stride) or TSC_LAYOUT_NONE (it needs a copy). */
enum { TSC_LAYOUT_NONE = 0, TSC_LAYOUT_ROW = 1, TSC_LAYOUT_COL = 2 };
int tsc_mat_layout(int64_t rows, int64_t cols, int64_t rs, int64_t cs, int64_t *ld);

/* cuBLAS's and cuBLASLt's type of a float dtype (CUDA_R_32F for float32 and anything else). */
cudaDataType tsc_blas_type(ts_dtype dt);

/* The GEMM workspace cuBLAS and cuBLASLt are given (32 MiB on Hopper and later, 4 MiB before). */
size_t tsc_blas_workspace_size(int index);

#endif /* TS_CUDA_COMPUTE_BLAS_H */
