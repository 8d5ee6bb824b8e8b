/* test_cross_entropy_fused.c — cross_entropy through the backend's fused kernels
 * (cross_entropy_forward / _backward: CUDA's cuda_cross_entropy.cu) against a reference computed
 * here in long double: the loss and the logits' gradient for the reductions none (under a random
 * upstream gradient), sum and mean; float32, float64, float16 and bfloat16 logits; 10, 1000 and
 * 50257 classes (warp rows, block rows, odd rows that leave the next row unaligned); 1 .. 4096
 * rows; label smoothing 0 and 0.1; no target ignored, some (the default -100, and a class index as
 * ignore_index) and all of them; logits one element into their storage (no row 16-byte aligned
 * like the gradient's: the element-by-element path); an unbatched [C] input; rows with a NaN, a
 * +inf, -inf entries, a -inf target and all -inf; the grad_fn (CrossEntropyLossBackward0 for the
 * per-row losses); a captured step replayed with new targets, ignored ones (counted on the device)
 * and out-of-range ones (clamped, as the composition clamps them there).
 *
 * Tolerances come from the arithmetic, with u_a the unit roundoff of the compute type (float;
 * double for float64), u_t that of the logits' dtype, and u_m that of the per-element
 * log-probabilities (u_a in the fused kernels; u_t in the composition, which keeps log_softmax's
 * output in the logits' dtype). A row's normaliser sums C exponentials (each within 2 ulp) in at
 * most C/32 + 24 steps per term (a lane's share, the shuffle tree, the online rescales), so its log
 * is within u_a (4 depth + 8), depth = C/32 + 24; each per-row quantity (lse, x - lse, the
 * smoothing term's mean) adds a few roundings of its size, 8 u_m (|lse| + max|x|), and the mean of
 * the row adds eps depth u_a max|x|. Reductions add a rounding of their result (u_a), and a
 * float16 / bfloat16 result its rounding to the dtype (once in the fused path; up to 6 roundings in
 * the composition). A gradient element g (p - (1 - eps) [j == t] - eps / C) is off by g p times
 * the error of x - lse plus 4 u_m (p + ...) and its own rounding; float16 gradients below its
 * normal range round to a multiple of 2^-24.
 *
 * Skips without a CUDA device (a failure under TS_REQUIRE_CUDA=1). TS_TEST_CE_DEVICE=sim:0 runs
 * it against a device without the fused kernels — the composition in src/nn/loss_ce.c, with its
 * bounds — which checks the test itself on a machine without a GPU; TS_TEST_CE_SMALL=1 leaves
 * out the largest shapes there. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "ts_test.h"

static ts_device dev; /* the device under test */
static bool fused;    /* its backend has the fused entries */

/* ------------------------------------------------------------------ host helpers */
static uint64_t lcg = 0x9E3779B97F4A7C15ULL;
static double uniform(double lo, double hi) {
    lcg = lcg * 6364136223846793005ULL + 1442695040888963407ULL;
    return lo + (hi - lo) * (double)(lcg >> 11) / 9007199254740992.0;
}

static double unit_of(ts_dtype dt) {
    switch (dt) {
    case TS_F64:
        return ldexp(1, -53);
    case TS_F16:
        return ldexp(1, -11);
    case TS_BF16:
        return ldexp(1, -8);
    default:
        return ldexp(1, -24);
    }
}

/* t's values as double on the host (n of them, malloc'ed); NULL on error */
static double *host_values(ts_tensor *t, int64_t n) {
    ts_scope_begin();
    ts_tensor *c = ts_contiguous(ts_to_dtype(ts_to(t, ts_cpu()), TS_F64));
    double *v = c && ts_numel(c) == n ? malloc((size_t)(n > 0 ? n : 1) * sizeof *v) : NULL;
    if (v && ts_copy_to_host(c, v, (size_t)n * sizeof *v) != TS_OK) free(v), v = NULL;
    ts_scope_end();
    return v;
}

