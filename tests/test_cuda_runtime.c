/* test_cuda_runtime.c — the CUDA runtime: devices and properties, the current device, streams and
 * events, stream-ordered reuse in the caching allocator (and ts_record_stream), pinned memory and
 * asynchronous copies (reuse waits for the copy's event only), peer copies, the out-of-memory
 * message, empty_cache, 64-bit sized elementwise launches and the Philox stream against the cpu.
 * Without a GPU it checks what needs none (the allocator's stream ordering with fake streams and
 * its waits outside its lock, the start-up probe's classification of faked failures and
 * TS_REQUIRE_CUDA, every CUDA call failing with a message that says why), then skips:
 * "SKIP: test_cuda_runtime: ...: CUDA is not available (<reason>)", a failure under
 * TS_REQUIRE_CUDA=1. `--no-device` hides the GPUs (CUDA_VISIBLE_DEVICES=) so that a machine with
 * one checks the no-device answers too;
 * `--multi-gpu` (peer copies, the current device per thread) and `--large` (2^31-element tensors)
 * run what needs 2 GPUs or 16 GiB, or skip saying why. */
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

#include "backend/alloc.h"
#include "backend/cuda/cuda_bridge.h"
#include "ts_test.h"

#define KIB ((size_t)1024)
#define MIB (KIB * KIB)

/* The pending error has this code and its message every one of the NULL-terminated parts; the
 * error is cleared either way. */
static bool err_is(ts_status code, const char *const *parts) {
    bool ok = ts_error() == code;
    for (int i = 0; ok && parts[i]; i++) ok = strstr(ts_error_message(), parts[i]) != NULL;
    if (!ok)
        printf("  expected %s with the parts below, got %s: %s\n", ts_status_string(code),
               ts_status_string(ts_error()), ts_error_message());
    ts_error_clear();
    return ok;
}
#define ERR_IS(code, ...) err_is(code, (const char *const[]){__VA_ARGS__, NULL})

/* ================================================================== no GPU needed */
/* ------------------------------------------------------------------ fake streams
 * The allocator's stream ordering (alloc.c) with a host "device" whose streams are numbers: each
 * hook call is logged, and the test states which waits each reuse must cause. */
static _Thread_local uintptr_t fake_current; /* the calling thread's current fake stream */
static struct { uintptr_t from, to; } waits[64];
static int nwaits, ndevice_waits;

static uintptr_t fake_current_stream(int index) { return fake_current; }

/* While a wait hook runs, another thread must be able to use the allocator: a host wait (pinned
 * memory waiting for a copy) must not stall everyone behind the allocator's lock. */
static ts_allocator *probe_alloc;
static atomic_bool probe_done;
static bool probe_lock_free;
static pthread_t probe_thread;
static bool probe_started;

static void *probe_stats(void *arg) {
    ts_mem_stats st;
    ts_allocator_stats(probe_alloc, &st); /* takes the lock */
    atomic_store(&probe_done, true);
    return arg;
}

/* From inside a hook: a thread takes the allocator's lock; up to 10 s for it (forever, in effect,
 * when the hook runs under the lock: the thread is then joined after the allocation returns). */
static void probe_lock_from_hook(void) {
    atomic_store(&probe_done, false);
    probe_started = pthread_create(&probe_thread, NULL, probe_stats, NULL) == 0;
    for (int i = 0; probe_started && i < 10000 && !atomic_load(&probe_done); i++)
        nanosleep(&(struct timespec){0, 1000000}, NULL);
    probe_lock_free = atomic_load(&probe_done);
}

static void fake_stream_wait(int index, uintptr_t from, uintptr_t to) {
    if (nwaits < 64) waits[nwaits].from = from, waits[nwaits].to = to;
    nwaits++;
    if (probe_alloc && to == 0) probe_lock_from_hook();
}
static void fake_device_wait(int index) { ndevice_waits++; }
static const ts_alloc_hooks fake_hooks = {fake_current_stream, fake_stream_wait, fake_device_wait,
                                          true, NULL};

