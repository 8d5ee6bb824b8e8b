/* test_optim_offload.c — optimizer offload (ts_optim_offload, src/optim/offload.c) on a sim
 * device: an MLP and a tiny GPT trained with offloaded AdamW / SGD (with a scheduler and gradient
 * clipping) equal plain training on the device bit for bit; bfloat16 parameters follow a float32
 * master reference (the rounding of the final cast only), as float32 and bfloat16 parameters do on
 * cuda:0 when there is one (its copies are asynchronous); the device holds no optimizer state;
 * state dicts load across offload; errors; and an allocation-failure sweep of an offloaded step. */
#include <math.h>
#include <stdlib.h>

#include "fault_sweep.h"
#include "sweep_model.h"
#include "tessera/optim_offload.h"
#include "ts_test.h"

typedef enum { K_ADAMW, K_SGD } kind;

static ts_optim *make_opt(ts_module *m, kind k) {
    if (k == K_ADAMW)
        return ts_adamw_new_decay_groups(m, (ts_adam_opts){.lr = 3e-2, .weight_decay = 0.1});
    return ts_sgd_new(
        m, (ts_sgd_opts){.lr = 0.05, .momentum = 0.9, .nesterov = true, .weight_decay = 1e-3});
}

/* Byte equality of two modules' parameters (any devices). */
static bool same_params(ts_module *a, ts_module *b) {
    ts_tensor_list la = ts_module_named_parameters(a), lb = ts_module_named_parameters(b);
    bool ok = la.n == lb.n && la.n > 0;
    ts_scope_begin();
    for (int i = 0; ok && i < la.n; i++) {
        ts_tensor *x = ts_contiguous(ts_to(la.tensors[i], ts_cpu()));
        ts_tensor *y = ts_contiguous(ts_to(lb.tensors[i], ts_cpu()));
        size_t n = (size_t)ts_numel(x) * ts_dtype_size(ts_dtype_of(x));
        char *bx = malloc(n), *by = malloc(n);
        ok = x && y && ts_dtype_of(x) == ts_dtype_of(y) && ts_numel(x) == ts_numel(y) &&
             ts_copy_to_host(x, bx, n) == TS_OK && ts_copy_to_host(y, by, n) == TS_OK &&
             memcmp(bx, by, n) == 0;
        free(bx), free(by);
    }
    ts_scope_end();
    ts_tensor_list_free(&la), ts_tensor_list_free(&lb);
    return ok;
}

/* ------------------------------------------------------------------ models and their loss */
typedef struct model {
    ts_module *m;
    ts_tensor *x, *y; /* the batch, owned */
    bool gpt;
} model;

static ts_module *gpt_new(ts_device d) {
    ts_manual_seed(9);
    return ts_module_to(
        ts_gpt_new((ts_gpt_config){
            .vocab_size = 16, .context = 8, .n_layer = 2, .n_head = 2, .n_embd = 16}),
        d);
}

static model model_new(bool gpt, ts_device d) {
    model r = {.gpt = gpt};
    if (!gpt) {
        r.m = sweep_mlp_new(d);
        sweep_batch_new(d, &r.x, &r.y);
        return r;
    }
    r.m = gpt_new(d);
    const double tok[17] = {1, 5, 3, 9, 2, 2, 15, 0, 4, 4, 7, 11, 13, 6, 8, 1, 3};
    ts_scope_begin();
    ts_tensor *all = ts_to_dtype(ts_tensor_f64(TS_SHAPE(17), tok, (ts_opts){0}), TS_I64);
    r.x = ts_keep(ts_to(ts_reshape(ts_slice(all, 0, 0, 16, 1), TS_SHAPE(2, 8)), d));
    r.y = ts_keep(ts_to(ts_slice(all, 0, 1, 17, 1), d));
    ts_scope_end();
    return r;
}

static void model_free(model *r) {
    ts_module_free(r->m);
    ts_release(r->x), ts_release(r->y);
}

static void backward(model *r) {
    ts_tensor *out = ts_forward(r->m, r->x);
    if (r->gpt) out = ts_reshape(out, TS_SHAPE(16, 16));
    ts_backward(ts_cross_entropy(ts_to_dtype(out, TS_F32), r->y));
}

