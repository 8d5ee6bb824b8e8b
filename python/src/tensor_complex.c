/* tensor_complex.c — complex tensors and torch.fft in tessera._C (include/tessera/complex.h,
 * include/tessera/fft.h): view_as_real / view_as_complex / complex / polar / real / imag / conj /
 * angle as functions and Tensor methods (real and imag are also properties, in tensor.c's
 * getset), is_complex, the _fft_* functions behind tessera.fft (python/tessera/fft.py), and stft /
 * istft as functions and Tensor methods. */
#include "tensor_impl.h"
#include "tessera/complex.h"
#include "tessera/fft.h"

#define T TSP_T

/* ------------------------------------------------------------------ one tensor */
/* clang-format off: one entry a line */
#define COMPLEX_UNARY_LIST(X)                                                                      \
    X(view_as_real, ts_view_as_real)                                                               \
    X(view_as_complex, ts_view_as_complex)                                                         \
    X(conj, ts_conj)                                                                               \
    X(resolve_conj, ts_clone)                                                                      \
    X(conj_physical, ts_conj)                                                                      \
    X(angle, ts_angle)
// clang-format on
#define DEF_UNARY(name, cfn) TSP_DEF_UNARY(name, cfn)
COMPLEX_UNARY_LIST(DEF_UNARY)

static PyObject *f_real(PyObject *mod, PyObject *x) {
    (void)mod;
    ts_tensor *t = tsp_tensor_arg(x, "real", "input");
    return t ? tsp_unary(ts_real, t) : NULL;
}
static PyObject *f_imag(PyObject *mod, PyObject *x) {
    (void)mod;
    ts_tensor *t = tsp_tensor_arg(x, "imag", "input");
    return t ? tsp_unary(ts_imag, t) : NULL;
}
static PyObject *get_real(PyObject *self, void *unused) {
    (void)unused;
    return tsp_unary(ts_real, T(self));
}
static PyObject *get_imag(PyObject *self, void *unused) {
    (void)unused;
    return tsp_unary(ts_imag, T(self));
}
static PyObject *m_is_complex(PyObject *self, PyObject *unused) {
    (void)unused;
    return PyBool_FromLong(ts_dtype_is_complex(ts_dtype_of(T(self))));
}
static PyObject *f_is_complex(PyObject *mod, PyObject *x) {
    (void)mod;
    ts_tensor *t = tsp_tensor_arg(x, "is_complex", "input");
    return t ? PyBool_FromLong(ts_dtype_is_complex(ts_dtype_of(t))) : NULL;
}
static PyObject *m_is_conj(PyObject *self, PyObject *unused) {
    (void)self, (void)unused;
    Py_RETURN_FALSE; /* conj is materialised: no lazy conjugate bit */
}

/* complex(real, imag) / polar(abs, angle) */
static PyObject *two(PyObject *const *args, Py_ssize_t nargs, PyObject *kw, const char *fn,
                     const char *n0, const char *n1, ts_tensor *(*f)(ts_tensor *, ts_tensor *)) {
    const char *const names[] = {n0, n1};
    PyObject *a[2] = {0};
    if (tsp_parse(args, nargs, kw, fn, names, 2, 2, a) < 0) return NULL;
    ts_tensor *x = tsp_tensor_arg(a[0], fn, n0), *y = x ? tsp_tensor_arg(a[1], fn, n1) : NULL, *r;
    if (!x || !y || tsp_enter()) return NULL;
    TSP_NOGIL(r = f(x, y));
    return tsp_wrap(r);
}
static PyObject *f_complex(PyObject *mod, PyObject *const *a, Py_ssize_t n, PyObject *kw) {
    (void)mod;
    return two(a, n, kw, "complex", "real", "imag", ts_complex);
}
static PyObject *f_polar(PyObject *mod, PyObject *const *a, Py_ssize_t n, PyObject *kw) {
    (void)mod;
    return two(a, n, kw, "polar", "abs", "angle", ts_polar);
}

