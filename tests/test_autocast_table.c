/* test_autocast_table.c — the autocast op policy table: output dtypes of every listed op on cpu
 * bf16, sim bf16 and sim f16 for f32, lower-precision, mixed, f64 and integer inputs, against
 * PyTorch's lists. */
#include <stdio.h>
#include <string.h>

#include "autocast_util.h"
#include "ts_test.h"

/* ==================================================================== the policy table
 * Input classes: F32 (every floating input f32), LOW (every floating input in the region's dtype),
 * MIX (two-input ops: the first in the region's dtype, the others f32; one-input ops: the input in
 * the *other* half dtype, f16 in a bf16 region), F64, INT (int64).
 * Expected result letters: L region dtype, O the other half dtype, F f32, D f64, I int64, X the op
 * refuses its inputs (a dtype error, with or without autocast).
 *
 * The letters are PyTorch's lists (aten/src/ATen/autocast_mode.cpp): the CUDA registrations, which
 * Tessera applies on cuda and sim, in `expect`; on the cpu `expect_cpu` where the CPU's lists
 * differ (decision 0033), as PyTorch 2.15's torch.autocast("cpu", dtype=torch.bfloat16) gives them:
 * the CUDA fp32 functions, reductions, softmaxes and cumulative ops are not listed there (F32 F,
 * LOW L, MIX O; two-tensor pow F by promotion), layer_norm and rms_norm keep a half input's dtype
 * with f32 parameters (MIX L), scatter_add refuses mixed dtypes (MIX X). Rows: lower_precision_fp:
 * mm, bmm, matmul, linear, conv2d                      -> F32/LOW/MIX: L fp32: exp, expm1, log,
 * log1p, log2, log10, erfinv, reciprocal, rsqrt, tan, asin, acos, sinh, cosh, pow (Tensor_Tensor,
 * Tensor_Scalar, Scalar), softplus, layer_norm, rms_norm, nll_loss, l1_loss, smooth_l1_loss,
 * mse_loss, kl_div, huber_loss, soft_margin_loss, hinge_embedding_loss, poisson_nll_loss,
 * margin_ranking_loss, triplet_margin_loss, binary_cross_entropy_with_logits, logsumexp;
 * fp32_set_opt_dtype: sum, prod, softmax, log_softmax, cumsum, cumprod; cross_entropy (PyTorch's
 * composite of log_softmax + nll_loss, both fp32)    -> F32/LOW/MIX: F batch_norm: on no CPU or
 * CUDA list (their kernels take a half input with f32 parameters and give the input's dtype), as
 * Tessera's                                    -> F32 F, LOW/MIX L promote: scatter_add (CUDA), cat
 * and stack (CPU's promote list), where (promotes natively)
 *                                                                             -> F32 F, LOW L, MIX
 * F not listed (mean, var, sqrt, atan, erf, relu, add): run on their inputs as they are. Only
 * floating inputs other than float64 are cast (is_eligible): F64 and INT give what the op gives
 * without autocast. PyTorch 1.13's torch.autocast('cpu', dtype=torch.bfloat16) confirms every row
 * whose op is on both its CPU and CUDA lists (mm, bmm, matmul, linear, conv2d, prod, the losses,
 * cat, stack) and the unlisted add/where/mean rows; conv2d INT differs (PyTorch's CPU conv takes
 * integers, Tessera's refuses them with or without autocast). */
typedef enum {
    K_MM,
    K_BMM,
    K_LINEAR,
    K_CONV,
    K_UNARY,
    K_BINARY,
    K_CE,
    K_NORM,
    K_WHERE,
    K_ADDMM,
    K_ADDMV,
    K_ADDR,
    K_BADDBMM,
    K_ADDBMM,
    K_DOT,
    K_CONV1,
    K_CONV3
} kind;
typedef ts_tensor *(*apply_fn)(ts_tensor **in);

