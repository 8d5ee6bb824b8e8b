/* complex_native.c — add, sub, mul, div and abs of complex tensors in one kernel call: both
 * operands of a binary op cast to the complex result dtype (a real one gets a zero imaginary part,
 * as PyTorch promotes it, so inf * 2 is inf + nan i there too), broadcast, and sent to the
 * backend's binary slot, whose complex kernels (kern_complex.c, cuda_complex.cu) share
 * kernel_math_complex.h's formulas; abs goes to the unary slot with a complex input and a real
 * output of its part's dtype (ts_cabs_f32 / f64, PyTorch's hypot). The binary ops run here with a
 * graph too, recording their own node (complex_native_grad.c: PyTorch's formulas), so a value is
 * the same with and without one; in place they write straight into the destination. abs only for
 * calls that record no graph: those that do keep complex_arith.c's composition over the parts. */
#include "autograd/autograd.h"
#include "ops/complex.h"
#include "ops/elementwise.h"
#include "tessera/autograd.h"
#include "tessera/complex.h"

bool tsi_complex_native_ok(ts_binary_op bop, ts_tensor *a, ts_tensor *b) {
    (void)a, (void)b; /* with a graph or without: the node is complex_native_grad.c's */
    return bop == TS_B_ADD || bop == TS_B_SUB || bop == TS_B_MUL || bop == TS_B_DIV;
}

/* x as dtype r on device dev, recording nothing: a new reference (x retained when it already is) */
static ts_tensor *operand(const char *op, ts_tensor *x, ts_dtype r, ts_device dev) {
    (void)op;
    ts_tensor *d = tsi_to_device("complex_binary", x, dev); /* "add" would be refused */
    if (!d || d->dtype == r) return d;
    ts_tensor *c = tsi_cast("complex_binary", d, r);
    ts_release(d);
    return c;
}

ts_tensor *tsi_complex_binary_native(const char *op, ts_binary_op bop, ts_tensor *a, ts_tensor *b,
                                     ts_dtype r) {
    ts_tensor *const ts[2] = {a, b};
    ts_device dev;
    ts_shape s;
    if (!tsi_same_device(op, ts, 2, true, &dev) ||
        !tsi_broadcast_shapes(op, a->shape, b->shape, &s))
        return NULL;
    tsi_log_op(op, dev);
    ts_tensor *ca = operand(op, a, r, dev), *cb = ca ? operand(op, b, r, dev) : NULL, *out = NULL;
    if (cb) out = tsi_new_like("complex_binary", s, r, dev, a->shape.ndim >= b->shape.ndim ? a : b);
    if (out && tsi_numel(s) > 0) {
        ts_kview ko, ka, kb;
        tsi_kview_fill(&ko, out);
        tsi_kview_fill_broadcast(&ka, ca, &s);
        tsi_kview_fill_broadcast(&kb, cb, &s);
        const ts_backend *be = tsi_be(out);
        be->binary(be, tsi_dev_index(out), bop, &ko, &ka, &kb);
    }
    ts_release(ca);
    ts_release(cb);
    if (out && tsi_needs_graph(ts, 2)) out = tsi_complex_native_record(op, bop, a, b, out);
    return tsi_own(out);
}

/* a op= b with a complex of the result dtype: the kernel writes a itself (b cast, moved and
 * broadcast first) and *done is set; not when b partly overlaps a (the caller then computes out of
 * place). False on failure (the error set). */
static bool into(const char *op, ts_binary_op bop, ts_tensor *a, ts_tensor *b, ts_shape s,
                 bool *done) {
    *done = false;
    ts_tensor *cb = operand(op, b, a->dtype, tsi_device(a));
    if (!cb) return false;
    if (!tsi_ew_overlaps(a, cb)) {
        if (tsi_numel(s) > 0) {
            ts_kview ka, kb;
            tsi_kview_fill(&ka, a);
            tsi_kview_fill_broadcast(&kb, cb, &s);
            const ts_backend *be = tsi_be(a);
            be->binary(be, tsi_dev_index(a), bop, &ka, &ka, &kb);
        }
        *done = true;
    }
    ts_release(cb);
    return true;
}

ts_tensor *tsi_complex_native_inplace(const char *op, ts_binary_op bop, ts_tensor *a,
                                      ts_tensor *b) {
    ts_tensor *const ts[2] = {a, b};
    ts_device dev;
    ts_shape s;
    const ts_dtype r = tsi_ew_result_type2(a, b);
    if (!tsi_check_promotion(op, r, a->dtype, b->dtype) || !tsi_same_device(op, ts, 2, true, &dev))
        return NULL;
    if (!tsi_device_eq(dev, tsi_device(a))) /* only b may be a 0-dim cpu tensor */
        return tsi_same_device(op, ts, 2, false, &dev), NULL;
    if (!tsi_broadcast_shapes(op, a->shape, b->shape, &s) || !tsi_ew_check_inplace(op, a, r, &s))
        return NULL;
    tsi_log_op(op, dev);
    /* the node first: its inputs are a's history before the write, its saves a's old value */
    const bool graph = tsi_needs_graph(ts, 2);
    ts_node *n = graph ? tsi_complex_native_node(op, bop, a, b, true) : NULL;
    if (graph && !n) return NULL;
    bool done = false, ok = r == a->dtype ? into(op, bop, a, b, s, &done) : true;
    if (ok && !done) { /* another dtype (complex128 into complex64), or b overlapping a */
        ts_no_grad_begin();
        ts_scope_begin();
        ts_tensor *y = tsi_complex_binary_native(op, bop, a, b, r);
        if (y && tsi_numel(s) > 0) { /* the copy casts */
            ts_kview ka, ky;
            tsi_kview_fill(&ka, a);
            tsi_kview_fill(&ky, y);
            tsi_be(a)->copy(tsi_be(a), tsi_dev_index(a), &ka, &ky);
        }
        ok = y != NULL;
        ts_scope_end();
        ts_no_grad_end();
    }
    if (!ok) {
        if (n) tsi_node_release(n);
        return NULL;
    }
    tsi_bump_version(a);
    if (n) {
        tsi_node_set_output(n, a, 0); /* a's history now starts at the node */
        tsi_node_release(n);
    }
    return tsi_own(ts_retain(a));
}

bool tsi_complex_abs_native_ok(ts_tensor *t) {
    ts_tensor *const ins[1] = {t};
    return !tsi_needs_graph(ins, 1);
}

ts_tensor *tsi_complex_abs_native(const char *op, ts_tensor *t) {
    const ts_device dev = tsi_device(t);
    tsi_log_op(op, dev);
    ts_tensor *out = tsi_new_like("complex_abs", t->shape, tsi_complex_part(t->dtype), dev, t);
    if (out && tsi_numel(t->shape) > 0) {
        ts_kview ko, ki;
        tsi_kview_fill(&ko, out);
        tsi_kview_fill(&ki, t);
        const ts_backend *be = tsi_be(out);
        be->unary(be, tsi_dev_index(out), TS_U_ABS, &ko, &ki, 0.0, 0.0);
    }
    return tsi_own(out);
}
