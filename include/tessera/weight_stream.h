/* tessera/weight_stream.h — weight streaming (issue 55, part 4): a model whose parameters and
 * buffers live on the host runs on a device by copying each unit's weights in just before the unit
 * runs, `prefetch` units ahead, and freeing them after it ran. Include it directly (after
 * tessera.h). docs/MEMORY_PLANNING.md ("Weight streaming") has the rules. */
#ifndef TESSERA_WEIGHT_STREAM_H
#define TESSERA_WEIGHT_STREAM_H

#include "tessera.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ts_stream_opts {
    /* units whose copies are started ahead of the one running (0: each unit's copy is made just
     * before it runs). The device holds at most prefetch + 1 units' weights at once. */
    int prefetch;
} ts_stream_opts;

/* Streams m (a root module) on dev (a sim or cuda device): its parameters and buffers move to the
 * host (pinned where the host allocator supports it; the same handles, dtypes and values), and
 * each forward runs its units (as ts_module_place cuts them: a Sequential's children, a GPT's
 * embeddings, blocks and final norm, a ResNet's stem, blocks, pool and classifier; any other
 * module is one unit) on dev, each unit's weights copied in (ts_to_async: queued on the copy
 * engine, overlapping the compute of the units before) just before it runs and freed after. The
 * input moves to dev; the output stays there.
 * Training: with grad mode on, a unit's weights are copied in again before its backward and freed
 * after it; the gradients flow back to the host parameters' .grad (their copy is differentiable),
 * so an optimizer over ts_module_parameters(m) steps the host weights. A checkpointed module in a
 * unit recomputes in its backward from the unit's copies.
 * Errors: TS_ERR_ARG (NULL module, a child module, prefetch < 0, a model without tensors),
 * TS_ERR_DEVICE (dev not a sim or cuda device, or not available), TS_ERR_STATE (m streamed
 * already, or placed by ts_module_place), TS_ERR_OOM (host memory: nothing changed). */
TS_API ts_status ts_module_stream(ts_module *m, ts_device dev, ts_stream_opts opts);
/* Puts m back as it was: every parameter and buffer (and gradient) on the device it had before
 * ts_module_stream, the hooks removed. TS_ERR_ARG when m is not streamed; TS_ERR_OOM (nothing
 * changed) when the device cannot hold the model. */
TS_API ts_status ts_module_unstream(ts_module *m);
/* Whether m is streamed. */
TS_API bool ts_module_is_streamed(ts_module *m);

typedef struct ts_stream_stats {
    int units;                 /* units the model was cut into */
    uint64_t copies;           /* tensor copies to the device (forward and backward) */
    uint64_t bytes;            /* their bytes */
    uint64_t unit_fetches;     /* units copied in (forward and backward) */
    uint64_t prefetched;       /* of those, started ahead of their unit (prefetch) */
    uint64_t backward_fetches; /* of the unit fetches, those for a backward */
    int max_resident_units;    /* most units whose weights were on the device at once */
    size_t max_resident_bytes; /* most bytes of streamed weights on the device at once */
    uint64_t cache_flushes; /* out of device memory: the allocator's cache emptied, tried again */
} ts_stream_stats;
/* Counters since ts_module_stream or the last reset; TS_ERR_ARG when m is not streamed. */
TS_API ts_status ts_module_stream_stats(ts_module *m, ts_stream_stats *out);
TS_API ts_status ts_module_stream_reset_stats(ts_module *m);

#ifdef __cplusplus
}
#endif

#endif /* TESSERA_WEIGHT_STREAM_H */