static size_t fake_limit = SIZE_MAX; /* raw allocations above this fail */
static void *fake_raw_alloc(const ts_backend *be, int index, size_t n) {
    return n > fake_limit ? NULL : malloc(n);
}
static void fake_raw_free(const ts_backend *be, int index, void *p, size_t n) { free(p); }
static void fake_memory_info(const ts_backend *be, int index, size_t *f, size_t *t) {
    *f = 123 * MIB;
    *t = 1024 * MIB;
}
static const ts_backend fake_be = {.name = "fake",
                                   .type = TS_SIM,
                                   .memory_info = fake_memory_info,
                                   .raw_alloc = fake_raw_alloc,
                                   .raw_free = fake_raw_free};

/* The waits logged since the last call are exactly `n` pairs {from, to} (in any order). */
static bool waits_exactly(int n, const uintptr_t (*expect)[2]) {
    bool ok = nwaits == n;
    for (int i = 0; ok && i < n; i++) {
        bool found = false;
        for (int j = 0; j < nwaits && !found; j++)
            found = waits[j].from == expect[i][0] && waits[j].to == expect[i][1];
        ok = found;
    }
    if (!ok) {
        printf("  waits logged:");
        for (int j = 0; j < nwaits && j < 64; j++)
            printf(" %zu->%zu", (size_t)waits[j].from, (size_t)waits[j].to);
        printf(" (expected %d)\n", n);
    }
    nwaits = 0;
    return ok;
}
#define NO_WAITS() waits_exactly(0, NULL)

static void test_allocator_streams(void) {
    ts_allocator *a = ts_allocator_new(&fake_be, 0);
    ts_allocator_set_hooks(a, &fake_hooks);
    nwaits = ndevice_waits = 0;
    /* 10 MiB: a segment of its own, never split, so its history is exactly its own */
    const size_t big = 10 * MIB;

    /* freed on stream 1, reused on stream 1: no wait */
    fake_current = 1;
    ts_block *b = ts_allocator_alloc(a, big, NULL, 0);
    void *p = ts_block_ptr(b);
    ts_allocator_release(a, b);
    b = ts_allocator_alloc(a, big, NULL, 0);
    CHECK(ts_block_ptr(b) == p && NO_WAITS());
    ts_allocator_release(a, b);

    /* reused on stream 2: stream 2 first waits for stream 1's work */
    fake_current = 2;
    b = ts_allocator_alloc(a, big, NULL, 0);
    CHECK(ts_block_ptr(b) == p && waits_exactly(1, (const uintptr_t[][2]){{1, 2}}));

    /* released while stream 3 is current: streams 2 (its owner) and 3 are waited for */
    fake_current = 3;
    ts_allocator_release(a, b);
    fake_current = 4;
    b = ts_allocator_alloc(a, big, NULL, 0);
    CHECK(ts_block_ptr(b) == p && waits_exactly(2, (const uintptr_t[][2]){{2, 4}, {3, 4}}));

    /* a stream recorded on a live block (an asynchronous copy, say) is waited for too */
    ts_allocator_record_stream(a, b, 5);
    ts_allocator_release(a, b);
    b = ts_allocator_alloc(a, big, NULL, 0);
    CHECK(ts_block_ptr(b) == p && waits_exactly(1, (const uintptr_t[][2]){{5, 4}}));

    /* the host (id 0) never needs waiting for */
    ts_allocator_record_stream(a, b, 0);
    ts_allocator_release(a, b);
    b = ts_allocator_alloc(a, big, NULL, 0);
    CHECK(NO_WAITS());

    /* a block used by more streams than it remembers: the next user waits for the device */
    for (uintptr_t s = 10; s < 16; s++) ts_allocator_record_stream(a, b, s);
    ts_allocator_release(a, b);
    b = ts_allocator_alloc(a, big, NULL, 0);
    CHECK(NO_WAITS() && ndevice_waits == 1);
    ts_allocator_release(a, b);
    ndevice_waits = 0;

    /* neighbours in one (small-pool) segment merge, keeping both histories */
    fake_current = 1;
    ts_block *x = ts_allocator_alloc(a, 512, NULL, 0);
    fake_current = 2;
    ts_block *y = ts_allocator_alloc(a, 512, NULL, 0);
    CHECK((char *)ts_block_ptr(y) == (char *)ts_block_ptr(x) + 512 && NO_WAITS());
    void *px = ts_block_ptr(x);
    fake_current = 1;
    ts_allocator_release(a, x);
    fake_current = 2;
    ts_allocator_release(a, y);
    fake_current = 3;
    ts_block *z = ts_allocator_alloc(a, 1024, NULL, 0);
    CHECK(ts_block_ptr(z) == px && waits_exactly(2, (const uintptr_t[][2]){{1, 3}, {2, 3}}));
    ts_allocator_release(a, z);

    /* empty_cache waits for the device once before handing segments back */
    ts_allocator_empty_cache(a);
    ts_mem_stats st;
    ts_allocator_stats(a, &st);
    CHECK(ndevice_waits == 1 && st.reserved == 0 && st.allocated == 0);

    /* the out-of-memory message of a device that reports its free memory */
    fake_limit = 32 * MIB;
    char msg[200] = "";
    CHECK(ts_allocator_alloc(a, 64 * MIB, msg, sizeof msg) == NULL);
    CHECK_STREQ(msg, "tried to allocate 64.00 MiB; 0 B allocated, 0 B reserved, 123.00 MiB free, "
                     "1.00 GiB total");
    fake_limit = SIZE_MAX;
    ts_allocator_destroy(a);
    fake_current = 0;
}

