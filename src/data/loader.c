/* loader.c — the data loader: epochs, worker threads making whole batches into a bounded ring,
 * in-order delivery, error hand-over and clean shutdown mid-epoch. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/profiler_hooks.h"
#include "data/loader_internal.h"

#define MAX_WORKERS 256

/* ------------------------------------------------------------------ workers */
/* A worker's error moves from its thread-local state into the loader; the lowest failing batch
 * wins. The other workers finish the batches before it, which the caller still receives, and make
 * none after it: the caller sees what it would see without workers. */
static void worker_fail(ts_loader *l, int id, int64_t k) {
    ts_status code = ts_error() != TS_OK ? ts_error() : TS_ERR_STATE;
    char msg[TSI_LOADER_MSG_LEN];
    snprintf(msg, sizeof msg, "%s", ts_error() != TS_OK ? ts_error_message() : "failed");
    ts_error_clear();
    pthread_mutex_lock(&l->mu);
    if (l->err == TS_OK || k < l->err_batch) {
        l->err = code;
        l->err_batch = k;
        l->err_worker = id;
        memcpy(l->err_msg, msg, sizeof msg);
    }
    pthread_cond_broadcast(&l->ready);
    pthread_cond_broadcast(&l->space);
    pthread_mutex_unlock(&l->mu);
}

/* Batch k comes after a failed one: nobody will take it (call with mu held). */
static bool after_error(const ts_loader *l, int64_t k) {
    return l->err != TS_OK && k > l->err_batch;
}

/* Worker `id` makes batches id, id + W, id + 2W, ... each once its slot is free. */
static void *worker_main(void *arg) {
    tsi_loader_worker *w = arg;
    ts_loader *l = w->l;
    for (int64_t k = l->first + w->id; k < l->nbatches; k += l->workers) {
        pthread_mutex_lock(&l->mu);
        while (!l->stop && !after_error(l, k) && k >= l->next_shared + l->cap)
            pthread_cond_wait(&l->space, &l->mu);
        bool stop = l->stop || after_error(l, k);
        pthread_mutex_unlock(&l->mu);
        if (stop) break;
        ts_tensor *x, *y;
        if (tsi_loader_build(l, l->epoch, k, &x, &y) != TS_OK) {
            worker_fail(l, w->id, k);
            break;
        }
        pthread_mutex_lock(&l->mu);
        stop = l->stop || after_error(l, k);
        if (!stop) {
            l->ring[k % l->cap] = (tsi_loader_slot){x, y, k, true};
            pthread_cond_signal(&l->ready);
        }
        pthread_mutex_unlock(&l->mu);
        if (stop) { /* shutting down: this batch has no taker */
            ts_release(x);
            ts_release(y);
            break;
        }
    }
    ts_error_clear();
    return NULL;
}

/* ------------------------------------------------------------------ epochs */
/* Wakes and joins the workers and frees every batch still in flight. */
static void stop_epoch(ts_loader *l) {
    if (l->started > 0) {
        pthread_mutex_lock(&l->mu);
        l->stop = true;
        pthread_cond_broadcast(&l->space);
        pthread_cond_broadcast(&l->ready);
        pthread_mutex_unlock(&l->mu);
        for (int i = 0; i < l->started; i++) pthread_join(l->threads[i], NULL);
        l->started = 0;
    }
    for (int64_t i = 0; i < l->cap; i++) {
        ts_release(l->ring[i].x);
        ts_release(l->ring[i].y);
        l->ring[i] = (tsi_loader_slot){0};
    }
    free(l->order);
    l->order = NULL;
    l->running = false;
}

static bool start_epoch(ts_loader *l) {
    if (l->sampler && l->nbatches > 0) {
        /* the loader keeps the sampler's epoch in step with its own (PyTorch leaves it to the
         * user's set_epoch) */
        if (ts_sampler_set_epoch(l->sampler, l->epoch) != TS_OK) return false;
        if (!(l->order = malloc((size_t)l->n * sizeof *l->order)))
            return tsi_error_set(TS_ERR_OOM, "loader: out of host memory for an epoch's order"),
                   false;
        if (ts_sampler_indices(l->sampler, l->order) != TS_OK) return false;
    } else if (l->shuffle && l->nbatches > 0 &&
               !(l->order = tsi_loader_permutation(l->seed, l->epoch, l->n))) {
        return false;
    }
    l->next = l->next_shared = l->first; /* 0, or where ts_loader_set_position put it */
    l->stop = false;
    l->err = TS_OK;
    l->running = true;
    const int nw = l->workers < l->nbatches ? l->workers : (int)l->nbatches;
    for (int i = 0; i < nw; i++) {
        int rc = pthread_create(&l->threads[i], NULL, worker_main, &l->args[i]);
        if (rc != 0) {
            stop_epoch(l);
            tsi_error_set(TS_ERR_OOM, "loader: cannot start worker thread %d: %s", i, strerror(rc));
            return false;
        }
        l->started++;
    }
    return true;
}

