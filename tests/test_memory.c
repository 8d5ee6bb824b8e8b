/* test_memory.c — scopes leave nothing behind over 10,000 steps on cpu and sim:0, ts_keep moves
 * ownership outwards, and a sim device with a capacity runs out of memory cleanly. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ts_test.h"

#define MIB ((size_t)1024 * 1024)

static ts_mem_stats stats(ts_device d) {
    ts_mem_stats s = {0};
    CHECK_EQ(ts_memory_stats(d, &s), TS_OK);
    return s;
}

/* ------------------------------------------------------------------ (c) out of memory */
/* Runs first, while no sim tensor exists, so that the devices can be re-configured. */
static void test_oom(void) {
    CHECK_EQ(ts_sim_configure(2, 8 * MIB), TS_OK);
    const ts_device d0 = ts_sim(0), d1 = ts_sim(1);
    size_t free_b = 0, total_b = 0;
    CHECK(ts_device_memory(d0, &free_b, &total_b) == TS_OK && total_b == 8 * MIB &&
          free_b == 8 * MIB);
    ts_mem_stats s = stats(d0);
    CHECK(s.allocated == 0 && s.reserved == 0 && s.oom_count == 0 && s.live_tensors == 0);

    /* 1 MiB tensors: eight fit, the ninth does not */
    const int64_t n1m = (int64_t)(MIB / 4);
    ts_tensor *held[16] = {NULL};
    int nheld = 0;
    for (int i = 0; i < 16; i++) {
        held[i] = ts_full(TS_SHAPE(n1m), i, (ts_opts){.device = d0});
        if (!held[i]) break;
        nheld++;
    }
    CHECK_EQ(nheld, 8);
    CHECK_EQ(ts_error(), TS_ERR_OOM);
    const char *msg = ts_error_message();
    CHECK(strstr(msg, "full") && strstr(msg, "sim:0") && strstr(msg, "tried to allocate") &&
          strstr(msg, "allocated") && strstr(msg, "reserved") && strstr(msg, "capacity"));
    CHECK(strstr(msg, "tried to allocate 1.00 MiB") && strstr(msg, "8.00 MiB is allocated") &&
          strstr(msg, "capacity of 8.00 MiB of which 0 B is free"));
    printf("OOM message: %s\n", msg);
    ts_error_clear();
    s = stats(d0);
    CHECK(s.allocated == 8 * MIB && s.reserved == 8 * MIB && s.oom_count == 1);
    CHECK(s.live_tensors == 8 && s.peak_allocated == 8 * MIB && s.alloc_count == 8);
    CHECK(ts_device_memory(d0, &free_b, &total_b) == TS_OK && free_b == 0);

    /* ops fail the same way and name themselves; the other device is unaffected */
    ts_scope_begin();
    CHECK(ts_add(held[0], held[1]) == NULL);
    CHECK(ts_error() == TS_ERR_OOM && strncmp(ts_error_message(), "add:", 4) == 0);
    ts_error_clear();
    CHECK(ts_to(held[0], d0) == held[0]); /* no copy needed: no allocation */
    ts_tensor *other = ts_to(held[1], d1);
    CHECK(other && ts_item(ts_select(other, 0, 7)) == 1);
    CHECK(ts_clone(held[2]) == NULL);
    CHECK_ERR(TS_ERR_OOM);
    CHECK_OK();
    ts_scope_end();
    CHECK_EQ(stats(d0).oom_count, 3);
    CHECK_EQ(stats(d1).live_tensors, 0);

    /* release one: the same allocation succeeds, from the cache */
    ts_release(held[7]);
    held[7] = ts_full(TS_SHAPE(n1m), 70, (ts_opts){.device = d0});
    CHECK(held[7] != NULL);
    CHECK_OK();
    ts_scope_begin();
    CHECK(ts_item(ts_select(held[7], 0, n1m - 1)) == 70 && ts_item(ts_select(held[3], 0, 5)) == 3);
    ts_scope_end();
    s = stats(d0);
    CHECK(s.reserved == 8 * MIB && s.alloc_count == 9 && s.oom_count == 3);

    /* large requests: a 3 MiB tensor fits next to nothing else only when the cache is freed */
    for (int i = 0; i < 8; i++) ts_release(held[i]);
    s = stats(d0);
    CHECK(s.allocated == 0 && s.reserved == 8 * MIB && s.live_tensors == 0);
    ts_tensor *big = ts_zeros(TS_SHAPE(3 * n1m), (ts_opts){.device = d0}); /* frees the cache */
    CHECK(big != NULL);
    CHECK_OK();
    s = stats(d0);
    CHECK(s.allocated == 3 * MIB && s.reserved == 3 * MIB);
    ts_tensor *big2 = ts_zeros(TS_SHAPE(6 * n1m), (ts_opts){.device = d0});
    CHECK(big2 == NULL);
    CHECK(ts_error() == TS_ERR_OOM && strstr(ts_error_message(), "tried to allocate 6.00 MiB") &&
          strstr(ts_error_message(), "3.00 MiB is allocated by tensors") &&
          strstr(ts_error_message(), "of which 5.00 MiB is free"));
    ts_error_clear();
    CHECK_EQ(stats(d0).oom_count, 4);
    ts_tensor *big3 = ts_zeros(TS_SHAPE(5 * n1m), (ts_opts){.device = d0});
    CHECK(big3 != NULL);
    CHECK_OK();
    /* a request that cannot fit at all, on a device with nothing else */
    ts_tensor *huge = ts_empty(TS_SHAPE(9 * n1m), (ts_opts){.device = d1});
    CHECK(huge == NULL);
    CHECK_ERR(TS_ERR_OOM);
    ts_tensor *absurd =
        ts_empty(TS_SHAPE((int64_t)1 << 60), (ts_opts){.device = d1, .dtype = TS_F64});
    CHECK(absurd == NULL);
    CHECK_ERR(TS_ERR_OOM);

    /* peaks, reset_peak and empty_cache */
    ts_release(big);
    ts_release(big3);
    s = stats(d0);
    CHECK(s.allocated == 0 && s.peak_allocated == 8 * MIB && s.reserved == 8 * MIB);
    CHECK(s.peak_reserved == 8 * MIB);
    CHECK_EQ(ts_empty_cache(d0), TS_OK);
    s = stats(d0);
    CHECK(s.reserved == 0 && s.peak_reserved == 8 * MIB);
    CHECK_EQ(ts_memory_reset_peak(d0), TS_OK);
    s = stats(d0);
    CHECK(s.peak_allocated == 0 && s.peak_reserved == 0 && s.oom_count == 4);
    ts_tensor *small = ts_zeros(TS_SHAPE(1000), (ts_opts){.device = d0});
    s = stats(d0);
    CHECK(s.allocated == 4096 && s.peak_allocated == 4096 && s.peak_reserved == s.reserved);
    ts_release(small);
    CHECK_EQ(ts_memory_reset_peak(d0), TS_OK);
    CHECK_EQ(stats(d0).peak_allocated, 0);
    CHECK_EQ(ts_memory_reset_peak(ts_sim(5)), TS_ERR_DEVICE);
    ts_error_clear();
    CHECK_EQ(ts_empty_cache(ts_sim(5)), TS_ERR_DEVICE);
    ts_error_clear();
    CHECK_EQ(ts_memory_stats(d0, NULL), TS_ERR_ARG);
    ts_error_clear();

    /* back to the test default: four unlimited devices */
    CHECK_EQ(ts_sim_configure(4, 0), TS_OK);
    CHECK_OK();
}

