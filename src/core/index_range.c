/* index_range.c — what is known of an index tensor's values: read once by a bounds check, kept on
 * the storage while the values cannot have changed (internal.h, tsi_index_range_known). A
 * training step's labels are checked by the loss, then by the gather that picks the
 * log-probabilities (through an unsqueezed view), then by the scatter of its backward; on a device
 * each check is a copy to the host and a wait. */
#include <stdatomic.h>

#include "core/internal.h"

/* splitmix64's finaliser: every input bit moves every output bit */
static uint64_t mix(uint64_t h) {
    h ^= h >> 30;
    h *= 0xbf58476d1ce4e5b9ULL;
    h ^= h >> 27;
    h *= 0x94d049bb133111ebULL;
    return h ^ (h >> 31);
}

/* Which values t reads: its storage's version (bumped by every in-place write), dtype, offset,
 * and its dims in a canonical form, so views of the same elements have the same key: dims of size
 * 1 and broadcast dims (stride 0) left out, the rest ordered by stride and merged where one
 * continues another (a contiguous [4, 256] and its [1024] reshape, unsqueeze, permute, expand).
 * 0 where the memory may change without a version bump (handed to or taken from another
 * framework, shared memory). */
static uint64_t contents_key(const ts_tensor *t) {
    const ts_storage *s = t->storage;
    if (!s || !s->alloc || s->release || atomic_load(&s->exported)) return 0;
    int64_t size[TS_MAX_DIMS], stride[TS_MAX_DIMS];
    int n = 0;
    for (int i = 0; i < t->shape.ndim; i++) {
        if (t->shape.dims[i] == 1 || t->strides[i] == 0) continue;
        int k = n++; /* insertion by stride */
        for (; k > 0 && stride[k - 1] > t->strides[i]; k--)
            size[k] = size[k - 1], stride[k] = stride[k - 1];
        size[k] = t->shape.dims[i], stride[k] = t->strides[i];
    }
    int m = 0;
    for (int k = 0; k < n; k++) {
        if (m > 0 && stride[k] == size[m - 1] * stride[m - 1]) {
            size[m - 1] *= size[k];
        } else {
            size[m] = size[k], stride[m] = stride[k];
            m++;
        }
    }
    uint64_t h = mix((uint64_t)atomic_load(&s->version));
    h = mix(h ^ (uint64_t)t->offset);
    h = mix(h ^ (uint64_t)t->dtype);
    for (int k = 0; k < m; k++) {
        h = mix(h ^ (uint64_t)size[k]);
        h = mix(h ^ (uint64_t)stride[k]);
    }
    return h | 1; /* never the "nothing known" 0 */
}

bool tsi_index_range_known(const ts_tensor *idx, int64_t size) {
    ts_storage *s = idx->storage;
    if (!s) return false;
    const int64_t below = (int64_t)atomic_load_explicit(&s->range_below, memory_order_relaxed);
    if (below <= 0 || below > size) return false;
    const uint64_t k = contents_key(idx);
    return k != 0 && k == (uint64_t)atomic_load_explicit(&s->range_key, memory_order_relaxed);
}

void tsi_index_range_note(ts_tensor *idx, int64_t below) {
    const uint64_t k = contents_key(idx);
    if (!k || below <= 0) return;
    /* two threads checking the same labels write the same facts; a thread writing the index
     * while another reads it is the caller's race already */
    atomic_store_explicit(&idx->storage->range_key, k, memory_order_relaxed);
    atomic_store_explicit(&idx->storage->range_below, below, memory_order_relaxed);
}
