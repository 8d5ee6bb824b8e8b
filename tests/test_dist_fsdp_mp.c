/* test_dist_fsdp_mp.c — FSDP's mixed precision, the grad scaler under FSDP and AdamW's weight-decay
 * groups over the shards (a world of one, and by ctest under mpiexec with 2 and 4 ranks, cpu and
 * sim):
 *  - a step with parameters gathered in bf16 / f16 and gradients reduced in float32 (or in the
 *    parameters' dtype) equals a reference that rounds the same way: a plain copy of the model
 *    converted to the low dtype runs every rank's rows, and its gradients are averaged in float64;
 *    the bound is the reordering of W terms in the reduction dtype plus the step's one rounding;
 *  - the scaler skips the step on every rank when one rank's shard alone has an inf, and the
 *    scales stay equal;
 *  - FSDP with decay_groups and AdamW (weight decay 0.1) equals DDP with ts_adamw_decay_groups
 *    over 20 steps in float64 (1e-6 relative), and its sharded checkpoint resumes bit for bit;
 *  - the errors (a non-floating param_dtype / reduce_dtype, decay groups not asked for). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist_shared_dir.h"
#include "ts_test.h"

static int rank, world;

static const ts_gpt_config MINI = {
    .vocab_size = 32, .context = 16, .n_layer = 2, .n_head = 2, .n_embd = 32};
#define ROWS 2 /* sequences per rank */
static const char *const UNITS[] = {"blocks.0", "blocks.1"};

static ts_module *gpt(uint64_t seed, ts_dtype dt, ts_device dev) {
    ts_manual_seed(seed);
    return ts_module_to(ts_module_to_dtype(ts_gpt_new(MINI), dt), dev);
}

/* rows [r * ROWS, (r + 1) * ROWS) of step's global batch (the same on every rank) */
static void batch(int step, int r, ts_device dev, ts_tensor **x, ts_tensor **y) {
    ts_rng_state saved = ts_rng_get_state();
    ts_manual_seed(1000 + (uint64_t)step);
    ts_tensor *tok = ts_randint(0, MINI.vocab_size, TS_SHAPE(ROWS * world, MINI.context + 1),
                                (ts_opts){.dtype = TS_I64});
    tok = ts_narrow(tok, 0, (int64_t)r * ROWS, ROWS);
    *x = ts_to(ts_contiguous(ts_narrow(tok, 1, 0, MINI.context)), dev);
    *y = ts_to(ts_contiguous(ts_narrow(tok, 1, 1, MINI.context)), dev);
    ts_rng_set_state(saved);
}

static ts_tensor *loss_of(ts_module *m, ts_tensor *x, ts_tensor *y) {
    ts_tensor *out = ts_forward(m, x);
    return ts_cross_entropy(ts_reshape(out, TS_SHAPE(-1, MINI.vocab_size)),
                            ts_reshape(y, TS_SHAPE(-1)));
}

static ts_tensor *f64cpu(ts_tensor *t) { return ts_to_dtype(ts_to(t, ts_cpu()), TS_F64); }

/* unit roundoff of a dtype */
static double unit_roundoff(ts_dtype d) {
    return d == TS_BF16 ? 0x1p-8 : d == TS_F16 ? 0x1p-11 : d == TS_F32 ? 0x1p-24 : 0x1p-53;
}

/* ------------------------------------------------------------------ mixed precision */
typedef struct mp_case {
    int stage;
    ts_dtype param, reduce; /* reduce 0: the parameters' dtype */
    bool no_sync;           /* two halves, the first inside no_sync */
} mp_case;

/* One SGD step (lr 0.5, a power of two: lr * g is exact) of an FSDP GPT-mini (float32 shards)
 * against the reference. With g_r the low-precision gradient of rank r's rows (of each half
 * under no_sync, each loss halved: exact), FSDP computes fl_R(sum_r fl_R(g_r) / W) in the reduce
 * dtype R (/ W exact for W a power of two; with no_sync, each rank's halves added in R first),
 * rounded to float32, then p - 0.5 g rounded to float32. So per element
 *   |p_fsdp - (p - 0.5 S)| <= 0.5 ((k - 1) u_R A + u_32 |S|) + u_32 (|p| + 0.5 |S| + ...)
 * with S = sum_r g_r / W and A = sum_r |g_r| / W in float64, k the terms summed (W, or 2W). */
