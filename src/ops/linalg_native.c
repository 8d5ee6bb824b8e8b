/* linalg_native.c — torch.linalg's inverse, solve, determinant, Cholesky and SVD in the operand's
 * own dtype (decision 0024): float32 matrices through LAPACK's s routines, float64 through its d
 * routines, as PyTorch's CPU build does. LAPACKE's _work functions with LAPACK_COL_MAJOR call
 * LAPACK directly (no row-major copies, no NaN scans). A row-major buffer read column-major is the
 * matrix's transpose: the Cholesky factor, the determinant and the SVD come from that view without
 * a copy (lower of A = upper of A^T; det A^T = det A; A^T = U S V^T gives A = V S U^T); the LU of
 * inv and solve factorises the matrix itself (a transposed copy), so that a singular matrix reports
 * PyTorch's info. Batches of small matrices run on several threads, one workspace per thread;
 * determinants, inverses and solves of matrices up to TINY_N run a partial-pivoting LU of our own
 * in double (LAPACK's per-call cost dominates there; the same pivots and zero-pivot infos as
 * getrf's, more accurate than float32's). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#ifdef TS_HAVE_OPENMP
#include <omp.h>
#endif

#include "backend/omp_if.h"
#include "core/internal.h"
#include "ops/linalg_lapack.h"

#ifdef TS_HAVE_LAPACKE
#include <lapacke.h>
#endif

#define TINY_N      16        /* up to this order: our own LU in double */
#define PAR_MAX_N   128       /* larger matrices: one at a time, LAPACK (OpenBLAS) threads itself */
#define PAR_MIN     (1 << 15) /* batch * n^3 below this: one thread */
#define MAX_THREADS 64

static size_t esize(bool f32) { return f32 ? sizeof(float) : sizeof(double); }

bool tsl_nat_alloc(const char *op, bool f32, int64_t batch, int64_t m, int64_t n, tsl_nat *M) {
    M->batch = batch, M->m = m, M->n = n, M->f32 = f32;
    const int64_t total = batch * m * n;
    M->a = malloc((size_t)(total > 0 ? total : 1) * esize(f32));
    if (!M->a) {
        tsi_error_set(TS_ERR_OOM, "%s: out of host memory for %lld values", op, (long long)total);
        return false;
    }
    return true;
}

void tsl_nat_free(tsl_nat *M) {
    free(M->a);
    M->a = NULL;
}

bool tsl_nat_read(const char *op, ts_tensor *A, tsl_nat *M) {
    const ts_shape s = A->shape;
    const int64_t m = s.dims[s.ndim - 2], n = s.dims[s.ndim - 1];
    int64_t batch = 1;
    for (int i = 0; i < s.ndim - 2; i++) batch *= s.dims[i];
    const bool f32 = A->dtype == TS_F32;
    if (!tsl_nat_alloc(op, f32, batch, m, n, M)) return false;
    const int64_t total = batch * m * n;
    if (total == 0) return true;
    ts_tensor *c = A->dtype == TS_F32 || A->dtype == TS_F64 ? A : ts_to_dtype(A, TS_F64);
    c = c ? ts_contiguous(ts_to(c, ts_cpu())) : NULL;
    if (!c || ts_copy_to_host(c, M->a, (size_t)total * esize(f32)) != TS_OK) {
        tsl_nat_free(M);
        return false;
    }
    return true;
}

ts_tensor *tsl_nat_write(ts_tensor *like, ts_shape s, const void *v, bool f32) {
    static const double none = 0;
    ts_opts o = {0};
    o.dtype = f32 ? TS_F32 : TS_F64;
    o.device = ts_device_of(like);
    return ts_from_data(s, o.dtype, tsi_numel(s) ? v : &none, o);
}

/* the threads for a batch of `batch` matrices of order n: several for many small matrices */
static int batch_threads(int64_t batch, int64_t n) {
#ifdef TS_HAVE_OPENMP
    if (batch < 2 || n > PAR_MAX_N || omp_in_parallel()) return 1;
    if ((double)batch * (double)n * (double)n * (double)n < PAR_MIN) return 1;
    int nt = omp_get_max_threads();
    if (nt > MAX_THREADS) nt = MAX_THREADS;
    return (int64_t)nt < batch ? nt : (int)batch;
#else
    (void)batch, (void)n;
    return 1;
#endif
}

/* fn over matrices [i0, i1) of the batch, in nt contiguous chunks (nt > 1: in parallel); each
 * chunk returns its status (0, or a negative LAPACK / memory failure); the first failure or 0 */
