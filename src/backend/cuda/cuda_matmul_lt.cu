/* cuda_matmul_lt.cu — linear's GEMMs with cuBLASLt epilogues (decision 0029): matmul_bias, the
 * forward's product with the bias added in the GEMM's epilogue (CUBLASLT_EPILOGUE_BIAS), and
 * matmul_bgrad, the weight gradient's GEMM that also writes the bias gradient, the column sums of
 * the output gradient (CUBLASLT_EPILOGUE_BGRADB), as PyTorch's addmm and linear backward do; and
 * matmul_bias_act (decision 0032), the forward's GEMM with the bias and relu or GELU's tanh form
 * in the epilogue (RELU_BIAS / GELU_BIAS; the AUX forms also write the backward's aux matrix), and
 * matmul_dact_bgrad, the next layer's input-gradient GEMM with the activation's gradient read from
 * that aux and the bias gradient of its result (DRELU_BGRAD / DGELU_BGRAD).
 *
 * cuBLASLt is column-major, so a row-major result R is computed as the column-major R^T:
 *   forward   out [M, N] = a [M, K] @ b [K, N] + bias:  D = out^T (N x M) = b^T a^T, the bias
 *             one entry per row of D (N of them);
 *   backward  dw [N, K] = g^T [N, M] @ x [M, K]:        D = dw^T (K x N) = x^T g, the bias
 *             gradient one entry per column of D, summed over the GEMM's k (M): B's, BGRADB.
 *   dact      dz [M, N1] = (g [M, N2] @ w [N2, N1]) act'(z): D = dz^T (N1 x M) = w^T g^T, laid
 *             out as the forward's D = z^T, so the aux reads as written; db one entry per row of
 *             D (N1 of them), the sum over its columns.
 * An operand stored row-major is read as its transpose with no copy; one stored column-major gets
 * CUBLAS_OP_T. f32 (TF32 where the user allowed it), f16 and bf16 (f32 accumulation and scale)
 * and f64. The algorithm comes from cuBLASLt's heuristic, cached per shape, layout, dtype and
 * alignment (a bounded table); the workspace from the caching allocator; the handle from a
 * per-device pool. Where the views are not plain (an operand neither row- nor column-major, an
 * output or bias not packed) or the heuristic has no algorithm, matmul_bias falls back to the
 * output filled with the bias and cuBLAS's GEMM accumulating onto it (beta 1), and matmul_bgrad
 * declines (the front end composes mm and sum). */
#include <pthread.h>

#include "backend/cuda/cuda_compute.h"
#include "backend/cuda/cuda_compute_blas.h"

/* after kernel_math.h: cuda_fp16.h's global `half` would shadow a local of that name there */
#include <cublasLt.h>

