/* hash_tensor.c — torch.hash_tensor (mode 0, PyTorch 2.9+: the xor reduction of the elements'
 * 64-bit patterns, floats as float64, integers and bool as int64, uint64 as is) over dims, as
 * uint64 (issue 76). The reduction folds halves with bitwise_xor (narrow, cat) on t's device; no
 * gradient (an integer result). */
#include "autograd/autograd.h"
#include "core/internal.h"

/* b (int64) xor-reduced along dim d, kept as size 1: halves xor-ed until one is left */
static ts_tensor *xor_fold(ts_tensor *b, int d) {
    int64_t n = b ? b->shape.dims[d] : 0;
    if (b && n == 0) {
        ts_shape s = b->shape;
        s.dims[d] = 1;
        return ts_zeros(s, (ts_opts){.dtype = TS_I64, .device = ts_device_of(b)});
    }
    while (b && n > 1) {
        const int64_t h = n / 2;
        ts_tensor *r = ts_bitwise_xor(ts_narrow(b, d, 0, h), ts_narrow(b, d, h, h));
        if (r && n % 2) {
            ts_tensor *parts[2] = {r, ts_narrow(b, d, 2 * h, 1)};
            r = ts_cat(parts, 2, d);
        }
        b = r;
        n = b ? b->shape.dims[d] : 0;
    }
    return b;
}

ts_tensor *ts_hash_tensor(ts_tensor *t, const ts_dims *dims, bool keepdim, int64_t mode) {
    const char *op = "hash_tensor";
    tsi_init();
    if (!tsi_check_input(op, t, "input")) return NULL;
    if (mode != 0) {
        tsi_error_set(TS_ERR_ARG, "%s(): only mode=0 (the xor reduction) is supported, got %lld",
                      op, (long long)mode);
        return NULL;
    }
    const int nd = t->shape.ndim, rank = nd > 1 ? nd : 1; /* a 0-dim tensor takes dim 0 and -1 */
    bool red[TS_MAX_DIMS] = {false};
    if (!dims || dims->n == 0) {
        for (int d = 0; d < nd; d++) red[d] = true;
    } else {
        if (dims->n > TS_MAX_DIMS) {
            tsi_error_set(TS_ERR_ARG, "%s(): %d dims given", op, dims->n);
            return NULL;
        }
        for (int i = 0; i < dims->n; i++) {
            const int d = dims->d[i] < 0 ? dims->d[i] + rank : dims->d[i];
            if (d < 0 || d >= rank) {
                tsi_error_set(TS_ERR_ARG, "%s(): dim %d out of range for a %d-dim tensor", op,
                              dims->d[i], nd);
                return NULL;
            }
            if (d < nd) red[d] = true;
        }
    }
    ts_scope_begin();
    ts_tensor *bits;
    if (tsi_is_float(t->dtype))
        bits = ts_view_dtype(ts_contiguous(ts_to_dtype(ts_detach(t), TS_F64)), TS_I64);
    else if (t->dtype == TS_U64)
        bits = ts_view_dtype(ts_contiguous(ts_detach(t)), TS_I64);
    else
        bits = ts_to_dtype(ts_detach(t), TS_I64);
    for (int d = 0; d < nd && bits; d++)
        if (red[d]) bits = xor_fold(bits, d);
    if (bits && !keepdim) {
        ts_dims sq = {0};
        for (int d = 0; d < nd; d++)
            if (red[d]) sq.d[sq.n++] = d;
        if (sq.n) bits = ts_squeeze_dims(bits, sq);
    }
    ts_tensor *y = bits ? ts_view_dtype(ts_contiguous(bits), TS_U64) : NULL;
    if (y && ts_shares_storage(y, t)) y = ts_clone(y); /* never an alias of t */
    y = ts_error() == TS_OK && y ? ts_keep(y) : NULL;
    ts_scope_end();
    return y;
}
