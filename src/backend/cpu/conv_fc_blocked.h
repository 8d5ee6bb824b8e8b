/* conv_fc_blocked.h — the CPU backend's convolutions of 1x1 images on channel-blocked activations
 * (x [N, ceil(C/B), 1, 1, B], y [N, ceil(O/B), 1, 1, B] float32, B 16 with AVX-512 and 8 with
 * AVX2): a squeeze-excitation's fully connected layers, which conv_dnnl_blocked.c gives this
 * kernel in place of oneDNN's (docs/ONNX_REWRITES.md, "Kernels of their own in the blocked
 * layout"). */
#ifndef TS_CONV_FC_BLOCKED_H
#define TS_CONV_FC_BLOCKED_H

#include <stdbool.h>

#include "backend/cpu/kern_conv.h"

/* Whether the kernel takes g with blocks of blk: a 1x1 image, a 1x1 kernel, no pads, one group,
 * blk 16 or 8 (and an x86 build). */
bool tsi_conv_fc_blocked_takes(const ts_cgeom *g, int blk);

/* y = act(w x + b) per image: w [O, C], b [O] or NULL; the lanes of y past O are 0. False where
 * the kernel does not take g (nothing written). */
bool tsi_conv_fc_blocked(const ts_cgeom *g, int blk, float *y, const float *x, const float *w,
                         const float *b);

#endif /* TS_CONV_FC_BLOCKED_H */
