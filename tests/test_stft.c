/* test_stft.c — ts_stft / ts_istft (include/tessera/fft.h, src/ops/stft.c) on every device against
 * references computed here in long double: the frames padded (each pad mode), windowed (padded
 * window, align_to_window) and transformed by a direct DFT with exact twiddles; the inverse by a
 * direct inverse DFT (the half-spectrum's Hermitian extension, or the full complex one), the
 * window, overlap-add, the squared window's envelope, trimming and padding. Also the round trip
 * istft(stft(x)) == x, ts_gradcheck of both, and the refusals with PyTorch's checks (n_fft, hop,
 * win_length, the window's shape and device, NOLA, dtypes, return_complex, onesided). */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tessera.h"
#include "tessera/autograd.h"
#include "tessera/complex.h"
#include "tessera/fft.h"
#include "ts_test.h"

static ts_device devs[TS_TEST_MAX_DEVICES];
static int ndev;

#define PI_L 3.141592653589793238462643383279502884L
#define MAXN 4096
#define PI_D 3.14159265358979323846

/* deterministic values in [-1, 1) */
static double rnd(unsigned *s) {
    *s = *s * 1664525u + 1013904223u;
    return (double)(*s >> 8) / (double)(1u << 23) - 1.0;
}

static ts_tensor *from(const double *v, ts_shape s, ts_device d) {
    return ts_to(ts_tensor_f64(s, v, (ts_opts){.dtype = TS_F64}), d);
}
/* re / im [n] as a complex128 [shape] tensor */
static ts_tensor *cfrom(const double *re, const double *im, ts_shape s, ts_device d) {
    int64_t n = 1;
    for (int i = 0; i < s.ndim; i++) n *= s.dims[i];
    double *v = malloc(sizeof(double) * (size_t)(2 * n));
    for (int64_t i = 0; i < n; i++) v[2 * i] = re[i], v[2 * i + 1] = im ? im[i] : 0;
    ts_shape r = s;
    r.dims[r.ndim++] = 2;
    ts_tensor *t = ts_view_as_complex(from(v, r, d));
    free(v);
    return t;
}
/* a tensor's values on the host as double (complex: interleaved pairs); the count or -1 */
static int64_t host(ts_tensor *t, double *out, int64_t cap) {
    if (!t) return -1;
    ts_tensor *r = ts_dtype_is_complex(ts_dtype_of(t)) ? ts_view_as_real(t) : t;
    ts_tensor *h = ts_contiguous(ts_to_dtype(ts_to(r, ts_cpu()), TS_F64));
    const int64_t n = h ? ts_numel(h) : -1;
    if (n < 0 || n > cap || ts_copy_to_host(h, out, (size_t)n * sizeof(double)) != TS_OK) return -1;
    return n;
}

/* ------------------------------------------------------------------ the reference stft */
typedef struct stft_case {
    const char *name;
    int64_t nb, len, n_fft, hop, win; /* nb 0: a 1-D input */
    bool cx_in, has_window, cx_window, center, normalized, onesided, align;
    ts_pad_mode mode;
} stft_case;

/* the padded signal's sample j of batch b (as torch.nn.functional.pad's modes) */
static void padded(const stft_case *c, const double *xr, const double *xi, int64_t b, int64_t j,
                   long double *re, long double *im) {
    const int64_t p = c->center ? c->n_fft / 2 : 0, L = c->len;
    int64_t i = j - p;
    if (i < 0 || i >= L) {
        switch (c->mode) {
        case TS_PAD_CONSTANT:
            *re = *im = 0;
            return;
        case TS_PAD_REFLECT:
            i = i < 0 ? -i : 2 * (L - 1) - i;
            break;
        case TS_PAD_REPLICATE:
            i = i < 0 ? 0 : L - 1;
            break;
        default:
            i = ((i % L) + L) % L;
            break;
        }
    }
    *re = xr[b * L + i];
    *im = xi ? xi[b * L + i] : 0;
}

