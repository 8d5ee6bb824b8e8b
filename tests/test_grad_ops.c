/* test_grad_ops.c — backward of reductions, softmax, matmul, index and joining ops: gradcheck (f64
 * central differences) over dims, keepdim, broadcast and 1-D cases on cpu, sim:0 (and cuda:0),
 * plus exact gradients computed by hand, PyTorch's grad_fn names and the graph's edge cases. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ts_test.h"

/* ------------------------------------------------------------------ inputs */
static uint64_t lcg = 0x2545F4914F6CDD1DULL;
/* +-[0.5, 1.5]: away from 0 (prod, std) and, being random doubles, free of ties (max) */
static double rnd(void) {
    lcg = lcg * 6364136223846793005ULL + 1442695040888963407ULL;
    double m = 0.5 + (double)(lcg >> 11) / 9007199254740992.0;
    return (lcg >> 7) & 1 ? m : -m;
}

/* A random f64 leaf that requires grad. layout 1: a transposed (non-contiguous) leaf. */
static ts_tensor *leaf(ts_shape s, ts_device dev, int layout) {
    double v[512];
    int64_t n = 1;
    for (int i = 0; i < s.ndim; i++) n *= s.dims[i];
    for (int64_t i = 0; i < n; i++) v[i] = rnd();
    ts_opts o = {.dtype = TS_F64, .device = dev};
    ts_tensor *t;
    if (layout == 1 && s.ndim >= 2) {
        ts_shape r = s;
        r.dims[s.ndim - 1] = s.dims[s.ndim - 2], r.dims[s.ndim - 2] = s.dims[s.ndim - 1];
        t = ts_detach(ts_transpose(ts_tensor_f64(r, v, o), -1, -2));
    } else {
        t = ts_tensor_f64(s, v, o);
    }
    ts_set_requires_grad(t, true);
    return t;
}

static ts_tensor *leaf_from(ts_shape s, const double *v, ts_device dev) {
    return ts_tensor_f64(s, v, (ts_opts){.device = dev, .requires_grad = true});
}

/* The gradcheck of f over the given inputs, reported with a label on failure. */
static void gc(const char *what, ts_device dev, ts_gradcheck_fn f, void *ctx, ts_tensor *const *in,
               int n) {
    bool ok = ts_gradcheck(f, ctx, in, n, (ts_gradcheck_opts){0});
    ts_test_record(ok);
    if (!ok) {
        ts_test_failf(__FILE__, __LINE__, "gradcheck %s on %s failed%s", what, ts_device_str(dev),
                      ts_test_error_str());
        ts_error_clear();
    }
}

static void check_values(const char *what, ts_tensor *t, const double *want, int64_t n) {
    double got[64] = {0};
    bool ok = t && ts_numel(t) == n && n <= 64 &&
              ts_copy_to_host(ts_to(ts_to_dtype(t, TS_F64), ts_cpu()), got,
                              (size_t)n * sizeof(double)) == TS_OK;
    for (int64_t i = 0; ok && i < n; i++) ok = fabs(got[i] - want[i]) <= 1e-12;
    ts_test_record(ok);
    if (!ok) {
        ts_test_failf(__FILE__, __LINE__, "%s: wrong values%s", what, ts_test_error_str());
        for (int64_t i = 0; i < n && i < 64; i++)
            fprintf(stderr, "  [%lld] got %.17g want %.17g\n", (long long)i, got[i], want[i]);
    }
}

/* ------------------------------------------------------------------ functions under test */
typedef enum { M_ALL, M_DIM, M_DIMS } mode;
typedef struct args {
    mode m;
    int dim;
    bool keep;
    ts_dims dims;
    double corr;
    ts_tensor *index; /* per device */
} args;

typedef enum {
    OP_SUM,
    OP_MEAN,
    OP_PROD,
    OP_MAX,
    OP_MIN,
    OP_AMAX,
    OP_AMIN,
    OP_MAXDIM,
    OP_MINDIM,
    OP_VAR,
    OP_STD,
    OP_LSE,
    OP_SOFTMAX,
    OP_LOG_SOFTMAX,
    OP_COUNT
} red_op;
static const char *red_names[OP_COUNT] = {"sum",  "mean",      "prod",    "max",        "min",
                                          "amax", "amin",      "max_dim", "min_dim",    "var",
                                          "std",  "logsumexp", "softmax", "log_softmax"};
static red_op cur_op;

