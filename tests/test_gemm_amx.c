/* test_gemm_amx.c — Tessera's AMX bf16 GEMM (src/backend/cpu/gemm_amx.c) on any host with
 * AVX-512: the kernel is compiled here with TS_AMX_EMULATED, which replaces the six tile
 * instructions by tests/support/amx_emulator.h (the SDM's semantics in C, with checks of what the
 * hardware would fault on), so its packing of every operand layout, its blocking over rows, columns
 * and k, its threads, the bias and the rounding to bf16 run here as they run on the tiles. On an
 * AMX host the same cases run once more through the library's kernel on the tiles themselves
 * (and test_matmul_bf16_amx_all sends every product of that test through it).
 *
 * Every element of C against the float64 product of the same bf16 operands, within
 * 2^-8 |exact| + (1 + 2^-8) gamma_K sum |a b| (+ |bias|), K = k + 1: exact products, a float32
 * sum, the bias added in float32, one rounding to bf16. Integer operands whose float32 sums are
 * exact check the rounding bit for bit (ties to even, as ts_f32_to_bf16). Guards around C catch
 * writes outside it; 1 and 2 threads give the same bits.
 *
 * Under a cap (TS_CPU_ISA below avx512, ONEDNN_MAX_CPU_ISA below the AMX ISAs) or TS_AMX_GEMM=off
 * the kernel must decline and write nothing (the ctest entries _avx2, _generic, _dnnl_cap, _off);
 * on, or any other value (the default), takes the large products alone (_on, _default); unset,
 * this program asks for all. */
#include "amx_emulated_names.h"
#include "backend/cpu/gemm_amx.c"
#include "backend/cpu/matmul_select.h"
#include "backend/env_config.h"
#undef tsi_amx_gemm_ready
#undef tsi_amx_gemm_takes
#undef tsi_amx_gemm_bf16
#undef tsi_amx_gemm_count
#undef tsi_amx_gemm_serial
#undef tsi_amx_gemm_serial_bytes
#undef tsi_amx_gemm_serial_packed
#undef tsi_amx_pack_b
#undef tsi_amx_pack_b_bytes
/* the library's kernel itself, on the tiles, where the host has them (gemm_amx.h's declarations
 * were renamed above) */
bool tsi_amx_gemm_ready(void);
bool tsi_amx_gemm_bf16(int64_t bsz, int64_t m, int64_t n, int64_t k, const uint16_t *a,
                       const int64_t sa[3], const uint16_t *b, const int64_t sb[3], uint16_t *c,
                       const int64_t sc[3], const uint16_t *bias);
uint64_t tsi_amx_gemm_count(void);

#include <math.h>
#include <stdio.h>

#include "bf16_check.h"
#include "core/internal.h" /* tsi_init_once: the cpu backend under the host scratch */
#include "ts_test.h"

#ifndef TS_AMX
int main(void) { return ts_test_skip("gemm_amx.c needs x86-64 Linux and GCC 11 or clang 12"); }
#else

#ifdef TS_HAVE_OPENMP
#include <omp.h>
#endif

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static double uniform(void) { /* [-1, 1) */
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (double)(rng >> 11) / 4503599627370496.0 - 1.0;
}

/* one operand: a buffer of `len` elements, all random (the gaps between the elements a layout
 * uses too, so a kernel that reads the wrong ones gets wrong sums) */
static uint16_t *random_buffer(int64_t len, double scale, bool integers) {
    uint16_t *p = malloc((size_t)len * sizeof *p);
    for (int64_t i = 0; i < len; i++) {
        const double v = integers ? floor(uniform() * (scale + 1)) : uniform() * scale;
        p[i] = ts_f32_to_bf16((float)v);
    }
    return p;
}

static double bf(uint16_t h) { return (double)ts_bf16_to_f32(h); }

/* the elements a strided matrix set [bsz][rows][cols] spans, plus one */
static int64_t span(int64_t bsz, int64_t rows, int64_t cols, const int64_t s[3]) {
    return (bsz - 1) * s[0] + (rows - 1) * s[1] + (cols - 1) * s[2] + 1;
}

