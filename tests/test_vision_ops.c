/* test_vision_ops.c — torchvision.ops in C (include/tessera/vision_ops.h; src/ops/vision_boxes.c,
 * vision_roi.c; the kernels kern_nms.c, kern_roi.c, roi_math.h) on every device (cpu, sim:0, and
 * cuda:0 where present):
 *  - nms and batched_nms against a brute-force reference written here in double (the boxes'
 *    values, sorted by score with ties in index order, IoU in double), with thresholds kept away
 *    from every pair's IoU by more than float32's rounding of it, plus an IoU exactly at the
 *    threshold (IoU > threshold suppresses, = does not);
 *  - roi_align forward against a float64 implementation of torchvision's algorithm written
 *    plainly below (aligned and not, fixed and adaptive sampling ratios, scales, rois partly
 *    outside the image, degenerate rois) and roi_pool against one of its own;
 *  - the backward of both by central finite differences of the float64 forward (roi_align is
 *    linear in its input, roi_pool piecewise linear with distinct values: the differences are
 *    exact up to rounding);
 *  - the box ops against double references, box_convert round trips;
 *  - a captured roi_align / roi_pool replayed on new input values (nms refused in a capture);
 *  - errors: bad shapes, boxes of the wrong width, negative output sizes, mixed devices, batch
 *    indices out of range, non-finite and too distant rois, dtypes.
 *
 * Tolerances. float64: every result is a short sum (4 * samples terms) of products of numbers
 * within max|v|: 1e-12 * max|v|. float32: a sample's position (start + ph bin + t bin / grid)
 * carries at most 4 roundings of numbers below H + W + 4, eps32 (H + W + 4) each; a bilinear
 * weight moves by as much and the value by twice that times max|v| per axis; the weights'
 * products and the 4 * samples additions add 4 eps32 max|v| after the mean: tol = eps32 max|v|
 * (16 (H + W + 4) + 8). */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "host_read_util.h"
#include "tessera.h"
#include "ts_test.h"

static ts_device devs[TS_TEST_MAX_DEVICES];
static int ndev;

/* deterministic numbers in [0, 1) */
static uint64_t rng_state = 88172645463325252ull;
static double urand(void) {
    rng_state ^= rng_state << 13, rng_state ^= rng_state >> 7, rng_state ^= rng_state << 17;
    return (double)(rng_state >> 11) / 9007199254740992.0;
}

static ts_tensor *mk(ts_shape s, const double *v, ts_dtype dt, ts_device d) {
    return ts_to(ts_to_dtype(ts_tensor_f64(s, v, (ts_opts){.dtype = TS_F64}), dt), d);
}
/* v rounded to dt (float32 or float64), in place: the values the kernels see */
static void round_to(double *v, int64_t n, ts_dtype dt) {
    if (dt == TS_F32)
        for (int64_t i = 0; i < n; i++) v[i] = (double)(float)v[i];
}

/* ------------------------------------------------------------------ nms reference */
static double iou_d(const double *a, const double *b) {
    const double aa = (a[2] - a[0]) * (a[3] - a[1]), ab = (b[2] - b[0]) * (b[3] - b[1]);
    const double w = fmax(0, fmin(a[2], b[2]) - fmax(a[0], b[0]));
    const double h = fmax(0, fmin(a[3], b[3]) - fmax(a[1], b[1]));
    return w * h / (aa + ab - w * h);
}

/* kept indices into keep[], their count returned; cls NULL: one class */
static int64_t nms_ref(const double *b, const double *s, const int64_t *cls, int64_t n, double thr,
                       int64_t *keep) {
    int64_t *order = malloc((size_t)n * sizeof *order);
    bool *dead = calloc((size_t)n, 1);
    for (int64_t i = 0; i < n; i++) order[i] = i;
    for (int64_t i = 1; i < n; i++) /* insertion sort: stable, decreasing score */
        for (int64_t j = i; j > 0 && s[order[j]] > s[order[j - 1]]; j--) {
            const int64_t t = order[j];
            order[j] = order[j - 1], order[j - 1] = t;
        }
    int64_t k = 0;
    for (int64_t a = 0; a < n; a++) {
        const int64_t i = order[a];
        if (dead[i]) continue;
        keep[k++] = i;
        for (int64_t c = a + 1; c < n; c++) {
            const int64_t j = order[c];
            if (!dead[j] && (!cls || cls[i] == cls[j]) && iou_d(b + 4 * i, b + 4 * j) > thr)
                dead[j] = true;
        }
    }
    free(order), free(dead);
    return k;
}

/* a threshold near want at least 1e-4 from every pair's IoU (float32 rounds an IoU by far less) */
static double safe_thr(const double *b, int64_t n, double want) {
    for (int tries = 0; tries < 200; tries++, want += 3.7e-4) {
        bool ok = true;
        for (int64_t i = 0; i < n && ok; i++)
            for (int64_t j = i + 1; j < n && ok; j++)
                if (fabs(iou_d(b + 4 * i, b + 4 * j) - want) < 1e-4) ok = false;
        if (ok) return want;
    }
    return want;
}

