/* cuda_linalg.cu — the linalg slot (backend.h) on CUDA through cuSOLVER's dense routines
 * (cusolverDn, the legacy 32-bit API), one matrix at a time on the backend's stream, in the
 * operand's dtype (S routines for float32, D for float64).
 *
 * Tessera's matrices are row-major and cuSOLVER's column-major: a row-major buffer read
 * column-major is the matrix's transpose. Where that view gives the answer it is used as it is
 * (Cholesky: potrf('U') of A^T reads A's lower triangle and its U is A's L; eigh: the other
 * triangle; the determinant of A^T is A's; the SVD of a wide A^T gives A's U and V^T in row-major
 * order), otherwise the matrix is first transposed on the device into column-major scratch (LU,
 * inverse and solve factorise A itself, so that a singular matrix reports the zero pivot of A's
 * LU, as LAPACK on the host does; QR; the SVD of a tall matrix, whose gesvd needs rows >= columns)
 * and its results transposed back. Workspace sizes are queried, and one scratch block from the
 * caching allocator holds the workspace, the column-major copies and the per-matrix infos, which
 * are copied to the host once at the end (the only wait). Handles come from a small pool per
 * device, bound to the calling thread's stream at each use, as cuBLAS's (cuda_matmul.cu). */
#include <pthread.h>

#include "backend/cuda/cuda_compute.h"
#include "backend/cuda/cuda_linalg.h"

/* after kernel_math.h (as cuda_matmul.cu does with cublas_v2.h) */
#include <cusolverDn.h>

