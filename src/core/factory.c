/* factory.c — creating tensors: empty/zeros/ones/full, ranges, eye, from host data, *_like, fill_.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "core/pinned.h"

/* The common tail of every factory: resolve and check the device, allocate, apply the flags. */
static ts_tensor *make(const char *op, ts_shape s, ts_dtype dt, ts_opts o) {
    tsi_init();
    ts_device dev = tsi_resolve_device(o.device);
    if (!tsi_check_device(op, dev)) return NULL;
    if (o.requires_grad && !tsi_is_float(tsi_resolve_dtype(dt)) && !tsi_is_complex(dt))
        return tsi_error_set(TS_ERR_DTYPE,
                             "%s: only tensors of floating point dtype can require gradients, got "
                             "%s",
                             op, ts_dtype_name(dt)),
               NULL;
    if (o.pin_memory && dev.type != TS_CPU)
        return tsi_error_set(TS_ERR_DEVICE, "%s: only cpu tensors can be pinned, not %s", op,
                             ts_device_str(dev)),
               NULL;
    tsi_log_op(op, dev);
    ts_tensor *t = tsi_new(op, s, dt, dev);
    if (!t) return NULL;
    t->requires_grad = o.requires_grad;
    if (o.pin_memory && !tsi_storage_pin(op, t)) return ts_release(t), NULL;
    return t;
}

static void fill_raw(ts_tensor *t, double v) {
    if (tsi_numel(t->shape) == 0) return;
    ts_kview kv = tsi_kview(t);
    if (v == 0 && !signbit(v) && tsi_is_contiguous(t))
        tsi_be(t)->memset_zero(tsi_be(t), tsi_dev_index(t), kv.data, t->storage->nbytes);
    else
        tsi_be(t)->fill(tsi_be(t), tsi_dev_index(t), &kv, v);
}

ts_tensor *ts_empty(ts_shape s, ts_opts o) { return tsi_own(make("empty", s, o.dtype, o)); }

ts_tensor *ts_full(ts_shape s, double v, ts_opts o) {
    ts_tensor *t = make("full", s, o.dtype, o);
    if (t) fill_raw(t, v);
    return tsi_own(t);
}
ts_tensor *ts_zeros(ts_shape s, ts_opts o) {
    ts_tensor *t = make("zeros", s, o.dtype, o);
    if (t) fill_raw(t, 0);
    return tsi_own(t);
}
ts_tensor *ts_ones(ts_shape s, ts_opts o) {
    ts_tensor *t = make("ones", s, o.dtype, o);
    if (t) fill_raw(t, 1);
    return tsi_own(t);
}
ts_tensor *ts_scalar(double v, ts_opts o) {
    ts_tensor *t = make("scalar", TS_SHAPE(), o.dtype, o);
    if (t) fill_raw(t, v);
    return tsi_own(t);
}

/* Host data of dtype `src_dt` -> a tensor of `dt` on the options' device. */
static ts_tensor *from_host(const char *op, ts_shape s, ts_dtype src_dt, const void *data,
                            ts_dtype dt, ts_opts o) {
    tsi_init();
    if (!tsi_check_shape(op, s)) return NULL;
    int64_t n = tsi_numel(s);
    if (n > 0 && !data) return tsi_error_set(TS_ERR_ARG, "%s: host data is NULL", op), NULL;
    ts_opts staged = o;
    staged.requires_grad = false;
    ts_tensor *t = make(op, s, src_dt, staged);
    if (!t) return NULL;
    size_t nbytes = (size_t)n * tsi_dtype_size(src_dt);
    if (nbytes) tsi_be(t)->copy_h2d(tsi_be(t), tsi_dev_index(t), tsi_kview(t).data, data, nbytes);
    if (tsi_resolve_dtype(dt) != src_dt) {
        ts_tensor *c = tsi_cast(op, t, dt);
        ts_release(t);
        if (!c) return NULL;
        t = c;
    }
    if (o.requires_grad) {
        if (!tsi_is_float(t->dtype)) {
            tsi_error_set(TS_ERR_DTYPE,
                          "%s: only tensors of floating point dtype can require gradients, got %s",
                          op, ts_dtype_name(t->dtype));
            ts_release(t); /* after the message, which reads t */
            return NULL;
        }
        t->requires_grad = true;
    }
    return t;
}

ts_tensor *tsi_from_host(const char *op, ts_shape s, ts_dtype dt, const void *host_data,
                         ts_device dev) {
    return from_host(op, s, dt, host_data, dt, (ts_opts){.dtype = dt, .device = dev});
}

ts_tensor *ts_from_data(ts_shape s, ts_dtype dt, const void *host_data, ts_opts o) {
    dt = tsi_resolve_dtype(dt);
    if ((unsigned)dt >= TS_DTYPE_COUNT)
        return tsi_error_set(TS_ERR_DTYPE, "from_data: invalid dtype %d", (int)dt), NULL;
    return tsi_own(from_host("from_data", s, dt, host_data, o.dtype ? o.dtype : dt, o));
}
ts_tensor *ts_tensor_f32(ts_shape s, const float *d, ts_opts o) {
    return tsi_own(from_host("tensor_f32", s, TS_F32, d, o.dtype ? o.dtype : TS_F32, o));
}
ts_tensor *ts_tensor_f64(ts_shape s, const double *d, ts_opts o) {
    return tsi_own(from_host("tensor_f64", s, TS_F64, d, o.dtype ? o.dtype : TS_F64, o));
}
ts_tensor *ts_tensor_i64(ts_shape s, const int64_t *d, ts_opts o) {
    return tsi_own(from_host("tensor_i64", s, TS_I64, d, o.dtype ? o.dtype : TS_I64, o));
}
ts_tensor *ts_tensor_i32(ts_shape s, const int32_t *d, ts_opts o) {
    return tsi_own(from_host("tensor_i32", s, TS_I32, d, o.dtype ? o.dtype : TS_I32, o));
}

