/* test_datasets.c — the built-in datasets on small files written here (IDX plain and gzip, CIFAR-10
 * records, an image folder; CSV in test_datasets_csv.c): exact sample values, every error with its
 * code and message, concurrent gets; and the real Fashion-MNIST test split when Debian's package is
 * there. */
#define _POSIX_C_SOURCE 200809L
#define _XOPEN_SOURCE   700
#include <ftw.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "data/data_internal.h"
#include "ts_test.h"
#ifdef TS_HAVE_STB
#include <stb/stb_image_write.h>
#endif

static char tmpdir[64];

static const char *tpath(const char *name) {
    static char buf[8][512];
    static int k;
    char *p = buf[k++ % 8];
    snprintf(p, 512, "%s/%s", tmpdir, name);
    return p;
}

static void write_file(const char *name, const void *data, size_t n) {
    FILE *f = fopen(tpath(name), "wb");
    CHECK(f != NULL);
    if (!f) return;
    CHECK_EQ(fwrite(data, 1, n, f), n);
    fclose(f);
}

static void write_gz(const char *name, const void *data, size_t n) {
    gzFile g = gzopen(tpath(name), "wb");
    CHECK(g != NULL);
    if (!g) return;
    CHECK_EQ(gzwrite(g, data, (unsigned)n), (int)n);
    gzclose(g);
}

