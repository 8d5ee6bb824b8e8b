/* test_scatter_statistics.c — issue 76's C forms of PyTorch ops that were Python compositions, on
 * every device against float64 loops: select_scatter / slice_scatter / diagonal_scatter
 * (src/ops/scatter_views.c), index_reduce (every reduction, include_self both ways) and put
 * (accumulate both ways, negative indices, in place) (src/ops/scatter.c), cov (plain,
 * correction, fweights and aweights) / corrcoef / cross (src/ops/statistics.c), tril_indices /
 * triu_indices / meshgrid (src/ops/coordinates.c), multinomial's frequencies (src/ops/sampling.c);
 * ts_gradcheck of each differentiable one; the
 * refusals naming the op and the argument. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "host_read_util.h"
#include "tessera.h"
#include "ts_test.h"

static ts_device devs[TS_TEST_MAX_DEVICES];
static int ndev;
static double a[256], b[256];

static void fill(double *v, int64_t n, int seed) {
    for (int64_t i = 0; i < n; i++) v[i] = sin(1.7 * (double)(i + 1) + 0.9 * seed) * 0.9;
}
static ts_tensor *mk(ts_shape s, const double *v, ts_device d, bool rg) {
    ts_tensor *t = ts_detach(ts_to(ts_tensor_f64(s, v, (ts_opts){.dtype = TS_F64}), d));
    if (rg) ts_set_requires_grad(t, true);
    return t;
}
static ts_tensor *mki(ts_shape s, const int64_t *v, ts_device d) {
    return ts_to(ts_tensor_i64(s, v, (ts_opts){.dtype = TS_I64}), d);
}
/* t has shape s and its values within tol * (1 + |ref|) of ref */
static bool close_to(ts_tensor *t, ts_shape s, const double *ref, double tol) {
    if (!t) return false;
    ts_shape g = ts_shape_of(t);
    if (g.ndim != s.ndim) return fprintf(stderr, "  ndim %d vs %d\n", g.ndim, s.ndim), false;
    for (int k = 0; k < s.ndim; k++)
        if (g.dims[k] != s.dims[k])
            return fprintf(stderr, "  dim %d: %lld vs %lld\n", k, (long long)g.dims[k],
                           (long long)s.dims[k]),
                   false;
    return near_all(t, ref, ts_numel(t), tol);
}
static bool same(ts_tensor *t, ts_shape s, const double *ref) { return close_to(t, s, ref, 0); }

/* ------------------------------------------------------------------ scatters into views */
static void test_scatter_views(ts_device d) {
    double r[64];
    ts_tensor *x = mk(TS_SHAPE(3, 4), a, d, false);
    /* select_scatter along dim 1 at index -1 (column 3) */
    ts_tensor *s3 = mk(TS_SHAPE(3), b, d, false);
    memcpy(r, a, 12 * sizeof *r);
    for (int i = 0; i < 3; i++) r[i * 4 + 3] = b[i];
    CHECK(same(ts_select_scatter(x, s3, 1, -1), TS_SHAPE(3, 4), r));
    /* slice_scatter along dim 1, [1:INT64_MAX:2] (columns 1 and 3) */
    ts_tensor *s32 = mk(TS_SHAPE(3, 2), b, d, false);
    memcpy(r, a, 12 * sizeof *r);
    for (int i = 0; i < 3; i++) r[i * 4 + 1] = b[i * 2], r[i * 4 + 3] = b[i * 2 + 1];
    CHECK(same(ts_slice_scatter(x, s32, 1, 1, INT64_MAX, 2), TS_SHAPE(3, 4), r));
    /* negative start (-3 of 4 is 1), the same slice */
    CHECK(same(ts_slice_scatter(x, s32, -1, -3, INT64_MAX, 2), TS_SHAPE(3, 4), r));
    /* diagonal_scatter, offset 1: (i, i + 1) for i < 3 */
    memcpy(r, a, 12 * sizeof *r);
    for (int i = 0; i < 3; i++) r[i * 4 + i + 1] = b[i];
    CHECK(same(ts_diagonal_scatter(x, s3, 1, 0, 1), TS_SHAPE(3, 4), r));
    /* offset -1: element k at x[k + 1][k], k < 2 */
    ts_tensor *s2 = mk(TS_SHAPE(2), b, d, false);
    memcpy(r, a, 12 * sizeof *r);
    for (int k = 0; k < 2; k++) r[(k + 1) * 4 + k] = b[k];
    CHECK(same(ts_diagonal_scatter(x, s2, -1, 0, 1), TS_SHAPE(3, 4), r));
    /* dims given the other way round (dim1 = 1, dim2 = 0), offset 1: q - p = 1 with p along dim
     * 1 and q along dim 0, i.e. x[k + 1][k] again */
    CHECK(same(ts_diagonal_scatter(x, s2, 1, 1, 0), TS_SHAPE(3, 4), r));
    /* src of another dtype is cast (copy_'s rule) */
    ts_tensor *s4f = ts_to_dtype(mk(TS_SHAPE(4), b, d, false), TS_F32);
    memcpy(r, a, 12 * sizeof *r);
    for (int j = 0; j < 4; j++) r[4 + j] = (double)(float)b[j];
    CHECK(same(ts_select_scatter(x, s4f, 0, 1), TS_SHAPE(3, 4), r));
    /* the input is not changed */
    CHECK(same(x, TS_SHAPE(3, 4), a));
}

