/* cifar.c — CIFAR-10 binary batches: 3,073-byte records (a label byte, then the R, G and B planes
 * of 32 x 32 pixels), checked whole when loaded; samples come out HWC like the IDX images. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data/data_internal.h"

#define CIFAR_HINT                                                                                 \
    "download the CIFAR-10 binary version (cifar-10-binary.tar.gz from "                           \
    "https://www.cs.toronto.edu/~kriz/cifar.html), extract it and pass its folder (--data-dir)"
#define PLANE (32 * 32)

static ts_status check_size(uint64_t size, const char *name) {
    if (size == 0)
        return tsi_error_set(TS_ERR_FORMAT,
                             "%s: empty file (a CIFAR-10 batch holds %d-byte "
                             "records)",
                             name, TSI_CIFAR_RECORD);
    if (size % TSI_CIFAR_RECORD)
        return tsi_error_set(
            TS_ERR_FORMAT,
            "%s: %llu byte%s is not a whole number of %d-byte records (%llu "
            "record%s and %llu byte%s over)",
            name, (unsigned long long)size, size == 1 ? "" : "s", TSI_CIFAR_RECORD,
            (unsigned long long)(size / TSI_CIFAR_RECORD), size / TSI_CIFAR_RECORD == 1 ? "" : "s",
            (unsigned long long)(size % TSI_CIFAR_RECORD), size % TSI_CIFAR_RECORD == 1 ? "" : "s");
    return TS_OK;
}

ts_status tsi_cifar_check(const void *buf, size_t size, const char *name, int64_t *records) {
    *records = 0;
    if (!buf && size) return tsi_error_set(TS_ERR_ARG, "%s: buffer is NULL", name);
    ts_status st = check_size(size, name);
    if (st) return st;
    const uint8_t *p = buf;
    int64_t n = (int64_t)(size / TSI_CIFAR_RECORD);
    for (int64_t r = 0; r < n; r++)
        if (p[(size_t)r * TSI_CIFAR_RECORD] >= 10)
            return tsi_error_set(TS_ERR_FORMAT,
                                 "%s: record %lld has label %u (CIFAR-10 labels are 0..9)", name,
                                 (long long)r, p[(size_t)r * TSI_CIFAR_RECORD]);
    *records = n;
    return TS_OK;
}

typedef struct cifar_ds {
    uint8_t *mem;
    int64_t n;
    bool own;
} cifar_ds;

static int64_t cifar_len(void *ctx) { return ((cifar_ds *)ctx)->n; }

static ts_status cifar_get(void *ctx, int64_t i, ts_sample *out) {
    cifar_ds *d = ctx;
    const uint8_t *rec = d->mem + (size_t)i * TSI_CIFAR_RECORD;
    out->x = tsi_new("cifar10 dataset", TS_SHAPE(32, 32, 3), TS_U8, ts_cpu());
    out->y = tsi_sample_label("cifar10 dataset", rec[0]);
    if (!out->x || !out->y) return ts_error();
    uint8_t *dst = (uint8_t *)out->x->storage->data + out->x->offset;
    const uint8_t *r = rec + 1, *g = r + PLANE, *b = g + PLANE;
    for (int p = 0; p < PLANE; p++) {
        dst[3 * p] = r[p];
        dst[3 * p + 1] = g[p];
        dst[3 * p + 2] = b[p];
    }
    return TS_OK;
}

static void cifar_free(void *ctx) {
    cifar_ds *d = ctx;
    if (d->own) free(d->mem);
    free(d);
}

ts_dataset *tsi_cifar_dataset_from(uint8_t *mem, int64_t n, bool own) {
    cifar_ds *d = malloc(sizeof *d);
    if (!d) {
        if (own) free(mem);
        return tsi_error_set(TS_ERR_OOM, "cifar10 dataset: out of host memory"), NULL;
    }
    *d = (cifar_ds){mem, n, own};
    static const ts_dataset_ops ops = {.len = cifar_len, .get = cifar_get, .free = cifar_free};
    ts_dataset *ds = ts_dataset_new(&ops, d);
    ts_dataset_set_num_classes(ds, 10);
    return ds;
}

/* Reads a whole file of the size fstat announced into dst. */
static ts_status read_exact(const char *path, uint8_t *dst, size_t size) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return tsi_error_set(TS_ERR_IO, "%s: %s", path, strerror(errno));
    size_t got = 0;
    while (got < size) {
        ssize_t r = read(fd, dst + got, size - got);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            int err = errno;
            close(fd);
            return tsi_error_set(TS_ERR_IO, "%s: read failed: %s", path, strerror(err));
        }
        if (r == 0) break;
        got += (size_t)r;
    }
    close(fd);
    if (got != size)
        return tsi_error_set(TS_ERR_IO,
                             "%s: the file shrank from %zu to %zu bytes while being "
                             "read",
                             path, size, got);
    return TS_OK;
}

