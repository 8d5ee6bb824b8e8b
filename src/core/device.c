/* device.c — devices: constructors, PyTorch-style parsing and printing, the default-device stack.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_bridge.h"
#include "backend/sim/sim_backend.h"
#include "core/internal.h"
#include "core/profiler_hooks.h"

ts_device ts_cpu(void) { return (ts_device){TS_CPU, 0}; }
ts_device ts_cuda(int i) { return (ts_device){TS_CUDA, i}; }
ts_device ts_sim(int i) { return (ts_device){TS_SIM, i}; }
ts_device ts_meta(void) { return (ts_device){TS_META, 0}; }

/* ------------------------------------------------------------- default-device stack */
#define TSI_DEVICE_STACK_MAX 64
static _Thread_local ts_device dev_stack[TSI_DEVICE_STACK_MAX];
static _Thread_local int dev_depth;

void ts_device_push(ts_device d) {
    if (dev_depth == TSI_DEVICE_STACK_MAX) {
        tsi_error_set(TS_ERR_STATE, "device_push: more than %d nested device scopes",
                      TSI_DEVICE_STACK_MAX);
        return;
    }
    /* resolve now so that a pushed TS_DEVICE_DEFAULT means "what is default at push time" */
    ts_device r = tsi_resolve_device(d); /* before dev_depth moves: it reads the stack top */
    dev_stack[dev_depth++] = r;
}

void ts_device_pop(void) {
    if (dev_depth == 0) {
        tsi_error_set(TS_ERR_STATE, "device_pop: no device scope is open");
        return;
    }
    dev_depth--;
}

ts_device ts_default_device(void) { return dev_depth ? dev_stack[dev_depth - 1] : ts_cpu(); }

ts_device tsi_resolve_device(ts_device d) {
    if (d.type == TS_DEVICE_DEFAULT) return ts_default_device();
    if (d.type == TS_CPU || d.type == TS_META) d.index = 0;
    if (d.type == TS_CUDA && d.index < 0) d.index = tsc_current_device(); /* ts_cuda_set_device */
    return d;
}

bool tsi_device_eq(ts_device a, ts_device b) { return a.type == b.type && a.index == b.index; }

bool ts_device_equal(ts_device a, ts_device b) {
    return tsi_device_eq(tsi_resolve_device(a), tsi_resolve_device(b));
}

/* ------------------------------------------------------------- names */
static const char *type_name(ts_device_type t) {
    switch (t) {
    case TS_CPU:
        return "cpu";
    case TS_CUDA:
        return "cuda";
    case TS_SIM:
        return "sim";
    case TS_META:
        return "meta";
    default:
        return "default";
    }
}

const char *ts_device_str(ts_device d) {
    char *b = tsi_fmt_buf();
    if (d.type == TS_DEVICE_DEFAULT) d = ts_default_device();
    if (d.type == TS_CPU || d.type == TS_META || (d.type == TS_CUDA && d.index < 0))
        snprintf(b, TSI_FMT_BUF_LEN, "%s", type_name(d.type));
    else
        snprintf(b, TSI_FMT_BUF_LEN, "%s:%d", type_name(d.type), d.index);
    return b;
}

/* PyTorch's grammar: type(:index)? with index "0" or [1-9][0-9]*; cpu only takes index 0. */
ts_status ts_device_parse(const char *s, ts_device *out) {
    if (!s || !out) return tsi_error_set(TS_ERR_ARG, "device_parse: NULL argument");
    size_t n = 0;
    while (isalpha((unsigned char)s[n]) || s[n] == '_') n++;
    ts_device_type type = TS_DEVICE_DEFAULT;
    if (n == 3 && !strncmp(s, "cpu", 3))
        type = TS_CPU;
    else if (n == 4 && !strncmp(s, "cuda", 4))
        type = TS_CUDA;
    else if (n == 3 && !strncmp(s, "sim", 3))
        type = TS_SIM;
    else if (n == 4 && !strncmp(s, "meta", 4))
        type = TS_META;
    if (type == TS_DEVICE_DEFAULT)
        return tsi_error_set(TS_ERR_ARG,
                             "device_parse: expected one of cpu, cuda, sim, meta device type at "
                             "start of device string: %s",
                             s);
    const char *p = s + n;
    long index = type == TS_CUDA ? -1 : 0;
    if (*p == ':') {
        p++;
        const char *digits = p;
        while (isdigit((unsigned char)*p)) p++;
        size_t nd = (size_t)(p - digits);
        if (nd == 0 || *p != '\0' || (nd > 1 && digits[0] == '0') || nd > 6)
            return tsi_error_set(TS_ERR_ARG, "device_parse: invalid device string: '%s'", s);
        index = strtol(digits, NULL, 10);
        if (type == TS_CPU && index != 0)
            return tsi_error_set(
                TS_ERR_ARG, "device_parse: CPU device index must be -1 or zero, got %ld", index);
        if (type == TS_META && index != 0)
            return tsi_error_set(TS_ERR_ARG,
                                 "device_parse: there is one meta device (meta or meta:0), got "
                                 "index %ld",
                                 index);
    } else if (*p != '\0') {
        return tsi_error_set(TS_ERR_ARG, "device_parse: invalid device string: '%s'", s);
    }
    if (type == TS_SIM && index < 0) index = 0;
    *out = (ts_device){type, (int)index};
    return TS_OK;
}

