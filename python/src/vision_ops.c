/* vision_ops.c — tessera.vision.ops' C functions (issue 75): torchvision.ops' nms, batched_nms,
 * the box ops, roi_align and roi_pool over include/tessera/vision_ops.h. The Python side
 * (python/tessera/vision/ops/boxes.py, roi.py) takes torchvision's arguments and calls these. */
#include <string.h>

#include "tsp.h" /* first: tessera.h, which tessera/nn.h needs */

#include "tessera/nn.h"
#include "tessera/vision_ops.h"

/* a box format name -> ts_box_fmt; -1 with ValueError naming fn and the argument */
static int fmt_arg(const char *s, const char *fn, const char *arg) {
    if (!strcmp(s, "xyxy")) return TS_BOX_XYXY;
    if (!strcmp(s, "xywh")) return TS_BOX_XYWH;
    if (!strcmp(s, "cxcywh")) return TS_BOX_CXCYWH;
    PyErr_Format(PyExc_ValueError, "%s(): %s must be 'xyxy', 'xywh' or 'cxcywh', got '%s'", fn, arg,
                 s);
    return -1;
}

static PyObject *py_nms(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *ob, *os;
    double thr;
    ts_tensor *b, *s, *r;
    if (!PyArg_ParseTuple(args, "OOd:_vision_nms", &ob, &os, &thr) ||
        !(b = tsp_tensor_arg(ob, "nms", "boxes")) || !(s = tsp_tensor_arg(os, "nms", "scores")) ||
        tsp_enter())
        return NULL;
    TSP_NOGIL(r = ts_nms(b, s, thr));
    return tsp_wrap(r);
}

static PyObject *py_batched_nms(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *ob, *os, *oi;
    double thr;
    ts_tensor *b, *s, *i, *r;
    const char *fn = "batched_nms";
    if (!PyArg_ParseTuple(args, "OOOd:_vision_batched_nms", &ob, &os, &oi, &thr) ||
        !(b = tsp_tensor_arg(ob, fn, "boxes")) || !(s = tsp_tensor_arg(os, fn, "scores")) ||
        !(i = tsp_tensor_arg(oi, fn, "idxs")) || tsp_enter())
        return NULL;
    TSP_NOGIL(r = ts_batched_nms(b, s, i, thr));
    return tsp_wrap(r);
}

static PyObject *py_box_area(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *ob;
    const char *f = "xyxy";
    ts_tensor *b, *r;
    int fmt;
    if (!PyArg_ParseTuple(args, "O|s:_vision_box_area", &ob, &f) ||
        !(b = tsp_tensor_arg(ob, "box_area", "boxes")) ||
        (fmt = fmt_arg(f, "box_area", "fmt")) < 0 || tsp_enter())
        return NULL;
    TSP_NOGIL(r = ts_box_area(b, (ts_box_fmt)fmt));
    return tsp_wrap(r);
}

/* box_iou (fmt), generalized (no argument), distance and complete (eps) */
static PyObject *pair_op(PyObject *args, const char *fn, int kind) {
    PyObject *o1, *o2, *extra = NULL;
    ts_tensor *b1, *b2, *r = NULL;
    if (!PyArg_ParseTuple(args, "OO|O", &o1, &o2, &extra) ||
        !(b1 = tsp_tensor_arg(o1, fn, "boxes1")) || !(b2 = tsp_tensor_arg(o2, fn, "boxes2")))
        return NULL;
    int fmt = TS_BOX_XYXY;
    double eps = 1e-7;
    if (kind == 0 && extra) {
        const char *f = PyUnicode_Check(extra) ? PyUnicode_AsUTF8(extra) : NULL;
        if (!f) {
            if (!PyErr_Occurred()) PyErr_Format(PyExc_TypeError, "%s(): fmt must be a str", fn);
            return NULL;
        }
        if ((fmt = fmt_arg(f, fn, "fmt")) < 0) return NULL;
    } else if (kind >= 2 && extra && (eps = PyFloat_AsDouble(extra)) == -1.0 && PyErr_Occurred()) {
        return NULL;
    }
    if (tsp_enter()) return NULL;
    TSP_NOGIL(r = kind == 0   ? ts_box_iou(b1, b2, (ts_box_fmt)fmt)
                  : kind == 1 ? ts_generalized_box_iou(b1, b2)
                  : kind == 2 ? ts_distance_box_iou(b1, b2, eps)
                              : ts_complete_box_iou(b1, b2, eps));
    return tsp_wrap(r);
}
static PyObject *py_box_iou(PyObject *self, PyObject *args) {
    (void)self;
    return pair_op(args, "box_iou", 0);
}
static PyObject *py_generalized_box_iou(PyObject *self, PyObject *args) {
    (void)self;
    return pair_op(args, "generalized_box_iou", 1);
}
static PyObject *py_distance_box_iou(PyObject *self, PyObject *args) {
    (void)self;
    return pair_op(args, "distance_box_iou", 2);
}
static PyObject *py_complete_box_iou(PyObject *self, PyObject *args) {
    (void)self;
    return pair_op(args, "complete_box_iou", 3);
}

