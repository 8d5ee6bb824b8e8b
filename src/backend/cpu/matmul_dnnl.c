/* matmul_dnnl.c — float32 and bfloat16 products through oneDNN's matmul primitive.
 *
 * oneDNN's sgemm (dnnl_sgemm) runs its older JIT GEMM; the matmul primitive runs the brgemm
 * kernels PyTorch's oneDNN paths use, which on the 2-core Zen 5 host reach 91-93% of the machine's
 * peak on the MLP's products where sgemm reaches 57-90% (bench/results/cpu-matmul.md,
 * "GEMM and convolution providers"). A primitive is built for one shape and layout (a few hundred
 * microseconds), so they are kept in a small cache keyed by both; each call makes its memory
 * objects and stream (microseconds) and takes its scratchpad from host_scratch.c (through
 * dnnl_common.h, with the engine conv_dnnl.c uses too). A primitive runs
 * concurrently from several threads. bf16 products (autocast's matmul, linear and bmm) take the
 * same path with bf16 memory descriptors where the CPU multiplies bf16 natively (AMX,
 * AVX512-BF16): batched and strided, so transposed views and broadcast batches need no copy. */
#include "backend/cpu/matmul_dnnl.h"

#include "tessera.h"

#ifdef TS_HAVE_DNNL
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <dnnl.h>

#include "backend/cpu/dnnl_common.h"

/* ------------------------------------------------------------------ primitives by shape */
typedef struct mm_key {
    int64_t dt, bsz, m, n, k, sa[3], sb[3], sc[3], threads; /* threads: tsi_dnnl_threads() */
    int64_t bias; /* 1: C = A B + bias [n] (oneDNN's bias argument) */
} mm_key;

typedef struct mm_prim {
    mm_key key;
    uint64_t last_use; /* 0: the slot is empty */
    dnnl_primitive_t prim;
    dnnl_memory_desc_t a, b, c, bias;
    size_t scratch;
    bool brgemm; /* oneDNN picked its brgemm kernels (not gemm:jit, not a reference loop) */
} mm_prim;

#define MM_SLOTS 64
static mm_prim slots[MM_SLOTS];
static uint64_t uses;
static pthread_mutex_t slots_lock = PTHREAD_MUTEX_INITIALIZER;
/* Evicted primitives are never destroyed: another thread may be running one it copied out. They
 * are kept on this list (a program with more than MM_SLOTS product shapes in turn). */
static dnnl_primitive_t *evicted;
static size_t n_evicted, cap_evicted;

/* [batches x rows x cols] with element strides s (batch stride 0: one matrix, broadcast) */
static void operand_md(dnnl_memory_desc_t *md, int64_t dt, int64_t batches, int64_t rows,
                       int64_t cols, const int64_t s[3]) {
    const dnnl_dims_t dims = {batches, rows, cols};
    const dnnl_dims_t strides = {s[0] ? s[0] : rows * cols, s[1], s[2]};
    dnnl_memory_desc_init_by_strides(md, 3, dims, (dnnl_data_type_t)dt, strides);
}

static bool build(mm_prim *p) {
    const mm_key *k = &p->key;
    operand_md(&p->a, k->dt, k->sa[0] ? k->bsz : 1, k->m, k->k, k->sa);
    operand_md(&p->b, k->dt, k->sb[0] ? k->bsz : 1, k->k, k->n, k->sb);
    operand_md(&p->c, k->dt, k->bsz, k->m, k->n, k->sc);
    if (k->bias) operand_md(&p->bias, k->dt, 1, 1, k->n, (const int64_t[3]){k->n, k->n, 1});
    dnnl_matmul_desc_t desc;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_primitive_desc_t pd = NULL;
    bool ok =
        dnnl_matmul_desc_init(&desc, &p->a, &p->b, k->bias ? &p->bias : NULL, &p->c) ==
            dnnl_success &&
        dnnl_primitive_attr_create(&attr) == dnnl_success &&
        dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user) == dnnl_success &&
        dnnl_primitive_desc_create(&pd, &desc, attr, tsi_dnnl_engine(), NULL) == dnnl_success &&
        dnnl_primitive_create(&p->prim, pd) == dnnl_success;
    if (ok) {
        p->scratch = dnnl_memory_desc_get_size(
            dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0));
        const char *impl = NULL;
        p->brgemm =
            dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success &&
            impl && !strncmp(impl, "brg", 3);
    }
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

