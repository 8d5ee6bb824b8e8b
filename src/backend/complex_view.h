/* complex_view.h — complex tensors seen by kernels as their real and imaginary parts.
 *
 * A complex64 (complex128) view is two float32 (float64) views over the same memory: the real
 * parts at the view's address, the imaginary parts one scalar further, every stride doubled. The
 * backends' copy and fill use this to take complex dtypes without complex kernels of their own:
 * a cast to or from complex is a copy of the real parts plus a copy (or a fill with 0) of the
 * imaginary ones, on every backend with the kernels it already has. */
#ifndef TS_BACKEND_COMPLEX_VIEW_H
#define TS_BACKEND_COMPLEX_VIEW_H

#include "backend/backend.h"

/* the real (imag == 0) or imaginary (imag == 1) parts of a complex view */
static inline ts_kview tsi_kview_part(const ts_kview *v, int imag) {
    ts_kview p = *v;
    p.dtype = v->dtype == TS_C128 ? TS_F64 : TS_F32;
    for (int i = 0; i < v->ndim; i++) p.strides[i] *= 2;
    p.data += imag * (v->dtype == TS_C128 ? 8 : 4);
    return p;
}

static inline bool tsi_kview_complex(const ts_kview *v) {
    return v->dtype == TS_C64 || v->dtype == TS_C128;
}

/* copy with a cast when dst or src is complex: parts to parts (a real source is the real part,
 * its imaginary part 0; a real destination takes the real part), through be's own copy and fill */
static inline void tsi_copy_complex(const ts_backend *be, int index, const ts_kview *dst,
                                    const ts_kview *src) {
    ts_kview dre = tsi_kview_complex(dst) ? tsi_kview_part(dst, 0) : *dst;
    ts_kview sre = tsi_kview_complex(src) ? tsi_kview_part(src, 0) : *src;
    be->copy(be, index, &dre, &sre);
    if (!tsi_kview_complex(dst)) return;
    ts_kview dim = tsi_kview_part(dst, 1);
    if (tsi_kview_complex(src)) {
        ts_kview sim = tsi_kview_part(src, 1);
        be->copy(be, index, &dim, &sim);
    } else {
        be->fill(be, index, &dim, 0.0);
    }
}

/* fill a complex view with a real value (imaginary parts 0) */
static inline void tsi_fill_complex(const ts_backend *be, int index, const ts_kview *dst,
                                    double value) {
    ts_kview re = tsi_kview_part(dst, 0), im = tsi_kview_part(dst, 1);
    be->fill(be, index, &re, value);
    be->fill(be, index, &im, 0.0);
}

#endif /* TS_BACKEND_COMPLEX_VIEW_H */
