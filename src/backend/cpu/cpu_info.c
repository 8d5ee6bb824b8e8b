/* cpu_info.c — ts_cpu_describe: one line about how the CPU kernels run (vector ISA, threads, BLAS,
 * the OpenMP wait policy), for `tessera devices` and the benchmarks' headers. */
#include <stdio.h>
#include <string.h>

#include "backend/cpu/cpu_isa.h"
#include "backend/cpu/gemm_provider.h"
#include "backend/cpu/omp_wait.h"
#include "tessera.h"

#ifdef TS_HAVE_CBLAS
#include <cblas.h>
#endif

static const char *blas_desc(char *buf, size_t n) {
#if defined(TS_HAVE_CBLAS) && defined(OPENBLAS_VERSION)
    const int par = openblas_get_parallel();
    const char *v = OPENBLAS_VERSION; /* " OpenBLAS 0.3.21 " */
    while (*v == ' ') v++;
    int len = (int)strlen(v);
    while (len > 0 && v[len - 1] == ' ') len--;
    snprintf(buf, n, "%.*s (%s kernels, %s)", len, v, openblas_get_corename(),
             par == 2   ? "OpenMP"
             : par == 1 ? "pthreads"
                        : "serial");
#elif defined(TS_HAVE_CBLAS)
    snprintf(buf, n, "CBLAS");
#else
    snprintf(buf, n, "none (the built-in blocked GEMM)");
#endif
    return buf;
}

const char *ts_cpu_describe(void) {
    static _Thread_local char line[480];
    char blas[96];
    snprintf(line, sizeof line,
             "vector ISA %s (this CPU's best: %s; TS_CPU_ISA caps it), %d threads, GEMM f32 %s, "
             "f64 %s, BLAS %s, OpenMP wait %s",
             ts_cpu_vector_isa(), ts_cpu_vector_isa_best(), ts_get_num_threads(),
             tsi_lib_gemm_name(false), tsi_lib_gemm_name(true), blas_desc(blas, sizeof blas),
             tsi_omp_wait_describe());
    return line;
}
