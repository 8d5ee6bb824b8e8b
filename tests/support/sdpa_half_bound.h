/* sdpa_half_bound.h — how far f16 / bf16 attention on the CPU may be from float64 on the same
 * (rounded) inputs: the bounds test_sdpa.c derives for the flash kernels and, with amx, the
 * further roundings of kern_sdpa_amx.c (test_sdpa_amx.c runs that path on emulated tiles). */
#ifndef TS_TEST_SDPA_HALF_BOUND_H
#define TS_TEST_SDPA_HALF_BOUND_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

/* the arithmetic's error bound in a unit roundoff u: scores are dot products of length E (each
 * within E u of the sum of |terms|, at most A), the softmax sums S terms, the output L-or-S-long
 * averages and the gradients sums of L, S and Ev terms; `scale_of` is the magnitude the result
 * is compared at */
static inline double sdpa_arith_bound(double u, int64_t L, int64_t S, int64_t E, int64_t Ev,
                                      double A, double scale_of) {
    return 8 * u * ((double)E * A + (double)(S + L + Ev + E) + 8) * scale_of;
}

/* The maxima of the case: |q|, |k|, |v|, |dO| and of the reference's gradients, the scale, and
 * (amx) the largest column sum of the weights P (a key's total weight over the queries). */
typedef struct sdpa_half_case {
    int64_t L, S, E, Ev;
    double scale, q, k, v, g, dq, dk, dv;
    bool amx;
    double colsum;
} sdpa_half_case;

/* What each result may be off by past u of its exact value (u: 2^-8 bf16, 2^-11 f16). Flash
 * kernels: one rounding of each element plus the float32 arithmetic, and for dq and dk what a D
 * from the saved, rounded output moves them by (test_sdpa.c has the derivation). The AMX path
 * also rounds the weights P and dS = scale P (dP - D) to bf16 as operands of its products: out
 * moves by u sum_j P_ij |v_j| <= u max|v|, dv_j by u max|dO| sum_i P_ij, dq_i by
 * u max|k| sum_j |dS_ij| <= 2 u scale max|dP| max|k| and dk_j by 2 u scale max|dP| max|q|
 * sum_i P_ij, with |dP|, |D| <= Ev max|dO| max|v|. */
typedef struct sdpa_half_tol {
    double out, dq, dk, dv;
} sdpa_half_tol;

static inline sdpa_half_tol sdpa_half_tolerances(double u, const sdpa_half_case *c) {
    const double f32 = ldexp(1, -24);
    const double A = c->scale * (double)c->E * c->q * c->k / sqrt((double)c->E);
    const double terms = c->g * c->v * fmax(c->q, c->k) * c->scale;
    const double dD = u * (double)c->Ev * c->g * c->v * c->scale;
    sdpa_half_tol t;
    t.out = sdpa_arith_bound(f32, c->L, c->S, c->E, c->Ev, A, c->v);
    t.dq = sdpa_arith_bound(f32, c->L, c->S, c->E, c->Ev, A, c->dq + terms) + dD * c->k;
    t.dk =
        sdpa_arith_bound(f32, c->L, c->S, c->E, c->Ev, A, c->dk + terms) + dD * (double)c->L * c->q;
    t.dv = sdpa_arith_bound(f32, c->L, c->S, c->E, c->Ev, A, c->dv + c->g);
    if (c->amx) {
        t.out += u * c->v;
        t.dv += u * c->g * c->colsum;
        t.dq += 2 * dD * c->k;
        t.dk += 2 * dD * c->q * c->colsum;
    }
    return t;
}

#endif /* TS_TEST_SDPA_HALF_BOUND_H */
