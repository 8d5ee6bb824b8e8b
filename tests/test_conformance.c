/* test_conformance.c — backend conformance (DESIGN §9.2, ggml's test-backend-ops): every
 * elementwise and indexing kernel entry (memory, copy, fill, unary, binary, binary with a scalar,
 * where, ternary, index_select, gather, scatter_add, random, the grad scaler's) of every non-cpu
 * backend
 * against the cpu backend on the same inputs, with guard bytes around every output buffer and
 * strided outputs to catch stride bugs; and a backend with planted bugs must fail. Reductions,
 * softmax and matmul: test_conformance_reduce.c; the run over the backends:
 * support/conformance_run.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend_check.h"
#include "conformance_run.h"
#include "op_table.h"
#include "ts_test.h"

/* ------------------------------------------------------------------ launchers */
static void l_copy(const ts_backend *b, const ts_kview *o, const ts_kview *i, const void *p) {
    (void)p;
    b->copy(b, 0, &o[0], &i[0]);
}
static void l_fill(const ts_backend *b, const ts_kview *o, const ts_kview *i, const void *p) {
    KC(p);
    (void)i;
    b->fill(b, 0, &o[0], k->p0);
}
static void l_unary(const ts_backend *b, const ts_kview *o, const ts_kview *i, const void *p) {
    KC(p);
    b->unary(b, 0, (ts_unary_op)k->op, &o[0], &i[0], k->p0, k->p1);
}
static void l_binary(const ts_backend *b, const ts_kview *o, const ts_kview *i, const void *p) {
    KC(p);
    b->binary(b, 0, (ts_binary_op)k->op, &o[0], &i[0], &i[1]);
}
static void l_bscalar(const ts_backend *b, const ts_kview *o, const ts_kview *i, const void *p) {
    KC(p);
    b->binary_scalar(b, 0, (ts_binary_op)k->op, &o[0], &i[0], k->p0);
}
static void l_where(const ts_backend *b, const ts_kview *o, const ts_kview *i, const void *p) {
    (void)p;
    b->where(b, 0, &o[0], &i[0], &i[1], &i[2]);
}
static void l_ternary(const ts_backend *b, const ts_kview *o, const ts_kview *i, const void *p) {
    KC(p);
    b->ternary(b, 0, (ts_ternary_op)k->op, &o[0], &i[0], &i[1], &i[2], k->p0);
}
static void l_isel(const ts_backend *b, const ts_kview *o, const ts_kview *i, const void *p) {
    KC(p);
    b->index_select(b, 0, &o[0], &i[0], k->dim, &i[1]);
}
static void l_gather(const ts_backend *b, const ts_kview *o, const ts_kview *i, const void *p) {
    KC(p);
    b->gather(b, 0, &o[0], &i[0], k->dim, &i[1]);
}
static void l_scatter(const ts_backend *b, const ts_kview *o, const ts_kview *i, const void *p) {
    KC(p);
    b->scatter_add(b, 0, &o[0], k->dim, &i[0], &i[1]);
}
static void l_cdist(const ts_backend *b, const ts_kview *o, const ts_kview *i, const void *p) {
    KC(p);
    b->cdist(b, 0, &o[0], &i[0], &i[1], k->p0);
}
static void l_gather_dims(const ts_backend *b, const ts_kview *o, const ts_kview *i,
                          const void *p) {
    KC(p); /* the tables follow the input: i[1] for the last dim, i[2] for the one before */
    b->gather_dims(b, 0, &o[0], &i[0], k->dim, &i[1]);
}
static void l_random(const ts_backend *b, const ts_kview *o, const ts_kview *i, const void *p) {
    KC(p);
    (void)i;
    b->random(b, 0, (ts_random_kind)k->op, &o[0], k->p0, k->p1, 1234, 8);
}
static void l_memset(const ts_backend *b, const ts_kview *o, const ts_kview *i, const void *p) {
    KC(p);
    (void)i;
    b->memset_zero(b, 0, o[0].data, k->bytes);
}
static void l_d2d(const ts_backend *b, const ts_kview *o, const ts_kview *i, const void *p) {
    KC(p);
    b->copy_d2d(b, 0, o[0].data, 0, i[0].data, k->bytes);
}

static void l_amp_unscale(const ts_backend *b, const ts_kview *o, const ts_kview *i,
                          const void *p) {
    KC(p); /* k->op gradients in o[0..op), found_inf in o[op], inv_scale in i[0] */
    b->amp_unscale(b, 0, o, k->op, &o[k->op], &i[0]);
}
static void l_amp_update(const ts_backend *b, const ts_kview *o, const ts_kview *i, const void *p) {
    KC(p); /* scale o[0], growth tracker o[1], found_inf i[0]; interval in k->dim */
    b->amp_update_scale(b, 0, &o[0], &o[1], &i[0], k->p0, k->p1, k->dim);
}

static void l_roi(const ts_backend *b, const ts_kview *o, const ts_kview *i, const void *p) {
    KC(p); /* op 0 roi_align, 1 roi_pool; log: backward; dim: sampling ratio; nred: aligned */
    ts_roi_args a = {
        .rois = i[1], .spatial_scale = k->p0, .sampling_ratio = k->dim, .aligned = k->nred != 0};
    a.input = k->log ? o[0] : i[0];  /* backward: the input's gradient, accumulated */
    a.output = k->log ? i[0] : o[0]; /* backward: the output's gradient */
    if (k->op == 1) a.argmax = k->log ? i[2] : o[1];
    if (k->op == 0)
        b->roi_align(b, 0, &a, k->log);
    else
        b->roi_pool(b, 0, &a, k->log);
}

