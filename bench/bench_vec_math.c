/* bench_vec_math.c — the vectorised math of the CPU kernels against the scalar code they replaced,
 * on one thread, interleaved: every round times each variant once, and each variant keeps its best
 * round, so a busy spell of a shared machine hits them alike. Prints per function the ns per
 * element of the scalar loop (libm through kernel_math.h's formulas, what the kernels ran before),
 * of the vector variants this CPU has, and the speed-up of the variant TS_CPU_ISA picks; then ops
 * through the public API on 16 x 256 x 1024 tensors (float32 and float16, the latter against
 * float32's time), and the memory floor of their forward + backward pairs on this machine (the
 * same traffic with no math). Usage: bench_vec_math [ROUNDS]   (default 7) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/cpu/vec_kernels.h"
#include "backend/kernel_math.h"
#include "backend/philox.h"
#include "tessera.h"

static double bench_now_s(void) {
    struct timespec t;
    timespec_get(&t, TIME_UTC);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

enum { N = 1 << 16 }; /* elements per call: in L2, so the math is what is timed */
static float xf[N], yf[N], gf[N], xl[N], xe[N]; /* xl in [0.1, 10), xe in (-0.99, 0.99) */
static uint16_t hf[N];
static double xd[N], yd[N], ud[N];

typedef enum { K_SCALAR, K_GENERIC, K_AVX2, K_AVX512, K_COUNT } kind;
static const char *kind_names[K_COUNT] = {"scalar", "generic", "avx2", "avx512"};

typedef struct fn_case {
    const char *name;
    void (*scalar)(void);
    void (*vec)(const ts_vec_kernels *vk);
} fn_case;

/* ------------------------------------------------------------------ the scalar loops */
static void s_exp(void) {
    for (int i = 0; i < N; i++) yf[i] = expf(xf[i]);
}
static void s_log(void) {
    for (int i = 0; i < N; i++) yf[i] = logf(fabsf(xf[i]) + 1e-3f);
}
static void s_tanh(void) {
    for (int i = 0; i < N; i++) yf[i] = tanhf(xf[i]);
}
static void s_sigmoid(void) {
    for (int i = 0; i < N; i++) yf[i] = ts_sigmoid_f(xf[i]);
}
static void s_gelu(void) {
    for (int i = 0; i < N; i++) yf[i] = ts_gelu_f(xf[i]);
}
static void s_gelu_bwd(void) {
    for (int i = 0; i < N; i++) yf[i] = ts_gelu_bwd_f(gf[i], xf[i]);
}
static void s_silu(void) {
    for (int i = 0; i < N; i++) yf[i] = ts_silu_f(xf[i]);
}
static void s_softmax_row(void) { /* the old row: max, exp and sum in double, scale */
    for (int r = 0; r < N; r += 1024) {
        float m = -INFINITY;
        for (int k = 0; k < 1024; k++) m = xf[r + k] > m ? xf[r + k] : m;
        double s = 0;
        for (int k = 0; k < 1024; k++) s += yf[r + k] = expf(xf[r + k] - m);
        const float inv = (float)(1.0 / s);
        for (int k = 0; k < 1024; k++) yf[r + k] *= inv;
    }
}
static void s_lse(void) {
    double s = 0;
    for (int i = 0; i < N; i++) s += exp(xd[i] - 3.0);
    yd[0] = s;
}
static void s_normal(void) {
    for (int i = 0; i < N; i++) yd[i] = ts_philox_box_muller(ud[i], xd[i] * 0.1 + 0.5);
}
static void s_lgamma(void) {
    for (int i = 0; i < N; i++) yf[i] = lgammaf(xl[i]);
}
static void s_erfinv(void) {
    for (int i = 0; i < N; i++) yf[i] = ts_erfinv_f(xe[i]);
}
static void s_f16_in(void) {
    for (int i = 0; i < N; i++) yf[i] = ts_f16_to_f32(hf[i]);
}
static void s_f16_out(void) {
    for (int i = 0; i < N; i++) hf[i] = ts_f32_to_f16(xf[i]);
}

