/* test_double_backward_select_scan.c — create_graph through the ops that select, rearrange or
 * scan (issue 52): the sort family (sort, msort, topk, kthvalue, median), max / min along a dim,
 * diagonal (and diag_embed over it: DiagonalBackwardBackward0), as_strided, the scans (cumsum,
 * cumprod, cummax, logcumsumexp with its linear-map node), the n-d pools and max_unpool, and
 * embedding_bag. For each, with p every input and v a direction: the gradients recorded under
 * create_graph equal the first-order ones, and H v by double backward equals
 * (grad f(p + e v) - grad f(p - e v)) / 2e of first-order gradients, in float64, on cpu and sim
 * (hv_check.c). Then what stays once differentiable says so (cumprod over a zero), and
 * logcumsumexp's J t by the double-vjp trick (a cotangent of zeros, where PyTorch's signed
 * log-space formula has a zero derivative) against differences. The arithmetic ops (div, cdist,
 * the FFTs, special functions, lu_factor, eig): test_double_backward_math.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "host_values.h"
#include "hv_check.h"
#include "tessera/nn.h"
#include "tessera/pool_norm.h"
#include "ts_test.h"

typedef ts_hv_case hv_case;
#define SH TS_HV_SH

static ts_tensor *i64_on(ts_shape s, const int64_t *v, ts_tensor *like) {
    return ts_from_data(s, TS_I64, v, (ts_opts){.device = ts_device_of(like)});
}

/* ---------------------------------------------------------------- sort family */
static ts_tensor *f_sort(ts_tensor *const *in) {
    return ts_hv_head(ts_sort(in[0], 1, false, true, NULL));
}
static ts_tensor *f_sort_desc(ts_tensor *const *in) {
    ts_tensor *idx = NULL;
    return ts_hv_head(ts_sort(ts_mul_scalar(in[0], 2), 0, true, false, &idx));
}
static ts_tensor *f_msort(ts_tensor *const *in) { return ts_hv_head(ts_msort(in[0])); }
static ts_tensor *f_topk(ts_tensor *const *in) {
    ts_tensor *idx = NULL;
    return ts_hv_head(ts_topk(in[0], 2, -1, true, true, &idx));
}
static ts_tensor *f_kthvalue(ts_tensor *const *in) {
    return ts_hv_head(ts_kthvalue(in[0], 2, 1, false, NULL));
}
static ts_tensor *f_median(ts_tensor *const *in) { return ts_hv_head(ts_median(ts_exp(in[0]))); }
static ts_tensor *f_median_dim(ts_tensor *const *in) {
    return ts_hv_head(ts_median_dim(in[0], 0, true, NULL));
}

static ts_tensor *f_max_dim(ts_tensor *const *in) {
    return ts_hv_head(ts_max_dim(in[0], 1, false, NULL));
}
static ts_tensor *f_min_dim(ts_tensor *const *in) {
    ts_tensor *idx = NULL;
    return ts_hv_head(ts_min_dim(ts_mul(in[0], in[0]), 0, true, &idx));
}

/* ---------------------------------------------------------------- diagonal */
static ts_tensor *f_diagonal(ts_tensor *const *in) {
    return ts_hv_head(ts_diagonal(ts_mul(in[0], in[0]), 1, 0, 1)); /* [3, 4], offset 1 */
}
static ts_tensor *f_diagonal_batched(ts_tensor *const *in) {
    return ts_hv_head(ts_diagonal(in[0], -1, 2, 0)); /* [3, 2, 4], dims (2, 0), offset -1 */
}
static ts_tensor *f_diag_embed(ts_tensor *const *in) {
    ts_tensor *E = ts_diag_embed(in[0], 1, 0, 2); /* [2, 3] -> [4, 2, 4] */
    return ts_hv_head(ts_matmul(E, ts_transpose(E, -2, -1)));
}
static ts_tensor *f_diag_twice(ts_tensor *const *in) { /* diag of a diag: the backward's backward */
    return ts_hv_head(ts_diag(ts_diag(ts_sin(in[0]), 0), -1));
}

