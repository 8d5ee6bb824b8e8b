/* test_profiler.c — the profiler over a small CNN's training step on cpu and sim:0: the Chrome
 * trace parses back (cJSON), X events well formed, ops nested in the step range, each transfer
 * with its kind and bytes, every flow start has its finish, memory counters, key averages, and a
 * profiled step bit-identical to an unprofiled one. */
#include <cjson/cJSON.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json_file_util.h"
#include "tessera.h"
#include "tessera/profiler.h"
#include "ts_test.h"

typedef struct {
    ts_module base;
    ts_module *conv, *fc;
} tiny_cnn;

static ts_tensor *tiny_forward(ts_module *self, ts_tensor *x) {
    tiny_cnn *m = (tiny_cnn *)self;
    x = ts_relu(ts_forward(m->conv, x));
    return ts_forward(m->fc, ts_flatten(x, 1, -1));
}

static ts_module *tiny_new(void) {
    tiny_cnn *m = ts_module_alloc(sizeof *m, "TinyCNN", tiny_forward);
    m->conv = ts_module_add(&m->base, "conv", ts_conv2d_new(1, 4, 3, (ts_conv2d_opts){0}));
    m->fc = ts_module_add(&m->base, "fc", ts_linear_new(4 * 6 * 6, 5));
    return &m->base;
}

enum { BATCH = 8 };

/* One SGD step of the tiny CNN on dev from seed 0 (data made on the cpu and moved there, the loss
 * moved back); the parameters after it in params (float32, concatenated). Returns the count. */
static size_t train_step(ts_device dev, bool profiled, float *params, size_t cap) {
    ts_manual_seed(0);
    ts_module *model = ts_module_to(tiny_new(), dev);
    ts_optim *opt = ts_sgd_new(model, (ts_sgd_opts){.lr = 0.1f});
    ts_scope_begin();
    ts_tensor *x_cpu = ts_randn(TS_SHAPE(BATCH, 1, 8, 8), (ts_opts){0});
    ts_tensor *y_cpu = ts_randint(0, 5, TS_SHAPE(BATCH), (ts_opts){0});
    if (profiled) ts_profiler_range_push("step");
    ts_tensor *x = ts_to(x_cpu, dev), *y = ts_to(y_cpu, dev);
    ts_tensor *loss = ts_cross_entropy(ts_forward(model, x), y);
    ts_optim_zero_grad(opt);
    ts_backward(loss);
    ts_optim_step(opt);
    ts_tensor *loss_cpu = ts_to(loss, ts_cpu());
    if (profiled) CHECK_EQ(ts_profiler_range_pop(), TS_OK);
    CHECK(loss_cpu != NULL);
    ts_tensor_list ps = ts_module_named_parameters(model);
    size_t n = 0;
    for (int i = 0; i < ps.n; i++) {
        size_t k = (size_t)ts_numel(ps.tensors[i]);
        if (n + k > cap) break;
        CHECK_EQ(ts_copy_to_host(ts_to(ps.tensors[i], ts_cpu()), params + n, k * sizeof *params),
                 TS_OK);
        n += k;
    }
    ts_tensor_list_free(&ps);
    ts_scope_end();
    ts_optim_free(opt);
    ts_module_free(model);
    CHECK_EQ(ts_error(), TS_OK);
    return n;
}

static double num(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : -1e300;
}
static const char *str(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : "";
}

/* The trace of one profiled step on dev. */
/* Device time (sim: its kernels run in the calling thread, so an op's device span is its own
 * span): one "kernel" event for each outermost op on the device and none for ops inside another
 * op or on the cpu, on a device track of the device's process, with the op's correlation, inside
 * its op's time, and an ac2g flow from the op to it. */
