/* gemm_amx.c — bf16 matrix products on AMX tiles.
 *
 * An AMX tile is 16 rows of 64 bytes; tdpbf16ps multiplies a 16 x 32 bf16 tile A by a 32 x 16
 * bf16 tile B (stored as 16 rows of k-pairs: row r holds B[2r][c], B[2r + 1][c] for c = 0..15,
 * "VNNI" order) into a 16 x 16 float32 tile, each product exact and each sum in float32: 16384
 * FLOP an instruction, 3.8 TFLOP/s on one core of the development host against 0.85-0.97 that
 * Debian's oneDNN 2.6 gets from it (bench/results/autocast.md). The kernel keeps a 32 x 32 block
 * of C in four accumulator tiles (0-3) and loads two A tiles (4, 5) and two B tiles (6, 7) per
 * step of 32 along k: four tdpbf16ps for four tile loads.
 *
 * Both operands are packed first into the shared scratch (any strides, any batch layout, zero
 * padding to whole tiles): A as rows of Kp (k rounded up to 32) elements, Mp (m rounded up to 32)
 * of them; B as panels of 16 columns, each a run of Kp / 32 tiles in VNNI order. The packed B of a
 * panel pair is reused down a block of rows (MB), the rows of A across a block of columns (NB):
 * the units the threads share. Each 32 x 32 block is stored through a float32 tile buffer, the
 * bias added, and rounded to bf16 once (ts_f32_to_bf16's rounding, 16 lanes at a time).
 * The serial entries (tsi_amx_gemm_serial, tsi_amx_gemm_serial_packed: attention's products, one
 * per thread) run the same loop in the calling thread on the caller's workspace, with a float32
 * C as well, A read in place where its rows are whole tiles, and B packed once for several
 * products (tsi_amx_pack_b). */
#define _DEFAULT_SOURCE /* syscall */
#include "backend/cpu/gemm_amx.h"
#include "backend/cpu/matmul_select.h"
#include "backend/env_config.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_isa.h"
#include "backend/cpu/host_scratch.h"
#include "backend/kernel_math.h"

#ifdef TS_HAVE_OPENMP
#include <omp.h>
#endif

static atomic_uint_fast64_t amx_runs;
uint64_t tsi_amx_gemm_count(void) { return atomic_load(&amx_runs); }

#if defined(__x86_64__) && defined(__linux__) && defined(__GNUC__) &&                              \
    (__GNUC__ >= 11 || (defined(__clang__) && __clang_major__ >= 12))
#define TS_AMX 1
#endif

#ifdef TS_AMX
#include <cpuid.h>
#include <immintrin.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifdef TS_AMX_EMULATED
/* tests/test_gemm_amx.c: the tile instructions in C (tests/support/amx_emulator.h), so that
 * everything else here runs on any host with AVX-512 */
#include "amx_emulator.h"
#define AMX_TARGET "avx512f,avx512bw,avx512dq,avx512vl,avx2,fma"
#else
#define AMX_TARGET "amx-tile,amx-bf16,avx512f,avx512bw,avx512dq,avx512vl,avx2,fma"
#endif
#define MB  256 /* rows of a unit (a multiple of 32) */
#define NB  256 /* columns of a unit (a multiple of 32) */
#define KCB 8   /* k tiles (of 32) summed before a block's sums wait in memory */

/* ------------------------------------------------------------------ may it run */
static bool ready, take_all;
static pthread_once_t ready_once = PTHREAD_ONCE_INIT;

/* ONEDNN_MAX_CPU_ISA below the AMX ISAs caps every AMX path, this one too */
static bool dnnl_cap_below_amx(void) {
    const char *cap = tsi_env(TSI_ENV_ONEDNN_MAX_CPU_ISA);
    return cap && !strstr(cap, "AMX") && strcmp(cap, "ALL") != 0;
}

/* The CPU has AMX-BF16 and Linux hands this process the tiles' 8 KiB of state: asked for with
 * ARCH_REQ_XCOMP_PERM (0x1023) for XFEATURE_XTILEDATA (18), once for every thread of the process;
 * oneDNN asks the same way. */
