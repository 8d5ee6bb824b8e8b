/* test_double_backward_math.c — create_graph through the arithmetic nodes issue 52 made twice
 * differentiable: div with rounding (zeros), cdist (p = 1, 1.5, 2, 3, inf), the FFTs, the special
 * functions of special.c, lu_factor and linalg.eig / eigvals. For each, with p every input and v a
 * direction: the gradients recorded under create_graph equal the first-order ones, and H v by
 * double backward equals (grad f(p + e v) - grad f(p - e v)) / 2e of first-order gradients, in
 * float64, on cpu and sim (hv_check.c). The selecting and scanning ops:
 * test_double_backward_select_scan.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "host_values.h"
#include "hv_check.h"
#include "tessera/complex.h"
#include "tessera/fft.h"
#include "tessera/linalg.h"
#include "tessera/special.h"
#include "ts_test.h"

typedef ts_hv_case hv_case;
#define SH TS_HV_SH

/* floor(x / b) next to a smooth term: its gradient is zeros, differentiable again */
static ts_tensor *f_div_floor(ts_tensor *const *in) {
    ts_tensor *q = ts_div_rounding(ts_mul_scalar(in[0], 3),
                                   ts_add_scalar(ts_mul(in[1], in[1]), 0.5), TS_ROUNDING_FLOOR);
    return ts_hv_head(ts_add(ts_mul(in[0], in[1]), q));
}

/* ---------------------------------------------------------------- cdist */
static ts_tensor *cdist_p(ts_tensor *const *in, double p) {
    return ts_hv_head(ts_cdist(in[0], in[1], p));
}
static ts_tensor *f_cdist2(ts_tensor *const *in) { return cdist_p(in, 2); }
static ts_tensor *f_cdist1(ts_tensor *const *in) { return cdist_p(in, 1); }
static ts_tensor *f_cdist15(ts_tensor *const *in) { return cdist_p(in, 1.5); }
static ts_tensor *f_cdist3(ts_tensor *const *in) { return cdist_p(in, 3); }
static ts_tensor *f_cdist_inf(ts_tensor *const *in) { return cdist_p(in, INFINITY); }

/* ---------------------------------------------------------------- fft */
static ts_tensor *f_rfft(ts_tensor *const *in) {
    return ts_hv_head(ts_view_as_real(ts_fft_rfft(ts_tanh(in[0]), -1, 1, TS_FFT_NORM_BACKWARD)));
}
static ts_tensor *f_fft_complex(ts_tensor *const *in) {
    ts_tensor *z = ts_complex(in[0], ts_mul(in[1], in[0]));
    return ts_hv_head(ts_view_as_real(ts_fft_fft(z, 6, 0, TS_FFT_NORM_ORTHO)));
}
static ts_tensor *f_irfft(ts_tensor *const *in) {
    ts_tensor *z = ts_complex(in[0], in[1]); /* [2, 5] */
    return ts_hv_head(ts_mul_scalar(ts_fft_irfft(z, 8, 1, TS_FFT_NORM_FORWARD), 0.3));
}
static ts_tensor *f_rfftn(ts_tensor *const *in) {
    ts_tensor *y = ts_fft_rfftn(ts_sin(in[0]), NULL, 0, TS_DIMS(0, 1), TS_FFT_NORM_BACKWARD);
    return ts_hv_head(ts_mul_scalar(ts_view_as_real(y), 0.5));
}

/* ---------------------------------------------------------------- special.h (src/ops/special.c) */
/* x mapped into (lo, lo + w) */
static ts_tensor *into(ts_tensor *x, double lo, double w) {
    return ts_add_scalar(ts_mul_scalar(ts_add_scalar(x, 1), w / 2), lo);
}
static ts_tensor *f_ndtr(ts_tensor *const *in) {
    return ts_hv_head(ts_ndtr(ts_mul_scalar(in[0], 2)));
}
static ts_tensor *f_ndtri(ts_tensor *const *in) {
    return ts_hv_head(ts_ndtri(into(in[0], 0.1, 0.8)));
}
static ts_tensor *f_log_ndtr(ts_tensor *const *in) {
    return ts_hv_head(ts_log_ndtr(ts_mul_scalar(in[0], 3)));
}
static ts_tensor *f_erfcx(ts_tensor *const *in) {
    return ts_hv_head(ts_erfcx(ts_mul_scalar(in[0], 2)));
}
static ts_tensor *f_entr(ts_tensor *const *in) {
    return ts_hv_head(ts_entr(into(in[0], 0.2, 1.5)));
}
static ts_tensor *f_bessel(ts_tensor *const *in) {
    ts_tensor *x = ts_mul_scalar(in[0], 3), *pos = into(in[0], 0.5, 3);
    ts_tensor *s = ts_add(ts_add(ts_hv_head(ts_bessel_j0(x)), ts_hv_head(ts_bessel_j1(x))),
                          ts_add(ts_hv_head(ts_bessel_y0(pos)), ts_hv_head(ts_bessel_y1(pos))));
    return ts_add(
        s, ts_add(ts_hv_head(ts_modified_bessel_k0(pos)), ts_hv_head(ts_modified_bessel_k1(pos))));
}
static ts_tensor *f_zeta_igamma(ts_tensor *const *in) {
    ts_tensor *a = ts_full(TS_SHAPE(2, 3), 2.5, ts_hv_f64_on(in[0])); /* no gradient for a */
    ts_tensor *x = into(in[0], 0.5, 2);
    return ts_add(ts_add(ts_hv_head(ts_zeta(a, x)), ts_hv_head(ts_igamma(a, x))),
                  ts_hv_head(ts_igammac(a, x)));
}