/* ------------------------------------------------------------------ cases */
static void test_memory(void) {
    bc_kernel_begin();
    for (int n = 1; n <= 1000; n += 333) {
        kctx k = {.bytes = (size_t)n};
        bc_call c = {.nout = 1, .out = {bc_mk(TS_U8, 1, (int64_t[]){n}, 0)}};
        bc_check(bc_what("memset_zero %d bytes", n), &c, l_memset, &k);
        bc_call d = one_in(bc_mk(TS_U8, 1, (int64_t[]){n}, 0), bc_mk(TS_U8, 1, (int64_t[]){n}, 0),
                           BC_ANY, 0);
        bc_check(bc_what("copy_d2d %d bytes", n), &d, l_d2d, &k);
    }
    bc_kernel_end("memory");
}

static void test_copy(void) {
    if (!bc_present("copy", bc_state.dev->copy)) return;
    bc_kernel_begin();
    for (int a = 0; a < BC_NDT; a++)
        for (int b = 0; b < BC_NDT; b++) {
            ts_dtype src = bc_dtypes[a], dst = bc_dtypes[b];
            /* values every conversion defines: no negative or fractional into u8 from floats */
            int kind = dst == TS_U8 ? BC_SMALLNN : BC_ANY;
            const char *sn = ts_dtype_name(src), *dn = ts_dtype_name(dst);
            bc_call c = one_in(bc_mk(dst, 2, S57, 0), bc_mk(src, 2, S57, 0), kind, 0);
            bc_check(bc_what("%s -> %s contiguous", sn, dn), &c, l_copy, NULL);
            c = one_in(bc_mk(dst, 2, S57, 2), bc_mk(src, 2, S57, 1), kind, 0);
            bc_check(bc_what("%s -> %s transposed into strided", sn, dn), &c, l_copy, NULL);
            c = one_in(bc_mk(dst, 2, S57, 0), bc_expand(bc_mk(src, 2, (int64_t[]){1, 7}, 0), S57),
                       kind, 0);
            bc_check(bc_what("%s -> %s broadcast source", sn, dn), &c, l_copy, NULL);
            c = one_in(BC_MK0(dst), BC_MK0(src), kind, 0);
            bc_check(bc_what("%s -> %s 0-dim", sn, dn), &c, l_copy, NULL);
            if (a == b || (src == TS_F32 && (dst == TS_F16 || dst == TS_BF16))) {
                c = one_in(bc_mk(dst, 2, SBIG, 0), bc_mk(src, 2, SBIG, 1), kind, 0);
                bc_check(bc_what("%s -> %s large transposed", sn, dn), &c, l_copy, NULL);
            }
        }
    bc_kernel_end("copy");
}

static void test_fill(void) {
    if (!bc_present("fill", bc_state.dev->fill)) return;
    bc_kernel_begin();
    for (int a = 0; a < BC_NDT; a++) {
        ts_dtype dt = bc_dtypes[a];
        kctx k = {.p0 = bc_is_float(dt) ? 2.5 : dt == TS_BOOL ? 1 : 7};
        for (int lay = 0; lay < 3; lay += 2) {
            bc_call c = {.nout = 1, .out = {bc_mk(dt, 2, S57, lay)}};
            bc_check(bc_what("%s layout %d", ts_dtype_name(dt), lay), &c, l_fill, &k);
        }
        bc_call c = {.nout = 1, .out = {BC_MK0(dt)}};
        bc_check(bc_what("%s 0-dim", ts_dtype_name(dt)), &c, l_fill, &k);
        c = (bc_call){.nout = 1, .out = {bc_mk(dt, 2, SBIG, 2)}};
        bc_check(bc_what("%s large strided", ts_dtype_name(dt)), &c, l_fill, &k);
    }
    bc_kernel_end("fill");
}

/* unary_ops.def's names, one per op */
static const char *unary_names[] = {
#define X(ID, name, ...) #name,
#include "backend/unary_ops.def"
#undef X
};
_Static_assert(sizeof unary_names / sizeof *unary_names == TS_U_COUNT, "a name per unary op");

/* Input values where every unary op is defined. */
static int unary_kind(int op) {
    switch (op) {
    case TS_U_LOG:
    case TS_U_LOG1P:
    case TS_U_SQRT:
    case TS_U_RSQRT:
        return BC_POS;
    case TS_U_RECIPROCAL:
        return BC_NONZERO;
    case TS_U_ASIN:
    case TS_U_ACOS:
    case TS_U_ATANH:
        return BC_UNIT;
    case TS_U_ACOSH:
        return BC_GE1;
    case TS_U_LOG2:
    case TS_U_LOG10:
        return BC_POS;
    case TS_U_ERFINV:
        return BC_UNIT;
    default:
        return BC_ANY;
    }
}

/* the ops whose cpu kernels take the vectorised math of vec_kernels.h (all float dtypes: f16
 * and bf16 compute through f32; logit: the vectorised log of its ratios; erfinv: its double
 * log; lgamma and digamma: their series) */
static bool vec_math_unary(int op) {
    return op == TS_U_EXP || op == TS_U_LOG || op == TS_U_TANH || op == TS_U_ERF ||
           op == TS_U_SIGMOID || op == TS_U_GELU || op == TS_U_SILU || op == TS_U_LOGIT ||
           op == TS_U_ERFINV || op == TS_U_LGAMMA || op == TS_U_DIGAMMA;
}
static bool vec_math_binary(int op) { return op == TS_B_GELU_BWD || op == TS_B_SILU_BWD; }

