/* capture_record_layers.c — the recording backend's stand-ins for convolution and pooling, the
 * fused layers (attention, layer norm, RNN cells and sequences, batch norm, cross-entropy) and the
 * optimizer step and grad scaler, whose scalars a replay reads from the device
 * (capture_record.h). */
#include <string.h>

#include "backend/optim_step.h"
#include "core/capture_record.h"

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
    conv_args *a = tsi_capture_args_new(sizeof *a);
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
    conv_args *a = tsi_capture_args_new(sizeof *a);
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
    conv_args *a = tsi_capture_args_new(sizeof *a);
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
    conv_args *a = tsi_capture_args_new(sizeof *a);
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
    conv_args *a = tsi_capture_args_new(sizeof *a);
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
    sdpa_rec *r = tsi_capture_args_new(sizeof *r);
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
    const ts_backend *real = tsi_capture_real_of(be);
    return real->sdpa_supports(real, index, a);
}
static size_t pass_sdpa_workspace(const ts_backend *be, int index, ts_sdpa_args *a, bool backward) {
    const ts_backend *real = tsi_capture_real_of(be);
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
    ln_rec *r = tsi_capture_args_new(sizeof *r);
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
    const ts_backend *real = tsi_capture_real_of(be);
    return real->layer_norm_supports(real, index, a);
}
static size_t pass_ln_workspace(const ts_backend *be, int index, const ts_layer_norm_args *a) {
    const ts_backend *real = tsi_capture_real_of(be);
    return real->layer_norm_workspace(real, index, a);
}

static void run_rnn_cell_fwd(const ts_backend *be, int index, const void *p) {
    be->rnn_cell_forward(be, index, p);
}
static void run_rnn_cell_bwd(const ts_backend *be, int index, const void *p) {
    be->rnn_cell_backward(be, index, p);
}
static void rec_rnn_cell(const ts_rnn_cell_args *args, int index, tsi_replay_fn run) {
    ts_rnn_cell_args *a = tsi_capture_args_new(sizeof *a);
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
    ts_rnn_seq_args *a = tsi_capture_args_new(sizeof *a);
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
    ts_batch_norm_args *a = tsi_capture_args_new(sizeof *a);
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
    const ts_backend *real = tsi_capture_real_of(be);
    return real->batch_norm_supports(real, index, a);
}

static void run_ce_fwd(const ts_backend *be, int index, const void *p) {
    be->cross_entropy_forward(be, index, p);
}
static void run_ce_bwd(const ts_backend *be, int index, const void *p) {
    be->cross_entropy_backward(be, index, p);
}
static void rec_ce(const ts_cross_entropy_args *args, int index, tsi_replay_fn run) {
    ts_cross_entropy_args *a = tsi_capture_args_new(sizeof *a);
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
    ts_kview views[]; /* param, grad, state[0..TS_OPTIM_SLOTS), scalars, master: n each */
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
    optim_rec *r = tsi_capture_args_new(sizeof *r + (4 + TS_OPTIM_SLOTS) * n * sizeof(ts_kview));
    if (!r) return;
    r->a = *args;
    r->a.param = copy_table(r->views, args->param, n);
    r->a.grad = copy_table(r->views + n, args->grad, n);
    for (int k = 0; k < TS_OPTIM_SLOTS; k++)
        r->a.state[k] = copy_table(r->views + (2 + (size_t)k) * n, args->state[k], n);
    r->a.scalars = copy_table(r->views + (2 + TS_OPTIM_SLOTS) * n, args->scalars, n);
    r->a.master = copy_table(r->views + (3 + TS_OPTIM_SLOTS) * n, args->master, n);
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
    unscale_rec *r = tsi_capture_args_new(sizeof *r + count * sizeof(ts_kview));
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
    scale_rec *r = tsi_capture_args_new(sizeof *r);
    if (!r) return;
    *r = (scale_rec){*scale, *tracker, *found_inf, growth, backoff, interval};
    RECORD(run_update_scale, index, r);
}

/* ------------------------------------------------------------------ roi_align, roi_pool */
typedef struct roi_rec {
    ts_roi_args a;
    bool backward;
} roi_rec;
static void run_roi_align(const ts_backend *be, int index, const void *p) {
    const roi_rec *r = p;
    be->roi_align(be, index, &r->a, r->backward);
}
static void rec_roi_align(const ts_backend *be, int index, const ts_roi_args *ra, bool backward) {
    (void)be;
    roi_rec *r = tsi_capture_args_new(sizeof *r);
    if (!r) return;
    r->a = *ra, r->backward = backward;
    RECORD(run_roi_align, index, r);
}
static void run_roi_pool(const ts_backend *be, int index, const void *p) {
    const roi_rec *r = p;
    be->roi_pool(be, index, &r->a, r->backward);
}
static void rec_roi_pool(const ts_backend *be, int index, const ts_roi_args *ra, bool backward) {
    (void)be;
    roi_rec *r = tsi_capture_args_new(sizeof *r);
    if (!r) return;
    r->a = *ra, r->backward = backward;
    RECORD(run_roi_pool, index, r);
}

void tsi_capture_install_layers(ts_backend *b, const ts_backend *real) {
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
    b->roi_align = real->roi_align ? rec_roi_align : NULL;
    b->roi_pool = real->roi_pool ? rec_roi_pool : NULL;
    b->nms = NULL; /* its result is read on the host: nms refuses a capture */
}
