/* test_devices.c — device parsing and printing, counts, availability, the default-device stack,
 * transfers between cpu and sim devices, sim re-configuration and the placement log. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ts_test.h"

static bool dev_is(ts_device d, ts_device_type type, int index) {
    return d.type == type && d.index == index;
}

/* Reads a float64-convertible tensor back to the host as doubles. */
static int64_t read_all(ts_tensor *t, double *out, int64_t max) {
    int64_t n = ts_numel(t);
    if (n < 0 || n > max) return -1;
    ts_tensor *c = ts_to(ts_contiguous(ts_to_dtype(t, TS_F64)), ts_cpu());
    if (!c || ts_copy_to_host(c, out, (size_t)n * sizeof(double)) != TS_OK) return -1;
    return n;
}

/* ------------------------------------------------------------------ parse, str */
static void test_parse(void) {
    struct {
        const char *s;
        ts_device_type type;
        int index;
    } good[] = {{"cpu", TS_CPU, 0},     {"cpu:0", TS_CPU, 0},   {"cuda", TS_CUDA, -1},
                {"cuda:0", TS_CUDA, 0}, {"cuda:1", TS_CUDA, 1}, {"cuda:10", TS_CUDA, 10},
                {"sim:3", TS_SIM, 3},   {"sim:0", TS_SIM, 0},   {"sim", TS_SIM, 0}};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        ts_device d = {TS_DEVICE_DEFAULT, 99};
        ts_status st = ts_device_parse(good[i].s, &d);
        CHECK_EQ(st, TS_OK);
        CHECK(dev_is(d, good[i].type, good[i].index));
        if (st != TS_OK || !dev_is(d, good[i].type, good[i].index))
            fprintf(stderr, "  parse '%s' -> %d %d\n", good[i].s, (int)d.type, d.index);
        ts_error_clear();
    }
    const char *bad[] = {"cuda:01", "cuda:", "gpu",     "cpu:1",   "cuda:1x", "CUDA",
                         "",        " cuda", "cuda:-1", "cuda:1 ", "cuda :1", "cuda::1",
                         "cpu:00",  "sim:",  "sim:a",   "cudax",   ":1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ts_device d = {TS_SIM, 42};
        ts_status st = ts_device_parse(bad[i], &d);
        CHECK_EQ(st, TS_ERR_ARG);
        CHECK_EQ(ts_error(), TS_ERR_ARG);
        CHECK(strstr(ts_error_message(), "device") != NULL);
        CHECK(dev_is(d, TS_SIM, 42)); /* the output is left alone on failure */
        if (st != TS_ERR_ARG) fprintf(stderr, "  parse '%s' was accepted\n", bad[i]);
        ts_error_clear();
    }
    ts_device d;
    CHECK_EQ(ts_device_parse(NULL, &d), TS_ERR_ARG);
    ts_error_clear();
    CHECK_EQ(ts_device_parse("cpu", NULL), TS_ERR_ARG);
    ts_error_clear();

    CHECK_STREQ(ts_device_str(ts_cpu()), "cpu");
    CHECK_STREQ(ts_device_str(ts_cuda(0)), "cuda:0");
    CHECK_STREQ(ts_device_str(ts_cuda(-1)), "cuda");
    CHECK_STREQ(ts_device_str(ts_cuda(7)), "cuda:7");
    CHECK_STREQ(ts_device_str(ts_sim(1)), "sim:1");
    CHECK_STREQ(ts_device_str((ts_device){0}), "cpu"); /* the default device */
    /* several strings stay valid at once (a ring of buffers) */
    const char *a = ts_device_str(ts_sim(2)), *b = ts_device_str(ts_sim(3));
    CHECK_STREQ(a, "sim:2");
    CHECK_STREQ(b, "sim:3");
    /* round trip */
    const ts_device devs[] = {ts_cpu(), ts_cuda(3), ts_sim(0), ts_sim(12)};
    for (size_t i = 0; i < 4; i++) {
        ts_device back;
        CHECK(ts_device_parse(ts_device_str(devs[i]), &back) == TS_OK &&
              ts_device_equal(back, devs[i]));
    }
    CHECK(ts_device_equal(ts_cuda(-1), ts_cuda(0)));
    CHECK(ts_device_equal((ts_device){0}, ts_cpu()));
    CHECK(!ts_device_equal(ts_sim(0), ts_sim(1)) && !ts_device_equal(ts_sim(0), ts_cpu()));
    CHECK_OK();
}

