/* sdpa_half_bound.h — how far f16 / bf16 attention on the CPU may be from float64 on the same
 * (rounded) inputs: the bounds test_sdpa.c uses for the flash kernels and, with amx, for the
 * further roundings of kern_sdpa_amx.c (test_sdpa_amx.c runs that path on emulated tiles). */
#ifndef TS_TEST_SDPA_HALF_BOUND_H
#define TS_TEST_SDPA_HALF_BOUND_H

#include <stdbool.h>
#include <stdint.h>

#include "tessera.h"

/* What the bounds need of a case, measured on the float64 reference (sdpa_half_measure): the
 * maxima of |q|, |k|, |v|, |dO| and of the reference's gradients; the largest column sum of the
 * weights P (a key's total weight over the queries); max_i sum_e |dO_ie| |out_ie|; max_i
 * sum_j P_ij |v_j| and max_j sum_i P_ij |dO_i| (per element, the largest over e); the largest row
 * and column sums of |dS| = |scale P (dP - D)|. */
typedef struct sdpa_half_case {
    int64_t L, S, E, Ev;
    double scale, q, k, v, g, dq, dk, dv;
    double colsum, gdot, pv, ptg, ds_row, ds_col;
    bool amx; /* the AMX path (its roundings of P and dS) */
} sdpa_half_case;

/* The arithmetic's error bound in a unit roundoff u: scores are dot products of length E (each
 * within E u of the sum of |terms|, at most A), the softmax sums S terms, the output L-or-S-long
 * averages and the gradients sums of L, S and Ev terms; `scale_of` is the magnitude the result
 * is compared at. */
double sdpa_arith_bound(double u, int64_t L, int64_t S, int64_t E, int64_t Ev, double A,
                        double scale_of);
/* max |t| over the elements of t (any device, any float dtype) */
double sdpa_max_abs(ts_tensor *t);
/* max over elements of |got - want| - rel |want| <= tol (a failure names label and what) */
void sdpa_close_rel(const char *what, const char *label, ts_tensor *got, ts_tensor *want,
                    double rel, double tol);

/* Measures the case: q64, k64, v64 [B.., L or S, E or Ev], dO g64, the mask m64 (NULL, bool or
 * additive), the scale as given to sdpa (0: 1/sqrt(E)), the reference output and its gradients
 * gq, gk, gv. */
void sdpa_half_measure(sdpa_half_case *c, ts_tensor *q64, ts_tensor *k64, ts_tensor *v64,
                       ts_tensor *g64, ts_tensor *m64, bool causal, double scale, ts_tensor *ref,
                       ts_tensor *gq, ts_tensor *gk, ts_tensor *gv);

/* What each result may be off by past u of its exact value (u: 2^-8 bf16, 2^-11 f16).
 * Flash kernels: one rounding of each element plus the float32 arithmetic, and for dq and dk
 * what D_i = sum_e dO_ie out_ie taken from the saved, rounded output moves them by: |dD_i| <=
 * u sum_e |dO_ie| |out_ie|, dq_i = scale sum_j P_ij (dP_ij - D_i) k_j moves by scale |dD_i|
 * max|k| (a row's weights sum to 1) and dk_j by scale max|dD| max|q| sum_i P_ij. The AMX path
 * also rounds P and dS to bf16 as operands of its products, each term moving by u of itself:
 * out_i by u sum_j P_ij |v_j|, dv_j by u sum_i P_ij |dO_i|, dq_i by u max|k| sum_j |dS_ij| and
 * dk_j by u max|q| sum_i |dS_ij| (dS's sums taken with the kernel's D: the reference's plus
 * scale |dD| per weight). */
typedef struct sdpa_half_tol {
    double out, dq, dk, dv;
} sdpa_half_tol;
sdpa_half_tol sdpa_half_tolerances(double u, const sdpa_half_case *c);

#endif /* TS_TEST_SDPA_HALF_BOUND_H */
