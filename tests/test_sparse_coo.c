/* test_sparse_coo.c — include/tessera/sparse.h (src/ops/sparse_coo.c) on every device against
 * dense float64 host references: construction (inferred size, PyTorch's refusals), coalesce
 * (duplicates summed, sorted), to_dense, to_sparse of a dense tensor (hybrid too), transpose, mul
 * by a scalar and by a dense tensor, sums over dims, sparse @ dense and addmm; gradients of mm and
 * mul through the values and the dense operand by ts_gradcheck. */
#include <math.h>
#include <string.h>

#include "host_values.h"
#include "tessera.h"
#include "tessera/sparse.h"
#include "ts_test.h"

static double got[256];
#define rd(t) ts_test_read_f64(t, got, 256)

/* entries (0,1)=1 (2,0)=2 (0,1)=3 (1,2)=4 of a 3 x 3 matrix: dense [[0,4,0],[0,0,4],[2,0,0]] */
static const int64_t IDX[8] = {0, 2, 0, 1, 1, 0, 1, 2};
static const double VAL[4] = {1, 2, 3, 4};
static const double DENSE[9] = {0, 4, 0, 0, 0, 4, 2, 0, 0};

static ts_coo make(ts_device d, bool grad) {
    ts_coo c = {0};
    ts_tensor *i = ts_tensor_i64(TS_SHAPE(2, 4), IDX, (ts_opts){.dtype = TS_I64, .device = d});
    ts_tensor *v = ts_test_tensor_f64(TS_SHAPE(4), VAL, TS_F64, d);
    if (grad) ts_set_requires_grad(v, true);
    const ts_shape s = TS_SHAPE(3, 3);
    CHECK(ts_sparse_coo_tensor(i, v, &s, -1, false, &c) == TS_OK);
    return c;
}

static void test_build(ts_device d) {
    ts_coo c = make(d, false), k;
    CHECK(!c.coalesced && c.size.ndim == 2);
    /* inferred size: the largest index + 1 */
    CHECK(ts_sparse_coo_tensor(c.indices, c.values, NULL, -1, false, &k) == TS_OK &&
          k.size.dims[0] == 3 && k.size.dims[1] == 3);
    CHECK(ts_sparse_coalesce(c, &k) == TS_OK && k.coalesced &&
          ts_test_shape_is(k.indices, TS_SHAPE(2, 3)));
    CHECK(rd(k.values) && got[0] == 4 && got[1] == 4 && got[2] == 2); /* (0,1), (1,2), (2,0) */
    CHECK(rd(k.indices) && got[0] == 0 && got[1] == 1 && got[2] == 2 && got[3] == 1 &&
          got[4] == 2 && got[5] == 0);
    /* refusals with PyTorch's messages */
    const ts_shape small = TS_SHAPE(2, 3);
    CHECK(ts_sparse_coo_tensor(c.indices, c.values, &small, -1, false, &k) != TS_OK);
    CHECK_ERR_HAS(TS_ERR_ARG,
                  "size is inconsistent with indices: for dim 0, size is 2 but found index 2");
    const ts_shape one = TS_SHAPE(3);
    CHECK(ts_sparse_coo_tensor(c.indices, c.values, &one, -1, false, &k) != TS_OK);
    CHECK_ERR_HAS(TS_ERR_SHAPE, "'len(size) == sparse_dim + dense_dim' is not satisfied: len(size) "
                                "= 1, sparse_dim = 2, dense_dim = 0");
    CHECK(ts_sparse_coo_tensor(c.indices, ts_narrow(c.values, 0, 0, 3), NULL, -1, false, &k) !=
          TS_OK);
    CHECK_ERR_HAS(
        TS_ERR_SHAPE,
        "indices and values must have same nnz, but got nnz from indices: 4, nnz from values: 3");
    const ts_shape s33 = TS_SHAPE(3, 3);
    CHECK(ts_sparse_coo_tensor(c.indices, c.values, &s33, 1, true, &k) != TS_OK);
    CHECK_ERR_HAS(TS_ERR_ARG, "is_coalesced=True but the indices are not sorted and unique");
    int64_t neg[2] = {0, -1};
    CHECK(ts_sparse_coo_tensor(
              ts_tensor_i64(TS_SHAPE(1, 2), neg, (ts_opts){.dtype = TS_I64, .device = d}),
              ts_narrow(c.values, 0, 0, 2), NULL, -1, false, &k) != TS_OK);
    CHECK_ERR_HAS(TS_ERR_ARG, "found negative index -1 for dim 0");
    CHECK_OK();
}

