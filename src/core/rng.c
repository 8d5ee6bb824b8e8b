/* rng.c — the global Philox generator state: one seed and a counter offset shared by all devices,
 * so a seed gives the same numbers wherever they are drawn. A thread may instead draw from a
 * stream of its own (a data-parallel replica: tsi_rng_stream_begin), so that what it draws does
 * not depend on the order in which threads reach the generator, or a thread that trains a model of
 * its own (ts_rng_thread_begin): the seed functions then act on that stream. */
#include <pthread.h>

#include "core/capture.h"
#include "core/internal.h"

#define TSI_DEFAULT_SEED 67280421310721ULL /* PyTorch's default_rng_seed_val */

static pthread_mutex_t rng_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t rng_seed = TSI_DEFAULT_SEED, rng_offset;

/* The calling thread's own stream, when it has one. */
static _Thread_local tsi_rng_stream thread_stream;

void ts_manual_seed(uint64_t seed) {
    if (thread_stream.on) {
        thread_stream.seed = seed;
        thread_stream.offset = 0;
        return;
    }
    pthread_mutex_lock(&rng_lock);
    rng_seed = seed;
    rng_offset = 0;
    pthread_mutex_unlock(&rng_lock);
}

uint64_t ts_initial_seed(void) {
    if (thread_stream.on) return thread_stream.seed;
    pthread_mutex_lock(&rng_lock);
    uint64_t s = rng_seed;
    pthread_mutex_unlock(&rng_lock);
    return s;
}

ts_rng_state ts_rng_get_state(void) {
    if (thread_stream.on) return (ts_rng_state){thread_stream.seed, thread_stream.offset};
    pthread_mutex_lock(&rng_lock);
    ts_rng_state s = {rng_seed, rng_offset};
    pthread_mutex_unlock(&rng_lock);
    return s;
}

void ts_rng_set_state(ts_rng_state s) {
    if (thread_stream.on) {
        thread_stream.seed = s.seed;
        thread_stream.offset = (s.offset + 3) & ~(uint64_t)3;
        return;
    }
    pthread_mutex_lock(&rng_lock);
    rng_seed = s.seed;
    rng_offset = (s.offset + 3) & ~(uint64_t)3;
    pthread_mutex_unlock(&rng_lock);
}

void ts_rng_thread_begin(uint64_t seed) {
    thread_stream = (tsi_rng_stream){.on = true, .seed = seed};
}

void ts_rng_thread_end(void) { thread_stream = (tsi_rng_stream){0}; }

void ts_rng_thread_swap(bool *on, ts_rng_state *s) {
    const tsi_rng_stream prev = thread_stream;
    thread_stream = *on ? (tsi_rng_stream){.on = true,
                                           .seed = s->seed,
                                           .offset = (s->offset + 3) & ~(uint64_t)3}
                        : (tsi_rng_stream){0};
    *on = prev.on;
    *s = (ts_rng_state){prev.seed, prev.offset};
}

void tsi_rng_reserve(uint64_t n, uint64_t *seed, uint64_t *offset) {
    if (thread_stream.on) {
        *seed = thread_stream.seed;
        *offset = thread_stream.offset;
        thread_stream.offset += (n + 3) & ~(uint64_t)3;
        return;
    }
    pthread_mutex_lock(&rng_lock);
    *seed = rng_seed;
    *offset = rng_offset;
    rng_offset += (n + 3) & ~(uint64_t)3;
    pthread_mutex_unlock(&rng_lock);
}

void tsi_rng_reserve_on(ts_device dev, uint64_t n, uint64_t *seed, uint64_t *offset) {
    if (tsi_capture_rng_reserve(dev, n, offset)) {
        *seed = 0; /* the replay's */
        return;
    }
    tsi_rng_reserve(n, seed, offset);
}

tsi_rng_stream tsi_rng_stream_begin(uint64_t seed, uint64_t offset) {
    const tsi_rng_stream prev = thread_stream;
    thread_stream =
        (tsi_rng_stream){.on = true, .seed = seed, .offset = (offset + 3) & ~(uint64_t)3};
    return prev;
}

void tsi_rng_stream_end(tsi_rng_stream prev) { thread_stream = prev; }
