/* kern_rnn_cell.c — one LSTM / GRU time step's gates on the CPU (backend.h's ts_rnn_cell_args):
 * forward and backward each one pass over the rows, the pointwise formulas of
 * backend/rnn_cell_math.h. float32 activates whole gate runs of a row with the vectorised sigmoid
 * and tanh of vec_kernels.h (those of the unary ops: the composed ops' bits); float64 uses
 * kernel_math.h's scalar ones (again the unary ops'). Rows run in parallel when the step is big
 * enough (TS_CPU_GRAIN elements, the elementwise kernels' grain). */
#include <math.h>
#include <stdint.h>

#include "backend/cpu/cpu_kernels.h"
#include "backend/cpu/cpu_loops.h"
#include "backend/cpu/vec_kernels.h"
#include "backend/omp_if.h"
#include "backend/rnn_cell_math.h"
#include "backend/rnn_seq_loop.h"

#ifdef TS_HAVE_OPENMP
#include <omp.h>

#include "backend/cpu/blas_threads.h"
#endif

#define PTR(T, v) ((T *)(v).data)

static bool parallel_rows(const ts_rnn_cell_args *a, int64_t width) {
    return a->rows > 1 && a->rows * width > TS_CPU_GRAIN;
}

/* ------------------------------------------------------------------ float32 */
static void lstm_fwd_f32(const ts_rnn_cell_args *a) {
    const ts_vec_kernels *vk = tsi_vec_kernels_get();
    const int64_t H = a->hidden, B = a->rows;
    const float *xw = PTR(const float, a->xw), *gh = PTR(const float, a->gh),
                *cp = PTR(const float, a->state);
    float *h = PTR(float, a->h), *c = PTR(float, a->c), *sv = PTR(float, a->saved);
    TS_PARALLEL_FOR_IF(
        parallel_rows(a, 5 * H), for (int64_t r = 0; r < B; r++) {
            const float *x = xw + r * 4 * H, *y = gh ? gh + r * 4 * H : NULL, *cr = cp + r * H;
            float *s = sv + r * 5 * H, *hr = h + r * H, *crow = c + r * H;
            if (y) {
                for (int64_t j = 0; j < 4 * H; j++) s[j] = x[j] + y[j];
            } else {
                for (int64_t j = 0; j < 4 * H; j++) s[j] = x[j];
            }
            vk->unary_f32(TS_U_SIGMOID, s, s, 2 * H); /* i, f */
            vk->unary_f32(TS_U_TANH, s + 2 * H, s + 2 * H, H);
            vk->unary_f32(TS_U_SIGMOID, s + 3 * H, s + 3 * H, H);
            const float *i = s, *f = s + H, *g = s + 2 * H, *o = s + 3 * H;
            float *tc = s + 4 * H;
            for (int64_t j = 0; j < H; j++) crow[j] = ts_lstm_c_f(i[j], f[j], g[j], cr[j]);
            vk->unary_f32(TS_U_TANH, tc, crow, H);
            for (int64_t j = 0; j < H; j++) hr[j] = o[j] * tc[j];
        });
}

static void gru_fwd_f32(const ts_rnn_cell_args *a) {
    const ts_vec_kernels *vk = tsi_vec_kernels_get();
    const int64_t H = a->hidden, B = a->rows;
    const float *xw = PTR(const float, a->xw), *gh = PTR(const float, a->gh),
                *hp = PTR(const float, a->state);
    float *h = PTR(float, a->h), *sv = PTR(float, a->saved);
    TS_PARALLEL_FOR_IF(
        parallel_rows(a, 4 * H), for (int64_t r = 0; r < B; r++) {
            const float *x = xw + r * 3 * H, *y = gh + r * 3 * H, *hpr = hp + r * H;
            float *s = sv + r * 4 * H, *hr = h + r * H;
            for (int64_t j = 0; j < 2 * H; j++) s[j] = x[j] + y[j];
            vk->unary_f32(TS_U_SIGMOID, s, s, 2 * H); /* r, z */
            const float *rg = s, *z = s + H;
            float *n = s + 2 * H, *hn = s + 3 * H;
            for (int64_t j = 0; j < H; j++) {
                hn[j] = y[2 * H + j];
                n[j] = ts_gru_npre_f(x[2 * H + j], rg[j], hn[j]);
            }
            vk->unary_f32(TS_U_TANH, n, n, H);
            for (int64_t j = 0; j < H; j++) hr[j] = ts_gru_h_f(n[j], z[j], hpr[j]);
        });
}

