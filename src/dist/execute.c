/* execute.c — what the communication thread does with a work item: the cross-rank check, then the
 * data movement with the blocking MPI collectives (point to point is posted non-blocking, so a ring
 * of isend/irecv cannot deadlock the thread; the waiter completes it). A world of one without MPI
 * moves data locally. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist/dist_impl.h"


static size_t numel(ts_tensor *t) { return t ? (size_t)tsi_numel(t->shape) : 0; }

/* out <- in, flat (both contiguous, same dtype and numel): a world of one's gather and scatter */
static void local_copy(ts_tensor *out, ts_tensor *in) {
    size_t n = numel(in);
    if (n == 0) return;
    ts_kview d = tsi_kview(out), s = tsi_kview(in);
    d.ndim = s.ndim = 1;
    d.shape[0] = s.shape[0] = (int64_t)n;
    d.strides[0] = s.strides[0] = 1;
    tsi_be(out)->copy(tsi_be(out), tsi_dev_index(out), &d, &s);
}

#ifdef TS_HAVE_MPI
static char empty_byte;

static char *data_of(ts_tensor *t) {
    if (!t || tsi_numel(t->shape) == 0) return &empty_byte;
    return t->storage->data + t->offset * (int64_t)tsi_dtype_size(t->dtype);
}

/* MPI counts are int: large buffers go in chunks (elementwise ops only) */
#define CHUNK ((size_t)1 << 30)

