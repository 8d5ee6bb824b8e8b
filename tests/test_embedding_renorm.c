/* test_embedding_renorm.c — ts_embedding_renorm_ (PyTorch's embedding_renorm_, F.embedding's and
 * F.embedding_bag's max_norm), ts_embedding_ex and ts_embedding_bag_ex on every test device: the
 * rows named (repeats included) whose p-norm exceeds max_norm scaled to max_norm / (norm + 1e-7)
 * against a float64 reference written here (p = 2, 1, 3.5, inf), the other rows bit-identical;
 * the renorm outside autograd (weight stays a leaf; the lookup's gradient is the plain
 * embedding's, exact with small integers); negative padding_idx counted from the end; refusals. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "host_values.h"
#include "ts_test.h"

#define ROWS 6
#define DIM  4
#define N    7

static const int64_t IDX[N] = {4, 0, 2, 4, 5, 0, 4}; /* rows 1 and 3 not named */

/* weight: rows of norms around 1, rows 0, 3, 4 scaled up (3 is not named: stays) */
static void fill_weight(double *w) {
    ts_test_fill_uniform(w, ROWS * DIM, 17);
    for (int d = 0; d < DIM; d++) w[0 * DIM + d] *= 5, w[3 * DIM + d] *= 7, w[4 * DIM + d] *= 3;
}

static double pnorm(const double *r, double p) {
    double s = 0, m = 0;
    for (int d = 0; d < DIM; d++) s += pow(fabs(r[d]), p), m = fmax(m, fabs(r[d]));
    return isinf(p) ? m : pow(s, 1 / p);
}

static void reference(const double *w, double max_norm, double p, double *out) {
    memcpy(out, w, sizeof(double) * ROWS * DIM);
    bool named[ROWS] = {false};
    for (int i = 0; i < N; i++) named[IDX[i]] = true;
    for (int r = 0; r < ROWS; r++) {
        const double nrm = pnorm(w + r * DIM, p);
        if (named[r] && nrm > max_norm)
            for (int d = 0; d < DIM; d++)
                out[r * DIM + d] = w[r * DIM + d] * (max_norm / (nrm + 1e-7));
    }
}

static void check_renorm(ts_device dev, ts_dtype dt, double p, bool i32) {
    double w[ROWS * DIM], want[ROWS * DIM], got[ROWS * DIM];
    fill_weight(w);
    ts_scope_begin();
    ts_tensor *wt = ts_test_tensor_f64(TS_SHAPE(ROWS, DIM), w, dt, dev);
    double wr[ROWS * DIM]; /* the weight as stored (float32 rounds it) */
    ts_test_read_f64(wt, wr, ROWS * DIM);
    const double max_norm = 1.5;
    reference(wr, max_norm, p, want);
    ts_set_requires_grad(wt, true);
    ts_tensor *idx;
    if (i32) {
        int32_t v[N];
        for (int i = 0; i < N; i++) v[i] = (int32_t)IDX[i];
        idx = ts_tensor_i32(TS_SHAPE(N), v, (ts_opts){.device = dev});
    } else {
        idx = ts_tensor_i64(TS_SHAPE(N), IDX, (ts_opts){.device = dev});
    }
    const uint64_t v0 = ts_version(wt);
    ts_tensor *r = ts_embedding_renorm_(wt, idx, max_norm, p);
    CHECK(r == wt);
    CHECK_OK();
    CHECK(ts_is_leaf(wt) && ts_grad_fn_name(wt) == NULL && ts_version(wt) > v0);
    bool ok = ts_test_read_f64(wt, got, ROWS * DIM);
    /* the norm's sum and root, the quotient and the product: a few roundings of each value */
    const double tol = (dt == TS_F64 ? 1.1e-16 : 6e-8) * 16;
    double worst = 0;
    for (int i = 0; ok && i < ROWS * DIM; i++) {
        const double e = fabs(got[i] - want[i]) / fmax(fabs(want[i]), 1e-300);
        worst = fmax(worst, e);
        ok &= e <= tol;
    }
    for (int d = 0; ok && d < DIM; d++) /* rows not named: untouched */
        ok &= got[1 * DIM + d] == wr[1 * DIM + d] && got[3 * DIM + d] == wr[3 * DIM + d];
    CHECK(ok);
    if (!ok)
        printf("  renorm p=%g on %s (%s%s): worst relative error %g > %g\n", p, ts_device_str(dev),
               ts_dtype_name(dt), i32 ? ", int32" : "", worst, tol);
    ts_scope_end();
}

