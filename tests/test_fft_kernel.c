/* test_fft_kernel.c — the CPU fft slot (kern_fft.c, the engine of fft_plan.c / fft_engine.c)
 * called directly on hand-built views: C2C forward and backward, R2C and C2R in complex64 and
 * complex128 against a DFT summed in long double with exact twiddles (e^(2 pi i r / n) for r =
 * j k mod n, from a table in long double), over lengths that reach every radix pass (4, 2, 3, 5,
 * the generic odd one), Bluestein (prime factors above TSI_FFT_MAX_RADIX) and the real-even split;
 * several lines, whole vector groups, a dim that is not last, strided input and output, a round
 * trip, the ignored imaginary parts of C2R, and allocation failures (false, nothing written).
 * Where a GPU is present, the CUDA slot (cuFFT) goes through the same length and layout checks.
 *
 * Tolerance, per output element: |err| <= C * eps * L * sqrt(n) * max|x|, C = 5, eps the dtype's
 * machine epsilon, L = log2(n) + 1 (the passes each output goes through; 3 (log2(m) + 1) for
 * Bluestein, whose three transforms have length m < 4n: m is bounded by the power of two). An FFT's
 * error in the 2-norm is about eps L ||X|| and ||X|| = sqrt(n) ||x|| <= n max|x|, so one element's
 * error is about eps L sqrt(n) max|x|; C covers the twiddles' own rounding and the spread over
 * elements (the worst seen is under a tenth of the bound). A wrong twiddle sign or a dropped term
 * errs by O(max|x|), hundreds of bounds at every length here. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/cpu/fft_plan.h"
#include "backend/cpu/kern_fft.h"
#include "core/internal.h"
#include "ts_test.h"

#define C_TOL 5.0

typedef long double ld;

static uint64_t lcg = 0x9e3779b97f4a7c15ull;
static double urand(void) { /* [-1, 1) */
    lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(lcg >> 11) * 0x1.0p-52 - 1.0;
}

static bool is_bluestein(int64_t n) {
    int64_t len = n;
    for (int64_t d = 2; d * d <= len; d++)
        while (len % d == 0) len /= d;
    return len > TSI_FFT_MAX_RADIX;
}

static double tol_of(int64_t n, bool dbl, double maxabs) {
    double L = log2((double)n) + 1;
    if (is_bluestein(n)) {
        int64_t m = 1;
        while (m < 2 * n - 1) m *= 2;
        L = 3 * (log2((double)m) + 1);
    }
    return C_TOL * (dbl ? DBL_EPSILON : FLT_EPSILON) * L * sqrt((double)n) * maxabs;
}

/* the output bins compared: all up to n = 256; past that (the reference is O(n^2) a bin, and
 * the sanitizer build runs this at -O0) the first and last 8 of the nout and every 7th */
static bool bin_checked(int64_t k, int64_t n, int64_t nout) {
    return n <= 256 || k < 8 || k + 8 >= nout || k % 7 == 0;
}

/* X[k] = sum_j x[j] e^(sg 2 pi i j k / n), long double, for the bins k < nout checked */
static void dft(int64_t n, int64_t nout, const ld *xr, const ld *xi, ld *yr, ld *yi, int sg) {
    ld *cr = malloc(sizeof(ld) * (size_t)n), *ci = malloc(sizeof(ld) * (size_t)n);
    const ld tau = 6.283185307179586476925286766559005768L;
    for (int64_t r = 0; r < n; r++) cr[r] = cosl(tau * r / n), ci[r] = sg * sinl(tau * r / n);
    for (int64_t k = 0; k < nout; k++) {
        if (!bin_checked(k, n, nout)) continue;
        ld sr = 0, si = 0;
        int64_t r = 0;
        for (int64_t j = 0; j < n; j++) {
            sr += xr[j] * cr[r] - xi[j] * ci[r];
            si += xr[j] * ci[r] + xi[j] * cr[r];
            r += k;
            if (r >= n) r -= n;
        }
        yr[k] = sr, yi[k] = si;
    }
    free(cr), free(ci);
}

