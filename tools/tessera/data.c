/* data.c — opens the data set that --data names, with its transform, shape and class count. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"

/* the trainer test builds a copy with this folder missing, to see the install hint */
#ifndef FASHION_DIR
#define FASHION_DIR "/usr/share/datasets/fashion-mnist"
#endif

/* ------------------------------------------------------------- a subset by index */
typedef struct subset {
    ts_dataset *base; /* borrowed: tcli_data frees it after the subsets */
    int64_t n, *idx;
} subset;
static int64_t subset_len(void *ctx) { return ((subset *)ctx)->n; }
static ts_status subset_get(void *ctx, int64_t i, ts_sample *out) {
    subset *s = ctx;
    return ts_dataset_get(s->base, s->idx[i], out);
}
static void subset_free(void *ctx) {
    subset *s = ctx;
    free(s->idx);
    free(s);
}
static const ts_dataset_ops subset_ops = {
    .len = subset_len, .get = subset_get, .free = subset_free};

static ts_dataset *subset_new(ts_dataset *base, const int64_t *idx, int64_t n) {
    subset *s = calloc(1, sizeof *s);
    if (!s || !(s->idx = malloc((size_t)(n ? n : 1) * sizeof *s->idx))) {
        free(s);
        return NULL;
    }
    s->base = base;
    s->n = n;
    memcpy(s->idx, idx, (size_t)n * sizeof *idx);
    ts_dataset *d = ts_dataset_new(&subset_ops, s);
    if (!d)
        subset_free(s);
    else
        ts_dataset_set_num_classes(d, ts_dataset_num_classes(base));
    return d;
}

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

/* One CSV file: a seeded shuffle of its rows, the first test_fraction of them held out. */
static int split_csv(const tcli_opts *o, tcli_data *d) {
    int64_t n = ts_dataset_len(d->whole);
    int64_t n_test = (int64_t)((double)n * o->test_fraction + 0.5);
    if (n_test < 1 || n_test >= n)
        return tcli_fail(TCLI_USAGE, "--test-fraction: %g of %lld rows leaves no %s rows",
                         o->test_fraction, (long long)n, n_test < 1 ? "test" : "training");
    int64_t *perm = malloc((size_t)n * sizeof *perm);
    if (!perm) return tcli_fail(TCLI_FAIL, "out of memory");
    for (int64_t i = 0; i < n; i++) perm[i] = i;
    uint64_t state = o->seed;
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)(splitmix64(&state) % (uint64_t)(i + 1));
        int64_t t = perm[i];
        perm[i] = perm[j], perm[j] = t;
    }
    d->test = subset_new(d->whole, perm, n_test);
    d->train = subset_new(d->whole, perm + n_test, n - n_test);
    free(perm);
    if (!d->test || !d->train) return tcli_fail_ts(TCLI_FAIL, "csv split");
    return -1;
}

/* Per-feature mean and std of the training rows, so features of any scale train alike. */
static int csv_stats(tcli_data *d) {
    int64_t n = ts_dataset_len(d->train), f = d->features;
    double *sum = calloc((size_t)f, sizeof *sum), *sq = calloc((size_t)f, sizeof *sq);
    float *row = malloc((size_t)f * sizeof *row);
    d->fmean = malloc((size_t)f * sizeof *d->fmean);
    d->fstd = malloc((size_t)f * sizeof *d->fstd);
    int rc = -1;
    if (!sum || !sq || !row || !d->fmean || !d->fstd) rc = tcli_fail(TCLI_FAIL, "out of memory");
    for (int64_t i = 0; i < n && rc < 0; i++) {
        ts_sample s = {0};
        if (ts_dataset_get(d->train, i, &s) || ts_copy_to_host(s.x, row, (size_t)f * sizeof *row))
            rc = tcli_fail_ts(TCLI_USAGE, NULL);
        ts_release(s.x);
        ts_release(s.y);
        for (int64_t j = 0; j < f && rc < 0; j++)
            sum[j] += row[j], sq[j] += (double)row[j] * row[j];
    }
    for (int64_t j = 0; j < f && rc < 0; j++) {
        double m = sum[j] / (double)n, var = sq[j] / (double)n - m * m;
        d->fmean[j] = (float)m;
        d->fstd[j] = var > 1e-12 ? (float)sqrt(var) : 1.0f; /* a constant column stays as it is */
    }
    free(sum);
    free(sq);
    free(row);
    return rc;
}

