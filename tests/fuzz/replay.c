/* replay.c — runs a libFuzzer target's LLVMFuzzerTestOneInput over every file of a corpus folder
 * without libFuzzer, as an ordinary test (ctest fuzz_<target>_corpus, under ASan + UBSan in CI): a
 * target aborts on a broken invariant, so a file that breaks one fails the test.
 * Usage: fuzz_<target>_replay FOLDER */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "ts_test.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int main(int argc, char **argv) {
    if (argc != 2) return ts_test_skip("usage: %s CORPUS_FOLDER", argv[0]);
    DIR *d = opendir(argv[1]);
    CHECK(d != NULL);
    if (!d) return ts_test_finish();
    int files = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", argv[1], e->d_name);
        FILE *f = fopen(path, "rb");
        CHECK(f != NULL);
        if (!f) continue;
        uint8_t *buf = malloc(1 << 20);
        size_t n = buf ? fread(buf, 1, 1 << 20, f) : 0;
        fclose(f);
        fprintf(stderr, "%s\n", e->d_name); /* the last name printed is the one that aborted */
        CHECK_EQ(LLVMFuzzerTestOneInput(buf, n), 0);
        free(buf);
        files++;
    }
    closedir(d);
    printf("%d corpus files of %s replayed\n", files, argv[1]);
    CHECK(files > 0);
    return ts_test_finish();
}
