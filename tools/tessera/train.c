/* train.c — `tessera train`: the training loop with per-epoch test, logs and crash-safe resume. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "tessera/optim_offload.h"
#include "tessera/placement.h"
#include "tessera/weight_stream.h"
#include "train_internal.h"

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* --fsdp: the optimizer steps the shards; AdamW in two groups as make_optim's (each unit's shard
 * in its decaying part, the matrices and embeddings, and the rest: fsdp_wrap asks for them) */
static ts_optim *make_fsdp_optim(const tcli_opts *o, ts_module *fsdp) {
    double lr = tcli_default_lr(o);
    if (!strcmp(o->optimizer, "adamw")) {
        ts_tensor_list d = {0}, n = {0};
        ts_optim *opt = NULL;
        if (ts_fsdp_decay_groups(fsdp, &d, &n) == TS_OK)
            opt = ts_adamw_new_params(d.tensors, d.n,
                                      (ts_adam_opts){.lr = lr, .weight_decay = o->weight_decay});
        if (opt && ts_optim_add_param_group_wd(opt, n.tensors, n.n, lr, 0) != TS_OK) {
            ts_optim_free(opt);
            opt = NULL;
        }
        ts_tensor_list_free(&d);
        ts_tensor_list_free(&n);
        return opt;
    }
    ts_tensor_list l = ts_fsdp_parameters(fsdp);
    ts_optim *opt = NULL;
    if (!ts_error() && !strcmp(o->optimizer, "sgd"))
        opt = ts_sgd_new_params(
            l.tensors, l.n,
            (ts_sgd_opts){.lr = lr, .momentum = o->momentum, .weight_decay = o->weight_decay});
    else if (!ts_error() && !strcmp(o->optimizer, "adam"))
        opt = ts_adam_new_params(l.tensors, l.n,
                                 (ts_adam_opts){.lr = lr, .weight_decay = o->weight_decay});
    ts_tensor_list_free(&l);
    return opt;
}

