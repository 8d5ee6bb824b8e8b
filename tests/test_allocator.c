/* test_allocator.c — the caching allocator over a fake malloc backend: sizes, reuse, split/merge,
 * stats, OOM, threads, and a timing printout. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/alloc.h"
#include "ts_test.h"

#define KIB ((size_t)1024)
#define MIB (KIB * KIB)

/* ------------------------------------------------------------------ fake backend */
static atomic_size_t fake_capacity; /* 0 = unlimited */
static atomic_size_t fake_used;
static atomic_long fake_allocs, fake_frees;
static atomic_bool fake_fail_all; /* every raw_alloc fails (for an unlimited-capacity OOM) */

static void fake_reset(size_t capacity) {
    atomic_store(&fake_capacity, capacity);
    atomic_store(&fake_used, 0);
    atomic_store(&fake_allocs, 0);
    atomic_store(&fake_frees, 0);
    atomic_store(&fake_fail_all, false);
}

static void fake_memory_info(const ts_backend *be, int index, size_t *free_b, size_t *total_b) {
    size_t cap = atomic_load(&fake_capacity), used = atomic_load(&fake_used);
    *total_b = cap;
    *free_b = cap > used ? cap - used : 0;
}

static void *fake_raw_alloc(const ts_backend *be, int index, size_t n) {
    if (atomic_load(&fake_fail_all)) return NULL;
    size_t cap = atomic_load(&fake_capacity);
    size_t cur = atomic_load(&fake_used);
    do {
        if (cap && cur + n > cap) return NULL;
    } while (!atomic_compare_exchange_weak(&fake_used, &cur, cur + n));
    void *p = malloc(n);
    if (!p) {
        atomic_fetch_sub(&fake_used, n);
        return NULL;
    }
    atomic_fetch_add(&fake_allocs, 1);
    return p;
}

static void fake_raw_free(const ts_backend *be, int index, void *p, size_t n) {
    free(p);
    atomic_fetch_sub(&fake_used, n);
    atomic_fetch_add(&fake_frees, 1);
}

static const ts_backend fake_be = {
    .name = "fake",
    .type = TS_SIM,
    .memory_info = fake_memory_info,
    .raw_alloc = fake_raw_alloc,
    .raw_free = fake_raw_free,
};

static ts_mem_stats stats(ts_allocator *a) {
    ts_mem_stats s;
    tsi_allocator_stats(a, &s);
    return s;
}

static size_t round512(size_t n) { return n == 0 ? 512 : (n + 511) / 512 * 512; }

static char *bptr(ts_block *b) { return (char *)tsi_block_ptr(b); }

/* ------------------------------------------------------------------ tests */
static void test_format(void) {
    char buf[32];
    tsi_format_bytes(0, buf, sizeof buf);
    CHECK(strcmp(buf, "0 B") == 0);
    tsi_format_bytes(512, buf, sizeof buf);
    CHECK(strcmp(buf, "512 B") == 0);
    tsi_format_bytes(1023, buf, sizeof buf);
    CHECK(strcmp(buf, "1023 B") == 0);
    tsi_format_bytes(1536, buf, sizeof buf);
    CHECK(strcmp(buf, "1.50 KiB") == 0);
    tsi_format_bytes(2 * MIB, buf, sizeof buf);
    CHECK(strcmp(buf, "2.00 MiB") == 0);
    tsi_format_bytes(1024 * MIB, buf, sizeof buf);
    CHECK(strcmp(buf, "1.00 GiB") == 0);
}

