/* test_conv_fc_blocked.c — backend/cpu/conv_fc_blocked.c, the convolutions of 1x1 images in the
 * blocked layout (a squeeze-excitation's FCs), both variants (block 16 AVX-512, block 8 AVX2) where
 * the CPU has them, called directly and through the backend's conv2d_blocked entry (which gives
 * them such convolutions unless TS_CONV=dnnl):
 *
 *  - against a float64 reference of act(b + w x): the pre-activation's error is bounded by the
 *    float32 sum of C + 1 terms, gamma_{C+1} (|b| + sum |w||x|), gamma_n = n u / (1 - n u),
 *    u = 2^-24; the activations' slopes are at most 1.5 (HardSwish with alpha 1/6, beta 1/2; 1 for
 *    the others) and their own roundings add at most 4 u (1 + |y|)^2;
 *  - against oneDNN's kernel on the same data (TS_CONV=dnnl): within the bound too;
 *  - C and O under a block, a multiple of it and past it (the masked tail, the rows left over from
 *    groups of four), batches, an O large enough for threads; the lanes past O are 0 whatever x's
 *    padding lanes hold;
 *  - the shapes the kernel does not take: false, y untouched.
 * ctest runs it under TS_CPU_ISA=avx2 (block 8 through the entry) and generic (no block). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "ts_test.h"

#include "backend/backend.h"
#include "backend/cpu/conv_fc_blocked.h"
#include "backend/cpu/cpu_isa.h"
#include "backend/cpu/kern_conv.h"
#include "nn/conv_blocked.h"

#include "blocked_test_util.h"
#include "conv_kernel_test_util.h"

typedef struct fc_case {
    int64_t n, c, o;
    ts_conv_act act;
    double lo, hi;
    bool bias;
} fc_case;

static ts_conv2d_params params(const fc_case *t) {
    return (ts_conv2d_params){.stride = {1, 1},
                              .dilation = {1, 1},
                              .groups = 1,
                              .act = t->act,
                              .act_lo = t->lo,
                              .act_hi = t->hi};
}

static ts_cgeom geom(const fc_case *t) {
    const int64_t nchw[4] = {t->n, t->c, 1, 1}, ohw[3] = {t->o, 1, 1}, khw[2] = {1, 1};
    const ts_conv2d_params p = params(t);
    return tsi_cgeom_make(nchw, ohw, khw, &p);
}

/* the worst error of the case as a fraction of its bound (INFINITY: a padding lane not 0, or the
 * kernel declined) */
static double run_case(const fc_case *t, int blk, bool via) {
    const ts_cgeom g = geom(t);
    const int64_t cbl = (t->c + blk - 1) / blk * blk, obl = (t->o + blk - 1) / blk * blk;
    float *x = malloc(sizeof(float) * (size_t)(t->n * cbl));
    float *y = malloc(sizeof(float) * (size_t)(t->n * obl));
    float *w = malloc(sizeof(float) * (size_t)(t->o * t->c)),
          *b = malloc(sizeof(float) * (size_t)t->o);
    for (int64_t i = 0; i < t->n * cbl; i++) x[i] = i % cbl < t->c ? (float)uniform(-1, 1) : 1e30f;
    for (int64_t i = 0; i < t->o * t->c; i++) w[i] = (float)uniform(-1, 1);
    for (int64_t i = 0; i < t->o; i++) b[i] = (float)uniform(-1, 1);
    for (int64_t i = 0; i < t->n * obl; i++) y[i] = NAN;
    bool ok;
    if (via) {
        const ts_backend *be = tsi_backend_for(TS_CPU);
        const ts_conv2d_params p = params(t);
        const int64_t nchw[4] = {t->n, t->c, 1, 1}, ohw[3] = {t->o, 1, 1}, khw[2] = {1, 1};
        ok = be->conv2d_blocked(be, 0, y, blk, x, blk, w, t->bias ? b : NULL, nchw, ohw, khw, &p);
    } else {
        ok = tsi_conv_fc_blocked(&g, blk, y, x, w, t->bias ? b : NULL);
    }
    const double u = 0x1p-24, gam = (double)(t->c + 1) * u / (1 - (double)(t->c + 1) * u);
    double worst = ok ? 0 : INFINITY;
    for (int64_t n = 0; n < t->n && ok; n++)
        for (int64_t o = 0; o < obl; o++) {
            const float got = y[n * obl + o];
            if (o >= t->o) {
                if (got != 0) worst = INFINITY;
                continue;
            }
            double s = t->bias ? b[o] : 0, mag = fabs(s);
            for (int64_t c = 0; c < t->c; c++) {
                const double p = (double)w[o * t->c + c] * x[n * cbl + c];
                s += p, mag += fabs(p);
            }
            const double slope = t->act == TS_CONV_ACT_HARDSWISH ? 1.5 : 1;
            const double act_round =
                t->act == TS_CONV_ACT_NONE ? 0 : 4 * u * (1 + fabs(s)) * (1 + fabs(s));
            const double bound = slope * gam * mag + act_round;
            const double d = fabs((double)got - act64(t->act, t->lo, t->hi, s));
            const double r = d == 0 ? 0 : d / bound;
            if (!(r <= worst)) worst = isnan(r) ? INFINITY : r;
        }
    free(x), free(y), free(w), free(b);
    return worst;
}

