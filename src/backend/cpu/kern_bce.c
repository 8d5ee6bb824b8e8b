/* kern_bce.c — CPU binary_cross_entropy (backend.h's bce): the unweighted loss of every element
 * with bce_math.h's formula and, in the same pass, its domain test (input and target in [0, 1]),
 * folded into an int per run so that the front end refuses bad values without reading them again.
 * f32, f16 and bf16 go in chunks converted to float (ts_vec_load_f32: a copy for f32), log x from
 * the vectorised table (vec_kernels.h, the values of ts_log's own kernel), log1p(-x) from libm;
 * f16 and bf16 round each step to their type as PyTorch's kernel does: the loss has the bits of
 * PyTorch's, and of the composition of public ops it replaces, in all three. f64 computes in
 * double with libm.
 * Threads (cpu_loops.h) or their runs' findings into one int with an atomic or. */
#include "backend/bce_math.h"
#include "backend/cpu/cpu_kernels.h"
#include "backend/cpu/cpu_loops.h"
#include "backend/cpu/vec_kernels.h"

typedef struct bce_ctx {
    const ts_vec_kernels *vk;
    ts_dtype dt;
    int bad; /* TS_BCE_BAD_* bits, or'ed atomically */
} bce_ctx;

/* floats per chunk (on the stack) */
#define BCE_CHUNK 256

static void note_bad(bce_ctx *ctx, int bad) {
    if (bad) __atomic_fetch_or(&ctx->bad, bad, __ATOMIC_RELAXED);
}

/* p[0] out, p[1] input, p[2] target; f32, f16 or bf16 */
static void bce_float(void *vctx, char *const *p, const int64_t *s, int64_t n) {
    bce_ctx *ctx = vctx;
    float xb[BCE_CHUNK], tb[BCE_CHUNK], lx[BCE_CHUNK], ob[BCE_CHUNK];
    int bad = 0;
    for (int64_t i = 0; i < n; i += BCE_CHUNK) {
        const int64_t m = n - i < BCE_CHUNK ? n - i : BCE_CHUNK;
        ts_vec_load_f32(ctx->vk, xb, p[1] + i * s[1], ctx->dt, s[1], m);
        ts_vec_load_f32(ctx->vk, tb, p[2] + i * s[2], ctx->dt, s[2], m);
        ctx->vk->unary_f32(TS_U_LOG, lx, xb, m);
        for (int64_t j = 0; j < m; j++) bad |= ts_bce_bad_f(xb[j], tb[j]);
        if (ctx->dt == TS_F32) {
            for (int64_t j = 0; j < m; j++)
                ob[j] = ts_bce_from_logs_f(tb[j], lx[j], log1pf(-xb[j]));
        } else {
            float (*r)(float) = ctx->dt == TS_F16 ? ts_round_f16 : ts_round_bf16;
            for (int64_t j = 0; j < m; j++)
                ob[j] = ts_bce_from_logs_rounded(tb[j], lx[j], log1pf(-xb[j]), r);
        }
        ts_vec_store_f32(ctx->vk, p[0] + i * s[0], ctx->dt, s[0], ob, m);
    }
    note_bad(ctx, bad);
}

static void bce_f64(void *vctx, char *const *p, const int64_t *s, int64_t n) {
    int bad = 0;
    for (int64_t i = 0; i < n; i++) {
        const double x = *(const double *)(p[1] + i * s[1]), t = *(const double *)(p[2] + i * s[2]);
        bad |= ts_bce_bad_d(x, t);
        *(double *)(p[0] + i * s[0]) = ts_bce_d(x, t);
    }
    note_bad(vctx, bad);
}

int tsi_cpu_bce(const ts_backend *be, int index, const ts_kview *out, const ts_kview *x,
                const ts_kview *t) {
    (void)be;
    (void)index;
    bce_ctx ctx = {tsi_vec_kernels_get(), out->dtype, 0};
    ts_cpu_seg_fn fn;
    switch (out->dtype) {
    case TS_F32:
    case TS_F16:
    case TS_BF16:
        fn = bce_float;
        break;
    case TS_F64:
        fn = bce_f64;
        break;
    default:
        return 0; /* float dtypes only (backend.h); the front end refuses others first */
    }
    const ts_kview *views[3] = {out, x, t};
    ts_cpu_iter it;
    ts_cpu_iter_init(&it, 3, views);
    ts_cpu_iter_run(&it, fn, &ctx);
    return __atomic_load_n(&ctx.bad, __ATOMIC_RELAXED);
}
