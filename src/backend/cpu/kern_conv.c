/* kern_conv.c — 2-D convolution on the CPU: im2col + GEMM (OpenBLAS or the built-in blocked GEMM)
 * or, for f32 with few outputs per group, the direct kernels of kern_conv_direct.c; parallel over
 * the batch; the entry points, which hand f16/bf16 (and bf16 into float32) to kern_conv_half.c. */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/blas_threads.h"
#include "backend/cpu/conv_dnnl.h"
#include "backend/cpu/conv_dnnl_wcache.h"
#include "backend/cpu/conv_dw_weight.h"
#include "backend/cpu/conv_select.h"
#include "backend/cpu/cpu_kernels.h"
#include "backend/cpu/gemm_blocked.h"
#include "backend/cpu/gemm_provider.h"
#include "backend/cpu/kern_conv.h"
#include "backend/cpu/kern_conv_drivers.h"
#include "backend/cpu/vec_kernels.h"
#include "backend/env_config.h"
#include "backend/kernel_math.h"
#include "backend/omp_if.h"

#ifdef TS_HAVE_OPENMP
#include <omp.h>
#endif

/* ------------------------------------------------------------------ geometry */
typedef ts_cgeom cgeom;

ts_cgeom tsi_cgeom_make(const int64_t nchw[4], const int64_t o_ohw[3], const int64_t khw[2],
                        const ts_conv2d_params *p) {
    cgeom g = {.n = nchw[0],
               .c = nchw[1],
               .h = nchw[2],
               .w = nchw[3],
               .o = o_ohw[0],
               .oh = o_ohw[1],
               .ow = o_ohw[2],
               .kh = khw[0],
               .kw = khw[1],
               .sh = p->stride[0],
               .sw = p->stride[1],
               .ph = p->padding[0],
               .pw = p->padding[1],
               .dh = p->dilation[0],
               .dw = p->dilation[1],
               .g = p->groups > 0 ? p->groups : 1,
               .act = p->act,
               .lo = isnan(p->act_lo) && p->act == TS_CONV_ACT_CLIP ? -INFINITY : p->act_lo,
               .hi = isnan(p->act_hi) && p->act == TS_CONV_ACT_CLIP ? INFINITY : p->act_hi};
    g.cg = g.c / g.g;
    g.og = g.o / g.g;
    g.k = g.cg * g.kh * g.kw;
    g.p = g.oh * g.ow;
    g.direct = g.kh == 1 && g.kw == 1 && g.sh == 1 && g.sw == 1 && g.ph == 0 && g.pw == 0;
    return g;
}

static cgeom geom_of(const ts_kview *x, const ts_kview *w, const ts_kview *y,
                     const ts_conv2d_params *p) {
    const int64_t nchw[4] = {x->shape[0], x->shape[1], x->shape[2], x->shape[3]};
    const int64_t o_ohw[3] = {w->shape[0], y->shape[2], y->shape[3]};
    const int64_t khw[2] = {w->shape[2], w->shape[3]};
    return tsi_cgeom_make(nchw, o_ohw, khw, p);
}

/* Output columns ox whose input column ox*s + off lies in [0, w): [*lo, *hi). */
static void valid_range(int64_t off, int64_t s, int64_t w, int64_t ow, int64_t *lo, int64_t *hi) {
    int64_t l = off >= 0 ? 0 : (-off + s - 1) / s;
    int64_t h = w - off > 0 ? (w - off + s - 1) / s : 0;
    if (l > ow) l = ow;
    if (h > ow) h = ow;
    if (h < l) h = l;
    *lo = l, *hi = h;
}

/* ------------------------------------------------------------------ the activation */
/* The bounds convert to T as ts_clamp converts them (kern_unary.c). HardSigmoid / HardSwish as
 * the composed ops round: alpha * y, + beta, clamped to [0, 1] (NaN stays), times y. */
#define DEFINE_ACT(T, S, FAM)                                                                      \
    void tsi_conv_act_##S(const cgeom *g, T *y, int64_t n) {                                       \
        if (g->act == TS_CONV_ACT_RELU) {                                                          \
            for (int64_t i = 0; i < n; i++) y[i] = ts_relu_##FAM(y[i]);                            \
        } else if (g->act == TS_CONV_ACT_CLIP) {                                                   \
            const T lo = (T)g->lo, hi = (T)g->hi;                                                  \
            for (int64_t i = 0; i < n; i++) y[i] = ts_clamp_##FAM(y[i], lo, hi);                   \
        } else if (g->act == TS_CONV_ACT_HARDSIGMOID || g->act == TS_CONV_ACT_HARDSWISH) {         \
            const T a = (T)g->lo, b = (T)g->hi;                                                    \
            const bool swish = g->act == TS_CONV_ACT_HARDSWISH;                                    \
            for (int64_t i = 0; i < n; i++) {                                                      \
                T t = y[i] * a;                                                                    \
                t = ts_clamp_##FAM(t + b, (T)0, (T)1);                                             \
                y[i] = swish ? y[i] * t : t;                                                       \
            }                                                                                      \
        }                                                                                          \
    }