/* ------------------------------------------------------------------ torch.fft */
static int norm_arg(PyObject *o, ts_fft_norm *out, const char *fn) {
    *out = TS_FFT_NORM_BACKWARD;
    if (!o || o == Py_None) return 0;
    const char *s = PyUnicode_Check(o) ? PyUnicode_AsUTF8(o) : NULL;
    if (s && !strcmp(s, "backward")) return 0;
    if (s && !strcmp(s, "forward")) return *out = TS_FFT_NORM_FORWARD, 0;
    if (s && !strcmp(s, "ortho")) return *out = TS_FFT_NORM_ORTHO, 0;
    PyErr_Format(PyExc_ValueError, "%s(): Invalid normalization mode: %R", fn, o);
    return -1;
}

typedef ts_tensor *(*fft1_fn)(ts_tensor *, int64_t, int, ts_fft_norm);
/* fn(input, n=None, dim=-1, norm=None) */
static PyObject *fft1(PyObject *const *args, Py_ssize_t nargs, PyObject *kw, const char *fn,
                      fft1_fn f) {
    static const char *const names[] = {"input", "n", "dim", "norm"};
    PyObject *a[4] = {0};
    if (tsp_parse(args, nargs, kw, fn, names, 4, 1, a) < 0) return NULL;
    ts_tensor *x = tsp_tensor_arg(a[0], fn, "input"), *r;
    int64_t n = -1, dim = -1;
    ts_fft_norm norm;
    if (!x || (a[1] && a[1] != Py_None && tsp_int_arg(a[1], &n, fn, "n") < 0) ||
        (a[2] && a[2] != Py_None && tsp_int_arg(a[2], &dim, fn, "dim") < 0) ||
        norm_arg(a[3], &norm, fn) < 0 || tsp_enter())
        return NULL;
    if (a[1] && a[1] != Py_None && n < 1) {
        PyErr_Format(PyExc_RuntimeError, "%s(): Invalid number of data points (%lld) specified", fn,
                     (long long)n);
        return NULL;
    }
    TSP_NOGIL(r = f(x, n, (int)dim, norm));
    return tsp_wrap(r);
}

typedef ts_tensor *(*fftn_fn)(ts_tensor *, const int64_t *, int, ts_dims, ts_fft_norm);
/* fn(input, s=None, dim=None, norm=None); two_d: dim defaults to (-2, -1) */
static PyObject *fftn(PyObject *const *args, Py_ssize_t nargs, PyObject *kw, const char *fn,
                      fftn_fn f, bool two_d) {
    static const char *const names[] = {"input", "s", "dim", "norm"};
    PyObject *a[4] = {0};
    if (tsp_parse(args, nargs, kw, fn, names, 4, 1, a) < 0) return NULL;
    ts_tensor *x = tsp_tensor_arg(a[0], fn, "input"), *r;
    ts_fft_norm norm;
    if (!x || norm_arg(a[3], &norm, fn) < 0) return NULL;
    int64_t s[TS_MAX_DIMS];
    int ns = 0;
    if (a[1] && a[1] != Py_None) {
        ts_dims sd;
        if (tsp_dims_arg(a[1], &sd, fn, "s") < 0) return NULL;
        for (int i = 0; i < sd.n; i++) s[i] = sd.d[i];
        ns = sd.n;
    }
    ts_dims dims = {0};
    if (a[2] && a[2] != Py_None) {
        if (tsp_dims_arg(a[2], &dims, fn, "dim") < 0) return NULL;
        if (dims.n == 0) {
            PyErr_Format(PyExc_RuntimeError, "%s(): must have at least one dim to transform", fn);
            return NULL;
        }
    } else if (two_d) {
        dims = TS_DIMS(-2, -1);
    }
    if (tsp_enter()) return NULL;
    TSP_NOGIL(r = f(x, ns ? s : NULL, ns, dims, norm));
    return tsp_wrap(r);
}

