/* test_dist_profiler.c — collectives in the profiler, as a world of one and under mpiexec with 2
 * and 4 ranks (a test_dist_* test): all_reduce (sync, async, DDP's unchecked form), broadcast on a
 * sim device, all_gather, reduce_scatter, barrier and a send / recv pair each record one
 * TS_PROF_COLLECTIVE event with its exact bytes, shape, device, rank and group size, from its
 * submission to where it finished (before ts_dist_test said done: an async op's wait is not the
 * op), inside the calls that made it; key averages sum the bytes; the Chrome trace carries them
 * on a "collectives" track with Kineto's record_param_comms args; nothing is recorded while the
 * profiler is off. Sizes differ per call, so a wrong byte count or a dropped event shows. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, nanosleep */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dist/dist_internal.h"
#include "json_file_util.h"
#include "tessera.h"
#include "tessera/profiler.h"
#include "ts_test.h"

static int R, W;

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* what one call should have recorded, and the host times around the call */
typedef struct expect {
    const char *name;
    const char *device; /* ts_device_str */
    const char *shape;  /* "" for none */
    int64_t bytes;
    int64_t before, after; /* the event lies in [before, after] */
    int seen;
} expect;

#define MAXE 16
static expect E[MAXE];
static int nE;

static expect *want(const char *name, ts_device d, const char *shape, int64_t bytes) {
    expect *x = &E[nE++];
    static char devs[MAXE][32];
    snprintf(devs[x - E], sizeof devs[0], "%s", ts_device_str(d));
    *x = (expect){name, devs[x - E], shape, bytes, now_ns(), 0, 0};
    return x;
}

static ts_tensor *full(int64_t n, ts_dtype dt, ts_device d, double v) {
    return ts_full(TS_SHAPE(n), v, (ts_opts){.dtype = dt, .device = d});
}

/* The profiled calls (every rank makes the same ones, in the same order). */
static void profiled_calls(ts_device sim) {
    /* all_reduce: 5 float32 */
    ts_tensor *a = full(5, TS_F32, ts_cpu(), 1);
    expect *x = want("all_reduce", ts_cpu(), "[5] float32", 20);
    CHECK_EQ(ts_dist_all_reduce(a, TS_DIST_SUM, NULL), TS_OK);
    x->after = now_ns();

    /* async all_reduce of 6 float32: its event ends where the work finished, before ts_dist_test
     * saw it done, not at the wait that comes later */
    ts_tensor *b = full(6, TS_F32, ts_cpu(), 1);
    x = want("all_reduce", ts_cpu(), "[6] float32", 24);
    ts_dist_work *w = ts_dist_all_reduce_async(b, TS_DIST_SUM, NULL);
    CHECK(w != NULL);
    while (!ts_dist_test(w)) nanosleep(&(struct timespec){0, 100000}, NULL);
    x->after = now_ns();
    nanosleep(&(struct timespec){0, 2000000}, NULL); /* the wait starts after `after` */
    CHECK_EQ(ts_dist_wait(w), TS_OK);

    /* DDP's unchecked all_reduce of 7 float32 */
    ts_tensor *c = full(7, TS_F32, ts_cpu(), 1);
    x = want("all_reduce", ts_cpu(), "[7] float32", 28);
    CHECK_EQ(ts_dist_wait(tsi_dist_all_reduce_unchecked(c, TS_DIST_SUM, NULL)), TS_OK);
    x->after = now_ns();

    /* broadcast of 3 float64 on a sim device */
    ts_tensor *d = full(3, TS_F64, sim, R);
    x = want("broadcast", sim, "[3] float64", 24);
    CHECK_EQ(ts_dist_broadcast(d, 0, NULL), TS_OK);
    x->after = now_ns();

    /* all_gather: 4 int32 per rank into 4 W; the message is the gathered tensor */
    ts_tensor *in = full(4, TS_I32, ts_cpu(), R), *out = full(4 * W, TS_I32, ts_cpu(), 0);
    static char gshape[64], sshape[64];
    snprintf(gshape, sizeof gshape, "[%d] int32", 4 * W);
    x = want("all_gather", ts_cpu(), gshape, 16 * W);
    CHECK_EQ(ts_dist_all_gather(out, in, NULL), TS_OK);
    x->after = now_ns();

    /* reduce_scatter: 2 W float64 in, 2 out; the message is the input */
    ts_tensor *rin = full(2 * W, TS_F64, ts_cpu(), 1), *rout = full(2, TS_F64, ts_cpu(), 0);
    snprintf(sshape, sizeof sshape, "[%d] float64", 2 * W);
    x = want("reduce_scatter", ts_cpu(), sshape, 16 * W);
    CHECK_EQ(ts_dist_reduce_scatter(rout, rin, TS_DIST_SUM, NULL), TS_OK);
    x->after = now_ns();

    x = want("barrier", ts_cpu(), "", 0);
    CHECK_EQ(ts_dist_barrier(), TS_OK);
    x->after = now_ns();

    /* rank 0 sends 9 float32 to rank 1 (polled with ts_dist_test: completed where it is tested) */
    if (W > 1 && R < 2) {
        ts_tensor *m = full(9, TS_F32, ts_cpu(), 5);
        x = want(R == 0 ? "send" : "recv", ts_cpu(), "[9] float32", 36);
        w = R == 0 ? ts_dist_isend(m, 1, 3, NULL) : ts_dist_irecv(m, 0, 3, NULL);
        CHECK(w != NULL);
        while (!ts_dist_test(w)) nanosleep(&(struct timespec){0, 100000}, NULL);
        x->after = now_ns();
        CHECK_EQ(ts_dist_wait(w), TS_OK);
    }
    CHECK_OK();
}

