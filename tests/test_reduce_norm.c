/* test_reduce_norm.c — issue 52's norm-type reductions (src/ops/reduce_norm.c) on every device:
 * vector_norm for ord 0, 1, 2, 3, 0.5, -1, inf, -inf over dims against float64 loops, PyTorch's
 * gradients (0 at a zero vector for the 2-norm and general ord, inf ties sharing), matrix_norm
 * (fro, 1, -1, inf, -inf; nuc / 2 / -2 bounds), normalize, var_mean / std_mean, aminmax,
 * count_nonzero, cosine_similarity, pairwise_distance, cdist; ts_gradcheck of each; refusals. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "host_read_util.h"
#include "tessera.h"
#include "ts_test.h"

static ts_device devs[TS_TEST_MAX_DEVICES];
static int ndev;

static void fill(double *v, int64_t n, int seed) {
    for (int64_t i = 0; i < n; i++) v[i] = sin(1.3 * (double)(i + 1) + 0.7 * seed) * 1.5;
}
static ts_tensor *mk(ts_shape s, const double *v, ts_device d, bool rg) {
    ts_tensor *t = ts_detach(ts_to(ts_tensor_f64(s, v, (ts_opts){.dtype = TS_F64}), d));
    if (rg) ts_set_requires_grad(t, true);
    return t;
}

/* ||v[0..n) step s||_p */
static double ref_norm(const double *v, int n, int s, double p) {
    double r = 0;
    if (p == INFINITY || p == -INFINITY) {
        r = fabs(v[0]);
        for (int i = 1; i < n; i++) r = p > 0 ? fmax(r, fabs(v[i * s])) : fmin(r, fabs(v[i * s]));
        return r;
    }
    for (int i = 0; i < n; i++) r += p == 0 ? (v[i * s] != 0) : pow(fabs(v[i * s]), p);
    return p == 0 || p == 1 ? r : pow(r, 1 / p);
}

static void test_vector_norm(void) {
    double x[12], ref[4];
    fill(x, 12, 1);
    x[5] = 0; /* a zero for ord 0 */
    const double ords[] = {0, 1, 2, 3, 0.5, -1, INFINITY, -INFINITY};
    for (int di = 0; di < ndev; di++) {
        ts_scope_begin();
        ts_tensor *t = mk(TS_SHAPE(3, 4), x, devs[di], false);
        for (size_t k = 0; k < sizeof ords / sizeof *ords; k++) {
            const double p = ords[k];
            double all = ref_norm(x, 12, 1, p);
            CHECK(near_all(ts_vector_norm(t, p, (ts_dims){0}, false, TS_DTYPE_DEFAULT), &all, 1,
                           1e-14));
            for (int i = 0; i < 3; i++) ref[i] = ref_norm(x + 4 * i, 4, 1, p);
            ts_tensor *r = ts_vector_norm(t, p, TS_DIMS(-1), true, TS_DTYPE_DEFAULT);
            CHECK(near_all(r, ref, 3, 1e-14) && ts_ndim(r) == 2 && ts_size(r, 1) == 1);
            for (int j = 0; j < 4; j++) ref[j] = ref_norm(x + j, 3, 4, p);
            CHECK(
                near_all(ts_vector_norm(t, p, TS_DIMS(0), false, TS_DTYPE_DEFAULT), ref, 4, 1e-14));
        }
        /* dtype=: computed in float32 */
        ts_tensor *r32 = ts_vector_norm(t, 2, (ts_dims){0}, false, TS_F32);
        double all2 = ref_norm(x, 12, 1, 2);
        CHECK(r32 && ts_dtype_of(r32) == TS_F32 && near_all(r32, &all2, 1, 1e-6));
        /* an empty tensor: 0 for ord >= 0, refused for inf and negative ords */
        ts_tensor *e = ts_zeros(TS_SHAPE(0), (ts_opts){.dtype = TS_F64, .device = devs[di]});
        double z = 0;
        CHECK(near_all(ts_vector_norm(e, 2, (ts_dims){0}, false, TS_DTYPE_DEFAULT), &z, 1, 0));
        CHECK(ts_vector_norm(e, INFINITY, (ts_dims){0}, false, TS_DTYPE_DEFAULT) == NULL);
        CHECK_ERR_HAS(TS_ERR_ARG, "empty");
        ts_scope_end();
        CHECK_OK();
    }
}

