/* test_core_views.c — views share storage: view/reshape, flatten, permute, transpose, squeeze,
 * unsqueeze, narrow, slice, select, expand, contiguous, as_strided, and version counters, on cpu
 * and sim:0. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ts_test.h"

/* Reads a tensor of any dtype, device and strides as doubles (via f64 on the host). */
static int64_t read_all(ts_tensor *t, double *out, int64_t max) {
    int64_t n = ts_numel(t);
    if (n < 0 || n > max) return -1;
    ts_tensor *c = ts_to(ts_contiguous(ts_to_dtype(t, TS_F64)), ts_cpu());
    if (!c || ts_copy_to_host(c, out, (size_t)n * sizeof(double)) != TS_OK) return -1;
    return n;
}

static bool shape_is(ts_tensor *t, ts_shape s) {
    ts_shape g = ts_shape_of(t);
    if (!t || g.ndim != s.ndim) return false;
    for (int i = 0; i < s.ndim; i++)
        if (g.dims[i] != s.dims[i]) return false;
    return true;
}

static bool strides_are(ts_tensor *t, int n, const int64_t *st) {
    if (!t || ts_ndim(t) != n) return false;
    for (int i = 0; i < n; i++)
        if (ts_stride(t, i) != st[i]) return false;
    return true;
}
#define STRIDES(t, ...)                                                                            \
    strides_are(t, (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)),                      \
                (const int64_t[]){__VA_ARGS__})

/* Values of t equal ref(multi-index) computed here: ref gets the flat row-major index of the
 * element in t's own logical order and the index vector. */
typedef double (*ref_fn)(const int64_t *idx);
static bool values_match(ts_tensor *t, ref_fn ref) {
    static double v[4096];
    int64_t n = read_all(t, v, 4096);
    if (n < 0) return false;
    ts_shape s = ts_shape_of(t);
    int64_t idx[TS_MAX_DIMS] = {0};
    for (int64_t k = 0; k < n; k++) {
        if (v[k] != ref(idx)) {
            fprintf(stderr, "  element %lld: %g vs %g\n", (long long)k, v[k], ref(idx));
            return false;
        }
        for (int d = s.ndim - 1; d >= 0; d--) {
            if (++idx[d] < s.dims[d]) break;
            idx[d] = 0;
        }
    }
    return true;
}

/* base: arange(24) as [2, 3, 4]: value = 12 i + 4 j + k */
static double ref_base(const int64_t *x) { return (double)(12 * x[0] + 4 * x[1] + x[2]); }
static double ref_perm201(const int64_t *x) { return (double)(12 * x[1] + 4 * x[2] + x[0]); }
static double ref_tr02(const int64_t *x) { return (double)(12 * x[2] + 4 * x[1] + x[0]); }
static double ref_flat(const int64_t *x) { return (double)x[0]; }
static double ref_t_of_6x4(const int64_t *x) { return (double)(4 * x[1] + x[0]); }
static double ref_slice(const int64_t *x) {
    return (double)(12 * x[0] + 4 * (2 * x[1]) + x[2] + 1);
}
static double ref_expand(const int64_t *x) { return (double)(x[2]); }
static double ref_perm_flat1(const int64_t *x) { /* permute(2,0,1) then flatten(1): [4, 6] */
    return (double)(12 * (x[1] / 3) + 4 * (x[1] % 3) + x[0]);
}

static ts_tensor *base_on(ts_device dev) {
    return ts_view(ts_arange(0, 24, 1, (ts_opts){.device = dev, .dtype = TS_F32}),
                   TS_SHAPE(2, 3, 4));
}

