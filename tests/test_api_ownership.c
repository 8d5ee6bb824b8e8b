/* test_api_ownership.c — the public headers' "takes ownership (also on failure)" promises
 * (docs/decisions/0025-c-api-results.md): each call that takes over a module, a transform, a
 * dataset's or a callback's context frees it exactly once when it fails, and leaves alone a module
 * that already belongs to another one. Counted here through the objects' own destructors (a user
 * module's destroy, free_user, ops->free, ctx_free) and the cpu's live tensors, so a leak or a
 * double free fails without a sanitizer; under ASan/LSan (make asan) a freed object touched again
 * fails too. */
#include <stdio.h>
#include <stdlib.h>

#include "tessera.h"
#include "tessera/autograd.h"
#include "tessera/custom_function.h"
#include "tessera/data.h"
#include "tessera/distributed.h"
#include "tessera/nn.h"
#include "tessera/parallel.h"
#include "ts_test.h"

/* ------------------------------------------------------------------ counted objects */
static int destroyed;   /* user modules destroyed */
static int users_freed; /* transform users, dataset contexts, callback contexts freed */

static void counted_destroy(ts_module *self) {
    (void)self;
    destroyed++;
}

static ts_tensor *identity_forward(ts_module *self, ts_tensor *x) {
    (void)self;
    return ts_retain(x);
}

/* a root module with one parameter whose destruction is counted */
static ts_module *counted(void) {
    ts_module *m = ts_module_alloc(sizeof(ts_module), "Counted", identity_forward);
    if (!m) return NULL;
    m->destroy = counted_destroy;
    ts_module_param(m, "weight", ts_ones(TS_SHAPE(2), (ts_opts){0}));
    return m;
}

static void free_user(void *p) {
    free(p);
    users_freed++;
}

static int64_t live_tensors(void) {
    ts_mem_stats s = {0};
    ts_memory_stats(ts_cpu(), &s);
    return s.live_tensors;
}

/* ------------------------------------------------------------------ modules */
static void module_add(void) {
    destroyed = 0;
    CHECK(ts_module_add(NULL, "child", counted()) == NULL); /* NULL parent */
    CHECK_ERR(TS_ERR_ARG);
    CHECK_EQ(destroyed, 1);

    ts_module *parent = counted();
    CHECK(ts_module_add(parent, "a.b", counted()) == NULL); /* a name with a dot */
    CHECK_ERR(TS_ERR_ARG);
    CHECK_EQ(destroyed, 2);

    /* a child of another module stays with it */
    ts_module *child = ts_module_add(parent, "child", counted());
    CHECK(child != NULL);
    ts_module *other = counted();
    CHECK(ts_module_add(other, "stolen", child) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "already belongs");
    CHECK_EQ(destroyed, 2);
    /* and an ancestor of the parent (a cycle) is not freed either */
    CHECK(ts_module_add(child, "cycle", parent) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "cycle");
    CHECK_EQ(destroyed, 2);
    ts_module_free(other);
    ts_module_free(parent); /* parent and child */
    CHECK_EQ(destroyed, 5);
    CHECK_OK();
}

