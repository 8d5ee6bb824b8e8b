/* rms_norm.c — rms_norm (functional) and nn.RMSNorm: through the backend's fused kernels where it
 * has them (rms_norm_fused.c), else composed from differentiable primitives. */
#include <float.h>
#include <math.h>

#include "amp/autocast.h"
#include "nn/module_internal.h"
#include "nn/rms_norm_fused.h"

static const char *OP = "rms_norm";

static bool rms_check(ts_tensor *x, ts_shape ns, ts_tensor *w) {
    if (!tsi_check_input(OP, x, "input")) return false;
    ts_tensor *all[2] = {x, w};
    ts_device dev;
    if (!tsi_same_device(OP, all, 2, false, &dev)) return false;
    if (!tsi_is_float(x->dtype) || (w && !tsi_is_float(w->dtype)))
        return tsi_error_set(TS_ERR_DTYPE,
                             "%s: expected floating point input and weight, got %s%s%s", OP,
                             tsi_desc(x), w ? " and " : "", w ? tsi_desc(w) : ""),
               false;
    if (ns.ndim < 1 || ns.ndim > x->shape.ndim)
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s: Given normalized_shape=%s, expected input with shape [*, ...%s], "
                             "but got input of size %s",
                             OP, tsi_shape_str(ns), tsi_shape_str(ns), tsi_shape_str(x->shape)),
               false;
    for (int i = 1; i <= ns.ndim; i++)
        if (ns.dims[ns.ndim - i] != x->shape.dims[x->shape.ndim - i])
            return tsi_error_set(TS_ERR_SHAPE,
                                 "%s: Given normalized_shape=%s, expected input with shape "
                                 "[*, ...%s], but got input of size %s",
                                 OP, tsi_shape_str(ns), tsi_shape_str(ns), tsi_shape_str(x->shape)),
                   false;
    bool same = !w || w->shape.ndim == ns.ndim;
    for (int i = 0; same && w && i < ns.ndim; i++) same = w->shape.dims[i] == ns.dims[i];
    if (!same)
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s: Expected weight to be of same shape as normalized_shape, but got "
                             "weight of shape %s and normalized_shape = %s",
                             OP, tsi_shape_str(w->shape), tsi_shape_str(ns)),
               false;
    return true;
}

/* PyTorch's default eps (eps=None): the machine epsilon of the type the op computes in, its
 * opmath type (std::numeric_limits<opmath_t>::epsilon() in ATen's rms_norm): float64's for
 * float64, float32's for float32 and for float16 / bfloat16, which compute in float32 (not
 * torch.finfo(float16).eps: that would swamp the mean of squares of inputs near 1e-3). */
double tsi_rms_norm_default_eps(ts_dtype d) { return d == TS_F64 ? DBL_EPSILON : FLT_EPSILON; }

/* The dtype the fused kernels run in (norm.c's rule: x's own, or float32 copies of a float16 /
 * bfloat16 x rounded back once; a weight of another dtype composes), in *dt; false: the
 * composition runs, as it does for meta tensors (the composition's nodes). */
static bool fused_dtype(ts_tensor *x, ts_tensor *w, int nnorm, ts_dtype *dt) {
    return tsi_device(x).type != TS_META &&
           tsi_norm_fused_dtype(x, w, NULL, nnorm, tsi_rms_norm_fused_takes, dt);
}

double tsi_rms_norm_eps(double eps, ts_dtype d) {
    return eps != 0 ? eps : signbit(eps) ? 0.0 : tsi_rms_norm_default_eps(d);
}

