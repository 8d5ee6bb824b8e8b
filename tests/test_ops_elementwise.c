/* test_ops_elementwise.c — elementwise op values against double references, PyTorch 1.13's
 * promotion tables, broadcasting and strided inputs, scalar forms (test_ops_elementwise_inplace.c
 * has in-place forms, where, masked_fill, clamp and devices). */
#include "ops_elementwise_util.h"

static const ts_dtype ALL[8] = {TS_F32, TS_F64, TS_F16, TS_BF16, TS_I64, TS_I32, TS_U8, TS_BOOL};

/* ------------------------------------------------------------------ unary */
typedef ts_tensor *(*unary_fn)(ts_tensor *);
static const struct {
    const char *name;
    unary_fn fn;
    const char *dtypes; /* result per ALL dtype, from PyTorch 1.13 ('E' = error); f16 as bf16 */
    bool positive;
} UNARY[] = {
    {"neg", ts_neg, "fdhbliuE", false},
    {"abs", ts_abs, "fdhbliuE", false},
    {"exp", ts_exp, "fdhbffff", false},
    {"log", ts_log, "fdhbffff", true},
    {"log1p", ts_log1p, "fdhbffff", true},
    {"sqrt", ts_sqrt, "fdhbffff", true},
    {"rsqrt", ts_rsqrt, "fdhbffff", true},
    {"sin", ts_sin, "fdhbffff", false},
    {"cos", ts_cos, "fdhbffff", false},
    {"tan", ts_tan, "fdhbffff", false},
    {"asin", ts_asin, "fdhbffff", false},
    {"acos", ts_acos, "fdhbffff", false},
    {"atan", ts_atan, "fdhbffff", false},
    {"sinh", ts_sinh, "fdhbffff", false},
    {"cosh", ts_cosh, "fdhbffff", false},
    {"asinh", ts_asinh, "fdhbffff", false},
    {"acosh", ts_acosh, "fdhbffff", false},
    {"atanh", ts_atanh, "fdhbffff", false},
    {"erf", ts_erf, "fdhbffff", false},
    {"tanh", ts_tanh, "fdhbffff", false},
    {"sigmoid", ts_sigmoid, "fdhbffff", false},
    {"relu", ts_relu, "fdhbliuE", false},
    {"gelu", ts_gelu, "fdhbEEEE", false},
    {"silu", ts_silu, "fdhbEEEE", false},
    {"softplus", ts_softplus, "fdhbEEEE", false},
    {"sign", ts_sign, "fdhbliu?", false},
    {"floor", ts_floor, "fdhbliuE", false},
    {"ceil", ts_ceil, "fdhbliuE", false},
    {"round", ts_round, "fdhbliuE", false},
    {"reciprocal", ts_reciprocal, "fdhbffff", true},
    {"square", ts_square, "fdhbliul", false},
    {"logical_not", ts_logical_not, "????????", false},
};
#define NUNARY (int)(sizeof UNARY / sizeof UNARY[0])

static double ref_unary(int k, double x) {
    const char *n = UNARY[k].name;
    if (!strcmp(n, "neg")) return -x;
    if (!strcmp(n, "abs")) return fabs(x);
    if (!strcmp(n, "exp")) return exp(x);
    if (!strcmp(n, "log")) return log(x);
    if (!strcmp(n, "log1p")) return log1p(x);
    if (!strcmp(n, "sqrt")) return sqrt(x);
    if (!strcmp(n, "rsqrt")) return 1 / sqrt(x);
    if (!strcmp(n, "sin")) return sin(x);
    if (!strcmp(n, "cos")) return cos(x);
    if (!strcmp(n, "tan")) return tan(x);
    if (!strcmp(n, "asin")) return asin(x);
    if (!strcmp(n, "acos")) return acos(x);
    if (!strcmp(n, "atan")) return atan(x);
    if (!strcmp(n, "sinh")) return sinh(x);
    if (!strcmp(n, "cosh")) return cosh(x);
    if (!strcmp(n, "asinh")) return asinh(x);
    if (!strcmp(n, "acosh")) return acosh(x);
    if (!strcmp(n, "atanh")) return atanh(x);
    if (!strcmp(n, "erf")) return erf(x);
    if (!strcmp(n, "tanh")) return tanh(x);
    if (!strcmp(n, "sigmoid")) return 1 / (1 + exp(-x));
    if (!strcmp(n, "relu")) return x > 0 ? x : 0;
    if (!strcmp(n, "gelu")) return 0.5 * x * (1 + erf(x / sqrt(2.0)));
    if (!strcmp(n, "silu")) return x / (1 + exp(-x));
    if (!strcmp(n, "softplus")) return x > 20 ? x : log1p(exp(x));
    if (!strcmp(n, "sign")) return (x > 0) - (x < 0);
    if (!strcmp(n, "floor")) return floor(x);
    if (!strcmp(n, "ceil")) return ceil(x);
    if (!strcmp(n, "round")) return nearbyint(x); /* half to even */
    if (!strcmp(n, "reciprocal")) return 1 / x;
    if (!strcmp(n, "square")) return x * x;
    return x == 0; /* logical_not */
}

