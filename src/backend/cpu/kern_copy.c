/* kern_copy.c — CPU strided copy with cast between any two dtypes, and fill. */
#include <string.h>

#include "backend/complex_view.h"
#include "backend/cpu/cpu_kernels.h"
#include "backend/cpu/cpu_loops.h"
#include "backend/cpu/vec_kernels.h"

/* Each source dtype loads into one of four intermediate kinds: F (float), D (double), I (int64)
 * or U (uint64, for uint64 only); each destination converts from each kind. Going through float for
 * f16/bf16 from double or int64 matches PyTorch (c10::Half is built from a float). */
#define LD_f32(x)  (x)
#define LD_f64(x)  (x)
#define LD_f16(x)  ts_f16_to_f32(x)
#define LD_bf16(x) ts_bf16_to_f32(x)
#define LD_i64(x)  (x)
#define LD_i32(x)  ((int64_t)(x))
#define LD_u8(x)   ((int64_t)(x))
#define LD_b8(x)   ((int64_t)((x) != 0))
#define LD_i8(x)   ((int64_t)(x))
#define LD_i16(x)  ((int64_t)(x))
#define LD_u16(x)  ((int64_t)(x))
#define LD_u32(x)  ((int64_t)(x))
#define LD_u64(x)  (x)
#define KIND_f32   F
#define KIND_f64   D
#define KIND_f16   F
#define KIND_bf16  F
#define KIND_i64   I
#define KIND_i32   I
#define KIND_u8    I
#define KIND_b8    I
#define KIND_i8    I
#define KIND_i16   I
#define KIND_u16   I
#define KIND_u32   I
#define KIND_u64   U

#define TO_f32_F(x)  (x)
#define TO_f32_D(x)  ((float)(x))
#define TO_f32_I(x)  ((float)(x))
#define TO_f64_F(x)  ((double)(x))
#define TO_f64_D(x)  (x)
#define TO_f64_I(x)  ((double)(x))
#define TO_f16_F(x)  ts_f32_to_f16(x)
#define TO_f16_D(x)  ts_f32_to_f16((float)(x))
#define TO_f16_I(x)  ts_f32_to_f16((float)(x))
#define TO_bf16_F(x) ts_f32_to_bf16(x)
#define TO_bf16_D(x) ts_f32_to_bf16((float)(x))
#define TO_bf16_I(x) ts_f32_to_bf16((float)(x))
#define TO_i64_F(x)  ts_d2i64((double)(x))
#define TO_i64_D(x)  ts_d2i64(x)
#define TO_i64_I(x)  (x)
#define TO_i32_F(x)  ts_d2i32((double)(x))
#define TO_i32_D(x)  ts_d2i32(x)
#define TO_i32_I(x)  ((int32_t)(x))
#define TO_u8_F(x)   ts_d2u8((double)(x))
#define TO_u8_D(x)   ts_d2u8(x)
#define TO_u8_I(x)   ((uint8_t)(x))
#define TO_b8_F(x)   ((uint8_t)((x) != 0))
#define TO_b8_D(x)   ((uint8_t)((x) != 0))
#define TO_b8_I(x)   ((uint8_t)((x) != 0))
#define TO_i8_F(x)   ts_d2i8((double)(x))
#define TO_i8_D(x)   ts_d2i8(x)
#define TO_i8_I(x)   ((int8_t)(x))
#define TO_i16_F(x)  ts_d2i16((double)(x))
#define TO_i16_D(x)  ts_d2i16(x)
#define TO_i16_I(x)  ((int16_t)(x))
#define TO_u16_F(x)  ts_d2u16((double)(x))
#define TO_u16_D(x)  ts_d2u16(x)
#define TO_u16_I(x)  ((uint16_t)(x))
#define TO_u32_F(x)  ts_d2u32((double)(x))
#define TO_u32_D(x)  ts_d2u32(x)
#define TO_u32_I(x)  ((uint32_t)(x))
#define TO_u64_F(x)  ts_d2u64((double)(x))
#define TO_u64_D(x)  ts_d2u64(x)
#define TO_u64_I(x)  ((uint64_t)(x))
/* from uint64: integers wrap, floats convert the unsigned value */
#define TO_f32_U(x)  ((float)(x))
#define TO_f64_U(x)  ((double)(x))
#define TO_f16_U(x)  ts_f32_to_f16((float)(x))
#define TO_bf16_U(x) ts_f32_to_bf16((float)(x))
#define TO_i64_U(x)  ((int64_t)(x))
#define TO_i32_U(x)  ((int32_t)(x))
#define TO_u8_U(x)   ((uint8_t)(x))
#define TO_b8_U(x)   ((uint8_t)((x) != 0))
#define TO_i8_U(x)   ((int8_t)(x))
#define TO_i16_U(x)  ((int16_t)(x))
#define TO_u16_U(x)  ((uint16_t)(x))
#define TO_u32_U(x)  ((uint32_t)(x))
#define TO_u64_U(x)  (x)

