/* test_dist_fsdp.c — sharded data parallel (run as a world of one, and by ctest under mpiexec with
 * 2 and 4 ranks): 20 steps of AdamW on a GPT-mini and of SGD with momentum on a ResNet-20 (a
 * narrower one) under each stage (1, 2, 3; stage 3 also keeping parameters until backward and
 * without prefetch) equal DDP on the same global batch; no_sync accumulation; units from the
 * size policy; clipping by the global norm across shards; the memory each stage holds and a GPT's
 * stage-3 peak against the formula; the errors
 * (a unit that does not exist, a stage out of range, a unit's parameters on two devices, a tensor
 * shared by two units, a model that differs across ranks). Every rank trains both the DDP and the
 * FSDP model, so each compares on its own. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ts_test.h"

static int rank, world;

/* ------------------------------------------------------------------ models and data */
typedef enum { M_GPT, M_RESNET } model_kind;

static const ts_gpt_config MINI = {
    .vocab_size = 32, .context = 16, .n_layer = 2, .n_head = 2, .n_embd = 32};
#define GPT_ROWS 2 /* sequences per rank */
#define RES_ROWS 2 /* images per rank */
#define RES_HW   16

static ts_module *model_new(model_kind k, uint64_t seed, ts_device dev) {
    ts_manual_seed(seed);
    ts_module *m = k == M_GPT ? ts_gpt_new(MINI) : ts_resnet20_new((ts_resnet_config){.width = 8});
    return ts_module_to(ts_module_to_dtype(m, TS_F64), dev);
}

/* The global batch of a step, the same on every rank; this rank's rows come out. */
static void batch(model_kind k, int step, ts_device dev, ts_tensor **x, ts_tensor **y) {
    ts_rng_state saved = ts_rng_get_state();
    ts_manual_seed(1000 + (uint64_t)step);
    if (k == M_GPT) {
        ts_tensor *tok =
            ts_randint(0, MINI.vocab_size, TS_SHAPE(GPT_ROWS * world, MINI.context + 1),
                       (ts_opts){.dtype = TS_I64});
        tok = ts_narrow(tok, 0, (int64_t)rank * GPT_ROWS, GPT_ROWS);
        *x = ts_to(ts_contiguous(ts_narrow(tok, 1, 0, MINI.context)), dev);
        *y = ts_to(ts_contiguous(ts_narrow(tok, 1, 1, MINI.context)), dev);
    } else {
        ts_tensor *img =
            ts_randn(TS_SHAPE(RES_ROWS * world, 3, RES_HW, RES_HW), (ts_opts){.dtype = TS_F64});
        ts_tensor *lab = ts_randint(0, 10, TS_SHAPE(RES_ROWS * world), (ts_opts){0});
        *x = ts_to(ts_narrow(img, 0, (int64_t)rank * RES_ROWS, RES_ROWS), dev);
        *y = ts_to(ts_narrow(lab, 0, (int64_t)rank * RES_ROWS, RES_ROWS), dev);
    }
    ts_rng_set_state(saved);
}

static ts_tensor *loss_of(model_kind k, ts_tensor *out, ts_tensor *y) {
    if (k == M_GPT)
        return ts_cross_entropy(ts_reshape(out, TS_SHAPE(-1, MINI.vocab_size)),
                                ts_reshape(y, TS_SHAPE(-1)));
    return ts_cross_entropy(out, y);
}

static ts_optim *optim_for(model_kind k, ts_tensor *const *p, int n) {
    if (k == M_GPT)
        return ts_adamw_new_params(p, n, (ts_adam_opts){.lr = 3e-3, .weight_decay = 0.01});
    return ts_sgd_new_params(p, n, (ts_sgd_opts){.lr = 0.05, .momentum = 0.9});
}

