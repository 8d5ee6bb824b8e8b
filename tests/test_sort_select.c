/* test_sort_select.c — issue 52's sorting and selection ops (src/ops/sort.c, quantile.c,
 * search.c) on every device against brute-force float64 loops, on data with ties and NaNs:
 * sort / argsort (each dim, both orders, the stable order of ties, NaN largest), topk, kthvalue,
 * median / nanmedian (whole and dim), mode, quantile / nanquantile (every interpolation),
 * searchsorted (left, right, sorter, batched) / bucketize, unique / unique_consecutive (with
 * inverse and counts, and along a dim), histc, bincount, isin; int64 keys beyond 2^53; 0-dim and
 * empty inputs; ts_gradcheck of the differentiable ones; the refusals naming the op. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "host_read_util.h"
#include "tessera.h"
#include "ts_test.h"

static ts_device devs[TS_TEST_MAX_DEVICES];
static int ndev;

/* values from a small set (ties) with NaNs */
static void fill_ties(double *v, int64_t n, uint32_t seed) {
    static const double set[] = {-1.5, 0.0, 0.25, 2.0, 7.0, NAN, 2.0, -1.5, 3.5};
    for (int64_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        v[i] = set[(seed >> 16) % 9];
    }
}
/* distinct values (for gradients and interpolation) */
static void fill_distinct(double *v, int64_t n, int seed) {
    for (int64_t i = 0; i < n; i++) v[i] = sin(1.7 * (double)(i + 1) + 0.9 * seed) * 3.0;
}
static ts_tensor *mk(ts_shape s, const double *v, ts_device d) {
    return ts_to(ts_tensor_f64(s, v, (ts_opts){.dtype = TS_F64}), d);
}
static bool same_shape(ts_tensor *t, ts_shape s) {
    if (!t) return false;
    ts_shape g = ts_shape_of(t);
    bool ok = g.ndim == s.ndim;
    for (int k = 0; ok && k < s.ndim; k++) ok = g.dims[k] == s.dims[k];
    if (!ok) fprintf(stderr, "  shape differs (ndim %d vs %d)\n", g.ndim, s.ndim);
    return ok;
}
/* t has shape s and the values ref (NaN matches NaN); tol relative */
static bool same(ts_tensor *t, ts_shape s, const double *ref, double tol) {
    static double got[4096];
    if (!same_shape(t, s)) return false;
    int64_t n = ts_numel(t);
    if (n > 4096 || !rd(t, got, n)) return false;
    for (int64_t i = 0; i < n; i++)
        if (!(isnan(ref[i]) ? isnan(got[i]) : fabs(got[i] - ref[i]) <= tol * (1 + fabs(ref[i])))) {
            fprintf(stderr, "  element %lld: %.17g vs %.17g\n", (long long)i, got[i], ref[i]);
            return false;
        }
    return true;
}

/* ascending with NaN last */
static bool less(double x, double y) { return !isnan(x) && (isnan(y) || x < y); }
static bool eqv(double x, double y) { return x == y || (isnan(x) && isnan(y)); }

/* brute-force stable sort of row x[0..n) (stride st): perm[r] = index of rank r */
static void ref_sort(const double *x, int64_t n, int64_t st, bool desc, int64_t *perm) {
    for (int64_t j = 0; j < n; j++) {
        int64_t rank = 0;
        for (int64_t i = 0; i < n; i++) {
            double a = x[i * st], b = x[j * st];
            bool before = desc ? less(b, a) : less(a, b);
            if (before || (i < j && eqv(a, b))) rank++;
        }
        perm[rank] = j;
    }
}

/* ------------------------------------------------------------------ sort family */
static double a[4096];

