/* test_loader.c — the data loader: order, shapes, drop_last, shuffles that cover every index once
 * and are uniform (chi-square over orders and positions),
 * the same batches bit for bit whatever the worker count, errors handed over from workers,
 * shutdown mid-epoch, device prefetch to sim:0, pinning and memory. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/philox.h"
#include "core/internal.h"
#include "stats.h"
#include "ts_test.h"

/* ------------------------------------------------------------------ a dataset of our own */
/* Sample i: x u8 [H, W, 1] with pixel p = (i * 7 + p * 3) % 256, y i64 0-dim = i. get fails with
 * TS_ERR_IO at fail_at; odd_at gives a sample of another shape (odd_kind 0), of another dtype
 * (f32, 1) or of fewer dims ([H, W], 2). */
enum { H = 6, W = 5 };
typedef struct test_ds {
    int64_t n, fail_at, odd_at;
    int odd_kind;
    atomic_int gets;
} test_ds;

static uint8_t pixel(int64_t i, int p) { return (uint8_t)((i * 7 + p * 3) % 256); }

static int64_t tds_len(void *ctx) { return ((test_ds *)ctx)->n; }

static ts_status tds_get(void *ctx, int64_t i, ts_sample *out) {
    test_ds *d = ctx;
    atomic_fetch_add(&d->gets, 1);
    if (i == d->fail_at) /* public datasets report through failing ops; the test names it */
        return tsi_error_set(TS_ERR_IO, "test dataset: cannot read sample %lld", (long long)i);
    uint8_t px[H * W];
    for (int p = 0; p < H * W; p++) px[p] = pixel(i, p);
    const bool odd = i == d->odd_at;
    int64_t h = odd && d->odd_kind == 0 ? W : H, w = odd && d->odd_kind == 0 ? H : W;
    ts_shape s = odd && d->odd_kind == 2 ? TS_SHAPE(h, w) : TS_SHAPE(h, w, 1);
    ts_dtype dt = odd && d->odd_kind == 1 ? TS_F32 : TS_U8;
    /* the loader calls get inside a scope: hand over references of our own */
    out->x = ts_retain(ts_from_data(s, TS_U8, px, (ts_opts){.dtype = dt}));
    out->y = ts_retain(ts_tensor_i64(TS_SHAPE(), &i, (ts_opts){0}));
    return TS_OK;
}

static ts_dataset *make_ds(test_ds *d, int64_t n) {
    *d = (test_ds){.n = n, .fail_at = -1, .odd_at = -1};
    static const ts_dataset_ops ops = {.len = tds_len, .get = tds_get, .free = NULL};
    return ts_dataset_new(&ops, d);
}

static int64_t live(ts_device dev) {
    ts_mem_stats s;
    ts_memory_stats(dev, &s);
    return s.live_tensors;
}

static void *host_bytes(ts_tensor *t) {
    size_t n = ts_nbytes(t);
    void *p = malloc(n ? n : 1);
    ts_scope_begin();
    if (ts_copy_to_host(ts_to(t, ts_cpu()), p, n) != TS_OK) memset(p, 0xEE, n);
    ts_scope_end();
    return p;
}

/* Every batch of one epoch, x and y concatenated as bytes (malloc'ed), with the count. */
typedef struct epoch_bytes {
    uint8_t *x;
    int64_t *y;
    size_t xn;
    int64_t yn, batches;
} epoch_bytes;

static epoch_bytes run_epoch(ts_loader *l) {
    epoch_bytes e = {0};
    ts_batch b;
    while (ts_loader_next(l, &b)) {
        size_t xb = ts_nbytes(b.x);
        int64_t yn = ts_numel(b.y);
        e.x = realloc(e.x, e.xn + xb);
        e.y = realloc(e.y, (size_t)(e.yn + yn) * sizeof(int64_t));
        uint8_t *px = host_bytes(b.x);
        int64_t *py = host_bytes(b.y);
        memcpy(e.x + e.xn, px, xb);
        memcpy(e.y + e.yn, py, (size_t)yn * sizeof(int64_t));
        free(px);
        free(py);
        e.xn += xb;
        e.yn += yn;
        e.batches++;
    }
    return e;
}

