/* fake_quantize.c — torch.fake_quantize_per_tensor_affine / _per_channel_affine and their
 * _cachemask forms (quantization-aware training; include/tessera/quant.h, docs/QUANTIZATION.md):
 * the quant slot's TS_QK_FAKE kernel (cpu and sim) computes y and the mask in PyTorch's float32
 * arithmetic, and the node FakeQuantizePerTensorAffineCachemaskBackward0 / ...PerChannel...
 * passes the gradient where the mask is 1 (the straight-through estimator: dy * mask). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "autograd/autograd.h"
#include "core/internal.h"
#include "ops/quant_internal.h"
#include "tessera/quant.h"

/* quant_min <= quant_max, both within int32 (the ranges of the quantized dtypes and more) */
static bool check_range(const char *op, int64_t qmin, int64_t qmax) {
    if (qmin < INT32_MIN || qmax > INT32_MAX)
        return tsi_error_set(TS_ERR_ARG,
                             "%s: quant_min %lld and quant_max %lld must lie within int32", op,
                             (long long)qmin, (long long)qmax),
               false;
    if (qmin > qmax)
        return tsi_error_set(TS_ERR_ARG,
                             "%s: quant_min %lld must be less than or equal to quant_max %lld", op,
                             (long long)qmin, (long long)qmax),
               false;
    return true;
}

/* scale > 0 and finite with a finite float32 reciprocal; quant_min <= zero_point <= quant_max.
 * which: "" per tensor, " 3" naming a channel. */
static bool check_param(const char *op, double scale, int64_t zp, int64_t qmin, int64_t qmax,
                        const char *which) {
    if (!(scale > 0) || !isfinite(scale) || (float)scale == 0.0f || !isfinite(1.0f / (float)scale))
        return tsi_error_set(TS_ERR_ARG,
                             "%s: scale%s must be positive, finite and a normal float32 (got %g)",
                             op, which, scale),
               false;
    if (zp < qmin || zp > qmax)
        return tsi_error_set(TS_ERR_ARG,
                             "%s: zero_point%s %lld must be between quant_min %lld and quant_max "
                             "%lld",
                             op, which, (long long)zp, (long long)qmin, (long long)qmax),
               false;
    return true;
}

static bool check_input(const char *op, ts_tensor *x) {
    tsi_init();
    if (!tsi_check_input(op, x, "input") || !tsi_meta_refuse(op, x)) return false;
    if (x->dtype != TS_F32)
        return tsi_error_set(TS_ERR_DTYPE, "%s: input must be float32 (got %s); cast it first", op,
                             tsi_desc(x)),
               false;
    return tsi_quant_kernel_ok(op, x);
}

static void fake_quant_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi) {
    ts_tensor *mask = tsi_node_saved(n, 0);
    if (!go[0] || !mask || !tsi_node_needs(n, 0)) return;
    gi[0] = ts_mul(go[0], ts_to_dtype(mask, go[0]->dtype)); /* PyTorch's dY * mask */
}

/* y and the mask (bool) of x (checked) with the parameters in d (count 1: per tensor, else along
 * axis); the node recorded when x needs a gradient. Owned results in *y / *mask. */
static ts_status run_fake(const char *op, const char *node_name, ts_tensor *x, const double *scales,
                          const int64_t *zps, int64_t count, int axis, int64_t qmin, int64_t qmax,
                          ts_tensor **y_out, ts_tensor **mask_out) {
    ts_tensor *xc = tsi_contiguous(op, x);
    ts_tensor *y = xc ? tsi_new(op, x->shape, TS_F32, tsi_device(x)) : NULL;
    ts_tensor *mask = y ? tsi_new(op, x->shape, TS_BOOL, tsi_device(x)) : NULL;
    if (!mask) {
        ts_release(xc), ts_release(y);
        return ts_error();
    }
    const int64_t n = tsi_numel(x->shape);
    if (n) {
        ts_quant_args a = {.kind = TS_QK_FAKE,
                           .qdtype = TS_QINT32,
                           .x = (float *)(void *)tsi_kview(xc).data,
                           .y = (float *)(void *)tsi_kview(y).data,
                           .u = (uint8_t *)tsi_kview(mask).data,
                           .scales = scales,
                           .zero_points = zps,
                           .per_tensor = count == 1 && axis < 0,
                           .qmin = qmin,
                           .qmax = qmax};
        if (axis < 0) {
            a.outer = 1, a.channels = 1, a.inner = n;
        } else {
            a.outer = 1, a.inner = 1, a.channels = x->shape.dims[axis];
            for (int i = 0; i < axis; i++) a.outer *= x->shape.dims[i];
            for (int i = axis + 1; i < x->shape.ndim; i++) a.inner *= x->shape.dims[i];
        }
        tsi_be(y)->quant(tsi_be(y), tsi_dev_index(y), &a);
    }
    ts_release(xc);
    if (tsi_needs_graph(&x, 1)) {
        ts_node *nd = tsi_record(node_name, op, fake_quant_backward, &x, 1, y, &mask, 1);
        if (!nd && ts_error() != TS_OK) {
            ts_release(y), ts_release(mask);
            return ts_error();
        }
        if (nd) nd->flags |= TSI_NODE_TWICE; /* dY * mask: public ops, linear in dY */
    }
    *y_out = tsi_own(y);
    *mask_out = tsi_own(mask);
    return TS_OK;
}

