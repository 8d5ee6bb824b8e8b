/* bn_fold.h — batch-norm in inference form folded into the convolution before it: the one
 * definition of the arithmetic, used by the nn modules' eval path (conv_bn.c) and the ONNX
 * importer's rewrite (src/onnx/rewrite_conv.c). Not public. */
#ifndef TS_NN_BN_FOLD_H
#define TS_NN_BN_FOLD_H

#include "tessera.h"

/* The tensors a fold reads: the convolution's weight [O, ...] and bias [O] (NULL: none), the
 * batch-norm's scale (gamma), shift (beta) (each NULL: 1 and 0, a batch-norm without affine
 * parameters), running mean and variance, each [O], and its eps. dtype: the dtype W' and b' are
 * rounded to (TS_DTYPE_DEFAULT: W's; conv_bn.c's autocast fold asks for the region's bf16). */
typedef struct tsi_bn_fold_src {
    ts_tensor *w, *b;
    ts_tensor *scale, *shift, *mean, *var;
    double eps;
    ts_dtype dtype;
} tsi_bn_fold_src;

typedef enum tsi_bn_fold_result {
    TSI_BN_FOLD_DONE = 0,
    TSI_BN_FOLD_NOT_FINITE, /* some s or b' is not finite (a variance of -eps): nothing made */
    TSI_BN_FOLD_FAILED,     /* an error is set (out of memory, a device's failure) */
} tsi_bn_fold_result;

/* Per output channel o, in float64 on the host: s = scale[o] / sqrt(var[o] + eps),
 * W'[o] = W[o] * s, b'[o] = (b[o] - mean[o]) * s + shift[o] (b = 0 without a bias). *w_out gets
 * W' in src->dtype (default: W's), W's shape and device, *b_out b' [O] in the same dtype on W's
 * device, each rounded from float64 (f16 and bf16 through float32, as PyTorch's casts);
 * the caller owns both (one reference each, in no scope). */
tsi_bn_fold_result tsi_bn_fold(const tsi_bn_fold_src *src, ts_tensor **w_out, ts_tensor **b_out);

/* Folds computed so far, by any caller (tests check that a kept fold is reused). */
uint64_t tsi_bn_fold_count(void);

#endif /* TS_NN_BN_FOLD_H */