static void test_view_reshape(ts_device dev) {
    ts_scope_begin();
    ts_tensor *b = base_on(dev);
    CHECK(shape_is(b, TS_SHAPE(2, 3, 4)) && values_match(b, ref_base));
    ts_tensor *v = ts_view(b, TS_SHAPE(-1, 4));
    CHECK(shape_is(v, TS_SHAPE(6, 4)) && ts_shares_storage(v, b) && STRIDES(v, 4, 1));
    CHECK(shape_is(ts_view(b, TS_SHAPE(4, -1)), TS_SHAPE(4, 6)));
    CHECK(shape_is(ts_view(b, TS_SHAPE(-1)), TS_SHAPE(24)));
    CHECK(shape_is(ts_view(b, TS_SHAPE(2, 1, 12, 1)), TS_SHAPE(2, 1, 12, 1)));
    CHECK(ts_view(b, TS_SHAPE(-1, -1)) == NULL);
    CHECK_ERR(TS_ERR_SHAPE);
    CHECK(ts_view(b, TS_SHAPE(5, -1)) == NULL);
    CHECK_ERR(TS_ERR_SHAPE);
    CHECK(ts_view(b, TS_SHAPE(25)) == NULL);
    CHECK_ERR(TS_ERR_SHAPE);
    /* a transposed tensor cannot be viewed flat: view fails, reshape copies */
    ts_tensor *t = ts_t(v);
    CHECK(ts_view(t, TS_SHAPE(24)) == NULL);
    CHECK(ts_error() == TS_ERR_SHAPE && strstr(ts_error_message(), "view") &&
          strstr(ts_error_message(), "reshape"));
    CHECK_ERR(TS_ERR_SHAPE);
    ts_tensor *r = ts_reshape(t, TS_SHAPE(24));
    CHECK(r && !ts_shares_storage(r, b) && ts_is_contiguous(r));
    double got[24];
    CHECK(read_all(r, got, 24) == 24);
    bool ok = true;
    for (int i = 0; i < 24; i++) ok = ok && got[i] == (double)((i % 6) * 4 + i / 6);
    CHECK(ok);
    /* a transposed tensor can still be viewed where the dims it splits stay contiguous */
    ts_tensor *tv = ts_view(t, TS_SHAPE(4, 2, 3));
    CHECK(tv && ts_shares_storage(tv, b) && STRIDES(tv, 1, 12, 4));
    CHECK_OK();
    /* reshape returns a view when it can */
    ts_tensor *rv = ts_reshape(b, TS_SHAPE(3, 8));
    CHECK(rv && ts_shares_storage(rv, b));
    /* 0-dim and empty */
    ts_tensor *s = ts_scalar(5, (ts_opts){.device = dev});
    CHECK(shape_is(ts_view(s, TS_SHAPE(1, 1)), TS_SHAPE(1, 1)));
    CHECK(shape_is(ts_view(ts_view(s, TS_SHAPE(1)), TS_SHAPE()), TS_SHAPE()));
    ts_tensor *e = ts_zeros(TS_SHAPE(0, 4), (ts_opts){.device = dev});
    /* torch: "cannot reshape tensor of 0 elements into shape [2, 0, -1]" (-1 is ambiguous) */
    CHECK(ts_view(e, TS_SHAPE(2, 0, -1)) == NULL);
    CHECK_ERR(TS_ERR_SHAPE);
    CHECK(shape_is(ts_reshape(e, TS_SHAPE(4, 0)), TS_SHAPE(4, 0)));
    /* flatten */
    ts_tensor *f = ts_flatten(b, 0, -1);
    CHECK(shape_is(f, TS_SHAPE(24)) && ts_shares_storage(f, b) && values_match(f, ref_flat));
    CHECK(shape_is(ts_flatten(b, 1, 2), TS_SHAPE(2, 12)));
    CHECK(shape_is(ts_flatten(b, 0, 1), TS_SHAPE(6, 4)));
    CHECK(shape_is(ts_flatten(b, -2, -2), TS_SHAPE(2, 3, 4)));
    CHECK(shape_is(ts_flatten(s, 0, -1), TS_SHAPE(1)));
    ts_tensor *pf = ts_flatten(ts_permute(b, TS_DIMS(2, 0, 1)), 1, 2);
    CHECK(shape_is(pf, TS_SHAPE(4, 6)) && ts_shares_storage(pf, b) && STRIDES(pf, 1, 4));
    CHECK(values_match(pf, ref_perm_flat1));
    ts_tensor *tf = ts_flatten(ts_transpose(b, 0, 2), 0, -1); /* needs a copy */
    CHECK(tf && !ts_shares_storage(tf, b) && STRIDES(tf, 1));
    CHECK(ts_flatten(b, 2, 1) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_flatten(b, 0, 3) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK_OK();
    ts_scope_end();
}

/* ATen's computeStride on expanded and sliced inputs; expected strides printed by torch 1.13 */
static void test_view_strides(ts_device dev) {
    ts_scope_begin();
    ts_tensor *e = ts_expand(ts_arange(0, 4, 1, (ts_opts){.device = dev}), TS_SHAPE(3, 4));
    CHECK(ts_view(e, TS_SHAPE(12)) == NULL);
    CHECK_ERR(TS_ERR_SHAPE);
    CHECK(STRIDES(ts_view(e, TS_SHAPE(3, 2, 2)), 0, 2, 1));
    CHECK(STRIDES(ts_view(e, TS_SHAPE(1, 3, 4, 1)), 0, 0, 1, 1));
    CHECK(STRIDES(ts_view(e, TS_SHAPE(3, 4)), 0, 1));
    ts_tensor *z = ts_expand(ts_zeros(TS_SHAPE(1), (ts_opts){.device = dev}), TS_SHAPE(3, 4));
    CHECK(STRIDES(ts_view(z, TS_SHAPE(12)), 0));
    CHECK(STRIDES(ts_view(z, TS_SHAPE(4, 3)), 0, 0));
    CHECK(STRIDES(ts_view(z, TS_SHAPE(2, 6)), 0, 0));
    ts_tensor *x = ts_slice(base_on(dev), 1, 1, 3, 1); /* [2, 2, 4] strides (12, 4, 1) */
    CHECK(STRIDES(ts_view(x, TS_SHAPE(2, 8)), 12, 1));
    CHECK(STRIDES(ts_view(x, TS_SHAPE(2, 2, 2, 2)), 12, 4, 2, 1));
    CHECK(ts_view(x, TS_SHAPE(4, 4)) == NULL);
    CHECK_ERR(TS_ERR_SHAPE);
    CHECK(ts_view(x, TS_SHAPE(16)) == NULL);
    CHECK_ERR(TS_ERR_SHAPE);
    ts_tensor *r = ts_reshape(x, TS_SHAPE(4, 4)); /* a copy, in x's logical order */
    double v[16];
    CHECK(r && !ts_shares_storage(r, x) && read_all(r, v, 16) == 16);
    CHECK(v[0] == 4 && v[7] == 11 && v[8] == 16 && v[15] == 23);
    CHECK_OK();
    ts_scope_end();
}

static void test_permute_transpose(ts_device dev) {
    ts_scope_begin();
    ts_tensor *b = base_on(dev);
    ts_tensor *p = ts_permute(b, TS_DIMS(2, 0, 1));
    CHECK(shape_is(p, TS_SHAPE(4, 2, 3)) && STRIDES(p, 1, 12, 4) && !ts_is_contiguous(p));
    CHECK(values_match(p, ref_perm201) && ts_shares_storage(p, b));
    CHECK(shape_is(ts_permute(b, TS_DIMS(-1, 0, -2)), TS_SHAPE(4, 2, 3)));
    CHECK(ts_permute(b, TS_DIMS(0, 1)) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_permute(b, TS_DIMS(0, 1, 1)) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_permute(b, TS_DIMS(0, 1, 3)) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    ts_tensor *tr = ts_transpose(b, 0, -1);
    CHECK(shape_is(tr, TS_SHAPE(4, 3, 2)) && STRIDES(tr, 1, 4, 12) && values_match(tr, ref_tr02));
    CHECK(ts_transpose(b, 0, 3) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    ts_tensor *m = ts_view(b, TS_SHAPE(6, 4));
    ts_tensor *mt = ts_t(m);
    CHECK(shape_is(mt, TS_SHAPE(4, 6)) && STRIDES(mt, 1, 4) && values_match(mt, ref_t_of_6x4));
    CHECK(ts_is_contiguous(ts_t(mt)));
    ts_tensor *one = ts_view(b, TS_SHAPE(24));
    CHECK(shape_is(ts_t(one), TS_SHAPE(24)) &&
          shape_is(ts_t(ts_scalar(1, (ts_opts){.device = dev})), TS_SHAPE()));
    CHECK(ts_t(b) == NULL);
    CHECK_ERR(TS_ERR_SHAPE);
    CHECK_OK();
    ts_scope_end();
}

static void test_squeeze_unsqueeze(ts_device dev) {
    ts_scope_begin();
    ts_tensor *z = ts_zeros(TS_SHAPE(1, 3, 1, 2), (ts_opts){.device = dev});
    CHECK(shape_is(ts_squeeze(z), TS_SHAPE(3, 2)) && ts_shares_storage(ts_squeeze(z), z));
    CHECK(shape_is(ts_squeeze_dim(z, 0), TS_SHAPE(3, 1, 2)));
    CHECK(shape_is(ts_squeeze_dim(z, -2), TS_SHAPE(1, 3, 2)));
    CHECK(shape_is(ts_squeeze_dim(z, 1), TS_SHAPE(1, 3, 1, 2))); /* not size 1: unchanged */
    CHECK(ts_squeeze_dim(z, 4) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    ts_tensor *s = ts_scalar(2, (ts_opts){.device = dev});
    CHECK(shape_is(ts_squeeze(s), TS_SHAPE()) && shape_is(ts_squeeze_dim(s, -1), TS_SHAPE()));
    ts_tensor *b = base_on(dev);
    ts_tensor *u1 = ts_unsqueeze(b, 1), *um1 = ts_unsqueeze(b, -1), *u0 = ts_unsqueeze(b, -4);
    CHECK(shape_is(u1, TS_SHAPE(2, 1, 3, 4)) && STRIDES(u1, 12, 12, 4, 1));
    CHECK(shape_is(um1, TS_SHAPE(2, 3, 4, 1)) && STRIDES(um1, 12, 4, 1, 1));
    CHECK(shape_is(u0, TS_SHAPE(1, 2, 3, 4)) && STRIDES(u0, 24, 12, 4, 1));
    /* torch: x.permute(2,0,1).unsqueeze(2).stride() == (1, 12, 12, 4) */
    CHECK(STRIDES(ts_unsqueeze(ts_permute(b, TS_DIMS(2, 0, 1)), 2), 1, 12, 12, 4));
    CHECK(ts_unsqueeze(b, -5) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(shape_is(ts_unsqueeze(b, 3), TS_SHAPE(2, 3, 4, 1)));
    CHECK(ts_unsqueeze(b, 4) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(shape_is(ts_unsqueeze(s, -1), TS_SHAPE(1)) && shape_is(ts_unsqueeze(s, 0), TS_SHAPE(1)));
    ts_tensor *v = ts_view(b, TS_SHAPE(24));
    ts_tensor *u = ts_unsqueeze(ts_unsqueeze(v, 0), 0); /* chain up to the maximum rank */
    for (int i = 0; i < 5; i++) u = ts_unsqueeze(u, -1);
    CHECK(ts_ndim(u) == 8);
    CHECK(ts_unsqueeze(u, 0) == NULL);
    CHECK_ERR(TS_ERR_SHAPE);
    CHECK_OK();
    ts_scope_end();
}

static void test_narrow_slice_select(ts_device dev) {
    ts_scope_begin();
    ts_tensor *b = base_on(dev);
    ts_tensor *n = ts_narrow(b, 2, -3, 2); /* columns 1..2 */
    CHECK(shape_is(n, TS_SHAPE(2, 3, 2)) && ts_storage_offset(n) == 1 && STRIDES(n, 12, 4, 1));
    double v[64];
    CHECK(read_all(n, v, 64) == 12 && v[0] == 1 && v[1] == 2 && v[2] == 5 && v[11] == 22);
    CHECK(shape_is(ts_narrow(b, 0, 2, 0), TS_SHAPE(0, 3, 4)));
    CHECK(ts_narrow(b, 1, -4, 1) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_narrow(b, 1, 2, 2) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_narrow(b, 1, 0, -1) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    /* slices follow Python's rules */
    ts_tensor *r = ts_arange(0, 10, 1, (ts_opts){.device = dev});
    struct {
        int64_t start, end, step, n, first;
    } cases[] = {{-100, 100, 3, 4, 0}, {7, 2, 1, 0, 0},   {-3, 100, 1, 3, 7}, {2, -2, 4, 2, 2},
                 {-12, -8, 1, 2, 0},   {0, 10, 20, 1, 0}, {9, 10, 2, 1, 9},   {10, 12, 1, 0, 0},
                 {-1, -1, 1, 0, 0},    {3, 8, 2, 3, 3}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        ts_tensor *s = ts_slice(r, 0, cases[k].start, cases[k].end, cases[k].step);
        CHECK(s && ts_numel(s) == cases[k].n);
        if (!s || ts_numel(s) != cases[k].n) {
            fprintf(stderr, "  slice case %zu: %lld elements\n", k, (long long)ts_numel(s));
            continue;
        }
        CHECK(read_all(s, v, 64) == cases[k].n);
        bool ok = true;
        for (int64_t i = 0; i < cases[k].n; i++)
            ok = ok && v[i] == (double)(cases[k].first + i * cases[k].step);
        CHECK(ok);
    }
    ts_tensor *s2 = ts_slice(b, 1, 0, 3, 2);
    CHECK(shape_is(s2, TS_SHAPE(2, 2, 4)) && STRIDES(s2, 12, 8, 1));
    ts_tensor *s3 = ts_slice(s2, -1, 1, 4, 1);
    CHECK(shape_is(s3, TS_SHAPE(2, 2, 3)) && ts_storage_offset(s3) == 1 &&
          values_match(s3, ref_slice));
    CHECK(ts_slice(r, 0, 0, 5, 0) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_slice(r, 0, 0, 5, -1) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_slice(r, 1, 0, 5, 1) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    /* select removes the dim; negative indices count from the end */
    ts_tensor *sel = ts_select(b, 1, -1);
    CHECK(shape_is(sel, TS_SHAPE(2, 4)) && ts_storage_offset(sel) == 8 && STRIDES(sel, 12, 1));
    CHECK(read_all(sel, v, 64) == 8 && v[0] == 8 && v[4] == 20 && v[7] == 23);
    CHECK(ts_item(ts_select(ts_select(sel, 0, 1), 0, -2)) == 22);
    CHECK(ts_select(b, 1, 3) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_select(b, 1, -4) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_select(ts_scalar(1, (ts_opts){.device = dev}), 0, 0) == NULL);
    CHECK_ERR(TS_ERR_SHAPE);
    CHECK_OK();
    ts_scope_end();
}

static void test_expand_contiguous(ts_device dev) {
    ts_scope_begin();
    ts_tensor *row = ts_arange(0, 4, 1, (ts_opts){.device = dev, .dtype = TS_F64});
    ts_tensor *e = ts_expand(row, TS_SHAPE(2, 3, 4));
    CHECK(shape_is(e, TS_SHAPE(2, 3, 4)) && STRIDES(e, 0, 0, 1) && ts_shares_storage(e, row));
    CHECK(values_match(e, ref_expand) && !ts_is_contiguous(e));
    ts_tensor *col = ts_zeros(TS_SHAPE(2, 1, 3), (ts_opts){.device = dev});
    ts_tensor *e2 = ts_expand(col, TS_SHAPE(-1, 4, -1));
    CHECK(shape_is(e2, TS_SHAPE(2, 4, 3)) && STRIDES(e2, 3, 0, 1));
    CHECK(shape_is(ts_expand(col, TS_SHAPE(2, 1, 3)), TS_SHAPE(2, 1, 3)));
    ts_tensor *three = ts_zeros(TS_SHAPE(3), (ts_opts){.device = dev});
    CHECK(ts_expand(three, TS_SHAPE(2, 4)) == NULL);
    CHECK(ts_error() == TS_ERR_SHAPE);
    CHECK_STREQ(ts_error_message(),
                "expand: the expanded size of the tensor (4) must match the existing size (3) at "
                "non-singleton dimension 1.  Target sizes: [2, 4].  Tensor sizes: [3]");
    ts_error_clear();
    CHECK(ts_expand(three, TS_SHAPE(-1, 3)) == NULL);
    CHECK_ERR(TS_ERR_SHAPE);
    CHECK(ts_expand(col, TS_SHAPE(3)) == NULL);
    CHECK_ERR(TS_ERR_SHAPE);
    ts_tensor *other = ts_zeros(TS_SHAPE(5, 3, 4), (ts_opts){.device = dev});
    ts_tensor *ea = ts_expand_as(row, other);
    CHECK(shape_is(ea, TS_SHAPE(5, 3, 4)) && STRIDES(ea, 0, 0, 1));
    CHECK(ts_expand_as(row, NULL) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    /* writing through an expanded view: fill_ is fine (torch too), copy_ is refused */
    ts_tensor *cell = ts_zeros(TS_SHAPE(1), (ts_opts){.device = dev});
    CHECK(ts_fill_(ts_expand(cell, TS_SHAPE(3)), 4) != NULL && ts_item(cell) == 4);
    CHECK(ts_copy_(ts_expand(cell, TS_SHAPE(3)), ts_narrow(row, 0, 0, 3)) == NULL);
    CHECK(ts_error() == TS_ERR_ARG && strstr(ts_error_message(), "copy_") &&
          strstr(ts_error_message(), "single memory location"));
    ts_error_clear();
    CHECK(ts_item(cell) == 4);
    CHECK(ts_copy_(ts_expand(cell, TS_SHAPE(1)), ts_full(TS_SHAPE(1), 6, (ts_opts){0})) != NULL);
    CHECK(ts_item(cell) == 6);
    /* contiguous: the tensor itself when already contiguous, a copy otherwise */
    ts_tensor *c0 = ts_contiguous(row);
    CHECK(c0 == row);
    ts_tensor *c1 = ts_contiguous(e);
    CHECK(c1 && c1 != e && !ts_shares_storage(c1, row) && ts_is_contiguous(c1));
    CHECK(STRIDES(c1, 12, 4, 1) && values_match(c1, ref_expand));
    CHECK(ts_device_equal(ts_device_of(c1), dev));
    CHECK_OK();
    ts_scope_end();
}

static void test_sharing_versions(ts_device dev) {
    ts_scope_begin();
    ts_tensor *b = ts_zeros(TS_SHAPE(3, 4), (ts_opts){.device = dev});
    ts_tensor *col = ts_select(b, 1, 2);
    ts_tensor *tr = ts_t(b);
    uint64_t v0 = ts_version(b);
    CHECK(ts_version(col) == v0 && ts_version(tr) == v0);
    CHECK(ts_fill_(col, 7) == col); /* writes through to the base */
    CHECK(ts_version(b) > v0 && ts_version(tr) == ts_version(b) &&
          ts_version(col) == ts_version(b));
    double v[12];
    CHECK(read_all(b, v, 12) == 12);
    bool ok = true;
    for (int i = 0; i < 12; i++) ok = ok && v[i] == (i % 4 == 2 ? 7 : 0);
    CHECK(ok);
    uint64_t v1 = ts_version(b);
    ts_tensor *row = ts_select(tr, 1, 0); /* b[0, :] through the transpose */
    CHECK(ts_fill_(row, -1) && ts_version(b) > v1);
    CHECK(read_all(b, v, 12) == 12 && v[0] == -1 && v[3] == -1 && v[4] == 0 && v[6] == 7);
    /* a copy does not share the counter */
    ts_tensor *cl = ts_clone(b);
    uint64_t vc = ts_version(cl), vb = ts_version(b);
    ts_zero_(cl);
    CHECK(ts_version(b) == vb && ts_version(cl) > vc);
    /* copy_ into a view writes into the base */
    ts_tensor *src = ts_full(TS_SHAPE(3), 5, (ts_opts){.device = dev, .dtype = TS_I64});
    CHECK(ts_copy_(ts_select(b, 1, 1), src) != NULL);
    CHECK(read_all(b, v, 12) == 12 && v[1] == 5 && v[5] == 5 && v[9] == 5 && v[0] == -1);
    /* a view outlives its base handle: the storage stays alive */
    ts_tensor *base = ts_full(TS_SHAPE(4, 4), 3, (ts_opts){.device = dev});
    ts_tensor *diag_row = ts_keep(ts_select(base, 0, 2));
    CHECK_OK();
    ts_scope_end();
    ts_scope_begin();
    CHECK(read_all(diag_row, v, 12) == 4 && v[0] == 3 && v[3] == 3);
    ts_release(diag_row);
    /* chains of views: every link shares storage and maps back to the right element */
    ts_tensor *x = base_on(dev);
    ts_tensor *y = ts_narrow(ts_permute(ts_unsqueeze(x, 0), TS_DIMS(0, 3, 2, 1)), 1, 1, 2);
    y = ts_select(ts_squeeze_dim(y, 0), -1, 1);       /* [2 (k=1..2), 3 (j)] at i=1 */
    y = ts_slice(ts_transpose(y, 0, 1), 0, -2, 3, 1); /* [2 (j=1..2), 2 (k)] */
    y = ts_view(ts_contiguous(y), TS_SHAPE(4));
    CHECK(y && read_all(y, v, 12) == 4);
    CHECK(v[0] == 12 + 4 + 1 && v[1] == 12 + 4 + 2 && v[2] == 12 + 8 + 1 && v[3] == 12 + 8 + 2);
    ts_tensor *w = ts_expand(ts_unsqueeze(ts_select(ts_t(ts_view(x, TS_SHAPE(6, 4))), 0, 3), 0),
                             TS_SHAPE(2, 6));
    CHECK(w && ts_shares_storage(w, x) && read_all(w, v, 12) == 12);
    CHECK(v[0] == 3 && v[5] == 23 && v[6] == 3 && v[11] == 23);
    CHECK_OK();
    ts_scope_end();
}

/* as_strided: views of the storage with strides of the caller's (overlapping reads, another
 * offset, a view of a view), writes through them, the storage bound, and the gradient: each read
 * of an element adds its gradient; an input that overlaps itself (expanded) shares it */
static ts_tensor *f_as_strided(ts_tensor *const *in, int n, void *ctx) {
    (void)n;
    const int64_t *g = ctx; /* size[2], stride[2], offset */
    return ts_as_strided(in[0], TS_SHAPE(g[0], g[1]), g + 2, g[4]);
}

static void test_as_strided(ts_device dev) {
    ts_scope_begin();
    const ts_opts o = {.dtype = TS_F64, .device = dev};
    ts_tensor *x = ts_reshape(ts_arange(0, 12, 1, o), TS_SHAPE(3, 4));
    /* overlapping windows [2, 3] over the flat storage, from element 1: x.flat[1 + i + 2 j] */
    ts_tensor *w = ts_as_strided(x, TS_SHAPE(2, 3), (const int64_t[]){1, 2}, 1);
    double v[12];
    CHECK(shape_is(w, TS_SHAPE(2, 3)) && STRIDES(w, 1, 2) && read_all(w, v, 12) == 6);
    const double want[6] = {1, 3, 5, 2, 4, 6};
    for (int i = 0; i < 6; i++) CHECK(v[i] == want[i]);
    /* a view of a view: the offset is the storage's, the default the input's own */
    ts_tensor *row = ts_select(x, 0, 2); /* offset 8 */
    ts_tensor *r2 = ts_as_strided(row, TS_SHAPE(2), (const int64_t[]){3}, -1);
    CHECK(r2 && read_all(r2, v, 12) == 2 && v[0] == 8 && v[1] == 11);
    /* writes reach the storage */
    CHECK(ts_fill_(ts_as_strided(x, TS_SHAPE(3), (const int64_t[]){5}, 0), -1.0) != NULL);
    CHECK(read_all(x, v, 12) == 12 && v[0] == -1 && v[5] == -1 && v[10] == -1 && v[1] == 1);
    CHECK_OK();
    /* past the storage's 12 elements, a negative size or stride: refused, naming the op */
    CHECK(ts_as_strided(x, TS_SHAPE(2, 2), (const int64_t[]){4, 6}, 1) != NULL); /* to [11] */
    CHECK_OK();
    CHECK(!ts_as_strided(x, TS_SHAPE(2, 2), (const int64_t[]){4, 7}, 1)); /* reaches [12] */
    CHECK_ERR_HAS(TS_ERR_ARG, "as_strided");
    CHECK(!ts_as_strided(x, TS_SHAPE(2), (const int64_t[]){-1}, 4));
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_as_strided(x, TS_SHAPE(0, 5), (const int64_t[]){100, 100}, 11) != NULL); /* empty */
    CHECK_OK();
    /* gradients: overlapping reads, and an expanded (self-overlapping) input */
    ts_tensor *a = ts_rand(TS_SHAPE(3, 4), o);
    ts_set_requires_grad(a, true);
    int64_t g1[5] = {2, 3, 1, 2, 1};
    CHECK(ts_gradcheck(f_as_strided, g1, &a, 1, (ts_gradcheck_opts){0}));
    ts_tensor *y = ts_as_strided(a, TS_SHAPE(2, 3), (const int64_t[]){1, 1}, 1); /* 1 + i + j */
    ts_backward(ts_sum(y));
    CHECK(read_all(ts_grad(a), v, 12) == 12);
    const double reads[12] = {0, 1, 2, 2, 1, 0, 0, 0, 0, 0, 0, 0}; /* times each element is read */
    for (int i = 0; i < 12; i++) CHECK(v[i] == reads[i]);
    ts_tensor *b = ts_rand(TS_SHAPE(3), o);
    ts_set_requires_grad(b, true);
    ts_tensor *e = ts_expand(ts_unsqueeze(b, 0), TS_SHAPE(4, 3)); /* 4 rows sharing b's storage */
    ts_tensor *ye = ts_as_strided(e, TS_SHAPE(2), (const int64_t[]){1}, 1); /* b[1], b[2] */
    ts_backward(ts_sum(ye));
    CHECK(read_all(ts_grad(b), v, 12) == 3 && v[0] == 0 && v[1] == 1 && v[2] == 1);
    CHECK_OK();
    ts_scope_end();
}

/* view(dtype): the same bytes as another dtype; another element size scales the last dim */
static void test_view_dtype(ts_device dev) {
    ts_scope_begin();
    const double d[4] = {1.0, -2.5, 0.0, 3.0e10};
    ts_tensor *x = ts_tensor_f64(TS_SHAPE(2, 2), d, (ts_opts){.dtype = TS_F64, .device = dev});
    ts_tensor *bits = ts_view_dtype(x, TS_I64);
    CHECK(shape_is(bits, TS_SHAPE(2, 2)) && ts_dtype_of(bits) == TS_I64);
    int64_t b[4], want[4];
    memcpy(want, d, sizeof want);
    CHECK(ts_copy_to_host(ts_to(ts_contiguous(bits), ts_cpu()), b, sizeof b) == TS_OK);
    CHECK(!memcmp(b, want, sizeof b));
    ts_tensor *f = ts_view_dtype(ts_select(x, 0, 1), TS_F32); /* [2] f64 at offset 2 -> [4] f32 */
    CHECK(shape_is(f, TS_SHAPE(4)) && ts_storage_offset(f) == 4 && ts_stride(f, 0) == 1);
    ts_tensor *back = ts_view_dtype(f, TS_F64);
    CHECK(back && ts_storage_offset(back) == 2 && ts_item(ts_select(back, 0, 1)) == 3.0e10);
    CHECK(ts_fill_(ts_view_dtype(x, TS_U8), 0) != NULL); /* a view: writes reach x */
    CHECK(ts_item(ts_sum(ts_abs(x))) == 0);
    CHECK_OK();
    CHECK(!ts_view_dtype(ts_t(x), TS_F32)); /* the last dim's stride is 2 */
    CHECK_ERR_HAS(TS_ERR_SHAPE, "stride(-1)");
    CHECK(!ts_view_dtype(ts_narrow(ts_view_dtype(x, TS_F32), 1, 0, 3), TS_F64)); /* 3 of 2s */
    CHECK_ERR_HAS(TS_ERR_SHAPE, "divisible");
    CHECK(!ts_view_dtype(ts_scalar(1, (ts_opts){.device = dev}), TS_F64)); /* 0-dim, 4 -> 8 */
    CHECK_ERR(TS_ERR_SHAPE);
    ts_scope_end();
}

/* resize_ / resize_as_: in place; a larger size grows the storage keeping the old bytes */
static void test_resize(ts_device dev) {
    ts_scope_begin();
    const ts_opts o = {.dtype = TS_F64, .device = dev};
    ts_tensor *x = ts_arange(0, 6, 1, o);
    CHECK(ts_resize_(x, TS_SHAPE(2, 3)) == x && shape_is(x, TS_SHAPE(2, 3)) && STRIDES(x, 3, 1));
    double v[12];
    CHECK(read_all(x, v, 12) == 6 && v[5] == 5);
    CHECK(ts_resize_(x, TS_SHAPE(3, 4)) == x && shape_is(x, TS_SHAPE(3, 4)));
    CHECK(read_all(x, v, 12) == 12);
    for (int i = 0; i < 6; i++) CHECK(v[i] == i);                 /* the old elements first */
    ts_tensor *view = ts_narrow(ts_arange(0, 10, 1, o), 0, 2, 8); /* storage offset 2 */
    CHECK(ts_resize_as_(view, ts_zeros(TS_SHAPE(3), o)) == view);
    CHECK(read_all(view, v, 12) == 3 && v[0] == 2 && v[2] == 4 && ts_storage_offset(view) == 2);
    CHECK_OK();
    /* a large growth: every new element writable and read back (the storage really grew) */
    ts_tensor *big = ts_ones(TS_SHAPE(3), o);
    CHECK(ts_resize_(big, TS_SHAPE(1000, 1000)) == big && ts_fill_(big, 2.0) != NULL);
    CHECK(ts_item(ts_sum(big)) == 2e6);
    /* to a 0-dim tensor: its first element */
    ts_tensor *s0 = ts_arange(5, 8, 1, o);
    CHECK(ts_resize_(s0, TS_SHAPE()) == s0 && ts_ndim(s0) == 0 && ts_item(s0) == 5);
    CHECK_OK();
    ts_tensor *g = ts_ones(TS_SHAPE(2), o);
    ts_set_requires_grad(g, true);
    CHECK(!ts_resize_(g, TS_SHAPE(3)));
    CHECK_ERR_HAS(TS_ERR_STATE, "resize_: cannot resize variables that require grad");
    CHECK(!ts_resize_(x, TS_SHAPE(-1)));
    CHECK_ERR(TS_ERR_SHAPE);
    ts_scope_end();
}

int main(void) {
    if (ts_device_count(TS_SIM) < 4) ts_sim_configure(4, 0);
    const ts_device devs[3] = {ts_cpu(), ts_sim(0), ts_sim(3)};
    for (int i = 0; i < 3; i++) {
        ts_mem_stats before, after;
        ts_memory_stats(devs[i], &before);
        test_view_reshape(devs[i]);
        test_view_strides(devs[i]);
        test_permute_transpose(devs[i]);
        test_squeeze_unsqueeze(devs[i]);
        test_narrow_slice_select(devs[i]);
        test_expand_contiguous(devs[i]);
        test_sharing_versions(devs[i]);
        test_as_strided(devs[i]);
        test_view_dtype(devs[i]);
        test_resize(devs[i]);
        ts_memory_stats(devs[i], &after);
        CHECK_EQ(after.live_tensors, before.live_tensors);
        CHECK_EQ(after.allocated, before.allocated);
    }
    CHECK_EQ(ts_scope_depth(), 0);
    return ts_test_finish();
}
