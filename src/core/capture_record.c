/* capture_record.c — the recording backend: while a thread captures on a device, tsi_be hands its
 * kernel calls to this stand-in, which records each call (its views, scalars and parameter
 * structs copied) for ts_graph_replay to run on the real backend, and refuses what a capture cannot
 * hold: host reads and synchronisation. Random draws take the replay's counters; the optimizer
 * step reads its scalars from the device. Queries (device_count, memory, sdpa_supports...) and raw
 * memory go straight to the real backend. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "backend/optim_step.h"
#include "core/capture.h"
#include "core/internal.h"

/* ------------------------------------------------------------------ helpers */
/* args of `size` bytes, zeroed; NULL + TS_ERR_OOM (the capture breaks) */
static void *args_new(size_t size) {
    void *a = calloc(1, size);
    if (!a && !ts_error()) tsi_error_set(TS_ERR_OOM, "graph capture: out of host memory");
    return a;
}

/* a view copied, or an absent one (data NULL) for NULL */
static ts_kview view_of(const ts_kview *v) { return v ? *v : (ts_kview){0}; }
static const ts_kview *view_or_null(const ts_kview *v) { return v->data ? v : NULL; }

#define RECORD(fn, index, a) (void)tsi_capture_append(fn, index, a)

/* ------------------------------------------------------------------ memory */
typedef struct d2d_args {
    int src_index;
    void *dst;
    const void *src;
    size_t n;
} d2d_args;
static void run_d2d(const ts_backend *be, int index, const void *p) {
    const d2d_args *a = p;
    be->copy_d2d(be, index, a->dst, a->src_index, a->src, a->n);
}

static const ts_backend *real_of(const ts_backend *rec);

/* Host values (ts_from_data, the scalars ops make) go to a block the graph holds, now and once;
 * each replay copies them from there on the device, so a device graph reads no host memory. */
static void rec_h2d(const ts_backend *be, int index, void *dst, const void *src, size_t n) {
    if (!n) return;
    const ts_backend *real = real_of(be);
    void *kept = tsi_capture_const(n);
    if (!kept) return;
    real->copy_h2d(real, index, kept, src, n);
    d2d_args *a = args_new(sizeof *a);
    if (!a) return;
    *a = (d2d_args){index, dst, kept, n};
    RECORD(run_d2d, index, a);
}

static void rec_d2h(const ts_backend *be, int index, void *dst, const void *src, size_t n) {
    (void)be, (void)index, (void)dst, (void)src, (void)n;
    tsi_capture_refuse("copy to host", "a host read");
}

static void rec_sync(const ts_backend *be, int index) {
    (void)be, (void)index;
    tsi_capture_refuse("synchronize", "a device synchronisation");
}

static void rec_d2d(const ts_backend *be, int dst_index, void *dst, int src_index, const void *src,
                    size_t n) {
    (void)be;
    d2d_args *a = args_new(sizeof *a);
    if (!a) return;
    *a = (d2d_args){src_index, dst, src, n};
    RECORD(run_d2d, dst_index, a);
}

typedef struct zero_args {
    void *p;
    size_t n;
} zero_args;
static void run_zero(const ts_backend *be, int index, const void *p) {
    const zero_args *a = p;
    be->memset_zero(be, index, a->p, a->n);
}
static void rec_zero(const ts_backend *be, int index, void *p, size_t n) {
    (void)be;
    zero_args *a = args_new(sizeof *a);
    if (!a) return;
    *a = (zero_args){p, n};
    RECORD(run_zero, index, a);
}

/* ------------------------------------------------------------------ elementwise */
/* the views and scalars of the elementwise family, one record shape for all */
typedef struct ew_args {
    int op, dim, nred;
    bool flag;
    ts_kview out, a, b, c;
    double p0, p1;
} ew_args;

static void run_copy(const ts_backend *be, int index, const void *p) {
    const ew_args *a = p;
    be->copy(be, index, &a->out, &a->a);
}
static void rec_copy(const ts_backend *be, int index, const ts_kview *dst, const ts_kview *src) {
    (void)be;
    ew_args *a = args_new(sizeof *a);
    if (!a) return;
    a->out = *dst, a->a = *src;
    RECORD(run_copy, index, a);
}

static void run_fill(const ts_backend *be, int index, const void *p) {
    const ew_args *a = p;
    be->fill(be, index, &a->out, a->p0);
}
static void rec_fill(const ts_backend *be, int index, const ts_kview *dst, double value) {
    (void)be;
    ew_args *a = args_new(sizeof *a);
    if (!a) return;
    a->out = *dst, a->p0 = value;
    RECORD(run_fill, index, a);
}