/* a view of ndim 2 over data with the given shape and strides (in elements of dt) */
static ts_kview mk(void *data, ts_dtype dt, int64_t s0, int64_t s1, int64_t st0, int64_t st1) {
    ts_kview v;
    memset(&v, 0, sizeof v);
    v.data = data, v.dtype = dt, v.ndim = 2;
    v.shape[0] = s0, v.shape[1] = s1, v.strides[0] = st0, v.strides[1] = st1;
    return v;
}

static double rd(const void *b, bool dbl, int64_t at) {
    return dbl ? ((const double *)b)[at] : ((const float *)b)[at];
}
static void wr(void *b, bool dbl, int64_t at, double v) {
    if (dbl)
        ((double *)b)[at] = v;
    else
        ((float *)b)[at] = (float)v;
}

/* the backend the checks run on: cpu (tsi_cpu_fft on host memory), or cuda:0 (the views' data
 * copied to the device and back) */
static const ts_backend *g_be;

static bool call_fft(ts_kview *vo, size_t out_bytes, ts_kview *vi, size_t in_bytes, int dim,
                     ts_fft_kind kind, bool fwd, double scale) {
    if (g_be->type == TS_CPU) return tsi_cpu_fft(g_be, 0, vo, vi, dim, kind, fwd, scale);
    char *ho = vo->data, *hi = vi->data;
    char *dout = g_be->raw_alloc(g_be, 0, out_bytes), *din = g_be->raw_alloc(g_be, 0, in_bytes);
    if (!dout || !din) return false;
    g_be->copy_h2d(g_be, 0, din, hi, in_bytes);
    g_be->copy_h2d(g_be, 0, dout, ho, out_bytes);
    vo->data = dout, vi->data = din;
    const bool ok = g_be->fft(g_be, 0, vo, vi, dim, kind, fwd, scale);
    g_be->synchronize(g_be, 0);
    g_be->copy_d2h(g_be, 0, ho, dout, out_bytes);
    vo->data = ho, vi->data = hi;
    g_be->raw_free(g_be, 0, dout, out_bytes), g_be->raw_free(g_be, 0, din, in_bytes);
    if (ts_error() != TS_OK) printf("cuda fft: %s\n", ts_error_message());
    return ok && ts_error() == TS_OK;
}

typedef struct layout {
    int dim;         /* the transformed dim of a [lines, n] (dim 1) or [n, lines] (dim 0) view */
    int64_t in_step; /* element strides: along dim, and between lines */
    int64_t in_line;
    int64_t out_step;
    int64_t out_line;
} layout;

/* contiguous [lines, len] */
static layout rows(int64_t lin, int64_t lout) { return (layout){1, 1, lin, 1, lout}; }

/* One call of the slot on `lines` random lines laid out as lay says, checked element by element
 * against the long double DFT. kind, fwd (C2C), scale. Returns the worst error / tolerance. */