/* max over parameters of |a - b| / max(|b|, 1e-3): relative, and absolute near zero */
static double params_rel_diff(ts_module *a, ts_module *b) {
    ts_tensor_list la = ts_module_named_parameters(a), lb = ts_module_named_parameters(b);
    double worst = la.n == lb.n && la.n > 0 ? 0 : INFINITY;
    for (int i = 0; i < la.n && i < lb.n; i++) {
        ts_scope_begin();
        if (strcmp(la.names[i], lb.names[i])) worst = INFINITY;
        ts_tensor *ta = ts_to_dtype(ts_to(la.tensors[i], ts_cpu()), TS_F64);
        ts_tensor *tb = ts_to_dtype(ts_to(lb.tensors[i], ts_cpu()), TS_F64);
        ts_tensor *den = ts_clamp_min(ts_abs(tb), 1e-3);
        double d = ts_item(ts_max(ts_div(ts_abs(ts_sub(ta, tb)), den)));
        if (!(d <= worst)) worst = d;
        ts_scope_end();
    }
    ts_tensor_list_free(&la);
    ts_tensor_list_free(&lb);
    return worst;
}

static const char *const GPT_UNITS[] = {"blocks.0", "blocks.1"};
static const char *const RES_UNITS[] = {"layer1", "layer2", "layer3"};
static const char *const RES_ALL[] = {"conv1", "bn1", "layer1", "layer2", "layer3", "fc"};

/* ------------------------------------------------------------------ THE equivalence */
/* Rank r trains on its rows of each global batch with DDP and with FSDP, both from rank 0's
 * weights (each rank seeds differently: construction must broadcast). The two differ only in the
 * order of the sums that average the gradients: DDP all-reduces g / W, FSDP reduce-scatters (or,
 * stage 1, all-reduces) the same g / W, and Open MPI adds the W terms in another order for
 * MPI_Reduce_scatter_block than for MPI_Allreduce once W > 2 (with 2 ranks a + b is one sum
 * either way, and the results are bitwise equal). Measured with 4 ranks: the gradients differ by
 * ~1e-8 absolute after one step, as rounding predicts; but 20 float32 steps amplify it (AdamW
 * divides by sqrt(v) where gradients are tiny; BatchNorm over 2 images a rank is steep): 1.4e-2
 * relative for the GPT, more for the ResNet. So the models train in float64, where the same
 * reordering costs ~1e-16 per sum and stays far below 1e-6 after 20 steps, while a missing or
 * doubled contribution, a wrong shard offset or a missing average shows at >= 1e-3. */
typedef struct variant {
    int stage;
    bool keep, no_prefetch, no_sync, policy;
    bool no_root; /* ResNet: every parameter in a named unit, so there is no root unit */
    bool offload; /* cpu_offload: shards, their gradients and the optimizer's state on the host */
    double clip;  /* > 0: clip by the global norm (in turn the 2-norm, the max norm, the 3-norm) */
} variant;