#define PASTE3_(a, b, c) a##b##c
#define PASTE3(a, b, c)  PASTE3_(a, b, c)
#define CONVERT(D, S, x) PASTE3(TO_##D, _, KIND_##S)(LD_##S(x))

/* p[0] = dst, p[1] = src */
#define COPY_PAIR(D, S)                                                                            \
    static void copy_##D##_##S(void *ctx, char *const *p, const int64_t *s, int64_t n) {           \
        (void)ctx;                                                                                 \
        if (s[0] == (int64_t)sizeof(ts_cpu_t_##D) && s[1] == (int64_t)sizeof(ts_cpu_t_##S)) {      \
            ts_cpu_t_##D *o = (ts_cpu_t_##D *)p[0];                                                \
            const ts_cpu_t_##S *x = (const ts_cpu_t_##S *)p[1];                                    \
            for (int64_t i = 0; i < n; i++) o[i] = CONVERT(D, S, x[i]);                            \
        } else {                                                                                   \
            char *o = p[0];                                                                        \
            const char *x = p[1];                                                                  \
            for (int64_t i = 0; i < n; i++, o += s[0], x += s[1])                                  \
                *(ts_cpu_t_##D *)o = CONVERT(D, S, *(const ts_cpu_t_##S *)x);                      \
        }                                                                                          \
    }

#define COPY_FROM_ALL(D)                                                                           \
    COPY_PAIR(D, f32)                                                                              \
    COPY_PAIR(D, f64)                                                                              \
    COPY_PAIR(D, f16)                                                                              \
    COPY_PAIR(D, bf16)                                                                             \
    COPY_PAIR(D, i64)                                                                              \
    COPY_PAIR(D, i32)                                                                              \
    COPY_PAIR(D, u8)                                                                               \
    COPY_PAIR(D, b8)                                                                               \
    COPY_PAIR(D, i8)                                                                               \
    COPY_PAIR(D, i16)                                                                              \
    COPY_PAIR(D, u16)                                                                              \
    COPY_PAIR(D, u32)                                                                              \
    COPY_PAIR(D, u64)

COPY_FROM_ALL(f32)
COPY_FROM_ALL(f64)
COPY_FROM_ALL(f16)
COPY_FROM_ALL(bf16)
COPY_FROM_ALL(i64)
COPY_FROM_ALL(i32)
COPY_FROM_ALL(u8)
COPY_FROM_ALL(b8)
COPY_FROM_ALL(i8)
COPY_FROM_ALL(i16)
COPY_FROM_ALL(u16)
COPY_FROM_ALL(u32)
COPY_FROM_ALL(u64)

#define ROW(D)                                                                                     \
    {                                                                                              \
        copy_##D##_f32, copy_##D##_f64, copy_##D##_f16, copy_##D##_bf16, copy_##D##_i64,           \
            copy_##D##_i32, copy_##D##_u8, copy_##D##_b8, copy_##D##_i8, copy_##D##_i16,           \
            copy_##D##_u16, copy_##D##_u32, copy_##D##_u64                                         \
    }

/* indexed [dst - TS_F32][src - TS_F32], in ts_dtype order */
static const ts_cpu_seg_fn copy_table[TS_DTYPE_COUNT - 1][TS_DTYPE_COUNT - 1] = {
    ROW(f32), ROW(f64), ROW(f16), ROW(bf16), ROW(i64), ROW(i32), ROW(u8),
    ROW(b8),  ROW(i8),  ROW(i16), ROW(u16),  ROW(u32), ROW(u64)};

/* Same dtype: a bit copy by element size (bool bytes are copied as they are). */
#define RAW_COPY(NAME, T)                                                                          \
    static void NAME(void *ctx, char *const *p, const int64_t *s, int64_t n) {                     \
        (void)ctx;                                                                                 \
        if (s[0] == (int64_t)sizeof(T) && s[1] == (int64_t)sizeof(T)) {                            \
            memmove(p[0], p[1], (size_t)n * sizeof(T));                                            \
        } else {                                                                                   \
            char *o = p[0];                                                                        \
            const char *x = p[1];                                                                  \
            for (int64_t i = 0; i < n; i++, o += s[0], x += s[1]) *(T *)o = *(const T *)x;         \
        }                                                                                          \
    }
RAW_COPY(raw_copy1, uint8_t)
RAW_COPY(raw_copy2, uint16_t)
RAW_COPY(raw_copy4, uint32_t)
RAW_COPY(raw_copy8, uint64_t)

/* f32 <-> f16 / bf16 (autocast's casts): any run through vec_kernels.h's conversions (F16C where
 * the CPU has it), the very bits of the table's loops. p[0] = dst, p[1] = src. */
static void cast_half(void *ctx, char *const *p, const int64_t *s, int64_t n) {
    const ts_dtype *dt = (const ts_dtype *)ctx; /* {dst, src} */
    const ts_vec_kernels *vk = tsi_vec_kernels_get();
    if (dt[0] == TS_F32 && s[0] == (int64_t)sizeof(float)) {
        ts_vec_load_f32(vk, (float *)p[0], p[1], dt[1], s[1], n);
    } else if (dt[1] == TS_F32 && s[1] == (int64_t)sizeof(float)) {
        ts_vec_store_f32(vk, p[0], dt[0], s[0], (const float *)p[1], n);
    } else {
        copy_table[dt[0] - TS_F32][dt[1] - TS_F32](NULL, p, s, n);
    }
}

static bool is_half(ts_dtype dt) { return dt == TS_F16 || dt == TS_BF16; }

void tsi_cpu_copy(const ts_backend *be, int index, const ts_kview *dst, const ts_kview *src) {
    if ((tsi_kview_complex(dst) || tsi_kview_complex(src)) &&
        (dst->dtype != src->dtype || dst->dtype == TS_C128)) {
        tsi_copy_complex(be, index, dst, src); /* casts, and complex128's 16-byte elements */
        return;
    }
    const ts_kview *views[2] = {dst, src};
    ts_cpu_iter it;
    ts_cpu_iter_init(&it, 2, views);
    ts_cpu_seg_fn fn;
    if (dst->dtype == src->dtype) {
        switch (ts_cpu_dtype_size(dst->dtype)) {
        case 8:
            fn = raw_copy8;
            break;
        case 4:
            fn = raw_copy4;
            break;
        case 2:
            fn = raw_copy2;
            break;
        default:
            fn = raw_copy1;
            break;
        }
    } else if ((dst->dtype == TS_F32 && is_half(src->dtype)) ||
               (src->dtype == TS_F32 && is_half(dst->dtype))) {
        const ts_dtype dts[2] = {dst->dtype, src->dtype};
        ts_cpu_iter_run(&it, cast_half, (void *)dts);
        return;
    } else {
        fn = copy_table[dst->dtype - TS_F32][src->dtype - TS_F32];
    }
    ts_cpu_iter_run(&it, fn, NULL);
}

/* p[0] = dst; ctx points at one element already in dst's dtype */
#define FILL_SEG(NAME, T)                                                                          \
    static void NAME(void *ctx, char *const *p, const int64_t *s, int64_t n) {                     \
        const T v = *(const T *)ctx;                                                               \
        if (s[0] == (int64_t)sizeof(T)) {                                                          \
            T *o = (T *)p[0];                                                                      \
            for (int64_t i = 0; i < n; i++) o[i] = v;                                              \
        } else {                                                                                   \
            char *o = p[0];                                                                        \
            for (int64_t i = 0; i < n; i++, o += s[0]) *(T *)o = v;                                \
        }                                                                                          \
    }
FILL_SEG(fill1, uint8_t)
FILL_SEG(fill2, uint16_t)
FILL_SEG(fill4, uint32_t)
FILL_SEG(fill8, uint64_t)

void tsi_cpu_fill(const ts_backend *be, int index, const ts_kview *dst, double value) {
    if (tsi_kview_complex(dst)) {
        tsi_fill_complex(be, index, dst, value);
        return;
    }
    union {
        uint64_t u64;
        uint32_t u32;
        uint16_t u16;
        uint8_t u8;
        float f32;
        double f64;
        int64_t i64;
        int32_t i32;
    } v = {0};
    ts_cpu_seg_fn fn = fill1;
    switch (dst->dtype) {
    case TS_F32:
        v.f32 = TO_f32_D(value), fn = fill4;
        break;
    case TS_F64:
        v.f64 = value, fn = fill8;
        break;
    case TS_F16:
        v.u16 = TO_f16_D(value), fn = fill2;
        break;
    case TS_BF16:
        v.u16 = TO_bf16_D(value), fn = fill2;
        break;
    case TS_I64:
        v.i64 = TO_i64_D(value), fn = fill8;
        break;
    case TS_I32:
        v.i32 = TO_i32_D(value), fn = fill4;
        break;
    case TS_U8:
        v.u8 = TO_u8_D(value);
        break;
    case TS_I8:
        v.u8 = (uint8_t)TO_i8_D(value);
        break;
    case TS_I16:
        v.u16 = (uint16_t)TO_i16_D(value), fn = fill2;
        break;
    case TS_U16:
        v.u16 = TO_u16_D(value), fn = fill2;
        break;
    case TS_U32:
        v.u32 = TO_u32_D(value), fn = fill4;
        break;
    case TS_U64:
        v.u64 = TO_u64_D(value), fn = fill8;
        break;
    default:
        v.u8 = TO_b8_D(value);
        break;
    }
    const ts_kview *views[1] = {dst};
    ts_cpu_iter it;
    ts_cpu_iter_init(&it, 1, views);
    ts_cpu_iter_run(&it, fn, &v);
}
