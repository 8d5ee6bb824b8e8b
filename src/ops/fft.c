/* fft.c — torch.fft (include/tessera/fft.h): the one-dimensional transforms recorded as ops over
 * the backend's fft slot, their gradients (each the adjoint transform: PyTorch's
 * fft_c2c_backward, fft_r2c_backward, fft_c2r_backward), and the multi-dimensional forms, helpers
 * and shifts composed of them. Crops and zero-pads go through view_as_real so that their
 * gradients are real ops. */
#include <math.h>
#include <stdlib.h>

#include "autograd/autograd.h"
#include "tessera/complex.h"
#include "tessera/fft.h"

static ts_tensor *finish(ts_tensor *y) {
    y = ts_error() == TS_OK && y ? ts_keep(y) : NULL;
    ts_scope_end();
    return y;
}

/* the factor of one transform of length n in the given direction */
static double norm_scale(ts_fft_norm norm, bool forward, int64_t n) {
    if (norm == TS_FFT_NORM_ORTHO) return 1.0 / sqrt((double)n);
    bool scaled = forward ? norm == TS_FFT_NORM_FORWARD : norm == TS_FFT_NORM_BACKWARD;
    return scaled ? 1.0 / (double)n : 1.0;
}

static ts_tensor *transform(const char *op, ts_tensor *x, int dim, ts_fft_kind kind, bool forward,
                            int64_t n, double scale);

/* weights along dim for the half-spectrum gradients: w at bins 1 .. (n - 1) / 2, 1 elsewhere */
static ts_tensor *half_weights(ts_tensor *like, int dim, int64_t len, int64_t n, double w) {
    double *v = malloc(sizeof(double) * (size_t)len);
    if (!v) return tsi_error_set(TS_ERR_OOM, "fft: out of host memory"), NULL;
    for (int64_t k = 0; k < len; k++) v[k] = k >= 1 && 2 * k < n ? w : 1.0;
    ts_shape s = {.ndim = like->shape.ndim};
    for (int i = 0; i < s.ndim; i++) s.dims[i] = i == dim ? len : 1;
    ts_tensor *t = ts_from_data(s, TS_F64, v, (ts_opts){.device = tsi_device(like)});
    free(v);
    return ts_to_dtype(t, tsi_complex_part(like->dtype));
}

/* node: ip {dim, kind, forward, n}, p[0] scale */
static void transform_backward(ts_node *nd, ts_tensor *const *go, ts_tensor **gi) {
    if (!go[0]) return;
    const int dim = (int)nd->ip[0];
    const ts_fft_kind kind = (ts_fft_kind)nd->ip[1];
    const bool forward = nd->ip[2] != 0;
    const int64_t n = nd->ip[3];
    const double scale = nd->p[0];
    ts_tensor *g = go[0];
    switch (kind) {
    case TS_FFT_C2C: /* the adjoint of a DFT is the opposite DFT, same scale */
        gi[0] = transform(nd->op, g, dim, TS_FFT_C2C, !forward, n, scale);
        break;
    case TS_FFT_R2C: /* Re(sum_k g_k e^(+ijk)) over the half-spectrum: C2R of g, middle halved */
        gi[0] = transform(nd->op, ts_mul(g, half_weights(g, dim, g->shape.dims[dim], n, 0.5)), dim,
                          TS_FFT_C2R, false, n, scale);
        break;
    default: /* C2R: the R2C of g, middle bins doubled (they stand for two bins each) */
        if (!tsi_is_float(g->dtype)) g = ts_real(g);
        {
            ts_tensor *r = transform(nd->op, g, dim, TS_FFT_R2C, true, n, scale);
            if (r) gi[0] = ts_mul(r, half_weights(r, dim, r->shape.dims[dim], n, 2.0));
        }
        break;
    }
}

/* One recorded transform; x already has its transform's length along dim (C2C: n complex; R2C:
 * n real; C2R: n / 2 + 1 complex). */
