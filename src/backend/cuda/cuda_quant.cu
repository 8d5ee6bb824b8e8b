/* cuda_quant.cu — the quantization kernels on CUDA (backend.h's quant and qlinear slots,
 * quant_args.h): quantize / dequantize / int_repr per tensor, channel or group, fake quantize (y
 * and the straight-through mask), and the int8 linear layer: an exact int32 GEMM through cuBLASLt's
 * int8 path (CUDA_R_8I operands, CUBLAS_COMPUTE_32I) or a dp4a kernel where cuBLASLt cannot take
 * the shape, then the CPU's epilogue (zero-point corrections, int32 bias, requantization); and
 * the weight-only int8 / int4 layer (wo_linear; float32 activations, the weight unpacked in
 * registers) in kern_qweight_only.c's portable loop order. Int8 dynamic activations (act_int8)
 * are refused (TS_ERR_UNSUPPORTED).
 *
 * Bit for bit the CPU kernels' results (kern_quant.c, kern_qlinear.c; kern_qweight_only.c's
 * portable loop, not its AVX-512 one, which sums in another order) by construction: the same
 * formulas in the same order, every float and double step an `_rn` intrinsic so that nvcc never
 * contracts a multiply and an add into an fma (the CPU builds in ISO C mode: no contraction), rintf
 * / rint for nearbyint (ties to even), conversions rounding to nearest as the CPU's. The integer
 * products are exact on both sides (K <= 65536: int32 partial sums never overflow), so the
 * accumulators equal the CPU's whatever the order of the sums.
 *
 * The GEMM. Signed activations go in as they are; unsigned ones as x - 128 (the byte xor 0x80) with
 * the zero point moved down by 128: the same differences, so the same accumulators. raw[m][n] =
 * sum_k x'[m][k] w[n][k] (int32), xsum[m], wsum[n] the row sums; acc = raw - x_zp' wsum[n] -
 * w_zp[n] xsum[m] + K x_zp' w_zp[n] + bias[n], exact in int64. cuBLASLt is column-major: raw
 * row-major [m, n] is D = W X'^T (n x m, ld n), A = w as stored ([n, k] row-major = k x n
 * column-major, op T), B = x' ([m, k] row-major = k x m column-major, op N): the "TN" form its
 * int8 kernels need, with n and K multiples of 4 (so every leading dimension is) and 16-byte
 * aligned operands (a copy otherwise). Any other shape, or no algorithm from the heuristic: the
 * dp4a kernel, one thread per 4 outputs of a row.
 *
 * Host tables (quant_args.h: scales, zero points, multipliers on the host) are uploaded with
 * tsc_copy_table_h2d; bias / fbias are device tensors. Everything runs on the thread's current
 * stream; scratch comes from the caching allocator (stream-ordered). Not run on a GPU yet:
 * tests/test_cuda_quant.c compares every path with the CPU kernels bit for bit when a GPU is
 * there; tests/test_cuda_quant_emulated.c runs these kernels on the host (TSC_HOST_EMULATION,
 * every int8 GEMM through the dp4a kernel) against the CPU's bit for bit in CI. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_compute.h"
#include "backend/cuda/cuda_compute_blas.h"
#include "backend/cuda/cuda_iter.cuh"
#include "backend/env_config.h"
#include "backend/quant_math.h"

#ifndef TSC_HOST_EMULATION
/* after kernel_math.h: cuda_fp16.h's global `half` would shadow a local of that name there */
#include <cublasLt.h>
#endif

