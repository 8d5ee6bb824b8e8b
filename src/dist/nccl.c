/* nccl.c — collectives on cuda tensors through NCCL (built only with TS_HAVE_CUDA, TS_HAVE_NCCL and
 * MPI): one communicator per group per device, made on the group's first cuda collective from a
 * unique id that the group's rank 0 broadcasts over MPI (in the communication thread, so in call
 * order on every rank). Each communicator has its own stream; the front end synchronised the
 * caller's stream before handing the item over, and the thread polls the NCCL stream until the
 * operation finished (watching for a broken group), so a finished item needs no further sync.
 * Every rank must use one device per group. Point to point runs synchronously in the thread: post
 * matching sends and receives in an order that cannot deadlock (or use cpu tensors). */
#define _POSIX_C_SOURCE 200809L /* gethostname, clock_gettime, nanosleep */
#include "dist/dist_impl.h"

#ifdef TSD_HAVE_NCCL

#include <stdlib.h>
#include <string.h>
#include <time.h>

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <cuda_runtime_api.h>
#include <nccl.h>

#include "backend/nccl_dtype.h"
#pragma GCC diagnostic pop

#define NCCL_MAX_DEVICES 64

typedef struct nccl_dev {
    bool made;
    ncclComm_t comm;
    cudaStream_t stream;
} nccl_dev;

typedef struct nccl_comms {
    nccl_dev dev[NCCL_MAX_DEVICES];
} nccl_comms;

/* bool as uint8: sum and max are logical or, product and min logical and (as PyTorch) */
static ncclRedOp_t nccl_op(ts_dist_reduce_op op, ts_dtype dt, bool *avg_done) {
    *avg_done = false;
    if (dt == TS_BOOL) return op == TS_DIST_SUM || op == TS_DIST_MAX ? ncclMax : ncclMin;
    switch (op) {
    case TS_DIST_SUM:
        return ncclSum;
    case TS_DIST_AVG:
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 10, 0)
        *avg_done = true;
        return ncclAvg;
#else
        return ncclSum; /* divided at wait */
#endif
    case TS_DIST_PRODUCT:
        return ncclProd;
    case TS_DIST_MIN:
        return ncclMin;
    case TS_DIST_MAX:
        return ncclMax;
    }
    return ncclSum;
}

static bool nccl_ok(ts_dist_work *w, ncclResult_t r, const char *call) {
    if (r == ncclSuccess) return true;
    tsd_work_fail(w, TS_ERR_CUDA, "%s #%llu on %s: %s failed: %s", tsd_kind_name(w->kind),
                  (unsigned long long)w->seq, w->g->name, call, ncclGetErrorString(r));
    return false;
}

static bool cuda_ok(ts_dist_work *w, cudaError_t e, const char *call) {
    if (e == cudaSuccess) return true;
    tsd_work_fail(w, TS_ERR_CUDA, "%s #%llu on %s: %s failed: %s", tsd_kind_name(w->kind),
                  (unsigned long long)w->seq, w->g->name, call, cudaGetErrorString(e));
    return false;
}

static nccl_dev *comm_for(ts_dist_work *w, int device) {
    ts_dist_group *g = w->g;
    if (device < 0 || device >= NCCL_MAX_DEVICES) {
        tsd_work_fail(w, TS_ERR_DEVICE, "%s: cuda:%d is beyond NCCL's table",
                      tsd_kind_name(w->kind), device);
        return NULL;
    }
    if (!g->nccl) g->nccl = calloc(1, sizeof(nccl_comms));
    if (!g->nccl) {
        tsd_work_fail(w, TS_ERR_OOM, "%s: out of host memory", tsd_kind_name(w->kind));
        return NULL;
    }
    nccl_dev *d = &((nccl_comms *)g->nccl)->dev[device];
    if (d->made) return d;
    /* rank 0 sends the id, or that it has none: every member takes the same branch */
    struct {
        int32_t ok;
        ncclUniqueId id;
    } uid;
    memset(&uid, 0, sizeof uid);
    if (g->rank == 0) uid.ok = nccl_ok(w, ncclGetUniqueId(&uid.id), "ncclGetUniqueId");
    int rc = MPI_Bcast(&uid, (int)sizeof uid, MPI_BYTE, 0, g->comm);
    if (rc != MPI_SUCCESS) {
        tsd_mpi_fail(w, "MPI_Bcast (NCCL's unique id)", rc);
        return NULL;
    }
    if (!uid.ok) {
        tsd_work_fail(w, TS_ERR_CUDA, "%s #%llu on %s: rank %d could not make NCCL's unique id",
                      tsd_kind_name(w->kind), (unsigned long long)w->seq, g->name,
                      g->world_ranks[0]);
        return NULL;
    }
    /* a member that fails from here on leaves the others inside ncclCommInitRank: NCCL's own
     * errors, or the timeout, end them */
    if (!cuda_ok(w, cudaSetDevice(device), "cudaSetDevice")) return NULL;
    if (!nccl_ok(w, ncclCommInitRank(&d->comm, g->size, uid.id, g->rank), "ncclCommInitRank"))
        return NULL;
    if (!cuda_ok(w, cudaStreamCreateWithFlags(&d->stream, cudaStreamNonBlocking),
                 "cudaStreamCreateWithFlags")) {
        ncclCommDestroy(d->comm);
        return NULL;
    }
    d->made = true;
    return d;
}

