/* train.c — `tessera train`: the training loop with per-epoch test, logs and crash-safe resume. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "cli.h"

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

typedef struct trainer {
    const tcli_opts *o;
    ts_device dev; /* where the model lives and batches arrive: the first of devs */
    ts_device devs[TCLI_MAX_DEVICES];
    int ndev; /* > 1: data parallel over devs */
    tcli_data data;
    ts_module *model; /* the model itself: what checkpoints hold */
    ts_module *net;   /* what runs: the model, or its DataParallel wrapper (which owns it) */
    ts_optim *opt;
    ts_dtype amp;           /* TS_DTYPE_DEFAULT: no autocast */
    ts_grad_scaler *scaler; /* float16 autocast only */
    ts_loader *train, *test;
    ts_logger *log;
    int64_t step, batches; /* step: batches trained so far, over all epochs */
    /* running sums of the epoch, kept on the device so that a batch costs no host sync */
    ts_tensor *loss_sum, *correct;
} trainer;

static ts_optim *make_optim(const tcli_opts *o, ts_module *net) {
    double lr = tcli_default_lr(o);
    if (!strcmp(o->optimizer, "adam"))
        return ts_adam(net, (ts_adam_opts){.lr = lr, .weight_decay = o->weight_decay});
    return ts_sgd(
        net, (ts_sgd_opts){.lr = lr, .momentum = o->momentum, .weight_decay = o->weight_decay});
}

/* Autocast around the forward pass and the loss with --amp (begin/end always pair). */
static void amp_begin(const trainer *t) {
    if (t->amp != TS_DTYPE_DEFAULT) ts_autocast_begin(t->dev.type, t->amp);
}
static void amp_end(const trainer *t) {
    if (t->amp != TS_DTYPE_DEFAULT) ts_autocast_end();
}

/* One optimizer step on a batch; adds its loss x size and its correct predictions to the sums. */
static void train_batch(trainer *t, ts_batch *b) {
    ts_scope_begin();
    ts_optim_zero_grad(t->opt);
    amp_begin(t);
    ts_tensor *logits = ts_forward(t->net, b->x);
    ts_tensor *loss = ts_cross_entropy(logits, b->y);
    amp_end(t);
    if (t->scaler) {
        /* a step with Inf/NaN gradients is skipped and the scale backs off */
        ts_backward(ts_grad_scaler_scale(t->scaler, loss));
        ts_grad_scaler_step(t->scaler, t->opt, NULL);
        ts_grad_scaler_update(t->scaler);
    } else {
        ts_backward(loss);
        ts_optim_step(t->opt);
    }
    ts_no_grad_begin();
    ts_add_(t->loss_sum, ts_mul_scalar(loss, (double)ts_size(b->y, 0)));
    ts_add_(t->correct, ts_sum(ts_eq(ts_argmax_dim(logits, 1, false), b->y)));
    ts_no_grad_end();
    ts_scope_end();
}

static ts_status log_epoch(trainer *t, int64_t epoch, const double *v) {
    static const char *const tags[] = {"train/loss", "train/accuracy", "test/loss", "test/accuracy",
                                       "lr"};
    static const char *const keys[] = {"epoch",         "train_loss", "train_accuracy", "test_loss",
                                       "test_accuracy", "lr",         "seconds"};
    ts_status st = TS_OK;
    for (int i = 0; i < 5 && !st; i++) st = ts_logger_scalar(t->log, tags[i], t->step, v[i]);
    double rec[7] = {(double)epoch, v[0], v[1], v[2], v[3], v[4], v[5]};
    if (!st) st = ts_logger_record(t->log, t->step, 7, keys, rec);
    if (!st) st = ts_logger_flush(t->log);
    return st;
}

/* The cosine schedule as a function of the step alone, so that a resumed run needs no scheduler
 * state to follow it exactly. */
static double lr_at(const trainer *t, int64_t step) {
    double total = (double)t->batches * t->o->epochs;
    return tcli_default_lr(t->o) * 0.5 * (1 + cos(3.14159265358979323846 * (double)step / total));
}

