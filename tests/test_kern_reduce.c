/* test_kern_reduce.c — the CPU reduce, softmax and index kernels called directly on hand-built
 * views, against plain double-precision references written here (random: test_kern_random.c). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef TS_HAVE_OPENMP
#include <omp.h>
#endif

#include "backend/cpu/cpu_kernels.h"
#include "backend/kernel_math.h"
#include "kern_access.h"
#include "ts_test.h"

/* ------------------------------------------------------------------ helpers */
static void contig(int nd, const int64_t *shape, int64_t *strides, int64_t mult) {
    int64_t s = mult;
    for (int d = nd - 1; d >= 0; d--) strides[d] = s, s *= shape[d];
}

static int64_t numel(int nd, const int64_t *shape) {
    int64_t n = 1;
    for (int d = 0; d < nd; d++) n *= shape[d];
    return n;
}

/* element offset of row-major position lin of v */
static int64_t voff(const ts_kview *v, int64_t lin) {
    int64_t off = 0;
    for (int d = v->ndim - 1; d >= 0; d--) {
        off += (lin % v->shape[d]) * v->strides[d];
        lin /= v->shape[d];
    }
    return off;
}

static uint64_t lcg = 12345;
static double urand(void) {
    lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(lcg >> 11) * 0x1.0p-53;
}

static bool close_to(double got, double want, double rtol, double atol) {
    if (want != want) return got != got;
    if (isinf(want)) return got == want;
    return fabs(got - want) <= atol + rtol * fabs(want);
}

#define EXPECT(cond, ...)                                                                          \
    do {                                                                                           \
        bool ok_ = (cond);                                                                         \
        ts_test_record(ok_);                                                                       \
        if (!ok_) ts_test_failf(__FILE__, __LINE__, __VA_ARGS__);                                  \
    } while (0)

static double rtol_of(ts_dtype dt) {
    return dt == TS_F64 ? 1e-12 : dt == TS_F32 ? 2e-6 : dt == TS_F16 ? 1e-3 : 8e-3;
}

/* ------------------------------------------------------------------ reduce references */
static double ref_reduce(ts_reduce_op op, const double *x, int64_t n, double corr) {
    double s = 0, m;
    int64_t bi = -1;
    switch (op) {
    case TS_R_SUM:
        for (int64_t i = 0; i < n; i++) s += x[i];
        return s;
    case TS_R_MEAN:
        for (int64_t i = 0; i < n; i++) s += x[i];
        return n ? s / (double)n : NAN;
    case TS_R_PROD:
        s = 1;
        for (int64_t i = 0; i < n; i++) s *= x[i];
        return s;
    case TS_R_MAX:
    case TS_R_MIN:
        m = x[0];
        for (int64_t i = 0; i < n; i++) {
            if (x[i] != x[i]) return NAN;
            if (op == TS_R_MAX ? x[i] > m : x[i] < m) m = x[i];
        }
        return m;
    case TS_R_VAR:
    case TS_R_STD: {
        if (n == 0) return NAN;
        double mean = ref_reduce(TS_R_MEAN, x, n, 0);
        for (int64_t i = 0; i < n; i++) s += (x[i] - mean) * (x[i] - mean);
        double d = (double)n - corr;
        double v = s / (d > 0 ? d : 0);
        return op == TS_R_STD ? sqrt(v) : v;
    }
    case TS_R_LOGSUMEXP:
        m = -INFINITY;
        for (int64_t i = 0; i < n; i++) {
            if (x[i] != x[i]) return NAN;
            if (x[i] > m) m = x[i];
        }
        if (isinf(m)) return m;
        for (int64_t i = 0; i < n; i++) s += exp(x[i] - m);
        return m + log(s);
    case TS_R_ARGMAX:
    case TS_R_ARGMIN:
        for (int64_t i = 0; i < n; i++) {
            if (x[i] != x[i]) return (double)i;
            if (bi < 0 || (op == TS_R_ARGMAX ? x[i] > x[bi] : x[i] < x[bi])) bi = i;
        }
        return (double)bi;
    case TS_R_NORM2:
        for (int64_t i = 0; i < n; i++) s += x[i] * x[i];
        return sqrt(s);
    default:
        return 0;
    }
}

/* reduce_ops.def's names, one per op */
static const char *op_name[] = {
#define X(ID, name, ...) #name,
#include "backend/reduce_ops.def"
#undef X
};
_Static_assert(sizeof op_name / sizeof *op_name == TS_R_COUNT, "a name for every reduce op");

/* Reduces the last nred dims of a permuted view of a contiguous buffer of physical shape ps:
 * view dim d is physical dim perm[d]. The output is written with stride 2 (interleaved). */
