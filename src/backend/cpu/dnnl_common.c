/* dnnl_common.c — the oneDNN engine, scratchpads, plain descriptors and reorders the primitives
 * share (dnnl_common.h). */
#include "backend/cpu/dnnl_common.h"

#ifdef TS_HAVE_DNNL
#include <pthread.h>
#include <string.h>
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

void tsi_dnnl_plain_md(dnnl_memory_desc_t *md, int nd, const int64_t *dims, dnnl_format_tag_t tag,
                       dnnl_data_type_t dt) {
    dnnl_dims_t d = {0}; /* oneDNN reads a whole dnnl_dims_t */
    memcpy(d, dims, (size_t)nd * sizeof *dims);
    dnnl_memory_desc_init_by_tag(md, nd, d, dt, tag);
}

bool tsi_dnnl_make_reorder(const dnnl_memory_desc_t *src, const dnnl_memory_desc_t *dst,
                           dnnl_primitive_t *out) {
    *out = NULL;
    if (dnnl_memory_desc_equal(src, dst)) return true;
    dnnl_primitive_desc_t pd;
    const dnnl_engine_t eng = tsi_dnnl_engine();
    if (dnnl_reorder_primitive_desc_create(&pd, src, eng, dst, eng, NULL) != dnnl_success)
        return false;
    const dnnl_status_t st = dnnl_primitive_create(out, pd);
    dnnl_primitive_desc_destroy(pd);
    return st == dnnl_success;
}
#else
typedef int ts_dnnl_common_unused; /* ISO C: a translation unit declares something */
#endif
