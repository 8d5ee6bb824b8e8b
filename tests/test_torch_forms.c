/* test_torch_forms.c — include/tessera/torch_forms.h on every device: the *_copy forms are fresh
 * contiguous copies with the view's values and gradients, fill (and its gradient to the value),
 * nonzero_static's cut and padding, torch.range's inclusive end in double / int64, rsub against
 * host arithmetic with its gradient, and the samplers (cauchy_ / geometric_ / log_normal_) by
 * their quantiles and moments over 20000 seeded draws against the exact distributions, equal
 * under one seed; the refusals naming op and argument. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "host_values.h"
#include "tessera.h"
#include "ts_test.h"

#define N 20000
static double a[64], got[N];
#define mk(s, v, d) ts_test_tensor_f64(s, v, TS_F64, d)
#define rd(t)       ts_test_read_f64(t, got, N)

static int cmp(const void *x, const void *y) {
    const double p = *(const double *)x, q = *(const double *)y;
    return p < q ? -1 : p > q;
}

static void test_copies(ts_device d) {
    ts_test_fill_uniform(a, 6, 1);
    ts_tensor *x = mk(TS_SHAPE(2, 1, 3), a, d);
    ts_tensor *e = ts_expand_copy(x, TS_SHAPE(2, 4, 3));
    CHECK(ts_test_shape_is(e, TS_SHAPE(2, 4, 3)) && ts_is_contiguous(e) && rd(e));
    for (int i = 0; i < 24; i++) CHECK(got[i] == a[(i / 12) * 3 + i % 3]);
    ts_tensor *s = ts_squeeze_copy(x, NULL);
    CHECK(ts_test_shape_is(s, TS_SHAPE(2, 3)) && !ts_shares_storage(s, x));
    ts_dims d0 = {.n = 1, .d = {0}};
    CHECK(ts_test_shape_is(ts_squeeze_copy(x, &d0), TS_SHAPE(2, 1, 3)));
    ts_tensor *v = ts_view_copy(x, TS_SHAPE(3, 2));
    CHECK(ts_test_shape_is(v, TS_SHAPE(3, 2)) && !ts_shares_storage(v, x) && rd(v));
    for (int i = 0; i < 6; i++) CHECK(got[i] == a[i]);
    ts_tensor *vb = ts_view_copy_dtype(x, TS_I64);
    CHECK(vb && ts_dtype_of(vb) == TS_I64 && !ts_shares_storage(vb, x));
    /* fill: a copy; the value's gradient is the sum of the incoming one */
    ts_tensor *val = mk(TS_SHAPE(), (double[]){2.5}, d);
    ts_set_requires_grad(val, true);
    ts_tensor *f = ts_fill(x, val);
    CHECK(rd(f) && got[0] == 2.5 && got[5] == 2.5 && rd(x) && got[0] == a[0]);
    CHECK(ts_backward(ts_sum(ts_mul_scalar(f, 3.0))) == TS_OK && rd(ts_grad(val)) && got[0] == 18);
    CHECK(!ts_fill(x, x));
    CHECK_ERR_HAS(TS_ERR_SHAPE,
                  "fill only supports 0-dimension value tensor but got tensor with 3 dimensions");
    /* nonzero_static */
    double z[6] = {0, 1, 0, 2, 3, 0};
    ts_tensor *t = mk(TS_SHAPE(2, 3), z, d);
    CHECK(rd(ts_nonzero_static(t, 5, -7)));
    const double want[10] = {0, 1, 1, 0, 1, 1, -7, -7, -7, -7};
    for (int i = 0; i < 10; i++) CHECK(got[i] == want[i]);
    CHECK(ts_test_shape_is(ts_nonzero_static(t, 1, 0), TS_SHAPE(1, 2)));
    CHECK(!ts_nonzero_static(t, -1, 0));
    CHECK_ERR_HAS(TS_ERR_ARG, "nonzero_static(): 'size' must be an non-negative integer");
    CHECK_OK();
}