static void check_reduce(ts_dtype dt, int nd, const int64_t *ps, const int *perm, int nred,
                         ts_reduce_op op, double corr, int nan_every) {
    int64_t pstr[TS_MAX_DIMS], vs[TS_MAX_DIMS], vstr[TS_MAX_DIMS];
    contig(nd, ps, pstr, 1);
    for (int d = 0; d < nd; d++) vs[d] = ps[perm[d]], vstr[d] = pstr[perm[d]];
    int64_t total = numel(nd, ps);
    char *buf = malloc((size_t)(total ? total : 1) * esz(dt));
    for (int64_t i = 0; i < total; i++) {
        double v;
        if (isflt(dt))
            v = (op == TS_R_PROD ? 0.6 : -2.0) + urand() * (op == TS_R_PROD ? 1.0 : 4.0);
        else if (dt == TS_BOOL)
            v = urand() < 0.5;
        else if (dt == TS_U8)
            v = floor(urand() * (op == TS_R_PROD ? 3 : 256));
        else
            v = floor(urand() * (op == TS_R_PROD ? 5 : 201)) - (op == TS_R_PROD ? 2 : 100);
        if (nan_every && isflt(dt) && i % nan_every == 3) v = NAN;
        put(dt, buf, i, v);
    }
    ts_kview in = kv(buf, dt, nd, vs, vstr);
    int nl = nd - nred;
    int64_t outputs = numel(nl, vs), n = numel(nred, vs + nl);
    bool ints = !isflt(dt) && (op == TS_R_SUM || op == TS_R_PROD || op == TS_R_MAX ||
                               op == TS_R_MIN || op == TS_R_ARGMAX || op == TS_R_ARGMIN);
    ts_dtype odt = (op == TS_R_ARGMAX || op == TS_R_ARGMIN)        ? TS_I64
                   : (ints && (op == TS_R_SUM || op == TS_R_PROD)) ? TS_I64
                   : isflt(dt)                                     ? dt
                   : ints                                          ? dt
                                                                   : TS_F64;
    int64_t ostr[TS_MAX_DIMS];
    contig(nl, vs, ostr, 2);
    char *obuf = calloc((size_t)(2 * outputs + 1), esz(odt)); /* calloc: GCC 13's warning */
    for (int64_t i = 0; i < 2 * outputs + 1; i++) put(odt, obuf, i, 77);
    double sentinel = get(odt, obuf, 0);
    ts_kview out = kv(obuf, odt, nl, vs, ostr);
    tsi_cpu_reduce(NULL, 0, op, &out, &in, nred, corr);
    double *x = malloc((size_t)(n ? n : 1) * sizeof *x);
    ts_kview red = kv(buf, dt, nred, vs + nl, vstr + nl);
    double rtol = isflt(dt) ? rtol_of(odt) : 0;
    if (isflt(dt) && (op == TS_R_VAR || op == TS_R_STD)) rtol *= 10;
    for (int64_t o = 0; o < outputs; o++) {
        ts_kview lead = kv(buf, dt, nl, vs, vstr);
        int64_t base = voff(&lead, o);
        for (int64_t r = 0; r < n; r++) x[r] = get(dt, buf, base + voff(&red, r));
        double want = ref_reduce(op, x, n, corr);
        if (ints && op == TS_R_PROD) { /* int64 products wrap */
            uint64_t w = 1;
            for (int64_t r = 0; r < n; r++) w *= (uint64_t)(int64_t)x[r];
            want = (double)(int64_t)w;
        }
        if (odt == TS_F16 || odt == TS_BF16) { /* the output's own range and rounding */
            char tmp[2];
            put(odt, tmp, 0, want);
            want = get(odt, tmp, 0);
        }
        double got = get(odt, obuf, 2 * o);
        EXPECT(close_to(got, want, rtol, 1e-12),
               "reduce %s dt=%d nred=%d perm0=%d o=%lld: got %.17g want %.17g", op_name[op], dt,
               nred, perm[0], (long long)o, got, want);
        EXPECT(get(odt, obuf, 2 * o + 1) == sentinel, "reduce %s wrote between outputs",
               op_name[op]);
    }
    free(x);
    free(obuf);
    free(buf);
}

