/* test_products.c — issue 52's products (src/ops/products.c) on every device: addmm, addmv, addr,
 * baddbmm, addbmm (beta / alpha, broadcast input, beta = 0 ignoring NaN, in-place forms), mv, dot,
 * vdot, outer, inner, tensordot (size-1 broadcast), kron, trace, multi_dot against float64 loops;
 * ts_gradcheck of each; the refusals (shapes, dtypes, integral beta / alpha, devices). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "host_read_util.h"
#include "tessera.h"
#include "ts_test.h"

static ts_device devs[TS_TEST_MAX_DEVICES];
static int ndev;

/* deterministic values in (-1, 1) */
static void fill(double *v, int64_t n, int seed) {
    for (int64_t i = 0; i < n; i++) v[i] = sin(1.7 * (double)(i + 1) + 0.9 * seed) * 0.9;
}
static ts_tensor *mk(ts_shape s, const double *v, ts_device d, bool rg) {
    ts_tensor *t = ts_to(ts_tensor_f64(s, v, (ts_opts){.dtype = TS_F64}), d);
    t = ts_detach(t);
    if (rg) ts_set_requires_grad(t, true);
    return t;
}
/* c[n, m] = a[n, k] @ b[k, m] (row-major) */
static void ref_mm(const double *a, const double *b, double *c, int n, int k, int m) {
    for (int i = 0; i < n; i++)
        for (int j = 0; j < m; j++) {
            double s = 0;
            for (int q = 0; q < k; q++) s += a[i * k + q] * b[q * m + j];
            c[i * m + j] = s;
        }
}

static void test_addx(void) {
    double a[60], b[60], in[60], p[60], ref[60];
    fill(a, 60, 1), fill(b, 60, 2), fill(in, 60, 3);
    for (int di = 0; di < ndev; di++) {
        const ts_device d = devs[di];
        ts_scope_begin();
        /* addmm: [2, 3] input, broadcast [3] and 0-dim inputs */
        ref_mm(a, b, p, 2, 4, 3);
        for (int i = 0; i < 6; i++) ref[i] = 0.2 * in[i] + 0.6 * p[i];
        ts_tensor *A = mk(TS_SHAPE(2, 4), a, d, false), *B = mk(TS_SHAPE(4, 3), b, d, false);
        CHECK(near_all(ts_addmm(mk(TS_SHAPE(2, 3), in, d, false), A, B, 0.2, 0.6), ref, 6, 1e-14));
        for (int i = 0; i < 6; i++) ref[i] = 0.2 * in[i % 3] + 0.6 * p[i];
        CHECK(near_all(ts_addmm(mk(TS_SHAPE(3), in, d, false), A, B, 0.2, 0.6), ref, 6, 1e-14));
        for (int i = 0; i < 6; i++) ref[i] = 0.2 * in[0] + 0.6 * p[i];
        CHECK(near_all(ts_addmm(mk(TS_SHAPE(), in, d, false), A, B, 0.2, 0.6), ref, 6, 1e-14));
        /* beta = 0: the input's NaN and inf are ignored */
        const double bad[3] = {NAN, INFINITY, -INFINITY};
        for (int i = 0; i < 6; i++) ref[i] = 1.5 * p[i];
        CHECK(near_all(ts_addmm(mk(TS_SHAPE(3), bad, d, false), A, B, 0, 1.5), ref, 6, 1e-14));
        /* in place */
        ts_tensor *dst = mk(TS_SHAPE(2, 3), in, d, false);
        for (int i = 0; i < 6; i++) ref[i] = in[i] + p[i];
        ts_tensor *r = ts_addmm_(dst, A, B, 1, 1);
        CHECK(r == dst && near_all(dst, ref, 6, 1e-14));
        CHECK(ts_addmm_(mk(TS_SHAPE(3), in, d, false), A, B, 1, 1) == NULL);
        CHECK_ERR_HAS(TS_ERR_SHAPE, "addmm_");
        /* addmv: [5, 4] @ [4] */
        ref_mm(a, b, p, 5, 4, 1);
        for (int i = 0; i < 5; i++) ref[i] = -0.5 * in[i] + 2 * p[i];
        CHECK(near_all(ts_addmv(mk(TS_SHAPE(5), in, d, false), mk(TS_SHAPE(5, 4), a, d, false),
                                mk(TS_SHAPE(4), b, d, false), -0.5, 2),
                       ref, 5, 1e-14));
        /* addr: [3] x [4] */
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 4; j++) ref[i * 4 + j] = 0.6 * in[i * 4 + j] + 0.2 * a[i] * b[j];
        CHECK(near_all(ts_addr(mk(TS_SHAPE(3, 4), in, d, false), mk(TS_SHAPE(3), a, d, false),
                               mk(TS_SHAPE(4), b, d, false), 0.6, 0.2),
                       ref, 12, 1e-14));
        /* baddbmm and addbmm: [3, 2, 4] @ [3, 4, 5] */
        double q[30], s[10] = {0};
        for (int k = 0; k < 3; k++) ref_mm(a + 8 * k, b + 20 * k, q + 10 * k, 2, 4, 5);
        for (int i = 0; i < 30; i++) ref[i] = 0.3 * in[i] + 0.7 * q[i];
        ts_tensor *B1 = mk(TS_SHAPE(3, 2, 4), a, d, false),
                  *B2 = mk(TS_SHAPE(3, 4, 5), b, d, false);
        CHECK(near_all(ts_baddbmm(mk(TS_SHAPE(3, 2, 5), in, d, false), B1, B2, 0.3, 0.7), ref, 30,
                       1e-14));
        for (int k = 0; k < 3; k++)
            for (int i = 0; i < 10; i++) s[i] += q[10 * k + i];
        for (int i = 0; i < 10; i++) ref[i] = 0.3 * in[i] + 0.7 * s[i];
        CHECK(near_all(ts_addbmm(mk(TS_SHAPE(2, 5), in, d, false), B1, B2, 0.3, 0.7), ref, 10,
                       1e-14));
        /* empty contraction: beta * input */
        ts_tensor *e1 = ts_zeros(TS_SHAPE(5, 0), (ts_opts){.dtype = TS_F64, .device = d});
        ts_tensor *e2 = ts_zeros(TS_SHAPE(0, 10), (ts_opts){.dtype = TS_F64, .device = d});
        for (int i = 0; i < 50; i++) ref[i] = 0.2 * in[i % 10];
        CHECK(near_all(ts_addmm(mk(TS_SHAPE(10), in, d, false), e1, e2, 0.2, 0.6), ref, 50, 0));
        ts_scope_end();
        CHECK_OK();
    }
}