static void equivalence(model_kind k, ts_device dev, variant v) {
    static const char *names[] = {"GPT-mini/AdamW", "ResNet-20/SGD+momentum"};
    ts_module *ddp = ts_ddp_new(model_new(k, 42 + (uint64_t)rank, dev), (ts_ddp_opts){0});
    ts_fsdp_opts o = {.stage = v.stage,
                      .no_reshard_after_forward = v.keep,
                      .no_prefetch = v.no_prefetch,
                      .cpu_offload = v.offload};
    if (v.policy) {
        o.min_unit_params = k == M_GPT ? 10000 : 3000;
    } else if (v.no_root) {
        o.units = RES_ALL;
        o.n_units = 6;
    } else {
        o.units = k == M_GPT ? GPT_UNITS : RES_UNITS;
        o.n_units = k == M_GPT ? 2 : 3;
    }
    ts_module *f = ts_fsdp_new(model_new(k, 42 + (uint64_t)rank, dev), o);
    CHECK(ddp && f);
    if (!ddp || !f) {
        ts_module_free(ddp);
        ts_module_free(f);
        ts_error_clear();
        return;
    }
    CHECK(ts_fsdp_unshard(f) == TS_OK);
    CHECK(params_rel_diff(ts_fsdp_module(f), ts_ddp_module(ddp)) == 0);
    ts_tensor_list ddp_p = ts_module_named_parameters(ddp), shards = ts_fsdp_parameters(f);
    ts_optim *o_ddp = optim_for(k, ddp_p.tensors, ddp_p.n);
    ts_optim *o_f = optim_for(k, shards.tensors, shards.n);
    ts_fsdp_stats st;
    CHECK(ts_fsdp_get_stats(f, &st) == TS_OK);
    CHECK_EQ(st.units, shards.n);
    /* offloaded: every shard on the host, page-locked, the parameters on their device */
    for (int i = 0; v.offload && i < shards.n; i++) {
        CHECK_EQ(ts_device_of(shards.tensors[i]).type, TS_CPU);
        CHECK(ts_is_pinned(shards.tensors[i]));
    }
    int clipped = 0;
    for (int step = 0; step < 20; step++) {
        ts_scope_begin();
        ts_tensor *x, *y;
        batch(k, step, dev, &x, &y);
        ts_optim_zero_grad(o_ddp);
        ts_optim_zero_grad(o_f);
        if (v.no_sync) {
            /* two halves, in both: the first accumulates locally, the second reduces the sum;
             * each loss halved so the sum is the mean over the rank's rows */
            int64_t h = ts_size(x, 0) / 2;
            ts_ddp_no_sync_begin(ddp);
            ts_fsdp_no_sync_begin(f);
            for (int half = 0; half < 2; half++) {
                ts_tensor *xh = ts_narrow(x, 0, half * h, h), *yh = ts_narrow(y, 0, half * h, h);
                ts_backward(ts_mul_scalar(loss_of(k, ts_forward(ddp, xh), yh), 0.5));
                ts_backward(ts_mul_scalar(loss_of(k, ts_forward(f, xh), yh), 0.5));
                ts_ddp_no_sync_end(ddp);
                ts_fsdp_no_sync_end(f);
            }
        } else {
            ts_backward(loss_of(k, ts_forward(ddp, x), y));
            ts_backward(loss_of(k, ts_forward(f, x), y));
        }
        if (v.clip > 0) {
            double type = step % 3 == 0 ? 2 : step % 3 == 1 ? INFINITY : 3;
            double nd = ts_clip_grad_norm(ddp_p.tensors, ddp_p.n, v.clip, type);
            double nf = ts_fsdp_clip_grad_norm(f, v.clip, type);
            CHECK(fabs(nd - nf) <= 1e-9 * nd);
            clipped += nd > v.clip;
        }
        /* offloaded: the reduced gradients came back to the shards on the host */
        for (int i = 0; v.offload && i < shards.n; i++)
            CHECK(ts_grad(shards.tensors[i]) &&
                  ts_device_of(ts_grad(shards.tensors[i])).type == TS_CPU);
        ts_optim_step(o_ddp);
        ts_optim_step(o_f);
        ts_scope_end();
        CHECK_OK();
    }
    CHECK(ts_fsdp_unshard(f) == TS_OK);
    double d = params_rel_diff(ts_fsdp_module(f), ts_ddp_module(ddp));
    const double tol = 1e-6;
    if (!(d <= tol) || getenv("TS_TEST_VERBOSE"))
        printf("rank %d: %s on %s, stage %d%s%s%s%s: parameters differ from DDP's by %.3g "
               "relative (tolerance %g)\n",
               rank, names[k], ts_device_str(dev), v.stage, v.keep ? ", kept after forward" : "",
               v.no_prefetch ? ", no prefetch" : "",
               v.no_sync   ? ", no_sync"
               : v.offload ? ", cpu_offload"
                           : "",
               v.policy     ? ", size policy"
               : v.no_root  ? ", no root unit"
               : v.clip > 0 ? ", clipped"
                            : "",
               d, tol);
    CHECK(d <= tol);
    if (v.clip > 0) CHECK(clipped >= 5); /* the clipping did scale, often */
    CHECK(ts_fsdp_get_stats(f, &st) == TS_OK);
    if (world > 1) {
        if (v.stage == 1) CHECK(st.all_reduces > 0 && st.reduce_scatters == 0);
        if (v.stage > 1) CHECK(st.reduce_scatters > 0 && st.all_reduces == 0);
    }
    /* one reduction per unit and step: none from the backwards inside no_sync */
    CHECK_EQ(st.all_reduces + st.reduce_scatters, 20 * shards.n);
    /* stage 3 gathers every unit at least once a step (twice when resharded after forward) */
    if (v.stage == 3 && !v.policy && !v.no_root)
        CHECK(st.all_gathers >= 20 * (shards.n - 1) * (v.keep ? 1 : 2));
    ts_tensor_list_free(&ddp_p);
    ts_tensor_list_free(&shards);
    ts_optim_free(o_ddp);
    ts_optim_free(o_f);
    ts_module_free(ddp);
    ts_module_free(f);
    CHECK_OK();
}

