/* cuda_conv_nhwc.cu — conv2d and its two gradients on channels_last activations (backend.h's
 * conv2d_channels_last): x and out, gx and gout NHWC-dense views of [n, c, h, w], the weight OIHW
 * as always, and the results written in the views' own layouts.
 *
 * Native path (cuDNN, f32/f16/bf16): the activations go to cuDNN as they lie, with NHWC tensor
 * descriptors, and the filter in KRSC ([o][kh][kw][c/g], cuDNN's NHWC filter format, which its
 * NHWC kernels want): the weight is transposed into a scratch KRSC copy per call (weights are
 * small next to activations), and the weight gradient is computed into a KRSC scratch and
 * transposed back into gw. The algorithm walk and its cache are cuda_conv.cu's (tsc_conv_cudnn),
 * with the layout in the cache key. The bias and the activation run as one epilogue over the NHWC
 * output (bias[e % c]): the convolution's stored value plus the bias, rounded to the dtype once
 * (cudnnAddTensor's arithmetic on the NCHW path), then ts_relu / ts_clamp of that stored value.
 *
 * Copy path: when cuDNN is absent or declines every candidate for the NHWC layout (cached as
 * such), or a view is not NHWC-dense, or TS_CUDA_TEST_CONV_NHWC_COPY=1 (a test hook read per
 * call): each NHWC view is transposed into an NCHW scratch, the NCHW pass runs (cuDNN or im2col,
 * cuda_conv.cu) and the result is transposed back. Transposes only move elements, so the results
 * are the NCHW path's. Never a wrong result; slower.
 *
 * conv2d_channels_last is true for f32, f16 and bf16 in builds with cuDNN unless
 * TS_CUDA_CONV_NHWC=0 (read once): then the front end passes NCHW views and nothing here runs.
 * Scratch comes from the caching allocator (stream-ordered, capture-safe); no host waits. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/conv_layout.h"
#include "backend/cuda/cuda_bridge.h"
#include "backend/cuda/cuda_compute_conv.h"
#include "backend/env_config.h"

namespace {

/* ------------------------------------------------------------------ layouts */
/* the NHWC test is backend/conv_layout.h's, shared with the CPU backend */

/* ------------------------------------------------------------------ counters, switches */
static long long g_native, g_copied; /* passes run natively / through NCHW copies */

/* ------------------------------------------------------------------ transposes */
#define TILE      32
#define TILE_ROWS 8

/* dst[b][s][r] = src[b][r][s] for b < nb, r < R, s < S: 32 x 32 tiles through shared memory (both
 * sides coalesced), a grid-stride loop over the nb * tiles_r * tiles_s tiles. E: an unsigned type
 * of the element's width (the elements are only moved). */
template <typename E>
__global__ void transpose_kernel(E *dst, const E *src, int64_t nb, int64_t R, int64_t S) {
    __shared__ E tile[TILE][TILE + 1];
    const int64_t tr = (R + TILE - 1) / TILE, ts = (S + TILE - 1) / TILE;
    const int64_t total = nb * tr * ts;
    const int tx = threadIdx.x, ty = threadIdx.y;
    for (int64_t t = blockIdx.x; t < total; t += gridDim.x) {
        const int64_t b = t / (tr * ts), rem = t % (tr * ts);
        const int64_t r0 = rem / ts * TILE, s0 = rem % ts * TILE;
        const E *sb = src + b * R * S;
        E *db = dst + b * R * S;
        for (int i = ty; i < TILE; i += TILE_ROWS) {
            const int64_t r = r0 + i, s = s0 + tx;
            if (r < R && s < S) tile[i][tx] = sb[r * S + s];
        }
        __syncthreads();
        for (int i = ty; i < TILE; i += TILE_ROWS) {
            const int64_t s = s0 + i, r = r0 + tx;
            if (s < S && r < R) db[s * R + r] = tile[tx][i];
        }
        __syncthreads(); /* the tile is read before the next one overwrites it */
    }
}

template <typename E>
static bool transpose_typed(int index, void *dst, const void *src, int64_t nb, int64_t R,
                            int64_t S) {
    const int64_t tiles = nb * ((R + TILE - 1) / TILE) * ((S + TILE - 1) / TILE);
    const unsigned blocks = (unsigned)(tiles > TSC_MAX_BLOCKS ? TSC_MAX_BLOCKS : tiles);
    transpose_kernel<E><<<blocks, dim3(TILE, TILE_ROWS), 0, tsc_stream(index)>>>(
        (E *)dst, (const E *)src, nb, R, S);
    return tsc_launch_check("conv2d (channels_last transpose)", index);
}

