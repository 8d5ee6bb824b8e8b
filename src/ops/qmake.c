/* qmake.c — quantized tensors from integers (torch._make_per_tensor_quantized_tensor /
 * _make_per_channel_quantized_tensor, what the .pt reader needs), reshaping them, and the
 * observers' qparams (ts_calculate_qparams); include/tessera/quant.h. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/trace.h"
#include "core/internal.h"
#include "core/quant_desc.h"
#include "ops/quant_internal.h"
#include "tessera/quant.h"

/* the quantized dtype whose integers r holds (int8 -> qint8, uint8 -> quint8, int32 -> qint32) */
static bool int_input(const char *op, ts_tensor *r, ts_dtype *qdt) {
    tsi_init();
    if (!tsi_check_input(op, r, "input")) return false;
    switch (r->dtype) {
    case TS_I8:
        *qdt = TS_QINT8;
        break;
    case TS_U8:
        *qdt = TS_QUINT8;
        break;
    case TS_I32:
        *qdt = TS_QINT32;
        break;
    default:
        return tsi_error_set(TS_ERR_DTYPE, "%s: input must be int8, uint8 or int32 (got %s)", op,
                             tsi_desc(r)),
               false;
    }
    return tsi_meta_refuse(op, r) && tsi_quant_kernel_ok(op, r);
}

/* a new quantized tensor of r's integers and descriptor d (taken) */
static ts_tensor *from_ints(const char *op, ts_tensor *r, ts_dtype qdt, tsi_quant *d) {
    ts_tensor *rc = tsi_contiguous(op, r);
    ts_tensor *q = rc ? tsi_new(op, r->shape, qdt, tsi_device(r)) : NULL;
    if (!q) {
        ts_release(rc);
        tsi_quant_release(d);
        return NULL;
    }
    q->quant = d;
    if (tsi_numel(r->shape)) {
        ts_kview dv = tsi_kview(q), sv = tsi_kview(rc);
        dv.dtype = r->dtype;
        tsi_be(q)->copy(tsi_be(q), tsi_dev_index(q), &dv, &sv);
    }
    ts_release(rc);
    return q;
}

static bool param_ok(const char *op, ts_dtype dt, double s, int64_t zp, int64_t c) {
    int64_t lo, hi;
    tsi_quant_range(dt, &lo, &hi);
    if (!(s > 0) || !isfinite(s) || (float)s == 0.0f || !isfinite(1.0f / (float)s))
        return tsi_error_set(TS_ERR_ARG,
                             "%s: scale %lld must be positive, finite and a normal float32 (got "
                             "%g)",
                             op, (long long)c, s),
               false;
    if (zp < lo || zp > hi)
        return tsi_error_set(TS_ERR_ARG, "%s: zero_point %lld (%lld) is outside [%lld, %lld] (%s)",
                             op, (long long)c, (long long)zp, (long long)lo, (long long)hi,
                             ts_dtype_name(dt)),
               false;
    return true;
}

ts_tensor *ts_make_per_tensor_quantized_tensor(ts_tensor *r, double scale, int64_t zero_point) {
    const char *op = "make_per_tensor_quantized_tensor";
    ts_dtype qdt;
    if (!int_input(op, r, &qdt) || !param_ok(op, qdt, scale, zero_point, 0)) return NULL;
    tsi_quant *d = tsi_quant_new(op, TS_PER_TENSOR_AFFINE, 1);
    if (!d) return NULL;
    d->scales[0] = scale;
    d->zero_points[0] = zero_point;
    /* traced for ONNX export: the integers are the quantized value's ONNX form */
    return tsi_trace(op, &r, 1, tsi_own(from_ints(op, r, qdt, d)), NULL, 0, NULL, 0);
}