static void test_products(void) {
    double a[200], b[200], ref[200], p[200];
    fill(a, 200, 4), fill(b, 200, 5);
    for (int di = 0; di < ndev; di++) {
        const ts_device d = devs[di];
        ts_scope_begin();
        /* mv, dot, vdot, outer */
        ref_mm(a, b, p, 5, 4, 1);
        CHECK(near_all(ts_mv(mk(TS_SHAPE(5, 4), a, d, false), mk(TS_SHAPE(4), b, d, false)), p, 5,
                       1e-14));
        double dt = 0;
        for (int i = 0; i < 7; i++) dt += a[i] * b[i];
        ts_tensor *va = mk(TS_SHAPE(7), a, d, false), *vb = mk(TS_SHAPE(7), b, d, false);
        CHECK(near_all(ts_dot(va, vb), &dt, 1, 1e-14) && ts_ndim(ts_dot(va, vb)) == 0);
        CHECK(near_all(ts_vdot(va, vb), &dt, 1, 1e-14));
        for (int i = 0; i < 7; i++)
            for (int j = 0; j < 3; j++) ref[i * 3 + j] = a[i] * b[j];
        CHECK(near_all(ts_outer(va, mk(TS_SHAPE(3), b, d, false)), ref, 21, 0));
        /* inner of [2, 3] and [4, 3]: [2, 4] */
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 4; j++) {
                double s = 0;
                for (int k = 0; k < 3; k++) s += a[i * 3 + k] * b[j * 3 + k];
                ref[i * 4 + j] = s;
            }
        ts_tensor *in2 = ts_inner(mk(TS_SHAPE(2, 3), a, d, false), mk(TS_SHAPE(4, 3), b, d, false));
        CHECK(near_all(in2, ref, 8, 1e-14) && ts_size(in2, 0) == 2 && ts_size(in2, 1) == 4);
        /* tensordot dims = 2: [2, 3, 4] . [3, 4, 5] = [2, 5] */
        ref_mm(a, b, p, 2, 12, 5);
        ts_tensor *td =
            ts_tensordot(mk(TS_SHAPE(2, 3, 4), a, d, false), mk(TS_SHAPE(3, 4, 5), b, d, false),
                         TS_DIMS(1, 2), TS_DIMS(0, 1));
        CHECK(near_all(td, p, 10, 1e-14));
        /* pairs ((0, 1), (2, 0)) with a size-1 dim of a against b's 2: b summed there */
        /* a [1, 1, 3] (dims 0, 1 size 1), b [2, 2, 2]: a.sum over nothing; b summed over dims 2, 0
         * -> out [3, 2] = a[0,0,i] * sum_{j,l} b[l, k, j] */
        ts_tensor *t3 =
            ts_tensordot(mk(TS_SHAPE(1, 1, 3), a, d, false), mk(TS_SHAPE(2, 2, 2), b, d, false),
                         TS_DIMS(0, 1), TS_DIMS(2, 0));
        for (int i = 0; i < 3; i++)
            for (int k = 0; k < 2; k++) {
                double s = 0;
                for (int l = 0; l < 2; l++)
                    for (int j = 0; j < 2; j++) s += b[l * 4 + k * 2 + j];
                ref[i * 2 + k] = a[i] * s;
            }
        CHECK(near_all(t3, ref, 6, 1e-14));
        /* kron [2, 3] x [4, 5] = [8, 15] */
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 3; j++)
                for (int k = 0; k < 4; k++)
                    for (int l = 0; l < 5; l++)
                        ref[(i * 4 + k) * 15 + j * 5 + l] = a[i * 3 + j] * b[k * 5 + l];
        ts_tensor *kr = ts_kron(mk(TS_SHAPE(2, 3), a, d, false), mk(TS_SHAPE(4, 5), b, d, false));
        CHECK(near_all(kr, ref, 120, 0) && ts_size(kr, 0) == 8 && ts_size(kr, 1) == 15);
        /* trace of [3, 5] */
        double tr = a[0] + a[6] + a[12];
        CHECK(near_all(ts_trace(mk(TS_SHAPE(3, 5), a, d, false)), &tr, 1, 1e-15));
        /* multi_dot [3] . [3, 4] . [4, 2] . [2, 5] . [5]: a number */
        double v1[4], v2[2], v3[5];
        ref_mm(a, b, v1, 1, 3, 4);
        ref_mm(v1, b + 12, v2, 1, 4, 2);
        ref_mm(v2, b + 20, v3, 1, 2, 5);
        double md = 0;
        for (int i = 0; i < 5; i++) md += v3[i] * b[30 + i];
        ts_tensor *chain[5] = {mk(TS_SHAPE(3), a, d, false), mk(TS_SHAPE(3, 4), b, d, false),
                               mk(TS_SHAPE(4, 2), b + 12, d, false),
                               mk(TS_SHAPE(2, 5), b + 20, d, false),
                               mk(TS_SHAPE(5), b + 30, d, false)};
        ts_tensor *m = ts_multi_dot(chain, 5);
        CHECK(near_all(m, &md, 1, 1e-14) && ts_ndim(m) == 0);
        ts_scope_end();
        CHECK_OK();
    }
}

