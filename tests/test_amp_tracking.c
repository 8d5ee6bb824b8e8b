/* test_amp_tracking.c — training under bf16 autocast tracks float32 training: an MLP (SGD with
 * momentum) and a GPT-mini (AdamW), 200 steps each from the same initial weights on the same
 * batches, the autocast loss curve held to a bound that comes from bf16's rounding.
 *
 * The bound. bf16 keeps 8 significant bits: rounding to nearest changes a value by a relative
 * error d = e 2^-8 / m, e uniform in [-1, 1] and m the significand in [1, 2), so |d| <= u = 2^-8
 * and rms(d) = 0.425 u. Per linear or matmul and step, autocast rounds the operands (activations
 * x, weights W) and the result y in the forward, and the incoming gradient and both results (dx,
 * dW) in the backward; the products of bf16 numbers are exact and the sums float32 (at worst
 * K 2^-24 relative: 784 2^-24 = u / 84 for the widest sum here, and about sqrt(K) 2^-24 in
 * practice, so negligible). To first order, a step's loss moves by a sum of these relative
 * perturbations, each weighted by the loss's sensitivity to that operand. No constant can be
 * written down for how much 200 nonconvex steps amplify them, so the amplification is measured in
 * float32 with a model of the same rounding. The model is P "noise runs": float32 training in
 * which every step's forward and backward see the parameters multiplied by (1 + d), with d
 * uniform in [-u, u] (rms 0.577 u) and drawn afresh for each step and element, while the master
 * weights stay untouched. That is autocast's cast of the weights, with a random error of bf16's
 * size in place of the rounding. For each window w of 10 steps:
 *
 *   R_ac(w) = rms over the window of (L_autocast(s) - L_f32(s))   (the same step, the same batch)
 *   S(w)    = rms over the P noise runs of their R(w)              (the trajectory's spread)
 *   R_ac(w) <= k S(w), so |mean_w L_autocast - mean_w L_f32| <= k S(w), with k = 4.
 *
 * Why k = 4: the model perturbs one operand (W, used forward and backward), where autocast rounds
 * up to six per product. Six independent errors of rms 0.425 u against one of rms 0.577 u give
 * sqrt(6) 0.425 / 0.577 = 1.8 times the model's rms, if the sites weigh alike. A further factor
 * of 2 covers the sampling spread of a 10-step rms and of S from P runs.
 * In the early windows the curves respond almost linearly to the size of the perturbations (the
 * model with 8 u moves the MLP's 7.1-7.5 times as far as with u in the first two windows, and the
 * GPT-mini's 3.7-8.1 times throughout), so rounding to fewer bits or summing in bf16 shows there.
 * Later, a nonconvex trajectory partly forgets where it started (the MLP's response flattens to
 * 2.5-3.5 times), and every run's difference drifts towards a common spread, which the bound then
 * allows and no more.
 * Also checked: both runs learn (the last window's mean is below half the first step's loss); the
 * autocast curve is not float32's bit for bit; with native bf16 (AVX512-BF16 or AMX, no cap) the
 * products went to oneDNN's bf16 matmul, and under a cap none did, so the widened float32 path
 * ran with one rounding of each result (tests/CMakeLists.txt runs this test under the TS_CPU_ISA
 * and ONEDNN_MAX_CPU_ISA caps too). bench/results/autocast.md has the measured margins and the
 * planted bugs that fail it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/cpu/gemm_amx.h"
#include "backend/cpu/matmul_dnnl.h"
#include "bf16_check.h"
#include "ts_test.h"

#if defined(__SANITIZE_ADDRESS__)
#define TS_AMP_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TS_AMP_SANITIZED 1
#endif
#endif

#define STEPS      200
#define WIN        10            /* steps per window */
#define NWIN       (STEPS / WIN) /* windows */
#define NOISE_RUNS 3             /* P */
#define K_BOUND    4.0           /* k */
#define MAX_PARAMS 64

/* ------------------------------------------------------------------ data: a fixed xorshift */
typedef struct rng {
    uint64_t s;
} rng;
static double rng_uniform(rng *r) { /* [0, 1) */
    r->s ^= r->s << 13, r->s ^= r->s >> 7, r->s ^= r->s << 17;
    return (double)(r->s >> 11) / 9007199254740992.0;
}
static double rng_normal(rng *r) {
    const double a = rng_uniform(r), b = rng_uniform(r);
    return sqrt(-2 * log(1 - a)) * cos(6.283185307179586 * b);
}
static rng rng_at(uint64_t seed) {
    rng r = {seed * 0x9e3779b97f4a7c15ull + 0x632be59bd9b4e019ull};
    for (int i = 0; i < 8; i++) rng_uniform(&r);
    return r;
}

