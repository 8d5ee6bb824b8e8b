/* group_norm.c — group_norm, instance_norm and local_response_norm (include/tessera/pool_norm.h),
 * composed as PyTorch computes them (native_group_norm's statistics; instance_norm as batch_norm
 * over [1, N*C, *]; local_response_norm's avg-pool of x^2 across channels): every device,
 * autograd through the composed ops. */
#include "amp/autocast.h"
#include "nn/functional_internal.h"
#include "tessera/pool_norm.h"

/* x [N, C, *] (at least min_ndim dims), floating; w, b ([C] or NULL) and more (or NULL) on x's
 * device */
static bool norm_input(const char *op, ts_tensor *x, int min_ndim, ts_tensor *w, ts_tensor *b,
                       ts_tensor *rm, ts_tensor *rv) {
    if (!tsi_check_input(op, x, "input")) return false;
    ts_tensor *all[5] = {x, w, b, rm, rv};
    static const char *const names[5] = {"input", "weight", "bias", "running_mean", "running_var"};
    ts_tensor *given[5];
    int k = 0;
    for (int i = 0; i < 5; i++) {
        if (!all[i]) continue;
        if (i && !tsi_check_input(op, all[i], names[i])) return false;
        given[k++] = all[i];
    }
    ts_device dev;
    if (!tsi_same_device(op, given, k, false, &dev)) return false;
    if (x->shape.ndim < min_ndim)
        return tsi_error_set(TS_ERR_SHAPE, "%s: expected an input of at least %d dims, got %s", op,
                             min_ndim, tsi_desc(x)),
               false;
    const int64_t c = x->shape.dims[1];
    for (int i = 0; i < 5; i++) {
        if (!all[i]) continue;
        if (!tsi_is_float(all[i]->dtype))
            return tsi_error_set(TS_ERR_DTYPE, "%s: expected a floating point %s, got %s", op,
                                 names[i], tsi_desc(all[i])),
                   false;
        if (i && (all[i]->shape.ndim != 1 || all[i]->shape.dims[0] != c))
            return tsi_error_set(TS_ERR_SHAPE, "%s: %s should contain %lld elements, got %s", op,
                                 names[i], (long long)c, tsi_desc(all[i])),
                   false;
    }
    return true;
}

/* t [C] as [1, C, 1, ...] for an input of ndim dims */
static ts_tensor *per_channel(ts_tensor *t, int ndim) {
    int64_t d[TS_MAX_DIMS] = {0};
    for (int i = 0; i < ndim; i++) d[i] = 1;
    d[1] = t->shape.dims[0];
    return ts_reshape(t, ts_shape_make((size_t)ndim, d));
}

/* group_norm as layer_norm over the rows of [N * groups, per] (the backend's one-pass kernel
 * and its backward node, NativeLayerNormBackward0), then the per-channel affine in one pass
 * (addcmul) or two; the statistics are the composition's (biased variance, eps inside the root) */
static ts_tensor *group_norm_fused(ts_tensor *x, int64_t groups, int64_t per, ts_tensor *w,
                                   ts_tensor *b, double eps) {
    const int64_t n = x->shape.dims[0];
    ts_scope_begin();
    ts_tensor *xr = ts_reshape(x, TS_SHAPE(n * groups, per));
    ts_tensor *y = xr ? tsi_layer_norm_fused(xr, 1, NULL, NULL, eps) : NULL;
    y = y ? ts_reshape(y, x->shape) : NULL;
    ts_tensor *wc = y && w ? per_channel(w, x->shape.ndim) : NULL;
    ts_tensor *bc = y && b ? per_channel(b, x->shape.ndim) : NULL;
    if (wc && bc)
        y = ts_addcmul(bc, y, wc, 1.0);
    else if (wc)
        y = ts_mul(y, wc);
    else if (bc)
        y = ts_add(y, bc);
    y = ts_keep(y);
    ts_scope_end();
    return y;
}

