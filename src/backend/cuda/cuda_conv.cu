/* cuda_conv.cu — conv2d forward, backward data and backward weight on CUDA: cuDNN when the build
 * has it (TS_HAVE_CUDNN), else, or when cuDNN declines a configuration, im2col + cuBLAS
 * (cuda_conv_im2col.cu).
 *
 * cuDNN path: NCHW descriptors — or NHWC activations with a KRSC filter for channels_last
 * (cuda_conv_nhwc.cu, through tsc_conv_cudnn) — groups and dilation in the convolution
 * descriptor, f32 compute for f32/f16/bf16 and f64 for f64. The algorithm comes from cuDNN's ranked
 * heuristics (cudnnGet*Algorithm_v7): the candidates with a workspace of at most CONV_WS_LIMIT are
 * run in order until one is not declined (CUDNN_STATUS_NOT_SUPPORTED*), and that choice — or "none,
 * use im2col" — is cached per shape, dtype, parameters, layout and TF32 setting. Any other status
 * is an error (TS_ERR_CUDA naming the status), not a silent fallback. f32 uses FMA math (no TF32)
 * unless ts_cuda_set_allow_tf32(true); f16/bf16 use tensor cores. Workspaces come from the caching
 * allocator (tsc_scratch_alloc).
 *
 * The forward's activation (ReLU / clip, tsi_conv2d_act) is an epilogue kernel over the output
 * either path wrote, computing what ts_relu / ts_clamp compute (kernel_math.h) on the stored
 * value, so the result is theirs bit for bit, NaN included. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_compute_conv.h"
#include "backend/env_config.h"

#ifdef TS_HAVE_CUDNN
/* after kernel_math.h: cuda_fp16.h's global `half` would shadow a local of that name there */
#include <cudnn.h>
#endif

#ifdef TS_HAVE_CUDNN
namespace {

#define CONV_WS_LIMIT ((size_t)1 << 30) /* largest workspace an algorithm may ask for */
#define CONV_CACHE    256               /* cached algorithm choices (direct-mapped) */
#define CONV_POOL     8                 /* idle cuDNN handles kept per device */
#define CONV_NO_ALGO  (-1)              /* cached choice: cuDNN declines every candidate */

enum ConvDir { DIR_FWD, DIR_BWD_DATA, DIR_BWD_FILTER };
enum ConvResult { CONV_DONE, CONV_FALLBACK, CONV_FAILED };

/* ------------------------------------------------------------------ handles */
static pthread_mutex_t g_dnn_lock = PTHREAD_MUTEX_INITIALIZER;
static cudnnHandle_t g_dnn_idle[TSC_MAX_DEVICES][CONV_POOL];
static int g_dnn_nidle[TSC_MAX_DEVICES];

/* A handle of the current device on the current stream; NULL when cuDNN cannot start (then the
 * im2col path runs instead, nothing recorded). */
static cudnnHandle_t dnn_acquire(int index) {
    cudnnHandle_t h = NULL;
    if (index < 0 || index >= TSC_MAX_DEVICES) return NULL;
    pthread_mutex_lock(&g_dnn_lock);
    if (g_dnn_nidle[index] > 0) h = g_dnn_idle[index][--g_dnn_nidle[index]];
    pthread_mutex_unlock(&g_dnn_lock);
    if (!h && cudnnCreate(&h) != CUDNN_STATUS_SUCCESS) return NULL;
    if (cudnnSetStream(h, tsc_stream(index)) != CUDNN_STATUS_SUCCESS) {
        cudnnDestroy(h);
        return NULL;
    }
    return h;
}

static void dnn_release(int index, cudnnHandle_t h) {
    pthread_mutex_lock(&g_dnn_lock);
    const bool kept = g_dnn_nidle[index] < CONV_POOL;
    if (kept) g_dnn_idle[index][g_dnn_nidle[index]++] = h;
    pthread_mutex_unlock(&g_dnn_lock);
    if (!kept) cudnnDestroy(h);
}

/* ------------------------------------------------------------------ algorithm cache */
typedef struct ConvKey {
    int64_t dims[16]; /* n c h w o kh kw sh sw ph pw dh dw g, dtype, dir */
    int device, tf32;
    unsigned layout; /* TSC_CONV_ACT_NHWC | TSC_CONV_W_KRSC */
} ConvKey;

typedef struct ConvChoice {
    int valid;
    ConvKey key;
    int algo;
    cudnnMathType_t math;
    size_t ws;
} ConvChoice;

static pthread_mutex_t g_cache_lock = PTHREAD_MUTEX_INITIALIZER;
static ConvChoice g_cache[CONV_CACHE];

static ConvKey conv_key(const tsc_cgeom *g, ts_dtype dt, ConvDir dir, int index, bool tf32,
                        unsigned layout) {
    ConvKey k;
    memset(&k, 0, sizeof k);
    const int64_t v[16] = {g->n,  g->c,  g->h,  g->w,  g->o,  g->kh, g->kw,       g->sh,
                           g->sw, g->ph, g->pw, g->dh, g->dw, g->g,  (int64_t)dt, (int64_t)dir};
    memcpy(k.dims, v, sizeof v);
    k.device = index;
    k.tf32 = tf32;
    k.layout = layout;
    return k;
}

static unsigned conv_slot(const ConvKey *k) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a over the key's bytes */
    const unsigned char *p = (const unsigned char *)k;
    for (size_t i = 0; i < sizeof *k; i++) h = (h ^ p[i]) * 1099511628211ull;
    return (unsigned)(h % CONV_CACHE);
}

