/* memory_snapshot.c — PyTorch's memory _snapshot(): every segment and block of every device's
 * caching allocator as JSON, with allocation backtraces while history recording is on, and the
 * snapshot written on an allocation failure (TS_OOM_SNAPSHOT). */
#define _POSIX_C_SOURCE 200809L /* strdup */
#include <cjson/cJSON.h>
#include <execinfo.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "tessera/sync_debug.h"

ts_allocator *tsi_allocator_peek(ts_device d); /* memory.c */
ts_allocator *tsi_pinned_allocator_peek(void);

#define MAX_INDEX 64

static pthread_mutex_t oom_mu = PTHREAD_MUTEX_INITIALIZER;
static char *oom_path;

typedef struct walk_ctx {
    cJSON *segments;
    cJSON *seg;    /* the segment being filled */
    cJSON *blocks; /* its blocks */
    const char *device;
    int index;
    size_t allocated, active; /* of the current segment */
    bool failed;
} walk_ctx;

/* A frame of PyTorch's snapshot layout. */
static void add_frame(cJSON *arr, const char *name, const char *file, double line) {
    cJSON *f = cJSON_CreateObject();
    cJSON_AddStringToObject(f, "name", name);
    cJSON_AddStringToObject(f, "filename", file);
    cJSON_AddNumberToObject(f, "line", line);
    cJSON_AddItemToArray(arr, f);
}

/* The C backtrace, innermost first, then the thread's context of that allocation (a binding's
 * frames, innermost first: PyTorch lists the C++ frames before the Python ones the same way). A
 * context that is not a JSON array of frames is listed as one frame named by its text. */
static cJSON *frames_json(void *const *frames, int n, const char *context) {
    cJSON *arr = cJSON_CreateArray();
    char **names = n > 0 ? backtrace_symbols(frames, n) : NULL;
    for (int i = 0; arr && i < n; i++) {
        char addr[32];
        snprintf(addr, sizeof addr, "%p", frames[i]);
        add_frame(arr, names ? names[i] : addr, "", 0);
    }
    free(names);
    cJSON *ctx = context ? cJSON_Parse(context) : NULL;
    if (arr && context && !cJSON_IsArray(ctx)) add_frame(arr, context, "", 0);
    const cJSON *list = cJSON_IsArray(ctx) ? ctx : NULL, *f;
    cJSON_ArrayForEach(f, list) {
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(f, "name");
        const cJSON *file = cJSON_GetObjectItemCaseSensitive(f, "filename");
        const cJSON *line = cJSON_GetObjectItemCaseSensitive(f, "line");
        if (arr)
            add_frame(arr, cJSON_IsString(name) ? name->valuestring : "?",
                      cJSON_IsString(file) ? file->valuestring : "",
                      cJSON_IsNumber(line) ? line->valuedouble : 0);
    }
    cJSON_Delete(ctx);
    return arr;
}

static void seg_close(walk_ctx *w) {
    if (!w->seg) return;
    cJSON_AddNumberToObject(w->seg, "allocated_size", (double)w->allocated);
    cJSON_AddNumberToObject(w->seg, "active_size", (double)w->active);
    w->seg = NULL;
}

static void on_block(void *ctx, const ts_alloc_block_info *b) {
    walk_ctx *w = ctx;
    if (b->first_in_segment) {
        seg_close(w);
        w->seg = cJSON_CreateObject();
        cJSON_AddItemToArray(w->segments, w->seg);
        cJSON_AddNumberToObject(w->seg, "device", w->index);
        cJSON_AddStringToObject(w->seg, "device_name", w->device);
        cJSON_AddNumberToObject(w->seg, "address", (double)(uintptr_t)b->segment);
        cJSON_AddNumberToObject(w->seg, "total_size", (double)b->segment_size);
        cJSON_AddNumberToObject(w->seg, "stream", 0);
        cJSON_AddStringToObject(w->seg, "segment_type", b->small_pool ? "small" : "large");
        w->blocks = cJSON_AddArrayToObject(w->seg, "blocks");
        w->allocated = w->active = 0;
    }
    cJSON *o = cJSON_CreateObject();
    if (!o || !w->blocks) {
        w->failed = true;
        cJSON_Delete(o);
        return;
    }
    cJSON_AddNumberToObject(o, "address", (double)(uintptr_t)b->ptr);
    cJSON_AddNumberToObject(o, "size", (double)b->size);
    cJSON_AddNumberToObject(o, "requested_size", (double)b->size);
    cJSON_AddStringToObject(o, "state", b->allocated ? "active_allocated" : "inactive");
    if (b->allocated) w->allocated += b->size, w->active += b->size;
    if (b->frames || b->context)
        cJSON_AddItemToObject(o, "frames", frames_json(b->frames, b->nframes, b->context));
    cJSON_AddItemToArray(w->blocks, o);
}

