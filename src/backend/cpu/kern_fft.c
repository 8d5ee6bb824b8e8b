/* kern_fft.c — the CPU fft slot (backend.h): every line of `in` along dim transformed into out by
 * the engine of fft_plan.h (decision 0022), in the dtype's precision. Lines are split into one
 * contiguous range per thread (OpenMP, when the work is large), each with its own buffer from a
 * single allocation made before anything is written; the plan (twiddles) is shared. R2C and C2R of
 * even length run the half-length complex transform. */
#include "backend/cpu/kern_fft.h"

#include <stdlib.h>
#include <string.h>

#ifdef TS_HAVE_OPENMP
#include <omp.h>
#endif

#include "backend/cpu/fft_engine.h"
#include "backend/cpu/fft_lines_vec.h"
#include "backend/omp_if.h"

/* below this many n log2 n units of work the lines run on one thread */
#define FFT_PAR_MIN (1 << 16)
/* a dim that is not contiguous is gathered FFT_BLOCK lines at a time (at most FFT_BLOCK_BYTES) */
#define FFT_BLOCK       8
#define FFT_BLOCK_BYTES (1 << 20)
/* the vector engine's buffers (a group's lines and its work) at most this large, else one line at
 * a time */
#define FFT_VEC_BYTES (8 << 20)

typedef struct fft_job {
    const ts_kview *out, *in;
    const tsi_fft_plan *plan;
    ts_fft_kind kind;
    bool forward;
    double scale;
    int64_t n, in_s, out_s; /* the length, the scalar strides along dim */
    int64_t block;          /* lines gathered together (kern_fft_impl.h) */
    int vl;                 /* > 0: the groups run through fft_lines_vec.h, vl lines a vector */
    int nd;                 /* the other dims: their sizes and scalar strides */
    int64_t shape[TS_MAX_DIMS], in_o[TS_MAX_DIMS], out_o[TS_MAX_DIMS];
} fft_job;

#define FT           float
#define CT           tsi_cf32
#define FN(x)        f32_##x
#define f32_run      tsi_fft_run_f32
#define f32_r2c_even tsi_fft_r2c_even_f32
#define f32_c2r_even tsi_fft_c2r_even_f32
#define f32_vgroup   tsi_fft_vec_group_f32
#include "backend/cpu/kern_fft_impl.h"
#undef FT
#undef CT
#undef FN

#define FT           double
#define CT           tsi_cf64
#define FN(x)        f64_##x
#define f64_run      tsi_fft_run_f64
#define f64_r2c_even tsi_fft_r2c_even_f64
#define f64_c2r_even tsi_fft_c2r_even_f64
#define f64_vgroup   tsi_fft_vec_group_f64
#include "backend/cpu/kern_fft_impl.h"
#undef FT
#undef CT
#undef FN

bool tsi_cpu_fft(const ts_backend *be, int index, const ts_kview *out, const ts_kview *in, int dim,
                 ts_fft_kind kind, bool forward, double scale) {
    (void)be, (void)index;
    const bool dbl = kind == TS_FFT_R2C ? in->dtype == TS_F64 : in->dtype == TS_C128;
    const int64_t in_w = kind == TS_FFT_R2C ? 1 : 2, out_w = kind == TS_FFT_C2R ? 1 : 2;
    fft_job jb = {out, in, NULL, kind, forward, scale, 0, 0, 0, 1, 0, 0, {0}, {0}, {0}};
    jb.n = kind == TS_FFT_C2R ? out->shape[dim] : in->shape[dim];
    jb.in_s = in->strides[dim] * in_w, jb.out_s = out->strides[dim] * out_w;
    int64_t lines = 1;
    for (int d = 0; d < in->ndim; d++) {
        if (d == dim) continue;
        jb.shape[jb.nd] = in->shape[d];
        jb.in_o[jb.nd] = in->strides[d] * in_w, jb.out_o[jb.nd] = out->strides[d] * out_w;
        jb.nd++;
        lines *= in->shape[d];
    }
    if (lines <= 0 || jb.n <= 0) return true;
    tsi_fft_plan *plan = tsi_fft_plan_get(jb.n, kind != TS_FFT_C2C && jb.n % 2 == 0);
    if (!plan) return false;
    jb.plan = plan;
    int64_t nt = 1;
#ifdef TS_HAVE_OPENMP
    double lg = 1;
    for (int64_t v = jb.n; v > 1; v /= 2) lg += 1;
    if (lines > 1 && (double)lines * (double)jb.n * lg >= FFT_PAR_MIN && !omp_in_parallel())
        nt = omp_get_max_threads();
    if (nt > lines) nt = lines;
#endif
    const size_t csz = dbl ? sizeof(tsi_cf64) : sizeof(tsi_cf32);
    /* a dim that is not contiguous: lines in groups of up to FFT_BLOCK, FFT_BLOCK_BYTES at most */
    if (jb.in_s != in_w || jb.out_s != out_w) {
        const int64_t fit = FFT_BLOCK_BYTES / (jb.n * (int64_t)csz);
        jb.block = fit < 1 ? 1 : fit > FFT_BLOCK ? FFT_BLOCK : fit;
    }
    /* several lines at once in vectors (C2C, and the real transforms of even length) */
    const int vl = tsi_fft_vec_lanes(dbl);
    if (vl > 0 && lines > 1 && (kind == TS_FFT_C2C || plan->kind == FFT_PLAN_REAL_EVEN) &&
        (double)vl * (double)(jb.n + (int64_t)plan->work) * (double)csz <= FFT_VEC_BYTES)
        jb.vl = vl, jb.block = vl;
    size_t per = ((size_t)jb.block * (size_t)jb.n + (jb.vl ? (size_t)jb.vl : 1) * plan->work) * csz;
    per = (per + 63) & ~(size_t)63; /* the vector groups' buffers are 64-byte aligned */
    char *scratch = aligned_alloc(64, per * (size_t)nt);
    if (!scratch) {
        tsi_fft_plan_put(plan);
        return false;
    }
    TS_PARALLEL_FOR_IF(
        nt > 1, for (int64_t t = 0; t < nt; t++) {
            const int64_t l0 = lines * t / nt, l1 = lines * (t + 1) / nt;
            if (dbl)
                f64_lines(&jb, l0, l1, scratch + per * (size_t)t);
            else
                f32_lines(&jb, l0, l1, scratch + per * (size_t)t);
        });
    free(scratch);
    tsi_fft_plan_put(plan);
    return true;
}