static void test_unary(void) {
    if (!bc_present("unary", bc_state.dev->unary)) return;
    bc_kernel_begin();
    for (int op = 0; op < TS_U_COUNT; op++)
        for (int a = 0; a < BC_NDT; a++) {
            ts_dtype dt = bc_dtypes[a], odt = op == TS_U_LOGICAL_NOT ? TS_BOOL : dt;
            int kind = unary_kind(op);
            const char *on = unary_names[op], *dn = ts_dtype_name(dt);
            kctx k = {.op = op, .p0 = -1, .p1 = 2};
            if (op == TS_U_POLYGAMMA) k.p0 = 1 + (a & 1); /* trigamma, and the zeta path */
            bc_state.math_case = vec_math_unary(op);
            bc_call c = one_in(bc_mk(odt, 2, S57, 0), bc_mk(dt, 2, S57, 0), kind, 0);
            bc_check(bc_what("%s %s contiguous", on, dn), &c, l_unary, &k);
            c = one_in(bc_mk(odt, 2, S57, 2), bc_mk(dt, 2, S57, 1), kind, 0);
            bc_check(bc_what("%s %s transposed into strided", on, dn), &c, l_unary, &k);
            c = one_in(bc_mk(odt, 2, S57, 0), bc_expand(bc_mk(dt, 2, (int64_t[]){5, 1}, 0), S57),
                       kind, 0);
            bc_check(bc_what("%s %s broadcast input", on, dn), &c, l_unary, &k);
            c = one_in(bc_mk(odt, 2, SBIG, 0), bc_mk(dt, 2, SBIG, 0), kind, 0);
            bc_check(bc_what("%s %s large", on, dn), &c, l_unary, &k);
            if (op == TS_U_CLAMP) {
                kctx k2 = {.op = op, .p0 = NAN, .p1 = 1};
                c = one_in(bc_mk(odt, 2, S57, 0), bc_mk(dt, 2, S57, 1), kind, 0);
                bc_check(bc_what("clamp %s no lower bound", dn), &c, l_unary, &k2);
            }
        }
    bc_state.math_case = false;
    bc_kernel_end("unary");
}

/* binary_ops.def's names, one per op */
static const char *binary_names[] = {
#define X(ID, name, ...) #name,
#include "backend/binary_ops.def"
#undef X
};
_Static_assert(sizeof binary_names / sizeof *binary_names == TS_B_COUNT, "a name per binary op");

static bool is_cmp(int op) { return op >= TS_B_EQ && op <= TS_B_OR; }

/* Operand ranges that keep every op defined: divisors non-zero, integer exponents >= 0. */
static void binary_kinds(int op, ts_dtype dt, int *ka, int *kb) {
    bool fl = bc_is_float(dt);
    *ka = *kb = BC_NONZERO;
    if (op == TS_B_POW) *ka = fl ? BC_POS : BC_ANY, *kb = BC_SMALLNN;
    if (op == TS_B_RPOW) *ka = BC_SMALLNN, *kb = fl ? BC_POS : BC_ANY;
    if (dt == TS_BOOL && (op == TS_B_DIV || op == TS_B_FMOD)) *kb = BC_NONZERO;
    if (dt == TS_BOOL && (op == TS_B_FLOORDIV || op == TS_B_REM)) *kb = BC_NONZERO;
    if (dt == TS_BOOL && op == TS_B_RDIV) *ka = BC_NONZERO;
    if (dt == TS_BOOL && !(op == TS_B_DIV || op == TS_B_FMOD || op == TS_B_RDIV ||
                           op == TS_B_FLOORDIV || op == TS_B_REM))
        *ka = *kb = BC_ANY;
}

static void test_binary(void) {
    if (!bc_present("binary", bc_state.dev->binary)) return;
    bc_kernel_begin();
    for (int op = 0; op < TS_B_COUNT; op++)
        for (int a = 0; a < BC_NDT; a++) {
            ts_dtype dt = bc_dtypes[a], odt = is_cmp(op) ? TS_BOOL : dt;
            int ka, kb;
            binary_kinds(op, dt, &ka, &kb);
            const char *on = binary_names[op], *dn = ts_dtype_name(dt);
            kctx k = {.op = op};
            bc_state.math_case = vec_math_binary(op);
            bc_call c =
                two_in(bc_mk(odt, 2, S57, 0), bc_mk(dt, 2, S57, 0), bc_mk(dt, 2, S57, 0), ka, kb);
            bc_check(bc_what("%s %s contiguous", on, dn), &c, l_binary, &k);
            c = two_in(bc_mk(odt, 2, S34, 0), bc_expand(bc_mk(dt, 2, (int64_t[]){3, 1}, 0), S34),
                       bc_expand(bc_mk(dt, 2, (int64_t[]){1, 4}, 0), S34), ka, kb);
            bc_check(bc_what("%s %s broadcast [3,1] [1,4]", on, dn), &c, l_binary, &k);
            c = two_in(bc_mk(odt, 2, S57, 2), bc_mk(dt, 2, S57, 1), bc_mk(dt, 2, S57, 2), ka, kb);
            bc_check(bc_what("%s %s strided", on, dn), &c, l_binary, &k);
            c = two_in(bc_mk(odt, 2, SBIG, 0), bc_mk(dt, 2, SBIG, 0),
                       bc_expand(bc_mk(dt, 2, (int64_t[]){1, 260}, 0), SBIG), ka, kb);
            bc_check(bc_what("%s %s large, broadcast row", on, dn), &c, l_binary, &k);
            c = two_in(bc_mk(odt, 2, SBIG, 0), bc_mk(dt, 2, SBIG, 1), bc_mk(dt, 2, SBIG, 0), ka,
                       kb);
            bc_check(bc_what("%s %s large transposed", on, dn), &c, l_binary, &k);
        }
    bc_state.math_case = false;
    bc_kernel_end("binary");
}

