/* blas_threads.h — keeping OpenBLAS's own threads out of GEMMs issued from inside our OpenMP
 * regions, safely when several threads (data-parallel workers) do it at the same time. */
#ifndef TS_BACKEND_CPU_BLAS_THREADS_H
#define TS_BACKEND_CPU_BLAS_THREADS_H

/* Bracket an OpenMP region whose threads each call BLAS. Nestable and thread-safe. */
void tsi_blas_single_begin(void);
void tsi_blas_single_end(void);

#endif /* TS_BACKEND_CPU_BLAS_THREADS_H */