/* ------------------------------------------------------------------ float64 */
static void lstm_fwd_f64(const ts_rnn_cell_args *a) {
    const int64_t H = a->hidden, B = a->rows;
    const double *xw = PTR(const double, a->xw), *gh = PTR(const double, a->gh),
                 *cp = PTR(const double, a->state);
    double *h = PTR(double, a->h), *c = PTR(double, a->c), *sv = PTR(double, a->saved);
    TS_PARALLEL_FOR_IF(
        parallel_rows(a, 5 * H), for (int64_t r = 0; r < B; r++) {
            const double *x = xw + r * 4 * H, *y = gh ? gh + r * 4 * H : NULL;
            double *s = sv + r * 5 * H;
            for (int64_t j = 0; j < 4 * H; j++) {
                const double p = y ? x[j] + y[j] : x[j];
                s[j] = j >= 2 * H && j < 3 * H ? tanh(p) : ts_sigmoid_d(p);
            }
            for (int64_t j = 0; j < H; j++) {
                const double cj = ts_lstm_c_d(s[j], s[H + j], s[2 * H + j], cp[r * H + j]);
                c[r * H + j] = cj;
                s[4 * H + j] = tanh(cj);
                h[r * H + j] = s[3 * H + j] * s[4 * H + j];
            }
        });
}

static void gru_fwd_f64(const ts_rnn_cell_args *a) {
    const int64_t H = a->hidden, B = a->rows;
    const double *xw = PTR(const double, a->xw), *gh = PTR(const double, a->gh),
                 *hp = PTR(const double, a->state);
    double *h = PTR(double, a->h), *sv = PTR(double, a->saved);
    TS_PARALLEL_FOR_IF(
        parallel_rows(a, 4 * H), for (int64_t r = 0; r < B; r++) {
            const double *x = xw + r * 3 * H, *y = gh + r * 3 * H;
            double *s = sv + r * 4 * H;
            for (int64_t j = 0; j < 2 * H; j++) s[j] = ts_sigmoid_d(x[j] + y[j]);
            for (int64_t j = 0; j < H; j++) {
                const double hn = y[2 * H + j];
                const double n = tanh(ts_gru_npre_d(x[2 * H + j], s[j], hn));
                s[2 * H + j] = n, s[3 * H + j] = hn;
                h[r * H + j] = ts_gru_h_d(n, s[H + j], hp[r * H + j]);
            }
        });
}

/* ------------------------------------------------------------------ backward (both dtypes) */
/* One row of H elements. The common case (every gradient present and wanted) runs a loop without
 * branches, which the compiler vectorises; absent inputs read as zeros, absent outputs are
 * skipped. */
#define LSTM_BWD(SFX, T)                                                                           \
    static void lstm_bwd_row_##SFX(int64_t H, const T *restrict s, const T *restrict cp,           \
                                   const T *restrict dh, const T *restrict dc, T *restrict d,      \
                                   T *restrict dcp) {                                              \
        if (dh && dc && d && dcp) {                                                                \
            for (int64_t j = 0; j < H; j++)                                                        \
                ts_lstm_cell_bwd_##SFX(s[j], s[H + j], s[2 * H + j], s[3 * H + j], s[4 * H + j],   \
                                       cp[j], dh[j], dc[j], d + j, d + H + j, d + 2 * H + j,       \
                                       d + 3 * H + j, dcp + j);                                    \
            return;                                                                                \
        }                                                                                          \
        for (int64_t j = 0; j < H; j++) {                                                          \
            T di, df, dg, dout, dcj;                                                               \
            ts_lstm_cell_bwd_##SFX(s[j], s[H + j], s[2 * H + j], s[3 * H + j], s[4 * H + j],       \
                                   cp[j], dh ? dh[j] : (T)0, dc ? dc[j] : (T)0, &di, &df, &dg,     \
                                   &dout, &dcj);                                                   \
            if (d) d[j] = di, d[H + j] = df, d[2 * H + j] = dg, d[3 * H + j] = dout;               \
            if (dcp) dcp[j] = dcj;                                                                 \
        }                                                                                          \
    }                                                                                              \
    static void lstm_bwd_##SFX(const ts_rnn_cell_args *a) {                                        \
        const int64_t H = a->hidden, B = a->rows;                                                  \
        const T *sv = PTR(const T, a->saved), *cp = PTR(const T, a->state),                        \
                *dh = PTR(const T, a->dh), *dc = PTR(const T, a->dc);                              \
        T *dx = PTR(T, a->dxw), *dcp = PTR(T, a->dstate);                                          \
        TS_PARALLEL_FOR_IF(                                                                        \
            parallel_rows(a, 5 * H), for (int64_t r = 0; r < B; r++) {                             \
                lstm_bwd_row_##SFX(H, sv + r * 5 * H, cp + r * H, dh ? dh + r * H : NULL,          \
                                   dc ? dc + r * H : NULL, dx ? dx + r * 4 * H : NULL,             \
                                   dcp ? dcp + r * H : NULL);                                      \
            });                                                                                    \
    }
LSTM_BWD(f, float)
LSTM_BWD(d, double)
#undef LSTM_BWD

