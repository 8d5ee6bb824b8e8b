/* test_custom_function.c — custom autograd functions (src/autograd/custom_function.c,
 * include/tessera/custom_function.h) on cpu and sim:0: a callback backward of y = x^3 * w (w
 * broadcast over x's rows) passes the f64 gradient check and equals the analytic gradient; the
 * callback's state is freed exactly once (after backward, with the results, without a graph, on
 * failure); missing output gradients come as zeros or NULL; non-differentiable and dirty outputs;
 * retain_graph; wrong-shaped, wrong-device and failing backwards give errors naming the function;
 * the graph walk behind grad_fn.next_functions. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tessera.h"
#include "tessera/custom_function.h"
#include "ts_test.h"

typedef enum { BW_OK, BW_WRONG_SHAPE, BW_WRONG_DEVICE, BW_FAIL, BW_FAIL_SILENT } bw_mode;

typedef struct cube_ctx {
    ts_tensor *x, *w; /* saved inputs (detached, retained) */
    bw_mode mode;
    int *frees;   /* incremented by the free function */
    int *calls;   /* backward calls */
    bool *gnull;  /* set when grad_outputs[1] arrived NULL */
    double *g1_0; /* grad_outputs[1]'s first element when it arrived */
} cube_ctx;

static void cube_free(void *p) {
    cube_ctx *c = p;
    ts_release(c->x), ts_release(c->w);
    (*c->frees)++;
    free(c);
}

/* y0 = x^3 * w, y1 = x * 2 (second output, often unused) */
static ts_status cube_backward(void *p, ts_tensor *const *g, int n_out, ts_tensor **gi, int n_in) {
    cube_ctx *c = p;
    (*c->calls)++;
    if (n_out != 2 || n_in != 2) return ts_error_set(TS_ERR_ARG, "cube: counts %d %d", n_out, n_in);
    if (c->gnull) *c->gnull = g[1] == NULL;
    if (c->g1_0 && g[1]) {
        double v[1];
        ts_tensor *h = ts_to_dtype(ts_to(ts_flatten(g[1], 0, -1), ts_cpu()), TS_F64);
        if (ts_copy_to_host(ts_narrow(h, 0, 0, 1), v, sizeof v) == TS_OK) *c->g1_0 = v[0];
    }
    if (c->mode == BW_FAIL) return ts_error_set(TS_ERR_STATE, "cube: backward refused");
    if (c->mode == BW_FAIL_SILENT) return TS_ERR_STATE;
    ts_tensor *x2 = ts_mul(c->x, c->x);
    ts_tensor *gx = ts_mul(ts_mul_scalar(ts_mul(x2, c->w), 3), g[0]);
    if (g[1]) gx = ts_add(gx, ts_mul_scalar(g[1], 2));
    gi[0] = gx;
    gi[1] = ts_mul(ts_mul(x2, c->x), g[0]); /* [2, 3]: the engine sums it to w's [3] */
    if (c->mode == BW_WRONG_SHAPE) gi[0] = ts_reshape(gx, TS_SHAPE(3, 2));
    if (c->mode == BW_WRONG_DEVICE) gi[0] = ts_to(gx, ts_cpu());
    return TS_OK;
}

typedef struct apply_opts {
    bw_mode mode;
    int *frees, *calls;
    bool *gnull;
    double *g1_0;
    bool keep_undefined;
    unsigned flags1; /* output 1's flags */
} apply_opts;

/* the custom function: forward under no_grad, then ts_custom_function_apply */
static ts_status cube(ts_tensor *x, ts_tensor *w, apply_opts o, ts_tensor **y0, ts_tensor **y1) {
    cube_ctx *c = calloc(1, sizeof *c);
    if (!c) return TS_ERR_OOM;
    ts_no_grad_begin();
    ts_tensor *out[2] = {ts_mul(ts_mul(ts_mul(x, x), x), w), ts_mul_scalar(x, 2)};
    c->x = ts_retain(ts_detach(x)), c->w = ts_retain(ts_detach(w));
    ts_no_grad_end();
    c->mode = o.mode, c->frees = o.frees, c->calls = o.calls, c->gnull = o.gnull, c->g1_0 = o.g1_0;
    const unsigned flags[2] = {0, o.flags1};
    ts_custom_function f = {.name = "CubeBackward",
                            .backward = cube_backward,
                            .ctx = c,
                            .ctx_free = cube_free,
                            .output_flags = flags,
                            .keep_undefined_grads = o.keep_undefined};
    ts_tensor *in[2] = {x, w}, *res[2];
    ts_status st = ts_custom_function_apply(&f, in, 2, out, 2, res);
    *y0 = res[0];
    if (y1) *y1 = res[1];
    return st;
}