static void exec_mpi(ts_dist_work *w) {
    ts_dist_group *g = w->g;
    MPI_Comm comm = g->comm;
    int rc = MPI_SUCCESS;
    const char *call = "";
    ts_tensor *b = w->buf;
    MPI_Datatype type = b ? tsd_mpi_type(b->dtype) : MPI_BYTE;
    size_t esize = b ? tsi_dtype_size(b->dtype) : 1;
    switch (w->kind) {
    case TSD_ALL_REDUCE:
    case TSD_BROADCAST:
    case TSD_REDUCE: {
        MPI_Op op = tsd_mpi_op(w->rop, b->dtype);
        char *p = data_of(b);
        size_t n = numel(b);
        do {
            int c = (int)(n < CHUNK ? n : CHUNK);
            if (w->kind == TSD_ALL_REDUCE) {
                call = "MPI_Allreduce";
                rc = MPI_Allreduce(MPI_IN_PLACE, p, c, type, op, comm);
            } else if (w->kind == TSD_BROADCAST) {
                call = "MPI_Bcast";
                rc = MPI_Bcast(p, c, type, w->root, comm);
            } else {
                call = "MPI_Reduce";
                rc = g->rank == w->root ? MPI_Reduce(MPI_IN_PLACE, p, c, type, op, w->root, comm)
                                        : MPI_Reduce(p, NULL, c, type, op, w->root, comm);
            }
            p += (size_t)c * esize;
            n -= (size_t)c;
        } while (n > 0 && rc == MPI_SUCCESS);
        break;
    }
    case TSD_ALL_GATHER: {
        size_t n = numel(w->buf2);
        if (n > INT_MAX) {
            tsd_work_fail(w, TS_ERR_UNSUPPORTED, "all_gather: %zu elements per rank exceed MPI's "
                                                 "count limit (%d)", n, INT_MAX);
            return;
        }
        call = "MPI_Allgather";
        char *out = data_of(b), *in = data_of(w->buf2);
        /* the input may be this rank's block of the output itself (PyTorch allows it) */
        const void *send = in == out + (size_t)g->rank * n * esize && n ? MPI_IN_PLACE : in;
        rc = MPI_Allgather(send, (int)n, type, out, (int)n, type, comm);
        break;
    }
    case TSD_REDUCE_SCATTER: {
        size_t n = numel(b);
        if (n > INT_MAX) {
            tsd_work_fail(w, TS_ERR_UNSUPPORTED, "reduce_scatter: %zu elements per rank exceed "
                                                 "MPI's count limit (%d)", n, INT_MAX);
            return;
        }
        call = "MPI_Reduce_scatter_block";
        rc = MPI_Reduce_scatter_block(data_of(w->buf2), data_of(b), (int)n, type,
                                      tsd_mpi_op(w->rop, b->dtype), comm);
        break;
    }
    case TSD_SEND:
    case TSD_RECV: {
        size_t n = numel(b);
        if (n > INT_MAX) {
            tsd_work_fail(w, TS_ERR_UNSUPPORTED, "%s: %zu elements exceed MPI's count limit (%d)",
                          tsd_kind_name(w->kind), n, INT_MAX);
            return;
        }
        call = w->kind == TSD_SEND ? "MPI_Isend" : "MPI_Irecv";
        rc = w->kind == TSD_SEND ? MPI_Isend(data_of(b), (int)n, type, w->root, w->tag, comm, &w->req)
                                 : MPI_Irecv(data_of(b), (int)n, type, w->root, w->tag, comm, &w->req);
        break;
    }
    case TSD_BARRIER:
        call = "MPI_Barrier";
        rc = MPI_Barrier(comm);
        break;
    case TSD_GATHER_BYTES:
        if (w->raw_n > INT_MAX) {
            tsd_work_fail(w, TS_ERR_UNSUPPORTED, "all_gather_bytes: %zu bytes exceed MPI's count "
                                                 "limit (%d)", w->raw_n, INT_MAX);
            return;
        }
        call = "MPI_Allgather";
        rc = MPI_Allgather(w->raw_n ? w->raw_in : &empty_byte, (int)w->raw_n, MPI_BYTE,
                           w->raw_out ? w->raw_out : &empty_byte, (int)w->raw_n, MPI_BYTE, comm);
        break;
    case TSD_NEW_GROUP: {
        ts_dist_group *ng = w->new_group;
        MPI_Comm nc = MPI_COMM_NULL;
        call = "MPI_Comm_split";
        rc = MPI_Comm_split(comm, ng->rank >= 0 ? 0 : MPI_UNDEFINED, ng->rank, &nc);
        if (rc == MPI_SUCCESS && ng->rank >= 0) {
            call = "MPI_Comm_dup";
            rc = MPI_Comm_dup(nc, &ng->monitor);
            if (rc == MPI_SUCCESS) {
                MPI_Comm_set_errhandler(nc, MPI_ERRORS_RETURN);
                MPI_Comm_set_errhandler(ng->monitor, MPI_ERRORS_RETURN);
                ng->comm = nc;
            } else {
                MPI_Comm_free(&nc);
            }
        }
        break;
    }
    case TSD_KIND_COUNT: break;
    }
    if (rc != MPI_SUCCESS)
        tsd_mpi_fail(w, call, rc);
    else if (tsd_kind_is_p2p(w->kind))
        w->posted = true;
}
#endif

static void exec_local(ts_dist_work *w) {
    switch (w->kind) {
    case TSD_ALL_GATHER:
    case TSD_REDUCE_SCATTER: local_copy(w->buf, w->buf2); break;
    case TSD_GATHER_BYTES:
        if (w->raw_n) memmove(w->raw_out, w->raw_in, w->raw_n);
        break;
    default: break; /* one rank: reduce, broadcast and barrier leave everything as it is */
    }
}

void tsd_execute(ts_dist_work *w) {
    if (w->checked && !tsd_check_exchange(w)) return;
    if (w->status != TS_OK) return;
#ifdef TS_HAVE_MPI
    if (w->g->comm != MPI_COMM_NULL) {
#ifdef TSD_HAVE_NCCL
        if (w->buf && w->buf->storage->device.type == TS_CUDA) {
            tsd_nccl_execute(w);
            return;
        }
#endif
        exec_mpi(w);
        return;
    }
#endif
    exec_local(w);
}