static ts_tensor *transform(const char *op, ts_tensor *x, int dim, ts_fft_kind kind, bool forward,
                            int64_t n, double scale) {
    if (!x) return NULL;
    const ts_dtype dt = kind == TS_FFT_C2C   ? x->dtype
                        : kind == TS_FFT_R2C ? tsi_complex_of(x->dtype)
                                             : tsi_complex_part(x->dtype);
    ts_shape s = x->shape;
    s.dims[dim] = kind == TS_FFT_R2C ? n / 2 + 1 : n;
    const ts_backend *be = tsi_be(x);
    if (!be->fft)
        return tsi_error_set(TS_ERR_UNSUPPORTED, "%s: no FFT kernel on %s", op,
                             ts_device_str(tsi_device(x))),
               NULL;
    ts_tensor *y = tsi_new(op, s, dt, tsi_device(x));
    if (!y) return NULL;
    if (tsi_numel(s) > 0 && tsi_numel(x->shape) > 0) {
        ts_kview ko = tsi_kview(y), kx = tsi_kview(x);
        if (!be->fft(be, tsi_dev_index(x), &ko, &kx, dim, kind, forward, scale)) {
            ts_release(y);
            return tsi_error_set(TS_ERR_OOM, "%s: out of memory for the transform's scratch", op),
                   NULL;
        }
    }
    if (tsi_needs_graph(&x, 1)) {
        ts_node *nd = tsi_record("FftBackward0", op, transform_backward, &x, 1, y, NULL, 0);
        if (nd) {
            nd->ip[0] = dim, nd->ip[1] = kind, nd->ip[2] = forward, nd->ip[3] = n;
            nd->p[0] = scale;
            nd->flags |= TSI_NODE_TWICE; /* the adjoint transform, recorded: linear in g */
        }
    }
    return tsi_own(y);
}

/* x cropped or zero-padded to len along dim (complex through its real view) */
static ts_tensor *resize(ts_tensor *x, int dim, int64_t len) {
    if (!x || x->shape.dims[dim] == len) return x;
    const bool cx = tsi_is_complex(x->dtype);
    ts_tensor *v = cx ? ts_view_as_real(x) : x;
    if (!v) return NULL;
    const int64_t have = v->shape.dims[dim];
    if (len < have) {
        v = ts_narrow(v, dim, 0, len);
    } else {
        ts_shape zs = v->shape;
        zs.dims[dim] = len - have;
        ts_tensor *z = ts_zeros(zs, (ts_opts){.dtype = v->dtype, .device = tsi_device(v)});
        v = ts_cat((ts_tensor *[]){v, z}, 2, dim);
    }
    return cx ? ts_view_as_complex(ts_contiguous(v)) : v;
}

/* the input as the transform takes it: complex (want_complex) or real float */
static ts_tensor *as_input(const char *op, ts_tensor *x, bool want_complex) {
    if (!tsi_check_input(op, x, "input")) return NULL;
    const ts_dtype d = x->dtype;
    if (d == TS_F16 || d == TS_BF16)
        return tsi_error_set(TS_ERR_DTYPE, "%s: Unsupported dtype %s (input: %s)", op,
                             tsi_torch_scalar_name(d), tsi_desc(x)),
               NULL;
    if (!want_complex && tsi_is_complex(d))
        return tsi_error_set(TS_ERR_DTYPE, "%s: expects a real input tensor, but got %s", op,
                             tsi_torch_scalar_name(d)),
               NULL;
    if (!tsi_is_complex(d) && !tsi_is_float(d)) x = ts_to_dtype(x, TS_F32);
    if (want_complex && x && !tsi_is_complex(x->dtype))
        x = ts_to_dtype(x, tsi_complex_of(x->dtype));
    return x;
}

