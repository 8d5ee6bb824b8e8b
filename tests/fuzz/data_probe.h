/* data_probe.h — what the data fuzz targets and tests/test_data_corpus.c do with one input: read it
 * as the dataset constructors do, build the dataset and check every sample (static, header-only).
 */
#ifndef TS_DATA_PROBE_H
#define TS_DATA_PROBE_H

#include <stdlib.h>
#include <string.h>

#include "data/data_internal.h"

/* Samples read per input: enough to reach the last one of every corpus file, bounded for speed. */
#define PROBE_MAX_SAMPLES 4096

/* A failure must carry its code and a message; anything else is a reader bug. */
static inline bool probe_failure_ok(ts_status st) {
    return st == TS_OK || (ts_error() == st && ts_error_message()[0] != '\0');
}

/* Reads sample i and checks its shapes and dtypes against the expected x shape; when want_x is
 * non-NULL the x bytes too. Sets *bad on a broken invariant. */
static inline ts_status probe_sample(ts_dataset *d, int64_t i, ts_shape xs, ts_dtype xdt,
                                     const void *want_x, int64_t classes, bool *bad) {
    ts_sample s;
    ts_status st = ts_dataset_get(d, i, &s);
    if (st) return st;
    ts_shape got = ts_shape_of(s.x);
    bool same = got.ndim == xs.ndim && ts_dtype_of(s.x) == xdt;
    for (int k = 0; same && k < xs.ndim; k++) same = got.dims[k] == xs.dims[k];
    if (same && want_x) same = !memcmp(s.x->storage->data, want_x, ts_nbytes(s.x));
    if (ts_dtype_of(s.y) == TS_I64 && ts_ndim(s.y) == 0) {
        double y = ts_item(s.y);
        same = same && y >= 0 && (classes <= 0 || y < (double)classes);
    } else {
        same = same && ts_dtype_of(s.y) == TS_F32 && ts_numel(s.y) == 1;
    }
    if (!same) *bad = true;
    ts_release(s.x);
    ts_release(s.y);
    return TS_OK;
}

/* Reads every sample (up to PROBE_MAX_SAMPLES, first and last included). */
static inline ts_status probe_all(ts_dataset *d, ts_shape xs, ts_dtype xdt,
                                  const uint8_t *(*want)(void *, int64_t), void *ctx, bool *bad) {
    int64_t n = ts_dataset_len(d), classes = ts_dataset_num_classes(d);
    for (int64_t k = 0; k < n && k < PROBE_MAX_SAMPLES; k++) {
        int64_t i = k == PROBE_MAX_SAMPLES - 1 ? n - 1 : k;
        ts_status st = probe_sample(d, i, xs, xdt, want ? want(ctx, i) : NULL, classes, bad);
        if (st) return st;
    }
    return TS_OK;
}

static inline const uint8_t *idx_row(void *ctx, int64_t i) {
    const tsi_idx *x = ctx;
    return x->payload + (size_t)i * (size_t)(x->dims[1] * x->dims[2]);
}

/* An IDX file read by tsi_idx_parse / tsi_idx_read (taken): an images file is paired with zero
 * labels, a labels file with 1 x 1 images, as a 10-class dataset. */
static inline ts_status probe_idx(tsi_idx *x, const char *name, bool *bad) {
    bool images = x->magic == TSI_IDX_IMAGES;
    int64_t n = x->dims[0];
    tsi_idx other = {.magic = images ? TSI_IDX_LABELS : TSI_IDX_IMAGES,
                     .ndim = images ? 1 : 3,
                     .dims = {n, 1, 1}};
    other.mem = calloc((size_t)n + 1, 1); /* n <= the file's payload bytes */
    if (!other.mem) {
        tsi_idx_release(x);
        return tsi_error_set(TS_ERR_OOM, "probe: out of memory");
    }
    other.payload = other.mem;
    other.payload_bytes = (size_t)n;
    tsi_idx keep = *x; /* the bytes stay valid: the dataset owns them until it is freed */
    ts_dataset *d = images ? tsi_idx_dataset_from(x, &other, name, "<zero labels>", 10)
                           : tsi_idx_dataset_from(&other, x, "<1x1 images>", name, 10);
    if (!d) return ts_error();
    ts_status st =
        probe_all(d, images ? TS_SHAPE(keep.dims[1], keep.dims[2], 1) : TS_SHAPE(1, 1, 1), TS_U8,
                  images ? idx_row : NULL, &keep, bad);
    ts_dataset_free(d);
    return st;
}

/* CIFAR-10: the record's pixels come out HWC. */
static inline ts_status probe_cifar(const void *buf, size_t size, const char *name, bool *bad) {
    int64_t n;
    ts_status st = tsi_cifar_check(buf, size, name, &n);
    if (st) return st;
    ts_dataset *d = tsi_cifar_dataset_from((uint8_t *)buf, n, false);
    if (!d) return ts_error();
    const uint8_t *rec = buf;
    for (int64_t k = 0; k < n && k < 64; k++) {
        int64_t i = k == 63 ? n - 1 : k;
        const uint8_t *r = rec + (size_t)i * TSI_CIFAR_RECORD + 1;
        uint8_t hwc[3072];
        for (int p = 0; p < 1024; p++)
            for (int c = 0; c < 3; c++) hwc[p * 3 + c] = r[c * 1024 + p];
        if ((st = probe_sample(d, i, TS_SHAPE(32, 32, 3), TS_U8, hwc, 10, bad))) break;
    }
    ts_dataset_free(d);
    return st;
}

/* The option sets every CSV input is read with (named in tests/fuzz/corpus/csv.tsv). */
typedef struct probe_csv_opts {
    const char *name;
    ts_csv_opts o;
} probe_csv_opts;
static const probe_csv_opts probe_csv_sets[] = {
    {"last", {.target_column = -1}},
    {"first-noheader-regression", {.target_column = 0, .no_header = true, .regression = true}},
    {"name-label", {.target_name = "label"}},
    {"col1-semicolon", {.target_column = 1, .delimiter = ';'}},
    {"col5", {.target_column = 5}},
};
#define PROBE_CSV_SETS ((int)(sizeof probe_csv_sets / sizeof *probe_csv_sets))

static inline ts_status probe_csv(const void *buf, size_t size, const char *name, int set,
                                  bool *bad) {
    const ts_csv_opts *o = &probe_csv_sets[set].o;
    tsi_csv c;
    ts_status st = tsi_csv_parse(buf, size, name, o, &c);
    if (st) return st;
    int64_t f = c.features;
    ts_dataset *d = tsi_csv_dataset_from(&c);
    if (!d) return ts_error();
    st = probe_all(d, TS_SHAPE(f), TS_F32, NULL, NULL, bad);
    ts_dataset_free(d);
    return st;
}

#endif /* TS_DATA_PROBE_H */