/* `steps` steps of the trainer's loop: zero_grad, backward, clip, step, scheduler. */
static void train(model *r, ts_optim *o, ts_lr_scheduler *s, int steps) {
    for (int i = 0; i < steps; i++) {
        ts_scope_begin();
        ts_optim_zero_grad(o);
        backward(r);
        ts_clip_grad_norm_module(r->m, 0.5);
        ts_optim_step(o);
        if (s) ts_scheduler_step(s);
        ts_scope_end();
    }
}

/* Plain training on the device and offloaded training from the same start are equal bit for bit,
 * and the offloaded run leaves no optimizer state on the device. */
static void check_equal(bool gpt, kind k, int steps) {
    const ts_device d = ts_sim(0);
    model a = model_new(gpt, d), b = model_new(gpt, d);
    CHECK(same_params(a.m, b.m));
    ts_optim *oa = make_opt(a.m, k), *ob = make_opt(b.m, k);
    ts_mem_stats before, plain, after;
    CHECK_EQ(ts_memory_stats(d, &before), TS_OK);
    CHECK_EQ(ts_optim_offload(ob), TS_OK);
    CHECK(ts_optim_is_offloaded(ob) && !ts_optim_is_offloaded(oa));
    ts_lr_scheduler *sa = ts_cosine_lr_new(oa, steps, 1e-3),
                    *sb = ts_cosine_lr_new(ob, steps, 1e-3);
    train(&a, oa, sa, steps);
    ts_optim_zero_grad(oa);
    CHECK_EQ(ts_memory_stats(d, &plain), TS_OK);
    train(&b, ob, sb, steps);
    ts_optim_zero_grad(ob);
    CHECK_EQ(ts_memory_stats(d, &after), TS_OK);
    CHECK_OK();
    CHECK(same_params(a.m, b.m));
    CHECK_NEAR(ts_optim_get_lr(oa, 0), ts_optim_get_lr(ob, 0), 0.0);
    /* device memory: the plain optimizer's state is there, the offloaded one's is not */
    CHECK(plain.allocated > before.allocated);
    CHECK_EQ(after.allocated, plain.allocated);
    /* the state dicts have the same keys and values */
    ts_tensor_list sa_d = ts_optim_state_dict(oa), sb_d = ts_optim_state_dict(ob);
    CHECK(sa_d.n == sb_d.n && sa_d.n > 0);
    for (int i = 0; i < sa_d.n && i < sb_d.n; i++) {
        CHECK_STREQ(sa_d.names[i], sb_d.names[i]);
        ts_scope_begin();
        CHECK_NEAR(
            ts_item(ts_max(ts_abs(ts_sub(ts_to(sa_d.tensors[i], ts_cpu()), sb_d.tensors[i])))), 0.0,
            0.0);
        CHECK(ts_device_of(sb_d.tensors[i]).type == TS_CPU);
        ts_scope_end();
    }
    ts_tensor_list_free(&sa_d), ts_tensor_list_free(&sb_d);
    ts_scheduler_free(sa), ts_scheduler_free(sb);
    ts_optim_free(oa), ts_optim_free(ob);
    model_free(&a), model_free(&b);
    CHECK_OK();
}

/* A checkpoint written with offload loads without it and the reverse: training continues as if
 * one optimizer had run throughout. */
