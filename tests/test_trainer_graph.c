/* test_trainer_graph.c — `tessera train --graph` end to end (docs/CAPTURE.md): each run is made
 * twice, eagerly and with --graph, over the synthetic IDX data of support/trainer_run.c with 9
 * batches an epoch (the last one partial, trained eagerly) for two epochs, and the two must agree
 * bit for bit: the printed lines (but the timings), every batch's loss and the epochs' metrics in
 * metrics.jsonl (--log-every 1: full precision), and the checkpoint files (weights and optimizer
 * state) byte for byte. Captured: the MLP, LeNet-5 and SimpleCNN with SGD momentum on cpu and
 * sim:0, after a --warmup, under bfloat16 autocast, and ResNet-20 (BatchNorm) on sim:0; and the
 * steps whose state changes on the device from replay to replay: Adam (step counts), float16 with
 * the grad scaler (the skip decided on the device), the cosine schedule (the rate set between
 * replays), gradient clipping (the norm kept on the device). And the flags --graph refuses. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trainer_run.h"
#include "ts_test.h"

enum { BATCH = 60, EPOCHS = 2 };
/* 512 samples in batches of 60: 8 whole ones and one of 32, each epoch */
#define BATCHES_PER_EPOCH ((NTRAIN + BATCH - 1) / BATCH)

/* out without what may differ between two equal runs: the epochs' timings ("  time 0.1s" ends
 * their line) and --graph's own lines */
static char *strip_output(const char *out) {
    char *s = malloc(strlen(out ? out : "") + 1), *w = s;
    for (const char *p = out ? out : ""; *p;) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) + 1 : strlen(p);
        if (strncmp(p, "--graph: ", 9) != 0) {
            const char *t = strstr(p, "  time ");
            size_t keep = t && t < p + len ? (size_t)(t - p) : len;
            memcpy(w, p, keep);
            w += keep;
            if (keep < len) *w++ = '\n';
        }
        p += len;
    }
    *w = 0;
    return s;
}

/* metrics.jsonl without the wall-clock fields (", "wall_time": ..." and ", "seconds": ..." end
 * their records); the number of train/batch_loss records in *batch_losses */
static char *strip_metrics(const char *path, int *batch_losses) {
    char *in = slurp(path, NULL);
    *batch_losses = 0;
    if (!in) return NULL;
    char *s = malloc(strlen(in) + 1), *w = s;
    for (const char *p = in; *p;) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) + 1 : strlen(p);
        const char *cut = NULL;
        for (const char *k = p; k < p + len && !cut; k++)
            if (!strncmp(k, ", \"wall_time\"", 13) || !strncmp(k, ", \"seconds\"", 11)) cut = k;
        size_t keep = cut ? (size_t)(cut - p) : len;
        memcpy(w, p, keep);
        w += keep;
        *w++ = '\n';
        if (strstr(p, "\"train/batch_loss\"") && strstr(p, "\"train/batch_loss\"") < p + len)
            ++*batch_losses;
        p += len;
    }
    *w = 0;
    free(in);
    return s;
}

/* The line of out that starts with prefix, or NULL */
static const char *line_with(const char *out, const char *prefix) {
    for (const char *p = out; p && *p;) {
        if (!strncmp(p, prefix, strlen(prefix))) return p;
        p = strchr(p, '\n');
        if (p) p++;
    }
    return NULL;
}

/* Runs `tessera train` with args (NULL-terminated) eagerly and with --graph into
 * <dir>/{eager,graph}/{log,ck} and requires the two to agree bit for bit. --graph must print one
 * line of its own, starting with one of the prefixes in `lines` (NULL-terminated). Returns the
 * number of kernels of the captured step (0 when it trained eagerly). records: the batch losses
 * logged, 0 for every batch of the two epochs. */
