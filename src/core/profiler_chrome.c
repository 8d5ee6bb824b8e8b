/* profiler_chrome.c — a profile as Chrome trace-event JSON (Perfetto, chrome://tracing): one
 * process per device, one thread track per host thread (and cuda stream) and one for its
 * collectives, "X" complete events, "s"/"f" flows from a forward op to its backward node, "C"
 * counters of allocated memory. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/profiler_internal.h"

static int dev_pid(ts_device d) {
    switch (d.type) {
    case TS_SIM:
        return 100 + d.index;
    case TS_CUDA:
        return 200 + (d.index < 0 ? 0 : d.index);
    case TS_META:
        return 300;
    default:
        return 1;
    }
}

static void put_str(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

static const char *category(ts_profile_kind k) {
    switch (k) {
    case TS_PROF_OP:
        return "cpu_op";
    case TS_PROF_BACKWARD:
        return "backward";
    case TS_PROF_RANGE:
        return "user_annotation";
    case TS_PROF_WAIT:
        return "dataloader";
    case TS_PROF_TRANSFER:
        return "gpu_memcpy";
    case TS_PROF_KERNEL:
        return "kernel";
    case TS_PROF_COLLECTIVE:
        return "collective";
    default:
        return "memory";
    }
}

/* the track of an event: its host thread, or (thread, cuda stream); device time (kernel spans)
 * one track per device stream, whichever thread queued the work; collectives one track per device
 * ("collectives"), whichever thread ran them */
typedef struct track {
    int pid, thread;
    uint64_t stream;
    int tid;
    bool device, coll;
} track;

static int track_of(track *tr, size_t *n, const ts_profile_event *e, int pid) {
    const bool device = e->kind == TS_PROF_KERNEL, coll = e->kind == TS_PROF_COLLECTIVE;
    for (size_t i = 0; i < *n; i++)
        if (tr[i].pid == pid && tr[i].coll == coll &&
            (coll || (tr[i].device == device && tr[i].stream == e->stream &&
                      (device || tr[i].thread == e->thread))))
            return tr[i].tid;
    int tid = coll        ? 3000 + (int)*n
              : device    ? 2000 + (int)*n
              : e->stream ? 1000 + (int)*n
                          : e->thread + 1;
    tr[(*n)++] = (track){pid, e->thread, e->stream, tid, device, coll};
    return tid;
}

/* a collective's args as Kineto's record_param_comms names them; its dtype from its shape
 * ("[8, 4] float32"), the message's elements from its bytes: all_gather's input and
 * reduce_scatter's output are one block of world size */
static void put_comms_args(FILE *f, const ts_profile_event *e) {
    const char *sp = strrchr(e->shape, ' ');
    ts_dtype dt = TS_DTYPE_COUNT;
    for (int d = TS_F32; sp && d < TS_DTYPE_COUNT && dt == TS_DTYPE_COUNT; d++)
        if (!strcmp(sp + 1, ts_dtype_name((ts_dtype)d))) dt = (ts_dtype)d;
    const int64_t size = dt != TS_DTYPE_COUNT ? (int64_t)tsi_dtype_size(dt) : 1;
    const int64_t all = size > 0 ? e->bytes / size : e->bytes;
    const int64_t block = e->world_size > 0 ? all / e->world_size : all;
    fprintf(f, ",\"Collective name\":");
    put_str(f, e->name);
    fprintf(f,
            ",\"In msg nelems\":%" PRId64 ",\"Out msg nelems\":%" PRId64
            ",\"Group size\":%d,\"Rank\":%d,\"bytes\":%" PRId64,
            !strcmp(e->name, "all_gather") ? block : all,
            !strcmp(e->name, "reduce_scatter") ? block : all, e->world_size, e->rank, e->bytes);
    if (dt != TS_DTYPE_COUNT) fprintf(f, ",\"dtype\":\"%s\"", tsi_torch_scalar_name(dt));
}

