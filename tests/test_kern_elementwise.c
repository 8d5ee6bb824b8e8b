/* test_kern_elementwise.c — CPU unary/binary/where kernels and the fused activation backwards,
 * called directly on hand-built views and checked against plain double-precision references
 * (conversions, copy and fill: test_kern_copy.c). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef TS_HAVE_OPENMP
#include <omp.h>
#endif

#include "backend/cpu/cpu_kernels.h"
#include "backend/kernel_math.h"
#include "kern_elem_ref.h"
#include "ts_test.h"

/* ------------------------------------------------------------------ unary */
#define NUV 24
static const double UVALS[NUV] = {-4.75, -3.2, -2.5, -1.5,       -1,  -0.5,     -0.3,      -0.0,
                                  0,     0.25, 0.5,  0.7,        1,   1.5,      2.5,       3.5,
                                  4.2,   25,   -25,  1.0 / 1024, NAN, INFINITY, -INFINITY, 30.5};

static double sgn(double x) { return x > 0 ? 1 : x < 0 ? -1 : 0; } /* PyTorch: sign(NaN) = 0 */
static double ref_unary(ts_unary_op op, double x, double lo, double hi) {
    switch (op) {
    case TS_U_NEG:
        return -x;
    case TS_U_ABS:
        return fabs(x);
    case TS_U_EXP:
        return exp(x);
    case TS_U_LOG:
        return log(x);
    case TS_U_LOG1P:
        return log1p(x);
    case TS_U_SQRT:
        return sqrt(x);
    case TS_U_RSQRT:
        return 1 / sqrt(x);
    case TS_U_SIN:
        return sin(x);
    case TS_U_COS:
        return cos(x);
    case TS_U_TAN:
        return tan(x);
    case TS_U_ASIN:
        return asin(x);
    case TS_U_ACOS:
        return acos(x);
    case TS_U_ATAN:
        return atan(x);
    case TS_U_SINH:
        return sinh(x);
    case TS_U_COSH:
        return cosh(x);
    case TS_U_ASINH:
        return asinh(x);
    case TS_U_ACOSH:
        return acosh(x);
    case TS_U_ATANH:
        return atanh(x);
    case TS_U_ERF:
        return erf(x);
    case TS_U_TANH:
        return tanh(x);
    case TS_U_SIGMOID:
        return 1 / (1 + exp(-x));
    case TS_U_RELU:
        return isnan(x) ? x : x > 0 ? x : 0;
    case TS_U_GELU:
        return 0.5 * x * (1 + erf(x / sqrt(2.0)));
    case TS_U_SILU:
        return x / (1 + exp(-x));
    case TS_U_SOFTPLUS:
        return x > 20 ? x : log(1 + exp(x));
    case TS_U_SIGN:
        return sgn(x);
    case TS_U_FLOOR:
        return floor(x);
    case TS_U_CEIL:
        return ceil(x);
    case TS_U_ROUND: { /* half to even, by hand */
        double f = floor(x), d = x - f;
        return isinf(x) || isnan(x) ? x
               : d > 0.5            ? f + 1
               : d < 0.5            ? f
               : fmod(f, 2) == 0    ? f
                                    : f + 1;
    }
    case TS_U_RECIPROCAL:
        return 1 / x;
    case TS_U_SQUARE:
        return x * x;
    case TS_U_LOGICAL_NOT:
        return x == 0;
    case TS_U_CLAMP: {
        if (isnan(x)) return x;
        double v = !isnan(lo) && x < lo ? lo : x;
        return !isnan(hi) && v > hi ? hi : v;
    }
    default:
        return NAN;
    }
}

static void run_unary_case(ts_unary_op op, ts_dtype dt, const double *in, int n, double lo,
                           double hi, const char *what) {
    char a[NUV * 8], out[NUV * 8];
    ts_dtype odt = op == TS_U_LOGICAL_NOT ? TS_BOOL : dt;
    for (int i = 0; i < n; i++) put(dt, a, i, in[i]);
    /* contiguous, then in place, then a transposed 2-D view (n = 24 as 4x6) */
    for (int pass = 0; pass < 3; pass++) {
        ts_kview vo = kv1(out, odt, n), va = kv1(a, dt, n);
        char *o = out;
        if (pass == 1 && odt == dt) vo.data = o = a;
        if (pass == 1 && odt != dt) continue;
        int64_t sh[2] = {4, 6}, c[2] = {6, 1}, t[2] = {1, 4};
        if (pass == 2) vo = kv(out, odt, 2, sh, c), va = kv(a, dt, 2, sh, t);
        char saved[NUV * 8];
        memcpy(saved, a, sizeof saved);
        tsi_cpu_unary(NULL, 0, op, &vo, &va, lo, hi);
        for (int i = 0; i < n; i++) {
            int src = pass == 2 ? (i % 6) * 4 + i / 6 : i;
            double want = as_dtype(odt, ref_unary(op, get(dt, saved, src), lo, hi));
            expect_val(get(odt, o, i), want, odt, what, i);
        }
        if (pass == 1) memcpy(a, saved, sizeof saved);
    }
    group_done();
}