ts_tensor *ts_make_per_channel_quantized_tensor(ts_tensor *r, ts_tensor *scales,
                                                ts_tensor *zero_points, int axis) {
    const char *op = "make_per_channel_quantized_tensor";
    ts_dtype qdt;
    if (!int_input(op, r, &qdt) || !tsi_check_input(op, scales, "scales") ||
        !tsi_check_input(op, zero_points, "zero_points"))
        return NULL;
    if (axis < 0 || axis >= r->shape.ndim)
        return tsi_error_set(TS_ERR_ARG, "%s: axis %d is out of range for input %s", op, axis,
                             tsi_desc(r)),
               NULL;
    const int64_t count = r->shape.dims[axis];
    if (!tsi_is_float(scales->dtype) || !tsi_is_int(zero_points->dtype) ||
        scales->shape.ndim != 1 || zero_points->shape.ndim != 1 || scales->shape.dims[0] != count ||
        zero_points->shape.dims[0] != count || count == 0)
        return tsi_error_set(TS_ERR_ARG,
                             "%s: scales (floating) and zero_points (integer) must be 1-D of %lld "
                             "elements, the size of axis %d (got %s, %s)",
                             op, (long long)count, axis, tsi_desc(scales), tsi_desc(zero_points)),
               NULL;
    tsi_quant *d = tsi_quant_new(op, TS_PER_CHANNEL_AFFINE, count);
    if (!d) return NULL;
    d->axis = axis;
    ts_tensor *s64 = tsi_cast(op, scales, TS_F64);
    ts_tensor *z64 = s64 ? tsi_cast(op, zero_points, TS_I64) : NULL;
    bool ok = z64 && ts_copy_to_host(s64, d->scales, (size_t)count * sizeof(double)) == TS_OK &&
              ts_copy_to_host(z64, d->zero_points, (size_t)count * sizeof(int64_t)) == TS_OK;
    ts_release(s64);
    ts_release(z64);
    for (int64_t c = 0; ok && c < count; c++)
        ok = param_ok(op, qdt, d->scales[c], d->zero_points[c], c);
    if (!ok) return tsi_quant_release(d), NULL;
    /* traced for ONNX export: the integers are the quantized value's ONNX form */
    return tsi_trace(op, &r, 1, tsi_own(from_ints(op, r, qdt, d)), NULL, 0, NULL, 0);
}

ts_tensor *ts_quantized_reshape(ts_tensor *q, ts_shape shape) {
    const char *op = "quantized_reshape";
    tsi_init();
    if (!tsi_quant_pt_input(op, q, "input")) return NULL;
    if (shape.ndim < 0 || shape.ndim > TS_MAX_DIMS || tsi_numel(shape) != tsi_numel(q->shape))
        return tsi_error_set(TS_ERR_SHAPE, "%s: shape %s does not hold the %lld elements of %s", op,
                             tsi_shape_str(shape), (long long)tsi_numel(q->shape), tsi_desc(q)),
               NULL;
    for (int i = 0; i < shape.ndim; i++)
        if (shape.dims[i] < 0)
            return tsi_error_set(TS_ERR_SHAPE, "%s: negative size in shape %s", op,
                                 tsi_shape_str(shape)),
                   NULL;
    ts_tensor *r = tsi_new(op, shape, q->dtype, tsi_device(q));
    /* the importer's channels-last views (tsi_quantized_view) are strided: read in q's order */
    ts_tensor *qc = r ? tsi_contiguous(op, q) : NULL;
    if (!qc) return ts_release(r), NULL;
    atomic_fetch_add_explicit(&q->quant->refs, 1, memory_order_relaxed);
    r->quant = q->quant;
    if (tsi_numel(shape)) {
        ts_kview dv = tsi_kview(r), sv = tsi_kview(qc); /* both contiguous: copy as q's shape */
        dv.ndim = sv.ndim;
        memcpy(dv.shape, sv.shape, sizeof dv.shape);
        memcpy(dv.strides, sv.strides, sizeof dv.strides);
        sv.dtype = dv.dtype = q->dtype == TS_QINT8 ? TS_I8 : q->dtype == TS_QUINT8 ? TS_U8 : TS_I32;
        tsi_be(q)->copy(tsi_be(q), tsi_dev_index(q), &dv, &sv);
    }
    ts_release(qc);
    /* traced for ONNX export (Reshape of the integers): reshape's record layout */
    return tsi_trace(op, &q, 1, tsi_own(r), shape.dims, shape.ndim, NULL, 0);
}

/* ------------------------------------------------------------------ observers' qparams */
void tsi_choose_qparams(float lo, float hi, int32_t qmin, int32_t qmax, bool preserve_sparsity,
                        double *scale, int32_t *zero_point) {
    if (lo < 0 && hi > 0 && preserve_sparsity) { /* symmetric: [-(n + 1), n] steps of one scale */
        const int32_t sqmin = -((qmax - qmin) / 2 + 1), sqmax = (qmax - qmin) / 2;
        const double a = fabs(lo / (double)sqmin), b = fabs(hi / (double)sqmax);
        const double m = a > b ? a : b;
        lo = (float)(m * sqmin), hi = (float)(m * sqmax);
    }
    lo = lo < 0.f ? lo : 0.f, hi = hi > 0.f ? hi : 0.f;
    double s = ((double)hi - lo) / (qmax - qmin);
    if ((float)s == 0.0f || isinf(1.0f / (float)s)) s = 0.1;
    const float small = 6.1e-5f; /* fbgemm's SMALL_SCALE_THRESHOLD */
    if (s < small) {
        const float org = (float)s;
        s = small;
        if (lo == 0.0f)
            hi = small * (qmax - qmin);
        else if (hi == 0.0f)
            lo = -small * (qmax - qmin);
        else
            lo *= small / org, hi *= small / org;
    }
    const double zmin = qmin - lo / s, zmax = qmax - hi / s;
    const double emin = fabs((double)qmin) - fabs(lo / s), emax = fabs((double)qmax) - fabs(hi / s);
    double z0 = emin < emax ? zmin : zmax;
    if (lo < 0 && hi > 0 && preserve_sparsity) z0 = (double)(qmin + qmax) / 2;
    *zero_point = z0 < qmin ? qmin : z0 > qmax ? qmax : (int32_t)nearbyint(z0);
    *scale = s;
}