/* The epoch is over (its end, an error, or a failed start): the next call starts the next one. */
static bool end_epoch(ts_loader *l) {
    stop_epoch(l);
    l->epoch++;
    l->first = 0;
    return false;
}

/* ------------------------------------------------------------------ delivery */
static ts_status take_threaded(ts_loader *l, ts_tensor **x, ts_tensor **y) {
    pthread_mutex_lock(&l->mu);
    tsi_loader_slot *s = &l->ring[l->next % l->cap];
    /* slot next % cap can only hold batch next: the window [next, next + cap) maps one to one.
     * A failed later batch does not end the wait: batches before it are still delivered, and the
     * error comes when its turn does (the lowest failing batch wins), as without workers. */
    while (!s->full && (l->err == TS_OK || l->err_batch > l->next))
        pthread_cond_wait(&l->ready, &l->mu);
    ts_status st = TS_OK;
    if (s->full) {
        *x = s->x;
        *y = s->y;
        *s = (tsi_loader_slot){0};
        l->next_shared = l->next + 1;
        pthread_cond_broadcast(&l->space);
    } else {
        st = l->err;
        tsi_error_set(st, "loader: worker %d: %s", l->err_worker, l->err_msg);
    }
    pthread_mutex_unlock(&l->mu);
    return st;
}

static bool loader_next(ts_loader *l, ts_batch *b);

bool ts_loader_next(ts_loader *l, ts_batch *b) {
    int prof = -1;
    if (atomic_load_explicit(&tsi_placement_on, memory_order_relaxed))
        prof = tsi_prof_span_begin(TS_PROF_WAIT, "DataLoader.next", ts_cpu(), NULL);
    bool ok = loader_next(l, b);
    if (prof >= 0) tsi_prof_span_end(prof);
    return ok;
}

static bool loader_next(ts_loader *l, ts_batch *b) {
    if (b) memset(b, 0, sizeof *b);
    if (!l || !b) {
        tsi_error_set(TS_ERR_ARG, "loader_next: %s is NULL", !l ? "loader" : "batch");
        return false;
    }
    ts_release(l->cur_x);
    ts_release(l->cur_y);
    l->cur_x = l->cur_y = NULL;
    if (!l->running && !start_epoch(l)) return end_epoch(l);
    if (l->next >= l->nbatches) return end_epoch(l);
    ts_tensor *x = NULL, *y = NULL;
    if (l->started > 0) {
        if (take_threaded(l, &x, &y) != TS_OK) return end_epoch(l);
    } else {
        const bool pending = ts_error() != TS_OK;
        if (tsi_loader_build(l, l->epoch, l->next, &x, &y) != TS_OK) {
            if (!pending) { /* name the loader in front of the dataset's or transform's message */
                char msg[TSI_LOADER_MSG_LEN];
                ts_status code = ts_error();
                snprintf(msg, sizeof msg, "%s", ts_error_message());
                ts_error_clear();
                tsi_error_set(code, "loader: %s", msg);
            }
            return end_epoch(l);
        }
    }
    l->cur_x = x;
    l->cur_y = y;
    *b = (ts_batch){.x = x, .y = y, .index = l->next, .epoch = l->epoch};
    l->next++;
    return true;
}

/* ------------------------------------------------------------------ lifetime */
static void loader_destroy(ts_loader *l) {
    free(l->ring);
    free(l->threads);
    free(l->args);
    ts_transform_free(l->transform);
    free(l);
}

