/* test_complex.c — complex64 / complex128 tensors (include/tessera/complex.h, src/ops/complex*.c,
 * src/core/complex_gate.c) on every device: the views and their rules, casts and fills through
 * the parts, add / sub / mul / div / neg / abs / sum / mean / conj / angle / polar against C99
 * double complex arithmetic, broadcasting with real and 0-dim cpu operands, gradients (PyTorch's
 * convention, checked by ts_gradcheck through real wrappers and by hand on a complex leaf), and
 * the refusals: every op without a complex path says so instead of reading the pairs as
 * something else. */
#include <complex.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "host_read_util.h"
#include "tessera.h"
#include "tessera/autograd.h"
#include "tessera/complex.h"
#include "tessera/logic.h"
#include "ts_test.h"

static ts_device devs[TS_TEST_MAX_DEVICES];
static int ndev;

#define N 12

static void fill(double complex *v, int n, int seed) {
    for (int i = 0; i < n; i++)
        v[i] = 2.5 * sin(0.71 * (i + 1) + 1.3 * seed) + I * 1.7 * cos(0.37 * (i + 2) + seed);
}

/* a complex tensor of shape s with values v, of dtype dt, on d */
static ts_tensor *mkc(ts_shape s, const double complex *v, ts_dtype dt, ts_device d) {
    ts_shape rs = s;
    rs.dims[rs.ndim++] = 2;
    ts_tensor *r = ts_tensor_f64(rs, (const double *)v, (ts_opts){.dtype = TS_F64});
    return ts_to(ts_to_dtype(ts_view_as_complex(r), dt), d);
}

/* a complex tensor's values (n of them) */
static bool rdc(ts_tensor *t, double complex *out, int64_t n) {
    ts_tensor *h = t ? ts_view_as_real(ts_to_dtype(ts_to(t, ts_cpu()), TS_C128)) : NULL;
    h = h ? ts_contiguous(h) : NULL;
    return h && ts_numel(h) == 2 * n &&
           ts_copy_to_host(h, out, (size_t)n * sizeof(double complex)) == TS_OK;
}

/* |got - ref| <= tol * (1 + |ref|) elementwise */
static void check_c(const char *what, ts_tensor *t, const double complex *ref, int64_t n,
                    double tol) {
    double complex got[64];
    bool ok = n <= 64 && rdc(t, got, n);
    int64_t at = -1;
    for (int64_t i = 0; ok && i < n; i++)
        if (!(cabs(got[i] - ref[i]) <= tol * (1 + cabs(ref[i])))) ok = false, at = i;
    ts_test_record(ok);
    if (!ok)
        ts_test_failf(__FILE__, __LINE__, "%s: element %lld %g%+gi vs %g%+gi%s", what,
                      (long long)at, at >= 0 ? creal(got[at]) : 0.0, at >= 0 ? cimag(got[at]) : 0.0,
                      at >= 0 ? creal(ref[at]) : 0.0, at >= 0 ? cimag(ref[at]) : 0.0,
                      ts_test_error_str());
    ts_error_clear();
}
static void check_r(const char *what, ts_tensor *t, const double *ref, int64_t n, double tol) {
    double got[64];
    bool ok = n <= 64 && rd(t, got, n);
    int64_t at = -1;
    for (int64_t i = 0; ok && i < n; i++)
        if (!(fabs(got[i] - ref[i]) <= tol * (1 + fabs(ref[i])))) ok = false, at = i;
    ts_test_record(ok);
    if (!ok)
        ts_test_failf(__FILE__, __LINE__, "%s: element %lld %g vs %g%s", what, (long long)at,
                      at >= 0 ? got[at] : 0.0, at >= 0 ? ref[at] : 0.0, ts_test_error_str());
    ts_error_clear();
}

/* float32 parts: a few roundings of values ~3 (products and quotients of two roundings) */
static double tol_of(ts_dtype dt) { return dt == TS_C64 ? 4e-7 : 1e-15; }

