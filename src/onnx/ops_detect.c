/* ops_detect.c — ONNX's detection operators: NonMaxSuppression (the greedy algorithm on the host,
 * whose result size depends on the data) and RoiAlign (sampling positions and weights computed on
 * the host from the ROIs, the input gathered and weighted on its device). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "onnx/onnx_internal.h"

/* ------------------------------------------------------------------ NonMaxSuppression */
/* NonMaxSuppression's result size depends on the data (which boxes survive), which only the host
 * can size the result from: boxes and scores are read to the host (f32, as the reference computes
 * in the inputs' float32) and the greedy algorithm of ONNX's reference runs there. */
static float *floats_on_host(const tso_node *n, ts_tensor *x) {
    int64_t count = ts_numel(x);
    float *v = malloc((size_t)(count > 0 ? count : 1) * sizeof *v);
    if (!v) return tso_fail(n, TS_ERR_OOM, "out of host memory"), NULL;
    ts_tensor *h = ts_to_dtype(ts_to(x, ts_cpu()), TS_F32);
    if (!h || ts_copy_to_host(h, v, (size_t)count * sizeof *v) != TS_OK) {
        free(v);
        tso_fail_pending(n);
        return NULL;
    }
    return v;
}

typedef struct nms_box {
    float lo[2], hi[2];
} nms_box; /* y then x extents */

static float nms_min(float a, float b) { return a < b ? a : b; }
static float nms_max(float a, float b) { return a < b ? b : a; }

static nms_box nms_corners(const float *b, bool center) {
    nms_box r;
    for (int d = 0; d < 2; d++) {
        if (center) { /* [x_center, y_center, width, height] */
            float half = b[3 - d] / 2;
            r.lo[d] = b[1 - d] - half;
            r.hi[d] = b[1 - d] + half;
        } else { /* [y1, x1, y2, x2], either corner first */
            r.lo[d] = nms_min(b[d], b[d + 2]);
            r.hi[d] = nms_max(b[d], b[d + 2]);
        }
    }
    return r;
}

/* the reference's suppress_by_iou: strict comparisons, degenerate boxes never suppress */
static bool nms_suppress(const float *b1, const float *b2, bool center, float iou) {
    nms_box p = nms_corners(b1, center), q = nms_corners(b2, center);
    float ext[2];
    for (int d = 1; d >= 0; d--) { /* x first, as the reference */
        float lo = nms_max(p.lo[d], q.lo[d]), hi = nms_min(p.hi[d], q.hi[d]);
        if (hi <= lo) return false;
        ext[d] = hi - lo;
    }
    float inter = ext[1] * ext[0];
    if (inter <= 0) return false;
    float a1 = (p.hi[1] - p.lo[1]) * (p.hi[0] - p.lo[0]);
    float a2 = (q.hi[1] - q.lo[1]) * (q.hi[0] - q.lo[0]);
    float uni = a1 + a2 - inter;
    if (a1 <= 0 || a2 <= 0 || uni <= 0) return false;
    return inter / uni > iou;
}

typedef struct nms_cand {
    float score;
    int64_t idx;
} nms_cand;

/* the reference's order: score descending, then box index ascending */
static int nms_cmp(const void *a, const void *b) {
    const nms_cand *x = a, *y = b;
    if (x->score != y->score) return x->score > y->score ? -1 : 1;
    return (x->idx > y->idx) - (x->idx < y->idx);
}

/* an optional scalar input; false when absent or empty (the reference's "not given") */
static bool nms_opt(const tso_node *n, ts_tensor *t, double *v, bool *ok, const char *what) {
    *ok = true;
    if (!t || ts_numel(t) == 0) return false;
    *ok = tso_read_scalar(n, t, v, what);
    return *ok;
}

typedef struct nms_params {
    int64_t max_out;
    float iou, score;
    bool has_score, center;
} nms_params;

/* appends the selected boxes of one (batch, class) to sel (rows of 3) */
static int64_t nms_class(const float *boxes, const float *scores, int64_t nb, nms_params p,
                         nms_cand *cand, int64_t *chosen, int64_t *sel, int64_t batch,
                         int64_t cls) {
    int64_t m = 0, k = 0, rows = 0;
    for (int64_t i = 0; i < nb; i++)
        if (!p.has_score || scores[i] > p.score) cand[m++] = (nms_cand){scores[i], i};
    qsort(cand, (size_t)m, sizeof *cand, nms_cmp);
    for (int64_t i = 0; i < m && k < p.max_out; i++) {
        bool keep = true;
        for (int64_t j = 0; j < k && keep; j++)
            keep = !nms_suppress(boxes + 4 * cand[i].idx, boxes + 4 * chosen[j], p.center, p.iou);
        if (!keep) continue;
        chosen[k++] = cand[i].idx;
        sel[3 * rows] = batch;
        sel[3 * rows + 1] = cls;
        sel[3 * rows + 2] = cand[i].idx;
        rows++;
    }
    return rows;
}

