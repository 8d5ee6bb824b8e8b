/* tessera/log.h — training logs: metrics as JSON lines and TensorBoard event files (via tessera.h).
 */
#ifndef TESSERA_LOG_H
#define TESSERA_LOG_H

/* A run's log folder: metrics.jsonl (one JSON object per record) and a TensorBoard event file
 * events.out.tfevents.<time>.<host> with scalar summaries, which TensorBoard opens. */
typedef struct ts_logger ts_logger;
TS_API ts_logger *ts_logger_open(const char *dir); /* creates dir; NULL + TS_ERR_IO on failure */
/* one scalar at a step, e.g. ("train/loss", 12, 0.53); both files */
TS_API ts_status ts_logger_scalar(ts_logger *lg, const char *tag, int64_t step, double value);
/* a JSON-lines record of several fields: {"step": step, "<k0>": v0, ...} (no TensorBoard) */
TS_API ts_status ts_logger_record(ts_logger *lg, int64_t step, int n, const char *const *keys,
                                  const double *values);
TS_API ts_status ts_logger_flush(ts_logger *lg);
/* flushes both files and frees lg, also when a flush fails (TS_ERR_IO naming it); NULL-safe */
TS_API ts_status ts_logger_close(ts_logger *lg);

/* A bare TensorBoard event file for writers that encode their own Event messages (the Python
 * package's SummaryWriter): ts_event_file_open makes path, which must not exist yet (its folder
 * must), and writes and flushes the first record, Event{wall_time, file_version "brain.Event:2"};
 * NULL + TS_ERR_IO naming the path on failure. ts_event_file_write appends one record framing a
 * serialized Event (uint64 length, masked CRC-32C of it, the bytes, masked CRC-32C of them),
 * buffered until a flush. After a failed write every later call reports that failure. */
typedef struct ts_event_file ts_event_file;
TS_API ts_event_file *ts_event_file_open(const char *path, double wall_time);
TS_API ts_status ts_event_file_write(ts_event_file *ef, const void *event, size_t nbytes);
TS_API ts_status ts_event_file_flush(ts_event_file *ef);
TS_API ts_status ts_event_file_close(ts_event_file *ef); /* flushes and frees; NULL-safe */

/* The 0.1 names of the constructors above, kept as aliases for the 0.x series and removed at
 * 1.0 (decision 0025: a constructor is ts_<type>_new). Each does what its new name does. */
TS_API ts_event_file *ts_event_file_create(const char *path, double wall_time);

#endif /* TESSERA_LOG_H */