/* ------------------------------------------------------------------ gradients */
typedef enum {
    G_ADDMM,
    G_ADDMV,
    G_ADDR,
    G_BADDBMM,
    G_ADDBMM,
    G_TD,
    G_KRON,
    G_TRACE,
    G_MD,
    G_INNER,
    G_N
} gk;
static ts_tensor *g_fn(ts_tensor *const *in, int n, void *ctx) {
    (void)n;
    switch ((gk)(intptr_t)ctx) {
    case G_ADDMM:
        return ts_addmm(in[0], in[1], in[2], 0.2, 0.6);
    case G_ADDMV:
        return ts_addmv(in[0], in[1], in[2], 1.5, -0.5);
    case G_ADDR:
        return ts_addr(in[0], in[1], in[2], 0.6, 0.2);
    case G_BADDBMM:
        return ts_baddbmm(in[0], in[1], in[2], 0.2, 0.6);
    case G_ADDBMM:
        return ts_addbmm(in[0], in[1], in[2], 0.6, 0.2);
    case G_TD:
        return ts_tensordot(in[0], in[1], TS_DIMS(0, 1), TS_DIMS(2, 0));
    case G_KRON:
        return ts_kron(in[0], in[1]);
    case G_TRACE:
        return ts_trace(in[0]);
    case G_MD:
        return ts_multi_dot(in, 4);
    case G_INNER:
        return ts_inner(in[0], in[1]);
    default:
        return NULL;
    }
}

