/* test_conv_dw_blocked.c — backend/cpu/conv_dw_blocked.c, the depthwise convolutions of the
 * blocked layout, both variants (block 16 AVX-512, block 8 AVX2) where the CPU has them, called
 * directly and through the backend's conv2d_blocked entry (which gives them depthwise ones unless
 * TS_CONV=dnnl):
 *
 *  - against a float64 reference of act(b + sum x w): the pre-activation's error is bounded by
 *    the float32 sum of K*K + 1 terms, gamma_{K*K+1} (|b| + sum |x||w|) with gamma_n = n u / (1 -
 *    n u), u = 2^-24; the activations' slopes are at most 1.5 (HardSwish with alpha 1/6, beta 1/2;
 *    1 for the others), and their own roundings (a product, a sum and a product for HardSwish)
 *    add at most 4 u (1 + |y|)^2;
 *  - against oneDNN's kernel on the same blocked data (TS_CONV=dnnl): within the two bounds;
 *  - the lanes past C are written 0 whatever x's padding lanes hold; NaN stays NaN;
 *  - kernels, strides, pads, odd widths (tiles of 7 and 8 outputs, edges), batches, bands of rows
 *    on two threads;
 *  - the shapes the kernel does not take: false, y untouched.
 * ctest runs it under TS_CPU_ISA=avx2 (block 8 through the entry) and generic (no block). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ts_test.h"

#include "backend/backend.h"
#include "backend/cpu/conv_dw_blocked.h"
#include "backend/cpu/cpu_isa.h"
#include "backend/cpu/kern_conv.h"
#include "nn/conv_blocked.h"

#include "blocked_test_util.h"
#include "conv_kernel_test_util.h"

typedef struct dw_case {
    int64_t n, c, h, w, k, s, p;
    ts_conv_act act;
    double lo, hi;
    bool bias;
} dw_case;

static ts_conv2d_params params(const dw_case *t) {
    return (ts_conv2d_params){.stride = {(int)t->s, (int)t->s},
                              .padding = {(int)t->p, (int)t->p},
                              .dilation = {1, 1},
                              .groups = (int)t->c,
                              .act = t->act,
                              .act_lo = t->lo,
                              .act_hi = t->hi};
}

static ts_cgeom geom(const dw_case *t) {
    const int64_t nchw[4] = {t->n, t->c, t->h, t->w};
    const int64_t ohw[3] = {t->c, (t->h + 2 * t->p - t->k) / t->s + 1,
                            (t->w + 2 * t->p - t->k) / t->s + 1};
    const int64_t khw[2] = {t->k, t->k};
    const ts_conv2d_params p = params(t);
    return tsi_cgeom_make(nchw, ohw, khw, &p);
}

/* blocked index of (n, c, i, j) */
static size_t bidx(int64_t cb_n, int64_t h, int64_t w, int blk, int64_t n, int64_t c, int64_t i,
                   int64_t j) {
    return (size_t)((((n * cb_n + c / blk) * h + i) * w + j) * blk + c % blk);
}

/* runs the case with block blk (direct call, or the backend entry when via); compares with the
 * float64 reference; when other is not NULL, also returns the output there for a second path */
