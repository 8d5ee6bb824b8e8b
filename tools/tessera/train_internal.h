/* train_internal.h — the state of one `tessera train` run, shared by train.c (set-up, epochs,
 * checkpoints) and train_step.c (one batch, eager or replayed from a captured step). */
#ifndef TCLI_TRAIN_INTERNAL_H
#define TCLI_TRAIN_INTERNAL_H

#include "cli.h"

typedef struct trainer {
    const tcli_opts *o;
    ts_device dev; /* where the model lives and batches arrive: the first of devs */
    ts_device devs[TCLI_MAX_DEVICES];
    int ndev; /* > 1: data parallel over devs */
    tcli_data data;
    ts_module *model; /* the model itself: what checkpoints hold */
    ts_module *net;   /* what runs: the model, or its DataParallel wrapper (which owns it) */
    bool fsdp;        /* --fsdp: net is the FullyShardedDataParallel wrapper; model its module */
    ts_optim *opt;
    ts_dtype amp;           /* TS_DTYPE_DEFAULT: no autocast */
    ts_grad_scaler *scaler; /* float16 autocast only */
    ts_loader *train, *test;
    ts_sampler *sampler; /* several processes: this rank's share of each epoch */
    ts_logger *log;
    int64_t step, batches; /* step: batches trained so far, over all epochs */
    int64_t epochs;        /* --epochs, or fewer when --max-steps ends the run sooner */
    int world, rank;       /* processes training together (mpirun), this one's rank */
    bool is_main;          /* rank 0: prints progress, writes logs and checkpoints */
    int64_t saved_batches; /* --resume: batches per epoch of the run that saved the checkpoint */
    /* running sums of the epoch, kept on the device so that a batch costs no host sync */
    ts_tensor *loss_sum, *correct;
    double t_start; /* --time-limit counts from here */
    /* --graph: the captured step, the static batch it reads, the eager steps before it */
    ts_graph *graph;
    ts_tensor *gx, *gy;
    int64_t graph_warm;
    bool graph_off;    /* the capture failed or cannot serve this run: eager from here on */
    tcli_progress *pg; /* the epoch's progress, for --graph's lines */
} trainer;

/* Where a batch stands in its gradient-accumulation cycle (--grad-accum batches; the epoch's last
 * cycle may be shorter, and --max-steps may end one early). */
typedef struct cycle {
    bool first, last; /* zero the gradients before it; step the optimizer after it */
    int64_t len;      /* batches in the cycle: each one's loss counts 1/len */
} cycle;

/* Autocast around the forward pass and the loss with --amp (begin/end always pair). */
void tcli_amp_begin(const trainer *t);
void tcli_amp_end(const trainer *t);
/* the cycle of the batch after `done` of this epoch's */
cycle tcli_cycle_of(const trainer *t, int64_t done);
/* one batch: forward, loss, backward, and the optimizer step at the cycle's end */
void tcli_train_batch(trainer *t, ts_batch *b, cycle c);
/* --graph: the batch through the captured step (captured first when due); false when it must run
 * eagerly (tcli_train_batch) */
bool tcli_graph_batch(trainer *t, ts_batch *b, cycle c);
/* frees the captured step and its static batch; the rest of the run trains eagerly */
void tcli_graph_drop(trainer *t);

#endif