static bool tiles_granted(void) {
#ifdef TS_AMX_EMULATED
    return true;
#else
    /* CPUID leaf 7: EDX bit 24 AMX-TILE, bit 22 AMX-BF16 (clang 14's __builtin_cpu_supports
     * does not know the AMX names) */
    unsigned eax, ebx, ecx, edx;
    if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return false;
    return (edx >> 24 & 1) && (edx >> 22 & 1) && syscall(SYS_arch_prctl, 0x1023, 18) == 0;
#endif
}

/* On by default for the large products (matmul_select.c's amx_min_macs): measured on an AMX host
 * against oneDNN 2.6.3's AMX kernel (bench/bench_amx_gemm.c, bench/results/autocast.md), 1.1-1.8x
 * faster there in every layout, and as fast or slower below (small operands, where packing costs
 * more than it saves). TS_AMX_GEMM=off: never; all: every bf16 product (the tests' _amx_all
 * entries); on (or unset): the large ones. */
static void decide(void) {
    if (tsi_env_is(TSI_ENV_AMX_GEMM, "off")) return;
    if (ts_cpu_isa_get() != TS_ISA_AVX512 || dnnl_cap_below_amx()) return;
    take_all = tsi_env_is(TSI_ENV_AMX_GEMM, "all");
    ready = tiles_granted();
}

bool tsi_amx_gemm_ready(void) {
    pthread_once(&ready_once, decide);
    return ready;
}

bool tsi_amx_gemm_takes(double macs) {
    return tsi_amx_gemm_ready() && (take_all || macs >= tsi_mm_limits_get()->amx_min_macs);
}

/* ------------------------------------------------------------------ packing */
typedef struct amx_plan {
    int64_t bsz, m, n, k, Mp, Np, Kp, nkb;
    int64_t lda;       /* packed A's row stride: Kp and a cache line (below) */
    int64_t ldp;       /* packed B's panel stride: Kp * 16, or that of a larger k packed before */
    int64_t nba, nbb;  /* packed batches of A and of B (1: broadcast) */
    uint16_t *ap, *bp; /* [nba][Mp][lda], [nbb][Np / 16][Kp / 32][16][32] */
    float *bias;       /* [Np] or NULL */
    uint16_t *c;       /* bf16 C, or NULL when cf is set */
    float *cf;         /* float32 C (tsi_amx_gemm_serial's c_f32), or NULL */
    int64_t sc[3];
    int64_t units_m, units_n;
} amx_plan;

static int64_t round_up(int64_t x, int64_t to) { return (x + to - 1) / to * to; }

/* rows [r0, r0 + 32) of batch bi of A into their packed rows, zero past m and k. Rows along k
 * (linear's x, attention's q) are copies; a transposed A (a weight gradient's G^T) is read 32
 * rows at a time along its contiguous direction. */
static void pack_a_rows(const amx_plan *p, const uint16_t *a, const int64_t sa[3], int64_t bi,
                        int64_t r0) {
    uint16_t *d = p->ap + (bi * p->Mp + r0) * p->lda;
    const uint16_t *s = a + bi * sa[0];
    const int64_t nr = p->m - r0 < 32 ? (p->m > r0 ? p->m - r0 : 0) : 32;
    if (sa[2] == 1) {
        for (int64_t r = 0; r < nr; r++)
            memcpy(d + r * p->lda, s + (r0 + r) * sa[1], (size_t)p->k * sizeof *d);
    } else {
        for (int64_t kk = 0; kk < p->k; kk++)
            for (int64_t r = 0; r < nr; r++) d[r * p->lda + kk] = s[(r0 + r) * sa[1] + kk * sa[2]];
    }
    for (int64_t r = 0; r < 32; r++) {
        const int64_t from = r < nr ? p->k : 0;
        memset(d + r * p->lda + from, 0, (size_t)(p->lda - from) * sizeof *d);
    }
}

/* panel j (16 columns) of batch bi of B into its tiles: element (kk, 16 j + c) at
 * [kk / 32][(kk % 32) / 2][2 c + kk % 2], zero past k and n. Rows of B along n (an input
 * gradient's W) interleave two rows 16 at a time; columns along k (linear's W^T) are pairs
 * already, moved as 32-bit words. */
