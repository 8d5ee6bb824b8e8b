/* test_data_corpus.c — runs the IDX, CIFAR-10 and CSV readers over every file of their fuzz corpora
 * (tests/fuzz/corpus/{idx,cifar,csv}, written by tools/gen_data_corpus.py), from memory as the fuzz
 * targets do and from the file as users do: both give the same allowed status and message, and the
 * files listed in <kind>.tsv give exactly the listed status and message fragment. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "data_probe.h"
#include "ts_test.h"

#ifndef TS_DATA_CORPUS_DIR
#define TS_DATA_CORPUS_DIR "tests/fuzz/corpus"
#endif

typedef struct expect {
    char file[256], opts[64], status[32], fragment[512];
    bool seen;
} expect;

static expect table[512];
static int n_table;
static char root[512], tmpdir[64];

/* file \t [opts \t] status \t fragment */
static void read_table(const char *kind, bool with_opts) {
    char path[1024], line[1024];
    snprintf(path, sizeof path, "%s/%s.tsv", root, kind);
    n_table = 0;
    FILE *f = fopen(path, "r");
    CHECK(f != NULL);
    while (f && fgets(line, sizeof line, f) && n_table < 512) {
        if (line[0] == '#' || line[0] == '\n') continue;
        line[strcspn(line, "\n")] = '\0';
        char *col[4] = {line};
        int n = 1;
        for (char *p = line; n < (with_opts ? 4 : 3) && (p = strchr(p, '\t')); n++) {
            *p++ = '\0';
            col[n] = p;
        }
        CHECK_EQ(n, with_opts ? 4 : 3);
        if (n != (with_opts ? 4 : 3)) continue;
        expect *e = &table[n_table++];
        memset(e, 0, sizeof *e);
        snprintf(e->file, sizeof e->file, "%.255s", col[0]);
        snprintf(e->opts, sizeof e->opts, "%.63s", with_opts ? col[1] : "");
        snprintf(e->status, sizeof e->status, "%.31s", col[with_opts ? 2 : 1]);
        snprintf(e->fragment, sizeof e->fragment, "%.511s", col[with_opts ? 3 : 2]);
    }
    if (f) fclose(f);
}

static char *slurp(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    *size = (size_t)n;
    return buf;
}

typedef struct result {
    ts_status st;
    char msg[1024];
} result;

/* Records the pending result (and clears it); bad marks a wrong sample. */
static result take(ts_status st, bool bad, const char *file) {
    result r = {st, ""};
    CHECK(!bad);
    CHECK(probe_failure_ok(st));
    snprintf(r.msg, sizeof r.msg, "%s", st ? ts_error_message() : "");
    if (bad) printf("  %s: a sample does not match the file\n", file);
    ts_error_clear();
    return r;
}

/* The message past its leading file name (the two forms name the file differently). */
static const char *past_name(const char *msg, const char *name) {
    size_t n = strlen(name);
    return !strncmp(msg, name, n) && msg[n] == ':' ? msg + n : NULL;
}

static void compare(const char *file, const char *opts, result mem, const char *mem_name,
                    result disk, const char *disk_name, const ts_status *allowed, int n_allowed,
                    int *counts) {
    bool ok = false;
    for (int i = 0; i < n_allowed; i++) ok |= mem.st == allowed[i];
    CHECK(ok);
    CHECK_EQ(mem.st, disk.st);
    counts[mem.st == TS_OK ? 0 : 1]++;
    if (mem.st != TS_OK) {
        const char *a = past_name(mem.msg, mem_name), *b = past_name(disk.msg, disk_name);
        bool same = a && b && !strcmp(a, b);
        CHECK(same);
        if (!same)
            printf("  %s %s: memory says \"%s\", the file \"%s\"\n", file, opts, mem.msg, disk.msg);
    }
    for (int i = 0; i < n_table; i++) {
        expect *e = &table[i];
        if (strcmp(e->file, file) || strcmp(e->opts, opts)) continue;
        e->seen = true;
        bool match = !strcmp(ts_status_string(mem.st), e->status) && strstr(mem.msg, e->fragment);
        CHECK(match);
        if (!match)
            printf("  %s %s: expected %s \"%s\", got %s \"%s\"\n", file, opts, e->status,
                   e->fragment, ts_status_string(mem.st), mem.msg);
    }
}

