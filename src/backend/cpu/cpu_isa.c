/* cpu_isa.c — the CPU's vector ISA and the TS_CPU_ISA cap. */
#include "backend/cpu/cpu_isa.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static ts_cpu_isa chosen;
static pthread_once_t once = PTHREAD_ONCE_INIT;

ts_cpu_isa ts_cpu_isa_host(void) {
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
    if (__builtin_cpu_supports("avx512f")) return TS_ISA_AVX512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return TS_ISA_AVX2;
#endif
    return TS_ISA_GENERIC;
}

const char *ts_cpu_isa_name(ts_cpu_isa isa) {
    return isa == TS_ISA_AVX512 ? "avx512" : isa == TS_ISA_AVX2 ? "avx2" : "generic";
}

static void choose(void) {
    chosen = ts_cpu_isa_host();
    const char *cap = getenv("TS_CPU_ISA");
    if (!cap || !*cap) return;
    ts_cpu_isa c;
    if (!strcmp(cap, "avx512"))
        c = TS_ISA_AVX512;
    else if (!strcmp(cap, "avx2"))
        c = TS_ISA_AVX2;
    else if (!strcmp(cap, "generic"))
        c = TS_ISA_GENERIC;
    else {
        fprintf(stderr, "tessera: TS_CPU_ISA=%s is not one of avx512, avx2, generic; ignored\n",
                cap);
        return;
    }
    if (c < chosen) chosen = c;
}

ts_cpu_isa ts_cpu_isa_get(void) {
    pthread_once(&once, choose);
    return chosen;
}