__attribute__((target(AMX_TARGET))) static void
pack_b_panel(const amx_plan *p, const uint16_t *b, const int64_t sb[3], int64_t bi, int64_t j) {
    uint16_t *d = p->bp + (bi * (p->Np / 16) + j) * p->Kp * 16;
    const uint16_t *s = b + bi * sb[0];
    const int64_t c0 = j * 16, nc = p->n - c0 < 16 ? (p->n > c0 ? p->n - c0 : 0) : 16;
    const int64_t kpairs = p->k / 2 * 2; /* whole pairs inside k */
    int64_t done = 0;                    /* pairs from 0 written by a fast path */
    if (nc == 16 && sb[2] == 1) {
        for (int64_t kk = 0; kk < kpairs; kk += 2) {
            const __m512i lo =
                _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(s + kk * sb[1] + c0)));
            const __m512i hi = _mm512_cvtepu16_epi32(
                _mm256_loadu_si256((const __m256i *)(s + (kk + 1) * sb[1] + c0)));
            _mm512_storeu_si512(d + (kk / 32) * 512 + ((kk % 32) / 2) * 32,
                                _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16)));
        }
        done = kpairs;
    } else if (nc == 16 && sb[1] == 1) {
        for (int64_t kk = 0; kk < kpairs; kk += 2) {
            uint32_t *row = (uint32_t *)(d + (kk / 32) * 512 + ((kk % 32) / 2) * 32);
            for (int64_t c = 0; c < 16; c++) memcpy(row + c, s + kk + (c0 + c) * sb[2], 4);
        }
        done = kpairs;
    }
    for (int64_t kk = done; kk < p->Kp; kk += 2) {
        uint16_t *row = d + (kk / 32) * 512 + ((kk % 32) / 2) * 32;
        for (int64_t c = 0; c < 16; c++) {
            const bool in = c < nc;
            row[2 * c] = in && kk < p->k ? s[kk * sb[1] + (c0 + c) * sb[2]] : 0;
            row[2 * c + 1] = in && kk + 1 < p->k ? s[(kk + 1) * sb[1] + (c0 + c) * sb[2]] : 0;
        }
    }
}

/* ------------------------------------------------------------------ the kernel */
typedef struct tile_config {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} tile_config;

/* eight tiles of 16 rows x 64 bytes. A constant in static storage: GCC 12 treats ldtilecfg's
 * operand as unread, and dropped the stores that filled a configuration on the stack */
static const tile_config tiles_16x64 = {
    .palette = 1,
    .colsb = {64, 64, 64, 64, 64, 64, 64, 64},
    .rows = {16, 16, 16, 16, 16, 16, 16, 16},
};

__attribute__((target(AMX_TARGET))) static void tiles_configure(void) {
    _tile_loadconfig(&tiles_16x64);
}

__attribute__((target(AMX_TARGET))) static void tiles_release(void) { _tile_release(); }

/* 16 floats rounded to bf16 as ts_f32_to_bf16 rounds (ties to even, NaN kept quiet) */
__attribute__((target(AMX_TARGET))) static inline __m256i round_bf16(__m512 v) {
    const __m512i x = _mm512_castps_si512(v);
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(x, 16), _mm512_set1_epi32(1));
    __m512i r = _mm512_srli_epi32(
        _mm512_add_epi32(x, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff))), 16);
    const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    r = _mm512_mask_or_epi32(r, nan, _mm512_srli_epi32(x, 16), _mm512_set1_epi32(0x40));
    return _mm512_cvtepi32_epi16(r);
}

/* the 32 x 32 float32 block t (+ bias) rounded into C at (i, j), clipped to m x n; or, for a
 * float32 C, stored as it is */
