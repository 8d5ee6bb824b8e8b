/* embedding_renorm.c — PyTorch's embedding_renorm_ (the max_norm of F.embedding and
 * F.embedding_bag: each referenced row of weight whose p-norm exceeds max_norm scaled in place to
 * max_norm / (norm + 1e-7), outside autograd) and ts_embedding_ex / ts_embedding_bag_ex, the
 * arguments of F.embedding / F.embedding_bag in one call (a negative padding_idx counts from the
 * end; max_norm renorms the rows used before the lookup). */
#include "core/capture.h"
#include "nn/functional_internal.h"

static bool renorm_check(const char *op, ts_tensor *weight, ts_tensor *indices) {
    if (!tsi_check_input(op, weight, "weight") || !tsi_check_input(op, indices, "indices"))
        return false;
    ts_tensor *all[2] = {weight, indices};
    ts_device dev;
    if (!tsi_same_device(op, all, 2, false, &dev)) return false;
    if (weight->shape.ndim != 2)
        return tsi_error_set(TS_ERR_SHAPE, "%s: weight must be 2-D [num_embeddings, dim], got %s",
                             op, tsi_desc(weight)),
               false;
    if (!tsi_is_float(weight->dtype))
        return tsi_error_set(TS_ERR_DTYPE, "%s: expected a floating weight, got %s", op,
                             tsi_desc(weight)),
               false;
    if (indices->dtype != TS_I64 && indices->dtype != TS_I32)
        return tsi_error_set(TS_ERR_DTYPE,
                             "%s: expected indices of dtype int64 or int32, but got %s", op,
                             tsi_desc(indices)),
               false;
    int64_t bad;
    if (!tsi_capturing_on(tsi_device(indices)) &&
        !tsi_nn_index_scan(op, indices, weight->shape.dims[0], false, 0, NULL, &bad)) {
        if (ts_error() == TS_OK)
            tsi_error_set(TS_ERR_ARG,
                          "%s: index %lld is out of range for weight %s (index out of range in "
                          "self)",
                          op, (long long)bad, tsi_shape_str(weight->shape));
        return false;
    }
    return true;
}

/* the rows of weight at indices, each scaled by max_norm / (norm + 1e-7) where its norm exceeds
 * max_norm, written back; a repeated index writes the same row twice */
static bool renorm_rows(ts_tensor *weight, ts_tensor *indices, double max_norm, double norm_type) {
    const int64_t n = tsi_numel(indices->shape);
    if (n == 0) return true;
    ts_scope_begin();
    ts_tensor *flat = ts_reshape(indices, TS_SHAPE(n));
    if (flat && flat->dtype != TS_I64) flat = ts_to_dtype(flat, TS_I64);
    ts_tensor *rows = flat ? ts_index_select(weight, 0, flat) : NULL;
    ts_tensor *norm =
        rows ? ts_vector_norm(rows, norm_type, (ts_dims){1, {1}}, true, TS_DTYPE_DEFAULT) : NULL;
    /* norm > max_norm: scaled; otherwise (a NaN norm too) kept, as PyTorch's comparison */
    ts_tensor *scale =
        norm ? ts_mul_scalar(ts_reciprocal(ts_add_scalar(norm, 1e-7)), max_norm) : NULL;
    scale = scale ? ts_masked_fill(scale, ts_logical_not(ts_gt_scalar(norm, max_norm)), 1.0) : NULL;
    ts_tensor *done = scale ? ts_index_copy_(weight, 0, flat, ts_mul(rows, scale)) : NULL;
    ts_scope_end();
    return done != NULL;
}

ts_tensor *ts_embedding_renorm_(ts_tensor *weight, ts_tensor *indices, double max_norm,
                                double norm_type) {
    const char *op = "embedding_renorm_";
    tsi_init();
    if (!renorm_check(op, weight, indices)) return NULL;
    ts_no_grad_begin(); /* PyTorch's F.embedding runs it under no_grad */
    const bool ok = renorm_rows(weight, indices, max_norm, norm_type);
    ts_no_grad_end();
    return ok ? weight : NULL;
}

/* padding_idx in [-rows, rows) to a row, or -1 (none); false with op's message (also for a weight
 * that is not 2-D) */
static bool padding_row(const char *op, const char *msg, ts_tensor *weight, ts_embedding_opts o,
                        int64_t *pad) {
    *pad = -1;
    if (weight->shape.ndim != 2)
        return tsi_error_set(TS_ERR_SHAPE, "%s: 'weight' must be 2-D, got %s", op,
                             tsi_desc(weight)),
               false;
    if (!o.has_padding_idx) return true;
    const int64_t rows = weight->shape.dims[0];
    if (o.padding_idx >= rows || o.padding_idx < -rows)
        return tsi_error_set(TS_ERR_ARG, "%s: %s (%lld rows), got %lld", op, msg, (long long)rows,
                             (long long)o.padding_idx),
               false;
    *pad = o.padding_idx < 0 ? o.padding_idx + rows : o.padding_idx;
    return true;
}

ts_tensor *ts_embedding_ex(ts_tensor *weight, ts_tensor *indices, ts_embedding_opts o) {
    const char *op = "embedding";
    tsi_init();
    int64_t pad;
    if (!tsi_check_input(op, weight, "weight") ||
        !padding_row(op, "Padding_idx must be within num_embeddings", weight, o, &pad))
        return NULL;
    if (o.has_max_norm && !ts_embedding_renorm_(weight, indices, o.max_norm, o.norm_type))
        return NULL;
    return ts_embedding_padded(weight, indices, pad);
}

ts_tensor *ts_embedding_bag_ex(ts_tensor *weight, ts_tensor *indices, ts_tensor *offsets, int mode,
                               ts_tensor *per_sample_weights, bool include_last_offset,
                               ts_embedding_opts o) {
    const char *op = "embedding_bag";
    tsi_init();
    int64_t pad;
    if (!tsi_check_input(op, weight, "weight") ||
        !padding_row(op, "padding_idx must be within the number of embeddings", weight, o, &pad))
        return NULL;
    if (o.has_max_norm && !ts_embedding_renorm_(weight, indices, o.max_norm, o.norm_type))
        return NULL;
    return ts_embedding_bag(weight, indices, offsets, mode, per_sample_weights, pad,
                            include_last_offset);
}
