/* rewrite_matmul_integer.c — ONNX Runtime's quantize_dynamic pattern run as one op, at every load
 * (docs/QUANTIZATION_ONNX.md): MatMulInteger(A, B, a_zp, b_zp) -> Cast(to float) -> Mul(., S)
 * [-> Add(., bias)] with S = Mul(s1, s2) becomes one node, tessera.MatMulIntegerToFloat, running
 * ts_matmul_integer_to_float (the int8 GEMM with a float32 epilogue: the int32 tensor, the Cast,
 * the Mul and the Add never go to memory), as ORT's graph optimizer makes com.microsoft
 * MatMulIntegerToFloat. The op rounds each float step as the unfused ops do, in their order, so the
 * rewrite changes no bit; it runs by default (TS_ONNX_FUSE_QMATMUL=0 at load turns it off).
 *
 * Taken only where every intermediate (the int32 sums, the cast, the scaled product when an Add
 * follows) is read by the next node alone (not a graph output, not a sub-graph's), B is known at
 * load (an initializer or a constant), 2-D and uint8 / int8, the Cast is to float32 and S is the
 * output of a Mul of two inputs; an Add joins when its other operand is a float32 value known at
 * load of N values (directly or through Identity nodes: torch.onnx's parameters). The scales' Mul
 * joins too when the final Mul is its only reader (else it stays, and the fused node multiplies s1
 * and s2 again: the same float32 product). The fused node keeps the nodes it replaced and runs them
 * as they were when a run brings what the op does not take (a per-row a_zero_point, a dtype other
 * than float32 for a scale, a broadcast that would change the output's shape, or gradients to
 * record through a scale or the bias). Top graph only. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/env_config.h"
#include "onnx/onnx_internal.h"
#include "tessera/autograd.h"
#include "tessera/quant.h"

#define MIF_STEPS 7  /* the scales' Mul, MatMulInteger, Cast, Mul, Add, two Identity */
#define MIF_IO    16 /* run.c passes an operator at least 16 input slots */

/* The fused node's state: the replaced nodes in graph order, and the operands' positions among
 * the fused node's inputs (-1: absent) */
typedef struct mif_state {
    int n_steps;
    tso_node steps[MIF_STEPS];
    int a, b, azp, bzp, s1, s2, bias;
} mif_state;

static void mif_free(void *p) {
    mif_state *s = p;
    if (!s) return;
    for (int i = 0; i < s->n_steps; i++) tso_node_free(&s->steps[i]);
    free(s);
}

/* ------------------------------------------------------------------ running */
/* the replaced nodes steps[0 .. n_steps) as they were (the fallback); n's outputs are theirs */
#define REPLAY_VALS 96
static bool replay_steps(tso_ctx *c, const tso_node *n, const tso_node *steps, int n_steps,
                         ts_tensor *const *in, ts_tensor **out) {
    int ids[REPLAY_VALS];
    ts_tensor *ts[REPLAY_VALS];
    int count = 0;
    for (int i = 0; i < n->n_in; i++) ids[count] = n->in[i], ts[count++] = in[i];
    for (int k = 0; k < n_steps; k++) {
        const tso_node *st = &steps[k];
        ts_tensor *sin[MIF_IO] = {0}, *sout[MIF_IO] = {0};
        for (int i = 0; i < st->n_in; i++)
            for (int j = 0; st->in[i] >= 0 && j < count; j++)
                if (ids[j] == st->in[i]) sin[i] = ts[j];
        if (!st->def->run(c, st, sin, sout)) return tso_fail_pending(st);
        for (int i = 0; i < st->n_out; i++) ids[count] = st->out[i], ts[count++] = sout[i];
    }
    for (int o = 0; o < n->n_out; o++)
        for (int j = 0; j < count; j++)
            if (ids[j] == n->out[o]) out[o] = ts[j];
    return true;
}

static bool replay(tso_ctx *c, const tso_node *n, ts_tensor *const *in, ts_tensor **out) {
    const mif_state *s = n->state;
    return replay_steps(c, n, s->steps, s->n_steps, in, out);
}

