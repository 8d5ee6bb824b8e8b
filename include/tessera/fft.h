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

/* torch.stft / torch.istft's optional arguments: start from ts_stft_defaults() (PyTorch's
 * defaults) and change what the call gives. TS_STFT_DEFAULT marks a length not given. */
#define TS_STFT_DEFAULT INT64_MIN
typedef struct ts_stft_opts {
    int64_t hop_length;   /* TS_STFT_DEFAULT: n_fft / 4 (floor) */
    int64_t win_length;   /* TS_STFT_DEFAULT: n_fft */
    ts_tensor *window;    /* 1-D of win_length, centred in n_fft with zeros; NULL: ones */
    bool center;          /* true: stft pads n_fft / 2 each side first, istft trims it */
    ts_pad_mode pad_mode; /* stft's padding when center (TS_PAD_REFLECT) */
    bool normalized;      /* frames scaled by 1 / sqrt(n_fft) (istft: the inverse's) */
    int onesided;         /* -1: stft: real input and window; istft: the input's size != n_fft */
    int return_complex;   /* -1: not given (stft: true for complex inputs, refused for real ones;
                             istft: false). stft's false: the complex result's view_as_real */
    int align_to_window;  /* stft, -1 or (center false only) 0 / 1: frames of win_length start
                             every hop (n_frames 1 + (L - win_length) / hop), as PyTorch's */
    int64_t length;       /* istft: the output's length (trimmed or zero-padded); default: all */
} ts_stft_opts;
TS_API ts_stft_opts ts_stft_defaults(void); /* (o == NULL in the calls below: these) */

/* torch.stft: x [L] or [B, L] (float32 / float64 / complex) -> complex [(B,) freq, n_frames]
 * with freq n_fft / 2 + 1 (onesided) or n_fft, n_frames 1 + (L' - n_fft) / hop for the padded
 * length L'; each frame x[m hop .. m hop + n_fft) times the window, transformed (PyTorch's
 * semantics and checks). Differentiable (composed of unfold, mul and the FFTs), every device with
 * an fft kernel. NULL with TS_ERR_ARG / _SHAPE / _DTYPE / _DEVICE and PyTorch's messages. */
TS_API ts_tensor *ts_stft(ts_tensor *x, int64_t n_fft, const ts_stft_opts *o);
/* torch.istft: the inverse of ts_stft by overlap-add of the windowed inverse transforms, divided
 * by the window's squared overlap-add (TS_ERR_ARG where that falls below 1e-11: the window fails
 * the NOLA condition). x complex [(B,) freq, n_frames]; the result real (complex with
 * return_complex) [(B,) length] (length 0: empty, where PyTorch fails reducing the empty
 * envelope). Differentiable, every device with an fft kernel. */
TS_API ts_tensor *ts_istft(ts_tensor *x, int64_t n_fft, const ts_stft_opts *o);

/* torch.signal.windows: M points of a window (M = 1: [1]; M = 0: empty), symmetric (sym) or
 * periodic (the symmetric window of M + 1 points without its last), PyTorch's formulas in float64
 * converted to o.dtype (floating; TS_DTYPE_DEFAULT: float32) on o.device, o.requires_grad a leaf.
 * params: GENERAL_COSINE the coefficients a[0..n) (sum_i (-1)^i a_i cos(2 pi i n / N); hann
 * {0.5, 0.5}, hamming {0.54, 0.46}, blackman {0.42, 0.5, 0.08}); EXPONENTIAL {tau[, center]}
 * (center NAN or absent: the middle; periodic only); GAUSSIAN {std}; KAISER {beta}; BARTLETT and
 * COSINE none. Errors: TS_ERR_ARG with PyTorch's messages (M < 0, tau or std <= 0, beta < 0, no
 * coefficients, a center for a symmetric window, an integer dtype). src/ops/window.c. */
typedef enum ts_window_kind {
    TS_WINDOW_GENERAL_COSINE = 0,
    TS_WINDOW_BARTLETT,
    TS_WINDOW_COSINE,
    TS_WINDOW_EXPONENTIAL,
    TS_WINDOW_GAUSSIAN,
    TS_WINDOW_KAISER
} ts_window_kind;
TS_API ts_tensor *ts_signal_window(ts_window_kind kind, int64_t M, const double *params,
                                   int nparams, bool sym, ts_opts o);

#endif /* TESSERA_FFT_H */