static void test_unary(void) {
    for (int di = 0; di < ndev; di++)
        for (int k = 0; k < NUNARY; k++)
            for (int j = 0; j < 8; j++) {
                ts_scope_begin();
                ts_dtype in = ALL[j], want = dt_of_char(UNARY[k].dtypes[j]);
                ts_tensor *x = mk(TS_SHAPE(2, 3), in, sample(in, UNARY[k].positive), devs[di]);
                double xv[N6], ref[N6];
                rd(x, xv, N6);
                ts_tensor *y = UNARY[k].fn(x);
                char what[96];
                snprintf(what, sizeof what, "%s(%s) on %s", UNARY[k].name, ts_dtype_name(in),
                         ts_device_str(devs[di]));
                if (want == TS_DTYPE_DEFAULT) {
                    CHECK(y == NULL);
                    CHECK(strncmp(ts_error_message(), UNARY[k].name, strlen(UNARY[k].name)) == 0);
                    CHECK_ERR(TS_ERR_DTYPE);
                } else {
                    for (int i = 0; i < N6; i++)
                        ref[i] = ts_dtype_is_floating(want)
                                     ? ref_unary(k, xv[i])
                                     : wrap(want, (int64_t)ref_unary(k, xv[i]));
                    CHECK_VALS(what, y, want, ref, N6);
                    CHECK(y && ts_device_equal(ts_device_of(y), devs[di]));
                }
                ts_scope_end();
            }
    /* messages and in-place forms */
    ts_scope_begin();
    const double bv[3] = {1, 0, 1}, iv[3] = {1, -3, 5};
    CHECK(ts_neg(mk1(3, TS_BOOL, bv, ts_cpu())) == NULL);
    CHECK_ERR_MSG(TS_ERR_DTYPE, "neg: Negation, the `-` operator, on a bool tensor is not "
                                "supported. If you are trying to invert a mask, use the `~` or "
                                "`logical_not()` operator instead. (input: bool [3] on cpu)");
    ts_tensor *ti = mk1(3, TS_I64, iv, ts_cpu());
    CHECK(ts_exp_(ti) == NULL);
    CHECK_ERR_MSG(TS_ERR_DTYPE, "exp_: result type Float can't be cast to the desired output type "
                                "Long (output int64 [3] on cpu)");
    uint64_t v0 = ts_version(ti);
    ts_tensor *r = ts_relu_(ti);
    const double relu_ref[3] = {1, 0, 5};
    CHECK(r == ti && ts_version(ti) == v0 + 1);
    CHECK_VALS("relu_ int64", ti, TS_I64, relu_ref, 3);
    for (int di = 0; di < ndev; di++) { /* in place through a transposed view */
        const double base[6] = {0.5, 1, 1.5, 2, 2.5, 3};
        ts_tensor *b = mk(TS_SHAPE(3, 2), TS_F32, base, devs[di]);
        ts_tensor *v = ts_transpose(b, 0, 1);
        CHECK(ts_sqrt_(v) == v);
        double ref[6];
        for (int i = 0; i < 6; i++) ref[i] = sqrt(base[i]);
        CHECK_VALS("sqrt_ on a view writes the base", b, TS_F32, ref, 6);
        ts_tensor *e = ts_exp(ts_slice(b, 0, 0, 3, 2)); /* rows 0 and 2: strided input */
        const double eref[4] = {exp(ref[0]), exp(ref[1]), exp(ref[4]), exp(ref[5])};
        CHECK_VALS("exp of a strided slice", e, TS_F32, eref, 4);
    }
    ts_tensor *leaf = ts_ones(TS_SHAPE(3), (ts_opts){.requires_grad = true});
    CHECK(ts_neg_(leaf) == NULL);
    CHECK_ERR_MSG(TS_ERR_STATE, "neg_: a leaf Variable that requires grad is being used in an "
                                "in-place operation.");
    ts_tensor *ex = ts_expand(ts_ones(TS_SHAPE(1), (ts_opts){0}), TS_SHAPE(3));
    CHECK(ts_abs_(ex) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    ts_scope_end();
}

/* ------------------------------------------------------------------ binary */
typedef ts_tensor *(*binary_fn)(ts_tensor *, ts_tensor *);
enum { ADD, SUB, MUL, DIV, POW, MAX, MIN, FMOD, EQ, NE, LT, LE, GT, GE, AND, OR, NBIN };
static const struct {
    const char *name;
    binary_fn fn;
} BIN[NBIN] = {{"add", ts_add},
               {"sub", ts_sub},
               {"mul", ts_mul},
               {"div", ts_div},
               {"pow", ts_pow},
               {"maximum", ts_maximum},
               {"minimum", ts_minimum},
               {"fmod", ts_fmod},
               {"eq", ts_eq},
               {"ne", ts_ne},
               {"lt", ts_lt},
               {"le", ts_le},
               {"gt", ts_gt},
               {"ge", ts_ge},
               {"logical_and", ts_logical_and},
               {"logical_or", ts_logical_or}};

/* x op y computed in dtype c (f64 arithmetic for floats, int64 for integers); *skip when PyTorch
 * raises at run time (integer fmod by zero) */
static double ref_binary(int op, double x, double y, ts_dtype c, bool *skip) {
    *skip = false;
    switch (op) {
    case EQ:
        return x == y;
    case NE:
        return x != y;
    case LT:
        return x < y;
    case LE:
        return x <= y;
    case GT:
        return x > y;
    case GE:
        return x >= y;
    case AND:
        return x != 0 && y != 0;
    case OR:
        return x != 0 || y != 0;
    default:
        break;
    }
    if (ts_dtype_is_floating(c)) {
        switch (op) {
        case ADD:
            return x + y;
        case SUB:
            return x - y;
        case MUL:
            return x * y;
        case DIV:
            return x / y;
        case POW:
            return pow(x, y);
        case MAX:
            return isnan(x) || x > y ? x : y;
        case MIN:
            return isnan(x) || x < y ? x : y;
        default:
            return fmod(x, y);
        }
    }
    int64_t a = (int64_t)x, b = (int64_t)y;
    switch (op) {
    case ADD:
        return wrap(c, a + b);
    case SUB:
        return wrap(c, a - b);
    case MUL:
        return wrap(c, a * b);
    case POW:
        return wrap(c, ipow(a, b));
    case MAX:
        return wrap(c, a > b ? a : b);
    case MIN:
        return wrap(c, a < b ? a : b);
    default:
        *skip = b == 0;
        return b ? wrap(c, a % b) : 0;
    }
}

/* torch.result_type(add) from PyTorch 1.13: rows a, columns b, each as (dtype in ALL order,
 * ndim 1) then (dtype, ndim 0) */
static const char *PROMOTE[16] = {
    "fdffffffffffffff", "dddddddddddddddd", "fdhfhhhhhhhhhhhh", "fdfbbbbbbbbbbbbb",
    "fdhbllllfdhbllll", "fdhbliiifdhbiiii", "fdhbliuufdhbuuuu", "fdhbliu?fdhbliu?",
    "fdhbfffffdffffff", "fdhbdddddddddddd", "fdhbhhhhfdhfhhhh", "fdhbbbbbfdfbbbbb",
    "fdhbliulfdhbllll", "fdhbliuifdhbliii", "fdhbliuufdhbliuu", "fdhbliu?fdhbliu?",
};

static ts_tensor *ones_nd(ts_dtype dt, bool dim, ts_device dev) {
    return ts_ones(dim ? TS_SHAPE(2) : TS_SHAPE(), (ts_opts){.dtype = dt, .device = dev});
}

static void test_promotion(void) {
    ts_scope_begin();
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 16; j++) {
            ts_tensor *a = ones_nd(ALL[i % 8], i < 8, ts_cpu()),
                      *b = ones_nd(ALL[j % 8], j < 8, ts_cpu());
            ts_dtype want = dt_of_char(PROMOTE[i][j]);
            ts_tensor *r = ts_add(a, b);
            CHECK(r && ts_dtype_of(r) == want);
            if (!r || ts_dtype_of(r) != want)
                fprintf(stderr, "   add(%s%s, %s%s)\n", ts_dtype_name(ALL[i % 8]),
                        i < 8 ? "[2]" : "", ts_dtype_name(ALL[j % 8]), j < 8 ? "[2]" : "");
            ts_tensor *w = ts_where(ts_ones(TS_SHAPE(2), (ts_opts){.dtype = TS_BOOL}), a, b);
            CHECK(w && ts_dtype_of(w) == want); /* where promotes its values like add */
        }
    ts_error_clear();
    /* scalar forms (weak numbers), from PyTorch 1.13: add 2, add 2.5, div 2, eq 2.5, mul 2,
     * pow 2, rpow 2 */
    static const char *SCALAR[8] = {"fff?fff", "ddd?ddd", "hhh?hhh", "bbb?bbb",
                                    "lff?lll", "iff?iii", "uff?uuu", "lff?lll"};
    for (int nd = 0; nd < 2; nd++)
        for (int i = 0; i < 8; i++) {
            ts_tensor *a = ones_nd(ALL[i], nd, ts_cpu());
            ts_tensor *r[7] = {ts_add_scalar(a, 2),  ts_add_scalar(a, 2.5), ts_div_scalar(a, 2),
                               ts_eq_scalar(a, 2.5), ts_mul_scalar(a, 2),   ts_pow_scalar(a, 2),
                               ts_rpow_scalar(a, 2)};
            for (int k = 0; k < 7; k++) {
                CHECK(r[k] && ts_dtype_of(r[k]) == dt_of_char(SCALAR[i][k]));
                if (!r[k] || ts_dtype_of(r[k]) != dt_of_char(SCALAR[i][k]))
                    fprintf(stderr, "   scalar form %d on %s\n", k, ts_dtype_name(ALL[i]));
            }
        }
    CHECK_OK();
    ts_scope_end();
}

