/* fault.c — timeouts, found lazily: nothing is sent while collectives finish in time. A waiter
 * whose collective has run longer than min(1 s, timeout / 4) tells every other member "I am waiting
 * at collective #seq" on the group's monitor communicator; at the timeout it reads what the others
 * announced, and the members that did not announce #seq (or a later one) are the ones named. The
 * group is then broken: every later call fails at once with the same error, and ts_dist_finalize
 * aborts the job (MPI_Abort) so no rank is left behind. */
#define _POSIX_C_SOURCE 200809L /* gethostname, clock_gettime, nanosleep */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist/dist_impl.h"

#define MONITOR_TAG 7001

#ifdef TS_HAVE_MPI
/* one announcement: its value and the sends carrying it, until they complete */
typedef struct tsd_announce {
    struct tsd_announce *next;
    int64_t seq;
    int n;
    MPI_Request reqs[];
} tsd_announce;

/* Frees the announcements whose sends completed (g->mon_mu held). */
static void reap_locked(ts_dist_group *g, bool wait) {
    for (tsd_announce **p = &g->announces; *p;) {
        tsd_announce *a = *p;
        int done = 0;
        if (wait) {
            MPI_Waitall(a->n, a->reqs, MPI_STATUSES_IGNORE); /* 8 bytes each: sent eagerly */
            done = 1;
        } else
            MPI_Testall(a->n, a->reqs, &done, MPI_STATUSES_IGNORE);
        if (done) {
            *p = a->next;
            free(a);
        } else {
            p = &a->next;
        }
    }
}

/* Reads every announcement that arrived (g->mon_mu not held). */
static void drain(ts_dist_group *g) {
    pthread_mutex_lock(&g->mon_mu);
    for (;;) {
        int flag = 0;
        MPI_Status st;
        if (MPI_Iprobe(MPI_ANY_SOURCE, MONITOR_TAG, g->monitor, &flag, &st) != MPI_SUCCESS || !flag)
            break;
        int64_t seq = -1;
        if (MPI_Recv(&seq, 1, MPI_INT64_T, st.MPI_SOURCE, MONITOR_TAG, g->monitor,
                     MPI_STATUS_IGNORE) != MPI_SUCCESS)
            break;
        if (st.MPI_SOURCE >= 0 && st.MPI_SOURCE < g->size && seq > g->peer_seq[st.MPI_SOURCE])
            g->peer_seq[st.MPI_SOURCE] = seq;
    }
    pthread_mutex_unlock(&g->mon_mu);
}

static void announce(ts_dist_group *g, int64_t seq) {
    pthread_mutex_lock(&g->mon_mu);
    reap_locked(g, false);
    tsd_announce *a = malloc(sizeof *a + (size_t)g->size * sizeof(MPI_Request));
    if (a) {
        a->seq = seq;
        a->n = 0;
        for (int r = 0; r < g->size; r++)
            if (r != g->rank &&
                MPI_Isend(&a->seq, 1, MPI_INT64_T, r, MONITOR_TAG, g->monitor, &a->reqs[a->n]) ==
                    MPI_SUCCESS)
                a->n++;
        a->next = g->announces;
        g->announces = a;
    }
    pthread_mutex_unlock(&g->mon_mu);
    g->announced = seq;
    /* read what others announced so far: the unread messages stay bounded over a long run */
    drain(g);
}

void tsd_monitor_free(ts_dist_group *g) {
    if (g->monitor == MPI_COMM_NULL) return;
    pthread_mutex_lock(&g->mon_mu);
    reap_locked(g, true);
    pthread_mutex_unlock(&g->mon_mu);
    drain(g);
}
#else
void tsd_monitor_free(ts_dist_group *g) { (void)g; }
#endif

void tsd_break_locked(ts_dist_group *g, ts_status code, const char *msg) {
    if (atomic_load(&g->broken)) return;
    g->broken_code = code;
    snprintf(g->broken_msg, sizeof g->broken_msg, "%s", msg);
    atomic_store(&g->broken, true);
    pthread_cond_broadcast(&g->cv_done);
}

bool tsd_any_broken(void) {
    if (tsd_w.world && atomic_load(&tsd_w.world->broken)) return true;
    for (ts_dist_group *g = tsd_w.groups; g; g = g->next_group)
        if (atomic_load(&g->broken)) return true;
    return false;
}

/* "rank 2" / "ranks 2, 3" */
static void rank_list(char *buf, size_t n, const int *r, int count) {
    char list[256];
    tsd_format_ranks(list, sizeof list, r, count);
    snprintf(buf, n, "%s %s", count == 1 ? "rank" : "ranks", list);
}

bool tsd_watch(ts_dist_group *g, ts_dist_work *p2p) {
    if (atomic_load(&g->broken)) return true;
    ts_dist_work *r = p2p ? p2p : g->running;
    if (!r || !g->threaded) return false;
    double T = tsd_w.timeout_s, age = tsd_now() - r->t_start;
#ifdef TS_HAVE_MPI
    if (!p2p && g->size > 1 && age > fmin(1.0, T / 4) && g->announced < (int64_t)r->seq)
        announce(g, (int64_t)r->seq);
#endif
    if (age <= T) return false;

    char msg[TSD_MSG_LEN];
    const char *op = tsd_kind_name(r->kind);
    const uint64_t seq = r->seq;
    if (p2p) {
        int peer = g->world_ranks[r->root];
        snprintf(msg, sizeof msg,
                 "%s on %s timed out after %.1f s: rank %d did not %s it (tag %d, rank %d is "
                 "waiting)",
                 op, g->name, T, peer, r->kind == TSD_SEND ? "receive" : "send", r->tag, tsd_w.rank);
    } else {
        int *late = malloc((size_t)g->size * sizeof *late), *waiting = malloc((size_t)g->size * sizeof *waiting);
        int nl = 0, nw = 0;
#ifdef TS_HAVE_MPI
        pthread_mutex_unlock(&g->mu);
        drain(g);
        pthread_mutex_lock(&g->mu);
        if (atomic_load(&g->broken)) {
            free(late);
            free(waiting);
            return true;
        }
        if (!g->running || g->running->seq != seq) { /* it finished meanwhile */
            free(late);
            free(waiting);
            return false;
        }
#endif
        if (late && waiting) {
            for (int m = 0; m < g->size; m++) {
                bool joined = m == g->rank;
#ifdef TS_HAVE_MPI
                joined = joined || g->peer_seq[m] >= (int64_t)seq;
#endif
                if (joined)
                    waiting[nw++] = g->world_ranks[m];
                else
                    late[nl++] = g->world_ranks[m];
            }
        }
        char who[300], wait_list[300];
        rank_list(wait_list, sizeof wait_list, waiting, nw);
        if (nl) {
            rank_list(who, sizeof who, late, nl);
            snprintf(msg, sizeof msg, "%s #%llu on %s timed out after %.1f s: %s did not join it (%s %s waiting)",
                     op, (unsigned long long)seq, g->name, T, who, wait_list, nw == 1 ? "is" : "are");
        } else {
            snprintf(msg, sizeof msg,
                     "%s #%llu on %s timed out after %.1f s: every member joined it but it did not "
                     "finish (%s %s waiting)",
                     op, (unsigned long long)seq, g->name, T, wait_list, nw == 1 ? "is" : "are");
        }
        free(late);
        free(waiting);
    }
    tsd_break_locked(g, TS_ERR_DIST, msg);
    return true;
}
