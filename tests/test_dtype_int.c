/* test_dtype_int.c — int8, int16, uint16, uint32 and uint64: PyTorch's promotion table, casts at
 * the edges, arithmetic, comparisons, reductions, views and refusals, on every test device. The
 * expected values were taken from torch 2.x (torch.promote_types, Tensor.to, the ops). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ts_test.h"

/* ------------------------------------------------------------------ helpers */
static ts_tensor *raw(ts_device d, ts_dtype dt, int64_t n, const void *p) {
    return ts_from_data(TS_SHAPE(n), dt, p, (ts_opts){.device = d});
}

/* element i of t (any integer or bool dtype) as int64; uint64 as its bits */
static int64_t geti(ts_tensor *t, int64_t i) {
    unsigned char buf[8 * 64];
    int64_t n = ts_numel(t);
    if (!t || n > 64 || i >= n) return -999999;
    ts_scope_begin();
    ts_status st = ts_copy_to_host(ts_to(t, ts_cpu()), buf, sizeof buf);
    ts_scope_end();
    if (st != TS_OK) return -999998;
    switch (ts_dtype_of(t)) {
    case TS_I8:
        return ((int8_t *)buf)[i];
    case TS_I16:
        return ((int16_t *)buf)[i];
    case TS_U16:
        return ((uint16_t *)buf)[i];
    case TS_U32:
        return ((uint32_t *)buf)[i];
    case TS_U64:
        return (int64_t)((uint64_t *)buf)[i];
    case TS_I32:
        return ((int32_t *)buf)[i];
    case TS_I64:
        return ((int64_t *)buf)[i];
    case TS_U8:
    case TS_BOOL:
        return buf[i];
    case TS_F32:
        return (int64_t)((float *)buf)[i];
    case TS_F64:
        return (int64_t)((double *)buf)[i];
    default:
        return -999997;
    }
}

static double getd(ts_tensor *t, int64_t i) {
    double buf[64] = {0};
    if (!t || ts_numel(t) > 64) return NAN;
    ts_scope_begin();
    ts_copy_to_host(ts_to(ts_to_dtype(t, TS_F64), ts_cpu()), buf, sizeof buf);
    ts_scope_end();
    return buf[i];
}

#define CHECK_VALS(t, dt, ...)                                                                     \
    do {                                                                                           \
        const int64_t want_[] = {__VA_ARGS__};                                                     \
        ts_tensor *t_ = (t);                                                                       \
        CHECK(t_ != NULL);                                                                         \
        CHECK_OK();                                                                                \
        if (t_) {                                                                                  \
            CHECK_EQ(ts_dtype_of(t_), dt);                                                         \
            CHECK_EQ(ts_numel(t_), (int64_t)(sizeof want_ / sizeof want_[0]));                     \
            for (size_t k_ = 0; k_ < sizeof want_ / sizeof want_[0]; k_++)                         \
                CHECK_EQ(geti(t_, (int64_t)k_), want_[k_]);                                        \
        }                                                                                          \
    } while (0)

/* ------------------------------------------------------------------ names, sizes, promotion */
static const ts_dtype all_dt[] = {TS_F32, TS_F64, TS_F16, TS_BF16, TS_I64, TS_I32, TS_U8,  TS_BOOL,
                                  TS_I8,  TS_I16, TS_U16, TS_U32,  TS_U64, TS_C64, TS_C128};
