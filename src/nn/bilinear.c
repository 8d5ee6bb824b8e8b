/* bilinear.c — torch.nn.functional.bilinear (issue 76): y[..., o] = sum_ij x1[..., i] w[o, i, j]
 * x2[..., j] + b[o], as one matmul ([n, in1] @ [in1, out * in2]) and a dot with x2 over in2, all
 * differentiable ops, so every input gets its gradient on every device. PyTorch's messages. */
#include "core/internal.h"

#define BL_OP "bilinear"

static bool check(ts_tensor *x1, ts_tensor *x2, ts_tensor *w, ts_tensor *b) {
    if (!tsi_check_input(BL_OP, x1, "input1") || !tsi_check_input(BL_OP, x2, "input2") ||
        !tsi_check_input(BL_OP, w, "weight") || (b && !tsi_check_input(BL_OP, b, "bias")))
        return false;
    ts_tensor *all[4] = {x1, x2, w, b};
    ts_device dev;
    if (!tsi_same_device(BL_OP, all, b ? 4 : 3, false, &dev)) return false;
    for (int i = 0; i < (b ? 4 : 3); i++)
        if (!tsi_is_float(all[i]->dtype) || all[i]->dtype != w->dtype)
            return tsi_error_set(TS_ERR_DTYPE,
                                 "%s(): expected input1, input2, weight and bias of one floating "
                                 "dtype, got %s and %s",
                                 BL_OP, tsi_desc(all[i]), tsi_desc(w)),
                   false;
    int nd = x1->shape.ndim;
    if (nd != x2->shape.ndim)
        return tsi_error_set(TS_ERR_SHAPE, "%s(): input dimensions do not match: got %d and %d",
                             BL_OP, nd, x2->shape.ndim),
               false;
    if (nd < 1)
        return tsi_error_set(TS_ERR_SHAPE, "%s(): input1 and input2 must have at least 1 dimension",
                             BL_OP),
               false;
    for (int i = 0; i < nd - 1; i++)
        if (x1->shape.dims[i] != x2->shape.dims[i])
            return tsi_error_set(TS_ERR_SHAPE,
                                 "%s(): input batch dimensions do not match: got %s and %s", BL_OP,
                                 tsi_desc(x1), tsi_desc(x2)),
                   false;
    if (w->shape.ndim != 3)
        return tsi_error_set(TS_ERR_SHAPE, "%s(): weight must be 3-D [out, in1, in2], got %d-D",
                             BL_OP, w->shape.ndim),
               false;
    const int64_t *wd = w->shape.dims;
    if (x1->shape.dims[nd - 1] != wd[1])
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s(): input1 size does not match weight size: got %lld but expected "
                             "%lld",
                             BL_OP, (long long)x1->shape.dims[nd - 1], (long long)wd[1]),
               false;
    if (x2->shape.dims[nd - 1] != wd[2])
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s(): input2 size does not match weight size: got %lld but expected "
                             "%lld",
                             BL_OP, (long long)x2->shape.dims[nd - 1], (long long)wd[2]),
               false;
    if (b && (b->shape.ndim != 1 || b->shape.dims[0] != wd[0]))
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s(): bias size does not match weight size: got %s but expected "
                             "(%lld,)",
                             BL_OP, tsi_desc(b), (long long)wd[0]),
               false;
    return true;
}

ts_tensor *ts_bilinear(ts_tensor *input1, ts_tensor *input2, ts_tensor *weight, ts_tensor *bias) {
    tsi_init();
    if (!check(input1, input2, weight, bias)) return NULL;
    const int64_t out = weight->shape.dims[0], in1 = weight->shape.dims[1],
                  in2 = weight->shape.dims[2];
    ts_shape os = input1->shape; /* batch dims, then out */
    os.dims[os.ndim - 1] = out;
    int64_t n = 1;
    for (int i = 0; i < os.ndim - 1; i++) n *= os.dims[i];
    ts_scope_begin();
    ts_tensor *wt = ts_reshape(ts_permute(weight, TS_DIMS(1, 0, 2)), TS_SHAPE(in1, out * in2));
    ts_tensor *t =
        ts_reshape(ts_matmul(ts_reshape(input1, TS_SHAPE(n, in1)), wt), TS_SHAPE(n, out, in2));
    ts_tensor *y = ts_sum_dim(ts_mul(t, ts_reshape(input2, TS_SHAPE(n, 1, in2))), -1, false);
    if (bias) y = ts_add(y, bias);
    y = ts_reshape(y, os);
    y = ts_error() == TS_OK && y ? ts_keep(y) : NULL;
    ts_scope_end();
    return y;
}
