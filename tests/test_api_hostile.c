/* test_api_hostile.c — public functions called the way a careless or hostile caller would: NULL
 * handles, negative shapes, element counts whose product passes int64 or size_t, shapes with more
 * dims than a tensor holds, and absurd options. Each row must fail cleanly: the call returns its
 * failure value, the error has the expected code, and the message names the op (run under UBSan
 * and ASan in CI, so an overflow computed on the way is caught too). TS_HOSTILE_PRINT=1 prints
 * every row's code and message. */
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ts_test.h"

static ts_tensor *x23;   /* f32 [2, 3] */
static ts_tensor *idx;   /* i64 [3] */
static ts_module *lin;   /* Linear(3, 2) */
static ts_dataset *data; /* 4 samples */

/* A row calls one function and says whether it failed the way a failure looks for that function
 * (NULL, a status, NAN...). */
typedef struct row {
    const char *what;
    bool (*call)(void);
    ts_status code;
    const char *fragment; /* the message contains it: the op's name, at least */
} row;

static int64_t big_dims[TS_MAX_DIMS + 4];
static ts_shape bad_ndim(int n) {
    ts_shape s = {0};
    s.ndim = n;
    for (int i = 0; i < TS_MAX_DIMS; i++) s.dims[i] = 2;
    return s;
}

/* ---------------------------------------------------------------- NULL handles */
static bool null_add(void) { return ts_add(NULL, x23) == NULL; }
static bool null_add2(void) { return ts_add(x23, NULL) == NULL; }
static bool null_relu(void) { return ts_relu(NULL) == NULL; }
static bool null_sum(void) { return ts_sum(NULL) == NULL; }
static bool null_matmul(void) { return ts_matmul(NULL, x23) == NULL; }
static bool null_view(void) { return ts_view(NULL, TS_SHAPE(6)) == NULL; }
static bool null_to(void) { return ts_to(NULL, ts_cpu()) == NULL; }
static bool null_item(void) { return isnan(ts_item(NULL)); }
static bool null_copy(void) {
    float buf[6];
    return ts_copy_to_host(NULL, buf, sizeof buf) != TS_OK;
}
static bool null_copy_dst(void) { return ts_copy_to_host(x23, NULL, 24) != TS_OK; }
static bool null_backward(void) {
    ts_backward(NULL);
    return true;
}
static bool null_forward_module(void) { return ts_forward(NULL, x23) == NULL; }
static bool null_forward_input(void) { return ts_forward(lin, NULL) == NULL; }
static bool null_cross_entropy(void) { return ts_cross_entropy(NULL, idx) == NULL; }
static bool null_optim_step(void) { return ts_optim_step(NULL) != TS_OK; }
static bool null_sgd(void) { return ts_sgd_new(NULL, (ts_sgd_opts){.lr = 0.1}) == NULL; }
static bool null_loader(void) { return ts_loader_new(NULL, (ts_loader_opts){0}) == NULL; }
static bool null_loader_next(void) {
    /* a refused call still leaves the batch empty (a caller may release what it holds) */
    ts_batch b;
    memset(&b, 0x5a, sizeof b);
    return !ts_loader_next(NULL, &b) && !b.x && !b.y && b.index == 0 && b.epoch == 0;
}
static bool null_loader_epoch(void) { return ts_loader_epoch(NULL) == -1; }
static bool null_memory_stats(void) { return ts_memory_stats(ts_cpu(), NULL) != TS_OK; }
static bool null_device_parse(void) {
    ts_device d;
    return ts_device_parse(NULL, &d) != TS_OK;
}
static bool null_device_parse_out(void) { return ts_device_parse("cpu", NULL) != TS_OK; }
static bool null_safetensors_path(void) {
    ts_tensor_list l = {0};
    return ts_safetensors_load(NULL, ts_cpu(), &l) != TS_OK;
}
static bool null_module_save(void) { return ts_module_save(NULL, "/tmp/x.safetensors") != TS_OK; }
static bool null_module_save_path(void) { return ts_module_save(lin, NULL) != TS_OK; }
static bool null_cat_list(void) { return ts_cat(NULL, 2, 0) == NULL; }
static bool null_cat_item(void) {
    ts_tensor *two[2] = {x23, NULL};
    return ts_cat(two, 2, 0) == NULL;
}

