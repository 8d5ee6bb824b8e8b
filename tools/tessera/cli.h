/* cli.h — the `tessera` command's internal interface: options, data, models, progress, commands. */
#ifndef TESSERA_CLI_H
#define TESSERA_CLI_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "tessera.h"

/* Exit statuses: 2 for a user's mistake (bad flag, bad value, missing data), 1 for a failure. */
enum { TCLI_OK = 0, TCLI_FAIL = 1, TCLI_USAGE = 2 };

typedef enum {
    TCLI_PROGRESS_AUTO = 0,
    TCLI_PROGRESS_BAR,
    TCLI_PROGRESS_LINES,
    TCLI_PROGRESS_NONE
} tcli_progress_mode;

typedef struct tcli_opts {
    const char *command; /* "train", "eval", "generate", "devices", "run", "info" */
    const char *model;   /* mlp, lenet, simplecnn, resnet20, resnet18, gpt (default: gpt for
                            text, else lenet) */
    const char *data;    /* fashion-mnist, mnist, cifar10, csv, text */
    const char *data_dir;
    const char *csv_target; /* column name or index; NULL = last column */
    double test_fraction;   /* csv from one file: rows held out for testing */
    const char *device;     /* NULL = best present */
    const char *devices;    /* train: "sim:0,sim:1" for data parallel; NULL = --device alone */
    bool amp;               /* train: autocast (+ grad scaling for float16) */
    const char *amp_dtype;  /* "bf16", "f16" or NULL: the device type's default */
    int epochs, batch_size, workers, threads, log_every;
    int max_steps;              /* train: stop after this many optimizer steps (0: no limit) */
    int checkpoint_every;       /* train: also checkpoint every N steps (0: at epoch ends only) */
    int checkpoint_activations; /* train: recompute every Nth block in backward (0: keep all) */
    bool checkpoint_sublayers;  /* train, gpt: those blocks by sublayer (attention, feed-forward) */
    double lr, momentum, weight_decay; /* < 0: the optimizer's default */
    const char *optimizer;             /* sgd, adam, adamw (default: adamw for gpt, else sgd) */
    uint64_t seed;
    const char *checkpoint, *log;
    bool resume;
    const char *schedule; /* cosine (default) or constant */
    tcli_progress_mode progress;
    /* language models: --model gpt on --data text */
    int context, layers, heads, dim;
    double dropout;
    /* residual networks: --model resnet20 or resnet18 */
    int width;           /* channels of the first stage (0: the model's, 16 or 64) */
    const char *augment; /* train: "on", "off", or NULL: on for the resnets, else off */
    /* train */
    int warmup;             /* steps of linear learning-rate warm-up (gpt: 100) */
    int grad_accum;         /* batches per optimizer step (1) */
    double label_smoothing; /* cross-entropy's */
    double clip_grad;       /* max total gradient norm (0: no clipping) */
    double time_limit;      /* seconds of training (0: no limit) */
    bool graph;             /* --graph: each step a replay of one captured step (train.c) */
    bool fsdp;              /* --fsdp: sharded data parallel (FSDP) across the ranks */
    int fsdp_stage;         /* --fsdp-stage 1|2|3 (0: 3); implies --fsdp */
    bool offload_optimizer; /* --offload-optimizer: master weights and state on the host */
    const char *max_memory; /* --max-memory: per-device budgets, the model placed (placement.h) */
    const char *override_tensor; /* --override-tensor: pattern=device rules (with --max-memory) */
    int stream_weights;          /* --stream-weights K: weights streamed, K units ahead (-1: off) */
    /* generate */
    const char *prompt;
    int tokens, top_k;
    double temperature;
    bool greedy;
    bool qat;                /* train: --qat, quantization-aware training (qat.c) */
    const char *qat_from;    /* train: --qat-from CHECKPOINT, the weights to fine-tune */
    const char *wo_quantize; /* --quantize int8|int4: weight-only linears (NULL: float) */
    int group_size;          /* --group-size N: int4's group (0: 128) */
    const char *act_quant;   /* --act-quant int8: int8 dynamic activations (--hf; NULL: float) */
    const char *hf;          /* --hf DIR: a Hugging Face GPT-2 folder (gpt2.h), cached decoding */
    const char *prompt_ids;  /* --prompt-ids 1,2,3: the prompt as token ids (with --hf) */
    /* run and info: the ONNX model file (the positional argument); info and convert: a PyTorch
     * checkpoint */
    const char *onnx;
    /* run */
#define TCLI_MAX_INPUTS 64
    const char *inputs[TCLI_MAX_INPUTS]; /* --input NAME=FILE.npy, as given */
    int n_inputs;
    const char *save;        /* --save DIR: each output as DIR/<name>.npy */
    const char *grad_output; /* --grad-output NAME=FILE.npy: backward of sum(output * g) */
    int bench;               /* --bench N: timed runs after warm-up (0: none) */
    bool no_optimize;        /* --no-optimize: the file's graph as it is (no inference rewrites) */
    int batch; /* --batch B: symbolic dims of random inputs (0: 1); export: the example's */
    /* export */
    const char *output;  /* -o / --output FILE.onnx; convert: the .safetensors to write */
    bool dynamic_batch;  /* --dynamic-batch: dim 0 of input and output symbolic */
    const char *save_io; /* --save-io DIR: the example input and Tessera's output as .npy */
    /* quantize (the model: --onnx FILE, or --model with --checkpoint; the file: --out) and
     * eval --onnx FILE */
    const char *quant_mode; /* --mode static|dynamic|int4 (static) */
    int calib_batches;      /* --calib-batches N (10) */
    /* train --profile DIR --profile-steps A:B: a Chrome trace of steps A..B (profile.c) */
    const char *profile_dir, *profile_steps;
    int64_t profile_first, profile_last;
} tcli_opts;

