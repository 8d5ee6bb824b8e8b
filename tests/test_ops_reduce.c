/* test_ops_reduce.c — reduction and softmax front ends on cpu and sim:0 against double references
 * computed here from the inputs' host copies; the ops' names in errors and in the placement log,
 * and no reference left behind. */
#define _POSIX_C_SOURCE 200809L /* dup, fileno */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ts_test.h"

enum { R_SUM, R_PROD, R_MEAN, R_MAX, R_MIN, R_VAR, R_STD, R_LSE, R_ARGMAX, R_ARGMIN, R_COUNT };
static const char *op_names[R_COUNT] = {"sum", "prod", "mean",      "max",    "min",
                                        "var", "std",  "logsumexp", "argmax", "argmin"};

/* ------------------------------------------------------------------ helpers */
static int64_t numel_of(ts_shape s) {
    int64_t n = 1;
    for (int i = 0; i < s.ndim; i++) n *= s.dims[i];
    return n;
}

/* t's values in row-major order as doubles (malloc'ed; at least one slot) */
static double *host(ts_tensor *t) {
    int64_t n = ts_numel(t);
    double *buf = calloc((size_t)(n > 0 ? n : 1), sizeof(double));
    ts_tensor *c = ts_to_dtype(t, TS_F64);
    if (ts_copy_to_host(c, buf, (size_t)n * sizeof(double)) != TS_OK) buf[0] = NAN;
    return buf;
}

static bool shape_is(ts_tensor *t, ts_shape s) {
    if (!t) return false;
    ts_shape g = ts_shape_of(t);
    if (g.ndim != s.ndim) return false;
    for (int i = 0; i < s.ndim; i++)
        if (g.dims[i] != s.dims[i]) return false;
    return true;
}

static uint64_t lcg_state = 12345;
static double input_scale = 1;
/* values in +-[0.5, 1.5]: products of 60 of them stay finite and sums stay well-conditioned */
static double lcg_value(void) {
    lcg_state = lcg_state * 6364136223846793005ULL + 1442695040888963407ULL;
    double u = (double)(lcg_state >> 11) / 9007199254740992.0;
    double m = 0.5 + u;
    return (lcg_state >> 7) & 1 ? m : -m;
}

/* A [3, 4, 5] input with the given layout: 0 contiguous, 1 permuted, 2 sliced, 3 expanded. */
static ts_tensor *make_input(int layout, ts_dtype dt, ts_device dev) {
    ts_opts o = {.dtype = dt, .device = dev};
    double v[3 * 4 * 10];
    for (int i = 0; i < 120; i++) v[i] = input_scale * lcg_value();
    switch (layout) {
    case 1:
        return ts_permute(ts_tensor_f64(TS_SHAPE(5, 3, 4), v, o), TS_DIMS(1, 2, 0));
    case 2:
        return ts_slice(ts_tensor_f64(TS_SHAPE(3, 4, 10), v, o), 2, 1, 10, 2);
    case 3:
        return ts_expand(ts_tensor_f64(TS_SHAPE(1, 4, 5), v, o), TS_SHAPE(3, 4, 5));
    default:
        return ts_tensor_f64(TS_SHAPE(3, 4, 5), v, o);
    }
}

static double ref_op(const double *v, int64_t n, int op, double corr) {
    double s = 0, m;
    int64_t k = 0;
    switch (op) {
    case R_SUM:
        for (int64_t i = 0; i < n; i++) s += v[i];
        return s;
    case R_PROD:
        s = 1;
        for (int64_t i = 0; i < n; i++) s *= v[i];
        return s;
    case R_MEAN:
        for (int64_t i = 0; i < n; i++) s += v[i];
        return n ? s / (double)n : NAN;
    case R_MAX:
    case R_MIN:
    case R_ARGMAX:
    case R_ARGMIN:
        /* first occurrence; NaN wins like PyTorch */
        for (int64_t i = 1; i < n; i++) {
            if (isnan(v[k])) break;
            bool better = (op == R_MAX || op == R_ARGMAX) ? v[i] > v[k] : v[i] < v[k];
            if (isnan(v[i]) || better) k = i;
        }
        return (op == R_MAX || op == R_MIN) ? v[k] : (double)k;
    case R_VAR:
    case R_STD:
        if (n == 0) return NAN;
        m = ref_op(v, n, R_MEAN, 0);
        for (int64_t i = 0; i < n; i++) s += (v[i] - m) * (v[i] - m);
        s /= ((double)n - corr);
        return op == R_STD ? sqrt(s) : s;
    case R_LSE:
        if (n == 0) return -INFINITY;
        m = ref_op(v, n, R_MAX, 0);
        if (isinf(m)) return m;
        for (int64_t i = 0; i < n; i++) s += exp(v[i] - m);
        return m + log(s);
    default:
        return NAN;
    }
}