static void free_epoch(epoch_bytes *e) {
    free(e->x);
    free(e->y);
}

static bool same_epoch(const epoch_bytes *a, const epoch_bytes *b) {
    return a->batches == b->batches && a->xn == b->xn && a->yn == b->yn &&
           memcmp(a->x, b->x, a->xn) == 0 && memcmp(a->y, b->y, (size_t)a->yn * 8) == 0;
}

/* ------------------------------------------------------------------ order, shapes, drop_last */
static void test_order(void) {
    test_ds td;
    ts_dataset *d = make_ds(&td, 10);
    for (int workers = 0; workers <= 2; workers++) {
        ts_loader *l = ts_loader_new(d, (ts_loader_opts){.batch_size = 3, .workers = workers});
        CHECK_EQ(ts_loader_num_batches(l), 4);
        CHECK_EQ(ts_loader_epoch(l), 0);
        ts_batch b;
        int64_t seen = 0, nb = 0;
        int bad = 0;
        while (ts_loader_next(l, &b)) {
            int64_t bs = nb < 3 ? 3 : 1; /* the last partial batch */
            ts_shape xs = ts_shape_of(b.x), ys = ts_shape_of(b.y);
            bad += xs.ndim != 4 || xs.dims[0] != bs || xs.dims[1] != H || xs.dims[2] != W ||
                   xs.dims[3] != 1 || ts_dtype_of(b.x) != TS_U8;
            bad += ys.ndim != 1 || ys.dims[0] != bs || ts_dtype_of(b.y) != TS_I64;
            bad += b.index != nb || b.epoch != 0;
            uint8_t *px = host_bytes(b.x);
            int64_t *py = host_bytes(b.y);
            for (int64_t i = 0; i < bs; i++) {
                bad += py[i] != seen + i;
                for (int p = 0; p < H * W; p++) bad += px[i * H * W + p] != pixel(seen + i, p);
            }
            free(px);
            free(py);
            seen += bs;
            nb++;
        }
        CHECK_OK();
        CHECK_EQ(bad, 0);
        CHECK_EQ(nb, 4);
        CHECK_EQ(seen, 10);
        /* after the false the next call starts epoch 1 */
        CHECK_EQ(ts_loader_epoch(l), 1);
        CHECK(ts_loader_next(l, &b) && b.epoch == 1 && b.index == 0);
        ts_loader_free(l);
    }
    /* drop_last drops the partial batch; batch_size 0 means 1 */
    ts_loader *l = ts_loader_new(d, (ts_loader_opts){.batch_size = 3, .drop_last = true});
    CHECK_EQ(ts_loader_num_batches(l), 3);
    epoch_bytes e = run_epoch(l);
    CHECK_EQ(e.batches, 3);
    CHECK_EQ(e.yn, 9);
    free_epoch(&e);
    ts_loader_free(l);
    l = ts_loader_new(d, (ts_loader_opts){.workers = 2});
    CHECK_EQ(ts_loader_num_batches(l), 10);
    e = run_epoch(l);
    CHECK_EQ(e.batches, 10);
    free_epoch(&e);
    ts_loader_free(l);
    /* a batch larger than the dataset: one partial batch, or none with drop_last */
    l = ts_loader_new(d, (ts_loader_opts){.batch_size = 64, .drop_last = true, .workers = 1});
    CHECK_EQ(ts_loader_num_batches(l), 0);
    ts_batch b;
    CHECK(!ts_loader_next(l, &b));
    CHECK(!ts_loader_next(l, &b));
    CHECK_OK();
    CHECK_EQ(ts_loader_epoch(l), 2);
    ts_loader_free(l);
    ts_dataset_free(d);
}

/* ------------------------------------------------------------------ samples that are views */
/* A data set whose samples are rows of one tensor (views at an offset into its storage): the
 * batches hold the rows' values. */