static bool cache_get(const ConvKey *k, ConvChoice *out) {
    const unsigned s = conv_slot(k);
    pthread_mutex_lock(&g_cache_lock);
    const bool hit = g_cache[s].valid && memcmp(&g_cache[s].key, k, sizeof *k) == 0;
    if (hit) *out = g_cache[s];
    pthread_mutex_unlock(&g_cache_lock);
    return hit;
}

/* Stores c (valid: the algorithm to run, or CONV_NO_ALGO) as the choice for k; c with valid 0
 * forgets k's. */
static void cache_put(const ConvKey *k, const ConvChoice *c) {
    const unsigned s = conv_slot(k);
    pthread_mutex_lock(&g_cache_lock);
    if (c->valid || memcmp(&g_cache[s].key, k, sizeof *k) == 0) {
        g_cache[s] = *c;
        g_cache[s].key = *k;
    }
    pthread_mutex_unlock(&g_cache_lock);
}

/* ------------------------------------------------------------------ descriptors */
typedef struct ConvDescs {
    cudnnTensorDescriptor_t x, y, b;
    cudnnFilterDescriptor_t w;
    cudnnConvolutionDescriptor_t conv;
} ConvDescs;

static cudnnDataType_t dnn_type(ts_dtype dt) {
    switch (dt) {
    case TS_F64:
        return CUDNN_DATA_DOUBLE;
    case TS_F16:
        return CUDNN_DATA_HALF;
    case TS_BF16:
        return CUDNN_DATA_BFLOAT16;
    default:
        return CUDNN_DATA_FLOAT;
    }
}

static bool fits_int(const tsc_cgeom *g) {
    const int64_t lim = 2147483647;
    const int64_t v[] = {g->n * g->c * g->h * g->w,
                         g->n * g->o * g->p,
                         g->o * g->k,
                         g->ph,
                         g->pw,
                         g->sh,
                         g->sw,
                         g->dh,
                         g->dw};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        if (v[i] > lim) return false;
    return true;
}

static void descs_free(ConvDescs *d) {
    if (d->x) cudnnDestroyTensorDescriptor(d->x);
    if (d->y) cudnnDestroyTensorDescriptor(d->y);
    if (d->b) cudnnDestroyTensorDescriptor(d->b);
    if (d->w) cudnnDestroyFilterDescriptor(d->w);
    if (d->conv) cudnnDestroyConvolutionDescriptor(d->conv);
}