/* ---------------------------------------------------------------- negative shapes */
static bool neg_zeros(void) { return ts_zeros(TS_SHAPE(-1, 3), (ts_opts){0}) == NULL; }
static bool neg_empty(void) { return ts_empty(TS_SHAPE(2, -5), (ts_opts){0}) == NULL; }
static bool neg_randn(void) { return ts_randn(TS_SHAPE(-3), (ts_opts){0}) == NULL; }
static bool neg_full(void) { return ts_full(TS_SHAPE(INT64_MIN), 1.0, (ts_opts){0}) == NULL; }
static bool neg_from_data(void) {
    float v[1] = {0};
    return ts_from_data(TS_SHAPE(-1), TS_F32, v, (ts_opts){0}) == NULL;
}
static bool neg_view(void) { return ts_view(x23, TS_SHAPE(-1, -1)) == NULL; }
static bool neg_reshape(void) { return ts_reshape(x23, TS_SHAPE(-2, -3)) == NULL; }
static bool neg_expand(void) { return ts_expand(x23, TS_SHAPE(-5, 3)) == NULL; }
static bool neg_linear(void) { return ts_linear_new(-1, 3) == NULL; }
static bool neg_randperm(void) { return ts_randperm(-4, (ts_opts){0}) == NULL; }
static bool neg_narrow(void) { return ts_narrow(x23, 1, -1, 2) == NULL; }
static bool neg_one_hot(void) { return ts_one_hot(idx, -5) == NULL; }

/* ---------------------------------------------------------------- overflowing shapes */
/* 2^32 x 2^32 = 2^64 elements: past int64 */
static bool ovf_zeros_2p64(void) {
    return ts_zeros(TS_SHAPE((int64_t)1 << 32, (int64_t)1 << 32), (ts_opts){0}) == NULL;
}
/* 3037000500^2 just passes INT64_MAX */
static bool ovf_empty_sq(void) {
    return ts_empty(TS_SHAPE(3037000500LL, 3037000500LL), (ts_opts){0}) == NULL;
}
/* INT64_MAX elements of 8 bytes: the count fits, the bytes do not fit size_t */
static bool ovf_bytes(void) {
    return ts_empty(TS_SHAPE(INT64_MAX), (ts_opts){.dtype = TS_F64}) == NULL;
}
/* 2^61 floats = 2^63 bytes: fits size_t, no machine has it */
static bool ovf_oom(void) { return ts_empty(TS_SHAPE((int64_t)1 << 61), (ts_opts){0}) == NULL; }
static bool ovf_ones_many_dims(void) {
    return ts_ones(TS_SHAPE(1 << 20, 1 << 20, 1 << 20, 1 << 20), (ts_opts){0}) == NULL;
}
static bool ovf_expand(void) {
    return ts_expand(ts_ones(TS_SHAPE(1, 1), (ts_opts){0}),
                     TS_SHAPE(INT64_MAX / 2, INT64_MAX / 2)) == NULL;
}
static bool ovf_view(void) {
    return ts_view(x23, TS_SHAPE((int64_t)1 << 32, (int64_t)1 << 32, -1)) == NULL;
}
static bool ovf_randint(void) {
    return ts_randint(0, 10, TS_SHAPE(INT64_MAX, 3), (ts_opts){0}) == NULL;
}
static bool ovf_arange(void) { return ts_arange(0, 1e300, 1e-300, (ts_opts){0}) == NULL; }
static bool ovf_linear(void) { return ts_linear_new(INT64_MAX, INT64_MAX) == NULL; }
static bool ovf_randperm(void) { return ts_randperm(INT64_MAX, (ts_opts){0}) == NULL; }