static void test_grads(void) {
    double v[4][64];
    for (int i = 0; i < 4; i++) fill(v[i], 64, 10 + i);
    const ts_gradcheck_opts go = {.eps = 1e-6, .atol = 1e-6, .rtol = 1e-5};
    struct {
        gk k;
        int n;
        ts_shape s[4];
    } cases[] = {
        {G_ADDMM, 3, {TS_SHAPE(3), TS_SHAPE(2, 4), TS_SHAPE(4, 3)}},
        {G_ADDMV, 3, {TS_SHAPE(), TS_SHAPE(5, 3), TS_SHAPE(3)}},
        {G_ADDR, 3, {TS_SHAPE(3, 4), TS_SHAPE(3), TS_SHAPE(4)}},
        {G_BADDBMM, 3, {TS_SHAPE(1), TS_SHAPE(2, 2, 3), TS_SHAPE(2, 3, 4)}},
        {G_ADDBMM, 3, {TS_SHAPE(2, 4), TS_SHAPE(3, 2, 3), TS_SHAPE(3, 3, 4)}},
        {G_TD, 2, {TS_SHAPE(2, 1, 2), TS_SHAPE(2, 3, 2)}},
        {G_KRON, 2, {TS_SHAPE(2, 3), TS_SHAPE(3, 2)}},
        {G_TRACE, 1, {TS_SHAPE(3, 4)}},
        {G_MD, 4, {TS_SHAPE(3), TS_SHAPE(3, 4), TS_SHAPE(4, 2), TS_SHAPE(2, 3)}},
        {G_INNER, 2, {TS_SHAPE(2, 3), TS_SHAPE(2, 2, 3)}},
    };
    for (int di = 0; di < ndev; di++)
        for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
            ts_scope_begin();
            ts_tensor *in[4];
            for (int i = 0; i < cases[c].n; i++) in[i] = mk(cases[c].s[i], v[i], devs[di], true);
            const bool ok = ts_gradcheck(g_fn, (void *)(intptr_t)cases[c].k, in, cases[c].n, go);
            ts_scope_end();
            ts_test_record(ok);
            if (!ok)
                ts_test_failf(__FILE__, __LINE__, "gradcheck case %d on %s%s", (int)c,
                              ts_device_str(devs[di]), ts_test_error_str());
            ts_error_clear();
        }
    /* beta = 0: no gradient to the input (zeros), the others as usual */
    ts_scope_begin();
    const double nanv[3] = {NAN, NAN, NAN};
    ts_tensor *x = mk(TS_SHAPE(3), nanv, ts_cpu(), true);
    ts_tensor *A = mk(TS_SHAPE(2, 4), v[0], ts_cpu(), true),
              *B = mk(TS_SHAPE(4, 3), v[1], ts_cpu(), true);
    ts_backward(ts_sum(ts_addmm(x, A, B, 0, 1)));
    double g[8];
    CHECK(ts_grad(x) == NULL || (rd(ts_grad(x), g, 3) && g[0] == 0 && g[1] == 0));
    CHECK(rd(ts_grad(A), g, 8) && isfinite(g[0]));
    ts_scope_end();
    CHECK_OK();
}

