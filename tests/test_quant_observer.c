/* test_quant_observer.c — the observers' statistics (src/ops/quant_observer.c) against references
 * written here in float64: histc's binning on values whose bin position is exact or far from an
 * edge, the combine of a histogram whose range grows (the 16 sub-bins' mid-points re-binned,
 * values chosen dyadic so that float32 is exact), the one-value combine, the L2 search on a
 * hand-worked histogram and against a float64 re-implementation of PyTorch's search, the moving
 * average in float32, per-channel min / max, and the refusals. PyTorch's own bits:
 * tests/python/test_quant_observer.py. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tessera/quant.h"
#include "ts_test.h"

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static double urand(void) { /* [0, 1) */
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}

static ts_tensor *vec(const float *v, int64_t n) {
    return ts_from_data(TS_SHAPE(n), TS_F32, v, (ts_opts){0});
}
static ts_tensor *scalar(float v) { return ts_from_data(TS_SHAPE(), TS_F32, &v, (ts_opts){0}); }
static float get1(ts_tensor *t) {
    float v = NAN;
    ts_copy_to_host(t, &v, sizeof v);
    return v;
}

/* an observer's state: histogram of `bins` zeros, min +inf, max -inf */
typedef struct {
    ts_tensor *h, *mn, *mx;
} state;
static state fresh(int64_t bins) {
    return (state){ts_zeros(TS_SHAPE(bins), (ts_opts){0}), scalar(INFINITY), scalar(-INFINITY)};
}
static int update(state *s, const float *x, int64_t n) {
    return ts_histogram_observer_update(s->h, s->mn, s->mx, vec(x, n)) == TS_OK;
}

/* the first batch: bins of float64 positions; values on the grid lo + k (hi - lo) / 4bins
 * (exact edges included: an edge value goes up, the max into the last bin) and random values
 * kept at least 1e-3 of a bin away from an edge (float32 and float64 bin them alike) */
static void test_first_batch(void) {
    ts_scope_begin();
    enum { B = 64, N = 600 };
    const double lo = -2.0, hi = 2.0;
    float x[N];
    int n = 0;
    for (int k = 0; k <= 4 * B; k++) x[n++] = (float)(lo + k * (hi - lo) / (4 * B));
    while (n < N) {
        const double v = lo + urand() * (hi - lo), pos = (v - lo) * B / (hi - lo);
        if (pos - floor(pos) > 1e-3 && ceil(pos) - pos > 1e-3) x[n++] = (float)v;
    }
    double ref[B] = {0};
    for (int i = 0; i < N; i++) {
        int p = (int)floor(((double)x[i] - lo) * B / (hi - lo));
        ref[p == B ? B - 1 : p] += 1;
    }
    state s = fresh(B);
    CHECK(update(&s, x, N));
    float h[B];
    ts_copy_to_host(s.h, h, sizeof h);
    int bad = 0;
    for (int j = 0; j < B; j++) bad += h[j] != ref[j];
    CHECK_EQ(bad, 0);
    CHECK(get1(s.mn) == -2.0f && get1(s.mx) == 2.0f);
    /* the same range again: counts added */
    CHECK(update(&s, x, N));
    ts_copy_to_host(s.h, h, sizeof h);
    bad = 0;
    for (int j = 0; j < B; j++) bad += h[j] != 2 * ref[j];
    CHECK_EQ(bad, 0);
    /* a constant batch: histc over [c - 1, c + 1], the value in the middle bin */
    state c = fresh(8);
    const float k[3] = {0.5f, 0.5f, 0.5f};
    CHECK(update(&c, k, 3));
    float hc[8];
    ts_copy_to_host(c.h, hc, sizeof hc);
    CHECK(hc[4] == 3 && get1(c.mn) == 0.5f && get1(c.mx) == 0.5f);
    /* then a wider batch: the one value re-binned (histc of it over the new range, times its
     * count) plus the new batch */
    const float w[2] = {1.0f, 0.75f};
    CHECK(update(&c, w, 2));
    ts_copy_to_host(c.h, hc, sizeof hc);
    /* [0.5, 1]: width 1/16; 0.5 -> bin 0 (x3), 0.75 -> bin 4, 1.0 -> bin 7 */
    const float want[8] = {3, 0, 0, 0, 1, 0, 0, 1};
    CHECK(memcmp(hc, want, sizeof want) == 0);
    CHECK(get1(c.mn) == 0.5f && get1(c.mx) == 1.0f);
    /* a constant whose +-1 rounds away in float32 (edges equal): the middle bin, never outside
     * (PyTorch casts NaN there; its result for 1e8 is the middle bin too) */
    state big = fresh(8);
    const float e8[3] = {1e8f, 1e8f, 1e8f};
    CHECK(update(&big, e8, 3));
    ts_copy_to_host(big.h, hc, sizeof hc);
    CHECK(hc[4] == 3 && hc[0] + hc[1] + hc[2] + hc[3] + hc[5] + hc[6] + hc[7] == 0);
    CHECK_OK();
    ts_scope_end();
}

