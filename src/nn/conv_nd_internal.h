/* conv_nd_internal.h — what conv_nd.c (conv1d, conv3d, the checks), conv_transpose.c and
 * conv_fold.c share: PyTorch's checks and output sizes of a k-dim (transposed) convolution, and
 * the depth helpers of the 3-d forms. Not public. */
#ifndef TS_NN_CONV_ND_INTERNAL_H
#define TS_NN_CONV_ND_INTERNAL_H

#include "autograd/autograd.h"
#include "core/internal.h"
#include "tessera/conv.h"

typedef struct tsi_convnd_geom {
    int k; /* spatial dims */
    bool unbatched;
    ts_device dev;
    int64_t n, cin, cout;
    int64_t in[3], ker[3], out[3];
    int s[3], p[3], d[3], op[3], groups;
} tsi_convnd_geom;

/* The checks of a k-dim convolution (transposed: w [Cin, Cout/groups, *kernel]) with PyTorch's
 * messages under op, defaults resolved and the output sizes; false with the error set. */
bool tsi_convnd_check(const char *op, int k, bool transposed, ts_tensor *x, ts_tensor *w,
                      ts_tensor *b, ts_convnd_opts o, tsi_convnd_geom *g);

/* conv_transpose2d of a batched x [N, Cin, H, W] with w [Cin, Cout/groups, kh, kw] and no bias,
 * the checks done (g from tsi_convnd_check with k = 2, batched). In the current scope. */
ts_tensor *tsi_conv_transpose2d_nobias(ts_tensor *x, ts_tensor *w, const tsi_convnd_geom *g);

/* x [N, D, C, H, W] with each depth slice followed by every-1 zero slices (every >= 1, the last
 * slice's dropped) and front / back zero slices: the dilated, padded depth (differentiable). In
 * the current scope. */
ts_tensor *tsi_depth_spread(ts_tensor *x, int64_t every, int64_t front, int64_t back);

#endif /* TS_NN_CONV_ND_INTERNAL_H */