static void test_reduce(void) {
    const int64_t ps[3] = {4, 5, 6};
    const int perms[][3] = {{0, 1, 2}, {2, 0, 1}, {1, 2, 0}, {2, 1, 0}, {1, 0, 2}};
    const ts_dtype fdts[] = {TS_F32, TS_F64, TS_F16, TS_BF16};
    for (int op = 0; op < TS_R_COUNT; op++)
        for (int t = 0; t < 4; t++)
            for (int p = 0; p < 5; p++)
                for (int nred = 1; nred <= 3; nred++)
                    check_reduce(fdts[t], 3, ps, perms[p], nred, (ts_reduce_op)op,
                                 op == TS_R_VAR ? 1.0 : 0.0, 0);
    const ts_dtype idts[] = {TS_I64, TS_I32, TS_U8, TS_BOOL};
    const ts_reduce_op iops[] = {TS_R_SUM,    TS_R_PROD,   TS_R_MAX, TS_R_MIN,
                                 TS_R_ARGMAX, TS_R_ARGMIN, TS_R_MEAN};
    for (int k = 0; k < 7; k++)
        for (int t = 0; t < 4; t++)
            for (int p = 0; p < 5; p++)
                for (int nred = 1; nred <= 3; nred++)
                    check_reduce(idts[t], 3, ps, perms[p], nred, iops[k], 0, 0);
    /* NaN propagation, var/std corrections including n - correction <= 0 */
    for (int op = 0; op < TS_R_COUNT; op++)
        for (int p = 0; p < 5; p++) {
            check_reduce(TS_F32, 3, ps, perms[p], 1, (ts_reduce_op)op, 0, 7);
            check_reduce(TS_F64, 3, ps, perms[p], 2, (ts_reduce_op)op, 0, 29);
        }
    const int64_t p1[3] = {4, 1, 2};
    for (int c = 0; c <= 3; c++) {
        check_reduce(TS_F64, 3, p1, perms[0], 1, TS_R_VAR, c, 0);
        check_reduce(TS_F64, 3, p1, perms[0], 2, TS_R_STD, c, 0);
    }
    /* column path ([N, C] reduced over N), with and without the split into position blocks, the
     * split row path, and the general strided gather */
    const int p01[2] = {1, 0}, id2[2] = {0, 1};
    const int64_t col_small[2] = {40, 33}, col_split[2] = {5000, 20}, row_split[2] = {2, 70000},
                  row_small[2] = {3000, 7};
    for (int op = 0; op < TS_R_COUNT; op++) {
        check_reduce(TS_F32, 2, col_small, p01, 1, (ts_reduce_op)op, 1, 0);
        check_reduce(TS_F64, 2, col_split, p01, 1, (ts_reduce_op)op, 1, 0);
        check_reduce(TS_F64, 2, row_split, id2, 1, (ts_reduce_op)op, 1, 0);
        check_reduce(TS_F32, 2, col_split, p01, 1, (ts_reduce_op)op, 0, 997);
        check_reduce(TS_F32, 2, row_split, id2, 1, (ts_reduce_op)op, 0, 40001);
        check_reduce(TS_F32, 2, row_small, id2, 1, (ts_reduce_op)op, 1, 0);
        check_reduce(TS_BF16, 2, row_small, id2, 1, (ts_reduce_op)op, 0, 0);
    }
    const ts_reduce_op iops6[] = {TS_R_SUM, TS_R_MAX, TS_R_MIN, TS_R_ARGMAX, TS_R_ARGMIN};
    for (int k = 0; k < 5; k++) {
        check_reduce(TS_I32, 2, col_small, p01, 1, iops6[k], 0, 0);
        check_reduce(TS_I64, 2, col_split, p01, 1, iops6[k], 0, 0);
        check_reduce(TS_U8, 2, row_split, id2, 1, iops6[k], 0, 0);
        check_reduce(TS_I32, 2, row_small, id2, 1, iops6[k], 0, 0);
    }
    check_reduce(TS_I64, 2, col_small, p01, 1, TS_R_PROD, 0, 0);

    /* empty reductions: SUM 0, PROD 1, MEAN/VAR/STD NaN, LOGSUMEXP -inf, NORM2 0 */
    {
        float dummy = 0;
        int64_t sh[2] = {3, 0}, st[2] = {0, 1}, osh[1] = {3}, ost[1] = {1};
        ts_kview in = kv(&dummy, TS_F32, 2, sh, st);
        const ts_reduce_op eops[] = {TS_R_SUM, TS_R_PROD,      TS_R_MEAN, TS_R_VAR,
                                     TS_R_STD, TS_R_LOGSUMEXP, TS_R_NORM2};
        const double ewant[] = {0, 1, NAN, NAN, NAN, -INFINITY, 0};
        for (int k = 0; k < 7; k++) {
            float o[3] = {5, 5, 5};
            ts_kview out = kv(o, TS_F32, 1, osh, ost);
            tsi_cpu_reduce(NULL, 0, eops[k], &out, &in, 1, 1.0);
            for (int i = 0; i < 3; i++)
                EXPECT(close_to(o[i], ewant[k], 0, 0), "empty %s: %g", op_name[eops[k]], o[i]);
        }
        int64_t isum[3] = {9, 9, 9};
        uint8_t bdummy = 0;
        ts_kview bin = kv(&bdummy, TS_BOOL, 2, sh, st);
        ts_kview iout = kv(isum, TS_I64, 1, osh, ost);
        tsi_cpu_reduce(NULL, 0, TS_R_SUM, &iout, &bin, 1, 0);
        CHECK(isum[0] == 0 && isum[1] == 0 && isum[2] == 0);
        /* no outputs at all: nothing may be touched */
        int64_t sh2[2] = {0, 4};
        ts_kview in2 = kv(&dummy, TS_F32, 2, sh2, st);
        float o2 = 5;
        int64_t osh2[1] = {0};
        ts_kview out2 = kv(&o2, TS_F32, 1, osh2, ost);
        tsi_cpu_reduce(NULL, 0, TS_R_SUM, &out2, &in2, 1, 0);
        CHECK(o2 == 5);
    }
    /* full reduction to a 0-dim output; int64 values beyond 2^53 stay exact */
    {
        int64_t v[4] = {(1ll << 60) + 1, (1ll << 60) + 3, (1ll << 60) + 2, -5};
        int64_t sh[1] = {4}, st[1] = {1}, r = 0;
        ts_kview in = kv(v, TS_I64, 1, sh, st), out = kv(&r, TS_I64, 0, sh, st);
        tsi_cpu_reduce(NULL, 0, TS_R_MAX, &out, &in, 1, 0);
        CHECK(r == (1ll << 60) + 3);
        tsi_cpu_reduce(NULL, 0, TS_R_ARGMAX, &out, &in, 1, 0);
        CHECK(r == 1);
        tsi_cpu_reduce(NULL, 0, TS_R_SUM, &out, &in, 1, 0);
        CHECK(r == (int64_t)(3 * ((1ull << 60)) + 6 - 5));
    }
    /* logsumexp stability and infinities */
    {
        double v[3] = {1000, 1000, -INFINITY}, r;
        int64_t sh[1] = {3}, st[1] = {1};
        ts_kview in = kv(v, TS_F64, 1, sh, st), out = kv(&r, TS_F64, 0, sh, st);
        tsi_cpu_reduce(NULL, 0, TS_R_LOGSUMEXP, &out, &in, 1, 0);
        CHECK_NEAR(r, 1000 + log(2.0), 1e-12);
        v[0] = v[1] = -INFINITY;
        tsi_cpu_reduce(NULL, 0, TS_R_LOGSUMEXP, &out, &in, 1, 0);
        CHECK(r == -INFINITY);
        v[1] = INFINITY;
        tsi_cpu_reduce(NULL, 0, TS_R_LOGSUMEXP, &out, &in, 1, 0);
        CHECK(r == INFINITY);
    }
}