ts_dataset *ts_cifar10(const char *dir, ts_data_split split) {
    if (!dir) return tsi_error_set(TS_ERR_ARG, "ts_cifar10: dir is NULL"), NULL;
    if (split != TS_SPLIT_TRAIN && split != TS_SPLIT_TEST)
        return tsi_error_set(TS_ERR_ARG, "ts_cifar10: unknown split %d", (int)split), NULL;
    static const char *const train[] = {"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin",
                                        "data_batch_4.bin", "data_batch_5.bin"};
    static const char *const test[] = {"test_batch.bin"};
    const char *const *names = split == TS_SPLIT_TRAIN ? train : test;
    int nfiles = split == TS_SPLIT_TRAIN ? 5 : 1;

    /* accept the folder the archive extracts to, or its parent */
    char base[PATH_MAX], paths[5][PATH_MAX];
    struct stat sb;
    snprintf(base, sizeof base, "%s", dir);
    snprintf(paths[0], sizeof paths[0], "%s/cifar-10-batches-bin/%s", dir, names[0]);
    int k = snprintf(paths[1], sizeof paths[1], "%s/%s", dir, names[0]);
    if (k < 0 || (size_t)k >= sizeof paths[1])
        return tsi_error_set(TS_ERR_ARG, "ts_cifar10: path too long: %s", dir), NULL;
    if (stat(paths[1], &sb) != 0 && stat(paths[0], &sb) == 0)
        snprintf(base, sizeof base, "%s/cifar-10-batches-bin", dir);

    size_t sizes[5], total = 0;
    for (int f = 0; f < nfiles; f++) {
        k = snprintf(paths[f], sizeof paths[f], "%s/%s", base, names[f]);
        if (k < 0 || (size_t)k >= sizeof paths[f])
            return tsi_error_set(TS_ERR_ARG, "ts_cifar10: path too long: %s", base), NULL;
        if (stat(paths[f], &sb) != 0)
            return tsi_error_set(TS_ERR_IO, "%s: %s; " CIFAR_HINT, paths[f], strerror(errno)), NULL;
        if (S_ISDIR(sb.st_mode))
            return tsi_error_set(TS_ERR_IO, "%s: %s", paths[f], strerror(EISDIR)), NULL;
        if (check_size((uint64_t)sb.st_size, paths[f])) return NULL;
        sizes[f] = (size_t)sb.st_size;
        total += sizes[f];
    }
    uint8_t *mem = malloc(total);
    if (!mem)
        return tsi_error_set(TS_ERR_OOM, "ts_cifar10: out of memory (%zu bytes)", total), NULL;
    size_t at = 0;
    for (int f = 0; f < nfiles; f++) {
        int64_t n;
        if (read_exact(paths[f], mem + at, sizes[f]) ||
            tsi_cifar_check(mem + at, sizes[f], paths[f], &n)) {
            free(mem);
            return NULL;
        }
        at += sizes[f];
    }
    return tsi_cifar_dataset_from(mem, (int64_t)(total / TSI_CIFAR_RECORD), true);
}
