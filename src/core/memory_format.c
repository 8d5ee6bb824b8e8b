/* memory_format.c — PyTorch's channels_last memory format: a 4-D [N, C, H, W] tensor whose
 * elements lie in N, H, W, C order (NHWC), an ordinary strided tensor (strides H*W*C, 1, W*C, C),
 * so every op reads it as it reads any view. Ops that know the layout keep it: the elementwise
 * ops, casts and clones give a channels_last output for a channels_last input (PyTorch's
 * suggest_memory_format rule), convolutions and batch-norm run their NHWC kernels on it where the
 * device has them. */
#include <string.h>

#include "core/internal.h"

void tsi_channels_last_strides(const ts_shape *s, int64_t *strides) {
    tsi_contiguous_strides(s, strides);
    if (s->ndim != 4) return;
    const int64_t c = s->dims[1], h = s->dims[2], w = s->dims[3];
    strides[1] = 1;
    strides[3] = c;
    strides[2] = w * c;
    strides[0] = h * w * c;
}

/* PyTorch's is_contiguous(memory_format=torch.channels_last): 4-D, and the dims of more than one
 * element have NHWC's dense strides (in order C, W, H, N). */
bool tsi_is_channels_last(const ts_tensor *t) {
    if (t->shape.ndim != 4) return false;
    static const int order[4] = {1, 3, 2, 0};
    int64_t expected = 1;
    for (int k = 0; k < 4; k++) {
        const int d = order[k];
        const int64_t n = t->shape.dims[d];
        if (n == 0) return true;
        if (n == 1) continue;
        if (t->strides[d] != expected) return false;
        expected *= n;
    }
    return true;
}

bool tsi_prefers_channels_last(const ts_tensor *t) {
    return tsi_is_channels_last(t) && !tsi_is_contiguous(t);
}

ts_tensor *tsi_new_channels_last(const char *op, ts_shape s, ts_dtype dt, ts_device dev) {
    ts_tensor *t = tsi_new(op, s, dt, dev);
    if (t) tsi_channels_last_strides(&s, t->strides);
    return t;
}

ts_tensor *tsi_new_like(const char *op, ts_shape s, ts_dtype dt, ts_device dev,
                        const ts_tensor *like) {
    if (like && tsi_prefers_channels_last(like) && s.ndim == 4 &&
        !memcmp(s.dims, like->shape.dims, sizeof s.dims[0] * 4))
        return tsi_new_channels_last(op, s, dt, dev);
    return tsi_new(op, s, dt, dev);
}

ts_tensor *tsi_channels_last(const char *op, ts_tensor *t) {
    if (tsi_is_channels_last(t)) return ts_retain(t);
    ts_tensor *out = tsi_new_channels_last(op, t->shape, t->dtype, tsi_device(t));
    if (out && tsi_numel(t->shape) > 0) {
        ts_kview dv = tsi_kview(out), sv = tsi_kview(t);
        tsi_be(t)->copy(tsi_be(t), tsi_dev_index(t), &dv, &sv);
    }
    return out;
}

bool ts_is_contiguous_format(ts_tensor *t, ts_memory_format f) {
    if (!tsi_check_input("is_contiguous", t, "tensor")) return false;
    switch (f) {
    case TS_CONTIGUOUS_FORMAT:
        return tsi_is_contiguous(t);
    case TS_CHANNELS_LAST:
        return tsi_is_channels_last(t);
    }
    tsi_error_set(TS_ERR_ARG, "is_contiguous: unknown memory format %d", (int)f);
    return false;
}