static void run_unary(const ts_backend *be, int index, const void *p) {
    const ew_args *a = p;
    be->unary(be, index, (ts_unary_op)a->op, &a->out, &a->a, a->p0, a->p1);
}
static void rec_unary(const ts_backend *be, int index, ts_unary_op op, const ts_kview *out,
                      const ts_kview *x, double p0, double p1) {
    (void)be;
    ew_args *a = args_new(sizeof *a);
    if (!a) return;
    a->op = (int)op, a->out = *out, a->a = *x, a->p0 = p0, a->p1 = p1;
    RECORD(run_unary, index, a);
}

static void run_binary(const ts_backend *be, int index, const void *p) {
    const ew_args *a = p;
    be->binary(be, index, (ts_binary_op)a->op, &a->out, &a->a, &a->b);
}
static void rec_binary(const ts_backend *be, int index, ts_binary_op op, const ts_kview *out,
                       const ts_kview *x, const ts_kview *y) {
    (void)be;
    ew_args *a = args_new(sizeof *a);
    if (!a) return;
    a->op = (int)op, a->out = *out, a->a = *x, a->b = *y;
    RECORD(run_binary, index, a);
}

static void run_binary_widening(const ts_backend *be, int index, const void *p) {
    const ew_args *a = p;
    be->binary_widening(be, index, (ts_binary_op)a->op, &a->out, &a->a, &a->b);
}
static void rec_binary_widening(const ts_backend *be, int index, ts_binary_op op,
                                const ts_kview *out, const ts_kview *x, const ts_kview *y) {
    (void)be;
    ew_args *a = args_new(sizeof *a);
    if (!a) return;
    a->op = (int)op, a->out = *out, a->a = *x, a->b = *y;
    RECORD(run_binary_widening, index, a);
}

static void run_binary_scalar(const ts_backend *be, int index, const void *p) {
    const ew_args *a = p;
    be->binary_scalar(be, index, (ts_binary_op)a->op, &a->out, &a->a, a->p0);
}
static void rec_binary_scalar(const ts_backend *be, int index, ts_binary_op op, const ts_kview *out,
                              const ts_kview *x, double s) {
    (void)be;
    ew_args *a = args_new(sizeof *a);
    if (!a) return;
    a->op = (int)op, a->out = *out, a->a = *x, a->p0 = s;
    RECORD(run_binary_scalar, index, a);
}

static void run_where(const ts_backend *be, int index, const void *p) {
    const ew_args *a = p;
    be->where(be, index, &a->out, &a->c, &a->a, &a->b);
}
static void rec_where(const ts_backend *be, int index, const ts_kview *out, const ts_kview *cond,
                      const ts_kview *x, const ts_kview *y) {
    (void)be;
    ew_args *a = args_new(sizeof *a);
    if (!a) return;
    a->out = *out, a->c = *cond, a->a = *x, a->b = *y;
    RECORD(run_where, index, a);
}

static void run_ternary(const ts_backend *be, int index, const void *p) {
    const ew_args *a = p;
    be->ternary(be, index, (ts_ternary_op)a->op, &a->out, &a->a, &a->b, &a->c, a->p0);
}
static void rec_ternary(const ts_backend *be, int index, ts_ternary_op op, const ts_kview *out,
                        const ts_kview *x, const ts_kview *y, const ts_kview *z, double pv) {
    (void)be;
    ew_args *a = args_new(sizeof *a);
    if (!a) return;
    a->op = (int)op, a->out = *out, a->a = *x, a->b = *y, a->c = *z, a->p0 = pv;
    RECORD(run_ternary, index, a);
}

static void run_reduce(const ts_backend *be, int index, const void *p) {
    const ew_args *a = p;
    be->reduce(be, index, (ts_reduce_op)a->op, &a->out, &a->a, a->nred, a->p0);
}
static void rec_reduce(const ts_backend *be, int index, ts_reduce_op op, const ts_kview *out,
                       const ts_kview *in, int nred, double param) {
    (void)be;
    ew_args *a = args_new(sizeof *a);
    if (!a) return;
    a->op = (int)op, a->out = *out, a->a = *in, a->nred = nred, a->p0 = param;
    RECORD(run_reduce, index, a);
}

static void run_scan(const ts_backend *be, int index, const void *p) {
    const ew_args *a = p;
    be->scan(be, index, (ts_scan_op)a->op, &a->out, a->flag ? &a->b : NULL, &a->a, a->dim);
}
static void rec_scan(const ts_backend *be, int index, ts_scan_op op, const ts_kview *out,
                     const ts_kview *idx, const ts_kview *in, int dim) {
    (void)be;
    ew_args *a = args_new(sizeof *a);
    if (!a) return;
    a->op = (int)op, a->out = *out, a->a = *in, a->dim = dim, a->flag = idx != NULL;
    if (idx) a->b = *idx;
    RECORD(run_scan, index, a);
}

