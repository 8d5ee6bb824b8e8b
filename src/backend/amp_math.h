/* amp_math.h — PyTorch's _amp_update_scale_ rule on one scale, shared by the CPU kernel
 * (cpu/kern_amp.c) and the CUDA one (cuda/cuda_amp.cu) so the two cannot drift apart. */
#ifndef TS_AMP_MATH_H
#define TS_AMP_MATH_H

#include <stdint.h>

#include "backend/kernel_math.h"

/* found_inf != 0 (NaN too, as ATen's `if (*found_inf)`): scale *= backoff, tracker = 0. Otherwise
 * the step counts as successful; at growth_interval of them scale *= growth, kept only while the
 * result stays finite in f32 (ATen rounds to float and keeps it when finite, i.e. when the double
 * is below FLT_MAX + half an ulp, which rounds to Inf), and the tracker restarts. */
static inline TS_HD void ts_amp_update_scale_one(float *scale, int32_t *tracker, float found_inf,
                                                 double growth, double backoff, int interval) {
    if (found_inf != 0.0f) {
        *scale = (float)((double)*scale * backoff);
        *tracker = 0;
        return;
    }
    const int64_t successful = (int64_t)*tracker + 1;
    if (successful == interval) {
        const double grown = (double)*scale * growth;
        if (grown < 0x1.ffffffp+127) *scale = (float)grown;
        *tracker = 0;
    } else {
        *tracker = (int32_t)successful;
    }
}

#endif /* TS_AMP_MATH_H */
