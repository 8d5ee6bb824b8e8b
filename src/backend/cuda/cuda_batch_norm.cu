/* cuda_batch_norm.cu — fused batch norm in training mode on CUDA (backend.h's
 * ts_batch_norm_args): forward and backward over contiguous [n, c, hw] (NCHW) or [n, hw, c]
 * (channels_last) tensors, x of f32, f64, f16 or bf16; parameters, their gradients and the
 * statistics of the compute type A (float, double for f64: an f16 / bf16 x has f32 parameters,
 * autocast's mixed batch norm), with kern_batch_norm.c's semantics.
 *
 * Every pass that needs per-channel sums runs in three launches, deterministic (no atomics; the
 * cut into chunks depends on the shape alone, never on the device):
 *   1. partial sums: each block sums one chunk of one channel (NCHW: up to BN_CHUNK positions of
 *      the channel's n * hw, 256 threads along them) or one chunk of rows for a group of up to 32
 *      neighbouring channels (NHWC, and NCHW with hw = 1, whose memory is the same: threads along
 *      the channels, so a warp reads consecutive addresses), each thread in double, then a tree in
 *      shared memory; partials [nchunks][c] in scratch (tsc_scratch_alloc, stream-ordered; the
 *      graph's memory while a CUDA graph is built);
 *   2. finish: a warp per channel adds its chunks' partials (lanes strided, then a shuffle tree)
 *      and writes the statistics or parameter gradients and a per-channel table of coefficients;
 *   3. an elementwise pass (y or dx) over every element, the channel of element e being
 *      (e / hw) % c (hw taken as 1 for NHWC), by multiply-high division below 2^31 elements.
 * Forward sums d = x - k and d^2 in double, k the channel's first element (the shifted-data
 * method: |k - mean| is at most the channel's largest deviation D, so the cancellation in
 * var = (sum(d^2) - sum(d)^2 / m) / m costs about (D^2 / var) units of double's roundoff, nothing
 * in float terms even for channels far from zero); mean = k + sum(d) / m and invstd =
 * 1 / sqrt(var + eps) rounded to A once; y = (x - mean) * scale + bias with scale = invstd * weight
 * rounded to A, as the CPU. Backward sums dy and dy * (x - mean) in double (mean as stored), then
 * dbias = sdy, dweight = sdx * invstd, dx = (dy - sdy / m - (x - mean) * invstd^2 * sdx / m) *
 * invstd * weight in A. A NaN stays in its channel. Everything runs on the current stream with no
 * host wait, so it can be captured; without scratch memory nothing is launched (TS_ERR_OOM). */
#include "backend/cuda/cuda_compute.h"
#include "backend/cuda/cuda_iter.cuh"

