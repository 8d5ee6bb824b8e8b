/* omp_if.h — loops that OpenMP runs in parallel when they are big enough, and that cost nothing
 * extra when they are not.
 *
 * `#pragma omp parallel for if (cond)` with cond false still enters libgomp, which builds and frees
 * a team of one thread: about 0.4 us a call on Zen 5 (an allocation, malloc_consolidate, a futex
 * wake) where a small op's whole work is a few tens of nanoseconds. TS_PARALLEL_FOR_IF(cond, loop)
 * runs the for statement `loop` with `#pragma omp parallel for schedule(static)` when cond holds
 * and as a plain loop otherwise; TS_PARALLEL_FOR_DYNAMIC_IF uses schedule(dynamic, 1). The loop
 * goes in as macro arguments, so commas in its body are fine. The body must hold no OpenMP
 * construct of its own: run serially inside another parallel region, a work-sharing loop in it
 * would bind to that region's team (a region with a false if clause gives it a team of one). */
#ifndef TS_OMP_IF_H
#define TS_OMP_IF_H

#ifdef TS_HAVE_OPENMP
#define TS_PARALLEL_FOR_IF(cond, ...)                                                              \
    do {                                                                                           \
        if (cond) {                                                                                \
            _Pragma("omp parallel for schedule(static)") __VA_ARGS__                               \
        } else {                                                                                   \
            __VA_ARGS__                                                                            \
        }                                                                                          \
    } while (0)
#define TS_PARALLEL_FOR_DYNAMIC_IF(cond, ...)                                                      \
    do {                                                                                           \
        if (cond) {                                                                                \
            _Pragma("omp parallel for schedule(dynamic, 1)") __VA_ARGS__                           \
        } else {                                                                                   \
            __VA_ARGS__                                                                            \
        }                                                                                          \
    } while (0)
#else
#define TS_PARALLEL_FOR_IF(cond, ...)                                                              \
    do {                                                                                           \
        (void)(cond);                                                                              \
        __VA_ARGS__                                                                                \
    } while (0)
#define TS_PARALLEL_FOR_DYNAMIC_IF(cond, ...) TS_PARALLEL_FOR_IF(cond, __VA_ARGS__)
#endif

#endif /* TS_OMP_IF_H */
