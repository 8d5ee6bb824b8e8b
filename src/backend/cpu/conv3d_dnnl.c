/* conv3d_dnnl.c — the float32 3-d convolution's forward as one oneDNN primitive (conv3d_dnnl.h).
 * As conv_dnnl.c does for 2-d: the primitive picks its memory formats (blocked, for its JIT
 * kernels); x and w are reordered into them from NCDHW / OIDHW and y back, in buffers of
 * host_scratch.c's cache. Primitives are built once per shape and thread count and kept in a small
 * table; when it is full a shape gets a primitive made and destroyed within its call. A primitive
 * runs concurrently from several threads, each call bringing its own stream and buffers. */
#include "backend/cpu/conv3d_dnnl.h"

#ifdef TS_HAVE_DNNL
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include <dnnl.h>

#include "backend/cpu/dnnl_common.h"

typedef struct c3_key { /* int64 only: no padding inside the memcmp'd key */
    int64_t threads, has_bias;
    tsi_conv3d_geom g;
} c3_key;

enum { A_SRC, A_W, A_B, A_DST, NARGS };

typedef struct c3_entry {
    c3_key key;
    bool used;
    dnnl_primitive_t prim;
    dnnl_memory_desc_t user[NARGS], prim_md[NARGS];
    dnnl_primitive_t reorder[NARGS]; /* user -> primitive for inputs, back for DST; NULL: none */
    size_t scratch;
} c3_entry;

#define C3_CACHE 16
static c3_entry cache[C3_CACHE];
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_uint_fast64_t runs;

uint64_t tsi_dnnl_conv3d_count(void) { return atomic_load(&runs); }

static void entry_free(c3_entry *e) {
    if (e->prim) dnnl_primitive_destroy(e->prim);
    for (int i = 0; i < NARGS; i++)
        if (e->reorder[i]) dnnl_primitive_destroy(e->reorder[i]);
    memset(e, 0, sizeof *e);
}