static bool nms_params_of(const tso_node *n, ts_tensor *const *in, nms_params *p) {
    double v;
    bool ok;
    *p = (nms_params){.center = tso_attr_int(n, "center_point_box", 0) != 0};
    if (in[2] && ts_numel(in[2]) > 0) {
        int64_t m;
        if (!tso_read_int(n, in[2], &m, "max_output_boxes_per_class")) return false;
        p->max_out = m > 0 ? m : 0;
    }
    if (nms_opt(n, in[3], &v, &ok, "iou_threshold")) p->iou = (float)v;
    if (!ok) return false;
    if (nms_opt(n, in[4], &v, &ok, "score_threshold")) p->score = (float)v, p->has_score = true;
    return ok;
}

static bool check_nms(const tso_node *n) {
    int64_t cpb = tso_attr_int(n, "center_point_box", 0);
    if (cpb != 0 && cpb != 1)
        return tso_fail(n, TS_ERR_UNSUPPORTED, "center_point_box %lld (must be 0 or 1)",
                        (long long)cpb);
    return true;
}

TSO_RUN(run_nms) {
    ts_shape bs = ts_shape_of(in[0]), ss = ts_shape_of(in[1]);
    if (bs.ndim != 3 || bs.dims[2] != 4 || ss.ndim != 3 || ss.dims[0] != bs.dims[0] ||
        ss.dims[2] != bs.dims[1])
        return tso_fail(n, TS_ERR_SHAPE, "boxes %s and scores %s must be [B, N, 4] and [B, C, N]",
                        tsi_desc(in[0]), tsi_desc(in[1]));
    nms_params p;
    if (!nms_params_of(n, in, &p)) return false;
    int64_t nbatch = bs.dims[0], ncls = ss.dims[1], nb = bs.dims[1];
    float *boxes = floats_on_host(n, in[0]);
    float *scores = boxes ? floats_on_host(n, in[1]) : NULL;
    int64_t cap = nbatch * ncls * (p.max_out < nb ? p.max_out : nb);
    nms_cand *cand = malloc((size_t)(nb > 0 ? nb : 1) * sizeof *cand);
    int64_t *chosen = malloc((size_t)(nb > 0 ? nb : 1) * sizeof *chosen);
    int64_t *sel = malloc((size_t)(cap > 0 ? 3 * cap : 1) * sizeof *sel);
    bool ok = boxes && scores;
    if (ok && (!cand || !chosen || !sel)) ok = tso_fail(n, TS_ERR_OOM, "out of host memory");
    int64_t rows = 0;
    for (int64_t b = 0; ok && b < nbatch; b++)
        for (int64_t k = 0; k < ncls; k++)
            rows += nms_class(boxes + 4 * nb * b, scores + nb * (b * ncls + k), nb, p, cand, chosen,
                              sel + 3 * rows, b, k);
    if (ok)
        out[0] = ts_from_data(TS_SHAPE(rows, 3), TS_I64, sel,
                              (ts_opts){.dtype = TS_I64, .device = c->device});
    free(boxes);
    free(scores);
    free(cand);
    free(chosen);
    free(sel);
    return (ok && out[0]) || tso_fail_pending(n);
}

/* ------------------------------------------------------------------ RoiAlign */
/* The sampling grid (how many bilinear samples a bin averages, where they fall) depends on the
 * ROIs' values, so the ROIs and batch indices are read to the host, which computes each sample's
 * four flattened H*W positions and weights as ONNX's reference does (op_roi_align.py); the input
 * stays on the device and is gathered and weighted there (differentiable in X). */
typedef struct roi_cfg {
    int64_t h, w, ph, pw, sampling;
    double scale;
    bool half_pixel, max_mode;
} roi_cfg;

