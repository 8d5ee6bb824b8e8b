/* fault_alloc.h — allocation-failure injection (TS_FAULT_ALLOC, ts_fault_alloc_set): the counter
 * every library allocation passes, and the macros that route the library's host allocations to it.
 *
 * CMakeLists.txt force-includes this header (-include, with TSI_FAULT_ALLOC_WRAP defined) into
 * every C file of the library, before anything else, so malloc, calloc, realloc, aligned_alloc and
 * strdup in src/ count without any call site changing; tests, examples and user code are not
 * affected. It therefore includes only stdbool.h and stddef.h (not stdint.h, which reads glibc's
 * features.h, nor stdatomic.h, which includes stdint.h with clang): a system header here would be
 * read before the feature macros (_POSIX_C_SOURCE...) that some files define first. The system
 * headers' own declarations of malloc etc., read later, become compatible redeclarations of the
 * wrappers' names.
 */
#ifndef TS_FAULT_ALLOC_H
#define TS_FAULT_ALLOC_H

#include <stdbool.h>
#include <stddef.h>

typedef __UINTPTR_TYPE__ tsi_fault_site; /* a code address (uintptr_t without <stdint.h>) */

/* Non-zero while ts_fault_alloc_set (or TS_FAULT_ALLOC) armed the counter: off, an allocation
 * costs one relaxed load more. */
extern int tsi_fault_armed; /* read and written with __atomic builtins only */
/* Counts one allocation made at code address `site`; true when it is the one to fail. */
bool tsi_fault_alloc_tick(tsi_fault_site site);

/* The same for allocations served without malloc: the caching allocator (every device) and the
 * tensor/storage struct caches, which name themselves as the site (a function's address). */
static inline bool tsi_fault_alloc_hit(tsi_fault_site site) {
    return __atomic_load_n(&tsi_fault_armed, __ATOMIC_RELAXED) && tsi_fault_alloc_tick(site);
}

void *tsi_fault_malloc(size_t n);
void *tsi_fault_calloc(size_t n, size_t size);
void *tsi_fault_realloc(void *p, size_t n);
void *tsi_fault_aligned_alloc(size_t align, size_t n);
char *tsi_fault_strdup(const char *s);

/* For tests: the distinct call sites (code addresses) counted since the last ts_fault_alloc_set,
 * at most max written to out; returns how many there are. The site of the allocation made to
 * fail, or NULL: *failed. */
int tsi_fault_alloc_sites(tsi_fault_site *out, int max, tsi_fault_site *failed);

/* One name for one name: the system headers' declarations, read after this, then declare the
 * wrappers (a macro adding arguments such as __FILE__ would break them). */
#ifdef TSI_FAULT_ALLOC_WRAP
#define malloc(n)           tsi_fault_malloc(n)
#define calloc(n, s)        tsi_fault_calloc(n, s)
#define realloc(p, n)       tsi_fault_realloc(p, n)
#define aligned_alloc(a, n) tsi_fault_aligned_alloc(a, n)
#define strdup(s)           tsi_fault_strdup(s)
#endif

#endif /* TS_FAULT_ALLOC_H */