#define NDT 15
/* torch.promote_types(row, column) in all_dt's order; X = RuntimeError (no rule) */
enum { X = TS_DTYPE_COUNT };
#define f32  TS_F32
#define f64  TS_F64
#define f16  TS_F16
#define bf16 TS_BF16
#define i64  TS_I64
#define i32  TS_I32
#define u8   TS_U8
#define b8   TS_BOOL
#define i8   TS_I8
#define i16  TS_I16
#define u16  TS_U16
#define u32  TS_U32
#define u64  TS_U64
#define c64  TS_C64
#define c128 TS_C128
static const int torch_promote[NDT][NDT] = {
    {f32, f64, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, c64, c128},
    {f64, f64, f64, f64, f64, f64, f64, f64, f64, f64, f64, f64, f64, c128, c128},
    {f32, f64, f16, f32, f16, f16, f16, f16, f16, f16, f16, f16, f16, c64, c128},
    {f32, f64, f32, bf16, bf16, bf16, bf16, bf16, bf16, bf16, bf16, bf16, bf16, c64, c128},
    {f32, f64, f16, bf16, i64, i64, i64, i64, i64, i64, X, X, X, c64, c128},
    {f32, f64, f16, bf16, i64, i32, i32, i32, i32, i32, X, X, X, c64, c128},
    {f32, f64, f16, bf16, i64, i32, u8, u8, i16, i16, X, X, X, c64, c128},
    {f32, f64, f16, bf16, i64, i32, u8, b8, i8, i16, X, X, X, c64, c128},
    {f32, f64, f16, bf16, i64, i32, i16, i8, i8, i16, X, X, X, c64, c128},
    {f32, f64, f16, bf16, i64, i32, i16, i16, i16, i16, X, X, X, c64, c128},
    {f32, f64, f16, bf16, X, X, X, X, X, X, u16, X, X, X, X},
    {f32, f64, f16, bf16, X, X, X, X, X, X, X, u32, X, X, X},
    {f32, f64, f16, bf16, X, X, X, X, X, X, X, X, u64, X, X},
    {c64, c128, c64, c64, c64, c64, c64, c64, c64, c64, X, X, X, c64, c128},
    {c128, c128, c128, c128, c128, c128, c128, c128, c128, c128, X, X, X, c128, c128},
};
#undef f32
#undef f64
#undef f16
#undef bf16
#undef i64
#undef i32
#undef u8
#undef b8
#undef i8
#undef i16
#undef u16
#undef u32
#undef u64
#undef c64
#undef c128

static void test_table(void) {
    CHECK_STREQ(ts_dtype_name(TS_I8), "int8");
    CHECK_STREQ(ts_dtype_name(TS_I16), "int16");
    CHECK_STREQ(ts_dtype_name(TS_U16), "uint16");
    CHECK_STREQ(ts_dtype_name(TS_U32), "uint32");
    CHECK_STREQ(ts_dtype_name(TS_U64), "uint64");
    CHECK_STREQ(ts_dtype_name(TS_C64), "complex64");
    CHECK_STREQ(ts_dtype_name(TS_C128), "complex128");
    CHECK(ts_dtype_size(TS_C64) == 8 && ts_dtype_size(TS_C128) == 16);
    CHECK_EQ(ts_dtype_size(TS_I8), 1);
    CHECK_EQ(ts_dtype_size(TS_I16), 2);
    CHECK_EQ(ts_dtype_size(TS_U16), 2);
    CHECK_EQ(ts_dtype_size(TS_U32), 4);
    CHECK_EQ(ts_dtype_size(TS_U64), 8);
    CHECK(!ts_dtype_is_floating(TS_I8) && !ts_dtype_is_floating(TS_U64));
    /* the old values keep their numbers */
    CHECK_EQ(TS_BOOL, 8);
    CHECK_EQ(TS_I8, 9);
    int bad = 0;
    for (int i = 0; i < NDT; i++)
        for (int j = 0; j < NDT; j++)
            if ((int)ts_promote_types(all_dt[i], all_dt[j]) != torch_promote[i][j]) {
                bad++;
                fprintf(stderr, "promote(%s, %s) = %d, torch %d\n", ts_dtype_name(all_dt[i]),
                        ts_dtype_name(all_dt[j]), (int)ts_promote_types(all_dt[i], all_dt[j]),
                        torch_promote[i][j]);
            }
    CHECK_EQ(bad, 0);
}