static bool same_indices(ts_tensor *t, const int64_t *ref, int64_t k) {
    if (!t || ts_dtype_of(t) != TS_I64 || ts_numel(t) != k) return false;
    if (k == 0) return true;
    int64_t *got = malloc((size_t)k * sizeof *got);
    bool ok = ts_copy_to_host(ts_to(t, ts_cpu()), got, (size_t)k * sizeof *got) == TS_OK;
    for (int64_t i = 0; ok && i < k; i++)
        if (got[i] != ref[i]) {
            fprintf(stderr, "  position %lld: %lld vs %lld\n", (long long)i, (long long)got[i],
                    (long long)ref[i]);
            ok = false;
        }
    free(got);
    return ok;
}

static void test_nms(ts_device d, ts_dtype dt) {
    enum { N = 300 };
    static double b[N * 4], s[N];
    static int64_t cls[N], keep[N];
    for (int i = 0; i < N; i++) {
        const double x = urand() * 90, y = urand() * 90, w = 2 + urand() * 30, h = 2 + urand() * 30;
        b[4 * i] = x, b[4 * i + 1] = y, b[4 * i + 2] = x + w, b[4 * i + 3] = y + h;
        /* every fifth score repeats an earlier one: ties keep the boxes' order */
        s[i] = i % 5 == 4 ? s[i - 3] : urand();
        cls[i] = (int64_t)(urand() * 4);
    }
    round_to(b, N * 4, dt), round_to(s, N, dt);
    ts_scope_begin();
    ts_tensor *tb = mk(TS_SHAPE(N, 4), b, dt, d), *ts = mk(TS_SHAPE(N), s, dt, d);
    ts_tensor *tc = ts_to(ts_tensor_i64(TS_SHAPE(N), cls, (ts_opts){0}), d);
    const double wants[3] = {0.1, 0.3, 0.6};
    for (int t = 0; t < 3; t++) {
        const double thr = safe_thr(b, N, wants[t]);
        int64_t k = nms_ref(b, s, NULL, N, thr, keep);
        CHECK(same_indices(ts_nms(tb, ts, thr), keep, k));
        k = nms_ref(b, s, cls, N, thr, keep);
        CHECK(same_indices(ts_batched_nms(tb, ts, tc, thr), keep, k));
        /* int32 categories: the same */
        CHECK(same_indices(ts_batched_nms(tb, ts, ts_to_dtype(tc, TS_I32), thr), keep, k));
    }
    /* IoU exactly 0.5 at threshold 0.5: kept (torchvision suppresses IoU > threshold only) */
    const double eb[8] = {0, 0, 4, 4, 0, 0, 4, 2}, es[2] = {0.9, 0.8};
    ts_tensor *xb = mk(TS_SHAPE(2, 4), eb, dt, d), *xs = mk(TS_SHAPE(2), es, dt, d);
    const int64_t both[2] = {0, 1}, first[1] = {0};
    CHECK(same_indices(ts_nms(xb, xs, 0.5), both, 2));
    CHECK(same_indices(ts_nms(xb, xs, 0.4999), first, 1));
    /* equal scores: index order; no boxes: an empty int64 result */
    const double ts2[2] = {0.5, 0.5};
    CHECK(same_indices(ts_nms(xb, mk(TS_SHAPE(2), ts2, dt, d), 0.3), first, 1));
    ts_tensor *e = ts_nms(ts_zeros(TS_SHAPE(0, 4), (ts_opts){.dtype = dt, .device = d}),
                          ts_zeros(TS_SHAPE(0), (ts_opts){.dtype = dt, .device = d}), 0.5);
    CHECK(e && ts_numel(e) == 0 && ts_dtype_of(e) == TS_I64);
    CHECK_OK();
    ts_scope_end();
}

/* ------------------------------------------------------------------ roi_align reference */
typedef struct roi_prob {
    int64_t N, C, H, W, K, PH, PW;
    double scale;
    int sr;
    bool aligned;
} roi_prob;

static double bilinear_ref(const double *p, int64_t H, int64_t W, double y, double x) {
    if (y < -1.0 || y > (double)H || x < -1.0 || x > (double)W) return 0;
    if (y <= 0) y = 0;
    if (x <= 0) x = 0;
    int64_t yl = (int64_t)y, xl = (int64_t)x, yh, xh;
    if (yl >= H - 1)
        yh = yl = H - 1, y = (double)yl;
    else
        yh = yl + 1;
    if (xl >= W - 1)
        xh = xl = W - 1, x = (double)xl;
    else
        xh = xl + 1;
    const double ly = y - (double)yl, lx = x - (double)xl, hy = 1 - ly, hx = 1 - lx;
    return hy * hx * p[yl * W + xl] + hy * lx * p[yl * W + xh] + ly * hx * p[yh * W + xl] +
           ly * lx * p[yh * W + xh];
}

