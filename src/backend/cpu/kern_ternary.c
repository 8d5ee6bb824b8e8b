/* kern_ternary.c — CPU pointwise ops of three operands (backend.h's ternary: addcmul, addcdiv,
 * lerp), one pass over broadcast views with kernel_math.h's ts_ternary_f / _d. f32 and f64
 * compute in their own type with a dense loop per op the compiler vectorises (AVX2 and baseline
 * variants, clones.h); f16 and bf16 convert chunks to float (F16C where the CPU has it), compute
 * as f32 does and convert back. */
#include "backend/cpu/cpu_kernels.h"
#include "backend/cpu/cpu_loops.h"
#include "backend/cpu/vec_kernels.h"
#include "backend/kernel_math.h"

_Static_assert(TS_T_ADDCMUL == 0 && TS_T_ADDCDIV == 1 && TS_T_LERP == 2 && TS_T_LERP_SCALAR == 3,
               "kernel_math.h's ts_ternary_f numbers the ops as backend.h does");

typedef struct ter_ctx {
    ts_ternary_op op;
    const ts_vec_kernels *vk;
    ts_dtype dt;
    float pf; /* p for f32, f16, bf16 (PyTorch's opmath: float) */
    double pd;
} ter_ctx;

/* floats per chunk of the f16 / bf16 path (on the stack) */
#define TER_CHUNK 256

/* one run of op OPC (a constant, so the switch folds away): p[0] out, p[1..3] a, b, c */
#define TER_LOOP(T, FN, OPC, PV)                                                                   \
    do {                                                                                           \
        if (s[0] == (int64_t)sizeof(T) && s[1] == (int64_t)sizeof(T) &&                            \
            s[2] == (int64_t)sizeof(T) && s[3] == (int64_t)sizeof(T)) {                            \
            T *o_ = (T *)p[0];                                                                     \
            const T *a_ = (const T *)p[1], *b_ = (const T *)p[2], *c_ = (const T *)p[3];           \
            for (int64_t i = 0; i < n; i++) o_[i] = FN(OPC, a_[i], b_[i], c_[i], PV);              \
        } else {                                                                                   \
            char *o_ = p[0];                                                                       \
            const char *a_ = p[1], *b_ = p[2], *c_ = p[3];                                         \
            for (int64_t i = 0; i < n; i++, o_ += s[0], a_ += s[1], b_ += s[2], c_ += s[3])        \
                *(T *)o_ = FN(OPC, *(const T *)a_, *(const T *)b_, *(const T *)c_, PV);            \
        }                                                                                          \
    } while (0)

/* (the scalar in a local: read through ctx in the loop, it might alias the output's stores, and
 * the loop would not vectorise) */
#define DEFINE_TERNARY(TAG, FN, PV)                                                                \
    TS_CPU_BODY void ternary_##TAG##_body(void *vctx, char *const *p, const int64_t *s,            \
                                          int64_t n) {                                             \
        const ter_ctx *ctx = (const ter_ctx *)vctx;                                                \
        typedef ts_cpu_t_##TAG T;                                                                  \
        const T pv = ctx->PV;                                                                      \
        switch (ctx->op) {                                                                         \
        case TS_T_ADDCMUL:                                                                         \
            TER_LOOP(T, FN, 0, pv);                                                                \
            break;                                                                                 \
        case TS_T_ADDCDIV:                                                                         \
            TER_LOOP(T, FN, 1, pv);                                                                \
            break;                                                                                 \
        case TS_T_LERP:                                                                            \
            TER_LOOP(T, FN, 2, pv);                                                                \
            break;                                                                                 \
        default:                                                                                   \
            TER_LOOP(T, FN, 3, pv);                                                                \
            break;                                                                                 \
        }                                                                                          \
    }                                                                                              \
    TS_CPU_SEG_VARIANTS(ternary_##TAG)

/* clang-format off */
DEFINE_TERNARY(f32, ts_ternary_f, pf)
DEFINE_TERNARY(f64, ts_ternary_d, pd)
/* clang-format on */

/* f16 and bf16: chunks of the three operands converted to float, the f32 loop, converted back */
static void ternary_half(void *vctx, char *const *p, const int64_t *s, int64_t n) {
    const ter_ctx *ctx = vctx;
    float ab[TER_CHUNK], bb[TER_CHUNK], cb[TER_CHUNK], ob[TER_CHUNK];
    const bool read_c = ctx->op != TS_T_LERP_SCALAR;
    for (int64_t i = 0; i < n; i += TER_CHUNK) {
        const int64_t m = n - i < TER_CHUNK ? n - i : TER_CHUNK;
        ts_vec_load_f32(ctx->vk, ab, p[1] + i * s[1], ctx->dt, s[1], m);
        ts_vec_load_f32(ctx->vk, bb, p[2] + i * s[2], ctx->dt, s[2], m);
        if (read_c) ts_vec_load_f32(ctx->vk, cb, p[3] + i * s[3], ctx->dt, s[3], m);
        char *const q[4] = {(char *)ob, (char *)ab, (char *)bb, read_c ? (char *)cb : (char *)bb};
        const int64_t qs[4] = {4, 4, 4, 4};
        ternary_f32(vctx, q, qs, m);
        ts_vec_store_f32(ctx->vk, p[0] + i * s[0], ctx->dt, s[0], ob, m);
    }
}

void tsi_cpu_ternary(const ts_backend *be, int index, ts_ternary_op op, const ts_kview *out,
                     const ts_kview *a, const ts_kview *b, const ts_kview *c, double pv) {
    (void)be;
    (void)index;
    ter_ctx ctx = {op, tsi_vec_kernels_get(), out->dtype, (float)pv, pv};
    /* lerp with a scalar weight reads no c: b in its place keeps the walk in bounds */
    const ts_kview *views[4] = {out, a, b, op == TS_T_LERP_SCALAR ? b : c};
    ts_cpu_iter it;
    ts_cpu_iter_init(&it, 4, views);
    ts_cpu_seg_fn fn;
    switch (out->dtype) {
    case TS_F32:
        fn = ternary_f32;
        break;
    case TS_F64:
        fn = ternary_f64;
        break;
    case TS_F16:
    case TS_BF16:
        fn = ternary_half;
        break;
    default:
        return; /* float dtypes only (backend.h); the front end refuses others first */
    }
    ts_cpu_iter_run(&it, fn, &ctx);
}