/* torchvision's reduction names -> *out; -1 with ValueError naming fn */
static int reduction_arg(const char *red, const char *fn, ts_reduction *out) {
    if (!strcmp(red, "none"))
        *out = TS_REDUCTION_NONE;
    else if (!strcmp(red, "mean"))
        *out = TS_REDUCTION_MEAN;
    else if (!strcmp(red, "sum"))
        *out = TS_REDUCTION_SUM;
    else
        return PyErr_Format(PyExc_ValueError,
                            "%s: invalid value for arg 'reduction': '%s'; supported reduction "
                            "modes: 'none', 'mean', 'sum'",
                            fn, red),
               -1;
    return 0;
}

/* _vision_generalized_box_iou_loss(boxes1, boxes2, reduction, eps) */
static PyObject *py_giou_loss(PyObject *self, PyObject *args) {
    (void)self;
    const char *fn = "generalized_box_iou_loss";
    PyObject *o1, *o2;
    const char *red;
    double eps;
    ts_tensor *b1, *b2, *r;
    if (!PyArg_ParseTuple(args, "OOsd:_vision_generalized_box_iou_loss", &o1, &o2, &red, &eps) ||
        !(b1 = tsp_tensor_arg(o1, fn, "boxes1")) || !(b2 = tsp_tensor_arg(o2, fn, "boxes2")))
        return NULL;
    ts_reduction rd;
    if (reduction_arg(red, fn, &rd) < 0 || tsp_enter()) return NULL;
    TSP_NOGIL(r = ts_generalized_box_iou_loss(b1, b2, rd, eps));
    return tsp_wrap(r);
}

/* _vision_sigmoid_focal_loss(inputs, targets, alpha, gamma, reduction) */
static PyObject *py_focal_loss(PyObject *self, PyObject *args) {
    (void)self;
    const char *fn = "sigmoid_focal_loss";
    PyObject *o1, *o2;
    const char *red;
    double alpha, gamma;
    ts_tensor *x, *t, *r;
    if (!PyArg_ParseTuple(args, "OOdds:_vision_sigmoid_focal_loss", &o1, &o2, &alpha, &gamma,
                          &red) ||
        !(x = tsp_tensor_arg(o1, fn, "inputs")) || !(t = tsp_tensor_arg(o2, fn, "targets")))
        return NULL;
    ts_reduction rd;
    if (reduction_arg(red, fn, &rd) < 0 || tsp_enter()) return NULL;
    TSP_NOGIL(r = ts_sigmoid_focal_loss(x, t, alpha, gamma, rd));
    return tsp_wrap(r);
}

static PyObject *py_box_convert(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *ob;
    const char *fi, *fo;
    ts_tensor *b, *r;
    int in, out;
    if (!PyArg_ParseTuple(args, "Oss:_vision_box_convert", &ob, &fi, &fo) ||
        !(b = tsp_tensor_arg(ob, "box_convert", "boxes")) ||
        (in = fmt_arg(fi, "box_convert", "in_fmt")) < 0 ||
        (out = fmt_arg(fo, "box_convert", "out_fmt")) < 0 || tsp_enter())
        return NULL;
    TSP_NOGIL(r = ts_box_convert(b, (ts_box_fmt)in, (ts_box_fmt)out));
    return tsp_wrap(r);
}

static PyObject *py_clip_boxes(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *ob;
    long long h, w;
    ts_tensor *b, *r;
    if (!PyArg_ParseTuple(args, "OLL:_vision_clip_boxes_to_image", &ob, &h, &w) ||
        !(b = tsp_tensor_arg(ob, "clip_boxes_to_image", "boxes")) || tsp_enter())
        return NULL;
    TSP_NOGIL(r = ts_clip_boxes_to_image(b, h, w));
    return tsp_wrap(r);
}

static PyObject *py_remove_small_boxes(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *ob;
    double m;
    ts_tensor *b, *r;
    if (!PyArg_ParseTuple(args, "Od:_vision_remove_small_boxes", &ob, &m) ||
        !(b = tsp_tensor_arg(ob, "remove_small_boxes", "boxes")) || tsp_enter())
        return NULL;
    TSP_NOGIL(r = ts_remove_small_boxes(b, m));
    return tsp_wrap(r);
}

