/* test_random.c — random tensors: one seed gives the same numbers on cpu and sim:0 at any thread
 * count; distribution sanity; the normal's shape against the normal CDF (Kolmogorov-Smirnov);
 * randperm uniform over all permutations and positions (chi-square); randint, randperm, bernoulli,
 * normal_/uniform_ and their errors. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stats.h"
#include "ts_test.h"

#define BIG 50000 /* past the kernels' parallel threshold */

static double *host(ts_tensor *t) {
    int64_t n = ts_numel(t);
    double *buf = calloc((size_t)(n > 0 ? n : 1), sizeof(double));
    ts_tensor *c = ts_to_dtype(t, TS_F64);
    if (ts_copy_to_host(c, buf, (size_t)n * sizeof(double)) != TS_OK) buf[0] = NAN;
    return buf;
}

static void moments(const double *v, int64_t n, double *mean, double *var) {
    double s = 0, ss = 0;
    for (int64_t i = 0; i < n; i++) s += v[i];
    *mean = s / (double)n;
    for (int64_t i = 0; i < n; i++) ss += (v[i] - *mean) * (v[i] - *mean);
    *var = ss / (double)(n - 1);
}

/* raw bytes of t (same dtype) for bit-exact comparisons */
static void *raw(ts_tensor *t) {
    size_t nb = ts_nbytes(t);
    void *p = malloc(nb ? nb : 1);
    if (ts_copy_to_host(t, p, nb) != TS_OK) memset(p, 0xff, nb ? nb : 1);
    return p;
}

static void test_reproducible(int ndev) {
    ts_device devs[2] = {ts_cpu(), ts_sim(0)};
    const ts_dtype dts[] = {TS_F32, TS_F64};
    for (int di = 0; di < 2; di++) {
        ts_scope_begin();
        ts_opts o = {.dtype = dts[di]};
        ts_set_num_threads(1);
        ts_manual_seed(1234);
        ts_tensor *ref = ts_randn(TS_SHAPE(BIG), o);
        ts_tensor *ref_u = ts_rand(TS_SHAPE(7, 3), o);
        void *rb = raw(ref), *rub = raw(ref_u);
        for (int threads = 1; threads <= 2; threads++) {
            for (int d = 0; d < ndev; d++) {
                ts_set_num_threads(threads);
                ts_manual_seed(1234);
                o.device = devs[d];
                ts_tensor *a = ts_randn(TS_SHAPE(BIG), o);
                ts_tensor *u = ts_rand(TS_SHAPE(7, 3), o);
                CHECK(a && ts_device_equal(ts_device_of(a), devs[d]));
                void *ab = raw(a), *ub = raw(u);
                CHECK(memcmp(ab, rb, ts_nbytes(ref)) == 0);
                CHECK(memcmp(ub, rub, ts_nbytes(ref_u)) == 0);
                free(ab);
                free(ub);
            }
        }
        /* the stream moves on: the next draw differs from the first */
        ts_manual_seed(1234);
        ts_tensor *a1 = ts_randn(TS_SHAPE(BIG), o), *a2 = ts_randn(TS_SHAPE(BIG), o);
        void *b1 = raw(a1), *b2 = raw(a2);
        CHECK(memcmp(b1, rb, ts_nbytes(a1)) == 0 && memcmp(b2, rb, ts_nbytes(a2)) != 0);
        free(b1);
        free(b2);
        /* the saved state replays */
        ts_rng_state st = ts_rng_get_state();
        ts_tensor *c1 = ts_rand(TS_SHAPE(5), o);
        ts_rng_set_state(st);
        ts_tensor *c2 = ts_rand(TS_SHAPE(5), o);
        void *cb1 = raw(c1), *cb2 = raw(c2);
        CHECK(memcmp(cb1, cb2, ts_nbytes(c1)) == 0);
        free(cb1);
        free(cb2);
        free(rb);
        free(rub);
        ts_set_num_threads(0);
        CHECK_OK();
        ts_scope_end();
    }
}