static void test_unary(void) {
    static const char *names[] = {"neg",   "abs",   "exp",    "log",      "log1p", "sqrt",  "rsqrt",
                                  "sin",   "cos",   "tan",    "asin",     "acos",  "atan",  "sinh",
                                  "cosh",  "asinh", "acosh",  "atanh",    "erf",   "tanh",  "sigm",
                                  "relu",  "gelu",  "silu",   "softplus", "sign",  "floor", "ceil",
                                  "round", "recip", "square", "not",      "clamp"};
    /* the ops up to clamp; the special functions after it (expm1 ... nan_to_num) have their own
     * long-double references and edge tables in test_ops_special.c */
    _Static_assert(sizeof names / sizeof *names == TS_U_CLAMP + 1, "a name per unary op");
    const ts_dtype fl[4] = {TS_F32, TS_F64, TS_F16, TS_BF16};
    for (int k = 0; k < 4; k++) {
        for (int op = 0; op <= TS_U_CLAMP; op++) {
            run_unary_case((ts_unary_op)op, fl[k], UVALS, NUV, -1.5, 2.5, names[op]);
        }
        run_unary_case(TS_U_CLAMP, fl[k], UVALS, NUV, NAN, 2.5, "clamp max only");
        run_unary_case(TS_U_CLAMP, fl[k], UVALS, NUV, 0.5, NAN, "clamp min only");
        run_unary_case(TS_U_CLAMP, fl[k], UVALS, NUV, 3, 1, "clamp lo > hi");
    }
    /* integers and bool: exact, with wrapping */
    double ivals[NUV];
    for (int i = 0; i < NUV; i++) ivals[i] = (double)((i * 37) % 61 - 25);
    ivals[0] = 127, ivals[1] = -128, ivals[2] = 100000;
    const ts_unary_op iops[10] = {TS_U_NEG,   TS_U_ABS,  TS_U_SIGN,  TS_U_SQUARE,      TS_U_RELU,
                                  TS_U_FLOOR, TS_U_CEIL, TS_U_ROUND, TS_U_LOGICAL_NOT, TS_U_CLAMP};
    const ts_dtype it[4] = {TS_I64, TS_I32, TS_U8, TS_BOOL};
    for (int k = 0; k < 4; k++) {
        for (int j = 0; j < 10; j++) {
            ts_unary_op op = iops[j];
            if (it[k] == TS_BOOL && (op == TS_U_NEG || op == TS_U_CLAMP)) continue;
            run_unary_case(op, it[k], ivals, NUV, -7, 20, names[op]);
        }
        if (it[k] != TS_BOOL) run_unary_case(TS_U_CLAMP, it[k], ivals, NUV, NAN, 3, "clamp max");
    }
    /* i64 wraps: -INT64_MIN and INT64_MIN^2 */
    int64_t big[2] = {INT64_MIN, (int64_t)3037000500}, r[2];
    ts_kview vo = kv1(r, TS_I64, 2), va = kv1(big, TS_I64, 2);
    tsi_cpu_unary(NULL, 0, TS_U_NEG, &vo, &va, 0, 0);
    CHECK(r[0] == INT64_MIN && r[1] == -3037000500);
    tsi_cpu_unary(NULL, 0, TS_U_SQUARE, &vo, &va, 0, 0);
    CHECK(r[0] == 0 && (uint64_t)r[1] == (uint64_t)3037000500 * (uint64_t)3037000500);
}

/* ------------------------------------------------------------------ binary */
#define NBV 12
static const double FA[NBV] = {1.5, -2.25, 3, 0, -0.0, 7.5, NAN, INFINITY, -4, 0.3, 2, -1};
static const double FB[NBV] = {2, 0.5, -3, 0, 1.5, NAN, 2, -INFINITY, 2.5, 0, -0.5, 3};
static const double IA[NBV] = {7, -7, 9, 0, 1, -1, 5, 2, -3, 12, 4, 255};
static const double IB[NBV] = {2, 2, -4, 3, -5, -3, 0, 10, 0, -1, 1, 2};

