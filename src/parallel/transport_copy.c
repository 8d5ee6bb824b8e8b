/* transport_copy.c — the transport every device type supports: one device copy per tensor and
 * device (the backend's copy_d2d between devices of one type, through tsi_to_device), and the
 * reduction as adds on devices[0] in device order. */
#include "parallel/transport.h"

static void release_all(ts_tensor **ts, int n) {
    for (int i = 0; i < n; i++) {
        ts_release(ts[i]);
        ts[i] = NULL;
    }
}

bool tsi_copy_broadcast(const char *op, ts_tensor *const *src, int n_tensors,
                        const ts_device *devices, int n_devices, ts_tensor **dst) {
    const int total = n_tensors * (n_devices - 1);
    for (int k = 0; k < total; k++) dst[k] = NULL;
    for (int r = 1; r < n_devices; r++)
        for (int i = 0; i < n_tensors; i++) {
            ts_tensor **d = &dst[(r - 1) * n_tensors + i];
            if (!(*d = tsi_to_device(op, src[i], devices[r]))) {
                release_all(dst, total);
                return false;
            }
        }
    return true;
}

bool tsi_copy_reduce_add(const char *op, ts_tensor *const *ins, int n_tensors,
                         const ts_device *devices, int n_devices, ts_tensor **out) {
    for (int i = 0; i < n_tensors; i++) out[i] = NULL;
    bool ok = true;
    /* the moved copies and partial sums die with this scope; the sums are kept for the caller */
    ts_scope_begin();
    for (int i = 0; i < n_tensors && ok; i++) {
        ts_tensor *acc = NULL;
        for (int r = 0; r < n_devices && ok; r++) {
            ts_tensor *t = ins[r * n_tensors + i];
            if (!t) continue;
            ts_tensor *moved = tsi_own(tsi_to_device(op, t, devices[0]));
            acc = acc ? ts_add(acc, moved) : moved;
            ok = acc != NULL;
        }
        if (ok && acc) out[i] = ts_retain(acc);
    }
    ts_scope_end();
    if (!ok) release_all(out, n_tensors);
    return ok;
}