static ts_optim *make_optim(const tcli_opts *o, ts_module *net) {
    double lr = tcli_default_lr(o);
    if (!strcmp(o->optimizer, "adamw"))
        return ts_adamw_new_decay_groups(net,
                                         (ts_adam_opts){.lr = lr, .weight_decay = o->weight_decay});
    if (!strcmp(o->optimizer, "adam"))
        return ts_adam_new(net, (ts_adam_opts){.lr = lr, .weight_decay = o->weight_decay});
    return ts_sgd_new(
        net, (ts_sgd_opts){.lr = lr, .momentum = o->momentum, .weight_decay = o->weight_decay});
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

/* The schedule as a function of the step alone, so that a resumed run needs no scheduler state to
 * follow it exactly: --warmup steps of linear warm-up, then the cosine (or constant). */
static double lr_at(const trainer *t, int64_t step) {
    const double lr = tcli_default_lr(t->o);
    const int64_t warmup = t->o->warmup;
    if (strcmp(t->o->schedule, "cosine"))
        return step < warmup ? lr * (double)(step + 1) / (double)warmup : lr;
    int64_t total = t->batches * t->epochs;
    if (t->o->max_steps && t->o->max_steps < total) total = t->o->max_steps;
    return lr * ts_warmup_cosine_factor(step, warmup, total, 0);
}

static ts_status set_lr(trainer *t) {
    const double lr = lr_at(t, t->step);
    ts_status st = TS_OK;
    for (int g = 0; g < ts_optim_num_groups(t->opt) && !st; g++)
        st = ts_optim_set_lr(t->opt, g, lr);
    return st;
}

/* "1.2345" or, for text, "1.2345 (1.781 bpb)": bits per byte are the loss in nats / ln 2 */
static const char *loss_str(const trainer *t, double loss, char *buf, size_t n) {
    if (t->data.text)
        snprintf(buf, n, "%.4f (%.3f bpb)", loss, loss / log(2.0));
    else
        snprintf(buf, n, "%.4f", loss);
    return buf;
}

/* --fsdp's units: a gpt's blocks, a resnet's stages, else the whole model as one unit */
static ts_module *fsdp_wrap(trainer *t, ts_module *model) {
    const tcli_opts *o = t->o;
    char names[64][16];
    const char *units[64];
    int n = 0;
    /* --amp: the units are gathered in the autocast dtype and reduced in float32 (autocast
     * still runs on top: its float32 ops see float32) */
    const ts_dtype low = t->amp;
    if (!strcmp(o->model, "gpt")) {
        for (int i = 0; i < o->layers && n < 64; i++, n++)
            snprintf(names[n], sizeof names[n], "blocks.%d", i);
    } else if (!strncmp(o->model, "resnet", 6)) {
        for (int i = 1; i <= (strcmp(o->model, "resnet20") ? 4 : 3); i++, n++)
            snprintf(names[n], sizeof names[n], "layer%d", i);
    }
    for (int i = 0; i < n; i++) units[i] = names[i];
    return ts_fsdp_new(model, (ts_fsdp_opts){.stage = o->fsdp_stage,
                                             .units = units,
                                             .n_units = n,
                                             .param_dtype = low,
                                             .reduce_dtype = low ? TS_F32 : TS_DTYPE_DEFAULT,
                                             .decay_groups = !strcmp(o->optimizer, "adamw"),
                                             .cpu_offload = o->offload_optimizer});
}

/* --fsdp: each rank's peak memory on its device, at the end of an epoch (rank order) */
static void print_memory(trainer *t) {
    ts_mem_stats m = {0};
    double mine = ts_memory_stats(t->dev, &m) ? -1 : (double)m.peak_allocated / 1e6;
    ts_error_clear(); /* a device without statistics prints -1 */
    double *h = calloc((size_t)t->world, sizeof *h);
    if (!h) return;
    h[t->rank] = mine;
    ts_scope_begin();
    ts_tensor *v = ts_tensor_f64(TS_SHAPE(t->world), h, (ts_opts){0});
    bool ok = v && ts_dist_all_reduce(v, TS_DIST_SUM, NULL) == TS_OK &&
              ts_copy_to_host(v, h, (size_t)t->world * sizeof *h) == TS_OK;
    ts_scope_end();
    if (ok && t->is_main) {
        printf("fsdp: peak allocated per rank on %s:", ts_device_str(t->dev));
        for (int r = 0; r < t->world; r++) printf(" %.2f MB", h[r]);
        printf("\n");
        fflush(stdout);
    }
    free(h);
}

static ts_status save_checkpoint(trainer *t, int64_t epoch) {
    if (t->fsdp) { /* every rank writes its shards */
        char *dir = tcli_fsdp_checkpoint_dir(t->o->checkpoint);
        if (!dir) return TS_ERR_OOM;
        ts_fsdp_checkpoint c = {t->opt, t->scaler, t->step, t->batches};
        ts_status st = ts_fsdp_save_sharded(t->net, dir, &c);
        free(dir);
        return st;
    }
    ts_checkpoint_parts parts = {t->model, t->opt, t->scaler, t->step, t->batches};
    return tcli_checkpoint_save(t->o->checkpoint, &parts, epoch);
}

/* The epoch's sums over every rank (each trained on its share of the global batches). */
static ts_status sum_over_ranks(trainer *t, int64_t *seen) {
    if (t->world == 1) return TS_OK;
    double s = (double)*seen;
    ts_scope_begin();
    ts_tensor *n = ts_tensor_f64(TS_SHAPE(), &s, (ts_opts){0});
    ts_status st = ts_dist_all_reduce(t->loss_sum, TS_DIST_SUM, NULL);
    if (!st) st = ts_dist_all_reduce(t->correct, TS_DIST_SUM, NULL);
    if (!st) st = ts_dist_all_reduce(n, TS_DIST_SUM, NULL);
    if (!st) *seen = (int64_t)ts_item(n);
    ts_scope_end();
    return st;
}

/* One epoch from batch `first` (0, or where a resumed run stopped): trains, tests, prints, logs
 * and checkpoints. *stopped: --max-steps was reached. Returns -1 or an exit status. */
static int run_epoch(trainer *t, int64_t epoch, int64_t first, double *test_acc, bool *stopped) {
    const tcli_opts *o = t->o;
    double t0 = now_s();
    if (ts_loader_set_position(t->train, epoch, first)) return tcli_fail_ts(TCLI_FAIL, "loader");
    ts_scope_begin(); /* the in-place ops hand back a reference */
    ts_zero_(t->loss_sum);
    ts_zero_(t->correct);
    ts_scope_end();
    tcli_progress *pg = tcli_progress_new(t->is_main ? o->progress : TCLI_PROGRESS_NONE, epoch + 1,
                                          t->epochs, t->batches);
    t->pg = pg;
    int64_t done = first, seen = 0;
    double window_loss = 0; /* loss_sum at the last batch_loss record */
    int64_t window_seen = 0;
    ts_batch b;
    const bool scheduled = !strcmp(o->schedule, "cosine") || o->warmup > 0;
    tcli_profile_step_begin(o, t->step + 1);
    while (ts_loader_next(t->train, &b)) {
        if (scheduled && set_lr(t)) break;
        const cycle c = tcli_cycle_of(t, done);
        if (!tcli_graph_batch(t, &b, c)) tcli_train_batch(t, &b, c);
        if (ts_error()) break;
        done++, t->step++;
        seen += ts_numel(b.y);
        if (tcli_profile_step_end(o, t->step) >= 0) break;
        tcli_profile_step_begin(o, t->step + 1);
        /* mid-epoch: the step says where (gradients are never half-accumulated there) */
        if ((t->is_main || t->fsdp) && c.last && o->checkpoint_every &&
            t->step % o->checkpoint_every == 0 && save_checkpoint(t, -1))
            break;
        tcli_test_hooks_batch();
        if (o->max_steps && t->step >= o->max_steps) {
            *stopped = true;
            break;
        }
        if (o->time_limit && c.last && now_s() - t->t_start >= o->time_limit) {
            *stopped = true;
            break;
        }
        bool log_now = t->log && t->step % o->log_every == 0;
        if (tcli_progress_due(pg, done) || log_now) {
            double ls = ts_item(t->loss_sum), cr = ts_item(t->correct);
            tcli_progress_update(pg, done, ls / (double)seen, cr / (double)seen);
            if (log_now && seen > window_seen) {
                ts_logger_scalar(t->log, "train/batch_loss", t->step,
                                 (ls - window_loss) / (double)(seen - window_seen));
                window_loss = ls, window_seen = seen;
            }
        }
    }
    tcli_progress_end(pg);
    t->pg = NULL;
    if (ts_error()) return tcli_fail_ts(TCLI_FAIL, "training");
    if (sum_over_ranks(t, &seen)) return tcli_fail_ts(TCLI_FAIL, "training");
    double train_loss = ts_item(t->loss_sum) / (double)(seen ? seen : 1);
    double train_acc = ts_item(t->correct) / (double)(seen ? seen : 1);
    double test_loss, acc;
    tcli_amp_begin(t);
    ts_status st = tcli_evaluate(t->net, t->test, &test_loss, &acc, NULL);
    tcli_amp_end(t);
    if (st) return tcli_fail_ts(TCLI_FAIL, "test");
    double secs = now_s() - t0;
    *test_acc = acc;
    if (t->fsdp) print_memory(t);
    if (!t->is_main) {
        if (t->fsdp && o->checkpoint && save_checkpoint(t, *stopped ? -1 : epoch + 1))
            return tcli_fail_ts(TCLI_FAIL, "--checkpoint");
        return -1;
    }
    char l1[48], l2[48];
    char ep[48];
    printf("epoch %s  train loss %s acc %.4f  %s loss %s acc %.4f  time %.1fs\n",
           tcli_epoch_str(ep, sizeof ep, epoch + 1, t->epochs),
           loss_str(t, train_loss, l1, sizeof l1), train_acc, t->data.text ? "val" : "test",
           loss_str(t, test_loss, l2, sizeof l2), acc, secs);
    if (*stopped && o->max_steps && t->step >= o->max_steps)
        printf("stopped after step %lld (--max-steps %d)\n", (long long)t->step, o->max_steps);
    else if (*stopped)
        printf("stopped after step %lld (--time-limit %g s)\n", (long long)t->step, o->time_limit);
    fflush(stdout);
    if (t->log) {
        double v[6] = {train_loss, train_acc, test_loss, acc, ts_optim_get_lr(t->opt, 0), secs};
        if (log_epoch(t, epoch + 1, v)) return tcli_fail_ts(TCLI_FAIL, "--log");
    }
    if (o->checkpoint && save_checkpoint(t, *stopped ? -1 : epoch + 1))
        return tcli_fail_ts(TCLI_FAIL, "--checkpoint");
    return -1;
}

static ts_status load_checkpoint(trainer *t, const char *path) {
    if (t->fsdp) {
        char *dir = tcli_fsdp_checkpoint_dir(t->o->checkpoint);
        if (!dir) return TS_ERR_OOM;
        ts_fsdp_checkpoint c = {t->opt, t->scaler, 0, 0};
        ts_status st = ts_fsdp_load_sharded(t->net, dir, &c);
        free(dir);
        t->step = c.step;
        t->saved_batches = c.epoch_batches;
        return st;
    }
    ts_checkpoint_parts parts = {t->model, t->opt, t->scaler, 0, 0};
    ts_status st = ts_checkpoint_load_parts(path, &parts);
    t->step = parts.step;
    t->saved_batches = parts.epoch_batches;
    return st;
}

/* --resume: model, optimizer, step and RNG from latest.safetensors; the epoch follows from the
 * step, and the loader's order from (seed, epoch). Returns -1 or an exit status. */
static int resume(trainer *t, int64_t *start_epoch, int64_t *start_batch) {
    char *path = t->fsdp ? tcli_fsdp_manifest_path(t->o->checkpoint)
                         : tcli_checkpoint_path(t->o->checkpoint);
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
    } else if (t->step < 0 ||
               (t->saved_batches ? t->saved_batches != t->batches : t->step % t->batches != 0)) {
        rc = tcli_fail(TCLI_USAGE,
                       "--resume: %s was saved at step %lld by a run with %lld batches an epoch, "
                       "this one has %lld: resume with the data, --batch-size and number of "
                       "processes it was trained with%s",
                       path, (long long)t->step, (long long)t->saved_batches, (long long)t->batches,
                       t->fsdp ? " (--fsdp resumes on any number of processes with the same "
                                 "global batch: --batch-size x ranks)"
                               : "");
    } else {
        /* the epoch and the batch within it follow from the step (--checkpoint-every saves
         * mid-epoch): resume with the data and --batch-size the run was trained with */
        *start_epoch = t->step / t->batches;
        *start_batch = t->step % t->batches;
        if (t->is_main)
            printf("resumed from %s at step %lld: epoch %lld, batch %lld\n", path,
                   (long long)t->step, (long long)*start_epoch + 1, (long long)*start_batch);
    }
    free(path);
    return rc;
}