static void run_matmul(const ts_backend *be, int index, const void *p) {
    const ew_args *a = p;
    be->matmul(be, index, &a->out, &a->a, &a->b);
}
static void rec_matmul(const ts_backend *be, int index, const ts_kview *out, const ts_kview *x,
                       const ts_kview *y) {
    (void)be;
    ew_args *a = args_new(sizeof *a);
    if (!a) return;
    a->out = *out, a->a = *x, a->b = *y;
    RECORD(run_matmul, index, a);
}

static void run_matmul_bias(const ts_backend *be, int index, const void *p) {
    const ew_args *a = p;
    be->matmul_bias(be, index, &a->out, &a->a, &a->b, &a->c);
}
static void rec_matmul_bias(const ts_backend *be, int index, const ts_kview *out, const ts_kview *x,
                            const ts_kview *y, const ts_kview *bias) {
    (void)be;
    ew_args *a = args_new(sizeof *a);
    if (!a) return;
    a->out = *out, a->a = *x, a->b = *y, a->c = *bias;
    RECORD(run_matmul_bias, index, a);
}

static void run_index_select(const ts_backend *be, int index, const void *p) {
    const ew_args *a = p;
    be->index_select(be, index, &a->out, &a->a, a->dim, &a->b);
}
static void rec_index_select(const ts_backend *be, int index, const ts_kview *out,
                             const ts_kview *in, int dim, const ts_kview *idx) {
    (void)be;
    ew_args *a = args_new(sizeof *a);
    if (!a) return;
    a->out = *out, a->a = *in, a->dim = dim, a->b = *idx;
    RECORD(run_index_select, index, a);
}

static void run_gather(const ts_backend *be, int index, const void *p) {
    const ew_args *a = p;
    be->gather(be, index, &a->out, &a->a, a->dim, &a->b);
}
static void rec_gather(const ts_backend *be, int index, const ts_kview *out, const ts_kview *in,
                       int dim, const ts_kview *idx) {
    (void)be;
    ew_args *a = args_new(sizeof *a);
    if (!a) return;
    a->out = *out, a->a = *in, a->dim = dim, a->b = *idx;
    RECORD(run_gather, index, a);
}

static void run_scatter_add(const ts_backend *be, int index, const void *p) {
    const ew_args *a = p;
    be->scatter_add(be, index, &a->out, a->dim, &a->b, &a->a);
}
static void rec_scatter_add(const ts_backend *be, int index, const ts_kview *dst, int dim,
                            const ts_kview *idx, const ts_kview *src) {
    (void)be;
    ew_args *a = args_new(sizeof *a);
    if (!a) return;
    a->out = *dst, a->dim = dim, a->b = *idx, a->a = *src;
    RECORD(run_scatter_add, index, a);
}

static void run_cdist(const ts_backend *be, int index, const void *p) {
    const ew_args *a = p;
    be->cdist(be, index, &a->out, &a->a, &a->b, a->p0);
}
static void rec_cdist(const ts_backend *be, int index, const ts_kview *out, const ts_kview *x1,
                      const ts_kview *x2, double p) {
    (void)be;
    ew_args *a = args_new(sizeof *a);
    if (!a) return;
    a->out = *out, a->a = *x1, a->b = *x2, a->p0 = p;
    RECORD(run_cdist, index, a);
}

typedef struct bag_rec {
    ts_kview out;
    ts_bag_args a;
} bag_rec;
static void run_embedding_bag(const ts_backend *be, int index, const void *p) {
    const bag_rec *r = p;
    be->embedding_bag(be, index, &r->out, &r->a);
}
static void rec_embedding_bag(const ts_backend *be, int index, const ts_kview *out,
                              const ts_bag_args *ba) {
    (void)be;
    bag_rec *r = args_new(sizeof *r);
    if (!r) return;
    r->out = *out, r->a = *ba;
    RECORD(run_embedding_bag, index, r);
}

/* a transform replayed: scratch it cannot have is TS_ERR_OOM from ts_graph_replay */
static void run_fft(const ts_backend *be, int index, const void *p) {
    const ew_args *a = p;
    if (!be->fft(be, index, &a->out, &a->a, a->dim, (ts_fft_kind)a->op, a->flag, a->p0))
        tsi_kernel_oom("fft", 0);
}
static bool rec_fft(const ts_backend *be, int index, const ts_kview *out, const ts_kview *in,
                    int dim, ts_fft_kind kind, bool forward, double scale) {
    (void)be;
    ew_args *a = args_new(sizeof *a);
    if (!a) return true; /* the capture has failed with TS_ERR_OOM already */
    a->out = *out, a->a = *in, a->dim = dim, a->op = (int)kind, a->flag = forward, a->p0 = scale;
    RECORD(run_fft, index, a);
    return true;
}