static void test_rounding(void) {
    fake_reset(0);
    ts_allocator *a = tsi_allocator_new(&fake_be, 0);
    size_t sizes[] = {0, 1, 511, 512, 513, 1000, 4096, 100000, MIB};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        ts_block *b = tsi_allocator_alloc(a, sizes[i], NULL, 0);
        CHECK(b && tsi_block_ptr(b));
        CHECK(tsi_block_size(b) == round512(sizes[i]));
        CHECK(stats(a).allocated == round512(sizes[i]));
        CHECK(stats(a).reserved == 2 * MIB); /* every small request: one 2 MiB segment */
        if (b) memset(tsi_block_ptr(b), 0xAB, tsi_block_size(b));
        tsi_allocator_release(a, b);
    }
    CHECK(atomic_load(&fake_allocs) == 1);

    /* 1 MiB + 1 goes to the large pool: a fresh 20 MiB segment */
    ts_block *big = tsi_allocator_alloc(a, MIB + 1, NULL, 0);
    CHECK(big && tsi_block_size(big) == MIB + 512);
    CHECK(stats(a).reserved == 22 * MIB);
    /* 9 MiB is still below 10 MiB: carved from the same 20 MiB segment */
    ts_block *nine = tsi_allocator_alloc(a, 9 * MIB, NULL, 0);
    CHECK(nine && stats(a).reserved == 22 * MIB);
    CHECK(bptr(nine) == bptr(big) + MIB + 512);
    /* >= 10 MiB: its own segment rounded to 2 MiB */
    ts_block *ten = tsi_allocator_alloc(a, 10 * MIB + 1, NULL, 0);
    CHECK(ten && tsi_block_size(ten) == 10 * MIB + 512);
    CHECK(stats(a).reserved == 22 * MIB + 12 * MIB);
    tsi_allocator_release(a, big);
    tsi_allocator_release(a, nine);
    tsi_allocator_release(a, ten);
    CHECK(stats(a).allocated == 0);
    tsi_allocator_destroy(a);
    CHECK(atomic_load(&fake_used) == 0);
    CHECK(atomic_load(&fake_allocs) == atomic_load(&fake_frees));
}

static void test_reuse(void) {
    fake_reset(0);
    ts_allocator *a = tsi_allocator_new(&fake_be, 0);
    ts_block *b = tsi_allocator_alloc(a, 4000, NULL, 0);
    char *p = bptr(b);
    tsi_allocator_release(a, b);
    ts_block *c = tsi_allocator_alloc(a, 4000, NULL, 0);
    CHECK(bptr(c) == p);
    tsi_allocator_release(a, c);
    ts_block *l = tsi_allocator_alloc(a, 3 * MIB, NULL, 0);
    char *lp = bptr(l);
    tsi_allocator_release(a, l);
    l = tsi_allocator_alloc(a, 3 * MIB, NULL, 0);
    CHECK(bptr(l) == lp);
    tsi_allocator_release(a, l);
    CHECK(atomic_load(&fake_allocs) == 2); /* one small, one large segment */
    tsi_allocator_destroy(a);
    CHECK(atomic_load(&fake_used) == 0);
}

