/* tessera/pool_norm.h — 1-d and 3-d pooling, adaptive max pooling, max unpooling, power-average
 * pooling, group / instance / local response normalisation (issue 52). Composed from the 2-d
 * pooling kernels, gathers and reductions: every device, autograd on each. Include it directly
 * (after tessera.h). docs/POOL_NORM.md has the semantics. */
#ifndef TESSERA_POOL_NORM_H
#define TESSERA_POOL_NORM_H

#include "tessera.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Options of an nd-dimensional pool (nd = 1, 2 or 3: the first nd entries of each array are
 * used, in PyTorch's order, e.g. D, H, W). stride 0: the kernel size (PyTorch's default);
 * dilation 0: 1. */
typedef struct ts_pool_opts {
    int kernel[3], stride[3], padding[3], dilation[3];
    bool ceil_mode;
    bool exclude_pad;     /* avg: count_include_pad=False */
    int divisor_override; /* avg: nonzero divides every window's sum by it (as ATen); 0: none */
} ts_pool_opts;

/* max_pool{nd}d on [C, *S] or [N, C, *S] (S of nd dims, floating dtype). When indices is not
 * NULL, *indices gets PyTorch's return_indices tensor: int64 of the output's shape, each the flat
 * position of the maximum in its (n, c) plane of S (the first maximum in row-major order). NULL
 * and TS_ERR_ARG / TS_ERR_SHAPE / TS_ERR_DTYPE naming max_pool{nd}d on bad arguments. */
TS_API ts_tensor *ts_max_pool_nd(ts_tensor *x, int nd, ts_pool_opts o, ts_tensor **indices);
/* avg_pool{nd}d (no dilation, as PyTorch) */
TS_API ts_tensor *ts_avg_pool_nd(ts_tensor *x, int nd, ts_pool_opts o);
/* lp_pool{nd}d: PyTorch's (sign(a) * relu(|a|) * prod(kernel)) ^ (1 / p) with a = avg_pool{nd}d
 * of x^p, padding 0 (o.padding, dilation, exclude_pad and divisor_override must be 0). */
TS_API ts_tensor *ts_lp_pool_nd(ts_tensor *x, int nd, double p, ts_pool_opts o);
/* adaptive_avg_pool{nd}d to out[0..nd-1] (each >= 0) */
TS_API ts_tensor *ts_adaptive_avg_pool_nd(ts_tensor *x, int nd, const int64_t *out);
/* adaptive_max_pool{nd}d to out[0..nd-1] (each >= 0); indices as ts_max_pool_nd's */
TS_API ts_tensor *ts_adaptive_max_pool_nd(ts_tensor *x, int nd, const int64_t *out,
                                          ts_tensor **indices);
/* max_unpool{nd}d: x and indices ([C, *S] or [N, C, *S], indices int64 of x's shape, as
 * ts_max_pool_nd returns them) scattered into zeros of spatial size out[0..nd-1]; an index
 * outside [0, prod(out)) is TS_ERR_ARG. */
TS_API ts_tensor *ts_max_unpool_nd(ts_tensor *x, ts_tensor *indices, int nd, const int64_t *out);

/* group_norm on [N, C, *] (C divisible by groups): per (n, group) mean and biased variance,
 * (x - mean) / sqrt(var + eps), then * w[c] + b[c] (w, b of [C] or NULL). When mean / rstd are
 * not NULL they get native_group_norm's [N, groups] statistics (mean, 1 / sqrt(var + eps)). */
TS_API ts_tensor *ts_group_norm(ts_tensor *x, int64_t groups, ts_tensor *w, ts_tensor *b,
                                double eps, ts_tensor **mean, ts_tensor **rstd);
/* torch.native_group_norm: ts_group_norm with both statistics, after checking x against N, C
 * and HxW (TS_ERR_SHAPE naming them); like PyTorch's node, which owns all three outputs, the
 * statistics require grad whenever the output does. */
TS_API ts_tensor *ts_native_group_norm(ts_tensor *x, ts_tensor *w, ts_tensor *b, int64_t n,
                                       int64_t c, int64_t hxw, int64_t groups, double eps,
                                       ts_tensor **mean, ts_tensor **rstd);
/* instance_norm on [N, C, *] (at least one spatial dim): batch_norm of each (n, c) plane.
 * use_input_stats: normalise with the plane's statistics and, when running_mean / running_var
 * are given ([C]), update them in place as PyTorch (momentum taken literally, 0 leaving them
 * unchanged; unbiased variance; averaged over N);
 * otherwise normalise with the running statistics (both required). */
TS_API ts_tensor *ts_instance_norm(ts_tensor *x, ts_tensor *running_mean, ts_tensor *running_var,
                                   ts_tensor *w, ts_tensor *b, bool use_input_stats,
                                   double momentum, double eps);
/* local_response_norm on [N, C, *] (3-d or more): x / (k + alpha * mean of x^2 over the size
 * channels around c (zero padded, size / 2 before)) ^ beta */
TS_API ts_tensor *ts_local_response_norm(ts_tensor *x, int64_t size, double alpha, double beta,
                                         double k);

#ifdef __cplusplus
}
#endif
#endif