typedef struct gather_dims_args {
    int k;
    ts_kview out, in, idx[3];
} gather_dims_args;
static void run_gather_dims(const ts_backend *be, int index, const void *p) {
    const gather_dims_args *a = p;
    be->gather_dims(be, index, &a->out, &a->in, a->k, a->idx);
}
static void rec_gather_dims(const ts_backend *be, int index, const ts_kview *out,
                            const ts_kview *in, int k, const ts_kview *idx) {
    (void)be;
    gather_dims_args *a = args_new(sizeof *a);
    if (!a) return;
    a->k = k < 3 ? k : 3, a->out = *out, a->in = *in;
    for (int i = 0; i < a->k; i++) a->idx[i] = idx[i];
    RECORD(run_gather_dims, index, a);
}

static void run_softmax(const ts_backend *be, int index, const void *p) {
    const ew_args *a = p;
    be->softmax(be, index, &a->out, &a->a, a->dim, a->flag);
}
static void rec_softmax(const ts_backend *be, int index, const ts_kview *out, const ts_kview *in,
                        int dim, bool log) {
    (void)be;
    ew_args *a = args_new(sizeof *a);
    if (!a) return;
    a->out = *out, a->a = *in, a->dim = dim, a->flag = log;
    RECORD(run_softmax, index, a);
}

static void run_softmax_backward(const ts_backend *be, int index, const void *p) {
    const ew_args *a = p;
    (void)be->softmax_backward(be, index, &a->out, &a->a, &a->b, a->dim, a->flag);
}
/* Whether the kernel takes these views is its own decision (it writes nothing when it does
 * not): it runs once here, over the capture's memory, which holds nothing anyone reads yet, and
 * is recorded when it took them; otherwise the front end composes the gradient, recorded op by
 * op, as it would eagerly. */
static bool rec_softmax_backward(const ts_backend *be, int index, const ts_kview *gx,
                                 const ts_kview *y, const ts_kview *g, int dim, bool log) {
    const ts_backend *real = real_of(be);
    if (!real->softmax_backward || !real->softmax_backward(real, index, gx, y, g, dim, log))
        return false;
    ew_args *a = args_new(sizeof *a);
    if (!a) return true;
    a->out = *gx, a->a = *y, a->b = *g, a->dim = dim, a->flag = log;
    RECORD(run_softmax_backward, index, a);
    return true;
}

/* random numbers: drawn at the replay's offsets (tsi_capture_rng_at), so each replay draws what
 * the eager step at its place would; `offset` is relative to the graph's stream here
 * (tsi_rng_reserve_on) */
typedef struct random_args {
    ts_kview out;
    ts_random_kind kind;
    double p0, p1;
    uint64_t rel;
} random_args;
static void run_random(const ts_backend *be, int index, const void *p) {
    const random_args *a = p;
    uint64_t seed, offset;
    tsi_capture_rng_at(a->rel, &seed, &offset);
    be->random(be, index, a->kind, &a->out, a->p0, a->p1, seed, offset);
}
static void rec_random(const ts_backend *be, int index, ts_random_kind kind, const ts_kview *out,
                       double p0, double p1, uint64_t seed, uint64_t offset) {
    (void)be, (void)seed;
    random_args *a = args_new(sizeof *a);
    if (!a) return;
    a->out = *out, a->kind = kind, a->p0 = p0, a->p1 = p1, a->rel = offset;
    RECORD(run_random, index, a);
}

/* ------------------------------------------------------------------ convolution, pooling */
typedef struct conv_args {
    ts_kview out, x, w, bias;
    ts_conv2d_params conv;
    ts_pool2d_params pool;
} conv_args;

static void run_conv(const ts_backend *be, int index, const void *p) {
    const conv_args *a = p;
    be->conv2d(be, index, &a->out, &a->x, &a->w, view_or_null(&a->bias), &a->conv);
}
static void rec_conv(const ts_backend *be, int index, const ts_kview *out, const ts_kview *x,
                     const ts_kview *w, const ts_kview *bias, const ts_conv2d_params *p) {
    (void)be;
    conv_args *a = args_new(sizeof *a);
    if (!a) return;
    a->out = *out, a->x = *x, a->w = *w, a->bias = view_of(bias), a->conv = *p;
    /* a cache keyed on the weight's identity may serve a replay stale weights */
    a->conv.weight_uid = 0;
    RECORD(run_conv, index, a);
}

