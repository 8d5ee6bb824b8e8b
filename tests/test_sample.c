/* test_sample.c — ts_sample_logits (src/models/sample.c), the token draw behind ts_gpt_generate and
 * `tessera generate`, on every device and in float32 and bfloat16: the support of top-k (exactly
 * the k largest, ties with the k-th kept, never one more), the drawn frequencies against the exact
 * softmax(logits / temperature) probabilities within a binomial bound (also for logits near 1000,
 * whose exponentials overflow unless shifted), greedy's first maximum,
 * determinism under ts_manual_seed, and the refusals. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "tessera.h"
#include "ts_test.h"

#define ROWS 4000 /* draws per case: one per row */
#define V    6

/* every value exact in bfloat16 */
static const double logits_row[V] = {2.0, 1.5, 1.5, 0.25, -0.5, 1.0};

static ts_tensor *logits_on(ts_device d, ts_dtype dt, const double *row) {
    static double host[ROWS * V];
    for (int i = 0; i < ROWS; i++) memcpy(host + i * V, row, sizeof(double) * V);
    ts_tensor *t = ts_tensor_f64(TS_SHAPE(ROWS, V), host, (ts_opts){.dtype = TS_F64});
    return ts_to(ts_to_dtype(t, dt), d);
}

/* the drawn tokens counted per vocabulary entry; false when the draw failed or a token is out of
 * range or the result is not i64 [ROWS] on the logits' device */
static bool draw_counts(ts_tensor *logits, ts_sample_opts o, long long *counts) {
    static int64_t tok[ROWS];
    ts_tensor *s = ts_sample_logits(logits, o);
    if (!s || ts_dtype_of(s) != TS_I64 || ts_ndim(s) != 1 || ts_size(s, 0) != ROWS) return false;
    if (!ts_device_equal(ts_device_of(s), ts_device_of(logits))) return false;
    if (ts_copy_to_host(ts_to(s, ts_cpu()), tok, sizeof tok) != TS_OK) return false;
    memset(counts, 0, sizeof(long long) * V);
    for (int i = 0; i < ROWS; i++) {
        if (tok[i] < 0 || tok[i] >= V) return false;
        counts[tok[i]]++;
    }
    return true;
}

/* the exact probabilities: softmax(l / T) over the kept tokens (l >= the k-th largest) */
static void exact_probs(const double *l, double temp, int64_t top_k, double *p) {
    double thr = -INFINITY;
    if (top_k > 0 && top_k < V) {
        double s[V];
        memcpy(s, l, sizeof s);
        for (int i = 0; i < V; i++) /* descending selection sort */
            for (int j = i + 1; j < V; j++)
                if (s[j] > s[i]) {
                    double t = s[i];
                    s[i] = s[j], s[j] = t;
                }
        thr = s[top_k - 1];
    }
    double z = 0;
    for (int j = 0; j < V; j++) z += p[j] = l[j] >= thr ? exp(l[j] / temp) : 0.0;
    for (int j = 0; j < V; j++) p[j] /= z;
}

/* counts against ROWS * p: tokens of probability 0 never drawn; the others within 6 standard
 * deviations of the binomial (a false failure about once in 10^8 runs per token) */
static bool counts_match(const long long *c, const double *p, const char *what) {
    bool ok = true;
    for (int j = 0; j < V; j++) {
        const double mean = ROWS * p[j], sd = sqrt(ROWS * p[j] * (1 - p[j]));
        const bool fits = p[j] == 0 ? c[j] == 0 : fabs((double)c[j] - mean) <= 6 * sd + 1;
        if (!fits) {
            fprintf(stderr, "  %s: token %d drawn %lld times, expected %.1f (p %.4f)\n", what, j,
                    c[j], mean, p[j]);
            ok = false;
        }
    }
    return ok;
}

static void test_distribution(ts_device d, ts_dtype dt) {
    static const struct {
        double temp; /* 0 means 1 */
        int64_t top_k;
    } cases[] = {{1.0, 0}, {0.0, 0}, {0.5, 0}, {2.0, 0}, {1.0, 1},  {1.0, 2},
                 {1.0, 3}, {0.7, 4}, {1.0, 5}, {1.0, 6}, {1.0, 100}};
    ts_scope_begin();
    ts_tensor *l = logits_on(d, dt, logits_row);
    CHECK(l != NULL);
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        long long c[V];
        double p[V];
        char what[96];
        snprintf(what, sizeof what, "%s %s temperature %g top_k %lld", ts_device_str(d),
                 ts_dtype_name(dt), cases[i].temp, (long long)cases[i].top_k);
        exact_probs(logits_row, cases[i].temp > 0 ? cases[i].temp : 1.0, cases[i].top_k, p);
        const ts_sample_opts o = {.temperature = cases[i].temp, .top_k = cases[i].top_k};
        const bool drawn = draw_counts(l, o, c);
        if (!drawn) fprintf(stderr, "  %s: draw failed%s\n", what, ts_test_error_str());
        CHECK(drawn && counts_match(c, p, what));
    }
    ts_scope_end();
}

/* softmax(l / T) does not change when a constant is added to every logit: logits around 1000
 * (exact in float32) at temperature 0.5 draw as logits_row does. exp(l / T) itself overflows
 * there (e^2004): the draw must subtract the largest l / T, not some other shift. */