/* One epoch: trains, tests, prints, logs and checkpoints. Returns -1 or an exit status. */
static int run_epoch(trainer *t, int64_t epoch, double *test_acc) {
    const tcli_opts *o = t->o;
    double t0 = now_s();
    if (ts_loader_set_epoch(t->train, epoch)) return tcli_fail_ts(TCLI_FAIL, "loader");
    ts_scope_begin(); /* the in-place ops hand back a reference */
    ts_zero_(t->loss_sum);
    ts_zero_(t->correct);
    ts_scope_end();
    tcli_progress *pg = tcli_progress_new(o->progress, epoch + 1, o->epochs, t->batches);
    int64_t done = 0, seen = 0;
    double window_loss = 0; /* loss_sum at the last batch_loss record */
    int64_t window_seen = 0;
    ts_batch b;
    const bool cosine = !strcmp(o->schedule, "cosine");
    while (ts_loader_next(t->train, &b)) {
        if (cosine && ts_optim_set_lr(t->opt, 0, lr_at(t, t->step))) break;
        train_batch(t, &b);
        if (ts_error()) break;
        done++, t->step++;
        seen += ts_size(b.y, 0);
        tcli_test_hooks_batch();
        bool log_now = t->log && t->step % o->log_every == 0;
        if (tcli_progress_due(pg, done) || log_now) {
            double ls = ts_item(t->loss_sum), c = ts_item(t->correct);
            tcli_progress_update(pg, done, ls / (double)seen, c / (double)seen);
            if (log_now && seen > window_seen) {
                ts_logger_scalar(t->log, "train/batch_loss", t->step,
                                 (ls - window_loss) / (double)(seen - window_seen));
                window_loss = ls, window_seen = seen;
            }
        }
    }
    tcli_progress_end(pg);
    if (ts_error()) return tcli_fail_ts(TCLI_FAIL, "training");
    double train_loss = ts_item(t->loss_sum) / (double)(seen ? seen : 1);
    double train_acc = ts_item(t->correct) / (double)(seen ? seen : 1);
    double test_loss, acc;
    amp_begin(t);
    ts_status st = tcli_evaluate(t->net, t->test, &test_loss, &acc, NULL);
    amp_end(t);
    if (st) return tcli_fail_ts(TCLI_FAIL, "test");
    double secs = now_s() - t0;
    printf("epoch %lld/%d  train loss %.4f acc %.4f  test loss %.4f acc %.4f  time %.1fs\n",
           (long long)epoch + 1, o->epochs, train_loss, train_acc, test_loss, acc, secs);
    fflush(stdout);
    *test_acc = acc;
    if (t->log) {
        double v[6] = {train_loss, train_acc, test_loss, acc, ts_optim_get_lr(t->opt, 0), secs};
        if (log_epoch(t, epoch + 1, v)) return tcli_fail_ts(TCLI_FAIL, "--log");
    }
    ts_checkpoint_parts parts = {t->model, t->opt, t->scaler, t->step};
    if (o->checkpoint && tcli_checkpoint_save(o->checkpoint, &parts, epoch + 1))
        return tcli_fail_ts(TCLI_FAIL, "--checkpoint");
    return -1;
}

static ts_status load_checkpoint(trainer *t, const char *path) {
    ts_checkpoint_parts parts = {t->model, t->opt, t->scaler, 0};
    ts_status st = ts_checkpoint_load_parts(path, &parts);
    t->step = parts.step;
    return st;
}

/* --resume: model, optimizer, step and RNG from latest.safetensors; the epoch follows from the
 * step, and the loader's order from (seed, epoch). Returns -1 or an exit status. */
static int resume(trainer *t, int64_t *start_epoch) {
    char *path = tcli_checkpoint_path(t->o->checkpoint);
    if (!path) return tcli_fail(TCLI_FAIL, "out of memory");
    struct stat sb;
    int rc = -1;
    if (stat(path, &sb) != 0) {
        fprintf(stderr, "tessera: --resume: no checkpoint in %s yet; starting from epoch 1\n",
                t->o->checkpoint);
    } else if (load_checkpoint(t, path)) {
        /* another model, or a broken file: not something training could fix */
        rc = tcli_fail_ts(ts_error() == TS_ERR_IO || ts_error() == TS_ERR_OOM ? TCLI_FAIL
                                                                              : TCLI_USAGE,
                          "--resume");
    } else if (t->step < 0 || t->step % t->batches) {
        rc = tcli_fail(TCLI_USAGE,
                       "--resume: %s ends at step %lld, not at the end of an epoch of %lld "
                       "batches: resume with the data and --batch-size it was trained with",
                       path, (long long)t->step, (long long)t->batches);
    } else {
        *start_epoch = t->step / t->batches;
        printf("resumed from %s: %lld epoch%s done (step %lld)\n", path, (long long)*start_epoch,
               *start_epoch == 1 ? "" : "s", (long long)t->step);
    }
    free(path);
    return rc;
}

