/* test_gradcheck_list.c — gradcheck (f64 central differences) of every differentiable public op on
 * cpu, sim:0 and cuda:0 when present, one table row per op form; prints "gradcheck <op> <device>:
 * ok|FAILED" for each and a summary. Detailed gradient tests live in test_grad_*.c; this is the
 * complete list. To add an op: write a one-line FN below and a row in `rows`. */
#include <stdio.h>
#include <string.h>

#include "ts_test.h"

/* ------------------------------------------------------------------ the functions */
/* in[0], in[1], ... are A, B, C, D; constants (indices, masks, targets) are made on A's device */
#define A   in[0]
#define B   in[1]
#define C   in[2]
#define D   in[3]
#define DEV ts_device_of(in[0])
#define FN(id, expr)                                                                               \
    static ts_tensor *id(ts_tensor *const *in, int n, void *ctx) {                                 \
        (void)n, (void)ctx;                                                                        \
        return (expr);                                                                             \
    }

static ts_tensor *i64(ts_device dev, ts_shape s, const int64_t *v) {
    return ts_tensor_i64(s, v, (ts_opts){.device = dev});
}
static ts_tensor *f64(ts_device dev, ts_shape s, const double *v) {
    return ts_tensor_f64(s, v, (ts_opts){.device = dev});
}
static ts_tensor *mask23(ts_device dev) {
    return ts_ne_scalar(i64(dev, TS_SHAPE(2, 3), (int64_t[]){1, 0, 0, 1, 1, 0}), 0);
}
static ts_device other_device(ts_device d) { return d.type == TS_CPU ? ts_sim(0) : ts_cpu(); }
/* a non-leaf copy, for in-place ops */
#define CL(x) ts_clone(x)