/* which formula qparams_over applies to each (min, max) pair */
typedef struct qp_rule {
    bool fbgemm;    /* tsi_choose_qparams (preserve_sparsity = symmetric), else the observers' */
    bool symmetric; /* the observers': symmetric; fbgemm: preserve_sparsity */
    int64_t symmetric_zero_point;
    double eps; /* the observers' */
} qp_rule;

/* the observers' _calculate_qparams for one pair: PyTorch's float32 tensor arithmetic (the
 * python-float divisors become float32) */
static void observer_qparams(const qp_rule *r, float mn, float mx, int64_t qmin, int64_t qmax,
                             float *sc, int64_t *zp) {
    const float range = (float)(qmax - qmin), half = (float)((double)(qmax - qmin) / 2);
    const float lo = mn < 0.0f ? mn : 0.0f, hi = mx > 0.0f ? mx : 0.0f;
    if (r->symmetric) {
        const float m = -lo > hi ? -lo : hi, s = m / half;
        *sc = s > (float)r->eps ? s : (float)r->eps;
        *zp = r->symmetric_zero_point;
    } else {
        const float s0 = (hi - lo) / range, s = s0 > (float)r->eps ? s0 : (float)r->eps;
        *sc = s;
        const int64_t z = qmin - (int64_t)nearbyintf(lo / s);
        *zp = z < qmin ? qmin : z > qmax ? qmax : z;
    }
}

/* min_val / max_val (float32, one shape, 0-d or 1-D) -> *scale float32 and *zero_point int64 of
 * shape [1] (0-d) or min_val's, element by element by rule r; a 0-d pair that has seen nothing
 * (+inf, -inf) gives scale 1, zero point 0 under the observers' rule */
static ts_status qparams_over(const char *op, ts_tensor *min_val, ts_tensor *max_val,
                              int64_t quant_min, int64_t quant_max, const qp_rule *r,
                              ts_tensor **scale, ts_tensor **zero_point) {
    tsi_init();
    if (!scale || !zero_point)
        return tsi_error_set(TS_ERR_ARG, "%s: scale or zero_point is NULL", op);
    *scale = *zero_point = NULL;
    if (!tsi_check_input(op, min_val, "min_val") || !tsi_check_input(op, max_val, "max_val"))
        return ts_error();
    if (min_val->dtype != TS_F32 || max_val->dtype != TS_F32 ||
        !tsi_shape_equal(min_val->shape, max_val->shape) || min_val->shape.ndim > 1)
        return tsi_error_set(TS_ERR_ARG,
                             "%s: min_val and max_val must be float32 of one shape, 0-d or 1-D "
                             "(got %s, %s)",
                             op, tsi_desc(min_val), tsi_desc(max_val));
    if (quant_min >= quant_max || quant_min < INT32_MIN || quant_max > INT32_MAX)
        return tsi_error_set(TS_ERR_ARG, "%s: quant_min %lld must be below quant_max %lld", op,
                             (long long)quant_min, (long long)quant_max);
    if (!r->fbgemm && (!(r->eps > 0) || !isfinite(r->eps)))
        return tsi_error_set(TS_ERR_ARG, "%s: eps must be positive and finite (got %g)", op,
                             r->eps);
    const int64_t n = tsi_numel(min_val->shape);
    if (n == 0) return tsi_error_set(TS_ERR_ARG, "%s: min_val is empty", op);
    float *mn = malloc((size_t)n * 2 * sizeof(float)), *mx = mn ? mn + n : NULL;
    float *sc = malloc((size_t)n * sizeof(float));
    int64_t *zp = malloc((size_t)n * sizeof(int64_t));
    ts_status st = TS_OK;
    if (!mn || !sc || !zp) {
        st = tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op);
        goto done;
    }
    if ((st = ts_copy_to_host(min_val, mn, (size_t)n * sizeof(float))) != TS_OK ||
        (st = ts_copy_to_host(max_val, mx, (size_t)n * sizeof(float))) != TS_OK)
        goto done;
    const bool scalar = min_val->shape.ndim == 0;
    if (!r->fbgemm && scalar && mn[0] == INFINITY && mx[0] == -INFINITY) { /* PyTorch's */
        sc[0] = 1.0f, zp[0] = 0;
    } else {
        for (int64_t i = 0; i < n; i++) {
            if (!(mn[i] <= mx[i]) || (r->fbgemm && (!isfinite(mn[i]) || !isfinite(mx[i])))) {
                st = tsi_error_set(TS_ERR_ARG,
                                   "%s: min_val %g is not <= max_val %g, both finite (element "
                                   "%lld)",
                                   op, (double)mn[i], (double)mx[i], (long long)i);
                goto done;
            }
            if (r->fbgemm) {
                double s;
                int32_t z;
                tsi_choose_qparams(mn[i], mx[i], (int32_t)quant_min, (int32_t)quant_max,
                                   r->symmetric, &s, &z);
                sc[i] = (float)s, zp[i] = z;
            } else {
                observer_qparams(r, mn[i], mx[i], quant_min, quant_max, &sc[i], &zp[i]);
            }
        }
    }
    {
        const ts_shape s = TS_SHAPE(n);
        *scale = tsi_own(tsi_from_host(op, s, TS_F32, sc, tsi_device(min_val)));
        *zero_point =
            *scale ? tsi_own(tsi_from_host(op, s, TS_I64, zp, tsi_device(min_val))) : NULL;
        if (!*zero_point) {
            st = ts_error();
            *scale = NULL;
        }
    }