/* --max-memory: the model across the budgeted devices (weights and gradients charged), the
 * output back on --device where the targets and the loss are; the plan printed. -1 when placed. */
static int place_model(trainer *t) {
    ts_place_plan plan;
    if (ts_module_place_str(t->model, t->o->max_memory,
                            (ts_place_opts){.with_grads = true,
                                            .output_device = t->dev,
                                            .overrides = t->o->override_tensor},
                            &plan) != TS_OK)
        return tcli_fail_ts(TCLI_FAIL, "--max-memory");
    char *s = ts_place_plan_str(&plan);
    ts_place_plan_free(&plan);
    if (!s) return tcli_fail_ts(TCLI_FAIL, "--max-memory");
    printf("placement (--max-memory):\n%s", s);
    free(s);
    return -1;
}

/* Everything before the first step: the data, the model on its device (checkpointing, mixed
 * precision, FSDP / DDP / data parallel wrappers), the optimizer, the loaders, a resumed state,
 * the log. -1 when training can start, else the exit status. */
static int train_setup(trainer *t, int64_t *start, int64_t *start_batch) {
    const tcli_opts *o = t->o;
    /* a capture records this thread's work on one device */
    if (o->graph && t->ndev > 1)
        return tcli_fail(TCLI_USAGE, "--graph: not with data parallel --devices (the replicas "
                                     "run on threads of their own; a capture records one device)");
    if (o->graph && t->world > 1)
        return tcli_fail(TCLI_USAGE, "--graph: not with several processes (the gradients' "
                                     "all-reduce is not captured)");
    if (o->stream_weights >= 0 && t->world > 1)
        return tcli_fail(TCLI_USAGE, "--stream-weights: not with several processes (DDP "
                                     "replicates the whole model on each rank's device)");
    if (o->max_memory && t->world > 1)
        return tcli_fail(TCLI_USAGE, "--max-memory: not with several processes (DDP replicates "
                                     "the whole model on each rank's device)");
    int rc = tcli_data_open(o, true, &t->data);
    if (rc >= 0) return rc;
    if (tcli_augment(o) && t->data.height != t->data.width)
        return tcli_fail(TCLI_USAGE, "--augment: crops square images only, these are %lldx%lld",
                         (long long)t->data.height, (long long)t->data.width);
    if (o->checkpoint && (rc = tcli_checkpoint_prepare(o->checkpoint)) >= 0) return rc;
    ts_manual_seed(o->seed);
    if (!(t->net = t->model = tcli_model_new(o, &t->data)))
        return ts_error() ? tcli_fail_ts(TCLI_FAIL, "model") : TCLI_USAGE;
    if (o->stream_weights >= 0) {
        if (ts_module_stream(t->model, t->dev, (ts_stream_opts){.prefetch = o->stream_weights}) !=
            TS_OK)
            return tcli_fail_ts(TCLI_FAIL, "--stream-weights");
        printf("weights streamed to %s, %d unit%s ahead (--stream-weights)\n",
               ts_device_str(t->dev), o->stream_weights, o->stream_weights == 1 ? "" : "s");
    } else if (!o->max_memory) {
        t->net = t->model = ts_module_to(t->model, t->dev);
    } else if ((rc = place_model(t)) >= 0) {
        return rc;
    }
    if (o->qat && t->world > 1)
        return tcli_fail(TCLI_USAGE, "--qat: not with several processes (each rank's observers "
                                     "would see its own batches)");
    if (o->qat && (rc = tcli_qat_setup(o, t->model)) >= 0) return rc;
    const int every = o->checkpoint_activations;
    if (every && (strcmp(o->model, "gpt")   ? ts_resnet_checkpoint_blocks(t->model, every)
                  : o->checkpoint_sublayers ? ts_gpt_checkpoint_sublayers(t->model, every)
                                            : ts_gpt_checkpoint_blocks(t->model, every)) != TS_OK)
        return tcli_fail_ts(TCLI_FAIL, "--checkpoint-activations");
    if (o->amp) {
        t->amp = !o->amp_dtype                  ? ts_autocast_get_dtype(t->dev.type)
                 : !strcmp(o->amp_dtype, "f16") ? TS_F16
                                                : TS_BF16;
        /* bfloat16 has float32's range: its gradients need no scaling (PyTorch's advice) */
        if (t->amp == TS_F16 && !(t->scaler = ts_grad_scaler_new((ts_grad_scaler_opts){0})))
            return tcli_fail_ts(TCLI_FAIL, "--amp");
    }
    if (o->fsdp) {
        /* sharded: the wrapper owns the model from now on (and frees it even on failure); the
         * optimizer steps the shards */
        t->fsdp = true;
        if (ts_error() || !(t->net = fsdp_wrap(t, t->model))) {
            t->model = NULL;
            return tcli_fail_ts(TCLI_FAIL, "--fsdp");
        }
        t->model = ts_fsdp_module(t->net);
        if (!(t->opt = make_fsdp_optim(o, t->net))) return tcli_fail_ts(TCLI_FAIL, "--fsdp");
    } else if (ts_error() || !(t->opt = make_optim(o, t->model))) {
        return tcli_fail_ts(TCLI_FAIL, "model");
    }
    /* with --fsdp the shards themselves are on the host (cpu_offload): the optimizer is there */
    if (o->offload_optimizer && !t->fsdp && ts_optim_offload(t->opt) != TS_OK)
        return tcli_fail_ts(TCLI_FAIL, "--offload-optimizer");
    if (t->world > 1 && !t->fsdp) {
        /* DistributedDataParallel: rank 0's weights everywhere, gradients averaged in backward;
         * the wrapper owns the model from now on (and frees it even on failure) */
        t->net = ts_ddp_new(t->model, (ts_ddp_opts){0});
        if (!t->net) {
            t->model = NULL;
            return tcli_fail_ts(TCLI_FAIL, "distributed");
        }
    } else if (t->ndev > 1) {
        /* the wrapper owns the model from now on (and frees it even on failure) */
        t->net = ts_data_parallel_new(t->model, t->devs, t->ndev, t->dev);
        if (!t->net) {
            t->model = NULL;
            return tcli_fail_ts(TCLI_FAIL, "--devices");
        }
    }
    if (t->world > 1 &&
        !(t->sampler = ts_distributed_sampler_new(ts_dataset_len(t->data.train),
                                                  (ts_distributed_sampler_opts){.seed = o->seed})))
        return tcli_fail_ts(TCLI_FAIL, "distributed");
    t->train = ts_loader_new(t->data.train, (ts_loader_opts){.batch_size = o->batch_size,
                                                             .shuffle = !t->sampler,
                                                             .sampler = t->sampler,
                                                             .workers = tcli_workers(o, t->dev),
                                                             .pin_memory = t->dev.type == TS_CUDA,
                                                             .device = t->dev,
                                                             .seed = o->seed,
                                                             .transform = tcli_train_transform(
                                                                 &t->data, tcli_augment(o))});
    /* the test images are never augmented (tcli_test_loader) */
    t->test = t->train ? tcli_test_loader(o, &t->data, t->dev) : NULL;
    if (!t->test) return tcli_fail_ts(TCLI_FAIL, "loader");
    t->batches = ts_loader_num_batches(t->train);
    if (t->batches < 1) return tcli_fail(TCLI_USAGE, "--data: no training samples");
    t->epochs = o->epochs;
    if (o->max_steps && (o->max_steps + t->batches - 1) / t->batches < t->epochs)
        t->epochs = (o->max_steps + t->batches - 1) / t->batches;
    t->loss_sum = ts_zeros(TS_SHAPE(), (ts_opts){.dtype = TS_F64, .device = t->dev});
    t->correct = ts_zeros(TS_SHAPE(), (ts_opts){.dtype = TS_I64, .device = t->dev});
    if (ts_error()) return tcli_fail_ts(TCLI_FAIL, NULL);
    if (o->checkpoint_every && o->checkpoint_every % o->grad_accum)
        return tcli_fail(TCLI_USAGE, "--checkpoint-every %d: must be a multiple of --grad-accum %d",
                         o->checkpoint_every, o->grad_accum);
    if (o->resume && (rc = resume(t, start, start_batch)) >= 0) return rc;
    if (t->is_main && o->log && !(t->log = ts_logger_open(o->log)))
        return tcli_fail_ts(TCLI_USAGE, "--log");
    return -1;
}

