/* vision_boxes.c — torchvision.ops' box functions (issue 75): nms and batched_nms over the
 * backend's nms slot (kern_nms.c, cuda_nms.cu), and the box ops as compositions of public ops in
 * torchvision's order of operations (boxes.py, _box_convert.py), so that they are differentiable
 * where torchvision's are and give its results. Boxes are [..., 4]. */
#include <math.h>
#include <stdlib.h>

#include "autograd/autograd.h"
#include "core/capture.h"

/* ------------------------------------------------------------------ shared checks */
static bool check_boxes(const char *op, ts_tensor *b, const char *name) {
    if (!tsi_check_input(op, b, name)) return false;
    if (b->shape.ndim < 1 || b->shape.dims[b->shape.ndim - 1] != 4)
        return tsi_error_set(TS_ERR_SHAPE, "%s: %s must have shape [..., 4], got %s", op, name,
                             tsi_desc(b)),
               false;
    if (b->dtype == TS_BOOL || tsi_is_complex(b->dtype))
        return tsi_error_set(TS_ERR_DTYPE, "%s: %s must be a real number tensor, got %s", op, name,
                             tsi_desc(b)),
               false;
    return true;
}

static bool check_fmt(const char *op, ts_box_fmt f, const char *name) {
    if ((unsigned)f <= TS_BOX_CXCYWH) return true;
    return tsi_error_set(TS_ERR_ARG,
                         "%s: %s must be TS_BOX_XYXY, TS_BOX_XYWH or TS_BOX_CXCYWH, got %d", op,
                         name, (int)f),
           false;
}

static bool check_pair(const char *op, ts_tensor *b1, ts_tensor *b2) {
    if (!check_boxes(op, b1, "boxes1") || !check_boxes(op, b2, "boxes2")) return false;
    ts_device dev;
    ts_tensor *both[2] = {b1, b2};
    if (!tsi_same_device(op, both, 2, false, &dev)) return false;
    if (b1->shape.ndim < 2 || b2->shape.ndim < 2)
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s: boxes1 and boxes2 must have shape [..., N, 4] and [..., M, 4], "
                             "got %s and %s",
                             op, tsi_shape_str(b1->shape), tsi_shape_str(b2->shape)),
               false;
    return true;
}

/* the result kept in the caller's scope and the op's own scope closed; NULL on failure */
static ts_tensor *finish(ts_tensor *r) {
    r = r ? ts_keep(r) : NULL;
    ts_scope_end();
    return r;
}

/* torchvision's _upcast: float16 / bfloat16 -> float32, integers narrower than int32 -> int32 */
static ts_tensor *upcast(ts_tensor *t) {
    if (!t) return NULL;
    if (tsi_is_float(t->dtype))
        return t->dtype == TS_F16 || t->dtype == TS_BF16 ? ts_to_dtype(t, TS_F32) : t;
    return t->dtype == TS_I32 || t->dtype == TS_I64 ? t : ts_to_dtype(t, TS_I32);
}

static ts_tensor *col(ts_tensor *b, int64_t i) { return ts_select(b, -1, i); }
/* b[..., None, lo:lo+2] (the first set, against every box of the second) */
static ts_tensor *pair_a(ts_tensor *b, int64_t lo) {
    return ts_unsqueeze(ts_narrow(b, -1, lo, 2), -2);
}
/* b[..., None, :, lo:lo+2] */
static ts_tensor *pair_b(ts_tensor *b, int64_t lo) {
    return ts_unsqueeze(ts_narrow(b, -1, lo, 2), -3);
}

/* ------------------------------------------------------------------ areas, IoUs */
static ts_tensor *area_of(ts_tensor *boxes, ts_box_fmt fmt) {
    ts_tensor *b = upcast(boxes);
    if (fmt == TS_BOX_XYXY)
        return ts_mul(ts_sub(col(b, 2), col(b, 0)), ts_sub(col(b, 3), col(b, 1)));
    return ts_mul(col(b, 2), col(b, 3));
}

ts_tensor *ts_box_area(ts_tensor *boxes, ts_box_fmt fmt) {
    const char *op = "box_area";
    tsi_init();
    if (!check_boxes(op, boxes, "boxes") || !check_fmt(op, fmt, "fmt")) return NULL;
    ts_scope_begin();
    return finish(area_of(boxes, fmt));
}