static void test_sort_family(ts_device d) {
    const int64_t D0 = 3, D1 = 5, D2 = 7, N = D0 * D1 * D2;
    const int64_t dims[3] = {D0, D1, D2}, strides[3] = {D1 * D2, D2, 1};
    ts_tensor *x = mk(TS_SHAPE(D0, D1, D2), a, d);
    static double rv[4096], ri[4096];
    int64_t perm[16];
    for (int dim = 0; dim < 3; dim++)
        for (int desc = 0; desc < 2; desc++) {
            const int64_t n = dims[dim], st = strides[dim];
            for (int64_t base = 0; base < N; base++) {
                if ((base / st) % n != 0) continue; /* rows start at index 0 along dim */
                ref_sort(a + base, n, st, desc, perm);
                for (int64_t r = 0; r < n; r++)
                    rv[base + r * st] = a[base + perm[r] * st], ri[base + r * st] = (double)perm[r];
            }
            ts_tensor *idx = NULL;
            ts_tensor *v = ts_sort(x, dim - 3 * (dim == 2), desc, true, &idx);
            CHECK(same(v, TS_SHAPE(D0, D1, D2), rv, 0));
            CHECK(same(idx, TS_SHAPE(D0, D1, D2), ri, 0));
            CHECK(idx && ts_dtype_of(idx) == TS_I64);
            CHECK(same(ts_argsort(x, dim, desc, false), TS_SHAPE(D0, D1, D2), ri, 0));
            /* topk along dim: the first k of that order */
            const int64_t k = 3;
            ts_shape ks = TS_SHAPE(D0, D1, D2);
            ks.dims[dim] = k;
            static double tv[4096], ti[4096];
            for (int64_t o = 0, p = 0; o < N; o++) {
                if ((o / st) % n >= k) continue;
                tv[p] = rv[o], ti[p] = ri[o], p++;
            }
            idx = NULL;
            v = ts_topk(x, k, dim, desc, true, &idx);
            CHECK(same(v, ks, tv, 0));
            CHECK(same(idx, ks, ti, 0));
        }
    /* msort: dim 0 ascending */
    {
        const int64_t n = D0;
        for (int64_t base = 0; base < D1 * D2; base++) {
            ref_sort(a + base, n, D1 * D2, false, perm);
            for (int64_t r = 0; r < n; r++) rv[base + r * D1 * D2] = a[base + perm[r] * D1 * D2];
        }
        CHECK(same(ts_msort(x), TS_SHAPE(D0, D1, D2), rv, 0));
    }
    /* kthvalue, median, nanmedian, mode along dim 2 (rows of 7) and dim 0 with keepdim */
    for (int dim = 0; dim < 3; dim += 2)
        for (int keep = 0; keep < 2; keep++) {
            const int64_t n = dims[dim], st = strides[dim];
            ts_shape rs = TS_SHAPE(D0, D1, D2);
            rs.dims[dim] = 1;
            if (!keep) {
                rs.ndim = 2;
                for (int q = dim; q < 2; q++) rs.dims[q] = dims[q + 1];
            }
            static double kv[512], ki[512], mv[512], mi[512], nv[512], ni[512], ov[512], oi[512];
            int64_t p = 0;
            const int64_t kk = n > 2 ? 2 : 1;
            for (int64_t base = 0; base < N; base++) {
                if ((base / st) % n != 0) continue;
                ref_sort(a + base, n, st, false, perm);
                kv[p] = a[base + perm[kk - 1] * st], ki[p] = (double)perm[kk - 1];
                int64_t nans = 0;
                for (int64_t j = 0; j < n; j++) nans += isnan(a[base + j * st]);
                int64_t m = nans ? n - nans : (n - 1) / 2; /* first NaN, or the lower median */
                mv[p] = a[base + perm[m] * st], mi[p] = (double)perm[m];
                m = nans < n ? (n - nans - 1) / 2 : 0;
                nv[p] = a[base + perm[m] * st], ni[p] = (double)perm[m];
                /* mode: most frequent (NaNs each their own), smallest of ties, last index */
                int64_t best = -1, bc = 0;
                for (int64_t j = 0; j < n; j++) {
                    double y = a[base + j * st];
                    int64_t c = 0, last = j;
                    for (int64_t i = 0; i < n; i++)
                        if (a[base + i * st] == y) c++, last = i;
                    if (isnan(y)) c = 1;
                    if (c > bc || (c == bc && less(y, a[base + best * st]))) best = last, bc = c;
                }
                ov[p] = a[base + best * st], oi[p] = (double)best;
                p++;
            }
            ts_tensor *i1 = NULL, *i2 = NULL, *i3 = NULL, *i4 = NULL;
            CHECK(same(ts_kthvalue(x, kk, dim, keep, &i1), rs, kv, 0));
            CHECK(same(i1, rs, ki, 0));
            CHECK(same(ts_median_dim(x, dim, keep, &i2), rs, mv, 0));
            CHECK(same(i2, rs, mi, 0));
            CHECK(same(ts_nanmedian_dim(x, dim, keep, &i3), rs, nv, 0));
            CHECK(same(i3, rs, ni, 0));
            CHECK(same(ts_mode(x, dim, keep, &i4), rs, ov, 0));
            CHECK(same(i4, rs, oi, 0));
        }
    /* whole-tensor median: NaN present -> NaN; without the NaNs: the lower median */
    {
        double r = NAN;
        CHECK(same(ts_median(x), TS_SHAPE(), &r, 0));
        double c[4096];
        int64_t m = 0;
        for (int64_t i = 0; i < N; i++)
            if (!isnan(a[i])) c[m++] = a[i];
        int64_t pm[4096];
        for (int64_t j = 0; j < m; j++) { /* rank by counting */
            int64_t rank = 0;
            for (int64_t i = 0; i < m; i++) rank += c[i] < c[j] || (c[i] == c[j] && i < j);
            pm[rank] = j;
        }
        r = c[pm[(m - 1) / 2]];
        CHECK(same(ts_nanmedian(x), TS_SHAPE(), &r, 0));
        CHECK(same(ts_median(mk(TS_SHAPE(m), c, d)), TS_SHAPE(), &r, 0));
    }
}

