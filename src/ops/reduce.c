/* reduce.c — reduction front ends: sum, mean, prod, max/min, arg*, var/std, logsumexp. */
#include "amp/autocast.h"
#include "autograd/autograd.h"
#include "autograd/trace.h"
#include "ops/complex.h"
#include "ops/reduce_grad.h"
#include "ops/reduce_internal.h"
#include "tessera/quant.h"

_Static_assert(TS_R_COUNT == 11, "a ts_reduce_op was added or removed: give it its dtype rule, "
                                 "identity and backward here; then update the count");

/* reduce_ops.def's dtype column */
typedef enum reduce_rule { R_SUM, R_MEAN, R_VAR, R_TO_FLOAT, R_ORDER, R_INDEX } reduce_rule;
static const unsigned char reduce_rules[] = {
#define X(ID, name, name_dim, dtype, ...) R_##dtype,
#include "backend/reduce_ops.def"
#undef X
};
_Static_assert(sizeof reduce_rules == TS_R_COUNT, "one dtype rule per reduction");

/* max, min and the arg forms have no identity: an empty reduction is an error */
static bool needs_nonempty(ts_reduce_op rop) {
    return reduce_rules[rop] == R_ORDER || reduce_rules[rop] == R_INDEX;
}

/* Result dtype of a reduction over `in`, or TS_DTYPE_DEFAULT after recording a dtype error.
 * *compute gets the dtype the kernel reads (logsumexp promotes integers like torch 2.x). */
static ts_dtype result_dtype(const char *op, ts_reduce_op rop, ts_dtype in, ts_dtype *compute) {
    bool fl = tsi_is_float(in);
    *compute = in;
    switch ((reduce_rule)reduce_rules[rop]) {
    case R_SUM:
        return fl ? in : TS_I64;
    case R_MEAN:
        if (fl) return in;
        tsi_error_set(TS_ERR_DTYPE,
                      "%s(): could not infer output dtype. Input dtype must be either a floating "
                      "point or complex dtype. Got: %s",
                      op, tsi_torch_scalar_name(in));
        return TS_DTYPE_DEFAULT;
    case R_VAR:
        if (fl) return in;
        tsi_error_set(TS_ERR_DTYPE,
                      "%s: std and var only support floating point and complex dtypes, got %s", op,
                      ts_dtype_name(in));
        return TS_DTYPE_DEFAULT;
    case R_TO_FLOAT:
        /* torch 2.x computes logsumexp of integer (and bool) input in the default float dtype */
        if (!fl) *compute = TS_F32;
        return *compute;
    case R_ORDER:
    case R_INDEX:
        /* the integer kernels order in int64, which holds every value but uint64's upper half
         * (PyTorch 2 has no max/min/argmax for uint64 either) */
        if (in == TS_U64) {
            tsi_error_set(TS_ERR_UNSUPPORTED, "%s: not implemented for 'UInt64'", op);
            return TS_DTYPE_DEFAULT;
        }
        return reduce_rules[rop] == R_ORDER ? in : TS_I64;
    default:
        break;
    }
    tsi_error_set(TS_ERR_ARG, "%s: unknown reduction", op);
    return TS_DTYPE_DEFAULT;
}

/* The reduction itself: `dims`/`ndims` name the reduced dims (all of them when `all`). Returns a
 * new tensor (not in a scope) or NULL with the error recorded; *mask gets the reduced dims. */
