/* conv_dnnl_blocked.c — the CPU backend's convolutions on channel-blocked activations
 * (backend.h's conv2d_block / conv2d_blocked): oneDNN's nChw16c (AVX-512) or nChw8c (AVX2) as
 * [N, ceil(C/B), H, W, B] float32 tensors, which the ONNX rewrite of onnx/rewrite_blocked.c keeps
 * between consecutive convolutions so that the primitive's activations need no reorder (the
 * plain entry reorders x into the primitive's layout and y back at every call: MobileNetV3-Small
 * ran 89 such reorders a forward, more time than its convolutions).
 *
 * The same primitives, weight cache, post-ops and one-thread rule as the plain forward
 * (conv_dnnl.c, whose key carries the two layouts): only the user's descriptors of x and y
 * differ, so where the primitive wants exactly the blocked layout (its JIT kernels on this ISA)
 * no reorder runs, and elsewhere oneDNN's reorder from or to the blocked layout does — a result
 * bit for bit the plain entry's either way. Which kernel runs is conv_select.c's choice, the
 * plain forward's (TS_CONV=builtin none, TS_CONV=dnnl all, by default not those the direct
 * kernels take, except depthwise ones of 16 groups or more) plus Tessera's own blocked kernels;
 * for the built-in ones this returns false and the front end runs conv2d on plain copies. */
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/conv_dnnl.h"
#include "backend/cpu/conv_dw_blocked.h"
#include "backend/cpu/conv_fc_blocked.h"
#include "backend/cpu/conv_select.h"
#include "backend/cpu/cpu_isa.h"
#include "backend/cpu/cpu_kernels.h"
#include "backend/cpu/kern_conv.h"
#include "backend/env_config.h"
#ifdef TS_HAVE_DNNL
#include "backend/cpu/dnnl_common.h"
#endif

int tsi_cpu_conv2d_block(const ts_backend *be) {
    (void)be;
#ifdef TS_HAVE_DNNL
    if (tsi_conv_provider() == 0 || !tsi_dnnl_engine()) return 0;
    const ts_cpu_isa isa = ts_cpu_isa_get();
    return isa == TS_ISA_AVX512 ? 16 : isa == TS_ISA_AVX2 ? 8 : 0;
#else
    return 0;
#endif
}

bool tsi_cpu_conv2d_blocked(const ts_backend *be, int index, float *out, int out_block,
                            const float *x, int x_block, const float *w, const float *bias,
                            const int64_t nchw[4], const int64_t o_ohw[3], const int64_t khw[2],
                            const ts_conv2d_params *p) {
    (void)index;
    const int blk = tsi_cpu_conv2d_block(be);
    if (!blk || (x_block && x_block != blk) || (out_block && out_block != blk)) return false;
    const ts_cgeom g = tsi_cgeom_make(nchw, o_ohw, khw, p);
    if (g.c % g.g || g.o % g.g || g.n * g.o * g.oh * g.ow == 0) return false;
    /* conv_select.c's choice, as for the plain forward; Tessera's own kernels (depthwise ones,
     * those of 1x1 images: a squeeze-excitation's) only with both sides blocked */
    switch (tsi_conv_select(&g, TSI_CONV_PASS_FORWARD, TS_F32, x_block && out_block ? blk : 0)) {
    case TSI_CONV_PATH_DW_BLOCKED:
        return tsi_conv_dw_blocked(&g, blk, out, x, w, bias);
    case TSI_CONV_PATH_FC_BLOCKED:
        return tsi_conv_fc_blocked(&g, blk, out, x, w, bias);
    case TSI_CONV_PATH_DNNL:
        break;
    default:
        return false; /* the built-in kernels: the front end's plain path */
    }
    const tsi_conv_weight_id wid = {
        .uid = p->weight_uid, .version = p->weight_version, .offset = p->weight_offset};
    return tsi_dnnl_conv_forward_blocked(&g, x, x_block, w, &wid, bias, out, out_block);
}