/* ------------------------------------------------------------------ availability */
static void test_availability(void) {
    CHECK_EQ(ts_device_count(TS_CPU), 1);
    CHECK_EQ(ts_device_count(TS_SIM), 4);
    /* the GPUs present (none in CI): the first absent index is what cannot be used */
    int ncuda = ts_device_count(TS_CUDA);
    CHECK(ncuda >= 0);
    CHECK_EQ(ts_cuda_is_available(), ncuda > 0);
    const ts_device absent = ts_cuda(ncuda);
    CHECK(ts_device_is_available(ts_cpu()) && ts_device_is_available(ts_sim(3)));
    CHECK(!ts_device_is_available(ts_sim(4)) && !ts_device_is_available(ts_sim(99)));
    CHECK(!ts_device_is_available(ts_sim(-1)) && !ts_device_is_available(absent));
    CHECK_EQ(ts_device_is_available(ts_cuda(0)), ncuda > 0);

    ts_scope_begin();
    ts_mem_stats st;
    CHECK(ts_zeros(TS_SHAPE(2), (ts_opts){.device = ts_sim(99)}) == NULL);
    CHECK_EQ(ts_error(), TS_ERR_DEVICE);
    CHECK(strstr(ts_error_message(), "zeros") && strstr(ts_error_message(), "sim:99"));
    ts_error_clear();
    CHECK(ts_ones(TS_SHAPE(2), (ts_opts){.device = absent}) == NULL);
    CHECK_EQ(ts_error(), TS_ERR_DEVICE);
    CHECK(strstr(ts_error_message(), "ones") && strstr(ts_error_message(), ts_device_str(absent)) &&
          strstr(ts_error_message(), "CUDA"));
    ts_error_clear();
    const float data[] = {1, 2};
    CHECK(ts_tensor_f32(TS_SHAPE(2), data, (ts_opts){.device = ts_sim(4)}) == NULL);
    CHECK(ts_error() == TS_ERR_DEVICE && strstr(ts_error_message(), "sim:4"));
    ts_error_clear();
    if (ncuda == 0) { /* "cuda" is the current GPU: there is none */
        CHECK(ts_arange(0, 3, 1, (ts_opts){.device = ts_cuda(-1)}) == NULL);
        CHECK_ERR(TS_ERR_DEVICE);
    }
    ts_tensor *c = ts_ones(TS_SHAPE(2), (ts_opts){0});
    CHECK(ts_to(c, ts_sim(7)) == NULL);
    CHECK(ts_error() == TS_ERR_DEVICE && strstr(ts_error_message(), "sim:7"));
    ts_error_clear();
    CHECK(ts_to(c, absent) == NULL);
    CHECK_ERR(TS_ERR_DEVICE);
    CHECK_EQ(ts_memory_stats(ts_sim(99), &st), TS_ERR_DEVICE);
    ts_error_clear();
    CHECK_EQ(ts_memory_stats(absent, &st), TS_ERR_DEVICE);
    ts_error_clear();
    size_t free_b = 0, total_b = 0;
    CHECK(ts_device_memory(ts_cpu(), &free_b, &total_b) == TS_OK && total_b > 0);
    CHECK_OK();
    ts_scope_end();
}

/* ------------------------------------------------------------------ default device */
static void *thread_default(void *arg) {
    ts_device *out = arg;
    *out = ts_default_device(); /* another thread does not see main's stack */
    ts_tensor *t = ts_zeros(TS_SHAPE(1), (ts_opts){0});
    out[1] = ts_device_of(t);
    ts_release(t);
    return NULL;
}