/* ts_embedding_ex(max_norm, padding_idx -1): the looked-up rows are the renormed ones; the
 * gradient is the plain embedding's (each row the sum of its uses' upstream, the last row, the
 * padding one, zero), nothing through the renorm */
static void check_lookup(ts_device dev, ts_dtype dt) {
    double w[ROWS * DIM], want[ROWS * DIM], y[N * DIM], g[ROWS * DIM], up[N * DIM];
    fill_weight(w);
    for (int i = 0; i < N * DIM; i++) up[i] = i + 1;
    ts_scope_begin();
    ts_tensor *wt = ts_test_tensor_f64(TS_SHAPE(ROWS, DIM), w, dt, dev);
    double wr[ROWS * DIM];
    ts_test_read_f64(wt, wr, ROWS * DIM);
    reference(wr, 2.0, 2.0, want);
    ts_set_requires_grad(wt, true);
    ts_tensor *idx = ts_tensor_i64(TS_SHAPE(N), IDX, (ts_opts){.device = dev});
    ts_embedding_opts o = {.has_padding_idx = true,
                           .padding_idx = -1,
                           .has_max_norm = true,
                           .max_norm = 2.0,
                           .norm_type = 2.0};
    ts_tensor *out = ts_embedding_ex(wt, idx, o);
    CHECK_OK();
    bool ok = out && ts_test_read_f64(out, y, N * DIM);
    const double tol = (dt == TS_F64 ? 1.1e-16 : 6e-8) * 16;
    for (int i = 0; ok && i < N; i++)
        for (int d = 0; d < DIM; d++)
            ok &=
                fabs(y[i * DIM + d] - want[IDX[i] * DIM + d]) <= tol * fabs(want[IDX[i] * DIM + d]);
    CHECK(ok);
    CHECK(out && ts_backward(ts_sum(
                     ts_mul(out, ts_test_tensor_f64(TS_SHAPE(N, DIM), up, dt, dev)))) == TS_OK);
    ok = ts_test_read_f64(ts_grad(wt), g, ROWS * DIM);
    double gw[ROWS * DIM] = {0};
    for (int i = 0; i < N; i++)
        if (IDX[i] != ROWS - 1)
            for (int d = 0; d < DIM; d++) gw[IDX[i] * DIM + d] += up[i * DIM + d];
    for (int i = 0; ok && i < ROWS * DIM; i++) ok &= g[i] == gw[i];
    CHECK(ok);
    if (!ok)
        printf("  lookup gradient on %s (%s): row 4 %g %g\n", ts_device_str(dev), ts_dtype_name(dt),
               g[16], g[17]);
    ts_scope_end();
}

/* ts_embedding_bag_ex(sum, max_norm, padding_idx -2 = row 4): each bag the sum of its renormed
 * rows, row 4 left out */
static void check_bag(ts_device dev) {
    double w[ROWS * DIM], want[ROWS * DIM], y[2 * DIM];
    fill_weight(w);
    reference(w, 1.5, 1.0, want);
    ts_scope_begin();
    ts_tensor *wt = ts_test_tensor_f64(TS_SHAPE(ROWS, DIM), w, TS_F64, dev);
    ts_tensor *idx = ts_tensor_i64(TS_SHAPE(N), IDX, (ts_opts){.device = dev});
    const int64_t offs[2] = {0, 3};
    ts_tensor *off = ts_tensor_i64(TS_SHAPE(2), offs, (ts_opts){.device = dev});
    ts_embedding_opts o = {.has_padding_idx = true,
                           .padding_idx = -2,
                           .has_max_norm = true,
                           .max_norm = 1.5,
                           .norm_type = 1.0};
    ts_tensor *out = ts_embedding_bag_ex(wt, idx, off, 0, NULL, false, o);
    CHECK_OK();
    bool ok = out && ts_test_read_f64(out, y, 2 * DIM);
    for (int b = 0; ok && b < 2; b++)
        for (int d = 0; d < DIM; d++) {
            double s = 0;
            for (int i = b ? 3 : 0; i < (b ? N : 3); i++)
                if (IDX[i] != 4) s += want[IDX[i] * DIM + d];
            ok &= fabs(y[b * DIM + d] - s) <= 1e-14 * (1 + fabs(s));
        }
    CHECK(ok);
    ts_scope_end();
}