/* a op b for dtype pairs on every device, full shapes */
static void test_binary_values(void) {
    static const ts_dtype PAIRS[][2] = {
        {TS_F32, TS_F32},
        {TS_F64, TS_F32},
        {TS_F16, TS_F16},
        {TS_BF16, TS_F32},
        {TS_I64, TS_I64},
        {TS_I32, TS_F32},
        {TS_U8, TS_I64},
        {TS_BOOL, TS_BOOL},
        {TS_I32, TS_BOOL},
        {TS_U8, TS_U8},
        /* half operands of a float32 result, read as they are (binary_widening) */
        {TS_F32, TS_BF16},
        {TS_F16, TS_F32},
        {TS_BF16, TS_F16},
        /* a float32 result with an integer operand: cast first */
        {TS_F32, TS_I64},
    };
    static const double fb[N6] = {1.5, -1, 0.5, 1.5, -2, 4}, ib[N6] = {2, -1, 3, 1, -2, 4},
                        ub[N6] = {1, 2, 3, 1, 2, 4}, bb[N6] = {1, 1, 0, 0, 1, 0};
    for (int di = 0; di < ndev; di++)
        for (size_t p = 0; p < sizeof PAIRS / sizeof PAIRS[0]; p++)
            for (int op = 0; op < NBIN; op++) {
                ts_scope_begin();
                ts_dtype da = PAIRS[p][0], db = PAIRS[p][1];
                const double *bvals = db == TS_BOOL              ? bb
                                      : db == TS_U8              ? ub
                                      : ts_dtype_is_floating(db) ? fb
                                                                 : ib;
                ts_tensor *a = mk(TS_SHAPE(2, 3), da, sample(da, false), devs[di]);
                ts_tensor *b = mk(TS_SHAPE(2, 3), db, bvals, devs[di]);
                double x[N6], y[N6], ref[N6];
                rd(a, x, N6);
                rd(b, y, N6);
                ts_dtype r = ts_promote_types(da, db);
                ts_dtype c = op == DIV && !ts_dtype_is_floating(r) ? TS_F32 : r;
                ts_dtype o = op >= EQ ? TS_BOOL : c;
                bool err = (op == SUB && (da == TS_BOOL || db == TS_BOOL)) ||
                           ((op == POW || op == FMOD) && r == TS_BOOL);
                char what[96];
                snprintf(what, sizeof what, "%s(%s, %s) on %s", BIN[op].name, ts_dtype_name(da),
                         ts_dtype_name(db), ts_device_str(devs[di]));
                ts_tensor *out = BIN[op].fn(a, b);
                if (err) {
                    CHECK(out == NULL);
                    CHECK_ERR(TS_ERR_DTYPE);
                    ts_scope_end();
                    continue;
                }
                bool skip_any = false;
                for (int i = 0; i < N6; i++) {
                    bool skip;
                    ref[i] = ref_binary(op, x[i], y[i], c, &skip);
                    skip_any |= skip;
                }
                if (!skip_any) CHECK_VALS(what, out, o, ref, N6);
                ts_scope_end();
            }
}