static long compare_runs(const char *name, const char *const *args, const char *const *lines,
                         int records) {
    char log[2][400], ck[2][400], files[2][2][440], path[2][440];
    result r[2];
    for (int g = 0; g < 2; g++) {
        const char *mode = g ? "graph" : "eager";
        snprintf(log[g], sizeof log[g], "%s/%s/%s/log", trainer_dir, name, mode);
        snprintf(ck[g], sizeof ck[g], "%s/%s/%s/ck", trainer_dir, name, mode);
        snprintf(files[g][0], sizeof files[g][0], "%s/latest.safetensors", ck[g]);
        snprintf(files[g][1], sizeof files[g][1], "%s/model.safetensors", ck[g]);
        snprintf(path[g], sizeof path[g], "%s/%s/%s/log/metrics.jsonl", trainer_dir, name, mode);
        const char *argv[48] = {
            "train",        "--data",      "mnist",    "--data-dir", path_in("data", NULL),
            "--progress",   "none",        "--epochs", "2",          "--batch-size",
            "60",           "--log-every", "1",        "--log",      log[g],
            "--checkpoint", ck[g]};
        int n = 17;
        for (int i = 0; args[i] && n < 46; i++) argv[n++] = args[i];
        if (g) argv[n++] = "--graph";
        argv[n] = NULL;
        r[g] = run_env(NULL, argv);
        check_clean_exit(&r[g]);
    }
    /* --graph's one line, and what it says */
    const char *said = NULL;
    for (int i = 0; lines[i] && !said; i++) said = line_with(r[1].out, lines[i]);
    CHECK(said != NULL);
    CHECK(r[1].out && strstr(r[1].out, "--graph: ") == line_with(r[1].out, "--graph: "));
    const char *first = line_with(r[1].out, "--graph: ");
    CHECK(first && !line_with(strchr(first, '\n'), "--graph: ")); /* once */
    CHECK(r[0].out && !strstr(r[0].out, "--graph"));
    long kernels = 0;
    const char *k = said ? strstr(said, " kernels)") : NULL;
    if (said && !strncmp(said, "--graph: the training step is captured", 38) && k) {
        const char *open = k;
        while (open > said && open[-1] != '(') open--;
        kernels = strtol(open, NULL, 10);
        CHECK(kernels > 10);
    }
    /* the same lines, losses, metrics and files */
    char *o0 = strip_output(r[0].out), *o1 = strip_output(r[1].out);
    bool same_out = !strcmp(o0, o1);
    CHECK(same_out);
    epoch_line e[EPOCHS + 1];
    CHECK_EQ(parse_epochs(r[1].out, e, EPOCHS + 1), EPOCHS);
    CHECK(e[1].train_loss < e[0].train_loss); /* it learned: the comparison means something */
    int nb[2];
    char *m[2];
    for (int g = 0; g < 2; g++) m[g] = strip_metrics(path[g], &nb[g]);
    bool same_metrics = m[0] && m[1] && !strcmp(m[0], m[1]);
    CHECK(same_metrics);
    CHECK_EQ(nb[1], records ? records : EPOCHS * BATCHES_PER_EPOCH);
    bool same_ck = same_file(files[0][0], files[1][0]) && same_file(files[0][1], files[1][1]);
    CHECK(same_ck);
    if (!said) said = "(no --graph line)\n";
    printf("  %-16s %s  %.*s\n", name, same_out && same_metrics && same_ck ? "equal" : "DIFFERENT",
           (int)strcspn(said, "\n"), said);
    if (!same_out) fprintf(stderr, "  eager:\n%s  graph:\n%s", o0, o1);
    free(o0), free(o1), free(m[0]), free(m[1]);
    result_free(&r[0]);
    result_free(&r[1]);
    return kernels;
}

#define ARGS(...)  ((const char *const[]){__VA_ARGS__, NULL})
#define LINES(...) ((const char *const[]){__VA_ARGS__, NULL})

static void test_captured(void) {
    static const char *const models[] = {"mlp", "lenet", "simplecnn"};
    static const char *const devs[] = {"cpu", "sim:0"};
    for (int mi = 0; mi < 3; mi++)
        for (int d = 0; d < 2; d++) {
            char name[64], line[128];
            snprintf(name, sizeof name, "%s-%s", models[mi], devs[d]);
            snprintf(line, sizeof line, "--graph: the training step is captured on %s (", devs[d]);
            compare_runs(name,
                         ARGS("--model", models[mi], "--device", devs[d], "--schedule", "constant"),
                         LINES(line), 0);
        }
    /* the learning rate's warm-up changes the rate between replays: captured after the 3 eager
     * warm-up steps all the same, at step 4 */
    compare_runs(
        "mlp-warmup",
        ARGS("--model", "mlp", "--device", "cpu", "--schedule", "constant", "--warmup", "5"),
        LINES("--graph: the training step is captured on cpu ("), 0);
    result r = RUN("train", "--model", "mlp", DATA, "--progress", "none", "--epochs", "1",
                   "--batch-size", "60", "--schedule", "constant", "--warmup", "5", "--graph");
    check_clean_exit(&r);
    CHECK(r.out && strstr(r.out, "replayed for each batch of 60 from step 4\n"));
    result_free(&r);
    /* bfloat16 autocast: the casts are kernels like any other */
    compare_runs("mlp-bf16-sim:0",
                 ARGS("--model", "mlp", "--device", "sim:0", "--schedule", "constant", "--amp"),
                 LINES("--graph: the training step is captured on sim:0 ("), 0);
    /* BatchNorm: its running statistics and batch count are updated by the replays */
    compare_runs("resnet20-sim:0",
                 ARGS("--model", "resnet20", "--width", "4", "--device", "sim:0", "--schedule",
                      "constant", "--max-steps", "14"),
                 LINES("--graph: the training step is captured on sim:0 ("),
                 13); /* the step --max-steps stops at is not logged */
}

