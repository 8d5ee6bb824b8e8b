/* test_grad_elementwise.c — backward of every differentiable elementwise op: gradcheck (f64 central
 * differences) of unary, binary (broadcast), scalar, where, clamp, masked_fill and in-place forms
 * on cpu, sim:0 (and cuda:0), printing one line per op, plus hand-computed gradients, PyTorch's
 * special points (relu/abs at 0, maximum ties, inclusive clamp, pow at 0), dtypes, devices and the
 * in-place version error. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ts_test.h"

/* ------------------------------------------------------------------ inputs */
static uint64_t lcg = 0x853C49E6748FEA9BULL;
static double unit(void) {
    lcg = lcg * 6364136223846793005ULL + 1442695040888963407ULL;
    return (double)(lcg >> 11) / 9007199254740992.0;
}

/* Value domains: random doubles keep clear of kinks (0 for relu/abs, integers for floor, ties). */
typedef enum {
    D_ANY,  /* +-[0.5, 1.5] */
    D_POS,  /* [0.5, 1.5]: log, sqrt, pow's base */
    D_SOFT, /* softplus on both sides of its threshold 20 */
    D_UNIT, /* +-[0.05, 0.85]: asin, acos, atanh */
    D_GT1,  /* [1.5, 2.5]: acosh */
} domain;

static double sample(domain d) {
    double m = 0.5 + unit();
    switch (d) {
    case D_POS:
        return m;
    case D_SOFT:
        return unit() < 0.5 ? 20.5 + unit() : (unit() < 0.5 ? -m : m);
    case D_UNIT:
        return (unit() < 0.5 ? -1 : 1) * (0.05 + 0.8 * unit());
    case D_GT1:
        return 1 + m;
    default:
        return unit() < 0.5 ? -m : m;
    }
}

static ts_tensor *leaf(ts_shape s, ts_device dev, domain d) {
    double v[64];
    int64_t n = 1;
    for (int i = 0; i < s.ndim; i++) n *= s.dims[i];
    for (int64_t i = 0; i < n; i++) v[i] = sample(d);
    return ts_tensor_f64(s, v, (ts_opts){.device = dev, .requires_grad = true});
}

static ts_tensor *values(ts_shape s, const double *v, ts_device dev, bool grad) {
    return ts_tensor_f64(s, v, (ts_opts){.device = dev, .requires_grad = grad});
}

/* The tensor's values on the host as doubles (n at most 64). */
static bool host(ts_tensor *t, double *out, int64_t n) {
    return t && ts_numel(t) == n && n <= 64 &&
           ts_copy_to_host(ts_to(ts_to_dtype(t, TS_F64), ts_cpu()), out,
                           (size_t)n * sizeof(double)) == TS_OK;
}

/* Exact comparison up to 1e-12 (infinities must match). */
static void check_values(const char *what, ts_tensor *t, const double *want, int64_t n, int line) {
    double got[64] = {0};
    bool ok = host(t, got, n);
    for (int64_t i = 0; ok && i < n; i++) ok = ts_test_near(got[i], want[i], 1e-12);
    ts_test_record(ok);
    if (!ok) {
        ts_test_failf(__FILE__, line, "%s: wrong gradient%s", what, ts_test_error_str());
        for (int64_t i = 0; i < n && i < 64; i++)
            fprintf(stderr, "  [%lld] got %.17g want %.17g\n", (long long)i, got[i], want[i]);
    }
}
#define CHECK_VALUES(what, t, ...)                                                                 \
    do {                                                                                           \
        const double want_[] = {__VA_ARGS__};                                                      \
        check_values(what, t, want_, (int64_t)(sizeof want_ / sizeof want_[0]), __LINE__);         \
    } while (0)

static void backward_ones(ts_tensor *y) { ts_backward_with(y, ts_ones_like(y)); }

/* ------------------------------------------------------------------ the cases */
typedef ts_tensor *(*unary_fn)(ts_tensor *);
typedef ts_tensor *(*binary_fn)(ts_tensor *, ts_tensor *);
typedef ts_tensor *(*scalar_fn)(ts_tensor *, double);

/* What the gradcheck function runs; the _IP forms apply an in-place op to a non-leaf copy of the
 * first input (an in-place op on a leaf that requires grad is an error). */
typedef enum { K_UNARY, K_UNARY_IP, K_BINARY, K_BINARY_IP, K_SCALAR, K_SCALAR_IP } kind;

typedef struct gcase {
    const char *name;
    kind k;
    unary_fn u;
    binary_fn b;
    scalar_fn sc;
    double s;
    domain da, db;
} gcase;