/* The call's descriptors with the math type the dtype and the TF32 switch allow, in the layout's
 * formats (the bias [1, o, 1, 1] is the same memory in either); the first failing status. */
static cudnnStatus_t descs_make(ConvDescs *d, const tsc_cgeom *g, ts_dtype dt, bool tf32,
                                unsigned layout) {
    memset(d, 0, sizeof *d);
    const cudnnDataType_t ty = dnn_type(dt);
    const cudnnDataType_t compute = dt == TS_F64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
    cudnnMathType_t math = CUDNN_DEFAULT_MATH;
    if (dt == TS_F16 || dt == TS_BF16)
        math = CUDNN_TENSOR_OP_MATH;
    else if (dt == TS_F32)
        math = tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH; /* DEFAULT lets Ampere+ use TF32 */
    const cudnnTensorFormat_t act_fmt =
        layout & TSC_CONV_ACT_NHWC ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
    const cudnnTensorFormat_t w_fmt =
        layout & TSC_CONV_W_KRSC ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
    cudnnStatus_t s;
#define DNN_TRY(call)                                                                              \
    if ((s = (call)) != CUDNN_STATUS_SUCCESS) return s
    DNN_TRY(cudnnCreateTensorDescriptor(&d->x));
    DNN_TRY(cudnnCreateTensorDescriptor(&d->y));
    DNN_TRY(cudnnCreateTensorDescriptor(&d->b));
    DNN_TRY(cudnnCreateFilterDescriptor(&d->w));
    DNN_TRY(cudnnCreateConvolutionDescriptor(&d->conv));
    DNN_TRY(
        cudnnSetTensor4dDescriptor(d->x, act_fmt, ty, (int)g->n, (int)g->c, (int)g->h, (int)g->w));
    DNN_TRY(cudnnSetTensor4dDescriptor(d->y, act_fmt, ty, (int)g->n, (int)g->o, (int)g->oh,
                                       (int)g->ow));
    DNN_TRY(cudnnSetTensor4dDescriptor(d->b, CUDNN_TENSOR_NCHW, ty, 1, (int)g->o, 1, 1));
    DNN_TRY(
        cudnnSetFilter4dDescriptor(d->w, ty, w_fmt, (int)g->o, (int)g->cg, (int)g->kh, (int)g->kw));
    DNN_TRY(cudnnSetConvolution2dDescriptor(d->conv, (int)g->ph, (int)g->pw, (int)g->sh, (int)g->sw,
                                            (int)g->dh, (int)g->dw, CUDNN_CROSS_CORRELATION,
                                            compute));
    DNN_TRY(cudnnSetConvolutionGroupCount(d->conv, (int)g->g));
    DNN_TRY(cudnnSetConvolutionMathType(d->conv, math));
#undef DNN_TRY
    return CUDNN_STATUS_SUCCESS;
}

/* A ranked candidate is usable when it succeeded, fits the workspace limit and keeps f32 in full
 * precision unless TF32 is allowed. */
static bool usable(cudnnStatus_t st, size_t mem, cudnnMathType_t math, ts_dtype dt, bool tf32) {
    if (st != CUDNN_STATUS_SUCCESS || mem > CONV_WS_LIMIT) return false;
    return dt != TS_F32 || tf32 || math == CUDNN_FMA_MATH;
}

/* cuDNN cannot do this configuration (this algorithm, data type, layout...): the category
 * CUDNN_STATUS_NOT_SUPPORTED, codes 3000-3999 since cuDNN 9. Anything else is an error. */
static bool dnn_declined(cudnnStatus_t s) {
#if CUDNN_MAJOR >= 9
    return CUDNN_STATUS_CATEGORY(s) == CUDNN_STATUS_NOT_SUPPORTED;
#else
    return s == CUDNN_STATUS_NOT_SUPPORTED;
#endif
}

/* The usable candidates of a call, best first, into c[0..CONV_MAX_CANDS); their count, or -1 with
 * *st set when ranking failed. */
