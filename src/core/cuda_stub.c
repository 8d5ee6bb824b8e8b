/* cuda_stub.c — the CUDA API in a build without CUDA (TS_HAVE_CUDA undefined): no devices, and
 * every call that needs one fails with TS_ERR_DEVICE "<op>: CUDA is not available (Tessera was
 * built without CUDA support)". Also the backend seam (cuda_bridge.h) the core calls. */
#ifndef TS_HAVE_CUDA

#include "backend/cuda/cuda_bridge.h"
#include "core/internal.h"

#define NO_CUDA "Tessera was built without CUDA support"

static ts_status unavailable(const char *op) {
    tsi_init();
    return tsi_error_set(TS_ERR_DEVICE, "%s: CUDA is not available (" NO_CUDA ")", op);
}

/* ------------------------------------------------------------------ the seam */
int tsc_backend_init(void) { return 0; }
const char *tsc_unavailable_reason(void) { return NO_CUDA; }
bool tsc_start_failed(void) { return false; }
int tsc_current_device(void) { return 0; }
const ts_alloc_hooks *tsc_device_alloc_hooks(void) { return NULL; }
const ts_backend *tsc_pinned_backend(void) { return NULL; }
const ts_alloc_hooks *tsc_pinned_alloc_hooks(void) { return NULL; }
uintptr_t tsc_current_stream_id(int device) { return 0; }
uintptr_t tsc_pinned_use_record(int device) { return 0; }
uint64_t tsc_prof_mark(int device) { return (void)device, 0; }
int64_t tsc_prof_elapsed_ns(uint64_t from, uint64_t to) { return (void)from, (void)to, -1; }
void tsc_prof_mark_free(uint64_t mark) { (void)mark; }
int tsc_runtime_device(void) { return -1; }
void tsc_cudnn_counters(long long *runs, long long *declined) { *runs = *declined = -1; }
void tsc_conv_nhwc_counters(long long *native, long long *copied) { *native = *copied = -1; }
void tsc_sdpa_tc_force(int mode) { (void)mode; }
long long tsc_sdpa_tc_runs(void) { return -1; }
bool tsc_copy_h2d_async(int device, void *dst, const void *src, size_t n) {
    unavailable("to_async");
    return false;
}
bool tsc_copy_d2h_async(int device, void *dst, const void *src, size_t n) {
    unavailable("copy_d2h_async");
    return false;
}

/* ------------------------------------------------------------------ devices */
int ts_cuda_device_count(void) {
    tsi_init();
    return 0;
}
ts_status ts_cuda_get_properties(int device, ts_cuda_props *out) {
    return unavailable("cuda_get_properties");
}
ts_status ts_cuda_set_device(int device) { return unavailable("cuda_set_device"); }
int ts_cuda_current_device(void) {
    unavailable("cuda_current_device");
    return -1;
}
ts_status ts_cuda_synchronize(int device) { return unavailable("cuda_synchronize"); }

/* ------------------------------------------------------------------ streams */
ts_cuda_stream *ts_cuda_stream_new(int device) {
    unavailable("cuda_stream_new");
    return NULL;
}
ts_status ts_cuda_stream_free(ts_cuda_stream *s) { return TS_OK; }
ts_cuda_stream *ts_cuda_default_stream(int device) {
    unavailable("cuda_default_stream");
    return NULL;
}
ts_status ts_cuda_set_stream(ts_cuda_stream *s) { return unavailable("cuda_set_stream"); }
ts_cuda_stream *ts_cuda_current_stream(int device) {
    unavailable("cuda_current_stream");
    return NULL;
}
int ts_cuda_stream_device(ts_cuda_stream *s) { return -1; }
ts_status ts_cuda_stream_synchronize(ts_cuda_stream *s) {
    return unavailable("cuda_stream_synchronize");
}
bool ts_cuda_stream_query(ts_cuda_stream *s) {
    unavailable("cuda_stream_query");
    return false;
}
ts_status ts_cuda_stream_wait_event(ts_cuda_stream *s, ts_cuda_event *e) {
    return unavailable("cuda_stream_wait_event");
}
void *ts_cuda_stream_handle(ts_cuda_stream *s) { return NULL; }

/* ------------------------------------------------------------------ events */
ts_cuda_event *ts_cuda_event_new(bool enable_timing) {
    unavailable("cuda_event_new");
    return NULL;
}
ts_status ts_cuda_event_record(ts_cuda_event *e, ts_cuda_stream *s) {
    return unavailable("cuda_event_record");
}
ts_status ts_cuda_event_synchronize(ts_cuda_event *e) {
    return unavailable("cuda_event_synchronize");
}
bool ts_cuda_event_query(ts_cuda_event *e) { return true; }
ts_status ts_cuda_event_elapsed_ms(ts_cuda_event *start, ts_cuda_event *end, float *ms) {
    return unavailable("cuda_event_elapsed_ms");
}
void ts_cuda_event_free(ts_cuda_event *e) {}

#else
typedef int ts_cuda_stub_unused; /* ISO C wants a translation unit to declare something */
#endif /* TS_HAVE_CUDA */
