/* conv_blocked.h — inference convolutions on channel-blocked activations (the ONNX rewrite of
 * onnx/rewrite_blocked.c): a blocked value is a float32 tensor [N, ceil(C/B), H, W, B] holding
 * channel c of an [N, C, H, W] one at [n][c / B][h][w][c % B]; the B * ceil(C/B) - C padding
 * channels are finite (zero from tsi_to_blocked and after a convolution, any finite value after
 * elementwise ops: what reads them is a convolution whose weight is zero there, or
 * tsi_from_blocked, which drops them). Not public. */
#ifndef TS_NN_CONV_BLOCKED_H
#define TS_NN_CONV_BLOCKED_H

#include "nn/conv_fused.h"

/* The block B of the blocked convolutions on dev's backend now (backend.h's conv2d_block: 16 with
 * AVX-512, 8 with AVX2 on the CPU with oneDNN), 0 where there are none (other devices, no
 * oneDNN, TS_CONV=builtin). */
int tsi_conv_block(ts_device dev);

/* x [N, C, H, W] in blocks of blk ([N, ceil(C/blk), H, W, blk], zero padding channels), and back
 * (xb [N, Cb, H, W, B] to its first c channels, c in ((Cb - 1) B, Cb B]); tensor ops, so any
 * device and dtype, with autograd. NULL with the error (op "to_blocked" / "from_blocked" naming
 * the operand) on a wrong rank or block. */
ts_tensor *tsi_to_blocked(ts_tensor *x, int blk);
ts_tensor *tsi_from_blocked(ts_tensor *xb, int64_t c);

/* tsi_conv2d_act(x, w, b, o, act, lo, hi) with x plain (x_blk 0) or blocked in x_blk, of c
 * channels, and the result blocked in y_blk (0: plain). The backend's blocked kernel when it
 * takes the call (float32, no graph recorded, no trace, no autocast, contiguous operands, a
 * convolution oneDNN would run), else tsi_conv2d_act on the plain form of x with the result
 * blocked after: the plain path's values either way (oneDNN's primitive is the same one, only
 * the reorders around it go). *blocked_ran (may be NULL) says which ran. NULL with the error. */
ts_tensor *tsi_conv2d_act_blocked(ts_tensor *x, int x_blk, int64_t c, ts_tensor *w, ts_tensor *b,
                                  ts_conv2d_opts o, tsi_conv_act act, double lo, double hi,
                                  int y_blk, bool *blocked_ran);

/* Global average pooling of a blocked xb [N, Cb, H, W, B]: [N, Cb, 1, 1, B], each channel's mean
 * (the padding channels' too). The backend's blocked kernel (the bits of the plain layout's
 * float32 global average pooling) for float32 on a device that has one and no graph to record,
 * else ts_mean_dims over dims 2 and 3. NULL with the error. */
ts_tensor *tsi_global_avg_pool_blocked(ts_tensor *xb);

/* a * b where one is a blocked [N, Cb, H, W, B] and the other its per-channel scale [N, Cb, 1, 1,
 * B] (the squeeze-excitation's Mul): the backend's kernel for float32 contiguous operands on a
 * device that has one and no graph to record or trace, the same products as ts_mul; NULL without
 * an error otherwise (the caller runs its own Mul). */
ts_tensor *tsi_mul_channels_blocked(ts_tensor *a, ts_tensor *b);

#endif /* TS_NN_CONV_BLOCKED_H */