/* PyTorch's subgradients: the 2-norm (and 3-norm, 0.5-norm) of a zero vector has gradient 0; the
 * inf norm's gradient is shared by the ties; ord 0 gives 0 */
static void test_norm_grad_edges(void) {
    for (int di = 0; di < ndev; di++) {
        ts_scope_begin();
        const double zero[3] = {0, 0, 0}, ties[4] = {-2, 1, 2, 0.5};
        double g[4];
        const double ps[] = {2, 3, 0.5, 1.5, 0};
        for (size_t k = 0; k < sizeof ps / sizeof *ps; k++) {
            ts_tensor *z = mk(TS_SHAPE(3), zero, devs[di], true);
            ts_backward(ts_vector_norm(z, ps[k], (ts_dims){0}, false, TS_DTYPE_DEFAULT));
            CHECK(rd(ts_grad(z), g, 3) && g[0] == 0 && g[1] == 0 && g[2] == 0);
        }
        ts_tensor *t = mk(TS_SHAPE(4), ties, devs[di], true);
        ts_backward(ts_vector_norm(t, INFINITY, (ts_dims){0}, false, TS_DTYPE_DEFAULT));
        CHECK(rd(ts_grad(t), g, 4) && g[0] == -0.5 && g[1] == 0 && g[2] == 0.5 && g[3] == 0);
        /* the 2-norm's gradient: x / ||x|| */
        const double v[2] = {3, -4};
        ts_tensor *u = mk(TS_SHAPE(2), v, devs[di], true);
        ts_backward(ts_vector_norm(u, 2, (ts_dims){0}, false, TS_DTYPE_DEFAULT));
        CHECK(rd(ts_grad(u), g, 2) && fabs(g[0] - 0.6) < 1e-15 && fabs(g[1] + 0.8) < 1e-15);
        ts_scope_end();
        CHECK_OK();
    }
}

