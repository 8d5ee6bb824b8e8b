/* test_trainer_fsdp.c — `tessera train --fsdp` under mpiexec: 2 ranks of sharded data parallel
 * (stage 3 and stage 1) end where DistributedDataParallel over 2 ranks does on the same global
 * batch (the consolidated model.safetensors within 1e-6 relative, same names); per-rank memory is
 * printed; the sharded checkpoint of a 2-rank run resumes as a world of one with the same global
 * batch; the usage errors (--fsdp with --devices, with --graph, a stage out of range). The harness:
 * support/trainer_run.c. */
#define _POSIX_C_SOURCE 200809L /* geteuid */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "trainer_run.h"
#include "ts_test.h"

static void test_usage(void) {
    check_usage_error(RUN("train", "--fsdp", "--devices", "sim:0,sim:1"),
                      "tessera: --fsdp: not with --devices (FSDP shards across processes: start "
                      "one per device with mpirun)\n");
    check_usage_error(RUN("train", "--fsdp", "--graph"),
                      "tessera: --fsdp: not with --graph (the gathers and reductions of the "
                      "shards are not captured)\n");
    check_usage_error(RUN("train", "--fsdp-stage", "1", "--offload-optimizer"),
                      "tessera: --offload-optimizer: with --fsdp, stage 2 or 3 (FSDP's cpu "
                      "offload of the shards; stage 1 keeps full gradients on every rank)\n");
    check_usage_error(RUN("train", "--fsdp-stage", "4"),
                      "tessera: --fsdp-stage: expected 1 (optimizer state sharded), 2 (+ "
                      "gradients) or 3 (+ parameters), got 4\n");
}

#ifdef TS_MPIEXEC
static result run_mpi(int np, const char *const *args) {
    char nps[8];
    snprintf(nps, sizeof nps, "%d", np);
    const char *argv[80] = {TS_MPIEXEC, "-np", nps, "--oversubscribe", "--bind-to", "none"};
    int n = 6;
    if (geteuid() == 0) argv[n++] = "--allow-run-as-root";
    argv[n++] = TS_TESSERA_BIN;
    for (int i = 0; args[i] && n < 79; i++) argv[n++] = args[i];
    argv[n] = NULL;
    const char *envs[] = {"OMP_NUM_THREADS=1", "TS_SIM_DEVICES=1", NULL};
    return run_argv(envs, argv);
}
#define RUN_MPI(np, ...) run_mpi(np, (const char *const[]){__VA_ARGS__, NULL})

static bool exists(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0;
}

static void test_fsdp_equals_ddp(void) {
#define RUNF(dir, bs, steps)                                                                       \
    "train", "--model", "mlp", DATA, "--seed", "3", "--progress", "none", "--batch-size", bs,      \
        "--max-steps", steps, "--schedule", "constant", "--optimizer", "sgd", "--momentum", "0.9", \
        "--checkpoint", path_in(dir, NULL)
    result r = RUN_MPI(2, RUNF("ddp", "32", "12"));
    CHECK_EQ(exit_code(&r), 0);
    result_free(&r);
    static const char *const stages[] = {"3", "1"};
    for (int i = 0; i < 2; i++) {
        r = RUN_MPI(2, RUNF("fsdp", "32", "12"), "--fsdp-stage", stages[i]);
        CHECK_EQ(exit_code(&r), 0);
        if (exit_code(&r) != 0) fprintf(stderr, "mpiexec: %s\n%s\n", r.out, r.err);
        char want[64];
        snprintf(want, sizeof want, "FullyShardedDataParallel stage %s", stages[i]);
        CHECK(r.out && strstr(r.out, want));
        CHECK(r.out && strstr(r.out, "fsdp: peak allocated per rank on cpu:"));
        CHECK(r.out && strstr(r.out, "batch 32 per rank x 2 ranks = global batch 64"));
        result_free(&r);
        /* the consolidated model: the unsharded model's names; 2 ranks sum a + b either way */
        double d = weights_rel_diff(path_in("fsdp", "model.safetensors"),
                                    path_in("ddp", "model.safetensors"));
        if (!(d <= 1e-6)) fprintf(stderr, "stage %s: fsdp vs ddp: %g relative\n", stages[i], d);
        CHECK(d <= 1e-6);
        char *w = ts_safetensors_metadata(path_in("fsdp", "sharded/manifest.safetensors"), "world");
        CHECK(w && !strcmp(w, "2"));
        free(w);
    }
    /* --offload-optimizer with --fsdp: each rank's shards, gradients and momentum on the host, the
     * model on sim:0, the same weights (sim runs the cpu's kernels) */
    r = RUN_MPI(2, RUNF("fsdpoff", "32", "12"), "--fsdp", "--offload-optimizer", "--device",
                "sim:0");
    CHECK_EQ(exit_code(&r), 0);
    if (exit_code(&r) != 0) fprintf(stderr, "mpiexec: %s\n%s\n", r.out, r.err);
    CHECK(r.out && strstr(r.out, "(offloaded: masters and state on the host)"));
    result_free(&r);
    double doff = weights_rel_diff(path_in("fsdpoff", "model.safetensors"),
                                   path_in("ddp", "model.safetensors"));
    if (!(doff <= 1e-6)) fprintf(stderr, "offloaded fsdp vs ddp: %g relative\n", doff);
    CHECK(doff <= 1e-6);

    /* saved by 2 ranks after epoch 1 (8 batches of 64), resumed as a world of one with the same
     * global batch, on to step 12 */
    r = RUN_MPI(2, RUNF("rs", "32", "8"), "--fsdp");
    CHECK_EQ(exit_code(&r), 0);
    result_free(&r);
    r = RUN(RUNF("rs", "64", "12"), "--fsdp", "--resume");
    check_clean_exit(&r);
    CHECK(r.out && strstr(r.out, "at step 8: epoch 2, batch 0"));
    CHECK(r.out && strstr(r.out, "stopped after step 12"));
    if (!(r.out && strstr(r.out, "at step 8"))) fprintf(stderr, "%s\n%s\n", r.out, r.err);
    result_free(&r);
    CHECK(exists(path_in("rs", "sharded/shard.2.0-of-1.safetensors")));
    CHECK(!exists(path_in("rs", "sharded/shard.1.0-of-2.safetensors")));
    /* and from the world of one back to 2 ranks */
    r = RUN_MPI(2, RUNF("rs", "32", "16"), "--fsdp", "--resume");
    CHECK_EQ(exit_code(&r), 0);
    CHECK(r.out && strstr(r.out, "at step 12: epoch 2, batch 4"));
    result_free(&r);
    /* another batch size per epoch: refused, saying what to keep */
    r = RUN(RUNF("rs", "32", "20"), "--fsdp", "--resume");
    CHECK_EQ(exit_code(&r), 2);
    CHECK(r.err && strstr(r.err, "--fsdp resumes on any number of processes"));
    result_free(&r);
#undef RUNF
}
/* A GPT (units: its blocks) equals DDP with AdamW and weight decay (the shards in decay groups:
 * matrices and embeddings decay, biases and norms not, as DDP's ts_adamw_decay_groups), and
 * `tessera generate` reads its model.safetensors; with --amp the units are gathered in bf16 and
 * reduced in float32 (printed), bf16 and f16 (grad scaling) train; a ResNet-20 (units: its
 * stages) trains, also under --amp (bf16 parameters around BatchNorm's float32 statistics). 2 ranks
 * add a + b in one order for all-reduce and reduce-scatter alike, so the float32 runs agree to
 * rounding of the same operations. */
