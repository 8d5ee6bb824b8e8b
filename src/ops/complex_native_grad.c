/* complex_native_grad.c — the autograd node of complex_native.c's add, sub, mul and div, so that
 * the native kernels run with a graph too (the same values with and without one). PyTorch's
 * formulas (derivatives.yaml, FunctionsManual.cpp) in its convention for a real loss L (the
 * gradient with respect to z = x + iy is dL/dx + i dL/dy):
 *
 *   add: ga = g, gb = alpha g        sub: ga = g, gb = -g
 *   mul: ga = g conj(b), gb = g conj(a)
 *   div: ga = g / conj(b), gb = -g conj((a / b) / b)
 *
 * and a real operand's gradient is the real part (PyTorch's handle_r_to_c). The formulas are public
 * ops on the incoming gradient and the saved operands, so the node is differentiable again. The
 * operands are saved as given (not cast), only where the other one's gradient needs them, as the
 * real ops do; in place the destination's old value is a clone recorded in the graph. */
#include "ops/complex.h"
#include "ops/elementwise_grad.h"
#include "tessera/complex.h"

enum { SLOT_A, SLOT_B, SLOTS };

/* which operands op's gradients need, given which inputs need one */
static void saves(ts_binary_op bop, bool need_a, bool need_b, bool *sa, bool *sb) {
    *sa = (bop == TS_B_MUL || bop == TS_B_DIV) && need_b;
    *sb = (bop == TS_B_MUL && need_a) || bop == TS_B_DIV;
}

/* g as the gradient of input i: the real part for a real input, then summed, cast and moved */
static ts_tensor *fit(const ts_node *n, int i, ts_tensor *g) {
    if (g && !tsi_is_complex(n->in_dtype[i])) g = ts_real(g);
    return tsi_ew_grad_fit(n, i, g);
}

static void complex_binary_backward(ts_node *n, ts_tensor *const *grad_out, ts_tensor **grad_in) {
    ts_tensor *g = grad_out[0], *a = NULL, *b = NULL, *ga = NULL, *gb = NULL;
    if (!g) return;
    const ts_binary_op bop = (ts_binary_op)n->ip[0];
    const bool na = tsi_node_needs(n, 0), nb = tsi_node_needs(n, 1);
    bool sa, sb;
    saves(bop, na, nb, &sa, &sb);
    if ((sa && !(a = tsi_node_saved(n, SLOT_A))) || (sb && !(b = tsi_node_saved(n, SLOT_B))))
        return; /* modified in place since, or freed: the engine's error is set */
    switch (bop) {
    case TS_B_ADD: /* p[0]: alpha (1 for add) */
        ga = g;
        gb = !nb || n->p[0] == 1 ? g : ts_mul_scalar(g, n->p[0]);
        break;
    case TS_B_SUB:
        ga = g;
        gb = nb ? ts_neg(g) : NULL;
        break;
    case TS_B_MUL:
        ga = na ? ts_mul(g, ts_conj(b)) : NULL;
        gb = nb ? ts_mul(g, ts_conj(a)) : NULL;
        break;
    default: /* TS_B_DIV */
        ga = na ? ts_div(g, ts_conj(b)) : NULL;
        gb = nb ? ts_mul(ts_neg(g), ts_conj(ts_div(ts_div(a, b), b))) : NULL;
        break;
    }
    if (na) grad_in[0] = fit(n, 0, ga);
    if (nb) grad_in[1] = fit(n, 1, gb);
}

ts_node *tsi_complex_native_node(const char *op, ts_binary_op bop, ts_tensor *a, ts_tensor *b,
                                 bool inplace) {
    ts_tensor *const ins[2] = {a, b};
    ts_node *n =
        tsi_node_new(tsi_ew_binary_name(bop), op, complex_binary_backward, ins, 2, 1, SLOTS);
    if (!n) return NULL;
    n->ip[0] = bop;
    n->p[0] = 1;
    n->flags |= TSI_NODE_TWICE;
    bool sa, sb;
    saves(bop, tsi_node_needs(n, 0), tsi_node_needs(n, 1), &sa, &sb);
    if (sa) {
        /* in place: a is about to change; its old value as a clone that keeps a's history
         * (PyTorch's original_self), so a second backward reaches a's past too */
        ts_tensor *old = NULL;
        if (inplace) {
            ts_scope_begin();
            old = ts_clone(a);
            if (old) ts_retain(old);
            ts_scope_end();
        }
        if (inplace && !old) {
            tsi_node_release(n);
            return NULL;
        }
        tsi_node_save(n, SLOT_A, inplace ? old : a);
        ts_release(old);
    }
    if (sb) tsi_node_save(n, SLOT_B, b);
    return n;
}

ts_tensor *tsi_complex_native_record(const char *op, ts_binary_op bop, ts_tensor *a, ts_tensor *b,
                                     ts_tensor *out) {
    if (!out) return NULL;
    ts_node *n = tsi_complex_native_node(op, bop, a, b, false);
    if (!n) {
        ts_release(out);
        return NULL;
    }
    tsi_node_set_output(n, out, 0);
    tsi_node_release(n);
    return out;
}
