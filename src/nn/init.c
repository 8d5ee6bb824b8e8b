/* init.c — torch.nn.init's formulas, in place, without a graph, from the global generator:
 * calculate_gain, kaiming, xavier, trunc_normal, orthogonal, sparse, dirac and the plain fills. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn/module_internal.h"

/* Runs one in-place fill under no-grad (parameters that require grad may be written) in a scope of
 * its own (the op's returned reference dies here). Returns t, borrowed, or NULL on failure. */
enum { FILL_UNIFORM, FILL_NORMAL, FILL_CONST };
static ts_tensor *fill(ts_tensor *t, int kind, double a, double b) {
    int depth = ts_scope_depth();
    ts_no_grad_begin();
    ts_scope_begin();
    ts_tensor *r = NULL;
    if (ts_scope_depth() == depth + 1) {
        if (kind == FILL_UNIFORM)
            r = ts_uniform_(t, a, b);
        else if (kind == FILL_NORMAL)
            r = ts_normal_(t, a, b);
        else
            r = ts_fill_(t, a);
        ts_scope_end();
    }
    ts_no_grad_end();
    return r ? t : NULL;
}

/* torch.nn.init._calculate_fan_in_and_fan_out */
static bool fans(const char *op, ts_tensor *t, double *fan_in, double *fan_out) {
    if (t->shape.ndim < 2)
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s: Fan in and fan out can not be computed for tensor with fewer "
                             "than 2 dimensions (got %s)",
                             op, tsi_desc(t)),
               false;
    double receptive = 1;
    for (int i = 2; i < t->shape.ndim; i++) receptive *= (double)t->shape.dims[i];
    *fan_in = (double)t->shape.dims[1] * receptive;
    *fan_out = (double)t->shape.dims[0] * receptive;
    return true;
}

/* kaiming_uniform_(t, a, mode='fan_in', nonlinearity='leaky_relu') and kaiming_normal_(t, a,
 * mode, 'leaky_relu'): ts_init_kaiming_ below. */
ts_tensor *ts_init_kaiming_uniform_(ts_tensor *t, double a) {
    return ts_init_kaiming_(t, a, TS_FAN_IN, "leaky_relu", false);
}

ts_tensor *ts_init_kaiming_normal_(ts_tensor *t, double a, ts_fan_mode mode) {
    return ts_init_kaiming_(t, a, mode, "leaky_relu", true);
}

/* xavier_uniform_(t, gain): U(-b, b) with b = gain * sqrt(6 / (fan_in + fan_out)). */
ts_tensor *ts_init_xavier_uniform_(ts_tensor *t, double gain) {
    const char *op = "init_xavier_uniform_";
    if (!tsi_check_input(op, t, "tensor")) return NULL;
    double fan_in, fan_out;
    if (!fans(op, t, &fan_in, &fan_out)) return NULL;
    double bound = gain * sqrt(6.0 / (fan_in + fan_out));
    return fill(t, FILL_UNIFORM, -bound, bound);
}

ts_tensor *ts_init_uniform_(ts_tensor *t, double low, double high) {
    if (!tsi_check_input("init_uniform_", t, "tensor")) return NULL;
    return fill(t, FILL_UNIFORM, low, high);
}

ts_tensor *ts_init_normal_(ts_tensor *t, double mean, double std) {
    if (!tsi_check_input("init_normal_", t, "tensor")) return NULL;
    return fill(t, FILL_NORMAL, mean, std);
}

ts_tensor *ts_init_zeros_(ts_tensor *t) {
    if (!tsi_check_input("init_zeros_", t, "tensor")) return NULL;
    return fill(t, FILL_CONST, 0, 0);
}

ts_tensor *ts_init_ones_(ts_tensor *t) {
    if (!tsi_check_input("init_ones_", t, "tensor")) return NULL;
    return fill(t, FILL_CONST, 1, 0);
}

/* ---------------------------------------------------------------- the rest of torch.nn.init */

/* torch.nn.init.calculate_gain: param NAN is None (leaky_relu's slope 0.01) */
double ts_init_calculate_gain(const char *nonlinearity, double param) {
    static const char *const one[] = {"linear",           "conv1d",           "conv2d",
                                      "conv3d",           "conv_transpose1d", "conv_transpose2d",
                                      "conv_transpose3d", "sigmoid"};
    if (!nonlinearity)
        return tsi_error_set(TS_ERR_ARG, "calculate_gain: nonlinearity is NULL"), NAN;
    for (size_t i = 0; i < sizeof one / sizeof *one; i++)
        if (!strcmp(nonlinearity, one[i])) return 1.0;
    if (!strcmp(nonlinearity, "tanh")) return 5.0 / 3;
    if (!strcmp(nonlinearity, "relu")) return sqrt(2.0);
    if (!strcmp(nonlinearity, "leaky_relu")) {
        double slope = isnan(param) ? 0.01 : param;
        return sqrt(2.0 / (1 + slope * slope));
    }
    if (!strcmp(nonlinearity, "selu")) return 3.0 / 4;
    return tsi_error_set(TS_ERR_ARG, "calculate_gain: Unsupported nonlinearity %s", nonlinearity),
           NAN;
}