/* logsumexp of float32 (and float16 / bfloat16) rows (float exponentials summed in double,
 * kern_reduce_state.c): within
 * 2^-22 of the exact value (each term within 2^-23 + 2^-24 |x - max| relative, the terms far
 * below the largest negligible) plus half an ulp of the float result, against a double
 * reference; over rows longer than a chunk (several partial states merged), with results near 0
 * (where that bound is absolute), and the non-finite rows the double path settles. */
static double lse_ref(const float *x, int64_t n) {
    double m = -INFINITY, s = 0;
    for (int64_t i = 0; i < n; i++) m = x[i] > m ? x[i] : m;
    for (int64_t i = 0; i < n; i++) s += exp((double)x[i] - m);
    return m + log(s);
}
static float lse_f32(const float *x, int64_t n) {
    float r = 0;
    int64_t sh[1] = {n}, st[1] = {1};
    ts_kview in = kv((void *)x, TS_F32, 1, sh, st), out = kv(&r, TS_F32, 0, sh, st);
    tsi_cpu_reduce(NULL, 0, TS_R_LOGSUMEXP, &out, &in, 1, 0);
    return r;
}
static void test_logsumexp_f32(void) {
    enum { N = 5000 };
    static float x[N];
    const int64_t lens[] = {1, 2, 7, 16, 33, 1000, 1024, 1025, 4099, N};
    for (int k = 0; k < (int)(sizeof lens / sizeof lens[0]); k++) {
        const int64_t n = lens[k];
        for (int spread = 0; spread < 3; spread++) {
            const double w = spread == 0 ? 1 : spread == 1 ? 30 : 200; /* -w/2 .. w/2 */
            for (int64_t i = 0; i < n; i++) x[i] = (float)((urand() - 0.5) * w);
            /* shifted so that the result is near 0: the absolute part of the bound */
            for (int near0 = 0; near0 < 2; near0++) {
                if (near0) {
                    const float shift = (float)lse_ref(x, n);
                    for (int64_t i = 0; i < n; i++) x[i] -= shift;
                }
                const double want = lse_ref(x, n), got = lse_f32(x, n);
                const double tol = ldexp(1, -22) + 0.5 * ldexp(fabs(want) + 1e-30, -23);
                EXPECT(fabs(got - want) <= tol,
                       "logsumexp f32 n=%lld spread %g%s: got %.9g want %.9g (tol %.3g)",
                       (long long)n, w, near0 ? " near 0" : "", got, want, tol);
            }
        }
    }
    const float big[3] = {1000, 1000, -INFINITY};
    CHECK_NEAR(lse_f32(big, 3), 1000 + log(2.0), 1e-4); /* float's ulp at 1000: 6e-5 */
    float v[3] = {-INFINITY, -INFINITY, -INFINITY};
    CHECK(lse_f32(v, 3) == -INFINITY);
    v[1] = INFINITY;
    CHECK(lse_f32(v, 3) == INFINITY);
    v[0] = 1, v[1] = NAN, v[2] = 2;
    CHECK(isnan(lse_f32(v, 3)));
    v[0] = v[1] = v[2] = NAN;
    CHECK(isnan(lse_f32(v, 3)));
    v[0] = 1, v[1] = INFINITY, v[2] = NAN;
    CHECK(isnan(lse_f32(v, 3)));
    /* float16 and bfloat16 runs: converted to float (exactly), the same sums, the result rounded
     * to the half dtype: within 2^-22 and one of its ulps of the exact value for the half inputs */
    static uint16_t h[N];
    for (int half = 0; half < 2; half++) {
        const ts_dtype dt = half ? TS_BF16 : TS_F16;
        const int mant = half ? 7 : 10;
        for (int k = 0; k < (int)(sizeof lens / sizeof lens[0]); k++) {
            const int64_t n = lens[k];
            for (int64_t i = 0; i < n; i++) {
                const float f = (float)((urand() - 0.5) * 20);
                h[i] = half ? ts_f32_to_bf16(f) : ts_f32_to_f16(f);
                x[i] = half ? ts_bf16_to_f32(h[i]) : ts_f16_to_f32(h[i]);
            }
            uint16_t r = 0;
            int64_t sh[1] = {n}, st[1] = {1};
            ts_kview in = kv(h, dt, 1, sh, st), out = kv(&r, dt, 0, sh, st);
            tsi_cpu_reduce(NULL, 0, TS_R_LOGSUMEXP, &out, &in, 1, 0);
            const double want = lse_ref(x, n), got = half ? ts_bf16_to_f32(r) : ts_f16_to_f32(r);
            int e;
            frexp(fmax(fabs(want), 0x1p-14), &e);
            const double tol = ldexp(1, -22) + ldexp(1, e - 1 - mant);
            EXPECT(fabs(got - want) <= tol, "logsumexp %s n=%lld: got %.6g want %.6g",
                   half ? "bf16" : "f16", (long long)n, got, want);
        }
    }
}