/* The pinned allocator's case: the host (stream 0) reuses a block whose use (a copy's event) was
 * recorded on it; the wait for that event runs with the allocator's lock released. */
static void test_allocator_waits_unlocked(void) {
    ts_allocator *a = ts_allocator_new(&fake_be, 0);
    ts_allocator_set_hooks(a, &fake_hooks);
    nwaits = ndevice_waits = 0;
    fake_current = 0; /* the host */
    ts_block *b = ts_allocator_alloc(a, 4 * MIB, NULL, 0);
    void *p = ts_block_ptr(b);
    ts_allocator_record_stream(a, b, 77); /* a copy's event */
    ts_allocator_release(a, b);
    probe_alloc = a;
    b = ts_allocator_alloc(a, 4 * MIB, NULL, 0);
    probe_alloc = NULL;
    if (probe_started) pthread_join(probe_thread, NULL);
    CHECK(ts_block_ptr(b) == p && waits_exactly(1, (const uintptr_t[][2]){{77, 0}}));
    if (!probe_lock_free) printf("  the wait for a copy ran under the allocator's lock\n");
    CHECK(probe_started && probe_lock_free);
    ts_allocator_release(a, b);
    ts_allocator_destroy(a);
}

/* Uses that supersede each other (pinned copies: a later event on the same stream covers an
 * earlier one): a block keeps one per stream, however many copies read it, and its reuse waits for
 * those alone rather than for the whole device. Here a use is stream * 1000 + sequence. */
static bool fake_covers(int index, uintptr_t x, uintptr_t y) {
    return x / 1000 == y / 1000 && x > y;
}
static const ts_alloc_hooks fake_covering_hooks = {fake_current_stream, fake_stream_wait,
                                                   fake_device_wait, false, fake_covers};

static void test_allocator_covers(void) {
    ts_allocator *a = ts_allocator_new(&fake_be, 0);
    ts_allocator_set_hooks(a, &fake_covering_hooks);
    nwaits = ndevice_waits = 0;
    fake_current = 0;
    ts_block *b = ts_allocator_alloc(a, 4 * MIB, NULL, 0);
    void *p = ts_block_ptr(b);
    for (uintptr_t k = 1; k <= 10; k++) ts_allocator_record_stream(a, b, 1000 + k);
    ts_allocator_record_stream(a, b, 2001);
    ts_allocator_record_stream(a, b, 2005);
    ts_allocator_record_stream(a, b, 2003); /* earlier than 2005: nothing new */
    ts_allocator_release(a, b);
    b = ts_allocator_alloc(a, 4 * MIB, NULL, 0);
    CHECK(ts_block_ptr(b) == p && waits_exactly(2, (const uintptr_t[][2]){{1010, 0}, {2005, 0}}));
    CHECK_EQ(ndevice_waits, 0);
    ts_allocator_release(a, b);
    ts_allocator_destroy(a);
}

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

