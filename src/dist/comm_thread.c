/* comm_thread.c — each process group's communication thread and its FIFO work queue: calls from any
 * thread enqueue, the thread executes items in call order (so every rank issues its MPI calls in
 * the same order), ts_dist_wait / ts_dist_test watch an item and finish it in the caller's thread.
 */
#define _POSIX_C_SOURCE 200809L /* gethostname, clock_gettime, nanosleep */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/profiler_hooks.h"
#include "dist/dist_impl.h"

/* ------------------------------------------------------------------ items */
ts_dist_work *tsd_work_new(ts_dist_group *g, tsd_kind kind) {
    ts_dist_work *w = calloc(1, sizeof *w);
    /* out of host memory: the spare, so this rank still joins the collective the others enter */
    if (!w && g->spare && !atomic_exchange(&g->spare_busy, true)) {
        w = g->spare;
        memset(w, 0, sizeof *w);
    }
    if (!w) {
        tsi_error_set(TS_ERR_OOM, "%s: out of host memory", tsd_kind_name(kind));
        return NULL;
    }
    w->g = g;
    w->kind = kind;
    w->refs = 1;
    w->state = TSD_QUEUED;
    w->root = -1;
#ifdef TS_HAVE_MPI
    w->req = MPI_REQUEST_NULL;
#endif
    if (tsi_prof_active()) w->prof_t0 = tsi_prof_now(); /* its submission */
    return w;
}

void tsd_work_free(ts_dist_work *w) {
    if (!w) return;
    ts_release(w->t);
    ts_release(w->t2);
    ts_release(w->buf);
    ts_release(w->buf2);
    if (w == w->g->spare)
        atomic_store(&w->g->spare_busy, false);
    else
        free(w);
}

bool tsd_work_unref_locked(ts_dist_work *w) {
    if (--w->refs > 0) return false;
    tsd_work_free(w);
    return true;
}

void tsd_work_fail(ts_dist_work *w, ts_status code, const char *fmt, ...) {
    if (w->status != TS_OK) return;
    w->status = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->msg, sizeof w->msg, fmt, ap);
    va_end(ap);
}

/* ------------------------------------------------------------------ the thread */
/* The item's end (g->mu held): a posted point-to-point item stays with its waiter. */
static void finished_locked(ts_dist_group *g, ts_dist_work *w) {
    w->t_end = tsd_now();
    w->state = w->posted ? TSD_POSTED : TSD_DONE;
    if (g->running == w) g->running = NULL;
    g->outstanding--;
    pthread_cond_broadcast(&g->cv_done);
    tsd_work_unref_locked(w); /* the thread's (or the inline run's) reference */
}

static void run_one(ts_dist_group *g, ts_dist_work *w) {
    /* a broken group moves no more data: the item fails with the group's error */
    if (atomic_load(&g->broken)) {
        pthread_mutex_lock(&g->mu);
        tsd_work_fail(w, g->broken_code, "%s", g->broken_msg);
        pthread_mutex_unlock(&g->mu);
    } else {
        tsd_execute(w);
    }
}

/* Runs one item outside the lock (g->mu held on entry and on return). */
static void execute_locked(ts_dist_group *g, ts_dist_work *w) {
    w->state = TSD_RUNNING;
    w->t_start = tsd_now();
    g->running = w;
    pthread_mutex_unlock(&g->mu);
    run_one(g, w);
    if (!w->posted) tsd_prof_record(w); /* before its waiter can see it done */
    pthread_mutex_lock(&g->mu);
    finished_locked(g, w);
}

static void *thread_main(void *arg) {
    ts_dist_group *g = arg;
    pthread_mutex_lock(&g->mu);
    for (;;) {
        while (!g->head && !g->stop) pthread_cond_wait(&g->cv_work, &g->mu);
        if (!g->head) break;
        ts_dist_work *w = g->head;
        g->head = w->next;
        if (!g->head) g->tail = NULL;
        w->next = NULL;
        execute_locked(g, w);
    }
    pthread_mutex_unlock(&g->mu);
    return NULL;
}

ts_status tsd_group_start(ts_dist_group *g) {
    if (!tsd_reserve_init(g)) return tsi_error_set(TS_ERR_OOM, "ts_dist_init: out of host memory");
#ifdef TS_HAVE_MPI
    if (g->comm != MPI_COMM_NULL) {
        g->peer_seq = malloc((size_t)g->size * sizeof *g->peer_seq);
        if (!g->peer_seq) return tsi_error_set(TS_ERR_OOM, "ts_dist_init: out of host memory");
        for (int i = 0; i < g->size; i++) g->peer_seq[i] = -1;
    }
#endif
    g->threaded = tsd_w.mpi && tsd_w.multiple;
    if (!g->threaded) return TS_OK;
    if (pthread_create(&g->thread, NULL, thread_main, g) != 0)
        return tsi_error_set(TS_ERR_DIST, "ts_dist_init: cannot start the communication thread");
    g->thread_started = true;
    return TS_OK;
}

void tsd_enqueue(ts_dist_work *w) {
    ts_dist_group *g = w->g;
    pthread_mutex_lock(&g->mu);
    w->refs++; /* the thread's */
    g->outstanding++;
    if (!tsd_kind_is_p2p(w->kind)) g->seq++;
    w->seq = g->seq;
    if (!g->threaded) {
        /* no thread (a world of one, or MPI without MPI_THREAD_MULTIPLE): run it now */
        execute_locked(g, w);
        pthread_mutex_unlock(&g->mu);
        return;
    }
    if (g->tail)
        g->tail->next = w;
    else
        g->head = w;
    g->tail = w;
    pthread_cond_signal(&g->cv_work);
    pthread_mutex_unlock(&g->mu);
}

