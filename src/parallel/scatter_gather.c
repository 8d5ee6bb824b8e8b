/* scatter_gather.c — torch.nn.parallel's scatter (chunks of the batch to the devices) and gather
 * (the replicas' outputs back on one device), built from differentiable narrow/ts_to/ts_cat. */
#include <stdatomic.h>
#include <stdio.h>

#include "parallel/parallel_internal.h"

static bool check_devices(const char *op, const ts_device *devices, int n) {
    if (!devices || n <= 0 || n > TSI_DP_MAX_DEVICES)
        return tsi_error_set(TS_ERR_ARG, "%s: expected 1 to %d devices, got %d%s", op,
                             TSI_DP_MAX_DEVICES, n, devices ? "" : " (devices is NULL)"),
               false;
    for (int i = 0; i < n; i++)
        if (!tsi_check_device(op, tsi_resolve_device(devices[i]))) return false;
    return true;
}

int ts_parallel_scatter(ts_tensor *x, const ts_device *devices, int n, ts_tensor **out) {
    const char *op = "parallel_scatter";
    tsi_init();
    if (!tsi_check_input(op, x, "input") || !check_devices(op, devices, n)) return -1;
    if (!out) return tsi_error_set(TS_ERR_ARG, "%s: out is NULL", op), -1;
    if (x->shape.ndim == 0)
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s: the input has no batch dimension to scatter: %s (chunk expects "
                             "at least a 1-dimensional tensor)",
                             op, tsi_desc(x)),
               -1;
    ts_tensor *pieces[TSI_DP_MAX_DEVICES];
    /* the pieces die with this scope; the copies are kept for the caller */
    ts_scope_begin();
    int k = ts_chunk(x, n, 0, pieces, n);
    for (int i = 0; i < k; i++) out[i] = ts_keep(ts_to(pieces[i], devices[i]));
    bool ok = k > 0;
    for (int i = 0; i < k; i++) ok &= out[i] != NULL;
    ts_scope_end();
    return ok ? k : -1;
}

/* PyTorch warns through Python's warnings module, which shows a warning once per place. */
static atomic_bool scalar_warned;

ts_tensor *ts_parallel_gather(ts_tensor *const *ts, int n, ts_device device) {
    const char *op = "parallel_gather";
    tsi_init();
    if (!ts || n <= 0 || n > TSI_DP_MAX_DEVICES)
        return tsi_error_set(TS_ERR_ARG, "%s: expected 1 to %d tensors, got %d%s", op,
                             TSI_DP_MAX_DEVICES, n, ts ? "" : " (ts is NULL)"),
               NULL;
    bool all_scalars = true;
    for (int i = 0; i < n; i++) {
        if (!tsi_check_input(op, ts[i], "tensor")) return NULL;
        all_scalars &= ts[i]->shape.ndim == 0;
    }
    ts_device d = tsi_resolve_device(device);
    if (!tsi_check_device(op, d)) return NULL;
    if (all_scalars && !atomic_exchange(&scalar_warned, true))
        fprintf(stderr, "tessera: UserWarning: Was asked to gather along dimension 0, but all "
                        "input tensors were scalars; will instead unsqueeze and return a "
                        "vector.\n");
    ts_tensor *parts[TSI_DP_MAX_DEVICES];
    ts_scope_begin();
    for (int i = 0; i < n; i++) {
        ts_tensor *t = all_scalars ? ts_reshape(ts[i], TS_SHAPE(1)) : ts[i];
        parts[i] = ts_to(t, d);
    }
    ts_tensor *y = ts_keep(ts_cat(parts, n, 0));
    ts_scope_end();
    return y;
}