static ts_tensor *rows_base;
static int64_t rows_len(void *ctx) { return (void)ctx, 6; }
static ts_status rows_get(void *ctx, int64_t i, ts_sample *out) {
    (void)ctx;
    out->x = ts_retain(ts_select(rows_base, 0, i));
    out->y = ts_retain(ts_tensor_i64(TS_SHAPE(), &i, (ts_opts){0}));
    return out->x && out->y ? TS_OK : ts_error();
}
static void test_view_samples(void) {
    ts_scope_begin();
    rows_base = ts_view(ts_arange(0, 24, 1, (ts_opts){.dtype = TS_F32}), TS_SHAPE(6, 4));
    static const ts_dataset_ops ops = {.len = rows_len, .get = rows_get};
    ts_dataset *d = ts_dataset_new(&ops, NULL);
    ts_loader *l = ts_loader_new(d, (ts_loader_opts){.batch_size = 3});
    ts_batch b;
    int bad = 0;
    for (int k = 0; k < 2 && ts_loader_next(l, &b); k++) {
        float v[12] = {0};
        ts_copy_to_host(b.x, v, sizeof v);
        for (int j = 0; j < 12; j++) bad += v[j] != (float)(k * 12 + j);
    }
    CHECK_EQ(bad, 0);
    CHECK_OK();
    ts_loader_free(l);
    ts_dataset_free(d);
    ts_scope_end();
}

/* ------------------------------------------------------------------ shuffling */
/* The permutation is the documented one (ARCHITECTURE.md, src/data/loader_batch.c): position i
 * takes a 64-bit key from Philox-4x32-10 under key (seed lo, seed hi), counter (i / 2 lo, hi,
 * epoch, 0xFFFFFFFF), words 2(i % 2) and 2(i % 2) + 1, then an inside-out Fisher-Yates step with
 * key % (i + 1); computed here from the Philox primitive (known-answer tested in
 * test_kern_random), so a resumed run and any other implementation can reproduce an epoch. */
static void test_shuffle_layout(void) {
    enum { N = 11 };
    const uint64_t seed = 0x123456789ULL;
    const int64_t epoch = 3;
    int64_t want[N];
    const uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
    for (int64_t i = 0; i < N; i++) {
        uint32_t ctr[4] = {(uint32_t)(i / 2), 0, (uint32_t)epoch, 0xFFFFFFFFu}, w[4];
        ts_philox4x32_10(ctr, key, w);
        uint64_t r = (uint64_t)w[2 * (i % 2) + 1] << 32 | w[2 * (i % 2)];
        int64_t j = (int64_t)(r % (uint64_t)(i + 1));
        if (j != i) want[i] = want[j];
        want[j] = i;
    }
    test_ds td;
    ts_dataset *d = make_ds(&td, N);
    ts_loader *l =
        ts_loader_new(d, (ts_loader_opts){.batch_size = N, .shuffle = true, .seed = seed});
    ts_loader_set_epoch(l, epoch);
    epoch_bytes e = run_epoch(l);
    CHECK(e.yn == N && !memcmp(e.y, want, sizeof want));
    free_epoch(&e);
    ts_loader_free(l);
    ts_dataset_free(d);
}

/* The shuffle is uniform: over all 24 orders of 4 samples, epoch after epoch (a biased shuffle,
 * such as Sattolo's that makes only single-cycle orders, fails at once), and over (position,
 * sample) for 10 samples; chi-square at 6 sigma (tests/support/stats.c). */
