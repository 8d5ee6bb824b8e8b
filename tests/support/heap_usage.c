/* heap_usage.c — the bytes malloc holds for the program (heap_usage.h). */
#define _DEFAULT_SOURCE /* mallinfo2 */
#include "heap_usage.h"

#include <malloc.h>

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TS_HEAP_SANITIZED 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define TS_HEAP_SANITIZED 1
#endif

int64_t ts_heap_in_use(void) {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || __GLIBC_MINOR__ >= 33) && !defined(TS_HEAP_SANITIZED)
    struct mallinfo2 mi = mallinfo2();
    return (int64_t)(mi.uordblks + mi.hblkhd); /* small blocks and mmap'ed large ones */
#else
    return -1;
#endif
}