static void test_binary_scalar(void) {
    if (!bc_present("binary_scalar", bc_state.dev->binary_scalar)) return;
    bc_kernel_begin();
    static const double scalars[] = {2, 0.5, 3};
    for (int op = 0; op < TS_B_COUNT; op++)
        for (int a = 0; a < BC_NDT; a++)
            for (int si = 0; si < 3; si++) {
                ts_dtype dt = bc_dtypes[a], odt = is_cmp(op) ? TS_BOOL : dt;
                if (!bc_is_float(dt) && scalars[si] != floor(scalars[si])) continue;
                int ka, kb;
                binary_kinds(op, dt, &ka, &kb);
                const char *on = binary_names[op], *dn = ts_dtype_name(dt);
                kctx k = {.op = op, .p0 = scalars[si]};
                bc_state.math_case = vec_math_binary(op);
                bc_call c = one_in(bc_mk(odt, 2, S57, 0), bc_mk(dt, 2, S57, 0), ka, 0);
                bc_check(bc_what("%s %s s=%g contiguous", on, dn, k.p0), &c, l_bscalar, &k);
                c = one_in(bc_mk(odt, 2, S57, 2), bc_mk(dt, 2, S57, 1), ka, 0);
                bc_check(bc_what("%s %s s=%g strided", on, dn, k.p0), &c, l_bscalar, &k);
                c = one_in(bc_mk(odt, 2, SBIG, 0), bc_mk(dt, 2, SBIG, 0), ka, 0);
                bc_check(bc_what("%s %s s=%g large", on, dn, k.p0), &c, l_bscalar, &k);
            }
    bc_state.math_case = false;
    bc_kernel_end("binary_scalar");
}

/* addcmul, addcdiv, lerp (tensor and scalar weight) on the floating dtypes: broadcast, strided
 * and large; divisors positive, lerp's weights in (-1, 1) (both of its formulas) */
static void test_ternary(void) {
    if (!bc_present("ternary", bc_state.dev->ternary)) return;
    static const char *const names[TS_T_COUNT] = {"addcmul", "addcdiv", "lerp", "lerp_scalar"};
    static const ts_dtype fdt[4] = {TS_F32, TS_F64, TS_F16, TS_BF16};
    bc_kernel_begin();
    for (int op = 0; op < TS_T_COUNT; op++)
        for (int a = 0; a < 4; a++) {
            const ts_dtype dt = fdt[a];
            const char *dn = ts_dtype_name(dt);
            const int ck = op == TS_T_ADDCDIV ? BC_POS : op == TS_T_LERP ? BC_UNIT : BC_ANY;
            for (int k = 0; k < 2; k++) {
                kctx kc = {.op = op, .p0 = k ? 0.75 : -0.3};
                bc_call c = {.nout = 1,
                             .nin = 3,
                             .out = {bc_mk(dt, 2, S34, 0)},
                             .in = {bc_expand(bc_mk(dt, 2, (int64_t[]){3, 1}, 0), S34),
                                    bc_expand(bc_mk(dt, 2, (int64_t[]){1, 4}, 0), S34),
                                    bc_mk(dt, 2, S34, 1)}};
                bc_fill_host(&c.in[0], BC_ANY, 0), bc_fill_host(&c.in[1], BC_ANY, 0);
                bc_fill_host(&c.in[2], ck, 0);
                bc_check(bc_what("%s %s broadcast", names[op], dn), &c, l_ternary, &kc);
                c = (bc_call){
                    .nout = 1,
                    .nin = 3,
                    .out = {bc_mk(dt, 2, S57, 2)},
                    .in = {bc_mk(dt, 2, S57, 1), bc_mk(dt, 2, S57, 0), bc_mk(dt, 2, S57, 2)}};
                bc_fill_host(&c.in[0], BC_ANY, 0), bc_fill_host(&c.in[1], BC_ANY, 0);
                bc_fill_host(&c.in[2], ck, 0);
                bc_check(bc_what("%s %s strided", names[op], dn), &c, l_ternary, &kc);
                c = (bc_call){
                    .nout = 1,
                    .nin = 3,
                    .out = {bc_mk(dt, 2, SBIG, 0)},
                    .in = {bc_mk(dt, 2, SBIG, 0), bc_mk(dt, 2, SBIG, 1), bc_mk(dt, 2, SBIG, 0)}};
                bc_fill_host(&c.in[0], BC_ANY, 0), bc_fill_host(&c.in[1], BC_ANY, 0);
                bc_fill_host(&c.in[2], ck, 0);
                bc_check(bc_what("%s %s large", names[op], dn), &c, l_ternary, &kc);
            }
        }
    bc_kernel_end("ternary");
}