static ts_tensor *f_reduce(ts_tensor *const *in, int n, void *ctx) {
    (void)n;
    const args *a = ctx;
    ts_tensor *x = in[0];
    switch (cur_op) {
    case OP_SUM:
        return a->m == M_ALL   ? ts_sum(x)
               : a->m == M_DIM ? ts_sum_dim(x, a->dim, a->keep)
                               : ts_sum_dims(x, a->dims, a->keep);
    case OP_MEAN:
        return a->m == M_ALL   ? ts_mean(x)
               : a->m == M_DIM ? ts_mean_dim(x, a->dim, a->keep)
                               : ts_mean_dims(x, a->dims, a->keep);
    case OP_PROD:
        return a->m == M_ALL ? ts_prod(x) : ts_prod_dim(x, a->dim, a->keep);
    case OP_MAX:
        return ts_max(x);
    case OP_MIN:
        return ts_min(x);
    case OP_AMAX:
        return a->m == M_DIM ? ts_amax_dim(x, a->dim, a->keep) : ts_amax_dims(x, a->dims, a->keep);
    case OP_AMIN:
        return a->m == M_DIM ? ts_amin_dim(x, a->dim, a->keep) : ts_amin_dims(x, a->dims, a->keep);
    case OP_MAXDIM:
        return ts_max_dim(x, a->dim, a->keep, NULL);
    case OP_MINDIM: {
        ts_tensor *idx;
        return ts_min_dim(x, a->dim, a->keep, &idx);
    }
    case OP_VAR:
        return a->m == M_ALL   ? ts_var(x)
               : a->m == M_DIM ? ts_var_dim(x, a->dim, a->keep, a->corr)
                               : ts_var_dims(x, a->dims, a->keep, a->corr);
    case OP_STD:
        return a->m == M_ALL   ? ts_std(x)
               : a->m == M_DIM ? ts_std_dim(x, a->dim, a->keep, a->corr)
                               : ts_std_dims(x, a->dims, a->keep, a->corr);
    case OP_LSE:
        return a->m == M_ALL   ? ts_logsumexp(x)
               : a->m == M_DIM ? ts_logsumexp_dim(x, a->dim, a->keep)
                               : ts_logsumexp_dims(x, a->dims, a->keep);
    case OP_SOFTMAX:
        return ts_softmax(x, a->dim);
    case OP_LOG_SOFTMAX:
        return ts_log_softmax(x, a->dim);
    default:
        return NULL;
    }
}

/* which argument forms each op has */
static bool has_mode(red_op op, mode m) {
    switch (op) {
    case OP_MAX:
    case OP_MIN:
        return m == M_ALL;
    case OP_AMAX:
    case OP_AMIN:
        return m != M_ALL;
    case OP_MAXDIM:
    case OP_MINDIM:
    case OP_SOFTMAX:
    case OP_LOG_SOFTMAX:
        return m == M_DIM;
    case OP_PROD:
        return m != M_DIMS;
    default:
        return true;
    }
}

static void test_reductions(ts_device dev) {
    const ts_dims dim_lists[3] = {TS_DIMS(0, 2), TS_DIMS(-1, 0, 1), {.n = 0}};
    for (int op = 0; op < OP_COUNT; op++) {
        cur_op = (red_op)op;
        for (int layout = 0; layout < 2; layout++) {
            ts_scope_begin();
            ts_tensor *x = leaf(TS_SHAPE(2, 3, 4), dev, layout);
            char what[96];
            if (has_mode(cur_op, M_ALL)) {
                args a = {.m = M_ALL};
                snprintf(what, sizeof what, "%s() layout %d", red_names[op], layout);
                gc(what, dev, f_reduce, &a, &x, 1);
            }
            for (int dim = -1; dim < 3 && has_mode(cur_op, M_DIM); dim++) {
                for (int keep = 0; keep < 2; keep++) {
                    args a = {.m = M_DIM, .dim = dim, .keep = keep, .corr = dim == 1 ? 0 : 1};
                    snprintf(what, sizeof what, "%s(dim=%d, keepdim=%d) layout %d", red_names[op],
                             dim, keep, layout);
                    gc(what, dev, f_reduce, &a, &x, 1);
                }
            }
            for (int k = 0; k < 3 && has_mode(cur_op, M_DIMS); k++) {
                for (int keep = 0; keep < 2; keep++) {
                    args a = {.m = M_DIMS, .dims = dim_lists[k], .keep = keep, .corr = 2};
                    snprintf(what, sizeof what, "%s(dims list %d, keepdim=%d) layout %d",
                             red_names[op], k, keep, layout);
                    gc(what, dev, f_reduce, &a, &x, 1);
                }
            }
            ts_scope_end();
        }
        /* a 0-dim input */
        if (cur_op != OP_VAR && cur_op != OP_STD) {
            ts_scope_begin();
            ts_tensor *s = leaf(TS_SHAPE(), dev, 0);
            args a = {.m = has_mode(cur_op, M_ALL) ? M_ALL : M_DIM, .dim = 0};
            char what[64];
            snprintf(what, sizeof what, "%s of a 0-dim tensor", red_names[op]);
            gc(what, dev, f_reduce, &a, &s, 1);
            ts_scope_end();
        }
    }
    CHECK_OK();
}