static void check_state_dicts(void) {
    const ts_device d = ts_sim(0);
    model a = model_new(false, d), b = model_new(false, d), c = model_new(false, d);
    ts_optim *oa = make_opt(a.m, K_ADAMW), *ob = make_opt(b.m, K_ADAMW);
    ts_optim *oc = make_opt(c.m, K_ADAMW);
    CHECK_EQ(ts_optim_offload(ob), TS_OK);
    train(&a, oa, NULL, 3);
    train(&b, ob, NULL, 3);
    /* offloaded -> plain (c takes b's weights and state), then plain -> offloaded (b from a) */
    ts_tensor_list msd = ts_module_state_dict(b.m), osd = ts_optim_state_dict(ob);
    CHECK_EQ(ts_module_load_state_dict(c.m, &msd, true), TS_OK);
    CHECK_EQ(ts_optim_load_state_dict(oc, &osd), TS_OK);
    ts_tensor_list_free(&msd), ts_tensor_list_free(&osd);
    osd = ts_optim_state_dict(oa);
    CHECK_EQ(ts_optim_load_state_dict(ob, &osd), TS_OK);
    ts_tensor_list_free(&osd);
    train(&a, oa, NULL, 3);
    train(&b, ob, NULL, 3);
    train(&c, oc, NULL, 3);
    CHECK_OK();
    CHECK(same_params(a.m, b.m));
    CHECK(same_params(a.m, c.m));
    /* a loaded checkpoint's weights reach the masters (re-read before the next step) */
    model e = model_new(false, d);
    ts_optim *oe = make_opt(e.m, K_ADAMW);
    CHECK_EQ(ts_optim_offload(oe), TS_OK);
    msd = ts_module_state_dict(a.m);
    osd = ts_optim_state_dict(oa);
    CHECK_EQ(ts_module_load_state_dict(e.m, &msd, true), TS_OK);
    CHECK_EQ(ts_optim_load_state_dict(oe, &osd), TS_OK);
    ts_tensor_list_free(&msd), ts_tensor_list_free(&osd);
    train(&a, oa, NULL, 2);
    train(&e, oe, NULL, 2);
    CHECK(same_params(a.m, e.m));
    ts_optim_free(oa), ts_optim_free(ob), ts_optim_free(oc), ts_optim_free(oe);
    model_free(&a), model_free(&b), model_free(&c), model_free(&e);
    CHECK_OK();
}

/* Parameters of dtype dt on d: the masters follow a float32 AdamW reference on the cpu fed the
 * same gradients bit for bit, and the device weights are the masters rounded to dt. The reference
 * reads the gradients after the offloaded step: that step must have waited for its own copies
 * (on cuda, asynchronous ones queued behind backward's kernels). */
static void check_reference(ts_device d, ts_dtype dt) {
    model r = model_new(false, d);
    ts_module_to_dtype(r.m, dt);
    ts_optim *o = ts_adamw_new(r.m, (ts_adam_opts){.lr = 3e-2, .weight_decay = 0.1});
    CHECK_EQ(ts_optim_offload(o), TS_OK);
    ts_tensor_list l = ts_module_named_parameters(r.m);
    ts_tensor *ref[8];
    CHECK(l.n == 4);
    ts_scope_begin();
    for (int i = 0; i < l.n; i++) {
        ref[i] = ts_keep(ts_detach(ts_to_dtype(ts_to(l.tensors[i], ts_cpu()), TS_F32)));
        ts_set_requires_grad(ref[i], true);
    }
    ts_tensor *xb = ts_keep(ts_to_dtype(r.x, dt));
    ts_scope_end();
    ts_optim *oref = ts_adamw_new_params(ref, l.n, (ts_adam_opts){.lr = 3e-2, .weight_decay = 0.1});
    ts_release(r.x);
    r.x = xb;
    for (int s = 0; s < 6; s++) {
        ts_scope_begin();
        ts_optim_zero_grad(o);
        backward(&r);
        ts_optim_step(o);
        for (int i = 0; i < l.n; i++)
            ts_set_grad(ref[i], ts_to_dtype(ts_to(ts_grad(l.tensors[i]), ts_cpu()), TS_F32));
        ts_optim_step(oref);
        ts_scope_end();
    }
    CHECK_OK();
    double worst = 0;
    ts_scope_begin();
    for (int i = 0; i < l.n; i++) {
        ts_tensor *m = ts_optim_offload_master(o, i), *p = ts_to(l.tensors[i], ts_cpu());
        CHECK(ts_dtype_of(m) == TS_F32 && ts_dtype_of(p) == dt);
        CHECK_NEAR(ts_item(ts_max(ts_abs(ts_sub(m, ref[i])))), 0.0, 0.0);
        CHECK_NEAR(ts_item(ts_max(ts_abs(ts_sub(ts_to_dtype(p, TS_F32),
                                                ts_to_dtype(ts_to_dtype(ref[i], dt), TS_F32))))),
                   0.0, 0.0);
        /* and the device weights are within bf16's half-ulp of the masters (2^-9 relative) */
        ts_tensor *err = ts_abs(ts_sub(ts_to_dtype(p, TS_F32), m));
        ts_tensor *tol = ts_mul_scalar(ts_abs(m), 1.0 / 256);
        worst = fmax(worst, ts_item(ts_max(ts_sub(err, tol))));
    }
    ts_scope_end();
    CHECK(worst <= 0);
    for (int i = 0; i < l.n; i++) ts_release(ref[i]);
    ts_tensor_list_free(&l);
    ts_optim_free(o), ts_optim_free(oref);
    model_free(&r);
    CHECK_OK();
}

