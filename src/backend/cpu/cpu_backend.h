/* cpu_backend.h — start-up hook of the "cpu" backend (host memory, the CPU kernels). */
#ifndef TS_CPU_BACKEND_H
#define TS_CPU_BACKEND_H

/* Registers the cpu backend with tsi_backend_register; idempotent. Called from tsi_init_once. */
void tsi_cpu_backend_init(void);

#endif /* TS_CPU_BACKEND_H */
