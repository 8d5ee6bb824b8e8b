/* collectives.c — the tensor front ends: this rank's own checks, the descriptor the cross-rank
 * check compares, contiguous work buffers, the hand-over to the group's queue; and the item's last
 * steps in the waiter's thread (AVG's division, the copy back into a non-contiguous tensor). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core/profiler_hooks.h"
#include "dist/dist_impl.h"

/* A failure of this rank's own checks, recorded in the item (not yet in the thread's state: with
 * the cross-rank check the item still joins the exchange, so every rank fails together). */
static ts_status local_fail(ts_dist_work *w, ts_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static ts_status local_fail(ts_dist_work *w, ts_status code, const char *fmt, ...) {
    if (w->status != TS_OK) return w->status;
    w->status = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->msg, sizeof w->msg, fmt, ap);
    va_end(ap);
    return code;
}

/* The pending error of this thread (a failed op before: NULL tensor), or TS_ERR_ARG. */
static ts_status null_input(ts_dist_work *w, const char *op, const char *what) {
    if (ts_error() != TS_OK) return local_fail(w, ts_error(), "%s", ts_error_message());
    return local_fail(w, TS_ERR_ARG, "%s: %s is NULL", op, what);
}

static bool on_cuda(const ts_tensor *t) { return t && t->storage->device.type == TS_CUDA; }

static void describe(tsd_desc *d, tsd_kind kind, const ts_tensor *t, const ts_tensor *t2, int op,
                     int root) {
    memset(d, 0, sizeof *d);
    d->kind = kind;
    d->op = op;
    d->root = root;
    d->dtype = t ? (int32_t)t->dtype : -1;
    d->devclass = on_cuda(t) ? 1 : 0;
    if (t) {
        d->ndim = t->shape.ndim;
        for (int i = 0; i < t->shape.ndim; i++) d->dims[i] = t->shape.dims[i];
    }
    d->dtype2 = t2 ? (int32_t)t2->dtype : -1;
    if (t2) {
        d->ndim2 = t2->shape.ndim;
        for (int i = 0; i < t2->shape.ndim; i++) d->dims2[i] = t2->shape.dims[i];
    }
}

static bool writes_t(const ts_dist_work *w) {
    switch (w->kind) {
    case TSD_SEND:
        return false;
    case TSD_REDUCE:
        return w->g->rank == w->root;
    default:
        return true;
    }
}

static bool is_reducing(tsd_kind k) {
    return k == TSD_ALL_REDUCE || k == TSD_REDUCE || k == TSD_REDUCE_SCATTER;
}

