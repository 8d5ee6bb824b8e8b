/* loss_triplet_distance.c — torch.nn.functional.triplet_margin_with_distance_loss's loss from the
 * distances a user's distance_function computed (issue 76: the Python side only calls that
 * function): max(margin + d(a, p) - d(a, n), 0), d(a, n) replaced by min(d(a, n), d(p, n)) with
 * swap, reduced; composed of differentiable ops (every device, autograd). */
#include "core/internal.h"
#include "tessera.h"

ts_tensor *ts_triplet_margin_distance_loss(ts_tensor *dist_pos, ts_tensor *dist_neg,
                                           ts_tensor *dist_swap, double margin, ts_reduction r) {
    const char *op = "triplet_margin_with_distance_loss";
    tsi_init();
    if (!tsi_check_input(op, dist_pos, "dist_pos") || !tsi_check_input(op, dist_neg, "dist_neg") ||
        (dist_swap && !tsi_check_input(op, dist_swap, "dist_swap")))
        return NULL;
    if (!(margin > 0))
        return tsi_error_set(TS_ERR_ARG, "%s: expected margin to be greater than 0, got %g instead",
                             op, margin),
               NULL;
    if (r != TS_REDUCTION_MEAN && r != TS_REDUCTION_SUM && r != TS_REDUCTION_NONE)
        return tsi_error_set(TS_ERR_ARG, "%s: reduction must be 'none', 'mean' or 'sum'", op), NULL;
    ts_scope_begin();
    ts_tensor *dn = dist_swap ? ts_minimum(dist_neg, dist_swap) : dist_neg;
    ts_tensor *y = ts_clamp_min(ts_sub(ts_add_scalar(dist_pos, margin), dn), 0.0);
    y = r == TS_REDUCTION_SUM ? ts_sum(y) : r == TS_REDUCTION_MEAN ? ts_mean(y) : y;
    y = ts_error() == TS_OK && y ? ts_keep(y) : NULL;
    ts_scope_end();
    return y;
}
