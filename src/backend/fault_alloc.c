/* fault_alloc.c — the allocation counter behind TS_FAULT_ALLOC / ts_fault_alloc_set (SQLite's
 * discipline: fail the N-th allocation, check the error is clean, sweep N over every allocation).
 */
#define _POSIX_C_SOURCE 200809L  /* strdup's declaration (the wrapper calls the real one) */
#include "backend/fault_alloc.h" /* already force-included: the macros must go before stdlib.h */
#undef malloc
#undef calloc
#undef realloc
#undef aligned_alloc
#undef strdup

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "tessera.h"

#define MAX_SITES 4096

int tsi_fault_armed;
static atomic_uint_fast64_t counted; /* allocations since the last ts_fault_alloc_set */
static atomic_uint_fast64_t target;  /* the one to fail (1-based); 0: none */

/* distinct call sites while armed (a linear set: the sweep's programs have a few hundred) */
static pthread_mutex_t sites_mu = PTHREAD_MUTEX_INITIALIZER;
static tsi_fault_site sites[MAX_SITES];
static int n_sites;
static tsi_fault_site failed_site;

static void note_site(tsi_fault_site site, bool failing) {
    pthread_mutex_lock(&sites_mu);
    int i = 0;
    while (i < n_sites && sites[i] != site) i++;
    if (i == n_sites && n_sites < MAX_SITES) sites[n_sites++] = site;
    if (failing) failed_site = site;
    pthread_mutex_unlock(&sites_mu);
}

bool tsi_fault_alloc_tick(tsi_fault_site site) {
    uint64_t k = atomic_fetch_add_explicit(&counted, 1, memory_order_relaxed) + 1;
    uint64_t t = atomic_load_explicit(&target, memory_order_relaxed);
    bool fail = t != 0 && k == t;
    note_site(site, fail);
    return fail;
}

int tsi_fault_alloc_sites(tsi_fault_site *out, int max, tsi_fault_site *failed) {
    pthread_mutex_lock(&sites_mu);
    for (int i = 0; i < n_sites && i < max; i++) out[i] = sites[i];
    int n = n_sites;
    if (failed) *failed = failed_site;
    pthread_mutex_unlock(&sites_mu);
    return n;
}

void ts_fault_alloc_set(int64_t n) {
    __atomic_store_n(&tsi_fault_armed, 0, __ATOMIC_SEQ_CST);
    pthread_mutex_lock(&sites_mu);
    n_sites = 0;
    failed_site = 0;
    pthread_mutex_unlock(&sites_mu);
    atomic_store(&counted, 0);
    atomic_store(&target, n > 0 ? (uint64_t)n : 0);
    __atomic_store_n(&tsi_fault_armed, n >= 0, __ATOMIC_SEQ_CST);
}

uint64_t ts_fault_alloc_count(void) { return atomic_load(&counted); }

bool ts_fault_alloc_fired(void) {
    uint64_t t = atomic_load(&target);
    return t != 0 && atomic_load(&counted) >= t;
}

/* The wrappers are real functions (never inlined into the library's files), so their return
 * address is the allocation's call site. */
#define SITE ((tsi_fault_site)__builtin_return_address(0))

void *tsi_fault_malloc(size_t n) { return tsi_fault_alloc_hit(SITE) ? NULL : malloc(n); }

void *tsi_fault_calloc(size_t n, size_t size) {
    return tsi_fault_alloc_hit(SITE) ? NULL : calloc(n, size);
}

/* A failed realloc leaves the old block alone, as the real one does. */
void *tsi_fault_realloc(void *p, size_t n) {
    return tsi_fault_alloc_hit(SITE) ? NULL : realloc(p, n);
}

void *tsi_fault_aligned_alloc(size_t align, size_t n) {
    return tsi_fault_alloc_hit(SITE) ? NULL : aligned_alloc(align, n);
}

char *tsi_fault_strdup(const char *s) { return tsi_fault_alloc_hit(SITE) ? NULL : strdup(s); }