static ts_tensor *a_mm(ts_tensor **in) { return ts_mm(in[0], in[1]); }
static ts_tensor *a_bmm(ts_tensor **in) { return ts_bmm(in[0], in[1]); }
static ts_tensor *a_matmul(ts_tensor **in) { return ts_matmul(in[0], in[1]); }
static ts_tensor *a_linear(ts_tensor **in) { return ts_linear(in[0], in[1], in[2]); }
static ts_tensor *a_conv(ts_tensor **in) {
    return ts_conv2d(in[0], in[1], in[2], (ts_conv2d_opts){0});
}
static ts_tensor *a_conv1d(ts_tensor **in) {
    return ts_conv1d(in[0], in[1], in[2], (ts_convnd_opts){0});
}
static ts_tensor *a_conv3d(ts_tensor **in) {
    return ts_conv3d(in[0], in[1], in[2], (ts_convnd_opts){0});
}
static ts_tensor *a_group_norm(ts_tensor **in) {
    return ts_group_norm(in[0], 1, in[1], in[2], 1e-5, NULL, NULL);
}
static ts_tensor *a_bce_prob(ts_tensor **in) {
    return ts_binary_cross_entropy(ts_mul_scalar(in[0], 0.5), ts_mul_scalar(in[1], 0.5),
                                   (ts_loss_opts){0});
}
static ts_tensor *a_vector_norm(ts_tensor **in) {
    return ts_vector_norm(in[0], 2, TS_DIMS(1), false, TS_DTYPE_DEFAULT);
}
static ts_tensor *a_matrix_norm(ts_tensor **in) {
    return ts_matrix_norm(in[0], "fro", 0, 1, false, TS_DTYPE_DEFAULT);
}
static ts_tensor *a_addmm(ts_tensor **in) { return ts_addmm(in[0], in[1], in[2], 1, 1); }
static ts_tensor *a_addmv(ts_tensor **in) { return ts_addmv(in[0], in[1], in[2], 1, 1); }
static ts_tensor *a_addr(ts_tensor **in) { return ts_addr(in[0], in[1], in[2], 1, 1); }
static ts_tensor *a_baddbmm(ts_tensor **in) { return ts_baddbmm(in[0], in[1], in[2], 1, 1); }
static ts_tensor *a_addbmm(ts_tensor **in) { return ts_addbmm(in[0], in[1], in[2], 1, 1); }
static ts_tensor *a_mv(ts_tensor **in) { return ts_mv(in[0], in[1]); }
static ts_tensor *a_dot(ts_tensor **in) { return ts_dot(in[0], in[1]); }
static ts_tensor *a_tensordot(ts_tensor **in) {
    return ts_tensordot(in[0], in[1], TS_DIMS(1), TS_DIMS(0));
}
static ts_tensor *a_prelu(ts_tensor **in) { return ts_prelu(in[0], in[1]); }
static ts_tensor *a_cdist(ts_tensor **in) { return ts_cdist(in[0], in[1], 2.0); }
static ts_tensor *a_softmax(ts_tensor **in) { return ts_softmax(in[0], 1); }
static ts_tensor *a_log_softmax(ts_tensor **in) { return ts_log_softmax(in[0], 1); }
static ts_tensor *a_sum(ts_tensor **in) { return ts_sum(in[0]); }
static ts_tensor *a_sum_dim(ts_tensor **in) { return ts_sum_dim(in[0], 1, false); }
static ts_tensor *a_sum_dims(ts_tensor **in) { return ts_sum_dims(in[0], TS_DIMS(0, 1), true); }
static ts_tensor *a_prod(ts_tensor **in) { return ts_prod(in[0]); }
static ts_tensor *a_prod_dim(ts_tensor **in) { return ts_prod_dim(in[0], 0, true); }
static ts_tensor *a_cumsum(ts_tensor **in) { return ts_cumsum(in[0], 1, TS_DTYPE_DEFAULT); }
static ts_tensor *a_cumprod(ts_tensor **in) { return ts_cumprod(in[0], 0, TS_DTYPE_DEFAULT); }
static ts_tensor *a_logsumexp(ts_tensor **in) { return ts_logsumexp(in[0]); }
static ts_tensor *a_logsumexp_dim(ts_tensor **in) { return ts_logsumexp_dim(in[0], 1, false); }
static ts_tensor *a_exp(ts_tensor **in) { return ts_exp(in[0]); }
static ts_tensor *a_log(ts_tensor **in) { return ts_log(in[0]); }
static ts_tensor *a_log1p(ts_tensor **in) { return ts_log1p(in[0]); }
static ts_tensor *a_rsqrt(ts_tensor **in) { return ts_rsqrt(in[0]); }
static ts_tensor *a_reciprocal(ts_tensor **in) { return ts_reciprocal(in[0]); }
static ts_tensor *a_tan(ts_tensor **in) { return ts_tan(in[0]); }
static ts_tensor *a_asin(ts_tensor **in) { return ts_asin(in[0]); }
static ts_tensor *a_acos(ts_tensor **in) { return ts_acos(in[0]); }
static ts_tensor *a_sinh(ts_tensor **in) { return ts_sinh(in[0]); }
static ts_tensor *a_cosh(ts_tensor **in) { return ts_cosh(in[0]); }
static ts_tensor *a_atan(ts_tensor **in) { return ts_atan(in[0]); }
static ts_tensor *a_expm1(ts_tensor **in) { return ts_expm1(in[0]); }
static ts_tensor *a_log2(ts_tensor **in) { return ts_log2(in[0]); }
static ts_tensor *a_log10(ts_tensor **in) { return ts_log10(in[0]); }
static ts_tensor *a_erfinv(ts_tensor **in) { return ts_erfinv(in[0]); }
static ts_tensor *a_erf(ts_tensor **in) { return ts_erf(in[0]); }
static ts_tensor *a_softplus(ts_tensor **in) { return ts_softplus(in[0]); }
static ts_tensor *a_pow_scalar(ts_tensor **in) { return ts_pow_scalar(in[0], 2.0); }
static ts_tensor *a_rpow_scalar(ts_tensor **in) { return ts_rpow_scalar(in[0], 2.0); }
static ts_tensor *a_pow(ts_tensor **in) { return ts_pow(in[0], in[1]); }
static ts_tensor *a_mse(ts_tensor **in) { return ts_mse_loss(in[0], in[1]); }
static ts_tensor *a_l1(ts_tensor **in) { return ts_l1_loss(in[0], in[1], (ts_loss_opts){0}); }
static ts_tensor *a_smooth_l1(ts_tensor **in) {
    return ts_smooth_l1_loss(in[0], in[1], (ts_loss_opts){0});
}
static ts_tensor *a_bce(ts_tensor **in) {
    return ts_bce_with_logits(in[0], in[1], (ts_loss_opts){0});
}
/* the composed losses on the fp32 list (mean reduction) */
static ts_tensor *a_kl_div(ts_tensor **in) {
    return ts_kl_div(in[0], in[1], TS_REDUCTION_MEAN, false, false);
}
static ts_tensor *a_huber(ts_tensor **in) {
    return ts_huber_loss(in[0], in[1], TS_REDUCTION_MEAN, 1.0, NULL);
}
static ts_tensor *a_soft_margin(ts_tensor **in) {
    return ts_soft_margin_loss(in[0], in[1], TS_REDUCTION_MEAN);
}
static ts_tensor *a_hinge(ts_tensor **in) {
    return ts_hinge_embedding_loss(in[0], in[1], 1.0, TS_REDUCTION_MEAN);
}
static ts_tensor *a_poisson(ts_tensor **in) {
    return ts_poisson_nll_loss(in[0], in[1], true, false, 1e-8, TS_REDUCTION_MEAN);
}
static ts_tensor *a_margin_ranking(ts_tensor **in) {
    return ts_margin_ranking_loss(in[0], in[1], in[1], 0.0, TS_REDUCTION_MEAN);
}
static ts_tensor *a_triplet(ts_tensor **in) {
    return ts_triplet_margin_loss(in[0], in[1], in[1], 1.0, 2.0, 1e-6, false, TS_REDUCTION_MEAN);
}
static ts_tensor *a_ce(ts_tensor **in) { return ts_cross_entropy(in[0], in[1]); }
static ts_tensor *a_nll(ts_tensor **in) { return ts_nll_loss(in[0], in[1], (ts_loss_opts){0}); }
static ts_tensor *a_layer_norm(ts_tensor **in) {
    return ts_layer_norm(in[0], TS_SHAPE(3), in[1], in[2], 0);
}
static ts_tensor *a_rms_norm(ts_tensor **in) { return ts_rms_norm(in[0], TS_SHAPE(3), in[1], 0); }
static ts_tensor *a_batch_norm(ts_tensor **in) {
    return ts_batch_norm(in[0], in[3], in[4], in[1], in[2], true, 0.1, 0);
}
static ts_tensor *a_cat(ts_tensor **in) { return ts_cat(in, 2, 0); }
static ts_tensor *a_stack(ts_tensor **in) { return ts_stack(in, 2, 1); }
static ts_tensor *a_where(ts_tensor **in) { return ts_where(in[2], in[0], in[1]); }
static ts_tensor *a_scatter_add(ts_tensor **in) {
    ts_tensor *idx = ts_tensor_i64(TS_SHAPE(2, 3), (const int64_t[]){1, 0, 1, 0, 0, 1},
                                   (ts_opts){.device = cfg_dev});
    return ts_scatter_add(in[0], 0, idx, in[1]);
}
static ts_tensor *a_mean(ts_tensor **in) { return ts_mean(in[0]); }
static ts_tensor *a_var(ts_tensor **in) { return ts_var(in[0]); }
static ts_tensor *a_sqrt(ts_tensor **in) { return ts_sqrt(in[0]); }
static ts_tensor *a_relu(ts_tensor **in) { return ts_relu(in[0]); }
static ts_tensor *a_add(ts_tensor **in) { return ts_add(in[0], in[1]); }