typedef int (*chunk_fn)(void *ctx, int64_t i0, int64_t i1);
static int run_chunks(int64_t batch, int64_t n, chunk_fn fn, void *ctx) {
    const int nt = batch_threads(batch, n);
    int st[MAX_THREADS] = {0};
    TS_PARALLEL_FOR_IF(
        nt > 1,
        for (int t = 0; t < nt; t++) { st[t] = fn(ctx, batch * t / nt, batch * (t + 1) / nt); });
    for (int t = 0; t < nt; t++)
        if (st[t]) return st[t];
    return 0;
}

#ifdef TS_HAVE_LAPACKE /* the helpers of the LAPACK calls */
static bool failed(const char *op, const char *what, int st) {
    if (st == -1000)
        tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op);
    else
        tsi_error_set(TS_ERR_OOM, "%s: LAPACK %s failed (%d)", op, what, st);
    return false;
}

/* out (c x r) = in (r x c) transposed, both row-major: the other layout of the same matrix; in
 * 16 x 16 blocks, so both sides stay in cache lines */
#define TR_BLOCK(T)                                                                                \
    do {                                                                                           \
        const T *x = in;                                                                           \
        T *y = out;                                                                                \
        for (int64_t i0 = 0; i0 < r; i0 += 16)                                                     \
            for (int64_t j0 = 0; j0 < c; j0 += 16) {                                               \
                const int64_t i1 = r - i0 < 16 ? r : i0 + 16, j1 = c - j0 < 16 ? c : j0 + 16;      \
                for (int64_t i = i0; i < i1; i++)                                                  \
                    for (int64_t j = j0; j < j1; j++) y[j * r + i] = x[i * c + j];                 \
            }                                                                                      \
    } while (0)
static void transpose(bool f32, int64_t r, int64_t c, const void *in, void *out) {
    if (f32)
        TR_BLOCK(float);
    else
        TR_BLOCK(double);
}
#undef TR_BLOCK

static void *mat(const tsl_nat *A, int64_t i, int64_t rows, int64_t cols, void *base) {
    return (char *)base + (size_t)(i * rows * cols) * esize(A->f32);
}
#endif

/* ------------------------------------------------------------------ determinant */
/* sign, log|det| and det from LU factors: diag(j) = d(j), row j swapped with piv(j) */
static void det_of(int64_t n, const double *d, int64_t dstride, const int64_t *piv, double *sign,
                   double *logabs, double *det) {
    double s = 1, l = 0, p = 1;
    for (int64_t j = 0; j < n; j++) {
        const double v = d[j * dstride];
        p *= piv[j] != j ? -v : v;
        if (piv[j] != j) s = -s;
        if (v < 0) s = -s;
        if (logabs) l += log(fabs(v));
    }
    if (isinf(l) && l < 0) s = 0;
    if (sign) *sign = s, *logabs = l;
    if (det) *det = p;
}

/* LU with partial pivoting (the first largest |value| of each column, as LAPACK's) of a row-major
 * n x n matrix in double; piv 0-based. A zero pivot leaves its column as it is, as getrf does;
 * returns getrf's info: the first zero pivot (from 1), or 0. */
static int32_t lu_tiny(int64_t n, double *a, int64_t *piv) {
    int32_t info = 0;
    for (int64_t k = 0; k < n; k++) {
        int64_t p = k;
        double best = fabs(a[k * n + k]);
        for (int64_t r = k + 1; r < n; r++)
            if (fabs(a[r * n + k]) > best) best = fabs(a[r * n + k]), p = r;
        piv[k] = p;
        if (p != k)
            for (int64_t c = 0; c < n; c++) {
                const double t = a[k * n + c];
                a[k * n + c] = a[p * n + c], a[p * n + c] = t;
            }
        const double d = a[k * n + k];
        if (d == 0) {
            if (!info) info = (int32_t)(k + 1);
            continue;
        }
        for (int64_t r = k + 1; r < n; r++) {
            const double f = a[r * n + k] / d;
            a[r * n + k] = f;
            for (int64_t c = k + 1; c < n; c++) a[r * n + c] -= f * a[k * n + c];
        }
    }
    return info;
}