static void test_broadcast_strided(void) {
    const struct {
        ts_shape a, b, out;
    } CASES[] = {
        {TS_SHAPE(2, 3), TS_SHAPE(3), TS_SHAPE(2, 3)},
        {TS_SHAPE(2, 1), TS_SHAPE(1, 3), TS_SHAPE(2, 3)},
        {TS_SHAPE(), TS_SHAPE(2, 3), TS_SHAPE(2, 3)},
        {TS_SHAPE(4, 1, 3), TS_SHAPE(2, 1), TS_SHAPE(4, 2, 3)},
        {TS_SHAPE(0, 3), TS_SHAPE(1), TS_SHAPE(0, 3)},
        {TS_SHAPE(), TS_SHAPE(), TS_SHAPE()},
    };
    double av[64], bv[64], ref[64];
    for (int i = 0; i < 64; i++) av[i] = i * 0.5 - 3, bv[i] = 10 - i;
    for (int di = 0; di < ndev; di++)
        for (size_t k = 0; k < sizeof CASES / sizeof CASES[0]; k++) {
            ts_scope_begin();
            ts_shape sa = CASES[k].a, sb = CASES[k].b, so = CASES[k].out;
            ts_tensor *a = mk(sa, TS_F32, av, devs[di]), *b = mk(sb, TS_F64, bv, devs[di]);
            ts_tensor *r = ts_mul(a, b);
            CHECK(r && ts_ndim(r) == so.ndim);
            int64_t n = 1;
            for (int d = 0; d < so.ndim; d++) {
                CHECK(r && ts_size(r, d) == so.dims[d]);
                n *= so.dims[d];
            }
            for (int64_t i = 0; i < n; i++) { /* index each operand the broadcasting way */
                int64_t rem = i, ia = 0, ib = 0, ma = 1, mb = 1;
                for (int d = so.ndim - 1; d >= 0; d--) {
                    int64_t idx = rem % so.dims[d];
                    rem /= so.dims[d];
                    int ja = d - (so.ndim - sa.ndim), jb = d - (so.ndim - sb.ndim);
                    if (ja >= 0) ia += (sa.dims[ja] == 1 ? 0 : idx) * ma, ma *= sa.dims[ja];
                    if (jb >= 0) ib += (sb.dims[jb] == 1 ? 0 : idx) * mb, mb *= sb.dims[jb];
                }
                ref[i] = av[ia] * bv[ib];
            }
            CHECK_VALS("broadcast mul", r, TS_F64, ref, n);
            ts_scope_end();
        }
    ts_scope_begin();
    CHECK(ts_add(ts_zeros(TS_SHAPE(2, 3), (ts_opts){0}), ts_zeros(TS_SHAPE(4), (ts_opts){0})) ==
          NULL);
    CHECK_ERR(TS_ERR_SHAPE);
    for (int di = 0; di < ndev; di++) { /* strided operands: a transpose and a step-2 slice */
        double base[12];
        for (int i = 0; i < 12; i++) base[i] = i + 1;
        ts_tensor *a = ts_transpose(mk(TS_SHAPE(3, 2), TS_F32, base, devs[di]), 0, 1);
        ts_tensor *b = ts_slice(mk(TS_SHAPE(2, 6), TS_I64, base, devs[di]), 1, 0, 6, 2);
        CHECK(a && b && !ts_is_contiguous(a) && !ts_is_contiguous(b));
        double x[6], y[6];
        rd(a, x, 6);
        rd(b, y, 6);
        CHECK(x[1] == 3 && y[1] == 3); /* the views themselves read back as expected */
        for (int i = 0; i < 6; i++) ref[i] = x[i] - y[i] * x[i];
        CHECK_VALS("strided sub/mul", ts_sub(a, ts_mul(b, a)), TS_F32, ref, 6);
        for (int i = 0; i < 6; i++) ref[i] = x[i] < y[i];
        CHECK_VALS("strided lt", ts_lt(a, b), TS_BOOL, ref, 6);
    }
    ts_scope_end();
}