static ts_tensor *reduce_op(const char *op, ts_reduce_op rop, ts_tensor *t, const int *dims,
                            int ndims, bool all, bool keepdim, double param, unsigned *mask) {
    tsi_init();
    if (!tsi_check_input(op, t, "input")) return NULL;
    const int nd = t->shape.ndim;
    bool red[TS_MAX_DIMS] = {false};
    if (!all) {
        if (ndims < 0 || ndims > TS_MAX_DIMS) {
            tsi_error_set(TS_ERR_ARG, "%s: %d dims given (at most %d)", op, ndims, TS_MAX_DIMS);
            return NULL;
        }
        for (int i = 0; i < ndims; i++) {
            int d = tsi_wrap_dim(op, dims[i], nd);
            if (d < 0) return NULL;
            if (red[d]) {
                tsi_error_set(TS_ERR_ARG, "%s: dim %d appears multiple times in the list of dims",
                              op, d);
                return NULL;
            }
            red[d] = true;
        }
    } else {
        for (int d = 0; d < nd; d++) red[d] = true;
    }

    *mask = 0;
    for (int d = 0; d < nd; d++) *mask |= red[d] ? 1u << d : 0;

    ts_dtype compute;
    ts_dtype out_dt = result_dtype(op, rop, t->dtype, &compute);
    if (out_dt == TS_DTYPE_DEFAULT) return NULL;

    if (needs_nonempty(rop)) {
        if (all && tsi_numel(t->shape) == 0) {
            tsi_error_set(TS_ERR_ARG,
                          "%s(): Expected reduction dim to be specified for input.numel() == 0. "
                          "Specify the reduction dim with the 'dim' argument.",
                          op);
            return NULL;
        }
        for (int d = 0; d < nd; d++) {
            if (red[d] && t->shape.dims[d] == 0) {
                tsi_error_set(TS_ERR_ARG, "%s(): Expected reduction dim %d to have non-zero size.",
                              op, d);
                return NULL;
            }
        }
    }

    ts_tensor *src = t, *cast = NULL;
    if (compute != t->dtype) {
        cast = tsi_cast(op, t, compute);
        if (!cast) return NULL;
        src = cast;
    }

    /* kernel input: kept dims first, then reduced dims, both in their original order (so argmax
     * over everything indexes the flattened tensor) */
    ts_kview full = tsi_kview(src), in = full;
    ts_shape out_shape = {0}, kept = {0};
    int k = 0, nred = 0;
    for (int d = 0; d < nd; d++) {
        if (red[d]) continue;
        in.shape[k] = full.shape[d];
        in.strides[k] = full.strides[d];
        k++;
        kept.dims[kept.ndim++] = t->shape.dims[d];
    }
    for (int d = 0; d < nd; d++) {
        if (!red[d]) continue;
        in.shape[k] = full.shape[d];
        in.strides[k] = full.strides[d];
        k++;
        nred++;
    }
    in.ndim = k;
    for (int d = 0; d < nd; d++) {
        if (red[d] && !keepdim) continue;
        out_shape.dims[out_shape.ndim++] = red[d] ? 1 : t->shape.dims[d];
    }
    if (nred == 0) {
        /* reducing nothing (a 0-dim input, or an empty dims list on one): give the kernel one
         * size-1 reduced dim so every op sees exactly one element per output */
        in.shape[in.ndim] = 1;
        in.strides[in.ndim] = 1;
        in.ndim++;
        nred = 1;
    }

    ts_device dev = tsi_device(t);
    tsi_log_op(op, dev);
    ts_tensor *out = tsi_new(op, out_shape, out_dt, dev);
    if (out) {
        ts_kview ko = tsi_kview(out);
        ko.ndim = kept.ndim;
        for (int d = 0; d < kept.ndim; d++) ko.shape[d] = kept.dims[d];
        tsi_contiguous_strides(&kept, ko.strides);
        if (tsi_numel(out_shape) > 0)
            tsi_be(src)->reduce(tsi_be(src), tsi_dev_index(src), rop, &ko, &in, nred, param);
    }
    ts_release(cast);
    return out;
}

/* Records the backward of a reduction (input t, result out) when the graph needs it. Names are
 * PyTorch's: the whole-tensor overloads of sum/mean/prod are Backward0, the dim ones Backward1;
 * max()/min() over everything are Backward1 (their dim overloads, with indices, Backward0). */
/* reduce_ops.def's grad_fn columns: over the whole tensor, over chosen dims */
static const char *const grad_names[][2] = {
#define X(ID, name, name_dim, dtype, grad_fn, grad_fn_dim, ...) {grad_fn, grad_fn_dim},
#include "backend/reduce_ops.def"
#undef X
};
_Static_assert(sizeof grad_names / sizeof *grad_names == TS_R_COUNT, "grad_fn names per reduction");

static void record(ts_reduce_op rop, bool all, ts_tensor *t, ts_tensor *out, unsigned mask,
                   bool keepdim, double param, const char *op) {
    if (!out || !tsi_is_float(out->dtype) || !tsi_needs_graph(&t, 1)) return;
    const char *name;
    tsi_backward_fn fn;
    ts_tensor *x = NULL; /* the saved input */
    bool save_out = false;
    switch (rop) {
    case TS_R_SUM:
        fn = tsi_sum_backward;
        break;
    case TS_R_MEAN:
        fn = tsi_mean_backward;
        break;
    case TS_R_PROD:
        fn = tsi_prod_backward, x = t, save_out = true;
        break;
    case TS_R_MAX:
    case TS_R_MIN:
        fn = tsi_amax_backward, x = t, save_out = true;
        break;
    case TS_R_VAR:
        fn = tsi_var_backward, x = t;
        break;
    case TS_R_STD:
        fn = tsi_std_backward, x = t, save_out = true;
        break;
    case TS_R_LOGSUMEXP:
        fn = tsi_logsumexp_backward, x = t, save_out = true;
        break;
    default:
        return; /* argmax/argmin: not differentiable */
    }
    name = grad_names[rop][all ? 0 : 1];
    ts_tensor *saves[2] = {x, NULL};
    ts_node *n = tsi_record(name, op, fn, &t, 1, out, saves, 2);
    if (!n) return;
    if (save_out) tsi_node_save_output(n, 1, out);
    n->flags |= TSI_NODE_TWICE; /* reduce_grad.c: public ops on g, the input and the result */
    n->ip[0] = mask;
    n->ip[1] = keepdim;
    n->p[0] = param;
}