namespace {

/* ------------------------------------------------------------------ rounded arithmetic
 * One IEEE operation each, rounded to nearest even, never fused (quant_math.h's macros; the host
 * side, under emulation, is the host compiler's plain arithmetic). */
TSC_HDI float q_fmul(float a, float b) { return TS_QM_FMUL(a, b); }
TSC_HDI float q_fadd(float a, float b) { return TS_QM_FADD(a, b); }
TSC_HDI double q_dmul(double a, double b) { return TS_QM_DMUL(a, b); }
TSC_HDI double q_dadd(double a, double b) { return TS_QM_DADD(a, b); }

/* ------------------------------------------------------------------ quantize, dequantize, fake */
struct QPlan {
    ts_quant_kind kind;
    ts_dtype qdtype;
    void *q;
    const float *x; /* quantize / fake: read */
    float *xo;      /* dequantize: written */
    uint8_t *u;
    float *y;
    int64_t n, channels, inner; /* n elements */
    bool grouped, per_tensor;
    const double *scales; /* device tables (NULL: one parameter, scale0 / zp0) */
    const int64_t *zps;
    double scale0;
    int64_t zp0;
    int64_t qmin, qmax;
};

TSC_HDI void q_param(const QPlan &P, int64_t e, double *scale, int64_t *zp) {
    if (!P.scales) {
        *scale = P.scale0, *zp = P.zp0;
        return;
    }
    const int64_t r = e / P.inner, p = P.grouped ? r : r % P.channels;
    *scale = P.scales[p], *zp = P.zps[p];
}

TSC_HDI int64_t q_load(const QPlan &P, int64_t e) {
    switch (P.qdtype) {
    case TS_QINT8:
        return ((const int8_t *)P.q)[e];
    case TS_QUINT8:
        return ((const uint8_t *)P.q)[e];
    case TS_QINT32:
        return ((const int32_t *)P.q)[e];
    default: /* TS_QUINT4X2 */
        return (((const uint8_t *)P.q)[e >> 1] >> (4 * (e & 1))) & 15;
    }
}

TSC_HDI int64_t q_quantize_at(const QPlan &P, int64_t e) {
    double scale;
    int64_t zp;
    q_param(P, e, &scale, &zp);
    const float inv = ts_qm_inv(scale), zpf = (float)zp;
    const int64_t nan_to = P.qdtype == TS_QINT32 ? P.qmin : P.qmax;
    if (P.qdtype == TS_QINT8 || P.qdtype == TS_QUINT8)
        return (int32_t)ts_qm_quantize8(P.x[e], inv, zpf, (float)(double)P.qmin,
                                        (float)(double)P.qmax, (float)nan_to);
    return ts_qm_quantize(P.x[e], inv, zpf, (double)P.qmin, (double)P.qmax, nan_to);
}

/* one element (quint4x2 quantize: one byte, two elements) */
TSC_HDI void q_element(const QPlan &P, int64_t e) {
    switch (P.kind) {
    case TS_QK_QUANTIZE:
        switch (P.qdtype) {
        case TS_QINT8:
            ((int8_t *)P.q)[e] = (int8_t)q_quantize_at(P, e);
            return;
        case TS_QUINT8:
            ((uint8_t *)P.q)[e] = (uint8_t)q_quantize_at(P, e);
            return;
        case TS_QINT32:
            ((int32_t *)P.q)[e] = (int32_t)q_quantize_at(P, e);
            return;
        default: { /* e: the byte; its elements 2e and 2e + 1 (numel is even) */
            const uint8_t lo = (uint8_t)q_quantize_at(P, 2 * e);
            const uint8_t hi = (uint8_t)q_quantize_at(P, 2 * e + 1);
            ((uint8_t *)P.q)[e] = (uint8_t)((lo & 0x0F) | (hi << 4));
            return;
        }
        }
    case TS_QK_DEQUANTIZE: {
        double scale;
        int64_t zp;
        q_param(P, e, &scale, &zp);
        P.xo[e] = ts_qm_dequantize(q_load(P, e), zp, scale, P.per_tensor);
        return;
    }
    case TS_QK_INT_REPR:
        P.u[e] = (uint8_t)q_load(P, e);
        return;
    default: { /* TS_QK_FAKE */
        double scale;
        int64_t zp;
        q_param(P, e, &scale, &zp);
        P.y[e] = ts_qm_fake(P.x[e], (float)scale, ts_qm_inv(scale), zp, (double)P.qmin,
                            (double)P.qmax, &P.u[e]);
        return;
    }
    }
}

TSC_KERNEL quant_kernel(QPlan P, int64_t items TSC_THREAD_PARAMS) {
    for (uint64_t i = TSC_TID; i < (uint64_t)items; i += TSC_NTHREADS) q_element(P, (int64_t)i);
}

/* A host table copied to the device (tsc_table_alloc, freed stream-ordered with
 * tsc_scratch_free); NULL with the error recorded. */
void *upload(int index, const void *src, size_t bytes, const char *what) {
    void *d = tsc_table_alloc(index, bytes);
    if (!d) return NULL;
    if (!tsc_copy_table_h2d(index, d, src, bytes, what)) {
        tsc_scratch_free(index, d);
        return NULL;
    }
    return d;
}

const char *quant_name(ts_quant_kind k) {
    return k == TS_QK_QUANTIZE     ? "quantize"
           : k == TS_QK_DEQUANTIZE ? "dequantize"
           : k == TS_QK_INT_REPR   ? "int_repr"
                                   : "fake_quantize";
}

} /* namespace */