static void test_default_stack(void) {
    ts_scope_begin();
    CHECK(dev_is(ts_default_device(), TS_CPU, 0));
    ts_device_push(ts_sim(1));
    CHECK(dev_is(ts_default_device(), TS_SIM, 1));
    ts_tensor *a = ts_zeros(TS_SHAPE(3), (ts_opts){0});
    CHECK(a && dev_is(ts_device_of(a), TS_SIM, 1));
    ts_tensor *r = ts_arange(0, 4, 1, (ts_opts){0});
    CHECK(r && dev_is(ts_device_of(r), TS_SIM, 1));
    /* explicit devices win over the default */
    CHECK(dev_is(ts_device_of(ts_zeros(TS_SHAPE(1), (ts_opts){.device = ts_cpu()})), TS_CPU, 0));
    ts_device th[2] = {{TS_SIM, 9}, {TS_SIM, 9}};
    pthread_t tid;
    pthread_create(&tid, NULL, thread_default, th);
    pthread_join(tid, NULL);
    CHECK(dev_is(th[0], TS_CPU, 0) && dev_is(th[1], TS_CPU, 0));
    ts_device_push(ts_cpu());
    CHECK(dev_is(ts_device_of(ts_ones(TS_SHAPE(1), (ts_opts){0})), TS_CPU, 0));
    ts_device_push(ts_sim(2));
    CHECK(dev_is(ts_device_of(ts_empty(TS_SHAPE(1), (ts_opts){0})), TS_SIM, 2));
    /* ts_to with the default device goes to the current default */
    ts_tensor *moved = ts_to(a, (ts_device){0});
    CHECK(moved && dev_is(ts_device_of(moved), TS_SIM, 2));
    ts_device_pop();
    ts_device_pop();
    CHECK(dev_is(ts_default_device(), TS_SIM, 1));
    /* pushing the default device keeps what is current */
    ts_device_push((ts_device){0});
    CHECK(dev_is(ts_default_device(), TS_SIM, 1));
    ts_device_pop();
    ts_device_pop();
    CHECK(dev_is(ts_default_device(), TS_CPU, 0));
    CHECK(dev_is(ts_device_of(ts_zeros(TS_SHAPE(1), (ts_opts){0})), TS_CPU, 0));
    CHECK_OK();
    ts_device_pop(); /* underflow */
    CHECK_EQ(ts_error(), TS_ERR_STATE);
    CHECK(strstr(ts_error_message(), "device_pop") != NULL);
    ts_error_clear();
    CHECK(dev_is(ts_default_device(), TS_CPU, 0));
    ts_scope_end();
}

