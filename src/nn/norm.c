/* norm.c — batch_norm and layer_norm, composed from differentiable primitives; both take the
 * backend's fused kernels where it has them (batch_norm_fused.c in training, layer_norm_fused.c).
 */
#include "amp/autocast.h"
#include "autograd/trace.h"
#include "nn/functional_internal.h"

/* ------------------------------------------------------------------ the fused kernels' dtype */
static bool batch_norm_takes(ts_tensor *x, int nnorm, ts_dtype dt) {
    (void)nnorm;
    return tsi_batch_norm_fused_takes(x, dt);
}

/* The dtype a norm over x (affine parameters w, b or NULL) runs in through the fused kernels, in
 * *dt; false: the composition runs. x's own dtype when the kernels take it; for a float16 /
 * bfloat16 x, float32 when they take that (the cpu backend's kernels are float32 / float64 only):
 * the op then runs on float32 copies and rounds its output to x's dtype once at the end, as
 * PyTorch's CPU kernels for half compute in float. Parameters of another dtype than x's (a
 * float16 input with float32 parameters) keep the composition's promotion. */
bool tsi_norm_fused_dtype(ts_tensor *x, ts_tensor *w, ts_tensor *b, int nnorm,
                          tsi_norm_takes_fn takes, ts_dtype *dt) {
    if ((w && w->dtype != x->dtype) || (b && b->dtype != x->dtype)) return false;
    *dt = x->dtype;
    if (takes(x, nnorm, *dt)) return true;
    *dt = TS_F32;
    return (x->dtype == TS_F16 || x->dtype == TS_BF16) && takes(x, nnorm, *dt);
}

/* t as dtype dt: itself when it has it (or is NULL), else its differentiable cast (owned by the
 * open scope; autograd brings the gradient back to t's dtype through ToCopyBackward0). */
static ts_tensor *as_dtype(ts_tensor *t, ts_dtype dt) {
    return t && t->dtype != dt ? ts_to_dtype(t, dt) : t;
}

static bool is_half(ts_dtype dt) { return dt == TS_F16 || dt == TS_BF16; }

/* The dtypes batch_norm's fused kernels run in: *dt for the input, *pt for the affine
 * parameters; false: the composition runs. A float16 / bfloat16 x with float32 parameters (or its
 * own dtype's, cast to float32) runs as it is where the kernels take it: PyTorch's CPU kernel for
 * a half input (autocast's batch norm), statistics, parameters and math in float32, the output
 * rounded once to x's dtype. Otherwise fused_dtype's choice, the parameters in the same dtype. */
static bool batch_norm_dtypes(ts_tensor *x, ts_tensor *w, ts_tensor *b, ts_dtype *dt,
                              ts_dtype *pt) {
    const ts_dtype xd = x->dtype;
    if (is_half(xd) && (!w || w->dtype == TS_F32 || w->dtype == xd) &&
        (!b || b->dtype == TS_F32 || b->dtype == xd) && batch_norm_takes(x, 0, xd)) {
        *dt = xd, *pt = TS_F32;
        return true;
    }
    if (!tsi_norm_fused_dtype(x, w, b, 0, batch_norm_takes, dt)) return false;
    *pt = *dt;
    return true;
}

/* A per-channel tensor ([C] or NULL) fits channel count c. */
static bool check_channel(const char *op, ts_tensor *t, const char *what, int64_t c) {
    if (!t || (t->shape.ndim == 1 && t->shape.dims[0] == c)) return true;
    tsi_error_set(TS_ERR_SHAPE, "%s: %s should contain %lld elements, got %s", op, what,
                  (long long)c, tsi_desc(t));
    return false;
}

static bool check_float(const char *op, ts_tensor *t, const char *what) {
    if (!t || tsi_is_float(t->dtype)) return true;
    tsi_error_set(TS_ERR_DTYPE, "%s: expected a floating point %s, got %s", op, what, tsi_desc(t));
    return false;
}