/* int64 keys that double cannot tell apart, int32 and bool; 0-dim and empty */
static void test_dtypes_edges(ts_device d) {
    const int64_t big = (int64_t)1 << 60;
    const int64_t v[5] = {big + 3, big + 1, -5, big + 2, big + 1};
    ts_tensor *x = ts_to(ts_tensor_i64(TS_SHAPE(5), v, (ts_opts){.dtype = TS_I64}), d);
    ts_tensor *idx = NULL, *s = ts_sort(x, 0, false, true, &idx);
    int64_t got[5] = {0};
    CHECK(s && ts_dtype_of(s) == TS_I64 &&
          ts_copy_to_host(ts_to(s, ts_cpu()), got, sizeof got) == TS_OK);
    CHECK(got[0] == -5 && got[1] == big + 1 && got[2] == big + 1 && got[3] == big + 2 &&
          got[4] == big + 3);
    const double ri[5] = {2, 1, 4, 3, 0};
    CHECK(same(idx, TS_SHAPE(5), ri, 0));
    ts_tensor *u = ts_unique(x, true, false, 0, NULL, NULL);
    CHECK(u && ts_numel(u) == 4);
    CHECK(same(ts_isin(x, ts_narrow(x, 0, 1, 1), false, false), TS_SHAPE(5),
               (const double[]){0, 1, 0, 0, 1}, 0));
    /* int32 and bool keep their dtype */
    ts_tensor *x32 = ts_to_dtype(x, TS_I32), *xb = ts_to_dtype(mk(TS_SHAPE(4), a, d), TS_BOOL);
    CHECK(ts_dtype_of(ts_sort(x32, 0, true, true, NULL)) == TS_I32);
    CHECK(ts_dtype_of(ts_sort(xb, 0, false, true, NULL)) == TS_BOOL);
    /* 0-dim */
    ts_tensor *z = mk(TS_SHAPE(), (const double[]){4.5}, d), *zi = NULL;
    CHECK(same(ts_sort(z, -1, false, true, &zi), TS_SHAPE(), (const double[]){4.5}, 0));
    CHECK(same(zi, TS_SHAPE(), (const double[]){0}, 0));
    CHECK(same(ts_topk(z, 1, 0, true, true, NULL), TS_SHAPE(), (const double[]){4.5}, 0));
    CHECK(same(ts_kthvalue(z, 1, 0, true, NULL), TS_SHAPE(), (const double[]){4.5}, 0));
    CHECK(same(ts_median_dim(z, 0, false, NULL), TS_SHAPE(), (const double[]){4.5}, 0));
    CHECK(same(ts_median(z), TS_SHAPE(), (const double[]){4.5}, 0));
    CHECK(same(ts_quantile(z, NULL, 0.3, false, 0, false, "linear"), TS_SHAPE(),
               (const double[]){4.5}, 0));
    /* empty: sort keeps the shape; median of nothing is NaN */
    ts_tensor *e = ts_zeros(TS_SHAPE(2, 0), (ts_opts){.dtype = TS_F64, .device = d});
    CHECK(same_shape(ts_sort(e, 1, false, true, NULL), TS_SHAPE(2, 0)));
    CHECK(same_shape(ts_topk(e, 0, 1, true, true, NULL), TS_SHAPE(2, 0)));
    CHECK(same(ts_median(e), TS_SHAPE(), (const double[]){NAN}, 0));
    CHECK(same_shape(ts_unique(e, true, false, 0, NULL, NULL), TS_SHAPE(0)));
    CHECK(same(ts_bincount(ts_zeros(TS_SHAPE(0), (ts_opts){.dtype = TS_I64, .device = d}), NULL, 3),
               TS_SHAPE(3), (const double[]){0, 0, 0}, 0));
}