/* elementwise, unary */
FN(f_neg, ts_neg(A))
FN(f_abs, ts_abs(A))
FN(f_exp, ts_exp(A))
FN(f_log, ts_log(A))
FN(f_log1p, ts_log1p(A))
FN(f_sqrt, ts_sqrt(A))
FN(f_rsqrt, ts_rsqrt(A))
FN(f_sin, ts_sin(A))
FN(f_cos, ts_cos(A))
FN(f_tan, ts_tan(A))
FN(f_asin, ts_asin(ts_mul_scalar(A, 0.6))) /* inside (-1, 1) */
FN(f_acos, ts_acos(ts_mul_scalar(A, 0.6)))
FN(f_atan, ts_atan(A))
FN(f_sinh, ts_sinh(A))
FN(f_cosh, ts_cosh(A))
FN(f_asinh, ts_asinh(A))
FN(f_acosh, ts_acosh(ts_add_scalar(A, 1))) /* above 1 */
FN(f_atanh, ts_atanh(ts_mul_scalar(A, 0.6)))
FN(f_erf, ts_erf(A))
FN(f_tanh, ts_tanh(A))
FN(f_sigmoid, ts_sigmoid(A))
FN(f_relu, ts_relu(A))
FN(f_gelu, ts_gelu(A))
FN(f_silu, ts_silu(A))
FN(f_softplus, ts_softplus(A))
FN(f_sign, ts_sign(A))
FN(f_floor, ts_floor(A))
FN(f_ceil, ts_ceil(A))
FN(f_round, ts_round(A))
FN(f_reciprocal, ts_reciprocal(A))
FN(f_square, ts_square(A))
FN(f_clamp, ts_clamp(A, -0.8, 0.9))
FN(f_clamp_min, ts_clamp_min(A, -0.8))
FN(f_clamp_max, ts_clamp_max(A, 0.9))
FN(f_neg_, ts_neg_(CL(A)))
FN(f_abs_, ts_abs_(CL(A)))
FN(f_exp_, ts_exp_(CL(A)))
FN(f_log_, ts_log_(CL(A)))
FN(f_sqrt_, ts_sqrt_(CL(A)))
FN(f_sigmoid_, ts_sigmoid_(CL(A)))
FN(f_relu_, ts_relu_(CL(A)))
FN(f_tanh_, ts_tanh_(CL(A)))
FN(f_zero_, ts_zero_(CL(A)))
FN(f_fill_, ts_fill_(CL(A), 2.5))
FN(f_clamp_, ts_clamp_(CL(A), -0.8, 0.9))
/* elementwise, binary (B broadcasts against A) */
FN(f_add, ts_add(A, B))
FN(f_sub, ts_sub(A, B))
FN(f_mul, ts_mul(A, B))
FN(f_div, ts_div(A, B))
FN(f_pow, ts_pow(A, B))
FN(f_maximum, ts_maximum(A, B))
FN(f_minimum, ts_minimum(A, B))
FN(f_fmod, ts_fmod(A, B))
FN(f_add_alpha, ts_add_alpha(A, B, -2.5))
FN(f_add_, ts_add_(CL(A), B))
FN(f_sub_, ts_sub_(CL(A), B))
FN(f_mul_, ts_mul_(CL(A), B))
FN(f_div_, ts_div_(CL(A), B))
FN(f_pow_, ts_pow_(CL(A), B))
FN(f_add_scalar, ts_add_scalar(A, 1.5))
FN(f_sub_scalar, ts_sub_scalar(A, 1.5))
FN(f_rsub_scalar, ts_rsub_scalar(A, 1.5))
FN(f_mul_scalar, ts_mul_scalar(A, -1.5))
FN(f_div_scalar, ts_div_scalar(A, -1.5))
FN(f_pow_scalar, ts_pow_scalar(A, 2.5))
FN(f_rpow_scalar, ts_rpow_scalar(A, 2.5))
FN(f_maximum_scalar, ts_maximum_scalar(A, 0.1))
FN(f_minimum_scalar, ts_minimum_scalar(A, 0.1))
FN(f_fmod_scalar, ts_fmod_scalar(A, 0.35))
FN(f_add_scalar_, ts_add_scalar_(CL(A), 1.5))
FN(f_sub_scalar_, ts_sub_scalar_(CL(A), 1.5))
FN(f_mul_scalar_, ts_mul_scalar_(CL(A), -1.5))
FN(f_div_scalar_, ts_div_scalar_(CL(A), -1.5))
FN(f_pow_scalar_, ts_pow_scalar_(CL(A), 2.5))
FN(f_where, ts_where(mask23(DEV), A, B))
FN(f_masked_fill, ts_masked_fill(A, mask23(DEV), 3.0))
FN(f_masked_fill_, ts_masked_fill_(CL(A), mask23(DEV), 3.0))
/* views and copies */
FN(f_view, ts_view(A, TS_SHAPE(3, -1)))
FN(f_reshape, ts_reshape(A, TS_SHAPE(6)))
FN(f_reshape_copy, ts_reshape(ts_t(A), TS_SHAPE(6)))
FN(f_flatten, ts_flatten(A, 0, -1))
FN(f_permute, ts_permute(A, TS_DIMS(2, 0, 1)))
FN(f_transpose, ts_transpose(A, 0, 2))
FN(f_t, ts_t(A))
FN(f_squeeze, ts_squeeze(A))
FN(f_squeeze_dim, ts_squeeze_dim(A, 1))
FN(f_unsqueeze, ts_unsqueeze(A, 1))
FN(f_narrow, ts_narrow(A, 1, 1, 2))
FN(f_slice, ts_slice(A, 1, -3, 10, 2))
FN(f_select, ts_select(A, 0, 1))
FN(f_expand, ts_expand(A, TS_SHAPE(2, 4, 3)))
FN(f_expand_as, ts_expand_as(A, B))
FN(f_contiguous, ts_contiguous(ts_t(A)))
FN(f_clone, ts_clone(A))
FN(f_copy_, ts_copy_(ts_zeros(TS_SHAPE(2, 3), (ts_opts){.dtype = TS_F64, .device = DEV}), B))
FN(f_to, ts_to(A, other_device(DEV)))
FN(f_to_async, ts_to_async(A, other_device(DEV)))
FN(f_to_dtype, ts_to_dtype(A, TS_F32))
FN(f_pin_memory, ts_pin_memory(A))
/* reductions */
FN(f_sum, ts_sum(A))
FN(f_sum_dim, ts_sum_dim(A, 1, false))
FN(f_sum_dims, ts_sum_dims(A, TS_DIMS(0, 2), true))
FN(f_mean, ts_mean(A))
FN(f_mean_dim, ts_mean_dim(A, -1, true))
FN(f_mean_dims, ts_mean_dims(A, TS_DIMS(2, 0), false))
FN(f_prod, ts_prod(A))
FN(f_prod_dim, ts_prod_dim(A, 1, false))
FN(f_max, ts_max(A))
FN(f_min, ts_min(A))
FN(f_max_dim, ts_max_dim(A, 1, false, NULL))
FN(f_min_dim, ts_min_dim(A, 0, true, NULL))
FN(f_amax_dim, ts_amax_dim(A, 2, false))
FN(f_amin_dim, ts_amin_dim(A, 1, true))
FN(f_amax_dims, ts_amax_dims(A, TS_DIMS(0, 1), false))
FN(f_amin_dims, ts_amin_dims(A, TS_DIMS(1, 2), true))
FN(f_var, ts_var(A))
FN(f_var_dim, ts_var_dim(A, 1, false, 0))
FN(f_var_dims, ts_var_dims(A, TS_DIMS(0, 2), true, 1))
FN(f_std, ts_std(A))
FN(f_std_dim, ts_std_dim(A, 2, true, 1))
FN(f_std_dims, ts_std_dims(A, TS_DIMS(0, 1), false, 0))
FN(f_logsumexp, ts_logsumexp(A))
FN(f_logsumexp_dim, ts_logsumexp_dim(A, 1, false))
FN(f_logsumexp_dims, ts_logsumexp_dims(A, TS_DIMS(0, 2), true))
FN(f_softmax, ts_softmax(A, 1))
FN(f_log_softmax, ts_log_softmax(A, -1))
/* linear algebra */
FN(f_mm, ts_mm(A, B))
FN(f_bmm, ts_bmm(A, B))
FN(f_matmul, ts_matmul(A, B))
/* indexing and joining */
FN(f_index_select, ts_index_select(A, 1, i64(DEV, TS_SHAPE(4), (int64_t[]){2, 0, 2, 1})))
FN(f_gather, ts_gather(A, 1, i64(DEV, TS_SHAPE(2, 2), (int64_t[]){2, 0, 1, 1})))
/* sorting and selection (the values' gradient goes back through the indices) */
FN(f_sort, ts_sort(A, 1, true, true, NULL))
FN(f_topk, ts_topk(A, 2, 0, true, true, NULL))
FN(f_kthvalue, ts_kthvalue(A, 2, 1, false, NULL))
FN(f_median_dim, ts_median_dim(A, 1, true, NULL))
FN(f_median, ts_median(A))
FN(f_mode, ts_mode(A, 0, false, NULL))
FN(f_quantile,
   ts_quantile(A, f64(DEV, TS_SHAPE(2), (double[]){0.3, 0.9}), 0, true, 1, false, "linear"))
