/* tessera/fft.h — torch.fft: discrete Fourier transforms of complex and real tensors, with
 * autograd, on every device with an fft kernel (cpu and sim: Tessera's own engine, decision 0022;
 * cuda: cuFFT).
 *
 * n (-1: the input's size along dim) crops or zero-pads the input along dim first, as PyTorch's.
 * norm is PyTorch's: TS_FFT_NORM_BACKWARD (forward unscaled, inverse by 1/n), _FORWARD (the
 * reverse), _ORTHO (1/sqrt(n) each way). Real inputs of fft / ifft / fftn are taken as complex
 * (integers as float32); rfft takes float32 / float64 (integers as float32) and gives the
 * n / 2 + 1 non-negative frequencies; irfft takes the complex half-spectrum and gives n real
 * values (n default 2 * (size - 1)). The multi-dimensional forms transform each of dims in turn
 * (s: one size per dim, NULL for the inputs' sizes; dims.n == 0: the last len(s) dims, or all
 * dims when s is NULL). Each returns a new tensor, or NULL with the error set (TS_ERR_DTYPE,
 * TS_ERR_ARG for n < 1 or a bad dim, TS_ERR_UNSUPPORTED on a device without the kernel). */
#ifndef TESSERA_FFT_H
#define TESSERA_FFT_H

#include "tessera.h"

typedef enum ts_fft_norm {
    TS_FFT_NORM_BACKWARD = 0, /* PyTorch's default, norm=None */
    TS_FFT_NORM_FORWARD,
    TS_FFT_NORM_ORTHO,
} ts_fft_norm;

TS_API ts_tensor *ts_fft_fft(ts_tensor *x, int64_t n, int dim, ts_fft_norm norm);
TS_API ts_tensor *ts_fft_ifft(ts_tensor *x, int64_t n, int dim, ts_fft_norm norm);
TS_API ts_tensor *ts_fft_rfft(ts_tensor *x, int64_t n, int dim, ts_fft_norm norm);
TS_API ts_tensor *ts_fft_irfft(ts_tensor *x, int64_t n, int dim, ts_fft_norm norm);
/* hfft: the real signal of a Hermitian half-spectrum, as irfft of conj(x) with the norm's
 * directions swapped; ihfft the inverse (a real x's half-spectrum, conj(rfft) swapped) */
TS_API ts_tensor *ts_fft_hfft(ts_tensor *x, int64_t n, int dim, ts_fft_norm norm);
TS_API ts_tensor *ts_fft_ihfft(ts_tensor *x, int64_t n, int dim, ts_fft_norm norm);

/* s: ns sizes (ns == 0: none given) */
TS_API ts_tensor *ts_fft_fftn(ts_tensor *x, const int64_t *s, int ns, ts_dims dims,
                              ts_fft_norm norm);
TS_API ts_tensor *ts_fft_ifftn(ts_tensor *x, const int64_t *s, int ns, ts_dims dims,
                               ts_fft_norm norm);
TS_API ts_tensor *ts_fft_rfftn(ts_tensor *x, const int64_t *s, int ns, ts_dims dims,
                               ts_fft_norm norm);
TS_API ts_tensor *ts_fft_irfftn(ts_tensor *x, const int64_t *s, int ns, ts_dims dims,
                                ts_fft_norm norm);

/* hfftn: irfftn of conj(x) with the norm's directions swapped; ihfftn: conj(rfftn(x)) swapped
 * (hfft2 / ihfft2: dims (-2, -1)) */
TS_API ts_tensor *ts_fft_hfftn(ts_tensor *x, const int64_t *s, int ns, ts_dims dims,
                               ts_fft_norm norm);
TS_API ts_tensor *ts_fft_ihfftn(ts_tensor *x, const int64_t *s, int ns, ts_dims dims,
                                ts_fft_norm norm);

/* the sample frequencies of an n-point transform with spacing d: [0, 1, ..., -1] / (d n);
 * rfftfreq the n / 2 + 1 non-negative ones (o.dtype a float dtype, default float32) */
TS_API ts_tensor *ts_fft_fftfreq(int64_t n, double d, ts_opts o);
TS_API ts_tensor *ts_fft_rfftfreq(int64_t n, double d, ts_opts o);
/* the zero frequency moved to the centre along dims (dims.n == 0: all): a roll by size / 2;
 * ifftshift undoes it (a roll by -(size / 2)) */
TS_API ts_tensor *ts_fft_fftshift(ts_tensor *x, ts_dims dims);
TS_API ts_tensor *ts_fft_ifftshift(ts_tensor *x, ts_dims dims);

#endif /* TESSERA_FFT_H */
