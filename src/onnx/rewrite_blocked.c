/* rewrite_blocked.c — the last rewrite of ts_onnx_opts.optimize (optimize.c): activations kept in
 * oneDNN's channel-blocked layout (nn/conv_blocked.h: [N, ceil(C/B), H, W, B]) between
 * consecutive convolutions, so that the convolutions' primitives read and write them as they are
 * instead of reordering from and to NCHW at each call (MobileNetV3-Small: 89 reorders a forward,
 * more time than its convolutions).
 *
 * A value is kept blocked when its producer can give that form: a Conv (or the fused Conv +
 * activation of rewrite_conv.c) oneDNN runs — 2-D, float32 weight known at load, explicit
 * symmetric pads, group 1 or depthwise, and one the CPU's selector gives oneDNN (conv_select.c's
 * table, asked through backend/conv_select_query.h: not those the direct kernels take) — or a
 * node on blocked inputs alone: Relu, Clip, HardSwish, HardSigmoid, LeakyRelu, Sigmoid
 * (elementwise: any finite padding stays finite), Add and Mul of two blocked values of the same
 * channel count (the layouts then broadcast alike: the squeeze-excitation's [N, Cb, 1, 1, B] scale
 * against [N, Cb, H, W, B]), and GlobalAveragePool (a mean over dims 2 and 3); such a Mul runs
 * the blocked per-channel scale kernel when one operand is the other's [N, Cb, 1, 1, B] scale. A
 * Conv's output is blocked only when some reader takes the blocked form. The producer then writes
 * a new value (its name + "#blocked"); the readers that take it read that, and when others read
 * the value, or it is a graph output or a sub-graph reads it, a FromBlocked node after the
 * producer makes the original value from it.
 *
 * Which layout a run uses is decided per run (tso_blocked_mode): the block of the device's
 * blocked convolutions (nn/conv_blocked.h's tsi_conv_block: the CPU with oneDNN, unless
 * TS_CONV=builtin), none while a gradient may be recorded (grad mode on and an input or weight
 * requiring grad) — and then every rewritten node runs as the node it replaced, FromBlocked passes
 * its input on, and the results are the unrewritten graph's. Dense conv nets run channels_last
 * instead where oneDNN's NHWC kernels are native (tso_blocked_mode). TS_ONNX_BLOCKED at load:
 * nchw keeps the blocked layout for every net (the layout before issue 54), 0 skips the rewrite
 * (comparisons, benchmarks); unset or anything else (nhwc) is the default. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/autograd.h"
#include "backend/conv_select_query.h"
#include "backend/env_config.h"
#include "nn/conv_blocked.h"
#include "onnx/ops_nn.h"

static bool oom(void) {
    return tsi_error_set(TS_ERR_OOM, "onnx_load: out of host memory (blocked-layout rewrite)"),
           false;
}

/* ------------------------------------------------------------------ the nodes */
/* A rewritten Conv or GlobalAveragePool: the node it was, to run as in a plain run */
typedef struct bnode {
    const tso_op_def *orig;
    void *orig_state;
    void (*orig_free)(void *);
    /* the Conv's */
    ts_conv2d_opts o;
    tsi_conv_act act;
    double lo, hi;
    int64_t c; /* input channels (FromBlocked: the value's channels) */
    bool x_blocked, y_blocked;
} bnode;

static void bnode_free(void *p) {
    bnode *b = p;
    if (b && b->orig_free) b->orig_free(b->orig_state);
    free(b);
}

/* node n as it was before the rewrite, for a plain run */
static bool run_orig(tso_ctx *c, const tso_node *n, ts_tensor *const *in, ts_tensor **out) {
    const bnode *b = n->state;
    tso_node t = *n;
    t.def = b->orig;
    t.op_type = b->orig->op_type;
    t.state = b->orig_state;
    t.free_state = NULL;
    return b->orig->run(c, &t, in, out);
}

static bool run_conv(tso_ctx *c, const tso_node *n, ts_tensor *const *in, ts_tensor **out) {
    const bnode *b = n->state;
    if (!c->blk) return run_orig(c, n, in, out);
    out[0] = tsi_conv2d_act_blocked(in[0], b->x_blocked ? c->blk : 0, b->c, in[1],
                                    n->n_in > 2 ? in[2] : NULL, b->o, b->act, b->lo, b->hi,
                                    b->y_blocked ? c->blk : 0, NULL);
    return out[0] || tso_fail_pending(n);
}

