/* norm_grads.c — what the backward nodes of the fused norms (layer_norm_fused.c,
 * batch_norm_fused.c) share: the output gradient in the kernels' form and the gradient tensors.
 * Both take the layout of the saved x: contiguous, or channels_last where x prefers it (batch
 * norm's NHWC kernels; layer norm saves a contiguous x). */
#include "nn/functional_internal.h"

bool tsi_norm_grads_begin(const char *op, ts_node *n, ts_tensor *x, ts_tensor *go,
                          tsi_norm_grads *r) {
    *r = (tsi_norm_grads){0};
    ts_tensor *gc = tsi_cast(op, go, x->dtype);
    const bool nhwc = tsi_prefers_channels_last(x);
    r->dy = !gc ? NULL : nhwc ? tsi_channels_last(op, gc) : tsi_contiguous(op, gc);
    ts_release(gc);
    const ts_device dev = tsi_device(x);
    bool ok = r->dy != NULL;
    for (int i = 0; ok && i < 3; i++)
        if (tsi_node_needs(n, i))
            ok = (r->g[i] = i ? tsi_new(op, n->in_shape[i], n->in_dtype[i], dev)
                              : tsi_new_like(op, x->shape, x->dtype, dev, x)) != NULL;
    if (!ok) tsi_norm_grads_end(r, false, NULL);
    return ok;
}

void tsi_norm_grads_end(tsi_norm_grads *r, bool ok, ts_tensor **gi) {
    ts_release(r->dy);
    for (int i = 0; i < 3; i++) {
        if (ok)
            gi[i] = tsi_own(r->g[i]);
        else
            ts_release(r->g[i]);
        r->g[i] = NULL;
    }
    r->dy = NULL;
}
