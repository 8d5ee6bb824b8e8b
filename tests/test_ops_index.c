/* test_ops_index.c — cat, stack, split, chunk, index_select, gather, scatter_add and one_hot on cpu
 * and sim:0, against references computed here from the inputs' host copies. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_isa.h"
#include "ts_test.h"

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

/* every element of t equals want[i] (row-major) */
static bool values_are(ts_tensor *t, const double *want, int64_t n) {
    if (!t || ts_numel(t) != n) return false;
    double *h = host(t);
    bool ok = true;
    for (int64_t i = 0; i < n; i++) ok = ok && h[i] == want[i];
    free(h);
    return ok;
}

/* a [r, c] f64 tensor holding 100*i + j, made transposed when `strided` */
static ts_tensor *grid(int64_t r, int64_t c, bool strided, ts_opts o) {
    double v[256];
    for (int64_t i = 0; i < r; i++)
        for (int64_t j = 0; j < c; j++) v[strided ? j * r + i : i * c + j] = (double)(100 * i + j);
    if (!strided) return ts_tensor_f64(TS_SHAPE(r, c), v, o);
    return ts_t(ts_tensor_f64(TS_SHAPE(c, r), v, o));
}

/* ------------------------------------------------------------------ cat, stack */
static void test_cat_stack(ts_device dev, ts_device other) {
    ts_scope_begin();
    ts_opts o = {.device = dev};
    ts_tensor *a = grid(2, 3, false, o), *b = grid(2, 2, true, o), *c = grid(1, 3, true, o);
    ts_tensor *ab = ts_cat((ts_tensor *[]){a, b}, 2, 1);
    CHECK(shape_is(ab, TS_SHAPE(2, 5)) && ts_dtype_of(ab) == TS_F64);
    CHECK(values_are(ab, (double[]){0, 1, 2, 0, 1, 100, 101, 102, 100, 101}, 10));
    ts_tensor *ac = ts_cat((ts_tensor *[]){a, c, a}, 3, -2);
    CHECK(shape_is(ac, TS_SHAPE(5, 3)));
    CHECK(values_are(ac, (double[]){0, 1, 2, 100, 101, 102, 0, 1, 2, 0, 1, 2, 100, 101, 102}, 15));
    /* promotion over all inputs; legacy [0] tensors are skipped */
    ts_tensor *ai = ts_tensor_i64(TS_SHAPE(2, 1), (int64_t[]){7, 8}, o);
    ts_tensor *f = ts_tensor_f32(TS_SHAPE(2, 1), (float[]){0.5f, 1.5f}, o);
    ts_tensor *leg = ts_empty(TS_SHAPE(0), (ts_opts){.dtype = TS_I32, .device = dev});
    ts_tensor *mix = ts_cat((ts_tensor *[]){ai, leg, f}, 3, 1);
    CHECK(shape_is(mix, TS_SHAPE(2, 2)) && ts_dtype_of(mix) == TS_F32);
    CHECK(values_are(mix, (double[]){7, 0.5, 8, 1.5}, 4));
    ts_tensor *i32 = ts_tensor_i32(TS_SHAPE(2, 1), (int32_t[]){1, 2}, o);
    CHECK(ts_dtype_of(ts_cat((ts_tensor *[]){i32, ai}, 2, 0)) == TS_I64);
    ts_tensor *only = ts_cat((ts_tensor *[]){leg, leg}, 2, 0);
    CHECK(shape_is(only, TS_SHAPE(0)));
    ts_tensor *e = ts_zeros(TS_SHAPE(0, 3), o);
    CHECK(shape_is(ts_cat((ts_tensor *[]){e, a, e}, 3, 0), TS_SHAPE(2, 3)));
    CHECK_OK();

    CHECK(ts_cat((ts_tensor *[]){a, b}, 2, 0) == NULL);
    CHECK_STREQ(ts_error_message(),
                "cat: Sizes of tensors must match except in dimension 0. Expected size 3 but got "
                "size 2 for tensor number 1 in the list.");
    CHECK_ERR(TS_ERR_SHAPE);
    CHECK(ts_cat((ts_tensor *[]){a, ts_zeros(TS_SHAPE(3), o)}, 2, 0) == NULL);
    CHECK_ERR(TS_ERR_SHAPE);
    CHECK(ts_cat((ts_tensor *[]){a, ts_scalar(1, o)}, 2, 0) == NULL);
    CHECK(strstr(ts_error_message(), "zero-dimensional tensor (at position 1)") != NULL);
    CHECK_ERR(TS_ERR_SHAPE);
    CHECK(ts_cat((ts_tensor *[]){a}, 0, 0) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_cat((ts_tensor *[]){a, NULL}, 2, 0) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_cat((ts_tensor *[]){a, a}, 2, 2) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    if (!ts_device_equal(dev, other)) {
        ts_tensor *x = ts_zeros(TS_SHAPE(2, 3), (ts_opts){.device = other});
        CHECK(ts_cat((ts_tensor *[]){a, x}, 2, 0) == NULL);
        CHECK_ERR(TS_ERR_DEVICE);
        CHECK(ts_stack((ts_tensor *[]){a, x}, 2, 0) == NULL);
        CHECK_ERR(TS_ERR_DEVICE);
    }

    /* stack at every position */
    ts_tensor *a2 = grid(2, 3, true, o);
    for (int dim = -3; dim < 3; dim++) {
        ts_tensor *s = ts_stack((ts_tensor *[]){a, a2, a}, 3, dim);
        int d = dim < 0 ? dim + 3 : dim;
        ts_shape want = d == 0 ? TS_SHAPE(3, 2, 3) : d == 1 ? TS_SHAPE(2, 3, 3) : TS_SHAPE(2, 3, 3);
        CHECK(shape_is(s, want));
        double *h = host(s);
        int bad = 0;
        for (int k = 0; k < 3; k++)
            for (int i = 0; i < 2; i++)
                for (int j = 0; j < 3; j++) {
                    int64_t off = d == 0   ? (k * 2 + i) * 3 + j
                                  : d == 1 ? (i * 3 + k) * 3 + j
                                           : (i * 3 + j) * 3 + k;
                    bad += h[off] != 100 * i + j;
                }
        CHECK_EQ(bad, 0);
        free(h);
    }
    ts_tensor *sc = ts_stack((ts_tensor *[]){ts_scalar(1, o), ts_scalar(2, o)}, 2, 0);
    CHECK(shape_is(sc, TS_SHAPE(2)) && values_are(sc, (double[]){1, 2}, 2));
    CHECK(ts_dtype_of(ts_stack((ts_tensor *[]){ai, f}, 2, 0)) == TS_F32);
    CHECK_OK();
    CHECK(ts_stack((ts_tensor *[]){a, c}, 2, 0) == NULL);
    CHECK_STREQ(ts_error_message(), "stack: stack expects each tensor to be equal size, but got "
                                    "[2, 3] at entry 0 and [1, 3] at entry 1");
    CHECK_ERR(TS_ERR_SHAPE);
    CHECK(ts_stack((ts_tensor *[]){a, a}, 2, 3) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_stack(NULL, 0, 0) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    ts_scope_end();
}

/* ------------------------------------------------------------------ split, chunk */
static bool pieces_are(ts_tensor **p, int n, ts_tensor *src, int dim, const int64_t *sizes) {
    int64_t start = 0;
    for (int i = 0; i < n; i++) {
        if (!p[i] || ts_size(p[i], dim) != sizes[i] || !ts_shares_storage(p[i], src)) return false;
        ts_tensor *want = ts_narrow(src, dim, start, sizes[i]);
        int64_t m = ts_numel(want);
        double *h = host(want);
        bool ok = values_are(p[i], h, m);
        free(h);
        if (!ok) return false;
        start += sizes[i];
    }
    return true;
}

static void test_split_chunk(ts_device dev) {
    ts_scope_begin();
    ts_opts o = {.device = dev};
    ts_tensor *x = grid(7, 2, true, o), *p[8] = {0};
    CHECK_EQ(ts_split(x, 3, 0, p, 8), 3);
    CHECK(pieces_are(p, 3, x, 0, (int64_t[]){3, 3, 1}));
    CHECK_EQ(ts_split(x, 1, -1, p, 8), 2);
    CHECK(pieces_are(p, 2, x, 1, (int64_t[]){1, 1}));
    memset(p, 0, sizeof p);
    CHECK_EQ(ts_split(x, 2, 0, p, 2), 4); /* only two written */
    CHECK(p[0] && p[1] && !p[2]);
    CHECK_EQ(ts_split(x, 10, 0, NULL, 0), 1);
    CHECK_EQ(ts_split(ts_zeros(TS_SHAPE(0, 2), o), 0, 0, p, 8), 1);
    CHECK(shape_is(p[0], TS_SHAPE(0, 2)));
    CHECK_EQ(ts_chunk(x, 3, 0, p, 8), 3);
    CHECK(pieces_are(p, 3, x, 0, (int64_t[]){3, 3, 1}));
    ts_tensor *six = ts_arange(0, 6, 1, o);
    CHECK_EQ(ts_chunk(six, 4, 0, p, 8), 3); /* ceil(6 / 4) = 2 per piece: fewer pieces */
    CHECK(pieces_are(p, 3, six, 0, (int64_t[]){2, 2, 2}));
    CHECK_EQ(ts_chunk(six, 8, 0, p, 8), 6);
    CHECK_EQ(ts_chunk(ts_zeros(TS_SHAPE(2, 0), o), 3, 1, p, 8), 3);
    CHECK(shape_is(p[0], TS_SHAPE(2, 0)) && shape_is(p[2], TS_SHAPE(2, 0)));
    CHECK_OK();
    CHECK_EQ(ts_split(x, 0, 0, p, 8), -1);
    CHECK_ERR(TS_ERR_ARG);
    CHECK_EQ(ts_split(x, -1, 0, p, 8), -1);
    CHECK_ERR(TS_ERR_ARG);
    CHECK_EQ(ts_split(x, 1, 2, p, 8), -1);
    CHECK_ERR(TS_ERR_ARG);
    CHECK_EQ(ts_split(ts_scalar(1, o), 1, 0, p, 8), -1);
    CHECK_ERR(TS_ERR_SHAPE);
    CHECK_EQ(ts_chunk(x, 0, 0, p, 8), -1);
    CHECK_ERR(TS_ERR_ARG);
    CHECK_EQ(ts_chunk(x, 2, 0, NULL, 2), -1);
    CHECK_ERR(TS_ERR_ARG);
    CHECK_EQ(ts_chunk(NULL, 2, 0, p, 8), -1);
    CHECK_ERR(TS_ERR_ARG);
    ts_scope_end();
}

/* ------------------------------------------------------------------ index_select, gather */
static void test_select_gather(ts_device dev, ts_device other) {
    ts_scope_begin();
    ts_opts o = {.device = dev};
    for (int strided = 0; strided < 2; strided++) {
        ts_tensor *x = grid(5, 3, strided, o);
        ts_tensor *i0 = ts_tensor_i64(TS_SHAPE(4), (int64_t[]){4, 0, 2, 2}, o);
        ts_tensor *r0 = ts_index_select(x, 0, i0);
        CHECK(shape_is(r0, TS_SHAPE(4, 3)));
        CHECK(values_are(r0, (double[]){400, 401, 402, 0, 1, 2, 200, 201, 202, 200, 201, 202}, 12));
        ts_tensor *i1 = ts_tensor_i32(TS_SHAPE(2), (int32_t[]){2, 0}, o);
        ts_tensor *r1 = ts_index_select(x, -1, i1);
        CHECK(shape_is(r1, TS_SHAPE(5, 2)));
        CHECK(values_are(r1, (double[]){2, 0, 102, 100, 202, 200, 302, 300, 402, 400}, 10));
        /* gather along dim 1 and dim 0 */
        ts_tensor *g1i = ts_tensor_i64(TS_SHAPE(2, 2), (int64_t[]){2, 2, 0, 1}, o);
        CHECK(values_are(ts_gather(x, 1, g1i), (double[]){2, 2, 100, 101}, 4));
        ts_tensor *g0i = ts_tensor_i64(TS_SHAPE(1, 3), (int64_t[]){4, 3, 0}, o);
        CHECK(values_are(ts_gather(x, 0, g0i), (double[]){400, 301, 2}, 3));
        ts_tensor *g2 =
            ts_gather(x, 1, ts_tensor_i64(TS_SHAPE(1, 5), (int64_t[]){0, 1, 2, 1, 0}, o));
        CHECK(shape_is(g2, TS_SHAPE(1, 5)) && values_are(g2, (double[]){0, 1, 2, 1, 0}, 5));
        CHECK_OK();
    }
    ts_tensor *x = grid(5, 3, false, o);
    CHECK(shape_is(
        ts_index_select(x, 0, ts_empty(TS_SHAPE(0), (ts_opts){.dtype = TS_I64, .device = dev})),
        TS_SHAPE(0, 3)));
    ts_tensor *s = ts_scalar(9, o);
    ts_tensor *s1 = ts_index_select(s, 0, ts_tensor_i64(TS_SHAPE(1), (int64_t[]){0}, o));
    CHECK(shape_is(s1, TS_SHAPE()) && ts_item(s1) == 9);
    CHECK_OK();
    CHECK(ts_index_select(x, 0, ts_tensor_i64(TS_SHAPE(2), (int64_t[]){1, 7}, o)) == NULL);
    CHECK_STREQ(ts_error_message(),
                "index_select: index 7 is out of bounds for dimension 0 with size 5");
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_index_select(x, 1, ts_tensor_i64(TS_SHAPE(1), (int64_t[]){-1}, o)) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_index_select(x, 0, ts_tensor_f32(TS_SHAPE(1), (float[]){0}, o)) == NULL);
    CHECK_ERR(TS_ERR_DTYPE);
    CHECK(ts_index_select(
              x, 0, ts_zeros(TS_SHAPE(1, 1), (ts_opts){.dtype = TS_I64, .device = dev})) == NULL);
    CHECK_ERR(TS_ERR_SHAPE);
    CHECK(ts_index_select(x, 2, ts_tensor_i64(TS_SHAPE(1), (int64_t[]){0}, o)) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    ts_tensor *gi = ts_tensor_i64(TS_SHAPE(2, 4), (int64_t[]){0, 0, 0, 0, 0, 0, 0, 0}, o);
    CHECK(ts_gather(x, 0, gi) == NULL); /* index.size(1) = 4 > 3 */
    CHECK(strstr(ts_error_message(), "Size does not match at dimension 1") != NULL);
    CHECK_ERR(TS_ERR_SHAPE);
    CHECK(ts_gather(x, 1, ts_tensor_i64(TS_SHAPE(1, 1), (int64_t[]){3}, o)) == NULL);
    CHECK_STREQ(ts_error_message(), "gather: index 3 is out of bounds for dimension 1 with size 3");
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_gather(x, 1, ts_tensor_i64(TS_SHAPE(2), (int64_t[]){0, 0}, o)) == NULL);
    CHECK_ERR(TS_ERR_SHAPE);
    /* an int32 index is taken (PyTorch: int32 or int64); another integer dtype is refused */
    ts_tensor *g32 = ts_gather(x, 1, ts_tensor_i32(TS_SHAPE(1, 1), (int32_t[]){2}, o));
    ts_tensor *g64 = ts_gather(x, 1, ts_tensor_i64(TS_SHAPE(1, 1), (int64_t[]){2}, o));
    CHECK(g32 && g64 && ts_item(g32) == ts_item(g64));
    ts_tensor *i16 = ts_to_dtype(ts_tensor_i32(TS_SHAPE(1, 1), (int32_t[]){0}, o), TS_I16);
    CHECK(ts_gather(x, 1, i16) == NULL);
    CHECK_ERR(TS_ERR_DTYPE);
    if (!ts_device_equal(dev, other)) {
        ts_tensor *io = ts_tensor_i64(TS_SHAPE(1), (int64_t[]){0}, (ts_opts){.device = other});
        CHECK(ts_index_select(x, 0, io) == NULL);
        CHECK_ERR(TS_ERR_DEVICE);
    }
    ts_scope_end();
}

/* Large enough to run in parallel, with rows split into blocks of indices (kern_index.c's
 * select_common: a task holds about 16384 elements, so a row of 700 indices of 70 elements is
 * three blocks, the last one short): every element is the one its index names. x holds
 * 1000 * i + j, exact in float32. */
static uint64_t lcg_state = 88172645463325252ull;
static int64_t below(int64_t n) {
    lcg_state = lcg_state * 6364136223846793005ull + 1442695040888963407ull;
    return (int64_t)((lcg_state >> 33) % (uint64_t)n);
}
static int64_t count(ts_shape s) {
    int64_t n = 1;
    for (int i = 0; i < s.ndim; i++) n *= s.dims[i];
    return n;
}
static ts_tensor *pattern(ts_shape s, ts_opts o) {
    const int64_t n = count(s);
    float *v = malloc((size_t)n * sizeof *v);
    for (int64_t i = 0; i < n; i++) v[i] = (float)(i % 4000000);
    ts_tensor *t = ts_tensor_f32(s, v, o);
    free(v);
    return t;
}
/* the same in int16 (kern_index.c's 2-byte copy loop): i * 7919 mod 32749, distinct runs */
static ts_tensor *pattern16(ts_shape s, ts_opts o) {
    const int64_t n = count(s);
    int16_t *v = malloc((size_t)n * sizeof *v);
    for (int64_t i = 0; i < n; i++) v[i] = (int16_t)(i * 7919 % 32749);
    ts_tensor *t = ts_from_data(s, TS_I16, v, o);
    free(v);
    return t;
}
static ts_tensor *random_index(ts_shape s, int64_t bound, ts_opts o, int64_t **out) {
    const int64_t n = count(s);
    int64_t *v = malloc((size_t)n * sizeof *v);
    for (int64_t i = 0; i < n; i++) v[i] = below(bound);
    *out = v;
    return ts_tensor_i64(s, v, (ts_opts){.device = o.device});
}

/* index_select of x [d0, d1, d2] (row-major values h) along dim with index v[0..n): exact */
static bool select_ok(ts_tensor *y, const double *h, const int64_t *dims, int dim, const int64_t *v,
                      int64_t n) {
    int64_t od[3] = {dims[0], dims[1], dims[2]};
    od[dim] = n;
    if (!y || ts_numel(y) != od[0] * od[1] * od[2]) return false;
    double *g = host(y);
    bool ok = true;
    for (int64_t a = 0; a < od[0]; a++)
        for (int64_t b = 0; b < od[1]; b++)
            for (int64_t c = 0; c < od[2]; c++) {
                int64_t src[3] = {a, b, c};
                src[dim] = v[src[dim]];
                ok &= g[(a * od[1] + b) * od[2] + c] ==
                      h[(src[0] * dims[1] + src[1]) * dims[2] + src[2]];
            }
    free(g);
    return ok;
}

static void test_select_gather_blocks(ts_device dev) {
    ts_scope_begin();
    ts_opts o = {.device = dev};
    /* {d0, d1, d2, dim, n}: dim 0 of a matrix (one row, three blocks), a middle dim (four rows of
     * three blocks), two rows of two blocks (the tasks' rows and blocks not coprime), rows longer
     * than a block (one index a task), a small one (one thread) */
    static const int64_t cases[][5] = {{1, 300, 70, 1, 700},
                                       {4, 50, 200, 1, 180},
                                       {2, 50, 200, 1, 100},
                                       {1, 3, 20000, 1, 4},
                                       {1, 9, 5, 1, 7}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const int64_t *dims = cases[k];
        const int dim = (int)cases[k][3];
        const int64_t n = cases[k][4];
        ts_tensor *x = pattern(TS_SHAPE(dims[0], dims[1], dims[2]), o);
        int64_t *v;
        ts_tensor *idx = random_index(TS_SHAPE(n), dims[dim], o, &v);
        double *h = host(x);
        CHECK(select_ok(ts_index_select(x, dim, idx), h, dims, dim, v, n));
        /* a transposed source (the last dim strided): the element loop instead of memcpy */
        ts_tensor *xt = ts_contiguous(ts_transpose(x, 0, 2));
        CHECK(select_ok(ts_index_select(ts_transpose(xt, 0, 2), dim, idx), h, dims, dim, v, n));
        /* 1-, 2- and 8-byte types: a copy loop each */
        ts_tensor *x16 = pattern16(TS_SHAPE(dims[0], dims[1], dims[2]), o);
        ts_tensor *xo[3] = {x16, ts_to_dtype(x16, TS_U8), ts_to_dtype(x16, TS_F64)};
        for (int t = 0; t < 3; t++) {
            double *ht = host(xo[t]);
            CHECK(ht && select_ok(ts_index_select(xo[t], dim, idx), ht, dims, dim, v, n));
            free(ht);
        }
        free(h), free(v);
        CHECK_OK();
    }
    /* a long index is checked in blocks of 32768 among the threads: a bad value in any block, the
     * last one short, is found, by the check's AVX2 and portable variants */
    const ts_cpu_isa saved = ts_cpu_isa_get();
    for (int isa = TS_ISA_GENERIC; isa <= (int)saved; isa++) {
        atomic_store(&tsi_cpu_isa_chosen, isa);
        enum { L = 100000 };
        int64_t *v = malloc(L * sizeof *v);
        for (int64_t i = 0; i < L; i++) v[i] = below(5);
        ts_tensor *x = pattern(TS_SHAPE(5, 2), o);
        const int64_t bad_at[4] = {-1, 40000, L - 1, 7}, bad_val[4] = {0, -1, 5, INT64_MIN};
        for (int k = 0; k < 4; k++) {
            int64_t keep = 0;
            if (bad_at[k] >= 0) keep = v[bad_at[k]], v[bad_at[k]] = bad_val[k];
            ts_tensor *y = ts_index_select(x, 0, ts_tensor_i64(TS_SHAPE(L), v, o));
            CHECK(bad_at[k] < 0 ? y != NULL : y == NULL);
            if (bad_at[k] >= 0) {
                CHECK_ERR(TS_ERR_ARG);
                v[bad_at[k]] = keep;
            }
        }
        free(v);
        CHECK_OK();
    }
    atomic_store(&tsi_cpu_isa_chosen, (int)saved);
    /* gather along the last dim, dense (its own loop) and with a transposed index (strided), and
     * along dim 0 (one row of blocks) */
    for (int along = 0; along < 2; along++) {
        const int64_t R = along ? 300 : 40, C = along ? 70 : 1000;
        ts_tensor *x = pattern(TS_SHAPE(R, C), o);
        double *h = host(x);
        for (int tr = 0; tr < 2; tr++) {
            const int64_t IR = along ? 500 : R, IC = C;
            int64_t *v;
            const int64_t bound = along ? R : C;
            ts_tensor *idx = tr ? ts_transpose(random_index(TS_SHAPE(IC, IR), bound, o, &v), 0, 1)
                                : random_index(TS_SHAPE(IR, IC), bound, o, &v);
            ts_tensor *y = ts_gather(x, along ? 0 : 1, idx);
            double *g = y ? host(y) : NULL;
            bool ok = g && ts_numel(y) == IR * IC;
            for (int64_t i = 0; ok && i < IR; i++)
                for (int64_t j = 0; j < IC; j++) {
                    const int64_t ix = tr ? v[j * IR + i] : v[i * IC + j];
                    ok &= g[i * IC + j] == (along ? h[ix * C + j] : h[i * C + ix]);
                }
            CHECK(ok);
            free(g), free(v);
        }
        free(h);
        CHECK_OK();
    }
    ts_scope_end();
}

/* ------------------------------------------------------------------ scatter_add, one_hot */
static void test_scatter_one_hot(ts_device dev) {
    ts_scope_begin();
    ts_opts o = {.device = dev};
    /* torch's documentation example: rows of ones scattered into a zero [3, 5] */
    int64_t iv[10] = {0, 1, 2, 0, 0, 2, 0, 0, 1, 2};
    ts_tensor *idx = ts_tensor_i64(TS_SHAPE(2, 5), iv, o);
    double sv[10];
    for (int i = 0; i < 10; i++) sv[i] = i + 1;
    ts_tensor *src = ts_tensor_f64(TS_SHAPE(2, 5), sv, o);
    ts_tensor *t = ts_zeros(TS_SHAPE(3, 5), (ts_opts){.dtype = TS_F64, .device = dev});
    double want[15] = {0};
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 5; j++) want[iv[i * 5 + j] * 5 + j] += sv[i * 5 + j];
    ts_tensor *r = ts_scatter_add(t, 0, idx, src);
    CHECK(shape_is(r, TS_SHAPE(3, 5)) && values_are(r, want, 15));
    CHECK_EQ(ts_item(ts_sum(t)), 0); /* out of place leaves t alone */
    uint64_t v0 = ts_version(t);
    CHECK(ts_scatter_add_(t, 0, idx, src) == t);
    CHECK(values_are(t, want, 15) && ts_version(t) > v0);
    /* along dim 1 with a smaller index than src */
    ts_tensor *i1 = ts_tensor_i64(TS_SHAPE(1, 2), (int64_t[]){4, 4}, o);
    ts_tensor *r1 = ts_scatter_add(
        ts_zeros(TS_SHAPE(2, 5), (ts_opts){.dtype = TS_F64, .device = dev}), 1, i1, src);
    CHECK(values_are(r1, (double[]){0, 0, 0, 0, 3, 0, 0, 0, 0, 0}, 10));
    /* along the last dim from a transposed source (stride 2 along the scattered dim), repeated
     * targets in a row: the one-element-per-index row path */
    int64_t iv2[10] = {4, 4, 0, 2, 1, 3, 3, 3, 0, 4};
    ts_tensor *srct = ts_transpose(ts_tensor_f64(TS_SHAPE(5, 2), sv, o), 0, 1); /* [2, 5] */
    double want2[10] = {0};
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 5; j++) want2[i * 5 + iv2[i * 5 + j]] += sv[j * 2 + i];
    ts_tensor *r2 =
        ts_scatter_add(ts_zeros(TS_SHAPE(2, 5), (ts_opts){.dtype = TS_F64, .device = dev}), 1,
                       ts_tensor_i64(TS_SHAPE(2, 5), iv2, o), srct);
    CHECK(values_are(r2, want2, 10));
    CHECK_OK();
    CHECK(ts_scatter_add(t, 0, idx, ts_zeros(TS_SHAPE(2, 5), o)) == NULL); /* f32 src */
    CHECK_ERR(TS_ERR_DTYPE);
    CHECK(ts_scatter_add(t, 0, ts_tensor_i64(TS_SHAPE(1, 1), (int64_t[]){3}, o), src) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_scatter_add(t, 0, ts_zeros(TS_SHAPE(3, 6), (ts_opts){.dtype = TS_I64, .device = dev}),
                         src) == NULL);
    CHECK_ERR(TS_ERR_SHAPE);
    ts_tensor *leaf =
        ts_zeros(TS_SHAPE(3, 5), (ts_opts){.dtype = TS_F64, .device = dev, .requires_grad = true});
    CHECK(ts_scatter_add_(leaf, 0, idx, src) == NULL);
    CHECK_ERR(TS_ERR_STATE);
    ts_tensor *ex = ts_expand(ts_zeros(TS_SHAPE(1, 5), (ts_opts){.dtype = TS_F64, .device = dev}),
                              TS_SHAPE(3, 5));
    CHECK(ts_scatter_add_(ex, 0, idx, src) == NULL);
    CHECK_ERR(TS_ERR_ARG);

    /* one_hot */
    ts_tensor *lab = ts_tensor_i64(TS_SHAPE(3), (int64_t[]){3, 0, 1}, o);
    ts_tensor *oh = ts_one_hot(lab, -1);
    CHECK(shape_is(oh, TS_SHAPE(3, 4)) && ts_dtype_of(oh) == TS_I64);
    CHECK(values_are(oh, (double[]){0, 0, 0, 1, 1, 0, 0, 0, 0, 1, 0, 0}, 12));
    ts_tensor *lab2 = ts_t(ts_tensor_i64(TS_SHAPE(2, 2), (int64_t[]){0, 2, 1, 0}, o));
    ts_tensor *oh2 = ts_one_hot(lab2, 3); /* labels [[0, 1], [2, 0]] */
    CHECK(shape_is(oh2, TS_SHAPE(2, 2, 3)));
    CHECK(values_are(oh2, (double[]){1, 0, 0, 0, 1, 0, 0, 0, 1, 1, 0, 0}, 12));
    ts_tensor *ohe =
        ts_one_hot(ts_empty(TS_SHAPE(0), (ts_opts){.dtype = TS_I64, .device = dev}), 4);
    CHECK(shape_is(ohe, TS_SHAPE(0, 4)));
    CHECK_OK();
    CHECK(ts_one_hot(lab, 3) == NULL);
    CHECK(strstr(ts_error_message(), "Class values must be smaller than num_classes.") != NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_one_hot(ts_tensor_i64(TS_SHAPE(2), (int64_t[]){1, -1}, o), 4) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_one_hot(ts_empty(TS_SHAPE(0), (ts_opts){.dtype = TS_I64, .device = dev}), -1) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_one_hot(ts_tensor_i32(TS_SHAPE(1), (int32_t[]){1}, o), 2) == NULL);
    CHECK_ERR(TS_ERR_DTYPE);
    ts_scope_end();
}

int main(void) {
    ts_device devs[2] = {ts_cpu(), ts_sim(0)};
    int ndev = ts_device_count(TS_SIM) > 0 ? 2 : 1;
    if (ndev == 1) printf("note: no sim devices (TS_SIM_DEVICES unset): cpu only\n");
    for (int i = 0; i < ndev; i++) {
        ts_device other = devs[(i + 1) % ndev];
        test_cat_stack(devs[i], other);
        test_split_chunk(devs[i]);
        test_select_gather(devs[i], other);
        test_select_gather_blocks(devs[i]);
        test_scatter_one_hot(devs[i]);
        CHECK_OK();
    }
    return ts_test_finish();
}
