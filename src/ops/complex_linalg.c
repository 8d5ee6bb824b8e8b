/* complex_linalg.c — matmul, mm, bmm, mv, dot and vdot of complex tensors as real products over
 * the parts (decision 0023): (A + iB)(C + iD) = (AC - BD) + i(AD + BC). The real product runs
 * four times on the strided part views, on every device, and autograd differentiates the
 * composition (PyTorch's convention: the gradient of A is G C^H). As PyTorch, both operands must
 * have one dtype: a real operand beside a complex one is refused, not promoted. */
#include "ops/complex.h"
#include "tessera/complex.h"

ts_tensor *tsi_complex_matmul(const char *op, ts_tensor *(*f)(ts_tensor *, ts_tensor *),
                              ts_tensor *a, ts_tensor *b, bool conj_a) {
    tsi_init();
    if (!a || !b)
        return tsi_error_set(TS_ERR_ARG, "%s: %s is NULL", op, !a ? "input" : "other"), NULL;
    if (a->dtype != b->dtype)
        return tsi_error_set(TS_ERR_DTYPE,
                             "%s: expected both operands to have the same dtype, but found %s and "
                             "%s (%s, %s)",
                             op, tsi_torch_scalar_name(a->dtype), tsi_torch_scalar_name(b->dtype),
                             tsi_desc(a), tsi_desc(b)),
               NULL;
    ts_scope_begin();
    ts_tensor *ar = ts_real(a), *ai = ts_imag(a), *br = ts_real(b), *bi = ts_imag(b);
    if (ai && conj_a) ai = ts_neg(ai);
    ts_tensor *re = ar && br && ai && bi ? ts_sub(f(ar, br), f(ai, bi)) : NULL;
    ts_tensor *im = re ? ts_add(f(ar, bi), f(ai, br)) : NULL;
    ts_tensor *y = ts_error() == TS_OK && re && im ? tsi_complex_combine(op, re, im) : NULL;
    y = ts_error() == TS_OK && y ? ts_keep(y) : NULL;
    ts_scope_end();
    return y;
}