/* ------------------------------------------------------------------ shards and names */
static void layout(void) {
    ts_module *f = ts_fsdp_new(model_new(M_GPT, 1, ts_cpu()),
                               (ts_fsdp_opts){.units = GPT_UNITS, .n_units = 2});
    CHECK(f != NULL);
    if (!f) return;
    CHECK(strcmp(f->type_name, "FullyShardedDataParallel") == 0);
    ts_tensor_list sd = ts_module_state_dict(ts_fsdp_module(f));
    CHECK(sd.n > 0 && strcmp(sd.names[0], "tok_emb.weight") == 0); /* names unchanged */
    ts_tensor_list_free(&sd);
    ts_tensor_list sh = ts_fsdp_parameters(f);
    CHECK_EQ(sh.n, 3);
    if (sh.n == 3) {
        CHECK(strcmp(sh.names[0], "flat_param") == 0);
        CHECK(strcmp(sh.names[1], "blocks.0.flat_param") == 0);
        /* each shard: ceil(unit's elements / W), a leaf that requires grad */
        int64_t blk = 0;
        ts_tensor_list bp =
            ts_module_named_parameters(ts_module_child(ts_fsdp_module(f), "blocks.0"));
        for (int i = 0; i < bp.n; i++) blk += ts_numel(bp.tensors[i]);
        ts_tensor_list_free(&bp);
        CHECK_EQ(ts_numel(sh.tensors[1]), (blk + world - 1) / world);
        CHECK(ts_requires_grad(sh.tensors[1]) && ts_grad_fn_name(sh.tensors[1]) == NULL);
    }
    ts_tensor_list_free(&sh);
    ts_module_free(f);
    CHECK_OK();
}

/* ------------------------------------------------------------------ memory held */
static size_t allocated(ts_device d) {
    ts_mem_stats s = {0};
    ts_memory_stats(d, &s);
    return s.allocated;
}

/* Between steps stage 3 holds the shards only (and after a backward their gradients): the
 * gathered parameters and the full gradients were given back. Stages 1 and 2 keep the full
 * parameters beside the shards. The slack is the allocator's rounding (512 bytes a block). */
