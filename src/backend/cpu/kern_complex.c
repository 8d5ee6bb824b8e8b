/* kern_complex.c — the CPU's complex64 / complex128 add, sub, mul and div (the binary slot on a
 * complex dtype) and abs (the unary slot on one): kern_complex_impl.h compiled for 16-byte vectors
 * (the x86-64 baseline), AVX2 and AVX-512, picked at each call by ts_cpu_isa_get(); every variant
 * gives the bits of kernel_math_complex.h's scalar formulas, which CUDA shares. */
#include "backend/cpu/kern_complex.h"

#include <math.h>
#include <string.h>

#include "backend/cpu/cpu_isa.h"
#include "backend/cpu/cpu_kernels.h"
#include "backend/cpu/cpu_loops.h"
#include "backend/kernel_math_complex.h"

/* clang-format off */
typedef float cx_v4f __attribute__((vector_size(16)));
typedef int32_t cx_v4i __attribute__((vector_size(16)));
typedef double cx_v2d __attribute__((vector_size(16)));
typedef int64_t cx_v2l __attribute__((vector_size(16)));

#define FT double
#define SUF f64
#define VF cx_v2d
#define VI cx_v2l
#define W 2
#define DUP_RE ((VI){0, 0})
#define DUP_IM ((VI){1, 1})
#define SWAP ((VI){1, 0})
#define BLEND ((VI){0, 3})
#define FN(x) cx_gen64_##x
#include "backend/cpu/kern_complex_impl.h"
#undef FT
#undef SUF
#undef VF
#undef VI
#undef W
#undef DUP_RE
#undef DUP_IM
#undef SWAP
#undef BLEND
#undef FN

#define FT float
#define SUF f32
#define VF cx_v4f
#define VI cx_v4i
#define W 4
#define DUP_RE ((VI){0, 0, 2, 2})
#define DUP_IM ((VI){1, 1, 3, 3})
#define SWAP ((VI){1, 0, 3, 2})
#define BLEND ((VI){0, 5, 2, 7})
#define FN(x) cx_gen32_##x
#include "backend/cpu/kern_complex_impl.h"
#undef VF
#undef VI
#undef W
#undef DUP_RE
#undef DUP_IM
#undef SWAP
#undef BLEND
#undef FN

/* the AVX2 / AVX-512 variants with GCC; clang (the fuzz build) keeps the 16-byte ones */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define CX_X86 1
TS_ISA_PRAGMA_TARGET(TS_ISA_TARGET_AVX2)
typedef float cx_v8f __attribute__((vector_size(32)));
typedef int32_t cx_v8i __attribute__((vector_size(32)));
#define VF cx_v8f
#define VI cx_v8i
#define W 8
#define DUP_RE ((VI){0, 0, 2, 2, 4, 4, 6, 6})
#define DUP_IM ((VI){1, 1, 3, 3, 5, 5, 7, 7})
#define SWAP ((VI){1, 0, 3, 2, 5, 4, 7, 6})
#define BLEND ((VI){0, 9, 2, 11, 4, 13, 6, 15})
#define FN(x) cx_avx2_32_##x
#include "backend/cpu/kern_complex_impl.h"
#undef VF
#undef VI
#undef W
#undef DUP_RE
#undef DUP_IM
#undef SWAP
#undef BLEND
#undef FN
#undef FT
#undef SUF
#define FT double
#define SUF f64
typedef double cx_v4d __attribute__((vector_size(32)));
typedef int64_t cx_v4l __attribute__((vector_size(32)));
#define VF cx_v4d
#define VI cx_v4l
#define W 4
#define DUP_RE ((VI){0, 0, 2, 2})
#define DUP_IM ((VI){1, 1, 3, 3})
#define SWAP ((VI){1, 0, 3, 2})
#define BLEND ((VI){0, 5, 2, 7})
#define FN(x) cx_avx2_64_##x
#include "backend/cpu/kern_complex_impl.h"
#undef VF
#undef VI
#undef W
#undef DUP_RE
#undef DUP_IM
#undef SWAP
#undef BLEND
#undef FN
#pragma GCC pop_options

