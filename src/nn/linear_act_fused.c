/* linear_act_fused.c — Linear (with a bias) followed by relu or gelu_tanh as one backend call
 * (matmul_bias_act, decision 0032: cuBLASLt's RELU_BIAS / GELU_BIAS epilogues on CUDA) instead of
 * the product and a separate pass (or, for gelu_tanh, nine) over its output. One node gives dx,
 * dW and db: the activation's gradient is the composition's own (its ops differentiated on the
 * saved relu output or, for gelu_tanh, the pre-activation the slot saved as its aux), then
 * AddmmBackward0's gradients (linear_fused.c: matmul_bgrad where the backend has it). The erf GELU
 * never comes here; everything the slot does not take (no slot: the cpu; a trace, 1-D input, no
 * bias, other dtypes or devices, an empty operand, the backend declining) runs the composition,
 * ts_linear then the activation, which also reports any error. On sim the slot is the cpu
 * kernels in the composition's order, so both paths give the same bits there. */
#include "amp/autocast.h"
#include "autograd/trace.h"
#include "core/profiler_hooks.h"
#include "nn/functional_internal.h"
#include "nn/layers_internal.h"
#include "nn/linear_act_internal.h"
#include "nn/transformer_internal.h"

static const char *OP = "linear";

/* saved slots: 0 x, 1 w (tsi_addmm_grads'), 2 the relu output or the gelu_tanh pre-activation,
 * 3 the bias (under create_graph the forward is recomputed with its graph) */
enum { SAVE_X, SAVE_W, SAVE_ACT, SAVE_B, N_SAVES };

static ts_tensor *compose(ts_tensor *x, ts_tensor *w, ts_tensor *b, ts_activation act) {
    return tsi_transformer_activate(act, ts_linear(x, w, b));
}

/* (linear_act_internal.h) a small autograd pass of its own over a graph of its own: a pass that
 * reached this node's graph would disturb the pass running it */
ts_tensor *tsi_linear_act_grad(ts_activation act, ts_tensor *s, ts_tensor *g) {
    ts_scope_begin();
    ts_tensor *in = ts_detach(s);
    if (in && ts_set_requires_grad(in, true) != TS_OK) in = NULL;
    int levels = 0; /* a backward runs with grad mode off */
    while (!ts_grad_enabled()) ts_no_grad_end(), levels++;
    ts_tensor *y = !in ? NULL : act == TS_ACT_RELU ? ts_relu(in) : ts_gelu_tanh(in);
    ts_tensor *dz = NULL;
    if (y) (void)ts_autograd_grad(&y, &g, 1, &in, 1, (ts_grad_opts){0}, &dz);
    while (levels-- > 0) ts_no_grad_begin();
    dz = ts_keep(dz);
    ts_scope_end();
    return dz;
}

/* Under create_graph: the forward again with public ops (a graph reaching x, w and b) and the
 * activation's gradient as public ops of it, which record the gradient's own graph: relu's as
 * threshold_backward's composite form (elementwise_grad_unary.c: the composition's very ops, the
 * link to y with derivative 0 kept as PyTorch keeps it); gelu_tanh's derivative written out,
 * 0.5 (1 + t) + 0.5 z (1 - t^2) k (1 + 3 c z^2), t = tanh(k z (1 + c z^2)) (the composition
 * differentiates its nine ops instead: the same value up to rounding). */
ts_tensor *tsi_linear_act_grad_graph(ts_activation act, ts_tensor *x, ts_tensor *w, ts_tensor *b,
                                     ts_tensor *g) {
    ts_tensor *z = ts_linear(x, w, b);
    if (act == TS_ACT_RELU) {
        ts_tensor *y = ts_relu(z);
        return ts_where(ts_le_scalar(y, 0), ts_mul_scalar(y, 0), g);
    }
    const double k = 0.79788456080286535588, c = 0.044715; /* gelu_tanh.c's */
    ts_tensor *z2 = ts_square(z);
    ts_tensor *t = ts_tanh(ts_mul(ts_mul_scalar(z, k), ts_add_scalar(ts_mul_scalar(z2, c), 1)));
    ts_tensor *d1 = ts_mul_scalar(ts_add_scalar(t, 1), 0.5);
    ts_tensor *d2 =
        ts_mul(ts_mul_scalar(z, 0.5 * k),
               ts_mul(ts_rsub_scalar(ts_square(t), 1), ts_add_scalar(ts_mul_scalar(z2, 3 * c), 1)));
    return ts_mul(g, ts_add(d1, d2));
}