FN(f_scatter_add, ts_scatter_add(A, 1, i64(DEV, TS_SHAPE(2, 2), (int64_t[]){2, 0, 2, 2}), B))
FN(f_scatter_add_, ts_scatter_add_(CL(A), 0, i64(DEV, TS_SHAPE(2, 2), (int64_t[]){1, 0, 1, 1}), B))
FN(f_cat, ts_cat(in, 3, 1))
FN(f_stack, ts_stack(in, 2, 1))
static ts_tensor *f_split(ts_tensor *const *in, int n, void *ctx) {
    (void)n, (void)ctx;
    ts_tensor *p[3];
    return ts_split(A, 2, 1, p, 3) == 3 ? ts_cat((ts_tensor *[]){p[2], p[0]}, 2, 1) : NULL;
}
static ts_tensor *f_chunk(ts_tensor *const *in, int n, void *ctx) {
    (void)n, (void)ctx;
    ts_tensor *p[3];
    return ts_chunk(A, 3, 0, p, 3) == 3 ? ts_stack((ts_tensor *[]){p[1], p[0]}, 2, 0) : NULL;
}
/* nn functional */
FN(f_linear, ts_linear(A, B, C))
FN(f_linear_nobias, ts_linear(A, B, NULL))
FN(f_conv2d, ts_conv2d(A, B, C, (ts_conv2d_opts){0}))
FN(f_conv2d_strided,
   ts_conv2d(A, B, NULL, (ts_conv2d_opts){.stride = {2, 1}, .padding = {1, 2}, .dilation = {1, 2}}))
FN(f_conv2d_groups, ts_conv2d(A, B, C, (ts_conv2d_opts){.groups = 2, .padding = {1, 1}}))
FN(f_max_pool2d, ts_max_pool2d(A, (ts_pool2d_opts){.kernel = {2, 2}}))
FN(f_max_pool2d_pad,
   ts_max_pool2d(A, (ts_pool2d_opts){
                        .kernel = {3, 2}, .stride = {2, 1}, .padding = {1, 1}, .ceil_mode = true}))
FN(f_avg_pool2d, ts_avg_pool2d(A, (ts_pool2d_opts){.kernel = {2, 2}, .stride = {1, 2}}))
FN(f_avg_pool2d_pad,
   ts_avg_pool2d(A,
                 (ts_pool2d_opts){
                     .kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}, .exclude_pad = true}))
FN(f_adaptive_avg_pool2d, ts_adaptive_avg_pool2d(A, 3, 2))
FN(f_dropout_eval, ts_dropout(A, 0.5, false))
FN(f_batch_norm_train, ts_batch_norm(A, NULL, NULL, B, C, true, 0, 0))
FN(f_batch_norm_eval,
   ts_batch_norm(A, f64(DEV, TS_SHAPE(3), (double[]){0.1, -0.2, 0.3}),
                 f64(DEV, TS_SHAPE(3), (double[]){0.5, 1.5, 2.0}), B, C, false, 0, 0))
