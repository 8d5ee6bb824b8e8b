/* inplace_rules.c — PyTorch's refusals before an in-place op with grad mode on (check_inplace and
 * handle_view_on_rebase): the messages are PyTorch 2.15's word for word after the op's name. */
#include "core/internal.h"

_Atomic(tsi_view_refresh_t) tsi_view_refresh_fn;

/* A view whose write would be recorded: one made under no_grad or by a multi-output op cannot
 * take the write into its base's history (PyTorch forbids both). */
static bool check_view(const char *op, ts_tensor *t, ts_tensor *base, bool operand_requires_grad) {
    if (!t->requires_grad && !base->requires_grad && !operand_requires_grad) return true;
    if (t->view_creation == TSI_VIEW_MULTI) {
        const char *multi = "This view is the output of a function that returns multiple views. "
                            "Such functions do not allow the output views to be modified inplace. "
                            "You should replace the inplace operation by an out-of-place one.";
        if (t->requires_grad)
            return tsi_error_set(TS_ERR_STATE,
                                 "%s: Output %d of %s is a view and is being modified inplace. %s",
                                 op, (int)t->view_multi_nr,
                                 t->view_multi_op ? t->view_multi_op : "Split", multi),
                   false;
        return tsi_error_set(TS_ERR_STATE,
                             "%s: A view was created in no_grad mode and is being modified inplace "
                             "with grad mode enabled. %s",
                             op, multi),
               false;
    }
    if (t->view_creation == TSI_VIEW_NO_GRAD)
        return tsi_error_set(TS_ERR_STATE,
                             "%s: A view was created in no_grad mode and is being modified inplace "
                             "with grad mode enabled. Given that this use case is ambiguous and "
                             "error-prone, it is forbidden. You can clarify your code by moving "
                             "both the view and the inplace either both inside the no_grad block "
                             "(if you don't want the inplace to be tracked) or both outside (if "
                             "you want the inplace to be tracked).",
                             op),
               false;
    if (base->requires_grad && !base->grad_fn)
        return tsi_error_set(TS_ERR_STATE,
                             "%s: a view of a leaf Variable that requires grad is being used in an "
                             "in-place operation.",
                             op),
               false;
    return true;
}

bool tsi_check_inplace_operand(const char *op, ts_tensor *t, bool operand_requires_grad) {
    if (!tsi_grad_mode()) return true;
    tsi_view_sync(t);
    ts_tensor *base = tsi_view_base(t);
    if (base) {
        if (!check_view(op, t, base, operand_requires_grad)) return false;
        /* the node this write records rebases the base's history, not the view's own */
        t->view_writing = true;
        return true;
    }
    /* the history would reach this alias but not the tensor whose storage it shares */
    if (!t->requires_grad && operand_requires_grad && t->is_view)
        return tsi_error_set(TS_ERR_UNSUPPORTED,
                             "%s: in-place operation on a view (%s) with no known base, with an "
                             "operand that requires grad, is not supported; apply it to a clone "
                             "of the view instead",
                             op, tsi_desc(t)),
               false;
    if (!t->requires_grad) return true;
    if (!t->grad_fn)
        return tsi_error_set(TS_ERR_STATE,
                             "%s: a leaf Variable that requires grad is being used in an in-place "
                             "operation.",
                             op),
               false;
    /* shares storage with a tensor it does not know (not made by a view op) */
    if (t->is_view)
        return tsi_error_set(TS_ERR_UNSUPPORTED,
                             "%s: in-place operation on a view of a tensor that requires grad is "
                             "not supported here (%s has no known base); apply it to a ts_clone "
                             "of the view instead",
                             op, tsi_desc(t)),
               false;
    return true;
}

bool tsi_check_inplace(const char *op, ts_tensor *t) {
    return tsi_check_inplace_operand(op, t, false);
}

bool tsi_check_no_self_overlap(const char *op, ts_tensor *t) {
    for (int d = 0; d < t->shape.ndim; d++)
        if (t->strides[d] == 0 && t->shape.dims[d] > 1)
            return tsi_error_set(TS_ERR_ARG,
                                 "%s: unsupported operation: more than one element of the "
                                 "written-to tensor refers to a single memory location. Please "
                                 "clone() the tensor before performing the operation "
                                 "(written-to tensor: %s)",
                                 op, tsi_desc(t)),
                   false;
    return true;
}