/* by repeated multiplication, wrapping; narrow dtypes keep the low 32 bits exactly */
static double ipow_ref(int64_t b, int64_t e, ts_dtype dt) {
    if (e < 0) return b == 1 ? 1 : b == -1 ? (e % 2 ? -1 : 1) : 0;
    uint64_t r = 1;
    for (int64_t i = 0; i < e; i++) r *= (uint64_t)b;
    return dt == TS_I64 ? (double)(int64_t)r : (double)(int32_t)(uint32_t)r;
}
/* The fused activation backwards from their textbook derivatives: a is the gradient, b the saved
 * output (sigmoid, tanh) or input (gelu, silu). */
static double ref_bwd(ts_binary_op op, double a, double b) {
    const double pi = 3.14159265358979323846;
    double s;
    switch (op) {
    case TS_B_SIGMOID_BWD: /* d sigmoid = y (1 - y) */
        return a * b * (1 - b);
    case TS_B_TANH_BWD: /* d tanh = 1 - y^2 */
        return a * (1 - b * b);
    case TS_B_GELU_BWD: /* d (x Phi(x)) = Phi(x) + x phi(x) */
        return a * (0.5 * erfc(-b / sqrt(2)) + b * exp(-b * b / 2) / sqrt(2 * pi));
    case TS_B_SILU_BWD: /* d (x s(x)) = s + x s (1 - s) */
        s = 1 / (1 + exp(-b));
        return a * (s + b * s * (1 - s));
    default:
        return NAN;
    }
}
/* issue 52's bitwise ops in the kernels' int64 (uint64 for uint64) with PyTorch's shifts */
static double ref_bitwise(ts_binary_op op, double a, double b, ts_dtype dt) {
    if (dt == TS_U64) {
        const uint64_t x = (uint64_t)a, y = (uint64_t)b;
        return (double)(op == TS_B_BITAND   ? x & y
                        : op == TS_B_BITOR  ? x | y
                        : op == TS_B_BITXOR ? x ^ y
                        : y >= 64           ? 0
                        : op == TS_B_LSHIFT ? x << y
                                            : x >> y);
    }
    const int64_t x = (int64_t)a, y = (int64_t)b;
    const bool out = y < 0 || y >= 64;
    return (double)(op == TS_B_BITAND   ? x & y
                    : op == TS_B_BITOR  ? x | y
                    : op == TS_B_BITXOR ? x ^ y
                    : op == TS_B_LSHIFT ? (out ? 0 : (int64_t)((uint64_t)x << y))
                                        : (out ? (x < 0 ? -1 : 0) : x >> y));
}
static double ref_binary(ts_binary_op op, double a, double b, ts_dtype dt) {
    bool isint = !isflt(dt);
    switch (op) {
    case TS_B_ADD:
        return a + b;
    case TS_B_SUB:
        return a - b;
    case TS_B_MUL:
        return a * b;
    case TS_B_DIV:
        return isint ? (b == 0 ? 0 : trunc(a / b)) : a / b;
    case TS_B_POW:
        return isint ? ipow_ref((int64_t)a, (int64_t)b, dt) : pow(a, b);
    case TS_B_MAX:
        return isnan(a) || isnan(b) ? NAN : a > b ? a : b;
    case TS_B_MIN:
        return isnan(a) || isnan(b) ? NAN : a < b ? a : b;
    case TS_B_FMOD:
        return isint && b == 0 ? 0 : fmod(a, b);
    case TS_B_EQ:
        return a == b;
    case TS_B_NE:
        return a != b;
    case TS_B_LT:
        return a < b;
    case TS_B_LE:
        return a <= b;
    case TS_B_GT:
        return a > b;
    case TS_B_GE:
        return a >= b;
    case TS_B_AND:
        return a != 0 && b != 0;
    case TS_B_OR:
        return a != 0 || b != 0;
    case TS_B_RSUB:
        return b - a;
    case TS_B_RDIV:
        return isint ? (a == 0 ? 0 : trunc(b / a)) : b / a;
    case TS_B_RPOW:
        return isint ? ipow_ref((int64_t)b, (int64_t)a, dt) : pow(b, a);
    case TS_B_RELU_BWD:
        return isnan(b) || b > 0 ? a : 0;
    case TS_B_FLOORDIV: { /* ATen's div_floor: inf // 2 is nan, 0.3 // -inf is -1 */
        if (b == 0) return isint ? 0 : a / b;
        if (isint) return floor(a / b);
        double m = fmod(a, b), q = (a - m) / b;
        if (m != 0 && ((b < 0) != (m < 0))) q -= 1;
        if (q == 0) return copysign(0, a / b);
        return q - floor(q) > 0.5 ? floor(q) + 1 : floor(q);
    }
    case TS_B_REM: {
        if (isint && b == 0) return 0;
        double m = fmod(a, b);
        return m != 0 && ((b < 0) != (m < 0)) ? m + b : m;
    }
    case TS_B_BITAND:
    case TS_B_BITOR:
    case TS_B_BITXOR:
    case TS_B_LSHIFT:
    case TS_B_RSHIFT: /* on floats off the contract (the front ends refuse): a passed through */
        return isint ? ref_bitwise(op, a, b, dt) : a;
    case TS_B_DIVTRUNC:
        return isint && b == 0 ? 0 : trunc(a / b);
    default: /* the other backwards: in double, truncated on integers (the kernel's fallback) */
        return isint ? trunc(ref_bwd(op, a, b)) : ref_bwd(op, a, b);
    }
}
static ts_dtype out_dtype(ts_binary_op op, ts_dtype dt) {
    return op >= TS_B_EQ && op <= TS_B_OR ? TS_BOOL : dt;
}
static bool bool_op_ok(ts_binary_op op) { /* the ops PyTorch defines on bool */
    return op == TS_B_ADD || op == TS_B_MUL || op == TS_B_MAX || op == TS_B_MIN ||
           (op >= TS_B_EQ && op <= TS_B_OR);
}

