/* reduce_grad.c — backward of the reductions (sum, mean, prod, max/min, var/std, logsumexp) and of
 * softmax / log_softmax, written with the public ops (grad mode is off while they run). */
#include "ops/reduce_grad.h"

/* ------------------------------------------------------------------ helpers */
static ts_dims reduced_dims(const ts_node *n) {
    ts_dims d = {.n = 0};
    for (int i = 0; i < n->in_shape[0].ndim; i++)
        if ((n->ip[0] >> i) & 1) d.d[d.n++] = i;
    return d;
}

/* The input's shape with the reduced dims kept as size 1. */
static ts_shape kept_shape(const ts_node *n) {
    ts_shape s = n->in_shape[0];
    for (int i = 0; i < s.ndim; i++)
        if ((n->ip[0] >> i) & 1) s.dims[i] = 1;
    return s;
}

/* A result (or its gradient) with the reduced dims back as size 1, so it broadcasts against the
 * input; a view. */
static ts_tensor *restore(const ts_node *n, ts_tensor *t) {
    if (n->ip[1] || !t) return t; /* keepdim */
    return ts_reshape(t, kept_shape(n));
}

static int64_t reduced_count(const ts_node *n) {
    int64_t c = 1;
    for (int i = 0; i < n->in_shape[0].ndim; i++)
        if ((n->ip[0] >> i) & 1) c *= n->in_shape[0].dims[i];
    return c;
}

static ts_tensor *zeros_for(const ts_node *n, int i, ts_tensor *like) {
    return ts_zeros(n->in_shape[i], (ts_opts){.dtype = like->dtype, .device = n->in_device[i]});
}

/* ------------------------------------------------------------------ reductions */
void tsi_sum_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi) {
    if (!go[0]) return;
    gi[0] = ts_expand(restore(n, go[0]), n->in_shape[0]);
}

void tsi_mean_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi) {
    if (!go[0]) return;
    ts_tensor *g = ts_div_scalar(restore(n, go[0]), (double)reduced_count(n));
    gi[0] = ts_expand(g, n->in_shape[0]);
}

/* The product over the reduced dims, kept as size 1 (prod reduces one dim or all of them). */
static ts_tensor *prod_kept(const ts_node *n, ts_tensor *x) {
    ts_dims d = reduced_dims(n);
    if (d.n == 1 && d.n < x->shape.ndim) return ts_prod_dim(x, d.d[0], true);
    return ts_reshape(ts_prod(x), kept_shape(n));
}

/* PyTorch's prod_backward: g * result / x without zeros; with zeros, an element's gradient is the
 * product of the others, which is the product of the non-zero elements for the only zero of its
 * slice and 0 everywhere else in a slice that holds a zero. */
void tsi_prod_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi) {
    ts_tensor *x = tsi_node_saved(n, 0), *r = tsi_node_saved(n, 1);
    if (!go[0] || !x || !r) return;
    ts_tensor *g = restore(n, go[0]);
    ts_tensor *z = ts_eq_scalar(x, 0);
    /* a meta x has no zeros to look for: the formula without them gives the gradient's shape */
    if (ts_device_of(x).type == TS_META || ts_item(ts_sum(z)) == 0) {
        gi[0] = ts_div(ts_mul(g, restore(n, r)), x);
        return;
    }
    ts_tensor *nz = ts_sum_dims(z, reduced_dims(n), true); /* zeros per slice */
    ts_tensor *x1 = ts_masked_fill(x, z, 1.0);
    ts_tensor *gp = ts_mul(g, prod_kept(n, x1)); /* g * product of the non-zeros */
    ts_tensor *at_zero = ts_mul(gp, ts_eq_scalar(nz, 1));
    ts_tensor *elsewhere = ts_div(ts_mul(gp, ts_eq_scalar(nz, 0)), x1);
    gi[0] = ts_where(z, at_zero, elsewhere);
}

/* amax/amin and max()/min(): the gradient is shared evenly among the elements equal to the result
 * in each slice. */
void tsi_amax_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi) {
    ts_tensor *x = tsi_node_saved(n, 0), *r = tsi_node_saved(n, 1);
    if (!go[0] || !x || !r) return;
    ts_tensor *hit = ts_eq(x, restore(n, r));
    ts_tensor *count = ts_sum_dims(hit, reduced_dims(n), true);
    gi[0] = ts_mul(ts_div(restore(n, go[0]), count), hit);
}

/* max(dim)/min(dim): the whole gradient goes to the returned index. */
void tsi_max_dim_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi) {
    ts_tensor *idx = tsi_node_saved(n, 0);
    if (!go[0] || !idx) return;
    ts_dims d = reduced_dims(n);
    ts_tensor *g = restore(n, go[0]);
    gi[0] = ts_scatter_add(zeros_for(n, 0, g), d.n ? d.d[0] : 0, restore(n, idx), g);
}

/* var: g * 2 (x - mean) / (N - correction) */
void tsi_var_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi) {
    ts_tensor *x = tsi_node_saved(n, 0);
    if (!go[0] || !x) return;
    ts_tensor *centred = ts_sub(x, ts_mean_dims(x, reduced_dims(n), true));
    double scale = 2.0 / ((double)reduced_count(n) - n->p[0]);
    gi[0] = ts_mul(ts_mul_scalar(restore(n, go[0]), scale), centred);
}

/* std: the var gradient with g / (2 std); where std is 0 the gradient is 0 (PyTorch). */
void tsi_std_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi) {
    ts_tensor *x = tsi_node_saved(n, 0), *r = tsi_node_saved(n, 1);
    if (!go[0] || !x || !r) return;
    ts_tensor *s = restore(n, r);
    ts_tensor *g = ts_masked_fill(ts_div(restore(n, go[0]), s), ts_eq_scalar(s, 0), 0.0);
    ts_tensor *centred = ts_sub(x, ts_mean_dims(x, reduced_dims(n), true));
    double scale = 1.0 / ((double)reduced_count(n) - n->p[0]);
    gi[0] = ts_mul(ts_mul_scalar(g, scale), centred);
}

/* logsumexp: g * exp(x - result) */
void tsi_logsumexp_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi) {
    ts_tensor *x = tsi_node_saved(n, 0), *r = tsi_node_saved(n, 1);
    if (!go[0] || !x || !r) return;
    gi[0] = ts_mul(restore(n, go[0]), ts_exp(ts_sub(x, restore(n, r))));
}

/* ------------------------------------------------------------------ softmax */
/* softmax: y * (g - sum(g * y)) */
void tsi_softmax_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi) {
    ts_tensor *y = tsi_node_saved(n, 0);
    if (!go[0] || !y) return;
    if (!tsi_create_graph_active() &&
        ((gi[0] = tsi_softmax_grad_fused(go[0], y, (int)n->ip[0], false)) || ts_error()))
        return;
    ts_tensor *dot = ts_sum_dim(ts_mul(go[0], y), (int)n->ip[0], true);
    gi[0] = ts_mul(y, ts_sub(go[0], dot));
}

/* log_softmax: g - exp(y) * sum(g) */
void tsi_log_softmax_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi) {
    ts_tensor *y = tsi_node_saved(n, 0);
    if (!go[0] || !y) return;
    if (!tsi_create_graph_active() &&
        ((gi[0] = tsi_softmax_grad_fused(go[0], y, (int)n->ip[0], true)) || ts_error()))
        return;
    ts_tensor *sum = ts_sum_dim(go[0], (int)n->ip[0], true);
    gi[0] = ts_sub(go[0], ts_mul(ts_exp(y), sum));
}