namespace {

/* ------------------------------------------------------------------ handles */
#define SOL_POOL 4 /* idle handles kept per device */

static pthread_mutex_t g_sol_lock = PTHREAD_MUTEX_INITIALIZER;
static cusolverDnHandle_t g_sol_idle[TSC_MAX_DEVICES][SOL_POOL];
static int g_sol_nidle[TSC_MAX_DEVICES];

static const char *sol_status_name(cusolverStatus_t s) {
    switch (s) {
    case CUSOLVER_STATUS_NOT_INITIALIZED:
        return "CUSOLVER_STATUS_NOT_INITIALIZED";
    case CUSOLVER_STATUS_ALLOC_FAILED:
        return "CUSOLVER_STATUS_ALLOC_FAILED";
    case CUSOLVER_STATUS_INVALID_VALUE:
        return "CUSOLVER_STATUS_INVALID_VALUE";
    case CUSOLVER_STATUS_ARCH_MISMATCH:
        return "CUSOLVER_STATUS_ARCH_MISMATCH";
    case CUSOLVER_STATUS_EXECUTION_FAILED:
        return "CUSOLVER_STATUS_EXECUTION_FAILED";
    case CUSOLVER_STATUS_INTERNAL_ERROR:
        return "CUSOLVER_STATUS_INTERNAL_ERROR";
    case CUSOLVER_STATUS_MATRIX_TYPE_NOT_SUPPORTED:
        return "CUSOLVER_STATUS_MATRIX_TYPE_NOT_SUPPORTED";
    case CUSOLVER_STATUS_NOT_SUPPORTED:
        return "CUSOLVER_STATUS_NOT_SUPPORTED";
    default:
        return "cuSOLVER error";
    }
}

static bool sol_ok(cusolverStatus_t s, const char *op, const char *what, int index) {
    if (s == CUSOLVER_STATUS_SUCCESS) return true;
    if (s == CUSOLVER_STATUS_ALLOC_FAILED)
        tsi_error_set(TS_ERR_OOM, "%s: cuSOLVER %s could not allocate memory (cuda:%d)", op, what,
                      index);
    else
        tsi_error_set(TS_ERR_CUDA, "%s: cuSOLVER %s: %s (%d) (cuda:%d)", op, what,
                      sol_status_name(s), (int)s, index);
    return false;
}

/* A handle for the current device (made current by the caller), on the calling thread's stream */
static cusolverDnHandle_t sol_acquire(int index, const char *op) {
    cusolverDnHandle_t h = NULL;
    if (index >= 0 && index < TSC_MAX_DEVICES) {
        pthread_mutex_lock(&g_sol_lock);
        if (g_sol_nidle[index] > 0) h = g_sol_idle[index][--g_sol_nidle[index]];
        pthread_mutex_unlock(&g_sol_lock);
    }
    if (!h && !sol_ok(cusolverDnCreate(&h), op, "handle", index)) return NULL;
    if (!sol_ok(cusolverDnSetStream(h, tsc_stream(index)), op, "stream", index)) {
        cusolverDnDestroy(h);
        return NULL;
    }
    return h;
}

static void sol_release(int index, cusolverDnHandle_t h) {
    if (index >= 0 && index < TSC_MAX_DEVICES) {
        pthread_mutex_lock(&g_sol_lock);
        const bool kept = g_sol_nidle[index] < SOL_POOL;
        if (kept) g_sol_idle[index][g_sol_nidle[index]++] = h;
        pthread_mutex_unlock(&g_sol_lock);
        if (kept) return;
    }
    cusolverDnDestroy(h);
}

/* ------------------------------------------------------------------ the two dtypes */
static cusolverStatus_t getrf_ws(cusolverDnHandle_t h, int m, int n, float *a, int *lw) {
    return cusolverDnSgetrf_bufferSize(h, m, n, a, m, lw);
}
static cusolverStatus_t getrf_ws(cusolverDnHandle_t h, int m, int n, double *a, int *lw) {
    return cusolverDnDgetrf_bufferSize(h, m, n, a, m, lw);
}
static cusolverStatus_t getrf(cusolverDnHandle_t h, int m, int n, float *a, float *w, int *p,
                              int *info) {
    return cusolverDnSgetrf(h, m, n, a, m, w, p, info);
}
static cusolverStatus_t getrf(cusolverDnHandle_t h, int m, int n, double *a, double *w, int *p,
                              int *info) {
    return cusolverDnDgetrf(h, m, n, a, m, w, p, info);
}
static cusolverStatus_t getrs(cusolverDnHandle_t h, int n, int k, const float *a, const int *p,
                              float *b, int *info) {
    return cusolverDnSgetrs(h, CUBLAS_OP_N, n, k, a, n, p, b, n, info);
}
static cusolverStatus_t getrs(cusolverDnHandle_t h, int n, int k, const double *a, const int *p,
                              double *b, int *info) {
    return cusolverDnDgetrs(h, CUBLAS_OP_N, n, k, a, n, p, b, n, info);
}
static cusolverStatus_t potrf_ws(cusolverDnHandle_t h, int n, float *a, int *lw) {
    return cusolverDnSpotrf_bufferSize(h, CUBLAS_FILL_MODE_UPPER, n, a, n, lw);
}
static cusolverStatus_t potrf_ws(cusolverDnHandle_t h, int n, double *a, int *lw) {
    return cusolverDnDpotrf_bufferSize(h, CUBLAS_FILL_MODE_UPPER, n, a, n, lw);
}
static cusolverStatus_t potrf(cusolverDnHandle_t h, int n, float *a, float *w, int lw, int *info) {
    return cusolverDnSpotrf(h, CUBLAS_FILL_MODE_UPPER, n, a, n, w, lw, info);
}
static cusolverStatus_t potrf(cusolverDnHandle_t h, int n, double *a, double *w, int lw,
                              int *info) {
    return cusolverDnDpotrf(h, CUBLAS_FILL_MODE_UPPER, n, a, n, w, lw, info);
}
static cusolverStatus_t syevd_ws(cusolverDnHandle_t h, cusolverEigMode_t job, cublasFillMode_t up,
                                 int n, const float *a, const float *w, int *lw) {
    return cusolverDnSsyevd_bufferSize(h, job, up, n, a, n, w, lw);
}
static cusolverStatus_t syevd_ws(cusolverDnHandle_t h, cusolverEigMode_t job, cublasFillMode_t up,
                                 int n, const double *a, const double *w, int *lw) {
    return cusolverDnDsyevd_bufferSize(h, job, up, n, a, n, w, lw);
}
static cusolverStatus_t syevd(cusolverDnHandle_t h, cusolverEigMode_t job, cublasFillMode_t up,
                              int n, float *a, float *w, float *work, int lw, int *info) {
    return cusolverDnSsyevd(h, job, up, n, a, n, w, work, lw, info);
}
static cusolverStatus_t syevd(cusolverDnHandle_t h, cusolverEigMode_t job, cublasFillMode_t up,
                              int n, double *a, double *w, double *work, int lw, int *info) {
    return cusolverDnDsyevd(h, job, up, n, a, n, w, work, lw, info);
}
static cusolverStatus_t gesvd_ws(cusolverDnHandle_t h, int m, int n, const float *, int *lw) {
    return cusolverDnSgesvd_bufferSize(h, m, n, lw);
}
static cusolverStatus_t gesvd_ws(cusolverDnHandle_t h, int m, int n, const double *, int *lw) {
    return cusolverDnDgesvd_bufferSize(h, m, n, lw);
}
static cusolverStatus_t gesvd(cusolverDnHandle_t h, signed char ju, signed char jv, int m, int n,
                              float *a, float *s, float *u, int ldu, float *vt, int ldvt,
                              float *work, int lw, float *rwork, int *info) {
    return cusolverDnSgesvd(h, ju, jv, m, n, a, m, s, u, ldu, vt, ldvt, work, lw, rwork, info);
}
static cusolverStatus_t gesvd(cusolverDnHandle_t h, signed char ju, signed char jv, int m, int n,
                              double *a, double *s, double *u, int ldu, double *vt, int ldvt,
                              double *work, int lw, double *rwork, int *info) {
    return cusolverDnDgesvd(h, ju, jv, m, n, a, m, s, u, ldu, vt, ldvt, work, lw, rwork, info);
}
static cusolverStatus_t geqrf_ws(cusolverDnHandle_t h, int m, int n, float *a, int *lw) {
    return cusolverDnSgeqrf_bufferSize(h, m, n, a, m, lw);
}
static cusolverStatus_t geqrf_ws(cusolverDnHandle_t h, int m, int n, double *a, int *lw) {
    return cusolverDnDgeqrf_bufferSize(h, m, n, a, m, lw);
}
static cusolverStatus_t geqrf(cusolverDnHandle_t h, int m, int n, float *a, float *tau, float *w,
                              int lw, int *info) {
    return cusolverDnSgeqrf(h, m, n, a, m, tau, w, lw, info);
}
static cusolverStatus_t geqrf(cusolverDnHandle_t h, int m, int n, double *a, double *tau, double *w,
                              int lw, int *info) {
    return cusolverDnDgeqrf(h, m, n, a, m, tau, w, lw, info);
}
static cusolverStatus_t orgqr_ws(cusolverDnHandle_t h, int m, int n, int k, const float *a,
                                 const float *tau, int *lw) {
    return cusolverDnSorgqr_bufferSize(h, m, n, k, a, m, tau, lw);
}
static cusolverStatus_t orgqr_ws(cusolverDnHandle_t h, int m, int n, int k, const double *a,
                                 const double *tau, int *lw) {
    return cusolverDnDorgqr_bufferSize(h, m, n, k, a, m, tau, lw);
}
static cusolverStatus_t orgqr(cusolverDnHandle_t h, int m, int n, int k, float *a, const float *tau,
                              float *w, int lw, int *info) {
    return cusolverDnSorgqr(h, m, n, k, a, m, tau, w, lw, info);
}
static cusolverStatus_t orgqr(cusolverDnHandle_t h, int m, int n, int k, double *a,
                              const double *tau, double *w, int lw, int *info) {
    return cusolverDnDorgqr(h, m, n, k, a, m, tau, w, lw, info);
}

/* ------------------------------------------------------------------ copies */
/* element strides of a batch of matrices: matrix, row, column */
struct MatStr {
    int64_t b, r, c;
};
static MatStr row_major(int64_t rows, int64_t cols) { return MatStr{rows * cols, cols, 1}; }
static MatStr col_major(int64_t rows, int64_t cols) { return MatStr{rows * cols, 1, rows}; }

/* dst(b, i, j) = src(b, i, j) for i < rows, j < cols; from alt (its strides as) instead where
 * sel[b] != 0 (sel NULL: never); src NULL: the identity; tri > 0 zeros below the diagonal
 * (j < i), tri < 0 above it (j > i). In place (dst == src, same strides) is fine. */
template <typename T>
__global__ void la_copy_kernel(T *dst, MatStr ds, const T *src, MatStr ss, const T *alt, MatStr as,
                               const int *sel, int64_t batch, int64_t rows, int64_t cols, int tri) {
    const int64_t per = rows * cols, total = batch * per;
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < total;
         e += (int64_t)gridDim.x * blockDim.x) {
        const int64_t b = e / per, i = e % per / cols, j = e % cols;
        T v;
        if ((tri > 0 && j < i) || (tri < 0 && j > i))
            v = T(0);
        else if (sel && sel[b] != 0)
            v = alt[b * as.b + i * as.r + j * as.c];
        else if (!src)
            v = i == j ? T(1) : T(0);
        else
            v = src[b * ss.b + i * ss.r + j * ss.c];
        dst[b * ds.b + i * ds.r + j * ds.c] = v;
    }
}

