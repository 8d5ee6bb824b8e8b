/* process_group.c — joining and leaving the world (MPI or a world of one), ranks, local ranks,
 * subgroups, ts_dist_describe and ts_dist_abort. */
#define _POSIX_C_SOURCE 200809L /* gethostname, clock_gettime, nanosleep */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backend/env_config.h"
#include "dist/dist_impl.h"

tsd_world tsd_w;
pthread_mutex_t tsd_init_mu = PTHREAD_MUTEX_INITIALIZER;

double tsd_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ------------------------------------------------------------------ the environment */
static void world_ready(bool ready);

static int env_int(tsi_env_id id, int fallback) {
    long v = tsi_env_long(id, -1);
    return v >= 0 && v < (1L << 30) ? (int)v : fallback;
}

/* Started by a launcher (mpirun, srun, hydra): only then does ts_dist_init touch MPI. */
static bool launched(void) {
    static const tsi_env_id vars[] = {TSI_ENV_OMPI_COMM_WORLD_SIZE, TSI_ENV_PMI_RANK,
                                      TSI_ENV_PMIX_RANK, TSI_ENV_SLURM_PROCID};
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++)
        if (tsi_env(vars[i])) return true;
    return false;
}

/* The number of ranks a launcher asked for (1 when none says more). `step`: Slurm's count of this
 * job step's tasks (set by srun) instead of the allocation's SLURM_NTASKS, which a single program
 * run by an sbatch script also sees. */
static int launcher_size(const char **which, bool step) {
    static const tsi_env_id vars[] = {TSI_ENV_OMPI_COMM_WORLD_SIZE, TSI_ENV_PMI_SIZE,
                                      TSI_ENV_SLURM_NTASKS};
    static const tsi_env_id step_vars[] = {TSI_ENV_OMPI_COMM_WORLD_SIZE, TSI_ENV_PMI_SIZE,
                                           TSI_ENV_SLURM_STEP_NUM_TASKS};
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++) {
        const tsi_env_id v = step ? step_vars[i] : vars[i];
        int n = env_int(v, 1);
        if (n > 1) {
            *which = tsi_env_name(v);
            return n;
        }
    }
    return 1;
}
static double timeout_from(double opt) {
    if (opt > 0) return opt;
    const char *s = tsi_env(TSI_ENV_DIST_TIMEOUT);
    if (s) {
        char *end;
        double v = strtod(s, &end);
        if (*end == '\0' && v > 0) return v;
    }
    return 600.0;
}

/* ------------------------------------------------------------------ groups */
void tsd_format_ranks(char *buf, size_t n, const int *ranks, int count) {
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < count && used + 16 < n; i++)
        used += (size_t)snprintf(buf + used, n - used, i ? ", %d" : "%d", ranks[i]);
    if (count > 0 && used + 16 >= n) snprintf(buf + used, n - used, ", ...");
}

int tsd_group_rank_of(const ts_dist_group *g, int world_rank) {
    for (int i = 0; i < g->size; i++)
        if (g->world_ranks[i] == world_rank) return i;
    return -1;
}

static ts_dist_group *group_alloc(int id, const int *world_ranks, int size) {
    ts_dist_group *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    g->world_ranks = malloc((size_t)size * sizeof *g->world_ranks);
    if (!g->world_ranks) {
        free(g);
        return NULL;
    }
    memcpy(g->world_ranks, world_ranks, (size_t)size * sizeof *world_ranks);
    g->id = id;
    g->size = size;
    g->rank = -1;
    for (int i = 0; i < size; i++)
        if (world_ranks[i] == tsd_w.rank) g->rank = i;
    if (id == 0) {
        snprintf(g->name, sizeof g->name, "the world");
    } else {
        char list[64];
        tsd_format_ranks(list, sizeof list, world_ranks, size);
        snprintf(g->name, sizeof g->name, "group %d (world ranks %s)", id, list);
    }
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->cv_work, NULL);
    pthread_cond_init(&g->cv_done, NULL);
