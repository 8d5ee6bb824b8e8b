/* rewrite_conv.c — the convolution rewrites of ts_onnx_opts.optimize (optimize.c): a
 * BatchNormalization in inference form folded into the Conv before it (the Conv's weight and bias
 * rewritten in place, computed in float64 on the host), then a Relu, a Clip with bounds known at
 * load, a HardSigmoid or a HardSwish fused with the Conv before it into one node running
 * tsi_conv2d_act. A rewrite applies only
 * where nothing else sees what it removes or changes: the Conv's output read by that one node, the
 * rewritten tensors read by these nodes alone. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn/bn_fold.h"
#include "nn/conv_fused.h"
#include "onnx/ops_nn.h"

typedef enum outcome { R_SKIP, R_DONE, R_FAIL } outcome;

static outcome oom(void) {
    tsi_error_set(TS_ERR_OOM, "onnx_load: out of host memory (convolution rewrites)");
    return R_FAIL;
}

/* ------------------------------------------------------------------ the fused node */
/* what the fused node applies to its convolution's output (the node's state) */
typedef struct conv_act {
    tsi_conv_act act;
    double lo, hi; /* TSI_CONV_ACT_CLIP's bounds, NAN = none */
} conv_act;

static TSO_NN_RUN(run_conv_act) {
    (void)c;
    const conv_act *a = n->state;
    ts_tensor *x = in[0], *w = in[1];
    ts_conv2d_opts o;
    bool one_d;
    if (!tso_nn_conv2d_setup(n, &x, &w, &o, &one_d)) return false;
    ts_tensor *y = tsi_conv2d_act(x, w, tso_nn_opt(n, in, 2), o, a->act, a->lo, a->hi);
    out[0] = one_d && y ? ts_squeeze_dim(y, 2) : y;
    return out[0] || tso_fail_pending(n);
}

/* Not in the operator table (no file names it): the fused node keeps the Conv's proto (its
 * attributes) and label, so errors still name the Conv. */
static const tso_op_def conv_act_def = {"FusedConv", 1, run_conv_act, tso_nn_check_conv, false};

bool tso_fused_conv_act(const tso_node *n, tsi_conv_act *act, double *lo, double *hi) {
    if (n->def != &conv_act_def || !n->state) return false;
    const conv_act *a = n->state;
    *act = a->act, *lo = a->lo, *hi = a->hi;
    return true;
}

/* ------------------------------------------------------------------ the graph */
/* the same when one node alone reads it (no graph output, no sub-graph): safe to change in place */
static ts_tensor *owned(const tso_graph *g, int v) {
    return v >= 0 && g->values[v].uses == 1 && !g->values[v].pinned ? tso_known(g, v) : NULL;
}

/* the node that alone reads node n's only output, as its first input; -1 when another node, a
 * sub-graph or the graph's outputs see it too */
static int sole_reader(const tso_graph *g, const int *reader, const tso_node *n) {
    if (n->n_out != 1 || n->out[0] < 0) return -1;
    const tso_value *v = &g->values[n->out[0]];
    int r = v->uses == 1 && !v->pinned ? reader[n->out[0]] : -1;
    return r >= 0 && g->nodes[r].n_in > 0 && g->nodes[r].in[0] == n->out[0] ? r : -1;
}

/* Node k takes over the only output of node r, which dies. */
static void take_output(tso_graph *g, int k, int r, bool *dead) {
    tso_node *n = &g->nodes[k];
    g->values[n->out[0]].producer = -1;
    n->out[0] = g->nodes[r].out[0];
    g->values[n->out[0]].producer = k;
    dead[r] = true;
}

/* ------------------------------------------------------------------ BatchNormalization folding */
/* b is a BatchNormalization in inference form (running statistics, output Y alone) with one
 * value per channel */
static bool bn_inference(const tso_node *b) {
    if (!tso_is_op(b, "BatchNormalization") || b->n_in < 5) return false;
    for (int i = 1; i < b->n_out; i++)
        if (b->out[i] >= 0) return false;
    for (int i = 1; i < 5; i++)
        if (b->in[i] < 0) return false;
    /* the same reading of the attributes as ops_nn.c's run_batch_norm */
    bool training = b->opset >= 14  ? tso_attr_int(b, "training_mode", 0) != 0
                    : b->opset <= 6 ? tso_attr_int(b, "is_test", 0) == 0
                                    : false;
    bool per_activation = b->opset < 9 && tso_attr_int(b, "spatial", 1) == 0;
    return !training && !per_activation;
}

