/* cumulative.c — cumsum, cumprod, cummax, cummin, logcumsumexp (issue 52): checks, the backend's
 * scan slot, and PyTorch's backward formulas composed from differentiable ops (cumprod's handles
 * zeros without a host synchronisation; logcumsumexp's is PyTorch's signed log-space form). */
#include <float.h>
#include <math.h>

#include "amp/autocast.h"
#include "autograd/autograd.h"
#include "autograd/trace.h"

static ts_tensor *finish(ts_tensor *y) {
    y = ts_error() == TS_OK && y ? ts_keep(y) : NULL;
    ts_scope_end();
    return y;
}

/* the scan of src (already of the right dtype) into a new tensor of dtype odt; idx: cummax's */
static ts_tensor *scan_run(const char *op, ts_scan_op sop, ts_tensor *src, int d, ts_dtype odt,
                           ts_tensor **idx) {
    ts_device dev = tsi_device(src);
    const ts_backend *be = tsi_be(src);
    if (!be->scan)
        return tsi_error_set(TS_ERR_UNSUPPORTED, "%s: not supported on %s yet (cpu and sim only)",
                             op, ts_device_str(dev)),
               NULL;
    tsi_log_op(op, dev);
    ts_tensor *out = tsi_new(op, src->shape, odt, dev);
    ts_tensor *ix = idx ? tsi_new(op, src->shape, TS_I64, dev) : NULL;
    if (!out || (idx && !ix)) {
        ts_release(out);
        ts_release(ix);
        return NULL;
    }
    if (tsi_numel(src->shape) > 0) {
        ts_kview ko = tsi_kview(out), ki = tsi_kview(src), kx = ix ? tsi_kview(ix) : ko;
        if (ki.ndim == 0) { /* a 0-dim tensor is a line of one element */
            ts_kview *vs[3] = {&ko, &ki, &kx};
            for (int i = 0; i < 3; i++) vs[i]->ndim = 1, vs[i]->shape[0] = 1, vs[i]->strides[0] = 1;
        }
        be->scan(be, tsi_dev_index(src), sop, &ko, ix ? &kx : NULL, &ki, d);
    }
    if (idx) *idx = ix;
    return out;
}

/* reversed cumulative sum along d (grad mode is off in backward) */
static ts_tensor *rev_cumsum(ts_tensor *x, int d) {
    if (ts_ndim(x) == 0) return x;
    return ts_flip(ts_cumsum(ts_flip(x, TS_DIMS(d)), d, TS_DTYPE_DEFAULT), TS_DIMS(d));
}

/* ------------------------------------------------------------------ backward formulas */
static void cumsum_backward(ts_node *n, ts_tensor *const *g, ts_tensor **gi) {
    if (g[0]) gi[0] = rev_cumsum(g[0], (int)n->ip[0]);
}

/* PyTorch's cumprod_backward without its host check for zeros: per line, positions before the
 * first zero get reversed_cumsum(g * y) / x; the first zero gets the reversed cumsum of g times
 * the cumprod of x with that zero replaced by one; later positions get 0. Public ops on g, x and
 * y: its own derivative where x has no zero (create_graph checks that). */
static void cumprod_backward(ts_node *n, ts_tensor *const *g, ts_tensor **gi) {
    if (!g[0]) return;
    const int d = (int)n->ip[0];
    ts_tensor *x = tsi_node_saved(n, 0), *y = tsi_node_saved(n, 1);
    if (!x || !y) return;
    if (ts_ndim(x) == 0 || ts_size(x, d) <= 1) {
        gi[0] = g[0];
        return;
    }
    ts_tensor *z = ts_eq_scalar(x, 0);
    /* past a line's first zero the gradient is 0 here, but its derivative in that zero is not:
     * under create_graph, an input with a zero says so if differentiated again (one read) */
    if (tsi_create_graph_active() && tsi_device(x).type != TS_META && z && ts_item(ts_sum(z)) > 0)
        n->flags |= TSI_NODE_ONCE;
    ts_tensor *c = ts_cumsum(z, d, TS_DTYPE_DEFAULT);
    ts_tensor *before = ts_eq_scalar(c, 0);
    ts_tensor *first = ts_logical_and(ts_eq_scalar(c, 1), z);
    ts_tensor *one = ts_ones_like(x), *zero = ts_zeros_like(g[0]);
    ts_tensor *xs = ts_where(before, x, one);
    ts_tensor *ga = ts_where(before, ts_div(rev_cumsum(ts_mul(g[0], y), d), xs), zero);
    ts_tensor *x1 = ts_where(first, one, x);
    ts_tensor *p1 = ts_cumprod(x1, d, TS_DTYPE_DEFAULT);
    ts_tensor *gb = ts_where(first, rev_cumsum(ts_mul(g[0], p1), d), zero);
    gi[0] = ts_add(ga, gb);
}

