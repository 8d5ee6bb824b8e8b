/* loader_internal.h — the data loader's state, shared by its queue (loader.c) and its batch
 * builder (loader_batch.c); not public. */
#ifndef TS_DATA_LOADER_INTERNAL_H
#define TS_DATA_LOADER_INTERNAL_H

#include <pthread.h>

#include "core/internal.h"
#include "data/data_internal.h"

/* One ready batch in the ring; slot k % cap holds batch k while next <= k < next + cap. */
typedef struct tsi_loader_slot {
    ts_tensor *x, *y;
    int64_t k;
    bool full;
} tsi_loader_slot;

typedef struct tsi_loader_worker {
    ts_loader *l;
    int id;
} tsi_loader_worker;

#define TSI_LOADER_MSG_LEN 1024

struct ts_loader {
    /* configuration, fixed after ts_loader_new */
    ts_dataset *ds;
    ts_transform *transform;
    int64_t n, batch_size, nbatches;
    bool shuffle, drop_last, pin_memory, to_device;
    ts_device device; /* resolved; meaningful when to_device */
    uint64_t seed;
    int workers, prefetch;
    /* the fast path (loader_batch.c): rows filled from the dataset's bytes, no tensor per sample,
     * for batches whose samples are all laid out as fast_raw (the dataset's first sample) */
    bool fast;
    tsi_raw_sample fast_raw;
    bool fast_plan; /* the transform as a tsi_u8_plan; false: no transform, bytes copied */
    tsi_u8_plan plan;
    ts_dtype fast_xdt; /* what x of such a sample becomes */
    ts_shape fast_xs;

    /* epoch state, owned by the calling thread */
    int64_t epoch, next; /* next: the batch ts_loader_next delivers next */
    bool running;        /* the epoch has started (order made, workers launched) */
    int64_t *order;      /* dataset index of each position this epoch; NULL: identity */
    ts_sampler *sampler; /* not owned: the positions of an epoch come from it */
    ts_tensor *cur_x, *cur_y;

    /* workers and the ring of ready batches; everything below is guarded by mu */
    pthread_t *threads;
    tsi_loader_worker *args;
    int started; /* threads to join */
    pthread_mutex_t mu;
    pthread_cond_t ready, space; /* a batch arrived; next moved on (or stop) */
    tsi_loader_slot *ring;
    int64_t cap;
    int64_t next_shared; /* copy of next the workers read under mu */
    int64_t first;       /* the epoch's first batch: 0, or a resumed position */
    bool stop;
    ts_status err; /* a worker's error: the lowest batch number that failed wins */
    int64_t err_batch;
    int err_worker;
    char err_msg[TSI_LOADER_MSG_LEN];
};

/* Builds batch k of epoch `epoch` on the calling thread: two references the caller holds (on the
 * loader's device when it has one), or an error status with the thread's error set. */
ts_status tsi_loader_build(ts_loader *l, int64_t epoch, int64_t k, ts_tensor **x, ts_tensor **y);
/* Sets up the fast path when the dataset offers raw samples and the transform is none or a byte
 * table (never fails: without it every sample takes the general path). */
void tsi_loader_plan_fast(ts_loader *l);
/* The order of the n samples in an epoch: a permutation from Philox keyed by (seed, epoch).
 * Returns malloc'ed memory, or NULL with TS_ERR_OOM set. */
int64_t *tsi_loader_permutation(uint64_t seed, int64_t epoch, int64_t n);
/* The length of the data set a sampler was made for (sampler.c). */
int64_t tsi_sampler_dataset_len(const ts_sampler *s);

#endif /* TS_DATA_LOADER_INTERNAL_H */