static const fc_case CASES[] = {
    /* MobileNetV3-Small's */
    {1, 576, 144, TS_CONV_ACT_RELU, 0, 0, true},
    {1, 144, 576, TS_CONV_ACT_HARDSIGMOID, 1.0 / 6, 0.5, true},
    {1, 16, 8, TS_CONV_ACT_RELU, 0, 0, true},
    {1, 72, 288, TS_CONV_ACT_HARDSIGMOID, 1.0 / 6, 0.5, true},
    /* the tails: C and O under, at and past a block; rows left from groups of four */
    {2, 5, 3, TS_CONV_ACT_NONE, 0, 0, false},
    {3, 17, 9, TS_CONV_ACT_CLIP, -0.4, 0.3, true},
    {1, 33, 1, TS_CONV_ACT_HARDSWISH, 1.0 / 6, 0.5, true},
    {2, 8, 16, TS_CONV_ACT_HARDSIGMOID, 0.2, 0.5, false},
    {1, 1, 7, TS_CONV_ACT_RELU, 0, 0, true},
    /* work enough for threads: rows cut into pieces */
    {2, 1024, 1000, TS_CONV_ACT_NONE, 0, 0, true},
};
enum { NCASES = sizeof CASES / sizeof *CASES };

static int blocks_here[2], nblocks;

static void check_reference(void) {
    for (int bi = 0; bi < nblocks; bi++)
        for (int i = 0; i < NCASES; i++) {
            const double r = run_case(&CASES[i], blocks_here[bi], false);
            if (!(r <= 1))
                printf("  block %d case %d: error %.3g of the bound\n", blocks_here[bi], i, r);
            CHECK(r <= 1);
        }
    CHECK_OK();
}

/* the entry with the CPU's own block: this kernel by default, oneDNN's under TS_CONV=dnnl */
static void check_entry(void) {
    const int blk = tsi_conv_block(ts_cpu());
    if (!blk) return;
    for (int pass = 0; pass < 2; pass++) {
        if (pass) tsi_conv_force_provider("dnnl");
        for (int i = 0; i < NCASES; i++) {
            const double r = run_case(&CASES[i], blk, true);
            if (!(r <= 1))
                printf("  entry (%s) case %d: %.3g of the bound\n", pass ? "dnnl" : "own", i, r);
            CHECK(r <= 1);
        }
        tsi_conv_force_provider(NULL);
    }
    CHECK_OK();
}

static void check_refusals(void) {
    const fc_case ok = {1, 16, 16, TS_CONV_ACT_NONE, 0, 0, false};
    float x[4 * 16] = {0}, w[16 * 16 * 9] = {0}, y[4 * 16 * 4];
    for (int i = 0; i < 4 * 16 * 4; i++) y[i] = 7;
    const ts_cgeom g = geom(&ok);
    CHECK(tsi_conv_fc_blocked_takes(&g, 16) && tsi_conv_fc_blocked_takes(&g, 8));
    CHECK(!tsi_conv_fc_blocked_takes(&g, 4) && !tsi_conv_fc_blocked(&g, 4, y, x, w, NULL));
    ts_cgeom bad[7];
    for (int i = 0; i < 7; i++) bad[i] = g;
    bad[0].h = bad[0].w = 2, bad[0].oh = bad[0].ow = 2;   /* a 2x2 image */
    bad[1].kh = bad[1].kw = 3, bad[1].ph = bad[1].pw = 1; /* 3x3 kernel */
    bad[2].g = 2, bad[2].cg = 8, bad[2].og = 8;           /* two groups */
    bad[3].n = 0;                                         /* empty batch */
    bad[4].ph = 1, bad[4].oh = 3;                         /* padded */
    bad[5].c = 0;                                         /* no channels */
    bad[6].o = 0;                                         /* no outputs */
    for (int i = 0; i < 7; i++) {
        const bool takes = tsi_conv_fc_blocked_takes(&bad[i], 16);
        if (takes) printf("  refusal %d taken\n", i);
        CHECK(!takes);
        CHECK(!tsi_conv_fc_blocked(&bad[i], 16, y, x, w, NULL));
    }
    bool untouched = true;
    for (int i = 0; i < 4 * 16 * 4; i++) untouched = untouched && y[i] == 7;
    CHECK(untouched);
    CHECK_OK();
}

int main(void) {
    if (ts_test_isa_gate()) return 77;
    ts_release(ts_zeros(TS_SHAPE(1), (ts_opts){0})); /* the cpu backend installed */
    nblocks = conv_blocks_here(blocks_here);
    printf("1x1-image blocked: variants of block");
    for (int i = 0; i < nblocks; i++) printf(" %d", blocks_here[i]);
    printf(" on this host; the entry's block %d\n", tsi_conv_block(ts_cpu()));
    ts_set_num_threads(2);
    check_reference();
    check_entry();
    ts_set_num_threads(1);
    check_reference();
    check_refusals();
    return ts_test_finish();
}
