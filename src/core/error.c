/* error.c — sticky thread-local error state: the first error wins until cleared. */
#include <stdio.h>
#include <string.h>

#include "backend/sim/sim_link.h"
#include "core/internal.h"
#include "core/profiler_hooks.h"

#define TSI_ERR_MSG_LEN 1024

static _Thread_local ts_status err_code = TS_OK;
static _Thread_local char err_msg[TSI_ERR_MSG_LEN];

ts_status ts_error(void) { return err_code; }

const char *ts_error_message(void) { return err_code == TS_OK ? "" : err_msg; }

void ts_error_clear(void) {
    err_code = TS_OK;
    err_msg[0] = '\0';
}

const char *ts_status_string(ts_status s) {
    switch (s) {
    case TS_OK:
        return "TS_OK";
    case TS_ERR_DEVICE:
        return "TS_ERR_DEVICE";
    case TS_ERR_SHAPE:
        return "TS_ERR_SHAPE";
    case TS_ERR_DTYPE:
        return "TS_ERR_DTYPE";
    case TS_ERR_ARG:
        return "TS_ERR_ARG";
    case TS_ERR_OOM:
        return "TS_ERR_OOM";
    case TS_ERR_IO:
        return "TS_ERR_IO";
    case TS_ERR_FORMAT:
        return "TS_ERR_FORMAT";
    case TS_ERR_CUDA:
        return "TS_ERR_CUDA";
    case TS_ERR_UNSUPPORTED:
        return "TS_ERR_UNSUPPORTED";
    case TS_ERR_STATE:
        return "TS_ERR_STATE";
    case TS_ERR_DIST:
        return "TS_ERR_DIST";
    }
    return "TS_ERR_UNKNOWN";
}

double (*tsi_dist_agree_max)(ts_dist_group *g, double local);
int (*tsi_dist_agree_size)(ts_dist_group *g);

ts_status tsi_error_set(ts_status code, const char *fmt, ...) {
    if (atomic_load_explicit(&tsi_placement_on, memory_order_relaxed)) tsi_prof_inputs_drop();
    if (err_code != TS_OK) return code; /* first error wins */
    err_code = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err_msg, sizeof err_msg, fmt, ap);
    va_end(ap);
    return code;
}

void tsi_error_append(const char *fmt, ...) {
    if (err_code == TS_OK) return;
    size_t used = strlen(err_msg);
    if (used + 1 >= sizeof err_msg) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err_msg + used, sizeof err_msg - used, fmt, ap);
    va_end(ap);
}

ts_status ts_error_set(ts_status code, const char *fmt, ...) {
    if (err_code != TS_OK) return code;
    err_code = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err_msg, sizeof err_msg, fmt, ap);
    va_end(ap);
    return code;
}

void tsi_kernel_oom(const char *kernel, size_t bytes) {
    if (bytes)
        tsi_error_set(TS_ERR_OOM, "%s: out of host memory for %zu bytes of scratch", kernel, bytes);
    else
        tsi_error_set(TS_ERR_OOM, "%s: out of host memory for its scratch", kernel);
}

bool tsi_check_input(const char *op, const ts_tensor *t, const char *what) {
    if (t) {
        if (atomic_load_explicit(&tsi_placement_on, memory_order_relaxed)) tsi_prof_input(op, t);
        /* an input still being copied over a simulated link (sim_link.c): the op waits for it */
        TSI_SIM_LINK_USE(t->storage->device, t->storage->uid);
        return TSI_DTYPE_GATE(op, t->dtype, t);
    }
    if (err_code == TS_OK) tsi_error_set(TS_ERR_ARG, "%s: %s is NULL", op, what);
    return false;
}

char *tsi_fmt_buf(void) {
    static _Thread_local char ring[16][TSI_FMT_BUF_LEN];
    static _Thread_local unsigned next;
    return ring[next++ % 16];
}
