/* rewrite_qdq.c — QDQ models in integer arithmetic, as ONNX Runtime's QDQ transformer runs them
 * (docs/QUANTIZATION.md, "ONNX"): at every load, on the top graph, a QuantizeLinear over a MatMul,
 * Conv, Gemm (alpha = beta = 1, A not transposed) or Add whose inputs are DequantizeLinear outputs
 * (the bias of a Conv / Gemm too) becomes one node running ops_qoperator.c's QLinearMatMul /
 * QLinearConv / integer Gemm (ORT's QGemm for them) or ops_qoperator_ms.c's QLinearAdd: exact int32
 * sums and ORT's float32 requantization. Only where the integer form is what ORT computes: every
 * scale and zero point known at load, uint8 / int8; a and x per tensor (Add: both operands); b per
 * tensor or per column (axis 1 of a 2-D weight; a transB Gemm weight: axis 0), w per tensor or per
 * output channel (axis 0); the bias int32 with zero point 0 and scale x_scale * w_scale[m] in
 * float32, as ORT's quantizer writes it (ORT does not fuse another either); y per tensor; the op's
 * output read by the QuantizeLinear alone. A Relu between the op and the QuantizeLinear stops the
 * rewrite, as it stops ORT's (ORT 1.32 runs DQ -> Conv -> Relu -> Q as a float FusedConv, and
 * DQ -> MatMul -> Relu -> Q in float). Anything else keeps the float QDQ arithmetic, within one
 * quantum of ORT's. DQ -> MaxPool -> Q of one scale and zero point pools the bytes (ORT drops
 * that pair too); DQ -> GlobalAveragePool -> Q becomes ORT's QLinearGlobalAveragePool (ORT fuses
 * it too); DQ -> Flatten / Reshape / Squeeze / Unsqueeze / Transpose -> Q of one scale and zero
 * point moves the bytes. The DequantizeLinear nodes die when nothing else reads them. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "onnx/ops_nn.h"
#include "onnx/qoperator.h"
#include "onnx/qoperator_ms.h"
#include "ops/quant_internal.h"
#include "tessera/quant.h"

static TSO_NN_RUN(run_qdq_matmul) {
    (void)c;
    return tso_q_run_linear_matmul(n, in, out, false);
}

static TSO_NN_RUN(run_qdq_conv) {
    (void)c;
    return tso_q_run_linear_conv(n, in, out, false);
}

/* Not in the operator table: the fused node keeps the MatMul's / Conv's proto (the Conv's
 * attributes) and label, so errors still name it. */
static const tso_op_def qdq_matmul_def = {"QDQMatMul", 1, run_qdq_matmul, NULL, false};
static const tso_op_def qdq_conv_def = {"QDQConv", 1, run_qdq_conv, tso_nn_check_conv, false};

static TSO_NN_RUN(run_qdq_gemm) {
    (void)c;
    return tso_q_run_gemm(n, in, out);
}
static const tso_op_def qdq_gemm_def = {"QDQGemm", 1, run_qdq_gemm, NULL, false};

static TSO_NN_RUN(run_qdq_add) {
    (void)c;
    return tso_q_run_linear_add(n, in, out);
}
static const tso_op_def qdq_add_def = {"QDQAdd", 1, run_qdq_add, NULL, false};

/* a Gemm that is A @ B (+ C): alpha 1, beta 1, A not transposed */
static bool plain_gemm(const tso_node *n) {
    return tso_is_op(n, "Gemm") && !tso_attr_int(n, "transA", 0) &&
           tso_attr_float(n, "alpha", 1) == 1 && tso_attr_float(n, "beta", 1) == 1;
}

/* the node making value v, -1 for none */
static int producer(const tso_graph *g, int v) {
    return v >= 0 && g->values[v].kind == TSO_V_NODE ? g->values[v].producer : -1;
}

/* v is read by one node alone (no graph output, no sub-graph) */
static bool sole_use(const tso_graph *g, int v) {
    return v >= 0 && g->values[v].uses == 1 && !g->values[v].pinned;
}

static bool is_8bit(ts_tensor *t) {
    return t && (ts_dtype_of(t) == TS_U8 || ts_dtype_of(t) == TS_I8);
}