/* ---------------------------------------------------------------- scans */
static ts_tensor *f_lcse(ts_tensor *const *in) {
    return ts_hv_head(ts_logcumsumexp(ts_mul_scalar(in[0], 3), 1));
}
static ts_tensor *f_lcse_dim0(ts_tensor *const *in) {
    ts_tensor *y = ts_logcumsumexp(in[0], 0);
    return ts_add(ts_hv_head(y), ts_sum(ts_mul(y, y)));
}
static ts_tensor *f_cumsum(ts_tensor *const *in) {
    return ts_hv_head(ts_cumsum(in[0], 1, TS_DTYPE_DEFAULT));
}
static ts_tensor *f_cumprod(ts_tensor *const *in) {
    return ts_hv_head(ts_cumprod(ts_add_scalar(in[0], 1.5), 1, TS_DTYPE_DEFAULT));
}
static ts_tensor *f_cummax(ts_tensor *const *in) {
    ts_tensor *idx = NULL;
    return ts_hv_head(ts_cummax(in[0], 0, &idx));
}

/* ---------------------------------------------------------------- pools */
static ts_tensor *f_max_pool1d(ts_tensor *const *in) {
    ts_pool_opts o = {.kernel = {3}, .stride = {2}, .padding = {1}};
    return ts_hv_head(ts_max_pool_nd(in[0], 1, o, NULL));
}
static ts_tensor *f_max_pool3d(ts_tensor *const *in) {
    ts_pool_opts o = {.kernel = {2, 2, 2}, .stride = {1, 2, 2}};
    return ts_hv_head(ts_max_pool_nd(in[0], 3, o, NULL));
}
static ts_tensor *f_avg_pool3d(ts_tensor *const *in) {
    ts_pool_opts o = {.kernel = {2, 3, 2}, .stride = {1, 1, 2}, .padding = {1, 1, 0}};
    return ts_hv_head(ts_avg_pool_nd(ts_mul(in[0], in[0]), 3, o));
}
static ts_tensor *f_lp_pool1d(ts_tensor *const *in) {
    ts_pool_opts o = {.kernel = {3}, .stride = {2}};
    return ts_hv_head(ts_lp_pool_nd(ts_add_scalar(in[0], 1.5), 1, 2.0, o));
}
static ts_tensor *f_adaptive_max3d(ts_tensor *const *in) {
    const int64_t out[3] = {2, 3, 2};
    return ts_hv_head(ts_adaptive_max_pool_nd(in[0], 3, out, NULL));
}
static ts_tensor *f_adaptive_avg1d(ts_tensor *const *in) {
    const int64_t out[1] = {3};
    return ts_hv_head(ts_adaptive_avg_pool_nd(ts_exp(in[0]), 1, out));
}
static ts_tensor *f_max_unpool1d(ts_tensor *const *in) {
    ts_pool_opts o = {.kernel = {2}};
    ts_tensor *idx = NULL;
    ts_tensor *y = ts_max_pool_nd(in[0], 1, o, &idx);
    const int64_t out[1] = {8};
    return ts_hv_head(ts_max_unpool_nd(ts_mul(y, y), idx, 1, out));
}

/* ---------------------------------------------------------------- embedding_bag */
static const int64_t bag_idx[7] = {0, 2, 4, 1, 2, 3, 4}, bag_off[3] = {0, 2, 5};
static ts_tensor *bag(ts_tensor *const *in, int mode, ts_tensor *psw, int64_t pad) {
    ts_tensor *w = ts_tanh(in[0]);
    ts_tensor *y = ts_embedding_bag(w, i64_on(TS_SHAPE(7), bag_idx, in[0]),
                                    i64_on(TS_SHAPE(3), bag_off, in[0]), mode, psw, pad, false);
    return ts_hv_head(ts_mul(y, y));
}
static ts_tensor *f_bag_sum_psw(ts_tensor *const *in) {
    return bag(in, 0, ts_mul(in[1], in[1]), -1);
}
static ts_tensor *f_bag_mean_pad(ts_tensor *const *in) { return bag(in, 1, NULL, 2); }

