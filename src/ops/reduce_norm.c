/* reduce_norm.c — norm-type reductions and moments (issue 52): linalg.vector_norm (one node,
 * LinalgVectorNormBackward0, with PyTorch's norm_backward: 0 where the norm is 0, ties sharing
 * the inf norm's gradient), matrix_norm, F.normalize, var_mean / std_mean, aminmax,
 * count_nonzero, F.cosine_similarity, F.pairwise_distance (cdist: cdist.c); all but the vector
 * norm's backward are compositions of differentiable ops. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "amp/autocast.h"
#include "autograd/autograd.h"
#include "autograd/trace.h"
#include "ops/linalg_internal.h"
#include "ops/reduce_internal.h"

/* the result to the caller's scope; tsi_own ends the op's profiler span there */
static ts_tensor *finish(ts_tensor *y) {
    y = ts_error() == TS_OK && y ? ts_retain(y) : NULL;
    ts_scope_end();
    return tsi_own(y);
}

/* ------------------------------------------------------------------ vector_norm */
/* node: ip[0] the reduced dims as a bit mask, ip[1] keepdim, p[0] ord; saved x and the norm */
static ts_dims node_dims(const ts_node *n) {
    ts_dims d = {.n = 0};
    for (int i = 0; i < n->in_shape[0].ndim; i++)
        if ((n->ip[0] >> i) & 1) d.d[d.n++] = i;
    return d;
}
static ts_tensor *restore(const ts_node *n, ts_tensor *t) {
    if (n->ip[1] || !t) return t;
    ts_shape s = n->in_shape[0];
    for (int i = 0; i < s.ndim; i++)
        if ((n->ip[0] >> i) & 1) s.dims[i] = 1;
    return ts_reshape(t, s);
}

/* PyTorch's norm_backward (FunctionsManual.cpp), case by case */
static void vector_norm_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi) {
    ts_tensor *x = tsi_node_saved(n, 0), *r = tsi_node_saved(n, 1);
    if (!go[0] || !x || !r) return;
    const double p = n->p[0];
    ts_tensor *g = restore(n, go[0]), *nr = restore(n, r);
    if (p == 0) {
        gi[0] = ts_zeros_like(x);
    } else if (p == 1) {
        gi[0] = ts_mul(ts_sign(x), g);
    } else if (isinf(p)) { /* shared evenly among |x| == norm (and NaNs) */
        ts_tensor *ax = ts_abs(x);
        ts_tensor *mask = ts_logical_or(ts_eq(ax, nr), ts_ne(ax, ax));
        ts_tensor *cnt = ts_sum_dims(mask, node_dims(n), true);
        gi[0] = ts_mul(ts_sign(x), ts_mul(ts_div(g, cnt), mask));
    } else if (p < 1) {
        ts_tensor *s = ts_mul(
            ts_sign(x), ts_masked_fill(ts_pow_scalar(ts_abs(x), p - 1), ts_eq_scalar(x, 0), 0.0));
        gi[0] = ts_mul(s, ts_mul(g, ts_pow_scalar(nr, 1 - p)));
    } else {
        ts_tensor *s = p == 2  ? x
                       : p < 2 ? ts_mul(ts_sign(x), ts_pow_scalar(ts_abs(x), p - 1))
                               : ts_mul(x, ts_pow_scalar(ts_abs(x), p - 2));
        ts_tensor *den = p == 2 ? nr : ts_pow_scalar(nr, p - 1);
        ts_tensor *scale = ts_masked_fill(ts_div(g, den), ts_eq_scalar(nr, 0), 0.0);
        gi[0] = ts_mul(s, scale);
    }
}

static const char *ord_str(double ord) {
    char *buf = tsi_fmt_buf();
    snprintf(buf, TSI_FMT_BUF_LEN, "%g", ord);
    return buf;
}

static bool check_float(const char *op, ts_tensor *t, ts_dtype dtype) {
    if (!tsi_is_float(t->dtype))
        return tsi_error_set(TS_ERR_DTYPE,
                             "%s: Expected a floating point tensor as input. Got %s (%s)", op,
                             tsi_torch_scalar_name(t->dtype), tsi_desc(t)),
               false;
    if (dtype != TS_DTYPE_DEFAULT && !tsi_is_float(dtype))
        return tsi_error_set(TS_ERR_DTYPE, "%s: dtype should be floating point, got %s", op,
                             tsi_torch_scalar_name(dtype)),
               false;
    return true;
}