static double check(ts_fft_kind kind, bool dbl, int64_t n, int64_t lines, bool fwd, double scale,
                    layout lay, const char *what) {
    const int64_t nin = kind == TS_FFT_C2R ? n / 2 + 1 : n;
    const int64_t nout = kind == TS_FFT_R2C ? n / 2 + 1 : n;
    const int win = kind == TS_FFT_R2C ? 1 : 2, wout = kind == TS_FFT_C2R ? 1 : 2;
    const size_t sc = dbl ? 8 : 4;
    const int64_t in_span = (nin - 1) * lay.in_step + (lines - 1) * lay.in_line + 1;
    const int64_t out_span = (nout - 1) * lay.out_step + (lines - 1) * lay.out_line + 1;
    char *in = calloc((size_t)(in_span * win), sc), *out = calloc((size_t)(out_span * wout), sc);
    ld *xr = calloc((size_t)n, sizeof(ld)), *xi = calloc((size_t)n, sizeof(ld));
    ld *yr = calloc((size_t)n, sizeof(ld)), *yi = calloc((size_t)n, sizeof(ld));
    const ts_dtype rdt = dbl ? TS_F64 : TS_F32, cdt = dbl ? TS_C128 : TS_C64;
    /* out's gaps hold a sentinel the kernel must leave */
    for (int64_t e = 0; e < out_span * wout; e++) wr(out, dbl, e, 7.0);
    for (int64_t e = 0; e < in_span * win; e++) wr(in, dbl, e, urand());
    ts_kview vi, vo;
    const ts_dtype dti = kind == TS_FFT_R2C ? rdt : cdt, dto = kind == TS_FFT_C2R ? rdt : cdt;
    if (lay.dim == 1) {
        vi = mk(in, dti, lines, nin, lay.in_line, lay.in_step);
        vo = mk(out, dto, lines, nout, lay.out_line, lay.out_step);
    } else {
        vi = mk(in, dti, nin, lines, lay.in_step, lay.in_line);
        vo = mk(out, dto, nout, lines, lay.out_step, lay.out_line);
    }
    const bool ok = call_fft(&vo, (size_t)(out_span * wout) * sc, &vi, (size_t)(in_span * win) * sc,
                             lay.dim, kind, fwd, scale);
    CHECK(ok);
    double worst = 0;
    for (int64_t l = 0; l < lines; l++) {
        double maxabs = 0;
        memset(xi, 0, sizeof(ld) * (size_t)n);
        for (int64_t j = 0; j < nin; j++) {
            const int64_t at = (j * lay.in_step + l * lay.in_line) * win;
            xr[j] = rd(in, dbl, at);
            if (win == 2) xi[j] = rd(in, dbl, at + 1);
        }
        if (kind == TS_FFT_C2R) { /* the Hermitian extension, Im X_0 and Im X_(n/2) dropped */
            xi[0] = 0;
            if (n % 2 == 0) xi[n / 2] = 0;
            for (int64_t k = 1; k < (n + 1) / 2; k++) xr[n - k] = xr[k], xi[n - k] = -xi[k];
        }
        for (int64_t j = 0; j < n; j++) {
            const double a = (double)sqrtl(xr[j] * xr[j] + xi[j] * xi[j]);
            if (a > maxabs) maxabs = a;
        }
        dft(n, nout, xr, xi, yr, yi, kind == TS_FFT_R2C || (kind == TS_FFT_C2C && fwd) ? -1 : 1);
        const double tol = tol_of(n, dbl, maxabs) * fabs(scale);
        double err = 0;
        for (int64_t k = 0; k < nout; k++) {
            if (!bin_checked(k, n, nout)) continue;
            const int64_t at = (k * lay.out_step + l * lay.out_line) * wout;
            const double er = fabs(rd(out, dbl, at) - (double)(scale * yr[k]));
            const double ei = wout == 2 ? fabs(rd(out, dbl, at + 1) - (double)(scale * yi[k])) : 0;
            if (er > err || er != er) err = er != er ? INFINITY : er;
            if (ei > err || ei != ei) err = ei != ei ? INFINITY : ei;
        }
        if (err / tol > worst) worst = err / tol;
        if (!(err <= tol))
            ts_test_failf(__FILE__, __LINE__, "%s %s kind %d n %lld line %lld: err %.3g > tol %.3g",
                          what, dbl ? "c128" : "c64", (int)kind, (long long)n, (long long)l, err,
                          tol);
        ts_test_record(err <= tol);
    }
    /* the gaps between out's elements kept the sentinel */
    bool kept = true;
    if (lay.out_step > 1 && lay.dim == 1 && lines == 1)
        for (int64_t e = 0; e < out_span; e++)
            if (e % lay.out_step)
                for (int w = 0; w < wout; w++) kept = kept && rd(out, dbl, e * wout + w) == 7.0;
    CHECK(kept);
    free(in), free(out), free(xr), free(xi), free(yr), free(yi);
    return worst;
}

