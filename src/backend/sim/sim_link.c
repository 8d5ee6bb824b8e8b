/* sim_link.c — the simulated host link of sim devices (tessera/sim_link.h): a timeline per device
 * and direction. Copies do their memcpy at once (so results never depend on the model) and are
 * given a modelled start and end on their engine; whoever needs a copy finished sleeps until its
 * end on the monotonic clock. No thread: the engines' time passes while the host computes. */
#define _POSIX_C_SOURCE 200809L /* clock_nanosleep */
#include "backend/sim/sim_link.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/sim/sim_backend.h"
#include "tessera.h"

#define MAX_PENDING 256 /* queued asynchronous copies tracked per device */

typedef struct pending_copy {
    uint64_t uid; /* the destination storage's uid */
    int64_t end;  /* modelled end, monotonic ns */
} pending_copy;

typedef struct dev_link {
    int64_t free_at[2]; /* when each engine (0: h2d, 1: d2h) is free */
    pending_copy pending[MAX_PENDING];
    int n_pending;
    ts_sim_link_stats st;
} dev_link;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static double bandwidth, latency; /* under mu; bandwidth 0: off */
static dev_link links[TS_SIM_MAX_DEVICES];
atomic_bool tsi_sim_link_on;
atomic_int tsi_sim_link_pending;

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void sleep_until(int64_t t) {
    struct timespec ts = {.tv_sec = t / 1000000000, .tv_nsec = t % 1000000000};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
    }
}

static int64_t model_ns(size_t n) {
    return (int64_t)llround((latency + (double)n / bandwidth) * 1e9);
}

/* drops finished copies; under mu */
static void prune(dev_link *l, int64_t now) {
    int k = 0;
    for (int i = 0; i < l->n_pending; i++)
        if (l->pending[i].end > now) l->pending[k++] = l->pending[i];
    atomic_fetch_sub(&tsi_sim_link_pending, l->n_pending - k);
    l->n_pending = k;
}

static int64_t last_end(const dev_link *l) {
    int64_t e = 0;
    for (int i = 0; i < l->n_pending; i++)
        if (l->pending[i].end > e) e = l->pending[i].end;
    return e;
}

/* Sleeps until `until` (when later than now), counting the wait on device index: the modelled
 * wait (until - now), not the time the sleep took (a late wake-up is the host's, not the link's).
 */
static void wait_until(int index, int64_t until) {
    int64_t t0 = now_ns();
    if (until <= t0) return;
    pthread_mutex_lock(&mu);
    links[index].st.wait_ns += until - t0;
    pthread_mutex_unlock(&mu);
    sleep_until(until);
}

bool tsi_sim_link_copy(int index, void *dst, const void *src, size_t n, bool h2d) {
    if (n) memcpy(dst, src, n);
    if (index < 0 || index >= TS_SIM_MAX_DEVICES) return false;
    pthread_mutex_lock(&mu);
    if (bandwidth <= 0) {
        pthread_mutex_unlock(&mu);
        return false;
    }
    dev_link *l = &links[index];
    const int64_t now = now_ns();
    prune(l, now);
    /* stream order: after the device's queued copies */
    int64_t start = last_end(l);
    const int e = h2d ? 0 : 1;
    if (l->free_at[e] > start) start = l->free_at[e];
    if (now > start) start = now;
    const int64_t dur = model_ns(n), end = start + dur;
    l->free_at[e] = end;
    l->st.busy_ns += dur;
    if (h2d)
        l->st.bytes_h2d += n, l->st.copies_h2d++;
    else
        l->st.bytes_d2h += n, l->st.copies_d2h++;
    pthread_mutex_unlock(&mu);
    wait_until(index, end);
    return true;
}

