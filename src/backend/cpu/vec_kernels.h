/* vec_kernels.h — the CPU's vectorised math over arrays (exp, log, tanh, erf and the activations
 * built on them, softmax and logsumexp pieces, normal random numbers, f16 / bf16 conversions), one
 * table per ISA, picked by ts_cpu_isa_get(). */
#ifndef TS_VEC_KERNELS_H
#define TS_VEC_KERNELS_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/cpu/cpu_isa.h"
#include "backend/kernel_math.h"

/* Every function computes element by element with the formulas of vec_math_impl.h, in whole
 * vectors (a partial last vector is padded), so an element's result never depends on where it
 * sits in the array, on the thread that computes it or on the ISA (every width rounds alike: no
 * FMA contraction, only explicit fused multiply-adds, which are exact everywhere). Outputs may
 * alias inputs exactly. Sums are kept in 16 double lanes (in as many registers as the ISA needs)
 * added in one fixed order, so they too are the same on every ISA.
 */
typedef struct ts_vec_kernels {
    ts_cpu_isa isa;
    /* y = op(x) for the ops tsi_vec_unary_has() accepts */
    void (*unary_f32)(ts_unary_op op, float *y, const float *x, int64_t n);
    /* y = op(g, x) for TS_B_GELU_BWD and TS_B_SILU_BWD (x: the forward's input) */
    void (*bwd_f32)(ts_binary_op op, float *y, const float *g, const float *x, int64_t n);
    /* softmax rows: the largest element ignoring NaN (-inf for none); then y = e^(x - m) (y may
     * be NULL) returning the sum of those exponentials in double */
    float (*max_f32)(const float *x, int64_t n);
    double (*exp_sum_f32)(float *y, const float *x, float m, int64_t n);
    /* one row of softmax (log: log_softmax) with the two above and the last pass, y may alias x;
     * its gradient from the output y and the output's gradient g (kern_softmax_bwd.c's order of
     * summation), gx may alias y or g */
    void (*softmax_row_f32)(float *y, const float *x, int64_t n, bool log);
    void (*softmax_bwd_row_f32)(float *gx, const float *y, const float *g, int64_t n, bool log);
    /* logsumexp: sum of e^(x - m) in double */
    double (*exp_sum_f64)(const double *x, double m, int64_t n);
    /* y = mean + std * ts_philox_box_muller(u1, u2) */
    void (*normal_f64)(double *y, const double *u1, const double *u2, double mean, double std,
                       int64_t n);
    /* kernel_math.h's conversions, bit for bit (F16C on AVX2 and AVX-512) */
    void (*f16_to_f32)(float *y, const uint16_t *x, int64_t n);
    void (*f32_to_f16)(uint16_t *y, const float *x, int64_t n);
    void (*bf16_to_f32)(float *y, const uint16_t *x, int64_t n);
    void (*f32_to_bf16)(uint16_t *y, const float *x, int64_t n);
    /* tests: the functions one by one, on floats and doubles */
    void (*math_f32)(int fn, float *y, const float *x, int64_t n);
    void (*math_f64)(int fn, double *y, const double *x, int64_t n);
    /* y = a b + c rounded once (vec_math_impl.h's tsv_fma) */
    void (*fma_f32)(float *y, const float *a, const float *b, const float *c, int64_t n);
} ts_vec_kernels;

/* math_f32 / math_f64's fn (the _EXACT ones, math_f32 only: unary_f32's lgamma and erfinv through
 * their exact formulas alone, without the fast paths that round the same) */
enum {
    TSV_EXP,
    TSV_LOG,
    TSV_TANH,
    TSV_ERF,
    TSV_ONEP_ERF,
    TSV_COS,
    TSV_LGAMMA_EXACT,
    TSV_ERFINV_EXACT
};

/* The table for ts_cpu_isa_get(). */
const ts_vec_kernels *tsi_vec_kernels_get(void);
/* The table of an ISA, or NULL when this CPU (or build) lacks it. */
const ts_vec_kernels *tsi_vec_kernels_for(ts_cpu_isa isa);
/* Whether unary_f32 has op. */
bool tsi_vec_unary_has(ts_unary_op op);

/* Chunks of an f32 / f16 / bf16 run (stride in bytes) to and from floats, through the table's
 * conversions where the run is dense; f16 and bf16 kernels compute in float through these. */
static inline void ts_vec_load_f32(const ts_vec_kernels *vk, float *dst, const char *p, ts_dtype dt,
                                   int64_t stride, int64_t n) {
    if (dt == TS_F32) {
        if (stride == (int64_t)sizeof(float)) {
            memcpy(dst, p, (size_t)n * sizeof(float));
        } else {
            for (int64_t i = 0; i < n; i++) memcpy(dst + i, p + i * stride, sizeof(float));
        }
        return;
    }
    const bool f16 = dt == TS_F16;
    if (stride == 2) {
        (f16 ? vk->f16_to_f32 : vk->bf16_to_f32)(dst, (const uint16_t *)p, n);
        return;
    }
    for (int64_t i = 0; i < n; i++) {
        uint16_t h;
        memcpy(&h, p + i * stride, sizeof h);
        dst[i] = f16 ? ts_f16_to_f32(h) : ts_bf16_to_f32(h);
    }
}

static inline void ts_vec_store_f32(const ts_vec_kernels *vk, char *p, ts_dtype dt, int64_t stride,
                                    const float *src, int64_t n) {
    if (dt == TS_F32) {
        if (stride == (int64_t)sizeof(float)) {
            memcpy(p, src, (size_t)n * sizeof(float));
        } else {
            for (int64_t i = 0; i < n; i++) memcpy(p + i * stride, src + i, sizeof(float));
        }
        return;
    }
    const bool f16 = dt == TS_F16;
    if (stride == 2) {
        (f16 ? vk->f32_to_f16 : vk->f32_to_bf16)((uint16_t *)p, src, n);
        return;
    }
    for (int64_t i = 0; i < n; i++) {
        const uint16_t h = f16 ? ts_f32_to_f16(src[i]) : ts_f32_to_bf16(src[i]);
        memcpy(p + i * stride, &h, sizeof h);
    }
}

#endif /* TS_VEC_KERNELS_H */
