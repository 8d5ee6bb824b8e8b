/* test_cuda_quant_emulated.c — the CUDA quantization kernels (src/backend/cuda/cuda_quant.cu) run
 * on the host under TSC_HOST_EMULATION (tests/support/cuda_emulation_quant.cu) against the CPU
 * backend's quant, qlinear and wo_linear slots, bit for bit, so their logic is checked in CI
 * without a GPU: quantize into qint8 / quint8 / qint32 / quint4x2 (nibble packing), dequantize,
 * int_repr and fake quantize (y and the mask) per tensor, per channel on the first, a middle and
 * the last axis, and per group; inputs with ties (x / scale exactly k + 0.5), saturation, +-inf,
 * NaN, -0, denormals, zero points across the range (and, for fake quantize, outside [qmin, qmax]).
 * The int8 linear layer in every epilogue (float32 fmul / fadd, int32 accumulators, double
 * fscale / fbias, requantized uint8 / int8 with and without a relu clamp), signed and unsigned
 * activations, contiguous and strided [K, N] weights (with the uint8 flip), with and without bias,
 * K not a multiple of 4, K = 0, and a thread's 4 outputs straddling N. The weight-only int8 / int4
 * layer against the CPU's portable loop (its AVX-512 loop sums in another order; the kernel follows
 * the portable one). The CPU side runs at every vector ISA the host has (the quant and int8
 * kernels must give the same bits at each).
 *
 * Under emulation the int8 GEMM is always the dp4a kernel: cuBLASLt's path, the device's rounding
 * intrinsics and real concurrency are checked only on a GPU (tests/test_cuda_quant.c). Skips in a
 * build without CUDA (no nvcc: the emulation is not compiled). */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/cpu/cpu_isa.h"
#include "ts_test.h"

#ifdef TS_TEST_CUDA_EMULATION /* set for this program when CUDA is on (tests/CMakeLists.txt) */
/* the cpu backend with cuda_quant.cu's slots emulated (support/cuda_emulation_quant.cu) */
const ts_backend *bc_cuda_emulation_quant(void);
#else
static const ts_backend *bc_cuda_emulation_quant(void) { return NULL; }
#endif

static uint64_t rng = 12345;
static uint32_t next_u32(void) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(rng >> 33);
}
static float uniform(float lo, float hi) {
    return lo + (hi - lo) * (float)(next_u32() >> 8) / 16777216.0f;
}

static const ts_backend *cpu, *emu;
static const char *isa_name;

/* the two outputs byte for byte; the first difference reported */
static void same_bytes(const char *what, const void *want, const void *got, size_t n) {
    const unsigned char *a = want, *b = got;
    size_t i = 0;
    while (i < n && a[i] == b[i]) i++;
    ts_test_record(i == n);
    if (i < n)
        ts_test_failf(__FILE__, __LINE__,
                      "%s (cpu isa %s): byte %zu of %zu: cpu 0x%02x, emulated 0x%02x", what,
                      isa_name, i, n, a[i], b[i]);
}

/* two output buffers filled with different garbage, so a byte the kernel never writes differs */
static void *garbage(size_t n, unsigned char fill) {
    unsigned char *p = malloc(n ? n : 1);
    memset(p, fill, n ? n : 1);
    return p;
}

/* ------------------------------------------------------------ quantize / dequantize / fake */
enum { S_TENSOR, S_CH_FIRST, S_CH_MIDDLE, S_CH_LAST, S_GROUP, S_COUNT };
static const char *const scheme_name[S_COUNT] = {"per tensor", "per channel (axis 0)",
                                                 "per channel (axis 1)", "per channel (last axis)",
                                                 "per group"};

