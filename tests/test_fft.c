/* test_fft.c — the FFT front ends (include/tessera/fft.h, src/ops/fft.c) on every device against
 * DFTs summed here in long double: fft / ifft / rfft / irfft / hfft / ihfft with n cropping and
 * padding, every norm, a dim that is not the last, the n-d forms against 1-d transforms applied
 * in turn, fftfreq / rfftfreq / fftshift / ifftshift, ts_gradcheck of each transform through a
 * real wrapper (each gradient is the adjoint transform), and the refusals. The kernels themselves:
 * tests/test_fft_kernel.c. */
#include <complex.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "tessera.h"
#include "tessera/autograd.h"
#include "tessera/complex.h"
#include "tessera/fft.h"
#include "tessera/graph.h"
#include "ts_test.h"

static ts_device devs[TS_TEST_MAX_DEVICES];
static int ndev;

#define MAXN 64
static const long double PI_L = 3.141592653589793238462643383279502884L;

/* out[k] = scale * sum_j in[j] e^(-+2 pi i j k / n) over j < len (zero past it), k < nout */
static void dft(const double complex *in, int len, int n, bool forward, double scale,
                double complex *out, int nout) {
    for (int k = 0; k < nout; k++) {
        long double re = 0, im = 0;
        for (int j = 0; j < len && j < n; j++) {
            long double a = (forward ? -2 : 2) * PI_L * (long double)((long)j * k % n) / n;
            long double c = cosl(a), s = sinl(a);
            re += creal(in[j]) * c - cimag(in[j]) * s;
            im += creal(in[j]) * s + cimag(in[j]) * c;
        }
        out[k] = scale * (double)re + I * scale * (double)im;
    }
}

static void fill(double complex *v, int n, int seed) {
    for (int i = 0; i < n; i++)
        v[i] = 2 * sin(0.77 * (i + 1) + seed) + I * 1.5 * cos(0.31 * (i + 3) * seed + 1);
}

static ts_tensor *mkc(ts_shape s, const double complex *v, ts_dtype dt, ts_device d) {
    ts_shape rs = s;
    rs.dims[rs.ndim++] = 2;
    ts_tensor *r = ts_tensor_f64(rs, (const double *)v, (ts_opts){0});
    return ts_to(ts_to_dtype(ts_view_as_complex(r), dt), d);
}

/* every element of t (complex or real) against ref: |got - ref| <= tol * (1 + max|ref|) */
static void check(const char *what, ts_tensor *t, const double complex *ref, int64_t n,
                  double tol) {
    double complex got[4 * MAXN];
    bool ok = t && ts_numel(t) == n && n <= 4 * MAXN;
    if (ok) {
        ts_tensor *c = ts_contiguous(ts_view_as_real(ts_to_dtype(ts_to(t, ts_cpu()), TS_C128)));
        ok = c && ts_copy_to_host(c, got, (size_t)n * sizeof(double complex)) == TS_OK;
    }
    double big = 0;
    for (int64_t i = 0; i < n; i++) big = fmax(big, cabs(ref[i]));
    int64_t at = -1;
    for (int64_t i = 0; ok && i < n; i++)
        if (!(cabs(got[i] - ref[i]) <= tol * (1 + big))) ok = false, at = i;
    ts_test_record(ok);
    if (!ok)
        ts_test_failf(__FILE__, __LINE__, "%s: element %lld: %g%+gi vs %g%+gi%s", what,
                      (long long)at, at >= 0 ? creal(got[at]) : 0.0, at >= 0 ? cimag(got[at]) : 0.0,
                      at >= 0 ? creal(ref[at]) : 0.0, at >= 0 ? cimag(ref[at]) : 0.0,
                      ts_test_error_str());
    ts_error_clear();
}

