/* test_conformance_reduce.c — backend conformance (DESIGN §9.2) of the kernels that fold a
 * dimension: reductions (every op and dtype, inputs that overflow float partway, the large shapes
 * whose partial states a whole block merges), cumulative scans, softmax and matmul, of every
 * non-cpu backend against the cpu backend, with guard bytes around every output buffer and strided
 * outputs; and the CUDA reductions and scans emulated on the host. Elementwise kernels:
 * test_conformance.c; the run over the backends: support/conformance_run.c. */
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
static void l_reduce(const ts_backend *b, const ts_kview *o, const ts_kview *i, const void *p) {
    KC(p);
    b->reduce(b, 0, (ts_reduce_op)k->op, &o[0], &i[0], k->nred, k->p0);
}
static void l_scan(const ts_backend *b, const ts_kview *o, const ts_kview *i, const void *p) {
    KC(p); /* cummax / cummin: the indices in o[1] */
    const bool ext = k->op == TS_SCAN_MAX || k->op == TS_SCAN_MIN;
    b->scan(b, 0, (ts_scan_op)k->op, &o[0], ext ? &o[1] : NULL, &i[0], k->dim);
}
static void l_matmul(const ts_backend *b, const ts_kview *o, const ts_kview *i, const void *p) {
    (void)p;
    b->matmul(b, 0, &o[0], &i[0], &i[1]);
}
static void l_softmax(const ts_backend *b, const ts_kview *o, const ts_kview *i, const void *p) {
    KC(p);
    b->softmax(b, 0, &o[0], &i[0], k->dim, k->log);
}

/* ------------------------------------------------------------------ cases */
/* reduce_ops.def's names, one per op */
static const char *reduce_names[] = {
#define X(ID, name, ...) #name,
#include "backend/reduce_ops.def"
#undef X
};
_Static_assert(sizeof reduce_names / sizeof *reduce_names == TS_R_COUNT, "a name per reduce op");

static void test_reduce(void) {
    if (!bc_present("reduce", bc_state.dev->reduce)) return;
    bc_kernel_begin();
    static const int64_t s345[] = {3, 4, 5}, s30[] = {3, 0};
    for (int op = 0; op < TS_R_COUNT; op++)
        for (int a = 0; a < BC_NDT; a++) {
            ts_dtype dt = bc_dtypes[a];
            bool float_op = op == TS_R_MEAN || op == TS_R_VAR || op == TS_R_STD ||
                            op == TS_R_LOGSUMEXP || op == TS_R_NORM2;
            if (float_op && !bc_is_float(dt)) continue; /* the front end never asks for these */
            ts_dtype odt = op == TS_R_ARGMAX || op == TS_R_ARGMIN                    ? TS_I64
                           : (op == TS_R_SUM || op == TS_R_PROD) && !bc_is_float(dt) ? TS_I64
                                                                                     : dt;
            int kind = op == TS_R_PROD ? BC_NONZERO : BC_ANY;
            const char *on = reduce_names[op], *dn = ts_dtype_name(dt);
            for (int nred = 1; nred <= 3; nred++)
                for (int lay = 0; lay < 2; lay++) {
                    kctx k = {.op = op, .nred = nred, .p0 = lay ? 0 : 1};
                    bc_call c = one_in(bc_mk(odt, 3 - nred, s345, lay ? 2 : 0),
                                       bc_mk(dt, 3, s345, lay), kind, 0);
                    bc_check(bc_what("%s %s nred %d layout %d", on, dn, nred, lay), &c, l_reduce,
                             &k);
                }
            kctx k = {.op = op, .nred = 1, .p0 = 1};
            bc_call c = one_in(bc_mk(odt, 1, SBIG, 0), bc_mk(dt, 2, SBIG, 0), kind, 0);
            bc_check(bc_what("%s %s large rows", on, dn), &c, l_reduce, &k);
            c = one_in(bc_mk(odt, 1, SBIG, 2), bc_mk(dt, 2, SBIG, 1), kind, 0);
            bc_check(bc_what("%s %s large columns", on, dn), &c, l_reduce, &k);
            bool needs_elems =
                op == TS_R_MAX || op == TS_R_MIN || op == TS_R_ARGMAX || op == TS_R_ARGMIN;
            if (!needs_elems) {
                c = one_in(bc_mk(odt, 1, s30, 0), bc_mk(dt, 2, s30, 0), kind, 0);
                bc_check(bc_what("%s %s over zero elements", on, dn), &c, l_reduce, &k);
            }
        }
    bc_kernel_end("reduce");
}