static void quant_case(ts_quant_kind kind, ts_dtype dt, int scheme, int variant) {
    int64_t outer = 3, ch = 5, inner = 8; /* [3, 5, 8]: the middle axis, or 3 rows of 5 groups */
    if (scheme == S_TENSOR) outer = 1, ch = 1, inner = 120;
    if (scheme == S_CH_FIRST) outer = 1, ch = 5, inner = 24;
    if (scheme == S_CH_LAST) outer = 24, ch = 5, inner = 1;
    const bool grouped = scheme == S_GROUP, per_tensor = scheme == S_TENSOR;
    const int64_t n = outer * ch * inner, np = grouped ? outer * ch : ch;
    int64_t lo, hi;
    if (kind == TS_QK_FAKE) /* fake quantize: any [qmin, qmax] (the quantized dtype unused) */
        lo = dt == TS_QINT8 ? -128 : 0, hi = dt == TS_QINT8 ? 127 : dt == TS_QUINT4X2 ? 15 : 255;
    else if (dt == TS_QINT8)
        lo = -128, hi = 127;
    else if (dt == TS_QUINT8)
        lo = 0, hi = 255;
    else if (dt == TS_QINT32)
        lo = INT32_MIN, hi = INT32_MAX;
    else
        lo = 0, hi = 15;
    double *sc = malloc((size_t)np * sizeof *sc);
    int64_t *zp = malloc((size_t)np * sizeof *zp);
    for (int64_t i = 0; i < np; i++) {
        /* 0.25: x / scale exact, so the (k + 0.5) * 0.25 inputs are ties; 0.037 k: inexact */
        sc[i] = (i + variant) % 2 ? 0.25 : 0.037 * (double)(i + 1);
        const int64_t zl = dt == TS_QINT32 ? -1000 : lo, zh = dt == TS_QINT32 ? 1000 : hi;
        zp[i] = zl + (int64_t)(next_u32() % (uint32_t)(zh - zl + 1));
        if (i == 0 && variant == 1)
            zp[i] = kind == TS_QK_FAKE ? hi + 3 : zl; /* out of range / lo */
    }
    float *x = malloc((size_t)n * sizeof *x);
    for (int64_t i = 0; i < n; i++)
        x[i] =
            i % 3 == 1 ? ((float)((int)(next_u32() % 81) - 40) + 0.5f) * 0.25f : uniform(-50, 50);
    static const float special[] = {INFINITY, -INFINITY, NAN, -0.0f, 1e30f, -1e30f, 1e-40f, 3e9f};
    for (int64_t i = 0; i < 8; i++) x[(i * 5 + 2 + variant * 7) % n] = special[i];
    const size_t qb = dt == TS_QINT32     ? (size_t)n * 4
                      : dt == TS_QUINT4X2 ? (size_t)n / 2
                                          : (size_t)n;
    unsigned char *q = malloc(qb); /* dequantize / int_repr's input: every bit pattern */
    for (size_t i = 0; i < qb; i++) q[i] = (unsigned char)next_u32();
    ts_quant_args a = {0};
    a.kind = kind, a.qdtype = kind == TS_QK_FAKE ? TS_QINT32 : dt;
    a.outer = outer, a.channels = ch, a.inner = inner, a.grouped = grouped;
    a.per_tensor = per_tensor, a.scales = sc, a.zero_points = zp, a.qmin = lo, a.qmax = hi;
    ts_quant_args b = a;
    static const char *const kinds[] = {"quantize", "dequantize", "int_repr", "fake_quantize"};
    char what[160];
    snprintf(what, sizeof what, "%s %s %s (variant %d)", kinds[kind], ts_dtype_name(dt),
             scheme_name[scheme], variant);
    void *o1 = NULL, *o2 = NULL, *m1 = NULL, *m2 = NULL;
    size_t ob = 0;
    if (kind == TS_QK_QUANTIZE) {
        ob = qb, o1 = garbage(ob, 0xA5), o2 = garbage(ob, 0x5A);
        a.x = x, a.q = o1, b.x = x, b.q = o2;
    } else if (kind == TS_QK_DEQUANTIZE) {
        ob = (size_t)n * 4, o1 = garbage(ob, 0xA5), o2 = garbage(ob, 0x5A);
        a.q = q, a.x = o1, b.q = q, b.x = o2;
    } else if (kind == TS_QK_INT_REPR) {
        ob = (size_t)n, o1 = garbage(ob, 0xA5), o2 = garbage(ob, 0x5A);
        a.q = q, a.u = o1, b.q = q, b.u = o2;
    } else {
        ob = (size_t)n * 4, o1 = garbage(ob, 0xA5), o2 = garbage(ob, 0x5A);
        m1 = garbage((size_t)n, 0xA5), m2 = garbage((size_t)n, 0x5A);
        a.x = x, a.y = o1, a.u = m1, b.x = x, b.y = o2, b.u = m2;
    }
    cpu->quant(cpu, 0, &a);
    emu->quant(emu, 0, &b);
    CHECK_OK();
    same_bytes(what, o1, o2, ob);
    if (m1) {
        char mw[200];
        snprintf(mw, sizeof mw, "%s: the mask", what);
        same_bytes(mw, m1, m2, (size_t)n);
    }
    free(sc), free(zp), free(x), free(q), free(o1), free(o2), free(m1), free(m2);
}

static void quant_cases(void) {
    static const ts_dtype dts[] = {TS_QINT8, TS_QUINT8, TS_QINT32, TS_QUINT4X2};
    for (int d = 0; d < 4; d++)
        for (int kind = 0; kind < 4; kind++) {
            if (kind == TS_QK_INT_REPR && dts[d] != TS_QUINT4X2) continue;
            for (int scheme = 0; scheme < S_COUNT; scheme++)
                for (int variant = 0; variant < 2; variant++)
                    quant_case((ts_quant_kind)kind, dts[d], scheme, variant);
        }
}

