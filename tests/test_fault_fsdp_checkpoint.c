/* test_fault_fsdp_checkpoint.c — allocation-failure sweeps (fault_sweep.h) over FSDP's sharded
 * checkpoints in a world of one (two units, stage 3, SGD with momentum after a step):
 *  - ts_fsdp_save_sharded over a committed checkpoint: a failed save leaves that checkpoint
 *    committed (the manifest's generation stays 1), a save that succeeds commits generation 2,
 *    and the shards and the optimizer are untouched either way;
 *  - ts_fsdp_load_sharded of the checkpoint after one more step: a failed load changes nothing
 *    (shards and optimizer as before it), one that succeeds brings back all of the checkpoint.
 * Each failure ends in a clear error and leaks nothing; the call then succeeds. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fault_sweep.h"
#include "sweep_model.h"
#include "ts_test.h"

#define MAX_POINTS 20000

static const char *const UNITS[] = {"0", "2"}; /* the two Linears; the root holds nothing */

typedef struct ck_case {
    sweep_trainee t; /* first: sweep_trainee_step and the snapshot take it */
    char dir[64];
    char manifest[96];
} ck_case;

static void remove_dir(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    char p[512];
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
            snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
            unlink(p);
        }
    closedir(d);
    rmdir(dir);
}

static bool save(ck_case *c, int64_t step) {
    return ts_fsdp_save_sharded(c->t.m, c->dir,
                                &(ts_fsdp_checkpoint){.optim = c->t.o, .step = step}) == TS_OK;
}

/* an FSDP model after one SGD step, its checkpoint (generation 1, step 1) committed in a folder of
 * its own */
static void *ck_setup(void) {
    ck_case *c = calloc(1, sizeof *c);
    snprintf(c->dir, sizeof c->dir, "/tmp/ts-fsdp-ckfault-XXXXXX");
    CHECK(mkdtemp(c->dir) != NULL);
    snprintf(c->manifest, sizeof c->manifest, "%s/manifest.safetensors", c->dir);
    c->t.m = ts_fsdp(sweep_mlp_new(ts_cpu()), (ts_fsdp_opts){.units = UNITS, .n_units = 2});
    ts_tensor_list l = ts_fsdp_parameters(c->t.m);
    c->t.o = ts_sgd_params(l.tensors, l.n, (ts_sgd_opts){.lr = 0.1, .momentum = 0.9});
    ts_tensor_list_free(&l);
    sweep_batch_new(ts_cpu(), &c->t.x, &c->t.y);
    CHECK(sweep_trainee_step(c));
    CHECK(save(c, 1));
    CHECK_OK();
    return c;
}

static void ck_free(void *p) {
    ck_case *c = p;
    remove_dir(c->dir);
    sweep_trainee_free(p);
}

/* the shards and the optimizer's state */
static ts_snapshot ck_snap(void *p) {
    ck_case *c = p;
    ts_snapshot s = ts_snapshot_take(NULL, c->t.o, NULL);
    ts_tensor_list l = ts_fsdp_parameters(c->t.m);
    ts_snapshot_add(&s, "shard.", &l);
    ts_tensor_list_free(&l);
    return s;
}

static bool save_run(void *p) { return save(p, 2); }

/* the committed generation: the new one only after a save that succeeded */
static void save_check(void *p, bool ok) {
    ck_case *c = p;
    char *g = ts_safetensors_metadata(c->manifest, "generation");
    CHECK(g && !strcmp(g, ok ? "2" : "1"));
    if (!(g && !strcmp(g, ok ? "2" : "1")))
        printf("save %s: the manifest's generation is %s\n", ok ? "succeeded" : "failed",
               g ? g : "(none)");
    free(g);
    ts_error_clear();
}

/* ... then one more step, which the load undoes */
static void *load_setup(void) {
    ck_case *c = ck_setup();
    CHECK(sweep_trainee_step(c));
    return c;
}

static bool load_run(void *p) {
    ck_case *c = p;
    ts_fsdp_checkpoint ck = {.optim = c->t.o};
    return ts_fsdp_load_sharded(c->t.m, c->dir, &ck) == TS_OK && ck.step == 1;
}

int main(void) {
    if (ts_dist_init((ts_dist_opts){0}) != TS_OK) return ts_test_skip("%s", ts_error_message());
    ts_sweep_case sv = {.name = "fsdp save sharded",
                        .setup = ck_setup,
                        .run = save_run,
                        .teardown = ck_free,
                        .snap = ck_snap,
                        .check = save_check};
    ts_fault_sweep(&sv, MAX_POINTS);
    ts_sweep_case ld = {.name = "fsdp load sharded",
                        .setup = load_setup,
                        .run = load_run,
                        .teardown = ck_free,
                        .snap = ck_snap};
    ts_fault_sweep(&ld, MAX_POINTS);
    CHECK(ts_dist_finalize() == TS_OK);
    return ts_test_finish();
}
