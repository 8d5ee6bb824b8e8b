/* cdist_math.h — cdist's p-norm distance, defined once for the CPU and CUDA kernels (host and
 * device): the kind of p, one difference folded into the running value, and the value finished.
 * The CPU's vector tiles (kern_cdist_impl.h) do the same folds four lanes at a time. */
#ifndef TS_BACKEND_CDIST_MATH_H
#define TS_BACKEND_CDIST_MATH_H

#include "backend/kernel_math.h"

typedef enum { TS_CD_P0, TS_CD_P1, TS_CD_P2, TS_CD_PINF, TS_CD_PGEN } ts_cdist_kind;

static inline TS_HD ts_cdist_kind ts_cdist_kind_of(double p) {
    return p == 0     ? TS_CD_P0
           : p == 1   ? TS_CD_P1
           : p == 2   ? TS_CD_P2
           : isinf(p) ? TS_CD_PINF
                      : TS_CD_PGEN;
}

/* acc after the difference d: p = 0 counts the nonzero ones, inf keeps the largest |d| (a NaN
 * taking over and staying), the others add |d|^p */
static inline TS_HD double ts_cdist_fold(ts_cdist_kind kind, double acc, double d, double p) {
    const double a = fabs(d);
    switch (kind) {
    case TS_CD_P0:
        return acc + (d != 0 ? 1.0 : 0.0);
    case TS_CD_P1:
        return acc + a;
    case TS_CD_P2:
        return acc + d * d;
    case TS_CD_PINF:
        return a > acc || a != a ? a : acc;
    default:
        return acc + pow(a, p);
    }
}

/* the distance from the folded value: the p-th root where p is not 0, 1 or inf */
static inline TS_HD double ts_cdist_finish(ts_cdist_kind kind, double acc, double p) {
    return kind == TS_CD_P2 ? sqrt(acc) : kind == TS_CD_PGEN ? pow(acc, 1.0 / p) : acc;
}

#endif /* TS_BACKEND_CDIST_MATH_H */