/* ------------------------------------------------------------------ quantile */
static void test_quantile(ts_device d) {
    static const char *const modes[] = {"linear", "lower", "higher", "midpoint", "nearest"};
    const double qs[3] = {0.0, 0.37, 0.75};
    double v[24];
    fill_distinct(v, 24, 3);
    v[5] = NAN; /* row 0 of dim-1 rows holds a NaN */
    ts_tensor *x = mk(TS_SHAPE(4, 6), v, d), *q = mk(TS_SHAPE(3), qs, d);
    for (int nan_mode = 0; nan_mode < 2; nan_mode++)
        for (int m = 0; m < 5; m++) {
            double ref[12];
            for (int r = 0; r < 4; r++) {
                double c[6];
                int64_t cnt = 0;
                bool has_nan = false;
                for (int j = 0; j < 6; j++) {
                    if (isnan(v[r * 6 + j]))
                        has_nan = true;
                    else
                        c[cnt++] = v[r * 6 + j];
                }
                for (int i = 0; i < cnt; i++) /* insertion sort */
                    for (int j = i; j > 0 && c[j] < c[j - 1]; j--) {
                        double t = c[j];
                        c[j] = c[j - 1], c[j - 1] = t;
                    }
                for (int k = 0; k < 3; k++) {
                    double pos = qs[k] * (double)(cnt - 1), lo = floor(pos), hi = ceil(pos);
                    double res;
                    switch (m) {
                    case 0:
                        res = c[(int)lo] + (pos - lo) * (c[(int)hi] - c[(int)lo]);
                        break;
                    case 1:
                        res = c[(int)lo];
                        break;
                    case 2:
                        res = c[(int)hi];
                        break;
                    case 3:
                        res = 0.5 * (c[(int)lo] + c[(int)hi]);
                        break;
                    default:
                        res = c[(int)nearbyint(pos)];
                        break;
                    }
                    ref[k * 4 + r] = has_nan && !nan_mode ? NAN : res;
                }
            }
            ts_tensor *y = nan_mode ? ts_nanquantile(x, q, 0, true, 1, false, modes[m])
                                    : ts_quantile(x, q, 0, true, 1, false, modes[m]);
            CHECK(same(y, TS_SHAPE(3, 4), ref, 1e-12));
            /* scalar q with keepdim: [4, 1] */
            y = nan_mode ? ts_nanquantile(x, NULL, qs[1], true, -1, true, modes[m])
                         : ts_quantile(x, NULL, qs[1], true, -1, true, modes[m]);
            CHECK(same(y, TS_SHAPE(4, 1), ref + 4, 1e-12));
        }
    /* over all elements, no NaN: the 0.5 quantile of 1..10 is 5.5 */
    double w[10];
    for (int i = 0; i < 10; i++) w[i] = 10 - i;
    CHECK(same(ts_quantile(mk(TS_SHAPE(2, 5), w, d), NULL, 0.5, false, 0, false, "linear"),
               TS_SHAPE(), (const double[]){5.5}, 1e-15));
}