static bool run_gap(tso_ctx *c, const tso_node *n, ts_tensor *const *in, ts_tensor **out) {
    if (!c->blk) return run_orig(c, n, in, out);
    out[0] = tsi_global_avg_pool_blocked(in[0]);
    return out[0] || tso_fail_pending(n);
}

/* Mul: the squeeze-excitation's per-channel scale through the blocked kernel, anything else as
 * the Mul it was */
static bool run_mul(tso_ctx *c, const tso_node *n, ts_tensor *const *in, ts_tensor **out) {
    if (!c->blk) return run_orig(c, n, in, out);
    out[0] = tsi_mul_channels_blocked(in[0], in[1]);
    if (!out[0] && !ts_error()) return run_orig(c, n, in, out);
    return out[0] || tso_fail_pending(n);
}

static bool run_from_blocked(tso_ctx *c, const tso_node *n, ts_tensor *const *in, ts_tensor **out) {
    const bnode *b = n->state;
    out[0] = c->blk ? tsi_from_blocked(in[0], b->c) : tsi_own(ts_retain(in[0]));
    return out[0] || tso_fail_pending(n);
}

/* Not in the operator table (no file names them); the rewritten nodes keep their proto and label,
 * so errors still name the Conv */
static const tso_op_def conv_def = {"tessera.BlockedConv", 1, run_conv, NULL, false};
static const tso_op_def gap_def = {"tessera.BlockedGlobalAveragePool", 1, run_gap, NULL, false};
static const tso_op_def mul_def = {"tessera.BlockedMul", 1, run_mul, NULL, false};
static const tso_op_def from_def = {"tessera.FromBlocked", 1, run_from_blocked, NULL, false};

/* ------------------------------------------------------------------ which nodes */
/* an int list attribute of 0 or `len` entries, each within [lo, 65536) */
static bool ints_of(const tso_node *n, const char *name, int len, int64_t lo, int64_t *v) {
    const int64_t *a;
    int k = tso_attr_ints(n, name, &a);
    if (k <= 0) return true; /* absent or empty: the default */
    if (k != len) return false;
    for (int i = 0; i < len; i++) {
        if (a[i] < lo || a[i] >= 65536) return false;
        v[i] = a[i];
    }
    return true;
}

/* Conv node n as the blocked kernel takes it: *b filled (o, act, c), its output channels */
static int64_t conv_of(const tso_graph *g, const tso_node *n, bnode *b) {
    *b = (bnode){.act = TSI_CONV_ACT_NONE, .lo = 0, .hi = 0};
    const bool fused = tso_fused_conv_act(n, &b->act, &b->lo, &b->hi);
    if ((!fused && (!tso_is_op(n, "Conv") || n->state)) || n->n_in < 2 || n->n_out != 1) return 0;
    ts_tensor *w = tso_known(g, n->in[1]);
    if (!w || ts_ndim(w) != 4 || ts_dtype_of(w) != TS_F32) return 0;
    char buf[16];
    const char *ap = tso_attr_string(n, "auto_pad", "NOTSET", buf, sizeof buf);
    int64_t pads[4] = {0, 0, 0, 0}, st[2] = {1, 1}, dl[2] = {1, 1},
            ks[2] = {ts_size(w, 2), ts_size(w, 3)};
    if (!ap || strcmp(ap, "NOTSET") || !ints_of(n, "pads", 4, 0, pads) ||
        !ints_of(n, "strides", 2, 1, st) || !ints_of(n, "dilations", 2, 1, dl) ||
        !ints_of(n, "kernel_shape", 2, 1, ks) || ks[0] != ts_size(w, 2) || ks[1] != ts_size(w, 3) ||
        pads[0] != pads[2] || pads[1] != pads[3])
        return 0;
    const int64_t group = tso_attr_int(n, "group", 1), o = ts_size(w, 0);
    const bool depthwise = group > 1 && group < 65536 && ts_size(w, 1) == 1 && o == group;
    if (group != 1 && !depthwise) return 0;
    b->o = (ts_conv2d_opts){.stride = {(int)st[0], (int)st[1]},
                            .padding = {(int)pads[0], (int)pads[1]},
                            .dilation = {(int)dl[0], (int)dl[1]},
                            .groups = (int)group};
    b->c = ts_size(w, 1) * group;
    /* those the CPU's direct kernels take (conv_select.c's rule, asked without the image) stay on
     * the plain path: the blocked one would reorder around them */
    const ts_conv2d_params cp = {.stride = {b->o.stride[0], b->o.stride[1]},
                                 .padding = {b->o.padding[0], b->o.padding[1]},
                                 .dilation = {b->o.dilation[0], b->o.dilation[1]},
                                 .groups = b->o.groups};
    return tsi_conv_f32_forward_dnnl(b->c, o, ks, &cp) ? o : 0;
}