namespace {

#define BN_THREADS   256
#define BN_CHUNK     4096 /* NCHW: positions of a channel one block sums, at least (16 a thread) */
#define BN_ROW_REPS  16   /* NHWC: rows each thread of a block sums, at least */
#define BN_MAX_CHUNK 1024 /* chunks of a channel at most (the finish pass stays short) */
#define BN_CW_MAX    32   /* NHWC: channels of a block, at most (a warp's width) */

/* A chunk's sums: forward sum(d), sum(d^2); backward sum(dy), sum(dy * (x - mean)) */
struct BNSums {
    double s, q;
};

/* y = (x - m) * s + b (forward); dx = (dy - a - (x - m) * b) * s (backward) */
template <typename A> struct BNCoef { A m, a, b, s; };

struct BNPlan {
    const char *x, *dy;
    char *y, *dx;
    const void *w, *b, *mean_in, *invstd_in; /* A[c] or NULL (w, b) */
    void *mean, *invstd, *var, *dw, *db;     /* A[c] or NULL (var, dw, db) */
    int64_t n, c, hw, m;                     /* m = n * hw: a channel's elements */
    double eps;
    bool rows_layout; /* [n * hw, c] memory: NHWC, or NCHW with hw = 1 */
    /* NCHW: chunk positions of a channel per block, BN_THREADS positions as di samples + dj */
    /* NHWC: chunk rows per block, cw channels and rw row lanes a block (cw * rw = BN_THREADS) */
    int64_t chunk, nchunks, di, dj, groups;
    int cw;
    BNSums *part; /* [nchunks][c] */
    void *coef;   /* BNCoef<A>[c] */
};

/* Sums over the block, tree in shared memory over the threads that share tid % cw (cw a power of
 * two dividing blockDim.x): threads tid < cw get their column's sums. All threads must call it. */
__device__ __forceinline__ BNSums bn_block_sums(BNSums v, int cw) {
    __shared__ double ss[BN_THREADS], sq[BN_THREADS];
    const int tid = threadIdx.x;
    ss[tid] = v.s;
    sq[tid] = v.q;
    __syncthreads();
    for (int h = BN_THREADS / 2; h >= cw; h >>= 1) {
        if (tid < h) {
            ss[tid] += ss[tid + h];
            sq[tid] += sq[tid + h];
        }
        __syncthreads();
    }
    BNSums r = {ss[tid], sq[tid]};
    __syncthreads(); /* the arrays are reused by the block's next item */
    return r;
}

/* One element's contribution: forward d = x - k, d^2; backward dy, dy * (x - mean) */
template <typename T, bool BWD>
__device__ __forceinline__ void bn_fold(BNSums &acc, const BNPlan &P, int64_t at, double k) {
    const double xv = tsc_to_double(((const T *)P.x)[at]);
    if (BWD) {
        const double g = tsc_to_double(((const T *)P.dy)[at]);
        acc.s += g;
        acc.q += g * (xv - k);
    } else {
        const double d = xv - k;
        acc.s += d;
        acc.q += d * d;
    }
}

/* The channel's shift (forward: its first element) or mean (backward) */
template <typename T, typename A, bool BWD>
__device__ __forceinline__ double bn_center(const BNPlan &P, int64_t c) {
    if (BWD) return (double)((const A *)P.mean_in)[c];
    return tsc_to_double(((const T *)P.x)[P.rows_layout ? c : c * P.hw]);
}

/* Pass 1, NCHW: item = chunk * c + channel; a thread walks the chunk's positions p = i * hw + j
 * BN_THREADS apart (p advancing by di samples and dj) at x[(i * c + channel) * hw + j]. */
template <typename T, typename A, bool BWD> __global__ void bn_partial_nchw(BNPlan P) {
    const int64_t items = P.c * P.nchunks, plane = P.c * P.hw;
    for (int64_t item = blockIdx.x; item < items; item += gridDim.x) {
        const int64_t ch = item % P.c, k = item / P.c;
        const int64_t p0 = k * P.chunk + threadIdx.x;
        const int64_t p1 = (k + 1) * P.chunk < P.m ? (k + 1) * P.chunk : P.m;
        const double center = bn_center<T, A, BWD>(P, ch);
        BNSums acc = {0, 0};
        int64_t i = p0 / P.hw, j = p0 - i * P.hw;
        for (int64_t p = p0; p < p1; p += BN_THREADS) {
            bn_fold<T, BWD>(acc, P, i * plane + ch * P.hw + j, center);
            i += P.di;
            j += P.dj;
            if (j >= P.hw) j -= P.hw, i++;
        }
        acc = bn_block_sums(acc, 1);
        if (threadIdx.x == 0) P.part[item] = acc;
    }
}

/* Pass 1, rows layout ([n * hw, c]): item = chunk * groups + group; thread (tx, ty) = (tid % cw,
 * tid / cw) sums channel group * cw + tx over the chunk's rows ty, ty + rw, ... */
template <typename T, typename A, bool BWD> __global__ void bn_partial_rows(BNPlan P) {
    const int64_t items = P.groups * P.nchunks, rows = P.m;
    const int tx = threadIdx.x % P.cw, ty = threadIdx.x / P.cw, rw = BN_THREADS / P.cw;
    for (int64_t item = blockIdx.x; item < items; item += gridDim.x) {
        const int64_t g = item % P.groups, k = item / P.groups, ch = g * P.cw + tx;
        const int64_t r1 = (k + 1) * P.chunk < rows ? (k + 1) * P.chunk : rows;
        BNSums acc = {0, 0};
        if (ch < P.c) {
            const double center = bn_center<T, A, BWD>(P, ch);
            for (int64_t r = k * P.chunk + ty; r < r1; r += rw)
                bn_fold<T, BWD>(acc, P, r * P.c + ch, center);
        }
        acc = bn_block_sums(acc, P.cw);
        if (threadIdx.x < P.cw && ch < P.c) P.part[k * P.c + ch] = acc;
    }
}

/* Pass 2: a warp per channel adds its nchunks partials (lane l takes chunks l, l + 32, ...; then a
 * shuffle tree: a fixed order); lane 0 finishes the channel. */
template <typename T, typename A, bool BWD> __global__ void bn_finish(BNPlan P) {
    const int lane = threadIdx.x & 31;
    const int64_t warps = (int64_t)gridDim.x * (blockDim.x >> 5);
    for (int64_t ch = (int64_t)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5); ch < P.c;
         ch += warps) {
        double s = 0, q = 0;
        for (int64_t k = lane; k < P.nchunks; k += 32) {
            const BNSums v = P.part[k * P.c + ch];
            s += v.s;
            q += v.q;
        }
        for (int off = 16; off > 0; off >>= 1) {
            s += __shfl_down_sync(0xffffffffu, s, off);
            q += __shfl_down_sync(0xffffffffu, q, off);
        }
        if (lane != 0) continue;
        const double m = (double)P.m;
        const A w = P.w ? ((const A *)P.w)[ch] : (A)1;
        BNCoef<A> co;
        if (BWD) {
            /* s = sum(dy), q = sum(dy * (x - mean)) */
            const double inv = (double)((const A *)P.invstd_in)[ch];
            if (P.db) ((A *)P.db)[ch] = (A)s;
            if (P.dw) ((A *)P.dw)[ch] = (A)(q * inv);
            co.m = ((const A *)P.mean_in)[ch];
            co.a = (A)(s / m);
            co.b = (A)(q / m * inv * inv);
            co.s = (A)(P.w ? inv * (double)w : inv);
        } else {
            /* s = sum(x - k), q = sum((x - k)^2) */
            const double k = bn_center<T, A, false>(P, ch);
            const double v = (q - s * s / m) / m;
            const double var = v < 0 ? 0 : v, inv = 1.0 / sqrt(var + P.eps);
            const A mean = (A)(k + s / m), invA = (A)inv;
            ((A *)P.mean)[ch] = mean;
            ((A *)P.invstd)[ch] = invA;
            if (P.var) ((A *)P.var)[ch] = (A)var;
            co.m = mean;
            co.a = 0;
            co.b = P.b ? ((const A *)P.b)[ch] : (A)0;
            /* scale = invstd * weight rounded to A once (the product of two A's is exact in
             * double for float; for double it is double's own product) */
            co.s = (A)((double)invA * (double)w);
        }
        ((BNCoef<A> *)P.coef)[ch] = co;
    }
}