static void one_idx(const char *file, const char *path, const char *buf, size_t size, int *counts) {
    tsi_idx x;
    bool bad = false;
    ts_status st = tsi_idx_parse(buf, size, path, &x);
    if (!st) st = probe_idx(&x, path, &bad);
    result mem = take(st, bad, file);
    bad = false;
    st = tsi_idx_read(path, &x);
    if (!st) st = probe_idx(&x, path, &bad);
    result disk = take(st, bad, file);
    static const ts_status allowed[] = {TS_OK, TS_ERR_FORMAT, TS_ERR_UNSUPPORTED};
    compare(file, "", mem, path, disk, path, allowed, 3, counts);
}

/* The file form goes through ts_cifar10 with the file linked as <tmp>/test_batch.bin. */
static void one_cifar(const char *file, const char *path, const char *buf, size_t size,
                      int *counts) {
    bool bad = false;
    ts_status st = probe_cifar(buf, size, path, &bad); /* before bad is read */
    result mem = take(st, bad, file);
    char link[128];
    snprintf(link, sizeof link, "%s/test_batch.bin", tmpdir);
    unlink(link);
    CHECK_EQ(symlink(path, link), 0);
    ts_dataset *d = ts_cifar10_new(tmpdir, TS_SPLIT_TEST);
    st = d ? TS_OK : ts_error();
    bad = false;
    if (d) {
        CHECK_EQ(ts_dataset_len(d), (int64_t)(size / TSI_CIFAR_RECORD));
        st = probe_all(d, TS_SHAPE(32, 32, 3), TS_U8, NULL, NULL, &bad);
    }
    result disk = take(st, bad, file);
    ts_dataset_free(d);
    static const ts_status allowed[] = {TS_OK, TS_ERR_FORMAT};
    compare(file, "", mem, path, disk, link, allowed, 2, counts);
}

static void one_csv(const char *file, const char *path, const char *buf, size_t size, int *counts) {
    for (int set = 0; set < PROBE_CSV_SETS; set++) {
        bool bad = false;
        ts_status st = probe_csv(buf, size, path, set, &bad); /* before bad is read */
        result mem = take(st, bad, file);
        ts_dataset *d = ts_csv_dataset_new(path, probe_csv_sets[set].o);
        st = d ? TS_OK : ts_error();
        bad = false;
        ts_sample s0;
        if (d && (st = ts_dataset_get(d, 0, &s0)) == TS_OK) {
            st = probe_all(d, ts_shape_of(s0.x), TS_F32, NULL, NULL, &bad);
            ts_release(s0.x);
            ts_release(s0.y);
        }
        result disk = take(st, bad, file);
        ts_dataset_free(d);
        static const ts_status allowed[] = {TS_OK, TS_ERR_FORMAT, TS_ERR_ARG};
        compare(file, probe_csv_sets[set].name, mem, path, disk, path, allowed, 3, counts);
    }
}

static void run_kind(const char *kind, bool with_opts,
                     void (*one)(const char *, const char *, const char *, size_t, int *)) {
    read_table(kind, with_opts);
    char dir[600];
    snprintf(dir, sizeof dir, "%s/%s", root, kind);
    DIR *d = opendir(dir);
    CHECK(d != NULL);
    if (!d) return;
    int files = 0, counts[2] = {0};
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.') continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        size_t size;
        char *buf = slurp(path, &size);
        CHECK(buf != NULL);
        if (!buf) continue;
        files++;
        one(de->d_name, path, buf, size, counts);
        free(buf);
    }
    closedir(d);
    for (int i = 0; i < n_table; i++) {
        CHECK(table[i].seen);
        if (!table[i].seen)
            printf("  %s %s is listed but missing from %s\n", table[i].file, table[i].opts, dir);
    }
    printf("%s: %d corpus files, %d readings valid, %d refused\n", kind, files, counts[0],
           counts[1]);
    CHECK(files > 0 && n_table > 0);
}

int main(int argc, char **argv) {
    snprintf(root, sizeof root, "%s", argc > 1 ? argv[1] : TS_DATA_CORPUS_DIR);
    snprintf(tmpdir, sizeof tmpdir, "/tmp/ts_data_corpus_XXXXXX");
    if (!mkdtemp(tmpdir)) return ts_test_skip("cannot make a temporary folder");
    ts_mem_stats m0, m1;
    ts_memory_stats(ts_cpu(), &m0);
    run_kind("idx", false, one_idx);
    run_kind("cifar", false, one_cifar);
    run_kind("csv", true, one_csv);
    ts_memory_stats(ts_cpu(), &m1);
    CHECK_EQ(m1.live_tensors, m0.live_tensors); /* every sample was released */
    char link[128];
    snprintf(link, sizeof link, "%s/test_batch.bin", tmpdir);
    unlink(link);
    rmdir(tmpdir);
    return ts_test_finish();
}
