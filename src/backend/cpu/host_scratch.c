/* host_scratch.c — cached host memory for kernels' temporary buffers (see host_scratch.h). */
#include "backend/cpu/host_scratch.h"

#include <pthread.h>
#include <stdatomic.h>

#include "backend/alloc.h"

/* Under AddressSanitizer the bytes of a block past what the caller asked for are poisoned while it
 * is out, so a kernel that writes past its scratch request is caught even though the caching
 * allocator hands out blocks rounded up (and cached blocks larger than the request). */
#if defined(__SANITIZE_ADDRESS__)
#define TS_SCRATCH_POISON 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TS_SCRATCH_POISON 1
#endif
#endif
#ifdef TS_SCRATCH_POISON
#include <sanitizer/asan_interface.h>
#define SCRATCH_POISON(p, n)   ASAN_POISON_MEMORY_REGION(p, n)
#define SCRATCH_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define SCRATCH_POISON(p, n)   ((void)(p), (void)(n))
#define SCRATCH_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

static _Atomic(ts_allocator *) scratch;
static pthread_mutex_t create_lock = PTHREAD_MUTEX_INITIALIZER;

static ts_allocator *allocator(void) {
    ts_allocator *a = atomic_load_explicit(&scratch, memory_order_acquire);
    if (a) return a;
    pthread_mutex_lock(&create_lock);
    a = atomic_load(&scratch);
    if (!a) {
        const ts_backend *cpu = tsi_backend_for(TS_CPU);
        a = cpu ? tsi_allocator_new(cpu, 0) : NULL;
        atomic_store_explicit(&scratch, a, memory_order_release);
    }
    pthread_mutex_unlock(&create_lock);
    return a;
}

void *tsi_host_scratch_get(size_t n, ts_block **block) {
    ts_allocator *a = allocator();
    *block = a ? tsi_allocator_alloc(a, n, NULL, 0) : NULL;
    if (!*block) return NULL;
    char *p = tsi_block_ptr(*block);
    const size_t size = tsi_block_size(*block);
    SCRATCH_UNPOISON(p, size);
    if (size > n) SCRATCH_POISON(p + n, size - n);
    return p;
}

void tsi_host_scratch_put(ts_block *block) {
    if (!block) return;
    SCRATCH_UNPOISON(tsi_block_ptr(block), tsi_block_size(block));
    tsi_allocator_release(atomic_load_explicit(&scratch, memory_order_acquire), block);
}

void tsi_host_scratch_empty(void) {
    ts_allocator *a = atomic_load_explicit(&scratch, memory_order_acquire);
    if (a) tsi_allocator_empty_cache(a);
}
