/* cuda_compute_blas.h — the strided batched GEMM of cuda_matmul.cu, shared with the im2col
 * convolution (cuda_conv_im2col.cu). */
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

#endif /* TS_CUDA_COMPUTE_BLAS_H */
