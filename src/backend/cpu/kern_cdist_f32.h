/* kern_cdist_f32.h — cdist's float32 p = 2 kernel on AVX2 (kern_cdist_f32.c), which the CPU cdist
 * (kern_cdist.c) tries first. */
#ifndef TS_KERN_CDIST_F32_H
#define TS_KERN_CDIST_F32_H

#include <stdbool.h>

#include "backend/backend.h"

/* The distances of x1 [B, P, M] and x2 [B, R, M] (float32, any strides) into out [B, P, R]
 * (float32, contiguous; B, P, R, M > 0): true when done (or the OOM error is set), false when the
 * dtypes or the CPU's ISA are not this kernel's (the caller computes them). */
bool tsi_cpu_cdist_f32_p2(const ts_kview *out, const ts_kview *x1, const ts_kview *x2);

#endif /* TS_KERN_CDIST_F32_H */