DEFINE_ACT(float, f32, f)
DEFINE_ACT(double, f64, d)

/* ------------------------------------------------------------------ threads */
int tsi_conv_max_threads(void) {
#ifdef TS_HAVE_OPENMP
    return omp_in_parallel() ? 1 : omp_get_max_threads();
#else
    return 1;
#endif
}

/* Many small images: one image per thread with single-threaded GEMMs. Few large ones: images in
 * turn, each GEMM using every thread. Never both levels at once (conv_select.c's table). */
static bool batch_parallel(const cgeom *g, int nt) { return tsi_conv_batch_parallel(g, nt); }

#ifdef TS_HAVE_OPENMP
/* OpenBLAS's own threads must stay out of GEMMs issued from inside an OpenMP region (one switch
 * shared by every thread: backend/cpu/blas_threads.c). */
static int blas_single_begin(void) {
    tsi_blas_single_begin();
    return 0;
}

static void blas_single_end(int saved) {
    (void)saved;
    tsi_blas_single_end();
}
#endif

/* ------------------------------------------------------------------ GEMM */
/* C[m,n] (row stride ldc) = op(A) @ op(B), plus C when acc. op(A) is A [m,k] (ld lda), or, when
 * ta, A stored [k,m]; likewise B. Without BLAS an accumulating call computes into tmp [m,n]. */
#define DEFINE_GEMM(T, S)                                                                          \
    static void gemm_##S(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const T *a,            \
                         int64_t lda, const T *b, int64_t ldb, bool acc, T *c, int64_t ldc,        \
                         bool par, T *tmp) {                                                       \
        if (m == 0 || n == 0) return;                                                              \
        if (k == 0) { /* no input channels: the product is zero */                                 \
            for (int64_t i = 0; !acc && i < m; i++) memset(c + i * ldc, 0, (size_t)n * sizeof(T)); \
            return;                                                                                \
        }                                                                                          \
        if (tsi_lib_##S##gemm(ta, tb, m, n, k, a, lda, b, ldb, acc ? (T)1 : (T)0, c, ldc)) return; \
        T *dst = acc ? tmp : c;                                                                    \
        const int64_t ldd = acc ? n : ldc;                                                         \
        tsi_gemm_blocked_##S(m, n, k, a, ta ? 1 : lda, ta ? lda : 1, b, tb ? 1 : ldb,              \
                             tb ? ldb : 1, dst, ldd, 1, par);                                      \
        if (acc)                                                                                   \
            for (int64_t i = 0; i < m; i++)                                                        \
                for (int64_t j = 0; j < n; j++) c[i * ldc + j] += tmp[i * n + j];                  \
    }

#define tsi_lib_f32gemm tsi_lib_sgemm
#define tsi_lib_f64gemm tsi_lib_dgemm
DEFINE_GEMM(float, f32)
DEFINE_GEMM(double, f64)

