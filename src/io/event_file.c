/* event_file.c — ts_event_file: TensorBoard's record framing around Event messages encoded by the
 * caller (tessera.utils.tensorboard); the framing and CRCs are tfevents.c's. */
#include <stdlib.h>

#include "core/internal.h"
#include "io/tfevents.h"
#include "tessera/log.h"

struct ts_event_file {
    tsi_wfile f;
};

ts_event_file *ts_event_file_create(const char *path, double wall_time) {
    const char *op = "event_file_create";
    if (!path || !*path) {
        tsi_error_set(TS_ERR_ARG, "%s: the path is %s", op, path ? "empty" : "NULL");
        return NULL;
    }
    ts_event_file *ef = calloc(1, sizeof *ef);
    if (!ef) {
        tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op);
        return NULL;
    }
    if (tsi_tfevents_create(&ef->f, op, path, wall_time) != TS_OK) {
        free(ef);
        return NULL;
    }
    return ef;
}

ts_status ts_event_file_write(ts_event_file *ef, const void *event, size_t nbytes) {
    const char *op = "event_file_write";
    if (!ef) return tsi_error_set(TS_ERR_ARG, "%s: event file is NULL", op);
    if (!event && nbytes > 0) return tsi_error_set(TS_ERR_ARG, "%s: event is NULL", op);
    return tsi_tfevents_record(&ef->f, op, event ? event : "", nbytes);
}

ts_status ts_event_file_flush(ts_event_file *ef) {
    const char *op = "event_file_flush";
    if (!ef) return tsi_error_set(TS_ERR_ARG, "%s: event file is NULL", op);
    return tsi_wfile_flush(&ef->f, op);
}

ts_status ts_event_file_close(ts_event_file *ef) {
    if (!ef) return TS_OK;
    ts_status st = tsi_wfile_close(&ef->f, "event_file_close");
    free(ef);
    return st;
}
