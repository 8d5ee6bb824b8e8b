/* text.c — a byte-level language-modelling dataset over a text file or a folder of them: windows
 * of `context` bytes, the target the same window one byte later; the training windows start at
 * random offsets that change every epoch, the validation windows are fixed. */
#define _XOPEN_SOURCE 700
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "data/data_internal.h"

static const char *OP = "ts_text_dataset";

/* ------------------------------------------------------------------ reading the corpus */
typedef struct corpus {
    unsigned char *bytes;
    int64_t n, cap;
    int files;
} corpus;

static bool corpus_reserve(corpus *c, int64_t more) {
    if (more > INT64_MAX - c->n)
        return tsi_error_set(TS_ERR_OOM, "%s: the corpus exceeds the address space", OP), false;
    if (c->n + more <= c->cap) return true;
    int64_t cap = c->cap ? c->cap : 1 << 20;
    while (cap < c->n + more) cap = cap > INT64_MAX / 2 ? INT64_MAX : 2 * cap;
    unsigned char *b = (size_t)cap == (uint64_t)cap ? realloc(c->bytes, (size_t)cap) : NULL;
    if (!b)
        return tsi_error_set(TS_ERR_OOM, "%s: out of host memory for a corpus of %lld bytes", OP,
                             (long long)(c->n + more)),
               false;
    c->bytes = b;
    c->cap = cap;
    return true;
}

/* Appends a file's bytes; a file holding a NUL byte is binary (an index, an image) and skipped:
 * *taken says whether it was used. */
