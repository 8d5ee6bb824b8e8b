/* bn_ref.c — batch norm's long-double reference and its tolerances (bn_ref.h). */
#include "bn_ref.h"

#include <math.h>
#include <stdlib.h>

#include "tol_check.h"

void ts_bn_data_free(ts_bn_data *d) {
    free(d->x), free(d->dy), free(d->w), free(d->b), free(d->rm), free(d->rv);
}

ts_bn_ref ts_bn_reference(const ts_bn_data *d, int64_t N, int64_t C, int64_t hw, bool has_weight,
                          bool has_bias, double eps, double momentum, double growth, ts_dtype dt) {
    const int64_t m = N * hw, tot = N * C * hw;
    const double u = ts_test_unit_roundoff(dt), ud = ldexp(1, -53), mom = momentum;
    ts_bn_ref r;
    double **all[] = {&r.y, &r.dx, &r.ty, &r.tdx};
    for (int i = 0; i < 4; i++) *all[i] = calloc((size_t)tot, sizeof(double));
    double **per[] = {&r.dw,  &r.db,  &r.rm,  &r.rv,  &r.mean,  &r.var,  &r.inv,
                      &r.tdw, &r.tdb, &r.trm, &r.trv, &r.tmean, &r.tvar, &r.tinv};
    for (int i = 0; i < 14; i++) *per[i] = calloc((size_t)C, sizeof(double));
    for (int64_t c = 0; c < C; c++) {
        long double mean = 0, var = 0, A = 0, D = 0, sdy = 0, sdx = 0, G1 = 0, G2 = 0;
#define BN_EACH(...)                                                                               \
    for (int64_t i = 0; i < N; i++)                                                                \
        for (int64_t j = 0; j < hw; j++) {                                                         \
            const int64_t at = (i * C + c) * hw + j;                                               \
            const long double x = d->x[at], dy = d->dy[at];                                        \
            (void)dy;                                                                              \
            __VA_ARGS__;                                                                           \
        }
        BN_EACH(mean += x; A += fabsl(x));
        mean /= m, A /= m;
        BN_EACH(var += (x - mean) * (x - mean); D = fmaxl(D, fabsl(x - mean)));
        var /= m;
        const long double inv = 1 / sqrtl(var + eps), w = has_weight ? d->w[c] : 1;
        const long double bias = has_bias ? d->b[c] : 0;
        /* the variance's relative error (the shifted sums), and the error of x - mean over
         * invstd */
        const double rvar = (double)(8 * growth * ud * (var + D * D) / (var + eps));
        BN_EACH(const long double xh = (x - mean) * inv;
                const double xerr = (double)(fabsl(xh) + (fabsl(x) + fabsl(mean) + D) * inv);
                r.y[at] = (double)(xh * w + bias);
                r.ty[at] = ((8 * u + 2 * growth * ud) * xerr + rvar * (double)fabsl(xh)) *
                               (double)fabsl(w) +
                           4 * u * (double)fabsl(bias);
                sdy += dy, sdx += dy * xh; G1 += fabsl(dy); G2 += fabsl(dy) * xerr);
        r.db[c] = (double)sdy, r.dw[c] = (double)sdx;
        r.tdb[c] = (2 * u + 2 * growth * ud) * (double)G1;
        r.tdw[c] = (6 * u + 2 * growth * ud + rvar) * (double)G2;
        BN_EACH(const long double xh = (x - mean) * inv;
                const double xerr = (double)(fabsl(xh) + (fabsl(x) + fabsl(mean) + D) * inv);
                r.dx[at] = (double)(w * inv * (dy - sdy / m - xh * sdx / m));
                r.tdx[at] = (16 * u + 4 * growth * ud + rvar) * (double)(fabsl(w) * inv) *
                            ((double)fabsl(dy) + (double)(G1 / m) + xerr * (double)(G2 / m)));
#undef BN_EACH
        const long double f = (long double)m / (long double)(m - 1);
        r.rm[c] = (double)((1 - mom) * d->rm[c] + mom * mean);
        r.rv[c] = (double)((1 - mom) * d->rv[c] + mom * f * var);
        r.trm[c] =
            8 * u * (fabs(d->rm[c]) + (double)(fabsl(mean) + D)) + 2 * growth * ud * (double)A;
        r.trv[c] = 8 * u * (fabs(d->rv[c]) + (double)(f * var)) +
                   mom * (double)f * rvar * (double)(var + eps);
        /* the statistics: mean = k + sum(x - k) / m rounded once, var and invstd through the
         * shifted sums (rvar) and a few roundings */
        r.mean[c] = (double)mean, r.var[c] = (double)var, r.inv[c] = (double)inv;
        r.tmean[c] = 2 * u * (double)fabsl(mean) + 4 * growth * ud * (double)(A + D);
        r.tvar[c] = (rvar + 4 * u) * (double)(var + eps);
        r.tinv[c] = (rvar + 4 * u) * (double)inv;
    }
    return r;
}

void ts_bn_ref_free(ts_bn_ref *r) {
    double *all[] = {r->y,  r->dx,  r->dw,  r->db,  r->rm,  r->rv,  r->mean,  r->var,  r->inv,
                     r->ty, r->tdx, r->tdw, r->tdb, r->trm, r->trv, r->tmean, r->tvar, r->tinv};
    for (int i = 0; i < 18; i++) free(all[i]);
}
