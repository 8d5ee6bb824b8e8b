/* stft.c — torch.stft / torch.istft (include/tessera/fft.h) composed of differentiable ops over
 * the FFTs of fft.c: frames by unfold, the window by mul, the transforms by rfft / fft / irfft /
 * ifft, the overlap-add by index_add; so every device with an fft kernel runs them and gradients
 * come from the pieces. PyTorch's semantics and checks (aten/src/ATen/native/SpectralOps.cpp's
 * stft / istft and torch/functional.py's centre padding). Complex tensors reach the real-only ops
 * (pad, unfold, index_add) through their real views. */
#include <stdlib.h>

#include "autograd/autograd.h"
#include "tessera/complex.h"
#include "tessera/fft.h"

ts_stft_opts ts_stft_defaults(void) {
    return (ts_stft_opts){.hop_length = TS_STFT_DEFAULT,
                          .win_length = TS_STFT_DEFAULT,
                          .window = NULL,
                          .center = true,
                          .pad_mode = TS_PAD_REFLECT,
                          .normalized = false,
                          .onesided = -1,
                          .return_complex = -1,
                          .align_to_window = -1,
                          .length = TS_STFT_DEFAULT};
}

static ts_tensor *finish(ts_tensor *y) {
    y = ts_error() == TS_OK && y ? ts_keep(y) : NULL;
    ts_scope_end();
    return y;
}

/* x [B, L] padded by (left, right) along its last dim with mode (complex through [1, 2B, L]) */
static ts_tensor *pad_last(ts_tensor *x, int64_t left, int64_t right, ts_pad_mode mode) {
    if (!x) return NULL;
    const int64_t p[2] = {left, right};
    const int64_t b = x->shape.dims[0], l = x->shape.dims[1];
    if (!tsi_is_complex(x->dtype)) {
        ts_tensor *y = ts_pad(ts_reshape(x, TS_SHAPE(1, b, l)), p, 2, mode, 0);
        return y ? ts_reshape(y, TS_SHAPE(b, y->shape.dims[2])) : NULL;
    }
    ts_tensor *r = ts_permute(ts_view_as_real(x), TS_DIMS(0, 2, 1)); /* [B, 2, L] */
    ts_tensor *y = r ? ts_pad(ts_reshape(r, TS_SHAPE(1, 2 * b, l)), p, 2, mode, 0) : NULL;
    if (!y) return NULL;
    y = ts_permute(ts_reshape(y, TS_SHAPE(b, 2, y->shape.dims[2])), TS_DIMS(0, 2, 1));
    return ts_view_as_complex(ts_contiguous(y));
}

/* zeros around the last dim of any tensor (complex through its real view) */
static ts_tensor *zero_pad_last(ts_tensor *x, int64_t left, int64_t right) {
    if (!x || (left == 0 && right == 0)) return x;
    if (!tsi_is_complex(x->dtype))
        return ts_pad(x, (const int64_t[]){left, right}, 2, TS_PAD_CONSTANT, 0);
    ts_tensor *y =
        ts_pad(ts_view_as_real(x), (const int64_t[]){0, 0, left, right}, 4, TS_PAD_CONSTANT, 0);
    return ts_view_as_complex(ts_contiguous(y));
}

/* windows of size along the last dim of x [B, L] every step: [B, n, size] (complex through its
 * real view) */
static ts_tensor *frames_of(ts_tensor *x, int64_t size, int64_t step) {
    if (!tsi_is_complex(x->dtype)) return ts_unfold(x, 1, size, step);
    ts_tensor *f = ts_unfold(ts_view_as_real(x), 1, size, step); /* [B, n, 2, size] */
    return ts_view_as_complex(ts_contiguous(ts_movedim(f, TS_DIMS(2), TS_DIMS(3))));
}

/* y [B, n, size] overlap-added into [B, total]: out[b, m step + k] += y[b, m, k] */
static ts_tensor *overlap_add(const char *op, ts_tensor *y, int64_t step, int64_t total) {
    if (!y) return NULL;
    const int64_t b = y->shape.dims[0], n = y->shape.dims[1], size = y->shape.dims[2];
    int64_t *v = malloc(sizeof *v * (size_t)(n * size > 0 ? n * size : 1));
    if (!v) return tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op), NULL;
    for (int64_t m = 0; m < n; m++)
        for (int64_t k = 0; k < size; k++) v[m * size + k] = m * step + k;
    ts_tensor *idx =
        ts_from_data(TS_SHAPE(n * size), TS_I64, v, (ts_opts){.device = tsi_device(y)});
    free(v);
    const bool cx = tsi_is_complex(y->dtype);
    ts_tensor *src = cx ? ts_reshape(ts_view_as_real(y), TS_SHAPE(b, n * size, 2))
                        : ts_reshape(y, TS_SHAPE(b, n * size));
    if (!idx || !src) return NULL;
    ts_shape zs = src->shape;
    zs.dims[1] = total;
    ts_tensor *z = ts_zeros(zs, (ts_opts){.dtype = src->dtype, .device = tsi_device(y)});
    ts_tensor *out = ts_index_add(z, 1, idx, src, 1.0);
    return cx ? ts_view_as_complex(out) : out;
}

