/* test_cuda_runtime.c — the CUDA runtime: devices and properties, the current device, streams and
 * events, stream slots across threads, transfers and peer copies, the out-of-memory message,
 * empty_cache, 64-bit sized elementwise launches and the Philox stream against the cpu. Without a
 * GPU it checks what needs none (the start-up probe's classification of faked failures and
 * TS_REQUIRE_CUDA, every CUDA call failing with a message that says why), then skips:
 * "SKIP: test_cuda_runtime: ...: CUDA is not available (<reason>)", a failure under
 * TS_REQUIRE_CUDA=1. `--no-device` hides the GPUs (CUDA_VISIBLE_DEVICES=) so that a machine with
 * one checks the no-device answers too;
 * `--multi-gpu` (peer copies, the current device per thread) and `--large` (2^31-element tensors)
 * run what needs 2 GPUs or 16 GiB, or skip saying why. The caching allocator and pinned memory:
 * test_cuda_alloc.c. */
#define _POSIX_C_SOURCE 200809L /* setenv, nanosleep */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "backend/cuda/cuda_bridge.h"
#include "cuda_check.h"
#include "ts_test.h"

/* ================================================================== no GPU needed */
/* ------------------------------------------------------------------ start-up classification
 * The probe runs once per process, so each case is a child process (this program, with
 * --probe-child) whose probe is told to fail (TS_CUDA_TEST_PROBE_ERROR=<cudaError_t>). */
static int probe_child(void) {
    ts_cuda_set_device(0); /* fails: prints why */
    printf("reason: %s\n", ts_error_message());
    ts_error_clear();
    printf("start failed: %d\n", (int)tsc_start_failed());
    return ts_test_skip_no_cuda("probe child");
}

/* Runs the child with the environment given; its exit code, its output (stdout and stderr) in
 * out. */
static int run_probe_child(const char *argv0, const char *probe_error, bool require, char *out,
                           size_t len) {
    int fds[2];
    if (pipe(fds) != 0) return -1;
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fds[1], 1);
        dup2(fds[1], 2);
        close(fds[0]);
        setenv("TS_CUDA_TEST_PROBE_ERROR", probe_error, 1);
        if (require)
            setenv("TS_REQUIRE_CUDA", "1", 1);
        else
            unsetenv("TS_REQUIRE_CUDA");
        execl("/proc/self/exe", argv0, "--probe-child", (char *)NULL);
        _exit(126);
    }
    close(fds[1]);
    size_t n = 0;
    ssize_t r;
    while (pid > 0 && (r = read(fds[0], out + n, len - 1 - n)) > 0) n += (size_t)r;
    out[n] = '\0';
    close(fds[0]);
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid) return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void test_probe_classification(const char *argv0) {
    (void)ts_cuda_is_available(); /* starts the library */
    if (strstr(tsc_unavailable_reason(), "built without CUDA")) {
        printf("start-up probe: built without CUDA, nothing to classify\n");
        return;
    }
    static const struct {
        const char *code;
        bool failed; /* "CUDA failed to start" rather than "no CUDA device" */
        const char *parts[3];
    } cases[] = {
        {"35", true, {"CUDA failed to start: ", "[cudaErrorInsufficientDriver]", "insufficient"}},
        {"999", true, {"CUDA failed to start: ", "[cudaErrorUnknown]", NULL}},
        {"46", true, {"CUDA failed to start: ", "[cudaErrorDevicesUnavailable]", NULL}},
        {"100", false, {"no CUDA device: ", "no CUDA-capable device", NULL}},
        {"0", false, {"no CUDA device: the runtime reports none", NULL, NULL}},
    };
    char out[8192];
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        for (int req = 0; req < 2; req++) {
            const int rc = run_probe_child(argv0, cases[i].code, req, out, sizeof out);
            bool ok = rc == (req ? 1 : 77) && strstr(out, "cuda_set_device: CUDA is not available");
            for (int k = 0; ok && k < 3 && cases[i].parts[k]; k++)
                ok = strstr(out, cases[i].parts[k]) != NULL;
            /* a failed start warns on stderr and says so; no device stays quiet */
            ok = ok && (strstr(out, "start failed: 1") != NULL) == cases[i].failed &&
                 (strstr(out, "tessera: warning: CUDA failed to start") != NULL) == cases[i].failed;
            /* skipped by default; TS_REQUIRE_CUDA=1 makes it a failure that names the reason */
            ok = ok && (req ? strstr(out, "FAIL: TS_REQUIRE_CUDA=1, but CUDA is not available (") &&
                                  !strstr(out, "SKIP")
                            : strstr(out, "SKIP: probe child: CUDA is not available (") != NULL);
            if (!ok)
                printf("  probe error %s%s: exit %d, output:\n%s\n", cases[i].code,
                       req ? " with TS_REQUIRE_CUDA=1" : "", rc, out);
            CHECK(ok);
        }
    printf("start-up probe: %zu faked failures classified, TS_REQUIRE_CUDA=1 fails each\n",
           sizeof cases / sizeof *cases);
}