/* ------------------------------------------------------------------ per device */
static void test_casts(ts_device d) {
    ts_scope_begin();
    const double f[] = {300.7, -129.5, -1.9, 65535.9, 70000.0, -5.0, 0.0};
    ts_tensor *x = raw(d, TS_F64, 7, f);
    /* torch 2.x on x86: int8/int16/uint16 through int32, uint32/uint64 through int64 */
    CHECK_VALS(ts_to_dtype(x, TS_I8), TS_I8, 44, 127, -1, -1, 112, -5, 0);
    CHECK_VALS(ts_to_dtype(x, TS_I16), TS_I16, 300, -129, -1, -1, 4464, -5, 0);
    CHECK_VALS(ts_to_dtype(x, TS_U16), TS_U16, 300, 65407, 65535, 65535, 4464, 65531, 0);
    CHECK_VALS(ts_to_dtype(x, TS_U32), TS_U32, 300, 4294967167LL, 4294967295LL, 65535, 70000,
               4294967291LL, 0);
    CHECK_VALS(ts_to_dtype(x, TS_U64), TS_U64, 300, -129, -1, 65535, 70000, -5, 0);
    CHECK_VALS(ts_to_dtype(ts_to_dtype(x, TS_F32), TS_I8), TS_I8, 44, 127, -1, -1, 112, -5, 0);
    /* integer narrowing wraps */
    const int64_t w[] = {-1, 200, 70000, -70000, 1099511627779LL};
    ts_tensor *y = raw(d, TS_I64, 5, w);
    CHECK_VALS(ts_to_dtype(y, TS_I8), TS_I8, -1, -56, 112, -112, 3);
    CHECK_VALS(ts_to_dtype(y, TS_I16), TS_I16, -1, 200, 4464, -4464, 3);
    CHECK_VALS(ts_to_dtype(y, TS_U16), TS_U16, 65535, 200, 4464, 61072, 3);
    CHECK_VALS(ts_to_dtype(y, TS_U32), TS_U32, 4294967295LL, 200, 70000, 4294897296LL, 3);
    CHECK_VALS(ts_to_dtype(y, TS_BOOL), TS_BOOL, 1, 1, 1, 1, 1);
    /* uint64 past int64: to float the unsigned value, to integers the bits */
    const uint64_t u[] = {UINT64_MAX, 1ULL << 63, 5};
    ts_tensor *z = raw(d, TS_U64, 3, u);
    CHECK_NEAR(getd(z, 0), 18446744073709551616.0, 0);
    CHECK_NEAR(getd(z, 1), 9223372036854775808.0, 0);
    ts_tensor *zf = ts_to_dtype(z, TS_F32);
    CHECK(zf && ts_item(ts_select(zf, 0, 0)) == 18446744073709551616.0);
    CHECK_VALS(ts_to_dtype(z, TS_I64), TS_I64, -1, INT64_MIN, 5);
    CHECK_VALS(ts_to_dtype(z, TS_I8), TS_I8, -1, 0, 5);
    CHECK_VALS(ts_to_dtype(z, TS_U32), TS_U32, 4294967295LL, 0, 5);
    /* every new dtype round-trips through each other dtype for small values */
    const int8_t s[] = {-3, 0, 7};
    ts_tensor *q = raw(d, TS_I8, 3, s);
    const ts_dtype via[] = {TS_F32, TS_F64, TS_F16, TS_BF16, TS_I64, TS_I32, TS_I16};
    for (size_t k = 0; k < sizeof via / sizeof via[0]; k++)
        CHECK_VALS(ts_to_dtype(ts_to_dtype(q, via[k]), TS_I8), TS_I8, -3, 0, 7);
    /* item */
    const uint32_t big = 4294967295u;
    CHECK(ts_item(raw(d, TS_U32, 1, &big)) == 4294967295.0);
    CHECK(ts_item(raw(d, TS_I8, 1, s)) == -3.0);
    ts_scope_end();
}