static void cumext_backward(ts_node *n, ts_tensor *const *g, ts_tensor **gi) {
    if (!g[0]) return;
    ts_tensor *idx = tsi_node_saved(n, 0);
    if (!idx) return;
    if (ts_ndim(g[0]) == 0) {
        gi[0] = g[0];
        return;
    }
    gi[0] = ts_scatter_add(ts_zeros_like(g[0]), (int)n->ip[0], idx, g[0]);
}

static double lowest_of(ts_dtype dt) {
    switch (dt) {
    case TS_F64:
        return -DBL_MAX;
    case TS_F16:
        return -65504.0;
    case TS_BF16:
        return -3.3895313892515355e38;
    default:
        return -FLT_MAX;
    }
}

static ts_tensor *rev_lcse(ts_tensor *x, int d) {
    if (ts_ndim(x) == 0) return ts_logcumsumexp(x, d);
    return ts_flip(ts_logcumsumexp(ts_flip(x, TS_DIMS(d)), d), TS_DIMS(d));
}

/* logcumsumexp's gradient is a linear map of g with weights from x and y = logcumsumexp(x),
 * A(g)_i = sum_{j >= i} g_j e^(x_i - y_j); its adjoint is A*(h)_j = sum_{i <= j} h_i e^(x_i - y_j).
 * Both are evaluated in PyTorch's signed log-space form (logcumsumexp_backward: the positive and
 * negative parts of g apart), which is not differentiable in g where g is 0 (a where on log|g|: a
 * second derivative of 0 there, and the double-vjp trick's cotangent is all zeros). So under
 * create_graph the value carries a node of its own, whose backward is A and A* again:
 *   r = A(g):  dg = A*(k), dx = k r, dy = -g A*(k);
 *   r = A*(h): dh = A(k), dx = h A(k), dy = -k r.
 * ip[0] the dim, ip[1] adjoint; saved g (or h), x, y and the result r. */
static ts_tensor *lcse_map(ts_tensor *g, ts_tensor *x, ts_tensor *y, int d, bool adjoint);

static void lcse_map_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi) {
    const int d = (int)n->ip[0];
    const bool adjoint = n->ip[1] != 0;
    ts_tensor *g = tsi_node_saved(n, 0), *x = tsi_node_saved(n, 1), *y = tsi_node_saved(n, 2);
    ts_tensor *r = tsi_node_saved(n, 3), *k = go[0];
    if (!k || !g || !x || !y || !r) return;
    ts_tensor *m = lcse_map(k, x, y, d, !adjoint); /* A*(k), or A(k) for the adjoint */
    if (!m) return;
    if (tsi_node_needs(n, 0)) gi[0] = m;
    if (tsi_node_needs(n, 1)) gi[1] = adjoint ? ts_mul(g, m) : ts_mul(k, r);
    if (tsi_node_needs(n, 2)) gi[2] = ts_neg(adjoint ? ts_mul(k, r) : ts_mul(g, m));
}