void tsc_quant(const ts_backend *be, int index, const ts_quant_args *a) {
    (void)be;
    const char *what = quant_name(a->kind);
    const int64_t n = a->outer * a->channels * a->inner;
    if (n <= 0 || !tsc_set_device(index)) return;
    QPlan P;
    memset(&P, 0, sizeof P);
    P.kind = a->kind, P.qdtype = a->qdtype, P.q = a->q;
    P.x = a->x, P.xo = a->x, P.u = a->u, P.y = a->y;
    P.n = n, P.channels = a->channels, P.inner = a->inner;
    P.grouped = a->grouped, P.per_tensor = a->per_tensor;
    P.qmin = a->qmin, P.qmax = a->qmax;
    const int64_t nparams = a->grouped ? a->outer * a->channels : a->channels;
    void *ds = NULL, *dz = NULL;
    if (nparams == 1) {
        P.scale0 = a->scales[0], P.zp0 = a->zero_points[0];
    } else {
        ds = upload(index, a->scales, (size_t)nparams * sizeof(double), what);
        dz = ds ? upload(index, a->zero_points, (size_t)nparams * sizeof(int64_t), what) : NULL;
        if (!dz) {
            if (ds) tsc_scratch_free(index, ds);
            return;
        }
        P.scales = (const double *)ds, P.zps = (const int64_t *)dz;
    }
    const int64_t items =
        a->kind == TS_QK_QUANTIZE && a->qdtype == TS_QUINT4X2 ? n / 2 : n; /* bytes there */
    TSC_LAUNCH(quant_kernel, tsc_grid_size(index, items, TSC_THREADS), tsc_stream(index), P, items);
    tsc_launch_check(what, index);
    if (ds) tsc_scratch_free(index, ds);
    if (dz) tsc_scratch_free(index, dz);
}

