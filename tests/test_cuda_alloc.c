/* test_cuda_alloc.c — the CUDA backend's memory: stream-ordered reuse in the caching allocator (and
 * ts_record_stream), pinned memory and asynchronous copies (reuse waits for the copy's event only,
 * one pending use per stream), the pinned waits keeping the thread's device. Without a GPU it
 * checks what needs none (the allocator's stream ordering with fake streams and its waits outside
 * its lock, record_stream's mistakes), then skips: "SKIP: test_cuda_alloc: ...: CUDA is not
 * available (<reason>)", a failure under TS_REQUIRE_CUDA=1. The rest of the runtime:
 * test_cuda_runtime.c. */
#define _POSIX_C_SOURCE 200809L /* nanosleep */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/alloc.h"
#include "backend/cuda/cuda_bridge.h"
#include "cuda_check.h"
#include "ts_test.h"

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
    tsi_allocator_stats(probe_alloc, &st); /* takes the lock */
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
static const ts_alloc_hooks fake_hooks = {
    fake_current_stream, fake_stream_wait, fake_device_wait, true, NULL, false};

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
    ts_allocator *a = tsi_allocator_new(&fake_be, 0);
    tsi_allocator_set_hooks(a, &fake_hooks);
    nwaits = ndevice_waits = 0;
    /* 10 MiB: a segment of its own, never split, so its history is exactly its own */
    const size_t big = 10 * MIB;

    /* freed on stream 1, reused on stream 1: no wait */
    fake_current = 1;
    ts_block *b = tsi_allocator_alloc(a, big, NULL, 0);
    void *p = tsi_block_ptr(b);
    tsi_allocator_release(a, b);
    b = tsi_allocator_alloc(a, big, NULL, 0);
    CHECK(tsi_block_ptr(b) == p && NO_WAITS());
    tsi_allocator_release(a, b);

    /* reused on stream 2: stream 2 first waits for stream 1's work */
    fake_current = 2;
    b = tsi_allocator_alloc(a, big, NULL, 0);
    CHECK(tsi_block_ptr(b) == p && waits_exactly(1, (const uintptr_t[][2]){{1, 2}}));

    /* released while stream 3 is current: streams 2 (its owner) and 3 are waited for */
    fake_current = 3;
    tsi_allocator_release(a, b);
    fake_current = 4;
    b = tsi_allocator_alloc(a, big, NULL, 0);
    CHECK(tsi_block_ptr(b) == p && waits_exactly(2, (const uintptr_t[][2]){{2, 4}, {3, 4}}));

    /* a stream recorded on a live block (an asynchronous copy, say) is waited for too */
    tsi_allocator_record_stream(a, b, 5);
    tsi_allocator_release(a, b);
    b = tsi_allocator_alloc(a, big, NULL, 0);
    CHECK(tsi_block_ptr(b) == p && waits_exactly(1, (const uintptr_t[][2]){{5, 4}}));

    /* the host (id 0) never needs waiting for */
    tsi_allocator_record_stream(a, b, 0);
    tsi_allocator_release(a, b);
    b = tsi_allocator_alloc(a, big, NULL, 0);
    CHECK(NO_WAITS());

    /* a block used by more streams than it remembers: the next user waits for the device */
    for (uintptr_t s = 10; s < 16; s++) tsi_allocator_record_stream(a, b, s);
    tsi_allocator_release(a, b);
    b = tsi_allocator_alloc(a, big, NULL, 0);
    CHECK(NO_WAITS() && ndevice_waits == 1);
    tsi_allocator_release(a, b);
    ndevice_waits = 0;

    /* neighbours in one (small-pool) segment with different histories stay apart (a pool per
     * stream, as PyTorch's): stream 3 takes stream 2's block (with the free rest of the segment
     * merged in) and waits for stream 2 alone */
    fake_current = 1;
    ts_block *x = tsi_allocator_alloc(a, 512, NULL, 0);
    fake_current = 2;
    ts_block *y = tsi_allocator_alloc(a, 512, NULL, 0);
    CHECK((char *)tsi_block_ptr(y) == (char *)tsi_block_ptr(x) + 512 && NO_WAITS());
    void *px = tsi_block_ptr(x);
    fake_current = 1;
    tsi_allocator_release(a, x);
    fake_current = 2;
    tsi_allocator_release(a, y);
    fake_current = 3;
    ts_block *z = tsi_allocator_alloc(a, 1024, NULL, 0);
    CHECK(tsi_block_ptr(z) == (char *)px + 512 && waits_exactly(1, (const uintptr_t[][2]){{2, 3}}));
    tsi_allocator_release(a, z);

    /* empty_cache waits for the device once before handing segments back */
    tsi_allocator_empty_cache(a);
    ts_mem_stats st;
    tsi_allocator_stats(a, &st);
    CHECK(ndevice_waits == 1 && st.reserved == 0 && st.allocated == 0);

    /* the out-of-memory message of a device that reports its free memory */
    fake_limit = 32 * MIB;
    char msg[TS_OOM_MSG_LEN] = "";
    CHECK(tsi_allocator_alloc(a, 64 * MIB, msg, sizeof msg) == NULL);
    CHECK_STREQ(msg, "tried to allocate 64.00 MiB; the device has a total capacity of 1.00 GiB of "
                     "which 123.00 MiB is free. Of the allocated memory 0 B is allocated by "
                     "tensors, and 0 B is reserved by the caching allocator but unallocated "
                     "(largest free cached block 0 B). If reserved but unallocated memory is "
                     "large, ts_empty_cache() returns it");
    fake_limit = SIZE_MAX;
    tsi_allocator_destroy(a);
    fake_current = 0;
}