static double run_case(const dw_case *t, int blk, int via, float **keep_y, double *worst_ratio) {
    const ts_cgeom g = geom(t);
    const int64_t cb = (t->c + blk - 1) / blk;
    const size_t nx = (size_t)(t->n * cb * t->h * t->w * blk);
    const size_t ny = (size_t)(t->n * cb * g.oh * g.ow * blk);
    float *x = malloc(sizeof(float) * nx), *y = malloc(sizeof(float) * ny);
    float *w = malloc(sizeof(float) * (size_t)(t->c * t->k * t->k)),
          *b = malloc(sizeof(float) * (size_t)t->c);
    for (size_t i = 0; i < nx; i++) x[i] = (float)uniform(-1, 1);
    for (size_t i = 0; i < nx; i++) /* the padding lanes: any finite value */
        if ((int64_t)(i % (size_t)blk) +
                (int64_t)((i / (size_t)(blk * t->h * t->w)) % (size_t)cb) * blk >=
            t->c)
            x[i] = 1e30f;
    for (int64_t i = 0; i < t->c * t->k * t->k; i++) w[i] = (float)uniform(-1, 1);
    for (int64_t i = 0; i < t->c; i++) b[i] = (float)uniform(-1, 1);
    for (size_t i = 0; i < ny; i++) y[i] = NAN; /* what is not written shows */
    bool ok;
    if (via) {
        const ts_backend *be = tsi_backend_for(TS_CPU);
        const ts_conv2d_params p = params(t);
        const int64_t nchw[4] = {t->n, t->c, t->h, t->w}, ohw[3] = {t->c, g.oh, g.ow};
        const int64_t khw[2] = {t->k, t->k};
        ok = be->conv2d_blocked(be, 0, y, blk, x, blk, w, t->bias ? b : NULL, nchw, ohw, khw, &p);
    } else {
        ok = tsi_conv_dw_blocked(&g, blk, y, x, w, t->bias ? b : NULL);
    }
    CHECK(ok);
    const double u = 0x1p-24, gam = (t->k * t->k + 1) * u / (1 - (t->k * t->k + 1) * u);
    double worst = 0;
    for (int64_t n = 0; n < t->n && ok; n++)
        for (int64_t c = 0; c < cb * blk; c++)
            for (int64_t i = 0; i < g.oh; i++)
                for (int64_t j = 0; j < g.ow; j++) {
                    const float got = y[bidx(cb, g.oh, g.ow, blk, n, c, i, j)];
                    if (c >= t->c) {
                        if (got != 0) worst = INFINITY;
                        continue;
                    }
                    double s = t->bias ? b[c] : 0, mag = fabs(s);
                    for (int64_t a = 0; a < t->k; a++)
                        for (int64_t e = 0; e < t->k; e++) {
                            const int64_t ih = i * t->s - t->p + a, iw = j * t->s - t->p + e;
                            if (ih < 0 || ih >= t->h || iw < 0 || iw >= t->w) continue;
                            const double xv = x[bidx(cb, t->h, t->w, blk, n, c, ih, iw)];
                            const double wv = w[(c * t->k + a) * t->k + e];
                            s += xv * wv, mag += fabs(xv * wv);
                        }
                    const double slope = t->act == TS_CONV_ACT_HARDSWISH ? 1.5 : 1;
                    const double act_round =
                        t->act == TS_CONV_ACT_NONE ? 0 : 4 * u * (1 + fabs(s)) * (1 + fabs(s));
                    const double bound = slope * gam * mag + act_round;
                    const double d = fabs((double)got - act64(t->act, t->lo, t->hi, s));
                    const double r = d == 0 ? 0 : bound > 0 ? d / bound : INFINITY;
                    if (!(r <= worst)) worst = isnan(r) ? INFINITY : r;
                }
    if (worst_ratio) *worst_ratio = worst;
    if (keep_y)
        *keep_y = y;
    else
        free(y);
    free(x), free(w), free(b);
    return worst;
}

static const dw_case CASES[] = {
    /* MobileNetV3-Small's, smaller batches of planes */
    {1, 16, 24, 24, 3, 2, 1, TS_CONV_ACT_RELU, 0, 0, true},
    {1, 72, 14, 14, 3, 2, 1, TS_CONV_ACT_RELU, 0, 0, true},
    {1, 88, 14, 14, 3, 1, 1, TS_CONV_ACT_RELU, 0, 0, true},
    {1, 96, 14, 14, 5, 2, 2, TS_CONV_ACT_HARDSWISH, 1.0 / 6, 0.5, true},
    {1, 40, 14, 14, 5, 1, 2, TS_CONV_ACT_HARDSWISH, 1.0 / 6, 0.5, true},
    {1, 24, 7, 7, 5, 1, 2, TS_CONV_ACT_HARDSWISH, 1.0 / 6, 0.5, true},
    /* the other activations, no bias, odd widths, batches, C under a block and past one */
    {2, 5, 9, 11, 3, 1, 1, TS_CONV_ACT_NONE, 0, 0, false},
    {2, 33, 10, 13, 3, 2, 0, TS_CONV_ACT_CLIP, -0.4, 0.3, true},
    {1, 17, 8, 17, 5, 1, 4, TS_CONV_ACT_CLIP, NAN, 0.3, true},
    {1, 9, 5, 3, 5, 2, 2, TS_CONV_ACT_CLIP, -0.4, NAN, false},
    {3, 8, 6, 9, 7, 1, 3, TS_CONV_ACT_HARDSIGMOID, 0.2, 0.5, true},
    {1, 20, 15, 22, 7, 2, 6, TS_CONV_ACT_RELU, 0, 0, true},
    {1, 3, 1, 1, 3, 1, 1, TS_CONV_ACT_HARDSWISH, 1.0 / 6, 0.5, true},
    {1, 16, 3, 20, 3, 1, 0, TS_CONV_ACT_NONE, 0, 0, true},
    /* stride 2, a tile after the first whose last output reads the right pad (tiles of 8: 47
     * wide; of 7: 41 wide): the edge test must count the tile's reach as (nw - 1) * S + K */
    {1, 16, 5, 47, 3, 2, 1, TS_CONV_ACT_NONE, 0, 0, true},
    {1, 16, 5, 41, 3, 2, 1, TS_CONV_ACT_NONE, 0, 0, true},
    /* work enough for two threads: one plane cut into bands of rows; many planes */
    {1, 16, 40, 40, 5, 1, 2, TS_CONV_ACT_HARDSWISH, 1.0 / 6, 0.5, true},
    {2, 64, 24, 24, 3, 1, 1, TS_CONV_ACT_RELU, 0, 0, true},
};
enum { NCASES = sizeof CASES / sizeof *CASES };

static int blocks_here[2], nblocks;

static void check_reference(void) {
    for (int bi = 0; bi < nblocks; bi++)
        for (int i = 0; i < NCASES; i++) {
            double r;
            run_case(&CASES[i], blocks_here[bi], 0, NULL, &r);
            if (!(r <= 1))
                printf("  block %d case %d: error %.3g of the bound\n", blocks_here[bi], i, r);
            CHECK(r <= 1);
        }
    CHECK_OK();
}