/* ------------------------------------------------------------------ views, casts, fills */
static void test_views_casts(void) {
    double complex v[N], out[N];
    fill(v, N, 1);
    for (int di = 0; di < ndev; di++) {
        ts_scope_begin();
        ts_tensor *z = mkc(TS_SHAPE(3, 4), v, TS_C128, devs[di]);
        CHECK(z && ts_dtype_of(z) == TS_C128 && ts_ndim(z) == 2 && ts_is_contiguous(z));
        CHECK_STREQ(ts_dtype_name(TS_C64), "complex64");
        CHECK(ts_dtype_size(TS_C128) == 16 && ts_dtype_is_complex(TS_C64) &&
              !ts_dtype_is_floating(TS_C64) && !ts_dtype_is_complex(TS_F64));
        check_c("round trip", z, v, N, 0);
        /* real and imag are views of the parts */
        double re[N], im[N];
        for (int i = 0; i < N; i++) re[i] = creal(v[i]), im[i] = cimag(v[i]);
        check_r("real", ts_real(z), re, N, 0);
        check_r("imag", ts_imag(z), im, N, 0);
        /* a transposed complex view: view_as_real doubles its strides */
        ts_tensor *zt = ts_transpose(z, 0, 1);
        ts_tensor *vr = ts_view_as_real(zt);
        CHECK(vr && ts_ndim(vr) == 3 && ts_size(vr, 2) == 2 && ts_dtype_of(vr) == TS_F64);
        double complex vt[N];
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 4; j++) vt[j * 3 + i] = v[i * 4 + j];
        check_c("transposed", ts_contiguous(zt), vt, N, 0);
        /* casts: complex64 rounds each part; to real keeps the real part; real to complex has
         * imaginary parts 0 */
        double complex v32[N];
        for (int i = 0; i < N; i++) v32[i] = (float)creal(v[i]) + I * (float)cimag(v[i]);
        check_c("to complex64", ts_to_dtype(z, TS_C64), v32, N, 0);
        check_r("real part to float64", ts_to_dtype(ts_real(z), TS_F64), re, N, 0);
        /* complex to a real dtype would drop the imaginary parts: refused */
        CHECK(ts_to_dtype(z, TS_F64) == NULL);
        CHECK_ERR_HAS(TS_ERR_DTYPE, "would discard the imaginary part");
        CHECK(ts_copy_(ts_zeros(TS_SHAPE(3, 4), (ts_opts){.device = devs[di]}), z) == NULL);
        CHECK_ERR_HAS(TS_ERR_DTYPE, "copy_: casting complex to float32");
        double complex rc[N];
        for (int i = 0; i < N; i++) rc[i] = re[i];
        check_c("float64 to complex", ts_to_dtype(ts_real(z), TS_C128), rc, N, 0);
        for (int i = 0; i < N; i++) rc[i] = trunc(re[i]);
        check_c("int64 to complex", ts_to_dtype(ts_to_dtype(ts_real(z), TS_I64), TS_C64), rc, N, 0);
        /* fill and zeros set imaginary parts to 0 */
        ts_tensor *f = ts_full(TS_SHAPE(N), 1.5, (ts_opts){.dtype = TS_C64, .device = devs[di]});
        for (int i = 0; i < N; i++) out[i] = 1.5;
        check_c("full", f, out, N, 0);
        /* clone, cat and stack move complex elements as they are */
        ts_tensor *cat = ts_cat((ts_tensor *[]){z, z}, 2, 0);
        CHECK(cat && ts_size(cat, 0) == 6);
        check_c("cat", ts_narrow(cat, 0, 3, 3), v, N, 0);
        check_c("clone", ts_clone(z), v, N, 0);
        check_c("select", ts_select(z, 0, 1), v + 4, 4, 0);
        check_c("stack", ts_select(ts_stack((ts_tensor *[]){z, z}, 2, 0), 0, 1), v, N, 0);
        double complex host[N], zero[N] = {0}, one[N];
        for (int i = 0; i < N; i++) one[i] = 1;
        CHECK(ts_copy_to_host(ts_to(z, ts_cpu()), host, sizeof host) == TS_OK &&
              !memcmp(host, v, sizeof host));
        check_c("zeros_like", ts_zeros_like(z), zero, N, 0);
        check_c("ones_like", ts_ones_like(z), one, N, 0);
        check_c("zeros", ts_zeros(TS_SHAPE(N), (ts_opts){.dtype = TS_C128, .device = devs[di]}),
                zero, N, 0);
        check_c("permute", ts_contiguous(ts_permute(ts_transpose(z, 0, 1), TS_DIMS(1, 0))), v, N,
                0);
        ts_scope_end();
    }
    /* view_as_complex's rules */
    ts_scope_begin();
    ts_tensor *r = ts_zeros(TS_SHAPE(3, 4), (ts_opts){0});
    CHECK(ts_view_as_complex(r) == NULL);
    CHECK_ERR_HAS(TS_ERR_SHAPE, "last dimension of size 2");
    CHECK(ts_view_as_complex(ts_transpose(ts_zeros(TS_SHAPE(2, 3), (ts_opts){0}), 0, 1)) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "stride 1");
    CHECK(ts_view_as_complex(ts_zeros(TS_SHAPE(2, 2), (ts_opts){.dtype = TS_I64})) == NULL);
    CHECK_ERR(TS_ERR_DTYPE);
    CHECK(ts_view_as_complex(ts_view(ts_narrow(ts_zeros(TS_SHAPE(7), (ts_opts){0}), 0, 1, 6),
                                     TS_SHAPE(3, 2))) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "storage_offset");
    CHECK(ts_view_as_real(r) == NULL);
    CHECK_ERR_HAS(TS_ERR_DTYPE, "only supported for complex tensors");
    CHECK(ts_imag(r) == NULL);
    CHECK_ERR(TS_ERR_DTYPE);
    CHECK(ts_real(r) != NULL); /* real of a real tensor: itself */
    CHECK(ts_complex(r, ts_zeros(TS_SHAPE(3, 4), (ts_opts){.dtype = TS_F64})) == NULL);
    CHECK_ERR(TS_ERR_DTYPE);
    ts_scope_end();
    CHECK_OK();
}