typedef struct layout {
    const char *what;
    int64_t bsz, m, n, k;
    bool a_t, b_t; /* A stored as [k][m] (column major), B as [n][k] (linear's W^T) */
    bool a_bcast;  /* one A for every batch (stride 0) */
    bool b_bcast;  /* one B for every batch */
    int c_mode;    /* 0: rows of n; 1: rows of n + 7 (a view); 2: transposed (column major) */
    bool bias;
    bool integers; /* small integers: exact float32 sums, the rounding checked bit for bit */
} layout;

#define GUARD 0xdeadu

typedef struct operands {
    int64_t sa[3], sb[3], sc[3], alen, blen, clen;
    uint16_t *a, *b, *c, *bias;
} operands;

static operands make(const layout *L) {
    operands o;
    const int64_t m = L->m, n = L->n, k = L->k;
    if (L->a_t)
        o.sa[1] = 1, o.sa[2] = m + 3;
    else
        o.sa[1] = k + 5, o.sa[2] = 1;
    if (L->b_t)
        o.sb[1] = 1, o.sb[2] = k + 2;
    else
        o.sb[1] = n + 1, o.sb[2] = 1;
    o.sa[0] = L->a_bcast ? 0 : (L->a_t ? k * (m + 3) : m * (k + 5));
    o.sb[0] = L->b_bcast ? 0 : (L->b_t ? n * (k + 2) : k * (n + 1));
    if (L->c_mode == 0)
        o.sc[1] = n, o.sc[2] = 1;
    else if (L->c_mode == 1)
        o.sc[1] = n + 7, o.sc[2] = 1;
    else
        o.sc[1] = 1, o.sc[2] = m;
    o.sc[0] = m * n + (L->c_mode == 1 ? m * 7 : 0) + 3;
    o.alen = span(L->a_bcast ? 1 : L->bsz, m, k, o.sa) + 9;
    o.blen = span(L->b_bcast ? 1 : L->bsz, k, n, o.sb) + 9;
    o.clen = span(L->bsz, m, n, o.sc) + 64; /* 32 guards before C and 32 after */
    const double scale = L->integers ? 8 : 1;
    o.a = random_buffer(o.alen, scale, L->integers);
    o.b = random_buffer(o.blen, scale, L->integers);
    o.bias = L->bias ? random_buffer(n, L->integers ? 64 : 4, L->integers) : NULL;
    o.c = malloc((size_t)o.clen * sizeof *o.c);
    for (int64_t i = 0; i < o.clen; i++) o.c[i] = GUARD;
    return o;
}

static void drop(operands *o) { free(o->a), free(o->b), free(o->c), free(o->bias); }

/* the kernel the products run on: emulated tiles, then (on an AMX host) the real ones */
typedef struct kernel {
    const char *name;
    bool (*gemm)(int64_t, int64_t, int64_t, int64_t, const uint16_t *, const int64_t *,
                 const uint16_t *, const int64_t *, uint16_t *, const int64_t *, const uint16_t *);
    uint64_t (*count)(void);
} kernel;
static const kernel emulated = {"emulated tiles", tsi_amx_emu_gemm_bf16, tsi_amx_emu_gemm_count};
static const kernel tiles = {"AMX tiles", tsi_amx_gemm_bf16, tsi_amx_gemm_count};
static const kernel *kern = &emulated;

static bool run(const layout *L, operands *o) {
    return kern->gemm(L->bsz, L->m, L->n, L->k, o->a, o->sa, o->b, o->sb, o->c + 32, o->sc,
                      o->bias);
}

