/* fuzz_args.c — libFuzzer target: the `tessera` command line (tools/tessera/args.c). The input is
 * an argument list, NUL-separated. The parser must end in one of three ways: go on (-1) with
 * options that keep every documented invariant, --help (0), or a user's mistake (2) reported as
 * exactly one non-empty line naming what was wrong; then the device list is resolved the same
 * way. The ctest fuzz_args_corpus replays tests/fuzz/corpus/args (tests/fuzz/replay.c); --help
 * prints the usage on stdout (tools/fuzz.sh closes it: -close_fd_mask=1). */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The command's error reporting, captured instead of printed. */
static int failures;
static char last[2048];
int tcli_fail(int status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last, sizeof last, fmt, ap);
    va_end(ap);
    failures++;
    return status;
}
int tcli_fail_ts(int status, const char *what) {
    ts_error_clear();
    return tcli_fail(status, "%s: library error", what ? what : "tessera");
}

static bool one_of(const char *v, const char *const *set, int n) {
    for (int i = 0; i < n; i++)
        if (v && !strcmp(v, set[i])) return true;
    return false;
}

/* A reported mistake: one call, one non-empty line. */
static void check_reported(void) {
    if (failures != 1 || !last[0] || strchr(last, '\n')) abort();
}

static void check_options(const tcli_opts *o) {
    static const char *const cmds[] = {"train", "eval",   "generate", "devices", "run",
                                       "info",  "export", "convert",  "quantize"},
                             *models[] = {"mlp", "lenet", "simplecnn", "gpt"},
                             *datas[] = {"fashion-mnist", "mnist", "cifar10", "csv", "text"},
                             *optims[] = {"sgd", "adam", "adamw"},
                             *scheds[] = {"cosine", "constant"};
    if (!one_of(o->command, cmds, 9) || !one_of(o->model, models, 4) ||
        !one_of(o->data, datas, 5) || !one_of(o->optimizer, optims, 3) ||
        !one_of(o->schedule, scheds, 2))
        abort();
    if (!strcmp(o->model, "gpt") != !strcmp(o->data, "text")) abort();
    if (o->epochs < 1 || o->batch_size < 1 || o->workers < -1 || o->workers > 1024 ||
        o->threads < 0 || o->max_steps < 0 || o->grad_accum < 1 || o->warmup < 0)
        abort();
    if (!(o->lr == -1 || o->lr > 0) || !(o->momentum >= 0 && o->momentum < 1) ||
        !(o->weight_decay >= 0) || !(o->test_fraction > 0 && o->test_fraction < 1) ||
        !(o->label_smoothing >= 0 && o->label_smoothing < 1) || !(o->clip_grad >= 0) ||
        !(o->time_limit >= 0) || !(o->dropout >= 0 && o->dropout < 1) || !(o->temperature > 0))
        abort();
    if (o->heads < 1 || o->dim < 1 || o->dim % o->heads || o->context < 1 || o->layers < 1) abort();
    if ((o->resume || o->checkpoint_every) && !o->checkpoint) abort();
    if (!strcmp(o->command, "generate") && !o->checkpoint) abort();
    /* eval: a checkpoint or an ONNX file, not both; quantize: the file to write, and an ONNX
     * file or a checkpoint to export, not both */
    if (!strcmp(o->command, "eval") && !o->checkpoint == !o->onnx) abort();
    if (!strcmp(o->command, "quantize") && (!o->output || !o->checkpoint == !o->onnx)) abort();
    if (!strcmp(o->command, "quantize") && strcmp(o->quant_mode, "static") && o->calib_batches)
        abort();
    /* run, info and convert take the model file as their positional argument; convert and export
     * the file they write */
    if ((!strcmp(o->command, "run") || !strcmp(o->command, "info") ||
         !strcmp(o->command, "convert")) &&
        !o->onnx)
        abort();
    if ((!strcmp(o->command, "convert") || !strcmp(o->command, "export")) && !o->output) abort();
    if (o->profile_steps && !o->profile_dir) abort();
    /* the optimizer offloaded and the model placed by budget: one device, no FSDP, no capture */
    if (o->offload_optimizer && (o->fsdp || o->graph)) abort();
    if (o->max_memory && (o->devices || o->fsdp || o->graph)) abort();
    if (o->no_optimize && strcmp(o->command, "run")) abort(); /* an option of run alone */
    if (o->device && o->devices) abort();
    if (o->amp_dtype && !o->amp) abort();
    if (o->greedy && o->top_k) abort();
    if (!(tcli_default_lr(o) > 0)) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    enum { MAX_ARGS = 64 };
    char *buf = malloc(size + 1);
    if (!buf) return 0;
    memcpy(buf, data, size);
    buf[size] = '\0';
    /* "train\0--lr\00.1" is {"train", "--lr", "0.1"}; a final NUL adds an empty argument */
    char *argv[MAX_ARGS + 2] = {"tessera"};
    int argc = 1;
    for (size_t i = 0; size > 0 && i <= size && argc <= MAX_ARGS; i += strlen(buf + i) + 1)
        argv[argc++] = buf + i;
    argv[argc] = NULL;
    tcli_opts o;
    failures = 0;
    last[0] = '\0';
    int rc = tcli_parse(argc, argv, &o);
    if (rc == TCLI_USAGE) {
        check_reported();
    } else if (rc == TCLI_OK) {
        if (failures) abort(); /* --help */
    } else if (rc == -1) {
        if (failures) abort();
        check_options(&o);
        ts_device devs[TCLI_MAX_DEVICES];
        int n = -1;
        rc = tcli_resolve_devices(&o, devs, &n);
        if (rc == TCLI_USAGE) {
            check_reported();
        } else if (rc != -1 || failures || n < 1 || n > TCLI_MAX_DEVICES) {
            abort();
        } else {
            for (int i = 0; i < n; i++)
                for (int j = 0; j < i; j++)
                    if (ts_device_equal(devs[i], devs[j])) abort();
        }
    } else {
        abort();
    }
    if (ts_error()) abort(); /* nothing left pending */
    free(buf);
    return 0;
}