static char *data_of(ts_tensor *t) {
    return t->storage->data + t->offset * (int64_t)tsi_dtype_size(t->dtype);
}

/* Waits for the stream without blocking the thread for good: a broken group aborts the comm. */
static void complete(ts_dist_work *w, nccl_dev *d) {
    long sleep_ns = 20000;
    for (;;) {
        cudaError_t e = cudaStreamQuery(d->stream);
        if (e == cudaSuccess) return;
        if (e != cudaErrorNotReady) {
            cuda_ok(w, e, "cudaStreamQuery");
            return;
        }
        ncclResult_t async_err = ncclSuccess;
        ncclCommGetAsyncError(d->comm, &async_err);
        if (async_err != ncclSuccess) {
            nccl_ok(w, async_err, "the NCCL operation");
            return;
        }
        if (atomic_load(&w->g->broken)) {
            ncclCommAbort(d->comm);
            d->made = false;
            tsd_work_fail(w, TS_ERR_DIST, "%s", "the group broke while NCCL was running");
            return;
        }
        struct timespec ts = {0, sleep_ns};
        nanosleep(&ts, NULL);
        if (sleep_ns < 1000000) sleep_ns *= 2;
    }
}

void tsd_nccl_execute(ts_dist_work *w) {
    ts_tensor *b = w->buf;
    int device = b->storage->device.index;
    ncclDataType_t type;
    if (!tsi_nccl_dtype(b->dtype, &type)) {
        tsd_work_fail(w, TS_ERR_DTYPE, "%s: NCCL cannot carry %s", tsd_kind_name(w->kind),
                      tsi_desc(b));
        return;
    }
    nccl_dev *d = comm_for(w, device);
    if (!d) return;
    if (!cuda_ok(w, cudaSetDevice(device), "cudaSetDevice")) return;
    bool avg_done = false;
    ncclRedOp_t op = nccl_op(w->rop, b->dtype, &avg_done);
    size_t n = (size_t)tsi_numel(b->shape);
    void *p = data_of(b);
    ncclResult_t r = ncclSuccess;
    const char *call = "";
    switch (w->kind) {
    case TSD_ALL_REDUCE:
        call = "ncclAllReduce";
        r = ncclAllReduce(p, p, n, type, op, d->comm, d->stream);
        break;
    case TSD_BROADCAST:
        call = "ncclBroadcast";
        r = ncclBroadcast(p, p, n, type, w->root, d->comm, d->stream);
        break;
    case TSD_REDUCE:
        call = "ncclReduce";
        r = ncclReduce(p, p, n, type, op, w->root, d->comm, d->stream);
        break;
    case TSD_ALL_GATHER:
        call = "ncclAllGather";
        r = ncclAllGather(data_of(w->buf2), p, (size_t)tsi_numel(w->buf2->shape), type, d->comm,
                          d->stream);
        break;
    case TSD_REDUCE_SCATTER:
        call = "ncclReduceScatter";
        r = ncclReduceScatter(data_of(w->buf2), p, n, type, op, d->comm, d->stream);
        break;
    case TSD_SEND:
        call = "ncclSend";
        r = ncclSend(p, n, type, w->root, d->comm, d->stream);
        break;
    case TSD_RECV:
        call = "ncclRecv";
        r = ncclRecv(p, n, type, w->root, d->comm, d->stream);
        break;
    default:
        tsd_work_fail(w, TS_ERR_UNSUPPORTED, "%s: not available for cuda tensors",
                      tsd_kind_name(w->kind));
        return;
    }
    if (!nccl_ok(w, r, call)) return;
    complete(w, d);
    if (w->status == TS_OK &&
        (w->kind == TSD_ALL_REDUCE || w->kind == TSD_REDUCE || w->kind == TSD_REDUCE_SCATTER))
        w->avg_done = avg_done;
}

void tsd_nccl_group_free(ts_dist_group *g) {
    nccl_comms *c = g->nccl;
    if (!c) return;
    for (int i = 0; i < NCCL_MAX_DEVICES; i++)
        if (c->dev[i].made) {
            ncclCommDestroy(c->dev[i].comm);
            cudaStreamDestroy(c->dev[i].stream);
        }
    free(c);
    g->nccl = NULL;
}

#else
typedef int tsd_nccl_not_built; /* ISO C wants something in a translation unit */
#endif