FN(f_layer_norm, ts_layer_norm(A, TS_SHAPE(4), B, C, 0))
FN(f_layer_norm2, ts_layer_norm(A, TS_SHAPE(3, 4), NULL, NULL, 1e-3))
FN(f_layer_norm_w, ts_layer_norm(ts_transpose(A, 0, 1), TS_SHAPE(5), B, NULL, 0))
FN(f_layer_norm_b, ts_layer_norm(A, TS_SHAPE(2, 3), NULL, B, 0.1))
FN(f_embedding, ts_embedding(A, i64(DEV, TS_SHAPE(2, 3), (int64_t[]){4, 0, 4, 2, 1, 4})))
/* torchvision.ops: two rois over a [2, 2, 5, 5] input, one partly outside it */
static ts_tensor *rois2(ts_device dev) {
    return f64(dev, TS_SHAPE(2, 5), (double[]){0, 0.5, 0.3, 3.2, 2.9, 1, 1.1, -0.6, 5.4, 3.5});
}
FN(f_roi_align, ts_roi_align(A, rois2(DEV), 2, 3, 1.0, 2, true))
FN(f_roi_align_adaptive, ts_roi_align(A, rois2(DEV), 3, 2, 0.5, 0, false))
FN(f_roi_pool, ts_roi_pool(A, rois2(DEV), 2, 2, 1.0))
FN(f_gelu_tanh, ts_gelu_tanh(A))
FN(f_rms_norm, ts_rms_norm(A, TS_SHAPE(4), B, 0))
FN(f_rms_norm2, ts_rms_norm(A, TS_SHAPE(3, 4), NULL, 1e-3))
FN(f_sdpa, ts_scaled_dot_product_attention(A, B, C, NULL, 0, false, 0))
FN(f_sdpa_causal, ts_scaled_dot_product_attention(A, B, C, NULL, 0, true, 0.7))
FN(f_sdpa_bool,
   ts_scaled_dot_product_attention(A, B, C,
                                   ts_gt_scalar(f64(DEV, TS_SHAPE(1, 3), (double[]){1, 0, 1}), 0.5),
                                   0, false, 0))
/* the additive mask is an input that requires grad: the reference composition differentiates it */
FN(f_sdpa_additive, ts_scaled_dot_product_attention(A, B, C, D, 0, false, 0))
/* losses (targets made here or passed as inputs without grad) */
static ts_tensor *classes(ts_device dev) { return i64(dev, TS_SHAPE(3), (int64_t[]){2, 0, 3}); }
FN(f_cross_entropy, ts_cross_entropy(A, classes(DEV)))
FN(f_cross_entropy_probs, ts_cross_entropy(A, B))
FN(f_cross_entropy_smooth,
   ts_cross_entropy_ex(A, classes(DEV),
                       (ts_loss_opts){.label_smoothing = 0.1, .reduction = TS_REDUCTION_SUM}))
FN(f_cross_entropy_weight, ts_cross_entropy_ex(A, i64(DEV, TS_SHAPE(3), (int64_t[]){2, -100, 3}),
                                               (ts_loss_opts){.weight = B}))
FN(f_cross_entropy_none,
   ts_cross_entropy_ex(A, classes(DEV), (ts_loss_opts){.reduction = TS_REDUCTION_NONE}))
FN(f_nll_loss, ts_nll_loss(A, classes(DEV), (ts_loss_opts){0}))
FN(f_mse_loss, ts_mse_loss(A, B))
FN(f_mse_loss_sum, ts_mse_loss_ex(A, B, (ts_loss_opts){.reduction = TS_REDUCTION_SUM}))
FN(f_l1_loss, ts_l1_loss(A, B, (ts_loss_opts){0}))
FN(f_smooth_l1_loss, ts_smooth_l1_loss(A, B, (ts_loss_opts){.beta = 0.5}))
FN(f_bce_with_logits, ts_bce_with_logits(A, B, (ts_loss_opts){0}))
FN(f_bce_with_logits_w, ts_bce_with_logits(A, B, (ts_loss_opts){.pos_weight = C}))

/* ------------------------------------------------------------------ the table */
/* Input values: 'a' +-[0.5, 1.5] (away from 0 and so from kinks), 'p' [0.5, 1.5], 'u' [0, 1];
 * constants that do not require grad: 'c' like 'a', 'q' like 'u', 'k' like 'p'. */
typedef struct row {
    const char *name;
    ts_gradcheck_fn f;
    const char *kinds; /* one letter per input */
    ts_shape s[4];
    double eps, atol; /* 0: gradcheck's defaults */
    bool cpu_only;
} row;

#define S(...) TS_SHAPE(__VA_ARGS__)
/* ROW(name, function, input kinds, input shapes...) */
#define ROW(name, f, kinds, ...)                                                                   \
    { name, f, kinds, {__VA_ARGS__}, 0, 0, false }