/* ------------------------------------------------------------------ the int8 linear layer */
namespace {

/* what the kernels read of ts_qlinear_args, device pointers only */
struct QLPlan {
    int64_t m, n, k;
    const void *x;
    bool x_unsigned; /* read as x - 128 (x'): the byte xor 0x80 */
    const int8_t *w;
    bool w_strided;
    int64_t w_sn, w_sk;
    uint8_t w_flip;
    int32_t x_zp; /* x' 's: x_zp - 128 for unsigned activations */
    int32_t *raw, *xsum, *wsum;
    int8_t *xcopy, *wcopy; /* non-NULL: x' / w written there contiguous (cuBLASLt's operands) */
    /* the epilogue */
    int mode; /* 0 fmul, 1 out_acc, 2 out_f, 3 out_q, 4 out_q with fmult (PyTorch's x86: fmul
               * holds fmult, fadd acc_fbias); kern_qlinear.c's order of precedence */
    const int32_t *w_zp, *bias;
    const double *dparam; /* mult (3) or fscale (2) */
    const float *fmul, *fadd, *fbias;
    int32_t *out_acc;
    float *out_f;
    void *out_q;
    bool out_unsigned;
    int32_t out_zp, out_min, out_max;
};

TSC_HDI int8_t ql_x(const QLPlan &P, int64_t m, int64_t k) {
    const int64_t i = m * P.k + k;
    return P.x_unsigned ? (int8_t)(((const uint8_t *)P.x)[i] ^ 0x80) : ((const int8_t *)P.x)[i];
}

TSC_HDI int8_t ql_w(const QLPlan &P, int64_t n, int64_t k) {
    if (!P.w_strided) return P.w[n * P.k + k];
    return (int8_t)(((const uint8_t *)P.w)[n * P.w_sn + k * P.w_sk] ^ P.w_flip);
}

/* four signed bytes of a and b, multiplied and added to c (dp4a) */
TSC_HDI int32_t ql_dot4(int32_t a, int32_t b, int32_t c) {
#ifdef __CUDA_ARCH__
    return __dp4a(a, b, c);
#else
    for (int i = 0; i < 4; i++) c += (int32_t)(int8_t)(a >> (8 * i)) * (int8_t)(b >> (8 * i));
    return c;
#endif
}

/* xsum[m] (and x' copied) for rows of x; wsum[n] (and w copied) for rows of w: one thread a row */
TSC_KERNEL ql_xsum_kernel(QLPlan P TSC_THREAD_PARAMS) {
    for (uint64_t r = TSC_TID; r < (uint64_t)P.m; r += TSC_NTHREADS) {
        int32_t s = 0; /* |s| <= 128 * 65536 */
        for (int64_t k = 0; k < P.k; k++) {
            const int8_t v = ql_x(P, (int64_t)r, k);
            s += v;
            if (P.xcopy) P.xcopy[(int64_t)r * P.k + k] = v;
        }
        P.xsum[r] = s;
    }
}

TSC_KERNEL ql_wsum_kernel(QLPlan P TSC_THREAD_PARAMS) {
    for (uint64_t r = TSC_TID; r < (uint64_t)P.n; r += TSC_NTHREADS) {
        int32_t s = 0;
        for (int64_t k = 0; k < P.k; k++) {
            const int8_t v = ql_w(P, (int64_t)r, k);
            s += v;
            if (P.wcopy) P.wcopy[(int64_t)r * P.k + k] = v;
        }
        P.wsum[r] = s;
    }
}

/* the dp4a GEMM: one thread per 4 neighbouring outputs of a row, K four bytes a step (bytes past
 * K as 0), exact in int32 */
TSC_KERNEL ql_dp4a_kernel(QLPlan P TSC_THREAD_PARAMS) {
    const int64_t nq = (P.n + 3) / 4;
    for (uint64_t t = TSC_TID; t < (uint64_t)(P.m * nq); t += TSC_NTHREADS) {
        const int64_t m = (int64_t)t / nq, n0 = ((int64_t)t % nq) * 4;
        const int nn = P.n - n0 < 4 ? (int)(P.n - n0) : 4;
        int32_t acc[4] = {0, 0, 0, 0};
        for (int64_t k0 = 0; k0 < P.k; k0 += 4) {
            const int kk = P.k - k0 < 4 ? (int)(P.k - k0) : 4;
            uint32_t xw = 0;
            for (int i = 0; i < kk; i++) xw |= (uint32_t)(uint8_t)ql_x(P, m, k0 + i) << (8 * i);
            for (int j = 0; j < nn; j++) {
                uint32_t ww = 0;
                for (int i = 0; i < kk; i++)
                    ww |= (uint32_t)(uint8_t)ql_w(P, n0 + j, k0 + i) << (8 * i);
                acc[j] = ql_dot4((int32_t)xw, (int32_t)ww, acc[j]);
            }
        }
        for (int j = 0; j < nn; j++) P.raw[m * P.n + n0 + j] = acc[j];
    }
}

/* kern_qlinear.c's epilogue for one output (m, n) */
TSC_HDI void ql_epilogue_at(const QLPlan &P, int64_t m, int64_t n) {
    const int64_t o = m * P.n + n, wz = P.w_zp[n], xz = P.x_zp;
    /* exact: |terms| < 2^47 */
    const int64_t acc0 =
        (int64_t)P.raw[o] - xz * (int64_t)P.wsum[n] - wz * (int64_t)P.xsum[m] + P.k * xz * wz;
    if (P.mode == 0) { /* the sum wrapped to int32, then (float)acc * fmul [+ fadd], unfused */
        const int32_t acc = (int32_t)(uint32_t)(uint64_t)acc0;
        const float p = q_fmul((float)acc, P.fmul[n]);
        P.out_f[o] = P.fadd ? q_fadd(p, P.fadd[n]) : p;
        return;
    }
    if (P.mode == 4) { /* the sum wrapped to int32, + the float bias, * the multiplier */
        const int32_t v =
            P.out_zp + (int32_t)ts_qm_requant_f32(
                           (int32_t)(uint32_t)(uint64_t)acc0, P.fadd ? P.fadd[n] : 0.0f, P.fmul[n],
                           (float)(P.out_min - P.out_zp), (float)(P.out_max - P.out_zp));
        if (P.out_unsigned)
            ((uint8_t *)P.out_q)[o] = (uint8_t)v;
        else
            ((int8_t *)P.out_q)[o] = (int8_t)v;
        return;
    }
    const int64_t acc = acc0 + (P.bias ? P.bias[n] : 0);
    if (P.mode == 1) {
        P.out_acc[o] = (int32_t)(uint32_t)(uint64_t)acc; /* wraps, as MatMulInteger */
    } else if (P.mode == 2) { /* (float)((double)acc * fscale + fbias) in double */
        P.out_f[o] =
            (float)q_dadd(q_dmul((double)acc, P.dparam[n]), P.fbias ? (double)P.fbias[n] : 0.0);
    } else {
        double v = q_dadd((double)P.out_zp, rint(q_dmul((double)acc, P.dparam[n])));
        v = v < P.out_min ? P.out_min : v > P.out_max ? P.out_max : v;
        if (P.out_unsigned)
            ((uint8_t *)P.out_q)[o] = (uint8_t)v;
        else
            ((int8_t *)P.out_q)[o] = (int8_t)v;
    }
}

TSC_KERNEL ql_epilogue_kernel(QLPlan P TSC_THREAD_PARAMS) {
    for (uint64_t t = TSC_TID; t < (uint64_t)(P.m * P.n); t += TSC_NTHREADS)
        ql_epilogue_at(P, (int64_t)t / P.n, (int64_t)t % P.n);
}

#ifndef TSC_HOST_EMULATION
/* ------------------------------------------------------------------ cuBLASLt's int8 GEMM */
#define QL_POOL 4 /* idle handles kept per device */
pthread_mutex_t g_ql_lock = PTHREAD_MUTEX_INITIALIZER;
cublasLtHandle_t g_ql_idle[TSC_MAX_DEVICES][QL_POOL];
int g_ql_nidle[TSC_MAX_DEVICES];

bool ql_lt_ok(cublasStatus_t s, int index) {
    if (s == CUBLAS_STATUS_SUCCESS) return true;
    tsi_error_set(TS_ERR_CUDA, "quantized_linear: cuBLASLt's int8 GEMM: %s (cuda:%d)",
                  cublasGetStatusString(s), index);
    return false;
}

cublasLtHandle_t ql_acquire(int index) {
    cublasLtHandle_t h = NULL;
    if (index >= 0 && index < TSC_MAX_DEVICES) {
        pthread_mutex_lock(&g_ql_lock);
        if (g_ql_nidle[index] > 0) h = g_ql_idle[index][--g_ql_nidle[index]];
        pthread_mutex_unlock(&g_ql_lock);
    }
    if (!h && !ql_lt_ok(cublasLtCreate(&h), index)) return NULL;
    return h;
}

void ql_release(int index, cublasLtHandle_t h) {
    if (index >= 0 && index < TSC_MAX_DEVICES) {
        pthread_mutex_lock(&g_ql_lock);
        const bool kept = g_ql_nidle[index] < QL_POOL;
        if (kept) g_ql_idle[index][g_ql_nidle[index]++] = h;
        pthread_mutex_unlock(&g_ql_lock);
        if (kept) return;
    }
    cublasLtDestroy(h);
}

/* raw (n x m column-major, ld n) = w^T-as-stored (op T) x'^T: 1 done, 0 no algorithm (nothing
 * written, no error), -1 an error (recorded) */
int ql_lt_gemm(int index, const int8_t *x, const int8_t *w, int32_t *raw, int64_t m, int64_t n,
               int64_t k) {
    cublasLtMatmulDesc_t op = NULL;
    cublasLtMatrixLayout_t la = NULL, lb = NULL, ld = NULL;
    cublasLtMatmulPreference_t pref = NULL;
    const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    cublasStatus_t s = cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32I, CUDA_R_32I);
#define QL_TRY(call)                                                                               \
    if (s == CUBLAS_STATUS_SUCCESS) s = (call)
    QL_TRY(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    QL_TRY(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    QL_TRY(cublasLtMatrixLayoutCreate(&la, CUDA_R_8I, (uint64_t)k, (uint64_t)n, k));
    QL_TRY(cublasLtMatrixLayoutCreate(&lb, CUDA_R_8I, (uint64_t)k, (uint64_t)m, k));
    QL_TRY(cublasLtMatrixLayoutCreate(&ld, CUDA_R_32I, (uint64_t)n, (uint64_t)m, n));
    const size_t wmax = tsc_blas_workspace_size(index);
    QL_TRY(cublasLtMatmulPreferenceCreate(&pref));
    QL_TRY(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                &wmax, sizeof wmax));
#undef QL_TRY
    int rc = 1;
    cublasLtHandle_t h = NULL;
    if (s == CUBLAS_STATUS_NOT_SUPPORTED)
        rc = 0;
    else if (!ql_lt_ok(s, index) || !(h = ql_acquire(index)))
        rc = -1;
    cublasLtMatmulHeuristicResult_t res;
    memset(&res, 0, sizeof res);
    if (rc == 1) {
        int found = 0;
        s = cublasLtMatmulAlgoGetHeuristic(h, op, la, lb, ld, ld, pref, 1, &res, &found);
        /* no algorithm, or a shape or layout the heuristic rejects: the dp4a kernel instead */
        if (s != CUBLAS_STATUS_SUCCESS || found < 1) rc = 0;
    }
    if (rc == 1) {
        void *ws = res.workspaceSize ? tsc_scratch_alloc(index, res.workspaceSize) : NULL;
        if (res.workspaceSize && !ws) {
            rc = -1;
        } else {
            const int32_t one = 1, zero = 0;
            s = cublasLtMatmul(h, op, &one, w, la, x, lb, &zero, raw, ld, raw, ld, &res.algo, ws,
                               res.workspaceSize, tsc_stream(index));
            if (s == CUBLAS_STATUS_NOT_SUPPORTED)
                rc = 0;
            else if (!ql_lt_ok(s, index))
                rc = -1;
            if (ws) tsc_scratch_free(index, ws);
        }
    }
    if (h) ql_release(index, h);
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (ld) cublasLtMatrixLayoutDestroy(ld);
    if (lb) cublasLtMatrixLayoutDestroy(lb);
    if (la) cublasLtMatrixLayoutDestroy(la);
    if (op) cublasLtMatmulDescDestroy(op);
    return rc;
}
#endif /* TSC_HOST_EMULATION */

bool aligned16(const void *p) { return ((uintptr_t)p & 15) == 0; }

} /* namespace */