/* ------------------------------------------------------------------ arithmetic */
static void test_arith(void) {
    double complex a[N], b[N], ref[N];
    fill(a, N, 2), fill(b, N, 3);
    double br[N];
    for (int i = 0; i < N; i++) br[i] = creal(b[i]) + 0.5;
    const ts_dtype dts[2] = {TS_C64, TS_C128};
    for (int di = 0; di < ndev; di++)
        for (int k = 0; k < 2; k++) {
            const ts_dtype dt = dts[k];
            const double tol = tol_of(dt);
            double complex ar[N], bb[N]; /* the inputs as dt holds them */
            for (int i = 0; i < N; i++) {
                ar[i] = dt == TS_C64 ? (float)creal(a[i]) + I * (float)cimag(a[i]) : a[i];
                bb[i] = dt == TS_C64 ? (float)creal(b[i]) + I * (float)cimag(b[i]) : b[i];
            }
            char what[64];
            ts_scope_begin();
            ts_tensor *x = mkc(TS_SHAPE(N), a, dt, devs[di]),
                      *y = mkc(TS_SHAPE(N), b, dt, devs[di]);
            ts_tensor *(*const fns[4])(ts_tensor *, ts_tensor *) = {ts_add, ts_sub, ts_mul, ts_div};
            for (int f = 0; f < 4; f++) {
                for (int i = 0; i < N; i++)
                    ref[i] = f == 0   ? ar[i] + bb[i]
                             : f == 1 ? ar[i] - bb[i]
                             : f == 2 ? ar[i] * bb[i]
                                      : ar[i] / bb[i];
                snprintf(what, sizeof what, "op %d %s on %s", f, ts_dtype_name(dt),
                         ts_device_str(devs[di]));
                ts_tensor *z = fns[f](x, y);
                CHECK(z && ts_dtype_of(z) == dt);
                check_c(what, z, ref, N, tol);
                /* with a real operand (float64 promotes complex64 to complex128) */
                ts_tensor *yr = ts_to(ts_tensor_f64(TS_SHAPE(N), br, (ts_opts){0}), devs[di]);
                for (int i = 0; i < N; i++)
                    ref[i] = f == 0   ? ar[i] + br[i]
                             : f == 1 ? ar[i] - br[i]
                             : f == 2 ? ar[i] * br[i]
                                      : ar[i] / br[i];
                z = fns[f](x, yr);
                CHECK(z && ts_dtype_of(z) == TS_C128);
                check_c(what, z, ref, N, tol);
                /* a 0-dim cpu real on the left */
                ts_tensor *s = ts_scalar(2.0, (ts_opts){0});
                for (int i = 0; i < N; i++)
                    ref[i] = f == 0   ? 2 + ar[i]
                             : f == 1 ? 2 - ar[i]
                             : f == 2 ? 2 * ar[i]
                                      : 2 / ar[i];
                z = fns[f](s, x);
                CHECK(z && ts_dtype_of(z) == dt);
                check_c(what, z, ref, N, tol);
            }
            /* torch.result_type: a 0-dim float64 does not widen a complex64 tensor; a dimensioned
             * float64 does */
            ts_tensor *d0 = ts_scalar(0.5, (ts_opts){.dtype = TS_F64, .device = devs[di]});
            CHECK(ts_dtype_of(ts_mul(x, d0)) == dt);
            CHECK(ts_dtype_of(ts_add(ts_reshape(d0, TS_SHAPE(1)), x)) == TS_C128);
            /* broadcasting [3, 1] with [4] */
            ts_tensor *x3 = ts_reshape(ts_narrow(x, 0, 0, 3), TS_SHAPE(3, 1));
            ts_tensor *y4 = ts_narrow(y, 0, 0, 4);
            for (int i = 0; i < 3; i++)
                for (int j = 0; j < 4; j++) ref[i * 4 + j] = ar[i] * bb[j];
            check_c("broadcast mul", ts_mul(x3, y4), ref, N, tol);
            /* unary and reductions */
            for (int i = 0; i < N; i++) ref[i] = -ar[i];
            check_c("neg", ts_neg(x), ref, N, 0);
            for (int i = 0; i < N; i++) ref[i] = conj(ar[i]);
            check_c("conj", ts_conj(x), ref, N, 0);
            double rr[N];
            for (int i = 0; i < N; i++) rr[i] = cabs(ar[i]);
            check_r("abs", ts_abs(x), rr, N, tol);
            for (int i = 0; i < N; i++) rr[i] = carg(ar[i]);
            check_r("angle", ts_angle(x), rr, N, tol);
            double complex s = 0, rows[3] = {0};
            for (int i = 0; i < N; i++) s += ar[i], rows[i / 4] += ar[i];
            check_c("sum", ts_sum(x), &s, 1, tol);
            ts_tensor *x34 = ts_reshape(x, TS_SHAPE(3, 4));
            check_c("sum dim", ts_sum_dim(x34, -1, false), rows, 3, tol);
            for (int i = 0; i < 3; i++) rows[i] /= 4;
            check_c("mean dim", ts_mean_dims(x34, TS_DIMS(1), true), rows, 3, tol);
            /* polar(abs, angle) rebuilds the number */
            check_c("polar", ts_polar(ts_abs(x), ts_angle(x)), ar, N, 4 * tol);
            ts_scope_end();
        }
    /* angle of reals: 0, pi, NaN */
    ts_scope_begin();
    double rv[4] = {1.5, -2, 0, NAN}, want[4] = {0, 3.14159265358979323846, 0, NAN};
    double got[4];
    CHECK(rd(ts_angle(ts_tensor_f64(TS_SHAPE(4), rv, (ts_opts){0})), got, 4));
    CHECK(got[0] == want[0] && fabs(got[1] - want[1]) < 1e-15 && got[2] == 0 && isnan(got[3]));
    ts_scope_end();
    CHECK_OK();
}