/* This rank's own checks and the work buffers; the first failure is recorded in w. */
static void prepare(ts_dist_work *w, const char *op, ts_tensor *t, ts_tensor *t2,
                    ts_dist_reduce_op rop, int root_world) {
    ts_dist_group *g = w->g;
    bool two = w->kind == TSD_ALL_GATHER || w->kind == TSD_REDUCE_SCATTER;
    const char *tname = two ? "output" : "tensor";
    if (!t) {
        null_input(w, op, tname);
        return;
    }
    if (two && !t2) {
        null_input(w, op, "input");
        return;
    }
    if (tsi_device(t).type == TS_META || (t2 && tsi_device(t2).type == TS_META)) {
        local_fail(w, TS_ERR_DEVICE, "%s: %s is a meta tensor: it has no data to communicate", op,
                   tsi_desc(tsi_device(t).type == TS_META ? t : t2));
        return;
    }
#ifndef TSD_HAVE_NCCL
    if (on_cuda(t) || on_cuda(t2)) {
        local_fail(w, TS_ERR_UNSUPPORTED,
                   "%s: %s is a cuda tensor, and collectives on cuda tensors need NCCL (and MPI), "
                   "which this Tessera was built without (move it to the cpu first)",
                   op, tsi_desc(on_cuda(t) ? t : t2));
        return;
    }
#endif
    if (two) {
        if (!tsi_device_eq(tsi_device(t), tsi_device(t2))) {
            local_fail(w, TS_ERR_DEVICE, "%s: output %s and input %s are on different devices", op,
                       tsi_desc(t), tsi_desc(t2));
            return;
        }
        if (t->dtype != t2->dtype) {
            local_fail(w, TS_ERR_DTYPE, "%s: output %s and input %s have different dtypes", op,
                       tsi_desc(t), tsi_desc(t2));
            return;
        }
        int64_t small = w->kind == TSD_ALL_GATHER ? tsi_numel(t2->shape) : tsi_numel(t->shape);
        int64_t big = w->kind == TSD_ALL_GATHER ? tsi_numel(t->shape) : tsi_numel(t2->shape);
        if (big != small * g->size) {
            local_fail(w, TS_ERR_SHAPE,
                       "%s: the %s %s must hold %d (the group size) times the elements of the %s "
                       "%s (%lld), but holds %lld",
                       op, w->kind == TSD_ALL_GATHER ? "output" : "input",
                       tsi_desc(w->kind == TSD_ALL_GATHER ? t : t2), g->size,
                       w->kind == TSD_ALL_GATHER ? "input" : "output",
                       tsi_desc(w->kind == TSD_ALL_GATHER ? t2 : t), (long long)(small * g->size),
                       (long long)big);
            return;
        }
    }
    if (is_reducing(w->kind)) {
        if ((unsigned)rop > TS_DIST_MAX) {
            local_fail(w, TS_ERR_ARG, "%s: unknown reduce op %d", op, (int)rop);
            return;
        }
        if (rop == TS_DIST_AVG && !tsi_is_float(t->dtype)) {
            local_fail(
                w, TS_ERR_DTYPE,
                "%s: AVG is only defined for floating dtypes, but got %s (use SUM and divide)", op,
                tsi_desc(t));
            return;
        }
    }
    if (w->kind == TSD_BROADCAST || w->kind == TSD_REDUCE || tsd_kind_is_p2p(w->kind)) {
        const char *word = w->kind == TSD_BROADCAST || w->kind == TSD_RECV ? "src" : "dst";
        if (root_world < 0 || root_world >= tsd_w.size) {
            local_fail(w, TS_ERR_ARG, "%s: %s %d is not a rank of the world (world size %d)", op,
                       word, root_world, tsd_w.size);
            return;
        }
        w->root = tsd_group_rank_of(g, root_world);
        if (w->root < 0) {
            local_fail(w, TS_ERR_ARG, "%s: %s %d is not a member of %s", op, word, root_world,
                       g->name);
            return;
        }
        if (tsd_kind_is_p2p(w->kind) && w->root == g->rank) {
            local_fail(w, TS_ERR_ARG,
                       "%s: %s %d is this process's own rank (a process cannot %s "
                       "itself)",
                       op, word, root_world, w->kind == TSD_SEND ? "send to" : "receive from");
            return;
        }
    }
    if (tsd_kind_is_p2p(w->kind) && w->tag < 0) {
        local_fail(w, TS_ERR_ARG, "%s: tag must be >= 0, got %d", op, w->tag);
        return;
    }

    /* the buffers: the tensor itself when contiguous, else a contiguous copy (copied back at wait
     * when the op writes it) */
    bool pure_out = w->kind == TSD_RECV || two;
    w->t = ts_retain(t);
    if (tsi_is_contiguous(t))
        w->buf = ts_retain(t);
    else
        w->buf = pure_out ? tsi_new(op, t->shape, t->dtype, tsi_device(t)) : tsi_contiguous(op, t);
    if (two) {
        w->t2 = ts_retain(t2);
        w->buf2 = tsi_contiguous(op, t2);
    }
    if (!w->buf || (two && !w->buf2)) {
        null_input(w, op, "its contiguous copy");
        return;
    }
    w->copy_back = w->buf != t && writes_t(w);
    if (on_cuda(t)) /* the thread's NCCL stream starts after what the caller queued */
        tsi_be(t)->synchronize(tsi_be(t), tsi_dev_index(t));
}