/* ------------------------------------------------------------------ index_reduce, put */
/* index_reduce along dim 1 of a [3, 5] x with src [3, 4], index idx, as PyTorch defines it */
static void index_reduce_ref(const double *x, const double *src, const int64_t *idx, int red,
                             bool self, double *out) {
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 5; j++) {
            double v[5];
            int n = 0;
            if (self) v[n++] = x[i * 5 + j];
            bool hit = false;
            for (int k = 0; k < 4; k++)
                if (idx[k] == j) v[n++] = src[i * 4 + k], hit = true;
            double acc = v[0];
            for (int k = 1; k < n; k++)
                acc = red == 0   ? acc * v[k]
                      : red == 1 ? acc + v[k]
                      : red == 2 ? (v[k] > acc ? v[k] : acc)
                                 : (v[k] < acc ? v[k] : acc);
            out[i * 5 + j] = !hit ? x[i * 5 + j] : red == 1 ? acc / n : acc;
        }
}

static const char *const REDS[4] = {"prod", "mean", "amax", "amin"};

static void test_index_reduce_put(ts_device d) {
    double r[64];
    const int64_t iv[4] = {4, 0, 4, 3};
    ts_tensor *x = mk(TS_SHAPE(3, 5), a, d, false), *src = mk(TS_SHAPE(3, 4), b, d, false);
    ts_tensor *idx = mki(TS_SHAPE(4), iv, d);
    for (int red = 0; red < 4; red++)
        for (int self = 0; self < 2; self++) {
            index_reduce_ref(a, b, iv, red, self, r);
            ts_tensor *y = ts_index_reduce(x, 1, idx, src, REDS[red], self);
            if (!close_to(y, TS_SHAPE(3, 5), r, 1e-15)) {
                ts_test_failf(__FILE__, __LINE__, "index_reduce %s include_self=%d on %s",
                              REDS[red], self, ts_device_str(d));
                ts_test_record(false);
            } else {
                ts_test_record(true);
            }
        }
    /* int32 index and in place */
    const int32_t iv32[4] = {4, 0, 4, 3};
    ts_tensor *idx32 =
        ts_to(ts_from_data(TS_SHAPE(4), TS_I32, iv32, (ts_opts){.dtype = TS_I32}), d);
    ts_tensor *xc = ts_clone(x);
    index_reduce_ref(a, b, iv, 2, true, r);
    CHECK(ts_index_reduce_(xc, 1, idx32, src, "amax", true) == xc);
    CHECK(same(xc, TS_SHAPE(3, 5), r));
    /* put: flat positions, negatives from the end, accumulate adds repeats */
    const int64_t pv[4] = {0, 11, -1, 0};
    ts_tensor *pi = mki(TS_SHAPE(2, 2), pv, d), *ps = mk(TS_SHAPE(2, 2), b, d, false);
    ts_tensor *m = mk(TS_SHAPE(3, 4), a, d, false);
    memcpy(r, a, 12 * sizeof *r);
    r[0] += b[0] + b[3], r[11] += b[1] + b[2];
    CHECK(close_to(ts_put(m, pi, ps, true), TS_SHAPE(3, 4), r, 1e-15));
    const int64_t qv[3] = {1, -2, 5};
    memcpy(r, a, 12 * sizeof *r);
    r[1] = b[0], r[10] = b[1], r[5] = b[2];
    ts_tensor *mc = ts_clone(m);
    CHECK(ts_put_(mc, mki(TS_SHAPE(3), qv, d), mk(TS_SHAPE(3), b, d, false), false) == mc);
    CHECK(same(mc, TS_SHAPE(3, 4), r));
    /* a non-contiguous input: put over its row-major order */
    ts_tensor *mt = ts_t(m); /* [4, 3]: element (i, j) = a[j * 4 + i] */
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 3; j++) r[i * 3 + j] = a[j * 4 + i];
    r[1] = b[0], r[10] = b[1], r[5] = b[2];
    CHECK(same(ts_put(mt, mki(TS_SHAPE(3), qv, d), mk(TS_SHAPE(3), b, d, false), false),
               TS_SHAPE(4, 3), r));
}