static void mp_step(ts_device dev, mp_case c) {
    ts_module *f = ts_fsdp_new(gpt(42 + (uint64_t)rank, TS_F32, dev),
                               (ts_fsdp_opts){.stage = c.stage,
                                              .units = UNITS,
                                              .n_units = 2,
                                              .param_dtype = c.param,
                                              .reduce_dtype = c.reduce});
    /* rank 0's initial weights: the FSDP module took them too */
    ts_module *ref = gpt(42, c.param, dev);
    ts_module *master = gpt(42, TS_F32, ts_cpu());
    CHECK(f && ref && master);
    if (!f || !ref || !master) {
        ts_module_free(f), ts_module_free(ref), ts_module_free(master);
        ts_error_clear();
        return;
    }
    /* the module computes in the low dtype */
    ts_tensor_list fp = ts_module_named_parameters(ts_fsdp_module(f));
    for (int i = 0; i < fp.n; i++) CHECK(ts_dtype_of(fp.tensors[i]) == c.param);
    ts_tensor_list_free(&fp);
    ts_tensor_list sh = ts_fsdp_parameters(f);
    for (int i = 0; i < sh.n; i++) CHECK(ts_dtype_of(sh.tensors[i]) == TS_F32);
    ts_optim *opt = ts_sgd_new_params(sh.tensors, sh.n, (ts_sgd_opts){.lr = 0.5});
    ts_tensor_list rp = ts_module_named_parameters(ref), mp = ts_module_named_parameters(master);
    CHECK(rp.n == mp.n && rp.n > 0);
    const ts_dtype rdt = c.reduce ? c.reduce : c.param;
    const int halves = c.no_sync ? 2 : 1;

    ts_scope_begin();
    /* FSDP: this rank's rows */
    ts_tensor *x, *y;
    batch(0, rank, dev, &x, &y);
    ts_optim_zero_grad(opt);
    for (int h = 0; h < halves; h++) {
        if (c.no_sync && h == 0) ts_fsdp_no_sync_begin(f);
        ts_tensor *xh = ts_narrow(x, 0, h * ROWS / halves, ROWS / halves);
        ts_tensor *yh = ts_narrow(y, 0, h * ROWS / halves, ROWS / halves);
        ts_backward(ts_mul_scalar(loss_of(f, xh, yh), 1.0 / halves));
        if (c.no_sync && h == 0) ts_fsdp_no_sync_end(f);
    }
    ts_optim_step(opt);
    CHECK_OK();
    /* the reference: every rank's rows through the low-precision copy */
    ts_tensor **S = calloc((size_t)rp.n, sizeof *S), **A = calloc((size_t)rp.n, sizeof *A);
    for (int r = 0; r < world; r++) {
        batch(0, r, dev, &x, &y);
        for (int h = 0; h < halves; h++) {
            for (int i = 0; i < rp.n; i++) ts_set_grad(rp.tensors[i], NULL);
            ts_tensor *xh = ts_narrow(x, 0, h * ROWS / halves, ROWS / halves);
            ts_tensor *yh = ts_narrow(y, 0, h * ROWS / halves, ROWS / halves);
            ts_backward(ts_mul_scalar(loss_of(ref, xh, yh), 1.0 / halves));
            for (int i = 0; i < rp.n; i++) {
                ts_tensor *g = ts_div_scalar(f64cpu(ts_grad(rp.tensors[i])), world);
                S[i] = S[i] ? ts_add(S[i], g) : g;
                A[i] = A[i] ? ts_add(A[i], ts_abs(g)) : ts_abs(g);
            }
        }
    }
    CHECK_OK();
    const int k = world * halves;
    ts_tensor_list full = ts_fsdp_full_state_dict(f);
    double worst = 0;
    for (int i = 0; i < rp.n; i++) {
        ts_tensor *got = ts_tensor_list_get(&full, rp.names[i]);
        CHECK(got && ts_dtype_of(got) == TS_F32);
        if (!got) continue;
        ts_tensor *p = f64cpu(mp.tensors[i]);
        ts_tensor *want = ts_sub(p, ts_mul_scalar(S[i], 0.5));
        double ur = unit_roundoff(rdt), u32 = 0x1p-24;
        ts_tensor *gb =
            ts_add(ts_mul_scalar(A[i], (k - 1) * ur * 1.0001), ts_mul_scalar(ts_abs(S[i]), u32));
        ts_tensor *bound =
            ts_add_scalar(ts_add(ts_mul_scalar(gb, 0.5),
                                 ts_mul_scalar(ts_add(ts_abs(want), ts_mul_scalar(gb, 0.5)), u32)),
                          1e-30);
        ts_tensor *excess = ts_div(ts_abs(ts_sub(f64cpu(got), want)), bound);
        double e = ts_item(ts_max(excess));
        if (!(e <= worst)) worst = e;
    }
    ts_tensor_list_free(&full);
    if (!(worst <= 1) || getenv("TS_TEST_VERBOSE"))
        printf("rank %d: mixed precision on %s, stage %d, params %s, reduce %s%s: error %.3g of "
               "the bound\n",
               rank, ts_device_str(dev), c.stage, ts_dtype_name(c.param), ts_dtype_name(rdt),
               c.no_sync ? ", no_sync" : "", worst);
    CHECK(worst <= 1);
    /* the gathers moved the low dtype, the reductions the reduce dtype */
    ts_fsdp_stats st = {0};
    CHECK(ts_fsdp_get_stats(f, &st) == TS_OK);
    if (c.stage == 3) CHECK(st.all_gathers > 0 && st.gather_bytes > 0);
    int64_t flat = 0; /* every unit's padded elements: one reduction each */
    ts_tensor_list all = ts_fsdp_parameters(f);
    for (int i = 0; i < all.n; i++) flat += ts_numel(all.tensors[i]) * world;
    ts_tensor_list_free(&all);
    CHECK_EQ((int64_t)st.reduce_bytes, flat * (int64_t)ts_dtype_size(rdt));
    CHECK_EQ((int64_t)st.gather_bytes % (int64_t)ts_dtype_size(c.param), 0);
    CHECK((int64_t)st.gather_bytes <=
          (int64_t)st.all_gathers * flat / world * (int64_t)ts_dtype_size(c.param));
    free(S);
    free(A);
    ts_scope_end();
    ts_tensor_list_free(&sh);
    ts_tensor_list_free(&rp);
    ts_tensor_list_free(&mp);
    ts_optim_free(opt);
    ts_module_free(f);
    ts_module_free(ref);
    ts_module_free(master);
    CHECK_OK();
}