static ts_dist_work *submit(const char *op, tsd_kind kind, ts_tensor *t, ts_tensor *t2,
                            ts_dist_reduce_op rop, int root_world, int tag, ts_dist_group *g,
                            bool checked) {
    g = tsd_group_ready(op, g);
    if (!g) return NULL;
    ts_dist_work *w = tsd_work_new(g, kind);
    if (!w) return NULL;
    w->rop = rop;
    w->tag = tag;
    w->checked = checked && !tsd_kind_is_p2p(kind) && g->size > 1;
    prepare(w, op, t, t2, rop, root_world);
    describe(&w->desc, kind, t, t2, is_reducing(kind) ? (int)rop : -1,
             kind == TSD_BROADCAST || kind == TSD_REDUCE ? root_world : -1);
    if (w->status != TS_OK) {
        if (!w->checked) {
            tsi_error_set(w->status, "%s", w->msg);
            tsd_work_free(w);
            return NULL;
        }
        /* join the exchange anyway, so the other ranks fail with this rank instead of hanging */
        w->desc.bad = (int32_t)w->status;
        size_t len = strlen(w->msg); /* msg is terminated */
        if (len > sizeof w->desc.why - 1) len = sizeof w->desc.why - 1;
        memcpy(w->desc.why, w->msg, len);
        w->desc.why[len] = '\0';
    }
    tsd_enqueue(w);
    return w;
}

void tsd_finish(ts_dist_work *w) {
    if (w->status != TS_OK || !w->buf) return;
    if (w->rop == TS_DIST_AVG && is_reducing(w->kind) && !w->avg_done && writes_t(w) &&
        w->g->size > 1)
        tsi_dist_divide_by_world(w->buf, w->buf, w->g->size);
    if (w->copy_back && tsi_numel(w->t->shape) > 0) {
        ts_kview d = tsi_kview(w->t), s = tsi_kview(w->buf);
        tsi_be(w->t)->copy(tsi_be(w->t), tsi_dev_index(w->t), &d, &s);
    }
    if (writes_t(w)) tsi_bump_version(w->t);
}

static int64_t nbytes(const ts_tensor *t) {
    return t ? tsi_numel(t->shape) * (int64_t)tsi_dtype_size(t->dtype) : 0;
}

/* The profiler's event: the message is the tensor; of all_gather and reduce_scatter the whole
 * (world size x block) tensor, the output of one and the input of the other (the event's shape
 * is that tensor's). */
void tsd_prof_record(const ts_dist_work *w) {
    if (!w->prof_t0 || w->status != TS_OK) return;
    if (w->kind == TSD_GATHER_BYTES || w->kind == TSD_NEW_GROUP) return; /* internal exchanges */
    const ts_tensor *t = w->kind == TSD_REDUCE_SCATTER ? w->t2 : w->t;
    ts_profile_event e = {.kind = TS_PROF_COLLECTIVE,
                          .device = t ? tsi_device(t) : ts_cpu(),
                          .t0_ns = w->prof_t0,
                          .bytes = nbytes(t),
                          .rank = w->g->rank,
                          .world_size = w->g->size};
    snprintf(e.name, sizeof e.name, "%s", tsd_kind_name(w->kind));
    tsi_prof_collective(&e, t);
}

/* ------------------------------------------------------------------ the public forms */
ts_dist_work *ts_dist_all_reduce_async(ts_tensor *t, ts_dist_reduce_op op, ts_dist_group *g) {
    return submit("all_reduce", TSD_ALL_REDUCE, t, NULL, op, -1, 0, g, true);
}
ts_status ts_dist_all_reduce(ts_tensor *t, ts_dist_reduce_op op, ts_dist_group *g) {
    return ts_dist_wait(ts_dist_all_reduce_async(t, op, g));
}

ts_dist_work *ts_dist_broadcast_async(ts_tensor *t, int src, ts_dist_group *g) {
    return submit("broadcast", TSD_BROADCAST, t, NULL, TS_DIST_SUM, src, 0, g, true);
}
ts_status ts_dist_broadcast(ts_tensor *t, int src, ts_dist_group *g) {
    return ts_dist_wait(ts_dist_broadcast_async(t, src, g));
}

ts_dist_work *ts_dist_reduce_async(ts_tensor *t, int dst, ts_dist_reduce_op op, ts_dist_group *g) {
    return submit("reduce", TSD_REDUCE, t, NULL, op, dst, 0, g, true);
}
ts_status ts_dist_reduce(ts_tensor *t, int dst, ts_dist_reduce_op op, ts_dist_group *g) {
    return ts_dist_wait(ts_dist_reduce_async(t, dst, op, g));
}

