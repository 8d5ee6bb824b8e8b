/* kern_unary.c — CPU elementwise unary ops (ts_unary_op) for every dtype. exp, log, tanh,
 * sigmoid, gelu and silu on f32 use the vectorised math of vec_kernels.h; f16 and bf16 convert
 * chunks to float (F16C where the CPU has it), compute them as f32 does, and convert back. */
#include <math.h>

#include "backend/cpu/cpu_kernels.h"
#include "backend/cpu/cpu_loops.h"
#include "backend/cpu/vec_kernels.h"

_Static_assert(TS_U_COUNT == 82,
               "a ts_unary_op was added or removed: give it its float kernel (a row "
               "of kernel_math.h's lists or a case of UNARY_FLOAT), its case in "
               "unary_fallback_d and the integer loops; then update the count");

typedef struct unary_ctx {
    ts_unary_op op;
    double p0, p1;
    const ts_vec_kernels *vk;
    ts_dtype dt; /* the input's */
    bool vec;    /* f32 computes op with vk->unary_f32 */
} unary_ctx;

/* floats per chunk of the f16 / bf16 and strided vectorised paths (on the stack) */
#define UN_CHUNK 512

/* libm by compute type: f for float, d for double */
#define M_f_ABS   fabsf
#define M_d_ABS   fabs
#define M_f_EXP   expf
#define M_d_EXP   exp
#define M_f_LOG   logf
#define M_d_LOG   log
#define M_f_LOG1P log1pf
#define M_d_LOG1P log1p
#define M_f_SQRT  sqrtf
#define M_d_SQRT  sqrt
#define M_f_TANH  tanhf
#define M_d_TANH  tanh
#define M_f_FLOOR floorf
#define M_d_FLOOR floor
#define M_f_CEIL  ceilf
#define M_d_CEIL  ceil

/* One run: a dense fast path the compiler can vectorise, and the strided walk. p[0] out, p[1] a. */
#define UN_LOOP(OT, T, CT, LD, ST, EXPR)                                                           \
    do {                                                                                           \
        if (s[0] == (int64_t)sizeof(OT) && s[1] == (int64_t)sizeof(T)) {                           \
            OT *o_ = (OT *)p[0];                                                                   \
            const T *x_ = (const T *)p[1];                                                         \
            for (int64_t i = 0; i < n; i++) {                                                      \
                const CT a = LD(x_[i]);                                                            \
                o_[i] = ST(EXPR);                                                                  \
            }                                                                                      \
        } else {                                                                                   \
            char *o_ = p[0];                                                                       \
            const char *x_ = p[1];                                                                 \
            for (int64_t i = 0; i < n; i++, o_ += s[0], x_ += s[1]) {                              \
                const CT a = LD(*(const T *)x_);                                                   \
                *(OT *)o_ = ST(EXPR);                                                              \
            }                                                                                      \
        }                                                                                          \
    } while (0)