/* ------------------------------------------------------------------ per-image work, per type */
/* x: one group's channels of one image [cg, h, w]; col: [k, p]. */
#define DEFINE_CONV_TYPE(T, S)                                                                     \
    static void im2col_##S(const cgeom *g, const T *x, T *col) {                                   \
        for (int64_t c = 0; c < g->cg; c++)                                                        \
            for (int64_t i = 0; i < g->kh; i++)                                                    \
                for (int64_t j = 0; j < g->kw; j++) {                                              \
                    T *row = col + ((c * g->kh + i) * g->kw + j) * g->p;                           \
                    const T *xc = x + c * g->h * g->w;                                             \
                    const int64_t woff = j * g->dw - g->pw;                                        \
                    int64_t lo, hi;                                                                \
                    valid_range(woff, g->sw, g->w, g->ow, &lo, &hi);                               \
                    for (int64_t oy = 0; oy < g->oh; oy++) {                                       \
                        T *r = row + oy * g->ow;                                                   \
                        const int64_t iy = oy * g->sh - g->ph + i * g->dh;                         \
                        if (iy < 0 || iy >= g->h) {                                                \
                            memset(r, 0, (size_t)g->ow * sizeof(T));                               \
                            continue;                                                              \
                        }                                                                          \
                        const T *xr = xc + iy * g->w + woff;                                       \
                        for (int64_t ox = 0; ox < lo; ox++) r[ox] = 0;                             \
                        if (g->sw == 1) /* rows are short: a loop beats a memcpy call */           \
                            for (int64_t ox = lo; ox < hi; ox++) r[ox] = xr[ox];                   \
                        else                                                                       \
                            for (int64_t ox = lo; ox < hi; ox++) r[ox] = xr[ox * g->sw];           \
                        for (int64_t ox = hi; ox < g->ow; ox++) r[ox] = 0;                         \
                    }                                                                              \
                }                                                                                  \
    }                                                                                              \
    /* x [cg, h, w] += the column matrix folded back (x zeroed by the caller) */                   \
    static void col2im_##S(const cgeom *g, const T *col, T *x) {                                   \
        for (int64_t c = 0; c < g->cg; c++)                                                        \
            for (int64_t i = 0; i < g->kh; i++)                                                    \
                for (int64_t j = 0; j < g->kw; j++) {                                              \
                    const T *row = col + ((c * g->kh + i) * g->kw + j) * g->p;                     \
                    T *xc = x + c * g->h * g->w;                                                   \
                    const int64_t woff = j * g->dw - g->pw;                                        \
                    int64_t lo, hi;                                                                \
                    valid_range(woff, g->sw, g->w, g->ow, &lo, &hi);                               \
                    for (int64_t oy = 0; oy < g->oh; oy++) {                                       \
                        const int64_t iy = oy * g->sh - g->ph + i * g->dh;                         \
                        if (iy < 0 || iy >= g->h) continue;                                        \
                        const T *r = row + oy * g->ow;                                             \
                        T *xr = xc + iy * g->w + woff;                                             \
                        if (g->sw == 1)                                                            \
                            for (int64_t ox = lo; ox < hi; ox++) xr[ox] += r[ox];                  \
                        else                                                                       \
                            for (int64_t ox = lo; ox < hi; ox++) xr[ox * g->sw] += r[ox];          \
                    }                                                                              \
                }                                                                                  \
    }                                                                                              \
    static void fwd_image_##S(const cgeom *g, const void *x_, const void *w_, const void *b_,      \
                              void *y_, void *col_, bool par) {                                    \
        const T *x = x_, *w = w_, *b = b_;                                                         \
        T *y = y_, *col = col_;                                                                    \
        for (int64_t gi = 0; gi < g->g; gi++) {                                                    \
            const T *xg = x + gi * g->cg * g->h * g->w;                                            \
            if (!g->direct) im2col_##S(g, xg, col);                                                \
            T *yg = y + gi * g->og * g->p;                                                         \
            gemm_##S(false, false, g->og, g->p, g->k, w + gi * g->og * g->k, g->k,                 \
                     g->direct ? xg : col, g->p, false, yg, g->p, par, NULL);                      \
            for (int64_t o = 0; b && o < g->og; o++) { /* row by row, while it is in cache */      \
                const T bo = b[gi * g->og + o];                                                    \
                T *yr = yg + o * g->p;                                                             \
                for (int64_t q = 0; q < g->p; q++) yr[q] += bo;                                    \
                tsi_conv_act_##S(g, yr, g->p);                                                     \
            }                                                                                      \
            if (!b) tsi_conv_act_##S(g, yg, g->og * g->p);                                         \
        }                                                                                          \
    }                                                                                              \
    static void bwd_data_image_##S(const cgeom *g, const void *gy_, const void *w_, void *gx_,     \
                                   void *col_, bool par) {                                         \
        const T *gy = gy_, *w = w_;                                                                \
        T *gx = gx_, *col = col_;                                                                  \
        for (int64_t gi = 0; gi < g->g; gi++) {                                                    \
            T *gxg = gx + gi * g->cg * g->h * g->w;                                                \
            const T *wg = w + gi * g->og * g->k, *gyg = gy + gi * g->og * g->p;                    \
            if (g->direct) {                                                                       \
                gemm_##S(true, false, g->k, g->p, g->og, wg, g->k, gyg, g->p, false, gxg, g->p,    \
                         par, NULL);                                                               \
                continue;                                                                          \
            }                                                                                      \
            gemm_##S(true, false, g->k, g->p, g->og, wg, g->k, gyg, g->p, false, col, g->p, par,   \
                     NULL);                                                                        \
            memset(gxg, 0, (size_t)(g->cg * g->h * g->w) * sizeof(T));                             \
            col2im_##S(g, col, gxg);                                                               \
        }                                                                                          \
    }                                                                                              \
    /* gw (+)= gy @ im2col(x)^T for one image */                                                   \
    static void bwd_weight_image_##S(const cgeom *g, const void *gy_, const void *x_, void *gw_,   \
                                     void *col_, void *tmp_, bool acc, bool par) {                 \
        const T *gy = gy_, *x = x_;                                                                \
        T *gw = gw_, *col = col_, *tmp = tmp_;                                                     \
        for (int64_t gi = 0; gi < g->g; gi++) {                                                    \
            const T *xg = x + gi * g->cg * g->h * g->w;                                            \
            if (!g->direct) im2col_##S(g, xg, col);                                                \
            gemm_##S(false, true, g->og, g->k, g->p, gy + gi * g->og * g->p, g->p,                 \
                     g->direct ? xg : col, g->p, acc, gw + gi * g->og * g->k, g->k, par, tmp);     \
        }                                                                                          \
    }