static atomic_uint_fast64_t runs, bf16_runs;
uint64_t tsi_dnnl_matmul_count(void) { return atomic_load(&runs); }
uint64_t tsi_dnnl_matmul_bf16_count(void) { return atomic_load(&bf16_runs); }

/* 1: done; 0: declined, nothing written (no primitive for it, or brgemm_only and oneDNN would
 * run another kernel); -1: the primitive could not run (its scratchpad, memory objects or stream
 * not had) */
static int run(const mm_key *key, const void *a, const void *b, void *c, const void *bias,
               bool brgemm_only) {
    const dnnl_engine_t engine = tsi_dnnl_engine();
    mm_prim p;
    if (!engine || key->bsz < 1 || key->m < 1 || key->n < 1 || key->k < 1 ||
        !primitive_for(key, &p) || (brgemm_only && !p.brgemm))
        return 0;
    dnnl_stream_t st = NULL; /* streams are not thread-safe: one per call (cheap on the CPU) */
    dnnl_memory_t mem[5] = {0};
    ts_block *scratch = NULL;
    void *const ptrs[4] = {(void *)a, (void *)b, c, (void *)bias};
    const dnnl_memory_desc_t *mds[4] = {&p.a, &p.b, &p.c, &p.bias};
    dnnl_exec_arg_t args[5] = {{DNNL_ARG_SRC, NULL},
                               {DNNL_ARG_WEIGHTS, NULL},
                               {DNNL_ARG_DST, NULL},
                               {DNNL_ARG_BIAS, NULL}};
    const int nmem = key->bias ? 4 : 3;
    int nargs = nmem;
    bool ok = dnnl_stream_create(&st, engine, dnnl_stream_default_flags) == dnnl_success;
    for (int i = 0; ok && i < nmem; i++) {
        ok = dnnl_memory_create(&mem[i], mds[i], engine, ptrs[i]) == dnnl_success;
        args[i].memory = mem[i];
    }
    if (ok && p.scratch) {
        ok = tsi_dnnl_scratchpad(p.scratch, &mem[4], &scratch);
        args[nargs++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, mem[4]};
    }
    ok = ok && dnnl_primitive_execute(p.prim, st, nargs, args) == dnnl_success &&
         dnnl_stream_wait(st) == dnnl_success;
    for (int i = 0; i < 5; i++)
        if (mem[i]) dnnl_memory_destroy(mem[i]);
    tsi_host_scratch_put(scratch);
    if (st) dnnl_stream_destroy(st);
    if (ok) atomic_fetch_add(key->dt == dnnl_bf16 ? &bf16_runs : &runs, 1);
    return ok ? 1 : -1;
}

bool tsi_dnnl_matmul_f32(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float *a,
                         int64_t lda, const float *b, int64_t ldb, float *c, int64_t ldc) {
    const int64_t sa[3] = {0, ta ? 1 : lda, ta ? lda : 1}, sb[3] = {0, tb ? 1 : ldb, tb ? ldb : 1};
    const int64_t sc[3] = {0, ldc, 1};
    return tsi_dnnl_matmul_strided(TS_F32, 1, m, n, k, a, sa, b, sb, c, sc);
}

static int strided(int dt, int64_t bsz, int64_t m, int64_t n, int64_t k, const void *a,
                   const int64_t sa[3], const void *b, const int64_t sb[3], void *c,
                   const int64_t sc[3], const void *bias, bool brgemm_only) {
    if (dt != TS_F32 && dt != TS_BF16) return 0;
    const mm_key key = {dt == TS_BF16 ? dnnl_bf16 : dnnl_f32,
                        bsz,
                        m,
                        n,
                        k,
                        {sa[0], sa[1], sa[2]},
                        {sb[0], sb[1], sb[2]},
                        {sc[0], sc[1], sc[2]},
                        tsi_dnnl_threads(),
                        bias != NULL};
    return run(&key, a, b, c, bias, brgemm_only);
}

bool tsi_dnnl_matmul_strided(int dt, int64_t bsz, int64_t m, int64_t n, int64_t k, const void *a,
                             const int64_t sa[3], const void *b, const int64_t sb[3], void *c,
                             const int64_t sc[3]) {
    return strided(dt, bsz, m, n, k, a, sa, b, sb, c, sc, NULL, false) > 0;
}

static atomic_bool batched_on = true;
void tsi_dnnl_matmul_batched_enable(bool on) { atomic_store(&batched_on, on); }