/* ------------------------------------------------------------------ no CUDA device */
static void test_no_cuda(void) {
    printf("no CUDA: %s%s\n", tsc_unavailable_reason(),
           tsc_start_failed() ? " (a failed start, not a machine without a GPU)" : "");
    CHECK_EQ(ts_cuda_device_count(), 0);
    CHECK_EQ(ts_device_count(TS_CUDA), 0);
    CHECK(!ts_cuda_is_available() && !ts_device_is_available(ts_cuda(0)));
    const char *why = "CUDA is not available (";
    CHECK_EQ(ts_cuda_set_device(0), TS_ERR_DEVICE);
    CHECK(ERR_IS(TS_ERR_DEVICE, "cuda_set_device: ", why));
    ts_cuda_props props;
    CHECK_EQ(ts_cuda_get_properties(0, &props), TS_ERR_DEVICE);
    CHECK(ERR_IS(TS_ERR_DEVICE, "cuda_get_properties: ", why));
    CHECK_EQ(ts_cuda_synchronize(-1), TS_ERR_DEVICE);
    CHECK(ERR_IS(TS_ERR_DEVICE, "cuda_synchronize: ", why));
    CHECK_EQ(ts_cuda_current_device(), -1);
    CHECK(ERR_IS(TS_ERR_DEVICE, "cuda_current_device: ", why));
    CHECK(ts_cuda_stream_new(0) == NULL);
    CHECK(ERR_IS(TS_ERR_DEVICE, "cuda_stream_new: ", why));
    CHECK(ts_cuda_default_stream(0) == NULL);
    CHECK(ERR_IS(TS_ERR_DEVICE, "cuda_default_stream: ", why));
    CHECK(ts_cuda_current_stream(-1) == NULL);
    CHECK(ERR_IS(TS_ERR_DEVICE, "cuda_current_stream: ", why));
    CHECK_EQ(ts_cuda_set_stream(NULL), TS_ERR_DEVICE);
    CHECK(ERR_IS(TS_ERR_DEVICE, "cuda_set_stream: ", why));
    CHECK_EQ(ts_cuda_stream_synchronize(NULL), TS_ERR_DEVICE);
    CHECK(ERR_IS(TS_ERR_DEVICE, "cuda_stream_synchronize: ", why));
    CHECK(ts_cuda_event_new(true) == NULL);
    CHECK(ERR_IS(TS_ERR_DEVICE, "cuda_event_new: ", why));
    /* what needs no device stays quiet */
    CHECK(ts_cuda_stream_free(NULL) == TS_OK && ts_cuda_stream_device(NULL) == -1);
    ts_cuda_event_free(NULL);
    CHECK_OK();

    /* tensors: the op and the device are named, with the reason */
    ts_scope_begin();
    CHECK(ts_zeros(TS_SHAPE(2), (ts_opts){.device = ts_cuda(0)}) == NULL);
    CHECK(ERR_IS(TS_ERR_DEVICE, "zeros: ", "cuda:0", "not available", why));
    CHECK(ts_randn(TS_SHAPE(2), (ts_opts){.device = ts_cuda(-1)}) == NULL);
    CHECK(ERR_IS(TS_ERR_DEVICE, "randn: ", "cuda:0", why));
    ts_tensor *c = ts_ones(TS_SHAPE(3), (ts_opts){0});
    CHECK(ts_to(c, ts_cuda(1)) == NULL);
    CHECK(ERR_IS(TS_ERR_DEVICE, "to: ", "cuda:1", why));
    CHECK(ts_to_async(c, ts_cuda(0)) == NULL);
    CHECK(ERR_IS(TS_ERR_DEVICE, "to: ", "cuda:0", why));
    ts_mem_stats st;
    CHECK_EQ(ts_memory_stats(ts_cuda(0), &st), TS_ERR_DEVICE);
    CHECK(ERR_IS(TS_ERR_DEVICE, "memory_stats: ", why));
    CHECK_EQ(ts_empty_cache(ts_cuda(0)), TS_ERR_DEVICE);
    CHECK(ERR_IS(TS_ERR_DEVICE, "empty_cache: ", why));

    /* pinned memory without CUDA: a flag on ordinary memory; ts_to_async is ts_to */
    ts_tensor *pin = ts_pin_memory(ts_arange(0, 5, 1, (ts_opts){0}));
    CHECK(pin && ts_is_pinned(pin) && ts_item(ts_select(pin, 0, 4)) == 4);
    ts_tensor *o = ts_ones(TS_SHAPE(4), (ts_opts){.pin_memory = true});
    CHECK(o && ts_is_pinned(o));
    CHECK(ts_cuda_pinned_memory_stats(&st) == TS_OK && st.reserved == 0 && st.allocated == 0);
    if (ts_device_count(TS_SIM) > 0) {
        ts_tensor *s = ts_to_async(pin, ts_sim(0));
        CHECK(s && ts_device_equal(ts_device_of(s), ts_sim(0)));
        CHECK(s && ts_item(ts_select(s, 0, 3)) == 3);
    }
    ts_scope_end();
    CHECK_OK();
}

