/* test_dist_fsdp_checkpoint.c — sharded checkpoints of FSDP (run as a world of one, and by ctest
 * under mpiexec with 2 and 4 ranks): a save and a load into a fresh model in the same world give
 * the same next step bit for bit; the consolidated file equals DDP's model after the same steps and
 * loads with ts_module_load; the errors (a missing shard, a truncated one, a different model) name
 * the file; a save that fails on one rank leaves the previous checkpoint whole. As a world of one
 * it also runs itself under mpiexec with 4, then 2, then 1 ranks ("chain"): saved on 4, loaded on
 * 2 (parameters bit for bit, the next step as on 4), saved on 2, loaded on 1 — stages 1 and 3,
 * and stage 3 with decay_groups (each rank's two leaves a unit cut at another place per world). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dist_shared_dir.h"
#include "ts_test.h"

static int rank, world;

/* n_embd 30, vocab 31: units whose sizes are not multiples of 4, so each world pads differently */
static const ts_gpt_config MINI = {
    .vocab_size = 31, .context = 16, .n_layer = 2, .n_head = 2, .n_embd = 30};
#define GLOBAL_ROWS 4 /* sequences a step, split over the ranks */
static const char *const UNITS[] = {"blocks.0", "blocks.1"};

static ts_module *model_new(uint64_t seed) {
    ts_manual_seed(seed);
    return ts_module_to_dtype(ts_gpt_new(MINI), TS_F64);
}

static ts_module *fsdp_new(uint64_t seed, int stage, int n_units) {
    return ts_fsdp_new(model_new(seed),
                       (ts_fsdp_opts){.stage = stage, .units = UNITS, .n_units = n_units});
}

static ts_optim *optim_new(ts_tensor *const *p, int n) {
    return ts_adamw_new_params(p, n, (ts_adam_opts){.lr = 3e-3, .weight_decay = 0.01});
}

/* One step on this rank's rows of global batch `step`; returns the global mean loss. */
static double train_step(ts_module *net, ts_optim *opt, int step) {
    ts_scope_begin();
    ts_rng_state saved = ts_rng_get_state();
    ts_manual_seed(1000 + (uint64_t)step);
    ts_tensor *tok = ts_randint(0, MINI.vocab_size, TS_SHAPE(GLOBAL_ROWS, MINI.context + 1),
                                (ts_opts){.dtype = TS_I64});
    ts_rng_set_state(saved);
    int rows = GLOBAL_ROWS / world;
    tok = ts_narrow(tok, 0, (int64_t)rank * rows, rows);
    ts_tensor *x = ts_contiguous(ts_narrow(tok, 1, 0, MINI.context));
    ts_tensor *y = ts_contiguous(ts_narrow(tok, 1, 1, MINI.context));
    ts_optim_zero_grad(opt);
    ts_tensor *out = ts_forward(net, x);
    ts_tensor *loss = ts_cross_entropy(ts_reshape(out, TS_SHAPE(-1, MINI.vocab_size)),
                                       ts_reshape(y, TS_SHAPE(-1)));
    ts_backward(loss);
    ts_optim_step(opt);
    ts_tensor *l = ts_contiguous(ts_detach(loss));
    ts_dist_all_reduce(l, TS_DIST_AVG, NULL);
    double v = ts_item(l);
    ts_scope_end();
    return v;
}

/* max over tensors of |a - b| / max(|b|, 1e-3); INFINITY when the names differ */
static double lists_rel_diff(const ts_tensor_list *la, const ts_tensor_list *lb) {
    double worst = la->n == lb->n && la->n > 0 ? 0 : INFINITY;
    for (int i = 0; i < la->n; i++) {
        ts_tensor *tb = ts_tensor_list_get(lb, la->names[i]);
        if (!tb) return INFINITY;
        ts_scope_begin();
        ts_tensor *a = ts_to_dtype(la->tensors[i], TS_F64), *b = ts_to_dtype(tb, TS_F64);
        double d = ts_item(ts_max(ts_div(ts_abs(ts_sub(a, b)), ts_clamp_min(ts_abs(b), 1e-3))));
        if (!(d <= worst)) worst = d;
        ts_scope_end();
    }
    return worst;
}

