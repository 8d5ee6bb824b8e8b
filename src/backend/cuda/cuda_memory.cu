/* cuda_memory.cu — device memory for the "cuda" backend: raw allocation, copies (peer copies
 * between devices), the caching allocator's stream hooks, scratch memory, pinned host memory. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/cuda/cuda_bridge.h"
#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_memory.h"

/* ------------------------------------------------------------------ raw memory */
static int cuda_device_count(const ts_backend *be) { return tsc_device_count(); }

/* Also called while formatting an out-of-memory message, so it records no error of its own (the
 * first error wins and must stay the OOM). */
static void cuda_memory_info(const ts_backend *be, int index, size_t *free_bytes,
                             size_t *total_bytes) {
    size_t f = 0, t = 0;
    if (cudaSetDevice(index) != cudaSuccess || cudaMemGetInfo(&f, &t) != cudaSuccess) {
        (void)cudaGetLastError();
        f = t = 0;
    }
    if (free_bytes) *free_bytes = f;
    if (total_bytes) *total_bytes = t;
}

static void *cuda_raw_alloc(const ts_backend *be, int index, size_t nbytes) {
    if (!tsc_set_device(index)) return nullptr;
    void *p = nullptr;
    cudaError_t e = cudaMalloc(&p, nbytes ? nbytes : 1);
    if (e == cudaErrorMemoryAllocation) { /* the allocator frees its cache, retries, reports */
        (void)cudaGetLastError();
        return nullptr;
    }
    /* anything else (a broken context, say) is a CUDA error, not an out-of-memory */
    return tsc_check(e, "cudaMalloc", index) ? p : nullptr;
}

static void cuda_raw_free(const ts_backend *be, int index, void *p, size_t nbytes) {
    if (!p || !tsc_set_device(index)) return;
    tsc_check(cudaFree(p), "cudaFree", index);
}

/* Host <-> device copies of the backend interface are synchronous for the host: queued on the
 * current stream behind the work that produced the data, then waited for (PyTorch's blocking
 * copy). Page-locked sources make no difference here; ts_to_async is the asynchronous form. */
static void cuda_copy_h2d(const ts_backend *be, int index, void *dst, const void *src, size_t n) {
    if (!n || !tsc_set_device(index)) return;
    cudaStream_t s = tsc_stream(index);
    if (tsc_check(cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, s), "copy to cuda", index))
        tsc_check(cudaStreamSynchronize(s), "copy to cuda", index);
}

static void cuda_copy_d2h(const ts_backend *be, int index, void *dst, const void *src, size_t n) {
    if (!n || !tsc_set_device(index)) return;
    cudaStream_t s = tsc_stream(index);
    if (tsc_check(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToHost, s), "copy from cuda", index))
        tsc_check(cudaStreamSynchronize(s), "copy from cuda (or an earlier kernel)", index);
}

/* Peer access (direct copies over NVLink / PCIe instead of staging through the host) is enabled
 * once per ordered pair, when the hardware allows it. 0 unknown, 1 on, 2 not possible. (pthreads
 * and malloc here rather than the C++ library, which the backend does without.) */
static pthread_mutex_t g_peer_mu = PTHREAD_MUTEX_INITIALIZER;
static unsigned char g_peer[TSC_MAX_DEVICES][TSC_MAX_DEVICES];

static void enable_peer_access(int from, int to) {
    pthread_mutex_lock(&g_peer_mu);
    if (!g_peer[from][to]) {
        int can = 0;
        g_peer[from][to] = 2;
        if (cudaDeviceCanAccessPeer(&can, from, to) == cudaSuccess && can && tsc_set_device(from)) {
            cudaError_t e = cudaDeviceEnablePeerAccess(to, 0);
            if (e == cudaSuccess || e == cudaErrorPeerAccessAlreadyEnabled) g_peer[from][to] = 1;
        }
        (void)cudaGetLastError(); /* not possible after all: copies still work, via the host */
    }
    pthread_mutex_unlock(&g_peer_mu);
}