/* What is trained, on what, how (the first rank's banner). */
static void print_banner(const trainer *t) {
    const tcli_opts *o = t->o;
    const char *opt_name = !strcmp(o->optimizer, "adamw")  ? "AdamW"
                           : !strcmp(o->optimizer, "adam") ? "Adam"
                                                           : "SGD";
    printf("%s (%lld parameters) on %s (%lld train / %lld test) on ", tcli_model_title(o->model),
           (long long)ts_module_num_parameters(t->model), t->data.title,
           (long long)ts_dataset_len(t->data.train), (long long)ts_dataset_len(t->data.test));
    for (int i = 0; i < t->ndev; i++) printf("%s%s", i ? "," : "", ts_device_str(t->devs[i]));
    printf("%s", t->ndev > 1 ? " (data parallel)" : "");
    if (t->amp != TS_DTYPE_DEFAULT)
        printf(", mixed precision %s%s", ts_dtype_name(t->amp),
               t->scaler ? " with grad scaling" : "");
    printf("\n");
    if (t->fsdp) {
        ts_fsdp_stats fs = {0};
        ts_fsdp_get_stats(t->net, &fs);
        printf("distributed: %s; FullyShardedDataParallel stage %d, %d units, %.2f MB of shards a "
               "rank",
               ts_dist_describe(), o->fsdp_stage ? o->fsdp_stage : 3, fs.units,
               (double)fs.shard_bytes / 1e6);
        if (t->amp != TS_DTYPE_DEFAULT)
            printf(", parameters gathered in %s, gradients reduced in %s", ts_dtype_name(t->amp),
                   ts_dtype_name(TS_F32));
        if (!strcmp(o->optimizer, "adamw")) printf(", decay groups");
        printf("\n");
    } else if (t->world > 1) {
        printf("distributed: %s; DistributedDataParallel\n", ts_dist_describe());
    }
    if (t->epochs >= INT_MAX)
        printf("epochs until the time limit");
    else
        printf("%lld epoch%s", (long long)t->epochs, t->epochs == 1 ? "" : "s");
    if (o->max_steps) printf(" (at most %d steps)", o->max_steps);
    if (t->world > 1)
        printf(", batch %d per rank x %d ranks = global batch %lld", o->batch_size, t->world,
               (long long)o->batch_size * t->world);
    else
        printf(", batch %d", o->batch_size);
    if (o->grad_accum > 1) printf(" x %d accumulated", o->grad_accum);
    printf(", %s lr %g", opt_name, tcli_default_lr(o));
    if (!strcmp(o->optimizer, "sgd")) printf(" momentum %g", o->momentum);
    if (o->weight_decay > 0) printf(" weight decay %g", o->weight_decay);
    if (o->offload_optimizer) printf(" (offloaded: masters and state on the host)");
    if (o->warmup > 0) printf(" warm-up %d", o->warmup);
    printf("%s, seed %llu%s\n", strcmp(o->schedule, "cosine") ? "" : " cosine decay",
           (unsigned long long)o->seed,
           tcli_augment(o) ? ", random crop (padding 4) and flip" : "");
    if (t->data.text)
        printf("gpt: context %d, %d layers, %d heads, width %d; a unigram model of the training "
               "bytes has %.3f bits per byte\n",
               o->context, o->layers, o->heads, o->dim, t->data.unigram_bits);
    fflush(stdout);
}

