/* capture_record_ops.c — the recording backend's stand-ins for the elementwise family, reductions
 * and scans, the matmul family, indexing, cdist, embedding_bag, FFT, softmax and random draws
 * (capture_record.h). */
#include "core/capture_record.h"

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
    ew_args *a = tsi_capture_args_new(sizeof *a);
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
    ew_args *a = tsi_capture_args_new(sizeof *a);
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
    ew_args *a = tsi_capture_args_new(sizeof *a);
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
    ew_args *a = tsi_capture_args_new(sizeof *a);
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
    ew_args *a = tsi_capture_args_new(sizeof *a);
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
    ew_args *a = tsi_capture_args_new(sizeof *a);
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
    ew_args *a = tsi_capture_args_new(sizeof *a);
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
    ew_args *a = tsi_capture_args_new(sizeof *a);
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
    ew_args *a = tsi_capture_args_new(sizeof *a);
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
    ew_args *a = tsi_capture_args_new(sizeof *a);
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
    ew_args *a = tsi_capture_args_new(sizeof *a);
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
    ew_args *a = tsi_capture_args_new(sizeof *a);
    if (!a) return;
    a->out = *out, a->a = *x, a->b = *y, a->c = *bias;
    RECORD(run_matmul_bias, index, a);
}

static void run_matmul_bgrad(const ts_backend *be, int index, const void *p) {
    const ew_args *a = p;
    (void)be->matmul_bgrad(be, index, &a->out, &a->a, &a->b, &a->c);
}
/* taken or declined as rec_softmax_backward's kernel (below): run once here, recorded if taken */
static bool rec_matmul_bgrad(const ts_backend *be, int index, const ts_kview *dw,
                             const ts_kview *db, const ts_kview *g, const ts_kview *x) {
    const ts_backend *real = tsi_capture_real_of(be);
    if (!real->matmul_bgrad || !real->matmul_bgrad(real, index, dw, db, g, x)) return false;
    ew_args *a = tsi_capture_args_new(sizeof *a);
    if (!a) return true;
    a->out = *dw, a->a = *db, a->b = *g, a->c = *x;
    RECORD(run_matmul_bgrad, index, a);
    return true;
}

static void run_index_select(const ts_backend *be, int index, const void *p) {
    const ew_args *a = p;
    be->index_select(be, index, &a->out, &a->a, a->dim, &a->b);
}
static void rec_index_select(const ts_backend *be, int index, const ts_kview *out,
                             const ts_kview *in, int dim, const ts_kview *idx) {
    (void)be;
    ew_args *a = tsi_capture_args_new(sizeof *a);
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
    ew_args *a = tsi_capture_args_new(sizeof *a);
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
    ew_args *a = tsi_capture_args_new(sizeof *a);
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
    ew_args *a = tsi_capture_args_new(sizeof *a);
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
    bag_rec *r = tsi_capture_args_new(sizeof *r);
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
    ew_args *a = tsi_capture_args_new(sizeof *a);
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
    gather_dims_args *a = tsi_capture_args_new(sizeof *a);
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
    ew_args *a = tsi_capture_args_new(sizeof *a);
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
    const ts_backend *real = tsi_capture_real_of(be);
    if (!real->softmax_backward || !real->softmax_backward(real, index, gx, y, g, dim, log))
        return false;
    ew_args *a = tsi_capture_args_new(sizeof *a);
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
    random_args *a = tsi_capture_args_new(sizeof *a);
    if (!a) return;
    a->out = *out, a->kind = kind, a->p0 = p0, a->p1 = p1, a->rel = offset;
    RECORD(run_random, index, a);
}

void tsi_capture_install_ops(ts_backend *b, const ts_backend *real) {
    b->copy = rec_copy;
    b->fill = rec_fill;
    b->unary = rec_unary;
    b->binary = rec_binary;
    b->binary_widening = real->binary_widening ? rec_binary_widening : NULL;
    b->binary_scalar = rec_binary_scalar;
    b->where = rec_where;
    b->ternary = real->ternary ? rec_ternary : NULL;
    b->bce = NULL; /* its result is read on the host: a captured loss is composed */
    b->reduce = rec_reduce;
    b->scan = real->scan ? rec_scan : NULL;
    b->matmul = rec_matmul;
    b->matmul_bias = real->matmul_bias ? rec_matmul_bias : NULL;
    b->matmul_bgrad = real->matmul_bgrad ? rec_matmul_bgrad : NULL;
    b->matmul_bias_act = NULL; /* a captured Linear + activation is composed */
    b->matmul_dact_bgrad = NULL;
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
}