static double scale_of(ts_fft_norm norm, bool forward, int n) {
    if (norm == TS_FFT_NORM_ORTHO) return 1 / sqrt(n);
    return (forward ? norm == TS_FFT_NORM_FORWARD : norm == TS_FFT_NORM_BACKWARD) ? 1.0 / n : 1.0;
}

/* transforms of length n add ~log2(n) roundings of values ~ max|x| sqrt(n): well inside these */
static double tol_of(ts_dtype dt) { return dt == TS_C64 || dt == TS_F32 ? 2e-6 : 1e-13; }

/* ------------------------------------------------------------------ one dimension */
static void test_1d(void) {
    const int lens[] = {1, 2, 5, 8, 12, 17, 32};
    const ts_fft_norm norms[] = {TS_FFT_NORM_BACKWARD, TS_FFT_NORM_FORWARD, TS_FFT_NORM_ORTHO};
    double complex x[MAXN], ref[MAXN], xr[MAXN], tmp[MAXN];
    char what[128];
    for (int di = 0; di < ndev; di++)
        for (int k = 0; k < 2; k++) {
            const ts_dtype dt = k ? TS_C128 : TS_C64, rdt = k ? TS_F64 : TS_F32;
            const double tol = tol_of(dt);
            for (size_t li = 0; li < sizeof lens / sizeof *lens; li++) {
                const int len = lens[li];
                fill(x, len, (int)li + 1);
                for (int i = 0; i < len; i++) /* the values the dtype holds */
                    x[i] = k ? x[i] : (float)creal(x[i]) + I * (float)cimag(x[i]);
                for (int i = 0; i < len; i++) xr[i] = creal(x[i]);
                ts_scope_begin();
                ts_tensor *tx = mkc(TS_SHAPE(len), x, dt, devs[di]);
                ts_tensor *tr = ts_real(tx);
                for (int q = 0; q < 3; q++)
                    for (int m = 0; m < 3; m++) {
                        const int n = m == 0 ? len : m == 1 ? len + 3 : (len > 2 ? len - 2 : 1);
                        const int64_t na = m == 0 ? -1 : n; /* -1: the input's size */
                        const ts_fft_norm nm = norms[q];
                        snprintf(what, sizeof what, "len %d n %d norm %d %s on %s", len, n, q,
                                 ts_dtype_name(dt), ts_device_str(devs[di]));
                        dft(x, len, n, true, scale_of(nm, true, n), ref, n);
                        check(what, ts_fft_fft(tx, na, 0, nm), ref, n, tol);
                        dft(x, len, n, false, scale_of(nm, false, n), ref, n);
                        check(what, ts_fft_ifft(tx, na, -1, nm), ref, n, tol);
                        dft(xr, len, n, true, scale_of(nm, true, n), ref, n / 2 + 1);
                        ts_tensor *rf = ts_fft_rfft(tr, na, 0, nm);
                        CHECK(rf && ts_dtype_of(rf) == dt);
                        check(what, rf, ref, n / 2 + 1, tol);
                        for (int i = 0; i < n / 2 + 1; i++) ref[i] = conj(ref[i]);
                        /* ihfft: conj(rfft) with the norm's directions swapped */
                        dft(xr, len, n, true, scale_of(nm, false, n), tmp, n / 2 + 1);
                        for (int i = 0; i < n / 2 + 1; i++) tmp[i] = conj(tmp[i]);
                        check(what, ts_fft_ihfft(tr, na, 0, nm), tmp, n / 2 + 1, tol);
                        /* irfft: the Hermitian extension of the first n / 2 + 1 bins (imaginary
                         * parts of bin 0 and n / 2 dropped), inverse */
                        double complex h[2 * MAXN] = {0};
                        for (int i = 0; i < n; i++) {
                            int src = i <= n / 2 ? i : n - i;
                            double complex v = src < len ? x[src] : 0;
                            if (src == 0 || 2 * src == n) v = creal(v);
                            h[i] = i <= n / 2 ? v : conj(v);
                        }
                        dft(h, n, n, false, scale_of(nm, false, n), ref, n);
                        for (int i = 0; i < n; i++) ref[i] = creal(ref[i]);
                        ts_tensor *ir = ts_fft_irfft(tx, na == -1 ? -1 : n, 0, nm);
                        if (na == -1) { /* default n: 2 (len - 1) */
                            if (len > 1) CHECK(ir && ts_size(ir, 0) == 2 * (len - 1));
                        } else {
                            CHECK(ir && ts_dtype_of(ir) == rdt);
                            check(what, ir, ref, n, tol);
                        }
                        ts_error_clear();
                    }
                ts_scope_end();
            }
        }
    CHECK_OK();
}

