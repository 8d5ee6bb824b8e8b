/* test_autograd_inplace_view.c — in-place ops on views of tensors in the graph (PyTorch's
 * CopySlices, src/autograd/copy_slices.c): the gradients of functions that write through views
 * (slices, select, transpose, permute, view, diagonal, as_strided, views of views, writes through
 * the base after a view was taken) against f64 central differences of the same function
 * (ts_gradcheck) and against the same function written without in-place ops; second derivatives
 * by a gradcheck of the gradient; PyTorch's refusals; cpu, sim:0 (and cuda:0 where there is one);
 * no tensor leaks. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "host_values.h"
#include "ts_test.h"

static ts_device g_dev;

static ts_opts on_dev(bool rg) {
    return (ts_opts){.dtype = TS_F64, .device = g_dev, .requires_grad = rg};
}

/* n values in (0.2, 1.2), distinct, deterministic */
static ts_tensor *vals(ts_shape s, double seed, bool rg) {
    int64_t n = 1;
    for (int d = 0; d < s.ndim; d++) n *= s.dims[d];
    double *h = malloc((size_t)n * sizeof *h);
    for (int64_t i = 0; i < n; i++) h[i] = 0.2 + fmod(0.37 * (double)i + seed * 0.61, 1.0);
    ts_tensor *t = ts_tensor_f64(s, h, on_dev(rg));
    free(h);
    return t;
}

static double *host(ts_tensor *t) {
    int64_t n = ts_numel(t);
    double *h = malloc((size_t)(n ? n : 1) * sizeof *h);
    ts_scope_begin();
    ts_copy_to_host(ts_to_dtype(t, TS_F64), h, (size_t)n * sizeof *h);
    ts_scope_end();
    return h;
}

static bool gradcheck(const char *what, ts_gradcheck_fn f, ts_tensor *const *ins, int n) {
    bool ok = ts_gradcheck(f, NULL, ins, n, (ts_gradcheck_opts){0});
    if (!ok)
        fprintf(stderr, "gradcheck failed: %s on %s: %s\n", what, ts_device_str(g_dev),
                ts_test_error_str());
    ts_error_clear();
    return ok;
}

/* ------------------------------------------------------------------ the functions */
/* ghostnet's x[:, :c].add_(y) and a multiply through the same view */
static ts_tensor *f_narrow_add_mul(ts_tensor *const *in, int n, void *ctx) {
    ts_tensor *b = ts_mul(in[0], in[0]);
    ts_tensor *v = ts_narrow(b, 1, 0, 2);
    ts_add_(v, in[1]);
    ts_mul_(v, in[1]);
    return ts_mul(b, b);
}

/* buf = zeros; buf[:, 1:3] = 2 x; buf[:, 3:] = y (buf requires no grad before) */
static ts_tensor *f_buffer_copy(ts_tensor *const *in, int n, void *ctx) {
    ts_tensor *buf = ts_zeros(TS_SHAPE(2, 4, 3), on_dev(false));
    ts_copy_(ts_narrow(buf, 1, 1, 2), ts_mul_scalar(in[0], 2));
    ts_copy_(ts_narrow(buf, 1, 3, 1), in[1]);
    return ts_mul(buf, ts_add_scalar(buf, 1));
}

/* out.narrow(1, 0, 2).copy_(sin y) over a base that requires grad: the region's old values get
 * no gradient */
static ts_tensor *f_copy_over(ts_tensor *const *in, int n, void *ctx) {
    ts_tensor *b = ts_mul(in[0], in[0]);
    ts_copy_(ts_narrow(b, 1, 0, 2), ts_sin(in[1]));
    return ts_mul(b, b);
}

/* select, then the view used after the write */
static ts_tensor *f_select_mul(ts_tensor *const *in, int n, void *ctx) {
    ts_tensor *b = ts_mul(in[0], ts_add_scalar(in[0], 0.5)); /* saves x, not b */
    ts_tensor *v = ts_select(b, 0, 1);
    ts_mul_(v, in[1]);
    return ts_add(ts_mul(b, b), ts_sum(ts_mul(v, v)));
}

