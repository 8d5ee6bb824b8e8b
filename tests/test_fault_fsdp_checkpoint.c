/* test_fault_fsdp_checkpoint.c — allocation-failure sweeps (fault_sweep.h) over FSDP's sharded
 * checkpoints in a world of one (two units, stage 3, SGD with momentum after a step):
 *  - ts_fsdp_save_sharded over a committed checkpoint: a failed save leaves that checkpoint
 *    committed (the manifest's generation stays 1), a save that succeeds commits generation 2,
 *    and the shards and the optimizer are untouched either way;
 *  - ts_fsdp_load_sharded of the checkpoint after one more step and a change of the grad scaler's
 *    state: a failed load changes nothing (shards, optimizer and scaler as before it: no half-done
 *    commit), one that succeeds brings back all of the checkpoint, the scaler's state included
 *    (its load is the last step of the commit).
 * Each failure ends in a clear TS_ERR_OOM (never a format error: a metadata read that ran out of
 * memory is not a malformed file) and leaks nothing; the call then succeeds. */
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
    ts_grad_scaler *scaler;
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
    return ts_fsdp_save_sharded(
               c->t.m, c->dir,
               &(ts_fsdp_checkpoint){.optim = c->t.o, .scaler = c->scaler, .step = step}) == TS_OK;
}

/* the scaler's state as a state dict would carry it (scale, tracker, factors, interval) */
static void set_scaler(ts_grad_scaler *s, double scale, double tracker) {
    const char *names[] = {"scale", "growth_factor", "backoff_factor", "growth_interval",
                           "_growth_tracker"};
    double v[] = {scale, 2.0, 0.5, 2000, tracker};
    ts_tensor_list sd = {0};
    for (int k = 0; k < 5; k++) {
        ts_tensor *t = ts_tensor_f64(TS_SHAPE(), &v[k], (ts_opts){.device = ts_cpu()});
        CHECK(t && ts_tensor_list_add(&sd, names[k], t) == TS_OK);
        ts_release(t);
    }
    CHECK(ts_grad_scaler_load_state_dict(s, &sd) == TS_OK);
    ts_tensor_list_free(&sd);
}

/* an FSDP model after one SGD step, its checkpoint (generation 1, step 1) committed in a folder of
 * its own */
static void *ck_setup(void) {
    ck_case *c = calloc(1, sizeof *c);
    snprintf(c->dir, sizeof c->dir, "/tmp/ts-fsdp-ckfault-XXXXXX");
    CHECK(mkdtemp(c->dir) != NULL);
    snprintf(c->manifest, sizeof c->manifest, "%s/manifest.safetensors", c->dir);
    c->t.m = ts_fsdp_new(sweep_mlp_new(ts_cpu()), (ts_fsdp_opts){.units = UNITS, .n_units = 2});
    ts_tensor_list l = ts_fsdp_parameters(c->t.m);
    c->t.o = ts_sgd_new_params(l.tensors, l.n, (ts_sgd_opts){.lr = 0.1, .momentum = 0.9});
    ts_tensor_list_free(&l);
    c->scaler = ts_grad_scaler_new((ts_grad_scaler_opts){0});
    set_scaler(c->scaler, 1024, 7);
    sweep_batch_new(ts_cpu(), &c->t.x, &c->t.y);
    CHECK(sweep_trainee_step(c));
    CHECK(save(c, 1));
    CHECK_OK();
    return c;
}

static void ck_free(void *p) {
    ck_case *c = p;
    remove_dir(c->dir);
    ts_grad_scaler_free(c->scaler);
    sweep_trainee_free(p);
}

/* the shards, the optimizer's state and the scaler's */
static ts_snapshot ck_snap(void *p) {
    ck_case *c = p;
    ts_snapshot s = ts_snapshot_take(NULL, c->t.o, NULL);
    ts_tensor_list l = ts_fsdp_parameters(c->t.m);
    ts_snapshot_add(&s, "shard.", &l);
    ts_tensor_list_free(&l);
    l = ts_grad_scaler_state_dict(c->scaler);
    CHECK(l.n == 5);
    ts_snapshot_add(&s, "scaler.", &l);
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

/* ... then one more step and another scaler state, which the load undoes */
static void *load_setup(void) {
    ck_case *c = ck_setup();
    CHECK(sweep_trainee_step(c));
    set_scaler(c->scaler, 256, 3);
    return c;
}

static bool load_run(void *p) {
    ck_case *c = p;
    ts_fsdp_checkpoint ck = {.optim = c->t.o, .scaler = c->scaler};
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
    ts_sweep_stats st = ts_fault_sweep(&sv, MAX_POINTS);
    /* out of memory is never reported as another error */
    CHECK(st.errors > 0 && st.oom == st.errors);
    ts_sweep_case ld = {.name = "fsdp load sharded",
                        .setup = load_setup,
                        .run = load_run,
                        .teardown = ck_free,
                        .snap = ck_snap};
    st = ts_fault_sweep(&ld, MAX_POINTS);
    CHECK(st.errors > 0 && st.oom == st.errors); /* not "not a sharded checkpoint", say */
    CHECK(ts_dist_finalize() == TS_OK);
    return ts_test_finish();
}
