/* inplace_check.c — ts_check_inplace (tessera/inplace.h): PyTorch's refusals before an in-place
 * op, for the in-place forms built from an out-of-place op and ts_copy_. */
#include "core/internal.h"
#include "tessera/inplace.h"

ts_status ts_check_inplace(ts_tensor *t, bool operand_requires_grad, const char *op) {
    tsi_init();
    if (!op) op = "in-place op";
    /* not tsi_check_input: its complex gate is the out-of-place op's to apply (a complex tensor
     * whose op has a complex path, sgn_ or sin_, is fine; one without is refused by that op) */
    if (!t) return tsi_error_set(TS_ERR_ARG, "%s: input is NULL", op);
    /* a view's base takes the write into its history (autograd/copy_slices.h) */
    if (!tsi_check_inplace_operand(op, t, operand_requires_grad)) return ts_error();
    return TS_OK;
}