static unsigned char *read_back(const char *name, size_t *n) {
    FILE *f = fopen(tpath(name), "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc(*n + 1);
    if (fread(b, 1, *n, f) != *n) *n = 0;
    fclose(f);
    return b;
}

/* The dataset is NULL and the pending error has this code and contains frag. */
#define CHECK_FAIL(ds, code, frag) check_fail_((ds) == NULL, code, frag, __LINE__)
static void check_fail_(bool was_null, ts_status code, const char *frag, int line) {
    const char *msg = ts_error_message();
    bool ok = was_null && ts_error() == code && strstr(msg, frag) != NULL;
    ts_test_record(ok);
    if (!ok)
        ts_test_failf(__FILE__, line, "expected NULL and %s containing \"%s\", got %s \"%s\"",
                      ts_status_string(code), frag, ts_status_string(ts_error()), msg);
    ts_error_clear();
}

/* IDX bytes: magic, big-endian dims, then payload. */
static size_t idx_bytes(unsigned char *out, uint32_t magic, int nd, const uint32_t *dims,
                        const unsigned char *payload, size_t n) {
    size_t k = 0;
    for (int s = 24; s >= 0; s -= 8) out[k++] = (unsigned char)(magic >> s);
    for (int i = 0; i < nd; i++)
        for (int s = 24; s >= 0; s -= 8) out[k++] = (unsigned char)(dims[i] >> s);
    memcpy(out + k, payload, n);
    return k + n;
}

/* 3 images of 2 x 4 pixels: pixel (i, r, c) = 100 i + 10 r + c; labels 7, 0, 3. */
static const unsigned char labels3[3] = {7, 0, 3};
static void make_idx(const char *img_name, const char *lab_name, bool gz) {
    unsigned char px[24], buf[64];
    for (int i = 0; i < 3; i++)
        for (int r = 0; r < 2; r++)
            for (int c = 0; c < 4; c++)
                px[i * 8 + r * 4 + c] = (unsigned char)(100 * i + 10 * r + c);
    size_t n = idx_bytes(buf, 0x803, 3, (uint32_t[]){3, 2, 4}, px, 24);
    (gz ? write_gz : write_file)(img_name, buf, n);
    n = idx_bytes(buf, 0x801, 1, (uint32_t[]){3}, labels3, 3);
    (gz ? write_gz : write_file)(lab_name, buf, n);
}

static void check_idx_samples(ts_dataset *d) {
    CHECK(d != NULL);
    if (!d) return;
    CHECK_EQ(ts_dataset_len(d), 3);
    CHECK_EQ(ts_dataset_num_classes(d), 8); /* max label 7 + 1 */
    for (int i = 0; i < 3; i++) {
        ts_sample s;
        CHECK_EQ(ts_dataset_get(d, i, &s), TS_OK);
        if (!s.x) continue;
        CHECK_EQ(ts_dtype_of(s.x), TS_U8);
        CHECK_EQ(ts_ndim(s.x), 3);
        CHECK_EQ(ts_size(s.x, 0), 2);
        CHECK_EQ(ts_size(s.x, 1), 4);
        CHECK_EQ(ts_size(s.x, 2), 1);
        CHECK(ts_device_equal(ts_device_of(s.x), ts_cpu()));
        unsigned char px[8];
        CHECK_EQ(ts_copy_to_host(s.x, px, 8), TS_OK);
        for (int r = 0; r < 2; r++)
            for (int c = 0; c < 4; c++) CHECK_EQ(px[r * 4 + c], 100 * i + 10 * r + c);
        CHECK_EQ(ts_dtype_of(s.y), TS_I64);
        CHECK_EQ(ts_ndim(s.y), 0);
        CHECK_EQ(ts_item(s.y), labels3[i]);
        ts_release(s.x);
        ts_release(s.y);
    }
}

static void test_idx(void) {
    make_idx("a-images", "a-labels", false);
    make_idx("b-images.gz", "b-labels.gz", true);
    ts_dataset *d = ts_idx_dataset_new(tpath("a-images"), tpath("a-labels"));
    check_idx_samples(d);
    ts_dataset_free(d);
    d = ts_idx_dataset_new(tpath("b-images.gz"), tpath("b-labels.gz"));
    check_idx_samples(d);
    /* index checks of the interface */
    ts_sample s;
    CHECK_EQ(ts_dataset_get(d, 3, &s), TS_ERR_ARG);
    CHECK(strstr(ts_error_message(), "index 3 is out of range for a dataset of 3 samples"));
    CHECK(s.x == NULL && s.y == NULL);
    ts_error_clear();
    CHECK_EQ(ts_dataset_get(d, -1, &s), TS_ERR_ARG);
    ts_error_clear();
    ts_dataset_free(d);
    ts_dataset_free(NULL);

    /* ts_mnist: gzip train files, plain t10k files in one folder */
    mkdir(tpath("mnist"), 0700);
    make_idx("mnist/train-images-idx3-ubyte.gz", "mnist/train-labels-idx1-ubyte.gz", true);
    make_idx("mnist/t10k-images-idx3-ubyte", "mnist/t10k-labels-idx1-ubyte", false);
    for (int split = 0; split < 2; split++) {
        d = ts_mnist_new(tpath("mnist"), (ts_data_split)split);
        CHECK(d && ts_dataset_len(d) == 3 && ts_dataset_num_classes(d) == 10);
        ts_dataset_free(d);
    }
    CHECK_FAIL(ts_mnist_new(tpath("nowhere"), TS_SPLIT_TRAIN), TS_ERR_IO,
               "nowhere: No such file or directory; install Debian's dataset-fashion-mnist "
               "(apt-get install dataset-fashion-mnist) or pass --data-dir");
    mkdir(tpath("empty"), 0700);
    CHECK_FAIL(ts_mnist_new(tpath("empty"), TS_SPLIT_TEST), TS_ERR_IO,
               "empty/t10k-images-idx3-ubyte[.gz]: No such file or directory; install Debian's "
               "dataset-fashion-mnist");
    CHECK_FAIL(ts_mnist_new(tpath("mnist"), (ts_data_split)5), TS_ERR_ARG, "unknown split 5");
    CHECK_FAIL(ts_idx_dataset_new(tpath("missing"), tpath("a-labels")), TS_ERR_IO,
               "missing: No such file or directory");
    CHECK_FAIL(ts_idx_dataset_new(tpath("mnist"), tpath("a-labels")), TS_ERR_IO,
               "mnist: Is a directory");
    CHECK_FAIL(ts_idx_dataset_new(NULL, tpath("a-labels")), TS_ERR_ARG, "images path is NULL");
}

/* One malformed images file (plain or gzip) paired with a-labels: the expected error. */
static void bad_images(const char *what, const void *bytes, size_t n, bool gz, ts_status code,
                       const char *frag) {
    char name[64];
    snprintf(name, sizeof name, "bad-%s%s", what, gz ? ".gz" : "");
    (gz ? write_gz : write_file)(name, bytes, n);
    CHECK_FAIL(ts_idx_dataset_new(tpath(name), tpath("a-labels")), code, frag);
    /* the in-memory reader says the same about the same bytes */
    size_t fn;
    unsigned char *raw = read_back(name, &fn);
    tsi_idx x;
    ts_status st = tsi_idx_parse(raw, fn, tpath(name), &x);
    if (st == TS_OK) {
        tsi_idx lab;
        CHECK_EQ(tsi_idx_read(tpath("a-labels"), &lab), TS_OK);
        CHECK(tsi_idx_dataset_from(&x, &lab, tpath(name), tpath("a-labels"), 0) == NULL);
    }
    CHECK_FAIL(NULL, code, frag);
    free(raw);
}

static void test_idx_errors(void) {
    unsigned char px[24] = {0}, buf[128];
    size_t n;
    n = idx_bytes(buf, 0x803, 3, (uint32_t[]){3, 2, 4}, px, 20);
    bad_images("short", buf, n, false, TS_ERR_FORMAT,
               "header says 3 x 2 x 4 = 24 bytes but the file holds 20 (after its 16-byte "
               "header)");
    bad_images("short", buf, n, true, TS_ERR_FORMAT,
               "header says 3 x 2 x 4 = 24 bytes but the file holds 20 (decompressed, after its "
               "16-byte header)");
    n = idx_bytes(buf, 0x803, 3, (uint32_t[]){3, 2, 4}, px, 24);
    buf[n++] = 0;
    bad_images("long", buf, n, false, TS_ERR_FORMAT, "= 24 bytes but the file holds 25 (after");
    bad_images("long", buf, n, true, TS_ERR_FORMAT, "= 24 bytes but the file holds more");
    n = idx_bytes(buf, 0x803, 3, (uint32_t[]){60000, 28, 28}, px, 24);
    bad_images("mnist", buf, n, false, TS_ERR_FORMAT,
               "header says 60000 x 28 x 28 = 47040000 bytes but the file holds 24");
    n = idx_bytes(buf, 0x803, 3, (uint32_t[]){0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF}, px, 8);
    bad_images("huge", buf, n, false, TS_ERR_FORMAT,
               "header says 4294967295 x 4294967295 x 4294967295 bytes, which overflows");
    bad_images("huge", buf, n, true, TS_ERR_FORMAT, "which overflows");
    n = idx_bytes(buf, 0x803, 3, (uint32_t[]){3, 0, 4}, px, 0);
    bad_images("zero", buf, n, false, TS_ERR_FORMAT, "header says images of 0 x 4 pixels");
    n = idx_bytes(buf, 0x08030000, 0, NULL, px, 24);
    bad_images("magic", buf, n, false, TS_ERR_FORMAT,
               "not an IDX file: magic number 0x08030000 (expected 0x00000803 for images or "
               "0x00000801 for labels)");
    n = idx_bytes(buf, 0x0D03, 3, (uint32_t[]){1, 1, 1}, px, 4);
    bad_images("float", buf, n, false, TS_ERR_UNSUPPORTED,
               "IDX element type 0x0D (float) is not supported");
    n = idx_bytes(buf, 0x0802, 2, (uint32_t[]){3, 8}, px, 24);
    bad_images("2d", buf, n, false, TS_ERR_UNSUPPORTED, "IDX files with 2 dims are not supported");
    n = idx_bytes(buf, 0x0803, 1, (uint32_t[]){3}, px, 0);
    bad_images("hdr", buf, 10, false, TS_ERR_FORMAT,
               "the header ends after 10 bytes (a 3-dim IDX header has 16)");
    bad_images("tiny", buf, 3, false, TS_ERR_FORMAT, "3 bytes is too short for an IDX file");
    bad_images("empty", buf, 0, false, TS_ERR_FORMAT, "0 bytes is too short for an IDX file");
    n = idx_bytes(buf, 0x801, 1, (uint32_t[]){3}, labels3, 3);
    bad_images("swapped", buf, n, false, TS_ERR_FORMAT,
               "expected an images file (IDX magic 0x00000803: unsigned bytes, 3 dims) but found "
               "magic 0x00000801 (a labels file)");

    /* gzip streams: cut short, and corrupted in the middle */
    n = idx_bytes(buf, 0x803, 3, (uint32_t[]){3, 2, 4}, px, 24);
    write_gz("whole.gz", buf, n);
    size_t gn;
    unsigned char *gzb = read_back("whole.gz", &gn);
    bad_images("cut", gzb, gn - 12, false, TS_ERR_FORMAT,
               "the header ends after 15 bytes (a 3-dim IDX header has 16); the gzip stream is "
               "truncated");
    bad_images("cut", gzb, gn - 3, false, TS_ERR_FORMAT,
               "the gzip stream is truncated (its end and checksum are missing)");
    gzb[gn / 2] ^= 0xFF;
    gzb[gn / 2 + 1] ^= 0x55;
    bad_images("corrupt", gzb, gn, false, TS_ERR_FORMAT, "bad gzip data (");
    free(gzb);

    /* pairs: counts, label range (ts_mnist knows there are 10 classes) */
    n = idx_bytes(buf, 0x801, 1, (uint32_t[]){2}, labels3, 2);
    write_file("two-labels", buf, n);
    make_idx("ok-images", "ok-labels", false);
    CHECK_FAIL(ts_idx_dataset_new(tpath("ok-images"), tpath("two-labels")), TS_ERR_FORMAT,
               "ok-images has 3 images but");
    mkdir(tpath("badlab"), 0700);
    make_idx("badlab/t10k-images-idx3-ubyte", "badlab/t10k-labels-idx1-ubyte", false);
    n = idx_bytes(buf, 0x801, 1, (uint32_t[]){3}, (const unsigned char[]){1, 2, 10}, 3);
    write_file("badlab/t10k-labels-idx1-ubyte", buf, n);
    CHECK_FAIL(ts_mnist_new(tpath("badlab"), TS_SPLIT_TEST), TS_ERR_FORMAT,
               "t10k-labels-idx1-ubyte: label 10 at index 2 is out of range for 10 classes");
    CHECK_FAIL(ts_idx_dataset_new(tpath("ok-images"), tpath("ok-images")), TS_ERR_FORMAT,
               "expected a labels file (IDX magic 0x00000801: unsigned bytes, 1 dim) but found "
               "magic 0x00000803 (an images file)");
}

/* CIFAR record r of a file: label (r + f) % 10, pixel (c, y, x) = (c * 50 + y * 3 + x + r) % 256 */
static void make_cifar(const char *name, int records, int f) {
    unsigned char *b = malloc((size_t)records * TSI_CIFAR_RECORD);
    for (int r = 0; r < records; r++) {
        unsigned char *rec = b + (size_t)r * TSI_CIFAR_RECORD;
        rec[0] = (unsigned char)((r + f) % 10);
        for (int c = 0; c < 3; c++)
            for (int y = 0; y < 32; y++)
                for (int x = 0; x < 32; x++)
                    rec[1 + c * 1024 + y * 32 + x] =
                        (unsigned char)((c * 50 + y * 3 + x + r) % 256);
    }
    write_file(name, b, (size_t)records * TSI_CIFAR_RECORD);
    free(b);
}

static void check_cifar_sample(ts_dataset *d, int64_t i, int r, int f) {
    ts_sample s;
    CHECK_EQ(ts_dataset_get(d, i, &s), TS_OK);
    if (!s.x) return;
    CHECK_EQ(ts_ndim(s.x), 3);
    CHECK(ts_size(s.x, 0) == 32 && ts_size(s.x, 1) == 32 && ts_size(s.x, 2) == 3);
    unsigned char px[3072];
    CHECK_EQ(ts_copy_to_host(s.x, px, sizeof px), TS_OK);
    int bad = 0;
    for (int y = 0; y < 32; y++)
        for (int x = 0; x < 32; x++)
            for (int c = 0; c < 3; c++)
                bad += px[(y * 32 + x) * 3 + c] != (unsigned char)((c * 50 + y * 3 + x + r) % 256);
    CHECK_EQ(bad, 0);
    CHECK_EQ(ts_item(s.y), (r + f) % 10);
    ts_release(s.x);
    ts_release(s.y);
}

static void test_cifar(void) {
    mkdir(tpath("cifar"), 0700);
    make_cifar("cifar/test_batch.bin", 3, 0);
    ts_dataset *d = ts_cifar10_new(tpath("cifar"), TS_SPLIT_TEST);
    CHECK(d && ts_dataset_len(d) == 3 && ts_dataset_num_classes(d) == 10);
    for (int r = 0; d && r < 3; r++) check_cifar_sample(d, r, r, 0);
    ts_dataset_free(d);
    /* the archive's own folder, one level down; records follow the batches in order */
    mkdir(tpath("cifar/cifar-10-batches-bin"), 0700);
    for (int f = 1; f <= 5; f++) {
        char name[64];
        snprintf(name, sizeof name, "cifar/cifar-10-batches-bin/data_batch_%d.bin", f);
        make_cifar(name, f, f);
    }
    d = ts_cifar10_new(tpath("cifar"), TS_SPLIT_TRAIN);
    CHECK(d && ts_dataset_len(d) == 15);
    if (d) {
        check_cifar_sample(d, 0, 0, 1);
        check_cifar_sample(d, 1, 0, 2);
        check_cifar_sample(d, 14, 4, 5);
    }
    ts_dataset_free(d);

    CHECK_FAIL(ts_cifar10_new(tpath("nocifar"), TS_SPLIT_TEST), TS_ERR_IO,
               "nocifar/test_batch.bin: No such file or directory; download the CIFAR-10 binary "
               "version");
    mkdir(tpath("cbad"), 0700);
    unsigned char *b = calloc(1, 2 * TSI_CIFAR_RECORD + 5);
    b[0] = 9;
    b[TSI_CIFAR_RECORD] = 10;
    write_file("cbad/test_batch.bin", b, 2 * TSI_CIFAR_RECORD);
    CHECK_FAIL(ts_cifar10_new(tpath("cbad"), TS_SPLIT_TEST), TS_ERR_FORMAT,
               "cbad/test_batch.bin: record 1 has label 10 (CIFAR-10 labels are 0..9)");
    write_file("cbad/test_batch.bin", b, 2 * TSI_CIFAR_RECORD + 5);
    CHECK_FAIL(ts_cifar10_new(tpath("cbad"), TS_SPLIT_TEST), TS_ERR_FORMAT,
               "test_batch.bin: 6151 bytes is not a whole number of 3073-byte records (2 records "
               "and 5 bytes over)");
    free(b);
    write_file("cbad/test_batch.bin", "", 0);
    CHECK_FAIL(ts_cifar10_new(tpath("cbad"), TS_SPLIT_TEST), TS_ERR_FORMAT,
               "test_batch.bin: empty file");
    CHECK_FAIL(ts_cifar10_new(NULL, TS_SPLIT_TEST), TS_ERR_ARG, "dir is NULL");
}

/* Tensors in memory, on cpu and on sim:0 (the samples always come back on the cpu). */
static void test_tensor_dataset(void) {
    for (int dev = 0; dev < 2; dev++) {
        ts_device d0 = dev ? ts_sim(0) : ts_cpu();
        ts_scope_begin();
        ts_tensor *x = ts_arange(0, 24, 1, (ts_opts){.dtype = TS_F32, .device = d0});
        x = ts_transpose(ts_reshape(x, TS_SHAPE(3, 4, 2)), 0, 1); /* [4, 3, 2], not contiguous */
        ts_tensor *y = ts_tensor_i64(TS_SHAPE(4), (int64_t[]){5, 6, 7, 8}, (ts_opts){.device = d0});
        ts_dataset *d = ts_tensor_dataset_new(x, y);
        ts_scope_end(); /* the dataset holds its own references */
        CHECK(d && ts_dataset_len(d) == 4);
        ts_sample s;
        CHECK_EQ(ts_dataset_get(d, 2, &s), TS_OK);
        if (s.x) {
            CHECK(ts_device_equal(ts_device_of(s.x), ts_cpu()));
            CHECK(ts_ndim(s.x) == 2 && ts_size(s.x, 0) == 3 && ts_size(s.x, 1) == 2);
            float v[6];
            CHECK_EQ(ts_copy_to_host(s.x, v, sizeof v), TS_OK);
            /* x[2][a][b] = reshape(arange)[a][2][b] = a * 8 + 2 * 2 + b */
            for (int a = 0; a < 3; a++)
                for (int b = 0; b < 2; b++) CHECK_EQ(v[a * 2 + b], a * 8 + 4 + b);
            CHECK(ts_ndim(s.y) == 0 && ts_item(s.y) == 7);
            ts_release(s.x);
            ts_release(s.y);
        }
        ts_dataset_free(d);
    }
    ts_tensor *x = ts_ones(TS_SHAPE(2, 3), (ts_opts){0});
    ts_dataset *d = ts_tensor_dataset_new(x, NULL);
    ts_sample s;
    CHECK_EQ(ts_dataset_get(d, 1, &s), TS_OK);
    CHECK(s.y && ts_dtype_of(s.y) == TS_I64 && ts_ndim(s.y) == 1 && ts_numel(s.y) == 0);
    ts_release(s.x);
    ts_release(s.y);
    ts_dataset_free(d);
    ts_tensor *y3 = ts_zeros(TS_SHAPE(3), (ts_opts){.dtype = TS_I64});
    CHECK_FAIL(ts_tensor_dataset_new(x, y3), TS_ERR_SHAPE, "y must have one row per sample of x");
    ts_tensor *sc = ts_scalar(1, (ts_opts){0});
    CHECK_FAIL(ts_tensor_dataset_new(sc, NULL), TS_ERR_SHAPE, "x must have a first dim of samples");
    CHECK_FAIL(ts_tensor_dataset_new(NULL, NULL), TS_ERR_ARG, "ts_tensor_dataset: x is NULL");
    ts_release(x);
    ts_release(y3);
    ts_release(sc);
}

/* A user's dataset whose get forgets y, and one whose get fails without a message. */
static int64_t two(void *ctx) { return 2; }
static ts_status half_get(void *ctx, int64_t i, ts_sample *out) {
    out->x = ts_zeros(TS_SHAPE(1), (ts_opts){0});
    return i == 0 ? TS_OK : TS_ERR_IO;
}
static int freed;
static void count_free(void *ctx) { freed++; }

static void test_user_dataset(void) {
    ts_dataset *d =
        ts_dataset_new(&(ts_dataset_ops){.len = two, .get = half_get, .free = count_free}, NULL);
    ts_sample s;
    CHECK_EQ(ts_dataset_get(d, 0, &s), TS_ERR_STATE);
    CHECK(strstr(ts_error_message(), "returned TS_OK without x and y for index 0"));
    CHECK(s.x == NULL && s.y == NULL);
    ts_error_clear();
    CHECK_EQ(ts_dataset_get(d, 1, &s), TS_ERR_IO);
    CHECK(strstr(ts_error_message(), "failed with TS_ERR_IO for index 1"));
    ts_error_clear();
    ts_dataset_set_num_classes(d, 4);
    CHECK_EQ(ts_dataset_num_classes(d), 4);
    ts_dataset_free(d);
    CHECK_EQ(freed, 1);
    CHECK_FAIL(
        ts_dataset_new(&(ts_dataset_ops){.len = NULL, .get = half_get, .free = count_free}, NULL),
        TS_ERR_ARG, "ops->len is NULL");
    CHECK_EQ(freed, 2); /* the context is given back on failure too */
}

/* get() from several threads at once: every thread sees the same bytes. */
static ts_dataset *shared_ds;
static void *reader(void *arg) {
    long bad = 0;
    for (int rep = 0; rep < 200; rep++)
        for (int i = 0; i < 3; i++) {
            ts_sample s;
            if (ts_dataset_get(shared_ds, i, &s) != TS_OK) {
                bad++;
                continue;
            }
            unsigned char px[8];
            ts_copy_to_host(s.x, px, 8);
            bad += px[5] != 100 * i + 11 || ts_item(s.y) != labels3[i];
            ts_release(s.x);
            ts_release(s.y);
        }
    return (void *)bad;
}

static void test_threads(void) {
    shared_ds = ts_idx_dataset_new(tpath("b-images.gz"), tpath("b-labels.gz"));
    pthread_t th[4];
    for (int i = 0; i < 4; i++) pthread_create(&th[i], NULL, reader, NULL);
    long bad = 0;
    for (int i = 0; i < 4; i++) {
        void *r;
        pthread_join(th[i], &r);
        bad += (long)r;
    }
    CHECK_EQ(bad, 0);
    ts_dataset_free(shared_ds);
}

/* The real Fashion-MNIST test split; reference values from Python's gzip module:
 *   d = gzip.open('.../t10k-images-idx3-ubyte.gz').read(); l =
 * gzip.open('.../t10k-labels...').read() l[8:13] -> [9, 2, 1, 1, 6]; sum(d[16:16+784]) -> 33456;
 * d[16 + 14*28 + 14] -> 110; l[8+9999] -> 5; Counter(l[8:]) -> 1000 of each class */
static void test_fashion_mnist(void) {
    const char *dir = "/usr/share/datasets/fashion-mnist";
    struct stat sb;
    if (stat(dir, &sb) != 0) {
        printf("SKIP (part): %s is absent (apt-get install dataset-fashion-mnist)\n", dir);
        return;
    }
    ts_dataset *d = ts_mnist_new(dir, TS_SPLIT_TEST);
    CHECK(d != NULL);
    if (!d) return;
    CHECK_EQ(ts_dataset_len(d), 10000);
    CHECK_EQ(ts_dataset_num_classes(d), 10);
    int counts[10] = {0}, first[5];
    for (int64_t i = 0; i < 10000; i++) {
        ts_sample s;
        if (ts_dataset_get(d, i, &s) != TS_OK) break;
        int64_t y = (int64_t)ts_item(s.y);
        if (y >= 0 && y < 10) counts[y]++;
        if (i < 5) first[i] = (int)y;
        if (i == 0) {
            CHECK(ts_ndim(s.x) == 3 && ts_size(s.x, 0) == 28 && ts_size(s.x, 1) == 28 &&
                  ts_size(s.x, 2) == 1);
            unsigned char px[784];
            ts_copy_to_host(s.x, px, sizeof px);
            long sum = 0;
            for (int k = 0; k < 784; k++) sum += px[k];
            CHECK_EQ(sum, 33456);
            CHECK_EQ(px[14 * 28 + 14], 110);
        }
        if (i == 9999) CHECK_EQ(y, 5);
        ts_release(s.x);
        ts_release(s.y);
    }
    CHECK_OK();
    for (int c = 0; c < 10; c++) CHECK_EQ(counts[c], 1000);
    int want[5] = {9, 2, 1, 1, 6};
    for (int i = 0; i < 5; i++) CHECK_EQ(first[i], want[i]);
    ts_dataset_free(d);
}

#ifdef TS_HAVE_STB
/* w x h pixels, channel k of pixel (y, x) = (seed + 7 y + 3 x + 50 k) % 256 */
static void write_png(const char *name, int w, int h, int ch, int seed) {
    unsigned char px[4 * 8 * 8];
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            for (int k = 0; k < ch; k++)
                px[(y * w + x) * ch + k] = (unsigned char)((seed + 7 * y + 3 * x + 50 * k) % 256);
    CHECK(stbi_write_png(tpath(name), w, h, ch, px, w * ch) != 0);
}

static void check_image(ts_dataset *d, int64_t i, int w, int h, int seed, int gray, int label) {
    ts_sample s;
    CHECK_EQ(ts_dataset_get(d, i, &s), TS_OK);
    if (!s.x) return;
    CHECK(ts_ndim(s.x) == 3 && ts_size(s.x, 0) == h && ts_size(s.x, 1) == w &&
          ts_size(s.x, 2) == 3);
    unsigned char px[3 * 8 * 8];
    CHECK_EQ(ts_copy_to_host(s.x, px, (size_t)(w * h * 3)), TS_OK);
    int bad = 0;
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            for (int k = 0; k < 3; k++)
                bad +=
                    px[(y * w + x) * 3 + k] != (seed + 7 * y + 3 * x + 50 * (gray ? 0 : k)) % 256;
    CHECK_EQ(bad, 0);
    CHECK_EQ(ts_item(s.y), label);
    ts_release(s.x);
    ts_release(s.y);
}
#endif

/* root/<class>/<image>: classes in sorted order, images converted to the first image's channels. */
static void test_image_folder(void) {
#ifndef TS_HAVE_STB
    CHECK_FAIL(ts_image_folder_new(tmpdir), TS_ERR_UNSUPPORTED, "install Debian's libstb-dev");
#else
    mkdir(tpath("img"), 0700);
    mkdir(tpath("img/dog"), 0700);
    mkdir(tpath("img/cat"), 0700);
    write_png("img/dog/b.png", 5, 4, 3, 20);
    write_png("img/dog/a.png", 5, 4, 1, 90); /* gray: replicated into 3 channels */
    write_png("img/cat/x.png", 3, 2, 3, 1);
    write_file("img/cat/notes.txt", "not an image", 12);
    ts_dataset *d = ts_image_folder_new(tpath("img"));
    CHECK(d && ts_dataset_len(d) == 3 && ts_dataset_num_classes(d) == 2);
    if (d) {
        check_image(d, 0, 3, 2, 1, 0, 0);  /* cat/x.png */
        check_image(d, 1, 5, 4, 90, 1, 1); /* dog/a.png */
        check_image(d, 2, 5, 4, 20, 0, 1); /* dog/b.png */
    }
    write_file("img/dog/b.png", "\x89PNG broken", 12);
    ts_sample s;
    CHECK_EQ(ts_dataset_get(d, 2, &s), TS_ERR_FORMAT);
    CHECK(strstr(ts_error_message(), "img/dog/b.png: not an image stb_image can read"));
    ts_error_clear();
    remove(tpath("img/dog/b.png"));
    CHECK_EQ(ts_dataset_get(d, 2, &s), TS_ERR_IO);
    CHECK(strstr(ts_error_message(), "img/dog/b.png: No such file or directory"));
    ts_error_clear();
    ts_dataset_free(d);
    mkdir(tpath("img/empty"), 0700);
    CHECK_FAIL(ts_image_folder_new(tpath("img")), TS_ERR_FORMAT, "img/empty: no images");
    mkdir(tpath("noclass"), 0700);
    CHECK_FAIL(ts_image_folder_new(tpath("noclass")), TS_ERR_FORMAT, "noclass: no class folders");
    CHECK_FAIL(ts_image_folder_new(tpath("absent")), TS_ERR_IO,
               "absent: No such file or directory");
#endif
}

static int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
    return remove(p);
}

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/ts_datasets_XXXXXX");
    if (!mkdtemp(tmpdir)) return ts_test_skip("cannot make a temporary folder");
    if (ts_device_count(TS_SIM) < 1) ts_sim_configure(4, 0); /* run outside ctest too */
    ts_mem_stats m0, m1;
    ts_memory_stats(ts_cpu(), &m0);
    test_tensor_dataset();
    test_user_dataset();
    test_idx();
    test_idx_errors();
    test_threads();
    test_cifar();
    test_image_folder();
    test_fashion_mnist();
    ts_memory_stats(ts_cpu(), &m1);
    CHECK_EQ(m1.live_tensors, m0.live_tensors); /* every sample was released */
    nftw(tmpdir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    return ts_test_finish();
}