/* ------------------------------------------------------------------ search, unique, counts */
static void test_search_unique(ts_device d) {
    /* searchsorted: 1-D boundaries and a batched one, both sides; brute force counts */
    const double bnd[10] = {-1, 0, 0, 2, 5, /* row 2: */ -3, -3, 1, 1, 4};
    const double val[8] = {0, 2, -2, 6, /* row 2: */ 1, -3, 4.5, NAN};
    ts_tensor *B = mk(TS_SHAPE(2, 5), bnd, d), *V = mk(TS_SHAPE(2, 4), val, d);
    for (int right = 0; right < 2; right++) {
        double ref[8];
        for (int r = 0; r < 2; r++)
            for (int j = 0; j < 4; j++) {
                int c = 0;
                for (int i = 0; i < 5; i++) {
                    double b = bnd[r * 5 + i], x = val[r * 4 + j];
                    c += isnan(x) || (right ? b <= x : b < x);
                }
                ref[r * 4 + j] = c;
            }
        CHECK(same(ts_searchsorted(B, V, false, right, NULL), TS_SHAPE(2, 4), ref, 0));
        /* 1-D boundaries = row 0, out_int32 */
        ts_tensor *y = ts_searchsorted(ts_select(B, 0, 0), V, true, right, NULL);
        CHECK(y && ts_dtype_of(y) == TS_I32);
        double ref1[8];
        for (int j = 0; j < 8; j++) {
            int c = 0;
            for (int i = 0; i < 5; i++)
                c += isnan(val[j]) || (right ? bnd[i] <= val[j] : bnd[i] < val[j]);
            ref1[j] = c;
        }
        CHECK(same(y, TS_SHAPE(2, 4), ref1, 0));
        CHECK(same(ts_bucketize(V, ts_select(B, 0, 0), false, right), TS_SHAPE(2, 4), ref1, 0));
        /* unsorted boundaries with their sorter */
        const double shuf[5] = {5, 0, -1, 2, 0};
        const int64_t so[5] = {2, 1, 4, 3, 0};
        ts_tensor *S = ts_to(ts_tensor_i64(TS_SHAPE(5), so, (ts_opts){.dtype = TS_I64}), d);
        CHECK(same(ts_searchsorted(mk(TS_SHAPE(5), shuf, d), V, false, right, S), TS_SHAPE(2, 4),
                   ref1, 0));
    }
    /* unique with inverse and counts; unique_consecutive */
    const double u[9] = {3, 1, NAN, 3, 3, 2, 1, 1, NAN};
    ts_tensor *U = mk(TS_SHAPE(3, 3), u, d), *inv = NULL, *cnt = NULL;
    CHECK(same(ts_unique(U, true, false, 0, &inv, &cnt), TS_SHAPE(5),
               (const double[]){1, 2, 3, NAN, NAN}, 0));
    CHECK(same(inv, TS_SHAPE(3, 3), (const double[]){2, 0, 3, 2, 2, 1, 0, 0, 4}, 0));
    CHECK(same(cnt, TS_SHAPE(5), (const double[]){3, 1, 3, 1, 1}, 0));
    inv = cnt = NULL;
    CHECK(same(ts_unique_consecutive(U, false, 0, &inv, &cnt), TS_SHAPE(7),
               (const double[]){3, 1, NAN, 3, 2, 1, NAN}, 0));
    CHECK(same(inv, TS_SHAPE(3, 3), (const double[]){0, 1, 2, 3, 3, 4, 5, 5, 6}, 0));
    CHECK(same(cnt, TS_SHAPE(7), (const double[]){1, 1, 1, 2, 1, 2, 1}, 0));
    /* unique rows (dim 0): rows sorted lexicographically */
    const double rows[8] = {2, 1, 0, 5, 2, 1, 0, 4};
    inv = cnt = NULL;
    CHECK(same(ts_unique(mk(TS_SHAPE(4, 2), rows, d), true, true, 0, &inv, &cnt), TS_SHAPE(3, 2),
               (const double[]){0, 4, 0, 5, 2, 1}, 0));
    CHECK(same(inv, TS_SHAPE(4), (const double[]){2, 1, 2, 0}, 0));
    CHECK(same(cnt, TS_SHAPE(3), (const double[]){1, 1, 2}, 0));
    /* histc: brute force bins over [lo, hi], the last bin closed */
    double h[64];
    fill_distinct(h, 64, 5);
    h[3] = 10; /* outside */
    for (int bins = 1; bins <= 7; bins += 3) {
        double ref[8] = {0};
        for (int i = 0; i < 64; i++) {
            if (!(h[i] >= -2 && h[i] <= 2.5)) continue;
            int p = (int)((h[i] + 2) * bins / 4.5);
            ref[p == bins ? bins - 1 : p]++;
        }
        CHECK(same(ts_histc(mk(TS_SHAPE(64), h, d), bins, -2, 2.5), TS_SHAPE(bins), ref, 0));
    }
    /* min == max: the data's range */
    CHECK(same(ts_histc(mk(TS_SHAPE(4), (const double[]){1, 2, 1, 5}, d), 4, 0, 0), TS_SHAPE(4),
               (const double[]){2, 1, 0, 1}, 0));
    /* bincount with and without weights */
    const int64_t bi[6] = {0, 3, 3, 1, 0, 3};
    ts_tensor *BI = ts_to(ts_tensor_i64(TS_SHAPE(6), bi, (ts_opts){.dtype = TS_I64}), d);
    CHECK(same(ts_bincount(BI, NULL, 0), TS_SHAPE(4), (const double[]){2, 1, 0, 3}, 0));
    CHECK(same(ts_bincount(BI, NULL, 6), TS_SHAPE(6), (const double[]){2, 1, 0, 3, 0, 0}, 0));
    ts_tensor *W = mk(TS_SHAPE(6), (const double[]){0.5, 1, 2, 4, 8, 16}, d);
    ts_tensor *bw = ts_bincount(BI, W, 0);
    CHECK(bw && ts_dtype_of(bw) == TS_F64);
    CHECK(same(bw, TS_SHAPE(4), (const double[]){8.5, 4, 0, 19}, 0));
    CHECK(ts_dtype_of(ts_bincount(BI, ts_to_dtype(W, TS_F32), 0)) == TS_F32);
    /* isin, invert */
    CHECK(same(ts_isin(U, mk(TS_SHAPE(3), (const double[]){1, NAN, 7}, d), false, false),
               TS_SHAPE(3, 3), (const double[]){0, 1, 0, 0, 0, 0, 1, 1, 0}, 0));
    CHECK(same(ts_isin(U, mk(TS_SHAPE(3), (const double[]){1, NAN, 7}, d), false, true),
               TS_SHAPE(3, 3), (const double[]){1, 0, 1, 1, 1, 1, 0, 0, 1}, 0));
}