static bool is_8bit(ts_tensor *t) {
    return t && (ts_dtype_of(t) == TS_U8 || ts_dtype_of(t) == TS_I8);
}

/* t (float32 when f32) of one value, or of n values along its last dim, with at most `rank` dims:
 * what broadcasts against the [.., N] result without changing its shape */
static bool fits_columns(ts_tensor *t, int64_t n, int rank, bool f32) {
    if (!t || (f32 && ts_dtype_of(t) != TS_F32) || ts_ndim(t) > rank) return false;
    const int64_t c = ts_numel(t);
    return c == 1 || (c == n && ts_size(t, -1) == n);
}

/* *fits false when the op does not take these operands (then the nodes run as they were) */
static ts_tensor *fast(const mif_state *s, ts_tensor *const *in, bool *fits) {
    ts_tensor *a = in[s->a], *b = in[s->b], *azp = s->azp >= 0 ? in[s->azp] : NULL,
              *bzp = s->bzp >= 0 ? in[s->bzp] : NULL, *s1 = in[s->s1], *s2 = in[s->s2],
              *bias = s->bias >= 0 ? in[s->bias] : NULL;
    *fits = false;
    if (!is_8bit(a) || !is_8bit(b) || ts_ndim(a) < 1 || ts_ndim(b) != 2 ||
        ts_size(a, -1) != ts_size(b, 0))
        return NULL;
    const int64_t n = ts_size(b, 1);
    const int rank = ts_ndim(a); /* the result's: [.., M, N], or [N] for a vector a */
    if ((azp && (ts_dtype_of(azp) != ts_dtype_of(a) || ts_numel(azp) != 1)) ||
        (bzp && (ts_dtype_of(bzp) != ts_dtype_of(b) || !fits_columns(bzp, n, TS_MAX_DIMS, false))))
        return NULL;
    if (ts_numel(s1) != 1) { /* the one-value scale goes first */
        ts_tensor *t = s1;
        s1 = s2, s2 = t;
    }
    if (!fits_columns(s1, 1, rank, true) || !fits_columns(s2, n, rank, true) ||
        (bias && (!fits_columns(bias, n, rank, true) || ts_numel(bias) != n)))
        return NULL;
    if (ts_grad_enabled() &&
        (ts_requires_grad(s1) || ts_requires_grad(s2) || (bias && ts_requires_grad(bias))))
        return NULL; /* the unfused ops record the gradients */
    *fits = true;
    return ts_matmul_integer_to_float(a, s1, azp, b, s2, bzp, bias);
}

static bool run_mif(tso_ctx *c, const tso_node *n, ts_tensor *const *in, ts_tensor **out) {
    bool fits;
    ts_tensor *y = fast(n->state, in, &fits);
    if (!fits) return replay(c, n, in, out);
    TSO_DONE(y);
}

static const tso_op_def mif_def = {"tessera.MatMulIntegerToFloat", 1, run_mif, NULL, false};

/* ------------------------------------------------------------------ matching */
/* v is read by one node alone (no graph output, no sub-graph) */
static bool sole_use(const tso_graph *g, int v) {
    return v >= 0 && g->values[v].uses == 1 && !g->values[v].pinned;
}

/* the node after `after` reading v, where it is v's only reader; -1 otherwise */
static int sole_reader(const tso_graph *g, int v, int after) {
    if (!sole_use(g, v)) return -1;
    for (int k = after + 1; k < g->n_nodes; k++)
        for (int i = 0; i < g->nodes[k].n_in; i++)
            if (g->nodes[k].in[i] == v) return k;
    return -1;
}

/* a plain node of op with n_in inputs (all present) and one output */
static bool plain(const tso_node *n, const char *op, int n_in) {
    if (!tso_is_op(n, op) || n->n_in != n_in || n->n_out != 1 || n->out[0] < 0 || n->n_sub ||
        n->state)
        return false;
    for (int i = 0; i < n_in; i++)
        if (n->in[i] < 0) return false;
    return true;
}

