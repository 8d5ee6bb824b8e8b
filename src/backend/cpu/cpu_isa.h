/* cpu_isa.h — which vector ISA the CPU kernels use: the best the CPU has, capped by TS_CPU_ISA. */
#ifndef TS_CPU_ISA_H
#define TS_CPU_ISA_H

#include <stdatomic.h>

/* Ordered: a cap keeps every ISA at or below it. */
typedef enum ts_cpu_isa { TS_ISA_GENERIC, TS_ISA_AVX2, TS_ISA_AVX512, TS_ISA_COUNT } ts_cpu_isa;

/* The target strings each variant is compiled for (GCC and clang's target attribute / pragma).
 * AVX2 means AVX2 + FMA + F16C (every CPU with AVX2 has the other two); AVX-512 the foundation
 * plus the BW, DQ and VL subsets (Skylake-X and later, Zen 4 and later). */
#define TS_ISA_TARGET_AVX2   "avx2,fma,f16c"
#define TS_ISA_TARGET_AVX512 "avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,f16c"
/* The same as a pragma, for code included between TS_ISA_PRAGMA_TARGET(...) and
 * _Pragma("GCC pop_options"). */
#define TS_ISA_PRAGMA_(x)         _Pragma(#x)
#define TS_ISA_PRAGMA_TARGET(isa) _Pragma("GCC push_options") TS_ISA_PRAGMA_(GCC target(isa))

/* The best ISA this CPU supports, ignoring the cap. */
ts_cpu_isa tsi_cpu_isa_host(void);
const char *tsi_cpu_isa_name(ts_cpu_isa isa); /* "avx512", "avx2", "generic" */

/* The ISA in use: the best of AVX-512, AVX2 and the portable kernels that this CPU supports, no
 * higher than TS_CPU_ISA=avx512|avx2|generic (read once; oneDNN's ONEDNN_MAX_CPU_ISA). Every
 * kernel family with vector variants picks its variant through this, at each call: one relaxed
 * load once the choice is made. */
ts_cpu_isa tsi_cpu_isa_choose(void);
extern atomic_int tsi_cpu_isa_chosen; /* -1 until chosen */
static inline ts_cpu_isa ts_cpu_isa_get(void) {
    const int c = atomic_load_explicit(&tsi_cpu_isa_chosen, memory_order_relaxed);
    return c >= 0 ? (ts_cpu_isa)c : tsi_cpu_isa_choose();
}

/* Tests: parse "avx512" / "avx2" / "generic" (false for anything else). */
int tsi_cpu_isa_parse(const char *name, ts_cpu_isa *out);

#endif /* TS_CPU_ISA_H */