/* torchvision's _box_inter_union: intersections and unions [..., N, M] */
static void inter_union(ts_tensor *b1, ts_tensor *b2, ts_box_fmt fmt, ts_tensor **inter,
                        ts_tensor **uni) {
    ts_tensor *area1 = area_of(b1, fmt), *area2 = area_of(b2, fmt), *lt, *rb;
    if (fmt == TS_BOX_XYXY) {
        lt = ts_maximum(pair_a(b1, 0), pair_b(b2, 0));
        rb = ts_minimum(pair_a(b1, 2), pair_b(b2, 2));
    } else if (fmt == TS_BOX_XYWH) {
        lt = ts_maximum(pair_a(b1, 0), pair_b(b2, 0));
        rb = ts_minimum(ts_add(pair_a(b1, 0), pair_a(b1, 2)), ts_add(pair_b(b2, 0), pair_b(b2, 2)));
    } else {
        ts_tensor *h1 = ts_div_scalar(pair_a(b1, 2), 2), *h2 = ts_div_scalar(pair_b(b2, 2), 2);
        lt = ts_maximum(ts_sub(pair_a(b1, 0), h1), ts_sub(pair_b(b2, 0), h2));
        rb = ts_minimum(ts_add(pair_a(b1, 0), h1), ts_add(pair_b(b2, 0), h2));
    }
    ts_tensor *wh = ts_clamp_min(upcast(ts_sub(rb, lt)), 0);
    *inter = ts_mul(col(wh, 0), col(wh, 1));
    *uni = ts_sub(ts_add(ts_unsqueeze(area1, -1), ts_unsqueeze(area2, -2)), *inter);
}

static ts_tensor *iou_of(ts_tensor *b1, ts_tensor *b2, ts_box_fmt fmt) {
    ts_tensor *inter, *uni;
    inter_union(b1, b2, fmt, &inter, &uni);
    return ts_div(inter, uni);
}

ts_tensor *ts_box_iou(ts_tensor *boxes1, ts_tensor *boxes2, ts_box_fmt fmt) {
    const char *op = "box_iou";
    tsi_init();
    if (!check_pair(op, boxes1, boxes2) || !check_fmt(op, fmt, "fmt")) return NULL;
    ts_scope_begin();
    return finish(iou_of(boxes1, boxes2, fmt));
}

/* the smallest enclosing boxes' sides [..., N, M, 2] */
static ts_tensor *enclosing_wh(ts_tensor *b1, ts_tensor *b2) {
    ts_tensor *lti = ts_minimum(pair_a(b1, 0), pair_b(b2, 0));
    ts_tensor *rbi = ts_maximum(pair_a(b1, 2), pair_b(b2, 2));
    return ts_clamp_min(upcast(ts_sub(rbi, lti)), 0);
}

ts_tensor *ts_generalized_box_iou(ts_tensor *boxes1, ts_tensor *boxes2) {
    const char *op = "generalized_box_iou";
    tsi_init();
    if (!check_pair(op, boxes1, boxes2)) return NULL;
    ts_scope_begin();
    ts_tensor *inter, *uni;
    inter_union(boxes1, boxes2, TS_BOX_XYXY, &inter, &uni);
    ts_tensor *iou = ts_div(inter, uni);
    ts_tensor *whi = enclosing_wh(boxes1, boxes2);
    ts_tensor *areai = ts_mul(col(whi, 0), col(whi, 1));
    return finish(ts_sub(iou, ts_div(ts_sub(areai, uni), areai)));
}

/* torchvision's _box_diou_iou on upcast boxes: the distance IoU, and the IoU in *iou */
static ts_tensor *diou_iou(ts_tensor *b1, ts_tensor *b2, double eps, ts_tensor **iou) {
    *iou = iou_of(b1, b2, TS_BOX_XYXY);
    ts_tensor *whi = enclosing_wh(b1, b2);
    ts_tensor *w0 = col(whi, 0), *w1 = col(whi, 1);
    ts_tensor *diag = ts_add_scalar(ts_add(ts_mul(w0, w0), ts_mul(w1, w1)), eps);
    ts_tensor *xp = ts_div_scalar(ts_add(col(b1, 0), col(b1, 2)), 2);
    ts_tensor *yp = ts_div_scalar(ts_add(col(b1, 1), col(b1, 3)), 2);
    ts_tensor *xg = ts_div_scalar(ts_add(col(b2, 0), col(b2, 2)), 2);
    ts_tensor *yg = ts_div_scalar(ts_add(col(b2, 1), col(b2, 3)), 2);
    ts_tensor *dx = upcast(ts_sub(ts_unsqueeze(xp, -1), ts_unsqueeze(xg, -2)));
    ts_tensor *dy = upcast(ts_sub(ts_unsqueeze(yp, -1), ts_unsqueeze(yg, -2)));
    ts_tensor *centers = ts_add(ts_mul(dx, dx), ts_mul(dy, dy));
    return ts_sub(*iou, ts_div(centers, diag));
}