static int producer(const tso_graph *g, int v) {
    return v >= 0 && g->values[v].kind == TSO_V_NODE ? g->values[v].producer : -1;
}

/* the operand of binary node n that is not v (-1 when both are) */
static int other(const tso_node *n, int v) {
    return n->in[0] == v ? (n->in[1] == v ? -1 : n->in[1]) : n->in[0];
}

static int cmp_int(const void *a, const void *b) {
    return (*(const int *)a > *(const int *)b) - (*(const int *)a < *(const int *)b);
}

/* appends v to ins (once); its position */
static int add_input(int *ins, int *count, int v) {
    for (int i = 0; i < *count; i++)
        if (ins[i] == v) return i;
    ins[*count] = v;
    return (*count)++;
}

/* the pattern from MatMulInteger node k, fused when it holds; false only on out of memory */
static bool try_fuse(tso_graph *g, int k, bool *dead) {
    const tso_node *mm = &g->nodes[k];
    if (!tso_is_op(mm, "MatMulInteger") || mm->n_in < 2 || mm->n_in > 4 || mm->n_out != 1 ||
        mm->in[0] < 0 || mm->in[1] < 0 || mm->out[0] < 0 || mm->state)
        return true;
    ts_tensor *b = tso_known(g, mm->in[1]);
    if (!is_8bit(b) || ts_ndim(b) != 2) return true;
    const int64_t n_cols = ts_size(b, 1);
    const int kc = sole_reader(g, mm->out[0], k);
    if (kc < 0) return true;
    const tso_node *cast = &g->nodes[kc];
    if (!plain(cast, "Cast", 1) || tso_attr_int(cast, "to", 0) != 1 /* FLOAT */) return true;
    const int km = sole_reader(g, cast->out[0], kc);
    if (km < 0) return true;
    const tso_node *mul = &g->nodes[km];
    if (!plain(mul, "Mul", 2)) return true;
    const int sv = other(mul, cast->out[0]), ks = producer(g, sv);
    if (sv < 0 || ks < 0 || !plain(&g->nodes[ks], "Mul", 2)) return true;
    int steps[MIF_STEPS], n_steps = 0;
    steps[n_steps++] = k, steps[n_steps++] = kc, steps[n_steps++] = km;
    if (sole_use(g, sv)) steps[n_steps++] = ks; /* the scales' Mul goes with the pattern */
    int bias_v = -1;
    const int ka = sole_reader(g, mul->out[0], km);
    if (ka >= 0 && plain(&g->nodes[ka], "Add", 2)) {
        /* the bias, through the Identity nodes exporters put before a parameter (those read by
         * this Add alone join the pattern) */
        int bv = other(&g->nodes[ka], mul->out[0]), ids[2], n_ids = 0;
        bool chain = true;
        for (int hop = 0; hop < 4 && bv >= 0; hop++) {
            const int p = producer(g, bv);
            if (p < 0 || !plain(&g->nodes[p], "Identity", 1)) break;
            chain = chain && n_ids < 2 && sole_use(g, bv);
            if (chain) ids[n_ids++] = p;
            bv = g->nodes[p].in[0];
        }
        ts_tensor *bt = bv >= 0 ? tso_known(g, bv) : NULL;
        if (bt && ts_dtype_of(bt) == TS_F32 && ts_numel(bt) == n_cols) {
            bias_v = bv, steps[n_steps++] = ka;
            for (int i = 0; i < n_ids; i++) steps[n_steps++] = ids[i];
        }
    }
    qsort(steps, (size_t)n_steps, sizeof *steps, cmp_int);
    /* the fused node's inputs: what the steps read from outside them, then s1 and s2 */
    int ins[MIF_IO], count = 0;
    for (int i = 0; i < n_steps; i++) {
        const tso_node *st = &g->nodes[steps[i]];
        for (int j = 0; j < st->n_in; j++) {
            const int v = st->in[j], p = producer(g, v);
            bool inside = false;
            for (int e = 0; e < n_steps; e++) inside = inside || (p >= 0 && p == steps[e]);
            if (v >= 0 && !inside) add_input(ins, &count, v);
        }
    }
    /* the operands' places (each at most once more: 4 + 1 + 2 + 2 + 2 values within MIF_IO) */
    const tso_node *sm = &g->nodes[ks];
    mif_state roles = {.azp = -1, .bzp = -1, .bias = -1};
    roles.a = add_input(ins, &count, mm->in[0]);
    roles.b = add_input(ins, &count, mm->in[1]);
    if (mm->n_in > 2 && mm->in[2] >= 0) roles.azp = add_input(ins, &count, mm->in[2]);
    if (mm->n_in > 3 && mm->in[3] >= 0) roles.bzp = add_input(ins, &count, mm->in[3]);
    roles.s1 = add_input(ins, &count, sm->in[0]);
    roles.s2 = add_input(ins, &count, sm->in[1]);
    if (bias_v >= 0) roles.bias = add_input(ins, &count, bias_v);
    mif_state *s = malloc(sizeof *s);
    const int root = steps[n_steps - 1];
    char label[320];
    snprintf(label, sizeof label, "%.200s, fused as %s", g->nodes[root].label, mif_def.op_type);
    char *lab = tsi_strdup(label);
    int *io = malloc(sizeof(int) * (size_t)(count + 1));
    if (!s || !lab || !io) {
        free(s), free(lab), free(io);
        return tsi_error_set(TS_ERR_OOM, "onnx_load: out of host memory (MatMulInteger rewrite)"),
               false;
    }
    *s = roles;
    memcpy(io, ins, sizeof(int) * (size_t)count);
    io[count] = g->nodes[root].out[0];
    s->n_steps = n_steps;
    for (int i = 0; i < n_steps; i++) {
        tso_node *nd = &g->nodes[steps[i]];
        s->steps[i] = *nd; /* the step owns its label, value lists and state now */
        *nd = (tso_node){.proto = nd->proto, .op_type = nd->op_type, .def = nd->def};
        if (steps[i] != root) dead[steps[i]] = true;
    }
    const tso_node *last = &s->steps[n_steps - 1];
    g->nodes[root] = (tso_node){.proto = last->proto,
                                .label = lab,
                                .op_type = mif_def.op_type,
                                .opset = last->opset,
                                .def = &mif_def,
                                .n_in = count,
                                .n_out = 1,
                                .in = io,
                                .out = io + count,
                                .state = s,
                                .free_state = mif_free};
    return true;
}