/* Outputs do not depend on the thread count (fixed, shape-only splits). */
static void test_reduce_threads(void) {
#ifdef TS_HAVE_OPENMP
    int64_t N = 300000;
    float *x = malloc((size_t)N * sizeof *x);
    for (int64_t i = 0; i < N; i++) x[i] = (float)(urand() * 2 - 1);
    int64_t sh[1] = {N}, st[1] = {1}, csh[2] = {20, 15000}, cst[2] = {1, 20}, osh[1] = {20};
    for (int op = 0; op < TS_R_COUNT; op++) {
        float r[2][21];
        for (int t = 0; t < 2; t++) {
            omp_set_num_threads(t + 1);
            ts_kview in = kv(x, TS_F32, 1, sh, st), out = kv(&r[t][0], TS_F32, 0, sh, st);
            if (op == TS_R_ARGMAX || op == TS_R_ARGMIN) continue;
            tsi_cpu_reduce(NULL, 0, (ts_reduce_op)op, &out, &in, 1, 1);
            ts_kview cin = kv(x, TS_F32, 2, csh, cst), cout = kv(&r[t][1], TS_F32, 1, osh, st);
            tsi_cpu_reduce(NULL, 0, (ts_reduce_op)op, &cout, &cin, 1, 1);
        }
        if (op != TS_R_ARGMAX && op != TS_R_ARGMIN)
            EXPECT(memcmp(r[0], r[1], sizeof r[0]) == 0, "reduce %s differs with 1 and 2 threads",
                   op_name[op]);
    }
    omp_set_num_threads(2);
    free(x);
#endif
}

