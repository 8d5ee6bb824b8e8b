/* kern_nms.c — CPU non-maximum suppression (torchvision.ops.nms / batched_nms, issue 75): the
 * greedy pass of torchvision's cpu kernel over boxes already sorted by score, each kept box
 * suppressing the later ones that overlap it (roi_math.h's IoU); with classes, only boxes of its
 * own class. Serial: each step depends on the ones before it. */
#include <stdint.h>
#include <stdlib.h>

#include "backend/cpu/cpu_kernels.h"
#include "backend/roi_math.h"

#define NMS_PASS(T, S)                                                                             \
    static void nms_##S(bool *keep, const T *b, const int64_t *cls, int64_t n, double thr) {       \
        for (int64_t i = 0; i < n; i++) keep[i] = true;                                            \
        for (int64_t i = 0; i < n; i++) {                                                          \
            if (!keep[i]) continue;                                                                \
            for (int64_t j = i + 1; j < n; j++) {                                                  \
                if (!keep[j] || (cls && cls[j] != cls[i])) continue;                               \
                if (ts_nms_overlaps_##S(b + i * 4, b + j * 4, thr)) keep[j] = false;               \
            }                                                                                      \
        }                                                                                          \
    }

NMS_PASS(float, f)
NMS_PASS(double, d)

bool tsi_cpu_nms(const ts_backend *be, int index, const ts_kview *keep, const ts_kview *boxes,
                 const ts_kview *cls, double iou_threshold) {
    (void)be, (void)index;
    const int64_t n = boxes->shape[0];
    const int64_t *c = (const int64_t *)cls->data;
    if (boxes->dtype == TS_F32)
        nms_f((bool *)keep->data, (const float *)boxes->data, c, n, iou_threshold);
    else
        nms_d((bool *)keep->data, (const double *)boxes->data, c, n, iou_threshold);
    return true;
}