static void run_conv_bwd_data(const ts_backend *be, int index, const void *p) {
    const conv_args *a = p;
    be->conv2d_backward_data(be, index, &a->out, &a->x, &a->w, &a->conv);
}
static void rec_conv_bwd_data(const ts_backend *be, int index, const ts_kview *gx,
                              const ts_kview *gout, const ts_kview *w, const ts_conv2d_params *p) {
    (void)be;
    conv_args *a = args_new(sizeof *a);
    if (!a) return;
    a->out = *gx, a->x = *gout, a->w = *w, a->conv = *p;
    RECORD(run_conv_bwd_data, index, a);
}

static void run_conv_bwd_weight(const ts_backend *be, int index, const void *p) {
    const conv_args *a = p;
    be->conv2d_backward_weight(be, index, &a->out, &a->x, &a->w, &a->conv);
}
static void rec_conv_bwd_weight(const ts_backend *be, int index, const ts_kview *gw,
                                const ts_kview *gout, const ts_kview *x,
                                const ts_conv2d_params *p) {
    (void)be;
    conv_args *a = args_new(sizeof *a);
    if (!a) return;
    a->out = *gw, a->x = *gout, a->w = *x, a->conv = *p;
    RECORD(run_conv_bwd_weight, index, a);
}

static void run_pool(const ts_backend *be, int index, const void *p) {
    const conv_args *a = p;
    be->pool2d(be, index, &a->out, &a->x, view_or_null(&a->w), &a->pool);
}
static void rec_pool(const ts_backend *be, int index, const ts_kview *out, const ts_kview *x,
                     const ts_kview *indices, const ts_pool2d_params *p) {
    (void)be;
    conv_args *a = args_new(sizeof *a);
    if (!a) return;
    a->out = *out, a->x = *x, a->w = view_of(indices), a->pool = *p;
    RECORD(run_pool, index, a);
}

static void run_pool_bwd(const ts_backend *be, int index, const void *p) {
    const conv_args *a = p;
    be->pool2d_backward(be, index, &a->out, &a->x, view_or_null(&a->w), &a->pool);
}
static void rec_pool_bwd(const ts_backend *be, int index, const ts_kview *gx, const ts_kview *gout,
                         const ts_kview *indices, const ts_pool2d_params *p) {
    (void)be;
    conv_args *a = args_new(sizeof *a);
    if (!a) return;
    a->out = *gx, a->x = *gout, a->w = view_of(indices), a->pool = *p;
    RECORD(run_pool_bwd, index, a);
}

/* ------------------------------------------------------------------ fused layers */
typedef struct sdpa_rec {
    ts_sdpa_args a;
    void *ws;
} sdpa_rec;
/* the recorded arguments, with dropout's counters at this replay's (relative offset recorded) */
static ts_sdpa_args sdpa_replay_args(const sdpa_rec *r) {
    ts_sdpa_args a = r->a;
    if (a.dropout_p > 0) tsi_capture_rng_at(r->a.offset, &a.seed, &a.offset);
    return a;
}
static void run_sdpa_fwd(const ts_backend *be, int index, const void *p) {
    const sdpa_rec *r = p;
    const ts_sdpa_args a = sdpa_replay_args(r);
    be->sdpa_forward(be, index, &a, r->ws);
}
static void run_sdpa_bwd(const ts_backend *be, int index, const void *p) {
    const sdpa_rec *r = p;
    const ts_sdpa_args a = sdpa_replay_args(r);
    be->sdpa_backward(be, index, &a, r->ws);
}
static void rec_sdpa(const ts_sdpa_args *args, void *ws, int index, tsi_replay_fn run) {
    sdpa_rec *r = args_new(sizeof *r);
    if (!r) return;
    r->a = *args, r->ws = ws;
    RECORD(run, index, r);
}
static void rec_sdpa_fwd(const ts_backend *be, int index, const ts_sdpa_args *a, void *ws) {
    (void)be;
    rec_sdpa(a, ws, index, run_sdpa_fwd);
}
static void rec_sdpa_bwd(const ts_backend *be, int index, const ts_sdpa_args *a, void *ws) {
    (void)be;
    rec_sdpa(a, ws, index, run_sdpa_bwd);
}
static bool pass_sdpa_supports(const ts_backend *be, int index, const ts_sdpa_args *a) {
    const ts_backend *real = real_of(be);
    return real->sdpa_supports(real, index, a);
}
static size_t pass_sdpa_workspace(const ts_backend *be, int index, ts_sdpa_args *a, bool backward) {
    const ts_backend *real = real_of(be);
    return real->sdpa_workspace(real, index, a, backward);
}