static void memory(int stage, bool offload) {
    ts_device dev = ts_sim(rank % 4);
    size_t base = allocated(dev);
    ts_module *m = model_new(M_GPT, 3, dev);
    size_t full = (size_t)ts_module_num_parameters(m) * sizeof(double); /* without rounding */
    ts_module *f = ts_fsdp_new(m, (ts_fsdp_opts){
                                      .stage = stage,
                                      .units = GPT_UNITS,
                                      .n_units = 2,
                                      .cpu_offload = offload,
                                  });
    ts_fsdp_stats st = {0};
    CHECK(ts_fsdp_get_stats(f, &st) == TS_OK);
    /* offloaded, the shards and their gradients are on the host: none of them on the device */
    const size_t shards = offload ? 0 : st.shard_bytes;
    size_t held = allocated(dev) - base, slack = 8192;
    if (stage == 3)
        CHECK(held <= shards + slack);
    else
        CHECK(held >= full + shards);
    if (offload && stage == 3) CHECK(held <= slack);
    ts_scope_begin();
    ts_tensor *x, *y;
    batch(M_GPT, 0, dev, &x, &y);
    ts_backward(loss_of(M_GPT, ts_forward(f, x), y));
    ts_scope_end();
    held = allocated(dev) - base;
    if (stage == 3) CHECK(held <= 2 * shards + slack);
    if (stage == 2) CHECK(held <= full + 2 * shards + slack); /* no full gradients */
    if (stage == 1) CHECK(held >= 2 * full);                  /* full gradients kept */
    ts_module_free(f);
    CHECK(allocated(dev) == base);
    CHECK_OK();
}

/* The peak of a stage-3 step on a model whose parameters outweigh its activations (8 units of
 * Linear(64, 64) in float64, one row): the shards and their gradients, plus at most two units
 * gathered (the one computing and the prefetched one), two units' full gradients (the one
 * accumulating and the one being reduced) and a weight's gradient as backward computes it, before
 * the engine adds it into the flat gradient — not the whole model's. */
static void peak_memory(void) {
    enum { UNITS = 8, D = 64 };
    ts_device dev = ts_sim(rank % 4);
    ts_manual_seed(9);
    ts_module *layers[UNITS];
    for (int i = 0; i < UNITS; i++) layers[i] = ts_linear_new(D, D);
    ts_module *m = ts_module_to(ts_module_to_dtype(ts_sequential_new(UNITS, layers), TS_F64), dev);
    const char *names[UNITS] = {"0", "1", "2", "3", "4", "5", "6", "7"};
    ts_module *f = ts_fsdp_new(m, (ts_fsdp_opts){.units = names, .n_units = UNITS});
    ts_tensor_list sh = ts_fsdp_parameters(f);
    ts_optim *opt = ts_sgd_new_params(sh.tensors, sh.n, (ts_sgd_opts){.lr = 0.01});
    ts_fsdp_stats st = {0};
    CHECK(ts_fsdp_get_stats(f, &st) == TS_OK);
    ts_mem_stats ms = {0};
    for (int step = 0; step < 2; step++) {
        ts_memory_stats(dev, &ms);
        size_t base = ms.allocated;
        ts_memory_reset_peak(dev);
        ts_scope_begin();
        ts_tensor *x = ts_to(ts_randn(TS_SHAPE(1, D), (ts_opts){.dtype = TS_F64}), dev);
        ts_optim_zero_grad(opt);
        ts_backward(ts_sum(ts_forward(f, x)));
        ts_optim_step(opt);
        ts_scope_end();
        ts_memory_stats(dev, &ms);
        /* base holds the shards (and from the second step their gradients' old blocks are
         * freed by zero_grad as the new ones come); the slack is activations and rounding */
        size_t bound = base + st.shard_bytes + 5 * st.unit_bytes_max + 16384;
        if (!(ms.peak_allocated <= bound))
            printf(
                "rank %d: stage-3 step peak %zu bytes above the bound %zu (shards %zu, unit %zu)\n",
                rank, ms.peak_allocated, bound, st.shard_bytes, st.unit_bytes_max);
        CHECK(ms.peak_allocated <= bound);
    }
    ts_tensor_list_free(&sh);
    ts_optim_free(opt);
    ts_module_free(f);
    CHECK_OK();
}

/* The memory bound at a small size (bench_fsdp memory prints the same terms for the 124M
 * GPT on 4 ranks): a GPT of 6 blocks (d 64, float64; its parameters outweigh its activations)
 * under stage 3 with AdamW. A step's peak is at most the shards, their gradients and Adam's two
 * moments (4 x the shards' bytes), two blocks gathered, the root unit gathered, two blocks' full
 * gradients, and the activations: the peak of a forward and backward of the unwrapped model that
 * drops each parameter's gradient once accumulated (where FSDP reduces it). */