/* ------------------------------------------------------------------ gradients */
typedef enum { G_SORT, G_TOPK, G_KTH, G_MEDIAN_DIM, G_MEDIAN, G_MODE, G_QUANTILE, G_NANQ } gk;
static ts_tensor *g_fn(ts_tensor *const *in, int n, void *ctx) {
    (void)n;
    switch ((gk)(intptr_t)ctx) {
    case G_SORT:
        return ts_sort(in[0], 1, true, false, NULL);
    case G_TOPK:
        return ts_topk(in[0], 2, 0, false, true, NULL);
    case G_KTH:
        return ts_kthvalue(in[0], 3, 1, false, NULL);
    case G_MEDIAN_DIM:
        return ts_median_dim(in[0], 0, true, NULL);
    case G_MEDIAN:
        return ts_median(in[0]);
    case G_MODE:
        return ts_mode(in[0], 1, false, NULL);
    case G_QUANTILE: {
        ts_tensor *q = ts_tensor_f64(TS_SHAPE(2), (const double[]){0.3, 0.8},
                                     (ts_opts){.dtype = TS_F64, .device = ts_device_of(in[0])});
        return ts_quantile(in[0], q, 0, true, 1, false, "linear");
    }
    case G_NANQ:
        return ts_nanquantile(in[0], NULL, 0.6, false, 0, false, "midpoint");
    }
    return NULL;
}
static void test_grads(void) {
    const ts_gradcheck_opts go = {.eps = 1e-6, .atol = 1e-6, .rtol = 1e-5};
    for (int di = 0; di < ndev; di++)
        for (int c = G_SORT; c <= G_NANQ; c++) {
            ts_scope_begin();
            double v[20];
            fill_distinct(v, 20, 7 + c);
            if (c == G_NANQ) v[4] = NAN; /* nanquantile skips it: finite gradient elsewhere */
            ts_tensor *x = ts_detach(mk(TS_SHAPE(4, 5), v, devs[di]));
            ts_set_requires_grad(x, true);
            bool ok = true;
            if (c == G_NANQ) { /* gradcheck perturbs the NaN too: check by hand */
                ts_tensor *y = g_fn(&x, 1, (void *)(intptr_t)c);
                ts_backward(y);
                double g[20];
                ok = rd(ts_grad(x), g, 20);
                /* the 0.6 quantile of 19 values: rank 10.8, midpoint of sorted[10], [11] */
                int64_t order[20];
                int m = 0;
                for (int i = 0; i < 20; i++)
                    if (!isnan(v[i])) order[m++] = i;
                for (int i = 0; i < m; i++)
                    for (int j = i; j > 0 && v[order[j]] < v[order[j - 1]]; j--) {
                        int64_t t = order[j];
                        order[j] = order[j - 1], order[j - 1] = t;
                    }
                for (int i = 0; ok && i < 20; i++) {
                    double want = (i == order[10] || i == order[11]) ? 0.5 : 0.0;
                    ok = g[i] == want;
                }
            } else {
                ok = ts_gradcheck(g_fn, (void *)(intptr_t)c, &x, 1, go);
            }
            ts_scope_end();
            ts_test_record(ok);
            if (!ok)
                ts_test_failf(__FILE__, __LINE__, "gradient case %d on %s%s", c,
                              ts_device_str(devs[di]), ts_test_error_str());
            ts_error_clear();
        }
    /* median of ties: the gradient is shared among the equal elements (PyTorch) */
    ts_scope_begin();
    ts_tensor *x = ts_detach(mk(TS_SHAPE(5), (const double[]){2, 1, 2, 3, 2}, ts_cpu()));
    ts_set_requires_grad(x, true);
    ts_backward(ts_median(x));
    CHECK(same(ts_grad(x), TS_SHAPE(5), (const double[]){1.0 / 3, 0, 1.0 / 3, 0, 1.0 / 3}, 1e-15));
    ts_scope_end();
}

