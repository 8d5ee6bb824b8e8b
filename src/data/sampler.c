/* sampler.c — PyTorch's DistributedSampler: each replica's share of an epoch's order (the loader's
 * own seeded permutation), padded or cut to a multiple of the number of replicas. */
#include <stdlib.h>

#include "data/loader_internal.h"

struct ts_sampler {
    int64_t n; /* the data set's length */
    int replicas, rank;
    bool shuffle, drop_last;
    uint64_t seed;
    int64_t epoch;
    int64_t num_samples; /* per replica */
    int64_t total;       /* num_samples * replicas */
};

ts_sampler *ts_distributed_sampler(int64_t dataset_len, ts_distributed_sampler_opts o) {
    const char *op = "distributed_sampler";
    int replicas = o.num_replicas, rank = o.rank;
    if (replicas == 0) {
        replicas = ts_dist_world_size();
        rank = ts_dist_rank();
    }
    if (dataset_len < 0)
        return tsi_error_set(TS_ERR_ARG, "%s: dataset length is %lld", op, (long long)dataset_len),
               NULL;
    if (replicas < 0)
        return tsi_error_set(TS_ERR_ARG, "%s: num_replicas is %d, must be positive", op, replicas),
               NULL;
    if (rank < 0 || rank >= replicas)
        return tsi_error_set(TS_ERR_ARG,
                             "%s: Invalid rank %d, rank should be in the interval [0, %d]", op,
                             rank, replicas - 1),
               NULL;
    ts_sampler *s = calloc(1, sizeof *s);
    if (!s) return tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op), NULL;
    *s = (ts_sampler){.n = dataset_len,
                      .replicas = replicas,
                      .rank = rank,
                      .shuffle = !o.no_shuffle,
                      .drop_last = o.drop_last,
                      .seed = o.seed};
    /* PyTorch: drop the tail so every replica gets the same count, or pad up to it */
    if (o.drop_last && dataset_len % replicas != 0)
        s->num_samples = (dataset_len - replicas + replicas - 1) / replicas;
    else
        s->num_samples = (dataset_len + replicas - 1) / replicas;
    if (s->num_samples < 0) s->num_samples = 0;
    s->total = s->num_samples * replicas;
    return s;
}

int64_t ts_sampler_len(ts_sampler *s) {
    if (!s) return tsi_error_set(TS_ERR_ARG, "sampler_len: sampler is NULL"), -1;
    return s->num_samples;
}

ts_status ts_sampler_set_epoch(ts_sampler *s, int64_t epoch) {
    if (!s) return tsi_error_set(TS_ERR_ARG, "sampler_set_epoch: sampler is NULL");
    if (epoch < 0)
        return tsi_error_set(TS_ERR_ARG, "sampler_set_epoch: epoch is %lld", (long long)epoch);
    s->epoch = epoch;
    return TS_OK;
}

int64_t tsi_sampler_dataset_len(const ts_sampler *s) { return s->n; }

ts_status ts_sampler_indices(ts_sampler *s, int64_t *out) {
    if (!s || !out)
        return tsi_error_set(TS_ERR_ARG, "sampler_indices: %s is NULL", !s ? "sampler" : "out");
    if (s->num_samples == 0) return TS_OK;
    int64_t *order = NULL;
    if (s->shuffle && !(order = tsi_loader_permutation(s->seed, s->epoch, s->n))) return ts_error();
    /* position p of the padded (or cut) list is position p % n of the epoch's order: PyTorch's
     * padding repeats the list from its start as many times as needed */
    for (int64_t i = 0; i < s->num_samples; i++) {
        int64_t p = (int64_t)s->rank + i * s->replicas;
        int64_t q = p % s->n;
        out[i] = order ? order[q] : q;
    }
    free(order);
    return TS_OK;
}

void ts_sampler_free(ts_sampler *s) { free(s); }