static void check_kernels(const cJSON *evs, ts_device dev) {
    int n_kernels = 0, n_device_ops = 0, bad = 0, n_ac2g = 0;
    const cJSON *e, *g;
    cJSON_ArrayForEach(e, evs) {
        if (!strcmp(str(e, "ph"), "s") && !strcmp(str(e, "cat"), "ac2g")) n_ac2g++;
        if (strcmp(str(e, "ph"), "X")) continue;
        const cJSON *a = cJSON_GetObjectItemCaseSensitive(e, "args");
        if (!strcmp(str(e, "cat"), "cpu_op") && !strcmp(str(a, "device"), ts_device_str(dev))) {
            /* outermost: no cpu_op on its thread encloses it */
            double t0 = num(e, "ts"), t1 = t0 + num(e, "dur");
            bool inner = false;
            cJSON_ArrayForEach(g, evs) {
                if (g == e || strcmp(str(g, "ph"), "X") || strcmp(str(g, "cat"), "cpu_op") ||
                    num(g, "tid") != num(e, "tid") || num(g, "pid") != num(e, "pid"))
                    continue;
                double u0 = num(g, "ts"), u1 = u0 + num(g, "dur");
                inner |= u0 <= t0 && t1 <= u1 && (u0 < t0 || t1 < u1);
            }
            const cJSON *c = cJSON_GetObjectItemCaseSensitive(a, "correlation");
            /* outermost ops on a sim device carry one, inner ones and the cpu's none */
            const bool timed = dev.type != TS_CPU && !inner;
            n_device_ops += timed;
            bad += timed != (c != NULL);
        }
        if (strcmp(str(e, "cat"), "kernel")) continue;
        n_kernels++;
        const double corr = num(a, "correlation");
        bad += num(e, "tid") < 2000 || strcmp(str(a, "device"), ts_device_str(dev)) != 0;
        int ops = 0;
        cJSON_ArrayForEach(g, evs) {
            const cJSON *ga = cJSON_GetObjectItemCaseSensitive(g, "args");
            if (strcmp(str(g, "ph"), "X") || strcmp(str(g, "cat"), "cpu_op") ||
                !cJSON_GetObjectItemCaseSensitive(ga, "correlation") ||
                num(ga, "correlation") != corr)
                continue;
            ops++;
            /* the same name and pid, inside the op (1 ns of slack: 3 decimals of a microsecond) */
            bad += strcmp(str(g, "name"), str(e, "name")) != 0 || num(g, "pid") != num(e, "pid") ||
                   num(e, "ts") < num(g, "ts") - 1e-3 ||
                   num(e, "ts") + num(e, "dur") > num(g, "ts") + num(g, "dur") + 1e-3;
        }
        bad += ops != 1;
    }
    CHECK_EQ(bad, 0);
    CHECK_EQ(n_kernels, n_device_ops);
    CHECK_EQ(n_ac2g, n_kernels);
    if (dev.type == TS_CPU)
        CHECK_EQ(n_kernels, 0);
    else
        CHECK(n_kernels > 5);
}

