/* test_conv_dw_weight.c — the float32 weight gradient of depthwise convolutions that the direct
 * kernels do not take (src/backend/cpu/conv_dw_weight.c, chosen by conv_select.c): against a
 * float64 sum, with the bound the kernel's arithmetic gives (conv_dw_weight.h): each weight's
 * products summed in segments of 64, 8 float lanes of 8 products and a tree of 3, the tail of
 * fewer than 8 apart, the segments added in float64, so
 *     |gw - exact| <= 12 u sum|products| + u |exact| (+ float64's part),  u = 2^-24,
 * however long the reduction. Positive inputs make every rounding error of a sum in one float go
 * the same way: over the 65536 products of the 1x1 case such a sum (oneDNN's primitive, the path
 * before) is 4 to 13x past the bound. Also: the selector's choice for these shapes, taps that meet
 * no input (exactly 0), an infinite input reaching only the taps that meet it, the same bits on one
 * thread and on four. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/conv_dw_weight.h"
#include "backend/cpu/conv_select.h"
#include "backend/cpu/kern_conv_drivers.h"
#include "tessera.h"
#include "ts_test.h"

typedef struct shape {
    int64_t n, c, h, w, kh, kw;
    int s[2], p[2], d[2];
} shape;

static ts_cgeom geom(const shape *sh) {
    const ts_conv2d_params prm = {.stride = {sh->s[0], sh->s[1]},
                                  .padding = {sh->p[0], sh->p[1]},
                                  .dilation = {sh->d[0], sh->d[1]},
                                  .groups = (int)sh->c,
                                  .act = TS_CONV_ACT_NONE};
    const int64_t nchw[4] = {sh->n, sh->c, sh->h, sh->w}, khw[2] = {sh->kh, sh->kw};
    int64_t o_ohw[3] = {sh->c, 0, 0};
    for (int d = 0; d < 2; d++)
        o_ohw[1 + d] = (nchw[2 + d] + 2 * sh->p[d] - sh->d[d] * (khw[d] - 1) - 1) / sh->s[d] + 1;
    return tsi_cgeom_make(nchw, o_ohw, khw, &prm);
}

static uint64_t rng = 88172645463325252ull;
static float uniform(float lo, float hi) { /* xorshift64, 24 bits */
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return lo + (hi - lo) * (float)(rng >> 40) / 16777216.0f;
}

/* the exact gradient (float64: the products of floats are exact, their sum within 1e-12) and the
 * sum of |products| of each weight */
static void reference(const ts_cgeom *g, const float *gy, const float *x, double *ref,
                      double *abs) {
    const int64_t taps = g->kh * g->kw;
    for (int64_t c = 0; c < g->c; c++)
        for (int64_t t = 0; t < taps; t++) {
            const int64_t i = t / g->kw, j = t % g->kw;
            double s = 0, a = 0;
            for (int64_t n = 0; n < g->n; n++)
                for (int64_t oy = 0; oy < g->oh; oy++)
                    for (int64_t ox = 0; ox < g->ow; ox++) {
                        const int64_t iy = oy * g->sh - g->ph + i * g->dh;
                        const int64_t ix = ox * g->sw - g->pw + j * g->dw;
                        if (iy < 0 || iy >= g->h || ix < 0 || ix >= g->w) continue;
                        const double q = (double)gy[((n * g->c + c) * g->oh + oy) * g->ow + ox] *
                                         (double)x[((n * g->c + c) * g->h + iy) * g->w + ix];
                        s += q, a += fabs(q);
                    }
            ref[c * taps + t] = s, abs[c * taps + t] = a;
        }
}