/* the elementwise operators that run on a blocked value as they are */
static bool unary_ok(const tso_node *n) {
    static const char *const ops[] = {"Relu",        "Clip",      "HardSwish",
                                      "HardSigmoid", "LeakyRelu", "Sigmoid"};
    for (size_t i = 0; i < sizeof ops / sizeof *ops; i++)
        if (tso_is_op(n, ops[i])) return n->n_out == 1;
    return false;
}

typedef enum kind { K_NONE, K_CONV, K_UNARY, K_BINARY, K_GAP } kind;

typedef struct plan {
    int64_t *chans; /* per value: its channels when blocked, else 0 */
    kind *kinds;    /* per node: how it takes blocked inputs */
    bnode *conv;    /* per node: a Conv's settings */
} plan;

/* node k's input slot i reads its value blocked */
static bool takes_blocked(const plan *p, int k, int i) {
    switch (p->kinds[k]) {
    case K_CONV:
        return i == 0;
    case K_UNARY:
    case K_GAP:
        return i == 0;
    case K_BINARY:
        return i < 2;
    default:
        return false;
    }
}

/* The forward pass: which node outputs can be blocked. */
static void mark(const tso_graph *g, plan *p) {
    for (int k = 0; k < g->n_nodes; k++) {
        const tso_node *n = &g->nodes[k];
        p->kinds[k] = K_NONE;
        if (n->n_out != 1 || n->out[0] < 0) continue;
        const int64_t c0 = n->n_in > 0 && n->in[0] >= 0 ? p->chans[n->in[0]] : 0;
        int64_t oc = 0;
        if ((oc = conv_of(g, n, &p->conv[k])) > 0) {
            /* a blocked input of other channels than the weight's: an invalid model, left to the
             * plain Conv to report */
            if (c0 && c0 != p->conv[k].c) oc = 0;
            p->kinds[k] = oc ? K_CONV : K_NONE;
        } else if (c0 && unary_ok(n)) {
            p->kinds[k] = K_UNARY, oc = c0;
        } else if (c0 && (tso_is_op(n, "Add") || tso_is_op(n, "Mul")) && n->n_in == 2 &&
                   n->in[1] >= 0 && p->chans[n->in[1]] == c0) {
            p->kinds[k] = K_BINARY, oc = c0;
        } else if (c0 && tso_is_op(n, "GlobalAveragePool")) {
            p->kinds[k] = K_GAP, oc = c0;
        }
        p->chans[n->out[0]] = oc;
    }
}

/* A Conv's output no reader takes blocked stays plain (the primitive writes NCHW itself). */
static void prune(const tso_graph *g, plan *p) {
    for (int k = 0; k < g->n_nodes; k++) {
        if (p->kinds[k] != K_CONV) continue;
        const int v = g->nodes[k].out[0];
        bool taken = false;
        for (int r = k + 1; r < g->n_nodes && !taken; r++)
            for (int i = 0; i < g->nodes[r].n_in; i++)
                if (g->nodes[r].in[i] == v && takes_blocked(p, r, i)) taken = true;
        if (!taken) p->chans[v] = 0;
    }
}

/* ------------------------------------------------------------------ the graph */
/* a new value of g named name + suffix, produced by node `producer`; -1 out of memory */
static int new_value(tso_graph *g, const char *name, const char *suffix, int producer) {
    if (g->n_values == g->cap_values) {
        int cap = g->cap_values ? g->cap_values * 2 : 64;
        tso_value *v = realloc(g->values, (size_t)cap * sizeof *v);
        if (!v) return -1;
        g->values = v;
        g->cap_values = cap;
    }
    size_t len = strlen(name) + strlen(suffix) + 1;
    char *copy = malloc(len);
    if (!copy) return -1;
    snprintf(copy, len, "%s%s", name, suffix);
    int id = g->n_values++;
    g->values[id] =
        (tso_value){.name = copy, .kind = TSO_V_NODE, .producer = producer, .outer = -1};
    return id;
}