/* t: a floating vector of len values */
static bool channel_vector(ts_tensor *t, int64_t len) {
    return t && ts_ndim(t) == 1 && ts_size(t, 0) == len && ts_dtype_is_floating(ts_dtype_of(t));
}

/* dst's values replaced by src's (same dtype and device), under no-grad, as dst may be a
 * parameter */
static bool write_back(ts_tensor *dst, ts_tensor *src) {
    ts_no_grad_begin();
    bool ok = ts_copy_(dst, src) != NULL;
    ts_no_grad_end();
    return ok;
}

/* W' and b' (nn/bn_fold.h: the nn modules' eval path folds with the same code) written into f->w
 * and bias (b = 0 when the Conv has none). R_SKIP, nothing written, when some s or b' is not
 * finite: the unfolded graph keeps its own arithmetic there. */
static outcome fold_values(const tsi_bn_fold_src *f, ts_tensor *bias) {
    ts_tensor *w, *b;
    switch (tsi_bn_fold(f, &w, &b)) {
    case TSI_BN_FOLD_NOT_FINITE:
        return R_SKIP;
    case TSI_BN_FOLD_FAILED:
        return R_FAIL;
    case TSI_BN_FOLD_DONE:
        break;
    }
    outcome r = write_back(f->w, w) && write_back(bias, b) ? R_DONE : R_FAIL;
    ts_release(w), ts_release(b);
    return r == R_FAIL && !ts_error() ? oom() : r;
}

/* the fold's tensors when every one is known, read by these two nodes alone and of one value per
 * output channel */
static bool fold_inputs(const tso_graph *g, const tso_node *conv, const tso_node *bn,
                        tsi_bn_fold_src *f) {
    int bias_v = conv->n_in > 2 ? conv->in[2] : -1;
    *f = (tsi_bn_fold_src){.w = owned(g, conv->in[1]),
                           .b = owned(g, bias_v),
                           .scale = owned(g, bn->in[1]),
                           .shift = owned(g, bn->in[2]),
                           .mean = owned(g, bn->in[3]),
                           .var = owned(g, bn->in[4]),
                           .eps = tso_attr_float(bn, "epsilon", 1e-5f)};
    if (!f->w || ts_ndim(f->w) < 1 || !ts_dtype_is_floating(ts_dtype_of(f->w))) return false;
    int64_t oc = ts_size(f->w, 0);
    if (oc < 1 || (bias_v >= 0 && !channel_vector(f->b, oc))) return false;
    ts_tensor *p[4] = {f->scale, f->shift, f->mean, f->var};
    for (int i = 0; i < 4; i++)
        if (!channel_vector(p[i], oc)) return false;
    /* without a bias of its own the Conv takes BatchNormalization's B: it must be of W's type */
    return bias_v >= 0 || ts_dtype_of(f->shift) == ts_dtype_of(f->w);
}

/* the Conv's bias input set to value v (a third input added when it has two, W and X) */
static bool set_bias(tso_node *n, int v) {
    if (n->n_in > 2) {
        n->in[2] = v;
        return true;
    }
    int *io = malloc(sizeof(int) * (size_t)(3 + n->n_out + 1));
    if (!io) return oom(), false;
    memcpy(io, n->in, 2 * sizeof(int));
    io[2] = v;
    memcpy(io + 3, n->out, sizeof(int) * (size_t)n->n_out);
    free(n->in);
    n->in = io;
    n->out = io + 3;
    n->n_in = 3;
    return true;
}

/* BatchNormalization node r folded into Conv node k, which takes its output */
static outcome fold_bn(tso_graph *g, int k, int r, bool *dead) {
    tso_node *conv = &g->nodes[k], *bn = &g->nodes[r];
    tsi_bn_fold_src f;
    if (!bn_inference(bn) || !fold_inputs(g, conv, bn, &f)) return R_SKIP;
    int depth = ts_scope_depth();
    ts_scope_begin();
    if (ts_scope_depth() != depth + 1) return R_FAIL;
    outcome o = fold_values(&f, f.b ? f.b : f.shift);
    ts_scope_end();
    if (o != R_DONE) return o;
    if (!f.b && !set_bias(conv, bn->in[2])) return R_FAIL;
    take_output(g, k, r, dead);
    return R_DONE;
}

/* ------------------------------------------------------------------ activation fusion */
/* The activation node r applies, when the fused node can apply it: Relu, HardSwish, HardSigmoid,
 * or Clip whose bounds are known at load (attributes before opset 11, optional inputs from it). */
