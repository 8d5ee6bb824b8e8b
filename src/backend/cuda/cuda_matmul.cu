/* cuda_matmul.cu — batched matmul on CUDA through cuBLAS (cublasGemmStridedBatchedEx_64), and the
 * strided GEMM the im2col convolution shares.
 *
 * f32 computes in full f32 (CUBLAS_COMPUTE_32F) unless the user allowed TF32
 * (ts_cuda_set_allow_tf32); f64 is DGEMM; f16/bf16 run on tensor cores with f32 accumulation.
 * Operands that are row- or column-major matrices (transposed views included) go to cuBLAS as they
 * are, with the matching transpose flag; any other strides are first copied into contiguous scratch
 * (and an output cuBLAS cannot write is computed in scratch and copied back). A batch stride of 0
 * (broadcast) is passed through. Integer matmuls use a plain kernel with wrapping int64
 * accumulation, like the CPU. */
#include <pthread.h>

#include "backend/cuda/cuda_compute.h"
#include "backend/cuda/cuda_compute_blas.h"

/* after kernel_math.h: cuda_fp16.h's global `half` would shadow a local of that name there */
#include <cublas_v2.h>

namespace {

/* ------------------------------------------------------------------ handles */
#define BLAS_POOL 8 /* idle handles kept per device */

static pthread_mutex_t g_blas_lock = PTHREAD_MUTEX_INITIALIZER;
static cublasHandle_t g_blas_idle[TSC_MAX_DEVICES][BLAS_POOL];
static int g_blas_nidle[TSC_MAX_DEVICES];

static bool blas_ok(cublasStatus_t s, const char *what, int index) {
    if (s == CUBLAS_STATUS_SUCCESS) return true;
    tsi_error_set(TS_ERR_CUDA, "%s: cuBLAS: %s (cuda:%d)", what, cublasGetStatusString(s), index);
    return false;
}

/* A handle for the current device (made current by the caller), bound to the current stream. */
static cublasHandle_t blas_acquire(int index, const char *what) {
    cublasHandle_t h = NULL;
    if (index >= 0 && index < TSC_MAX_DEVICES) {
        pthread_mutex_lock(&g_blas_lock);
        if (g_blas_nidle[index] > 0) h = g_blas_idle[index][--g_blas_nidle[index]];
        pthread_mutex_unlock(&g_blas_lock);
    }
    if (!h && !blas_ok(cublasCreate(&h), what, index)) return NULL;
    /* setting the stream also resets the workspace: the caller sets its own afterwards */
    if (!blas_ok(cublasSetStream(h, tsc_stream(index)), what, index)) {
        cublasDestroy(h);
        return NULL;
    }
    return h;
}

static void blas_release(int index, cublasHandle_t h) {
    if (index >= 0 && index < TSC_MAX_DEVICES) {
        pthread_mutex_lock(&g_blas_lock);
        const bool kept = g_blas_nidle[index] < BLAS_POOL;
        if (kept) g_blas_idle[index][g_blas_nidle[index]++] = h;
        pthread_mutex_unlock(&g_blas_lock);
        if (kept) return;
    }
    cublasDestroy(h);
}

/* cuBLAS's recommended workspace: 32 MiB on Hopper and later, 4 MiB before. */
static size_t blas_workspace_size(int index) {
    static int major[TSC_MAX_DEVICES]; /* 0: not asked yet (benign race: same answer) */
    int m = index >= 0 && index < TSC_MAX_DEVICES ? major[index] : 0;
    if (m == 0) {
        if (cudaDeviceGetAttribute(&m, cudaDevAttrComputeCapabilityMajor, index) != cudaSuccess)
            m = 8;
        if (index >= 0 && index < TSC_MAX_DEVICES) major[index] = m;
    }
    return m >= 9 ? (size_t)32 << 20 : (size_t)4 << 20;
}

/* ------------------------------------------------------------------ strided copies */
/* dst(b, r, c) = src(b, r, c) over a batch of rows x cols matrices (zero: dst = 0). U is a bit
 * type of the element size. */
template <typename U>
__global__ void mat_copy_kernel(char *dst, tsc_mat_strides ds, const char *src, tsc_mat_strides ss,
                                int64_t batch, int64_t rows, int64_t cols, bool zero) {
    const int64_t total = batch * rows * cols;
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < total;
         e += (int64_t)gridDim.x * blockDim.x) {
        const int64_t c = e % cols, r = (e / cols) % rows, b = e / (cols * rows);
        U *d = (U *)dst + b * ds.sb + r * ds.sr + c * ds.sc;
        *d = zero ? (U)0 : ((const U *)src)[b * ss.sb + r * ss.sr + c * ss.sc];
    }
}