static void test_split_merge(void) {
    fake_reset(0);
    ts_allocator *a = tsi_allocator_new(&fake_be, 0);
    ts_block *x = tsi_allocator_alloc(a, 512 * KIB, NULL, 0);
    ts_block *y = tsi_allocator_alloc(a, 512 * KIB, NULL, 0);
    ts_block *z = tsi_allocator_alloc(a, 512 * KIB, NULL, 0);
    CHECK(bptr(y) == bptr(x) + 512 * KIB && bptr(z) == bptr(y) + 512 * KIB);
    char *base = bptr(x);
    /* free the middle, then its left neighbour: one 1 MiB hole at x, reused exactly */
    tsi_allocator_release(a, y);
    tsi_allocator_release(a, x);
    ts_block *m = tsi_allocator_alloc(a, MIB, NULL, 0);
    CHECK(bptr(m) == base);
    CHECK(stats(a).reserved == 2 * MIB);
    /* free everything: the whole segment merges and yields two adjacent 1 MiB blocks */
    tsi_allocator_release(a, z);
    tsi_allocator_release(a, m);
    ts_block *p = tsi_allocator_alloc(a, MIB, NULL, 0);
    ts_block *q = tsi_allocator_alloc(a, MIB, NULL, 0);
    CHECK(bptr(p) == base && bptr(q) == base + MIB);
    CHECK(stats(a).reserved == 2 * MIB && atomic_load(&fake_allocs) == 1);
    tsi_allocator_release(a, q); /* right then left: merge in the other direction */
    tsi_allocator_release(a, p);

    /* best fit: holes of 256 KiB (b1, b6) and 512 KiB (b3+b4) */
    ts_block *b[8];
    for (int i = 0; i < 8; i++) b[i] = tsi_allocator_alloc(a, 256 * KIB, NULL, 0);
    for (int i = 0; i < 8; i++) CHECK(bptr(b[i]) == base + (size_t)i * 256 * KIB);
    tsi_allocator_release(a, b[1]);
    tsi_allocator_release(a, b[3]);
    tsi_allocator_release(a, b[4]);
    tsi_allocator_release(a, b[6]);
    ts_block *f1 = tsi_allocator_alloc(a, 300 * KIB, NULL, 0); /* only the 512 KiB hole fits */
    CHECK(bptr(f1) == bptr(b[3]));
    /* 212 KiB remain after f1: the smallest hole that fits 200 KiB */
    ts_block *f2 = tsi_allocator_alloc(a, 200 * KIB, NULL, 0);
    CHECK(bptr(f2) == bptr(b[3]) + 300 * KIB);
    ts_block *f3 =
        tsi_allocator_alloc(a, 200 * KIB, NULL, 0); /* two 256 KiB holes: lowest address */
    CHECK(bptr(f3) == bptr(b[1]));
    tsi_allocator_release(a, f1);
    tsi_allocator_release(a, f2);
    tsi_allocator_release(a, f3);
    for (int i = 0; i < 8; i++)
        if (i != 1 && i != 3 && i != 4 && i != 6) tsi_allocator_release(a, b[i]);
    CHECK(stats(a).allocated == 0);
    tsi_allocator_empty_cache(a);
    CHECK(stats(a).reserved == 0 && atomic_load(&fake_used) == 0);

    /* large pool: split only when more than 1 MiB would remain */
    ts_block *n1 = tsi_allocator_alloc(a, 19 * MIB + 256 * KIB, NULL, 0);
    CHECK(tsi_block_size(n1) == 20 * MIB); /* 0.75 MiB left: not split */
    CHECK(stats(a).allocated == 20 * MIB);
    tsi_allocator_release(a, n1);
    ts_block *s1 = tsi_allocator_alloc(a, 18 * MIB + 512 * KIB, NULL, 0);
    CHECK(tsi_block_size(s1) == 18 * MIB + 512 * KIB); /* 1.5 MiB left: split */
    ts_block *s2 = tsi_allocator_alloc(a, 1 * MIB + 512, NULL, 0);
    CHECK(bptr(s2) == bptr(s1) + 18 * MIB + 512 * KIB);
    CHECK(stats(a).reserved == 20 * MIB);
    tsi_allocator_release(a, s1);
    tsi_allocator_release(a, s2);
    tsi_allocator_destroy(a);
    CHECK(atomic_load(&fake_used) == 0);
}

/* ------------------------------------------------------------------ streams */
/* Fake stream hooks: the current stream is a variable; waits are counted by (from, to). */
static uintptr_t cur_stream = 1;
static int waits[4][4], device_waits;
static uintptr_t fake_current_stream(int index) { return cur_stream; }
static void fake_stream_wait(int index, uintptr_t from, uintptr_t to) {
    if (from < 4 && to < 4) waits[from][to]++;
}
static void fake_device_wait(int index) { device_waits++; }
static const ts_alloc_hooks fake_hooks = {
    .current_stream = fake_current_stream,
    .stream_wait = fake_stream_wait,
    .device_wait = fake_device_wait,
    .stream_pools = true,
};

/* A fresh allocator over the fake backend with the fake stream hooks, the wait counts cleared. */
static ts_allocator *stream_allocator(void) {
    fake_reset(0);
    memset(waits, 0, sizeof waits), device_waits = 0;
    ts_allocator *a = tsi_allocator_new(&fake_be, 0);
    tsi_allocator_set_hooks(a, &fake_hooks);
    return a;
}

/* Reuse across streams waits for the earlier stream; reuse on the same stream waits for nothing;
 * memory freed by one stream does not merge into another's free neighbour (where every later
 * allocation from the merged block would wait for the first stream's queue). */
