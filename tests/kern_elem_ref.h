/* kern_elem_ref.h — shared by the elementwise kernel tests: the element access and views of
 * kern_access.h, every dtype, and grouped value checks. */
#ifndef TS_TEST_KERN_ELEM_REF_H
#define TS_TEST_KERN_ELEM_REF_H

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "kern_access.h"
#include "ts_test.h"

#define NDT 8
static const ts_dtype ALL[NDT] = {TS_F32, TS_F64, TS_F16, TS_BF16, TS_I64, TS_I32, TS_U8, TS_BOOL};

/* out within atol + rtol*|want|; NaN matches NaN, infinities themselves */
static inline bool close_to(double got, double want, ts_dtype dt) {
    double rtol = dt == TS_F64 ? 1e-12 : dt == TS_F32 ? 1e-5 : dt == TS_F16 ? 2e-3 : 1.6e-2;
    double atol = dt == TS_F64 ? 1e-14 : 1e-5;
    if (!isflt(dt)) return got == want;
    if (isnan(want) || isnan(got)) return isnan(want) && isnan(got);
    if (isinf(want) || isinf(got)) return got == want;
    return fabs(got - want) <= atol + rtol * fabs(want);
}

/* One CHECK per group of elements; the first few mismatches are printed. */
static int g_bad;
static inline void expect_val(double got, double want, ts_dtype dt, const char *what, int i) {
    if (close_to(got, want, dt)) return;
    if (g_bad++ < 8)
        ts_test_failf(__FILE__, __LINE__, "%s [%s] element %d: got %.9g want %.9g", what,
                      ts_dtype_name(dt), i, got, want);
}
static inline void group_done(void) {
    ts_test_record(g_bad == 0);
    g_bad = 0;
}

#endif /* TS_TEST_KERN_ELEM_REF_H */