/* A float32 result from half operands (autocast's residual add, float32 + bf16) reads them as they
 * are (the backend's binary_widening): the same bits as casting them first, broadcast, strided,
 * past the kernel's chunks, in place, and with each operand's gradient in its own dtype. */
static double max_abs_diff(ts_tensor *x, ts_tensor *y) {
    return ts_item(ts_max(ts_abs(ts_sub(ts_to_dtype(x, TS_F64), ts_to_dtype(y, TS_F64)))));
}
static void test_widening(void) {
    for (int di = 0; di < ndev; di++) {
        ts_scope_begin();
        ts_opts o = {.device = devs[di]};
        ts_manual_seed(11);
        ts_tensor *x = ts_randn(TS_SHAPE(7, 300), o);
        ts_tensor *h = ts_to_dtype(ts_randn(TS_SHAPE(7, 300), o), TS_BF16);
        ts_tensor *hr = ts_to_dtype(ts_randn(TS_SHAPE(300), o), TS_F16);
        ts_tensor *ht = ts_transpose(ts_to_dtype(ts_randn(TS_SHAPE(300, 7), o), TS_BF16), 0, 1);
        ts_tensor *hf = ts_to_dtype(h, TS_F32), *hrf = ts_to_dtype(hr, TS_F32),
                  *htf = ts_to_dtype(ht, TS_F32);
        struct {
            const char *what;
            ts_tensor *got, *want;
        } cases[] = {
            {"f32 + bf16", ts_add(x, h), ts_add(x, hf)},
            {"bf16 - f32", ts_sub(h, x), ts_sub(hf, x)},
            {"f32 * f16 broadcast", ts_mul(x, hr), ts_mul(x, hrf)},
            {"f16 / f32 broadcast", ts_div(hr, x), ts_div(hrf, x)},
            {"bf16 transposed - f32", ts_sub(ht, x), ts_sub(htf, x)},
            {"bf16 + f16", ts_add(h, hr), ts_add(hf, hrf)},
            {"maximum(f32, bf16)", ts_maximum(x, h), ts_maximum(x, hf)},
        };
        for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
            CHECK(cases[k].got && ts_dtype_of(cases[k].got) == TS_F32);
            const double d = cases[k].got ? max_abs_diff(cases[k].got, cases[k].want) : NAN;
            if (d != 0)
                printf("  %s on %s: differs by %g\n", cases[k].what, ts_device_str(devs[di]), d);
            CHECK(d == 0);
        }
        ts_tensor *y = ts_clone(x); /* in place: dst float32 op= half */
        CHECK(ts_add_(y, h) == y);
        CHECK(max_abs_diff(y, ts_add(x, hf)) == 0);
        ts_tensor *xg = ts_detach(x), *hg = ts_detach(h);
        ts_set_requires_grad(xg, true);
        ts_set_requires_grad(hg, true);
        ts_backward(ts_sum(ts_mul(ts_add(xg, hg), ts_to_dtype(hr, TS_F32))));
        CHECK(ts_grad(xg) && ts_dtype_of(ts_grad(xg)) == TS_F32);
        CHECK(ts_grad(hg) && ts_dtype_of(ts_grad(hg)) == TS_BF16);
        /* d/dh = hr broadcast, rounded to bf16 */
        ts_tensor *want = ts_to_dtype(ts_expand(hrf, TS_SHAPE(7, 300)), TS_BF16);
        CHECK(ts_grad(hg) && max_abs_diff(ts_grad(hg), want) == 0);
        CHECK_OK();
        ts_scope_end();
    }
}

