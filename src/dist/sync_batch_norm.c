/* sync_batch_norm.c — torch.nn.SyncBatchNorm's training step: batch_norm whose per-channel
 * statistics span the ranks of a process group, composed of public ops and the collectives.
 *
 * Forward (PyTorch's batch_norm_stats, batch_norm_gather_stats_with_counts, batch_norm_elemt):
 * each rank computes its own mean, biased variance and count per channel; one all-gather brings
 * every rank's [mean, var, count] (float64) to every rank, which combines them as Chan's parallel
 * Welford update does (mean = sum n_r m_r / N, var = sum n_r (v_r + (m_r - mean)^2) / N: no
 * sum-of-squares cancellation), normalises its own rows with them, and updates the running
 * statistics with the global mean and the global unbiased variance var N / (N - 1).
 *
 * Backward (batch_norm_backward_reduce, batch_norm_backward_elemt): each rank sums dy and
 * dy (x - mean) over its rows per channel; its weight and bias gradients are those local sums (DDP
 * then averages them, as PyTorch's); for the input gradient the two sums are all-reduced, so that
 * dx = (dy - sum_dy / N - (x - mean) invstd^2 sum_dy_xmu / N) invstd w is the gradient of the
 * global batch's loss (the sum of every rank's). */
#include <stdlib.h>

#include "amp/autocast.h"
#include "autograd/autograd.h"
#include "autograd/trace.h"

static const char *OP = "sync_batch_norm";

/* the statistics' dtype: float64 for a float64 input, float32 otherwise (float16 / bfloat16
 * inputs compute in float32, as PyTorch's kernels) */
static ts_dtype stat_dtype(ts_dtype dt) { return dt == TS_F64 ? TS_F64 : TS_F32; }

static ts_tensor *as_dtype(ts_tensor *t, ts_dtype dt) {
    return t && t->dtype != dt ? ts_to_dtype(t, dt) : t;
}

/* the dims every channel reduces over (all but dim 1), and the shape [1, C, 1, ...] */
static void channel_dims(ts_shape s, ts_dims *red, ts_shape *cs) {
    red->n = 0;
    cs->ndim = s.ndim;
    for (int i = 0; i < s.ndim; i++) {
        cs->dims[i] = i == 1 ? s.dims[1] : 1;
        if (i != 1) red->d[red->n++] = i;
    }
}

static bool check_channel(ts_tensor *t, const char *what, int64_t c) {
    if (!t) return true;
    if (t->shape.ndim != 1 || t->shape.dims[0] != c)
        return tsi_error_set(TS_ERR_SHAPE, "%s: %s should contain %lld elements, got %s", OP, what,
                             (long long)c, tsi_desc(t)),
               false;
    if (!tsi_is_float(t->dtype))
        return tsi_error_set(TS_ERR_DTYPE, "%s: expected a floating point %s, got %s", OP, what,
                             tsi_desc(t)),
               false;
    return true;
}

/* This rank's own checks (every rank still joins the gather when they fail: forward below). */
static bool check_args(ts_tensor *x, ts_tensor *rm, ts_tensor *rv, ts_tensor *w, ts_tensor *b,
                       double momentum) {
    if (!tsi_check_input(OP, x, "input")) return false;
    ts_tensor *all[5] = {x, rm, rv, w, b};
    ts_device dev;
    if (!tsi_same_device(OP, all, 5, false, &dev)) return false;
    if (x->shape.ndim < 2)
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s: expected an input [N, C, ...] of 2 or more dims, got %s", OP,
                             tsi_desc(x)),
               false;
    if (!tsi_is_float(x->dtype))
        return tsi_error_set(TS_ERR_DTYPE, "%s: expected a floating point input, got %s", OP,
                             tsi_desc(x)),
               false;
    const int64_t c = x->shape.dims[1];
    if (c < 1)
        return tsi_error_set(TS_ERR_SHAPE, "%s: the input %s has no channels", OP, tsi_desc(x)),
               false;
    if (!(momentum >= 0 && momentum <= 1))
        return tsi_error_set(TS_ERR_ARG, "%s: momentum must be in [0, 1], got %g", OP, momentum),
               false;
    return check_channel(rm, "running_mean", c) && check_channel(rv, "running_var", c) &&
           check_channel(w, "weight", c) && check_channel(b, "bias", c);
}

/* [mean (C), biased var (C), count (1)] of this rank's rows, float64 on x's device; zeros with
 * count 0 for a rank without rows (it takes part, contributing nothing) */
static ts_tensor *local_stats(ts_tensor *xs, ts_dims red, int64_t c, int64_t count) {
    const ts_opts o = {.dtype = TS_F64, .device = tsi_device(xs)};
    if (count == 0) return ts_zeros(TS_SHAPE(2 * c + 1), o);
    ts_tensor *parts[3] = {ts_to_dtype(ts_mean_dims(xs, red, false), TS_F64),
                           ts_to_dtype(ts_var_dims(xs, red, false, 0), TS_F64),
                           ts_full(TS_SHAPE(1), (double)count, o)};
    return ts_cat(parts, 3, 0);
}