/* ================================================================== with a GPU */
static void test_devices_and_properties(void) {
    int n = ts_cuda_device_count();
    CHECK(n >= 1 && n == ts_device_count(TS_CUDA) && ts_cuda_is_available());
    for (int d = 0; d < n; d++) {
        ts_cuda_props p;
        CHECK_EQ(ts_cuda_get_properties(d, &p), TS_OK);
        size_t free_b = 0, total_b = 0;
        CHECK_EQ(ts_device_memory(ts_cuda(d), &free_b, &total_b), TS_OK);
        printf("cuda:%d: %s, compute capability %d.%d, %d SMs, %.1f GiB (%.1f GiB free)\n", d,
               p.name, p.major, p.minor, p.multiprocessor_count,
               (double)p.total_memory / (double)(MIB * KIB), (double)free_b / (double)(MIB * KIB));
        CHECK(p.name[0] != '\0' && p.total_memory > 0 && p.multiprocessor_count > 0);
        CHECK(p.major >= 5 && p.warp_size == 32 && p.max_threads_per_block >= 256);
        CHECK(total_b > 0 && free_b <= total_b && total_b <= p.total_memory + 64 * MIB);
    }
    ts_cuda_props p;
    CHECK_EQ(ts_cuda_get_properties(n, &p), TS_ERR_DEVICE);
    CHECK(ERR_IS(TS_ERR_DEVICE, "cuda_get_properties: invalid device cuda:"));
    CHECK_EQ(ts_cuda_set_device(n), TS_ERR_DEVICE);
    CHECK(ERR_IS(TS_ERR_DEVICE, "cuda_set_device: invalid device cuda:"));
    CHECK_EQ(ts_cuda_set_device(-1), TS_ERR_DEVICE);
    CHECK(ERR_IS(TS_ERR_DEVICE, "cuda_set_device: invalid device index -1"));

    /* the current device: what "cuda" and ts_cuda(-1) mean, per thread */
    CHECK_EQ(ts_cuda_current_device(), 0);
    CHECK_EQ(ts_cuda_set_device(n - 1), TS_OK);
    CHECK_EQ(ts_cuda_current_device(), n - 1);
    ts_device parsed;
    CHECK(ts_device_parse("cuda", &parsed) == TS_OK && ts_device_equal(parsed, ts_cuda(n - 1)));
    ts_scope_begin();
    ts_tensor *t = ts_ones(TS_SHAPE(2), (ts_opts){.device = ts_cuda(-1)});
    CHECK(t && ts_device_equal(ts_device_of(t), ts_cuda(n - 1)));
    ts_scope_end();
    CHECK_EQ(ts_cuda_set_device(0), TS_OK);
    CHECK_EQ(ts_cuda_synchronize(-1), TS_OK);
    CHECK_OK();
}

static void *other_thread_device(void *arg) {
    *(int *)arg = ts_cuda_current_device();
    return NULL;
}