/* The channel of element e: (e / hw) % c, by multiply-high (every index below 2^31) or by plain
 * 64-bit division. hw is 1 in the rows layout. */
struct BNChan32 {
    tsc_divmod32 hw, c;
    __device__ __forceinline__ int64_t of(int64_t e) const {
        const uint32_t r = hw.div((uint32_t)e);
        return (int64_t)(r - c.div(r) * c.d);
    }
};
struct BNChan64 {
    int64_t hw, c;
    __device__ __forceinline__ int64_t of(int64_t e) const { return (e / hw) % c; }
};

/* Pass 3: y (forward) or dx (backward) over all n * c * hw elements */
template <typename T, typename A, bool BWD, typename Chan>
__global__ void bn_apply(BNPlan P, Chan chan, int64_t numel) {
    const BNCoef<A> *coef = (const BNCoef<A> *)P.coef;
    const T *x = (const T *)P.x;
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < numel;
         e += (int64_t)gridDim.x * blockDim.x) {
        const BNCoef<A> co = coef[chan.of(e)];
        const A xv = tsc_load_acc(x[e]);
        if (BWD) {
            const A g = tsc_load_acc(((const T *)P.dy)[e]);
            ((T *)P.dx)[e] = tsc_from_acc<T>((g - co.a - (xv - co.m) * co.b) * co.s);
        } else {
            ((T *)P.y)[e] = tsc_from_acc<T>((xv - co.m) * co.s + co.b);
        }
    }
}

/* The plan of a call: pointers, layout and the cut into chunks (the shape's alone) */
static BNPlan bn_plan(const ts_batch_norm_args *a) {
    BNPlan P;
    memset(&P, 0, sizeof P);
    P.x = (const char *)a->x.data;
    P.dy = (const char *)a->dy.data;
    P.y = (char *)a->y.data;
    P.dx = (char *)a->dx.data;
    P.w = a->weight.data;
    P.b = a->bias.data;
    P.mean_in = P.mean = a->mean.data;
    P.invstd_in = P.invstd = a->invstd.data;
    P.var = a->var.data;
    P.dw = a->dweight.data;
    P.db = a->dbias.data;
    P.n = a->n;
    P.c = a->c;
    P.hw = a->hw;
    P.m = a->n * a->hw;
    P.eps = a->eps;
    P.rows_layout = a->channels_last || a->hw == 1;
    if (P.rows_layout) {
        int cw = 1;
        while (cw < BN_CW_MAX && cw < P.c) cw <<= 1;
        P.cw = cw;
        P.groups = (P.c + cw - 1) / cw;
        const int64_t rw = BN_THREADS / cw, least = rw * BN_ROW_REPS;
        const int64_t spread = (P.m + BN_MAX_CHUNK - 1) / BN_MAX_CHUNK;
        P.chunk = least > spread ? least : spread;
    } else {
        P.cw = 1;
        const int64_t spread = (P.m + BN_MAX_CHUNK - 1) / BN_MAX_CHUNK;
        P.chunk = BN_CHUNK > spread ? BN_CHUNK : spread;
        P.di = BN_THREADS / P.hw;
        P.dj = BN_THREADS % P.hw;
    }
    P.nchunks = (P.m + P.chunk - 1) / P.chunk;
    return P;
}

