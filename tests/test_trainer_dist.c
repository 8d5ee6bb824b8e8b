/* test_trainer_dist.c — the `tessera` command's exact resume: killed by SIGKILL mid-epoch and
 * mid-checkpoint, --max-steps and --checkpoint-every, and under mpiexec (DistributedDataParallel
 * over 2 ranks against one process, a killed 2-rank run resumed). The harness:
 * support/trainer_run.c. */
#define _POSIX_C_SOURCE 200809L /* geteuid */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "trainer_run.h"
#include "ts_test.h"

/* Killed by SIGKILL in epoch 2, resumed: the final checkpoint equals an uninterrupted run's, byte
 * for byte (weights, optimizer state, step, RNG state), whatever the number of workers. */
static void test_resume(void) {
#define RUN3(dir, workers)                                                                         \
    "train", "--model", "mlp", DATA, "--epochs", "3", "--seed", "7", "--progress", "none",         \
        "--checkpoint", path_in(dir, NULL), "--workers", workers
    result r = RUN(RUN3("full", "2"));
    check_clean_exit(&r);
    result_free(&r);

    /* 8 batches an epoch: the 12th is in the middle of epoch 2 */
    r = RUN_ENV("TS_TRAIN_KILL_AFTER_BATCHES=12", RUN3("killed", "1"));
    CHECK(killed(&r));
    epoch_line e[3];
    CHECK_EQ(parse_epochs(r.out, e, 3), 1);
    result_free(&r);
    CHECK_EQ(checkpoint_step(path_in("killed", "latest.safetensors")), 8);
    CHECK(
        !same_file(path_in("full", "latest.safetensors"), path_in("killed", "latest.safetensors")));

    r = RUN(RUN3("killed", "0"), "--resume");
    check_clean_exit(&r);
    CHECK(r.out && strstr(r.out, "at step 8: epoch 2, batch 0"));
    CHECK_EQ(parse_epochs(r.out, e, 3), 2);
    CHECK(e[0].epoch == 2 && e[1].epoch == 3);
    result_free(&r);
    CHECK(
        same_file(path_in("full", "latest.safetensors"), path_in("killed", "latest.safetensors")));
    CHECK(same_file(path_in("full", "model.safetensors"), path_in("killed", "model.safetensors")));

    /* killed while writing epoch 2's checkpoint: epoch 1's stays whole and loadable */
    r = RUN_ENV("TS_TRAIN_KILL_IN_SAVE=2", RUN3("midsave", "2"));
    CHECK(killed(&r));
    CHECK(r.out && strstr(r.out, "epoch 2/3"));
    result_free(&r);
    CHECK(has_tmp_file(path_in("midsave", NULL))); /* the cut-short temporary file */
    CHECK_EQ(checkpoint_step(path_in("midsave", "latest.safetensors")), 8);
    r = RUN("eval", "--model", "mlp", DATA, "--checkpoint", path_in("midsave", NULL));
    check_clean_exit(&r);
    CHECK(r.out && strstr(r.out, "(step 8)"));
    result_free(&r);
    r = RUN(RUN3("midsave", "2"), "--resume");
    check_clean_exit(&r);
    result_free(&r);
    CHECK(!has_tmp_file(path_in("midsave", NULL)));
    CHECK(
        same_file(path_in("full", "latest.safetensors"), path_in("midsave", "latest.safetensors")));

    /* resuming a finished run trains nothing and reports the accuracy */
    r = RUN(RUN3("full", "2"), "--resume");
    check_clean_exit(&r);
    CHECK_EQ(parse_epochs(r.out, e, 3), 0);
    CHECK(final_accuracy(r.out) >= 0.9);
    result_free(&r);
#undef RUN3
}

/* --max-steps stops at the step (also across a resume); --checkpoint-every saves mid-epoch, and a
 * run killed after such a save and resumed ends with the uninterrupted run's files, byte for byte.
 */
static void test_max_steps_and_midepoch_resume(void) {
#define RUNS(dir)                                                                                  \
    "train", "--model", "mlp", DATA, "--seed", "5", "--progress", "none", "--max-steps", "20",     \
        "--checkpoint-every", "3", "--checkpoint", path_in(dir, NULL)
    result r = RUN(RUNS("steps_full"));
    check_clean_exit(&r);
    CHECK(r.out && strstr(r.out, "stopped after step 20 (--max-steps 20)"));
    CHECK(r.out && strstr(r.out, "3 epochs (at most 20 steps)")); /* 8 batches an epoch */
    epoch_line e[4];
    CHECK_EQ(parse_epochs(r.out, e, 4), 3);
    result_free(&r);
    CHECK_EQ(checkpoint_step(path_in("steps_full", "latest.safetensors")), 20);

    /* killed after batch 14: the last save was the mid-epoch one at step 12 (epoch 2, batch 4) */
    r = RUN_ENV("TS_TRAIN_KILL_AFTER_BATCHES=14", RUNS("steps_cut"));
    CHECK(killed(&r));
    result_free(&r);
    CHECK_EQ(checkpoint_step(path_in("steps_cut", "latest.safetensors")), 12);
    r = RUN(RUNS("steps_cut"), "--resume");
    check_clean_exit(&r);
    CHECK(r.out && strstr(r.out, "at step 12: epoch 2, batch 4"));
    CHECK(r.out && strstr(r.out, "stopped after step 20"));
    result_free(&r);
    CHECK(same_file(path_in("steps_full", "latest.safetensors"),
                    path_in("steps_cut", "latest.safetensors")));
    CHECK(same_file(path_in("steps_full", "model.safetensors"),
                    path_in("steps_cut", "model.safetensors")));
    /* a run already at its limit trains nothing more */
    r = RUN(RUNS("steps_full"), "--resume");
    check_clean_exit(&r);
    CHECK_EQ(parse_epochs(r.out, e, 4), 0);
    result_free(&r);
    CHECK_EQ(checkpoint_step(path_in("steps_full", "latest.safetensors")), 20);
#undef RUNS
    check_usage_error(RUN("train", "--max-steps", "0"),
                      "tessera: --max-steps: expected a positive integer, got '0'\n");
    check_usage_error(RUN("train", "--max-steps", "ten"),
                      "tessera: --max-steps: expected a positive integer, got 'ten'\n");
    check_usage_error(RUN("train", "--checkpoint-every", "5"),
                      "tessera: --checkpoint-every: needs --checkpoint DIR\n");
}