static void roi_align_ref(const roi_prob *q, const double *in, const double *rois, double *out) {
    for (int64_t k = 0; k < q->K; k++) {
        const double *r = rois + 5 * k, off = q->aligned ? 0.5 : 0.0;
        const int64_t b = (int64_t)r[0];
        const double sw = r[1] * q->scale - off, sh = r[2] * q->scale - off;
        double rw = r[3] * q->scale - off - sw, rh = r[4] * q->scale - off - sh;
        if (!q->aligned) rw = fmax(rw, 1.0), rh = fmax(rh, 1.0);
        const double bh = rh / (double)q->PH, bw = rw / (double)q->PW;
        const int gh = q->sr > 0 ? q->sr : (int)ceil(rh / (double)q->PH);
        const int gw = q->sr > 0 ? q->sr : (int)ceil(rw / (double)q->PW);
        const double cnt = gh * gw > 1 ? gh * gw : 1;
        for (int64_t c = 0; c < q->C; c++) {
            const double *p = in + (b * q->C + c) * q->H * q->W;
            for (int64_t ph = 0; ph < q->PH; ph++)
                for (int64_t pw = 0; pw < q->PW; pw++) {
                    double acc = 0;
                    for (int iy = 0; iy < gh; iy++)
                        for (int ix = 0; ix < gw; ix++)
                            acc += bilinear_ref(p, q->H, q->W,
                                                sh + (double)ph * bh + (iy + 0.5) * bh / gh,
                                                sw + (double)pw * bw + (ix + 0.5) * bw / gw);
                    out[((k * q->C + c) * q->PH + ph) * q->PW + pw] = acc / cnt;
                }
        }
    }
}

static void roi_pool_ref(const roi_prob *q, const double *in, const double *rois, double *out) {
    for (int64_t k = 0; k < q->K; k++) {
        const double *r = rois + 5 * k;
        const int64_t b = (int64_t)r[0];
        const int64_t sw = (int64_t)round(r[1] * q->scale), sh = (int64_t)round(r[2] * q->scale);
        const int64_t ew = (int64_t)round(r[3] * q->scale), eh = (int64_t)round(r[4] * q->scale);
        const int64_t rw = ew - sw + 1 > 1 ? ew - sw + 1 : 1,
                      rh = eh - sh + 1 > 1 ? eh - sh + 1 : 1;
        const double bh = (double)rh / (double)q->PH, bw = (double)rw / (double)q->PW;
        for (int64_t c = 0; c < q->C; c++)
            for (int64_t ph = 0; ph < q->PH; ph++)
                for (int64_t pw = 0; pw < q->PW; pw++) {
                    int64_t hs = (int64_t)floor((double)ph * bh) + sh;
                    int64_t he = (int64_t)ceil((double)(ph + 1) * bh) + sh;
                    int64_t ws = (int64_t)floor((double)pw * bw) + sw;
                    int64_t we = (int64_t)ceil((double)(pw + 1) * bw) + sw;
                    hs = hs < 0      ? 0
                         : hs > q->H ? q->H
                                     : hs,
                    he = he < 0      ? 0
                         : he > q->H ? q->H
                                     : he;
                    ws = ws < 0      ? 0
                         : ws > q->W ? q->W
                                     : ws,
                    we = we < 0      ? 0
                         : we > q->W ? q->W
                                     : we;
                    double m = he <= hs || we <= ws ? 0 : -INFINITY;
                    for (int64_t h = hs; h < he; h++)
                        for (int64_t w = ws; w < we; w++)
                            m = fmax(m, in[((b * q->C + c) * q->H + h) * q->W + w]);
                    out[((k * q->C + c) * q->PH + ph) * q->PW + pw] = m;
                }
    }
}

/* rois inside and around an image of H x W input pixels (/ scale), a few degenerate */
static void make_rois(const roi_prob *q, double *rois) {
    const double sx = (double)q->W / q->scale, sy = (double)q->H / q->scale;
    for (int64_t k = 0; k < q->K; k++) {
        double *r = rois + 5 * k;
        r[0] = (double)(k % q->N);
        const double x1 = (urand() * 1.2 - 0.15) * sx, y1 = (urand() * 1.2 - 0.15) * sy;
        const double w = k % 7 == 3 ? 0.2 : urand() * 0.7 * sx,
                     h = k % 7 == 3 ? 0.1 : urand() * 0.7 * sy;
        r[1] = x1, r[2] = y1, r[3] = x1 + w, r[4] = y1 + h;
    }
}

