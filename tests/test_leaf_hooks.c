/* test_leaf_hooks.c — hooks on a leaf's gradient (ts_register_tensor_hook on a leaf,
 * src/autograd/leaf_hooks.c; PyTorch's Tensor.register_hook on a leaf) on cpu and sim:0: a hook
 * that doubles the gradient doubles .grad (and what later backwards add to it); two hooks run in
 * registration order, each on the previous one's result; a removed hook is not called and its
 * ctx_free runs at once, and once; a hook that removes itself or another while running; a
 * replacement of another shape or device is an error naming register_hook and .grad stays as it
 * was; a failing hook fails the pass; another dtype is cast; a backward whose root is the leaf; the
 * post-accumulate-grad hook sees the hooked .grad; the hooks' ctx_free runs when the tensor dies,
 * and no tensor outlives the test (ASan in CI sees the hooks' own memory); tsi_leaf_hooks_gather,
 * driven as the engine would, gives the hooks a pass's sum once. Every value is exact in
 * binary floating point (products and sums of small integers and halves): tolerance 0. */
#include <stdio.h>
#include <string.h>

#include "autograd/autograd.h" /* tsi_hooks_expect / _arrived, as the engine drives them */
#include "autograd/leaf_hooks.h"
#include "tessera.h"
#include "tessera/custom_function.h"
#include "ts_test.h"

typedef struct hook_ctx {
    double scale, add; /* returns g * scale + add; scale 1 and add 0: NULL (unchanged) */
    double seen;       /* the first element of the gradient the hook saw */
    int calls, frees;
    int order, *clock; /* order: the value of *clock when it ran (then *clock++) */
    enum { H_OK, H_WRONG_SHAPE, H_WRONG_DEVICE, H_FAIL, H_F32, H_REMOVE } mode;
    ts_tensor *remove_from; /* H_REMOVE: removes hook `remove_id` of this tensor, then scales */
    int remove_id;
    bool freed_while_running; /* a hook_ctx freed while this one ran (must not happen) */
} hook_ctx;

static hook_ctx *running_ctx;

static double first(ts_tensor *g) {
    double v[1] = {0};
    ts_scope_begin();
    ts_tensor *h = ts_to_dtype(ts_to(ts_flatten(g, 0, -1), ts_cpu()), TS_F64);
    ts_copy_to_host(ts_contiguous(ts_narrow(h, 0, 0, 1)), v, sizeof v);
    ts_scope_end();
    return v[0];
}

static ts_tensor *hook(void *p, ts_tensor *g) {
    hook_ctx *c = p;
    c->calls++;
    c->seen = first(g);
    if (c->clock) c->order = (*c->clock)++;
    switch (c->mode) {
    case H_WRONG_SHAPE:
        return ts_sum(g);
    case H_WRONG_DEVICE:
        return ts_to(g, ts_cpu());
    case H_FAIL:
        ts_error_set(TS_ERR_ARG, "hook: failed on purpose");
        return NULL;
    case H_F32:
        return ts_to_dtype(ts_mul_scalar(g, c->scale), TS_F32);
    case H_REMOVE:
        running_ctx = c;
        if (ts_remove_tensor_hook(c->remove_from, c->remove_id) != TS_OK)
            ts_error_clear(); /* already gone */
        running_ctx = NULL;
        break;
    default:
        break;
    }
    if (c->scale == 1 && c->add == 0) return NULL;
    return ts_add_scalar(ts_mul_scalar(g, c->scale), c->add);
}
static void hook_free(void *p) {
    hook_ctx *c = p;
    c->frees++;
    if (running_ctx) running_ctx->freed_while_running = true;
}

static ts_tensor *leaf(const double *v, int64_t n, ts_device d) {
    ts_tensor *t = ts_detach(ts_to(ts_tensor_f64(TS_SHAPE(n), v, (ts_opts){0}), d));
    ts_set_requires_grad(t, true);
    return t;
}

static bool host(ts_tensor *t, double *v, int64_t n) {
    ts_scope_begin();
    ts_tensor *h = t ? ts_to_dtype(ts_to(t, ts_cpu()), TS_F64) : NULL;
    bool ok = h && ts_numel(h) == n &&
              ts_copy_to_host(ts_contiguous(h), v, (size_t)n * sizeof *v) == TS_OK;
    ts_scope_end();
    return ok;
}

/* every element of x's .grad is want */
static void check_grad(ts_tensor *x, double want) {
    double g[4];
    CHECK(host(ts_grad(x), g, 4));
    for (int i = 0; i < 4; i++) CHECK_NEAR(g[i], want, 0);
}