/* `recorded_all`: the graph names the whole-tensor overload (an empty dims list reduces over
 * everything but is recorded as a dim overload, as PyTorch does). */
static ts_tensor *reduce_rec(const char *op, ts_reduce_op rop, ts_tensor *t, const int *dims,
                             int ndims, bool all, bool recorded_all, bool keepdim, double param) {
    if (tsi_complex_in(t, NULL)) return tsi_complex_reduce(op, rop, t, dims, ndims, all, keepdim);
    if (rop == TS_R_MEAN && t && tsi_is_quantized(t->dtype)) { /* PyTorch's quantized mean */
        ts_dims d = {.n = all ? 0 : ndims};
        for (int i = 0; i < d.n && i < TS_MAX_DIMS; i++) d.d[i] = dims[i];
        if (d.n > TS_MAX_DIMS)
            return tsi_error_set(TS_ERR_ARG, "%s: %d dims given (at most %d)", op, d.n,
                                 TS_MAX_DIMS),
                   NULL;
        return ts_quantized_mean(t, d, keepdim);
    }
    ts_tensor *const in = t;
    tsi_ac_frame ac;
    TSI_AUTOCAST_ENTER(&ac, op, &t);
    unsigned mask;
    ts_tensor *out = reduce_op(op, rop, t, dims, ndims, all, keepdim, param, &mask);
    record(rop, recorded_all, t, out, mask, keepdim, param, op);
    /* the reduced dims as a bit mask (1 << dim) */
    if (out) tsi_trace(op, &in, 1, out, (int64_t[]){mask, keepdim}, 2, &param, 1);
    return tsi_autocast_exit(&ac, tsi_own(out));
}
static ts_tensor *red_all(const char *op, ts_reduce_op rop, ts_tensor *t, double param) {
    return reduce_rec(op, rop, t, NULL, 0, true, true, false, param);
}
static ts_tensor *red_dim(const char *op, ts_reduce_op rop, ts_tensor *t, int dim, bool keepdim,
                          double param) {
    return reduce_rec(op, rop, t, &dim, 1, false, false, keepdim, param);
}
/* an empty dims list means all dims (and is recorded as a dim overload, as PyTorch does) */
static ts_tensor *red_dims(const char *op, ts_reduce_op rop, ts_tensor *t, ts_dims dims,
                           bool keepdim, double param) {
    return reduce_rec(op, rop, t, dims.d, dims.n, dims.n == 0, false, keepdim, param);
}

/* ----------------------------------------------------------------- over all elements */
ts_tensor *ts_sum(ts_tensor *t) { return red_all("sum", TS_R_SUM, t, 0); }
ts_tensor *ts_mean(ts_tensor *t) { return red_all("mean", TS_R_MEAN, t, 0); }
ts_tensor *ts_prod(ts_tensor *t) { return red_all("prod", TS_R_PROD, t, 0); }
ts_tensor *ts_max(ts_tensor *t) { return red_all("max", TS_R_MAX, t, 0); }
ts_tensor *ts_min(ts_tensor *t) { return red_all("min", TS_R_MIN, t, 0); }
ts_tensor *ts_var(ts_tensor *t) { return red_all("var", TS_R_VAR, t, 1.0); }
ts_tensor *ts_std(ts_tensor *t) { return red_all("std", TS_R_STD, t, 1.0); }
ts_tensor *ts_argmax(ts_tensor *t) { return red_all("argmax", TS_R_ARGMAX, t, 0); }
ts_tensor *ts_argmin(ts_tensor *t) { return red_all("argmin", TS_R_ARGMIN, t, 0); }
ts_tensor *ts_logsumexp(ts_tensor *t) { return red_all("logsumexp", TS_R_LOGSUMEXP, t, 0); }

