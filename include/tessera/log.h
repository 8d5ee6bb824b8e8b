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
TS_API void ts_logger_close(ts_logger *lg); /* flushes; NULL-safe */

#endif /* TESSERA_LOG_H */