/* ------------------------------------------------------------------ cov, corrcoef, cross */
/* cov of the rows of x [v, n] with weights w (NULL: ones) and aweights aw (NULL: none) */
static void cov_ref(const double *x, int v, int n, const double *fw, const double *aw, int64_t corr,
                    double *out) {
    double w[64], ws = 0, waw = 0, mean[8];
    for (int k = 0; k < n; k++) {
        w[k] = (fw ? fw[k] : 1) * (aw ? aw[k] : 1);
        ws += w[k];
        waw += w[k] * (aw ? aw[k] : 0);
    }
    for (int i = 0; i < v; i++) {
        mean[i] = 0;
        for (int k = 0; k < n; k++) mean[i] += w[k] * x[i * n + k];
        mean[i] /= ws;
    }
    double norm = aw && corr ? ws - (double)corr * waw / ws : ws - (double)corr;
    if (norm <= 0) norm = 0;
    for (int i = 0; i < v; i++)
        for (int j = 0; j < v; j++) {
            double s = 0;
            for (int k = 0; k < n; k++)
                s += w[k] * (x[i * n + k] - mean[i]) * (x[j * n + k] - mean[j]);
            out[i * v + j] = s / norm;
        }
}

static void test_statistics(ts_device d) {
    double r[64];
    ts_tensor *x = mk(TS_SHAPE(3, 5), a, d, false);
    cov_ref(a, 3, 5, NULL, NULL, 1, r);
    CHECK(close_to(ts_cov(x, 1, NULL, NULL), TS_SHAPE(3, 3), r, 1e-14));
    cov_ref(a, 3, 5, NULL, NULL, 0, r);
    CHECK(close_to(ts_cov(x, 0, NULL, NULL), TS_SHAPE(3, 3), r, 1e-14));
    const int64_t fwv[5] = {1, 2, 1, 3, 1};
    const double fwd[5] = {1, 2, 1, 3, 1}, awv[5] = {0.5, 1.0, 2.0, 1.0, 0.25};
    ts_tensor *fw = mki(TS_SHAPE(5), fwv, d), *aw = mk(TS_SHAPE(5), awv, d, false);
    cov_ref(a, 3, 5, fwd, awv, 1, r);
    CHECK(close_to(ts_cov(x, 1, fw, aw), TS_SHAPE(3, 3), r, 1e-14));
    cov_ref(a, 3, 5, fwd, NULL, 2, r);
    CHECK(close_to(ts_cov(x, 2, fw, NULL), TS_SHAPE(3, 3), r, 1e-14));
    cov_ref(a, 3, 5, NULL, awv, 1, r);
    CHECK(close_to(ts_cov(x, 1, NULL, aw), TS_SHAPE(3, 3), r, 1e-14));
    /* one variable (1-D): a 0-dim result; correction = n: factor 0, inf */
    cov_ref(a, 1, 5, NULL, NULL, 1, r);
    CHECK(close_to(ts_cov(mk(TS_SHAPE(5), a, d, false), 1, NULL, NULL), TS_SHAPE(), r, 1e-14));
    CHECK(isinf(ts_item(ts_cov(mk(TS_SHAPE(5), a, d, false), 5, NULL, NULL))));
    /* observation weights can make the factor negative (0.5 - 2 (0.2^2 + 0.3^2) / 0.5 = -0.02):
     * PyTorch's factor 0 there too, so +inf, not a negative variance */
    const double two[2] = {1, 2}, aw2[2] = {0.2, 0.3};
    ts_tensor *neg =
        ts_cov(mk(TS_SHAPE(1, 2), two, d, false), 2, NULL, mk(TS_SHAPE(2), aw2, d, false));
    CHECK(neg && isinf(ts_item(neg)) && ts_item(neg) > 0);
    /* corrcoef: cov / (sd_i sd_j), clamped */
    double c[9];
    cov_ref(a, 3, 5, NULL, NULL, 1, c);
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) r[i * 3 + j] = c[i * 3 + j] / sqrt(c[i * 4]) / sqrt(c[j * 4]);
    CHECK(close_to(ts_corrcoef(x), TS_SHAPE(3, 3), r, 1e-14));
    r[0] = 1;
    CHECK(close_to(ts_corrcoef(mk(TS_SHAPE(5), a, d, false)), TS_SHAPE(), r, 0));
    /* cross along dim 1 of [2, 3] and along the first dim of size 3 of [3, 2], broadcast */
    ts_tensor *u = mk(TS_SHAPE(2, 3), a, d, false), *w = mk(TS_SHAPE(2, 3), b, d, false);
    for (int i = 0; i < 2; i++)
        for (int k = 0; k < 3; k++)
            r[i * 3 + k] = a[i * 3 + (k + 1) % 3] * b[i * 3 + (k + 2) % 3] -
                           a[i * 3 + (k + 2) % 3] * b[i * 3 + (k + 1) % 3];
    CHECK(close_to(ts_cross(u, w, true, 1), TS_SHAPE(2, 3), r, 1e-15));
    CHECK(close_to(ts_cross(u, w, false, 0), TS_SHAPE(2, 3), r, 1e-15));
    CHECK(close_to(ts_linalg_cross(u, w, -1), TS_SHAPE(2, 3), r, 1e-15));
    ts_tensor *w1 = mk(TS_SHAPE(1, 3), b, d, false); /* broadcast over the rows */
    for (int i = 0; i < 2; i++)
        for (int k = 0; k < 3; k++)
            r[i * 3 + k] =
                a[i * 3 + (k + 1) % 3] * b[(k + 2) % 3] - a[i * 3 + (k + 2) % 3] * b[(k + 1) % 3];
    CHECK(close_to(ts_cross(u, w1, true, -1), TS_SHAPE(2, 3), r, 1e-15));
}

