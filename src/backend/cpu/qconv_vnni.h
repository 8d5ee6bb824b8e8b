/* qconv_vnni.h — the AVX512-VNNI quantized 2-D convolution of kern_qconv.c, in NCHW without
 * transposes: output channels by output positions, vpdpbusd on u8 activations x s8 weights. */
#ifndef TS_QCONV_VNNI_H
#define TS_QCONV_VNNI_H

#include <stdbool.h>

#include "backend/quant_args.h"

/* Whether tsi_qconv_vnni can run a: the host and TS_CPU_ISA allow AVX512-VNNI (qgemm_vnni.h) and
 * a depthwise kernel's taps stay under 32768 (int32 sums of the differences) */
bool tsi_qconv_vnni_fits(const ts_qconv_args *a);
/* the convolution a (quant_args.h); false: out of host memory, the error set */
bool tsi_qconv_vnni(const ts_qconv_args *a);

#endif /* TS_QCONV_VNNI_H */