static ts_tensor *cur_cond; /* where's condition / masked_fill's mask on the current device */

static ts_tensor *clamp_both(ts_tensor *t) { return ts_clamp(t, -0.7, 0.8); }
static ts_tensor *clamp_lo(ts_tensor *t) { return ts_clamp(t, -0.7, NAN); }
static ts_tensor *clamp_hi(ts_tensor *t) { return ts_clamp(t, NAN, 0.8); }
static ts_tensor *clamp_min_(ts_tensor *t) { return ts_clamp_min(t, -0.7); }
static ts_tensor *clamp_max_(ts_tensor *t) { return ts_clamp_max(t, 0.8); }
static ts_tensor *clamp_ip(ts_tensor *t) { return ts_clamp_(t, -0.7, 0.8); }
static ts_tensor *add_alpha(ts_tensor *a, ts_tensor *b) { return ts_add_alpha(a, b, -2.5); }
static ts_tensor *where_ab(ts_tensor *a, ts_tensor *b) { return ts_where(cur_cond, a, b); }
static ts_tensor *masked_fill(ts_tensor *t) { return ts_masked_fill(t, cur_cond, 3.5); }
static ts_tensor *masked_fill_ip(ts_tensor *t) { return ts_masked_fill_(t, cur_cond, 3.5); }

static ts_tensor *run_case(ts_tensor *const *in, int n, void *ctx) {
    (void)n;
    const gcase *c = ctx;
    ts_tensor *x = in[0];
    if (c->k == K_UNARY_IP || c->k == K_BINARY_IP || c->k == K_SCALAR_IP)
        x = ts_mul_scalar(x, 1); /* a non-leaf with x's history */
    switch (c->k) {
    case K_UNARY:
    case K_UNARY_IP:
        return c->u(x);
    case K_BINARY:
    case K_BINARY_IP:
        return c->b(x, in[1]);
    default:
        return c->sc(x, c->s);
    }
}

static const gcase unary_cases[] = {
    {"neg", K_UNARY, .u = ts_neg},
    {"abs", K_UNARY, .u = ts_abs},
    {"exp", K_UNARY, .u = ts_exp},
    {"log", K_UNARY, .u = ts_log, .da = D_POS},
    {"log1p", K_UNARY, .u = ts_log1p, .da = D_POS},
    {"sqrt", K_UNARY, .u = ts_sqrt, .da = D_POS},
    {"rsqrt", K_UNARY, .u = ts_rsqrt, .da = D_POS},
    {"sin", K_UNARY, .u = ts_sin},
    {"cos", K_UNARY, .u = ts_cos},
    {"tan", K_UNARY, .u = ts_tan},
    {"asin", K_UNARY, .u = ts_asin, .da = D_UNIT},
    {"acos", K_UNARY, .u = ts_acos, .da = D_UNIT},
    {"atan", K_UNARY, .u = ts_atan},
    {"sinh", K_UNARY, .u = ts_sinh},
    {"cosh", K_UNARY, .u = ts_cosh},
    {"asinh", K_UNARY, .u = ts_asinh},
    {"acosh", K_UNARY, .u = ts_acosh, .da = D_GT1},
    {"atanh", K_UNARY, .u = ts_atanh, .da = D_UNIT},
    {"erf", K_UNARY, .u = ts_erf},
    {"tanh", K_UNARY, .u = ts_tanh},
    {"sigmoid", K_UNARY, .u = ts_sigmoid},
    {"relu", K_UNARY, .u = ts_relu},
    {"gelu", K_UNARY, .u = ts_gelu},
    {"silu", K_UNARY, .u = ts_silu},
    {"softplus", K_UNARY, .u = ts_softplus, .da = D_SOFT},
    {"sign", K_UNARY, .u = ts_sign},
    {"floor", K_UNARY, .u = ts_floor},
    {"ceil", K_UNARY, .u = ts_ceil},
    {"round", K_UNARY, .u = ts_round},
    {"reciprocal", K_UNARY, .u = ts_reciprocal},
    {"square", K_UNARY, .u = ts_square},
    {"clamp", K_UNARY, .u = clamp_both},
    {"clamp(min only)", K_UNARY, .u = clamp_lo},
    {"clamp(max only)", K_UNARY, .u = clamp_hi},
    {"clamp_min", K_UNARY, .u = clamp_min_},
    {"clamp_max", K_UNARY, .u = clamp_max_},
    {"neg_", K_UNARY_IP, .u = ts_neg_},
    {"abs_", K_UNARY_IP, .u = ts_abs_},
    {"exp_", K_UNARY_IP, .u = ts_exp_},
    {"log_", K_UNARY_IP, .u = ts_log_, .da = D_POS},
    {"sqrt_", K_UNARY_IP, .u = ts_sqrt_, .da = D_POS},
    {"sigmoid_", K_UNARY_IP, .u = ts_sigmoid_},
    {"relu_", K_UNARY_IP, .u = ts_relu_},
    {"tanh_", K_UNARY_IP, .u = ts_tanh_},
    {"clamp_", K_UNARY_IP, .u = clamp_ip},
};