/* b (n x k, row-major) = A^-1 b from lu_tiny's factors of A (no zero pivot) */
static void lu_tiny_solve(int64_t n, int64_t k, const double *lu, const int64_t *piv, double *b) {
    for (int64_t j = 0; j < n; j++)
        if (piv[j] != j)
            for (int64_t c = 0; c < k; c++) {
                const double t = b[j * k + c];
                b[j * k + c] = b[piv[j] * k + c], b[piv[j] * k + c] = t;
            }
    for (int64_t i = 1; i < n; i++) /* L y = b, L unit lower */
        for (int64_t j = 0; j < i; j++) {
            const double f = lu[i * n + j];
            for (int64_t c = 0; c < k; c++) b[i * k + c] -= f * b[j * k + c];
        }
    for (int64_t i = n - 1; i >= 0; i--) { /* U x = y */
        for (int64_t j = i + 1; j < n; j++) {
            const double f = lu[i * n + j];
            for (int64_t c = 0; c < k; c++) b[i * k + c] -= f * b[j * k + c];
        }
        const double d = lu[i * n + i];
        for (int64_t c = 0; c < k; c++) b[i * k + c] /= d;
    }
}

/* cnt values of M from element `at` as doubles, and back */
static void load_d(const tsl_nat *M, int64_t at, int64_t cnt, double *out) {
    if (M->f32)
        for (int64_t e = 0; e < cnt; e++) out[e] = ((const float *)M->a)[at + e];
    else
        memcpy(out, (const double *)M->a + at, sizeof(double) * (size_t)cnt);
}
static void store_d(tsl_nat *M, int64_t at, int64_t cnt, const double *v) {
    if (M->f32)
        for (int64_t e = 0; e < cnt; e++) ((float *)M->a)[at + e] = (float)v[e];
    else
        memcpy((double *)M->a + at, v, sizeof(double) * (size_t)cnt);
}

/* matrices up to TINY_N: solve (B given) or inverse (B NULL: A replaced by A^-1, or by its LU
 * factors where singular), through lu_tiny in double */
typedef struct tiny_ctx {
    tsl_nat *A, *B;
    int32_t *info;
} tiny_ctx;

static int tiny_chunk(void *vc, int64_t i0, int64_t i1) {
    const tiny_ctx *c = vc;
    const int64_t n = c->A->n, k = c->B ? c->B->n : n;
    double a[TINY_N * TINY_N];
    int64_t piv[TINY_N];
    double *b = malloc(sizeof(double) * (size_t)(n * k > 0 ? n * k : 1));
    if (!b) return -1000;
    for (int64_t i = i0; i < i1; i++) {
        load_d(c->A, i * n * n, n * n, a);
        c->info[i] = lu_tiny(n, a, piv);
        if (c->info[i]) {
            if (!c->B) store_d(c->A, i * n * n, n * n, a);
            continue;
        }
        if (c->B) {
            load_d(c->B, i * n * k, n * k, b);
        } else {
            for (int64_t e = 0; e < n * n; e++) b[e] = e % (n + 1) == 0;
        }
        lu_tiny_solve(n, k, a, piv, b);
        store_d(c->B ? c->B : c->A, i * n * k, n * k, b);
    }
    free(b);
    return 0;
}

typedef struct det_ctx {
    const tsl_nat *A;
    double *sign, *logabs, *det;
} det_ctx;

static int det_tiny_chunk(void *vc, int64_t i0, int64_t i1) {
    const det_ctx *c = vc;
    const int64_t n = c->A->n;
    double a[TINY_N * TINY_N];
    int64_t piv[TINY_N];
    for (int64_t i = i0; i < i1; i++) {
        if (c->A->f32) {
            const float *x = (const float *)c->A->a + i * n * n;
            for (int64_t e = 0; e < n * n; e++) a[e] = x[e];
        } else {
            memcpy(a, (const double *)c->A->a + i * n * n, sizeof(double) * (size_t)(n * n));
        }
        (void)lu_tiny(n, a, piv);
        det_of(n, a, n + 1, piv, c->sign ? c->sign + i : NULL, c->sign ? c->logabs + i : NULL,
               c->det ? c->det + i : NULL);
    }
    return 0;
}

#ifdef TS_HAVE_LAPACKE
#define CM LAPACK_COL_MAJOR
#define LI (lapack_int)

static lapack_int getrf(bool f32, int64_t n, void *a, lapack_int *p) {
    return f32 ? LAPACKE_sgetrf_work(CM, LI n, LI n, a, LI n, p)
               : LAPACKE_dgetrf_work(CM, LI n, LI n, a, LI n, p);
}