/* ------------------------------------------------------------------ reductions: float range
 * Inputs whose reduction is finite in double but overflows float partway, in the order the GPU's
 * lanes and trees fold them (backend.h: floats accumulate in double), and a variance whose mean is
 * large against its spread (float accumulation loses ~1e-4 relative there). */
enum { PAT_ALTERNATE, PAT_HALVES };

/* Element k of a row: "big" with sign/exponent s = +1 or -1. Alternating: + at even k, - at odd
 * (every warp lane or block thread folds positions of one parity); halves: + in the first half,
 * - in the second (a thread folding a chunk in order meets the +s first). */
static int pat_sign(int pat, int64_t k, int64_t L) {
    return pat == PAT_ALTERNATE ? (k % 2 ? -1 : 1) : (k < L / 2 ? 1 : -1);
}

/* Fills in (a [rows, L] view) for op: SUM/MEAN ±3e38, as many of each sign (double cancels them
 * exactly in any order; any small value among them would be absorbed order-dependently), PROD
 * 2^±8 (the product of all is 1; half of them overflow float), VAR 1e4 + U(-1, 1). */
static void fill_float_range(bc_spec *in, int op, int pat) {
    bc_fill_host(in, BC_ANY, 0); /* noise everywhere first */
    const int64_t R = in->shape[0], L = in->shape[1];
    const size_t es = bc_esz(in->dt);
    for (int64_t r = 0; r < R; r++)
        for (int64_t k = 0; k < L; k++) {
            unsigned char *p = in->host + (r * in->strides[0] + k * in->strides[1]) * (int64_t)es;
            const int sg = pat_sign(pat, k, L);
            if (op == TS_R_PROD)
                ot_store(p, in->dt, sg > 0 ? 256.0 : 1.0 / 256.0);
            else if (op == TS_R_VAR)
                ot_store(p, in->dt, 1e4 + ot_load(p, in->dt) / 3);
            else
                ot_store(p, in->dt, sg * 3e38);
        }
}

static void test_reduce_float_range(void) {
    if (!bc_present("reduce", bc_state.dev->reduce)) return;
    bc_kernel_begin();
    static const struct {
        int op;
        int64_t rows, L;
        int layout; /* 0: the reduced dim contiguous (warp / block rows); 1: columns */
    } shapes[] = {{TS_R_SUM, 3, 64, 0},    {TS_R_SUM, 16, 64, 1},  {TS_R_SUM, 2, 2048, 0},
                  {TS_R_MEAN, 3, 64, 0},   {TS_R_MEAN, 16, 64, 1}, {TS_R_PROD, 3, 64, 0},
                  {TS_R_PROD, 16, 64, 1},  {TS_R_VAR, 3, 700, 0},  {TS_R_VAR, 2, 5000, 0},
                  {TS_R_VAR, 16, 3000, 1}, {TS_R_STD, 3, 700, 0}};
    static const ts_dtype dts[] = {TS_F32, TS_BF16, TS_F16};
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++)
        for (int a = 0; a < 3; a++)
            for (int pat = 0; pat < 2; pat++) {
                const int op = shapes[i].op;
                const ts_dtype dt = dts[a];
                /* f16 cannot hold 3e38 nor 1e4 + a fraction worth checking: products only */
                if (dt == TS_F16 && op != TS_R_PROD) continue;
                if ((op == TS_R_VAR || op == TS_R_STD) && (dt != TS_F32 || pat)) continue;
                const int64_t shape[2] = {shapes[i].rows, shapes[i].L};
                const int lay = shapes[i].layout;
                bc_call c = {.nout = 1,
                             .nin = 1,
                             .out = {bc_mk(dt, 1, shape, 0)},
                             .in = {bc_mk(dt, 2, shape, lay)}};
                fill_float_range(&c.in[0], op == TS_R_STD ? TS_R_VAR : op, pat);
                kctx k = {.op = op, .nred = 1, .p0 = 1};
                bc_check(bc_what("%s %s [%lld, %lld] %s, %s", reduce_names[op], ts_dtype_name(dt),
                                 (long long)shape[0], (long long)shape[1], lay ? "columns" : "rows",
                                 pat ? "halves" : "alternating"),
                         &c, l_reduce, &k);
            }
    bc_kernel_end("reduce range");
}

/* ------------------------------------------------------------------ reductions: large shapes
 * The paths today's small shapes never reach: more than 256 chunks per output, whose partial
 * states a whole block merges (block rows past 1M elements; columns past 16384). */
