/* autocast_state.c — ts_autocast_begin/end: a thread-local stack of autocast states. */
#include "amp/autocast.h"

#define TSI_AC_STACK_MAX 64

static _Thread_local tsi_autocast_state cur;
static _Thread_local tsi_autocast_state stack[TSI_AC_STACK_MAX];
static _Thread_local int depth;
_Thread_local int tsi_autocast_any;

static void recount(void) {
    int any = 0;
    for (int t = 1; t < TSI_AC_TYPES; t++) any += cur.enabled[t];
    tsi_autocast_any = any;
}

static ts_dtype default_dtype(ts_device_type t) { return t == TS_CUDA ? TS_F16 : TS_BF16; }

static int resolve_type(const char *op, ts_device_type t) {
    if (t == TS_DEVICE_DEFAULT) t = ts_default_device().type;
    if (t != TS_CPU && t != TS_CUDA && t != TS_SIM) {
        tsi_error_set(TS_ERR_ARG, "%s: unknown device type %d", op, (int)t);
        return -1;
    }
    return (int)t;
}

void ts_autocast_begin_ex(ts_device_type device_type, ts_autocast_opts o) {
    tsi_init();
    if (depth >= TSI_AC_STACK_MAX) {
        tsi_error_set(TS_ERR_STATE, "autocast_begin: more than %d nested autocast regions",
                      TSI_AC_STACK_MAX);
        return;
    }
    /* the region opens even when its arguments are wrong, so begin/end stay paired */
    stack[depth++] = cur;
    int t = resolve_type("autocast_begin", device_type);
    if (t < 0) return;
    ts_dtype dt = o.dtype == TS_DTYPE_DEFAULT ? default_dtype((ts_device_type)t) : o.dtype;
    if (dt != TS_F16 && dt != TS_BF16) {
        tsi_error_set(TS_ERR_DTYPE,
                      "autocast_begin: in autocast, the supported dtypes are float16 and "
                      "bfloat16, but got %s",
                      ts_dtype_name(dt));
        return;
    }
    cur.enabled[t] = !o.disabled;
    cur.cache_enabled[t] = !o.no_cache;
    cur.dtype[t] = dt;
    recount();
}

void ts_autocast_begin(ts_device_type device_type, ts_dtype dtype) {
    ts_autocast_begin_ex(device_type, (ts_autocast_opts){.dtype = dtype});
}

void ts_autocast_end(void) {
    if (depth == 0) {
        tsi_error_set(TS_ERR_STATE, "autocast_end: no autocast region is open");
        return;
    }
    cur = stack[--depth];
    recount();
    if (depth == 0) tsi_autocast_cache_release();
}

bool ts_autocast_is_enabled(ts_device_type device_type) {
    if (device_type == TS_DEVICE_DEFAULT) device_type = ts_default_device().type;
    return (unsigned)device_type < TSI_AC_TYPES && cur.enabled[device_type];
}

ts_dtype ts_autocast_get_dtype(ts_device_type device_type) {
    if (device_type == TS_DEVICE_DEFAULT) device_type = ts_default_device().type;
    if ((unsigned)device_type < TSI_AC_TYPES && cur.dtype[device_type] != TS_DTYPE_DEFAULT)
        return cur.dtype[device_type];
    return default_dtype(device_type);
}

tsi_autocast_state tsi_autocast_state_get(void) { return cur; }

void tsi_autocast_state_set(const tsi_autocast_state *s) {
    cur = *s;
    recount();
}

bool tsi_autocast_active(ts_device d, ts_dtype *lower) {
    if (!tsi_autocast_any || (unsigned)d.type >= TSI_AC_TYPES || !cur.enabled[d.type]) return false;
    if (lower) *lower = cur.dtype[d.type];
    return true;
}

bool tsi_autocast_cache_enabled(ts_device d) {
    return (unsigned)d.type < TSI_AC_TYPES && cur.cache_enabled[d.type];
}