/* Queues a copy on sim:index's engine of that direction (0: h2d, 1: d2h). */
static bool copy_async(int index, uint64_t dst_uid, void *dst, const void *src, size_t n, int e) {
    if (index < 0 || index >= TS_SIM_MAX_DEVICES) return false;
    pthread_mutex_lock(&mu);
    if (bandwidth <= 0) {
        pthread_mutex_unlock(&mu);
        return false;
    }
    dev_link *l = &links[index];
    int64_t now = now_ns();
    prune(l, now);
    while (l->n_pending == MAX_PENDING) { /* the queue is full: wait for its oldest copy */
        int64_t first = l->pending[0].end;
        pthread_mutex_unlock(&mu);
        wait_until(index, first);
        pthread_mutex_lock(&mu);
        now = now_ns();
        prune(l, now);
    }
    if (n) memcpy(dst, src, n);
    const int64_t start = l->free_at[e] > now ? l->free_at[e] : now;
    const int64_t dur = model_ns(n);
    l->free_at[e] = start + dur;
    l->pending[l->n_pending++] = (pending_copy){dst_uid, start + dur};
    atomic_fetch_add(&tsi_sim_link_pending, 1);
    l->st.busy_ns += dur;
    if (e == 0)
        l->st.bytes_h2d += n, l->st.copies_h2d++;
    else
        l->st.bytes_d2h += n, l->st.copies_d2h++;
    l->st.async_copies++;
    pthread_mutex_unlock(&mu);
    return true;
}

bool tsi_sim_link_copy_async(int index, uint64_t dst_uid, void *dst, const void *src, size_t n) {
    return copy_async(index, dst_uid, dst, src, n, 0);
}

bool tsi_sim_link_copy_async_d2h(int index, uint64_t dst_uid, void *dst, const void *src,
                                 size_t n) {
    return copy_async(index, dst_uid, dst, src, n, 1);
}

void tsi_sim_link_wait_uid(int index, uint64_t uid) {
    if (index < 0 || index >= TS_SIM_MAX_DEVICES) return;
    pthread_mutex_lock(&mu);
    dev_link *l = &links[index];
    prune(l, now_ns());
    int64_t end = 0;
    for (int i = 0; i < l->n_pending; i++)
        if (l->pending[i].uid == uid && l->pending[i].end > end) end = l->pending[i].end;
    pthread_mutex_unlock(&mu);
    wait_until(index, end);
}

void tsi_sim_link_sync(int index) {
    if (index < 0 || index >= TS_SIM_MAX_DEVICES) return;
    pthread_mutex_lock(&mu);
    dev_link *l = &links[index];
    int64_t end = last_end(l);
    pthread_mutex_unlock(&mu);
    wait_until(index, end);
    pthread_mutex_lock(&mu);
    prune(l, now_ns());
    pthread_mutex_unlock(&mu);
}

/* ------------------------------------------------------------------ for the public API */
void tsi_sim_link_set_params(double bw, double lat) {
    if (bw == 0)
        for (int i = 0; i < TS_SIM_MAX_DEVICES; i++) tsi_sim_link_sync(i); /* none left queued */
    pthread_mutex_lock(&mu);
    bandwidth = bw;
    latency = bw == 0 ? 0 : lat;
    atomic_store(&tsi_sim_link_on, bw > 0);
    pthread_mutex_unlock(&mu);
}

bool tsi_sim_link_params(double *bw, double *lat) {
    pthread_mutex_lock(&mu);
    if (bw) *bw = bandwidth;
    if (lat) *lat = latency;
    bool on = bandwidth > 0;
    pthread_mutex_unlock(&mu);
    return on;
}

void tsi_sim_link_stats_read(int index, ts_sim_link_stats *out) {
    pthread_mutex_lock(&mu);
    *out = links[index].st;
    pthread_mutex_unlock(&mu);
}

void tsi_sim_link_stats_clear(int index) {
    pthread_mutex_lock(&mu);
    for (int i = 0; i < TS_SIM_MAX_DEVICES; i++)
        if (index == -1 || i == index) memset(&links[i].st, 0, sizeof links[i].st);
    pthread_mutex_unlock(&mu);
}
