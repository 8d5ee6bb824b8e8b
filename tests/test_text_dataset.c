/* test_text_dataset.c — ts_text_dataset: which files a folder contributes and in what order,
 * windows and their one-byte shift, the split, random training offsets that change with the epoch
 * but not with the number of workers, the loader's batches, and the errors. The expected corpus is
 * built here from the same files. */
#define _XOPEN_SOURCE 700
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ts_test.h"

static char root[256];

static void write_file(const char *rel, const void *data, size_t n) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s", root, rel);
    FILE *f = fopen(p, "wb");
    fwrite(data, 1, n, f);
    fclose(f);
}

static char *path(const char *rel) {
    static char p[512];
    snprintf(p, sizeof p, "%s/%s", root, rel);
    return p;
}

/* the bytes of sample i as int64 values, checked: y is x one byte later */
static bool sample_bytes(ts_dataset *d, int64_t i, int64_t epoch, int64_t T, int64_t *x) {
    ts_sample s;
    if (ts_dataset_get_epoch(d, i, epoch, &s)) return false;
    int64_t *y = malloc((size_t)T * sizeof *y);
    bool ok = ts_numel(s.x) == T && ts_numel(s.y) == T && ts_dtype_of(s.x) == TS_I64;
    ok = ok && !ts_copy_to_host(s.x, x, (size_t)T * sizeof *x) &&
         !ts_copy_to_host(s.y, y, (size_t)T * sizeof *y);
    for (int64_t t = 0; ok && t + 1 < T; t++) ok = y[t] == x[t + 1];
    free(y);
    ts_release(s.x);
    ts_release(s.y);
    return ok;
}

/* where in corpus (of n bytes) the window x of T bytes starts, searching [lo, hi] */
static int64_t find_window(const unsigned char *corpus, int64_t lo, int64_t hi, const int64_t *x,
                           int64_t T) {
    for (int64_t o = lo; o <= hi; o++) {
        int64_t t = 0;
        while (t < T && corpus[o + t] == x[t]) t++;
        if (t == T) return o;
    }
    return -1;
}