static const gcase binary_cases[] = {
    {"add", K_BINARY, .b = ts_add},
    {"sub", K_BINARY, .b = ts_sub},
    {"mul", K_BINARY, .b = ts_mul},
    {"div", K_BINARY, .b = ts_div},
    {"pow", K_BINARY, .b = ts_pow, .da = D_POS},
    {"maximum", K_BINARY, .b = ts_maximum},
    {"minimum", K_BINARY, .b = ts_minimum},
    {"fmod", K_BINARY, .b = ts_fmod},
    {"add_alpha", K_BINARY, .b = add_alpha},
    {"add_", K_BINARY_IP, .b = ts_add_},
    {"sub_", K_BINARY_IP, .b = ts_sub_},
    {"mul_", K_BINARY_IP, .b = ts_mul_},
    {"div_", K_BINARY_IP, .b = ts_div_},
    {"pow_", K_BINARY_IP, .b = ts_pow_, .da = D_POS},
};

static const gcase scalar_cases[] = {
    {"add_scalar", K_SCALAR, .sc = ts_add_scalar, .s = 1.5},
    {"sub_scalar", K_SCALAR, .sc = ts_sub_scalar, .s = 1.5},
    {"rsub_scalar", K_SCALAR, .sc = ts_rsub_scalar, .s = 1.5},
    {"mul_scalar", K_SCALAR, .sc = ts_mul_scalar, .s = -2.5},
    {"div_scalar", K_SCALAR, .sc = ts_div_scalar, .s = -2.5},
    {"pow_scalar(2.5)", K_SCALAR, .sc = ts_pow_scalar, .s = 2.5, .da = D_POS},
    {"pow_scalar(3)", K_SCALAR, .sc = ts_pow_scalar, .s = 3},
    {"pow_scalar(-1)", K_SCALAR, .sc = ts_pow_scalar, .s = -1},
    {"pow_scalar(0)", K_SCALAR, .sc = ts_pow_scalar, .s = 0},
    {"rpow_scalar", K_SCALAR, .sc = ts_rpow_scalar, .s = 2.5},
    {"maximum_scalar", K_SCALAR, .sc = ts_maximum_scalar, .s = 0.2},
    {"minimum_scalar", K_SCALAR, .sc = ts_minimum_scalar, .s = 0.2},
    {"fmod_scalar", K_SCALAR, .sc = ts_fmod_scalar, .s = 0.7},
    {"add_scalar_", K_SCALAR_IP, .sc = ts_add_scalar_, .s = 1.5},
    {"sub_scalar_", K_SCALAR_IP, .sc = ts_sub_scalar_, .s = 1.5},
    {"mul_scalar_", K_SCALAR_IP, .sc = ts_mul_scalar_, .s = -2.5},
    {"div_scalar_", K_SCALAR_IP, .sc = ts_div_scalar_, .s = -2.5},
    {"pow_scalar_", K_SCALAR_IP, .sc = ts_pow_scalar_, .s = 2.5, .da = D_POS},
};

/* ------------------------------------------------------------------ gradcheck */
static void gc(const char *name, const char *shapes, ts_device dev, const gcase *c,
               ts_tensor *const *in, int n) {
    bool ok = ts_gradcheck(run_case, (void *)c, in, n, (ts_gradcheck_opts){0});
    printf("gradcheck %s%s %s %s\n", name, shapes, ts_device_str(dev), ok ? "ok" : "FAIL");
    ts_test_record(ok);
    if (!ok) {
        ts_test_failf(__FILE__, __LINE__, "gradcheck %s%s on %s failed%s", name, shapes,
                      ts_device_str(dev), ts_test_error_str());
        ts_error_clear();
    }
}

