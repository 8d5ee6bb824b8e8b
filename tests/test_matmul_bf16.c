/* test_matmul_bf16.c — bfloat16 products on the cpu: oneDNN's bf16 matmul where the CPU multiplies
 * bf16 natively (AVX512-BF16, AMX), the widened float32 kernels elsewhere; both against a float64
 * reference of the same bf16 operands.
 *
 * The bound: bf16 times bf16 is exact in float32 (8 + 8 significant bits), so the only errors are
 * the float32 sums, |s - exact| <= gamma_k * sum_p |a_ip| |b_pj| with gamma_k = k u / (1 - k u),
 * u = 2^-24, whatever the order of summation, and the one rounding of the result to bf16, half a
 * unit in the last of its 8 significant bits: 2^-8 relative. So each element must satisfy
 * |c - exact| <= 2^-8 |exact| + (1 + 2^-8) gamma_k S_ij, S = |A| |B|.
 *
 * Linear with a bias (autocast's linear: one AddmmBackward0 node) adds the bias to the float32
 * sums before that rounding: K + 1 terms, S = |X| |W|^T + |b|. Its gradients are products too
 * (dX = G W over out features, dW = G^T X over rows) and db a column sum (accumulated in double,
 * rounded once).
 *
 * Which path runs is checked too: with native bf16 (the host has it and neither TS_CPU_ISA nor
 * ONEDNN_MAX_CPU_ISA caps it away; tests/CMakeLists.txt runs this test under both caps) every
 * product goes to oneDNN; without, none does. And which ISA oneDNN runs: AMX tiles on a host with
 * AMX-BF16, AVX512-BF16's dot products under ONEDNN_MAX_CPU_ISA=AVX512_CORE_BF16 (the ctest
 * entry _dnnl_avx512_core_bf16), so both kernels are tested on an AMX host. On an AMX host the
 * large products (from matmul_select.c's amx_min_macs) run on Tessera's own AMX kernel
 * (gemm_amx.c), and with TS_AMX_GEMM=all (the ctest entry _amx_all) every native product does, so
 * each case here, edges, strides, batches and the bias included, tests it; under the caps it never
 * runs. */
#define _DEFAULT_SOURCE /* syscall */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__) && defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "backend/cpu/gemm_amx.h"
#include "backend/cpu/matmul_dnnl.h"
#include "backend/cpu/matmul_select.h"
#include "bf16_check.h"
#include "tol_check.h"
#include "ts_test.h"

/* native bf16 products run so far, on either kernel */
static uint64_t native_runs(void) { return tsi_dnnl_matmul_bf16_count() + tsi_amx_gemm_count(); }

static bool amx_all(void) {
    const char *m = getenv("TS_AMX_GEMM");
    return m && !strcmp(m, "all");
}

/* which native kernel the product of `macs` multiply-adds must have taken (after it ran) */
static void check_kernel(uint64_t amx_before, double macs, bool native) {
    const bool amx = tsi_amx_gemm_count() > amx_before;
    if (!native || !tsi_amx_gemm_ready())
        CHECK(!amx);
    else
        CHECK(amx == (amx_all() || macs >= tsi_mm_limits_get()->amx_min_macs));
}
/* On a host with AMX-BF16 whose Linux hands out the tiles' state, with a compiler that has the AMX
 * intrinsics (gemm_amx.c's own condition), the AMX kernel is ready by default: only a cap
 * (TS_CPU_ISA, ONEDNN_MAX_CPU_ISA below the AMX ISAs) or TS_AMX_GEMM=off keeps it out. Without
 * this, a kernel compiled out or never switched on would pass every other check here (the
 * products then go to oneDNN, as on hosts without AMX). */
static void check_amx_ready(const char *cap) {
    bool expect = false;
#if defined(__x86_64__) && defined(__linux__) && defined(__GNUC__) &&                              \
    (__GNUC__ >= 11 || (defined(__clang__) && __clang_major__ >= 12))
    const char *mode = getenv("TS_AMX_GEMM");
    expect = ts_test_host_has_amx_bf16() && !cap && !ts_test_dnnl_below_amx() &&
             !(mode && !strcmp(mode, "off")) && syscall(SYS_arch_prctl, 0x1023, 18) == 0;
#endif
    printf("Tessera's AMX kernel: %s\n", tsi_amx_gemm_ready() ? "ready" : "not ready");
    CHECK_EQ(tsi_amx_gemm_ready(), expect);
}

