/* test_double_backward_saved_hooks.c — create_graph through tensors saved under saved-tensor hooks
 * (tessera/saved_hooks.h), as PyTorch's SavedVariable does it: the backward computes with what
 * the unpack hook returns, and that tensor carries the saved tensor's history (its grad_fn and
 * output number, this node's output, or the leaf, reached through a SavedLeafBackward node), so
 * the gradient is differentiable again through the original graph, whatever the hooks did.
 *
 * With hooks that give the saved values back (the tensor itself, a clone, save_on_cpu's host copy
 * copied back to sim:0; hooks inside a checkpointed function and a checkpoint inside hooks), the
 * Hessian-vector products by double backward equal central differences of first-order gradients
 * in float64 (hv_check.c's rule) on the cpu and sim:0. With an unpack that doubles the values (so
 * the backward's values are not the forward's derivative), the gradient and the Hessian-vector
 * product equal PyTorch 2.15's for the same program, written out below
 * (/opt/torch2/bin/torch-python, torch.autograd.graph.saved_tensors_hooks). */
#include <math.h>
#include <stdio.h>

#include "host_values.h"
#include "hv_check.h"
#include "tessera/saved_hooks.h"
#include "ts_test.h"

typedef ts_hv_case hv_case;
#define SH TS_HV_SH

/* ---------------------------------------------------------------- hooks */
static int packs, unpacks;

static void *pack_same(void *ctx, ts_tensor *t) {
    (void)ctx;
    packs++;
    return ts_retain(t);
}
static ts_tensor *unpack_same(void *ctx, void *handle) {
    (void)ctx;
    unpacks++;
    return handle;
}
static void free_handle(void *ctx, void *handle) {
    (void)ctx;
    ts_release(handle);
}
/* a detached clone packed, another clone unpacked: new storage both ways */
static void *pack_clone(void *ctx, ts_tensor *t) {
    (void)ctx;
    packs++;
    return ts_retain(ts_clone(ts_detach(t)));
}
static ts_tensor *unpack_clone(void *ctx, void *handle) {
    (void)ctx;
    unpacks++;
    return ts_clone(handle);
}
/* the values doubled: what the backward computes with differs from the forward's */
static ts_tensor *unpack_twice(void *ctx, void *handle) {
    (void)ctx;
    unpacks++;
    return ts_mul_scalar(handle, 2.0);
}

enum { H_SAME, H_CLONE, H_CPU };
static int hooks_kind;

static void hooks_push(void) {
    if (hooks_kind == H_SAME)
        CHECK_EQ(ts_saved_tensors_hooks_push(pack_same, unpack_same, free_handle, NULL, NULL),
                 TS_OK);
    else if (hooks_kind == H_CLONE)
        CHECK_EQ(ts_saved_tensors_hooks_push(pack_clone, unpack_clone, free_handle, NULL, NULL),
                 TS_OK);
    else
        CHECK_EQ(ts_save_on_cpu_begin((ts_save_on_cpu_opts){0}), TS_OK);
}
static void hooks_pop(void) {
    if (hooks_kind == H_CPU)
        CHECK_EQ(ts_save_on_cpu_end(), TS_OK);
    else
        CHECK_EQ(ts_saved_tensors_hooks_pop(), TS_OK);
}

/* ---------------------------------------------------------------- Hessian-vector products */
/* sum(sin(a b)^2 exp(a)) + sum(tanh(a b) c): mul saves the leaves a and b, sin its input (an
 * intermediate), exp and tanh their outputs, the products intermediates */
static ts_tensor *f_mixed(ts_tensor *const *in) {
    hooks_push();
    ts_tensor *ab = ts_mul(in[0], in[1]);
    ts_tensor *s = ts_sin(ab);
    ts_tensor *y =
        ts_add(ts_sum(ts_mul(ts_mul(s, s), ts_exp(in[0]))), ts_sum(ts_mul(ts_tanh(ab), in[2])));
    hooks_pop();
    return y;
}
/* a product and a softmax: matmul saves both operands, softmax its output, log its input */
static ts_tensor *f_matmul(ts_tensor *const *in) {
    hooks_push();
    ts_tensor *p = ts_softmax(ts_matmul(in[0], in[1]), 1);
    ts_tensor *y = ts_sum(ts_mul(ts_log(ts_add_scalar(p, 1.0)), in[2]));
    hooks_pop();
    return y;
}

/* the hooks inside a checkpointed function (they take its saves: checkpoint.c), and a
 * checkpoint inside the hooks (it takes the saves of its function, the hooks those outside it) */
