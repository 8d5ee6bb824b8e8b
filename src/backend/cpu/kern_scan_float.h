/* kern_scan_float.h — the float32 / float64 cumulative sums and products of the CPU's scan slot
 * laid out for speed (kern_scan_float.c); kern_scan.c takes every other case. */
#ifndef TS_KERN_SCAN_FLOAT_H
#define TS_KERN_SCAN_FLOAT_H

#include <stdbool.h>

#include "backend/backend.h"

/* out = cumsum / cumprod of in along dim when op is TS_SCAN_SUM or TS_SCAN_PROD, in and out are
 * both float32 or both float64 and the lines are laid out for one of the two fast paths (unit
 * stride along dim, or another dim of unit stride in both views); false (nothing written)
 * otherwise. The arithmetic is the general path's: a double accumulator per line, in order. */
bool tsi_cpu_scan_float(ts_scan_op op, const ts_kview *out, const ts_kview *in, int dim);

#endif /* TS_KERN_SCAN_FLOAT_H */
