/* dataset.c — the dataset interface (length + item by index) and the in-memory tensor dataset. */
#include <stdlib.h>
#include <string.h>

#include "data/data_internal.h"

ts_dataset *ts_dataset_new(const ts_dataset_ops *ops, void *ctx) {
    if (!ops || !ops->len || !ops->get) {
        tsi_error_set(TS_ERR_ARG, "ts_dataset_new: ops%s is NULL",
                      !ops        ? ""
                      : !ops->len ? "->len"
                                  : "->get");
        if (ops && ops->free) ops->free(ctx);
        return NULL;
    }
    ts_dataset *d = malloc(sizeof *d);
    if (!d) {
        tsi_error_set(TS_ERR_OOM, "ts_dataset_new: out of host memory");
        if (ops->free) ops->free(ctx);
        return NULL;
    }
    d->ops = *ops;
    d->ctx = ctx;
    d->num_classes = 0;
    d->raw = NULL;
    return d;
}

int64_t ts_dataset_len(ts_dataset *d) {
    if (!d) return tsi_error_set(TS_ERR_ARG, "ts_dataset_len: dataset is NULL"), -1;
    return d->ops.len(d->ctx);
}

ts_status ts_dataset_get(ts_dataset *d, int64_t index, ts_sample *out) {
    return ts_dataset_get_epoch(d, index, -1, out);
}

/* epoch < 0: ts_dataset_get (ops->get) */
ts_status ts_dataset_get_epoch(ts_dataset *d, int64_t index, int64_t epoch, ts_sample *out) {
    if (out) out->x = out->y = NULL;
    if (!d || !out)
        return tsi_error_set(TS_ERR_ARG, "ts_dataset_get: %s is NULL", !d ? "dataset" : "out");
    int64_t n = d->ops.len(d->ctx);
    if (index < 0 || index >= n)
        return tsi_error_set(TS_ERR_ARG,
                             "ts_dataset_get: index %lld is out of range for a dataset of %lld "
                             "samples",
                             (long long)index, (long long)n);
    ts_status st = epoch >= 0 && d->ops.get_epoch ? d->ops.get_epoch(d->ctx, index, epoch, out)
                                                  : d->ops.get(d->ctx, index, out);
    if (st == TS_OK && out->x && out->y) return TS_OK;
    /* a user's get that failed half-way, or silently: hand back nothing and always an error */
    ts_release(out->x);
    ts_release(out->y);
    out->x = out->y = NULL;
    if (st == TS_OK) {
        st = TS_ERR_STATE;
        tsi_error_set(st,
                      "ts_dataset_get: the dataset's get returned TS_OK without x and y for "
                      "index %lld",
                      (long long)index);
    } else if (ts_error() == TS_OK) {
        tsi_error_set(st, "ts_dataset_get: the dataset's get failed with %s for index %lld",
                      ts_status_string(st), (long long)index);
    }
    return st;
}

void ts_dataset_free(ts_dataset *d) {
    if (!d) return;
    if (d->ops.free) d->ops.free(d->ctx);
    free(d);
}

int64_t ts_dataset_num_classes(ts_dataset *d) { return d ? d->num_classes : 0; }

void ts_dataset_set_num_classes(ts_dataset *d, int64_t n) {
    if (d) d->num_classes = n > 0 ? n : 0;
}

ts_tensor *tsi_sample_tensor(const char *op, ts_shape s, ts_dtype dt, const void *bytes) {
    ts_tensor *t = tsi_new(op, s, dt, ts_cpu());
    if (!t) return NULL;
    size_t n = (size_t)tsi_numel(s) * tsi_dtype_size(t->dtype);
    if (n) memcpy(t->storage->data + t->offset * (int64_t)tsi_dtype_size(t->dtype), bytes, n);
    return t;
}

ts_tensor *tsi_sample_label(const char *op, int64_t label) {
    return tsi_sample_tensor(op, TS_SHAPE(), TS_I64, &label);
}