/* `waiter` (on its device) waits for the work queued on `signaller` so far. */
static bool stream_after(cudaStream_t waiter, int wdev, cudaStream_t signaller, int sdev,
                         const char *what) {
    cudaEvent_t ev;
    if (!tsc_set_device(sdev) ||
        !tsc_check(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), what, sdev))
        return false;
    bool ok = tsc_check(cudaEventRecord(ev, signaller), what, sdev) && tsc_set_device(wdev) &&
              tsc_check(cudaStreamWaitEvent(waiter, ev, 0), what, wdev);
    (void)cudaEventDestroy(ev); /* released by the runtime once it has fired */
    return ok;
}

/* Same device: a stream-ordered copy on the current stream. Between devices (PyTorch's scheme):
 * the copy runs on the source device's current stream after the destination's current stream
 * caught up (it may still be using the destination memory), and the destination's stream waits for
 * the copy, so work queued after it on either side sees the data. */
static void cuda_copy_d2d(const ts_backend *be, int dst_index, void *dst, int src_index,
                          const void *src, size_t n) {
    if (!n) return;
    static const char what[] = "copy between cuda devices";
    if (dst_index == src_index) {
        if (!tsc_set_device(dst_index)) return;
        cudaStream_t s = tsc_stream(dst_index);
        const char *d = (const char *)dst, *sp = (const char *)src;
        if (d != sp && d < sp + n && sp < d + n) { /* overlapping views of one storage */
            void *tmp = tsc_scratch_alloc(dst_index, n);
            if (!tmp) return;
            if (tsc_check(cudaMemcpyAsync(tmp, src, n, cudaMemcpyDeviceToDevice, s), what,
                          dst_index))
                tsc_check(cudaMemcpyAsync(dst, tmp, n, cudaMemcpyDeviceToDevice, s), what,
                          dst_index);
            tsc_scratch_free(dst_index, tmp);
            return;
        }
        tsc_check(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToDevice, s), what, dst_index);
        return;
    }
    enable_peer_access(src_index, dst_index);
    cudaStream_t ss = tsc_stream(src_index), ds = tsc_stream(dst_index);
    if (!stream_after(ss, src_index, ds, dst_index, what) || !tsc_set_device(src_index)) return;
    if (!tsc_check(cudaMemcpyPeerAsync(dst, dst_index, src, src_index, n, ss), what, src_index))
        return;
    stream_after(ds, dst_index, ss, src_index, what);
}

static void cuda_memset_zero(const ts_backend *be, int index, void *p, size_t n) {
    if (!n || !tsc_set_device(index)) return;
    tsc_check(cudaMemsetAsync(p, 0, n, tsc_stream(index)), "memset on cuda", index);
}

static void cuda_synchronize(const ts_backend *be, int index) {
    if (!tsc_set_device(index)) return;
    tsc_check(cudaDeviceSynchronize(), "cuda synchronize", index);
}

/* ------------------------------------------------------------------ allocator stream hooks
 * Stream ids of the device allocators are ts_cuda_stream pointers (never freed, see
 * cuda_device.h); the pinned allocator's are copy events (below). */
static pthread_mutex_t g_order_mu = PTHREAD_MUTEX_INITIALIZER;
static cudaEvent_t g_order_ev[TSC_MAX_DEVICES]; /* reusable: a wait captures the event's state */

static uintptr_t hook_current_stream(int index) { return (uintptr_t)tsc_stream_obj(index); }

/* `to` is always a stream here (device memory is reused by device work); `from` may belong to
 * another device (a peer copy's stream recorded on its destination). */