/* ------------------------------------------------------------------ the models and their data */
typedef struct model_case {
    const char *name;
    ts_module *(*make)(void);
    void (*batch)(int step, ts_tensor **x, ts_tensor **y);
    bool adamw; /* else SGD with momentum 0.9 */
    double lr;
} model_case;

/* MLP 784-256-256-10 on a mixture of 10 Gaussians: x = c_y + N(0, I), class centres c ~
 * N(0, 0.15^2 I) (6 standard deviations apart), 4096 samples cycled in batches of 64. */
enum { MLP_IN = 784, MLP_H = 256, MLP_OUT = 10, MLP_B = 64, MLP_N = 4096 };
static float *mlp_x;         /* [MLP_N, MLP_IN] */
static int64_t mlp_y[MLP_N]; /* labels */

static bool mlp_data(void) {
    double *centre = malloc(sizeof(double) * MLP_OUT * MLP_IN);
    mlp_x = malloc(sizeof(float) * MLP_N * MLP_IN);
    if (!centre || !mlp_x) return free(centre), false;
    rng r = rng_at(7);
    for (int i = 0; i < MLP_OUT * MLP_IN; i++) centre[i] = 0.15 * rng_normal(&r);
    for (int n = 0; n < MLP_N; n++) {
        const int c = (int)(rng_uniform(&r) * MLP_OUT);
        mlp_y[n] = c;
        for (int i = 0; i < MLP_IN; i++)
            mlp_x[(size_t)n * MLP_IN + i] = (float)(centre[c * MLP_IN + i] + rng_normal(&r));
    }
    free(centre);
    return true;
}

static void mlp_batch(int step, ts_tensor **x, ts_tensor **y) {
    const int64_t first = ((int64_t)step * MLP_B) % MLP_N;
    *x = ts_tensor_f32(TS_SHAPE(MLP_B, MLP_IN), mlp_x + first * MLP_IN, (ts_opts){0});
    *y = ts_tensor_i64(TS_SHAPE(MLP_B), mlp_y + first, (ts_opts){0});
}

static ts_module *mlp_new(void) {
    ts_manual_seed(42);
    ts_module *l[5] = {ts_linear_new(MLP_IN, MLP_H), ts_relu_new(), ts_linear_new(MLP_H, MLP_H),
                       ts_relu_new(), ts_linear_new(MLP_H, MLP_OUT)};
    return ts_sequential_new(5, l);
}

/* GPT-mini (2 layers, d 64, 4 heads, context 32, vocab 64) on a noisy permutation chain: each
 * next token is perm(token) with probability 0.8, else uniform (the loss's floor is about 1.3
 * nats against ln 64 = 4.16 at the start); batches of 8 fresh sequences. */
enum { G_V = 64, G_T = 32, G_B = 8 };
static int64_t perm[G_V];

static void gpt_data(void) {
    rng r = rng_at(11);
    for (int i = 0; i < G_V; i++) perm[i] = i;
    for (int i = G_V - 1; i > 0; i--) {
        const int j = (int)(rng_uniform(&r) * (i + 1));
        const int64_t t = perm[i];
        perm[i] = perm[j], perm[j] = t;
    }
}

static void gpt_batch(int step, ts_tensor **x, ts_tensor **y) {
    int64_t xs[G_B * G_T], ys[G_B * G_T];
    rng r = rng_at(5000 + (uint64_t)step);
    for (int b = 0; b < G_B; b++) {
        int64_t tok = (int64_t)(rng_uniform(&r) * G_V);
        for (int t = 0; t < G_T; t++) {
            xs[b * G_T + t] = tok;
            tok = rng_uniform(&r) < 0.8 ? perm[tok] : (int64_t)(rng_uniform(&r) * G_V);
            ys[b * G_T + t] = tok;
        }
    }
    *x = ts_tensor_i64(TS_SHAPE(G_B, G_T), xs, (ts_opts){0});
    *y = ts_tensor_i64(TS_SHAPE(G_B * G_T), ys, (ts_opts){0});
}

static ts_module *gpt_mini_new(void) {
    ts_manual_seed(43);
    return ts_gpt_new((ts_gpt_config){
        .vocab_size = G_V, .context = G_T, .n_layer = 2, .n_head = 4, .n_embd = 64});
}

/* ------------------------------------------------------------------ training runs */
typedef enum run_kind { RUN_F32, RUN_NOISE, RUN_AUTOCAST } run_kind;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Trains `steps` steps from the model's fixed initial weights; losses[s] is step s's loss.
 * RUN_NOISE: each step's forward and backward see every parameter times (1 + d), d uniform in
 * [-u, u] from the generator seeded with `seed`; the step updates the unperturbed values. */