/* A DequantizeLinear node whose scale (float32) and zero point are known at load, of count 1 or
 * `per` values (per > 1 with axis `axis` of a weight of rank `rank`); its index or -1 */
static int dq_node(const tso_graph *g, int v, int64_t per, int axis, int rank, bool int32) {
    int d = producer(g, v);
    if (d < 0) return -1;
    const tso_node *n = &g->nodes[d];
    if (!tso_is_op(n, "DequantizeLinear") || n->n_in < 3 || n->in[1] < 0 || n->in[2] < 0) return -1;
    ts_tensor *s = tso_known(g, n->in[1]), *z = tso_known(g, n->in[2]);
    if (!s || !z || ts_dtype_of(s) != TS_F32 || ts_numel(s) != ts_numel(z)) return -1;
    if (int32 ? ts_dtype_of(z) != TS_I32 : !is_8bit(z)) return -1;
    if (ts_numel(s) == 1) return d;
    int64_t ax = tso_attr_int(n, "axis", 1);
    if (ax < 0) ax += rank;
    return per > 1 && ts_numel(s) == per && ts_ndim(s) == 1 && ax == axis ? d : -1;
}

/* the bias DequantizeLinear: int32, zero point 0, scale x_scale * w_scale[m] in float32 */
static bool bias_fits(const tso_graph *g, const tso_node *b, ts_tensor *xs, ts_tensor *ws,
                      int64_t m) {
    ts_tensor *s = tso_known(g, b->in[1]), *z = tso_known(g, b->in[2]);
    if (ts_numel(s) != m && !(ts_numel(s) == 1 && ts_numel(ws) == 1)) return false;
    float *sv = malloc((size_t)m * sizeof *sv), *wv = malloc((size_t)m * sizeof *wv);
    int32_t *zv = malloc((size_t)m * sizeof *zv);
    float xv = 0;
    int64_t ns = ts_numel(s), nw = ts_numel(ws);
    ts_scope_begin(); /* ts_to's results (a new reference even on the cpu) go with the scope */
    bool ok = sv && wv && zv &&
              ts_copy_to_host(ts_to(s, ts_cpu()), sv, (size_t)ns * sizeof *sv) == TS_OK &&
              ts_copy_to_host(ts_to(z, ts_cpu()), zv, (size_t)ns * sizeof *zv) == TS_OK &&
              ts_copy_to_host(ts_to(ws, ts_cpu()), wv, (size_t)nw * sizeof *wv) == TS_OK &&
              ts_copy_to_host(ts_to(xs, ts_cpu()), &xv, sizeof xv) == TS_OK;
    ts_scope_end();
    for (int64_t i = 0; ok && i < ns; i++) ok = zv[i] == 0 && sv[i] == xv * wv[nw == 1 ? 0 : i];
    free(sv), free(wv), free(zv);
    ts_error_clear();
    return ok;
}

