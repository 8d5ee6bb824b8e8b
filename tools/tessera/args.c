/* args.c — the `tessera` command line: flags, their values and checks (--help's text: usage.c). */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* A usage mistake, reported on one line (TCLI_USAGE): control characters from the user's text (a
 * newline inside an argument) are shown as '?'. */
static int __attribute__((format(printf, 1, 2))) usage_fail(const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    for (char *c = msg; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f) *c = '?';
    return tcli_fail(TCLI_USAGE, "%s", msg);
}

/* the commands, for the messages that list them */
#define COMMANDS "train, eval, generate, run, info, export, quantize, convert or devices"

enum kind {
    K_POS_INT,
    K_NONNEG_INT,
    K_POS_REAL,
    K_NONNEG_REAL,
    K_UNIT_REAL,
    K_FRACTION,
    K_SEED,
    K_STRING,
    K_CHOICE,
    K_FLAG,
    K_PROGRESS,
    K_INPUT
};
enum {
    FOR_TRAIN = 1,
    FOR_EVAL = 2,
    FOR_GEN = 4,
    FOR_RUN = 8,
    FOR_INFO = 16,
    FOR_EXPORT = 32,
    FOR_CONVERT = 64,
    FOR_QUANT = 128
};
/* the options that build a model */
#define FOR_MODEL (FOR_TRAIN | FOR_EVAL | FOR_EXPORT | FOR_QUANT)

typedef struct opt_spec {
    const char *name;
    enum kind kind;
    int commands;
    size_t offset;
    const char *choices; /* K_CHOICE: "a|b|c" */
} opt_spec;