#define AC2G_ID0 ((uint64_t)1 << 40)

static double us(const ts_profile *p, int64_t t) { return (double)(t - p->t0_ns) / 1e3; }

static void put_event(FILE *f, const ts_profile *p, const ts_profile_event *e, int pid, int tid) {
    fprintf(f, ",\n{\"ph\":\"X\",\"cat\":\"%s\",\"name\":", category(e->kind));
    put_str(f, e->name);
    fprintf(f,
            ",\"pid\":%d,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f,\"args\":{\"device\":\"%s\","
            "\"self_us\":%.3f",
            pid, tid, us(p, e->t0_ns), (double)(e->t1_ns - e->t0_ns) / 1e3,
            ts_device_str(e->device), (double)e->self_ns / 1e3);
    if (e->shape[0]) {
        fprintf(f, ",\"shape\":");
        put_str(f, e->shape);
    }
    const char *dims = ts_profile_event_input_dims(p, (size_t)(e - p->ev));
    if (dims[0]) /* JSON arrays already (profiler.c) */
        fprintf(f, ",\"Input Dims\":%s,\"Input type\":%s", dims,
                ts_profile_event_input_types(p, (size_t)(e - p->ev)));
    if (e->stream) fprintf(f, ",\"stream\":\"0x%" PRIx64 "\"", e->stream);
    if (e->kind == TS_PROF_TRANSFER) {
        double s = (double)(e->t1_ns - e->t0_ns) * 1e-9;
        fprintf(f,
                ",\"kind\":\"%s\",\"bytes\":%" PRId64 ",\"memory\":\"%s\",\"src\":\"%s\","
                "\"dst\":\"%s\",\"GB/s\":%.3f",
                e->transfer == TS_XFER_H2D   ? "HtoD"
                : e->transfer == TS_XFER_D2H ? "DtoH"
                                             : "DtoD",
                e->bytes, e->pinned ? "pinned" : "pageable", ts_device_str(e->src_device),
                ts_device_str(e->device), s > 0 ? (double)e->bytes / s * 1e-9 : 0.0);
    }
    if (e->kind == TS_PROF_COLLECTIVE) put_comms_args(f, e);
    if (e->flow) fprintf(f, ",\"flow\":%" PRIu64, e->flow);
    if (e->correlation) fprintf(f, ",\"correlation\":%" PRIu64, e->correlation);
    if (e->flops) fprintf(f, ",\"flops\":%" PRId64, e->flops); /* with_flops, as Kineto's */
    if (e->op_bytes) fprintf(f, ",\"op_bytes\":%" PRId64, e->op_bytes);
    fprintf(f, "}}");
}

/* a "process_name" record the first time pid appears (pids[0..*n): those named) */
static void name_process(FILE *f, int *pids, size_t *n, int pid, ts_device d) {
    for (size_t i = 0; i < *n; i++)
        if (pids[i] == pid) return;
    pids[(*n)++] = pid;
    fprintf(f,
            "%s{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%d,\"tid\":0,\"args\":{\"name\":\"%"
            "s\"}}",
            *n == 1 ? "" : ",\n", pid, ts_device_str(d));
}