/* kaiming_uniform_ / kaiming_normal_ with any mode and nonlinearity calculate_gain knows (a is
 * leaky_relu's slope): std = gain / sqrt(fan), U(-sqrt(3) std, sqrt(3) std) or N(0, std) */
ts_tensor *ts_init_kaiming_(ts_tensor *t, double a, ts_fan_mode mode, const char *nonlinearity,
                            bool normal) {
    const char *op = normal ? "init_kaiming_normal_" : "init_kaiming_uniform_";
    if (!tsi_check_input(op, t, "tensor")) return NULL;
    if (mode != TS_FAN_IN && mode != TS_FAN_OUT)
        return tsi_error_set(TS_ERR_ARG, "%s: mode must be TS_FAN_IN or TS_FAN_OUT, got %d", op,
                             (int)mode),
               NULL;
    if (tsi_numel(t->shape) == 0) return t;
    double fan_in, fan_out;
    if (!fans(op, t, &fan_in, &fan_out)) return NULL;
    double gain = ts_init_calculate_gain(nonlinearity, a);
    if (isnan(gain)) return NULL;
    double std = gain / sqrt(mode == TS_FAN_IN ? fan_in : fan_out);
    return normal ? fill(t, FILL_NORMAL, 0.0, std)
                  : fill(t, FILL_UNIFORM, -sqrt(3.0) * std, sqrt(3.0) * std);
}

/* xavier_normal_(t, gain): N(0, gain * sqrt(2 / (fan_in + fan_out))) */
ts_tensor *ts_init_xavier_normal_(ts_tensor *t, double gain) {
    const char *op = "init_xavier_normal_";
    if (!tsi_check_input(op, t, "tensor")) return NULL;
    double fan_in, fan_out;
    if (!fans(op, t, &fan_in, &fan_out)) return NULL;
    return fill(t, FILL_NORMAL, 0.0, gain * sqrt(2.0 / (fan_in + fan_out)));
}

static double norm_cdf(double x) { return (1.0 + erf(x / sqrt(2.0))) / 2.0; }

/* trunc_normal_(t, mean, std, a, b): PyTorch's way, in t's dtype: U(2 cdf(a') - 1, 2 cdf(b') - 1),
 * erfinv, times std sqrt(2), plus mean, clamped to [a, b] (a', b': the bounds standardized) */
ts_tensor *ts_init_trunc_normal_(ts_tensor *t, double mean, double std, double a, double b) {
    const char *op = "init_trunc_normal_";
    if (!tsi_check_input(op, t, "tensor")) return NULL;
    if (!tsi_is_float(t->dtype))
        return tsi_error_set(TS_ERR_DTYPE, "%s: tensor (%s) is not floating point", op,
                             tsi_desc(t)),
               NULL;
    if (!(std > 0) || !(a <= b))
        return tsi_error_set(TS_ERR_ARG, "%s: expected std > 0 and a <= b, got std %g, [%g, %g]",
                             op, std, a, b),
               NULL;
    const double lo = norm_cdf((a - mean) / std), hi = norm_cdf((b - mean) / std);
    ts_no_grad_begin();
    ts_scope_begin();
    if (ts_uniform_(t, 2 * lo - 1, 2 * hi - 1))
        ts_copy_(t,
                 ts_clamp(ts_add_scalar(ts_mul_scalar(ts_erfinv(t), std * sqrt(2.0)), mean), a, b));
    ts_scope_end();
    ts_no_grad_end();
    return ts_error() ? NULL : t;
}

/* orthogonal_(t, gain): Q of the QR decomposition of N(0, 1) draws [rows, numel / rows]
 * (transposed while rows < cols), its columns' signs those of R's diagonal, times gain */
ts_tensor *ts_init_orthogonal_(ts_tensor *t, double gain) {
    const char *op = "init_orthogonal_";
    if (!tsi_check_input(op, t, "tensor")) return NULL;
    if (t->shape.ndim < 2)
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s: Only tensors with 2 or more dimensions are supported (got %s)",
                             op, tsi_desc(t)),
               NULL;
    const int64_t numel = tsi_numel(t->shape);
    if (numel == 0) return t;
    const int64_t rows = t->shape.dims[0], cols = numel / rows;
    ts_no_grad_begin();
    ts_scope_begin();
    ts_tensor *flat =
        ts_randn(TS_SHAPE(rows, cols), (ts_opts){.dtype = t->dtype, .device = ts_device_of(t)});
    if (rows < cols) flat = ts_transpose(flat, 0, 1);
    ts_tensor *r = NULL, *q = ts_linalg_qr(flat, "reduced", &r);
    q = ts_mul(q, ts_sign(ts_diagonal(r, 0, 0, 1)));
    if (rows < cols) q = ts_transpose(q, 0, 1);
    ts_copy_(t, ts_reshape(q, t->shape));
    ts_mul_scalar_(t, gain);
    ts_scope_end();
    ts_no_grad_end();
    return ts_error() ? NULL : t;
}