/* a dim that is not the last, the n-d forms, and the helpers */
static void test_nd_helpers(void) {
    double complex x[24], ref[24], col[4], out[4];
    fill(x, 24, 9);
    for (int di = 0; di < ndev; di++) {
        ts_scope_begin();
        ts_tensor *t = mkc(TS_SHAPE(4, 6), x, TS_C128, devs[di]);
        /* along dim 0: each column */
        for (int c = 0; c < 6; c++) {
            for (int r = 0; r < 4; r++) col[r] = x[r * 6 + c];
            dft(col, 4, 4, true, 1, out, 4);
            for (int r = 0; r < 4; r++) ref[r * 6 + c] = out[r];
        }
        ts_tensor *f0 = ts_fft_fft(t, -1, 0, TS_FFT_NORM_BACKWARD);
        check("fft dim 0", f0, ref, 24, 1e-13);
        /* fft2 = fft over dim 0 of fft over dim 1; ifftn undoes it */
        ts_tensor *f2 = ts_fft_fftn(t, NULL, 0, TS_DIMS(-2, -1), TS_FFT_NORM_BACKWARD);
        ts_tensor *want = ts_fft_fft(ts_fft_fft(t, -1, 1, 0), -1, 0, 0);
        double complex w[24];
        CHECK(ts_copy_to_host(ts_contiguous(ts_view_as_real(want)), w, sizeof w) == TS_OK);
        check("fft2", f2, w, 24, 1e-13);
        check("ifftn(fftn)", ts_fft_ifftn(f2, NULL, 0, (ts_dims){0}, 0), x, 24, 1e-13);
        /* rfftn then irfftn with the sizes: the real input back */
        ts_tensor *r = ts_real(t);
        ts_tensor *rr = ts_fft_rfftn(r, NULL, 0, (ts_dims){0}, TS_FFT_NORM_ORTHO);
        CHECK(rr && ts_size(rr, 0) == 4 && ts_size(rr, 1) == 4);
        double complex xre[24];
        for (int i = 0; i < 24; i++) xre[i] = creal(x[i]);
        check("irfftn(rfftn)", ts_fft_irfftn(rr, (int64_t[]){4, 6}, 2, (ts_dims){0}, 2), xre, 24,
              1e-13);
        /* hfftn(ihfftn(x)) is x for a real x */
        check("hfftn(ihfftn)",
              ts_fft_hfftn(ts_fft_ihfftn(r, NULL, 0, (ts_dims){0}, 0), (int64_t[]){4, 6}, 2,
                           (ts_dims){0}, 0),
              xre, 24, 1e-13);
        /* frequencies: [0, 1, 2, -2, -1] / (d n) and [0, 1, 2] / (d n) */
        const double d = 0.25;
        double complex fq[5] = {0, 1 / (d * 5), 2 / (d * 5), -2 / (d * 5), -1 / (d * 5)};
        check("fftfreq", ts_fft_fftfreq(5, d, (ts_opts){.dtype = TS_F64, .device = devs[di]}), fq,
              5, 1e-15);
        check("rfftfreq", ts_fft_rfftfreq(5, d, (ts_opts){.dtype = TS_F64, .device = devs[di]}), fq,
              3, 1e-15);
        /* fftshift moves index 0 to n / 2; ifftshift undoes it */
        double complex sh[24];
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 6; j++) sh[((i + 2) % 4) * 6 + (j + 3) % 6] = x[i * 6 + j];
        ts_tensor *s = ts_fft_fftshift(t, (ts_dims){0});
        check("fftshift", s, sh, 24, 0);
        check("ifftshift", ts_fft_ifftshift(s, (ts_dims){0}), x, 24, 0);
        ts_scope_end();
    }
    CHECK_OK();
}