/* running = (1 - momentum) running + momentum stat (in place, its dtype kept); both computed before
 * either changes, so that a failure leaves both as they were */
static void update_running(ts_tensor *rm, ts_tensor *rv, ts_tensor *mean, ts_tensor *var_unbiased,
                           double momentum) {
    if (!rm && !rv) return;
    ts_tensor *m = rm ? ts_add(ts_mul_scalar(as_dtype(rm, TS_F64), 1 - momentum),
                               ts_mul_scalar(mean, momentum))
                      : NULL;
    ts_tensor *v = rv ? ts_add(ts_mul_scalar(as_dtype(rv, TS_F64), 1 - momentum),
                               ts_mul_scalar(var_unbiased, momentum))
                      : NULL;
    if ((rm && !m) || (rv && !v) || ts_error() != TS_OK) return;
    if (rm) ts_copy_(rm, m);
    if (rv) ts_copy_(rv, v);
}

/* ------------------------------------------------------------------ backward */
typedef struct sbn_ctx {
    ts_dist_group *group;
    bool comm;    /* false: a world of one without ts_dist_init (nothing to reduce) */
    double count; /* N: the values per channel over every rank */
} sbn_ctx;

static void sbn_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi) {
    const sbn_ctx *ctx = n->ctx;
    ts_tensor *x = tsi_node_saved(n, 0);
    ts_tensor *w = tsi_node_has_saved(n, 1) ? tsi_node_saved(n, 1) : NULL;
    ts_tensor *mean = tsi_node_saved(n, 2), *invstd = tsi_node_saved(n, 3);
    const bool ok = ctx && x && (w || !tsi_node_has_saved(n, 1)) && mean && invstd;
    ts_tensor *buf = NULL, *xmu = NULL, *g = NULL, *sum_dy = NULL, *sum_dy_xmu = NULL;
    ts_dims red = {0};
    ts_shape cs = {0};
    if (ok) {
        channel_dims(x->shape, &red, &cs);
        const ts_dtype sd = mean->dtype;
        g = go[0] ? as_dtype(go[0], sd)
                  : ts_zeros(x->shape, (ts_opts){.dtype = sd, .device = tsi_device(x)});
        xmu = ts_sub(as_dtype(x, sd), ts_reshape(mean, cs));
        sum_dy = ts_sum_dims(g, red, false);
        sum_dy_xmu = ts_sum_dims(ts_mul(g, xmu), red, false);
        if (tsi_node_needs(n, 0)) buf = ts_cat((ts_tensor *[]){sum_dy, sum_dy_xmu}, 2, 0);
    }
    /* the input's gradient needs both sums over the whole group; a rank whose own steps failed
     * (buf NULL) still joins the reduction, which then fails on every rank together */
    if (tsi_node_needs(n, 0) && ctx && ctx->comm &&
        ts_dist_all_reduce(buf, TS_DIST_SUM, ctx->group) != TS_OK)
        return;
    if (!ok || (!buf && tsi_node_needs(n, 0)) || ts_error() != TS_OK) return;
    ts_tensor *r[3] = {0};
    if (tsi_node_needs(n, 0)) {
        const int64_t c = x->shape.dims[1];
        ts_tensor *mean_dy = ts_mul_scalar(ts_narrow(buf, 0, 0, c), 1.0 / ctx->count);
        ts_tensor *mean_dy_xmu = ts_mul_scalar(ts_narrow(buf, 0, c, c), 1.0 / ctx->count);
        ts_tensor *k = ts_reshape(ts_mul(ts_square(invstd), mean_dy_xmu), cs);
        ts_tensor *scale = w ? ts_mul(invstd, as_dtype(w, invstd->dtype)) : invstd;
        ts_tensor *inner = ts_sub(ts_sub(g, ts_reshape(mean_dy, cs)), ts_mul(xmu, k));
        r[0] = ts_mul(inner, ts_reshape(scale, cs));
    }
    if (tsi_node_needs(n, 1)) r[1] = ts_mul(sum_dy_xmu, invstd);
    if (tsi_node_needs(n, 2)) r[2] = sum_dy;
    for (int i = 0; i < 3; i++) gi[i] = as_dtype(r[i], n->in_dtype[i]);
}