static const double XV[4] = {0.5, -1.25, 0.75, 2.0};

/* backward of sum(x * k): x's gradient is k everywhere */
static void backward_times(ts_tensor *x, double k) {
    ts_scope_begin();
    ts_backward(ts_sum(ts_mul_scalar(x, k)));
    ts_scope_end();
}

static void double_and_order(ts_device d) {
    ts_scope_begin();
    ts_tensor *x = leaf(XV, 4, d);
    hook_ctx dbl = {.scale = 2};
    const int h = ts_register_tensor_hook(x, hook, &dbl, hook_free);
    CHECK(h > 0);
    backward_times(x, 3);
    CHECK_OK();
    CHECK_EQ(dbl.calls, 1);
    CHECK_NEAR(dbl.seen, 3, 0);
    check_grad(x, 6);
    backward_times(x, 3); /* the hook runs on the new gradient only: 6 + 6 */
    check_grad(x, 12);
    CHECK_EQ(ts_remove_tensor_hook(x, h), TS_OK);
    CHECK_EQ(dbl.frees, 1); /* at removal */
    CHECK_EQ(ts_remove_tensor_hook(x, h), TS_ERR_ARG);
    ts_error_clear();
    backward_times(x, 3); /* removed: 12 + 3 */
    check_grad(x, 15);
    CHECK_EQ(dbl.calls, 2);
    CHECK_EQ(dbl.frees, 1);

    /* two hooks in registration order, the second on the first's result: (3 + 1) * 10 */
    ts_set_grad(x, NULL);
    int clock = 0;
    hook_ctx plus = {.scale = 1, .add = 1, .clock = &clock}, ten = {.scale = 10, .clock = &clock},
             keep = {.scale = 1, .clock = &clock};
    const int hp = ts_register_tensor_hook(x, hook, &plus, hook_free);
    CHECK(ts_register_tensor_hook(x, hook, &ten, hook_free) > hp);
    CHECK(ts_register_tensor_hook(x, hook, &keep, hook_free) > hp);
    backward_times(x, 3);
    CHECK_OK();
    CHECK(plus.order == 0 && ten.order == 1 && keep.order == 2);
    CHECK_NEAR(ten.seen, 4, 0);
    CHECK_NEAR(keep.seen, 40, 0); /* NULL from keep: the gradient as it came */
    check_grad(x, 40);

    /* the first removed: 3 * 10 */
    ts_set_grad(x, NULL);
    CHECK_EQ(ts_remove_tensor_hook(x, hp), TS_OK);
    backward_times(x, 3);
    check_grad(x, 30);
    CHECK(plus.calls == 1 && ten.calls == 2 && plus.frees == 1 && ten.frees == 0);

    /* a backward whose root is the leaf itself: its seed goes through the hooks */
    ts_set_grad(x, NULL);
    ts_backward_ex(x, ts_full_like(x, 0.5), (ts_backward_opts){0});
    CHECK_OK();
    check_grad(x, 5);
    ts_scope_end(); /* x dies: the hooks left go with it */
    CHECK(ten.frees == 1 && keep.frees == 1 && plus.frees == 1 && dbl.frees == 1);
}

static void removal_while_running(ts_device d) {
    ts_scope_begin();
    ts_tensor *x = leaf(XV, 4, d);
    /* a removes b (registered after it): b is not called, and its ctx_free waits until no hook
     * runs; c then removes itself (it doubles this time) */
    hook_ctx a = {.scale = 1, .remove_from = x};
    hook_ctx b = {.scale = 100}, c = {.scale = 2, .mode = H_REMOVE, .remove_from = x};
    CHECK(ts_register_tensor_hook(x, hook, &a, hook_free) > 0);
    a.remove_id = ts_register_tensor_hook(x, hook, &b, hook_free);
    c.remove_id = ts_register_tensor_hook(x, hook, &c, hook_free);
    a.mode = H_REMOVE;
    backward_times(x, 3);
    CHECK_OK();
    CHECK(b.calls == 0 && b.frees == 1 && c.calls == 1 && c.frees == 1);
    CHECK(!a.freed_while_running && !c.freed_while_running);
    check_grad(x, 6);
    backward_times(x, 3); /* a alone, finding nothing to remove now */
    CHECK_OK();
    check_grad(x, 9);
    ts_scope_end();
    CHECK_EQ(a.frees, 1);
}