/* worst |gw - ref| over the bound; writes the largest sum's count of products */
static double check_shape(const char *name, const shape *sh, bool positive, bool via_entry) {
    const ts_cgeom g = geom(sh);
    const int64_t nx = g.n * g.c * g.h * g.w, ny = g.n * g.c * g.oh * g.ow, nw = g.c * g.kh * g.kw;
    float *x = malloc(sizeof(float) * (size_t)nx), *gy = malloc(sizeof(float) * (size_t)ny);
    float *gw = malloc(sizeof(float) * (size_t)nw);
    double *ref = malloc(sizeof(double) * (size_t)nw), *abs = malloc(sizeof(double) * (size_t)nw);
    CHECK(x && gy && gw && ref && abs);
    if (!(x && gy && gw && ref && abs)) return INFINITY;
    for (int64_t i = 0; i < nx; i++) x[i] = positive ? uniform(0.5f, 1.5f) : uniform(-1.0f, 2.0f);
    for (int64_t i = 0; i < ny; i++) gy[i] = positive ? uniform(0.5f, 1.5f) : uniform(-1.0f, 1.0f);
    /* conv_select.c routes 1x1 weight gradients here (the others stay oneDNN's until the kernel
     * is as fast); the kernel itself takes every depthwise geometry */
    const bool routed = g.kh == 1 && g.kw == 1;
    if (routed)
        CHECK_EQ(tsi_conv_select(&g, TSI_CONV_PASS_WEIGHT, TS_F32, 0), TSI_CONV_PATH_DW_WEIGHT);
    if (via_entry && routed)
        CHECK(tsi_conv_backward_weight_f32(&g, gy, x, gw)); /* what conv2d's backward calls */
    else
        CHECK(tsi_conv_dw_weight(&g, gy, x, gw));
    reference(&g, gy, x, ref, abs);
    const double u = ldexp(1.0, -24), m = 12; /* 8 products a lane, a tree of 3, the tail */
    double worst = 0;
    for (int64_t e = 0; e < nw; e++) {
        /* float64's part: N x OH row sums added, each within 1e-16 relative */
        const double bound =
            m * u * abs[e] + u * fabs(ref[e]) + (double)(g.n * g.oh) * ldexp(1.0, -52) * abs[e] * 2;
        const double r =
            bound > 0 ? fabs((double)gw[e] - ref[e]) / bound : ((double)gw[e] == 0 ? 0 : INFINITY);
        if (!(r <= worst)) worst = r;
    }
    printf("%-34s %6lld products a weight, worst error / bound %.3g\n", name,
           (long long)(g.n * g.oh * g.ow), worst);
    CHECK(worst <= 1.0);
    free(x), free(gy), free(gw), free(ref), free(abs);
    return worst;
}

/* a tap that meets no input is exactly 0 (stride 4 from column -3 over 2 columns: kernel columns
 * 1 and 2 meet none, column 0 one); the result is the same bits on one thread and on four */
static void check_edges_threads(void) {
    const shape sh = {
        .n = 3, .c = 5, .h = 2, .w = 2, .kh = 3, .kw = 3, .s = {1, 4}, .p = {1, 3}, .d = {1, 1}};
    const ts_cgeom g = geom(&sh);
    float x[3 * 5 * 2 * 2], gy[3 * 5 * 2 * 2], gw1[45], gw4[45];
    CHECK_EQ(g.oh * g.ow, 4);
    for (size_t i = 0; i < sizeof x / sizeof *x; i++) x[i] = uniform(-1, 1);
    for (size_t i = 0; i < sizeof gy / sizeof *gy; i++) gy[i] = uniform(-1, 1);
    for (int e = 0; e < 45; e++) gw1[e] = gw4[e] = NAN; /* every weight written */
    ts_set_num_threads(1);
    CHECK(tsi_conv_dw_weight(&g, gy, x, gw1));
    ts_set_num_threads(4);
    CHECK(tsi_conv_dw_weight(&g, gy, x, gw4));
    ts_set_num_threads(2);
    CHECK(memcmp(gw1, gw4, sizeof gw1) == 0);
    double ref[45], abs[45];
    reference(&g, gy, x, ref, abs);
    int zeros = 0;
    for (int e = 0; e < 45; e++) {
        if (abs[e] == 0) {
            zeros++;
            CHECK(gw1[e] == 0.0f);
        }
        CHECK(fabs((double)gw1[e] - ref[e]) <= 8 * ldexp(1.0, -24) * abs[e]);
    }
    CHECK_EQ(zeros, 5 * 2 * 3);
}

