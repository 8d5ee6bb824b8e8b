/* kern_fft.h — the CPU backend's fft slot (backend.h; kern_fft.c over the engine of fft_plan.h
 * and fft_engine.h). */
#ifndef TS_KERN_FFT_H
#define TS_KERN_FFT_H

#include "backend/backend.h"

bool tsi_cpu_fft(const ts_backend *be, int index, const ts_kview *out, const ts_kview *in, int dim,
                 ts_fft_kind kind, bool forward, double scale);

#endif /* TS_KERN_FFT_H */