#define CONV_MAX_CANDS 16
static int rank(cudnnHandle_t h, const ConvDescs *d, ConvDir dir, ts_dtype dt, bool tf32,
                ConvChoice *c, cudnnStatus_t *st) {
    int got = 0, n = 0;
#define RANK_INTO(PERF_T, COUNT, CALL)                                                             \
    do {                                                                                           \
        PERF_T perf[COUNT];                                                                        \
        if ((*st = CALL) != CUDNN_STATUS_SUCCESS) return -1;                                       \
        for (int i = 0; i < got && n < CONV_MAX_CANDS; i++)                                        \
            if (usable(perf[i].status, perf[i].memory, perf[i].mathType, dt, tf32)) {              \
                c[n].algo = (int)perf[i].algo;                                                     \
                c[n].math = perf[i].mathType;                                                      \
                c[n].ws = perf[i].memory;                                                          \
                c[n].valid = 1;                                                                    \
                n++;                                                                               \
            }                                                                                      \
    } while (0)
    if (dir == DIR_FWD)
        RANK_INTO(cudnnConvolutionFwdAlgoPerf_t, CUDNN_CONVOLUTION_FWD_ALGO_COUNT,
                  cudnnGetConvolutionForwardAlgorithm_v7(
                      h, d->x, d->w, d->conv, d->y, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &got, perf));
    else if (dir == DIR_BWD_DATA)
        RANK_INTO(cudnnConvolutionBwdDataAlgoPerf_t, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT,
                  cudnnGetConvolutionBackwardDataAlgorithm_v7(h, d->w, d->y, d->conv, d->x,
                                                              CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT,
                                                              &got, perf));
    else
        RANK_INTO(
            cudnnConvolutionBwdFilterAlgoPerf_t, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT,
            cudnnGetConvolutionBackwardFilterAlgorithm_v7(
                h, d->x, d->y, d->conv, d->w, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &got, perf));
#undef RANK_INTO
    return n;
}

/* Counters for the tests (tsc_cudnn_counters) and TS_CUDA_TEST_CUDNN_DECLINE=1, a test hook: the
 * best-ranked candidate of every fresh ranking is treated as declined, as if cuDNN had answered
 * CUDNN_STATUS_NOT_SUPPORTED, so the walk to the next one and the cache are exercised on any GPU.
 */
static long long g_dnn_runs, g_dnn_declined;

static bool test_decline_first(void) { return tsi_env_on(TSI_ENV_CUDA_TEST_CUDNN_DECLINE); }

/* Runs one candidate: its math type, its workspace, the call. */
static cudnnStatus_t run_algo(int index, cudnnHandle_t h, const ConvDescs *d, ConvDir dir,
                              ts_dtype dt, const ConvChoice *c, const void *a, const void *b,
                              const void *bias, void *out, bool *oom) {
    __atomic_add_fetch(&g_dnn_runs, 1, __ATOMIC_RELAXED);
    cudnnStatus_t s = cudnnSetConvolutionMathType(d->conv, c->math);
    if (s != CUDNN_STATUS_SUCCESS) return s;
    void *ws = NULL;
    if (c->ws > 0 && (ws = tsc_scratch_alloc(index, c->ws)) == NULL) {
        *oom = true; /* TS_ERR_OOM recorded */
        return CUDNN_STATUS_SUCCESS;
    }
    const float one_f = 1.0f, zero_f = 0.0f;
    const double one_d = 1.0, zero_d = 0.0;
    const void *one = dt == TS_F64 ? (const void *)&one_d : &one_f;
    const void *zero = dt == TS_F64 ? (const void *)&zero_d : &zero_f;
    if (dir == DIR_FWD) {
        s = cudnnConvolutionForward(h, one, d->x, a, d->w, b, d->conv,
                                    (cudnnConvolutionFwdAlgo_t)c->algo, ws, c->ws, zero, d->y, out);
        if (s == CUDNN_STATUS_SUCCESS && bias)
            s = cudnnAddTensor(h, one, d->b, bias, one, d->y, out);
    } else if (dir == DIR_BWD_DATA) { /* a = gy, b = w */
        s = cudnnConvolutionBackwardData(h, one, d->w, b, d->y, a, d->conv,
                                         (cudnnConvolutionBwdDataAlgo_t)c->algo, ws, c->ws, zero,
                                         d->x, out);
    } else { /* a = gy, b = x */
        s = cudnnConvolutionBackwardFilter(h, one, d->x, b, d->y, a, d->conv,
                                           (cudnnConvolutionBwdFilterAlgo_t)c->algo, ws, c->ws,
                                           zero, d->w, out);
    }
    if (ws) tsc_scratch_free(index, ws);
    if (dnn_declined(s)) __atomic_add_fetch(&g_dnn_declined, 1, __ATOMIC_RELAXED);
    return s;
}

