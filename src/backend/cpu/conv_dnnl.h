/* conv_dnnl.h — float32 and bf16 convolutions through oneDNN's primitives (when the build found
 * oneDNN). */
#ifndef TS_CONV_DNNL_H
#define TS_CONV_DNNL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/cpu/kern_conv.h"

/* A weight that does not change during the call and is not being trained: its storage's uid (0:
 * cache nothing), that storage's version and the weight's offset (backend.h's ts_conv2d_params). */
typedef struct tsi_conv_weight_id {
    uint64_t uid, version;
    int64_t offset;
} tsi_conv_weight_id;

/* Contiguous NCHW x / y, OIHW w (O x C/groups x KH x KW), bias [O] or NULL; the geometry and the
 * activation of kern_conv.h. wid (NULL or uid 0: none) lets the weight's reordered copy be cached
 * (conv_dnnl_wcache.c). Returns false, having written nothing the caller relies on, when oneDNN is
 * absent or declines the shape or memory runs out: the caller then runs the built-in kernels. */
bool tsi_dnnl_conv_forward(const ts_cgeom *g, const float *x, const float *w,
                           const tsi_conv_weight_id *wid, const float *b, float *y);
bool tsi_dnnl_conv_backward_data(const ts_cgeom *g, const float *gy, const float *w, float *gx);
bool tsi_dnnl_conv_backward_weight(const ts_cgeom *g, const float *gy, const float *x, float *gw);
/* The same in bf16 (every operand bf16, the bias too; float32 sums, one rounding), for CPUs that
 * multiply bf16 natively (tsi_dnnl_bf16_native, matmul_dnnl.h): false as above. */
bool tsi_dnnl_conv_forward_bf16(const ts_cgeom *g, const uint16_t *x, const uint16_t *w,
                                const tsi_conv_weight_id *wid, const uint16_t *b, uint16_t *y);
bool tsi_dnnl_conv_backward_data_bf16(const ts_cgeom *g, const uint16_t *gy, const uint16_t *w,
                                      uint16_t *gx);
bool tsi_dnnl_conv_backward_weight_bf16(const ts_cgeom *g, const uint16_t *gy, const uint16_t *x,
                                        uint16_t *gw);
/* The float32 forward with x and / or y in oneDNN's channel-blocked layout nChw<B>c, x_blk / y_blk
 * = B (16 or 8; 0: that one plain NCHW): [N, ceil(C/B), H, W, B], channel c at [c / B][..][c % B]
 * (conv_dnnl_blocked.c). The same primitive as tsi_dnnl_conv_forward's, so the same values; x's
 * padding channels meet the weight's zero padding (finite values are harmless), y's come as
 * oneDNN writes them (zero). false as above. */
bool tsi_dnnl_conv_forward_blocked(const ts_cgeom *g, const float *x, int x_blk, const float *w,
                                   const tsi_conv_weight_id *wid, const float *b, float *y,
                                   int y_blk);
/* The forward, backward-data and backward-weight passes with every activation (x, y, gy, gx) in
 * the channels_last layout, NHWC ([n][h][w][c], dense): the primitive's NHWC kernels (no reorder
 * of an activation) where tsi_dnnl_conv_nhwc_native, else the blocked kernels with the
 * activations reordered around the call; float32, or bf16 (bf16 = true) where the CPU multiplies
 * bf16. The forward applies g's activation as tsi_dnnl_conv_forward does. false as above. */
bool tsi_dnnl_conv_forward_nhwc(bool bf16, const ts_cgeom *g, const void *x, const void *w,
                                const tsi_conv_weight_id *wid, const void *b, void *y);
bool tsi_dnnl_conv_backward_data_nhwc(bool bf16, const ts_cgeom *g, const void *gy, const void *w,
                                      void *gx);
bool tsi_dnnl_conv_backward_weight_nhwc(bool bf16, const ts_cgeom *g, const void *gy, const void *x,
                                        void *gw);
/* Whether NHWC convolutions run oneDNN's NHWC kernels as they are (AVX-512, where those are as
 * fast as the blocked ones), not the blocked kernels with reorders (below AVX-512: 20% faster
 * than AVX2's NHWC kernels); TS_CONV_NHWC=keep|blocked forces it. false without oneDNN. */
bool tsi_dnnl_conv_nhwc_native(void);
/* Reorders of activations (x, y, gy, gx: not weights) the convolutions have run so far, between
 * our layout and the primitive's (tests and benchmarks count what the blocked layout saves). */
uint64_t tsi_dnnl_conv_act_reorders(void);
/* Convolutions oneDNN has run so far (tests check that it, not a fallback, ran): float32, and
 * bf16 apart. */
uint64_t tsi_dnnl_conv_count(void);
uint64_t tsi_dnnl_conv_bf16_count(void);
/* Primitives built so far (a cache miss builds one; tests check what the cache keys on). */
uint64_t tsi_dnnl_conv_builds(void);
/* The cache of reordered weights (conv_dnnl_wcache.c), for tests and benchmarks: what it served
 * (hits), what it filled and keeps now; and its bound in bytes (0: keep nothing), evicting down to
 * it, returning the previous bound. */
typedef struct tsi_wcache_stats {
    uint64_t hits, fills;
    size_t bytes;
    int entries;
} tsi_wcache_stats;
void tsi_dnnl_conv_wcache_stats(tsi_wcache_stats *out);
size_t tsi_dnnl_conv_wcache_limit(size_t bytes);

#endif /* TS_CONV_DNNL_H */