/* ---------------------------------------------------------------- shapes the struct cannot hold */
static bool ndim_over(void) { return ts_zeros(bad_ndim(TS_MAX_DIMS + 3), (ts_opts){0}) == NULL; }
static bool ndim_negative(void) { return ts_zeros(bad_ndim(-1), (ts_opts){0}) == NULL; }
static bool ndim_huge_view(void) { return ts_view(x23, bad_ndim(INT_MAX)) == NULL; }
static bool ndim_macro(void) {
    return ts_ones(ts_shape_make(TS_MAX_DIMS + 4, big_dims), (ts_opts){0}) == NULL;
}

/* ---------------------------------------------------------------- absurd options */
static bool opt_arange_step0(void) { return ts_arange(0, 5, 0, (ts_opts){0}) == NULL; }
static bool opt_arange_nan(void) { return ts_arange(0, NAN, 1, (ts_opts){0}) == NULL; }
static bool opt_softmax_dim(void) { return ts_softmax(x23, 99) == NULL; }
static bool opt_transpose_dim(void) { return ts_transpose(x23, 0, -99) == NULL; }
static bool opt_sum_dim(void) { return ts_sum_dim(x23, INT_MIN, false) == NULL; }
static bool opt_dropout_p(void) { return ts_dropout(x23, 1.5, true) == NULL; }
static bool opt_sort_dim(void) { return ts_sort(x23, INT_MIN, false, false, NULL) == NULL; }
static bool opt_topk_k(void) { return ts_topk(x23, INT64_MAX, -1, true, true, NULL) == NULL; }
static bool opt_kthvalue_k(void) { return ts_kthvalue(x23, INT64_MIN, 0, false, NULL) == NULL; }
static bool opt_histc_bins(void) { return ts_histc(x23, -1, 0, 1) == NULL; }
static bool opt_quantile_q(void) {
    return ts_quantile(x23, NULL, NAN, false, 0, false, "linear") == NULL;
}
static bool opt_dropout_nan(void) { return ts_dropout(x23, NAN, true) == NULL; }
static bool opt_sgd_lr_nan(void) { return ts_sgd_new(lin, (ts_sgd_opts){.lr = NAN}) == NULL; }
static bool opt_sgd_lr_neg(void) { return ts_sgd_new(lin, (ts_sgd_opts){.lr = -1}) == NULL; }
static bool opt_sgd_momentum_inf(void) {
    return ts_sgd_new(lin, (ts_sgd_opts){.lr = 0.1, .momentum = INFINITY}) == NULL;
}
static bool opt_adam_lr_inf(void) {
    return ts_adam_new(lin, (ts_adam_opts){.lr = INFINITY}) == NULL;
}
static bool opt_sgd_decay_neg(void) {
    return ts_sgd_new(lin, (ts_sgd_opts){.lr = 0.1, .weight_decay = -0.5}) == NULL;
}
static bool opt_sgd_decay_inf(void) {
    return ts_sgd_new(lin, (ts_sgd_opts){.lr = 0.1, .weight_decay = INFINITY}) == NULL;
}
static bool opt_adam_beta(void) { return ts_adam_new(lin, (ts_adam_opts){.beta1 = 2}) == NULL; }
static bool opt_adam_eps(void) { return ts_adam_new(lin, (ts_adam_opts){.eps = -1}) == NULL; }
static bool opt_rmsprop_alpha(void) {
    return ts_rmsprop_new(lin, (ts_rmsprop_opts){.alpha = 1.5}) == NULL;
}
static bool opt_loader_batch(void) {
    return ts_loader_new(data, (ts_loader_opts){.batch_size = -5}) == NULL;
}
static bool opt_loader_workers(void) {
    return ts_loader_new(data, (ts_loader_opts){.workers = -1}) == NULL;
}
static bool opt_loader_many_workers(void) {
    return ts_loader_new(data, (ts_loader_opts){.workers = 1 << 20}) == NULL;
}
static bool opt_loader_prefetch(void) {
    return ts_loader_new(data, (ts_loader_opts){.prefetch = -1}) == NULL;
}
static bool opt_conv_stride(void) {
    return ts_conv2d_new(3, 4, 3, (ts_conv2d_opts){.stride = {0, -1}}) == NULL;
}
static bool opt_conv_padding(void) {
    return ts_conv2d_new(3, 4, 3, (ts_conv2d_opts){.padding = {-1, 0}}) == NULL;
}
static bool opt_conv_groups(void) {
    return ts_conv2d_new(3, 4, 3, (ts_conv2d_opts){.groups = 2}) == NULL;
}
static bool opt_conv_kernel(void) { return ts_conv2d_new(3, 4, -3, (ts_conv2d_opts){0}) == NULL; }
static bool opt_pool_kernel(void) {
    return ts_max_pool2d(ts_ones(TS_SHAPE(1, 1, 4, 4), (ts_opts){0}),
                         (ts_pool2d_opts){.kernel = {0, 2}}) == NULL;
}
static bool opt_pool_stride(void) {
    return ts_avg_pool2d(ts_ones(TS_SHAPE(1, 1, 4, 4), (ts_opts){0}),
                         (ts_pool2d_opts){.kernel = {2, 2}, .stride = {-1, 1}}) == NULL;
}
static bool opt_sim_configure(void) { return ts_sim_configure(-1, 0) != TS_OK; }
static bool opt_sim_configure_many(void) { return ts_sim_configure(INT_MAX, 0) != TS_OK; }
static bool opt_embedding(void) { return ts_embedding_new(-1, 3) == NULL; }
static bool opt_randint_range(void) { return ts_randint(5, 1, TS_SHAPE(2), (ts_opts){0}) == NULL; }
static bool opt_device_parse(void) {
    ts_device d;
    return ts_device_parse("sim:99999999999999999999", &d) != TS_OK;
}
static bool opt_dtype(void) { return ts_zeros(TS_SHAPE(2), (ts_opts){.dtype = 99}) == NULL; }
static bool opt_device_type(void) {
    return ts_zeros(TS_SHAPE(2), (ts_opts){.device = {.type = 77, .index = 0}}) == NULL;
}
static bool opt_device_index(void) {
    return ts_zeros(TS_SHAPE(2), (ts_opts){.device = {.type = TS_SIM, .index = INT_MIN}}) == NULL;
}
static bool opt_chunk(void) {
    ts_tensor *out[4];
    return ts_chunk(x23, 0, 0, out, 4) <= 0;
}