template <typename T>
static bool la_copy(int index, T *dst, MatStr ds, const T *src, MatStr ss, int64_t batch,
                    int64_t rows, int64_t cols, int tri = 0, const T *alt = NULL,
                    MatStr as = MatStr{0, 0, 0}, const int *sel = NULL) {
    const int64_t total = batch * rows * cols;
    if (total <= 0) return true;
    la_copy_kernel<T>
        <<<tsc_grid_size(index, total, TSC_THREADS), TSC_THREADS, 0, tsc_stream(index)>>>(
            dst, ds, src, ss, alt, as, sel, batch, rows, cols, tri);
    return tsc_launch_check("linalg", index);
}

/* sign and log|det| (out2 given) or det of each matrix from getrf's factors of a (n x n, either
 * layout: the diagonal is the same) and its 1-based pivots; in double, as the host's det_of */
template <typename T>
__global__ void la_det_kernel(T *out, T *out2, const T *lu, const int *piv, int64_t batch,
                              int64_t n) {
    for (int64_t b = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; b < batch;
         b += (int64_t)gridDim.x * blockDim.x) {
        const T *d = lu + b * n * n;
        const int *p = piv + b * n;
        double s = 1, l = 0, prod = 1;
        for (int64_t j = 0; j < n; j++) {
            const double v = (double)d[j * (n + 1)];
            const bool swap = p[j] - 1 != j;
            prod *= swap ? -v : v;
            if (swap) s = -s;
            if (v < 0) s = -s;
            l += log(fabs(v));
        }
        if (isinf(l) && l < 0) s = 0;
        if (out2) {
            out[b] = (T)s;
            out2[b] = (T)l;
        } else {
            out[b] = (T)prod;
        }
    }
}