/* multi-GPU mode only (main checks there are 2) */
static void test_device_per_thread(void) {
    ts_cuda_set_device(1);
    int seen = -1;
    pthread_t th;
    pthread_create(&th, NULL, other_thread_device, &seen);
    pthread_join(th, NULL);
    CHECK_EQ(seen, 0); /* each thread starts on device 0 */
    ts_cuda_set_device(0);
}

static void test_streams_and_events(void) {
    enum { N = 1 << 20 };
    ts_cuda_stream *def = ts_cuda_default_stream(0);
    CHECK(def && ts_cuda_current_stream(0) == def && ts_cuda_current_stream(-1) == def);
    CHECK(ts_cuda_stream_device(def) == 0 && ts_cuda_stream_handle(def) != NULL);
    ts_cuda_stream *s1 = ts_cuda_stream_new(0), *s2 = ts_cuda_stream_new(-1);
    CHECK(s1 && s2 && s1 != s2 && s1 != def && ts_cuda_stream_device(s1) == 0);
    if (!s1 || !s2) return;

    float *want = malloc(N * sizeof *want);
    for (int i = 0; i < N; i++) want[i] = (float)i * 2.0f + 1.0f;
    ts_cuda_event *done = ts_cuda_event_new(false);
    ts_cuda_event *t0 = ts_cuda_event_new(true), *t1 = ts_cuda_event_new(true);
    CHECK(done && t0 && t1);
    CHECK(ts_cuda_event_query(done)); /* never recorded: nothing to wait for */

    ts_scope_begin();
    /* produce on s1, consume on s2 after waiting for s1's event */
    CHECK_EQ(ts_cuda_set_stream(s1), TS_OK);
    CHECK(ts_cuda_current_stream(0) == s1);
    CHECK_EQ(ts_cuda_event_record(t0, NULL), TS_OK);
    ts_tensor *x = ts_arange(0, N, 1, (ts_opts){.dtype = TS_F32, .device = ts_cuda(0)});
    ts_tensor *y = ts_add_scalar(ts_mul_scalar(x, 2.0), 1.0);
    CHECK_EQ(ts_cuda_event_record(done, s1), TS_OK);
    CHECK_EQ(ts_cuda_event_record(t1, s1), TS_OK);
    CHECK_EQ(ts_cuda_set_stream(s2), TS_OK);
    CHECK_EQ(ts_cuda_stream_wait_event(s2, done), TS_OK);
    ts_tensor *z = ts_sub_scalar(y, 1.0); /* on s2, ordered after y by the event */
    CHECK_EQ(ts_cuda_stream_synchronize(s2), TS_OK);
    CHECK(ts_cuda_stream_query(s2) && ts_cuda_event_query(done));
    CHECK(floats_equal(y, want, N));
    for (int i = 0; i < N; i++) want[i] -= 1.0f;
    CHECK(floats_equal(z, want, N));
    float ms = -1;
    CHECK_EQ(ts_cuda_event_elapsed_ms(t0, t1, &ms), TS_OK);
    CHECK(ms >= 0 && ms < 60e3);
    CHECK_EQ(ts_cuda_event_synchronize(t1), TS_OK);
    ts_scope_end();

    /* misuse is an error, not a crash */
    CHECK_EQ(ts_cuda_event_elapsed_ms(done, t1, &ms), TS_ERR_ARG);
    CHECK(ERR_IS(TS_ERR_ARG, "cuda_event_elapsed_ms: ", "enable_timing"));
    ts_cuda_event *fresh = ts_cuda_event_new(true);
    CHECK_EQ(ts_cuda_event_elapsed_ms(fresh, t1, &ms), TS_ERR_STATE);
    CHECK(ERR_IS(TS_ERR_STATE, "cuda_event_elapsed_ms: ", "recorded"));
    CHECK_EQ(ts_cuda_event_record(NULL, s1), TS_ERR_ARG);
    CHECK(ERR_IS(TS_ERR_ARG, "cuda_event_record: event is NULL"));

    /* a freed stream that was current: its thread is back on the default stream; streams are
     * pooled */
    CHECK(ts_cuda_current_stream(0) == s2);
    CHECK_EQ(ts_cuda_stream_free(s2), TS_OK);
    CHECK(ts_cuda_current_stream(0) == def);
    ts_cuda_stream *again = ts_cuda_stream_new(0);
    CHECK(again == s2);
    CHECK_EQ(ts_cuda_set_stream(s1), TS_OK);
    CHECK_EQ(ts_cuda_set_stream(NULL), TS_OK); /* back to the default stream */
    CHECK(ts_cuda_current_stream(0) == def);
    ts_cuda_stream_free(again);
    CHECK_EQ(ts_cuda_stream_free(again), TS_ERR_STATE);
    CHECK(ERR_IS(TS_ERR_STATE, "cuda_stream_free: ", "already freed"));
    CHECK_EQ(ts_cuda_set_stream(again), TS_ERR_STATE);
    CHECK(ERR_IS(TS_ERR_STATE, "cuda_set_stream: ", "freed"));
    ts_cuda_stream_free(s1);
    CHECK_EQ(ts_cuda_stream_free(def), TS_OK); /* ignored */
    ts_cuda_event_free(done);
    ts_cuda_event_free(t0);
    ts_cuda_event_free(t1);
    ts_cuda_event_free(fresh);
    free(want);
    CHECK_OK();
}

