/* linear_fused.c — linear's product and bias in one backend call (PyTorch's addmm): the backend's
 * matmul_bias adds the bias as the product is stored (oneDNN's bias argument on the cpu,
 * cuBLASLt's bias epilogue on CUDA) instead of a second pass over the output. One node,
 * AddmmBackward0, gives all three gradients with the products and the sum of the composition (mm,
 * then add_) it replaces, which stays where the backend has no matmul_bias, and is what the tests
 * compare with; where the backend has matmul_bgrad (CUDA: cuBLASLt's BGRADB epilogue) the weight
 * and bias gradients come from one GEMM. On the cpu f32 / f64 give the composition's bits; f16 /
 * bf16 (autocast's linear), and every dtype on CUDA, add the bias to the float32 sums and round
 * once, where the composition rounds the product and then the sum. */
#include "core/profiler_hooks.h"
#include "nn/functional_internal.h"
#include "nn/linear_act_internal.h"

static const char *OP = "linear";

bool tsi_linear_fused_takes(ts_tensor *x, ts_tensor *w, ts_tensor *b) {
    const ts_dtype dt = x->dtype;
    return b && tsi_be(x)->matmul_bias &&
           (dt == TS_F32 || dt == TS_F64 || dt == TS_F16 || dt == TS_BF16) && x->shape.ndim == 2 &&
           tsi_numel(x->shape) > 0 && tsi_numel(w->shape) > 0;
}

/* The weight and bias gradients in one backend call (matmul_bgrad: cuBLASLt's BGRADB epilogue on
 * CUDA) where both are wanted and no graph is recorded of them (create_graph composes, with
 * public ops); false, with nothing set, where the backend declines (the composition follows). */
static bool bgrad_fused(ts_tensor *g, ts_tensor *x, ts_tensor **gw, ts_tensor **gb) {
    const ts_backend *be = tsi_be(g);
    ts_tensor *ins[2] = {g, x};
    if (!be->matmul_bgrad || tsi_needs_graph(ins, 2) || g->dtype != x->dtype ||
        g->shape.ndim != 2 || x->shape.ndim != 2 || tsi_numel(g->shape) == 0 ||
        tsi_numel(x->shape) == 0 || tsi_device(g).type != tsi_device(x).type ||
        tsi_dev_index(g) != tsi_dev_index(x))
        return false;
    const int64_t out_f = g->shape.dims[1], in = x->shape.dims[1];
    tsi_log_op(OP, tsi_device(g));
    ts_tensor *dw = tsi_new(OP, TS_SHAPE(out_f, in), g->dtype, tsi_device(g));
    ts_tensor *db = dw ? tsi_new(OP, TS_SHAPE(out_f), g->dtype, tsi_device(g)) : NULL;
    const ts_kview kdw = dw ? tsi_kview(dw) : (ts_kview){0}, kdb = db ? tsi_kview(db) : kdw;
    const ts_kview kg = tsi_kview(g), kx = tsi_kview(x);
    if (!db || !be->matmul_bgrad(be, tsi_dev_index(g), &kdw, &kdb, &kg, &kx)) {
        /* declined, or out of memory (recorded): the op ends here, the composition follows */
        ts_release(dw), ts_release(db);
        TSI_PROF_OP_END();
        return false;
    }
    *gw = tsi_own(dw), *gb = tsi_own(db);
    return true;
}

void tsi_linear_grads(ts_tensor *g, ts_tensor *x, ts_tensor *w, ts_shape bshape, ts_tensor **gx,
                      ts_tensor **gw, ts_tensor **gb) {
    if (gw && gb && bgrad_fused(g, x, gw, gb)) {
        if (gx) *gx = ts_mm(g, w);
        return;
    }
    if (gx) *gx = ts_mm(g, w);       /* the same product mm's backward makes: g w */
    if (gw) *gw = ts_mm(ts_t(g), x); /* g^T x, in the weight's layout (mm_mat2_backward's) */
    if (gb) *gb = tsi_sum_to(g, bshape);
}

void tsi_addmm_grads(ts_node *n, ts_tensor *g, ts_tensor **gi) {
    const bool nx = tsi_node_needs(n, 0), nw = tsi_node_needs(n, 1), nb = tsi_node_needs(n, 2);
    ts_tensor *x = nw ? tsi_node_saved(n, 0) : NULL, *w = nx ? tsi_node_saved(n, 1) : NULL;
    if ((nw && !x) || (nx && !w)) return;
    tsi_linear_grads(g, x, w, n->in_shape[2], nx ? &gi[0] : NULL, nw ? &gi[1] : NULL,
                     nb ? &gi[2] : NULL);
}

static void addmm_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi) {
    if (go[0]) tsi_addmm_grads(n, go[0], gi);
}

void tsi_linear_kviews(ts_tensor *x, ts_tensor *w, ts_tensor *y, ts_kview *ka, ts_kview *kb,
                       ts_kview *ko) {
    const int64_t rows = x->shape.dims[0], in = x->shape.dims[1], out_f = w->shape.dims[0];
    *ka = tsi_kview(x), *kb = tsi_kview(w), *ko = tsi_kview(y);
    ka->ndim = kb->ndim = ko->ndim = 3;
    ka->shape[0] = kb->shape[0] = ko->shape[0] = 1;
    ka->strides[0] = kb->strides[0] = ko->strides[0] = 0;
    ka->shape[1] = rows, ka->shape[2] = in, ka->strides[1] = x->strides[0],
    ka->strides[2] = x->strides[1];
    /* w^T [in, out] as a transposed view of w */
    kb->shape[1] = in, kb->shape[2] = out_f, kb->strides[1] = w->strides[1],
    kb->strides[2] = w->strides[0];
    ko->shape[1] = rows, ko->shape[2] = out_f, ko->strides[1] = out_f, ko->strides[2] = 1;
}

ts_tensor *tsi_linear_fused(ts_tensor *x, ts_tensor *w, ts_tensor *b) {
    const ts_device dev = tsi_device(x);
    tsi_log_op(OP, dev);
    ts_tensor *y = tsi_new(OP, TS_SHAPE(x->shape.dims[0], w->shape.dims[0]), x->dtype, dev);
    if (!y) return NULL;
    ts_kview ka, kb, ko, kbias = tsi_kview(b);
    tsi_linear_kviews(x, w, y, &ka, &kb, &ko);
    const ts_backend *be = tsi_be(x);
    be->matmul_bias(be, tsi_dev_index(x), &ko, &ka, &kb, &kbias);
    ts_tensor *ins[3] = {x, w, b};
    if (tsi_needs_graph(ins, 3)) {
        ts_tensor *saves[2] = {w->requires_grad ? x : NULL, x->requires_grad ? w : NULL};
        ts_node *n = tsi_record("AddmmBackward0", OP, addmm_backward, ins, 3, y, saves, 2);
        if (n) n->flags |= TSI_NODE_TWICE; /* mm and sum_to of the gradient */
        (void)n;
    }
    return tsi_own(y);
}