/* ------------------------------------------------------------------ scratch */
/* one block carved into 256-byte aligned pieces: sizes first (take with p NULL), then pointers */
struct Carve {
    char *base;
    size_t off;
    void *take(size_t bytes) {
        void *p = base ? base + off : NULL;
        off += (bytes + 255) & ~(size_t)255;
        return p;
    }
};

static bool fits_int(int64_t v) { return v >= 0 && v <= 0x7fffffff; }

/* the state of one call */
template <typename T> struct Job {
    const ts_linalg_args *a;
    int index;
    cusolverDnHandle_t h;
    int m, n, k;
    int64_t batch;
    const char *op;
};

/* the job's input batch (m x n matrices, read as they are) copied into dst on the stream */
template <typename T> static bool copy_input(const Job<T> &j, T *dst) {
    const size_t bytes = (size_t)(j.batch * j.m * j.n) * sizeof(T);
    return tsc_check(
        cudaMemcpyAsync(dst, j.a->a, bytes, cudaMemcpyDeviceToDevice, tsc_stream(j.index)),
        "linalg: copy", j.index);
}

template <typename T> static bool ws_max(int *lw, int q) {
    if (q > *lw) *lw = q;
    return true;
}

/* the scratch pieces of every operation (NULL: not used) */
template <typename T> struct Parts {
    T *work, *w1, *w2, *w3, *tau, *rwork;
    int *piv, *info, *info2;
};