/* ts_cuda_stream_free resets every thread's slot that holds the stream; set_stream(NULL) every
 * device's slot of the calling thread. */
static ts_cuda_stream *slot_stream;
static atomic_int slot_step;
static void *slot_thread(void *arg) {
    ts_cuda_set_stream(slot_stream);
    bool *ok = arg;
    ok[0] = ts_cuda_current_stream(0) == slot_stream;
    atomic_store(&slot_step, 1);
    while (atomic_load(&slot_step) != 2) nanosleep(&(struct timespec){0, 1000000}, NULL);
    ok[1] = ts_cuda_current_stream(0) == ts_cuda_default_stream(0); /* freed by main */
    return NULL;
}

static void test_stream_slots(void) {
    slot_stream = ts_cuda_stream_new(0);
    atomic_store(&slot_step, 0);
    bool ok[2] = {false, false};
    pthread_t th;
    pthread_create(&th, NULL, slot_thread, ok);
    while (atomic_load(&slot_step) != 1) nanosleep(&(struct timespec){0, 1000000}, NULL);
    ts_cuda_stream_free(slot_stream);
    atomic_store(&slot_step, 2);
    pthread_join(th, NULL);
    CHECK(ok[0] && ok[1]);
    /* a freed stream is handed out again */
    ts_cuda_stream *again = ts_cuda_stream_new(0);
    CHECK(again == slot_stream && ts_cuda_current_stream(0) == ts_cuda_default_stream(0));
    ts_cuda_stream_free(again);

    const int n = ts_cuda_device_count();
    ts_cuda_stream *s[2] = {ts_cuda_stream_new(0), n >= 2 ? ts_cuda_stream_new(1) : NULL};
    ts_cuda_set_stream(s[0]);
    if (s[1]) ts_cuda_set_stream(s[1]); /* while the current device is cuda:0 */
    CHECK_EQ(ts_cuda_current_device(), 0);
    CHECK_EQ(ts_cuda_set_stream(NULL), TS_OK);
    for (int d = 0; d < (n >= 2 ? 2 : 1); d++)
        CHECK(ts_cuda_current_stream(d) == ts_cuda_default_stream(d));
    if (n < 2)
        printf("stream slots: one CUDA device here, set_stream(NULL) on cuda:1 not tested\n");
    for (int d = 0; d < 2; d++) ts_cuda_stream_free(s[d]);
    CHECK_OK();
}

/* cpu -> cuda -> (cuda:1 -> cuda:0 when peer) -> cpu round trips of odd sizes */
static void transfers(bool peer) {
    const int64_t sizes[] = {0, 1, 3, 1000, (1 << 20) + 3};
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        int64_t n = sizes[k];
        ts_scope_begin();
        float *want = malloc((size_t)(n ? n : 1) * sizeof *want);
        for (int64_t i = 0; i < n; i++) want[i] = (float)(i % 1000) - 0.5f;
        ts_tensor *c = ts_from_data(TS_SHAPE(n), TS_F32, want, (ts_opts){0});
        ts_tensor *g = ts_to(c, ts_cuda(0));
        CHECK(g && floats_equal(g, want, n));
        if (peer) {
            ts_tensor *g1 = ts_to(g, ts_cuda(1));
            CHECK(g1 && ts_device_equal(ts_device_of(g1), ts_cuda(1)));
            ts_tensor *twice = ts_mul_scalar(g1, 2.0); /* work on cuda:1 sees the copied data */
            ts_tensor *back = ts_to(twice, ts_cuda(0));
            for (int64_t i = 0; i < n; i++) want[i] *= 2.0f;
            CHECK(back && floats_equal(back, want, n));
        }
        free(want);
        ts_scope_end();
    }
    CHECK_OK();
}