/* prod with zeros: one zero in a slice (its gradient is the product of the others), two zeros in
 * a slice (all 0), and over everything */
static void test_prod_zeros(ts_device dev) {
    ts_scope_begin();
    const double v[12] = {2, 0, 3, -1, 0, 0, 5, 2, 1.5, -2, 4, 0.5};
    ts_tensor *x = leaf_from(TS_SHAPE(4, 3), v, dev);
    cur_op = OP_PROD;
    for (int keep = 0; keep < 2; keep++) {
        args a = {.m = M_DIM, .dim = 1, .keep = keep};
        gc("prod(dim=1) with zeros", dev, f_reduce, &a, &x, 1);
        a.dim = 0;
        gc("prod(dim=0) with zeros", dev, f_reduce, &a, &x, 1);
    }
    ts_backward(ts_sum(ts_prod_dim(x, 1, false)));
    /* rows: [2,0,3] -> [0,6,0]; [-1,0,0] -> 0; [5,2,1.5] -> [3,7.5,10]; [-2,4,.5] -> [2,-1,-8] */
    const double want[12] = {0, 6, 0, 0, 0, 0, 3, 7.5, 10, 2, -1, -8};
    check_values("prod(dim=1) gradient with zeros", ts_grad(x), want, 12);
    ts_set_grad(x, NULL);

    const double one_zero[4] = {2, 0, 3, -1}, two_zeros[4] = {0, 2, 0, 3};
    ts_tensor *y = leaf_from(TS_SHAPE(2, 2), one_zero, dev);
    ts_backward(ts_prod(y));
    check_values("prod() gradient with one zero", ts_grad(y), (double[]){0, -6, 0, 0}, 4);
    ts_tensor *w = leaf_from(TS_SHAPE(4), two_zeros, dev);
    ts_backward(ts_prod(w));
    check_values("prod() gradient with two zeros", ts_grad(w), (double[]){0, 0, 0, 0}, 4);
    args a = {.m = M_ALL};
    gc("prod() with one zero", dev, f_reduce, &a, &y, 1);
    gc("prod() with two zeros", dev, f_reduce, &a, &w, 1);
    ts_scope_end();
    CHECK_OK();
}

/* ties: amax/max()/min() share the gradient evenly, max(dim) gives it to the returned index */
static void test_ties(ts_device dev) {
    ts_scope_begin();
    const double v[8] = {1, 3, 3, 2, 5, 5, 5, -1};
    ts_tensor *x = leaf_from(TS_SHAPE(2, 4), v, dev);
    ts_backward(ts_sum(ts_amax_dim(x, 1, false)));
    check_values("amax ties", ts_grad(x), (double[]){0, .5, .5, 0, 1. / 3, 1. / 3, 1. / 3, 0}, 8);
    ts_set_grad(x, NULL);
    ts_backward(ts_max(x));
    check_values("max() ties", ts_grad(x), (double[]){0, 0, 0, 0, 1. / 3, 1. / 3, 1. / 3, 0}, 8);
    ts_set_grad(x, NULL);
    ts_tensor *idx = NULL;
    ts_backward(ts_sum(ts_max_dim(x, 1, true, &idx)));
    check_values("max(dim) ties", ts_grad(x), (double[]){0, 1, 0, 0, 1, 0, 0, 0}, 8);
    CHECK(idx && !ts_requires_grad(idx) && ts_grad_fn_name(idx) == NULL);
    ts_set_grad(x, NULL);
    const double u[4] = {2, 2, 2, 7};
    ts_tensor *m = leaf_from(TS_SHAPE(4), u, dev);
    ts_backward(ts_min(m));
    check_values("min() three-way tie", ts_grad(m), (double[]){1. / 3, 1. / 3, 1. / 3, 0}, 4);
    ts_set_grad(m, NULL);
    ts_backward(ts_amin_dims(ts_reshape(m, TS_SHAPE(2, 2)), TS_DIMS(0, 1), true));
    check_values("amin over a dims list", ts_grad(m), (double[]){1. / 3, 1. / 3, 1. / 3, 0}, 4);
    ts_scope_end();
    CHECK_OK();
}