/* fill_ and zero_ of slices (one with a step) */
static ts_tensor *f_fill(ts_tensor *const *in, int n, void *ctx) {
    ts_tensor *b = ts_mul(in[0], in[0]);
    ts_fill_(ts_slice(b, 1, 0, 4, 2), 0.5);
    ts_zero_(ts_select(b, 0, 2));
    return ts_mul(b, b);
}

/* masked_fill_ through a transpose */
static ts_tensor *f_transpose_masked(ts_tensor *const *in, int n, void *ctx) {
    ts_tensor *b = ts_mul(in[0], ts_add_scalar(in[0], 1));
    ts_tensor *t = ts_transpose(b, 0, 1); /* [4, 3] */
    const double m[12] = {1, 0, 0, 0, 1, 0, 1, 1, 0, 0, 0, 1};
    ts_tensor *mask = ts_ne_scalar(ts_tensor_f64(TS_SHAPE(4, 3), m, on_dev(false)), 0);
    ts_masked_fill_(t, mask, 0.5);
    return ts_mul(t, t);
}

/* clamp_ through a permute (the values stay away from the bounds) */
static ts_tensor *f_permute_clamp(ts_tensor *const *in, int n, void *ctx) {
    ts_tensor *b = ts_mul(in[0], in[0]);
    ts_tensor *p = ts_permute(b, TS_DIMS(2, 0, 1));
    ts_clamp_(p, 0.3, 0.95); /* b = 1.0 somewhere: a kink */
    ts_tensor *q = ts_narrow(p, 0, 1, 2);
    ts_clamp_tensor_(q, NULL, ts_mul_scalar(in[1], 1.2));
    return ts_mul(b, b);
}

/* the activations in place through view and reshape views; each saves its output, so each is the
 * last write to its base (a later one would change what it saved, which backward refuses) */
static ts_tensor *f_activations(ts_tensor *const *in, int n, void *ctx) {
    ts_tensor *b = ts_mul_scalar(in[0], 3), *c = ts_mul(in[0], in[0]), *d = ts_add_scalar(in[0], 1);
    ts_sigmoid_(ts_narrow(ts_view(b, TS_SHAPE(3, 4)), 0, 0, 2));
    ts_relu_(ts_sub_scalar_(ts_narrow(ts_reshape(c, TS_SHAPE(12)), 0, 6, 6), 0.5));
    ts_tanh_(ts_select(ts_view(d, TS_SHAPE(3, 4)), 1, 3));
    return ts_mul(ts_mul(b, c), d);
}

/* a diagonal multiplied in place */
static ts_tensor *f_diagonal(ts_tensor *const *in, int n, void *ctx) {
    ts_tensor *b = ts_mul(in[0], in[0]);
    ts_mul_(ts_diagonal(b, 0, 0, 1), in[1]);
    ts_add_(ts_diagonal(b, 1, 0, 1), ts_narrow(in[1], 0, 0, 3));
    return ts_mul(b, b);
}

/* a view of a view written, the base written after, the first view used after both */
static ts_tensor *f_chain(ts_tensor *const *in, int n, void *ctx) {
    ts_tensor *b = ts_mul(in[0], in[0]);   /* [4, 5] */
    ts_tensor *v1 = ts_narrow(b, 0, 1, 2); /* [2, 5] */
    ts_tensor *v2 = ts_select(v1, 1, 2);   /* [2] */
    ts_mul_(v2, in[1]);
    ts_mul_scalar_(b, 2);
    ts_tensor *v3 = ts_transpose(v1, 0, 1); /* a view of v1 made after the writes */
    ts_add_(ts_narrow(v3, 0, 0, 1), ts_reshape(in[1], TS_SHAPE(1, 2)));
    return ts_add(ts_sum(ts_mul(v1, v1)), ts_mul(b, b));
}