static bool read_text_file(corpus *c, const char *path, bool *taken) {
    *taken = false;
    FILE *f = fopen(path, "rb");
    if (!f)
        return tsi_error_set(TS_ERR_IO, "%s: cannot open '%s': %s", OP, path, strerror(errno)),
               false;
    const int64_t start = c->n;
    bool ok = true, binary = false;
    for (;;) {
        if (!corpus_reserve(c, 1 << 16)) {
            ok = false;
            break;
        }
        size_t got = fread(c->bytes + c->n, 1, 1 << 16, f);
        if (memchr(c->bytes + c->n, 0, got)) binary = true;
        c->n += (int64_t)got;
        if (got < (1 << 16) || binary) break;
    }
    if (ok && ferror(f)) ok = tsi_error_set(TS_ERR_IO, "%s: cannot read '%s'", OP, path) == TS_OK;
    fclose(f);
    if (!ok || binary) {
        c->n = start;
        return ok;
    }
    *taken = true;
    c->files++;
    return true;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every regular file under dir (not following symbolic links, no hidden names), in sorted order. */
static bool read_folder(corpus *c, const char *dir, int depth) {
    if (depth > 32)
        return tsi_error_set(TS_ERR_ARG, "%s: folders nested deeper than 32 under '%s'", OP, dir),
               false;
    DIR *d = opendir(dir);
    if (!d)
        return tsi_error_set(TS_ERR_IO, "%s: cannot open folder '%s': %s", OP, dir,
                             strerror(errno)),
               false;
    char **names = NULL;
    size_t n = 0, cap = 0;
    bool ok = true;
    struct dirent *e;
    while (ok && (e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            char **nn = realloc(names, cap * sizeof *nn);
            if (!nn) {
                ok = false;
                break;
            }
            names = nn;
        }
        size_t len = strlen(dir) + strlen(e->d_name) + 2;
        if (!(names[n] = malloc(len))) {
            ok = false;
            break;
        }
        snprintf(names[n++], len, "%s/%s", dir, e->d_name);
    }
    closedir(d);
    if (!ok) tsi_error_set(TS_ERR_OOM, "%s: out of host memory listing '%s'", OP, dir);
    if (n) qsort(names, n, sizeof *names, cmp_str);
    for (size_t i = 0; ok && i < n; i++) {
        struct stat sb;
        if (lstat(names[i], &sb) != 0) continue; /* vanished meanwhile */
        bool taken;
        if (S_ISDIR(sb.st_mode))
            ok = read_folder(c, names[i], depth + 1);
        else if (S_ISREG(sb.st_mode))
            ok = read_text_file(c, names[i], &taken);
    }
    for (size_t i = 0; i < n; i++) free(names[i]);
    free(names);
    return ok;
}

/* ------------------------------------------------------------------ the dataset */
typedef struct text_ds {
    corpus c;        /* the split's bytes only */
    int64_t context; /* T */
    int64_t windows; /* samples */
    bool random;     /* training: a random offset in [0, T) per (seed, epoch, window) */
    uint64_t seed;
} text_ds;

static int64_t text_len(void *ctx) { return ((text_ds *)ctx)->windows; }

static ts_status text_get_epoch(void *ctx, int64_t i, int64_t epoch, ts_sample *out) {
    text_ds *d = ctx;
    const int64_t T = d->context;
    int64_t off = i * T;
    if (d->random) {
        ts_transform_ctx c = {.seed = d->seed, .epoch = epoch, .index = i};
        int64_t shift = (int64_t)(ts_transform_uniform(&c, 0) * (double)T);
        off += shift < T ? shift : T - 1;
    }
    out->x = tsi_new(OP, TS_SHAPE(T), TS_I64, ts_cpu());
    out->y = out->x ? tsi_new(OP, TS_SHAPE(T), TS_I64, ts_cpu()) : NULL;
    if (!out->y) return ts_error();
    int64_t *x = (int64_t *)(void *)out->x->storage->data,
            *y = (int64_t *)(void *)out->y->storage->data;
    x += out->x->offset, y += out->y->offset;
    const unsigned char *b = d->c.bytes + off;
    for (int64_t t = 0; t < T; t++) {
        x[t] = b[t];
        y[t] = b[t + 1];
    }
    return TS_OK;
}

static ts_status text_get(void *ctx, int64_t i, ts_sample *out) {
    return text_get_epoch(ctx, i, 0, out);
}

static void text_free(void *ctx) {
    text_ds *d = ctx;
    free(d->c.bytes);
    free(d);
}

ts_dataset *ts_text_dataset(const char *path, ts_data_split split, ts_text_opts o) {
    tsi_init();
    const int64_t T = o.context ? o.context : 256;
    const double vf = o.val_fraction ? o.val_fraction : 0.1;
    if (!path) return tsi_error_set(TS_ERR_ARG, "%s: path is NULL", OP), NULL;
    if (T < 1 || T > ((int64_t)1 << 30))
        return tsi_error_set(TS_ERR_ARG, "%s: context must be in [1, 2^30], got %lld", OP,
                             (long long)T),
               NULL;
    if (!(vf > 0 && vf < 1))
        return tsi_error_set(TS_ERR_ARG, "%s: val_fraction must be in (0, 1), got %g", OP, vf),
               NULL;
    if (split != TS_SPLIT_TRAIN && split != TS_SPLIT_TEST)
        return tsi_error_set(TS_ERR_ARG, "%s: split %d is neither train nor test", OP, (int)split),
               NULL;
    struct stat sb;
    if (stat(path, &sb) != 0)
        return tsi_error_set(TS_ERR_IO, "%s: no file or folder '%s': %s", OP, path,
                             strerror(errno)),
               NULL;
    text_ds *d = calloc(1, sizeof *d);
    if (!d) return tsi_error_set(TS_ERR_OOM, "%s: out of host memory", OP), NULL;
    bool taken = false, ok = S_ISDIR(sb.st_mode) ? read_folder(&d->c, path, 0)
                                                 : read_text_file(&d->c, path, &taken);
    if (ok && d->c.files == 0) {
        tsi_error_set(TS_ERR_FORMAT, "%s: no text in '%s' (%s)", OP, path,
                      S_ISDIR(sb.st_mode) ? "no regular file without NUL bytes under it"
                                          : "the file holds NUL bytes: binary");
        ok = false;
    }
    /* the split: the first 1 - val_fraction of the bytes train, the rest validates */
    const int64_t n = d->c.n, n_train = (int64_t)((double)n * (1 - vf));
    if (ok && split == TS_SPLIT_TEST) {
        memmove(d->c.bytes, d->c.bytes + n_train, (size_t)(n - n_train));
        d->c.n = n - n_train;
        d->windows = (d->c.n - 1) / T;
    } else if (ok) {
        d->c.n = n_train;
        /* room for the largest offset: window i spans [i T + shift, i T + shift + T] */
        d->windows = n_train / T - 1;
        d->random = true;
        d->seed = o.seed;
    }
    if (ok && d->windows < 1) {
        tsi_error_set(TS_ERR_ARG,
                      "%s: '%s' has %lld bytes: its %s split (%lld bytes) is too short for one "
                      "window of context %lld",
                      OP, path, (long long)n, split == TS_SPLIT_TEST ? "validation" : "training",
                      (long long)d->c.n, (long long)T);
        ok = false;
    }
    d->context = T;
    if (!ok) {
        text_free(d);
        return NULL;
    }
    ts_dataset *ds = ts_dataset_new(
        &(ts_dataset_ops){
            .len = text_len, .get = text_get, .free = text_free, .get_epoch = text_get_epoch},
        d);
    ts_dataset_set_num_classes(ds, 256);
    return ds;
}