static void test_streams(void) {
    ts_allocator *a = stream_allocator();
    cur_stream = 1;
    ts_block *x = tsi_allocator_alloc(a, 4 * MIB, NULL, 0);
    cur_stream = 2;
    ts_block *y = tsi_allocator_alloc(a, 4 * MIB, NULL, 0); /* the same 20 MiB segment */
    CHECK(bptr(y) == bptr(x) + 4 * MIB);
    CHECK(waits[1][2] == 0 && waits[2][1] == 0); /* fresh memory: nothing to wait for */
    tsi_allocator_release(a, y);                 /* stream 2's block */
    cur_stream = 1;
    tsi_allocator_release(a, x); /* stream 1's, beside it: kept apart */
    ts_block *x2 = tsi_allocator_alloc(a, 4 * MIB, NULL, 0);
    CHECK(bptr(x2) == bptr(x)); /* best fit: stream 1's own 4 MiB */
    CHECK(waits[2][1] == 0);    /* stream 1 does not wait for stream 2 */
    cur_stream = 2;
    ts_block *y2 = tsi_allocator_alloc(a, 4 * MIB, NULL, 0);
    CHECK(bptr(y2) == bptr(y) && waits[1][2] == 0);
    tsi_allocator_release(a, y2); /* [4, 20) MiB: stream 2's (the unused tail merged in) */
    /* stream 1 takes memory stream 2 freed: it waits for stream 2 (an event), once */
    cur_stream = 1;
    tsi_allocator_release(a, x2);
    ts_block *big = tsi_allocator_alloc(a, 8 * MIB, NULL, 0); /* only [4, 20) fits */
    CHECK(big && bptr(big) == bptr(y) && waits[2][1] == 1);
    tsi_allocator_release(a, big); /* now stream 1's: joins [0, 4), not stream 2's [12, 20) */
    ts_block *all1 = tsi_allocator_alloc(a, 12 * MIB, NULL, 0);
    CHECK(all1 && bptr(all1) == bptr(x) && waits[2][1] == 1);
    tsi_allocator_release(a, all1);
    /* emptying the cache waits for the device once, then the segment goes back whole */
    tsi_allocator_empty_cache(a);
    CHECK(device_waits == 1 && stats(a).reserved == 0 && atomic_load(&fake_used) == 0);
    tsi_allocator_destroy(a);
}

/* A stream takes memory from its own pool first, even where another stream's block fits better
 * (the other stream may have queued much work since it freed it: seen on an H100, copies on the
 * default stream stalled behind a side stream's matrix products); from another stream's pool,
 * waiting for that stream, only when nothing of its own or unused fits, before new memory. */
static void test_stream_pools(void) {
    ts_allocator *a = stream_allocator();
    cur_stream = 2;
    ts_block *y = tsi_allocator_alloc(a, 4 * MIB, NULL, 0); /* [0, 4) of a 20 MiB segment */
    cur_stream = 1;
    ts_block *x = tsi_allocator_alloc(a, 4 * MIB, NULL, 0); /* [4, 8) */
    CHECK(bptr(x) == bptr(y) + 4 * MIB);
    cur_stream = 2;
    tsi_allocator_release(a, y); /* stream 2's pool: [0, 4), the best fit for 4 MiB */
    cur_stream = 1;
    tsi_allocator_release(a, x); /* stream 1's pool: [4, 20), the unused tail merged in */
    ts_block *x2 = tsi_allocator_alloc(a, 4 * MIB, NULL, 0);
    CHECK(x2 && bptr(x2) == bptr(x) && waits[2][1] == 0);
    /* stream 3 has no pool and nothing is unused: the best fit of the others' pools (stream 2's
     * [0, 4) before stream 1's [8, 20)), waiting for its stream, rather than a new segment */
    cur_stream = 3;
    ts_block *z = tsi_allocator_alloc(a, 4 * MIB, NULL, 0);
    CHECK(z && bptr(z) == bptr(y) && waits[2][3] == 1 && waits[1][3] == 0);
    CHECK(atomic_load(&fake_allocs) == 1);
    /* stream 1's own remainder serves it at no wait */
    cur_stream = 1;
    ts_block *rest = tsi_allocator_alloc(a, 12 * MIB, NULL, 0);
    CHECK(rest && bptr(rest) == bptr(x) + 4 * MIB && waits[2][1] == 0 && waits[3][1] == 0);
    tsi_allocator_release(a, rest);
    tsi_allocator_release(a, x2);
    cur_stream = 3;
    tsi_allocator_release(a, z);
    tsi_allocator_empty_cache(a);
    CHECK(device_waits == 1 && stats(a).reserved == 0 && atomic_load(&fake_used) == 0);
    tsi_allocator_destroy(a);
}