__attribute__((target(AMX_TARGET))) static void store_block(const amx_plan *p, int64_t bi,
                                                            int64_t i, int64_t j, const float *t) {
    const int64_t nr = p->m - i < 32 ? p->m - i : 32, nc = p->n - j < 32 ? p->n - j : 32;
    if (p->cf) {
        float *cf = p->cf + i * p->sc[1] + j * p->sc[2];
        for (int64_t r = 0; r < nr; r++) {
            if (p->sc[2] == 1) {
                memcpy(cf + r * p->sc[1], t + r * 32, (size_t)nc * sizeof *cf);
            } else {
                for (int64_t q = 0; q < nc; q++) cf[r * p->sc[1] + q * p->sc[2]] = t[r * 32 + q];
            }
        }
        return;
    }
    uint16_t *c = p->c + bi * p->sc[0] + i * p->sc[1] + j * p->sc[2];
    for (int64_t r = 0; r < nr; r++) {
        const float *tr = t + r * 32;
        uint16_t *cr = c + r * p->sc[1];
        if (nc == 32 && p->sc[2] == 1) {
            __m512 lo = _mm512_loadu_ps(tr), hi = _mm512_loadu_ps(tr + 16);
            if (p->bias) {
                lo = _mm512_add_ps(lo, _mm512_loadu_ps(p->bias + j));
                hi = _mm512_add_ps(hi, _mm512_loadu_ps(p->bias + j + 16));
            }
            _mm256_storeu_si256((__m256i *)cr, round_bf16(lo));
            _mm256_storeu_si256((__m256i *)(cr + 16), round_bf16(hi));
        } else {
            for (int64_t q = 0; q < nc; q++)
                cr[q * p->sc[2]] = ts_f32_to_bf16(tr[q] + (p->bias ? p->bias[j + q] : 0.0f));
        }
    }
}

/* the accumulators of the 32 x 32 block at t (row stride ld floats): zeroed, or loaded */
__attribute__((target(AMX_TARGET))) static inline void acc_begin(const float *t, int64_t ld) {
    if (!t) {
        _tile_zero(0);
        _tile_zero(1);
        _tile_zero(2);
        _tile_zero(3);
        return;
    }
    _tile_loadd(0, t, ld * 4);
    _tile_loadd(1, t + 16, ld * 4);
    _tile_loadd(2, t + 16 * ld, ld * 4);
    _tile_loadd(3, t + 16 * ld + 16, ld * 4);
}

__attribute__((target(AMX_TARGET))) static inline void acc_end(float *t, int64_t ld) {
    _tile_stored(0, t, ld * 4);
    _tile_stored(1, t + 16, ld * 4);
    _tile_stored(2, t + 16 * ld, ld * 4);
    _tile_stored(3, t + 16 * ld + 16, ld * 4);
}

/* rows [i0, i1) x columns [j0, j1) of batch bi (multiples of 32 within Mp x Np). k runs in
 * blocks of KCB tiles (512 elements): within one, a panel pair's 32 KiB of B stays in L1 while
 * the block's rows of A stream from L2; across blocks the sums wait in acc [MB x NB] floats. */
__attribute__((target(AMX_TARGET))) static void unit_run(const amx_plan *p, int64_t bi, int64_t i0,
                                                         int64_t i1, int64_t j0, int64_t j1,
                                                         float *t, float *acc) {
    const uint16_t *A = p->ap + (p->nba > 1 ? bi : 0) * p->Mp * p->lda;
    const uint16_t *B = p->bp + (p->nbb > 1 ? bi : 0) * p->Np * p->Kp;
    const int64_t lda = p->lda * 2, nkb = p->nkb;
    for (int64_t kb0 = 0; kb0 < nkb; kb0 += KCB) {
        const int64_t kb1 = kb0 + KCB < nkb ? kb0 + KCB : nkb;
        const bool first = kb0 == 0, last = kb1 == nkb;
        for (int64_t j = j0; j < j1; j += 32) {
            const uint16_t *b0 = B + (j / 16) * p->ldp, *b1 = b0 + p->ldp;
            for (int64_t i = i0; i < i1; i += 32) {
                const uint16_t *a0 = A + i * p->lda, *a1 = a0 + 16 * p->lda;
                float *ac = acc + (i - i0) * NB + (j - j0);
                acc_begin(first ? NULL : ac, NB);
                for (int64_t kb = kb0; kb < kb1; kb++) {
                    _tile_loadd(6, b0 + kb * 512, 64);
                    _tile_loadd(4, a0 + kb * 32, lda);
                    _tile_loadd(7, b1 + kb * 512, 64);
                    _tile_dpbf16ps(0, 4, 6);
                    _tile_loadd(5, a1 + kb * 32, lda);
                    _tile_dpbf16ps(1, 4, 7);
                    _tile_dpbf16ps(2, 5, 6);
                    _tile_dpbf16ps(3, 5, 7);
                }
                if (last && p->cf && !p->bias && p->sc[2] == 1 && i + 32 <= p->m &&
                    j + 32 <= p->n) {
                    /* a whole block of a float32 C: the tiles straight into it */
                    acc_end(p->cf + i * p->sc[1] + j, p->sc[1]);
                } else if (last) {
                    acc_end(t, 32);
                    store_block(p, bi, i, j, t);
                } else {
                    acc_end(ac, NB);
                }
            }
        }
    }
}

