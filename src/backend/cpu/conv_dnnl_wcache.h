/* conv_dnnl_wcache.h — convolution weights already rearranged for a kernel (reordered into
 * oneDNN's blocked layouts, or packed for the direct kernels of kern_conv_direct.c), kept across
 * calls for weights that do not change (inference), so that a forward skips the rearrangement. */
#ifndef TS_CONV_DNNL_WCACHE_H
#define TS_CONV_DNNL_WCACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/cpu/conv_dnnl.h"

typedef struct tsi_wcache_entry tsi_wcache_entry;

/* Writes the weight, reordered, into buf (bytes of the layout); false when that failed. */
typedef bool (*tsi_wcache_fill_fn)(void *ctx, void *buf);

/* The layout a copy is in: bytes compared as they are (a oneDNN memory descriptor, the direct
 * kernels' packing), at most TSI_WCACHE_LAYOUT_MAX of them. Two layouts that describe the same
 * arrangement in different bytes only cost a second copy, never a wrong one. */
#define TSI_WCACHE_LAYOUT_MAX 1024

/* The weight named by id in `layout` (of `bytes`): the cached copy, or — when id was asked for
 * before (a weight met once, such as a contiguous copy made for one call, is never kept) — a new
 * one written by fill and kept. NULL when nothing is cached (first sight, no memory, fill failed):
 * the caller reorders into its scratch as without the cache. Otherwise *ref holds the copy alive
 * while the caller's primitive runs: give it back with tsi_wcache_release. Thread-safe. */
const void *tsi_wcache_get(const tsi_conv_weight_id *id, const void *layout, size_t layout_len,
                           size_t bytes, tsi_wcache_fill_fn fill, void *ctx,
                           tsi_wcache_entry **ref);
void tsi_wcache_release(tsi_wcache_entry *ref); /* NULL-safe */

#endif /* TS_CONV_DNNL_WCACHE_H */