typedef struct row {
    const char *name;
    kind k;
    apply_fn fn;
    const char *expect;     /* one letter per class: F32 LOW MIX F64 INT (CUDA's lists: sim) */
    const char *expect_cpu; /* the same on the cpu (the CPU's lists); NULL: as expect */
} row;

/* Issue 52's rows, from PyTorch 2.15's lists (the cpu measured with torch.autocast("cpu")): the
 * add* products, mv, conv1d, conv3d and prelu are lower_precision_fp (addmv, addr and mv on CUDA's
 * list only: on the cpu their kernels run on the inputs as they are); cdist, group_norm and the
 * vector / matrix norms fp32 (group_norm the input's dtype on the cpu, as layer_norm; the norms on
 * CUDA's list only); dot and tensordot CUDA's promote; binary_cross_entropy CUDA's banned list (X
 * for any dtype) and the CPU's fp32. */
static const row rows[] = {
    /* lower_precision_fp */
    {"mm", K_MM, a_mm, "LLLDI", NULL},
    {"bmm", K_BMM, a_bmm, "LLLDI", NULL},
    {"matmul", K_MM, a_matmul, "LLLDI", NULL},
    {"linear", K_LINEAR, a_linear, "LLLDI", NULL},
    {"conv2d", K_CONV, a_conv, "LLLDX", NULL},
    {"conv1d", K_CONV1, a_conv1d, "LLLDX", NULL},
    {"conv3d", K_CONV3, a_conv3d, "LLLDX", NULL},
    {"addmm", K_ADDMM, a_addmm, "LLLDI", NULL},
    {"baddbmm", K_BADDBMM, a_baddbmm, "LLLDI", NULL},
    {"addbmm", K_ADDBMM, a_addbmm, "LLLDI", NULL},
    /* on CUDA's list only: on the cpu the op's kernel on its inputs (mixed: its dtype error) */
    {"addmv", K_ADDMV, a_addmv, "LLLDI", "FLXDI"},
    {"addr", K_ADDR, a_addr, "LLLDI", "FLFDI"},
    {"mv", K_NORM, a_mv, "LLLDI", "FLXDI"},
    {"prelu", K_NORM, a_prelu, "LLLDX", NULL},
    /* fp32 (integer inputs: what the op gives them, e.g. exp(int) is f32, sum(int) int64) */
    {"softmax", K_UNARY, a_softmax, "FFFDX", "FLODX"},
    {"log_softmax", K_UNARY, a_log_softmax, "FFFDX", "FLODX"},
    {"sum", K_UNARY, a_sum, "FFFDI", "FLODI"},
    {"sum_dim", K_UNARY, a_sum_dim, "FFFDI", "FLODI"},
    {"sum_dims", K_UNARY, a_sum_dims, "FFFDI", "FLODI"},
    {"prod", K_UNARY, a_prod, "FFFDI", NULL},
    {"prod_dim", K_UNARY, a_prod_dim, "FFFDI", NULL},
    {"cumsum", K_UNARY, a_cumsum, "FFFDI", "FLODI"},
    {"cumprod", K_UNARY, a_cumprod, "FFFDI", "FLODI"},
    {"logsumexp", K_UNARY, a_logsumexp, "FFFDF", "FLODF"},
    {"logsumexp_dim", K_UNARY, a_logsumexp_dim, "FFFDF", "FLODF"},
    {"vector_norm", K_UNARY, a_vector_norm, "FFFDX", "FLODX"},
    {"matrix_norm", K_UNARY, a_matrix_norm, "FFFDX", "FLODX"},
    {"exp", K_UNARY, a_exp, "FFFDF", "FLODF"},
    {"log", K_UNARY, a_log, "FFFDF", "FLODF"},
    {"log1p", K_UNARY, a_log1p, "FFFDF", "FLODF"},
    {"rsqrt", K_UNARY, a_rsqrt, "FFFDF", "FLODF"},
    {"reciprocal", K_UNARY, a_reciprocal, "FFFDF", "FLODF"},
    {"tan", K_UNARY, a_tan, "FFFDF", "FLODF"},
    {"asin", K_UNARY, a_asin, "FFFDF", "FLODF"},
    {"acos", K_UNARY, a_acos, "FFFDF", "FLODF"},
    {"sinh", K_UNARY, a_sinh, "FFFDF", "FLODF"},
    {"cosh", K_UNARY, a_cosh, "FFFDF", "FLODF"},
    {"expm1", K_UNARY, a_expm1, "FFFDF", "FLODF"},
    {"log2", K_UNARY, a_log2, "FFFDF", "FLODF"},
    {"log10", K_UNARY, a_log10, "FFFDF", "FLODF"},
    {"erfinv", K_UNARY, a_erfinv, "FFFDF", "FLODF"},
    {"softplus", K_UNARY, a_softplus, "FFFDX", "FLODX"},
    {"pow_scalar", K_UNARY, a_pow_scalar, "FFFDI", "FLODI"},
    {"rpow_scalar", K_UNARY, a_rpow_scalar, "FFFDI", "FLODI"},
    {"pow", K_BINARY, a_pow, "FFFDI", "FLFDI"},
    {"mse_loss", K_BINARY, a_mse, "FFFDX", NULL},
    {"l1_loss", K_BINARY, a_l1, "FFFDX", NULL},
    {"smooth_l1_loss", K_BINARY, a_smooth_l1, "FFFDX", NULL},
    {"bce_with_logits", K_BINARY, a_bce, "FFFDX", NULL},
    {"kl_div", K_BINARY, a_kl_div, "FFFDX", NULL},
    {"huber_loss", K_BINARY, a_huber, "FFFDX", NULL},
    {"soft_margin_loss", K_BINARY, a_soft_margin, "FFFDX", NULL},
    {"hinge_embedding_loss", K_BINARY, a_hinge, "FFFDX", NULL},
    {"poisson_nll_loss", K_BINARY, a_poisson, "FFFDX", NULL},
    {"margin_ranking_loss", K_BINARY, a_margin_ranking, "FFFDX", NULL},
    {"triplet_margin_loss", K_BINARY, a_triplet, "FFFDX", NULL},
    {"cdist", K_BINARY, a_cdist, "FFFDX", NULL},
    /* banned on CUDA's list (X: the error under autocast, any dtype, as PyTorch's banned
     * kernel); the CPU's fp32 list */
    {"binary_cross_entropy", K_BINARY, a_bce_prob, "XXXXX", "FFFDX"},
    {"cross_entropy", K_CE, a_ce, "FFFDX", NULL},
    {"nll_loss", K_CE, a_nll, "FFFDX", NULL},
    {"layer_norm", K_NORM, a_layer_norm, "FFFDX", "FLLDX"},
    {"rms_norm", K_NORM, a_rms_norm, "FFFDX", "FLLDX"},
    {"batch_norm", K_NORM, a_batch_norm, "FLLDX", NULL},
    {"group_norm", K_NORM, a_group_norm, "FFFDX", "FLLDX"},
    /* promote */
    {"cat", K_BINARY, a_cat, "FLFDI", NULL},
    {"stack", K_BINARY, a_stack, "FLFDI", NULL},
    {"where", K_WHERE, a_where, "FLFDI", NULL},
    {"scatter_add", K_BINARY, a_scatter_add, "FLFDI", "FLXDI"},
    /* CUDA's promote list; on the cpu dot is its kernel (mixed: its dtype error) and tensordot
     * composes mm (lower_precision_fp) after its same-dtype check */
    {"dot", K_DOT, a_dot, "FLFDI", "FLXDI"},
    {"tensordot", K_MM, a_tensordot, "FLFDI", "LLXDI"},
    /* not listed: untouched */
    {"mean", K_UNARY, a_mean, "FLODX", NULL},
    {"var", K_UNARY, a_var, "FLODX", NULL},
    {"sqrt", K_UNARY, a_sqrt, "FLODF", NULL},
    {"atan", K_UNARY, a_atan, "FLODF", NULL},
    {"erf", K_UNARY, a_erf, "FLODF", NULL},
    {"relu", K_UNARY, a_relu, "FLODI", NULL},
    {"add", K_BINARY, a_add, "FLFDI", NULL},
};