static bool mat_copy(int index, const char *what, size_t es, char *dst, tsc_mat_strides ds,
                     const char *src, tsc_mat_strides ss, int64_t batch, int64_t rows, int64_t cols,
                     bool zero) {
    const int64_t total = batch * rows * cols;
    if (total == 0) return true;
    const unsigned grid = tsc_grid(total, TSC_THREADS);
    cudaStream_t st = tsc_stream(index);
    switch (es) {
    case 1:
        mat_copy_kernel<uint8_t>
            <<<grid, TSC_THREADS, 0, st>>>(dst, ds, src, ss, batch, rows, cols, zero);
        break;
    case 2:
        mat_copy_kernel<uint16_t>
            <<<grid, TSC_THREADS, 0, st>>>(dst, ds, src, ss, batch, rows, cols, zero);
        break;
    case 4:
        mat_copy_kernel<uint32_t>
            <<<grid, TSC_THREADS, 0, st>>>(dst, ds, src, ss, batch, rows, cols, zero);
        break;
    default:
        mat_copy_kernel<unsigned long long>
            <<<grid, TSC_THREADS, 0, st>>>(dst, ds, src, ss, batch, rows, cols, zero);
        break;
    }
    return tsc_launch_check(what, index);
}

/* ------------------------------------------------------------------ layouts */
typedef enum { LAYOUT_NONE, LAYOUT_ROW, LAYOUT_COL } mat_layout;

/* A rows x cols matrix cuBLAS can read in place: row-major (ld = row stride) or column-major
 * (ld = column stride). The stride of a size-1 dim is arbitrary and so is ignored. */
static mat_layout layout_of(int64_t rows, int64_t cols, int64_t rs, int64_t cs, int64_t *ld) {
    const int64_t r1 = rows > 1 ? rows : 1, c1 = cols > 1 ? cols : 1;
    if ((cs == 1 || cols == 1) && (rows == 1 || rs >= c1)) {
        *ld = rows == 1 ? c1 : rs;
        return LAYOUT_ROW;
    }
    if ((rs == 1 || rows == 1) && (cols == 1 || cs >= r1)) {
        *ld = cols == 1 ? r1 : cs;
        return LAYOUT_COL;
    }
    return LAYOUT_NONE;
}

/* ------------------------------------------------------------------ integer matmul */
template <typename T>
__global__ void int_mm_kernel(ts_kview out, ts_kview a, ts_kview b, int64_t total) {
    const int64_t m = out.shape[1], n = out.shape[2], k = a.shape[2];
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < total;
         e += (int64_t)gridDim.x * blockDim.x) {
        const int64_t j = e % n, i = (e / n) % m, bi = e / (n * m);
        const T *ar = (const T *)a.data + bi * a.strides[0] + i * a.strides[1];
        const T *bc = (const T *)b.data + bi * b.strides[0] + j * b.strides[2];
        uint64_t s = 0; /* wraps like the CPU */
        for (int64_t p = 0; p < k; p++)
            s += (uint64_t)(int64_t)ar[p * a.strides[2]] * (uint64_t)(int64_t)bc[p * b.strides[1]];
        ((T *)out.data)[bi * out.strides[0] + i * out.strides[1] + j * out.strides[2]] =
            (T)(int64_t)s;
    }
}

} /* namespace */

bool tsc_mat_copy(int index, const char *what, size_t es, char *dst, tsc_mat_strides ds,
                  const char *src, tsc_mat_strides ss, int64_t batch, int64_t rows, int64_t cols) {
    return mat_copy(index, what, es, dst, ds, src, ss, batch, rows, cols, false);
}

int tsc_mat_layout(int64_t rows, int64_t cols, int64_t rs, int64_t cs, int64_t *ld) {
    const mat_layout l = layout_of(rows, cols, rs, cs, ld);
    return l == LAYOUT_ROW ? TSC_LAYOUT_ROW : l == LAYOUT_COL ? TSC_LAYOUT_COL : TSC_LAYOUT_NONE;
}

