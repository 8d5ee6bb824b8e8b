/* gemm_provider.c — which library runs the CPU's large GEMMs, and the calls into it.
 *
 * oneDNN's sgemm picks its JIT kernels from the CPU's feature flags; OpenBLAS picks them from the
 * CPU's family and model, and a release older than the CPU falls back to an older kernel (Debian
 * 12's OpenBLAS 0.3.21 runs AVX2 "Haswell" kernels on AVX-512 Zen 5, half the machine's peak). So
 * f32 goes to oneDNN when it was found at build time (OpenBLAS for the NN products where the
 * kernels in use are AVX2: choose()): its matmul primitive (matmul_dnnl.c, the brgemm kernels) from
 * 2^20 multiply-adds, its sgemm below that; f64 (which oneDNN lacks) to OpenBLAS. */
#include "backend/cpu/gemm_provider.h"

#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_isa.h"
#include "backend/cpu/matmul_dnnl.h"
#include "backend/cpu/matmul_select.h"
#include "backend/env_config.h"

#ifdef TS_HAVE_CBLAS
#include <cblas.h>
#endif
#ifdef TS_HAVE_DNNL
#include <dnnl.h>
#endif

typedef enum { PROV_BLOCKED, PROV_OPENBLAS, PROV_DNNL } provider;

/* The cut-offs below (a tiny product, the primitive's, near peak, thin, A^T B) are
 * matmul_select.c's table, each with its measurement */
#define LIM (tsi_mm_limits_get())

static bool blas_present(void) {
#ifdef TS_HAVE_CBLAS
    return true;
#else
    return false;
#endif
}

static provider f32_provider, f64_provider;
/* prim_all: oneDNN is the f32 provider, its matmul primitive takes every large product.
 * dnnl_assists: OpenBLAS was chosen by default (the AVX2 kernels) with oneDNN built in, which
 * still takes the large products with a transposed operand (primitive) and the thin ones (sgemm).
 */
static bool prim_all, dnnl_assists;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static char f32_name[96], f64_name[96];

static void describe(provider p, char *out, size_t n) {
    switch (p) {
    case PROV_DNNL: {
#ifdef TS_HAVE_DNNL
        const dnnl_version_t *v = dnnl_version();
        snprintf(out, n, "oneDNN %d.%d.%d (%s)", v->major, v->minor, v->patch,
                 tsi_dnnl_effective_isa());
#endif
        break;
    }
    case PROV_OPENBLAS:
#if defined(TS_HAVE_CBLAS) && defined(OPENBLAS_VERSION)
        snprintf(out, n, "%s (%s)", OPENBLAS_VERSION, openblas_get_corename());
#else
        snprintf(out, n, "CBLAS");
#endif
        break;
    default:
        snprintf(out, n, "built-in blocked GEMM");
        break;
    }
}

/* TS_GEMM names the float32 provider; float64 uses OpenBLAS unless TS_GEMM=blocked. Without it,
 * float32 goes to oneDNN, except where the kernels in use are AVX2 (an AVX2 host, or
 * TS_CPU_ISA=avx2): there oneDNN takes twice as long as OpenBLAS on NN products (256 x 1024 x
 * 1024, the input gradient of a 1024-wide layer: 10 ms on one core against 5.4), so OpenBLAS is
 * the provider, and oneDNN keeps the large products with B transposed (a layer's forward: up to
 * 189 GFLOP/s on two Zen 3 cores against OpenBLAS's 157), the weight gradients of a short batch
 * into wide layers (assisted_layout) and the thin ones (docs/ARCHITECTURE.md has the tables). */
static void choose(void) {
    const char *force = tsi_env(TSI_ENV_GEMM);
    const ts_cpu_isa cap = ts_cpu_isa_get();
    provider want = cap == TS_ISA_AVX2 && blas_present() ? PROV_OPENBLAS : PROV_DNNL;
    if (force && *force) {
        if (!strcmp(force, "dnnl") || !strcmp(force, "dnnl-sgemm"))
            want = PROV_DNNL;
        else if (!strcmp(force, "openblas"))
            want = PROV_OPENBLAS;
        else if (!strcmp(force, "blocked"))
            want = PROV_BLOCKED;
        else
            fprintf(
                stderr,
                "tessera: TS_GEMM=%s is not one of dnnl, dnnl-sgemm, openblas, blocked; ignored\n",
                force);
    }
    f32_provider = f64_provider = PROV_BLOCKED;
    if (blas_present() && want != PROV_BLOCKED) f32_provider = f64_provider = PROV_OPENBLAS;
#ifdef TS_HAVE_DNNL
    /* the ISA cap of the library's own kernels applies to oneDNN's JIT too (its convolutions
     * included), whichever provider multiplies */
    const char *dnnl_cap = tsi_env(TSI_ENV_ONEDNN_MAX_CPU_ISA);
    /* uncapped, ONEDNN_MAX_CPU_ISA (oneDNN reads it itself) may still cap oneDNN alone: below
     * AVX512-BF16 or AMX, say, to test the bf16 products' other path on a host that has them */
    if (cap != TS_ISA_AVX512 || !dnnl_cap || !*dnnl_cap)
        dnnl_set_max_cpu_isa(cap == TS_ISA_AVX512 ? dnnl_cpu_isa_all
                             : cap == TS_ISA_AVX2 ? dnnl_cpu_isa_avx2
                                                  : dnnl_cpu_isa_sse41);
    if (want == PROV_DNNL) f32_provider = PROV_DNNL;
    prim_all = f32_provider == PROV_DNNL && !(force && !strcmp(force, "dnnl-sgemm"));
    dnnl_assists = f32_provider == PROV_OPENBLAS && !(force && *force);
#endif
    describe(f32_provider, f32_name, sizeof f32_name);
    describe(f64_provider, f64_name, sizeof f64_name);
}