typedef struct ln_rec {
    ts_layer_norm_args a;
    void *ws;
} ln_rec;
static void run_ln_fwd(const ts_backend *be, int index, const void *p) {
    const ln_rec *r = p;
    be->layer_norm_forward(be, index, &r->a);
}
static void run_ln_bwd(const ts_backend *be, int index, const void *p) {
    const ln_rec *r = p;
    be->layer_norm_backward(be, index, &r->a, r->ws);
}
static void rec_ln(const ts_layer_norm_args *args, void *ws, int index, tsi_replay_fn run) {
    ln_rec *r = args_new(sizeof *r);
    if (!r) return;
    r->a = *args, r->ws = ws;
    RECORD(run, index, r);
}
static void rec_ln_fwd(const ts_backend *be, int index, const ts_layer_norm_args *a) {
    (void)be;
    rec_ln(a, NULL, index, run_ln_fwd);
}
static void rec_ln_bwd(const ts_backend *be, int index, const ts_layer_norm_args *a, void *ws) {
    (void)be;
    rec_ln(a, ws, index, run_ln_bwd);
}
static bool pass_ln_supports(const ts_backend *be, int index, const ts_layer_norm_args *a) {
    const ts_backend *real = real_of(be);
    return real->layer_norm_supports(real, index, a);
}
static size_t pass_ln_workspace(const ts_backend *be, int index, const ts_layer_norm_args *a) {
    const ts_backend *real = real_of(be);
    return real->layer_norm_workspace(real, index, a);
}

static void run_rnn_cell_fwd(const ts_backend *be, int index, const void *p) {
    be->rnn_cell_forward(be, index, p);
}
static void run_rnn_cell_bwd(const ts_backend *be, int index, const void *p) {
    be->rnn_cell_backward(be, index, p);
}
static void rec_rnn_cell(const ts_rnn_cell_args *args, int index, tsi_replay_fn run) {
    ts_rnn_cell_args *a = args_new(sizeof *a);
    if (!a) return;
    *a = *args;
    RECORD(run, index, a);
}
static void rec_rnn_cell_fwd(const ts_backend *be, int index, const ts_rnn_cell_args *a) {
    (void)be;
    rec_rnn_cell(a, index, run_rnn_cell_fwd);
}
static void rec_rnn_cell_bwd(const ts_backend *be, int index, const ts_rnn_cell_args *a) {
    (void)be;
    rec_rnn_cell(a, index, run_rnn_cell_bwd);
}

/* a layer direction's steps: one call, replayed as one (its views are the capture's memory) */
static void run_rnn_seq_fwd(const ts_backend *be, int index, const void *p) {
    be->rnn_seq_forward(be, index, p);
}
static void run_rnn_seq_bwd(const ts_backend *be, int index, const void *p) {
    be->rnn_seq_backward(be, index, p);
}
static void rec_rnn_seq(const ts_rnn_seq_args *args, int index, tsi_replay_fn run) {
    ts_rnn_seq_args *a = args_new(sizeof *a);
    if (!a) return;
    *a = *args;
    RECORD(run, index, a);
}
static void rec_rnn_seq_fwd(const ts_backend *be, int index, const ts_rnn_seq_args *a) {
    (void)be;
    rec_rnn_seq(a, index, run_rnn_seq_fwd);
}
static void rec_rnn_seq_bwd(const ts_backend *be, int index, const ts_rnn_seq_args *a) {
    (void)be;
    rec_rnn_seq(a, index, run_rnn_seq_bwd);
}

static void run_bn_fwd(const ts_backend *be, int index, const void *p) {
    be->batch_norm_forward(be, index, p);
}
static void run_bn_bwd(const ts_backend *be, int index, const void *p) {
    be->batch_norm_backward(be, index, p);
}
static void rec_bn(const ts_batch_norm_args *args, int index, tsi_replay_fn run) {
    ts_batch_norm_args *a = args_new(sizeof *a);
    if (!a) return;
    *a = *args;
    RECORD(run, index, a);
}
static void rec_bn_fwd(const ts_backend *be, int index, const ts_batch_norm_args *a) {
    (void)be;
    rec_bn(a, index, run_bn_fwd);
}
static void rec_bn_bwd(const ts_backend *be, int index, const ts_batch_norm_args *a) {
    (void)be;
    rec_bn(a, index, run_bn_bwd);
}
static bool pass_bn_supports(const ts_backend *be, int index, const ts_batch_norm_args *a) {
    const ts_backend *real = real_of(be);
    return real->batch_norm_supports(real, index, a);
}

static void run_ce_fwd(const ts_backend *be, int index, const void *p) {
    be->cross_entropy_forward(be, index, p);
}
static void run_ce_bwd(const ts_backend *be, int index, const void *p) {
    be->cross_entropy_backward(be, index, p);
}
static void rec_ce(const ts_cross_entropy_args *args, int index, tsi_replay_fn run) {
    ts_cross_entropy_args *a = args_new(sizeof *a);
    if (!a) return;
    *a = *args;
    RECORD(run, index, a);
}
static void rec_ce_fwd(const ts_backend *be, int index, const ts_cross_entropy_args *a) {
    (void)be;
    rec_ce(a, index, run_ce_fwd);
}
static void rec_ce_bwd(const ts_backend *be, int index, const ts_cross_entropy_args *a) {
    (void)be;
    rec_ce(a, index, run_ce_bwd);
}

