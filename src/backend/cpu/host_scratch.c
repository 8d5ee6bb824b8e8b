/* host_scratch.c — cached host memory for kernels' temporary buffers (see host_scratch.h). */
#include "backend/cpu/host_scratch.h"

#include <pthread.h>
#include <stdatomic.h>

#include "backend/alloc.h"

static _Atomic(ts_allocator *) scratch;
static pthread_mutex_t create_lock = PTHREAD_MUTEX_INITIALIZER;

static ts_allocator *allocator(void) {
    ts_allocator *a = atomic_load_explicit(&scratch, memory_order_acquire);
    if (a) return a;
    pthread_mutex_lock(&create_lock);
    a = atomic_load(&scratch);
    if (!a) {
        const ts_backend *cpu = ts_backend_for(TS_CPU);
        a = cpu ? ts_allocator_new(cpu, 0) : NULL;
        atomic_store_explicit(&scratch, a, memory_order_release);
    }
    pthread_mutex_unlock(&create_lock);
    return a;
}

void *tsi_host_scratch_get(size_t n, ts_block **block) {
    ts_allocator *a = allocator();
    *block = a ? ts_allocator_alloc(a, n, NULL, 0) : NULL;
    return *block ? ts_block_ptr(*block) : NULL;
}

void tsi_host_scratch_put(ts_block *block) {
    if (block) ts_allocator_release(atomic_load_explicit(&scratch, memory_order_acquire), block);
}

void tsi_host_scratch_empty(void) {
    ts_allocator *a = atomic_load_explicit(&scratch, memory_order_acquire);
    if (a) ts_allocator_empty_cache(a);
}