/* the window as both transforms apply it: win_length values centred in n_fft with zeros (NULL
 * when none was given and win_length == n_fft: nothing to multiply) */
static ts_tensor *padded_window(ts_tensor *w, int64_t win, int64_t n_fft, ts_dtype real,
                                ts_device dev) {
    if (!w && win == n_fft) return NULL;
    if (!w) w = ts_ones(TS_SHAPE(win), (ts_opts){.dtype = real, .device = dev});
    const int64_t left = (n_fft - win) / 2;
    return zero_pad_last(w, left, n_fft - win - left);
}

/* a dtype's real counterpart (complex64 -> float32; a real one itself) */
static ts_dtype real_of(ts_dtype d) { return tsi_is_complex(d) ? tsi_complex_part(d) : d; }

static bool check_float_input(const char *op, ts_tensor *x) {
    const ts_dtype d = x->dtype;
    if (d == TS_F32 || d == TS_F64 || tsi_is_complex(d)) return true;
    if (d == TS_F16 || d == TS_BF16)
        return tsi_error_set(TS_ERR_DTYPE, "%s: Unsupported dtype %s (input: %s)", op,
                             tsi_torch_scalar_name(d), tsi_desc(x)),
               false;
    return tsi_error_set(TS_ERR_DTYPE,
                         "%s: expected a tensor of floating point or complex values (input: %s)",
                         op, tsi_desc(x)),
           false;
}

static bool check_window(const char *op, ts_tensor *x, ts_tensor *w, int64_t win) {
    if (!w) return true;
    if (!tsi_check_input(op, w, "window")) return false;
    ts_tensor *const both[2] = {x, w};
    ts_device dev;
    if (!tsi_same_device(op, both, 2, false, &dev)) return false;
    if (w->shape.ndim != 1 || w->shape.dims[0] != win)
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s: expected a 1D window tensor of size equal to win_length=%lld, "
                             "but got window with size %s",
                             op, (long long)win, tsi_desc(w)),
               false;
    if (w->dtype == TS_BOOL || w->dtype == TS_F16 || w->dtype == TS_BF16)
        return tsi_error_set(TS_ERR_DTYPE, "%s: Unsupported window dtype %s", op,
                             tsi_torch_scalar_name(w->dtype)),
               false;
    return true;
}

