/* pdist.c — torch.pdist (issue 76): the p-norm distances between the rows i < j of an N x M input,
 * pairs in row-major order: the vector norm of index_select differences, so the gradient is the
 * norm's (PyTorch's norm_backward: 0 where two rows are equal) on every device. */
#include "autograd/autograd.h"
#include "core/internal.h"

ts_tensor *ts_pdist(ts_tensor *x, double p) {
    const char *op = "pdist";
    tsi_init();
    if (!tsi_check_input(op, x, "input")) return NULL;
    if (x->shape.ndim != 2)
        return tsi_error_set(TS_ERR_SHAPE, "%s: only supports 2D tensors, got: %s", op,
                             tsi_desc(x)),
               NULL;
    if (!tsi_is_float(x->dtype))
        return tsi_error_set(TS_ERR_DTYPE, "%s: only supports floating-point dtypes, got %s", op,
                             tsi_desc(x)),
               NULL;
    if (!(p >= 0))
        return tsi_error_set(TS_ERR_ARG, "%s: only supports non-negative p values, got %g", op, p),
               NULL;
    const int64_t n = x->shape.dims[0];
    ts_scope_begin();
    ts_tensor *y;
    if (n < 2) { /* still on input's graph, as PyTorch's */
        y = ts_mul_scalar(ts_narrow(ts_flatten(x, 0, -1), 0, 0, 0), 1.0);
    } else {
        ts_tensor *ij =
            ts_triu_indices(n, n, 1, (ts_opts){.dtype = TS_I64, .device = tsi_device(x)});
        const int64_t k = n * (n - 1) / 2;
        ts_tensor *i = ts_reshape(ts_narrow(ij, 0, 0, 1), TS_SHAPE(k));
        ts_tensor *j = ts_reshape(ts_narrow(ij, 0, 1, 1), TS_SHAPE(k));
        ts_tensor *d = ts_sub(ts_index_select(x, 0, i), ts_index_select(x, 0, j));
        y = ts_vector_norm(d, p, TS_DIMS(1), false, TS_DTYPE_DEFAULT);
    }
    y = ts_error() == TS_OK && y ? ts_keep(y) : NULL;
    ts_scope_end();
    return y;
}