TS_ISA_PRAGMA_TARGET(TS_ISA_TARGET_AVX512)
typedef double cx_v8d __attribute__((vector_size(64)));
typedef int64_t cx_v8l __attribute__((vector_size(64)));
#define VF cx_v8d
#define VI cx_v8l
#define W 8
#define DUP_RE ((VI){0, 0, 2, 2, 4, 4, 6, 6})
#define DUP_IM ((VI){1, 1, 3, 3, 5, 5, 7, 7})
#define SWAP ((VI){1, 0, 3, 2, 5, 4, 7, 6})
#define BLEND ((VI){0, 9, 2, 11, 4, 13, 6, 15})
#define FN(x) cx_avx512_64_##x
#include "backend/cpu/kern_complex_impl.h"
#undef VF
#undef VI
#undef W
#undef DUP_RE
#undef DUP_IM
#undef SWAP
#undef BLEND
#undef FN
#undef FT
#undef SUF
#define FT float
#define SUF f32
typedef float cx_v16f __attribute__((vector_size(64)));
typedef int32_t cx_v16i __attribute__((vector_size(64)));
#define VF cx_v16f
#define VI cx_v16i
#define W 16
#define DUP_RE ((VI){0, 0, 2, 2, 4, 4, 6, 6, 8, 8, 10, 10, 12, 12, 14, 14})
#define DUP_IM ((VI){1, 1, 3, 3, 5, 5, 7, 7, 9, 9, 11, 11, 13, 13, 15, 15})
#define SWAP ((VI){1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14})
#define BLEND ((VI){0, 17, 2, 19, 4, 21, 6, 23, 8, 25, 10, 27, 12, 29, 14, 31})
#define FN(x) cx_avx512_32_##x
#include "backend/cpu/kern_complex_impl.h"
#undef VF
#undef VI
#undef W
#undef DUP_RE
#undef DUP_IM
#undef SWAP
#undef BLEND
#undef FN
#undef FT
#undef SUF
#pragma GCC pop_options
#else
#undef FT
#undef SUF
#endif
/* clang-format on */

typedef struct cx_ctx {
    ts_binary_op op;
    ts_cpu_isa isa;
} cx_ctx;

static void cx_seg32(void *vctx, char *const *p, const int64_t *s, int64_t n) {
    const cx_ctx *c = vctx;
#ifdef CX_X86
    if (c->isa == TS_ISA_AVX512) return cx_avx512_32_seg(c->op, p, s, n);
    if (c->isa == TS_ISA_AVX2) return cx_avx2_32_seg(c->op, p, s, n);
#endif
    cx_gen32_seg(c->op, p, s, n);
}

static void cx_seg64(void *vctx, char *const *p, const int64_t *s, int64_t n) {
    const cx_ctx *c = vctx;
#ifdef CX_X86
    if (c->isa == TS_ISA_AVX512) return cx_avx512_64_seg(c->op, p, s, n);
    if (c->isa == TS_ISA_AVX2) return cx_avx2_64_seg(c->op, p, s, n);
#endif
    cx_gen64_seg(c->op, p, s, n);
}

static void cx_abs32(void *vctx, char *const *p, const int64_t *s, int64_t n) {
    const cx_ctx *c = vctx;
#ifdef CX_X86
    if (c->isa == TS_ISA_AVX512) return cx_avx512_32_abs_seg(p, s, n);
    if (c->isa == TS_ISA_AVX2) return cx_avx2_32_abs_seg(p, s, n);
#endif
    (void)c;
    cx_gen32_abs_seg(p, s, n);
}

static void cx_abs64(void *vctx, char *const *p, const int64_t *s, int64_t n) {
    const cx_ctx *c = vctx;
#ifdef CX_X86
    if (c->isa == TS_ISA_AVX512) return cx_avx512_64_abs_seg(p, s, n);
    if (c->isa == TS_ISA_AVX2) return cx_avx2_64_abs_seg(p, s, n);
#endif
    (void)c;
    cx_gen64_abs_seg(p, s, n);
}

void tsi_cpu_unary_cx(const ts_backend *be, int index, ts_unary_op op, const ts_kview *out,
                      const ts_kview *a, double p0, double p1) {
    if (a->dtype != TS_C64 && a->dtype != TS_C128) {
        tsi_cpu_unary(be, index, op, out, a, p0, p1);
        return;
    }
    if (op != TS_U_ABS) { /* the front end sends only abs: never a number */
        tsi_cpu_fill(be, index, out, NAN);
        return;
    }
    cx_ctx ctx = {.op = TS_B_ADD, .isa = ts_cpu_isa_get()};
    const ts_kview *views[2] = {out, a};
    ts_cpu_iter it;
    ts_cpu_iter_init(&it, 2, views);
    ts_cpu_iter_run(&it, a->dtype == TS_C64 ? cx_abs32 : cx_abs64, &ctx);
}

bool tsi_cpu_complex_binary_ok(ts_binary_op op) {
    return op == TS_B_ADD || op == TS_B_SUB || op == TS_B_MUL || op == TS_B_DIV;
}

void tsi_cpu_binary_cx(const ts_backend *be, int index, ts_binary_op op, const ts_kview *out,
                       const ts_kview *a, const ts_kview *b) {
    if (a->dtype != TS_C64 && a->dtype != TS_C128) {
        tsi_cpu_binary(be, index, op, out, a, b);
        return;
    }
    if (!tsi_cpu_complex_binary_ok(op)) { /* the front end sends only these: never a number */
        tsi_cpu_fill(be, index, out, NAN);
        return;
    }
    cx_ctx ctx = {.op = op, .isa = ts_cpu_isa_get()};
    const ts_kview *views[3] = {out, a, b};
    ts_cpu_iter it;
    ts_cpu_iter_init(&it, 3, views);
    ts_cpu_iter_run(&it, a->dtype == TS_C64 ? cx_seg32 : cx_seg64, &ctx);
}