static void test_where(void) {
    if (!bc_present("where", bc_state.dev->where)) return;
    bc_kernel_begin();
    for (int a = 0; a < BC_NDT; a++) {
        ts_dtype dt = bc_dtypes[a];
        const char *dn = ts_dtype_name(dt);
        bc_call c = {.nout = 1,
                     .nin = 3,
                     .out = {bc_mk(dt, 2, S34, 0)},
                     .in = {bc_expand(bc_mk(TS_BOOL, 2, (int64_t[]){3, 1}, 0), S34),
                            bc_expand(bc_mk(dt, 2, (int64_t[]){1, 4}, 0), S34),
                            bc_mk(dt, 2, S34, 1)}};
        for (int i = 0; i < 3; i++) bc_fill_host(&c.in[i], BC_ANY, 0);
        bc_check(bc_what("%s broadcast", dn), &c, l_where, NULL);
        c = (bc_call){
            .nout = 1,
            .nin = 3,
            .out = {bc_mk(dt, 2, S57, 2)},
            .in = {bc_mk(TS_BOOL, 2, S57, 1), bc_mk(dt, 2, S57, 0), bc_mk(dt, 2, S57, 2)}};
        for (int i = 0; i < 3; i++) bc_fill_host(&c.in[i], BC_ANY, 0);
        bc_check(bc_what("%s strided", dn), &c, l_where, NULL);
        c = (bc_call){
            .nout = 1,
            .nin = 3,
            .out = {bc_mk(dt, 2, SBIG, 0)},
            .in = {bc_mk(TS_BOOL, 2, SBIG, 0), bc_mk(dt, 2, SBIG, 1), bc_mk(dt, 2, SBIG, 0)}};
        for (int i = 0; i < 3; i++) bc_fill_host(&c.in[i], BC_ANY, 0);
        bc_check(bc_what("%s large", dn), &c, l_where, NULL);
    }
    bc_kernel_end("where");
}

static void test_indexing(void) {
    static const int64_t s45[] = {4, 5};
    if (bc_present("index_select", bc_state.dev->index_select)) {
        bc_kernel_begin();
        for (int a = 0; a < BC_NDT; a++) {
            ts_dtype dt = bc_dtypes[a];
            for (int dim = 0; dim < 2; dim++)
                for (int lay = 0; lay < 2; lay++) {
                    int64_t os[2] = {4, 5};
                    os[dim] = 7;
                    bc_call c = {.nout = 1,
                                 .nin = 2,
                                 .out = {bc_mk(dt, 2, os, lay ? 2 : 0)},
                                 .in = {bc_mk(dt, 2, s45, lay),
                                        bc_mk(TS_I64, 1, (int64_t[]){7}, lay ? 2 : 0)}};
                    bc_fill_host(&c.in[0], BC_ANY, 0);
                    bc_fill_host(&c.in[1], BC_IDX, (double)s45[dim]);
                    kctx k = {.dim = dim};
                    bc_check(bc_what("%s dim %d layout %d", ts_dtype_name(dt), dim, lay), &c,
                             l_isel, &k);
                }
        }
        bc_kernel_end("index_select");
    }
    if (bc_present("gather", bc_state.dev->gather)) {
        bc_kernel_begin();
        for (int a = 0; a < BC_NDT; a++) {
            ts_dtype dt = bc_dtypes[a];
            for (int dim = 0; dim < 2; dim++)
                for (int lay = 0; lay < 2; lay++) {
                    int64_t is[2] = {4, 5};
                    is[dim] = 7;
                    if (lay) is[1 - dim] = 3; /* index smaller than the input in the other dim */
                    bc_call c = {.nout = 1,
                                 .nin = 2,
                                 .out = {bc_mk(dt, 2, is, lay ? 2 : 0)},
                                 .in = {bc_mk(dt, 2, s45, lay), bc_mk(TS_I64, 2, is, lay)}};
                    bc_fill_host(&c.in[0], BC_ANY, 0);
                    bc_fill_host(&c.in[1], BC_IDX, (double)s45[dim]);
                    kctx k = {.dim = dim};
                    bc_check(bc_what("%s dim %d layout %d", ts_dtype_name(dt), dim, lay), &c,
                             l_gather, &k);
                }
        }
        bc_kernel_end("gather");
    }
    if (bc_present("scatter_add", bc_state.dev->scatter_add)) {
        bc_kernel_begin();
        for (int a = 0; a < BC_NDT; a++) {
            ts_dtype dt = bc_dtypes[a];
            for (int dim = 0; dim < 2; dim++)
                for (int lay = 0; lay < 2; lay++) {
                    int64_t is[2] = {4, 5};
                    is[dim] = 3;
                    bc_call c = {.nout = 1,
                                 .nin = 2,
                                 .out = {bc_mk(dt, 2, s45, lay ? 2 : 0)},
                                 .in = {bc_mk(TS_I64, 2, is, lay), bc_mk(dt, 2, is, lay)}};
                    bc_fill_host(&c.out[0], BC_ANY, 0); /* the destination's initial values */
                    bc_fill_host(&c.in[0], BC_IDX, (double)s45[dim]);
                    bc_fill_host(&c.in[1], dt == TS_BOOL ? BC_ANY : BC_NONZERO, 0);
                    kctx k = {.dim = dim};
                    bc_check(bc_what("%s dim %d layout %d", ts_dtype_name(dt), dim, lay), &c,
                             l_scatter, &k);
                }
        }
        bc_kernel_end("scatter_add");
    }
}

