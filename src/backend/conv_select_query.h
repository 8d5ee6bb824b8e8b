/* conv_select_query.h — what a layer above the backends may ask the CPU convolution selector
 * (backend/cpu/conv_select.c, tsi_conv_select over its one table of thresholds) before any image
 * is known: the ONNX blocked-layout rewrite (onnx/rewrite_blocked.c) decides at load which
 * convolutions keep their activations blocked, those oneDNN runs, and leaves on plain NCHW those
 * the built-in direct kernels take. Declared here (the backend layer, below onnx) so that the
 * thresholds live in conv_select.c's table alone. */
#ifndef TS_CONV_SELECT_QUERY_H
#define TS_CONV_SELECT_QUERY_H

#include <stdbool.h>
#include <stdint.h>

#include "backend/backend.h"

/* Whether the CPU's float32 forward of a convolution of c input channels by a weight
 * [o, c / p->groups, khw[0], khw[1]] with p's strides, pads, dilations and groups runs oneDNN's
 * kernel by default (TS_CONV unset) on plain NCHW activations, at output rows as narrow as the
 * direct kernels take (conv_select.c's direct_min_row) or wider: false where the built-in kernels
 * take it. */
bool tsi_conv_f32_forward_dnnl(int64_t c, int64_t o, const int64_t khw[2],
                               const ts_conv2d_params *p);

#endif /* TS_CONV_SELECT_QUERY_H */