/* ------------------------------------------------------------------ gradients */
typedef struct grad_case {
    int kind; /* 0 fft, 1 ifft, 2 rfft, 3 irfft, 4 hfft, 5 ihfft, 6 fft2 of a real input */
    int64_t n;
} grad_case;

/* a real loss of the transform: sum(w * view_as_real(y)) (or w * y for a real y) */
static ts_tensor *grad_fn(ts_tensor *const *in, int n_in, void *ctx) {
    (void)n_in;
    const grad_case *g = ctx;
    ts_tensor *x = in[0];
    bool real_in = g->kind == 2 || g->kind == 5 || g->kind == 6;
    ts_tensor *z = real_in ? x : ts_view_as_complex(x);
    ts_tensor *y = g->kind == 0   ? ts_fft_fft(z, g->n, -1, TS_FFT_NORM_BACKWARD)
                   : g->kind == 1 ? ts_fft_ifft(z, g->n, -1, TS_FFT_NORM_ORTHO)
                   : g->kind == 2 ? ts_fft_rfft(z, g->n, -1, TS_FFT_NORM_FORWARD)
                   : g->kind == 3 ? ts_fft_irfft(z, g->n, -1, TS_FFT_NORM_BACKWARD)
                   : g->kind == 4 ? ts_fft_hfft(z, g->n, -1, TS_FFT_NORM_BACKWARD)
                   : g->kind == 5 ? ts_fft_ihfft(z, g->n, -1, TS_FFT_NORM_BACKWARD)
                                  : ts_fft_fftn(z, NULL, 0, TS_DIMS(0, 1), TS_FFT_NORM_BACKWARD);
    if (!y) return NULL;
    ts_tensor *yr = ts_dtype_is_complex(ts_dtype_of(y)) ? ts_view_as_real(y) : y;
    ts_tensor *w = ts_cos(
        ts_mul_scalar(ts_reshape(ts_arange(0, (double)ts_numel(yr), 1,
                                           (ts_opts){.dtype = TS_F64, .device = ts_device_of(yr)}),
                                 ts_shape_of(yr)),
                      0.7));
    return ts_sum(ts_mul(yr, w));
}

static void test_grads(void) {
    const grad_case cases[] = {{0, -1}, {0, 9}, {1, 5}, {2, -1}, {2, 4},
                               {3, -1}, {3, 9}, {4, 8}, {5, 6},  {6, -1}};
    double v[3 * 7 * 2];
    for (int i = 0; i < 42; i++) v[i] = sin(1.3 * i + 0.4);
    for (int di = 0; di < ndev; di++)
        for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
            ts_scope_begin();
            const grad_case *g = &cases[c];
            bool real_in = g->kind == 2 || g->kind == 5 || g->kind == 6;
            ts_shape s = real_in ? TS_SHAPE(3, 7) : TS_SHAPE(3, 7, 2);
            ts_tensor *x = ts_to(ts_tensor_f64(s, v, (ts_opts){0}), devs[di]);
            ts_set_requires_grad(x, true);
            bool ok = ts_gradcheck(grad_fn, (void *)g, &x, 1, (ts_gradcheck_opts){0});
            if (!ok)
                printf("gradcheck failed: kind %d n %lld on %s\n", g->kind, (long long)g->n,
                       ts_device_str(devs[di]));
            CHECK(ok);
            ts_scope_end();
        }
    CHECK_OK();
}

