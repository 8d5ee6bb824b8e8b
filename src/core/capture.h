/* capture.h — the core's side of captured steps (capture.c, capture_record.c): the thread's
 * capture, the recording backend that stands in for a device's backend while it lasts, and the
 * graph's hold on the memory its kernels use. */
#ifndef TS_CORE_CAPTURE_H
#define TS_CORE_CAPTURE_H

#include "backend/alloc.h"
#include "core/internal.h" /* tsi_capture_graph, tsi_capture_redirect: tsi_be reads them */

/* A graph's memory: every block allocated on its device during the capture, and every block
 * released there meanwhile, is kept from the allocator while the graph lives (a replay writes and
 * reads them). Counted: the graph and each storage allocated during the capture hold a
 * reference; a storage released after ts_graph_free gives its block back itself. */
typedef struct tsi_capture_pool tsi_capture_pool;

/* The recording stand-in for a backend (built once per backend, never freed). */
const ts_backend *tsi_capture_backend_of(const ts_backend *real);
/* Appends one recorded call: run(real, index, args) at each replay; args is malloc'd and owned
 * by the graph from here on (freed with it; NULL args: nothing to free). False + TS_ERR_OOM when
 * the list cannot grow (args freed), which breaks the capture. */
typedef void (*tsi_replay_fn)(const ts_backend *real, int index, const void *args);
bool tsi_capture_append(tsi_replay_fn run, int index, void *args);
/* Breaks the capture: TS_ERR_STATE "<op>: <what> while capturing on <device>; ..." */
void tsi_capture_refuse(const char *op, const char *what);
/* Whether this thread captures on dev (and so refuses host reads of it) */
bool tsi_capturing_on(ts_device dev);

/* Work that must happen now and once, not at each replay (a capturable optimizer making its
 * device scalars on its first captured step): suspends this thread's capture (returns it; NULL
 * when none) until tsi_capture_resume. */
ts_graph *tsi_capture_pause(void);
void tsi_capture_resume(ts_graph *g);

/* Random numbers (ts_rng via tsi_rng_reserve_on): while a thread captures on a device, the draws
 * made there take offsets relative to the graph's own stream, not the generator's; each replay
 * reserves the whole span from the generator and the recorded calls draw at its base + their
 * offset, so replay k draws what eager step k would. tsi_capture_rng_reserve: true with the
 * relative offset when this thread captures on dev. tsi_capture_rng_at: the seed and absolute
 * offset of relative offset rel during the current replay. */
bool tsi_capture_rng_reserve(ts_device dev, uint64_t n, uint64_t *offset);
void tsi_capture_rng_at(uint64_t rel, uint64_t *seed, uint64_t *offset);

/* The storage side (tensor.c). tsi_capture_pool_alloc: a storage of nbytes made on dev while this
 * thread captures there takes its block through the graph's pool — a block released earlier in
 * the same capture when one fits (best fit, at most twice nbytes), else a new one from a, noted
 * in the pool (slot) — and holds a reference to the pool; *pool NULL when not capturing on dev
 * (the caller allocates as usual). False + TS_ERR_OOM when
 * memory runs out, naming op. tsi_capture_pool_take: a block released with a pool and slot (the
 * storage's), or released on the capture's device while capturing (slot -1), goes to the pool,
 * which keeps it while the graph lives (true: taken; false: the caller gives it back to the
 * allocator). */
bool tsi_capture_pool_alloc(const char *op, ts_device dev, ts_allocator *a, size_t nbytes,
                            tsi_capture_pool **pool, int64_t *slot, ts_block **block);
bool tsi_capture_pool_take(tsi_capture_pool *pool, int64_t slot, ts_device dev, ts_allocator *a,
                           ts_block *b);
/* A block of nbytes on the capture's device that the graph holds until it is freed, for values
 * copied in from the host at capture (each replay copies them from there again, device to
 * device, so a device graph needs no host memory); NULL + TS_ERR_OOM. */
void *tsi_capture_const(size_t nbytes);
/* allocations of g's capture served by blocks released earlier in it (tests, docs) */
size_t tsi_capture_pool_reused(const ts_graph *g);

#endif /* TS_CORE_CAPTURE_H */