/* out [nb][freq][frames][2]; returns freq * frames, or -1 */
static int64_t ref_stft(const stft_case *c, const double *xr, const double *xi, const double *wr,
                        const double *wi, double *out, int64_t *freq_out, int64_t *frames_out,
                        double *frame_max) {
    const int64_t n = c->n_fft, lp = c->len + (c->center ? 2 * (n / 2) : 0);
    const int64_t left = (n - c->win) / 2, span = c->align ? c->win : n;
    const int64_t frames = 1 + (lp - span) / c->hop, freq = c->onesided ? n / 2 + 1 : n;
    const int64_t nb = c->nb ? c->nb : 1;
    static long double fr[MAXN], fi[MAXN];
    *frame_max = 0;
    for (int64_t b = 0; b < nb; b++)
        for (int64_t m = 0; m < frames; m++) {
            for (int64_t k = 0; k < n; k++) {
                long double vr = 0, vi = 0, ar = 1, ai = 0;
                const bool in = k >= left && k < left + c->win;
                if (c->has_window)
                    ar = in ? wr[k - left] : 0, ai = in && wi ? wi[k - left] : 0;
                else if (!in)
                    ar = 0;
                const int64_t j = c->align ? m * c->hop + k - left : m * c->hop + k;
                if (in || !c->align) padded(c, xr, xi, b, j, &vr, &vi);
                fr[k] = vr * ar - vi * ai;
                fi[k] = vr * ai + vi * ar;
                if (fabsl(fr[k]) + fabsl(fi[k]) > *frame_max)
                    *frame_max = (double)(fabsl(fr[k]) + fabsl(fi[k]));
            }
            for (int64_t f = 0; f < freq; f++) {
                long double sr = 0, si = 0;
                for (int64_t k = 0; k < n; k++) {
                    const long double a = -2 * PI_L * (long double)((f * k) % n) / n;
                    sr += fr[k] * cosl(a) - fi[k] * sinl(a);
                    si += fr[k] * sinl(a) + fi[k] * cosl(a);
                }
                if (c->normalized) sr /= sqrtl((long double)n), si /= sqrtl((long double)n);
                double *o = out + 2 * ((b * freq + f) * frames + m);
                o[0] = (double)sr, o[1] = (double)si;
            }
        }
    *freq_out = freq, *frames_out = frames;
    return freq * frames;
}

static ts_tensor *run_stft(const stft_case *c, const double *xr, const double *xi, const double *wr,
                           const double *wi, ts_device d, int return_complex) {
    const ts_shape xs = c->nb ? TS_SHAPE(c->nb, c->len) : TS_SHAPE(c->len);
    ts_tensor *x = c->cx_in ? cfrom(xr, xi, xs, d) : from(xr, xs, d);
    ts_stft_opts o = ts_stft_defaults();
    o.hop_length = c->hop, o.win_length = c->win, o.center = c->center, o.pad_mode = c->mode;
    o.normalized = c->normalized, o.onesided = c->onesided, o.return_complex = return_complex;
    if (c->align) o.align_to_window = 1;
    if (c->has_window)
        o.window =
            c->cx_window ? cfrom(wr, wi, TS_SHAPE(c->win), d) : from(wr, TS_SHAPE(c->win), d);
    return ts_stft(x, c->n_fft, &o);
}

static const stft_case stft_cases[] = {
    {"real 1-D, hann-like window of 12 in 16, reflect", 0, 50, 16, 4, 12, false, true, false, true,
     false, true, false, TS_PAD_REFLECT},
    {"real batch, no window, not centred, two-sided, normalized", 3, 40, 10, 3, 10, false, false,
     false, false, true, false, false, TS_PAD_REFLECT},
    {"real batch, constant pad, odd n_fft 7", 2, 23, 7, 2, 5, false, true, false, true, false, true,
     false, TS_PAD_CONSTANT},
    {"real 1-D, replicate", 0, 30, 8, 3, 8, false, true, false, true, false, true, false,
     TS_PAD_REPLICATE},
    {"real 1-D, circular", 0, 30, 8, 5, 6, false, true, false, true, true, true, false,
     TS_PAD_CIRCULAR},
    {"complex batch, real window, reflect", 2, 33, 12, 4, 9, true, true, false, true, false, false,
     false, TS_PAD_REFLECT},
    {"real input, complex window", 0, 40, 10, 3, 10, false, true, true, false, false, false, false,
     TS_PAD_REFLECT},
    {"align_to_window, window of 6 in 10", 0, 40, 10, 3, 6, false, true, false, false, false, true,
     true, TS_PAD_REFLECT},
    {"a prime n_fft 31 (Bluestein)", 0, 80, 31, 7, 31, false, true, false, true, false, true, false,
     TS_PAD_REFLECT},
};

/* Each value within 8 eps (log2 n + 1) sqrt(n) max|frame| of the direct DFT: the FFT's own bound
 * (decision 0022: 5 eps (log2 n + 1) sqrt(n)) with room for the window's product and the
 * normalisation's rounding. */
