/* test_complex_inplace.c — the C side of issue 52's last complex gaps on every device:
 * ts_neg_ of a complex tensor with no graph recorded (the real kernel on view_as_real, one
 * version bump, the pairs negated where they lie, a strided view writing its base), and with one
 * (the gradient -1); ts_square / ts_pow_scalar(z, 2) as the native product and ts_reciprocal as
 * the native quotient, bit for bit; ts_autograd_grad with complex inputs in PyTorch's convention
 * (the gradient of a real loss is dL/dx + i dL/dy: 2z for sum |z|^2, conj(w) for Re(z w)); and
 * the refusals: a real gradient for a complex output, a complex gradient for a real one. */
#include <math.h>
#include <string.h>

#include "tessera.h"
#include "tessera/autograd.h"
#include "tessera/complex.h"
#include "tessera/elementwise.h"
#include "tessera/views.h"
#include "ts_test.h"

static ts_device devs[TS_TEST_MAX_DEVICES];
static int ndev;

#define N 7

/* complex tensor of n pairs v (re, im interleaved), dtype dt, on d */
static ts_tensor *mkc(int64_t n, const double *v, ts_dtype dt, ts_device d) {
    ts_tensor *r = ts_tensor_f64(TS_SHAPE(n, 2), v, (ts_opts){.dtype = TS_F64});
    return ts_clone(ts_to(ts_to_dtype(ts_view_as_complex(r), dt), d)); /* its own storage */
}

/* t's pairs as 2n doubles */
static bool rd(ts_tensor *t, double *out, int64_t n) {
    ts_tensor *h = t ? ts_to(t, ts_cpu()) : NULL;
    h = h ? ts_contiguous(ts_to_dtype(ts_view_as_real(h), TS_F64)) : NULL;
    return h && ts_numel(h) == 2 * n &&
           ts_copy_to_host(h, out, (size_t)(2 * n) * sizeof(double)) == TS_OK;
}

static const double V[2 * N] = {1.5,    -2.25, 0.0, 0.0, -0.0, 3.0,  1e30,
                                -1e-30, -4.0,  0.5, 7.0, -0.0, 0.25, 0.125};

static void test_neg_(ts_device d, ts_dtype dt) {
    ts_scope_begin();
    double want[2 * N], got[2 * N];
    ts_tensor *z = mkc(N, V, dt, d);
    CHECK(rd(z, want, N)); /* the stored parts */
    ts_tensor *parts = ts_view_as_real(z);
    const uint64_t v0 = ts_version(z);
    CHECK(ts_neg_(z) != NULL);
    CHECK_EQ(ts_version(z), v0 + 1);
    CHECK(rd(z, got, N));
    bool same = true;
    for (int i = 0; i < 2 * N; i++) /* exact, the sign of zeros included */
        same &= got[i] == -want[i] && signbit(got[i]) != signbit(want[i]);
    CHECK(same);
    double p[2 * N];
    ts_tensor *pc = ts_contiguous(ts_to_dtype(ts_to(parts, ts_cpu()), TS_F64));
    CHECK(pc && ts_copy_to_host(pc, p, sizeof p) == TS_OK && memcmp(p, got, sizeof p) == 0);
    /* a strided view writes its base; the other elements stay */
    ts_tensor *w = mkc(N, V, dt, d);
    CHECK(ts_neg_(ts_slice(w, 0, 0, N, 2)) != NULL);
    CHECK(rd(w, got, N));
    same = true;
    for (int i = 0; i < N; i++)
        for (int k = 0; k < 2; k++)
            same &= got[2 * i + k] == (i % 2 ? want[2 * i + k] : -want[2 * i + k]);
    CHECK(same);
    /* with a graph: y = z * 1; y.neg_(); d sum(Re y + 2 Im y) / dz = -(1 + 2i) */
    ts_tensor *leaf = mkc(N, V, dt, d);
    ts_set_requires_grad(leaf, true);
    ts_tensor *y = ts_mul_scalar(leaf, 1.0);
    CHECK(ts_neg_(y) == y);
    CHECK(ts_neg_(leaf) == NULL);
    CHECK_ERR_HAS(TS_ERR_STATE, "leaf");
    ts_error_clear();
    ts_tensor *loss = ts_add(ts_sum(ts_real(y)), ts_mul_scalar(ts_sum(ts_imag(y)), 2.0));
    CHECK(ts_backward(loss) == TS_OK);
    CHECK(rd(ts_grad(leaf), got, N));
    same = true;
    for (int i = 0; i < N; i++) same &= got[2 * i] == -1.0 && got[2 * i + 1] == -2.0;
    CHECK(same);
    CHECK_OK();
    ts_scope_end();
}

