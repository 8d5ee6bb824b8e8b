/* huge_pages.c — asks the kernel to back a large in-memory data set with transparent huge pages. */
#define _DEFAULT_SOURCE /* madvise, MADV_HUGEPAGE */
#include "data/data_internal.h"

#include <stdint.h>

#ifdef __linux__
#include <sys/mman.h>
#endif

void tsi_advise_huge_pages(void *p, size_t n) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    const uintptr_t huge = (uintptr_t)2 << 20;
    uintptr_t b = ((uintptr_t)p + huge - 1) & ~(huge - 1), e = ((uintptr_t)p + n) & ~(huge - 1);
    /* only the whole 2 MiB pages inside; an error (no THP, a kernel that says no) changes nothing
     */
    if (e > b) (void)madvise((void *)b, e - b, MADV_HUGEPAGE);
#else
    (void)p, (void)n;
#endif
}