#define ROWX(name, f, kinds, eps, atol, cpu_only, ...)                                             \
    { name, f, kinds, {__VA_ARGS__}, eps, atol, cpu_only }

/* a function, not a static table: TS_SHAPE is not a constant expression */
static int table(row *rows) {
    const row all[] = {
        ROW("neg", f_neg, "a", S(2, 3)),
        ROW("abs", f_abs, "a", S(2, 3)),
        ROW("exp", f_exp, "a", S(2, 3)),
        ROW("log", f_log, "p", S(2, 3)),
        ROW("log1p", f_log1p, "p", S(2, 3)),
        ROW("sqrt", f_sqrt, "p", S(2, 3)),
        ROW("rsqrt", f_rsqrt, "p", S(2, 3)),
        ROW("sin", f_sin, "a", S(2, 3)),
        ROW("cos", f_cos, "a", S(2, 3)),
        ROW("tan", f_tan, "a", S(2, 3)),
        ROW("asin", f_asin, "a", S(2, 3)),
        ROW("acos", f_acos, "a", S(2, 3)),
        ROW("atan", f_atan, "a", S(2, 3)),
        ROW("sinh", f_sinh, "a", S(2, 3)),
        ROW("cosh", f_cosh, "a", S(2, 3)),
        ROW("asinh", f_asinh, "a", S(2, 3)),
        ROW("acosh", f_acosh, "p", S(2, 3)),
        ROW("atanh", f_atanh, "a", S(2, 3)),
        ROW("erf", f_erf, "a", S(2, 3)),
        ROW("tanh", f_tanh, "a", S(2, 3)),
        ROW("sigmoid", f_sigmoid, "a", S(2, 3)),
        ROW("relu", f_relu, "a", S(2, 3)),
        ROW("gelu", f_gelu, "a", S(2, 3)),
        ROW("silu", f_silu, "a", S(2, 3)),
        ROW("softplus", f_softplus, "a", S(2, 3)),
        ROW("sign", f_sign, "a", S(2, 3)),
        ROW("floor", f_floor, "a", S(2, 3)),
        ROW("ceil", f_ceil, "a", S(2, 3)),
        ROW("round", f_round, "a", S(2, 3)),
        ROW("reciprocal", f_reciprocal, "a", S(2, 3)),
        ROW("square", f_square, "a", S(2, 3)),
        ROW("clamp", f_clamp, "a", S(2, 3)),
        ROW("clamp_min", f_clamp_min, "a", S(2, 3)),
        ROW("clamp_max", f_clamp_max, "a", S(2, 3)),
        ROW("neg_", f_neg_, "a", S(2, 3)),
        ROW("abs_", f_abs_, "a", S(2, 3)),
        ROW("exp_", f_exp_, "a", S(2, 3)),
        ROW("log_", f_log_, "p", S(2, 3)),
        ROW("sqrt_", f_sqrt_, "p", S(2, 3)),
        ROW("sigmoid_", f_sigmoid_, "a", S(2, 3)),
        ROW("relu_", f_relu_, "a", S(2, 3)),
        ROW("tanh_", f_tanh_, "a", S(2, 3)),
        ROW("zero_", f_zero_, "a", S(2, 3)),
        ROW("fill_", f_fill_, "a", S(2, 3)),
        ROW("clamp_", f_clamp_, "a", S(2, 3)),
        ROW("add", f_add, "aa", S(2, 3), S(3)),
        ROW("sub", f_sub, "aa", S(2, 3), S(2, 1)),
        ROW("mul", f_mul, "aa", S(2, 3), S(3)),
        ROW("div", f_div, "aa", S(2, 3), S(3)),
        ROW("pow", f_pow, "pa", S(2, 3), S(3)),
        ROW("maximum", f_maximum, "aa", S(2, 3), S(3)),
        ROW("minimum", f_minimum, "aa", S(2, 3), S(2, 3)),
        ROW("fmod", f_fmod, "pp", S(2, 3), S(3)),
        ROW("add_alpha", f_add_alpha, "aa", S(2, 3), S(3)),
        ROW("add_", f_add_, "aa", S(2, 3), S(3)),
        ROW("sub_", f_sub_, "aa", S(2, 3), S(3)),
        ROW("mul_", f_mul_, "aa", S(2, 3), S(3)),
        ROW("div_", f_div_, "aa", S(2, 3), S(3)),
        ROW("pow_", f_pow_, "pa", S(2, 3), S(3)),
        ROW("add_scalar", f_add_scalar, "a", S(2, 3)),
        ROW("sub_scalar", f_sub_scalar, "a", S(2, 3)),
        ROW("rsub_scalar", f_rsub_scalar, "a", S(2, 3)),
        ROW("mul_scalar", f_mul_scalar, "a", S(2, 3)),
        ROW("div_scalar", f_div_scalar, "a", S(2, 3)),
        ROW("pow_scalar", f_pow_scalar, "p", S(2, 3)),
        ROW("rpow_scalar", f_rpow_scalar, "a", S(2, 3)),
        ROW("maximum_scalar", f_maximum_scalar, "a", S(2, 3)),
        ROW("minimum_scalar", f_minimum_scalar, "a", S(2, 3)),
        ROW("fmod_scalar", f_fmod_scalar, "a", S(2, 3)),
        ROW("add_scalar_", f_add_scalar_, "a", S(2, 3)),
        ROW("sub_scalar_", f_sub_scalar_, "a", S(2, 3)),
        ROW("mul_scalar_", f_mul_scalar_, "a", S(2, 3)),
        ROW("div_scalar_", f_div_scalar_, "a", S(2, 3)),
        ROW("pow_scalar_", f_pow_scalar_, "p", S(2, 3)),
        ROW("where", f_where, "aa", S(2, 3), S(3)),
        ROW("masked_fill", f_masked_fill, "a", S(2, 3)),
        ROW("masked_fill_", f_masked_fill_, "a", S(2, 3)),
        ROW("view", f_view, "a", S(2, 3)),
        ROW("reshape", f_reshape, "a", S(2, 3)),
        ROW("reshape (copy)", f_reshape_copy, "a", S(2, 3)),
        ROW("flatten", f_flatten, "a", S(2, 3)),
        ROW("permute", f_permute, "a", S(2, 3, 2)),
        ROW("transpose", f_transpose, "a", S(2, 3, 2)),
        ROW("t", f_t, "a", S(2, 3)),
        ROW("squeeze", f_squeeze, "a", S(2, 1, 3)),
        ROW("squeeze_dim", f_squeeze_dim, "a", S(2, 1, 3)),
        ROW("unsqueeze", f_unsqueeze, "a", S(2, 3)),
        ROW("narrow", f_narrow, "a", S(2, 3)),
        ROW("slice", f_slice, "a", S(2, 5)),
        ROW("select", f_select, "a", S(2, 3)),
        ROW("expand", f_expand, "a", S(2, 1, 3)),
        ROW("expand_as", f_expand_as, "ac", S(3), S(2, 3)),
        ROW("contiguous", f_contiguous, "a", S(2, 3)),
        ROW("clone", f_clone, "a", S(2, 3)),
        ROW("copy_", f_copy_, "ca", S(2, 3), S(3)),
        ROW("to (other device)", f_to, "a", S(2, 3)),
        ROW("to_async (other device)", f_to_async, "a", S(2, 3)),
        ROWX("to_dtype (f32)", f_to_dtype, "a", 1e-2, 1e-4, false,
             S(2, 3)), /* linear: big eps is exact */
        ROWX("pin_memory", f_pin_memory, "a", 0, 0, true, S(2, 3)),
        ROW("sum", f_sum, "a", S(2, 3, 2)),
        ROW("sum_dim", f_sum_dim, "a", S(2, 3, 2)),
        ROW("sum_dims", f_sum_dims, "a", S(2, 3, 2)),
        ROW("mean", f_mean, "a", S(2, 3, 2)),
        ROW("mean_dim", f_mean_dim, "a", S(2, 3, 2)),
        ROW("mean_dims", f_mean_dims, "a", S(2, 3, 2)),
        ROW("prod", f_prod, "a", S(2, 3, 2)),
        ROW("prod_dim", f_prod_dim, "a", S(2, 3, 2)),
        ROW("max", f_max, "a", S(2, 3, 2)),
        ROW("min", f_min, "a", S(2, 3, 2)),
        ROW("max_dim", f_max_dim, "a", S(2, 3, 2)),
        ROW("min_dim", f_min_dim, "a", S(2, 3, 2)),
        ROW("amax_dim", f_amax_dim, "a", S(2, 3, 2)),
        ROW("amin_dim", f_amin_dim, "a", S(2, 3, 2)),
        ROW("amax_dims", f_amax_dims, "a", S(2, 3, 2)),
        ROW("amin_dims", f_amin_dims, "a", S(2, 3, 2)),
        ROW("var", f_var, "a", S(2, 3, 2)),
        ROW("var_dim", f_var_dim, "a", S(2, 3, 2)),
        ROW("var_dims", f_var_dims, "a", S(2, 3, 2)),
        ROW("std", f_std, "a", S(2, 3, 2)),
        ROW("std_dim", f_std_dim, "a", S(2, 3, 2)),
        ROW("std_dims", f_std_dims, "a", S(2, 3, 2)),
        ROW("logsumexp", f_logsumexp, "a", S(2, 3, 2)),
        ROW("logsumexp_dim", f_logsumexp_dim, "a", S(2, 3, 2)),
        ROW("logsumexp_dims", f_logsumexp_dims, "a", S(2, 3, 2)),
        ROW("softmax", f_softmax, "a", S(2, 3, 2)),
        ROW("log_softmax", f_log_softmax, "a", S(2, 3, 2)),
        ROW("mm", f_mm, "aa", S(2, 3), S(3, 2)),
        ROW("bmm", f_bmm, "aa", S(2, 2, 3), S(2, 3, 2)),
        ROW("matmul (batch broadcast)", f_matmul, "aa", S(2, 1, 2, 3), S(2, 3, 2)),
        ROW("matmul (1-D @ 3-D)", f_matmul, "aa", S(3), S(2, 3, 2)),
        ROW("matmul (3-D @ 2-D)", f_matmul, "aa", S(2, 2, 3), S(3, 2)),
        ROW("index_select", f_index_select, "a", S(2, 3)),
        ROW("gather", f_gather, "a", S(2, 3)),
        ROW("sort", f_sort, "a", S(2, 3)),
        ROW("topk", f_topk, "a", S(3, 2)),
        ROW("kthvalue", f_kthvalue, "a", S(2, 3)),
        ROW("median_dim", f_median_dim, "a", S(2, 3)),
        ROW("median", f_median, "a", S(2, 3)),
        ROW("mode", f_mode, "a", S(2, 3)),
        ROW("quantile", f_quantile, "a", S(2, 4)),
        ROW("scatter_add", f_scatter_add, "aa", S(2, 3), S(2, 3)),
        ROW("scatter_add_", f_scatter_add_, "aa", S(2, 3), S(2, 2)),
        ROW("cat", f_cat, "aaa", S(2, 3), S(2, 1), S(2, 2)),
        ROW("stack", f_stack, "aa", S(2, 3), S(2, 3)),
        ROW("split", f_split, "a", S(2, 5)),
        ROW("chunk", f_chunk, "a", S(5, 2)),
        ROW("linear", f_linear, "aaa", S(4, 3), S(2, 3), S(2)),
        ROW("linear (no bias, 3-D input)", f_linear_nobias, "aa", S(2, 2, 3), S(2, 3)),
        ROW("conv2d", f_conv2d, "aaa", S(2, 2, 4, 4), S(3, 2, 3, 3), S(3)),
        ROW("conv2d (stride, padding, dilation)", f_conv2d_strided, "aa", S(1, 2, 5, 4),
            S(2, 2, 2, 2)),
        ROW("conv2d (groups)", f_conv2d_groups, "aaa", S(1, 4, 3, 3), S(4, 2, 3, 3), S(4)),
        ROW("max_pool2d", f_max_pool2d, "a", S(2, 2, 4, 4)),
        ROW("max_pool2d (padding, ceil_mode)", f_max_pool2d_pad, "a", S(1, 2, 5, 4)),
        ROW("avg_pool2d", f_avg_pool2d, "a", S(2, 2, 4, 4)),
        ROW("avg_pool2d (padding, exclude_pad)", f_avg_pool2d_pad, "a", S(1, 2, 5, 5)),
        ROW("adaptive_avg_pool2d", f_adaptive_avg_pool2d, "a", S(1, 2, 5, 5)),
        ROW("dropout (eval)", f_dropout_eval, "a", S(2, 3)),
        ROW("batch_norm (train, 1d)", f_batch_norm_train, "aaa", S(4, 3), S(3), S(3)),
        ROW("batch_norm (train, 2d)", f_batch_norm_train, "aaa", S(2, 3, 2, 2), S(3), S(3)),
        ROW("batch_norm (eval)", f_batch_norm_eval, "aaa", S(2, 3, 2), S(3), S(3)),
        ROW("layer_norm", f_layer_norm, "aaa", S(2, 3, 4), S(4), S(4)),
        ROW("layer_norm (2 dims, no affine)", f_layer_norm2, "a", S(2, 3, 4)),
        ROW("layer_norm (weight only, strided input)", f_layer_norm_w, "aa", S(5, 3), S(5)),
        ROW("layer_norm (bias only, 2 dims)", f_layer_norm_b, "aa", S(4, 2, 3), S(2, 3)),
        ROW("embedding", f_embedding, "a", S(5, 3)),
        ROW("roi_align", f_roi_align, "a", S(2, 2, 5, 5)),
        ROW("roi_align (adaptive sampling, not aligned)", f_roi_align_adaptive, "a", S(2, 2, 5, 5)),
        ROW("roi_pool", f_roi_pool, "a", S(2, 2, 5, 5)),
        ROW("gelu (tanh)", f_gelu_tanh, "a", S(2, 5)),
        ROW("rms_norm", f_rms_norm, "aa", S(2, 3, 4), S(4)),
        ROW("rms_norm (2 dims, no weight)", f_rms_norm2, "a", S(2, 3, 4)),
        ROW("scaled_dot_product_attention", f_sdpa, "aaa", S(2, 4, 3), S(2, 5, 3), S(2, 5, 2)),
        ROW("scaled_dot_product_attention (causal, scale)", f_sdpa_causal, "aaa", S(1, 2, 4, 3),
            S(1, 2, 6, 3), S(1, 2, 6, 4)),
        ROW("scaled_dot_product_attention (bool mask)", f_sdpa_bool, "aaa", S(2, 3), S(3, 3),
            S(3, 2)),
        ROW("scaled_dot_product_attention (additive mask)", f_sdpa_additive, "aaaa", S(2, 3, 2),
            S(2, 4, 2), S(2, 4, 3), S(3, 4)),
        ROW("cross_entropy", f_cross_entropy, "a", S(3, 4)),
        ROW("cross_entropy (probabilities)", f_cross_entropy_probs, "aq", S(3, 4), S(3, 4)),
        ROW("cross_entropy (label smoothing, sum)", f_cross_entropy_smooth, "a", S(3, 4)),
        ROW("cross_entropy (weight, ignore_index)", f_cross_entropy_weight, "aq", S(3, 4), S(4)),
        ROW("cross_entropy (none)", f_cross_entropy_none, "a", S(3, 4)),
        ROW("nll_loss", f_nll_loss, "a", S(3, 4)),
        ROW("mse_loss", f_mse_loss, "aa", S(2, 3), S(2, 3)),
        ROW("mse_loss (sum)", f_mse_loss_sum, "aa", S(2, 3), S(2, 3)),
        ROW("l1_loss", f_l1_loss, "aa", S(2, 3), S(2, 3)),
        ROW("smooth_l1_loss", f_smooth_l1_loss, "aa", S(2, 3), S(2, 3)),
        ROW("bce_with_logits", f_bce_with_logits, "au", S(2, 3), S(2, 3)),
        ROW("bce_with_logits (pos_weight)", f_bce_with_logits_w, "auk", S(2, 3), S(2, 3), S(3)),
    };
    memcpy(rows, all, sizeof all);
    return (int)(sizeof all / sizeof all[0]);
}