ts_tensor *ts_distance_box_iou(ts_tensor *boxes1, ts_tensor *boxes2, double eps) {
    const char *op = "distance_box_iou";
    tsi_init();
    if (!check_pair(op, boxes1, boxes2)) return NULL;
    ts_scope_begin();
    ts_tensor *iou;
    return finish(diou_iou(upcast(boxes1), upcast(boxes2), eps, &iou));
}

ts_tensor *ts_complete_box_iou(ts_tensor *boxes1, ts_tensor *boxes2, double eps) {
    const char *op = "complete_box_iou";
    tsi_init();
    if (!check_pair(op, boxes1, boxes2)) return NULL;
    ts_scope_begin();
    ts_tensor *b1 = upcast(boxes1), *b2 = upcast(boxes2), *iou;
    ts_tensor *diou = diou_iou(b1, b2, eps, &iou);
    ts_tensor *w_pred = ts_unsqueeze(ts_sub(col(b1, 2), col(b1, 0)), -1);
    ts_tensor *h_pred = ts_unsqueeze(ts_sub(col(b1, 3), col(b1, 1)), -1);
    ts_tensor *w_gt = ts_unsqueeze(ts_sub(col(b2, 2), col(b2, 0)), -2);
    ts_tensor *h_gt = ts_unsqueeze(ts_sub(col(b2, 3), col(b2, 1)), -2);
    ts_tensor *d = ts_sub(ts_atan(ts_div(w_pred, h_pred)), ts_atan(ts_div(w_gt, h_gt)));
    const double pi = 3.14159265358979323846;
    ts_tensor *v = ts_mul_scalar(ts_mul(d, d), 4 / (pi * pi));
    ts_no_grad_begin(); /* alpha carries no gradient (torchvision's torch.no_grad()) */
    ts_tensor *alpha = ts_div(v, ts_add_scalar(ts_add(ts_rsub_scalar(iou, 1), v), eps));
    ts_no_grad_end();
    return finish(ts_sub(diou, ts_mul(alpha, v)));
}

/* ------------------------------------------------------------------ formats, clipping */
static ts_tensor *stack4(ts_tensor *a, ts_tensor *b, ts_tensor *c, ts_tensor *d) {
    ts_tensor *parts[4] = {a, b, c, d};
    return ts_stack(parts, 4, -1);
}

static ts_tensor *to_xyxy(ts_tensor *b, ts_box_fmt f) {
    if (f == TS_BOX_XYWH)
        return stack4(col(b, 0), col(b, 1), ts_add(col(b, 0), col(b, 2)),
                      ts_add(col(b, 1), col(b, 3)));
    ts_tensor *hw = ts_mul_scalar(col(b, 2), 0.5), *hh = ts_mul_scalar(col(b, 3), 0.5);
    return stack4(ts_sub(col(b, 0), hw), ts_sub(col(b, 1), hh), ts_add(col(b, 0), hw),
                  ts_add(col(b, 1), hh));
}

static ts_tensor *from_xyxy(ts_tensor *b, ts_box_fmt f) {
    ts_tensor *w = ts_sub(col(b, 2), col(b, 0)), *h = ts_sub(col(b, 3), col(b, 1));
    if (f == TS_BOX_XYWH) return stack4(col(b, 0), col(b, 1), w, h);
    return stack4(ts_div_scalar(ts_add(col(b, 0), col(b, 2)), 2),
                  ts_div_scalar(ts_add(col(b, 1), col(b, 3)), 2), w, h);
}

ts_tensor *ts_box_convert(ts_tensor *boxes, ts_box_fmt in_fmt, ts_box_fmt out_fmt) {
    const char *op = "box_convert";
    tsi_init();
    if (!check_boxes(op, boxes, "boxes") || !check_fmt(op, in_fmt, "in_fmt") ||
        !check_fmt(op, out_fmt, "out_fmt"))
        return NULL;
    ts_scope_begin();
    if (in_fmt == out_fmt) return finish(ts_clone(boxes));
    ts_tensor *xyxy = in_fmt == TS_BOX_XYXY ? boxes : to_xyxy(boxes, in_fmt);
    return finish(out_fmt == TS_BOX_XYXY ? xyxy : from_xyxy(xyxy, out_fmt));
}

