/* kern_complex.h — the CPU binary and unary slots with complex64 / complex128 (kern_complex.c). */
#ifndef TS_KERN_COMPLEX_H
#define TS_KERN_COMPLEX_H

#include <stdbool.h>

#include "backend/backend.h"

/* The cpu backend's binary slot: complex operands (add, sub, mul, div) here, the rest to
 * tsi_cpu_binary. */
void tsi_cpu_binary_cx(const ts_backend *be, int index, ts_binary_op op, const ts_kview *out,
                       const ts_kview *a, const ts_kview *b);
/* The cpu backend's unary slot: abs of a complex input (out its real part's dtype) here, the rest
 * to tsi_cpu_unary. */
void tsi_cpu_unary_cx(const ts_backend *be, int index, ts_unary_op op, const ts_kview *out,
                      const ts_kview *a, double p0, double p1);
/* the ops the complex kernels have */
bool tsi_cpu_complex_binary_ok(ts_binary_op op);

#endif /* TS_KERN_COMPLEX_H */