/* ------------------------------------------------------------------ DynamicQuantizeLinear
 * DynamicQuantizeLinear(x) -> (y, scale, zp) whose three outputs are read by fused products alone
 * (y as their a, zp as their a_zero_point, scale as one of their two scales: the scales' Mul went
 * with them), up to DQ_MAX of them (BERT's Q, K and V read one), becomes one node,
 * tessera.DynamicQuantizeMatMulToFloat, running ts_dynamic_quantize_matmul_to_float: x quantized
 * once, its rows' sums made in that pass, each product from those bytes; the same bits as the
 * nodes it replaces, which it keeps and runs as they were when x is not float32 or a product's
 * operands are not what the op takes (as the fused product's own fallback). It takes the
 * DynamicQuantizeLinear node's place: the products' other inputs (weights, scales, biases) must
 * be there by then. */
#define DQ_MAX 4
#define DQ_IO  48

typedef struct dq_state {
    int n_steps; /* the DynamicQuantizeLinear node, then the fused products */
    tso_node steps[1 + DQ_MAX];
    int x, b[DQ_MAX], bzp[DQ_MAX], bs[DQ_MAX], bias[DQ_MAX]; /* places among the inputs (-1) */
} dq_state;

static void dq_free(void *p) {
    dq_state *s = p;
    if (!s) return;
    for (int i = 0; i < s->n_steps; i++) tso_node_free(&s->steps[i]);
    free(s);
}