/* ------------------------------------------------------------------ tables, meshgrid */
static void test_tables(ts_device d) {
    double r[64];
    const ts_opts o = {.device = d};
    /* tril 4 x 3 offset -1: rows 1.. with j < i */
    const double tl[2][6] = {{1, 2, 2, 3, 3, 3}, {0, 0, 1, 0, 1, 2}};
    CHECK(same(ts_tril_indices(4, 3, -1, o), TS_SHAPE(2, 6), &tl[0][0]));
    /* triu 3 x 4 offset 1: j > i */
    const double tu[2][6] = {{0, 0, 0, 1, 1, 2}, {1, 2, 3, 2, 3, 3}};
    ts_tensor *ti = ts_triu_indices(3, 4, 1, (ts_opts){.dtype = TS_I32, .device = d});
    CHECK(ti && ts_dtype_of(ti) == TS_I32 && same(ti, TS_SHAPE(2, 6), &tu[0][0]));
    /* every (row, col, offset) against the predicate, counts included */
    for (int rows = 0; rows < 5; rows++)
        for (int cols = 0; cols < 5; cols++)
            for (int off = -5; off <= 5; off++) {
                double want[2][32];
                int n = 0, m = 0;
                double wu[2][32];
                for (int i = 0; i < rows; i++)
                    for (int j = 0; j < cols; j++) {
                        if (j - i <= off) want[0][n] = i, want[1][n++] = j;
                        if (j - i >= off) wu[0][m] = i, wu[1][m++] = j;
                    }
                for (int k = 0; k < n; k++) r[k] = want[0][k], r[n + k] = want[1][k];
                CHECK(same(ts_tril_indices(rows, cols, off, o), TS_SHAPE(2, n), r));
                for (int k = 0; k < m; k++) r[k] = wu[0][k], r[m + k] = wu[1][k];
                CHECK(same(ts_triu_indices(rows, cols, off, o), TS_SHAPE(2, m), r));
            }
    /* meshgrid ij and xy */
    ts_tensor *p = mk(TS_SHAPE(3), a, d, false), *q = mk(TS_SHAPE(2), b, d, false);
    ts_tensor *z = mk(TS_SHAPE(), b + 5, d, false);
    ts_tensor *in[3] = {p, q, z}, *out[3] = {0};
    CHECK(ts_meshgrid(in, 3, "ij", out, 3) == 3);
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 2; j++) r[i * 2 + j] = a[i];
    CHECK(same(out[0], TS_SHAPE(3, 2, 1), r));
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 2; j++) r[i * 2 + j] = b[j];
    CHECK(same(out[1], TS_SHAPE(3, 2, 1), r));
    for (int i = 0; i < 6; i++) r[i] = b[5];
    CHECK(same(out[2], TS_SHAPE(3, 2, 1), r));
    CHECK(ts_meshgrid(in, 2, "xy", out, 3) == 2);
    for (int j = 0; j < 2; j++)
        for (int i = 0; i < 3; i++) r[j * 3 + i] = a[i];
    CHECK(same(out[0], TS_SHAPE(2, 3), r));
    for (int j = 0; j < 2; j++)
        for (int i = 0; i < 3; i++) r[j * 3 + i] = b[j];
    CHECK(same(out[1], TS_SHAPE(2, 3), r));
    CHECK(ts_meshgrid(in, 3, NULL, NULL, 0) == 3); /* the count alone */
}

/* ------------------------------------------------------------------ multinomial */
/* int64 values of t (n of them) into v; false on a failed read */
static bool rd_i64(ts_tensor *t, int64_t *v, int64_t n) {
    ts_tensor *h = t ? ts_contiguous(ts_to(t, ts_cpu())) : NULL;
    return h && ts_dtype_of(h) == TS_I64 && ts_numel(h) == n &&
           ts_copy_to_host(h, v, (size_t)n * sizeof *v) == TS_OK;
}

static int64_t draws[40000];