/* Layouts over a 3x4 output: 0 dense, 1 b broadcast along rows ([4] -> strides {0,1}),
 * 2 b as a column ([3,1] -> {1,0}), 3 a broadcast and b transposed, 4 out transposed,
 * 5 a as a column. a of dtype da, b of db, out of odt: tsi_cpu_binary (da == db) or, widening,
 * tsi_cpu_binary_widening; the reference is ref_binary in rdt on the values as stored. */
static void run_layouts(ts_binary_op op, ts_dtype da, ts_dtype db, ts_dtype odt, ts_dtype rdt,
                        const double *av, const double *bv, bool widening) {
    char a[NBV * 8], b[NBV * 8], out[NBV * 8];
    for (int i = 0; i < NBV; i++) put(da, a, i, av[i]), put(db, b, i, bv[i]);
    int64_t sh[2] = {3, 4}, c[2] = {4, 1}, row[2] = {0, 1}, col[2] = {1, 0}, t[2] = {1, 3};
    for (int lay = 0; lay < 6; lay++) {
        ts_kview vo = kv(out, odt, 2, sh, c), va = kv(a, da, 2, sh, c), vb = kv(b, db, 2, sh, c);
        if (lay == 1) vb = kv(b, db, 2, sh, row);
        if (lay == 2) vb = kv(b, db, 2, sh, col);
        if (lay == 3) va = kv(a, da, 2, sh, row), vb = kv(b, db, 2, sh, t);
        if (lay == 4) vo = kv(out, odt, 2, sh, t);
        if (lay == 5) va = kv(a, da, 2, sh, col);
        memset(out, 0xff, sizeof out);
        (widening ? tsi_cpu_binary_widening : tsi_cpu_binary)(NULL, 0, op, &vo, &va, &vb);
        for (int r = 0; r < 3; r++) {
            for (int k = 0; k < 4; k++) {
                int ia = lay == 3 ? k : lay == 5 ? r : r * 4 + k;
                int ib = lay == 1 ? k : lay == 2 ? r : lay == 3 ? k * 3 + r : r * 4 + k;
                int io = lay == 4 ? k * 3 + r : r * 4 + k;
                double want = ref_binary(op, get(da, a, ia), get(db, b, ib), rdt);
                char what[64];
                snprintf(what, sizeof what, "%s op %d %s x %s layout %d",
                         widening ? "widening" : "binary", (int)op, ts_dtype_name(da),
                         ts_dtype_name(db), lay);
                expect_val(get(odt, out, io), as_dtype(odt, want), odt, what, io);
            }
        }
    }
    group_done();
}

static void run_binary_case(ts_binary_op op, ts_dtype dt, const double *av, const double *bv) {
    run_layouts(op, dt, dt, out_dtype(op, dt), dt, av, bv, false);
}

