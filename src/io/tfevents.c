/* tfevents.c — buffered log files and TensorBoard event records, the protobuf encoded by hand. */
#define _POSIX_C_SOURCE 200809L
#include "io/tfevents.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/internal.h"
#include "io/crc32c.h"

/* ------------------------------------------------------------------ buffered files */
int tsi_wfile_open(tsi_wfile *f, const char *path, bool exclusive) {
    memset(f, 0, sizeof *f);
    f->fd = -1;
    f->path = strdup(path);
    if (!f->path) return ENOMEM;
    int flags = O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | (exclusive ? O_EXCL : 0);
    int fd;
    do fd = open(path, flags, 0666);
    while (fd < 0 && errno == EINTR);
    if (fd < 0) {
        int err = errno;
        free(f->path);
        f->path = NULL;
        return err;
    }
    f->fd = fd;
    return 0;
}

static ts_status failed_earlier(tsi_wfile *f, const char *op) {
    return tsi_error_set(TS_ERR_IO, "%s: writing '%s' failed earlier: %s", op, f->path,
                         strerror(f->err));
}

ts_status tsi_wfile_flush(tsi_wfile *f, const char *op) {
    if (f->err) return failed_earlier(f, op);
    const unsigned char *p = f->buf;
    size_t n = f->len;
    while (n > 0) {
        ssize_t w = write(f->fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            f->err = w < 0 ? errno : EIO;
            f->len = 0;
            return tsi_error_set(TS_ERR_IO, "%s: writing '%s' failed: %s", op, f->path,
                                 strerror(f->err));
        }
        p += w;
        n -= (size_t)w;
    }
    f->len = 0;
    return TS_OK;
}

ts_status tsi_wfile_put(tsi_wfile *f, const char *op, const void *data, size_t n) {
    if (f->err) return failed_earlier(f, op);
    if (f->len > 0 && f->len + n > TSI_WFILE_AUTOFLUSH) {
        ts_status st = tsi_wfile_flush(f, op);
        if (st != TS_OK) return st;
    }
    if (f->len + n > f->cap) {
        size_t cap = f->cap ? f->cap : 4096;
        while (cap < f->len + n) cap *= 2;
        unsigned char *b = realloc(f->buf, cap);
        if (!b) return tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op);
        f->buf = b;
        f->cap = cap;
    }
    memcpy(f->buf + f->len, data, n);
    f->len += n;
    return TS_OK;
}

ts_status tsi_wfile_close(tsi_wfile *f, const char *op) {
    ts_status st = TS_OK;
    if (f->fd >= 0) {
        if (f->len > 0 && !f->err) st = tsi_wfile_flush(f, op); /* the failure was reported */
        /* close can report a deferred write error (NFS, quotas); EINTR must not be retried */
        if (close(f->fd) != 0 && errno != EINTR && st == TS_OK)
            st = tsi_error_set(TS_ERR_IO, "%s: closing '%s' failed: %s", op, f->path,
                               strerror(errno));
    }
    free(f->buf);
    free(f->path);
    memset(f, 0, sizeof *f);
    f->fd = -1;
    return st;
}

/* ------------------------------------------------------------------ protobuf by hand */
/* Wire types: 0 varint, 1 fixed64, 2 length-delimited, 5 fixed32; a key is (field << 3) | type. */
enum { WT_VARINT = 0, WT_FIXED64 = 1, WT_LEN = 2, WT_FIXED32 = 5 };

static size_t varint_len(uint64_t v) {
    size_t n = 1;
    while (v >= 0x80) v >>= 7, n++;
    return n;
}

static unsigned char *put_varint(unsigned char *p, uint64_t v) {
    while (v >= 0x80) {
        *p++ = (unsigned char)(v | 0x80);
        v >>= 7;
    }
    *p++ = (unsigned char)v;
    return p;
}

static unsigned char *put_le(unsigned char *p, uint64_t v, int nbytes) {
    for (int i = 0; i < nbytes; i++) *p++ = (unsigned char)(v >> (8 * i));
    return p;
}

static unsigned char *put_key(unsigned char *p, unsigned field, unsigned wire) {
    return put_varint(p, (uint64_t)(field << 3 | wire));
}

static unsigned char *put_double(unsigned char *p, unsigned field, double v) {
    uint64_t bits;
    memcpy(&bits, &v, sizeof bits);
    return put_le(put_key(p, field, WT_FIXED64), bits, 8);
}

static unsigned char *put_float(unsigned char *p, unsigned field, float v) {
    uint32_t bits;
    memcpy(&bits, &v, sizeof bits);
    return put_le(put_key(p, field, WT_FIXED32), bits, 4);
}

/* key + length; the caller writes the n bytes of payload after it */
static unsigned char *put_len(unsigned char *p, unsigned field, size_t n) {
    return put_varint(put_key(p, field, WT_LEN), n);
}