/* Reduces the dims in `mask` of row-major x; returns the number of outputs written to out. Reduced
 * elements are visited in row-major order of the reduced dims (so arg* index them flattened). */
static int64_t ref_reduce(const double *x, ts_shape s, unsigned mask, int op, double corr,
                          double *out) {
    int64_t n = numel_of(s), nout = 1, nr = 1;
    for (int d = 0; d < s.ndim; d++) {
        if (mask >> d & 1)
            nr *= s.dims[d];
        else
            nout *= s.dims[d];
    }
    double *vals = malloc((size_t)(n > 0 ? n : 1) * sizeof(double));
    int64_t idx[TS_MAX_DIMS] = {0};
    for (int64_t i = 0; i < n; i++) {
        int64_t o = 0, r = 0;
        for (int d = 0; d < s.ndim; d++) {
            if (mask >> d & 1)
                r = r * s.dims[d] + idx[d];
            else
                o = o * s.dims[d] + idx[d];
        }
        vals[o * nr + r] = x[i];
        for (int d = s.ndim - 1; d >= 0; d--) {
            if (++idx[d] < s.dims[d]) break;
            idx[d] = 0;
        }
    }
    for (int64_t o = 0; o < nout; o++) out[o] = ref_op(vals + o * nr, nr, op, corr);
    free(vals);
    return nout;
}

static ts_shape reduced_shape(ts_shape s, unsigned mask, bool keepdim) {
    ts_shape r = {0};
    for (int d = 0; d < s.ndim; d++) {
        if (mask >> d & 1) {
            if (keepdim) r.dims[r.ndim++] = 1;
        } else {
            r.dims[r.ndim++] = s.dims[d];
        }
    }
    return r;
}

/* got must be x reduced over mask with op: shape, dtype class and values. */
static void check_result(ts_tensor *x, ts_tensor *got, int op, unsigned mask, bool keepdim,
                         double corr, const char *what) {
    ts_shape s = ts_shape_of(x);
    ts_shape want = reduced_shape(s, mask, keepdim);
    bool ok = shape_is(got, want);
    CHECK(ok);
    if (!ok) {
        fprintf(stderr, "  %s %s mask %u keepdim %d: wrong shape\n", what, op_names[op], mask,
                keepdim);
        ts_error_clear();
        return;
    }
    ts_dtype xd = ts_dtype_of(x), gd = ts_dtype_of(got);
    if (op == R_ARGMAX || op == R_ARGMIN)
        CHECK_EQ(gd, TS_I64);
    else
        CHECK_EQ(gd, xd);
    double *xh = host(x), *gh = host(got);
    double *ref = malloc((size_t)(numel_of(s) + 1) * sizeof(double));
    int64_t n = ref_reduce(xh, s, mask, op, corr, ref);
    double tol = xd == TS_F64 ? 1e-10 : 2e-5;
    int bad = 0;
    for (int64_t i = 0; i < n; i++) {
        double scale = fabs(ref[i]) > 1 ? fabs(ref[i]) : 1;
        if (!ts_test_near(gh[i], ref[i], tol * scale) && bad++ < 3)
            fprintf(stderr, "  %s %s mask %u keepdim %d [%lld]: got %.10g want %.10g\n", what,
                    op_names[op], mask, keepdim, (long long)i, gh[i], ref[i]);
    }
    CHECK_EQ(bad, 0);
    free(xh);
    free(gh);
    free(ref);
}

static ts_tensor *run_all(ts_tensor *x, int op) {
    switch (op) {
    case R_SUM:
        return ts_sum(x);
    case R_PROD:
        return ts_prod(x);
    case R_MEAN:
        return ts_mean(x);
    case R_MAX:
        return ts_max(x);
    case R_MIN:
        return ts_min(x);
    case R_VAR:
        return ts_var(x);
    case R_STD:
        return ts_std(x);
    case R_LSE:
        return ts_logsumexp(x);
    case R_ARGMAX:
        return ts_argmax(x);
    default:
        return ts_argmin(x);
    }
}