static const int64_t LENGTHS[] = {1,  2,  3,  4,   5,   7,   8,   12,  16,   30,   31,
                                  61, 97, 98, 101, 194, 128, 210, 242, 1000, 1024, 4096};

static void test_lengths(void) {
    double worst = 0;
    for (size_t i = 0; i < sizeof LENGTHS / sizeof LENGTHS[0]; i++) {
        const int64_t n = LENGTHS[i], lines = n <= 128 ? 3 : 1, half = n / 2 + 1;
        for (int d = 0; d < 2; d++) {
            const bool dbl = d == 1;
            const double w[4] = {
                check(TS_FFT_C2C, dbl, n, lines, true, 1.0, rows(n, n), "c2c fwd"),
                check(TS_FFT_C2C, dbl, n, lines, false, 0.5, rows(n, n), "c2c bwd"),
                check(TS_FFT_C2R, dbl, n, lines, false, 1.0 / (double)n, rows(half, n), "c2r"),
                check(TS_FFT_R2C, dbl, n, lines, true, 1.0, rows(n, half), "r2c")};
            for (int k = 0; k < 4; k++) worst = w[k] > worst ? w[k] : worst;
        }
    }
    printf("lengths (%s): worst error %.3f of the tolerance\n", g_be->name, worst);
}

/* dim 0 of [n, lines] views, input and output with gaps, output strides unlike the input's */
static void test_strided(void) {
    const int64_t ns[] = {12, 30, 97, 64};
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
        const int64_t n = ns[i], half = n / 2 + 1;
        for (int d = 0; d < 2; d++) {
            const bool dbl = d == 1;
            /* [n, 3] with in strides (3 * 2, 2): every other element; out (1, n) transposed */
            check(TS_FFT_C2C, dbl, n, 3, true, 1.0, (layout){0, 6, 2, 1, n}, "c2c dim 0");
            check(TS_FFT_C2C, dbl, n, 3, false, 2.0, (layout){0, 3, 1, 2, 2 * n + 1}, "c2c dim 0");
            check(TS_FFT_R2C, dbl, n, 2, true, 1.0, (layout){0, 2, 2 * n + 3, 1, half},
                  "r2c dim 0");
            check(TS_FFT_C2R, dbl, n, 2, false, 1.0, (layout){0, 4, 1, 3, 1}, "c2r dim 0");
            /* one line along dim 1 with gaps in out: the gaps must keep their sentinel */
            check(TS_FFT_C2C, dbl, n, 1, true, 1.0, (layout){1, 3, 0, 2, 0}, "c2c gaps");
            check(TS_FFT_R2C, dbl, n, 1, true, 1.0, (layout){1, 2, 0, 3, 0}, "r2c gaps");
            check(TS_FFT_C2R, dbl, n, 1, false, 1.0, (layout){1, 1, 0, 2, 0}, "c2r gaps");
        }
    }
}

/* whole vector groups (fft_lines_vec.c: 8 float32 or 4 float64 lines) in each of their gathers
 * and scatters, and a last partial group: 19 contiguous lines (float32 pairs by 8 x 8
 * transposes; element counts not a multiple of 4 leave a tail), and dim 0 of [n, 19] (neighbouring
 * lines: complex pairs deinterleaved, the packed reals of R2C and C2R read and written as rows),
 * for a FACTORS plan with an odd number of passes (32: 2 4 4, so the result ends in the work
 * buffer), an even one (16), a generic radix (30, 98) and Bluestein (97) */