/* Through the grad scaler (its unscale rewrites the gradients after backward copied them: the
 * step copies them again): as plain. */
static void check_grad_scaler(void) {
    const ts_device d = ts_sim(0);
    model a = model_new(false, d), b = model_new(false, d);
    ts_optim *oa = make_opt(a.m, K_ADAMW), *ob = make_opt(b.m, K_ADAMW);
    CHECK_EQ(ts_optim_offload(ob), TS_OK);
    ts_grad_scaler *ga = ts_grad_scaler_new((ts_grad_scaler_opts){0});
    ts_grad_scaler *gb = ts_grad_scaler_new((ts_grad_scaler_opts){0});
    int stepped_n = 0;
    for (int i = 0; i < 4; i++) {
        model *r[2] = {&a, &b};
        ts_optim *o[2] = {oa, ob};
        ts_grad_scaler *g[2] = {ga, gb};
        for (int k = 0; k < 2; k++) {
            ts_scope_begin();
            ts_optim_zero_grad(o[k]);
            ts_backward(ts_grad_scaler_scale(
                g[k], ts_cross_entropy(ts_forward(r[k]->m, r[k]->x), r[k]->y)));
            bool stepped = true;
            ts_grad_scaler_step(g[k], o[k], &stepped);
            stepped_n += stepped;
            ts_grad_scaler_update(g[k]);
            ts_scope_end();
        }
    }
    CHECK_OK();
    CHECK_EQ(stepped_n, 8);
    CHECK(same_params(a.m, b.m));
    model c = model_new(false, d);
    CHECK(!same_params(a.m, c.m)); /* and the later steps did train */
    ts_grad_scaler_free(ga), ts_grad_scaler_free(gb);
    ts_optim_free(oa), ts_optim_free(ob);
    model_free(&a), model_free(&b), model_free(&c);
    CHECK_OK();
}

static void check_errors(void) {
    ts_module *m = sweep_mlp_new(ts_cpu());
    ts_optim *o = make_opt(m, K_SGD);
    ts_optim_offload(o);
    CHECK_ERR_HAS(TS_ERR_DEVICE, "already on the cpu");
    CHECK(!ts_optim_is_offloaded(o));
    CHECK(ts_optim_offload_master(o, 0) == NULL);
    ts_error_clear();
    CHECK_EQ(ts_optim_offload(NULL), TS_ERR_ARG);
    ts_error_clear();
    ts_optim_free(o);
    ts_module_free(m);
    m = sweep_mlp_new(ts_sim(0));
    o = make_opt(m, K_SGD);
    CHECK_EQ(ts_optim_offload(o), TS_OK);
    CHECK_EQ(ts_optim_offload(o), TS_OK); /* twice: nothing more */
    CHECK(ts_optim_offload_master(o, 4) == NULL);
    ts_error_clear();
    ts_optim_free(o);
    ts_module_free(m);
    CHECK_OK();
}

/* The parameter takes other elements after it was offloaded (ts_tensor_set_data). Another view of
 * the same storage (no version bump) is re-read into the master: [1 1 1 1 | 5 5 5 5], p the first
 * half, stepped (lr 0.5, gradient 1) to 0.5, then the second half, stepped to 4.5 (a stale master
 * gives 0). Another shape: the host buffers keep the old one, so the step refuses (TS_ERR_SHAPE)
 * and changes nothing, also with a gradient from a backward over the new shape (which the
 * grad-ready hook must not copy into the old buffers); a gradient set before the change no longer
 * matches the parameter (TS_ERR_ARG). */