bool tsc_qlinear(const ts_backend *be, int index, const ts_qlinear_args *a) {
    (void)be;
    const char *what = "quantized_linear";
    const int64_t M = a->m, N = a->n, K = a->k;
    if (M * N == 0) return true;
    if (!tsc_set_device(index)) return false;
    QLPlan P;
    memset(&P, 0, sizeof P);
    P.m = M, P.n = N, P.k = K;
    P.x = a->x, P.x_unsigned = a->x_unsigned;
    P.w = a->w, P.w_strided = a->w_strided, P.w_sn = a->w_sn, P.w_sk = a->w_sk;
    P.w_flip = a->w_flip;
    P.x_zp = a->x_zp - (a->x_unsigned ? 128 : 0);
    P.mode = a->fmul ? 0 : a->out_acc ? 1 : !a->out_q ? 2 : a->fmult ? 4 : 3;
    P.bias = a->bias, P.fbias = a->fbias;
    P.out_acc = a->out_acc, P.out_f = a->out_f, P.out_q = a->out_q;
    P.out_unsigned = a->out_unsigned;
    P.out_zp = a->out_zp, P.out_min = a->out_min, P.out_max = a->out_max;

    /* the host parameters in one table: [double param n][int32 w_zp n][float fmul n][fadd n] */
    const bool fq = P.mode == 4; /* fmult / acc_fbias in the fmul / fadd slots */
    const float *fmul = fq ? a->fmult : a->fmul, *fadd = fq ? a->acc_fbias : a->fadd;
    const size_t nd = P.mode == 2 || P.mode == 3 ? (size_t)N : 0,
                 nf = P.mode == 0 || fq ? (size_t)N : 0;
    const size_t nfa = nf && fadd ? (size_t)N : 0;
    const size_t tbytes = nd * 8 + (size_t)N * 4 + (nf + nfa) * 4;
    char *host = (char *)malloc(tbytes);
    if (!host) {
        tsi_error_set(TS_ERR_OOM, "%s: out of host memory for %zu bytes", what, tbytes);
        return false;
    }
    if (nd) memcpy(host, P.mode == 2 ? a->fscale : a->mult, nd * 8);
    memcpy(host + nd * 8, a->w_zp, (size_t)N * 4);
    if (nf) memcpy(host + nd * 8 + (size_t)N * 4, fmul, nf * 4);
    if (nfa) memcpy(host + nd * 8 + (size_t)N * 4 + nf * 4, fadd, nfa * 4);
    char *table = (char *)upload(index, host, tbytes, what);
    free(host);
    if (!table) return false;
    P.dparam = nd ? (const double *)(void *)table : NULL;
    P.w_zp = (const int32_t *)(void *)(table + nd * 8);
    P.fmul = nf ? (const float *)(void *)(table + nd * 8 + (size_t)N * 4) : NULL;
    P.fadd = nfa ? (const float *)(void *)(table + nd * 8 + (size_t)N * 4 + nf * 4) : NULL;

    /* scratch: raw [M, N], xsum [M], wsum [N] (int32), and cuBLASLt's operand copies */
#ifdef TSC_HOST_EMULATION
    /* cuBLASLt cannot run on the host: under emulation (tests/test_cuda_quant_emulated.c) every
     * shape takes the dp4a kernel, so the cuBLASLt path itself is checked only on a GPU */
    const bool lt = false;
#else
    const bool lt = K >= 4 && K % 4 == 0 && N % 4 == 0;
#endif
    const bool xcp = lt && (a->x_unsigned || !aligned16(a->x));
    const bool wcp = lt && (a->w_strided || !aligned16(a->w));
    const size_t b_raw = ((size_t)(M * N) * 4 + 255) & ~(size_t)255;
    const size_t b_sums = (((size_t)(M + N)) * 4 + 255) & ~(size_t)255;
    const size_t b_x = xcp ? (((size_t)(M * K) + 255) & ~(size_t)255) : 0;
    const size_t b_w = wcp ? (size_t)(N * K) : 0;
    char *scratch = (char *)tsc_scratch_alloc(index, b_raw + b_sums + b_x + b_w);
    if (!scratch) {
        tsc_scratch_free(index, table);
        return false;
    }
    P.raw = (int32_t *)(void *)scratch;
    P.xsum = (int32_t *)(void *)(scratch + b_raw);
    P.wsum = P.xsum + M;
    P.xcopy = xcp ? (int8_t *)(scratch + b_raw + b_sums) : NULL;
    P.wcopy = wcp ? (int8_t *)(scratch + b_raw + b_sums + b_x) : NULL;

    const cudaStream_t st = tsc_stream(index);
    bool ok = true;
    TSC_LAUNCH(ql_xsum_kernel, tsc_grid_size(index, M, TSC_THREADS), st, P);
    ok = tsc_launch_check(what, index);
    if (ok) {
        TSC_LAUNCH(ql_wsum_kernel, tsc_grid_size(index, N, TSC_THREADS), st, P);
        ok = tsc_launch_check(what, index);
    }
    int done = 0; /* 1: raw written by cuBLASLt */
#ifndef TSC_HOST_EMULATION
    if (ok && lt) {
        const int8_t *xs = xcp ? P.xcopy : (const int8_t *)a->x;
        const int8_t *ws = wcp ? P.wcopy : a->w;
        done = ql_lt_gemm(index, xs, ws, P.raw, M, N, K);
        if (done < 0) ok = false;
        /* a test hook: TS_CUDA_QLINEAR_LT=require makes a shape cuBLASLt should take but declines
         * an error, so that a GPU run shows which path ran (tests/test_cuda_quant.c sets it) */
        if (done == 0 && tsi_env_is(TSI_ENV_CUDA_QLINEAR_LT, "require")) {
            tsi_error_set(TS_ERR_UNSUPPORTED,
                          "%s: cuBLASLt has no int8 algorithm for [%lld x %lld] x [%lld x %lld]^T "
                          "(TS_CUDA_QLINEAR_LT=require; cuda:%d)",
                          what, (long long)M, (long long)K, (long long)N, (long long)K, index);
            ok = false;
        }
    }
#endif
    if (ok && done == 0) {
        TSC_LAUNCH(ql_dp4a_kernel, tsc_grid_size(index, M * ((N + 3) / 4), TSC_THREADS), st, P);
        ok = tsc_launch_check(what, index);
    }
    if (ok) {
        TSC_LAUNCH(ql_epilogue_kernel, tsc_grid_size(index, M * N, TSC_THREADS), st, P);
        ok = tsc_launch_check(what, index);
    }
    tsc_scratch_free(index, scratch);
    tsc_scratch_free(index, table);
    return ok;
}