/* torchvision.ops (vision_ops.h) */
static bool null_nms(void) { return ts_nms(NULL, idx, 0.5) == NULL; }
static bool null_boxes_to_rois(void) { return ts_boxes_to_rois(NULL, 3) == NULL; }
static bool opt_roi_align_size(void) {
    return ts_roi_align(ts_ones(TS_SHAPE(1, 1, 4, 4), (ts_opts){0}),
                        ts_zeros(TS_SHAPE(1, 5), (ts_opts){0}), INT64_MAX, 2, 1.0, 2,
                        false) == NULL;
}
static bool opt_roi_pool_scale(void) {
    return ts_roi_pool(ts_ones(TS_SHAPE(1, 1, 4, 4), (ts_opts){0}),
                       ts_zeros(TS_SHAPE(1, 5), (ts_opts){0}), 2, 2, NAN) == NULL;
}
static bool opt_box_fmt(void) {
    return ts_box_convert(ts_zeros(TS_SHAPE(2, 4), (ts_opts){0}), TS_BOX_XYXY, (ts_box_fmt)-1) ==
           NULL;
}

static const row rows[] = {
    /* clang-format off */
    {"add(NULL, x)", null_add, TS_ERR_ARG, "add"},
    {"nms(NULL, s)", null_nms, TS_ERR_ARG, "nms"},
    {"boxes_to_rois(NULL, 3)", null_boxes_to_rois, TS_ERR_ARG, "boxes_to_rois"},
    {"roi_align(out_h INT64_MAX)", opt_roi_align_size, TS_ERR_ARG, "roi_align"},
    {"roi_pool(spatial_scale NaN)", opt_roi_pool_scale, TS_ERR_ARG, "roi_pool"},
    {"box_convert(out_fmt -1)", opt_box_fmt, TS_ERR_ARG, "box_convert"},
    {"add(x, NULL)", null_add2, TS_ERR_ARG, "add"},
    {"relu(NULL)", null_relu, TS_ERR_ARG, "relu"},
    {"sum(NULL)", null_sum, TS_ERR_ARG, "sum"},
    {"matmul(NULL, x)", null_matmul, TS_ERR_ARG, "matmul"},
    {"view(NULL)", null_view, TS_ERR_ARG, "view"},
    {"to(NULL)", null_to, TS_ERR_ARG, "to"},
    {"item(NULL)", null_item, TS_ERR_ARG, "item"},
    {"copy_to_host(NULL)", null_copy, TS_ERR_ARG, "copy_to_host"},
    {"copy_to_host(x, NULL)", null_copy_dst, TS_ERR_ARG, "copy_to_host"},
    {"backward(NULL)", null_backward, TS_ERR_ARG, "backward"},
    {"forward(NULL, x)", null_forward_module, TS_ERR_ARG, "forward"},
    {"forward(m, NULL)", null_forward_input, TS_ERR_ARG, "forward"},
    {"cross_entropy(NULL)", null_cross_entropy, TS_ERR_ARG, "cross_entropy"},
    {"optim_step(NULL)", null_optim_step, TS_ERR_ARG, "optim_step"},
    {"sgd(NULL module)", null_sgd, TS_ERR_ARG, "sgd"},
    {"loader_new(NULL)", null_loader, TS_ERR_ARG, "loader"},
    {"loader_next(NULL)", null_loader_next, TS_ERR_ARG, "loader"},
    {"loader_epoch(NULL)", null_loader_epoch, TS_ERR_ARG, "loader_epoch"},
    {"memory_stats(NULL out)", null_memory_stats, TS_ERR_ARG, "memory_stats"},
    {"device_parse(NULL)", null_device_parse, TS_ERR_ARG, "device"},
    {"device_parse(s, NULL)", null_device_parse_out, TS_ERR_ARG, "device"},
    {"safetensors_load(NULL)", null_safetensors_path, TS_ERR_ARG, "safetensors_load"},
    {"module_save(NULL)", null_module_save, TS_ERR_ARG, "save"},
    {"module_save(m, NULL)", null_module_save_path, TS_ERR_ARG, "save"},
    {"cat(NULL list)", null_cat_list, TS_ERR_ARG, "cat"},
    {"cat({x, NULL})", null_cat_item, TS_ERR_ARG, "cat"},
    {"zeros([-1, 3])", neg_zeros, TS_ERR_SHAPE, "zeros"},
    {"empty([2, -5])", neg_empty, TS_ERR_SHAPE, "empty"},
    {"randn([-3])", neg_randn, TS_ERR_SHAPE, "randn"},
    {"full([INT64_MIN])", neg_full, TS_ERR_SHAPE, "full"},
    {"from_data([-1])", neg_from_data, TS_ERR_SHAPE, "from_data"},
    {"view(x, [-1, -1])", neg_view, TS_ERR_SHAPE, "view"},
    {"reshape(x, [-2, -3])", neg_reshape, TS_ERR_SHAPE, "reshape"},
    {"expand(x, [-5, 3])", neg_expand, TS_ERR_SHAPE, "expand"},
    {"linear_new(-1, 3)", neg_linear, TS_ERR_ARG, "Linear"},
    {"randperm(-4)", neg_randperm, TS_ERR_ARG, "randperm"},
    {"narrow(x, 1, -1, 2)", neg_narrow, TS_ERR_ARG, "narrow"},
    {"one_hot(idx, -5)", neg_one_hot, TS_ERR_ARG, "one_hot"},
    {"zeros([2^32, 2^32])", ovf_zeros_2p64, TS_ERR_SHAPE, "zeros"},
    {"empty([3037000500, 3037000500])", ovf_empty_sq, TS_ERR_SHAPE, "empty"},
    {"empty([INT64_MAX]) f64", ovf_bytes, TS_ERR_OOM, "empty"},
    {"empty([2^61]) f32", ovf_oom, TS_ERR_OOM, "empty"},
    {"ones([2^20] x 4)", ovf_ones_many_dims, TS_ERR_SHAPE, "ones"},
    {"expand to [2^62, 2^62]", ovf_expand, TS_ERR_SHAPE, "expand"},
    {"view(x, [2^32, 2^32, -1])", ovf_view, TS_ERR_SHAPE, "view"},
    {"randint([INT64_MAX, 3])", ovf_randint, TS_ERR_SHAPE, "randint"},
    {"arange(0, 1e300, 1e-300)", ovf_arange, TS_ERR_ARG, "arange"},
    {"linear_new(INT64_MAX, INT64_MAX)", ovf_linear, TS_ERR_SHAPE, "Linear"},
    {"randperm(INT64_MAX)", ovf_randperm, TS_ERR_ARG, "randperm"},
    {"zeros(ndim 11)", ndim_over, TS_ERR_SHAPE, "zeros"},
    {"zeros(ndim -1)", ndim_negative, TS_ERR_SHAPE, "zeros"},
    {"view(x, ndim INT_MAX)", ndim_huge_view, TS_ERR_SHAPE, "view"},
    {"ones(ts_shape_make(12, ...))", ndim_macro, TS_ERR_SHAPE, "ones"},
    {"arange(0, 5, 0)", opt_arange_step0, TS_ERR_ARG, "arange"},
    {"arange(0, NAN, 1)", opt_arange_nan, TS_ERR_ARG, "arange"},
    {"softmax(x, 99)", opt_softmax_dim, TS_ERR_ARG, "softmax"},
    {"transpose(x, 0, -99)", opt_transpose_dim, TS_ERR_ARG, "transpose"},
    {"sum_dim(x, INT_MIN)", opt_sum_dim, TS_ERR_ARG, "sum"},
    {"dropout(x, 1.5)", opt_dropout_p, TS_ERR_ARG, "dropout"},
    {"sort(x, INT_MIN)", opt_sort_dim, TS_ERR_ARG, "sort"},
    {"topk(x, INT64_MAX)", opt_topk_k, TS_ERR_ARG, "topk"},
    {"kthvalue(x, INT64_MIN)", opt_kthvalue_k, TS_ERR_ARG, "kthvalue"},
    {"histc(x, -1 bins)", opt_histc_bins, TS_ERR_ARG, "histc"},
    {"quantile(x, NAN)", opt_quantile_q, TS_ERR_ARG, "quantile"},
    {"dropout(x, NAN)", opt_dropout_nan, TS_ERR_ARG, "dropout"},
    {"sgd(lr NAN)", opt_sgd_lr_nan, TS_ERR_ARG, "sgd"},
    {"sgd(lr -1)", opt_sgd_lr_neg, TS_ERR_ARG, "sgd"},
    {"sgd(momentum inf)", opt_sgd_momentum_inf, TS_ERR_ARG, "sgd"},
    {"adam(lr inf)", opt_adam_lr_inf, TS_ERR_ARG, "adam"},
    {"sgd(weight_decay inf)", opt_sgd_decay_inf, TS_ERR_ARG, "sgd"},
    {"sgd(weight_decay -0.5)", opt_sgd_decay_neg, TS_ERR_ARG, "sgd: invalid weight_decay value -0.5"},
    {"adam(beta1 2)", opt_adam_beta, TS_ERR_ARG, "adam"},
    {"adam(eps -1)", opt_adam_eps, TS_ERR_ARG, "adam"},
    {"rmsprop(alpha 1.5)", opt_rmsprop_alpha, TS_ERR_ARG, "rmsprop"},
    {"loader(batch_size -5)", opt_loader_batch, TS_ERR_ARG, "loader"},
    {"loader(workers -1)", opt_loader_workers, TS_ERR_ARG, "loader"},
    {"loader(workers 2^20)", opt_loader_many_workers, TS_ERR_ARG, "loader"},
    {"loader(prefetch -1)", opt_loader_prefetch, TS_ERR_ARG, "loader"},
    {"conv2d_new(stride {0, -1})", opt_conv_stride, TS_ERR_ARG, "Conv2d"},
    {"conv2d_new(padding -1)", opt_conv_padding, TS_ERR_ARG, "Conv2d"},
    {"conv2d_new(3 -> 4, groups 2)", opt_conv_groups, TS_ERR_ARG, "Conv2d"},
    {"conv2d_new(kernel -3)", opt_conv_kernel, TS_ERR_ARG, "Conv2d"},
    {"max_pool2d(kernel {0, 2})", opt_pool_kernel, TS_ERR_ARG, "max_pool2d"},
    {"avg_pool2d(stride -1)", opt_pool_stride, TS_ERR_ARG, "avg_pool2d"},
    {"sim_configure(-1)", opt_sim_configure, TS_ERR_ARG, "sim_configure"},
    {"sim_configure(INT_MAX)", opt_sim_configure_many, TS_ERR_ARG, "sim_configure"},
    {"embedding_new(-1, 3)", opt_embedding, TS_ERR_ARG, "embedding"},
    {"randint(5, 1)", opt_randint_range, TS_ERR_ARG, "randint"},
    {"device_parse(sim:99999999999999999999)", opt_device_parse, TS_ERR_ARG, "device"},
    {"zeros(dtype 99)", opt_dtype, TS_ERR_DTYPE, "zeros"},
    {"zeros(device type 77)", opt_device_type, TS_ERR_DEVICE, "zeros"},
    {"zeros(sim:INT_MIN)", opt_device_index, TS_ERR_DEVICE, "zeros"},
    {"chunk(x, 0 chunks)", opt_chunk, TS_ERR_ARG, "chunk"},
    /* clang-format on */
};