static int train_run(trainer *t) {
    const tcli_opts *o = t->o;
    int rc = tcli_data_open(o, true, &t->data);
    if (rc >= 0) return rc;
    if (o->checkpoint && (rc = tcli_checkpoint_prepare(o->checkpoint)) >= 0) return rc;
    ts_manual_seed(o->seed);
    if (!(t->net = t->model = tcli_model_new(o->model, &t->data)))
        return ts_error() ? tcli_fail_ts(TCLI_FAIL, "model") : TCLI_USAGE;
    t->net = t->model = ts_module_to(t->model, t->dev);
    if (ts_error() || !(t->opt = make_optim(o, t->model))) return tcli_fail_ts(TCLI_FAIL, "model");
    if (t->ndev > 1) {
        /* the wrapper owns the model from now on (and frees it even on failure) */
        t->net = ts_data_parallel(t->model, t->devs, t->ndev, t->dev);
        if (!t->net) {
            t->model = NULL;
            return tcli_fail_ts(TCLI_FAIL, "--devices");
        }
    }
    if (o->amp) {
        t->amp = !o->amp_dtype                  ? ts_autocast_get_dtype(t->dev.type)
                 : !strcmp(o->amp_dtype, "f16") ? TS_F16
                                                : TS_BF16;
        /* bfloat16 has float32's range: its gradients need no scaling (PyTorch's advice) */
        if (t->amp == TS_F16 && !(t->scaler = ts_grad_scaler_new((ts_grad_scaler_opts){0})))
            return tcli_fail_ts(TCLI_FAIL, "--amp");
    }
    t->train =
        ts_loader_new(t->data.train, (ts_loader_opts){.batch_size = o->batch_size,
                                                      .shuffle = true,
                                                      .workers = tcli_workers(o, t->dev),
                                                      .pin_memory = t->dev.type == TS_CUDA,
                                                      .device = t->dev,
                                                      .seed = o->seed,
                                                      .transform = tcli_data_transform(&t->data)});
    t->test = t->train ? tcli_test_loader(o, &t->data, t->dev) : NULL;
    if (!t->test) return tcli_fail_ts(TCLI_FAIL, "loader");
    t->batches = ts_loader_num_batches(t->train);
    if (t->batches < 1) return tcli_fail(TCLI_USAGE, "--data: no training samples");
    t->loss_sum = ts_zeros(TS_SHAPE(), (ts_opts){.dtype = TS_F64, .device = t->dev});
    t->correct = ts_zeros(TS_SHAPE(), (ts_opts){.dtype = TS_I64, .device = t->dev});
    if (ts_error()) return tcli_fail_ts(TCLI_FAIL, NULL);
    int64_t start = 0;
    if (o->resume && (rc = resume(t, &start)) >= 0) return rc;
    if (o->log && !(t->log = ts_logger_open(o->log))) return tcli_fail_ts(TCLI_USAGE, "--log");

    const char *opt_name = strcmp(o->optimizer, "adam") ? "SGD" : "Adam";
    printf("%s (%lld parameters) on %s (%lld train / %lld test) on ", tcli_model_title(o->model),
           (long long)ts_module_num_parameters(t->model), t->data.title,
           (long long)ts_dataset_len(t->data.train), (long long)ts_dataset_len(t->data.test));
    for (int i = 0; i < t->ndev; i++) printf("%s%s", i ? "," : "", ts_device_str(t->devs[i]));
    printf("%s", t->ndev > 1 ? " (data parallel)" : "");
    if (t->amp != TS_DTYPE_DEFAULT)
        printf(", mixed precision %s%s", ts_dtype_name(t->amp),
               t->scaler ? " with grad scaling" : "");
    printf("\n");
    printf("%d epoch%s, batch %d, %s lr %g", o->epochs, o->epochs == 1 ? "" : "s", o->batch_size,
           opt_name, tcli_default_lr(o));
    if (strcmp(o->optimizer, "adam")) printf(" momentum %g", o->momentum);
    printf("%s, seed %llu\n", strcmp(o->schedule, "cosine") ? "" : " cosine decay",
           (unsigned long long)o->seed);
    fflush(stdout);

    double acc = -1;
    for (int64_t e = start; e < o->epochs; e++)
        if ((rc = run_epoch(t, e, &acc)) >= 0) return rc;
    if (acc < 0) { /* resumed after the last epoch: nothing left to train */
        double loss;
        amp_begin(t);
        ts_status st = tcli_evaluate(t->net, t->test, &loss, &acc, NULL);
        amp_end(t);
        if (st) return tcli_fail_ts(TCLI_FAIL, "test");
    }
    if (o->checkpoint) {
        size_t n = strlen(o->checkpoint) + 32;
        char *path = malloc(n);
        if (!path) return tcli_fail(TCLI_FAIL, "out of memory");
        snprintf(path, n, "%s/model.safetensors", o->checkpoint);
        ts_status st = ts_module_save(t->model, path);
        free(path);
        if (st) return tcli_fail_ts(TCLI_FAIL, "--checkpoint");
    }
    printf("test accuracy: %.4f\n", acc);
    fflush(stdout);
    return TCLI_OK;
}

int tcli_train(const tcli_opts *o) {
    trainer t = {.o = o};
    int rc = tcli_resolve_devices(o, t.devs, &t.ndev);
    if (rc >= 0) return rc;
    t.dev = t.devs[0];
    if (o->threads) ts_set_num_threads(o->threads);
    rc = train_run(&t);
    ts_release(t.loss_sum);
    ts_release(t.correct);
    ts_logger_close(t.log);
    ts_loader_free(t.train);
    ts_loader_free(t.test);
    ts_optim_free(t.opt);
    ts_grad_scaler_free(t.scaler);
    ts_module_free(t.net); /* the DataParallel wrapper frees the model with it */
    tcli_data_close(&t.data);
    return rc;
}
