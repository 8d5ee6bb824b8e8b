/* test_profiler_ops.c — ops that build their result from other ops (the sort family, the norms,
 * pad, cosine_similarity, pairwise_distance) are one op span each in the profiler's trace, with
 * the ops they run nested inside and their result's shape; reads of a device tensor's values into
 * host memory (ts_item, ts_copy_to_host) are device-to-host transfers with their bytes; a cpu
 * tensor's are not. On cpu and sim:0. */
#include <stdio.h>
#include <string.h>

#include "tessera.h"
#include "tessera/profiler.h"
#include "ts_test.h"

/* the first op event named name at depth 0 (the test runs each op at the top level) */
static const ts_profile_event *top_op(const ts_profile_event *ev, size_t n, const char *name) {
    for (size_t i = 0; i < n; i++)
        if (ev[i].kind == TS_PROF_OP && ev[i].depth == 0 && !strcmp(ev[i].name, name))
            return &ev[i];
    return NULL;
}

/* events of this thread nested inside e: later depth, within its time */
static int nested_in(const ts_profile_event *ev, size_t n, const ts_profile_event *e) {
    int k = 0;
    for (size_t i = 0; i < n; i++)
        if (&ev[i] != e && ev[i].kind == TS_PROF_OP && ev[i].thread == e->thread &&
            ev[i].depth > e->depth && ev[i].t0_ns >= e->t0_ns && ev[i].t1_ns <= e->t1_ns)
            k++;
    return k;
}

static int count_top(const ts_profile_event *ev, size_t n, const char *name) {
    int k = 0;
    for (size_t i = 0; i < n; i++)
        k += ev[i].kind == TS_PROF_OP && ev[i].depth == 0 && !strcmp(ev[i].name, name);
    return k;
}

typedef struct {
    const char *name;  /* the op's span */
    const char *shape; /* its result's, as record_shapes writes it */
    bool composite;    /* runs other recorded ops inside */
} expect;