int main(void) {
    const bool print = getenv("TS_HOSTILE_PRINT") != NULL;
    for (int i = 0; i < TS_MAX_DIMS + 4; i++) big_dims[i] = 2;
    x23 = ts_ones(TS_SHAPE(2, 3), (ts_opts){0});
    idx = ts_tensor_i64(TS_SHAPE(3), (int64_t[]){0, 1, 1}, (ts_opts){0});
    lin = ts_linear_new(3, 2);
    ts_scope_begin(); /* the dataset keeps its own references */
    data = ts_tensor_dataset_new(ts_ones(TS_SHAPE(4, 3), (ts_opts){0}),
                                 ts_zeros(TS_SHAPE(4), (ts_opts){.dtype = TS_I64}));
    ts_scope_end();
    CHECK_OK();
    ts_mem_stats m0, m1;
    ts_memory_stats(ts_cpu(), &m0);
    int rejected = 0;
    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
        const row *r = &rows[i];
        ts_scope_begin();
        bool failed = r->call();
        ts_scope_end();
        ts_status got = ts_error();
        const char *msg = ts_error_message();
        if (print) printf("%-40s %-20s %s\n", r->what, ts_status_string(got), msg);
        bool ok = failed && got == r->code && strstr(msg, r->fragment) != NULL;
        CHECK(ok);
        if (!ok)
            printf("  %s: expected %s naming \"%s\"; returned %s, got %s: \"%s\"\n", r->what,
                   ts_status_string(r->code), r->fragment, failed ? "a failure" : "success",
                   ts_status_string(got), msg);
        rejected += ok;
        ts_error_clear();
    }
    ts_memory_stats(ts_cpu(), &m1);
    CHECK_EQ(m1.live_tensors, m0.live_tensors); /* nothing half-made was left behind */
    printf("%d of %zu hostile calls refused with the expected code and message\n", rejected,
           sizeof rows / sizeof *rows);
    ts_dataset_free(data);
    ts_module_free(lin);
    ts_release(x23);
    ts_release(idx);
    return ts_test_finish();
}
