/* matmul_dnnl.c — float32 products through oneDNN's matmul primitive.
 *
 * oneDNN's sgemm (dnnl_sgemm) runs its older JIT GEMM; the matmul primitive runs the brgemm
 * kernels PyTorch's oneDNN paths use, which on the 2-core Zen 5 host reach 91-93% of the machine's
 * peak on the MLP's products where sgemm reaches 57-90% (docs/ARCHITECTURE.md, "GEMM and
 * convolution providers"). A primitive is built for one shape and layout (a few hundred
 * microseconds), so they are kept in a small cache keyed by both; each call makes its memory
 * objects and stream (microseconds) and takes its scratchpad from host_scratch.c (through
 * dnnl_common.h, with the engine conv_dnnl.c uses too). A primitive runs
 * concurrently from several threads. */
#include "backend/cpu/matmul_dnnl.h"

#ifdef TS_HAVE_DNNL
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <dnnl.h>

#include "backend/cpu/dnnl_common.h"

/* ------------------------------------------------------------------ primitives by shape */
typedef struct mm_key {
    int64_t ta, tb, m, n, k, lda, ldb, ldc, threads; /* threads: tsi_dnnl_threads() */
} mm_key;

typedef struct mm_prim {
    mm_key key;
    uint64_t last_use; /* 0: the slot is empty */
    dnnl_primitive_t prim;
    dnnl_memory_desc_t a, b, c;
    size_t scratch;
} mm_prim;

#define MM_SLOTS 64
static mm_prim slots[MM_SLOTS];
static uint64_t uses;
static pthread_mutex_t slots_lock = PTHREAD_MUTEX_INITIALIZER;
/* Evicted primitives are never destroyed: another thread may be running one it copied out. They
 * are kept on this list (a program with more than MM_SLOTS product shapes in turn). */
static dnnl_primitive_t *evicted;
static size_t n_evicted, cap_evicted;

/* rows x cols of row stride ld, read transposed when t */
static void operand_md(dnnl_memory_desc_t *md, int64_t rows, int64_t cols, bool t, int64_t ld) {
    const dnnl_dims_t dims = {rows, cols};
    const dnnl_dims_t strides = {t ? 1 : ld, t ? ld : 1};
    dnnl_memory_desc_init_by_strides(md, 2, dims, dnnl_f32, strides);
}

static bool build(mm_prim *p) {
    const mm_key *k = &p->key;
    operand_md(&p->a, k->m, k->k, k->ta, k->lda);
    operand_md(&p->b, k->k, k->n, k->tb, k->ldb);
    operand_md(&p->c, k->m, k->n, false, k->ldc);
    dnnl_matmul_desc_t desc;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_primitive_desc_t pd = NULL;
    bool ok =
        dnnl_matmul_desc_init(&desc, &p->a, &p->b, NULL, &p->c) == dnnl_success &&
        dnnl_primitive_attr_create(&attr) == dnnl_success &&
        dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user) == dnnl_success &&
        dnnl_primitive_desc_create(&pd, &desc, attr, tsi_dnnl_engine(), NULL) == dnnl_success &&
        dnnl_primitive_create(&p->prim, pd) == dnnl_success;
    if (ok)
        p->scratch = dnnl_memory_desc_get_size(
            dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0));
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (attr) dnnl_primitive_attr_destroy(attr);
    return ok;
}

static void evict(mm_prim *p) {
    if (n_evicted == cap_evicted) {
        const size_t cap = cap_evicted ? 2 * cap_evicted : 16;
        dnnl_primitive_t *grown = realloc(evicted, cap * sizeof *grown);
        if (grown) evicted = grown, cap_evicted = cap;
    }
    if (n_evicted < cap_evicted) evicted[n_evicted++] = p->prim; /* else leaked, never early */
    memset(p, 0, sizeof *p);
}

static uint64_t builds; /* under slots_lock */
uint64_t tsi_dnnl_matmul_builds(void) {
    pthread_mutex_lock(&slots_lock);
    const uint64_t n = builds;
    pthread_mutex_unlock(&slots_lock);
    return n;
}

/* A copy of the primitive for key, built on a miss; false when oneDNN declines it. */
static bool primitive_for(const mm_key *key, mm_prim *out) {
    pthread_mutex_lock(&slots_lock);
    mm_prim *found = NULL, *oldest = &slots[0];
    for (int i = 0; i < MM_SLOTS && !found; i++) {
        if (slots[i].last_use && !memcmp(&slots[i].key, key, sizeof *key)) found = &slots[i];
        if (slots[i].last_use < oldest->last_use) oldest = &slots[i];
    }
    if (!found) {
        if (oldest->last_use) evict(oldest);
        oldest->key = *key;
        if (build(oldest))
            found = oldest, builds++;
        else
            memset(oldest, 0, sizeof *oldest);
    }
    if (found) {
        found->last_use = ++uses;
        *out = *found;
    }
    pthread_mutex_unlock(&slots_lock);
    return found != NULL;
}

static atomic_uint_fast64_t runs;
uint64_t tsi_dnnl_matmul_count(void) { return atomic_load(&runs); }

bool tsi_dnnl_matmul_f32(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float *a,
                         int64_t lda, const float *b, int64_t ldb, float *c, int64_t ldc) {
    const dnnl_engine_t engine = tsi_dnnl_engine();
    const mm_key key = {ta, tb, m, n, k, lda, ldb, ldc, tsi_dnnl_threads()};
    mm_prim p;
    if (!engine || m < 1 || n < 1 || k < 1 || !primitive_for(&key, &p)) return false;
    dnnl_stream_t st = NULL; /* streams are not thread-safe: one per call (cheap on the CPU) */
    dnnl_memory_t mem[4] = {0};
    ts_block *scratch = NULL;
    void *const ptrs[3] = {(void *)a, (void *)b, c};
    const dnnl_memory_desc_t *mds[3] = {&p.a, &p.b, &p.c};
    dnnl_exec_arg_t args[4] = {
        {DNNL_ARG_SRC, NULL}, {DNNL_ARG_WEIGHTS, NULL}, {DNNL_ARG_DST, NULL}};
    int nargs = 3;
    bool ok = dnnl_stream_create(&st, engine, dnnl_stream_default_flags) == dnnl_success;
    for (int i = 0; ok && i < 3; i++) {
        ok = dnnl_memory_create(&mem[i], mds[i], engine, ptrs[i]) == dnnl_success;
        args[i].memory = mem[i];
    }
    if (ok && p.scratch) {
        ok = tsi_dnnl_scratchpad(p.scratch, &mem[3], &scratch);
        args[nargs++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, mem[3]};
    }
    ok = ok && dnnl_primitive_execute(p.prim, st, nargs, args) == dnnl_success &&
         dnnl_stream_wait(st) == dnnl_success;
    for (int i = 0; i < 4; i++)
        if (mem[i]) dnnl_memory_destroy(mem[i]);
    tsi_host_scratch_put(scratch);
    if (st) dnnl_stream_destroy(st);
    if (ok) atomic_fetch_add(&runs, 1);
    return ok;
}

#else /* no oneDNN */

bool tsi_dnnl_matmul_f32(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float *a,
                         int64_t lda, const float *b, int64_t ldb, float *c, int64_t ldc) {
    (void)ta, (void)tb, (void)m, (void)n, (void)k, (void)a, (void)lda, (void)b, (void)ldb;
    (void)c, (void)ldc;
    return false;
}
uint64_t tsi_dnnl_matmul_count(void) { return 0; }

#endif
