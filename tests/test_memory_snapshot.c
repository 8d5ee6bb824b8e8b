/* test_memory_snapshot.c — memory snapshots of sim devices: the JSON (parsed with cJSON) lists
 * every block the allocator holds, adding up to ts_memory_stats, with backtraces while history
 * recording is on; an out-of-memory error on a capacity-capped sim device gives every figure, and
 * TS_OOM_SNAPSHOT writes a snapshot when it happens. */
#define _POSIX_C_SOURCE 200809L
#include <cjson/cJSON.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/alloc.h"
#include "tessera.h"
#include "tessera/storage.h"
#include "tessera/sync_debug.h"
#include "ts_test.h"

#define MIB ((size_t)1 << 20)

static cJSON *parse_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    static char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    return cJSON_Parse(buf);
}

static double num(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    CHECK(cJSON_IsNumber(v));
    return cJSON_IsNumber(v) ? v->valuedouble : -1;
}

/* Checks one device's segments against its stats; returns the active blocks with frames. */
static int check_device(const cJSON *root, const char *dev, ts_device d, int *active_out) {
    ts_mem_stats st;
    CHECK(ts_memory_stats(d, &st) == TS_OK);
    double allocated = 0, reserved = 0;
    int active = 0, with_frames = 0;
    const cJSON *seg;
    cJSON_ArrayForEach(seg, cJSON_GetObjectItemCaseSensitive(root, "segments")) {
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(seg, "device_name");
        if (!cJSON_IsString(name) || strcmp(name->valuestring, dev) != 0) continue;
        double addr = num(seg, "address"), total = num(seg, "total_size"), seg_alloc = 0;
        reserved += total;
        const cJSON *b;
        cJSON_ArrayForEach(b, cJSON_GetObjectItemCaseSensitive(seg, "blocks")) {
            /* blocks tile the segment in address order */
            CHECK(num(b, "address") == addr);
            addr += num(b, "size");
            const char *state = cJSON_GetObjectItemCaseSensitive(b, "state")->valuestring;
            CHECK(!strcmp(state, "active_allocated") || !strcmp(state, "inactive"));
            if (!strcmp(state, "active_allocated")) {
                seg_alloc += num(b, "size");
                active++;
                const cJSON *fr = cJSON_GetObjectItemCaseSensitive(b, "frames");
                if (cJSON_GetArraySize(fr) > 0) {
                    with_frames++;
                    const cJSON *f0 = cJSON_GetArrayItem(fr, 0);
                    CHECK(cJSON_IsString(cJSON_GetObjectItemCaseSensitive(f0, "name")));
                }
            }
        }
        CHECK(addr == num(seg, "address") + total);
        CHECK(seg_alloc == num(seg, "allocated_size"));
        allocated += seg_alloc;
    }
    CHECK(allocated == (double)st.allocated);
    CHECK(reserved == (double)st.reserved);
    const cJSON *e, *found = NULL;
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(root, "devices")) {
        if (!strcmp(cJSON_GetObjectItemCaseSensitive(e, "device")->valuestring, dev)) found = e;
    }
    CHECK(found != NULL);
    if (found) {
        CHECK(num(found, "allocated") == (double)st.allocated);
        CHECK(num(found, "reserved") == (double)st.reserved);
        CHECK(num(found, "capacity") == (double)(8 * MIB));
    }
    *active_out = active;
    return with_frames;
}

static void test_snapshot(const char *path) {
    ts_device d = ts_sim(0);
    ts_scope_begin();
    ts_tensor *old = ts_empty(TS_SHAPE(1000), (ts_opts){.device = d}); /* before recording */
    ts_memory_record_history(true);
    ts_tensor *t[5];
    /* t[1] and t[3] taken out of the scope (ts_keep), so that releasing them frees them */
    for (int i = 0; i < 5; i++) {
        t[i] = ts_empty(TS_SHAPE(100 << i), (ts_opts){.device = d});
        if (i == 1 || i == 3) t[i] = ts_keep(t[i]);
    }
    ts_tensor *big = ts_empty(TS_SHAPE((int64_t)(2 * MIB / 4)), (ts_opts){.device = d});
    ts_release(t[1]); /* a hole: an inactive block */
    ts_release(t[3]);
    CHECK_OK();
    CHECK(ts_memory_snapshot(path) == TS_OK);
    cJSON *root = parse_file(path);
    CHECK(root != NULL);
    if (root) {
        int active = 0;
        int frames = check_device(root, "sim:0", d, &active);
        CHECK_EQ(active, 5); /* old, t0, t2, t4, big */
        CHECK_EQ(frames, 4); /* all but old */
    }
    cJSON_Delete(root);
    char *s = ts_memory_snapshot_json();
    CHECK(s && strstr(s, "\"segments\""));
    free(s);
    ts_memory_record_history(false);
    (void)old, (void)big;
    ts_scope_end();
    CHECK(ts_memory_snapshot("/nonexistent-dir/x.json") == TS_ERR_IO);
    ts_error_clear();
}