/* ------------------------------------------------------------------ the int8 linear layer */
enum { E_FMUL, E_ACC, E_FLOAT, E_QUANT, E_QUANT_RELU, E_QUANT_X86, E_COUNT };
static const char *const epilogue_name[E_COUNT] = {"fmul/fadd", "int32",        "fscale/fbias",
                                                   "requant",   "requant+relu", "x86 requant"};

static void qlinear_case(int64_t M, int64_t K, int64_t N, bool xu, int mode, int layout,
                         bool bias) {
    uint8_t *x = malloc((size_t)(M * K) + 1), *w = malloc((size_t)(N * K) + 1);
    for (int64_t i = 0; i < M * K; i++) x[i] = (uint8_t)next_u32();
    for (int64_t i = 0; i < N * K; i++) w[i] = (uint8_t)next_u32();
    int32_t *wz = malloc((size_t)N * 4), *bs = malloc((size_t)N * 4);
    double *dp = malloc((size_t)N * 8);
    float *fm = malloc((size_t)N * 4), *fa = malloc((size_t)N * 4), *fb = malloc((size_t)N * 4);
    const bool requant = mode == E_QUANT || mode == E_QUANT_RELU || mode == E_QUANT_X86;
    for (int64_t i = 0; i < N; i++) {
        wz[i] = (int32_t)(next_u32() % 9) - 4;
        bs[i] = (int32_t)(next_u32() % 200001) - 100000;
        /* requant: 0.5 and 1 / 32 make acc * mult land on ties */
        dp[i] = requant ? (i % 3 == 0   ? 0.5
                           : i % 3 == 1 ? 0.03125
                                        : uniform(1e-4f, 3e-3f))
                        : uniform(1e-5f, 1e-3f);
        fm[i] = mode == E_QUANT_X86 ? (i % 2 ? 0.0078125f : uniform(1e-5f, 1e-3f))
                                    : uniform(1e-5f, 1e-3f);
        fa[i] = uniform(-3, 3), fb[i] = mode == E_QUANT_X86 ? uniform(-300, 300) : uniform(-3, 3);
    }
    ts_qlinear_args a = {0};
    a.m = M, a.n = N, a.k = K, a.x = x, a.x_unsigned = xu, a.x_zp = xu ? 131 : -7;
    a.w = (const int8_t *)w, a.w_zp = wz, a.bias = bias ? bs : NULL;
    if (layout > 0) /* w as [K, N] read where it lies; layout 2: uint8 bytes (flip 0x80) */
        a.w_strided = true, a.w_sn = 1, a.w_sk = N, a.w_flip = layout == 2 ? 0x80 : 0;
    const size_t ob = requant ? (size_t)(M * N) : (size_t)(M * N) * 4;
    void *o1 = garbage(ob, 0xA5), *o2 = garbage(ob, 0x5A);
    if (mode == E_FMUL) a.fmul = fm, a.fadd = bias ? fa : NULL;
    if (mode == E_ACC) a.out_acc = o1;
    if (mode == E_FLOAT) a.fscale = dp, a.fbias = bias ? fb : NULL;
    if (mode == E_FMUL || mode == E_FLOAT) a.out_f = o1;
    if (mode == E_QUANT_X86) /* float32 bias in accumulator units, multipliers near 1 / 2^k */
        a.bias = NULL, a.fmult = fm, a.acc_fbias = bias ? fb : NULL;
    if (requant) {
        a.mult = dp, a.out_q = o1, a.out_unsigned = xu, a.out_zp = xu ? 100 : -3;
        a.out_min = mode == E_QUANT_RELU ? a.out_zp : xu ? 0 : -128, a.out_max = xu ? 255 : 127;
    }
    ts_qlinear_args b = a;
    if (mode == E_FMUL || mode == E_FLOAT) b.out_f = o2;
    if (mode == E_ACC) b.out_acc = o2;
    if (requant) b.out_q = o2;
    char what[200];
    snprintf(what, sizeof what, "qlinear [%lld x %lld] x [%lld x %lld]^T %s x, %s w, %s%s",
             (long long)M, (long long)K, (long long)N, (long long)K, xu ? "uint8" : "int8",
             layout == 0   ? "contiguous"
             : layout == 1 ? "strided int8"
                           : "strided uint8",
             epilogue_name[mode], bias ? " with bias" : "");
    const bool ok1 = cpu->qlinear(cpu, 0, &a), ok2 = emu->qlinear(emu, 0, &b);
    CHECK(ok1 && ok2);
    CHECK_OK();
    same_bytes(what, o1, o2, ob);
    free(x), free(w), free(wz), free(bs), free(dp), free(fm), free(fa), free(fb), free(o1),
        free(o2);
}

