/* test_profiler_inputs.c — record_shapes: each op's input dims and dtypes (PyTorch's "Input Dims"
 * / "Input type"): the ops of a small conv + linear step on cpu and sim:0 carry their inputs in
 * the order they take them, the Chrome trace carries them as JSON arrays, key averages group by
 * them; a failed op's inputs do not leak into the next call; a long list ends with "..."; without
 * record_shapes nothing is recorded. */
#include <cjson/cJSON.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tessera.h"
#include "tessera/profiler.h"
#include "tessera/profiler_inputs.h"
#include "ts_test.h"

/* the input dims of the nth (0-based) op event called name, NULL when there is none */
static const char *dims_of(const ts_profile *p, const char *name, int nth, const char **types) {
    size_t n = 0;
    const ts_profile_event *ev = ts_profile_events(p, &n);
    for (size_t i = 0; i < n; i++) {
        if (ev[i].kind != TS_PROF_OP || strcmp(ev[i].name, name) || nth-- > 0) continue;
        if (types) *types = ts_profile_event_input_types(p, i);
        return ts_profile_event_input_dims(p, i);
    }
    return NULL;
}

static void check_dims(const ts_profile *p, const char *name, int nth, const char *want_dims,
                       const char *want_types) {
    const char *types = NULL, *dims = dims_of(p, name, nth, &types);
    CHECK(dims != NULL);
    if (!dims) return;
    if (strcmp(dims, want_dims) || strcmp(types, want_types))
        fprintf(stderr, "%s #%d: got %s %s, want %s %s\n", name, nth, dims, types, want_dims,
                want_types);
    CHECK(!strcmp(dims, want_dims));
    CHECK(!strcmp(types, want_types));
}

static ts_profile *profile_step(ts_device dev, bool shapes) {
    ts_manual_seed(0);
    ts_module *conv = ts_module_to(ts_conv2d_new(2, 3, 3, (ts_conv2d_opts){0}), dev);
    ts_module *fc = ts_module_to(ts_linear_new(3 * 4 * 4, 5), dev);
    ts_scope_begin();
    ts_tensor *x = ts_to(ts_randn(TS_SHAPE(2, 2, 6, 6), (ts_opts){0}), dev);
    ts_tensor *m = ts_randn(TS_SHAPE(4, 7), (ts_opts){.device = dev});
    ts_tensor *k = ts_randn(TS_SHAPE(7, 3), (ts_opts){.device = dev, .dtype = TS_F64});
    CHECK_EQ(ts_profiler_start(&(ts_profiler_opts){.record_shapes = shapes}), TS_OK);
    ts_tensor *y = ts_forward(fc, ts_flatten(ts_relu(ts_forward(conv, x)), 1, -1));
    ts_sum(y);
    ts_matmul(m, ts_to_dtype(k, TS_F32));
    /* a failed add (shapes do not broadcast) and then a good one: only the second's inputs */
    CHECK(ts_add(m, ts_ones(TS_SHAPE(5), (ts_opts){.device = dev})) == NULL);
    ts_error_clear();
    ts_add(m, ts_ones(TS_SHAPE(7), (ts_opts){.device = dev}));
    CHECK_EQ(ts_profiler_stop(), TS_OK);
    ts_scope_end();
    ts_module_free(conv);
    ts_module_free(fc);
    return ts_profiler_take();
}