/* sizes the pieces (c.base NULL) or places them; the workspace (p.work) comes after its query */
template <typename T> static void carve(Carve &c, Parts<T> &p, const ts_linalg_args *a) {
    const int64_t b = a->batch, m = a->m, n = a->n, k = m < n ? m : n;
    const size_t es = sizeof(T);
    p = Parts<T>();
    p.info = (int *)c.take((size_t)b * sizeof(int));
    switch (a->op) {
    case TS_LINALG_LU:
        p.w1 = (T *)c.take((size_t)(b * m * n) * es);
        break;
    case TS_LINALG_INV:
    case TS_LINALG_SOLVE: {
        const int64_t rhs = a->op == TS_LINALG_INV ? n : a->nrhs;
        p.w1 = (T *)c.take((size_t)(b * n * n) * es);
        p.w2 = (T *)c.take((size_t)(b * n * rhs) * es);
        p.piv = (int *)c.take((size_t)(b * n) * sizeof(int));
        p.info2 = (int *)c.take((size_t)b * sizeof(int));
        break;
    }
    case TS_LINALG_DET:
        p.w1 = (T *)c.take((size_t)(b * n * n) * es);
        p.piv = (int *)c.take((size_t)(b * n) * sizeof(int));
        break;
    case TS_LINALG_CHOLESKY:
        break;
    case TS_LINALG_EIGH:
        p.w1 = (T *)c.take((size_t)(b * n * n) * es);
        break;
    case TS_LINALG_SVD: {
        const int64_t ku = a->full ? m : k;
        p.w1 = (T *)c.take((size_t)(b * m * n) * es);
        p.rwork = (T *)c.take((size_t)k * es);
        if (m > n && a->out) { /* tall: U and V^T column-major, transposed afterwards */
            p.w2 = (T *)c.take((size_t)(b * m * ku) * es);
            p.w3 = (T *)c.take((size_t)(b * n * n) * es);
        }
        break;
    }
    case TS_LINALG_QR: {
        const int64_t kq = a->full ? m : k;
        p.w1 = (T *)c.take((size_t)(b * m * n) * es);
        p.tau = (T *)c.take((size_t)(b * k) * es);
        if (a->out) p.w2 = (T *)c.take((size_t)(b * m * kq) * es);
        break;
    }
    }
}

/* the workspace (elements of T) the operation's cuSOLVER calls need, queried on matrix 0's shape
 * with the buffers the calls will use (p, placed) */
template <typename T> static bool query_lwork(const Job<T> &j, const Parts<T> &p, int *lw) {
    const ts_linalg_args *a = j.a;
    const int m = j.m, n = j.n, k = j.k;
    *lw = 1;
    int q = 0;
    switch (a->op) {
    case TS_LINALG_LU:
    case TS_LINALG_INV:
    case TS_LINALG_SOLVE:
    case TS_LINALG_DET:
        if (!sol_ok(getrf_ws(j.h, m, n, p.w1, &q), j.op, "getrf_bufferSize", j.index)) return false;
        return ws_max<T>(lw, q);
    case TS_LINALG_CHOLESKY:
        if (!sol_ok(potrf_ws(j.h, n, (T *)a->out, &q), j.op, "potrf_bufferSize", j.index))
            return false;
        return ws_max<T>(lw, q);
    case TS_LINALG_EIGH: {
        const cusolverEigMode_t job =
            a->out ? CUSOLVER_EIG_MODE_VECTOR : CUSOLVER_EIG_MODE_NOVECTOR;
        const cublasFillMode_t up = a->upper ? CUBLAS_FILL_MODE_LOWER : CUBLAS_FILL_MODE_UPPER;
        if (!sol_ok(syevd_ws(j.h, job, up, n, p.w1, (const T *)a->out2, &q), j.op,
                    "syevd_bufferSize", j.index))
            return false;
        return ws_max<T>(lw, q);
    }
    case TS_LINALG_SVD: {
        const int rows = m > n ? m : n, cols = k;
        if (!sol_ok(gesvd_ws(j.h, rows, cols, p.w1, &q), j.op, "gesvd_bufferSize", j.index))
            return false;
        return ws_max<T>(lw, q);
    }
    case TS_LINALG_QR:
        if (!sol_ok(geqrf_ws(j.h, m, n, p.w1, &q), j.op, "geqrf_bufferSize", j.index)) return false;
        ws_max<T>(lw, q);
        if (a->out) {
            const int kq = a->full ? m : k;
            if (!sol_ok(orgqr_ws(j.h, m, kq, k, p.w2, p.tau, &q), j.op, "orgqr_bufferSize",
                        j.index))
                return false;
            ws_max<T>(lw, q);
        }
        return true;
    }
    return true;
}

/* ------------------------------------------------------------------ the operations */
/* LU: A transposed into column-major scratch, getrf there (pivots straight into a->piv), the
 * factors transposed back */
template <typename T> static bool run_lu(const Job<T> &j, const Parts<T> &p, int lw) {
    const ts_linalg_args *a = j.a;
    const int64_t b = j.batch, m = j.m, n = j.n, k = j.k;
    const int index = j.index;
    const T *A = (const T *)a->a;
    T *out = (T *)a->out;
    if (!la_copy<T>(index, p.w1, col_major(m, n), A, row_major(m, n), b, m, n)) return false;
    for (int64_t i = 0; i < b; i++)
        if (!sol_ok(getrf(j.h, j.m, j.n, p.w1 + i * m * n, p.work, a->piv + i * k, p.info + i),
                    j.op, "getrf", index))
            return false;
    return la_copy<T>(index, out, row_major(m, n), p.w1, col_major(m, n), b, m, n);
}

