/* quantize.c — quantized tensors: quantize per tensor / channel / group, dequantize, int_repr, the
 * parameter accessors and choose_qparams (include/tessera/quant.h, decision 0042). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/trace.h"
#include "core/capture.h"
#include "core/internal.h"
#include "core/quant_desc.h"
#include "ops/quant_internal.h"

bool tsi_quant_kernel_ok(const char *op, const ts_tensor *t) {
    const ts_backend *be = t->storage->be;
    if (tsi_capturing_on(tsi_device(t))) return tsi_capture_refuse(op, "a quantized op"), false;
    if (!be->quant || !be->qlinear)
        return tsi_error_set(TS_ERR_UNSUPPORTED, "%s: no quantized kernels on %s (input: %s)", op,
                             ts_device_str(tsi_device(t)), tsi_desc(t)),
               false;
    return true;
}

bool tsi_quant_pt_input(const char *op, ts_tensor *t, const char *what) {
    if (!tsi_check_input(op, t, what)) return false;
    if (!tsi_is_quantized(t->dtype) || t->dtype == TS_QUINT4X2 || !t->quant ||
        t->quant->scheme != TS_PER_TENSOR_AFFINE)
        return tsi_error_set(TS_ERR_DTYPE,
                             "%s: %s must be qint8, quint8 or qint32 quantized per tensor (got %s)",
                             op, what, tsi_desc(t)),
               false;
    return tsi_meta_refuse(op, t) && tsi_quant_kernel_ok(op, t);
}

static bool check_qdtype(const char *op, ts_dtype dt) {
    if (tsi_is_quantized(dt)) return true;
    return tsi_error_set(TS_ERR_DTYPE,
                         "%s: dtype must be qint8, quint8, qint32 or quint4x2 (got %s)", op,
                         (unsigned)dt < TS_DTYPE_COUNT ? ts_dtype_name(dt) : "an invalid dtype"),
           false;
}

static bool check_float32_input(const char *op, ts_tensor *x) {
    if (x->dtype == TS_F32) return true;
    return tsi_error_set(TS_ERR_DTYPE,
                         "%s: input must be float32, as PyTorch's (got %s); cast it first", op,
                         tsi_desc(x)),
           false;
}

/* scale > 0, finite, and usable as float32 (nonzero, finite reciprocal); zero point in range.
 * which: "" for per tensor, or " 3" naming a channel / group. */
static bool check_param(const char *op, ts_dtype dt, double scale, int64_t zp, const char *which) {
    if (!(scale > 0) || !isfinite(scale) || (float)scale == 0.0f || !isfinite(1.0f / (float)scale))
        return tsi_error_set(TS_ERR_ARG,
                             "%s: scale%s must be positive, finite and a normal float32 (got %g)",
                             op, which, scale),
               false;
    int64_t lo, hi;
    tsi_quant_range(dt, &lo, &hi);
    if (zp < lo || zp > hi)
        return tsi_error_set(TS_ERR_ARG,
                             "%s: zero_point%s %lld is outside [%lld, %lld], the range of %s", op,
                             which, (long long)zp, (long long)lo, (long long)hi, ts_dtype_name(dt)),
               false;
    return true;
}

/* A new contiguous quantized tensor of x's shape on x's device (quint4x2: numel / 2 bytes), its
 * descriptor attached (taken: released on failure). */
static ts_tensor *new_quantized(const char *op, ts_shape s, ts_dtype dt, ts_device dev,
                                tsi_quant *q) {
    ts_tensor *t;
    if (dt == TS_QUINT4X2) {
        t = tsi_new(op, TS_SHAPE(tsi_numel(s) / 2), TS_U8, dev);
        if (t) {
            t->dtype = TS_QUINT4X2;
            t->shape = s;
            tsi_contiguous_strides(&s, t->strides);
        }
    } else {
        t = tsi_new(op, s, dt, dev);
    }
    if (!t) {
        tsi_quant_release(q);
        return NULL;
    }
    t->quant = q;
    return t;
}

/* the element layout [outer, channels, inner] of shape s around dim axis */
static void split_at(ts_shape s, int axis, int64_t *outer, int64_t *channels, int64_t *inner) {
    *outer = 1, *inner = 1;
    for (int i = 0; i < axis; i++) *outer *= s.dims[i];
    for (int i = axis + 1; i < s.ndim; i++) *inner *= s.dims[i];
    *channels = s.dims[axis];
}

/* the kernel reads q's integers densely from q's first element: a strided q (the importer's
 * channels-last views) is copied contiguous first (the copy keeps the descriptor) */
