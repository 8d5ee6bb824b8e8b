/* test_fuzz_corpus.c — runs the safetensors reader over every file of the fuzz corpus: each gives
 * TS_OK, TS_ERR_FORMAT or TS_ERR_UNSUPPORTED with a message, and the files listed in
 * safetensors.tsv (tools/gen_fuzz_corpus.py) give exactly the listed status and message. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ts_test.h"

#ifndef TS_CORPUS_DIR
#define TS_CORPUS_DIR "tests/fuzz/corpus/safetensors"
#endif

typedef struct expect {
    char file[1024], status[1024], fragment[1024];
    bool seen;
} expect;

static expect table[512];
static int n_table;

static void read_table(const char *dir) {
    char path[1024];
    snprintf(path, sizeof path, "%s.tsv", dir);
    FILE *f = fopen(path, "r");
    CHECK(f != NULL);
    if (!f) return;
    char line[1024];
    while (fgets(line, sizeof line, f) && n_table < 512) {
        if (line[0] == '#' || line[0] == '\n') continue;
        line[strcspn(line, "\n")] = '\0';
        expect *e = &table[n_table++];
        char *tab1 = strchr(line, '\t'), *tab2 = tab1 ? strchr(tab1 + 1, '\t') : NULL;
        CHECK(tab1 && tab2);
        if (!tab1 || !tab2) continue;
        *tab1 = *tab2 = '\0';
        snprintf(e->file, sizeof e->file, "%s", line);
        snprintf(e->status, sizeof e->status, "%s", tab1 + 1);
        snprintf(e->fragment, sizeof e->fragment, "%s", tab2 + 1);
    }
    fclose(f);
}

static char *read_file(const char *path, size_t *size) {
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

/* One result: an allowed status, a message when it failed, nothing left in the list. */
static void check_result(const char *file, ts_status st, ts_tensor_list *l, const expect *e,
                         const char *must_start) {
    const char *msg = ts_error_message();
    bool allowed = st == TS_OK || st == TS_ERR_FORMAT || st == TS_ERR_UNSUPPORTED;
    CHECK(allowed);
    CHECK_EQ(st, ts_error());
    if (st != TS_OK) {
        CHECK(msg[0] != '\0');
        CHECK_EQ(l->n, 0);
        if (must_start) CHECK(strncmp(msg, must_start, strlen(must_start)) == 0);
    }
    if (e) {
        bool ok = !strcmp(ts_status_string(st), e->status) && strstr(msg, e->fragment);
        CHECK(ok);
        if (!ok)
            printf("  %s: expected %s \"%s\", got %s \"%s\"\n", file, e->status, e->fragment,
                   ts_status_string(st), msg);
    }
    ts_tensor_list_free(l);
    ts_error_clear();
}

int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : TS_CORPUS_DIR;
    read_table(dir);
    DIR *d = opendir(dir);
    CHECK(d != NULL);
    if (!d) return ts_test_finish();
    int files = 0, counts[3] = {0};
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.') continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        size_t size;
        char *data = read_file(path, &size);
        CHECK(data != NULL);
        if (!data) continue;
        files++;
        expect *e = NULL;
        for (int i = 0; i < n_table; i++)
            if (!strcmp(table[i].file, de->d_name)) e = &table[i];
        if (e) e->seen = true;

        ts_tensor_list l = {0};
        ts_status st = ts_safetensors_parse(data, size, ts_cpu(), &l);
        counts[st == TS_OK ? 0 : st == TS_ERR_FORMAT ? 1 : 2]++;
        check_result(de->d_name, st, &l, e, "<memory>: ");
        /* the file path form names the file; sim:0 exercises the device copies */
        char start[1100];
        snprintf(start, sizeof start, "%s: ", path);
        ts_status st2 = ts_safetensors_load(path, ts_sim(0), &l);
        CHECK_EQ(st2, st);
        check_result(de->d_name, st2, &l, e, start);
        free(data);
    }
    closedir(d);
    for (int i = 0; i < n_table; i++) {
        CHECK(table[i].seen);
        if (!table[i].seen) printf("  %s is listed but missing from %s\n", table[i].file, dir);
    }
    printf("%d corpus files: %d valid, %d malformed, %d unsupported\n", files, counts[0], counts[1],
           counts[2]);
    CHECK(files >= n_table && n_table > 0);
    return ts_test_finish();
}