#ifdef TS_HAVE_MPI
    g->comm = MPI_COMM_NULL;
    g->monitor = MPI_COMM_NULL;
    pthread_mutex_init(&g->mon_mu, NULL);
    g->announced = -1;
#endif
    atomic_init(&g->broken, false);
    atomic_init(&g->spare_busy, false);
    pthread_mutex_init(&g->agree_mu, NULL);
    return g;
}

/* Releases a group this process is done with (its thread already stopped). */
static void group_release(ts_dist_group *g) {
#ifdef TS_HAVE_MPI
#ifdef TSD_HAVE_NCCL
    tsd_nccl_group_free(g);
#endif
    if (g->comm != MPI_COMM_NULL && !tsd_w.mpi_finalized) {
        tsd_monitor_free(g);
        MPI_Comm_free(&g->monitor);
        MPI_Comm_free(&g->comm);
    }
    free(g->peer_seq);
    pthread_mutex_destroy(&g->mon_mu);
#endif
    tsd_reserve_free(g);
    pthread_mutex_destroy(&g->agree_mu);
    pthread_mutex_destroy(&g->mu);
    pthread_cond_destroy(&g->cv_work);
    pthread_cond_destroy(&g->cv_done);
    free(g->world_ranks);
    free(g);
}

ts_dist_group *tsd_group_ready(const char *op, ts_dist_group *g) {
    if (!tsd_w.initialized) {
        tsi_error_set(TS_ERR_STATE, "%s: call ts_dist_init first", op);
        return NULL;
    }
    if (!g) g = tsd_w.world;
    if (atomic_load(&g->broken)) {
        pthread_mutex_lock(&g->mu);
        tsi_error_set(g->broken_code, "%s", g->broken_msg);
        pthread_mutex_unlock(&g->mu);
        return NULL;
    }
    if (g->rank < 0) {
        tsi_error_set(TS_ERR_ARG, "%s: this process (world rank %d) is not a member of %s", op,
                      tsd_w.rank, g->name);
        return NULL;
    }
    return g;
}

/* ------------------------------------------------------------------ init / finalize */
bool ts_dist_is_available(void) {
#ifdef TS_HAVE_MPI
    return true;
#else
    return false;
#endif
}

bool ts_dist_is_initialized(void) { return tsd_w.initialized; }

bool tsi_dist_core_spare(int local_ranks) {
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    return cores > (long)(local_ranks > 0 ? local_ranks : 1) * ts_get_num_threads();
}

#ifdef TS_HAVE_MPI
/* Open MPI's blocking collectives spin in opal_progress while they wait for a slower rank, and
 * each group's communication thread runs them beside the compute threads. Where those fill every
 * core, the spinning thread takes a core from them: on 2 cores, 2 ranks x 1 thread, the GPT-mini's
 * FSDP step (its gathers prefetched in forward, its reduce-scatters launched during backward) spent
 * 22-61 ms of CPU a step there, quiet to loaded, 10-14 ms when the waits yield
 * (docs/DISTRIBUTED.md). mpi_yield_when_idle makes an idle wait yield the core (what Open MPI does
 * by itself only when it sees more ranks than cores). Read by MPI_Init, so set before it, unless
 * the user chose (the variable, or mpirun's --mca, which sets it). */
#define YIELD_VAR "OMPI_MCA_mpi_yield_when_idle"
static void yield_when_no_core_spare(void) {
    if (!tsi_dist_core_spare(ts_dist_local_world_size())) setenv(YIELD_VAR, "1", 0);
}

static ts_status mpi_fail_init(const char *call, int rc) {
    char s[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, s, &len) != MPI_SUCCESS) snprintf(s, sizeof s, "error %d", rc);
    return tsi_error_set(TS_ERR_DIST, "ts_dist_init: %s failed: %s", call, s);
}