static void errors(ts_device d) {
    ts_scope_begin();
    ts_tensor *x = leaf(XV, 4, d);
    /* a wrong shape: the pass fails naming register_hook and the leaf; .grad stays */
    backward_times(x, 1);
    check_grad(x, 1);
    hook_ctx bad = {.scale = 1, .mode = H_WRONG_SHAPE};
    const int hb = ts_register_tensor_hook(x, hook, &bad, hook_free);
    backward_times(x, 3);
    CHECK_ERR_HAS(TS_ERR_SHAPE, " returned float64 [] on "); /* what the hook gave: its sum */
    check_grad(x, 1);
    ts_set_grad(x, NULL);
    backward_times(x, 3);
    CHECK_ERR(TS_ERR_SHAPE);
    CHECK(ts_grad(x) == NULL);
    CHECK_EQ(ts_remove_tensor_hook(x, hb), TS_OK);

    /* a failing hook: its error fails the pass, .grad stays */
    hook_ctx fail = {.scale = 1, .mode = H_FAIL};
    const int hf = ts_register_tensor_hook(x, hook, &fail, hook_free);
    backward_times(x, 3);
    CHECK_ERR_HAS(TS_ERR_ARG, "failed on purpose");
    CHECK(ts_grad(x) == NULL);
    CHECK_EQ(ts_remove_tensor_hook(x, hf), TS_OK);

    /* another device (sim only): an error */
    if (d.type != TS_CPU) {
        hook_ctx dev = {.scale = 1, .mode = H_WRONG_DEVICE};
        const int hd = ts_register_tensor_hook(x, hook, &dev, hook_free);
        backward_times(x, 3);
        CHECK_ERR_HAS(TS_ERR_SHAPE, "shape and device must agree");
        CHECK(ts_grad(x) == NULL);
        CHECK_EQ(ts_remove_tensor_hook(x, hd), TS_OK);
    }

    /* another dtype: cast to the gradient's (f64 here) */
    hook_ctx f32 = {.scale = 2, .mode = H_F32};
    CHECK(ts_register_tensor_hook(x, hook, &f32, hook_free) > 0);
    backward_times(x, 3);
    CHECK_OK();
    CHECK_EQ(ts_dtype_of(ts_grad(x)), TS_F64);
    check_grad(x, 6);

    /* a tensor that does not require grad: refused, ctx_free at once */
    hook_ctx no = {.scale = 2};
    CHECK_EQ(ts_register_tensor_hook(ts_detach(x), hook, &no, hook_free), 0);
    CHECK_ERR_HAS(TS_ERR_STATE, "doesn't require gradient");
    CHECK_EQ(no.frees, 1);
    ts_scope_end();
    CHECK(bad.frees == 1 && fail.frees == 1 && f32.frees == 1);
}

/* out of host memory while registering (the leaf's hook table, then its list): no hook is added,
 * its ctx_free runs at once, the error names register_hook; a later registration works */
static void out_of_memory(ts_device d) {
    ts_scope_begin();
    ts_tensor *x = leaf(XV, 4, d);
    for (int64_t k = 1; k <= 2; k++) {
        hook_ctx c = {.scale = 2};
        ts_fault_alloc_set(k);
        const int id = ts_register_tensor_hook(x, hook, &c, hook_free);
        const bool fired = ts_fault_alloc_fired();
        ts_fault_alloc_set(-1);
        CHECK(fired);
        CHECK_EQ(id, 0);
        CHECK_ERR_HAS(TS_ERR_OOM, "register_hook: out of host memory");
        CHECK_EQ(c.frees, 1);
        CHECK_EQ(c.calls, 0);
    }
    hook_ctx ok = {.scale = 2};
    CHECK(ts_register_tensor_hook(x, hook, &ok, hook_free) > 0);
    backward_times(x, 1);
    CHECK_OK();
    check_grad(x, 2);
    ts_scope_end();
    CHECK_EQ(ok.frees, 1);
}

/* the post-accumulate-grad hook runs after the leaf hooks' result was accumulated */
typedef struct post_ctx {
    double grad0;
    int calls;
} post_ctx;
static void post_hook(ts_tensor *leaf, void *p) {
    post_ctx *c = p;
    c->calls++;
    c->grad0 = first(ts_grad(leaf));
}