/* ------------------------------------------------------------------ softmax */
/* Softmax along `dim` of a permuted view of a contiguous buffer, into a contiguous output or one
 * laid out in the reverse dim order. */
static void check_softmax(ts_dtype dt, int nd, const int64_t *ps, const int *perm, int dim, bool lg,
                          bool out_rev, double scale) {
    int64_t pstr[TS_MAX_DIMS], vs[TS_MAX_DIMS], vstr[TS_MAX_DIMS], ostr[TS_MAX_DIMS];
    contig(nd, ps, pstr, 1);
    for (int d = 0; d < nd; d++) vs[d] = ps[perm[d]], vstr[d] = pstr[perm[d]];
    int64_t total = numel(nd, ps);
    if (out_rev) {
        int64_t s = 1;
        for (int d = 0; d < nd; d++) ostr[d] = s, s *= vs[d];
    } else {
        contig(nd, vs, ostr, 1);
    }
    char *buf = malloc((size_t)total * esz(dt)), *obuf = malloc((size_t)total * esz(dt));
    for (int64_t i = 0; i < total; i++) put(dt, buf, i, (urand() * 2 - 1) * scale);
    ts_kview in = kv(buf, dt, nd, vs, vstr), out = kv(obuf, dt, nd, vs, ostr);
    tsi_cpu_softmax(NULL, 0, &out, &in, dim, lg);
    double rtol = dt == TS_F64 ? 1e-12 : dt == TS_F32 ? 1e-5 : dt == TS_F16 ? 2e-3 : 1e-2;
    double *row = malloc((size_t)vs[dim] * sizeof *row);
    int bad = 0;
    for (int64_t lin = 0; lin < total && bad < 5; lin++) {
        int64_t rem = lin, io = 0, oo = 0, idim = 0;
        for (int d = nd - 1; d >= 0; d--) {
            int64_t k = rem % vs[d];
            rem /= vs[d];
            if (d == dim) idim = k;
            io += k * vstr[d];
            oo += k * ostr[d];
        }
        if (idim != 0) continue;
        double m = -INFINITY, s = 0;
        for (int64_t k = 0; k < vs[dim]; k++) {
            row[k] = get(dt, buf, io + k * vstr[dim]);
            m = row[k] > m ? row[k] : m;
        }
        for (int64_t k = 0; k < vs[dim]; k++) s += exp(row[k] - m);
        for (int64_t k = 0; k < vs[dim]; k++) {
            double want = lg ? row[k] - m - log(s) : exp(row[k] - m) / s;
            double got = get(dt, obuf, oo + k * ostr[dim]);
            bool ok = close_to(got, want, rtol, rtol);
            bad += !ok;
            EXPECT(ok, "softmax dt=%d dim=%d log=%d rev=%d: got %.9g want %.9g", dt, dim, lg,
                   out_rev, got, want);
        }
    }
    free(row);
    free(obuf);
    free(buf);
}

static void test_softmax(void) {
    const int64_t ps[3] = {3, 4, 5};
    const int perms[][3] = {{0, 1, 2}, {2, 0, 1}, {1, 2, 0}};
    const ts_dtype dts[] = {TS_F32, TS_F64, TS_F16, TS_BF16};
    for (int t = 0; t < 4; t++)
        for (int p = 0; p < 3; p++)
            for (int dim = 0; dim < 3; dim++)
                for (int lg = 0; lg < 2; lg++)
                    for (int rev = 0; rev < 2; rev++)
                        check_softmax(dts[t], 3, ps, perms[p], dim, lg, rev, 3.0);
    { /* a 0-dim tensor is a row of one: softmax 1, log_softmax 0 */
        double x = 3.5, y = -1;
        ts_kview in = kv(&x, TS_F64, 0, NULL, NULL), out = kv(&y, TS_F64, 0, NULL, NULL);
        tsi_cpu_softmax(NULL, 0, &out, &in, 0, false);
        CHECK(y == 1.0);
        tsi_cpu_softmax(NULL, 0, &out, &in, 0, true);
        CHECK(y == 0.0);
    }
    const int id2[2] = {0, 1}, tr2[2] = {1, 0};
    const int64_t big[2] = {300, 200}, wide[2] = {3, 50000};
    for (int lg = 0; lg < 2; lg++) {
        check_softmax(TS_F32, 2, big, id2, 0, lg, false, 1000.0); /* stability, column path */
        check_softmax(TS_F32, 2, big, id2, 1, lg, false, 1000.0);
        check_softmax(TS_F64, 2, big, tr2, 1, lg, true, 30.0);
        check_softmax(TS_BF16, 2, big, id2, 0, lg, false, 5.0);
        check_softmax(TS_F32, 2, wide, id2, 1, lg, false, 10.0);
    }
}