static void test_shuffle_uniform(void) {
    enum { N4 = 4, PERMS = 24, EPOCHS4 = 100 * PERMS, N10 = 10, EPOCHS10 = 2000 };
    int64_t count[PERMS] = {0}, pos[N10 * N10] = {0};
    test_ds td;
    ts_dataset *d = make_ds(&td, N4);
    ts_loader *l = ts_loader_new(d, (ts_loader_opts){.batch_size = N4, .shuffle = true, .seed = 9});
    int bad = 0;
    for (int e = 0; e < EPOCHS4; e++) {
        epoch_bytes eb = run_epoch(l);
        int k = eb.yn == N4 ? ts_stats_perm_index(eb.y, N4) : -1;
        if (k < 0)
            bad++;
        else
            count[k]++;
        free_epoch(&eb);
    }
    ts_loader_free(l);
    ts_dataset_free(d);
    CHECK_EQ(bad, 0);
    double chi2 = ts_stats_chi2_uniform(count, PERMS), crit = ts_stats_chi2_critical(PERMS - 1);
    if (chi2 > crit) printf("  shuffle of 4: chi-square %.1f > %.1f over 24 orders\n", chi2, crit);
    CHECK(chi2 <= crit);
    d = make_ds(&td, N10);
    l = ts_loader_new(d, (ts_loader_opts){.batch_size = 3, .shuffle = true, .seed = 10});
    for (int e = 0; e < EPOCHS10; e++) {
        epoch_bytes eb = run_epoch(l);
        for (int64_t i = 0; i < eb.yn && i < N10; i++)
            pos[i * N10 + (eb.y[i] >= 0 && eb.y[i] < N10 ? eb.y[i] : 0)]++;
        free_epoch(&eb);
    }
    ts_loader_free(l);
    ts_dataset_free(d);
    chi2 = ts_stats_chi2_uniform(pos, N10 * N10);
    crit = ts_stats_chi2_critical((N10 - 1) * (N10 - 1));
    if (chi2 > crit) printf("  shuffle of 10: chi-square %.1f > %.1f over positions\n", chi2, crit);
    CHECK(chi2 <= crit);
}

static void test_shuffle(void) {
    test_ds td;
    ts_dataset *d = make_ds(&td, 1000);
    ts_manual_seed(123);
    ts_rng_state before = ts_rng_get_state();
    ts_loader *l = ts_loader_new(
        d, (ts_loader_opts){.batch_size = 64, .shuffle = true, .seed = 42, .workers = 2});
    epoch_bytes e0 = run_epoch(l), e1 = run_epoch(l);
    /* each epoch is a permutation: every index once */
    for (int ep = 0; ep < 2; ep++) {
        epoch_bytes *e = ep ? &e1 : &e0;
        CHECK_EQ(e->yn, 1000);
        char seen[1000] = {0};
        int bad = 0, fixed = 0;
        for (int64_t i = 0; i < e->yn; i++) {
            int64_t v = e->y[i];
            bad += v < 0 || v >= 1000 || seen[v]++;
            fixed += v == i;
        }
        CHECK_EQ(bad, 0);
        CHECK(fixed < 20); /* a random permutation has about one fixed point */
        /* the x rows follow their y */
        int badx = 0;
        for (int64_t i = 0; i < e->yn; i++)
            for (int p = 0; p < H * W; p++) badx += e->x[i * H * W + p] != pixel(e->y[i], p);
        CHECK_EQ(badx, 0);
    }
    CHECK(memcmp(e0.y, e1.y, 1000 * sizeof(int64_t)) != 0); /* a new order each epoch */
    /* the global generator is untouched */
    ts_rng_state after = ts_rng_get_state();
    CHECK(after.seed == before.seed && after.offset == before.offset);
    ts_loader_free(l);
    /* the order is a function of (seed, epoch): a new loader repeats it; set_epoch resumes */
    l = ts_loader_new(d, (ts_loader_opts){.batch_size = 64, .shuffle = true, .seed = 42});
    epoch_bytes a0 = run_epoch(l);
    CHECK(same_epoch(&a0, &e0));
    CHECK_EQ(ts_loader_set_epoch(l, 1), TS_OK);
    epoch_bytes a1 = run_epoch(l);
    CHECK(same_epoch(&a1, &e1));
    ts_loader_free(l);
    l = ts_loader_new(d, (ts_loader_opts){.batch_size = 64, .shuffle = true, .seed = 43});
    epoch_bytes s0 = run_epoch(l);
    CHECK(memcmp(s0.y, e0.y, 1000 * sizeof(int64_t)) != 0);
    ts_loader_free(l);
    free_epoch(&e0);
    free_epoch(&e1);
    free_epoch(&a0);
    free_epoch(&a1);
    free_epoch(&s0);
    ts_dataset_free(d);
}