static void unit_of(const amx_plan *p, int64_t u, float *t, float *acc) {
    const int64_t per_batch = p->units_m * p->units_n, bi = u / per_batch, r = u % per_batch;
    const int64_t i0 = (r / p->units_n) * MB, j0 = (r % p->units_n) * NB;
    const int64_t i1 = i0 + MB < p->Mp ? i0 + MB : p->Mp, j1 = j0 + NB < p->Np ? j0 + NB : p->Np;
    unit_run(p, bi, i0, i1, j0, j1, t, acc);
}

static int threads_for(double flops) {
#ifdef TS_HAVE_OPENMP
    return flops < 2e6 ? 1 : omp_get_max_threads();
#else
    (void)flops;
    return 1;
#endif
}

/* the plan's sizes and strides, before any memory */
static amx_plan plan_of(int64_t bsz, int64_t m, int64_t n, int64_t k, const int64_t sa[3],
                        const int64_t sb[3], const int64_t sc[3]) {
    amx_plan p = {.bsz = bsz, .m = m, .n = n, .k = k};
    p.Mp = round_up(m, 32), p.Np = round_up(n, 32), p.Kp = round_up(k, 32), p.nkb = p.Kp / 32;
    /* a tile's 16 rows of A a multiple of 4 KiB apart would share two of L1's 64 sets and evict
     * each other (Kp = 1024, 2048: the tiles loaded at a third of the speed); a line more apart
     * they spread over all of them */
    p.lda = p.Kp + 32;
    p.ldp = p.Kp * 16;
    p.nba = sa[0] ? bsz : 1, p.nbb = sb[0] ? bsz : 1;
    memcpy(p.sc, sc, sizeof p.sc);
    p.units_m = (p.Mp + MB - 1) / MB, p.units_n = (p.Np + NB - 1) / NB;
    return p;
}

static size_t packed_a_bytes(const amx_plan *p) { return (size_t)(p->nba * p->Mp * p->lda) * 2; }
static size_t packed_b_bytes(const amx_plan *p) { return (size_t)(p->nbb * p->Np * p->Kp) * 2; }
/* a 32 x 32 block on its way out, and a unit's sums between k blocks */
static size_t block_bytes(const amx_plan *p) {
    return 32 * 32 * 4 + (p->nkb > KCB ? (size_t)MB * NB * 4 : 0);
}

