/* fill.c — in-place fills (ts_fill_, ts_zero_), recorded so that gradients stop at them. */
#include "autograd/autograd.h"

static void zero_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi) {
    (void)n, (void)go, (void)gi; /* no gradient flows to the overwritten values */
}

ts_tensor *ts_fill_(ts_tensor *t, double v) {
    if (!tsi_check_input("fill_", t, "tensor") || !tsi_check_inplace("fill_", t)) return NULL;
    tsi_log_op("fill_", tsi_device(t));
    if (tsi_numel(t->shape)) {
        ts_kview kv = tsi_kview(t);
        tsi_be(t)->fill(tsi_be(t), tsi_dev_index(t), &kv, v);
    }
    tsi_bump_version(t);
    /* the old values no longer matter: their gradient is zero */
    tsi_record("FillBackward0", "fill_", zero_backward, &t, 1, t, NULL, 0);
    return tsi_own(ts_retain(t));
}
ts_tensor *ts_zero_(ts_tensor *t) { return ts_fill_(t, 0); }