/* inverse / solve: A transposed into column-major scratch and factorised (getrf), X = I or B
 * column-major solved in place (getrs), transposed back; matrices with a zero pivot get their LU
 * factors (inverse) or B (solve) instead, as the host path leaves them */
template <typename T> static bool run_inv_solve(const Job<T> &j, const Parts<T> &p, int lw) {
    const ts_linalg_args *a = j.a;
    const int64_t b = j.batch, n = j.n;
    const int index = j.index;
    const T *A = (const T *)a->a;
    const bool inv = a->op == TS_LINALG_INV;
    const int64_t r = inv ? n : a->nrhs;
    T *out = (T *)a->out;
    if (!fits_int(r)) {
        tsi_error_set(TS_ERR_UNSUPPORTED, "%s: %lld right-hand sides exceed cuSOLVER's sizes", j.op,
                      (long long)r);
        return false;
    }
    if (!la_copy<T>(index, p.w1, col_major(n, n), A, row_major(n, n), b, n, n)) return false;
    /* X: the identity, or B column-major */
    if (!la_copy<T>(index, p.w2, col_major(n, r), inv ? NULL : (const T *)a->b, row_major(n, r), b,
                    n, r))
        return false;
    for (int64_t i = 0; i < b; i++) {
        T *lu = p.w1 + i * n * n;
        int *piv = p.piv + i * n;
        if (!sol_ok(getrf(j.h, j.n, j.n, lu, p.work, piv, p.info + i), j.op, "getrf", index) ||
            !sol_ok(getrs(j.h, j.n, (int)r, lu, piv, p.w2 + i * n * r, p.info2 + i), j.op, "getrs",
                    index))
            return false;
    }
    /* where getrf found a zero pivot: its LU factors (inverse) or B (solve), as the host's */
    if (inv)
        return la_copy<T>(index, out, row_major(n, n), p.w2, col_major(n, n), b, n, n, 0, p.w1,
                          col_major(n, n), p.info);
    return la_copy<T>(index, out, row_major(n, r), p.w2, col_major(n, r), b, n, r, 0,
                      (const T *)a->b, row_major(n, r), p.info);
}

/* determinants: getrf of the buffer as it is (A^T: the same determinant), then sign, log|det| or
 * det from the diagonal and the pivots */
template <typename T> static bool run_det(const Job<T> &j, const Parts<T> &p, int lw) {
    const ts_linalg_args *a = j.a;
    const int64_t b = j.batch, n = j.n;
    const int index = j.index;
    cudaStream_t st = tsc_stream(index);
    if (!copy_input(j, p.w1)) return false;
    for (int64_t i = 0; i < b; i++)
        if (!sol_ok(getrf(j.h, j.n, j.n, p.w1 + i * n * n, p.work, p.piv + i * n, p.info + i), j.op,
                    "getrf", index))
            return false;
    la_det_kernel<T><<<tsc_grid_size(index, b, TSC_THREADS), TSC_THREADS, 0, st>>>(
        (T *)a->out, (T *)a->out2, p.w1, p.piv, b, n);
    return tsc_launch_check("linalg det", index);
}

/* Cholesky: potrf('U') in place on a copy read column-major (A^T: its upper triangle is A's lower
 * one, its factor U = L^T is A's L row-major), then zeros above the diagonal */
template <typename T> static bool run_cholesky(const Job<T> &j, const Parts<T> &p, int lw) {
    const ts_linalg_args *a = j.a;
    const int64_t b = j.batch, n = j.n;
    const int index = j.index;
    T *out = (T *)a->out;
    if (!copy_input(j, out)) return false;
    for (int64_t i = 0; i < b; i++)
        if (!sol_ok(potrf(j.h, j.n, out + i * n * n, p.work, lw, p.info + i), j.op, "potrf", index))
            return false;
    return la_copy<T>(index, out, row_major(n, n), out, row_major(n, n), b, n, n, -1);
}

/* eigh: syevd of the buffer as it is (A^T: A's upper triangle is its lower one); the eigenvectors
 * come as columns of a column-major matrix and are transposed back */