static void hook_stream_wait(int index, uintptr_t from, uintptr_t to) {
    const ts_cuda_stream *f = (const ts_cuda_stream *)from;
    const ts_cuda_stream *t = (const ts_cuda_stream *)to;
    if (!tsc_set_device(f->device)) return;
    /* `from` idle: its uses are done, and an event recorded now would make `to` wait for nothing
     * at best (at worst for work queued between the check and the record) */
    const cudaError_t q = cudaStreamQuery(f->handle);
    if (q == cudaSuccess) return;
    if (q == cudaErrorNotReady) (void)cudaGetLastError();
    pthread_mutex_lock(&g_order_mu);
    cudaEvent_t *ev = &g_order_ev[f->device];
    bool ok = true;
    if (!*ev && !tsc_check(cudaEventCreateWithFlags(ev, cudaEventDisableTiming),
                           "caching allocator: event", f->device)) {
        *ev = nullptr;
        ok = false;
    }
    if (ok && tsc_check(cudaEventRecord(*ev, f->handle), "caching allocator: event", f->device) &&
        tsc_set_device(t->device))
        tsc_check(cudaStreamWaitEvent(t->handle, *ev, 0), "caching allocator: stream wait",
                  t->device);
    pthread_mutex_unlock(&g_order_mu);
}

static void hook_device_wait(int index) {
    if (tsc_set_device(index))
        tsc_check(cudaDeviceSynchronize(), "caching allocator: synchronize", index);
}

static const ts_alloc_hooks g_device_hooks = {
    hook_current_stream, hook_stream_wait, hook_device_wait, true, nullptr, true};

extern "C" const ts_alloc_hooks *tsc_device_alloc_hooks(void) { return &g_device_hooks; }

/* ------------------------------------------------------------------ scratch memory */
/* Live scratch blocks by address: a short list (a kernel holds one or two at a time). */
typedef struct scratch_entry {
    void *ptr;
    ts_block *block;
    struct scratch_entry *next;
} scratch_entry;
static pthread_mutex_t g_scratch_mu = PTHREAD_MUTEX_INITIALIZER;
static scratch_entry *g_scratch;

void *tsc_scratch_alloc(int index, size_t nbytes) {
    bool graph;
    void *gp = tsc_graph_scratch_alloc(index, nbytes, &graph);
    if (graph) return gp;
    ts_allocator *a = tsi_cuda_allocator(index);
    char msg[TS_OOM_MSG_LEN] = "";
    ts_block *b = a ? tsi_allocator_alloc(a, nbytes, msg, sizeof msg) : nullptr;
    if (!b) {
        tsi_error_set(TS_ERR_OOM, "cuda scratch memory: out of memory on cuda:%d: %s", index,
                      a ? msg : "no allocator");
        return nullptr;
    }
    scratch_entry *e = (scratch_entry *)malloc(sizeof *e);
    if (!e) {
        tsi_allocator_release(a, b);
        tsi_error_set(TS_ERR_OOM, "cuda scratch memory: out of host memory");
        return nullptr;
    }
    e->ptr = tsi_block_ptr(b);
    e->block = b;
    pthread_mutex_lock(&g_scratch_mu);
    e->next = g_scratch;
    g_scratch = e;
    pthread_mutex_unlock(&g_scratch_mu);
    return e->ptr;
}

void *tsc_table_alloc(int index, size_t nbytes) {
    bool graph;
    void *gp = tsc_graph_table_alloc(index, nbytes, &graph);
    return graph ? gp : tsc_scratch_alloc(index, nbytes);
}

void tsc_scratch_free(int index, void *p) {
    if (!p || tsc_graph_scratch_free(index, p)) return;
    scratch_entry *found = nullptr;
    pthread_mutex_lock(&g_scratch_mu);
    for (scratch_entry **e = &g_scratch; *e; e = &(*e)->next) {
        if ((*e)->ptr == p) {
            found = *e;
            *e = found->next;
            break;
        }
    }
    pthread_mutex_unlock(&g_scratch_mu);
    if (!found) return; /* not ours: a caller's bug, but never worth a crash */
    tsi_allocator_release(tsi_cuda_allocator(index), found->block);
    free(found);
}