/* ------------------------------------------------------------------ determinism and values */
static ts_transform *augment(void) {
    return ts_compose_new(
        4,
        (ts_transform *[]){ts_to_tensor_new(), ts_random_crop_new(H, 2), ts_random_hflip_new(0.5),
                           ts_normalize_new(1, (const float[]){0.25f}, (const float[]){0.5f})});
}

static void test_workers_same_batches(void) {
    test_ds td;
    ts_dataset *d = make_ds(&td, 203);
    epoch_bytes ref[2] = {{0}};
    for (int workers = 0; workers <= 3; workers++) {
        for (int prefetch = 0; prefetch <= 3; prefetch += 3) {
            ts_loader *l = ts_loader_new(d, (ts_loader_opts){.batch_size = 16,
                                                             .shuffle = true,
                                                             .workers = workers,
                                                             .prefetch = prefetch,
                                                             .seed = 9,
                                                             .transform = augment()});
            for (int ep = 0; ep < 2; ep++) {
                epoch_bytes e = run_epoch(l);
                CHECK_EQ(e.batches, 13);
                if (workers == 0 && prefetch == 0) {
                    ref[ep] = e;
                    continue;
                }
                bool same = same_epoch(&e, &ref[ep]);
                CHECK(same);
                if (!same)
                    printf("  workers %d prefetch %d epoch %d differ\n", workers, prefetch, ep);
                free_epoch(&e);
            }
            ts_loader_free(l);
        }
    }
    CHECK_OK();
    free_epoch(&ref[0]);
    free_epoch(&ref[1]);
    /* without shuffling, the same samples come in the same order but augmented anew each epoch
     * (the draws are keyed by the epoch): most of the 16 images differ */
    ts_loader *la = ts_loader_new(d, (ts_loader_opts){.batch_size = 16, .transform = augment()});
    ts_batch b0, b1;
    float *x0 = ts_loader_next(la, &b0) ? host_bytes(b0.x) : NULL;
    ts_loader_set_epoch(la, 1);
    float *x1 = ts_loader_next(la, &b1) ? host_bytes(b1.x) : NULL;
    int differ = 0;
    for (int i = 0; x0 && x1 && i < 16; i++)
        differ += memcmp(x0 + i * H * W, x1 + i * H * W, H * W * sizeof(float)) != 0;
    CHECK(differ >= 8);
    free(x0);
    free(x1);
    ts_loader_free(la);

    /* to_tensor + normalize values against the formula, f32 [B, 1, H, W] */
    ts_loader *l = ts_loader_new(
        d,
        (ts_loader_opts){.batch_size = 32,
                         .workers = 2,
                         .shuffle = true,
                         .seed = 5,
                         .transform = ts_compose_new(
                             2, (ts_transform *[]){ts_to_tensor_new(),
                                                   ts_normalize_new(1, (const float[]){0.2860f},
                                                                    (const float[]){0.3530f})})});
    ts_batch b;
    int bad = 0, batches = 0;
    while (ts_loader_next(l, &b)) {
        ts_shape s = ts_shape_of(b.x);
        int64_t bs = s.dims[0];
        bad += s.ndim != 4 || s.dims[1] != 1 || s.dims[2] != H || s.dims[3] != W ||
               ts_dtype_of(b.x) != TS_F32;
        float *px = host_bytes(b.x);
        int64_t *py = host_bytes(b.y);
        for (int64_t i = 0; i < bs; i++)
            for (int p = 0; p < H * W; p++)
                bad += px[i * H * W + p] != ((float)pixel(py[i], p) / 255.0f - 0.2860f) / 0.3530f;
        free(px);
        free(py);
        batches++;
    }
    CHECK_OK();
    CHECK_EQ(bad, 0);
    CHECK_EQ(batches, 7);
    ts_loader_free(l);
    ts_dataset_free(d);
}

