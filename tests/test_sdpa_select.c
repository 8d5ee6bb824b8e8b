/* test_sdpa_select.c — the CPU attention's one selector (src/backend/cpu/sdpa_select.c): each row
 * of its table at its edge (the value on one side and the next on the other), so a changed
 * threshold fails here, and the rules around them: the AMX path bf16 only, without dropout, where
 * the tiles are ready, its threads taking whole batches and its backward unchunked; the flash
 * backward's chunks capped by the key blocks and never a function of the threads; the threads
 * capped by the items shared and the host's team; the ONNX import's key copy. Then the wiring:
 * the CPU backend's workspace query sets the threads the selector chose. */
#include <stdio.h>
#include <stdlib.h>

#include "backend/cpu/gemm_amx.h"
#include "backend/cpu/sdpa_select.h"
#include "core/internal.h"
#include "ts_test.h"

/* q [B, H, L, E], k [B, H, S, E], v [B, H, S, Ev] of dtype dt (shapes only: the selector reads no
 * data) */
static ts_sdpa_args args(ts_dtype dt, int64_t B, int64_t H, int64_t L, int64_t S, int64_t E,
                         int64_t Ev) {
    ts_sdpa_args a = {.scale = 1};
    const int64_t qs[4] = {B, H, L, E}, ks[4] = {B, H, S, E}, vs[4] = {B, H, S, Ev};
    ts_kview *views[3] = {&a.q, &a.k, &a.v};
    const int64_t *shapes[3] = {qs, ks, vs};
    for (int i = 0; i < 3; i++) {
        views[i]->dtype = dt, views[i]->ndim = 4;
        for (int d = 0; d < 4; d++) views[i]->shape[d] = shapes[i][d];
    }
    return a;
}

#define FLASH TSI_SDPA_PATH_FLASH
#define AMX   TSI_SDPA_PATH_AMX

static const tsi_sdpa_host two = {.threads = 2, .tiles = true};
static const tsi_sdpa_host two_no_tiles = {.threads = 2, .tiles = false};

static tsi_sdpa_choice fwd(ts_sdpa_args a, tsi_sdpa_host h) {
    return tsi_sdpa_select(&a, false, 64, h);
}
static tsi_sdpa_choice bwd(ts_sdpa_args a, int64_t blk, tsi_sdpa_host h) {
    return tsi_sdpa_select(&a, true, blk, h);
}

static void amx_row(const tsi_sdpa_limits *lim) {
    /* bf16 with the tiles ready: AMX up to 512 x 512 scores a batch, the flash kernels past it */
    CHECK_EQ(lim->amx_max_scores, 512 * 512);
    CHECK_EQ(fwd(args(TS_BF16, 2, 2, 512, 512, 64, 64), two).path, AMX);
    CHECK_EQ(fwd(args(TS_BF16, 2, 2, 1, 512 * 512, 64, 64), two).path, AMX);
    CHECK_EQ(fwd(args(TS_BF16, 2, 2, 1, 512 * 512 + 1, 64, 64), two).path, FLASH);
    CHECK_EQ(fwd(args(TS_BF16, 2, 2, 512 * 512 + 1, 1, 64, 64), two).path, FLASH);
    CHECK_EQ(bwd(args(TS_BF16, 2, 2, 1, 512 * 512, 64, 64), 64, two).path, AMX);
    CHECK_EQ(bwd(args(TS_BF16, 2, 2, 1, 512 * 512 + 1, 64, 64), 64, two).path, FLASH);
    /* bf16 only: f16 (the other half), f32 and f64 take the flash kernels */
    CHECK_EQ(fwd(args(TS_F16, 2, 2, 64, 64, 64, 64), two).path, FLASH);
    CHECK_EQ(fwd(args(TS_F32, 2, 2, 64, 64, 64, 64), two).path, FLASH);
    CHECK_EQ(fwd(args(TS_F64, 2, 2, 64, 64, 64, 64), two).path, FLASH);
    /* no dropout, and only where the tiles are ready */
    ts_sdpa_args a = args(TS_BF16, 2, 2, 64, 64, 64, 64);
    a.dropout_p = 0.1;
    CHECK_EQ(fwd(a, two).path, FLASH);
    CHECK_EQ(fwd(args(TS_BF16, 2, 2, 64, 64, 64, 64), two_no_tiles).path, FLASH);
    /* the AMX path's threads take whole batches, and its backward is not chunked */
    tsi_sdpa_choice c = bwd(args(TS_BF16, 1, 1, 512, 512, 64, 64), 64, two);
    CHECK_EQ(c.path, AMX);
    CHECK_EQ(c.threads, 1);
    CHECK_EQ(c.chunks, 1);
    c = fwd(args(TS_BF16, 1, 2, 512, 512, 64, 64), two);
    CHECK_EQ(c.threads, 2);
    CHECK_EQ(c.chunks, 1);
}