static ts_status per_tensor(ts_tensor *x, double scale, int64_t zero_point, int64_t quant_min,
                            int64_t quant_max, ts_tensor **y, ts_tensor **mask) {
    const char *op = "fake_quantize_per_tensor_affine";
    *y = NULL;
    if (mask) *mask = NULL;
    if (!check_input(op, x) || !check_range(op, quant_min, quant_max) ||
        !check_param(op, scale, zero_point, quant_min, quant_max, ""))
        return ts_error();
    ts_tensor *m = NULL;
    ts_status st = run_fake(op, "FakeQuantizePerTensorAffineCachemaskBackward0", x, &scale,
                            &zero_point, 1, -1, quant_min, quant_max, y, &m);
    if (mask) *mask = m;
    return st;
}

ts_tensor *ts_fake_quantize_per_tensor_affine(ts_tensor *x, double scale, int64_t zero_point,
                                              int64_t quant_min, int64_t quant_max) {
    ts_tensor *y = NULL;
    per_tensor(x, scale, zero_point, quant_min, quant_max, &y, NULL);
    return y;
}

ts_status ts_fake_quantize_per_tensor_affine_cachemask(ts_tensor *x, double scale,
                                                       int64_t zero_point, int64_t quant_min,
                                                       int64_t quant_max, ts_tensor **y,
                                                       ts_tensor **mask) {
    if (!y || !mask)
        return tsi_error_set(TS_ERR_ARG,
                             "fake_quantize_per_tensor_affine_cachemask: y and mask must not be "
                             "NULL");
    return per_tensor(x, scale, zero_point, quant_min, quant_max, y, mask);
}

/* the channels' parameters read to the host and checked */
static bool read_channel_params(const char *op, ts_tensor *x, ts_tensor *scales, ts_tensor *zps,
                                int axis, int64_t qmin, int64_t qmax, double *s, int64_t *z) {
    const int64_t count = x->shape.dims[axis];
    if (!tsi_is_float(scales->dtype))
        return tsi_error_set(TS_ERR_DTYPE, "%s: scale must be a floating tensor (got %s)", op,
                             tsi_desc(scales)),
               false;
    if (!tsi_is_int(zps->dtype))
        return tsi_error_set(TS_ERR_DTYPE,
                             "%s: zero_point must be an integer tensor (got %s; float zero points "
                             "are the learnable variant's, not supported)",
                             op, tsi_desc(zps)),
               false;
    if (scales->shape.ndim != 1 || zps->shape.ndim != 1 || scales->shape.dims[0] != count ||
        zps->shape.dims[0] != count)
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s: scale and zero_point must be 1-D with input.size(axis) = %lld "
                             "elements (got scale %s, zero_point %s)",
                             op, (long long)count, tsi_desc(scales), tsi_desc(zps)),
               false;
    ts_tensor *s64 = ts_to_dtype(scales, TS_F64), *z64 = s64 ? ts_to_dtype(zps, TS_I64) : NULL;
    if (!z64 || ts_copy_to_host(s64, s, (size_t)count * sizeof(double)) != TS_OK ||
        ts_copy_to_host(z64, z, (size_t)count * sizeof(int64_t)) != TS_OK)
        return false;
    for (int64_t c = 0; c < count; c++) {
        char which[40];
        snprintf(which, sizeof which, " %lld", (long long)c);
        if (!check_param(op, s[c], z[c], qmin, qmax, which)) return false;
    }
    return true;
}

static ts_status per_channel(ts_tensor *x, ts_tensor *scales, ts_tensor *zero_points, int axis,
                             int64_t quant_min, int64_t quant_max, ts_tensor **y,
                             ts_tensor **mask) {
    const char *op = "fake_quantize_per_channel_affine";
    *y = NULL;
    if (mask) *mask = NULL;
    if (!check_input(op, x) || !tsi_check_input(op, scales, "scale") ||
        !tsi_check_input(op, zero_points, "zero_point") || !check_range(op, quant_min, quant_max))
        return ts_error();
    if (axis < 0 || axis >= x->shape.ndim)
        return tsi_error_set(TS_ERR_ARG, "%s: axis %d is out of range for input %s", op, axis,
                             tsi_desc(x));
    const int64_t count = x->shape.dims[axis];
    double *s = malloc(((size_t)count + 1) * sizeof *s);
    int64_t *z = malloc(((size_t)count + 1) * sizeof *z);
    ts_status st;
    if (!s || !z) {
        st = tsi_error_set(TS_ERR_OOM, "%s: out of memory for %lld parameters", op,
                           (long long)count);
    } else {
        ts_scope_begin();
        bool ok = read_channel_params(op, x, scales, zero_points, axis, quant_min, quant_max, s, z);
        ts_scope_end();
        ts_tensor *m = NULL;
        st = ok ? run_fake(op, "FakeQuantizePerChannelAffineCachemaskBackward0", x, s, z, count,
                           axis, quant_min, quant_max, y, &m)
                : ts_error();
        if (mask) *mask = m;
    }
    free(s), free(z);
    return st;
}

ts_tensor *ts_fake_quantize_per_channel_affine(ts_tensor *x, ts_tensor *scales,
                                               ts_tensor *zero_points, int axis, int64_t quant_min,
                                               int64_t quant_max) {
    ts_tensor *y = NULL;
    per_channel(x, scales, zero_points, axis, quant_min, quant_max, &y, NULL);
    return y;
}

ts_status ts_fake_quantize_per_channel_affine_cachemask(ts_tensor *x, ts_tensor *scales,
                                                        ts_tensor *zero_points, int axis,
                                                        int64_t quant_min, int64_t quant_max,
                                                        ts_tensor **y, ts_tensor **mask) {
    if (!y || !mask)
        return tsi_error_set(TS_ERR_ARG,
                             "fake_quantize_per_channel_affine_cachemask: y and mask must not be "
                             "NULL");
    return per_channel(x, scales, zero_points, axis, quant_min, quant_max, y, mask);
}