static void test_matrix_and_more(void) {
    double x[24], y[24], ref[24];
    fill(x, 24, 2), fill(y, 24, 3);
    for (int di = 0; di < ndev; di++) {
        const ts_device d = devs[di];
        ts_scope_begin();
        ts_tensor *A = mk(TS_SHAPE(3, 4), x, d, false);
        /* max column sum (1), max row sum (inf), min ones (-1, -inf), fro */
        double cs[4] = {0}, rs[3] = {0};
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 4; j++) cs[j] += fabs(x[i * 4 + j]), rs[i] += fabs(x[i * 4 + j]);
        double m1 = fmax(fmax(cs[0], cs[1]), fmax(cs[2], cs[3]));
        double mm1 = fmin(fmin(cs[0], cs[1]), fmin(cs[2], cs[3]));
        double minf = fmax(rs[0], fmax(rs[1], rs[2])), mminf = fmin(rs[0], fmin(rs[1], rs[2]));
        double fro = ref_norm(x, 12, 1, 2);
        CHECK(near_all(ts_matrix_norm(A, "1", -2, -1, false, 0), &m1, 1, 1e-14));
        CHECK(near_all(ts_matrix_norm(A, "-1", -2, -1, false, 0), &mm1, 1, 1e-14));
        CHECK(near_all(ts_matrix_norm(A, "inf", -2, -1, false, 0), &minf, 1, 1e-14));
        CHECK(near_all(ts_matrix_norm(A, "-inf", -2, -1, false, 0), &mminf, 1, 1e-14));
        CHECK(near_all(ts_matrix_norm(A, "fro", -2, -1, false, 0), &fro, 1, 1e-14));
        /* dims swapped: the transpose's norm; keepdim */
        ts_tensor *k = ts_matrix_norm(A, "inf", -1, 0, true, 0);
        CHECK(near_all(k, &m1, 1, 1e-14) && ts_ndim(k) == 2);
        /* nuc / 2 / -2 come from linalg.svdvals (values checked in test_linalg.c): here the
         * inequalities between the norms, -2 <= 2 <= fro <= nuc <= sqrt(3) fro */
        double nuc = ts_item(ts_matrix_norm(A, "nuc", -2, -1, false, 0));
        double two = ts_item(ts_matrix_norm(A, "2", -2, -1, false, 0));
        double mtwo = ts_item(ts_matrix_norm(A, "-2", -2, -1, false, 0));
        CHECK(mtwo >= 0 && mtwo <= two && two <= fro && fro <= nuc && nuc <= sqrt(3.0) * fro);
        CHECK(two * two >= fro * fro / 3.0);
        CHECK(ts_matrix_norm(A, "3", -2, -1, false, 0) == NULL);
        CHECK_ERR(TS_ERR_ARG);
        /* normalize along dim 1 with p = 1 */
        for (int i = 0; i < 3; i++) {
            double n1 = ref_norm(x + 4 * i, 4, 1, 1);
            for (int j = 0; j < 4; j++) ref[i * 4 + j] = x[i * 4 + j] / n1;
        }
        CHECK(near_all(ts_lp_normalize(A, 1, 1, 1e-12), ref, 12, 1e-14));
        /* var_mean / std_mean over dim 0, correction 1 */
        ts_tensor *mean = NULL;
        ts_tensor *var = ts_var_mean(A, TS_DIMS(0), false, 1, &mean);
        double mv[4], vv[4];
        for (int j = 0; j < 4; j++) {
            mv[j] = (x[j] + x[4 + j] + x[8 + j]) / 3;
            vv[j] = 0;
            for (int i = 0; i < 3; i++) vv[j] += pow(x[i * 4 + j] - mv[j], 2) / 2;
        }
        CHECK(near_all(var, vv, 4, 1e-14) && near_all(mean, mv, 4, 1e-14));
        ts_tensor *sd = ts_std_mean(A, TS_DIMS(0), false, 1, &mean);
        for (int j = 0; j < 4; j++) vv[j] = sqrt(vv[j]);
        CHECK(near_all(sd, vv, 4, 1e-14) && near_all(mean, mv, 4, 1e-14));
        /* aminmax over all and over dim 1 */
        ts_tensor *hi = NULL, *lo = ts_aminmax(A, false, 0, false, &hi);
        double mn = x[0], mx = x[0];
        for (int i = 1; i < 12; i++) mn = fmin(mn, x[i]), mx = fmax(mx, x[i]);
        CHECK(near_all(lo, &mn, 1, 0) && near_all(hi, &mx, 1, 0));
        lo = ts_aminmax(A, true, 1, true, &hi);
        CHECK(lo && hi && ts_ndim(lo) == 2 && ts_size(hi, 0) == 3);
        /* count_nonzero */
        const double nzv[6] = {0, 1, 0, 2, 3, 0};
        ts_tensor *c = ts_count_nonzero(mk(TS_SHAPE(2, 3), nzv, d, false), TS_DIMS(1));
        double cnt[2];
        CHECK(c && ts_dtype_of(c) == TS_I64 && rd(c, cnt, 2) && cnt[0] == 1 && cnt[1] == 2);
        /* cosine_similarity along dim 1 */
        ts_tensor *B = mk(TS_SHAPE(3, 4), y, d, false);
        for (int i = 0; i < 3; i++) {
            double s = 0;
            for (int j = 0; j < 4; j++) s += x[i * 4 + j] * y[i * 4 + j];
            ref[i] = s / (ref_norm(x + 4 * i, 4, 1, 2) * ref_norm(y + 4 * i, 4, 1, 2));
        }
        CHECK(near_all(ts_cosine_similarity(A, B, 1, 1e-8), ref, 3, 1e-14));
        /* pairwise_distance, p = 3 */
        for (int i = 0; i < 3; i++) {
            double s = 0;
            for (int j = 0; j < 4; j++) s += pow(fabs(x[i * 4 + j] - y[i * 4 + j] + 1e-6), 3);
            ref[i] = cbrt(s);
        }
        CHECK(near_all(ts_pairwise_distance(A, B, 3, 1e-6, false), ref, 3, 1e-13));
        /* cdist [3, 4] x [2, 4] for p = 2, 1, inf */
        const double cps[] = {2, 1, INFINITY, 0.5};
        for (size_t q = 0; q < sizeof cps / sizeof *cps; q++) {
            for (int i = 0; i < 3; i++)
                for (int j = 0; j < 2; j++) {
                    double dv[4];
                    for (int l = 0; l < 4; l++) dv[l] = x[i * 4 + l] - y[j * 4 + l];
                    ref[i * 2 + j] = ref_norm(dv, 4, 1, cps[q]);
                }
            ts_tensor *cd = ts_cdist(A, mk(TS_SHAPE(2, 4), y, d, false), cps[q]);
            CHECK(near_all(cd, ref, 6, 1e-13) && ts_size(cd, 0) == 3 && ts_size(cd, 1) == 2);
        }
        ts_scope_end();
        CHECK_OK();
    }
}