static bool batch_norm_check(const char *op, ts_tensor *x, ts_tensor *rm, ts_tensor *rv,
                             ts_tensor *w, ts_tensor *b, bool training) {
    if (!tsi_check_input(op, x, "input")) return false;
    ts_tensor *all[5] = {x, rm, rv, w, b};
    ts_device dev;
    if (!tsi_same_device(op, all, 5, false, &dev)) return false;
    /* an empty 1-d input has no channels (PyTorch's rule: its output is an empty copy) */
    const bool empty_1d = x->shape.ndim == 1 && x->shape.dims[0] == 0;
    if (x->shape.ndim < 2 && !empty_1d)
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s: expected an input [N, C, ...] of 2 or more dims, got %s", op,
                             tsi_desc(x)),
               false;
    const int64_t c = empty_1d ? 0 : x->shape.dims[1];
    if (!check_channel(op, rm, "running_mean", c) || !check_channel(op, rv, "running_var", c) ||
        !check_channel(op, w, "weight", c) || !check_channel(op, b, "bias", c))
        return false;
    if (!check_float(op, x, "input") || !check_float(op, rm, "running_mean") ||
        !check_float(op, rv, "running_var") || !check_float(op, w, "weight") ||
        !check_float(op, b, "bias"))
        return false;
    if (!training && (!rm || !rv))
        return tsi_error_set(TS_ERR_ARG,
                             "%s: running_mean and running_var must be defined in "
                             "evaluation mode",
                             op),
               false;
    if (training && c > 0 && tsi_numel(x->shape) / c == 1)
        return tsi_error_set(TS_ERR_ARG,
                             "%s: Expected more than 1 value per channel when training, got input "
                             "size %s",
                             op, tsi_shape_str(x->shape)),
               false;
    return true;
}

/* (1 - momentum) * running + momentum * factor * stat, out of place (NULL without running) */
static ts_tensor *running_next(ts_tensor *running, ts_tensor *stat, double momentum,
                               double factor) {
    if (!running) return NULL;
    ts_tensor *s = ts_mul_scalar(ts_reshape(stat, running->shape), momentum * factor);
    return ts_add(ts_mul_scalar(running, 1 - momentum), s);
}

/* running = next in place (a copy kernel: nothing left to fail), its version bumped */
static void running_set(ts_tensor *running, ts_tensor *next) {
    if (!running) return;
    ts_kview dv = tsi_kview(running), sv = tsi_kview(next);
    tsi_be(running)->copy(tsi_be(running), tsi_dev_index(running), &dv, &sv);
    tsi_bump_version(running);
}

/* Both running statistics from the batch's mean and biased variance (over count values each) */
static void update_running_stats(ts_tensor *running_mean, ts_tensor *running_var, ts_tensor *mean,
                                 ts_tensor *var, double momentum, int64_t count) {
    /* both computed before either changes, so that a failure (out of memory) leaves both as they
     * were; the running variance is the unbiased estimate, as PyTorch's */
    ts_no_grad_begin();
    const ts_status before = ts_error();
    ts_tensor *m = running_next(running_mean, mean, momentum, 1.0);
    ts_tensor *v = running_next(running_var, var, momentum, (double)count / (double)(count - 1));
    if ((m || !running_mean) && (v || !running_var) && (before != TS_OK || ts_error() == TS_OK)) {
        running_set(running_mean, m);
        running_set(running_var, v);
    }
    ts_no_grad_end();
}