/* ------------------------------------------------------------------ the vector calls */
static void v_exp(const ts_vec_kernels *vk) { vk->unary_f32(TS_U_EXP, yf, xf, N); }
static void v_log(const ts_vec_kernels *vk) {
    for (int i = 0; i < N; i++) yf[i] = fabsf(xf[i]) + 1e-3f;
    vk->unary_f32(TS_U_LOG, yf, yf, N);
}
static void v_tanh(const ts_vec_kernels *vk) { vk->unary_f32(TS_U_TANH, yf, xf, N); }
static void v_sigmoid(const ts_vec_kernels *vk) { vk->unary_f32(TS_U_SIGMOID, yf, xf, N); }
static void v_gelu(const ts_vec_kernels *vk) { vk->unary_f32(TS_U_GELU, yf, xf, N); }
static void v_gelu_bwd(const ts_vec_kernels *vk) { vk->bwd_f32(TS_B_GELU_BWD, yf, gf, xf, N); }
static void v_silu(const ts_vec_kernels *vk) { vk->unary_f32(TS_U_SILU, yf, xf, N); }
static void v_softmax_row(const ts_vec_kernels *vk) {
    for (int r = 0; r < N; r += 1024) {
        const float m = vk->max_f32(xf + r, 1024);
        const float inv = (float)(1.0 / vk->exp_sum_f32(yf + r, xf + r, m, 1024));
        for (int k = 0; k < 1024; k++) yf[r + k] *= inv;
    }
}
static void v_lse(const ts_vec_kernels *vk) { yd[0] = vk->exp_sum_f64(xd, 3.0, N); }
static void v_normal(const ts_vec_kernels *vk) {
    for (int i = 0; i < N; i++) yd[i + 0] = xd[i] * 0.1 + 0.5;
    vk->normal_f64(yd, ud, yd, 0.0, 1.0, N);
}
static void v_lgamma(const ts_vec_kernels *vk) { vk->unary_f32(TS_U_LGAMMA, yf, xl, N); }
static void v_erfinv(const ts_vec_kernels *vk) { vk->unary_f32(TS_U_ERFINV, yf, xe, N); }
static void v_f16_in(const ts_vec_kernels *vk) { vk->f16_to_f32(yf, hf, N); }
static void v_f16_out(const ts_vec_kernels *vk) { vk->f32_to_f16(hf, xf, N); }

static const fn_case cases[] = {
    {"exp", s_exp, v_exp},
    {"log", s_log, v_log},
    {"tanh", s_tanh, v_tanh},
    {"sigmoid", s_sigmoid, v_sigmoid},
    {"gelu", s_gelu, v_gelu},
    {"gelu_bwd", s_gelu_bwd, v_gelu_bwd},
    {"silu", s_silu, v_silu},
    {"softmax_row1024", s_softmax_row, v_softmax_row},
    {"logsumexp_f64", s_lse, v_lse},
    {"randn_boxmuller", s_normal, v_normal},
    {"lgamma", s_lgamma, v_lgamma},
    {"erfinv", s_erfinv, v_erfinv},
    {"f16_to_f32", s_f16_in, v_f16_in},
    {"f32_to_f16", s_f16_out, v_f16_out},
};
enum { NCASES = sizeof cases / sizeof cases[0] };

/* ------------------------------------------------------------------ ops through the API */
typedef struct op_case {
    const char *name;
    ts_tensor *(*fn)(ts_tensor *x);
} op_case;
static ts_tensor *op_gelu(ts_tensor *x) { return ts_gelu(x); }
static ts_tensor *op_exp(ts_tensor *x) { return ts_exp(x); }
static ts_tensor *op_add(ts_tensor *x) { return ts_add(x, x); }
static ts_tensor *op_softmax(ts_tensor *x) { return ts_softmax(x, -1); }
static ts_tensor *op_logsumexp(ts_tensor *x) { return ts_logsumexp_dim(x, -1, false); }
/* forward and backward: y = f(x), then backward from y with a fixed random gradient of y's shape
 * and dtype (made by main, outside the timing), as PyTorch's y.backward(g): the op's own kernels
 * and nothing else. The earlier harness, the gradient of sum(f(x) * ones), timed an elementwise
 * product, a sum and their backwards as well (27-37% of the chain), and with ones softmax's
 * gradient is zero. */
static ts_tensor *grad_y32, *grad_y16;
static ts_tensor *grad_of(ts_tensor *x, ts_tensor *y) {
    ts_backward_with(y, ts_dtype_of(y) == TS_F16 ? grad_y16 : grad_y32);
    return ts_grad(x);
}
static ts_tensor *op_gelu_fb(ts_tensor *x) { return grad_of(x, ts_gelu(x)); }
static ts_tensor *op_softmax_fb(ts_tensor *x) { return grad_of(x, ts_softmax(x, -1)); }
static ts_tensor *op_layer_norm_fb(ts_tensor *x) {
    return grad_of(x, ts_layer_norm(x, TS_SHAPE(1024), NULL, NULL, 1e-5));
}
/* weight and bias of layer_norm ([1024]) and batch_norm ([256]) in float32 and float16 (the
 * input's dtype, as in a model converted to half), made by main */