int main(void) {
    snprintf(root, sizeof root, "/tmp/ts_text_%d", (int)getpid());
    mkdir(root, 0755);
    mkdir(path("sub"), 0755);
    /* expected corpus: a.txt, sub/b.txt, z.txt in sorted path order; skipped: .hidden, bin.dat
     * (NUL byte), link (symbolic link to a.txt) */
    enum { NA = 3000, NB = 1500, NZ = 2300 };
    unsigned char *corpus = malloc(NA + NB + NZ);
    uint64_t r = 12345;
    for (int i = 0; i < NA + NB + NZ; i++) {
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        corpus[i] = (unsigned char)(32 + (r >> 33) % 95); /* printable, no NUL */
    }
    write_file("a.txt", corpus, NA);
    write_file("sub/b.txt", corpus + NA, NB);
    write_file("z.txt", corpus + NA + NB, NZ);
    write_file(".hidden", "hidden text that must not appear", 32);
    write_file("bin.dat", "ab\0cd", 5);
    unlink(path("link"));
    if (symlink(path("a.txt"), path("link")) != 0) perror("symlink");
    const int64_t N = NA + NB + NZ, T = 64;

    /* ---- validation split: fixed windows over the last 10% */
    ts_dataset *val = ts_text_dataset_new(root, TS_SPLIT_TEST, (ts_text_opts){.context = T});
    CHECK_OK();
    const int64_t n_train = (int64_t)((double)N * 0.9), n_val = N - n_train;
    CHECK_EQ(ts_dataset_len(val), (n_val - 1) / T);
    CHECK_EQ(ts_dataset_num_classes(val), 256);
    int64_t *x = malloc((size_t)T * sizeof *x);
    bool all = true;
    for (int64_t i = 0; i < ts_dataset_len(val); i++) {
        all = all && sample_bytes(val, i, 3, T, x);
        for (int64_t t = 0; all && t < T; t++) all = x[t] == corpus[n_train + i * T + t];
    }
    CHECK(all);
    CHECK_OK();

    /* ---- training split: window i starts in [i T, i T + T), the offsets change with the epoch,
     * the same epoch gives the same windows, and every window lies in the training bytes */
    ts_dataset *tr =
        ts_text_dataset_new(root, TS_SPLIT_TRAIN, (ts_text_opts){.context = T, .seed = 7});
    CHECK_OK();
    const int64_t W = n_train / T - 1;
    CHECK_EQ(ts_dataset_len(tr), W);
    int64_t moved = 0, in_place = 0, shift_hist[4] = {0};
    for (int64_t i = 0; i < W; i++) {
        int64_t o0 = -1, o1 = -1, o0b = -1;
        if (sample_bytes(tr, i, 0, T, x)) o0 = find_window(corpus, i * T, i * T + T - 1, x, T);
        if (sample_bytes(tr, i, 1, T, x)) o1 = find_window(corpus, i * T, i * T + T - 1, x, T);
        if (sample_bytes(tr, i, 0, T, x)) o0b = find_window(corpus, i * T, i * T + T - 1, x, T);
        in_place +=
            o0 >= 0 && o1 >= 0 && o0 == o0b && o0 + T + 1 <= n_train && o1 + T + 1 <= n_train;
        moved += o0 != o1;
        if (o0 >= 0) shift_hist[(o0 - i * T) * 4 / T]++;
    }
    CHECK_EQ(in_place, W);
    /* P(same shift in two epochs) = 1/T per window */
    CHECK(moved >= W - 5);
    /* the shifts spread over [0, T): each quarter gets some of the W windows */
    for (int q = 0; q < 4; q++) CHECK(shift_hist[q] > W / 16);
    /* another seed, other windows */
    ts_dataset *tr2 =
        ts_text_dataset_new(root, TS_SPLIT_TRAIN, (ts_text_opts){.context = T, .seed = 8});
    int64_t *x2 = malloc((size_t)T * sizeof *x2), differ = 0;
    for (int64_t i = 0; i < W; i++) {
        sample_bytes(tr, i, 0, T, x);
        sample_bytes(tr2, i, 0, T, x2);
        differ += memcmp(x, x2, (size_t)T * sizeof *x) != 0;
    }
    CHECK(differ >= W - 5);
    ts_dataset_free(tr2);
    CHECK_OK();

    /* ---- the loader: batches i64 [B, T], epoch-dependent windows, same with workers */
    int64_t *b0 = NULL, *b2 = NULL;
    for (int workers = 0; workers <= 2; workers += 2) {
        ts_loader *l = ts_loader_new(
            tr, (ts_loader_opts){.batch_size = 4, .shuffle = true, .seed = 3, .workers = workers});
        ts_loader_set_epoch(l, 5);
        ts_batch b;
        int64_t *out = malloc((size_t)(W * T) * sizeof *out), k = 0;
        while (ts_loader_next(l, &b)) {
            CHECK(ts_ndim(b.x) == 2 && ts_size(b.x, 1) == T && ts_dtype_of(b.x) == TS_I64);
            ts_copy_to_host(b.x, out + k, (size_t)ts_numel(b.x) * sizeof *out);
            k += ts_numel(b.x);
        }
        CHECK_EQ(k, W * T);
        ts_loader_free(l);
        if (workers == 0)
            b0 = out;
        else
            b2 = out;
    }
    CHECK(b0 && b2 && memcmp(b0, b2, (size_t)(W * T) * sizeof *b0) == 0);
    /* the first batch's first row is the window the dataset gives for that index in epoch 5 */
    int64_t *perm_first = b0, found = 0;
    for (int64_t i = 0; i < W && !found; i++) {
        sample_bytes(tr, i, 5, T, x);
        found = memcmp(x, perm_first, (size_t)T * sizeof *x) == 0;
    }
    CHECK(found);
    free(b0);
    free(b2);
    CHECK_OK();

    /* ---- a single file is read as it is */
    ts_dataset *one = ts_text_dataset_new(path("a.txt"), TS_SPLIT_TEST,
                                          (ts_text_opts){.context = 16, .val_fraction = 0.5});
    CHECK_OK();
    CHECK_EQ(ts_dataset_len(one), (NA - NA / 2 - 1) / 16);
    ts_dataset_free(one);

    /* ---- errors name the op and the cause */
    CHECK(!ts_text_dataset_new(path("nowhere"), TS_SPLIT_TRAIN, (ts_text_opts){0}));
    CHECK(strstr(ts_error_message(), "ts_text_dataset") && strstr(ts_error_message(), "nowhere"));
    CHECK_ERR(TS_ERR_IO);
    CHECK(!ts_text_dataset_new(path("bin.dat"), TS_SPLIT_TRAIN, (ts_text_opts){0}));
    CHECK(strstr(ts_error_message(), "binary") != NULL);
    CHECK_ERR(TS_ERR_FORMAT);
    CHECK(!ts_text_dataset_new(path("a.txt"), TS_SPLIT_TRAIN, (ts_text_opts){.context = 2000}));
    CHECK(strstr(ts_error_message(), "too short") != NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(!ts_text_dataset_new(root, TS_SPLIT_TRAIN, (ts_text_opts){.context = -1}));
    CHECK_ERR(TS_ERR_ARG);
    CHECK(!ts_text_dataset_new(root, TS_SPLIT_TRAIN, (ts_text_opts){.val_fraction = 1.5}));
    CHECK_ERR(TS_ERR_ARG);
    CHECK(!ts_text_dataset_new(NULL, TS_SPLIT_TRAIN, (ts_text_opts){0}));
    CHECK_ERR(TS_ERR_ARG);

    ts_dataset_free(val);
    ts_dataset_free(tr);
    free(x);
    free(x2);
    free(corpus);
    const char *rm[] = {"a.txt", "sub/b.txt", "z.txt", ".hidden", "bin.dat", "link", "sub"};
    for (int i = 0; i < 7; i++) remove(path(rm[i]));
    rmdir(root);
    return ts_test_finish();
}