static void test_roi_align_forward(ts_device d, ts_dtype dt) {
    static const roi_prob probs[] = {
        {2, 3, 9, 11, 10, 3, 4, 1.0, 2, false},
        {2, 3, 9, 11, 10, 3, 4, 1.0, 2, true},
        {2, 2, 12, 10, 9, 2, 2, 0.5, 0, false},
        {2, 2, 12, 10, 9, 2, 2, 0.5, 0, true},
        {1, 4, 8, 8, 7, 5, 3, 0.25, 1, true},
        {3, 2, 7, 13, 12, 4, 4, 0.125, 3, false},
        /* enough outputs (20480) for the threaded loops */
        {2, 32, 9, 11, 40, 4, 4, 0.5, 2, true},
    };
    for (size_t t = 0; t < sizeof probs / sizeof *probs; t++) {
        const roi_prob *q = &probs[t];
        const int64_t nin = q->N * q->C * q->H * q->W, nout = q->K * q->C * q->PH * q->PW;
        double *in = malloc((size_t)nin * sizeof *in),
               *rois = malloc((size_t)q->K * 5 * sizeof *rois);
        double *ref = malloc((size_t)nout * sizeof *ref);
        double maxv = 0;
        for (int64_t i = 0; i < nin; i++) in[i] = urand() * 4 - 2, maxv = fmax(maxv, fabs(in[i]));
        make_rois(q, rois);
        round_to(in, nin, dt), round_to(rois, q->K * 5, dt);
        roi_align_ref(q, in, rois, ref);
        ts_scope_begin();
        ts_tensor *x = mk(TS_SHAPE(q->N, q->C, q->H, q->W), in, dt, d);
        ts_tensor *r = mk(TS_SHAPE(q->K, 5), rois, dt, d);
        ts_tensor *y = ts_roi_align(x, r, q->PH, q->PW, q->scale, q->sr, q->aligned);
        CHECK(y && ts_shape_of(y).ndim == 4 && ts_shape_of(y).dims[0] == q->K);
        double *got = malloc((size_t)nout * sizeof *got);
        const double tol = dt == TS_F64
                               ? 1e-12 * maxv
                               : FLT_EPSILON * maxv * (16.0 * (double)(q->H + q->W + 4) + 8);
        bool ok = rd(y, got, nout);
        for (int64_t i = 0; ok && i < nout; i++)
            if (!(fabs(got[i] - ref[i]) <= tol)) {
                fprintf(stderr, "  roi_align case %zu on %s element %lld: %.17g vs %.17g\n", t,
                        ts_device_str(d), (long long)i, got[i], ref[i]);
                ok = false;
            }
        CHECK(ok);
        /* roi_pool against its reference: maxima of the values themselves, exact */
        roi_pool_ref(q, in, rois, ref);
        ok = rd(ts_roi_pool(x, r, q->PH, q->PW, q->scale), got, nout);
        for (int64_t i = 0; ok && i < nout; i++) ok = got[i] == ref[i];
        CHECK(ok);
        CHECK_OK();
        ts_scope_end();
        free(in), free(rois), free(ref), free(got);
    }
}

/* d/dx sum(wts * f(x)) by autograd against central differences of the float64 forward */
static void test_roi_backward(ts_device d, bool pool) {
    const roi_prob q = {2, 2, 6, 7, 5, 3, 2, 0.5, pool ? 0 : 2, !pool};
    const int64_t nin = q.N * q.C * q.H * q.W, nout = q.K * q.C * q.PH * q.PW;
    double in[168], rois[25], wts[60], grad[168];
    for (int64_t i = 0; i < nin; i++) in[i] = (double)((i * 37) % nin) / 7.0 - 3; /* distinct */
    for (int64_t i = 0; i < nout; i++) wts[i] = urand() - 0.3;
    make_rois(&q, rois);
    ts_scope_begin();
    ts_tensor *r = mk(TS_SHAPE(q.K, 5), rois, TS_F64, d);
    ts_tensor *w = mk(TS_SHAPE(q.K, q.C, q.PH, q.PW), wts, TS_F64, d);
    ts_tensor *x = mk(TS_SHAPE(q.N, q.C, q.H, q.W), in, TS_F64, d);
    ts_set_requires_grad(x, true);
    ts_tensor *y = pool ? ts_roi_pool(x, r, q.PH, q.PW, q.scale)
                        : ts_roi_align(x, r, q.PH, q.PW, q.scale, q.sr, q.aligned);
    CHECK_STREQ(ts_grad_fn_name(y), pool ? "RoiPoolBackward0" : "RoiAlignBackward0");
    CHECK(ts_backward(ts_sum(ts_mul(y, w))) == TS_OK);
    CHECK(rd(ts_grad(x), grad, nin));
    const double h = pool ? 1e-3 : 0.5; /* pool: below half the values' spacing (1/7) */
    bool ok = true;
    ts_no_grad_begin();
    for (int64_t i = 0; i < nin && ok; i++) {
        double lp, lm, save = in[i];
        in[i] = save + h;
        ts_tensor *xp = mk(TS_SHAPE(q.N, q.C, q.H, q.W), in, TS_F64, d);
        in[i] = save - h;
        ts_tensor *xm = mk(TS_SHAPE(q.N, q.C, q.H, q.W), in, TS_F64, d);
        in[i] = save;
        ts_tensor *yp = pool ? ts_roi_pool(xp, r, q.PH, q.PW, q.scale)
                             : ts_roi_align(xp, r, q.PH, q.PW, q.scale, q.sr, q.aligned);
        ts_tensor *ym = pool ? ts_roi_pool(xm, r, q.PH, q.PW, q.scale)
                             : ts_roi_align(xm, r, q.PH, q.PW, q.scale, q.sr, q.aligned);
        ok = rd(ts_sum(ts_mul(yp, w)), &lp, 1) && rd(ts_sum(ts_mul(ym, w)), &lm, 1);
        const double fd = (lp - lm) / (2 * h);
        if (!ok || !(fabs(fd - grad[i]) <= 1e-9)) {
            fprintf(stderr, "  %s backward on %s, input %lld: %.17g vs differences %.17g\n",
                    pool ? "roi_pool" : "roi_align", ts_device_str(d), (long long)i, grad[i], fd);
            ok = false;
        }
    }
    ts_no_grad_end();
    CHECK(ok);
    CHECK_OK();
    ts_scope_end();
}