static void run_quant(ts_tensor *q, ts_quant_kind kind, float *x, uint8_t *u) {
    if (!tsi_is_contiguous(q)) {
        ts_tensor *c = tsi_contiguous("dequantize", q);
        if (c) run_quant(c, kind, x, u);
        ts_release(c);
        return;
    }
    const tsi_quant *d = q->quant;
    ts_quant_args a = {.kind = kind,
                       .qdtype = q->dtype,
                       .q = tsi_kview(q).data, /* quint4x2: offset 0, never a view */
                       .x = x,
                       .u = u,
                       .scales = d->scales,
                       .zero_points = d->zero_points,
                       .per_tensor = d->scheme == TS_PER_TENSOR_AFFINE,
                       .grouped = d->scheme == TS_PER_GROUP_AFFINE};
    tsi_quant_range(q->dtype, &a.qmin, &a.qmax);
    const int64_t n = tsi_numel(q->shape);
    if (n == 0) return;
    if (d->scheme == TS_PER_CHANNEL_AFFINE)
        split_at(q->shape, d->axis, &a.outer, &a.channels, &a.inner);
    else if (d->scheme == TS_PER_GROUP_AFFINE)
        a.inner = d->group_size, a.channels = q->shape.dims[q->shape.ndim - 1] / d->group_size,
        a.outer = n / (a.inner * a.channels);
    else
        a.outer = 1, a.channels = 1, a.inner = n;
    tsi_be(q)->quant(tsi_be(q), tsi_dev_index(q), &a);
}

/* x checked, float32; q's descriptor made: quantize into a new tensor */
static ts_tensor *quantize_into(const char *op, ts_tensor *x, ts_dtype dt, tsi_quant *d) {
    if (dt == TS_QUINT4X2 && (x->shape.ndim == 0 || x->shape.dims[x->shape.ndim - 1] % 2))
        return tsi_quant_release(d),
               tsi_error_set(TS_ERR_SHAPE,
                             "%s: quint4x2 packs two values a byte along the last dim, which "
                             "must be even (input: %s)",
                             op, tsi_desc(x)),
               NULL;
    ts_tensor *xc = tsi_contiguous(op, x);
    if (!xc) return tsi_quant_release(d), NULL;
    ts_tensor *q = new_quantized(op, x->shape, dt, tsi_device(x), d);
    if (q) run_quant(q, TS_QK_QUANTIZE, (float *)(void *)tsi_kview(xc).data, NULL);
    ts_release(xc);
    return q;
}

static bool quant_input(const char *op, ts_tensor *x, ts_dtype dt) {
    tsi_init();
    return tsi_check_input(op, x, "input") && check_qdtype(op, dt) && check_float32_input(op, x) &&
           tsi_meta_refuse(op, x) && tsi_quant_kernel_ok(op, x);
}

ts_tensor *tsi_quantize_per_tensor(const char *op, ts_tensor *x, double scale, int64_t zero_point,
                                   ts_dtype dtype) {
    if (!check_param(op, dtype, scale, zero_point, "")) return NULL;
    tsi_quant *d = tsi_quant_new(op, TS_PER_TENSOR_AFFINE, 1);
    if (!d) return NULL;
    d->scales[0] = scale;
    d->zero_points[0] = zero_point;
    return quantize_into(op, x, dtype, d);
}

ts_tensor *ts_quantize_per_tensor(ts_tensor *x, double scale, int64_t zero_point, ts_dtype dtype) {
    const char *op = "quantize_per_tensor";
    if (!quant_input(op, x, dtype)) return NULL;
    /* traced for ONNX export (QuantizeLinear); the output carries the parameters */
    return tsi_trace(op, &x, 1, tsi_own(tsi_quantize_per_tensor(op, x, scale, zero_point, dtype)),
                     NULL, 0, NULL, 0);
}

/* scales (floating) and zero points (integer) of count elements read to the host into d */
static bool read_params(const char *op, ts_tensor *scales, ts_tensor *zps, int64_t count,
                        tsi_quant *d) {
    if (!tsi_is_float(scales->dtype))
        return tsi_error_set(TS_ERR_DTYPE, "%s: scales must be a floating tensor (got %s)", op,
                             tsi_desc(scales)),
               false;
    if (!tsi_is_int(zps->dtype))
        return tsi_error_set(TS_ERR_DTYPE, "%s: zero_points must be an integer tensor (got %s)", op,
                             tsi_desc(zps)),
               false;
    if (tsi_numel(scales->shape) != count || tsi_numel(zps->shape) != count)
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s: expected %lld scales and zero_points, one per channel (got "
                             "scales %s, zero_points %s)",
                             op, (long long)count, tsi_desc(scales), tsi_desc(zps)),
               false;
    ts_tensor *s64 = tsi_cast(op, scales, TS_F64);
    ts_tensor *z64 = s64 ? tsi_cast(op, zps, TS_I64) : NULL;
    bool ok = z64 && ts_copy_to_host(s64, d->scales, (size_t)count * sizeof(double)) == TS_OK &&
              ts_copy_to_host(z64, d->zero_points, (size_t)count * sizeof(int64_t)) == TS_OK;
    ts_release(s64);
    ts_release(z64);
    return ok;
}

