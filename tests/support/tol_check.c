/* tol_check.c — per-element tolerance checks (tol_check.h). */
#include "tol_check.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "autograd/autograd.h"   /* ts_node: which node the half path's cast back hangs off */
#include "backend/kernel_math.h" /* the half conversions */
#include "ts_test.h"

double ts_test_unit_roundoff(ts_dtype dt) {
    switch (dt) {
    case TS_F64:
        return 0x1p-53;
    case TS_F32:
        return 0x1p-24;
    case TS_F16:
        return 0x1p-11;
    case TS_BF16:
        return 0x1p-8;
    default:
        return 0;
    }
}

double *ts_test_host_f64(ts_tensor *t, int64_t n) {
    double *h = calloc((size_t)(n ? n : 1), sizeof(double));
    ts_scope_begin();
    ts_tensor *c = t ? ts_contiguous(ts_to_dtype(ts_to(t, ts_cpu()), TS_F64)) : NULL;
    if (!c || ts_numel(c) != n || ts_copy_to_host(c, h, sizeof(double) * (size_t)n) != TS_OK)
        for (int64_t i = 0; i < n; i++) h[i] = NAN;
    ts_scope_end();
    return h;
}

void ts_test_check_tol(const char *file, int line, const char *label, const char *what,
                       ts_tensor *got, const double *want, const double *tol, int64_t n) {
    double *g = ts_test_host_f64(got, n), worst = 0;
    int64_t at = -1;
    bool ok = true;
    for (int64_t i = 0; i < n; i++) {
        const double e = fabs(g[i] - want[i]);
        const bool good = ts_test_near(g[i], want[i], tol[i]);
        const double ratio = tol[i] > 0 ? e / tol[i] : (e > 0 ? INFINITY : 0);
        if (!good || ratio > worst) worst = good ? ratio : INFINITY, at = i;
        ok = ok && good;
    }
    if (getenv("TS_TOL_DEBUG")) printf("%s %s worst %.3g\n", label, what, worst);
    ts_test_record(ok);
    if (!ok)
        ts_test_failf(file, line, "%s %s: element %lld is %.17g, want %.17g (tolerance %.3g)%s",
                      label, what, (long long)at, g[at], want[at], tol[at], ts_test_error_str());
    free(g);
}

bool ts_test_is_half(ts_dtype dt) { return dt == TS_F16 || dt == TS_BF16; }

double ts_test_round_to(ts_dtype dt, double v) {
    switch (dt) {
    case TS_F32:
        return (double)(float)v;
    case TS_F16:
        return (double)ts_f16_to_f32(ts_f32_to_f16((float)v));
    case TS_BF16:
        return (double)ts_bf16_to_f32(ts_f32_to_bf16((float)v));
    default:
        return v;
    }
}

void ts_test_widen_for_half(ts_dtype dt, const double *ref, double *tol, int64_t n) {
    if (!ts_test_is_half(dt)) return;
    const double u = ts_test_unit_roundoff(dt), tiny = dt == TS_F16 ? 0x1p-25 : 0x1p-134;
    for (int64_t i = 0; i < n; i++) tol[i] += u * (fabs(ref[i]) + tol[i]) + tiny;
}

const char *ts_test_inner_fn_name(ts_tensor *y) {
    const ts_node *n = y ? y->grad_fn : NULL;
    return n && n->n_in > 0 && n->next[0].fn ? n->next[0].fn->name : NULL;
}