static void test_random(void) {
    if (!bc_present("random", bc_state.dev->random)) return;
    bc_kernel_begin();
    static const char *kinds[] = {"uniform", "normal", "bernoulli", "randint"};
    for (int kind = 0; kind < 4; kind++)
        for (int a = 0; a < BC_NDT; a++) {
            ts_dtype dt = bc_dtypes[a];
            if (kind <= TS_RAND_NORMAL && !bc_is_float(dt)) continue;
            bc_state.math_case = kind == TS_RAND_NORMAL; /* log and cos */
            kctx k = {.op = kind,
                      .p0 = kind == TS_RAND_BERNOULLI ? 0.3
                            : kind == TS_RAND_NORMAL  ? 1
                                                      : -2,
                      .p1 = kind == TS_RAND_NORMAL ? 2 : 5};
            if (kind == TS_RAND_RANDINT && (dt == TS_U8 || dt == TS_BOOL))
                k.p0 = 0, k.p1 = dt == TS_BOOL ? 2 : 200;
            for (int lay = 0; lay < 3; lay += 2) {
                bc_call c = {.nout = 1, .out = {bc_mk(dt, 2, S57, lay)}};
                bc_check(bc_what("%s %s layout %d", kinds[kind], ts_dtype_name(dt), lay), &c,
                         l_random, &k);
            }
            bc_call c = {.nout = 1, .out = {bc_mk(dt, 2, SBIG, 0)}};
            bc_check(bc_what("%s %s large", kinds[kind], ts_dtype_name(dt)), &c, l_random, &k);
        }
    bc_state.math_case = false;
    bc_kernel_end("random");
}

/* ------------------------------------------------------------------ grad scaler kernels */
/* Writes v into the first (where 0) or last (where 1) element of the view's host data. */
static void plant(bc_spec *s, int where, double v) {
    int64_t off = 0;
    for (int i = 0; where && i < s->nd; i++) off += (s->shape[i] - 1) * s->strides[i];
    if (bc_numel(s) > 0) ot_store(s->host + off * (int64_t)bc_esz(s->dt), s->dt, v);
}

/* One-element f32 view holding v (found_inf, inv_scale, scale); tracker as i32. */
static bc_spec one_value(ts_dtype dt, double v) {
    bc_spec s = bc_mk(dt, 1, (int64_t[]){1}, 0);
    bc_fill_host(&s, BC_ANY, 0);
    ot_store(s.host, dt, v);
    return s;
}

/* Gradients g[0..n) (filled here), found_inf starting at found0, inv_scale inv; then the planted
 * non-finite values: bad[j] (0: none, 1: Inf, 2: -Inf, 3: NaN) in gradient j, last element. */
static void unscale_case(const char *what, int n, bc_spec *g, double found0, double inv,
                         const int *bad) {
    bc_call c = {.nout = n + 1, .nin = 1};
    for (int j = 0; j < n; j++) {
        c.out[j] = g[j];
        bc_fill_host(&c.out[j], BC_ANY, 0);
        if (bad && bad[j])
            plant(&c.out[j], 1, bad[j] == 1 ? INFINITY : bad[j] == 2 ? -INFINITY : NAN);
    }
    c.out[n] = one_value(TS_F32, found0);
    c.in[0] = one_value(TS_F32, inv);
    kctx k = {.op = n};
    bc_check(what, &c, l_amp_unscale, &k);
}

static void test_amp_unscale(void) {
    if (!bc_present("amp_unscale", bc_state.dev->amp_unscale)) return;
    bc_kernel_begin();
    static const double invs[] = {0x1p-16, 0.37, 1.0}; /* power of two, rounding, identity */
    for (int a = 0; a < 4; a++)                        /* the float bc_dtypes */
        for (int lay = 0; lay < 3; lay++)
            for (int vi = 0; vi < 3; vi++)
                for (int bad = 0; bad < 4; bad++) {
                    ts_dtype dt = bc_dtypes[a];
                    bc_spec g[3] = {bc_mk(dt, 2, S57, lay), bc_mk(dt, 2, S34, 0),
                                    bc_mk(dt, 1, (int64_t[]){9}, lay == 2 ? 2 : 0)};
                    int b3[3] = {0, bad, 0};
                    unscale_case(bc_what("%s layout %d inv %g non-finite kind %d",
                                         ts_dtype_name(dt), lay, invs[vi], bad),
                                 3, g, 0, invs[vi], b3);
                }
    /* found_inf is only ever set, never cleared */
    bc_spec g1[1] = {bc_mk(TS_F32, 2, S57, 0)};
    unscale_case("found_inf stays 1 over clean gradients", 1, g1, 1, 0.5, NULL);
    /* several dtypes in one call, a NaN in the last one */
    bc_spec gm[3] = {bc_mk(TS_F64, 2, S57, 1), bc_mk(TS_BF16, 2, S34, 2),
                     bc_mk(TS_F16, 1, (int64_t[]){7}, 0)};
    unscale_case("f64, bf16, f16 in one call, NaN last", 3, gm, 0, 0.25, (int[]){0, 0, 3});
    unscale_case("f64, bf16, f16 in one call, clean", 3, gm, 0, 0.25, NULL);
    /* 0-dim and empty gradients */
    bc_spec g0[2] = {BC_MK0(TS_F32), bc_mk(TS_F32, 2, (int64_t[]){3, 0}, 0)};
    unscale_case("0-dim and empty", 2, g0, 0, 0.125, (int[]){1, 0});
    /* large: the OpenMP split, with the Inf in the last thread's share */
    for (int a = 0; a < 4; a++)
        for (int bad = 0; bad < 2; bad++) {
            ts_dtype dt = bc_dtypes[a];
            bc_spec gl[2] = {bc_mk(dt, 2, SBIG, 1), bc_mk(dt, 2, SBIG, 0)};
            unscale_case(bc_what("%s large, Inf %d", ts_dtype_name(dt), bad), 2, gl, 0, 0.37,
                         (int[]){0, bad});
        }
    bc_kernel_end("amp_unscale");
}