/* the norm of x (no graph) */
static ts_tensor *norm_value(ts_tensor *x, double ord, ts_dims d, bool keepdim) {
    if (ord == 0) return ts_to_dtype(ts_sum_dims(ts_ne_scalar(x, 0), d, keepdim), x->dtype);
    if (ord == 1) return ts_sum_dims(ts_abs(x), d, keepdim);
    if (ord == 2) return tsi_norm2_dims(x, d, keepdim); /* one pass, no x * x */
    if (ord == INFINITY) return ts_amax_dims(ts_abs(x), d, keepdim);
    if (ord == -INFINITY) return ts_amin_dims(ts_abs(x), d, keepdim);
    return ts_pow_scalar(ts_sum_dims(ts_pow_scalar(ts_abs(x), ord), d, keepdim), 1.0 / ord);
}

/* span: the op starts a profiler span of its own (false: its caller's span covers it) */
static ts_tensor *vector_norm_op(const char *op, ts_tensor *t, double ord, ts_dims dims,
                                 bool keepdim, ts_dtype dtype, bool span) {
    tsi_init();
    if (!tsi_check_input(op, t, "input") || !check_float(op, t, dtype)) return NULL;
    if (isnan(ord)) return tsi_error_set(TS_ERR_ARG, "%s: ord must be a number, got nan", op), NULL;
    const int nd = t->shape.ndim;
    if (dims.n < 0 || dims.n > TS_MAX_DIMS)
        return tsi_error_set(TS_ERR_ARG, "%s: too many dims (%d)", op, dims.n), NULL;
    unsigned mask = 0;
    ts_dims d = {.n = 0};
    for (int i = 0; i < dims.n; i++) {
        const int w = tsi_wrap_dim(op, dims.d[i], nd);
        if (w < 0) return NULL;
        if (mask & (1u << w))
            return tsi_error_set(TS_ERR_ARG,
                                 "%s: dim %d appears multiple times in the list of dims", op,
                                 dims.d[i]),
                   NULL;
        mask |= 1u << w;
        d.d[d.n++] = w;
    }
    if (dims.n == 0) mask = nd ? (1u << nd) - 1 : 1u;
    if ((ord < 0 || ord == INFINITY) && tsi_numel(t->shape) == 0)
        for (int i = 0; i < nd; i++)
            if (((mask >> i) & 1) && t->shape.dims[i] == 0)
                return tsi_error_set(TS_ERR_ARG,
                                     "%s: cannot compute the %s norm on an empty tensor because "
                                     "the operation does not have an identity (%s)",
                                     op, ord_str(ord), tsi_desc(t)),
                       NULL;
    if (span) tsi_log_op(op, tsi_device(t));
    ts_scope_begin();
    ts_tensor *x = dtype != TS_DTYPE_DEFAULT && dtype != t->dtype ? ts_to_dtype(t, dtype) : t;
    if (!x) return finish(NULL);
    ts_no_grad_begin();
    ts_tensor *y = norm_value(x, ord, d, keepdim);
    ts_no_grad_end();
    if (y && ts_error() == TS_OK && tsi_needs_graph(&x, 1)) {
        ts_tensor *saves[2] = {x, NULL};
        ts_node *n =
            tsi_record("LinalgVectorNormBackward0", op, vector_norm_backward, &x, 1, y, saves, 2);
        if (n) {
            tsi_node_save_output(n, 1, y);
            n->flags |= TSI_NODE_TWICE; /* public ops on g, x and the norm */
            n->ip[0] = mask, n->ip[1] = keepdim, n->p[0] = ord;
        }
    }
    return finish(y);
}

/* autocast: CUDA's fp32_set_opt_dtype (a given dtype is used as it is); on no CPU list */
ts_tensor *ts_vector_norm(ts_tensor *t, double ord, ts_dims dims, bool keepdim, ts_dtype dtype) {
    const char *op = "linalg.vector_norm";
    if (dtype != TS_DTYPE_DEFAULT) return vector_norm_op(op, t, ord, dims, keepdim, dtype, true);
    tsi_ac_frame ac;
    TSI_AUTOCAST_ENTER(&ac, op, &t);
    return tsi_autocast_exit(&ac, vector_norm_op(op, t, ord, dims, keepdim, dtype, true));
}