static void test_oom(const char *oom_path) {
    ts_device d = ts_sim(1);
    ts_scope_begin();
    /* two 2 MiB small-pool segments: a, (b released), c and 1 MiB never used */
    ts_tensor *a = ts_empty(TS_SHAPE((int64_t)(MIB / 4)), (ts_opts){.device = d});
    ts_tensor *b = ts_keep(ts_empty(TS_SHAPE((int64_t)(MIB / 4)), (ts_opts){.device = d}));
    ts_tensor *c = ts_empty(TS_SHAPE((int64_t)(MIB / 4)), (ts_opts){.device = d});
    ts_release(b);
    CHECK_OK();
    CHECK(ts_empty(TS_SHAPE((int64_t)(6 * MIB / 4)), (ts_opts){.device = d}) == NULL);
    CHECK_ERR_HAS(TS_ERR_OOM,
                  "empty: out of memory on sim:1: tried to allocate 6.00 MiB; the device has a "
                  "total capacity of 8.00 MiB of which 4.00 MiB is free. Of the allocated memory "
                  "2.00 MiB is allocated by tensors, and 2.00 MiB is reserved by the caching "
                  "allocator but unallocated (largest free cached block 1.00 MiB).");
    cJSON *root = parse_file(oom_path);
    CHECK(root != NULL);
    if (root) {
        int active = 0;
        check_device(root, "sim:1", d, &active);
        CHECK_EQ(active, 2);
        const cJSON *e;
        bool oom_seen = false;
        cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(root, "devices")) {
            if (!strcmp(cJSON_GetObjectItemCaseSensitive(e, "device")->valuestring, "sim:1"))
                oom_seen = num(e, "oom_count") == 1;
        }
        CHECK(oom_seen);
    }
    cJSON_Delete(root);
    (void)a, (void)c;
    ts_scope_end();
}

/* The frames of the block at address addr (NULL: none or no such block). */
static const cJSON *block_frames(const cJSON *root, uintptr_t addr) {
    const cJSON *seg, *b;
    cJSON_ArrayForEach(seg, cJSON_GetObjectItemCaseSensitive(root, "segments")) {
        cJSON_ArrayForEach(b, cJSON_GetObjectItemCaseSensitive(seg, "blocks")) {
            if (num(b, "address") == (double)addr)
                return cJSON_GetObjectItemCaseSensitive(b, "frames");
        }
    }
    return NULL;
}

/* How many frames of fr are named name, with that file and line, and where the first is. */
static int find_frame(const cJSON *fr, const char *name, const char *file, int line, int *first) {
    int hits = 0, i = 0;
    *first = -1;
    const cJSON *f;
    cJSON_ArrayForEach(f, fr) {
        const cJSON *n = cJSON_GetObjectItemCaseSensitive(f, "name");
        const cJSON *fi = cJSON_GetObjectItemCaseSensitive(f, "filename");
        const cJSON *l = cJSON_GetObjectItemCaseSensitive(f, "line");
        if (cJSON_IsString(n) && !strcmp(n->valuestring, name) && cJSON_IsString(fi) &&
            !strcmp(fi->valuestring, file) && cJSON_IsNumber(l) && l->valuedouble == line) {
            if (*first < 0) *first = i;
            hits++;
        }
        i++;
    }
    return hits;
}

static void *other_thread(void *arg) {
    ts_tensor **out = arg;
    CHECK(ts_memory_history_context("[{\"name\": \"worker\", \"filename\": \"w.py\", "
                                    "\"line\": 7}]") == TS_OK);
    *out = ts_empty(TS_SHAPE(3000), (ts_opts){.device = ts_sim(0)});
    ts_memory_history_context(NULL);
    return NULL;
}

/* A thread's context (a binding's frames) follows the C backtrace of what it allocates while it is
 * set, in that thread only; text that is not a frame list is one frame; the C backtrace starts at
 * the allocator's caller. */