/* A tensor of dtype dt on the device under test holding v (n values, rounded to dt); v is
 * overwritten with the rounded values. shape: the tensor's. */
static ts_tensor *device_tensor(double *v, ts_shape shape, ts_dtype dt) {
    ts_tensor *h = ts_to_dtype(ts_from_data(shape, TS_F64, v, (ts_opts){.device = ts_cpu()}), dt);
    double *r = host_values(h, ts_numel(h));
    if (r) memcpy(v, r, (size_t)ts_numel(h) * sizeof *v), free(r);
    return ts_to(h, dev);
}

/* |got - want| <= tol, NaN matching NaN and an infinity itself */
static bool near(double got, double want, double tol) {
    if (isnan(want) || isnan(got)) return isnan(want) && isnan(got);
    if (isinf(want) || isinf(got)) return got == want;
    return fabs(got - want) <= tol;
}

/* ------------------------------------------------------------------ cases */
typedef enum { IGN_NONE, IGN_SOME, IGN_ALL } ign_kind;

typedef struct ce_case {
    int64_t rows, classes;
    ts_dtype dt;
    double eps;
    ign_kind ign;
    int64_t ignore_index; /* -100 (the default) or a class */
    bool unbatched;       /* a [C] input with a 0-dim target (rows 1) */
    bool offset;          /* the logits one element into their storage */
    bool special;         /* rows with NaN, +inf, -inf */
} ce_case;

/* The reference of one data set: per row its lse, loss and ignored flag. */
typedef struct ce_ref {
    int64_t rows, classes;
    double *x;     /* the logits as rounded to the dtype */
    int64_t *tg;   /* targets */
    double *lse;   /* per row (NaN by log_softmax's rule) */
    double *loss;  /* per row, 0 where ignored */
    double *tol;   /* per row: the loss's bound before the reduction's own rounding */
    double *maxab; /* per row: max |x| over the finite entries */
    bool *ign;
    int64_t counted; /* rows not ignored */
} ce_ref;

static ce_ref ref_new(int64_t rows, int64_t classes) {
    const size_t n = (size_t)rows;
    return (ce_ref){.rows = rows,
                    .classes = classes,
                    .x = malloc(sizeof(double) * (size_t)(rows * classes + 1)),
                    .tg = malloc(sizeof(int64_t) * n),
                    .lse = malloc(sizeof(double) * n),
                    .loss = malloc(sizeof(double) * n),
                    .tol = malloc(sizeof(double) * n),
                    .maxab = malloc(sizeof(double) * n),
                    .ign = malloc(sizeof(bool) * n)};
}
static void ref_free(ce_ref *R) {
    free(R->x), free(R->tg), free(R->lse), free(R->loss), free(R->tol), free(R->maxab);
    free(R->ign);
}

typedef struct tol_ctx {
    double ua, ut, um;
    int half_roundings; /* roundings of a result to a half dtype */
    double tiny;        /* float16's subnormal spacing / 2 times the roundings */
} tol_ctx;

static tol_ctx tol_for(ts_dtype dt) {
    tol_ctx t;
    t.ua = dt == TS_F64 ? ldexp(1, -53) : ldexp(1, -24);
    t.ut = unit_of(dt);
    t.um = fused ? t.ua : t.ut;
    t.half_roundings = fused ? 1 : 6;
    t.tiny = dt == TS_F16 ? ldexp(1, -25) * (fused ? 1 : 8) : 0;
    if (dt != TS_F16 && dt != TS_BF16) t.half_roundings = 0;
    return t;
}

static double depth_of(int64_t classes) { return (double)classes / 32 + 24; }