static double files_rel_diff(const char *a, const char *b) {
    ts_tensor_list la = {0}, lb = {0};
    double d = INFINITY;
    if (!ts_safetensors_load(a, ts_cpu(), &la) && !ts_safetensors_load(b, ts_cpu(), &lb))
        d = lists_rel_diff(&la, &lb);
    ts_tensor_list_free(&la);
    ts_tensor_list_free(&lb);
    return d;
}

static double module_rel_diff(ts_module *a, ts_module *b) {
    ts_tensor_list la = ts_module_state_dict(a), lb = ts_module_state_dict(b);
    double d = lists_rel_diff(&la, &lb);
    ts_tensor_list_free(&la);
    ts_tensor_list_free(&lb);
    return d;
}

static char *join(const char *dir, const char *name) {
    static char buf[16][1024]; /* a few live at once */
    static int k;
    char d[400];
    snprintf(d, sizeof d, "%.399s", dir);
    char *p = buf[k++ % 16];
    snprintf(p, 1024, "%s/%.300s", d, name);
    return p;
}

static void remove_dir(const char *dir) {
    ts_dist_barrier();
    if (rank == 0) {
        char cmd[600];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        if (system(cmd) != 0) printf("could not remove %s\n", dir);
    }
    ts_dist_barrier();
}

static uint64_t generation(const char *dir) {
    char *g = ts_safetensors_metadata(join(dir, "manifest.safetensors"), "generation");
    uint64_t v = g ? strtoull(g, NULL, 10) : 0;
    free(g);
    return v;
}