static void check_trace(const char *path, ts_device dev) {
    cJSON *root = read_json(path);
    CHECK(root != NULL);
    if (!root) return;
    const cJSON *evs = cJSON_GetObjectItemCaseSensitive(root, "traceEvents");
    CHECK(cJSON_IsArray(evs));
    const bool moves = dev.type != TS_CPU;
    double step_t0 = -1, step_t1 = -1, step_tid = -1;
    int n_x = 0, n_ops = 0, n_bwd = 0, n_h2d = 0, n_d2h = 0, n_d2h_targets = 0, n_counter = 0,
        bad = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, evs) {
        const char *ph = str(e, "ph");
        if (!strcmp(ph, "X")) {
            n_x++;
            bad += num(e, "ts") < 0 || num(e, "dur") < 0 || num(e, "pid") < 0 ||
                   num(e, "tid") < 0 || !*str(e, "name") || !*str(e, "cat");
            if (!strcmp(str(e, "name"), "step")) {
                step_t0 = num(e, "ts");
                step_t1 = step_t0 + num(e, "dur");
                step_tid = num(e, "tid");
            }
        } else if (!strcmp(ph, "C")) {
            n_counter++;
            const cJSON *a = cJSON_GetObjectItemCaseSensitive(e, "args");
            bad += num(a, "allocated") < 0;
        } else if (strcmp(ph, "M") && strcmp(ph, "s") && strcmp(ph, "f")) {
            bad++;
        }
    }
    CHECK_EQ(bad, 0);
    CHECK(n_x > 10);
    /* each device process named once, and every event's process named */
    double named[16];
    int n_named = 0, dup = 0, unnamed = 0;
    cJSON_ArrayForEach(e, evs) {
        if (strcmp(str(e, "ph"), "M") || strcmp(str(e, "name"), "process_name")) continue;
        for (int i = 0; i < n_named; i++) dup += named[i] == num(e, "pid");
        if (n_named < 16) named[n_named++] = num(e, "pid");
    }
    cJSON_ArrayForEach(e, evs) {
        if (!strcmp(str(e, "ph"), "M")) continue;
        bool found = false;
        for (int i = 0; i < n_named; i++) found |= named[i] == num(e, "pid");
        unnamed += !found;
    }
    CHECK_EQ(dup, 0);
    CHECK_EQ(unnamed, 0);
    CHECK_EQ(n_named, moves ? 2 : 1);
    CHECK(step_t0 >= 0);
    CHECK(n_counter > 0);
    /* every op and backward node that starts in the step range ends in it, on its thread (the
     * model's initialisation comes before it, reading the parameters back after it); the
     * backward nodes all lie in it; transfers */
    int outside = 0;
    const int64_t x_bytes = BATCH * 64 * 4, y_bytes = BATCH * 8;
    bool x_seen = false, y_seen = false;
    cJSON_ArrayForEach(e, evs) {
        if (strcmp(str(e, "ph"), "X")) continue;
        const char *cat = str(e, "cat");
        double t0 = num(e, "ts"), t1 = t0 + num(e, "dur");
        if (!strcmp(cat, "cpu_op") || !strcmp(cat, "backward")) {
            /* 1 ns of slack: the times are printed in microseconds with 3 decimals */
            bool starts_in = t0 >= step_t0 - 1e-3 && t0 <= step_t1 + 1e-3;
            n_ops += !strcmp(cat, "cpu_op") && starts_in;
            n_bwd += !strcmp(cat, "backward");
            if (starts_in || !strcmp(cat, "backward"))
                outside += num(e, "tid") != step_tid || t0 < step_t0 - 1e-3 || t1 > step_t1 + 1e-3;
        }
        if (!strcmp(cat, "gpu_memcpy")) {
            const cJSON *a = cJSON_GetObjectItemCaseSensitive(e, "args");
            const char *kind = str(a, "kind");
            double bytes = num(a, "bytes");
            CHECK(!strcmp(str(a, "memory"), "pageable"));
            CHECK(num(a, "GB/s") >= 0);
            if (!strcmp(kind, "HtoD")) {
                n_h2d++;
                CHECK(!strcmp(str(a, "src"), "cpu") && !strcmp(str(a, "dst"), ts_device_str(dev)));
                x_seen |= bytes == (double)x_bytes;
                y_seen |= bytes == (double)y_bytes;
            } else if (!strcmp(kind, "DtoH")) {
                n_d2h++;
                n_d2h_targets += bytes == (double)y_bytes;
            } else {
                CHECK(!"unexpected transfer kind");
            }
        }
    }
    CHECK_EQ(outside, 0);
    CHECK(n_ops > 5);
    CHECK(n_bwd >= 4); /* conv, relu, flatten/linear, cross entropy at least */
    if (moves) {
        CHECK(x_seen && y_seen);
        CHECK_EQ(n_h2d, 4 + 2); /* ts_module_to's 4 parameters, x and y */
        /* the loss, the parameters read back after the step, and the host read of the targets
         * y by cross entropy's index check (once: core/index_range.c) */
        CHECK_EQ(n_d2h_targets, 1);
        CHECK_EQ(n_d2h - n_d2h_targets, 1 + 4);
    } else {
        CHECK_EQ(n_h2d + n_d2h, 0);
    }
    /* flows: every "s" has one "f" with its id, at or after it */
    int n_s = 0, unmatched = 0;
    cJSON_ArrayForEach(e, evs) {
        if (strcmp(str(e, "ph"), "s")) continue;
        n_s++;
        double id = num(e, "id"), ts = num(e, "ts");
        int found = 0;
        const cJSON *g;
        cJSON_ArrayForEach(g, evs) found +=
            !strcmp(str(g, "ph"), "f") && num(g, "id") == id && num(g, "ts") >= ts;
        unmatched += found != 1;
    }
    int n_f = 0;
    cJSON_ArrayForEach(e, evs) n_f += !strcmp(str(e, "ph"), "f");
    CHECK(n_s >= 4);
    CHECK_EQ(n_s, n_f);
    CHECK_EQ(unmatched, 0);
    check_kernels(evs, dev);
    cJSON_Delete(root);
}