/* The trained weights as <checkpoint>/model.safetensors (FSDP: gathered from the shards on every
 * rank, written by the first). -1, or the exit status of a failure. */
static int write_checkpoint(trainer *t) {
    const tcli_opts *o = t->o;
    /* FSDP: every unit's parameters gathered from the shards (full precision) on every rank,
     * so the first can write them */
    ts_tensor_list full = {0};
    if (o->checkpoint && t->fsdp && (full = ts_fsdp_full_state_dict(t->net), ts_error()))
        return tcli_fail_ts(TCLI_FAIL, "--checkpoint");
    if (o->checkpoint && t->is_main) {
        size_t n = strlen(o->checkpoint) + 32;
        char *path = malloc(n);
        if (!path) return tcli_fail(TCLI_FAIL, "out of memory");
        snprintf(path, n, "%s/model.safetensors", o->checkpoint);
        /* what `tessera generate` needs besides the weights' shapes */
        char heads[16];
        snprintf(heads, sizeof heads, "%d", o->heads);
        const char *meta[] = {"format", "pt", "model", o->model, "n_head", heads};
        ts_tensor_list sd = t->fsdp ? full : ts_module_state_dict(t->model);
        full = (ts_tensor_list){0};
        ts_status st = ts_error() ? ts_error() : ts_safetensors_save(path, &sd, meta, 3);
        ts_tensor_list_free(&sd);
        free(path);
        if (st) return tcli_fail_ts(TCLI_FAIL, "--checkpoint");
    }
    ts_tensor_list_free(&full); /* the other ranks' */
    return -1;
}