/* as_strided_copy / as_strided_scatter over a [3, 4] tensor: the view (2, 2) strides (1, 2)
 * offset 1 reads storage 1, 3 / 2, 4 */
static void test_as_strided(ts_device d) {
    double v[12], src[4] = {10, 20, 30, 40};
    ts_test_fill_uniform(v, 12, 4);
    ts_tensor *x = mk(TS_SHAPE(3, 4), v, d);
    ts_set_requires_grad(x, true);
    const int64_t st[2] = {1, 2};
    ts_tensor *c = ts_as_strided_copy(x, TS_SHAPE(2, 2), st, 1);
    CHECK(ts_test_shape_is(c, TS_SHAPE(2, 2)) && rd(c) && got[0] == v[1] && got[1] == v[3] &&
          got[2] == v[2] && got[3] == v[4]);
    CHECK(ts_backward(ts_sum(c)) == TS_OK && rd(ts_grad(x)));
    for (int i = 0; i < 12; i++) CHECK(got[i] == (i >= 1 && i <= 4));
    ts_tensor *y = ts_as_strided_scatter(x, mk(TS_SHAPE(2, 2), src, d), TS_SHAPE(2, 2), st, 1);
    CHECK(rd(y));
    for (int i = 0; i < 12; i++)
        CHECK(got[i] == (i == 1 ? 10 : i == 3 ? 20 : i == 2 ? 30 : i == 4 ? 40 : v[i]));
    /* a narrowed input owns storage 0, 1, 4, 5, 8, 9: reading 2 is refused */
    ts_tensor *xn = ts_narrow(ts_detach(x), 1, 0, 2);
    const int64_t one[1] = {1};
    CHECK(!ts_as_strided_copy(xn, TS_SHAPE(2), one, 1));
    CHECK_ERR_HAS(TS_ERR_ARG, "as_strided_copy(): the view reads storage element 2, outside");
    CHECK(!ts_as_strided_copy(x, TS_SHAPE(2), one, 11));
    CHECK_ERR_HAS(TS_ERR_ARG, "the view reads storage element 12");
    CHECK(!ts_as_strided_scatter(x, mk(TS_SHAPE(3), src, d), TS_SHAPE(2, 2), st, 1));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "as_strided_scatter(): src has shape [3], the view [2, 2]");
    CHECK_OK();
}

/* hash_tensor: the xor of the float64 bit patterns (int32 as int64) against host xors */
static uint64_t bits_of(double v) {
    uint64_t b;
    memcpy(&b, &v, sizeof b);
    return b;
}
static bool read_u64(ts_tensor *t, uint64_t *out, size_t n) {
    ts_tensor *c = t ? ts_contiguous(ts_view_dtype(ts_contiguous(t), TS_I64)) : NULL;
    return c && (size_t)ts_numel(c) == n &&
           ts_copy_to_host(ts_to(c, ts_cpu()), out, n * sizeof *out) == TS_OK;
}
static void test_hash(ts_device d) {
    double v[24];
    uint64_t h[8], all = 0, col[6] = {0};
    ts_test_fill_uniform(v, 24, 6);
    for (int i = 0; i < 24; i++) all ^= bits_of(v[i]), col[(i / 12) * 3 + i % 3] ^= bits_of(v[i]);
    ts_tensor *x = mk(TS_SHAPE(2, 4, 3), v, d); /* col: xor over dim 1 */
    ts_tensor *y = ts_hash_tensor(x, NULL, false, 0);
    CHECK(y && ts_dtype_of(y) == TS_U64 && read_u64(y, h, 1) && h[0] == all);
    const ts_dims d1 = {.n = 1, .d = {1}};
    y = ts_hash_tensor(x, &d1, true, 0);
    CHECK(ts_test_shape_is(y, TS_SHAPE(2, 1, 3)) && read_u64(y, h, 6));
    for (int i = 0; i < 6; i++) CHECK(h[i] == col[i]);
    /* float32 hashes as float64, int32 as int64 */
    ts_tensor *xf = ts_to_dtype(x, TS_F32);
    double vf[24];
    CHECK(ts_test_read_f64(xf, vf, 24) && read_u64(ts_hash_tensor(xf, NULL, false, 0), h, 1));
    uint64_t allf = 0;
    for (int i = 0; i < 24; i++) allf ^= bits_of(vf[i]);
    CHECK(h[0] == allf);
    const int32_t iv[3] = {-3, 7, 1 << 20};
    ts_tensor *xi = ts_tensor_i32(TS_SHAPE(3), iv, (ts_opts){.dtype = TS_I32, .device = d});
    CHECK(read_u64(ts_hash_tensor(xi, NULL, false, 0), h, 1) &&
          h[0] == ((uint64_t)(int64_t)-3 ^ (uint64_t)7 ^ (uint64_t)(1 << 20)));
    CHECK(!ts_hash_tensor(x, NULL, false, 1));
    CHECK_ERR_HAS(TS_ERR_ARG, "hash_tensor(): only mode=0 (the xor reduction) is supported, got 1");
    const ts_dims d5 = {.n = 1, .d = {5}};
    CHECK(!ts_hash_tensor(x, &d5, false, 0));
    CHECK_ERR_HAS(TS_ERR_ARG, "hash_tensor(): dim 5 out of range for a 3-dim tensor");
    CHECK_OK();
}