/* node n's definition swapped for def with state b (a copy, owning n's former state) */
static bool swap_def(tso_node *n, const tso_op_def *def, const bnode *b) {
    bnode *s = malloc(sizeof *s);
    if (!s) return false;
    *s = *b;
    s->orig = n->def;
    s->orig_state = n->state;
    s->orig_free = n->free_state;
    n->def = def;
    n->op_type = def->op_type;
    n->state = s;
    n->free_state = bnode_free;
    return true;
}

/* the FromBlocked node reading value vb into value v (of c channels), labelled after node `after`
 */
static bool from_node(const tso_graph *g, tso_node *out, int vb, int v, int64_t c,
                      const tso_node *after) {
    int *io = malloc(2 * sizeof *io);
    bnode *s = calloc(1, sizeof *s);
    char lab[320];
    snprintf(lab, sizeof lab, "%.200s, to NCHW for '%.80s'", after->label, g->values[v].name);
    char *label = tsi_strdup(lab);
    if (!io || !s || !label) {
        free(io), free(s), free(label);
        return false;
    }
    io[0] = vb, io[1] = v;
    s->c = c;
    *out = (tso_node){.proto = after->proto,
                      .label = label,
                      .op_type = from_def.op_type,
                      .opset = after->opset,
                      .def = &from_def,
                      .n_in = 1,
                      .n_out = 1,
                      .in = io,
                      .out = io + 1,
                      .state = s,
                      .free_state = bnode_free};
    return true;
}

/* value v (blocked, made by node k) needs its plain form too: read by a node that does not take
 * the blocked one, a graph output, read by a sub-graph */
static bool needs_plain(const tso_graph *g, const plan *p, int k, int v) {
    if (g->values[v].pinned) return true;
    for (int i = 0; i < g->n_outputs; i++)
        if (g->outputs[i] == v) return true;
    for (int r = k + 1; r < g->n_nodes; r++)
        for (int i = 0; i < g->nodes[r].n_in; i++)
            if (g->nodes[r].in[i] == v && !takes_blocked(p, r, i)) return true;
    return false;
}

/* The FromBlocked nodes of `nodes` freed (the others are g's, which the loader frees) */
static bool apply_failed(tso_node *nodes, int m) {
    for (int k = 0; k < m; k++)
        if (nodes[k].def == &from_def) tso_node_free(&nodes[k]);
    free(nodes);
    return oom();
}

static bool apply(tso_graph *g, plan *p, bool *changed) {
    const int n0 = g->n_nodes;
    tso_node *nodes = calloc((size_t)(2 * n0) + 1, sizeof *nodes);
    if (!nodes) return oom();
    int m = 0;
    for (int k = 0; k < n0; k++) {
        tso_node *n = &g->nodes[k];
        const int v = n->n_out == 1 ? n->out[0] : -1;
        const bool x_blk = p->kinds[k] != K_NONE && n->in[0] >= 0 && p->chans[n->in[0]] > 0;
        const bool y_blk = v >= 0 && p->chans[v] > 0;
        bool ok = true;
        if (p->kinds[k] == K_CONV && (x_blk || y_blk)) {
            p->conv[k].x_blocked = x_blk, p->conv[k].y_blocked = y_blk;
            ok = swap_def(n, &conv_def, &p->conv[k]);
        } else if (p->kinds[k] == K_GAP && x_blk) {
            ok = swap_def(n, &gap_def, &(bnode){0});
        } else if (p->kinds[k] == K_BINARY && tso_is_op(n, "Mul")) {
            ok = swap_def(n, &mul_def, &(bnode){0});
        }
        if (!ok) return apply_failed(nodes, m);
        nodes[m++] = *n;
        if (!y_blk) continue;
        *changed = true;
        /* the producer writes vb (its channels recorded past the old values); the readers that
         * take the blocked form read it, and a FromBlocked node gives the others v */
        const int vb = new_value(g, g->values[v].name, "#blocked", m - 1);
        if (vb < 0) return apply_failed(nodes, m);
        p->chans[vb] = p->chans[v];
        const bool plain = needs_plain(g, p, k, v);
        n->out[0] = vb; /* nodes[m - 1] shares the list */
        for (int r = k + 1; r < n0; r++)
            for (int i = 0; i < g->nodes[r].n_in; i++)
                if (g->nodes[r].in[i] == v && takes_blocked(p, r, i)) g->nodes[r].in[i] = vb;
        g->values[v].producer = -1;
        if (plain && !from_node(g, &nodes[m++], vb, v, p->chans[v], n))
            return apply_failed(nodes, m - 1);
    }
    free(g->nodes);
    g->nodes = nodes;
    g->n_nodes = m;
    for (int k = 0; k < g->n_nodes; k++)
        for (int i = 0; i < g->nodes[k].n_out; i++)
            if (g->nodes[k].out[i] >= 0) g->values[g->nodes[k].out[i]].producer = k;
    tso_graph_count_uses(g);
    return true;
}