/* ------------------------------------------------------------------ same world */
static void same_world(int stage, const char *dir) {
    ts_module *a = fsdp_new(42 + (uint64_t)rank, stage, 2);
    ts_tensor_list pa = ts_fsdp_parameters(a);
    ts_optim *oa = optim_new(pa.tensors, pa.n);
    ts_module *ddp = ts_ddp_new(model_new(42), (ts_ddp_opts){0});
    ts_tensor_list pd = ts_module_named_parameters(ddp);
    ts_optim *od = optim_new(pd.tensors, pd.n);
    for (int s = 0; s < 3; s++) {
        train_step(a, oa, s);
        train_step(ddp, od, s);
    }
    CHECK(ts_fsdp_save_sharded(a, dir, &(ts_fsdp_checkpoint){.optim = oa, .step = 3}) == TS_OK);
    CHECK_OK();
    double la = train_step(a, oa, 3);
    train_step(ddp, od, 3);

    /* a fresh model (other weights), loaded: the same next step, bit for bit */
    ts_module *b = fsdp_new(7, stage, 2);
    ts_tensor_list pb = ts_fsdp_parameters(b);
    ts_optim *ob = optim_new(pb.tensors, pb.n);
    ts_fsdp_checkpoint cb = {.optim = ob};
    CHECK(ts_fsdp_load_sharded(b, dir, &cb) == TS_OK);
    CHECK_OK();
    CHECK_EQ(cb.step, 3);
    double lb = train_step(b, ob, 3);
    CHECK(la == lb);
    CHECK(ts_fsdp_unshard(a) == TS_OK && ts_fsdp_unshard(b) == TS_OK);
    CHECK(module_rel_diff(ts_fsdp_module(a), ts_fsdp_module(b)) == 0);

    /* consolidated: DDP's model after the same steps, under its ordinary names */
    const char *full = join(dir, "full.safetensors");
    CHECK(ts_fsdp_save_full(a, full) == TS_OK);
    char *fmt = ts_safetensors_metadata(full, "format"); /* as ts_module_save: PyTorch's "pt" */
    CHECK(fmt && !strcmp(fmt, "pt"));
    free(fmt);
    ts_module *plain = model_new(3);
    CHECK(ts_module_load(plain, full, true) == TS_OK);
    CHECK_OK();
    double d = module_rel_diff(plain, ts_ddp_module(ddp));
    CHECK(d <= 1e-6);
    if (!(d <= 1e-6)) printf("stage %d: consolidated vs DDP: %g\n", stage, d);

    /* errors, each naming the file; the model stays usable */
    uint64_t g = generation(dir);
    char last[128];
    snprintf(last, sizeof last, "shard.%llu.%d-of-%d.safetensors", (unsigned long long)g, world - 1,
             world);
    const char *lastp = join(dir, last), *bak = join(dir, "bak");
    if (rank == 0) CHECK(rename(lastp, bak) == 0);
    ts_dist_barrier();
    CHECK(ts_fsdp_load_sharded(b, dir, &cb) != TS_OK);
    CHECK_ERR_HAS(TS_ERR_IO, "is missing");
    ts_dist_barrier();
    if (rank == 0) CHECK(rename(bak, lastp) == 0);
    /* truncated: the first rank's file (every rank reads it) cut in half */
    char first[128];
    snprintf(first, sizeof first, "shard.%llu.0-of-%d.safetensors", (unsigned long long)g, world);
    const char *firstp = join(dir, first);
    struct stat sb;
    if (rank == 0) {
        char cmd[1200];
        snprintf(cmd, sizeof cmd, "cp '%s' '%s'", firstp, bak);
        CHECK(system(cmd) == 0 && stat(firstp, &sb) == 0 && truncate(firstp, sb.st_size / 2) == 0);
    }
    ts_dist_barrier();
    CHECK(ts_fsdp_load_sharded(b, dir, &cb) != TS_OK);
    CHECK(strstr(ts_error_message(), "shard.") != NULL);
    if (!strstr(ts_error_message(), "shard.")) printf("truncated: %s\n", ts_error_message());
    ts_error_clear();
    ts_dist_barrier();
    if (rank == 0) CHECK(rename(bak, firstp) == 0);
    ts_dist_barrier();
    /* a different model: other units */
    ts_module *c = fsdp_new(7, stage, 1);
    CHECK(ts_fsdp_load_sharded(c, dir, NULL) != TS_OK);
    CHECK_ERR_HAS(TS_ERR_ARG, "different model");
    ts_module_free(c);
    /* an optimizer over other tensors */
    CHECK(ts_fsdp_load_sharded(b, dir, &(ts_fsdp_checkpoint){.optim = od}) != TS_OK);
    CHECK_ERR_HAS(TS_ERR_ARG, "ts_fsdp_parameters");

    /* a save that fails on the last rank (its file's name is taken by a folder) is not committed:
     * the previous checkpoint loads as before */
    snprintf(last, sizeof last, "shard.%llu.%d-of-%d.safetensors", (unsigned long long)g + 1,
             world - 1, world);
    lastp = join(dir, last);
    if (rank == 0) CHECK(mkdir(lastp, 0777) == 0);
    ts_dist_barrier();
    CHECK(ts_fsdp_save_sharded(a, dir, &(ts_fsdp_checkpoint){.optim = oa, .step = 4}) != TS_OK);
    char want[32];
    snprintf(want, sizeof want, "rank %d", world - 1);
    if (world > 1 && rank != world - 1) CHECK(strstr(ts_error_message(), want) != NULL);
    ts_error_clear();
    CHECK_EQ(generation(dir), g);
    /* an error pending on the last rank alone (a failed step): every rank's save fails, none
     * waits for it */
    if (rank == world - 1) {
        ts_scope_begin();
        CHECK(ts_reshape(ts_zeros(TS_SHAPE(2), (ts_opts){0}), TS_SHAPE(3)) == NULL);
        ts_scope_end();
    }
    CHECK(ts_fsdp_save_sharded(a, dir, &(ts_fsdp_checkpoint){.optim = oa, .step = 4}) != TS_OK);
    ts_error_clear();
    CHECK_EQ(generation(dir), g);
    ts_dist_barrier();
    if (rank == 0) CHECK(rmdir(lastp) == 0);
    ts_module *e = fsdp_new(9, stage, 2);
    ts_tensor_list pe = ts_fsdp_parameters(e);
    ts_optim *oe = optim_new(pe.tensors, pe.n);
    ts_fsdp_checkpoint ce = {.optim = oe};
    CHECK(ts_fsdp_load_sharded(e, dir, &ce) == TS_OK);
    CHECK_EQ(ce.step, 3);
    CHECK(train_step(e, oe, 3) == la);
    CHECK_OK();

    ts_module_free(plain);
    ts_optim_free(oa);
    ts_optim_free(ob);
    ts_optim_free(od);
    ts_optim_free(oe);
    ts_tensor_list_free(&pa);
    ts_tensor_list_free(&pb);
    ts_tensor_list_free(&pd);
    ts_tensor_list_free(&pe);
    ts_module_free(a);
    ts_module_free(b);
    ts_module_free(e);
    ts_module_free(ddp);
}

