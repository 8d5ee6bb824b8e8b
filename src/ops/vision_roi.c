/* vision_roi.c — torchvision.ops.roi_align and roi_pool (issue 75): the checks, the backend's
 * roi_align / roi_pool slots (kern_roi.c, cuda_roi.cu, roi_math.h's arithmetic) forward and
 * backward, and the autograd nodes RoiAlignBackward0 / RoiPoolBackward0 (the gradient of the
 * input; the rois get none, as in torchvision; the backward itself is not differentiable).
 * float16 / bfloat16 inputs run in float32 and are cast back (torchvision's autocast). The rois
 * are read on the host (outside a capture) to refuse batch indices outside [0, N) and coordinates
 * that are not finite or lie beyond 2^24 pixels of the feature map (whose sampling grids would
 * not fit an int): the kernels also skip a roi whose batch index is out of range (zeros). */
#include <math.h>
#include <stdlib.h>

#include "autograd/autograd.h"
#include "autograd/trace.h"
#include "core/capture.h"

enum { SV_ROIS, SV_ARGMAX, SV_N };
enum { IP_OH, IP_OW, IP_SR, IP_ALIGNED };

static ts_tensor *finish(ts_tensor *r) {
    r = r ? ts_keep(r) : NULL;
    ts_scope_end();
    return r;
}

/* the rois' values on the host: batch index in [0, n), all finite */
static bool check_roi_values(const char *op, ts_tensor *rois, int64_t n, double scale) {
    const int64_t k = rois->shape.dims[0];
    if (k == 0 || tsi_device(rois).type == TS_META || tsi_capturing_on(tsi_device(rois)))
        return true;
    double *v = malloc((size_t)k * 5 * sizeof *v);
    if (!v) return tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op), false;
    ts_tensor *d = tsi_cast(op, rois, TS_F64);
    bool ok = d && ts_copy_to_host(d, v, (size_t)k * 5 * sizeof *v) == TS_OK;
    ts_release(d);
    for (int64_t i = 0; ok && i < k; i++) {
        for (int j = 0; ok && j < 5; j++)
            if (!isfinite(v[i * 5 + j])) {
                tsi_error_set(TS_ERR_ARG, "%s: rois[%lld][%d] is %g: rois must be finite", op,
                              (long long)i, j, v[i * 5 + j]);
                ok = false;
            }
        for (int j = 1; ok && j < 5; j++)
            if (fabs(v[i * 5 + j] * scale) > 16777216.0) {
                tsi_error_set(TS_ERR_ARG,
                              "%s: rois[%lld][%d] is %g: beyond 2^24 pixels of the feature map "
                              "(times spatial_scale %g), which the kernels do not take",
                              op, (long long)i, j, v[i * 5 + j], scale);
                ok = false;
            }
        if (ok && (trunc(v[i * 5]) < 0 || trunc(v[i * 5]) >= (double)n)) {
            tsi_error_set(TS_ERR_ARG,
                          "%s: rois[%lld] has batch index %g, outside [0, %lld) (the input's "
                          "batch)",
                          op, (long long)i, v[i * 5], (long long)n);
            ok = false;
        }
    }
    free(v);
    return ok;
}

static bool check_roi(const char *op, ts_tensor *input, ts_tensor *rois, int64_t oh, int64_t ow,
                      double scale) {
    if (!tsi_check_input(op, input, "input") || !tsi_check_input(op, rois, "rois")) return false;
    ts_tensor *both[2] = {input, rois};
    ts_device dev;
    if (!tsi_same_device(op, both, 2, false, &dev)) return false;
    if (input->shape.ndim != 4)
        return tsi_error_set(TS_ERR_SHAPE, "%s: input must be 4-D [N, C, H, W], got %s", op,
                             tsi_desc(input)),
               false;
    if (rois->shape.ndim != 2 || rois->shape.dims[1] != 5)
        return tsi_error_set(
                   TS_ERR_SHAPE,
                   "%s: rois must have shape [K, 5] (batch index, x1, y1, x2, y2), got %s", op,
                   tsi_desc(rois)),
               false;
    if (!tsi_is_float(input->dtype))
        return tsi_error_set(TS_ERR_DTYPE, "%s: input must be a floating tensor, got %s", op,
                             tsi_desc(input)),
               false;
    if (rois->dtype != input->dtype)
        return tsi_error_set(TS_ERR_DTYPE, "%s: rois must have the input's dtype %s, got %s", op,
                             ts_dtype_name(input->dtype), tsi_desc(rois)),
               false;
    if (oh < 1 || ow < 1 || oh > INT32_MAX || ow > INT32_MAX)
        return tsi_error_set(TS_ERR_ARG, "%s: output_size must be positive, got (%lld, %lld)", op,
                             (long long)oh, (long long)ow),
               false;
    if (!(scale > 0) || !isfinite(scale))
        return tsi_error_set(TS_ERR_ARG, "%s: spatial_scale must be positive and finite, got %g",
                             op, scale),
               false;
    return check_roi_values(op, rois, input->shape.dims[0], scale);
}