static void test_arith(ts_device d) {
    ts_scope_begin();
    const int8_t a8[] = {100, -7, 7, -7, 7, -128};
    const int8_t b8[] = {100, 2, -2, -2, 2, -1};
    ts_tensor *a = raw(d, TS_I8, 6, a8), *b = raw(d, TS_I8, 6, b8);
    CHECK_VALS(ts_add(a, b), TS_I8, -56, -5, 5, -9, 9, 127);
    CHECK_VALS(ts_sub(a, b), TS_I8, 0, -9, 9, -5, 5, -127);
    CHECK_VALS(ts_mul(a, b), TS_I8, 16, -14, -14, 14, 14, -128);
    /* fmod: the dividend's sign (torch.fmod) */
    CHECK_VALS(ts_fmod(a, b), TS_I8, 0, -1, 1, -1, 1, 0);
    /* floor_divide and remainder: Python's signs (torch.floor_divide, torch.remainder) */
    CHECK_VALS(ts_floor_divide(a, b), TS_I8, 1, -4, -4, 3, 3, -128);
    CHECK_VALS(ts_remainder(a, b), TS_I8, 0, 1, -1, -1, 1, 0);
    const double fa[] = {-7.5, 7.5, -0.5}, fb[] = {2, -2, 4};
    ts_tensor *xa = raw(d, TS_F64, 3, fa), *xb = raw(d, TS_F64, 3, fb);
    CHECK_NEAR(getd(ts_floor_divide(xa, xb), 0), -4, 0);
    CHECK_NEAR(getd(ts_floor_divide(xa, xb), 1), -4, 0);
    CHECK_NEAR(getd(ts_remainder(xa, xb), 0), 0.5, 0);
    CHECK_NEAR(getd(ts_remainder(xa, xb), 1), -0.5, 0);
    CHECK_NEAR(getd(ts_remainder(xa, xb), 2), 3.5, 0);
    /* true division is float32 */
    ts_tensor *q = ts_div(a, b);
    CHECK(q && ts_dtype_of(q) == TS_F32);
    CHECK_NEAR(getd(q, 1), -3.5, 0);
    CHECK_VALS(ts_maximum(a, b), TS_I8, 100, 2, 7, -2, 7, -1);
    CHECK_VALS(ts_minimum(a, b), TS_I8, 100, -7, -2, -7, 2, -128);
    CHECK_VALS(ts_neg(a), TS_I8, -100, 7, -7, 7, -7, -128);
    CHECK_VALS(ts_abs(a), TS_I8, 100, 7, 7, 7, 7, -128);
    CHECK_VALS(ts_clamp(a, -10, 10), TS_I8, 10, -7, 7, -7, 7, -10);
    CHECK_VALS(ts_lt(a, b), TS_BOOL, 0, 1, 0, 1, 0, 1);
    CHECK_VALS(ts_eq_scalar(a, 7), TS_BOOL, 0, 0, 1, 0, 1, 0);
    CHECK_VALS(ts_add_scalar(a, 1000), TS_I8, 76, -31, -17, -31, -17, 104);
    /* int8 with uint8 is int16 */
    const uint8_t u8v[] = {200, 1, 2, 3, 4, 255};
    ts_tensor *u = raw(d, TS_U8, 6, u8v);
    CHECK_VALS(ts_add(a, u), TS_I16, 300, -6, 9, -4, 11, 127);
    ts_tensor *cat2[2] = {a, u};
    ts_tensor *c = ts_cat(cat2, 2, 0);
    CHECK(c && ts_dtype_of(c) == TS_I16 && ts_numel(c) == 12);
    CHECK_EQ(geti(c, 6), 200);

    /* int16 and the unsigned types */
    const int16_t h[] = {32767, -32768, 5};
    ts_tensor *t16 = raw(d, TS_I16, 3, h);
    CHECK_VALS(ts_add_scalar(t16, 1), TS_I16, -32768, -32767, 6);
    const uint16_t w16[] = {65535, 0, 9};
    ts_tensor *tu16 = raw(d, TS_U16, 3, w16);
    CHECK_VALS(ts_add_scalar(tu16, 1), TS_U16, 0, 1, 10);
    CHECK_VALS(ts_neg(tu16), TS_U16, 1, 0, 65527);
    CHECK_VALS(ts_fmod_scalar(tu16, 4), TS_U16, 3, 0, 1);
    const uint32_t w32[] = {4294967295u, 7, 3};
    ts_tensor *tu32 = raw(d, TS_U32, 3, w32);
    CHECK_VALS(ts_mul_scalar(tu32, 2), TS_U32, 4294967294LL, 14, 6);
    CHECK_VALS(ts_gt_scalar(tu32, 5), TS_BOOL, 1, 1, 0);
    /* uint64: unsigned order, quotient and remainder past 2^63 */
    const uint64_t w64[] = {UINT64_MAX, 1ULL << 63, 10};
    const uint64_t v64[] = {2, 3, 3};
    ts_tensor *x = raw(d, TS_U64, 3, w64), *y = raw(d, TS_U64, 3, v64);
    ts_device dd = ts_device_of(x);
    if (dd.type != TS_CUDA) { /* the CUDA kernels order uint64 as int64 (docs/ARCHITECTURE.md) */
        CHECK_VALS(ts_gt(x, y), TS_BOOL, 1, 1, 1);
        CHECK_VALS(ts_fmod(x, y), TS_U64, 1, 2, 1);
        CHECK_VALS(ts_floor_divide(x, y), TS_U64, INT64_MAX, 3074457345618258602LL, 3);
        CHECK_VALS(ts_maximum(x, y), TS_U64, -1, INT64_MIN, 10);
        CHECK_VALS(ts_clamp(x, 0, 100), TS_U64, 100, 100, 10);
    }
    CHECK_VALS(ts_add(x, y), TS_U64, 1, INT64_MIN + 3, 13);
    CHECK_VALS(ts_mul(x, y), TS_U64, -2, INT64_MIN, 30);
    /* a float operand promotes; true division is float32 for every integer type */
    ts_tensor *fy = ts_mul_scalar(tu16, 0.5);
    CHECK(fy && ts_dtype_of(fy) == TS_F32);
    CHECK_NEAR(getd(fy, 0), 32767.5, 0);
    ts_scope_end();
}

