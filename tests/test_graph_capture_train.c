/* test_graph_capture_train.c — captured training steps with state that changes from step to step
 * (docs/CAPTURE.md): over 100 steps, eager training and 3 eager warm-up steps + one capture +
 * replays give the same losses and parameters bit for bit, on cpu, sim:0 and cuda:0, for
 *   - LeNet with SGD momentum and a step learning-rate schedule stepped between replays;
 *   - a GPT-mini with dropout (embeddings, attention weights, residuals) trained by AdamW (two
 *     parameter groups) under a warm-up + cosine schedule: dropout masks differ per replay as
 *     they do per eager step, Adam's step counts and bias corrections advance on the device;
 *   - an autocast bf16 MLP with the grad scaler, one batch holding an Inf: the replay skips that
 *     step on the device exactly as the eager step skips it on the host, and the scale backs off
 *     and grows the same;
 * and what a captured step must not contain: a schedule step, a learning-rate change, a state
 * dict, a host-drawn permutation (each an error naming the op, the capture broken). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lenet_model.h"
#include "state_snapshot.h"
#include "ts_test.h"

enum { STEPS = 100, WARMUP = 3, INF_STEP = 40 };

typedef enum { M_LENET, M_GPT, M_AMP } model_kind;
static const char *kind_name[] = {"LeNet", "GPT-mini", "AMP MLP"};

/* ------------------------------------------------------------------ models */
typedef struct net {
    ts_module base;
    ts_module *f1, *f2;
} net;

static ts_tensor *mlp_forward(ts_module *self, ts_tensor *x) {
    net *m = (net *)self;
    return ts_forward(m->f2, ts_relu(ts_forward(m->f1, x)));
}

static const ts_gpt_config gpt_cfg = {
    .vocab_size = 16, .context = 16, .n_layer = 2, .n_head = 2, .n_embd = 32, .dropout = 0.1};

static ts_module *model_new(model_kind k, ts_device dev) {
    ts_manual_seed(7);
    if (k == M_GPT) return ts_module_to(ts_gpt_new(gpt_cfg), dev);
    if (k == M_LENET) return ts_module_to(ts_test_lenet_new(1, 2), dev);
    net *m = ts_module_alloc(sizeof *m, kind_name[k], mlp_forward);
    m->f1 = ts_module_add(&m->base, "f1", ts_linear_new(20, 64));
    m->f2 = ts_module_add(&m->base, "f2", ts_linear_new(64, 4));
    return ts_module_to(&m->base, dev);
}

/* ------------------------------------------------------------------ data */
static ts_tensor *xs[STEPS], *ys[STEPS];

/* GPT: sequences t -> t + 5 (mod 16) from random starts (learnable); LeNet: random images with a
 * teacher's labels; AMP: Gaussian inputs with a teacher's labels, one batch holding an Inf */
static void make_data(model_kind k, ts_device dev) {
    ts_manual_seed(99);
    ts_tensor *teacher =
        ts_randn(TS_SHAPE(k == M_LENET ? 784 : 20, k == M_LENET ? 10 : 4), (ts_opts){0});
    for (int s = 0; s < STEPS; s++) {
        ts_tensor *x, *y;
        if (k == M_LENET && s >= 10) { /* ten batches, seen ten times each: learnable */
            xs[s] = ts_retain(xs[s % 10]);
            ys[s] = ts_retain(ys[s % 10]);
            continue;
        }
        if (k == M_GPT) {
            int64_t start[4], seq[4][17];
            ts_copy_to_host(ts_randint(0, 16, TS_SHAPE(4), (ts_opts){0}), start, sizeof start);
            for (int b = 0; b < 4; b++)
                for (int i = 0; i < 17; i++) seq[b][i] = (start[b] + 5 * i) % 16;
            ts_tensor *all = ts_from_data(TS_SHAPE(4, 17), TS_I64, seq, (ts_opts){0});
            x = ts_narrow(all, 1, 0, 16);
            y = ts_contiguous(ts_narrow(all, 1, 1, 16));
        } else if (k == M_LENET) {
            x = ts_randn(TS_SHAPE(8, 784), (ts_opts){0});
            y = ts_argmax_dim(ts_matmul(x, teacher), 1, false);
            x = ts_reshape(x, TS_SHAPE(8, 1, 28, 28));
        } else {
            x = ts_randn(TS_SHAPE(16, 20), (ts_opts){0});
            y = ts_argmax_dim(ts_matmul(x, teacher), 1, false);
            if (s == INF_STEP) {
                float v[16 * 20];
                ts_copy_to_host(x, v, sizeof v);
                v[3] = INFINITY;
                x = ts_from_data(TS_SHAPE(16, 20), TS_F32, v, (ts_opts){0});
            }
        }
        xs[s] = ts_keep(ts_contiguous(ts_to(x, dev)));
        ys[s] = ts_keep(ts_to(y, dev)); /* out of the caller's scope: free_data releases them */
    }
}

static void free_data(void) {
    for (int s = 0; s < STEPS; s++) ts_release(xs[s]), ts_release(ys[s]);
}

