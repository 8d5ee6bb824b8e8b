/* cuda_fft.h — the CUDA backend's fft slot (backend.h), through cuFFT: cuda_fft.cu. */
#ifndef TS_CUDA_FFT_H
#define TS_CUDA_FFT_H

#include "backend/cuda/cuda_internal.h"

#ifdef __cplusplus
extern "C" {
#endif

bool tsc_fft(const ts_backend *be, int index, const ts_kview *out, const ts_kview *in, int dim,
             ts_fft_kind kind, bool forward, double scale);

#ifdef __cplusplus
}
#endif

#endif /* TS_CUDA_FFT_H */
