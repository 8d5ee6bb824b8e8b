/* complex_inplace.c — in-place arithmetic of complex tensors (add_, sub_, mul_, div_, pow_, their
 * scalar forms, and neg_ / exp_ / log_ / sqrt_ / sigmoid_ / tanh_). add_, sub_, mul_ and div_ (and
 * their scalar forms) run the native kernel into the tensor (complex_native.c), with PyTorch's node
 * (AddBackward0...) when the graph is recorded; neg_ with no graph recorded is the real kernel on
 * the pairs (view_as_real). The others: the out-of-place complex result
 * (complex_arith.c, complex_math.c) copied into the tensor by ts_copy_, which bumps its version and
 * records the copy in the graph; when the graph is recorded the result is computed from a clone,
 * since the composition saves views of the parts that the copy overwrites. The refusals are
 * PyTorch's: a real tensor cannot hold a complex result, a leaf that requires grad is not written
 * in place, and the result must keep the tensor's shape. */
#include "autograd/autograd.h"
#include "ops/complex.h"
#include "tessera/complex.h"

/* the checks before writing a */
static bool check(const char *op, ts_tensor *a, ts_tensor *other) {
    if (!a) return tsi_error_set(TS_ERR_ARG, "%s: input is NULL", op), false;
    if (!tsi_is_complex(a->dtype))
        return tsi_error_set(TS_ERR_DTYPE,
                             "%s: result type %s can't be cast to the desired output type %s "
                             "(input: %s)",
                             op, tsi_torch_scalar_name(tsi_complex_of(a->dtype)),
                             tsi_torch_scalar_name(a->dtype), tsi_desc(a)),
               false;
    /* a view's base takes the write into its history (autograd/copy_slices.h) */
    return tsi_check_inplace_operand(op, a, other && other->requires_grad);
}

/* check(); *src: a, or its clone when the graph is recorded */
static bool begin(const char *op, ts_tensor *a, ts_tensor *other, ts_tensor **src,
                  ts_tensor **other_src) {
    if (!check(op, a, other)) return false;
    ts_tensor *ins[2] = {a, other};
    const bool graph = tsi_needs_graph(ins, other ? 2 : 1);
    *src = graph ? ts_clone(a) : a;
    if (other_src)
        *other_src = graph && other && other->storage == a->storage ? ts_clone(other) : other;
    return *src != NULL;
}

/* y copied into a (same shape); a new reference to a in the caller's scope */
static ts_tensor *end(const char *op, ts_tensor *a, ts_tensor *y) {
    if (y && !tsi_shape_equal(y->shape, a->shape)) {
        tsi_error_set(TS_ERR_SHAPE, "%s: output with shape %s doesn't match the broadcast shape %s",
                      op, tsi_shape_str(a->shape), tsi_shape_str(y->shape));
        y = NULL;
    }
    ts_tensor *r = y && ts_error() == TS_OK ? ts_copy_(a, y) : NULL;
    r = ts_error() == TS_OK && r ? ts_keep(r) : NULL;
    ts_scope_end();
    return r;
}

ts_tensor *tsi_complex_binary_(const char *op, ts_binary_op bop, ts_tensor *a, ts_tensor *b) {
    tsi_init();
    if (!b) return tsi_error_set(TS_ERR_ARG, "%s: other is NULL", op), NULL;
    if (tsi_complex_native_ok(bop, a, b))
        return check(op, a, b) ? tsi_complex_native_inplace(op, bop, a, b) : NULL;
    ts_scope_begin();
    ts_tensor *src, *bsrc;
    if (!begin(op, a, b, &src, &bsrc)) return end(op, a, NULL);
    return end(op, a, tsi_complex_binary(op, bop, src, bsrc));
}

ts_tensor *tsi_complex_scalar_(const char *op, ts_binary_op bop, ts_tensor *a, double s) {
    tsi_init();
    if (tsi_complex_native_ok(bop, a, NULL)) { /* the number as PyTorch wraps it: a 0-dim tensor */
        if (!check(op, a, NULL)) return NULL;
        ts_scope_begin();
        ts_tensor *st = ts_scalar(s, (ts_opts){.dtype = tsi_complex_part(a->dtype)});
        ts_tensor *r = st ? tsi_complex_native_inplace(op, bop, a, st) : NULL;
        r = r ? ts_keep(r) : NULL;
        ts_scope_end();
        return r;
    }
    ts_scope_begin();
    ts_tensor *src;
    if (!begin(op, a, NULL, &src, NULL)) return end(op, a, NULL);
    return end(op, a, tsi_complex_scalar(op, bop, src, s));
}

ts_tensor *tsi_complex_unary_(const char *op, ts_unary_op u, ts_tensor *t) {
    tsi_init();
    if (t && u == TS_U_ABS)
        return tsi_error_set(TS_ERR_DTYPE,
                             "%s: In-place abs is not supported for complex tensors (input: %s)",
                             op, tsi_desc(t)),
               NULL;
    ts_scope_begin();
    const bool ok = check(op, t, NULL);
    if (ok && u == TS_U_NEG && !tsi_needs_graph(&t, 1)) {
        /* no graph: the real kernel negates both parts of the pairs where they lie (the view
         * shares t's version counter, which the kernel's write bumps) */
        ts_tensor *r = ts_neg_(ts_view_as_real(t)) ? ts_retain(t) : NULL;
        ts_scope_end();
        return tsi_own(r);
    }
    ts_tensor *src;
    if (!ok || !begin(op, t, NULL, &src, NULL)) return end(op, t, NULL);
    return end(op, t, tsi_complex_unary(op, u, src));
}