static bool check_params(const char *op, ts_dtype dt, const tsi_quant *d) {
    for (int64_t c = 0; c < d->count; c++) {
        char which[40];
        snprintf(which, sizeof which, " %lld", (long long)c);
        if (!check_param(op, dt, d->scales[c], d->zero_points[c], which)) return false;
    }
    return true;
}

ts_tensor *ts_quantize_per_channel(ts_tensor *x, ts_tensor *scales, ts_tensor *zero_points,
                                   int axis, ts_dtype dtype) {
    const char *op = "quantize_per_channel";
    if (!quant_input(op, x, dtype) || !tsi_check_input(op, scales, "scales") ||
        !tsi_check_input(op, zero_points, "zero_points"))
        return NULL;
    if (x->shape.ndim == 0)
        return tsi_error_set(TS_ERR_SHAPE, "%s: input must have at least one dim (got %s)", op,
                             tsi_desc(x)),
               NULL;
    if (axis < 0 || axis >= x->shape.ndim)
        return tsi_error_set(TS_ERR_ARG, "%s: axis %d is out of range for input %s", op, axis,
                             tsi_desc(x)),
               NULL;
    if (scales->shape.ndim != 1 || zero_points->shape.ndim != 1)
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s: scales and zero_points must be 1-D (got scales %s, zero_points "
                             "%s)",
                             op, tsi_desc(scales), tsi_desc(zero_points)),
               NULL;
    const int64_t count = x->shape.dims[axis];
    if (count == 0)
        return tsi_error_set(TS_ERR_SHAPE, "%s: input %s has no channels along axis %d", op,
                             tsi_desc(x), axis),
               NULL;
    tsi_quant *d = tsi_quant_new(op, TS_PER_CHANNEL_AFFINE, count);
    if (!d) return NULL;
    d->axis = axis;
    if (!read_params(op, scales, zero_points, count, d) || !check_params(op, dtype, d))
        return tsi_quant_release(d), NULL;
    return tsi_trace(op, &x, 1, tsi_own(quantize_into(op, x, dtype, d)), NULL, 0, NULL, 0);
}

ts_tensor *ts_quantize_per_group(ts_tensor *x, ts_tensor *scales, ts_tensor *zero_points,
                                 int64_t group_size, ts_dtype dtype) {
    const char *op = "quantize_per_group";
    if (!quant_input(op, x, dtype) || !tsi_check_input(op, scales, "scales") ||
        !tsi_check_input(op, zero_points, "zero_points"))
        return NULL;
    if (dtype == TS_QINT32)
        return tsi_error_set(TS_ERR_DTYPE, "%s: dtype must be quint4x2, qint8 or quint8", op), NULL;
    const int nd = x->shape.ndim;
    const int64_t last = nd ? x->shape.dims[nd - 1] : 0;
    if (nd == 0 || last == 0)
        return tsi_error_set(TS_ERR_SHAPE, "%s: input must have a nonempty last dim (got %s)", op,
                             tsi_desc(x)),
               NULL;
    if (group_size < 1 || last % group_size)
        return tsi_error_set(TS_ERR_ARG,
                             "%s: group_size %lld must be positive and divide the last dim %lld",
                             op, (long long)group_size, (long long)last),
               NULL;
    ts_shape ps = x->shape;
    ps.dims[nd - 1] = last / group_size;
    if (!tsi_shape_equal(scales->shape, ps) || !tsi_shape_equal(zero_points->shape, ps))
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s: scales and zero_points must have shape %s, the input's with "
                             "the last dim in groups (got scales %s, zero_points %s)",
                             op, tsi_shape_str(ps), tsi_desc(scales), tsi_desc(zero_points)),
               NULL;
    tsi_quant *d = tsi_quant_new(op, TS_PER_GROUP_AFFINE, tsi_numel(ps));
    if (!d) return NULL;
    d->group_size = group_size;
    d->axis = nd - 1;
    if (!read_params(op, scales, zero_points, d->count, d) || !check_params(op, dtype, d))
        return tsi_quant_release(d), NULL;
    return tsi_trace(op, &x, 1, tsi_own(quantize_into(op, x, dtype, d)), NULL, 0, NULL, 0);
}

/* q checked: a quantized tensor (TS_ERR_DTYPE otherwise) */
static bool quantized_input(const char *op, ts_tensor *q) {
    tsi_init();
    if (!tsi_check_input(op, q, "input")) return false;
    if (!tsi_is_quantized(q->dtype) || !q->quant)
        return tsi_error_set(TS_ERR_DTYPE, "%s: expected a quantized tensor (got %s)", op,
                             tsi_desc(q)),
               false;
    return true;
}