static bool check_n(const char *op, int64_t n) {
    if (n >= 1) return true;
    return tsi_error_set(TS_ERR_ARG, "%s: Invalid number of data points (%lld) specified", op,
                         (long long)n),
           false;
}

/* ------------------------------------------------------------------ one dimension */
static ts_tensor *c2c(const char *op, ts_tensor *x, int64_t n, int dim, ts_fft_norm norm,
                      bool forward) {
    x = as_input(op, x, true);
    if (!x) return NULL;
    int d = tsi_wrap_dim(op, dim, x->shape.ndim);
    if (d < 0) return NULL;
    if (n == -1) n = x->shape.dims[d];
    if (!check_n(op, n)) return NULL;
    return transform(op, resize(x, d, n), d, TS_FFT_C2C, forward, n, norm_scale(norm, forward, n));
}

static ts_tensor *r2c(const char *op, ts_tensor *x, int64_t n, int dim, ts_fft_norm norm) {
    x = as_input(op, x, false);
    if (!x) return NULL;
    int d = tsi_wrap_dim(op, dim, x->shape.ndim);
    if (d < 0) return NULL;
    if (n == -1) n = x->shape.dims[d];
    if (!check_n(op, n)) return NULL;
    return transform(op, resize(x, d, n), d, TS_FFT_R2C, true, n, norm_scale(norm, true, n));
}

static ts_tensor *c2r(const char *op, ts_tensor *x, int64_t n, int dim, ts_fft_norm norm) {
    x = as_input(op, x, true);
    if (!x) return NULL;
    int d = tsi_wrap_dim(op, dim, x->shape.ndim);
    if (d < 0) return NULL;
    if (n == -1) n = 2 * (x->shape.dims[d] - 1);
    if (!check_n(op, n)) return NULL;
    return transform(op, resize(x, d, n / 2 + 1), d, TS_FFT_C2R, false, n,
                     norm_scale(norm, false, n));
}

static ts_fft_norm swapped(ts_fft_norm norm) {
    return norm == TS_FFT_NORM_BACKWARD  ? TS_FFT_NORM_FORWARD
           : norm == TS_FFT_NORM_FORWARD ? TS_FFT_NORM_BACKWARD
                                         : norm;
}

ts_tensor *ts_fft_fft(ts_tensor *x, int64_t n, int dim, ts_fft_norm norm) {
    tsi_init();
    ts_scope_begin();
    return finish(c2c("fft_fft", x, n, dim, norm, true));
}
ts_tensor *ts_fft_ifft(ts_tensor *x, int64_t n, int dim, ts_fft_norm norm) {
    tsi_init();
    ts_scope_begin();
    return finish(c2c("fft_ifft", x, n, dim, norm, false));
}
ts_tensor *ts_fft_rfft(ts_tensor *x, int64_t n, int dim, ts_fft_norm norm) {
    tsi_init();
    ts_scope_begin();
    return finish(r2c("fft_rfft", x, n, dim, norm));
}
ts_tensor *ts_fft_irfft(ts_tensor *x, int64_t n, int dim, ts_fft_norm norm) {
    tsi_init();
    ts_scope_begin();
    return finish(c2r("fft_irfft", x, n, dim, norm));
}
ts_tensor *ts_fft_hfft(ts_tensor *x, int64_t n, int dim, ts_fft_norm norm) {
    tsi_init();
    ts_scope_begin();
    ts_tensor *c = as_input("fft_hfft", x, true);
    return finish(c ? c2r("fft_hfft", ts_conj(c), n, dim, swapped(norm)) : NULL);
}
ts_tensor *ts_fft_ihfft(ts_tensor *x, int64_t n, int dim, ts_fft_norm norm) {
    tsi_init();
    ts_scope_begin();
    return finish(ts_conj(r2c("fft_ihfft", x, n, dim, swapped(norm))));
}

/* ------------------------------------------------------------------ several dimensions */
typedef struct fft_plan_dims {
    int n;
    int dim[TS_MAX_DIMS];
    int64_t size[TS_MAX_DIMS]; /* -1: the transform's default */
} fft_plan_dims;