#define FFT1_LIST(X) X(fft) X(ifft) X(rfft) X(irfft) X(hfft) X(ihfft)
#define DEF_FFT1(name)                                                                             \
    static PyObject *f__fft_##name(PyObject *mod, PyObject *const *a, Py_ssize_t n,                \
                                   PyObject *kw) {                                                 \
        (void)mod;                                                                                 \
        return fft1(a, n, kw, #name, ts_fft_##name);                                               \
    }
FFT1_LIST(DEF_FFT1)
#define FFTN_LIST(X)                                                                               \
    X(fftn, fftn, false)                                                                           \
    X(ifftn, ifftn, false)                                                                         \
    X(rfftn, rfftn, false)                                                                         \
    X(irfftn, irfftn, false)                                                                       \
    X(fft2, fftn, true)                                                                            \
    X(ifft2, ifftn, true)                                                                          \
    X(rfft2, rfftn, true)                                                                          \
    X(irfft2, irfftn, true)                                                                        \
    X(hfftn, hfftn, false)                                                                         \
    X(ihfftn, ihfftn, false)                                                                       \
    X(hfft2, hfftn, true)                                                                          \
    X(ihfft2, ihfftn, true)
#define DEF_FFTN(name, cname, two_d)                                                               \
    static PyObject *f__fft_##name(PyObject *mod, PyObject *const *a, Py_ssize_t n,                \
                                   PyObject *kw) {                                                 \
        (void)mod;                                                                                 \
        return fftn(a, n, kw, #name, ts_fft_##cname, two_d);                                       \
    }
FFTN_LIST(DEF_FFTN)

/* fftfreq(n, d=1.0, *, dtype=None, device=None, requires_grad=False) */
static PyObject *freq(PyObject *const *args, Py_ssize_t nargs, PyObject *kw, const char *fn,
                      ts_tensor *(*f)(int64_t, double, ts_opts)) {
    static const char *const names[] = {"n",      "d",         "dtype", "device", "requires_grad",
                                        "layout", "pin_memory"};
    PyObject *a[7] = {0};
    if (tsp_parse(args, nargs, kw, fn, names, 7, 1, a) < 0) return NULL;
    int64_t n;
    double d;
    ts_opts o;
    if (tsp_int_arg(a[0], &n, fn, "n") < 0 || tsp_double_arg(a[1], 1.0, &d, fn, "d") < 0 ||
        tsp_opts_args(a[2], a[3], a[4], a[6], &o, fn) < 0)
        return NULL;
    ts_tensor *r;
    TSP_NOGIL(r = f(n, d, o));
    return tsp_wrap(r);
}
static PyObject *f__fft_fftfreq(PyObject *mod, PyObject *const *a, Py_ssize_t n, PyObject *kw) {
    (void)mod;
    return freq(a, n, kw, "fftfreq", ts_fft_fftfreq);
}
static PyObject *f__fft_rfftfreq(PyObject *mod, PyObject *const *a, Py_ssize_t n, PyObject *kw) {
    (void)mod;
    return freq(a, n, kw, "rfftfreq", ts_fft_rfftfreq);
}

/* fftshift(input, dim=None) */
static PyObject *shift(PyObject *const *args, Py_ssize_t nargs, PyObject *kw, const char *fn,
                       ts_tensor *(*f)(ts_tensor *, ts_dims)) {
    static const char *const names[] = {"input", "dim"};
    PyObject *a[2] = {0};
    if (tsp_parse(args, nargs, kw, fn, names, 2, 1, a) < 0) return NULL;
    ts_tensor *x = tsp_tensor_arg(a[0], fn, "input"), *r;
    ts_dims dims = {0};
    if (!x || (a[1] && a[1] != Py_None && tsp_dims_arg(a[1], &dims, fn, "dim") < 0) || tsp_enter())
        return NULL;
    TSP_NOGIL(r = f(x, dims));
    return tsp_wrap(r);
}
static PyObject *f__fft_fftshift(PyObject *mod, PyObject *const *a, Py_ssize_t n, PyObject *kw) {
    (void)mod;
    return shift(a, n, kw, "fftshift", ts_fft_fftshift);
}
static PyObject *f__fft_ifftshift(PyObject *mod, PyObject *const *a, Py_ssize_t n, PyObject *kw) {
    (void)mod;
    return shift(a, n, kw, "ifftshift", ts_fft_ifftshift);
}

/* ------------------------------------------------------------------ stft / istft */
/* an optional int (None: TS_STFT_DEFAULT) */
static int opt_len(PyObject *o, int64_t *out, const char *fn, const char *arg) {
    *out = TS_STFT_DEFAULT;
    return o && o != Py_None ? tsp_int_arg(o, out, fn, arg) : 0;
}
/* an optional bool as -1 (None or not given) / 0 / 1 */
static int opt_tri(PyObject *o, int *out, const char *fn, const char *arg) {
    bool b = false;
    *out = -1;
    if (!o || o == Py_None) return 0;
    if (tsp_bool_arg(o, false, &b, fn, arg) < 0) return -1;
    return *out = b, 0;
}
static int opt_window(PyObject *o, ts_tensor **out, const char *fn) {
    *out = NULL;
    if (!o || o == Py_None) return 0;
    return (*out = tsp_tensor_arg(o, fn, "window")) ? 0 : -1;
}
static int pad_mode_arg(PyObject *o, ts_pad_mode *out) {
    static const char *const modes[] = {"constant", "reflect", "replicate", "circular"};
    *out = TS_PAD_REFLECT;
    if (!o) return 0;
    const char *s = PyUnicode_Check(o) ? PyUnicode_AsUTF8(o) : NULL;
    for (int i = 0; s && i < 4; i++)
        if (!strcmp(s, modes[i])) return *out = (ts_pad_mode)i, 0;
    PyErr_Format(PyExc_NotImplementedError, "Unrecognised padding mode %S", o);
    return -1;
}

/* stft(input, n_fft, hop_length=None, win_length=None, window=None, center=True,
 *      pad_mode="reflect", normalized=False, onesided=None, return_complex=None,
 *      align_to_window=None) */
static PyObject *stft_call(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kw,
                           int unused) {
    (void)unused;
    static const char *const names[] = {
        "input",    "n_fft",      "hop_length", "win_length",     "window",         "center",
        "pad_mode", "normalized", "onesided",   "return_complex", "align_to_window"};
    const char *fn = "stft";
    PyObject *a[11] = {0};
    if (tsp_parse_input(self, args, nargs, kw, fn, names, 11, 1, a) < 0) return NULL;
    ts_tensor *x = tsp_tensor_arg(a[0], fn, "input"), *r;
    ts_stft_opts o = ts_stft_defaults();
    int64_t n_fft = 0;
    if (!x || tsp_int_arg(a[1], &n_fft, fn, "n_fft") < 0 ||
        opt_len(a[2], &o.hop_length, fn, "hop_length") < 0 ||
        opt_len(a[3], &o.win_length, fn, "win_length") < 0 || opt_window(a[4], &o.window, fn) < 0 ||
        tsp_bool_arg(a[5], true, &o.center, fn, "center") < 0 ||
        pad_mode_arg(a[6], &o.pad_mode) < 0 ||
        tsp_bool_arg(a[7], false, &o.normalized, fn, "normalized") < 0 ||
        opt_tri(a[8], &o.onesided, fn, "onesided") < 0 ||
        opt_tri(a[9], &o.return_complex, fn, "return_complex") < 0 ||
        opt_tri(a[10], &o.align_to_window, fn, "align_to_window") < 0 || tsp_enter())
        return NULL;
    TSP_NOGIL(r = ts_stft(x, n_fft, &o));
    return tsp_wrap(r);
}
TSP_METHOD_AND_FUNCTION(stft, stft_call, 0)

/* istft(input, n_fft, hop_length=None, win_length=None, window=None, center=True,
 *       normalized=False, onesided=None, length=None, return_complex=False) */
static PyObject *istft_call(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kw,
                            int unused) {
    (void)unused;
    static const char *const names[] = {"input",  "n_fft",         "hop_length", "win_length",
                                        "window", "center",        "normalized", "onesided",
                                        "length", "return_complex"};
    const char *fn = "istft";
    PyObject *a[10] = {0};
    if (tsp_parse_input(self, args, nargs, kw, fn, names, 10, 1, a) < 0) return NULL;
    ts_tensor *x = tsp_tensor_arg(a[0], fn, "input"), *r;
    ts_stft_opts o = ts_stft_defaults();
    int64_t n_fft = 0;
    bool rc = false;
    if (!x || tsp_int_arg(a[1], &n_fft, fn, "n_fft") < 0 ||
        opt_len(a[2], &o.hop_length, fn, "hop_length") < 0 ||
        opt_len(a[3], &o.win_length, fn, "win_length") < 0 || opt_window(a[4], &o.window, fn) < 0 ||
        tsp_bool_arg(a[5], true, &o.center, fn, "center") < 0 ||
        tsp_bool_arg(a[6], false, &o.normalized, fn, "normalized") < 0 ||
        opt_tri(a[7], &o.onesided, fn, "onesided") < 0 ||
        opt_len(a[8], &o.length, fn, "length") < 0 ||
        tsp_bool_arg(a[9], false, &rc, fn, "return_complex") < 0 || tsp_enter())
        return NULL;
    o.return_complex = rc;
    TSP_NOGIL(r = ts_istft(x, n_fft, &o));
    return tsp_wrap(r);
}
TSP_METHOD_AND_FUNCTION(istft, istft_call, 0)

/* ------------------------------------------------------------------ tables */
#define M_UNARY(name, cfn) {#name, m_##name, METH_NOARGS, NULL},
#define F_UNARY(name, cfn) {#name, f_##name, METH_O, NULL},
#define F_FFT1(name)       {"_fft_" #name, FN(f__fft_##name), FAST, NULL},
#define F_FFTN(name, c, t) {"_fft_" #name, FN(f__fft_##name), FAST, NULL},

PyMethodDef tsp_tensor_complex_methods[] = {
    COMPLEX_UNARY_LIST(M_UNARY){"is_complex", m_is_complex, METH_NOARGS, NULL},
    {"is_conj", m_is_conj, METH_NOARGS, NULL},
    {"stft", FN(m_stft), FAST, NULL},
    {"istft", FN(m_istft), FAST, NULL},
    {NULL, NULL, 0, NULL},
};
PyMethodDef tsp_tensor_complex_functions[] = {
    COMPLEX_UNARY_LIST(F_UNARY){"real", f_real, METH_O, NULL},
    {"imag", f_imag, METH_O, NULL},
    {"is_complex", f_is_complex, METH_O, NULL},
    {"complex", FN(f_complex), FAST, "complex(real, imag)"},
    {"polar", FN(f_polar), FAST, "polar(abs, angle)"},
    FFT1_LIST(F_FFT1) FFTN_LIST(F_FFTN){"_fft_fftfreq", FN(f__fft_fftfreq), FAST, NULL},
    {"_fft_rfftfreq", FN(f__fft_rfftfreq), FAST, NULL},
    {"_fft_fftshift", FN(f__fft_fftshift), FAST, NULL},
    {"_fft_ifftshift", FN(f__fft_ifftshift), FAST, NULL},
    {"stft", FN(f_stft), FAST, "stft(input, n_fft, hop_length=None, win_length=None, ...)"},
    {"istft", FN(f_istft), FAST, "istft(input, n_fft, hop_length=None, win_length=None, ...)"},
    {NULL, NULL, 0, NULL},
};
PyGetSetDef tsp_tensor_complex_getset[] = {
    {"real", get_real, NULL, "the real parts (a view)", NULL},
    {"imag", get_imag, NULL, "the imaginary parts (a view)", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};