/* ------------------------------------------------------------------ index ops */
/* in: permuted view of [4, 5, 6]; index_select along dim with a strided index of length 7. */
static void check_index_select(ts_dtype dt, const int *perm, int dim) {
    const int64_t ps[3] = {4, 5, 6};
    int64_t pstr[3], vs[3], vstr[3], os[3], ostr[3];
    contig(3, ps, pstr, 1);
    for (int d = 0; d < 3; d++) vs[d] = ps[perm[d]], vstr[d] = pstr[perm[d]], os[d] = vs[d];
    os[dim] = 7;
    contig(3, os, ostr, 1);
    char *buf = malloc(120 * esz(dt)), *obuf = malloc((size_t)numel(3, os) * esz(dt));
    for (int64_t i = 0; i < 120; i++) put(dt, buf, i, dt == TS_BOOL ? (i % 3 == 0) : i % 97);
    int64_t idx[14], ish[1] = {7}, ist[1] = {2};
    for (int k = 0; k < 7; k++) idx[2 * k] = (int64_t)(urand() * (double)vs[dim]);
    ts_kview in = kv(buf, dt, 3, vs, vstr), out = kv(obuf, dt, 3, os, ostr);
    ts_kview iv = kv(idx, TS_I64, 1, ish, ist);
    tsi_cpu_index_select(NULL, 0, &out, &in, dim, &iv);
    int bad = 0;
    for (int64_t lin = 0; lin < numel(3, os); lin++) {
        int64_t m[3], rem = lin, src = 0;
        for (int d = 2; d >= 0; d--) m[d] = rem % os[d], rem /= os[d];
        m[dim] = idx[2 * m[dim]];
        for (int d = 0; d < 3; d++) src += m[d] * vstr[d];
        bad += get(dt, obuf, lin) != get(dt, buf, src);
    }
    EXPECT(bad == 0, "index_select dt=%d dim=%d perm0=%d: %d wrong", dt, dim, perm[0], bad);
    free(obuf);
    free(buf);
}

/* gather (out = in.gather(dim, idx)) and scatter_add with idx smaller than src and dst. */
static void check_gather_scatter(ts_dtype dt, const int *perm, int dim, const int64_t *ishape) {
    const int64_t ps[3] = {4, 5, 6};
    int64_t pstr[3], vs[3], vstr[3], istr[3], sshape[3], sstr[3];
    contig(3, ps, pstr, 1);
    for (int d = 0; d < 3; d++) vs[d] = ps[perm[d]], vstr[d] = pstr[perm[d]];
    for (int d = 0; d < 3; d++) sshape[d] = ishape[d] + 1;
    contig(3, ishape, istr, 1);
    contig(3, sshape, sstr, 1);
    int64_t ni = numel(3, ishape), ns = numel(3, sshape);
    char *buf = malloc(120 * esz(dt)), *obuf = malloc((size_t)ni * esz(dt));
    char *sbuf = malloc((size_t)ns * esz(dt));
    int64_t *idx = malloc((size_t)ni * sizeof *idx);
    double ref[120];
    bool fl = isflt(dt);
    for (int64_t i = 0; i < 120; i++) {
        put(dt, buf, i, fl ? floor(urand() * 64 - 32) / 8 : (double)(i % 13));
        ref[i] = get(dt, buf, i);
    }
    for (int64_t i = 0; i < ns; i++) put(dt, sbuf, i, fl ? floor(urand() * 64 - 32) / 8 : i % 7);
    for (int64_t i = 0; i < ni; i++) idx[i] = (int64_t)(urand() * (double)vs[dim]);
    ts_kview in = kv(buf, dt, 3, vs, vstr), out = kv(obuf, dt, 3, ishape, istr);
    ts_kview iv = kv(idx, TS_I64, 3, ishape, istr), sv = kv(sbuf, dt, 3, sshape, sstr);
    tsi_cpu_gather(NULL, 0, &out, &in, dim, &iv);
    int bad = 0;
    for (int64_t lin = 0; lin < ni; lin++) {
        int64_t m[3], rem = lin, off = 0;
        for (int d = 2; d >= 0; d--) m[d] = rem % ishape[d], rem /= ishape[d];
        m[dim] = idx[lin];
        for (int d = 0; d < 3; d++) off += m[d] * vstr[d];
        bad += get(dt, obuf, lin) != get(dt, buf, off);
    }
    EXPECT(bad == 0, "gather dt=%d dim=%d: %d wrong", dt, dim, bad);
    tsi_cpu_scatter_add(NULL, 0, &in, dim, &iv, &sv);
    for (int64_t lin = 0; lin < ni; lin++) {
        int64_t m[3], rem = lin, off = 0, soff = 0;
        for (int d = 2; d >= 0; d--) m[d] = rem % ishape[d], rem /= ishape[d];
        for (int d = 0; d < 3; d++) soff += m[d] * sstr[d];
        m[dim] = idx[lin];
        for (int d = 0; d < 3; d++) off += m[d] * vstr[d];
        ref[off] += get(dt, sbuf, soff);
    }
    if (dt == TS_BOOL)
        for (int i = 0; i < 120; i++) ref[i] = ref[i] != 0;
    if (dt == TS_U8)
        for (int i = 0; i < 120; i++) ref[i] = (double)((uint8_t)(int)ref[i]);
    double tol = dt == TS_BF16 ? 0.25 : dt == TS_F16 ? 0.02 : 0;
    bad = 0;
    for (int i = 0; i < 120; i++) bad += !close_to(get(dt, buf, i), ref[i], 0, tol);
    EXPECT(bad == 0, "scatter_add dt=%d dim=%d perm0=%d: %d wrong", dt, dim, perm[0], bad);
    free(idx);
    free(sbuf);
    free(obuf);
    free(buf);
}