static void test_convert_transpose(ts_device d) {
    ts_tensor *x = ts_test_tensor_f64(TS_SHAPE(3, 3), DENSE, TS_F64, d);
    ts_coo s, t;
    CHECK(ts_dense_to_sparse(x, -1, &s) == TS_OK && s.coalesced &&
          ts_test_shape_is(s.values, TS_SHAPE(3)));
    CHECK(rd(s.values) && got[0] == 4 && got[1] == 4 && got[2] == 2);
    /* to_dense: duplicates summed */
    CHECK(rd(ts_sparse_to_dense(make(d, false))));
    for (int i = 0; i < 9; i++) CHECK(got[i] == DENSE[i]);
    /* negative values and NaN count as nonzero */
    const double sv[4] = {0, -1, NAN, 2};
    CHECK(ts_dense_to_sparse(ts_test_tensor_f64(TS_SHAPE(4), sv, TS_F64, d), -1, &s) == TS_OK &&
          rd(s.indices) && ts_test_shape_is(s.indices, TS_SHAPE(1, 3)) && got[0] == 1 &&
          got[1] == 2 && got[2] == 3);
    /* hybrid: rows with a nonzero, the rows as dense values */
    CHECK(ts_dense_to_sparse(x, 1, &s) == TS_OK && ts_test_shape_is(s.values, TS_SHAPE(3, 3)));
    CHECK(ts_dense_to_sparse(x, 3, &s) != TS_OK);
    CHECK_ERR_HAS(TS_ERR_ARG, "sparse_dim argument must be in [0,2] range, but 3 is given");
    /* transpose of the two sparse dims, checked through sum over dim 0 (= column sums) */
    ts_coo c = make(d, false);
    ts_tensor *dense = NULL;
    CHECK(ts_sparse_transpose(c, 0, 1, &t) == TS_OK && !t.coalesced);
    const ts_dims d1 = {.n = 1, .d = {1}};
    CHECK(ts_sparse_sum(t, &d1, TS_DTYPE_DEFAULT, &s, &dense) == TS_OK && !dense && s.coalesced);
    /* row sums of the transpose = column sums of DENSE: 2, 4, 4 */
    CHECK(rd(s.values) && got[0] == 2 && got[1] == 4 && got[2] == 4);
    CHECK(ts_sparse_sum(c, NULL, TS_DTYPE_DEFAULT, &s, &dense) == TS_OK && dense &&
          ts_item(dense) == 10);
    const ts_dims both = {.n = 2, .d = {0, 1}};
    CHECK(ts_sparse_sum(c, &both, TS_DTYPE_DEFAULT, &s, &dense) == TS_OK && dense &&
          ts_item(dense) == 10);
    CHECK(ts_sparse_transpose(c, 0, 2, &t) != TS_OK);
    CHECK_ERR(TS_ERR_ARG);
    /* hybrid [2, 3 | 2] summed over sparse dim 0: sparse [3 | 2], the dense dim kept */
    const double X[12] = {1, 0, 0, 0, 2, 3, 0, 4, 5, 0, 0, 0};
    const ts_dims d0 = {.n = 1, .d = {0}};
    CHECK(ts_dense_to_sparse(ts_test_tensor_f64(TS_SHAPE(2, 3, 2), X, TS_F64, d), 2, &s) == TS_OK);
    CHECK(ts_sparse_sum(s, &d0, TS_DTYPE_DEFAULT, &t, &dense) == TS_OK && !dense &&
          t.size.ndim == 2 && t.size.dims[0] == 3 && t.size.dims[1] == 2);
    const double colsum[6] = {1, 4, 5, 0, 2, 3};
    CHECK(rd(ts_sparse_to_dense(t)));
    for (int i = 0; i < 6; i++) CHECK(got[i] == colsum[i]);
    CHECK(ts_sparse_coalesce(c, NULL) != TS_OK);
    CHECK_ERR_HAS(TS_ERR_ARG, "coalesce: out is NULL");
    CHECK_OK();
}