static void check_step(ts_device dev) {
    ts_profile *p = profile_step(dev, true);
    CHECK(p != NULL);
    if (!p) return;
    check_dims(p, "conv2d", 0, "[[2, 2, 6, 6], [3, 2, 3, 3], [3]]",
               "[\"float32\", \"float32\", \"float32\"]");
    check_dims(p, "linear", 0, "[[2, 48], [5, 48], [5]]",
               "[\"float32\", \"float32\", \"float32\"]");
    check_dims(p, "relu", 0, "[[2, 3, 4, 4]]", "[\"float32\"]");
    check_dims(p, "sum", 0, "[[2, 5]]", "[\"float32\"]");
    check_dims(p, "to_dtype", 0, "[[7, 3]]", "[\"float64\"]");
    check_dims(p, "matmul", 0, "[[4, 7], [7, 3]]", "[\"float32\", \"float32\"]");
    check_dims(p, "add", 0, "[[4, 7], [7]]", "[\"float32\", \"float32\"]");
    /* key averages by input: the add's one row has its call, and the rows of a name add up to
     * its by-name count */
    ts_profile_stat by_name[256];
    static ts_profile_input_stat by_in[256];
    int64_t nn = ts_profile_key_averages(p, false, by_name, 256);
    int64_t ni = ts_profile_key_averages_by_input(p, by_in, 256);
    CHECK(nn > 0 && ni >= nn && ni <= 256);
    for (int64_t r = 0; r < nn && r < 256; r++) {
        int64_t calls = 0;
        for (int64_t q = 0; q < ni && q < 256; q++)
            if (by_in[q].stat.kind == by_name[r].kind &&
                !strcmp(by_in[q].stat.name, by_name[r].name))
                calls += by_in[q].stat.calls;
        CHECK_EQ(calls, by_name[r].calls);
    }
    bool conv = false;
    for (int64_t q = 0; q < ni && q < 256; q++)
        conv |= !strcmp(by_in[q].stat.name, "conv2d") &&
                !strcmp(by_in[q].input_dims, "[[2, 2, 6, 6], [3, 2, 3, 3], [3]]") &&
                by_in[q].stat.calls == 1;
    CHECK(conv);
    /* the trace: "Input Dims" a JSON array of arrays, as the events say */
    const char *path =
        dev.type == TS_CPU ? "test_profiler_inputs_cpu.json" : "test_profiler_inputs_sim.json";
    CHECK_EQ(ts_profile_export_chrome(p, path), TS_OK);
    FILE *f = fopen(path, "rb");
    static char buf[1 << 20];
    size_t len = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f) fclose(f);
    buf[len] = 0;
    cJSON *root = cJSON_Parse(buf);
    CHECK(root != NULL);
    int seen = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItem(root, "traceEvents")) {
        const cJSON *a = cJSON_GetObjectItem(e, "args");
        const cJSON *name = cJSON_GetObjectItem(e, "name"), *cat = cJSON_GetObjectItem(e, "cat");
        /* the op (on sim its device time is a "kernel" event of the same name, without inputs) */
        if (!cJSON_IsString(name) || strcmp(name->valuestring, "matmul") || !cJSON_IsString(cat) ||
            strcmp(cat->valuestring, "cpu_op"))
            continue;
        const cJSON *d = cJSON_GetObjectItem(a, "Input Dims"),
                    *t = cJSON_GetObjectItem(a, "Input type");
        CHECK(cJSON_GetArraySize(d) == 2 && cJSON_GetArraySize(t) == 2);
        CHECK(cJSON_GetArrayItem(cJSON_GetArrayItem(d, 1), 0)->valueint == 7);
        CHECK(cJSON_GetArrayItem(cJSON_GetArrayItem(d, 1), 1)->valueint == 3);
        CHECK(!strcmp(cJSON_GetArrayItem(t, 0)->valuestring, "float32"));
        seen++;
    }
    CHECK_EQ(seen, 1);
    cJSON_Delete(root);
    remove(path);
    ts_profile_free(p);
    /* without record_shapes: no inputs */
    p = profile_step(dev, false);
    const char *d = dims_of(p, "matmul", 0, NULL);
    CHECK(d != NULL && d[0] == '\0');
    ts_profile_free(p);
}

/* a cat of 40 tensors: the list is cut with "..." and stays valid JSON */
static void check_long_list(void) {
    ts_scope_begin();
    ts_tensor *ts[40];
    for (int i = 0; i < 40; i++) ts[i] = ts_ones(TS_SHAPE(1000, 2), (ts_opts){0});
    CHECK_EQ(ts_profiler_start(&(ts_profiler_opts){.record_shapes = true}), TS_OK);
    ts_cat(ts, 40, 0);
    CHECK_EQ(ts_profiler_stop(), TS_OK);
    ts_scope_end();
    ts_profile *p = ts_profiler_take();
    const char *types = NULL, *dims = dims_of(p, "cat", 0, &types);
    CHECK(dims != NULL && strlen(dims) < TS_PROF_INPUTS_LEN);
    cJSON *d = dims ? cJSON_Parse(dims) : NULL, *t = types ? cJSON_Parse(types) : NULL;
    int nd = cJSON_GetArraySize(d);
    CHECK(nd > 2 && nd < 40 && nd == cJSON_GetArraySize(t));
    const cJSON *last = cJSON_GetArrayItem(d, nd - 1);
    CHECK(cJSON_IsString(last) && !strcmp(last->valuestring, "..."));
    CHECK(!strcmp(cJSON_GetArrayItem(t, nd - 1)->valuestring, "..."));
    CHECK(cJSON_GetArrayItem(cJSON_GetArrayItem(d, 0), 0)->valueint == 1000);
    cJSON_Delete(d);
    cJSON_Delete(t);
    ts_profile_free(p);
    CHECK(ts_profile_key_averages_by_input(NULL, NULL, 0) == -1);
    ts_error_clear();
    CHECK(!strcmp(ts_profile_event_input_dims(NULL, 0), ""));
}

/* a thread's ops carry their inputs too (and the thread's buffers go when it ends) */
static void *adder(void *arg) {
    (void)arg;
    ts_scope_begin();
    ts_tensor *a = ts_ones(TS_SHAPE(16), (ts_opts){0});
    ts_add(a, a);
    ts_scope_end();
    return NULL;
}

static void check_thread(void) {
    CHECK_EQ(ts_profiler_start(&(ts_profiler_opts){.record_shapes = true}), TS_OK);
    pthread_t th;
    CHECK(pthread_create(&th, NULL, adder, NULL) == 0);
    pthread_join(th, NULL);
    CHECK_EQ(ts_profiler_stop(), TS_OK);
    ts_profile *p = ts_profiler_take();
    const char *d = dims_of(p, "add", 0, NULL);
    CHECK(d != NULL && !strcmp(d, "[[16], [16]]"));
    ts_profile_free(p);
}

int main(void) {
    check_thread();
    check_step(ts_cpu());
    if (ts_device_count(TS_SIM) >= 1) check_step(ts_sim(0)); /* ctest sets TS_SIM_DEVICES */
    check_long_list();
    return ts_test_finish();
}
