/* test_loader_fast.c — the loader's fast path (rows filled straight from an in-memory dataset's
 * bytes, ts_to_tensor + ts_normalize run as one fused pass) gives the very batches of the general
 * path (a tensor per sample, each transform in turn): bit for bit, for IDX files and tensor
 * datasets, 1 and 3 channels, nested composes, no transform, no labels, with and without workers
 * (without, the kernel threads fill a batch's rows together);
 * transforms it cannot fuse and batches with a sample that does not fit take the general path,
 * errors included. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "data/loader_internal.h"
#include "ts_test.h"

/* ------------------------------------------------------------------ the general path, forced */
/* A dataset that forwards get to another one: it offers no raw bytes, so every sample of a loader
 * over it takes the general path. */
static int64_t fwd_len(void *ctx) { return ts_dataset_len(ctx); }
static ts_status fwd_get(void *ctx, int64_t i, ts_sample *out) {
    return ts_dataset_get(ctx, i, out);
}
static ts_dataset *forwarding(ts_dataset *inner) {
    static const ts_dataset_ops ops = {.len = fwd_len, .get = fwd_get, .free = NULL};
    return ts_dataset_new(&ops, inner);
}

/* Every batch of one epoch as bytes, x then y, appended. */
typedef struct bytes {
    unsigned char *p;
    size_t n;
    int64_t batches;
    ts_status err;
    char msg[256];
} bytes;

static void append(bytes *b, ts_tensor *t) {
    size_t n = ts_nbytes(t);
    b->p = realloc(b->p, b->n + n + 1);
    if (ts_copy_to_host(t, b->p + b->n, n) != TS_OK) memset(b->p + b->n, 0xEE, n);
    b->n += n;
}

/* the loader options of every comparison (workers and transform filled in per loader) */
static ts_loader_opts base = {.batch_size = 16, .shuffle = true, .seed = 5};

static bytes epoch(ts_dataset *d, ts_transform *tf, int workers, bool *fast) {
    bytes b = {0};
    ts_loader_opts o = base;
    o.workers = workers;
    o.transform = tf;
    ts_loader *l = ts_loader_new(d, o);
    CHECK(l != NULL);
    if (!l) return b;
    *fast = l->fast;
    ts_batch bt;
    while (ts_loader_next(l, &bt)) {
        append(&b, bt.x);
        append(&b, bt.y);
        b.batches++;
    }
    b.err = ts_error();
    snprintf(b.msg, sizeof b.msg, "%s", ts_error() ? ts_error_message() : "");
    ts_error_clear();
    ts_loader_free(l);
    return b;
}

/* make() builds the transform afresh for each loader (a loader owns its transform). */
typedef ts_transform *(*make_tf)(void);

/* One dataset and transform: the fast loader (expect_fast says whether it must be one) against
 * the forced general path, with 0 and 2 workers. */
static void compare(const char *what, ts_dataset *d, make_tf make, bool expect_fast) {
    ts_dataset *slow = forwarding(d);
    for (int workers = 0; workers <= 2; workers += 2) {
        bool fast = false, slow_fast = true;
        bytes a = epoch(d, make ? make() : NULL, workers, &fast);
        bytes b = epoch(slow, make ? make() : NULL, workers, &slow_fast);
        bool same = a.err == b.err && a.batches == b.batches && a.n == b.n &&
                    (a.n == 0 || memcmp(a.p, b.p, a.n) == 0) && strcmp(a.msg, b.msg) == 0;
        printf("%-44s workers %d: fast path %s, %lld batches, %zu bytes%s%s: %s\n", what, workers,
               fast ? "yes" : "no", (long long)a.batches, a.n, a.err ? ", error: " : "", a.msg,
               same ? "same as the general path" : "DIFFERENT");
        CHECK(same);
        CHECK(fast == expect_fast);
        CHECK(!slow_fast);
        free(a.p);
        free(b.p);
    }
    ts_dataset_free(slow);
}

/* ------------------------------------------------------------------ transforms */
static ts_transform *to_tensor(void) { return ts_to_tensor_new(); }
static ts_transform *tt_norm1(void) {
    ts_transform *t[2] = {ts_to_tensor_new(),
                          ts_normalize_new(1, (const float[]){0.2860f}, (const float[]){0.3530f})};
    return ts_compose_new(2, t);
}
static ts_transform *tt_norm3(void) {
    ts_transform *t[2] = {ts_to_tensor_new(),
                          ts_normalize3_new(0.49f, 0.48f, 0.45f, 0.25f, 0.24f, 0.26f)};
    return ts_compose_new(2, t);
}
/* compose(compose(to_tensor, normalize), normalize(3)): nested, and two normalize steps */
static ts_transform *nested(void) {
    ts_transform *in[2] = {ts_to_tensor_new(),
                           ts_normalize_new(1, (const float[]){0.5f}, (const float[]){0.5f})};
    ts_transform *t[2] = {ts_compose_new(2, in),
                          ts_normalize3_new(0.1f, -0.2f, 0.3f, 1.5f, 2.5f, 0.7f)};
    return ts_compose_new(2, t);
}
/* a per-channel normalize that does not fit 1-channel images: the general path's error */
static ts_transform *norm3_on_gray(void) {
    ts_transform *t[2] = {ts_to_tensor_new(),
                          ts_normalize3_new(0.5f, 0.5f, 0.5f, 0.2f, 0.2f, 0.2f)};
    return ts_compose_new(2, t);
}
static ts_transform *with_crop(void) {
    ts_transform *t[3] = {ts_to_tensor_new(), ts_random_crop_new(4, 1),
                          ts_normalize_new(1, (const float[]){0.2f}, (const float[]){0.3f})};
    return ts_compose_new(3, t);
}
static ts_transform *normalize_only(void) {
    return ts_normalize_new(1, (const float[]){0.2f}, (const float[]){0.3f});
}