/* Prints "tessera: <message>" as one line on stderr and returns status. */
int tcli_fail(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The pending library error as a failure line (and clears it). */
int tcli_fail_ts(int status, const char *what);

/* args.c: fills o from argv; returns -1 to go on, or an exit status (0 after --help). */
int tcli_parse(int argc, char **argv, tcli_opts *o);
/* profile.c: `tessera profile-view`, and the trainer's --profile around each step */
int tcli_profile_view(int argc, char **argv);
void tcli_profile_step_begin(const tcli_opts *o, int64_t step);
int tcli_profile_step_end(const tcli_opts *o, int64_t step); /* step < 0: the run ended */
/* profile.c, for the pages of profile-view and memory-view: the whole file (NUL-terminated, *n
 * its length; NULL when unreadable), and text written inside a <script> element ("</" as "<\/",
 * which JSON reads as the same characters) */
char *tcli_read_all(const char *path, size_t *n);
void tcli_put_script_text(FILE *f, const char *text, size_t n);
/* memory_view.c: `tessera memory-view snapshot.json -o page.html` */
int tcli_memory_view(int argc, char **argv);
void tcli_usage(FILE *f);
double tcli_default_lr(const tcli_opts *o);
bool tcli_is_resnet(const char *model);
bool tcli_augment(const tcli_opts *o); /* random crop and flip for training */
/* --workers, or its default for the device the batches go to */
int tcli_workers(const tcli_opts *o, ts_device dev);
/* the device named by --device (checked to exist), or the best present */
int tcli_resolve_device(const tcli_opts *o, ts_device *out);
/* the devices of --devices (checked to exist, no repeats), or the one of --device */
#define TCLI_MAX_DEVICES 16
int tcli_resolve_devices(const tcli_opts *o, ts_device *out, int *n);

/* data.c: the chosen data set, opened for training and testing */
typedef struct tcli_data {
    ts_dataset *train, *test; /* train is NULL when not asked for (eval of image data) */
    ts_dataset *whole;        /* csv from one file: the dataset train and test are subsets of */
    int64_t channels, height, width; /* images; 0 for tabular data */
    int64_t features;                /* numel of one transformed sample */
    int64_t classes;
    float mean[3], std[3]; /* images: per-channel normalisation */
    float *fmean, *fstd;   /* tabular: per-feature standardisation (malloc'ed) */
    const char *title;     /* "Fashion-MNIST" */
    bool text;             /* byte-level text: samples are windows of `features` bytes */
    double unigram_bits;   /* text: entropy of the training bytes' distribution */
} tcli_data;
int tcli_data_open(const tcli_opts *o, bool need_train, tcli_data *d); /* -1 or exit status */
ts_transform *tcli_data_transform(const tcli_data *d); /* a fresh one for each loader */
/* the training loader's: with augment, images are first cropped at random after padding 4 pixels
 * each side and flipped horizontally half of the time (torchvision's CIFAR recipe) */
ts_transform *tcli_train_transform(const tcli_data *d, bool augment);
void tcli_data_close(tcli_data *d);

/* text.c: --data text (the windows of ts_text_dataset; default corpus Debian's fortunes) */
#define TCLI_TEXT_DIR "/usr/share/games/fortunes"
int tcli_text_open(const tcli_opts *o, bool need_train, tcli_data *d); /* -1 or exit status */
/* --model gpt sized by --context --layers --heads --dim --dropout */
ts_module *tcli_gpt_new(const tcli_opts *o);
/* logits [B, T, V] and targets [B, T] as [B T, V] and [B T]; others unchanged (borrowed) */
void tcli_flatten_tokens(ts_tensor **logits, ts_tensor **y);

/* models.c */
ts_module *tcli_model_new(const tcli_opts *o, const tcli_data *d);
const char *tcli_model_title(const char *name); /* "LeNet-5" */

/* progress.c: a bar with rate and ETA on a terminal, else plain lines */
typedef struct tcli_progress tcli_progress;
tcli_progress *tcli_progress_new(tcli_progress_mode mode, int64_t epoch, int64_t epochs,
                                 int64_t batches);
/* After batch `done` (1-based); wants_stats says whether to pass fresh loss/accuracy now. */
bool tcli_progress_due(tcli_progress *p, int64_t done);
void tcli_progress_update(tcli_progress *p, int64_t done, double loss, double acc);
void tcli_progress_end(tcli_progress *p); /* clears the bar; frees */
/* A line of its own on stdout amid the progress (the bar, when drawn, is cleared first; the next
 * update draws it again). p may be NULL. */
void tcli_progress_note(tcli_progress *p, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* "3/10", or "3" when the run has no last epoch (--time-limit alone: epochs == INT_MAX) */
const char *tcli_epoch_str(char *buf, size_t n, int64_t epoch, int64_t epochs);

/* eval.c: mean loss and accuracy of net over a loader's epoch */
ts_status tcli_evaluate(ts_module *net, ts_loader *l, double *loss, double *acc, int64_t *count);
ts_loader *tcli_test_loader(const tcli_opts *o, const tcli_data *d, ts_device dev);

/* checkpoint.c */
char *tcli_checkpoint_path(const char *dir);     /* malloc'ed "<dir>/latest.safetensors" */
char *tcli_fsdp_checkpoint_dir(const char *dir); /* --fsdp: malloc'ed "<dir>/sharded" */
char *tcli_fsdp_manifest_path(const char *dir);  /* "<dir>/sharded/manifest.safetensors" */
int tcli_checkpoint_prepare(const char *dir);    /* mkdir -p; removes stale temporaries */
ts_status tcli_checkpoint_save(const char *dir, const ts_checkpoint_parts *parts, int64_t epoch);
void tcli_test_hooks_batch(void); /* TS_TRAIN_KILL_AFTER_BATCHES */

/* commands */
int tcli_train(const tcli_opts *o);
int tcli_eval(const tcli_opts *o);
int tcli_devices(const tcli_opts *o);
int tcli_generate(const tcli_opts *o);
int tcli_generate_hf(const tcli_opts *o); /* generate_hf.c: --hf */
int tcli_run(const tcli_opts *o);         /* onnx_cmds.c */
int tcli_info(const tcli_opts *o);        /* onnx_cmds.c */
int tcli_export(const tcli_opts *o);      /* export.c */
/* export.c: --model (with --checkpoint's weights) as a float ONNX file at path, batch dim dynamic;
 * -1 or an exit status */
int tcli_export_float(const tcli_opts *o, const tcli_data *d, ts_device dev, const char *path);
int tcli_quantize(const tcli_opts *o); /* quantize.c */
/* qat.c: --qat. The checkpoint file of a folder (its latest.safetensors) or a file (malloc'ed);
 * whether a checkpoint holds QAT state (-1, or the exit status when unreadable); the model
 * prepared; --qat-from loaded and the model prepared, with the banner line; the observed ranges */
char *tcli_checkpoint_file(const char *arg);
int tcli_checkpoint_is_qat(const char *path, bool *qat);
int tcli_qat_prepare(ts_module *model);
int tcli_qat_setup(const tcli_opts *o, ts_module *model);
void tcli_qat_report(ts_module *model);
int tcli_convert(const tcli_opts *o); /* pt_cmds.c: a .pt checkpoint as .safetensors */
int tcli_pt_info(const tcli_opts *o); /* pt_cmds.c: `tessera info model.pt` */
bool tcli_is_pt(const char *path);    /* pt_cmds.c: .pt / .pth / .bin, or a zip */

#endif /* TESSERA_CLI_H */