static ts_status body_hooked(void *ctx, ts_tensor *const *in, int n_in, ts_tensor **out,
                             int n_out) {
    (void)ctx, (void)n_in, (void)n_out;
    out[0] = f_mixed(in);
    return out[0] ? TS_OK : ts_error();
}
static ts_status body_plain(void *ctx, ts_tensor *const *in, int n_in, ts_tensor **out, int n_out) {
    (void)ctx, (void)n_in, (void)n_out;
    out[0] = ts_mul(ts_tanh(ts_mul(in[0], in[1])), ts_exp(in[2]));
    return out[0] ? TS_OK : ts_error();
}
static ts_tensor *f_ckpt_hooks(ts_tensor *const *in) {
    ts_tensor *y = NULL;
    if (ts_checkpoint(body_hooked, NULL, NULL, in, 3, &y, 1) != TS_OK) return NULL;
    return y;
}
static ts_tensor *f_hooks_ckpt(ts_tensor *const *in) {
    hooks_push();
    ts_tensor *h = NULL;
    ts_status st = ts_checkpoint(body_plain, NULL, NULL, in, 3, &h, 1);
    ts_tensor *y = st == TS_OK ? ts_sum(ts_mul(ts_sin(h), in[0])) : NULL;
    hooks_pop();
    return y;
}

static const hv_case cases[] = {
    {"mixed", f_mixed, 3, {SH(1, 5), SH(1, 5), SH(1, 5)}, NULL},
    {"matmul", f_matmul, 3, {SH(2, 3, 4), SH(2, 4, 2), SH(2, 3, 2)}, NULL},
    {"hooks in a checkpoint", f_ckpt_hooks, 3, {SH(1, 5), SH(1, 5), SH(1, 5)}, NULL},
    {"a checkpoint in hooks", f_hooks_ckpt, 3, {SH(1, 5), SH(1, 5), SH(1, 5)}, NULL},
};

static void hv_cases(ts_device d) {
    const int kinds[] = {H_SAME, H_CLONE, H_CPU};
    for (int k = 0; k < 3; k++) {
        if (kinds[k] == H_CPU && d.type == TS_CPU) continue; /* nothing to offload */
        hooks_kind = kinds[k];
        packs = unpacks = 0;
        ts_save_on_cpu_reset_stats();
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) ts_hv_check(&cases[c], d);
        if (kinds[k] == H_CPU) {
            ts_save_on_cpu_stats st;
            ts_save_on_cpu_stats_get(&st);
            CHECK(st.offloaded > 0 && st.restored > 0); /* the hooks' path was taken */
        } else {
            CHECK(packs > 0 && unpacks > 0);
        }
    }
}

/* ---------------------------------------------------------------- PyTorch's values */
static bool close_to(ts_tensor *t, const double *want, int n, const char *what) {
    double got[8];
    if (!ts_test_read_f64(t, got, n)) return false;
    int bad = 0;
    for (int i = 0; i < n; i++)
        if (fabs(got[i] - want[i]) > 1e-12 * (1 + fabs(want[i])) && bad++ < 3)
            fprintf(stderr, "%s[%d] = %.15g, PyTorch %.15g\n", what, i, got[i], want[i]);
    return bad == 0;
}

/* PyTorch:
 *   x = [0.5, -1, 2], w = [1.5, 0.25, -0.75] (float64, requiring grad), v = [1, 2, 3]
 *   with saved_tensors_hooks(lambda t: t, lambda t: t * 2): z = (sin(x * w) ** 2).sum()  [as
 *   y = sin(x * w); z = (y * y).sum()]
 *   g = grad(z, x, create_graph=True); hv = grad((g * v).sum(), [x, w])
 * and with the same hooks e = exp(x): g = grad(e.sum(), x, create_graph=True); grad(g.sum(), x).
 * Each value the backward reads is doubled, and its history is the original's. */
static void doubled_unpack(ts_device d) {
    static const double g_want[3] = {0.5786066211875224, -0.43423480076881127, -5.925075312807454};
    static const double hx_want[3] = {-24.387457318142083, 0.5329276000972459, 9.430453920060453};
    static const double hw_want[3] = {-7.936283565651521, -3.868649603464229, -13.2977264945463};
    static const double eg_want[3] = {3.2974425414002564, 0.7357588823428847, 14.7781121978613};
    ts_scope_begin();
    const ts_opts o = {.device = d, .requires_grad = true};
    ts_tensor *x = ts_tensor_f64(TS_SHAPE(3), (const double[]){0.5, -1, 2}, o);
    ts_tensor *w = ts_tensor_f64(TS_SHAPE(3), (const double[]){1.5, 0.25, -0.75}, o);
    ts_tensor *v = ts_tensor_f64(TS_SHAPE(3), (const double[]){1, 2, 3}, (ts_opts){.device = d});
    CHECK_EQ(ts_saved_tensors_hooks_push(pack_same, unpack_twice, free_handle, NULL, NULL), TS_OK);
    ts_tensor *y = ts_sin(ts_mul(x, w));
    ts_tensor *z = ts_sum(ts_mul(y, y));
    ts_tensor *e = ts_sum(ts_exp(x));
    CHECK_EQ(ts_saved_tensors_hooks_pop(), TS_OK);
    ts_tensor *g = NULL, *hv[2] = {0}, *eg = NULL, *egg = NULL;
    CHECK_EQ(ts_autograd_grad(&z, NULL, 1, &x, 1, (ts_grad_opts){.create_graph = true}, &g), TS_OK);
    CHECK(g && close_to(g, g_want, 3, "g"));
    ts_tensor *gv = ts_sum(ts_mul(g, v));
    ts_tensor *xw[2] = {x, w};
    CHECK_EQ(ts_autograd_grad(&gv, NULL, 1, xw, 2, (ts_grad_opts){0}, hv), TS_OK);
    CHECK(hv[0] && close_to(hv[0], hx_want, 3, "hv x"));
    CHECK(hv[1] && close_to(hv[1], hw_want, 3, "hv w"));
    CHECK_EQ(ts_autograd_grad(&e, NULL, 1, &x, 1, (ts_grad_opts){.create_graph = true}, &eg),
             TS_OK);
    CHECK(eg && close_to(eg, eg_want, 3, "exp's g"));
    ts_tensor *egs = ts_sum(eg);
    CHECK_EQ(ts_autograd_grad(&egs, NULL, 1, &x, 1, (ts_grad_opts){0}, &egg), TS_OK);
    CHECK(egg && close_to(egg, eg_want, 3, "exp's gg"));
    CHECK_OK();
    ts_scope_end();
}