static void compute_ref(ce_ref *R, const ce_case *c, const tol_ctx *T) {
    const int64_t C = R->classes;
    const double depth = depth_of(C);
    R->counted = 0;
    for (int64_t r = 0; r < R->rows; r++) {
        const double *x = R->x + r * C;
        long double m = -INFINITY, s = 0, sum = 0;
        bool nan = false;
        double mx = 0;
        for (int64_t j = 0; j < C; j++) {
            if (isnan(x[j]) || x[j] == INFINITY) nan = true;
            if (x[j] > m) m = x[j];
            if (isfinite(x[j]) && fabs(x[j]) > mx) mx = fabs(x[j]);
            sum += x[j];
        }
        for (int64_t j = 0; !nan && m > -INFINITY && j < C; j++) s += expl(x[j] - m);
        const long double lse = nan || m == -INFINITY ? NAN : m + logl(s);
        R->lse[r] = (double)lse;
        R->maxab[r] = mx;
        R->ign[r] = R->tg[r] == c->ignore_index;
        if (R->ign[r]) {
            R->loss[r] = 0;
        } else {
            R->counted++;
            long double l = (1 - (long double)c->eps) * (lse - x[R->tg[r]]);
            if (c->eps > 0) l += (long double)c->eps * (lse - sum / C);
            R->loss[r] = (double)l;
        }
        R->tol[r] = R->ign[r] ? 0
                              : T->ua * (4 * depth + 8) + 8 * T->um * (fabs(R->lse[r]) + mx) +
                                    c->eps * depth * T->ua * mx;
    }
}

/* the upstream gradient of each row's loss under reduction red (w: none's random weights) */
static double row_grad(ts_reduction red, const double *w, int64_t r, const ce_ref *R) {
    return red == TS_REDUCTION_NONE ? w[r] : red == TS_REDUCTION_SUM ? 1.0 : 1.0 / R->counted;
}

static const char *red_name(ts_reduction r) {
    return r == TS_REDUCTION_NONE ? "none" : r == TS_REDUCTION_SUM ? "sum" : "mean";
}
static const char *dt_name(ts_dtype dt) {
    return dt == TS_F64 ? "f64" : dt == TS_F16 ? "f16" : dt == TS_BF16 ? "bf16" : "f32";
}

/* The composition's float16 smoothing term sums C log-probabilities per row, and then the rows,
 * in float16: past 65504 it is +inf (the fused kernels sum in float). Accepted in the composition's
 * runs only. */
static bool composition_overflow(const ce_case *c, double got) {
    return !fused && c->dt == TS_F16 && c->eps > 0 && got == INFINITY;
}

/* The loss of reduction red against the reference; prints the first mismatch. */
static bool check_loss(ts_tensor *y, ts_reduction red, const ce_case *c, const ce_ref *R,
                       const tol_ctx *T) {
    const int64_t n = red == TS_REDUCTION_NONE ? R->rows : 1;
    if (!y || ts_numel(y) != n || ts_dtype_of(y) != c->dt) {
        printf("  loss: no result or wrong numel / dtype%s\n", ts_test_error_str());
        return false;
    }
    double *got = host_values(y, n);
    if (!got) return false;
    bool ok = true;
    if (red == TS_REDUCTION_NONE) {
        for (int64_t r = 0; ok && r < R->rows; r++) {
            const double tol = R->tol[r] + (T->half_roundings + 1) * T->ut * fabs(R->loss[r]);
            ok = near(got[r], R->loss[r], tol) || composition_overflow(c, got[r]);
            if (!ok)
                printf("  loss row %lld: got %.17g, want %.17g (tol %.3g)\n", (long long)r, got[r],
                       R->loss[r], tol);
        }
    } else {
        long double want = 0;
        double tol = 0;
        for (int64_t r = 0; r < R->rows; r++) want += R->loss[r], tol += R->tol[r];
        if (red == TS_REDUCTION_MEAN) want /= R->counted, tol /= (double)R->counted;
        const double w = (double)want;
        tol += (2 * T->ua + (T->half_roundings + 1) * T->ut) * fabs(w);
        ok = near(got[0], w, tol) || composition_overflow(c, got[0]);
        if (!ok)
            printf("  loss %s: got %.17g, want %.17g (tol %.3g)\n", red_name(red), got[0], w, tol);
    }
    free(got);
    return ok;
}