/* ------------------------------------------------------------------ the weight-only layer */
namespace {

/* what the weight-only kernel reads: x, w, bias, y on the device; scales / zero points uploaded */
struct WOPlan {
    int64_t m, n, k, group_size;
    bool int4;
    const float *x;
    const uint8_t *w;
    const float *scales;
    const int32_t *zps;
    const float *bias;
    float *y;
};

/* kern_qweight_only.c's portable dot_i8: four float32 partial sums, each step a product then a
 * sum (no fma), the tail into the first, then (s0 + s1) + (s2 + s3) */
TSC_HDI float wo_dot_i8(const float *x, const int8_t *w, int64_t k, int32_t zp) {
    float s[4] = {0, 0, 0, 0};
    int64_t i = 0;
    for (; i + 4 <= k; i += 4)
        for (int j = 0; j < 4; j++) s[j] = q_fadd(s[j], q_fmul(x[i + j], (float)(w[i + j] - zp)));
    for (; i < k; i++) s[0] = q_fadd(s[0], q_fmul(x[i], (float)(w[i] - zp)));
    return q_fadd(q_fadd(s[0], s[1]), q_fadd(s[2], s[3]));
}

/* its dot_u4: per group two partial sums (low, high nibbles), acc += scale * (s0 + s1) */
TSC_HDI float wo_dot_u4(const WOPlan &P, const float *x, int64_t n) {
    const int64_t K = P.k, gs = P.group_size, groups = K / gs;
    const uint8_t *w = P.w + n * (K / 2);
    float acc = 0;
    for (int64_t g = 0; g < groups; g++) {
        const int32_t zp = P.zps[n * groups + g];
        float s0 = 0, s1 = 0;
        for (int64_t i = g * gs; i < (g + 1) * gs; i += 2) {
            const uint8_t b = w[i / 2];
            s0 = q_fadd(s0, q_fmul(x[i], (float)((int32_t)(b & 15) - zp)));
            s1 = q_fadd(s1, q_fmul(x[i + 1], (float)((int32_t)(b >> 4) - zp)));
        }
        acc = q_fadd(acc, q_fmul(P.scales[n * groups + g], q_fadd(s0, s1)));
    }
    return acc;
}

/* one thread per output (m, n), its row of w read in the portable loop's order */
TSC_KERNEL wo_kernel(WOPlan P TSC_THREAD_PARAMS) {
    for (uint64_t t = TSC_TID; t < (uint64_t)(P.m * P.n); t += TSC_NTHREADS) {
        const int64_t m = (int64_t)t / P.n, n = (int64_t)t % P.n;
        const float *x = P.x + m * P.k;
        const float v = P.int4 ? wo_dot_u4(P, x, n)
                               : q_fmul(P.scales[n],
                                        wo_dot_i8(x, (const int8_t *)P.w + n * P.k, P.k, P.zps[n]));
        P.y[t] = q_fadd(v, P.bias ? P.bias[n] : 0.0f);
    }
}

} /* namespace */