static int open_csv(const tcli_opts *o, tcli_data *d) {
    const char *path = o->data_dir ? o->data_dir : "data.csv";
    ts_csv_opts co = {.target_column = -1};
    if (o->csv_target) {
        char *end;
        long c = strtol(o->csv_target, &end, 10);
        if (*end || c < 0)
            co.target_name = o->csv_target;
        else
            co.target_column = (int)c;
    }
    struct stat sb;
    if (stat(path, &sb) != 0)
        return tcli_fail(TCLI_USAGE,
                         "--data-dir: '%s': %s (csv: a .csv file, or a folder with "
                         "train.csv and test.csv)",
                         path, strerror(errno));
    if (S_ISDIR(sb.st_mode)) {
        char tr[4096], te[4096];
        snprintf(tr, sizeof tr, "%s/train.csv", path);
        snprintf(te, sizeof te, "%s/test.csv", path);
        if (!(d->train = ts_csv_dataset_new(tr, co)) || !(d->test = ts_csv_dataset_new(te, co)))
            return tcli_fail_ts(TCLI_USAGE, NULL);
    } else {
        if (!(d->whole = ts_csv_dataset_new(path, co))) return tcli_fail_ts(TCLI_USAGE, NULL);
        int rc = split_csv(o, d);
        if (rc >= 0) return rc;
    }
    d->title = "csv";
    if (ts_dataset_len(d->train) < 1) return tcli_fail(TCLI_USAGE, "%s: no rows", path);
    ts_sample s = {0};
    if (ts_dataset_get(d->train, 0, &s)) return tcli_fail_ts(TCLI_USAGE, NULL);
    d->features = ts_numel(s.x);
    bool classes_ok = ts_dtype_of(s.y) == TS_I64;
    ts_release(s.x);
    ts_release(s.y);
    if (!classes_ok)
        return tcli_fail(TCLI_USAGE, "--data csv: the target column must hold class numbers");
    d->classes = ts_dataset_num_classes(d->whole ? d->whole : d->train);
    if (!d->whole && ts_dataset_num_classes(d->test) > d->classes)
        d->classes = ts_dataset_num_classes(d->test);
    if (d->classes < 2)
        return tcli_fail(TCLI_USAGE,
                         "--data csv: the target column has %lld class%s; a "
                         "classifier needs at least 2",
                         (long long)d->classes, d->classes == 1 ? "" : "es");
    return csv_stats(d);
}