static ts_tensor *lcse_map(ts_tensor *g, ts_tensor *x, ts_tensor *y, int d, bool adjoint) {
    ts_no_grad_begin();
    ts_tensor *gmin = ts_full_like(g, lowest_of(ts_dtype_of(g)));
    ts_tensor *lag = ts_log(ts_abs(g));
    ts_tensor *part[2] = {ts_where(ts_gt_scalar(g, 0), lag, gmin),
                          ts_where(ts_lt_scalar(g, 0), lag, gmin)};
    for (int s = 0; s < 2; s++) /* e^(x + revlcse(log g - y)), e^(lcse(log h + x) - y) */
        part[s] = adjoint ? ts_exp(ts_sub(ts_logcumsumexp(ts_add(part[s], x), d), y))
                          : ts_exp(ts_add(rev_lcse(ts_sub(part[s], y), d), x));
    ts_tensor *r = ts_sub(part[0], part[1]);
    ts_no_grad_end();
    ts_tensor *const ins[3] = {g, x, y};
    if (r && tsi_needs_graph(ins, 3)) {
        ts_node *n = tsi_node_new(adjoint ? "LogcumsumexpBackwardAdjointBackward0"
                                          : "LogcumsumexpBackwardBackward0",
                                  "logcumsumexp", lcse_map_backward, ins, 3, 1, 4);
        if (!n) return NULL;
        tsi_node_set_output(n, r, 0);
        for (int i = 0; i < 3; i++) tsi_node_save(n, i, ins[i]);
        tsi_node_save_output(n, 3, r);
        n->ip[0] = d, n->ip[1] = adjoint;
        n->flags |= TSI_NODE_TWICE; /* lcse_map again, and products */
        tsi_node_release(n);
    }
    return r;
}

/* PyTorch's logcumsumexp_backward (real case): A(g) above */
static void lcse_backward(ts_node *n, ts_tensor *const *g, ts_tensor **gi) {
    if (!g[0]) return;
    const int d = (int)n->ip[0];
    ts_tensor *x = tsi_node_saved(n, 0), *y = tsi_node_saved(n, 1);
    if (!x || !y) return;
    if (ts_numel(g[0]) == 0) {
        gi[0] = ts_zeros_like(x);
        return;
    }
    gi[0] = lcse_map(g[0], x, y, d, false);
}

/* ------------------------------------------------------------------ front ends */
static bool check_dtype_arg(const char *op, ts_dtype dt) {
    if (dt == TS_DTYPE_DEFAULT || ((unsigned)dt < TS_DTYPE_COUNT)) return true;
    tsi_error_set(TS_ERR_ARG, "%s: dtype %d is not a dtype", op, (int)dt);
    return false;
}

static ts_tensor *cum_sum_prod(const char *op, ts_tensor *t, int dim, ts_dtype dtype, bool prod) {
    tsi_init();
    if (!tsi_check_input(op, t, "input") || !check_dtype_arg(op, dtype)) return NULL;
    const int d = tsi_wrap_dim(op, dim, t->shape.ndim);
    if (d < 0) return NULL;
    const ts_dtype odt = dtype != TS_DTYPE_DEFAULT ? dtype
                         : tsi_is_float(t->dtype)  ? t->dtype
                                                   : TS_I64;
    if (odt == TS_BOOL)
        return tsi_error_set(TS_ERR_DTYPE, "%s: \"%s_out_cpu\" not implemented for 'Bool'", op, op),
               NULL;
    ts_scope_begin();
    ts_tensor *src = t->dtype == odt ? t : ts_to_dtype(t, odt);
    if (!src) return finish(NULL);
    const int kd = src->shape.ndim ? d : 0;
    ts_tensor *y = scan_run(op, prod ? TS_SCAN_PROD : TS_SCAN_SUM, src, kd, odt, NULL);
    if (y && tsi_needs_graph(&src, 1)) {
        ts_tensor *saves[2] = {src, NULL};
        ts_node *n =
            tsi_record(prod ? "CumprodBackward0" : "CumsumBackward0", op,
                       prod ? cumprod_backward : cumsum_backward, &src, 1, y, saves, prod ? 2 : 0);
        if (n) {
            n->ip[0] = d;
            n->flags |= TSI_NODE_TWICE; /* linear in g; cumprod's: see cumprod_backward */
            if (prod) tsi_node_save_output(n, 1, y);
        }
    }
    y = tsi_own(y);
    y = tsi_trace(op, &t, 1, y, (int64_t[]){d, dtype}, 2, NULL, 0);
    return finish(y);
}

