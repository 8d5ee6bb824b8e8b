/* test_nn_init_schemes.c — torch.nn.init's calculate_gain, kaiming (every mode and nonlinearity),
 * xavier_normal_, trunc_normal_, orthogonal_, sparse_ and dirac_ (src/nn/init.c) on cpu and
 * sim:0. The random ones are checked exactly against the same generator's plain draws scaled by
 * the float64 formula (same seed), or by their defining property (orthogonality, the zero count,
 * the inverse CDF). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "ts_test.h"

static void host(ts_tensor *t, double *out) {
    ts_copy_to_host(ts_contiguous(ts_to_dtype(ts_to(t, ts_cpu()), TS_F64)), out,
                    (size_t)ts_numel(t) * sizeof(double));
}

static void test_gain(void) {
    CHECK(ts_init_calculate_gain("linear", NAN) == 1.0);
    CHECK(ts_init_calculate_gain("conv_transpose3d", NAN) == 1.0);
    CHECK(ts_init_calculate_gain("sigmoid", NAN) == 1.0);
    CHECK(ts_init_calculate_gain("tanh", NAN) == 5.0 / 3);
    CHECK(ts_init_calculate_gain("relu", NAN) == sqrt(2.0));
    CHECK(ts_init_calculate_gain("leaky_relu", NAN) == sqrt(2.0 / (1 + 0.01 * 0.01)));
    CHECK(ts_init_calculate_gain("leaky_relu", 0.2) == sqrt(2.0 / 1.04));
    CHECK(ts_init_calculate_gain("selu", NAN) == 0.75);
    CHECK(isnan(ts_init_calculate_gain("gelu", NAN)));
    CHECK_ERR_HAS(TS_ERR_ARG, "Unsupported nonlinearity gelu");
}

/* t filled by `init` equals, draw for draw, a plain U(-bound, bound) or N(0, std) fill from the
 * same seed: the formula's float64 value is the only difference allowed (none) */
typedef enum { KU_IN_RELU, KN_OUT_TANH, KU_OUT_SELU, KN_IN_LEAKY, XN } init_case;

static void test_scaled_draws(ts_device dev) {
    const ts_opts o = {.dtype = TS_F64, .device = dev};
    for (int k = 0; k <= XN; k++) {
        ts_scope_begin();
        ts_tensor *t = ts_empty(TS_SHAPE(6, 5, 3), o), *ref = ts_empty(TS_SHAPE(6, 5, 3), o);
        const double fan_in = 5 * 3, fan_out = 6 * 3;
        double std = 0;
        bool normal = true;
        ts_manual_seed(1234);
        switch (k) {
        case KU_IN_RELU:
            ts_init_kaiming_(t, 0.7, TS_FAN_IN, "relu", false); /* relu ignores a */
            std = sqrt(2.0) / sqrt(fan_in), normal = false;
            break;
        case KN_OUT_TANH:
            ts_init_kaiming_(t, 0, TS_FAN_OUT, "tanh", true);
            std = 5.0 / 3 / sqrt(fan_out);
            break;
        case KU_OUT_SELU:
            ts_init_kaiming_(t, 0, TS_FAN_OUT, "selu", false);
            std = 0.75 / sqrt(fan_out), normal = false;
            break;
        case KN_IN_LEAKY:
            ts_init_kaiming_(t, 0.3, TS_FAN_IN, "leaky_relu", true);
            std = sqrt(2.0 / (1 + 0.09)) / sqrt(fan_in);
            break;
        case XN:
            ts_init_xavier_normal_(t, 1.5);
            std = 1.5 * sqrt(2.0 / (fan_in + fan_out));
            break;
        }
        CHECK_OK();
        ts_manual_seed(1234);
        if (normal)
            ts_normal_(ref, 0, std);
        else
            ts_uniform_(ref, -sqrt(3.0) * std, sqrt(3.0) * std);
        double a[90], b[90];
        host(t, a), host(ref, b);
        int same = 0;
        for (int i = 0; i < 90; i++) same += a[i] == b[i];
        if (same != 90) printf("  init case %d: %d of 90 draws differ\n", k, 90 - same);
        CHECK_EQ(same, 90);
        ts_scope_end();
    }
    ts_tensor *v = ts_empty(TS_SHAPE(4), (ts_opts){.device = dev});
    CHECK(ts_init_kaiming_(v, 0, TS_FAN_IN, "relu", false) == NULL);
    CHECK_ERR_HAS(TS_ERR_SHAPE, "fewer than 2 dimensions");
    ts_tensor *m = ts_empty(TS_SHAPE(4, 4), (ts_opts){.device = dev});
    CHECK(ts_init_kaiming_(m, 0, TS_FAN_IN, "swish", true) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "Unsupported nonlinearity");
}