/* ------------------------------------------------------------------ transfers */
static void test_transfers(void) {
    ts_scope_begin();
    double v[64];
    const double data[12] = {1.5, -2, 3, 4e10, -0.125, 6, 7, 8, 9, 10, 11, -12};
    ts_tensor *c = ts_tensor_f64(TS_SHAPE(3, 4), data, (ts_opts){0});
    ts_tensor *s0 = ts_to(c, ts_sim(0));
    CHECK(s0 && s0 != c && dev_is(ts_device_of(s0), TS_SIM, 0) && ts_dtype_of(s0) == TS_F64);
    CHECK(!ts_shares_storage(s0, c));
    CHECK(read_all(s0, v, 64) == 12 && memcmp(v, data, sizeof data) == 0);
    ts_tensor *s1 = ts_to(s0, ts_sim(1));
    CHECK(s1 && dev_is(ts_device_of(s1), TS_SIM, 1) && read_all(s1, v, 64) == 12);
    CHECK(memcmp(v, data, sizeof data) == 0);
    ts_tensor *back = ts_to(s1, ts_cpu());
    double host[12] = {0};
    CHECK(back && ts_copy_to_host(back, host, sizeof host) == TS_OK);
    CHECK(memcmp(host, data, sizeof data) == 0);
    /* already there: the same tensor */
    CHECK(ts_to(s1, ts_sim(1)) == s1 && ts_to(c, ts_cpu()) == c);
    CHECK(ts_to_async(s0, ts_sim(0)) == s0);
    /* writing the copy leaves the source alone */
    ts_fill_(s1, 0);
    CHECK(read_all(s0, v, 64) == 12 && memcmp(v, data, sizeof data) == 0);
    /* strided sources arrive contiguous with the logical order */
    ts_tensor *tr = ts_t(s0);
    ts_tensor *trc = ts_to(tr, ts_cpu());
    CHECK(trc && ts_is_contiguous(trc) && ts_size(trc, 0) == 4 && read_all(trc, v, 64) == 12);
    bool ok = true;
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 3; j++) ok = ok && v[i * 3 + j] == data[j * 4 + i];
    CHECK(ok);
    ts_tensor *sl = ts_to(ts_slice(ts_select(c, 1, 1), 0, 0, 3, 2), ts_sim(3));
    CHECK(sl && ts_numel(sl) == 2 && read_all(sl, v, 64) == 2 && v[0] == -2 && v[1] == 10);
    ts_tensor *ex = ts_to(ts_expand(ts_select(c, 0, 0), TS_SHAPE(2, 4)), ts_sim(2));
    CHECK(ex && read_all(ex, v, 64) == 8 && v[4] == 1.5 && v[7] == 4e10);
    /* every dtype travels unchanged */
    const ts_dtype dts[8] = {TS_F32, TS_F64, TS_F16, TS_BF16, TS_I64, TS_I32, TS_U8, TS_BOOL};
    for (int d = 0; d < 8; d++) {
        ts_tensor *x = ts_arange(0, 5, 1, (ts_opts){.dtype = dts[d], .device = ts_sim(0)});
        ts_tensor *y = ts_to(ts_to(x, ts_sim(1)), ts_cpu());
        CHECK(y && ts_dtype_of(y) == dts[d] && read_all(y, v, 64) == 5);
        CHECK(v[0] == 0 && v[4] == (dts[d] == TS_BOOL ? 1 : 4));
    }
    /* empty and 0-dim tensors */
    ts_tensor *e = ts_to(ts_zeros(TS_SHAPE(0, 2), (ts_opts){0}), ts_sim(0));
    CHECK(e && ts_numel(e) == 0 && dev_is(ts_device_of(e), TS_SIM, 0));
    ts_tensor *sc = ts_to(ts_scalar(-3.5, (ts_opts){0}), ts_sim(1));
    CHECK(sc && ts_ndim(sc) == 0 && ts_item(sc) == -3.5);
    /* clone stays on its device */
    ts_tensor *cl = ts_clone(tr);
    CHECK(cl && dev_is(ts_device_of(cl), TS_SIM, 0) && ts_is_contiguous(cl));

    /* copy_ across devices, with broadcasting and a cast */
    ts_tensor *dst = ts_zeros(TS_SHAPE(2, 3), (ts_opts){.device = ts_sim(1), .dtype = TS_F32});
    const int64_t row[3] = {4, -5, 6};
    ts_tensor *src = ts_tensor_i64(TS_SHAPE(3), row, (ts_opts){0});
    uint64_t ver = ts_version(dst);
    CHECK(ts_copy_(dst, src) == dst && ts_version(dst) > ver);
    CHECK(dev_is(ts_device_of(dst), TS_SIM, 1) && ts_dtype_of(dst) == TS_F32);
    CHECK(read_all(dst, v, 64) == 6 && v[0] == 4 && v[1] == -5 && v[5] == 6);
    ts_tensor *dst2 = ts_zeros(TS_SHAPE(3, 2), (ts_opts){0});
    CHECK(ts_copy_(ts_t(dst2), ts_to(ts_full(TS_SHAPE(2, 3), 2, (ts_opts){0}), ts_sim(0))));
    CHECK(read_all(dst2, v, 64) == 6 && v[0] == 2 && v[5] == 2);
    CHECK(ts_copy_(ts_select(dst, 0, 0), ts_to(ts_t(s0), ts_sim(2))) == NULL); /* [3] <- [4,3] */
    CHECK_ERR(TS_ERR_SHAPE);
    /* a destination whose shape has nonzero entries past ndim (as a binding may pass them) */
    const ts_shape loose = {.ndim = 1, .dims = {-1, 3, 9}};
    ts_tensor *flat = ts_clone(ts_view(ts_ones(TS_SHAPE(2, 3), (ts_opts){0}), loose));
    CHECK(ts_copy_(flat, ts_full(TS_SHAPE(6), 7, (ts_opts){0})) == flat);
    CHECK(read_all(flat, v, 64) == 6 && v[0] == 7 && v[5] == 7);
    /* copy_ within one storage with overlap */
    ts_tensor *ov = ts_arange(0, 6, 1, (ts_opts){.device = ts_sim(0)});
    CHECK(ts_copy_(ts_narrow(ov, 0, 1, 5), ts_narrow(ov, 0, 0, 5)) != NULL);
    CHECK(read_all(ov, v, 64) == 6 && v[0] == 0 && v[1] == 0 && v[2] == 1 && v[5] == 4);
    CHECK_OK();
    ts_scope_end();
}