ts_dist_work *ts_dist_all_gather_async(ts_tensor *out, ts_tensor *in, ts_dist_group *g) {
    return submit("all_gather", TSD_ALL_GATHER, out, in, TS_DIST_SUM, -1, 0, g, true);
}
ts_status ts_dist_all_gather(ts_tensor *out, ts_tensor *in, ts_dist_group *g) {
    return ts_dist_wait(ts_dist_all_gather_async(out, in, g));
}

ts_dist_work *ts_dist_reduce_scatter_async(ts_tensor *out, ts_tensor *in, ts_dist_reduce_op op,
                                           ts_dist_group *g) {
    return submit("reduce_scatter", TSD_REDUCE_SCATTER, out, in, op, -1, 0, g, true);
}
ts_status ts_dist_reduce_scatter(ts_tensor *out, ts_tensor *in, ts_dist_reduce_op op,
                                 ts_dist_group *g) {
    return ts_dist_wait(ts_dist_reduce_scatter_async(out, in, op, g));
}

ts_dist_work *ts_dist_isend(ts_tensor *t, int dst, int tag, ts_dist_group *g) {
    return submit("send", TSD_SEND, t, NULL, TS_DIST_SUM, dst, tag, g, false);
}
ts_dist_work *ts_dist_irecv(ts_tensor *t, int src, int tag, ts_dist_group *g) {
    return submit("recv", TSD_RECV, t, NULL, TS_DIST_SUM, src, tag, g, false);
}
ts_status ts_dist_send(ts_tensor *t, int dst, int tag, ts_dist_group *g) {
    return ts_dist_wait(ts_dist_isend(t, dst, tag, g));
}
ts_status ts_dist_recv(ts_tensor *t, int src, int tag, ts_dist_group *g) {
    return ts_dist_wait(ts_dist_irecv(t, src, tag, g));
}

ts_status ts_dist_barrier(void) {
    ts_dist_group *g = tsd_group_ready("barrier", NULL);
    if (!g) return ts_error();
    ts_dist_work *w = tsd_work_new(g, TSD_BARRIER);
    if (!w) return ts_error();
    w->checked = g->size > 1;
    describe(&w->desc, TSD_BARRIER, NULL, NULL, -1, -1);
    tsd_enqueue(w);
    return ts_dist_wait(w);
}

/* ------------------------------------------------------------------ internal forms (DDP, FSDP) */
ts_dist_work *tsi_dist_all_reduce_unchecked(ts_tensor *t, ts_dist_reduce_op op, ts_dist_group *g) {
    return submit("all_reduce", TSD_ALL_REDUCE, t, NULL, op, -1, 0, g, false);
}

ts_dist_work *tsi_dist_all_gather_unchecked(ts_tensor *out, ts_tensor *in, ts_dist_group *g) {
    return submit("all_gather", TSD_ALL_GATHER, out, in, TS_DIST_SUM, -1, 0, g, false);
}

ts_dist_work *tsi_dist_reduce_scatter_unchecked(ts_tensor *out, ts_tensor *in, ts_dist_reduce_op op,
                                                ts_dist_group *g) {
    return submit("reduce_scatter", TSD_REDUCE_SCATTER, out, in, op, -1, 0, g, false);
}

ts_status tsi_dist_broadcast_unchecked(ts_tensor *t, int src_world_rank, ts_dist_group *g) {
    return ts_dist_wait(
        submit("broadcast", TSD_BROADCAST, t, NULL, TS_DIST_SUM, src_world_rank, 0, g, false));
}

ts_status tsi_dist_all_gather_bytes(const void *in, size_t n, void *out, ts_dist_group *g) {
    static const char *op = "all_gather_bytes";
    g = tsd_group_ready(op, g);
    if (!g) return ts_error();
    if (n && (!in || !out))
        return tsi_error_set(TS_ERR_ARG, "%s: %s is NULL", op, in ? "out" : "in");
    ts_dist_work *w = tsd_work_new(g, TSD_GATHER_BYTES);
    if (!w) return ts_error();
    w->raw_in = in;
    w->raw_out = out;
    w->raw_n = n;
    tsd_enqueue(w);
    return ts_dist_wait(w);
}