ts_tensor *ts_clip_boxes_to_image(ts_tensor *boxes, int64_t height, int64_t width) {
    const char *op = "clip_boxes_to_image";
    tsi_init();
    if (!check_boxes(op, boxes, "boxes")) return NULL;
    if (height < 0 || width < 0)
        return tsi_error_set(TS_ERR_ARG, "%s: size must be (height, width) >= 0, got (%lld, %lld)",
                             op, (long long)height, (long long)width),
               NULL;
    ts_scope_begin();
    const int last = boxes->shape.ndim - 1;
    ts_tensor *bx = ts_clamp(ts_slice(boxes, last, 0, 4, 2), 0, (double)width);
    ts_tensor *by = ts_clamp(ts_slice(boxes, last, 1, 4, 2), 0, (double)height);
    ts_tensor *parts[2] = {bx, by};
    return finish(ts_reshape(ts_stack(parts, 2, last + 1), boxes->shape));
}

ts_tensor *ts_remove_small_boxes(ts_tensor *boxes, double min_size) {
    const char *op = "remove_small_boxes";
    tsi_init();
    if (!check_boxes(op, boxes, "boxes")) return NULL;
    ts_scope_begin();
    ts_tensor *ws = ts_sub(col(boxes, 2), col(boxes, 0)),
              *hs = ts_sub(col(boxes, 3), col(boxes, 1));
    ts_tensor *keep = ts_logical_and(ts_ge_scalar(ws, min_size), ts_ge_scalar(hs, min_size));
    if (keep && keep->shape.ndim == 0) keep = ts_unsqueeze(keep, 0);
    return finish(ts_select(ts_nonzero(keep), 1, 0));
}

ts_tensor *ts_boxes_to_rois(ts_tensor *const *boxes, int n) {
    const char *op = "boxes_to_rois";
    tsi_init();
    if (!boxes || n < 1)
        return tsi_error_set(TS_ERR_ARG, "%s: expected a list of at least one boxes tensor, got %d",
                             op, n),
               NULL;
    for (int i = 0; i < n; i++) {
        if (!tsi_check_input(op, boxes[i], "boxes")) return NULL;
        if (boxes[i]->shape.ndim != 2 || boxes[i]->shape.dims[1] != 4)
            return tsi_error_set(TS_ERR_SHAPE,
                                 "%s: boxes[%d] must have shape [K, 4] (x1, y1, x2, y2), got %s",
                                 op, i, tsi_desc(boxes[i])),
                   NULL;
        if (boxes[i]->dtype != boxes[0]->dtype)
            return tsi_error_set(TS_ERR_DTYPE, "%s: boxes[%d] is %s, boxes[0] %s: one dtype", op, i,
                                 tsi_desc(boxes[i]), ts_dtype_name(boxes[0]->dtype)),
                   NULL;
    }
    ts_device dev;
    if (!tsi_same_device(op, (ts_tensor *const *)boxes, n, false, &dev)) return NULL;
    ts_scope_begin();
    ts_tensor **rows = calloc((size_t)n, sizeof *rows);
    if (!rows) return tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op), finish(NULL);
    for (int i = 0; i < n; i++) {
        ts_tensor *id = ts_full(TS_SHAPE(boxes[i]->shape.dims[0], 1), (double)i,
                                (ts_opts){.dtype = boxes[i]->dtype, .device = dev});
        ts_tensor *pair[2] = {id, boxes[i]};
        rows[i] = ts_cat(pair, 2, 1);
    }
    ts_tensor *r = ts_cat(rows, n, 0);
    free(rows);
    return finish(r);
}