static void test_stats(void) {
    fake_reset(0);
    ts_allocator *a = tsi_allocator_new(&fake_be, 0);
    ts_mem_stats s = stats(a);
    CHECK(s.allocated == 0 && s.reserved == 0 && s.alloc_count == 0 && s.oom_count == 0);
    ts_block *x = tsi_allocator_alloc(a, 100, NULL, 0);     /* 512 */
    ts_block *y = tsi_allocator_alloc(a, 5000, NULL, 0);    /* 5120 */
    ts_block *z = tsi_allocator_alloc(a, 2 * MIB, NULL, 0); /* large: 20 MiB segment */
    s = stats(a);
    CHECK(s.allocated == 512 + 5120 + 2 * MIB);
    CHECK(s.peak_allocated == s.allocated);
    CHECK(s.reserved == 22 * MIB && s.peak_reserved == 22 * MIB);
    CHECK(s.alloc_count == 3);
    tsi_allocator_release(a, z);
    s = stats(a);
    CHECK(s.allocated == 512 + 5120 && s.peak_allocated == 512 + 5120 + 2 * MIB);
    CHECK(s.reserved == 22 * MIB);
    tsi_allocator_empty_cache(a); /* the large segment is free; the small one is not */
    s = stats(a);
    CHECK(s.reserved == 2 * MIB && s.peak_reserved == 22 * MIB);
    tsi_allocator_reset_peak(a);
    s = stats(a);
    CHECK(s.peak_allocated == 512 + 5120 && s.peak_reserved == 2 * MIB);
    tsi_allocator_release(a, x);
    tsi_allocator_release(a, y);
    s = stats(a);
    CHECK(s.allocated == 0 && s.alloc_count == 3 && s.reserved == 2 * MIB);
    tsi_allocator_empty_cache(a);
    CHECK(stats(a).reserved == 0 && atomic_load(&fake_used) == 0);
    tsi_allocator_destroy(a);
}

static void test_oom(void) {
    fake_reset(8 * MIB);
    ts_allocator *a = tsi_allocator_new(&fake_be, 0);
    ts_block *b[8];
    for (int i = 0; i < 8; i++) {
        b[i] = tsi_allocator_alloc(a, MIB, NULL, 0);
        CHECK(b[i] != NULL);
    }
    char msg[TS_OOM_MSG_LEN] = "";
    CHECK(tsi_allocator_alloc(a, 512, msg, sizeof msg) == NULL);
    /* four full 2 MiB small-pool segments: nothing free on the device or in the cache */
    CHECK_STREQ(msg, "tried to allocate 512 B; the device has a total capacity of 8.00 MiB of "
                     "which 0 B is free. Of the allocated memory 8.00 MiB is allocated by tensors, "
                     "and 0 B is reserved by the caching allocator but unallocated (largest free "
                     "cached block 0 B). If reserved but unallocated memory is large, "
                     "ts_empty_cache() returns it");
    CHECK(stats(a).oom_count == 1);
    /* two holes in different segments: 6 MiB live, no segment fully free */
    tsi_allocator_release(a, b[0]);
    tsi_allocator_release(a, b[2]);
    CHECK(tsi_allocator_alloc(a, 2 * MIB, msg, sizeof msg) == NULL);
    /* the two 1 MiB holes are cached but too small: 2 MiB reserved unallocated, largest 1 MiB */
    CHECK_STREQ(msg, "tried to allocate 2.00 MiB; the device has a total capacity of 8.00 MiB of "
                     "which 0 B is free. Of the allocated memory 6.00 MiB is allocated by tensors, "
                     "and 2.00 MiB is reserved by the caching allocator but unallocated (largest "
                     "free cached block 1.00 MiB). If reserved but unallocated memory is large, "
                     "ts_empty_cache() returns it");
    CHECK(stats(a).oom_count == 2 && stats(a).alloc_count == 8);
    /* a 1 MiB request fits a hole */
    ts_block *h = tsi_allocator_alloc(a, MIB, msg, sizeof msg);
    CHECK(h && (bptr(h) == bptr(b[0]) || bptr(h) == bptr(b[2])));
    tsi_allocator_release(a, h);
    /* free one whole segment (b2 and b3): the retry frees it from the cache by itself */
    tsi_allocator_release(a, b[3]);
    ts_block *t = tsi_allocator_alloc(a, 2 * MIB, msg, sizeof msg);
    CHECK(t != NULL && stats(a).reserved == 8 * MIB && stats(a).oom_count == 2);
    tsi_allocator_release(a, t);
    for (int i = 4; i < 8; i++) tsi_allocator_release(a, b[i]);
    tsi_allocator_release(a, b[1]);
    CHECK(stats(a).allocated == 0);
    tsi_allocator_empty_cache(a);
    CHECK(stats(a).reserved == 0 && atomic_load(&fake_used) == 0);
    ts_block *all = tsi_allocator_alloc(a, 8 * MIB, msg, sizeof msg);
    CHECK(all != NULL);
    tsi_allocator_release(a, all);
    CHECK(tsi_allocator_alloc(a, 8 * MIB + 1, NULL, 0) == NULL); /* and msg NULL is fine */
    CHECK(tsi_allocator_alloc(a, SIZE_MAX, msg, sizeof msg) == NULL);
    CHECK(strncmp(msg, "tried to allocate ", 18) == 0);
    CHECK(stats(a).oom_count == 4);
    tsi_allocator_destroy(a);
    CHECK(atomic_load(&fake_used) == 0);

    fake_reset(0);
    atomic_store(&fake_fail_all, true);
    a = tsi_allocator_new(&fake_be, 0);
    CHECK(tsi_allocator_alloc(a, 1536, msg, sizeof msg) == NULL);
    CHECK_STREQ(msg, "tried to allocate 1.50 KiB; the device's capacity is unlimited. Of the "
                     "allocated memory 0 B is allocated by tensors, and 0 B is reserved by the "
                     "caching allocator but unallocated (largest free cached block 0 B). If "
                     "reserved but unallocated memory is large, ts_empty_cache() returns it");
    tsi_allocator_destroy(a);
}