DEFINE_CONV_TYPE(float, f32)
DEFINE_CONV_TYPE(double, f64)

typedef struct conv_fns {
    size_t es;
    void (*fwd)(const cgeom *g, const void *x, const void *w, const void *b, void *y, void *col,
                bool par);
    void (*bwd_data)(const cgeom *g, const void *gy, const void *w, void *gx, void *col, bool par);
    void (*bwd_weight)(const cgeom *g, const void *gy, const void *x, void *gw, void *col,
                       void *tmp, bool acc, bool par);
    void (*sum_parts)(const void *parts, int64_t nparts, int64_t len, void *dst);
} conv_fns;

/* dst[e] = parts[0][e] + parts[1][e] + ... in part order, so the sum never depends on threads */
#define DEFINE_SUM_PARTS(T, S)                                                                     \
    static void sum_parts_##S(const void *parts_, int64_t nparts, int64_t len, void *dst_) {       \
        const T *parts = parts_;                                                                   \
        T *dst = dst_;                                                                             \
        for (int64_t e = 0; e < len; e++) {                                                        \
            T s = parts[e];                                                                        \
            for (int64_t q = 1; q < nparts; q++) s += parts[q * len + e];                          \
            dst[e] = s;                                                                            \
        }                                                                                          \
    }
DEFINE_SUM_PARTS(float, f32)
DEFINE_SUM_PARTS(double, f64)

