/* data_parallel.c — the DataParallel module: scatter the batch, replicate the module, run the
 * replicas in threads, gather the outputs (torch/nn/parallel/data_parallel.py). */
#include <stdio.h>
#include <string.h>

#include "parallel/parallel_internal.h"

typedef struct dp_module {
    ts_module base;
    ts_module *module; /* child "module" */
    int n;             /* 0: no devices, the module runs as it is */
    ts_device devices[TSI_DP_MAX_DEVICES];
    ts_device output;
} dp_module;

/* ------------------------------------------------------------------ placement check */
/* The first parameter or buffer of the tree that is not on d, with its dotted name in path. */
static ts_tensor *misplaced(ts_module *m, ts_device d, char *path, size_t len, size_t cap) {
    const tsi_named *lists[2] = {&m->impl->params, &m->impl->buffers};
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < lists[k]->n; i++) {
            ts_tensor *t = lists[k]->items[i];
            if (!tsi_device_eq(tsi_device(t), d)) {
                snprintf(path + len, cap - len, "%s%s", len ? "." : "", lists[k]->names[i]);
                return t;
            }
        }
    for (int i = 0; i < m->impl->children.n; i++) {
        int w = snprintf(path + len, cap - len, "%s%s", len ? "." : "", m->impl->children.names[i]);
        size_t sub = w > 0 && len + (size_t)w < cap ? len + (size_t)w : len;
        ts_tensor *t = misplaced(m->impl->children.items[i], d, path, sub, cap);
        if (t) return t;
        path[len] = '\0';
    }
    return NULL;
}

static bool check_placement(dp_module *dp) {
    char path[512] = "";
    ts_device d0 = dp->devices[0];
    ts_tensor *t = misplaced(dp->module, d0, path, 0, sizeof path);
    if (!t) return true;
    char want[32], got[32];
    snprintf(want, sizeof want, "%s", ts_device_str(d0));
    snprintf(got, sizeof got, "%s", ts_device_str(tsi_device(t)));
    tsi_error_set(TS_ERR_DEVICE,
                  "DataParallel: module must have its parameters and buffers on device %s "
                  "(device_ids[0]) but found one of them on device: %s (%s)",
                  want, got, path);
    return false;
}

/* ------------------------------------------------------------------ forward */
static ts_tensor *dp_forward(ts_module *self, ts_tensor *x) {
    dp_module *dp = (dp_module *)self;
    if (dp->n == 0) return ts_forward(dp->module, x);
    if (!check_placement(dp)) return NULL;
    ts_tensor *chunks[TSI_DP_MAX_DEVICES];
    int k = ts_parallel_scatter(x, dp->devices, dp->n, chunks);
    if (k < 0) return NULL;
    /* one device: the module itself, no gather (PyTorch) */
    if (dp->n == 1) return ts_forward(dp->module, chunks[0]);
    ts_module *replicas[TSI_DP_MAX_DEVICES];
    if (!tsi_replicate(dp->module, dp->devices, k, replicas)) return NULL;
    ts_tensor *outs[TSI_DP_MAX_DEVICES];
    bool ok = tsi_parallel_apply(replicas, chunks, dp->devices, k, outs);
    /* the autograd graph keeps what backward needs of the replicas' tensors */
    tsi_replicas_free(replicas, k);
    if (!ok) return NULL;
    ts_tensor *y = ts_parallel_gather(outs, k, dp->output);
    for (int i = 0; i < k; i++) ts_release(outs[i]);
    return y;
}

/* ------------------------------------------------------------------ construction */
/* devices NULL, n 0: every CUDA device, else every sim device (torch's _get_all_device_indices
 * for the available device type). */
static int all_devices(ts_device *out) {
    ts_device_type t = ts_device_count(TS_CUDA) > 0 ? TS_CUDA : TS_SIM;
    int n = ts_device_count(t);
    if (n > TSI_DP_MAX_DEVICES) n = TSI_DP_MAX_DEVICES;
    for (int i = 0; i < n; i++) out[i] = (ts_device){t, i};
    return n;
}

static bool set_devices(dp_module *dp, const ts_device *devices, int n, ts_device output) {
    const char *op = "DataParallel";
    if (!devices && n == 0) {
        dp->n = all_devices(dp->devices);
    } else {
        if (!devices || n <= 0 || n > TSI_DP_MAX_DEVICES)
            return tsi_error_set(TS_ERR_ARG, "%s: expected 1 to %d devices, got %d%s", op,
                                 TSI_DP_MAX_DEVICES, n, devices ? "" : " and devices is NULL"),
                   false;
        for (int i = 0; i < n; i++) {
            ts_device d = tsi_resolve_device(devices[i]);
            if (!tsi_check_device(op, d)) return false;
            /* two replicas on one device would share (and race on) the original's tensors */
            for (int j = 0; j < i; j++)
                if (tsi_device_eq(dp->devices[j], d))
                    return tsi_error_set(TS_ERR_ARG,
                                         "%s: device %s appears more than once in devices", op,
                                         ts_device_str(d)),
                           false;
            dp->devices[i] = d;
        }
        dp->n = n;
    }
    if (output.type == TS_DEVICE_DEFAULT) output = dp->n > 0 ? dp->devices[0] : ts_default_device();
    output = tsi_resolve_device(output);
    if (!tsi_check_device(op, output)) return false;
    dp->output = output;
    return true;
}

ts_module *ts_data_parallel(ts_module *module, const ts_device *devices, int n,
                            ts_device output_device) {
    tsi_init();
    const char *op = "DataParallel";
    if (!module) {
        if (!ts_error()) tsi_error_set(TS_ERR_ARG, "%s: module is NULL", op);
        return NULL;
    }
    if (module->impl->parent) /* not ours to free */
        return tsi_error_set(TS_ERR_ARG, "%s: %s already belongs to %s", op, module->type_name,
                             module->impl->parent->type_name),
               NULL;
    dp_module *dp = ts_module_alloc(sizeof *dp, op, dp_forward);
    if (!dp) {
        ts_module_free(module);
        return NULL;
    }
    if (!set_devices(dp, devices, n, output_device)) {
        ts_module_free(module);
        ts_module_free(&dp->base);
        return NULL;
    }
    dp->module = ts_module_add(&dp->base, "module", module); /* frees module on failure */
    if (!dp->module) {
        ts_module_free(&dp->base);
        return NULL;
    }
    /* PyTorch moves the module when there is one device; with more it is the caller's job */
    if (dp->n == 1) {
        ts_status before = ts_error();
        ts_module_to(dp->module, dp->devices[0]);
        if (before == TS_OK && ts_error() != TS_OK) {
            ts_module_free(&dp->base);
            return NULL;
        }
    }
    return &dp->base;
}

ts_module *ts_data_parallel_module(ts_module *dp) {
    if (!dp) {
        if (!ts_error()) tsi_error_set(TS_ERR_ARG, "data_parallel_module: module is NULL");
        return NULL;
    }
    if (dp->forward != dp_forward)
        return tsi_error_set(TS_ERR_ARG, "data_parallel_module: %s is not a DataParallel",
                             dp->type_name),
               NULL;
    return ((dp_module *)dp)->module;
}