static void check_key_averages(ts_profile *p, ts_device dev) {
    ts_profile_stat rows[256];
    int64_t n = ts_profile_key_averages(p, false, rows, 256);
    CHECK(n > 5 && n <= 256);
    int64_t h2d = 0, range_calls = 0;
    size_t n_ev = 0;
    const ts_profile_event *ev = ts_profile_events(p, &n_ev);
    for (int64_t i = 0; i < n && i < 256; i++) {
        CHECK(rows[i].self_ns <= rows[i].total_ns);
        CHECK(rows[i].self_ns >= 0);
        if (!strcmp(rows[i].name, "Memcpy HtoD")) h2d = rows[i].calls;
        if (!strcmp(rows[i].name, "step")) range_calls = rows[i].calls;
        int64_t calls = 0;
        for (size_t k = 0; k < n_ev; k++)
            calls += ev[k].kind == rows[i].kind && !strcmp(ev[k].name, rows[i].name);
        CHECK_EQ(calls, rows[i].calls);
    }
    CHECK_EQ(range_calls, 1);
    CHECK_EQ(h2d, dev.type == TS_CPU ? 0 : 4 + 2); /* ts_module_to's 4 parameters, x and y */
    /* the step's self time + its children's totals = its total */
    for (size_t k = 0; k < n_ev; k++) {
        if (ev[k].kind != TS_PROF_RANGE) continue;
        int64_t children = 0;
        for (size_t c = 0; c < n_ev; c++)
            if (ev[c].thread == ev[k].thread && ev[c].depth == ev[k].depth + 1 &&
                ev[c].kind != TS_PROF_MEMORY && ev[c].t0_ns >= ev[k].t0_ns &&
                ev[c].t1_ns <= ev[k].t1_ns)
                children += ev[c].t1_ns - ev[c].t0_ns;
        CHECK_EQ(ev[k].self_ns, ev[k].t1_ns - ev[k].t0_ns - children);
    }
    /* with shapes: the linear layer's result */
    int64_t m = ts_profile_key_averages(p, true, rows, 256);
    CHECK(m >= n);
    bool lin = false;
    for (int64_t i = 0; i < m && i < 256; i++)
        lin |= !strcmp(rows[i].shape, "[8, 5] float32") && !strcmp(rows[i].name, "linear");
    CHECK(lin);
}

static void run_on(ts_device dev) {
    enum { CAP = 1024 };
    static float plain[CAP], prof[CAP];
    size_t n0 = train_step(dev, false, plain, CAP);
    CHECK_EQ(ts_profiler_start(&(ts_profiler_opts){.record_shapes = true, .profile_memory = true}),
             TS_OK);
    CHECK(ts_profiler_enabled());
    size_t n1 = train_step(dev, true, prof, CAP);
    CHECK_EQ(ts_profiler_stop(), TS_OK);
    CHECK(!ts_profiler_enabled());
    CHECK(n0 == n1 && n0 == 4 * 9 + 4 + 5 * 144 + 5);
    CHECK(memcmp(plain, prof, n0 * sizeof *plain) == 0);
    char path[256];
    snprintf(path, sizeof path, "test_profiler_%s.json", dev.type == TS_CPU ? "cpu" : "sim");
    CHECK_EQ(ts_profiler_export_chrome(path), TS_OK);
    check_trace(path, dev);
    ts_profile *p = ts_profiler_take();
    CHECK(p != NULL);
    if (p) check_key_averages(p, dev);
    ts_profile_free(p);
    if (!getenv("TS_PROFILER_TEST_KEEP")) remove(path);
}

/* Threads record into buffers of their own: every call of each thread is there, on its track. */
enum { ADDS = 25 };
static void *adder(void *arg) {
    (void)arg;
    ts_scope_begin();
    ts_tensor *a = ts_ones(TS_SHAPE(16), (ts_opts){0});
    for (int i = 0; i < ADDS; i++) a = ts_add(a, a);
    ts_scope_end();
    return NULL;
}

