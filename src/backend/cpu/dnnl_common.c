/* dnnl_common.c — the oneDNN engine and scratchpads the primitives share (dnnl_common.h). */
#include "backend/cpu/dnnl_common.h"

#ifdef TS_HAVE_DNNL
#include <pthread.h>
#ifdef TS_HAVE_OPENMP
#include <omp.h>
#endif

#include "backend/cpu/gemm_provider.h"

static dnnl_engine_t engine;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void make_engine(void) {
    /* the GEMM provider's choice sets oneDNN's ISA cap (TS_CPU_ISA); made first, so a primitive
     * that runs before any GEMM runs under the cap too */
    (void)tsi_lib_gemm_present(false);
    if (dnnl_engine_create(&engine, dnnl_cpu, 0) != dnnl_success) engine = NULL;
}

dnnl_engine_t tsi_dnnl_engine(void) {
    pthread_once(&once, make_engine);
    return engine;
}

bool tsi_dnnl_scratchpad(size_t bytes, dnnl_memory_t *mem, ts_block **block) {
    *mem = NULL;
    dnnl_memory_desc_t md;
    const dnnl_dims_t dims = {(int64_t)bytes};
    dnnl_memory_desc_init_by_tag(&md, 1, dims, dnnl_u8, dnnl_x);
    void *buf = tsi_host_scratch_get(bytes, block);
    return buf && dnnl_memory_create(mem, &md, tsi_dnnl_engine(), buf) == dnnl_success;
}

int tsi_dnnl_threads(void) {
#ifdef TS_HAVE_OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}
#else
typedef int ts_dnnl_common_unused; /* ISO C: a translation unit declares something */
#endif