/* ------------------------------------------------------------------ refusals */
static void test_errors(void) {
    ts_scope_begin();
    const ts_opts f = {.dtype = TS_F64}, i64 = {.dtype = TS_I64}, f32 = {.dtype = TS_F32};
    ts_tensor *m23 = ts_ones(TS_SHAPE(2, 3), f), *m34 = ts_ones(TS_SHAPE(3, 4), f);
    ts_tensor *m44 = ts_ones(TS_SHAPE(4, 4), f), *v3 = ts_ones(TS_SHAPE(3), f);
    CHECK(ts_addmm(ts_ones(TS_SHAPE(2, 4), f), m23, m44, 1, 1) == NULL);
    CHECK_ERR_HAS(TS_ERR_SHAPE, "addmm");
    CHECK(ts_addmm(ts_ones(TS_SHAPE(3, 4), f), m23, m34, 1, 1) == NULL); /* input bigger */
    CHECK_ERR_HAS(TS_ERR_SHAPE, "cannot be broadcast");
    CHECK(ts_addmm(ts_ones(TS_SHAPE(2, 4), f), v3, m34, 1, 1) == NULL);
    CHECK_ERR_HAS(TS_ERR_SHAPE, "mat1");
    CHECK(ts_addmm(ts_ones(TS_SHAPE(2, 4), f32), m23, m34, 1, 1) == NULL);
    CHECK_ERR_HAS(TS_ERR_DTYPE, "addmm");
    ts_tensor *i23 = ts_ones(TS_SHAPE(2, 3), i64), *i34 = ts_ones(TS_SHAPE(3, 4), i64);
    CHECK(ts_addmm(ts_ones(TS_SHAPE(2, 4), i64), i23, i34, 1, 0.5) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "alpha");
    double iv[8];
    ts_tensor *ir = ts_addmm(ts_ones(TS_SHAPE(2, 4), i64), i23, i34, 2, 3); /* 2 + 3 * 3 = 11 */
    CHECK(ir && ts_dtype_of(ir) == TS_I64 && rd(ir, iv, 8) && iv[0] == 11 && iv[7] == 11);
    /* addr promotes (PyTorch's kernel): int64 input + f64 vectors -> f64, 2 * 1 + 3 * 1 * 1 = 5;
     * all integral: beta and alpha must be integers */
    ts_tensor *pr = ts_addr(ts_ones(TS_SHAPE(2, 3), i64), ts_ones(TS_SHAPE(2), f), v3, 2, 3);
    CHECK(pr && ts_dtype_of(pr) == TS_F64 && rd(pr, iv, 6) && iv[0] == 5 && iv[5] == 5);
    CHECK(ts_addr(ts_ones(TS_SHAPE(2, 3), i64), ts_ones(TS_SHAPE(2), i64),
                  ts_ones(TS_SHAPE(3), i64), 0.5, 1) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "beta");
    CHECK(ts_addr_(ts_ones(TS_SHAPE(2, 3), i64), ts_ones(TS_SHAPE(2), f), v3, 1, 1) == NULL);
    CHECK_ERR_HAS(TS_ERR_DTYPE, "can't be cast");
    CHECK(ts_baddbmm(ts_ones(TS_SHAPE(2, 2, 2), f), ts_ones(TS_SHAPE(2, 2, 3), f),
                     ts_ones(TS_SHAPE(3, 3, 2), f), 1, 1) == NULL);
    CHECK_ERR_HAS(TS_ERR_SHAPE, "baddbmm");
    CHECK(ts_mv(m23, ts_ones(TS_SHAPE(2), f)) == NULL);
    CHECK_ERR_HAS(TS_ERR_SHAPE, "mv");
    CHECK(ts_dot(v3, ts_ones(TS_SHAPE(4), f)) == NULL);
    CHECK_ERR_HAS(TS_ERR_SHAPE, "dot");
    CHECK(ts_dot(v3, ts_ones(TS_SHAPE(3), f32)) == NULL);
    CHECK_ERR_HAS(TS_ERR_DTYPE, "dot");
    CHECK(ts_dot(m23, v3) == NULL);
    CHECK_ERR_HAS(TS_ERR_SHAPE, "1-D");
    CHECK(ts_outer(m23, v3) == NULL);
    CHECK_ERR_HAS(TS_ERR_SHAPE, "outer");
    CHECK(ts_inner(m23, m34) == NULL);
    CHECK_ERR_HAS(TS_ERR_SHAPE, "inner");
    CHECK(ts_tensordot(m23, m34, TS_DIMS(0), TS_DIMS(0)) == NULL);
    CHECK_ERR_HAS(TS_ERR_SHAPE, "contracted dimensions need to match");
    CHECK(ts_tensordot(m23, m34, TS_DIMS(1, 0), TS_DIMS(0)) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "same length");
    CHECK(ts_trace(v3) == NULL);
    CHECK_ERR_HAS(TS_ERR_SHAPE, "trace");
    ts_tensor *one[1] = {m23};
    CHECK(ts_multi_dot(one, 1) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "at least 2");
    ts_tensor *bad[3] = {m23, v3, m34};
    CHECK(ts_multi_dot(bad, 3) == NULL);
    CHECK_ERR_HAS(TS_ERR_SHAPE, "2-D");
    ts_tensor *mis[2] = {m23, m44};
    CHECK(ts_multi_dot(mis, 2) == NULL);
    CHECK_ERR_HAS(TS_ERR_SHAPE, "cannot be multiplied");
    CHECK(ts_kron(ts_ones(TS_SHAPE(1, 1, 1, 1, 2), f), m23) == NULL);
    CHECK_ERR_HAS(TS_ERR_UNSUPPORTED, "kron");
    if (ndev > 1) {
        ts_tensor *o = ts_to(v3, devs[1]);
        CHECK(ts_dot(v3, o) == NULL);
        CHECK_ERR(TS_ERR_DEVICE);
        CHECK(ts_addmv(ts_ones(TS_SHAPE(2), f), m23, o, 1, 1) == NULL);
        CHECK_ERR(TS_ERR_DEVICE);
    }
    CHECK(ts_addmm(NULL, m23, m34, 1, 1) == NULL);
    ts_error_clear();
    ts_scope_end();
    CHECK_OK();
}

int main(void) {
    ndev = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    test_addx();
    test_products();
    test_grads();
    test_errors();
    CHECK_OK();
    return ts_test_finish();
}