/* ----------------------------------------------------------------- over one dim */
ts_tensor *ts_sum_dim(ts_tensor *t, int dim, bool keepdim) {
    return red_dim("sum", TS_R_SUM, t, dim, keepdim, 0);
}
ts_tensor *ts_mean_dim(ts_tensor *t, int dim, bool keepdim) {
    return red_dim("mean", TS_R_MEAN, t, dim, keepdim, 0);
}
ts_tensor *ts_prod_dim(ts_tensor *t, int dim, bool keepdim) {
    return red_dim("prod", TS_R_PROD, t, dim, keepdim, 0);
}
ts_tensor *ts_amax_dim(ts_tensor *t, int dim, bool keepdim) {
    return red_dim("amax", TS_R_MAX, t, dim, keepdim, 0);
}
ts_tensor *ts_amin_dim(ts_tensor *t, int dim, bool keepdim) {
    return red_dim("amin", TS_R_MIN, t, dim, keepdim, 0);
}
ts_tensor *ts_argmax_dim(ts_tensor *t, int dim, bool keepdim) {
    return red_dim("argmax", TS_R_ARGMAX, t, dim, keepdim, 0);
}
ts_tensor *ts_argmin_dim(ts_tensor *t, int dim, bool keepdim) {
    return red_dim("argmin", TS_R_ARGMIN, t, dim, keepdim, 0);
}
ts_tensor *ts_var_dim(ts_tensor *t, int dim, bool keepdim, double correction) {
    return red_dim("var", TS_R_VAR, t, dim, keepdim, correction);
}
ts_tensor *ts_std_dim(ts_tensor *t, int dim, bool keepdim, double correction) {
    return red_dim("std", TS_R_STD, t, dim, keepdim, correction);
}
ts_tensor *ts_logsumexp_dim(ts_tensor *t, int dim, bool keepdim) {
    return red_dim("logsumexp", TS_R_LOGSUMEXP, t, dim, keepdim, 0);
}

/* values and indices: two kernel passes, which keeps the kernel interface to one output. The
 * indices are computed for the graph even when the caller does not want them. */
static ts_tensor *minmax_dim(const char *op, ts_reduce_op vop, ts_reduce_op iop, ts_tensor *t,
                             int dim, bool keepdim, ts_tensor **indices) {
    if (indices) *indices = NULL;
    unsigned mask;
    ts_tensor *v = reduce_op(op, vop, t, &dim, 1, false, keepdim, 0, &mask);
    if (!v) return NULL;
    const bool graph = tsi_is_float(v->dtype) && tsi_needs_graph(&t, 1);
    ts_tensor *i = NULL;
    if (indices || graph) {
        i = reduce_op(op, iop, t, &dim, 1, false, keepdim, 0, &mask);
        if (!i) {
            ts_release(v);
            return NULL;
        }
    }
    if (graph) {
        const char *name = vop == TS_R_MAX ? "MaxBackward0" : "MinBackward0";
        ts_node *n = tsi_record(name, op, tsi_max_dim_backward, &t, 1, v, &i, 1);
        if (n) n->ip[0] = mask, n->ip[1] = keepdim, n->flags |= TSI_NODE_TWICE; /* scatter_add */
    }
    if (indices)
        *indices = tsi_own(i);
    else
        ts_release(i);
    return tsi_own(v);
}
ts_tensor *ts_max_dim(ts_tensor *t, int dim, bool keepdim, ts_tensor **indices) {
    return minmax_dim("max", TS_R_MAX, TS_R_ARGMAX, t, dim, keepdim, indices);
}
ts_tensor *ts_min_dim(ts_tensor *t, int dim, bool keepdim, ts_tensor **indices) {
    return minmax_dim("min", TS_R_MIN, TS_R_ARGMIN, t, dim, keepdim, indices);
}

/* ----------------------------------------------------------------- over several dims */
ts_tensor *ts_sum_dims(ts_tensor *t, ts_dims dims, bool keepdim) {
    return red_dims("sum", TS_R_SUM, t, dims, keepdim, 0);
}
ts_tensor *ts_mean_dims(ts_tensor *t, ts_dims dims, bool keepdim) {
    return red_dims("mean", TS_R_MEAN, t, dims, keepdim, 0);
}
ts_tensor *tsi_norm2_dims(ts_tensor *t, ts_dims dims, bool keepdim) {
    return red_dims("norm2", TS_R_NORM2, t, dims, keepdim, 0);
}

ts_tensor *ts_amax_dims(ts_tensor *t, ts_dims dims, bool keepdim) {
    return red_dims("amax", TS_R_MAX, t, dims, keepdim, 0);
}
ts_tensor *ts_amin_dims(ts_tensor *t, ts_dims dims, bool keepdim) {
    return red_dims("amin", TS_R_MIN, t, dims, keepdim, 0);
}
ts_tensor *ts_var_dims(ts_tensor *t, ts_dims dims, bool keepdim, double correction) {
    return red_dims("var", TS_R_VAR, t, dims, keepdim, correction);
}
ts_tensor *ts_std_dims(ts_tensor *t, ts_dims dims, bool keepdim, double correction) {
    return red_dims("std", TS_R_STD, t, dims, keepdim, correction);
}
ts_tensor *ts_logsumexp_dims(ts_tensor *t, ts_dims dims, bool keepdim) {
    return red_dims("logsumexp", TS_R_LOGSUMEXP, t, dims, keepdim, 0);
}
