/* profiler_kernel.c — device time of the ops on sim and cuda devices (TS_PROF_KERNEL spans): the
 * outermost op on such a device is marked on its current stream where it starts and where it
 * ends. A sim device runs its kernels in the calling thread, so its marks are host times; a cuda
 * device's are timing events (tsc_prof_mark), read at the stop and placed on the host clock
 * through one reference mark a device and session, taken when the device's stream was idle (the
 * mark waited for, then the host time read). */
#include <pthread.h>
#include <stdlib.h>

#include "backend/cuda/cuda_bridge.h"
#include "core/profiler_internal.h"

#define MAX_CUDA 64

typedef struct ref_mark {
    uint64_t gen, mark;
    int64_t host_ns;
} ref_mark;
static ref_mark refs[MAX_CUDA];
static pthread_mutex_t ref_mu = PTHREAD_MUTEX_INITIALIZER;

uint64_t tsi_prof_kernel_mark(ts_device d, uint64_t gen, int64_t now) {
    if (d.type == TS_SIM) return (uint64_t)now;
    if (d.type != TS_CUDA || d.index < 0 || d.index >= MAX_CUDA) return 0;
    pthread_mutex_lock(&ref_mu);
    ref_mark *r = &refs[d.index];
    if (r->gen != gen) { /* this device's first mark of the session: its reference first */
        tsc_prof_mark_free(r->mark);
        r->mark = tsc_prof_mark(d.index);
        bool ok = r->mark && tsc_prof_elapsed_ns(r->mark, r->mark) == 0;
        r->host_ns = tsi_prof_now();
        r->gen = ok ? gen : 0;
        if (!ok) tsc_prof_mark_free(r->mark), r->mark = 0;
    }
    bool have_ref = r->gen == gen;
    pthread_mutex_unlock(&ref_mu);
    return have_ref ? tsc_prof_mark(d.index) : 0;
}

bool tsi_prof_kernel_times(tsi_prof_kmark *k, uint64_t gen) {
    if (k->ev.device.type == TS_SIM) {
        k->ev.t0_ns = (int64_t)k->m0, k->ev.t1_ns = (int64_t)k->m1;
        return k->m1 >= k->m0;
    }
    int64_t from_ref = -1, dur = -1, host = 0;
    pthread_mutex_lock(&ref_mu);
    const ref_mark *r = &refs[k->ev.device.index];
    if (r->gen == gen) {
        from_ref = tsc_prof_elapsed_ns(r->mark, k->m0);
        host = r->host_ns;
    }
    pthread_mutex_unlock(&ref_mu);
    if (from_ref >= 0) dur = tsc_prof_elapsed_ns(k->m0, k->m1);
    tsc_prof_mark_free(k->m0);
    tsc_prof_mark_free(k->m1);
    k->m0 = k->m1 = 0;
    if (from_ref < 0 || dur < 0) return false;
    k->ev.t0_ns = host + from_ref;
    k->ev.t1_ns = k->ev.t0_ns + dur;
    return true;
}

void tsi_prof_kmarks_drop(tsi_prof_thread *t) {
    for (size_t i = 0; i < t->n_km; i++) {
        if (t->km[i].ev.device.type != TS_CUDA) continue;
        tsc_prof_mark_free(t->km[i].m0);
        tsc_prof_mark_free(t->km[i].m1);
    }
    t->n_km = 0;
}