/* several views of one base written in a row, overlapping */
static ts_tensor *f_several(ts_tensor *const *in, int n, void *ctx) {
    ts_tensor *b = ts_mul(in[0], in[0]); /* [3, 4] */
    ts_tensor *a = ts_narrow(b, 1, 0, 1), *c = ts_narrow(b, 1, 2, 2), *z = ts_narrow(b, 1, 1, 2);
    ts_mul_(a, in[1]);
    ts_add_(c, ts_narrow(in[0], 1, 1, 2));
    ts_zero_(z);
    ts_add_(a, ts_narrow(c, 1, 1, 1));
    return ts_mul(b, b);
}

/* as_strided view written */
static ts_tensor *f_as_strided(ts_tensor *const *in, int n, void *ctx) {
    ts_tensor *b = ts_mul(in[0], in[0]); /* [12] */
    ts_tensor *a = ts_as_strided(b, TS_SHAPE(2, 3), (int64_t[]){4, 1}, 1);
    ts_mul_(a, in[1]);
    return ts_mul(b, b);
}

/* the base written after a view was taken; the view used after (its history is the base's) */
static ts_tensor *f_base_after(ts_tensor *const *in, int n, void *ctx) {
    ts_tensor *b = ts_mul(in[0], in[0]); /* [3, 4] */
    ts_tensor *v = ts_narrow(b, 0, 0, 2);
    ts_tensor *w = ts_transpose(b, 0, 1);
    ts_mul_(b, in[1]);
    ts_add_(w, ts_transpose(in[1], 0, 1));
    return ts_add(ts_sum(ts_mul(v, v)), ts_mul(b, b));
}

/* index_copy_ and index_fill_ through a slice */
static ts_tensor *f_index(ts_tensor *const *in, int n, void *ctx) {
    ts_tensor *b = ts_mul(in[0], in[0]); /* [3, 4] */
    ts_tensor *v = ts_narrow(b, 1, 1, 3);
    ts_tensor *idx = ts_tensor_i64(TS_SHAPE(2), (int64_t[]){2, 0}, (ts_opts){.device = g_dev});
    ts_index_copy_(v, 1, idx, ts_narrow(in[1], 1, 0, 2));
    ts_index_fill_(ts_select(b, 0, 1), 0, idx, 0.25);
    return ts_mul(b, b);
}

/* a root whose storage offset is not 0 (an alias of a slice): the span CopySlices works in
 * starts there */
static ts_tensor *f_offset_base(ts_tensor *const *in, int n, void *ctx) {
    ts_tensor *buf = ts_add_scalar(ts_zeros(TS_SHAPE(4, 5), on_dev(false)), 0.5);
    ts_tensor *d = ts_detach(ts_narrow(buf, 0, 1, 2)); /* [2, 5] at offset 5, no known base */
    ts_tensor *v = ts_narrow(ts_view(d, TS_SHAPE(2, 5)), 1, 1, 3);
    ts_mul_(v, in[0]);
    ts_add_(ts_select(d, 1, 4), in[1]);
    return ts_mul(d, d);
}

/* an expanded view (it reaches elements twice) taken before its base is written: its history is
 * derived again through as_strided's summing node */
static ts_tensor *f_expand_stale(ts_tensor *const *in, int n, void *ctx) {
    ts_tensor *b = ts_mul(in[0], in[0]); /* [1, 4] */
    ts_tensor *e = ts_expand(b, TS_SHAPE(3, 4));
    ts_mul_(ts_narrow(b, 1, 1, 2), in[1]);
    return ts_mul(e, ts_add_scalar(e, 1));
}