#define CONV_FNS(T, S)                                                                             \
    { sizeof(T), fwd_image_##S, bwd_data_image_##S, bwd_weight_image_##S, sum_parts_##S }
static const conv_fns fns_f32 = CONV_FNS(float, f32);
static const conv_fns fns_f64 = CONV_FNS(double, f64);

/* ------------------------------------------------------------------ oneDNN or built in */
/* TS_CONV=dnnl|builtin, or a test's tsi_conv_force_provider: read by conv_select.c's
 * tsi_conv_select, which makes the choice for every entry. */
static int conv_forced = -2; /* -2 as TS_CONV says, -1 automatic, 0 builtin, 1 dnnl */

static int parse_provider(const char *e) {
    return !e || !*e ? -1 : !strcmp(e, "dnnl") ? 1 : !strcmp(e, "builtin") ? 0 : -1;
}

void tsi_conv_force_provider(const char *name) { conv_forced = name ? parse_provider(name) : -2; }

int tsi_conv_provider(void) {
    return conv_forced != -2 ? conv_forced : parse_provider(tsi_env(TSI_ENV_CONV));
}

/* Whether pass over g goes to oneDNN (conv_dnnl.c): float32 only, as conv_select.c decides. */
static bool conv_use_dnnl(const conv_fns *f, const cgeom *g, tsi_conv_pass pass) {
    return f == &fns_f32 && tsi_conv_select(g, pass, TS_F32, 0) == TSI_CONV_PATH_DNNL;
}

/* ------------------------------------------------------------------ drivers (f32 / f64) */
/* The direct kernels' packed weights: a copy kept across calls for a weight with an identity
 * (conv_dnnl_wcache.c: *ref holds it, NULL when not cached), else a fresh one in *own. NULL when
 * out of memory. */
typedef struct pack_fill {
    const ts_conv_direct *d;
    const cgeom *g;
    const float *w;
} pack_fill;

static bool fill_pack(void *ctx, void *buf) {
    const pack_fill *c = ctx;
    tsi_conv_direct_pack_into(c->d, c->g, c->w, buf);
    return true;
}

static const float *direct_weights(const ts_conv_direct *d, const cgeom *g, const float *w,
                                   const tsi_conv_weight_id *wid, tsi_wcache_entry **ref,
                                   float **own) {
    *own = NULL;
    const ts_conv_direct_layout key = tsi_conv_direct_layout_of(d, g);
    pack_fill pf = {d, g, w};
    const size_t bytes = (size_t)tsi_conv_direct_pack_floats(d, g) * sizeof(float);
    const void *hit = tsi_wcache_get(wid, &key, sizeof key, bytes, fill_pack, &pf, ref);
    if (hit) return hit;
    return *own = tsi_conv_direct_pack(d, g, w);
}

/* One image's groups shared by the threads (the batch too small to share): depthwise convolutions
 * at batch 1, when there is enough work for a parallel region to pay (conv_select.c's table). */
static bool group_parallel(const cgeom *g, int nt, bool bp) {
    return tsi_conv_group_parallel(g, nt, bp);
}

/* Returns false when scratch memory is missing (the caller falls back to the naive loops). wid:
 * the weight's identity for the caches of rearranged weights (NULL: none). */
static bool run_forward(const conv_fns *f, const cgeom *g, const char *x, const char *w,
                        const tsi_conv_weight_id *wid, const char *b, char *y) {
    if (conv_use_dnnl(f, g, TSI_CONV_PASS_FORWARD) &&
        tsi_dnnl_conv_forward(g, (const float *)x, (const float *)w, wid, (const float *)b,
                              (float *)y))
        return true;
    const int nt = tsi_conv_max_threads();
    const bool bp = batch_parallel(g, nt);
    const ts_conv_direct *d = f == &fns_f32 ? tsi_conv_direct_for(g, false) : NULL;
    const bool gp = d && group_parallel(g, nt, bp);
    const int nscratch = bp || gp ? nt : 1;
    tsi_wcache_entry *wref = NULL;
    float *wown = NULL;
    const float *wpk = d ? direct_weights(d, g, (const float *)w, wid, &wref, &wown) : NULL;
    if (!wpk) d = NULL; /* no memory for the packed weights: im2col still works */
    const size_t col_bytes = d           ? (size_t)tsi_conv_direct_scratch(d, g) * sizeof(float)
                             : g->direct ? 0
                                         : (size_t)(g->k * g->p) * f->es;
    char *scratch = col_bytes ? malloc(col_bytes * (size_t)nscratch) : NULL;
    if (col_bytes && !scratch) {
        tsi_wcache_release(wref);
        free(wown);
        return false;
    }
    const size_t xs = (size_t)(g->c * g->h * g->w) * f->es, ys = (size_t)(g->o * g->p) * f->es;
#ifdef TS_HAVE_OPENMP
    if (d && gp) { /* (image, share of its groups) pairs, nt shares an image */
        const int64_t items = g->n * nt;
#pragma omp parallel num_threads(nt)
        {
            float *col = (float *)(scratch + col_bytes * (size_t)omp_get_thread_num());
#pragma omp for schedule(static)
            for (int64_t it = 0; it < items; it++) {
                const int64_t i = it / nt, s = it % nt;
                tsi_conv_direct_forward_groups(
                    d, g, s * g->g / nt, (s + 1) * g->g / nt, (const float *)(x + xs * (size_t)i),
                    wpk, (const float *)b, (float *)(y + ys * (size_t)i), col);
            }
        }
        free(scratch);
        tsi_wcache_release(wref);
        free(wown);
        return true;
    }
    const int saved = bp ? blas_single_begin() : 0;
    const int64_t n = g->n;
#pragma omp parallel num_threads(nt) if (bp)
    {
        char *col = scratch ? scratch + col_bytes * (size_t)omp_get_thread_num() : NULL;
#pragma omp for schedule(static)
        for (int64_t i = 0; i < n; i++) {
#else
    {
        char *col = scratch;
        for (int64_t i = 0; i < g->n; i++) {
#endif
            if (d)
                tsi_conv_direct_forward(d, g, (const float *)(x + xs * (size_t)i), wpk,
                                        (const float *)b, (float *)(y + ys * (size_t)i),
                                        (float *)col);
            else
                f->fwd(g, x + xs * (size_t)i, w, b, y + ys * (size_t)i, col, !bp);
        }
    }
#ifdef TS_HAVE_OPENMP
    if (bp) blas_single_end(saved);
#endif
    free(scratch);
    tsi_wcache_release(wref);
    free(wown);
    return true;
}

/* With unit strides the input gradient is itself a convolution: gy, padded by the kernel's reach
 * less the forward padding, correlated with the weights flipped and their channel dims swapped.
 * (Padding zeros then meet every weight, so an infinite weight gives NaN where col2im would
 * give +-inf.) */
bool tsi_conv_transposed_geom(const cgeom *g, cgeom *t) {
    const int64_t ph = (g->kh - 1) * g->dh - g->ph, pw = (g->kw - 1) * g->dw - g->pw;
    if (g->sh != 1 || g->sw != 1 || g->direct || ph < 0 || pw < 0) return false;
    /* unpadded forward: the padded gy is mostly zeros, and col2im does half the work */
    if (4 * g->h * g->w > 5 * g->oh * g->ow) return false;
    *t = *g;
    t->c = g->o, t->h = g->oh, t->w = g->ow, t->o = g->c, t->oh = g->h, t->ow = g->w;
    t->ph = ph, t->pw = pw, t->cg = g->og, t->og = g->cg;
    t->k = t->cg * t->kh * t->kw, t->p = t->oh * t->ow;
    return true;
}

/* The transposed problem's packed weights, or NULL (then im2col + col2im is used). */
static float *transposed_weights(const ts_conv_direct *d, const cgeom *g, const cgeom *t,
                                 const float *w) {
    float *wt = malloc(sizeof(float) * (size_t)(g->o * g->k) + 1);
    if (!wt) return NULL;
    for (int64_t gi = 0; gi < g->g; gi++)
        for (int64_t o = 0; o < g->og; o++)
            for (int64_t c = 0; c < g->cg; c++)
                for (int64_t i = 0; i < g->kh; i++)
                    for (int64_t j = 0; j < g->kw; j++)
                        wt[(((gi * g->cg + c) * g->og + o) * g->kh + (g->kh - 1 - i)) * g->kw +
                           (g->kw - 1 - j)] =
                            w[(((gi * g->og + o) * g->cg + c) * g->kh + i) * g->kw + j];
    float *wpk = tsi_conv_direct_pack(d, t, wt);
    free(wt);
    return wpk;
}

static bool run_backward_data(const conv_fns *f, const cgeom *g, const char *gy, const char *w,
                              char *gx) {
    if (conv_use_dnnl(f, g, TSI_CONV_PASS_DATA) &&
        tsi_dnnl_conv_backward_data(g, (const float *)gy, (const float *)w, (float *)gx))
        return true;
    const int nt = tsi_conv_max_threads();
    const bool bp = batch_parallel(g, nt);
    const int nscratch = bp ? nt : 1;
    cgeom t;
    const ts_conv_direct *d =
        f == &fns_f32 && tsi_conv_transposed_geom(g, &t) ? tsi_conv_direct_for(&t, false) : NULL;
    float *wpk = d ? transposed_weights(d, g, &t, (const float *)w) : NULL;
    if (!wpk) d = NULL;
    const size_t col_bytes = d           ? (size_t)tsi_conv_direct_scratch(d, &t) * sizeof(float)
                             : g->direct ? 0
                                         : (size_t)(g->k * g->p) * f->es;
    char *scratch = col_bytes ? malloc(col_bytes * (size_t)nscratch) : NULL;
    if (col_bytes && !scratch) {
        free(wpk);
        return false;
    }
    const size_t xs = (size_t)(g->c * g->h * g->w) * f->es, ys = (size_t)(g->o * g->p) * f->es;
#ifdef TS_HAVE_OPENMP
    const int saved = bp ? blas_single_begin() : 0;
    const int64_t n = g->n;
#pragma omp parallel num_threads(nt) if (bp)
    {
        char *col = scratch ? scratch + col_bytes * (size_t)omp_get_thread_num() : NULL;
#pragma omp for schedule(static)
        for (int64_t i = 0; i < n; i++) {
#else
    {
        char *col = scratch;
        for (int64_t i = 0; i < g->n; i++) {
#endif
            if (d)
                tsi_conv_direct_forward(d, &t, (const float *)(gy + ys * (size_t)i), wpk, NULL,
                                        (float *)(gx + xs * (size_t)i), (float *)col);
            else
                f->bwd_data(g, gy + ys * (size_t)i, w, gx + xs * (size_t)i, col, !bp);
        }
    }
#ifdef TS_HAVE_OPENMP
    if (bp) blas_single_end(saved);
#endif
    free(scratch);
    free(wpk);
    return true;
}

/* The batch is cut into a number of chunks that depends only on the shapes; each chunk sums its
 * images in order into its own partial gradient and the partials are added in chunk order, so
 * the result is the same for any thread count. */
static int64_t weight_chunks(const cgeom *g, size_t es) {
    int64_t nc = g->n < 16 ? g->n : 16;
    const double part_bytes = (double)(g->o * g->k) * (double)es;
    while (nc > 1 && part_bytes * (double)nc > 64.0 * 1024 * 1024) nc /= 2;
    return nc < 1 ? 1 : nc;
}

static bool run_backward_weight(const conv_fns *f, const cgeom *g, const char *gy, const char *x,
                                char *gw) {
    const int64_t wlen = g->o * g->k;
    if (g->n == 0) {
        memset(gw, 0, (size_t)wlen * f->es);
        return true;
    }
    const tsi_conv_path path =
        f == &fns_f32 ? tsi_conv_select(g, TSI_CONV_PASS_WEIGHT, TS_F32, 0) : TSI_CONV_PATH_BUILTIN;
    if (path == TSI_CONV_PATH_DW_WEIGHT &&
        tsi_conv_dw_weight(g, (const float *)gy, (const float *)x, (float *)gw))
        return true;
    if (path == TSI_CONV_PATH_DNNL &&
        tsi_dnnl_conv_backward_weight(g, (const float *)gy, (const float *)x, (float *)gw))
        return true;
    const int nt = tsi_conv_max_threads();
    const bool bp = batch_parallel(g, nt);
    const int nscratch = bp ? nt : 1;
    const int64_t nc = weight_chunks(g, f->es);
    const ts_conv_direct *d = f == &fns_f32 ? tsi_conv_direct_for(g, true) : NULL;
    const size_t col_bytes = d           ? (size_t)tsi_conv_direct_scratch(d, g) * sizeof(float)
                             : g->direct ? 0
                                         : (size_t)(g->k * g->p) * f->es;
    /* the blocked GEMM (no library, or TS_GEMM=blocked) accumulates through tmp */
    const size_t tmp_bytes = d ? 0 : (size_t)(g->og * g->k) * f->es;
    const size_t per_thread = col_bytes + tmp_bytes;
    char *scratch = per_thread ? malloc(per_thread * (size_t)nscratch) : NULL;
    char *parts = nc > 1 ? malloc((size_t)(nc * wlen) * f->es) : gw;
    if ((per_thread && !scratch) || !parts) {
        free(scratch);
        if (parts != gw) free(parts);
        return false;
    }
    const size_t xs = (size_t)(g->c * g->h * g->w) * f->es, ys = (size_t)(g->o * g->p) * f->es;
    const size_t ps = (size_t)wlen * f->es;
#ifdef TS_HAVE_OPENMP
    const int saved = bp ? blas_single_begin() : 0;
#pragma omp parallel num_threads(nt) if (bp)
#endif
    {
#ifdef TS_HAVE_OPENMP
        char *sc = scratch ? scratch + per_thread * (size_t)omp_get_thread_num() : NULL;
#pragma omp for schedule(static)
#else
        char *sc = scratch;
#endif
        for (int64_t ci = 0; ci < nc; ci++) {
            const int64_t n0 = ci * g->n / nc, n1 = (ci + 1) * g->n / nc;
            for (int64_t i = n0; i < n1; i++)
                if (d)
                    tsi_conv_direct_weight(d, g, (const float *)(gy + ys * (size_t)i),
                                           (const float *)(x + xs * (size_t)i),
                                           (float *)(parts + ps * (size_t)ci), (float *)sc, i > n0);
                else
                    f->bwd_weight(g, gy + ys * (size_t)i, x + xs * (size_t)i,
                                  parts + ps * (size_t)ci, sc, sc ? sc + col_bytes : NULL, i > n0,
                                  !bp);
        }
    }
#ifdef TS_HAVE_OPENMP
    if (bp) blas_single_end(saved);
#endif
    if (nc > 1) {
        f->sum_parts(parts, nc, wlen, gw);
        free(parts);
    }
    free(scratch);
    return true;
}

/* ------------------------------------------------------------------ for kern_conv_half.c */
bool tsi_conv_forward_f32(const cgeom *g, const float *x, const float *w, const float *b,
                          float *y) {
    return run_forward(&fns_f32, g, (const char *)x, (const char *)w, NULL, (const char *)b,
                       (char *)y);
}

bool tsi_conv_backward_data_f32(const cgeom *g, const float *gy, const float *w, float *gx) {
    return run_backward_data(&fns_f32, g, (const char *)gy, (const char *)w, (char *)gx);
}

bool tsi_conv_backward_weight_f32(const cgeom *g, const float *gy, const float *x, float *gw) {
    return run_backward_weight(&fns_f32, g, (const char *)gy, (const char *)x, (char *)gw);
}

/* ------------------------------------------------------------------ entry points */
/* g's activation over the whole output of any float dtype: after the naive loops, and for f16 /
 * bf16 on the rounded values, as ts_relu / ts_clamp of the half tensor computes it (in chunks
 * through a float32 buffer, the chunks on the cores when there are several per thread). */
void tsi_conv_act_output(const cgeom *g, const ts_kview *out) {
    const int64_t n = tsi_conv_numel4(out);
    if (g->act == TS_CONV_ACT_NONE) return;
    if (out->dtype == TS_F64) {
        tsi_conv_act_f64(g, (double *)out->data, n);
        return;
    }
    if (out->dtype == TS_F32) {
        tsi_conv_act_f32(g, (float *)out->data, n);
        return;
    }
    const ts_vec_kernels *vk = tsi_vec_kernels_get();
    const int64_t chunks = (n + TSI_CONV_CHUNK - 1) / TSI_CONV_CHUNK;
    TS_PARALLEL_FOR_IF(
        chunks >= 4 * (int64_t)tsi_conv_max_threads() && tsi_conv_max_threads() > 1,
        for (int64_t c = 0; c < chunks; c++) {
            float buf[TSI_CONV_CHUNK];
            const int64_t i = c * TSI_CONV_CHUNK,
                          m = n - i < TSI_CONV_CHUNK ? n - i : TSI_CONV_CHUNK;
            ts_vec_load_f32(vk, buf, out->data + 2 * i, out->dtype, 2, m);
            tsi_conv_act_f32(g, buf, m);
            ts_vec_store_f32(vk, out->data + 2 * i, out->dtype, 2, buf, m);
        });
}

static tsi_conv_weight_id weight_id(const ts_conv2d_params *p) {
    return (tsi_conv_weight_id){
        .uid = p->weight_uid, .version = p->weight_version, .offset = p->weight_offset};
}

/* the dtypes kern_conv_half.c takes */
static bool is_half(ts_dtype dt) { return dt == TS_F16 || dt == TS_BF16; }

void tsi_cpu_conv2d(const ts_backend *be, int index, const ts_kview *out, const ts_kview *x,
                    const ts_kview *w, const ts_kview *bias, const ts_conv2d_params *p) {
    (void)be, (void)index;
    if (tsi_conv_numel4(out) == 0) return;
    if (tsi_conv_view_nhwc(x) || tsi_conv_view_nhwc(out)) {
        tsi_conv2d_nhwc(be, index, out, x, w, bias, p);
        return;
    }
    const cgeom g = geom_of(x, w, out, p);
    const ts_dtype dt = out->dtype;
    const tsi_conv_weight_id wid = weight_id(p);
    if (is_half(dt)) {
        tsi_conv2d_half(&g, out, x, w, bias, &wid);
        return;
    }
    const char *bd = bias ? bias->data : NULL;
    if (run_forward(dt == TS_F64 ? &fns_f64 : &fns_f32, &g, x->data, w->data, &wid, bd, out->data))
        return;
    tsi_conv_naive_forward(&g, dt, x->data, w->data, bd, out->data);
    tsi_conv_act_output(&g, out);
}

void tsi_cpu_conv2d_backward_data(const ts_backend *be, int index, const ts_kview *gx,
                                  const ts_kview *gout, const ts_kview *w,
                                  const ts_conv2d_params *p) {
    (void)be, (void)index;
    if (tsi_conv_numel4(gx) == 0) return;
    if (tsi_conv_view_nhwc(gx) || tsi_conv_view_nhwc(gout)) {
        tsi_conv2d_backward_data_nhwc(be, index, gx, gout, w, p);
        return;
    }
    const cgeom g = geom_of(gx, w, gout, p);
    const ts_dtype dt = gx->dtype;
    if (!is_half(dt)) {
        if (!run_backward_data(dt == TS_F64 ? &fns_f64 : &fns_f32, &g, gout->data, w->data,
                               gx->data))
            tsi_conv_naive_backward_data(&g, dt, gout->data, w->data, gx->data);
        return;
    }
    tsi_conv2d_backward_data_half(&g, gx, gout, w);
}

void tsi_cpu_conv2d_backward_weight(const ts_backend *be, int index, const ts_kview *gw,
                                    const ts_kview *gout, const ts_kview *x,
                                    const ts_conv2d_params *p) {
    (void)be, (void)index;
    if (tsi_conv_numel4(gw) == 0) return;
    if (tsi_conv_view_nhwc(x) || tsi_conv_view_nhwc(gout)) {
        tsi_conv2d_backward_weight_nhwc(be, index, gw, gout, x, p);
        return;
    }
    const cgeom g = geom_of(x, gw, gout, p);
    const ts_dtype dt = gw->dtype;
    if (!is_half(dt)) {
        if (!run_backward_weight(dt == TS_F64 ? &fns_f64 : &fns_f32, &g, gout->data, x->data,
                                 gw->data))
            tsi_conv_naive_backward_weight(&g, dt, gout->data, x->data, gw->data);
        return;
    }
    tsi_conv2d_backward_weight_half(&g, gw, gout, x);
}