static void test_groups(void) {
    const int64_t ns[] = {16, 30, 32, 97, 98}, L = 19;
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
        const int64_t n = ns[i], half = n / 2 + 1;
        for (int d = 0; d < 2; d++) {
            const bool dbl = d == 1;
            check(TS_FFT_C2C, dbl, n, L, true, 1.0, rows(n, n), "c2c groups");
            check(TS_FFT_C2C, dbl, n, L, false, 0.5, rows(n, n), "c2c groups");
            check(TS_FFT_R2C, dbl, n, L, true, 1.0, rows(n, half), "r2c groups");
            check(TS_FFT_C2R, dbl, n, L, false, 1.0 / (double)n, rows(half, n), "c2r groups");
            const layout cols = {0, L, 1, L, 1};
            check(TS_FFT_C2C, dbl, n, L, true, 1.0, cols, "c2c dim 0 groups");
            check(TS_FFT_C2C, dbl, n, L, false, 0.25, cols, "c2c dim 0 groups");
            check(TS_FFT_R2C, dbl, n, L, true, 1.0, cols, "r2c dim 0 groups");
            check(TS_FFT_C2R, dbl, n, L, false, 1.0 / (double)n, cols, "c2r dim 0 groups");
        }
    }
}

/* a [3, n, 5] view along dim 1 (15 lines in groups of up to 5 neighbours, split between
 * threads mid-row: n = 600 is enough work for two) into a [5, 3, n]-strided output */
static void test_3d(void) {
    const int64_t A = 3, n = 600, C = 5;
    for (int d = 0; d < 2; d++) {
        const bool dbl = d == 1;
        const size_t sc = dbl ? 8 : 4, cnt = (size_t)(A * n * C * 2);
        char *x = malloc(cnt * sc), *y = malloc(cnt * sc);
        for (size_t e = 0; e < cnt; e++) wr(x, dbl, (int64_t)e, urand());
        ts_kview vx, vy;
        memset(&vx, 0, sizeof vx), memset(&vy, 0, sizeof vy);
        vx.data = x, vy.data = y, vx.ndim = vy.ndim = 3;
        vx.dtype = vy.dtype = dbl ? TS_C128 : TS_C64;
        const int64_t shape[3] = {A, n, C}, xs[3] = {n * C, C, 1}, ys[3] = {n, 1, A * n};
        memcpy(vx.shape, shape, sizeof shape), memcpy(vy.shape, shape, sizeof shape);
        memcpy(vx.strides, xs, sizeof xs), memcpy(vy.strides, ys, sizeof ys);
        CHECK(tsi_cpu_fft(NULL, 0, &vy, &vx, 1, TS_FFT_C2C, true, 1.0));
        ld *xr = malloc(sizeof(ld) * (size_t)n), *xi = malloc(sizeof(ld) * (size_t)n);
        ld *yr = malloc(sizeof(ld) * (size_t)n), *yi = malloc(sizeof(ld) * (size_t)n);
        bool ok = true;
        for (int64_t a = 0; a < A; a++)
            for (int64_t c = 0; c < C; c++) {
                double maxabs = 0, err = 0;
                for (int64_t j = 0; j < n; j++) {
                    const int64_t at = 2 * (a * xs[0] + j * xs[1] + c * xs[2]);
                    xr[j] = rd(x, dbl, at), xi[j] = rd(x, dbl, at + 1);
                    const double m = hypot((double)xr[j], (double)xi[j]);
                    maxabs = m > maxabs ? m : maxabs;
                }
                dft(n, n, xr, xi, yr, yi, -1);
                for (int64_t k = 0; k < n; k++) {
                    if (!bin_checked(k, n, n)) continue;
                    const int64_t at = 2 * (a * ys[0] + k * ys[1] + c * ys[2]);
                    const double er = fabs(rd(y, dbl, at) - (double)yr[k]),
                                 ei = fabs(rd(y, dbl, at + 1) - (double)yi[k]);
                    err = er > err || er != er ? er : err;
                    err = ei > err || ei != ei ? ei : err;
                }
                ok = ok && err <= tol_of(n, dbl, maxabs);
            }
        CHECK(ok);
        free(x), free(y), free(xr), free(xi), free(yr), free(yi);
    }
}

/* forward then backward with scale 1 / n gives the input back; many lines, so that the lines
 * run on several threads */
