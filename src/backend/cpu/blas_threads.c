/* blas_threads.c — one process-wide "BLAS single-threaded" switch shared by every caller.
 *
 * Before: each region saved openblas_get_num_threads(), set 1 and restored what it saved. Two
 * threads doing that at once can restore in the wrong order and leave OpenBLAS on one thread for
 * good, and changing OpenBLAS's thread count while another thread is inside a threaded GEMM races
 * on its global state (the OpenMP build reallocates its per-thread buffers). Now the first holder
 * saves and sets, the last one restores; and the OpenMP build of OpenBLAS is never switched at
 * all, because it already runs single-threaded inside an OpenMP region (it checks
 * omp_in_parallel()). */
#include "backend/cpu/blas_threads.h"

#include <pthread.h>
#include <stdbool.h>

#ifdef TS_HAVE_CBLAS
#include <cblas.h>
#endif

#if defined(TS_HAVE_CBLAS) && defined(OPENBLAS_VERSION)
static pthread_mutex_t switch_lock = PTHREAD_MUTEX_INITIALIZER;
static int holders, saved_threads;

/* openblas_get_parallel(): 0 sequential, 1 pthreads, 2 OpenMP */
static bool needs_switch(void) { return openblas_get_parallel() == 1; }

void tsi_blas_single_begin(void) {
    if (!needs_switch()) return;
    pthread_mutex_lock(&switch_lock);
    if (holders++ == 0) {
        saved_threads = openblas_get_num_threads();
        openblas_set_num_threads(1);
    }
    pthread_mutex_unlock(&switch_lock);
}

void tsi_blas_single_end(void) {
    if (!needs_switch()) return;
    pthread_mutex_lock(&switch_lock);
    if (holders > 0 && --holders == 0) openblas_set_num_threads(saved_threads);
    pthread_mutex_unlock(&switch_lock);
}
#else
void tsi_blas_single_begin(void) {}
void tsi_blas_single_end(void) {}
#endif
