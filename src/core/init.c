/* init.c — library start-up: backends (cpu, sim, cuda when the runtime reports a device), the
 * start-up environment variables (TS_SIM_DEVICES, TS_LOG_PLACEMENT, TS_NUM_THREADS,
 * TS_FAULT_ALLOC, TS_SYNC_DEBUG, TS_OOM_SNAPSHOT; backend/env_config.h reads them), the CPU thread
 * count.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_backend.h"
#include "backend/cuda/cuda_bridge.h"
#include "backend/env_config.h"
#include "backend/meta/meta_backend.h"
#include "backend/sim/sim_backend.h"
#include "backend/sim/sim_link.h"
#include "core/internal.h"
#include "core/sync_debug.h"

#ifdef TS_HAVE_OPENMP
#include <omp.h>
#endif
#ifdef TS_HAVE_CBLAS
void openblas_set_num_threads(int n); /* OpenBLAS extension; declared here to avoid its header */
#endif

atomic_bool tsi_initialised;
static pthread_once_t init_once = PTHREAD_ONCE_INIT;

/* TS_SIM_CAPACITY: bytes, with an optional k/K, m/M or g/G (powers of 1024); 0 when unset */
static size_t sim_capacity(void) {
    const char *v = tsi_env(TSI_ENV_SIM_CAPACITY);
    if (!v) return 0;
    char *end;
    double x = strtod(v, &end);
    double mul = 1;
    if (*end == 'k' || *end == 'K')
        mul = 1024.0;
    else if (*end == 'm' || *end == 'M')
        mul = 1024.0 * 1024;
    else if (*end == 'g' || *end == 'G')
        mul = 1024.0 * 1024 * 1024;
    return x > 0 ? (size_t)(x * mul) : 0;
}

static void after_fork_child(void);

static void init_body(void) {
    /* before anything can start a thread pool */
    pthread_atfork(NULL, NULL, after_fork_child);
    tsi_cpu_backend_init();
    tsi_sim_backend_init();
    tsi_meta_backend_init();
    /* registers "cuda" only with a device; without one (or without CUDA in the build) cuda:N is
     * "not available" with the reason (tsc_unavailable_reason) */
    tsc_backend_init();
    tsi_memory_init();
    long sims = tsi_env_long(TSI_ENV_SIM_DEVICES, 0);
    if (sims > 0 && sims <= 64) tsi_sim_backend_configure((int)sims, sim_capacity());
    tsi_sim_link_init_env(); /* TS_SIM_LINK */
    if (tsi_env_long(TSI_ENV_LOG_PLACEMENT, 0) > 0) ts_log_placement(true);
    long fault = tsi_env_long(TSI_ENV_FAULT_ALLOC, -1);
    if (fault >= 0) ts_fault_alloc_set(fault);
    const char *sync = tsi_env(TSI_ENV_SYNC_DEBUG);
    /* the variable directly: ts_set_sync_debug_mode would wait for this initialisation */
    if (sync && (!strcmp(sync, "warn") || !strcmp(sync, "1")))
        atomic_store(&tsi_sync_mode, TS_SYNC_DEBUG_WARN);
    else if (sync && (!strcmp(sync, "error") || !strcmp(sync, "2")))
        atomic_store(&tsi_sync_mode, TS_SYNC_DEBUG_ERROR);
    const char *oom_snap = tsi_env(TSI_ENV_OOM_SNAPSHOT);
    if (oom_snap) ts_memory_set_oom_snapshot(oom_snap);
    long threads = tsi_env_long(TSI_ENV_NUM_THREADS, 0);
    if (threads > 0) ts_set_num_threads((int)threads);
    atomic_store_explicit(&tsi_initialised, true, memory_order_release);
}

void tsi_init_once(void) { pthread_once(&init_once, init_body); }

static atomic_int num_threads;

void ts_set_num_threads(int n) {
#ifdef TS_HAVE_OPENMP
    if (n <= 0) n = omp_get_num_procs();
    omp_set_num_threads(n);
#endif
#ifdef TS_HAVE_CBLAS
    openblas_set_num_threads(n <= 0 ? 1 : n);
#endif
    atomic_store(&num_threads, n);
}

/* A fork()ed child (multiprocessing's fork start method) has only the forking thread: libgomp's
 * pool of the parent is gone, yet a parallel region of more than one thread would wait for it
 * forever. The child runs its ops on one thread (spawn or forkserver start fresh processes with
 * the full count). */
static void after_fork_child(void) {
#ifdef TS_HAVE_OPENMP
    omp_set_num_threads(1);
#endif
    atomic_store(&num_threads, 1);
}

int ts_get_num_threads(void) {
#ifdef TS_HAVE_OPENMP
    int n = atomic_load(&num_threads);
    return n > 0 ? n : omp_get_max_threads();
#else
    return 1;
#endif
}