static bool plan_dims(const char *op, const ts_tensor *x, const int64_t *s, int ns, ts_dims dims,
                      fft_plan_dims *p) {
    const int nd = x->shape.ndim;
    if (ns < 0 || ns > nd || (ns > 0 && !s) || dims.n < 0 || dims.n > nd ||
        (ns > 0 && dims.n > 0 && ns != dims.n))
        return tsi_error_set(TS_ERR_ARG,
                             "%s: When given, dim and shape arguments must have the same length "
                             "and at most the input's %d dims (s: %d, dim: %d)",
                             op, nd, ns, dims.n),
               false;
    p->n = dims.n ? dims.n : ns ? ns : nd;
    for (int i = 0; i < p->n; i++) {
        int d = dims.n ? tsi_wrap_dim(op, dims.d[i], nd) : nd - p->n + i;
        if (d < 0) return false;
        for (int j = 0; j < i; j++)
            if (p->dim[j] == d)
                return tsi_error_set(TS_ERR_ARG, "%s: dims must be unique (dim %d twice)", op, d),
                       false;
        p->dim[i] = d;
        p->size[i] = ns ? s[i] : -1;
    }
    if (p->n == 0)
        return tsi_error_set(TS_ERR_ARG, "%s: the input has no dims to transform", op), false;
    return true;
}

static ts_tensor *c2c_n(const char *op, ts_tensor *x, const int64_t *s, int ns, ts_dims dims,
                        ts_fft_norm norm, bool forward) {
    tsi_init();
    if (!tsi_check_input(op, x, "input")) return NULL;
    fft_plan_dims p;
    if (!plan_dims(op, x, s, ns, dims, &p)) return NULL;
    ts_scope_begin();
    for (int i = 0; i < p.n && x; i++) x = c2c(op, x, p.size[i], p.dim[i], norm, forward);
    return finish(x);
}

ts_tensor *ts_fft_fftn(ts_tensor *x, const int64_t *s, int ns, ts_dims dims, ts_fft_norm norm) {
    return c2c_n("fft_fftn", x, s, ns, dims, norm, true);
}
ts_tensor *ts_fft_ifftn(ts_tensor *x, const int64_t *s, int ns, ts_dims dims, ts_fft_norm norm) {
    return c2c_n("fft_ifftn", x, s, ns, dims, norm, false);
}

ts_tensor *ts_fft_rfftn(ts_tensor *x, const int64_t *s, int ns, ts_dims dims, ts_fft_norm norm) {
    const char *op = "fft_rfftn";
    tsi_init();
    if (!tsi_check_input(op, x, "input")) return NULL;
    fft_plan_dims p;
    if (!plan_dims(op, x, s, ns, dims, &p)) return NULL;
    ts_scope_begin();
    /* every size first (a real crop or pad), then the last dim's R2C, then C2C on the rest */
    ts_tensor *y = r2c(op, x, p.size[p.n - 1], p.dim[p.n - 1], norm);
    for (int i = 0; i < p.n - 1 && y; i++) y = c2c(op, y, p.size[i], p.dim[i], norm, true);
    return finish(y);
}

ts_tensor *ts_fft_irfftn(ts_tensor *x, const int64_t *s, int ns, ts_dims dims, ts_fft_norm norm) {
    const char *op = "fft_irfftn";
    tsi_init();
    if (!tsi_check_input(op, x, "input")) return NULL;
    fft_plan_dims p;
    if (!plan_dims(op, x, s, ns, dims, &p)) return NULL;
    ts_scope_begin();
    ts_tensor *y = x;
    for (int i = 0; i < p.n - 1 && y; i++) y = c2c(op, y, p.size[i], p.dim[i], norm, false);
    return finish(y ? c2r(op, y, p.size[p.n - 1], p.dim[p.n - 1], norm) : NULL);
}