size_t tsc_blas_workspace_size(int index) { return blas_workspace_size(index); }

cudaDataType tsc_blas_type(ts_dtype dt) {
    switch (dt) {
    case TS_F64:
        return CUDA_R_64F;
    case TS_F16:
        return CUDA_R_16F;
    case TS_BF16:
        return CUDA_R_16BF;
    default:
        return CUDA_R_32F;
    }
}

bool tsc_gemm(int index, const char *what, ts_dtype ab_dt, ts_dtype c_dt, int64_t batch, int64_t m,
              int64_t n, int64_t k, tsc_mat a, tsc_mat b, tsc_mat c, double beta) {
    if (batch == 0 || m == 0 || n == 0) return true;
    const size_t es = tsc_dtype_size(ab_dt), ces = tsc_dtype_size(c_dt);
    if (k == 0) { /* C = beta * C: only beta 0 and 1 are used */
        if (beta != 0.0) return true;
        tsc_mat_strides none = {0, 0, 0};
        return mat_copy(index, what, ces, c.data, c.s, NULL, none, batch, m, n, true);
    }
    char *scratch[3] = {NULL, NULL, NULL};
    bool ok = true;

    /* operands cuBLAS cannot read in place: contiguous row-major copies (one when broadcast) */
    int64_t lda = 1, ldb = 1, ldc = 1;
    mat_layout la = layout_of(m, k, a.s.sr, a.s.sc, &lda);
    mat_layout lb = layout_of(k, n, b.s.sr, b.s.sc, &ldb);
    mat_layout lc = layout_of(m, n, c.s.sr, c.s.sc, &ldc);
    if (batch > 1 && c.s.sb == 0) lc = LAYOUT_NONE; /* never: outputs are not broadcast */
    if (la == LAYOUT_NONE) {
        const int64_t nb = a.s.sb == 0 ? 1 : batch;
        tsc_mat_strides ps = {a.s.sb == 0 ? 0 : m * k, k, 1};
        ok = (scratch[0] = (char *)tsc_scratch_alloc(index, (size_t)(nb * m * k) * es)) != NULL &&
             mat_copy(index, what, es, scratch[0], ps, a.data, a.s, nb, m, k, false);
        a.data = scratch[0], a.s = ps, la = LAYOUT_ROW, lda = k;
    }
    if (ok && lb == LAYOUT_NONE) {
        const int64_t nb = b.s.sb == 0 ? 1 : batch;
        tsc_mat_strides ps = {b.s.sb == 0 ? 0 : k * n, n, 1};
        ok = (scratch[1] = (char *)tsc_scratch_alloc(index, (size_t)(nb * k * n) * es)) != NULL &&
             mat_copy(index, what, es, scratch[1], ps, b.data, b.s, nb, k, n, false);
        b.data = scratch[1], b.s = ps, lb = LAYOUT_ROW, ldb = n;
    }
    tsc_mat cw = c;
    if (ok && lc == LAYOUT_NONE) {
        tsc_mat_strides ps = {m * n, n, 1};
        ok = (scratch[2] = (char *)tsc_scratch_alloc(index, (size_t)(batch * m * n) * ces)) != NULL;
        if (ok && beta != 0.0)
            ok = mat_copy(index, what, ces, scratch[2], ps, c.data, c.s, batch, m, n, false);
        cw.data = scratch[2], cw.s = ps, lc = LAYOUT_ROW, ldc = n;
    }

    cublasHandle_t h = ok ? blas_acquire(index, what) : NULL;
    void *ws = NULL;
    if (h) {
        const size_t wsize = blas_workspace_size(index);
        ws = tsc_scratch_alloc(index, wsize);
        ok = ws && blas_ok(cublasSetWorkspace(h, ws, wsize), what, index);
        if (ok) {
            /* cuBLAS is column-major. A column-major C gets A @ B; a row-major C is the
             * column-major C^T = B^T @ A^T. An operand stored like C needs no transpose. */
            const bool row = lc == LAYOUT_ROW;
            const mat_layout want = lc;
            const tsc_mat &x = row ? b : a, &y = row ? a : b;
            const int64_t ldx = row ? ldb : lda, ldy = row ? lda : ldb;
            const cublasOperation_t tx = (row ? lb : la) == want ? CUBLAS_OP_N : CUBLAS_OP_T;
            const cublasOperation_t ty = (row ? la : lb) == want ? CUBLAS_OP_N : CUBLAS_OP_T;
            const int64_t rm = row ? n : m, rn = row ? m : n;
            const float alpha_f = 1.0f, beta_f = (float)beta;
            const double alpha_d = 1.0;
            const bool dbl = ab_dt == TS_F64;
            cublasComputeType_t ct = CUBLAS_COMPUTE_32F;
            if (dbl)
                ct = CUBLAS_COMPUTE_64F;
            else if (ab_dt == TS_F32 && ts_cuda_allow_tf32())
                ct = CUBLAS_COMPUTE_32F_FAST_TF32;
            ok = blas_ok(cublasGemmStridedBatchedEx_64(
                             h, tx, ty, rm, rn, k, dbl ? (const void *)&alpha_d : &alpha_f, x.data,
                             tsc_blas_type(ab_dt), ldx, x.s.sb, y.data, tsc_blas_type(ab_dt), ldy,
                             y.s.sb, dbl ? (const void *)&beta : &beta_f, cw.data,
                             tsc_blas_type(c_dt), ldc, cw.s.sb, batch, ct, CUBLAS_GEMM_DEFAULT),
                         what, index);
        }
        if (ws) tsc_scratch_free(index, ws);
        blas_release(index, h);
    } else {
        ok = false;
    }
    if (ok && scratch[2])
        ok = mat_copy(index, what, ces, c.data, c.s, scratch[2], cw.s, batch, m, n, false);
    for (int i = 0; i < 3; i++)
        if (scratch[i]) tsc_scratch_free(index, scratch[i]);
    return ok;
}