/* ------------------------------------------------------------- availability */
int ts_device_count(ts_device_type t) {
    tsi_init();
    if (t == TS_CPU || t == TS_META) return 1;
    const ts_backend *be = tsi_backend_for(t);
    return be ? be->device_count(be) : 0;
}

bool ts_cuda_is_available(void) { return ts_device_count(TS_CUDA) > 0; }

bool ts_device_is_available(ts_device d) {
    d = tsi_resolve_device(d);
    if (d.type == TS_CPU || d.type == TS_META) return true;
    return d.index >= 0 && d.index < ts_device_count(d.type);
}

bool tsi_check_device(const char *op, ts_device d) {
    if (d.type != TS_CPU && d.type != TS_CUDA && d.type != TS_SIM && d.type != TS_META)
        return tsi_error_set(TS_ERR_DEVICE, "%s: invalid device type %d", op, (int)d.type), false;
    if (ts_device_is_available(d)) return true;
    int n = ts_device_count(d.type);
    if (d.type == TS_CUDA && n == 0)
        tsi_error_set(TS_ERR_DEVICE, "%s: device %s is not available: CUDA is not available (%s)",
                      op, ts_device_str(d), tsc_unavailable_reason());
    else if (d.type == TS_SIM && n == 0)
        tsi_error_set(TS_ERR_DEVICE,
                      "%s: device %s is not available: no sim devices are configured "
                      "(ts_sim_configure or TS_SIM_DEVICES=N)",
                      op, ts_device_str(d));
    else
        tsi_error_set(TS_ERR_DEVICE, "%s: device %s is not available (%d %s device%s)", op,
                      ts_device_str(d), n, d.type == TS_CUDA ? "CUDA" : type_name(d.type),
                      n == 1 ? "" : "s");
    return false;
}

bool tsi_same_device(const char *op, ts_tensor *const *ts, int n, bool allow_cpu_scalar,
                     ts_device *dev) {
    /* the op's inputs, for the profiler's record_shapes: this list is the whole of them */
    if (atomic_load_explicit(&tsi_placement_on, memory_order_relaxed))
        tsi_prof_input_list(op, ts, n);
    int first = -1;
    for (int i = 0; i < n; i++) {
        if (!ts[i]) continue;
        if (allow_cpu_scalar && ts[i]->shape.ndim == 0 && ts[i]->storage->device.type == TS_CPU)
            continue;
        if (first < 0) {
            first = i;
            continue;
        }
        ts_device a = ts[first]->storage->device, b = ts[i]->storage->device;
        if (!tsi_device_eq(a, b)) {
            tsi_error_set(TS_ERR_DEVICE,
                          "%s: expected all tensors to be on the same device, but found at least "
                          "two devices, %s and %s",
                          op, ts_device_str(a), ts_device_str(b));
            return false;
        }
    }
    if (first < 0) /* only cpu scalars (or nothing): they live on the cpu */
        for (int i = 0; i < n && first < 0; i++)
            if (ts[i]) first = i;
    *dev = first >= 0 ? ts[first]->storage->device : ts_cpu();
    return true;
}

/* ------------------------------------------------------------- sim devices */
ts_status ts_sim_configure(int count, size_t capacity_bytes) {
    tsi_init();
    if (count < 0 || count > 64)
        return tsi_error_set(TS_ERR_ARG, "sim_configure: count must be in [0, 64], got %d", count);
    int old = tsi_sim_backend_count();
    for (int i = 0; i < old; i++)
        if (tsi_live_tensors(ts_sim(i)) > 0)
            return tsi_error_set(TS_ERR_STATE,
                                 "sim_configure: sim:%d still holds %lld live tensors; release "
                                 "them before re-configuring",
                                 i, (long long)tsi_live_tensors(ts_sim(i)));
    tsi_memory_drop_allocators(TS_SIM);
    tsi_sim_backend_configure(count, capacity_bytes);
    return TS_OK;
}

/* ------------------------------------------------------------- placement log */
/* tsi_placement_on is the one flag an op loads: on while the log or the profiler is */
atomic_bool tsi_placement_on;
static atomic_bool placement_print;

void ts_log_placement(bool on) {
    atomic_store(&placement_print, on);
    tsi_placement_refresh();
}

void tsi_placement_refresh(void) {
    atomic_store(&tsi_placement_on, atomic_load(&placement_print) || atomic_load(&tsi_prof_on));
}

void tsi_log_placement_emit(const char *op, ts_device d) {
    if (atomic_load_explicit(&placement_print, memory_order_relaxed))
        fprintf(stderr, "tessera placement: %s on %s\n", op, ts_device_str(d));
    tsi_prof_op_begin(op, d);
}