static void test_multinomial(ts_device d) {
    /* with replacement: the frequencies of N draws within 6 standard deviations of p
     * (sqrt(p (1 - p) / N) <= 0.0036 for N = 20000); a zero weight is never drawn */
    const double w[4] = {0.2, 0.0, 1.2, 0.6}; /* p = 0.1, 0, 0.6, 0.3 */
    const int64_t N = 20000;
    ts_manual_seed(7);
    ts_tensor *y = ts_multinomial(mk(TS_SHAPE(4), w, d, false), N, true);
    CHECK(y && ts_shape_of(y).ndim == 1 && ts_size(y, 0) == N);
    int64_t cnt[4] = {0};
    bool in_range = rd_i64(y, draws, N);
    for (int64_t i = 0; in_range && i < N; i++) {
        in_range = draws[i] >= 0 && draws[i] < 4;
        if (in_range) cnt[draws[i]]++;
    }
    CHECK(in_range);
    for (int c = 0; c < 4; c++) {
        const double p = w[c] / 2.0, f = (double)cnt[c] / (double)N;
        const double sd = sqrt(p * (1 - p) / (double)N);
        if (!(fabs(f - p) <= 6 * sd + 1e-12))
            fprintf(stderr, "  category %d: frequency %.5f, p %.5f\n", c, f, p);
        CHECK(fabs(f - p) <= 6 * sd + 1e-12);
    }
    /* the same seed, the same draws */
    ts_manual_seed(7);
    ts_tensor *y2 = ts_multinomial(mk(TS_SHAPE(4), w, d, false), N, true);
    static int64_t again[20000];
    CHECK(rd_i64(y2, again, N) && memcmp(again, draws, sizeof again) == 0);
    /* without replacement, 2-D: distinct indices per row, never the zero weight; the first draw's
     * frequency is p, the second's the mixture sum_i p_i p_j / (1 - p_i) */
    const int64_t R = 8000, K = 3;
    static double wr[5 * 8000];
    const double base[5] = {1, 2, 3, 4, 0};
    for (int64_t r = 0; r < R; r++)
        for (int j = 0; j < 5; j++) wr[r * 5 + j] = base[j];
    ts_tensor *z = ts_multinomial(mk(TS_SHAPE(R, 5), wr, d, false), K, false);
    CHECK(z && ts_shape_of(z).ndim == 2 && ts_size(z, 0) == R && ts_size(z, 1) == K);
    bool ok = rd_i64(z, draws, R * K);
    int64_t first[5] = {0}, second[5] = {0};
    for (int64_t r = 0; ok && r < R; r++) {
        const int64_t *q = draws + r * K;
        ok = q[0] != q[1] && q[0] != q[2] && q[1] != q[2];
        for (int k = 0; ok && k < K; k++) ok = q[k] >= 0 && q[k] < 4;
        if (ok) first[q[0]]++, second[q[1]]++;
    }
    CHECK(ok);
    for (int j = 0; j < 4; j++) {
        const double p = base[j] / 10.0;
        double p2 = 0;
        for (int i = 0; i < 4; i++)
            if (i != j) p2 += base[i] / 10.0 * p / (1 - base[i] / 10.0);
        const double f1 = (double)first[j] / (double)R, f2 = (double)second[j] / (double)R;
        CHECK(fabs(f1 - p) <= 6 * sqrt(p * (1 - p) / (double)R));
        CHECK(fabs(f2 - p2) <= 6 * sqrt(p2 * (1 - p2) / (double)R));
    }
    /* k = n without replacement: a permutation of the positive categories */
    ts_tensor *all = ts_multinomial(mk(TS_SHAPE(4), base, d, false), 4, false);
    int64_t perm[4] = {0}, seen = 0;
    CHECK(rd_i64(all, perm, 4));
    for (int k = 0; k < 4; k++) seen |= (int64_t)1 << perm[k];
    CHECK(seen == 15);
}

/* ------------------------------------------------------------------ gradients */
typedef enum {
    G_SELECT,
    G_SLICE,
    G_DIAG,
    G_IR_PROD,
    G_IR_MEAN,
    G_IR_AMAX,
    G_PUT,
    G_PUT_ACC,
    G_COV,
    G_COV_W,
    G_CORR,
    G_CROSS,
    G_MESH
} gk;

static ts_tensor *g_fn(ts_tensor *const *in, int n, void *ctx) {
    (void)n;
    const ts_device d = ts_device_of(in[0]);
    const int64_t iv[4] = {4, 0, 4, 3}, pv[4] = {0, 11, -1, 5};
    const double awv[5] = {0.5, 1.0, 2.0, 1.0, 0.25};
    const int64_t fwv[5] = {1, 2, 1, 3, 1};
    switch ((gk)(intptr_t)ctx) {
    case G_SELECT:
        return ts_select_scatter(in[0], in[1], 1, 2);
    case G_SLICE:
        return ts_slice_scatter(in[0], in[1], 1, 0, 3, 2);
    case G_DIAG:
        return ts_diagonal_scatter(in[0], in[1], 1, 0, 1);
    case G_IR_PROD:
        return ts_index_reduce(in[0], 1, mki(TS_SHAPE(4), iv, d), in[1], "prod", true);
    case G_IR_MEAN:
        return ts_index_reduce(in[0], 1, mki(TS_SHAPE(4), iv, d), in[1], "mean", false);
    case G_IR_AMAX:
        return ts_index_reduce(in[0], 1, mki(TS_SHAPE(4), iv, d), in[1], "amax", true);
    case G_PUT:
        return ts_put(in[0], mki(TS_SHAPE(4), (int64_t[]){0, 11, 6, 5}, d), in[1], false);
    case G_PUT_ACC:
        return ts_put(in[0], mki(TS_SHAPE(4), pv, d), in[1], true);
    case G_COV:
        return ts_cov(in[0], 1, NULL, NULL);
    case G_COV_W:
        return ts_cov(in[0], 1, mki(TS_SHAPE(5), fwv, d), mk(TS_SHAPE(5), awv, d, false));
    case G_CORR:
        return ts_corrcoef(in[0]);
    case G_CROSS:
        return ts_cross(in[0], in[1], true, -1);
    case G_MESH: {
        ts_tensor *out[2] = {0};
        if (ts_meshgrid(in, 2, "xy", out, 2) != 2) return NULL;
        return ts_mul(out[0], out[1]);
    }
    }
    return NULL;
}

