/* placement_test_util.h — what the placement tests share (test_placement.c,
 * test_placement_override.c): the models they place, a run's output, parameter gradients and
 * buffers as host bytes (so a placed run is compared with the unplaced one bit for bit: sim runs
 * the cpu kernels), and the allocation-failure sweep's model. */
#ifndef TS_TEST_PLACEMENT_UTIL_H
#define TS_TEST_PLACEMENT_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tessera/placement.h"
#include "ts_test.h"

#define CAP ((size_t)96 << 10) /* every sim device's capacity, once the tests cap them */

/* ------------------------------------------------------------------ models */
/* Linear(32, 32) - ReLU, six times, then Linear(32, 4): 4224 bytes per hidden Linear */
static inline ts_module *mlp_new(void) {
    ts_manual_seed(7);
    ts_module *m[13];
    for (int i = 0; i < 6; i++) m[2 * i] = ts_linear_new(32, 32), m[2 * i + 1] = ts_relu_new();
    m[12] = ts_linear_new(32, 4);
    return ts_sequential_new(13, m);
}

static inline ts_module *gpt_new(void) {
    ts_manual_seed(3);
    return ts_gpt_new(
        (ts_gpt_config){.vocab_size = 16, .context = 8, .n_layer = 3, .n_head = 2, .n_embd = 16});
}

static inline ts_module *resnet_new(void) {
    ts_manual_seed(5);
    return ts_resnet20_new((ts_resnet_config){.num_classes = 5, .width = 4, .in_channels = 1});
}

/* 32 Linear(32, 32): 135168 bytes, more than a capped device holds */
static inline ts_module *deep_new(void) {
    ts_manual_seed(9);
    ts_module *m = ts_sequential_new(0, NULL);
    for (int i = 0; i < 32; i++) ts_sequential_append(m, ts_linear_new(32, 32));
    return m;
}

/* ------------------------------------------------------------------ runs as bytes */
typedef struct run {
    size_t n;
    char *bytes;
} run;

static inline void put(run *r, ts_tensor *t) {
    ts_tensor *c = ts_to(ts_contiguous(t), ts_cpu());
    size_t k = ts_nbytes(c);
    r->bytes = realloc(r->bytes, r->n + k);
    CHECK_EQ(ts_copy_to_host(c, r->bytes + r->n, k), TS_OK);
    r->n += k;
}

/* the output, every parameter's gradient (of sum(y^2)) and every buffer after the forward */
static inline run forward_backward(ts_module *m, ts_tensor *x) {
    run r = {0};
    ts_scope_begin();
    ts_tensor *y = ts_forward(m, x);
    CHECK(y != NULL);
    if (y) {
        put(&r, y);
        ts_backward(ts_sum(ts_mul(y, y)));
        ts_tensor_list ps = ts_module_named_parameters(m), bs = ts_module_named_buffers(m);
        for (int i = 0; i < ps.n; i++) put(&r, ts_grad(ps.tensors[i]));
        for (int i = 0; i < bs.n; i++) put(&r, bs.tensors[i]);
        ts_tensor_list_free(&ps);
        ts_tensor_list_free(&bs);
    }
    ts_scope_end();
    CHECK_OK();
    return r;
}

/* the output of a forward without grad */
static inline run forward_only(ts_module *m, ts_tensor *x) {
    run r = {0};
    ts_scope_begin();
    ts_no_grad_begin();
    ts_tensor *y = ts_forward(m, x);
    CHECK(y != NULL);
    if (y) put(&r, y);
    ts_no_grad_end();
    ts_scope_end();
    CHECK_OK();
    return r;
}

/* a and b hold the same bytes (both freed) */
static inline void check_same(run a, run b, const char *what) {
    bool same = a.n == b.n && a.n > 0 && !memcmp(a.bytes, b.bytes, a.n);
    CHECK(same);
    if (!same) fprintf(stderr, "  %s: placed run differs from the unplaced one\n", what);
    free(a.bytes);
    free(b.bytes);
}

/* ------------------------------------------------------------------ allocation failures */
/* Linear(4, 4) - ReLU - Linear(4, 2) and a [2, 4] input; each test places and runs it its way */
typedef struct sweep_state {
    ts_module *m;
    ts_tensor *x;
} sweep_state;

static inline void *sweep_setup(void) {
    sweep_state *s = calloc(1, sizeof *s);
    ts_manual_seed(1);
    ts_module *l[3] = {ts_linear_new(4, 4), ts_relu_new(), ts_linear_new(4, 2)};
    s->m = ts_sequential_new(3, l);
    s->x = ts_ones(TS_SHAPE(2, 4), (ts_opts){0});
    return s;
}

static inline void sweep_teardown(void *p) {
    sweep_state *s = p;
    ts_module_free(s->m);
    ts_release(s->x);
    free(s);
}

#endif /* TS_TEST_PLACEMENT_UTIL_H */
