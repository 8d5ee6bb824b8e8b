/* tol_check.h — comparing a tensor with reference values under per-element tolerances (the
 * kernel tests whose tolerances come from the arithmetic: test_layer_norm, test_batch_norm). */
#ifndef TS_TOL_CHECK_H
#define TS_TOL_CHECK_H

#include <stdbool.h>
#include <stdint.h>

#include "tessera.h"

/* The unit roundoff of a dtype (half the gap from 1 to the next value): bf16 keeps 8 significant
 * bits, f16 11, f32 24, f64 53; 0 for integer dtypes, whose arithmetic is exact. */
double ts_test_unit_roundoff(ts_dtype dt);

/* t's n elements as doubles on the host (malloc'd; NaN everywhere when t is NULL, has another
 * number of elements or cannot be copied). Any device, dtype and layout. */
double *ts_test_host_f64(ts_tensor *t, int64_t n);

/* Records one check: every element of got within tol[i] of want[i] (ts_test_near). A failure
 * names the label, what, the worst element and its tolerance. With TS_TOL_DEBUG set in the
 * environment, prints how close each comparison came to its tolerance (the bounds' tightness). */
void ts_test_check_tol(const char *file, int line, const char *label, const char *what,
                       ts_tensor *got, const double *want, const double *tol, int64_t n);
#define CHECK_TOL(label, what, got, want, tol, n)                                                  \
    ts_test_check_tol(__FILE__, __LINE__, label, what, got, want, tol, n)

/* The half-precision path of the fused norms (float16 / bfloat16 through the float32 kernels):
 * whether dt is one of the halves; v rounded to dt (float first: exact for halves); the float32
 * tolerances tol[0..n) widened by one rounding to dt of a value within them of ref, relative
 * (unit roundoff) or, below the normal halves, absolute (half the smallest subnormal: 2^-25 for
 * float16, 2^-134 for bfloat16; nothing for other dtypes); and the name of the node that made
 * y's producer's first input (under the cast back, ToCopyBackward0, the node of the op that ran
 * in float32). */
bool ts_test_is_half(ts_dtype dt);
double ts_test_round_to(ts_dtype dt, double v);
void ts_test_widen_for_half(ts_dtype dt, const double *ref, double *tol, int64_t n);
const char *ts_test_inner_fn_name(ts_tensor *y);

#endif /* TS_TOL_CHECK_H */