bool tsi_amx_gemm_bf16(int64_t bsz, int64_t m, int64_t n, int64_t k, const uint16_t *a,
                       const int64_t sa[3], const uint16_t *b, const int64_t sb[3], uint16_t *c,
                       const int64_t sc[3], const uint16_t *bias) {
    if (!tsi_amx_gemm_ready() || bsz < 1 || m < 1 || n < 1 || k < 1) return false;
    amx_plan p = plan_of(bsz, m, n, k, sa, sb, sc);
    p.c = c;
    const int threads = threads_for(2.0 * (double)bsz * (double)m * (double)n * (double)k);
    const size_t abytes = packed_a_bytes(&p), bbytes = packed_b_bytes(&p);
    const size_t per_thread = block_bytes(&p);
    const size_t biasb = bias ? (size_t)p.Np * 4 : 0, tbytes = (size_t)threads * per_thread;
    ts_block *block;
    char *s = tsi_host_scratch_get(abytes + bbytes + biasb + tbytes, &block);
    if (!s) return false;
    p.ap = (uint16_t *)s, p.bp = (uint16_t *)(s + abytes);
    float *tbuf = (float *)(s + abytes + bbytes + biasb);
    if (bias) {
        p.bias = (float *)(s + abytes + bbytes);
        for (int64_t q = 0; q < p.Np; q++) p.bias[q] = q < n ? ts_bf16_to_f32(bias[q]) : 0.0f;
    }
    const int64_t ablocks = p.nba * (p.Mp / 32), bpanels = p.nbb * (p.Np / 16);
    const int64_t units = bsz * p.units_m * p.units_n;
#ifdef TS_HAVE_OPENMP
#pragma omp parallel num_threads(threads) if (threads > 1)
#endif
    {
        int me = 0;
#ifdef TS_HAVE_OPENMP
        me = omp_get_thread_num();
#pragma omp for schedule(static)
#endif
        for (int64_t q = 0; q < ablocks; q++)
            pack_a_rows(&p, a, sa, q / (p.Mp / 32), q % (p.Mp / 32) * 32);
#ifdef TS_HAVE_OPENMP
#pragma omp for schedule(static)
#endif
        for (int64_t q = 0; q < bpanels; q++)
            pack_b_panel(&p, b, sb, q / (p.Np / 16), q % (p.Np / 16));
        tiles_configure();
#ifdef TS_HAVE_OPENMP
#pragma omp for schedule(dynamic, 1)
#endif
        for (int64_t u = 0; u < units; u++) {
            float *mine = (float *)((char *)tbuf + (size_t)me * per_thread);
            unit_of(&p, u, mine, mine + 32 * 32);
        }
        tiles_release();
    }
    tsi_host_scratch_put(block);
    atomic_fetch_add(&amx_runs, 1);
    return true;
}

/* ------------------------------------------------------------------ one product, one thread */
size_t tsi_amx_gemm_serial_bytes(int64_t m, int64_t n, int64_t k) {
    const int64_t s[3] = {0, 0, 0};
    const amx_plan p = plan_of(1, m, n, k, s, s, s);
    return packed_a_bytes(&p) + packed_b_bytes(&p) + block_bytes(&p);
}

size_t tsi_amx_pack_b_bytes(int64_t k, int64_t n) {
    const int64_t s[3] = {0, 0, 0};
    const amx_plan p = plan_of(1, 1, n, k, s, s, s);
    return packed_b_bytes(&p);
}

void tsi_amx_pack_b(int64_t k, int64_t n, const uint16_t *b, const int64_t sb[2], uint16_t *dst) {
    const int64_t sb3[3] = {0, sb[0], sb[1]}, s[3] = {0, 0, 0};
    amx_plan p = plan_of(1, 1, n, k, s, sb3, s);
    p.bp = dst;
    for (int64_t j = 0; j < p.Np / 16; j++) pack_b_panel(&p, b, sb3, 0, j);
}

/* p's A (packed into ws unless the tiles can read it in place) times its packed B, into C */
static void serial_run(amx_plan *p, const uint16_t *a, const int64_t sa3[3], char *ws) {
    /* rows of A along k with whole tiles in both directions: the tiles load them in place */
    const bool a_in_place = sa3[2] == 1 && p->m % 32 == 0 && p->k % 32 == 0 && sa3[1] >= p->k;
    float *t = (float *)(ws + packed_a_bytes(p));
    if (a_in_place) {
        p->ap = (uint16_t *)a, p->lda = sa3[1];
    } else {
        p->ap = (uint16_t *)ws;
        for (int64_t r0 = 0; r0 < p->Mp; r0 += 32) pack_a_rows(p, a, sa3, 0, r0);
    }
    tiles_configure();
    for (int64_t u = 0; u < p->units_m * p->units_n; u++) unit_of(p, u, t, t + 32 * 32);
    tiles_release();
    atomic_fetch_add(&amx_runs, 1);
}