#define OFF(f) offsetof(tcli_opts, f)
static const opt_spec specs[] = {
    {"--model", K_CHOICE, FOR_MODEL, OFF(model), "mlp|lenet|simplecnn|resnet20|resnet18|gpt"},
    {"--data", K_CHOICE, FOR_MODEL, OFF(data), "fashion-mnist|mnist|cifar10|csv|text"},
    {"--data-dir", K_STRING, FOR_MODEL, OFF(data_dir), NULL},
    {"--csv-target", K_STRING, FOR_MODEL, OFF(csv_target), NULL},
    {"--test-fraction", K_FRACTION, FOR_MODEL, OFF(test_fraction), NULL},
    {"--device", K_STRING, FOR_TRAIN | FOR_EVAL | FOR_GEN | FOR_RUN | FOR_EXPORT | FOR_QUANT,
     OFF(device), NULL},
    {"--batch-size", K_POS_INT, FOR_TRAIN | FOR_EVAL | FOR_QUANT, OFF(batch_size), NULL},
    {"--workers", K_NONNEG_INT, FOR_TRAIN | FOR_EVAL, OFF(workers), NULL},
    {"--threads", K_POS_INT, FOR_TRAIN | FOR_EVAL | FOR_GEN | FOR_RUN | FOR_EXPORT | FOR_QUANT,
     OFF(threads), NULL},
    {"--checkpoint", K_STRING, FOR_TRAIN | FOR_EVAL | FOR_GEN | FOR_EXPORT | FOR_QUANT,
     OFF(checkpoint), NULL},
    {"--seed", K_SEED, FOR_TRAIN | FOR_EVAL | FOR_GEN | FOR_RUN | FOR_EXPORT | FOR_QUANT, OFF(seed),
     NULL},
    {"--context", K_POS_INT, FOR_MODEL, OFF(context), NULL},
    {"--layers", K_POS_INT, FOR_MODEL, OFF(layers), NULL},
    {"--heads", K_POS_INT, FOR_TRAIN | FOR_EVAL | FOR_GEN | FOR_EXPORT, OFF(heads), NULL},
    {"--dim", K_POS_INT, FOR_MODEL, OFF(dim), NULL},
    {"--dropout", K_UNIT_REAL, FOR_TRAIN, OFF(dropout), NULL},
    {"--width", K_POS_INT, FOR_MODEL, OFF(width), NULL},
    {"--augment", K_CHOICE, FOR_TRAIN, OFF(augment), "on|off"},
    {"--warmup", K_POS_INT, FOR_TRAIN, OFF(warmup), NULL},
    {"--grad-accum", K_POS_INT, FOR_TRAIN, OFF(grad_accum), NULL},
    {"--label-smoothing", K_UNIT_REAL, FOR_TRAIN, OFF(label_smoothing), NULL},
    {"--clip-grad", K_POS_REAL, FOR_TRAIN, OFF(clip_grad), NULL},
    {"--qat", K_FLAG, FOR_TRAIN, OFF(qat), NULL},
    {"--qat-from", K_STRING, FOR_TRAIN, OFF(qat_from), NULL},
    {"--time-limit", K_POS_REAL, FOR_TRAIN, OFF(time_limit), NULL},
    {"--prompt", K_STRING, FOR_GEN, OFF(prompt), NULL},
    {"--tokens", K_POS_INT, FOR_GEN, OFF(tokens), NULL},
    {"--temperature", K_POS_REAL, FOR_GEN, OFF(temperature), NULL},
    {"--top-k", K_POS_INT, FOR_GEN, OFF(top_k), NULL},
    {"--greedy", K_FLAG, FOR_GEN, OFF(greedy), NULL},
    {"--quantize", K_CHOICE, FOR_GEN, OFF(wo_quantize), "int8|int4"},
    {"--group-size", K_POS_INT, FOR_GEN, OFF(group_size), NULL},
    {"--act-quant", K_CHOICE, FOR_GEN, OFF(act_quant), "int8"},
    {"--hf", K_STRING, FOR_GEN, OFF(hf), NULL},
    {"--prompt-ids", K_STRING, FOR_GEN, OFF(prompt_ids), NULL},
    {"--epochs", K_POS_INT, FOR_TRAIN, OFF(epochs), NULL},
    {"--max-steps", K_POS_INT, FOR_TRAIN, OFF(max_steps), NULL},
    {"--checkpoint-every", K_POS_INT, FOR_TRAIN, OFF(checkpoint_every), NULL},
    {"--checkpoint-activations", K_POS_INT, FOR_TRAIN, OFF(checkpoint_activations), NULL},
    {"--checkpoint-sublayers", K_FLAG, FOR_TRAIN, OFF(checkpoint_sublayers), NULL},
    {"--optimizer", K_CHOICE, FOR_TRAIN, OFF(optimizer), "sgd|adam|adamw"},
    {"--lr", K_POS_REAL, FOR_TRAIN, OFF(lr), NULL},
    {"--momentum", K_UNIT_REAL, FOR_TRAIN, OFF(momentum), NULL},
    {"--weight-decay", K_NONNEG_REAL, FOR_TRAIN, OFF(weight_decay), NULL},
    {"--resume", K_FLAG, FOR_TRAIN, OFF(resume), NULL},
    {"--log", K_STRING, FOR_TRAIN, OFF(log), NULL},
    {"--log-every", K_POS_INT, FOR_TRAIN, OFF(log_every), NULL},
    {"--progress", K_PROGRESS, FOR_TRAIN, OFF(progress), NULL},
    {"--schedule", K_CHOICE, FOR_TRAIN, OFF(schedule), "cosine|constant"},
    {"--devices", K_STRING, FOR_TRAIN, OFF(devices), NULL},
    {"--amp", K_FLAG, FOR_TRAIN, OFF(amp), NULL},
    {"--amp-dtype", K_CHOICE, FOR_TRAIN, OFF(amp_dtype), "bf16|f16"},
    {"--graph", K_FLAG, FOR_TRAIN, OFF(graph), NULL},
    {"--fsdp", K_FLAG, FOR_TRAIN, OFF(fsdp), NULL},
    {"--fsdp-stage", K_POS_INT, FOR_TRAIN, OFF(fsdp_stage), NULL},
    {"--offload-optimizer", K_FLAG, FOR_TRAIN, OFF(offload_optimizer), NULL},
    {"--max-memory", K_STRING, FOR_TRAIN | FOR_RUN, OFF(max_memory), NULL},
    {"--override-tensor", K_STRING, FOR_TRAIN, OFF(override_tensor), NULL},
    {"--stream-weights", K_NONNEG_INT, FOR_TRAIN, OFF(stream_weights), NULL},
    {"--input", K_INPUT, FOR_RUN, OFF(inputs), NULL},
    {"--save", K_STRING, FOR_RUN, OFF(save), NULL},
    {"--bench", K_POS_INT, FOR_RUN, OFF(bench), NULL},
    {"--grad-output", K_STRING, FOR_RUN, OFF(grad_output), NULL},
    {"--no-optimize", K_FLAG, FOR_RUN, OFF(no_optimize), NULL},
    {"--batch", K_POS_INT, FOR_RUN | FOR_EXPORT, OFF(batch), NULL},
    {"--output", K_STRING, FOR_EXPORT | FOR_QUANT, OFF(output), NULL},
    {"--out", K_STRING, FOR_QUANT, OFF(output), NULL},
    {"--onnx", K_STRING, FOR_EVAL | FOR_QUANT, OFF(onnx), NULL},
    {"--mode", K_CHOICE, FOR_QUANT, OFF(quant_mode), "static|dynamic|int4"},
    {"--calib-batches", K_POS_INT, FOR_QUANT, OFF(calib_batches), NULL},
    {"--dynamic-batch", K_FLAG, FOR_EXPORT, OFF(dynamic_batch), NULL},
    {"--save-io", K_STRING, FOR_EXPORT, OFF(save_io), NULL},
    {"--profile", K_STRING, FOR_TRAIN, OFF(profile_dir), NULL},
    {"--profile-steps", K_STRING, FOR_TRAIN, OFF(profile_steps), NULL},
};