static ts_tensor *leaf(ts_shape s, const double *v, ts_device d) {
    ts_tensor *t = ts_detach(ts_to(ts_tensor_f64(s, v, (ts_opts){0}), d));
    ts_set_requires_grad(t, true);
    return t;
}

static bool host(ts_tensor *t, double *v, int64_t n) {
    ts_tensor *h = t ? ts_to_dtype(ts_to(t, ts_cpu()), TS_F64) : NULL;
    return h && ts_numel(h) == n &&
           ts_copy_to_host(ts_contiguous(h), v, (size_t)n * sizeof *v) == TS_OK;
}

static const double XV[6] = {0.5, -1.25, 0.75, 2.0, -0.3, 1.1}, WV[3] = {1.5, -0.5, 0.25},
                    RV[6] = {0.2, -1.0, 0.7, 0.4, 1.3, -0.6};

static int g_frees, g_calls;

static ts_tensor *gc_fn(ts_tensor *const *in, int n, void *ctx) {
    (void)n;
    ts_device d = *(ts_device *)ctx;
    ts_tensor *y0 = NULL, *y1 = NULL;
    apply_opts o = {.frees = &g_frees, .calls = &g_calls};
    if (cube(ts_to(in[0], d), ts_to(in[1], d), o, &y0, &y1) != TS_OK) return NULL;
    return ts_to(ts_add(y0, ts_sum(y1)), ts_cpu());
}

static void gradcheck_and_analytic(ts_device d) {
    ts_scope_begin();
    /* the f64 gradient check (cpu leaves, the function on d) */
    ts_tensor *xc = leaf(TS_SHAPE(2, 3), XV, ts_cpu()), *wc = leaf(TS_SHAPE(3), WV, ts_cpu());
    ts_tensor *ins[2] = {xc, wc};
    g_frees = g_calls = 0;
    const bool ok = ts_gradcheck(gc_fn, &d, ins, 2, (ts_gradcheck_opts){0});
    printf("gradcheck custom cube on %s: %s (%d backward calls, %d frees)\n", ts_device_str(d),
           ok ? "ok" : "FAILED", g_calls, g_frees);
    CHECK(ok);
    CHECK(g_calls > 0);
    ts_error_clear();

    /* analytic: loss = sum(y0 * r): dx = 3 x^2 w r, dw = sum_rows x^3 r */
    int frees = 0, calls = 0;
    ts_tensor *x = leaf(TS_SHAPE(2, 3), XV, d), *w = leaf(TS_SHAPE(3), WV, d);
    ts_tensor *r = ts_to(ts_tensor_f64(TS_SHAPE(2, 3), RV, (ts_opts){0}), d), *y0;
    CHECK_EQ(cube(x, w, (apply_opts){.frees = &frees, .calls = &calls}, &y0, NULL), TS_OK);
    CHECK(ts_requires_grad(y0));
    CHECK_STREQ(ts_grad_fn_name(y0), "CubeBackward");
    ts_backward(ts_sum(ts_mul(y0, r)));
    CHECK_EQ(ts_error(), TS_OK);
    CHECK_EQ(calls, 1);
    CHECK_EQ(frees, 1); /* freed with the graph after a backward without retain_graph */
    double gx[6], gw[3], ew[3] = {0};
    CHECK(host(ts_grad(x), gx, 6) && host(ts_grad(w), gw, 3));
    for (int i = 0; i < 6; i++) {
        const double e = 3 * XV[i] * XV[i] * WV[i % 3] * RV[i];
        CHECK_NEAR(gx[i], e, 1e-14 * (1 + fabs(e)));
        ew[i % 3] += XV[i] * XV[i] * XV[i] * RV[i];
    }
    for (int j = 0; j < 3; j++) CHECK_NEAR(gw[j], ew[j], 1e-13 * (1 + fabs(ew[j])));
    /* a second backward through the freed graph fails */
    ts_backward(ts_sum(ts_mul(y0, r)));
    CHECK_EQ(ts_error(), TS_ERR_STATE);
    ts_error_clear();
    ts_scope_end();
}