/* ------------------------------------------------------------------ errors */
static void test_errors(void) {
    test_ds td;
    ts_dataset *d = make_ds(&td, 100);
    td.fail_at = 37;
    for (int workers = 0; workers <= 3; workers++) {
        ts_loader *l = ts_loader_new(d, (ts_loader_opts){.batch_size = 8, .workers = workers});
        ts_batch b;
        int got = 0;
        while (ts_loader_next(l, &b)) got++;
        /* batch 4 holds sample 37: batches 0-3 arrive first, whatever the workers' timing */
        CHECK_EQ(got, 4);
        CHECK_EQ(ts_error(), TS_ERR_IO);
        const char *m = ts_error_message();
        CHECK(strstr(m, "test dataset: cannot read sample 37") != NULL);
        /* batch 4 is made by worker 4 % workers */
        char want[64];
        snprintf(want, sizeof want,
                 workers ? "loader: worker %d: test dataset" : "loader: test dataset",
                 workers ? 4 % workers : 0);
        CHECK(strncmp(m, want, strlen(want)) == 0);
        ts_error_clear();
        /* the failed epoch is over; the loader stays usable, and frees cleanly */
        CHECK_EQ(ts_loader_epoch(l), 1);
        ts_loader_free(l);
    }
    td.fail_at = -1;
    /* a transform failing in a worker: normalize with 3 channels on 1-channel images */
    ts_loader *l = ts_loader_new(
        d, (ts_loader_opts){.batch_size = 8,
                            .workers = 2,
                            .transform = ts_compose_new(
                                2, (ts_transform *[]){ts_to_tensor_new(),
                                                      ts_normalize3_new(0, 0, 0, 1, 1, 1)})});
    ts_batch b;
    CHECK(!ts_loader_next(l, &b));
    CHECK_EQ(ts_error(), TS_ERR_SHAPE);
    CHECK(strstr(ts_error_message(), "loader: worker ") == ts_error_message() &&
          strstr(ts_error_message(), "normalize: expected 3 channels") != NULL);
    ts_error_clear();
    ts_loader_free(l);
    /* samples of different shapes, dtypes or numbers of dims in one batch */
    td.odd_at = 13;
    for (td.odd_kind = 0; td.odd_kind < 3; td.odd_kind++) {
        l = ts_loader_new(d, (ts_loader_opts){.batch_size = 8, .workers = 1});
        while (ts_loader_next(l, &b)) {
        }
        CHECK_EQ(ts_error(), TS_ERR_SHAPE);
        CHECK(strstr(ts_error_message(), "sample 13") != NULL);
        ts_error_clear();
        ts_loader_free(l);
    }
    td.odd_at = -1, td.odd_kind = 0;
    /* bad options: errors, and the transform is not leaked */
    CHECK(ts_loader_new(NULL, (ts_loader_opts){.transform = ts_to_tensor_new()}) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_loader_new(d, (ts_loader_opts){.workers = -1, .transform = ts_to_tensor_new()}) ==
          NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_loader_new(d, (ts_loader_opts){.batch_size = -2}) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_loader_new(d, (ts_loader_opts){.device = ts_sim(9)}) == NULL);
    CHECK_ERR(TS_ERR_DEVICE);
    CHECK(!ts_loader_next(NULL, &b));
    CHECK_ERR(TS_ERR_ARG);
    CHECK_EQ(ts_loader_num_batches(NULL), -1);
    CHECK_ERR(TS_ERR_ARG);
    l = ts_loader_new(d, (ts_loader_opts){0});
    CHECK_EQ(ts_loader_set_epoch(l, -1), TS_ERR_ARG);
    CHECK_ERR_HAS(TS_ERR_ARG, "loader_set_epoch: epoch is negative");
    CHECK_EQ(ts_loader_set_epoch(NULL, 1), TS_ERR_ARG);
    CHECK_ERR_HAS(TS_ERR_ARG, "loader_set_epoch: loader is NULL");
    CHECK_EQ(ts_loader_set_position(l, 0, ts_loader_num_batches(l) + 1), TS_ERR_ARG);
    CHECK_ERR_HAS(TS_ERR_ARG, "loader_set_position: epoch or batch out of range");
    CHECK_EQ(ts_loader_set_position(l, -1, 0), TS_ERR_ARG);
    CHECK_ERR_HAS(TS_ERR_ARG, "loader_set_position: epoch or batch out of range");
    ts_loader_free(l);
    ts_loader_free(NULL);
    ts_dataset_free(d);
}