/* ------------------------------------------------------------------ a captured step */
/* rfft then irfft captured, the input changed, replayed: the transforms are recorded kernels
 * (src/core/capture_record.c), not run once at capture */
static void test_capture(void) {
    double complex x1[16], x2[16];
    fill(x1, 16, 3), fill(x2, 16, 4);
    for (int di = 0; di < ndev; di++) {
        const ts_device d = devs[di];
        ts_scope_begin();
        ts_tensor *X = ts_real(mkc(TS_SHAPE(2, 8), x1, TS_C128, d));
        X = ts_contiguous(X);
        ts_tensor *F = ts_fft_rfft(X, -1, -1, 0), *Y = ts_fft_irfft(F, 8, -1, 0); /* warm-up */
        ts_graph *g = ts_graph_capture_begin(d, (ts_graph_opts){0});
        F = ts_fft_rfft(X, -1, -1, 0);
        Y = ts_fft_irfft(ts_mul_scalar(F, 2.0), 8, -1, 0);
        CHECK(g && ts_graph_capture_end() == TS_OK && ts_graph_kernel_count(g) >= 2);
        ts_copy_(X, ts_real(mkc(TS_SHAPE(2, 8), x2, TS_C128, d)));
        CHECK(ts_graph_replay(g) == TS_OK);
        double complex want[16];
        for (int i = 0; i < 16; i++) want[i] = 2 * creal(x2[i]);
        check("rfft / irfft replayed", Y, want, 16, 1e-13);
        ts_graph_free(g);
        ts_scope_end();
        CHECK_OK();
    }
}

/* ------------------------------------------------------------------ refusals */
static void test_errors(void) {
    ts_scope_begin();
    double complex x[4] = {1, 2, 3, 4};
    ts_tensor *z = mkc(TS_SHAPE(4), x, TS_C64, ts_cpu());
    CHECK(ts_fft_fft(z, 0, -1, 0) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "Invalid number of data points (0)");
    CHECK(ts_fft_irfft(mkc(TS_SHAPE(1), x, TS_C64, ts_cpu()), -1, -1, 0) == NULL);
    CHECK_ERR(TS_ERR_ARG); /* default n: 2 (1 - 1) = 0 */
    CHECK(ts_fft_rfft(z, -1, -1, 0) == NULL);
    CHECK_ERR_HAS(TS_ERR_DTYPE, "expects a real input");
    CHECK(ts_fft_fft(ts_zeros(TS_SHAPE(4), (ts_opts){.dtype = TS_F16}), -1, -1, 0) == NULL);
    CHECK_ERR_HAS(TS_ERR_DTYPE, "Unsupported dtype Half");
    CHECK(ts_fft_fft(z, -1, 1, 0) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_fft_fftn(ts_reshape(z, TS_SHAPE(2, 2)), NULL, 0, TS_DIMS(0, -2), 0) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "unique");
    CHECK(ts_fft_fftn(z, (int64_t[]){4, 4}, 2, (ts_dims){0}, 0) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_fft_fftshift(NULL, (ts_dims){0}) == NULL && ts_fft_fft(NULL, -1, -1, 0) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_fft_fftfreq(4, 1, (ts_opts){.dtype = TS_I64}) == NULL);
    CHECK_ERR(TS_ERR_DTYPE);
    /* an integer input is taken as float32 */
    ts_tensor *fi = ts_fft_fft(ts_arange(0, 4, 1, (ts_opts){.dtype = TS_I64}), -1, -1, 0);
    CHECK(fi && ts_dtype_of(fi) == TS_C64);
    ts_scope_end();
    CHECK_OK();
}

int main(void) {
    ndev = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    test_1d();
    test_nd_helpers();
    test_grads();
    test_capture();
    test_errors();
    CHECK_OK();
    return ts_test_finish();
}
