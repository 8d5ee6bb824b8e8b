/* tfevents.h — buffered append-only log files and TensorBoard's event-file records (not public). */
#ifndef TS_IO_TFEVENTS_H
#define TS_IO_TFEVENTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tessera.h"

/* A file that only grows: bytes collect in memory and reach the file at tsi_wfile_flush (or when
 * TSI_WFILE_AUTOFLUSH bytes are pending). After a failed write the file is left alone for good,
 * because a partial record followed by more records would hide everything after it from readers:
 * later calls report the first failure again. */
typedef struct tsi_wfile {
    int fd;
    char *path; /* malloc'ed, for messages */
    unsigned char *buf;
    size_t len, cap;
    int err; /* errno of the first failed write, 0 while healthy */
} tsi_wfile;
#define TSI_WFILE_AUTOFLUSH ((size_t)1 << 16)

/* Opens path for appending, creating it (0666 less the umask); with exclusive an existing file is
 * EEXIST. Returns 0 or an errno and records no error, so callers can retry or word the message. */
int tsi_wfile_open(tsi_wfile *f, const char *path, bool exclusive);
/* TS_ERR_OOM / TS_ERR_IO "<op>: writing '<path>' failed: <strerror>". */
ts_status tsi_wfile_put(tsi_wfile *f, const char *op, const void *data, size_t n);
ts_status tsi_wfile_flush(tsi_wfile *f, const char *op);
/* Flushes, closes and frees; the first error is recorded and returned. Safe on a zeroed or
 * already closed handle. */
ts_status tsi_wfile_close(tsi_wfile *f, const char *op);

/* Creates dir/events.out.tfevents.<unix time>.<host> (with ".<pid>.<k>" appended when a logger of
 * the same second already made that name) and writes and flushes its first record, an Event with
 * wall_time and file_version "brain.Event:2". TS_ERR_IO names the path. */
ts_status tsi_tfevents_open(tsi_wfile *f, const char *op, const char *dir, double wall_time);
/* Creates path (an existing file is TS_ERR_IO, EEXIST) and writes and flushes the same first
 * record. */
ts_status tsi_tfevents_create(tsi_wfile *f, const char *op, const char *path, double wall_time);
/* One record: uint64 length (little-endian), masked CRC-32C of those 8 bytes, the data, masked
 * CRC-32C of the data. */
ts_status tsi_tfevents_record(tsi_wfile *f, const char *op, const void *data, size_t n);
/* Event{wall_time, step, summary: Summary{value: [Value{tag, simple_value}]}}. */
ts_status tsi_tfevents_scalar(tsi_wfile *f, const char *op, double wall_time, int64_t step,
                              const char *tag, float value);

#endif /* TS_IO_TFEVENTS_H */