template <typename T> static bool run_eigh(const Job<T> &j, const Parts<T> &p, int lw) {
    const ts_linalg_args *a = j.a;
    const int64_t b = j.batch, n = j.n;
    const int index = j.index;
    const cusolverEigMode_t job = a->out ? CUSOLVER_EIG_MODE_VECTOR : CUSOLVER_EIG_MODE_NOVECTOR;
    const cublasFillMode_t up = a->upper ? CUBLAS_FILL_MODE_LOWER : CUBLAS_FILL_MODE_UPPER;
    if (!copy_input(j, p.w1)) return false;
    for (int64_t i = 0; i < b; i++)
        if (!sol_ok(syevd(j.h, job, up, j.n, p.w1 + i * n * n, (T *)a->out2 + i * n, p.work, lw,
                          p.info + i),
                    j.op, "syevd", index))
            return false;
    if (!a->out) return true;
    return la_copy<T>(index, (T *)a->out, row_major(n, n), p.w1, col_major(n, n), b, n, n);
}

/* SVD: gesvd, which needs rows >= columns */
template <typename T> static bool run_svd(const Job<T> &j, const Parts<T> &p, int lw) {
    const ts_linalg_args *a = j.a;
    const int64_t b = j.batch, m = j.m, n = j.n, k = j.k;
    const int index = j.index;
    const T *A = (const T *)a->a;
    T *S = (T *)a->out2, *U = (T *)a->out, *Vt = (T *)a->out3;
    const int64_t ku = a->full ? m : k, kv = a->full ? n : k;
    if (m <= n) {
        /* the buffer is A^T (n x m, n >= m) column-major: A^T = Uc S VTc gives A = VTc^T S
         * Uc^T, and VTc (m x m) column-major is U row-major, Uc (n x kv) column-major is V^T
         * row-major: both written where they belong */
        if (!copy_input(j, p.w1)) return false;
        const signed char ju = !U ? 'N' : a->full ? 'A' : 'S', jv = !U ? 'N' : 'A';
        for (int64_t i = 0; i < b; i++)
            if (!sol_ok(gesvd(j.h, ju, jv, j.n, j.m, p.w1 + i * m * n, S + i * k,
                              U ? Vt + i * kv * n : p.rwork, U ? j.n : 1,
                              U ? U + i * m * ku : p.rwork, U ? j.m : 1, p.work, lw, p.rwork,
                              p.info + i),
                        j.op, "gesvd", index))
                return false;
        return true;
    }
    /* tall: A column-major (m x n, m > n); U and V^T come column-major and are transposed */
    if (!la_copy<T>(index, p.w1, col_major(m, n), A, row_major(m, n), b, m, n)) return false;
    const signed char ju = !U ? 'N' : a->full ? 'A' : 'S', jv = !U ? 'N' : 'A';
    for (int64_t i = 0; i < b; i++)
        if (!sol_ok(gesvd(j.h, ju, jv, j.m, j.n, p.w1 + i * m * n, S + i * k,
                          U ? p.w2 + i * m * ku : p.rwork, U ? j.m : 1,
                          U ? p.w3 + i * n * n : p.rwork, U ? j.n : 1, p.work, lw, p.rwork,
                          p.info + i),
                    j.op, "gesvd", index))
            return false;
    if (!U) return true;
    return la_copy<T>(index, U, row_major(m, ku), p.w2, col_major(m, ku), b, m, ku) &&
           la_copy<T>(index, Vt, row_major(n, n), p.w3, col_major(n, n), b, n, n);
}

/* QR: A transposed into column-major scratch, geqrf; R copied out of its upper triangle, Q built
 * by orgqr from the reflectors and transposed back */
template <typename T> static bool run_qr(const Job<T> &j, const Parts<T> &p, int lw) {
    const ts_linalg_args *a = j.a;
    const int64_t b = j.batch, m = j.m, n = j.n, k = j.k;
    const int index = j.index;
    const T *A = (const T *)a->a;
    cudaStream_t st = tsc_stream(index);
    const int64_t kq = a->full ? m : k;
    if (!la_copy<T>(index, p.w1, col_major(m, n), A, row_major(m, n), b, m, n)) return false;
    for (int64_t i = 0; i < b; i++)
        if (!sol_ok(geqrf(j.h, j.m, j.n, p.w1 + i * m * n, p.tau + i * k, p.work, lw, p.info + i),
                    j.op, "geqrf", index))
            return false;
    /* R: the upper triangle of the first kq rows (rows past n are zeros) */
    if (!la_copy<T>(index, (T *)a->out2, row_major(kq, n), p.w1, col_major(m, n), b, kq, n, 1))
        return false;
    if (!a->out) return true;
    /* Q: the reflectors' columns (zeros past n), orgqr, transposed back */
    const int64_t kc = kq < n ? kq : n;
    if (kq > kc && !tsc_check(cudaMemsetAsync(p.w2, 0, (size_t)(b * m * kq) * sizeof(T), st),
                              "linalg: memset", index))
        return false;
    if (!la_copy<T>(index, p.w2, col_major(m, kq), p.w1, col_major(m, n), b, m, kc)) return false;
    for (int64_t i = 0; i < b; i++)
        if (!sol_ok(orgqr(j.h, j.m, (int)kq, j.k, p.w2 + i * m * kq, p.tau + i * k, p.work, lw,
                          p.info + i),
                    j.op, "orgqr", index))
            return false;
    return la_copy<T>(index, (T *)a->out, row_major(m, kq), p.w2, col_major(m, kq), b, m, kq);
}