/* float16 input: computed in float32 and rounded back; the gradient flows through the casts */
static void test_roi_half(ts_device d) {
    double in[2 * 8 * 8], rois[5] = {1, 1.5, 0.5, 6.25, 7}, ref[9];
    for (int i = 0; i < 128; i++) in[i] = (double)((i * 11) % 17) / 4;
    const roi_prob q = {2, 1, 8, 8, 1, 3, 3, 1.0, 2, true};
    ts_scope_begin();
    ts_tensor *x = mk(TS_SHAPE(2, 1, 8, 8), in, TS_F16, d);
    ts_set_requires_grad(x, true);
    ts_tensor *y = ts_roi_align(x, mk(TS_SHAPE(1, 5), rois, TS_F16, d), 3, 3, 1.0, 2, true);
    CHECK(y && ts_dtype_of(y) == TS_F16);
    roi_align_ref(&q, in, rois, ref);
    CHECK(near_all(y, ref, 9, 1e-3)); /* float16's rounding of values below 5 */
    CHECK(ts_backward(ts_sum(y)) == TS_OK && ts_dtype_of(ts_grad(x)) == TS_F16);
    CHECK_OK();
    ts_scope_end();
}

/* ------------------------------------------------------------------ box ops */
static void test_boxes(ts_device d) {
    enum { N = 5, M = 4 };
    double b1[N * 4], b2[M * 4], ref[N * M], got[N * M];
    for (int i = 0; i < N * 4; i += 4) {
        b1[i] = urand() * 10, b1[i + 1] = urand() * 10;
        b1[i + 2] = b1[i] + 1 + urand() * 8, b1[i + 3] = b1[i + 1] + 1 + urand() * 8;
    }
    for (int i = 0; i < M * 4; i += 4) {
        b2[i] = urand() * 10, b2[i + 1] = urand() * 10;
        b2[i + 2] = b2[i] + 1 + urand() * 8, b2[i + 3] = b2[i + 1] + 1 + urand() * 8;
    }
    b2[4] = b2[0] + 20, b2[6] = b2[4] + 3; /* one pair without overlap */
    ts_scope_begin();
    ts_tensor *t1 = mk(TS_SHAPE(N, 4), b1, TS_F64, d), *t2 = mk(TS_SHAPE(M, 4), b2, TS_F64, d);
    for (int i = 0; i < N; i++)
        for (int j = 0; j < M; j++) ref[i * M + j] = iou_d(b1 + 4 * i, b2 + 4 * j);
    CHECK(near_all(ts_box_iou(t1, t2, TS_BOX_XYXY), ref, N * M, 1e-14));
    /* the same boxes as xywh / cxcywh give the same IoU */
    CHECK(near_all(ts_box_iou(ts_box_convert(t1, TS_BOX_XYXY, TS_BOX_XYWH),
                              ts_box_convert(t2, TS_BOX_XYXY, TS_BOX_XYWH), TS_BOX_XYWH),
                   ref, N * M, 1e-13));
    CHECK(near_all(ts_box_iou(ts_box_convert(t1, TS_BOX_XYXY, TS_BOX_CXCYWH),
                              ts_box_convert(t2, TS_BOX_XYXY, TS_BOX_CXCYWH), TS_BOX_CXCYWH),
                   ref, N * M, 1e-13));
    /* generalized, distance, complete IoU in double */
    double g[N * M], di[N * M], ci[N * M];
    for (int i = 0; i < N; i++)
        for (int j = 0; j < M; j++) {
            const double *a = b1 + 4 * i, *b = b2 + 4 * j, iou = iou_d(a, b);
            const double ew = fmax(a[2], b[2]) - fmin(a[0], b[0]);
            const double eh = fmax(a[3], b[3]) - fmin(a[1], b[1]);
            const double aa = (a[2] - a[0]) * (a[3] - a[1]), ab = (b[2] - b[0]) * (b[3] - b[1]);
            const double inter = iou * 0 + fmax(0, fmin(a[2], b[2]) - fmax(a[0], b[0])) *
                                               fmax(0, fmin(a[3], b[3]) - fmax(a[1], b[1]));
            const double uni = aa + ab - inter;
            g[i * M + j] = iou - (ew * eh - uni) / (ew * eh);
            const double dx = (a[0] + a[2]) / 2 - (b[0] + b[2]) / 2;
            const double dy = (a[1] + a[3]) / 2 - (b[1] + b[3]) / 2;
            di[i * M + j] = iou - (dx * dx + dy * dy) / (ew * ew + eh * eh + 1e-7);
            const double v =
                4 / (3.14159265358979323846 * 3.14159265358979323846) *
                pow(atan((a[2] - a[0]) / (a[3] - a[1])) - atan((b[2] - b[0]) / (b[3] - b[1])), 2);
            ci[i * M + j] = di[i * M + j] - v / (1 - iou + v + 1e-7) * v;
        }
    CHECK(near_all(ts_generalized_box_iou(t1, t2), g, N * M, 1e-13));
    CHECK(near_all(ts_distance_box_iou(t1, t2, 1e-7), di, N * M, 1e-13));
    CHECK(near_all(ts_complete_box_iou(t1, t2, 1e-7), ci, N * M, 1e-13));
    /* areas; round trips through every format */
    double area[N];
    for (int i = 0; i < N; i++)
        area[i] = (b1[4 * i + 2] - b1[4 * i]) * (b1[4 * i + 3] - b1[4 * i + 1]);
    CHECK(near_all(ts_box_area(t1, TS_BOX_XYXY), area, N, 1e-14));
    CHECK(near_all(ts_box_area(ts_box_convert(t1, TS_BOX_XYXY, TS_BOX_CXCYWH), TS_BOX_CXCYWH), area,
                   N, 1e-13));
    for (int f = 0; f < 3; f++)
        for (int h = 0; h < 3; h++)
            CHECK(near_all(ts_box_convert(ts_box_convert(ts_box_convert(t1, TS_BOX_XYXY, f), f, h),
                                          h, TS_BOX_XYXY),
                           b1, N * 4, 1e-13));
    const double xywh0[4] = {b1[0], b1[1], b1[2] - b1[0], b1[3] - b1[1]};
    CHECK(near_all(ts_select(ts_box_convert(t1, TS_BOX_XYXY, TS_BOX_XYWH), 0, 0), xywh0, 4, 1e-14));
    /* clip and remove_small_boxes */
    const double cb[8] = {-1, 2, 30, 4, 3, -5, 6, 50}, clipped[8] = {0, 2, 20, 4, 3, 0, 6, 10};
    CHECK(
        near_all(ts_clip_boxes_to_image(mk(TS_SHAPE(2, 4), cb, TS_F64, d), 10, 20), clipped, 8, 0));
    const double sb[12] = {0, 0, 0.9, 5, 0, 0, 5, 5, 2, 2, 2.5, 9};
    const int64_t big[1] = {1};
    CHECK(same_indices(ts_remove_small_boxes(mk(TS_SHAPE(3, 4), sb, TS_F64, d), 1.0), big, 1));
    /* differentiable: generalized_box_iou's gradient reaches both box sets */
    ts_set_requires_grad(t1, true);
    CHECK(ts_backward(ts_sum(ts_generalized_box_iou(t1, t2))) == TS_OK && ts_grad(t1));
    CHECK(rd(ts_grad(t1), got, N * 4));
    /* lists of boxes to rois */
    ts_tensor *list[2] = {ts_detach(t1), t2};
    ts_tensor *rois = ts_boxes_to_rois(list, 2);
    CHECK(rois && ts_shape_of(rois).dims[0] == N + M && ts_shape_of(rois).dims[1] == 5);
    double rv[(N + M) * 5];
    CHECK(rd(rois, rv, (N + M) * 5) && rv[0] == 0 && rv[5 * N] == 1 && rv[5 * N + 1] == b2[0]);
    CHECK_OK();
    ts_scope_end();
}