/* ------------------------------------------------------------------ stft */
ts_tensor *ts_stft(ts_tensor *x, int64_t n_fft, const ts_stft_opts *opts) {
    const char *op = "stft";
    tsi_init();
    const ts_stft_opts o = opts ? *opts : ts_stft_defaults();
    if (!tsi_check_input(op, x, "input")) return NULL;
    if (x->shape.ndim != 1 && x->shape.ndim != 2)
        return tsi_error_set(TS_ERR_SHAPE, "%s: expected a 1D or 2D tensor, but got %s", op,
                             tsi_desc(x)),
               NULL;
    if (!check_float_input(op, x)) return NULL;
    if (n_fft < 1)
        return tsi_error_set(TS_ERR_ARG, "%s: expected 0 < n_fft, but got n_fft=%lld", op,
                             (long long)n_fft),
               NULL;
    const int64_t hop = o.hop_length == TS_STFT_DEFAULT ? n_fft / 4 : o.hop_length;
    const int64_t win = o.win_length == TS_STFT_DEFAULT ? n_fft : o.win_length;
    if (hop <= 0)
        return tsi_error_set(TS_ERR_ARG, "%s: expected hop_length > 0, but got hop_length=%lld", op,
                             (long long)hop),
               NULL;
    if (win <= 0 || win > n_fft)
        return tsi_error_set(TS_ERR_ARG,
                             "%s: expected 0 < win_length <= n_fft, but got win_length=%lld", op,
                             (long long)win),
               NULL;
    ts_tensor *w = o.window;
    if (!check_window(op, x, w, win)) return NULL;
    if (o.center && o.align_to_window != -1)
        return tsi_error_set(TS_ERR_ARG,
                             "%s: align_to_window should only be set when center = false", op),
               NULL;
    const bool cx = tsi_is_complex(x->dtype) || (w && tsi_is_complex(w->dtype));
    if (o.return_complex == -1 && !cx)
        return tsi_error_set(TS_ERR_ARG,
                             "%s: requires the return_complex parameter be given for real inputs, "
                             "and will further require that return_complex=True in a future "
                             "PyTorch release",
                             op),
               NULL;
    const bool onesided = o.onesided == -1 ? !cx : o.onesided != 0;
    if (onesided && cx)
        return tsi_error_set(TS_ERR_ARG,
                             "%s: Cannot have onesided output if window or input is complex", op),
               NULL;
    if (o.pad_mode < TS_PAD_CONSTANT || o.pad_mode > TS_PAD_CIRCULAR)
        return tsi_error_set(TS_ERR_ARG, "%s: unknown pad_mode %d", op, (int)o.pad_mode), NULL;
    const bool align = o.align_to_window == 1;
    ts_scope_begin();
    ts_tensor *s = x->shape.ndim == 1 ? ts_unsqueeze(x, 0) : x; /* [B, L] */
    if (o.center) s = pad_last(s, n_fft / 2, n_fft / 2, o.pad_mode);
    if (!s) return finish(NULL);
    const int64_t len = s->shape.dims[1];
    if (n_fft > len)
        return tsi_error_set(TS_ERR_ARG, "%s: expected 0 < n_fft <= %lld, but got n_fft=%lld", op,
                             (long long)len, (long long)n_fft),
               finish(NULL);
    ts_tensor *f;
    if (align) { /* frames of win_length, windowed, then centred in n_fft with zeros */
        f = frames_of(s, win, hop);
        if (w) f = ts_mul(f, w);
        const int64_t left = (n_fft - win) / 2;
        f = zero_pad_last(f, left, n_fft - win - left);
    } else {
        f = frames_of(s, n_fft, hop);
        ts_tensor *wp = padded_window(w, win, n_fft, real_of(s->dtype), tsi_device(s));
        if (wp) f = ts_mul(f, wp);
    }
    if (!f) return finish(NULL);
    const ts_fft_norm norm = o.normalized ? TS_FFT_NORM_ORTHO : TS_FFT_NORM_BACKWARD;
    ts_tensor *y = onesided ? ts_fft_rfft(f, -1, -1, norm) : ts_fft_fft(f, -1, -1, norm);
    y = ts_transpose(y, 1, 2); /* [B, freq, n_frames] */
    if (y && x->shape.ndim == 1) y = ts_squeeze_dim(y, 0);
    const bool rc = o.return_complex == -1 ? true : o.return_complex != 0;
    if (y && !rc) y = ts_view_as_real(y);
    return finish(y);
}