/* ------------------------------------------------------------------ (a) loops */
static void one_step(int it, const ts_tensor *const *params, double *check) {
    ts_scope_begin();
    const ts_device sim = ts_sim(0);
    ts_tensor *x = ts_full(TS_SHAPE(8, 16), (double)(it % 7), (ts_opts){0});
    ts_tensor *r = ts_arange(0, 16, 1, (ts_opts){.device = sim, .dtype = TS_F32});
    ts_tensor *xs = ts_to(x, sim);
    ts_tensor *y = ts_add(ts_mul_scalar(xs, 2), r); /* 2 * (it % 7) + col */
    ts_tensor *yt = ts_t(y);
    ts_tensor *row = ts_select(ts_contiguous(yt), 0, 3);
    ts_tensor *z = ts_add(ts_view(ts_slice(y, 1, 0, 16, 2), TS_SHAPE(-1)),
                          ts_ones(TS_SHAPE(64), (ts_opts){.device = sim}));
    ts_tensor *p = ts_add((ts_tensor *)params[0], ts_to(ts_select(z, 0, 5), ts_cpu()));
    /* an inner scope whose result is kept */
    ts_scope_begin();
    ts_tensor *k = ts_keep(ts_mul(ts_to(row, ts_cpu()), ts_to(row, ts_cpu())));
    ts_zeros(TS_SHAPE(3, 3), (ts_opts){.device = sim});
    ts_scope_end();
    /* a failing op in the middle of a step leaks nothing either */
    if (it % 100 == 0) {
        CHECK(ts_add(y, ts_zeros(TS_SHAPE(5), (ts_opts){.device = sim})) == NULL);
        CHECK(ts_add(xs, x) == NULL); /* sim and cpu */
        ts_error_clear();
    }
    if (it % 1000 == 0) {
        /* y[0, 3] = 2 (it % 7) + 3; z[5] = y[0, 10] + 1; p = params + z[5] */
        check[0] = ts_item(ts_select(row, 0, 0)) - (2.0 * (it % 7) + 3);
        check[1] = ts_item(ts_select(k, 0, 1)) - pow(2.0 * (it % 7) + 3, 2);
        check[2] = ts_item(p) - (0.5 + 2.0 * (it % 7) + 10 + 1);
    }
    ts_scope_end();
}