static void add_device(cJSON *segments, cJSON *devices, ts_allocator *a, ts_device d,
                       const char *name, bool *failed) {
    walk_ctx w = {.segments = segments, .device = name, .index = d.index};
    tsi_allocator_walk(a, on_block, &w);
    seg_close(&w);
    *failed |= w.failed;
    ts_mem_stats st;
    tsi_allocator_stats(a, &st);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddItemToArray(devices, o);
    cJSON_AddStringToObject(o, "device", name);
    cJSON_AddNumberToObject(o, "allocated", (double)st.allocated);
    cJSON_AddNumberToObject(o, "reserved", (double)st.reserved);
    cJSON_AddNumberToObject(o, "reserved_unallocated", (double)(st.reserved - st.allocated));
    cJSON_AddNumberToObject(o, "peak_allocated", (double)st.peak_allocated);
    cJSON_AddNumberToObject(o, "peak_reserved", (double)st.peak_reserved);
    cJSON_AddNumberToObject(o, "alloc_count", (double)st.alloc_count);
    cJSON_AddNumberToObject(o, "oom_count", (double)st.oom_count);
    size_t free_b = 0, total_b = 0;
    const ts_backend *be = tsi_backend_for(d.type);
    if (be && be->memory_info && d.type != TS_CPU) be->memory_info(be, d.index, &free_b, &total_b);
    cJSON_AddNumberToObject(o, "capacity", (double)total_b); /* 0: unlimited / unknown */
    cJSON_AddNumberToObject(o, "free", (double)free_b);
}

static char *snapshot_json(void) {
    cJSON *root = cJSON_CreateObject();
    cJSON *segments = root ? cJSON_AddArrayToObject(root, "segments") : NULL;
    cJSON *devices = root ? cJSON_AddArrayToObject(root, "devices") : NULL;
    if (root) cJSON_AddItemToObject(root, "device_traces", cJSON_CreateArray());
    bool failed = !segments || !devices;
    static const ts_device_type types[] = {TS_CPU, TS_CUDA, TS_SIM};
    for (size_t t = 0; !failed && t < sizeof types / sizeof *types; t++)
        for (int i = 0; i < MAX_INDEX; i++) {
            ts_device d = {.type = types[t], .index = i};
            ts_allocator *a = tsi_allocator_peek(d);
            if (a) add_device(segments, devices, a, d, ts_device_str(d), &failed);
        }
    ts_allocator *pa = failed ? NULL : tsi_pinned_allocator_peek();
    if (pa) add_device(segments, devices, pa, ts_cpu(), "cpu_pinned", &failed);
    char *s = failed ? NULL : cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return s;
}

char *ts_memory_snapshot_json(void) {
    tsi_init();
    char *s = snapshot_json();
    if (!s) tsi_error_set(TS_ERR_OOM, "memory_snapshot: out of host memory");
    return s;
}

ts_status ts_memory_snapshot(const char *path) {
    if (!path) return tsi_error_set(TS_ERR_ARG, "memory_snapshot: path is NULL");
    char *s = ts_memory_snapshot_json();
    if (!s) return ts_error();
    FILE *f = fopen(path, "w");
    bool ok = f && fputs(s, f) >= 0;
    if (f && fclose(f) != 0) ok = false;
    free(s);
    if (!ok) return tsi_error_set(TS_ERR_IO, "memory_snapshot: cannot write %s", path);
    return TS_OK;
}

void ts_memory_record_history(bool enabled) { tsi_allocator_record_history(enabled); }
bool ts_memory_recording_history(void) { return tsi_allocator_recording_history(); }

ts_status ts_memory_history_context(const char *frames_json) {
    if (tsi_allocator_set_context(frames_json)) return TS_OK;
    return tsi_error_set(TS_ERR_OOM, "memory_history_context: out of host memory");
}

/* Runs after a failed allocation, outside the allocator locks; keeps the caller's error. */
static void oom_snapshot(void) {
    pthread_mutex_lock(&oom_mu);
    char *path = oom_path;
    if (path) {
        char *s = snapshot_json(); /* sets no error: the failed allocation's own comes next */
        FILE *f = s ? fopen(path, "w") : NULL;
        if (f) {
            fputs(s, f);
            fclose(f);
        }
        free(s);
    }
    pthread_mutex_unlock(&oom_mu);
}

ts_status ts_memory_set_oom_snapshot(const char *path) {
    char *copy = NULL;
    if (path && !(copy = strdup(path)))
        return tsi_error_set(TS_ERR_OOM, "memory_set_oom_snapshot: out of host memory");
    pthread_mutex_lock(&oom_mu);
    free(oom_path);
    oom_path = copy;
    pthread_mutex_unlock(&oom_mu);
    tsi_allocator_set_oom_hook(copy ? oom_snapshot : NULL);
    return TS_OK;
}
