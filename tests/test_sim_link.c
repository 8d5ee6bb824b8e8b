/* test_sim_link.c — the simulated host link of sim devices (src/backend/sim/sim_link.c): a copy of
 * N bytes takes at least latency + N / bandwidth (a lower bound on the monotonic clock only), the
 * counters add up, results are bit-identical with and without the link, an asynchronous copy from
 * pinned memory overlaps host work (the link's own accounting: the host waited less than the
 * engine was busy), an op using the copied tensor waits for it, and malformed TS_SIM_LINK values
 * and bad arguments give clear errors. */
#define _POSIX_C_SOURCE 200809L /* setenv, clock_gettime */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tessera.h"
#include "tessera/sim_link.h"
#include "ts_test.h"

#define BW  1e8   /* 100 MB/s: 1 MB takes 10 ms */
#define LAT 50e-6 /* 50 us */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static ts_tensor *ramp(int64_t n) {
    ts_tensor *t = ts_arange(0, (double)n, 1, (ts_opts){.dtype = TS_F32});
    return ts_sin(t);
}

static bool same_bits(ts_tensor *a, ts_tensor *b) {
    const int64_t n = ts_numel(a);
    if (ts_numel(b) != n) return false;
    float *x = malloc((size_t)n * sizeof *x), *y = malloc((size_t)n * sizeof *y);
    bool ok = x && y && ts_copy_to_host(ts_to(a, ts_cpu()), x, (size_t)n * sizeof *x) == TS_OK &&
              ts_copy_to_host(ts_to(b, ts_cpu()), y, (size_t)n * sizeof *y) == TS_OK &&
              !memcmp(x, y, (size_t)n * sizeof *x);
    free(x), free(y);
    return ok;
}

/* one result computed on sim:0 from a host tensor; the link as set by the caller */
static ts_tensor *compute(ts_tensor *h) {
    ts_tensor *d = ts_to(h, ts_sim(0));
    return ts_to(ts_mul(ts_exp(d), d), ts_cpu());
}

static void check_sync_copy(void) {
    const int64_t n = 250000; /* 1 MB of f32: 10.05 ms each way */
    ts_scope_begin();
    ts_tensor *h = ramp(n);
    ts_tensor *plain = compute(h);
    CHECK_EQ(ts_sim_set_link(BW, LAT), TS_OK);
    ts_sim_link_wait(-1);
    ts_sim_link_reset_stats(-1);
    const double model = LAT + (double)n * 4 / BW;
    double t0 = now_s();
    ts_tensor *d = ts_to(h, ts_sim(0));
    double t1 = now_s();
    CHECK(d != NULL && t1 - t0 >= model * 0.999);
    t0 = now_s();
    ts_tensor *back = ts_to(d, ts_cpu());
    t1 = now_s();
    CHECK(back != NULL && t1 - t0 >= model * 0.999);
    ts_sim_link_stats st;
    CHECK_EQ(ts_sim_link_stats_get(0, &st), TS_OK);
    CHECK(st.bytes_h2d == (uint64_t)n * 4 && st.bytes_d2h == (uint64_t)n * 4);
    CHECK(st.copies_h2d == 1 && st.copies_d2h == 1 && st.async_copies == 0);
    const int64_t model_ns = (int64_t)(model * 1e9);
    CHECK(st.busy_ns >= 2 * model_ns - 2 && st.busy_ns <= 2 * model_ns + 2); /* the model's */
    CHECK(st.wait_ns <= 2 * model_ns + 2); /* never more than the copies took */
    CHECK(same_bits(back, h));
    /* the same computation through the link: bit-identical */
    CHECK(same_bits(compute(h), plain));
    CHECK_EQ(ts_sim_set_link(0, 0), TS_OK);
    ts_sim_link_reset_stats(-1);
    CHECK(same_bits(compute(h), plain));
    CHECK_EQ(ts_sim_link_stats_get(0, &st), TS_OK);
    CHECK(st.bytes_h2d == 0 && st.busy_ns == 0); /* off: nothing counted */
    ts_scope_end();
}

/* two queued copies of `model` each plus host work of about one copy: the host waits for the
 * remaining copy time only, less than the engine's busy time */
