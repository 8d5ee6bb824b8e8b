/* tessera/saved_hooks.h — hooks on the tensors autograd saves for backward (PyTorch's
 * torch.autograd.graph.saved_tensors_hooks) and activation offload built on them
 * (torch.autograd.graph.save_on_cpu), issue 55 part 2. */
#ifndef TESSERA_SAVED_HOOKS_H
#define TESSERA_SAVED_HOOKS_H

#include "tessera.h"

#ifdef __cplusplus
extern "C" {
#endif

/* pack(ctx, t) runs when an op saves t for backward (t borrowed; inside a scope the library opens
 * and closes around the call, so a handle holding a tensor must ts_retain it) and returns a
 * handle, non-NULL; NULL means failure (set an error): the tensor is then saved as itself and the
 * error stays pending. unpack(ctx, handle) runs when backward needs it and returns the tensor,
 * which the library retains (a scope-owned result, as public functions give, is fine); NULL +
 * error fails the backward. free_packed(ctx, handle) runs once when the graph frees the saved
 * slot (may be NULL). ctx_free(ctx), when given, runs once the hooks are popped and no handle is
 * left. Both hooks run with grad mode off. */
typedef void *(*ts_saved_pack_fn)(void *ctx, ts_tensor *t);
typedef ts_tensor *(*ts_saved_unpack_fn)(void *ctx, void *handle);
typedef void (*ts_saved_free_fn)(void *ctx, void *handle);
/* Thread-local and nestable: the innermost hooks (or checkpoint, whichever was opened last) take
 * the saves. A checkpoint's recomputation always collects its own saves. */
TS_API ts_status ts_saved_tensors_hooks_push(ts_saved_pack_fn pack, ts_saved_unpack_fn unpack,
                                             ts_saved_free_fn free_packed, void *ctx,
                                             void (*ctx_free)(void *ctx));
TS_API ts_status ts_saved_tensors_hooks_pop(void); /* TS_ERR_STATE when none is pushed */

/* Activation offload: while the scope is open, every saved tensor of >= min_bytes on a device other
 * than the cpu (parameters excepted: they stay on the device anyway) is copied to host memory
 * (page-locked with pin_memory) in the forward, and copied back when backward needs it, with its
 * own strides and offset (views of one storage share one copy of it); with pin_memory,
 * unpacking one also starts the asynchronous copies of the `prefetch` tensors saved just before it
 * (the ones backward needs next). Gradients are bit-identical to a run without it (the kernels
 * see the layouts they see without it). Host memory running out keeps that tensor on its device
 * (no error). */
typedef struct ts_save_on_cpu_opts {
    size_t min_bytes; /* smaller tensors stay where they are (0: all) */
    bool pin_memory;
    int prefetch; /* tensors prefetched ahead in backward (pin_memory only); < 0: 0 */
} ts_save_on_cpu_opts;
TS_API ts_status ts_save_on_cpu_begin(ts_save_on_cpu_opts opts);
TS_API ts_status ts_save_on_cpu_end(void); /* TS_ERR_STATE when the innermost hooks are not one */

/* Process-wide counters of the offload since start-up or the last reset. */
typedef struct ts_save_on_cpu_stats {
    /* host copies made (and their bytes): one per device storage (at one version) saved from,
     * shared by the saved views of it */
    uint64_t offloaded, offloaded_bytes;
    uint64_t kept;                 /* saved tensors left where they were */
    uint64_t restored, prefetched; /* copied back (of those, ahead of need) */
} ts_save_on_cpu_stats;
TS_API void ts_save_on_cpu_stats_get(ts_save_on_cpu_stats *out);
TS_API void ts_save_on_cpu_reset_stats(void);

#ifdef __cplusplus
}
#endif

#endif /* TESSERA_SAVED_HOOKS_H */
