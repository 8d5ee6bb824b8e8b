/* kern_amp.c — the gradient scaler's kernels: the fused non-finite check + unscale over many
 * gradients (PyTorch's _amp_foreach_non_finite_check_and_unscale_) and the scale update
 * (_amp_update_scale_). */
#include <float.h>
#include <math.h>

#include "backend/amp_math.h"
#include "backend/cpu/cpu_kernels.h"
#include "backend/cpu/cpu_loops.h"

/* ------------------------------------------------------------------ unscale */

/* One thread's share: the factor and whether it saw an Inf or NaN. */
typedef struct unscale_ctx {
    float inv_scale;
    int bad;
} unscale_ctx;

#define LD_SAME(x) (x)
#define ST_SAME(x) (x)
#define LD_F16(x)  ts_f16_to_f32(x)
#define ST_F16(x)  ts_f32_to_f16(x)
#define LD_BF16(x) ts_bf16_to_f32(x)
#define ST_BF16(x) ts_f32_to_bf16(x)

/* One run of n elements, checked and multiplied in the same pass (one read, one write). As in
 * ATen, f16/bf16/f32 compute in float and f64 in double (the factor is an f32 either way), and a
 * factor of exactly 1 leaves the values untouched. `!(|v| <= MAX)` is true for Inf and NaN and
 * vectorises, unlike isfinite on some compilers. */
#define UNSCALE_SEG(SUF, T, CT, LD, ST, FABS, MAXV)                                                \
    TS_CPU_BODY void unscale_seg_##SUF##_body(void *vctx, char *const *p, const int64_t *s,        \
                                              int64_t n) {                                         \
        unscale_ctx *c = (unscale_ctx *)vctx;                                                      \
        const CT inv = (CT)c->inv_scale;                                                           \
        const bool identity = c->inv_scale == 1.0f;                                                \
        int bad = 0;                                                                               \
        if (s[0] == (int64_t)sizeof(T)) {                                                          \
            T *restrict x = (T *)p[0];                                                             \
            if (identity) {                                                                        \
                for (int64_t i = 0; i < n; i++) bad |= !(FABS(LD(x[i])) <= (MAXV));                \
            } else {                                                                               \
                for (int64_t i = 0; i < n; i++) {                                                  \
                    CT v = LD(x[i]);                                                               \
                    bad |= !(FABS(v) <= (MAXV));                                                   \
                    x[i] = ST(v * inv);                                                            \
                }                                                                                  \
            }                                                                                      \
        } else {                                                                                   \
            char *q = p[0];                                                                        \
            for (int64_t i = 0; i < n; i++, q += s[0]) {                                           \
                T *x = (T *)q;                                                                     \
                CT v = LD(*x);                                                                     \
                bad |= !(FABS(v) <= (MAXV));                                                       \
                if (!identity) *x = ST(v * inv);                                                   \
            }                                                                                      \
        }                                                                                          \
        c->bad |= bad;                                                                             \
    }                                                                                              \
    TS_CPU_SEG_VARIANTS(unscale_seg_##SUF)

UNSCALE_SEG(f32, float, float, LD_SAME, ST_SAME, fabsf, FLT_MAX)
UNSCALE_SEG(f64, double, double, LD_SAME, ST_SAME, fabs, DBL_MAX)
UNSCALE_SEG(f16, ts_f16_bits, float, LD_F16, ST_F16, fabsf, FLT_MAX)
UNSCALE_SEG(bf16, ts_bf16_bits, float, LD_BF16, ST_BF16, fabsf, FLT_MAX)

static ts_cpu_seg_fn unscale_seg_for(ts_dtype dt) {
    switch (dt) {
    case TS_F32:
        return unscale_seg_f32;
    case TS_F64:
        return unscale_seg_f64;
    case TS_F16:
        return unscale_seg_f16;
    case TS_BF16:
        return unscale_seg_bf16;
    default:
        return NULL; /* the front end admits float gradients only */
    }
}

/* Checks and unscales one gradient; returns nonzero when it holds an Inf or NaN. */
static int unscale_one(const ts_kview *g, float inv_scale) {
    ts_cpu_seg_fn fn = unscale_seg_for(g->dtype);
    if (!fn) return 0;
    const ts_kview *views[1] = {g};
    ts_cpu_iter it;
    ts_cpu_iter_init(&it, 1, views);
    if (it.numel <= 0) return 0;
#ifdef TS_HAVE_OPENMP
    /* small gradients (biases, most of a small model) stay on this thread: a parallel region
     * costs more than their pass */
    if (it.numel > TS_CPU_GRAIN && omp_get_max_threads() > 1 && !omp_in_parallel()) {
        const int64_t numel = it.numel;
        int bad = 0;
#pragma omp parallel reduction(| : bad)
        {
            int64_t nt = omp_get_num_threads(), t = omp_get_thread_num();
            int64_t chunk = ((numel + nt - 1) / nt + 63) & ~(int64_t)63;
            int64_t b = t * chunk, e = b + chunk < numel ? b + chunk : numel;
            unscale_ctx c = {.inv_scale = inv_scale};
            if (b < e) ts_cpu_iter_walk(&it, b, e, fn, &c);
            bad |= c.bad;
        }
        return bad;
    }
#endif
    unscale_ctx c = {.inv_scale = inv_scale};
    ts_cpu_iter_walk(&it, 0, it.numel, fn, &c);
    return c.bad;
}

void tsi_cpu_amp_unscale(const ts_backend *be, int index, const ts_kview *grads, int n,
                         const ts_kview *found_inf, const ts_kview *inv_scale) {
    const float inv = *(const float *)inv_scale->data;
    int bad = 0;
    for (int i = 0; i < n; i++) bad |= unscale_one(&grads[i], inv);
    /* only ever set: found_inf gathers several calls (one per device and optimizer) */
    if (bad) *(float *)found_inf->data = 1.0f;
}

/* ------------------------------------------------------------------ scale update */

void tsi_cpu_amp_update_scale(const ts_backend *be, int index, const ts_kview *scale,
                              const ts_kview *growth_tracker, const ts_kview *found_inf,
                              double growth_factor, double backoff_factor, int growth_interval) {
    ts_amp_update_scale_one((float *)scale->data, (int32_t *)growth_tracker->data,
                            *(const float *)found_inf->data, growth_factor, backoff_factor,
                            growth_interval);
}