/* The one-dim form of op; max/min go through ts_max_dim (values) and amax/amin alternately. */
static ts_tensor *run_dim(ts_tensor *x, int op, int dim, bool keepdim, double corr, bool alt) {
    switch (op) {
    case R_SUM:
        return ts_sum_dim(x, dim, keepdim);
    case R_PROD:
        return ts_prod_dim(x, dim, keepdim);
    case R_MEAN:
        return ts_mean_dim(x, dim, keepdim);
    case R_MAX:
        return alt ? ts_amax_dim(x, dim, keepdim) : ts_max_dim(x, dim, keepdim, NULL);
    case R_MIN:
        return alt ? ts_amin_dim(x, dim, keepdim) : ts_min_dim(x, dim, keepdim, NULL);
    case R_VAR:
        return ts_var_dim(x, dim, keepdim, corr);
    case R_STD:
        return ts_std_dim(x, dim, keepdim, corr);
    case R_LSE:
        return ts_logsumexp_dim(x, dim, keepdim);
    case R_ARGMAX:
        return ts_argmax_dim(x, dim, keepdim);
    default:
        return ts_argmin_dim(x, dim, keepdim);
    }
}

/* The several-dims form, or NULL when op has none. */
static bool has_dims_form(int op) { return op != R_PROD && op != R_ARGMAX && op != R_ARGMIN; }
static ts_tensor *run_dims(ts_tensor *x, int op, ts_dims dims, bool keepdim, double corr) {
    switch (op) {
    case R_SUM:
        return ts_sum_dims(x, dims, keepdim);
    case R_MEAN:
        return ts_mean_dims(x, dims, keepdim);
    case R_MAX:
        return ts_amax_dims(x, dims, keepdim);
    case R_MIN:
        return ts_amin_dims(x, dims, keepdim);
    case R_VAR:
        return ts_var_dims(x, dims, keepdim, corr);
    case R_STD:
        return ts_std_dims(x, dims, keepdim, corr);
    case R_LSE:
        return ts_logsumexp_dims(x, dims, keepdim);
    default:
        return NULL;
    }
}

/* ------------------------------------------------------------------ float reductions */
static void test_float_reductions(ts_device dev) {
    static const char *layouts[] = {"contiguous", "permuted", "sliced", "expanded"};
    const ts_dtype dts[] = {TS_F32, TS_F64};
    for (int di = 0; di < 2; di++) {
        for (int layout = 0; layout < 4; layout++) {
            ts_scope_begin();
            ts_tensor *x = make_input(layout, dts[di], dev);
            CHECK_OK();
            const char *what = layouts[layout];
            for (int op = 0; op < R_COUNT; op++) {
                check_result(x, run_all(x, op), op, 7u, false, 1, what);
                for (int dim = -1; dim < 3; dim++) {
                    unsigned m = 1u << (dim < 0 ? dim + 3 : dim);
                    for (int kd = 0; kd < 2; kd++) {
                        double corr = kd ? 0.0 : 1.0; /* both corrections for var/std */
                        check_result(x, run_dim(x, op, dim, kd, corr, kd), op, m, kd, corr, what);
                    }
                }
                if (!has_dims_form(op)) continue;
                const ts_dims list[] = {
                    TS_DIMS(0, 2), TS_DIMS(2, 0), TS_DIMS(1, 2), TS_DIMS(-1, 0, 1), {.n = 0}};
                const unsigned masks[] = {5u, 5u, 6u, 7u, 7u};
                for (int li = 0; li < 5; li++)
                    for (int kd = 0; kd < 2; kd++)
                        check_result(x, run_dims(x, op, list[li], kd, 1.5), op, masks[li], kd, 1.5,
                                     what);
            }
            /* max_dim's indices are argmax's */
            for (int dim = 0; dim < 3; dim++) {
                ts_tensor *mi = NULL, *ni = NULL;
                ts_tensor *mv = ts_max_dim(x, dim, true, &mi);
                ts_tensor *nv = ts_min_dim(x, dim, false, &ni);
                CHECK(mv && mi && nv && ni);
                check_result(x, mv, R_MAX, 1u << dim, true, 0, "max_dim values");
                check_result(x, mi, R_ARGMAX, 1u << dim, true, 0, "max_dim indices");
                check_result(x, nv, R_MIN, 1u << dim, false, 0, "min_dim values");
                check_result(x, ni, R_ARGMIN, 1u << dim, false, 0, "min_dim indices");
            }
            ts_scope_end();
        }
    }
    /* half precision keeps its dtype */
    ts_scope_begin();
    ts_tensor *h = ts_ones(TS_SHAPE(4, 8), (ts_opts){.dtype = TS_F16, .device = dev});
    ts_tensor *hs = ts_sum_dim(h, 1, false);
    CHECK(hs && ts_dtype_of(hs) == TS_F16);
    CHECK_NEAR(ts_item(ts_sum(hs)), 32.0, 0);
    /* NaN propagates through max and argmax finds it */
    ts_tensor *n = ts_tensor_f32(TS_SHAPE(4), (float[]){1, NAN, 3, 2}, (ts_opts){.device = dev});
    CHECK(isnan(ts_item(ts_max(n))));
    CHECK_EQ(ts_item(ts_argmax(n)), 1);
    CHECK_EQ(ts_item(ts_argmin(n)), 1);
    CHECK_OK();
    ts_scope_end();
}