static bool rewrite_off(void) { return tsi_env_is(TSI_ENV_ONNX_BLOCKED, "0"); }

static bool dense_convs(const tso_graph *g);

bool tso_rewrite_blocked(tso_model *m) {
    tso_graph *g = m->graph;
    if (rewrite_off() || g->n_nodes == 0) return true;
    m->channels_last = !tsi_env_is(TSI_ENV_ONNX_BLOCKED, "nchw") && dense_convs(g);
    /* the values' channels, and those of the new values (one a node at most) */
    plan p = {calloc((size_t)g->n_values + (size_t)g->n_nodes + 1, sizeof *p.chans),
              calloc((size_t)g->n_nodes + 1, sizeof *p.kinds),
              calloc((size_t)g->n_nodes + 1, sizeof *p.conv)};
    bool ok = p.chans && p.kinds && p.conv;
    if (ok) {
        mark(g, &p);
        prune(g, &p);
        bool changed = false;
        ok = apply(g, &p, &changed);
        m->blocked = ok && changed;
    } else {
        oom();
    }
    free(p.chans), free(p.kinds), free(p.conv);
    return ok;
}

/* whether this run may record a gradient: grad mode on and an input or weight requiring grad */
static bool may_record(const tso_model *m, ts_tensor *const *inputs, int n_inputs) {
    if (!tsi_grad_mode()) return false;
    for (int i = 0; i < n_inputs; i++)
        if (inputs[i] && ts_requires_grad(inputs[i])) return true;
    const tso_graph *g = m->graph;
    for (int v = 0; v < g->n_values; v++)
        if (g->values[v].kind == TSO_V_PARAM && g->values[v].tensor &&
            ts_requires_grad(g->values[v].tensor))
            return true;
    return false;
}

/* A dense convolution net: some Conv, every Conv of one group (ResNets, VGGs; not MobileNets,
 * whose depthwise layers run Tessera's own blocked kernels). */
static bool dense_convs(const tso_graph *g) {
    int convs = 0;
    for (int k = 0; k < g->n_nodes; k++) {
        const tso_node *n = &g->nodes[k];
        tsi_conv_act a;
        double lo, hi;
        if (n->def != &conv_def && !tso_is_op(n, "Conv") && !tso_fused_conv_act(n, &a, &lo, &hi))
            continue;
        if (tso_attr_int(n, "group", 1) != 1) return false;
        convs++;
    }
    return convs > 0;
}

/* Dense convolution nets loaded with the rewrites (ts_onnx_opts.optimize; m->channels_last, not
 * under TS_ONNX_BLOCKED=nchw or 0) run channels_last where oneDNN's NHWC kernels are native
 * (AVX-512: block 16), as the C API's ResNets do: the convolutions then take brgconv on the data
 * as it lies and max pooling its NHWC kernel (decision 0026). ResNet-18, the import against the
 * C API's model: bench/results/onnx-blocked.md, "ResNet-18: the import against the C API". The
 * results differ from the unrewritten model's in rounding only (other kernels summing the same
 * products in another order; decision 0019). -1 then: the blocked nodes run as the plain ones and
 * run.c makes the 4-D float32 inputs channels_last. */
int tso_blocked_mode(const tso_model *m, ts_device dev, ts_tensor *const *inputs, int n_inputs) {
    const int blk = tsi_conv_block(dev);
    if (m->channels_last && blk == 16 && !may_record(m, inputs, n_inputs)) return -1;
    if (!m->blocked || !blk) return 0;
    return may_record(m, inputs, n_inputs) ? 0 : blk;
}