static ts_status init_mpi(void) {
    int already = 0;
    MPI_Initialized(&already);
    int provided = MPI_THREAD_SINGLE;
    if (already) {
        /* the program joined MPI itself: use it, and leave MPI_Finalize to the program */
        MPI_Query_thread(&provided);
    } else {
        yield_when_no_core_spare();
        int rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &provided);
        if (rc != MPI_SUCCESS) return mpi_fail_init("MPI_Init_thread", rc);
        tsd_w.mpi_owned = true;
    }
    tsd_w.mpi = true;
    /* Less than MPI_THREAD_MULTIPLE: no communication threads. Every collective then runs in the
     * caller's thread when it is called (the _async forms return finished work, so nothing
     * overlaps with compute), and a hung collective cannot be timed out (it blocks the caller). */
    tsd_w.multiple = provided >= MPI_THREAD_MULTIPLE;
    /* errors come back as codes, never as an abort inside MPI */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm comm;
    int rc = MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    if (rc != MPI_SUCCESS) return mpi_fail_init("MPI_Comm_dup", rc);
    MPI_Comm_rank(comm, &tsd_w.rank);
    MPI_Comm_size(comm, &tsd_w.size);
    MPI_Comm node;
    rc = MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, tsd_w.rank, MPI_INFO_NULL, &node);
    if (rc != MPI_SUCCESS) return mpi_fail_init("MPI_Comm_split_type", rc);
    MPI_Comm_rank(node, &tsd_w.local_rank);
    MPI_Comm_size(node, &tsd_w.local_size);
    MPI_Comm_free(&node);
    if (!tsd_mpi_ops_init()) return tsi_error_set(TS_ERR_DIST, "ts_dist_init: cannot make MPI ops");

    int *all = malloc((size_t)tsd_w.size * sizeof *all);
    if (!all) return tsi_error_set(TS_ERR_OOM, "ts_dist_init: out of host memory");
    for (int i = 0; i < tsd_w.size; i++) all[i] = i;
    ts_dist_group *g = group_alloc(0, all, tsd_w.size);
    free(all);
    if (!g) return tsi_error_set(TS_ERR_OOM, "ts_dist_init: out of host memory");
    g->comm = comm;
    rc = MPI_Comm_dup(comm, &g->monitor);
    if (rc != MPI_SUCCESS) return mpi_fail_init("MPI_Comm_dup", rc);
    MPI_Comm_set_errhandler(g->comm, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(g->monitor, MPI_ERRORS_RETURN);
    tsd_w.world = g;
    return tsd_group_start(g);
}
#endif

ts_status ts_dist_init(ts_dist_opts o) {
    tsi_init();
    pthread_mutex_lock(&tsd_init_mu);
    ts_status st = TS_OK;
    if (tsd_w.initialized) {
        st = tsi_error_set(TS_ERR_STATE,
                           "ts_dist_init: trying to initialize the default process group twice!");
        goto out;
    }
    if (tsd_w.mpi_finalized) {
        st = tsi_error_set(TS_ERR_STATE, "ts_dist_init: MPI was finalized (ts_dist_finalize) and "
                                         "cannot be joined again in this process");
        goto out;
    }
    if ((unsigned)o.backend > TS_DIST_NCCL) {
        st = tsi_error_set(TS_ERR_ARG, "ts_dist_init: unknown backend %d", (int)o.backend);
        goto out;
    }
#ifndef TSD_HAVE_NCCL
    if (o.backend == TS_DIST_NCCL) {
        st = tsi_error_set(TS_ERR_UNSUPPORTED, "ts_dist_init: backend NCCL asked for, but this "
                                               "Tessera was built without NCCL (and MPI)");
        goto out;
    }
#endif
    if (o.timeout_s < 0) {
        st = tsi_error_set(TS_ERR_ARG, "ts_dist_init: timeout_s must be >= 0, got %g", o.timeout_s);
        goto out;
    }
    tsd_w.timeout_s = timeout_from(o.timeout_s);
    tsd_w.backend = o.backend;
    tsd_w.rank = 0;
    tsd_w.size = 1;
    tsd_w.local_rank = 0;
    tsd_w.local_size = 1;
    tsd_w.groups = NULL;
    tsd_w.next_group_id = 1;
    const char *which = NULL;
#ifdef TS_HAVE_MPI
    int asked = launcher_size(&which, true);
    if (launched()) {
        st = init_mpi();
        if (st != TS_OK) goto out;
        if (asked > 1 && tsd_w.size != asked) {
            /* mpirun started us, but MPI answers another world (an MPI other than the launcher's):
             * every rank would believe it is alone, and train alone */
            st = tsi_error_set(TS_ERR_DIST,
                               "ts_dist_init: the launcher asked for %d ranks (%s) but MPI sees a "
                               "world of %d: is the program linked with the launcher's MPI?",
                               asked, which, tsd_w.size);
            goto out;
        }
        world_ready(true);
        goto out;
    }
#else
    (void)launched;
    int asked = launcher_size(&which, false);
    if (asked > 1) {
        st = tsi_error_set(TS_ERR_UNSUPPORTED,
                           "ts_dist_init: the launcher asked for %d ranks (%s=%d) but this Tessera "
                           "was built without MPI (install libopenmpi-dev and rebuild), so it can "
                           "only be a world of one",
                           asked, which, asked);
        goto out;
    }
#endif
    {
        /* a world of one without MPI: no thread, work runs in the caller's thread */
        int zero = 0;
        ts_dist_group *g = group_alloc(0, &zero, 1);
        if (!g) {
            st = tsi_error_set(TS_ERR_OOM, "ts_dist_init: out of host memory");
            goto out;
        }
        tsd_w.world = g;
        tsd_w.mpi = false;
        tsd_w.multiple = false;
        world_ready(true);
    }
out:
    pthread_mutex_unlock(&tsd_init_mu);
    return st;
}