#ifdef TS_MPIEXEC
/* The trainer under mpiexec: DistributedDataParallel over 2 ranks with --batch-size 32 ends where
 * one process with --batch-size 64 does (the same global batches, averaged); only rank 0 prints
 * and writes; a killed 2-rank run resumed ends with the uninterrupted run's checkpoint, byte for
 * byte. */
static result run_mpi(const char *env, int np, const char *const *args) {
    char nps[8];
    snprintf(nps, sizeof nps, "%d", np);
    const char *argv[80] = {TS_MPIEXEC, "-np", nps, "--oversubscribe", "--bind-to", "none"};
    int n = 6;
    if (geteuid() == 0) argv[n++] = "--allow-run-as-root";
    argv[n++] = TS_TESSERA_BIN;
    for (int i = 0; args[i] && n < 79; i++) argv[n++] = args[i];
    argv[n] = NULL;
    const char *envs[] = {"OMP_NUM_THREADS=1", env, NULL};
    return run_argv(envs, argv);
}
#define RUN_MPI(env, np, ...) run_mpi(env, np, (const char *const[]){__VA_ARGS__, NULL})

static void test_distributed(void) {
#define RUND(dir, bs)                                                                              \
    "train", "--model", "mlp", DATA, "--seed", "3", "--progress", "lines", "--batch-size", bs,     \
        "--max-steps", "12", "--schedule", "constant", "--checkpoint", path_in(dir, NULL)
    result r = RUN(RUND("one", "64"), "--threads", "1");
    check_clean_exit(&r);
    result_free(&r);
    r = RUN_MPI(NULL, 2, RUND("two", "32"));
    CHECK_EQ(exit_code(&r), 0);
    CHECK(r.out && strstr(r.out, "batch 32 per rank x 2 ranks = global batch 64"));
    CHECK(r.out && strstr(r.out, "world 2, rank 0"));
    /* rank 0 alone prints: one header, one final line */
    int finals = 0;
    for (const char *p = r.out; p && (p = strstr(p, "test accuracy:")); p++) finals++;
    CHECK_EQ(finals, 1);
    if (exit_code(&r) != 0) fprintf(stderr, "mpiexec: %s\n%s\n", r.out, r.err);
    result_free(&r);
    /* float32 sums in another order (two halves of 32 rows, then their average): a few ulps per
     * step over 12 steps */
    double d =
        weights_rel_diff(path_in("two", "model.safetensors"), path_in("one", "model.safetensors"));
    if (!(d <= 1e-5)) fprintf(stderr, "2 ranks vs one process: %g relative\n", d);
    CHECK(d <= 1e-5);

    /* killed (every rank after its 7th batch, past the mid-epoch save at step 6 of an epoch of
     * 8), resumed */
    r = RUN_MPI(NULL, 2, RUND("dfull", "32"), "--checkpoint-every", "3");
    CHECK_EQ(exit_code(&r), 0);
    result_free(&r);
    r = RUN_MPI("TS_TRAIN_KILL_AFTER_BATCHES=7", 2, RUND("dcut", "32"), "--checkpoint-every", "3");
    CHECK(exit_code(&r) != 0);
    result_free(&r);
    CHECK_EQ(checkpoint_step(path_in("dcut", "latest.safetensors")), 6);
    r = RUN_MPI(NULL, 2, RUND("dcut", "32"), "--checkpoint-every", "3", "--resume");
    CHECK_EQ(exit_code(&r), 0);
    CHECK(r.out && strstr(r.out, "at step 6: epoch 1, batch 6"));
    result_free(&r);
    CHECK(same_file(path_in("dfull", "latest.safetensors"), path_in("dcut", "latest.safetensors")));
    CHECK(same_file(path_in("dfull", "model.safetensors"), path_in("dcut", "model.safetensors")));

    /* `tessera devices` under the launcher shows the world */
    r = RUN_MPI(NULL, 2, "devices");
    CHECK_EQ(exit_code(&r), 0);
    CHECK(r.out && strstr(r.out, "distributed: world 2, rank 0"));
    result_free(&r);
#undef RUND
}
#endif

int main(void) {
    if (!trainer_setup(TS_TESSERA_BIN)) return ts_test_skip("cannot create a temporary folder");
    test_resume();
    test_max_steps_and_midepoch_resume();
#ifdef TS_MPIEXEC
    test_distributed();
#else
    printf("built without MPI: the trainer under mpiexec is not tested\n");
#endif
    trainer_cleanup();
    return ts_test_finish();
}