/* ------------------------------------------------------------------ shutdown mid-epoch */
static void test_shutdown(void) {
    test_ds td;
    ts_dataset *d = make_ds(&td, 300);
    /* workers blocked on a full ring while the loader goes away, many times over */
    for (int it = 0; it < 150; it++) {
        ts_loader *l = ts_loader_new(d, (ts_loader_opts){.batch_size = 4,
                                                         .workers = 1 + it % 3,
                                                         .prefetch = 1 + it % 2,
                                                         .shuffle = it % 2,
                                                         .transform = augment()});
        ts_batch b;
        for (int k = 0; k < it % 5; k++) CHECK(ts_loader_next(l, &b));
        ts_loader_free(l);
    }
    /* set_position into the first epoch: the rest of epoch 0 exactly, from batch 3 */
    {
        ts_loader_opts o0 = {.batch_size = 16, .workers = 2, .shuffle = true, .seed = 6};
        ts_loader *full = ts_loader_new(d, o0), *part = ts_loader_new(d, o0);
        epoch_bytes all = run_epoch(full);
        CHECK_EQ(ts_loader_set_position(part, 0, 3), TS_OK);
        epoch_bytes rest = run_epoch(part);
        CHECK(rest.yn == all.yn - 48 && rest.batches == all.batches - 3);
        CHECK(rest.yn > 0 && !memcmp(rest.y, all.y + 48, (size_t)rest.yn * sizeof(int64_t)));
        free_epoch(&all);
        free_epoch(&rest);
        ts_loader_free(full);
        ts_loader_free(part);
    }
    /* set_epoch mid-epoch stops the workers and resumes at the given epoch, batch 0 */
    ts_loader_opts o = {.batch_size = 32, .workers = 2, .shuffle = true, .seed = 4};
    ts_loader *l = ts_loader_new(d, o);
    ts_batch b;
    CHECK(ts_loader_next(l, &b) && ts_loader_next(l, &b));
    ts_tensor *kept = ts_retain(b.x); /* a batch kept past the loader's turn */
    CHECK_EQ(ts_loader_set_epoch(l, 5), TS_OK);
    CHECK_EQ(ts_loader_epoch(l), 5);
    epoch_bytes e5 = run_epoch(l);
    ts_loader_free(l);
    o.workers = 0;
    l = ts_loader_new(d, o);
    ts_loader_set_epoch(l, 5);
    epoch_bytes r5 = run_epoch(l);
    CHECK(same_epoch(&e5, &r5));
    CHECK_EQ(ts_loader_epoch(l), 6);
    ts_loader_free(l);
    CHECK_EQ(ts_numel(kept), 32 * H * W);
    ts_release(kept);
    free_epoch(&e5);
    free_epoch(&r5);
    CHECK_OK();
    ts_dataset_free(d);
}