/* ------------------------------------------------------------------ training */
typedef struct trainer {
    model_kind k;
    ts_module *m;
    ts_optim *opt;
    ts_lr_scheduler *sched;
    ts_grad_scaler *scaler;
} trainer;

static trainer trainer_new(model_kind k, ts_device dev) {
    trainer t = {.k = k, .m = model_new(k, dev)};
    if (k == M_GPT) {
        t.opt = ts_adamw_new_decay_groups(t.m, (ts_adam_opts){.lr = 3e-3, .weight_decay = 0.1});
        t.sched = ts_warmup_cosine_lr_new(t.opt, 10, STEPS, 0.1);
    } else {
        t.opt = ts_sgd_new(t.m, (ts_sgd_opts){.lr = 0.05, .momentum = 0.9, .weight_decay = 1e-4});
        if (k == M_LENET) t.sched = ts_step_lr_new(t.opt, 30, 0.5);
    }
    if (k == M_AMP)
        t.scaler =
            ts_grad_scaler_new((ts_grad_scaler_opts){.init_scale = 1024, .growth_interval = 20});
    return t;
}

static void trainer_free(trainer *t) {
    ts_scheduler_free(t->sched);
    ts_grad_scaler_free(t->scaler);
    ts_optim_free(t->opt);
    ts_module_free(t->m);
}

/* one training step on x, y; the loss (in the caller's scope) */
static ts_tensor *train_step(trainer *t, ts_tensor *x, ts_tensor *y) {
    ts_optim_zero_grad(t->opt);
    ts_device_type dt = ts_device_of(x).type;
    if (t->k == M_AMP) ts_autocast_begin(dt, TS_BF16);
    ts_tensor *out = ts_forward(t->m, x);
    if (t->k == M_GPT) out = ts_reshape(out, TS_SHAPE(-1, 16)), y = ts_reshape(y, TS_SHAPE(-1));
    ts_tensor *loss = ts_cross_entropy(ts_to_dtype(out, TS_F32), y);
    if (t->k == M_AMP) ts_autocast_end();
    if (t->scaler) {
        ts_backward(ts_grad_scaler_scale(t->scaler, loss));
        bool stepped = true;
        ts_grad_scaler_step(t->scaler, t->opt, &stepped);
        if (ts_graph_is_capturing()) CHECK(!stepped); /* decided by each replay */
        ts_grad_scaler_update(t->scaler);
    } else {
        ts_backward(loss);
        ts_optim_step(t->opt);
    }
    return loss;
}

/* the schedule steps after each step, outside the captured region */
static void after_step(trainer *t) {
    if (t->sched) ts_scheduler_step(t->sched);
}

/* STEPS eager steps from the start; the trainer, for its state */
static trainer train_eagerly(model_kind k, ts_device dev, double *losses) {
    ts_manual_seed(1234); /* the dropout masks' stream, the same for every run */
    trainer a = trainer_new(k, dev);
    ts_manual_seed(1234);
    for (int s = 0; s < STEPS; s++) {
        ts_scope_begin();
        losses[s] = ts_item(train_step(&a, xs[s], ys[s]));
        ts_scope_end();
        after_step(&a);
    }
    return a;
}

/* On cuda: whether a second eager run repeats the first's losses bit for bit (atomic adds, as
 * in scatter_add for the embedding's gradient, and some of cuDNN's algorithms add in a varying
 * order). */
static bool eager_reproducible(model_kind k, ts_device dev, const double *eager) {
    if (dev.type != TS_CUDA) return true;
    double again[STEPS];
    trainer t = train_eagerly(k, dev, again);
    trainer_free(&t);
    return memcmp(again, eager, sizeof again) == 0;
}

