/* clones.h — TS_CPU_VARIANTS: a dense loop compiled for AVX2 and for the baseline, the variant
 * picked at each call by ts_cpu_isa_get(), so TS_CPU_ISA caps it like every other kernel. */
#ifndef TS_CORE_CLONES_H
#define TS_CORE_CLONES_H

#include "backend/cpu/cpu_isa.h"

/* The library is built for baseline x86-64 (SSE2), which halves the width of the dense loops. A
 * loop written as
 *     TS_CPU_BODY void name_body(params) { ... }
 *     TS_CPU_VARIANTS(name, (params), (args))
 * gets `static void name(params)` that runs the body compiled for AVX2 (name_avx2) when
 * ts_cpu_isa_get() allows it, else the baseline build (name_generic). GCC's target_clones did this
 * before, but its choice is made by the loader (ifunc) and cannot see TS_CPU_ISA. Only AVX2 and the
 * baseline: these loops are memory-bound, AVX-512 would not make them faster (the vectorised math,
 * which is compute-bound, has its own AVX-512 variant: vec_kernels.h). ISO C mode keeps FMA
 * contraction off, so both variants round identically and results do not depend on the machine. */
#define TS_CPU_BODY static inline __attribute__((always_inline))
#if defined(__GNUC__) && defined(__x86_64__) && !defined(__AVX2__)
#define TS_CPU_VARIANTS(NAME, PARAMS, ARGS)                                                        \
    __attribute__((target(TS_ISA_TARGET_AVX2))) static void NAME##_avx2 PARAMS {                   \
        NAME##_body ARGS;                                                                          \
    }                                                                                              \
    static void NAME##_generic PARAMS { NAME##_body ARGS; }                                        \
    static void NAME PARAMS {                                                                      \
        if (ts_cpu_isa_get() >= TS_ISA_AVX2)                                                       \
            NAME##_avx2 ARGS;                                                                      \
        else                                                                                       \
            NAME##_generic ARGS;                                                                   \
    }
#else
#define TS_CPU_VARIANTS(NAME, PARAMS, ARGS)                                                        \
    static void NAME PARAMS { NAME##_body ARGS; }
#endif

/* The variants of a ts_cpu_seg_fn (cpu_loops.h): NAME_body(void *ctx, char *const *p,
 * const int64_t *s, int64_t n). */
#define TS_CPU_SEG_VARIANTS(NAME)                                                                  \
    TS_CPU_VARIANTS(NAME, (void *ctx_, char *const *p_, const int64_t *s_, int64_t n_),            \
                    (ctx_, p_, s_, n_))

#endif /* TS_CORE_CLONES_H */