/* The gradient of the logits against the reference; prints the first mismatch. */
static bool check_grad(ts_tensor *gx, ts_reduction red, const double *w, const ce_case *c,
                       const ce_ref *R, const tol_ctx *T) {
    const int64_t C = R->classes, n = R->rows * C;
    if (!gx) {
        printf("  grad: none%s\n", ts_test_error_str());
        return false;
    }
    double *got = host_values(gx, n + (c->offset ? 1 : 0));
    if (!got) return false;
    const double *g0 = got + (c->offset ? 1 : 0);
    bool ok = !c->offset || got[0] == 0; /* the element before the logits gets nothing */
    if (!ok) printf("  grad: the element before the logits is %g\n", got[0]);
    const double base = T->ua * (4 * depth_of(C) + 8);
    const double on = 1 - c->eps, spread = c->eps / (double)C;
    for (int64_t r = 0; ok && r < R->rows; r++) {
        const double *x = R->x + r * C;
        const double g = row_grad(red, w, r, R), lse = R->lse[r];
        const bool ign = R->ign[r];
        /* the composition's gradient of an ignored row is NaN where the row is (log_softmax's
         * backward multiplies its NaN by 0); the fused kernels write 0 */
        if (ign && !fused && isnan(lse)) continue;
        for (int64_t j = 0; ok && j < C; j++) {
            double want = 0, tol = 0;
            if (!ign) {
                const long double p = isnan(lse) ? NAN : expl((long double)x[j] - lse);
                const double hit = j == R->tg[r] ? on : 0;
                want = (double)(g * (p - hit - spread));
                /* p = 0 (x -inf) comes out exactly 0 */
                const double err_p =
                    p > 0 ? (double)p * (base + 8 * T->um * (fabs(x[j]) + fabs(lse))) : 0;
                tol = fabs(g) * (err_p + 4 * T->um * ((double)p + hit + spread)) +
                      ((T->half_roundings + 1) * T->ut + 2 * T->ua) * fabs(want) + T->tiny;
            }
            ok = near(g0[r * C + j], want, tol);
            if (!ok)
                printf("  grad [%lld, %lld] (%s, target %lld): got %.17g, want %.17g (tol %.3g)\n",
                       (long long)r, (long long)j, red_name(red), (long long)R->tg[r],
                       g0[r * C + j], want, tol);
        }
    }
    free(got);
    return ok;
}

/* The logits of case c on the host (before rounding) and the targets. */
static void make_inputs(const ce_case *c, ce_ref *R) {
    const int64_t C = c->classes;
    for (int64_t r = 0; r < c->rows; r++) {
        const double scale = r % 4 == 3 ? 8.0 : 1.0, shift = uniform(-3, 3);
        for (int64_t j = 0; j < C; j++) R->x[r * C + j] = shift + scale * uniform(-4, 4);
        R->tg[r] = (int64_t)uniform(0, (double)C);
        if (R->tg[r] >= C) R->tg[r] = C - 1;
        if (c->ign == IGN_ALL || (c->ign == IGN_SOME && r % 3 == 1)) R->tg[r] = c->ignore_index;
    }
    if (c->special && c->rows >= 7) {
        double *x = R->x;
        int64_t *t = R->tg;
        t[0] = t[1] = t[2] = t[3] = t[4] = t[6] = 1;
        x[0 * C + 2] = NAN;                                       /* NaN: the loss NaN */
        x[1 * C + 0] = INFINITY;                                  /* +inf: NaN */
        x[2 * C + 0] = x[2 * C + C - 1] = -INFINITY;              /* -inf, not the target */
        x[3 * C + 1] = -INFINITY;                                 /* the target -inf: +inf */
        for (int64_t j = 0; j < C; j++) x[4 * C + j] = -INFINITY; /* all -inf: NaN */
        x[5 * C + 0] = NAN, t[5] = c->ignore_index;               /* ignored: 0 */
        x[6 * C + 1] = 1e4;                                       /* far from the rest */
    }
}