/* ------------------------------------------------------------------ optimizer, grad scaler */
/* the step's arguments with their tables, in one block */
typedef struct optim_rec {
    struct ts_optim_step_args a;
    ts_kview skip_if;
    ts_kview views[]; /* param, grad, state[0..TS_OPTIM_SLOTS), scalars: n each */
} optim_rec;
static void run_optim(const ts_backend *be, int index, const void *p) {
    const optim_rec *r = p;
    be->optim_step(be, index, &r->a);
}
/* A table of n views copied into dst (NULL stays NULL). */
static const ts_kview *copy_table(ts_kview *dst, const ts_kview *src, size_t n) {
    if (!src) return NULL;
    memcpy(dst, src, n * sizeof *dst);
    return dst;
}
static void rec_optim(const ts_backend *be, int index, const struct ts_optim_step_args *args) {
    (void)be;
    if (ts_error()) return;
    /* the front end hands a captured step its scalars on the device (src/optim/optim_capture.c) */
    if (!args->scalars) {
        tsi_error_set(TS_ERR_STATE, "optimizer step: captured without its scalars on the device");
        return;
    }
    for (int i = 0; args->fresh && i < args->n; i++)
        if (args->fresh[i]) {
            tsi_error_set(TS_ERR_STATE,
                          "optimizer step: a parameter takes its first momentum step inside the "
                          "capture: run warm-up steps eagerly before capturing");
            return;
        }
    const size_t n = (size_t)(args->n > 0 ? args->n : 0);
    optim_rec *r = args_new(sizeof *r + (3 + TS_OPTIM_SLOTS) * n * sizeof(ts_kview));
    if (!r) return;
    r->a = *args;
    r->a.param = copy_table(r->views, args->param, n);
    r->a.grad = copy_table(r->views + n, args->grad, n);
    for (int k = 0; k < TS_OPTIM_SLOTS; k++)
        r->a.state[k] = copy_table(r->views + (2 + (size_t)k) * n, args->state[k], n);
    r->a.scalars = copy_table(r->views + (2 + TS_OPTIM_SLOTS) * n, args->scalars, n);
    r->a.skip_if = args->skip_if ? (r->skip_if = *args->skip_if, &r->skip_if) : NULL;
    r->a.step = NULL;  /* counted on the device */
    r->a.fresh = NULL; /* all false: checked above */
    RECORD(run_optim, index, r);
}

typedef struct unscale_rec {
    ts_kview found_inf, inv_scale;
    int n;
    ts_kview grads[];
} unscale_rec;
static void run_unscale(const ts_backend *be, int index, const void *p) {
    const unscale_rec *r = p;
    be->amp_unscale(be, index, r->grads, r->n, &r->found_inf, &r->inv_scale);
}
static void rec_unscale(const ts_backend *be, int index, const ts_kview *grads, int n,
                        const ts_kview *found_inf, const ts_kview *inv_scale) {
    (void)be;
    const size_t count = (size_t)(n > 0 ? n : 0);
    unscale_rec *r = args_new(sizeof *r + count * sizeof(ts_kview));
    if (!r) return;
    r->found_inf = *found_inf, r->inv_scale = *inv_scale, r->n = n;
    if (count) memcpy(r->grads, grads, count * sizeof(ts_kview));
    RECORD(run_unscale, index, r);
}

typedef struct scale_rec {
    ts_kview scale, tracker, found_inf;
    double growth, backoff;
    int interval;
} scale_rec;
static void run_update_scale(const ts_backend *be, int index, const void *p) {
    const scale_rec *r = p;
    be->amp_update_scale(be, index, &r->scale, &r->tracker, &r->found_inf, r->growth, r->backoff,
                         r->interval);
}
static void rec_update_scale(const ts_backend *be, int index, const ts_kview *scale,
                             const ts_kview *tracker, const ts_kview *found_inf, double growth,
                             double backoff, int interval) {
    (void)be;
    scale_rec *r = args_new(sizeof *r);
    if (!r) return;
    *r = (scale_rec){*scale, *tracker, *found_inf, growth, backoff, interval};
    RECORD(run_update_scale, index, r);
}

/* ------------------------------------------------------------------ the stand-ins */
enum { MAX_BACKENDS = 8 };
typedef struct stand_in {
    ts_backend rec;
    const ts_backend *real;
} stand_in;
static stand_in *_Atomic stand_ins[MAX_BACKENDS];
static pthread_mutex_t stand_in_lock = PTHREAD_MUTEX_INITIALIZER;