static void drop_grad(ts_tensor *p, void *ctx) {
    (void)ctx;
    ts_set_grad(p, NULL);
}

static void gpt_peak_memory(void) {
    enum { LAYERS = 6 };
    const ts_gpt_config cfg = {.vocab_size = MINI.vocab_size,
                               .context = MINI.context,
                               .n_layer = LAYERS,
                               .n_head = 2,
                               .n_embd = 64};
    ts_device dev = ts_sim(rank % 4);
    ts_tensor *x, *y;
    ts_scope_begin(); /* the batch's intermediates go at its end; x and y are kept */
    batch(M_GPT, 0, dev, &x, &y);
    x = ts_keep(x), y = ts_keep(y);
    ts_scope_end();
    ts_mem_stats ms = {0};
    /* the activations, on the unwrapped model */
    ts_manual_seed(3);
    ts_module *plain = ts_module_to(ts_module_to_dtype(ts_gpt_new(cfg), TS_F64), dev);
    ts_tensor_list pl = ts_module_named_parameters(plain);
    for (int i = 0; i < pl.n; i++)
        ts_register_post_accumulate_grad_hook(pl.tensors[i], drop_grad, 0);
    ts_tensor_list_free(&pl);
    size_t base = allocated(dev);
    ts_memory_reset_peak(dev);
    ts_scope_begin();
    ts_backward(loss_of(M_GPT, ts_forward(plain, x), y));
    ts_scope_end();
    ts_memory_stats(dev, &ms);
    const size_t act = ms.peak_allocated - base;
    ts_module_free(plain);
    CHECK_OK();

    base = allocated(dev);
    ts_manual_seed(3);
    ts_module *m = ts_module_to(ts_module_to_dtype(ts_gpt_new(cfg), TS_F64), dev);
    const char *units[LAYERS] = {"blocks.0", "blocks.1", "blocks.2",
                                 "blocks.3", "blocks.4", "blocks.5"};
    ts_module *f = ts_fsdp_new(m, (ts_fsdp_opts){.units = units, .n_units = LAYERS});
    ts_tensor_list sh = ts_fsdp_parameters(f);
    ts_optim *opt = ts_adamw_new_params(sh.tensors, sh.n, (ts_adam_opts){.lr = 1e-3});
    ts_tensor_list_free(&sh);
    ts_fsdp_stats st = {0};
    CHECK(ts_fsdp_get_stats(f, &st) == TS_OK);
    const size_t d = (size_t)cfg.n_embd;
    const size_t root = ((size_t)(cfg.vocab_size + cfg.context) * d + 2 * d) * sizeof(double);
    const size_t unit = st.unit_bytes_max;
    /* the allocator rounds each block up to 512 bytes: a few hundred tensors live at the peak */
    const size_t slack = 32768;
    const size_t bound = 4 * st.shard_bytes + 2 * unit + root + 2 * unit + act + slack;
    for (int step = 0; step < 2; step++) { /* Adam's moments exist from the first step on */
        ts_memory_reset_peak(dev);
        ts_scope_begin();
        ts_optim_zero_grad(opt);
        ts_backward(loss_of(M_GPT, ts_forward(f, x), y));
        ts_optim_step(opt);
        ts_scope_end();
        ts_memory_stats(dev, &ms);
        const size_t peak = ms.peak_allocated - base;
        if (!(peak <= bound) || step == 1)
            printf("rank %d: GPT stage-3 step peak %zu bytes, bound %zu: 4 x shards %zu + 2 units "
                   "gathered %zu + root %zu + 2 units' gradients %zu + activations %zu + %zu\n",
                   rank, peak, bound, 4 * st.shard_bytes, 2 * unit, root, 2 * unit, act, slack);
        CHECK(peak <= bound);
    }
    ts_optim_free(opt);
    ts_module_free(f);
    ts_release(x), ts_release(y);
    CHECK_OK();
}

