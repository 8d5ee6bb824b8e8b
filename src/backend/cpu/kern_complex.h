/* kern_complex.h — the CPU binary slot with complex64 / complex128 (kern_complex.c). */
#ifndef TS_KERN_COMPLEX_H
#define TS_KERN_COMPLEX_H

#include <stdbool.h>

#include "backend/backend.h"

/* The cpu backend's binary slot: complex operands (add, sub, mul, div) here, the rest to
 * tsi_cpu_binary. */
void tsi_cpu_binary_cx(const ts_backend *be, int index, ts_binary_op op, const ts_kview *out,
                       const ts_kview *a, const ts_kview *b);
/* the ops the complex kernels have */
bool tsi_cpu_complex_binary_ok(ts_binary_op op);

#endif /* TS_KERN_COMPLEX_H */