/* every element against float64 (or bit for bit for integer operands); the guards intact */
static void check(const layout *L, const operands *o) {
    const double u = 1.0 / (1 << 24), K = (double)L->k + 1, gamma = K * u / (1 - K * u);
    double worst = 0;
    int64_t bad = 0, written = 0;
    for (int64_t bi = 0; bi < L->bsz; bi++)
        for (int64_t i = 0; i < L->m; i++)
            for (int64_t j = 0; j < L->n; j++) {
                const uint16_t *a = o->a + (L->a_bcast ? 0 : bi * o->sa[0]) + i * o->sa[1];
                const uint16_t *b = o->b + (L->b_bcast ? 0 : bi * o->sb[0]) + j * o->sb[2];
                double exact = o->bias ? bf(o->bias[j]) : 0, mag = fabs(exact);
                for (int64_t kk = 0; kk < L->k; kk++) {
                    const double p = bf(a[kk * o->sa[2]]) * bf(b[kk * o->sb[1]]);
                    exact += p, mag += fabs(p);
                }
                const uint16_t got = o->c[32 + bi * o->sc[0] + i * o->sc[1] + j * o->sc[2]];
                written++;
                if (L->integers) {
                    if (got != ts_f32_to_bf16((float)exact) && bad++ < 5)
                        ts_test_failf(__FILE__, __LINE__, "%s: C[%lld][%lld][%lld] %#x, want %#x",
                                      L->what, (long long)bi, (long long)i, (long long)j, got,
                                      ts_f32_to_bf16((float)exact));
                    continue;
                }
                const double bound = 0x1p-8 * fabs(exact) + (1 + 0x1p-8) * gamma * mag;
                const double err = fabs(bf(got) - exact);
                if (!(err <= bound) && bad++ < 5)
                    ts_test_failf(__FILE__, __LINE__,
                                  "%s: C[%lld][%lld][%lld] = %.9g, exact %.17g, bound %.3g",
                                  L->what, (long long)bi, (long long)i, (long long)j, bf(got),
                                  exact, bound);
                if (bound > 0) worst = fmax(worst, err / bound);
            }
    ts_test_record(bad == 0);
    /* every element that is not C's still holds its guard */
    int64_t guards = 0;
    for (int64_t q = 0; q < o->clen; q++) guards += o->c[q] == GUARD;
    int64_t c_elements = 0;
    for (int64_t q = 32; q < o->clen - 32; q++) {
        const int64_t bi = (q - 32) / o->sc[0], r = (q - 32) % o->sc[0];
        int64_t i, j;
        if (o->sc[2] == 1)
            i = r / o->sc[1], j = r % o->sc[1];
        else
            j = r / o->sc[2], i = r % o->sc[2];
        c_elements += bi < L->bsz && i < L->m && j < L->n;
    }
    CHECK_EQ(c_elements, written);
    CHECK_EQ(guards, o->clen - written);
    printf("%-44s %dx%lldx%lldx%lld  %s\n", L->what, (int)L->bsz, (long long)L->m, (long long)L->n,
           (long long)L->k, L->integers ? "bit for bit" : "");
    if (!L->integers) printf("%44s worst error %.3f of the bound\n", "", worst);
}

static void case_run(const layout *L) {
    operands o = make(L);
    const uint64_t before = kern->count();
    CHECK(run(L, &o));
    CHECK_EQ(kern->count(), before + 1);
    check(L, &o);
    drop(&o);
}

static const layout cases[] = {
    {"one element", 1, 1, 1, 1, false, false, false, false, 0, false, false},
    {"one tile of each", 1, 16, 16, 32, false, false, false, false, 0, false, false},
    {"edges: m, n, k past whole tiles", 1, 33, 17, 31, false, false, false, false, 0, true, false},
    {"k past a k block (sums wait in memory)", 1, 37, 70, 600, false, false, false, false, 0, true,
     false},
    {"several units, A transposed", 1, 300, 290, 70, true, false, false, false, 0, true, false},
    {"B as linear's W^T, odd k", 1, 40, 48, 75, false, true, false, false, 0, false, false},
    {"B as W^T, n past whole panels", 1, 21, 53, 64, false, true, false, false, 0, true, false},
    {"both transposed", 1, 45, 35, 99, true, true, false, false, 0, false, false},
    {"batches, one A for all", 3, 20, 40, 50, false, false, true, false, 0, true, false},
    {"batches, one B for all", 3, 34, 18, 40, false, true, false, true, 0, false, false},
    {"C a view with longer rows", 2, 40, 70, 33, false, false, false, false, 1, true, false},
    {"C transposed (column major)", 2, 35, 33, 40, true, false, false, false, 2, true, false},
    {"integers: rounding, vector stores", 1, 64, 96, 64, false, false, false, false, 0, true, true},
    {"integers: rounding, element stores", 1, 40, 40, 70, false, true, false, false, 2, true, true},
    {"integers: k past a k block", 2, 33, 64, 700, true, false, false, false, 1, false, true},
};

