/* fft_lines_vec.c — fft_lines_vec.h: fft_engine_impl.h compiled over pairs of 256-bit vectors (the
 * real and the imaginary parts of 8 float or 4 double lines) for AVX2, with fft_lines_vec_impl.h's
 * gather and scatter; AVX-512 hosts take the same 256-bit variant: 16 lines of 1024 points in
 * 512-bit vectors (a 128 KiB group plus its work) ran at half the speed of 8 on the EPYC host of
 * bench/results/SURFACE.md, the group no longer within the caches near the core. No contraction
 * into fused multiply-adds (ISO C), so each lane computes what fft_engine.c computes for its
 * line. */
#include "backend/cpu/fft_lines_vec.h"

#include <string.h>

#include "backend/cpu/cpu_isa.h"

/* GCC's vector shuffles with a vector mask; clang (the fuzz build) runs the one-line engine */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define FV_X86 1

/* clang-format off */
TS_ISA_PRAGMA_TARGET(TS_ISA_TARGET_AVX2)
typedef float fv_v8f __attribute__((vector_size(32)));
typedef struct { fv_v8f r, i; } fv_c8f;
#define FT float
#define VF fv_v8f
#define CT fv_c8f
#define TWT tsi_cf32
#define CZERO ((VF){0})
#define TWF(p, f) ((p)->f##32)
#define FN(x) fv_avx2_32_##x
#define FV_T8 1
#include "backend/cpu/fft_engine_impl.h"
#include "backend/cpu/fft_lines_vec_impl.h"
#undef FV_T8
#undef FT
#undef VF
#undef CT
#undef TWT
#undef CZERO
#undef TWF
#undef FN
typedef double fv_v4d __attribute__((vector_size(32)));
typedef struct { fv_v4d r, i; } fv_c4d;
#define FT double
#define VF fv_v4d
#define CT fv_c4d
#define TWT tsi_cf64
#define CZERO ((VF){0})
#define TWF(p, f) ((p)->f##64)
#define FN(x) fv_avx2_64_##x
#include "backend/cpu/fft_engine_impl.h"
#include "backend/cpu/fft_lines_vec_impl.h"
#undef FT
#undef VF
#undef CT
#undef TWT
#undef CZERO
#undef TWF
#undef FN
#pragma GCC pop_options

/* clang-format on */
#endif

int tsi_fft_vec_lanes(bool dbl) {
#ifdef FV_X86
    if (ts_cpu_isa_get() >= TS_ISA_AVX2) return dbl ? 4 : 8;
#endif
    (void)dbl;
    return 0;
}

void tsi_fft_vec_group_f32(const tsi_fft_plan *p, ts_fft_kind kind, bool fwd, int64_t n,
                           const float *src, int64_t si, int64_t ils, float *dst, int64_t so,
                           int64_t ols, int64_t g, float scale, void *buf, void *work) {
#ifdef FV_X86
    fv_avx2_32_group(p, kind, fwd, n, src, si, ils, dst, so, ols, g, scale, buf, work);
#else
    (void)p, (void)kind, (void)fwd, (void)n, (void)src, (void)si, (void)ils, (void)dst, (void)so,
        (void)ols, (void)g, (void)scale, (void)buf, (void)work;
#endif
}

void tsi_fft_vec_group_f64(const tsi_fft_plan *p, ts_fft_kind kind, bool fwd, int64_t n,
                           const double *src, int64_t si, int64_t ils, double *dst, int64_t so,
                           int64_t ols, int64_t g, double scale, void *buf, void *work) {
#ifdef FV_X86
    fv_avx2_64_group(p, kind, fwd, n, src, si, ils, dst, so, ols, g, scale, buf, work);
#else
    (void)p, (void)kind, (void)fwd, (void)n, (void)src, (void)si, (void)ils, (void)dst, (void)so,
        (void)ols, (void)g, (void)scale, (void)buf, (void)work;
#endif
}