/* Random alloc/free against a model: live blocks never overlap, and the stats add up. */
static void test_random_model(void) {
    fake_reset(0);
    ts_allocator *a = tsi_allocator_new(&fake_be, 0);
    enum { SLOTS = 200 };
    ts_block *live[SLOTS] = {0};
    uint64_t rng = 12345;
    size_t expect_alloc = 0;
    uint64_t count = 0;
    for (int it = 0; it < 20000; it++) {
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        int slot = (int)((rng >> 33) % SLOTS);
        if (live[slot]) {
            expect_alloc -= tsi_block_size(live[slot]);
            tsi_allocator_release(a, live[slot]);
            live[slot] = NULL;
        } else {
            size_t n = (rng >> 40) % 4 == 0 ? (size_t)((rng >> 20) % (12 * MIB))
                                            : (size_t)((rng >> 20) % (64 * KIB));
            live[slot] = tsi_allocator_alloc(a, n, NULL, 0);
            CHECK(live[slot] && tsi_block_size(live[slot]) >= round512(n));
            expect_alloc += tsi_block_size(live[slot]);
            count++;
        }
        if (it % 1000 == 0) {
            for (int i = 0; i < SLOTS; i++)
                for (int j = i + 1; j < SLOTS; j++) {
                    if (!live[i] || !live[j]) continue;
                    char *pi = bptr(live[i]), *pj = bptr(live[j]);
                    bool disjoint =
                        pi + tsi_block_size(live[i]) <= pj || pj + tsi_block_size(live[j]) <= pi;
                    CHECK(disjoint);
                }
            if (it % 5000 == 0) tsi_allocator_empty_cache(a);
        }
        ts_mem_stats s = stats(a);
        if (s.allocated != expect_alloc || s.reserved != atomic_load(&fake_used) ||
            s.alloc_count != count) {
            CHECK(!"stats diverge from the model");
            break;
        }
    }
    for (int i = 0; i < SLOTS; i++) tsi_allocator_release(a, live[i]);
    CHECK(stats(a).allocated == 0);
    tsi_allocator_empty_cache(a);
    CHECK(stats(a).reserved == 0 && atomic_load(&fake_used) == 0);
    tsi_allocator_destroy(a);
}

/* ------------------------------------------------------------------ threads */
typedef struct {
    ts_allocator *a;
    unsigned seed;
    int bad;
} worker_arg;