static void lifetime_and_grads(ts_device d) {
    ts_scope_begin();
    int frees = 0, calls = 0;
    ts_tensor *x = leaf(TS_SHAPE(2, 3), XV, d), *w = leaf(TS_SHAPE(3), WV, d), *y0, *y1;

    /* no backward: freed when the results go */
    ts_scope_begin();
    CHECK_EQ(cube(x, w, (apply_opts){.frees = &frees, .calls = &calls}, &y0, &y1), TS_OK);
    CHECK_EQ(frees, 0);
    ts_scope_end();
    CHECK_EQ(frees, 1);

    /* no graph (no_grad): the outputs themselves, freed at once */
    frees = 0;
    ts_no_grad_begin();
    CHECK_EQ(cube(x, w, (apply_opts){.frees = &frees, .calls = &calls}, &y0, &y1), TS_OK);
    ts_no_grad_end();
    CHECK_EQ(frees, 1);
    CHECK(y0 && !ts_requires_grad(y0) && !ts_grad_fn_name(y0));

    /* retain_graph: two backwards, gradients doubled, freed once at the end */
    frees = calls = 0;
    ts_scope_begin();
    CHECK_EQ(cube(x, w, (apply_opts){.frees = &frees, .calls = &calls}, &y0, &y1), TS_OK);
    ts_tensor *loss = ts_sum(y0);
    ts_backward_ex(loss, NULL, (ts_backward_opts){.retain_graph = true});
    ts_backward_ex(loss, NULL, (ts_backward_opts){.retain_graph = true});
    CHECK_EQ(calls, 2);
    CHECK_EQ(frees, 0);
    ts_scope_end();
    CHECK_EQ(frees, 1);
    double gx[6];
    CHECK(host(ts_grad(x), gx, 6));
    for (int i = 0; i < 6; i++) CHECK_NEAR(gx[i], 6 * XV[i] * XV[i] * WV[i % 3], 1e-13);
    ts_set_grad(x, NULL), ts_set_grad(w, NULL);

    /* output 1 unused: zeros by default, NULL with keep_undefined_grads */
    bool gnull = false;
    double g1 = -1;
    CHECK_EQ(cube(x, w,
                  (apply_opts){.frees = &frees, .calls = &calls, .gnull = &gnull, .g1_0 = &g1}, &y0,
                  &y1),
             TS_OK);
    ts_backward(ts_sum(y0));
    CHECK(!gnull);
    CHECK_NEAR(g1, 0, 0);
    CHECK_EQ(cube(x, w,
                  (apply_opts){
                      .frees = &frees, .calls = &calls, .gnull = &gnull, .keep_undefined = true},
                  &y0, &y1),
             TS_OK);
    ts_backward(ts_sum(y0));
    CHECK(gnull);
    /* both outputs used: output 1's gradient reaches x (dx += 2 * 1) */
    ts_set_grad(x, NULL);
    CHECK_EQ(cube(x, w, (apply_opts){.frees = &frees, .calls = &calls, .g1_0 = &g1}, &y0, &y1),
             TS_OK);
    ts_backward(ts_add(ts_sum(y0), ts_sum(ts_mul_scalar(y1, 3))));
    CHECK_NEAR(g1, 3, 0);
    CHECK(host(ts_grad(x), gx, 6));
    for (int i = 0; i < 6; i++) CHECK_NEAR(gx[i], 3 * XV[i] * XV[i] * WV[i % 3] + 6, 1e-13);

    /* a non-differentiable output does not require grad */
    CHECK_EQ(cube(x, w,
                  (apply_opts){
                      .frees = &frees, .calls = &calls, .flags1 = TS_CUSTOM_OUT_NON_DIFFERENTIABLE},
                  &y0, &y1),
             TS_OK);
    CHECK(ts_requires_grad(y0) && !ts_requires_grad(y1));
    CHECK_EQ(ts_error(), TS_OK);
    ts_error_clear();
    ts_scope_end();
}