/* LAPACK's getrf on each matrix read column-major (its transpose: the same determinant) */
static int det_lapack_chunk(void *vc, int64_t i0, int64_t i1) {
    const det_ctx *c = vc;
    const tsl_nat *A = c->A;
    const int64_t n = A->n;
    void *w = malloc((size_t)(n * n) * esize(A->f32));
    double *d = malloc(sizeof(double) * (size_t)n);
    int64_t *piv = malloc(sizeof(int64_t) * (size_t)n);
    lapack_int *p = malloc(sizeof(lapack_int) * (size_t)n);
    int st = w && d && piv && p ? 0 : -1000;
    for (int64_t i = i0; !st && i < i1; i++) {
        memcpy(w, mat(A, i, n, n, A->a), (size_t)(n * n) * esize(A->f32));
        const lapack_int r = getrf(A->f32, n, w, p);
        if (r < 0) {
            st = (int)r;
            break;
        }
        for (int64_t j = 0; j < n; j++) {
            d[j] = A->f32 ? ((const float *)w)[j * n + j] : ((const double *)w)[j * n + j];
            piv[j] = p[j] - 1;
        }
        det_of(n, d, 1, piv, c->sign ? c->sign + i : NULL, c->sign ? c->logabs + i : NULL,
               c->det ? c->det + i : NULL);
    }
    free(d), free(piv), free(p), free(w);
    return st;
}
#endif

bool tsl_nat_slogdet(const char *op, const tsl_nat *A, double *sign, double *logabs, double *det) {
    det_ctx c = {A, sign, logabs, det};
    if (A->n <= TINY_N) return run_chunks(A->batch, A->n, det_tiny_chunk, &c), true;
#ifdef TS_HAVE_LAPACKE
    const int st = run_chunks(A->batch, A->n, det_lapack_chunk, &c);
    return st ? failed(op, "getrf", st) : true;
#else
    return tsl_available(op);
#endif
}

#ifdef TS_HAVE_LAPACKE
/* ------------------------------------------------------------------ inverse */
typedef struct lu_ctx {
    tsl_nat *A, *B;
    int32_t *info;
    lapack_int lwork;
} lu_ctx;

static int inv_chunk(void *vc, int64_t i0, int64_t i1) {
    const lu_ctx *c = vc;
    tsl_nat *A = c->A;
    const bool f = A->f32;
    const int64_t n = A->n;
    const size_t es = esize(f);
    char *w = malloc((size_t)(n * n + c->lwork) * es);
    lapack_int *p = malloc(sizeof(lapack_int) * (size_t)n);
    if (!w || !p) return free(w), free(p), -1000;
    void *col = w, *work = w + (size_t)(n * n) * es;
    int st = 0;
    for (int64_t i = i0; !st && i < i1; i++) {
        void *a = mat(A, i, n, n, A->a);
        transpose(f, n, n, a, col); /* column-major A */
        lapack_int r = getrf(f, n, col, p);
        c->info[i] = r > 0 ? (int32_t)r : 0;
        if (r == 0)
            r = f ? LAPACKE_sgetri_work(CM, LI n, col, LI n, p, work, c->lwork)
                  : LAPACKE_dgetri_work(CM, LI n, col, LI n, p, work, c->lwork);
        if (r < 0) st = (int)r;
        transpose(f, n, n, col, a); /* back to row-major: A^-1 (or its LU factors) */
    }
    free(w), free(p);
    return st;
}

bool tsl_nat_inv(const char *op, tsl_nat *A, int32_t *info) {
    const int64_t n = A->n;
    for (int64_t i = 0; i < A->batch; i++) info[i] = 0;
    if (n == 0 || A->batch == 0) return true;
    if (n <= TINY_N) {
        tiny_ctx t = {A, NULL, info};
        return run_chunks(A->batch, n, tiny_chunk, &t) ? failed(op, "inverse", -1000) : true;
    }
    double q = 0;
    float qf = 0;
    lapack_int pq = 0, r;
    r = A->f32 ? LAPACKE_sgetri_work(CM, LI n, &qf, LI n, &pq, &qf, -1)
               : LAPACKE_dgetri_work(CM, LI n, &q, LI n, &pq, &q, -1);
    if (r < 0) return failed(op, "getri", (int)r);
    lu_ctx c = {A, NULL, info, (lapack_int)(A->f32 ? (double)qf * (1 + 1e-6) : q) + 1};
    if (c.lwork < n) c.lwork = (lapack_int)n;
    const int st = run_chunks(A->batch, n, inv_chunk, &c);
    return st ? failed(op, "getrf/getri", st) : true;
}