/* ------------------------------------------------------------------ gradients */
typedef enum {
    G_VN2,
    G_VN3,
    G_VN05,
    G_VNI,
    G_VN1,
    G_MN1,
    G_MNI,
    G_NORMALIZE,
    G_VARMEAN,
    G_STDMEAN,
    G_COS,
    G_PAIR,
    G_CDIST2,
    G_CDIST15
} gk;
static ts_tensor *g_fn(ts_tensor *const *in, int n, void *ctx) {
    (void)n;
    ts_tensor *m = NULL, *v;
    switch ((gk)(intptr_t)ctx) {
    case G_VN2:
        return ts_vector_norm(in[0], 2, TS_DIMS(1), false, 0);
    case G_VN3:
        return ts_vector_norm(in[0], 3, TS_DIMS(0, 1), true, 0);
    case G_VN05:
        return ts_vector_norm(in[0], 0.5, TS_DIMS(0), false, 0);
    case G_VNI:
        return ts_vector_norm(in[0], -INFINITY, TS_DIMS(1), false, 0);
    case G_VN1:
        return ts_vector_norm(in[0], -1.5, (ts_dims){0}, false, 0);
    case G_MN1:
        return ts_matrix_norm(in[0], "1", -2, -1, false, 0);
    case G_MNI:
        return ts_matrix_norm(in[0], "-inf", 0, 1, true, 0);
    case G_NORMALIZE:
        return ts_lp_normalize(in[0], 2, 1, 1e-12);
    case G_VARMEAN:
        v = ts_var_mean(in[0], TS_DIMS(1), false, 0.5, &m);
        return ts_add(v, ts_mul_scalar(m, 3));
    case G_STDMEAN:
        v = ts_std_mean(in[0], (ts_dims){0}, false, 1, &m);
        return ts_add(v, ts_mul_scalar(m, 3));
    case G_COS:
        return ts_cosine_similarity(in[0], in[1], -1, 1e-8);
    case G_PAIR:
        return ts_pairwise_distance(in[0], in[1], 2.5, 1e-6, false);
    case G_CDIST2:
        return ts_cdist(in[0], in[1], 2);
    case G_CDIST15:
        return ts_cdist(in[0], in[1], 1.5);
    }
    return NULL;
}