/* an infinity in x: +inf in the taps that meet it (gy > 0), every other tap finite and within the
 * bound (the padded-plane form would pair it with gy's zero padding: NaN) */
static void check_nonfinite(void) {
    const shape sh = {
        .n = 2, .c = 3, .h = 6, .w = 6, .kh = 3, .kw = 3, .s = {1, 1}, .p = {1, 1}, .d = {1, 1}};
    const ts_cgeom g = geom(&sh);
    float x[2 * 3 * 36], gy[2 * 3 * 36], gw[27];
    for (int i = 0; i < 2 * 3 * 36; i++) x[i] = uniform(-1, 1), gy[i] = uniform(0.5f, 1.5f);
    x[(1 * 3 + 1) * 36] = INFINITY; /* image 1, channel 1, row 0, column 0 */
    CHECK(tsi_conv_backward_weight_f32(&g, gy, x, gw));
    double ref[27], abs[27];
    reference(&g, gy, x, ref, abs);
    int infs = 0;
    for (int e = 0; e < 27; e++) {
        if (isinf(ref[e])) {
            infs++;
            CHECK(gw[e] == INFINITY);
        } else {
            CHECK(fabs((double)gw[e] - ref[e]) <= 12 * ldexp(1.0, -24) * abs[e]);
        }
    }
    CHECK_EQ(infs, 4); /* kernel rows 0 and 1 by columns 0 and 1 of channel 1 */
}

int main(void) {
    ts_release(ts_zeros(TS_SHAPE(1), (ts_opts){0})); /* the cpu backend installed */
    tsi_conv_force_provider("");                     /* automatic, whatever TS_CONV says */
    ts_set_num_threads(2);
    double worst = 0, w;
    /* 1x1 (the input is its own column matrix: the direct kernels do not take it): 65536 products
     * per weight, as ghostnetv3's cheap_rpr_scale branches at training batch sizes */
    const shape one = {.n = 16,
                       .c = 4,
                       .h = 256,
                       .w = 16,
                       .kh = 1,
                       .kw = 1,
                       .s = {1, 1},
                       .p = {0, 0},
                       .d = {1, 1}};
    w = check_shape("1x1, 16 x 4 x 256 x 16, positive", &one, true, true);
    worst = w > worst ? w : worst;
    /* one image of 131072 pixels: a single float sum over a whole plane would be past the bound */
    const shape big = {.n = 1,
                       .c = 2,
                       .h = 512,
                       .w = 256,
                       .kh = 1,
                       .kw = 1,
                       .s = {1, 1},
                       .p = {0, 0},
                       .d = {1, 1}};
    w = check_shape("1x1, 1 x 2 x 512 x 256, positive", &big, true, true);
    worst = w > worst ? w : worst;
    /* stride 2 (MobileNet's downsampling layers) */
    const shape s2 = {.n = 8,
                      .c = 3,
                      .h = 127,
                      .w = 128,
                      .kh = 3,
                      .kw = 3,
                      .s = {2, 2},
                      .p = {1, 1},
                      .d = {1, 1}};
    w = check_shape("3x3 stride 2, 8 x 3 x 127 x 128", &s2, true, true);
    worst = w > worst ? w : worst;
    /* rows too narrow for the direct kernels, dilated, asymmetric */
    const shape narrow = {
        .n = 64, .c = 6, .h = 20, .w = 5, .kh = 3, .kw = 2, .s = {1, 1}, .p = {2, 0}, .d = {2, 3}};
    w = check_shape("3x2 dilated, 64 x 6 x 20 x 5, signed", &narrow, false, true);
    worst = w > worst ? w : worst;
    const shape wide = {
        .n = 2, .c = 2, .h = 30, .w = 150, .kh = 5, .kw = 7, .s = {3, 2}, .p = {2, 3}, .d = {1, 1}};
    w = check_shape("5x7 strides 3 and 2, rows of 75", &wide, false, false);
    worst = w > worst ? w : worst;
    check_edges_threads();
    check_nonfinite();
    printf("worst error / bound over the shapes: %.3g\n", worst);
    return ts_test_finish();
}