/* ------------------------------------------------------------------ pinned host memory */
static void pinned_memory_info(const ts_backend *be, int index, size_t *free_bytes,
                               size_t *total_bytes) {
    long page = sysconf(_SC_PAGESIZE), total = sysconf(_SC_PHYS_PAGES);
    long avail = sysconf(_SC_AVPHYS_PAGES);
    if (page < 0) page = 0;
    if (total_bytes) *total_bytes = total > 0 ? (size_t)total * (size_t)page : 0;
    if (free_bytes) *free_bytes = avail > 0 ? (size_t)avail * (size_t)page : 0;
}

static void *pinned_raw_alloc(const ts_backend *be, int index, size_t nbytes) {
    void *p = nullptr;
    /* portable: usable by copies to and from every device, not just the current one */
    cudaError_t e = cudaHostAlloc(&p, nbytes ? nbytes : 1, cudaHostAllocPortable);
    if (e == cudaErrorMemoryAllocation) {
        (void)cudaGetLastError();
        return nullptr;
    }
    return tsc_check(e, "cudaHostAlloc", tsc_current_device()) ? p : nullptr;
}

static void pinned_raw_free(const ts_backend *be, int index, void *p, size_t nbytes) {
    if (p) tsc_check(cudaFreeHost(p), "cudaFreeHost", tsc_current_device());
}

static ts_backend g_pinned_backend; /* filled by tsc_install_memory, at start-up */

extern "C" const ts_backend *tsc_pinned_backend(void) {
    return tsc_device_count() > 0 ? &g_pinned_backend : nullptr;
}

/* ------------------------------------------------------------------ pinned memory: uses
 * A use of a pinned block by the GPU (an asynchronous copy from or to it) is an event recorded on
 * the copy's stream right after the copy, as PyTorch's CachingHostAllocator does. The pinned
 * allocator keeps these uses as its stream ids: a token naming a slot of the pool below and the
 * slot's generation. Reusing the block waits for those events alone (cudaEventSynchronize, after
 * the allocator has dropped its lock), never for the streams, which may hold much later work.
 * A slot is recycled (its generation bumped) only once its event is known to be complete, so a
 * token with a stale generation stands for work already done. Events are never destroyed; the
 * pool grows to the number of copies in flight at once. The hooks never switch the calling
 * thread's device (a loader's worker thread, say, keeps the one it had). */
typedef struct use_slot {
    cudaEvent_t ev; /* created on `device`, on first use */
    int device;
    uint32_t gen;
    bool busy;           /* recorded, not yet known complete */
    cudaStream_t stream; /* where it was recorded, and when (a global count) */
    uint64_t seq;
} use_slot;
static_assert(sizeof(uintptr_t) >= 8, "a use token packs a slot index and a generation");

static pthread_mutex_t g_use_mu = PTHREAD_MUTEX_INITIALIZER;
static use_slot *g_use;
static int g_nuse, g_use_cap;
static uint64_t g_use_seq;

static uintptr_t use_token(int slot, uint32_t gen) {
    return ((uintptr_t)(slot + 1) << 32) | gen; /* never 0: 0 is the host */
}

/* Under g_use_mu: marks the busy slots whose events have completed free again. */
static void use_reclaim_locked(void) {
    for (int i = 0; i < g_nuse; i++) {
        if (!g_use[i].busy) continue;
        cudaError_t e = cudaEventQuery(g_use[i].ev);
        if (e == cudaErrorNotReady) {
            (void)cudaGetLastError();
            continue;
        }
        (void)cudaGetLastError(); /* an error: the copy is not running any more either */
        g_use[i].busy = false;
        g_use[i].gen++;
    }
}

