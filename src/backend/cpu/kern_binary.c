/* kern_binary.c — CPU elementwise binary ops (tensor-tensor and tensor-scalar) and where. f16 and
 * bf16 convert chunks to float (F16C where the CPU has it) and compute as f32 does; gelu's and
 * silu's backward on f32 use the vectorised math of vec_kernels.h. */
#include <math.h>

#include "backend/cpu/cpu_kernels.h"
#include "backend/cpu/cpu_loops.h"
#include "backend/cpu/vec_kernels.h"
#include "backend/scalar_int.h"

/* floats per chunk of the f16 / bf16 and strided vectorised paths (three of them on the stack) */
#define BIN_CHUNK 256

#define M_f_POW   powf
#define M_d_POW   pow
#define M_f_SQRT  sqrtf
#define M_d_SQRT  sqrt
#define M_f_TRUNC truncf
#define M_d_TRUNC trunc

/* PyTorch's shifts computed in int64 (any narrower integer stores the low bits, which equal its
 * own shift's): << by < 0 or >= 64 gives 0, >> by those gives the sign */
#define ISHL(x, y) ((y) < 0 || (y) >= 64 ? 0 : (int64_t)((uint64_t)(x) << (y)))
#define ISHR(x, y) ((y) < 0 || (y) >= 64 ? ((x) < 0 ? -1 : 0) : (x) >> (y))

/* Wrapping integer arithmetic (signed overflow is undefined in C, two's complement in PyTorch). */
#define IADD(x, y) ((int64_t)((uint64_t)(x) + (uint64_t)(y)))
#define ISUB(x, y) ((int64_t)((uint64_t)(x) - (uint64_t)(y)))
#define IMUL(x, y) ((int64_t)((uint64_t)(x) * (uint64_t)(y)))

/* ---------------------------------------------------------------- loops
 * Each takes the output storage type OT and its store ST, and an expression in a and b (of the
 * compute type CT). The caller's scope provides T, CT, LD, p, s, n (and bval for scalars). */

/* tensor-tensor: p[0] out, p[1] a, p[2] b. Dense runs and a broadcast (stride 0) operand get
 * loops of their own so the common cases vectorise. */
#define BIN_LOOP(OT, ST, EXPR)                                                                     \
    do {                                                                                           \
        const int64_t so_ = s[0], sa_ = s[1], sb_ = s[2];                                          \
        if (so_ == (int64_t)sizeof(OT) && sa_ == (int64_t)sizeof(T) &&                             \
            sb_ == (int64_t)sizeof(T)) {                                                           \
            OT *o_ = (OT *)p[0];                                                                   \
            const T *x_ = (const T *)p[1], *y_ = (const T *)p[2];                                  \
            for (int64_t i = 0; i < n; i++) {                                                      \
                const CT a = LD(x_[i]), b = LD(y_[i]);                                             \
                o_[i] = ST(EXPR);                                                                  \
            }                                                                                      \
        } else if (so_ == (int64_t)sizeof(OT) && sa_ == (int64_t)sizeof(T) && sb_ == 0) {          \
            OT *o_ = (OT *)p[0];                                                                   \
            const T *x_ = (const T *)p[1];                                                         \
            const CT b = LD(*(const T *)p[2]);                                                     \
            for (int64_t i = 0; i < n; i++) {                                                      \
                const CT a = LD(x_[i]);                                                            \
                o_[i] = ST(EXPR);                                                                  \
            }                                                                                      \
        } else if (so_ == (int64_t)sizeof(OT) && sa_ == 0 && sb_ == (int64_t)sizeof(T)) {          \
            OT *o_ = (OT *)p[0];                                                                   \
            const T *y_ = (const T *)p[2];                                                         \
            const CT a = LD(*(const T *)p[1]);                                                     \
            for (int64_t i = 0; i < n; i++) {                                                      \
                const CT b = LD(y_[i]);                                                            \
                o_[i] = ST(EXPR);                                                                  \
            }                                                                                      \
        } else {                                                                                   \
            char *o_ = p[0];                                                                       \
            const char *x_ = p[1], *y_ = p[2];                                                     \
            for (int64_t i = 0; i < n; i++, o_ += so_, x_ += sa_, y_ += sb_) {                     \
                const CT a = LD(*(const T *)x_), b = LD(*(const T *)y_);                           \
                *(OT *)o_ = ST(EXPR);                                                              \
            }                                                                                      \
        }                                                                                          \
    } while (0)