/* ------------------------------------------------------------------ gradients */
static void gradients(void) {
    ts_scope_begin();
    ts_tensor *x243 = vals(TS_SHAPE(2, 4, 3), 1, true), *y223 = vals(TS_SHAPE(2, 2, 3), 2, true);
    ts_tensor *x34 = vals(TS_SHAPE(3, 4), 3, true), *y4 = vals(TS_SHAPE(4), 4, true);
    ts_tensor *x45 = vals(TS_SHAPE(4, 5), 5, true), *y2 = vals(TS_SHAPE(2), 6, true);
    ts_tensor *y31 = vals(TS_SHAPE(3, 1), 7, true), *x12 = vals(TS_SHAPE(12), 8, true);
    ts_tensor *y23 = vals(TS_SHAPE(2, 3), 9, true), *x44 = vals(TS_SHAPE(4, 4), 10, true);
    ts_tensor *y34 = vals(TS_SHAPE(3, 4), 11, true), *x234 = vals(TS_SHAPE(2, 3, 4), 12, true);
    ts_tensor *y23b = vals(TS_SHAPE(2, 3), 13, true);
    ts_tensor *y22_3 = vals(TS_SHAPE(2, 1, 3), 14, true);
    CHECK(gradcheck("narrow add_ mul_", f_narrow_add_mul, (ts_tensor *[]){x243, y223}, 2));
    CHECK(gradcheck("buffer copy_", f_buffer_copy, (ts_tensor *[]){y223, y22_3}, 2));
    CHECK(gradcheck("copy_ over", f_copy_over, (ts_tensor *[]){x243, y223}, 2));
    CHECK(gradcheck("select mul_", f_select_mul, (ts_tensor *[]){x34, y4}, 2));
    CHECK(gradcheck("fill_ zero_", f_fill, (ts_tensor *[]){x34}, 1));
    CHECK(gradcheck("transpose masked_fill_", f_transpose_masked, (ts_tensor *[]){x34}, 1));
    CHECK(gradcheck("permute clamp_", f_permute_clamp, (ts_tensor *[]){x234, y23b}, 2));
    CHECK(gradcheck("activations", f_activations, (ts_tensor *[]){x12}, 1));
    CHECK(gradcheck("diagonal", f_diagonal, (ts_tensor *[]){x44, y4}, 2));
    CHECK(gradcheck("chain", f_chain, (ts_tensor *[]){x45, y2}, 2));
    CHECK(gradcheck("several views", f_several, (ts_tensor *[]){x34, y31}, 2));
    CHECK(gradcheck("as_strided", f_as_strided, (ts_tensor *[]){x12, y23}, 2));
    CHECK(gradcheck("base after view", f_base_after, (ts_tensor *[]){x34, y34}, 2));
    CHECK(gradcheck("index_copy_ index_fill_", f_index, (ts_tensor *[]){x34, y34}, 2));
    CHECK(gradcheck("base at an offset", f_offset_base, (ts_tensor *[]){y23, y2}, 2));
    ts_tensor *x14 = vals(TS_SHAPE(1, 4), 15, true), *y12 = vals(TS_SHAPE(1, 2), 16, true);
    CHECK(gradcheck("expanded view made stale", f_expand_stale, (ts_tensor *[]){x14, y12}, 2));
    CHECK_OK();
    ts_scope_end();
}

/* x[:, :2].add_(y); loss = sum(b * c) against the same written with cat (no in-place op) */
static void against_out_of_place(void) {
    ts_scope_begin();
    ts_tensor *x = vals(TS_SHAPE(2, 4, 3), 21, true), *y = vals(TS_SHAPE(2, 2, 3), 22, true);
    ts_tensor *c = vals(TS_SHAPE(2, 4, 3), 23, false);
    ts_tensor *b = ts_mul(x, x);
    ts_add_(ts_narrow(b, 1, 0, 2), y);
    CHECK_STREQ(ts_grad_fn_name(b), "CopySlices");
    ts_backward(ts_sum(ts_mul(ts_mul(b, b), c)));
    CHECK_OK();
    double *gx = host(ts_grad(x)), *gy = host(ts_grad(y));
    ts_set_grad(x, NULL), ts_set_grad(y, NULL);
    ts_tensor *xx = ts_mul(x, x);
    ts_tensor *parts[2] = {ts_add(ts_narrow(xx, 1, 0, 2), y), ts_narrow(xx, 1, 2, 2)};
    ts_tensor *r = ts_cat(parts, 2, 1);
    ts_backward(ts_sum(ts_mul(ts_mul(r, r), c)));
    CHECK_OK();
    double *rx = host(ts_grad(x)), *ry = host(ts_grad(y));
    /* the same f64 operations in another order: a few ulps of values below 10 */
    for (int i = 0; i < 24; i++) CHECK_NEAR(gx[i], rx[i], 1e-12);
    for (int i = 0; i < 12; i++) CHECK_NEAR(gy[i], ry[i], 1e-12);
    free(gx), free(gy), free(rx), free(ry);
    ts_scope_end();
}