static void *worker(void *p) {
    worker_arg *w = p;
    enum { LIVE = 32 };
    ts_block *live[LIVE] = {0};
    unsigned char tag[LIVE] = {0};
    uint64_t rng = w->seed;
    for (int it = 0; it < 10000; it++) {
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        int slot = (int)((rng >> 33) % LIVE);
        if (live[slot]) {
            /* a block shared with another thread would have been overwritten */
            unsigned char *d = tsi_block_ptr(live[slot]);
            size_t n = tsi_block_size(live[slot]);
            if (d[0] != tag[slot] || d[n - 1] != tag[slot] || d[n / 2] != tag[slot]) w->bad++;
            tsi_allocator_release(w->a, live[slot]);
            live[slot] = NULL;
        } else {
            size_t n = (rng >> 40) % 8 == 0 ? (size_t)((rng >> 16) % (4 * MIB))
                                            : (size_t)((rng >> 16) % (16 * KIB));
            live[slot] = tsi_allocator_alloc(w->a, n, NULL, 0);
            if (!live[slot]) {
                w->bad++;
                continue;
            }
            unsigned char *d = tsi_block_ptr(live[slot]);
            size_t sz = tsi_block_size(live[slot]);
            tag[slot] = (unsigned char)(rng >> 24);
            d[0] = d[sz - 1] = d[sz / 2] = tag[slot];
        }
        if (it % 2500 == 0 && (w->seed & 1)) tsi_allocator_empty_cache(w->a);
    }
    for (int i = 0; i < LIVE; i++) tsi_allocator_release(w->a, live[i]);
    return NULL;
}

static void test_threads(void) {
    fake_reset(0);
    ts_allocator *a = tsi_allocator_new(&fake_be, 0);
    pthread_t th[4];
    worker_arg args[4];
    for (int i = 0; i < 4; i++) {
        args[i] = (worker_arg){a, (unsigned)(7 + i), 0};
        pthread_create(&th[i], NULL, worker, &args[i]);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        CHECK(args[i].bad == 0);
    }
    ts_mem_stats s = stats(a);
    CHECK(s.allocated == 0);
    CHECK(s.reserved == atomic_load(&fake_used));
    tsi_allocator_empty_cache(a);
    CHECK(stats(a).reserved == 0 && atomic_load(&fake_used) == 0);
    tsi_allocator_destroy(a);
}

/* ------------------------------------------------------------------ timing (printed only) */
static double now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static void bench(void) {
    fake_reset(0);
    ts_allocator *a = tsi_allocator_new(&fake_be, 0);
    enum { N = 1000000 };
    ts_block *warm = tsi_allocator_alloc(a, 4, NULL, 0);
    tsi_allocator_release(a, warm);
    double t0 = now_ns();
    for (int i = 0; i < N; i++) tsi_allocator_release(a, tsi_allocator_alloc(a, 4, NULL, 0));
    double t1 = now_ns();
    /* many free holes: best fit must not scan them */
    enum { H = 10000 };
    ts_block **hold = malloc(sizeof *hold * H);
    for (int i = 0; i < H; i++)
        hold[i] = tsi_allocator_alloc(a, 512 + (size_t)(i % 16) * 512, NULL, 0);
    for (int i = 0; i < H; i += 2) tsi_allocator_release(a, hold[i]);
    double t2 = now_ns();
    for (int i = 0; i < N; i++) tsi_allocator_release(a, tsi_allocator_alloc(a, 4000, NULL, 0));
    double t3 = now_ns();
    for (int i = 1; i < H; i += 2) tsi_allocator_release(a, hold[i]);
    free(hold);
    printf("alloc+release, 4 B: %.1f ns; 4000 B with %d free holes: %.1f ns\n", (t1 - t0) / N,
           H / 2, (t3 - t2) / N);
    CHECK(stats(a).allocated == 0);
    tsi_allocator_destroy(a);
}

int main(void) {
    CHECK(tsi_allocator_new(NULL, 0) == NULL);
    test_format();
    test_rounding();
    test_reuse();
    test_split_merge();
    test_streams();
    test_stream_pools();
    test_stats();
    test_oom();
    test_random_model();
    test_threads();
    bench();
    return ts_test_finish();
}