ts_tensor *ts_dequantize(ts_tensor *q) {
    const char *op = "dequantize";
    if (!quantized_input(op, q) || !tsi_meta_refuse(op, q) || !tsi_quant_kernel_ok(op, q))
        return NULL;
    ts_tensor *x = tsi_new(op, q->shape, TS_F32, tsi_device(q));
    if (x) run_quant(q, TS_QK_DEQUANTIZE, (float *)(void *)x->storage->data, NULL);
    return tsi_trace(op, &q, 1, tsi_own(x), NULL, 0, NULL, 0);
}

ts_tensor *ts_int_repr(ts_tensor *q) {
    const char *op = "int_repr";
    if (!quantized_input(op, q) || !tsi_meta_refuse(op, q) || !tsi_quant_kernel_ok(op, q))
        return NULL;
    static const ts_dtype plain[] = {
        [TS_QINT8] = TS_I8, [TS_QUINT8] = TS_U8, [TS_QINT32] = TS_I32, [TS_QUINT4X2] = TS_U8};
    ts_tensor *r = tsi_new(op, q->shape, plain[q->dtype], tsi_device(q));
    if (!r || tsi_numel(q->shape) == 0) return tsi_trace(op, &q, 1, tsi_own(r), NULL, 0, NULL, 0);
    if (q->dtype == TS_QUINT4X2) {
        run_quant(q, TS_QK_INT_REPR, NULL, (uint8_t *)r->storage->data);
    } else { /* the same bytes: a copy between views of one dtype */
        ts_kview dv = tsi_kview(r), sv = tsi_kview(q);
        sv.dtype = r->dtype;
        tsi_be(q)->copy(tsi_be(q), tsi_dev_index(q), &dv, &sv);
    }
    return tsi_trace(op, &q, 1, tsi_own(r), NULL, 0, NULL, 0);
}

ts_qscheme ts_qscheme_of(ts_tensor *q) {
    return quantized_input("qscheme", q) ? q->quant->scheme : TS_QSCHEME_NONE;
}

static bool scheme_is(const char *op, ts_tensor *q, bool per_tensor) {
    if (!quantized_input(op, q)) return false;
    const bool pt = q->quant->scheme == TS_PER_TENSOR_AFFINE;
    if (pt == per_tensor) return true;
    return tsi_error_set(TS_ERR_ARG, "%s: expected a %s quantized tensor (got %s, %s)", op,
                         per_tensor ? "per-tensor" : "per-channel or per-group", tsi_desc(q),
                         pt ? "per tensor" : "per channel or group"),
           false;
}

double ts_q_scale(ts_tensor *q) {
    return scheme_is("q_scale", q, true) ? q->quant->scales[0] : NAN;
}

ts_status ts_q_zero_point(ts_tensor *q, int64_t *zero_point) {
    if (!zero_point) return tsi_error_set(TS_ERR_ARG, "q_zero_point: zero_point is NULL");
    if (!scheme_is("q_zero_point", q, true)) return ts_error();
    *zero_point = q->quant->zero_points[0];
    return TS_OK;
}

/* the parameters' shape: [C] per channel, q.shape[:-1] + [groups] per group */
static ts_shape param_shape(const ts_tensor *q) {
    if (q->quant->scheme == TS_PER_CHANNEL_AFFINE) return TS_SHAPE(q->quant->count);
    ts_shape s = q->shape;
    s.dims[s.ndim - 1] /= q->quant->group_size;
    return s;
}

ts_tensor *ts_q_per_channel_scales(ts_tensor *q) {
    const char *op = "q_per_channel_scales";
    if (!scheme_is(op, q, false)) return NULL;
    return tsi_own(tsi_from_host(op, param_shape(q), TS_F64, q->quant->scales, ts_cpu()));
}

ts_tensor *ts_q_per_channel_zero_points(ts_tensor *q) {
    const char *op = "q_per_channel_zero_points";
    if (!scheme_is(op, q, false)) return NULL;
    return tsi_own(tsi_from_host(op, param_shape(q), TS_I64, q->quant->zero_points, ts_cpu()));
}

int ts_q_per_channel_axis(ts_tensor *q) {
    return scheme_is("q_per_channel_axis", q, false) ? q->quant->axis : -1;
}

int64_t ts_q_group_size(ts_tensor *q) {
    if (!quantized_input("q_group_size", q)) return -1;
    if (q->quant->scheme != TS_PER_GROUP_AFFINE)
        return tsi_error_set(TS_ERR_ARG,
                             "q_group_size: expected a per-group quantized tensor (got %s)",
                             tsi_desc(q)),
               -1;
    return q->quant->group_size;
}