static ts_tensor *batch_norm_op(ts_tensor *x, ts_tensor *running_mean, ts_tensor *running_var,
                                ts_tensor *w, ts_tensor *b, bool training, double momentum,
                                double eps) {
    const char *op = "batch_norm";
    tsi_init();
    if (!batch_norm_check(op, x, running_mean, running_var, w, b, training)) return NULL;
    if (x->shape.ndim == 1) return ts_clone(x); /* empty, no channels (batch_norm_check) */
    if (eps == 0) eps = 1e-5;
    const int nd = x->shape.ndim;
    const int64_t c = x->shape.dims[1], count = c > 0 ? tsi_numel(x->shape) / c : 0;
    ts_dims red = {.n = 0};
    ts_shape cshape = {.ndim = nd}; /* [1, C, 1, ...]: per-channel values broadcast over x */
    for (int i = 0; i < nd; i++) {
        cshape.dims[i] = i == 1 ? c : 1;
        if (i != 1) red.d[red.n++] = i;
    }

    ts_scope_begin();
    ts_tensor *mean, *var;
    /* training: the backend's fused kernels when they take this dtype; else the composition
     * below, which is also the reference the tests compare them with */
    ts_dtype dt, pt;
    /* an empty batch (PyTorch's rule): an empty output, the running statistics untouched — its
     * mean and variance are NaN and would poison every later eval-mode forward */
    const bool empty = count == 0;
    if (training && !empty && batch_norm_dtypes(x, w, b, &dt, &pt)) {
        mean = var = NULL;
        const bool running = running_mean || running_var;
        const ts_status before = ts_error();
        ts_tensor *y = tsi_batch_norm_fused(as_dtype(x, dt), as_dtype(w, pt), as_dtype(b, pt), eps,
                                            running ? &mean : NULL, running ? &var : NULL);
        y = ts_keep(as_dtype(y, x->dtype));
        /* the running statistics only from a step that did not fail (out of memory recording
         * its graph or keeping its result): a failed step leaves them as they were */
        if (y && running && (before != TS_OK || ts_error() == TS_OK))
            update_running_stats(running_mean, running_var, mean, var, momentum, count);
        ts_scope_end();
        return y;
    }
    /* a float16 / bfloat16 input: statistics and math in float32 (as PyTorch's kernels), the
     * output rounded once to its dtype below */
    const ts_dtype xd = x->dtype;
    ts_tensor *xc = is_half(xd) ? as_dtype(x, TS_F32) : x;
    if (training) {
        mean = ts_mean_dims(xc, red, true);
        var = ts_var_dims(xc, red, true, 0); /* biased: what normalises the batch */
        if ((running_mean || running_var) && !empty)
            update_running_stats(running_mean, running_var, mean, var, momentum, count);
    } else {
        mean = ts_reshape(is_half(xd) ? as_dtype(running_mean, TS_F32) : running_mean, cshape);
        var = ts_reshape(is_half(xd) ? as_dtype(running_var, TS_F32) : running_var, cshape);
    }
    /* y = x * scale + shift with per-channel scale = w / sqrt(var + eps) and
     * shift = b - mean * scale: two passes over x, as PyTorch's CPU kernel */
    ts_tensor *scale = ts_rsqrt(ts_add_scalar(var, eps));
    if (w) scale = ts_mul(scale, ts_reshape(w, cshape));
    ts_tensor *shift = ts_mul(mean, scale);
    shift = b ? ts_sub(ts_reshape(b, cshape), shift) : ts_neg(shift);
    ts_tensor *y = tsi_nn_add_into(ts_mul(xc, scale), shift);
    /* f32 statistics or parameters with a half input: the result keeps the input's dtype */
    if (y && y->dtype != xd) y = ts_to_dtype(y, xd);
    y = ts_keep(y);
    ts_scope_end();
    return y;
}

ts_tensor *ts_batch_norm(ts_tensor *x, ts_tensor *running_mean, ts_tensor *running_var,
                         ts_tensor *w, ts_tensor *b, bool training, double momentum, double eps) {
    /* autocast (TSI_AC_KEEP): nothing is cast; a bfloat16 / float16 input stays in its dtype
     * with float32 parameters and statistics (PyTorch's CPU batch norm), and the ops below run
     * with autocast off (the running statistics are updated in place, never replaced) */
    if ((running_mean == NULL) != (running_var == NULL)) /* PyTorch's torch.batch_norm too */
        return tsi_error_set(TS_ERR_ARG,
                             "batch_norm: running_mean and running_var must either both be None "
                             "or neither be None"),
               NULL;
    ts_tensor *const ins[5] = {x, w, b, running_mean, running_var};
    tsi_ac_frame ac;
    TSI_AUTOCAST_ENTER(&ac, "batch_norm", &x, &w, &b);
    ts_tensor *y = tsi_autocast_exit(
        &ac, batch_norm_op(x, running_mean, running_var, w, b, training, momentum, eps));
    return tsi_trace("batch_norm", ins, 5, y, (int64_t[]){training}, 1, (double[]){eps, momentum},
                     2);
}