/* Scratch for the partials and the coefficients; false (TS_ERR_OOM recorded) without it */
template <typename A> static bool bn_scratch(int index, BNPlan &P) {
    const size_t part = (size_t)(P.nchunks * P.c) * sizeof(BNSums);
    char *s = (char *)tsc_scratch_alloc(index, part + (size_t)P.c * sizeof(BNCoef<A>));
    if (!s) return false;
    P.part = (BNSums *)s;
    P.coef = s + part;
    return true;
}

template <typename T, typename A, bool BWD> static void bn_run(int index, BNPlan P) {
    const char *what = BWD ? "batch_norm_backward" : "batch_norm";
    if (!bn_scratch<A>(index, P)) return; /* nothing written */
    cudaStream_t st = tsc_stream(index);
    const int64_t items = (P.rows_layout ? P.groups : P.c) * P.nchunks;
    const unsigned g1 = tsc_grid_size(index, items * BN_THREADS, BN_THREADS);
    if (P.rows_layout)
        bn_partial_rows<T, A, BWD><<<g1, BN_THREADS, 0, st>>>(P);
    else
        bn_partial_nchw<T, A, BWD><<<g1, BN_THREADS, 0, st>>>(P);
    bool ok = tsc_launch_check(what, index);
    if (ok) {
        bn_finish<T, A, BWD><<<tsc_grid_size(index, P.c * 32, BN_THREADS), BN_THREADS, 0, st>>>(P);
        ok = tsc_launch_check(what, index);
    }
    const int64_t numel = P.m * P.c;
    if (ok && (!BWD || P.dx)) {
        const unsigned g3 = tsc_grid_size(index, numel, BN_THREADS);
        if (numel < ((int64_t)1 << 31)) {
            BNChan32 ch;
            ch.hw.init((uint32_t)(P.rows_layout ? 1 : P.hw));
            ch.c.init((uint32_t)P.c);
            bn_apply<T, A, BWD><<<g3, BN_THREADS, 0, st>>>(P, ch, numel);
        } else {
            BNChan64 ch = {P.rows_layout ? 1 : P.hw, P.c};
            bn_apply<T, A, BWD><<<g3, BN_THREADS, 0, st>>>(P, ch, numel);
        }
        tsc_launch_check(what, index);
    }
    tsc_scratch_free(index, P.part); /* stream-ordered: reused only after these kernels */
}

template <bool BWD> static void bn_dispatch(int index, const ts_batch_norm_args *a) {
    if (!tsc_begin(index)) return;
    const BNPlan P = bn_plan(a);
    switch (a->x.dtype) {
    case TS_F32:
        bn_run<float, float, BWD>(index, P);
        break;
    case TS_F64:
        bn_run<double, double, BWD>(index, P);
        break;
    case TS_F16:
        bn_run<tsc_f16, float, BWD>(index, P);
        break;
    case TS_BF16:
        bn_run<tsc_bf16, float, BWD>(index, P);
        break;
    default:
        break;
    }
}

} /* namespace */

/* The dtypes and shapes of the CPU kernels (kern_batch_norm.c): f32, f64, and f16 / bf16 with
 * f32 parameters and statistics; n * hw >= 2. */
bool tsc_batch_norm_supports(const ts_backend *be, int index, const ts_batch_norm_args *a) {
    (void)be, (void)index;
    const ts_dtype d = a->x.dtype;
    return (d == TS_F32 || d == TS_F64 || d == TS_F16 || d == TS_BF16) && a->n >= 1 && a->c >= 1 &&
           a->hw >= 1 && a->n * a->hw >= 2;
}

void tsc_batch_norm_forward(const ts_backend *be, int index, const ts_batch_norm_args *a) {
    (void)be;
    bn_dispatch<false>(index, a);
}

void tsc_batch_norm_backward(const ts_backend *be, int index, const ts_batch_norm_args *a) {
    (void)be;
    bn_dispatch<true>(index, a);
}
