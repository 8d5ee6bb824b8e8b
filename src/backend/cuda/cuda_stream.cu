/* cuda_stream.cu — streams (a current one per device and thread, pooled) and events, with the
 * public functions of tessera/cuda.h for them. */
#include <pthread.h>
#include <stdlib.h>

#include "backend/cuda/cuda_bridge.h"
#include "backend/cuda/cuda_device.h"

struct ts_cuda_event {
    cudaEvent_t handle;
    int device; /* of the first stream it was recorded on */
    bool timing;
    bool created;  /* the CUDA event exists (made on first record, on the stream's device) */
    bool recorded; /* recorded at least once */
};

/* Each device's legacy default stream, as an object (set up at start-up). */
static ts_cuda_stream g_default[TSC_MAX_DEVICES];
/* NULL: the default stream. Plain arrays, so no thread-local constructor runs per thread. A slot
 * also keeps the stream's generation when it was set: a stream freed since (by any thread) has
 * another, and the slot means the default stream again. */
static thread_local ts_cuda_stream *tl_current[TSC_MAX_DEVICES];
static thread_local unsigned tl_gen[TSC_MAX_DEVICES];
/* Freed streams waiting for reuse, per device. Never destroyed: the caching allocator may still
 * name one as the last user of a block. (pthreads and malloc rather than the C++ library, which
 * the backend does without.) */
static pthread_mutex_t g_pool_mu = PTHREAD_MUTEX_INITIALIZER;
static ts_cuda_stream *g_pool[TSC_MAX_DEVICES];

void tsc_streams_init(int count) {
    for (int i = 0; i < count && i < TSC_MAX_DEVICES; i++)
        g_default[i] = ts_cuda_stream{cudaStreamLegacy, i, true, false, 0, nullptr};
}

/* The calling thread's current stream on `index`; NULL for the default stream, also when the one
 * set was freed since. */
static ts_cuda_stream *current_set(int index) {
    ts_cuda_stream *s = tl_current[index];
    if (s && __atomic_load_n(&s->gen, __ATOMIC_ACQUIRE) != tl_gen[index])
        s = tl_current[index] = nullptr;
    return s;
}

ts_cuda_stream *tsc_stream_obj(int index) {
    ts_cuda_stream *s = current_set(index);
    return s ? s : &g_default[index];
}

cudaStream_t tsc_stream(int index) {
    ts_cuda_stream *s = current_set(index);
    return s ? s->handle : cudaStreamLegacy;
}

extern "C" uintptr_t tsc_current_stream_id(int device) { return (uintptr_t)tsc_stream_obj(device); }

/* ------------------------------------------------------------------ public API: streams */
extern "C" ts_cuda_stream *ts_cuda_stream_new(int device) {
    if (!tsc_api_device("cuda_stream_new", &device)) return nullptr;
    pthread_mutex_lock(&g_pool_mu);
    ts_cuda_stream *s = g_pool[device];
    if (s) g_pool[device] = s->next_free;
    pthread_mutex_unlock(&g_pool_mu);
    if (s) {
        s->next_free = nullptr;
        s->pooled = false;
        return s;
    }
    s = (ts_cuda_stream *)malloc(sizeof *s);
    if (s) *s = ts_cuda_stream{nullptr, device, false, false, 0, nullptr};
    if (!s) {
        tsi_error_set(TS_ERR_OOM, "cuda_stream_new: out of host memory");
        return nullptr;
    }
    /* non-blocking: no implicit synchronisation with the legacy default stream, like PyTorch's
     * streams; the order between streams is the user's (events) and the allocator's business */
    if (!tsc_set_device(device) ||
        !tsc_check(cudaStreamCreateWithFlags(&s->handle, cudaStreamNonBlocking),
                   "cuda_stream_new: cudaStreamCreateWithFlags", device)) {
        free(s);
        return nullptr;
    }
    return s;
}

extern "C" ts_status ts_cuda_stream_free(ts_cuda_stream *s) {
    if (!s || s->is_default) return TS_OK;
    pthread_mutex_lock(&g_pool_mu);
    bool twice = s->pooled;
    if (!twice) {
        /* every thread's slot that holds it (on its device) is the default stream from now on */
        __atomic_add_fetch(&s->gen, 1u, __ATOMIC_RELEASE);
        s->pooled = true;
        s->next_free = g_pool[s->device];
        g_pool[s->device] = s;
    }
    pthread_mutex_unlock(&g_pool_mu);
    if (twice) return tsi_error_set(TS_ERR_STATE, "cuda_stream_free: the stream was already freed");
    return TS_OK;
}

extern "C" ts_cuda_stream *ts_cuda_default_stream(int device) {
    if (!tsc_api_device("cuda_default_stream", &device)) return nullptr;
    return &g_default[device];
}

extern "C" ts_status ts_cuda_set_stream(ts_cuda_stream *s) {
    if (!tsc_api_available("cuda_set_stream")) return TS_ERR_DEVICE;
    if (!s) { /* every device of the calling thread back to its default stream */
        for (int i = 0; i < TSC_MAX_DEVICES; i++) tl_current[i] = nullptr;
        return TS_OK;
    }
    if (s->pooled) return tsi_error_set(TS_ERR_STATE, "cuda_set_stream: the stream was freed");
    tl_current[s->device] = s->is_default ? nullptr : s;
    tl_gen[s->device] = __atomic_load_n(&s->gen, __ATOMIC_ACQUIRE);
    return TS_OK;
}

extern "C" ts_cuda_stream *ts_cuda_current_stream(int device) {
    if (!tsc_api_device("cuda_current_stream", &device)) return nullptr;
    return tsc_stream_obj(device);
}

extern "C" int ts_cuda_stream_device(ts_cuda_stream *s) { return s ? s->device : -1; }