static int parse_int(const char *name, const char *v, long long min, long long max,
                     const char *what, long long *out) {
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (!*v || *end || errno || x < min || x > max)
        return usage_fail("%s: expected %s, got '%s'", name, what, v);
    *out = x;
    return -1;
}

static int parse_real(const char *name, const char *v, double min, double max, bool max_open,
                      const char *what, double *out) {
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (!*v || *end || errno || !isfinite(x) || x < min || x > max || (max_open && x == max) ||
        (min > 0 && x <= 0))
        return usage_fail("%s: expected %s, got '%s'", name, what, v);
    *out = x;
    return -1;
}

/* "a|b|c" contains v as a whole entry */
static bool in_choices(const char *choices, const char *v) {
    size_t n = strlen(v);
    for (const char *p = choices; p && *p;) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len == n && !strncmp(p, v, n)) return true;
        p = bar ? bar + 1 : NULL;
    }
    return false;
}

static int set_value(const opt_spec *s, const char *v, tcli_opts *o) {
    char *field = (char *)o + s->offset;
    long long i = 0;
    double r = 0;
    int rc = -1;
    switch (s->kind) {
    case K_POS_INT:
        rc = parse_int(s->name, v, 1, INT_MAX, "a positive integer", &i);
        if (rc < 0) *(int *)field = (int)i;
        break;
    case K_NONNEG_INT:
        rc = parse_int(s->name, v, 0, 1024, "an integer from 0 to 1024", &i);
        if (rc < 0) *(int *)field = (int)i;
        break;
    case K_SEED:
        rc = parse_int(s->name, v, 0, LLONG_MAX, "a non-negative integer", &i);
        if (rc < 0) *(uint64_t *)field = (uint64_t)i;
        break;
    case K_POS_REAL:
        rc = parse_real(s->name, v, 1e-300, 1e6, false, "a positive number", &r);
        if (rc < 0) *(double *)field = r;
        break;
    case K_NONNEG_REAL:
        rc = parse_real(s->name, v, 0, 1e6, false, "a number >= 0", &r);
        if (rc < 0) *(double *)field = r;
        break;
    case K_UNIT_REAL:
        rc = parse_real(s->name, v, 0, 1, true, "a number in [0, 1)", &r);
        if (rc < 0) *(double *)field = r;
        break;
    case K_FRACTION:
        rc = parse_real(s->name, v, 1e-300, 1, true, "a number in (0, 1)", &r);
        if (rc < 0) *(double *)field = r;
        break;
    case K_STRING:
        if (!*v) return usage_fail("%s: expected a value, got ''", s->name);
        *(const char **)field = v;
        break;
    case K_CHOICE:
        if (!in_choices(s->choices, v)) {
            char list[128];
            snprintf(list, sizeof list, "%s", s->choices);
            /* "a|b|c" reads better as "a, b or c" */
            char *last = strrchr(list, '|');
            char out[160] = "";
            for (char *p = list; p;) {
                char *bar = strchr(p, '|');
                if (bar) *bar = 0;
                strcat(out, p);
                if (bar) strcat(out, bar == last ? " or " : ", ");
                p = bar ? bar + 1 : NULL;
            }
            return usage_fail("%s: expected %s, got '%s'", s->name, out, v);
        }
        *(const char **)field = v;
        break;
    case K_PROGRESS:
        if (!strcmp(v, "auto"))
            o->progress = TCLI_PROGRESS_AUTO;
        else if (!strcmp(v, "bar"))
            o->progress = TCLI_PROGRESS_BAR;
        else if (!strcmp(v, "lines"))
            o->progress = TCLI_PROGRESS_LINES;
        else if (!strcmp(v, "none"))
            o->progress = TCLI_PROGRESS_NONE;
        else
            return usage_fail("%s: expected auto, bar, lines or none, got '%s'", s->name, v);
        break;
    case K_FLAG:
        *(bool *)field = true;
        break;
    case K_INPUT: {
        const char *eq = strchr(v, '=');
        if (!eq || eq == v || !eq[1])
            return usage_fail("%s: expected NAME=FILE.npy, got '%s'", s->name, v);
        if (o->n_inputs == TCLI_MAX_INPUTS)
            return usage_fail("%s: at most %d inputs", s->name, TCLI_MAX_INPUTS);
        o->inputs[o->n_inputs++] = v;
        break;
    }
    }
    return rc;
}