static void test_context(void) {
    ts_device d = ts_sim(0);
    ts_memory_record_history(true);
    CHECK(ts_memory_recording_history());
    CHECK(ts_memory_history_context("[{\"name\": \"step\", \"filename\": \"train.py\", "
                                    "\"line\": 12}, {\"name\": \"<module>\", \"filename\": "
                                    "\"train.py\", \"line\": 40}]") == TS_OK);
    ts_tensor *a = ts_empty(TS_SHAPE(1000), (ts_opts){.device = d});
    ts_tensor *w = NULL;
    pthread_t th;
    CHECK(pthread_create(&th, NULL, other_thread, &w) == 0);
    pthread_join(th, NULL);
    CHECK(ts_memory_history_context("not json") == TS_OK);
    ts_tensor *b = ts_empty(TS_SHAPE(2000), (ts_opts){.device = d});
    CHECK(ts_memory_history_context(NULL) == TS_OK);
    ts_tensor *c = ts_empty(TS_SHAPE(4000), (ts_opts){.device = d});
    CHECK_OK();
    char *s = ts_memory_snapshot_json();
    cJSON *root = s ? cJSON_Parse(s) : NULL;
    free(s);
    CHECK(root != NULL);
    if (root && a && b && c && w) {
        const cJSON *fa = block_frames(root, ts_data_ptr(a)),
                    *fb = block_frames(root, ts_data_ptr(b));
        const cJSON *fc = block_frames(root, ts_data_ptr(c)),
                    *fw = block_frames(root, ts_data_ptr(w));
        int n = cJSON_GetArraySize(fa), first, first2;
        /* the C frames, then the two context frames in order, last */
        CHECK_EQ(find_frame(fa, "step", "train.py", 12, &first), 1);
        CHECK_EQ(find_frame(fa, "<module>", "train.py", 40, &first2), 1);
        CHECK_EQ(first, n - 2);
        CHECK_EQ(first2, n - 1);
        CHECK(n > 2); /* and C frames before them */
        CHECK_EQ(find_frame(fa, "worker", "w.py", 7, &first), 0);
        CHECK_EQ(find_frame(fw, "worker", "w.py", 7, &first), 1); /* the other thread's own */
        CHECK_EQ(first, cJSON_GetArraySize(fw) - 1);
        CHECK_EQ(find_frame(fw, "step", "train.py", 12, &first), 0);
        CHECK_EQ(find_frame(fb, "not json", "", 0, &first), 1);
        CHECK_EQ(first, cJSON_GetArraySize(fb) - 1);
        CHECK_EQ(find_frame(fc, "step", "train.py", 12, &first), 0); /* cleared */
        CHECK_EQ(find_frame(fc, "not json", "", 0, &first), 0);
        CHECK(cJSON_GetArraySize(fc) > 0); /* the C frames stay */
    }
    cJSON_Delete(root);
    /* the first C frame is the allocator's caller, not the allocator itself: no frame lies in the
     * first bytes of tsi_allocator_alloc (its call of backtrace is well inside 4 KiB of its start)
     */
    ts_memory_history_context("[]");
    ts_tensor *e = ts_empty(TS_SHAPE(5000), (ts_opts){.device = d});
    s = ts_memory_snapshot_json();
    root = s ? cJSON_Parse(s) : NULL;
    free(s);
    const cJSON *fe = root && e ? block_frames(root, ts_data_ptr(e)) : NULL, *f;
    CHECK(cJSON_GetArraySize(fe) > 0);
    const uintptr_t lo = (uintptr_t)tsi_allocator_alloc, hi = lo + 4096;
    cJSON_ArrayForEach(f, fe) {
        const char *name = cJSON_GetObjectItemCaseSensitive(f, "name")->valuestring;
        const char *plus = strrchr(name, '[');
        uintptr_t pc = plus ? (uintptr_t)strtoull(plus + 1, NULL, 16) : 0;
        CHECK(!(pc >= lo && pc < hi));
    }
    cJSON_Delete(root);
    ts_memory_history_context(NULL);
    ts_memory_record_history(false);
    CHECK(!ts_memory_recording_history());
    ts_release(a), ts_release(b), ts_release(c), ts_release(w), ts_release(e);
    CHECK_OK();
}

int main(void) {
    char path[64], oom_path[64];
    snprintf(path, sizeof path, "/tmp/ts_snapshot_%d.json", (int)getpid());
    snprintf(oom_path, sizeof oom_path, "/tmp/ts_oom_snapshot_%d.json", (int)getpid());
    remove(oom_path);
    setenv("TS_OOM_SNAPSHOT", oom_path, 1); /* read at start-up */
    if (ts_sim_configure(2, 8 * MIB) != TS_OK) return ts_test_skip("sim devices busy");
    test_snapshot(path);
    test_oom(oom_path);
    test_context();
    remove(path);
    remove(oom_path);
    return ts_test_finish();
}