/* autocast: fp32_set_opt_dtype in PyTorch's lists (a given dtype is used as it is) */
static ts_tensor *cum_autocast(const char *op, ts_tensor *t, int dim, ts_dtype dtype, bool prod) {
    if (dtype != TS_DTYPE_DEFAULT) return cum_sum_prod(op, t, dim, dtype, prod);
    tsi_ac_frame ac;
    TSI_AUTOCAST_ENTER(&ac, op, &t);
    return tsi_autocast_exit(&ac, cum_sum_prod(op, t, dim, dtype, prod));
}

ts_tensor *ts_cumsum(ts_tensor *t, int dim, ts_dtype dtype) {
    return cum_autocast("cumsum", t, dim, dtype, false);
}
ts_tensor *ts_cumprod(ts_tensor *t, int dim, ts_dtype dtype) {
    return cum_autocast("cumprod", t, dim, dtype, true);
}

static ts_tensor *cum_ext(const char *op, ts_tensor *t, int dim, ts_tensor **indices, bool max) {
    if (indices) *indices = NULL;
    tsi_init();
    if (!tsi_check_input(op, t, "input")) return NULL;
    const int d = tsi_wrap_dim(op, dim, t->shape.ndim);
    if (d < 0) return NULL;
    if (t->dtype == TS_U64)
        return tsi_error_set(TS_ERR_DTYPE, "%s: not implemented for '%s' (%s)", op,
                             tsi_torch_scalar_name(t->dtype), tsi_desc(t)),
               NULL;
    ts_tensor *ix = NULL;
    ts_tensor *y = scan_run(op, max ? TS_SCAN_MAX : TS_SCAN_MIN, t, d, t->dtype, &ix);
    if (y && tsi_needs_graph(&t, 1)) {
        ts_node *n = tsi_record(max ? "CummaxBackward0" : "CumminBackward0", op, cumext_backward,
                                &t, 1, y, &ix, 1);
        if (n) n->ip[0] = d, n->flags |= TSI_NODE_TWICE; /* a scatter_add of g */
    }
    y = tsi_own(y);
    ix = tsi_own(ix);
    if (indices) *indices = ix;
    y = tsi_trace(op, &t, 1, y, (int64_t[]){d}, 1, NULL, 0);
    return y;
}

ts_tensor *ts_cummax(ts_tensor *t, int dim, ts_tensor **indices) {
    return cum_ext("cummax", t, dim, indices, true);
}
ts_tensor *ts_cummin(ts_tensor *t, int dim, ts_tensor **indices) {
    return cum_ext("cummin", t, dim, indices, false);
}

ts_tensor *ts_logcumsumexp(ts_tensor *t, int dim) {
    const char *op = "logcumsumexp";
    tsi_init();
    if (!tsi_check_input(op, t, "input")) return NULL;
    const int d = tsi_wrap_dim(op, dim, t->shape.ndim);
    if (d < 0) return NULL;
    if (!tsi_is_float(t->dtype))
        return tsi_error_set(TS_ERR_DTYPE, "%s: \"logcumsumexp_out_cpu\" not implemented for '%s'",
                             op, tsi_torch_scalar_name(t->dtype)),
               NULL;
    ts_tensor *y = scan_run(op, TS_SCAN_LOGSUMEXP, t, d, t->dtype, NULL);
    if (y && tsi_needs_graph(&t, 1)) {
        ts_tensor *saves[2] = {t, NULL};
        ts_node *n = tsi_record("LogcumsumexpBackward0", op, lcse_backward, &t, 1, y, saves, 2);
        if (n) {
            n->ip[0] = d;
            n->flags |= TSI_NODE_TWICE; /* lcse_map: a node of its own under create_graph */
            tsi_node_save_output(n, 1, y);
        }
    }
    y = tsi_own(y);
    return tsi_trace(op, &t, 1, y, (int64_t[]){d}, 1, NULL, 0);
}