static bool is_help(const char *a) {
    return !strcmp(a, "-h") || !strcmp(a, "--help") || !strcmp(a, "help");
}

/* generate's sources (a tessera checkpoint or a Hugging Face GPT-2) and its quantization: -1, or
 * the exit status */
static int finish_generate(const tcli_opts *o, int mask) {
    if (mask == FOR_GEN && !o->checkpoint && !o->hf)
        return usage_fail("generate: needs --checkpoint DIR (a gpt trained by tessera) or --hf DIR "
                          "(a Hugging Face GPT-2)");
    if (o->hf && o->checkpoint)
        return usage_fail("--hf: give either --hf or --checkpoint, not both");
    if (o->hf && (!o->greedy || !o->prompt_ids))
        return usage_fail("--hf: needs --greedy and --prompt-ids ID,ID,... (no tokenizer is read)");
    if (o->prompt_ids && !o->hf) return usage_fail("--prompt-ids: only with --hf");
    if (o->hf && o->prompt) return usage_fail("--prompt: not with --hf (give --prompt-ids)");
    if (o->greedy && o->top_k)
        return usage_fail("--greedy: give either --greedy or --top-k, not both");
    if (o->act_quant && (!o->wo_quantize || !o->hf))
        return usage_fail("--act-quant: only with --hf and --quantize int8|int4");
    if (o->group_size && (!o->wo_quantize || strcmp(o->wo_quantize, "int4")))
        return usage_fail("--group-size: only with --quantize int4");
    if (o->group_size && o->group_size != 32 && o->group_size != 64 && o->group_size != 128 &&
        o->group_size != 256)
        return usage_fail("--group-size %d: must be 32, 64, 128 or 256", o->group_size);
    return -1;
}

/* The defaults that follow from other options, and the combinations refused, once every option
 * is read. -1, or the exit status. */
