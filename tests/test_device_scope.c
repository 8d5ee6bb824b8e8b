/* test_device_scope.c — ts_device_push/pop (torch.device / tf.device as a context): built-in
 * modules and factories land on the scoped device, scopes nest, explicit devices and *_like win,
 * the placement log names the scoped device, each thread has its own stack starting at the cpu, and
 * the misuse errors (pop underflow, too deep, a device that does not exist). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ts_test.h"

static bool on(ts_tensor *t, ts_device d) { return t && ts_device_equal(ts_device_of(t), d); }

/* Every parameter and buffer of m is on d. */
static bool module_on(ts_module *m, ts_device d) {
    ts_tensor_list l = ts_module_state_dict(m);
    bool ok = m && l.n > 0;
    for (int i = 0; i < l.n; i++) ok &= on(l.tensors[i], d);
    ts_tensor_list_free(&l);
    return ok;
}

/* ------------------------------------------------------------------ modules */
static void modules(ts_device d) {
    ts_device_push(d);
    ts_module *ms[] = {
        ts_linear_new(3, 4),
        ts_conv2d_new(2, 3, 3, (ts_conv2d_opts){0}),
        ts_batch_norm1d_new(4, (ts_norm_opts){0}),
        ts_batch_norm2d_new(3, (ts_norm_opts){0}), /* running stats and num_batches_tracked too */
        ts_layer_norm_new(TS_SHAPE(4), (ts_norm_opts){0}),
        ts_embedding_new(10, 4),
        ts_sequential_new(2, (ts_module *[]){ts_linear_new(4, 4), ts_linear_new(4, 2)}),
    };
    ts_device_pop();
    for (size_t i = 0; i < sizeof ms / sizeof *ms; i++) {
        CHECK(module_on(ms[i], d));
        if (!module_on(ms[i], d)) printf("  %s not on %s\n", ms[i]->type_name, ts_device_str(d));
    }
    /* an explicit device in the options wins over the scope */
    ts_device_push(d);
    ts_module *cpu_lin = ts_linear_new_ex(3, 2, (ts_linear_opts){.device = ts_cpu()});
    ts_device_pop();
    CHECK(module_on(cpu_lin, ts_cpu()));
    /* after the scope, modules are made on the cpu again */
    ts_module *after = ts_linear_new(2, 2);
    CHECK(module_on(after, ts_cpu()));
    /* and they run where their parameters are, on inputs made in the same scope */
    ts_scope_begin();
    ts_device_push(d);
    ts_tensor *y = ts_forward(ms[0], ts_randn(TS_SHAPE(5, 3), (ts_opts){0}));
    ts_tensor *e = ts_forward(ms[5], ts_tensor_i64(TS_SHAPE(2), (int64_t[]){1, 7}, (ts_opts){0}));
    ts_device_pop();
    CHECK(on(y, d) && on(e, d));
    CHECK_OK();
    ts_scope_end();
    for (size_t i = 0; i < sizeof ms / sizeof *ms; i++) ts_module_free(ms[i]);
    ts_module_free(cpu_lin);
    ts_module_free(after);
}