static void test_grads(void) {
    double v[2][64];
    fill(v[0], 64, 7), fill(v[1], 64, 8);
    const ts_gradcheck_opts go = {.eps = 1e-6, .atol = 1e-6, .rtol = 1e-5};
    struct {
        gk k;
        int n;
        ts_shape s[2];
    } cases[] = {
        {G_VN2, 1, {TS_SHAPE(3, 4)}},
        {G_VN3, 1, {TS_SHAPE(3, 4)}},
        {G_VN05, 1, {TS_SHAPE(3, 4)}},
        {G_VNI, 1, {TS_SHAPE(3, 4)}},
        {G_VN1, 1, {TS_SHAPE(2, 3)}},
        {G_MN1, 1, {TS_SHAPE(2, 3, 4)}},
        {G_MNI, 1, {TS_SHAPE(3, 4)}},
        {G_NORMALIZE, 1, {TS_SHAPE(2, 3, 2)}},
        {G_VARMEAN, 1, {TS_SHAPE(3, 4)}},
        {G_STDMEAN, 1, {TS_SHAPE(3, 4)}},
        {G_COS, 2, {TS_SHAPE(2, 1, 3), TS_SHAPE(2, 3)}},
        {G_PAIR, 2, {TS_SHAPE(3, 4), TS_SHAPE(4)}},
        {G_CDIST2, 2, {TS_SHAPE(2, 3, 4), TS_SHAPE(2, 4)}},
        {G_CDIST15, 2, {TS_SHAPE(3, 2), TS_SHAPE(4, 2)}},
    };
    for (int di = 0; di < ndev; di++)
        for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
            ts_scope_begin();
            ts_tensor *in[2];
            for (int i = 0; i < cases[c].n; i++) in[i] = mk(cases[c].s[i], v[i], devs[di], true);
            const bool ok = ts_gradcheck(g_fn, (void *)(intptr_t)cases[c].k, in, cases[c].n, go);
            ts_scope_end();
            ts_test_record(ok);
            if (!ok)
                ts_test_failf(__FILE__, __LINE__, "gradcheck case %d on %s%s", (int)c,
                              ts_device_str(devs[di]), ts_test_error_str());
            ts_error_clear();
        }
}

static void test_errors(void) {
    ts_scope_begin();
    ts_tensor *i = ts_ones(TS_SHAPE(3), (ts_opts){.dtype = TS_I64});
    ts_tensor *f = ts_ones(TS_SHAPE(2, 3), (ts_opts){.dtype = TS_F64});
    CHECK(ts_vector_norm(i, 2, (ts_dims){0}, false, 0) == NULL);
    CHECK_ERR_HAS(TS_ERR_DTYPE, "vector_norm");
    CHECK(ts_vector_norm(f, 2, TS_DIMS(2), false, 0) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "out of range");
    CHECK(ts_vector_norm(f, 2, TS_DIMS(1, -1), false, 0) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "multiple times");
    CHECK(ts_vector_norm(f, NAN, (ts_dims){0}, false, 0) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_matrix_norm(ts_ones(TS_SHAPE(3), (ts_opts){.dtype = TS_F64}), "fro", -2, -1, false,
                         0) == NULL);
    CHECK_ERR_HAS(TS_ERR_SHAPE, "at least 2");
    CHECK(ts_matrix_norm(f, "fro", 1, -1, false, 0) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "different");
    CHECK(ts_cdist(f, ts_ones(TS_SHAPE(2, 4), (ts_opts){.dtype = TS_F64}), 2) == NULL);
    CHECK_ERR_HAS(TS_ERR_SHAPE, "columns");
    CHECK(ts_cdist(f, f, -1) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "non-negative");
    CHECK(ts_cdist(ts_ones(TS_SHAPE(3), (ts_opts){.dtype = TS_F64}), f, 2) == NULL);
    CHECK_ERR_HAS(TS_ERR_SHAPE, "2D");
    CHECK(ts_cosine_similarity(i, i, 0, 1e-8) == NULL);
    CHECK_ERR_HAS(TS_ERR_DTYPE, "floating point");
    CHECK(ts_aminmax(ts_zeros(TS_SHAPE(0), (ts_opts){.dtype = TS_F64}), false, 0, false, NULL) ==
          NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "empty");
    ts_scope_end();
    CHECK_OK();
}

int main(void) {
    ndev = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    test_vector_norm();
    test_norm_grad_edges();
    test_matrix_and_more();
    test_grads();
    test_errors();
    CHECK_OK();
    return ts_test_finish();
}
