/* data_internal.h — the dataset object and the in-memory readers the fuzz targets drive (not
 * public).
 */
#ifndef TS_DATA_INTERNAL_H
#define TS_DATA_INTERNAL_H

#include "core/internal.h"

/* A sample as bytes the dataset holds (read-only, valid while the dataset lives). Built-in
 * datasets offer it so that the loader can fill a batch's rows without making a tensor per sample
 * (loader_batch.c); it must describe exactly what get would return. */
typedef struct tsi_raw_sample {
    const void *x, *y; /* y may point at label: read it from the struct raw filled, not a copy */
    ts_dtype xdt, ydt;
    ts_shape xs, ys;
    int64_t label;
} tsi_raw_sample;
typedef void (*tsi_raw_fn)(void *ctx, int64_t index, tsi_raw_sample *out);

struct ts_dataset {
    ts_dataset_ops ops;
    void *ctx;
    int64_t num_classes;
    tsi_raw_fn raw; /* NULL: samples only through ops.get */
};

/* ------------------------------------------------------------------ transforms (transform.c) */
/* ts_to_tensor followed by ts_normalize steps, as the loader's fast path runs them on a whole
 * uint8 image at once: per channel c, x = v / 255, then x = (x - mean[i][c]) / std[i][c] for each
 * step i, in float, the very operations (and roundings) of the transforms themselves. */
#define TSI_U8_PLAN_STEPS    8
#define TSI_U8_PLAN_CHANNELS 4
typedef struct tsi_u8_plan {
    int steps;
    float mean[TSI_U8_PLAN_STEPS][TSI_U8_PLAN_CHANNELS],
        std[TSI_U8_PLAN_STEPS][TSI_U8_PLAN_CHANNELS];
} tsi_u8_plan;
/* The plan of t for uint8 images [H, W] or [H, W, C] of `channels` channels: true when t is
 * ts_to_tensor then ts_normalize steps that fit C channels (in one compose or nested ones), false
 * for anything else, which then runs as itself. */
bool tsi_transform_u8_plan(const ts_transform *t, int64_t channels, tsi_u8_plan *out);
/* Runs the plan on one image: src [hw, ch] u8 (channels interleaved) -> dst [ch, hw] float32. */
void tsi_u8_plan_apply(const tsi_u8_plan *p, const uint8_t *src, int64_t hw, int64_t ch,
                       float *dst);

/* A cpu tensor of the given shape and dtype, filled from host bytes: one reference held by the
 * caller (a sample's x). */
ts_tensor *tsi_sample_tensor(const char *op, ts_shape s, ts_dtype dt, const void *bytes);
/* A 0-dim i64 cpu tensor (a sample's class index). */
ts_tensor *tsi_sample_label(const char *op, int64_t label);

/* Asks for transparent huge pages over the whole 2 MiB pages of [p, p + n) (Linux; elsewhere, or
 * when the kernel declines, nothing happens). A loader reads a shuffled data set at random: with
 * 4 KiB pages nearly every sample costs a TLB miss and a page walk besides its cache misses.
 * Call it before the memory is first written. */
void tsi_advise_huge_pages(void *p, size_t n);

/* ------------------------------------------------------------------ IDX (idx.c) */
#define TSI_IDX_IMAGES 0x00000803u /* u8, 3 dims: N x H x W */
#define TSI_IDX_LABELS 0x00000801u /* u8, 1 dim: N */

/* One checked IDX file: the header agrees with the payload to the byte. */
typedef struct tsi_idx {
    uint32_t magic;
    int ndim;
    int64_t dims[3];
    const uint8_t *payload;
    size_t payload_bytes;
    uint8_t
        *mem; /* malloc'ed copy of the whole file; NULL when payload borrows the caller's bytes */
} tsi_idx;

/* An IDX file held in memory, plain (payload borrows buf) or gzip (decompressed into x->mem, never
 * beyond what the header implies). name starts every message. */
ts_status tsi_idx_parse(const void *buf, size_t size, const char *name, tsi_idx *out);
/* The same for a file on disk (plain or gzip, told apart by content). */
ts_status tsi_idx_read(const char *path, tsi_idx *out);
void tsi_idx_release(tsi_idx *x); /* NULL-safe; leaves *x zeroed */
/* Pairs an images file with a labels file: equal counts, labels < classes (classes <= 0: any
 * label; num_classes is then max + 1). Takes both *images and *labels (zeroed, also on failure). */
ts_dataset *tsi_idx_dataset_from(tsi_idx *images, tsi_idx *labels, const char *images_name,
                                 const char *labels_name, int64_t classes);

/* ------------------------------------------------------------------ CIFAR-10 (cifar.c) */
#define TSI_CIFAR_RECORD 3073 /* 1 label byte + 3 x 32 x 32 pixel bytes (planes R, G, B) */

/* A batch in memory: a non-empty whole number of records, each label < 10; *records gets the count.
 */
ts_status tsi_cifar_check(const void *buf, size_t size, const char *name, int64_t *records);
/* Dataset over n checked records; with own, the dataset frees mem (also when this fails). */
ts_dataset *tsi_cifar_dataset_from(uint8_t *mem, int64_t n, bool own);

/* ------------------------------------------------------------------ CSV (csv.c) */
typedef struct tsi_csv {
    int64_t rows, features, num_classes;
    float *x;     /* rows x features */
    int64_t *cls; /* rows: class indices (classification) */
    float *reg;   /* rows: targets (regression) */
} tsi_csv;

/* A CSV file held in memory (need not end in NUL). */
ts_status tsi_csv_parse(const char *buf, size_t size, const char *name, const ts_csv_opts *o,
                        tsi_csv *out);
void tsi_csv_release(tsi_csv *c); /* NULL-safe */
/* Takes the arrays of *c (zeroed, also on failure). */
ts_dataset *tsi_csv_dataset_from(tsi_csv *c);

#endif /* TS_DATA_INTERNAL_H */