/* ------------------------------------------------------------------ errors */
typedef struct two_fc {
    ts_module base;
    ts_module *fc1, *fc2;
} two_fc;
static ts_tensor *two_fc_forward(ts_module *self, ts_tensor *x) {
    two_fc *m = (two_fc *)self;
    return ts_forward(m->fc2, ts_tanh(ts_forward(m->fc1, x)));
}
static ts_module *two_fc_new(int hidden) {
    ts_manual_seed(7);
    two_fc *m = ts_module_alloc(sizeof *m, "TwoFC", two_fc_forward);
    m->fc1 = ts_module_add(&m->base, "fc1", ts_linear_new(4, hidden));
    m->fc2 = ts_module_add(&m->base, "fc2", ts_linear_new(hidden, 4));
    return &m->base;
}

static void errors(void) {
    CHECK(ts_fsdp_new(NULL, (ts_fsdp_opts){0}) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    const char *missing[] = {"fc1", "fc3"};
    CHECK(ts_fsdp_new(two_fc_new(4), (ts_fsdp_opts){.units = missing, .n_units = 2}) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "FullyShardedDataParallel: unit 1, 'fc3': the model (TwoFC) has no "
                              "submodule of that name");
    CHECK(ts_fsdp_new(two_fc_new(4), (ts_fsdp_opts){.stage = 4}) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "stage must be 1, 2 or 3");
    CHECK(ts_fsdp_new(two_fc_new(4), (ts_fsdp_opts){.stage = -1}) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_fsdp_new(two_fc_new(4), (ts_fsdp_opts){.stage = 1, .cpu_offload = true}) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "cpu_offload needs stage 2 or 3");
    /* one unit's parameters on two devices */
    ts_module *m = two_fc_new(4);
    ts_module_to(ts_module_child(m, "fc2"), ts_sim(0));
    CHECK(ts_fsdp_new(m, (ts_fsdp_opts){0}) == NULL);
    CHECK_ERR_HAS(TS_ERR_DEVICE, "unit '<root>' holds parameters on different devices");
    /* ... which is fine when each device's parameters form their own units */
    const char *both[] = {"fc1", "fc2"};
    m = two_fc_new(4);
    ts_module_to(ts_module_child(m, "fc2"), ts_sim(0));
    ts_module *f = ts_fsdp_new(m, (ts_fsdp_opts){.units = both, .n_units = 2});
    CHECK(f != NULL);
    ts_module_free(f);
    CHECK_OK();
    /* a tensor shared by two units */
    m = two_fc_new(4);
    ts_module *fc1 = ts_module_child(m, "fc1"), *fc2 = ts_module_child(m, "fc2");
    ts_module_param(fc2, "weight", ts_retain(ts_module_get(fc1, "weight")));
    CHECK(ts_fsdp_new(m, (ts_fsdp_opts){.units = both, .n_units = 2}) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "is shared by unit 'fc2'");
    /* a model that differs across ranks: every rank gets the error naming the last rank */
    if (world > 1) {
        CHECK(ts_fsdp_new(two_fc_new(rank == world - 1 ? 5 : 4), (ts_fsdp_opts){0}) == NULL);
        char want[64];
        snprintf(want, sizeof want, "on rank %d", world - 1);
        CHECK(strstr(ts_error_message(), "FSDP expects same model across all ranks") != NULL);
        CHECK(strstr(ts_error_message(), want) != NULL);
        CHECK_ERR(TS_ERR_DIST);
    }
    /* a parameter moved after wrapping (stage 2: its memory is there to copy) */
    f = ts_fsdp_new(two_fc_new(4), (ts_fsdp_opts){.stage = 2});
    ts_module_to_dtype(ts_module_child(ts_fsdp_module(f), "fc2"), TS_F64);
    CHECK_OK();
    ts_scope_begin();
    CHECK(ts_forward(f, ts_randn(TS_SHAPE(2, 4), (ts_opts){0})) == NULL);
    CHECK_ERR_HAS(TS_ERR_STATE, "parameter fc2.weight left unit '<root>''s flat buffer");
    ts_scope_end();
    ts_module_free(f);
    ts_module *lin = ts_linear_new(2, 2);
    CHECK(ts_fsdp_module(lin) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "is not a FullyShardedDataParallel");
    ts_module_free(lin);
    /* a unit left out of the loss: PyTorch-like error at the next forward, every rank alike */
    f = ts_fsdp_new(two_fc_new(4), (ts_fsdp_opts){.units = both, .n_units = 2});
    ts_scope_begin();
    ts_tensor *x = ts_randn(TS_SHAPE(2, 4), (ts_opts){0});
    two_fc *inner = (two_fc *)ts_fsdp_module(f);
    ts_backward(ts_sum(ts_forward(inner->fc1, x))); /* fc2's unit never completes */
    CHECK_OK();
    CHECK(ts_forward(f, x) == NULL);
    CHECK(strstr(ts_error_message(), "'fc2' (0 of 2)") != NULL); /* gradients arrived of all */
    CHECK_ERR_HAS(TS_ERR_STATE, "units still waiting");
    CHECK(ts_forward(f, x) != NULL); /* the next try starts afresh */
    ts_scope_end();
    ts_module_free(f);
    CHECK_OK();
    /* clipping before any backward: no shard has a gradient, the norm is 0 */
    f = ts_fsdp_new(two_fc_new(4), (ts_fsdp_opts){.units = both, .n_units = 2});
    CHECK(ts_fsdp_clip_grad_norm(f, 1.0, 2) == 0);
    CHECK_OK();
    /* a negative norm type is refused, as a NaN max_norm is (0 alone means 2) */
    CHECK(isnan(ts_fsdp_clip_grad_norm(f, 1.0, -1)));
    CHECK_ERR_HAS(TS_ERR_ARG, "norm_type (-1) must be positive");
    CHECK(isnan(ts_fsdp_clip_grad_norm(f, NAN, 2)));
    CHECK_ERR_HAS(TS_ERR_ARG, "max_norm (nan) must not be NaN");
    ts_module_free(f);
}

int main(void) {
    if (ts_dist_init((ts_dist_opts){.timeout_s = 120}) != TS_OK) {
        printf("dist_init: %s\n", ts_error_message());
        return 1;
    }
    rank = ts_dist_rank();
    world = ts_dist_world_size();
    if (rank == 0) printf("%s\n", ts_dist_describe());
    ts_device sim = ts_sim(rank % 4);
    for (int stage = 1; stage <= 3; stage++) {
        equivalence(M_GPT, ts_cpu(), (variant){.stage = stage});
        equivalence(M_RESNET, sim, (variant){.stage = stage});
    }
    equivalence(M_GPT, sim, (variant){.stage = 3, .keep = true, .no_prefetch = true});
    equivalence(M_GPT, ts_cpu(), (variant){.stage = 3, .no_sync = true});
    equivalence(M_GPT, ts_cpu(), (variant){.stage = 2, .no_sync = true});
    equivalence(M_RESNET, ts_cpu(), (variant){.stage = 3, .policy = true});
    equivalence(M_RESNET, sim, (variant){.stage = 3, .no_root = true});
    equivalence(M_GPT, sim, (variant){.stage = 3, .clip = 0.3});
    equivalence(M_RESNET, ts_cpu(), (variant){.stage = 1, .clip = 1.0});
    for (int stage = 1; stage <= 3; stage++) memory(stage, false);
    memory(2, true);
    memory(3, true);
    equivalence(M_GPT, sim, (variant){.stage = 3, .offload = true});
    equivalence(M_RESNET, sim, (variant){.stage = 2, .offload = true});
    equivalence(M_GPT, sim, (variant){.stage = 3, .offload = true, .no_sync = true, .clip = 0.3});
    peak_memory();
    gpt_peak_memory();
    layout();
    errors();
    ts_dist_finalize();
    return ts_test_finish();
}