/* Under g_use_mu: a free slot of `device` with its event, or -1 (error recorded). */
static int use_slot_locked(int device) {
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < g_nuse; i++)
            if (!g_use[i].busy && g_use[i].device == device) return i;
        if (pass == 0) use_reclaim_locked();
    }
    if (g_nuse == g_use_cap) {
        int cap = g_use_cap ? 2 * g_use_cap : 16;
        use_slot *grown = (use_slot *)realloc(g_use, (size_t)cap * sizeof *grown);
        if (!grown) {
            tsi_error_set(TS_ERR_OOM, "pinned memory: out of host memory for copy events");
            return -1;
        }
        g_use = grown;
        g_use_cap = cap;
    }
    use_slot *u = &g_use[g_nuse];
    if (!tsc_check(cudaEventCreateWithFlags(&u->ev, cudaEventDisableTiming),
                   "pinned memory: copy event", device))
        return -1;
    u->device = device;
    u->gen = 0;
    u->busy = false;
    return g_nuse++;
}

extern "C" uintptr_t tsc_pinned_use_record(int device) {
    if (!tsc_set_device(device)) return 0;
    cudaStream_t st = tsc_stream(device);
    pthread_mutex_lock(&g_use_mu);
    const int i = use_slot_locked(device);
    uintptr_t token = 0;
    if (i >= 0 &&
        tsc_check(cudaEventRecord(g_use[i].ev, st), "pinned memory: copy event", device)) {
        g_use[i].busy = true;
        g_use[i].stream = st;
        g_use[i].seq = ++g_use_seq;
        token = use_token(i, g_use[i].gen);
    }
    pthread_mutex_unlock(&g_use_mu);
    /* no event: the block is safe to reuse only once the stream is past the copy */
    if (!token) tsc_check(cudaStreamSynchronize(st), "pinned memory: waiting for a copy", device);
    return token;
}

/* The pinned allocator's stream_wait: the host (to == 0) waits for one use's event. */
static void pinned_use_wait(int index, uintptr_t from, uintptr_t to) {
    const int i = (int)(from >> 32) - 1;
    const uint32_t gen = (uint32_t)from;
    pthread_mutex_lock(&g_use_mu);
    const bool pending = i >= 0 && i < g_nuse && g_use[i].busy && g_use[i].gen == gen;
    const cudaEvent_t ev = pending ? g_use[i].ev : nullptr;
    const int device = pending ? g_use[i].device : 0;
    pthread_mutex_unlock(&g_use_mu);
    if (!pending) return; /* recycled: its copy is done */
    /* if the slot is recycled and recorded again meanwhile, this waits for the later copy too:
     * longer, never too short */
    if (!tsc_check(cudaEventSynchronize(ev), "pinned memory: waiting for a copy", device)) return;
    pthread_mutex_lock(&g_use_mu);
    if (g_use[i].busy && g_use[i].gen == gen) {
        g_use[i].busy = false;
        g_use[i].gen++;
    }
    pthread_mutex_unlock(&g_use_mu);
}

/* The pinned allocator's covers: y is done (its slot recycled), or x was recorded after y on the
 * same stream (streams run in order), so a block keeps one pending use per stream however many
 * copies read it. Called under the allocator's lock; takes g_use_mu after it, as everything
 * does. */
static bool pinned_use_covers(int index, uintptr_t x, uintptr_t y) {
    const int ix = (int)(x >> 32) - 1, iy = (int)(y >> 32) - 1;
    pthread_mutex_lock(&g_use_mu);
    const bool y_live = iy >= 0 && iy < g_nuse && g_use[iy].busy && g_use[iy].gen == (uint32_t)y;
    const bool x_live = ix >= 0 && ix < g_nuse && g_use[ix].busy && g_use[ix].gen == (uint32_t)x;
    const bool later = x_live && y_live && g_use[ix].device == g_use[iy].device &&
                       g_use[ix].stream == g_use[iy].stream && g_use[ix].seq > g_use[iy].seq;
    pthread_mutex_unlock(&g_use_mu);
    return !y_live || later;
}

/* The pinned allocator's device_wait (a block used by many copies; before the cache goes back to
 * the driver): every copy in flight, not the devices' other work. */