/* ---------------------------------------------------------------- as_strided */
static ts_tensor *f_as_strided(ts_tensor *const *in) {
    const int64_t st[2] = {2, 1}; /* rows overlap: elements read twice */
    return ts_hv_head(ts_as_strided(ts_mul(in[0], in[0]), TS_SHAPE(3, 3), st, 1));
}

static const hv_case cases[] = {
    {"sort", f_sort, 1, {SH(2, 3, 4)}, "SortBackward0"},
    {"sort descending dim 0", f_sort_desc, 1, {SH(2, 4, 3)}, "SortBackward0"},
    {"msort", f_msort, 1, {SH(2, 4, 2)}, "SortBackward0"},
    {"topk", f_topk, 1, {SH(2, 3, 5)}, "TopkBackward0"},
    {"kthvalue", f_kthvalue, 1, {SH(2, 3, 4)}, "KthvalueBackward0"},
    {"median", f_median, 1, {SH(2, 3, 3)}, "MedianBackward0"},
    {"median dim", f_median_dim, 1, {SH(2, 5, 2)}, "MedianBackward1"},
    {"max dim", f_max_dim, 1, {SH(2, 3, 4)}, "MaxBackward0"},
    {"min dim keepdim", f_min_dim, 1, {SH(2, 3, 4)}, "MinBackward0"},
    {"diagonal", f_diagonal, 1, {SH(2, 3, 4)}, "DiagonalBackward0"},
    {"diagonal batched", f_diagonal_batched, 1, {SH(3, 3, 2, 4)}, "DiagonalBackward0"},
    {"diag_embed", f_diag_embed, 1, {SH(2, 2, 3)}, NULL},
    {"diag of diag", f_diag_twice, 1, {SH(2, 3, 3)}, "DiagonalBackward0"},
    {"logcumsumexp", f_lcse, 1, {SH(2, 3, 5)}, "LogcumsumexpBackward0"},
    {"logcumsumexp dim 0", f_lcse_dim0, 1, {SH(2, 4, 3)}, "LogcumsumexpBackward0"},
    {"cumsum", f_cumsum, 1, {SH(2, 3, 4)}, "CumsumBackward0"},
    {"cumprod", f_cumprod, 1, {SH(2, 3, 4)}, "CumprodBackward0"},
    {"cummax", f_cummax, 1, {SH(2, 5, 2)}, "CummaxBackward0"},
    {"max_pool1d", f_max_pool1d, 1, {SH(3, 2, 2, 7)}, NULL},
    {"max_pool3d", f_max_pool3d, 1, {SH(5, 1, 2, 3, 4, 4)}, NULL},
    {"avg_pool3d", f_avg_pool3d, 1, {SH(4, 2, 3, 4, 4)}, NULL},
    {"lp_pool1d", f_lp_pool1d, 1, {SH(3, 2, 2, 7)}, NULL},
    {"adaptive_max_pool3d", f_adaptive_max3d, 1, {SH(5, 1, 2, 3, 5, 4)}, "MaxBackward0"},
    {"adaptive_avg_pool1d", f_adaptive_avg1d, 1, {SH(3, 2, 2, 7)}, NULL},
    {"max_unpool1d", f_max_unpool1d, 1, {SH(3, 2, 2, 4)}, "MaxUnpool1DBackward0"},
    {"embedding_bag sum psw", f_bag_sum_psw, 2, {SH(2, 5, 3), SH(1, 7)}, "EmbeddingBagBackward0"},
    {"embedding_bag mean padding", f_bag_mean_pad, 1, {SH(2, 5, 3)}, "EmbeddingBagBackward0"},
    {"as_strided", f_as_strided, 1, {SH(1, 12)}, "AsStridedBackward0"},
};

/* cumprod's gradient past a zero is 0 whatever that zero's neighbours: a second backward through
 * it fails clearly instead of missing that derivative */
