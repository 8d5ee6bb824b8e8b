/* parallel_apply.c — torch.nn.parallel.parallel_apply: each replica's forward in a thread of its
 * own, with the caller's thread-local state carried in and the first error carried back.
 * With several replicas, replica i draws its random numbers (dropout) from a stream of its own:
 * the global generator's seed at offset base + i * TSI_RNG_REPLICA_SPAN, where base is the
 * generator's offset when the call starts (the call then advances it past all the streams). So
 * the masks depend on the seed and the replica, never on which thread reaches the generator
 * first. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "amp/autocast.h"
#include "parallel/parallel_internal.h"

#ifdef TS_HAVE_OPENMP
#include <omp.h>
#endif

#define JOB_MSG_LEN 1024

typedef struct job {
    int index;
    ts_module *module;
    ts_tensor *input; /* borrowed */
    ts_device device;
    /* the caller's thread-local state, which a new thread does not inherit */
    bool grad_enabled;
    tsi_autocast_state autocast;
    int omp_threads;
    ts_cuda_stream *stream; /* the caller's current stream on a CUDA job's device */
    bool own_rng;           /* draw from (rng_seed, rng_offset) rather than the global generator */
    uint64_t rng_seed, rng_offset;
    /* results */
    ts_tensor *output; /* a reference the caller takes over */
    ts_status status;
    char message[JOB_MSG_LEN];
} job;

/* The forward proper; the job's thread has a clean error state on entry. On a CUDA device the
 * job also makes it the thread's current device, on the caller's current stream (PyTorch's worker:
 * `with torch.cuda.device(device), torch.cuda.stream(stream)`), so that "cuda" means the replica's
 * device and its kernels queue behind the caller's copies. */
static void run_forward(job *j) {
    const bool cuda = j->device.type == TS_CUDA;
    const int prev_cuda = cuda ? ts_cuda_current_device() : -1;
    if (cuda && ts_cuda_set_device(j->device.index) == TS_OK && j->stream)
        ts_cuda_set_stream(j->stream);
    ts_device_push(j->device);
    tsi_rng_stream outer = {0};
    if (j->own_rng) outer = tsi_rng_stream_begin(j->rng_seed, j->rng_offset);
    j->output = ts_error() == TS_OK ? ts_forward(j->module, j->input) : NULL;
    if (j->own_rng) tsi_rng_stream_end(outer);
    /* a worker has no scope open, so the result is its reference; in the caller's thread the
     * caller's scope owns it, and the job takes a reference of its own to match */
    if (ts_scope_depth() > 0) ts_retain(j->output);
    ts_device_pop();
    /* the caller's thread (running a single replica) gets its current device back */
    if (cuda && prev_cuda >= 0 && prev_cuda != j->device.index && ts_error() == TS_OK)
        ts_cuda_set_device(prev_cuda);
    j->status = ts_error();
    if (j->status != TS_OK) {
        snprintf(j->message, sizeof j->message, "%s", ts_error_message());
        ts_release(j->output);
        j->output = NULL;
    } else if (!j->output) {
        j->status = TS_ERR_STATE;
        snprintf(j->message, sizeof j->message, "forward of %s returned NULL without an error",
                 j->module->type_name);
    }
    ts_error_clear();
}

static void *worker_main(void *arg) {
    job *j = arg;
#ifdef TS_HAVE_OPENMP
    /* OpenMP's thread count is per thread: without this the worker uses the library default, and
     * the OpenMP build of OpenBLAS would resize its global thread state on each switch */
    if (j->omp_threads > 0) omp_set_num_threads(j->omp_threads);
#endif
    if (!j->grad_enabled) ts_no_grad_begin();
    tsi_autocast_state_set(&j->autocast);
    run_forward(j);
    ts_autocast_clear_cache(); /* casts cached by this thread die with it */
    if (!j->grad_enabled) ts_no_grad_end();
    ts_error_clear();
    return NULL;
}

/* The same in the caller's thread (a single replica, or no thread could be started). The caller's
 * state already is the job's; an error it had pending before stays the one it sees. */
static void run_inline(job *j) {
    ts_status pending = ts_error();
    char saved[JOB_MSG_LEN] = "";
    if (pending != TS_OK) snprintf(saved, sizeof saved, "%s", ts_error_message());
    ts_error_clear();
    run_forward(j);
    if (pending != TS_OK) tsi_error_set(pending, "%s", saved);
}

bool tsi_parallel_apply(ts_module *const *modules, ts_tensor *const *inputs,
                        const ts_device *devices, int n, ts_tensor **outputs) {
    job *jobs = calloc((size_t)n, sizeof *jobs);
    pthread_t *threads = calloc((size_t)n, sizeof *threads);
    bool *started = calloc((size_t)n, sizeof *started);
    if (!jobs || !threads || !started) {
        free(jobs);
        free(threads);
        free(started);
        tsi_error_set(TS_ERR_OOM, "DataParallel: out of host memory starting %d replicas", n);
        return false;
    }
    const bool grad = ts_grad_enabled();
    const tsi_autocast_state ac = tsi_autocast_state_get();
    int omp_threads = 0;
#ifdef TS_HAVE_OPENMP
    omp_threads = omp_get_max_threads();
#endif
    uint64_t rng_seed = 0, rng_base = 0;
    if (n > 1) tsi_rng_reserve((uint64_t)n * TSI_RNG_REPLICA_SPAN, &rng_seed, &rng_base);
    for (int i = 0; i < n; i++) {
        ts_device d = tsi_resolve_device(devices[i]);
        jobs[i] = (job){.index = i,
                        .module = modules[i],
                        .input = inputs[i],
                        .device = d,
                        .grad_enabled = grad,
                        .autocast = ac,
                        .omp_threads = omp_threads,
                        .own_rng = n > 1,
                        .rng_seed = rng_seed,
                        .rng_offset = rng_base + (uint64_t)i * TSI_RNG_REPLICA_SPAN,
                        .stream = d.type == TS_CUDA ? ts_cuda_current_stream(d.index) : NULL};
    }
    if (n > 1)
        for (int i = 0; i < n; i++)
            started[i] = pthread_create(&threads[i], NULL, worker_main, &jobs[i]) == 0;
    /* a thread that could not start runs here: slower, never wrong */
    for (int i = 0; i < n; i++)
        if (!started[i]) run_inline(&jobs[i]);
    for (int i = 0; i < n; i++)
        if (started[i]) pthread_join(threads[i], NULL);

    int failed = -1;
    for (int i = 0; i < n && failed < 0; i++)
        if (jobs[i].status != TS_OK) failed = i;
    if (failed >= 0) {
        const job *f = &jobs[failed];
        /* PyTorch's ExceptionWrapper: "Caught ... in replica 1 on device 1." */
        tsi_error_set(f->status, "DataParallel: in replica %d on device %s: %s", f->index,
                      ts_device_str(f->device), f->message);
    }
    for (int i = 0; i < n; i++) {
        if (failed >= 0) {
            ts_release(jobs[i].output);
            outputs[i] = NULL;
        } else {
            outputs[i] = jobs[i].output;
        }
    }
    free(jobs);
    free(threads);
    free(started);
    return failed < 0;
}