/* ------------------------------------------------------------------ matrix_norm */
static ts_tensor *matrix_norm_body(ts_tensor *t, const char *ord, int d0, int d1, bool keepdim,
                                   ts_dtype dtype) {
    const char *op = "linalg.matrix_norm";
    tsi_init();
    if (!tsi_check_input(op, t, "input") || !check_float(op, t, dtype)) return NULL;
    if (!ord) return tsi_error_set(TS_ERR_ARG, "%s: ord is NULL", op), NULL;
    const int nd = t->shape.ndim;
    if (nd < 2)
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s: The input tensor A must have at least 2 dimensions (%s)", op,
                             tsi_desc(t)),
               NULL;
    int a = tsi_wrap_dim(op, d0, nd), b = a < 0 ? -1 : tsi_wrap_dim(op, d1, nd);
    if (a < 0 || b < 0) return NULL;
    if (a == b)
        return tsi_error_set(TS_ERR_ARG, "%s: dims must be different. Got (%d, %d)", op, d0, d1),
               NULL;
    if (!strcmp(ord, "fro"))
        return ts_vector_norm(t, 2, (ts_dims){.n = 2, .d = {a, b}}, keepdim, dtype);
    if (!strcmp(ord, "nuc") || !strcmp(ord, "2") || !strcmp(ord, "-2"))
        return tsl_matrix_norm_sv(op, t, ord, a, b, keepdim, dtype); /* linalg_func.c */
    const bool one = !strcmp(ord, "1") || !strcmp(ord, "-1");
    const bool inf = !strcmp(ord, "inf") || !strcmp(ord, "-inf");
    if (!one && !inf)
        return tsi_error_set(TS_ERR_ARG,
                             "%s: Order %s not supported (fro, nuc, inf, -inf, 1, -1, 2, -2)", op,
                             ord),
               NULL;
    const bool max = ord[0] != '-';
    if (inf) { /* the max row sum: the vector norm along the rows' dim */
        const int s = a;
        a = b, b = s;
    }
    tsi_log_op(op, tsi_device(t));
    ts_scope_begin();
    ts_tensor *v = ts_vector_norm(t, 1, (ts_dims){.n = 1, .d = {a}}, keepdim, dtype);
    if (!keepdim && a < b) b--;
    return finish(max ? ts_amax_dim(v, b, keepdim) : ts_amin_dim(v, b, keepdim));
}

/* autocast: as vector_norm */
ts_tensor *ts_matrix_norm(ts_tensor *t, const char *ord, int d0, int d1, bool keepdim,
                          ts_dtype dtype) {
    if (dtype != TS_DTYPE_DEFAULT) return matrix_norm_body(t, ord, d0, d1, keepdim, dtype);
    tsi_ac_frame ac;
    TSI_AUTOCAST_ENTER(&ac, "linalg.matrix_norm", &t);
    return tsi_autocast_exit(&ac, matrix_norm_body(t, ord, d0, d1, keepdim, dtype));
}

/* ------------------------------------------------------------------ normalize */
ts_tensor *ts_lp_normalize(ts_tensor *t, double p, int dim, double eps) {
    const char *op = "normalize";
    tsi_init();
    if (!tsi_check_input(op, t, "input")) return NULL;
    tsi_log_op(op, tsi_device(t));
    ts_scope_begin();
    ts_tensor *nrm =
        vector_norm_op(op, t, p, (ts_dims){.n = 1, .d = {dim}}, true, TS_DTYPE_DEFAULT, false);
    ts_tensor *den = nrm ? ts_expand_as(ts_clamp_min(nrm, eps), t) : NULL;
    return finish(den ? ts_div(t, den) : NULL);
}

/* ------------------------------------------------------------------ var_mean, std_mean */
static ts_tensor *moment_mean(const char *op, bool is_std, ts_tensor *t, ts_dims dims, bool keepdim,
                              double correction, ts_tensor **mean) {
    if (mean) *mean = NULL;
    tsi_init();
    if (!tsi_check_input(op, t, "input")) return NULL;
    if (dims.n == 0) { /* every dim, listed, so keepdim applies */
        dims.n = t->shape.ndim;
        for (int i = 0; i < dims.n; i++) dims.d[i] = i;
    }
    ts_scope_begin();
    ts_tensor *v = is_std ? ts_std_dims(t, dims, keepdim, correction)
                          : ts_var_dims(t, dims, keepdim, correction);
    ts_tensor *m = v ? ts_mean_dims(t, dims, keepdim) : NULL;
    if (!v || !m || ts_error() != TS_OK) return finish(NULL);
    if (mean) *mean = ts_keep(m); /* else m goes with the scope */
    v = finish(v);
    if (!v && mean) *mean = NULL;
    return v;
}
ts_tensor *ts_var_mean(ts_tensor *t, ts_dims dims, bool keepdim, double correction,
                       ts_tensor **mean) {
    return moment_mean("var_mean", false, t, dims, keepdim, correction, mean);
}
ts_tensor *ts_std_mean(ts_tensor *t, ts_dims dims, bool keepdim, double correction,
                       ts_tensor **mean) {
    return moment_mean("std_mean", true, t, dims, keepdim, correction, mean);
}