static ts_tensor *rms_norm_op(ts_tensor *x, ts_shape normalized_shape, ts_tensor *w, double eps) {
    if (!rms_check(x, normalized_shape, w)) return NULL;
    eps = tsi_rms_norm_eps(eps, x->dtype);
    const int nnorm = normalized_shape.ndim;
    ts_dtype dt;
    if (fused_dtype(x, w, nnorm, &dt)) {
        if (dt == x->dtype) return tsi_rms_norm_fused(x, nnorm, w, eps);
        ts_scope_begin();
        ts_tensor *y =
            tsi_rms_norm_fused(ts_to_dtype(x, dt), nnorm, w ? ts_to_dtype(w, dt) : NULL, eps);
        y = ts_keep(y ? ts_to_dtype(y, x->dtype) : NULL);
        ts_scope_end();
        return y;
    }
    /* the composition: where the kernels decline, and the reference the tests compare them with */
    ts_dims red = {.n = normalized_shape.ndim};
    for (int i = 0; i < red.n; i++) red.d[i] = x->shape.ndim - red.n + i;
    ts_scope_begin();
    ts_tensor *xc = x->dtype == TS_F16 || x->dtype == TS_BF16 ? ts_to_dtype(x, TS_F32) : x;
    ts_tensor *rstd = ts_rsqrt(ts_add_scalar(ts_mean_dims(ts_square(xc), red, true), eps));
    ts_tensor *y = ts_mul(xc, rstd);
    if (w) y = ts_mul(y, w);
    if (y && y->dtype != x->dtype) y = ts_to_dtype(y, x->dtype);
    y = ts_keep(y);
    ts_scope_end();
    return y;
}

ts_tensor *ts_rms_norm(ts_tensor *x, ts_shape normalized_shape, ts_tensor *w, double eps) {
    tsi_init();
    tsi_ac_frame ac; /* autocast: float32 (CUDA's list, as for layer_norm) */
    TSI_AUTOCAST_ENTER(&ac, OP, &x, &w);
    return tsi_autocast_exit(&ac, rms_norm_op(x, normalized_shape, w, eps));
}

typedef struct rms_m {
    ts_module base;
    ts_shape shape;
    double eps; /* 0: None */
    int w;
} rms_m;

static ts_tensor *rms_forward(ts_module *self, ts_tensor *x) {
    rms_m *m = (rms_m *)self;
    return ts_rms_norm(x, m->shape, tsi_param_at(self, m->w), m->eps);
}

static void rms_extra(ts_module *self, char *buf, size_t n) {
    rms_m *m = (rms_m *)self;
    char eps[40] = "None"; /* eps 0: None; -0.0: an explicit 0.0 (ts_rms_norm) */
    if (m->eps == 0 && signbit(m->eps))
        snprintf(eps, sizeof eps, "0.0");
    else if (m->eps != 0)
        tsi_py_float(m->eps, eps, sizeof eps);
    size_t k = 0;
    for (int i = 0; i < m->shape.ndim && k < n; i++)
        k +=
            (size_t)snprintf(buf + k, n - k, "%s%lld", i ? ", " : "(", (long long)m->shape.dims[i]);
    if (k < n)
        snprintf(buf + k, n - k, "%s), eps=%s, elementwise_affine=%s",
                 m->shape.ndim == 1 ? "," : "", eps, m->w >= 0 ? "True" : "False");
}

ts_module *ts_rms_norm_new(ts_shape normalized_shape, ts_norm_opts o) {
    tsi_init();
    const char *op = "RMSNorm";
    if (!tsi_check_shape(op, normalized_shape)) return NULL;
    bool positive = normalized_shape.ndim > 0;
    for (int i = 0; i < normalized_shape.ndim; i++) positive &= normalized_shape.dims[i] > 0;
    if (!positive)
        return tsi_error_set(TS_ERR_ARG,
                             "%s: normalized_shape must have at least one dim, all positive; got "
                             "%s",
                             op, tsi_shape_str(normalized_shape)),
               NULL;
    rms_m *m = ts_module_alloc(sizeof *m, op, rms_forward);
    if (!m) return NULL;
    m->base.extra_repr = rms_extra;
    m->shape = normalized_shape;
    m->eps = o.eps;
    m->w = -1;
    if (!o.no_affine) {
        if (!tsi_scope_open()) {
            ts_module_free(&m->base);
            return NULL;
        }
        m->w = tsi_register_slot(&m->base, "weight", ts_ones(normalized_shape, (ts_opts){0}), true);
        ts_scope_end();
        if (m->w < 0) {
            ts_module_free(&m->base);
            return NULL;
        }
    }
    return &m->base;
}