/* a few gradients by hand */
static void test_exact(ts_device dev) {
    ts_scope_begin();
    ts_tensor *x = leaf_from(TS_SHAPE(2, 3), (double[]){1, 2, 3, 4, 5, 6}, dev);
    ts_backward(ts_sum(ts_mean_dims(x, TS_DIMS(1), false)));
    check_values("mean(dim 1)", ts_grad(x),
                 (double[]){1. / 3, 1. / 3, 1. / 3, 1. / 3, 1. / 3, 1. / 3}, 6);
    ts_set_grad(x, NULL);
    /* var over dim 1, correction 1: 2 (x - mean) / (3 - 1) = x - mean */
    ts_backward(ts_sum(ts_var_dim(x, 1, false, 1)));
    check_values("var(dim 1)", ts_grad(x), (double[]){-1, 0, 1, -1, 0, 1}, 6);
    ts_set_grad(x, NULL);
    /* std of [1, 2, 3] is 1: (x - mean) / ((3 - 1) * 1) */
    ts_backward(ts_sum(ts_std_dim(x, 1, true, 1)));
    check_values("std(dim 1)", ts_grad(x), (double[]){-.5, 0, .5, -.5, 0, .5}, 6);
    ts_set_grad(x, NULL);

    /* softmax([0, ln 2]) = [1/3, 2/3]; with g = [1, 0]: y (g - y.g) = [2/9, -2/9];
     * log_softmax: g - softmax * sum(g) = [2/3, -2/3] */
    ts_tensor *s = leaf_from(TS_SHAPE(2), (double[]){0, log(2.0)}, dev);
    ts_tensor *g = ts_tensor_f64(TS_SHAPE(2), (double[]){1, 0}, (ts_opts){.device = dev});
    ts_backward_with(ts_softmax(s, 0), g);
    check_values("softmax", ts_grad(s), (double[]){2. / 9, -2. / 9}, 2);
    ts_set_grad(s, NULL);
    ts_backward_with(ts_log_softmax(s, -1), g);
    check_values("log_softmax", ts_grad(s), (double[]){2. / 3, -2. / 3}, 2);
    /* logsumexp([0, ln 2]) = ln 3: gradient softmax = [1/3, 2/3] */
    ts_set_grad(s, NULL);
    ts_backward(ts_logsumexp(s));
    check_values("logsumexp", ts_grad(s), (double[]){1. / 3, 2. / 3}, 2);

    /* mm with g = ones: ga = g b^T = row sums of b; gb = a^T g = column sums of a, repeated */
    ts_tensor *a = leaf_from(TS_SHAPE(2, 2), (double[]){1, 2, 3, 4}, dev);
    ts_tensor *b = leaf_from(TS_SHAPE(2, 2), (double[]){5, 6, 7, 8}, dev);
    ts_backward(ts_sum(ts_mm(a, b)));
    check_values("mm grad a", ts_grad(a), (double[]){11, 15, 11, 15}, 4);
    check_values("mm grad b", ts_grad(b), (double[]){4, 4, 6, 6}, 4);
    /* dot: each gets the other */
    ts_tensor *u = leaf_from(TS_SHAPE(3), (double[]){1, 2, 3}, dev);
    ts_tensor *w = leaf_from(TS_SHAPE(3), (double[]){4, 5, 6}, dev);
    ts_backward(ts_matmul(u, w));
    check_values("dot grad u", ts_grad(u), (double[]){4, 5, 6}, 3);
    check_values("dot grad w", ts_grad(w), (double[]){1, 2, 3}, 3);

    /* index_select with a repeated index accumulates; gather likewise */
    ts_tensor *t = leaf_from(TS_SHAPE(3), (double[]){1, 2, 3}, dev);
    ts_tensor *ix = ts_tensor_i64(TS_SHAPE(4), (int64_t[]){2, 0, 2, 2}, (ts_opts){.device = dev});
    ts_backward(ts_sum(ts_index_select(t, 0, ix)));
    check_values("index_select repeats", ts_grad(t), (double[]){1, 0, 3}, 3);
    ts_set_grad(t, NULL);
    ts_backward(ts_sum(ts_gather(t, 0, ix)));
    check_values("gather repeats", ts_grad(t), (double[]){1, 0, 3}, 3);

    /* cat/stack hand their slices back; different dtypes get their own back */
    ts_tensor *c0 = leaf_from(TS_SHAPE(1, 2), (double[]){1, 2}, dev);
    ts_tensor *c1 = ts_tensor_f32(TS_SHAPE(2, 2), (float[]){3, 4, 5, 6},
                                  (ts_opts){.device = dev, .requires_grad = true});
    ts_tensor *parts[2] = {c0, c1};
    ts_tensor *weights =
        ts_tensor_f64(TS_SHAPE(3, 2), (double[]){1, 2, 3, 4, 5, 6}, (ts_opts){.device = dev});
    ts_backward_with(ts_cat(parts, 2, 0), weights);
    check_values("cat grad 0", ts_grad(c0), (double[]){1, 2}, 2);
    check_values("cat grad 1", ts_grad(c1), (double[]){3, 4, 5, 6}, 4);
    CHECK(ts_grad(c1) && ts_dtype_of(ts_grad(c1)) == TS_F32);
    ts_scope_end();
    CHECK_OK();
}

