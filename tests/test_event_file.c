/* test_event_file.c — ts_event_file (TensorBoard records around caller-encoded Events, used by
 * tessera.utils.tensorboard): every record read back with an independent bitwise CRC-32C, the
 * first record's file_version, buffering until flush, records past the auto-flush size, and the
 * error paths. */
#define _XOPEN_SOURCE 700
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ts_test.h"

static char tmpdir[256];

/* CRC-32C bit by bit (reflected polynomial 0x82F63B78), independent of src/io/crc32c.c */
static uint32_t crc32c_bitwise(const unsigned char *p, size_t n) {
    uint32_t crc = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) {
        crc ^= p[i];
        for (int k = 0; k < 8; k++) crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1u)));
    }
    return crc ^ 0xFFFFFFFFu;
}

static uint32_t masked(const unsigned char *p, size_t n) {
    uint32_t c = crc32c_bitwise(p, n);
    return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

static uint64_t le(const unsigned char *p, int nbytes) {
    uint64_t v = 0;
    for (int i = nbytes - 1; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

static unsigned char *read_all(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    *n = 0;
    if (!f) return NULL;
    unsigned char *buf = NULL;
    size_t cap = 0, got;
    do {
        if (*n == cap) {
            cap = cap ? cap * 2 : 4096;
            buf = realloc(buf, cap);
        }
        got = fread(buf + *n, 1, cap - *n, f);
        *n += got;
    } while (got > 0);
    fclose(f);
    return buf;
}

/* Splits a file into records, checking both CRCs of each; returns the count (-1 on a bad one). */
static int read_records(const unsigned char *b, size_t n, const unsigned char **data, size_t *len,
                        int max) {
    size_t i = 0;
    int k = 0;
    while (i < n) {
        if (n - i < 16 || k == max) return -1;
        uint64_t m = le(b + i, 8);
        if (le(b + i + 8, 4) != masked(b + i, 8) || m > n - i - 16) return -1;
        if (le(b + i + 12 + m, 4) != masked(b + i + 12, m)) return -1;
        data[k] = b + i + 12;
        len[k++] = m;
        i += 16 + m;
    }
    return k;
}

static void test_roundtrip(void) {
    char path[512];
    snprintf(path, sizeof path, "%s/events.out.tfevents.1.test", tmpdir);
    double wall = 1234567890.5;
    ts_event_file *ef = ts_event_file_open(path, wall);
    CHECK(ef != NULL);
    if (!ef) return;
    /* the version record is on disk at once */
    size_t n0;
    unsigned char *b0 = read_all(path, &n0);
    const unsigned char *rec[8];
    size_t len[8];
    CHECK_EQ(read_records(b0, n0, rec, len, 8), 1);
    /* Event{wall_time 1 (fixed64), file_version 3 = "brain.Event:2"} */
    static const char version[] = "\x1a\x0d"
                                  "brain.Event:2";
    CHECK_EQ(len[0], 9 + sizeof version - 1);
    if (len[0] == 9 + sizeof version - 1) {
        CHECK_EQ(rec[0][0], 0x09);
        double w;
        uint64_t bits = le(rec[0] + 1, 8);
        memcpy(&w, &bits, sizeof w);
        CHECK(w == wall);
        CHECK(memcmp(rec[0] + 9, version, sizeof version - 1) == 0);
    }
    free(b0);

    /* three records: a small one, an empty one, one larger than the auto-flush size */
    size_t big_n = ((size_t)1 << 16) + 1234;
    unsigned char *big = malloc(big_n);
    for (size_t i = 0; i < big_n; i++) big[i] = (unsigned char)(i * 131 + 7);
    CHECK(ts_event_file_write(ef, "\x08\x01", 2) == TS_OK);
    CHECK(ts_event_file_write(ef, NULL, 0) == TS_OK);
    size_t n1;
    unsigned char *b1 = read_all(path, &n1);
    CHECK_EQ(n1, n0); /* buffered: nothing new on disk before a flush */
    free(b1);
    CHECK(ts_event_file_write(ef, big, big_n) == TS_OK);
    CHECK(ts_event_file_flush(ef) == TS_OK);
    CHECK(ts_event_file_flush(ef) == TS_OK); /* nothing pending */
    CHECK(ts_event_file_write(ef, "\x10\x02", 2) == TS_OK);
    CHECK(ts_event_file_close(ef) == TS_OK); /* flushes the last one */
    CHECK_OK();

    size_t n;
    unsigned char *b = read_all(path, &n);
    CHECK_EQ(read_records(b, n, rec, len, 8), 5);
    CHECK_EQ(n, n0 + 16 * 4 + 2 + 0 + big_n + 2);
    CHECK(len[1] == 2 && memcmp(rec[1], "\x08\x01", 2) == 0);
    CHECK_EQ(len[2], 0);
    CHECK(len[3] == big_n && memcmp(rec[3], big, big_n) == 0);
    CHECK(len[4] == 2 && memcmp(rec[4], "\x10\x02", 2) == 0);
    /* the planted check of the reader itself: a flipped byte is a bad record */
    b[n - 3] ^= 1;
    CHECK_EQ(read_records(b, n, rec, len, 8), -1);
    free(b);
    free(big);
    remove(path);
}

static void test_errors(void) {
    char path[512];
    snprintf(path, sizeof path, "%s/taken", tmpdir);
    ts_event_file *ef = ts_event_file_open(path, 1.0);
    CHECK(ef != NULL);
    /* an existing file is never appended to or truncated */
    CHECK(ts_event_file_open(path, 2.0) == NULL);
    CHECK_ERR_HAS(TS_ERR_IO, "taken");
    CHECK(ts_event_file_close(ef) == TS_OK);
    struct stat sb;
    CHECK(stat(path, &sb) == 0 && sb.st_size == 16 + 9 + 15);
    remove(path);

    snprintf(path, sizeof path, "%s/no/such/folder/events", tmpdir);
    CHECK(ts_event_file_open(path, 1.0) == NULL);
    CHECK_ERR_HAS(TS_ERR_IO, "no/such/folder");
    CHECK(ts_event_file_open(NULL, 1.0) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "event_file_create: the path is NULL");
    CHECK(ts_event_file_open("", 1.0) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "event_file_create: the path is empty");
    CHECK(ts_event_file_write(NULL, "x", 1) == TS_ERR_ARG);
    CHECK_ERR_HAS(TS_ERR_ARG, "event_file_write: event file is NULL");
    CHECK(ts_event_file_flush(NULL) == TS_ERR_ARG);
    CHECK_ERR_HAS(TS_ERR_ARG, "event_file_flush: event file is NULL");
    CHECK(ts_event_file_close(NULL) == TS_OK);
    CHECK_OK();

    snprintf(path, sizeof path, "%s/nullbytes", tmpdir);
    ef = ts_event_file_open(path, 1.0);
    CHECK(ts_event_file_write(ef, NULL, 3) == TS_ERR_ARG);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_event_file_write(ef, NULL, 1) == TS_ERR_ARG); /* one byte from nowhere: refused */
    CHECK_ERR_HAS(TS_ERR_ARG, "event_file_write: event is NULL");
    CHECK(ts_event_file_close(ef) == TS_OK);
    remove(path);
}

/* The descriptor open on path (found through /proc/self/fd), -1 if none. */
static int fd_of(const char *path) {
    for (int fd = 3; fd < 1024; fd++) {
        char link[64], target[512];
        snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
        ssize_t n = readlink(link, target, sizeof target - 1);
        if (n <= 0) continue;
        target[n] = 0;
        if (strcmp(target, path) == 0) return fd;
    }
    return -1;
}

/* A write that fails (the file's descriptor pointed at /dev/full): flush and close report it,
 * TS_ERR_IO naming the call, and close still frees the handle. */
static void test_write_failure(void) {
    char path[512];
    snprintf(path, sizeof path, "%s/full", tmpdir);
    for (int closing = 0; closing < 2; closing++) {
        ts_event_file *ef = ts_event_file_open(path, 1.0);
        CHECK(ef != NULL);
        char real[512];
        const int fd = ef && realpath(path, real) ? fd_of(real) : -1;
        const int full = open("/dev/full", O_WRONLY);
        if (fd < 0 || full < 0) {
            if (full >= 0) close(full);
            ts_event_file_close(ef);
            remove(path);
            printf("no /proc/self/fd or /dev/full: the write failure is not tested\n");
            return;
        }
        CHECK(dup2(full, fd) == fd);
        close(full);
        CHECK(ts_event_file_write(ef, "\x10\x01", 2) == TS_OK); /* buffered */
        if (closing) {
            CHECK(ts_event_file_close(ef) == TS_ERR_IO);
            CHECK_ERR_HAS(TS_ERR_IO, "event_file_close: writing");
        } else {
            CHECK(ts_event_file_flush(ef) == TS_ERR_IO);
            CHECK_ERR_HAS(TS_ERR_IO, "event_file_flush: writing");
            ts_event_file_close(ef);
            ts_error_clear();
        }
        remove(path);
    }
}

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/ts_event_file_XXXXXX");
    if (!mkdtemp(tmpdir)) return ts_test_skip("cannot create a scratch folder");
    test_roundtrip();
    test_errors();
    test_write_failure();
    rmdir(tmpdir);
    return ts_test_finish();
}
