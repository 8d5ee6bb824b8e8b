/* dist_impl.h — what the files of src/dist share among themselves (private to the distributed
 * layer): the process group, the work item, the communication thread, the MPI mapping, faults. */
#ifndef TS_DIST_IMPL_H
#define TS_DIST_IMPL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "dist/dist_internal.h"

#ifdef TS_HAVE_MPI
#include <mpi.h>
#endif

#define TSD_MSG_LEN 768
#define TSD_WHY_LEN 200

/* ------------------------------------------------------------------ work items */
typedef enum tsd_kind {
    TSD_ALL_REDUCE = 1,
    TSD_BROADCAST,
    TSD_REDUCE,
    TSD_ALL_GATHER,
    TSD_REDUCE_SCATTER,
    TSD_SEND,
    TSD_RECV,
    TSD_BARRIER,
    TSD_GATHER_BYTES, /* tsi_dist_all_gather_bytes */
    TSD_NEW_GROUP,    /* MPI_Comm_split of the world (runs in the world's thread) */
    TSD_KIND_COUNT
} tsd_kind;

const char *tsd_kind_name(tsd_kind k); /* "all_reduce" */
static inline bool tsd_kind_is_p2p(tsd_kind k) { return k == TSD_SEND || k == TSD_RECV; }

/* What every member all-gathers before a checked collective moves data: a rank's view of the call.
 * `bad` is a status code when this rank's own checks failed (then `why` says why), so every rank
 * takes the same branch: all fail, or all go on. Fixed size, plain bytes. */
typedef struct tsd_desc {
    int32_t kind, bad, dtype, devclass, op, root, ndim, ndim2, dtype2, pad;
    int64_t dims[TS_MAX_DIMS], dims2[TS_MAX_DIMS];
    char why[TSD_WHY_LEN];
} tsd_desc;

typedef enum tsd_state { TSD_QUEUED, TSD_RUNNING, TSD_POSTED, TSD_DONE } tsd_state;

struct ts_dist_work {
    struct ts_dist_work *next; /* queue link */
    ts_dist_group *g;
    tsd_kind kind;
    uint64_t seq; /* the group's collective number (p2p: the last collective's number) */
    int refs;     /* under g->mu: the caller's handle and the communication thread */
    tsd_state state;
    bool checked;   /* exchange and compare descriptors first */
    bool abandoned; /* its waiter gave up (timeout): whoever drops the last reference frees it */
    bool posted;    /* p2p: the thread posted the request (the waiter completes it) */
    bool avg_done;  /* AVG already divided (NCCL's ncclAvg) */
    tsd_desc desc;
    /* operands: the user's tensors (retained) and the contiguous buffers the data moves through
     * (retained; the same tensor when already contiguous) */
    ts_tensor *t, *t2, *buf, *buf2;
    bool copy_back;  /* buf is a copy of t and the op writes t: copied back at wait */
    bool copy_back2; /* likewise buf2 -> t2 */
    ts_dist_reduce_op rop;
    int root; /* group rank of src/dst, the peer for p2p */
    int tag;
    /* raw bytes (TSD_GATHER_BYTES) */
    const void *raw_in;
    void *raw_out;
    size_t raw_n;
    /* TSD_NEW_GROUP: the group being made */
    ts_dist_group *new_group;
#ifdef TS_HAVE_MPI
    MPI_Request req; /* p2p: posted by the thread, completed by the waiter */
#endif
    double t_start, t_end; /* seconds (tsd_now) */
    int64_t prof_t0;       /* tsi_prof_now at its making while the profiler is on, else 0 */
    ts_status status;
    char msg[TSD_MSG_LEN];
};

/* ------------------------------------------------------------------ process groups */
struct ts_dist_group {
    int id;           /* 0 = the world, then 1, 2, ... in creation order */
    int rank, size;   /* this process's rank in the group (-1 outside it), member count */
    int *world_ranks; /* [size] */
    char name[96];    /* "the world", "group 1 (world ranks 0, 2)" */
    struct ts_dist_group *next_group;
#ifdef TS_HAVE_MPI
    MPI_Comm comm;    /* MPI_COMM_NULL outside the group or without MPI */
    MPI_Comm monitor; /* "I am waiting at #seq" messages (fault.c) */
    pthread_mutex_t mon_mu;
    int64_t *peer_seq;              /* [size]: the highest #seq each member announced waiting at */
    int64_t announced;              /* the highest #seq this process announced */
    struct tsd_announce *announces; /* sends still in flight */
    void *nccl;                     /* nccl.c's communicators per device (NULL until used) */
#endif
    bool threaded; /* work runs in the group's own communication thread */
    pthread_t thread;
    bool thread_started;
    pthread_mutex_t mu;
    pthread_cond_t cv_work, cv_done;
    ts_dist_work *head, *tail; /* queued, not yet started */
    ts_dist_work *running;     /* being executed by the thread */
    bool stop;
    uint64_t seq;    /* collectives enqueued so far */
    int outstanding; /* items enqueued and not yet finished (for finalize) */
    /* after a fault: every later call fails at once with this */
    atomic_bool broken;
    ts_status broken_code;
    char broken_msg[TSD_MSG_LEN];
    /* Made when the group starts (agree.c), so that a host allocation failing on one rank cannot
     * make it skip a collective the others enter: the work item tsd_work_new hands out when
     * calloc fails (one at a time), tsi_dist_agree's records (under agree_mu), and the
     * descriptors of the cross-rank check (check.c; items execute one at a time). */
    ts_dist_work *spare;
    atomic_bool spare_busy;
    void *agree_buf;
    pthread_mutex_t agree_mu;
    struct tsd_desc *check_buf;
};