/* ------------------------------------------------------------------ refusals */
static void test_errors(void) {
    ts_scope_begin();
    ts_tensor *x = mk(TS_SHAPE(2, 3), a, ts_cpu());
    ts_tensor *ix = ts_to_dtype(x, TS_I64);
    CHECK(!ts_topk(x, 4, 1, true, true, NULL));
    CHECK_ERR_HAS(TS_ERR_ARG, "topk");
    CHECK(!ts_kthvalue(x, 0, 1, false, NULL));
    CHECK_ERR_HAS(TS_ERR_ARG, "kthvalue");
    CHECK(!ts_sort(x, 2, false, false, NULL));
    CHECK_ERR_HAS(TS_ERR_ARG, "sort");
    ts_tensor *e = ts_zeros(TS_SHAPE(0, 3), (ts_opts){.dtype = TS_F64});
    CHECK(!ts_median_dim(e, 0, false, NULL));
    CHECK_ERR_HAS(TS_ERR_ARG, "median");
    CHECK(!ts_mode(e, 0, false, NULL));
    CHECK_ERR_HAS(TS_ERR_ARG, "mode");
    CHECK(!ts_quantile(x, NULL, 1.5, false, 0, false, "linear"));
    CHECK_ERR_HAS(TS_ERR_ARG, "quantile");
    CHECK(!ts_quantile(x, NULL, 0.5, false, 0, false, "cubic"));
    CHECK_ERR_HAS(TS_ERR_ARG, "interpolation");
    CHECK(!ts_quantile(ix, NULL, 0.5, false, 0, false, "linear"));
    CHECK_ERR_HAS(TS_ERR_DTYPE, "quantile");
    CHECK(!ts_quantile(x, ts_to_dtype(ts_select(x, 0, 0), TS_F32), 0, false, 0, false, "linear"));
    CHECK_ERR_HAS(TS_ERR_DTYPE, "same dtype");
    CHECK(!ts_quantile(e, NULL, 0.5, false, 0, false, "linear"));
    CHECK_ERR_HAS(TS_ERR_ARG, "non-empty");
    CHECK(!ts_sort(ts_to_dtype(x, TS_U64), 0, false, false, NULL));
    CHECK_ERR_HAS(TS_ERR_UNSUPPORTED, "UInt64");
    ts_tensor *neg =
        ts_tensor_i64(TS_SHAPE(2), (const int64_t[]){1, -1}, (ts_opts){.dtype = TS_I64});
    CHECK(!ts_bincount(neg, NULL, 0));
    CHECK_ERR_HAS(TS_ERR_ARG, "bincount");
    CHECK(!ts_bincount(ts_abs(neg), NULL, -1));
    CHECK_ERR_HAS(TS_ERR_ARG, "minlength");
    CHECK(!ts_bincount(x, NULL, 0));
    CHECK_ERR_HAS(TS_ERR_ARG, "bincount");
    CHECK(!ts_histc(x, 0, 0, 1));
    CHECK_ERR_HAS(TS_ERR_ARG, "bins");
    CHECK(!ts_histc(x, 3, 2, 1));
    CHECK_ERR_HAS(TS_ERR_ARG, "max must be larger than min");
    CHECK(!ts_histc(ix, 3, 0, 1));
    CHECK_ERR_HAS(TS_ERR_DTYPE, "histogram");
    CHECK(!ts_searchsorted(x, ts_zeros(TS_SHAPE(3, 3), (ts_opts){.dtype = TS_F64}), false, false,
                           NULL));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "searchsorted");
    CHECK(!ts_bucketize(x, x, false, false));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "bucketize");
    CHECK(!ts_sort(NULL, 0, false, false, NULL));
    CHECK_ERR(TS_ERR_ARG);
    ts_scope_end();
}