static void test_gradcheck(ts_device dev) {
    const int nu = (int)(sizeof unary_cases / sizeof unary_cases[0]);
    const int nb = (int)(sizeof binary_cases / sizeof binary_cases[0]);
    const int ns = (int)(sizeof scalar_cases / sizeof scalar_cases[0]);
    for (int i = 0; i < nu; i++) {
        ts_scope_begin();
        ts_tensor *x = leaf(TS_SHAPE(2, 3), dev, unary_cases[i].da);
        gc(unary_cases[i].name, "", dev, &unary_cases[i], &x, 1);
        ts_scope_end();
    }
    /* broadcasting both ways, a 0-dim operand, and (in place) b broadcast into the destination */
    const ts_shape sa[3] = {TS_SHAPE(2, 3), TS_SHAPE(3, 1), TS_SHAPE(2, 3)};
    const ts_shape sb[3] = {TS_SHAPE(3), TS_SHAPE(2, 1, 4), TS_SHAPE()};
    const char *sn[3] = {" [2,3]x[3]", " [3,1]x[2,1,4]", " [2,3]x[]"};
    for (int i = 0; i < nb; i++) {
        const gcase *c = &binary_cases[i];
        for (int v = 0; v < (c->k == K_BINARY_IP ? 1 : 3); v++) {
            ts_scope_begin();
            ts_tensor *in[2] = {leaf(sa[v], dev, c->da), leaf(sb[v], dev, c->db)};
            gc(c->name, sn[v], dev, c, in, 2);
            ts_scope_end();
        }
    }
    for (int i = 0; i < ns; i++) {
        ts_scope_begin();
        ts_tensor *x = leaf(TS_SHAPE(2, 3), dev, scalar_cases[i].da);
        gc(scalar_cases[i].name, "", dev, &scalar_cases[i], &x, 1);
        ts_scope_end();
    }

    ts_scope_begin();
    const bool cv[6] = {true, false, false, true, true, false};
    cur_cond = ts_from_data(TS_SHAPE(2, 3), TS_BOOL, cv, (ts_opts){.device = dev});
    const gcase wc = {"where", K_BINARY, .b = where_ab};
    ts_tensor *w1[2] = {leaf(TS_SHAPE(2, 3), dev, D_ANY), leaf(TS_SHAPE(3), dev, D_ANY)};
    gc("where", " [2,3]x[3]", dev, &wc, w1, 2);
    const gcase mf = {"masked_fill", K_UNARY, .u = masked_fill};
    const gcase mf_ip = {"masked_fill_", K_UNARY_IP, .u = masked_fill_ip};
    ts_tensor *m1 = leaf(TS_SHAPE(2, 3), dev, D_ANY), *m2 = leaf(TS_SHAPE(3), dev, D_ANY);
    gc("masked_fill", " [2,3]", dev, &mf, &m1, 1);
    gc("masked_fill", " [3] mask [2,3]", dev, &mf, &m2, 1);
    gc("masked_fill_", " [2,3]", dev, &mf_ip, &m1, 1);
    cur_cond = NULL;
    if (dev.type == TS_SIM) { /* a 0-dim cpu operand that requires grad next to a sim tensor */
        const gcase mc = {"mul", K_BINARY, .b = ts_mul};
        ts_tensor *mx[2] = {leaf(TS_SHAPE(2, 3), dev, D_ANY), leaf(TS_SHAPE(), ts_cpu(), D_ANY)};
        gc("mul", " [2,3] sim x [] cpu", dev, &mc, mx, 2);
    }
    ts_scope_end();
}