int ts_dist_rank(void) { return tsd_w.initialized ? tsd_w.rank : 0; }
int ts_dist_world_size(void) { return tsd_w.initialized ? tsd_w.size : 1; }

int ts_dist_local_rank(void) {
    if (tsd_w.initialized) return tsd_w.local_rank;
    /* before init (to pick a GPU): what the launcher says */
    int r = env_int(TSI_ENV_OMPI_COMM_WORLD_LOCAL_RANK, -1);
    if (r < 0) r = env_int(TSI_ENV_SLURM_LOCALID, -1);
    if (r < 0) r = env_int(TSI_ENV_MPI_LOCALRANKID, -1);
    return r < 0 ? 0 : r;
}

int ts_dist_local_world_size(void) {
    if (tsd_w.initialized) return tsd_w.local_size;
    int n = env_int(TSI_ENV_OMPI_COMM_WORLD_LOCAL_SIZE, -1);
    if (n < 1) n = env_int(TSI_ENV_MPI_LOCALNRANKS, -1);
    return n < 1 ? 1 : n;
}

static _Noreturn void abort_job(int code) {
    fflush(stdout);
    fflush(stderr);
#ifdef TS_HAVE_MPI
    int init = 0, fin = 0;
    MPI_Initialized(&init);
    MPI_Finalized(&fin);
    if (init && !fin) MPI_Abort(MPI_COMM_WORLD, code);
#endif
    _exit(code);
}

void ts_dist_abort(int code) { abort_job(code); }

static void broken_message(char *buf, size_t n) {
    buf[0] = '\0';
    ts_dist_group *gs[2] = {tsd_w.world, tsd_w.groups};
    for (int k = 0; k < 2 && !buf[0]; k++)
        for (ts_dist_group *g = gs[k]; g; g = k ? g->next_group : NULL)
            if (atomic_load(&g->broken)) {
                pthread_mutex_lock(&g->mu);
                snprintf(buf, n, "%s", g->broken_msg);
                pthread_mutex_unlock(&g->mu);
                break;
            }
}

static void group_unlink(ts_dist_group *g) {
    for (ts_dist_group **p = &tsd_w.groups; *p; p = &(*p)->next_group)
        if (*p == g) {
            *p = g->next_group;
            return;
        }
}