/* the threaded backward loops (over channels) give the one-thread bits */
static void test_roi_threads(ts_device d) {
    const roi_prob q = {2, 32, 9, 11, 40, 4, 4, 0.5, 0, false};
    const int64_t nin = q.N * q.C * q.H * q.W;
    double *in = malloc((size_t)nin * sizeof *in), rois[200];
    for (int64_t i = 0; i < nin; i++) in[i] = sin(0.1 * (double)i);
    make_rois(&q, rois);
    const int nt = ts_get_num_threads();
    for (int pool = 0; pool < 2; pool++) {
        double *g[2];
        for (int t = 0; t < 2; t++) {
            ts_set_num_threads(t ? nt : 1);
            ts_scope_begin();
            ts_tensor *x = mk(TS_SHAPE(q.N, q.C, q.H, q.W), in, TS_F32, d);
            ts_set_requires_grad(x, true);
            ts_tensor *r = mk(TS_SHAPE(q.K, 5), rois, TS_F32, d);
            ts_tensor *y = pool ? ts_roi_pool(x, r, q.PH, q.PW, q.scale)
                                : ts_roi_align(x, r, q.PH, q.PW, q.scale, q.sr, q.aligned);
            CHECK(ts_backward(ts_sum(ts_mul(y, ts_cos(y)))) == TS_OK);
            g[t] = malloc((size_t)nin * sizeof(double));
            CHECK(rd(ts_grad(x), g[t], nin));
            ts_scope_end();
        }
        CHECK(memcmp(g[0], g[1], (size_t)nin * sizeof(double)) == 0);
        free(g[0]), free(g[1]);
    }
    ts_set_num_threads(nt);
    free(in);
    CHECK_OK();
}

