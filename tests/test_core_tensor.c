/* test_core_tensor.c — factories, queries, ts_item, host copies, dtype conversions (all 64 pairs)
 * and the requires_grad/fill_ rules, on cpu and sim:0, against references computed here. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ts_test.h"

static const ts_dtype all_dtypes[8] = {TS_F32, TS_F64, TS_F16, TS_BF16,
                                       TS_I64, TS_I32, TS_U8,  TS_BOOL};
static const size_t all_sizes[8] = {4, 8, 2, 2, 8, 4, 1, 1};

/* ------------------------------------------------------------------ references */
/* Round a double to a binary float with `mbits` stored mantissa bits, minimum normal exponent
 * `emin` and largest finite value `maxv`, to nearest even; arithmetic, not bit tricks, so it is
 * independent of the library's conversion code. */
static double round_to_format(double x, int mbits, int emin, double maxv) {
    if (isnan(x) || isinf(x) || x == 0) return x;
    int k;
    frexp(x, &k);
    int e = k - 1; /* 2^e <= |x| < 2^(e+1) */
    if (e < emin) e = emin;
    double q = ldexp(1.0, e - mbits);
    double r = nearbyint(x / q) * q;
    if (fabs(r) > maxv) return copysign(INFINITY, x);
    return r;
}
/* PyTorch builds Half and BFloat16 from a float, so doubles are rounded twice */
static double ref_f16(double x) { return round_to_format((float)x, 10, -14, 65504.0); }
static double ref_bf16(double x) {
    return round_to_format((float)x, 7, -126, ldexp(2.0 - ldexp(1.0, -7), 127));
}

/* A value already exact in `src`, converted to `dst` the way PyTorch does it (checked against
 * torch 1.13 for every value used below): floats truncate to ints, NaN/Inf/out of range give
 * INT_MIN, uint8 wraps through int64, bool is "!= 0" (NaN is true). */
static double ref_cast(double v, ts_dtype src, ts_dtype dst) {
    bool from_int = src == TS_I64 || src == TS_I32 || src == TS_U8 || src == TS_BOOL;
    int64_t iv = 0;
    if (from_int) iv = (int64_t)v;
    switch (dst) {
    case TS_F32:
        return from_int ? (double)(float)iv : (double)(float)v;
    case TS_F64:
        return from_int ? (double)iv : v;
    case TS_F16:
        return ref_f16(from_int ? (double)(float)iv : v);
    case TS_BF16:
        return ref_bf16(from_int ? (double)(float)iv : v);
    case TS_BOOL:
        return from_int ? (iv != 0) : (v != 0 || isnan(v));
    default:
        break;
    }
    if (!from_int) {
        bool ok64 = v >= -9223372036854775808.0 && v < 9223372036854775808.0;
        iv = ok64 ? (int64_t)v : INT64_MIN;
        if (dst == TS_I32 && !(v > -2147483649.0 && v < 2147483648.0)) return (double)INT32_MIN;
    }
    switch (dst) {
    case TS_I64:
        return (double)iv;
    case TS_I32:
        return (double)(int32_t)iv;
    case TS_U8:
        return (double)(uint8_t)iv;
    default:
        return NAN;
    }
}

/* Decodes host bytes of any dtype, again without the library. */
static double decode(const unsigned char *p, ts_dtype dt) {
    switch (dt) {
    case TS_F32: {
        float f;
        memcpy(&f, p, 4);
        return f;
    }
    case TS_F64: {
        double d;
        memcpy(&d, p, 8);
        return d;
    }
    case TS_F16: {
        uint16_t h;
        memcpy(&h, p, 2);
        int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
        double v = e == 0    ? ldexp(m, -24)
                   : e == 31 ? (m ? NAN : INFINITY)
                             : ldexp(m + 1024, e - 25);
        return s ? -v : v;
    }
    case TS_BF16: {
        uint16_t h;
        memcpy(&h, p, 2);
        uint32_t b = (uint32_t)h << 16;
        float f;
        memcpy(&f, &b, 4);
        return f;
    }
    case TS_I64: {
        int64_t x;
        memcpy(&x, p, 8);
        return (double)x;
    }
    case TS_I32: {
        int32_t x;
        memcpy(&x, p, 4);
        return x;
    }
    case TS_U8:
        return p[0];
    case TS_BOOL:
        return p[0];
    default:
        return NAN;
    }
}