static void test_reduce_large(void) {
    if (!bc_present("reduce", bc_state.dev->reduce)) return;
    bc_kernel_begin();
    static const struct {
        int op;
        ts_dtype dt;
        int64_t rows, L;
        int layout;
    } cases[] = {{TS_R_SUM, TS_F32, 2, 1100000, 0},    {TS_R_SUM, TS_F16, 2, 1100000, 0},
                 {TS_R_VAR, TS_F32, 2, 1100000, 0},    {TS_R_LOGSUMEXP, TS_F32, 2, 1100000, 0},
                 {TS_R_ARGMAX, TS_F32, 2, 1100000, 0}, {TS_R_MAX, TS_BF16, 2, 1100000, 0},
                 {TS_R_SUM, TS_I32, 2, 1100000, 0},    {TS_R_SUM, TS_F32, 16, 20000, 1},
                 {TS_R_VAR, TS_F64, 16, 20000, 1},     {TS_R_ARGMIN, TS_F32, 16, 20000, 1},
                 {TS_R_SUM, TS_I64, 16, 20000, 1},     {TS_R_MEAN, TS_BF16, 16, 20000, 1}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const int op = cases[i].op;
        const ts_dtype dt = cases[i].dt;
        const ts_dtype odt = op == TS_R_ARGMAX || op == TS_R_ARGMIN                    ? TS_I64
                             : (op == TS_R_SUM || op == TS_R_PROD) && !bc_is_float(dt) ? TS_I64
                                                                                       : dt;
        const int64_t shape[2] = {cases[i].rows, cases[i].L};
        const int lay = cases[i].layout;
        bc_call c = one_in(bc_mk(odt, 1, shape, lay ? 2 : 0), bc_mk(dt, 2, shape, lay), BC_ANY, 0);
        kctx k = {.op = op, .nred = 1, .p0 = 1};
        bc_check(bc_what("%s %s [%lld, %lld] %s", reduce_names[op], ts_dtype_name(dt),
                         (long long)shape[0], (long long)shape[1], lay ? "columns" : "rows"),
                 &c, l_reduce, &k);
    }
    bc_kernel_end("reduce large");
}

static void test_matmul(void) {
    if (!bc_present("matmul", bc_state.dev->matmul)) return;
    bc_kernel_begin();
    for (int a = 0; a < BC_NDT; a++) {
        ts_dtype dt = bc_dtypes[a];
        if (dt == TS_BOOL) continue;
        const char *dn = ts_dtype_name(dt);
        static const int64_t sa[] = {2, 3, 4}, sb[] = {2, 4, 5}, so[] = {2, 3, 5};
        for (int la = 0; la < 2; la++)
            for (int lb = 0; lb < 2; lb++) {
                bc_call c = two_in(bc_mk(dt, 3, so, la ? 2 : 0), bc_mk(dt, 3, sa, la),
                                   bc_mk(dt, 3, sb, lb), BC_ANY, BC_ANY);
                bc_check(bc_what("%s a layout %d b layout %d", dn, la, lb), &c, l_matmul, NULL);
            }
        bc_call c = two_in(bc_mk(dt, 3, so, 0), bc_mk(dt, 3, sa, 0),
                           bc_expand(bc_mk(dt, 3, (int64_t[]){1, 4, 5}, 1), sb), BC_ANY, BC_ANY);
        bc_check(bc_what("%s broadcast batch", dn), &c, l_matmul, NULL);
        c = two_in(bc_mk(dt, 3, so, 0), bc_mk(dt, 3, (int64_t[]){2, 3, 0}, 0),
                   bc_mk(dt, 3, (int64_t[]){2, 0, 5}, 0), BC_ANY, BC_ANY);
        bc_check(bc_what("%s K = 0", dn), &c, l_matmul, NULL);
        c = two_in(bc_mk(dt, 3, (int64_t[]){3, 33, 17}, 0), bc_mk(dt, 3, (int64_t[]){3, 33, 65}, 1),
                   bc_mk(dt, 3, (int64_t[]){3, 65, 17}, 0), BC_ANY, BC_ANY);
        bc_check(bc_what("%s larger", dn), &c, l_matmul, NULL);
    }
    bc_kernel_end("matmul");
}

/* the cumulative ops: every op and dtype the front end asks for (sums and products of integers
 * into int64, logcumsumexp of floats), along each dim of contiguous and transposed inputs into
 * strided outputs, and along both dims of a large matrix (the cpu's threaded paths) */