static int open_images(const tcli_opts *o, bool need_train, tcli_data *d) {
    const bool fashion = !strcmp(o->data, "fashion-mnist"), cifar = !strcmp(o->data, "cifar10");
    const char *dir = o->data_dir ? o->data_dir
                      : fashion   ? FASHION_DIR
                      : cifar     ? "data/cifar-10-batches-bin"
                                  : "data/mnist";
    struct stat sb;
    int err = stat(dir, &sb) != 0 ? errno : S_ISDIR(sb.st_mode) ? 0 : ENOTDIR;
    if (err) {
        if (fashion && !o->data_dir)
            return tcli_fail(TCLI_USAGE,
                             "no Fashion-MNIST in %s: install Debian's dataset-fashion-mnist "
                             "(sudo apt-get install dataset-fashion-mnist, or make deps) or pass "
                             "--data-dir DIR",
                             dir);
        return tcli_fail(TCLI_USAGE, "%s'%s': %s (%s)",
                         o->data_dir ? "--data-dir: " : "no data: ", dir, strerror(err),
                         cifar
                             ? "cifar10 reads data_batch_1..5.bin and test_batch.bin of the "
                               "CIFAR-10 binary version"
                             : "it should hold {train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]");
    }
    ts_dataset *(*open)(const char *, ts_data_split) = cifar ? ts_cifar10 : ts_mnist;
    if (need_train && !(d->train = open(dir, TS_SPLIT_TRAIN)))
        return tcli_fail_ts(TCLI_USAGE, NULL);
    if (!(d->test = open(dir, TS_SPLIT_TEST))) return tcli_fail_ts(TCLI_USAGE, NULL);
    ts_dataset *ref = d->train ? d->train : d->test;
    d->title = fashion ? "Fashion-MNIST" : cifar ? "CIFAR-10" : "MNIST";
    ts_sample s = {0};
    if (ts_dataset_len(ref) < 1) return tcli_fail(TCLI_USAGE, "%s: the data set is empty", dir);
    if (ts_dataset_get(ref, 0, &s)) return tcli_fail_ts(TCLI_USAGE, NULL);
    ts_shape sh = ts_shape_of(s.x);
    ts_release(s.x);
    ts_release(s.y);
    if (sh.ndim != 3) return tcli_fail(TCLI_FAIL, "%s: expected HWC images", dir);
    d->height = sh.dims[0], d->width = sh.dims[1], d->channels = sh.dims[2];
    d->features = d->channels * d->height * d->width;
    d->classes = ts_dataset_num_classes(ref);
    if (d->classes < 2) d->classes = 10;
    /* the usual per-channel statistics of each training set */
    static const float fm[] = {0.2860f}, fs[] = {0.3530f}, mm[] = {0.1307f}, ms[] = {0.3081f},
                       cm[] = {0.4914f, 0.4822f, 0.4465f}, cs[] = {0.2470f, 0.2435f, 0.2616f};
    const float *m = fashion ? fm : cifar ? cm : mm, *sd = fashion ? fs : cifar ? cs : ms;
    for (int c = 0; c < 3; c++) d->mean[c] = m[c < d->channels && cifar ? c : 0];
    for (int c = 0; c < 3; c++) d->std[c] = sd[c < d->channels && cifar ? c : 0];
    if (d->channels > 3)
        return tcli_fail(TCLI_USAGE, "%s: %lld channels (at most 3)", dir, (long long)d->channels);
    return -1;
}

int tcli_data_open(const tcli_opts *o, bool need_train, tcli_data *d) {
    *d = (tcli_data){0};
    int rc = !strcmp(o->data, "csv")    ? open_csv(o, d)
             : !strcmp(o->data, "text") ? tcli_text_open(o, need_train, d)
                                        : open_images(o, need_train, d);
    if (rc >= 0) tcli_data_close(d);
    return rc;
}

ts_transform *tcli_data_transform(const tcli_data *d) {
    if (d->text) return NULL; /* byte values are the model's input */
    if (!d->channels) return ts_normalize_new((int)d->features, d->fmean, d->fstd);
    ts_transform *ts[2] = {ts_to_tensor_new(), ts_normalize_new((int)d->channels, d->mean, d->std)};
    return ts_compose_new(2, ts);
}

ts_transform *tcli_train_transform(const tcli_data *d, bool augment) {
    if (!augment || !d->channels) return tcli_data_transform(d);
    /* on the uint8 image, before to_tensor: padding is black, as torchvision's on a PIL image */
    ts_transform *ts[4] = {ts_random_crop_new((int)d->height, 4), ts_random_hflip_new(0.5),
                           ts_to_tensor_new(), ts_normalize_new((int)d->channels, d->mean, d->std)};
    return ts_compose_new(4, ts);
}

void tcli_data_close(tcli_data *d) {
    ts_dataset_free(d->train);
    ts_dataset_free(d->test);
    ts_dataset_free(d->whole);
    free(d->fmean);
    free(d->fstd);
    *d = (tcli_data){0};
}