static ts_tensor *group_norm_body(ts_tensor *x, int64_t groups, ts_tensor *w, ts_tensor *b,
                                  double eps, ts_tensor **mean, ts_tensor **rstd) {
    const char *op = "group_norm";
    tsi_init();
    if (mean) *mean = NULL;
    if (rstd) *rstd = NULL;
    if (!norm_input(op, x, 2, w, b, NULL, NULL)) return NULL;
    const int64_t n = x->shape.dims[0], c = x->shape.dims[1];
    if (groups <= 0 || c % groups != 0)
        return tsi_error_set(TS_ERR_ARG,
                             "%s: Expected number of channels in input to be divisible by "
                             "num_groups, but got input of shape %s and num_groups=%lld",
                             op, tsi_shape_str(x->shape), (long long)groups),
               NULL;
    const int64_t per = tsi_numel(x->shape) / (n ? n * groups : 1);
    if (!mean && !rstd && n && per && tsi_layer_norm_fused_takes(x, 1, x->dtype))
        return group_norm_fused(x, groups, per, w, b, eps);
    ts_scope_begin();
    ts_tensor *xr = ts_reshape(x, TS_SHAPE(n, groups, n ? per : 0));
    ts_tensor *m = NULL;
    ts_tensor *v = xr ? ts_var_mean(xr, TS_DIMS(2), true, 0, &m) : NULL;
    ts_tensor *r = v ? ts_rsqrt(ts_add_scalar(v, eps)) : NULL;
    ts_tensor *y = r ? ts_reshape(ts_mul(ts_sub(xr, m), r), x->shape) : NULL;
    if (y && w) y = ts_mul(y, per_channel(w, x->shape.ndim));
    if (y && b) y = ts_add(y, per_channel(b, x->shape.ndim));
    ts_tensor *ms = mean && y ? ts_reshape(m, TS_SHAPE(n, groups)) : NULL;
    ts_tensor *rs = rstd && y ? ts_reshape(r, TS_SHAPE(n, groups)) : NULL;
    y = ts_keep(y);
    if (mean) *mean = y ? ts_keep(ms) : NULL;
    if (rstd) *rstd = y ? ts_keep(rs) : NULL;
    ts_scope_end();
    if (y && ((mean && !*mean) || (rstd && !*rstd))) {
        ts_release(y);
        if (mean) ts_release(*mean), *mean = NULL;
        if (rstd) ts_release(*rstd), *rstd = NULL;
        return NULL;
    }
    return y;
}

/* autocast: CUDA's fp32 list; on the cpu (no list) the input's dtype with float32 parameters, as
 * layer_norm (autocast_policy.c). The statistics form (native_group_norm's) is on no list. */
ts_tensor *ts_group_norm(ts_tensor *x, int64_t groups, ts_tensor *w, ts_tensor *b, double eps,
                         ts_tensor **mean, ts_tensor **rstd) {
    if (mean || rstd) return group_norm_body(x, groups, w, b, eps, mean, rstd);
    tsi_ac_frame ac;
    TSI_AUTOCAST_ENTER(&ac, "group_norm", &x, &w, &b);
    return tsi_autocast_exit(&ac, group_norm_body(x, groups, w, b, eps, NULL, NULL));
}

ts_tensor *ts_native_group_norm(ts_tensor *x, ts_tensor *w, ts_tensor *b, int64_t n, int64_t c,
                                int64_t hxw, int64_t groups, double eps, ts_tensor **mean,
                                ts_tensor **rstd) {
    const char *op = "native_group_norm";
    tsi_init();
    if (mean) *mean = NULL;
    if (rstd) *rstd = NULL;
    if (!mean || !rstd) return tsi_error_set(TS_ERR_ARG, "%s: mean and rstd are NULL", op), NULL;
    if (!tsi_check_input(op, x, "input")) return NULL;
    const ts_shape s = x->shape;
    if (s.ndim < 2 || s.dims[0] != n || s.dims[1] != c || tsi_numel(s) != n * c * hxw)
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s: expected input of N=%lld, C=%lld and HxW=%lld, got %s", op,
                             (long long)n, (long long)c, (long long)hxw, tsi_shape_str(s)),
               NULL;
    ts_tensor *y = ts_group_norm(x, groups, w, b, eps, mean, rstd);
    if (y && ts_requires_grad(y) && !ts_requires_grad(*mean) &&
        (ts_set_requires_grad(*mean, true) || ts_set_requires_grad(*rstd, true))) {
        ts_release(y), ts_release(*mean), ts_release(*rstd);
        *mean = *rstd = NULL;
        return NULL;
    }
    return y;
}