static ts_tensor *random_bf16(ts_shape s, double scale) {
    return ts_test_random_bf16(s, scale, false);
}

/* t's values as float64, row-major (malloc'ed); *n the count */
static double *values(ts_tensor *t, int64_t *n) {
    *n = t ? ts_numel(t) : 0;
    return ts_test_host_f64(t, *n);
}

/* c = matmul(a, b) of bf16 operands (any views) against the float64 product of the same values */
static void check_product(const char *what, ts_tensor *a, ts_tensor *b, bool native) {
    ts_scope_begin();
    const uint64_t runs = native_runs(), amx = tsi_amx_gemm_count();
    ts_tensor *c = ts_matmul(a, b);
    const uint64_t ran = native_runs() - runs;
    CHECK(c && ts_dtype_of(c) == TS_BF16);
    ts_tensor *a64 = ts_to_dtype(a, TS_F64), *b64 = ts_to_dtype(b, TS_F64);
    ts_tensor *exact = ts_matmul(a64, b64), *mag = ts_matmul(ts_abs(a64), ts_abs(b64));
    const int64_t k = ts_shape_of(a).dims[ts_shape_of(a).ndim - 1];
    const double worst = CHECK_BF16_SUM(what, c, exact, mag, (double)k);
    check_kernel(amx, (double)ts_numel(c) * (double)k, native);
    /* the path: oneDNN for every native bf16 product, never otherwise */
    if (native)
        CHECK(ran >= 1);
    else
        CHECK(ran == 0);
    printf("%-34s k %5lld  worst error %.3f of the bound  %s\n", what, (long long)k, worst,
           tsi_amx_gemm_count() > amx ? "Tessera's AMX kernel"
           : ran                      ? "oneDNN bf16"
                                      : "widened to float32");
    CHECK_OK();
    ts_scope_end();
}

/* y = linear(x, w, b) in bf16 and its three gradients, each against float64 of the same values */
static void check_linear(const char *what, int64_t rows, int64_t in, int64_t out, bool native) {
    ts_scope_begin();
    ts_tensor *x = ts_test_random_bf16(TS_SHAPE(rows, in), 1, true);
    ts_tensor *w = ts_test_random_bf16(TS_SHAPE(out, in), 0.1, true);
    ts_tensor *b = ts_test_random_bf16(TS_SHAPE(out), 4, true);
    ts_tensor *g = ts_test_random_bf16(TS_SHAPE(rows, out), 1, false);
    const uint64_t runs = native_runs(), amx = tsi_amx_gemm_count();
    ts_tensor *y = ts_linear(x, w, b);
    const uint64_t ran = native_runs() - runs;
    check_kernel(amx, (double)rows * (double)in * (double)out, native);
    const bool on_amx = tsi_amx_gemm_count() > amx;
    CHECK(y && ts_dtype_of(y) == TS_BF16);
    CHECK(y && ts_grad_fn_name(y) && !strcmp(ts_grad_fn_name(y), "AddmmBackward0"));
    CHECK(native ? ran == 1 : ran == 0);
    ts_backward_with(y, g);
    CHECK_OK();
    ts_tensor *x64 = ts_to_dtype(x, TS_F64), *w64 = ts_to_dtype(w, TS_F64);
    ts_tensor *b64 = ts_to_dtype(b, TS_F64), *g64 = ts_to_dtype(g, TS_F64);
    char label[160];
    snprintf(label, sizeof label, "%s: output", what);
    double worst = CHECK_BF16_SUM(label, y, ts_add(ts_mm(x64, ts_t(w64)), b64),
                                  ts_add(ts_mm(ts_abs(x64), ts_t(ts_abs(w64))), ts_abs(b64)),
                                  (double)(in + 1));
    snprintf(label, sizeof label, "%s: grad input", what);
    worst = fmax(worst, CHECK_BF16_SUM(label, ts_grad(x), ts_mm(g64, w64),
                                       ts_mm(ts_abs(g64), ts_abs(w64)), (double)out));
    snprintf(label, sizeof label, "%s: grad weight", what);
    worst = fmax(worst, CHECK_BF16_SUM(label, ts_grad(w), ts_mm(ts_t(g64), x64),
                                       ts_mm(ts_t(ts_abs(g64)), ts_abs(x64)), (double)rows));
    snprintf(label, sizeof label, "%s: grad bias", what);
    worst = fmax(worst, CHECK_BF16_SUM(label, ts_grad(b), ts_sum_dim(g64, 0, false),
                                       ts_sum_dim(ts_abs(g64), 0, false), (double)rows));
    printf("%-34s k %5lld  worst error %.3f of the bound  %s\n", what, (long long)in, worst,
           on_amx ? "Tessera's AMX kernel with its bias"
           : ran  ? "oneDNN bf16 with its bias"
                  : "widened to float32");
    ts_scope_end();
}