static bool run_dq(tso_ctx *c, const tso_node *n, ts_tensor *const *in, ts_tensor **out) {
    const dq_state *s = n->state;
    const int count = s->n_steps - 1;
    ts_tensor *x = in[s->x], *b[DQ_MAX], *bs[DQ_MAX], *bz[DQ_MAX], *bias[DQ_MAX];
    bool fits = ts_dtype_of(x) == TS_F32 && ts_ndim(x) >= 1;
    for (int i = 0; fits && i < count; i++) {
        b[i] = in[s->b[i]], bs[i] = in[s->bs[i]];
        bz[i] = s->bzp[i] >= 0 ? in[s->bzp[i]] : NULL;
        bias[i] = s->bias[i] >= 0 ? in[s->bias[i]] : NULL;
        /* what the fused product's fast() takes, with a = y (uint8 of x's shape), a_zero_point
         * (uint8, one value) and the activation's scale (float32, 0-dim) as DynamicQuantizeLinear
         * makes them from a float32 x */
        fits = is_8bit(b[i]) && ts_ndim(b[i]) == 2 && ts_size(x, -1) == ts_size(b[i], 0);
        const int64_t nc = fits ? ts_size(b[i], 1) : 0;
        const int rank = ts_ndim(x);
        fits = fits &&
               (!bz[i] || (ts_dtype_of(bz[i]) == ts_dtype_of(b[i]) &&
                           fits_columns(bz[i], nc, TS_MAX_DIMS, false))) &&
               fits_columns(bs[i], nc, rank, true) &&
               (!bias[i] || (fits_columns(bias[i], nc, rank, true) && ts_numel(bias[i]) == nc)) &&
               !(ts_grad_enabled() &&
                 (ts_requires_grad(bs[i]) || (bias[i] && ts_requires_grad(bias[i]))));
    }
    if (!fits) return replay_steps(c, n, s->steps, s->n_steps, in, out);
    return ts_dynamic_quantize_matmul_to_float(x, count, b, bs, bz, bias, out) == TS_OK ||
           tso_fail_pending(n);
}

static const tso_op_def dq_def = {"tessera.DynamicQuantizeMatMulToFloat", 1, run_dq, NULL, false};

/* the fused products reading DynamicQuantizeLinear node k's outputs, fused with it when they fit;
 * false only on out of memory */