ts_loader *ts_loader_new(ts_dataset *d, ts_loader_opts o) {
    tsi_init();
    const char *op = "loader_new";
    /* the loader owns the transform from the call on, also when the call fails */
    ts_transform *tf = o.transform;
    int64_t n = d ? ts_dataset_len(d) : -1;
    ts_status bad = TS_OK;
    if (!d)
        bad = tsi_error_set(TS_ERR_ARG, "%s: dataset is NULL", op);
    else if (n < 0)
        bad = ts_error() != TS_OK
                  ? ts_error()
                  : tsi_error_set(TS_ERR_ARG, "%s: dataset length is %lld", op, (long long)n);
    else if (o.batch_size < 0 || o.workers < 0 || o.workers > MAX_WORKERS || o.prefetch < 0)
        bad = tsi_error_set(TS_ERR_ARG,
                            "%s: batch_size %d, workers %d (at most %d), prefetch %d: none may be "
                            "negative",
                            op, o.batch_size, o.workers, MAX_WORKERS, o.prefetch);
    else if (o.sampler && o.shuffle)
        bad =
            tsi_error_set(TS_ERR_ARG, "%s: sampler option is mutually exclusive with shuffle", op);
    else if (o.sampler && tsi_sampler_dataset_len(o.sampler) != n)
        bad = tsi_error_set(TS_ERR_ARG,
                            "%s: the sampler was made for a data set of %lld samples, this one has "
                            "%lld",
                            op, (long long)tsi_sampler_dataset_len(o.sampler), (long long)n);
    if (!bad && o.sampler) n = ts_sampler_len(o.sampler); /* the positions of an epoch */
    ts_device dev = tsi_resolve_device(o.device);
    const bool to_device = o.device.type != TS_DEVICE_DEFAULT && dev.type != TS_CPU;
    if (!bad && to_device && !tsi_check_device(op, dev)) bad = ts_error();
    ts_loader *l = bad ? NULL : calloc(1, sizeof *l);
    if (!l) {
        if (!bad) tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op);
        ts_transform_free(tf);
        return NULL;
    }
    l->ds = d;
    l->transform = tf;
    l->n = n;
    l->batch_size = o.batch_size > 0 ? o.batch_size : 1;
    l->nbatches = o.drop_last ? n / l->batch_size : (n + l->batch_size - 1) / l->batch_size;
    l->shuffle = o.shuffle;
    l->sampler = o.sampler;
    l->drop_last = o.drop_last;
    l->pin_memory = o.pin_memory;
    l->to_device = to_device;
    l->device = dev;
    l->seed = o.seed;
    l->workers = o.workers;
    l->prefetch = o.prefetch > 0 ? o.prefetch : 2;
    l->cap = (int64_t)l->prefetch * (l->workers > 0 ? l->workers : 1);
    l->ring = calloc((size_t)l->cap, sizeof *l->ring);
    l->threads = calloc((size_t)(l->workers > 0 ? l->workers : 1), sizeof *l->threads);
    l->args = calloc((size_t)(l->workers > 0 ? l->workers : 1), sizeof *l->args);
    if (!l->ring || !l->threads || !l->args) {
        tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op);
        loader_destroy(l);
        return NULL;
    }
    for (int i = 0; i < l->workers; i++) l->args[i] = (tsi_loader_worker){l, i};
    tsi_loader_plan_fast(l);
    if (pthread_mutex_init(&l->mu, NULL) != 0) {
        tsi_error_set(TS_ERR_OOM, "%s: cannot create a mutex", op);
        loader_destroy(l);
        return NULL;
    }
    if (pthread_cond_init(&l->ready, NULL) != 0) {
        pthread_mutex_destroy(&l->mu);
        tsi_error_set(TS_ERR_OOM, "%s: cannot create a condition variable", op);
        loader_destroy(l);
        return NULL;
    }
    if (pthread_cond_init(&l->space, NULL) != 0) {
        pthread_cond_destroy(&l->ready);
        pthread_mutex_destroy(&l->mu);
        tsi_error_set(TS_ERR_OOM, "%s: cannot create a condition variable", op);
        loader_destroy(l);
        return NULL;
    }
    return l;
}

void ts_loader_free(ts_loader *l) {
    if (!l) return;
    stop_epoch(l);
    ts_release(l->cur_x);
    ts_release(l->cur_y);
    pthread_cond_destroy(&l->space);
    pthread_cond_destroy(&l->ready);
    pthread_mutex_destroy(&l->mu);
    loader_destroy(l);
}

int64_t ts_loader_num_batches(ts_loader *l) {
    if (!l) return tsi_error_set(TS_ERR_ARG, "loader_num_batches: loader is NULL"), -1;
    return l->nbatches;
}

int64_t ts_loader_epoch(ts_loader *l) {
    if (!l) return tsi_error_set(TS_ERR_ARG, "loader_epoch: loader is NULL"), -1;
    return l->epoch;
}

ts_status ts_loader_set_position(ts_loader *l, int64_t epoch, int64_t batch) {
    if (!l || epoch < 0 || batch < 0 || (l && batch > l->nbatches))
        return tsi_error_set(TS_ERR_ARG, "loader_set_position: %s",
                             !l ? "loader is NULL" : "epoch or batch out of range");
    stop_epoch(l);
    l->epoch = epoch;
    l->first = batch; /* the batches before it are skipped, not made */
    return TS_OK;
}

ts_status ts_loader_set_epoch(ts_loader *l, int64_t epoch) {
    if (!l || epoch < 0)
        return tsi_error_set(TS_ERR_ARG, "loader_set_epoch: %s",
                             !l ? "loader is NULL" : "epoch is negative");
    stop_epoch(l);
    l->epoch = epoch;
    l->first = 0;
    return TS_OK;
}