/* sparse_(t, sparsity, std): N(0, std) draws, then in each column the rows of the first
 * ceil(sparsity * rows) entries of a random permutation set to 0 */
ts_tensor *ts_init_sparse_(ts_tensor *t, double sparsity, double std) {
    const char *op = "init_sparse_";
    if (!tsi_check_input(op, t, "tensor")) return NULL;
    if (t->shape.ndim != 2)
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s: Only tensors with 2 dimensions are supported (got %s)", op,
                             tsi_desc(t)),
               NULL;
    if (!(sparsity >= 0 && sparsity <= 1))
        return tsi_error_set(TS_ERR_ARG, "%s: sparsity must be in [0, 1], got %g", op, sparsity),
               NULL;
    const int64_t rows = t->shape.dims[0], cols = t->shape.dims[1];
    const int64_t zeros = (int64_t)ceil(sparsity * (double)rows);
    if (!fill(t, FILL_NORMAL, 0.0, std)) return NULL;
    if (zeros == 0 || cols == 0) return t;
    int64_t *flat = malloc((size_t)(zeros * cols) * sizeof *flat);
    int64_t *perm = malloc((size_t)rows * sizeof *perm);
    if (!flat || !perm) {
        free(flat), free(perm);
        return tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op), NULL;
    }
    ts_no_grad_begin();
    ts_scope_begin();
    for (int64_t c = 0; c < cols && !ts_error(); c++) {
        ts_tensor *p = ts_randperm(rows, (ts_opts){.dtype = TS_I64, .device = ts_cpu()});
        if (p && ts_copy_to_host(p, perm, (size_t)rows * sizeof *perm) == TS_OK)
            for (int64_t k = 0; k < zeros; k++) flat[c * zeros + k] = perm[k] * cols + c;
    }
    ts_tensor *idx = ts_error()
                         ? NULL
                         : ts_tensor_i64(TS_SHAPE(zeros * cols), flat,
                                         (ts_opts){.dtype = TS_I64, .device = ts_device_of(t)});
    if (idx)
        ts_copy_(t, ts_reshape(ts_index_fill(ts_reshape(t, TS_SHAPE(rows * cols)), 0, idx, 0),
                               t->shape));
    ts_scope_end();
    ts_no_grad_end();
    free(flat), free(perm);
    return ts_error() ? NULL : t;
}

/* dirac_(t, groups): t [out, in, *k] (3 to 5 dims) zero but 1 at the centre of kernel (g out/groups
 * + d, d) for d < min(out / groups, in), each group g */
ts_tensor *ts_init_dirac_(ts_tensor *t, int64_t groups) {
    const char *op = "init_dirac_";
    if (!tsi_check_input(op, t, "tensor")) return NULL;
    const int nd = t->shape.ndim;
    if (nd < 3 || nd > 5)
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s: Only tensors with 3, 4, or 5 dimensions are supported (got %s)",
                             op, tsi_desc(t)),
               NULL;
    const int64_t *s = t->shape.dims;
    if (groups <= 0 || s[0] % groups != 0)
        return tsi_error_set(TS_ERR_ARG, "%s: dim 0 (%lld) must be divisible by groups (%lld)", op,
                             (long long)s[0], (long long)groups),
               NULL;
    const int64_t per = s[0] / groups, m = per < s[1] ? per : s[1];
    int64_t strides[5], centre = 0;
    strides[nd - 1] = 1;
    for (int i = nd - 2; i >= 0; i--) strides[i] = strides[i + 1] * s[i + 1];
    for (int i = 2; i < nd; i++) centre += (s[i] / 2) * strides[i];
    const int64_t n = groups * m;
    int64_t *flat = malloc((size_t)(n ? n : 1) * sizeof *flat);
    if (!flat) return tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op), NULL;
    for (int64_t g = 0; g < groups; g++)
        for (int64_t d = 0; d < m; d++)
            flat[g * m + d] = (g * per + d) * strides[0] + d * strides[1] + centre;
    ts_no_grad_begin();
    ts_scope_begin();
    const int64_t numel = tsi_numel(t->shape);
    ts_tensor *z =
        ts_zeros(TS_SHAPE(numel), (ts_opts){.dtype = t->dtype, .device = ts_device_of(t)});
    if (n > 0)
        z = ts_index_fill(
            z, 0,
            ts_tensor_i64(TS_SHAPE(n), flat, (ts_opts){.dtype = TS_I64, .device = ts_device_of(t)}),
            1.0);
    ts_copy_(t, ts_reshape(z, t->shape));
    ts_scope_end();
    ts_no_grad_end();
    free(flat);
    return ts_error() ? NULL : t;
}