static void test_grads(void) {
    const ts_gradcheck_opts go = {.eps = 1e-6, .atol = 1e-6, .rtol = 1e-5};
    struct {
        gk k;
        int n;
        ts_shape s[2];
    } cases[] = {
        {G_SELECT, 2, {TS_SHAPE(3, 4), TS_SHAPE(3)}},
        {G_SLICE, 2, {TS_SHAPE(3, 4), TS_SHAPE(3, 2)}},
        {G_DIAG, 2, {TS_SHAPE(3, 4), TS_SHAPE(3)}},
        {G_IR_PROD, 2, {TS_SHAPE(3, 5), TS_SHAPE(3, 4)}},
        {G_IR_MEAN, 2, {TS_SHAPE(3, 5), TS_SHAPE(3, 4)}},
        {G_IR_AMAX, 2, {TS_SHAPE(3, 5), TS_SHAPE(3, 4)}},
        {G_PUT, 2, {TS_SHAPE(3, 4), TS_SHAPE(4)}},
        {G_PUT_ACC, 2, {TS_SHAPE(3, 4), TS_SHAPE(2, 2)}},
        {G_COV, 1, {TS_SHAPE(3, 5)}},
        {G_COV_W, 1, {TS_SHAPE(3, 5)}},
        {G_CORR, 1, {TS_SHAPE(3, 5)}},
        {G_CROSS, 2, {TS_SHAPE(2, 3), TS_SHAPE(2, 3)}},
        {G_MESH, 2, {TS_SHAPE(3), TS_SHAPE(2)}},
    };
    for (int di = 0; di < ndev; di++)
        for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
            ts_scope_begin();
            ts_tensor *in[2];
            for (int k = 0; k < cases[c].n; k++)
                in[k] = mk(cases[c].s[k], k ? b : a, devs[di], true);
            const bool ok = ts_gradcheck(g_fn, (void *)(intptr_t)cases[c].k, in, cases[c].n, go);
            ts_scope_end();
            ts_test_record(ok);
            if (!ok)
                ts_test_failf(__FILE__, __LINE__, "gradcheck case %d on %s%s", (int)c,
                              ts_device_str(devs[di]), ts_test_error_str());
            ts_error_clear();
        }
}