static int train_run(trainer *t) {
    const tcli_opts *o = t->o;
    int64_t start = 0, start_batch = 0;
    int rc = train_setup(t, &start, &start_batch);
    if (rc >= 0) return rc;
    if (t->is_main) print_banner(t);
    t->t_start = now_s();
    double acc = -1;
    bool stopped = o->max_steps && t->step >= o->max_steps;
    for (int64_t e = start; e < t->epochs && !stopped; e++)
        if ((rc = run_epoch(t, e, e == start ? start_batch : 0, &acc, &stopped)) >= 0) return rc;
    if ((rc = tcli_profile_step_end(o, -1)) >= 0) return rc; /* ended inside the profiled steps */
    if (acc < 0) { /* resumed after the last epoch: nothing left to train */
        double loss;
        tcli_amp_begin(t);
        ts_status st = tcli_evaluate(t->net, t->test, &loss, &acc, NULL);
        tcli_amp_end(t);
        if (st) return tcli_fail_ts(TCLI_FAIL, "test");
    }
    if (o->qat && t->is_main) tcli_qat_report(t->model);
    if ((rc = write_checkpoint(t)) >= 0) return rc;
    if (t->is_main) printf("%s accuracy: %.4f\n", t->data.text ? "val" : "test", acc);
    fflush(stdout);
    return TCLI_OK;
}