static void test_loop(void) {
    ts_tensor *param = ts_scalar(0.5, (ts_opts){0}); /* owned outside any scope, like a parameter */
    const ts_tensor *params[1] = {param};
    /* warm the caches so that reserved bytes can be compared too */
    double check[3] = {0, 0, 0};
    one_step(0, params, check);
    ts_error_clear();
    const ts_device devs[2] = {ts_cpu(), ts_sim(0)};
    ts_mem_stats before[2], after[2];
    for (int i = 0; i < 2; i++) before[i] = stats(devs[i]);
    bool values_ok = true;
    for (int it = 0; it < 10000; it++) {
        one_step(it, params, check);
        if (it % 1000 == 0)
            values_ok = values_ok && check[0] == 0 && check[1] == 0 && check[2] == 0;
    }
    CHECK(values_ok);
    CHECK_EQ(ts_scope_depth(), 0);
    for (int i = 0; i < 2; i++) {
        after[i] = stats(devs[i]);
        printf("%s: allocated %zu -> %zu bytes, live tensors %lld -> %lld, reserved %zu -> %zu, "
               "allocations %llu\n",
               ts_device_str(devs[i]), before[i].allocated, after[i].allocated,
               (long long)before[i].live_tensors, (long long)after[i].live_tensors,
               before[i].reserved, after[i].reserved,
               (unsigned long long)(after[i].alloc_count - before[i].alloc_count));
        CHECK_EQ(after[i].allocated, before[i].allocated);
        CHECK_EQ(after[i].live_tensors, before[i].live_tensors);
        CHECK_EQ(after[i].reserved, before[i].reserved); /* the cache is reused, not grown */
        CHECK(after[i].alloc_count - before[i].alloc_count >= 10000);
    }
    CHECK_EQ(ts_item(param), 0.5);
    ts_release(param);
    CHECK_EQ(stats(ts_cpu()).live_tensors, before[0].live_tensors - 1);
}