/* Each collective event matches one expected call, in order. */
static void check_events(const ts_profile *p) {
    size_t n = 0;
    const ts_profile_event *ev = ts_profile_events(p, &n);
    int k = 0, ncoll = 0;
    for (size_t i = 0; i < n; i++) {
        const ts_profile_event *e = &ev[i];
        if (e->kind != TS_PROF_COLLECTIVE) continue;
        ncoll++;
        /* the events are in start order, as the calls were made */
        if (k >= nE) break;
        expect *x = &E[k++];
        x->seen++;
        CHECK_STREQ(e->name, x->name);
        CHECK_STREQ(ts_device_str(e->device), x->device);
        CHECK_STREQ(e->shape, x->shape);
        CHECK_EQ(e->bytes, x->bytes);
        CHECK_EQ(e->rank, R);
        CHECK_EQ(e->world_size, W);
        CHECK(x->before <= e->t0_ns);
        CHECK(e->t0_ns <= e->t1_ns);
        CHECK(e->t1_ns <= x->after);
        if (e->t1_ns > x->after || e->t0_ns < x->before)
            fprintf(stderr, "rank %d: %s [%lld, %lld] outside its call [%lld, %lld]\n", R, e->name,
                    (long long)e->t0_ns, (long long)e->t1_ns, (long long)x->before,
                    (long long)x->after);
    }
    CHECK_EQ(ncoll, nE);
    for (int i = 0; i < nE; i++) CHECK_EQ(E[i].seen, 1);
}

/* key averages: one row per name, calls counted and bytes summed */
static void check_key_averages(const ts_profile *p) {
    ts_profile_stat rows[256];
    int64_t n = ts_profile_key_averages(p, false, rows, 256);
    CHECK(n > 0 && n <= 256);
    int found = 0;
    for (int64_t i = 0; i < n; i++) {
        if (rows[i].kind != TS_PROF_COLLECTIVE) continue;
        found++;
        int64_t calls = 0, bytes = 0;
        for (int j = 0; j < nE; j++)
            if (!strcmp(E[j].name, rows[i].name)) calls++, bytes += E[j].bytes;
        CHECK(calls > 0);
        CHECK_EQ(rows[i].calls, calls);
        CHECK_EQ(rows[i].bytes, bytes);
        if (!strcmp(rows[i].name, "all_reduce")) CHECK_EQ(rows[i].bytes, 20 + 24 + 28);
    }
    CHECK_EQ(found, W > 1 && R < 2 ? 6 : 5);
}

static int64_t num(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    CHECK(cJSON_IsNumber(v));
    return cJSON_IsNumber(v) ? (int64_t)v->valuedouble : -1;
}

static const char *str(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    CHECK(cJSON_IsString(v));
    return cJSON_IsString(v) ? v->valuestring : "";
}