/* ------------------------------------------------------------------ records */
ts_status tsi_tfevents_record(tsi_wfile *f, const char *op, const void *data, size_t n) {
    unsigned char head[12], tail[4];
    put_le(head, n, 8);
    put_le(head + 8, tsi_crc32c_mask(tsi_crc32c(0, head, 8)), 4);
    put_le(tail, tsi_crc32c_mask(tsi_crc32c(0, data, n)), 4);
    ts_status st = tsi_wfile_put(f, op, head, sizeof head);
    if (st == TS_OK) st = tsi_wfile_put(f, op, data, n);
    if (st == TS_OK) st = tsi_wfile_put(f, op, tail, sizeof tail);
    return st;
}

/* Event field numbers (tensorflow/core/util/event.proto, tensorflow/core/framework/summary.proto)
 */
enum { EV_WALL_TIME = 1, EV_STEP = 2, EV_FILE_VERSION = 3, EV_SUMMARY = 5 };
enum { SUMMARY_VALUE = 1 };
enum { VALUE_TAG = 1, VALUE_SIMPLE = 2 };

ts_status tsi_tfevents_scalar(tsi_wfile *f, const char *op, double wall_time, int64_t step,
                              const char *tag, float value) {
    size_t tag_n = strlen(tag);
    size_t value_n = 1 + varint_len(tag_n) + tag_n + 5;
    size_t summary_n = 1 + varint_len(value_n) + value_n;
    /* negative steps are ten-byte varints of the two's complement, as protobuf's int64 */
    size_t event_n = 9 + 1 + varint_len((uint64_t)step) + 1 + varint_len(summary_n) + summary_n;
    unsigned char small[256];
    unsigned char *msg = event_n <= sizeof small ? small : malloc(event_n);
    if (!msg) return tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op);
    unsigned char *p = put_double(msg, EV_WALL_TIME, wall_time);
    p = put_varint(put_key(p, EV_STEP, WT_VARINT), (uint64_t)step);
    p = put_len(p, EV_SUMMARY, summary_n);
    p = put_len(p, SUMMARY_VALUE, value_n);
    p = put_len(p, VALUE_TAG, tag_n);
    memcpy(p, tag, tag_n);
    p = put_float(p + tag_n, VALUE_SIMPLE, value);
    ts_status st = tsi_tfevents_record(f, op, msg, (size_t)(p - msg));
    if (msg != small) free(msg);
    return st;
}

static const char file_version[] = "brain.Event:2";

/* the first record of every event file, flushed at once so that a reader sees a valid file */
static ts_status write_version(tsi_wfile *f, const char *op, double wall_time) {
    unsigned char msg[9 + 2 + sizeof file_version];
    unsigned char *p = put_double(msg, EV_WALL_TIME, wall_time);
    p = put_len(p, EV_FILE_VERSION, sizeof file_version - 1);
    memcpy(p, file_version, sizeof file_version - 1);
    p += sizeof file_version - 1;
    ts_status st = tsi_tfevents_record(f, op, msg, (size_t)(p - msg));
    if (st == TS_OK) st = tsi_wfile_flush(f, op);
    if (st != TS_OK) tsi_wfile_close(f, op);
    return st;
}

ts_status tsi_tfevents_create(tsi_wfile *f, const char *op, const char *path, double wall_time) {
    int err = tsi_wfile_open(f, path, true);
    if (err) return tsi_error_set(TS_ERR_IO, "%s: cannot create '%s': %s", op, path, strerror(err));
    return write_version(f, op, wall_time);
}

ts_status tsi_tfevents_open(tsi_wfile *f, const char *op, const char *dir, double wall_time) {
    char host[256];
    if (gethostname(host, sizeof host) != 0 || !host[0]) snprintf(host, sizeof host, "localhost");
    host[sizeof host - 1] = '\0';
    for (char *c = host; *c; c++)
        if (*c == '/') *c = '_';
    size_t cap = strlen(dir) + strlen(host) + 96;
    char *path = malloc(cap);
    if (!path) return tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op);
    int err = 0;
    /* TensorBoard reads every file whose name contains "tfevents", so a suffix keeps two loggers
     * started in the same second (and folder) apart */
    for (int k = 0; k < 1000; k++) {
        int n =
            snprintf(path, cap, "%s/events.out.tfevents.%lld.%s", dir, (long long)wall_time, host);
        if (k > 0) snprintf(path + n, cap - (size_t)n, ".%ld.%d", (long)getpid(), k);
        err = tsi_wfile_open(f, path, true);
        if (err != EEXIST) break;
    }
    if (err) {
        tsi_error_set(TS_ERR_IO, "%s: cannot create '%s': %s", op, path, strerror(err));
        free(path);
        return TS_ERR_IO;
    }
    free(path);
    return write_version(f, op, wall_time);
}