/* ------------------------------------------------------------------ dtypes */
static void test_dtypes(ts_device dev) {
    ts_scope_begin();
    ts_opts o = {.device = dev};
    ts_tensor *xi = ts_tensor_i32(TS_SHAPE(2, 3), (int32_t[]){1, -2, 3, 4, 5, -6}, o);
    ts_tensor *s = ts_sum(xi);
    CHECK(s && ts_dtype_of(s) == TS_I64 && ts_ndim(s) == 0);
    CHECK_EQ(ts_item(s), 5);
    ts_tensor *sd = ts_sum_dim(xi, 0, false);
    double *sh = host(sd);
    CHECK(ts_dtype_of(sd) == TS_I64 && sh[0] == 5 && sh[1] == 3 && sh[2] == -3);
    free(sh);
    ts_tensor *p = ts_prod(xi);
    CHECK(p && ts_dtype_of(p) == TS_I64);
    CHECK_EQ(ts_item(p), 720);
    ts_tensor *mx = ts_max(xi);
    CHECK(mx && ts_dtype_of(mx) == TS_I32);
    CHECK_EQ(ts_item(mx), 5);
    ts_tensor *mn = ts_amin_dim(xi, 1, true);
    double *mh = host(mn);
    CHECK(shape_is(mn, TS_SHAPE(2, 1)) && ts_dtype_of(mn) == TS_I32 && mh[0] == -2 && mh[1] == -6);
    free(mh);
    ts_tensor *am = ts_argmax(xi);
    CHECK(am && ts_dtype_of(am) == TS_I64);
    CHECK_EQ(ts_item(am), 4);
    /* bool and u8 sums count in int64 */
    ts_tensor *b =
        ts_from_data(TS_SHAPE(5), TS_BOOL, (uint8_t[]){1, 0, 1, 1, 0}, (ts_opts){.device = dev});
    ts_tensor *bs = ts_sum(b);
    CHECK(bs && ts_dtype_of(bs) == TS_I64);
    CHECK_EQ(ts_item(bs), 3);
    ts_tensor *u =
        ts_from_data(TS_SHAPE(3), TS_U8, (uint8_t[]){200, 100, 250}, (ts_opts){.device = dev});
    CHECK_EQ(ts_item(ts_sum(u)), 550);
    /* logsumexp of integers computes in float32 (torch 2.x) */
    ts_tensor *l = ts_logsumexp(ts_tensor_i64(TS_SHAPE(3), (int64_t[]){1, 2, 3}, o));
    CHECK(l && ts_dtype_of(l) == TS_F32);
    CHECK_NEAR(ts_item(l), log(exp(1) + exp(2) + exp(3)), 1e-5);
    CHECK_OK();

    /* mean, var and std refuse integers */
    ts_tensor *xl = ts_tensor_i64(TS_SHAPE(3), (int64_t[]){1, 2, 3}, o);
    CHECK(ts_mean(xl) == NULL);
    CHECK_STREQ(ts_error_message(),
                "mean(): could not infer output dtype. Input dtype must be either a floating "
                "point or complex dtype. Got: Long");
    CHECK_ERR(TS_ERR_DTYPE);
    CHECK(ts_mean_dim(xi, 0, false) == NULL && strstr(ts_error_message(), "Got: Int"));
    CHECK_ERR(TS_ERR_DTYPE);
    CHECK(ts_var(xl) == NULL);
    CHECK_ERR(TS_ERR_DTYPE);
    CHECK(ts_std_dim(xi, 1, false, 1) == NULL);
    CHECK_ERR(TS_ERR_DTYPE);
    ts_scope_end();
}