/* Autocast on top of mixed precision: a bf16 GPT under autocast trains (finite losses that fall)
 * and its float32 ops (layer norm, cross entropy) see float32. */
static void mp_autocast(void) {
    ts_module *f = ts_fsdp_new(gpt(5, TS_F32, ts_cpu()), (ts_fsdp_opts){.units = UNITS,
                                                                        .n_units = 2,
                                                                        .param_dtype = TS_BF16,
                                                                        .reduce_dtype = TS_F32});
    ts_tensor_list sh = ts_fsdp_parameters(f);
    ts_optim *opt = ts_adamw_new_params(sh.tensors, sh.n, (ts_adam_opts){.lr = 1e-2});
    double first = 0, last = 0;
    for (int step = 0; step < 8; step++) {
        ts_scope_begin();
        ts_tensor *x, *y;
        batch(0, rank, ts_cpu(), &x, &y); /* one batch again and again: the loss must fall */
        ts_optim_zero_grad(opt);
        ts_autocast_begin(TS_CPU, TS_BF16);
        ts_tensor *loss = loss_of(f, x, y);
        ts_autocast_end();
        CHECK(loss &&
              ts_dtype_of(loss) == TS_F32); /* cross entropy runs in float32 under autocast */
        ts_backward(loss);
        ts_optim_step(opt);
        double l = loss ? ts_item(loss) : NAN;
        if (step == 0) first = l;
        last = l;
        ts_scope_end();
    }
    CHECK(isfinite(first) && isfinite(last) && last < first);
    CHECK_OK();
    ts_tensor_list_free(&sh);
    ts_optim_free(opt);
    ts_module_free(f);
}

/* ------------------------------------------------------------------ grad scaler */
/* An inf planted in one shard of the last rank only: every rank skips the step, the scale backs
 * off everywhere alike; the next clean step steps everywhere. Both the plain step and the
 * unscale_ / clip / step sequence of `tessera train`. */