enum { C_F32, C_LOW, C_MIX, C_F64, C_INT, N_CLASSES };
static const char *class_names[N_CLASSES] = {"f32", "low", "mixed", "f64", "int"};

/* The dtype of input i (i = 0 first, i > 0 the others) in class c for a row of kind k. */
static ts_dtype input_dtype(int c, int i, bool one_input) {
    switch (c) {
    case C_F32:
        return TS_F32;
    case C_LOW:
        return cfg_lower;
    case C_MIX:
        return one_input ? cfg_other : i == 0 ? cfg_lower : TS_F32;
    case C_F64:
        return TS_F64;
    default:
        return TS_I64;
    }
}

static ts_tensor *make(ts_shape s, ts_dtype dt) {
    if (dt == TS_I64) return ts_randint(1, 4, s, (ts_opts){.device = cfg_dev});
    return randu(s, dt, 0.5, 1.5);
}

/* The inputs of a row in class c (5 slots at most). */
static void make_inputs(kind k, int c, ts_tensor **in) {
    const bool one = k == K_UNARY;
    ts_dtype d0 = input_dtype(c, 0, one), d1 = input_dtype(c, 1, one);
    switch (k) {
    case K_MM:
        in[0] = make(TS_SHAPE(2, 3), d0), in[1] = make(TS_SHAPE(3, 4), d1);
        break;
    case K_BMM:
        in[0] = make(TS_SHAPE(2, 2, 3), d0), in[1] = make(TS_SHAPE(2, 3, 4), d1);
        break;
    case K_LINEAR:
        in[0] = make(TS_SHAPE(2, 3), d0), in[1] = make(TS_SHAPE(4, 3), d1);
        in[2] = make(TS_SHAPE(4), d1);
        break;
    case K_CONV:
        in[0] = make(TS_SHAPE(1, 1, 4, 4), d0), in[1] = make(TS_SHAPE(1, 1, 3, 3), d1);
        in[2] = make(TS_SHAPE(1), d1);
        break;
    case K_UNARY:
        in[0] = make(TS_SHAPE(2, 3), d0);
        break;
    case K_BINARY:
        in[0] = make(TS_SHAPE(2, 3), d0), in[1] = make(TS_SHAPE(2, 3), d1);
        break;
    case K_CE:
        in[0] = make(TS_SHAPE(2, 3), d0);
        in[1] = ts_tensor_i64(TS_SHAPE(2), (const int64_t[]){0, 2}, (ts_opts){.device = cfg_dev});
        break;
    case K_NORM: /* x, weight, bias, running_mean, running_var */
        in[0] = make(TS_SHAPE(2, 3), d0);
        for (int i = 1; i < 5; i++) in[i] = make(TS_SHAPE(3), d1);
        break;
    case K_ADDMM: /* input, mat1, mat2 */
        in[0] = make(TS_SHAPE(2, 4), d0), in[1] = make(TS_SHAPE(2, 3), d1);
        in[2] = make(TS_SHAPE(3, 4), d1);
        break;
    case K_ADDMV:
        in[0] = make(TS_SHAPE(2), d0), in[1] = make(TS_SHAPE(2, 3), d1);
        in[2] = make(TS_SHAPE(3), d1);
        break;
    case K_ADDR:
        in[0] = make(TS_SHAPE(2, 3), d0), in[1] = make(TS_SHAPE(2), d1);
        in[2] = make(TS_SHAPE(3), d1);
        break;
    case K_BADDBMM:
    case K_ADDBMM:
        in[0] = make(k == K_BADDBMM ? TS_SHAPE(2, 2, 4) : TS_SHAPE(2, 4), d0);
        in[1] = make(TS_SHAPE(2, 2, 3), d1), in[2] = make(TS_SHAPE(2, 3, 4), d1);
        break;
    case K_CONV1:
    case K_CONV3:
        in[0] = make(k == K_CONV1 ? TS_SHAPE(1, 1, 4) : TS_SHAPE(1, 1, 4, 4, 4), d0);
        in[1] = make(k == K_CONV1 ? TS_SHAPE(1, 1, 3) : TS_SHAPE(1, 1, 3, 3, 3), d1);
        in[2] = make(TS_SHAPE(1), d1);
        break;
    case K_DOT:
        in[0] = make(TS_SHAPE(3), d0), in[1] = make(TS_SHAPE(3), d1);
        break;
    case K_WHERE:
        in[0] = make(TS_SHAPE(2, 3), d0), in[1] = make(TS_SHAPE(2, 3), d1);
        in[2] = ts_tensor_i64(TS_SHAPE(2, 3), (const int64_t[]){1, 0, 1, 1, 0, 0},
                              (ts_opts){.device = cfg_dev});
        in[2] = ts_to_dtype(in[2], TS_BOOL);
        break;
    }
}