static void with_post_hook(ts_device d) {
    ts_scope_begin();
    ts_tensor *x = leaf(XV, 4, d);
    post_ctx pc = {0};
    hook_ctx dbl = {.scale = 2};
    const int hp = ts_register_post_accumulate_grad_hook(x, post_hook, &pc);
    const int hd = ts_register_tensor_hook(x, hook, &dbl, hook_free);
    CHECK(hp > 0 && hd > hp); /* one numbering for both kinds on a leaf */
    backward_times(x, 3);
    CHECK_OK();
    CHECK(pc.calls == 1 && dbl.calls == 1);
    CHECK_NEAR(pc.grad0, 6, 0);
    /* each kind removes only its own */
    CHECK_EQ(ts_remove_tensor_hook(x, hp), TS_ERR_ARG);
    ts_error_clear();
    CHECK_EQ(ts_remove_grad_hook(x, hd), TS_ERR_ARG);
    ts_error_clear();
    CHECK_EQ(ts_remove_grad_hook(x, hp), TS_OK);
    backward_times(x, 3);
    CHECK(pc.calls == 1 && dbl.calls == 2);
    check_grad(x, 12);
    ts_scope_end();
    CHECK_EQ(dbl.frees, 1);
}

/* tsi_leaf_hooks_gather as an engine drives it (PyTorch: the hooks once per pass, on the sum):
 * three edges into x, the middle one bringing no gradient; then the last one bringing none */
static void gather_once_per_pass(ts_device d) {
    ts_scope_begin();
    ts_tensor *x = leaf(XV, 4, d);
    hook_ctx plus = {.scale = 1, .add = 1};
    CHECK(ts_register_tensor_hook(x, hook, &plus, hook_free) > 0);
    const uint64_t pass = UINT64_MAX - 1; /* a pass id the engine's counter never reaches */
    for (int k = 0; k < 3; k++) tsi_hooks_expect(x, pass);
    CHECK(tsi_leaf_hooks_gather(x, pass, ts_retain(ts_full_like(x, 2))) == NULL); /* held */
    tsi_hooks_arrived(x, pass);
    CHECK(tsi_leaf_hooks_gather(x, pass, NULL) == NULL);
    tsi_hooks_arrived(x, pass);
    ts_tensor *g = tsi_leaf_hooks_gather(x, pass, ts_retain(ts_full_like(x, 3)));
    CHECK_OK();
    CHECK(g != NULL);
    if (g) {
        g = tsi_leaf_hooks_apply(x, g);
        CHECK(g && plus.calls == 1);
        CHECK_NEAR(first(g), 2 + 3 + 1, 0); /* not (2 + 1) + (3 + 1) */
        ts_release(g);
    }
    tsi_hooks_arrived(x, pass);

    /* the last edge brings none: the sum comes out with it */
    for (int k = 0; k < 2; k++) tsi_hooks_expect(x, pass + 1);
    CHECK(tsi_leaf_hooks_gather(x, pass + 1, ts_retain(ts_full_like(x, 2))) == NULL);
    tsi_hooks_arrived(x, pass + 1);
    g = tsi_leaf_hooks_gather(x, pass + 1, NULL);
    CHECK(g != NULL);
    if (g) CHECK_NEAR(first(g), 2, 0);
    ts_release(g);
    tsi_hooks_arrived(x, pass + 1);

    /* a failed pass: what it held goes at abandon (ASan / the live count see it otherwise) */
    for (int k = 0; k < 2; k++) tsi_hooks_expect(x, pass - 1);
    CHECK(tsi_leaf_hooks_gather(x, pass - 1, ts_retain(ts_full_like(x, 2))) == NULL);
    tsi_hooks_abandon(x, pass - 1);

    /* outside a counted pass, and on a leaf without gradient hooks: g as it is */
    ts_tensor *o = ts_retain(ts_full_like(x, 5));
    CHECK(tsi_leaf_hooks_gather(x, 7, o) == o);
    ts_tensor *y = leaf(XV, 4, d);
    tsi_hooks_expect(y, pass);
    tsi_hooks_expect(y, pass);
    CHECK(tsi_leaf_hooks_gather(y, pass, o) == o);
    ts_release(o);
    ts_scope_end();
}

int main(void) {
    ts_device devs[2] = {ts_cpu(), ts_sim(0)};
    for (int i = 0; i < 2; i++) {
        printf("device %s\n", ts_device_str(devs[i]));
        ts_mem_stats before, after;
        CHECK_EQ(ts_memory_stats(devs[i], &before), TS_OK);
        double_and_order(devs[i]);
        removal_while_running(devs[i]);
        errors(devs[i]);
        out_of_memory(devs[i]);
        with_post_hook(devs[i]);
        gather_once_per_pass(devs[i]);
        CHECK_EQ(ts_memory_stats(devs[i], &after), TS_OK);
        CHECK_EQ(after.live_tensors, before.live_tensors);
    }
    return ts_test_finish();
}