static void test_transfers(void) { transfers(false); }

/* multi-GPU mode: peer copies, and an event of cuda:0 refused on cuda:1's stream */
static void test_peer(void) {
    transfers(true);
    ts_cuda_event *done = ts_cuda_event_new(false);
    CHECK_EQ(ts_cuda_event_record(done, ts_cuda_default_stream(1)), TS_ERR_ARG);
    CHECK(ERR_IS(TS_ERR_ARG, "cuda_event_record: ", "cuda:0", "cuda:1"));
    ts_cuda_event_free(done);
}

static void test_oom_and_empty_cache(void) {
    ts_cuda_props p;
    ts_cuda_get_properties(0, &p);
    ts_mem_stats st0, st;
    ts_memory_stats(ts_cuda(0), &st0);
    ts_scope_begin();
    /* twice the device's memory cannot be had: the message has every figure */
    int64_t n = (int64_t)(p.total_memory / 2);
    CHECK(ts_empty(TS_SHAPE(n), (ts_opts){.device = ts_cuda(0)}) == NULL);
    CHECK(ERR_IS(TS_ERR_OOM, "empty: out of memory on cuda:0: tried to allocate ",
                 "total capacity of ", " is free", " is allocated by tensors",
                 " reserved by the caching allocator but unallocated",
                 "largest free cached block"));
    ts_memory_stats(ts_cuda(0), &st);
    CHECK(st.oom_count == st0.oom_count + 1);
    ts_scope_end();

    /* cached blocks go back to the driver */
    ts_scope_begin();
    ts_tensor *big = ts_zeros(TS_SHAPE(64 * MIB / 4), (ts_opts){.device = ts_cuda(0)});
    CHECK(big != NULL);
    ts_scope_end();
    ts_memory_stats(ts_cuda(0), &st);
    CHECK(st.allocated == st0.allocated && st.reserved >= 64 * MIB);
    size_t free_before = 0, free_after = 0;
    ts_device_memory(ts_cuda(0), &free_before, NULL);
    CHECK_EQ(ts_empty_cache(ts_cuda(0)), TS_OK);
    ts_memory_stats(ts_cuda(0), &st);
    ts_device_memory(ts_cuda(0), &free_after, NULL);
    CHECK(st.allocated == 0 ? st.reserved == 0 : st.reserved < 64 * MIB);
    CHECK(free_after >= free_before + 60 * MIB);
    CHECK_OK();
}

/* The same seed gives the cpu's numbers. */
static void test_random_matches_cpu(void) {
    enum { N = 4099 };
    const ts_dtype dts[] = {TS_F32, TS_F64, TS_F16, TS_BF16};
    for (size_t k = 0; k < sizeof dts / sizeof *dts; k++) {
        ts_scope_begin();
        ts_opts oc = {.dtype = dts[k]}, og = {.dtype = dts[k], .device = ts_cuda(0)};
        ts_manual_seed(1234);
        ts_tensor *uc = ts_to_dtype(ts_rand(TS_SHAPE(N), oc), TS_F64);
        ts_tensor *nc = ts_to_dtype(ts_randn(TS_SHAPE(N), oc), TS_F64);
        ts_manual_seed(1234);
        ts_tensor *ug = ts_to(ts_to_dtype(ts_rand(TS_SHAPE(N), og), TS_F64), ts_cpu());
        ts_tensor *ng = ts_to(ts_to_dtype(ts_randn(TS_SHAPE(N), og), TS_F64), ts_cpu());
        double *a = malloc(N * sizeof *a), *b = malloc(N * sizeof *b);
        int exact = 0, close = 0;
        if (ts_copy_to_host(uc, a, N * 8) == TS_OK && ts_copy_to_host(ug, b, N * 8) == TS_OK)
            for (int i = 0; i < N; i++) exact += a[i] == b[i];
        if (ts_copy_to_host(nc, a, N * 8) == TS_OK && ts_copy_to_host(ng, b, N * 8) == TS_OK)
            for (int i = 0; i < N; i++) close += fabs(a[i] - b[i]) <= 1e-6 * (1 + fabs(a[i]));
        printf("random %s: uniform %d/%d identical, normal %d/%d within 1e-6\n",
               ts_dtype_name(dts[k]), exact, N, close, N);
        CHECK(exact == N && close == N);
        free(a);
        free(b);
        ts_scope_end();
    }
    ts_scope_begin();
    ts_manual_seed(99);
    ts_tensor *ic = ts_randint(-5, 1000000, TS_SHAPE(N), (ts_opts){0});
    ts_manual_seed(99);
    ts_tensor *ig =
        ts_to(ts_randint(-5, 1000000, TS_SHAPE(N), (ts_opts){.device = ts_cuda(0)}), ts_cpu());
    int64_t *a = malloc(N * 8), *b = malloc(N * 8);
    bool same = ts_copy_to_host(ic, a, N * 8) == TS_OK && ts_copy_to_host(ig, b, N * 8) == TS_OK &&
                memcmp(a, b, N * 8) == 0;
    CHECK(same);
    free(a);
    free(b);
    ts_scope_end();
    CHECK_OK();
}