static void pinned_wait_all(int index) {
    pthread_mutex_lock(&g_use_mu);
    const int n = g_nuse;
    uintptr_t *tokens = (uintptr_t *)malloc((size_t)(n ? n : 1) * sizeof *tokens);
    int m = 0;
    for (int i = 0; tokens && i < n; i++)
        if (g_use[i].busy) tokens[m++] = use_token(i, g_use[i].gen);
    pthread_mutex_unlock(&g_use_mu);
    if (!tokens) { /* no memory for the list: wait for every device instead */
        int prev = -1;
        if (cudaGetDevice(&prev) != cudaSuccess) prev = -1;
        for (int d = 0; d < tsc_device_count(); d++)
            if (cudaSetDevice(d) == cudaSuccess) (void)cudaDeviceSynchronize();
        if (prev >= 0) (void)cudaSetDevice(prev);
        (void)cudaGetLastError();
        return;
    }
    for (int k = 0; k < m; k++) pinned_use_wait(index, tokens[k], 0);
    free(tokens);
}

static uintptr_t pinned_current_stream(int index) { return 0; /* the host */ }

static const ts_alloc_hooks g_pinned_hooks = {
    pinned_current_stream, pinned_use_wait, pinned_wait_all, false, pinned_use_covers, false};

extern "C" const ts_alloc_hooks *tsc_pinned_alloc_hooks(void) { return &g_pinned_hooks; }

extern "C" bool tsc_copy_h2d_async(int device, void *dst, const void *src, size_t n) {
    if (!n) return true;
    if (!tsc_set_device(device)) return false;
    return tsc_check(cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, tsc_stream(device)),
                     "asynchronous copy to cuda", device);
}

extern "C" bool tsc_copy_d2h_async(int device, void *dst, const void *src, size_t n) {
    if (!n) return true;
    if (!tsc_set_device(device)) return false;
    return tsc_check(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToHost, tsc_stream(device)),
                     "asynchronous copy from cuda", device);
}

bool tsc_copy_table_h2d(int index, void *dst, const void *src, size_t n, const char *what) {
    if (!n) return true;
    if (!tsc_set_device(index)) return false;
    bool graph;
    const bool graph_ok = tsc_graph_table_h2d(index, dst, src, n, what, &graph);
    if (graph) return graph_ok;
    cudaStream_t st = tsc_stream(index);
    ts_allocator *pa = tsi_pinned_allocator();
    ts_block *b = pa ? tsi_allocator_alloc(pa, n, nullptr, 0) : nullptr;
    if (!b) /* no pinned memory: from pageable memory, and src must outlive the copy */
        return tsc_check(cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, st), what, index) &&
               tsc_check(cudaStreamSynchronize(st), what, index);
    memcpy(tsi_block_ptr(b), src, n);
    const bool ok = tsc_check(cudaMemcpyAsync(dst, tsi_block_ptr(b), n, cudaMemcpyHostToDevice, st),
                              what, index);
    /* the block goes back at once; it is handed out again only after this copy's event */
    if (ok) tsi_allocator_record_stream(pa, b, tsc_pinned_use_record(index));
    tsi_allocator_release(pa, b);
    return ok;
}

/* ------------------------------------------------------------------ the table */
void tsc_install_memory(ts_backend *be) {
    be->device_count = cuda_device_count;
    be->memory_info = cuda_memory_info;
    be->raw_alloc = cuda_raw_alloc;
    be->raw_free = cuda_raw_free;
    be->copy_h2d = cuda_copy_h2d;
    be->copy_d2h = cuda_copy_d2h;
    be->copy_d2d = cuda_copy_d2d;
    be->memset_zero = cuda_memset_zero;
    be->synchronize = cuda_synchronize;
    g_pinned_backend.name = "cuda_pinned";
    g_pinned_backend.type = TS_CPU;
    g_pinned_backend.memory_info = pinned_memory_info;
    g_pinned_backend.raw_alloc = pinned_raw_alloc;
    g_pinned_backend.raw_free = pinned_raw_free;
}