/* ------------------------------------------------------------------ refusals */
static void test_errors(void) {
    ts_scope_begin();
    const ts_device c = ts_cpu();
    ts_tensor *x = mk(TS_SHAPE(3, 4), a, c, false), *s3 = mk(TS_SHAPE(3), b, c, false);
    CHECK(!ts_select_scatter(x, s3, 1, 4));
    CHECK_ERR_HAS(TS_ERR_ARG, "select_scatter: index 4 out of range");
    CHECK(!ts_select_scatter(x, s3, 0, 0));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "select_scatter: expected src to have a size equal to the slice");
    CHECK(!ts_select_scatter(x, s3, 2, 0));
    CHECK_ERR_HAS(TS_ERR_ARG, "select_scatter");
    CHECK(!ts_slice_scatter(x, s3, 1, 0, 2, 0));
    CHECK_ERR_HAS(TS_ERR_ARG, "slice_scatter: slice step must be positive");
    CHECK(!ts_diagonal_scatter(x, s3, 2, 0, 1));
    CHECK_ERR_HAS(TS_ERR_SHAPE,
                  "diagonal_scatter: expected src to have a size equal to the diagonal");
    CHECK(!ts_diagonal_scatter(x, s3, 0, 1, -1));
    CHECK_ERR_HAS(TS_ERR_ARG, "diagonal_scatter: diagonal dimensions cannot be identical");
    CHECK(!ts_select_scatter(x, NULL, 0, 0));
    CHECK_ERR_HAS(TS_ERR_ARG, "select_scatter");
    ts_tensor *src = mk(TS_SHAPE(3, 2), b, c, false);
    const int64_t iv[2] = {0, 4}, neg[2] = {0, -1};
    CHECK(!ts_index_reduce(x, 1, mki(TS_SHAPE(2), iv, c), src, "prod", true));
    CHECK_ERR_HAS(TS_ERR_ARG, "index_reduce: index 4 is out of bounds");
    CHECK(!ts_index_reduce(x, 1, mki(TS_SHAPE(2), neg, c), src, "prod", true));
    CHECK_ERR_HAS(TS_ERR_ARG, "index_reduce: index -1 is out of bounds");
    CHECK(!ts_index_reduce(x, 1, mki(TS_SHAPE(2), neg, c), src, "sum", true));
    CHECK_ERR_HAS(TS_ERR_ARG,
                  "index_reduce: Expected reduce to be one of prod, mean, amax or amin");
    CHECK(!ts_index_reduce(x, 1, mki(TS_SHAPE(2), iv, c), src, "max", true));
    CHECK_ERR_HAS(TS_ERR_ARG, "index_reduce: reduce argument");
    CHECK(!ts_index_reduce(x, 1, mki(TS_SHAPE(2), iv, c), ts_to_dtype(src, TS_F32), "amax", true));
    CHECK_ERR_HAS(TS_ERR_DTYPE, "index_reduce: self (float64) and source (float32)");
    CHECK(!ts_index_reduce(x, 1, mki(TS_SHAPE(3), (int64_t[]){0, 1, 2}, c), src, "amax", true));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "index_reduce: source");
    ts_tensor *p2 = mk(TS_SHAPE(2), b, c, false);
    CHECK(!ts_put(x, mki(TS_SHAPE(2), (int64_t[]){0, 12}, c), p2, false));
    CHECK_ERR_HAS(TS_ERR_ARG, "put: out of range: tried to access index 12");
    CHECK(!ts_put(x, mki(TS_SHAPE(2), (int64_t[]){0, -13}, c), p2, false));
    CHECK_ERR_HAS(TS_ERR_ARG, "put: out of range");
    CHECK(!ts_put(x, mki(TS_SHAPE(3), (int64_t[]){0, 1, 2}, c), p2, false));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "put: Expected source and index to have the same number");
    CHECK(!ts_put(x, ts_to_dtype(mki(TS_SHAPE(2), iv, c), TS_I32), p2, false));
    CHECK_ERR_HAS(TS_ERR_DTYPE, "put: Expected a long tensor for index");
    CHECK(!ts_put_(x, mki(TS_SHAPE(2), iv, c), ts_to_dtype(p2, TS_F32), false));
    CHECK_ERR_HAS(TS_ERR_DTYPE, "put_: self and source expected to have the same dtype");
    CHECK(!ts_cov(mk(TS_SHAPE(2, 2, 2), a, c, false), 1, NULL, NULL));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "cov: expected input to have two or fewer dimensions");
    CHECK(!ts_cov(x, 1, ts_to_dtype(mk(TS_SHAPE(4), a, c, false), TS_F32), NULL));
    CHECK_ERR_HAS(TS_ERR_DTYPE, "cov: expected fweights to have integral dtype");
    CHECK(!ts_cov(x, 1, NULL, mki(TS_SHAPE(4), (int64_t[]){1, 1, 1, 1}, c)));
    CHECK_ERR_HAS(TS_ERR_DTYPE, "cov: expected aweights to have floating point dtype");
    CHECK(!ts_cov(x, 1, mki(TS_SHAPE(4), (int64_t[]){1, -2, 1, 1}, c), NULL));
    CHECK_ERR_HAS(TS_ERR_ARG, "cov: fweights cannot be negative");
    CHECK(!ts_cov(x, 1, NULL, mk(TS_SHAPE(4), (double[]){1, -2, 1, 1}, c, false)));
    CHECK_ERR_HAS(TS_ERR_ARG, "cov: aweights cannot be negative");
    CHECK(!ts_cov(x, 1, mki(TS_SHAPE(3), (int64_t[]){1, 1, 1}, c), NULL));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "cov: expected fweights to have the same numel");
    CHECK(!ts_cov(x, 1, mki(TS_SHAPE(4), (int64_t[]){0, 0, 0, 0}, c), NULL));
    CHECK_ERR_HAS(TS_ERR_ARG, "cov: weights sum to zero");
    CHECK(!ts_cov(ts_to_dtype(x, TS_BOOL), 1, NULL, NULL));
    CHECK_ERR_HAS(TS_ERR_DTYPE, "cov: bool dtype is not supported");
    ts_tensor *u = mk(TS_SHAPE(2, 3), a, c, false);
    CHECK(!ts_cross(u, mk(TS_SHAPE(3), b, c, false), true, -1));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "cross: inputs must have the same number of dimensions");
    CHECK(!ts_cross(u, ts_to_dtype(u, TS_F32), true, -1));
    CHECK_ERR_HAS(TS_ERR_DTYPE, "cross: expected both inputs of one dtype");
    CHECK(!ts_linalg_cross(u, u, 0));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "linalg.cross: inputs dimension 0 must have length 3. Got 2 and 2");
    CHECK(!ts_cross(mk(TS_SHAPE(2, 2), a, c, false), mk(TS_SHAPE(2, 2), b, c, false), false, 0));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "cross: no dimension of size 3");
    CHECK(!ts_tril_indices(-1, 3, 0, (ts_opts){0}));
    CHECK_ERR_HAS(TS_ERR_ARG, "tril_indices: row must be non-negative");
    CHECK(!ts_triu_indices(2, 3, 0, (ts_opts){.dtype = TS_F32}));
    CHECK_ERR_HAS(TS_ERR_DTYPE, "triu_indices: not implemented for float32");
    const double wm[3] = {1, 0, 2}, wneg[3] = {1, -1, 2}, wz[3] = {0, 0, 0};
    CHECK(!ts_multinomial(mk(TS_SHAPE(3), wneg, c, false), 1, true));
    CHECK_ERR_HAS(TS_ERR_ARG,
                  "multinomial: probability tensor contains either inf, nan or element < 0");
    CHECK(!ts_multinomial(mk(TS_SHAPE(3), (double[]){1, NAN, 1}, c, false), 1, true));
    CHECK_ERR_HAS(TS_ERR_ARG, "multinomial: probability tensor contains");
    CHECK(!ts_multinomial(mk(TS_SHAPE(3), wz, c, false), 1, true));
    CHECK_ERR_HAS(TS_ERR_ARG,
                  "multinomial: invalid multinomial distribution (sum of probabilities");
    CHECK(!ts_multinomial(mk(TS_SHAPE(3), wm, c, false), 3, false));
    CHECK_ERR_HAS(TS_ERR_ARG,
                  "multinomial: invalid multinomial distribution (with replacement=False");
    CHECK(!ts_multinomial(mk(TS_SHAPE(3), wm, c, false), 4, false));
    CHECK_ERR_HAS(TS_ERR_ARG, "multinomial: cannot sample n_sample > prob_dist.size(-1)");
    CHECK(!ts_multinomial(mk(TS_SHAPE(3), wm, c, false), 0, true));
    CHECK_ERR_HAS(TS_ERR_ARG, "multinomial: cannot sample n_sample <= 0");
    CHECK(!ts_multinomial(mk(TS_SHAPE(1, 1, 3), wm, c, false), 1, true));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "multinomial: prob_dist must be 1 or 2 dim");
    CHECK(!ts_multinomial(mki(TS_SHAPE(3), (int64_t[]){1, 1, 1}, c), 1, true));
    CHECK_ERR_HAS(TS_ERR_DTYPE, "multinomial: expected a floating-point input");
    ts_tensor *in[2] = {u, s3}, *out[2];
    CHECK(ts_meshgrid(in, 2, "ij", out, 2) == -1);
    CHECK_ERR_HAS(TS_ERR_SHAPE, "meshgrid: Expected 0D or 1D tensor");
    in[0] = ts_to_dtype(s3, TS_F32);
    CHECK(ts_meshgrid(in, 2, "ij", out, 2) == -1);
    CHECK_ERR_HAS(TS_ERR_DTYPE,
                  "meshgrid: expects all tensors to have the same dtype (float32 and float64)");
    CHECK(ts_meshgrid(in, 1, "ab", out, 2) == -1);
    CHECK_ERR_HAS(TS_ERR_ARG, "meshgrid: indexing must be one of");
    CHECK(ts_meshgrid(in, 0, "ij", out, 2) == -1);
    CHECK_ERR_HAS(TS_ERR_ARG, "meshgrid: expects a non-empty list");
    if (ndev > 1) { /* operands on two devices */
        ts_tensor *o = mk(TS_SHAPE(3), b, devs[1], false);
        CHECK(!ts_select_scatter(x, o, 1, 0));
        CHECK_ERR(TS_ERR_DEVICE);
        CHECK(!ts_cross(u, mk(TS_SHAPE(2, 3), b, devs[1], false), true, 1));
        CHECK_ERR(TS_ERR_DEVICE);
        in[0] = s3, in[1] = o;
        CHECK(ts_meshgrid(in, 2, "ij", out, 2) == -1);
        CHECK_ERR(TS_ERR_DEVICE);
    }
    ts_scope_end();
}

