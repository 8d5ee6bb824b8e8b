/* conv_dw_blocked.h — the CPU backend's own depthwise convolutions on channel-blocked activations
 * (x and y [N, ceil(C/B), H, W, B] float32, B 16 with AVX-512 and 8 with AVX2), which
 * conv_dnnl_blocked.c gives the depthwise convolutions of the blocked layout in place of oneDNN's
 * (docs/ONNX_REWRITES.md, "Kernels of their own in the blocked layout"). */
#ifndef TS_CONV_DW_BLOCKED_H
#define TS_CONV_DW_BLOCKED_H

#include <stdbool.h>

#include "backend/cpu/kern_conv.h"

/* Whether the kernel takes g with blocks of blk: one channel a group and one output each, a
 * square kernel of 3, 5 or 7, the same stride 1 or 2 both ways, no dilation, pads below the
 * kernel, blk 16 or 8 (and an x86 build). */
bool tsi_conv_dw_blocked_takes(const ts_cgeom *g, int blk);

/* y = act(depthwise(x, w) + b): w [C, 1, K, K], b [C] or NULL; the lanes of y past C are 0.
 * False where the kernel does not take g (nothing written) or scratch memory ran out. */
bool tsi_conv_dw_blocked(const ts_cgeom *g, int blk, float *y, const float *x, const float *w,
                         const float *b);

#endif /* TS_CONV_DW_BLOCKED_H */