static void test_zoo(void) {
    FILE *f = fopen(path_in("abc.txt", NULL), "w");
    for (int i = 0; f && i < 1500; i++) fputs("abcdefgh", f);
    if (f) fclose(f);
#define GPT(dir)                                                                                   \
    "train", "--data", "text", "--data-dir", path_in("abc.txt", NULL), "--context", "16",          \
        "--layers", "2", "--heads", "2", "--dim", "32", "--batch-size", "8", "--progress", "none", \
        "--max-steps", "10", "--weight-decay", "0.1", "--checkpoint", path_in(dir, NULL)
    result r = RUN_MPI(2, GPT("gpt_ddp"));
    CHECK_EQ(exit_code(&r), 0);
    result_free(&r);
    r = RUN_MPI(2, GPT("gpt_fsdp"), "--fsdp");
    CHECK_EQ(exit_code(&r), 0);
    CHECK(r.out && strstr(r.out, "stage 3, 3 units"));
    CHECK(r.out && strstr(r.out, ", decay groups\n"));
    if (exit_code(&r) != 0) fprintf(stderr, "mpiexec: %s\n%s\n", r.out, r.err);
    result_free(&r);
    double d = weights_rel_diff(path_in("gpt_fsdp", "model.safetensors"),
                                path_in("gpt_ddp", "model.safetensors"));
    if (!(d <= 1e-6)) fprintf(stderr, "gpt: fsdp vs ddp: %g relative\n", d);
    CHECK(d <= 1e-6);
    r = RUN("generate", "--checkpoint", path_in("gpt_fsdp", NULL), "--prompt", "abc", "--tokens",
            "5", "--greedy");
    check_clean_exit(&r);
    result_free(&r);
    /* mixed precision: the policy in the start-up line; bf16 and f16 (with grad scaling) train */
    static const char *const amp[] = {"bf16", "f16"};
    for (int i = 0; i < 2; i++) {
        r = RUN_MPI(2, GPT("gpt_amp"), "--fsdp", "--amp", "--amp-dtype", amp[i]);
        CHECK_EQ(exit_code(&r), 0);
        char want[96];
        snprintf(want, sizeof want, "parameters gathered in %s, gradients reduced in float32",
                 i ? "float16" : "bfloat16");
        CHECK(r.out && strstr(r.out, want));
        CHECK(r.out && strstr(r.out, i ? "mixed precision float16 with grad scaling"
                                       : "mixed precision bfloat16"));
        if (exit_code(&r) != 0 || !(r.out && strstr(r.out, want)))
            fprintf(stderr, "mpiexec: %s\n%s\n", r.out, r.err);
        result_free(&r);
        /* the model file holds float32, as the shards */
        ts_tensor_list sd = {0};
        CHECK(ts_safetensors_load(path_in("gpt_amp", "model.safetensors"), ts_cpu(), &sd) == 0);
        CHECK(sd.n > 0 && ts_dtype_of(sd.tensors[0]) == TS_F32);
        ts_tensor_list_free(&sd);
    }
#undef GPT
    r = RUN_MPI(2, "train", "--model", "resnet20", "--width", "4", DATA, "--batch-size", "8",
                "--max-steps", "2", "--progress", "none", "--fsdp", "--fsdp-stage", "2", "--amp");
    CHECK_EQ(exit_code(&r), 0);
    CHECK(r.out && strstr(r.out, "stage 2, 4 units"));
    if (exit_code(&r) != 0) fprintf(stderr, "mpiexec: %s\n%s\n", r.out, r.err);
    result_free(&r);
}
#endif

int main(void) {
    if (!trainer_setup(TS_TESSERA_BIN)) return ts_test_skip("cannot create a temporary folder");
    test_usage();
#ifdef TS_MPIEXEC
    test_fsdp_equals_ddp();
    test_zoo();
#else
    printf("built without MPI: the trainer under mpiexec is not tested\n");
#endif
    trainer_cleanup();
    return ts_test_finish();
}