static void test_round_trip(void) {
    const int64_t n = 60, lines = 500;
    for (int d = 0; d < 2; d++) {
        const bool dbl = d == 1;
        const size_t sc = dbl ? 8 : 4, cnt = (size_t)(n * lines * 2);
        char *x = malloc(cnt * sc), *y = malloc(cnt * sc), *z = malloc(cnt * sc);
        for (size_t e = 0; e < cnt; e++) wr(x, dbl, (int64_t)e, urand());
        const ts_dtype dt = dbl ? TS_C128 : TS_C64;
        ts_kview vx = mk(x, dt, lines, n, n, 1), vy = mk(y, dt, lines, n, n, 1),
                 vz = mk(z, dt, lines, n, n, 1);
        CHECK(tsi_cpu_fft(NULL, 0, &vy, &vx, 1, TS_FFT_C2C, true, 1.0));
        CHECK(tsi_cpu_fft(NULL, 0, &vz, &vy, 1, TS_FFT_C2C, false, 1.0 / (double)n));
        double err = 0;
        for (size_t e = 0; e < cnt; e++) {
            const double d0 = fabs(rd(z, dbl, (int64_t)e) - rd(x, dbl, (int64_t)e));
            err = d0 > err || d0 != d0 ? d0 : err;
        }
        /* two transforms, each within tol_of / sqrt(n) relative to max|x| = 1 after scaling */
        const double tol = 2 * tol_of(n, dbl, 1.0) / sqrt((double)n);
        CHECK(err <= tol);
        if (!(err <= tol))
            printf("round trip %s: err %.3g tol %.3g\n", dbl ? "c128" : "c64", err, tol);
        free(x), free(y), free(z);
    }
}

/* C2R reads neither Im X_0 nor, for even n, Im X_(n/2): changing them changes nothing */
static void test_c2r_ignores_imag(void) {
    const int64_t ns[] = {8, 9, 98};
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
        const int64_t n = ns[i], h = n / 2 + 1;
        double *x = malloc(sizeof(double) * (size_t)(2 * h)), a[256], b[256];
        for (int64_t e = 0; e < 2 * h; e++) x[e] = urand();
        ts_kview vx = mk(x, TS_C128, 1, h, h, 1), va = mk(a, TS_F64, 1, n, n, 1),
                 vb = mk(b, TS_F64, 1, n, n, 1);
        CHECK(tsi_cpu_fft(NULL, 0, &va, &vx, 1, TS_FFT_C2R, false, 1.0));
        x[1] = 123.0;
        if (n % 2 == 0) x[2 * (h - 1) + 1] = -55.0;
        CHECK(tsi_cpu_fft(NULL, 0, &vb, &vx, 1, TS_FFT_C2R, false, 1.0));
        CHECK(memcmp(a, b, sizeof(double) * (size_t)n) == 0);
        free(x);
    }
}

/* every allocation the slot makes (plan, Bluestein's inner plan, scratch) failing in turn: false
 * and nothing written, then success; lengths not used above, so their plans are built here */
static void test_alloc_failures(void) {
    const int64_t ns[] = {4 * 1031, 2 * 1033};
    const ts_fft_kind kinds[] = {TS_FFT_C2C, TS_FFT_R2C};
    for (size_t i = 0; i < 2; i++) {
        const int64_t n = ns[i], nout = kinds[i] == TS_FFT_R2C ? n / 2 + 1 : n;
        float *x = calloc((size_t)(2 * n), sizeof(float)), *y = malloc(sizeof(float) * 2 * nout);
        const ts_dtype dti = kinds[i] == TS_FFT_R2C ? TS_F32 : TS_C64;
        ts_kview vx = mk(x, dti, 1, n, n, 1), vy = mk(y, TS_C64, 1, nout, nout, 1);
        x[0] = 1;
        int fails = 0;
        bool done = false;
        for (int64_t k = 1; k < 64 && !done; k++) {
            for (int64_t e = 0; e < 2 * nout; e++) y[e] = 7.0f;
            ts_fault_alloc_set(k);
            const bool ok = tsi_cpu_fft(NULL, 0, &vy, &vx, 1, kinds[i], true, 1.0);
            const bool fired = ts_fault_alloc_fired();
            ts_fault_alloc_set(-1);
            if (fired) {
                fails++;
                bool kept = !ok;
                for (int64_t e = 0; e < 2 * nout; e++) kept = kept && y[e] == 7.0f;
                CHECK(kept);
            } else {
                done = true;
                CHECK(ok);
                bool ones = ok; /* the transform of a unit impulse (through Bluestein) */
                for (int64_t e = 0; e < nout; e++)
                    ones = ones && fabsf(y[2 * e] - 1.0f) < 1e-4f && fabsf(y[2 * e + 1]) < 1e-4f;
                CHECK(ones);
            }
        }
        CHECK(done && fails >= 2);
        free(x), free(y);
    }
}