static void module_param(void) {
    const int64_t before = live_tensors();
    ts_module *m = counted();
    /* outside any scope the module takes over the caller's reference, on failure too */
    CHECK(ts_module_param(m, "bad.name", ts_ones(TS_SHAPE(3), (ts_opts){0})) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_module_buffer(NULL, "buf", ts_ones(TS_SHAPE(3), (ts_opts){0})) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    ts_module_free(m);
    CHECK_EQ(live_tensors(), before);
    CHECK_OK();
}

static void sequential(void) {
    destroyed = 0;
    ts_module *mods[3] = {counted(), NULL, counted()}; /* a constructor that failed */
    CHECK(ts_sequential_new(3, mods) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK_EQ(destroyed, 2);

    ts_module *a = counted();
    ts_module *twice[3] = {a, counted(), a}; /* the same module twice: freed once */
    CHECK(ts_sequential_new(3, twice) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "already belongs");
    CHECK_EQ(destroyed, 4);

    ts_module *not_seq = counted();
    CHECK(ts_sequential_append(not_seq, counted()) == not_seq); /* returns seq, as documented */
    CHECK_ERR_HAS(TS_ERR_ARG, "not a Sequential");
    CHECK_EQ(destroyed, 5);
    ts_module_free(not_seq);
    CHECK_EQ(destroyed, 6);
    CHECK_OK();
}

static void resnet_blocks(void) {
    destroyed = 0;
    CHECK(ts_basic_block_new(0, 8, 1, counted()) == NULL); /* inplanes 0 */
    CHECK_ERR(TS_ERR_ARG);
    CHECK_EQ(destroyed, 1);
    CHECK(ts_bottleneck_new(8, 8, 1, counted(), -1, 64) == NULL); /* groups -1 */
    CHECK_ERR(TS_ERR_ARG);
    CHECK_EQ(destroyed, 2);
    CHECK_OK();
}

/* the wrappers: DataParallel, DistributedDataParallel, FullyShardedDataParallel */
static void wrappers(void) {
    destroyed = 0;
    const ts_device same[2] = {ts_cpu(), ts_cpu()};
    CHECK(ts_data_parallel_new(counted(), same, 2, (ts_device){0}) ==
          NULL); /* devices not distinct */
    CHECK_ERR(TS_ERR_ARG);
    CHECK_EQ(destroyed, 1);

    CHECK(ts_ddp_new(counted(), (ts_ddp_opts){.bucket_cap_mb = -1}) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK_EQ(destroyed, 2);
    CHECK(ts_ddp_new(counted(), (ts_ddp_opts){.overlap = 7}) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK_EQ(destroyed, 3);
    CHECK(ts_fsdp_new(counted(), (ts_fsdp_opts){.stage = 7}) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK_EQ(destroyed, 4);
    CHECK(ts_fsdp_new(counted(), (ts_fsdp_opts){.param_dtype = TS_I32}) == NULL);
    CHECK_ERR(TS_ERR_DTYPE);
    CHECK_EQ(destroyed, 5);
    if (!ts_dist_is_initialized()) { /* no process group: the wrap itself fails */
        CHECK(ts_ddp_new(counted(), (ts_ddp_opts){0}) == NULL);
        CHECK(ts_error() != TS_OK);
        ts_error_clear();
        CHECK_EQ(destroyed, 6);
        CHECK(ts_fsdp_new(counted(), (ts_fsdp_opts){0}) == NULL);
        CHECK(ts_error() != TS_OK);
        ts_error_clear();
        CHECK_EQ(destroyed, 7);
    }

    /* a module that belongs to another is left to it by every wrapper */
    ts_module *parent = counted();
    ts_module *child = ts_module_add(parent, "child", counted());
    const int before = destroyed;
    CHECK(ts_data_parallel_new(child, NULL, 0, (ts_device){0}) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "already belongs");
    CHECK(ts_ddp_new(child, (ts_ddp_opts){0}) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "already belongs");
    CHECK(ts_fsdp_new(child, (ts_fsdp_opts){0}) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "already belongs");
    CHECK_EQ(destroyed, before);
    CHECK(ts_module_child(parent, "child") == child);
    ts_module_free(parent);
    CHECK_EQ(destroyed, before + 2);
    CHECK_OK();
}

/* ------------------------------------------------------------------ data */
static ts_tensor *keep_x(ts_tensor *x, const ts_transform_ctx *c, void *user) {
    (void)c;
    (void)user;
    return x;
}

static ts_transform *counted_transform(void) {
    return ts_transform_new(keep_x, malloc(16), free_user);
}

static int64_t ds_len(void *ctx) {
    (void)ctx;
    return 1;
}

static ts_status ds_get(void *ctx, int64_t index, ts_sample *out) {
    (void)ctx;
    (void)index;
    out->x = ts_retain(ts_zeros(TS_SHAPE(1), (ts_opts){0}));
    out->y = ts_retain(ts_zeros(TS_SHAPE(1), (ts_opts){0}));
    return TS_OK;
}

static void data(void) {
    users_freed = 0;
    CHECK(ts_transform_new(NULL, malloc(16), free_user) == NULL); /* fn NULL */
    CHECK_ERR(TS_ERR_ARG);
    CHECK_EQ(users_freed, 1);

    ts_transform *given[3] = {counted_transform(), NULL, counted_transform()};
    CHECK(ts_compose_new(3, given) == NULL); /* a NULL transform: the others are freed */
    CHECK_ERR(TS_ERR_ARG);
    CHECK_EQ(users_freed, 3);

    CHECK(ts_loader_new(NULL, (ts_loader_opts){.transform = counted_transform()}) == NULL);
    CHECK(ts_error() != TS_OK);
    ts_error_clear();
    CHECK_EQ(users_freed, 4);
    ts_dataset *d = ts_dataset_new(&(ts_dataset_ops){.len = ds_len, .get = ds_get}, NULL);
    CHECK(d != NULL);
    CHECK(ts_loader_new(d, (ts_loader_opts){.batch_size = -1, .transform = counted_transform()}) ==
          NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK_EQ(users_freed, 5);
    ts_dataset_free(d);

    /* a dataset without a get: the context is freed */
    CHECK(ts_dataset_new(&(ts_dataset_ops){.len = ds_len, .free = free_user}, malloc(16)) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK_EQ(users_freed, 6);
    CHECK_OK();
}

/* ------------------------------------------------------------------ autograd contexts */
static ts_status failing_fn(void *ctx, ts_tensor *const *in, int n_in, ts_tensor **out, int n_out) {
    (void)ctx;
    (void)in;
    (void)n_in;
    (void)out;
    (void)n_out;
    return ts_error_set(TS_ERR_ARG, "failing_fn: refused");
}

static ts_status no_backward(void *ctx, ts_tensor *const *g, int n_out, ts_tensor **gi, int n_in) {
    (void)ctx;
    (void)g;
    (void)n_out;
    (void)gi;
    (void)n_in;
    return TS_OK;
}

static void callback_contexts(void) {
    users_freed = 0;
    ts_scope_begin();
    ts_tensor *x = ts_ones(TS_SHAPE(2), (ts_opts){0});
    ts_set_requires_grad(x, true);
    ts_tensor *y = NULL;
    CHECK(ts_checkpoint(failing_fn, malloc(16), free_user, &x, 1, &y, 1) == TS_ERR_ARG);
    ts_error_clear();
    CHECK(y == NULL);
    CHECK_EQ(users_freed, 1);
    /* bad arguments: the context is taken over too */
    CHECK(ts_checkpoint(NULL, malloc(16), free_user, &x, 1, &y, 1) != TS_OK);
    ts_error_clear();
    CHECK_EQ(users_freed, 2);

    ts_tensor *res = NULL;
    const ts_custom_function no_bw = {.backward = NULL, .ctx = malloc(16), .ctx_free = free_user};
    CHECK(ts_custom_function_apply(&no_bw, &x, 1, &x, 1, &res) == TS_ERR_ARG); /* no backward */
    ts_error_clear();
    CHECK(res == NULL);
    CHECK_EQ(users_freed, 3);
    const ts_custom_function bad_n = {
        .backward = no_backward, .ctx = malloc(16), .ctx_free = free_user};
    CHECK(ts_custom_function_apply(&bad_n, &x, -1, &x, 1, &res) == TS_ERR_ARG); /* n_inputs < 0 */
    ts_error_clear();
    CHECK_EQ(users_freed, 4);
    ts_scope_end();
    CHECK_OK();
}

int main(void) {
    module_add();
    module_param();
    sequential();
    resnet_blocks();
    wrappers();
    data();
    callback_contexts();
    return ts_test_finish();
}