static bool try_fuse_dq(tso_graph *g, int k, bool *dead) {
    const tso_node *dq = &g->nodes[k];
    if (!tso_is_op(dq, "DynamicQuantizeLinear") || dq->n_in != 1 || dq->in[0] < 0 ||
        dq->n_out != 3 || dq->n_sub || dq->state)
        return true;
    const int yv = dq->out[0], sv = dq->out[1], zv = dq->out[2];
    if (yv < 0 || sv < 0 || zv < 0 || g->values[yv].pinned || g->values[sv].pinned ||
        g->values[zv].pinned)
        return true;
    int rd[DQ_MAX], n_rd = 0;
    for (int j = k + 1; j < g->n_nodes; j++) {
        const tso_node *nd = &g->nodes[j];
        bool reads = false;
        for (int i = 0; i < nd->n_in; i++)
            reads = reads || nd->in[i] == yv || nd->in[i] == sv || nd->in[i] == zv;
        if (!reads) continue;
        if (dead[j] || nd->def != &mif_def || n_rd == DQ_MAX) return true;
        rd[n_rd++] = j;
    }
    /* each reader reads each output once (its inputs are distinct values): uses say no other */
    if (n_rd == 0 || g->values[yv].uses != n_rd || g->values[sv].uses != n_rd ||
        g->values[zv].uses != n_rd)
        return true;
    int ins[DQ_IO], count = 0;
    dq_state roles = {.n_steps = 1 + n_rd};
    roles.x = add_input(ins, &count, dq->in[0]);
    for (int r = 0; r < n_rd; r++) {
        const tso_node *nd = &g->nodes[rd[r]];
        const mif_state *ms = nd->state;
        const int s1 = nd->in[ms->s1], s2 = nd->in[ms->s2];
        if (nd->in[ms->a] != yv || ms->azp < 0 || nd->in[ms->azp] != zv || (s1 == sv) == (s2 == sv))
            return true;
        for (int i = 0; i < nd->n_in; i++) { /* the other inputs are there at k */
            const int v = nd->in[i], p = producer(g, v);
            if (v != yv && v != sv && v != zv && p >= k) return true;
        }
        if (count + 4 > DQ_IO) return true;
        roles.b[r] = add_input(ins, &count, nd->in[ms->b]);
        roles.bs[r] = add_input(ins, &count, s1 == sv ? s2 : s1);
        roles.bzp[r] = ms->bzp >= 0 ? add_input(ins, &count, nd->in[ms->bzp]) : -1;
        roles.bias[r] = ms->bias >= 0 ? add_input(ins, &count, nd->in[ms->bias]) : -1;
    }
    dq_state *s = malloc(sizeof *s);
    char label[320];
    snprintf(label, sizeof label, "%.200s, fused as %s", dq->label, dq_def.op_type);
    char *lab = tsi_strdup(label);
    int *io = malloc(sizeof(int) * (size_t)(count + n_rd));
    if (!s || !lab || !io) {
        free(s), free(lab), free(io);
        return tsi_error_set(TS_ERR_OOM,
                             "onnx_load: out of host memory (DynamicQuantizeLinear rewrite)"),
               false;
    }
    *s = roles;
    memcpy(io, ins, sizeof(int) * (size_t)count);
    s->steps[0] = g->nodes[k];
    for (int r = 0; r < n_rd; r++) {
        tso_node *nd = &g->nodes[rd[r]];
        io[count + r] = nd->out[0];
        s->steps[1 + r] = *nd; /* the step owns its label, value lists and state now */
        *nd = (tso_node){.proto = nd->proto, .op_type = nd->op_type, .def = nd->def};
        dead[rd[r]] = true;
        g->values[io[count + r]].producer = k;
    }
    const tso_node *first = &s->steps[0];
    g->nodes[k] = (tso_node){.proto = first->proto,
                             .label = lab,
                             .op_type = dq_def.op_type,
                             .opset = first->opset,
                             .def = &dq_def,
                             .n_in = count,
                             .n_out = n_rd,
                             .in = io,
                             .out = io + count,
                             .state = s,
                             .free_state = dq_free};
    return true;
}

bool tso_rewrite_matmul_integer(tso_model *m) {
    tso_graph *g = m->graph;
    bool any = false;
    for (int k = 0; k < g->n_nodes && !any; k++) any = tso_is_op(&g->nodes[k], "MatMulInteger");
    if (!any || tsi_env_is(TSI_ENV_ONNX_FUSE_QMATMUL, "0")) return true;
    bool *dead = calloc((size_t)g->n_nodes + 1, sizeof *dead);
    if (!dead)
        return tsi_error_set(TS_ERR_OOM, "onnx_load: out of host memory (MatMulInteger rewrite)"),
               false;
    bool ok = true;
    for (int k = 0; ok && k < g->n_nodes; k++)
        if (!dead[k] && tso_is_op(&g->nodes[k], "MatMulInteger")) {
            ok = try_fuse(g, k, dead);
            if (ok) tso_graph_count_uses(g); /* the next match sees this one's readers */
        }
    tso_graph_drop_dead(g, dead);
    /* then the activations' quantization into the products (TS_ONNX_FUSE_QMATMUL=nodq: not) */
    if (ok && !tsi_env_is(TSI_ENV_ONNX_FUSE_QMATMUL, "nodq")) {
        memset(dead, 0, ((size_t)g->n_nodes + 1) * sizeof *dead);
        for (int k = 0; ok && k < g->n_nodes; k++)
            if (!dead[k] && tso_is_op(&g->nodes[k], "DynamicQuantizeLinear")) {
                ok = try_fuse_dq(g, k, dead);
                if (ok) tso_graph_count_uses(g);
            }
        tso_graph_drop_dead(g, dead);
    }
    free(dead);
    return ok;
}