void tsc_matmul(const ts_backend *be, int index, const ts_kview *out, const ts_kview *a,
                const ts_kview *b) {
    (void)be;
    const int64_t batch = out->shape[0], m = out->shape[1], n = out->shape[2], k = a->shape[2];
    if (batch * m * n == 0 || !tsc_begin(index)) return;
    const ts_dtype dt = out->dtype;
    if (tsc_is_float(dt)) {
        tsc_mat ma = {a->data, {a->strides[0], a->strides[1], a->strides[2]}};
        tsc_mat mb = {b->data, {b->strides[0], b->strides[1], b->strides[2]}};
        tsc_mat mc = {out->data, {out->strides[0], out->strides[1], out->strides[2]}};
        tsc_gemm(index, "matmul", dt, dt, batch, m, n, k, ma, mb, mc, 0.0);
        return;
    }
    const int64_t total = batch * m * n;
    const unsigned grid = tsc_grid(total, TSC_THREADS);
    cudaStream_t st = tsc_stream(index);
    switch (dt) {
    case TS_I64:
        int_mm_kernel<int64_t><<<grid, TSC_THREADS, 0, st>>>(*out, *a, *b, total);
        break;
    case TS_I32:
        int_mm_kernel<int32_t><<<grid, TSC_THREADS, 0, st>>>(*out, *a, *b, total);
        break;
    case TS_U8:
        int_mm_kernel<uint8_t><<<grid, TSC_THREADS, 0, st>>>(*out, *a, *b, total);
        break;
    case TS_I8:
        int_mm_kernel<int8_t><<<grid, TSC_THREADS, 0, st>>>(*out, *a, *b, total);
        break;
    case TS_I16:
        int_mm_kernel<int16_t><<<grid, TSC_THREADS, 0, st>>>(*out, *a, *b, total);
        break;
    case TS_U16:
        int_mm_kernel<uint16_t><<<grid, TSC_THREADS, 0, st>>>(*out, *a, *b, total);
        break;
    case TS_U32:
        int_mm_kernel<uint32_t><<<grid, TSC_THREADS, 0, st>>>(*out, *a, *b, total);
        break;
    case TS_U64:
        int_mm_kernel<uint64_t><<<grid, TSC_THREADS, 0, st>>>(*out, *a, *b, total);
        break;
    default:
        return; /* bool: the front end refuses it */
    }
    tsc_launch_check("matmul", index);
}
