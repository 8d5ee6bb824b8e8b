/* sdpa_half_bound.c — the bounds of sdpa_half_bound.h, and the reference's measurements they
 * take. */
#include "sdpa_half_bound.h"

#include <math.h>

#include "nn/functional_internal.h"
#include "ts_test.h"

double sdpa_max_abs(ts_tensor *t) {
    return ts_item(ts_max(ts_abs(ts_to_dtype(ts_to(t, ts_cpu()), TS_F64))));
}

void sdpa_close_rel(const char *what, const char *label, ts_tensor *got, ts_tensor *want,
                    double rel, double tol) {
    ts_tensor *d = got && want ? ts_sub(ts_to_dtype(ts_to(got, ts_cpu()), TS_F64), want) : NULL;
    double err = d ? ts_item(ts_max(ts_sub(ts_abs(d), ts_mul_scalar(ts_abs(want), rel)))) : NAN;
    bool ok = err <= tol;
    ts_test_record(ok);
    if (!ok)
        ts_test_failf(__FILE__, __LINE__, "%s %s: max error past %.3g relative %.3g > %.3g%s",
                      label, what, rel, err, tol, ts_test_error_str());
}

void sdpa_half_measure(sdpa_half_case *c, ts_tensor *q64, ts_tensor *k64, ts_tensor *v64,
                       ts_tensor *g64, ts_tensor *m64, bool causal, double scale, ts_tensor *ref,
                       ts_tensor *gq, ts_tensor *gk, ts_tensor *gv) {
    ts_scope_begin();
    const int nd = ts_ndim(q64);
    c->L = ts_size(q64, nd - 2), c->E = ts_size(q64, nd - 1);
    c->S = ts_size(k64, nd - 2), c->Ev = ts_size(v64, nd - 1);
    c->scale = scale > 0 ? scale : 1 / sqrt((double)c->E);
    c->q = sdpa_max_abs(q64), c->k = sdpa_max_abs(k64), c->v = sdpa_max_abs(v64),
    c->g = sdpa_max_abs(g64);
    c->dq = sdpa_max_abs(gq), c->dk = sdpa_max_abs(gk), c->dv = sdpa_max_abs(gv);
    /* the weights P: the reference with V = I */
    ts_tensor *p = tsi_sdpa_reference(q64, k64, ts_eye(c->S, 0, (ts_opts){.dtype = TS_F64}), m64, 0,
                                      causal, scale);
    ts_tensor *ref_d = ts_detach(ref);
    c->colsum = ts_item(ts_max(ts_sum_dim(p, -2, false)));
    c->gdot = ts_item(ts_max(ts_sum_dim(ts_abs(ts_mul(g64, ref_d)), -1, false)));
    c->pv = ts_item(ts_max(ts_matmul(p, ts_abs(v64))));
    c->ptg = ts_item(ts_max(ts_matmul(ts_transpose(p, -2, -1), ts_abs(g64))));
    /* dS = scale P (dO V^T - D) */
    ts_tensor *dp = ts_matmul(g64, ts_transpose(v64, -2, -1));
    ts_tensor *d = ts_sum_dim(ts_mul(g64, ref_d), -1, true);
    ts_tensor *ds = ts_abs(ts_mul_scalar(ts_mul(p, ts_sub(dp, d)), c->scale));
    c->ds_row = ts_item(ts_max(ts_sum_dim(ds, -1, false)));
    c->ds_col = ts_item(ts_max(ts_sum_dim(ds, -2, false)));
    ts_scope_end();
}

double sdpa_arith_bound(double u, int64_t L, int64_t S, int64_t E, int64_t Ev, double A,
                        double scale_of) {
    return 8 * u * ((double)E * A + (double)(S + L + Ev + E) + 8) * scale_of;
}

static double arith(double u, const sdpa_half_case *c, double A, double scale_of) {
    return sdpa_arith_bound(u, c->L, c->S, c->E, c->Ev, A, scale_of);
}

sdpa_half_tol sdpa_half_tolerances(double u, const sdpa_half_case *c) {
    const double f32 = ldexp(1, -24);
    const double A = c->scale * (double)c->E * c->q * c->k / sqrt((double)c->E);
    const double terms = c->g * c->v * fmax(c->q, c->k) * c->scale;
    const double dD = c->scale * u * c->gdot; /* scale max|dD| */
    sdpa_half_tol t;
    t.out = arith(f32, c, A, c->v);
    t.dq = arith(f32, c, A, c->dq + terms) + dD * c->k;
    t.dk = arith(f32, c, A, c->dk + terms) + dD * c->q * c->colsum;
    t.dv = arith(f32, c, A, c->dv + c->g);
    if (c->amx) {
        t.out += u * c->pv;
        t.dv += u * c->ptg;
        t.dq += u * c->k * (c->ds_row + dD);
        t.dk += u * c->q * (c->ds_col + dD * c->colsum);
    }
    return t;
}