/* A second backward into a leaf's .grad: d/dx sum((dz/dx)) for z = sum(x^3) saved under hooks is
 * sum(6 x), accumulated into x.grad by ts_backward on the create_graph gradient. */
static void leaf_accumulates(ts_device d) {
    ts_scope_begin();
    ts_tensor *x = ts_tensor_f64(TS_SHAPE(3), (const double[]){0.5, -1, 2},
                                 (ts_opts){.device = d, .requires_grad = true});
    CHECK_EQ(ts_saved_tensors_hooks_push(pack_clone, unpack_clone, free_handle, NULL, NULL), TS_OK);
    ts_tensor *z = ts_sum(ts_mul(ts_mul(x, x), x));
    CHECK_EQ(ts_saved_tensors_hooks_pop(), TS_OK);
    ts_tensor *g = NULL;
    CHECK_EQ(ts_autograd_grad(&z, NULL, 1, &x, 1, (ts_grad_opts){.create_graph = true}, &g), TS_OK);
    CHECK(g && close_to(g, (const double[]){0.75, 3, 12}, 3, "3x^2"));
    CHECK_EQ(ts_backward(ts_sum(g)), TS_OK);
    CHECK(ts_grad(x) && close_to(ts_grad(x), (const double[]){3, -6, 12}, 3, "6x"));
    CHECK_OK();
    ts_scope_end();
}

/* Every allocation of the create_graph gradient through a leaf saved under hooks failing in turn
 * (the SavedLeafBackward node and the view of the unpacked data among them): an error, or the
 * right gradient; nothing leaked (main's count of live tensors). */
static void leaf_alloc_faults(void) {
    ts_tensor *x =
        ts_tensor_f64(TS_SHAPE(3), (const double[]){0.5, -1, 2}, (ts_opts){.requires_grad = true});
    bool fired = true;
    for (int64_t i = 1; fired; i++) {
        ts_scope_begin();
        CHECK_EQ(ts_saved_tensors_hooks_push(pack_clone, unpack_clone, free_handle, NULL, NULL),
                 TS_OK);
        ts_tensor *z = ts_sum(ts_mul(ts_mul(x, x), x));
        CHECK_EQ(ts_saved_tensors_hooks_pop(), TS_OK);
        ts_tensor *g = NULL;
        ts_fault_alloc_set(i);
        const ts_status st =
            ts_autograd_grad(&z, NULL, 1, &x, 1, (ts_grad_opts){.create_graph = true}, &g);
        fired = ts_fault_alloc_fired();
        ts_fault_alloc_set(-1);
        if (fired) {
            CHECK(st != TS_OK);
            ts_error_clear();
        } else {
            CHECK_EQ(st, TS_OK);
            CHECK(g && close_to(g, (const double[]){0.75, 3, 12}, 3, "3x^2"));
        }
        ts_scope_end();
    }
    ts_release(x);
    CHECK_OK();
}

int main(void) {
    if (ts_device_count(TS_SIM) < 1) return ts_test_skip("needs TS_SIM_DEVICES >= 1");
    ts_mem_stats before, after;
    ts_memory_stats(ts_sim(0), &before);
    const ts_device devs[2] = {ts_cpu(), ts_sim(0)};
    for (int di = 0; di < 2; di++) {
        hv_cases(devs[di]);
        doubled_unpack(devs[di]);
        leaf_accumulates(devs[di]);
    }
    leaf_alloc_faults();
    CHECK_OK();
    ts_memory_stats(ts_sim(0), &after);
    CHECK_EQ(after.live_tensors, before.live_tensors);
    CHECK_EQ(ts_memory_stats(ts_cpu(), &after), TS_OK);
    CHECK_EQ(after.live_tensors, 0);
    return ts_test_finish();
}