static bool build(c3_entry *e) {
    const tsi_conv3d_geom *g = &e->key.g;
    const int64_t src_d[5] = {g->n, g->c, g->in[0], g->in[1], g->in[2]};
    const int64_t dst_d[5] = {g->n, g->o, g->out[0], g->out[1], g->out[2]};
    const int64_t w_d[5] = {g->o, g->c, g->k[0], g->k[1], g->k[2]};
    const int64_t wg_d[6] = {g->groups, g->o / g->groups, g->c / g->groups,
                             g->k[0],   g->k[1],          g->k[2]};
    /* the bias is the first post-op (a per-channel binary add after the sum, as conv_dnnl.c's
     * forward: the primitive's own bias starts the accumulators, rounding every partial sum at
     * its scale), read where it is: src1 [1, O, 1, 1, 1] */
    const int64_t b_d[5] = {1, g->o, 1, 1, 1};
    /* oneDNN's dilation counts the gaps (PyTorch's - 1); the right padding is what makes the
     * output size PyTorch's floor rule gave */
    dnnl_dims_t strides = {0}, dil = {0}, pl = {0}, pr = {0};
    for (int i = 0; i < 3; i++) {
        strides[i] = g->s[i], dil[i] = g->d[i] - 1, pl[i] = g->p[i];
        pr[i] = (g->out[i] - 1) * g->s[i] - g->in[i] + (g->k[i] - 1) * g->d[i] + 1 - g->p[i];
    }
    dnnl_memory_desc_t any[NARGS];
    tsi_dnnl_plain_md(&e->user[A_SRC], 5, src_d, dnnl_ncdhw, dnnl_f32);
    tsi_dnnl_plain_md(&e->user[A_DST], 5, dst_d, dnnl_ncdhw, dnnl_f32);
    tsi_dnnl_plain_md(&e->user[A_B], 5, b_d, dnnl_ncdhw, dnnl_f32);
    e->prim_md[A_B] = e->user[A_B];
    tsi_dnnl_plain_md(&any[A_SRC], 5, src_d, dnnl_format_tag_any, dnnl_f32);
    tsi_dnnl_plain_md(&any[A_DST], 5, dst_d, dnnl_format_tag_any, dnnl_f32);
    if (g->groups > 1) {
        tsi_dnnl_plain_md(&e->user[A_W], 6, wg_d, dnnl_goidhw, dnnl_f32);
        tsi_dnnl_plain_md(&any[A_W], 6, wg_d, dnnl_format_tag_any, dnnl_f32);
    } else {
        tsi_dnnl_plain_md(&e->user[A_W], 5, w_d, dnnl_oidhw, dnnl_f32);
        tsi_dnnl_plain_md(&any[A_W], 5, w_d, dnnl_format_tag_any, dnnl_f32);
    }
    const bool bias = e->key.has_bias != 0;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_post_ops_t ops = NULL;
    dnnl_convolution_desc_t cd;
    bool ok =
        dnnl_primitive_attr_create(&attr) == dnnl_success &&
        dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user) == dnnl_success &&
        (!bias ||
         (dnnl_post_ops_create(&ops) == dnnl_success &&
          dnnl_post_ops_append_binary(ops, dnnl_binary_add, &e->user[A_B]) == dnnl_success &&
          dnnl_primitive_attr_set_post_ops(attr, ops) == dnnl_success)) &&
        dnnl_dilated_convolution_forward_desc_init(
            &cd, dnnl_forward_inference, dnnl_convolution_direct, &any[A_SRC], &any[A_W], NULL,
            &any[A_DST], strides, dil, pl, pr) == dnnl_success &&
        dnnl_primitive_desc_create(&pd, &cd, attr, tsi_dnnl_engine(), NULL) == dnnl_success;
    if (ops) dnnl_post_ops_destroy(ops);
    if (ok) {
        e->prim_md[A_SRC] = *dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0);
        e->prim_md[A_W] = *dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
        e->prim_md[A_DST] = *dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
        ok = tsi_dnnl_make_reorder(&e->user[A_SRC], &e->prim_md[A_SRC], &e->reorder[A_SRC]) &&
             tsi_dnnl_make_reorder(&e->user[A_W], &e->prim_md[A_W], &e->reorder[A_W]) &&
             tsi_dnnl_make_reorder(&e->prim_md[A_DST], &e->user[A_DST], &e->reorder[A_DST]);
        e->scratch = dnnl_memory_desc_get_size(
            dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0));
        ok = ok && dnnl_primitive_create(&e->prim, pd) == dnnl_success;
    }
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (attr) dnnl_primitive_attr_destroy(attr);
    return ok;
}

/* The entry for key, copied out under the lock; *own: built for this call alone (the table is
 * full), the caller destroys it. */
static bool lookup(const c3_key *key, c3_entry *out, bool *own) {
    *own = false;
    pthread_mutex_lock(&cache_lock);
    c3_entry *hit = NULL, *free_slot = NULL;
    for (int i = 0; i < C3_CACHE && !hit; i++) {
        if (cache[i].used && !memcmp(&cache[i].key, key, sizeof *key)) hit = &cache[i];
        if (!cache[i].used && !free_slot) free_slot = &cache[i];
    }
    bool ok = hit != NULL;
    if (hit) {
        *out = *hit;
    } else {
        c3_entry *e = free_slot ? free_slot : out;
        memset(e, 0, sizeof *e);
        e->key = *key;
        ok = build(e);
        if (!ok) {
            entry_free(e);
        } else if (free_slot) {
            free_slot->used = true;
            *out = *free_slot;
        } else {
            *own = true;
        }
    }
    pthread_mutex_unlock(&cache_lock);
    return ok;
}

/* What one call holds: per argument the user's memory and the primitive's (when reordered), the
 * buffers behind the latter, the scratchpad. */
typedef struct c3_run {
    dnnl_stream_t st;
    dnnl_memory_t user[NARGS], prim[NARGS], sm;
    ts_block *bufs[NARGS], *scratch;
} c3_run;