int tsi_dnnl_matmul_batched_f32(int64_t bsz, int64_t m, int64_t n, int64_t k, const float *a,
                                const int64_t sa[3], const float *b, const int64_t sb[3], float *c,
                                const int64_t sc[3]) {
    if (!atomic_load(&batched_on)) return 0;
    return strided(TS_F32, bsz, m, n, k, a, sa, b, sb, c, sc, NULL, true);
}

bool tsi_dnnl_matmul_strided_bias(int dt, int64_t bsz, int64_t m, int64_t n, int64_t k,
                                  const void *a, const int64_t sa[3], const void *b,
                                  const int64_t sb[3], void *c, const int64_t sc[3],
                                  const void *bias) {
    return strided(dt, bsz, m, n, k, a, sa, b, sb, c, sc, bias, false) > 0;
}

bool tsi_dnnl_bf16_native(void) {
    if (!tsi_dnnl_engine()) return false; /* made after the ISA cap is set (gemm_provider.c) */
    const unsigned isa = (unsigned)dnnl_get_effective_cpu_isa();
    return (isa & (unsigned)dnnl_cpu_isa_avx512_core_bf16) ==
           (unsigned)dnnl_cpu_isa_avx512_core_bf16;
}

const char *tsi_dnnl_effective_isa(void) {
    const dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
    return isa == dnnl_cpu_isa_avx512_core_amx    ? "avx512_core_amx"
           : isa == dnnl_cpu_isa_avx512_core_bf16 ? "avx512_core_bf16"
           : isa == dnnl_cpu_isa_avx512_core_vnni ? "avx512_core_vnni"
           : isa == dnnl_cpu_isa_avx512_core      ? "avx512_core"
           : isa == dnnl_cpu_isa_avx2_vnni        ? "avx2_vnni"
           : isa == dnnl_cpu_isa_avx2             ? "avx2"
           : isa == dnnl_cpu_isa_avx              ? "avx"
           : isa == dnnl_cpu_isa_sse41            ? "sse41"
                                                  : "other";
}

const char *tsi_dnnl_isa_name(void) {
    if (!tsi_dnnl_engine()) return "none";
    return tsi_dnnl_effective_isa();
}

#else /* no oneDNN */

bool tsi_dnnl_matmul_f32(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float *a,
                         int64_t lda, const float *b, int64_t ldb, float *c, int64_t ldc) {
    (void)ta, (void)tb, (void)m, (void)n, (void)k, (void)a, (void)lda, (void)b, (void)ldb;
    (void)c, (void)ldc;
    return false;
}
bool tsi_dnnl_matmul_strided(int dt, int64_t bsz, int64_t m, int64_t n, int64_t k, const void *a,
                             const int64_t sa[3], const void *b, const int64_t sb[3], void *c,
                             const int64_t sc[3]) {
    (void)dt, (void)bsz, (void)m, (void)n, (void)k, (void)a, (void)sa, (void)b, (void)sb;
    (void)c, (void)sc;
    return false;
}
bool tsi_dnnl_matmul_strided_bias(int dt, int64_t bsz, int64_t m, int64_t n, int64_t k,
                                  const void *a, const int64_t sa[3], const void *b,
                                  const int64_t sb[3], void *c, const int64_t sc[3],
                                  const void *bias) {
    (void)dt, (void)bsz, (void)m, (void)n, (void)k, (void)a, (void)sa, (void)b, (void)sb;
    (void)c, (void)sc, (void)bias;
    return false;
}
void tsi_dnnl_matmul_batched_enable(bool on) { (void)on; }
int tsi_dnnl_matmul_batched_f32(int64_t bsz, int64_t m, int64_t n, int64_t k, const float *a,
                                const int64_t sa[3], const float *b, const int64_t sb[3], float *c,
                                const int64_t sc[3]) {
    (void)bsz, (void)m, (void)n, (void)k, (void)a, (void)sa, (void)b, (void)sb, (void)c, (void)sc;
    return 0;
}
bool tsi_dnnl_bf16_native(void) { return false; }
const char *tsi_dnnl_effective_isa(void) { return "none"; }
const char *tsi_dnnl_isa_name(void) { return "none"; }
uint64_t tsi_dnnl_matmul_count(void) { return 0; }
uint64_t tsi_dnnl_matmul_bf16_count(void) { return 0; }
uint64_t tsi_dnnl_matmul_builds(void) { return 0; }

#endif