ts_status ts_profile_export_chrome(const ts_profile *p, const char *path) {
    const char *op = "profile_export_chrome";
    if (!p || !path)
        return tsi_error_set(TS_ERR_ARG, "%s: %s is NULL", op, !p ? "profile" : "path");
    FILE *f = fopen(path, "w");
    if (!f) return tsi_error_set(TS_ERR_IO, "%s: cannot open %s for writing", op, path);
    track *tr = malloc((p->n + 1) * sizeof *tr);
    int64_t *last_mem = malloc((p->n + 1) * sizeof *last_mem);
    int *mem_pid = malloc((p->n + 1) * sizeof *mem_pid), *pids = malloc((p->n + 1) * sizeof *pids);
    if (!tr || !last_mem || !mem_pid || !pids) {
        free(tr);
        free(last_mem);
        free(mem_pid);
        free(pids);
        fclose(f);
        return tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op);
    }
    size_t ntr = 0, nmem = 0, npids = 0;
    fprintf(f,
            "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"producer\":\"tessera\","
            "\"dropped_events\":%" PRId64 "},\n\"traceEvents\":[\n",
            p->dropped);
    name_process(f, pids, &npids, 1, ts_cpu());
    for (size_t i = 0; i < p->n; i++) {
        const ts_profile_event *e = &p->ev[i];
        ts_device on = e->device;
        if (e->kind == TS_PROF_TRANSFER && on.type == TS_CPU) on = e->src_device;
        int pid = dev_pid(on);
        if (e->kind == TS_PROF_MEMORY) {
            size_t m = 0;
            while (m < nmem && mem_pid[m] != pid) m++;
            if (m < nmem && last_mem[m] == e->bytes) continue; /* unchanged */
            if (m == nmem) mem_pid[nmem++] = pid;
            last_mem[m] = e->bytes;
            name_process(f, pids, &npids, pid, on);
            fprintf(f,
                    ",\n{\"ph\":\"C\",\"name\":\"Memory\",\"pid\":%d,\"ts\":%.3f,"
                    "\"args\":{\"allocated\":%" PRId64 "}}",
                    pid, us(p, e->t0_ns), e->bytes);
            continue;
        }
        name_process(f, pids, &npids, pid, on);
        size_t before = ntr;
        int tid = track_of(tr, &ntr, e, pid);
        if (ntr != before && e->kind == TS_PROF_COLLECTIVE)
            fprintf(f,
                    ",\n{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,\"tid\":%d,"
                    "\"args\":{\"name\":\"collectives\"}}",
                    pid, tid);
        else if (ntr != before && e->kind == TS_PROF_KERNEL)
            fprintf(f,
                    ",\n{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,\"tid\":%d,"
                    "\"args\":{\"name\":\"device stream 0x%" PRIx64 "\"}}",
                    pid, tid, e->stream);
        else if (ntr != before) {
            fprintf(f,
                    ",\n{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,\"tid\":%d,"
                    "\"args\":{\"name\":\"thread %d",
                    pid, tid, e->thread);
            if (e->stream) fprintf(f, " stream 0x%" PRIx64, e->stream);
            fprintf(f, "\"}}");
        }
        put_event(f, p, e, pid, tid);
        if (e->flow)
            fprintf(f,
                    ",\n{\"ph\":\"%s\",\"cat\":\"fwdbwd\",\"name\":\"fwdbwd\",\"id\":%" PRIu64
                    ",\"pid\":%d,\"tid\":%d,\"ts\":%.3f%s}",
                    e->kind == TS_PROF_OP ? "s" : "f", e->flow, pid, tid, us(p, e->t0_ns),
                    e->kind == TS_PROF_OP ? "" : ",\"bp\":\"e\"");
        /* an op to its device time (Kineto's "ac2g": launch to kernel), ids apart from the
         * fwdbwd flows' */
        if (e->correlation)
            fprintf(f,
                    ",\n{\"ph\":\"%s\",\"cat\":\"ac2g\",\"name\":\"ac2g\",\"id\":%" PRIu64
                    ",\"pid\":%d,\"tid\":%d,\"ts\":%.3f%s}",
                    e->kind == TS_PROF_KERNEL ? "f" : "s", AC2G_ID0 + e->correlation, pid, tid,
                    us(p, e->t0_ns), e->kind == TS_PROF_KERNEL ? ",\"bp\":\"e\"" : "");
    }
    fprintf(f, "\n]}\n");
    free(tr);
    free(last_mem);
    free(mem_pid);
    free(pids);
    if (ferror(f) | (fclose(f) != 0))
        return tsi_error_set(TS_ERR_IO, "%s: writing %s failed", op, path);
    return TS_OK;
}