/* ------------------------------------------------------------------ exact gradients */
static void test_exact(ts_device dev) {
    ts_scope_begin();
    /* d/dx sum(x * x) = 2x: both operands are the same leaf */
    ts_tensor *x = values(TS_SHAPE(3), (double[]){1, 2, -3}, dev, true);
    backward_ones(ts_mul(x, x));
    CHECK_OK();
    CHECK_VALUES("x*x", ts_grad(x), 2, 4, -6);

    /* broadcast: a [2,3] * b [3] -> grad b = column sums of a, grad a = b in every row */
    ts_tensor *a = values(TS_SHAPE(2, 3), (double[]){1, 2, 3, 4, 5, 6}, dev, true);
    ts_tensor *b = values(TS_SHAPE(3), (double[]){1, 2, 3}, dev, true);
    backward_ones(ts_mul(a, b));
    CHECK(ts_shape_of(ts_grad(b)).ndim == 1 && ts_size(ts_grad(b), 0) == 3);
    CHECK_VALUES("mul broadcast b", ts_grad(b), 5, 7, 9);
    CHECK_VALUES("mul broadcast a", ts_grad(a), 1, 2, 3, 1, 2, 3);

    /* [2,1] + [1,3] -> each grad summed over the other's dims, keeping size-1 dims */
    ts_tensor *c = values(TS_SHAPE(2, 1), (double[]){1, 2}, dev, true);
    ts_tensor *d = values(TS_SHAPE(1, 3), (double[]){1, 2, 3}, dev, true);
    backward_ones(ts_sub(c, d));
    CHECK(ts_ndim(ts_grad(c)) == 2 && ts_size(ts_grad(c), 0) == 2 && ts_size(ts_grad(c), 1) == 1);
    CHECK(ts_ndim(ts_grad(d)) == 2 && ts_size(ts_grad(d), 0) == 1 && ts_size(ts_grad(d), 1) == 3);
    CHECK_VALUES("sub broadcast a", ts_grad(c), 3, 3);
    CHECK_VALUES("sub broadcast b", ts_grad(d), -2, -2, -2);

    /* add_alpha: grad b = alpha * g */
    ts_tensor *e = values(TS_SHAPE(2), (double[]){1, 2}, dev, true);
    ts_tensor *f = values(TS_SHAPE(2), (double[]){3, 4}, dev, true);
    backward_ones(ts_add_alpha(e, f, 3));
    CHECK_VALUES("add_alpha a", ts_grad(e), 1, 1);
    CHECK_VALUES("add_alpha b", ts_grad(f), 3, 3);

    /* relu and abs at 0, inclusive clamp bounds, softplus past its threshold:
     * torch.relu / abs / clamp(0, 2) / softplus of tensor([0., -1., 2.]) (or [0., -1., 21.]) */
    ts_tensor *z = values(TS_SHAPE(3), (double[]){0, -1, 2}, dev, true);
    backward_ones(ts_relu(z));
    CHECK_VALUES("relu at 0", ts_grad(z), 0, 0, 1);
    ts_set_grad(z, NULL);
    backward_ones(ts_abs(z));
    CHECK_VALUES("abs at 0", ts_grad(z), 0, -1, 1);
    ts_set_grad(z, NULL);
    backward_ones(ts_clamp(z, 0, 2));
    CHECK_VALUES("clamp bounds", ts_grad(z), 1, 0, 1);
    ts_tensor *sp = values(TS_SHAPE(3), (double[]){0, -1, 21}, dev, true);
    backward_ones(ts_softplus(sp));
    CHECK_VALUES("softplus", ts_grad(sp), 0.5, 1 / (1 + exp(1.0)), 1);
    /* gelu'(x) = Phi(x) + x phi(x) at 0 and 1 (erf form) */
    ts_tensor *ge = values(TS_SHAPE(2), (double[]){0, 1}, dev, true);
    backward_ones(ts_gelu(ge));
    CHECK_VALUES("gelu", ts_grad(ge), 0.5,
                 0.5 * (1 + erf(1 / sqrt(2.0))) + exp(-0.5) / sqrt(2 * 3.141592653589793));

    /* maximum / minimum split ties in halves: torch.maximum([1,2,3], [2,2,2]) */
    ts_tensor *p = values(TS_SHAPE(3), (double[]){1, 2, 3}, dev, true);
    ts_tensor *q = values(TS_SHAPE(3), (double[]){2, 2, 2}, dev, true);
    backward_ones(ts_maximum(p, q));
    CHECK_VALUES("maximum a", ts_grad(p), 0, 0.5, 1);
    CHECK_VALUES("maximum b", ts_grad(q), 1, 0.5, 0);
    ts_set_grad(p, NULL);
    ts_set_grad(q, NULL);
    backward_ones(ts_minimum(p, q));
    CHECK_VALUES("minimum a", ts_grad(p), 1, 0.5, 0);
    CHECK_VALUES("minimum b", ts_grad(q), 0, 0.5, 1);
    ts_set_grad(p, NULL);
    backward_ones(ts_maximum_scalar(p, 2));
    CHECK_VALUES("maximum_scalar", ts_grad(p), 0, 0.5, 1);

    /* pow at a == 0: torch a=[0,0,0,2], b=[0,1,-1,0]: a.grad [0,1,-inf,0], b.grad [0,0,-inf,ln 2]
     */
    ts_tensor *pa = values(TS_SHAPE(4), (double[]){0, 0, 0, 2}, dev, true);
    ts_tensor *pb = values(TS_SHAPE(4), (double[]){0, 1, -1, 0}, dev, true);
    backward_ones(ts_pow(pa, pb));
    CHECK_VALUES("pow base", ts_grad(pa), 0, 1, -INFINITY, 0);
    CHECK_VALUES("pow exponent", ts_grad(pb), 0, 0, -INFINITY, log(2.0));
    /* 0 ** a: torch.pow(0, tensor([0., -1., 2.])) -> [0, -inf, 0]; a ** 0 -> zeros */
    ts_tensor *r0 = values(TS_SHAPE(3), (double[]){0, -1, 2}, dev, true);
    backward_ones(ts_rpow_scalar(r0, 0));
    CHECK_VALUES("rpow base 0", ts_grad(r0), 0, -INFINITY, 0);
    ts_set_grad(r0, NULL);
    backward_ones(ts_pow_scalar(r0, 0));
    CHECK_VALUES("pow exponent 0", ts_grad(r0), 0, 0, 0);

    /* fmod: grad b = -g trunc(a / b): fmod([7, -7], [2, 2]) -> b.grad [-3, 3] */
    ts_tensor *fa = values(TS_SHAPE(2), (double[]){7, -7}, dev, true);
    ts_tensor *fb = values(TS_SHAPE(2), (double[]){2, 2}, dev, true);
    backward_ones(ts_fmod(fa, fb));
    CHECK_VALUES("fmod a", ts_grad(fa), 1, 1);
    CHECK_VALUES("fmod b", ts_grad(fb), -3, 3);

    /* where: gradient to a where cond, to b elsewhere (b broadcast: summed) */
    const bool cv[4] = {true, false, true, true};
    ts_tensor *cond = ts_from_data(TS_SHAPE(2, 2), TS_BOOL, cv, (ts_opts){.device = dev});
    ts_tensor *wa = values(TS_SHAPE(2, 2), (double[]){1, 2, 3, 4}, dev, true);
    ts_tensor *wb = values(TS_SHAPE(2), (double[]){5, 6}, dev, true);
    backward_ones(ts_where(cond, wa, wb));
    CHECK_VALUES("where a", ts_grad(wa), 1, 0, 1, 1);
    CHECK_VALUES("where b", ts_grad(wb), 0, 1);
    CHECK(ts_grad(cond) == NULL && !ts_requires_grad(cond));

    /* masked_fill: zero where the mask is set; in place rebases the destination's history */
    ts_tensor *mt = values(TS_SHAPE(2, 2), (double[]){1, 2, 3, 4}, dev, true);
    backward_ones(ts_masked_fill(mt, cond, 9));
    CHECK_VALUES("masked_fill", ts_grad(mt), 0, 1, 0, 0);
    ts_set_grad(mt, NULL);
    ts_tensor *mm = ts_mul_scalar(mt, 2);
    ts_masked_fill_(mm, cond, 9);
    CHECK_STREQ(ts_grad_fn_name(mm), "MaskedFillBackward0");
    backward_ones(mm);
    CHECK_VALUES("masked_fill_", ts_grad(mt), 0, 2, 0, 0);

    /* in place on a tensor that does not require grad, with an operand that does */
    ts_tensor *acc = ts_zeros(TS_SHAPE(2), (ts_opts){.dtype = TS_F64, .device = dev});
    ts_tensor *src = values(TS_SHAPE(2), (double[]){1, 2}, dev, true);
    ts_mul_(ts_add_(acc, src), src); /* acc = src * src */
    CHECK(ts_requires_grad(acc) && !ts_is_leaf(acc));
    backward_ones(acc);
    CHECK_VALUES("add_ then mul_", ts_grad(src), 2, 4);
    CHECK_OK();
    ts_scope_end();
}

