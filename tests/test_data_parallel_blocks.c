/* test_data_parallel_blocks.c — data parallel's failure paths and parts: errors from the
 * placement check and from inside a replica, memory back to baseline after many steps, out of
 * memory on a replica's device, the coalesced broadcast (one BroadcastBackward node for all
 * replicas' parameters, whose backward sums their gradients onto devices[0]) and the scatter /
 * gather building blocks. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/autograd.h" /* ts_node: which node a replica's parameter hangs off */
#include "dp_util.h"
#include "parallel/parallel_internal.h"
#include "parallel/transport.h"
#include "ts_test.h"

/* ------------------------------------------------------------------ errors */
static void errors(void) {
    int destroyed = 0;
    /* parameters not on devices[0]: PyTorch's message, TS_ERR_DEVICE */
    ts_module *dp = ts_data_parallel_new(net_new(ts_cpu(), &destroyed), devs, NDEV, DEV0);
    ts_scope_begin();
    ts_tensor *x, *y;
    batch(5, 8, &x, &y);
    CHECK(ts_forward(dp, x) == NULL);
    printf("wrong device: %s\n", ts_error_message());
    CHECK(strstr(ts_error_message(),
                 "module must have its parameters and buffers on device sim:0 (device_ids[0]) "
                 "but found one of them on device: cpu") != NULL);
    CHECK_ERR(TS_ERR_DEVICE);
    /* once moved, it runs */
    ts_module_to(dp, devs[0]);
    CHECK(ts_forward(dp, x) != NULL);
    CHECK_OK();

    /* a shape error inside the replica on sim:2 comes back with its message, prefixed */
    ((net *)ts_data_parallel_module(dp))->fail_on_sim = 2;
    ts_mem_stats before[NDEV];
    for (int i = 0; i < NDEV; i++) before[i] = stats(devs[i]);
    ts_scope_begin();
    CHECK(ts_forward(dp, x) == NULL);
    printf("worker error: %s\n", ts_error_message());
    CHECK(strncmp(ts_error_message(), "DataParallel: in replica 2 on device sim:2: add:", 48) == 0);
    CHECK(strstr(ts_error_message(), "cannot be broadcast") != NULL);
    CHECK_ERR(TS_ERR_SHAPE);
    ts_scope_end();
    for (int i = 0; i < NDEV; i++) CHECK_EQ(stats(devs[i]).live_tensors, before[i].live_tensors);
    ((net *)ts_data_parallel_module(dp))->fail_on_sim = -1;

    /* every replica fails (wrong feature count): the first one's error is reported */
    CHECK(ts_forward(dp, ts_randn(TS_SHAPE(8, IN + 1), (ts_opts){.device = ts_cpu()})) == NULL);
    CHECK(strncmp(ts_error_message(), "DataParallel: in replica 0 on device sim:0: ", 44) == 0);
    CHECK_ERR(TS_ERR_SHAPE);
    /* a 0-dim input has no batch to scatter */
    CHECK(ts_forward(dp, ts_scalar(1, (ts_opts){0})) == NULL);
    CHECK_ERR(TS_ERR_SHAPE);
    ts_scope_end();
    CHECK_EQ(destroyed, 0); /* replicas never ran the destroy hook */
    ts_module_free(dp);
    CHECK_EQ(destroyed, 1);

    /* construction errors free the module (no leak under ASan) */
    ts_device dup[2] = {devs[0], devs[0]};
    CHECK(ts_data_parallel_new(net_new(devs[0], NULL), dup, 2, DEV0) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    ts_device bad[2] = {devs[0], ts_sim(40)};
    CHECK(ts_data_parallel_new(net_new(devs[0], NULL), bad, 2, DEV0) == NULL);
    CHECK_ERR(TS_ERR_DEVICE);
    CHECK(ts_data_parallel_new(net_new(devs[0], NULL), NULL, 3, DEV0) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_data_parallel_new(NULL, devs, NDEV, DEV0) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    ts_module *lin = ts_linear_new(2, 2);
    CHECK(ts_data_parallel_module(lin) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    ts_module_free(lin);
    CHECK_EQ(stats(devs[0]).live_tensors, 0);
}

/* ------------------------------------------------------------------ memory */
static void no_leaks(void) {
    ts_manual_seed(14);
    ts_module *dp = ts_data_parallel_new(net_new(devs[0], NULL), devs, NDEV, DEV0);
    ts_optim *opt = ts_sgd_new(dp, (ts_sgd_opts){.lr = 0.05, .momentum = 0.9});
    /* one step first: momentum buffers and the allocator's cache are in place from then on */
    ts_mem_stats base[NDEV + 1];
    for (int step = 0; step < 25; step++) {
        ts_scope_begin();
        ts_tensor *x, *y;
        batch(step, 16, &x, &y);
        ts_optim_zero_grad(opt);
        ts_backward(ts_cross_entropy(ts_forward(dp, x), ts_to(y, devs[0])));
        ts_optim_step(opt);
        ts_scope_end();
        ts_optim_zero_grad(opt);
        if (step == 0) {
            for (int i = 0; i < NDEV; i++) base[i] = stats(devs[i]);
            base[NDEV] = stats(ts_cpu());
        }
    }
    CHECK_OK();
    for (int i = 0; i < NDEV; i++) {
        ts_mem_stats s = stats(devs[i]);
        CHECK_EQ(s.live_tensors, base[i].live_tensors);
        CHECK_EQ(s.allocated, base[i].allocated);
    }
    CHECK_EQ(stats(ts_cpu()).live_tensors, base[NDEV].live_tensors);
    printf("after 25 steps: sim:0 holds %lld tensors (%zu bytes), sim:1..3 hold %lld\n",
           (long long)stats(devs[0]).live_tensors, stats(devs[0]).allocated,
           (long long)(stats(devs[1]).live_tensors + stats(devs[2]).live_tensors +
                       stats(devs[3]).live_tensors));
    ts_optim_free(opt);
    ts_module_free(dp);
    for (int i = 0; i < NDEV; i++) CHECK_EQ(stats(devs[i]).live_tensors, 0);
}

/* ------------------------------------------------------------------ out of memory */
/* Devices of 8 MiB: a batch whose activations do not fit fails in the replicas with TS_ERR_OOM,
 * and everything made on the way is released. Runs last: it re-configures the sim devices. */
static void out_of_memory(void) {
    for (int i = 0; i < NDEV; i++) CHECK_EQ(stats(devs[i]).live_tensors, 0);
    CHECK_EQ(ts_sim_configure(NDEV, 8u << 20), TS_OK);
    ts_manual_seed(16);
    ts_module *dp = ts_data_parallel_new(net_new(devs[0], NULL), devs, NDEV, DEV0);
    ts_mem_stats before[NDEV];
    for (int i = 0; i < NDEV; i++) before[i] = stats(devs[i]);
    ts_scope_begin();
    /* 100,000 rows per device: the input piece fits (2.4 MB), its 16 hidden features do not */
    ts_tensor *x = ts_zeros(TS_SHAPE(NDEV * 100000, IN), (ts_opts){.device = ts_cpu()});
    CHECK(ts_forward(dp, x) == NULL);
    printf("out of memory: %.110s...\n", ts_error_message());
    CHECK(strncmp(ts_error_message(), "DataParallel: in replica 0 on device sim:0: ", 44) == 0);
    CHECK(strstr(ts_error_message(), "out of memory") != NULL);
    CHECK_ERR(TS_ERR_OOM);
    ts_scope_end();
    for (int i = 0; i < NDEV; i++) {
        CHECK_EQ(stats(devs[i]).live_tensors, before[i].live_tensors);
        CHECK_EQ(stats(devs[i]).allocated, before[i].allocated);
    }
    /* a batch that fits still runs */
    ts_scope_begin();
    CHECK(ts_forward(dp, ts_zeros(TS_SHAPE(64, IN), (ts_opts){.device = ts_cpu()})) != NULL);
    ts_scope_end();
    CHECK_OK();
    ts_module_free(dp);
    CHECK_EQ(ts_sim_configure(NDEV, 0), TS_OK);
}

/* ------------------------------------------------------------------ the coalesced broadcast */
/* DataParallel's replicas: every copy of every parameter on sim:1..3 hangs off one
 * BroadcastBackward node (5 parameters in, 5 x 3 copies out), replica 0 runs on the parameters
 * themselves, no_grad records nothing, and the gradients equal the single-device ones. */
static void broadcast_node_in_dp(void) {
    ts_manual_seed(17);
    ts_module *ref = net_new(devs[0], NULL);
    ts_module *dp = ts_data_parallel_new(net_clone(ref, devs[0]), devs, NDEV, DEV0);
    ts_scope_begin();
    ts_tensor *x, *y;
    batch(5, 8, &x, &y);
    ts_backward(ts_cross_entropy(ts_forward(ref, ts_to(x, devs[0])), ts_to(y, devs[0])));
    reset_logs();
    ts_tensor *o = ts_forward(dp, x);
    CHECK(o != NULL);
    CHECK(atomic_load(&logs[0].scale_fn) == NULL); /* the original parameter, a leaf */
    ts_node *node = atomic_load(&logs[1].scale_fn);
    CHECK(node != NULL);
    if (node) {
        CHECK_STREQ(node->name, "BroadcastBackward");
        CHECK_EQ(node->n_in, 5);
        CHECK_EQ(node->n_out, 5 * (NDEV - 1));
    }
    for (int i = 2; i < NDEV; i++) CHECK(atomic_load(&logs[i].scale_fn) == node);
    ts_backward(ts_cross_entropy(o, ts_to(y, devs[0])));
    CHECK_OK();
    CHECK(params_diff(ref, dp, true) <= 1e-6);
    /* under no_grad the replicas get plain copies */
    reset_logs();
    ts_no_grad_begin();
    CHECK(ts_forward(dp, x) != NULL);
    ts_no_grad_end();
    for (int i = 0; i < NDEV; i++) CHECK(atomic_load(&logs[i].scale_fn) == NULL);
    ts_scope_end();
    ts_module_free(ref);
    ts_module_free(dp);
}

/* sum of the tensors, each moved to the cpu as float64: an independent reference for the sums */
static ts_tensor *cpu_sum(ts_tensor *const *ts, int n) {
    ts_tensor *acc = NULL;
    for (int i = 0; i < n; i++) {
        ts_tensor *c = ts_to_dtype(ts_to(ts[i], ts_cpu()), TS_F64);
        acc = acc ? ts_add(acc, c) : c;
    }
    return acc;
}

/* tsi_broadcast_coalesced on its own: values, devices and dtypes of the copies; one node for the
 * tensors that require grad and none for the one that does not; the backward sum (parameter b gets
 * no gradient from sim:2: a missing contribution counts as zeros) plus the original's own use. */
static void broadcast_coalesced_direct(void) {
    ts_scope_begin();
    ts_manual_seed(18);
    ts_opts on0 = {.device = devs[0]};
    ts_tensor *a = ts_randn(TS_SHAPE(3, 2), on0);
    ts_tensor *b = ts_randn(TS_SHAPE(4), (ts_opts){.dtype = TS_F64, .device = devs[0]});
    ts_tensor *c = ts_randn(TS_SHAPE(2), on0);
    ts_set_requires_grad(a, true);
    ts_set_requires_grad(b, true);
    ts_tensor *params[3] = {a, b, c};
    ts_tensor *copies[3 * (NDEV - 1)];
    CHECK(tsi_broadcast_coalesced(params, 3, devs, NDEV, copies));
    CHECK_OK();
    ts_node *node = copies[0] ? copies[0]->grad_fn : NULL;
    CHECK(node && strcmp(node->name, "BroadcastBackward") == 0);
    for (int r = 1; r < NDEV; r++)
        for (int i = 0; i < 3; i++) {
            ts_tensor *t = copies[(r - 1) * 3 + i];
            CHECK(t && ts_device_equal(ts_device_of(t), devs[r]));
            CHECK(t && ts_dtype_of(t) == ts_dtype_of(params[i]));
            CHECK(max_diff(t, params[i]) == 0);
            CHECK(t && t->grad_fn == (i < 2 ? node : NULL) && ts_requires_grad(t) == (i < 2));
        }
    /* loss = sum(a * w0) + sum_r sum(copy_a_r * wa_r) + sum_{r != 2} sum(copy_b_r * wb_r) */
    ts_tensor *wa[NDEV], *wb[NDEV], *wb_used[NDEV];
    int nb = 0;
    ts_tensor *loss = ts_sum(ts_mul(a, wa[0] = ts_randn(TS_SHAPE(3, 2), on0)));
    for (int r = 1; r < NDEV; r++) {
        ts_opts on_r = {.device = devs[r]};
        wa[r] = ts_randn(TS_SHAPE(3, 2), on_r);
        wb[r] = ts_randn(TS_SHAPE(4), (ts_opts){.dtype = TS_F64, .device = devs[r]});
        ts_tensor *part = ts_sum(ts_mul(copies[(r - 1) * 3], wa[r]));
        if (r != 2) {
            part =
                ts_add(part, ts_to_dtype(ts_sum(ts_mul(copies[(r - 1) * 3 + 1], wb[r])), TS_F32));
            wb_used[nb++] = wb[r];
        }
        loss = ts_add(loss, ts_to(part, devs[0]));
    }
    ts_backward(loss);
    CHECK_OK();
    CHECK(ts_grad(a) && ts_device_equal(ts_device_of(ts_grad(a)), devs[0]));
    CHECK(ts_grad(b) && ts_dtype_of(ts_grad(b)) == TS_F64);
    CHECK(max_diff(ts_grad(a), cpu_sum(wa, NDEV)) <= 1e-6);
    CHECK(max_diff(ts_grad(b), cpu_sum(wb_used, nb)) <= 1e-12);
    CHECK(ts_grad(c) == NULL);
    for (int k = 0; k < 3 * (NDEV - 1); k++) ts_release(copies[k]);
    /* the transport alone: all-NULL contributions sum to no tensor at all */
    ts_tensor *none[NDEV] = {0}, *sum = a;
    CHECK(tsi_transport_reduce_add("test", none, 1, devs, NDEV, &sum));
    CHECK(sum == NULL);
    /* under no_grad: copies without history */
    ts_no_grad_begin();
    CHECK(tsi_broadcast_coalesced(params, 3, devs, 2, copies));
    ts_no_grad_end();
    for (int i = 0; i < 3; i++) {
        CHECK(copies[i] && copies[i]->grad_fn == NULL && !ts_requires_grad(copies[i]));
        ts_release(copies[i]);
    }
    ts_scope_end();
    CHECK_OK();
    for (int i = 1; i < NDEV; i++) CHECK_EQ(stats(devs[i]).live_tensors, 0);
}

/* ------------------------------------------------------------------ scatter and gather */
static void building_blocks(void) {
    ts_scope_begin();
    ts_tensor *x = ts_arange(0, 10, 1, (ts_opts){.dtype = TS_F32, .device = ts_cpu()});
    x = ts_reshape(x, TS_SHAPE(5, 2));
    ts_set_requires_grad(x, true);
    ts_tensor *parts[NDEV];
    CHECK_EQ(ts_parallel_scatter(x, devs, NDEV, parts), 3);
    int64_t rows[3] = {2, 2, 1};
    for (int i = 0; i < 3; i++) {
        CHECK(ts_device_equal(ts_device_of(parts[i]), devs[i]) && ts_size(parts[i], 0) == rows[i]);
        CHECK_EQ(ts_item(ts_select(ts_select(parts[i], 0, 0), 0, 0)), 4 * i);
    }
    /* gather on sim:3 along dim 0 is the identity; backward reaches x on the cpu */
    ts_tensor *g = ts_parallel_gather(parts, 3, devs[3]);
    CHECK(ts_device_equal(ts_device_of(g), devs[3]) && max_diff(g, x) == 0);
    ts_tensor *w = ts_arange(1, 11, 1, (ts_opts){.device = devs[3]});
    ts_backward(ts_sum(ts_mul(g, ts_reshape(w, TS_SHAPE(5, 2)))));
    CHECK(ts_grad(x) && ts_device_of(ts_grad(x)).type == TS_CPU);
    CHECK(max_diff(ts_grad(x), ts_arange(1, 11, 1, (ts_opts){.device = ts_cpu()})) == 0);
    /* 0-dim outputs (a loss per replica) become a vector */
    ts_tensor *losses[3];
    for (int i = 0; i < 3; i++) losses[i] = ts_scalar(i + 0.5, (ts_opts){.device = devs[i]});
    ts_tensor *v = ts_parallel_gather(losses, 3, ts_cpu());
    CHECK(v && ts_ndim(v) == 1 && ts_size(v, 0) == 3 && ts_item(ts_sum(v)) == 4.5);
    /* errors */
    CHECK_EQ(ts_parallel_scatter(ts_scalar(1, (ts_opts){0}), devs, NDEV, parts), -1);
    CHECK_ERR(TS_ERR_SHAPE);
    CHECK(ts_parallel_gather(parts, 0, ts_cpu()) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    ts_tensor *mixed[2] = {ts_zeros(TS_SHAPE(2, 3), (ts_opts){0}),
                           ts_zeros(TS_SHAPE(2, 4), (ts_opts){0})};
    CHECK(ts_parallel_gather(mixed, 2, ts_cpu()) == NULL);
    CHECK_ERR(TS_ERR_SHAPE);
    ts_scope_end();
    CHECK_OK();
}

int main(void) {
    if (ts_device_count(TS_SIM) < NDEV) return ts_test_skip("needs TS_SIM_DEVICES=%d", NDEV);
    for (int i = 0; i < NDEV; i++) devs[i] = ts_sim(i);
    errors();
    no_leaks();
    building_blocks();
    broadcast_node_in_dp();
    broadcast_coalesced_direct();
    out_of_memory();
    return ts_test_finish();
}
