/* fft_engine.c — the FFT passes and transforms of fft_plan.h, compiled once for float and once
 * for double from fft_engine_impl.h; kern_fft.c reaches the real-even transforms through
 * fft_engine.h. */
#include "backend/cpu/fft_engine.h"

#include <string.h>

#define FT        float
#define CT        tsi_cf32
#define FN(x)     fft32_##x
#define TWF(p, f) ((p)->f##32)
#define TWT       tsi_cf32
#define CZERO     0
#include "backend/cpu/fft_engine_impl.h"
#undef FT
#undef CT
#undef FN
#undef TWF
#undef TWT

#define FT        double
#define CT        tsi_cf64
#define FN(x)     fft64_##x
#define TWF(p, f) ((p)->f##64)
#define TWT       tsi_cf64
#include "backend/cpu/fft_engine_impl.h"
#undef FT
#undef CT
#undef FN
#undef TWF
#undef TWT
#undef CZERO

void tsi_fft_run_f32(const tsi_fft_plan *p, tsi_cf32 *c, tsi_cf32 *work, bool fwd) {
    fft32_run(p, c, work, fwd);
}
void tsi_fft_run_f64(const tsi_fft_plan *p, tsi_cf64 *c, tsi_cf64 *work, bool fwd) {
    fft64_run(p, c, work, fwd);
}
void tsi_fft_r2c_even_f32(const tsi_fft_plan *p, tsi_cf32 *c, tsi_cf32 *work) {
    fft32_r2c_even(p, c, work);
}
void tsi_fft_r2c_even_f64(const tsi_fft_plan *p, tsi_cf64 *c, tsi_cf64 *work) {
    fft64_r2c_even(p, c, work);
}
void tsi_fft_c2r_even_f32(const tsi_fft_plan *p, tsi_cf32 *c, tsi_cf32 *work) {
    const tsi_cf32 *r = fft32_c2r_even(p, c, work);
    if (r != c) memcpy(c, r, sizeof(tsi_cf32) * (size_t)(p->n / 2));
}
void tsi_fft_c2r_even_f64(const tsi_fft_plan *p, tsi_cf64 *c, tsi_cf64 *work) {
    const tsi_cf64 *r = fft64_c2r_even(p, c, work);
    if (r != c) memcpy(c, r, sizeof(tsi_cf64) * (size_t)(p->n / 2));
}