static bool layer_norm_check(const char *op, ts_tensor *x, ts_shape ns, ts_tensor *w,
                             ts_tensor *b) {
    if (!tsi_check_input(op, x, "input")) return false;
    ts_tensor *all[3] = {x, w, b};
    ts_device dev;
    if (!tsi_same_device(op, all, 3, false, &dev)) return false;
    if (ns.ndim < 1 || ns.ndim > TS_MAX_DIMS)
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s: Expected normalized_shape to be at least 1-dimensional (and at "
                             "most %d), but got normalized_shape = %s",
                             op, TS_MAX_DIMS, ns.ndim > TS_MAX_DIMS ? "(too many dims)" : "[]"),
               false;
    bool fits = ns.ndim <= x->shape.ndim;
    for (int i = 1; fits && i <= ns.ndim; i++)
        fits = ns.dims[ns.ndim - i] == x->shape.dims[x->shape.ndim - i];
    if (!fits)
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s: Given normalized_shape=%s, expected input with shape [*, ...%s], "
                             "but got input of size %s",
                             op, tsi_shape_str(ns), tsi_shape_str(ns), tsi_shape_str(x->shape)),
               false;
    ts_tensor *wb[2] = {w, b};
    const char *names[2] = {"weight", "bias"};
    for (int k = 0; k < 2; k++) {
        ts_tensor *t = wb[k];
        bool same = !t || t->shape.ndim == ns.ndim;
        for (int i = 0; same && t && i < ns.ndim; i++) same = t->shape.dims[i] == ns.dims[i];
        if (!same)
            return tsi_error_set(TS_ERR_SHAPE,
                                 "%s: Expected %s to be of same shape as normalized_shape, but got "
                                 "%s of shape %s and normalized_shape = %s",
                                 op, names[k], names[k], tsi_shape_str(t->shape),
                                 tsi_shape_str(ns)),
                   false;
        if (!check_float(op, t, names[k])) return false;
    }
    return check_float(op, x, "input");
}

static ts_tensor *layer_norm_op(ts_tensor *x, ts_shape normalized_shape, ts_tensor *w, ts_tensor *b,
                                double eps) {
    const char *op = "layer_norm";
    tsi_init();
    if (!layer_norm_check(op, x, normalized_shape, w, b)) return NULL;
    if (eps == 0) eps = 1e-5;
    /* the backend's fused kernels when it has them for this dtype; else the composition below,
     * which is also the reference the tests compare them with */
    const int nnorm = normalized_shape.ndim;
    ts_dtype dt;
    if (tsi_norm_fused_dtype(x, w, b, nnorm, tsi_layer_norm_fused_takes, &dt)) {
        if (dt == x->dtype) return tsi_layer_norm_fused(x, nnorm, w, b, eps);
        ts_scope_begin();
        ts_tensor *y =
            tsi_layer_norm_fused(as_dtype(x, dt), nnorm, as_dtype(w, dt), as_dtype(b, dt), eps);
        y = ts_keep(as_dtype(y, x->dtype));
        ts_scope_end();
        return y;
    }
    ts_dims red = {.n = normalized_shape.ndim};
    for (int i = 0; i < red.n; i++) red.d[i] = x->shape.ndim - red.n + i;

    ts_scope_begin();
    ts_tensor *mean = ts_mean_dims(x, red, true);
    ts_tensor *rstd = ts_rsqrt(ts_add_scalar(ts_var_dims(x, red, true, 0), eps));
    ts_tensor *y = tsi_nn_mul_into(ts_sub(x, mean), rstd);
    if (w) y = tsi_nn_mul_into(y, w);
    if (b) y = tsi_nn_add_into(y, b);
    if (y && y->dtype != x->dtype) y = ts_to_dtype(y, x->dtype);
    y = ts_keep(y);
    ts_scope_end();
    return y;
}

ts_tensor *ts_layer_norm(ts_tensor *x, ts_shape normalized_shape, ts_tensor *w, ts_tensor *b,
                         double eps) {
    ts_tensor *const ins[3] = {x, w, b};
    tsi_ac_frame ac; /* autocast: float32 */
    TSI_AUTOCAST_ENTER(&ac, "layer_norm", &x, &w, &b);
    ts_tensor *y = tsi_autocast_exit(&ac, layer_norm_op(x, normalized_shape, w, b, eps));
    return tsi_trace("layer_norm", ins, 3, y, (int64_t[]){normalized_shape.ndim}, 1, &eps, 1);
}