bool tsi_lib_gemm_present(bool f64) {
    pthread_once(&once, choose);
    return (f64 ? f64_provider : f32_provider) != PROV_BLOCKED;
}

const char *tsi_lib_gemm_name(bool f64) {
    pthread_once(&once, choose);
    return f64 ? f64_name : f32_name;
}

bool tsi_lib_sgemm_near_peak(double macs) {
    pthread_once(&once, choose);
    /* gemm_small's products (NT) have a transposed operand */
    return (prim_all || dnnl_assists) && macs >= LIM->near_peak_macs;
}

/* Where OpenBLAS is the provider (AVX2 kernels), which products with a transposed operand oneDNN
 * 2.x's primitive (gemm:jit there) runs faster: A B^T everywhere (4096 x 1024 x 256 189 / 157
 * GFLOP/s, 1024^3 173-180 / 180, two Zen 3 cores), A^T B over a short reduction into wide rows
 * only (matmul_select.c's tn_prim_* rows). */
static bool assisted_layout(bool ta, bool tb, int64_t n, int64_t k) {
    if (tb) return true;
    return ta && k <= LIM->tn_prim_max_k && n >= LIM->tn_prim_min_n;
}

bool tsi_lib_sgemm_primitive_provider(void) {
    pthread_once(&once, choose);
    /* below AVX-512 (TS_CPU_ISA=generic, a host without AVX2) oneDNN 2.x has no brgemm matmul */
    return prim_all && ts_cpu_isa_get() == TS_ISA_AVX512;
}

/* tsi_lib_sgemm_primitive once choose() has run */
static bool primitive_takes(bool ta, bool tb, int64_t m, int64_t n, int64_t k) {
    const double macs = (double)m * (double)n * (double)k;
    return (prim_all || (dnnl_assists && assisted_layout(ta, tb, n, k))) &&
           macs >= LIM->prim_min_macs;
}

#ifdef TS_HAVE_DNNL
/* Whether oneDNN's sgemm runs a product the primitive does not (choose() has run) */
static bool dnnl_sgemm_takes(int64_t m, int64_t n, int64_t k) {
    /* a oneDNN call costs ~0.3 us more than OpenBLAS's: tiny products stay with the BLAS */
    const bool tiny = (double)m * (double)n * (double)k < LIM->lib_tiny_macs;
    /* a dimension below thin (a 10-class output layer): OpenBLAS's Haswell kernels run these at
     * 33-66 GFLOP/s on two threads, oneDNN's at 69-110 */
    const int64_t least = m < n ? (m < k ? m : k) : (n < k ? n : k);
    const bool thin = dnnl_assists && least < LIM->thin && !tiny;
    return (f32_provider == PROV_DNNL && !(tiny && blas_present())) || thin;
}
#endif

tsi_sgemm_lib tsi_lib_sgemm_route(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float beta) {
    pthread_once(&once, choose);
#ifdef TS_HAVE_DNNL
    if (beta == 0.0f && primitive_takes(ta, tb, m, n, k)) return TSI_SGEMM_PRIMITIVE;
    if (dnnl_sgemm_takes(m, n, k)) return TSI_SGEMM_DNNL;
#endif
    (void)ta, (void)tb, (void)m, (void)n, (void)k, (void)beta;
    return f32_provider == PROV_BLOCKED ? TSI_SGEMM_NONE : TSI_SGEMM_BLAS;
}

bool tsi_lib_sgemm_primitive(bool ta, bool tb, int64_t m, int64_t n, int64_t k) {
    pthread_once(&once, choose);
    return primitive_takes(ta, tb, m, n, k);
}

bool tsi_lib_sgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
                   const float *b, int64_t ldb, float beta, float *c, int64_t ldc) {
    pthread_once(&once, choose);
#ifdef TS_HAVE_DNNL
    if (beta == 0.0f && primitive_takes(ta, tb, m, n, k) &&
        tsi_dnnl_matmul_f32(ta, tb, m, n, k, a, lda, b, ldb, c, ldc))
        return true;
    if (dnnl_sgemm_takes(m, n, k))
        return dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, 1.0f, a, lda, b, ldb, beta, c,
                          ldc) == dnnl_success;
#endif
#ifdef TS_HAVE_CBLAS
    if ((f32_provider == PROV_OPENBLAS || f32_provider == PROV_DNNL) && m <= INT_MAX &&
        n <= INT_MAX && k <= INT_MAX && lda <= INT_MAX && ldb <= INT_MAX && ldc <= INT_MAX) {
        cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                    (int)m, (int)n, (int)k, 1.0f, a, (int)lda, b, (int)ldb, beta, c, (int)ldc);
        return true;
    }
#endif
    (void)ta, (void)tb, (void)m, (void)n, (void)k, (void)a, (void)lda, (void)b, (void)ldb;
    (void)beta, (void)c, (void)ldc;
    return false;
}

bool tsi_lib_dgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const double *a, int64_t lda,
                   const double *b, int64_t ldb, double beta, double *c, int64_t ldc) {
    pthread_once(&once, choose);
#ifdef TS_HAVE_CBLAS
    if (f64_provider == PROV_OPENBLAS && m <= INT_MAX && n <= INT_MAX && k <= INT_MAX &&
        lda <= INT_MAX && ldb <= INT_MAX && ldc <= INT_MAX) {
        cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                    (int)m, (int)n, (int)k, 1.0, a, (int)lda, b, (int)ldb, beta, c, (int)ldc);
        return true;
    }
#endif
    (void)ta, (void)tb, (void)m, (void)n, (void)k, (void)a, (void)lda, (void)b, (void)ldb;
    (void)beta, (void)c, (void)ldc;
    return false;
}