/* Encodes a value exact in dt into host bytes. */
static void encode(unsigned char *p, ts_dtype dt, double v) {
    switch (dt) {
    case TS_F32: {
        float f = (float)v;
        memcpy(p, &f, 4);
        break;
    }
    case TS_F64:
        memcpy(p, &v, 8);
        break;
    case TS_F16: { /* v is exact in f16: find the bits by search over the 65536 patterns */
        for (uint32_t h = 0; h < 65536; h++) {
            uint16_t hh = (uint16_t)h;
            double d = decode((unsigned char *)&hh, TS_F16);
            if ((isnan(v) && isnan(d)) || (d == v && signbit(d) == signbit(v))) {
                memcpy(p, &hh, 2);
                return;
            }
        }
        break;
    }
    case TS_BF16: {
        float f = (float)v;
        uint32_t b;
        memcpy(&b, &f, 4);
        uint16_t h = (uint16_t)(b >> 16);
        memcpy(p, &h, 2);
        break;
    }
    case TS_I64: {
        int64_t x = (int64_t)v;
        memcpy(p, &x, 8);
        break;
    }
    case TS_I32: {
        int32_t x = (int32_t)v;
        memcpy(p, &x, 4);
        break;
    }
    case TS_U8:
    case TS_BOOL:
        p[0] = (unsigned char)v;
        break;
    default:
        break;
    }
}

/* Reads any tensor (any device, any strides) into doubles through raw bytes. Returns numel. */
static int64_t read_all(ts_tensor *t, double *out, int64_t max) {
    int64_t n = ts_numel(t);
    if (n < 0 || n > max) return -1;
    ts_tensor *c = ts_contiguous(t);
    size_t es = ts_element_size(t);
    unsigned char *buf = malloc((size_t)(n ? n : 1) * es);
    ts_status st = ts_copy_to_host(c, buf, (size_t)n * es);
    if (ts_scope_depth() == 0) ts_release(c);
    if (st != TS_OK) {
        free(buf);
        return -1;
    }
    for (int64_t i = 0; i < n; i++) out[i] = decode(buf + (size_t)i * es, ts_dtype_of(t));
    free(buf);
    return n;
}

static bool same_value(double a, double b) {
    if (isnan(a) || isnan(b)) return isnan(a) && isnan(b);
    return a == b;
}

static bool shape_is(ts_tensor *t, ts_shape s) {
    ts_shape g = ts_shape_of(t);
    if (g.ndim != s.ndim) return false;
    for (int i = 0; i < s.ndim; i++)
        if (g.dims[i] != s.dims[i]) return false;
    return true;
}

/* ------------------------------------------------------------------ factories */
static void test_basic_factories(ts_device dev) {
    ts_scope_begin();
    ts_opts o = {.device = dev};
    double v[64];
    ts_tensor *e = ts_empty(TS_SHAPE(2, 3), o);
    CHECK(e && ts_device_equal(ts_device_of(e), dev) && ts_dtype_of(e) == TS_F32);
    CHECK(shape_is(e, TS_SHAPE(2, 3)) && ts_is_contiguous(e) && ts_stride(e, 0) == 3);
    ts_tensor *z = ts_zeros(TS_SHAPE(4, 5), (ts_opts){.device = dev, .dtype = TS_I32});
    CHECK_EQ(read_all(z, v, 64), 20);
    bool ok = true;
    for (int i = 0; i < 20; i++) ok = ok && v[i] == 0;
    CHECK(ok && ts_dtype_of(z) == TS_I32);
    for (int d = 0; d < 8; d++) {
        ts_tensor *one = ts_ones(TS_SHAPE(3), (ts_opts){.device = dev, .dtype = all_dtypes[d]});
        CHECK(read_all(one, v, 64) == 3 && v[0] == 1 && v[1] == 1 && v[2] == 1);
        ts_tensor *f =
            ts_full(TS_SHAPE(2, 2), -2.7, (ts_opts){.device = dev, .dtype = all_dtypes[d]});
        CHECK(read_all(f, v, 64) == 4);
        double want = ref_cast(-2.7, TS_F64, all_dtypes[d]);
        CHECK(same_value(v[0], want) && same_value(v[3], want));
        ts_tensor *s = ts_scalar(0.1, (ts_opts){.device = dev, .dtype = all_dtypes[d]});
        CHECK(s && ts_ndim(s) == 0 && ts_numel(s) == 1);
        CHECK(same_value(ts_item(s), ref_cast(0.1, TS_F64, all_dtypes[d])));
    }
    CHECK(ts_dtype_of(ts_scalar(3, o)) == TS_F32);
    /* zero-sized tensors are fine */
    ts_tensor *empty = ts_zeros(TS_SHAPE(0, 3), o);
    CHECK(empty && ts_numel(empty) == 0 && ts_nbytes(empty) == 0 && ts_is_contiguous(empty));
    /* negative sizes and too many dims are shape errors */
    CHECK(ts_zeros(TS_SHAPE(2, -1), o) == NULL);
    CHECK_ERR(TS_ERR_SHAPE);
    CHECK(ts_zeros(TS_SHAPE(1, 1, 1, 1, 1, 1, 1, 1, 1), o) == NULL);
    CHECK_ERR(TS_ERR_SHAPE);
    CHECK_OK();
    ts_scope_end();
}

