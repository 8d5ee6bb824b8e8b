/* conv_fc_blocked.c — convolutions of 1x1 images on channel-blocked activations
 * (conv_fc_blocked.h): the squeeze-excitation's two fully connected layers, which MobileNets write
 * as 1x1 convolutions of the pooled [N, C, 1, 1] vector. In the blocked layout such an image is
 * its C channels in order (then the padding lanes), so each output is one dot product of a weight
 * row [O, C] with it: gemv.c's row kernel (four rows at a time in vectors of 16 with AVX-512 or 8
 * with AVX2, x loaded once for the four, the tail of C a zero-filled copy). Then bias, the
 * activation as the composed ops round it (kern_conv.c's tsi_conv_act_f32), and the lanes past O
 * set to 0. oneDNN ran these as 1x1 convolutions of a single pixel: 16-19 us for 576 x 144 (330 KB
 * of weights), what a dot product streaming the rows takes in a few. */
#include "backend/cpu/conv_fc_blocked.h"

#include "backend/cpu/gemv.h"
#include "backend/omp_if.h"

bool tsi_conv_fc_blocked_takes(const ts_cgeom *g, int blk) {
    return tsi_gemv_rows_present() && (blk == 16 || blk == 8) && g->g == 1 && g->h == 1 &&
           g->w == 1 && g->kh == 1 && g->kw == 1 && g->ph == 0 && g->pw == 0 && g->oh == 1 &&
           g->ow == 1 && g->n > 0 && g->c > 0 && g->o > 0;
}

bool tsi_conv_fc_blocked(const ts_cgeom *g, int blk, float *y, const float *x, const float *w,
                         const float *b) {
    if (!tsi_conv_fc_blocked_takes(g, blk)) return false;
    const int64_t cbl = (g->c + blk - 1) / blk * blk, obl = (g->o + blk - 1) / blk * blk;
    /* threads where gemv.c's products would use them: one image's rows split evenly, or images */
    const double macs = (double)g->n * (double)g->c * (double)g->o;
    const bool threads = tsi_gemv_piece_rows(g->n * g->o, macs, true) < g->n * g->o;
    const int64_t piece = g->n == 1 ? tsi_gemv_piece_rows(g->o, macs, true) : g->o;
    const int64_t pieces = (g->o + piece - 1) / piece, items = g->n * pieces;
    const bool wide = blk == 16;
    for (int64_t n = 0; n < g->n; n++) {
        float *yn = y + n * obl;
        for (int64_t o = 0; o < obl; o++) yn[o] = o < g->o && b ? b[o] : 0.0f;
    }
    TS_PARALLEL_FOR_IF(
        threads && items > 1, for (int64_t it = 0; it < items; it++) {
            const int64_t n = it / pieces, o0 = it % pieces * piece;
            const int64_t o1 = o0 + piece < g->o ? o0 + piece : g->o;
            tsi_gemv_rows_f32(wide, g->c, x + n * cbl, w, g->c, y + n * obl, 1, o0, o1);
        });
    if (g->act != TS_CONV_ACT_NONE)
        for (int64_t n = 0; n < g->n; n++) tsi_conv_act_f32(g, y + n * obl, g->o);
    return true;
}