/* Q node k over MatMul / Conv node p: fused when the pattern holds */
static bool try_fuse(tso_graph *g, int k, bool *dead) {
    tso_node *q = &g->nodes[k];
    if (q->n_in < 3 || q->in[1] < 0 || q->in[2] < 0) return true;
    ts_tensor *ys = tso_known(g, q->in[1]), *yz = tso_known(g, q->in[2]);
    if (!ys || !yz || ts_dtype_of(ys) != TS_F32 || ts_numel(ys) != 1 || ts_numel(yz) != 1 ||
        !is_8bit(yz) || g->values[q->in[2]].onnx_type) /* an int4 output saturates in 4 bits */
        return true;
    int p = producer(g, q->in[0]);
    if (p < 0 || !sole_use(g, q->in[0])) return true;
    tso_node *op = &g->nodes[p];
    bool mm = tso_is_op(op, "MatMul"), conv = tso_is_op(op, "Conv"), gemm = plain_gemm(op);
    bool add = tso_is_op(op, "Add") && op->n_in == 2;
    if ((!mm && !conv && !gemm && !add) || op->n_in < 2 || op->n_out != 1 || op->state) return true;
    if ((conv || gemm) && op->n_in > 3) return true;
    int da = dq_node(g, op->in[0], 1, 0, 0, false);
    int64_t per = 1;
    int axis = 0, rank = 0;
    /* the weight's quantized values: an initializer, or a DequantizeLinear's input known at load */
    int dw0 = producer(g, op->in[1]);
    ts_tensor *wq = dw0 >= 0 && g->nodes[dw0].n_in > 0 ? tso_known(g, g->nodes[dw0].in[0]) : NULL;
    if (wq) {
        rank = ts_ndim(wq);
        if (mm && rank == 2) per = ts_size(wq, 1), axis = 1;
        if (conv && rank >= 3) per = ts_size(wq, 0), axis = 0;
        if (gemm && rank == 2) {
            axis = tso_attr_int(op, "transB", 0) ? 0 : 1;
            per = ts_size(wq, axis);
        }
    }
    if (add) per = 1; /* both operands per tensor */
    int dw = dq_node(g, op->in[1], per, axis, rank, false);
    if (da < 0 || dw < 0) return true;
    int db = -1;
    if ((conv || gemm) && op->n_in == 3 && op->in[2] >= 0) {
        db = dq_node(g, op->in[2], per, 0, 1, true);
        if (db < 0 || !wq ||
            !bias_fits(g, &g->nodes[db], tso_known(g, g->nodes[da].in[1]),
                       tso_known(g, g->nodes[dw].in[1]), per))
            return true;
    }
    const tso_node *a = &g->nodes[da], *b = &g->nodes[dw];
    int n_in = db >= 0 ? 9 : 8;
    int *io = malloc(sizeof(int) * (size_t)(n_in + 2));
    if (!io) {
        tsi_error_set(TS_ERR_OOM, "onnx_load: out of host memory (QDQ rewrite)");
        return false;
    }
    int src[9] = {a->in[0], a->in[1], a->in[2],
                  b->in[0], b->in[1], b->in[2],
                  q->in[1], q->in[2], db >= 0 ? g->nodes[db].in[0] : -1};
    memcpy(io, src, sizeof(int) * (size_t)n_in);
    io[n_in] = q->out[0];
    /* the op's old output dies with it; the Q node's output is the fused node's */
    g->values[op->out[0]].producer = -1;
    free(op->in);
    op->in = io;
    op->out = io + n_in;
    op->n_in = n_in;
    op->n_out = 1;
    op->def = mm ? &qdq_matmul_def : conv ? &qdq_conv_def : gemm ? &qdq_gemm_def : &qdq_add_def;
    op->op_type = op->def->op_type;
    g->values[q->out[0]].producer = p;
    dead[k] = true;
    int dqs[3] = {da, dw, db};
    for (int i = 0; i < 3; i++)
        if (dqs[i] >= 0 && sole_use(g, g->nodes[dqs[i]].out[0])) dead[dqs[i]] = true;
    return true;
}

/* ---- DequantizeLinear -> MaxPool -> QuantizeLinear with one scale and zero point on both sides:
 * ORT drops the pair and pools the bytes; so does this (exact: max commutes with the increasing
 * dequantization, and Q(DQ(q)) = q). The fused node keeps the MaxPool's attributes and reads the
 * bytes; ts_quantized_max_pool2d pools them when it takes the geometry (4-D, no Indices output,
 * floor mode, symmetric pads at most half the kernel), MaxPool's own run (on the bytes) else. */
static TSO_NN_RUN(run_qdq_max_pool) {
    ts_tensor *x = in[0];
    const int64_t *ks = NULL, *st = NULL, *pd = NULL, *dl = NULL;
    const int nk = tso_attr_ints(n, "kernel_shape", &ks), ns = tso_attr_ints(n, "strides", &st),
              np = tso_attr_ints(n, "pads", &pd), nd = tso_attr_ints(n, "dilations", &dl);
    char ap[16];
    bool fast = ts_ndim(x) == 4 && nk == 2 && ns <= 2 && ns != 1 && np <= 4 &&
                (np == 4 || np < 1) && nd <= 2 && nd != 1 && !tso_attr_int(n, "ceil_mode", 0) &&
                !strcmp(tso_attr_string(n, "auto_pad", "NOTSET", ap, sizeof ap), "NOTSET");
    int64_t k[2], s[2], p[2], d[2];
    for (int i = 0; fast && i < 2; i++) {
        k[i] = ks[i], s[i] = ns == 2 ? st[i] : 1, p[i] = np == 4 ? pd[i] : 0;
        d[i] = nd == 2 ? dl[i] : 1;
        fast = (np != 4 || pd[i] == pd[i + 2]) && k[i] >= 1 && s[i] >= 1 && d[i] >= 1 &&
               p[i] >= 0 && 2 * p[i] <= k[i];
    }
    if (!fast) return tso_nn_run_max_pool(c, n, in, out);
    /* the bytes viewed as they lie (a channels_last input pools in NHWC), not copied */
    ts_tensor *q = tsi_quantized_view("quantized_max_pool2d", x, 1.0, 0);
    ts_tensor *y = q ? ts_quantized_max_pool2d(q, k, s, p, d, false) : NULL;
    TSO_DONE(y ? tsi_int_view("quantized_max_pool2d", y) : NULL);
}
static const tso_op_def qdq_max_pool_def = {"QDQMaxPool", 1, run_qdq_max_pool,
                                            tso_nn_check_max_pool, false};