/* ------------------------------------------------------------------ factories */
static void factories(ts_device d) {
    ts_scope_begin();
    ts_tensor *host = ts_ones(TS_SHAPE(2, 2), (ts_opts){0}); /* before the scope: cpu */
    ts_manual_seed(5);
    ts_tensor *r_cpu = ts_randn(TS_SHAPE(7), (ts_opts){0});
    ts_device_push(d);
    ts_manual_seed(5);
    ts_tensor *made[] = {
        ts_empty(TS_SHAPE(2), (ts_opts){0}),
        ts_zeros(TS_SHAPE(2, 3), (ts_opts){0}),
        ts_ones(TS_SHAPE(2), (ts_opts){.dtype = TS_I32}),
        ts_full(TS_SHAPE(3), 2.5, (ts_opts){0}),
        ts_scalar(4, (ts_opts){0}),
        ts_arange(0, 6, 1, (ts_opts){0}),
        ts_linspace(0, 1, 5, (ts_opts){0}),
        ts_eye(3, 0, (ts_opts){0}),
        ts_randn(TS_SHAPE(7), (ts_opts){0}), /* index 8: compared with the cpu draw */
        ts_rand(TS_SHAPE(3), (ts_opts){0}),
        ts_randint(0, 9, TS_SHAPE(4), (ts_opts){0}),
        ts_randperm(6, (ts_opts){0}),
        ts_tensor_f32(TS_SHAPE(2), (float[]){1, 2}, (ts_opts){0}),
        ts_tensor_f64(TS_SHAPE(1), (double[]){3}, (ts_opts){0}),
        ts_tensor_i64(TS_SHAPE(2), (int64_t[]){5, 6}, (ts_opts){0}),
        ts_from_data(TS_SHAPE(1), TS_I32, (int32_t[]){9}, (ts_opts){0}),
    };
    /* *_like follow their input, and an explicit device wins */
    ts_tensor *like = ts_zeros_like(host);
    ts_tensor *randlike = ts_randn_like(host);
    ts_tensor *explicit_cpu = ts_zeros(TS_SHAPE(2), (ts_opts){.device = ts_cpu()});
    ts_device_pop();
    for (size_t i = 0; i < sizeof made / sizeof *made; i++) {
        CHECK(on(made[i], d));
        if (!on(made[i], d)) printf("  factory %zu not on %s\n", i, ts_device_str(d));
    }
    CHECK(on(like, ts_cpu()) && on(randlike, ts_cpu()) && on(explicit_cpu, ts_cpu()));
    /* the same seed gives the same numbers on every device */
    CHECK_EQ(ts_item(ts_sum(ts_eq(ts_to(made[8], ts_cpu()), r_cpu))), 7);
    CHECK_EQ(ts_item(ts_sum(made[5])), 15);
    /* ops follow their operands, not the scope (PyTorch's rule) */
    ts_device_push(ts_cpu());
    CHECK(on(ts_add(made[1], made[1]), d));
    ts_device_pop();
    CHECK_OK();
    ts_scope_end();
}

/* ------------------------------------------------------------------ nesting */
static void nesting(ts_device a, ts_device b) {
    CHECK(ts_device_equal(ts_default_device(), ts_cpu()));
    ts_device_push(a);
    CHECK(ts_device_equal(ts_default_device(), a));
    ts_device_push(b);
    CHECK(ts_device_equal(ts_default_device(), b));
    ts_device_push((ts_device){TS_DEVICE_DEFAULT, 0}); /* "what is default now": b */
    CHECK(ts_device_equal(ts_default_device(), b));
    ts_scope_begin();
    CHECK(on(ts_zeros(TS_SHAPE(1), (ts_opts){0}), b));
    ts_device_pop();
    ts_device_pop();
    CHECK(on(ts_zeros(TS_SHAPE(1), (ts_opts){0}), a));
    ts_device_pop();
    CHECK(on(ts_zeros(TS_SHAPE(1), (ts_opts){0}), ts_cpu()));
    ts_scope_end();
    /* TS_DEVICE_DEFAULT in a device-taking call means the scoped one */
    ts_device_push(a);
    CHECK(ts_device_equal((ts_device){TS_DEVICE_DEFAULT, 0}, a));
    ts_scope_begin();
    CHECK(on(ts_to(ts_ones(TS_SHAPE(2), (ts_opts){.device = ts_cpu()}),
                   (ts_device){TS_DEVICE_DEFAULT, 0}),
             a));
    ts_scope_end();
    ts_device_pop();
    CHECK_OK();
}

/* ------------------------------------------------------------------ threads */
typedef struct thread_probe {
    ts_device pushed;
    bool started_on_cpu, made_on_pushed, back_on_cpu;
} thread_probe;

static void *probe_main(void *arg) {
    thread_probe *p = arg;
    p->started_on_cpu = ts_device_equal(ts_default_device(), ts_cpu());
    ts_device_push(p->pushed);
    ts_tensor *t = ts_zeros(TS_SHAPE(2), (ts_opts){0}); /* no scope: ours to release */
    p->made_on_pushed = on(t, p->pushed);
    ts_release(t);
    ts_device_pop();
    p->back_on_cpu = ts_device_equal(ts_default_device(), ts_cpu());
    return NULL;
}