bool tsc_wo_linear(const ts_backend *be, int index, const ts_wo_args *a) {
    (void)be;
    const char *what = "weight_only_linear";
    if (a->act_int8) {
        tsi_error_set(TS_ERR_UNSUPPORTED,
                      "int8_dynamic_activation_linear: no CUDA kernel for int8 dynamic activations "
                      "(cuda:%d); run it on the cpu, or ts_weight_only_linear",
                      index);
        return false;
    }
    if (a->m * a->n == 0) return true;
    if (!tsc_set_device(index)) return false;
    const int64_t np = a->int4 ? a->n * (a->k / a->group_size) : a->n;
    char *table = (char *)tsc_table_alloc(index, (size_t)np * 8);
    if (!table) return false;
    if (!tsc_copy_table_h2d(index, table, a->scales, (size_t)np * 4, what) ||
        !tsc_copy_table_h2d(index, table + (size_t)np * 4, a->zero_points, (size_t)np * 4, what)) {
        tsc_scratch_free(index, table);
        return false;
    }
    WOPlan P;
    memset(&P, 0, sizeof P);
    P.m = a->m, P.n = a->n, P.k = a->k, P.group_size = a->group_size, P.int4 = a->int4;
    P.x = a->x, P.w = a->w, P.bias = a->bias, P.y = a->y;
    P.scales = (const float *)(void *)table;
    P.zps = (const int32_t *)(void *)(table + (size_t)np * 4);
    TSC_LAUNCH(wo_kernel, tsc_grid_size(index, a->m * a->n, TSC_THREADS), tsc_stream(index), P);
    const bool ok = tsc_launch_check(what, index);
    tsc_scratch_free(index, table);
    return ok;
}