/* the backend entry with the CPU's own block: this kernel by default, oneDNN's under TS_CONV=dnnl;
 * both within the bound of the reference, so within two bounds of each other */
static void check_entry(void) {
    const int blk = tsi_conv_block(ts_cpu());
    if (!blk) return;
    for (int pass = 0; pass < 2; pass++) {
        if (pass) tsi_conv_force_provider("dnnl");
        for (int i = 0; i < NCASES; i++) {
            double r;
            run_case(&CASES[i], blk, 1, NULL, &r);
            if (!(r <= 1))
                printf("  entry (%s) case %d: %.3g of the bound\n", pass ? "dnnl" : "own", i, r);
            CHECK(r <= 1);
        }
        tsi_conv_force_provider(NULL);
    }
    CHECK_OK();
}

/* NaN in x stays NaN through ReLU and Clip */
static void check_nan(void) {
    for (int bi = 0; bi < nblocks; bi++) {
        const int blk = blocks_here[bi];
        dw_case t = {1, 3, 4, 4, 3, 1, 1, TS_CONV_ACT_RELU, 0, 0, true};
        ts_cgeom g = geom(&t);
        float x[4 * 4 * 16] = {0}, w[3 * 9], b[3] = {0}, y[4 * 4 * 16];
        for (int i = 0; i < 27; i++) w[i] = 1;
        x[(1 * 4 + 1) * blk + 2] = NAN; /* channel 2, (1, 1) */
        for (int a = 0; a < 2; a++) {
            if (a) g.act = TS_CONV_ACT_CLIP, g.lo = -1, g.hi = 1;
            CHECK(tsi_conv_dw_blocked(&g, blk, y, x, w, b));
            CHECK(isnan(y[(0 * 4 + 0) * blk + 2]) && isnan(y[(2 * 4 + 2) * blk + 2]));
            CHECK(y[(3 * 4 + 3) * blk + 2] == 0 && y[(1 * 4 + 1) * blk + 1] == 0);
        }
    }
    CHECK_OK();
}

/* what the kernel does not take: false, y untouched */
static void check_refusals(void) {
    const dw_case ok = {1, 16, 8, 8, 3, 1, 1, TS_CONV_ACT_NONE, 0, 0, false};
    float x[8 * 8 * 16] = {0}, w[16 * 49] = {0}, y[8 * 8 * 16];
    for (int i = 0; i < 8 * 8 * 16; i++) y[i] = 7;
    ts_cgeom g = geom(&ok);
    CHECK(tsi_conv_dw_blocked_takes(&g, 16) && tsi_conv_dw_blocked_takes(&g, 8));
    CHECK(!tsi_conv_dw_blocked_takes(&g, 4) && !tsi_conv_dw_blocked_takes(&g, 0));
    CHECK(!tsi_conv_dw_blocked(&g, 4, y, x, w, NULL));
    ts_cgeom bad[12];
    for (int i = 0; i < 12; i++) bad[i] = g;
    bad[0].kh = bad[0].kw = 4;    /* kernel 4 */
    bad[1].kw = 5;                /* not square */
    bad[2].sh = bad[2].sw = 3;    /* stride 3 */
    bad[3].sw = 2;                /* strides differ */
    bad[4].dh = bad[4].dw = 2;    /* dilated */
    bad[5].ph = 3;                /* pad as large as the kernel */
    bad[6].g = 8, bad[6].cg = 2;  /* groups of two channels */
    bad[7].o = 32, bad[7].og = 2; /* two outputs a channel */
    bad[8].kh = bad[8].kw = 1;    /* 1x1 */
    bad[9].n = 0;                 /* empty batch */
    bad[10].kh = bad[10].kw = 9;  /* kernel 9 */
    bad[11].pw = -1;              /* negative pad */
    for (int i = 0; i < 12; i++) {
        const bool takes = tsi_conv_dw_blocked_takes(&bad[i], 16);
        if (takes) printf("  refusal %d taken\n", i);
        CHECK(!takes);
        CHECK(!tsi_conv_dw_blocked(&bad[i], 16, y, x, w, NULL));
    }
    bool untouched = true;
    for (int i = 0; i < 8 * 8 * 16; i++) untouched = untouched && y[i] == 7;
    CHECK(untouched);
    CHECK_OK();
}

int main(void) {
    if (ts_test_isa_gate()) return 77;
    ts_release(ts_zeros(TS_SHAPE(1), (ts_opts){0})); /* the cpu backend installed */
    nblocks = conv_blocks_here(blocks_here);
    printf("depthwise blocked: variants of block");
    for (int i = 0; i < nblocks; i++) printf(" %d", blocks_here[i]);
    printf(" on this host; the entry's block %d\n", tsi_conv_block(ts_cpu()));
    ts_set_num_threads(2);
    check_reference();
    check_entry();
    ts_set_num_threads(1);
    check_reference();
    check_nan();
    check_refusals();
    return ts_test_finish();
}