/* Past 2^31 elements: chunked linear launches and the 64-bit strided kernel (--large mode; main
 * checks the memory is there). */
#define LARGE_HALF (((int64_t)1 << 30) + 32) /* two rows: 2^31 + 64 bytes of u8 */
static void test_large_tensors(void) {
    const int64_t half = LARGE_HALF;
    ts_scope_begin();
    ts_opts o = {.dtype = TS_U8, .device = ts_cuda(0)};
    ts_tensor *x = ts_randint(0, 256, TS_SHAPE(2, half), o);
    ts_tensor *y = ts_add_scalar(x, 1.0);                 /* linear, in two launches */
    ts_tensor *xt = ts_contiguous(ts_transpose(x, 0, 1)); /* [half, 2]: 64-bit offsets */
    const int64_t probes[] = {0, 1, 12345, half / 2, half - 2, half - 1};
    for (size_t k = 0; k < sizeof probes / sizeof *probes; k++) {
        int64_t j = probes[k];
        for (int r = 0; r < 2; r++) {
            double v = ts_item(ts_select(ts_select(x, 0, r), 0, j));
            double w = ts_item(ts_select(ts_select(y, 0, r), 0, j));
            double t = ts_item(ts_select(ts_select(xt, 0, j), 0, r));
            CHECK(t == v && w == fmod(v + 1, 256));
        }
    }
    ts_scope_end();
    CHECK_OK();
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "--probe-child") == 0) return probe_child();
    const char *mode = argc > 1 ? argv[1] : "";
    bool no_device = !strcmp(mode, "--no-device");
    if (no_device) setenv("CUDA_VISIBLE_DEVICES", "", 1); /* before the runtime starts */
    /* The parts that need more than one GPU, or 16 GiB free, are ctest entries of their own
     * (test_cuda_runtime_multigpu, _large) that skip with the reason, never pass silently. */
    if (!strcmp(mode, "--multi-gpu") || !strcmp(mode, "--large")) {
        if (!ts_cuda_is_available()) return ts_test_skip_no_cuda("test_cuda_runtime");
        if (mode[2] == 'm') {
            int n = ts_cuda_device_count();
            if (n < 2)
                return ts_test_skip("%d CUDA device: the peer and per-thread parts need 2", n);
            test_device_per_thread();
            test_peer();
        } else {
            size_t free_b = 0;
            ts_device_memory(ts_cuda(0), &free_b, NULL);
            if (free_b < 8 * (size_t)(2 * LARGE_HALF))
                return ts_test_skip("%.1f GiB free on cuda:0: the 2 GiB tensors need 16",
                                    (double)free_b / (double)(MIB * KIB));
            test_large_tensors();
        }
        return ts_test_finish();
    }
    test_probe_classification(argv[0]);
    if (!ts_cuda_is_available()) {
        test_no_cuda();
        if (no_device || ts_test_failed_count()) return ts_test_finish();
        printf("%d passed without a GPU\n", ts_test_passed_count());
        return ts_test_skip_no_cuda("test_cuda_runtime: the GPU tests are not run here");
    }
    if (no_device) return ts_test_skip("CUDA_VISIBLE_DEVICES= left the GPUs visible");
    test_devices_and_properties();
    test_streams_and_events();
    test_stream_slots();
    test_transfers();
    test_oom_and_empty_cache();
    test_random_matches_cpu();
    return ts_test_finish();
}