/* the Chrome trace: each collective on its device's "collectives" track with Kineto's args */
static void check_chrome(const ts_profile *p) {
    char path[128];
    snprintf(path, sizeof path, "/tmp/ts_dist_profiler_%d_%d.json", (int)getpid(), R);
    CHECK_EQ(ts_profile_export_chrome(p, path), TS_OK);
    cJSON *root = read_json(path);
    remove(path);
    CHECK(root != NULL);
    const cJSON *evs = cJSON_GetObjectItemCaseSensitive(root, "traceEvents"), *e;
    int k = 0;
    cJSON_ArrayForEach(e, evs) {
        if (strcmp(str(e, "ph"), "X") || strcmp(str(e, "cat"), "collective")) continue;
        CHECK(k < nE);
        if (k >= nE) break;
        const expect *x = &E[k++];
        const cJSON *args = cJSON_GetObjectItemCaseSensitive(e, "args");
        CHECK_STREQ(str(e, "name"), x->name);
        CHECK_STREQ(str(args, "Collective name"), x->name);
        CHECK_EQ(num(args, "Group size"), W);
        CHECK_EQ(num(args, "Rank"), R);
        CHECK_EQ(num(args, "bytes"), x->bytes);
        int64_t size = !strcmp(x->name, "barrier") ? 1 : strstr(x->shape, "float64") ? 8 : 4;
        int64_t all = x->bytes / size;
        CHECK_EQ(num(args, "In msg nelems"), !strcmp(x->name, "all_gather") ? all / W : all);
        CHECK_EQ(num(args, "Out msg nelems"), !strcmp(x->name, "reduce_scatter") ? all / W : all);
        if (x->shape[0])
            CHECK_STREQ(str(args, "dtype"), strstr(x->shape, "float64") ? "Double"
                                            : strstr(x->shape, "int32") ? "Int"
                                                                        : "Float");
        /* its track is named "collectives" */
        int64_t pid = num(e, "pid"), tid = num(e, "tid");
        bool named = false;
        const cJSON *m;
        cJSON_ArrayForEach(m, evs) {
            if (strcmp(str(m, "ph"), "M") || strcmp(str(m, "name"), "thread_name")) continue;
            if (num(m, "pid") != pid || num(m, "tid") != tid) continue;
            named =
                !strcmp(str(cJSON_GetObjectItemCaseSensitive(m, "args"), "name"), "collectives");
        }
        CHECK(named);
    }
    CHECK_EQ(k, nE);
    cJSON_Delete(root);
}

static int collective_count(const ts_profile *p) {
    size_t n = 0;
    const ts_profile_event *ev = ts_profile_events(p, &n);
    int c = 0;
    for (size_t i = 0; i < n; i++) c += ev[i].kind == TS_PROF_COLLECTIVE;
    return c;
}

int main(void) {
    ts_status st = ts_dist_init((ts_dist_opts){0});
    if (st == TS_ERR_UNSUPPORTED && !ts_dist_is_available())
        return ts_test_skip("%s", ts_error_message()); /* a launcher, and no MPI built */
    CHECK_EQ(st, TS_OK);
    R = ts_dist_rank();
    W = ts_dist_world_size();
    if (ts_device_count(TS_SIM) == 0) ts_sim_configure(4, 0);
    ts_device sim = ts_sim(R % ts_device_count(TS_SIM));

    /* off: nothing recorded; a send / recv made before the session and completed in it is not
     * the session's */
    ts_scope_begin();
    CHECK_EQ(ts_dist_all_reduce(full(4, TS_F32, ts_cpu(), 1), TS_DIST_SUM, NULL), TS_OK);
    ts_dist_work *early = NULL;
    if (W > 1 && R < 2) {
        ts_tensor *m = full(3, TS_F32, ts_cpu(), 1);
        early = R == 0 ? ts_dist_isend(m, 1, 1, NULL) : ts_dist_irecv(m, 0, 1, NULL);
        CHECK(early != NULL);
    }
    CHECK_EQ(ts_profiler_start(NULL), TS_OK);
    if (early) CHECK_EQ(ts_dist_wait(early), TS_OK);
    CHECK_EQ(ts_profiler_stop(), TS_OK);
    ts_profile *p = ts_profiler_take();
    CHECK(p != NULL);
    CHECK_EQ(collective_count(p), 0);
    ts_profile_free(p);

    CHECK_EQ(ts_profiler_start(NULL), TS_OK);
    profiled_calls(sim);
    CHECK_EQ(ts_profiler_stop(), TS_OK);
    p = ts_profiler_take();
    CHECK(p != NULL);
    check_events(p);
    check_key_averages(p);
    check_chrome(p);
    ts_profile_free(p);

    /* after the stop: nothing more */
    CHECK_EQ(ts_dist_all_reduce(full(4, TS_F32, ts_cpu(), 1), TS_DIST_SUM, NULL), TS_OK);
    CHECK_EQ(ts_profiler_start(NULL), TS_OK);
    CHECK_EQ(ts_profiler_stop(), TS_OK);
    p = ts_profiler_take();
    CHECK_EQ(collective_count(p), 0);
    ts_profile_free(p);
    ts_scope_end();

    CHECK_OK();
    CHECK_EQ(ts_dist_finalize(), TS_OK);
    return ts_test_finish();
}