/* ------------------------------------------------------------------ gradients */
/* |x + iy|^2 ... through complex ops; the loss is real */
static ts_tensor *loss_fn(ts_tensor *const *in, int n, void *ctx) {
    (void)n, (void)ctx;
    ts_tensor *z = ts_complex(in[0], in[1]), *w = ts_complex(in[1], in[2]);
    ts_tensor *q = ts_div(ts_mul(z, ts_conj(w)), ts_add(w, ts_scalar(3.0, (ts_opts){0})));
    ts_tensor *r = ts_sub(ts_mean(q), ts_neg(ts_sum(ts_mul(z, z))));
    return ts_add(ts_add(ts_real(r), ts_mul_scalar(ts_imag(r), 0.7)),
                  ts_sum(ts_mul(ts_abs(q), ts_angle(w))));
}

static void test_grads(void) {
    double v[3][6];
    for (int k = 0; k < 3; k++)
        for (int i = 0; i < 6; i++) v[k][i] = sin(1.1 * i + 2.3 * k) * 1.5 + 0.2;
    for (int di = 0; di < ndev; di++) {
        ts_scope_begin();
        ts_tensor *in[3];
        for (int k = 0; k < 3; k++) {
            in[k] = ts_to(ts_tensor_f64(TS_SHAPE(2, 3), v[k], (ts_opts){0}), devs[di]);
            ts_set_requires_grad(in[k], true);
        }
        CHECK(ts_gradcheck(loss_fn, NULL, in, 3, (ts_gradcheck_opts){0}));
        ts_scope_end();
        /* a complex leaf: L = sum |z|^2 has the gradient 2z (dL/dx + i dL/dy); twice: 4z */
        ts_scope_begin();
        double complex zv[N], ref[N];
        fill(zv, N, 4);
        ts_tensor *z = mkc(TS_SHAPE(N), zv, TS_C128, devs[di]);
        ts_set_requires_grad(z, true);
        for (int rep = 0; rep < 2; rep++) {
            ts_tensor *a = ts_abs(z);
            ts_backward(ts_sum(ts_mul(a, a)));
        }
        for (int i = 0; i < N; i++) ref[i] = 4 * zv[i];
        check_c("complex leaf grad", ts_grad(z), ref, N, 1e-14);
        /* a complex output needs an explicit gradient */
        ts_backward(ts_sum(ts_mul(z, z)));
        CHECK_ERR_HAS(TS_ERR_DTYPE, "real scalar outputs");
        ts_scope_end();
    }
    CHECK_OK();
}