/* a captured roi_align + roi_pool replays with the input's new values; nms is refused there */
static void test_capture(ts_device d) {
    const roi_prob q = {2, 2, 6, 7, 3, 2, 3, 1.0, 2, true};
    double in1[168], in2[168], rois[15], ref[36];
    for (int i = 0; i < 168; i++) in1[i] = sin(0.3 * i), in2[i] = cos(0.7 * i);
    make_rois(&q, rois);
    ts_scope_begin();
    ts_tensor *x = mk(TS_SHAPE(2, 2, 6, 7), in1, TS_F64, d),
              *r = mk(TS_SHAPE(3, 5), rois, TS_F64, d);
    ts_tensor *y = ts_roi_align(x, r, 2, 3, 1.0, 2, true); /* warm-up */
    ts_graph *g = ts_graph_capture_begin(d, (ts_graph_opts){0});
    y = ts_roi_align(x, r, 2, 3, 1.0, 2, true);
    ts_tensor *p = ts_roi_pool(x, r, 2, 3, 1.0);
    CHECK(!ts_nms(ts_zeros(TS_SHAPE(2, 4), (ts_opts){.dtype = TS_F64, .device = d}),
                  ts_zeros(TS_SHAPE(2), (ts_opts){.dtype = TS_F64, .device = d}), 0.5));
    CHECK_ERR_HAS(TS_ERR_UNSUPPORTED, "nms: the number of boxes kept is read on the host");
    CHECK(g && ts_graph_capture_end() == TS_OK && ts_graph_kernel_count(g) >= 2);
    ts_copy_(x, mk(TS_SHAPE(2, 2, 6, 7), in2, TS_F64, d));
    CHECK(ts_graph_replay(g) == TS_OK);
    roi_align_ref(&q, in2, rois, ref);
    CHECK(near_all(y, ref, 36, 1e-12));
    roi_pool_ref(&q, in2, rois, ref);
    CHECK(near_all(p, ref, 36, 0));
    ts_graph_free(g);
    CHECK_OK();
    ts_scope_end();
}

/* a strided input (the planes transposed) gives the contiguous one's results; on meta only the
 * shape is computed (nms, whose result size is data, is refused there) */
static void test_layouts(ts_device d) {
    double in[2 * 3 * 6 * 5], rois[10] = {0, 0.5, 1, 4, 5.5, 1, 2, 0, 4.5, 3};
    for (int i = 0; i < 180; i++) in[i] = cos(0.4 * i);
    ts_scope_begin();
    ts_tensor *x = mk(TS_SHAPE(2, 3, 6, 5), in, TS_F32, d),
              *r = mk(TS_SHAPE(2, 5), rois, TS_F32, d);
    ts_tensor *xt = ts_transpose(ts_contiguous(ts_transpose(x, 2, 3)), 2, 3); /* same values */
    double a[2 * 3 * 9], b[2 * 3 * 9];
    CHECK(rd(ts_roi_align(x, r, 3, 3, 1.0, 0, true), a, 54) &&
          rd(ts_roi_align(xt, r, 3, 3, 1.0, 0, true), b, 54) && memcmp(a, b, sizeof a) == 0);
    CHECK(rd(ts_roi_pool(x, r, 3, 3, 1.0), a, 54) && rd(ts_roi_pool(xt, r, 3, 3, 1.0), b, 54) &&
          memcmp(a, b, sizeof a) == 0);
    ts_tensor *m = ts_roi_align(ts_to(x, ts_meta()), ts_to(r, ts_meta()), 3, 2, 1.0, 0, true);
    CHECK(m && ts_shape_of(m).ndim == 4 && ts_shape_of(m).dims[0] == 2 &&
          ts_shape_of(m).dims[1] == 3 && ts_shape_of(m).dims[3] == 2);
    CHECK(!ts_nms(ts_zeros(TS_SHAPE(2, 4), (ts_opts){.device = ts_meta()}),
                  ts_zeros(TS_SHAPE(2), (ts_opts){.device = ts_meta()}), 0.5));
    CHECK_ERR(TS_ERR_UNSUPPORTED);
    CHECK_OK();
    ts_scope_end();
}