ts_tensor *ts_fft_hfftn(ts_tensor *x, const int64_t *s, int ns, ts_dims dims, ts_fft_norm norm) {
    tsi_init();
    ts_scope_begin();
    ts_tensor *c = as_input("fft_hfftn", x, true);
    return finish(c ? ts_fft_irfftn(ts_conj(c), s, ns, dims, swapped(norm)) : NULL);
}
ts_tensor *ts_fft_ihfftn(ts_tensor *x, const int64_t *s, int ns, ts_dims dims, ts_fft_norm norm) {
    tsi_init();
    ts_scope_begin();
    return finish(ts_conj(ts_fft_rfftn(x, s, ns, dims, swapped(norm))));
}

/* ------------------------------------------------------------------ frequencies and shifts */
static ts_tensor *freqs(const char *op, int64_t n, double d, ts_opts o, bool half) {
    tsi_init();
    ts_dtype dt = tsi_resolve_dtype(o.dtype);
    if (!tsi_is_float(dt))
        return tsi_error_set(TS_ERR_DTYPE, "%s: dtype must be a floating point type, got %s", op,
                             ts_dtype_name(dt)),
               NULL;
    if (n < 0 || n > (int64_t)1 << 40)
        return tsi_error_set(TS_ERR_ARG, "%s: n must be non-negative, got %lld", op, (long long)n),
               NULL;
    const int64_t len = half ? n / 2 + 1 : n;
    double *v = malloc(sizeof(double) * (size_t)(len ? len : 1));
    if (!v) return tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op), NULL;
    for (int64_t k = 0; k < len; k++) {
        int64_t f = half || 2 * k < n ? k : k - n; /* [0, 1, ..., (n-1)/2, -(n/2), ..., -1] */
        v[k] = (double)f / (d * (double)n);
    }
    ts_scope_begin();
    ts_tensor *t = ts_from_data((ts_shape){.ndim = 1, .dims = {len}}, TS_F64, v,
                                (ts_opts){.device = o.device});
    free(v);
    t = ts_to_dtype(t, dt);
    if (t && o.requires_grad) ts_set_requires_grad(t, true);
    return finish(t);
}

ts_tensor *ts_fft_fftfreq(int64_t n, double d, ts_opts o) {
    return freqs("fft_fftfreq", n, d, o, false);
}
ts_tensor *ts_fft_rfftfreq(int64_t n, double d, ts_opts o) {
    return freqs("fft_rfftfreq", n, d, o, true);
}

static ts_tensor *shift(const char *op, ts_tensor *x, ts_dims dims, bool inverse) {
    tsi_init();
    if (!tsi_check_input(op, x, "input")) return NULL;
    const int nd = x->shape.ndim;
    ts_dims rd = {0};
    int64_t sh[TS_MAX_DIMS];
    for (int i = 0; i < (dims.n ? dims.n : nd); i++) {
        int d = dims.n ? tsi_wrap_dim(op, dims.d[i], nd) : i;
        if (d < 0) return NULL;
        const int64_t len = x->shape.dims[d];
        sh[rd.n] = inverse ? -(len / 2) : len / 2;
        rd.d[rd.n++] = d;
    }
    ts_scope_begin();
    if (rd.n == 0) return finish(ts_clone(x));
    if (!tsi_is_complex(x->dtype)) return finish(ts_roll(x, sh, rd.n, rd));
    ts_tensor *v = ts_roll(ts_view_as_real(x), sh, rd.n, rd);
    return finish(ts_view_as_complex(ts_contiguous(v)));
}

ts_tensor *ts_fft_fftshift(ts_tensor *x, ts_dims dims) {
    return shift("fft_fftshift", x, dims, false);
}
ts_tensor *ts_fft_ifftshift(ts_tensor *x, ts_dims dims) {
    return shift("fft_ifftshift", x, dims, true);
}