static void run_scalar_case(ts_binary_op op, ts_dtype dt, const double *av, double s) {
    char a[NBV * 8], out[NBV * 8];
    ts_dtype odt = out_dtype(op, dt);
    bool isint = !isflt(dt);
    for (int i = 0; i < NBV; i++) put(dt, a, i, av[i]);
    /* the scalar as the kernel sees it: arithmetic in f32 (opmath) for f16/bf16, comparisons and
     * integer ops on the scalar cast to the tensor's dtype */
    double sv = isint || (op >= TS_B_EQ && op <= TS_B_GE) ? as_dtype(dt, s)
                : dt == TS_F64                            ? s
                                                          : (double)(float)s;
    for (int pass = 0; pass < 2; pass++) {
        int64_t n = 6, st = 2;
        ts_kview vo = kv1(out, odt, NBV), va = kv1(a, dt, NBV);
        if (pass == 1) vo = kv(out, odt, 1, &n, &st), va = kv(a, dt, 1, &n, &st);
        tsi_cpu_binary_scalar(NULL, 0, op, &vo, &va, s);
        for (int i = 0; i < (pass ? 6 : NBV); i++) {
            int j = pass ? 2 * i : i;
            double want = ref_binary(op, get(dt, a, j), sv, dt);
            if (op == TS_B_POW && s == -0.5 && !isint) /* PyTorch uses rsqrt: (-0) ** -0.5 = -inf */
                want = 1 / sqrt(get(dt, a, j));
            char what[48];
            snprintf(what, sizeof what, "scalar op %d s=%g pass %d", (int)op, s, pass);
            expect_val(get(odt, out, j), as_dtype(odt, want), odt, what, j);
        }
    }
    group_done();
}

/* the special functions (xlogy ... logaddexp2, zeta ... legendre_p) have references and edge
 * tables of their own in test_ops_special.c and test_special_functions.c */
static bool special_binary(int op) {
    return (op >= TS_B_XLOGY && op <= TS_B_LOGADDEXP2) || op >= TS_B_ZETA;
}

static void test_binary(void) {
    for (int k = 0; k < NDT; k++) {
        ts_dtype dt = ALL[k];
        bool f = isflt(dt);
        for (int op = 0; op < TS_B_COUNT; op++) {
            if (special_binary(op)) continue;
            if (dt == TS_BOOL && !bool_op_ok((ts_binary_op)op)) continue;
            if (!f && (op == TS_B_POW || op == TS_B_RPOW) && dt != TS_I64) continue;
            run_binary_case((ts_binary_op)op, dt, f ? FA : IA, f ? FB : IB);
            const double fs[3] = {1.75, -2.5, 0}, is[3] = {3, -2, 0};
            for (int j = 0; j < 3; j++) {
                if (!f && (op == TS_B_POW || op == TS_B_RPOW) && is[j] < 0) continue;
                run_scalar_case((ts_binary_op)op, dt, f ? FA : IA, f ? fs[j] : is[j]);
            }
        }
        if (f) { /* PyTorch's pow shortcuts */
            const double ps[7] = {2, 0.5, 3, -1, -0.5, -2, 1.3};
            for (int j = 0; j < 7; j++) run_scalar_case(TS_B_POW, dt, FA, ps[j]);
        }
    }
    /* i32 / u8 pow and exact integer edge cases */
    const double pa[NBV] = {2, 3, -2, 0, 1, -1, 5, 7, 10, 2, -3, 1};
    const double pb[NBV] = {3, 0, 5, 2, -4, -3, 2, 3, 9, 31, 4, -1};
    run_binary_case(TS_B_POW, TS_I32, pa, pb);
    run_binary_case(TS_B_POW, TS_U8, pa, pb);
    int64_t x[2] = {INT64_MIN, 17}, y[2] = {-1, 0}, r[2];
    ts_kview vo = kv1(r, TS_I64, 2), va = kv1(x, TS_I64, 2), vb = kv1(y, TS_I64, 2);
    tsi_cpu_binary(NULL, 0, TS_B_DIV, &vo, &va, &vb); /* must not trap */
    CHECK(r[0] == INT64_MIN && r[1] == 0);
    tsi_cpu_binary(NULL, 0, TS_B_FMOD, &vo, &va, &vb);
    CHECK(r[0] == 0 && r[1] == 0);
    /* f16 comparison against a scalar that f16 cannot hold exactly: PyTorch casts it first */
    uint16_t h[1] = {ref_f16(0.1f)};
    uint8_t eq[1] = {0};
    ts_kview vh = kv1(h, TS_F16, 1), ve = kv1(eq, TS_BOOL, 1);
    tsi_cpu_binary_scalar(NULL, 0, TS_B_EQ, &ve, &vh, 0.1);
    CHECK_EQ(eq[0], 1);
}

/* binary_widening: a float32 result from operands of dtypes da and db (float32, f16, bf16), over
 * run_layouts' layouts; the reference is the double-precision op on the values as each operand's
 * dtype holds them, rounded to float32 */
static void run_widening_case(ts_binary_op op, ts_dtype da, ts_dtype db) {
    run_layouts(op, da, db, TS_F32, TS_F32, FA, FB, true);
}