/* ------------------------------------------------------------------ dtypes and devices */
static void test_dtypes(ts_device dev) {
    ts_scope_begin();
    /* f32 inputs get f32 gradients */
    ts_tensor *x = ts_tensor_f32(TS_SHAPE(3), (float[]){0.5f, -1, 2},
                                 (ts_opts){.device = dev, .requires_grad = true});
    backward_ones(ts_exp(x));
    CHECK(ts_grad(x) && ts_dtype_of(ts_grad(x)) == TS_F32);
    float gv[3] = {0};
    CHECK(ts_copy_to_host(ts_to(ts_grad(x), ts_cpu()), gv, sizeof gv) == TS_OK);
    CHECK_NEAR(gv[0], expf(0.5f), 1e-6);
    CHECK_NEAR(gv[2], expf(2.0f), 1e-6);

    /* f16 + f32 -> f32 result; each grad in its input's dtype */
    ts_tensor *h = ts_to_dtype(
        ts_tensor_f32(TS_SHAPE(3), (float[]){1, 2, 3}, (ts_opts){.device = dev}), TS_F16);
    ts_set_requires_grad(h, true);
    ts_tensor *y = ts_tensor_f32(TS_SHAPE(3), (float[]){4, 5, 6},
                                 (ts_opts){.device = dev, .requires_grad = true});
    ts_tensor *hy = ts_mul(h, y);
    CHECK(ts_dtype_of(hy) == TS_F32);
    backward_ones(hy);
    CHECK(ts_grad(h) && ts_dtype_of(ts_grad(h)) == TS_F16);
    CHECK(ts_grad(y) && ts_dtype_of(ts_grad(y)) == TS_F32);
    CHECK_VALUES("f16 * f32 -> f16 grad", ts_grad(h), 4, 5, 6);
    CHECK_VALUES("f16 * f32 -> f32 grad", ts_grad(y), 1, 2, 3);

    /* a 0-dim f64 operand next to an f32 tensor: the result stays f32, the grad is f64 */
    ts_tensor *s = ts_scalar(2, (ts_opts){.dtype = TS_F64, .device = dev, .requires_grad = true});
    ts_tensor *xs = ts_mul(x, s);
    CHECK(ts_dtype_of(xs) == TS_F32);
    backward_ones(xs);
    CHECK(ts_grad(s) && ts_dtype_of(ts_grad(s)) == TS_F64 && ts_ndim(ts_grad(s)) == 0);
    CHECK_NEAR(ts_item(ts_grad(s)), 1.5, 1e-6);

    if (dev.type == TS_SIM) { /* a cpu 0-dim operand gets its gradient on the cpu */
        ts_tensor *c =
            ts_scalar(3, (ts_opts){.dtype = TS_F64, .device = ts_cpu(), .requires_grad = true});
        ts_tensor *t = values(TS_SHAPE(2), (double[]){1, 2}, dev, true);
        ts_tensor *tc = ts_mul(t, c);
        CHECK(tc && ts_device_equal(ts_device_of(tc), dev));
        backward_ones(tc);
        CHECK_OK();
        CHECK(ts_grad(c) && ts_device_equal(ts_device_of(ts_grad(c)), ts_cpu()));
        CHECK_NEAR(ts_item(ts_grad(c)), 3, 0);
        CHECK_VALUES("sim * cpu scalar", ts_grad(t), 3, 3);
    }
    CHECK_OK();
    ts_scope_end();
}