static ts_tensor *ln_w[2], *ln_b[2], *bn_w[2], *bn_b[2];
static int half_of(ts_tensor *x) { return ts_dtype_of(x) == TS_F16; }
static ts_tensor *op_layer_norm_affine_fb(ts_tensor *x) {
    ts_tensor *w = ln_w[half_of(x)], *b = ln_b[half_of(x)];
    ts_set_grad(w, NULL), ts_set_grad(b, NULL);
    return grad_of(x, ts_layer_norm(x, TS_SHAPE(1024), w, b, 1e-5));
}
/* training mode, channels dim 1 (256 channels of 16 x 1024 values) */
static ts_tensor *op_batch_norm_fb(ts_tensor *x) {
    ts_tensor *w = bn_w[half_of(x)], *b = bn_b[half_of(x)];
    ts_set_grad(w, NULL), ts_set_grad(b, NULL);
    return grad_of(x, ts_batch_norm(x, NULL, NULL, w, b, true, 0.1, 1e-5));
}
static const op_case ops[] = {
    {"exp", op_exp},
    {"gelu", op_gelu},
    {"add", op_add},
    {"softmax", op_softmax},
    {"logsumexp", op_logsumexp},
    {"gelu fwd+bwd", op_gelu_fb},
    {"softmax fwd+bwd", op_softmax_fb},
    {"layer_norm fwd+bwd", op_layer_norm_fb},
    {"layer_norm+affine fwd+bwd", op_layer_norm_affine_fb},
    {"batch_norm fwd+bwd", op_batch_norm_fb},
};
enum { NOPS = sizeof ops / sizeof ops[0] };

/* The memory traffic of an elementwise forward + backward pair with no math: y = 1.5 x (read 16
 * MiB, write 16 MiB), then dx = g y (read 32, write 16), on `threads` threads, into buffers
 * already mapped (as the caching allocator's are). GELU, softmax and layer_norm move at least
 * this much (their row statistics are a few KiB), so no implementation of them on this machine
 * takes less: run_ops.sh prints each side's time against it. */
static double traffic_floor_ms(const float *x, const float *g, float *y, float *dx, int64_t n,
                               int threads) {
    const double t0 = bench_now_s();
#ifdef _OPENMP
#pragma omp parallel for num_threads(threads) schedule(static)
#endif
    for (int64_t i = 0; i < n; i++) y[i] = 1.5f * x[i];
#ifdef _OPENMP
#pragma omp parallel for num_threads(threads) schedule(static)
#endif
    for (int64_t i = 0; i < n; i++) dx[i] = g[i] * y[i];
    const double ms = (bench_now_s() - t0) * 1e3;
    volatile float sink = dx[n / 2];
    (void)sink, (void)threads;
    return ms;
}