static void test_distributions(ts_device dev) {
    ts_scope_begin();
    ts_opts o = {.device = dev};
    double m, v;
    ts_tensor *u = ts_rand(TS_SHAPE(BIG), o);
    CHECK(u && ts_dtype_of(u) == TS_F32);
    double *h = host(u);
    int out = 0;
    for (int i = 0; i < BIG; i++) out += h[i] < 0 || h[i] >= 1;
    CHECK_EQ(out, 0);
    moments(h, BIG, &m, &v);
    CHECK_NEAR(m, 0.5, 0.01);
    CHECK_NEAR(v, 1.0 / 12, 0.003);
    free(h);
    h = host(ts_randn(TS_SHAPE(100, 500), (ts_opts){.dtype = TS_F64, .device = dev}));
    moments(h, BIG, &m, &v);
    CHECK_NEAR(m, 0.0, 0.02);
    CHECK_NEAR(v, 1.0, 0.03);
    free(h);
    /* normal_ and uniform_ in place, on a strided view too */
    ts_tensor *t = ts_zeros(TS_SHAPE(BIG), o);
    uint64_t v0 = ts_version(t);
    CHECK(ts_normal_(t, 2.0, 3.0) == t && ts_version(t) > v0);
    h = host(t);
    moments(h, BIG, &m, &v);
    CHECK_NEAR(m, 2.0, 0.06);
    CHECK_NEAR(sqrt(v), 3.0, 0.06);
    free(h);
    CHECK(ts_uniform_(t, -2.0, 5.0) == t);
    h = host(t);
    out = 0;
    for (int i = 0; i < BIG; i++) out += h[i] < -2 || h[i] >= 5;
    CHECK_EQ(out, 0);
    moments(h, BIG, &m, &v);
    CHECK_NEAR(m, 1.5, 0.06);
    free(h);
    ts_manual_seed(7);
    ts_tensor *c = ts_normal_(ts_zeros(TS_SHAPE(4, 5), o), 0, 1);
    ts_manual_seed(7);
    ts_tensor *s = ts_normal_(ts_t(ts_zeros(TS_SHAPE(5, 4), o)), 0, 1);
    double *ch = host(c), *sh = host(s); /* row-major order of the view, whatever its strides */
    CHECK(memcmp(ch, sh, 20 * sizeof(double)) == 0);
    free(ch);
    free(sh);
    /* *_like */
    ts_tensor *l =
        ts_randn_like(ts_zeros(TS_SHAPE(3, 2), (ts_opts){.dtype = TS_F64, .device = dev}));
    CHECK(l && ts_dtype_of(l) == TS_F64 && ts_numel(l) == 6 &&
          ts_device_equal(ts_device_of(l), dev));
    CHECK(ts_rand_like(ts_ones(TS_SHAPE(2), o)) != NULL);
    ts_tensor *rg = ts_rand(TS_SHAPE(2), (ts_opts){.device = dev, .requires_grad = true});
    CHECK(rg && ts_requires_grad(rg));
    CHECK(ts_numel(ts_rand(TS_SHAPE(0, 3), o)) == 0);
    CHECK_OK();

    CHECK(ts_rand(TS_SHAPE(2), (ts_opts){.dtype = TS_I64, .device = dev}) == NULL);
    CHECK_ERR(TS_ERR_DTYPE);
    CHECK(ts_randn_like(ts_zeros(TS_SHAPE(2), (ts_opts){.dtype = TS_I32, .device = dev})) == NULL);
    CHECK_ERR(TS_ERR_DTYPE);
    CHECK(ts_normal_(t, 0, -1) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_uniform_(t, 2, 1) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_normal_(ts_zeros(TS_SHAPE(2), (ts_opts){.device = dev, .requires_grad = true}), 0,
                     1) == NULL);
    CHECK_ERR(TS_ERR_STATE);
    CHECK(ts_uniform_(ts_expand(ts_zeros(TS_SHAPE(1), o), TS_SHAPE(4)), 0, 1) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_normal_(NULL, 0, 1) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    ts_scope_end();
}

/* The shape of the normal, not only its moments: Kolmogorov-Smirnov against the normal CDF (from
 * erfc, independent of the Box-Muller code), at a false-positive rate of 1e-9. */
static void check_normal_shape(const char *what, double *v, int64_t n, double mean, double std) {
    for (int64_t i = 0; i < n; i++) v[i] = (v[i] - mean) / std;
    double d = ts_stats_ks(v, n, ts_stats_normal_cdf), crit = ts_stats_ks_critical(n, 1e-9);
    if (d > crit) printf("  %s: Kolmogorov-Smirnov D = %.5f > %.5f\n", what, d, crit);
    CHECK(d <= crit);
}

static void test_normal_shape(ts_device dev) {
    ts_scope_begin();
    for (int t = 0; t < 2; t++) {
        ts_dtype dt = t ? TS_F32 : TS_F64;
        double *h = host(ts_randn(TS_SHAPE(BIG), (ts_opts){.dtype = dt, .device = dev}));
        check_normal_shape(t ? "randn f32" : "randn f64", h, BIG, 0, 1);
        free(h);
        h = host(
            ts_normal_(ts_zeros(TS_SHAPE(BIG), (ts_opts){.dtype = dt, .device = dev}), -2, 0.5));
        check_normal_shape(t ? "normal_ f32" : "normal_ f64", h, BIG, -2, 0.5);
        free(h);
    }
    /* a uniform scaled to mean 0 and variance 1 has the moments of a normal but not its shape */
    double *u = host(ts_rand(TS_SHAPE(BIG), (ts_opts){.dtype = TS_F64, .device = dev}));
    for (int i = 0; i < BIG; i++) u[i] = (u[i] - 0.5) * sqrt(12.0);
    CHECK(ts_stats_ks(u, BIG, ts_stats_normal_cdf) > ts_stats_ks_critical(BIG, 1e-9));
    free(u);
    CHECK_OK();
    ts_scope_end();
}

/* randperm is uniform: over all 24 permutations of 4 (a shuffle that makes only some of them, as
 * Sattolo's single-cycle one does, fails at once) and over (position, value) for n = 10. */
static void test_randperm_uniform(ts_device dev) {
    ts_scope_begin();
    enum { SMALL = 4, PERMS = 24, DRAWS = 200 * PERMS, N10 = 10, DRAWS10 = 3000 };
    int64_t count[PERMS] = {0}, pos[N10 * N10] = {0};
    int bad = 0;
    ts_manual_seed(2024);
    for (int r = 0; r < DRAWS; r++) {
        int64_t p[SMALL] = {0};
        ts_scope_begin();
        ts_copy_to_host(ts_randperm(SMALL, (ts_opts){.device = dev}), p, sizeof p);
        ts_scope_end();
        int k = ts_stats_perm_index(p, SMALL);
        if (k < 0)
            bad++;
        else
            count[k]++;
    }
    CHECK_EQ(bad, 0);
    double chi2 = ts_stats_chi2_uniform(count, PERMS), crit = ts_stats_chi2_critical(PERMS - 1);
    if (chi2 > crit)
        printf("  randperm(4): chi-square %.1f > %.1f over 24 permutations\n", chi2, crit);
    CHECK(chi2 <= crit);
    for (int r = 0; r < DRAWS10; r++) {
        int64_t p[N10] = {0};
        ts_scope_begin();
        ts_copy_to_host(ts_randperm(N10, (ts_opts){.device = dev}), p, sizeof p);
        ts_scope_end();
        for (int i = 0; i < N10; i++) pos[i * N10 + (p[i] >= 0 && p[i] < N10 ? p[i] : 0)]++;
    }
    chi2 = ts_stats_chi2_uniform(pos, N10 * N10);
    /* each row sums to DRAWS10 and each column too: (n - 1)^2 degrees of freedom */
    crit = ts_stats_chi2_critical((N10 - 1) * (N10 - 1));
    if (chi2 > crit) printf("  randperm(10): chi-square %.1f > %.1f over positions\n", chi2, crit);
    CHECK(chi2 <= crit);
    CHECK_OK();
    ts_scope_end();
}

static void test_randint_randperm(ts_device dev) {
    ts_scope_begin();
    ts_opts o = {.device = dev};
    ts_tensor *r = ts_randint(-3, 5, TS_SHAPE(20000), o);
    CHECK(r && ts_dtype_of(r) == TS_I64);
    double *h = host(r);
    int seen[8] = {0}, out = 0;
    for (int i = 0; i < 20000; i++) {
        if (h[i] < -3 || h[i] >= 5 || h[i] != floor(h[i]))
            out++;
        else
            seen[(int)h[i] + 3]++;
    }
    CHECK_EQ(out, 0);
    for (int k = 0; k < 8; k++) CHECK(seen[k] > 2000 && seen[k] < 3000);
    free(h);
    ts_tensor *r8 = ts_randint(250, 256, TS_SHAPE(100), (ts_opts){.dtype = TS_U8, .device = dev});
    CHECK(r8 && ts_dtype_of(r8) == TS_U8 && ts_item(ts_amin_dim(r8, 0, false)) >= 250);
    ts_tensor *rf = ts_randint(0, 2, TS_SHAPE(10), (ts_opts){.dtype = TS_F32, .device = dev});
    CHECK(rf && ts_dtype_of(rf) == TS_F32);
    CHECK_OK();
    CHECK(ts_randint(5, 5, TS_SHAPE(2), o) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_randint(-1, 5, TS_SHAPE(2), (ts_opts){.dtype = TS_U8, .device = dev}) == NULL);
    CHECK_ERR(TS_ERR_ARG);

    /* randperm: a permutation, the same for a seed on every device */
    ts_manual_seed(99);
    ts_tensor *p = ts_randperm(1000, o);
    CHECK(p && ts_dtype_of(p) == TS_I64 && ts_numel(p) == 1000);
    h = host(p);
    char hit[1000] = {0};
    int bad = 0, fixed = 0;
    for (int i = 0; i < 1000; i++) {
        int k = (int)h[i];
        if (k < 0 || k >= 1000 || hit[k])
            bad++;
        else
            hit[k] = 1;
        fixed += k == i;
    }
    CHECK_EQ(bad, 0);
    CHECK(fixed < 10); /* a shuffled permutation has about one fixed point */
    ts_manual_seed(99);
    double *h2 = host(ts_randperm(1000, (ts_opts){.device = ts_cpu()}));
    CHECK(memcmp(h, h2, 1000 * sizeof(double)) == 0);
    free(h2);
    ts_manual_seed(100);
    h2 = host(ts_randperm(1000, o));
    CHECK(memcmp(h, h2, 1000 * sizeof(double)) != 0);
    free(h2);
    free(h);
    ts_tensor *pf = ts_randperm(5, (ts_opts){.dtype = TS_F32, .device = dev});
    CHECK(pf && ts_dtype_of(pf) == TS_F32);
    CHECK_NEAR(ts_item(ts_sum(pf)), 10, 0);
    CHECK(ts_numel(ts_randperm(0, o)) == 0);
    CHECK_EQ(ts_item(ts_randperm(1, o)), 0);
    CHECK_OK();
    CHECK(ts_randperm(-1, o) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_randperm(300, (ts_opts){.dtype = TS_U8, .device = dev}) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    ts_scope_end();
}

static void test_bernoulli(ts_device dev) {
    ts_scope_begin();
    ts_opts o = {.device = dev};
    double m, v;
    ts_tensor *p = ts_full(TS_SHAPE(BIG), 0.3, o);
    ts_tensor *b = ts_bernoulli(p);
    CHECK(b && ts_dtype_of(b) == TS_F32);
    double *h = host(b);
    int nonbin = 0;
    for (int i = 0; i < BIG; i++) nonbin += h[i] != 0 && h[i] != 1;
    CHECK_EQ(nonbin, 0);
    moments(h, BIG, &m, &v);
    CHECK_NEAR(m, 0.3, 0.01);
    free(h);
    /* probabilities 0 and 1 are exact, per element */
    ts_tensor *p01 = ts_tensor_f64(TS_SHAPE(4), (double[]){0, 1, 1, 0}, o);
    double *hb = host(ts_bernoulli(p01));
    CHECK(hb[0] == 0 && hb[1] == 1 && hb[2] == 1 && hb[3] == 0);
    free(hb);
    ts_tensor *bp =
        ts_bernoulli_p(ts_zeros(TS_SHAPE(BIG), (ts_opts){.dtype = TS_I64, .device = dev}), 0.7);
    CHECK(bp && ts_dtype_of(bp) == TS_I64);
    h = host(bp);
    moments(h, BIG, &m, &v);
    CHECK_NEAR(m, 0.7, 0.01);
    free(h);
    CHECK_OK();
    ts_tensor *bad = ts_tensor_f32(TS_SHAPE(3), (float[]){0.5f, 1.5f, 0.1f}, o);
    CHECK(ts_bernoulli(bad) == NULL);
    CHECK(strstr(ts_error_message(), "Expected p_in >= 0 && p_in <= 1 to be true") != NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_bernoulli(ts_tensor_i64(TS_SHAPE(1), (int64_t[]){1}, o)) == NULL);
    CHECK_ERR(TS_ERR_DTYPE);
    CHECK(ts_bernoulli_p(p, -0.1) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_bernoulli_p(p, NAN) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    ts_scope_end();
}

int main(void) {
    ts_device devs[2] = {ts_cpu(), ts_sim(0)};
    int ndev = ts_device_count(TS_SIM) > 0 ? 2 : 1;
    if (ndev == 1) printf("note: no sim devices (TS_SIM_DEVICES unset): cpu only\n");
    test_reproducible(ndev);
    for (int i = 0; i < ndev; i++) {
        test_distributions(devs[i]);
        test_randint_randperm(devs[i]);
        test_normal_shape(devs[i]);
        test_randperm_uniform(devs[i]);
        test_bernoulli(devs[i]);
        CHECK_OK();
    }
    return ts_test_finish();
}