/* a range that grows: the old histogram's bins split in 16 sub-bins at their mid-points,
 * re-binned over the new range with count / 16 each; float64 reference */
static void test_grow(void) {
    ts_scope_begin();
    enum { B = 8 };
    const float a[6] = {0.0f, 0.125f, 0.5f, 0.5f, 0.75f, 1.0f}; /* [0, 1], width 1/8 */
    const float b[3] = {-1.0f, 0.25f, 3.0f};                    /* grows to [-1, 3], width 1/2 */
    const float c[2] = {-0.5f, 2.9f};                           /* inside: added */
    state s = fresh(B);
    CHECK(update(&s, a, 6));
    double old[B] = {0}, ref[B] = {0};
    for (int i = 0; i < 6; i++) {
        const int p = (int)floor(a[i] * 8.0);
        old[p == B ? B - 1 : p] += 1;
    }
    CHECK(update(&s, b, 3));
    const double nlo = -1.0, nw = 0.5;
    for (int i = 0; i < B; i++)
        for (int k = 0; k < 16; k++) {
            const double mid = (i * 16 + k + 0.5) / 128.0; /* sub-bin width 1/128 */
            int j = (int)floor((mid - nlo) / nw);
            ref[j < 0 ? 0 : j >= B ? B - 1 : j] += old[i] / 16.0;
        }
    for (int i = 0; i < 3; i++) {
        const int p = (int)floor((b[i] - nlo) / nw);
        ref[p == B ? B - 1 : p] += 1;
    }
    float h[B];
    ts_copy_to_host(s.h, h, sizeof h);
    int bad = 0;
    for (int j = 0; j < B; j++) bad += h[j] != ref[j];
    CHECK_EQ(bad, 0);
    CHECK(get1(s.mn) == -1.0f && get1(s.mx) == 3.0f);
    CHECK(update(&s, c, 2));
    ref[1] += 1, ref[7] += 1; /* -0.5 -> bin 1, 2.9 -> bin 7 */
    ts_copy_to_host(s.h, h, sizeof h);
    bad = 0;
    for (int j = 0; j < B; j++) bad += h[j] != ref[j];
    CHECK_EQ(bad, 0);
    /* inf values are dropped, an all-inf batch changes nothing */
    const float inf[3] = {INFINITY, -INFINITY, 2.0f};
    CHECK(update(&s, inf, 3));
    ref[6] += 1;
    ts_copy_to_host(s.h, h, sizeof h);
    bad = 0;
    for (int j = 0; j < B; j++) bad += h[j] != ref[j];
    CHECK_EQ(bad, 0);
    CHECK(update(&s, inf, 2) && get1(s.mn) == -1.0f && get1(s.mx) == 3.0f);
    CHECK_OK();
    ts_scope_end();
}