/* ------------------------------------------------------------------ empty and 0-dim */
static void test_empty_and_scalar(ts_device dev) {
    ts_scope_begin();
    ts_opts o = {.device = dev};
    ts_tensor *e = ts_zeros(TS_SHAPE(0, 3), o);
    ts_tensor *r = ts_sum_dim(e, 0, false);
    double *h = host(r);
    CHECK(shape_is(r, TS_SHAPE(3)) && h[0] == 0 && h[2] == 0);
    free(h);
    h = host(ts_prod_dim(e, 0, true));
    CHECK(h[0] == 1 && h[1] == 1);
    free(h);
    h = host(ts_mean_dim(e, 0, false));
    CHECK(isnan(h[0]));
    free(h);
    h = host(ts_logsumexp_dim(e, 0, false));
    CHECK(isinf(h[1]) && h[1] < 0);
    free(h);
    CHECK_EQ(ts_item(ts_sum(e)), 0);
    CHECK_EQ(ts_item(ts_sum_dims(e, TS_DIMS(0, 1), false)), 0);
    ts_tensor *idx = NULL;
    ts_tensor *mv = ts_max_dim(e, 1, false, &idx);
    CHECK(shape_is(mv, TS_SHAPE(0)) && shape_is(idx, TS_SHAPE(0)));
    CHECK_OK();
    CHECK(ts_amax_dim(e, 0, false) == NULL);
    CHECK_STREQ(ts_error_message(), "amax(): Expected reduction dim 0 to have non-zero size.");
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_max_dim(e, 0, false, &idx) == NULL && idx == NULL);
    CHECK_STREQ(ts_error_message(), "max(): Expected reduction dim 0 to have non-zero size.");
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_argmin_dim(e, -2, true) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_max(e) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_argmax(e) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_amin_dims(e, TS_DIMS(1, 0), false) == NULL);
    CHECK_ERR(TS_ERR_ARG);

    /* 0-dim: dims 0 and -1 name the one "dim"; the result stays 0-dim */
    ts_tensor *s = ts_scalar(3.5, o);
    ts_tensor *r0 = ts_sum_dim(s, 0, false), *r1 = ts_sum_dim(s, -1, true);
    CHECK(shape_is(r0, TS_SHAPE()) && shape_is(r1, TS_SHAPE()));
    CHECK_NEAR(ts_item(r0), 3.5, 0);
    CHECK_NEAR(ts_item(r1), 3.5, 0);
    ts_tensor *si = NULL;
    ts_tensor *sv = ts_max_dim(s, 0, true, &si);
    CHECK(shape_is(sv, TS_SHAPE()) && shape_is(si, TS_SHAPE()));
    CHECK_NEAR(ts_item(sv), 3.5, 0);
    CHECK_EQ(ts_item(si), 0);
    CHECK_EQ(ts_item(ts_argmax(s)), 0);
    CHECK_NEAR(ts_item(ts_mean_dims(s, TS_DIMS(0), false)), 3.5, 0);
    CHECK_NEAR(ts_item(ts_logsumexp(s)), 3.5, 1e-6);
    CHECK(isnan(ts_item(ts_var(s)))); /* one element, correction 1 */
    CHECK_NEAR(ts_item(ts_var_dim(s, 0, false, 0)), 0, 0);
    CHECK_OK();
    CHECK(ts_sum_dim(s, 1, false) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    ts_scope_end();
}

/* ------------------------------------------------------------------ argument errors */
static void test_errors(ts_device dev) {
    ts_scope_begin();
    ts_tensor *x = ts_zeros(TS_SHAPE(2, 3, 4), (ts_opts){.device = dev});
    CHECK(ts_sum_dim(x, 3, false) == NULL && strstr(ts_error_message(), "out of range"));
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_mean_dim(x, -4, false) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_sum_dims(x, TS_DIMS(0, -3), false) == NULL);
    CHECK(strstr(ts_error_message(), "dim 0 appears multiple times in the list of dims") != NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_var_dims(x, TS_DIMS(1, 5), false, 1) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_sum(NULL) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    /* a NULL input keeps the first error */
    ts_mean(ts_tensor_i64(TS_SHAPE(1), (int64_t[]){1}, (ts_opts){0}));
    CHECK(ts_sum(NULL) == NULL && ts_max_dim(NULL, 0, false, NULL) == NULL);
    CHECK_ERR(TS_ERR_DTYPE);
    ts_scope_end();
}