static void test_index(void) {
    const int perms[][3] = {{0, 1, 2}, {2, 0, 1}, {1, 2, 0}};
    const ts_dtype dts[] = {TS_F32, TS_F64, TS_F16, TS_BF16, TS_I64, TS_I32, TS_U8, TS_BOOL};
    for (int t = 0; t < 8; t++)
        for (int p = 0; p < 3; p++)
            for (int dim = 0; dim < 3; dim++) {
                check_index_select(dts[t], perms[p], dim);
                int64_t ish[3];
                int64_t vs[3] = {(int64_t[]){4, 5, 6}[perms[p][0]],
                                 (int64_t[]){4, 5, 6}[perms[p][1]],
                                 (int64_t[]){4, 5, 6}[perms[p][2]]};
                for (int d = 0; d < 3; d++) ish[d] = d == dim ? 9 : vs[d] - (d == 1);
                check_gather_scatter(dts[t], perms[p], dim, ish);
            }
    { /* 0-dim gather / scatter_add */
        float x = 2.5f, y = 0, acc = 1;
        int64_t zero = 0;
        ts_kview in = kv(&x, TS_F32, 0, NULL, NULL), out = kv(&y, TS_F32, 0, NULL, NULL);
        ts_kview iv = kv(&zero, TS_I64, 0, NULL, NULL), av = kv(&acc, TS_F32, 0, NULL, NULL);
        tsi_cpu_gather(NULL, 0, &out, &in, 0, &iv);
        CHECK(y == 2.5f);
        tsi_cpu_scatter_add(NULL, 0, &av, 0, &iv, &in);
        CHECK(acc == 3.5f);
    }
    /* big enough for the parallel paths */
    int64_t R = 400, C = 300, sh[2] = {R, C}, st[2] = {C, 1};
    float *x = malloc((size_t)(R * C) * sizeof *x), *o = malloc((size_t)(R * C) * sizeof *o);
    int64_t *ix = malloc((size_t)(R * C) * sizeof *ix);
    for (int64_t i = 0; i < R * C; i++) x[i] = (float)i, ix[i] = (i * 7919) % R;
    ts_kview in = kv(x, TS_F32, 2, sh, st), out = kv(o, TS_F32, 2, sh, st);
    ts_kview iv = kv(ix, TS_I64, 2, sh, st);
    tsi_cpu_gather(NULL, 0, &out, &in, 0, &iv);
    int bad = 0;
    for (int64_t i = 0; i < R * C; i++) bad += o[i] != x[ix[i] * C + i % C];
    EXPECT(bad == 0, "big gather: %d wrong", bad);
    for (int64_t i = 0; i < R * C; i++) o[i] = 0;
    tsi_cpu_scatter_add(NULL, 0, &out, 0, &iv, &in);
    double *ref = calloc((size_t)(R * C), sizeof *ref);
    for (int64_t i = 0; i < R * C; i++) ref[ix[i] * C + i % C] += x[i];
    bad = 0;
    for (int64_t i = 0; i < R * C; i++) bad += !close_to(o[i], ref[i], 1e-6, 0);
    EXPECT(bad == 0, "big scatter_add: %d wrong", bad);
    free(ref);
    free(ix);
    free(o);
    free(x);
}

int main(void) {
    test_reduce();
    test_reduce_threads();
    test_logsumexp_f32();
    test_softmax();
    test_index();
    return ts_test_finish();
}