/* PyTorch's _non_linear_param_search in float64 (the reference): the range [start, end] of bins */
static double qerr64(const double *h, int B, double mn, double mx, int dst, int s, int e) {
    const double bw = (mx - mn) / B, dbw = bw * (e - s + 1) / dst;
    if (dbw == 0) return 0;
    double norm = 0;
    for (int i = 0; i < B; i++) {
        const double beg = (i - s) * bw, end = beg + bw, dens = h[i] / bw;
        const double db = fmin(fmax(floor(beg / dbw), 0), dst - 1);
        const double de = fmin(fmax(floor(end / dbw), 0), dst - 1);
        const double dlb = beg - (db + 0.5) * dbw, dle = end - (de * dbw + dbw / 2);
        const double hf = dbw / 2;
        norm += dens * (hf * hf * hf - dlb * dlb * dlb) / 3;
        norm += (de - db - 1) * dens * (2 * hf * hf * hf) / 3;
        norm += dens * (dle * dle * dle + hf * hf * hf) / 3;
    }
    return norm;
}
static void search64(const double *h, int B, double mn, double mx, int dst, int *sb, int *eb) {
    double total = 0, cs[256];
    for (int i = 0; i < B; i++) cs[i] = (total += h[i]);
    double alpha = 0, beta = 1, nmin = INFINITY;
    *sb = 0, *eb = B - 1;
    while (alpha < beta) {
        const double na = alpha + 1e-5, nb = beta - 1e-5;
        int l = *sb, r = *eb;
        while (l < *eb && cs[l] < na * total) l++;
        while (r > *sb && cs[r] > nb * total) r--;
        int ns = *sb, ne = *eb;
        if (l - *sb > *eb - r)
            ns = l, alpha = na;
        else
            ne = r, beta = nb;
        if (ns == *sb && ne == *eb) continue;
        const double nv = qerr64(h, B, mn, mx, dst, ns, ne);
        if (nv > nmin) break;
        nmin = nv, *sb = ns, *eb = ne;
    }
}

static void test_search(void) {
    ts_scope_begin();
    /* hand-worked: all the mass in the last of 4 bins over [0, 4]: the start moves to bin 3
     * (l = 3 > eb - r = 1), after which nothing moves: the range is [3, 4] */
    const float one[4] = {0, 0, 0, 7};
    ts_tensor *lo = NULL, *hi = NULL;
    CHECK(ts_histogram_observer_search(vec(one, 4), scalar(0), scalar(4), 256, &lo, &hi) == TS_OK);
    CHECK(lo && hi && get1(lo) == 3.0f && get1(hi) == 4.0f);
    /* and its qparams: quint8 [0, 255] affine over [min(3, 0), 4]: scale 4 / 255, zp 0 */
    ts_tensor *sc = NULL, *zp = NULL;
    CHECK(ts_histogram_observer_qparams(vec(one, 4), scalar(0), scalar(4), 256, 0, 255, false, 0,
                                        1.1920928955078125e-07, &sc, &zp) == TS_OK);
    int64_t z = -1;
    if (zp) ts_copy_to_host(zp, &z, sizeof z);
    CHECK(sc && get1(sc) == 4.0f / 255.0f && z == 0);
    /* nothing observed: scale 1, zero point 0 */
    CHECK(ts_histogram_observer_qparams(vec(one, 4), scalar(INFINITY), scalar(-INFINITY), 256, 0,
                                        255, false, 0, 1e-7, &sc, &zp) == TS_OK);
    ts_copy_to_host(zp, &z, sizeof z);
    CHECK(get1(sc) == 1.0f && z == 0);
    /* random histograms (a bulk and sparse outliers) against the float64 search */
    int bad = 0;
    for (int t = 0; t < 12; t++) {
        enum { B = 128 };
        double h[B];
        float hf[B];
        const int c = 20 + (int)(urand() * 80);
        for (int i = 0; i < B; i++) {
            const double d = (i - c) / (4.0 + 10 * urand());
            h[i] = floor(200 * exp(-d * d) + (urand() < 0.05 ? 3 : 0));
            hf[i] = (float)h[i];
        }
        const float mn = (float)(-1 - urand()), mx = (float)(2 + 3 * urand());
        int sb, eb;
        search64(h, B, mn, mx, 256, &sb, &eb);
        const float bw = (mx - mn) / (float)B;
        if (ts_histogram_observer_search(vec(hf, B), scalar(mn), scalar(mx), 256, &lo, &hi) !=
                TS_OK ||
            get1(lo) != mn + bw * (float)sb || get1(hi) != mn + bw * (float)(eb + 1)) {
            bad++;
            fprintf(stderr, "search %d: want bins [%d, %d], got [%g, %g]\n", t, sb, eb,
                    (double)((get1(lo) - mn) / bw), (double)((get1(hi) - mn) / bw));
        }
    }
    CHECK_EQ(bad, 0);
    CHECK_OK();
    ts_scope_end();
}