/* Several processes (mpirun, srun): joins them, takes this rank's GPU and share of the cores. */
static int join_world(trainer *t) {
    if (ts_dist_init((ts_dist_opts){0})) return tcli_fail_ts(TCLI_FAIL, "distributed");
    t->world = ts_dist_world_size();
    t->rank = ts_dist_rank();
    t->is_main = t->rank == 0;
    if (t->world == 1) return -1;
    if (t->o->devices)
        return tcli_fail(TCLI_USAGE, "--devices: data parallel within a process is not available "
                                     "with several processes (one device per rank)");
    /* --device cuda (no index), or the default on a machine with GPUs: one GPU per rank on each
     * machine (NCCL takes no two ranks on one GPU) */
    if (t->dev.type == TS_CUDA && (!t->o->device || !strchr(t->o->device, ':'))) {
        const int n = ts_device_count(TS_CUDA), local = ts_dist_local_world_size();
        if (local <= n) {
            t->dev = t->devs[0] = ts_cuda(ts_dist_local_rank());
        } else if (t->o->device) {
            return tcli_fail(TCLI_USAGE,
                             "--device cuda: %d ranks on this machine but %d CUDA device%s: each "
                             "rank needs a GPU of its own (start at most %d a machine, or train "
                             "with --device cpu)",
                             local, n, n == 1 ? "" : "s", n);
        } else {
            t->dev = t->devs[0] = ts_cpu();
            if (t->is_main)
                printf("(%d ranks on this machine but %d CUDA device%s: training on the CPU; "
                       "one rank per GPU trains on the GPUs)\n",
                       local, n, n == 1 ? "" : "s");
        }
    }
    /* every rank's kernels on all the cores would only fight */
    if (!t->o->threads && !getenv("OMP_NUM_THREADS") && !getenv("TS_NUM_THREADS")) {
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        long share = cores / (ts_dist_local_world_size() > 0 ? ts_dist_local_world_size() : 1);
        ts_set_num_threads(share > 0 ? (int)share : 1);
    }
    return -1;
}

int tcli_train(const tcli_opts *o) {
    trainer t = {.o = o, .world = 1, .is_main = true};
    int rc = tcli_resolve_devices(o, t.devs, &t.ndev);
    if (rc >= 0) return rc;
    t.dev = t.devs[0];
    if (o->threads) ts_set_num_threads(o->threads);
    rc = join_world(&t);
    if (rc < 0) rc = train_run(&t);
    tcli_graph_drop(&t); /* before the model and the optimizer whose tensors it replays */
    ts_release(t.loss_sum);
    ts_release(t.correct);
    ts_logger_close(t.log);
    ts_loader_free(t.train);
    ts_loader_free(t.test);
    ts_sampler_free(t.sampler);
    ts_optim_free(t.opt);
    ts_grad_scaler_free(t.scaler);
    ts_module_free(t.net); /* the DataParallel wrapper frees the model with it */
    tcli_data_close(&t.data);
    if (t.world > 1 && rc != TCLI_OK) {
        fflush(stdout);
        ts_dist_abort(rc); /* the other ranks would wait for this one forever */
    }
    if (ts_dist_is_initialized() && ts_dist_finalize() && rc == TCLI_OK)
        rc = tcli_fail_ts(TCLI_FAIL, "distributed");
    return rc;
}