/* the same product on 1 and on 2 threads: the same bits (each element's sum runs in k's order) */
static void threads_agree(void) {
#ifdef TS_HAVE_OPENMP
    const layout L = {
        "1 and 2 threads", 1, 520, 300, 600, false, false, false, false, 0, true, false};
    operands one = make(&L), two = make(&L);
    memcpy(two.a, one.a, (size_t)one.alen * 2), memcpy(two.b, one.b, (size_t)one.blen * 2);
    memcpy(two.bias, one.bias, (size_t)L.n * 2);
    const int was = omp_get_max_threads();
    omp_set_num_threads(1);
    CHECK(run(&L, &one));
    omp_set_num_threads(2);
    CHECK(run(&L, &two));
    omp_set_num_threads(was);
    CHECK(!memcmp(one.c, two.c, (size_t)one.clen * 2));
    check(&L, &two);
    drop(&one), drop(&two);
#endif
}

/* NaN in a row of A: that row of C is NaN (quiet), the others finite */
static void nan_row(void) {
    const layout L = {
        "NaN in a row of A", 1, 40, 40, 40, false, false, false, false, 0, false, false};
    operands o = make(&L);
    o.a[3 * o.sa[1] + 7] = 0x7fc0;
    CHECK(run(&L, &o));
    bool row_nan = true, others_finite = true;
    for (int64_t i = 0; i < L.m; i++)
        for (int64_t j = 0; j < L.n; j++) {
            const uint16_t h = o.c[32 + i * o.sc[1] + j];
            if (i == 3)
                row_nan = row_nan && (h & 0x7fff) > 0x7f80 && (h & 0x40);
            else
                others_finite = others_finite && (h & 0x7f80) != 0x7f80;
        }
    CHECK(row_nan);
    CHECK(others_finite);
    drop(&o);
}

/* the kernel declines what it cannot run and writes nothing */
static void declines(bool expect_ready) {
    const layout L = {"declines", 1, 8, 8, 8, false, false, false, false, 0, false, false};
    operands o = make(&L);
    const uint64_t before = tsi_amx_emu_gemm_count();
    CHECK(!tsi_amx_emu_gemm_bf16(1, 0, 8, 8, o.a, o.sa, o.b, o.sb, o.c + 32, o.sc, NULL));
    CHECK(!tsi_amx_emu_gemm_bf16(1, 8, 8, 0, o.a, o.sa, o.b, o.sb, o.c + 32, o.sc, NULL));
    CHECK(!tsi_amx_emu_gemm_bf16(0, 8, 8, 8, o.a, o.sa, o.b, o.sb, o.c + 32, o.sc, NULL));
    if (expect_ready) {
        /* no scratch memory: false, C untouched, and the next call runs */
        tsi_host_scratch_empty();
        ts_fault_alloc_set(1);
        const bool ran = run(&L, &o);
        const bool fired = ts_fault_alloc_fired();
        ts_fault_alloc_set(-1);
        ts_error_clear();
        CHECK(fired);
        CHECK(!ran);
    } else {
        CHECK(!run(&L, &o));
    }
    bool untouched = true;
    for (int64_t q = 0; q < o.clen; q++) untouched = untouched && o.c[q] == GUARD;
    CHECK(untouched);
    CHECK_EQ(tsi_amx_emu_gemm_count(), before);
    drop(&o);
}