static void test_min_max(void) {
    ts_scope_begin();
    /* moving average: the first batch sets the range, later ones min + c (batch min - min) in
     * float32; NaN propagates */
    ts_tensor *mn = scalar(INFINITY), *mx = scalar(-INFINITY);
    const float a[3] = {-1.0f, 0.3f, 2.0f}, b[2] = {-3.1f, 7.7f};
    CHECK(ts_moving_average_minmax_update(mn, mx, vec(a, 3), 0.01) == TS_OK);
    CHECK(get1(mn) == -1.0f && get1(mx) == 2.0f);
    CHECK(ts_moving_average_minmax_update(mn, mx, vec(b, 2), 0.01) == TS_OK);
    volatile float c = 0.01f, m0 = -1.0f, m1 = 2.0f, d0 = -3.1f - m0, d1 = 7.7f - m1;
    volatile float e0 = c * d0, e1 = c * d1;
    CHECK(get1(mn) == m0 + e0 && get1(mx) == m1 + e1);
    CHECK(fabs(get1(mn) - (-1.0 + 0.01 * (-3.1 + 1.0))) < 1e-6);
    const float n[2] = {NAN, 1.0f};
    CHECK(ts_moving_average_minmax_update(mn, mx, vec(n, 2), 0.5) == TS_OK);
    CHECK(isnan(get1(mn)) && isnan(get1(mx)));
    /* per channel along axis 1 of [2, 3, 2], then a second batch */
    float x[12], y[12];
    for (int i = 0; i < 12; i++) x[i] = (float)(urand() * 8 - 4), y[i] = (float)(urand() * 8 - 4);
    ts_tensor *pm = ts_zeros(TS_SHAPE(0), (ts_opts){0}), *px = ts_zeros(TS_SHAPE(0), (ts_opts){0});
    ts_tensor *nm = NULL, *nx = NULL;
    const float *xs[2] = {x, y};
    double rmin[3] = {INFINITY, INFINITY, INFINITY}, rmax[3] = {-INFINITY, -INFINITY, -INFINITY};
    for (int r = 0; r < 2; r++) {
        ts_tensor *t = ts_from_data(TS_SHAPE(2, 3, 2), TS_F32, xs[r], (ts_opts){0});
        CHECK(ts_per_channel_minmax_update(pm, px, t, 1, &nm, &nx) == TS_OK);
        for (int o = 0; o < 2; o++)
            for (int ch = 0; ch < 3; ch++)
                for (int i = 0; i < 2; i++) {
                    const double v = xs[r][(o * 3 + ch) * 2 + i];
                    rmin[ch] = fmin(rmin[ch], v), rmax[ch] = fmax(rmax[ch], v);
                }
        float gm[3], gx[3];
        ts_copy_to_host(nm, gm, sizeof gm);
        ts_copy_to_host(nx, gx, sizeof gx);
        for (int ch = 0; ch < 3; ch++) CHECK(gm[ch] == rmin[ch] && gx[ch] == rmax[ch]);
        pm = nm, px = nx;
    }
    /* moving average per channel: a channel still at (+inf, -inf) (not yet seen) takes the
     * batch's min / max; a seen one moves by c (batch - old) in float32 */
    const float smin[3] = {INFINITY, -2.0f, INFINITY}, smax[3] = {-INFINITY, 3.0f, -INFINITY};
    const float bx[6] = {0.5f, -4.0f, -1.5f, 1.25f, 8.0f, -0.75f}; /* [2, 3]: channels on axis 1 */
    ts_tensor *bt = ts_from_data(TS_SHAPE(2, 3), TS_F32, bx, (ts_opts){0});
    CHECK(ts_moving_average_per_channel_minmax_update(vec(smin, 3), vec(smax, 3), bt, 1, 0.25, &nm,
                                                      &nx) == TS_OK);
    float gm[3] = {0}, gx[3] = {0};
    ts_copy_to_host(nm, gm, sizeof gm);
    ts_copy_to_host(nx, gx, sizeof gx);
    /* channel 1: batch min -4, max 8; -2 + 0.25 (-4 + 2) = -2.5, 3 + 0.25 (8 - 3) = 4.25 (exact) */
    CHECK(gm[0] == 0.5f && gx[0] == 1.25f && gm[1] == -2.5f && gx[1] == 4.25f && gm[2] == -1.5f &&
          gx[2] == -0.75f);
    CHECK_OK();
    ts_scope_end();
}