static void test_stft_values(void) {
    static double xr[512], xi[512], wr[64], wi[64], want[2 * MAXN * 8], got[2 * MAXN * 8];
    for (size_t ci = 0; ci < sizeof stft_cases / sizeof *stft_cases; ci++) {
        const stft_case *c = &stft_cases[ci];
        unsigned seed = 7 + (unsigned)ci;
        for (int i = 0; i < 512; i++) xr[i] = rnd(&seed), xi[i] = rnd(&seed);
        for (int i = 0; i < 64; i++) wr[i] = 0.5 + 0.5 * rnd(&seed), wi[i] = rnd(&seed);
        int64_t freq, frames;
        double fmax;
        const int64_t nref = ref_stft(c, xr, c->cx_in ? xi : NULL, wr, c->cx_window ? wi : NULL,
                                      want, &freq, &frames, &fmax);
        const int64_t nb = c->nb ? c->nb : 1, nv = 2 * nb * nref;
        const double n = (double)c->n_fft;
        const double tol = 8 * DBL_EPSILON * (log2(n) + 1) * sqrt(n) * fmax;
        for (int di = 0; di < ndev; di++) {
            ts_scope_begin();
            ts_tensor *y = run_stft(c, xr, xi, wr, wi, devs[di], 1);
            const bool shape_ok = y && ts_dtype_of(y) == TS_C128 && ts_ndim(y) == (c->nb ? 3 : 2) &&
                                  ts_shape_of(y).dims[ts_ndim(y) - 2] == freq &&
                                  ts_shape_of(y).dims[ts_ndim(y) - 1] == frames &&
                                  (!c->nb || ts_shape_of(y).dims[0] == c->nb);
            double worst = 0;
            int64_t at = 0;
            if (shape_ok && host(y, got, nv) == nv)
                for (int64_t i = 0; i < nv; i++) {
                    const double e = fabs(got[i] - want[i]);
                    if (!(e <= worst)) worst = e, at = i;
                }
            else
                worst = INFINITY;
            ts_test_record(worst <= tol);
            if (!(worst <= tol))
                ts_test_failf(__FILE__, __LINE__,
                              "stft %s on %s: %s; value %lld got %.17g want %.17g (tol %.3g)%s",
                              c->name, ts_device_str(devs[di]), shape_ok ? "values" : "shape",
                              (long long)at, shape_ok ? got[at] : 0.0, want[at], tol,
                              ts_test_error_str());
            /* return_complex = 0: the same values as view_as_real's [..., 2] float64 */
            ts_tensor *yr = run_stft(c, xr, xi, wr, wi, devs[di], 0);
            CHECK(yr && ts_dtype_of(yr) == TS_F64 && ts_ndim(yr) == ts_ndim(y) + 1 &&
                  ts_shape_of(yr).dims[ts_ndim(yr) - 1] == 2 && host(yr, got + nv, nv) == nv &&
                  memcmp(got, got + nv, sizeof(double) * (size_t)nv) == 0);
            ts_error_clear();
            ts_scope_end();
        }
    }
}

/* float32 in, complex64 out, within float32's version of the bound; a float64 window promotes */
static void test_stft_float32(void) {
    static const stft_case c = {"f32", 0,     64,   16,    4,    16,    false,
                                true,  false, true, false, true, false, TS_PAD_REFLECT};
    static double x[64], w[16], want[2 * 9 * 17], got[2 * 9 * 17];
    unsigned seed = 99;
    for (int i = 0; i < 64; i++) x[i] = (float)rnd(&seed);
    for (int i = 0; i < 16; i++) w[i] = (float)(0.5 - 0.5 * cos(2 * PI_D * i / 16));
    int64_t freq, frames;
    double fm;
    const int64_t nv = 2 * ref_stft(&c, x, NULL, w, NULL, want, &freq, &frames, &fm);
    const double tol = 8 * FLT_EPSILON * 5 * 4 * fm;
    for (int di = 0; di < ndev; di++) {
        ts_scope_begin();
        ts_stft_opts o = ts_stft_defaults();
        o.return_complex = 1;
        o.window = ts_to_dtype(from(w, TS_SHAPE(16), devs[di]), TS_F32);
        ts_tensor *xf = ts_to_dtype(from(x, TS_SHAPE(64), devs[di]), TS_F32);
        ts_tensor *y = ts_stft(xf, 16, &o);
        CHECK(y && ts_dtype_of(y) == TS_C64 && host(y, got, nv) == nv);
        double worst = 0;
        for (int64_t i = 0; i < nv; i++) worst = fmax(worst, fabs(got[i] - want[i]));
        CHECK(worst <= tol);
        o.window = from(w, TS_SHAPE(16), devs[di]);
        y = ts_stft(xf, 16, &o);
        CHECK(y && ts_dtype_of(y) == TS_C128);
        ts_scope_end();
    }
}

