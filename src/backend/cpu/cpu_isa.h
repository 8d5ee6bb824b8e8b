/* cpu_isa.h — which vector ISA the CPU kernels use: the best the CPU has, capped by TS_CPU_ISA. */
#ifndef TS_CPU_ISA_H
#define TS_CPU_ISA_H

/* Ordered: a cap keeps every ISA at or below it. */
typedef enum ts_cpu_isa { TS_ISA_GENERIC, TS_ISA_AVX2, TS_ISA_AVX512 } ts_cpu_isa;

/* The ISA in use: the best of AVX-512 (avx512f), AVX2 (+FMA) and the portable kernels that this
 * CPU supports, no higher than TS_CPU_ISA=avx512|avx2|generic (read once; oneDNN's
 * ONEDNN_MAX_CPU_ISA). */
ts_cpu_isa ts_cpu_isa_get(void);
/* The best ISA this CPU supports, ignoring the cap. */
ts_cpu_isa ts_cpu_isa_host(void);
const char *ts_cpu_isa_name(ts_cpu_isa isa); /* "avx512", "avx2", "generic" */

#endif /* TS_CPU_ISA_H */