done:
    free(mn);
    free(sc);
    free(zp);
    return st;
}

ts_status ts_calculate_qparams(ts_tensor *min_val, ts_tensor *max_val, int64_t quant_min,
                               int64_t quant_max, bool symmetric, int64_t symmetric_zero_point,
                               double eps, ts_tensor **scale, ts_tensor **zero_point) {
    const qp_rule r = {
        .symmetric = symmetric, .symmetric_zero_point = symmetric_zero_point, .eps = eps};
    return qparams_over("calculate_qparams", min_val, max_val, quant_min, quant_max, &r, scale,
                        zero_point);
}

ts_status ts_choose_qparams_minmax(ts_tensor *min_val, ts_tensor *max_val, int64_t quant_min,
                                   int64_t quant_max, bool preserve_sparsity, ts_tensor **scale,
                                   ts_tensor **zero_point) {
    const qp_rule r = {.fbgemm = true, .symmetric = preserve_sparsity};
    return qparams_over("choose_qparams_minmax", min_val, max_val, quant_min, quant_max, &r, scale,
                        zero_point);
}

/* ---- views without copies (ops/quant_internal.h): the ONNX importer's channels_last chains */
static ts_tensor *retyped_view(const char *op, ts_tensor *t, ts_dtype dt) {
    ts_tensor *v = tsi_view_of(t, t->shape, t->strides, t->offset);
    if (v) v->dtype = dt;
    if (v && v->quant && !tsi_is_quantized(dt)) { /* plain integers (tsi_int_view) */
        tsi_quant_release(v->quant);
        v->quant = NULL;
    }
    (void)op;
    return v;
}

ts_tensor *tsi_quantized_view(const char *op, ts_tensor *r, double scale, int64_t zp) {
    ts_dtype qdt;
    if (!int_input(op, r, &qdt) || !param_ok(op, qdt, scale, zp, 0)) return NULL;
    tsi_quant *d = tsi_quant_new(op, TS_PER_TENSOR_AFFINE, 1);
    if (!d) return NULL;
    d->scales[0] = scale;
    d->zero_points[0] = zp;
    ts_tensor *q = retyped_view(op, r, qdt);
    if (!q) return tsi_quant_release(d), NULL;
    q->quant = d;
    return tsi_own(q);
}

ts_tensor *tsi_int_view(const char *op, ts_tensor *q) {
    static const ts_dtype plain[] = {[TS_QINT8] = TS_I8, [TS_QUINT8] = TS_U8, [TS_QINT32] = TS_I32};
    if (!q) return tsi_error_set(TS_ERR_ARG, "%s: input is NULL", op), NULL;
    if (q->dtype != TS_QINT8 && q->dtype != TS_QUINT8 && q->dtype != TS_QINT32)
        return tsi_error_set(TS_ERR_DTYPE, "%s: input must be qint8, quint8 or qint32 (got %s)", op,
                             tsi_desc(q)),
               NULL;
    return tsi_own(retyped_view(op, q, plain[q->dtype]));
}