/* nb matrices [R][S] of es-byte elements transposed into [S][R]; false with the error recorded */
static bool transpose(int index, size_t es, void *dst, const void *src, int64_t nb, int64_t R,
                      int64_t S) {
    if (nb * R * S == 0) return true;
    if (es == 2) return transpose_typed<uint16_t>(index, dst, src, nb, R, S);
    if (es == 8) return transpose_typed<uint64_t>(index, dst, src, nb, R, S);
    return transpose_typed<uint32_t>(index, dst, src, nb, R, S);
}

/* ------------------------------------------------------------------ the epilogue */
__device__ __forceinline__ float act_of(float v, int act, float lo, float hi) {
    return act == TS_CONV_ACT_RELU ? ts_relu_f(v) : ts_clamp_f(v, lo, hi);
}
__device__ __forceinline__ double act_of(double v, int act, double lo, double hi) {
    return act == TS_CONV_ACT_RELU ? ts_relu_d(v) : ts_clamp_d(v, lo, hi);
}

/* y [rows][c] (NHWC): y = act(y + bias[col]) — the sum rounded to T once, the activation applied
 * to that stored value (ts_relu / ts_clamp of a T tensor); bias NULL: the activation alone; act
 * TS_CONV_ACT_NONE: the bias alone. */
template <typename T, typename CT>
__global__ void bias_act_kernel(T *y, const T *bias, int64_t n, int64_t c, int act, CT lo, CT hi) {
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < n;
         e += (int64_t)gridDim.x * blockDim.x) {
        T v = y[e];
        if (bias) v = tsc_to<T>::from((CT)tsc_ld(v) + (CT)tsc_ld(bias[e % c]));
        if (act != TS_CONV_ACT_NONE) v = tsc_to<T>::from(act_of((CT)tsc_ld(v), act, lo, hi));
        y[e] = v;
    }
}

/* the bounds converted as cuda_unary.cu's clamp converts them */
template <typename T>
static bool bias_act_typed(int index, char *y, const char *bias, int64_t n, int64_t c,
                           const ts_conv2d_params *p) {
    typedef tsc_ct<T> CT;
    const double lo = isnan(p->act_lo) ? -INFINITY : p->act_lo;
    const double hi = isnan(p->act_hi) ? INFINITY : p->act_hi;
    bias_act_kernel<T, CT><<<tsc_grid(n, TSC_THREADS), TSC_THREADS, 0, tsc_stream(index)>>>(
        (T *)y, (const T *)bias, n, c, (int)p->act, (CT)lo, (CT)hi);
    return tsc_launch_check("conv2d (channels_last epilogue)", index);
}

static void bias_act(int index, ts_dtype dt, char *y, const char *bias, int64_t n, int64_t c,
                     const ts_conv2d_params *p) {
    if (!bias && p->act == TS_CONV_ACT_NONE) return;
    switch (dt) {
    case TS_F64:
        bias_act_typed<double>(index, y, bias, n, c, p);
        break;
    case TS_F16:
        bias_act_typed<tsc_f16>(index, y, bias, n, c, p);
        break;
    case TS_BF16:
        bias_act_typed<tsc_bf16>(index, y, bias, n, c, p);
        break;
    default:
        bias_act_typed<float>(index, y, bias, n, c, p);
        break;
    }
}

/* ------------------------------------------------------------------ the copy path */
/* An activation [n, c, hw] as an NCHW buffer: the view's data when it is NCHW-dense already (or
 * empty), else a scratch copy (filled from the view when `load`); false with the error recorded. */
typedef struct Plain {
    char *data;
    bool scratch;
} Plain;

static bool plain_of(int index, const ts_kview *v, bool load, Plain *pl) {
    pl->scratch = tsc_conv_view_nhwc(v) && tsc_numel(v) > 0; /* nothing to move when empty */
    if (!pl->scratch) {
        pl->data = v->data;
        return true;
    }
    const size_t es = tsc_dtype_size(v->dtype);
    const int64_t n = v->shape[0], c = v->shape[1], hw = v->shape[2] * v->shape[3];
    pl->data = (char *)tsc_scratch_alloc(index, (size_t)(n * c * hw) * es);
    if (!pl->data) return false;
    if (load && !transpose(index, es, pl->data, v->data, n, hw, c)) { /* [hw][c] -> [c][hw] */
        tsc_scratch_free(index, pl->data);
        pl->data = NULL;
        return false;
    }
    return true;
}