/* ---------------------------------------------------------------- lu_factor, eig */
static ts_tensor *shifted(ts_tensor *A) { /* A + 3 I */
    const int64_t n = ts_size(A, -1);
    return ts_add(A, ts_mul_scalar(ts_eye(n, 0, ts_hv_f64_on(A)), 3));
}
static ts_tensor *f_lu_factor(ts_tensor *const *in) {
    return ts_hv_head(ts_linalg_lu_factor_ex(shifted(in[0]), NULL, NULL));
}
static ts_tensor *f_lu_factor_wide(ts_tensor *const *in) { /* [2, 4]: U has a block beyond L */
    ts_tensor *A = ts_add(in[0], ts_mul_scalar(ts_eye(2, 4, ts_hv_f64_on(in[0])), 3));
    return ts_hv_head(ts_linalg_lu_factor_ex(A, NULL, NULL));
}
/* 0.4 A + D: eigenvalues near D's (real and distinct, or a complex pair) */
static ts_tensor *near(ts_tensor *A, const double *d) {
    return ts_add(ts_mul_scalar(A, 0.4), ts_tensor_f64(TS_SHAPE(3, 3), d, ts_hv_f64_on(A)));
}
static const double real_d[9] = {1, 0, 0, 0, 2.5, 0, 0, 0, 4};
static const double pair_d[9] = {0, 2, 0, -2, 0, 0, 0, 0, 3};
/* the eigenvalues' parts and |V_ij|^2 (invariant under each column's phase) */
static ts_tensor *eig_head(ts_tensor *A) {
    ts_tensor *V = NULL, *L = ts_linalg_eig(A, &V);
    ts_tensor *vr = ts_view_as_real(V);
    return ts_add(ts_hv_head(ts_view_as_real(L)),
                  ts_hv_head(ts_sum_dim(ts_mul(vr, vr), -1, false)));
}
static ts_tensor *f_eig_real(ts_tensor *const *in) { return eig_head(near(in[0], real_d)); }
static ts_tensor *f_eig_pair(ts_tensor *const *in) { return eig_head(near(in[0], pair_d)); }
static ts_tensor *f_eigvals(ts_tensor *const *in) {
    return ts_hv_head(ts_view_as_real(ts_linalg_eigvals(near(in[0], pair_d))));
}

static const hv_case cases[] = {
    {"div floor", f_div_floor, 2, {SH(2, 2, 3), SH(2, 2, 3)}, "DivBackward1"},
    {"cdist p=2", f_cdist2, 2, {SH(3, 2, 3, 2), SH(3, 2, 4, 2)}, "CdistBackward0"},
    {"cdist p=1", f_cdist1, 2, {SH(2, 3, 2), SH(2, 4, 2)}, "CdistBackward0"},
    {"cdist p=1.5", f_cdist15, 2, {SH(2, 3, 3), SH(3, 2, 4, 3)}, "CdistBackward0"},
    {"cdist p=3", f_cdist3, 2, {SH(2, 3, 2), SH(2, 4, 2)}, "CdistBackward0"},
    {"cdist p=inf", f_cdist_inf, 2, {SH(2, 3, 3), SH(2, 4, 3)}, "CdistBackward0"},
    {"rfft", f_rfft, 1, {SH(2, 2, 8)}, "FftBackward0"},
    {"fft complex", f_fft_complex, 2, {SH(2, 5, 2), SH(2, 5, 2)}, "FftBackward0"},
    {"irfft", f_irfft, 2, {SH(2, 2, 5), SH(2, 2, 5)}, "FftBackward0"},
    {"rfftn", f_rfftn, 1, {SH(2, 4, 6)}, "FftBackward0"},
    {"ndtr", f_ndtr, 1, {SH(2, 2, 3)}, "SpecialNdtrBackward0"},
    {"ndtri", f_ndtri, 1, {SH(2, 2, 3)}, "SpecialNdtriBackward0"},
    {"log_ndtr", f_log_ndtr, 1, {SH(2, 2, 3)}, "SpecialLogNdtrBackward0"},
    {"erfcx", f_erfcx, 1, {SH(2, 2, 3)}, "SpecialErfcxBackward0"},
    {"entr", f_entr, 1, {SH(2, 2, 3)}, "SpecialEntrBackward0"},
    {"bessel", f_bessel, 1, {SH(2, 2, 3)}, "SpecialBesselJ1Backward0"},
    {"zeta igamma igammac", f_zeta_igamma, 1, {SH(2, 2, 3)}, "IgammacBackward0"},
    {"lu_factor", f_lu_factor, 1, {SH(3, 2, 3, 3)}, "LinalgLuFactorExBackward0"},
    {"lu_factor wide", f_lu_factor_wide, 1, {SH(2, 2, 4)}, "LinalgLuFactorExBackward0"},
    {"linalg.eig real", f_eig_real, 1, {SH(2, 3, 3)}, "LinalgEigBackward0"},
    {"linalg.eig complex pair", f_eig_pair, 1, {SH(2, 3, 3)}, "LinalgEigBackward0"},
    {"linalg.eigvals", f_eigvals, 1, {SH(2, 3, 3)}, "LinalgEigBackward0"},
};

int main(void) {
    ts_mem_stats before, after;
    ts_memory_stats(ts_sim(0), &before);
    const ts_device devs[2] = {ts_cpu(), ts_sim(0)};
    for (int di = 0; di < 2; di++)
        for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
            ts_hv_check(&cases[k], devs[di]);
    ts_memory_stats(ts_sim(0), &after);
    CHECK_EQ(after.live_tensors, before.live_tensors);
    CHECK_EQ(ts_memory_stats(ts_cpu(), &after), TS_OK);
    CHECK_EQ(after.live_tensors, 0);
    return ts_test_finish();
}