static void parallel_row(const tsi_sdpa_limits *lim) {
    /* one thread below 1e6 multiply-adds N L S (E + Ev): 693 x 481 x 3 = 999999, 1000 x 500 x 2 =
     * 1e6 (11 and 16 query blocks of 64 to share) */
    CHECK(lim->parallel_min_macs == 1e6);
    CHECK_EQ(fwd(args(TS_F32, 1, 1, 693, 481, 1, 2), two).threads, 1);
    CHECK_EQ(fwd(args(TS_F32, 1, 1, 1000, 500, 1, 1), two).threads, 2);
    /* both of E and Ev count */
    CHECK_EQ(fwd(args(TS_F32, 1, 1, 1000, 500, 2, 0), two).threads, 2);
    CHECK_EQ(fwd(args(TS_F32, 1, 1, 1000, 500, 0, 2), two).threads, 2);
    /* the batches count: 4 x (25 x 50 x 200) = 1e6, 4 x (25 x 50 x 199) below */
    CHECK_EQ(fwd(args(TS_F32, 2, 2, 25, 50, 100, 100), two).threads, 2);
    CHECK_EQ(fwd(args(TS_F32, 2, 2, 25, 50, 100, 99), two).threads, 1);
    /* the same cut on the AMX path and backward */
    CHECK_EQ(fwd(args(TS_BF16, 2, 2, 25, 50, 100, 99), two).threads, 1);
    CHECK_EQ(fwd(args(TS_BF16, 2, 2, 25, 50, 100, 100), two).threads, 2);
    CHECK_EQ(bwd(args(TS_F32, 2, 2, 25, 50, 100, 99), 64, two).threads, 1);
    CHECK_EQ(bwd(args(TS_F32, 2, 2, 25, 50, 100, 100), 64, two).threads, 2);
    /* never more threads than items: forward (batch, query block) items, here one block of 64
     * queries, then two */
    CHECK_EQ(fwd(args(TS_F32, 1, 1, 64, 4096, 64, 64), two).threads, 1);
    CHECK_EQ(fwd(args(TS_F32, 1, 1, 65, 4096, 64, 64), two).threads, 2);
    /* nor more than the host's team */
    const tsi_sdpa_host eight = {.threads = 8, .tiles = false}, one = {.threads = 1};
    CHECK_EQ(fwd(args(TS_F32, 4, 4, 512, 512, 64, 64), eight).threads, 8);
    CHECK_EQ(fwd(args(TS_F32, 4, 4, 512, 512, 64, 64), one).threads, 1);
    CHECK_EQ(fwd(args(TS_F32, 1, 3, 512, 512, 64, 64), (tsi_sdpa_host){.threads = 8, .tiles = true})
                 .threads,
             8); /* f32: flash items (24 query blocks), not the AMX path's 3 batches */
    CHECK_EQ(
        fwd(args(TS_BF16, 1, 3, 512, 512, 64, 64), (tsi_sdpa_host){.threads = 8, .tiles = true})
            .threads,
        3);
}

