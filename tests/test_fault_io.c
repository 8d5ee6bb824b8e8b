/* test_fault_io.c — allocation-failure sweeps (fault_sweep.h) over files and data: safetensors
 * save then load, a checkpoint save over an older checkpoint, a checkpoint load, and an epoch of
 * the loader with two workers. Each failing allocation must end in a clear error and leak nothing;
 * a file on disk is always the old one or the new one (never half written), a failed load leaves
 * the model and optimizer as they were and hands back no tensors, and the loader delivers exactly
 * the batches before the failing one. After ts_error_clear() the call succeeds. */
#define _POSIX_C_SOURCE 200809L /* mkdtemp */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fault_sweep.h"
#include "sweep_model.h"
#include "ts_test.h"

#define MAX_POINTS 20000

static char dir[64], st_path[128], ck_path[128];

/* ------------------------------------------------------------------ safetensors */
static ts_tensor_list tensors_new(uint64_t seed) {
    ts_tensor_list l = {0};
    ts_manual_seed(seed);
    ts_scope_begin();
    ts_tensor_list_add(&l, "w", ts_randn(TS_SHAPE(4, 3), (ts_opts){0}));
    ts_tensor_list_add(&l, "idx", ts_randint(0, 100, TS_SHAPE(5), (ts_opts){0}));
    ts_tensor_list_add(&l, "h", ts_to_dtype(ts_randn(TS_SHAPE(2), (ts_opts){0}), TS_F16));
    ts_scope_end();
    return l;
}

static ts_snapshot snap_list(const ts_tensor_list *l) {
    ts_snapshot s = {0};
    ts_snapshot_add(&s, "", l);
    return s;
}

static ts_snapshot snap_file(const char *path) {
    ts_tensor_list l = {0};
    ts_status st = ts_safetensors_load(path, ts_cpu(), &l);
    ts_snapshot s = snap_list(&l);
    if (st) s.failed = true;
    ts_tensor_list_free(&l);
    return s;
}

static ts_snapshot old_file, new_file;

typedef struct st_state {
    ts_tensor_list fresh, loaded;
    int phase; /* 0: save to do, 1: load to do, 2: done */
} st_state;

static void *st_setup(void) {
    ts_tensor_list old = tensors_new(1);
    CHECK(ts_safetensors_save(st_path, &old, NULL, 0) == TS_OK);
    ts_tensor_list_free(&old);
    st_state *s = calloc(1, sizeof *s);
    s->fresh = tensors_new(2);
    return s;
}

static bool st_run(void *p) {
    st_state *s = p;
    static const char *const meta[] = {"format", "pt"};
    if (s->phase == 0) {
        if (ts_safetensors_save(st_path, &s->fresh, meta, 1) != TS_OK) return false;
        s->phase = 1;
    }
    if (ts_safetensors_load(st_path, ts_sim(0), &s->loaded) != TS_OK) return false;
    s->phase = 2;
    return ts_error() == TS_OK;
}

static void st_check(void *p, bool ok) {
    st_state *s = p;
    ts_snapshot f = snap_file(st_path);
    if (s->phase == 0) {
        /* a failed save: the old file, or the new one when only the folder's fsync failed */
        if (!ts_snapshot_equal(&f, &new_file))
            ts_snapshot_check("file after a failed save", &f, &old_file);
    } else {
        ts_snapshot_check("file after a save", &f, &new_file);
    }
    ts_snapshot_free(&f);
    if (s->phase == 2) {
        ts_snapshot l = snap_list(&s->loaded);
        ts_snapshot_check("loaded tensors", &l, &new_file);
        ts_snapshot_free(&l);
    } else {
        CHECK(s->loaded.n == 0); /* a failed load hands back nothing */
    }
    if (ok) CHECK(s->phase == 2);
}

static void st_teardown(void *p) {
    st_state *s = p;
    ts_tensor_list_free(&s->fresh);
    ts_tensor_list_free(&s->loaded);
    free(s);
}

static void sweep_safetensors(void) {
    ts_tensor_list a = tensors_new(1), b = tensors_new(2);
    old_file = snap_list(&a);
    new_file = snap_list(&b);
    ts_tensor_list_free(&a);
    ts_tensor_list_free(&b);
    ts_sweep_case c = {.name = "safetensors save+load",
                       .setup = st_setup,
                       .run = st_run,
                       .teardown = st_teardown,
                       .check = st_check};
    ts_fault_sweep(&c, MAX_POINTS);
    ts_snapshot_free(&old_file);
    ts_snapshot_free(&new_file);
}

/* ------------------------------------------------------------------ checkpoints */
/* A model and Adam after `steps` steps. */
static sweep_trainee *trained_new(int steps) {
    sweep_trainee *t = calloc(1, sizeof *t);
    t->m = sweep_mlp_new(ts_cpu());
    t->o = ts_adam_new(t->m, (ts_adam_opts){.lr = 1e-2});
    sweep_batch_new(ts_cpu(), &t->x, &t->y);
    for (int i = 0; i < steps; i++) sweep_trainee_step(t);
    return t;
}

static ts_snapshot snap_trained(int steps) {
    sweep_trainee *t = trained_new(steps);
    ts_snapshot s = sweep_trainee_snap(t);
    sweep_trainee_free(t);
    return s;
}

/* What a checkpoint file holds, read into a fresh model and optimizer. */
static ts_snapshot snap_checkpoint(const char *path, int64_t *step) {
    sweep_trainee *t = trained_new(0);
    ts_status st = ts_checkpoint_load(path, t->m, t->o, step);
    ts_snapshot s = sweep_trainee_snap(t);
    if (st) s.failed = true;
    sweep_trainee_free(t);
    return s;
}

static ts_snapshot ck_old, ck_new; /* after 1 and after 2 steps */