static int finish_options(tcli_opts *o, int mask, const char *cmd, bool data_given) {
    if (mask == FOR_EXPORT && !data_given && o->model && !strcmp(o->model, "gpt")) o->data = "text";
    const bool text = !strcmp(o->data, "text");
    if (!o->model) o->model = text ? "gpt" : "lenet";
    const bool gpt = !strcmp(o->model, "gpt");
    if (gpt != text)
        return usage_fail(gpt ? "--model gpt: trains on --data text"
                              : "--data text: needs --model gpt (a language model)");
    const bool resnet = tcli_is_resnet(o->model),
               sgd = !o->optimizer || !strcmp(o->optimizer, "sgd");
    if (!o->optimizer) o->optimizer = gpt ? "adamw" : "sgd";
    if (o->weight_decay < 0)
        o->weight_decay = !strcmp(o->optimizer, "adamw") ? 0.1 : resnet && sgd ? 5e-4 : 0;
    if (!o->batch_size) o->batch_size = resnet ? 128 : 64;
    if (o->width && !resnet) return usage_fail("--width: only for --model resnet20 or resnet18");
    if (o->augment && (text || !strcmp(o->data, "csv")))
        return usage_fail("--augment: only for images (--data fashion-mnist, mnist or cifar10)");
    if (o->warmup < 0) o->warmup = gpt ? 100 : 0;
    if (o->dim % o->heads)
        return usage_fail("--dim %d: must be a multiple of --heads (%d)", o->dim, o->heads);
    const int gen = finish_generate(o, mask);
    if (gen >= 0) return gen;
    if (o->time_limit && !o->max_steps && o->epochs == 0) o->epochs = INT_MAX;
    if (o->epochs == 0) o->epochs = o->max_steps ? INT_MAX : 2;
    if (o->checkpoint_every && !o->checkpoint)
        return usage_fail("--checkpoint-every: needs --checkpoint DIR");
    if (o->checkpoint_activations && strcmp(o->model, "gpt") && strncmp(o->model, "resnet", 6))
        return usage_fail("--checkpoint-activations: for --model gpt and the resnets, not %s",
                          o->model);
    if (o->checkpoint_sublayers && (!o->checkpoint_activations || strcmp(o->model, "gpt")))
        return usage_fail(
            "--checkpoint-sublayers: for --model gpt with --checkpoint-activations N");
    if (o->resume && !o->checkpoint)
        return usage_fail("--resume: needs --checkpoint DIR (the folder to resume from)");
    if (mask == FOR_EVAL && !o->checkpoint && !o->onnx)
        return usage_fail("eval: needs --checkpoint DIR (or a .safetensors file)");
    if (o->devices && o->device)
        return usage_fail("--devices: give either --device or --devices, not both");
    if (o->amp_dtype && !o->amp) return usage_fail("--amp-dtype: only with --amp");
    if (o->qat_from && !o->qat) return usage_fail("--qat-from: only with --qat");
    if (o->qat && gpt)
        return usage_fail("--qat: for mlp, lenet, simplecnn and the resnets, not gpt");
    if (o->qat && (o->amp || o->devices || o->fsdp || o->fsdp_stage || o->graph ||
                   o->stream_weights >= 0 || o->max_memory))
        return usage_fail("--qat: not with %s (fake quantization runs in float32 on one device, "
                          "eagerly)",
                          o->amp                     ? "--amp"
                          : o->devices               ? "--devices"
                          : o->fsdp || o->fsdp_stage ? "--fsdp"
                          : o->graph                 ? "--graph"
                          : o->stream_weights >= 0   ? "--stream-weights"
                                                     : "--max-memory");
    if (o->qat_from && o->resume)
        return usage_fail("--qat-from: not with --resume (a resumed run continues from its own "
                          "checkpoint)");
    /* a captured step is one batch with its optimizer step, the same for every batch */
    if (o->graph && o->grad_accum > 1)
        return usage_fail("--graph: not with --grad-accum (a captured step is one whole batch with "
                          "its optimizer step)");
    if (o->fsdp_stage) o->fsdp = true;
    if (o->fsdp_stage > 3)
        return usage_fail("--fsdp-stage: expected 1 (optimizer state sharded), 2 (+ gradients) or "
                          "3 (+ parameters), got %d",
                          o->fsdp_stage);
    if (o->fsdp && o->devices)
        return usage_fail("--fsdp: not with --devices (FSDP shards across processes: start one "
                          "per device with mpirun)");
    if (o->fsdp && o->graph)
        return usage_fail("--fsdp: not with --graph (the gathers and reductions of the shards are "
                          "not captured)");
    if (o->offload_optimizer && o->graph)
        return usage_fail("--offload-optimizer: not with --graph (the offloaded step copies to and "
                          "from the host, which a capture cannot record)");
    if (o->offload_optimizer && o->fsdp && o->fsdp_stage == 1)
        return usage_fail("--offload-optimizer: with --fsdp, stage 2 or 3 (FSDP's cpu offload of "
                          "the shards; stage 1 keeps full gradients on every rank)");
    if (o->override_tensor && !o->max_memory)
        return usage_fail("--override-tensor: only with --max-memory (the overridden tensors are "
                          "charged to their device's budget)");
    if (o->max_memory && mask == FOR_RUN && o->device)
        return usage_fail("--max-memory: not with --device (the budgets choose the device)");
    if (o->max_memory && (o->devices || o->fsdp || o->graph))
        return usage_fail("--max-memory: not with %s",
                          o->devices ? "--devices (data parallel replicates the whole model)"
                          : o->fsdp  ? "--fsdp (FSDP shards the model across processes)"
                                     : "--graph (a capture records one device)");
    if (o->stream_weights >= 0 && (o->devices || o->fsdp || o->graph || o->max_memory))
        return usage_fail("--stream-weights: not with %s",
                          o->devices ? "--devices (data parallel replicates the whole model)"
                          : o->fsdp  ? "--fsdp (FSDP shards the model across processes)"
                          : o->graph ? "--graph (a capture cannot record the copies)"
                                     : "--max-memory (placement and streaming do not "
                                       "combine: stream the whole model)");
    if (o->stream_weights >= 0 && o->offload_optimizer)
        return usage_fail("--offload-optimizer: not with --stream-weights (streamed weights live "
                          "on the host, where the optimizer steps already)");
    if (strcmp(o->data, "csv") && (o->csv_target))
        return usage_fail("--csv-target: only for --data csv");
    if (mask == FOR_EVAL && o->checkpoint && o->onnx)
        return usage_fail("eval: give either --checkpoint or --onnx, not both");
    if (mask == FOR_QUANT) {
        if (!o->output) return usage_fail("quantize: needs --out FILE.onnx (the file to write)");
        if (o->onnx && o->checkpoint)
            return usage_fail("quantize: give either --onnx FILE or --model with --checkpoint, "
                              "not both");
        if (!o->onnx && !o->checkpoint)
            return usage_fail("quantize: needs --onnx FILE, or --model M --checkpoint DIR (a "
                              "trained model, exported first)");
        if (o->onnx && !strcmp(o->quant_mode, "static") && !data_given)
            return usage_fail("quantize: --mode static needs calibration data: --data NAME (the "
                              "model's input samples; --mode dynamic needs none)");
        if (o->calib_batches && strcmp(o->quant_mode, "static"))
            return usage_fail("--calib-batches: only with --mode static");
        if (!o->calib_batches && !strcmp(o->quant_mode, "static")) o->calib_batches = 10;
    }
    if (mask == FOR_EXPORT && !o->output)
        return usage_fail("export: needs -o FILE.onnx (the file to write)");
    if (mask == FOR_CONVERT && !o->output)
        return usage_fail("convert: needs a checkpoint and the file to write (tessera convert "
                          "model.pt out.safetensors)");
    if (o->profile_steps && !o->profile_dir)
        return usage_fail("--profile-steps: needs --profile DIR (where the trace goes)");
    if (o->profile_dir) {
        long long a = 1, b = 1;
        char tail = 0;
        if (o->profile_steps &&
            (sscanf(o->profile_steps, "%lld:%lld%c", &a, &b, &tail) != 2 || a < 1 || b < a))
            return usage_fail("--profile-steps: expected A:B with 1 <= A <= B (steps A to B), got "
                              "'%s'",
                              o->profile_steps);
        o->profile_first = a, o->profile_last = b;
    }
    if ((mask & (FOR_RUN | FOR_INFO)) && !o->onnx)
        return usage_fail("%s: needs a model file (tessera %s model.onnx)", cmd, cmd);
    return -1;
}