/* grad_fn names, versions, requires_grad of the base and of views taken before */
static void history_shape(void) {
    ts_scope_begin();
    ts_tensor *x = vals(TS_SHAPE(3, 2), 31, true);
    ts_tensor *buf = ts_zeros(TS_SHAPE(3, 4), on_dev(false));
    ts_tensor *w = ts_narrow(buf, 1, 2, 2); /* taken before buf joins the graph */
    ts_tensor *v = ts_narrow(buf, 1, 0, 2);
    CHECK(!ts_requires_grad(w) && ts_is_leaf(buf));
    uint64_t v0 = ts_version(buf);
    ts_copy_(v, x);
    CHECK_OK();
    CHECK(ts_version(buf) == v0 + 1 && ts_version(w) == ts_version(buf));
    CHECK_STREQ(ts_grad_fn_name(buf), "CopySlices");
    CHECK_STREQ(ts_grad_fn_name(v), "AsStridedBackward0");
    CHECK(ts_requires_grad(buf) && !ts_is_leaf(buf));
    CHECK(ts_requires_grad(w)); /* its base joined the graph */
    CHECK_STREQ(ts_grad_fn_name(w), "AsStridedBackward0");
    /* under no_grad nothing is recorded */
    ts_tensor *b = ts_mul(x, x);
    ts_tensor *s = ts_select(b, 0, 0);
    ts_no_grad_begin();
    CHECK(ts_add_scalar_(s, 1) != NULL);
    ts_no_grad_end();
    CHECK_STREQ(ts_grad_fn_name(b), "MulBackward0");
    CHECK_OK();
    ts_scope_end();
}