/* ------------------------------------------------------------------ sim re-configuration */
static void test_sim_configure(void) {
    ts_tensor *live = ts_zeros(TS_SHAPE(4), (ts_opts){.device = ts_sim(2)});
    CHECK(live != NULL);
    CHECK_EQ(ts_sim_configure(2, 0), TS_ERR_STATE);
    CHECK(strstr(ts_error_message(), "sim:2") != NULL);
    ts_error_clear();
    CHECK_EQ(ts_device_count(TS_SIM), 4);
    ts_tensor *view = ts_view(live, TS_SHAPE(2, 2));
    ts_release(live);
    CHECK_EQ(ts_sim_configure(2, 0), TS_ERR_STATE); /* a view keeps the storage alive */
    ts_error_clear();
    ts_release(view);
    CHECK_EQ(ts_sim_configure(2, 0), TS_OK);
    CHECK_EQ(ts_device_count(TS_SIM), 2);
    CHECK(!ts_device_is_available(ts_sim(2)));
    CHECK(ts_zeros(TS_SHAPE(1), (ts_opts){.device = ts_sim(2)}) == NULL);
    CHECK(ts_error() == TS_ERR_DEVICE && strstr(ts_error_message(), "(2 sim devices)"));
    ts_error_clear();
    CHECK_EQ(ts_sim_configure(-1, 0), TS_ERR_ARG);
    ts_error_clear();
    CHECK_EQ(ts_sim_configure(0, 0), TS_OK);
    CHECK(ts_zeros(TS_SHAPE(1), (ts_opts){.device = ts_sim(0)}) == NULL);
    CHECK(ts_error() == TS_ERR_DEVICE && strstr(ts_error_message(), "sim:0"));
    ts_error_clear();
    CHECK_EQ(ts_sim_configure(4, 0), TS_OK);
    ts_mem_stats st;
    CHECK(ts_memory_stats(ts_sim(3), &st) == TS_OK && st.allocated == 0 && st.live_tensors == 0);
    ts_scope_begin();
    ts_tensor *again = ts_ones(TS_SHAPE(2), (ts_opts){.device = ts_sim(3)});
    CHECK(again && ts_item(ts_select(again, 0, 1)) == 1);
    ts_scope_end();
    CHECK_EQ(ts_memory_stats(ts_sim(3), &st), TS_OK);
    CHECK_EQ(st.live_tensors, 0);
    CHECK_OK();
}

/* ------------------------------------------------------------------ placement log */
/* Runs fn with stderr going to a temp file; returns what was written (static buffer). */
static const char *capture_stderr(void (*fn)(void)) {
    static char buf[8192];
    fflush(stderr);
    int saved = dup(fileno(stderr));
    FILE *tmp = tmpfile();
    if (saved < 0 || !tmp) return "";
    dup2(fileno(tmp), fileno(stderr));
    fn();
    fflush(stderr);
    dup2(saved, fileno(stderr));
    close(saved);
    rewind(tmp);
    size_t n = fread(buf, 1, sizeof buf - 1, tmp);
    buf[n] = '\0';
    fclose(tmp);
    return buf;
}

static void placed_ops(void) {
    ts_scope_begin();
    ts_tensor *a = ts_zeros(TS_SHAPE(2), (ts_opts){.device = ts_sim(1)});
    ts_to(a, ts_cpu());
    ts_scope_end();
}
static void first_call(void) { ts_release(ts_ones(TS_SHAPE(1), (ts_opts){.device = ts_sim(0)})); }

int main(void) {
    /* TS_LOG_PLACEMENT=1 is read at start-up: the very first call logs */
    setenv("TS_LOG_PLACEMENT", "1", 1);
    setenv("TS_SIM_DEVICES", "4", 1); /* the checks below count on sim:0..3 */
    const char *log = capture_stderr(first_call);
    CHECK(strstr(log, "ones") && strstr(log, "sim:0"));
    ts_log_placement(false);
    log = capture_stderr(placed_ops);
    CHECK_STREQ(log, "");
    ts_log_placement(true);
    log = capture_stderr(placed_ops);
    CHECK(strstr(log, "zeros on sim:1\n") != NULL);
    CHECK(strstr(log, "to on cpu\n") != NULL);
    int lines = 0;
    for (const char *p = log; *p; p++) lines += *p == '\n';
    CHECK_EQ(lines, 2);
    ts_log_placement(false);

    ts_mem_stats before[5], after[5];
    const ts_device devs[5] = {ts_cpu(), ts_sim(0), ts_sim(1), ts_sim(2), ts_sim(3)};
    for (int i = 0; i < 5; i++) ts_memory_stats(devs[i], &before[i]);
    test_parse();
    test_availability();
    test_default_stack();
    test_transfers();
    for (int i = 0; i < 5; i++) {
        ts_memory_stats(devs[i], &after[i]);
        CHECK_EQ(after[i].live_tensors, before[i].live_tensors);
        CHECK_EQ(after[i].allocated, before[i].allocated);
    }
    test_sim_configure();
    CHECK_EQ(ts_scope_depth(), 0);
    return ts_test_finish();
}