/* the emulator itself catches a tile used with no configuration in this thread */
static void emulator_faults(void) {
    const int before = amx_emu_faults();
    amx_emu_release();
    amx_emu_zero(0);
    CHECK_EQ(amx_emu_faults(), before + 1);
}

/* The serial entries (one product in the calling thread, attention's): float32 C row-major and
 * transposed, bf16 C, A read in place (rows along k, whole tiles) or packed (a transposed A, k
 * not a multiple of 32), and B packed once then used by a product on a prefix of its rows and
 * columns; every element against float64 (float32: gamma_K sum |a b|; bf16: one rounding more),
 * and nothing written outside C or by a product of no rows. */
static void serial_case(int64_t m, int64_t n, int64_t k, bool a_t, bool c_t, bool c_f32, int64_t kp,
                        int64_t np) {
    const int64_t sa[2] = {a_t ? 1 : k + (k % 32 ? 3 : 0), a_t ? m + 3 : 1};
    const int64_t sb[2] = {np + 1, 1}; /* B [kp x np] rows, the product takes [k x n] */
    const int64_t sc[2] = {c_t ? 1 : n + 3, c_t ? m + 2 : 1};
    const int64_t alen = (m - 1) * sa[0] + (k - 1) * sa[1] + 1, blen = kp * (np + 1);
    const int64_t clen = c_t ? n * (m + 2) : m * (n + 3);
    uint16_t *a = random_buffer(alen, 1, false), *b = random_buffer(blen, 1, false);
    const size_t es = c_f32 ? 4 : 2;
    unsigned char *c = malloc((size_t)clen * es);
    memset(c, 0x7f, (size_t)clen * es);
    void *ws = aligned_alloc(64, (tsi_amx_emu_gemm_serial_bytes(m, n, k) + 63) & ~(size_t)63);
    bool ok;
    if (kp == k && np == n) {
        ok = tsi_amx_emu_gemm_serial(m, n, k, a, sa, b, sb, c, sc, c_f32, ws);
    } else {
        uint16_t *bp = aligned_alloc(64, (tsi_amx_emu_pack_b_bytes(kp, np) + 63) & ~(size_t)63);
        tsi_amx_emu_pack_b(kp, np, b, sb, bp);
        ok = tsi_amx_emu_gemm_serial_packed(m, n, k, a, sa, bp, kp, c, sc, c_f32, ws);
        free(bp);
    }
    CHECK(ok);
    const double u = 0x1p-24, gamma = (double)(k + 1) * u / (1 - (double)(k + 1) * u);
    int64_t bad = 0, outside = 0;
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            double exact = 0, mag = 0;
            for (int64_t q = 0; q < k; q++) {
                const double p = bf(a[i * sa[0] + q * sa[1]]) * bf(b[q * sb[0] + j]);
                exact += p, mag += fabs(p);
            }
            const int64_t at = i * sc[0] + j * sc[1];
            const double got = c_f32 ? ((float *)c)[at] : bf(((uint16_t *)c)[at]);
            const double bound = (c_f32 ? 0 : 0x1p-8 * fabs(exact)) + (1 + 0x1p-8) * gamma * mag;
            if (!(fabs(got - exact) <= bound) && bad++ < 3)
                ts_test_failf(__FILE__, __LINE__,
                              "serial %lldx%lldx%lld: C[%lld][%lld] = %.9g, exact %.17g",
                              (long long)m, (long long)n, (long long)k, (long long)i, (long long)j,
                              got, exact);
        }
    ts_test_record(bad == 0);
    /* the elements between C's rows or columns keep their bytes */
    for (int64_t q = 0; q < clen; q++) {
        const int64_t i = c_t ? q % (m + 2) : q / (n + 3), j = c_t ? q / (m + 2) : q % (n + 3);
        if (i < m && j < n) continue;
        for (size_t e = 0; e < es; e++) outside += c[(size_t)q * es + e] != 0x7f;
    }
    CHECK_EQ(outside, 0);
    /* no rows: declines, writes nothing */
    memset(c, 0x7f, (size_t)clen * es);
    CHECK(!tsi_amx_emu_gemm_serial(0, n, k, a, sa, b, sb, c, sc, c_f32, ws));
    int64_t touched = 0;
    for (int64_t q = 0; q < clen * (int64_t)es; q++) touched += c[q] != 0x7f;
    CHECK_EQ(touched, 0);
    free(a), free(b), free(c), free(ws);
}