static void test_native_forms(ts_device d, ts_dtype dt) {
    ts_scope_begin();
    double a[2 * N], b[2 * N];
    ts_tensor *z = mkc(N, V, dt, d);
    CHECK(rd(ts_mul(z, z), a, N));
    CHECK(rd(ts_square(z), b, N) && memcmp(a, b, sizeof a) == 0);
    CHECK(rd(ts_pow_scalar(z, 2.0), b, N) && memcmp(a, b, sizeof a) == 0);
    /* 1 / z: the quotient's bits (NaN where 1 / 0 gives inf + NaN i: compared by class) */
    ts_tensor *one = ts_scalar(1.0, (ts_opts){.dtype = dt == TS_C64 ? TS_F32 : TS_F64});
    CHECK(rd(ts_div(one, z), a, N));
    CHECK(rd(ts_reciprocal(z), b, N));
    bool same = true;
    for (int i = 0; i < 2 * N; i++) same &= (isnan(a[i]) && isnan(b[i])) || a[i] == b[i];
    CHECK(same);
    CHECK(isinf(b[2]) && isnan(b[3])); /* 1 / 0 */
    CHECK_OK();
    ts_scope_end();
}

static void test_autograd_grad(ts_device d) {
    ts_scope_begin();
    const double W[2 * N] = {0.5, -1.0, 2.0,  1.0, -0.25, 0.75, 1.0,
                             0.0, 3.0,  -2.0, 0.0, 1.0,   -1.5, 0.5};
    ts_tensor *z = mkc(N, V, TS_C128, d), *w = mkc(N, W, TS_C128, d);
    ts_set_requires_grad(z, true);
    ts_set_requires_grad(w, true);
    /* sum |z|^2 = sum (x^2 + y^2): 2z */
    ts_tensor *sq = ts_view_as_real(z);
    ts_tensor *l1 = ts_sum(ts_mul(sq, sq));
    ts_tensor *g[2] = {0};
    CHECK(ts_autograd_grad(&l1, NULL, 1, &z, 1, (ts_grad_opts){0}, g) == TS_OK);
    double got[2 * N];
    CHECK(g[0] && ts_dtype_of(g[0]) == TS_C128 && rd(g[0], got, N));
    bool same = true;
    for (int i = 0; i < 2 * N; i++) same &= got[i] == 2 * V[i];
    CHECK(same);
    /* Re(z w): conj(w) for z, conj(z) for w */
    ts_tensor *l2 = ts_sum(ts_real(ts_mul(z, w)));
    ts_tensor *in[2] = {z, w};
    CHECK(ts_autograd_grad(&l2, NULL, 1, in, 2, (ts_grad_opts){0}, g) == TS_OK);
    double gw[2 * N];
    CHECK(rd(g[0], got, N) && rd(g[1], gw, N));
    same = true;
    for (int i = 0; i < N; i++)
        same &= got[2 * i] == W[2 * i] && got[2 * i + 1] == -W[2 * i + 1] &&
                gw[2 * i] == V[2 * i] && gw[2 * i + 1] == -V[2 * i + 1];
    CHECK(same);
    CHECK(ts_grad(z) == NULL && ts_grad(w) == NULL); /* no .grad touched */
    /* a real gradient for a complex output, and the reverse, are refused (a cast loses a part) */
    ts_tensor *y = ts_mul(z, w);
    ts_tensor *real_g = ts_ones(TS_SHAPE(N), (ts_opts){.dtype = TS_F64, .device = d});
    CHECK(ts_autograd_grad(&y, &real_g, 1, &z, 1, (ts_grad_opts){0}, g) == TS_ERR_DTYPE);
    CHECK_ERR_HAS(TS_ERR_DTYPE, "same dtype");
    ts_error_clear();
    ts_tensor *x = ts_ones(TS_SHAPE(N), (ts_opts){.dtype = TS_F64, .device = d});
    ts_set_requires_grad(x, true);
    ts_tensor *x2 = ts_mul_scalar(x, 2.0);
    CHECK(ts_backward_with(x2, w) == TS_ERR_DTYPE);
    CHECK_ERR_HAS(TS_ERR_DTYPE, "same dtype");
    ts_error_clear();
    CHECK(ts_grad(x) == NULL);
    ts_scope_end();
}

int main(void) {
    ndev = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    for (int k = 0; k < ndev; k++) {
        for (int t = 0; t < 2; t++) {
            test_neg_(devs[k], t ? TS_C128 : TS_C64);
            test_native_forms(devs[k], t ? TS_C128 : TS_C64);
        }
        test_autograd_grad(devs[k]);
    }
    CHECK_OK();
    return ts_test_finish();
}