/* ------------------------------------------------------------------ errors */
static void test_errors(void) {
    ts_scope_begin();
    const ts_opts f = {.dtype = TS_F32};
    ts_tensor *x = ts_zeros(TS_SHAPE(2, 3, 8, 8), f), *r = ts_zeros(TS_SHAPE(4, 5), f);
    CHECK(!ts_roi_align(ts_zeros(TS_SHAPE(3, 8, 8), f), r, 2, 2, 1, 2, false));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "roi_align: input must be 4-D");
    CHECK(!ts_roi_align(x, ts_zeros(TS_SHAPE(4, 4), f), 2, 2, 1, 2, false));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "rois must have shape [K, 5]");
    CHECK(!ts_roi_align(x, r, -1, 2, 1, 2, false));
    CHECK_ERR_HAS(TS_ERR_ARG, "output_size must be positive");
    CHECK(!ts_roi_pool(x, r, 2, 0, 1));
    CHECK_ERR_HAS(TS_ERR_ARG, "roi_pool: output_size");
    CHECK(!ts_roi_align(x, r, 2, 2, 0, 2, false));
    CHECK_ERR_HAS(TS_ERR_ARG, "spatial_scale");
    CHECK(!ts_roi_align(x, ts_to_dtype(r, TS_F64), 2, 2, 1, 2, false));
    CHECK_ERR_HAS(TS_ERR_DTYPE, "rois must have the input's dtype");
    CHECK(!ts_roi_align(ts_to(x, ts_sim(0)), r, 2, 2, 1, 2, false));
    CHECK_ERR(TS_ERR_DEVICE);
    const float bad[5] = {2, 0, 0, 1, 1}, nan5[5] = {0, NAN, 0, 1, 1};
    CHECK(!ts_roi_align(x, ts_tensor_f32(TS_SHAPE(1, 5), bad, (ts_opts){0}), 2, 2, 1, 2, false));
    CHECK_ERR_HAS(TS_ERR_ARG, "batch index 2, outside [0, 2)");
    CHECK(!ts_roi_pool(x, ts_tensor_f32(TS_SHAPE(1, 5), nan5, (ts_opts){0}), 2, 2, 1));
    CHECK_ERR_HAS(TS_ERR_ARG, "must be finite");
    const float far[5] = {0, 0, 0, 4e7f, 1};
    CHECK(!ts_roi_align(x, ts_tensor_f32(TS_SHAPE(1, 5), far, (ts_opts){0}), 2, 2, 1, 0, false));
    CHECK_ERR_HAS(TS_ERR_ARG, "beyond 2^24 pixels");
    /* the row and column named, and the value: a bad entry in a later row (rows of 5 values) */
    const float rows3[15] = {0, 0, 0, 1, 1, 1, 0, 0, 1, 1, 0, 0, 0, 3e7f, 1};
    CHECK(!ts_roi_align(x, ts_tensor_f32(TS_SHAPE(3, 5), rows3, (ts_opts){0}), 2, 2, 1, 0, false));
    CHECK_ERR_HAS(TS_ERR_ARG, "rois[2][3] is 3e+07: beyond 2^24 pixels");
    const float nan3[15] = {0, 0, 0, 1, 1, 1, 0, 0, 1, 1, 0, 0, 0, 1, INFINITY};
    CHECK(!ts_roi_pool(x, ts_tensor_f32(TS_SHAPE(3, 5), nan3, (ts_opts){0}), 2, 2, 1));
    CHECK_ERR_HAS(TS_ERR_ARG, "rois[2][4] is inf: rois must be finite");
    CHECK(!ts_roi_align(ts_zeros(TS_SHAPE(2, 3, 8, 8), (ts_opts){.dtype = TS_I64}),
                        ts_zeros(TS_SHAPE(4, 5), (ts_opts){.dtype = TS_I64}), 2, 2, 1, 2, false));
    CHECK_ERR(TS_ERR_DTYPE);
    /* nms */
    ts_tensor *b = ts_zeros(TS_SHAPE(3, 4), f), *s = ts_zeros(TS_SHAPE(3), f);
    CHECK(!ts_nms(ts_zeros(TS_SHAPE(3, 5), f), s, 0.5));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "nms: boxes must have shape [N, 4]");
    CHECK(!ts_nms(b, ts_zeros(TS_SHAPE(4), f), 0.5));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "scores must have shape [3]");
    CHECK(!ts_nms(b, ts_to(s, ts_sim(0)), 0.5));
    CHECK_ERR(TS_ERR_DEVICE);
    CHECK(!ts_nms(b, ts_to_dtype(s, TS_F64), 0.5));
    CHECK_ERR_HAS(TS_ERR_DTYPE, "scores must have the boxes' dtype");
    CHECK(!ts_batched_nms(b, s, ts_zeros(TS_SHAPE(2), (ts_opts){.dtype = TS_I64}), 0.5));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "idxs must have shape [3]");
    CHECK(!ts_batched_nms(b, s, ts_zeros(TS_SHAPE(3), f), 0.5));
    CHECK_ERR_HAS(TS_ERR_DTYPE, "idxs must be an integer tensor");
    CHECK(!ts_batched_nms(b, s, NULL, 0.5));
    CHECK_ERR(TS_ERR_ARG);
    /* box ops */
    CHECK(!ts_box_iou(ts_zeros(TS_SHAPE(3, 5), f), b, TS_BOX_XYXY));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "box_iou: boxes1 must have shape [..., 4]");
    CHECK(!ts_box_area(b, (ts_box_fmt)7));
    CHECK_ERR_HAS(TS_ERR_ARG, "box_area: fmt");
    CHECK(!ts_generalized_box_iou(b, ts_to(b, ts_sim(0))));
    CHECK_ERR(TS_ERR_DEVICE);
    CHECK(!ts_clip_boxes_to_image(b, -1, 4));
    CHECK_ERR(TS_ERR_ARG);
    ts_tensor *two[2] = {b, ts_zeros(TS_SHAPE(2, 3), f)};
    CHECK(!ts_boxes_to_rois(two, 2));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "boxes[1] must have shape [K, 4]");
    CHECK(!ts_nms(NULL, s, 0.5));
    CHECK_ERR(TS_ERR_ARG);
    ts_scope_end();
}

int main(void) {
    ndev = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    for (int i = 0; i < ndev; i++) {
        test_nms(devs[i], TS_F32);
        test_nms(devs[i], TS_F64);
        test_roi_align_forward(devs[i], TS_F64);
        test_roi_align_forward(devs[i], TS_F32);
        test_roi_backward(devs[i], false);
        test_roi_backward(devs[i], true);
        test_roi_half(devs[i]);
        test_boxes(devs[i]);
        test_capture(devs[i]);
        test_roi_threads(devs[i]);
        test_layouts(devs[i]);
    }
    test_errors();
    return ts_test_finish();
}
