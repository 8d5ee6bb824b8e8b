/* cpu_isa.c — the CPU's vector ISA and the TS_CPU_ISA cap. */
#include "backend/cpu/cpu_isa.h"
#include "backend/env_config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tessera.h"

atomic_int tsi_cpu_isa_chosen = -1;

ts_cpu_isa tsi_cpu_isa_host(void) {
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
    const int avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    /* F16C is not among __builtin_cpu_supports' names in older compilers: every AVX2 CPU has it */
    if (avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl"))
        return TS_ISA_AVX512;
    if (avx2) return TS_ISA_AVX2;
#endif
    return TS_ISA_GENERIC;
}

const char *tsi_cpu_isa_name(ts_cpu_isa isa) {
    return isa == TS_ISA_AVX512 ? "avx512" : isa == TS_ISA_AVX2 ? "avx2" : "generic";
}

int tsi_cpu_isa_parse(const char *name, ts_cpu_isa *out) {
    for (int i = 0; i < TS_ISA_COUNT; i++)
        if (name && !strcmp(name, tsi_cpu_isa_name((ts_cpu_isa)i))) {
            *out = (ts_cpu_isa)i;
            return 1;
        }
    return 0;
}

/* Idempotent: threads that race here compute the same answer; the warning may print twice. */
ts_cpu_isa tsi_cpu_isa_choose(void) {
    ts_cpu_isa chosen = tsi_cpu_isa_host(), cap;
    const char *env = tsi_env(TSI_ENV_CPU_ISA);
    if (env) {
        if (tsi_cpu_isa_parse(env, &cap)) {
            if (cap < chosen) chosen = cap;
        } else {
            fprintf(stderr, "tessera: TS_CPU_ISA=%s is not one of avx512, avx2, generic; ignored\n",
                    env);
        }
    }
    atomic_store_explicit(&tsi_cpu_isa_chosen, (int)chosen, memory_order_relaxed);
    return chosen;
}

const char *ts_cpu_vector_isa(void) { return tsi_cpu_isa_name(ts_cpu_isa_get()); }
const char *ts_cpu_vector_isa_best(void) { return tsi_cpu_isa_name(tsi_cpu_isa_host()); }