static const char *dir_name(ConvDir dir) {
    return dir == DIR_FWD        ? "conv2d"
           : dir == DIR_BWD_DATA ? "conv2d_backward_data"
                                 : "conv2d_backward_weight";
}

/* Runs one direction through cuDNN: the cached choice, or the ranked candidates in order until
 * one runs (a candidate cuDNN declines is skipped, the one that ran is cached; when every one
 * declines, that is cached too, and later calls go straight to im2col). CONV_FALLBACK when cuDNN
 * cannot (the im2col path then overwrites the whole output); CONV_FAILED with the error recorded
 * (a status other than "not supported" is an error, not a reason to fall back). */
static ConvResult conv_cudnn(int index, ConvDir dir, const tsc_cgeom *g, ts_dtype dt,
                             unsigned layout, const void *a, const void *b, const void *bias,
                             void *out) {
    if (!fits_int(g)) return CONV_FALLBACK;
    const bool tf32 = dt == TS_F32 && ts_cuda_allow_tf32();
    const ConvKey key = conv_key(g, dt, dir, index, tf32, layout);
    ConvChoice c;
    const bool cached = cache_get(&key, &c);
    if (cached && c.algo == CONV_NO_ALGO) return CONV_FALLBACK;
    cudnnHandle_t h = dnn_acquire(index);
    if (!h) return CONV_FALLBACK;
    ConvDescs d;
    ConvResult res = CONV_FALLBACK;
    cudnnStatus_t s = descs_make(&d, g, dt, tf32, layout);
    bool oom = false, rank_now = false;
    if (s == CUDNN_STATUS_SUCCESS && cached) {
        s = run_algo(index, h, &d, dir, dt, &c, a, b, bias, out, &oom);
        if (dnn_declined(s)) { /* it ran before: forget it, rank again */
            c.valid = 0;
            cache_put(&key, &c);
            rank_now = true;
        }
    } else if (s == CUDNN_STATUS_SUCCESS) {
        rank_now = true;
    }
    if (rank_now) {
        ConvChoice cand[CONV_MAX_CANDS];
        const int n = rank(h, &d, dir, dt, tf32, cand, &s);
        const bool skip_first = n > 0 && test_decline_first();
        if (skip_first) __atomic_add_fetch(&g_dnn_declined, 1, __ATOMIC_RELAXED);
        if (n >= 0) s = CUDNN_STATUS_NOT_SUPPORTED;
        for (int i = skip_first ? 1 : 0; i < n && dnn_declined(s) && !oom; i++) {
            s = run_algo(index, h, &d, dir, dt, &cand[i], a, b, bias, out, &oom);
            if (s == CUDNN_STATUS_SUCCESS && !oom) cache_put(&key, &cand[i]);
        }
        if (n >= 0 && dnn_declined(s)) { /* none runs: im2col from now on */
            ConvChoice none;
            memset(&none, 0, sizeof none);
            none.algo = CONV_NO_ALGO;
            none.valid = 1;
            cache_put(&key, &none);
        }
    }
    if (oom)
        res = CONV_FAILED;
    else if (s == CUDNN_STATUS_SUCCESS)
        res = CONV_DONE;
    else if (!dnn_declined(s)) {
        tsi_error_set(TS_ERR_CUDA, "%s: cuDNN: %s [status %d] (cuda:%d)", dir_name(dir),
                      cudnnGetErrorString(s), (int)s, index);
        res = CONV_FAILED;
    }
    descs_free(&d);
    dnn_release(index, h);
    return res;
}

} /* namespace */

