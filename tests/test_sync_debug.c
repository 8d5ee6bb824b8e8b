/* test_sync_debug.c — the sync debug mode on sim:0: each host-synchronizing op (item,
 * copy_to_host, to(cpu), nonzero, masked_select, unique) is reported under its own name once per
 * call site in warn mode, fails naming itself in error mode, ops that never sync stay quiet, and
 * cpu tensors never report. Events are captured through the handler hook. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "tessera.h"
#include "tessera/sync_debug.h"
#include "ts_test.h"

#define MAX_EV 64
static ts_sync_event evs[MAX_EV];
static int nev;

static void capture(void *ctx, const ts_sync_event *ev) {
    (void)ctx;
    if (nev < MAX_EV) evs[nev] = *ev;
    nev++;
}

/* Every event since the last reset named op, on sim:0, from one site; returns the first count. */
static int check_events(const char *op) {
    int firsts = 0;
    for (int i = 0; i < nev && i < MAX_EV; i++) {
        CHECK_STREQ(evs[i].op, op);
        CHECK(evs[i].device.type == TS_SIM && evs[i].device.index == 0);
        CHECK(evs[i].site != NULL && evs[i].site == evs[0].site);
        firsts += evs[i].first;
    }
    return firsts;
}

static ts_tensor *sim_vec(void) {
    static const float v[6] = {0, 2, 0, 3, 3, 1};
    return ts_from_data(TS_SHAPE(6), TS_F32, v, (ts_opts){.device = ts_sim(0)});
}

/* Runs one synchronizing op on t (op: which); false when it failed. */
static bool run_op(const char *which, ts_tensor *t) {
    if (!strcmp(which, "item")) return !isnan(ts_item(ts_sum(t)));
    if (!strcmp(which, "copy_to_host")) {
        float h[6];
        return ts_copy_to_host(t, h, sizeof h) == TS_OK;
    }
    if (!strcmp(which, "to")) return ts_to(t, ts_cpu()) != NULL;
    if (!strcmp(which, "nonzero")) return ts_nonzero(t) != NULL;
    if (!strcmp(which, "masked_select")) return ts_masked_select(t, ts_gt_scalar(t, 1.0)) != NULL;
    if (!strcmp(which, "unique")) return ts_unique(t, true, false, 0, NULL, NULL) != NULL;
    return false;
}

static const char *const ops[] = {"item",    "copy_to_host",  "to",
                                  "nonzero", "masked_select", "unique"};
#define NOPS (int)(sizeof ops / sizeof *ops)

static void test_warn(void) {
    ts_sync_debug_reset();
    CHECK_OK();
    CHECK(ts_set_sync_debug_mode(TS_SYNC_DEBUG_WARN) == TS_OK);
    CHECK(ts_get_sync_debug_mode() == TS_SYNC_DEBUG_WARN);
    ts_scope_begin();
    ts_tensor *t = sim_vec();
    ts_tensor *mask = ts_gt_scalar(t, 1.0);
    for (int k = 0; k < NOPS; k++) {
        nev = 0;
        /* one call site in run_op, three calls: one first report, the later ones repeats */
        for (int r = 0; r < 3; r++) CHECK(run_op(ops[k], t));
        CHECK_OK();
        CHECK(nev >= 3);
        int firsts = check_events(ops[k]);
        if (firsts != 1) printf("%s: %d first reports (%d events)\n", ops[k], firsts, nev);
        CHECK_EQ(firsts, 1);
        for (int i = 0; i < nev && i < MAX_EV; i++) CHECK(!evs[i].error);
    }
    /* another call site of item is new */
    nev = 0;
    CHECK(!isnan(ts_item(ts_sum(t))));
    CHECK_EQ(nev, 1);
    CHECK(nev == 1 && evs[0].first && !strcmp(evs[0].op, "item"));
    (void)mask;
    ts_scope_end();
}

/* Work that never waits for the device: quiet. */
static void test_quiet(void) {
    ts_sync_debug_reset();
    ts_set_sync_debug_mode(TS_SYNC_DEBUG_ERROR); /* any report would also fail the op */
    nev = 0;
    ts_scope_begin();
    ts_tensor *x = ts_ones(TS_SHAPE(4, 4), (ts_opts){.device = ts_sim(0)});
    ts_tensor *h = ts_ones(TS_SHAPE(4, 4), (ts_opts){0});
    for (int i = 0; i < 20; i++) {
        x = ts_relu(ts_add(ts_matmul(x, x), ts_to(h, ts_sim(0)))); /* h2d is no wait */
        x = ts_div_scalar(x, 100.0);
        ts_tensor *s = ts_sum(x);
        CHECK(s != NULL);
    }
    CHECK_OK();
    CHECK_EQ(nev, 0);
    /* cpu tensors never sync */
    ts_tensor *c = ts_ones(TS_SHAPE(3), (ts_opts){0});
    float buf[3];
    CHECK(!isnan(ts_item(ts_sum(c))));
    CHECK(ts_copy_to_host(c, buf, sizeof buf) == TS_OK);
    CHECK(ts_nonzero(c) != NULL && ts_to(c, ts_cpu()) != NULL);
    CHECK(ts_unique(c, true, false, 0, NULL, NULL) != NULL);
    CHECK_OK();
    CHECK_EQ(nev, 0);
    ts_scope_end();
}

static void test_error(void) {
    ts_sync_debug_reset();
    CHECK(ts_set_sync_debug_mode(TS_SYNC_DEBUG_ERROR) == TS_OK);
    ts_scope_begin();
    ts_tensor *t = sim_vec();
    for (int k = 0; k < NOPS; k++) {
        nev = 0;
        CHECK(!run_op(ops[k], t));
        char want[64];
        snprintf(want, sizeof want, "%s: called a synchronizing operation on sim:0", ops[k]);
        CHECK_ERR_HAS(TS_ERR_STATE, want);
        CHECK(nev == 1 && evs[0].error && !strcmp(evs[0].op, ops[k]));
    }
    ts_scope_end();
    CHECK(ts_set_sync_debug_mode((ts_sync_debug)7) == TS_ERR_ARG);
    ts_error_clear();
    CHECK(ts_get_sync_debug_mode() == TS_SYNC_DEBUG_ERROR);
}

static void test_off(void) {
    ts_set_sync_debug_mode(TS_SYNC_DEBUG_OFF);
    nev = 0;
    ts_scope_begin();
    ts_tensor *t = sim_vec();
    for (int k = 0; k < NOPS; k++) CHECK(run_op(ops[k], t));
    ts_scope_end();
    CHECK_OK();
    CHECK_EQ(nev, 0);
}

int main(void) {
    if (ts_device_count(TS_SIM) < 1) return ts_test_skip("needs TS_SIM_DEVICES >= 1");
    CHECK(ts_get_sync_debug_mode() == TS_SYNC_DEBUG_OFF);
    ts_set_sync_debug_handler(capture, NULL);
    test_warn();
    test_quiet();
    test_error();
    test_off();
    ts_set_sync_debug_handler(NULL, NULL);
    return ts_test_finish();
}