static void test_errors(void) {
    ts_scope_begin();
    double w[ROWS * DIM], before[ROWS * DIM], after[ROWS * DIM];
    fill_weight(w);
    ts_tensor *wt = ts_test_tensor_f64(TS_SHAPE(ROWS, DIM), w, TS_F32, ts_cpu());
    ts_test_read_f64(wt, before, ROWS * DIM);
    const int64_t bad[2] = {1, ROWS};
    CHECK(!ts_embedding_renorm_(wt, ts_tensor_i64(TS_SHAPE(2), bad, (ts_opts){0}), 1.0, 2.0));
    CHECK_ERR_HAS(TS_ERR_ARG, "embedding_renorm_: index 6 is out of range"); /* its own message */
    ts_test_read_f64(wt, after, ROWS * DIM);                                 /* nothing written */
    CHECK(memcmp(before, after, sizeof before) == 0);
    ts_tensor *idx = ts_tensor_i64(TS_SHAPE(N), IDX, (ts_opts){0});
    CHECK(!ts_embedding_renorm_(ts_zeros(TS_SHAPE(ROWS), (ts_opts){0}), idx, 1.0, 2.0));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "2-D");
    CHECK(!ts_embedding_renorm_(wt, ts_zeros(TS_SHAPE(2), (ts_opts){0}), 1.0, 2.0));
    CHECK_ERR_HAS(TS_ERR_DTYPE, "int64 or int32");
    ts_device devs[TS_TEST_MAX_DEVICES]; /* indices on another device than the weight */
    if (ts_test_devices(devs, TS_TEST_MAX_DEVICES) > 1 && devs[1].type != TS_CPU) {
        CHECK(!ts_embedding_renorm_(wt, ts_to(idx, devs[1]), 1.0, 2.0));
        CHECK(ts_error() == TS_ERR_DEVICE);
        ts_error_clear();
    }
    /* a 1-D weight: PyTorch's message, not a padding_idx range of 0 rows */
    CHECK(!ts_embedding_ex(ts_zeros(TS_SHAPE(ROWS), (ts_opts){0}), idx,
                           (ts_embedding_opts){.has_padding_idx = true, .padding_idx = -1}));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "embedding: 'weight' must be 2-D");
    CHECK(!ts_embedding_ex(wt, idx,
                           (ts_embedding_opts){.has_padding_idx = true, .padding_idx = ROWS}));
    CHECK_ERR_HAS(TS_ERR_ARG, "Padding_idx must be within num_embeddings");
    CHECK(!ts_embedding_ex(wt, idx,
                           (ts_embedding_opts){.has_padding_idx = true, .padding_idx = -ROWS - 1}));
    CHECK_ERR_HAS(TS_ERR_ARG, "Padding_idx must be within num_embeddings");
    CHECK(!ts_embedding_bag_ex(wt, idx, NULL, 0, NULL, false,
                               (ts_embedding_opts){.has_padding_idx = true, .padding_idx = ROWS}));
    CHECK_ERR_HAS(TS_ERR_ARG, "padding_idx must be within the number of embeddings");
    /* -ROWS is row 0: the same values as padding_idx 0; zero-initialised opts: ts_embedding */
    ts_tensor *a = ts_embedding_ex(
        wt, idx, (ts_embedding_opts){.has_padding_idx = true, .padding_idx = -ROWS});
    ts_tensor *b = ts_embedding_ex(wt, idx, (ts_embedding_opts){0}), *c = ts_embedding(wt, idx);
    CHECK(a && b && c && ts_equal(a, c) && ts_equal(b, c));
    CHECK_OK();
    ts_scope_end();
}

int main(void) {
    ts_device devs[TS_TEST_MAX_DEVICES];
    const int nd = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    static const double ps[4] = {2.0, 1.0, 3.5, INFINITY};
    for (int k = 0; k < nd; k++) {
        for (int i = 0; i < 4; i++) {
            check_renorm(devs[k], TS_F64, ps[i], false);
            check_renorm(devs[k], TS_F32, ps[i], i == 1);
        }
        check_lookup(devs[k], TS_F64);
        check_lookup(devs[k], TS_F32);
        check_bag(devs[k]);
    }
    test_errors();
    return ts_test_finish();
}