/* ------------------------------------------------------------------ solve */
static int solve_chunk(void *vc, int64_t i0, int64_t i1) {
    const lu_ctx *c = vc;
    tsl_nat *A = c->A, *B = c->B;
    const bool f = A->f32;
    const int64_t n = A->n, k = B->n;
    const size_t es = esize(f);
    char *w = malloc((size_t)(n * n + n * k) * es);
    lapack_int *p = malloc(sizeof(lapack_int) * (size_t)n);
    if (!w || !p) return free(w), free(p), -1000;
    void *col = w, *bc = w + (size_t)(n * n) * es;
    int st = 0;
    for (int64_t i = i0; !st && i < i1; i++) {
        transpose(f, n, n, mat(A, i, n, n, A->a), col); /* column-major A */
        lapack_int r = getrf(f, n, col, p);
        c->info[i] = r > 0 ? (int32_t)r : 0;
        if (r != 0) {
            if (r < 0) st = (int)r;
            continue;
        }
        void *b = mat(B, i, n, k, B->a);
        void *bb = k == 1 ? b : bc; /* one column: the same in both layouts */
        if (k > 1) transpose(f, n, k, b, bc);
        r = f ? LAPACKE_sgetrs_work(CM, 'N', LI n, LI k, col, LI n, p, bb, LI n)
              : LAPACKE_dgetrs_work(CM, 'N', LI n, LI k, col, LI n, p, bb, LI n);
        if (r < 0) st = (int)r;
        if (k > 1) transpose(f, k, n, bc, b);
    }
    free(w), free(p);
    return st;
}

bool tsl_nat_solve(const char *op, tsl_nat *A, tsl_nat *B, int32_t *info) {
    for (int64_t i = 0; i < A->batch; i++) info[i] = 0;
    if (A->n == 0 || A->batch == 0) return true;
    if (A->n <= TINY_N) {
        tiny_ctx t = {A, B, info};
        return run_chunks(A->batch, A->n, tiny_chunk, &t) ? failed(op, "solve", -1000) : true;
    }
    lu_ctx c = {A, B, info, 0};
    const int st = run_chunks(A->batch, A->n, solve_chunk, &c);
    return st ? failed(op, "getrf/getrs", st) : true;
}

/* ------------------------------------------------------------------ cholesky */
static int chol_chunk(void *vc, int64_t i0, int64_t i1) {
    const lu_ctx *c = vc;
    tsl_nat *A = c->A;
    const int64_t n = A->n;
    for (int64_t i = i0; i < i1; i++) {
        void *a = mat(A, i, n, n, A->a);
        /* column-major, a is A^T: its upper triangle is A's lower one, its factor U = L^T */
        const lapack_int r = A->f32 ? LAPACKE_spotrf_work(CM, 'U', LI n, a, LI n)
                                    : LAPACKE_dpotrf_work(CM, 'U', LI n, a, LI n);
        if (r < 0) return (int)r;
        c->info[i] = (int32_t)r;
        for (int64_t p = 0; p < n; p++) /* L: zero above the diagonal */
            for (int64_t q = p + 1; q < n; q++) {
                if (A->f32)
                    ((float *)a)[p * n + q] = 0.0f;
                else
                    ((double *)a)[p * n + q] = 0.0;
            }
    }
    return 0;
}

bool tsl_nat_cholesky(const char *op, tsl_nat *A, int32_t *info) {
    for (int64_t i = 0; i < A->batch; i++) info[i] = 0;
    if (A->n == 0 || A->batch == 0) return true;
    lu_ctx c = {A, NULL, info, 0};
    const int st = run_chunks(A->batch, A->n, chol_chunk, &c);
    return st ? failed(op, "potrf", st) : true;
}

/* ------------------------------------------------------------------ svd */
typedef struct svd_ctx {
    tsl_nat *A;
    void *s, *u, *vt;
    bool full;
    int32_t *info;
    lapack_int lwork;
} svd_ctx;

/* gesdd of the m x n row-major matrix a read column-major (A^T, n x m): A^T = Uc S Vc^T, so
 * A = Vc S Uc^T: Uc (n x kv column-major) is Vh row-major, Vc^T (ku x m column-major) is U */