static double extreme(double v, ts_dist_reduce_op op) {
    ts_tensor *t = ts_tensor_f64(TS_SHAPE(1), &v, (ts_opts){0});
    ts_dist_all_reduce(t, op, NULL);
    return ts_item(t); /* called inside a scope, which owns t */
}

static void scaler(bool clip) {
    ts_module *f =
        ts_fsdp_new(gpt(7, TS_F32, ts_cpu()), (ts_fsdp_opts){.units = UNITS, .n_units = 2});
    ts_tensor_list sh = ts_fsdp_parameters(f);
    ts_optim *opt = ts_sgd_new_params(sh.tensors, sh.n, (ts_sgd_opts){.lr = 0.1});
    ts_grad_scaler *s = ts_grad_scaler_new((ts_grad_scaler_opts){.init_scale = 1024});
    for (int step = 0; step < 2; step++) {
        ts_scope_begin();
        ts_tensor *before = ts_clone(sh.tensors[0]);
        ts_tensor *x, *y;
        batch(step, rank, ts_cpu(), &x, &y);
        ts_optim_zero_grad(opt);
        ts_backward(ts_grad_scaler_scale(s, loss_of(f, x, y)));
        if (step == 0 && rank == world - 1) /* this rank's shard only */
            ts_fill_(ts_narrow(ts_grad(sh.tensors[sh.n - 1]), 0, 0, 1), INFINITY);
        if (clip) {
            CHECK(ts_grad_scaler_unscale_(s, opt) == TS_OK);
            ts_fsdp_clip_grad_norm(f, 1.0, 2);
        }
        bool stepped = true;
        CHECK(ts_grad_scaler_step(s, opt, &stepped) == TS_OK);
        CHECK(ts_grad_scaler_update(s) == TS_OK);
        double moved = ts_item(ts_max(ts_abs(ts_sub(sh.tensors[0], before))));
        if (step == 0) {
            CHECK(!stepped);
            CHECK(moved == 0);
        } else {
            CHECK(stepped);
            CHECK(moved > 0);
        }
        double sc = ts_grad_scaler_get_scale(s);
        CHECK(sc == 512); /* backed off once, everywhere */
        CHECK(extreme(sc, TS_DIST_MAX) == extreme(sc, TS_DIST_MIN));
        CHECK(extreme(stepped, TS_DIST_MAX) == extreme(stepped, TS_DIST_MIN));
        ts_scope_end();
        CHECK_OK();
    }
    ts_grad_scaler_free(s);
    ts_tensor_list_free(&sh);
    ts_optim_free(opt);
    ts_module_free(f);
}

/* ------------------------------------------------------------------ weight-decay groups */
static double params_rel_diff(ts_module *a, ts_module *b) {
    ts_tensor_list la = ts_module_named_parameters(a), lb = ts_module_named_parameters(b);
    double worst = la.n == lb.n && la.n > 0 ? 0 : INFINITY;
    for (int i = 0; i < la.n && i < lb.n; i++) {
        ts_scope_begin();
        if (strcmp(la.names[i], lb.names[i])) worst = INFINITY;
        ts_tensor *ta = f64cpu(la.tensors[i]), *tb = f64cpu(lb.tensors[i]);
        ts_tensor *den = ts_clamp_min(ts_abs(tb), 1e-3);
        double d = ts_item(ts_max(ts_div(ts_abs(ts_sub(ta, tb)), den)));
        if (!(d <= worst)) worst = d;
        ts_scope_end();
    }
    ts_tensor_list_free(&la);
    ts_tensor_list_free(&lb);
    return worst;
}

static ts_optim *fsdp_adamw(ts_module *f, bool groups) {
    const ts_adam_opts o = {.lr = 3e-3, .weight_decay = 0.1};
    if (!groups) {
        ts_tensor_list l = ts_fsdp_parameters(f);
        ts_optim *opt = ts_adamw_new_params(l.tensors, l.n, o);
        ts_tensor_list_free(&l);
        return opt;
    }
    ts_tensor_list d, n;
    if (ts_fsdp_decay_groups(f, &d, &n) != TS_OK) return NULL;
    ts_optim *opt = ts_adamw_new_params(d.tensors, d.n, o);
    if (opt && ts_optim_add_param_group_wd(opt, n.tensors, n.n, o.lr, 0) != TS_OK) {
        ts_optim_free(opt);
        opt = NULL;
    }
    ts_tensor_list_free(&d);
    ts_tensor_list_free(&n);
    return opt;
}