static void check_async_overlap(void) {
    const int64_t n = 250000;
    ts_scope_begin();
    ts_tensor *a = ts_pin_memory(ramp(n)), *b = ts_pin_memory(ts_neg(ramp(n)));
    CHECK(a && b && ts_is_pinned(a));
    CHECK_EQ(ts_sim_set_link(BW, LAT), TS_OK);
    ts_sim_link_reset_stats(-1);
    const double model = LAT + (double)n * 4 / BW;
    double t0 = now_s();
    ts_tensor *da = ts_to_async(a, ts_sim(0)), *db = ts_to_async(b, ts_sim(0));
    CHECK(da && db);
    ts_sim_link_stats st;
    CHECK_EQ(ts_sim_link_stats_get(0, &st), TS_OK);
    CHECK(st.async_copies == 2 && st.bytes_h2d == (uint64_t)n * 8 && st.wait_ns == 0);
    /* host work while the engine copies: at least one copy's time */
    const double c0 = now_s();
    volatile double spin = 0;
    while (now_s() - c0 < model) spin += 1;
    ts_tensor *sum = ts_add(da, db); /* waits for both copies */
    CHECK(sum != NULL);
    CHECK(now_s() - t0 >= 2 * model * 0.999); /* the second copy cannot end before 2 * model */
    CHECK_EQ(ts_sim_link_stats_get(0, &st), TS_OK);
    /* overlap, from the link's accounting: the copies were busy 2 * model, the host (having
     * worked >= model since they were queued) waited at most model of it */
    const int64_t model_ns = (int64_t)(model * 1e9);
    CHECK(st.busy_ns >= 2 * model_ns - 2);
    CHECK(st.wait_ns <= model_ns + 2 && st.wait_ns < st.busy_ns - model_ns / 2);
    CHECK(same_bits(sum, ts_add(a, b)));
    /* ts_sim_link_wait and the counters: nothing left in flight afterwards */
    ts_tensor *dc = ts_to_async(a, ts_sim(0));
    t0 = now_s();
    CHECK_EQ(ts_sim_link_wait(0), TS_OK);
    CHECK(now_s() - t0 >= model * 0.5 && same_bits(dc, a));
    CHECK_EQ(ts_sim_set_link(0, 0), TS_OK);
    /* off: ts_to_async to sim is a plain synchronous copy */
    ts_sim_link_reset_stats(-1);
    CHECK(same_bits(ts_to_async(a, ts_sim(0)), a));
    CHECK_EQ(ts_sim_link_stats_get(0, &st), TS_OK);
    CHECK(st.async_copies == 0);
    ts_scope_end();
}

static void expect_bad(const char *spec, const char *needle) {
    setenv("TS_SIM_LINK", spec, 1);
    CHECK_EQ(ts_sim_link_from_env(), TS_ERR_ARG);
    const char *m = ts_error_message();
    if (!strstr(m, "TS_SIM_LINK") || !strstr(m, needle))
        ts_test_failf(__FILE__, __LINE__, "TS_SIM_LINK=%s: message '%s'", spec, m);
    ts_error_clear();
    CHECK(!ts_sim_link_get(NULL, NULL)); /* still off */
}

static void check_parsing(void) {
    double bw = 0, lat = 0;
    setenv("TS_SIM_LINK", "16GB/s,5us", 1);
    CHECK_EQ(ts_sim_link_from_env(), TS_OK);
    CHECK(ts_sim_link_get(&bw, &lat) && bw == 16e9 && lat == 5e-6);
    CHECK_EQ(ts_sim_set_link_str("2GiB/s", "link"), TS_OK);
    CHECK(ts_sim_link_get(&bw, &lat) && bw == 2147483648.0 && lat == 0);
    CHECK_EQ(ts_sim_set_link_str(" 500 MB/s , 1.5ms ", NULL), TS_OK);
    CHECK(ts_sim_link_get(&bw, &lat) && bw == 5e8 && lat == 1.5e-3);
    CHECK_EQ(ts_sim_set_link_str("off", NULL), TS_OK);
    CHECK(!ts_sim_link_get(&bw, &lat) && bw == 0 && lat == 0);
    expect_bad("16", "bandwidth");
    expect_bad("16GB", "bandwidth");
    expect_bad("fast,5us", "bandwidth");
    expect_bad("0GB/s,5us", "bandwidth");
    expect_bad("-1GB/s", "bandwidth");
    expect_bad("16GB/s,5", "latency");
    expect_bad("16GB/s,-5us", "latency");
    expect_bad("16GB/s,5us,3", "latency");
    unsetenv("TS_SIM_LINK");
    CHECK_EQ(ts_sim_link_from_env(), TS_OK);
    CHECK(!ts_sim_link_get(NULL, NULL));
    /* the C setter and the counters' arguments */
    CHECK_EQ(ts_sim_set_link(-1, 0), TS_ERR_ARG);
    CHECK(strstr(ts_error_message(), "bandwidth_bytes_per_s") != NULL);
    ts_error_clear();
    CHECK_EQ(ts_sim_set_link(1e9, -1), TS_ERR_ARG);
    CHECK(strstr(ts_error_message(), "latency_s") != NULL);
    ts_error_clear();
    ts_sim_link_stats st;
    CHECK_EQ(ts_sim_link_stats_get(99, &st), TS_ERR_DEVICE);
    ts_error_clear();
    CHECK_EQ(ts_sim_link_stats_get(0, NULL), TS_ERR_ARG);
    ts_error_clear();
    CHECK_EQ(ts_sim_link_wait(-2), TS_ERR_DEVICE);
    ts_error_clear();
}

int main(void) {
    if (ts_device_count(TS_SIM) < 1) return ts_test_skip("no sim devices (TS_SIM_DEVICES)");
    check_parsing();
    check_sync_copy();
    check_async_overlap();
    return ts_test_finish();
}