static void check_replay_equals_eager(model_kind k, ts_device dev) {
    ts_scope_begin();
    make_data(k, dev);
    double eager[STEPS], replayed[STEPS];
    trainer a = train_eagerly(k, dev, eager);
    const double eager_scale = a.scaler ? ts_grad_scaler_get_scale(a.scaler) : 0;

    trainer b = trainer_new(k, dev);
    ts_manual_seed(1234);
    for (int s = 0; s < WARMUP; s++) {
        ts_scope_begin();
        replayed[s] = ts_item(train_step(&b, xs[s], ys[s]));
        ts_scope_end();
        after_step(&b);
    }
    ts_tensor *sx = ts_keep(ts_empty_like(xs[0])), *sy = ts_keep(ts_empty_like(ys[0]));
    ts_graph *g = ts_graph_capture_begin(dev, (ts_graph_opts){0});
    ts_scope_begin();
    ts_tensor *loss = ts_keep(train_step(&b, sx, sy));
    ts_scope_end();
    CHECK_EQ(ts_graph_capture_end(), TS_OK);
    if (ts_error()) printf("  capture failed: %s\n", ts_error_message());
    for (int s = WARMUP; s < STEPS; s++) {
        ts_copy_(sx, xs[s]);
        ts_copy_(sy, ys[s]);
        CHECK_EQ(ts_graph_replay(g), TS_OK);
        replayed[s] = ts_item(loss);
        after_step(&b);
    }
    int equal = 0;
    for (int s = 0; s < STEPS; s++) {
        const bool same = memcmp(&eager[s], &replayed[s], sizeof(double)) == 0;
        equal += same;
        if (!same) printf("  step %d: eager %a, replayed %a\n", s, eager[s], replayed[s]);
    }
    printf("  %-8s on %-6s %4lld kernels a step; losses %.4f -> %.4f; %d of %d equal bit for bit\n",
           kind_name[k], ts_device_str(dev), (long long)ts_graph_kernel_count(g), eager[0],
           eager[STEPS - 1], equal, STEPS);
    if (equal < STEPS && !eager_reproducible(k, dev, eager)) {
        printf("  SKIP the bit-for-bit checks of %s on %s: two eager runs already differ "
               "(atomic adds, as in the embedding's gradient, and cuDNN's algorithms add in a "
               "varying order)\n",
               kind_name[k], ts_device_str(dev));
    } else {
        CHECK_EQ(equal, STEPS);
        /* parameters, optimizer state (step counts read back from the device) and the scaler */
        ts_snapshot sa = ts_snapshot_take(a.m, a.opt, a.scaler),
                    sb = ts_snapshot_take(b.m, b.opt, b.scaler);
        ts_snapshot_check("state after replays", &sb, &sa);
        ts_snapshot_free(&sa), ts_snapshot_free(&sb);
    }
    CHECK(eager[STEPS - 1] < 0.8 * eager[0]); /* it learned: the comparison means something */
    if (k == M_AMP) {
        CHECK(!isfinite(eager[INF_STEP]));                         /* the Inf batch... */
        CHECK_EQ(ts_grad_scaler_get_scale(b.scaler), eager_scale); /* ...backed the scale off */
        CHECK(eager_scale != 1024);
    }
    if (k == M_GPT) { /* Adam's step counts went on on the device */
        ts_tensor_list sd = ts_optim_state_dict(b.opt);
        CHECK_EQ(ts_item(ts_tensor_list_get(&sd, "state.0.step")), (double)STEPS);
        ts_tensor_list_free(&sd);
    }
    ts_release(sx), ts_release(sy);
    ts_graph_free(g);
    trainer_free(&a);
    trainer_free(&b);
    free_data();
    ts_scope_end();
    CHECK_EQ(ts_error(), TS_OK);
    ts_error_clear();
}

/* ------------------------------------------------------------------ refusals */
typedef enum { R_SCHEDULER, R_SET_LR, R_STATE_DICT, R_RANDPERM } refusal;

static void check_refusal(refusal r, ts_device dev, const char *frag) {
    ts_scope_begin();
    make_data(M_LENET, dev);
    trainer t = trainer_new(M_LENET, dev);
    train_step(&t, xs[0], ys[0]); /* warm-up */
    ts_graph *g = ts_graph_capture_begin(dev, (ts_graph_opts){0});
    train_step(&t, xs[1], ys[1]);
    switch (r) {
    case R_SCHEDULER:
        ts_scheduler_step(t.sched);
        break;
    case R_SET_LR:
        CHECK_EQ(ts_optim_set_lr(t.opt, 0, 0.5), TS_ERR_STATE);
        break;
    case R_STATE_DICT: {
        ts_tensor_list sd = ts_optim_state_dict(t.opt);
        CHECK_EQ(sd.n, 0);
        ts_tensor_list_free(&sd);
        break;
    }
    case R_RANDPERM:
        CHECK(ts_randperm(8, (ts_opts){.device = dev}) == NULL);
        break;
    }
    const char *msg = ts_error_message();
    bool ok = ts_error() == TS_ERR_STATE && strstr(msg, frag) && strstr(msg, "while capturing");
    if (!ok) ts_test_failf(__FILE__, __LINE__, "expected \"%s\", got \"%s\"", frag, msg);
    ts_test_record(ok);
    printf("  refused on %s: %s\n", ts_device_str(dev), msg);
    CHECK_EQ(ts_graph_capture_end(), TS_ERR_STATE);
    ts_error_clear();
    ts_graph_free(g);
    CHECK_EQ(ts_optim_get_lr(t.opt, 0), 0.05); /* a refused change changes nothing */
    ts_error_clear();
    trainer_free(&t);
    free_data();
    ts_scope_end();
}

int main(void) {
    setvbuf(stdout, NULL, _IONBF, 0);
    ts_device devs[TS_TEST_MAX_DEVICES];
    const int nd = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    printf("replayed training equals eager training:\n");
    for (int d = 0; d < nd; d++)
        for (int k = M_LENET; k <= M_AMP; k++) check_replay_equals_eager((model_kind)k, devs[d]);
    printf("refusals:\n");
    for (int d = 0; d < nd; d++) {
        check_refusal(R_SCHEDULER, devs[d], "scheduler_step: a learning-rate schedule step");
        check_refusal(R_SET_LR, devs[d], "optim_set_lr: a change of the learning rate");
        check_refusal(R_STATE_DICT, devs[d], "optim_state_dict: a host read of the state");
        check_refusal(R_RANDPERM, devs[d], "randperm: a random permutation");
    }
    return ts_test_finish();
}
