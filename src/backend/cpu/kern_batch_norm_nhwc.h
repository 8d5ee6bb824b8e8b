/* kern_batch_norm_nhwc.h — the channels_last batch norm kernels (kern_batch_norm_nhwc.c), which
 * kern_batch_norm.c runs for ts_batch_norm_args with channels_last set: the variant of vector ISA
 * isa (0 portable, 1 AVX2, 2 AVX-512; available on this CPU), f32, f64, f16 or bf16. */
#ifndef TS_KERN_BATCH_NORM_NHWC_H
#define TS_KERN_BATCH_NORM_NHWC_H

#include "backend/backend.h"

void tsi_cpu_batch_norm_nhwc_forward(int isa, const ts_batch_norm_args *a);
void tsi_cpu_batch_norm_nhwc_backward(int isa, const ts_batch_norm_args *a);

#endif /* TS_KERN_BATCH_NORM_NHWC_H */