/* trunc_normal_: every value in [a, b], and erf((x - mean) / (std sqrt 2)) is the uniform draw of
 * the same seed (the inverse CDF undone in float64: |d erf| <= 2/sqrt(pi) |dx| / (std sqrt 2), so
 * float64 values agree to ~1e-15) */
static void test_trunc_normal(ts_device dev) {
    const ts_opts o = {.dtype = TS_F64, .device = dev};
    const double mean = 0.5, std = 2.0, a = -1.0, b = 3.0;
    ts_tensor *t = ts_empty(TS_SHAPE(200), o), *u = ts_empty(TS_SHAPE(200), o);
    ts_manual_seed(99);
    CHECK(ts_init_trunc_normal_(t, mean, std, a, b) == t);
    const double lo = (1 + erf((a - mean) / std / sqrt(2.0))) / 2,
                 hi = (1 + erf((b - mean) / std / sqrt(2.0))) / 2;
    ts_manual_seed(99);
    ts_uniform_(u, 2 * lo - 1, 2 * hi - 1);
    double x[200], w[200];
    host(t, x), host(u, w);
    int bad = 0;
    for (int i = 0; i < 200; i++) {
        bool in = x[i] >= a && x[i] <= b;
        bool inv = fabs(erf((x[i] - mean) / (std * sqrt(2.0))) - w[i]) <= 1e-13;
        if ((!in || !inv) && bad++ < 3)
            printf("  trunc_normal_ %d: %.17g from %.17g\n", i, x[i], w[i]);
    }
    CHECK_EQ(bad, 0);
    CHECK(ts_init_trunc_normal_(t, 0, 0, -1, 1) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "std > 0");
}

/* orthogonal_: rows < cols gives orthonormal rows, rows > cols orthonormal columns, times gain;
 * Q's column signs are R's diagonal's (so R' = diag(sign) R has a positive diagonal: Q^T A) */
static void test_orthogonal(ts_device dev) {
    const ts_opts o = {.dtype = TS_F64, .device = dev};
    const int64_t shapes[2][3] = {{3, 2, 4}, {10, 2, 2}};
    for (int s = 0; s < 2; s++) {
        ts_scope_begin();
        ts_tensor *t = ts_empty(TS_SHAPE(shapes[s][0], shapes[s][1], shapes[s][2]), o);
        const double gain = 1.5;
        ts_manual_seed(5 + s);
        CHECK(ts_init_orthogonal_(t, gain) == t);
        const int64_t rows = shapes[s][0], cols = shapes[s][1] * shapes[s][2];
        ts_tensor *m = ts_div_scalar(ts_reshape(t, TS_SHAPE(rows, cols)), gain);
        /* the draws again: Q^T A (A the draws, transposed when rows < cols) is R with the signs
         * folded in: upper triangular with a positive diagonal */
        ts_manual_seed(5 + s);
        ts_tensor *draws = ts_randn(TS_SHAPE(rows, cols), o);
        ts_tensor *rp = rows < cols ? ts_matmul(m, ts_transpose(draws, 0, 1))
                                    : ts_matmul(ts_transpose(m, 0, 1), draws);
        double rv[100];
        host(rp, rv);
        const int64_t kk = rows < cols ? rows : cols;
        int wrong = 0;
        for (int64_t i = 0; i < kk; i++)
            for (int64_t j = 0; j < kk; j++)
                wrong += i == j ? !(rv[i * kk + j] > 0) : i > j && !(fabs(rv[i * kk + j]) <= 1e-12);
        CHECK_EQ(wrong, 0);
        ts_tensor *g =
            rows < cols ? ts_matmul(m, ts_transpose(m, 0, 1)) : ts_matmul(ts_transpose(m, 0, 1), m);
        const int64_t k = rows < cols ? rows : cols;
        double v[100];
        host(g, v);
        int bad = 0;
        for (int64_t i = 0; i < k * k; i++)
            bad += !(fabs(v[i] - (i / k == i % k ? 1.0 : 0.0)) <= 1e-13);
        CHECK_EQ(bad, 0);
        ts_scope_end();
    }
    ts_tensor *v = ts_empty(TS_SHAPE(4), o);
    CHECK(ts_init_orthogonal_(v, 1) == NULL);
    CHECK_ERR_HAS(TS_ERR_SHAPE, "2 or more dimensions");
}