static void fsdp_step(ts_module *f, ts_optim *opt, int step, ts_device dev) {
    ts_scope_begin();
    ts_tensor *x, *y;
    batch(step, rank, dev, &x, &y);
    ts_optim_zero_grad(opt);
    ts_backward(loss_of(f, x, y));
    ts_optim_step(opt);
    ts_scope_end();
}

/* DDP with ts_adamw_new_decay_groups (matrices and embeddings decay, biases and norms not) against
 * FSDP with decay_groups, in float64 (see test_dist_fsdp.c: the reductions' order differs once
 * W > 2); FSDP without the groups decays everything and must differ. Then a sharded checkpoint of
 * the grouped run resumes into a fresh module and optimizer bit for bit. */
static void decay_groups(int stage, ts_device dev) {
    ts_module *ddp = ts_ddp_new(gpt(42 + (uint64_t)rank, TS_F64, dev), (ts_ddp_opts){0});
    ts_fsdp_opts o = {.stage = stage, .units = UNITS, .n_units = 2, .decay_groups = true};
    ts_module *f = ts_fsdp_new(gpt(42 + (uint64_t)rank, TS_F64, dev), o);
    o.decay_groups = false;
    ts_module *all = ts_fsdp_new(gpt(42 + (uint64_t)rank, TS_F64, dev), o);
    CHECK(ddp && f && all);
    if (!ddp || !f || !all) {
        ts_module_free(ddp), ts_module_free(f), ts_module_free(all);
        ts_error_clear();
        return;
    }
    ts_optim *o_ddp = ts_adamw_new_decay_groups(ts_ddp_module(ddp),
                                                (ts_adam_opts){.lr = 3e-3, .weight_decay = 0.1});
    ts_optim *o_f = fsdp_adamw(f, true), *o_all = fsdp_adamw(all, false);
    CHECK(o_ddp && o_f && o_all);
    /* two leaves a unit, the decaying one first; together the shard */
    ts_tensor_list l = ts_fsdp_parameters(f);
    CHECK_EQ(l.n, 6);
    if (l.n == 6) {
        CHECK(!strcmp(l.names[2], "blocks.0.flat_param"));
        CHECK(!strcmp(l.names[3], "blocks.0.flat_param_no_decay"));
    }
    ts_tensor_list_free(&l);
    for (int step = 0; step < 20; step++) {
        ts_scope_begin();
        ts_tensor *x, *y;
        batch(step, rank, dev, &x, &y);
        ts_optim_zero_grad(o_ddp);
        ts_backward(loss_of(ddp, x, y));
        ts_optim_step(o_ddp);
        ts_scope_end();
        fsdp_step(f, o_f, step, dev);
        fsdp_step(all, o_all, step, dev);
        CHECK_OK();
    }
    ts_fsdp_unshard(f);
    ts_fsdp_unshard(all);
    double d = params_rel_diff(ts_fsdp_module(f), ts_ddp_module(ddp));
    double d_all = params_rel_diff(ts_fsdp_module(all), ts_ddp_module(ddp));
    if (!(d <= 1e-6) || !(d_all > 1e-4) || getenv("TS_TEST_VERBOSE"))
        printf("rank %d: decay groups on %s, stage %d: FSDP %.3g from DDP (tolerance 1e-6), "
               "without the groups %.3g\n",
               rank, ts_device_str(dev), stage, d, d_all);
    CHECK(d <= 1e-6);
    CHECK(d_all > 1e-4); /* the groups matter: decaying the norms too is visible */

    /* the checkpoint: saved, loaded into a fresh grouped module, the next step identical */
    char dir[256];
    shared_dir("/tmp/ts_fsdp_mp_", dir, sizeof dir);
    ts_fsdp_checkpoint c = {.optim = o_f, .step = 20};
    CHECK(ts_fsdp_save_sharded(f, dir, &c) == TS_OK);
    o.decay_groups = true;
    ts_module *f2 = ts_fsdp_new(gpt(9, TS_F64, dev), o);
    ts_optim *o_f2 = f2 ? fsdp_adamw(f2, true) : NULL;
    ts_fsdp_checkpoint c2 = {.optim = o_f2};
    CHECK(o_f2 && ts_fsdp_load_sharded(f2, dir, &c2) == TS_OK);
    CHECK_EQ(c2.step, 20);
    if (o_f2) {
        fsdp_step(f, o_f, 20, dev);
        fsdp_step(f2, o_f2, 20, dev);
        ts_fsdp_unshard(f);
        ts_fsdp_unshard(f2);
        CHECK(params_rel_diff(ts_fsdp_module(f2), ts_fsdp_module(f)) == 0);
    }
    /* an optimizer missing a unit's no-decay part is refused, naming it */
    ts_tensor_list dl, nl;
    ts_fsdp_decay_groups(f, &dl, &nl);
    ts_optim *half = ts_adamw_new_params(dl.tensors, dl.n, (ts_adam_opts){.lr = 1e-3});
    ts_fsdp_checkpoint c3 = {.optim = half};
    CHECK(ts_fsdp_save_sharded(f, dir, &c3) != TS_OK);
    CHECK_ERR_HAS(TS_ERR_ARG, "the optimizer holds 3 parameters, the module 6 shards");
    ts_optim_free(half);
    ts_tensor_list_free(&dl);
    ts_tensor_list_free(&nl);
    ts_dist_barrier();
    if (rank == 0) {
        char cmd[300];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        if (system(cmd) != 0) printf("could not remove %s\n", dir);
    }
    ts_optim_free(o_f2);
    ts_module_free(f2);
    ts_optim_free(o_ddp);
    ts_optim_free(o_f);
    ts_optim_free(o_all);
    ts_module_free(ddp);
    ts_module_free(f);
    ts_module_free(all);
    CHECK_OK();
}