/* ------------------------------------------------------------------ the reference istft */
typedef struct istft_case {
    const char *name;
    int64_t nb, freq, frames, n_fft, hop, win, length; /* length -1: default */
    bool has_window, cx_window, center, normalized, return_complex;
    int onesided; /* -1 default */
} istft_case;

/* x [nb][freq][frames] (re, im); out [nb][len] (re, im); the output length, or -1 (NOLA) */
static int64_t ref_istft(const istft_case *c, const double *xr, const double *xi, const double *wr,
                         const double *wi, double *out) {
    const int64_t n = c->n_fft, nb = c->nb ? c->nb : 1, left = (n - c->win) / 2;
    const int64_t total = n + c->hop * (c->frames - 1);
    static long double yr[8][MAXN], yi[8][MAXN], er[MAXN], ei[MAXN];
    memset(yr, 0, sizeof yr), memset(yi, 0, sizeof yi), memset(er, 0, sizeof er),
        memset(ei, 0, sizeof ei);
    const long double scale = c->normalized ? 1 / sqrtl((long double)n) : 1.0L / n;
    for (int64_t b = 0; b < nb; b++)
        for (int64_t m = 0; m < c->frames; m++)
            for (int64_t t = 0; t < n; t++) {
                long double sr = 0, si = 0;
                if (c->return_complex) {
                    for (int64_t k = 0; k < n; k++) {
                        const int64_t i = (b * c->freq + k) * c->frames + m;
                        const long double a = 2 * PI_L * (long double)((k * t) % n) / n;
                        sr += xr[i] * cosl(a) - xi[i] * sinl(a);
                        si += xr[i] * sinl(a) + xi[i] * cosl(a);
                    }
                } else { /* Re of the Hermitian extension of bins 0 .. n / 2 (the imaginary
                          * parts of bins 0 and n / 2 drop out, as a C2R transform drops them) */
                    for (int64_t k = 0; k <= n / 2; k++) {
                        const int64_t i = (b * c->freq + k) * c->frames + m;
                        const long double a = 2 * PI_L * (long double)((k * t) % n) / n;
                        const long double re = xr[i] * cosl(a) - xi[i] * sinl(a);
                        sr += (k == 0 || 2 * k == n) ? re : 2 * re;
                    }
                }
                sr *= scale, si *= scale;
                long double ar = 1, ai = 0;
                const bool in = t >= left && t < left + c->win;
                if (c->has_window)
                    ar = in ? wr[t - left] : 0, ai = in && c->cx_window ? wi[t - left] : 0;
                else if (!in)
                    ar = 0;
                yr[b][m * c->hop + t] += sr * ar - si * ai;
                yi[b][m * c->hop + t] += sr * ai + si * ar;
                if (b == 0)
                    er[m * c->hop + t] += ar * ar - ai * ai, ei[m * c->hop + t] += 2 * ar * ai;
            }
    const int64_t start = c->center ? n / 2 : 0;
    const int64_t end = c->length >= 0 ? start + c->length : c->center ? total - n / 2 : total;
    for (int64_t t = start; t < end && t < total; t++)
        if (hypotl(er[t], ei[t]) < 1e-11) return -1;
    const int64_t len = end - start;
    for (int64_t b = 0; b < nb; b++)
        for (int64_t j = 0; j < len; j++) {
            const int64_t t = start + j;
            double *o = out + 2 * (b * len + j);
            if (t >= total) {
                o[0] = o[1] = 0;
                continue;
            }
            const long double d = er[t] * er[t] + ei[t] * ei[t];
            o[0] = (double)((yr[b][t] * er[t] + yi[b][t] * ei[t]) / d);
            o[1] = (double)((yi[b][t] * er[t] - yr[b][t] * ei[t]) / d);
        }
    return len;
}

static ts_tensor *run_istft(const istft_case *c, const double *xr, const double *xi,
                            const double *wr, const double *wi, ts_device d) {
    const ts_shape xs = c->nb ? TS_SHAPE(c->nb, c->freq, c->frames) : TS_SHAPE(c->freq, c->frames);
    ts_stft_opts o = ts_stft_defaults();
    o.hop_length = c->hop, o.win_length = c->win, o.center = c->center;
    o.normalized = c->normalized, o.onesided = c->onesided, o.return_complex = c->return_complex;
    if (c->length >= 0) o.length = c->length;
    if (c->has_window)
        o.window =
            c->cx_window ? cfrom(wr, wi, TS_SHAPE(c->win), d) : from(wr, TS_SHAPE(c->win), d);
    return ts_istft(cfrom(xr, xi, xs, d), c->n_fft, &o);
}