#define GRU_BWD(SFX, T)                                                                            \
    static void gru_bwd_row_##SFX(int64_t H, const T *restrict s, const T *restrict hp,            \
                                  const T *restrict dh, T *restrict x, T *restrict y,              \
                                  T *restrict dhp) {                                               \
        if (dh && x && y && dhp) {                                                                 \
            for (int64_t j = 0; j < H; j++) {                                                      \
                ts_gru_cell_bwd_##SFX(s[j], s[H + j], s[2 * H + j], s[3 * H + j], hp[j], dh[j],    \
                                      x + j, x + H + j, x + 2 * H + j, y + 2 * H + j, dhp + j);    \
                y[j] = x[j], y[H + j] = x[H + j];                                                  \
            }                                                                                      \
            return;                                                                                \
        }                                                                                          \
        for (int64_t j = 0; j < H; j++) {                                                          \
            T dr, dz, dn, dhn, dhpj;                                                               \
            ts_gru_cell_bwd_##SFX(s[j], s[H + j], s[2 * H + j], s[3 * H + j], hp[j],               \
                                  dh ? dh[j] : (T)0, &dr, &dz, &dn, &dhn, &dhpj);                  \
            if (x) x[j] = dr, x[H + j] = dz, x[2 * H + j] = dn;                                    \
            if (y) y[j] = dr, y[H + j] = dz, y[2 * H + j] = dhn;                                   \
            if (dhp) dhp[j] = dhpj;                                                                \
        }                                                                                          \
    }                                                                                              \
    static void gru_bwd_##SFX(const ts_rnn_cell_args *a) {                                         \
        const int64_t H = a->hidden, B = a->rows;                                                  \
        const T *sv = PTR(const T, a->saved), *hp = PTR(const T, a->state),                        \
                *dh = PTR(const T, a->dh);                                                         \
        T *dx = PTR(T, a->dxw), *dg = PTR(T, a->dgh), *dhp = PTR(T, a->dstate);                    \
        TS_PARALLEL_FOR_IF(                                                                        \
            parallel_rows(a, 4 * H), for (int64_t r = 0; r < B; r++) {                             \
                gru_bwd_row_##SFX(H, sv + r * 4 * H, hp + r * H, dh ? dh + r * H : NULL,           \
                                  dx ? dx + r * 3 * H : NULL, dg ? dg + r * 3 * H : NULL,          \
                                  dhp ? dhp + r * H : NULL);                                       \
            });                                                                                    \
    }
GRU_BWD(f, float)
GRU_BWD(d, double)
#undef GRU_BWD

void tsi_cpu_rnn_cell_forward(const ts_backend *be, int index, const ts_rnn_cell_args *a) {
    (void)be, (void)index;
    if (a->rows < 1 || a->hidden < 1) return;
    const bool f64 = a->xw.dtype == TS_F64;
    if (a->lstm)
        (f64 ? lstm_fwd_f64 : lstm_fwd_f32)(a);
    else
        (f64 ? gru_fwd_f64 : gru_fwd_f32)(a);
}

void tsi_cpu_rnn_cell_backward(const ts_backend *be, int index, const ts_rnn_cell_args *a) {
    (void)be, (void)index;
    if (a->rows < 1 || a->hidden < 1) return;
    const bool f64 = a->saved.dtype == TS_F64;
    if (a->lstm)
        (f64 ? lstm_bwd_d : lstm_bwd_f)(a);
    else
        (f64 ? gru_bwd_d : gru_bwd_f)(a);
}

/* ------------------------------------------------------------------ a layer's steps */
/* The rows are independent sequences: each thread takes a block of them through every step
 * (backend/rnn_seq_loop.h; its products and gates then run on that thread alone), so the steps need
 * no synchronisation between threads, where splitting each step's product and gates would meet
 * twice a step. Threads only where each gets SEQ_MIN_ROWS rows and a step's product is big enough
 * to be worth one. */
enum { SEQ_MIN_ROWS = 16 };
#define SEQ_MIN_MACS 1e5

static int seq_threads(const ts_rnn_seq_args *a) {
#ifdef TS_HAVE_OPENMP
    if (omp_in_parallel()) return 1;
    int n = omp_get_max_threads();
    while (n > 1 && a->rows < (int64_t)n * SEQ_MIN_ROWS) n--;
    const double macs = (double)a->rows * (double)a->hidden * (double)a->hidden;
    return macs * (a->lstm ? 4 : 3) < SEQ_MIN_MACS ? 1 : n;
#else
    (void)a;
    return 1;
#endif
}

static void seq_run(const ts_backend *be, int index, const ts_rnn_seq_args *a, bool backward) {
    const int nt = seq_threads(a);
    if (nt <= 1) {
        (backward ? tsi_rnn_seq_bwd_rows : tsi_rnn_seq_fwd_rows)(be, index, a, 0, a->rows);
        return;
    }
#ifdef TS_HAVE_OPENMP
    tsi_blas_single_begin(); /* one product per thread: the BLAS library's own threads stay out */
#pragma omp parallel num_threads(nt)
    {
        const int i = omp_get_thread_num(), n = omp_get_num_threads();
        const int64_t r0 = a->rows * i / n, r1 = a->rows * (i + 1) / n;
        if (r1 > r0) (backward ? tsi_rnn_seq_bwd_rows : tsi_rnn_seq_fwd_rows)(be, index, a, r0, r1);
    }
    tsi_blas_single_end();
#endif
}

void tsi_cpu_rnn_seq_forward(const ts_backend *be, int index, const ts_rnn_seq_args *a) {
    seq_run(be, index, a, false);
}

void tsi_cpu_rnn_seq_backward(const ts_backend *be, int index, const ts_rnn_seq_args *a) {
    seq_run(be, index, a, true);
}