static void serial_entries(void) {
    serial_case(64, 96, 64, false, false, true, 64, 96);   /* A in place, whole f32 blocks */
    serial_case(77, 40, 45, false, false, true, 45, 40);   /* edges: f32 blocks clipped */
    serial_case(64, 40, 256, true, true, true, 256, 40);   /* A^T gathered, f32 C^T */
    serial_case(96, 33, 64, false, true, false, 64, 33);   /* bf16 C^T */
    serial_case(64, 50, 96, false, false, true, 160, 70);  /* B packed: a prefix of it */
    serial_case(32, 64, 70, false, false, false, 90, 64);  /* prefix of k, A packed (k % 32) */
    serial_case(64, 64, 320, false, false, true, 320, 64); /* past 8 k tiles: sums wait in memory */
    serial_case(64, 48, 330, false, true, false, 352, 64); /* the same, bf16 C^T, a prefix of B */
}

int main(void) {
    tsi_init_once();
    if (!getenv("TS_AMX_GEMM")) setenv("TS_AMX_GEMM", "all", 1);
    tsi_env_reload(TSI_ENV_AMX_GEMM); /* the library read its environment at start-up */
    const char *mode = getenv("TS_AMX_GEMM"), *cap = getenv("ONEDNN_MAX_CPU_ISA");
    const bool asked = strcmp(mode, "off") != 0; /* on by default: only off turns it off */
    const bool capped = ts_test_dnnl_below_amx() || ts_cpu_isa_get() != TS_ISA_AVX512;
    printf("TS_AMX_GEMM=%s, vector ISA %s%s\n", mode,
           ts_cpu_isa_get() == TS_ISA_AVX512 ? "avx512" : "below avx512",
           cap ? ", ONEDNN_MAX_CPU_ISA set" : "");
    const bool expect_ready = asked && !capped;
    CHECK_EQ(tsi_amx_emu_gemm_ready(), expect_ready);
    CHECK_EQ(tsi_amx_emu_gemm_takes(tsi_mm_limits_get()->amx_min_macs), expect_ready);
    CHECK_EQ(tsi_amx_emu_gemm_takes(tsi_mm_limits_get()->amx_min_macs - 1),
             expect_ready && !strcmp(mode, "all"));
    declines(expect_ready);
    if (!expect_ready) {
        if (asked && ts_cpu_isa_get() != TS_ISA_AVX512 && !getenv("TS_CPU_ISA"))
            printf("this host has no AVX-512: the kernel's products were not run\n");
        return ts_test_finish();
    }
    /* on the emulated tiles, then on the tiles themselves where the host has them (the library's
     * kernel: the same cases, bounds and guards) */
    const kernel *const kernels[2] = {&emulated, &tiles};
    for (int q = 0; q < 2; q++) {
        if (q == 1 && !tsi_amx_gemm_ready()) {
            printf("-- no AMX tiles on this host: the kernel ran on emulated tiles only\n");
            break;
        }
        kern = kernels[q];
        printf("-- on %s\n", kern->name);
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) case_run(&cases[c]);
        threads_agree();
        nan_row();
    }
    kern = &emulated;
    serial_entries();
    CHECK(amx_emu_dps() > 0);
    CHECK_EQ(amx_emu_faults(), 0);
    emulator_faults();
    return ts_test_finish();
}
#endif