/* ------------------------------------------------------------------ matmul */
static ts_tensor *f_mm(ts_tensor *const *in, int n, void *ctx) {
    (void)n;
    int kind = *(const int *)ctx;
    return kind == 0   ? ts_mm(in[0], in[1])
           : kind == 1 ? ts_bmm(in[0], in[1])
                       : ts_matmul(in[0], in[1]);
}

static void test_matmul(ts_device dev) {
    static struct {
        int kind; /* 0 mm, 1 bmm, 2 matmul */
        ts_shape a, b;
    } cases[] = {
        {0, {2, {3, 4}}, {2, {4, 2}}},
        {1, {3, {2, 3, 4}}, {3, {2, 4, 5}}},
        {2, {1, {4}}, {1, {4}}},
        {2, {2, {3, 4}}, {1, {4}}},
        {2, {1, {4}}, {2, {4, 2}}},
        {2, {2, {3, 4}}, {2, {4, 2}}},
        {2, {3, {2, 3, 4}}, {2, {4, 5}}},
        {2, {3, {2, 3, 4}}, {1, {4}}},
        {2, {1, {4}}, {3, {2, 4, 3}}},
        {2, {2, {3, 4}}, {3, {2, 4, 5}}},
        {2, {4, {2, 1, 3, 4}}, {3, {3, 4, 2}}},
        {2, {3, {1, 3, 4}}, {4, {2, 2, 4, 2}}},
        {2, {4, {2, 2, 3, 4}}, {2, {4, 1}}},
        {2, {3, {2, 1, 4}}, {3, {2, 4, 3}}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        for (int layout = 0; layout < 2; layout++) {
            for (int which = 0; which < 3; which++) { /* both need grad, only a, only b */
                ts_scope_begin();
                ts_tensor *in[2] = {leaf(cases[i].a, dev, layout), leaf(cases[i].b, dev, layout)};
                if (which == 1) ts_set_requires_grad(in[1], false);
                if (which == 2) ts_set_requires_grad(in[0], false);
                char what[96];
                snprintf(what, sizeof what, "matmul case %zu layout %d grads %d", i, layout, which);
                gc(what, dev, f_mm, &cases[i].kind, in, 2);
                ts_scope_end();
            }
        }
    }
    CHECK_OK();
}

/* ------------------------------------------------------------------ index ops */
typedef enum { IX_SELECT, IX_GATHER, IX_SCATTER, IX_SCATTER_INPLACE } ix_op;
static ix_op cur_ix;

static ts_tensor *f_index(ts_tensor *const *in, int n, void *ctx) {
    (void)n;
    const args *a = ctx;
    switch (cur_ix) {
    case IX_SELECT:
        return ts_index_select(in[0], a->dim, a->index);
    case IX_GATHER:
        return ts_gather(in[0], a->dim, a->index);
    case IX_SCATTER:
        return ts_scatter_add(in[0], a->dim, a->index, in[1]);
    default: /* on a non-leaf copy of self (made by cat, one of the ops under test here) */
        return ts_scatter_add_(ts_cat(in, 1, 0), a->dim, a->index, in[1]);
    }
}

static void test_index(ts_device dev) {
    ts_scope_begin();
    ts_opts io = {.device = dev};
    ts_tensor *x = leaf(TS_SHAPE(3, 4), dev, 0), *xt = leaf(TS_SHAPE(3, 4), dev, 1);
    ts_tensor *sel = ts_tensor_i64(TS_SHAPE(5), (int64_t[]){2, 0, 2, 1, 2}, io);
    ts_tensor *sel32 = ts_tensor_i32(TS_SHAPE(2), (int32_t[]){2, 2}, io);
    cur_ix = IX_SELECT;
    for (int dim = 0; dim < 2; dim++) {
        args a = {.dim = dim, .index = sel};
        gc("index_select", dev, f_index, &a, &x, 1);
        gc("index_select non-contiguous", dev, f_index, &a, &xt, 1);
        a.index = sel32;
        gc("index_select i32 index", dev, f_index, &a, &x, 1);
    }
    ts_tensor *s0 = leaf(TS_SHAPE(), dev, 0);
    args a0 = {.dim = 0, .index = ts_tensor_i64(TS_SHAPE(1), (int64_t[]){0}, io)};
    gc("index_select of a 0-dim tensor", dev, f_index, &a0, &s0, 1);

    /* gather / scatter_add: index [2, 3] into self [3, 4] along dim 0 and 1; src [3, 4] is
     * bigger than the index, so part of it gets no gradient */
    ts_tensor *g0 = ts_tensor_i64(TS_SHAPE(2, 3), (int64_t[]){2, 0, 1, 2, 2, 0}, io);
    ts_tensor *g1 = ts_tensor_i64(TS_SHAPE(2, 3), (int64_t[]){3, 3, 0, 1, 2, 1}, io);
    ts_tensor *src = leaf(TS_SHAPE(3, 4), dev, 0), *src_same = leaf(TS_SHAPE(2, 3), dev, 0);
    for (int dim = 0; dim < 2; dim++) {
        args a = {.dim = dim, .index = dim ? g1 : g0};
        cur_ix = IX_GATHER;
        gc("gather", dev, f_index, &a, &x, 1);
        gc("gather non-contiguous", dev, f_index, &a, &xt, 1);
        ts_tensor *in[2] = {x, src}, *in2[2] = {xt, src_same};
        cur_ix = IX_SCATTER;
        gc("scatter_add (src larger than index)", dev, f_index, &a, in, 2);
        gc("scatter_add", dev, f_index, &a, in2, 2);
        cur_ix = IX_SCATTER_INPLACE;
        gc("scatter_add_", dev, f_index, &a, in, 2);
        gc("scatter_add_ (src same shape)", dev, f_index, &a, in2, 2);
    }
    ts_scope_end();
    CHECK_OK();
}

/* ------------------------------------------------------------------ joining and splitting */
typedef enum { J_CAT, J_STACK, J_SPLIT, J_CHUNK } join_op;
static join_op cur_join;

static ts_tensor *f_join(ts_tensor *const *in, int n, void *ctx) {
    const args *a = ctx;
    if (cur_join == J_CAT) return ts_cat(in, n, a->dim);
    if (cur_join == J_STACK) return ts_stack(in, n, a->dim);
    /* pieces reordered, one of them unused: its gradient must be zeros */
    ts_tensor *p[4] = {0};
    int count =
        cur_join == J_SPLIT ? ts_split(in[0], 2, a->dim, p, 4) : ts_chunk(in[0], 3, a->dim, p, 4);
    if (count < 3) return NULL;
    ts_tensor *use[2] = {p[2], p[0]};
    return ts_cat(use, 2, a->dim);
}

static void test_join(ts_device dev) {
    ts_scope_begin();
    for (int dim = -1; dim < 2; dim++) {
        ts_shape sa = TS_SHAPE(2, 3), sb = TS_SHAPE(2, 3);
        if (dim != 1 && dim != -1)
            sb.dims[dim] = 4;
        else
            sb.dims[1] = 1;
        ts_tensor *in[3] = {leaf(sa, dev, 0), leaf(sb, dev, 1), leaf(sa, dev, 0)};
        ts_set_requires_grad(in[2], false);
        args a = {.dim = dim};
        cur_join = J_CAT;
        gc("cat", dev, f_join, &a, in, 3);
    }
    /* legacy empty [0] tensors are skipped by cat and get an empty gradient */
    ts_tensor *e[3] = {leaf(TS_SHAPE(2, 2), dev, 0), leaf(TS_SHAPE(0), dev, 0),
                       leaf(TS_SHAPE(2, 2), dev, 0)};
    args a1 = {.dim = 1};
    gc("cat with a legacy empty", dev, f_join, &a1, e, 3);
    for (int dim = -1; dim < 3; dim++) {
        ts_tensor *in[3] = {leaf(TS_SHAPE(2, 3), dev, 0), leaf(TS_SHAPE(2, 3), dev, 1),
                            leaf(TS_SHAPE(2, 3), dev, 0)};
        args a = {.dim = dim};
        cur_join = J_STACK;
        gc("stack", dev, f_join, &a, in, 3);
    }
    ts_tensor *x = leaf(TS_SHAPE(5, 6), dev, 0), *xt = leaf(TS_SHAPE(5, 6), dev, 1);
    for (int dim = 0; dim < 2; dim++) {
        args a = {.dim = dim};
        cur_join = J_SPLIT;
        gc("split", dev, f_join, &a, &x, 1);
        gc("split non-contiguous", dev, f_join, &a, &xt, 1);
        cur_join = J_CHUNK;
        gc("chunk", dev, f_join, &a, &x, 1);
    }
    ts_scope_end();
    CHECK_OK();
}

/* ------------------------------------------------------------------ graph behaviour */
static void test_names(ts_device dev) {
    ts_scope_begin();
    ts_tensor *x = leaf(TS_SHAPE(3, 4), dev, 0), *v = leaf(TS_SHAPE(4), dev, 0);
    ts_tensor *w = leaf(TS_SHAPE(4, 2), dev, 0), *b3 = leaf(TS_SHAPE(2, 3, 4), dev, 0);
    ts_tensor *ix = ts_tensor_i64(TS_SHAPE(3, 1), (int64_t[]){0, 1, 2}, (ts_opts){.device = dev});
    ts_tensor *pair[2] = {x, x}, *pieces[2];
    const struct {
        ts_tensor *t;
        const char *name;
    } rows[] = {
        {ts_sum(x), "SumBackward0"},
        {ts_sum_dim(x, 1, false), "SumBackward1"},
        {ts_sum_dims(x, TS_DIMS(0, 1), false), "SumBackward1"},
        {ts_mean(x), "MeanBackward0"},
        {ts_mean_dim(x, 0, true), "MeanBackward1"},
        {ts_prod(x), "ProdBackward0"},
        {ts_prod_dim(x, 1, false), "ProdBackward1"},
        {ts_max(x), "MaxBackward1"},
        {ts_max_dim(x, 1, false, NULL), "MaxBackward0"},
        {ts_min(x), "MinBackward1"},
        {ts_min_dim(x, 1, false, NULL), "MinBackward0"},
        {ts_amax_dim(x, 1, false), "AmaxBackward0"},
        {ts_amin_dims(x, TS_DIMS(0), false), "AminBackward0"},
        {ts_var(x), "VarBackward0"},
        {ts_var_dim(x, 1, false, 0), "VarBackward0"},
        {ts_std(x), "StdBackward0"},
        {ts_logsumexp_dim(x, 1, false), "LogsumexpBackward0"},
        {ts_softmax(x, 1), "SoftmaxBackward0"},
        {ts_log_softmax(x, 1), "LogSoftmaxBackward0"},
        {ts_mm(x, w), "MmBackward0"},
        {ts_bmm(b3, ts_transpose(b3, 1, 2)), "BmmBackward0"},
        {ts_matmul(x, w), "MmBackward0"},
        {ts_matmul(v, v), "DotBackward0"},
        {ts_matmul(x, v), "MvBackward0"},
        {ts_matmul(v, w), "SqueezeBackward3"},
        {ts_matmul(b3, w), "UnsafeViewBackward0"},
        {ts_matmul(ts_t(x), b3), "CloneBackward0"},
        {ts_index_select(x, 0,
                         ts_tensor_i64(TS_SHAPE(1), (int64_t[]){1}, (ts_opts){.device = dev})),
         "IndexSelectBackward0"},
        {ts_gather(x, 1, ix), "GatherBackward0"},
        {ts_scatter_add(x, 1, ix, x), "ScatterAddBackward0"},
        {ts_cat(pair, 2, 0), "CatBackward0"},
        {ts_stack(pair, 2, 0), "StackBackward0"},
        {ts_split(x, 2, 0, pieces, 2) == 2 ? pieces[1] : NULL, "SplitBackward0"},
        {ts_chunk(x, 2, 1, pieces, 2) == 2 ? pieces[0] : NULL, "SplitBackward0"},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        CHECK(rows[i].t && ts_requires_grad(rows[i].t));
        CHECK_STREQ(ts_grad_fn_name(rows[i].t), rows[i].name);
    }
    /* not differentiable */
    ts_tensor *am = ts_argmax_dim(x, 1, false), *oh = ts_one_hot(ts_argmax(x), 12);
    CHECK(am && !ts_requires_grad(am) && ts_grad_fn_name(am) == NULL);
    CHECK(oh && !ts_requires_grad(oh));
    /* no graph without a grad-requiring input, nor under no_grad */
    ts_tensor *c = ts_tensor_f64(TS_SHAPE(2), (double[]){1, 2}, (ts_opts){.device = dev});
    CHECK(!ts_requires_grad(ts_sum(c)) && !ts_requires_grad(ts_softmax(c, 0)));
    ts_no_grad_begin();
    ts_tensor *ng = ts_matmul(x, w);
    CHECK(ng && !ts_requires_grad(ng) && ts_grad_fn_name(ng) == NULL);
    ts_no_grad_end();
    ts_scope_end();
    CHECK_OK();
}

static void test_graph(ts_device dev) {
    ts_scope_begin();
    /* softmax saves its output: changing it in place makes backward refuse */
    ts_tensor *x = leaf(TS_SHAPE(4), dev, 0);
    ts_tensor *y = ts_softmax(x, 0), *z = ts_sum(y);
    ts_tensor *ix = ts_tensor_i64(TS_SHAPE(1), (int64_t[]){0}, (ts_opts){.device = dev});
    CHECK(
        ts_scatter_add_(y, 0, ix, ts_ones(TS_SHAPE(1), (ts_opts){.dtype = TS_F64, .device = dev})));
    CHECK_STREQ(ts_grad_fn_name(y), "ScatterAddBackward0");
    ts_backward(z);
    CHECK_ERR(TS_ERR_STATE);
    /* in place on a leaf that requires grad */
    CHECK(!ts_scatter_add_(x, 0, ix, x));
    CHECK_ERR(TS_ERR_STATE);

    /* a split piece that is never used: the other pieces still get theirs, zeros for it */
    ts_tensor *t = leaf_from(TS_SHAPE(5), (double[]){1, 2, 3, 4, 5}, dev), *p[3];
    CHECK_EQ(ts_split(t, 2, 0, p, 3), 3);
    ts_backward(ts_sum(p[1]));
    check_values("split piece gradient", ts_grad(t), (double[]){0, 0, 1, 1, 0}, 5);
    ts_set_grad(t, NULL);
    /* only some pieces written out (max_out smaller than the count) */
    CHECK_EQ(ts_chunk(t, 5, 0, p, 2), 5);
    ts_backward(ts_sum(p[1]));
    check_values("chunk piece gradient", ts_grad(t), (double[]){0, 1, 0, 0, 0}, 5);

    /* gradients reach a cpu leaf through a device op chain */
    ts_tensor *a = leaf_from(TS_SHAPE(2, 2), (double[]){1, 2, 3, 4}, ts_cpu());
    ts_tensor *ad = ts_to(a, dev);
    ts_backward(ts_sum(ts_softmax(ts_matmul(ad, ad), 1)));
    CHECK(ts_grad(a) && ts_device_equal(ts_device_of(ts_grad(a)), ts_cpu()));
    ts_scope_end();
    CHECK_OK();
}

int main(void) {
    ts_device devs[TS_TEST_MAX_DEVICES];
    int ndev = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    for (int i = 0; i < ndev; i++) {
        printf("device %s\n", ts_device_str(devs[i]));
        test_reductions(devs[i]);
        test_prod_zeros(devs[i]);
        test_ties(devs[i]);
        test_exact(devs[i]);
        test_matmul(devs[i]);
        test_index(devs[i]);
        test_join(devs[i]);
        test_names(devs[i]);
        test_graph(devs[i]);
    }
    return ts_test_finish();
}