static void linear_act_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi) {
    ts_tensor *g = go[0];
    if (!g) return;
    const ts_activation act = (ts_activation)n->ip[0];
    ts_tensor *dz;
    if (tsi_create_graph_active()) {
        ts_tensor *x = tsi_node_saved(n, SAVE_X), *w = tsi_node_saved(n, SAVE_W);
        ts_tensor *b = tsi_node_saved(n, SAVE_B);
        if (!x || !w || !b) return;
        dz = tsi_linear_act_grad_graph(act, x, w, b, g);
    } else {
        ts_tensor *s = tsi_node_saved(n, SAVE_ACT);
        dz = s ? tsi_linear_act_grad(act, s, g) : NULL;
    }
    if (dz) tsi_addmm_grads(n, dz, gi);
}

ts_tensor *tsi_linear_act_slot(ts_tensor *x2, ts_tensor *w, ts_tensor *b, ts_activation act,
                               bool want_aux, ts_tensor **aux, bool *declined) {
    const ts_device dev = tsi_device(x2);
    const int64_t rows = x2->shape.dims[0], out_f = w->shape.dims[0];
    const ts_epi_act ea = act == TS_ACT_RELU ? TS_EPI_RELU : TS_EPI_GELU_TANH;
    const bool relu = ea == TS_EPI_RELU;
    *aux = NULL;
    tsi_log_op(OP, dev);
    ts_tensor *y = tsi_new(OP, TS_SHAPE(rows, out_f), x2->dtype, dev);
    /* ts_epi_aux's layouts: the pre-activation rows ld elements apart, the mask rows ld bits */
    const int64_t ld = relu ? (out_f + 127) / 128 * 128 : (out_f + 7) / 8 * 8;
    ts_tensor *abuf = y && want_aux ? tsi_new(OP, TS_SHAPE(rows, relu ? ld / 8 : ld),
                                              relu ? TS_U8 : x2->dtype, dev)
                                    : NULL;
    if (!y || (want_aux && !abuf)) {
        ts_release(y);
        return NULL; /* out of memory, recorded */
    }
    ts_kview ka, kb, ko, kbias = tsi_kview(b);
    tsi_linear_kviews(x2, w, y, &ka, &kb, &ko);
    const ts_epi_aux ka_aux = {abuf ? tsi_kview(abuf).data : NULL, ld};
    const ts_backend *be = tsi_be(x2);
    if (!be->matmul_bias_act(be, tsi_dev_index(x2), ea, &ko, &ka, &kb, &kbias, &ka_aux)) {
        ts_release(y), ts_release(abuf);
        TSI_PROF_OP_END(); /* the op ends here: the composition follows */
        *declined = true;
        return NULL;
    }
    if (!(y = tsi_own(y))) {
        ts_release(abuf);
        return NULL; /* out of host memory, recorded */
    }
    if (abuf && !(abuf = tsi_own(abuf))) return NULL;
    if (abuf && !relu && !(abuf = ts_narrow(abuf, 1, 0, out_f))) return NULL;
    *aux = abuf;
    return y;
}

/* The slot's call for x2 [rows, in] and its node; NULL with *declined set where the backend
 * declines. */
static ts_tensor *fused_rows(ts_tensor *x2, ts_tensor *w, ts_tensor *b, ts_activation act,
                             bool *declined) {
    ts_tensor *const ins[3] = {x2, w, b};
    const bool graph = tsi_needs_graph(ins, 3);
    /* gelu_tanh's backward reads the pre-activation the slot saves; relu's reads the output */
    ts_tensor *z = NULL;
    ts_tensor *y =
        tsi_linear_act_slot(x2, w, b, act, graph && act == TS_ACT_GELU_TANH, &z, declined);
    if (!y || !graph) return y;
    if (act == TS_ACT_GELU_TANH && !z) return NULL;
    ts_node *n = tsi_node_new("LinearActBackward", OP, linear_act_backward, ins, 3, 1, N_SAVES);
    if (!n) return NULL;
    n->ip[0] = act;
    n->flags |= TSI_NODE_TWICE; /* public ops throughout under create_graph */
    tsi_node_save(n, SAVE_X, x2);
    tsi_node_save(n, SAVE_W, w);
    tsi_node_save(n, SAVE_B, b);
    if (z) tsi_node_save(n, SAVE_ACT, z);
    tsi_node_set_output(n, y, 0);
    if (!z) tsi_node_save_output(n, SAVE_ACT, y);
    tsi_node_release(n); /* y owns it now */
    return y;
}