static void chunk_row(const tsi_sdpa_limits *lim) {
    /* the flash backward shares at least 4 (batch, key chunk) items: 1 batch in min(4, key
     * blocks) chunks, 2 batches in 2 each, 3 and more unchunked */
    CHECK_EQ(lim->backward_min_items, 4);
    CHECK_EQ(bwd(args(TS_F32, 1, 1, 256, 1024, 64, 64), 64, two).chunks, 4);
    CHECK_EQ(bwd(args(TS_F32, 1, 2, 256, 1024, 64, 64), 64, two).chunks, 2);
    CHECK_EQ(bwd(args(TS_F32, 1, 3, 256, 1024, 64, 64), 64, two).chunks, 1);
    CHECK_EQ(bwd(args(TS_F32, 2, 2, 256, 1024, 64, 64), 64, two).chunks, 1);
    CHECK_EQ(bwd(args(TS_F32, 5, 1, 256, 1024, 64, 64), 64, two).chunks, 1);
    /* capped by the key blocks of the variant's size: 129 keys are 3 blocks of 64, 5 of 32; 128
     * are 2 of 64 */
    CHECK_EQ(bwd(args(TS_F32, 1, 1, 256, 129, 64, 64), 64, two).chunks, 3);
    CHECK_EQ(bwd(args(TS_F32, 1, 1, 256, 129, 64, 64), 32, two).chunks, 4);
    CHECK_EQ(bwd(args(TS_F32, 1, 1, 256, 128, 64, 64), 64, two).chunks, 2);
    CHECK_EQ(bwd(args(TS_F32, 1, 1, 256, 64, 64, 64), 64, two).chunks, 1);
    CHECK_EQ(bwd(args(TS_F32, 1, 2, 256, 64, 64, 64), 64, two).chunks, 1);
    /* every float dtype alike, and never a function of the threads (dq's summation order) */
    const ts_dtype dts[] = {TS_F32, TS_F64, TS_F16, TS_BF16};
    for (int i = 0; i < 4; i++)
        for (int t = 1; t <= 8; t++) {
            const tsi_sdpa_host h = {.threads = t, .tiles = false};
            CHECK_EQ(bwd(args(dts[i], 1, 1, 256, 1024, 64, 64), 64, h).chunks, 4);
            CHECK_EQ(bwd(args(dts[i], 1, 1, 8, 1024, 2, 2), 64, h).chunks, 4); /* one thread */
        }
    /* forward: never chunked */
    CHECK_EQ(fwd(args(TS_F32, 1, 1, 256, 1024, 64, 64), two).chunks, 1);
    /* the backward's threads share the items: 1 batch of 1 key block is one item */
    CHECK_EQ(bwd(args(TS_F32, 1, 1, 4096, 64, 64, 64), 64, two).threads, 1);
    CHECK_EQ(bwd(args(TS_F32, 1, 1, 4096, 65, 64, 64), 64, two).threads, 2);
    CHECK_EQ(bwd(args(TS_F32, 1, 1, 4096, 1024, 64, 64), 64, (tsi_sdpa_host){.threads = 8}).threads,
             4);
}

static void keys_row(const tsi_sdpa_limits *lim) {
    /* the ONNX import copies keys whose rows lie a multiple of 4 KiB apart, at least that */
    CHECK_EQ(lim->keys_copy_row_bytes, 4096);
    CHECK(tsi_sdpa_keys_copy(256, 4096));
    CHECK(!tsi_sdpa_keys_copy(256, 4095));
    CHECK(!tsi_sdpa_keys_copy(256, 4097));
    CHECK(tsi_sdpa_keys_copy(256, 16384));
    CHECK(!tsi_sdpa_keys_copy(256, 6144));
    CHECK(!tsi_sdpa_keys_copy(256, 2048));
    CHECK(!tsi_sdpa_keys_copy(256, 0));
    /* one key: nothing to gather */
    CHECK(tsi_sdpa_keys_copy(2, 4096));
    CHECK(!tsi_sdpa_keys_copy(1, 4096));
}

/* The CPU backend's workspace query sets what the selector chose for this host: one thread below
 * the work cut, else the host's team up to the items (8 batches; 24 to 48 query blocks). */
static void wiring(void) {
    const ts_backend *be = tsi_backend_for(TS_CPU);
    const tsi_sdpa_host h = tsi_sdpa_host_now();
    CHECK(h.threads >= 1);
    CHECK_EQ(h.tiles, tsi_amx_gemm_ready());
    const ts_dtype dts[] = {TS_F32, TS_F64, TS_F16, TS_BF16};
    for (int i = 0; i < 4; i++)
        for (int backward = 0; backward < 2; backward++) {
            ts_sdpa_args small = args(dts[i], 1, 1, 8, 8, 8, 8);
            ts_sdpa_args big = args(dts[i], 2, 4, 192, 192, 64, 64);
            be->sdpa_workspace(be, 0, &small, backward);
            be->sdpa_workspace(be, 0, &big, backward);
            CHECK_EQ(small.threads, 1);
            if (h.threads <= 8)
                CHECK_EQ(big.threads, h.threads);
            else
                CHECK(big.threads >= 8);
        }
}

int main(void) {
    tsi_init_once();
    const tsi_sdpa_limits *lim = tsi_sdpa_limits_get();
    amx_row(lim);
    parallel_row(lim);
    chunk_row(lim);
    keys_row(lim);
    wiring();
    return ts_test_finish();
}