/* ------------------------------------------------------------------ devices, pinning, memory */
static void test_device_and_memory(void) {
    int64_t cpu0 = live(ts_cpu()), sim0 = live(ts_sim(0));
    test_ds td;
    ts_dataset *d = make_ds(&td, 90);
    ts_loader_opts o = {
        .batch_size = 16, .workers = 2, .shuffle = true, .seed = 8, .transform = augment()};
    ts_loader *lc = ts_loader_new(d, o);
    o.transform = augment();
    o.device = ts_sim(0);
    ts_loader *ls = ts_loader_new(d, o);
    ts_batch b;
    int on_sim = 0, n = 0;
    while (ts_loader_next(ls, &b)) {
        on_sim += ts_device_equal(ts_device_of(b.x), ts_sim(0)) &&
                  ts_device_equal(ts_device_of(b.y), ts_sim(0));
        n++;
    }
    CHECK_EQ(on_sim, 6);
    CHECK_EQ(n, 6);
    ts_loader_set_epoch(ls, 0);
    epoch_bytes es = run_epoch(ls), ec = run_epoch(lc);
    CHECK(same_epoch(&es, &ec));
    free_epoch(&es);
    free_epoch(&ec);
    ts_loader_free(ls);
    ts_loader_free(lc);
    /* pin_memory: cpu batches with the pinned flag; without it, plain */
    ts_loader *lp =
        ts_loader_new(d, (ts_loader_opts){.batch_size = 16, .pin_memory = true, .workers = 1});
    CHECK(ts_loader_next(lp, &b) && ts_is_pinned(b.x) && ts_is_pinned(b.y));
    ts_loader_free(lp);
    lp = ts_loader_new(d, (ts_loader_opts){.batch_size = 16});
    CHECK(ts_loader_next(lp, &b) && !ts_is_pinned(b.x));
    ts_loader_free(lp);
    /* loaders used inside the caller's scope leave nothing in it */
    ts_scope_begin();
    lp = ts_loader_new(d, (ts_loader_opts){.batch_size = 8, .transform = augment()});
    epoch_bytes e = run_epoch(lp);
    free_epoch(&e);
    ts_loader_free(lp);
    ts_scope_end();
    ts_dataset_free(d);
    CHECK_OK();
    CHECK_EQ(live(ts_cpu()), cpu0);
    CHECK_EQ(live(ts_sim(0)), sim0);
}

/* The tensor dataset of the other helper, when it is there: Fashion-MNIST-shaped rows. */
static void test_tensor_dataset(void) {
    enum { N = 130 };
    uint8_t *px = malloc(N * 28 * 28);
    int64_t lab[N];
    for (int i = 0; i < N * 28 * 28; i++) px[i] = (uint8_t)(i * 13 % 251);
    for (int i = 0; i < N; i++) lab[i] = i % 10;
    ts_tensor *x = ts_from_data(TS_SHAPE(N, 28, 28, 1), TS_U8, px, (ts_opts){.dtype = TS_U8});
    ts_tensor *y = ts_tensor_i64(TS_SHAPE(N), lab, (ts_opts){0});
    ts_dataset *d = ts_tensor_dataset_new(x, y);
    ts_loader *l = ts_loader_new(
        d, (ts_loader_opts){.batch_size = 64, .workers = 2, .transform = ts_to_tensor_new()});
    ts_batch b;
    int bad = 0, nb = 0;
    while (ts_loader_next(l, &b)) {
        int64_t bs = ts_size(b.x, 0);
        float *v = host_bytes(b.x);
        int64_t *yy = host_bytes(b.y);
        for (int64_t i = 0; i < bs; i++) {
            int64_t s = nb * 64 + i;
            bad += yy[i] != s % 10;
            for (int p = 0; p < 784; p += 97)
                bad += v[i * 784 + p] != (float)px[s * 784 + p] / 255.0f;
        }
        free(v);
        free(yy);
        nb++;
    }
    CHECK_OK();
    CHECK_EQ(bad, 0);
    CHECK_EQ(nb, 3);
    ts_loader_free(l);
    ts_dataset_free(d);
    ts_release(x);
    ts_release(y);
    free(px);
}

int main(void) {
    int64_t cpu0 = live(ts_cpu());
    test_order();
    test_shuffle();
    test_shuffle_uniform();
    test_shuffle_layout();
    test_view_samples();
    test_workers_same_batches();
    test_errors();
    test_shutdown();
    test_device_and_memory();
    test_tensor_dataset();
    CHECK_OK();
    CHECK_EQ(live(ts_cpu()), cpu0);
    return ts_test_finish();
}
