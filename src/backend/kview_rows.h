/* kview_rows.h — whether a kernel view is rows of its last dim one after another (contiguous
 * row-major, `dim` innermost): the layout the fused row kernels of every backend take (softmax's
 * gradient on the CPU and on CUDA), declining anything else so the front end composes it. */
#ifndef TS_BACKEND_KVIEW_ROWS_H
#define TS_BACKEND_KVIEW_ROWS_H

#include <stdbool.h>
#include <stdint.h>

#include "backend/backend.h"

static inline bool ts_kview_rows_contiguous(const ts_kview *v, int dim) {
    if (dim != v->ndim - 1) return false;
    int64_t want = 1;
    for (int d = v->ndim - 1; d >= 0; d--) {
        if (v->shape[d] != 1 && v->strides[d] != want) return false;
        want *= v->shape[d];
    }
    return true;
}

#endif /* TS_BACKEND_KVIEW_ROWS_H */