/* ------------------------------------------------------------------ record_stream's mistakes */
static void test_record_stream_args(void) {
    ts_scope_begin();
    ts_tensor *c = ts_ones(TS_SHAPE(3), (ts_opts){0});
    CHECK_EQ(ts_record_stream(NULL, NULL), TS_ERR_ARG);
    CHECK(ERR_IS(TS_ERR_ARG, "record_stream: tensor is NULL"));
    CHECK_EQ(ts_record_stream(c, NULL), TS_ERR_ARG);
    CHECK(ERR_IS(TS_ERR_ARG, "record_stream: stream is NULL"));
    if (ts_cuda_is_available()) {
        CHECK_EQ(ts_record_stream(c, ts_cuda_default_stream(0)), TS_ERR_ARG);
        CHECK(ERR_IS(TS_ERR_ARG, "record_stream: ", "float32 [3] on cpu", "cuda tensors only"));
    }
    ts_scope_end();
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
static bool floats_equal(ts_tensor *t, const float *want, int64_t n) {
    float *got = malloc((size_t)n * sizeof *got);
    bool ok = ts_copy_to_host(t, got, (size_t)n * sizeof *got) == TS_OK;
    for (int64_t i = 0; ok && i < n; i++) ok = got[i] == want[i];
    free(got);
    return ok;
}

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
    ts_tensor *x = ts_arange(0, N, 1, (ts_opts){.device = ts_cuda(0)});
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

/* Memory freed by work on one stream and reused from another: the allocator orders the reuse. */
static void test_allocator_across_streams(void) {
    enum { N = 4 << 20 };
    ts_cuda_stream *s1 = ts_cuda_stream_new(0), *s2 = ts_cuda_stream_new(0);
    ts_mem_stats before, after;
    ts_memory_stats(ts_cuda(0), &before);
    float *want = malloc(N * sizeof *want);
    for (int round = 0; round < 8; round++) {
        ts_scope_begin();
        ts_cuda_set_stream(round % 2 ? s2 : s1);
        /* each round's temporaries reuse the blocks the other stream just freed */
        ts_tensor *x = ts_full(TS_SHAPE(N), (double)round, (ts_opts){.device = ts_cuda(0)});
        ts_tensor *y = ts_mul_scalar(ts_add_scalar(x, 1.0), 3.0);
        for (int i = 0; i < N; i++) want[i] = ((float)round + 1.0f) * 3.0f;
        CHECK(floats_equal(y, want, N));
        ts_scope_end();
    }
    ts_cuda_set_stream(NULL);
    ts_memory_stats(ts_cuda(0), &after);
    /* the same cached segments served every round */
    CHECK(after.reserved <= before.reserved + 3 * (size_t)N * sizeof(float) + 40 * MIB);
    ts_cuda_stream_free(s1);
    ts_cuda_stream_free(s2);
    free(want);
    CHECK_OK();
}

static void test_pinned_and_async(void) {
    enum { N = 16 << 20 }; /* 64 MiB of f32: a copy that takes a while */
    ts_mem_stats st;
    ts_scope_begin();
    ts_tensor *h = ts_empty(TS_SHAPE(N), (ts_opts){.pin_memory = true});
    CHECK(h && ts_is_pinned(h));
    CHECK(ts_cuda_pinned_memory_stats(&st) == TS_OK && st.allocated >= (size_t)N * 4);
    ts_tensor *src = ts_arange(0, N, 1, (ts_opts){0});
    ts_copy_(h, src);
    ts_tensor *d = ts_to_async(h, ts_cuda(0));
    CHECK(d && ts_device_equal(ts_device_of(d), ts_cuda(0)) && !ts_is_pinned(d));
    float *want = malloc(N * sizeof *want);
    for (int i = 0; i < N; i++) want[i] = (float)i;
    CHECK(floats_equal(d, want, N));
    /* ts_pin_memory copies into page-locked memory */
    ts_tensor *p = ts_pin_memory(src);
    CHECK(p && ts_is_pinned(p) && p != src && floats_equal(p, want, N));
    ts_scope_end();

    /* a pinned block is not handed out again before the copy reading it ran: fill the next
     * allocation (the same block) at once, and the first copy still sees its own data */
    ts_scope_begin();
    ts_tensor *dev = NULL;
    ts_scope_begin();
    ts_tensor *h1 = ts_full(TS_SHAPE(N), 1.0, (ts_opts){.pin_memory = true});
    dev = ts_keep(ts_to_async(h1, ts_cuda(0)));
    ts_scope_end(); /* h1 freed while its copy may still run */
    ts_tensor *h2 = ts_full(TS_SHAPE(N), 2.0, (ts_opts){.pin_memory = true});
    CHECK(h2 && ts_is_pinned(h2));
    for (int i = 0; i < N; i++) want[i] = 1.0f;
    CHECK(floats_equal(dev, want, N));
    ts_scope_end();

    /* ts_empty_cache(cpu) gives the page-locked cache back */
    CHECK_EQ(ts_empty_cache(ts_cpu()), TS_OK);
    CHECK(ts_cuda_pinned_memory_stats(&st) == TS_OK && st.allocated == 0 && st.reserved == 0);
    free(want);
    CHECK_OK();
}

/* Queues about half a second of work on the current stream of cuda:0 (24 f32 matmuls of
 * 8192^2, TF32 off; each product's memory is reused by the next, in stream order), so that a
 * check right after sees the stream busy. */
static void queue_long_work(void) {
    const int64_t n = 8192;
    ts_scope_begin();
    ts_tensor *a = ts_full(TS_SHAPE(n, n), 1.0 / 8192, (ts_opts){.device = ts_cuda(0)});
    for (int i = 0; i < 24; i++) {
        ts_scope_begin();
        ts_mm(a, a);
        ts_scope_end();
    }
    ts_scope_end();
}

/* Reusing a pinned block waits for the copy that read it (its event), not for the stream: with
 * long work queued behind the copy, the reuse returns while the stream is still busy. And the
 * wait does happen: the copy saw the old data. */
static void test_pinned_reuse_waits_for_copy(void) {
    enum { N = 16 << 20 };
    ts_mem_stats st0, st1;
    ts_cuda_stream *cur = ts_cuda_current_stream(0);
    float *want = malloc(N * sizeof *want);
    for (int i = 0; i < N; i++) want[i] = 1.0f;
    ts_scope_begin();
    ts_tensor *dev = NULL;
    ts_scope_begin();
    ts_tensor *h1 = ts_full(TS_SHAPE(N), 1.0, (ts_opts){.pin_memory = true});
    dev = ts_keep(ts_to_async(h1, ts_cuda(0)));
    queue_long_work(); /* after the copy, on the same stream */
    ts_scope_end();    /* h1 goes back to the pinned cache */
    ts_cuda_pinned_memory_stats(&st0);
    ts_tensor *h2 = ts_empty(TS_SHAPE(N), (ts_opts){.pin_memory = true}); /* h1's block */
    const bool busy = !ts_cuda_stream_query(cur);
    ts_cuda_pinned_memory_stats(&st1);
    printf("pinned reuse: the stream is %s when the reused block is handed out\n",
           busy ? "still busy" : "idle");
    CHECK(st1.reserved == st0.reserved); /* reused, not fresh memory */
    CHECK(busy);                         /* it did not wait for the matmuls */
    ts_fill_(h2, 2.0);                   /* the copy has read h1's bytes already */
    CHECK(floats_equal(dev, want, N));
    ts_scope_end();
    free(want);
    CHECK_OK();
}

/* Many copies from one pinned tensor keep one pending use per stream: freeing and reusing it
 * waits for its last copy, not for every copy in flight (here one queued behind long work on
 * another stream, which must still be running afterwards). */
static void test_pinned_many_copies(void) {
    enum { N = 1 << 20 };
    ts_cuda_stream *other = ts_cuda_stream_new(0);
    ts_scope_begin();
    ts_tensor *big = ts_full(TS_SHAPE(16 << 20), 1.0, (ts_opts){.pin_memory = true});
    ts_cuda_set_stream(other);
    queue_long_work();
    ts_keep(ts_to_async(big, ts_cuda(0))); /* its event fires after the long work */
    ts_cuda_set_stream(NULL);
    ts_scope_begin();
    ts_tensor *h = ts_full(TS_SHAPE(N), 4.0, (ts_opts){.pin_memory = true});
    for (int i = 0; i < 10; i++) ts_to_async(h, ts_cuda(0));
    ts_scope_end();
    ts_tensor *h2 = ts_empty(TS_SHAPE(N), (ts_opts){.pin_memory = true}); /* h's block */
    const bool busy = !ts_cuda_stream_query(other);
    printf("pinned copies: after 10 copies of one block its reuse left the other stream %s\n",
           busy ? "busy" : "idle");
    CHECK(h2 != NULL && busy);
    ts_scope_end();
    ts_cuda_stream_synchronize(other);
    ts_cuda_stream_free(other);
    CHECK_OK();
}

/* A tensor made on the default stream and read on a side stream: ts_record_stream keeps its memory
 * from the next tensor (made on the default stream) until the side stream's read ran. */
static bool side_stream_read(bool record, int64_t *wrong) {
    enum { N = 16 << 20 };
    ts_cuda_stream *side = ts_cuda_stream_new(0);
    ts_mem_stats st0, st1;
    bool reused = false;
    ts_scope_begin();
    ts_tensor *y = NULL;
    ts_scope_begin();
    ts_tensor *x = ts_full(TS_SHAPE(N), 1.0, (ts_opts){.device = ts_cuda(0)});
    ts_cuda_synchronize(0);
    ts_cuda_set_stream(side);
    queue_long_work();
    y = ts_keep(ts_add_scalar(x, 1.0)); /* reads x on `side`, after the long work */
    if (record) CHECK_EQ(ts_record_stream(x, side), TS_OK);
    ts_cuda_set_stream(NULL);
    ts_memory_stats(ts_cuda(0), &st0);
    ts_scope_end(); /* x released on the default stream */
    ts_tensor *z = ts_full(TS_SHAPE(N), 5.0, (ts_opts){.device = ts_cuda(0)}); /* x's block */
    ts_memory_stats(ts_cuda(0), &st1);
    reused = st1.reserved == st0.reserved;
    ts_cuda_stream_synchronize(side);
    float *got = malloc(N * sizeof *got);
    *wrong = 0;
    if (ts_copy_to_host(y, got, N * sizeof *got) == TS_OK)
        for (int i = 0; i < N; i++) *wrong += got[i] != 2.0f;
    free(got);
    (void)z;
    ts_scope_end();
    ts_cuda_stream_free(side);
    return reused;
}

static void test_record_stream(void) {
    int64_t wrong = -1;
    CHECK(side_stream_read(true, &wrong));
    CHECK_EQ(wrong, 0);
    /* the hazard it prevents (not a check: it depends on the GPU's timing) */
    side_stream_read(false, &wrong);
    printf("record_stream: without it, the side stream read %lld overwritten elements of %d\n",
           (long long)wrong, 16 << 20);
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

/* The pinned allocator's waits (a reused block, ts_empty_cache(cpu)) leave the calling thread's
 * CUDA device as it was, also after copies to another device. */
static void test_pinned_keeps_device(void) {
    const int n = ts_cuda_device_count(), other = n - 1;
    ts_scope_begin();
    ts_scope_begin();
    ts_tensor *h = ts_full(TS_SHAPE(1 << 20), 3.0, (ts_opts){.pin_memory = true});
    ts_keep(ts_to_async(h, ts_cuda(other)));
    ts_scope_end();
    CHECK_EQ(ts_cuda_set_device(0), TS_OK);
    CHECK_EQ(tsc_runtime_device(), 0);
    ts_tensor *h2 = ts_empty(TS_SHAPE(1 << 20), (ts_opts){.pin_memory = true}); /* waits */
    CHECK(h2 != NULL);
    CHECK_EQ(tsc_runtime_device(), 0);
    ts_scope_end();
    CHECK_EQ(ts_empty_cache(ts_cpu()), TS_OK);
    CHECK_EQ(tsc_runtime_device(), 0);
    if (n < 2) printf("pinned waits: one CUDA device here, a copy to cuda:1 not tested\n");
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
    CHECK(ERR_IS(TS_ERR_OOM, "empty: out of memory on cuda:0: tried to allocate ", " allocated, ",
                 " reserved, ", " free, ", " total"));
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
    test_allocator_streams();
    test_allocator_waits_unlocked();
    test_allocator_covers();
    test_probe_classification(argv[0]);
    test_record_stream_args();
    if (!ts_cuda_is_available()) {
        test_no_cuda();
        if (no_device || ts_test_failed_count()) return ts_test_finish();
        printf("%d passed without a GPU\n", ts_test_passed_count());
        return ts_test_skip_no_cuda("test_cuda_runtime: the GPU tests are not run here");
    }
    if (no_device) return ts_test_skip("CUDA_VISIBLE_DEVICES= left the GPUs visible");
    test_devices_and_properties();
    test_streams_and_events();
    test_allocator_across_streams();
    test_pinned_and_async();
    test_pinned_reuse_waits_for_copy();
    test_pinned_many_copies();
    test_record_stream();
    test_stream_slots();
    test_pinned_keeps_device();
    test_transfers();
    test_oom_and_empty_cache();
    test_random_matches_cpu();
    return ts_test_finish();
}
