/* omp_wait.h — the OpenMP wait policy in effect (omp_wait.c; ts_cpu_bounded_spin is public). */
#ifndef TS_OMP_WAIT_H
#define TS_OMP_WAIT_H

/* At start-up (tsi_cpu_backend_init; once, whoever calls first): notes the policy in effect and
 * takes a GOMP_SPINCOUNT that ts_cpu_bounded_spin set out of the environment again, so child
 * processes see what the program was given. */
void tsi_omp_wait_init(void);
/* "GOMP_SPINCOUNT=1000 (set by ts_cpu_bounded_spin)", "OMP_WAIT_POLICY=passive", "libgomp's
 * default"... */
const char *tsi_omp_wait_describe(void);

#endif /* TS_OMP_WAIT_H */
