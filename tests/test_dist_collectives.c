/* test_dist_collectives.c — the process group's collectives (runs as a world of 1, 2 and 4). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist/dist_internal.h"
#include "ts_test.h"

static int R, W;

static void smoke(void) {
    float v[5];
    for (int i = 0; i < 5; i++) v[i] = (float)(R + i);
    ts_tensor *t = ts_tensor_f32(TS_SHAPE(5), v, (ts_opts){0});
    CHECK(ts_dist_all_reduce(t, TS_DIST_SUM, NULL) == TS_OK);
    float out[5];
    ts_copy_to_host(t, out, sizeof out);
    for (int i = 0; i < 5; i++) CHECK_EQ(out[i], W * (W - 1) / 2 + W * i);
    ts_dist_work *w = ts_dist_all_reduce_async(t, TS_DIST_MAX, NULL);
    CHECK(ts_dist_wait(w) == TS_OK);
    CHECK(ts_dist_broadcast(t, W - 1, NULL) == TS_OK);
    w = tsi_dist_all_reduce_unchecked(t, TS_DIST_AVG, NULL);
    CHECK(ts_dist_wait(w) == TS_OK);
    CHECK(tsi_dist_broadcast_unchecked(t, 0, NULL) == TS_OK);
    int me = R * 10 + 1, all[8] = {0};
    CHECK(tsi_dist_all_gather_bytes(&me, sizeof me, all, NULL) == TS_OK);
    for (int r = 0; r < W; r++) CHECK_EQ(all[r], r * 10 + 1);
    ts_release(t);
    CHECK_OK();
}

int main(void) {
    CHECK(ts_dist_init((ts_dist_opts){0}) == TS_OK);
    R = ts_dist_rank();
    W = ts_dist_world_size();
    if (R == 0) printf("%s\n", ts_dist_describe());
    smoke();
    CHECK(ts_dist_finalize() == TS_OK);
    return ts_test_finish();
}
