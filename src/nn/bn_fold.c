/* bn_fold.c — batch-norm folded into the convolution before it (bn_fold.h): computed in float64
 * on the host, whatever the tensors' device and dtype, and rounded once to the weight's dtype. */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "nn/bn_fold.h"

#include "core/internal.h"

/* t's values as float64 on the host (malloc'ed; n values); NULL with the error set */
static double *host_f64(ts_tensor *t, int64_t n) {
    double *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    if (!v) return tsi_error_set(TS_ERR_OOM, "batch-norm fold: out of host memory"), NULL;
    ts_tensor *h = ts_contiguous(ts_to_dtype(ts_to(t, ts_cpu()), TS_F64));
    if (!h || ts_copy_to_host(h, v, (size_t)n * sizeof *v) != TS_OK) {
        free(v);
        return NULL;
    }
    return v;
}

/* `n` values of t (NULL: `fill` everywhere); NULL with the error set */
static double *values_or(ts_tensor *t, int64_t n, double fill) {
    if (t) return host_f64(t, n);
    double *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    if (!v) return tsi_error_set(TS_ERR_OOM, "batch-norm fold: out of host memory"), NULL;
    for (int64_t i = 0; i < n; i++) v[i] = fill;
    return v;
}

/* float64 values v of shape s made a tensor of dtype dt on device d (caller-owned) */
static ts_tensor *upload(ts_shape s, const double *v, ts_dtype dt, ts_device d) {
    ts_tensor *h = ts_from_data(s, TS_F64, v, (ts_opts){.dtype = TS_F64, .device = ts_cpu()});
    return ts_retain(ts_to(ts_to_dtype(h, dt), d));
}

static atomic_uint_fast64_t folds;

uint64_t tsi_bn_fold_count(void) { return atomic_load(&folds); }

tsi_bn_fold_result tsi_bn_fold(const tsi_bn_fold_src *f, ts_tensor **w_out, ts_tensor **b_out) {
    *w_out = *b_out = NULL;
    atomic_fetch_add(&folds, 1);
    const int64_t oc = ts_size(f->w, 0), per = oc ? ts_numel(f->w) / oc : 0;
    int depth = ts_scope_depth();
    ts_scope_begin();
    if (ts_scope_depth() != depth + 1) return TSI_BN_FOLD_FAILED;
    double *v[6] = {0};
    ts_tensor *src[6] = {f->w, f->scale, f->shift, f->mean, f->var, f->b};
    const double fill[6] = {0, 1, 0, 0, 0, 0}; /* absent: scale 1, shift and bias 0 */
    tsi_bn_fold_result r = TSI_BN_FOLD_FAILED;
    for (int i = 0; i < 6; i++)
        if (!(v[i] = values_or(src[i], i == 0 ? oc * per : oc, fill[i]))) goto done;
    double *w = v[0], *scale = v[1], *shift = v[2], *mean = v[3], *var = v[4], *b = v[5];
    r = TSI_BN_FOLD_NOT_FINITE;
    for (int64_t o = 0; o < oc; o++) {
        double s = scale[o] / sqrt(var[o] + f->eps);
        b[o] = (b[o] - mean[o]) * s + shift[o];
        if (!isfinite(s) || !isfinite(b[o])) goto done;
        for (int64_t j = 0; j < per; j++) w[o * per + j] *= s;
    }
    const ts_dtype dt = f->dtype == TS_DTYPE_DEFAULT ? ts_dtype_of(f->w) : f->dtype;
    const ts_device dev = ts_device_of(f->w);
    *w_out = upload(ts_shape_of(f->w), w, dt, dev);
    *b_out = *w_out ? upload(TS_SHAPE(oc), b, dt, dev) : NULL;
    r = *b_out ? TSI_BN_FOLD_DONE : TSI_BN_FOLD_FAILED;
done:
    for (int i = 0; i < 6; i++) free(v[i]);
    ts_scope_end();
    if (r != TSI_BN_FOLD_DONE) {
        ts_release(*w_out), ts_release(*b_out);
        *w_out = *b_out = NULL;
        if (r == TSI_BN_FOLD_FAILED && !ts_error())
            tsi_error_set(TS_ERR_OOM, "batch-norm fold: out of memory");
    }
    return r;
}
