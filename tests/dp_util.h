/* dp_util.h — what the data-parallel tests share: the sim devices, a small user module with a
 * destroy hook and a forward that records where each replica ran, deterministic batches, and
 * comparisons of tensors and parameters across devices. */
#ifndef TS_TEST_DP_UTIL_H
#define TS_TEST_DP_UTIL_H

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ts_test.h"

#define NDEV   4
#define IN     6
#define HIDDEN 16
#define OUT    5

static ts_device devs[NDEV];
/* output_device {TS_DEVICE_DEFAULT}: devices[0], like PyTorch's output_device=None */
#define DEV0 ((ts_device){TS_DEVICE_DEFAULT, 0})

/* ------------------------------------------------------------------ helpers */
/* max |a - b| over all elements (any devices and float dtypes); INFINITY when shapes differ */
static inline double max_diff(ts_tensor *a, ts_tensor *b) {
    if (!a || !b || ts_numel(a) != ts_numel(b)) return INFINITY;
    ts_scope_begin();
    ts_tensor *ca = ts_to_dtype(ts_to(a, ts_cpu()), TS_F64);
    ts_tensor *cb = ts_to_dtype(ts_to(b, ts_cpu()), TS_F64);
    double d =
        ts_numel(a) ? ts_item(ts_max(ts_abs(ts_sub(ca, ts_reshape(cb, ts_shape_of(ca)))))) : 0.0;
    ts_scope_end();
    return d;
}

static inline ts_mem_stats stats(ts_device d) {
    ts_mem_stats s = {0};
    ts_memory_stats(d, &s);
    return s;
}

/* What each forward saw, by the device of its input (sim:0..3; slot 7 for anything else). Replicas
 * are struct copies, so this has to live outside the module to be seen by the test. */
typedef struct call_log {
    atomic_int calls, rows, default_is_input_device, grad_on, autocast_on;
    _Atomic(ts_node *) scale_fn; /* grad_fn of the replica's "scale" parameter */
} call_log;
static call_log logs[8];

static inline void reset_logs(void) { memset(logs, 0, sizeof logs); }

static inline void note_call(ts_tensor *x) {
    ts_device d = ts_device_of(x);
    call_log *l = &logs[d.type == TS_SIM && d.index < 7 ? d.index : 7];
    atomic_fetch_add(&l->calls, 1);
    atomic_store(&l->rows, (int)ts_size(x, 0));
    atomic_store(&l->default_is_input_device, ts_device_equal(ts_default_device(), d));
    atomic_store(&l->grad_on, ts_grad_enabled());
    atomic_store(&l->autocast_on, ts_autocast_is_enabled(TS_SIM));
}

/* ------------------------------------------------------------------ a user module
 * Children and a parameter reached through the struct's own pointers (what replication must
 * relocate), a destroy hook (which replicas must not run), and a way to fail on one device. */
typedef struct net {
    ts_module base;
    ts_module *fc1;
    ts_tensor *scale; /* parameter, used through this pointer */
    ts_module *fc2;
    int *destroyed;  /* shared extra */
    int fail_on_sim; /* -1: never; else a shape error inside forward on that sim device */
} net;

static inline ts_tensor *net_forward(ts_module *self, ts_tensor *x) {
    net *m = (net *)self;
    note_call(x);
    ts_device xd = ts_device_of(x);
    atomic_store(&logs[xd.type == TS_SIM && xd.index < 7 ? xd.index : 7].scale_fn,
                 m->scale->grad_fn);
    ts_tensor *h = ts_mul(ts_relu(ts_forward(m->fc1, x)), m->scale);
    ts_device d = ts_device_of(x);
    if (d.type == TS_SIM && d.index == m->fail_on_sim)
        h = ts_add(h, ts_zeros(TS_SHAPE(HIDDEN + 1), (ts_opts){0})); /* [n, 16] + [17] */
    return ts_forward(m->fc2, h);
}

static inline void net_destroy(ts_module *self) {
    net *m = (net *)self;
    if (m->destroyed) (*m->destroyed)++;
}

/* Built under a device scope: every parameter lands on `d`. */
static inline ts_module *net_new(ts_device d, int *destroyed) {
    ts_device_push(d);
    ts_scope_begin(); /* the temporaries of the initialisation */
    net *m = ts_module_alloc(sizeof *m, "Net", net_forward);
    m->base.destroy = net_destroy;
    m->destroyed = destroyed;
    m->fail_on_sim = -1;
    m->fc1 = ts_module_add(&m->base, "fc1", ts_linear_new(IN, HIDDEN));
    ts_tensor *scale = ts_add_scalar(ts_rand(TS_SHAPE(HIDDEN), (ts_opts){0}), 0.5);
    m->scale = ts_module_param(&m->base, "scale", scale);
    m->fc2 = ts_module_add(&m->base, "fc2", ts_linear_new(HIDDEN, OUT));
    ts_scope_end();
    ts_device_pop();
    return &m->base;
}

/* A second model with the same values (loaded, so nothing depends on the generator). */
static inline ts_module *net_clone(ts_module *src, ts_device d) {
    ts_module *m = net_new(d, NULL);
    ts_tensor_list sd = ts_module_state_dict(src);
    ts_module_load_state_dict(m, &sd, true);
    ts_tensor_list_free(&sd);
    return m;
}

static inline void batch(int step, int64_t n, ts_tensor **x, ts_tensor **y) {
    ts_manual_seed(1000 + (uint64_t)step);
    *x = ts_randn(TS_SHAPE(n, IN), (ts_opts){.device = ts_cpu()});
    *y = ts_randint(0, OUT, TS_SHAPE(n), (ts_opts){.device = ts_cpu()});
}

/* Every parameter of a (wrapped or not) model against the other's, by position. */
static inline double params_diff(ts_module *a, ts_module *b, bool grads) {
    ts_tensor_list la = ts_module_named_parameters(a), lb = ts_module_named_parameters(b);
    double worst = la.n == lb.n ? 0 : INFINITY;
    for (int i = 0; i < la.n && i < lb.n; i++) {
        ts_tensor *ta = grads ? ts_grad(la.tensors[i]) : la.tensors[i];
        ts_tensor *tb = grads ? ts_grad(lb.tensors[i]) : lb.tensors[i];
        double d = max_diff(ta, tb);
        if (d > worst) worst = d;
    }
    ts_tensor_list_free(&la);
    ts_tensor_list_free(&lb);
    return worst;
}

#endif /* TS_TEST_DP_UTIL_H */
