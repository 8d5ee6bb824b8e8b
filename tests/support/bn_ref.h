/* bn_ref.h — batch norm's training step computed in long double, with per element the tolerance
 * the fused kernels are held to (test_batch_norm, test_batch_norm_nhwc). */
#ifndef TS_BN_REF_H
#define TS_BN_REF_H

#include <stdbool.h>
#include <stdint.h>

#include "tessera.h"

/* Host data, in double: x and dy in [n, c, hw] order; weight, bias and the running statistics
 * per channel. */
typedef struct ts_bn_data {
    double *x, *dy, *w, *b, *rm, *rv;
} ts_bn_data;

void ts_bn_data_free(ts_bn_data *d);

/* Results ([n, c, hw] order; per channel) and per element the tolerance. `u` is dt's unit
 * roundoff, `ud` double's (the kernels' sums, of at most `growth` terms one after another). The
 * shifted sums' error grows with the distance D of the shift from the mean (D <= the largest
 * |x - mean|); the output rounds mean and scale to the dtype and makes ~4 roundings an element, dx
 * ~8. Also mean, var and invstd as the kernels return them. */
typedef struct ts_bn_ref {
    double *y, *dx, *dw, *db, *rm, *rv, *mean, *var, *inv;
    double *ty, *tdx, *tdw, *tdb, *trm, *trv, *tmean, *tvar, *tinv;
} ts_bn_ref;

/* d's step with input [N, C, hw] (without weight or bias: 1 and 0), eps and momentum; growth:
 * how many terms a channel's double sums take one after another (the kernels' order). */
ts_bn_ref ts_bn_reference(const ts_bn_data *d, int64_t N, int64_t C, int64_t hw, bool has_weight,
                          bool has_bias, double eps, double momentum, double growth, ts_dtype dt);
void ts_bn_ref_free(ts_bn_ref *r);

#endif /* TS_BN_REF_H */