static void test_amp_update_scale(void) {
    if (!bc_present("amp_update_scale", bc_state.dev->amp_update_scale)) return;
    bc_kernel_begin();
    static const double founds[] = {0, 1, 2, NAN};
    static const double scales[] = {65536, 3e38, 1e-30};
    static const int intervals[] = {1, 3, 2000};
    for (int f = 0; f < 4; f++)
        for (int sc = 0; sc < 3; sc++)
            for (int iv = 0; iv < 3; iv++)
                for (int tr = 0; tr < 3; tr++) {
                    int interval = intervals[iv];
                    int tracker = tr == 0 ? 0 : interval - (tr == 1 ? 2 : 1);
                    if (tracker < 0) continue;
                    bc_call c = {.nout = 2,
                                 .nin = 1,
                                 .out = {one_value(TS_F32, scales[sc]), one_value(TS_I32, tracker)},
                                 .in = {one_value(TS_F32, founds[f])}};
                    kctx k = {.p0 = 2.0, .p1 = 0.5, .dim = interval};
                    bc_check(bc_what("found %g scale %g interval %d tracker %d", founds[f],
                                     scales[sc], interval, tracker),
                             &c, l_amp_update, &k);
                }
    bc_kernel_end("amp_update_scale");
}

/* cdist (float dtypes, p = 0, 1, 2, 3, inf; strided inputs, a broadcast batch) and gather_dims
 * (pad's one-pass gather over the last 1 or 2 dims; contiguous outputs, as the front ends make) */
static void test_cdist_gather_dims(void) {
    static const int64_t so[] = {2, 5, 6}, s1[] = {2, 5, 7}, s2[] = {2, 6, 7};
    if (bc_present("cdist", bc_state.dev->cdist)) {
        bc_kernel_begin();
        const double ps[] = {0, 1, 2, 3, INFINITY};
        for (int a = 0; a < BC_NDT; a++) {
            const ts_dtype dt = bc_dtypes[a];
            if (!bc_is_float(dt)) continue;
            for (int q = 0; q < 5; q++)
                for (int lay = 0; lay < 3; lay++) {
                    bc_call c = {.nout = 1,
                                 .nin = 2,
                                 .out = {bc_mk(dt, 3, so, 0)},
                                 .in = {bc_mk(dt, 3, s1, lay), bc_mk(dt, 3, s2, lay ? 1 : 0)}};
                    if (lay == 2) c.in[1].strides[0] = 0; /* one x2 for both batches */
                    bc_fill_host(&c.in[0], BC_ANY, 0);
                    bc_fill_host(&c.in[1], BC_ANY, 0);
                    kctx k = {.p0 = ps[q]};
                    bc_check(bc_what("%s p %g layout %d", ts_dtype_name(dt), ps[q], lay), &c,
                             l_cdist, &k);
                }
        }
        bc_kernel_end("cdist");
    }
    if (bc_present("gather_dims", bc_state.dev->gather_dims)) {
        bc_kernel_begin();
        static const int64_t si[] = {3, 4, 5};
        for (int a = 0; a < BC_NDT; a++) {
            const ts_dtype dt = bc_dtypes[a];
            for (int kd = 1; kd <= 2; kd++)
                for (int lay = 0; lay < 3; lay++) {
                    const int64_t os[] = {3, kd == 2 ? 6 : 4, 9};
                    bc_call c = {.nout = 1,
                                 .nin = 1 + kd,
                                 .out = {bc_mk(dt, 3, os, 0)},
                                 .in = {bc_mk(dt, 3, si, lay),
                                        bc_mk(TS_I64, 1, (int64_t[]){9}, lay == 2 ? 2 : 0)}};
                    bc_fill_host(&c.in[0], BC_ANY, 0);
                    bc_fill_host(&c.in[1], BC_IDX, 5);
                    if (kd == 2) {
                        c.in[2] = bc_mk(TS_I64, 1, (int64_t[]){6}, 0);
                        bc_fill_host(&c.in[2], BC_IDX, 4);
                    }
                    kctx k = {.dim = kd};
                    bc_check(bc_what("%s k %d layout %d", ts_dtype_name(dt), kd, lay), &c,
                             l_gather_dims, &k);
                }
        }
        bc_kernel_end("gather_dims");
    }
}

/* roi_align / roi_pool (torchvision.ops), forward and backward: rois in and around a [2, 3, 7, 8]
 * input, float32 and float64 */