static void errors(ts_device d) {
    ts_scope_begin();
    int frees = 0, calls = 0;
    ts_tensor *x = leaf(TS_SHAPE(2, 3), XV, d), *w = leaf(TS_SHAPE(3), WV, d), *y0;
    const struct {
        bw_mode mode;
        ts_status want;
        const char *text;
    } cases[] = {
        {BW_WRONG_SHAPE, TS_ERR_SHAPE,
         "CubeBackward: backward returned an invalid gradient at index 0"},
        {BW_FAIL, TS_ERR_STATE, "cube: backward refused"},
        {BW_FAIL_SILENT, TS_ERR_STATE, "CubeBackward: backward failed"},
        {BW_WRONG_DEVICE, TS_ERR_DEVICE, "CubeBackward: backward returned a gradient on cpu"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        if (cases[k].mode == BW_WRONG_DEVICE && ts_device_of(x).type == TS_CPU) continue;
        frees = 0;
        ts_scope_begin();
        CHECK_EQ(cube(x, w, (apply_opts){.mode = cases[k].mode, .frees = &frees, .calls = &calls},
                      &y0, NULL),
                 TS_OK);
        ts_backward(ts_sum(y0));
        CHECK_EQ(ts_error(), cases[k].want);
        const bool named = strstr(ts_error_message(), cases[k].text) != NULL;
        if (!named) fprintf(stderr, "  got: %s\n", ts_error_message());
        CHECK(named);
        ts_error_clear();
        ts_scope_end();
        CHECK_EQ(frees, 1);
    }
    ts_set_grad(x, NULL), ts_set_grad(w, NULL);

    /* bad arguments: the ctx is freed all the same */
    ts_tensor *out[1] = {ts_detach(x)}, *res[1];
    ts_tensor *in[2] = {x, w};
    int *fp = &frees;
    frees = 0;
    ts_custom_function f = {.name = "BadBackward", .ctx = fp, .ctx_free = NULL};
    CHECK_EQ(ts_custom_function_apply(&f, in, 2, out, 1, res), TS_ERR_ARG); /* no backward */
    CHECK(res[0] == NULL);
    ts_error_clear();
    cube_ctx *c = calloc(1, sizeof *c);
    c->frees = &frees;
    const unsigned dirty = TS_CUSTOM_OUT_DIRTY;
    f = (ts_custom_function){.name = "BadBackward",
                             .backward = cube_backward,
                             .ctx = c,
                             .ctx_free = cube_free,
                             .output_flags = &dirty};
    CHECK_EQ(ts_custom_function_apply(&f, in, 2, out, 1, res), TS_ERR_ARG); /* dirty, no input */
    CHECK(strstr(ts_error_message(), "output 0 is marked dirty") != NULL);
    CHECK_EQ(frees, 1);
    ts_error_clear();
    c = calloc(1, sizeof *c);
    c->frees = &frees;
    f.ctx = c;
    out[0] = x; /* a leaf that requires grad, marked dirty */
    CHECK_EQ(ts_custom_function_apply(&f, in, 2, out, 1, res), TS_ERR_STATE);
    CHECK(strstr(ts_error_message(), "BadBackward: output 0: a leaf Variable") != NULL);
    CHECK_EQ(frees, 2);
    ts_error_clear();
    c = calloc(1, sizeof *c);
    c->frees = &frees;
    f.ctx = c, f.output_flags = NULL;
    CHECK_EQ(ts_custom_function_apply(&f, in, 2, out, 0, res), TS_ERR_ARG); /* no outputs */
    CHECK_EQ(frees, 3);
    ts_error_clear();
    ts_scope_end();
}

/* y = 2 a in place (a = x * 1, not a leaf), marked dirty: a itself is the result */
static ts_status double_backward_fn(void *p, ts_tensor *const *g, int n_out, ts_tensor **gi,
                                    int n_in) {
    (void)p, (void)n_out, (void)n_in;
    gi[0] = ts_mul_scalar(g[0], 2);
    return TS_OK;
}

static void dirty_and_graph_walk(ts_device d) {
    ts_scope_begin();
    ts_tensor *x = leaf(TS_SHAPE(2, 3), XV, d);
    ts_tensor *a = ts_mul_scalar(x, 1);
    const uint64_t v0 = ts_version(a);
    ts_no_grad_begin();
    ts_mul_scalar_(a, 2);
    ts_no_grad_end();
    CHECK(ts_version(a) > v0);
    const unsigned dirty = TS_CUSTOM_OUT_DIRTY;
    ts_custom_function f = {
        .name = "DoubleInPlaceBackward", .backward = double_backward_fn, .output_flags = &dirty};
    ts_tensor *res[1];
    CHECK_EQ(ts_custom_function_apply(&f, &a, 1, &a, 1, res), TS_OK);
    CHECK(res[0] == a);
    CHECK_STREQ(ts_grad_fn_name(a), "DoubleInPlaceBackward");

    /* the graph walk: DoubleInPlaceBackward -> MulBackward0 -> x (a leaf) */
    ts_node *n = ts_grad_fn_node(a), *next, *leafward;
    CHECK_STREQ(ts_node_name(n), "DoubleInPlaceBackward");
    CHECK_EQ(ts_node_num_inputs(n), 1);
    int nr = -1;
    ts_tensor *lf = NULL;
    next = ts_node_next(n, 0, &nr, &lf);
    CHECK(next && !lf && nr == 0);
    CHECK_STREQ(ts_node_name(next), "MulBackward0");
    CHECK_EQ(ts_node_num_inputs(next), 1);
    leafward = ts_node_next(next, 0, &nr, &lf);
    CHECK(!leafward && lf == x);
    CHECK(!ts_node_next(next, 5, &nr, &lf) && !lf); /* out of range */
    CHECK(!ts_grad_fn_node(x));
    ts_node_release(next);
    ts_node_release(n);

    ts_backward(ts_sum(ts_mul(a, a))); /* d/dx sum((2x)^2) = 8x */
    double gx[6];
    CHECK(host(ts_grad(x), gx, 6));
    for (int i = 0; i < 6; i++) CHECK_NEAR(gx[i], 8 * XV[i], 1e-14);
    CHECK_EQ(ts_error(), TS_OK);
    ts_error_clear();
    ts_scope_end();
}

/* ------------------------------------------------------------------ tensor hooks */
typedef struct hook_ctx {
    double scale;
    double seen; /* the first element of the gradient the hook saw */
    int calls, frees;
    bool wrong_shape;
} hook_ctx;

static ts_tensor *scale_hook(void *p, ts_tensor *g) {
    hook_ctx *c = p;
    c->calls++;
    double v[1];
    ts_tensor *h = ts_to_dtype(ts_to(ts_flatten(g, 0, -1), ts_cpu()), TS_F64);
    if (ts_copy_to_host(ts_contiguous(ts_narrow(h, 0, 0, 1)), v, sizeof v) == TS_OK) c->seen = v[0];
    if (c->wrong_shape) return ts_sum(g);
    return c->scale == 1 ? NULL : ts_mul_scalar(g, c->scale);
}
static void hook_free(void *p) { ((hook_ctx *)p)->frees++; }

static void tensor_hooks(ts_device d) {
    ts_scope_begin();
    ts_tensor *x = leaf(TS_SHAPE(2, 3), XV, d);
    /* y used twice: the hook sees the whole gradient (3 + 1), its replacement reaches x */
    hook_ctx a = {.scale = 10}, b = {.scale = 1};
    ts_scope_begin();
    ts_tensor *y = ts_mul_scalar(x, 2), *z = ts_add(ts_mul_scalar(y, 3), y);
    const int ha = ts_register_tensor_hook(y, scale_hook, &a, hook_free);
    const int hb = ts_register_tensor_hook(y, scale_hook, &b, hook_free);
    CHECK(ha > 0 && hb > ha);
    CHECK_STREQ(ts_grad_fn_name(y), "MulBackward0"); /* unchanged */
    ts_backward(ts_sum(z));
    CHECK_EQ(ts_error(), TS_OK);
    CHECK_EQ(a.calls, 1);
    CHECK_NEAR(a.seen, 4, 0);
    CHECK_NEAR(b.seen, 40, 0); /* the second hook gets the first one's result */
    double gx[6];
    CHECK(host(ts_grad(x), gx, 6));
    for (int i = 0; i < 6; i++) CHECK_NEAR(gx[i], 80, 0);
    CHECK(a.frees == 1 && b.frees == 1); /* with the graph, after backward */
    ts_scope_end();
    ts_set_grad(x, NULL);

    /* removed: not called, freed at removal; on a custom function's output; retain_graph */
    hook_ctx c = {.scale = 2}, e = {.scale = 3};
    int frees = 0, calls = 0;
    ts_scope_begin();
    ts_tensor *w = leaf(TS_SHAPE(3), WV, d), *y0;
    CHECK_EQ(cube(x, w, (apply_opts){.frees = &frees, .calls = &calls}, &y0, NULL), TS_OK);
    const int hc = ts_register_tensor_hook(y0, scale_hook, &c, hook_free);
    CHECK(ts_register_tensor_hook(y0, scale_hook, &e, hook_free) > 0);
    CHECK_EQ(ts_remove_tensor_hook(y0, hc), TS_OK);
    CHECK_EQ(c.frees, 1);
    CHECK_EQ(ts_remove_tensor_hook(y0, hc), TS_ERR_ARG);
    ts_error_clear();
    ts_tensor *loss = ts_sum(y0);
    ts_backward_ex(loss, NULL, (ts_backward_opts){.retain_graph = true});
    ts_backward(loss);
    CHECK_EQ(ts_error(), TS_OK);
    CHECK(c.calls == 0 && e.calls == 2 && calls == 2);
    CHECK(host(ts_grad(x), gx, 6));
    for (int i = 0; i < 6; i++) CHECK_NEAR(gx[i], 2 * 3 * 3 * XV[i] * XV[i] * WV[i % 3], 1e-13);
    CHECK(e.frees == 1 && frees == 1);
    ts_scope_end();

    /* errors: no grad required (leaves: test_leaf_hooks.c), a wrong-shaped replacement, after
     * the graph was freed */
    hook_ctx f = {.scale = 2};
    CHECK_EQ(ts_register_tensor_hook(ts_detach(x), scale_hook, &f, hook_free), 0);
    CHECK_EQ(ts_error(), TS_ERR_STATE);
    CHECK_EQ(f.frees, 1);
    ts_error_clear();
    hook_ctx g = {.wrong_shape = true};
    ts_scope_begin();
    y = ts_mul_scalar(x, 2);
    CHECK(ts_register_tensor_hook(y, scale_hook, &g, hook_free) > 0);
    ts_backward(ts_sum(y));
    CHECK_EQ(ts_error(), TS_ERR_SHAPE);
    CHECK(strstr(ts_error_message(), "register_hook: a hook on output 0 of MulBackward0") != NULL);
    ts_error_clear();
    CHECK_EQ(ts_register_tensor_hook(y, scale_hook, &f, hook_free), 0); /* graph freed */
    CHECK_EQ(ts_error(), TS_ERR_STATE);
    ts_error_clear();
    ts_scope_end();
    CHECK(g.frees == 1 && f.frees == 2);
    ts_scope_end();
}

int main(void) {
    ts_device devs[2] = {ts_cpu(), ts_sim(0)};
    for (int i = 0; i < 2; i++) {
        printf("device %s\n", ts_device_str(devs[i]));
        gradcheck_and_analytic(devs[i]);
        lifetime_and_grads(devs[i]);
        errors(devs[i]);
        dirty_and_graph_walk(devs[i]);
        tensor_hooks(devs[i]);
    }
    return ts_test_finish();
}