/* Writes an NCHW result back into its NHWC view and frees the scratch; ok: the pass succeeded. */
static bool plain_store(int index, const ts_kview *v, Plain *pl, bool ok) {
    if (!pl->scratch || !pl->data) return ok;
    if (ok)
        ok = transpose(index, tsc_dtype_size(v->dtype), v->data, pl->data, v->shape[0], v->shape[1],
                       v->shape[2] * v->shape[3]); /* [c][hw] -> [hw][c] */
    tsc_scratch_free(index, pl->data);
    pl->data = NULL;
    return ok;
}

static void plain_free(int index, Plain *pl) {
    if (pl->scratch && pl->data) tsc_scratch_free(index, pl->data);
    pl->data = NULL;
}

static void copy_forward(int index, const tsc_cgeom *g, const ts_kview *out, const ts_kview *x,
                         const ts_kview *w, const ts_kview *bias, const ts_conv2d_params *p) {
    __atomic_add_fetch(&g_copied, 1, __ATOMIC_RELAXED);
    Plain px, py;
    py.data = NULL, py.scratch = false;
    if (!plain_of(index, x, true, &px)) return;
    bool ok = plain_of(index, out, false, &py);
    if (ok)
        ok = tsc_conv_nchw_forward(index, g, out->dtype, px.data, w->data, bias ? bias->data : NULL,
                                   py.data);
    plain_free(index, &px);
    ok = plain_store(index, out, &py, ok);
    if (ok) bias_act(index, out->dtype, out->data, NULL, tsc_numel(out), g->o, p);
}

static void copy_backward_data(int index, const tsc_cgeom *g, const ts_kview *gx,
                               const ts_kview *gout, const ts_kview *w) {
    __atomic_add_fetch(&g_copied, 1, __ATOMIC_RELAXED);
    Plain py, px;
    px.data = NULL, px.scratch = false;
    if (!plain_of(index, gout, true, &py)) return;
    bool ok = plain_of(index, gx, false, &px);
    if (ok) ok = tsc_conv_nchw_backward_data(index, g, gx->dtype, py.data, w->data, px.data);
    plain_free(index, &py);
    plain_store(index, gx, &px, ok);
}

static void copy_backward_weight(int index, const tsc_cgeom *g, const ts_kview *gw,
                                 const ts_kview *gout, const ts_kview *x) {
    __atomic_add_fetch(&g_copied, 1, __ATOMIC_RELAXED);
    Plain py, px;
    px.data = NULL, px.scratch = false;
    if (!plain_of(index, gout, true, &py)) return;
    if (plain_of(index, x, true, &px))
        tsc_conv_nchw_backward_weight(index, g, gw->dtype, py.data, px.data, gw->data);
    plain_free(index, &px);
    plain_free(index, &py);
}

/* ------------------------------------------------------------------ the native path */
/* Whether cuDNN is to try this pass on the views as they lie: a build with cuDNN, both activation
 * views NHWC-dense, no test hook. */
static bool try_native(const ts_kview *a, const ts_kview *b) {
#ifdef TS_HAVE_CUDNN
    const bool dnn = true;
#else
    const bool dnn = false;
#endif
    return dnn && ts_kview_nhwc_dense(a) && ts_kview_nhwc_dense(b) &&
           !tsi_env_on(TSI_ENV_CUDA_TEST_CONV_NHWC_COPY);
}

/* The weight [o][cg][kh*kw] as KRSC [o][kh*kw][cg] in scratch; NULL with the error recorded */
static char *krsc_of(int index, const tsc_cgeom *g, const ts_kview *w) {
    const size_t es = tsc_dtype_size(w->dtype);
    char *k = (char *)tsc_scratch_alloc(index, (size_t)(g->o * g->k) * es);
    if (k && !transpose(index, es, k, w->data, g->o, g->cg, g->kh * g->kw)) {
        tsc_scratch_free(index, k);
        k = NULL;
    }
    return k;
}

} /* namespace */