int main(int argc, char **argv) {
    const int rounds = argc > 1 ? atoi(argv[1]) : 7;
    for (int i = 0; i < N; i++) {
        xf[i] = (float)((i * 2654435761u % 20000) / 1000.0 - 10.0);
        gf[i] = (float)((i * 40503u % 1000) / 1000.0 - 0.5);
        hf[i] = ts_f32_to_f16(xf[i]);
        xd[i] = xf[i];
        xl[i] = (float)(0.1 + (i * 2654435761u % 99000) / 10000.0);
        xe[i] = xf[i] / 10.1f;
        ud[i] = (double)(i * 2654435761u % 1000003) / 1000003.0;
    }
    const ts_vec_kernels *vk[K_COUNT] = {NULL, tsi_vec_kernels_for(TS_ISA_GENERIC),
                                         tsi_vec_kernels_for(TS_ISA_AVX2),
                                         tsi_vec_kernels_for(TS_ISA_AVX512)};
    double best[NCASES][K_COUNT];
    for (int c = 0; c < NCASES; c++)
        for (int k = 0; k < K_COUNT; k++) best[c][k] = 1e30;
    for (int r = 0; r < rounds; r++)
        for (int c = 0; c < NCASES; c++)
            for (int k = 0; k < K_COUNT; k++) {
                if (k != K_SCALAR && !vk[k]) continue;
                double t0 = bench_now_s();
                for (int rep = 0; rep < 8; rep++)
                    if (k == K_SCALAR)
                        cases[c].scalar();
                    else
                        cases[c].vec(vk[k]);
                double ns = (bench_now_s() - t0) / (8.0 * N) * 1e9;
                if (ns < best[c][k]) best[c][k] = ns;
            }
    const int use = K_GENERIC + (int)ts_cpu_isa_get();
    printf("ns per element, one thread, best of %d interleaved rounds; speed-up = scalar / %s\n",
           rounds, kind_names[use]);
    printf("%-18s %9s %9s %9s %9s %9s\n", "function", "scalar", "generic", "avx2", "avx512",
           "speed-up");
    for (int c = 0; c < NCASES; c++) {
        printf("%-18s", cases[c].name);
        for (int k = 0; k < K_COUNT; k++)
            if (best[c][k] < 1e29)
                printf(" %9.3f", best[c][k]);
            else
                printf(" %9s", "-");
        printf(" %8.1fx\n", best[c][K_SCALAR] / best[c][use]);
    }

    /* ops on [16, 256, 1024]: f32, then f16 with its time against f32's */
    ts_manual_seed(1);
    ts_tensor *x32 = ts_randn(TS_SHAPE(16, 256, 1024), (ts_opts){.requires_grad = true});
    ts_tensor *x16 = ts_to_dtype(ts_detach(x32), TS_F16);
    ts_set_requires_grad(x16, true);
    grad_y32 = ts_randn(TS_SHAPE(16, 256, 1024), (ts_opts){0});
    grad_y16 = ts_to_dtype(grad_y32, TS_F16);
    ts_tensor **params[4] = {ln_w, ln_b, bn_w, bn_b};
    for (int p = 0; p < 4; p++) {
        params[p][0] = ts_randn(TS_SHAPE(p < 2 ? 1024 : 256), (ts_opts){.requires_grad = true});
        params[p][1] = ts_to_dtype(ts_detach(params[p][0]), TS_F16);
        ts_set_requires_grad(params[p][1], true);
    }
    double tb[NOPS][2], floor_ms = 1e30;
    for (int o = 0; o < NOPS; o++) tb[o][0] = tb[o][1] = 1e30;
    const int64_t nx = ts_numel(x32);
    float *hx = malloc((size_t)nx * sizeof *hx), *hg = malloc((size_t)nx * sizeof *hg);
    float *hy = malloc((size_t)nx * sizeof *hy), *hdx = malloc((size_t)nx * sizeof *hdx);
    if (hy) memset(hy, 0, (size_t)nx * sizeof *hy); /* mapped now, as cached blocks are */
    if (hdx) memset(hdx, 0, (size_t)nx * sizeof *hdx);
    ts_scope_begin();
    const bool copied = hx && hg && hy && hdx &&
                        ts_copy_to_host(ts_detach(x32), hx, (size_t)nx * sizeof *hx) == TS_OK &&
                        ts_copy_to_host(grad_y32, hg, (size_t)nx * sizeof *hg) == TS_OK;
    ts_scope_end();
    if (!copied) {
        fprintf(stderr, "bench_vec_math: no memory for the traffic floor's inputs\n");
        return 1;
    }
    traffic_floor_ms(hx, hg, hy, hdx, nx, ts_get_num_threads()); /* threads started, warm */
    for (int r = 0; r < (rounds + 1) / 2; r++) {
        const double f = traffic_floor_ms(hx, hg, hy, hdx, nx, ts_get_num_threads());
        if (f < floor_ms) floor_ms = f;
        for (int o = 0; o < NOPS; o++)
            for (int h = 0; h < 2; h++) {
                ts_tensor *x = h ? x16 : x32;
                ts_scope_begin();
                ts_set_grad(x, NULL);
                double t0 = bench_now_s();
                ts_tensor *y = ops[o].fn(x);
                if (y) ts_item(ts_sum(ts_narrow(ts_reshape(y, TS_SHAPE(-1)), 0, 0, 1)));
                double ms = (bench_now_s() - t0) * 1e3;
                ts_scope_end();
                if (ms < tb[o][h]) tb[o][h] = ms;
            }
    }
    if (ts_error()) {
        fprintf(stderr, "bench_vec_math: %s\n", ts_error_message());
        return 1;
    }
    printf("\nops on [16, 256, 1024], %d threads, vector ISA %s (ms, best of %d)\n",
           ts_get_num_threads(), ts_cpu_vector_isa(), (rounds + 1) / 2);
    printf("%-26s %10s %10s %12s\n", "op", "float32", "float16", "f16 / f32");
    for (int o = 0; o < NOPS; o++)
        printf("%-26s %10.3f %10.3f %11.2fx\n", ops[o].name, tb[o][0], tb[o][1],
               tb[o][1] / tb[o][0]);
    printf("memory floor of a fwd+bwd pair (y = 1.5 x, then dx = g y; no math): %.3f ms\n",
           floor_ms);
    free(hx), free(hg), free(hy), free(hdx);
    ts_release(x32), ts_release(x16), ts_release(grad_y32), ts_release(grad_y16);
    for (int p = 0; p < 4; p++) ts_release(params[p][0]), ts_release(params[p][1]);
    return 0;
}