static void cumprod_zero_once(ts_device d) {
    ts_scope_begin();
    const double v[4] = {0.5, 0.0, 2.0, -1.5};
    ts_tensor *x = ts_tensor_f64(TS_SHAPE(4), v, (ts_opts){.device = d, .requires_grad = true});
    ts_tensor *y = ts_hv_head(ts_cumprod(x, 0, TS_DTYPE_DEFAULT)), *g = NULL, *h = NULL;
    CHECK_EQ(ts_autograd_grad(&y, NULL, 1, &x, 1, (ts_grad_opts){.create_graph = true}, &g), TS_OK);
    ts_tensor *s = ts_sum(ts_mul(g, g));
    CHECK_EQ(ts_autograd_grad(&s, NULL, 1, &x, 1, (ts_grad_opts){0}, &h), TS_ERR_UNSUPPORTED);
    CHECK_ERR_HAS(TS_ERR_UNSUPPORTED, "double backward through CumprodBackward0");
    ts_scope_end();
}

/* J t of logcumsumexp by the double-vjp trick: g(u) = J^T u with u zeros that require grad, then
 * the gradient of <g(u), t> in u; against (y(x + e t) - y(x - e t)) / 2e */
static void lcse_jvp_zero_cotangent(ts_device d) {
    ts_scope_begin();
    double x0[10], t0[10], xp[10], xm[10], got[10], yp[10], ym[10];
    ts_test_fill_uniform(x0, 10, 3);
    ts_test_fill_uniform(t0, 10, 5);
    const double e = 1e-5;
    for (int i = 0; i < 10; i++) xp[i] = x0[i] + e * t0[i], xm[i] = x0[i] - e * t0[i];
    const ts_opts o = {.device = d}, og = {.device = d, .requires_grad = true};
    ts_tensor *x = ts_tensor_f64(TS_SHAPE(2, 5), x0, og);
    ts_tensor *u = ts_zeros(TS_SHAPE(2, 5), (ts_opts){.dtype = TS_F64, .device = d});
    CHECK_EQ(ts_set_requires_grad(u, true), TS_OK);
    ts_tensor *y = ts_logcumsumexp(ts_mul_scalar(x, 2), 1), *g = NULL, *jt = NULL;
    CHECK_EQ(ts_autograd_grad(&y, &u, 1, &x, 1, (ts_grad_opts){.create_graph = true}, &g), TS_OK);
    ts_tensor *gt = ts_sum(ts_mul(g, ts_tensor_f64(TS_SHAPE(2, 5), t0, o)));
    CHECK_EQ(ts_autograd_grad(&gt, NULL, 1, &u, 1, (ts_grad_opts){0}, &jt), TS_OK);
    CHECK(ts_test_read_f64(jt, got, 10));
    CHECK(ts_test_read_f64(
        ts_logcumsumexp(ts_mul_scalar(ts_tensor_f64(TS_SHAPE(2, 5), xp, o), 2), 1), yp, 10));
    CHECK(ts_test_read_f64(
        ts_logcumsumexp(ts_mul_scalar(ts_tensor_f64(TS_SHAPE(2, 5), xm, o), 2), 1), ym, 10));
    for (int i = 0; i < 10; i++) {
        const double want = (yp[i] - ym[i]) / (2 * e);
        if (fabs(got[i] - want) > 1e-6 * (1 + fabs(want)))
            fprintf(stderr, "logcumsumexp J t [%d] on %s: %.12g, differences %.12g\n", i,
                    ts_device_str(d), got[i], want);
        CHECK(fabs(got[i] - want) <= 1e-6 * (1 + fabs(want)));
    }
    ts_scope_end();
}

int main(void) {
    ts_mem_stats before, after;
    ts_memory_stats(ts_sim(0), &before);
    const ts_device devs[2] = {ts_cpu(), ts_sim(0)};
    for (int di = 0; di < 2; di++)
        for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
            ts_hv_check(&cases[k], devs[di]);
    for (int di = 0; di < 2; di++) {
        cumprod_zero_once(devs[di]);
        lcse_jvp_zero_cotangent(devs[di]);
    }
    ts_memory_stats(ts_sim(0), &after);
    CHECK_EQ(after.live_tensors, before.live_tensors);
    CHECK_EQ(ts_memory_stats(ts_cpu(), &after), TS_OK);
    CHECK_EQ(after.live_tensors, 0);
    return ts_test_finish();
}