extern "C" void *ts_cuda_stream_handle(ts_cuda_stream *s) {
    return s ? (void *)s->handle : nullptr;
}

/* s, or the current stream of the current device for NULL */
static ts_cuda_stream *stream_or_current(const char *op, ts_cuda_stream *s) {
    if (!tsc_api_available(op)) return nullptr;
    return s ? s : tsc_stream_obj(tsc_current_device());
}

extern "C" ts_status ts_cuda_stream_synchronize(ts_cuda_stream *s) {
    if (!(s = stream_or_current("cuda_stream_synchronize", s))) return TS_ERR_DEVICE;
    if (!tsc_set_device(s->device)) return TS_ERR_CUDA;
    return tsc_check(cudaStreamSynchronize(s->handle), "cuda_stream_synchronize", s->device)
               ? TS_OK
               : TS_ERR_CUDA;
}

extern "C" bool ts_cuda_stream_query(ts_cuda_stream *s) {
    if (!(s = stream_or_current("cuda_stream_query", s))) return false;
    if (!tsc_set_device(s->device)) return false;
    cudaError_t e = cudaStreamQuery(s->handle);
    if (e == cudaErrorNotReady) {
        (void)cudaGetLastError();
        return false;
    }
    return tsc_check(e, "cuda_stream_query", s->device);
}

extern "C" ts_status ts_cuda_stream_wait_event(ts_cuda_stream *s, ts_cuda_event *e) {
    if (!e) return tsi_error_set(TS_ERR_ARG, "cuda_stream_wait_event: event is NULL");
    if (!(s = stream_or_current("cuda_stream_wait_event", s))) return TS_ERR_DEVICE;
    if (!e->recorded) return TS_OK; /* nothing captured: nothing to wait for (PyTorch) */
    if (!tsc_set_device(s->device)) return TS_ERR_CUDA;
    return tsc_check(cudaStreamWaitEvent(s->handle, e->handle, 0), "cuda_stream_wait_event",
                     s->device)
               ? TS_OK
               : TS_ERR_CUDA;
}

/* ------------------------------------------------------------------ public API: events */
extern "C" ts_cuda_event *ts_cuda_event_new(bool enable_timing) {
    if (!tsc_api_available("cuda_event_new")) return nullptr;
    ts_cuda_event *e = (ts_cuda_event *)malloc(sizeof *e);
    if (!e) {
        tsi_error_set(TS_ERR_OOM, "cuda_event_new: out of host memory");
        return nullptr;
    }
    *e = ts_cuda_event{nullptr, -1, enable_timing, false, false};
    return e;
}

extern "C" ts_status ts_cuda_event_record(ts_cuda_event *e, ts_cuda_stream *s) {
    if (!e) return tsi_error_set(TS_ERR_ARG, "cuda_event_record: event is NULL");
    if (!(s = stream_or_current("cuda_event_record", s))) return TS_ERR_DEVICE;
    if (e->created && e->device != s->device)
        return tsi_error_set(TS_ERR_ARG,
                             "cuda_event_record: the event belongs to cuda:%d but the stream to "
                             "cuda:%d",
                             e->device, s->device);
    if (!tsc_set_device(s->device)) return TS_ERR_CUDA;
    if (!e->created) {
        unsigned flags = e->timing ? cudaEventDefault : cudaEventDisableTiming;
        if (!tsc_check(cudaEventCreateWithFlags(&e->handle, flags), "cuda_event_record", s->device))
            return TS_ERR_CUDA;
        e->created = true;
        e->device = s->device;
    }
    if (!tsc_check(cudaEventRecord(e->handle, s->handle), "cuda_event_record", s->device))
        return TS_ERR_CUDA;
    e->recorded = true;
    return TS_OK;
}

extern "C" ts_status ts_cuda_event_synchronize(ts_cuda_event *e) {
    if (!e) return tsi_error_set(TS_ERR_ARG, "cuda_event_synchronize: event is NULL");
    if (!e->recorded) return TS_OK;
    return tsc_check(cudaEventSynchronize(e->handle), "cuda_event_synchronize", e->device)
               ? TS_OK
               : TS_ERR_CUDA;
}

extern "C" bool ts_cuda_event_query(ts_cuda_event *e) {
    if (!e || !e->recorded) return true;
    cudaError_t r = cudaEventQuery(e->handle);
    if (r == cudaErrorNotReady) {
        (void)cudaGetLastError();
        return false;
    }
    return tsc_check(r, "cuda_event_query", e->device);
}

extern "C" ts_status ts_cuda_event_elapsed_ms(ts_cuda_event *start, ts_cuda_event *end, float *ms) {
    static const char op[] = "cuda_event_elapsed_ms";
    if (!start || !end || !ms) return tsi_error_set(TS_ERR_ARG, "%s: NULL argument", op);
    if (!start->timing || !end->timing)
        return tsi_error_set(TS_ERR_ARG, "%s: both events must be made with enable_timing", op);
    if (!start->recorded || !end->recorded)
        return tsi_error_set(TS_ERR_STATE, "%s: both events must be recorded first", op);
    if (start->device != end->device)
        return tsi_error_set(TS_ERR_ARG, "%s: the events belong to cuda:%d and cuda:%d", op,
                             start->device, end->device);
    if (!tsc_check(cudaEventSynchronize(end->handle), op, end->device)) return TS_ERR_CUDA;
    return tsc_check(cudaEventElapsedTime(ms, start->handle, end->handle), op, end->device)
               ? TS_OK
               : TS_ERR_CUDA;
}

extern "C" void ts_cuda_event_free(ts_cuda_event *e) {
    if (!e) return;
    /* a recorded event may still be pending: the runtime releases it once it completes */
    if (e->created) (void)cudaEventDestroy(e->handle);
    free(e);
}