static void test_arange(ts_device dev) {
    ts_scope_begin();
    ts_opts o = {.device = dev};
    double v[64];
    ts_tensor *a = ts_arange(0, 5, 1, o); /* torch.arange(5): int64 */
    CHECK(a && ts_dtype_of(a) == TS_I64 && ts_numel(a) == 5);
    CHECK(read_all(a, v, 64) == 5 && v[0] == 0 && v[4] == 4);
    ts_tensor *b = ts_arange(10, 0, -3, o);
    CHECK(b && ts_dtype_of(b) == TS_I64 && read_all(b, v, 64) == 4);
    CHECK(v[0] == 10 && v[1] == 7 && v[2] == 4 && v[3] == 1);
    ts_tensor *c = ts_arange(0, 1, 0.1, o); /* 10 elements, float32 */
    CHECK(c && ts_dtype_of(c) == TS_F32 && read_all(c, v, 64) == 10);
    bool ok = true;
    for (int i = 0; i < 10; i++) ok = ok && v[i] == (double)(float)(i * 0.1);
    CHECK(ok);
    CHECK_EQ(ts_numel(ts_arange(0, 0.3, 0.1, o)), 3);
    ts_tensor *d = ts_arange(-3, 3, 0.7, o);
    CHECK(d && read_all(d, v, 64) == 9);
    ok = true;
    for (int i = 0; i < 9; i++) ok = ok && v[i] == (double)(float)(-3 + i * 0.7);
    CHECK(ok);
    ts_tensor *e = ts_arange(1, 2.5, 0.5, o);
    CHECK(e && ts_dtype_of(e) == TS_F32 && read_all(e, v, 64) == 3 && v[2] == 2.0);
    ts_tensor *f = ts_arange(-1, 1, 0.25, (ts_opts){.device = dev, .dtype = TS_F64});
    CHECK(f && ts_dtype_of(f) == TS_F64 && read_all(f, v, 64) == 8 && v[7] == 0.75);
    ts_tensor *g = ts_arange(0, 4, 1, (ts_opts){.device = dev, .dtype = TS_F32});
    CHECK(g && ts_dtype_of(g) == TS_F32 && ts_numel(g) == 4);
    CHECK_EQ(ts_numel(ts_arange(3, 3, 1, o)), 0);
    CHECK(ts_arange(0, 5, 0, o) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_arange(0, 5, -1, o) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK_OK();
    ts_scope_end();
}

static void test_linspace_eye(ts_device dev) {
    ts_scope_begin();
    ts_opts o = {.device = dev};
    double v[64];
    ts_tensor *z = ts_linspace(0, 1, 0, o);
    CHECK(z && shape_is(z, TS_SHAPE(0)) && ts_dtype_of(z) == TS_F32);
    ts_tensor *one = ts_linspace(3, 7, 1, o);
    CHECK(one && read_all(one, v, 64) == 1 && v[0] == 3);
    ts_tensor *five = ts_linspace(-1, 1, 5, o);
    CHECK(five && read_all(five, v, 64) == 5);
    CHECK(v[0] == -1 && v[1] == -0.5 && v[2] == 0 && v[3] == 0.5 && v[4] == 1);
    ts_tensor *seven = ts_linspace(0, 1, 7, (ts_opts){.device = dev, .dtype = TS_F64});
    CHECK(seven && read_all(seven, v, 64) == 7 && v[0] == 0 && v[6] == 1);
    bool ok = true;
    for (int i = 0; i < 7; i++) ok = ok && fabs(v[i] - i / 6.0) < 1e-15;
    CHECK(ok);
    ts_tensor *ints = ts_linspace(0, 10, 4, (ts_opts){.device = dev, .dtype = TS_I64});
    CHECK(ints && read_all(ints, v, 64) == 4); /* torch: [0, 3, 6, 10] */
    CHECK(v[0] == 0 && v[1] == 3 && v[2] == 6 && v[3] == 10);
    CHECK(ts_linspace(0, 1, -1, o) == NULL);
    CHECK_ERR(TS_ERR_ARG);

    const int64_t nm[][2] = {{2, 3}, {3, 2}, {1, 1}, {4, 0}, {0, 0}, {3, 5}};
    for (size_t k = 0; k < sizeof nm / sizeof nm[0]; k++) {
        int64_t n = nm[k][0], m = nm[k][1] > 0 ? nm[k][1] : n;
        ts_tensor *eye = ts_eye(nm[k][0], nm[k][1], (ts_opts){.device = dev, .dtype = TS_F64});
        CHECK(eye && shape_is(eye, TS_SHAPE(n, m)));
        CHECK_EQ(read_all(eye, v, 64), n * m);
        ok = true;
        for (int64_t i = 0; i < n; i++)
            for (int64_t j = 0; j < m; j++) ok = ok && v[i * m + j] == (i == j ? 1 : 0);
        CHECK(ok);
    }
    CHECK(ts_eye(-1, 2, o) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK_OK();
    ts_scope_end();
}

static const double sample_values[] = {0.0,   -0.0,  1.0,   -1.0,     2.5,      -2.5,   -0.7,
                                       3.75,  255.0, 256.0, 300.0,    -300.0,   70000., 1e-8,
                                       65519, 65520, NAN,   INFINITY, -INFINITY};
#define NSAMPLES ((int)(sizeof sample_values / sizeof sample_values[0]))

static void test_from_data(ts_device dev) {
    ts_scope_begin();
    unsigned char host[8 * NSAMPLES], back[8 * NSAMPLES];
    for (int d = 0; d < 8; d++) {
        ts_dtype dt = all_dtypes[d];
        /* source values exact in dt: the samples rounded into it */
        for (int i = 0; i < NSAMPLES; i++)
            encode(host + i * all_sizes[d], dt, ref_cast(sample_values[i], TS_F64, dt));
        ts_tensor *t = ts_from_data(TS_SHAPE(NSAMPLES), dt, host, (ts_opts){.device = dev});
        CHECK(t && ts_dtype_of(t) == dt && ts_device_equal(ts_device_of(t), dev));
        CHECK_EQ(ts_element_size(t), all_sizes[d]);
        CHECK_EQ(ts_nbytes(t), all_sizes[d] * NSAMPLES);
        memset(back, 0xAB, sizeof back);
        CHECK_EQ(ts_copy_to_host(t, back, sizeof back), TS_OK);
        CHECK(memcmp(host, back, all_sizes[d] * NSAMPLES) == 0);
        /* a destination too small is an error, not an overflow */
        CHECK_EQ(ts_copy_to_host(t, back, all_sizes[d] * NSAMPLES - 1), TS_ERR_ARG);
        ts_error_clear();
    }
    const float f32[] = {1.5f, -2.25f, 3, 4, 5, 6};
    const double f64[] = {1e300, -0.1, 2};
    const int64_t i64[] = {INT64_MAX, -5, 7, 0};
    const int32_t i32[] = {INT32_MIN, 9};
    ts_opts o = {.device = dev};
    double v[16];
    ts_tensor *a = ts_tensor_f32(TS_SHAPE(2, 3), f32, o);
    CHECK(a && ts_dtype_of(a) == TS_F32 && shape_is(a, TS_SHAPE(2, 3)));
    CHECK(read_all(a, v, 16) == 6 && v[0] == 1.5 && v[1] == -2.25 && v[5] == 6);
    ts_tensor *b = ts_tensor_f64(TS_SHAPE(3), f64, o);
    CHECK(b && ts_dtype_of(b) == TS_F64 && read_all(b, v, 16) == 3 && v[0] == 1e300 &&
          v[1] == -0.1);
    ts_tensor *c = ts_tensor_i64(TS_SHAPE(2, 2), i64, o);
    int64_t i64back[4] = {0};
    CHECK(c && ts_dtype_of(c) == TS_I64);
    CHECK(ts_copy_to_host(c, i64back, sizeof i64back) == TS_OK && i64back[0] == INT64_MAX);
    ts_tensor *d = ts_tensor_i32(TS_SHAPE(2), i32, o);
    CHECK(d && ts_dtype_of(d) == TS_I32 && read_all(d, v, 16) == 2 && v[0] == INT32_MIN);
    /* opts.dtype converts on the way in */
    ts_tensor *e = ts_tensor_f32(TS_SHAPE(6), f32, (ts_opts){.device = dev, .dtype = TS_I32});
    CHECK(e && ts_dtype_of(e) == TS_I32 && read_all(e, v, 16) == 6 && v[0] == 1 && v[1] == -2);
    /* a 0-dim tensor from data */
    ts_tensor *s = ts_tensor_f64(TS_SHAPE(), f64 + 1, o);
    CHECK(s && ts_ndim(s) == 0 && ts_item(s) == -0.1);
    CHECK(ts_tensor_f32(TS_SHAPE(2), NULL, o) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK_OK();
    ts_scope_end();
}

static void test_like(ts_device dev) {
    ts_scope_begin();
    double v[32];
    ts_tensor *base = ts_zeros(TS_SHAPE(2, 4), (ts_opts){.device = dev, .dtype = TS_I32});
    ts_tensor *tr = ts_transpose(base, 0, 1); /* *_like of a strided tensor is contiguous */
    ts_tensor *likes[6] = {
        ts_empty_like(tr), ts_zeros_like(tr), ts_ones_like(tr), ts_full_like(tr, 7.9), NULL, NULL};
    ts_tensor *fbase = ts_zeros(TS_SHAPE(3, 2), (ts_opts){.device = dev, .dtype = TS_F64});
    likes[4] = ts_rand_like(fbase);
    likes[5] = ts_randn_like(fbase);
    for (int i = 0; i < 6; i++) {
        ts_tensor *ref = i < 4 ? tr : fbase;
        CHECK(likes[i] && shape_is(likes[i], ts_shape_of(ref)));
        CHECK(ts_dtype_of(likes[i]) == ts_dtype_of(ref));
        CHECK(ts_device_equal(ts_device_of(likes[i]), dev));
        CHECK(!ts_shares_storage(likes[i], ref));
    }
    CHECK(read_all(likes[1], v, 32) == 8 && v[0] == 0 && v[7] == 0);
    CHECK(read_all(likes[2], v, 32) == 8 && v[0] == 1 && v[7] == 1);
    CHECK(read_all(likes[3], v, 32) == 8 && v[0] == 7 && v[7] == 7);
    CHECK(read_all(likes[4], v, 32) == 6);
    bool ok = true;
    for (int i = 0; i < 6; i++) ok = ok && v[i] >= 0 && v[i] < 1;
    CHECK(ok);
    CHECK(ts_zeros_like(NULL) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK_OK();
    ts_scope_end();
}

/* ------------------------------------------------------------------ queries, item */
static void test_queries(ts_device dev) {
    ts_scope_begin();
    for (int d = 0; d < 8; d++) {
        ts_tensor *t =
            ts_zeros(TS_SHAPE(2, 3, 4), (ts_opts){.device = dev, .dtype = all_dtypes[d]});
        CHECK_EQ(ts_element_size(t), all_sizes[d]);
        CHECK_EQ(ts_dtype_size(all_dtypes[d]), all_sizes[d]);
        CHECK_EQ(ts_numel(t), 24);
        CHECK_EQ(ts_nbytes(t), 24 * all_sizes[d]);
        CHECK(ts_is_contiguous(t));
        CHECK_EQ(ts_ndim(t), 3);
        CHECK_EQ(ts_size(t, -1), 4);
        CHECK_EQ(ts_stride(t, 0), 12);
        CHECK_EQ(ts_storage_offset(t), 0);
        ts_tensor *p = ts_permute(t, TS_DIMS(2, 0, 1));
        CHECK(!ts_is_contiguous(p) && ts_numel(p) == 24 && ts_nbytes(p) == 24 * all_sizes[d]);
        /* size-1 dims do not break contiguity, whatever their stride */
        CHECK(!ts_is_contiguous(ts_select(t, 1, 1)));
        CHECK(ts_is_contiguous(ts_select(t, 0, 1)));
        CHECK(ts_is_contiguous(ts_unsqueeze(ts_select(t, 0, 1), 0)));
        CHECK(ts_is_contiguous(ts_narrow(t, 0, 1, 1)) && !ts_is_contiguous(ts_narrow(t, 2, 1, 1)));
        /* item of one element of every dtype, with f16/bf16 rounding */
        const double vals[] = {0.1, -1.0 / 3, 1000.7, 3.0};
        for (int k = 0; k < 4; k++) {
            ts_tensor *s =
                ts_full(TS_SHAPE(1, 1), vals[k], (ts_opts){.device = dev, .dtype = all_dtypes[d]});
            double got = ts_item(s), want = ref_cast(vals[k], TS_F64, all_dtypes[d]);
            CHECK(same_value(got, want));
            if (!same_value(got, want))
                fprintf(stderr, "  item %s of %.17g: %.17g vs %.17g\n",
                        ts_dtype_name(all_dtypes[d]), vals[k], got, want);
        }
        /* item of a strided element of a view */
        ts_tensor *r = ts_arange(0, 24, 1, (ts_opts){.device = dev, .dtype = all_dtypes[d]});
        ts_tensor *p3 = ts_permute(ts_view(r, TS_SHAPE(2, 3, 4)), TS_DIMS(2, 1, 0));
        ts_tensor *el = ts_select(ts_select(ts_select(p3, 0, 3), 0, 1), 0, 1);
        CHECK(el && ts_ndim(el) == 0);
        if (all_dtypes[d] != TS_BOOL) CHECK_EQ(ts_item(el), 1 * 12 + 1 * 4 + 3);
        CHECK(isnan(ts_item(t)));
        CHECK_ERR(TS_ERR_SHAPE);
    }
    CHECK(ts_numel(NULL) == -1);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_size(ts_zeros(TS_SHAPE(2), (ts_opts){.device = dev}), 1) == -1);
    CHECK_ERR(TS_ERR_ARG);
    CHECK_OK();
    ts_scope_end();
}

/* ------------------------------------------------------------------ dtype conversions */
static void test_conversions(ts_device dev) {
    ts_scope_begin();
    unsigned char host[8 * NSAMPLES], out[8 * NSAMPLES];
    int bad = 0;
    for (int s = 0; s < 8; s++) {
        ts_dtype sd = all_dtypes[s];
        double src_vals[NSAMPLES];
        for (int i = 0; i < NSAMPLES; i++) {
            src_vals[i] = ref_cast(sample_values[i], TS_F64, sd);
            encode(host + i * all_sizes[s], sd, src_vals[i]);
        }
        ts_tensor *src = ts_from_data(TS_SHAPE(NSAMPLES), sd, host, (ts_opts){.device = dev});
        for (int d = 0; d < 8; d++) {
            ts_dtype dd = all_dtypes[d];
            ts_tensor *c = ts_to_dtype(src, dd);
            bool ok = c && ts_dtype_of(c) == dd && ts_numel(c) == NSAMPLES &&
                      ts_device_equal(ts_device_of(c), dev) &&
                      ts_copy_to_host(c, out, sizeof out) == TS_OK;
            CHECK(ok);
            if (!ok) continue;
            CHECK(sd != dd || c == src); /* same dtype: the tensor itself */
            for (int i = 0; i < NSAMPLES; i++) {
                double got = decode(out + i * all_sizes[d], dd),
                       want = ref_cast(src_vals[i], sd, dd);
                bool same = same_value(got, want) && (got != 0 || signbit(got) == signbit(want) ||
                                                      !ts_dtype_is_floating(dd));
                ts_test_record(same);
                if (!same && bad++ < 20)
                    ts_test_failf(__FILE__, __LINE__, "%s -> %s of %.17g: got %.17g want %.17g",
                                  ts_dtype_name(sd), ts_dtype_name(dd), src_vals[i], got, want);
            }
        }
        /* a strided (transposed) source converts element by element in its logical order */
        ts_tensor *m = ts_view(ts_narrow(src, 0, 0, 18), TS_SHAPE(3, 6));
        ts_tensor *mt = ts_to_dtype(ts_t(m), sd == TS_F64 ? TS_F32 : TS_F64);
        double v[32];
        CHECK(read_all(mt, v, 32) == 18);
        bool ok = true;
        for (int i = 0; i < 6; i++)
            for (int j = 0; j < 3; j++)
                ok = ok &&
                     same_value(v[i * 3 + j], ref_cast(src_vals[j * 6 + i], sd, ts_dtype_of(mt)));
        CHECK(ok);
    }
    CHECK(ts_to_dtype(NULL, TS_F32) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK_OK();
    ts_scope_end();
}

/* ------------------------------------------------------------------ flags, fill_ */
static void test_requires_grad_and_fill(ts_device dev) {
    ts_scope_begin();
    ts_tensor *w = ts_zeros(TS_SHAPE(3), (ts_opts){.device = dev, .requires_grad = true});
    CHECK(w && ts_requires_grad(w) && ts_is_leaf(w) && ts_grad(w) == NULL);
    CHECK(ts_fill_(w, 1) == NULL); /* in place on a leaf that requires grad */
    CHECK_ERR(TS_ERR_STATE);
    ts_set_requires_grad(w, false);
    CHECK_OK();
    CHECK(!ts_requires_grad(w) && ts_fill_(w, 1) == w);
    CHECK(ts_zeros(TS_SHAPE(3), (ts_opts){.device = dev, .dtype = TS_I64, .requires_grad = true}) ==
          NULL);
    CHECK_ERR(TS_ERR_DTYPE);
    const float f[] = {1, 2};
    const int64_t i[] = {1, 2};
    ts_tensor *tf = ts_tensor_f32(TS_SHAPE(2), f, (ts_opts){.device = dev, .requires_grad = true});
    CHECK(tf && ts_requires_grad(tf));
    CHECK(ts_tensor_i64(TS_SHAPE(2), i, (ts_opts){.device = dev, .requires_grad = true}) == NULL);
    CHECK_ERR(TS_ERR_DTYPE);
    ts_tensor *ti = ts_tensor_i64(TS_SHAPE(2), i, (ts_opts){.device = dev});
    ts_set_requires_grad(ti, true);
    CHECK_ERR(TS_ERR_DTYPE);
    CHECK(!ts_requires_grad(ti));
    for (int d = 0; d < 4; d++) {
        ts_tensor *x = ts_ones(TS_SHAPE(2), (ts_opts){.device = dev, .dtype = all_dtypes[d]});
        ts_set_requires_grad(x, true);
        CHECK_OK();
        CHECK(ts_requires_grad(x));
    }
    /* fill_ casts like torch: int32 fill_(2.7) -> 2, bool fill_(0.5) -> True, through views */
    double v[16];
    ts_tensor *a = ts_zeros(TS_SHAPE(3, 4), (ts_opts){.device = dev, .dtype = TS_I32});
    uint64_t ver = ts_version(a);
    CHECK(ts_fill_(a, 2.7) == a && ts_version(a) > ver);
    CHECK(read_all(a, v, 16) == 12 && v[0] == 2 && v[11] == 2);
    ts_tensor *col = ts_select(a, 1, 2); /* strided column */
    CHECK(ts_fill_(col, -5) == col);
    CHECK(read_all(a, v, 16) == 12);
    bool ok = true;
    for (int k = 0; k < 12; k++) ok = ok && v[k] == (k % 4 == 2 ? -5 : 2);
    CHECK(ok);
    CHECK(ts_zero_(ts_t(a)) != NULL && read_all(a, v, 16) == 12 && v[2] == 0 && v[5] == 0);
    ts_tensor *b = ts_zeros(TS_SHAPE(2), (ts_opts){.device = dev, .dtype = TS_BOOL});
    CHECK(ts_fill_(b, 0.5) && read_all(b, v, 16) == 2 && v[0] == 1 && v[1] == 1);
    ts_tensor *h = ts_zeros(TS_SHAPE(2), (ts_opts){.device = dev, .dtype = TS_F16});
    CHECK(ts_fill_(h, 0.1) && ts_item(ts_select(h, 0, 1)) == ref_f16(0.1));
    ts_tensor *neg = ts_full(TS_SHAPE(2), 5, (ts_opts){.device = dev});
    CHECK(ts_fill_(neg, -0.0) && read_all(neg, v, 16) == 2 && v[1] == 0 && signbit(v[1]));
    CHECK(ts_fill_(NULL, 1) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK_OK();
    ts_scope_end();
}

static int64_t live(void) {
    ts_mem_stats m;
    ts_memory_stats(ts_cpu(), &m);
    return m.live_tensors;
}

/* ts_scope_suspend / resume: in between, results belong to the caller (released by hand, no
 * double free when the suspended scope ends), scopes nest from zero and leave the outer ones
 * alone; a scope left open is closed by resume with an error; depth is restored. */
static void test_scope_suspend(void) {
    const int64_t before = live();
    ts_scope_begin();
    ts_tensor *kept = ts_ones(TS_SHAPE(2), (ts_opts){0}); /* the outer scope's */
    ts_scope_begin();
    CHECK_EQ(ts_scope_depth(), 2);
    ts_scope_suspension s = ts_scope_suspend();
    CHECK_EQ(ts_scope_depth(), 0);
    ts_tensor *mine = ts_add(kept, kept); /* the caller's */
    ts_scope_begin();
    CHECK_EQ(ts_scope_depth(), 1);
    ts_tensor *inner = ts_mul(mine, mine);
    CHECK_EQ(ts_item(ts_sum(inner)), 8.0);
    ts_tensor *out = ts_keep(ts_neg(inner)); /* kept past the inner scope: to the caller */
    ts_scope_end();
    CHECK_EQ(ts_scope_depth(), 0);
    ts_tensor *total = ts_sum(out); /* outside any scope: ours to release */
    CHECK_EQ(ts_item(total), -8.0);
    ts_release(total);
    ts_scope_end(); /* no scope of its own open: an error, the hidden ones untouched */
    CHECK_EQ(ts_error(), TS_ERR_STATE);
    ts_error_clear();
    ts_release(out);
    ts_release(mine);
    ts_scope_resume(s);
    CHECK_EQ(ts_scope_depth(), 2);
    CHECK_OK();
    ts_tensor *late = ts_add(kept, kept); /* the inner scope's again */
    CHECK(late != NULL);
    ts_scope_end();
    CHECK_EQ(ts_scope_depth(), 1);
    CHECK_EQ(ts_item(ts_sum(kept)), 2.0); /* still alive: its scope is open */
    /* resume closes what was left open, naming it */
    s = ts_scope_suspend();
    ts_scope_begin();
    (void)ts_zeros(TS_SHAPE(3), (ts_opts){0});
    ts_scope_resume(s);
    CHECK_EQ(ts_error(), TS_ERR_STATE);
    CHECK(strstr(ts_error_message(), "scope_resume") != NULL);
    ts_error_clear();
    CHECK_EQ(ts_scope_depth(), 1);
    ts_scope_end();
    CHECK_EQ(ts_scope_depth(), 0);
    CHECK_EQ(live(), before); /* every tensor released exactly once */
}

int main(void) {
    if (ts_device_count(TS_SIM) < 4) ts_sim_configure(4, 0);
    /* the library's version at run time is the header's */
    char version[32];
    snprintf(version, sizeof version, "%d.%d.%d", TS_VERSION_MAJOR, TS_VERSION_MINOR,
             TS_VERSION_PATCH);
    CHECK_STREQ(ts_library_version(), version);
    test_scope_suspend();
    /* self-check of the reference rounding against values torch 1.13 printed */
    CHECK(ref_f16(0.1) == 0.0999755859375 && ref_bf16(0.1) == 0.10009765625);
    CHECK(ref_f16(70000) == INFINITY && ref_bf16(70000) == 70144 && ref_f16(65519) == 65504);
    CHECK(ref_bf16(65519) == 65536 && ref_f16(1e-8) == 0 && ref_bf16(-0.7) == -0.69921875);
    CHECK(ref_cast(-300, TS_F64, TS_U8) == 212 && ref_cast(NAN, TS_F32, TS_I32) == INT32_MIN);
    const ts_device devs[2] = {ts_cpu(), ts_sim(0)};
    for (int i = 0; i < 2; i++) {
        ts_mem_stats before, after;
        ts_memory_stats(devs[i], &before);
        test_basic_factories(devs[i]);
        test_arange(devs[i]);
        test_linspace_eye(devs[i]);
        test_from_data(devs[i]);
        test_like(devs[i]);
        test_queries(devs[i]);
        test_conversions(devs[i]);
        test_requires_grad_and_fill(devs[i]);
        ts_memory_stats(devs[i], &after);
        CHECK_EQ(after.live_tensors, before.live_tensors); /* scopes released everything */
        CHECK_EQ(after.allocated, before.allocated);
    }
    CHECK_EQ(ts_scope_depth(), 0);
    return ts_test_finish();
}
