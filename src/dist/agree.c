/* agree.c — every member of a group says whether it succeeded, and with what error, so that a
 * failure on one rank ends the same call on every rank instead of leaving the others waiting in a
 * collective the failed rank skips (FSDP's construction and checkpoints). Allocation-free once the
 * group started: the records live in the group, the work item falls back to the group's spare. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist/dist_impl.h"

#define AGREE_MSG 480

typedef struct agree_rec {
    int32_t status;
    char msg[AGREE_MSG];
} agree_rec;

bool tsd_reserve_init(ts_dist_group *g) {
    if (!g->agree_buf) g->agree_buf = calloc((size_t)g->size, sizeof(agree_rec));
    if (!g->spare) g->spare = calloc(1, sizeof *g->spare);
    if (!g->check_buf) g->check_buf = calloc((size_t)g->size, sizeof *g->check_buf);
    return g->agree_buf && g->spare && g->check_buf;
}

void tsd_reserve_free(ts_dist_group *g) {
    free(g->agree_buf);
    free(g->check_buf);
    g->check_buf = NULL;
    /* a spare still in use was abandoned by a waiter that timed out (the job aborts at finalize) */
    if (!atomic_load(&g->spare_busy)) free(g->spare);
    g->agree_buf = NULL;
    g->spare = NULL;
}

bool tsi_dist_agree(const char *op, bool ok, ts_dist_group *g) {
    agree_rec mine = {0};
    ts_status own = ts_error();
    if (!ok && !own) own = TS_ERR_STATE;
    mine.status = (int32_t)own;
    if (own) snprintf(mine.msg, sizeof mine.msg, "%s", ts_error_message());
    if (ts_dist_group_size(g) <= 1) {
        ts_error_clear(); /* a world of one: no group to ask (and ts_dist_init maybe not called) */
        if (own) tsi_error_set(own, "%s", mine.msg);
        return !own;
    }
    ts_error_clear();
    ts_dist_group *grp = tsd_group_ready(op ? op : "agree", g);
    if (!grp) { /* the group itself failed: that error is what the caller sees */
        if (own && ts_error() == TS_OK) tsi_error_set(own, "%s", mine.msg);
        return false;
    }
    pthread_mutex_lock(&grp->agree_mu);
    agree_rec *all = grp->agree_buf;
    ts_status st = all ? tsi_dist_all_gather_bytes(&mine, sizeof mine, all, grp) : TS_ERR_OOM;
    int bad = -1;
    for (int r = 0; !st && r < grp->size && bad < 0; r++)
        if (all[r].status) bad = r;
    if (st) {
        if (!ts_error()) tsi_error_set(st, "%s: out of host memory", op ? op : "agree");
    } else if (own) {
        tsi_error_set(own, "%s", mine.msg);
    } else if (bad >= 0 && op) {
        tsi_error_set((ts_status)all[bad].status, "%s: rank %d failed: %.*s", op,
                      grp->world_ranks[bad], AGREE_MSG - 64, all[bad].msg);
    } else if (bad >= 0) {
        tsi_error_set((ts_status)all[bad].status, "%s", all[bad].msg);
    }
    pthread_mutex_unlock(&grp->agree_mu);
    return !st && bad < 0;
}