/* ------------------------------------------------------------------ refusals */
static void refusals(void) {
    ts_scope_begin();
    ts_tensor *x = vals(TS_SHAPE(4, 4), 41, true), *y = vals(TS_SHAPE(4, 2), 42, true);
    /* a view of a leaf */
    CHECK(ts_add_scalar_(ts_narrow(x, 1, 0, 2), 1) == NULL);
    CHECK_ERR_HAS(TS_ERR_STATE, "add_scalar_: a view of a leaf Variable that requires grad is "
                                "being used in an in-place operation.");
    CHECK(ts_copy_(ts_select(x, 0, 0), ts_ones(TS_SHAPE(4), on_dev(false))) == NULL);
    CHECK_ERR_HAS(TS_ERR_STATE, "a view of a leaf Variable that requires grad");
    /* a view made under no_grad, written with grad mode on */
    ts_tensor *b = ts_mul(x, x);
    ts_no_grad_begin();
    ts_tensor *ng = ts_narrow(b, 1, 0, 2);
    ts_no_grad_end();
    CHECK(ts_mul_scalar_(ng, 2) == NULL);
    CHECK_ERR_HAS(TS_ERR_STATE,
                  "mul_scalar_: A view was created in no_grad mode and is being modified inplace "
                  "with grad mode enabled. Given that this use case is ambiguous and error-prone, "
                  "it is forbidden.");
    ts_tensor *z = ts_zeros(TS_SHAPE(4, 4), on_dev(false));
    ts_no_grad_begin();
    ts_tensor *zng = ts_narrow(z, 1, 0, 2);
    ts_no_grad_end();
    CHECK(ts_copy_(zng, y) == NULL); /* the operand requires grad */
    CHECK_ERR_HAS(TS_ERR_STATE, "A view was created in no_grad mode");
    CHECK(ts_copy_(zng, ts_ones(TS_SHAPE(4, 2), on_dev(false))) != NULL); /* nothing recorded */
    /* outputs of split and chunk */
    ts_tensor *pieces[4];
    CHECK_EQ(ts_split(b, 2, 1, pieces, 4), 2);
    CHECK(ts_mul_scalar_(pieces[1], 2) == NULL);
    CHECK_ERR_HAS(TS_ERR_STATE,
                  "mul_scalar_: Output 1 of Split is a view and is being modified inplace. This "
                  "view is the output of a function that returns multiple views. Such functions "
                  "do not allow the output views to be modified inplace. You should replace the "
                  "inplace operation by an out-of-place one.");
    CHECK_EQ(ts_chunk(b, 2, 0, pieces, 4), 2);
    CHECK(ts_add_(ts_narrow(pieces[0], 1, 0, 2), y) == NULL); /* a view of one too */
    CHECK_ERR_HAS(TS_ERR_STATE, "Output 0 of Split is a view");
    CHECK_EQ(ts_unbind(b, 1, pieces, 4), 4);
    CHECK_STREQ(ts_grad_fn_name(pieces[2]), "SelectBackward0");
    CHECK(ts_add_(pieces[2], ts_select(y, 1, 0)) == NULL);
    CHECK_ERR_HAS(TS_ERR_STATE,
                  "add_: Output 2 of Unbind is a view and is being modified inplace.");
    CHECK_EQ(ts_split_with_sizes(b, (int64_t[]){1, 3}, 2, 0, pieces, 4), 2);
    CHECK(ts_zero_(pieces[1]) == NULL);
    CHECK_ERR_HAS(TS_ERR_STATE, "Output 1 of SplitWithSizes is a view");
    CHECK_EQ(ts_split(z, 2, 1, pieces, 4), 2);
    CHECK(ts_copy_(pieces[0], y) == NULL);
    CHECK_ERR_HAS(TS_ERR_STATE,
                  "A view was created in no_grad mode and is being modified inplace with grad "
                  "mode enabled. This view is the output of a function that returns multiple "
                  "views.");
    CHECK(ts_add_scalar_(pieces[0], 1) != NULL); /* nothing requires grad: allowed */
    ts_no_grad_begin();
    CHECK_EQ(ts_split(b, 2, 1, pieces, 4), 2);
    ts_no_grad_end();
    CHECK_EQ(ts_tensor_split_sections(b, 2, 1, pieces, 4), 2); /* slices: allowed */
    CHECK(ts_mul_scalar_(pieces[0], 2) != NULL);
    CHECK_OK();
    /* a saved view changed by a write through its base */
    ts_tensor *c = ts_mul(x, x);
    ts_tensor *v = ts_select(c, 0, 1);
    ts_tensor *loss = ts_sum(ts_mul(v, v));
    ts_add_scalar_(c, 1);
    CHECK_OK();
    ts_backward(loss);
    CHECK_ERR_HAS(TS_ERR_STATE, "modified by an inplace operation");
    /* out[:, :2] = out[:, :2] * gate: the product saved the view it then overwrote (PyTorch
     * refuses the backward too); the saved view must not keep its base, whose history now holds
     * the product's node (a cycle: main's count of live tensors) */
    for (int pass = 0; pass < 2; pass++) { /* the second graph is dropped without a backward */
        ts_scope_begin();
        ts_tensor *out = ts_mul(x, x);
        ts_tensor *head = ts_narrow(out, 1, 0, 2);
        ts_copy_(head, ts_mul(head, y));
        CHECK_OK();
        if (pass == 0) {
            ts_backward(ts_sum(out));
            CHECK_ERR_HAS(TS_ERR_STATE, "modified by an inplace operation");
        }
        ts_scope_end();
    }
    ts_scope_end();
}

/* ------------------------------------------------------------------ second derivatives */
/* the gradient of sum(b^2), b = x^2 with b[1:3] += y^2, with the graph of the gradient */
static ts_tensor *f_grad(ts_tensor *const *in, int n, void *ctx) {
    const bool was_off = !ts_grad_enabled();
    if (was_off) ts_no_grad_end(); /* the forward is differentiated inside */
    ts_tensor *b = ts_mul(in[0], in[0]);
    ts_add_(ts_narrow(b, 0, 1, 2), ts_mul(in[1], in[1]));
    ts_tensor *loss = ts_sum(ts_mul(ts_mul(b, b), b));
    ts_tensor *g[2] = {NULL, NULL};
    ts_autograd_grad(&loss, NULL, 1, in, 2, (ts_grad_opts){.create_graph = !was_off}, g);
    ts_tensor *r = g[0] && g[1] ? ts_cat(g, 2, 0) : NULL;
    if (was_off) ts_no_grad_begin();
    return r;
}