/* values a and b: known scalars of one dtype and the same bytes */
static bool same_scalar(const tso_graph *g, int a, int b) {
    ts_tensor *ta = tso_known(g, a), *tb = tso_known(g, b);
    if (!ta || !tb || ts_numel(ta) != 1 || ts_numel(tb) != 1 || ts_dtype_of(ta) != ts_dtype_of(tb))
        return false;
    const ts_dtype dt = ts_dtype_of(ta);
    if (dt != TS_F32 && dt != TS_U8 && dt != TS_I8) return false;
    int64_t va = 0, vb = 0;
    const size_t sz = dt == TS_F32 ? 4 : 1;
    ts_scope_begin();
    bool ok = ts_copy_to_host(ts_to(ta, ts_cpu()), &va, sz) == TS_OK &&
              ts_copy_to_host(ts_to(tb, ts_cpu()), &vb, sz) == TS_OK;
    ts_scope_end();
    ts_error_clear();
    return ok && va == vb;
}

/* Q node k over MaxPool over a DequantizeLinear of the same parameters: the MaxPool node reads the
 * DequantizeLinear's input and makes the Q node's output */
static void try_fuse_max_pool(tso_graph *g, int k, bool *dead) {
    const tso_node *q = &g->nodes[k];
    if (q->n_in < 3 || q->in[1] < 0 || q->in[2] < 0) return;
    const int p = producer(g, q->in[0]);
    if (p < 0 || !sole_use(g, q->in[0])) return;
    tso_node *op = &g->nodes[p];
    if (!tso_is_op(op, "MaxPool") || op->n_in != 1 || op->n_out != 1 || op->state) return;
    const int d = dq_node(g, op->in[0], 1, 0, 0, false);
    if (d < 0) return;
    const tso_node *dq = &g->nodes[d];
    if (!same_scalar(g, dq->in[1], q->in[1]) || !same_scalar(g, dq->in[2], q->in[2])) return;
    g->values[op->out[0]].producer = -1;
    op->in[0] = dq->in[0];
    op->out[0] = q->out[0];
    op->def = &qdq_max_pool_def;
    op->op_type = op->def->op_type;
    g->values[q->out[0]].producer = p;
    dead[k] = true;
    if (sole_use(g, dq->out[0])) dead[d] = true;
}

/* ---- DequantizeLinear -> GlobalAveragePool -> QuantizeLinear (per tensor, one 8-bit type): ORT
 * fuses it into com.microsoft's QLinearGlobalAveragePool (integer sums, its float32
 * requantization), and so does this; the fused node keeps the pool's label and reads (x, x_scale,
 * x_zp, y_scale, y_zp) as ops_qoperator_ms_pool.c's run does. */
static const tso_op_def qdq_gap_def = {"QDQGlobalAveragePool", 1, tso_qms_run_global_average_pool,
                                       NULL, false};

/* ---- DequantizeLinear -> Flatten / Reshape / Squeeze / Unsqueeze / Transpose -> QuantizeLinear
 * of one scale and zero point: the op moves bytes, Q(DQ(q)) = q, so it moves the quantized bytes
 * (ORT drops the pair too); the node keeps its own run. */
static bool moves_bytes(const tso_node *op) {
    static const char *const ops[] = {"Flatten", "Reshape", "Squeeze", "Unsqueeze", "Transpose"};
    for (size_t i = 0; i < sizeof ops / sizeof *ops; i++)
        if (tso_is_op(op, ops[i])) return true;
    return false;
}