/* ------------------------------------------------------------------ 4 -> 2 -> 1 */
static void save_loss(const char *path, double v) {
    if (rank == 0) {
        ts_tensor_list l = {0};
        ts_tensor *t = ts_tensor_f64(TS_SHAPE(), &v, (ts_opts){0});
        ts_tensor_list_add(&l, "loss", t);
        ts_release(t);
        CHECK(ts_safetensors_save(path, &l, NULL, 0) == TS_OK);
        ts_tensor_list_free(&l);
    }
    ts_dist_barrier();
}

static void check_loss(const char *path, double v) {
    ts_tensor_list l = {0};
    CHECK(ts_safetensors_load(path, ts_cpu(), &l) == TS_OK);
    ts_tensor *t = ts_tensor_list_get(&l, "loss");
    double w = t ? ts_item(t) : NAN;
    CHECK(fabs(v - w) <= 1e-12 * fabs(w));
    if (!(fabs(v - w) <= 1e-12 * fabs(w))) printf("loss %.17g, expected %.17g\n", v, w);
    ts_tensor_list_free(&l);
}

static void full(ts_module *f, const char *dir, const char *name) {
    CHECK(ts_fsdp_save_full(f, join(dir, name)) == TS_OK);
}

static void check_files(const char *dir, const char *a, const char *b, double tol) {
    double d = files_rel_diff(join(dir, a), join(dir, b));
    CHECK(d <= tol);
    if (!(d <= tol)) printf("world %d: %s vs %s: %g (tolerance %g)\n", world, a, b, d, tol);
}

/* decay_groups: each unit's shard as two leaves, the optimizer in two groups (decaying leaves
 * first, so not in ts_fsdp_parameters' order); the checkpoint joins and cuts their states */
static ts_optim *optim_groups(ts_module *f) {
    ts_tensor_list d, n;
    if (ts_fsdp_decay_groups(f, &d, &n) != TS_OK) return NULL;
    ts_optim *o = optim_new(d.tensors, d.n);
    if (o && ts_optim_add_param_group_wd(o, n.tensors, n.n, 3e-3, 0) != TS_OK) {
        ts_optim_free(o);
        o = NULL;
    }
    ts_tensor_list_free(&d);
    ts_tensor_list_free(&n);
    return o;
}