/* ------------------------------------------------------------------ datasets */
static uint64_t rng = 88172645463325252ull;
static uint8_t next_byte(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (uint8_t)(rng >> 24);
}

enum { N = 203 }; /* 12 batches of 16 and a last one of 11 */

static ts_dataset *u8_images(int64_t h, int64_t w, int64_t ch, bool labels) {
    ts_shape s = ch ? TS_SHAPE(N, h, w, ch) : TS_SHAPE(N, h, w);
    size_t n = (size_t)(N * h * w * (ch ? ch : 1));
    uint8_t *px = malloc(n);
    for (size_t i = 0; i < n; i++) px[i] = next_byte();
    int64_t lab[N];
    for (int i = 0; i < N; i++) lab[i] = next_byte() % 10;
    ts_scope_begin();
    ts_dataset *d =
        ts_tensor_dataset_new(ts_from_data(s, TS_U8, px, (ts_opts){.dtype = TS_U8}),
                              labels ? ts_tensor_i64(TS_SHAPE(N), lab, (ts_opts){0}) : NULL);
    ts_scope_end();
    free(px);
    CHECK(d != NULL);
    return d;
}

static ts_dataset *f32_rows(void) {
    float x[N * 4];
    for (int i = 0; i < N * 4; i++) x[i] = (float)next_byte() / 7.0f;
    float y[N * 2];
    for (int i = 0; i < N * 2; i++) y[i] = (float)next_byte();
    ts_scope_begin();
    ts_dataset *d = ts_tensor_dataset_new(ts_tensor_f32(TS_SHAPE(N, 4), x, (ts_opts){0}),
                                          ts_tensor_f32(TS_SHAPE(N, 2), y, (ts_opts){0}));
    ts_scope_end();
    CHECK(d != NULL);
    return d;
}

/* An IDX pair of N images 9 x 7 in a fresh folder, read by ts_idx_dataset. */
static ts_dataset *idx_files(char *dir) {
    strcpy(dir, "/tmp/ts_loader_fast_XXXXXX");
    CHECK(mkdtemp(dir) != NULL);
    char img[300], lab[300];
    snprintf(img, sizeof img, "%s/img", dir);
    snprintf(lab, sizeof lab, "%s/lab", dir);
    enum { HH = 9, WW = 7 };
    static unsigned char ib[16 + N * HH * WW], lb[8 + N];
    const unsigned char ih[16] = {0, 0, 8, 3, 0, 0, 0, N, 0, 0, 0, HH, 0, 0, 0, WW};
    const unsigned char lh[8] = {0, 0, 8, 1, 0, 0, 0, N};
    memcpy(ib, ih, 16);
    memcpy(lb, lh, 8);
    for (int i = 0; i < N * HH * WW; i++) ib[16 + i] = next_byte();
    for (int i = 0; i < N; i++) lb[8 + i] = next_byte() % 10;
    FILE *f = fopen(img, "wb");
    CHECK(f && fwrite(ib, 1, sizeof ib, f) == sizeof ib);
    if (f) fclose(f);
    f = fopen(lab, "wb");
    CHECK(f && fwrite(lb, 1, sizeof lb, f) == sizeof lb);
    if (f) fclose(f);
    ts_dataset *d = ts_idx_dataset_new(img, lab);
    CHECK(d != NULL);
    unlink(img);
    unlink(lab);
    return d;
}

int main(void) {
    /* two kernel threads, so that batches of 16 without workers take the parallel fill (the last,
     * of 11, the serial one) even on a one-core machine */
    ts_set_num_threads(2);
    if (ts_device_count(TS_SIM) < 1) ts_sim_configure(2, 0);
    char dir[64];
    ts_dataset *idx = idx_files(dir);
    compare("IDX, to_tensor + normalize", idx, tt_norm1, true);
    compare("IDX, to_tensor", idx, to_tensor, true);
    compare("IDX, no transform", idx, NULL, true);
    compare("IDX, random crop (not fused)", idx, with_crop, false);
    compare("IDX, normalize of a uint8 image (error)", idx, normalize_only, false);
    compare("IDX, 3-channel normalize on gray (error)", idx, norm3_on_gray, false);
    /* in order, drop_last, pinned and copied to a device */
    base = (ts_loader_opts){
        .batch_size = 16, .drop_last = true, .pin_memory = true, .device = ts_sim(0), .seed = 5};
    compare("IDX, to_tensor + normalize, to sim:0", idx, tt_norm1, true);
    base = (ts_loader_opts){.batch_size = 16, .shuffle = true, .seed = 5};
    ts_dataset_free(idx);
    rmdir(dir);

    ts_dataset *rgb = u8_images(6, 5, 3, true);
    compare("u8 [6, 5, 3], to_tensor + normalize3", rgb, tt_norm3, true);
    compare("u8 [6, 5, 3], nested composes", rgb, nested, true);
    ts_dataset_free(rgb);

    ts_dataset *gray2d = u8_images(4, 9, 0, false);
    compare("u8 [4, 9] without labels, to_tensor", gray2d, to_tensor, true);
    ts_dataset_free(gray2d);

    ts_dataset *wide = u8_images(3, 3, 5, true); /* more channels than the fused pass takes */
    compare("u8 [3, 3, 5], to_tensor", wide, to_tensor, false);
    compare("u8 [3, 3, 5], no transform", wide, NULL, true);
    ts_dataset_free(wide);

    ts_dataset *rows = f32_rows();
    compare("f32 [4] with f32 [2] targets, no transform", rows, NULL, true);
    compare("f32 [4], to_tensor (a cast)", rows, to_tensor, false);
    ts_dataset_free(rows);
    return ts_test_finish();
}