static void test_reduce_views(ts_device d) {
    ts_scope_begin();
    const int8_t a8[] = {100, 100, -7, 3, 127, -128};
    ts_tensor *a = ts_reshape(raw(d, TS_I8, 6, a8), TS_SHAPE(2, 3));
    ts_tensor *s = ts_sum(a);
    CHECK(s && ts_dtype_of(s) == TS_I64 && ts_item(s) == 195);
    CHECK_VALS(ts_reshape(ts_sum_dim(a, 1, false), TS_SHAPE(-1)), TS_I64, 193, 2);
    CHECK_VALS(ts_reshape(ts_amax_dim(a, 0, false), TS_SHAPE(-1)), TS_I8, 100, 127, -7);
    CHECK_VALS(ts_reshape(ts_amin_dim(a, 0, false), TS_SHAPE(-1)), TS_I8, 3, 100, -128);
    CHECK(ts_item(ts_argmax(a)) == 4);
    CHECK(ts_item(ts_argmin(a)) == 5);
    /* views and copies */
    CHECK_VALS(ts_reshape(ts_contiguous(ts_transpose(a, 0, 1)), TS_SHAPE(-1)), TS_I8, 100, 3, 100,
               127, -7, -128);
    const uint32_t w32[] = {1, 4000000000u, 3};
    ts_tensor *u = raw(d, TS_U32, 3, w32);
    CHECK(ts_item(ts_argmax(u)) == 1);
    CHECK(ts_item(ts_sum(u)) == 4000000004.0);
    ts_tensor *cond = ts_gt_scalar(u, 2);
    CHECK_VALS(ts_where(cond, u, ts_zeros_like(u)), TS_U32, 0, 4000000000LL, 3);
    const int64_t ix[] = {2, 0};
    ts_tensor *idx = raw(d, TS_I64, 2, ix);
    CHECK_VALS(ts_index_select(u, 0, idx), TS_U32, 3, 1);
    /* factories */
    CHECK_VALS(ts_full(TS_SHAPE(2), -1, (ts_opts){.dtype = TS_I16, .device = d}), TS_I16, -1, -1);
    CHECK_VALS(ts_full(TS_SHAPE(2), 4e9, (ts_opts){.dtype = TS_U32, .device = d}), TS_U32,
               4000000000LL, 4000000000LL);
    CHECK_VALS(ts_ones(TS_SHAPE(2), (ts_opts){.dtype = TS_U64, .device = d}), TS_U64, 1, 1);
    CHECK_VALS(ts_zeros(TS_SHAPE(1), (ts_opts){.dtype = TS_I8, .device = d}), TS_I8, 0);
    ts_scope_end();
}