static const istft_case istft_cases[] = {
    {"onesided, default window, centred", 0, 9, 6, 16, 4, 16, -1, false, false, true, false, false,
     -1},
    {"onesided batch, window of 7 in odd n_fft 9, hop 3", 2, 5, 7, 9, 3, 7, -1, true, false, true,
     false, false, -1},
    {"not centred, window of n_fft", 0, 5, 7, 8, 3, 8, -1, true, false, false, false, false, -1},
    {"two-sided input to a real output (first half used), normalized", 0, 10, 8, 10, 2, 10, -1,
     true, false, true, true, false, 0},
    {"complex output, complex window", 2, 8, 5, 8, 2, 8, -1, true, true, false, false, true, -1},
    {"length beyond the frames: zeros", 0, 9, 4, 16, 4, 16, 40, true, false, true, false, false,
     -1},
    {"length shorter: trimmed", 0, 9, 6, 16, 4, 16, 11, true, false, true, false, false, -1},
};

/* within 16 eps (log2 n + 1) sqrt(n) (n / hop) max|x| / min(envelope) of the direct sums: the
 * inverse transform's bound, n / hop overlapping frames, the envelope's division */
static void test_istft_values(void) {
    static double xr[2048], xi[2048], wr[64], wi[64], want[2 * 2 * MAXN], got[2 * 2 * MAXN];
    for (size_t ci = 0; ci < sizeof istft_cases / sizeof *istft_cases; ci++) {
        const istft_case *c = &istft_cases[ci];
        unsigned seed = 31 + (unsigned)ci;
        for (int i = 0; i < 2048; i++) xr[i] = rnd(&seed), xi[i] = rnd(&seed);
        for (int i = 0; i < 64; i++) wr[i] = 0.75 + 0.25 * rnd(&seed), wi[i] = 0.25 * rnd(&seed);
        const int64_t len = ref_istft(c, xr, xi, wr, wi, want);
        CHECK(len >= 0);
        const int64_t nb = c->nb ? c->nb : 1, nv = (c->return_complex ? 2 : 1) * nb * len;
        if (!c->return_complex) /* the reference's real parts */
            for (int64_t i = 0; i < nb * len; i++) want[i] = want[2 * i];
        const double n = (double)c->n_fft;
        const double tol = 16 * DBL_EPSILON * (log2(n) + 1) * sqrt(n) * (n / (double)c->hop) /
                           (0.5 * 0.5) * (c->cx_window ? 2 : 1);
        for (int di = 0; di < ndev; di++) {
            ts_scope_begin();
            ts_tensor *y = run_istft(c, xr, xi, wr, wi, devs[di]);
            const bool ok_shape = y && ts_ndim(y) == (c->nb ? 2 : 1) &&
                                  ts_shape_of(y).dims[ts_ndim(y) - 1] == len &&
                                  ts_dtype_of(y) == (c->return_complex ? TS_C128 : TS_F64);
            double worst = ok_shape && host(y, got, nv) == nv ? 0 : INFINITY;
            int64_t at = 0;
            for (int64_t i = 0; worst < INFINITY && i < nv; i++) {
                const double e = fabs(got[i] - want[i]);
                if (!(e <= worst)) worst = e, at = i;
            }
            ts_test_record(worst <= tol);
            if (!(worst <= tol))
                ts_test_failf(__FILE__, __LINE__,
                              "istft %s on %s: value %lld got %.17g want %.17g (worst %.3g, tol "
                              "%.3g)%s",
                              c->name, ts_device_str(devs[di]), (long long)at,
                              ok_shape ? got[at] : 0.0, want[at], worst, tol, ts_test_error_str());
            ts_error_clear();
            ts_scope_end();
        }
    }
}

/* istft(stft(x)) == x: a periodic Hann window with hop n_fft / 4 (its squared overlap-add is 3/2
 * away from the edges), centred (the reflect padding covers the edges), length given */