/* long rows (ties and NaNs, sorted runs): topk's insertion buffer once full, and kthvalue /
 * median / nanmedian by quickselect, against the brute-force stable order (on the CPU: the
 * selection is planned on the host whatever the device) */
static void test_long_rows(void) {
    enum { R = 3, L = 301 };
    static double x[R * L], rv[R * 8], ri[R * 8];
    fill_ties(x, R * L, 777u);
    for (int64_t j = 0; j < L; j++) x[2 * L + j] = (double)(j % 50); /* ascending runs */
    ts_scope_begin();
    ts_tensor *t = mk(TS_SHAPE(R, L), x, ts_cpu());
    int64_t perm[L];
    for (int desc = 0; desc < 2; desc++) {
        for (int64_t r = 0; r < R; r++) {
            ref_sort(x + r * L, L, 1, desc, perm);
            for (int64_t q = 0; q < 8; q++)
                rv[r * 8 + q] = x[r * L + perm[q]], ri[r * 8 + q] = (double)perm[q];
        }
        ts_tensor *idx = NULL;
        CHECK(same(ts_topk(t, 8, 1, desc, true, &idx), TS_SHAPE(R, 8), rv, 0));
        CHECK(same(idx, TS_SHAPE(R, 8), ri, 0));
    }
    const int64_t ks[3] = {1, 150, L};
    for (int c = 0; c < 5; c++) {
        double v[R], iv[R];
        for (int64_t r = 0; r < R; r++) {
            ref_sort(x + r * L, L, 1, false, perm);
            int64_t nans = 0;
            for (int64_t j = 0; j < L; j++) nans += isnan(x[r * L + j]);
            int64_t q = c < 3    ? ks[c] - 1
                        : c == 3 ? (nans ? L - nans : (L - 1) / 2)
                                 : (nans < L ? (L - nans - 1) / 2 : 0);
            v[r] = x[r * L + perm[q]], iv[r] = (double)perm[q];
        }
        ts_tensor *idx = NULL;
        ts_tensor *got = c < 3    ? ts_kthvalue(t, ks[c], 1, false, &idx)
                         : c == 3 ? ts_median_dim(t, 1, false, &idx)
                                  : ts_nanmedian_dim(t, 1, false, &idx);
        CHECK(same(got, TS_SHAPE(R), v, 0));
        CHECK(same(idx, TS_SHAPE(R), iv, 0));
    }
    ts_scope_end();
}

int main(void) {
    ndev = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    test_long_rows();
    fill_ties(a, 4096, 12345u);
    for (int di = 0; di < ndev; di++) {
        ts_scope_begin();
        test_sort_family(devs[di]);
        test_dtypes_edges(devs[di]);
        test_quantile(devs[di]);
        test_search_unique(devs[di]);
        ts_scope_end();
        CHECK_OK();
    }
    test_grads();
    test_errors();
    CHECK_OK();
    return ts_test_finish();
}