/* ------------------------------------------------------------------ (b) ownership */
static void test_keep(void) {
    const ts_device sim = ts_sim(1);
    int64_t live0 = stats(sim).live_tensors;
    ts_tensor *outer_kept = NULL, *top = NULL;
    ts_scope_begin();
    CHECK_EQ(ts_scope_depth(), 1);
    ts_scope_begin();
    CHECK_EQ(ts_scope_depth(), 2);
    ts_tensor *t = ts_full(TS_SHAPE(4), 3, (ts_opts){.device = sim});
    ts_tensor *gone = ts_zeros(TS_SHAPE(4), (ts_opts){.device = sim});
    (void)gone;
    CHECK(ts_keep(t) == t);
    CHECK_EQ(stats(sim).live_tensors, live0 + 2);
    ts_scope_end(); /* `gone` dies, `t` moves to the outer scope */
    CHECK_EQ(ts_scope_depth(), 1);
    CHECK_EQ(stats(sim).live_tensors, live0 + 1);
    CHECK_EQ(ts_item(ts_select(t, 0, 2)), 3); /* still readable */
    /* keep from a depth of three goes one level up each time */
    ts_scope_begin();
    ts_scope_begin();
    outer_kept = ts_keep(ts_ones(TS_SHAPE(2), (ts_opts){.device = sim}));
    ts_scope_end();
    CHECK(ts_keep(outer_kept) == outer_kept);
    ts_scope_end();
    CHECK_EQ(ts_item(ts_select(outer_kept, 0, 1)), 1);
    /* at depth 1, keep hands the tensor to the caller */
    top = ts_keep(ts_arange(0, 3, 1, (ts_opts){.device = sim}));
    CHECK_EQ(stats(sim).live_tensors, live0 + 3 + 2); /* t, outer_kept, top + two selects */
    ts_scope_end(); /* t, outer_kept and the selects die; top survives */
    CHECK_EQ(ts_scope_depth(), 0);
    CHECK_EQ(stats(sim).live_tensors, live0 + 1);
    CHECK_EQ(ts_numel(top), 3);
    ts_release(top);
    CHECK_EQ(stats(sim).live_tensors, live0);

    /* outside any scope the caller owns what it gets, views included */
    ts_tensor *a = ts_zeros(TS_SHAPE(2, 2), (ts_opts){.device = sim});
    ts_tensor *v = ts_t(a);
    CHECK(ts_keep(a) == a); /* no scope: nothing changes */
    CHECK_EQ(stats(sim).live_tensors, live0 + 2);
    ts_release(a);
    /* the view keeps its base (PyTorch's Tensor._base, autograd/copy_slices.h) and the storage */
    CHECK_EQ(stats(sim).live_tensors, live0 + 2);
    CHECK(stats(sim).allocated > 0);
    ts_release(v);
    CHECK_EQ(stats(sim).live_tensors, live0);
    /* retain/release pair up; NULL is accepted */
    ts_tensor *b = ts_ones(TS_SHAPE(1), (ts_opts){.device = sim});
    CHECK(ts_retain(b) == b);
    ts_release(b);
    CHECK_EQ(ts_item(b), 1);
    CHECK_EQ(stats(sim).live_tensors, live0 + 1);
    ts_release(b);
    CHECK(ts_retain(NULL) == NULL && ts_keep(NULL) == NULL);
    ts_release(NULL);
    CHECK_EQ(stats(sim).live_tensors, live0);
    CHECK_OK();
}

/* ------------------------------------------------------------------ (d) counts across threads
 * Each thread counts the tensors it makes and frees in a table of its own; the statistics sum the
 * tables, and a thread that ends hands its count over. A tensor made on one thread and released on
 * another must leave the sum right, while the thread runs and after it ended. */
typedef struct handover {
    ts_tensor *t[3];
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stage; /* 1: the thread made its tensors; 2: main has counted; 3: the thread released one */
} handover;

static void wait_stage(handover *h, int stage) {
    pthread_mutex_lock(&h->mu);
    while (h->stage < stage) pthread_cond_wait(&h->cv, &h->mu);
    pthread_mutex_unlock(&h->mu);
}
static void set_stage(handover *h, int stage) {
    pthread_mutex_lock(&h->mu);
    h->stage = stage;
    pthread_cond_broadcast(&h->cv);
    pthread_mutex_unlock(&h->mu);
}

static void *maker(void *arg) {
    handover *h = arg;
    for (int i = 0; i < 3; i++) h->t[i] = ts_zeros(TS_SHAPE(4), (ts_opts){0}); /* caller owns */
    set_stage(h, 1);
    wait_stage(h, 2);
    ts_release(h->t[0]); /* one of its own, on this thread */
    h->t[0] = NULL;
    set_stage(h, 3);
    return NULL; /* ends holding a count of +2 for tensors main releases */
}

static void test_live_across_threads(void) {
    const int64_t base = stats(ts_cpu()).live_tensors;
    handover h = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    pthread_t th;
    CHECK_EQ(pthread_create(&th, NULL, maker, &h), 0);
    wait_stage(&h, 1);
    CHECK_EQ(stats(ts_cpu()).live_tensors, base + 3); /* the running thread's table */
    ts_release(h.t[1]);                               /* made there, released here */
    CHECK_EQ(stats(ts_cpu()).live_tensors, base + 2);
    set_stage(&h, 2);
    wait_stage(&h, 3);
    CHECK_EQ(stats(ts_cpu()).live_tensors, base + 1);
    pthread_join(th, NULL);
    CHECK_EQ(stats(ts_cpu()).live_tensors, base + 1); /* the ended thread handed its count over */
    ts_release(h.t[2]);
    CHECK_EQ(stats(ts_cpu()).live_tensors, base);
}

int main(void) {
    test_oom();
    test_live_across_threads();
    test_loop();
    test_keep();
    CHECK_EQ(ts_scope_depth(), 0);
    return ts_test_finish();
}