static void test_refusals(void) {
    ts_scope_begin();
    state s = fresh(8);
    const float nan[2] = {1.0f, NAN};
    CHECK(!update(&s, nan, 2));
    CHECK_ERR_HAS(TS_ERR_ARG, "histogram_observer_update: input has NaN (element 1)");
    ts_tensor *i32 = ts_zeros(TS_SHAPE(3), (ts_opts){.dtype = TS_I32});
    CHECK(ts_histogram_observer_update(s.h, s.mn, s.mx, i32) != TS_OK);
    CHECK_ERR_HAS(TS_ERR_DTYPE, "input must be floating point");
    CHECK(ts_histogram_observer_update(s.h, vec(nan, 1), s.mx, vec(nan, 1)) != TS_OK);
    CHECK_ERR_HAS(TS_ERR_ARG, "min_val must be a float32 tensor of 0 dims");
    ts_tensor *lo, *hi;
    CHECK(ts_histogram_observer_search(s.h, s.mn, s.mx, 256, &lo, &hi) != TS_OK);
    CHECK_ERR_HAS(TS_ERR_ARG, "are not a finite range");
    CHECK(ts_histogram_observer_search(s.h, scalar(0), scalar(1), 1, &lo, &hi) != TS_OK);
    CHECK_ERR_HAS(TS_ERR_ARG, "dst_nbins must be at least 2");
    CHECK(ts_histogram_observer_search(s.h, scalar(0), scalar(1), 256, NULL, &hi) != TS_OK);
    CHECK_ERR(TS_ERR_ARG);
    ts_tensor *e = ts_zeros(TS_SHAPE(0), (ts_opts){0}), *nm, *nx;
    CHECK(ts_per_channel_minmax_update(e, e, ts_zeros(TS_SHAPE(2, 3), (ts_opts){0}), 2, &nm, &nx) !=
          TS_OK);
    CHECK_ERR_HAS(TS_ERR_ARG, "ch_axis 2 is out of range");
    CHECK(ts_per_channel_minmax_update(vec(nan, 2), vec(nan, 2),
                                       ts_zeros(TS_SHAPE(2, 3), (ts_opts){0}), 1, &nm,
                                       &nx) != TS_OK);
    CHECK_ERR_HAS(TS_ERR_SHAPE, "2 / 2 channels, the input 3");
    CHECK(ts_moving_average_minmax_update(s.mn, s.mx, vec(nan, 2), INFINITY) != TS_OK);
    CHECK_ERR_HAS(TS_ERR_ARG, "averaging_constant must be finite");
    CHECK_OK();
    ts_scope_end();
}

int main(void) {
    test_first_batch();
    test_grow();
    test_search();
    test_min_max();
    test_refusals();
    return ts_test_finish();
}