static void test_range_rsub(ts_device d) {
    ts_tensor *r = ts_range(0.0, 1.0, 0.1, (ts_opts){.dtype = TS_F64, .device = d});
    CHECK(ts_test_shape_is(r, TS_SHAPE(11)) && rd(r));
    for (int i = 0; i < 11; i++) CHECK(got[i] == (double)i * 0.1);
    r = ts_range(5, -1, -2, (ts_opts){.dtype = TS_I64, .device = d}); /* 5, 3, 1, -1 */
    CHECK(ts_test_shape_is(r, TS_SHAPE(4)) && rd(r) && got[0] == 5 && got[3] == -1);
    r = ts_range(1.5, 4.2, 1, (ts_opts){.dtype = TS_I32, .device = d}); /* int(1.5) .. int(4.2) */
    CHECK(ts_test_shape_is(r, TS_SHAPE(4)) && rd(r) && got[0] == 1 && got[3] == 4);
    CHECK(!ts_range(0, 1, 0, (ts_opts){.device = d}));
    CHECK_ERR_HAS(TS_ERR_ARG, "range(): step must be nonzero");
    CHECK(!ts_range(0, 1, -1, (ts_opts){.device = d}));
    CHECK_ERR_HAS(TS_ERR_ARG, "range(): upper bound and larger bound inconsistent with step sign");
    ts_test_fill_uniform(a, 6, 2);
    ts_tensor *x = mk(TS_SHAPE(2, 3), a, d), *o = mk(TS_SHAPE(3), a + 3, d);
    ts_set_requires_grad(x, true);
    ts_tensor *y = ts_rsub(x, o, 2.5);
    CHECK(rd(y));
    for (int i = 0; i < 6; i++) CHECK(got[i] == a[3 + i % 3] - 2.5 * a[i]);
    CHECK(ts_backward(ts_sum(y)) == TS_OK && rd(ts_grad(x)) && got[0] == -2.5 && got[5] == -2.5);
    CHECK(rd(ts_rsub(x, o, 1.0))); /* alpha 1: other - input */
    for (int i = 0; i < 6; i++) CHECK(got[i] == a[3 + i % 3] - a[i]);
    CHECK_OK();
}