namespace {

/* ------------------------------------------------------------------ handles */
#define LT_POOL 8 /* idle handles kept per device */

pthread_mutex_t g_lt_lock = PTHREAD_MUTEX_INITIALIZER;
cublasLtHandle_t g_lt_idle[TSC_MAX_DEVICES][LT_POOL];
int g_lt_nidle[TSC_MAX_DEVICES];

bool lt_ok(cublasStatus_t s, const char *what, int index) {
    if (s == CUBLAS_STATUS_SUCCESS) return true;
    tsi_error_set(TS_ERR_CUDA, "%s: cuBLASLt: %s (cuda:%d)", what, cublasGetStatusString(s), index);
    return false;
}

/* a handle made on the current device (made current by the caller) */
cublasLtHandle_t lt_acquire(int index, const char *what) {
    cublasLtHandle_t h = NULL;
    if (index >= 0 && index < TSC_MAX_DEVICES) {
        pthread_mutex_lock(&g_lt_lock);
        if (g_lt_nidle[index] > 0) h = g_lt_idle[index][--g_lt_nidle[index]];
        pthread_mutex_unlock(&g_lt_lock);
    }
    if (!h && !lt_ok(cublasLtCreate(&h), what, index)) return NULL;
    return h;
}

void lt_release(int index, cublasLtHandle_t h) {
    if (index >= 0 && index < TSC_MAX_DEVICES) {
        pthread_mutex_lock(&g_lt_lock);
        const bool kept = g_lt_nidle[index] < LT_POOL;
        if (kept) g_lt_idle[index][g_lt_nidle[index]++] = h;
        pthread_mutex_unlock(&g_lt_lock);
        if (kept) return;
    }
    cublasLtDestroy(h);
}

/* ------------------------------------------------------------------ one GEMM */
/* D (m x n, column-major, ld ldd) = op(A) (m x k) @ op(B) (k x n), with the epilogue. A and B as
 * stored: rows x cols column-major with their ld (op T: the stored matrix is the transpose). */
struct lt_operand {
    const void *data;
    bool trans;
    uint64_t rows, cols;
    int64_t ld;
};

/* An operand whose op() is rows x cols: stored as that (column-major), or transposed (trans) */
lt_operand lt_op(const void *data, bool trans, uint64_t rows, uint64_t cols, int64_t ld) {
    return lt_operand{data, trans, trans ? cols : rows, trans ? rows : cols, ld};
}

struct lt_gemm {
    ts_dtype dt;
    cublasLtEpilogue_t epi;
    uint64_t m, n, k;
    lt_operand a, b;
    void *d;
    int64_t ldd;
    void *bias; /* the bias (read) or the bias gradient (written) */
    void *aux;  /* NULL, or the activation epilogues' aux matrix (ts_epi_aux), ld aux_ld */
    int64_t aux_ld;
};

/* The heuristic's answer for one configuration (found = false: it has none). */
struct lt_key {
    int device, dt, epi, ta, tb, tf32, align;
    uint64_t m, n, k;
    int64_t lda, ldb, ldd, aux_ld;
};
struct lt_entry {
    lt_key key;
    bool used, found;
    cublasLtMatmulAlgo_t algo;
    size_t workspace;
};

#define LT_CACHE 128 /* configurations remembered (round-robin replacement past that) */
pthread_mutex_t g_cache_lock = PTHREAD_MUTEX_INITIALIZER;
lt_entry g_cache[LT_CACHE];
int g_cache_next;

bool key_eq(const lt_key &x, const lt_key &y) {
    return x.device == y.device && x.dt == y.dt && x.epi == y.epi && x.ta == y.ta && x.tb == y.tb &&
           x.tf32 == y.tf32 && x.align == y.align && x.m == y.m && x.n == y.n && x.k == y.k &&
           x.lda == y.lda && x.ldb == y.ldb && x.ldd == y.ldd && x.aux_ld == y.aux_ld;
}

bool cache_find(const lt_key &key, lt_entry *out) {
    pthread_mutex_lock(&g_cache_lock);
    bool hit = false;
    for (int i = 0; i < LT_CACHE && !hit; i++)
        if (g_cache[i].used && key_eq(g_cache[i].key, key)) *out = g_cache[i], hit = true;
    pthread_mutex_unlock(&g_cache_lock);
    return hit;
}

void cache_put(const lt_entry &e) {
    pthread_mutex_lock(&g_cache_lock);
    g_cache[g_cache_next] = e;
    g_cache_next = (g_cache_next + 1) % LT_CACHE;
    pthread_mutex_unlock(&g_cache_lock);
}

/* the largest power of two up to 16 dividing every address (cuBLASLt's vector loads) */
int alignment_of(const void *const *p, int n) {
    int a = 16;
    for (int i = 0; i < n; i++)
        while (a > 1 && (uintptr_t)p[i] % (uintptr_t)a) a /= 2;
    return a;
}

/* The descriptors of one GEMM, destroyed together. */
struct lt_descs {
    cublasLtMatmulDesc_t op = NULL;
    cublasLtMatrixLayout_t a = NULL, b = NULL, d = NULL;
    ~lt_descs() {
        if (d) cublasLtMatrixLayoutDestroy(d);
        if (b) cublasLtMatrixLayoutDestroy(b);
        if (a) cublasLtMatrixLayoutDestroy(a);
        if (op) cublasLtMatmulDescDestroy(op);
    }
};

cublasStatus_t make_descs(const lt_gemm &g, bool tf32, lt_descs *ds) {
    const bool dbl = g.dt == TS_F64;
    cublasComputeType_t ct = CUBLAS_COMPUTE_32F;
    if (dbl)
        ct = CUBLAS_COMPUTE_64F;
    else if (g.dt == TS_F32 && tf32)
        ct = CUBLAS_COMPUTE_32F_FAST_TF32;
    const cudaDataType scale = dbl ? CUDA_R_64F : CUDA_R_32F, t = tsc_blas_type(g.dt);
    const cublasOperation_t ta = g.a.trans ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t tb = g.b.trans ? CUBLAS_OP_T : CUBLAS_OP_N;
    const int32_t bias_type = (int32_t)t;
    cublasStatus_t s = cublasLtMatmulDescCreate(&ds->op, ct, scale);
#define LT_TRY(call)                                                                               \
    if (s == CUBLAS_STATUS_SUCCESS) s = (call)
    LT_TRY(cublasLtMatmulDescSetAttribute(ds->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    LT_TRY(cublasLtMatmulDescSetAttribute(ds->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    LT_TRY(cublasLtMatmulDescSetAttribute(ds->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &g.epi,
                                          sizeof g.epi));
    LT_TRY(cublasLtMatmulDescSetAttribute(ds->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &g.bias,
                                          sizeof g.bias));
    LT_TRY(cublasLtMatmulDescSetAttribute(ds->op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type,
                                          sizeof bias_type));
    if (g.aux) { /* the aux matrix of the output's type (GELU) or a bit mask (RELU) */
        LT_TRY(cublasLtMatmulDescSetAttribute(ds->op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER,
                                              &g.aux, sizeof g.aux));
        LT_TRY(cublasLtMatmulDescSetAttribute(ds->op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD,
                                              &g.aux_ld, sizeof g.aux_ld));
    }
    LT_TRY(cublasLtMatrixLayoutCreate(&ds->a, t, g.a.rows, g.a.cols, g.a.ld));
    LT_TRY(cublasLtMatrixLayoutCreate(&ds->b, t, g.b.rows, g.b.cols, g.b.ld));
    LT_TRY(cublasLtMatrixLayoutCreate(&ds->d, t, g.m, g.n, g.ldd));
#undef LT_TRY
    return s;
}

/* Runs the GEMM. Returns 1 when done, 0 when cuBLASLt has no algorithm for it (nothing written,
 * no error recorded), -1 on an error (recorded). */
int lt_run(int index, const char *what, const lt_gemm &g) {
    const bool tf32 = g.dt == TS_F32 && ts_cuda_allow_tf32();
    const void *ptrs[5] = {g.a.data, g.b.data, g.d, g.bias, g.aux};
    const int align = alignment_of(ptrs, g.aux ? 5 : 4);
    const lt_key key = {index, (int)g.dt, (int)g.epi, g.a.trans, g.b.trans, tf32,  align,
                        g.m,   g.n,       g.k,        g.a.ld,    g.b.ld,    g.ldd, g.aux_ld};
    lt_descs ds;
    cublasStatus_t s = make_descs(g, tf32, &ds);
    if (s == CUBLAS_STATUS_NOT_SUPPORTED) return 0;
    if (!lt_ok(s, what, index)) return -1;
    cublasLtHandle_t h = lt_acquire(index, what);
    if (!h) return -1;
    lt_entry e;
    int rc = 1;
    if (!cache_find(key, &e)) {
        e = lt_entry();
        e.key = key, e.used = true;
        const size_t wmax = tsc_blas_workspace_size(index);
        const uint32_t al = (uint32_t)align;
        cublasLtMatmulPreference_t pref = NULL;
        s = cublasLtMatmulPreferenceCreate(&pref);
        if (s == CUBLAS_STATUS_SUCCESS)
            s = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                     &wmax, sizeof wmax);
        const cublasLtMatmulPreferenceAttributes_t aligns[4] = {
            CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
            CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
        for (int i = 0; i < 4 && s == CUBLAS_STATUS_SUCCESS; i++)
            s = cublasLtMatmulPreferenceSetAttribute(pref, aligns[i], &al, sizeof al);
        cublasLtMatmulHeuristicResult_t res = {};
        int found = 0;
        if (s == CUBLAS_STATUS_SUCCESS)
            s = cublasLtMatmulAlgoGetHeuristic(h, ds.op, ds.a, ds.b, ds.d, ds.d, pref, 1, &res,
                                               &found);
        if (pref) cublasLtMatmulPreferenceDestroy(pref);
        if (s == CUBLAS_STATUS_SUCCESS || s == CUBLAS_STATUS_NOT_SUPPORTED) {
            e.found = s == CUBLAS_STATUS_SUCCESS && found > 0;
            if (e.found) e.algo = res.algo, e.workspace = res.workspaceSize;
            cache_put(e);
        } else {
            rc = lt_ok(s, what, index) ? 0 : -1;
        }
    }
    if (rc == 1 && !e.found) rc = 0;
    if (rc == 1) {
        void *ws = e.workspace ? tsc_scratch_alloc(index, e.workspace) : NULL;
        if (e.workspace && !ws) {
            rc = -1;
        } else {
            const float one_f = 1.0f, zero_f = 0.0f;
            const double one_d = 1.0, zero_d = 0.0;
            const bool dbl = g.dt == TS_F64;
            s = cublasLtMatmul(h, ds.op, dbl ? (const void *)&one_d : &one_f, g.a.data, ds.a,
                               g.b.data, ds.b, dbl ? (const void *)&zero_d : &zero_f, g.d, ds.d,
                               g.d, ds.d, &e.algo, ws, e.workspace, tsc_stream(index));
            if (s == CUBLAS_STATUS_NOT_SUPPORTED)
                rc = 0;
            else if (!lt_ok(s, what, index))
                rc = -1;
            if (ws) tsc_scratch_free(index, ws);
        }
    }
    lt_release(index, h);
    return rc;
}

bool lt_dtype(ts_dtype dt) { return dt == TS_F32 || dt == TS_F64 || dt == TS_F16 || dt == TS_BF16; }

/* The composition inside the slot: out filled with the bias rows, then cuBLAS's GEMM onto it. */
bool bias_then_gemm(int index, const ts_kview *out, const ts_kview *a, const ts_kview *b,
                    const ts_kview *bias) {
    const int64_t m = out->shape[1], n = out->shape[2], k = a->shape[2];
    const size_t es = tsc_dtype_size(out->dtype);
    tsc_mat_strides os = {0, out->strides[1], out->strides[2]};
    tsc_mat_strides bs = {0, 0, bias->strides[bias->ndim - 1]};
    if (!tsc_mat_copy(index, "linear", es, out->data, os, bias->data, bs, 1, m, n)) return false;
    tsc_mat ma = {a->data, {0, a->strides[1], a->strides[2]}};
    tsc_mat mb = {b->data, {0, b->strides[1], b->strides[2]}};
    tsc_mat mc = {out->data, os};
    return tsc_gemm(index, "linear", out->dtype, out->dtype, 1, m, n, k, ma, mb, mc, 1.0);
}

} /* namespace */

namespace {

/* The forward's GEMM, out^T (n x m, column-major) = b^T a^T, with epilogue epi: false where the
 * views are not plain (out row-major, a and b row- or column-major, the bias packed, K >= 1). */
bool forward_gemm(const ts_kview *out, const ts_kview *a, const ts_kview *b, const ts_kview *bias,
                  cublasLtEpilogue_t epi, lt_gemm *g) {
    const int64_t m = out->shape[1], n = out->shape[2], k = a->shape[2];
    int64_t ldd = 0, lda = 0, ldb = 0;
    const int lo = tsc_mat_layout(m, n, out->strides[1], out->strides[2], &ldd);
    const int la = tsc_mat_layout(m, k, a->strides[1], a->strides[2], &lda);
    const int lb = tsc_mat_layout(k, n, b->strides[1], b->strides[2], &ldb);
    const bool packed = n == 1 || bias->strides[bias->ndim - 1] == 1;
    if (k < 1 || !lt_dtype(out->dtype) || lo != TSC_LAYOUT_ROW || la == TSC_LAYOUT_NONE ||
        lb == TSC_LAYOUT_NONE || !packed)
        return false;
    *g = lt_gemm();
    g->dt = out->dtype, g->epi = epi;
    g->m = (uint64_t)n, g->n = (uint64_t)m, g->k = (uint64_t)k;
    /* A = b^T (n x k): b row-major is b^T column-major; b column-major needs OP_T */
    g->a = lt_op(b->data, lb == TSC_LAYOUT_COL, g->m, (uint64_t)k, ldb);
    /* B = a^T (k x m) likewise */
    g->b = lt_op(a->data, la == TSC_LAYOUT_COL, (uint64_t)k, g->n, lda);
    g->d = out->data, g->ldd = ldd, g->bias = bias->data;
    return true;
}

} /* namespace */

void tsc_matmul_bias(const ts_backend *be, int index, const ts_kview *out, const ts_kview *a,
                     const ts_kview *b, const ts_kview *bias) {
    (void)be;
    if (out->shape[1] * out->shape[2] == 0 || !tsc_begin(index)) return;
    lt_gemm g;
    if (forward_gemm(out, a, b, bias, CUBLASLT_EPILOGUE_BIAS, &g)) {
        const int rc = lt_run(index, "linear", g);
        if (rc != 0) return; /* done, or the error recorded */
    }
    (void)bias_then_gemm(index, out, a, b, bias);
}

/* The activation in the GEMM's epilogue (decision 0032): RELU_BIAS / GELU_BIAS, their AUX forms
 * writing the pre-activation (GELU) or the sign mask (RELU) for the backward. cuBLASLt's GELU is
 * the tanh approximation: the front end asks for it only for gelu_tanh. f32 (TF32 as matmul_bias),
 * f16 and bf16; f64, views that are not plain, an aux ld cuBLASLt refuses (RELU: a multiple of
 * 128 bits; GELU: of 8 elements) and shapes without an algorithm are declined (the front end
 * composes). */
bool tsc_matmul_bias_act(const ts_backend *be, int index, ts_epi_act act, const ts_kview *out,
                         const ts_kview *a, const ts_kview *b, const ts_kview *bias,
                         const ts_epi_aux *aux) {
    (void)be;
    const int64_t n = out->shape[2];
    const bool relu = act == TS_EPI_RELU, with_aux = aux && aux->data;
    if ((!relu && act != TS_EPI_GELU_TANH) || out->dtype == TS_F64 || out->shape[1] * n == 0)
        return false;
    if (with_aux && (aux->ld < n || aux->ld % (relu ? 128 : 8) != 0)) return false;
    const cublasLtEpilogue_t epi =
        relu ? (with_aux ? CUBLASLT_EPILOGUE_RELU_AUX_BIAS : CUBLASLT_EPILOGUE_RELU_BIAS)
             : (with_aux ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_BIAS);
    lt_gemm g;
    if (!forward_gemm(out, a, b, bias, epi, &g)) return false;
    if (with_aux) g.aux = aux->data, g.aux_ld = aux->ld;
    if (!tsc_begin(index)) return true; /* the error recorded */
    return lt_run(index, "linear", g) != 0;
}

bool tsc_matmul_bgrad(const ts_backend *be, int index, const ts_kview *dw, const ts_kview *db,
                      const ts_kview *g, const ts_kview *x) {
    (void)be;
    const int64_t m = g->shape[0], n = g->shape[1], k = x->shape[1];
    if (!lt_dtype(g->dtype) || m * n * k == 0) return false;
    int64_t ldg = 0, ldx = 0;
    const int lg = tsc_mat_layout(m, n, g->strides[0], g->strides[1], &ldg);
    const int lx = tsc_mat_layout(m, k, x->strides[0], x->strides[1], &ldx);
    if (lg == TSC_LAYOUT_NONE || lx == TSC_LAYOUT_NONE) return false;
    if (!tsc_begin(index)) return true; /* the error recorded */
    /* dw^T (k x n, column-major, ld k) = x^T g; the bias gradient over B's columns (BGRADB) */
    lt_gemm p = lt_gemm();
    p.dt = g->dtype, p.epi = CUBLASLT_EPILOGUE_BGRADB;
    p.m = (uint64_t)k, p.n = (uint64_t)n, p.k = (uint64_t)m;
    /* A = x^T (k x m): x row-major is x^T column-major; x column-major needs OP_T */
    p.a = lt_op(x->data, lx == TSC_LAYOUT_COL, p.m, (uint64_t)m, ldx);
    /* B = g (m x n): g column-major as it is; g row-major is g^T column-major, OP_T */
    p.b = lt_op(g->data, lg == TSC_LAYOUT_ROW, (uint64_t)m, p.n, ldg);
    p.d = dw->data, p.ldd = k, p.bias = db->data;
    return lt_run(index, "linear backward", p) != 0;
}

/* The activation's gradient in the input-gradient GEMM's epilogue (decision 0032): DRELU_BGRAD /
 * DGELU_BGRAD read the aux matmul_bias_act's RELU_AUX_BIAS / GELU_AUX_BIAS wrote (the bit mask; the
 * pre-activation) and write db, the sums of dz's columns, as the bias gradient. f32 (TF32 as
 * matmul), f16 and bf16, as the forward; f64, views that are not plain, an aux ld cuBLASLt
 * refuses and shapes without an algorithm are declined (the front end composes). */
bool tsc_matmul_dact_bgrad(const ts_backend *be, int index, ts_epi_act act, const ts_kview *dz,
                           const ts_kview *db, const ts_kview *g, const ts_kview *w,
                           const ts_epi_aux *aux) {
    (void)be;
    const bool relu = act == TS_EPI_RELU;
    if ((!relu && act != TS_EPI_GELU_TANH) || !aux || !aux->data || g->ndim != 2 || w->ndim != 2 ||
        dz->ndim != 2 || db->ndim != 1)
        return false;
    const int64_t m = g->shape[0], n2 = g->shape[1], n1 = w->shape[1];
    if (!lt_dtype(dz->dtype) || dz->dtype == TS_F64 || m * n1 * n2 == 0) return false;
    if (aux->ld < n1 || aux->ld % (relu ? 128 : 8) != 0) return false;
    int64_t ldd = 0, ldg = 0, ldw = 0;
    const int lo = tsc_mat_layout(m, n1, dz->strides[0], dz->strides[1], &ldd);
    const int lg = tsc_mat_layout(m, n2, g->strides[0], g->strides[1], &ldg);
    const int lw = tsc_mat_layout(n2, n1, w->strides[0], w->strides[1], &ldw);
    const bool packed = n1 == 1 || db->strides[0] == 1;
    if (lo != TSC_LAYOUT_ROW || lg == TSC_LAYOUT_NONE || lw == TSC_LAYOUT_NONE || !packed)
        return false;
    if (!tsc_begin(index)) return true; /* the error recorded */
    lt_gemm p = lt_gemm();
    p.dt = dz->dtype;
    p.epi = relu ? CUBLASLT_EPILOGUE_DRELU_BGRAD : CUBLASLT_EPILOGUE_DGELU_BGRAD;
    p.m = (uint64_t)n1, p.n = (uint64_t)m, p.k = (uint64_t)n2;
    /* A = w^T (n1 x n2): w row-major is w^T column-major; w column-major needs OP_T */
    p.a = lt_op(w->data, lw == TSC_LAYOUT_COL, p.m, (uint64_t)n2, ldw);
    /* B = g^T (n2 x m) likewise */
    p.b = lt_op(g->data, lg == TSC_LAYOUT_COL, (uint64_t)n2, p.n, ldg);
    p.d = dz->data, p.ldd = ldd, p.bias = db->data;
    p.aux = aux->data, p.aux_ld = aux->ld;
    return lt_run(index, "linear backward", p) != 0;
}