static void check_set_data(void) {
    const ts_opts on_sim = {.device = ts_sim(0)};
    ts_tensor *host = ts_tensor_f64(TS_SHAPE(8), (const double[]){1, 1, 1, 1, 5, 5, 5, 5},
                                    (ts_opts){.dtype = TS_F32});
    ts_tensor *base = ts_to(host, ts_sim(0));
    ts_release(host);
    ts_tensor *p = ts_narrow(base, 0, 0, 4);
    CHECK_EQ(ts_set_requires_grad(p, true), TS_OK);
    ts_optim *o = ts_sgd_new_params(&p, 1, (ts_sgd_opts){.lr = 0.5});
    CHECK_EQ(ts_optim_offload(o), TS_OK);
    ts_scope_begin();
    CHECK_EQ(ts_set_grad(p, ts_ones(TS_SHAPE(4), on_sim)), TS_OK);
    CHECK_EQ(ts_optim_step(o), TS_OK);
    CHECK_NEAR(ts_item(ts_sum(p)), 4 * 0.5, 0);
    CHECK_EQ(ts_tensor_set_data(p, ts_narrow(ts_detach(base), 0, 4, 4)), TS_OK);
    CHECK_EQ(ts_optim_step(o), TS_OK);
    CHECK_NEAR(ts_item(ts_sum(p)), 4 * 4.5, 0);
    CHECK_EQ(ts_tensor_set_data(p, ts_full(TS_SHAPE(8), 2, on_sim)), TS_OK);
    CHECK_EQ(ts_optim_step(o), TS_ERR_ARG); /* the gradient is still [4] */
    CHECK_ERR_HAS(TS_ERR_ARG, "does not match it");
    CHECK_EQ(ts_set_grad(p, NULL), TS_OK);
    CHECK_EQ(ts_backward(ts_sum(ts_mul_scalar(p, 3))), TS_OK); /* gradient 3, [8] */
    CHECK_EQ(ts_optim_step(o), TS_ERR_SHAPE);
    CHECK_ERR_HAS(TS_ERR_SHAPE, "changed shape since it was offloaded");
    CHECK_NEAR(ts_item(ts_sum(p)), 8 * 2, 0);
    ts_scope_end();
    ts_optim_free(o);
    ts_release(p), ts_release(base);
    CHECK_OK();
}

/* ------------------------------------------------------------------ allocation failures */
static void *offload_setup(void) {
    sweep_trainee *t = calloc(1, sizeof *t);
    t->m = sweep_mlp_new(ts_sim(0));
    t->o = make_opt(t->m, K_ADAMW);
    ts_optim_offload(t->o);
    sweep_batch_new(ts_sim(0), &t->x, &t->y);
    sweep_trainee_step(t);
    return t;
}

static void *build_setup(void) {
    sweep_trainee *t = calloc(1, sizeof *t);
    t->m = sweep_mlp_new(ts_sim(0));
    t->o = make_opt(t->m, K_SGD);
    return t;
}
static bool build_run(void *p) { return ts_optim_offload(((sweep_trainee *)p)->o) == TS_OK; }

static void check_faults(void) {
    ts_sweep_case step = {.name = "offloaded step",
                          .setup = offload_setup,
                          .run = sweep_trainee_step,
                          .teardown = sweep_trainee_free,
                          .snap = sweep_trainee_snap};
    ts_fault_sweep(&step, 20000);
    ts_sweep_case build = {
        .name = "offload", .setup = build_setup, .run = build_run, .teardown = sweep_trainee_free};
    ts_fault_sweep(&build, 20000);
}

int main(void) {
    ts_sim_configure(2, 0);
    check_equal(false, K_ADAMW, 20);
    check_equal(false, K_SGD, 20);
    check_equal(true, K_ADAMW, 20);
    check_equal(true, K_SGD, 20);
    check_state_dicts();
    check_reference(ts_sim(0), TS_BF16);
    if (ts_device_count(TS_CUDA) > 0) { /* the asynchronous copies on the current stream */
        check_reference(ts_cuda(0), TS_F32);
        check_reference(ts_cuda(0), TS_BF16);
    }
    check_grad_scaler();
    check_errors();
    check_set_data();
    check_faults();
    return ts_test_finish();
}
