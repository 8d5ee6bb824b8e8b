/* embedding_bag_math.h — embedding_bag's bags, defined once for the CPU and CUDA kernels (host and
 * device): where bag b starts and ends in idx, and the index at a position (int32 or int64). */
#ifndef TS_BACKEND_EMBEDDING_BAG_MATH_H
#define TS_BACKEND_EMBEDDING_BAG_MATH_H

#include "backend/kernel_math.h"

/* positions [*s, *e) of bag b: offsets[b] .. offsets[b + 1], or b * width .. (b + 1) * width */
static inline TS_HD void ts_bag_range(const int64_t *offsets, int64_t width, int64_t b, int64_t *s,
                                      int64_t *e) {
    if (offsets) {
        *s = offsets[b], *e = offsets[b + 1];
    } else {
        *s = b * width, *e = (b + 1) * width;
    }
}

static inline TS_HD int64_t ts_bag_index(const char *idx, bool i32, int64_t p) {
    return i32 ? (int64_t)((const int32_t *)idx)[p] : ((const int64_t *)idx)[p];
}

/* mean's divisor: the bag's count of kept positions, 1 for an empty bag (its zeros stay zeros) */
static inline TS_HD double ts_bag_divisor(int mode, int64_t kept) {
    return mode == 1 && kept > 0 ? (double)kept : 1.0;
}
#endif