/* ------------------------------------------------------------------ names and graph rules */
static void test_names(ts_device dev) {
    ts_scope_begin();
    ts_tensor *x = leaf(TS_SHAPE(3), dev, D_POS), *y = leaf(TS_SHAPE(3), dev, D_POS);
    CHECK_STREQ(ts_grad_fn_name(ts_exp(x)), "ExpBackward0");
    CHECK_STREQ(ts_grad_fn_name(ts_add(x, y)), "AddBackward0");
    CHECK_STREQ(ts_grad_fn_name(ts_add_scalar(x, 2)), "AddBackward0");
    CHECK_STREQ(ts_grad_fn_name(ts_rsub_scalar(x, 2)), "RsubBackward1");
    CHECK_STREQ(ts_grad_fn_name(ts_pow(x, y)), "PowBackward1");
    CHECK_STREQ(ts_grad_fn_name(ts_pow_scalar(x, 2)), "PowBackward0");
    CHECK_STREQ(ts_grad_fn_name(ts_square(x)), "PowBackward0");
    CHECK_STREQ(ts_grad_fn_name(ts_fmod_scalar(x, 2)), "FmodBackward0");
    CHECK_STREQ(ts_grad_fn_name(ts_fmod(x, y)), "FmodBackward1");
    CHECK_STREQ(ts_grad_fn_name(ts_clamp(x, 0, 1)), "ClampBackward1");
    CHECK_STREQ(ts_grad_fn_name(ts_clamp_min(x, 0)), "ClampMinBackward0");
    CHECK_STREQ(ts_grad_fn_name(ts_clamp_max(x, 1)), "ClampMaxBackward0");
    CHECK_STREQ(ts_grad_fn_name(ts_maximum(x, y)), "MaximumBackward0");
    CHECK_STREQ(ts_grad_fn_name(ts_log1p(x)), "Log1PBackward0");
    CHECK_STREQ(ts_grad_fn_name(ts_gelu(x)), "GeluBackward0");
    ts_tensor *nl = ts_mul_scalar(x, 1);
    CHECK_STREQ(ts_grad_fn_name(ts_relu_(nl)), "ReluBackward0");
    CHECK_STREQ(ts_grad_fn_name(ts_add_(nl, y)), "AddBackward0");
    CHECK_STREQ(ts_grad_fn_name(ts_pow_scalar_(nl, 2)), "PowBackward0");
    /* comparisons and logical ops are not differentiable */
    ts_tensor *lt = ts_lt(x, y);
    CHECK(lt && !ts_requires_grad(lt) && ts_grad_fn_name(lt) == NULL);
    CHECK(!ts_requires_grad(ts_eq_scalar(x, 1)));
    CHECK(!ts_requires_grad(ts_logical_not(lt)));
    /* no graph under no_grad, and no graph without an input that requires grad */
    ts_no_grad_begin();
    CHECK(!ts_requires_grad(ts_exp(x)));
    ts_no_grad_end();
    CHECK(!ts_requires_grad(ts_exp(ts_detach(x))));
    CHECK_OK();
    ts_scope_end();
}