static void test_samplers(ts_device d) {
    const ts_opts o = {.dtype = TS_F64, .device = d};
    ts_tensor *t = ts_empty(TS_SHAPE(N), o);
    /* Cauchy(-2, 0.5): quartiles at median -+ sigma */
    ts_manual_seed(7);
    CHECK(ts_cauchy_(t, -2.0, 0.5) && rd(t));
    qsort(got, N, sizeof *got, cmp);
    const double se = 0.5 * 3.2 / sqrt(N); /* ~ 2.5 standard errors of a quartile */
    CHECK(fabs(got[N / 4] - -2.5) < se && fabs(got[N / 2] - -2.0) < se &&
          fabs(got[3 * N / 4] - -1.5) < se);
    /* the formula value by value: median + sigma tan(pi (u - 1/2)) of the uniform draws the same
     * seed gives (in double on the host; relative error of tan near its poles kept out) */
    static double u[N];
    ts_manual_seed(7);
    CHECK(ts_test_read_f64(ts_rand_like(t), u, N));
    ts_manual_seed(7);
    CHECK(ts_cauchy_(t, -2.0, 0.5) && rd(t));
    int bad = 0;
    for (int i = 0; i < N; i++) {
        const double want = -2.0 + 0.5 * tan(3.14159265358979323846 * (u[i] - 0.5));
        if (fabs(u[i] - 0.5) < 0.49 && fabs(got[i] - want) > 1e-12 * (1 + fabs(want))) bad++;
    }
    CHECK(bad == 0);
    /* determinism: one seed, the same draws */
    ts_tensor *t2 = ts_empty(TS_SHAPE(N), o);
    ts_manual_seed(7);
    ts_cauchy_(t2, -2.0, 0.5);
    CHECK(ts_item(ts_sum(ts_ne(t, t2))) == 0);
    /* geometric(0.3): mean 1/p, variance (1-p)/p^2, minimum 1, integral */
    const double p = 0.3;
    ts_tensor *g = ts_empty(TS_SHAPE(N), (ts_opts){.dtype = TS_I64, .device = d});
    ts_manual_seed(8);
    CHECK(ts_geometric_(g, p) && rd(g));
    double m = 0, m2 = 0, lo = 1e9;
    for (int i = 0; i < N; i++) m += got[i], m2 += got[i] * got[i], lo = got[i] < lo ? got[i] : lo;
    m /= N, m2 = m2 / N - m * m;
    const double sd = sqrt((1 - p) / (p * p));
    CHECK(lo == 1 && fabs(m - 1 / p) < 4 * sd / sqrt(N) && fabs(m2 / (sd * sd) - 1) < 0.1);
    /* log-normal(0.5, 0.75): log of the draws has mean 0.5 and std 0.75 */
    ts_manual_seed(9);
    CHECK(ts_log_normal_(t, 0.5, 0.75) && rd(t));
    m = 0, m2 = 0;
    for (int i = 0; i < N; i++) m += log(got[i]), m2 += log(got[i]) * log(got[i]);
    m /= N, m2 = sqrt(m2 / N - m * m);
    CHECK(fabs(m - 0.5) < 4 * 0.75 / sqrt(N) && fabs(m2 - 0.75) < 0.02);
    CHECK(!ts_cauchy_(t, 0, 0));
    CHECK_ERR_HAS(TS_ERR_ARG, "cauchy_(): expects sigma > 0.0, but found sigma=0");
    CHECK(!ts_geometric_(t, 1.0));
    CHECK_ERR_HAS(TS_ERR_ARG, "geometric_(): expects p to be in (0, 1), but got p=1");
    CHECK(!ts_log_normal_(g, 0, 1));
    CHECK_ERR_HAS(TS_ERR_DTYPE, "log_normal_(): expected a floating-point tensor");
    CHECK_OK();
}

int main(void) {
    ts_device devs[TS_TEST_MAX_DEVICES];
    const int nd = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    for (int i = 0; i < nd; i++) {
        ts_scope_begin();
        test_copies(devs[i]);
        test_as_strided(devs[i]);
        test_hash(devs[i]);
        test_range_rsub(devs[i]);
        test_samplers(devs[i]);
        ts_scope_end();
        CHECK_OK();
    }
    return ts_test_finish();
}