/* ------------------------------------------------------------------ nms */
static bool check_nms(const char *op, ts_tensor *boxes, ts_tensor *scores, ts_tensor *idxs,
                      ts_device *dev) {
    if (!tsi_check_input(op, boxes, "boxes") || !tsi_check_input(op, scores, "scores") ||
        (idxs && !tsi_check_input(op, idxs, "idxs")))
        return false;
    ts_tensor *all[3] = {boxes, scores, idxs};
    if (!tsi_same_device(op, all, idxs ? 3 : 2, false, dev)) return false;
    if (boxes->shape.ndim != 2 || boxes->shape.dims[1] != 4)
        return tsi_error_set(TS_ERR_SHAPE, "%s: boxes must have shape [N, 4], got %s", op,
                             tsi_desc(boxes)),
               false;
    const int64_t n = boxes->shape.dims[0];
    if (scores->shape.ndim != 1 || scores->shape.dims[0] != n)
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s: scores must have shape [%lld] (one per box), got %s", op,
                             (long long)n, tsi_desc(scores)),
               false;
    if (idxs && (idxs->shape.ndim != 1 || idxs->shape.dims[0] != n))
        return tsi_error_set(TS_ERR_SHAPE, "%s: idxs must have shape [%lld] (one per box), got %s",
                             op, (long long)n, tsi_desc(idxs)),
               false;
    if (boxes->dtype != TS_F32 && boxes->dtype != TS_F64)
        return tsi_error_set(TS_ERR_DTYPE, "%s: boxes must be float32 or float64, got %s", op,
                             tsi_desc(boxes)),
               false;
    if (scores->dtype != boxes->dtype)
        return tsi_error_set(TS_ERR_DTYPE, "%s: scores must have the boxes' dtype %s, got %s", op,
                             ts_dtype_name(boxes->dtype), tsi_desc(scores)),
               false;
    if (idxs && !tsi_is_int(idxs->dtype))
        return tsi_error_set(TS_ERR_DTYPE, "%s: idxs must be an integer tensor, got %s", op,
                             tsi_desc(idxs)),
               false;
    if (dev->type == TS_META)
        return tsi_error_set(TS_ERR_UNSUPPORTED,
                             "%s: the number of boxes kept depends on their values, which a meta "
                             "tensor has none of",
                             op),
               false;
    if (tsi_capturing_on(*dev))
        return tsi_error_set(TS_ERR_UNSUPPORTED,
                             "%s: the number of boxes kept is read on the host, which a captured "
                             "step cannot do",
                             op),
               false;
    return true;
}

static ts_tensor *nms_run(const char *op, ts_tensor *boxes, ts_tensor *scores, ts_tensor *idxs,
                          double thr) {
    tsi_init();
    ts_device dev;
    if (!check_nms(op, boxes, scores, idxs, &dev)) return NULL;
    if (isnan(thr))
        return tsi_error_set(TS_ERR_ARG, "%s: iou_threshold must be a number, got nan", op), NULL;
    const ts_backend *be = boxes->storage->be;
    if (!be->nms)
        return tsi_error_set(TS_ERR_UNSUPPORTED, "%s: the backend of %s has no kernel", op,
                             ts_device_str(dev)),
               NULL;
    const int64_t n = boxes->shape.dims[0];
    ts_scope_begin();
    ts_no_grad_begin();
    ts_tensor *r = NULL;
    if (n == 0) {
        r = ts_empty(TS_SHAPE(0), (ts_opts){.dtype = TS_I64, .device = dev});
    } else {
        ts_tensor *order = ts_argsort(scores, 0, true, true);
        ts_tensor *sb = ts_contiguous(ts_index_select(boxes, 0, order));
        ts_tensor *cls =
            idxs ? ts_contiguous(ts_to_dtype(ts_index_select(idxs, 0, order), TS_I64)) : NULL;
        ts_tensor *keep = tsi_own(tsi_new(op, TS_SHAPE(n), TS_BOOL, dev));
        if (order && sb && keep && (!idxs || cls)) {
            const ts_kview kk = tsi_kview(keep), kb = tsi_kview(sb);
            ts_kview kc = {0};
            if (cls) kc = tsi_kview(cls);
            if (!be->nms(be, tsi_dev_index(keep), &kk, &kb, &kc, thr)) {
                if (ts_error() == TS_OK) tsi_kernel_oom(op, 0);
            } else {
                r = ts_masked_select(order, keep);
            }
        }
    }
    ts_no_grad_end();
    return finish(r);
}

ts_tensor *ts_nms(ts_tensor *boxes, ts_tensor *scores, double iou_threshold) {
    return nms_run("nms", boxes, scores, NULL, iou_threshold);
}

ts_tensor *ts_batched_nms(ts_tensor *boxes, ts_tensor *scores, ts_tensor *idxs,
                          double iou_threshold) {
    if (!idxs) {
        tsi_init();
        return tsi_error_set(TS_ERR_ARG, "batched_nms: idxs must be a tensor, got NULL"), NULL;
    }
    return nms_run("batched_nms", boxes, scores, idxs, iou_threshold);
}