/* ------------------------------------------------------------------ errors */
static void errors(void) {
    CHECK(ts_fsdp_new(gpt(1, TS_F32, ts_cpu()), (ts_fsdp_opts){.param_dtype = TS_I64}) == NULL);
    CHECK_ERR_HAS(TS_ERR_DTYPE, "FullyShardedDataParallel: param_dtype is int64: mixed precision");
    CHECK(ts_fsdp_new(gpt(1, TS_F32, ts_cpu()),
                      (ts_fsdp_opts){.param_dtype = TS_BF16, .reduce_dtype = TS_BOOL}) == NULL);
    CHECK_ERR_HAS(TS_ERR_DTYPE, "reduce_dtype is bool");
    ts_module *f = ts_fsdp_new(gpt(1, TS_F32, ts_cpu()), (ts_fsdp_opts){0});
    ts_tensor_list d, n;
    CHECK(ts_fsdp_decay_groups(f, &d, &n) == TS_ERR_STATE);
    CHECK_ERR_HAS(TS_ERR_STATE, "fsdp_decay_groups: the module was wrapped without decay_groups");
    CHECK(d.n == 0 && n.n == 0);
    ts_module_free(f);
    CHECK_OK();
}

int main(void) {
    if (ts_dist_init((ts_dist_opts){.timeout_s = 120}) != TS_OK) {
        printf("dist_init: %s\n", ts_error_message());
        return 1;
    }
    rank = ts_dist_rank();
    world = ts_dist_world_size();
    ts_device sim = ts_sim(rank % 4);
    for (int stage = 1; stage <= 3; stage++) {
        mp_step(ts_cpu(), (mp_case){.stage = stage, .param = TS_BF16, .reduce = TS_F32});
        mp_step(sim, (mp_case){.stage = stage, .param = TS_BF16});
    }
    mp_step(sim, (mp_case){.stage = 3, .param = TS_F16, .reduce = TS_F32});
    mp_step(ts_cpu(), (mp_case){.stage = 3, .param = TS_BF16, .reduce = TS_F32, .no_sync = true});
    mp_step(ts_cpu(), (mp_case){.stage = 1, .param = TS_BF16, .reduce = TS_F32, .no_sync = true});
    mp_autocast();
    /* the scalers agree over the world by default: no DDP wrapper needed */
    scaler(false);
    scaler(true);
    decay_groups(3, ts_cpu());
    decay_groups(1, sim);
    errors();
    ts_dist_finalize();
    return ts_test_finish();
}