/* State that changes on the device from replay to replay (src/optim/optim_capture.c, the grad
 * scaler's captured step): the runs agree bit for bit all the same. */
static void test_device_state(void) {
    compare_runs(
        "mlp-adam",
        ARGS("--model", "mlp", "--device", "cpu", "--schedule", "constant", "--optimizer", "adam"),
        LINES("--graph: the training step is captured on cpu ("), 0);
    compare_runs("mlp-f16-scaler",
                 ARGS("--model", "mlp", "--device", "cpu", "--schedule", "constant", "--amp",
                      "--amp-dtype", "f16"),
                 LINES("--graph: the training step is captured on cpu ("), 0);
    compare_runs("mlp-cosine", ARGS("--model", "mlp", "--device", "sim:0"),
                 LINES("--graph: the training step is captured on sim:0 ("), 0);
    /* gradient clipping: the norm and the coefficient stay on the device (at 0.5 most steps
     * clip), also after the scaler's unscale_ */
    compare_runs(
        "mlp-clip",
        ARGS("--model", "mlp", "--device", "sim:0", "--schedule", "constant", "--clip-grad", "0.5"),
        LINES("--graph: the training step is captured on sim:0 ("), 0);
    compare_runs("lenet-f16-clip",
                 ARGS("--model", "lenet", "--device", "cpu", "--schedule", "constant", "--amp",
                      "--amp-dtype", "f16", "--clip-grad", "0.5"),
                 LINES("--graph: the training step is captured on cpu ("), 0);
}

static void test_usage(void) {
    result r = RUN("--help");
    check_clean_exit(&r);
    CHECK(r.out && strstr(r.out, "  --graph  "));
    result_free(&r);
    check_usage_error(RUN("train", "--graph", "--grad-accum", "2"),
                      "tessera: --graph: not with --grad-accum (a captured step is one whole batch "
                      "with its optimizer step)\n");
    check_usage_error(RUN("train", "--graph", "--devices", "sim:0,sim:1", DATA),
                      "tessera: --graph: not with data parallel --devices (the replicas run on "
                      "threads of their own; a capture records one device)\n");
    check_usage_error(RUN("eval", "--graph", "--checkpoint", trainer_dir),
                      "tessera: --graph: not an option of 'tessera eval' (see tessera --help)\n");
}

/* cuda:0: the step is one CUDA graph (cuda_graph.cu), its optimizer scalars and the float16
 * scaler's skip on the device */
static void test_cuda(void) {
    if (!ts_device_is_available(ts_cuda(0))) {
        ts_test_no_cuda("tessera train --graph on cuda:0");
        return;
    }
    const char *const line[] = {"--graph: the training step is captured on cuda:0 (", NULL};
    compare_runs("mlp-cuda:0",
                 ARGS("--model", "mlp", "--device", "cuda:0", "--schedule", "constant"), line, 0);
    compare_runs("mlp-adam-cuda:0",
                 ARGS("--model", "mlp", "--device", "cuda:0", "--optimizer", "adam"), line, 0);
    compare_runs("mlp-f16-cuda:0",
                 ARGS("--model", "mlp", "--device", "cuda:0", "--schedule", "constant", "--amp",
                      "--amp-dtype", "f16"),
                 line, 0);
}

int main(void) {
    if (!trainer_setup(TS_TESSERA_BIN)) return ts_test_skip("cannot create a temporary folder");
    test_usage();
    test_captured();
    test_device_state();
    test_cuda();
    trainer_cleanup();
    return ts_test_finish();
}