tsc_conv_result tsc_conv_cudnn(int index, tsc_conv_dir dir, const tsc_cgeom *g, ts_dtype dt,
                               unsigned layout, const void *a, const void *b, const void *bias,
                               void *out) {
    const ConvDir d = dir == TSC_CONV_FWD        ? DIR_FWD
                      : dir == TSC_CONV_BWD_DATA ? DIR_BWD_DATA
                                                 : DIR_BWD_FILTER;
    const ConvResult r = conv_cudnn(index, d, g, dt, layout, a, b, bias, out);
    return r == CONV_DONE ? TSC_CONV_DONE : r == CONV_FAILED ? TSC_CONV_FAILED : TSC_CONV_FALLBACK;
}

extern "C" void tsc_cudnn_counters(long long *runs, long long *declined) {
    *runs = __atomic_load_n(&g_dnn_runs, __ATOMIC_RELAXED);
    *declined = __atomic_load_n(&g_dnn_declined, __ATOMIC_RELAXED);
}
#else
extern "C" void tsc_cudnn_counters(long long *runs, long long *declined) { *runs = *declined = -1; }
tsc_conv_result tsc_conv_cudnn(int index, tsc_conv_dir dir, const tsc_cgeom *g, ts_dtype dt,
                               unsigned layout, const void *a, const void *b, const void *bias,
                               void *out) {
    return TSC_CONV_FALLBACK;
}
#endif /* TS_HAVE_CUDNN */

/* ------------------------------------------------------------------ the activation */
namespace {

__device__ __forceinline__ float act_of(float v, bool relu, float lo, float hi) {
    return relu ? ts_relu_f(v) : ts_clamp_f(v, lo, hi);
}
__device__ __forceinline__ double act_of(double v, bool relu, double lo, double hi) {
    return relu ? ts_relu_d(v) : ts_clamp_d(v, lo, hi);
}

/* y[e] = act(y[e]) in the compute type CT, stored back as T (ts_relu / ts_clamp of a T tensor) */
template <typename T, typename CT>
__global__ void act_kernel(T *y, int64_t n, bool relu, CT lo, CT hi) {
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < n;
         e += (int64_t)gridDim.x * blockDim.x)
        y[e] = tsc_to<T>::from(act_of(tsc_ld(y[e]), relu, lo, hi));
}

/* the bounds converted as cuda_unary.cu's clamp converts them */
template <typename T>
static bool act_typed(int index, char *y, int64_t n, const ts_conv2d_params *p) {
    typedef tsc_ct<T> CT;
    const double lo = isnan(p->act_lo) ? -INFINITY : p->act_lo;
    const double hi = isnan(p->act_hi) ? INFINITY : p->act_hi;
    act_kernel<T, CT><<<tsc_grid(n, TSC_THREADS), TSC_THREADS, 0, tsc_stream(index)>>>(
        (T *)y, n, p->act == TS_CONV_ACT_RELU, (CT)lo, (CT)hi);
    return tsc_launch_check("conv2d", index);
}

static void conv_act(int index, const ts_kview *out, int64_t n, const ts_conv2d_params *p) {
    switch (out->dtype) {
    case TS_F64:
        act_typed<double>(index, out->data, n, p);
        break;
    case TS_F16:
        act_typed<tsc_f16>(index, out->data, n, p);
        break;
    case TS_BF16:
        act_typed<tsc_bf16>(index, out->data, n, p);
        break;
    default:
        act_typed<float>(index, out->data, n, p);
        break;
    }
}

} /* namespace */