static void run_case(const ce_case *c) {
    const int64_t N = c->rows, C = c->classes, off = c->offset ? 1 : 0;
    const tol_ctx T = tol_for(c->dt);
    ce_ref R = ref_new(N, C);
    double *w = malloc(sizeof(double) * (size_t)N);
    double *buf = malloc(sizeof(double) * (size_t)(N * C + off));
    make_inputs(c, &R);
    for (int64_t r = 0; r < N; r++) w[r] = uniform(0.5, 2.0);
    ts_scope_begin();
    /* the leaf holds one element before the logits when offset */
    if (off) buf[0] = 0.5;
    memcpy(buf + off, R.x, sizeof(double) * (size_t)(N * C));
    ts_tensor *leaf = device_tensor(buf, TS_SHAPE(N * C + off), c->dt);
    memcpy(R.x, buf + off, sizeof(double) * (size_t)(N * C));
    ts_set_requires_grad(leaf, true);
    ts_tensor *tg = ts_to(ts_from_data(c->unbatched ? TS_SHAPE() : TS_SHAPE(N), TS_I64, R.tg,
                                       (ts_opts){.device = ts_cpu()}),
                          dev);
    ts_tensor *wt = device_tensor(w, TS_SHAPE(N), c->dt);
    if (c->unbatched) wt = ts_reshape(wt, TS_SHAPE());
    compute_ref(&R, c, &T);
    printf("  %s [%lld, %lld]%s eps %g, ignore %s (%lld)%s%s\n", dt_name(c->dt), (long long)N,
           (long long)C, c->unbatched ? " unbatched" : "", c->eps,
           c->ign == IGN_NONE   ? "none"
           : c->ign == IGN_SOME ? "some"
                                : "all",
           (long long)c->ignore_index, c->offset ? ", offset" : "", c->special ? ", special" : "");
    const ts_reduction reds[3] = {TS_REDUCTION_NONE, TS_REDUCTION_SUM, TS_REDUCTION_MEAN};
    for (int k = 0; k < 3; k++) {
        ts_scope_begin();
        ts_set_grad(leaf, NULL);
        ts_tensor *x =
            ts_reshape(ts_narrow(leaf, 0, off, N * C), c->unbatched ? TS_SHAPE(C) : TS_SHAPE(N, C));
        ts_loss_opts o = {.reduction = reds[k], .label_smoothing = c->eps};
        if (c->ignore_index != -100) o.has_ignore_index = true, o.ignore_index = c->ignore_index;
        ts_tensor *y = ts_cross_entropy_ex(x, tg, o);
        CHECK(check_loss(y, reds[k], c, &R, &T));
        if (y) {
            if (reds[k] == TS_REDUCTION_NONE)
                ts_backward_with(y, wt);
            else
                ts_backward(y);
        }
        CHECK_OK();
        CHECK(check_grad(ts_grad(leaf), reds[k], w, c, &R, &T));
        ts_scope_end();
    }
    ts_set_grad(leaf, NULL);
    ts_scope_end();
    ref_free(&R);
    free(w), free(buf);
}