static void chain(int stage, const char *dir, bool groups) {
    uint64_t seed = world == 4 ? 42 : 7 + (uint64_t)world;
    ts_module *f = groups ? ts_fsdp_new(model_new(seed), (ts_fsdp_opts){.stage = stage,
                                                                        .units = UNITS,
                                                                        .n_units = 2,
                                                                        .decay_groups = true})
                          : fsdp_new(seed, stage, 2);
    ts_tensor_list p = ts_fsdp_parameters(f);
    ts_optim *o = groups ? optim_groups(f) : optim_new(p.tensors, p.n);
    ts_fsdp_checkpoint c = {.optim = o};
    if (world == 4) {
        for (int s = 0; s < 3; s++) train_step(f, o, s);
        c.step = 3;
        CHECK(ts_fsdp_save_sharded(f, join(dir, "ck4"), &c) == TS_OK);
        full(f, dir, "p3_w4.safetensors");
        save_loss(join(dir, "l4_w4.safetensors"), train_step(f, o, 3));
        full(f, dir, "p4_w4.safetensors");
        save_loss(join(dir, "l5_w4.safetensors"), train_step(f, o, 4));
        full(f, dir, "p5_w4.safetensors");
    } else if (world == 2) {
        CHECK(ts_fsdp_load_sharded(f, join(dir, "ck4"), &c) == TS_OK);
        CHECK_EQ(c.step, 3);
        full(f, dir, "p3_w2.safetensors");
        check_files(dir, "p3_w2.safetensors", "p3_w4.safetensors", 0);
        check_loss(join(dir, "l4_w4.safetensors"), train_step(f, o, 3));
        full(f, dir, "p4_w2.safetensors");
        check_files(dir, "p4_w2.safetensors", "p4_w4.safetensors", 1e-9);
        c.step = 4;
        CHECK(ts_fsdp_save_sharded(f, join(dir, "ck2"), &c) == TS_OK);
    } else {
        CHECK(ts_fsdp_load_sharded(f, join(dir, "ck2"), &c) == TS_OK);
        CHECK_EQ(c.step, 4);
        full(f, dir, "p4_w1.safetensors");
        check_files(dir, "p4_w1.safetensors", "p4_w2.safetensors", 0);
        check_loss(join(dir, "l5_w4.safetensors"), train_step(f, o, 4));
        full(f, dir, "p5_w1.safetensors");
        check_files(dir, "p5_w1.safetensors", "p5_w4.safetensors", 1e-9);
    }
    CHECK_OK();
    ts_optim_free(o);
    ts_tensor_list_free(&p);
    ts_module_free(f);
}

#ifdef TS_MPIEXEC
static int run_chain(const char *self, int np, int stage, const char *dir, bool groups) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "%s -n %d --oversubscribe --allow-run-as-root --bind-to none '%s' chain %d '%s'%s",
             TS_MPIEXEC, np, self, stage, dir, groups ? " groups" : "");
    fflush(stdout);
    int rc = system(cmd);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : 128;
}
#endif

int main(int argc, char **argv) {
    if (ts_dist_init((ts_dist_opts){.timeout_s = 120}) != TS_OK) {
        printf("dist_init: %s\n", ts_error_message());
        return 1;
    }
    rank = ts_dist_rank();
    world = ts_dist_world_size();
    if ((argc == 4 || argc == 5) && !strcmp(argv[1], "chain")) {
        chain(atoi(argv[2]), argv[3], argc == 5);
        ts_dist_finalize();
        return ts_test_finish();
    }
    if (rank == 0) printf("%s\n", ts_dist_describe());
    char dir[256];
    shared_dir("/tmp/ts_fsdp_ck_", dir, sizeof dir);
    char ck[300];
    snprintf(ck, sizeof ck, "%s/ck", dir);
    for (int stage = 1; stage <= 3; stage++) same_world(stage, ck);
    remove_dir(dir);
#ifdef TS_MPIEXEC
    /* as a world of one: this program under mpiexec with 4, then 2, then 1 ranks */
    if (world == 1 && ts_dist_is_available()) {
        char self[1024];
        ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
        CHECK(n > 0);
        self[n > 0 ? n : 0] = '\0';
        /* stages 1 and 3, and stage 3 with decay groups */
        for (int k = 0; n > 0 && k < 3; k++) {
            int stage = k == 0 ? 1 : 3;
            shared_dir("/tmp/ts_fsdp_ck_", dir, sizeof dir);
            for (int np = 4; np >= 1; np /= 2) {
                int rc = run_chain(self, np, stage, dir, k == 2);
                CHECK_EQ(rc, 0);
                if (rc)
                    printf("stage %d%s: the chain's run on %d ranks failed\n", stage,
                           k == 2 ? " (decay groups)" : "", np);
            }
            remove_dir(dir);
        }
    }
#endif
    ts_dist_finalize();
    return ts_test_finish();
}