ts_status ts_dist_finalize(void) {
    pthread_mutex_lock(&tsd_init_mu);
    if (!tsd_w.initialized) {
        pthread_mutex_unlock(&tsd_init_mu);
        return tsi_error_set(TS_ERR_STATE, "ts_dist_finalize: call ts_dist_init first");
    }
    bool ok = !tsd_any_broken();
    /* subgroups first (creation order: MPI_Comm_free is collective), then the world */
    while (ok && tsd_w.groups) {
        ts_dist_group *g = tsd_w.groups;
        ok = tsd_group_stop(g);
        if (!ok) break;
        group_unlink(g);
        group_release(g);
    }
    ok = ok && tsd_group_stop(tsd_w.world);
    if (!ok) {
        char msg[TSD_MSG_LEN];
        broken_message(msg, sizeof msg);
        fprintf(stderr,
                "ts_dist_finalize: rank %d: the process group failed (%s); aborting the job so no "
                "rank is left waiting\n",
                tsd_w.rank, msg);
        abort_job(1);
    }
    group_release(tsd_w.world);
    tsd_w.world = NULL;
#ifdef TS_HAVE_MPI
    if (tsd_w.mpi) {
        tsd_mpi_ops_free();
        if (tsd_w.mpi_owned) {
            MPI_Finalize();
            tsd_w.mpi_finalized = true;
        }
    }
#endif
    world_ready(false);
    tsd_w.mpi = false;
    pthread_mutex_unlock(&tsd_init_mu);
    return TS_OK;
}

/* ------------------------------------------------------------------ subgroups */
static int cmp_int(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

ts_dist_group *ts_dist_new_group(const int *ranks, int n) {
    static const char *op = "new_group";
    ts_dist_group *world = tsd_group_ready(op, NULL);
    if (!world) return NULL;
    if (!ranks || n < 1) {
        tsi_error_set(TS_ERR_ARG, "%s: expected at least one rank, got %d%s", op, n,
                      ranks ? "" : " (ranks is NULL)");
        return NULL;
    }
    int *sorted = malloc((size_t)n * sizeof *sorted);
    if (!sorted) {
        tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op);
        return NULL;
    }
    memcpy(sorted, ranks, (size_t)n * sizeof *ranks);
    qsort(sorted, (size_t)n, sizeof *sorted, cmp_int); /* PyTorch orders the group by world rank */
    for (int i = 0; i < n; i++) {
        if (sorted[i] < 0 || sorted[i] >= tsd_w.size || (i && sorted[i] == sorted[i - 1])) {
            tsi_error_set(TS_ERR_ARG,
                          sorted[i] < 0 || sorted[i] >= tsd_w.size
                              ? "%s: rank %d is not a rank of the world (world size %d)"
                              : "%s: rank %d appears twice in the list (world size %d)",
                          op, sorted[i], tsd_w.size);
            free(sorted);
            return NULL;
        }
    }
    pthread_mutex_lock(&tsd_init_mu);
    ts_dist_group *g = group_alloc(tsd_w.next_group_id++, sorted, n);
    pthread_mutex_unlock(&tsd_init_mu);
    free(sorted);
    if (!g) {
        tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op);
        return NULL;
    }
#ifdef TS_HAVE_MPI
    if (tsd_w.mpi) {
        /* the split is collective over the world: it runs in the world's queue, in order */
        ts_dist_work *w = tsd_work_new(world, TSD_NEW_GROUP);
        if (!w) {
            group_release(g);
            return NULL;
        }
        w->new_group = g;
        w->checked = tsd_w.size > 1;
        w->desc.kind = TSD_NEW_GROUP;
        tsd_format_ranks(w->desc.why, sizeof w->desc.why, g->world_ranks, g->size);
        /* the whole list, also where the text is cut short: its length and FNV-1a hash */
        uint64_t h = 1469598103934665603ull;
        for (int i = 0; i < g->size; i++) h = (h ^ (uint64_t)g->world_ranks[i]) * 1099511628211ull;
        w->desc.dims[0] = g->size;
        w->desc.dims[1] = (int64_t)(h >> 1);
        tsd_enqueue(w);
        if (ts_dist_wait(w) != TS_OK || (g->rank >= 0 && tsd_group_start(g) != TS_OK)) {
            group_release(g);
            return NULL;
        }
    }