/* tensor-scalar: p[0] out, p[1] a; b is the scalar bval (already in CT). */
#define SCALAR_LOOP(OT, ST, EXPR)                                                                  \
    do {                                                                                           \
        const CT b = bval;                                                                         \
        (void)b;                                                                                   \
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

_Static_assert(TS_B_COUNT == 55,
               "a ts_binary_op was added or removed: give it its CPU kernel (FLOAT_CASES / "
               "INT_CASES / CMP_CASES or TS_SPECIAL_BINARY) here; then update the count");

/* clang-format off */
/* The op switches shared by both forms; comparisons and logical ops write bool. */
#define CMP_CASES(LOOP)                                                                            \
    case TS_B_EQ: LOOP(uint8_t, ID, (uint8_t)(a == b)); break;                                     \
    case TS_B_NE: LOOP(uint8_t, ID, (uint8_t)(a != b)); break;                                     \
    case TS_B_LT: LOOP(uint8_t, ID, (uint8_t)(a < b)); break;                                      \
    case TS_B_LE: LOOP(uint8_t, ID, (uint8_t)(a <= b)); break;                                     \
    case TS_B_GT: LOOP(uint8_t, ID, (uint8_t)(a > b)); break;                                      \
    case TS_B_GE: LOOP(uint8_t, ID, (uint8_t)(a >= b)); break;                                     \
    case TS_B_AND: LOOP(uint8_t, ID, (uint8_t)((a != 0) & (b != 0))); break;                       \
    case TS_B_OR: LOOP(uint8_t, ID, (uint8_t)((a != 0) | (b != 0))); break;

/* everything but POW and the comparisons */
#define FLOAT_CASES(LOOP, FAM)                                                                     \
    case TS_B_ADD: LOOP(T, ST, a + b); break;                                                      \
    case TS_B_SUB: LOOP(T, ST, a - b); break;                                                      \
    case TS_B_MUL: LOOP(T, ST, a * b); break;                                                      \
    case TS_B_DIV: LOOP(T, ST, a / b); break;                                                      \
    case TS_B_MAX: LOOP(T, ST, ts_maximum_##FAM(a, b)); break;                                     \
    case TS_B_MIN: LOOP(T, ST, ts_minimum_##FAM(a, b)); break;                                     \
    case TS_B_FMOD: LOOP(T, ST, ts_fmod_##FAM(a, b)); break;                                       \
    case TS_B_RSUB: LOOP(T, ST, b - a); break;                                                     \
    case TS_B_RDIV: LOOP(T, ST, b / a); break;                                                     \
    case TS_B_RPOW: LOOP(T, ST, M_##FAM##_POW(b, a)); break;                                       \
    case TS_B_FLOORDIV: LOOP(T, ST, ts_floordiv_##FAM(a, b)); break;                               \
    case TS_B_REM: LOOP(T, ST, ts_rem_##FAM(a, b)); break;                                         \
    case TS_B_DIVTRUNC: LOOP(T, ST, M_##FAM##_TRUNC(a / b)); break;                                \
    /* the bitwise ops on floats are off the contract (the front ends refuse them): a, as CUDA's */ \
    case TS_B_BITAND:                                                                              \
    case TS_B_BITOR:                                                                               \
    case TS_B_BITXOR:                                                                              \
    case TS_B_LSHIFT:                                                                              \
    case TS_B_RSHIFT: LOOP(T, ST, ((void)b, a)); break;                                            \
        BWD_CASES(LOOP, FAM)                                                                       \
        TS_SPECIAL_BASIC_BINARY(SPECIAL_CASE, LOOP, FAM)                                           \
        TS_KMS_BINARY_OPS(SPECIAL_LABEL, ~)                                                   \
        LOOP(T, ST, special_##FAM(op_, a, b));                                                     \
        break;

/* kernel_math.h's special binary ops (issue 52): on floats in the compute type; on integers (off
 * the contract: the front ends promote first) in double, truncated, so that the kernel stays total
 */
#define SPECIAL_CASE(U, FN, LOOP, FAM)                                                             \
    case U: LOOP(T, ST, TS_SPECIAL_##FAM(FN)(a, b)); break;
/* The series and recurrences (TS_KMS_BINARY_OPS: zeta, the incomplete gammas, the
 * polynomials) are one case of one loop calling special_f / special_d (not inlined), and on
 * integers every special op is: the functions' code then exists once, not once per dtype, loop
 * form and ISA variant (inlined everywhere, they took this file 132 s of a 2-core build's
 * compile). Those loops never vectorised (the functions loop and branch); the cheap ones
 * (TS_SPECIAL_BASIC_BINARY: hypot, copysign, xlogy, ...) stay inline on floats, where they do. */
#define SPECIAL_LABEL(U, FN, unused) case U:
#define SPECIAL_INT_CASES(LOOP, CONV)                                                              \
    TS_SPECIAL_BINARY(SPECIAL_LABEL, ~)                                                            \
    LOOP(T, ST, CONV(ts_d2i64(special_d(op_, (double)a, (double)b))));                            \
    break;
#define SPECIAL_D_CASE(U, FN, unused)                                                              \
    case U:                                                                                        \
        return TS_SPECIAL_d(FN)(a, b);
#define SPECIAL_F_CASE(U, FN, unused)                                                              \
    case U:                                                                                        \
        return TS_SPECIAL_f(FN)(a, b);
__attribute__((noinline)) static float special_f(ts_binary_op op, float a, float b) {
    switch (op) {
        TS_KMS_BINARY_OPS(SPECIAL_F_CASE, ~)
    default:
        return a;
    }
}
__attribute__((noinline)) static double special_d(ts_binary_op op, double a, double b) {
    switch (op) {
        TS_SPECIAL_BINARY(SPECIAL_D_CASE, ~)
    default:
        return a;
    }
}

/* Fused activation backwards: a is the gradient, b what the forward saved (kernel_math.h). */
#define BWD_CASES(LOOP, FAM)                                                                       \
    case TS_B_RELU_BWD: LOOP(T, ST, ts_relu_bwd_##FAM(a, b)); break;                               \
    case TS_B_SIGMOID_BWD: LOOP(T, ST, ts_sigmoid_bwd_##FAM(a, b)); break;                         \
    case TS_B_TANH_BWD: LOOP(T, ST, ts_tanh_bwd_##FAM(a, b)); break;                               \
    case TS_B_GELU_BWD: LOOP(T, ST, ts_gelu_bwd_##FAM(a, b)); break;                               \
    case TS_B_SILU_BWD: LOOP(T, ST, ts_silu_bwd_##FAM(a, b)); break;

/* The backwards are float ops; on integers (off the contract) they compute in double and truncate
 * so that the kernel stays total. */
#define INT_BWD(FN) ts_d2i64(ts_##FN##_bwd_d((double)a, (double)b))
#define INT_BWD_CASES(LOOP)                                                                        \
    case TS_B_RELU_BWD: LOOP(T, ST, b <= 0 ? 0 : a); break;                                        \
    case TS_B_SIGMOID_BWD: LOOP(T, ST, INT_BWD(sigmoid)); break;                                   \
    case TS_B_TANH_BWD: LOOP(T, ST, INT_BWD(tanh)); break;                                         \
    case TS_B_GELU_BWD: LOOP(T, ST, INT_BWD(gelu)); break;                                         \
    case TS_B_SILU_BWD: LOOP(T, ST, INT_BWD(silu)); break;

/* Integers: division and modulo by zero give 0 (PyTorch raises; a kernel must not trap). */
#define INT_CASES(LOOP)                                                                            \
    case TS_B_ADD: LOOP(T, ST, IADD(a, b)); break;                                                 \
    case TS_B_SUB: LOOP(T, ST, ISUB(a, b)); break;                                                 \
    case TS_B_MUL: LOOP(T, ST, IMUL(a, b)); break;                                                 \
    case TS_B_DIV: LOOP(T, ST, ts_idiv_i64(a, b)); break;                                          \
    case TS_B_POW: LOOP(T, ST, ts_ipow_i64(a, b)); break;                                          \
    case TS_B_MAX: LOOP(T, ST, a > b ? a : b); break;                                              \
    case TS_B_MIN: LOOP(T, ST, a < b ? a : b); break;                                              \
    case TS_B_FMOD: LOOP(T, ST, ts_imod_i64(a, b)); break;                                         \
    case TS_B_RSUB: LOOP(T, ST, ISUB(b, a)); break;                                                \
    case TS_B_RDIV: LOOP(T, ST, ts_idiv_i64(b, a)); break;                                         \
    case TS_B_RPOW: LOOP(T, ST, ts_ipow_i64(b, a)); break;                                         \
    case TS_B_FLOORDIV: LOOP(T, ST, ts_ifloordiv_i64(a, b)); break;                                \
    case TS_B_REM: LOOP(T, ST, ts_irem_i64(a, b)); break;                                          \
    case TS_B_DIVTRUNC: LOOP(T, ST, ts_idiv_i64(a, b)); break;                                     \
    case TS_B_BITAND: LOOP(T, ST, a & b); break;                                                   \
    case TS_B_BITOR: LOOP(T, ST, a | b); break;                                                    \
    case TS_B_BITXOR: LOOP(T, ST, a ^ b); break;                                                   \
    case TS_B_LSHIFT: LOOP(T, ST, ISHL(a, b)); break;                                              \
    case TS_B_RSHIFT: LOOP(T, ST, ISHR(a, b)); break;                                              \
        CMP_CASES(LOOP)                                                                            \
        INT_BWD_CASES(LOOP)                                                                        \
        SPECIAL_INT_CASES(LOOP, ID)

/* uint64 computes in uint64_t: unsigned quotient, remainder, power and order */
#define U64_CASES(LOOP)                                                                            \
    case TS_B_ADD: LOOP(T, ST, a + b); break;                                                      \
    case TS_B_SUB: LOOP(T, ST, a - b); break;                                                      \
    case TS_B_MUL: LOOP(T, ST, a * b); break;                                                      \
    case TS_B_DIV: LOOP(T, ST, ts_udiv_u64(a, b)); break;                                          \
    case TS_B_POW: LOOP(T, ST, ts_upow_u64(a, b)); break;                                          \
    case TS_B_MAX: LOOP(T, ST, a > b ? a : b); break;                                              \
    case TS_B_MIN: LOOP(T, ST, a < b ? a : b); break;                                              \
    case TS_B_FMOD: LOOP(T, ST, ts_umod_u64(a, b)); break;                                         \
    case TS_B_RSUB: LOOP(T, ST, b - a); break;                                                     \
    case TS_B_RDIV: LOOP(T, ST, ts_udiv_u64(b, a)); break;                                         \
    case TS_B_RPOW: LOOP(T, ST, ts_upow_u64(b, a)); break;                                         \
    case TS_B_FLOORDIV: LOOP(T, ST, ts_udiv_u64(a, b)); break;                                     \
    case TS_B_REM: LOOP(T, ST, ts_umod_u64(a, b)); break;                                          \
    case TS_B_DIVTRUNC: LOOP(T, ST, ts_udiv_u64(a, b)); break;                                     \
    case TS_B_BITAND: LOOP(T, ST, a & b); break;                                                   \
    case TS_B_BITOR: LOOP(T, ST, a | b); break;                                                    \
    case TS_B_BITXOR: LOOP(T, ST, a ^ b); break;                                                   \
    case TS_B_LSHIFT: LOOP(T, ST, b >= 64 ? 0 : a << b); break;                                    \
    case TS_B_RSHIFT: LOOP(T, ST, b >= 64 ? 0 : a >> b); break;                                    \
        CMP_CASES(LOOP)                                                                            \
        SPECIAL_INT_CASES(LOOP, (uint64_t))

/* ---------------------------------------------------------------- per-dtype runs
 * LD / ST (load into and store from the compute type) are defined around each instantiation. */
typedef struct bin_ctx {
    ts_binary_op op;
    const ts_vec_kernels *vk;
    ts_dtype dt;  /* the inputs' */
    ts_dtype dta, dtb; /* binary_widening: each operand's (float32 or a half dtype) */
    int pow_kind; /* scalar POW on floats: one of POW_* */
    double sd;    /* the scalar for f64 */
    float sf;     /* the scalar for f32, f16, bf16 (PyTorch's opmath: not rounded to f16) */
    float sf_cmp; /* comparisons: the scalar rounded to the tensor's dtype, as PyTorch casts it */
    int64_t si;   /* integers and bool: the scalar cast to the tensor's dtype */
} bin_ctx;

/* PyTorch's pow_tensor_scalar shortcuts (faster; sqrt/rsqrt where PyTorch uses them) */
enum { POW_GENERIC, POW_ONE, POW_SQRT, POW_SQUARE, POW_CUBE, POW_RSQRT, POW_RECIP, POW_RECIP_SQUARE };

static bool is_cmp(ts_binary_op op) { return op >= TS_B_EQ && op <= TS_B_GE; }
/* ops whose output is bool */
static bool bool_out(ts_binary_op op) { return is_cmp(op) || op == TS_B_AND || op == TS_B_OR; }
static bool vec_bwd(ts_binary_op op) { return op == TS_B_GELU_BWD || op == TS_B_SILU_BWD; }

/* gelu's and silu's backward on f32: through vk, in chunks unless every run is dense */
static void binary_vec_bwd(const bin_ctx *ctx, char *const *p, const int64_t *s, int64_t n) {
    const ts_vec_kernels *vk = ctx->vk;
    if (s[0] == 4 && s[1] == 4 && s[2] == 4) {
        vk->bwd_f32(ctx->op, (float *)p[0], (const float *)p[1], (const float *)p[2], n);
        return;
    }
    float gb[BIN_CHUNK], xb[BIN_CHUNK];
    for (int64_t i = 0; i < n; i += BIN_CHUNK) {
        const int64_t m = n - i < BIN_CHUNK ? n - i : BIN_CHUNK;
        ts_vec_load_f32(vk, gb, p[1] + i * s[1], TS_F32, s[1], m);
        ts_vec_load_f32(vk, xb, p[2] + i * s[2], TS_F32, s[2], m);
        vk->bwd_f32(ctx->op, gb, gb, xb, m);
        ts_vec_store_f32(vk, p[0] + i * s[0], TS_F32, s[0], gb, m);
    }
}

#define DEFINE_FLOAT(TAG, CT_, FAM, BVAL, BCMP, VEC)                                               \
    TS_CPU_BODY void binary_##TAG##_body(void *vctx, char *const *p, const int64_t *s,             \
                                         int64_t n) {                                              \
        typedef ts_cpu_t_##TAG T;                                                                  \
        typedef CT_ CT;                                                                            \
        if (VEC && vec_bwd(((const bin_ctx *)vctx)->op)) {                                         \
            binary_vec_bwd((const bin_ctx *)vctx, p, s, n);                                        \
            return;                                                                                \
        }                                                                                          \
        const ts_binary_op op_ = ((const bin_ctx *)vctx)->op;                                      \
        switch (op_) {                                                                             \
        case TS_B_POW: BIN_LOOP(T, ST, M_##FAM##_POW(a, b)); break;                                \
            FLOAT_CASES(BIN_LOOP, FAM)                                                             \
            CMP_CASES(BIN_LOOP)                                                                    \
        default:                                                                                   \
            break;                                                                                 \
        }                                                                                          \
    }                                                                                              \
    TS_CPU_SEG_VARIANTS(binary_##TAG)                                                              \
    TS_CPU_BODY void scalar_##TAG##_body(void *vctx, char *const *p, const int64_t *s,             \
                                         int64_t n) {                                              \
        typedef ts_cpu_t_##TAG T;                                                                  \
        typedef CT_ CT;                                                                            \
        const bin_ctx *ctx = (const bin_ctx *)vctx;                                                \
        if (VEC && vec_bwd(ctx->op)) { /* off the contract: scalar forms of the backwards */        \
            float xs[1] = {ctx->sf};                                                               \
            char *const q[3] = {p[0], p[1], (char *)xs};                                           \
            const int64_t qs[3] = {s[0], s[1], 0};                                                 \
            binary_vec_bwd(ctx, q, qs, n);                                                         \
            return;                                                                                \
        }                                                                                          \
        const CT bval = is_cmp(ctx->op) ? (CT)ctx->BCMP : (CT)ctx->BVAL;                           \
        const ts_binary_op op_ = ctx->op;                                                          \
        switch (op_) {                                                                             \
        case TS_B_POW:                                                                             \
            switch (ctx->pow_kind) {                                                               \
            case POW_ONE: SCALAR_LOOP(T, ST, a); break;                                            \
            case POW_SQRT: SCALAR_LOOP(T, ST, M_##FAM##_SQRT(a)); break;                           \
            case POW_SQUARE: SCALAR_LOOP(T, ST, a * a); break;                                     \
            case POW_CUBE: SCALAR_LOOP(T, ST, a * a * a); break;                                   \
            case POW_RSQRT: SCALAR_LOOP(T, ST, ts_rsqrt_##FAM(a)); break;                          \
            case POW_RECIP: SCALAR_LOOP(T, ST, (CT)1 / a); break;                                  \
            case POW_RECIP_SQUARE: SCALAR_LOOP(T, ST, (CT)1 / (a * a)); break;                     \
            default:                                                                               \
                SCALAR_LOOP(T, ST, M_##FAM##_POW(a, b));                                           \
                break;                                                                             \
            }                                                                                      \
            break;                                                                                 \
            FLOAT_CASES(SCALAR_LOOP, FAM)                                                          \
            CMP_CASES(SCALAR_LOOP)                                                                 \
        default:                                                                                   \
            break;                                                                                 \
        }                                                                                          \
    }                                                                                              \
    TS_CPU_SEG_VARIANTS(scalar_##TAG)

/* integer dtypes compute in CT: int64_t, or uint64_t for uint64 (CASES: INT_CASES, U64_CASES) */
#define DEFINE_INTEGER(TAG, CT_, CASES)                                                            \
    TS_CPU_BODY void binary_##TAG##_body(void *vctx, char *const *p, const int64_t *s,             \
                                         int64_t n) {                                              \
        typedef ts_cpu_t_##TAG T;                                                                  \
        typedef CT_ CT;                                                                            \
        const ts_binary_op op_ = ((const bin_ctx *)vctx)->op;                                      \
        switch (op_) {                                                                             \
            CASES(BIN_LOOP)                                                                        \
        default:                                                                                   \
            break;                                                                                 \
        }                                                                                          \
    }                                                                                              \
    TS_CPU_SEG_VARIANTS(binary_##TAG)                                                              \
    static void scalar_##TAG(void *vctx, char *const *p, const int64_t *s, int64_t n) {            \
        typedef ts_cpu_t_##TAG T;                                                                  \
        typedef CT_ CT;                                                                            \
        const bin_ctx *ctx = (const bin_ctx *)vctx;                                                \
        const CT bval = (CT)ctx->si;                                                               \
        const ts_binary_op op_ = ctx->op;                                                          \
        switch (op_) {                                                                             \
            CASES(SCALAR_LOOP)                                                                     \
        default:                                                                                   \
            break;                                                                                 \
        }                                                                                          \
    }
#define DEFINE_INT(TAG) DEFINE_INTEGER(TAG, int64_t, INT_CASES)
#define DEFINE_U64(TAG) DEFINE_INTEGER(TAG, uint64_t, U64_CASES)

/* clang-format on */
#define LD ID
#define ST ID
DEFINE_FLOAT(f32, float, f, sf, sf_cmp, 1)
DEFINE_FLOAT(f64, double, d, sd, sd, 0)
#undef LD
#undef ST

/* f16 and bf16: chunks of the inputs converted to float, computed by the f32 kernel (ns inputs:
 * 2 tensors or 1 and the scalar), the output converted back (bool outputs are written directly).
 */
static void half_chunks(const bin_ctx *ctx, ts_cpu_seg_fn f32, int ns, char *const *p,
                        const int64_t *s, int64_t n) {
    float ab[BIN_CHUNK], bb[BIN_CHUNK], ob[BIN_CHUNK];
    const bool direct = bool_out(ctx->op);
    for (int64_t i = 0; i < n; i += BIN_CHUNK) {
        const int64_t m = n - i < BIN_CHUNK ? n - i : BIN_CHUNK;
        ts_vec_load_f32(ctx->vk, ab, p[1] + i * s[1], ctx->dt, s[1], m);
        if (ns == 3) ts_vec_load_f32(ctx->vk, bb, p[2] + i * s[2], ctx->dt, s[2], m);
        char *const q[3] = {direct ? p[0] + i * s[0] : (char *)ob, (char *)ab, (char *)bb};
        const int64_t qs[3] = {direct ? s[0] : 4, 4, 4};
        f32((void *)ctx, q, qs, m);
        if (!direct) ts_vec_store_f32(ctx->vk, p[0] + i * s[0], ctx->dt, s[0], ob, m);
    }
}
static void binary_half(void *vctx, char *const *p, const int64_t *s, int64_t n) {
    half_chunks((const bin_ctx *)vctx, binary_f32, 3, p, s, n);
}
static void scalar_half(void *vctx, char *const *p, const int64_t *s, int64_t n) {
    half_chunks((const bin_ctx *)vctx, scalar_f32, 2, p, s, n);
}
#define LD LD_I
#define ST ST_I64
DEFINE_INT(i64)
#undef ST
#define ST ST_I32
DEFINE_INT(i32)
#undef ST
#define ST ST_U8
DEFINE_INT(u8)
#undef ST
#define ST ST_I8
DEFINE_INT(i8)
#undef ST
#define ST ST_I16
DEFINE_INT(i16)
#undef ST
#define ST ST_U16
DEFINE_INT(u16)
#undef ST
#define ST ST_U32
DEFINE_INT(u32)
#undef LD
#undef ST
#define LD LD_U
#define ST ST_U64
DEFINE_U64(u64)
#undef LD
#undef ST
/* bool: ADD is logical or, MUL logical and (the sum / product stored as != 0) */
#define LD LD_B8
#define ST TO_B8
DEFINE_INT(b8)
#undef LD
#undef ST

/* float32 out from operands that are float32 or f16 / bf16: a half operand widened chunk by
 * chunk into a buffer on the stack, a float32 one read where it is, the float32 loop on them */
static void widening_chunks(void *vctx, char *const *p, const int64_t *s, int64_t n) {
    const bin_ctx *ctx = vctx;
    float ab[BIN_CHUNK], bb[BIN_CHUNK];
    for (int64_t i = 0; i < n; i += BIN_CHUNK) {
        const int64_t m = n - i < BIN_CHUNK ? n - i : BIN_CHUNK;
        char *q[3] = {p[0] + i * s[0], p[1] + i * s[1], p[2] + i * s[2]};
        int64_t qs[3] = {s[0], s[1], s[2]};
        if (ctx->dta != TS_F32) {
            ts_vec_load_f32(ctx->vk, ab, q[1], ctx->dta, s[1], m);
            q[1] = (char *)ab, qs[1] = 4;
        }
        if (ctx->dtb != TS_F32) {
            ts_vec_load_f32(ctx->vk, bb, q[2], ctx->dtb, s[2], m);
            q[2] = (char *)bb, qs[2] = 4;
        }
        binary_f32((void *)ctx, q, qs, m);
    }
}

/* indexed by dtype - TS_F32, in ts_dtype order */
static const ts_cpu_seg_fn binary_fns[TS_DTYPE_COUNT - 1] = {
    binary_f32, binary_f64, binary_half, binary_half, binary_i64, binary_i32, binary_u8,
    binary_b8,  binary_i8,  binary_i16,  binary_u16,  binary_u32, binary_u64};
static const ts_cpu_seg_fn scalar_fns[TS_DTYPE_COUNT - 1] = {
    scalar_f32, scalar_f64, scalar_half, scalar_half, scalar_i64, scalar_i32, scalar_u8,
    scalar_b8,  scalar_i8,  scalar_i16,  scalar_u16,  scalar_u32, scalar_u64};

void tsi_cpu_binary(const ts_backend *be, int index, ts_binary_op op, const ts_kview *out,
                    const ts_kview *a, const ts_kview *b) {
    (void)be;
    (void)index;
    bin_ctx ctx = {.op = op, .vk = tsi_vec_kernels_get(), .dt = a->dtype};
    const ts_kview *views[3] = {out, a, b};
    ts_cpu_iter it;
    ts_cpu_iter_init(&it, 3, views);
    ts_cpu_iter_run(&it, binary_fns[a->dtype - TS_F32], &ctx);
}

void tsi_cpu_binary_widening(const ts_backend *be, int index, ts_binary_op op, const ts_kview *out,
                             const ts_kview *a, const ts_kview *b) {
    (void)be, (void)index;
    bin_ctx ctx = {
        .op = op, .vk = tsi_vec_kernels_get(), .dt = TS_F32, .dta = a->dtype, .dtb = b->dtype};
    const ts_kview *views[3] = {out, a, b};
    ts_cpu_iter it;
    ts_cpu_iter_init(&it, 3, views);
    ts_cpu_iter_run(&it, widening_chunks, &ctx);
}

void tsi_cpu_binary_scalar(const ts_backend *be, int index, ts_binary_op op, const ts_kview *out,
                           const ts_kview *a, double s) {
    (void)be;
    (void)index;
    bin_ctx ctx = {.op = op,
                   .vk = tsi_vec_kernels_get(),
                   .dt = a->dtype,
                   .pow_kind = POW_GENERIC,
                   .sd = s,
                   .sf = (float)s,
                   .sf_cmp = (float)s};
    if (a->dtype == TS_F16) ctx.sf_cmp = ts_f16_to_f32(ts_f32_to_f16((float)s));
    if (a->dtype == TS_BF16) ctx.sf_cmp = ts_bf16_to_f32(ts_f32_to_bf16((float)s));
    if (!(a->dtype == TS_F32 || a->dtype == TS_F64 || a->dtype == TS_F16 || a->dtype == TS_BF16))
        ctx.si = ts_scalar_as_int(a->dtype, s);
    if (op == TS_B_POW) {
        ctx.pow_kind = s == 0.5    ? POW_SQRT
                       : s == 1.0  ? POW_ONE
                       : s == 2.0  ? POW_SQUARE
                       : s == 3.0  ? POW_CUBE
                       : s == -0.5 ? POW_RSQRT
                       : s == -1.0 ? POW_RECIP
                       : s == -2.0 ? POW_RECIP_SQUARE
                                   : POW_GENERIC;
    }
    const ts_kview *views[2] = {out, a};
    ts_cpu_iter it;
    ts_cpu_iter_init(&it, 2, views);
    ts_cpu_iter_run(&it, scalar_fns[a->dtype - TS_F32], &ctx);
}

/* ---------------------------------------------------------------- where */
/* p[0] out, p[1] cond (bool), p[2] a, p[3] b: a bit select by element size. Contiguous, and
 * with a or b one broadcast value (where(c, x, 0.0)), the select is a mask of bits: no branch
 * for a random condition to mispredict, and the loops vectorise (bench_surface's where_scalar
 * at 1e5 and 1e7: 10-20x, bench/results/SURFACE.md). */
#define WHERE_SEG(NAME, T)                                                                         \
    static void NAME(void *ctx, char *const *p, const int64_t *s, int64_t n) {                     \
        (void)ctx;                                                                                 \
        const int64_t sz = (int64_t)sizeof(T);                                                     \
        if (s[0] == sz && s[1] == 1 && (s[2] == sz || s[2] == 0) && (s[3] == sz || s[3] == 0)) {   \
            T *o = (T *)p[0];                                                                      \
            const uint8_t *c = (const uint8_t *)p[1];                                              \
            const T *x = (const T *)p[2], *y = (const T *)p[3];                                    \
            if (s[2] && s[3]) {                                                                    \
                for (int64_t i = 0; i < n; i++) {                                                  \
                    const T m = (T)((T)0 - (T)(c[i] != 0));                                        \
                    o[i] = (T)((x[i] & m) | (y[i] & (T)~m));                                       \
                }                                                                                  \
            } else if (s[2]) {                                                                     \
                const T yv = *y;                                                                   \
                for (int64_t i = 0; i < n; i++) {                                                  \
                    const T m = (T)((T)0 - (T)(c[i] != 0));                                        \
                    o[i] = (T)((x[i] & m) | (yv & (T)~m));                                         \
                }                                                                                  \
            } else {                                                                               \
                const T xv = *x;                                                                   \
                const int64_t iy = s[3] ? 1 : 0;                                                   \
                for (int64_t i = 0; i < n; i++) {                                                  \
                    const T m = (T)((T)0 - (T)(c[i] != 0));                                        \
                    o[i] = (T)((xv & m) | (y[i * iy] & (T)~m));                                    \
                }                                                                                  \
            }                                                                                      \
        } else {                                                                                   \
            char *o = p[0];                                                                        \
            const char *c = p[1], *x = p[2], *y = p[3];                                            \
            for (int64_t i = 0; i < n; i++, o += s[0], c += s[1], x += s[2], y += s[3])            \
                *(T *)o = *(const uint8_t *)c ? *(const T *)x : *(const T *)y;                     \
        }                                                                                          \
    }
WHERE_SEG(where1, uint8_t)
WHERE_SEG(where2, uint16_t)
WHERE_SEG(where4, uint32_t)
WHERE_SEG(where8, uint64_t)

void tsi_cpu_where(const ts_backend *be, int index, const ts_kview *out, const ts_kview *cond,
                   const ts_kview *a, const ts_kview *b) {
    (void)be;
    (void)index;
    const ts_kview *views[4] = {out, cond, a, b};
    ts_cpu_iter it;
    ts_cpu_iter_init(&it, 4, views);
    ts_cpu_seg_fn fn;
    switch (ts_cpu_dtype_size(out->dtype)) {
    case 8:
        fn = where8;
        break;
    case 4:
        fn = where4;
        break;
    case 2:
        fn = where2;
        break;
    default:
        fn = where1;
        break;
    }
    ts_cpu_iter_run(&it, fn, NULL);
}