static bool train(const model_case *mc, run_kind kind, uint64_t seed, int steps, double *losses) {
    const double u = ldexp(1, -8);
    ts_module *m = mc->make();
    ts_optim *opt = !m ? NULL
                    : mc->adamw
                        ? ts_adamw_new(m, (ts_adam_opts){.lr = mc->lr, .weight_decay = 0.01})
                        : ts_sgd_new(m, (ts_sgd_opts){.lr = mc->lr, .momentum = 0.9});
    ts_tensor_list ps = ts_module_named_parameters(m);
    bool ok = m && opt && ps.n <= MAX_PARAMS;
    ts_manual_seed(seed);
    for (int s = 0; ok && s < steps; s++) {
        ts_scope_begin();
        ts_tensor *x, *y, *saved[MAX_PARAMS];
        mc->batch(s, &x, &y);
        ts_optim_zero_grad(opt);
        if (kind == RUN_NOISE) {
            ts_no_grad_begin();
            for (int i = 0; i < ps.n; i++) {
                ts_tensor *d = ts_rand(ts_shape_of(ps.tensors[i]), (ts_opts){0});
                saved[i] = ts_clone(ps.tensors[i]);
                ts_mul_(ps.tensors[i], ts_add_scalar(ts_mul_scalar(d, 2 * u), 1 - u));
            }
            ts_no_grad_end();
        }
        if (kind == RUN_AUTOCAST) ts_autocast_begin(TS_CPU, TS_BF16); /* no grad scaler for bf16 */
        ts_tensor *logits = ts_forward(m, x);
        const ts_shape ls = ts_shape_of(logits);
        ts_tensor *loss =
            ts_cross_entropy(ts_reshape(logits, TS_SHAPE(-1, ls.dims[ls.ndim - 1])), y);
        if (kind == RUN_AUTOCAST) ts_autocast_end();
        ts_backward(loss);
        if (kind == RUN_NOISE) {
            ts_no_grad_begin();
            for (int i = 0; i < ps.n; i++) ts_copy_(ps.tensors[i], saved[i]);
            ts_no_grad_end();
        }
        ts_optim_step(opt);
        losses[s] = ts_item(loss);
        ts_scope_end();
        ok = ts_error() == TS_OK && isfinite(losses[s]);
    }
    CHECK(ok);
    CHECK_OK();
    ts_tensor_list_free(&ps);
    ts_optim_free(opt);
    ts_module_free(m);
    return ok;
}

static double window_mean(const double *l, int w) {
    double s = 0;
    for (int i = w * WIN; i < (w + 1) * WIN; i++) s += l[i];
    return s / WIN;
}
static double window_rms(const double *a, const double *b, int w) {
    double s = 0;
    for (int i = w * WIN; i < (w + 1) * WIN; i++) s += (a[i] - b[i]) * (a[i] - b[i]);
    return sqrt(s / WIN);
}