/* Q node k over a GlobalAveragePool or a byte-moving op over a DequantizeLinear: fused as above */
static bool try_fuse_unary(tso_graph *g, int k, bool *dead) {
    const tso_node *q = &g->nodes[k];
    if (q->n_in < 3 || q->in[1] < 0 || q->in[2] < 0) return true;
    ts_tensor *ys = tso_known(g, q->in[1]), *yz = tso_known(g, q->in[2]);
    if (!ys || !yz || ts_dtype_of(ys) != TS_F32 || ts_numel(ys) != 1 || ts_numel(yz) != 1 ||
        !is_8bit(yz) || g->values[q->in[2]].onnx_type)
        return true;
    const int p = producer(g, q->in[0]);
    if (p < 0 || !sole_use(g, q->in[0])) return true;
    tso_node *op = &g->nodes[p];
    const bool gap = tso_is_op(op, "GlobalAveragePool") && op->n_in == 1;
    if ((!gap && !moves_bytes(op)) || op->n_in < 1 || op->n_out != 1 || op->state) return true;
    const int d = dq_node(g, op->in[0], 1, 0, 0, false);
    if (d < 0) return true;
    const tso_node *dq = &g->nodes[d];
    ts_tensor *xz = tso_known(g, dq->in[2]);
    if (g->values[dq->in[2]].onnx_type || ts_dtype_of(xz) != ts_dtype_of(yz)) return true;
    if (!gap && (!same_scalar(g, dq->in[1], q->in[1]) || !same_scalar(g, dq->in[2], q->in[2])))
        return true;
    g->values[op->out[0]].producer = -1; /* the op's old output dies with it */
    if (gap) {
        int *io = malloc(sizeof(int) * 6);
        if (!io) {
            tsi_error_set(TS_ERR_OOM, "onnx_load: out of host memory (QDQ rewrite)");
            return false;
        }
        const int src[5] = {dq->in[0], dq->in[1], dq->in[2], q->in[1], q->in[2]};
        memcpy(io, src, sizeof src);
        free(op->in);
        op->in = io;
        op->out = io + 5;
        op->n_in = 5;
        op->def = &qdq_gap_def;
        op->op_type = op->def->op_type;
    } else {
        op->in[0] = dq->in[0];
    }
    op->out[0] = q->out[0];
    g->values[q->out[0]].producer = p;
    dead[k] = true;
    if (sole_use(g, dq->out[0])) dead[d] = true;
    return true;
}

/* A DequantizeLinear read by several fused nodes (a residual block's input: its Conv and its Add)
 * is left with no reader only once all of them are fused: drop those (uses are recounted by
 * tso_graph_drop_dead; a graph output or a sub-graph's input counts or pins) */
static void drop_unread_dq(tso_graph *g, bool *dead) {
    bool any = false;
    for (int k = 0; k < g->n_nodes; k++) {
        const tso_node *d = &g->nodes[k];
        const int v = d->n_out == 1 ? d->out[0] : -1;
        dead[k] = tso_is_op(d, "DequantizeLinear") && v >= 0 && g->values[v].uses == 0 &&
                  !g->values[v].pinned;
        any |= dead[k];
    }
    if (any) tso_graph_drop_dead(g, dead);
}

bool tso_rewrite_qdq(tso_model *m) {
    tso_graph *g = m->graph;
    bool any = false;
    for (int k = 0; k < g->n_nodes && !any; k++) any = tso_is_op(&g->nodes[k], "QuantizeLinear");
    if (!any) return true;
    bool *dead = calloc((size_t)g->n_nodes + 1, sizeof *dead);
    if (!dead)
        return tsi_error_set(TS_ERR_OOM, "onnx_load: out of host memory (QDQ rewrite)"), false;
    bool ok = true;
    for (int k = 0; ok && k < g->n_nodes; k++)
        if (!dead[k] && tso_is_op(&g->nodes[k], "QuantizeLinear")) {
            ok = try_fuse(g, k, dead);
            if (ok && !dead[k]) try_fuse_max_pool(g, k, dead);
            if (ok && !dead[k]) ok = try_fuse_unary(g, k, dead);
        }
    tso_graph_drop_dead(g, dead);
    if (ok) drop_unread_dq(g, dead);
    free(dead);
    return ok;
}