/* ------------------------------------------------------------------ scalar forms */
typedef ts_tensor *(*scalar_fn)(ts_tensor *, double);
static void test_scalar_values(void) {
    static const struct {
        scalar_fn fn;
        int op;
        bool reversed;
    } S[] = {{ts_add_scalar, ADD, false},     {ts_sub_scalar, SUB, false},
             {ts_rsub_scalar, SUB, true},     {ts_mul_scalar, MUL, false},
             {ts_div_scalar, DIV, false},     {ts_pow_scalar, POW, false},
             {ts_rpow_scalar, POW, true},     {ts_maximum_scalar, MAX, false},
             {ts_minimum_scalar, MIN, false}, {ts_fmod_scalar, FMOD, false},
             {ts_eq_scalar, EQ, false},       {ts_ne_scalar, NE, false},
             {ts_lt_scalar, LT, false},       {ts_le_scalar, LE, false},
             {ts_gt_scalar, GT, false},       {ts_ge_scalar, GE, false}};
    static const ts_dtype DT[] = {TS_F32, TS_F64, TS_BF16, TS_I64, TS_I32, TS_U8};
    static const double SV[] = {2, 2.5, -1.5, 3};
    for (int di = 0; di < ndev; di++)
        for (size_t d = 0; d < sizeof DT / sizeof DT[0]; d++)
            for (size_t k = 0; k < sizeof S / sizeof S[0]; k++)
                for (size_t q = 0; q < sizeof SV / sizeof SV[0]; q++) {
                    ts_scope_begin();
                    double s = SV[q], x[N6], ref[N6];
                    ts_tensor *a = mk(TS_SHAPE(6), DT[d], sample(DT[d], S[k].op == POW), devs[di]);
                    rd(a, x, N6);
                    bool integral = s == floor(s);
                    ts_dtype r = ts_dtype_is_floating(DT[d]) || integral ? DT[d] : TS_F32;
                    ts_dtype c = S[k].op == DIV && !ts_dtype_is_floating(r) ? TS_F32 : r;
                    ts_dtype o = S[k].op >= EQ ? TS_BOOL : c;
                    ts_tensor *out = S[k].fn(a, s);
                    bool skip = false;
                    for (int i = 0; i < N6; i++) {
                        bool sk;
                        ref[i] = S[k].reversed ? ref_binary(S[k].op, s, x[i], c, &sk)
                                               : ref_binary(S[k].op, x[i], s, c, &sk);
                        skip |= sk;
                    }
                    char what[96];
                    snprintf(what, sizeof what, "scalar op %d (%s, %g) on %s", (int)k,
                             ts_dtype_name(DT[d]), s, ts_device_str(devs[di]));
                    if (!skip && !(S[k].op == POW && !S[k].reversed && s < 0 && integral))
                        CHECK_VALS(what, out, o, ref, N6);
                    ts_error_clear();
                    ts_scope_end();
                }
    ts_scope_begin();
    const double iv[3] = {1, 2, 3}, bv[3] = {1, 0, 1};
    ts_tensor *ti = mk1(3, TS_I64, iv, ts_cpu()), *tb = mk1(3, TS_BOOL, bv, ts_cpu());
    CHECK(ts_pow_scalar(ti, -1) == NULL);
    CHECK_ERR_MSG(TS_ERR_ARG, "pow_scalar: Integers to negative integer powers are not allowed. "
                              "(a: int64 [3] on cpu, exponent -1)");
    CHECK(ts_fmod_scalar(ti, 0) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_sub_scalar(tb, 1) == NULL);
    CHECK_ERR(TS_ERR_DTYPE);
    CHECK(ts_rsub_scalar(tb, 1) == NULL);
    CHECK_ERR(TS_ERR_DTYPE);
    const double bref[3] = {2, 1, 2}; /* bool + 1 is int64 (PyTorch) */
    CHECK_VALS("bool + 1", ts_add_scalar(tb, 1), TS_I64, bref, 3);
    const double u8ref[3] = {45, 46, 47}; /* uint8 + 300 wraps like PyTorch */
    CHECK_VALS("u8 + 300", ts_add_scalar(mk1(3, TS_U8, iv, ts_cpu()), 300), TS_U8, u8ref, 3);
    ts_scope_end();
}

int main(void) {
    if (!ew_setup_devices()) return ts_test_skip("no sim devices: %s", ts_error_message());
    int64_t before[2];
    ew_live_tensors(before);
    test_unary();
    test_promotion();
    test_binary_values();
    test_broadcast_strided();
    test_widening();
    test_scalar_values();
    return ew_finish(before);
}