static void test_binary_widening(void) {
    const ts_dtype dts[3] = {TS_F32, TS_BF16, TS_F16};
    for (int op = 0; op < TS_B_COUNT; op++) {
        if (op >= TS_B_EQ && op <= TS_B_OR) continue; /* bool results: not this entry's */
        if (special_binary(op)) continue;
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 3; j++)
                if (i || j) run_widening_case((ts_binary_op)op, dts[i], dts[j]);
    }
    /* runs longer than the kernel's chunks, on several threads: a float32 a transposed, b bf16
     * broadcast over dim 1; every element against the float32 sum of the values as stored */
#ifdef TS_HAVE_OPENMP
    const int threads = omp_get_max_threads();
    omp_set_num_threads(3);
#endif
    enum { D0 = 3, D1 = 37, D2 = 1001 };
    const int64_t n = (int64_t)D0 * D1 * D2;
    float *a = malloc((size_t)n * sizeof *a), *o = malloc((size_t)n * sizeof *o);
    uint16_t *b = malloc((size_t)n * sizeof *b);
    uint32_t h = 7;
    for (int64_t i = 0; i < n; i++) {
        h = h * 1664525u + 1013904223u, a[i] = (float)(h >> 12) * 0.25f;
        h = h * 1664525u + 1013904223u, b[i] = ref_bf16((float)(h >> 16) * 0.125f - 4000.0f);
    }
    int64_t sh[3] = {D0, D1, D2}, c[3] = {D1 * D2, D2, 1}, t[3] = {D1 * D2, 1, D1},
            bc[3] = {D1 * D2, 0, 1};
    ts_kview vo = kv(o, TS_F32, 3, sh, c), va = kv(a, TS_F32, 3, sh, t),
             vb = kv(b, TS_BF16, 3, sh, bc);
    tsi_cpu_binary_widening(NULL, 0, TS_B_SUB, &vo, &va, &vb);
    int bad = 0;
    for (int64_t i = 0; i < D0; i++)
        for (int64_t j = 0; j < D1; j++)
            for (int64_t k = 0; k < D2; k++) {
                const float want =
                    (float)((double)a[i * D1 * D2 + k * D1 + j] - ref_bf16_val(b[i * D1 * D2 + k]));
                bad += o[(i * D1 + j) * D2 + k] != want;
            }
    CHECK_EQ(bad, 0);
    /* in place, dst float32 += f16 (the front end's add_) */
    uint16_t *hf = (uint16_t *)b;
    for (int64_t i = 0; i < n; i++) hf[i] = ref_f16((float)(i % 2049) * 0.5f - 512.0f);
    memcpy(o, a, (size_t)n * sizeof *o);
    ts_kview v1 = kv1(o, TS_F32, n), vh = kv1(hf, TS_F16, n);
    tsi_cpu_binary_widening(NULL, 0, TS_B_ADD, &v1, &v1, &vh);
    bad = 0;
    for (int64_t i = 0; i < n; i++) bad += o[i] != (float)((double)a[i] + ref_f16_val(hf[i]));
    CHECK_EQ(bad, 0);
#ifdef TS_HAVE_OPENMP
    omp_set_num_threads(threads);
#endif
    free(a), free(b), free(o);
}

/* ------------------------------------------------------------------ fused activation backwards */
/* PyTorch 1.13's own gradients at a few points, f32 (NaN included: threshold_backward passes the
 * gradient of a NaN input):
 *   x = torch.tensor([-3.0, -1.25, -0.5, 0.0, 0.375, 1.0, 2.5, nan])
 *   g = torch.tensor([0.5, -2.0, 1.5, 3.0, -0.75, 1.25, 2.0, 1.0])
 *   xx = x.clone().requires_grad_(); f(xx).backward(g); xx.grad
 * for f in relu, sigmoid, tanh, gelu, silu; and torch.sigmoid(x), torch.tanh(x) as the saved
 * outputs. */