static ts_dtype letter_dtype(char l) {
    switch (l) {
    case 'L':
        return cfg_lower;
    case 'O':
        return cfg_other;
    case 'F':
        return TS_F32;
    case 'D':
        return TS_F64;
    case 'I':
        return TS_I64;
    default:
        return TS_DTYPE_DEFAULT;
    }
}

static void test_policy_table(void) {
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
        for (int c = 0; c < N_CLASSES; c++) {
            ts_scope_begin();
            ts_tensor *in[5] = {0};
            make_inputs(rows[r].k, c, in);
            CHECK_OK();
            ts_autocast_begin(cfg_dev.type, cfg_lower);
            ts_tensor *y = rows[r].fn(in);
            ts_autocast_end();
            const char *expect =
                cfg_dev.type == TS_CPU && rows[r].expect_cpu ? rows[r].expect_cpu : rows[r].expect;
            const char want = expect[c];
            bool ok = want == 'X' ? !y && ts_error() != TS_OK
                                  : y && ts_dtype_of(y) == letter_dtype(want) && !ts_error();
            ts_test_record(ok);
            if (!ok)
                ts_test_failf(__FILE__, __LINE__, "%s: %s with %s inputs: expected %c, got %s%s",
                              cfg_name, rows[r].name, class_names[c], want,
                              y ? ts_dtype_name(ts_dtype_of(y)) : "NULL", ts_test_error_str());
            ts_error_clear();
            ts_scope_end();
        }
    }
}