#ifdef TS_HAVE_DNNL
/* the ISA oneDNN's bf16 kernels must run here, or NULL where the test does not say */
static const char *expected_dnnl_isa(const char *cap) {
    const char *dnnl = getenv("ONEDNN_MAX_CPU_ISA");
    if (cap || !ts_test_host_has_bf16()) return NULL;
    if (dnnl && !strcmp(dnnl, "AVX512_CORE_BF16")) return "avx512_core_bf16";
    if ((!dnnl || !*dnnl || !strcmp(dnnl, "ALL")) && ts_test_host_has_amx_bf16())
        return "avx512_core_amx";
    return NULL;
}
#endif

int main(void) {
    const int gate = ts_test_isa_gate();
    if (gate) return gate;
    ts_scope_begin();
    /* a first product makes the engine (and reads the caps) before the path is asked */
    ts_tensor *warm = ts_matmul(random_bf16(TS_SHAPE(2, 2), 1), random_bf16(TS_SHAPE(2, 2), 1));
    CHECK(warm != NULL);
    const bool native = tsi_dnnl_bf16_native();
    const char *cap = ts_test_bf16_cap(false);
    printf("oneDNN ISA: %s; host bf16: %s; native bf16 products: %s%s%s\n", tsi_dnnl_isa_name(),
           ts_test_host_has_bf16() ? "yes" : "no", native ? "yes" : "no", cap ? ", capped by " : "",
           cap ? cap : "");
    if (cap) CHECK(!native); /* a cap keeps the bf16 instructions out */
#ifdef TS_HAVE_DNNL
    const char *want_isa = expected_dnnl_isa(cap);
    if (want_isa) {
        CHECK(!strcmp(tsi_dnnl_isa_name(), want_isa));
        printf("oneDNN runs %s here, as it should\n", want_isa);
    }
#endif
#ifdef TS_HAVE_DNNL
    if (!cap && ts_test_host_has_bf16()) CHECK(native);
#else
    CHECK(!native);
#endif

    check_amx_ready(cap);

    check_product("square 64", random_bf16(TS_SHAPE(64, 64), 1), random_bf16(TS_SHAPE(64, 64), 1),
                  native);
    check_product("one element", random_bf16(TS_SHAPE(1, 1), 3), random_bf16(TS_SHAPE(1, 1), 3),
                  native);
    check_product("long k (cancellation)", random_bf16(TS_SHAPE(7, 3001), 1),
                  random_bf16(TS_SHAPE(3001, 129), 1), native);
    check_product("linear-like 256x784 @ 784x128", random_bf16(TS_SHAPE(256, 784), 1),
                  random_bf16(TS_SHAPE(784, 128), 0.05), native);
    /* transposed operands: the views' strides, as linear's forward and backward pass them */
    check_product("A^T B", ts_transpose(random_bf16(TS_SHAPE(300, 33), 1), 0, 1),
                  random_bf16(TS_SHAPE(300, 65), 1), native);
    check_product("A B^T", random_bf16(TS_SHAPE(33, 300), 1),
                  ts_transpose(random_bf16(TS_SHAPE(65, 300), 1), 0, 1), native);
    /* every other column: a column stride of 2 */
    check_product("strided columns", random_bf16(TS_SHAPE(20, 50), 1),
                  ts_slice(random_bf16(TS_SHAPE(50, 40), 1), 1, 0, 40, 2), native);
    /* batches, and a matrix broadcast over them (bmm in attention, matmul of [B, m, k] @ [k, n]) */
    check_product("batched 3 x 17x33 @ 33x65", random_bf16(TS_SHAPE(3, 17, 33), 1),
                  random_bf16(TS_SHAPE(3, 33, 65), 1), native);
    check_product("batch-broadcast B", random_bf16(TS_SHAPE(4, 9, 40), 1),
                  random_bf16(TS_SHAPE(40, 11), 1), native);
    check_product("batch-broadcast A", random_bf16(TS_SHAPE(9, 40), 1),
                  random_bf16(TS_SHAPE(4, 40, 11), 1), native);
    check_product("batched, transposed heads",
                  ts_transpose(random_bf16(TS_SHAPE(2, 16, 8), 1), 1, 2),
                  random_bf16(TS_SHAPE(2, 16, 12), 1), native);
    /* a product past amx_min_macs (2^31: the AMX kernel's on an AMX host), rows of A
     * whose packed stride would be a multiple of 4 KiB */
    check_product("large 1024x1024 @ 1024x2048", random_bf16(TS_SHAPE(1024, 1024), 1),
                  random_bf16(TS_SHAPE(1024, 2048), 1), native);
    /* large values: the float32 sums, not bf16 ones (a bf16 accumulator fails this at once) */
    check_product("wide range", random_bf16(TS_SHAPE(8, 512), 1000),
                  random_bf16(TS_SHAPE(512, 8), 0.001), native);

    /* linear with its bias: MLP-, GPT- and classifier-like shapes, one row, a bias larger than
     * the products (the rounding after the sum, not before) */
    check_linear("linear 256x784 -> 1024", 256, 784, 1024, native);
    check_linear("linear 64x256 -> 768", 64, 256, 768, native);
    check_linear("linear 33x17 -> 10", 33, 17, 10, native);
    check_linear("linear one row", 1, 300, 7, native);

    /* the primitive cache: a shape seen before is not built again after another shape ran */
    if (native) {
        ts_tensor *a = random_bf16(TS_SHAPE(24, 40), 1), *b = random_bf16(TS_SHAPE(40, 56), 1);
        ts_tensor *p = random_bf16(TS_SHAPE(5, 7), 1), *q = random_bf16(TS_SHAPE(7, 9), 1);
        CHECK(ts_matmul(a, b) && ts_matmul(p, q));
        const uint64_t built = tsi_dnnl_matmul_builds();
        CHECK(ts_matmul(a, b) && ts_matmul(p, q));
        CHECK_EQ(tsi_dnnl_matmul_builds(), built);
    }
    /* the strided entry takes float32 too (the same cache, keyed on the dtype), and refuses
     * other dtypes without writing */
    {
        const float a[6] = {1, 2, 3, 4, 5, 6}, b[6] = {1, 0, -1, 2, 0.5f, 3};
        const int64_t sa[3] = {0, 3, 1}, sb[3] = {0, 2, 1}, sc[3] = {0, 2, 1};
#ifdef TS_HAVE_DNNL
        float c[4] = {0};
        CHECK(tsi_dnnl_matmul_strided(TS_F32, 1, 2, 2, 3, a, sa, b, sb, c, sc));
        /* [1 2 3; 4 5 6] [1 0; -1 2; 0.5 3] = [0.5 13; 2 28] */
        CHECK(c[0] == 0.5f && c[1] == 13 && c[2] == 2 && c[3] == 28);
#endif
        float d[4] = {7, 7, 7, 7};
        CHECK(!tsi_dnnl_matmul_strided(TS_F64, 1, 2, 2, 3, a, sa, b, sb, d, sc));
        CHECK(!tsi_dnnl_matmul_strided(TS_F16, 1, 2, 2, 3, a, sa, b, sb, d, sc));
        CHECK(d[0] == 7 && d[3] == 7);
    }

    /* k = 0: zeros, through whichever path */
    ts_tensor *z = ts_matmul(random_bf16(TS_SHAPE(3, 0), 1), random_bf16(TS_SHAPE(0, 4), 1));
    int64_t nz;
    double *zv = values(z, &nz);
    CHECK(nz == 12);
    for (int64_t i = 0; i < nz; i++) CHECK(zv[i] == 0);
    free(zv);
    CHECK_OK();
    ts_scope_end();
    return ts_test_finish();
}