/* ------------------------------------------------------------------ forward */
static ts_tensor *sync_batch_norm_op(ts_tensor *x, ts_tensor *rm, ts_tensor *rv, ts_tensor *w,
                                     ts_tensor *b, double momentum, double eps, ts_dist_group *g) {
    tsi_init();
    if (eps == 0) eps = 1e-5;
    const bool comm = g || ts_dist_is_initialized();
    const bool valid = check_args(x, rm, rv, w, b, momentum);
    const int world = !comm ? 1 : ts_dist_group_size(g);

    ts_scope_begin();
    ts_no_grad_begin();
    ts_tensor *xs = NULL, *stats = NULL, *all = NULL;
    ts_dims red = {0};
    ts_shape cs = {0};
    int64_t c = 0;
    if (valid) {
        c = x->shape.dims[1];
        channel_dims(x->shape, &red, &cs);
        xs = as_dtype(x, stat_dtype(x->dtype));
        stats = local_stats(xs, red, c, tsi_numel(x->shape) / c);
        if (stats && comm)
            all = ts_empty(TS_SHAPE(world, 2 * c + 1),
                           (ts_opts){.dtype = TS_F64, .device = tsi_device(x)});
    }
    /* every rank joins the gather, also one whose own checks or steps failed: its failure then
     * reaches the others (naming it) instead of leaving them waiting */
    if (comm) {
        if (ts_dist_all_gather(all, stats, g) != TS_OK) all = NULL;
    } else if (stats) {
        all = ts_reshape(stats, TS_SHAPE(1, 2 * c + 1));
    }
    ts_tensor *y = NULL;
    if (all) {
        /* Chan et al.'s combination of the ranks' (count, mean, M2 = count var) */
        ts_tensor *means = ts_narrow(all, 1, 0, c), *vars = ts_narrow(all, 1, c, c);
        ts_tensor *counts = ts_narrow(all, 1, 2 * c, 1);
        const double n = ts_item(ts_sum(counts));
        if (n <= 1 && ts_error() == TS_OK)
            tsi_error_set(TS_ERR_ARG,
                          "%s: Expected more than 1 value per channel when training, got %.0f "
                          "over the %d ranks of the group (this rank's input %s)",
                          OP, n, world, tsi_shape_str(x->shape));
        ts_tensor *mean = ts_div_scalar(ts_sum_dims(ts_mul(counts, means), TS_DIMS(0), false), n);
        ts_tensor *dev = ts_square(ts_sub(means, ts_reshape(mean, TS_SHAPE(1, c))));
        ts_tensor *m2 = ts_sum_dims(ts_mul(counts, ts_add(vars, dev)), TS_DIMS(0), false);
        ts_tensor *var = ts_div_scalar(m2, n);
        const ts_dtype sd = xs ? xs->dtype : TS_F32;
        ts_tensor *mean_s = as_dtype(mean, sd);
        ts_tensor *invstd = as_dtype(ts_rsqrt(ts_add_scalar(var, eps)), sd);
        /* y = (x - mean) invstd w + b (batch_norm_elemt) */
        ts_tensor *scale = w ? ts_mul(invstd, as_dtype(w, sd)) : invstd;
        y = ts_mul(ts_sub(xs, ts_reshape(mean_s, cs)), ts_reshape(scale, cs));
        if (b) y = ts_add(y, ts_reshape(as_dtype(b, sd), cs));
        y = as_dtype(y, x->dtype);
        if (ts_error() == TS_OK) update_running(rm, rv, mean, ts_div_scalar(m2, n - 1), momentum);
        ts_no_grad_end();
        if (ts_error() != TS_OK) {
            y = NULL;
        } else if (tsi_needs_graph((ts_tensor *[]){x, w, b}, 3)) {
            sbn_ctx *ctx = malloc(sizeof *ctx);
            if (!ctx) {
                tsi_error_set(TS_ERR_OOM, "%s: out of host memory", OP);
                y = NULL;
            } else {
                *ctx = (sbn_ctx){.group = g, .comm = comm, .count = n};
                ts_node *node =
                    tsi_record("SyncBatchNormBackward", OP, sbn_backward, (ts_tensor *[]){x, w, b},
                               3, y, (ts_tensor *[]){x, w, mean_s, invstd}, 4);
                if (node) {
                    node->ctx = ctx, node->ctx_free = free;
                } else {
                    free(ctx);
                    if (ts_error() != TS_OK) y = NULL;
                }
            }
        }
    } else {
        ts_no_grad_end();
    }
    y = ts_keep(y);
    ts_scope_end();
    return y;
}

ts_tensor *ts_sync_batch_norm(ts_tensor *x, ts_tensor *running_mean, ts_tensor *running_var,
                              ts_tensor *w, ts_tensor *b, double momentum, double eps,
                              ts_dist_group *g) {
    /* autocast: batch_norm's rule (nothing cast; a half input computes in float32) */
    ts_tensor *const ins[5] = {x, w, b, running_mean, running_var};
    tsi_ac_frame ac;
    TSI_AUTOCAST_ENTER(&ac, "batch_norm", &x, &w, &b);
    ts_tensor *y = tsi_autocast_exit(
        &ac, sync_batch_norm_op(x, running_mean, running_var, w, b, momentum, eps, g));
    return tsi_trace(OP, ins, 5, y, NULL, 0, (double[]){eps, momentum}, 2);
}