/* plans: the factors, Bluestein's convolution length (the least 2^a 3^b 5^c >= 2n - 1), and the
 * cache: one plan per length and kind while held, never evicted while held, none kept past 2^16 */
static void test_plans(void) {
    const struct {
        int64_t n, m;
        int nfct;
    } want[] = {{1, 0, 0},     {1024, 0, 5},    {2048, 0, 6},  {210, 0, 4},   {97, 200, 0},
                {101, 216, 0}, {1031, 2160, 0}, {113, 225, 0}, {4 * 61, 0, 2}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        tsi_fft_plan *p = tsi_fft_plan_get(want[i].n, false);
        CHECK(p && p->n == want[i].n);
        if (!p) continue;
        CHECK(p->kind == (want[i].m ? FFT_PLAN_BLUESTEIN : FFT_PLAN_FACTORS));
        if (want[i].m)
            CHECK(p->m == want[i].m && p->inner && p->inner->n == want[i].m);
        else
            CHECK(p->nfct == want[i].nfct);
        tsi_fft_plan_put(p);
    }
    tsi_fft_plan *a = tsi_fft_plan_get(96, false), *b = tsi_fft_plan_get(96, false);
    tsi_fft_plan *r = tsi_fft_plan_get(96, true);
    CHECK(a && a == b && a->refs == 2 && a->cached && r && r != a && r->kind == FFT_PLAN_REAL_EVEN);
    tsi_fft_plan_put(b);
    CHECK(a->refs == 1);
    for (int64_t n = 2; n < 40; n++) tsi_fft_plan_put(tsi_fft_plan_get(n, false)); /* churn */
    tsi_fft_plan *c = tsi_fft_plan_get(96, false);
    CHECK(c == a && a->refs == 2 && a->n == 96); /* held: still cached */
    tsi_fft_plan_put(c), tsi_fft_plan_put(a), tsi_fft_plan_put(r);
    CHECK(a->refs == 0);
    tsi_fft_plan *big = tsi_fft_plan_get((1 << 16) + 2, false), *big2 = NULL;
    if (big) big2 = tsi_fft_plan_get((1 << 16) + 2, false);
    CHECK(big && big2 && big != big2 && !big->cached);
    tsi_fft_plan_put(big), tsi_fft_plan_put(big2);
}

int main(void) {
    tsi_init_once();
    const ts_backend *cpu = tsi_backend_for(TS_CPU);
    CHECK(cpu && cpu->fft == tsi_cpu_fft);
    g_be = cpu;
    test_plans();
    test_lengths();
    test_strided();
    test_groups();
    test_3d();
    test_round_trip();
    test_c2r_ignores_imag();
    test_alloc_failures();
    /* the CUDA slot (cuFFT) against the same references, where there is a GPU */
    const ts_backend *cuda = tsi_backend_for(TS_CUDA);
    if (cuda && cuda->device_count(cuda) > 0 && cuda->fft) {
        g_be = cuda;
        test_lengths();
        test_strided();
        test_groups();
    } else {
        ts_test_no_cuda("test_fft_kernel: the cuda fft slot");
    }
    return ts_test_finish();
}