static bc_spec roi_rois(ts_dtype dt) {
    static const double r[5][5] = {{0, 0.5, 1.0, 6.0, 5.5},
                                   {1, -2.0, -1.0, 3.0, 9.0},
                                   {1, 4.2, 2.1, 4.3, 2.2},
                                   {0, 3.0, 0.0, 15.0, 12.0},
                                   {1, 1.0, 1.0, 7.9, 6.9}};
    bc_spec s = bc_mk(dt, 2, (int64_t[]){5, 5}, 0);
    bc_fill_host(&s, BC_ANY, 0);
    for (int j = 0; j < 25; j++) ot_store(s.host + j * (int64_t)bc_esz(dt), dt, r[j / 5][j % 5]);
    return s;
}
static bc_spec zeros_of(ts_dtype dt, int nd, const int64_t *shape) {
    bc_spec s = bc_mk(dt, nd, shape, 0);
    bc_fill_host(&s, BC_ANY, 0);
    for (int64_t j = 0; j < bc_numel(&s); j++) ot_store(s.host + j * (int64_t)bc_esz(dt), dt, 0);
    return s;
}
static void test_roi(void) {
    static const int64_t xs[] = {2, 3, 7, 8}, ys[] = {5, 3, 2, 3};
    for (int op = 0; op < 2; op++) {
        if (!bc_present(op ? "roi_pool" : "roi_align", op ? (const void *)bc_state.dev->roi_pool
                                                          : (const void *)bc_state.dev->roi_align))
            continue;
        bc_kernel_begin();
        for (int dt2 = 0; dt2 < 2; dt2++)
            for (int bwd = 0; bwd < 2; bwd++)
                for (int v = 0; v < (op ? 1 : 3); v++) {
                    const ts_dtype dt = dt2 ? TS_F64 : TS_F32;
                    bc_call c = {.nout = bwd ? 1 : 1 + op, .nin = 2 + (bwd && op)};
                    if (bwd) {
                        c.out[0] = zeros_of(dt, 4, xs);
                        c.in[0] = bc_mk(dt, 4, ys, 0);
                        bc_fill_host(&c.in[0], BC_ANY, 0);
                        if (op) {
                            c.in[2] = bc_mk(TS_I64, 4, ys, 0);
                            bc_fill_host(&c.in[2], BC_IDX, 56);
                        }
                    } else {
                        c.out[0] = bc_mk(dt, 4, ys, 0);
                        if (op) c.out[1] = bc_mk(TS_I64, 4, ys, 0);
                        c.in[0] = bc_mk(dt, 4, xs, 0);
                        bc_fill_host(&c.in[0], BC_ANY, 0);
                    }
                    c.in[1] = roi_rois(dt);
                    kctx k = {.op = op,
                              .log = bwd,
                              .dim = v == 0   ? 2
                                     : v == 1 ? 0
                                              : 1,
                              .nred = v != 0,
                              .p0 = v == 2 ? 0.5 : 1.0};
                    bc_check(bc_what("%s %s variant %d", ts_dtype_name(dt),
                                     bwd ? "backward" : "forward", v),
                             &c, l_roi, &k);
                }
        bc_kernel_end(op ? "roi_pool" : "roi_align");
    }
}

static void run_elementwise(void) {
    test_memory();
    test_copy();
    test_fill();
    test_unary();
    test_binary();
    test_binary_scalar();
    test_where();
    test_ternary();
    test_indexing();
    test_random();
    test_amp_unscale();
    test_amp_update_scale();
    test_cdist_gather_dims();
    test_roi();
}

/* ------------------------------------------------------------------ self-check
 * A backend with planted bugs must fail: an out-of-bounds write, a stride bug, a wrong value. */
static ts_backend broken;
static const ts_backend *healthy;

static void broken_fill(const ts_backend *b, int index, const ts_kview *dst, double v) {
    healthy->fill(healthy, index, dst, v);
    int64_t end = 0;
    for (int i = 0; i < dst->ndim; i++) end += (dst->shape[i] - 1) * dst->strides[i];
    size_t es = bc_esz(dst->dtype);
    memcpy(dst->data + (end + 1) * (int64_t)es, dst->data, es); /* one element past the end */
    (void)b;
}
static void broken_unary(const ts_backend *b, int index, ts_unary_op op, const ts_kview *out,
                         const ts_kview *a, double p0, double p1) {
    ts_kview o = *out; /* ignores the output's strides */
    int64_t st = 1;
    for (int i = o.ndim - 1; i >= 0; i--) o.strides[i] = st, st *= o.shape[i];
    healthy->unary(healthy, index, op, &o, a, p0, p1);
    (void)b;
}
static void broken_binary(const ts_backend *b, int index, ts_binary_op op, const ts_kview *out,
                          const ts_kview *x, const ts_kview *y) {
    healthy->binary(healthy, index, op, out, x, y);
    out->data[0] ^= 1; /* a wrong value */
    (void)b;
}

static void self_check(const ts_backend *sim) {
    healthy = sim;
    broken = *sim;
    broken.fill = broken_fill, broken.unary = broken_unary, broken.binary = broken_binary;
    bc_state.dev = &broken, bc_state.dev_name = "broken", bc_state.exact = true;
    bc_state.quiet = true;
    test_fill();
    int fill_failed = bc_state.failed;
    test_unary();
    int unary_failed = bc_state.failed;
    test_binary();
    int binary_failed = bc_state.failed;
    bc_state.exact = false; /* the tolerance path must catch them too */
    test_fill();
    int fill_failed_tol = bc_state.failed;
    test_unary();
    int unary_failed_tol = bc_state.failed;
    bc_state.quiet = false;
    printf("self-check: a planted out-of-bounds write, stride bug and wrong value are caught\n");
    CHECK(fill_failed > 0 && fill_failed_tol > 0);
    CHECK(unary_failed > 0 && unary_failed_tol > 0);
    CHECK(binary_failed > 0);
}

int main(void) {
    return cf_main(
        &(cf_suite){.name = "test_conformance", .run = run_elementwise, .self_check = self_check});
}