static void test_refusals(ts_device d) {
    ts_scope_begin();
    const uint16_t w16[] = {1, 2};
    const int32_t i32v[] = {1, 2};
    ts_tensor *u = raw(d, TS_U16, 2, w16), *i = raw(d, TS_I32, 2, i32v);
    CHECK(ts_add(u, i) == NULL);
    CHECK_ERR_HAS(TS_ERR_DTYPE, "add: Promotion for uint16, uint32, uint64 types is not "
                                "supported, attempted to promote UInt16 and Int");
    ts_tensor *pair[2] = {i, u};
    CHECK(ts_cat(pair, 2, 0) == NULL);
    CHECK_ERR_HAS(TS_ERR_DTYPE, "cat: Promotion for uint16, uint32, uint64 types is not "
                                "supported, attempted to promote Int and UInt16");
    ts_tensor *u64t = ts_ones(TS_SHAPE(2), (ts_opts){.dtype = TS_U64, .device = d});
    CHECK(ts_where(ts_gt_scalar(u, 1), u64t, u) == NULL);
    CHECK_ERR_HAS(TS_ERR_DTYPE, "where: Promotion for uint16, uint32, uint64 types");
    CHECK(ts_amax_dim(u64t, 0, false) == NULL);
    CHECK_ERR_HAS(TS_ERR_UNSUPPORTED, "not implemented for 'UInt64'");
    /* floats only, as for int32 */
    ts_tensor *a = ts_ones(TS_SHAPE(2), (ts_opts){.dtype = TS_I8, .device = d});
    ts_set_requires_grad(a, true);
    CHECK_ERR(TS_ERR_DTYPE);
    CHECK(ts_mean(a) == NULL);
    CHECK_ERR_HAS(TS_ERR_DTYPE, "Input dtype must be either a floating point or complex dtype. "
                                "Got: Char");
    /* a scalar keeps the tensor's type (no promotion needed) */
    CHECK_VALS(ts_add_scalar(u, 1), TS_U16, 2, 3);
    ts_scope_end();
}

/* uint64 past 2^63 is printed unsigned (the printer reads every integer as int64 bits), in
 * PyTorch's format: tensor([9223372036854775813, 7], dtype=torch.uint64) */
static void test_print_uint64(ts_device d) {
    ts_scope_begin();
    const uint64_t v[2] = {(UINT64_C(1) << 63) + 5, 7};
    ts_tensor *t = ts_from_data(TS_SHAPE(2), TS_U64, v, (ts_opts){.dtype = TS_U64, .device = d});
    char *s = ts_to_string(t);
    CHECK(s && strstr(s, "[9223372036854775813,                   7]") != NULL);
    if (s && !strstr(s, "9223372036854775813")) fprintf(stderr, "printed: %s\n", s);
    free(s);
    ts_scope_end();
    CHECK_OK();
}

int main(void) {
    test_table();
    ts_device devs[TS_TEST_MAX_DEVICES];
    int nd = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    for (int k = 0; k < nd; k++) {
        test_casts(devs[k]);
        test_arith(devs[k]);
        test_reduce_views(devs[k]);
        test_refusals(devs[k]);
        test_print_uint64(devs[k]);
    }
    return ts_test_finish();
}