static const ts_backend *real_of(const ts_backend *rec) {
    return ((const stand_in *)(const void *)rec)->real;
}

static void install_recorders(ts_backend *b, const ts_backend *real) {
    *b = *real; /* queries, raw memory and ctx as the real one's */
    b->copy_h2d = rec_h2d;
    b->copy_d2h = rec_d2h;
    b->copy_d2d = rec_d2d;
    b->memset_zero = rec_zero;
    b->synchronize = rec_sync;
    b->copy = rec_copy;
    b->fill = rec_fill;
    b->unary = rec_unary;
    b->binary = rec_binary;
    b->binary_widening = real->binary_widening ? rec_binary_widening : NULL;
    b->binary_scalar = rec_binary_scalar;
    b->where = rec_where;
    b->ternary = real->ternary ? rec_ternary : NULL;
    b->reduce = rec_reduce;
    b->scan = real->scan ? rec_scan : NULL;
    b->matmul = rec_matmul;
    b->matmul_bias = real->matmul_bias ? rec_matmul_bias : NULL;
    b->index_select = rec_index_select;
    b->gather = rec_gather;
    b->scatter_add = rec_scatter_add;
    b->cdist = real->cdist ? rec_cdist : NULL;
    b->embedding_bag = real->embedding_bag ? rec_embedding_bag : NULL;
    b->gather_dims = real->gather_dims ? rec_gather_dims : NULL;
    b->fft = real->fft ? rec_fft : NULL;
    b->softmax = rec_softmax;
    b->softmax_backward = real->softmax_backward ? rec_softmax_backward : NULL;
    b->random = rec_random;
    b->conv2d = rec_conv;
    b->conv2d_backward_data = rec_conv_bwd_data;
    b->conv2d_backward_weight = rec_conv_bwd_weight;
    b->pool2d = rec_pool;
    b->pool2d_backward = rec_pool_bwd;
    b->sdpa_supports = real->sdpa_supports ? pass_sdpa_supports : NULL;
    b->sdpa_workspace = real->sdpa_workspace ? pass_sdpa_workspace : NULL;
    b->sdpa_forward = real->sdpa_forward ? rec_sdpa_fwd : NULL;
    b->sdpa_backward = real->sdpa_backward ? rec_sdpa_bwd : NULL;
    b->layer_norm_supports = real->layer_norm_supports ? pass_ln_supports : NULL;
    b->layer_norm_workspace = real->layer_norm_workspace ? pass_ln_workspace : NULL;
    b->layer_norm_forward = real->layer_norm_forward ? rec_ln_fwd : NULL;
    b->layer_norm_backward = real->layer_norm_backward ? rec_ln_bwd : NULL;
    b->rnn_cell_forward = real->rnn_cell_forward ? rec_rnn_cell_fwd : NULL;
    b->rnn_cell_backward = real->rnn_cell_backward ? rec_rnn_cell_bwd : NULL;
    b->rnn_seq_forward = real->rnn_seq_forward ? rec_rnn_seq_fwd : NULL;
    b->rnn_seq_backward = real->rnn_seq_backward ? rec_rnn_seq_bwd : NULL;
    b->batch_norm_supports = real->batch_norm_supports ? pass_bn_supports : NULL;
    b->batch_norm_forward = real->batch_norm_forward ? rec_bn_fwd : NULL;
    b->batch_norm_backward = real->batch_norm_backward ? rec_bn_bwd : NULL;
    b->cross_entropy_forward = real->cross_entropy_forward ? rec_ce_fwd : NULL;
    b->cross_entropy_backward = real->cross_entropy_backward ? rec_ce_bwd : NULL;
    b->optim_step = real->optim_step ? rec_optim : NULL;
    b->amp_unscale = real->amp_unscale ? rec_unscale : NULL;
    b->amp_update_scale = real->amp_update_scale ? rec_update_scale : NULL;
}

const ts_backend *tsi_capture_backend_of(const ts_backend *real) {
    const int t = (int)real->type;
    if (t < 0 || t >= MAX_BACKENDS) return real;
    stand_in *s = atomic_load(&stand_ins[t]);
    if (s) return &s->rec;
    pthread_mutex_lock(&stand_in_lock);
    s = atomic_load(&stand_ins[t]);
    if (!s && (s = malloc(sizeof *s))) {
        install_recorders(&s->rec, real);
        s->real = real;
        atomic_store(&stand_ins[t], s);
    }
    pthread_mutex_unlock(&stand_in_lock);
    if (s) return &s->rec;
    /* no stand-in: the capture breaks (the ops see the error pending and stop) */
    if (!ts_error()) tsi_error_set(TS_ERR_OOM, "graph capture: out of host memory");
    return real;
}