int tcli_parse(int argc, char **argv, tcli_opts *o) {
    *o = (tcli_opts){.data = "fashion-mnist",
                     .test_fraction = 0.2,
                     .epochs = 0,     /* 2, or no limit with --max-steps */
                     .batch_size = 0, /* 64, or 128 for the resnets */
                     .workers = -1,   /* tcli_workers */
                     .stream_weights = -1,
                     .log_every = 50,
                     .lr = -1,
                     .momentum = 0.9,
                     .weight_decay = -1,
                     .schedule = "cosine",
                     .context = 256,
                     .layers = 4,
                     .heads = 4,
                     .dim = 256,
                     .warmup = -1,
                     .grad_accum = 1,
                     .tokens = 200,
                     .quant_mode = "static",
                     .temperature = 1};
    if (argc < 2) return usage_fail("missing command: " COMMANDS " (see tessera --help)");
    const char *cmd = argv[1];
    if (is_help(cmd)) {
        tcli_usage(stdout);
        return TCLI_OK;
    }
    int mask = !strcmp(cmd, "train")      ? FOR_TRAIN
               : !strcmp(cmd, "eval")     ? FOR_EVAL
               : !strcmp(cmd, "generate") ? FOR_GEN
               : !strcmp(cmd, "run")      ? FOR_RUN
               : !strcmp(cmd, "info")     ? FOR_INFO
               : !strcmp(cmd, "export")   ? FOR_EXPORT
               : !strcmp(cmd, "convert")  ? FOR_CONVERT
               : !strcmp(cmd, "quantize") ? FOR_QUANT
                                          : 0;
    if (!mask && strcmp(cmd, "devices"))
        return usage_fail("unknown command '%s': expected " COMMANDS " (see tessera --help)", cmd);
    o->command = cmd;
    bool data_given = false; /* export: --model gpt alone means --data text */
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        if (is_help(a)) {
            tcli_usage(stdout);
            return TCLI_OK;
        }
        if ((mask == FOR_EXPORT || mask == FOR_QUANT) && !strcmp(a, "-o")) a = "--output";
        if (strncmp(a, "--", 2) && (mask & (FOR_RUN | FOR_INFO | FOR_CONVERT)) && !o->onnx) {
            o->onnx = a; /* the model file */
            continue;
        }
        if (strncmp(a, "--", 2) && mask == FOR_CONVERT && !o->output) {
            o->output = a; /* the file to write */
            continue;
        }
        if (strncmp(a, "--", 2))
            return usage_fail(
                "unexpected argument '%s' (options start with --; see tessera --help)", a);
        const char *eq = strchr(a, '=');
        size_t n = eq ? (size_t)(eq - a) : strlen(a);
        const opt_spec *s = NULL;
        for (size_t k = 0; k < sizeof specs / sizeof *specs; k++)
            if (strlen(specs[k].name) == n && !strncmp(specs[k].name, a, n)) s = &specs[k];
        if (!s) return usage_fail("unknown option '%.*s' (see tessera --help)", (int)n, a);
        if (!(s->commands & mask))
            return usage_fail("%s: not an option of 'tessera %s' (see tessera --help)", s->name,
                              cmd);
        const char *v;
        if (s->kind == K_FLAG) {
            if (eq) return usage_fail("%s: takes no value, got '%s'", s->name, eq + 1);
            v = "";
        } else if (eq) {
            v = eq + 1;
        } else {
            if (i + 1 >= argc) return usage_fail("%s: missing value", s->name);
            v = argv[++i];
        }
        int rc = set_value(s, v, o);
        if (rc >= 0) return rc;
        data_given |= s->offset == OFF(data);
    }
    return finish_options(o, mask, cmd, data_given);
}