/* ------------------------------------------------------------------ the NCHW passes */
bool tsc_conv_nchw_forward(int index, const tsc_cgeom *g, ts_dtype dt, const char *x, const char *w,
                           const char *bias, char *y) {
#ifdef TS_HAVE_CUDNN
    if (g->c > 0) {
        const ConvResult r = conv_cudnn(index, DIR_FWD, g, dt, 0, x, w, bias, y);
        if (r != CONV_FALLBACK) return r == CONV_DONE;
    }
#endif
    return tsc_conv_im2col_forward(index, g, dt, x, w, bias, y);
}

bool tsc_conv_nchw_backward_data(int index, const tsc_cgeom *g, ts_dtype dt, const char *gy,
                                 const char *w, char *gx) {
#ifdef TS_HAVE_CUDNN
    if (g->p > 0 && g->o > 0) {
        const ConvResult r = conv_cudnn(index, DIR_BWD_DATA, g, dt, 0, gy, w, NULL, gx);
        if (r != CONV_FALLBACK) return r == CONV_DONE;
    }
#endif
    return tsc_conv_im2col_backward_data(index, g, dt, gy, w, gx);
}

bool tsc_conv_nchw_backward_weight(int index, const tsc_cgeom *g, ts_dtype dt, const char *gy,
                                   const char *x, char *gw) {
#ifdef TS_HAVE_CUDNN
    if (g->n > 0 && g->p > 0) {
        const ConvResult r = conv_cudnn(index, DIR_BWD_FILTER, g, dt, 0, gy, x, NULL, gw);
        if (r != CONV_FALLBACK) return r == CONV_DONE;
    }
#endif
    return tsc_conv_im2col_backward_weight(index, g, dt, gy, x, gw);
}

/* ------------------------------------------------------------------ entry points */
/* channels_last views (x or out, gx or gout NHWC: backend.h's conv2d_channels_last) go to
 * cuda_conv_nhwc.cu */
void tsc_conv2d(const ts_backend *be, int index, const ts_kview *out, const ts_kview *x,
                const ts_kview *w, const ts_kview *bias, const ts_conv2d_params *p) {
    (void)be;
    const tsc_cgeom g = tsc_cgeom_of(x, w, out, p);
    if (g.n * g.o * g.p == 0 || !tsc_begin(index)) return;
    if (tsc_conv_view_nhwc(x) || tsc_conv_view_nhwc(out)) {
        tsc_conv2d_nhwc(index, &g, out, x, w, bias, p);
        return;
    }
    const bool ok = tsc_conv_nchw_forward(index, &g, out->dtype, x->data, w->data,
                                          bias ? bias->data : NULL, out->data);
    if (ok && p->act != TS_CONV_ACT_NONE) conv_act(index, out, g.n * g.o * g.p, p);
}

void tsc_conv2d_backward_data(const ts_backend *be, int index, const ts_kview *gx,
                              const ts_kview *gout, const ts_kview *w, const ts_conv2d_params *p) {
    (void)be;
    const tsc_cgeom g = tsc_cgeom_of(gx, w, gout, p);
    if (g.n * g.c * g.h * g.w == 0 || !tsc_begin(index)) return;
    if (tsc_conv_view_nhwc(gx) || tsc_conv_view_nhwc(gout)) {
        tsc_conv2d_backward_data_nhwc(index, &g, gx, gout, w);
        return;
    }
    tsc_conv_nchw_backward_data(index, &g, gx->dtype, gout->data, w->data, gx->data);
}

void tsc_conv2d_backward_weight(const ts_backend *be, int index, const ts_kview *gw,
                                const ts_kview *gout, const ts_kview *x,
                                const ts_conv2d_params *p) {
    (void)be;
    const tsc_cgeom g = tsc_cgeom_of(x, gw, gout, p);
    if (g.o * g.k == 0 || !tsc_begin(index)) return;
    if (tsc_conv_view_nhwc(x) || tsc_conv_view_nhwc(gout)) {
        tsc_conv2d_backward_weight_nhwc(index, &g, gw, gout, x);
        return;
    }
    tsc_conv_nchw_backward_weight(index, &g, gw->dtype, gout->data, x->data, gw->data);
}