static void run_on(ts_device dev) {
    const bool cpu = dev.type == TS_CPU;
    ts_scope_begin();
    const ts_opts o = {.dtype = TS_F32, .device = dev};
    ts_manual_seed(3);
    ts_tensor *x = ts_randn(TS_SHAPE(4, 6), o);
    ts_tensor *y = ts_randn(TS_SHAPE(4, 6), o);
    ts_tensor *img = ts_randn(TS_SHAPE(1, 2, 3, 3), o);
    CHECK_OK();
    CHECK_EQ(ts_profiler_start(&(ts_profiler_opts){.record_shapes = true}), TS_OK);
    ts_tensor *idx = NULL;
    ts_sort(x, 1, false, false, &idx);
    ts_topk(x, 2, 1, true, true, &idx);
    ts_argsort(x, 0, true, false);
    ts_median(x);
    ts_kthvalue(x, 2, 1, false, NULL);
    ts_vector_norm(x, 2, (ts_dims){.n = 1, .d = {1}}, false, TS_DTYPE_DEFAULT);
    ts_matrix_norm(x, "1", 0, 1, false, TS_DTYPE_DEFAULT);
    ts_lp_normalize(x, 2, 1, 1e-12);
    ts_pad(img, (int64_t[]){1, 1, 2, 0}, 4, TS_PAD_REFLECT, 0);
    ts_cosine_similarity(x, y, 1, 1e-8);
    ts_pairwise_distance(x, y, 2, 1e-6, false);
    CHECK_OK();
    const double v = ts_item(ts_sum(x));
    float host[24];
    CHECK_EQ(ts_copy_to_host(x, host, sizeof host), TS_OK);
    CHECK_EQ(ts_profiler_stop(), TS_OK);
    ts_profile *p = ts_profiler_take();
    CHECK(p != NULL);
    size_t n = 0;
    const ts_profile_event *ev = p ? ts_profile_events(p, &n) : NULL;

    static const expect want[] = {
        {"sort", "[4, 6] float32", true},           {"topk", "[4, 2] float32", true},
        {"argsort", "[4, 6] int64", true},          {"median", "[] float32", true},
        {"kthvalue", "[4] float32", true},          {"linalg.vector_norm", "[4] float32", true},
        {"linalg.matrix_norm", "[] float32", true}, {"normalize", "[4, 6] float32", true},
        {"pad", "[1, 2, 5, 5] float32", true},      {"cosine_similarity", "[4] float32", true},
        {"pairwise_distance", "[4] float32", true},
    };
    for (size_t i = 0; ev && i < sizeof want / sizeof *want; i++) {
        const ts_profile_event *e = top_op(ev, n, want[i].name);
        CHECK(e != NULL);
        if (!e) {
            fprintf(stderr, "  no top-level op span \"%s\"\n", want[i].name);
            continue;
        }
        CHECK_EQ(count_top(ev, n, want[i].name), 1);
        CHECK_EQ(e->device.type, dev.type);
        CHECK_STREQ(e->shape, want[i].shape);
        CHECK(e->t1_ns >= e->t0_ns);
        if (want[i].composite) CHECK(nested_in(ev, n, e) > 0);
    }
    /* the norm inside normalize / cosine_similarity / pairwise_distance is part of their span */
    if (ev) {
        const ts_profile_event *e = top_op(ev, n, "normalize");
        for (size_t i = 0; e && i < n; i++)
            if (ev[i].kind == TS_PROF_OP && !strcmp(ev[i].name, "normalize")) CHECK(&ev[i] == e);
    }

    /* transfers at the top level: the scalar of ts_item (4 bytes) and the 96 bytes of
     * ts_copy_to_host, pageable; on sim the host kernels of the sort family read their inputs
     * the same way, inside their op's span */
    int d2h = 0, inner = 0;
    int64_t bytes[2] = {0, 0};
    for (size_t i = 0; ev && i < n; i++) {
        if (ev[i].kind != TS_PROF_TRANSFER) continue;
        CHECK_EQ(ev[i].transfer, TS_XFER_D2H);
        CHECK_STREQ(ev[i].name, "Memcpy DtoH");
        CHECK_EQ(ev[i].device.type, TS_CPU);
        CHECK_EQ(ev[i].src_device.type, dev.type);
        CHECK(!ev[i].pinned);
        if (ev[i].depth > 0) {
            inner++;
            continue;
        }
        if (d2h < 2) bytes[d2h] = ev[i].bytes;
        d2h++;
    }
    CHECK_EQ(d2h, cpu ? 0 : 2);
    if (cpu) CHECK_EQ(inner, 0);
    if (!cpu) {
        CHECK(inner > 0);
        CHECK_EQ(bytes[0], 4);
        CHECK_EQ(bytes[1], 24 * 4);
    }
    ts_profile_free(p);

    /* the values are the unprofiled ones */
    CHECK_NEAR(v, ts_item(ts_sum(x)), 0);
    float again[24];
    CHECK_EQ(ts_copy_to_host(x, again, sizeof again), TS_OK);
    CHECK(memcmp(host, again, sizeof host) == 0);
    ts_scope_end();
}

/* An op that fails its checks opens no span. */
static void check_refused(void) {
    ts_scope_begin();
    ts_tensor *x = ts_randn(TS_SHAPE(3), (ts_opts){.dtype = TS_F32});
    CHECK_EQ(ts_profiler_start(&(ts_profiler_opts){0}), TS_OK);
    CHECK(ts_topk(x, 4, 0, true, true, NULL) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_pad(x, (int64_t[]){1}, 1, TS_PAD_CONSTANT, 0) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK_EQ(ts_profiler_stop(), TS_OK);
    ts_profile *p = ts_profiler_take();
    size_t n = 0;
    const ts_profile_event *ev = p ? ts_profile_events(p, &n) : NULL;
    CHECK(ev == NULL || (count_top(ev, n, "topk") == 0 && count_top(ev, n, "pad") == 0));
    ts_profile_free(p);
    ts_scope_end();
}

int main(void) {
    run_on(ts_cpu());
    run_on(ts_sim(0));
    check_refused();
    return ts_test_finish();
}
