/* channel_shuffle.c — torch.nn.functional.channel_shuffle (issue 76): [N, C, *] viewed as
 * [N, g, C / g, *], the two group dims swapped, flattened back; any dtype, differentiable (a
 * reshape, a transpose and a copy), every device. PyTorch's messages. */
#include "core/internal.h"

ts_tensor *ts_channel_shuffle(ts_tensor *x, int64_t groups) {
    const char *op = "channel_shuffle";
    tsi_init();
    if (!tsi_check_input(op, x, "input")) return NULL;
    if (groups <= 0)
        return tsi_error_set(TS_ERR_ARG,
                             "%s: Number of groups to divide channels in must be positive. Value "
                             "of groups:%lld",
                             op, (long long)groups),
               NULL;
    ts_shape s = x->shape;
    if (s.ndim < 3)
        return tsi_error_set(TS_ERR_ARG,
                             "%s expects input to have at least 3 dimensions, but got input with "
                             "%d dimensions",
                             op, s.ndim),
               NULL;
    int64_t n = s.dims[0], c = s.dims[1], rest = 1;
    if (c % groups)
        return tsi_error_set(TS_ERR_ARG,
                             "%s: Number of channels must be divisible by groups. Got %lld "
                             "channels and %lld groups.",
                             op, (long long)c, (long long)groups),
               NULL;
    for (int i = 2; i < s.ndim; i++) rest *= s.dims[i];
    ts_scope_begin();
    ts_tensor *y = ts_reshape(x, TS_SHAPE(n, groups, c / groups, rest));
    y = ts_contiguous(ts_transpose(y, 1, 2));
    y = y ? ts_reshape(y, s) : NULL;
    y = ts_error() == TS_OK && y ? ts_keep(y) : NULL;
    ts_scope_end();
    return y;
}
