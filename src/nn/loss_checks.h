/* loss_checks.h — what the composed losses share (loss_pointwise.c, loss_margin.c): the argument
 * checks with PyTorch's messages and the scope around a loss's body. */
#ifndef TS_NN_LOSS_CHECKS_H
#define TS_NN_LOSS_CHECKS_H

#include "nn/functional_internal.h"

/* tensors checked (the first nreq required, NULLs after them skipped), on one device (0-dim cpu
 * tensors allowed) */
static inline bool check_all(const char *op, ts_tensor **ts, const char *const *names, int n,
                             int nreq, ts_reduction r) {
    ts_tensor *all[4];
    int k = 0;
    for (int i = 0; i < n; i++) {
        if (!ts[i] && i >= nreq) continue;
        if (!tsi_check_input(op, ts[i], names[i])) return false;
        all[k++] = ts[i];
    }
    ts_device dev;
    return tsi_same_device(op, all, k, true, &dev) && tsi_check_reduction(op, r);
}

static inline bool need_float(const char *op, ts_tensor *t, const char *name) {
    if (tsi_is_float(t->dtype)) return true;
    return tsi_error_set(TS_ERR_DTYPE, "%s: expected a floating point %s, got %s", op, name,
                         tsi_desc(t)),
           false;
}

static inline bool need_long(const char *op, ts_tensor *t, const char *name) {
    if (t->dtype == TS_I64) return true;
    return tsi_error_set(TS_ERR_DTYPE, "%s: expected %s of dtype int64, got %s", op, name,
                         tsi_desc(t)),
           false;
}

static inline bool broadcastable(const char *op, ts_tensor *a, ts_tensor *b) {
    ts_shape bs;
    return tsi_broadcast_shapes(op, a->shape, b->shape, &bs);
}

/* two-operand pointwise losses: input and target broadcast, floating input */
static inline bool pointwise2(const char *op, ts_tensor *in, ts_tensor *tg, ts_reduction r) {
    ts_tensor *ts[2] = {in, tg};
    static const char *const names[2] = {"input", "target"};
    return check_all(op, ts, names, 2, 2, r) && need_float(op, in, "input") &&
           broadcastable(op, in, tg);
}

/* run body between a scope and keep its result */
#define LOSS_BODY(expr)                                                                            \
    do {                                                                                           \
        ts_scope_begin();                                                                          \
        ts_tensor *y_ = (expr);                                                                    \
        y_ = ts_keep(y_);                                                                          \
        ts_scope_end();                                                                            \
        return y_;                                                                                 \
    } while (0)

#endif /* TS_NN_LOSS_CHECKS_H */