static bool check_roi_align(const tso_node *n) {
    char buf[32];
    const char *mode = tso_attr_string(n, "mode", "avg", buf, sizeof buf);
    if (strcmp(mode, "avg") && strcmp(mode, "max"))
        return tso_fail(n, TS_ERR_UNSUPPORTED, "mode '%s'", mode);
    const char *ct =
        tso_attr_string(n, "coordinate_transformation_mode", "half_pixel", buf, sizeof buf);
    if (strcmp(ct, "half_pixel") && strcmp(ct, "output_half_pixel"))
        return tso_fail(n, TS_ERR_UNSUPPORTED, "coordinate_transformation_mode '%s'", ct);
    if (tso_attr_int(n, "output_height", 1) < 1 || tso_attr_int(n, "output_width", 1) < 1)
        return tso_fail(n, TS_ERR_UNSUPPORTED, "output_height and output_width must be >= 1");
    return true;
}

/* one sample at (y, x): pos[k * stride] and wt[k * stride] for the four corners */
static void roi_sample(const roi_cfg *g, double y, double x, int64_t *pos, double *wt,
                       int64_t stride) {
    for (int k = 0; k < 4; k++) pos[k * stride] = 0, wt[k * stride] = 0;
    if (y < -1.0 || y > (double)g->h || x < -1.0 || x > (double)g->w) return;
    y = y > 0 ? y : 0;
    x = x > 0 ? x : 0;
    int64_t yl = (int64_t)y, xl = (int64_t)x, yh, xh;
    if (yl >= g->h - 1)
        yh = yl = g->h - 1, y = (double)yl;
    else
        yh = yl + 1;
    if (xl >= g->w - 1)
        xh = xl = g->w - 1, x = (double)xl;
    else
        xh = xl + 1;
    double ly = y - (double)yl, lx = x - (double)xl, hy = 1 - ly, hx = 1 - lx;
    int64_t p[4] = {yl * g->w + xl, yl * g->w + xh, yh * g->w + xl, yh * g->w + xh};
    double w[4] = {hy * hx, hy * lx, ly * hx, ly * lx};
    for (int k = 0; k < 4; k++) pos[k * stride] = p[k], wt[k * stride] = w[k];
}

/* one ROI's output [1, C, ph, pw] from xb [C, H*W] */
static ts_tensor *roi_one(const tso_node *n, const roi_cfg *g, ts_tensor *xb, const float *roi) {
    double off = g->half_pixel ? 0.5 : 0.0;
    double sw = roi[0] * g->scale - off, sh = roi[1] * g->scale - off;
    double rw = roi[2] * g->scale - off - sw, rh = roi[3] * g->scale - off - sh;
    if (!g->half_pixel) rw = rw > 1 ? rw : 1, rh = rh > 1 ? rh : 1;
    double bh = rh / (double)g->ph, bw = rw / (double)g->pw;
    int64_t gh = g->sampling > 0 ? g->sampling : (int64_t)ceil(bh);
    int64_t gw = g->sampling > 0 ? g->sampling : (int64_t)ceil(bw);
    int64_t count = gh * gw > 1 ? gh * gw : 1, cells = g->ph * g->pw;
    int64_t per = gh * gw > 0 ? gh * gw : 1; /* an empty grid: one zero-weight sample */
    int64_t total = cells * per;
    int64_t *pos = malloc((size_t)(4 * total) * sizeof *pos);
    double *wt = malloc((size_t)(4 * total) * sizeof *wt);
    if (!pos || !wt) {
        free(pos);
        free(wt);
        return tso_fail(n, TS_ERR_OOM, "out of host memory"), NULL;
    }
    for (int64_t i = 0; i < 4 * total; i++) pos[i] = 0, wt[i] = 0;
    for (int64_t ph = 0; ph < g->ph; ph++)
        for (int64_t pw = 0; pw < g->pw; pw++)
            for (int64_t iy = 0; iy < gh; iy++)
                for (int64_t ix = 0; ix < gw; ix++) {
                    double y = sh + (double)ph * bh + ((double)iy + 0.5) * bh / (double)gh;
                    double x = sw + (double)pw * bw + ((double)ix + 0.5) * bw / (double)gw;
                    int64_t at = (ph * g->pw + pw) * per + iy * gw + ix;
                    roi_sample(g, y, x, pos + at, wt + at, total);
                }
    ts_device dev = ts_device_of(xb);
    ts_tensor *idx = ts_from_data(TS_SHAPE(4 * total), TS_I64, pos, tso_opts_of(xb, TS_I64));
    ts_tensor *w = ts_from_data(TS_SHAPE(4, cells, per), TS_F64, wt,
                                (ts_opts){.dtype = TS_F64, .device = dev});
    free(pos);
    free(wt);
    int64_t ch = ts_shape_of(xb).dims[0];
    ts_tensor *v = ts_reshape(ts_index_select(xb, 1, idx), TS_SHAPE(ch, 4, cells, per));
    v = ts_mul(v, ts_to_dtype(w, ts_dtype_of(xb)));
    /* max mode takes the largest weighted corner, not the interpolated value: the reference's
     * (and the test data's) known quirk */
    ts_tensor *r = g->max_mode ? ts_amax_dim(ts_amax_dim(v, 3, false), 1, false)
                               : ts_div_scalar(ts_sum_dims(v, TS_DIMS(1, 3), false), (double)count);
    return ts_reshape(r, TS_SHAPE(1, ch, g->ph, g->pw));
}

