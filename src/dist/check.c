/* check.c — the cross-rank check before a collective moves data: every member all-gathers a small
 * fixed-size descriptor of its call and compares the others' with its own. Every rank sees the same
 * descriptors, so all take the same branch: all fail (each naming a rank that differs from it and
 * both calls) or all go on, and no rank is left waiting inside the data collective. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist/dist_impl.h"

#ifdef TS_HAVE_MPI
/* "float32 [3, 4]" (the device class only where it matters: "on cuda") */
static void desc_tensor(char *buf, size_t n, int32_t dtype, int ndim, const int64_t *dims,
                        int32_t devclass) {
    size_t used = (size_t)snprintf(
        buf, n, "%s [",
        dtype >= 0 && dtype < TS_DTYPE_COUNT ? ts_dtype_name((ts_dtype)dtype) : "?");
    for (int i = 0; i < ndim && i < TS_MAX_DIMS && used < n; i++)
        used += (size_t)snprintf(buf + used, n - used, i ? ", %lld" : "%lld", (long long)dims[i]);
    if (used < n) used += (size_t)snprintf(buf + used, n - used, "]");
    if (devclass && used < n) snprintf(buf + used, n - used, " on cuda");
}

static bool same_shape(int ndim_a, const int64_t *a, int ndim_b, const int64_t *b) {
    if (ndim_a != ndim_b) return false;
    for (int i = 0; i < ndim_a; i++)
        if (a[i] != b[i]) return false;
    return true;
}

static const char *root_word(tsd_kind k) { return k == TSD_REDUCE ? "dst" : "src"; }

/* The first difference between rank r's call (o) and this rank's (m), into w. */
static bool compare(ts_dist_work *w, int r_world, const tsd_desc *o, const tsd_desc *m) {
    const char *op = tsd_kind_name((tsd_kind)m->kind);
    int me = tsd_w.rank;
    if (o->bad) {
        tsd_work_fail(w, (ts_status)o->bad,
                      "%s: rank %d failed its own check, so no rank ran it: %s", op, r_world,
                      o->why);
        return false;
    }
    if (o->kind != m->kind) {
        tsd_work_fail(w, TS_ERR_DIST,
                      "%s: rank %d called %s but rank %d called %s (every rank must call the same "
                      "collectives in the same order)",
                      op, r_world, tsd_kind_name((tsd_kind)o->kind), me, op);
        return false;
    }
    if (m->kind == TSD_NEW_GROUP) {
        if (strcmp(o->why, m->why) != 0 || o->dims[0] != m->dims[0] || o->dims[1] != m->dims[1]) {
            tsd_work_fail(w, TS_ERR_ARG,
                          "new_group: rank %d passed world ranks [%s] but rank %d passed [%s]",
                          r_world, o->why, me, m->why);
            return false;
        }
        return true;
    }
    bool two = m->kind == TSD_ALL_GATHER || m->kind == TSD_REDUCE_SCATTER;
    char a[160], b[160];
    if (o->devclass != m->devclass || o->dtype != m->dtype ||
        !same_shape(o->ndim, o->dims, m->ndim, m->dims)) {
        desc_tensor(a, sizeof a, o->dtype, o->ndim, o->dims, o->devclass);
        desc_tensor(b, sizeof b, m->dtype, m->ndim, m->dims, m->devclass);
        ts_status code = o->devclass != m->devclass ? TS_ERR_DEVICE
                         : o->dtype != m->dtype     ? TS_ERR_DTYPE
                                                    : TS_ERR_SHAPE;
        tsd_work_fail(w, code, "%s: rank %d passed %s%s but rank %d passed %s", op, r_world,
                      two ? "output " : "", a, me, b);
        return false;
    }
    if (two && (o->dtype2 != m->dtype2 || !same_shape(o->ndim2, o->dims2, m->ndim2, m->dims2))) {
        desc_tensor(a, sizeof a, o->dtype2, o->ndim2, o->dims2, o->devclass);
        desc_tensor(b, sizeof b, m->dtype2, m->ndim2, m->dims2, m->devclass);
        tsd_work_fail(w, o->dtype2 != m->dtype2 ? TS_ERR_DTYPE : TS_ERR_SHAPE,
                      "%s: rank %d passed input %s but rank %d passed input %s", op, r_world, a, me,
                      b);
        return false;
    }
    if (o->op != m->op) {
        tsd_work_fail(w, TS_ERR_ARG, "%s: rank %d passed op %s but rank %d passed op %s", op,
                      r_world, tsd_reduce_op_name((ts_dist_reduce_op)o->op), me,
                      tsd_reduce_op_name((ts_dist_reduce_op)m->op));
        return false;
    }
    if (o->root != m->root) {
        tsd_work_fail(w, TS_ERR_ARG, "%s: rank %d passed %s %d but rank %d passed %s %d", op,
                      r_world, root_word((tsd_kind)m->kind), o->root, me,
                      root_word((tsd_kind)m->kind), m->root);
        return false;
    }
    return true;
}
#endif

bool tsd_check_exchange(ts_dist_work *w) {
    ts_dist_group *g = w->g;
    if (g->size == 1) return !w->desc.bad;
#ifdef TS_HAVE_MPI
    tsd_desc *all = g->check_buf; /* made when the group started: no allocation can fail here */
    if (!all) {
        /* cannot take part: the others time out naming this rank */
        tsd_work_fail(w, TS_ERR_OOM, "%s: out of host memory", tsd_kind_name(w->kind));
        return false;
    }
    int rc = MPI_Allgather(&w->desc, (int)sizeof w->desc, MPI_BYTE, all, (int)sizeof w->desc,
                           MPI_BYTE, g->comm);
    if (rc != MPI_SUCCESS) {
        tsd_mpi_fail(w, "MPI_Allgather (the cross-rank check)", rc);
        return false;
    }
    bool ok = !w->desc.bad; /* this rank's own error is already the item's */
    for (int r = 0; r < g->size && ok; r++)
        if (r != g->rank) ok = compare(w, g->world_ranks[r], &all[r], &w->desc);
    return ok;
#else
    return !w->desc.bad;
#endif
}