/* ------------------------------------------------------------------ softmax */
static void ref_softmax(const double *x, ts_shape s, int dim, bool lg, double *out) {
    int64_t inner = 1, n = s.dims[dim], outer = 1;
    for (int d = 0; d < dim; d++) outer *= s.dims[d];
    for (int d = dim + 1; d < s.ndim; d++) inner *= s.dims[d];
    for (int64_t o = 0; o < outer; o++) {
        for (int64_t i = 0; i < inner; i++) {
            const double *p = x + o * n * inner + i;
            double m = -INFINITY, z = 0;
            for (int64_t k = 0; k < n; k++) m = fmax(m, p[k * inner]);
            for (int64_t k = 0; k < n; k++) z += exp(p[k * inner] - m);
            for (int64_t k = 0; k < n; k++) {
                double v = p[k * inner] - m;
                out[o * n * inner + i + k * inner] = lg ? v - log(z) : exp(v) / z;
            }
        }
    }
}

static void test_softmax(ts_device dev) {
    for (int layout = 0; layout < 4; layout++) {
        ts_scope_begin();
        input_scale = 4; /* spread the logits */
        ts_tensor *x = make_input(layout, TS_F32, dev);
        input_scale = 1;
        double *xh = host(x), ref[60];
        for (int dim = 0; dim < 3; dim++) {
            for (int lg = 0; lg < 2; lg++) {
                ts_tensor *y = lg ? ts_log_softmax(x, dim - 3 * (dim == 2)) : ts_softmax(x, dim);
                CHECK(shape_is(y, TS_SHAPE(3, 4, 5)) && ts_dtype_of(y) == TS_F32);
                double *yh = host(y);
                ref_softmax(xh, TS_SHAPE(3, 4, 5), dim, lg, ref);
                int bad = 0;
                for (int i = 0; i < 60; i++) bad += !ts_test_near(yh[i], ref[i], 1e-5);
                CHECK_EQ(bad, 0);
                if (!lg) { /* rows sum to one */
                    double *sh = host(ts_sum_dim(y, dim, false));
                    int badsum = 0;
                    for (int i = 0; i < 60 / (int)ts_size(x, dim); i++)
                        badsum += !ts_test_near(sh[i], 1.0, 1e-5);
                    CHECK_EQ(badsum, 0);
                    free(sh);
                }
                free(yh);
            }
        }
        free(xh);
        ts_scope_end();
    }
    ts_scope_begin();
    ts_opts o = {.device = dev};
    /* large logits stay finite */
    ts_tensor *big = ts_tensor_f64(TS_SHAPE(2), (double[]){1000, 1001}, o);
    double *bh = host(ts_softmax(big, 0));
    CHECK_NEAR(bh[1], 1 / (1 + exp(-1)), 1e-12);
    free(bh);
    /* integers are refused, as PyTorch refuses them */
    ts_tensor *yi = ts_softmax(ts_tensor_i64(TS_SHAPE(2), (int64_t[]){0, 0}, o), 0);
    CHECK(yi == NULL);
    CHECK(strstr(ts_error_message(), "softmax: not implemented for int64") != NULL);
    CHECK_ERR(TS_ERR_DTYPE);
    /* 0-dim and empty */
    CHECK_NEAR(ts_item(ts_softmax(ts_scalar(7, o), 0)), 1.0, 0);
    CHECK_NEAR(ts_item(ts_log_softmax(ts_scalar(7, o), -1)), 0.0, 0);
    CHECK(shape_is(ts_softmax(ts_zeros(TS_SHAPE(0, 3), o), 1), TS_SHAPE(0, 3)));
    CHECK_OK();
    CHECK(ts_softmax(big, 1) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_log_softmax(NULL, 0) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    ts_scope_end();
}

/* Reducing a dim of one element of a strided view: rows of one, not contiguous with each other
 * ([4, 1] cut from [4, 3]), must not take the contiguous fast path (found by tools/mutate.sh). */
static void test_strided_rows_of_one(ts_device dev) {
    ts_scope_begin();
    ts_tensor *x =
        ts_view(ts_arange(0, 12, 1, (ts_opts){.dtype = TS_F32, .device = dev}), TS_SHAPE(4, 3));
    ts_tensor *col = ts_narrow(x, 1, 1, 1); /* [4, 1], strides [3, 1]: 1, 4, 7, 10 */
    ts_tensor *r[4] = {ts_sum_dim(col, 1, false), ts_mean_dim(col, 1, false),
                       ts_amax_dim(col, 1, false), ts_sum_dim(col, -1, true)};
    for (int k = 0; k < 4; k++) {
        float v[4] = {0};
        CHECK(r[k] && ts_numel(r[k]) == 4);
        ts_copy_to_host(ts_contiguous(r[k]), v, sizeof v);
        for (int i = 0; i < 4; i++) CHECK_EQ(v[i], 3 * i + 1);
    }
    CHECK_OK();
    ts_scope_end();
}

/* Each reduction and softmax names itself: in its errors and in the placement log
 * (TS_LOG_PLACEMENT), read back from stderr. */
static void test_op_names(ts_device dev) {
    ts_scope_begin();
    ts_tensor *x = ts_ones(TS_SHAPE(2, 3), (ts_opts){.device = dev});
    static const char *const names[] = {"sum",    "mean",   "prod",    "amax",       "amin",
                                        "argmax", "argmin", "softmax", "log_softmax"};
    ts_tensor *(*const dim_ops[])(ts_tensor *, int,
                                  bool) = {ts_sum_dim,  ts_mean_dim,   ts_prod_dim,  ts_amax_dim,
                                           ts_amin_dim, ts_argmax_dim, ts_argmin_dim};
    for (int k = 0; k < 9; k++) {
        ts_tensor *r = k < 7    ? dim_ops[k](x, 5, false)
                       : k == 7 ? ts_softmax(x, 5)
                                : ts_log_softmax(x, 5);
        char want[64];
        snprintf(want, sizeof want, "%s: dimension out of range", names[k]);
        CHECK(r == NULL && !strncmp(ts_error_message(), want, strlen(want)));
        ts_error_clear();
    }
    fflush(stderr);
    FILE *tmp = tmpfile();
    int saved = dup(STDERR_FILENO);
    CHECK(tmp && saved >= 0);
    if (tmp && saved >= 0) {
        dup2(fileno(tmp), STDERR_FILENO);
        ts_log_placement(true);
        for (int k = 0; k < 9; k++)
            if (k < 7)
                dim_ops[k](x, 1, false);
            else
                (k == 7 ? ts_softmax : ts_log_softmax)(x, 1);
        ts_log_placement(false);
        fflush(stderr);
        dup2(saved, STDERR_FILENO);
        close(saved);
        char log[4096] = "";
        rewind(tmp);
        log[fread(log, 1, sizeof log - 1, tmp)] = '\0';
        for (int k = 0; k < 9; k++) {
            char line[96];
            snprintf(line, sizeof line, "tessera placement: %s on %s\n", names[k],
                     ts_device_str(dev));
            CHECK(strstr(log, line) != NULL);
            if (!strstr(log, line)) printf("  the placement log lacks \"%s\"\n", names[k]);
        }
    }
    if (tmp) fclose(tmp);
    CHECK_OK();
    ts_scope_end();
}

static int64_t live(ts_device d) {
    ts_mem_stats m;
    ts_memory_stats(d, &m);
    return m.live_tensors;
}

int main(void) {
    ts_device devs[2] = {ts_cpu(), ts_sim(0)};
    int ndev = ts_device_count(TS_SIM) > 0 ? 2 : 1;
    if (ndev == 1) printf("note: no sim devices (TS_SIM_DEVICES unset): cpu only\n");
    int64_t live0[2] = {live(devs[0]), ndev > 1 ? live(devs[1]) : 0};
    for (int i = 0; i < ndev; i++) {
        test_float_reductions(devs[i]);
        test_dtypes(devs[i]);
        test_empty_and_scalar(devs[i]);
        test_errors(devs[i]);
        test_softmax(devs[i]);
        test_strided_rows_of_one(devs[i]);
        test_op_names(devs[i]);
        CHECK_OK();
    }
    /* every tensor made on the way was released (no reference leaked by an op) */
    for (int i = 0; i < ndev; i++) CHECK_EQ(live(devs[i]), live0[i]);
    return ts_test_finish();
}