bool tsc_conv_view_nhwc(const ts_kview *v) { return ts_kview_nhwc_only(v); }

void tsc_conv2d_nhwc(int index, const tsc_cgeom *g, const ts_kview *out, const ts_kview *x,
                     const ts_kview *w, const ts_kview *bias, const ts_conv2d_params *p) {
    if (g->c > 0 && try_native(x, out)) {
        char *wk = krsc_of(index, g, w);
        if (!wk) return;
        const tsc_conv_result r =
            tsc_conv_cudnn(index, TSC_CONV_FWD, g, out->dtype, TSC_CONV_ACT_NHWC | TSC_CONV_W_KRSC,
                           x->data, wk, NULL, out->data);
        tsc_scratch_free(index, wk);
        if (r == TSC_CONV_FAILED) return;
        if (r == TSC_CONV_DONE) {
            __atomic_add_fetch(&g_native, 1, __ATOMIC_RELAXED);
            bias_act(index, out->dtype, out->data, bias ? bias->data : NULL, tsc_numel(out), g->o,
                     p);
            return;
        }
    }
    copy_forward(index, g, out, x, w, bias, p);
}

void tsc_conv2d_backward_data_nhwc(int index, const tsc_cgeom *g, const ts_kview *gx,
                                   const ts_kview *gout, const ts_kview *w) {
    if (g->p > 0 && g->o > 0 && try_native(gx, gout)) {
        char *wk = krsc_of(index, g, w);
        if (!wk) return;
        const tsc_conv_result r =
            tsc_conv_cudnn(index, TSC_CONV_BWD_DATA, g, gx->dtype,
                           TSC_CONV_ACT_NHWC | TSC_CONV_W_KRSC, gout->data, wk, NULL, gx->data);
        tsc_scratch_free(index, wk);
        if (r == TSC_CONV_FAILED) return;
        if (r == TSC_CONV_DONE) {
            __atomic_add_fetch(&g_native, 1, __ATOMIC_RELAXED);
            return;
        }
    }
    copy_backward_data(index, g, gx, gout, w);
}

void tsc_conv2d_backward_weight_nhwc(int index, const tsc_cgeom *g, const ts_kview *gw,
                                     const ts_kview *gout, const ts_kview *x) {
    if (g->n > 0 && g->p > 0 && try_native(x, gout)) {
        const size_t es = tsc_dtype_size(gw->dtype);
        char *gk = (char *)tsc_scratch_alloc(index, (size_t)(g->o * g->k) * es);
        if (!gk) return;
        const tsc_conv_result r =
            tsc_conv_cudnn(index, TSC_CONV_BWD_FILTER, g, gw->dtype,
                           TSC_CONV_ACT_NHWC | TSC_CONV_W_KRSC, gout->data, x->data, NULL, gk);
        /* KRSC [o][kh*kw][cg] -> OIHW [o][cg][kh*kw] */
        if (r == TSC_CONV_DONE) transpose(index, es, gw->data, gk, g->o, g->kh * g->kw, g->cg);
        tsc_scratch_free(index, gk);
        if (r == TSC_CONV_FAILED) return;
        if (r == TSC_CONV_DONE) {
            __atomic_add_fetch(&g_native, 1, __ATOMIC_RELAXED);
            return;
        }
    }
    copy_backward_weight(index, g, gw, gout, x);
}

/* ------------------------------------------------------------------ the switch, the counters */
extern "C" bool tsc_conv2d_channels_last(const ts_backend *be, int index, ts_dtype dt) {
    (void)be, (void)index;
#ifdef TS_HAVE_CUDNN
    static int on = -1; /* TS_CUDA_CONV_NHWC, read once */
    int v = __atomic_load_n(&on, __ATOMIC_RELAXED);
    if (v < 0) {
        v = !tsi_env_is(TSI_ENV_CUDA_CONV_NHWC, "0");
        __atomic_store_n(&on, v, __ATOMIC_RELAXED);
    }
    return v && (dt == TS_F32 || dt == TS_F16 || dt == TS_BF16);
#else
    (void)dt;
    return false;
#endif
}

extern "C" void tsc_conv_nhwc_counters(long long *native, long long *copied) {
    *native = __atomic_load_n(&g_native, __ATOMIC_RELAXED);
    *copied = __atomic_load_n(&g_copied, __ATOMIC_RELAXED);
}