static void test_scan(void) {
    if (!bc_present("scan", bc_state.dev->scan)) return;
    static const char *const names[] = {"cumsum", "cumprod", "cummax", "cummin", "logcumsumexp"};
    static const int64_t s345[] = {3, 4, 5};
    bc_kernel_begin();
    for (int op = TS_SCAN_SUM; op <= TS_SCAN_LOGSUMEXP; op++)
        for (int a = 0; a < BC_NDT; a++) {
            const ts_dtype dt = bc_dtypes[a];
            const bool ext = op == TS_SCAN_MAX || op == TS_SCAN_MIN;
            if (op == TS_SCAN_LOGSUMEXP && !bc_is_float(dt)) continue;
            const ts_dtype odt = ext || bc_is_float(dt) ? dt : TS_I64;
            const int kind = op == TS_SCAN_PROD ? BC_NONZERO : BC_ANY;
            const char *dn = ts_dtype_name(dt);
            bc_state.math_case = op == TS_SCAN_LOGSUMEXP;
            for (int dim = 0; dim < 3; dim++)
                for (int lay = 0; lay < 2; lay++) {
                    kctx k = {.op = op, .dim = dim};
                    bc_call c =
                        one_in(bc_mk(odt, 3, s345, lay ? 2 : 0), bc_mk(dt, 3, s345, lay), kind, 0);
                    if (ext) c.nout = 2, c.out[1] = bc_mk(TS_I64, 3, s345, lay);
                    bc_check(bc_what("%s %s dim %d layout %d", names[op], dn, dim, lay), &c, l_scan,
                             &k);
                }
            for (int dim = 0; dim < 2; dim++) {
                kctx k = {.op = op, .dim = dim};
                bc_call c = one_in(bc_mk(odt, 2, SBIG, 0), bc_mk(dt, 2, SBIG, dim), kind, 0);
                if (ext) c.nout = 2, c.out[1] = bc_mk(TS_I64, 2, SBIG, 0);
                bc_check(bc_what("%s %s large dim %d", names[op], dn, dim), &c, l_scan, &k);
            }
        }
    bc_state.math_case = false;
    bc_kernel_end("scan");
}

static void test_softmax(void) {
    if (!bc_present("softmax", bc_state.dev->softmax)) return;
    bc_kernel_begin();
    static const int64_t s345[] = {3, 4, 5};
    for (int a = 0; a < 4; a++) /* float bc_dtypes */
        for (int log = 0; log < 2; log++) {
            ts_dtype dt = bc_dtypes[a];
            const char *dn = ts_dtype_name(dt), *mode = log ? "log_softmax" : "softmax";
            for (int dim = 0; dim < 3; dim++)
                for (int lay = 0; lay < 2; lay++) {
                    kctx k = {.dim = dim, .log = log};
                    bc_call c =
                        one_in(bc_mk(dt, 3, s345, lay ? 2 : 0), bc_mk(dt, 3, s345, lay), BC_ANY, 0);
                    bc_check(bc_what("%s %s dim %d layout %d", mode, dn, dim, lay), &c, l_softmax,
                             &k);
                }
            for (int dim = 0; dim < 2; dim++) {
                kctx k = {.dim = dim, .log = log};
                bc_call c = one_in(bc_mk(dt, 2, SBIG, 0), bc_mk(dt, 2, SBIG, dim), BC_ANY, 0);
                bc_check(bc_what("%s %s large dim %d", mode, dn, dim), &c, l_softmax, &k);
            }
            /* rows longer than 1024 (a block per row, contiguous or strided) and the column path
             * over such rows */
            static const struct {
                int64_t a, b;
                int dim;
            } longrows[] = {{3, 1500, 1}, {1500, 10, 0}, {1030, 2050, 0}};
            for (int i = 0; i < 3; i++) {
                if (dt == TS_F64 && i == 2) continue; /* the same path as f32, 17 MiB more */
                const int64_t sh[2] = {longrows[i].a, longrows[i].b};
                kctx k = {.dim = longrows[i].dim, .log = log};
                bc_call c = one_in(bc_mk(dt, 2, sh, 0), bc_mk(dt, 2, sh, 0), BC_ANY, 0);
                bc_check(bc_what("%s %s [%lld, %lld] dim %d", mode, dn, (long long)sh[0],
                                 (long long)sh[1], k.dim),
                         &c, l_softmax, &k);
            }
        }
    bc_kernel_end("softmax");
}

static void run_reductions(void) {
    test_reduce();
    test_reduce_float_range();
    test_reduce_large();
    test_scan();
    test_matmul();
    test_softmax();
}

/* the CUDA reductions and scans run on the host: their accumulation rule and plans */
static void run_emulated_reductions(void) {
    test_reduce();
    test_reduce_float_range();
    test_reduce_large();
    test_scan();
}

int main(void) {
    return cf_main(&(cf_suite){.name = "test_conformance_reduce",
                               .run = run_reductions,
                               .emulated_reduce = run_emulated_reductions});
}