/* ------------------------------------------------------------------ the world (process_group.c) */
typedef struct tsd_world {
    bool initialized;
    bool mpi;       /* MPI is in use (a launcher started us) */
    bool mpi_owned; /* we called MPI_Init, so we call MPI_Finalize */
    bool mpi_finalized;
    bool multiple; /* MPI_THREAD_MULTIPLE: communication threads and lazy fault detection */
    int rank, size, local_rank, local_size;
    double timeout_s;
    ts_dist_backend backend;
    ts_dist_group *world;
    ts_dist_group *groups; /* subgroups, creation order */
    int next_group_id;
} tsd_world;

extern tsd_world tsd_w;
extern pthread_mutex_t tsd_init_mu;

double tsd_now(void); /* monotonic seconds */

/* The group a call addresses (NULL -> the world), after the checks every call makes: initialised
 * (TS_ERR_STATE "op: call ts_dist_init first"), not broken (TS_ERR_DIST, the fault's message), a
 * member (TS_ERR_ARG). NULL with the error recorded otherwise. */
ts_dist_group *tsd_group_ready(const char *op, ts_dist_group *g);
/* The group rank of a world rank, -1 when not a member. */
int tsd_group_rank_of(const ts_dist_group *g, int world_rank);
/* "world ranks 0, 2, 3" into buf */
void tsd_format_ranks(char *buf, size_t n, const int *ranks, int count);

/* ------------------------------------------------------------------ the queue (comm_thread.c) */
ts_status tsd_group_start(ts_dist_group *g);
/* Waits until every item enqueued so far finished (with the timeout), then stops the thread.
 * False when the group broke meanwhile (the thread is then left where it hangs). */
bool tsd_group_stop(ts_dist_group *g);
/* A new item (NULL with TS_ERR_OOM): the group's spare when calloc fails and the spare is free. */
ts_dist_work *tsd_work_new(ts_dist_group *g, tsd_kind kind);
/* What tsd_group_start makes in advance (the spare item, the agreement's and the check's
 * buffers), and its release (process_group.c's group_release). */
bool tsd_reserve_init(ts_dist_group *g);
void tsd_reserve_free(ts_dist_group *g);
/* Hands the item to the group's thread (or runs it now when the group has none). */
void tsd_enqueue(ts_dist_work *w);
/* Drops one reference (g->mu held); frees the item at the last. Returns true when freed. */
bool tsd_work_unref_locked(ts_dist_work *w);
void tsd_work_free(ts_dist_work *w);
/* Executes the item (in the thread): the descriptor check, then the data movement. */
void tsd_execute(ts_dist_work *w);
/* The cross-rank check (check.c): true when every member made the same call. */
bool tsd_check_exchange(ts_dist_work *w);
/* The item's last steps in the waiter's thread (collectives.c): AVG's division, copy-back. */
void tsd_finish(ts_dist_work *w);
/* The profiler's event of a finished item (collectives.c), in the thread where it completed: only
 * when it was made while the profiler was on (prof_t0) and succeeded. */
void tsd_prof_record(const ts_dist_work *w);
/* Records a failure on an item (first one wins). */
void tsd_work_fail(ts_dist_work *w, ts_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ------------------------------------------------------------------ MPI (mpi_ops.c) */
#ifdef TS_HAVE_MPI
bool tsd_mpi_ops_init(void);
void tsd_mpi_ops_free(void);
MPI_Datatype tsd_mpi_type(ts_dtype dt);
/* The MPI_Op for op on dtype (AVG reduces as SUM: the division happens at wait). */
MPI_Op tsd_mpi_op(ts_dist_reduce_op op, ts_dtype dt);
/* "MPI_Allreduce failed: <MPI's message>" into the item */
void tsd_mpi_fail(ts_dist_work *w, const char *call, int rc);
#endif
const char *tsd_reduce_op_name(ts_dist_reduce_op op); /* "sum" */

/* ------------------------------------------------------------------ faults (fault.c) */
/* One step of a waiter's watch over g (g->mu held; may drop and retake it): announces that this
 * process waits at the running collective once it ran longer than min(1 s, timeout / 4), and at
 * the timeout names the members that did not join it and breaks the group. Returns true when the
 * group is (now) broken. `p2p` is the posted point-to-point item being waited on, if any. */
bool tsd_watch(ts_dist_group *g, ts_dist_work *p2p);
/* Marks the group broken with this error (first one wins), wakes every waiter. g->mu held. */
void tsd_break_locked(ts_dist_group *g, ts_status code, const char *msg);
/* Frees what the monitor left (sends in flight, unread announcements): a healthy group's end. */
void tsd_monitor_free(ts_dist_group *g);
/* Whether any group broke (then ts_dist_finalize aborts the job). */
bool tsd_any_broken(void);

/* ------------------------------------------------------------------ NCCL (nccl.c) */
#if defined(TS_HAVE_CUDA) && defined(TS_HAVE_NCCL) && defined(TS_HAVE_MPI)
#define TSD_HAVE_NCCL 1
void tsd_nccl_execute(ts_dist_work *w); /* the data movement of a cuda item, in the thread */
void tsd_nccl_group_free(ts_dist_group *g);
#endif

#endif /* TS_DIST_IMPL_H */