static outcome act_of(const tso_graph *g, const tso_node *r, conv_act *a) {
    if (r->n_out != 1 || r->out[0] < 0) return R_SKIP;
    if (tso_is_op(r, "Relu")) {
        *a = (conv_act){TSI_CONV_ACT_RELU, NAN, NAN};
        return R_DONE;
    }
    if (tso_is_op(r, "HardSwish")) {
        *a = (conv_act){TSI_CONV_ACT_HARDSWISH, 1.0 / 6.0, 0.5};
        return R_DONE;
    }
    if (tso_is_op(r, "HardSigmoid")) { /* the attributes as run_hard_sigmoid reads them */
        *a = (conv_act){TSI_CONV_ACT_HARDSIGMOID, tso_attr_float(r, "alpha", 0.2f),
                        tso_attr_float(r, "beta", 0.5f)};
        return R_DONE;
    }
    if (!tso_is_op(r, "Clip")) return R_SKIP;
    double b[2] = {NAN, NAN};
    if (r->opset < 11) {
        b[0] = tso_attr_float(r, "min", NAN);
        b[1] = tso_attr_float(r, "max", NAN);
    }
    for (int i = 1; r->opset >= 11 && i <= 2; i++) {
        if (i >= r->n_in || r->in[i] < 0) continue;
        ts_tensor *t = tso_known(g, r->in[i]);
        if (!t || ts_numel(t) != 1) return R_SKIP;
        b[i - 1] = ts_item(t);
        if (ts_error()) return tso_fail_pending(r), R_FAIL;
    }
    if (b[0] > b[1]) return R_SKIP; /* ONNX then gives max everywhere: left to Clip */
    /* an infinite bound on its own side bounds nothing */
    if (b[0] == -INFINITY) b[0] = NAN;
    if (b[1] == INFINITY) b[1] = NAN;
    bool none = isnan(b[0]) && isnan(b[1]);
    *a = (conv_act){none ? TSI_CONV_ACT_NONE : TSI_CONV_ACT_CLIP, b[0], b[1]};
    return R_DONE;
}

/* Conv node k and the activation node r after it as one node running tsi_conv2d_act: conv2d's
 * 2-D and 1-D forms, so the weight must be known at load with 1 or 2 spatial dims */
static outcome fuse_act(tso_graph *g, int k, int r, bool *dead) {
    tso_node *n = &g->nodes[k];
    ts_tensor *w = n->n_in > 1 ? tso_known(g, n->in[1]) : NULL;
    if (!w || ts_ndim(w) < 3 || ts_ndim(w) > 4 || n->state) return R_SKIP;
    conv_act a;
    outcome o = act_of(g, &g->nodes[r], &a);
    if (o != R_DONE) return o;
    conv_act *st = malloc(sizeof *st);
    if (!st) return oom();
    *st = a;
    n->state = st;
    n->free_state = free;
    n->def = &conv_act_def;
    n->op_type = conv_act_def.op_type;
    take_output(g, k, r, dead);
    return R_DONE;
}

/* ------------------------------------------------------------------ the pass */
static bool rewrite_graph(tso_graph *g, int *reader, bool *dead) {
    for (int v = 0; v < g->n_values; v++) reader[v] = -1;
    for (int k = 0; k < g->n_nodes; k++)
        for (int i = 0; i < g->nodes[k].n_in; i++)
            if (g->nodes[k].in[i] >= 0) reader[g->nodes[k].in[i]] = k;
    for (int k = 0; k < g->n_nodes; k++) {
        tso_node *n = &g->nodes[k];
        if (dead[k] || n->def->run != tso_nn_run_conv || n->n_in < 2) continue;
        int r = sole_reader(g, reader, n);
        outcome o = r >= 0 ? fold_bn(g, k, r, dead) : R_SKIP;
        if (o == R_FAIL) return false;
        if (o == R_DONE) r = sole_reader(g, reader, n);
        if (r >= 0 && fuse_act(g, k, r, dead) == R_FAIL) return false;
    }
    return true;
}

bool tso_rewrite_conv(tso_model *m) {
    tso_graph *g = m->graph;
    int *reader = malloc(((size_t)g->n_values + 1) * sizeof *reader);
    bool *dead = calloc((size_t)g->n_nodes + 1, sizeof *dead);
    bool ok = reader && dead && rewrite_graph(g, reader, dead);
    if (!reader || !dead) oom();
    /* after a failure too: the graph stays whole for the loader to free */
    if (dead) tso_graph_drop_dead(g, dead);
    free(reader);
    free(dead);
    return ok;
}