static void qlinear_cases(void) {
    /* K not a multiple of 4 (7, 130, 1), K = 0, N not a multiple of 4, long K (4096), M = 1 */
    static const int64_t shapes[][3] = {{3, 7, 5}, {4, 64, 32},   {1, 1, 1},    {5, 130, 9},
                                        {2, 0, 3}, {17, 300, 70}, {8, 4096, 3}, {1, 33, 6}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int xu = 0; xu < 2; xu++)
            for (int mode = 0; mode < E_COUNT; mode++)
                for (int layout = 0; layout < 3; layout++)
                    for (int bias = 0; bias < 2; bias++)
                        qlinear_case(shapes[s][0], shapes[s][1], shapes[s][2], xu, mode, layout,
                                     bias);
}

/* ------------------------------------------------------------------ the weight-only layer */
static void wo_case(int64_t M, int64_t K, int64_t N, bool int4, int64_t gs, bool bias) {
    float *x = malloc((size_t)(M * K) * 4);
    for (int64_t i = 0; i < M * K; i++) x[i] = uniform(-2, 2);
    const size_t wb = int4 ? (size_t)(N * K / 2) : (size_t)(N * K);
    uint8_t *w = malloc(wb);
    for (size_t i = 0; i < wb; i++) w[i] = (uint8_t)next_u32();
    const int64_t np = int4 ? N * (K / gs) : N;
    float *sc = malloc((size_t)np * 4), *bv = malloc((size_t)N * 4);
    int32_t *zp = malloc((size_t)np * 4);
    for (int64_t i = 0; i < np; i++)
        sc[i] = uniform(0.001f, 0.05f),
        zp[i] = int4 ? (int32_t)(next_u32() % 16) : (int32_t)(next_u32() % 5) - 2;
    for (int64_t i = 0; i < N; i++) bv[i] = uniform(-1, 1);
    float *y1 = garbage((size_t)(M * N) * 4, 0xA5), *y2 = garbage((size_t)(M * N) * 4, 0x5A);
    ts_wo_args a = {0};
    a.m = M, a.n = N, a.k = K, a.int4 = int4, a.group_size = gs, a.x = x, a.w = w, a.scales = sc;
    a.zero_points = zp, a.bias = bias ? bv : NULL, a.y = y1;
    ts_wo_args b = a;
    b.y = y2;
    char what[160];
    snprintf(what, sizeof what, "weight-only %s [%lld x %lld] x [%lld x %lld]^T (group %lld)%s",
             int4 ? "int4" : "int8", (long long)M, (long long)K, (long long)N, (long long)K,
             (long long)gs, bias ? " with bias" : "");
    const bool ok1 = cpu->wo_linear(cpu, 0, &a), ok2 = emu->wo_linear(emu, 0, &b);
    CHECK(ok1 && ok2);
    CHECK_OK();
    same_bytes(what, y1, y2, (size_t)(M * N) * 4);
    free(x), free(w), free(sc), free(zp), free(bv), free(y1), free(y2);
}

static void wo_cases(void) {
    for (int bias = 0; bias < 2; bias++) {
        wo_case(1, 7, 5, false, 0, bias); /* K tail of 3 past the 4 partial sums */
        wo_case(3, 64, 17, false, 0, bias);
        wo_case(4, 130, 6, false, 0, bias);
        wo_case(2, 256, 9, true, 32, bias);
        wo_case(1, 256, 33, true, 128, bias);
        wo_case(3, 192, 4, true, 64, bias);
    }
}

int main(void) {
    ts_tensor *t = ts_zeros(TS_SHAPE(1), (ts_opts){0}); /* the library up */
    ts_release(t);
    cpu = tsi_backend_for(TS_CPU);
    emu = bc_cuda_emulation_quant();
    if (!emu)
        return ts_test_skip("built without CUDA: the host emulation of cuda_quant.cu is absent");
    const ts_cpu_isa best = tsi_cpu_isa_host();
    for (int isa = TS_ISA_GENERIC; isa <= (int)best; isa++) {
        atomic_store(&tsi_cpu_isa_chosen, isa);
        isa_name = tsi_cpu_isa_name((ts_cpu_isa)isa);
        quant_cases();
        qlinear_cases();
        /* the weight-only kernel follows the CPU's portable loop, not its AVX-512 one */
        if (isa != TS_ISA_AVX512) wo_cases();
    }
    atomic_store(&tsi_cpu_isa_chosen, -1);
    printf("cpu isas generic..%s against %s\n", tsi_cpu_isa_name(best), emu->name);
    return ts_test_finish();
}