/* ------------------------------------------------------------------ the runner */
static uint64_t lcg = 0x853C49E6748FEA9BULL;
static double uniform(void) {
    lcg = lcg * 6364136223846793005ULL + 1442695040888963407ULL;
    return (double)(lcg >> 11) / 9007199254740992.0;
}

static ts_tensor *make_input(ts_shape s, char kind, ts_device dev) {
    double v[256];
    int64_t n = 1;
    for (int i = 0; i < s.ndim; i++) n *= s.dims[i];
    for (int64_t i = 0; i < n && i < 256; i++) {
        double u = uniform();
        if (kind == 'u' || kind == 'q')
            v[i] = u;
        else if (kind == 'p' || kind == 'k')
            v[i] = 0.5 + u;
        else
            v[i] = (u < 0.5 ? -1 : 1) * (0.5 + 2 * (u < 0.5 ? u : u - 0.5));
    }
    bool grad = kind != 'c' && kind != 'q' && kind != 'k';
    return ts_tensor_f64(s, v, (ts_opts){.device = dev, .requires_grad = grad});
}

int main(void) {
    ts_device devs[TS_TEST_MAX_DEVICES];
    const int ndev = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    static row rows[256];
    const int nrows = table(rows);
    int ran = 0, failed = 0;
    for (int r = 0; r < nrows; r++) {
        for (int d = 0; d < ndev; d++) {
            if (rows[r].cpu_only && devs[d].type != TS_CPU) continue;
            ts_scope_begin();
            ts_tensor *in[4] = {0};
            const int n = (int)strlen(rows[r].kinds);
            for (int i = 0; i < n; i++) in[i] = make_input(rows[r].s[i], rows[r].kinds[i], devs[d]);
            ts_gradcheck_opts o = {.eps = rows[r].eps, .atol = rows[r].atol};
            bool ok = ts_gradcheck(rows[r].f, NULL, in, n, o);
            ts_scope_end();
            printf("gradcheck %s %s: %s%s\n", rows[r].name, ts_device_str(devs[d]),
                   ok ? "ok" : "FAILED", ok ? "" : ts_test_error_str());
            fflush(stdout); /* in order with gradcheck's details on stderr */
            ts_test_record(ok);
            ts_error_clear();
            ran++;
            failed += !ok;
        }
    }
    printf("gradcheck list: %d ops, %d checks, %d ok, %d FAILED\n", nrows, ran, ran - failed,
           failed);
    return ts_test_finish();
}