static void test_shift_invariance(ts_device d) {
    double row[V], p[V];
    for (int j = 0; j < V; j++) row[j] = logits_row[j] + 1000.0;
    ts_scope_begin();
    ts_tensor *l = logits_on(d, TS_F32, row);
    for (int k = 0; k <= 3; k += 3) {
        long long c[V];
        char what[96];
        snprintf(what, sizeof what, "%s logits + 1000, temperature 0.5, top_k %d", ts_device_str(d),
                 k);
        exact_probs(logits_row, 0.5, k, p);
        const bool drawn = draw_counts(l, (ts_sample_opts){.temperature = 0.5, .top_k = k}, c);
        if (!drawn) fprintf(stderr, "  %s: draw failed%s\n", what, ts_test_error_str());
        CHECK(drawn && counts_match(c, p, what));
    }
    ts_scope_end();
}

/* top_k = 2 keeps the two tokens tied at the 2nd largest value; top_k = 3 keeps exactly those
 * three (token 5, the 4th largest, never appears) */
static void test_topk_support(ts_device d) {
    ts_scope_begin();
    ts_tensor *l = logits_on(d, TS_F32, logits_row);
    long long c[V];
    CHECK(draw_counts(l, (ts_sample_opts){.top_k = 2}, c));
    CHECK(c[0] > 0 && c[1] > 0 && c[2] > 0 && c[3] + c[4] + c[5] == 0);
    CHECK(draw_counts(l, (ts_sample_opts){.top_k = 3}, c));
    CHECK(c[5] == 0 && c[3] == 0 && c[4] == 0);
    CHECK(draw_counts(l, (ts_sample_opts){.top_k = 4}, c));
    CHECK(c[5] > 0 && c[3] == 0 && c[4] == 0);
    ts_scope_end();
}

/* greedy: the first of equal maxima, whatever the temperature and top_k */
static void test_greedy(ts_device d) {
    static const double row[V] = {0.5, 1.0, 3.0, -1.0, 3.0, 2.5};
    ts_scope_begin();
    ts_tensor *l = logits_on(d, TS_F32, row);
    long long c[V];
    CHECK(draw_counts(l, (ts_sample_opts){.greedy = true, .temperature = 5, .top_k = 4}, c));
    CHECK_EQ(c[2], ROWS);
    ts_scope_end();
}

/* the same seed draws the same tokens; another seed different ones */
static void test_seeded(ts_device d) {
    static int64_t a[ROWS], b[ROWS], e[ROWS];
    ts_scope_begin();
    ts_tensor *l = logits_on(d, TS_F32, logits_row);
    const ts_sample_opts o = {.temperature = 1.0};
    ts_manual_seed(11);
    ts_tensor *s1 = ts_to(ts_sample_logits(l, o), ts_cpu());
    ts_manual_seed(11);
    ts_tensor *s2 = ts_to(ts_sample_logits(l, o), ts_cpu());
    ts_manual_seed(12);
    ts_tensor *s3 = ts_to(ts_sample_logits(l, o), ts_cpu());
    CHECK(s1 && s2 && s3);
    if (s1 && s2 && s3) {
        CHECK(ts_copy_to_host(s1, a, sizeof a) == TS_OK &&
              ts_copy_to_host(s2, b, sizeof b) == TS_OK &&
              ts_copy_to_host(s3, e, sizeof e) == TS_OK);
        CHECK(memcmp(a, b, sizeof a) == 0);
        CHECK(memcmp(a, e, sizeof a) != 0);
    }
    ts_scope_end();
}

static void expect_error(ts_tensor *r, ts_status code, const char *needle) {
    CHECK(r == NULL);
    CHECK_EQ(ts_error(), code);
    CHECK(ts_error_message() && strstr(ts_error_message(), needle));
    ts_error_clear();
}

static void test_refusals(void) {
    ts_scope_begin();
    ts_tensor *l = logits_on(ts_cpu(), TS_F32, logits_row);
    expect_error(ts_sample_logits(l, (ts_sample_opts){.top_k = -1}), TS_ERR_ARG, "top_k");
    expect_error(ts_sample_logits(l, (ts_sample_opts){.temperature = -0.5}), TS_ERR_ARG,
                 "temperature");
    expect_error(ts_sample_logits(l, (ts_sample_opts){.temperature = NAN}), TS_ERR_ARG,
                 "temperature");
    expect_error(ts_sample_logits(l, (ts_sample_opts){.temperature = INFINITY}), TS_ERR_ARG,
                 "temperature");
    expect_error(ts_sample_logits(ts_reshape(l, TS_SHAPE(ROWS * V)), (ts_sample_opts){0}),
                 TS_ERR_SHAPE, "sample_logits");
    expect_error(ts_sample_logits(ts_to_dtype(l, TS_I64), (ts_sample_opts){0}), TS_ERR_SHAPE,
                 "floating");
    expect_error(ts_sample_logits(NULL, (ts_sample_opts){0}), TS_ERR_ARG, "NULL");
    ts_scope_end();
}

int main(void) {
    ts_device devs[TS_TEST_MAX_DEVICES];
    const int n = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    ts_manual_seed(3);
    for (int i = 0; i < n; i++) {
        test_distribution(devs[i], TS_F32);
        test_distribution(devs[i], TS_BF16);
        test_topk_support(devs[i]);
        test_shift_invariance(devs[i]);
        test_greedy(devs[i]);
        test_seeded(devs[i]);
    }
    test_refusals();
    return ts_test_finish();
}