static void *cks_setup(void) {
    sweep_trainee *t = trained_new(1);
    CHECK(ts_checkpoint_save(ck_path, t->m, t->o, 1) == TS_OK);
    sweep_trainee_step(t);
    return t;
}

static bool cks_run(void *p) {
    sweep_trainee *t = p;
    return ts_checkpoint_save(ck_path, t->m, t->o, 2) == TS_OK;
}

static void cks_check(void *p, bool ok) {
    int64_t step = -1;
    ts_snapshot f = snap_checkpoint(ck_path, &step);
    if (ok || step == 2) {
        ts_snapshot_check("checkpoint after a save", &f, &ck_new);
        CHECK(step == 2);
    } else {
        ts_snapshot_check("checkpoint after a failed save", &f, &ck_old);
        CHECK(step == 1);
    }
    ts_snapshot_free(&f);
}

/* Loading the 2-step checkpoint into a 1-step model: it changes wholly or not at all. */
static void *ckl_setup(void) { return trained_new(1); }

static bool ckl_run(void *p) {
    sweep_trainee *t = p;
    int64_t step = 0;
    return ts_checkpoint_load(ck_path, t->m, t->o, &step) == TS_OK && step == 2;
}

static void sweep_checkpoints(void) {
    ck_old = snap_trained(1);
    ck_new = snap_trained(2);
    ts_sweep_case save = {.name = "checkpoint save",
                          .setup = cks_setup,
                          .run = cks_run,
                          .teardown = sweep_trainee_free,
                          .check = cks_check};
    ts_fault_sweep(&save, MAX_POINTS);
    ts_sweep_case load = {.name = "checkpoint load",
                          .setup = ckl_setup,
                          .run = ckl_run,
                          .teardown = sweep_trainee_free,
                          .snap = sweep_trainee_snap};
    ts_fault_sweep(&load, MAX_POINTS);
    ts_snapshot_free(&ck_old);
    ts_snapshot_free(&ck_new);
}

/* ------------------------------------------------------------------ the loader */
#define N_SAMPLES 23
#define BATCH     5
#define N_BATCHES ((N_SAMPLES + BATCH - 1) / BATCH)

typedef struct loader_st {
    ts_dataset *d;
    double sums[N_BATCHES][2]; /* sum of x, sum of y, per batch received */
    int got;
    bool ended; /* the epoch ended without an error */
} loader_st;

static double ref_sums[N_BATCHES][2];
static int loader_workers;

static void *loader_setup(void) {
    loader_st *s = calloc(1, sizeof *s);
    ts_manual_seed(9);
    ts_scope_begin();
    ts_tensor *x = ts_randn(TS_SHAPE(N_SAMPLES, 3), (ts_opts){0});
    ts_tensor *y = ts_randint(0, 4, TS_SHAPE(N_SAMPLES), (ts_opts){0});
    s->d = ts_tensor_dataset_new(x, y);
    ts_scope_end();
    CHECK(s->d != NULL);
    return s;
}

static bool loader_run(void *p) {
    loader_st *s = p;
    s->got = 0;
    s->ended = false;
    ts_loader *l = ts_loader_new(
        s->d, (ts_loader_opts){
                  .batch_size = BATCH, .shuffle = true, .workers = loader_workers, .seed = 4});
    if (!l) return false;
    ts_batch b;
    while (ts_loader_next(l, &b)) {
        if (s->got >= N_BATCHES) break;
        ts_scope_begin();
        s->sums[s->got][0] = ts_item(ts_sum(b.x));
        s->sums[s->got][1] = ts_item(ts_sum(b.y));
        ts_scope_end();
        if (ts_error()) break; /* the sums themselves failed: not a batch received */
        s->got++;
    }
    s->ended = ts_error() == TS_OK;
    ts_loader_free(l);
    return s->ended && ts_error() == TS_OK;
}

static void loader_check(void *p, bool ok) {
    loader_st *s = p;
    if (ok) CHECK_EQ(s->got, N_BATCHES);
    /* the batches that arrived are the epoch's first ones, in order */
    for (int i = 0; i < s->got; i++) {
        bool same = s->sums[i][0] == ref_sums[i][0] && s->sums[i][1] == ref_sums[i][1];
        if (!same) fprintf(stderr, "  batch %d differs from the fault-free epoch's\n", i);
        CHECK(same);
    }
}

static void loader_teardown(void *p) {
    loader_st *s = p;
    ts_dataset_free(s->d);
    free(s);
}

static void sweep_loader(int workers, const char *name) {
    loader_workers = workers;
    loader_st *s = loader_setup();
    CHECK(loader_run(s) && s->got == N_BATCHES);
    memcpy(ref_sums, s->sums, sizeof ref_sums);
    loader_teardown(s);
    ts_sweep_case c = {.name = name,
                       .setup = loader_setup,
                       .run = loader_run,
                       .teardown = loader_teardown,
                       .check = loader_check};
    ts_fault_sweep(&c, MAX_POINTS);
}

int main(void) {
    if (ts_device_count(TS_SIM) < 1) return ts_test_skip("needs TS_SIM_DEVICES >= 1");
    snprintf(dir, sizeof dir, "/tmp/ts_fault_io_XXXXXX");
    if (!mkdtemp(dir)) return ts_test_skip("cannot make a temporary folder");
    snprintf(st_path, sizeof st_path, "%s/t.safetensors", dir);
    snprintf(ck_path, sizeof ck_path, "%s/ck.safetensors", dir);
    sweep_safetensors();
    sweep_checkpoints();
    sweep_loader(0, "loader, no workers");
    sweep_loader(2, "loader, 2 workers");
    remove(st_path);
    remove(ck_path);
    rmdir(dir);
    return ts_test_finish();
}
