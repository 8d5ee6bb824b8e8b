/* scan_math.h — the cumulative ops' steps (backend.h's scan), defined once for the CPU and CUDA
 * kernels (host and device): the running value's start, one element folded into it, and whether
 * an element takes over as cummax / cummin's running extreme. */
#ifndef TS_BACKEND_SCAN_MATH_H
#define TS_BACKEND_SCAN_MATH_H

#include <stdbool.h>
#include <stdint.h>

#include "backend/backend.h"
#include "backend/kernel_math.h"

/* the running float value before the first element: sum 0, product 1, log-sum-exp -inf */
static inline TS_HD double ts_scan_start_d(ts_scan_op op) {
    return op == TS_SCAN_PROD ? 1.0 : op == TS_SCAN_LOGSUMEXP ? -INFINITY : 0.0;
}

/* PyTorch's _log_add_exp_helper(x, acc): NaN propagates, equal infinities stay */
static inline TS_HD double ts_scan_log_add_exp(double x, double acc) {
    double lo = isnan(acc) ? acc : (x < acc ? x : acc);
    double hi = isnan(acc) ? acc : (x < acc ? acc : x);
    if (isnan(x)) lo = hi = x;
    if (lo != hi || isfinite(lo)) return log1p(exp(lo - hi)) + hi;
    return x;
}

/* acc after the float element x: sum, product or log-sum-exp */
static inline TS_HD double ts_scan_fold_d(ts_scan_op op, double acc, double x) {
    return op == TS_SCAN_SUM ? acc + x : op == TS_SCAN_PROD ? acc * x : ts_scan_log_add_exp(x, acc);
}

/* x replaces the running extreme cur of cummax / cummin: a NaN always does, nothing replaces a
 * NaN, ties do (>= / <=: PyTorch's last index of equal values) */
static inline TS_HD bool ts_scan_takes_over_d(ts_scan_op op, double x, double cur) {
    if (isnan(x)) return true;
    if (isnan(cur)) return false;
    return op == TS_SCAN_MAX ? x >= cur : x <= cur;
}

static inline TS_HD bool ts_scan_takes_over_i(ts_scan_op op, int64_t x, int64_t cur) {
    return op == TS_SCAN_MAX ? x >= cur : x <= cur;
}

#endif /* TS_BACKEND_SCAN_MATH_H */
