/* elementwise_grad.c — how the elementwise front ends record autograd nodes (out of place and in
 * place) and the helpers their backward functions share. */
#include "ops/elementwise_grad.h"

/* A node for an op on ins; saves a and b as `save` asks. In place, a is the destination: its
 * pre-op value is what backward needs, so a clone of it is saved (the destination itself is about
 * to change, which the version check would rightly refuse). */
static ts_node *make_node(const char *name, const char *op, tsi_backward_fn fn,
                          ts_tensor *const *ins, int n_in, ts_tensor *a, ts_tensor *b,
                          unsigned save, bool inplace, int64_t code, double p0, double p1) {
    ts_node *n = tsi_node_new(name, op, fn, ins, n_in, 1, TSI_EW_SLOTS);
    if (!n) return NULL;
    n->ip[0] = code;
    n->ip[1] = (save & TSI_EW_SAVE_OUT) != 0;
    /* derivatives.yaml's formulas over public ops (fused activations take their composite forms
     * under create_graph); in place, the saved old value is a detached copy: no double backward */
    n->flags |= TSI_NODE_TWICE | (inplace && (save & TSI_EW_SAVE_A) ? TSI_NODE_ONCE : 0);
    n->p[0] = p0;
    n->p[1] = p1;
    if (save & TSI_EW_SAVE_A) {
        if (inplace) {
            ts_tensor *old = tsi_ew_clone(op, a);
            if (!old) {
                tsi_node_release(n);
                return NULL;
            }
            tsi_node_save(n, TSI_EW_SLOT_A, old);
            ts_release(old);
        } else {
            tsi_node_save(n, TSI_EW_SLOT_A, a);
        }
    }
    if (save & TSI_EW_SAVE_B) tsi_node_save(n, TSI_EW_SLOT_B, b);
    return n;
}

ts_tensor *tsi_ew_finish(ts_node *n, ts_tensor *res) {
    if (res) {
        tsi_node_set_output(n, res, 0);
        if (n->ip[1]) tsi_node_save_output(n, TSI_EW_SLOT_OUT, res);
    }
    tsi_node_release(n);
    return res;
}

/* Out of place: out computed, node made afterwards (the inputs have not changed). */
static ts_tensor *record(ts_tensor *out, const char *name, const char *op, tsi_backward_fn fn,
                         ts_tensor *const *ins, int n_in, ts_tensor *a, ts_tensor *b, unsigned save,
                         int64_t code, double p0, double p1) {
    if (!out || !name || !tsi_is_float(out->dtype)) return out;
    ts_node *n = make_node(name, op, fn, ins, n_in, a, b, save, false, code, p0, p1);
    if (!n) {
        ts_release(out);
        return NULL;
    }
    return tsi_ew_finish(n, out);
}

ts_tensor *tsi_ew_record_unary(const char *op, ts_unary_op u, ts_tensor *t, ts_tensor *out,
                               double p0, double p1) {
    return record(out, tsi_ew_unary_name(op, u), op, tsi_ew_unary_backward, &t, 1, t, NULL,
                  tsi_ew_unary_saves(u), u, p0, p1);
}

ts_node *tsi_ew_begin_unary(const char *op, ts_unary_op u, ts_tensor *t, double p0, double p1) {
    return make_node(tsi_ew_unary_name(op, u), op, tsi_ew_unary_backward, &t, 1, t, NULL,
                     tsi_ew_unary_saves(u), true, u, p0, p1);
}

ts_tensor *tsi_ew_record_binary(const char *op, ts_binary_op bop, ts_tensor *a, ts_tensor *b,
                                ts_tensor *out, double alpha) {
    ts_tensor *const ins[2] = {a, b};
    return record(out, tsi_ew_binary_name(bop), op, tsi_ew_binary_backward, ins, 2, a, b,
                  tsi_ew_binary_saves(bop, a->requires_grad, b->requires_grad), bop, alpha, 0);
}

ts_node *tsi_ew_begin_binary(const char *op, ts_binary_op bop, ts_tensor *a, ts_tensor *b) {
    /* the view rules with the operand (a view's base takes the write: autograd/copy_slices.h) */
    if (!tsi_check_inplace_operand(op, a, b->requires_grad)) return NULL;
    ts_tensor *const ins[2] = {a, b};
    return make_node(tsi_ew_binary_name(bop), op, tsi_ew_binary_backward, ins, 2, a, b,
                     tsi_ew_binary_saves(bop, a->requires_grad, b->requires_grad), true, bop, 1, 0);
}

ts_tensor *tsi_ew_record_scalar(const char *op, ts_binary_op bop, ts_tensor *a, double s,
                                ts_tensor *out) {
    return record(out, tsi_ew_scalar_name(bop), op, tsi_ew_scalar_backward, &a, 1, a, NULL,
                  tsi_ew_scalar_saves(bop, s), bop, s, 0);
}

ts_node *tsi_ew_begin_scalar(const char *op, ts_binary_op bop, ts_tensor *a, double s) {
    return make_node(tsi_ew_scalar_name(bop), op, tsi_ew_scalar_backward, &a, 1, a, NULL,
                     tsi_ew_scalar_saves(bop, s), true, bop, s, 0);
}

ts_tensor *tsi_ew_record_where(ts_tensor *cond, ts_tensor *a, ts_tensor *b, ts_tensor *out) {
    ts_tensor *const ins[2] = {a, b};
    return record(out, "WhereBackward0", "where", tsi_ew_where_backward, ins, 2, NULL, cond,
                  TSI_EW_SAVE_B, 0, 0, 0);
}

ts_tensor *tsi_ew_record_masked_fill(const char *op, ts_tensor *t, ts_tensor *mask,
                                     ts_tensor *out) {
    return record(out, "MaskedFillBackward0", op, tsi_ew_masked_fill_backward, &t, 1, NULL, mask,
                  TSI_EW_SAVE_B, 0, 0, 0);
}

ts_node *tsi_ew_begin_masked_fill(const char *op, ts_tensor *t, ts_tensor *mask) {
    return make_node("MaskedFillBackward0", op, tsi_ew_masked_fill_backward, &t, 1, NULL, mask,
                     TSI_EW_SAVE_B, true, 0, 0, 0);
}

/* ------------------------------------------------------------------ backward helpers */
ts_tensor *tsi_ew_grad_fit(const ts_node *n, int i, ts_tensor *g) {
    if (!g) return NULL;
    if (!tsi_ew_shape_eq(&g->shape, &n->in_shape[i])) g = tsi_sum_to(g, n->in_shape[i]);
    if (g && g->dtype != n->in_dtype[i]) g = ts_to_dtype(g, n->in_dtype[i]);
    if (g && !tsi_device_eq(tsi_device(g), n->in_device[i])) g = ts_to(g, n->in_device[i]);
    return g;
}

ts_tensor *tsi_ew_grad_zero(ts_tensor *like) {
    return ts_zeros((ts_shape){0}, (ts_opts){.dtype = like->dtype, .device = tsi_device(like)});
}