ts_tensor *ts_instance_norm(ts_tensor *x, ts_tensor *running_mean, ts_tensor *running_var,
                            ts_tensor *w, ts_tensor *b, bool use_input_stats, double momentum,
                            double eps) {
    const char *op = "instance_norm";
    tsi_init();
    if (!norm_input(op, x, 3, w, b, running_mean, running_var)) return NULL;
    if (!use_input_stats && (!running_mean || !running_var))
        return tsi_error_set(TS_ERR_ARG,
                             "%s: Expected running_mean and running_var to be defined when "
                             "use_input_stats is false",
                             op),
               NULL;
    const ts_shape s = x->shape;
    const int64_t n = s.dims[0], c = s.dims[1];
    int64_t spatial = 1;
    for (int i = 2; i < s.ndim; i++) spatial *= s.dims[i];
    if (use_input_stats && spatial <= 1)
        return tsi_error_set(TS_ERR_ARG,
                             "%s: Expected more than 1 spatial element when training, got input "
                             "size %s",
                             op, tsi_shape_str(s)),
               NULL;
    ts_scope_begin();
    /* PyTorch's: batch_norm over [1, N*C, *] with the statistics and parameters repeated N
     * times; the updated running statistics averaged back over N */
    int64_t d[TS_MAX_DIMS] = {0};
    d[0] = 1, d[1] = n * c;
    for (int i = 2; i < s.ndim; i++) d[i] = s.dims[i];
    const int64_t rep[1] = {n};
    ts_tensor *rm = running_mean ? ts_repeat(running_mean, rep, 1) : NULL;
    ts_tensor *rv = running_var ? ts_repeat(running_var, rep, 1) : NULL;
    ts_tensor *w2 = w ? ts_repeat(w, rep, 1) : NULL, *b2 = b ? ts_repeat(b, rep, 1) : NULL;
    bool ok = (!running_mean || rm) && (!running_var || rv) && (!w || w2) && (!b || b2);
    ts_tensor *y = ok ? ts_batch_norm(ts_reshape(x, ts_shape_make((size_t)s.ndim, d)), rm, rv, w2,
                                      b2, use_input_stats, momentum, eps)
                      : NULL;
    y = y ? ts_reshape(y, s) : NULL;
    if (y && use_input_stats && n > 0) {
        ts_tensor *stat[2] = {rm, rv}, *dst[2] = {running_mean, running_var};
        for (int i = 0; i < 2 && y; i++) {
            if (!dst[i]) continue;
            ts_tensor *avg = ts_mean_dim(ts_reshape(ts_detach(stat[i]), TS_SHAPE(n, c)), 0, false);
            if (!avg || !ts_copy_(dst[i], avg)) y = NULL;
        }
    }
    y = ts_keep(y);
    ts_scope_end();
    return y;
}

ts_tensor *ts_local_response_norm(ts_tensor *x, int64_t size, double alpha, double beta, double k) {
    const char *op = "local_response_norm";
    tsi_init();
    if (!norm_input(op, x, 3, NULL, NULL, NULL, NULL)) return NULL;
    if (size <= 0 || size > 1 << 30)
        return tsi_error_set(TS_ERR_ARG, "%s: size must be positive, got %lld", op,
                             (long long)size),
               NULL;
    const ts_shape s = x->shape;
    if (tsi_numel(s) == 0) return ts_reshape(x, s); /* PyTorch returns the input */
    const int64_t n = s.dims[0], c = s.dims[1], rest = tsi_numel(s) / (n * c);
    ts_scope_begin();
    /* PyTorch's: the mean of x^2 over `size` channels, zero padded size / 2 before and
     * (size - 1) / 2 after, as an avg pool over [N, 1, C, rest] */
    const int64_t pad[4] = {0, 0, size / 2, (size - 1) / 2};
    ts_tensor *sq = ts_reshape(ts_mul(x, x), TS_SHAPE(n, 1, c, rest));
    ts_tensor *padded = sq ? ts_pad(sq, pad, 4, TS_PAD_CONSTANT, 0.0) : NULL;
    ts_tensor *div =
        padded ? ts_avg_pool2d(padded, (ts_pool2d_opts){.kernel = {(int)size, 1}, .stride = {1, 1}})
               : NULL;
    div = div ? ts_pow_scalar(ts_add_scalar(ts_mul_scalar(div, alpha), k), beta) : NULL;
    ts_tensor *y = div ? ts_div(x, ts_reshape(div, s)) : NULL;
    y = ts_keep(y);
    ts_scope_end();
    return y;
}
