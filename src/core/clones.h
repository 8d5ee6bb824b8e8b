/* clones.h — TS_CPU_CLONES: an AVX2 clone of a dense loop, picked at load time. */
#ifndef TS_CORE_CLONES_H
#define TS_CORE_CLONES_H

/* The library is built for baseline x86-64 (SSE2), which halves the width of the dense loops.
 * Segment functions marked with this get an AVX2 clone that the loader picks once (ifunc) on CPUs
 * that have it. Only AVX2 itself: ISO C mode keeps FMA contraction off, so both clones round
 * identically and results do not depend on the machine. */
/* Not under ThreadSanitizer: the ifunc resolvers run before its runtime starts, and instrumented
 * they crash the program at load. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__) &&       \
    !defined(__AVX2__) && !defined(__SANITIZE_THREAD__)
#define TS_CPU_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define TS_CPU_CLONES
#endif

#endif /* TS_CORE_CLONES_H */