template <typename T> static bool run(const Job<T> &j, const Parts<T> &p, int lw) {
    switch (j.a->op) {
    case TS_LINALG_LU:
        return run_lu<T>(j, p, lw);
    case TS_LINALG_INV:
    case TS_LINALG_SOLVE:
        return run_inv_solve<T>(j, p, lw);
    case TS_LINALG_DET:
        return run_det<T>(j, p, lw);
    case TS_LINALG_CHOLESKY:
        return run_cholesky<T>(j, p, lw);
    case TS_LINALG_EIGH:
        return run_eigh<T>(j, p, lw);
    case TS_LINALG_SVD:
        return run_svd<T>(j, p, lw);
    case TS_LINALG_QR:
        return run_qr<T>(j, p, lw);
    }
    return true;
}

template <typename T> static bool linalg_t(int index, const ts_linalg_args *a) {
    const char *op = a->name ? a->name : "linalg";
    if (!fits_int(a->m) || !fits_int(a->n) || !fits_int(a->m * a->n) ||
        (a->op == TS_LINALG_SOLVE && !fits_int(a->nrhs))) {
        tsi_error_set(TS_ERR_UNSUPPORTED,
                      "%s: a %lld x %lld matrix exceeds cuSOLVER's 32-bit sizes (cuda:%d)", op,
                      (long long)a->m, (long long)a->n, index);
        return false;
    }
    Job<T> j;
    j.a = a, j.index = index, j.op = op, j.batch = a->batch;
    j.m = (int)a->m, j.n = (int)a->n, j.k = j.m < j.n ? j.m : j.n;
    j.h = sol_acquire(index, op);
    if (!j.h) return false;
    /* the buffers, then the workspace their query asks for */
    Carve c = {NULL, 0};
    Parts<T> p;
    carve<T>(c, p, a);
    char *block = (char *)tsc_scratch_alloc(index, c.off);
    int lw = 1;
    bool ok = block != NULL;
    if (ok) {
        c.base = block, c.off = 0;
        carve<T>(c, p, a);
        ok = query_lwork<T>(j, p, &lw);
    }
    char *work = ok ? (char *)tsc_scratch_alloc(index, (size_t)lw * sizeof(T)) : NULL;
    ok = ok && work;
    if (ok) {
        p.work = (T *)work;
        ok = run<T>(j, p, lw);
        if (ok && a->info) /* the one wait: PyTorch's errors need the infos on the host */
            ok = tsc_check(cudaMemcpyAsync(a->info, p.info, (size_t)a->batch * sizeof(int),
                                           cudaMemcpyDeviceToHost, tsc_stream(index)),
                           "linalg: info", index) &&
                 tsc_check(cudaStreamSynchronize(tsc_stream(index)), "linalg: info", index);
    }
    if (work) tsc_scratch_free(index, work);
    if (block) tsc_scratch_free(index, block);
    sol_release(index, j.h);
    return ok;
}

} /* namespace */

bool tsc_linalg(const ts_backend *be, int index, const ts_linalg_args *a) {
    (void)be;
    if (a->batch <= 0 || a->m <= 0 || a->n <= 0) return true;
    if (!tsc_begin(index)) return false;
    if (a->dtype == TS_F32) return linalg_t<float>(index, a);
    if (a->dtype == TS_F64) return linalg_t<double>(index, a);
    tsi_error_set(TS_ERR_DTYPE, "%s: cuSOLVER takes float32 and float64 matrices, not %s",
                  a->name ? a->name : "linalg", ts_dtype_name(a->dtype));
    return false;
}
