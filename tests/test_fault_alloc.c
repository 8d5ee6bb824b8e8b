/* test_fault_alloc.c — the allocation-failure switch itself: TS_FAULT_ALLOC=N from the environment
 * fails the N-th allocation after start-up; ts_fault_alloc_set(n) restarts the count, fails the
 * n-th allocation once (host or device, cache hits included), counts only with 0 and stops
 * counting when negative; the failing op reports TS_ERR_OOM naming itself. */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <stdlib.h>
#include <string.h>

#include "ts_test.h"

static int64_t live_cpu(void) {
    ts_mem_stats st;
    ts_memory_stats(ts_cpu(), &st);
    return st.live_tensors;
}

/* Deeper than the scopes kept in thread-local storage, twice (the stack moves to the heap, goes
 * back at the outermost end, and moves again), keeping a tensor from each level. */
static void deep_scopes(void) {
    int64_t live0 = live_cpu();
    for (int round = 0; round < 2; round++) {
        ts_tensor *outer = NULL; /* the outermost keep hands its tensor to the caller */
        for (int d = 0; d < 40; d++) {
            ts_scope_begin();
            ts_tensor *k = ts_keep(ts_zeros(TS_SHAPE(2), (ts_opts){.device = ts_cpu()}));
            if (d == 0) outer = k;
            ts_zeros(TS_SHAPE(2), (ts_opts){.device = ts_cpu()});
        }
        CHECK_EQ(ts_scope_depth(), 40);
        CHECK_EQ(live_cpu(), live0 + 80);
        for (int d = 0; d < 40; d++) ts_scope_end();
        CHECK_EQ(ts_scope_depth(), 0);
        CHECK(outer != NULL);
        CHECK_EQ(live_cpu(), live0 + 1);
        ts_release(outer);
    }
    CHECK_OK();
}

/* A scope that cannot be allocated still opens (a phantom): begin and end stay paired, its
 * tensors die with the enclosing frame, ts_keep works, and nothing is reported or leaked. */
static void phantom_scope(void) {
    int64_t live0 = live_cpu();
    for (int d = 0; d < 32; d++) ts_scope_begin(); /* every thread-local frame in use */
    ts_fault_alloc_set(1);                         /* the stack cannot grow */
    ts_scope_begin();
    ts_fault_alloc_set(-1);
    CHECK_EQ(ts_scope_depth(), 33);
    CHECK_OK();
    ts_tensor *kept = ts_keep(ts_ones(TS_SHAPE(3), (ts_opts){.device = ts_cpu()}));
    ts_ones(TS_SHAPE(3), (ts_opts){.device = ts_cpu()});
    CHECK(kept != NULL);
    ts_scope_end(); /* the phantom: its tensors stay with frame 32 */
    CHECK_EQ(ts_scope_depth(), 32);
    CHECK_EQ(live_cpu(), live0 + 2);
    CHECK(ts_item(ts_sum(kept)) == 3);
    ts_scope_end();
    CHECK_EQ(live_cpu(), live0); /* frame 32 took both with it */
    for (int d = 0; d < 31; d++) ts_scope_end();
    CHECK_EQ(ts_scope_depth(), 0);
    CHECK_OK();
}

int main(void) {
    /* before the library starts: the environment variable arms the counter at start-up */
    setenv("TS_FAULT_ALLOC", "1", 1);
    ts_tensor *t = ts_zeros(TS_SHAPE(4), (ts_opts){.device = ts_cpu()});
    CHECK(t == NULL && ts_error() == TS_ERR_OOM);
    CHECK(strstr(ts_error_message(), "zeros: ") == ts_error_message());
    CHECK(ts_fault_alloc_fired());
    ts_error_clear();

    /* the failure happens once: the next allocations succeed */
    t = ts_zeros(TS_SHAPE(4), (ts_opts){.device = ts_cpu()});
    CHECK(t != NULL);
    CHECK_OK();
    ts_release(t);

    /* counting only: a tensor is a few allocations (struct, storage struct, memory) */
    ts_fault_alloc_set(0);
    t = ts_ones(TS_SHAPE(8), (ts_opts){.device = ts_cpu()});
    uint64_t per_tensor = ts_fault_alloc_count();
    CHECK(per_tensor >= 3);
    CHECK(!ts_fault_alloc_fired());
    ts_release(t);

    /* every one of them can be made to fail, and the op names itself */
    for (uint64_t n = 1; n <= per_tensor; n++) {
        ts_fault_alloc_set((int64_t)n);
        t = ts_ones(TS_SHAPE(8), (ts_opts){.device = ts_cpu()});
        CHECK(t == NULL && ts_fault_alloc_fired());
        CHECK_EQ(ts_error(), TS_ERR_OOM);
        CHECK(strncmp(ts_error_message(), "ones: ", 6) == 0);
        ts_error_clear();
    }
    /* one past the last: nothing fails */
    ts_fault_alloc_set((int64_t)per_tensor + 1);
    t = ts_ones(TS_SHAPE(8), (ts_opts){.device = ts_cpu()});
    CHECK(t != NULL && !ts_fault_alloc_fired());
    ts_release(t);
    ts_fault_alloc_set(-1);
    CHECK_OK();

    /* device memory of a sim device, served from the allocator's cache, counts too */
    if (ts_device_count(TS_SIM) > 0) {
        ts_release(ts_zeros(TS_SHAPE(8), (ts_opts){.device = ts_sim(0)})); /* now cached */
        ts_fault_alloc_set(0);
        ts_release(ts_zeros(TS_SHAPE(8), (ts_opts){.device = ts_sim(0)}));
        uint64_t sim_count = ts_fault_alloc_count();
        bool device_failed = false;
        for (uint64_t n = 1; n <= sim_count; n++) {
            ts_fault_alloc_set((int64_t)n);
            ts_tensor *z = ts_zeros(TS_SHAPE(8), (ts_opts){.device = ts_sim(0)});
            if (z) { /* the allocator absorbed it (a new segment retried after freeing the cache,
                      * a block handed out whole): then a correct tensor and no error */
                CHECK_OK();
                ts_scope_begin();
                CHECK(ts_item(ts_sum(ts_abs(z))) == 0);
                ts_scope_end();
                ts_release(z);
                continue;
            }
            device_failed |= strstr(ts_error_message(), "out of memory on sim:0") != NULL;
            CHECK(strstr(ts_error_message(), "zeros: ") == ts_error_message());
            ts_error_clear();
        }
        CHECK(device_failed);
    }

    deep_scopes();
    phantom_scope();

    /* off: nothing is counted */
    ts_fault_alloc_set(-1);
    t = ts_ones(TS_SHAPE(8), (ts_opts){.device = ts_cpu()});
    CHECK(t != NULL && ts_fault_alloc_count() == 0 && !ts_fault_alloc_fired());
    ts_release(t);
    CHECK_OK();
    return ts_test_finish();
}
