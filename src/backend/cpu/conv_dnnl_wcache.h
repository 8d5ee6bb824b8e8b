/* conv_dnnl_wcache.h — convolution weights already reordered into oneDNN's blocked layouts, kept
 * across calls for weights that do not change (inference), so that a forward skips the reorder.
 * Only where the build found oneDNN. */
#ifndef TS_CONV_DNNL_WCACHE_H
#define TS_CONV_DNNL_WCACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/cpu/conv_dnnl.h"

#ifdef TS_HAVE_DNNL
#include <dnnl.h>

typedef struct tsi_wcache_entry tsi_wcache_entry;

/* Writes the weight, reordered, into buf (bytes of the layout); false when that failed. */
typedef bool (*tsi_wcache_fill_fn)(void *ctx, void *buf);

/* The weight named by id in layout md (of `bytes`): the cached copy, or — when id was asked for
 * before (a weight met once, such as a contiguous copy made for one call, is never kept) — a new
 * one written by fill and kept. NULL when nothing is cached (first sight, no memory, fill failed):
 * the caller reorders into its scratch as without the cache. Otherwise *ref holds the copy alive
 * while the caller's primitive runs: give it back with tsi_wcache_release. Thread-safe. */
const void *tsi_wcache_get(const tsi_conv_weight_id *id, const dnnl_memory_desc_t *md, size_t bytes,
                           tsi_wcache_fill_fn fill, void *ctx, tsi_wcache_entry **ref);
void tsi_wcache_release(tsi_wcache_entry *ref); /* NULL-safe */
#endif

#endif /* TS_CONV_DNNL_WCACHE_H */