/* runs the slot (forward: out and argmax new; backward: gin zeroed first); false with the error */
static bool roi_call(const char *op, bool pool, ts_tensor *in, ts_tensor *rois, ts_tensor *out,
                     ts_tensor *argmax, const ts_node *n, double scale, bool backward) {
    const ts_backend *be = tsi_be(in);
    if (!(pool ? be->roi_pool : be->roi_align))
        return tsi_error_set(TS_ERR_UNSUPPORTED, "%s: the backend of %s has no kernel", op,
                             ts_device_str(tsi_device(in))),
               false;
    ts_roi_args a = {.input = tsi_kview(in),
                     .rois = tsi_kview(rois),
                     .output = tsi_kview(out),
                     .spatial_scale = scale,
                     .sampling_ratio = (int)n->ip[IP_SR],
                     .aligned = n->ip[IP_ALIGNED] != 0};
    if (argmax) a.argmax = tsi_kview(argmax);
    if (pool)
        be->roi_pool(be, tsi_dev_index(in), &a, backward);
    else
        be->roi_align(be, tsi_dev_index(in), &a, backward);
    return true;
}

static void roi_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi, bool pool) {
    const char *op = pool ? "roi_pool_backward" : "roi_align_backward";
    if (!tsi_node_needs(n, 0) || !go[0]) return;
    ts_tensor *rois = tsi_node_saved(n, SV_ROIS);
    ts_tensor *argmax = pool ? tsi_node_saved(n, SV_ARGMAX) : NULL;
    if (!rois || (pool && !argmax)) return;
    ts_tensor *g = ts_contiguous(ts_to_dtype(go[0], n->in_dtype[0]));
    ts_tensor *gin =
        ts_zeros(n->in_shape[0], (ts_opts){.dtype = n->in_dtype[0], .device = n->in_device[0]});
    if (!g || !gin) return;
    if (roi_call(op, pool, gin, rois, g, argmax, n, n->p[0], true)) gi[0] = gin;
}
static void roi_align_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi) {
    roi_backward(n, go, gi, false);
}
static void roi_pool_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi) {
    roi_backward(n, go, gi, true);
}

static ts_tensor *roi_run(const char *op, bool pool, ts_tensor *input, ts_tensor *rois, int64_t oh,
                          int64_t ow, double scale, int sr, bool aligned) {
    tsi_init();
    if (!check_roi(op, input, rois, oh, ow, scale)) return NULL;
    ts_scope_begin();
    const ts_dtype dt = input->dtype;
    const bool half = dt != TS_F32 && dt != TS_F64;
    /* half dtypes: in float32 (differentiable casts), the result cast back */
    ts_tensor *x = half ? ts_to_dtype(input, TS_F32) : input;
    ts_tensor *r = half ? ts_to_dtype(rois, TS_F32) : rois;
    x = ts_contiguous(x), r = ts_contiguous(r);
    if (!x || !r) return finish(NULL);
    const int64_t K = r->shape.dims[0], C = x->shape.dims[1];
    const ts_device dev = tsi_device(x);
    ts_tensor *y = tsi_own(tsi_new(op, TS_SHAPE(K, C, oh, ow), x->dtype, dev));
    ts_tensor *am = pool ? tsi_own(tsi_new(op, TS_SHAPE(K, C, oh, ow), TS_I64, dev)) : NULL;
    if (!y || (pool && !am)) return finish(NULL);
    ts_node params = {0};
    params.ip[IP_OH] = oh, params.ip[IP_OW] = ow, params.ip[IP_SR] = sr;
    params.ip[IP_ALIGNED] = aligned;
    if (K * C > 0 && !roi_call(op, pool, x, r, y, am, &params, scale, false)) return finish(NULL);
    ts_tensor *ins[1] = {x};
    if (tsi_needs_graph(ins, 1)) {
        ts_tensor *saves[SV_N] = {r, am};
        ts_node *n = tsi_record(pool ? "RoiPoolBackward0" : "RoiAlignBackward0", op,
                                pool ? roi_pool_backward : roi_align_backward, ins, 1, y, saves,
                                pool ? 2 : 1);
        if (!n) return finish(NULL);
        n->p[0] = scale;
        for (int i = 0; i < 4; i++) n->ip[i] = params.ip[i];
    }
    ts_tensor *tin[2] = {x, r};
    const int64_t ip[4] = {oh, ow, sr, aligned};
    const double fp[1] = {scale};
    y = tsi_trace(op, tin, 2, y, ip, pool ? 2 : 4, fp, 1);
    return finish(half ? ts_to_dtype(y, dt) : y);
}

ts_tensor *ts_roi_align(ts_tensor *input, ts_tensor *rois, int64_t out_h, int64_t out_w,
                        double spatial_scale, int sampling_ratio, bool aligned) {
    return roi_run("roi_align", false, input, rois, out_h, out_w, spatial_scale, sampling_ratio,
                   aligned);
}

ts_tensor *ts_roi_pool(ts_tensor *input, ts_tensor *rois, int64_t out_h, int64_t out_w,
                       double spatial_scale) {
    return roi_run("roi_pool", true, input, rois, out_h, out_w, spatial_scale, 0, false);
}