static void test_cases(bool small) {
    const ts_dtype dts[4] = {TS_F32, TS_F64, TS_F16, TS_BF16};
    for (int d = 0; d < 4; d++) {
        const ts_dtype dt = dts[d];
        for (int e = 0; e < 2; e++) {
            const double eps = e ? 0.1 : 0.0;
            const ce_case cases[] = {
                {1, 10, dt, eps, IGN_NONE, -100, false, false, false},
                {37, 10, dt, eps, IGN_SOME, -100, false, true, false},
                {4096, 10, dt, eps, IGN_SOME, 3, false, false, false},
                {5, 1000, dt, eps, IGN_NONE, -100, false, true, false},
                {1000, 1000, dt, eps, IGN_SOME, -100, false, false, false},
                {9, 1000, dt, eps, IGN_ALL, -100, false, false, false},
                {1, 1000, dt, eps, IGN_NONE, -100, true, false, false},
                {1, 1025, dt, eps, IGN_NONE, -100, true, true, false},
                {3, 50257, dt, eps, IGN_NONE, -100, false, true, false},
                {64, 50257, dt, eps, IGN_SOME, -100, false, false, false},
                {7, 50257, dt, eps, IGN_NONE, -100, false, false, true},
                {8, 10, dt, eps, IGN_NONE, -100, false, false, true},
                {8, 1000, dt, eps, IGN_NONE, -100, false, true, true},
            };
            for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
                if (small && cases[i].rows * cases[i].classes > 200000) continue;
                run_case(&cases[i]);
            }
        }
    }
    if (small) return;
    /* a GPT-2 sized batch: 512 rows of the 50257-word vocabulary */
    const ce_case big[] = {{512, 50257, TS_F32, 0.0, IGN_SOME, -100, false, false, false},
                           {512, 50257, TS_BF16, 0.1, IGN_NONE, -100, false, false, false},
                           {4096, 1000, TS_F16, 0.1, IGN_SOME, -100, false, true, false}};
    for (size_t i = 0; i < sizeof big / sizeof big[0]; i++) run_case(&big[i]);
}

/* ------------------------------------------------------------------ the node */
static void test_grad_fn(void) {
    ts_scope_begin();
    ts_tensor *x = ts_to(ts_randn(TS_SHAPE(6, 10), (ts_opts){0}), dev);
    ts_set_requires_grad(x, true);
    ts_tensor *t = ts_to(ts_randint(0, 10, TS_SHAPE(6), (ts_opts){0}), dev);
    ts_tensor *y = ts_cross_entropy_ex(x, t, (ts_loss_opts){.reduction = TS_REDUCTION_NONE});
    const char *name = y ? ts_grad_fn_name(y) : NULL;
    printf("  grad_fn of the per-row losses on %s: %s\n", ts_device_str(dev), name ? name : "none");
    if (fused)
        CHECK_STREQ(name, "CrossEntropyLossBackward0");
    else
        CHECK(name && strcmp(name, "CrossEntropyLossBackward0") != 0);
    /* class weights and K-dim inputs stay on the composition */
    ts_tensor *wcls = ts_to(ts_ones(TS_SHAPE(10), (ts_opts){0}), dev);
    ts_tensor *yw =
        ts_cross_entropy_ex(x, t, (ts_loss_opts){.reduction = TS_REDUCTION_NONE, .weight = wcls});
    CHECK(yw && strcmp(ts_grad_fn_name(yw), "CrossEntropyLossBackward0") != 0);
    ts_tensor *xk = ts_reshape(x, TS_SHAPE(6, 5, 2));
    ts_tensor *tk = ts_to(ts_randint(0, 5, TS_SHAPE(6, 2), (ts_opts){0}), dev);
    ts_tensor *yk = ts_cross_entropy_ex(xk, tk, (ts_loss_opts){.reduction = TS_REDUCTION_NONE});
    CHECK(yk && strcmp(ts_grad_fn_name(yk), "CrossEntropyLossBackward0") != 0);
    /* the eager front end still rejects an out-of-range target with the composition's message */
    int64_t bad[6] = {0, 1, 2, 10, 4, 5};
    ts_tensor *tb =
        ts_to(ts_from_data(TS_SHAPE(6), TS_I64, bad, (ts_opts){.device = ts_cpu()}), dev);
    CHECK(ts_cross_entropy(x, tb) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "cross_entropy: Target 10 is out of bounds.");
    CHECK_OK();
    ts_scope_end();
}

/* ------------------------------------------------------------------ a captured step */
/* Loss (mean, label smoothing 0.1) and gradient replayed with targets set after the capture:
 * ignored ones counted on the device, out-of-range ones clamped. */