/* ------------------------------------------------------------------ waiting */
static void add_seconds(struct timespec *ts, double s) {
    clock_gettime(CLOCK_REALTIME, ts);
    long long ns = ts->tv_nsec + (long long)(s * 1e9);
    ts->tv_sec += (time_t)(ns / 1000000000LL);
    ts->tv_nsec = (long)(ns % 1000000000LL);
}

/* A posted point-to-point item: MPI_Test (g->mu held). */
static void p2p_poll_locked(ts_dist_work *w) {
#ifdef TS_HAVE_MPI
    int flag = 0;
    MPI_Status st;
    int rc = MPI_Test(&w->req, &flag, &st);
    if (rc != MPI_SUCCESS) {
        tsd_mpi_fail(w, w->kind == TSD_SEND ? "MPI_Isend" : "MPI_Irecv", rc);
        flag = 1;
    } else if (flag && w->kind == TSD_RECV) {
        int count = 0;
        MPI_Get_count(&st, MPI_BYTE, &count);
        size_t want = w->buf ? (size_t)tsi_numel(w->buf->shape) * tsi_dtype_size(w->buf->dtype) : 0;
        if ((size_t)count != want)
            tsd_work_fail(w, TS_ERR_SHAPE,
                          "recv: rank %d sent %d bytes but this rank expected %zu (%s)",
                          w->g->world_ranks[w->root], count, want, tsi_desc(w->t));
    }
    if (flag) {
        w->state = TSD_DONE;
        w->t_end = tsd_now();
        tsd_prof_record(w); /* a posted request completes here, in the thread that tests it */
    }
#else
    (void)w;
#endif
}

/* Whether the item finished, one look (g->mu held). */
static bool done_locked(ts_dist_work *w) {
    if (w->state == TSD_POSTED) p2p_poll_locked(w);
    return w->state == TSD_DONE;
}

/* The error of an item given up on (g->mu held): the group's, and the item is abandoned. */
static ts_status give_up_locked(ts_dist_work *w) {
    ts_dist_group *g = w->g;
    ts_status code = g->broken_code;
    char msg[TSD_MSG_LEN];
    snprintf(msg, sizeof msg, "%s", g->broken_msg);
    w->abandoned = true;
    /* a posted request may still write into its buffer: it and its tensors are left alone (the
     * job aborts at ts_dist_finalize) */
    if (w->state != TSD_POSTED) tsd_work_unref_locked(w);
    pthread_mutex_unlock(&g->mu);
    tsi_error_set(code, "%s", msg);
    return code;
}

ts_status ts_dist_wait(ts_dist_work *w) { return tsi_dist_wait_busy(w, NULL); }

ts_status tsi_dist_wait_busy(ts_dist_work *w, double *busy_s) {
    if (busy_s) *busy_s = 0;
    if (!w) return ts_error();
    ts_dist_group *g = w->g;
    pthread_mutex_lock(&g->mu);
    double backoff = 20e-6;
    while (!done_locked(w)) {
        if (tsd_watch(g, w->state == TSD_POSTED ? w : NULL)) return give_up_locked(w);
        struct timespec ts;
        if (w->state == TSD_POSTED) {
            /* MPI progresses the request while we test it: poll, backing off to 1 ms */
            add_seconds(&ts, backoff);
            backoff = backoff * 2 < 1e-3 ? backoff * 2 : 1e-3;
        } else {
            add_seconds(&ts, 0.05);
        }
        int rc = pthread_cond_timedwait(&g->cv_done, &g->mu, &ts);
        (void)rc;
    }
    pthread_mutex_unlock(&g->mu);
    tsd_finish(w);
    ts_status st = w->status;
    if (busy_s && st == TS_OK) *busy_s = w->t_end - w->t_start;
    if (st != TS_OK) tsi_error_set(st, "%s", w->msg);
    pthread_mutex_lock(&g->mu);
    tsd_work_unref_locked(w);
    pthread_mutex_unlock(&g->mu);
    return st;
}

bool ts_dist_test(ts_dist_work *w) {
    if (!w) return true;
    ts_dist_group *g = w->g;
    pthread_mutex_lock(&g->mu);
    bool done = done_locked(w) || tsd_watch(g, w->state == TSD_POSTED ? w : NULL);
    pthread_mutex_unlock(&g->mu);
    return done;
}

double tsi_dist_work_busy_s(ts_dist_work *w) {
    if (!w) return 0;
    pthread_mutex_lock(&w->g->mu);
    double s = w->state == TSD_DONE ? w->t_end - w->t_start : 0;
    pthread_mutex_unlock(&w->g->mu);
    return s;
}

bool tsd_group_stop(ts_dist_group *g) {
    pthread_mutex_lock(&g->mu);
    while (g->outstanding > 0 || g->head) {
        if (tsd_watch(g, NULL)) break;
        struct timespec ts;
        add_seconds(&ts, 0.05);
        pthread_cond_timedwait(&g->cv_done, &g->mu, &ts);
    }
    bool ok = !atomic_load(&g->broken);
    if (ok && g->thread_started) {
        g->stop = true;
        pthread_cond_signal(&g->cv_work);
    }
    pthread_mutex_unlock(&g->mu);
    if (ok && g->thread_started) {
        pthread_join(g->thread, NULL);
        g->thread_started = false;
    }
    return ok;
}