static void threads(ts_device a, ts_device b) {
    ts_device_push(a); /* the main thread's scope does not reach new threads */
    thread_probe p = {.pushed = b};
    pthread_t th;
    CHECK(pthread_create(&th, NULL, probe_main, &p) == 0);
    pthread_join(th, NULL);
    CHECK(p.started_on_cpu && p.made_on_pushed && p.back_on_cpu);
    /* and the thread's push did not change ours */
    CHECK(ts_device_equal(ts_default_device(), a));
    ts_device_pop();
    CHECK_OK();
}

/* ------------------------------------------------------------------ placement log */
/* Runs ops with the log on and stderr sent to a file; returns what was logged (malloc'ed). */
static char *capture_placement(ts_device d) {
    fflush(stderr);
    FILE *tmp = tmpfile();
    if (!tmp) return NULL;
    int saved = dup(fileno(stderr));
    dup2(fileno(tmp), fileno(stderr));
    ts_log_placement(true);
    ts_scope_begin();
    ts_device_push(d);
    ts_tensor *a = ts_ones(TS_SHAPE(2, 2), (ts_opts){0});
    ts_tensor *b = ts_matmul(a, a);
    ts_device_pop();
    ts_to(b, ts_cpu());
    ts_scope_end();
    ts_log_placement(false);
    fflush(stderr);
    dup2(saved, fileno(stderr));
    close(saved);
    long n = ftell(tmp);
    char *text = calloc((size_t)(n > 0 ? n : 0) + 1, 1);
    rewind(tmp);
    if (text && n > 0 && fread(text, 1, (size_t)n, tmp) != (size_t)n) text[0] = '\0';
    fclose(tmp);
    return text;
}

static void placement_log(ts_device d) {
    char *log = capture_placement(d);
    char want[3][80];
    snprintf(want[0], sizeof want[0], "tessera placement: ones on %s\n", ts_device_str(d));
    snprintf(want[1], sizeof want[1], "tessera placement: matmul on %s\n", ts_device_str(d));
    snprintf(want[2], sizeof want[2], "tessera placement: to on cpu\n");
    CHECK(log != NULL);
    for (int i = 0; log && i < 3; i++) {
        CHECK(strstr(log, want[i]) != NULL);
        if (!strstr(log, want[i])) printf("  missing \"%s\" in:\n%s", want[i], log);
    }
    free(log);
    CHECK_OK();
}

/* ------------------------------------------------------------------ errors */
static void errors(void) {
    ts_device_pop();
    CHECK(strcmp(ts_error_message(), "device_pop: no device scope is open") == 0);
    CHECK_ERR(TS_ERR_STATE);
    /* too deep: the 65th push fails and leaves the stack as it was */
    for (int i = 0; i < 64; i++) ts_device_push(ts_sim(i % 2));
    CHECK_OK();
    ts_device_push(ts_sim(0));
    CHECK(strstr(ts_error_message(), "device_push: more than 64 nested device scopes") != NULL);
    CHECK_ERR(TS_ERR_STATE);
    CHECK(ts_device_equal(ts_default_device(), ts_sim(1)));
    for (int i = 0; i < 64; i++) ts_device_pop();
    CHECK_OK();
    CHECK(ts_device_equal(ts_default_device(), ts_cpu()));
    /* a scope on a device that does not exist: factories say so (as torch.device('cuda:7') does
     * at the first tensor) */
    ts_device_push(ts_sim(40));
    ts_scope_begin();
    CHECK(ts_zeros(TS_SHAPE(2), (ts_opts){0}) == NULL);
    CHECK(strstr(ts_error_message(), "sim:40") != NULL);
    CHECK_ERR(TS_ERR_DEVICE);
    CHECK(ts_linear_new(2, 2) == NULL);
    CHECK_ERR(TS_ERR_DEVICE);
    ts_scope_end();
    ts_device_pop();
    CHECK_OK();
}

int main(void) {
    if (ts_device_count(TS_SIM) < 2) return ts_test_skip("needs TS_SIM_DEVICES=2 or more");
    ts_device d = ts_sim(1);
    modules(d);
    factories(d);
    nesting(ts_sim(0), ts_sim(1));
    threads(ts_sim(0), ts_sim(1));
    placement_log(d);
    errors();
    if (ts_cuda_is_available()) { /* the same on a GPU when there is one */
        modules(ts_cuda(0));
        factories(ts_cuda(0));
        nesting(ts_cuda(0), ts_sim(0));
        placement_log(ts_cuda(0));
    }
    return ts_test_finish();
}
