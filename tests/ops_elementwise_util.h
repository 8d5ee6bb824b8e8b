/* ops_elementwise_util.h — helpers shared by the elementwise op tests: tensors from doubles, values
 * back as doubles, dtype tolerances, and the devices every case runs on. */
#ifndef TS_OPS_ELEMENTWISE_UTIL_H
#define TS_OPS_ELEMENTWISE_UTIL_H

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "tessera.h"
#include "ts_test.h"

#define N6 6
static ts_device devs[2];
static int ndev;

/* ------------------------------------------------------------------ helpers */
static inline ts_tensor *mk(ts_shape s, ts_dtype dt, const double *v, ts_device dev) {
    return ts_to(ts_to_dtype(ts_tensor_f64(s, v, (ts_opts){.device = ts_cpu()}), dt), dev);
}
static inline ts_tensor *mk1(int64_t n, ts_dtype dt, const double *v, ts_device dev) {
    return mk(TS_SHAPE(n), dt, v, dev);
}
/* t's elements in row-major order as doubles; the count, or -1 */
static inline int64_t rd(ts_tensor *t, double *out, int64_t cap) {
    ts_tensor *h = ts_to_dtype(ts_to(t, ts_cpu()), TS_F64);
    int64_t n = ts_numel(h);
    if (!h || n > cap || ts_copy_to_host(h, out, (size_t)n * sizeof(double)) != TS_OK) return -1;
    return n;
}
static inline double tol_for(ts_dtype dt, double ref) {
    switch (dt) {
    case TS_F32:
        return 1e-5 + 1.3e-6 * fabs(ref);
    case TS_F64:
        return 1e-12 + 1e-12 * fabs(ref);
    case TS_F16:
        return 1e-5 + 1e-3 * fabs(ref);
    case TS_BF16:
        return 1e-5 + 1.6e-2 * fabs(ref);
    default:
        return 0;
    }
}
/* a double reference as the result dtype holds it (overflow to infinity) */
static inline double round_to(ts_dtype dt, double v) {
    if (dt == TS_F32 || dt == TS_BF16) return (double)(float)v;
    if (dt == TS_F16 && fabs(v) >= 65520) return v > 0 ? INFINITY : -INFINITY;
    return v;
}
/* PyTorch-style storage of an exact integer result */
static inline double wrap(ts_dtype dt, int64_t v) {
    switch (dt) {
    case TS_I32:
        return (double)(int32_t)v;
    case TS_U8:
        return (double)(uint8_t)v;
    case TS_BOOL:
        return v != 0;
    default:
        return (double)v;
    }
}
static inline int64_t ipow(int64_t b, int64_t e) {
    if (e < 0) return b == 1 ? 1 : b == -1 ? ((e & 1) ? -1 : 1) : 0;
    int64_t r = 1;
    while (e-- > 0) r *= b;
    return r;
}
/* the result has dtype dt and values ref (NAN in ref means "don't care" when skip[i]) */
static inline bool check_vals(const char *what, ts_tensor *t, ts_dtype dt, const double *ref,
                              int64_t n, int line) {
    double got[64];
    bool ok = t && ts_dtype_of(t) == dt && rd(t, got, 64) == n;
    for (int64_t i = 0; ok && i < n; i++)
        ok = ts_test_near(got[i], round_to(dt, ref[i]), tol_for(dt, ref[i]));
    ts_test_record(ok);
    if (!ok) {
        ts_test_failf(__FILE__, line, "%s: dtype %s (want %s)%s", what,
                      t ? ts_dtype_name(ts_dtype_of(t)) : "NULL", ts_dtype_name(dt),
                      ts_test_error_str());
        for (int64_t i = 0; t && i < n && i < 64; i++)
            fprintf(stderr, "   [%lld] got %.9g want %.9g\n", (long long)i, got[i], ref[i]);
        ts_error_clear();
    }
    return ok;
}
#define CHECK_VALS(what, t, dt, ref, n) check_vals(what, t, dt, ref, n, __LINE__)
/* error code and exact message */
#define CHECK_ERR_MSG(code, msg)                                                                   \
    do {                                                                                           \
        CHECK_STREQ(ts_error_message(), msg);                                                      \
        CHECK_ERR(code);                                                                           \
    } while (0)

static inline ts_dtype dt_of_char(char c) {
    switch (c) {
    case 'f':
        return TS_F32;
    case 'd':
        return TS_F64;
    case 'h':
        return TS_F16;
    case 'b':
        return TS_BF16;
    case 'l':
        return TS_I64;
    case 'i':
        return TS_I32;
    case 'u':
        return TS_U8;
    case '?':
        return TS_BOOL;
    default:
        return TS_DTYPE_DEFAULT; /* 'E': an error */
    }
}
/* sample inputs by dtype (positive ones for log-like functions) */
static inline const double *sample(ts_dtype dt, bool positive) {
    static const double f[N6] = {-2.5, -1, -0.25, 0, 1.5, 3}, fp[N6] = {0.25, 0.5, 1, 2, 3.5, 7};
    static const double i[N6] = {-3, -1, 0, 1, 2, 5}, ip[N6] = {1, 2, 3, 5, 7, 9};
    static const double u[N6] = {0, 1, 2, 5, 7, 200}, b[N6] = {1, 0, 1, 1, 0, 0};
    if (dt == TS_BOOL) return b;
    if (dt == TS_U8) return positive ? ip : u;
    if (dt == TS_I64 || dt == TS_I32) return positive ? ip : i;
    return positive ? fp : f;
}

/* cpu and sim:0 (ctest sets TS_SIM_DEVICES); false when no sim device can be had */
static inline bool ew_setup_devices(void) {
    if (ts_device_count(TS_SIM) < 1 && ts_sim_configure(2, 0) != TS_OK) return false;
    devs[ndev++] = ts_cpu();
    devs[ndev++] = ts_sim(0);
    return true;
}

/* live tensors per device, to check at the end that every temporary was released */
static inline void ew_live_tensors(int64_t *out) {
    for (int i = 0; i < ndev; i++) {
        ts_mem_stats st;
        ts_memory_stats(devs[i], &st);
        out[i] = st.live_tensors;
    }
}

static inline int ew_finish(const int64_t *before) {
    int64_t after[2];
    ew_live_tensors(after);
    for (int i = 0; i < ndev; i++) CHECK_EQ(after[i], before[i]);
    CHECK_OK();
    return ts_test_finish();
}

#endif /* TS_OPS_ELEMENTWISE_UTIL_H */