/* ------------------------------------------------------------------ files */
/* safetensors has C64 (and no complex128): a round trip keeps every bit */
static void test_safetensors(void) {
    double complex v[N];
    fill(v, N, 6);
    char path[256];
    snprintf(path, sizeof path, "/tmp/test_complex_%d.safetensors", (int)getpid());
    ts_scope_begin();
    ts_tensor_list l = {0}, back = {0};
    ts_tensor *z = mkc(TS_SHAPE(3, 4), v, TS_C64, ts_cpu());
    ts_tensor_list_add(&l, "z", z);
    CHECK(ts_safetensors_save(path, &l, NULL, 0) == TS_OK);
    CHECK(ts_safetensors_load(path, ts_cpu(), &back) == TS_OK);
    ts_tensor *w = ts_tensor_list_get(&back, "z");
    CHECK(w && ts_dtype_of(w) == TS_C64);
    double complex a[N], b[N];
    CHECK(rdc(z, a, N) && rdc(w, b, N) && !memcmp(a, b, sizeof a));
    ts_tensor_list_free(&l);
    ts_tensor_list_add(&l, "w", mkc(TS_SHAPE(2), v, TS_C128, ts_cpu()));
    CHECK(ts_safetensors_save(path, &l, NULL, 0) == TS_ERR_DTYPE);
    CHECK_ERR_HAS(TS_ERR_DTYPE, "no complex128 dtype");
    ts_tensor_list_free(&l);
    ts_tensor_list_free(&back);
    ts_scope_end();
    unlink(path);
    CHECK_OK();
}

