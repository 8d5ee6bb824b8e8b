/* complex_native.c — add, sub, mul and div of complex tensors in one kernel call: both operands
 * cast to the complex result dtype (a real one gets a zero imaginary part, as PyTorch promotes it,
 * so inf * 2 is inf + nan i there too), broadcast, and sent to the backend's binary slot, whose
 * complex kernels (kern_complex.c, cuda_complex.cu) share kernel_math_complex.h's formulas. Only
 * for calls that record no graph: those that do keep complex_arith.c's composition over the parts,
 * whose backward is the real ops'. */
#include "autograd/autograd.h"
#include "ops/complex.h"
#include "tessera/complex.h"

bool tsi_complex_native_ok(ts_binary_op bop, ts_tensor *a, ts_tensor *b) {
    ts_tensor *const ins[2] = {a, b};
    return (bop == TS_B_ADD || bop == TS_B_SUB || bop == TS_B_MUL || bop == TS_B_DIV) &&
           !tsi_needs_graph(ins, 2);
}

/* x as dtype r on device dev: a new reference (x retained when it already is) */
static ts_tensor *operand(const char *op, ts_tensor *x, ts_dtype r, ts_device dev) {
    ts_tensor *d = tsi_to_device("complex_binary", x, dev); /* "add" would be refused */
    if (!d || d->dtype == r) return d;
    ts_scope_begin();
    ts_tensor *c = ts_to_dtype(d, r);
    if (c) ts_retain(c);
    ts_scope_end();
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
    return tsi_own(out);
}