/* ------------------------------------------------------------------ tensors in memory */
/* x and y are kept contiguous on the cpu so that a sample is one memcpy of its row. */
typedef struct tensor_ds {
    ts_tensor *x, *y;
    int64_t n;
    ts_shape xs, ys;   /* a sample's shapes: the tensors' shapes without the first dim */
    size_t xrow, yrow; /* bytes per sample */
} tensor_ds;

static int64_t tensor_len(void *ctx) { return ((tensor_ds *)ctx)->n; }

static const char *row(ts_tensor *t, size_t row_bytes, int64_t i) {
    return t->storage->data + t->offset * (int64_t)tsi_dtype_size(t->dtype) + (size_t)i * row_bytes;
}

static ts_status tensor_get(void *ctx, int64_t i, ts_sample *out) {
    tensor_ds *d = ctx;
    out->x = tsi_sample_tensor("ts_tensor_dataset", d->xs, d->x->dtype, row(d->x, d->xrow, i));
    if (d->y)
        out->y = tsi_sample_tensor("ts_tensor_dataset", d->ys, d->y->dtype, row(d->y, d->yrow, i));
    else
        out->y = tsi_new("ts_tensor_dataset", TS_SHAPE(0), TS_I64, ts_cpu());
    return out->x && out->y ? TS_OK : ts_error();
}

static void tensor_raw(void *ctx, int64_t i, tsi_raw_sample *out) {
    tensor_ds *d = ctx;
    out->x = row(d->x, d->xrow, i);
    out->xdt = d->x->dtype;
    out->xs = d->xs;
    out->y = d->y ? row(d->y, d->yrow, i) : NULL;
    out->ydt = d->y ? d->y->dtype : TS_I64;
    out->ys = d->y ? d->ys : TS_SHAPE(0);
}

static void tensor_free(void *ctx) {
    tensor_ds *d = ctx;
    ts_release(d->x);
    ts_release(d->y);
    free(d);
}

static ts_shape drop_first(ts_shape s) {
    ts_shape r = {.ndim = s.ndim - 1};
    for (int i = 1; i < s.ndim; i++) r.dims[i - 1] = s.dims[i];
    return r;
}

/* A contiguous cpu copy of t (t itself, retained, when it already is one). */
static ts_tensor *cpu_contiguous(ts_tensor *t) {
    ts_tensor *c = tsi_to_device("ts_tensor_dataset", t, ts_cpu());
    if (!c) return NULL;
    ts_tensor *r = tsi_contiguous("ts_tensor_dataset", c);
    ts_release(c);
    return r;
}

ts_dataset *ts_tensor_dataset(ts_tensor *x, ts_tensor *y) {
    if (!tsi_check_input("ts_tensor_dataset", x, "x")) return NULL;
    if (x->shape.ndim < 1)
        return tsi_error_set(TS_ERR_SHAPE,
                             "ts_tensor_dataset: x must have a first dim of samples, got %s",
                             tsi_desc(x)),
               NULL;
    if (y && (y->shape.ndim < 1 || y->shape.dims[0] != x->shape.dims[0]))
        return tsi_error_set(TS_ERR_SHAPE,
                             "ts_tensor_dataset: y must have one row per sample of x, got x %s "
                             "and y %s",
                             tsi_desc(x), tsi_desc(y)),
               NULL;
    tensor_ds *d = calloc(1, sizeof *d);
    if (!d) return tsi_error_set(TS_ERR_OOM, "ts_tensor_dataset: out of host memory"), NULL;
    d->n = x->shape.dims[0];
    d->xs = drop_first(x->shape);
    d->xrow = (size_t)tsi_numel(d->xs) * tsi_dtype_size(x->dtype);
    d->x = cpu_contiguous(x);
    if (y) {
        d->ys = drop_first(y->shape);
        d->yrow = (size_t)tsi_numel(d->ys) * tsi_dtype_size(y->dtype);
        d->y = cpu_contiguous(y);
    }
    if (!d->x || (y && !d->y)) {
        tensor_free(d);
        return NULL;
    }
    static const ts_dataset_ops ops = {.len = tensor_len, .get = tensor_get, .free = tensor_free};
    ts_dataset *ds = ts_dataset_new(&ops, d);
    if (ds) ds->raw = tensor_raw;
    return ds;
}