/* binary_cross_entropy under CUDA's autocast (sim): PyTorch's banned kernel's error, naming the op
 * and the way out; the region's state is whole after it (the next op casts again) */
static void test_bce_banned(void) {
    ts_scope_begin();
    const ts_device sim = {TS_SIM, 0};
    ts_tensor *x = ts_full(TS_SHAPE(2, 3), 0.25, (ts_opts){.device = sim});
    ts_tensor *t = ts_full(TS_SHAPE(2, 3), 0.5, (ts_opts){.device = sim});
    ts_autocast_begin(TS_SIM, TS_BF16);
    CHECK(ts_binary_cross_entropy(x, t, (ts_loss_opts){0}) == NULL);
    CHECK_ERR_HAS(TS_ERR_UNSUPPORTED, "binary_cross_entropy: unsafe to autocast");
    ts_tensor *m = ts_mm(x, ts_transpose(t, 0, 1));
    CHECK(m && ts_dtype_of(m) == TS_BF16);
    ts_autocast_end();
    CHECK(ts_binary_cross_entropy(x, t, (ts_loss_opts){0}) != NULL);
    CHECK_OK();
    ts_scope_end();
}

int main(void) {
    if (ts_device_count(TS_SIM) < 2) return ts_test_skip("needs TS_SIM_DEVICES >= 2");
    ts_manual_seed(1);
    for (size_t c = 0; c < N_AUTOCAST_CFGS; c++) {
        autocast_cfg_select(c);
        test_policy_table();
    }
    test_bce_banned();
    return ts_test_finish();
}