/* The pinned allocator's case: the host (stream 0) reuses a block whose use (a copy's event) was
 * recorded on it; the wait for that event runs with the allocator's lock released. */
static void test_allocator_waits_unlocked(void) {
    ts_allocator *a = tsi_allocator_new(&fake_be, 0);
    tsi_allocator_set_hooks(a, &fake_hooks);
    nwaits = ndevice_waits = 0;
    fake_current = 0; /* the host */
    ts_block *b = tsi_allocator_alloc(a, 4 * MIB, NULL, 0);
    void *p = tsi_block_ptr(b);
    tsi_allocator_record_stream(a, b, 77); /* a copy's event */
    tsi_allocator_release(a, b);
    probe_alloc = a;
    b = tsi_allocator_alloc(a, 4 * MIB, NULL, 0);
    probe_alloc = NULL;
    if (probe_started) pthread_join(probe_thread, NULL);
    CHECK(tsi_block_ptr(b) == p && waits_exactly(1, (const uintptr_t[][2]){{77, 0}}));
    if (!probe_lock_free) printf("  the wait for a copy ran under the allocator's lock\n");
    CHECK(probe_started && probe_lock_free);
    tsi_allocator_release(a, b);
    tsi_allocator_destroy(a);
}

/* Uses that supersede each other (pinned copies: a later event on the same stream covers an
 * earlier one): a block keeps one per stream, however many copies read it, and its reuse waits for
 * those alone rather than for the whole device. Here a use is stream * 1000 + sequence. */
static bool fake_covers(int index, uintptr_t x, uintptr_t y) {
    return x / 1000 == y / 1000 && x > y;
}
static const ts_alloc_hooks fake_covering_hooks = {
    fake_current_stream, fake_stream_wait, fake_device_wait, false, fake_covers, false};

static void test_allocator_covers(void) {
    ts_allocator *a = tsi_allocator_new(&fake_be, 0);
    tsi_allocator_set_hooks(a, &fake_covering_hooks);
    nwaits = ndevice_waits = 0;
    fake_current = 0;
    ts_block *b = tsi_allocator_alloc(a, 4 * MIB, NULL, 0);
    void *p = tsi_block_ptr(b);
    for (uintptr_t k = 1; k <= 10; k++) tsi_allocator_record_stream(a, b, 1000 + k);
    tsi_allocator_record_stream(a, b, 2001);
    tsi_allocator_record_stream(a, b, 2005);
    tsi_allocator_record_stream(a, b, 2003); /* earlier than 2005: nothing new */
    tsi_allocator_release(a, b);
    b = tsi_allocator_alloc(a, 4 * MIB, NULL, 0);
    CHECK(tsi_block_ptr(b) == p && waits_exactly(2, (const uintptr_t[][2]){{1010, 0}, {2005, 0}}));
    CHECK_EQ(ndevice_waits, 0);
    tsi_allocator_release(a, b);
    tsi_allocator_destroy(a);
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

/* ================================================================== with a GPU */
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
    ts_tensor *src = ts_arange(0, N, 1, (ts_opts){.dtype = TS_F32});
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
    /* every block the copies below need comes from the caches, made before the long work:
     * cudaHostAlloc (a new pinned block) waits for the whole device (seen on an H100) */
    ts_scope_begin(); /* h's scope */
    ts_tensor *h = ts_full(TS_SHAPE(N), 4.0, (ts_opts){.pin_memory = true});
    ts_scope_begin();
    for (int i = 0; i < 10; i++) ts_to_async(h, ts_cuda(0));
    ts_scope_end();
    ts_cuda_synchronize(0);
    ts_cuda_set_stream(other);
    queue_long_work();
    ts_keep(ts_to_async(big, ts_cuda(0))); /* its event fires after the long work */
    ts_cuda_set_stream(NULL);
    for (int i = 0; i < 10; i++) ts_to_async(h, ts_cuda(0));
    ts_scope_end(); /* h's block goes back to the pinned cache */
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

int main(void) {
    test_allocator_streams();
    test_allocator_waits_unlocked();
    test_allocator_covers();
    test_record_stream_args();
    if (!ts_cuda_is_available()) {
        if (ts_test_failed_count()) return ts_test_finish();
        printf("%d passed without a GPU\n", ts_test_passed_count());
        return ts_test_skip_no_cuda("test_cuda_alloc: the GPU tests are not run here");
    }
    test_allocator_across_streams();
    test_pinned_and_async();
    test_pinned_reuse_waits_for_copy();
    test_pinned_many_copies();
    test_record_stream();
    test_pinned_keeps_device();
    return ts_test_finish();
}