static void run_free(c3_run *r) {
    if (r->sm) dnnl_memory_destroy(r->sm);
    tsi_host_scratch_put(r->scratch);
    for (int i = 0; i < NARGS; i++) {
        if (r->user[i]) dnnl_memory_destroy(r->user[i]);
        if (r->prim[i]) dnnl_memory_destroy(r->prim[i]);
        tsi_host_scratch_put(r->bufs[i]);
    }
    if (r->st) dnnl_stream_destroy(r->st);
}

static bool run(const c3_entry *e, void *const ptrs[NARGS]) {
    const dnnl_engine_t engine = tsi_dnnl_engine();
    static const int dnnl_arg[NARGS] = {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS,
                                        DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1,
                                        DNNL_ARG_DST};
    c3_run r = {0};
    dnnl_exec_arg_t args[NARGS + 1];
    int n = 0;
    bool ok = dnnl_stream_create(&r.st, engine, dnnl_stream_default_flags) == dnnl_success;
    for (int i = 0; ok && i < NARGS; i++) {
        if (!ptrs[i]) continue; /* no bias */
        ok = dnnl_memory_create(&r.user[i], &e->user[i], engine, ptrs[i]) == dnnl_success;
        if (ok && e->reorder[i]) {
            void *buf = tsi_host_scratch_get(dnnl_memory_desc_get_size(&e->prim_md[i]), &r.bufs[i]);
            ok = buf && dnnl_memory_create(&r.prim[i], &e->prim_md[i], engine, buf) == dnnl_success;
            if (ok && i != A_DST) {
                dnnl_exec_arg_t ra[2] = {{DNNL_ARG_FROM, r.user[i]}, {DNNL_ARG_TO, r.prim[i]}};
                ok = dnnl_primitive_execute(e->reorder[i], r.st, 2, ra) == dnnl_success;
            }
        }
        args[n++] = (dnnl_exec_arg_t){dnnl_arg[i], r.prim[i] ? r.prim[i] : r.user[i]};
    }
    if (ok && e->scratch) {
        ok = tsi_dnnl_scratchpad(e->scratch, &r.sm, &r.scratch);
        if (ok) args[n++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, r.sm};
    }
    ok = ok && dnnl_primitive_execute(e->prim, r.st, n, args) == dnnl_success;
    if (ok && e->reorder[A_DST]) {
        dnnl_exec_arg_t ra[2] = {{DNNL_ARG_FROM, r.prim[A_DST]}, {DNNL_ARG_TO, r.user[A_DST]}};
        ok = dnnl_primitive_execute(e->reorder[A_DST], r.st, 2, ra) == dnnl_success;
    }
    ok = ok && dnnl_stream_wait(r.st) == dnnl_success;
    run_free(&r);
    return ok;
}

bool tsi_dnnl_conv3d_forward(const tsi_conv3d_geom *g, const float *x, const float *w,
                             const float *b, float *y) {
    if (!tsi_dnnl_engine() || g->groups < 1 || g->c % g->groups || g->o % g->groups) return false;
    c3_key key;
    memset(&key, 0, sizeof key);
    key.threads = tsi_dnnl_threads(), key.has_bias = b != NULL, key.g = *g;
    c3_entry e;
    bool own;
    if (!lookup(&key, &e, &own)) return false;
    void *ptrs[NARGS] = {(void *)x, (void *)w, (void *)b, y};
    const bool ok = run(&e, ptrs);
    if (own) entry_free(&e);
    if (ok) atomic_fetch_add(&runs, 1);
    return ok;
}

#else /* no oneDNN */
bool tsi_dnnl_conv3d_forward(const tsi_conv3d_geom *g, const float *x, const float *w,
                             const float *b, float *y) {
    (void)g, (void)x, (void)w, (void)b, (void)y;
    return false;
}
uint64_t tsi_dnnl_conv3d_count(void) { return 0; }
#endif

bool tsi_cpu_conv3d_forward(const ts_backend *be, int index, const tsi_conv3d_geom *g,
                            const ts_kview *x, const ts_kview *w, const ts_kview *b,
                            const ts_kview *y) {
    (void)be, (void)index;
    return tsi_dnnl_conv3d_forward(g, (const float *)x->data, (const float *)w->data,
                                   (const float *)b->data, (float *)y->data);
}