/* A case of UNARY_FLOAT's switch for each of kernel_math.h's TS_LIBM_UNARY functions. */
#define UN_LIBM_CASE(U, FN, T, CT, FAM, LD, ST)                                                    \
    case U:                                                                                        \
        UN_LOOP(T, T, CT, LD, ST, TS_LIBM_##FAM(FN)(a));                                           \
        break;

/* ... and for each of its TS_SPECIAL_UNARY and TS_SPECIAL_PARAM_UNARY ops (issue 52) */
#define UN_SPECIAL_CASE(U, FN, T, CT, FAM, LD, ST)                                                 \
    case U:                                                                                        \
        UN_LOOP(T, T, CT, LD, ST, TS_SPECIAL_##FAM(FN)(a));                                        \
        break;
#define UN_PARAM_CASE(U, EXPR, T, CT, LD, ST)                                                      \
    case U:                                                                                        \
        UN_LOOP(T, T, CT, LD, ST, EXPR);                                                           \
        break;

/* logit on f32: the ratios of a chunk, then vk's log of them (as PyTorch's vectorised kernel);
 * a NaN result (x outside [0, 1], or NaN) is logf's, so that its bits are the other backends'
 * (ts_logit_f's: the vectorised log's NaN has another sign). Inlined in the ISA variants of the
 * unary bodies, so that the ratio and NaN loops are vectorised; a dense operand is read or written
 * where it lies (no copy through the chunk buffer). */
TS_CPU_BODY void logit_vec_f32(const unary_ctx *ctx, char *const *p, const int64_t *s, int64_t n) {
    float ratio[UN_CHUNK], buf[UN_CHUNK];
    const float eps = ctx->p0 >= 0 ? (float)ctx->p0 : -1.0f;
    const bool dense_in = s[1] == (int64_t)sizeof(float);
    const bool dense_out = s[0] == (int64_t)sizeof(float);
    for (int64_t i = 0; i < n; i += UN_CHUNK) {
        const int64_t m = n - i < UN_CHUNK ? n - i : UN_CHUNK;
        const float *x = dense_in ? (const float *)(p[1] + i * s[1]) : buf;
        if (!dense_in) ts_vec_load_f32(ctx->vk, buf, p[1] + i * s[1], TS_F32, s[1], m);
        if (eps < 0.0f)
            for (int64_t k = 0; k < m; k++) ratio[k] = ts_logit_ratio_f(x[k], -1.0f);
        else
            for (int64_t k = 0; k < m; k++) ratio[k] = ts_logit_ratio_f(x[k], eps);
        float *y = dense_out ? (float *)(p[0] + i * s[0]) : buf;
        ctx->vk->unary_f32(TS_U_LOG, y, ratio, m);
        bool nan = false;
        for (int64_t k = 0; k < m; k++) nan |= y[k] != y[k];
        for (int64_t k = 0; nan && k < m; k++)
            if (y[k] != y[k]) y[k] = logf(ratio[k]);
        if (!dense_out) ts_vec_store_f32(ctx->vk, p[0] + i * s[0], TS_F32, s[0], buf, m);
    }
}

/* The vectorised ops on f32: straight through vk on a dense run, through chunks otherwise. */
TS_CPU_BODY void unary_vec_f32(const unary_ctx *ctx, char *const *p, const int64_t *s, int64_t n) {
    if (ctx->op == TS_U_LOGIT) {
        logit_vec_f32(ctx, p, s, n);
        return;
    }
    if (s[0] == (int64_t)sizeof(float) && s[1] == (int64_t)sizeof(float)) {
        ctx->vk->unary_f32(ctx->op, (float *)p[0], (const float *)p[1], n);
        return;
    }
    float buf[UN_CHUNK];
    for (int64_t i = 0; i < n; i += UN_CHUNK) {
        const int64_t m = n - i < UN_CHUNK ? n - i : UN_CHUNK;
        ts_vec_load_f32(ctx->vk, buf, p[1] + i * s[1], TS_F32, s[1], m);
        ctx->vk->unary_f32(ctx->op, buf, buf, m);
        ts_vec_store_f32(ctx->vk, p[0] + i * s[0], TS_F32, s[0], buf, m);
    }
}

/* clang-format off */
/* Float dtypes: f32 computes in float (FAM f), f64 in double (FAM d); f16 and bf16 go through
 * unary_f32 (unary_half). */
#define UNARY_FLOAT(TAG, CT, FAM, LD, ST)                                                          \
    TS_CPU_BODY void unary_##TAG##_body(void *vctx, char *const *p, const int64_t *s, int64_t n) { \
        const unary_ctx *ctx = (const unary_ctx *)vctx;                                            \
        typedef ts_cpu_t_##TAG T;                                                                  \
        if (ctx->vec) {                                                                            \
            unary_vec_f32(ctx, p, s, n);                                                           \
            return;                                                                                \
        }                                                                                          \
        const double p0 = ctx->p0, p1 = ctx->p1;                                                   \
        (void)p0, (void)p1;                                                                        \
        switch (ctx->op) {                                                                         \
        case TS_U_NEG: UN_LOOP(T, T, CT, LD, ST, -a); break;                                       \
        case TS_U_ABS: UN_LOOP(T, T, CT, LD, ST, M_##FAM##_ABS(a)); break;                         \
        case TS_U_EXP: UN_LOOP(T, T, CT, LD, ST, M_##FAM##_EXP(a)); break;                         \
        case TS_U_LOG: UN_LOOP(T, T, CT, LD, ST, M_##FAM##_LOG(a)); break;                         \
        case TS_U_LOG1P: UN_LOOP(T, T, CT, LD, ST, M_##FAM##_LOG1P(a)); break;                     \
        case TS_U_SQRT: UN_LOOP(T, T, CT, LD, ST, M_##FAM##_SQRT(a)); break;                       \
        case TS_U_RSQRT: UN_LOOP(T, T, CT, LD, ST, ts_rsqrt_##FAM(a)); break;                      \
        TS_LIBM_UNARY(UN_LIBM_CASE, T, CT, FAM, LD, ST)                                            \
        case TS_U_TANH: UN_LOOP(T, T, CT, LD, ST, M_##FAM##_TANH(a)); break;                       \
        case TS_U_SIGMOID: UN_LOOP(T, T, CT, LD, ST, ts_sigmoid_##FAM(a)); break;                  \
        case TS_U_RELU: UN_LOOP(T, T, CT, LD, ST, ts_relu_##FAM(a)); break;                        \
        case TS_U_GELU: UN_LOOP(T, T, CT, LD, ST, ts_gelu_##FAM(a)); break;                        \
        case TS_U_SILU: UN_LOOP(T, T, CT, LD, ST, ts_silu_##FAM(a)); break;                        \
        case TS_U_SOFTPLUS: UN_LOOP(T, T, CT, LD, ST, ts_softplus_##FAM(a)); break;                \
        case TS_U_SIGN: UN_LOOP(T, T, CT, LD, ST, ts_sign_##FAM(a)); break;                        \
        case TS_U_FLOOR: UN_LOOP(T, T, CT, LD, ST, M_##FAM##_FLOOR(a)); break;                     \
        case TS_U_CEIL: UN_LOOP(T, T, CT, LD, ST, M_##FAM##_CEIL(a)); break;                       \
        case TS_U_ROUND: UN_LOOP(T, T, CT, LD, ST, ts_round_even_##FAM(a)); break;                 \
        case TS_U_RECIPROCAL: UN_LOOP(T, T, CT, LD, ST, ts_reciprocal_##FAM(a)); break;            \
        case TS_U_SQUARE: UN_LOOP(T, T, CT, LD, ST, a * a); break;                                 \
        case TS_U_LOGICAL_NOT: UN_LOOP(ts_cpu_t_b8, T, CT, LD, ID, (uint8_t)(a == 0)); break;      \
        TS_SPECIAL_UNARY(UN_SPECIAL_CASE, T, CT, FAM, LD, ST)                                      \
        TS_SPECIAL_PARAM_UNARY(UN_PARAM_CASE, FAM, CT, T, CT, LD, ST)                              \
        case TS_U_CLAMP: {                                                                         \
            const CT lo = isnan(ctx->p0) ? (CT)-INFINITY : (CT)ctx->p0;                            \
            const CT hi = isnan(ctx->p1) ? (CT)INFINITY : (CT)ctx->p1;                             \
            UN_LOOP(T, T, CT, LD, ST, ts_clamp_##FAM(a, lo, hi));                                  \
            break;                                                                                 \
        }                                                                                          \
        default:                                                                                   \
            break;                                                                                 \
        }                                                                                          \
    }                                                                                              \
    TS_CPU_SEG_VARIANTS(unary_##TAG)

/* clang-format on */
UNARY_FLOAT(f32, float, f, ID, ID)
UNARY_FLOAT(f64, double, d, ID, ID)

/* f16 and bf16: chunks converted to float, computed by unary_f32, converted back. */
static void unary_half(void *vctx, char *const *p, const int64_t *s, int64_t n) {
    const unary_ctx *ctx = (const unary_ctx *)vctx;
    float buf[UN_CHUNK];
    char *const bp[2] = {(char *)buf, (char *)buf};
    const int64_t bs[2] = {sizeof(float), sizeof(float)};
    for (int64_t i = 0; i < n; i += UN_CHUNK) {
        const int64_t m = n - i < UN_CHUNK ? n - i : UN_CHUNK;
        ts_vec_load_f32(ctx->vk, buf, p[1] + i * s[1], ctx->dt, s[1], m);
        if (ctx->op == TS_U_LOGICAL_NOT) {
            for (int64_t k = 0; k < m; k++) *(uint8_t *)(p[0] + (i + k) * s[0]) = buf[k] == 0;
            continue;
        }
        unary_f32(vctx, bp, bs, m);
        ts_vec_store_f32(ctx->vk, p[0] + i * s[0], ctx->dt, s[0], buf, m);
    }
}

/* unary_fallback_d's case for each TS_LIBM_UNARY function */
#define UN_FALLBACK_CASE(U, FN, FAM)                                                               \
    case U:                                                                                        \
        return TS_LIBM_##FAM(FN)(x);
#define UN_FALLBACK_SPECIAL(U, FN, FAM)                                                            \
    case U:                                                                                        \
        return TS_SPECIAL_##FAM(FN)(x);
#define UN_FALLBACK_PARAM(U, EXPR, unused)                                                         \
    case U:                                                                                        \
        return EXPR;

/* Float-only ops reached with an integer dtype (the front ends promote first, so this is off
 * the contract): computed in double and truncated, never crashing. */
static double unary_fallback_d(ts_unary_op op, double x, double p0, double p1) {
    const double a = x;
    switch (op) {
    case TS_U_EXP:
        return exp(x);
    case TS_U_LOG:
        return log(x);
    case TS_U_LOG1P:
        return log1p(x);
    case TS_U_SQRT:
        return sqrt(x);
    case TS_U_RSQRT:
        return ts_rsqrt_d(x);
        TS_LIBM_UNARY(UN_FALLBACK_CASE, d)
        TS_SPECIAL_UNARY(UN_FALLBACK_SPECIAL, d)
        TS_SPECIAL_PARAM_UNARY(UN_FALLBACK_PARAM, d, double, 0)
    case TS_U_TANH:
        return tanh(x);
    case TS_U_SIGMOID:
        return ts_sigmoid_d(x);
    case TS_U_GELU:
        return ts_gelu_d(x);
    case TS_U_SILU:
        return ts_silu_d(x);
    case TS_U_SOFTPLUS:
        return ts_softplus_d(x);
    case TS_U_RECIPROCAL:
        return ts_reciprocal_d(x);
    default:
        return x;
    }
}

/* Bounds for integer clamp: NaN is unbounded; out-of-range bounds saturate. */
static int64_t clamp_bound_i64(double v, int64_t unbounded) {
    if (isnan(v)) return unbounded;
    if (v <= -9223372036854775808.0) return INT64_MIN;
    if (v >= 9223372036854775807.0) return INT64_MAX;
    return (int64_t)v;
}

/* Integer dtypes and bool compute in int64 with wrapping arithmetic (PyTorch's overflow). */
#define UNARY_INT(TAG, LD, ST)                                                                     \
    static void unary_##TAG(void *vctx, char *const *p, const int64_t *s, int64_t n) {             \
        const unary_ctx *ctx = (const unary_ctx *)vctx;                                            \
        typedef ts_cpu_t_##TAG T;                                                                  \
        switch (ctx->op) {                                                                         \
        case TS_U_NEG:                                                                             \
            UN_LOOP(T, T, int64_t, LD, ST, (int64_t)(0u - (uint64_t)a));                           \
            break;                                                                                 \
        case TS_U_ABS:                                                                             \
            UN_LOOP(T, T, int64_t, LD, ST, a < 0 ? (int64_t)(0u - (uint64_t)a) : a);               \
            break;                                                                                 \
        case TS_U_SIGN:                                                                            \
            UN_LOOP(T, T, int64_t, LD, ST, (int64_t)((a > 0) - (a < 0)));                          \
            break;                                                                                 \
        case TS_U_SQUARE:                                                                          \
            UN_LOOP(T, T, int64_t, LD, ST, (int64_t)((uint64_t)a * (uint64_t)a));                  \
            break;                                                                                 \
        case TS_U_RELU:                                                                            \
            UN_LOOP(T, T, int64_t, LD, ST, a < 0 ? 0 : a);                                         \
            break;                                                                                 \
        case TS_U_FLOOR:                                                                           \
        case TS_U_CEIL:                                                                            \
        case TS_U_ROUND:                                                                           \
            UN_LOOP(T, T, int64_t, LD, ST, a);                                                     \
            break;                                                                                 \
        case TS_U_LOGICAL_NOT:                                                                     \
            UN_LOOP(ts_cpu_t_b8, T, int64_t, LD, ID, (uint8_t)(a == 0));                           \
            break;                                                                                 \
        case TS_U_CLAMP: {                                                                         \
            const int64_t lo = clamp_bound_i64(ctx->p0, INT64_MIN);                                \
            const int64_t hi = clamp_bound_i64(ctx->p1, INT64_MAX);                                \
            UN_LOOP(T, T, int64_t, LD, ST, ts_clamp_i64(a, lo, hi));                               \
            break;                                                                                 \
        }                                                                                          \
        default: {                                                                                 \
            const ts_unary_op op = ctx->op;                                                        \
            UN_LOOP(T, T, int64_t, LD, ST,                                                         \
                    ts_d2i64(unary_fallback_d(op, (double)a, ctx->p0, ctx->p1)));                  \
            break;                                                                                 \
        }                                                                                          \
        }                                                                                          \
    }

UNARY_INT(i64, LD_I, ST_I64)
UNARY_INT(i32, LD_I, ST_I32)
UNARY_INT(u8, LD_I, ST_U8)
UNARY_INT(b8, LD_B8, TO_B8)
UNARY_INT(i8, LD_I, ST_I8)
UNARY_INT(i16, LD_I, ST_I16)
UNARY_INT(u16, LD_I, ST_U16)
UNARY_INT(u32, LD_I, ST_U32)

/* uint64 bounds: NaN unbounded, saturating at 0 and 2^64 - 1 */
static uint64_t clamp_bound_u64(double v, uint64_t unbounded) {
    if (isnan(v)) return unbounded;
    if (v <= 0) return 0;
    if (v >= 18446744073709551615.0) return UINT64_MAX;
    return (uint64_t)v;
}

/* uint64 computes in uint64_t: abs, relu and the roundings are the value itself */
static void unary_u64(void *vctx, char *const *p, const int64_t *s, int64_t n) {
    const unary_ctx *ctx = (const unary_ctx *)vctx;
    typedef uint64_t T;
    switch (ctx->op) {
    case TS_U_NEG:
        UN_LOOP(T, T, uint64_t, ID, ID, 0u - a);
        break;
    case TS_U_SIGN:
        UN_LOOP(T, T, uint64_t, ID, ID, (uint64_t)(a > 0));
        break;
    case TS_U_SQUARE:
        UN_LOOP(T, T, uint64_t, ID, ID, a * a);
        break;
    case TS_U_ABS:
    case TS_U_RELU:
    case TS_U_FLOOR:
    case TS_U_CEIL:
    case TS_U_ROUND:
        UN_LOOP(T, T, uint64_t, ID, ID, a);
        break;
    case TS_U_LOGICAL_NOT:
        UN_LOOP(ts_cpu_t_b8, T, uint64_t, ID, ID, (uint8_t)(a == 0));
        break;
    case TS_U_CLAMP: {
        const uint64_t lo = clamp_bound_u64(ctx->p0, 0), hi = clamp_bound_u64(ctx->p1, UINT64_MAX);
        UN_LOOP(T, T, uint64_t, ID, ID, ts_clamp_u64(a, lo, hi));
        break;
    }
    default: {
        const ts_unary_op op = ctx->op;
        UN_LOOP(T, T, uint64_t, ID, ID,
                ts_d2u64(unary_fallback_d(op, (double)a, ctx->p0, ctx->p1)));
        break;
    }
    }
}

void tsi_cpu_unary(const ts_backend *be, int index, ts_unary_op op, const ts_kview *out,
                   const ts_kview *a, double p0, double p1) {
    (void)be;
    (void)index;
    const bool half = a->dtype == TS_F16 || a->dtype == TS_BF16;
    unary_ctx ctx = {
        op,       p0,
        p1,       tsi_vec_kernels_get(),
        a->dtype, (a->dtype == TS_F32 || half) && (tsi_vec_unary_has(op) || op == TS_U_LOGIT)};
    const ts_kview *views[2] = {out, a};
    ts_cpu_iter it;
    ts_cpu_iter_init(&it, 2, views);
    ts_cpu_seg_fn fn;
    switch (a->dtype) {
    case TS_F32:
        fn = unary_f32;
        break;
    case TS_F64:
        fn = unary_f64;
        break;
    case TS_F16:
    case TS_BF16:
        fn = unary_half;
        break;
    case TS_I64:
        fn = unary_i64;
        break;
    case TS_I32:
        fn = unary_i32;
        break;
    case TS_U8:
        fn = unary_u8;
        break;
    case TS_I8:
        fn = unary_i8;
        break;
    case TS_I16:
        fn = unary_i16;
        break;
    case TS_U16:
        fn = unary_u16;
        break;
    case TS_U32:
        fn = unary_u32;
        break;
    case TS_U64:
        fn = unary_u64;
        break;
    default:
        fn = unary_b8;
        break;
    }
    ts_cpu_iter_run(&it, fn, &ctx);
}