static void test_inplace_errors(ts_device dev) {
    ts_scope_begin();
    ts_tensor *x = leaf(TS_SHAPE(3), dev, D_ANY), *w = leaf(TS_SHAPE(3), dev, D_ANY);
    /* y is saved by exp (its output) and by mul; changing it in place breaks both */
    ts_tensor *y = ts_exp(x);
    ts_tensor *z = ts_mul(y, w);
    CHECK(ts_add_scalar_(y, 1) != NULL);
    CHECK_OK();
    CHECK_STREQ(ts_grad_fn_name(y), "AddBackward0");
    backward_ones(z);
    CHECK(strstr(ts_error_message(), "modified by an inplace operation") != NULL);
    CHECK_ERR(TS_ERR_STATE);

    /* an in-place op on a leaf that requires grad is an error, allowed under no_grad */
    CHECK(ts_add_scalar_(x, 1) == NULL);
    CHECK_ERR(TS_ERR_STATE);
    CHECK(ts_relu_(x) == NULL);
    CHECK_ERR(TS_ERR_STATE);
    CHECK(ts_clamp_(x, 0, 1) == NULL);
    CHECK_ERR(TS_ERR_STATE);
    CHECK(ts_masked_fill_(x, ts_gt_scalar(x, 0), 0) == NULL);
    CHECK_ERR(TS_ERR_STATE);
    CHECK(ts_mul_(x, w) == NULL);
    CHECK_ERR(TS_ERR_STATE);
    ts_no_grad_begin();
    CHECK(ts_add_scalar_(x, 1) != NULL);
    ts_no_grad_end();
    CHECK_OK();
    CHECK(ts_is_leaf(x) && ts_grad_fn_name(x) == NULL);

    /* a view written with an operand that requires grad: its base joins the graph (CopySlices;
     * tests/test_autograd_inplace_view.c checks the gradients) */
    ts_tensor *base = ts_zeros(TS_SHAPE(2, 3), (ts_opts){.dtype = TS_F64, .device = dev});
    CHECK(ts_add_(ts_select(base, 0, 1), w) != NULL);
    CHECK_OK();
    CHECK(ts_requires_grad(base));
    CHECK_STREQ(ts_grad_fn_name(base), "CopySlices");

    /* a failed in-place op leaves the destination's history alone */
    ts_tensor *u = ts_mul_scalar(x, 2);
    CHECK(ts_add_(u, leaf(TS_SHAPE(4), dev, D_ANY)) == NULL);
    CHECK_ERR(TS_ERR_SHAPE);
    CHECK_STREQ(ts_grad_fn_name(u), "MulBackward0");
    ts_scope_end();
}

/* ts_silu_ writes x * sigmoid(x) into its operand and returns it; the backward uses the values
 * before the write (PyTorch keeps silu_'s input), against the float64 formula */
static void test_silu_inplace(ts_device dev) {
    ts_scope_begin();
    const double v[4] = {-2.0, -0.5, 0.0, 1.5};
    ts_tensor *x = values(TS_SHAPE(4), v, dev, true);
    ts_tensor *y = ts_mul_scalar(x, 1);
    CHECK(ts_silu_(y) == y);
    CHECK_STREQ(ts_grad_fn_name(y), "SiluBackward0");
    CHECK_EQ(ts_backward(ts_sum(y)), TS_OK);
    double got[4], g[4];
    CHECK(host(y, got, 4) && host(ts_grad(x), g, 4));
    for (int i = 0; i < 4; i++) {
        const double s = 1 / (1 + exp(-v[i]));
        CHECK(fabs(got[i] - v[i] * s) <= 1e-15 * (1 + fabs(v[i])));
        CHECK(fabs(g[i] - s * (1 + v[i] * (1 - s))) <= 1e-14);
    }
    CHECK(ts_silu_(x) == NULL); /* a leaf that requires grad */
    CHECK_ERR(TS_ERR_STATE);
    ts_scope_end();
}

int main(void) {
    ts_device devs[TS_TEST_MAX_DEVICES];
    int ndev = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    for (int i = 0; i < ndev; i++) {
        test_gradcheck(devs[i]);
        test_exact(devs[i]);
        test_dtypes(devs[i]);
        test_names(devs[i]);
        test_inplace_errors(devs[i]);
        test_silu_inplace(devs[i]);
    }
    return ts_test_finish();
}