static void test_activation_backward(void) {
    static const float X[8] = {-3.0f, -1.25f, -0.5f, 0.0f, 0.375f, 1.0f, 2.5f, NAN};
    static const float G[8] = {0.5f, -2.0f, 1.5f, 3.0f, -0.75f, 1.25f, 2.0f, 1.0f};
    static const float SIG[8] = {
        0.04742587357759476f, 0.22270013391971588f, 0.3775406777858734f, 0.5f,
        0.5926666259765625f,  0.7310585975646973f,  0.9241418242454529f, NAN};
    static const float TANH[8] = {
        -0.9950547814369202f, -0.8482836484909058f, -0.46211716532707214f, 0.0f,
        0.35835739970207214f, 0.7615941762924194f,  0.9866142868995667f,   NAN};
    static const double WANT[5][8] = {
        {0.0, 0.0, 0.0, 0.0, -0.75, 1.25, 2.0, 1.0},
        {0.022588329389691353, -0.3462095856666565, 0.35250556468963623, 0.75, -0.18105967342853546,
         0.24576491117477417, 0.1402074247598648, NAN},
        {0.00493299076333642, -0.5608296990394592, 1.1796715259552002, 3.0, -0.6536849737167358,
         0.5249678492546082, 0.053184498101472855, NAN},
        {-0.005972802639007568, 0.24532294273376465, 0.1987573653459549, 1.5, -0.5892114639282227,
         1.3541442155838013, 2.0752220153808594, NAN},
        {-0.04405205324292183, -0.01263829879462719, 0.3900582194328308, 1.5, -0.5123973488807678,
         1.159588098526001, 2.1988022327423096, NAN}};
    static const ts_binary_op OPS[5] = {TS_B_RELU_BWD, TS_B_SIGMOID_BWD, TS_B_TANH_BWD,
                                        TS_B_GELU_BWD, TS_B_SILU_BWD};
    const float *saved[5] = {X, SIG, TANH, X, X};
    for (int k = 0; k < 5; k++) {
        float out[8];
        ts_kview vo = kv1(out, TS_F32, 8), vg = kv1((void *)G, TS_F32, 8),
                 vs = kv1((void *)saved[k], TS_F32, 8);
        tsi_cpu_binary(NULL, 0, OPS[k], &vo, &vg, &vs);
        for (int i = 0; i < 8; i++) expect_val(out[i], WANT[k][i], TS_F32, "torch backward", i);
        group_done();
    }
    /* long dense runs (the vector loops and their tails) and a broadcast gradient, f32 and f64,
     * against the double reference */
    enum { N = 1003 };
    static float a32[N], b32[N], o32[N];
    static double a64[N], b64[N], o64[N];
    for (int i = 0; i < N; i++) {
        a64[i] = a32[i] = (float)(((i * 37) % 101) - 50) / 16.0f;
        b64[i] = b32[i] = (float)(((i * 53) % 97) - 48) / 24.0f;
    }
    for (int k = 0; k < 5; k++) {
        ts_binary_op op = OPS[k];
        bool sat = op == TS_B_SIGMOID_BWD || op == TS_B_TANH_BWD; /* saved outputs in (-1, 1) */
        for (int i = 0; i < N; i++) b64[i] = b32[i] = sat ? b32[i] / 2.5f : b32[i];
        ts_kview vo = kv1(o32, TS_F32, N), va = kv1(a32, TS_F32, N), vb = kv1(b32, TS_F32, N);
        tsi_cpu_binary(NULL, 0, op, &vo, &va, &vb);
        for (int i = 0; i < N; i++)
            expect_val(o32[i], ref_binary(op, a32[i], b32[i], TS_F32), TS_F32, "long f32", i);
        group_done();
        int64_t n = N, zero = 0;
        vo = kv1(o64, TS_F64, N), vb = kv1(b64, TS_F64, N);
        va = kv(a64, TS_F64, 1, &n, &zero); /* one gradient value for every element */
        tsi_cpu_binary(NULL, 0, op, &vo, &va, &vb);
        for (int i = 0; i < N; i++)
            expect_val(o64[i], ref_binary(op, a64[0], b64[i], TS_F64), TS_F64, "long f64", i);
        group_done();
        for (int i = 0; i < N; i++) b64[i] = b32[i] = sat ? b32[i] * 2.5f : b32[i];
    }
}

/* ------------------------------------------------------------------ where */
static void test_where(void) {
    for (int k = 0; k < NDT; k++) {
        ts_dtype dt = ALL[k];
        char a[NBV * 8], b[NBV * 8], out[NBV * 8];
        uint8_t cond[4] = {1, 0, 0, 1};
        for (int i = 0; i < NBV; i++) put(dt, a, i, IA[i]), put(dt, b, i, IB[i] + 1);
        int64_t sh[2] = {3, 4}, c[2] = {4, 1}, row[2] = {0, 1}, col[2] = {1, 0}, t[2] = {1, 3};
        for (int lay = 0; lay < 3; lay++) {
            ts_kview vo = kv(out, dt, 2, sh, c), vc = kv(cond, TS_BOOL, 2, sh, row);
            ts_kview va = kv(a, dt, 2, sh, c), vb = kv(b, dt, 2, sh, c);
            if (lay == 1) vc = kv(cond, TS_BOOL, 2, sh, col), vb = kv(b, dt, 2, sh, t);
            if (lay == 2) va = kv(a, dt, 2, sh, row), vo = kv(out, dt, 2, sh, t);
            tsi_cpu_where(NULL, 0, &vo, &vc, &va, &vb);
            for (int r = 0; r < 3; r++) {
                for (int q = 0; q < 4; q++) {
                    bool cv = lay == 1 ? cond[r] : cond[q];
                    int ia = lay == 2 ? q : r * 4 + q, ib = lay == 1 ? q * 3 + r : r * 4 + q;
                    int io = lay == 2 ? q * 3 + r : r * 4 + q;
                    double want = cv ? get(dt, a, ia) : get(dt, b, ib);
                    expect_val(get(dt, out, io), want, dt, "where", io);
                }
            }
        }
        group_done();
    }
}

