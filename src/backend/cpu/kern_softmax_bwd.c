/* kern_softmax_bwd.c — the CPU gradient of softmax / log_softmax from the output y and its
 * gradient g, one pass per row while the row is in cache (the composition reads and writes the
 * whole tensor five times): softmax gx = y * (g - sum(g * y)), log_softmax gx = g - exp(y) *
 * sum(g). Rows along a contiguous dim of contiguous f32 / f64 tensors, and f16 / bf16 ones of at
 * most SMB_HALF_MAX elements (widened into a float buffer on the stack, the float row, rounded back
 * once); anything else declines (the front end composes it). */
#include <math.h>

#include "backend/cpu/cpu_kernels.h"
#include "backend/cpu/vec_kernels.h"
#include "backend/kview_rows.h"
#include "backend/omp_if.h"

#define SMB_PAR_MIN  32768 /* fewer elements than this: one thread */
#define SMB_LANES    16    /* independent partial sums: the compiler keeps them in vector lanes */
#define SMB_HALF_MAX 4096  /* f16 / bf16 rows up to this long: three float rows on the stack */

/* sum(a * b) or, with b NULL, sum(a): SMB_LANES partial sums in T, added in double */
#define SMB_SUM(T, a, b, L, out)                                                                   \
    do {                                                                                           \
        T acc_[SMB_LANES] = {0};                                                                   \
        int64_t k_ = 0;                                                                            \
        for (; k_ + SMB_LANES <= (L); k_ += SMB_LANES)                                             \
            for (int j_ = 0; j_ < SMB_LANES; j_++)                                                 \
                acc_[j_] += (a)[k_ + j_] * ((b) ? (b)[k_ + j_] : (T)1);                            \
        double s_ = 0;                                                                             \
        for (int j_ = 0; j_ < SMB_LANES; j_++) s_ += (double)acc_[j_];                             \
        for (; k_ < (L); k_++) s_ += (double)((a)[k_] * ((b) ? (b)[k_] : (T)1));                   \
        (out) = s_;                                                                                \
    } while (0)

static void row_f(float *gx, const float *y, const float *g, int64_t L, bool lg) {
    tsi_vec_kernels_get()->softmax_bwd_row_f32(gx, y, g, L, lg);
}

static void row_d(double *gx, const double *y, const double *g, int64_t L, bool lg) {
    double s;
    if (lg) {
        SMB_SUM(double, g, (const double *)NULL, L, s);
        for (int64_t k = 0; k < L; k++) gx[k] = g[k] - exp(y[k]) * s;
    } else {
        SMB_SUM(double, g, y, L, s);
        for (int64_t k = 0; k < L; k++) gx[k] = y[k] * (g[k] - s);
    }
}

/* One f16 / bf16 row (es = 2) through float */
static void row_half(char *gx, const char *y, const char *g, ts_dtype dt, int64_t L, bool lg) {
    float buf[3 * SMB_HALF_MAX];
    const ts_vec_kernels *vk = tsi_vec_kernels_get();
    ts_vec_load_f32(vk, buf, y, dt, 2, L);
    ts_vec_load_f32(vk, buf + L, g, dt, 2, L);
    vk->softmax_bwd_row_f32(buf + 2 * L, buf, buf + L, L, lg);
    ts_vec_store_f32(vk, gx, dt, 2, buf + 2 * L, L);
}

bool tsi_cpu_softmax_backward(const ts_backend *be, int index, const ts_kview *gx,
                              const ts_kview *y, const ts_kview *g, int dim, bool log) {
    (void)be;
    (void)index;
    const ts_dtype dt = y->dtype;
    const bool half = dt == TS_F16 || dt == TS_BF16;
    if ((dt != TS_F32 && dt != TS_F64 && !half) || gx->dtype != dt || g->dtype != dt ||
        y->ndim < 1 || (half && y->shape[dim] > SMB_HALF_MAX))
        return false;
    if (!ts_kview_rows_contiguous(gx, dim) || !ts_kview_rows_contiguous(y, dim) ||
        !ts_kview_rows_contiguous(g, dim))
        return false;
    const int64_t L = y->shape[dim];
    int64_t numel = 1;
    for (int d = 0; d < y->ndim; d++) numel *= y->shape[d];
    if (numel == 0) return true;
    const int64_t nrows = numel / L;
    const bool par = numel >= SMB_PAR_MIN;
    if (half) {
        TS_PARALLEL_FOR_IF(par, for (int64_t r = 0; r < nrows; r++)
                                    row_half(gx->data + r * L * 2, y->data + r * L * 2,
                                             g->data + r * L * 2, dt, L, log););
    } else if (dt == TS_F32) {
        float *o = (float *)gx->data;
        const float *yy = (const float *)y->data, *gg = (const float *)g->data;
        TS_PARALLEL_FOR_IF(par, for (int64_t r = 0; r < nrows; r++)
                                    row_f(o + r * L, yy + r * L, gg + r * L, L, log););
    } else {
        double *o = (double *)gx->data;
        const double *yy = (const double *)y->data, *gg = (const double *)g->data;
        TS_PARALLEL_FOR_IF(par, for (int64_t r = 0; r < nrows; r++)
                                    row_d(o + r * L, yy + r * L, gg + r * L, L, log););
    }
    return true;
}