/* Ranges are computed on the host in double, as PyTorch's CPU kernels do, then converted. */
static ts_tensor *from_doubles(const char *op, ts_shape s, const double *v, ts_dtype dt,
                               ts_opts o) {
    return from_host(op, s, TS_F64, v, dt, o);
}

static bool is_integral(double x) { return isfinite(x) && x == floor(x); }

ts_tensor *ts_arange(double start, double end, double step, ts_opts o) {
    if (step == 0 || !isfinite(step) || !isfinite(start) || !isfinite(end))
        return tsi_error_set(TS_ERR_ARG,
                             "arange: step must be nonzero and bounds finite (start %g, "
                             "end %g, step %g)",
                             start, end, step),
               NULL;
    if ((step > 0 && end < start) || (step < 0 && end > start))
        return tsi_error_set(TS_ERR_ARG,
                             "arange: upper bound and larger bound inconsistent with step sign "
                             "(start %g, end %g, step %g)",
                             start, end, step),
               NULL;
    double count = ceil((end - start) / step);
    if (count > (double)(INT64_MAX / 16))
        return tsi_error_set(TS_ERR_ARG, "arange: %g elements are too many", count), NULL;
    int64_t n = (int64_t)count;
    /* PyTorch infers int64 when every bound is integral and no dtype is given */
    ts_dtype dt =
        o.dtype ? o.dtype
                : (is_integral(start) && is_integral(end) && is_integral(step) ? TS_I64 : TS_F32);
    if (!tsi_tensor_cap_check("arange", n)) return NULL;
    double *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    if (!v) return tsi_error_set(TS_ERR_OOM, "arange: out of host memory"), NULL;
    double lo = INFINITY, hi = -INFINITY;
    for (int64_t i = 0; i < n; i++) {
        v[i] = start + (double)i * step;
        lo = fmin(lo, v[i]), hi = fmax(hi, v[i]);
    }
    ts_tensor *t = from_doubles("arange", TS_SHAPE(n), v, dt, o);
    free(v);
    /* integer positions made here are known to lie in [0, hi + 1): an index check reads none of
     * them back (a transformer's position embedding, core/index_range.c) */
    if (t && (dt == TS_I64 || dt == TS_I32) && n > 0 && lo >= 0 && hi < 2e9)
        tsi_index_range_note(t, (int64_t)hi + 1);
    return tsi_own(t);
}

ts_tensor *ts_linspace(double start, double end, int64_t steps, ts_opts o) {
    if (steps < 0)
        return tsi_error_set(TS_ERR_ARG, "linspace: number of steps must be non-negative, got %lld",
                             (long long)steps),
               NULL;
    if (!tsi_tensor_cap_check("linspace", steps)) return NULL;
    double *v = malloc((size_t)(steps ? steps : 1) * sizeof *v);
    if (!v) return tsi_error_set(TS_ERR_OOM, "linspace: out of host memory"), NULL;
    double step = steps > 1 ? (end - start) / (double)(steps - 1) : 0;
    int64_t half = steps / 2; /* PyTorch fills the second half from the end for symmetry */
    for (int64_t i = 0; i < steps; i++)
        v[i] = i < half ? start + step * (double)i : end - step * (double)(steps - 1 - i);
    if (steps == 1) v[0] = start; /* torch.linspace(3, 7, 1) is [3.] */
    ts_tensor *t = from_doubles("linspace", TS_SHAPE(steps), v, o.dtype, o);
    free(v);
    return tsi_own(t);
}

ts_tensor *ts_eye(int64_t n, int64_t m, ts_opts o) {
    if (m <= 0) m = n;
    if (n < 0)
        return tsi_error_set(TS_ERR_ARG, "eye: n must be non-negative, got %lld", (long long)n),
               NULL;
    ts_tensor *t = make("eye", TS_SHAPE(n, m), o.dtype, o);
    if (!t) return NULL;
    fill_raw(t, 0);
    /* the diagonal is a strided view with stride m + 1 */
    int64_t k = n < m ? n : m;
    ts_kview diag = tsi_kview(t);
    diag.ndim = 1;
    diag.shape[0] = k;
    diag.strides[0] = m + 1;
    if (k) tsi_be(t)->fill(tsi_be(t), tsi_dev_index(t), &diag, 1);
    return tsi_own(t);
}

static ts_tensor *like(const char *op, ts_tensor *t, bool fill, double v) {
    if (!tsi_check_input(op, t, "tensor")) return NULL;
    ts_tensor *r = make(op, t->shape, t->dtype, (ts_opts){.device = tsi_device(t)});
    if (r && fill) fill_raw(r, v);
    return tsi_own(r);
}
ts_tensor *ts_empty_like(ts_tensor *t) { return like("empty_like", t, false, 0); }
ts_tensor *ts_zeros_like(ts_tensor *t) { return like("zeros_like", t, true, 0); }
ts_tensor *ts_ones_like(ts_tensor *t) { return like("ones_like", t, true, 1); }
ts_tensor *ts_full_like(ts_tensor *t, double v) { return like("full_like", t, true, v); }
