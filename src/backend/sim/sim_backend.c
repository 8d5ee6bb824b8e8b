/* sim_backend.c — "sim" devices: host memory with per-index accounting, capacity and guard bytes.
 */
#include "backend/sim/sim_backend.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/sim/sim_link.h"

#define GUARD ((size_t)64) /* bytes of known pattern on each side of a raw segment */

static atomic_int sim_count;
static atomic_size_t sim_capacity;
static atomic_size_t sim_used[TS_SIM_MAX_DEVICES];

/* Position-dependent, so a shifted or partially overwritten guard still reads as corrupt. */
static inline unsigned char guard_byte(size_t i) { return (unsigned char)(0xA5u ^ (i * 37u)); }

static void guard_fill(unsigned char *g) {
    for (size_t i = 0; i < GUARD; i++) g[i] = guard_byte(i);
}

static void guard_check(const unsigned char *g, int index, const void *p, size_t n,
                        const char *side) {
    for (size_t i = 0; i < GUARD; i++) {
        if (g[i] != guard_byte(i)) {
            fprintf(
                stderr,
                "tessera: sim:%d: guard bytes %s the segment at %p (%zu bytes) were overwritten "
                "(byte %zu): an out-of-bounds write in the library\n",
                index, side, p, n, i);
            abort();
        }
    }
}

static bool index_ok(int index) { return index >= 0 && index < atomic_load(&sim_count); }

static int sim_device_count(const ts_backend *be) { return atomic_load(&sim_count); }

static void sim_memory_info(const ts_backend *be, int index, size_t *free_bytes,
                            size_t *total_bytes) {
    size_t cap = atomic_load(&sim_capacity);
    size_t used = index >= 0 && index < TS_SIM_MAX_DEVICES ? atomic_load(&sim_used[index]) : 0;
    /* unlimited: total 0 says so, and free 0 likewise has no meaning beyond that */
    if (total_bytes) *total_bytes = cap;
    if (free_bytes) *free_bytes = cap > used ? cap - used : 0;
}

static void *sim_raw_alloc(const ts_backend *be, int index, size_t nbytes) {
    if (!index_ok(index) || nbytes > SIZE_MAX / 2) return NULL;
    size_t cap = atomic_load(&sim_capacity);
    atomic_size_t *used = &sim_used[index];
    /* reserve first so that two threads cannot both squeeze into the last free bytes */
    size_t cur = atomic_load(used);
    do {
        if (cap && (cur > cap || nbytes > cap - cur)) return NULL;
    } while (!atomic_compare_exchange_weak(used, &cur, cur + nbytes));

    size_t body = (nbytes + GUARD - 1) & ~(GUARD - 1);
    unsigned char *base = aligned_alloc(GUARD, body + 2 * GUARD);
    if (!base) {
        atomic_fetch_sub(used, nbytes);
        return NULL;
    }
    guard_fill(base);
    guard_fill(base + GUARD + nbytes);
    return base + GUARD;
}

static void sim_raw_free(const ts_backend *be, int index, void *p, size_t nbytes) {
    if (!p) return;
    unsigned char *base = (unsigned char *)p - GUARD;
    guard_check(base, index, p, nbytes, "before");
    guard_check(base + GUARD + nbytes, index, p, nbytes, "after");
    free(base);
    if (index >= 0 && index < TS_SIM_MAX_DEVICES) atomic_fetch_sub(&sim_used[index], nbytes);
}

/* host <-> sim: a plain memcpy, or through the simulated link when one is set (sim_link.c) */
static void sim_copy_h2d(const ts_backend *be, int index, void *dst, const void *src, size_t n) {
    if (atomic_load_explicit(&tsi_sim_link_on, memory_order_relaxed))
        tsi_sim_link_copy(index, dst, src, n, true);
    else if (n)
        memcpy(dst, src, n);
}

static void sim_copy_d2h(const ts_backend *be, int index, void *dst, const void *src, size_t n) {
    if (atomic_load_explicit(&tsi_sim_link_on, memory_order_relaxed))
        tsi_sim_link_copy(index, dst, src, n, false);
    else if (n)
        memcpy(dst, src, n);
}

static void sim_copy_d2d(const ts_backend *be, int dst_index, void *dst, int src_index,
                         const void *src, size_t n) {
    if (n) memmove(dst, src, n); /* same-device views of one storage may overlap */
}

static void sim_memset_zero(const ts_backend *be, int index, void *p, size_t n) {
    if (n) memset(p, 0, n);
}

static void sim_synchronize(const ts_backend *be, int index) {
    if (atomic_load_explicit(&tsi_sim_link_pending, memory_order_relaxed) > 0)
        tsi_sim_link_sync(index);
}

static ts_backend sim_backend = {
    .name = "sim",
    .type = TS_SIM,
    .device_count = sim_device_count,
    .memory_info = sim_memory_info,
    .raw_alloc = sim_raw_alloc,
    .raw_free = sim_raw_free,
    .copy_h2d = sim_copy_h2d,
    .copy_d2h = sim_copy_d2h,
    .copy_d2d = sim_copy_d2d,
    .memset_zero = sim_memset_zero,
    .synchronize = sim_synchronize,
};

void tsi_sim_backend_init(void) {
    if (tsi_backend_for(TS_SIM) == &sim_backend) return;
    tsi_cpu_kernels_install(&sim_backend);
    tsi_sim_install_bgrad(&sim_backend);
    tsi_sim_install_bias_act(&sim_backend);
    tsi_sim_install_dact_bgrad(&sim_backend);
    tsi_backend_register(&sim_backend);
}

int tsi_sim_backend_configure(int count, size_t capacity) {
    if (count < 0 || count > TS_SIM_MAX_DEVICES) return -1;
    atomic_store(&sim_capacity, capacity);
    atomic_store(&sim_count, count);
    return 0;
}

int tsi_sim_backend_count(void) { return atomic_load(&sim_count); }

size_t tsi_sim_backend_used(int index) {
    if (index < 0 || index >= TS_SIM_MAX_DEVICES) return 0;
    return atomic_load(&sim_used[index]);
}