static lapack_int gesdd(bool f, char job, int64_t m, int64_t n, void *a, void *s, void *u,
                        int64_t ku, void *vt, void *work, lapack_int lwork, lapack_int *iwork) {
    const lapack_int ldu = job == 'N' ? 1 : LI n, ldvt = job == 'N' ? 1 : LI ku;
    return f ? LAPACKE_sgesdd_work(CM, job, LI n, LI m, a, LI n, s, vt, ldu, u, ldvt, work, lwork,
                                   iwork)
             : LAPACKE_dgesdd_work(CM, job, LI n, LI m, a, LI n, s, vt, ldu, u, ldvt, work, lwork,
                                   iwork);
}

static int svd_chunk(void *vc, int64_t i0, int64_t i1) {
    const svd_ctx *c = vc;
    tsl_nat *A = c->A;
    const bool f = A->f32;
    const int64_t m = A->m, n = A->n, k = m < n ? m : n;
    const int64_t ku = c->full ? m : k, kv = c->full ? n : k;
    const size_t es = esize(f);
    char *w = malloc((size_t)c->lwork * es);
    lapack_int *iw = malloc(sizeof(lapack_int) * (size_t)(8 * k));
    if (!w || !iw) return free(w), free(iw), -1000;
    float dummy[2] = {0, 0};
    const char job = !c->u ? 'N' : c->full ? 'A' : 'S';
    for (int64_t i = i0; i < i1; i++) {
        void *u = c->u ? (void *)((char *)c->u + (size_t)(i * m * ku) * es) : (void *)dummy;
        void *vt = c->u ? (void *)((char *)c->vt + (size_t)(i * kv * n) * es) : (void *)dummy;
        const lapack_int r = gesdd(f, job, m, n, mat(A, i, m, n, A->a),
                                   (char *)c->s + (size_t)(i * k) * es, u, ku, vt, w, c->lwork, iw);
        if (r < 0) return free(w), free(iw), (int)r;
        c->info[i] = (int32_t)r;
    }
    free(w), free(iw);
    return 0;
}

static void set(bool f32, void *p, int64_t at, double v) {
    if (f32)
        ((float *)p)[at] = (float)v;
    else
        ((double *)p)[at] = v;
}

bool tsl_nat_svd(const char *op, tsl_nat *A, void *s, void *u, void *vt, bool full, int32_t *info) {
    const int64_t m = A->m, n = A->n, k = m < n ? m : n, b = A->batch;
    const int64_t ku = full ? m : k, kv = full ? n : k;
    for (int64_t i = 0; i < b; i++) info[i] = 0;
    if (b == 0) return true;
    if (k == 0) { /* no singular values: U and V are identities */
        for (int64_t i = 0; u && i < b; i++) {
            for (int64_t r = 0; r < m; r++)
                for (int64_t q = 0; q < ku; q++) set(A->f32, u, (i * m + r) * ku + q, r == q);
            for (int64_t r = 0; r < kv; r++)
                for (int64_t q = 0; q < n; q++) set(A->f32, vt, (i * kv + r) * n + q, r == q);
        }
        return true;
    }
    const char job = !u ? 'N' : full ? 'A' : 'S';
    double q = 0, du[2] = {0, 0};
    lapack_int iq[8] = {0};
    float qf = 0, fu[2] = {0, 0};
    const lapack_int r = A->f32 ? gesdd(true, job, m, n, fu, fu, fu, ku, fu, &qf, -1, iq)
                                : gesdd(false, job, m, n, du, du, du, ku, du, &q, -1, iq);
    if (r < 0) return failed(op, "gesdd", (int)r);
    /* the optimal size, as a float rounded up (LAPACK's sroundup_lwork) */
    svd_ctx c = {A, s, u, vt, full, info, (lapack_int)(A->f32 ? (double)qf * (1 + 1e-6) : q) + 1};
    const int st = run_chunks(b, k, svd_chunk, &c);
    return st ? failed(op, "gesdd", st) : true;
}
#else
bool tsl_nat_inv(const char *op, tsl_nat *A, int32_t *info) {
    (void)A, (void)info;
    return tsl_available(op);
}
bool tsl_nat_solve(const char *op, tsl_nat *A, tsl_nat *B, int32_t *info) {
    (void)A, (void)B, (void)info;
    return tsl_available(op);
}
bool tsl_nat_cholesky(const char *op, tsl_nat *A, int32_t *info) {
    (void)A, (void)info;
    return tsl_available(op);
}
bool tsl_nat_svd(const char *op, tsl_nat *A, void *s, void *u, void *vt, bool full, int32_t *info) {
    (void)A, (void)s, (void)u, (void)vt, (void)full, (void)info;
    return tsl_available(op);
}
#endif