/* ------------------------------------------------------------------ large (threaded) runs */
static void test_large(void) {
#ifdef TS_HAVE_OPENMP
    omp_set_num_threads(3); /* odd count: chunk boundaries fall inside rows */
#endif
    enum { D0 = 3, D1 = 37, D2 = 1001 };
    const int64_t n = (int64_t)D0 * D1 * D2;
    float *a = malloc((size_t)n * sizeof *a), *b = malloc((size_t)n * sizeof *b);
    float *o = malloc((size_t)n * sizeof *o);
    double *od = malloc((size_t)n * sizeof *od);
    uint32_t h = 1;
    for (int64_t i = 0; i < n; i++) { /* aperiodic, so misplaced elements differ */
        h = h * 1664525u + 1013904223u, a[i] = (float)(h >> 12) * 0.25f;
        h = h * 1664525u + 1013904223u, b[i] = (float)(h >> 16);
    }
    /* a transposed in its last two dims, b broadcast over dim 1 */
    int64_t sh[3] = {D0, D1, D2}, c[3] = {D1 * D2, D2, 1}, t[3] = {D1 * D2, 1, D1},
            bc[3] = {D1 * D2, 0, 1};
    ts_kview vo = kv(o, TS_F32, 3, sh, c), va = kv(a, TS_F32, 3, sh, t),
             vb = kv(b, TS_F32, 3, sh, bc);
    tsi_cpu_binary(NULL, 0, TS_B_ADD, &vo, &va, &vb);
    int bad = 0;
    for (int64_t i = 0; i < D0; i++)
        for (int64_t j = 0; j < D1; j++)
            for (int64_t k = 0; k < D2; k++) {
                float want = a[i * D1 * D2 + k * D1 + j] + b[i * D1 * D2 + k];
                if (o[(i * D1 + j) * D2 + k] != want) bad++;
            }
    CHECK_EQ(bad, 0);
    ts_kview vd = kv(od, TS_F64, 3, sh, c);
    tsi_cpu_copy(NULL, 0, &vd, &va);
    bad = 0;
    for (int64_t i = 0; i < D0; i++)
        for (int64_t j = 0; j < D1; j++)
            for (int64_t k = 0; k < D2; k++)
                if (od[(i * D1 + j) * D2 + k] != (double)a[i * D1 * D2 + k * D1 + j]) bad++;
    CHECK_EQ(bad, 0);
    /* in place on the transposed view: same result whatever order the kernel walks in */
    memcpy(o, a, (size_t)n * sizeof *o);
    ts_kview vt = kv(o, TS_F32, 3, sh, t);
    tsi_cpu_unary(NULL, 0, TS_U_NEG, &vt, &vt, 0, 0);
    bad = 0;
    for (int64_t i = 0; i < n; i++) bad += o[i] != -a[i];
    CHECK_EQ(bad, 0);
    ts_kview v1 = kv1(o, TS_F32, n), va1 = kv1(a, TS_F32, n);
    tsi_cpu_unary(NULL, 0, TS_U_SQUARE, &v1, &va1, 0, 0);
    bad = 0;
    for (int64_t i = 0; i < n; i++) bad += o[i] != a[i] * a[i];
    CHECK_EQ(bad, 0);

    /* timings for the record (never asserted): the per-call cost of a 1-element op and a
     * contiguous f32 add */
    struct timespec t0, t1;
    ts_kview s1 = kv1(o, TS_F32, 1), sa = kv1(a, TS_F32, 1), sb = kv1(b, TS_F32, 1);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < 1000000; i++) tsi_cpu_binary(NULL, 0, TS_B_ADD, &s1, &sa, &sb);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double ns1 = ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / 1e6;
    ts_kview vb1 = kv1(b, TS_F32, n);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < 50; i++) tsi_cpu_binary(NULL, 0, TS_B_ADD, &v1, &va1, &vb1);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double gbs =
        50.0 * 12 * (double)n / ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec));
    printf("1-element add: %.1f ns/call; %lld-element add: %.2f GB/s\n", ns1, (long long)n, gbs);
    free(a), free(b), free(o), free(od);
}

int main(void) {
    test_unary();
    test_binary();
    test_binary_widening();
    test_activation_backward();
    test_where();
    test_large();
    return ts_test_finish();
}