static void check_threads(void) {
    CHECK_EQ(ts_profiler_start(NULL), TS_OK);
    pthread_t th[3];
    for (int i = 0; i < 3; i++) CHECK(pthread_create(&th[i], NULL, adder, NULL) == 0);
    for (int i = 0; i < 3; i++) pthread_join(th[i], NULL);
    CHECK_EQ(ts_profiler_stop(), TS_OK);
    ts_profile *p = ts_profiler_take();
    size_t n = 0;
    const ts_profile_event *ev = ts_profile_events(p, &n);
    int per_thread[64] = {0}, adds = 0;
    for (size_t i = 0; i < n; i++) {
        if (ev[i].kind != TS_PROF_OP || strcmp(ev[i].name, "add")) continue;
        adds++;
        if (ev[i].thread >= 0 && ev[i].thread < 64) per_thread[ev[i].thread]++;
        CHECK(i == 0 || ev[i].t0_ns >= ev[i - 1].t0_ns); /* in start-time order */
    }
    int threads = 0;
    for (int t = 0; t < 64; t++) {
        if (!per_thread[t]) continue;
        threads++;
        CHECK_EQ(per_thread[t], ADDS);
    }
    CHECK_EQ(adds, 3 * ADDS);
    CHECK_EQ(threads, 3);
    ts_profile_free(p);
}

static void check_errors(void) {
    CHECK_EQ(ts_profiler_stop(), TS_ERR_STATE);
    CHECK(strstr(ts_error_message(), "profiler_stop") != NULL);
    ts_error_clear();
    CHECK_EQ(ts_profiler_range_pop(), TS_ERR_STATE);
    ts_error_clear();
    CHECK_EQ(ts_profiler_export_chrome("x.json"), TS_ERR_STATE);
    ts_error_clear();
    CHECK_EQ(ts_profiler_start(NULL), TS_OK);
    CHECK_EQ(ts_profiler_start(NULL), TS_ERR_STATE);
    ts_error_clear();
    CHECK_EQ(ts_profiler_stop(), TS_OK);
    CHECK_EQ(ts_profiler_export_chrome("/nonexistent-dir/x.json"), TS_ERR_IO);
    ts_error_clear();
    CHECK(ts_profile_key_averages(NULL, false, NULL, 0) == -1);
    ts_error_clear();
    ts_profile_free(ts_profiler_take());
    CHECK(ts_profiler_take() == NULL);
}

/* An op built of other ops (cosine_similarity: norms, divisions, a sum inside its span) gets one
 * device-time span, its inner ops none; each span within its op and with its correlation. */
static void check_kernel_nesting(void) {
    ts_device d = ts_sim(0);
    ts_scope_begin();
    ts_tensor *a = ts_randn(TS_SHAPE(4, 16), (ts_opts){.device = d});
    ts_tensor *b = ts_randn(TS_SHAPE(4, 16), (ts_opts){.device = d});
    CHECK_EQ(ts_profiler_start(NULL), TS_OK);
    CHECK(ts_cosine_similarity(a, b, 1, 1e-8) != NULL);
    CHECK_EQ(ts_profiler_stop(), TS_OK);
    ts_profile *p = ts_profiler_take();
    size_t n = 0;
    const ts_profile_event *ev = ts_profile_events(p, &n);
    int ops = 0, kernels = 0, outer_corr = 0, inner_corr = 0;
    uint64_t corr = 0;
    int64_t op_t0 = 0, op_t1 = 0;
    for (size_t i = 0; i < n; i++) {
        if (ev[i].kind == TS_PROF_OP) {
            ops++;
            if (!strcmp(ev[i].name, "cosine_similarity")) {
                outer_corr += ev[i].correlation != 0;
                corr = ev[i].correlation, op_t0 = ev[i].t0_ns, op_t1 = ev[i].t1_ns;
            } else {
                inner_corr += ev[i].correlation != 0;
            }
        }
    }
    for (size_t i = 0; i < n; i++) {
        if (ev[i].kind != TS_PROF_KERNEL) continue;
        kernels++;
        CHECK(!strcmp(ev[i].name, "cosine_similarity"));
        CHECK(ev[i].correlation == corr && corr != 0);
        CHECK(ev[i].t0_ns >= op_t0 && ev[i].t1_ns <= op_t1 && ev[i].t1_ns >= ev[i].t0_ns);
        CHECK_EQ(ev[i].self_ns, ev[i].t1_ns - ev[i].t0_ns);
    }
    CHECK(ops > 3); /* the op and the ops inside it */
    CHECK_EQ(outer_corr, 1);
    CHECK_EQ(inner_corr, 0);
    CHECK_EQ(kernels, 1);
    ts_profile_free(p);
    ts_scope_end();
    CHECK_OK();
}

int main(void) {
    check_errors();
    check_kernel_nesting();
    run_on(ts_cpu());
    run_on(ts_sim(0));
    check_threads();
    return ts_test_finish();
}
