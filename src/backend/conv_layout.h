/* conv_layout.h — which memory layout a convolution's 4-D activation view [n, c, h, w] has, for the
 * CPU and CUDA backends alike (plain C, static inline; no device code). A view is NHWC-dense when
 * its strides are those of a dense [n][h][w][c] array; dims of one element do not count, so a view
 * with c == 1 or h == w == 1 is dense in both layouts (the same memory) and counts as NCHW. */
#ifndef TS_CONV_LAYOUT_H
#define TS_CONV_LAYOUT_H

#include <stdbool.h>
#include <stdint.h>

#include "backend/backend.h"

/* dense in the given order of dims (innermost first), dims of one element aside */
static inline bool ts_kview_dense_in(const ts_kview *v, const int order[4]) {
    if (v->ndim != 4) return false;
    int64_t expected = 1;
    for (int k = 0; k < 4; k++) {
        const int d = order[k];
        if (v->shape[d] == 1) continue;
        if (v->strides[d] != expected) return false;
        expected *= v->shape[d];
    }
    return true;
}

static inline bool ts_kview_nhwc_dense(const ts_kview *v) {
    static const int nhwc[4] = {1, 3, 2, 0};
    return ts_kview_dense_in(v, nhwc);
}

/* NHWC-dense and not also NCHW-dense: a channels_last activation whose layout matters */
static inline bool ts_kview_nhwc_only(const ts_kview *v) {
    static const int nchw[4] = {3, 2, 1, 0};
    return ts_kview_nhwc_dense(v) && !ts_kview_dense_in(v, nchw);
}

#endif /* TS_CONV_LAYOUT_H */
