/* bench_conv_blocked.c — MobileNetV3-Small's depthwise convolutions (batch 1, the blocked
 * layout, bias, the activation the network fuses) through tsi_conv2d_act_blocked:
 * conv_dw_blocked.c's kernel against oneDNN's (TS_CONV=dnnl), in alternating rounds. Prints per
 * layer the median microseconds a call of each, and the sums. Usage: bench_conv_blocked [RUNS
 * [THREADS]] */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>

#include "nn/conv_blocked.h"
#include "tessera.h"

#define BENCH_NAME "bench_conv_blocked"
#include "bench_util.h"

typedef struct layer {
    int64_t c, o, hw, k, stride; /* o 0: depthwise (o = c, groups c) */
    tsi_conv_act act;
} layer;

static const layer LAYERS[] = {
    {16, 0, 112, 3, 2, TSI_CONV_ACT_RELU},         {72, 0, 56, 3, 2, TSI_CONV_ACT_RELU},
    {88, 0, 28, 3, 1, TSI_CONV_ACT_RELU},          {96, 0, 28, 5, 2, TSI_CONV_ACT_HARDSWISH},
    {240, 0, 14, 5, 1, TSI_CONV_ACT_HARDSWISH},    {120, 0, 14, 5, 1, TSI_CONV_ACT_HARDSWISH},
    {144, 0, 14, 5, 1, TSI_CONV_ACT_HARDSWISH},    {288, 0, 14, 5, 2, TSI_CONV_ACT_HARDSWISH},
    {576, 0, 7, 5, 1, TSI_CONV_ACT_HARDSWISH},     {576, 144, 1, 1, 1, TSI_CONV_ACT_RELU},
    {144, 576, 1, 1, 1, TSI_CONV_ACT_HARDSIGMOID}, {240, 64, 1, 1, 1, TSI_CONV_ACT_RELU},
    {64, 240, 1, 1, 1, TSI_CONV_ACT_HARDSIGMOID},  {16, 8, 1, 1, 1, TSI_CONV_ACT_RELU},
};
enum { NL = sizeof LAYERS / sizeof *LAYERS };

static int cmp(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    const int runs = argc > 1 ? atoi(argv[1]) : 200;
    if (argc > 2) ts_set_num_threads(atoi(argv[2]));
    ts_release(ts_zeros(TS_SHAPE(1), (ts_opts){0})); /* the cpu backend installed */
    const int blk = tsi_conv_block(ts_cpu());
    if (!blk || runs < 1) {
        printf("no blocked layout on this CPU (or RUNS < 1)\n");
        return 0;
    }
    ts_no_grad_begin();
    ts_tensor *x[NL], *w[NL], *b[NL];
    ts_conv2d_opts o[NL];
    for (int l = 0; l < NL; l++) {
        const layer *L = &LAYERS[l];
        x[l] = tsi_to_blocked(ts_randn(TS_SHAPE(1, L->c, L->hw, L->hw), (ts_opts){0}), blk);
        const int64_t out = L->o ? L->o : L->c;
        w[l] = ts_randn(TS_SHAPE(out, L->o ? L->c : 1, L->k, L->k), (ts_opts){0});
        b[l] = ts_randn(TS_SHAPE(out), (ts_opts){0});
        o[l] = (ts_conv2d_opts){.stride = {(int)L->stride, (int)L->stride},
                                .padding = {(int)L->k / 2, (int)L->k / 2},
                                .groups = L->o ? 1 : (int)L->c};
    }
    die_on_error("inputs");
    double *t = malloc(sizeof(double) * 2 * NL * (size_t)runs);
    for (int r = -3; r < runs; r++)
        for (int side = 0; side < 2; side++) { /* 0: own kernel, 1: oneDNN */
            if (side)
                setenv("TS_CONV", "dnnl", 1);
            else
                unsetenv("TS_CONV");
            for (int l = 0; l < NL; l++) {
                ts_scope_begin();
                const double t0 = now_s();
                ts_tensor *y = tsi_conv2d_act_blocked(
                    x[l], blk, LAYERS[l].c, w[l], b[l], o[l], LAYERS[l].act,
                    LAYERS[l].act == TSI_CONV_ACT_HARDSIGMOID ? 0.2 : 1.0 / 6, 0.5, blk, NULL);
                const double dt = now_s() - t0;
                if (!y) die_on_error("conv");
                ts_scope_end();
                if (r >= 0) t[(side * NL + l) * runs + r] = dt * 1e6;
            }
        }
    unsetenv("TS_CONV");
    double sum[2] = {0, 0};
    printf("block %d, %d runs: median us a call, own kernel vs oneDNN\n", blk, runs);
    for (int l = 0; l < NL; l++) {
        double m[2];
        for (int s = 0; s < 2; s++) {
            qsort(t + (s * NL + l) * runs, (size_t)runs, sizeof(double), cmp);
            m[s] = t[(s * NL + l) * runs + runs / 2];
            sum[s] += m[s];
        }
        printf("  c %3lld o %3lld hw %3lld k %lld s %lld: %7.1f %7.1f\n", (long long)LAYERS[l].c,
               (long long)(LAYERS[l].o ? LAYERS[l].o : LAYERS[l].c), (long long)LAYERS[l].hw,
               (long long)LAYERS[l].k, (long long)LAYERS[l].stride, m[0], m[1]);
    }
    printf("sum (each layer once): %.1f own, %.1f oneDNN\n", sum[0], sum[1]);
    free(t);
    ts_no_grad_end();
    return 0;
}