/* sparse_: N(0, std) draws of the same seed where not zeroed, exactly ceil(sparsity * rows)
 * zeros per column */
static void test_sparse(ts_device dev) {
    const ts_opts o = {.dtype = TS_F64, .device = dev};
    const int64_t rows = 7, cols = 5;
    ts_tensor *t = ts_empty(TS_SHAPE(rows, cols), o), *ref = ts_empty(TS_SHAPE(rows, cols), o);
    ts_manual_seed(7);
    CHECK(ts_init_sparse_(t, 0.3, 0.05) == t);
    ts_manual_seed(7);
    ts_normal_(ref, 0, 0.05);
    double x[35], r[35];
    host(t, x), host(ref, r);
    int bad = 0;
    for (int64_t c = 0; c < cols; c++) {
        int zeros = 0;
        for (int64_t i = 0; i < rows; i++) {
            double v = x[i * cols + c];
            if (v == 0)
                zeros++;
            else
                bad += v != r[i * cols + c];
        }
        bad += zeros != 3; /* ceil(0.3 * 7) */
    }
    CHECK_EQ(bad, 0);
    CHECK(ts_init_sparse_(t, 1.5, 0.01) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "sparsity");
}

/* dirac_: one at (g * out/groups + d, d, centre) for d < min(out/groups, in), zero elsewhere */
static void test_dirac(ts_device dev) {
    const int64_t s[4] = {6, 2, 3, 2}; /* [out, in, kh, kw], groups 2: out/groups 3 > in 2 */
    ts_tensor *t = ts_full(TS_SHAPE(6, 2, 3, 2), 7, (ts_opts){.device = dev});
    CHECK(ts_init_dirac_(t, 2) == t);
    double x[72];
    host(t, x);
    int bad = 0;
    for (int64_t i = 0; i < 72; i++) {
        int64_t kw = i % s[3], kh = i / s[3] % s[2], in = i / (s[2] * s[3]) % s[1],
                out = i / (s[1] * s[2] * s[3]);
        bool one = kh == 1 && kw == 1 && out % 3 == in && in < 2;
        bad += x[i] != (one ? 1.0 : 0.0);
    }
    CHECK_EQ(bad, 0);
    CHECK(ts_init_dirac_(t, 4) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "divisible by groups");
    ts_tensor *two = ts_empty(TS_SHAPE(2, 2), (ts_opts){.device = dev});
    CHECK(ts_init_dirac_(two, 1) == NULL);
    CHECK_ERR_HAS(TS_ERR_SHAPE, "3, 4, or 5 dimensions");
}

int main(void) {
    ts_device devs[TS_TEST_MAX_DEVICES];
    int nd = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    test_gain();
    for (int i = 0; i < nd; i++) {
        /* every tensor the cases make or get back (the in-place inits return theirs) belongs to
         * this scope (USAGE.md's rule 2) */
        ts_scope_begin();
        test_scaled_draws(devs[i]);
        test_trunc_normal(devs[i]);
        test_orthogonal(devs[i]);
        test_sparse(devs[i]);
        test_dirac(devs[i]);
        ts_scope_end();
    }
    return ts_test_finish();
}
