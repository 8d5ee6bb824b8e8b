/* conv_dw_weight.h — the float32 weight gradient of depthwise convolutions (one input channel and
 * one output a group, NCHW) where the direct kernels do not take it (1x1, strided, narrow rows):
 * sums over N x OH x OW products per weight whose float32 error does not grow with the batch or
 * the image (issue 75: oneDNN's primitive, the path before, sums them in one float). */
#ifndef TS_CONV_DW_WEIGHT_H
#define TS_CONV_DW_WEIGHT_H

#include <stdbool.h>

#include "backend/cpu/kern_conv.h"

/* Whether g is a depthwise convolution the kernel takes: cg == og == 1, NCHW. */
bool tsi_conv_dw_weight_takes(const ts_cgeom *g);

/* gw [C, 1, KH, KW] = sum over images and output pixels of gy * x at each tap (overwritten). Each
 * sum is a dot product in segments of 64 products, 8 float lanes each and a fixed tree, the
 * segments added in float64: |gw - exact| <= gamma(12) * sum|products| + eps32 / 2 * |exact|
 * (plus float64's part), the same bits for any thread count (one thread a channel). False when g
 * is not depthwise or scratch memory ran out (gw then partly written). */
bool tsi_conv_dw_weight(const ts_cgeom *g, const float *gy, const float *x, float *gw);

#endif /* TS_CONV_DW_WEIGHT_H */