static void test_round_trip(void) {
    enum { B = 2, L = 200, N = 32 };
    static double x[B * L], w[N], got[2 * B * L];
    unsigned seed = 5;
    for (int i = 0; i < B * L; i++) x[i] = rnd(&seed);
    for (int i = 0; i < N; i++) w[i] = 0.5 - 0.5 * cos(2 * PI_D * i / N);
    for (int di = 0; di < ndev; di++) {
        for (int cx = 0; cx < 2; cx++) {
            ts_scope_begin();
            ts_stft_opts o = ts_stft_defaults();
            o.window = from(w, TS_SHAPE(N), devs[di]);
            o.return_complex = 1;
            o.normalized = cx; /* the normalized pair inverts too */
            ts_tensor *xt = from(x, TS_SHAPE(B, L), devs[di]);
            if (cx) xt = cfrom(x, x + 1, TS_SHAPE(B, L - 1), devs[di]);
            ts_tensor *s = ts_stft(xt, N, &o);
            o.length = cx ? L - 1 : L;
            o.onesided = cx ? 0 : -1;
            o.return_complex = cx;
            ts_tensor *y = ts_istft(s, N, &o);
            const int64_t nv = cx ? 2 * B * (L - 1) : B * L;
            CHECK(y && ts_dtype_of(y) == (cx ? TS_C128 : TS_F64) && host(y, got, nv) == nv);
            double worst = 0;
            if (!cx)
                for (int64_t i = 0; i < nv; i++) worst = fmax(worst, fabs(got[i] - x[i]));
            else /* complex: re = x[b L' + j], im = x[b L' + j + 1] with L' = L - 1 */
                for (int64_t b = 0; b < B; b++)
                    for (int64_t j = 0; j < L - 1; j++) {
                        const double *g = got + 2 * (b * (L - 1) + j);
                        worst = fmax(worst, fabs(g[0] - x[b * (L - 1) + j]));
                        worst = fmax(worst, fabs(g[1] - x[b * (L - 1) + j + 1]));
                    }
            const double tol = 2 * 8 * DBL_EPSILON * (log2(N) + 1) * sqrt(N) * 4 / 1.5 * 4;
            ts_test_record(worst <= tol);
            if (!(worst <= tol))
                ts_test_failf(__FILE__, __LINE__, "round trip (%s) on %s: worst %.3g, tol %.3g%s",
                              cx ? "complex" : "real", ts_device_str(devs[di]), worst, tol,
                              ts_test_error_str());
            ts_error_clear();
            ts_scope_end();
        }
    }
}

/* ------------------------------------------------------------------ gradients */
static ts_tensor *g_stft(ts_tensor *const *in, int n, void *ctx) {
    const int mode = *(const int *)ctx;
    ts_stft_opts o = ts_stft_defaults();
    o.hop_length = 3, o.win_length = 6, o.return_complex = 1;
    o.window = n > 1 ? in[1] : NULL;
    o.pad_mode = mode == 0 ? TS_PAD_REFLECT : TS_PAD_CONSTANT;
    o.onesided = mode == 2 ? 0 : -1;
    o.normalized = mode == 1;
    ts_tensor *x = mode == 2 ? ts_view_as_complex(in[0]) : in[0];
    return ts_view_as_real(ts_stft(x, 8, &o));
}
static ts_tensor *g_istft(ts_tensor *const *in, int n, void *ctx) {
    const int mode = *(const int *)ctx;
    ts_stft_opts o = ts_stft_defaults();
    o.hop_length = 2, o.window = n > 1 ? in[1] : NULL, o.center = mode == 0;
    o.return_complex = mode == 1, o.onesided = mode == 1 ? 0 : -1;
    ts_tensor *y = ts_istft(ts_view_as_complex(in[0]), 8, &o);
    return mode == 1 ? ts_view_as_real(y) : y;
}

static void test_grads(void) {
    static double x[2 * 40 * 2], w[8], s[2 * 8 * 6 * 2];
    unsigned seed = 3;
    for (int i = 0; i < 160; i++) x[i] = rnd(&seed);
    for (int i = 0; i < 8; i++) w[i] = 1 + 0.3 * rnd(&seed);
    for (int i = 0; i < 192; i++) s[i] = rnd(&seed);
    const ts_gradcheck_opts go = {0};
    for (int di = 0; di < ndev; di++) {
        for (int mode = 0; mode < 3; mode++) {
            ts_scope_begin();
            ts_opts ro = {.dtype = TS_F64, .device = devs[di], .requires_grad = true};
            ts_tensor *in[2] = {mode == 2 ? ts_tensor_f64(TS_SHAPE(2, 20, 2), x, ro)
                                          : ts_tensor_f64(TS_SHAPE(2, 20), x, ro),
                                ts_tensor_f64(TS_SHAPE(6), w, ro)};
            const bool ok = ts_gradcheck(g_stft, &mode, in, 2, go);
            ts_test_record(ok);
            if (!ok)
                ts_test_failf(__FILE__, __LINE__, "gradcheck stft mode %d on %s%s", mode,
                              ts_device_str(devs[di]), ts_test_error_str());
            ts_error_clear();
            ts_scope_end();
        }
        for (int mode = 0; mode < 3; mode++) {
            ts_scope_begin();
            ts_opts ro = {.dtype = TS_F64, .device = devs[di], .requires_grad = true};
            const int64_t freq = mode == 1 ? 8 : 5;
            ts_tensor *in[2] = {ts_tensor_f64(TS_SHAPE(2, freq, 6, 2), s, ro),
                                ts_tensor_f64(TS_SHAPE(8), w, ro)};
            const bool ok = ts_gradcheck(g_istft, &mode, in, 2, go);
            ts_test_record(ok);
            if (!ok)
                ts_test_failf(__FILE__, __LINE__, "gradcheck istft mode %d on %s%s", mode,
                              ts_device_str(devs[di]), ts_test_error_str());
            ts_error_clear();
            ts_scope_end();
        }
    }
}