/* ------------------------------------------------------------------ autograd through a graph */
/* select_scatter's gradients: the input's is the output's with the slice zeroed, src's the
 * slice of it (read back after backward) */
static void test_backward_values(ts_device d) {
    ts_tensor *x = mk(TS_SHAPE(3, 4), a, d, true), *s = mk(TS_SHAPE(3), b, d, true);
    ts_tensor *g = mk(TS_SHAPE(3, 4), b + 20, d, false);
    ts_tensor *y = ts_select_scatter(x, s, 1, 2);
    CHECK(ts_backward(ts_sum(ts_mul(y, g))) == TS_OK);
    double r[12], rs[3];
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 4; j++) r[i * 4 + j] = j == 2 ? 0 : b[20 + i * 4 + j];
    for (int i = 0; i < 3; i++) rs[i] = b[20 + i * 4 + 2];
    CHECK(same(ts_grad(x), TS_SHAPE(3, 4), r));
    CHECK(same(ts_grad(s), TS_SHAPE(3), rs));
}

int main(void) {
    ndev = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    fill(a, 256, 1), fill(b, 256, 2);
    for (int di = 0; di < ndev; di++) {
        ts_scope_begin();
        test_scatter_views(devs[di]);
        test_index_reduce_put(devs[di]);
        test_statistics(devs[di]);
        test_tables(devs[di]);
        test_backward_values(devs[di]);
        test_multinomial(devs[di]);
        ts_scope_end();
        CHECK_OK();
    }
    test_grads();
    test_errors();
    return ts_test_finish();
}