static bool run_roi_align(tso_ctx *c, const tso_node *n, ts_tensor *const *in, ts_tensor **out,
                          bool half_pixel) {
    ts_tensor *x = in[0];
    ts_shape xs = ts_shape_of(x), rs = ts_shape_of(in[1]);
    if (xs.ndim != 4 || rs.ndim != 2 || rs.dims[1] != 4 || ts_numel(in[2]) != rs.dims[0])
        return tso_fail(n, TS_ERR_SHAPE,
                        "X %s, rois %s, batch_indices %s must be [N, C, H, W], [R, 4], [R]",
                        tsi_desc(x), tsi_desc(in[1]), tsi_desc(in[2]));
    char buf[32];
    roi_cfg g = {.h = xs.dims[2],
                 .w = xs.dims[3],
                 .ph = tso_attr_int(n, "output_height", 1),
                 .pw = tso_attr_int(n, "output_width", 1),
                 .sampling = tso_attr_int(n, "sampling_ratio", 0),
                 .scale = tso_attr_float(n, "spatial_scale", 1.0f),
                 .half_pixel = half_pixel,
                 .max_mode = !strcmp(tso_attr_string(n, "mode", "avg", buf, sizeof buf), "max")};
    int64_t nr = rs.dims[0];
    if (nr == 0) {
        out[0] = ts_zeros(TS_SHAPE(0, xs.dims[1], g.ph, g.pw), tso_opts_of(x, ts_dtype_of(x)));
        return out[0] != NULL || tso_fail_pending(n);
    }
    float *rois = floats_on_host(n, in[1]);
    int64_t *bi = malloc((size_t)nr * sizeof *bi);
    ts_tensor **parts = calloc((size_t)nr, sizeof *parts);
    bool ok = rois && bi && parts;
    if (!ok && rois) tso_fail(n, TS_ERR_OOM, "out of host memory");
    if (ok) ok = tso_read_ints(n, in[2], bi, (int)nr, "batch_indices") == nr;
    ts_tensor *flat = ok ? ts_reshape(x, TS_SHAPE(xs.dims[0], xs.dims[1], g.h * g.w)) : NULL;
    for (int64_t r = 0; ok && r < nr; r++) {
        if (bi[r] < 0 || bi[r] >= xs.dims[0]) {
            ok = tso_fail(n, TS_ERR_ARG, "batch index %lld out of range", (long long)bi[r]);
            break;
        }
        parts[r] = roi_one(n, &g, ts_select(flat, 0, bi[r]), rois + 4 * r);
        ok = parts[r] != NULL;
    }
    if (ok) out[0] = ts_cat(parts, (int)nr, 0);
    free(rois);
    free(bi);
    free(parts);
    (void)c;
    return (ok && out[0]) || tso_fail_pending(n);
}

/* opset 10 has no coordinate_transformation_mode: its behaviour is output_half_pixel */
TSO_RUN(run_roi_align10) { return run_roi_align(c, n, in, out, false); }
TSO_RUN(run_roi_align16) {
    char buf[32];
    return run_roi_align(
        c, n, in, out,
        !strcmp(tso_attr_string(n, "coordinate_transformation_mode", "half_pixel", buf, sizeof buf),
                "half_pixel"));
}

const tso_op_def tso_ops_detect[] = {
    {"NonMaxSuppression", 10, run_nms, check_nms, false},
    {"RoiAlign", 10, run_roi_align10, check_roi_align, false},
    {"RoiAlign", 16, run_roi_align16, check_roi_align, false},
    {NULL, 0, NULL, NULL, false},
};