/* Whether the slot may take these (x, w, b already of the lower dtype under autocast). */
bool tsi_linear_act_takes(ts_tensor *x, ts_tensor *w, ts_tensor *b, ts_activation act) {
    if (act != TS_ACT_RELU && act != TS_ACT_GELU_TANH) return false; /* never the erf GELU */
    if (!x || !w || !b || tsi_trace_active || !tsi_be(x)->matmul_bias_act) return false;
    const ts_dtype dt = x->dtype;
    if ((dt != TS_F32 && dt != TS_F64 && dt != TS_F16 && dt != TS_BF16) || w->dtype != dt ||
        b->dtype != dt)
        return false;
    if (!tsi_device_eq(tsi_device(x), tsi_device(w)) ||
        !tsi_device_eq(tsi_device(x), tsi_device(b)))
        return false;
    const int nd = x->shape.ndim;
    if (nd < 2 || w->shape.ndim != 2 || b->shape.ndim != 1 ||
        b->shape.dims[0] != w->shape.dims[0] || x->shape.dims[nd - 1] != w->shape.dims[1])
        return false;
    return tsi_numel(x->shape) > 0 && tsi_numel(w->shape) > 0;
}

static ts_tensor *linear_act_op(ts_tensor *x, ts_tensor *w, ts_tensor *b, ts_activation act) {
    if (!tsi_linear_act_takes(x, w, b, act)) return compose(x, w, b, act);
    const int nd = x->shape.ndim;
    const int64_t in = w->shape.dims[1];
    ts_scope_begin();
    ts_tensor *x2 = nd == 2 ? x : ts_reshape(x, TS_SHAPE(tsi_numel(x->shape) / in, in));
    bool declined = false;
    ts_tensor *y = x2 ? fused_rows(x2, w, b, act, &declined) : NULL;
    if (y && nd > 2) {
        ts_shape os = x->shape;
        os.dims[nd - 1] = w->shape.dims[0];
        y = ts_view(y, os);
    }
    y = ts_keep(y);
    ts_scope_end();
    return declined ? compose(x, w, b, act) : y;
}

ts_tensor *tsi_linear_act(ts_tensor *x, ts_tensor *w, ts_tensor *b, ts_activation act) {
    tsi_init();
    if (!tsi_check_input(OP, x, "input") || !tsi_check_input(OP, w, "weight") ||
        (b && !tsi_check_input(OP, b, "bias")))
        return NULL;
    if (!tsi_linear_act_takes(x, w, b, act) && !tsi_autocast_any) return compose(x, w, b, act);
    tsi_ac_frame ac; /* autocast: linear's lower precision, as ts_linear's */
    TSI_AUTOCAST_ENTER(&ac, OP, &x, &w, &b);
    return tsi_autocast_exit(&ac, linear_act_op(x, w, b, act));
}

ts_tensor *tsi_forward_linear_act(ts_module *linear, ts_activation act, ts_tensor *x) {
    ts_tensor *w, *b;
    /* hooks (ts_module_place's among them) run only on the composed path */
    if (act == TS_ACT_GELU || !tsi_linear_parts_of(linear, &w, &b) || linear->impl->hooks ||
        linear->impl->place_input || !b || !x)
        return tsi_transformer_activate(act, ts_forward(linear, x));
    ts_scope_begin();
    ts_tensor *y = ts_keep(tsi_linear_act(x, w, b, act));
    ts_scope_end();
    return y;
}

bool tsi_linear_act_span(ts_module *const *ms, int n, ts_activation *act) {
    ts_tensor *w, *b;
    if (n < 2 || !tsi_linear_parts_of(ms[0], &w, &b) || !b) return false;
    if (ms[1]->impl->hooks || ms[1]->impl->place_input) return false;
    if (tsi_module_is_relu(ms[1]))
        *act = TS_ACT_RELU;
    else if (tsi_module_is_gelu_tanh(ms[1]))
        *act = TS_ACT_GELU_TANH;
    else
        return false;
    return true;
}