/* The comparison for one model; returns the worst R_ac / S over the windows (the bound is k). */
static double check_model(const model_case *mc, int steps, int noise_runs, bool native) {
    static double f32[STEPS], ac[STEPS], noise[STEPS];
    double spread2[NWIN] = {0};
    const int nwin = steps / WIN;
    printf("\n%s, %d steps, %s (lr %g)\n", mc->name, steps,
           mc->adamw ? "AdamW" : "SGD momentum 0.9", mc->lr);
    double t = now();
    if (!train(mc, RUN_F32, 1, steps, f32)) return INFINITY;
    printf("  float32 run %.2f s", now() - t);
    t = now();
    const uint64_t dnnl_before = tsi_dnnl_matmul_bf16_count(), amx_before = tsi_amx_gemm_count();
    if (!train(mc, RUN_AUTOCAST, 1, steps, ac)) return INFINITY;
    const uint64_t on_amx = tsi_amx_gemm_count() - amx_before;
    const uint64_t ran = tsi_dnnl_matmul_bf16_count() - dnnl_before + on_amx;
    printf(
        ", autocast run %.2f s (%llu native bf16 products, %llu of them on Tessera's AMX kernel)",
        now() - t, (unsigned long long)ran, (unsigned long long)on_amx);
    t = now();
    for (int p = 0; p < noise_runs; p++) {
        if (!train(mc, RUN_NOISE, 100 + (uint64_t)p, steps, noise)) return INFINITY;
        for (int w = 0; w < nwin; w++) spread2[w] += pow(window_rms(noise, f32, w), 2) / noise_runs;
    }
    printf(", %d noise runs %.2f s\n", noise_runs, now() - t);

    /* the bf16 path ran: native products (oneDNN's, or Tessera's AMX kernel: with TS_AMX_GEMM=all
     * every one of them) with native bf16, the widened path otherwise */
    if (native)
        CHECK(ran > 0);
    else
        CHECK_EQ(ran, 0);
    const char *amx_mode = getenv("TS_AMX_GEMM");
    if (native && tsi_amx_gemm_ready() && amx_mode && !strcmp(amx_mode, "all"))
        CHECK_EQ(on_amx, ran);
    if (!tsi_amx_gemm_ready()) CHECK_EQ(on_amx, 0);
    bool differ = false;
    for (int s = 0; s < steps; s++) differ |= ac[s] != f32[s];
    CHECK(differ); /* rounding happened at all */
    /* both learned */
    const double first = f32[0], last_f32 = window_mean(f32, nwin - 1),
                 last_ac = window_mean(ac, nwin - 1);
    printf("  loss: step 0 %.4f; last window float32 %.4f, autocast %.4f\n", first, last_f32,
           last_ac);
    CHECK(last_f32 < 0.5 * first);
    CHECK(last_ac < 0.5 * first);

    printf("  %6s %9s %10s %10s %10s %6s\n", "steps", "f32 mean", "ac - f32", "R_ac", "S", "R/S");
    double worst = 0;
    for (int w = 0; w < nwin; w++) {
        const double spread = sqrt(spread2[w]), r = window_rms(ac, f32, w);
        const double dmean = window_mean(ac, w) - window_mean(f32, w);
        const double ratio = spread > 0 ? r / spread : INFINITY;
        if (ratio > worst) worst = ratio;
        printf("  %3d-%-3d %8.4f %+10.2e %10.2e %10.2e %6.2f%s\n", w * WIN, (w + 1) * WIN - 1,
               window_mean(f32, w), dmean, r, spread, ratio, ratio > K_BOUND ? "  > k" : "");
        ts_test_record(r <= K_BOUND * spread && fabs(dmean) <= K_BOUND * spread);
        if (!(r <= K_BOUND * spread))
            ts_test_failf(__FILE__, __LINE__,
                          "%s: steps %d-%d: autocast's loss differs from float32's by %.3g rms, "
                          "above k = %g times the spread %.3g of float32 runs with a 2^-8 "
                          "rounding model (%.2f x)",
                          mc->name, w * WIN, (w + 1) * WIN - 1, r, K_BOUND, spread, ratio);
    }
    printf("  worst R_ac / S: %.2f (bound k = %g)\n", worst, K_BOUND);
    return worst;
}

int main(void) {
    const int gate = ts_test_isa_gate();
    if (gate) return gate;
    const int steps = STEPS;
#ifdef TS_AMP_SANITIZED
    const int noise_runs = 2; /* AddressSanitizer: every run about 5x slower */
#else
    const int noise_runs = NOISE_RUNS;
#endif

    /* a first bf16 product makes the engine and reads the caps before the path is asked */
    ts_scope_begin();
    CHECK(ts_matmul(ts_test_random_bf16(TS_SHAPE(2, 2), 1, false),
                    ts_test_random_bf16(TS_SHAPE(2, 2), 1, false)) != NULL);
    ts_scope_end();
    const bool native = tsi_dnnl_bf16_native();
    const char *cap = ts_test_bf16_cap(false);
    printf("oneDNN ISA: %s; host bf16: %s; native bf16 products: %s%s%s\n", tsi_dnnl_isa_name(),
           ts_test_host_has_bf16() ? "yes" : "no", native ? "yes" : "no", cap ? ", capped by " : "",
           cap ? cap : "");
    if (cap) CHECK(!native);
#ifdef TS_HAVE_DNNL
    if (!cap && ts_test_host_has_bf16()) CHECK(native);
#endif

    if (!mlp_data()) return ts_test_skip("out of memory for the MLP's data set");
    gpt_data();
    const model_case mlp = {"MLP 784-256-256-10, batch 64", mlp_new, mlp_batch, false, 0.01};
    const model_case gpt = {"GPT-mini (2 layers, d 64, 4 heads, context 32, vocab 64), batch 8",
                            gpt_mini_new, gpt_batch, true, 3e-3};
    const double w_mlp = check_model(&mlp, steps, noise_runs, native);
    const double w_gpt = check_model(&gpt, steps, noise_runs, native);
    printf("\nworst R_ac / S: MLP %.2f, GPT-mini %.2f (k = %g; %s path)\n", w_mlp, w_gpt, K_BOUND,
           native ? "native bf16" : "widened float32");
    free(mlp_x);
    return ts_test_finish();
}