static void test_products(ts_device d) {
    ts_coo c = make(d, false), m;
    double w[9];
    ts_test_fill_uniform(w, 9, 3);
    ts_tensor *W = ts_test_tensor_f64(TS_SHAPE(3, 3), w, TS_F64, d);
    CHECK(ts_sparse_mul(c, W, &m) == TS_OK && rd(m.values));
    for (int j = 0; j < 4; j++) CHECK(got[j] == VAL[j] * w[IDX[j] * 3 + IDX[4 + j]]);
    CHECK(ts_sparse_mul(c, ts_scalar(2.5, (ts_opts){.dtype = TS_F64}), &m) == TS_OK &&
          rd(m.values) && got[3] == 10);
    /* sparse @ dense against DENSE @ W */
    CHECK(rd(ts_sparse_mm(c, W)));
    for (int i = 0; i < 3; i++)
        for (int k = 0; k < 3; k++) {
            double s = 0;
            for (int j = 0; j < 3; j++) s += DENSE[i * 3 + j] * w[j * 3 + k];
            CHECK(fabs(got[i * 3 + k] - s) < 1e-15 * 16);
        }
    /* addmm: 0.5 W + 2 (S @ W) */
    CHECK(rd(ts_sparse_addmm(W, c, W, 0.5, 2.0)));
    for (int i = 0; i < 3; i++) {
        double s = 0;
        for (int j = 0; j < 3; j++) s += DENSE[i * 3 + j] * w[j * 3];
        CHECK(fabs(got[i * 3] - (0.5 * w[i * 3] + 2 * s)) < 1e-14);
    }
    CHECK(!ts_sparse_mm(c, ts_ones(TS_SHAPE(4, 2), (ts_opts){.dtype = TS_F64, .device = d})));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "cannot be multiplied");
    CHECK(!ts_sparse_mm(c, ts_ones(TS_SHAPE(3, 2), (ts_opts){.dtype = TS_F32, .device = d})));
    CHECK_ERR_HAS(TS_ERR_DTYPE, "same dtype");
    CHECK_OK();
}

/* gradients through the values and the dense operand */
static ts_tensor *g_mm(ts_tensor *const *x, int n, void *ctx) {
    (void)n, (void)ctx;
    ts_coo c = {.indices = ts_tensor_i64(TS_SHAPE(2, 4), IDX, (ts_opts){.dtype = TS_I64}),
                .values = x[0],
                .size = TS_SHAPE(3, 3)};
    ts_coo m;
    if (ts_sparse_mul(c, x[1], &m) != TS_OK) return NULL;
    return ts_add(ts_sum(ts_mul(ts_sparse_mm(c, x[1]), ts_sparse_mm(m, x[1]))), ts_sum(m.values));
}

int main(void) {
    ts_device devs[TS_TEST_MAX_DEVICES];
    const int nd = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    for (int i = 0; i < nd; i++) {
        ts_scope_begin();
        test_build(devs[i]);
        test_convert_transpose(devs[i]);
        test_products(devs[i]);
        ts_scope_end();
        CHECK_OK();
    }
    ts_scope_begin();
    double w[9];
    ts_test_fill_uniform(w, 9, 5);
    ts_tensor *x[2] = {ts_tensor_f64(TS_SHAPE(4), VAL, (ts_opts){.dtype = TS_F64}),
                       ts_tensor_f64(TS_SHAPE(3, 3), w, (ts_opts){.dtype = TS_F64})};
    ts_set_requires_grad(x[0], true), ts_set_requires_grad(x[1], true);
    const bool ok = ts_gradcheck(g_mm, NULL, x, 2, (ts_gradcheck_opts){.atol = 1e-6, .rtol = 1e-4});
    ts_test_record(ok);
    if (!ok) ts_test_failf(__FILE__, __LINE__, "gradcheck sparse mul / mm%s", ts_test_error_str());
    ts_scope_end();
    CHECK_OK();
    return ts_test_finish();
}