static void double_backward(void) {
    ts_scope_begin();
    ts_tensor *x = vals(TS_SHAPE(4), 51, true), *y = vals(TS_SHAPE(2), 52, true);
    CHECK(gradcheck("double backward", f_grad, (ts_tensor *[]){x, y}, 2));
    /* mul_ saves a detached copy of the old values: its gradient is right, and a second backward
     * through it is refused, never a second derivative missing a term */
    ts_tensor *b = ts_mul(x, x);
    ts_mul_(ts_narrow(b, 0, 1, 2), y);
    ts_tensor *loss = ts_sum(ts_mul(b, b)), *g[2] = {NULL, NULL};
    CHECK_EQ(ts_autograd_grad(&loss, NULL, 1, (ts_tensor *[]){x, y}, 2,
                              (ts_grad_opts){.create_graph = true}, g),
             TS_OK);
    CHECK(g[1] != NULL);
    if (g[1]) ts_backward(ts_sum(g[1]));
    CHECK_ERR_HAS(TS_ERR_UNSUPPORTED, "cannot be differentiated again");
    ts_scope_end();
}

/* A leaf that is a view (reshape of a plain tensor, then requires_grad) saved by an op: a double
 * backward must reach the leaf itself. d/dx of sum(x^3) is 3x^2 and H v = 6 x v. */
static void saved_leaf_view_double_backward(void) {
    ts_scope_begin();
    const double xv[6] = {0.5, -1.25, 2.0, 0.75, -0.5, 1.5}, vv[6] = {1, -2, 0.5, 3, -1, 0.25};
    ts_tensor *x =
        ts_reshape(ts_tensor_f64(TS_SHAPE(6), xv, (ts_opts){.device = g_dev}), TS_SHAPE(2, 3));
    ts_set_requires_grad(x, true);
    ts_tensor *y = ts_sum(ts_mul(ts_mul(x, x), x)), *g = NULL, *h = NULL;
    CHECK_EQ(ts_autograd_grad(&y, NULL, 1, &x, 1, (ts_grad_opts){.create_graph = true}, &g), TS_OK);
    ts_tensor *v =
        ts_reshape(ts_tensor_f64(TS_SHAPE(6), vv, (ts_opts){.device = g_dev}), TS_SHAPE(2, 3));
    ts_tensor *gv = ts_sum(ts_mul(g, v));
    CHECK_EQ(ts_autograd_grad(&gv, NULL, 1, &x, 1, (ts_grad_opts){0}, &h), TS_OK);
    double hv[6] = {0};
    CHECK(h && ts_test_read_f64(h, hv, 6));
    for (int i = 0; i < 6; i++) CHECK(fabs(hv[i] - 6 * xv[i] * vv[i]) <= 1e-12);
    ts_scope_end();
}

int main(void) {
    ts_mem_stats before, after;
    ts_memory_stats(ts_sim(0), &before);
    ts_device devs[TS_TEST_MAX_DEVICES]; /* cpu, sim:0, cuda:0 where there is one */
    const int ndev = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    for (int i = 0; i < ndev; i++) {
        g_dev = devs[i];
        gradients();
        against_out_of_place();
        history_shape();
        double_backward();
        saved_leaf_view_double_backward();
    }
    g_dev = ts_cpu();
    refusals();
    ts_memory_stats(ts_sim(0), &after);
    CHECK_EQ(after.live_tensors, before.live_tensors);
    CHECK_EQ(ts_memory_stats(ts_cpu(), &after), TS_OK);
    CHECK_EQ(after.live_tensors, 0);
    return ts_test_finish();
}