/* ------------------------------------------------------------------ istft */
ts_tensor *ts_istft(ts_tensor *x, int64_t n_fft, const ts_stft_opts *opts) {
    const char *op = "istft";
    tsi_init();
    const ts_stft_opts o = opts ? *opts : ts_stft_defaults();
    if (!tsi_check_input(op, x, "input")) return NULL;
    if (!tsi_is_complex(x->dtype))
        return tsi_error_set(TS_ERR_DTYPE,
                             "%s: requires a complex-valued input tensor matching the output from "
                             "stft with return_complex=True (input: %s)",
                             op, tsi_desc(x)),
               NULL;
    if (x->shape.ndim != 2 && x->shape.ndim != 3)
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s: expected a 2D or 3D complex tensor [(batch,) freq, frames], but "
                             "got %s",
                             op, tsi_desc(x)),
               NULL;
    if (tsi_numel(x->shape) == 0)
        return tsi_error_set(TS_ERR_SHAPE, "%s: input tensor cannot be empty (%s)", op,
                             tsi_desc(x)),
               NULL;
    const int nd = x->shape.ndim;
    const int64_t n_frames = x->shape.dims[nd - 1], fft_size = x->shape.dims[nd - 2];
    const int64_t hop = o.hop_length == TS_STFT_DEFAULT ? n_fft / 4 : o.hop_length;
    const int64_t win = o.win_length == TS_STFT_DEFAULT ? n_fft : o.win_length;
    const bool onesided = o.onesided == -1 ? fft_size != n_fft : o.onesided != 0;
    if (onesided && n_fft / 2 + 1 != fft_size)
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s: expected the frequency dimension (3rd to the last) of the input "
                             "tensor to match n_fft / 2 + 1 when onesided=True, but got %lld",
                             op, (long long)fft_size),
               NULL;
    if (!onesided && n_fft != fft_size)
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s: expected the frequency dimension (3rd to the last) of the input "
                             "tensor to match n_fft when onesided=False, but got %lld",
                             op, (long long)fft_size),
               NULL;
    if (!(hop > 0 && hop <= win))
        return tsi_error_set(TS_ERR_ARG, "%s: expected 0 < hop_length <= win_length (%lld, %lld)",
                             op, (long long)hop, (long long)win),
               NULL;
    if (!(win > 0 && win <= n_fft))
        return tsi_error_set(TS_ERR_ARG, "%s: expected 0 < win_length <= n_fft (%lld, %lld)", op,
                             (long long)win, (long long)n_fft),
               NULL;
    ts_tensor *w = o.window;
    if (w && !tsi_check_input(op, w, "window")) return NULL;
    if (w && (w->shape.ndim != 1 || w->shape.dims[0] != win))
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s: Invalid window shape. window has to be 1D and length of "
                             "`win_length` (%lld), got %s",
                             op, (long long)win, tsi_desc(w)),
               NULL;
    if (!check_window(op, x, w, win)) return NULL;
    const bool rc = o.return_complex == 1;
    if (rc && onesided)
        return tsi_error_set(TS_ERR_ARG,
                             "%s: Cannot have onesided output if window or input is complex", op),
               NULL;
    if (!rc && w && tsi_is_complex(w->dtype))
        return tsi_error_set(TS_ERR_ARG,
                             "%s: Complex windows are incompatible with return_complex=False", op),
               NULL;
    if (o.length != TS_STFT_DEFAULT && o.length < 0)
        return tsi_error_set(TS_ERR_ARG, "%s: length must be non-negative, got %lld", op,
                             (long long)o.length),
               NULL;
    const int64_t expected = n_fft + hop * (n_frames - 1);
    const int64_t start = o.center ? n_fft / 2 : 0;
    const int64_t end = o.length != TS_STFT_DEFAULT ? start + o.length
                        : o.center                  ? expected - n_fft / 2
                                                    : expected;
    const int64_t stop = end < expected ? end : expected, keep = stop > start ? stop - start : 0;
    ts_scope_begin();
    ts_tensor *s = nd == 2 ? ts_unsqueeze(x, 0) : x;
    s = ts_transpose(s, 1, 2); /* [B, n_frames, freq] */
    const ts_fft_norm norm = o.normalized ? TS_FFT_NORM_ORTHO : TS_FFT_NORM_BACKWARD;
    ts_tensor *y;
    if (rc) {
        y = ts_fft_ifft(s, -1, -1, norm);
    } else {
        if (!onesided) s = ts_narrow(s, 2, 0, n_fft / 2 + 1);
        y = ts_fft_irfft(s, n_fft, -1, norm);
    }
    if (!y) return finish(NULL);
    const ts_dtype part = tsi_complex_part(x->dtype);
    ts_tensor *wp = padded_window(w, win, n_fft, part, tsi_device(x));
    if (!wp && ts_error() == TS_OK) /* no window given, win_length == n_fft: ones */
        wp = ts_ones(TS_SHAPE(n_fft), (ts_opts){.dtype = part, .device = tsi_device(x)});
    y = ts_mul(y, wp); /* [B, n_frames, n_fft] */
    y = overlap_add(op, y, hop, expected);
    ts_tensor *env =
        ts_expand(ts_reshape(ts_square(wp), TS_SHAPE(1, 1, n_fft)), TS_SHAPE(1, n_frames, n_fft));
    env = overlap_add(op, ts_contiguous(env), hop, expected);
    if (!y || !env) return finish(NULL);
    y = ts_narrow(y, 1, start, keep);
    env = ts_narrow(env, 1, start, keep);
    if (keep > 0) {
        const double m = ts_item(ts_min(ts_abs(env))); /* PyTorch's check, a host read too */
        if (ts_error() != TS_OK) return finish(NULL);
        if (m < 1e-11)
            return tsi_error_set(TS_ERR_ARG,
                                 "%s: window overlap add min: %g; the window and hop_length fail "
                                 "the NOLA condition (the squared window's overlap-add must "
                                 "exceed 1e-11 on every output sample)",
                                 op, m),
                   finish(NULL);
        y = ts_div(y, env);
    }
    if (end > expected) y = zero_pad_last(y, 0, end - expected); /* PyTorch warns here */
    if (y && nd == 2) y = ts_squeeze_dim(y, 0);
    return finish(y);
}