static amx_plan serial_plan(int64_t m, int64_t n, int64_t k, const int64_t sa[2],
                            const int64_t sc[2], void *c, bool c_f32, int64_t sa3[3]) {
    sa3[0] = 0, sa3[1] = sa[0], sa3[2] = sa[1];
    const int64_t sc3[3] = {0, sc[0], sc[1]}, none[3] = {0, 0, 0};
    amx_plan p = plan_of(1, m, n, k, sa3, none, sc3);
    if (c_f32)
        p.cf = (float *)c;
    else
        p.c = (uint16_t *)c;
    return p;
}

bool tsi_amx_gemm_serial(int64_t m, int64_t n, int64_t k, const uint16_t *a, const int64_t sa[2],
                         const uint16_t *b, const int64_t sb[2], void *c, const int64_t sc[2],
                         bool c_f32, void *ws) {
    if (!tsi_amx_gemm_ready() || m < 1 || n < 1 || k < 1) return false;
    int64_t sa3[3];
    const int64_t sb3[3] = {0, sb[0], sb[1]};
    amx_plan p = serial_plan(m, n, k, sa, sc, c, c_f32, sa3);
    p.bp = (uint16_t *)ws;
    for (int64_t j = 0; j < p.Np / 16; j++) pack_b_panel(&p, b, sb3, 0, j);
    serial_run(&p, a, sa3, (char *)ws + packed_b_bytes(&p));
    return true;
}

bool tsi_amx_gemm_serial_packed(int64_t m, int64_t n, int64_t k, const uint16_t *a,
                                const int64_t sa[2], const uint16_t *bp, int64_t kp, void *c,
                                const int64_t sc[2], bool c_f32, void *ws) {
    if (!tsi_amx_gemm_ready() || m < 1 || n < 1 || k < 1 || kp < k) return false;
    int64_t sa3[3];
    amx_plan p = serial_plan(m, n, k, sa, sc, c, c_f32, sa3);
    p.bp = (uint16_t *)bp;
    p.ldp = round_up(kp, 32) * 16;
    serial_run(&p, a, sa3, ws);
    return true;
}

#else /* no AMX intrinsics or not x86-64 Linux */

bool tsi_amx_gemm_ready(void) { return false; }
bool tsi_amx_gemm_takes(double macs) {
    (void)macs;
    return false;
}
bool tsi_amx_gemm_bf16(int64_t bsz, int64_t m, int64_t n, int64_t k, const uint16_t *a,
                       const int64_t sa[3], const uint16_t *b, const int64_t sb[3], uint16_t *c,
                       const int64_t sc[3], const uint16_t *bias) {
    (void)bsz, (void)m, (void)n, (void)k, (void)a, (void)sa, (void)b, (void)sb, (void)c, (void)sc;
    (void)bias;
    return false;
}
size_t tsi_amx_gemm_serial_bytes(int64_t m, int64_t n, int64_t k) {
    (void)m, (void)n, (void)k;
    return 0;
}
bool tsi_amx_gemm_serial(int64_t m, int64_t n, int64_t k, const uint16_t *a, const int64_t sa[2],
                         const uint16_t *b, const int64_t sb[2], void *c, const int64_t sc[2],
                         bool c_f32, void *ws) {
    (void)m, (void)n, (void)k, (void)a, (void)sa, (void)b, (void)sb, (void)c, (void)sc, (void)c_f32;
    (void)ws;
    return false;
}
size_t tsi_amx_pack_b_bytes(int64_t k, int64_t n) {
    (void)k, (void)n;
    return 0;
}
void tsi_amx_pack_b(int64_t k, int64_t n, const uint16_t *b, const int64_t sb[2], uint16_t *dst) {
    (void)k, (void)n, (void)b, (void)sb, (void)dst;
}
bool tsi_amx_gemm_serial_packed(int64_t m, int64_t n, int64_t k, const uint16_t *a,
                                const int64_t sa[2], const uint16_t *bp, int64_t kp, void *c,
                                const int64_t sc[2], bool c_f32, void *ws) {
    (void)m, (void)n, (void)k, (void)a, (void)sa, (void)bp, (void)kp, (void)c, (void)sc;
    (void)c_f32, (void)ws;
    return false;
}

#endif