/* ------------------------------------------------------------------ refusals */
static void test_errors(void) {
    ts_scope_begin();
    static double v[100];
    for (int i = 0; i < 100; i++) v[i] = i % 7;
    ts_tensor *x = from(v, TS_SHAPE(100), ts_cpu());
    ts_stft_opts o = ts_stft_defaults();
    o.return_complex = 1;
    CHECK(ts_stft(x, 0, &o) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "stft: expected 0 < n_fft");
    o.center = false;
    CHECK(ts_stft(x, 101, &o) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "expected 0 < n_fft <= 100, but got n_fft=101");
    o.center = true;
    o.hop_length = 0;
    CHECK(ts_stft(x, 10, &o) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "expected hop_length > 0, but got hop_length=0");
    o.hop_length = TS_STFT_DEFAULT;
    CHECK(ts_stft(x, 3, &o) == NULL); /* the default hop 3 / 4 is 0 */
    CHECK_ERR_HAS(TS_ERR_ARG, "expected hop_length > 0");
    o.win_length = 11;
    CHECK(ts_stft(x, 10, &o) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "expected 0 < win_length <= n_fft, but got win_length=11");
    o.win_length = TS_STFT_DEFAULT;
    o.window = from(v, TS_SHAPE(9), ts_cpu());
    CHECK(ts_stft(x, 10, &o) == NULL);
    CHECK_ERR_HAS(TS_ERR_SHAPE, "expected a 1D window tensor of size equal to win_length=10");
    o.window = from(v, TS_SHAPE(2, 5), ts_cpu());
    CHECK(ts_stft(x, 10, &o) == NULL);
    CHECK_ERR_HAS(TS_ERR_SHAPE, "expected a 1D window tensor");
    o.window = NULL;
    CHECK(ts_stft(from(v, TS_SHAPE(2, 2, 25), ts_cpu()), 4, &o) == NULL);
    CHECK_ERR_HAS(TS_ERR_SHAPE, "stft: expected a 1D or 2D tensor");
    CHECK(ts_stft(ts_to_dtype(x, TS_I64), 10, &o) == NULL);
    CHECK_ERR_HAS(TS_ERR_DTYPE, "expected a tensor of floating point or complex values");
    CHECK(ts_stft(ts_to_dtype(x, TS_F16), 10, &o) == NULL);
    CHECK_ERR_HAS(TS_ERR_DTYPE, "stft: Unsupported dtype Half");
    o.align_to_window = 0;
    CHECK(ts_stft(x, 10, &o) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "align_to_window should only be set when center = false");
    o.align_to_window = -1;
    o.return_complex = -1;
    CHECK(ts_stft(x, 10, &o) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "requires the return_complex parameter be given for real inputs");
    o.onesided = 1;
    ts_tensor *xc = ts_to_dtype(x, TS_C128);
    CHECK(ts_stft(xc, 10, &o) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "Cannot have onesided output if window or input is complex");
    o.onesided = -1;
    ts_tensor *yc = ts_stft(xc, 10, &o); /* complex input: return_complex defaults to true */
    CHECK(yc && ts_dtype_of(yc) == TS_C128 && ts_shape_of(yc).dims[0] == 10);
    o.return_complex = 1;
    o.pad_mode = TS_PAD_REFLECT;
    CHECK(ts_stft(from(v, TS_SHAPE(4), ts_cpu()), 10, &o) == NULL); /* reflect pad 5 >= 4 */
    ts_error_clear();
    if (ndev > 1) { /* the window on another device */
        o.window = from(v, TS_SHAPE(10), devs[1]);
        CHECK(ts_stft(x, 10, &o) == NULL);
        CHECK_ERR(TS_ERR_DEVICE);
        o.window = NULL;
    }
    /* istft */
    ts_stft_opts io = ts_stft_defaults();
    ts_tensor *spec = ts_stft(x, 10, &o); /* [6, 51] */
    CHECK(spec != NULL);
    CHECK(ts_istft(ts_real(spec), 10, &io) == NULL);
    CHECK_ERR_HAS(TS_ERR_DTYPE, "istft: requires a complex-valued input tensor");
    CHECK(ts_istft(spec, 12, &io) == NULL);
    CHECK_ERR_HAS(TS_ERR_SHAPE, "to match n_fft / 2 + 1 when onesided=True, but got 6");
    io.onesided = 0;
    CHECK(ts_istft(spec, 10, &io) == NULL);
    CHECK_ERR_HAS(TS_ERR_SHAPE, "to match n_fft when onesided=False, but got 6");
    CHECK(ts_istft(spec, 4, &io) == NULL); /* 6 frequencies are more than n_fft 4 too */
    CHECK_ERR_HAS(TS_ERR_SHAPE, "to match n_fft when onesided=False, but got 6");
    io.onesided = -1;
    CHECK(ts_istft(spec, 8, &io) == NULL); /* 6 frequencies are more than 8 / 2 + 1 too */
    CHECK_ERR_HAS(TS_ERR_SHAPE, "to match n_fft / 2 + 1 when onesided=True, but got 6");
    io.onesided = 1;
    CHECK(ts_istft(spec, 8, &io) == NULL);
    CHECK_ERR_HAS(TS_ERR_SHAPE, "to match n_fft / 2 + 1 when onesided=True, but got 6");
    io.onesided = -1;
    io.hop_length = 11;
    CHECK(ts_istft(spec, 10, &io) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "expected 0 < hop_length <= win_length");
    io.hop_length = 0;
    CHECK(ts_istft(spec, 10, &io) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "expected 0 < hop_length <= win_length (0, 10)");
    io.hop_length = TS_STFT_DEFAULT;
    io.win_length = 11;
    CHECK(ts_istft(spec, 10, &io) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "expected 0 < win_length <= n_fft");
    io.win_length = TS_STFT_DEFAULT;
    io.window = from(v, TS_SHAPE(9), ts_cpu());
    CHECK(ts_istft(spec, 10, &io) == NULL);
    CHECK_ERR_HAS(TS_ERR_SHAPE, "Invalid window shape");
    io.window = ts_zeros(TS_SHAPE(10), (ts_opts){.dtype = TS_F64}); /* NOLA fails */
    CHECK(ts_istft(spec, 10, &io) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "window overlap add min: 0");
    static const double half[10] = {0, 0, 0, 0, 0, 1, 1, 1, 1, 1};
    io.window = from(half, TS_SHAPE(10), ts_cpu()); /* hop 10: the first half of each frame is 0 */
    io.hop_length = 10;
    io.center = false;
    CHECK(ts_istft(spec, 10, &io) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "NOLA");
    io.center = true;
    io.hop_length = TS_STFT_DEFAULT;
    io.window = NULL;
    io.return_complex = 1;
    CHECK(ts_istft(spec, 10, &io) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "Cannot have onesided output");
    io.return_complex = 0;
    io.window = ts_to_dtype(from(v + 1, TS_SHAPE(10), ts_cpu()), TS_C128);
    CHECK(ts_istft(spec, 10, &io) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "Complex windows are incompatible with return_complex=False");
    io.window = NULL;
    CHECK(ts_istft(ts_narrow(spec, 1, 0, 0), 10, &io) == NULL);
    CHECK_ERR_HAS(TS_ERR_SHAPE, "input tensor cannot be empty");
    CHECK(ts_istft(ts_reshape(spec, TS_SHAPE(1, 1, 6, 51)), 10, &io) == NULL);
    CHECK_ERR_HAS(TS_ERR_SHAPE, "expected a 2D or 3D complex tensor");
    io.length = -1;
    CHECK(ts_istft(spec, 10, &io) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "length must be non-negative");
    io.length = 0;
    ts_tensor *e = ts_istft(spec, 10, &io);
    CHECK(e && ts_numel(e) == 0);
    if (ndev > 1) {
        io.length = TS_STFT_DEFAULT;
        io.window = from(v, TS_SHAPE(10), devs[1]);
        CHECK(ts_istft(spec, 10, &io) == NULL);
        CHECK_ERR(TS_ERR_DEVICE);
    }
    CHECK(ts_stft(NULL, 10, &o) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    ts_scope_end();
}

int main(void) {
    ndev = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    test_stft_values();
    test_stft_float32();
    test_istft_values();
    test_round_trip();
    test_grads();
    test_errors();
    return ts_test_finish();
}
