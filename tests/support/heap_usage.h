/* heap_usage.h — the bytes malloc holds for the program, for tests that a repeated operation leaves
 * no heap behind (a leak shows as the repetitions times its size; a warmed-up process does not
 * grow). */
#ifndef TS_HEAP_USAGE_H
#define TS_HEAP_USAGE_H

#include <stdint.h>

/* glibc's count of the bytes in use (mallinfo2); -1 where there is none to read: another C
 * library, or a sanitizer's allocator (where LSan reports leaks itself). */
int64_t ts_heap_in_use(void);

#endif /* TS_HEAP_USAGE_H */