/* ------------------------------------------------------------------ refusals */
static void test_refusals(void) {
    ts_scope_begin();
    double complex v[N];
    fill(v, N, 5);
    ts_tensor *z = mkc(TS_SHAPE(N), v, TS_C64, ts_cpu());
    CHECK(ts_asin(z) == NULL);
    CHECK_ERR_HAS(TS_ERR_DTYPE, "asin: not implemented for 'ComplexFloat' (input: complex64 [12]");
    CHECK(ts_expm1(z) == NULL);
    CHECK_ERR(TS_ERR_DTYPE);
    CHECK(ts_max(z) == NULL);
    CHECK_ERR(TS_ERR_DTYPE);
    CHECK(ts_lt(z, z) == NULL);
    CHECK_ERR(TS_ERR_DTYPE);
    CHECK(ts_atan2(z, z) == NULL);
    CHECK_ERR(TS_ERR_DTYPE);
    /* NULL inputs are argument errors, not crashes */
    CHECK(ts_view_as_real(NULL) == NULL && ts_view_as_complex(NULL) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_complex(ts_real(z), NULL) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "imag is NULL");
    CHECK(ts_polar(NULL, ts_real(z)) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_real(NULL) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_imag(NULL) == NULL && ts_conj(NULL) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_angle(NULL) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "angle: input is NULL");
    CHECK(ts_polar(ts_real(z), ts_to_dtype(ts_imag(z), TS_F64)) == NULL);
    CHECK_ERR(TS_ERR_DTYPE);
    CHECK(ts_fmod_scalar(z, 2.0) == NULL); /* a scalar form without a complex path */
    CHECK_ERR(TS_ERR_DTYPE);
    CHECK(ts_to_dtype(z, TS_BOOL) == NULL); /* a nonzero test of both parts, not a copy */
    CHECK_ERR_HAS(TS_ERR_DTYPE, "casting complex to bool");
    CHECK(ts_to_dtype(z, TS_I64) == NULL);
    CHECK_ERR(TS_ERR_DTYPE);
    CHECK(ts_outer(z, z) ==
          NULL); /* complex matmul is taken (test_complex_linalg_math.c), outer not */
    CHECK_ERR(TS_ERR_DTYPE);
    CHECK(ts_clamp_(z, 0, 1) == NULL); /* in place without a complex path */
    CHECK_ERR(TS_ERR_DTYPE);
    CHECK(ts_randn(TS_SHAPE(2), (ts_opts){.dtype = TS_C64}) == NULL);
    CHECK_ERR(TS_ERR_DTYPE);
    CHECK(ts_cumsum(ts_zeros(TS_SHAPE(2), (ts_opts){0}), 0, TS_C64) == NULL);
    CHECK_ERR(TS_ERR_DTYPE);
    CHECK(ts_item(z) != ts_item(z)); /* NaN: item has no complex form */
    CHECK_ERR(TS_ERR_DTYPE);
    ts_scope_end();
    CHECK_OK();
}

int main(void) {
    ndev = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    test_views_casts();
    test_arith();
    test_grads();
    test_safetensors();
    test_refusals();
    CHECK_OK();
    return ts_test_finish();
}