static void test_capture(void) {
    const int64_t N = 48, C = 1000;
    const ce_case c = {N, C, TS_F32, 0.1, IGN_SOME, -100, false, false, false};
    const tol_ctx T = tol_for(TS_F32);
    ce_ref R = ref_new(N, C);
    make_inputs(&c, &R);
    ts_tensor *x = ts_keep(device_tensor(R.x, TS_SHAPE(N, C), TS_F32));
    ts_set_requires_grad(x, true);
    ts_tensor *tg = ts_keep(ts_to(ts_zeros(TS_SHAPE(N), (ts_opts){.dtype = TS_I64}), dev));
    const ts_loss_opts o = {.label_smoothing = 0.1};
    /* an eager step first, as a training loop warms up */
    ts_scope_begin();
    ts_backward(ts_cross_entropy_ex(x, tg, o));
    ts_scope_end();
    ts_set_grad(x, NULL);
    ts_graph *g = ts_graph_capture_begin(dev, (ts_graph_opts){0});
    CHECK(g != NULL);
    ts_scope_begin();
    ts_tensor *loss = ts_keep(ts_cross_entropy_ex(x, tg, o));
    ts_backward(loss);
    ts_scope_end();
    CHECK_EQ(ts_graph_capture_end(), TS_OK);
    ts_tensor *gx = ts_grad(x);
    CHECK(gx != NULL);
    for (int round = 0; round < 2 && g && gx; round++) {
        int64_t *sent = malloc(sizeof(int64_t) * (size_t)N);
        for (int64_t r = 0; r < N; r++) {
            sent[r] = (int64_t)uniform(0, (double)C) % C;
            if (r % 3 == 1) sent[r] = -100;                             /* ignored */
            if (round == 1 && r % 7 == 2) sent[r] = r % 2 ? C + 5 : -7; /* clamped */
        }
        for (int64_t r = 0; r < N; r++)
            R.tg[r] = sent[r] == -100 ? -100 : sent[r] < 0 ? 0 : sent[r] >= C ? C - 1 : sent[r];
        ts_scope_begin();
        ts_copy_(
            tg, ts_to(ts_from_data(TS_SHAPE(N), TS_I64, sent, (ts_opts){.device = ts_cpu()}), dev));
        ts_scope_end();
        free(sent);
        CHECK_EQ(ts_graph_replay(g), TS_OK);
        compute_ref(&R, &c, &T);
        printf("  captured step, replay %d: %lld of %lld rows counted%s\n", round,
               (long long)R.counted, (long long)N, round ? ", out-of-range targets clamped" : "");
        CHECK(check_loss(loss, TS_REDUCTION_MEAN, &c, &R, &T));
        CHECK(check_grad(gx, TS_REDUCTION_MEAN, NULL, &c, &R, &T));
    }
    ts_release(loss);
    ts_graph_free(g);
    ts_set_grad(x, NULL);
    ts_release(x), ts_release(tg);
    ref_free(&R);
    CHECK_OK();
}

int main(void) {
    const char *env = getenv("TS_TEST_CE_DEVICE");
    if (env && *env) {
        if (ts_device_parse(env, &dev) != TS_OK || !ts_device_is_available(dev))
            return ts_test_skip("TS_TEST_CE_DEVICE=%s is not available", env);
    } else if (ts_cuda_is_available()) {
        dev = ts_cuda(0);
    } else {
        return ts_test_skip_no_cuda("test_cross_entropy_fused: the fused kernels are not run here");
    }
    const ts_backend *be = tsi_backend_for(dev.type);
    fused = be && be->cross_entropy_forward && be->cross_entropy_backward;
    printf("device under test: %s (%s)\n", ts_device_str(dev),
           fused ? "fused kernels" : "no fused kernels: the composition");
    if (dev.type == TS_CUDA) CHECK(fused); /* the CUDA backend installs them */
    const char *small = getenv("TS_TEST_CE_SMALL");
    test_grad_fn();
    test_cases(small && *small && strcmp(small, "0") != 0);
    test_capture();
    return ts_test_finish();
}