#endif
    pthread_mutex_lock(&tsd_init_mu);
    ts_dist_group **p = &tsd_w.groups;
    while (*p) p = &(*p)->next_group;
    *p = g;
    pthread_mutex_unlock(&tsd_init_mu);
    return g;
}

void ts_dist_group_free(ts_dist_group *g) {
    if (!g || !tsd_w.initialized || g == tsd_w.world) return;
    pthread_mutex_lock(&tsd_init_mu);
    group_unlink(g);
    pthread_mutex_unlock(&tsd_init_mu);
    if (!tsd_group_stop(g)) {
        /* broken: its thread may hang inside MPI; ts_dist_finalize aborts the job. Keep it
         * reachable so finalize sees it. */
        pthread_mutex_lock(&tsd_init_mu);
        g->next_group = tsd_w.groups;
        tsd_w.groups = g;
        pthread_mutex_unlock(&tsd_init_mu);
        return;
    }
    group_release(g);
}

int ts_dist_group_rank(ts_dist_group *g) {
    if (!g) return ts_dist_rank();
    return g->rank;
}

/* ------------------------------------------------------------------ the grad scaler's agreement */
/* Whether any rank found an inf: a MAX over the scaler's group, so every rank skips the step or
 * none does. A rank that failed (an error pending: the scaler's step failed before its verdict,
 * or t could not be made) joins anyway without a tensor: the all-reduce's cross-rank check fails
 * it on every rank instead of leaving the others waiting. */
static double agree_max(ts_dist_group *g, double local) {
    ts_tensor *t =
        ts_error() ? NULL : ts_tensor_f64(TS_SHAPE(1), &local, (ts_opts){.device = ts_cpu()});
    double v = local;
    if (ts_dist_all_reduce(t, TS_DIST_MAX, g) == TS_OK) v = ts_item(t);
    if (ts_scope_depth() == 0) ts_release(t);
    return v;
}

static void world_ready(bool ready) {
    tsd_w.initialized = ready;
    tsi_dist_agree_max = ready ? agree_max : NULL;
    tsi_dist_agree_size = ready ? ts_dist_group_size : NULL;
}

int ts_dist_group_size(ts_dist_group *g) {
    if (!g) return ts_dist_world_size();
    return g->size;
}

int tsi_dist_group_world_rank(ts_dist_group *g, int r) {
    if (!g) return r >= 0 && r < ts_dist_world_size() ? r : -1;
    return r >= 0 && r < g->size ? g->world_ranks[r] : -1;
}

/* ------------------------------------------------------------------ describe */
static void mpi_library(char *buf, size_t n) {
#ifdef TS_HAVE_MPI
    char v[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    if (MPI_Get_library_version(v, &len) != MPI_SUCCESS) len = 0;
    v[len < (int)sizeof v ? len : (int)sizeof v - 1] = '\0';
    v[strcspn(v, "\n")] = '\0'; /* its first line */
    snprintf(buf, n, "%s", v);
#else
    snprintf(buf, n, "built without MPI");
#endif
}

const char *ts_dist_describe(void) {
    static _Thread_local char buf[512];
    char host[128] = "?";
    if (gethostname(host, sizeof host) != 0) snprintf(host, sizeof host, "?");
    host[sizeof host - 1] = '\0';
    char lib[256];
    mpi_library(lib, sizeof lib);
    if (!tsd_w.initialized)
        snprintf(buf, sizeof buf, "not initialized (world 1, rank 0, local %d of %d; %s), host %s",
                 ts_dist_local_rank(), ts_dist_local_world_size(), lib, host);
    else if (!tsd_w.mpi)
        snprintf(buf, sizeof buf,
                 "world 1, rank 0 (local 0 of 1), backend none (no launcher: a world of one; %s), "
                 "host %s",
                 lib, host);
    else
        snprintf(buf, sizeof buf, "world %d, rank %d (local %d of %d), backend mpi (%s%s), host %s",
                 tsd_w.size, tsd_w.rank, tsd_w.local_rank, tsd_w.local_size, lib,
                 tsd_w.multiple ? "" : "; no MPI_THREAD_MULTIPLE: no overlap, no timeouts", host);
    return buf;
}
