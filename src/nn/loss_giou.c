/* loss_giou.c — torchvision.ops.generalized_box_iou_loss: 1 - GIoU of paired xyxy boxes [..., 4],
 * in torchvision's order of operations (_loss_inter_union, giou_loss.py), eps included:
 *   inter = (min(x2, x2g) - max(x1, x1g)) (min(y2, y2g) - max(y1, y1g)) where both are > 0, else 0
 *   union = (x2 - x1) (y2 - y1) + (x2g - x1g) (y2g - y1g) - inter
 *   loss  = 1 - (inter / (union + eps) - (area_c - union) / (area_c + eps)),
 * area_c the enclosing box's area (not clamped, as torchvision). Without eps (the C
 * generalized_box_iou's matrix form) the loss differs by ~eps / area relative, which
 * fcos_resnet50_fpn's float64 gradients show. Composed of public ops, so differentiable on
 * every device; integer boxes computed in float32 (torchvision's _upcast_non_float). */
#include "nn/functional_internal.h"

static const char *OP = "generalized_box_iou_loss";

static ts_tensor *col(ts_tensor *b, int64_t i) { return ts_select(b, -1, i); }

static bool giou_check(ts_tensor *b1, ts_tensor *b2, ts_reduction r) {
    if (!tsi_check_input(OP, b1, "boxes1") || !tsi_check_input(OP, b2, "boxes2")) return false;
    ts_tensor *both[2] = {b1, b2};
    ts_device dev;
    if (!tsi_same_device(OP, both, 2, false, &dev) || !tsi_check_reduction(OP, r)) return false;
    if (b1->shape.ndim < 1 || b1->shape.dims[b1->shape.ndim - 1] != 4 ||
        !tsi_shape_equal(b1->shape, b2->shape))
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s: boxes1 and boxes2 must have one shape [..., 4], got %s and %s",
                             OP, tsi_shape_str(b1->shape), tsi_shape_str(b2->shape)),
               false;
    for (int i = 0; i < 2; i++)
        if (both[i]->dtype == TS_BOOL || tsi_is_complex(both[i]->dtype))
            return tsi_error_set(TS_ERR_DTYPE, "%s: %s must be a real number tensor, got %s", OP,
                                 i ? "boxes2" : "boxes1", tsi_desc(both[i])),
                   false;
    return true;
}

static ts_tensor *upcast_non_float(ts_tensor *t) {
    return tsi_is_float(t->dtype) ? t : ts_to_dtype(t, TS_F32);
}

ts_tensor *ts_generalized_box_iou_loss(ts_tensor *boxes1, ts_tensor *boxes2, ts_reduction r,
                                       double eps) {
    tsi_init();
    if (!giou_check(boxes1, boxes2, r)) return NULL;
    ts_scope_begin();
    ts_tensor *b1 = upcast_non_float(boxes1), *b2 = upcast_non_float(boxes2);
    ts_tensor *x1 = col(b1, 0), *y1 = col(b1, 1), *x2 = col(b1, 2), *y2 = col(b1, 3);
    ts_tensor *x1g = col(b2, 0), *y1g = col(b2, 1), *x2g = col(b2, 2), *y2g = col(b2, 3);
    ts_tensor *xk1 = ts_maximum(x1, x1g), *yk1 = ts_maximum(y1, y1g);
    ts_tensor *xk2 = ts_minimum(x2, x2g), *yk2 = ts_minimum(y2, y2g);
    ts_tensor *prod = ts_mul(ts_sub(xk2, xk1), ts_sub(yk2, yk1));
    ts_tensor *mask = ts_logical_and(ts_gt(yk2, yk1), ts_gt(xk2, xk1));
    ts_tensor *inter = ts_where(mask, prod, ts_zeros_like(prod));
    ts_tensor *uni = ts_sub(
        ts_add(ts_mul(ts_sub(x2, x1), ts_sub(y2, y1)), ts_mul(ts_sub(x2g, x1g), ts_sub(y2g, y1g))),
        inter);
    ts_tensor *iou = ts_div(inter, ts_add_scalar(uni, eps));
    ts_tensor *area_c = ts_mul(ts_sub(ts_maximum(x2, x2g), ts_minimum(x1, x1g)),
                               ts_sub(ts_maximum(y2, y2g), ts_minimum(y1, y1g)));
    ts_tensor *giou = ts_sub(iou, ts_div(ts_sub(area_c, uni), ts_add_scalar(area_c, eps)));
    ts_tensor *loss = ts_rsub_scalar(giou, 1);
    ts_tensor *y;
    if (loss && r == TS_REDUCTION_MEAN && tsi_numel(loss->shape) == 0)
        y = ts_mul_scalar(ts_sum(loss), 0.0); /* torchvision: 0 * sum of the empty loss */
    else
        y = loss ? tsi_loss_reduce(loss, r) : NULL;
    y = y ? ts_keep(y) : NULL;
    ts_scope_end();
    return y;
}
