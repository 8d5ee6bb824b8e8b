/* linalg_common.c — argument checks, shapes and multi-output records of the torch.linalg ops
 * (linalg_internal.h). */
#include <stdio.h>

#include "ops/linalg_internal.h"

bool tsl_check(const char *op, ts_tensor *A, const char *name, bool square) {
    tsi_init();
    if (!tsi_check_input(op, A, name)) return false;
    if (A->shape.ndim < 2) {
        tsi_error_set(TS_ERR_SHAPE, "%s: The input tensor %s must have at least 2 dimensions.", op,
                      name);
        return false;
    }
    if (A->dtype != TS_F32 && A->dtype != TS_F64) {
        if (tsi_is_float(A->dtype))
            tsi_error_set(TS_ERR_DTYPE, "%s: Low precision dtypes not supported. Got %s", op,
                          tsi_torch_scalar_name(A->dtype));
        else
            tsi_error_set(TS_ERR_DTYPE,
                          "%s: Expected a floating point or complex tensor as input. Got %s", op,
                          tsi_torch_scalar_name(A->dtype));
        return false;
    }
    if (square && tsl_rows(A) != tsl_cols(A)) {
        tsi_error_set(TS_ERR_SHAPE,
                      "%s: %s must be batches of square matrices, but they are %lld by %lld "
                      "matrices",
                      op, name, (long long)tsl_rows(A), (long long)tsl_cols(A));
        return false;
    }
    return tsl_available(op);
}

ts_shape tsl_batch(ts_shape s) {
    ts_shape b = s;
    b.ndim = s.ndim - 2;
    /* the dims past ndim are zero in every shape (copy_ and others compare the whole array) */
    for (int i = b.ndim; i < s.ndim; i++) b.dims[i] = 0;
    return b;
}

ts_shape tsl_shape(ts_shape batch, int64_t m, int64_t n) {
    ts_shape s = batch;
    s.dims[s.ndim++] = m;
    s.dims[s.ndim++] = n;
    return s;
}

ts_shape tsl_batch_vec(ts_shape batch, int64_t n) {
    ts_shape s = batch;
    s.dims[s.ndim++] = n;
    return s;
}

const char *tsl_batch_prefix(ts_tensor *A, int64_t b) {
    if (A->shape.ndim <= 2) return "";
    char *buf = tsi_fmt_buf();
    snprintf(buf, TSI_FMT_BUF_LEN, "(Batch element %lld): ", (long long)b);
    return buf;
}

bool tsl_broadcast_batch(const char *op, ts_tensor **A, ts_tensor **B) {
    ts_shape ba = tsl_batch((*A)->shape), bb = tsl_batch((*B)->shape), bo;
    if (!tsi_broadcast_shapes(op, ba, bb, &bo)) return false;
    ts_shape sa = tsl_shape(bo, tsl_rows(*A), tsl_cols(*A));
    ts_shape sb = tsl_shape(bo, tsl_rows(*B), tsl_cols(*B));
    if (ba.ndim != bo.ndim || tsi_numel(ba) != tsi_numel(bo)) *A = ts_expand(*A, sa);
    if (bb.ndim != bo.ndim || tsi_numel(bb) != tsi_numel(bo)) *B = ts_expand(*B, sb);
    return *A && *B;
}

ts_node *tsl_record(const char *name, const char *op, tsi_backward_fn fn, ts_tensor *const *ins,
                    int n_in, ts_tensor *const *outs, int n_out, ts_tensor *const *saves,
                    int n_saves) {
    if (!tsi_needs_graph(ins, n_in)) return NULL;
    ts_node *n = tsi_node_new(name, op, fn, ins, n_in, n_out, n_saves);
    if (!n) return NULL;
    /* the outputs first: a saved output then knows its output number (its history under
     * create_graph) */
    for (int j = 0; j < n_out; j++)
        if (outs[j]) tsi_node_set_output(n, outs[j], j);
    for (int i = 0; i < n_saves; i++) {
        bool is_out = false;
        for (int j = 0; j < n_out; j++) is_out |= saves[i] && saves[i] == outs[j];
        if (is_out)
            tsi_node_save_output(n, i, saves[i]);
        else if (saves[i])
            tsi_node_save(n, i, saves[i]);
    }
    tsi_node_release(n);
    return n;
}