/* ------------------------------------------------------------------ aminmax, count_nonzero */
ts_tensor *ts_aminmax(ts_tensor *t, bool has_dim, int dim, bool keepdim, ts_tensor **max) {
    const char *op = "aminmax";
    if (max) *max = NULL;
    tsi_init();
    if (!tsi_check_input(op, t, "input")) return NULL;
    if (!has_dim && tsi_numel(t->shape) == 0)
        return tsi_error_set(TS_ERR_ARG,
                             "%s: cannot compute aminmax over an empty tensor without a dim "
                             "(%s)",
                             op, tsi_desc(t)),
               NULL;
    ts_scope_begin();
    ts_tensor *lo, *hi;
    if (has_dim) {
        lo = ts_amin_dim(t, dim, keepdim);
        hi = lo ? ts_amax_dim(t, dim, keepdim) : NULL;
    } else {
        lo = ts_min(t);
        hi = lo ? ts_max(t) : NULL;
        if (keepdim && hi) {
            ts_shape s = t->shape;
            for (int i = 0; i < s.ndim; i++) s.dims[i] = 1;
            lo = ts_reshape(lo, s), hi = ts_reshape(hi, s);
        }
    }
    if (!lo || !hi || ts_error() != TS_OK) return finish(NULL);
    if (max) *max = ts_keep(hi); /* else hi goes with the scope */
    lo = finish(lo);
    if (!lo && max) *max = NULL;
    return lo;
}

ts_tensor *ts_count_nonzero(ts_tensor *t, ts_dims dims) {
    const char *op = "count_nonzero";
    tsi_init();
    if (!tsi_check_input(op, t, "input")) return NULL;
    ts_scope_begin();
    ts_tensor *nz = ts_ne_scalar(t, 0);
    ts_tensor *y = dims.n == 0 ? ts_sum(nz) : ts_sum_dims(nz, dims, false);
    if (y && ts_dtype_of(y) != TS_I64) y = ts_to_dtype(y, TS_I64);
    return finish(y);
}

/* ------------------------------------------------------------------ cosine_similarity */
/* n with max(n, eps)'s value and n's gradient (PyTorch clamps the norm in place under no_grad) */
static ts_tensor *clamp_value_only(ts_tensor *n, double eps) {
    ts_tensor *d = ts_detach(n);
    return ts_add(n, ts_sub(ts_clamp_min(d, eps), d));
}

ts_tensor *ts_cosine_similarity(ts_tensor *a, ts_tensor *b, int dim, double eps) {
    const char *op = "cosine_similarity";
    tsi_init();
    bool ok = tsi_check_input(op, a, "x1");
    if (!(tsi_check_input(op, b, "x2") && ok)) return NULL;
    const ts_dtype common = ts_promote_types(a->dtype, b->dtype);
    if (common == TS_DTYPE_COUNT || !tsi_is_float(common))
        return tsi_error_set(TS_ERR_DTYPE,
                             "%s: expected common dtype to be floating point, yet common dtype is "
                             "%s (%s and %s)",
                             op, common == TS_DTYPE_COUNT ? "none" : tsi_torch_scalar_name(common),
                             tsi_desc(a), tsi_desc(b)),
               NULL;
    ts_shape s;
    if (!tsi_broadcast_shapes(op, a->shape, b->shape, &s)) return NULL;
    if (tsi_wrap_dim(op, dim, s.ndim) < 0) return NULL;
    tsi_log_op(op, tsi_device(a));
    ts_scope_begin();
    ts_tensor *x1 = tsi_is_float(a->dtype) ? a : ts_to_dtype(a, common);
    ts_tensor *x2 = tsi_is_float(b->dtype) ? b : ts_to_dtype(b, common);
    x1 = ts_expand(x1, s), x2 = ts_expand(x2, s);
    const ts_dims d = {.n = 1, .d = {dim}};
    ts_tensor *n1 =
        clamp_value_only(vector_norm_op(op, x1, 2, d, true, TS_DTYPE_DEFAULT, false), eps);
    ts_tensor *n2 =
        clamp_value_only(vector_norm_op(op, x2, 2, d, true, TS_DTYPE_DEFAULT, false), eps);
    return finish(ts_sum_dim(ts_mul(ts_div(x1, n1), ts_div(x2, n2)), dim, false));
}

/* ------------------------------------------------------------------ pairwise_distance */
ts_tensor *ts_pairwise_distance(ts_tensor *a, ts_tensor *b, double p, double eps, bool keepdim) {
    const char *op = "pairwise_distance";
    tsi_init();
    bool ok = tsi_check_input(op, a, "x1");
    if (!(tsi_check_input(op, b, "x2") && ok)) return NULL;
    const int nd = a->shape.ndim > b->shape.ndim ? a->shape.ndim : b->shape.ndim;
    tsi_log_op(op, tsi_device(a));
    ts_scope_begin();
    ts_tensor *diff = ts_add_scalar(ts_sub(a, b), eps);
    if (diff && !tsi_is_float(diff->dtype)) diff = ts_to_dtype(diff, TS_F32);
    return finish(vector_norm_op(op, diff, p, (ts_dims){.n = 1, .d = {nd - 1}}, keepdim,
                                 TS_DTYPE_DEFAULT, false));
}
