/* quant_desc.h — what a quantized tensor carries: its scheme, scales and zero points
 * (decision 0042). Not public: include/tessera/quant.h reads it through accessors. */
#ifndef TS_CORE_QUANT_DESC_H
#define TS_CORE_QUANT_DESC_H

#include <stdatomic.h>
#include <stdint.h>

#include "tessera/quant.h"

/* One per quantized tensor (ts_tensor.quant), refcounted so that a future view may share it;
 * immutable once made. Per tensor: count 1. Per channel: count = size of dim axis, parameter c for
 * the elements whose index along axis is c. Per group (quint4x2 weights): rows = the product of
 * all dims but the last, count = rows * (last / group_size), parameter r * groups + k / group_size
 * for element (r, k). Scales are double and zero points int64 as PyTorch's API keeps them; the
 * kernels take the scale as float, as fbgemm does. Host memory. */
typedef struct tsi_quant {
    atomic_int refs;
    ts_qscheme scheme;
    int axis;           /* per channel: the dim; else -1 */
    int64_t group_size; /* per group; else 0 */
    int64_t count;
    double *scales;       /* [count] */
    int64_t *zero_points; /* [count] */
    /* the weight-only kernels' copy of the parameters (float scales, int32 zero points), made at
     * their first use (tsi_quant_kparams) and freed with the descriptor */
    _Atomic(struct tsi_quant_kparams *) kparams;
} tsi_quant;

typedef struct tsi_quant_kparams {
    float *scales;        /* [count]: (float)scales[i] */
    int32_t *zero_points; /* [count] */
    bool uniform_zp;      /* every zero point is zero_points[0] */
    /* [count]: the scales as float16 bits when each (float)scales[i] is exactly a positive
     * float16 (ts_quantize_int4_symmetric_weight's), else NULL (decision 0051) */
    uint16_t *scales_f16;
} tsi_quant_kparams;

/* q's parameters as the kernels read them (made once, then shared; thread-safe); NULL + TS_ERR_OOM
 * naming op */
const tsi_quant_kparams *tsi_quant_kparams_get(const char *op, tsi_quant *q);

/* New descriptor of count parameters, refs 1, arrays uninitialised; NULL + TS_ERR_OOM naming op */
tsi_quant *tsi_quant_new(const char *op, ts_qscheme scheme, int64_t count);
void tsi_quant_release(tsi_quant *q); /* NULL-safe */

/* The range of a quantized dtype's integers: qint8 [-128, 127], quint8 [0, 255], qint32
 * [-2^31, 2^31 - 1], quint4x2 [0, 15] */
void tsi_quant_range(ts_dtype dt, int64_t *qmin, int64_t *qmax);

#endif /* TS_CORE_QUANT_DESC_H */