double tcli_default_lr(const tcli_opts *o) {
    if (o->lr > 0) return o->lr;
    if (strcmp(o->optimizer, "sgd")) return 0.001;
    return tcli_is_resnet(o->model) ? 0.1 : 0.02; /* BatchNorm lets ResNets take He et al.'s 0.1 */
}

bool tcli_is_resnet(const char *model) {
    return model && (!strcmp(model, "resnet20") || !strcmp(model, "resnet18"));
}

bool tcli_augment(const tcli_opts *o) {
    /* by default the ResNets augment CIFAR-10 only: on Fashion-MNIST's 2-epoch run crops and flips
     * cost accuracy (0.8947 against 0.9150 without, docs/RESNET.md) */
    if (o->augment) return !strcmp(o->augment, "on");
    return tcli_is_resnet(o->model) && o->data && !strcmp(o->data, "cifar10");
}

int tcli_workers(const tcli_opts *o, ts_device dev) {
    /* On the cpu, loader threads only take cores from the kernels; a GPU leaves the host free to
     * prepare the next batches while it computes. */
    if (o->workers >= 0) return o->workers;
    return dev.type == TS_CUDA ? 2 : 0;
}

/* One device name of --device or --devices, checked to exist. */
static int resolve_one(const char *flag, const char *name, ts_device *out) {
    ts_device d;
    if (ts_device_parse(name, &d)) {
        ts_error_clear();
        return usage_fail("%s: expected cpu, cuda, cuda:N or sim:N, got '%s'", flag, name);
    }
    if (d.type == TS_CUDA && d.index < 0) d.index = 0;
    /* a simulated device needs no hardware: make it exist rather than ask for TS_SIM_DEVICES */
    if (d.type == TS_SIM && ts_device_count(TS_SIM) <= d.index && d.index < 64) {
        if (ts_sim_configure(d.index + 1, 0)) ts_error_clear();
    }
    if (!ts_device_is_available(d)) {
        ts_error_clear();
        if (d.type == TS_CUDA)
            return usage_fail("%s: %s is not available (%d CUDA device%s present)", flag, name,
                              ts_device_count(TS_CUDA), ts_device_count(TS_CUDA) == 1 ? "" : "s");
        return usage_fail("%s: %s is not available", flag, name);
    }
    *out = d;
    return -1;
}

int tcli_resolve_device(const tcli_opts *o, ts_device *out) {
    if (!o->device) {
        *out = ts_cuda_is_available() ? ts_cuda(0) : ts_cpu();
        return -1;
    }
    return resolve_one("--device", o->device, out);
}

int tcli_resolve_devices(const tcli_opts *o, ts_device *out, int *n) {
    *n = 0;
    if (!o->devices) {
        *n = 1;
        return tcli_resolve_device(o, out);
    }
    const char *p = o->devices;
    for (;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        char name[32];
        if (len == 0 || len >= sizeof name)
            return usage_fail("--devices: expected a comma-separated list such as sim:0,sim:1, "
                              "got '%s'",
                              o->devices);
        if (*n == TCLI_MAX_DEVICES)
            return usage_fail("--devices: at most %d devices", TCLI_MAX_DEVICES);
        memcpy(name, p, len);
        name[len] = 0;
        int rc = resolve_one("--devices", name, &out[*n]);
        if (rc >= 0) return rc;
        for (int i = 0; i < *n; i++)
            if (ts_device_equal(out[i], out[*n]))
                return usage_fail("--devices: %s appears twice", name);
        ++*n;
        if (!comma) break;
        p = comma + 1;
    }
    return -1;
}