static PyObject *py_boxes_to_rois(PyObject *self, PyObject *arg) {
    (void)self;
    PyObject *seq = PySequence_Fast(arg, "_vision_boxes_to_rois(): expected a list of Tensors");
    if (!seq) return NULL;
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (n > 1 << 20) {
        Py_DECREF(seq);
        PyErr_SetString(PyExc_ValueError, "_vision_boxes_to_rois(): too many tensors");
        return NULL;
    }
    ts_tensor **ts = PyMem_Malloc((size_t)(n ? n : 1) * sizeof *ts);
    if (!ts) {
        Py_DECREF(seq);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < n; i++)
        if (!(ts[i] = tsp_tensor_arg(PySequence_Fast_GET_ITEM(seq, i), "boxes_to_rois", "boxes"))) {
            PyMem_Free(ts);
            Py_DECREF(seq);
            return NULL;
        }
    ts_tensor *r = NULL;
    if (!tsp_enter()) TSP_NOGIL(r = ts_boxes_to_rois(ts, (int)n));
    PyMem_Free(ts);
    Py_DECREF(seq);
    if (PyErr_Occurred()) return NULL;
    return tsp_wrap(r);
}

static PyObject *py_roi_align(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *ox, *orr;
    long long oh, ow;
    double scale;
    int sr, aligned;
    ts_tensor *x, *rois, *r;
    if (!PyArg_ParseTuple(args, "OOLLdip:_vision_roi_align", &ox, &orr, &oh, &ow, &scale, &sr,
                          &aligned) ||
        !(x = tsp_tensor_arg(ox, "roi_align", "input")) ||
        !(rois = tsp_tensor_arg(orr, "roi_align", "boxes")) || tsp_enter())
        return NULL;
    TSP_NOGIL(r = ts_roi_align(x, rois, oh, ow, scale, sr, aligned != 0));
    return tsp_wrap(r);
}

static PyObject *py_roi_pool(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *ox, *orr;
    long long oh, ow;
    double scale;
    ts_tensor *x, *rois, *r;
    if (!PyArg_ParseTuple(args, "OOLLd:_vision_roi_pool", &ox, &orr, &oh, &ow, &scale) ||
        !(x = tsp_tensor_arg(ox, "roi_pool", "input")) ||
        !(rois = tsp_tensor_arg(orr, "roi_pool", "boxes")) || tsp_enter())
        return NULL;
    TSP_NOGIL(r = ts_roi_pool(x, rois, oh, ow, scale));
    return tsp_wrap(r);
}

static PyMethodDef vision_ops_methods[] = {
    {"_vision_nms", py_nms, METH_VARARGS, "_vision_nms(boxes, scores, iou_threshold)"},
    {"_vision_batched_nms", py_batched_nms, METH_VARARGS,
     "_vision_batched_nms(boxes, scores, idxs, iou_threshold)"},
    {"_vision_box_area", py_box_area, METH_VARARGS, "_vision_box_area(boxes, fmt='xyxy')"},
    {"_vision_box_iou", py_box_iou, METH_VARARGS, "_vision_box_iou(boxes1, boxes2, fmt='xyxy')"},
    {"_vision_generalized_box_iou", py_generalized_box_iou, METH_VARARGS,
     "_vision_generalized_box_iou(boxes1, boxes2)"},
    {"_vision_distance_box_iou", py_distance_box_iou, METH_VARARGS,
     "_vision_distance_box_iou(boxes1, boxes2, eps=1e-7)"},
    {"_vision_complete_box_iou", py_complete_box_iou, METH_VARARGS,
     "_vision_complete_box_iou(boxes1, boxes2, eps=1e-7)"},
    {"_vision_sigmoid_focal_loss", py_focal_loss, METH_VARARGS,
     "_vision_sigmoid_focal_loss(inputs, targets, alpha, gamma, reduction)"},
    {"_vision_generalized_box_iou_loss", py_giou_loss, METH_VARARGS,
     "_vision_generalized_box_iou_loss(boxes1, boxes2, reduction, eps)"},
    {"_vision_box_convert", py_box_convert, METH_VARARGS,
     "_vision_box_convert(boxes, in_fmt, out_fmt)"},
    {"_vision_clip_boxes_to_image", py_clip_boxes, METH_VARARGS,
     "_vision_clip_boxes_to_image(boxes, height, width)"},
    {"_vision_remove_small_boxes", py_remove_small_boxes, METH_VARARGS,
     "_vision_remove_small_boxes(boxes, min_size)"},
    {"_vision_boxes_to_rois", py_boxes_to_rois, METH_O, "_vision_boxes_to_rois(list of boxes)"},
    {"_vision_roi_align", py_roi_align, METH_VARARGS,
     "_vision_roi_align(input, rois, out_h, out_w, spatial_scale, sampling_ratio, aligned)"},
    {"_vision_roi_pool", py_roi_pool, METH_VARARGS,
     "_vision_roi_pool(input, rois, out_h, out_w, spatial_scale)"},
    {NULL, NULL, 0, NULL},
};

int tsp_init_vision_ops(PyObject *m) { return PyModule_AddFunctions(m, vision_ops_methods); }
