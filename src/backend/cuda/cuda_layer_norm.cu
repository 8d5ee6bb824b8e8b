/* cuda_layer_norm.cu — fused layer norm on CUDA (backend.h's ts_layer_norm_args), forward and
 * backward, f32 / f64 / f16 / bf16, over contiguous rows; the same semantics as the CPU's
 * kern_layer_norm.c.
 *
 * Rows of up to LN_WARP_MAX_COLS go to a warp each (8 rows per block), longer rows to a block of
 * LN_BLOCK threads; a row is read with 128-bit loads when every pointer is 16-byte aligned and the
 * row length a multiple of the vector, element by element otherwise. The row's later passes read
 * it again (from L1 / L2: a warp's row is at most 8 KiB).
 * Forward: the mean, then the biased variance as the mean of (x - mean)^2 (two passes), both
 * summed in double for every dtype, as the CPU does: rows near FLT_MAX neither overflow nor lose
 * digits. mean and rstd = 1 / sqrt(var + eps) are rounded to the statistics' dtype (float, double
 * for f64) and y = (x - mean) * rstd * w + b is computed in float (double for f64) from them,
 * rounded once to T.
 * Backward, dx: one kernel, a row per warp or block as forward: with xhat = (x - mean) * rstd and
 * g = dy * w, the row's sums of g and g * xhat in double, then dx = rstd * (g - mean(g) - xhat *
 * mean(g * xhat)) in float (double for f64).
 * Backward, dweight / dbias: the rows are cut into `parts` runs of consecutive rows, a function of
 * the shape only; a block of 32 columns x 8 threads sums one run's dy * xhat and dy per column in
 * double (each thread every 8th row, then the 8 in a fixed order) into the workspace, and a second
 * kernel adds the runs' partial sums in run order and rounds once. No atomics: the results are
 * deterministic, and the workspace is O(parts * cols), never O(rows * cols).
 * Fused residual add (a->residual, decision 0031): forward first writes h = x + residual (in float,
 * double for f64, rounded once to T: cuda_binary.cu's add) and normalises h, each thread reading
 * back the elements it wrote; backward is unchanged (the front end hands it h as x).
 * RMSNorm (a->rms; no mean, no bias): forward sums x^2 in double in one pass instead of the two
 * (var = mean(x^2), mean 0), y = x * rstd * w; backward is layer norm's with mean 0 and no mean(g)
 * term: dx = rstd * (g - xhat * mean(g * xhat)), dweight = the sum of dy * x * rstd.
 * Everything is queued on the current stream, with no allocation and no host synchronisation, so
 * the kernels can be captured into a CUDA graph. */
#include "backend/cuda/cuda_compute.h"

namespace {

#define LN_WARP_MAX_COLS 1024 /* rows up to this long: one warp per row */
#define LN_BLOCK         256  /* threads per block: 8 warp rows, or one long row */
#define LN_PART_COLS     32   /* dweight / dbias: columns per block (a warp's worth) */
#define LN_PART_ROWS     8    /* ... and threads over the rows of a run */
#define LN_PART_ROWS_PER 64   /* ceil(rows / this) runs of rows (about 8 rows per thread), */
#define LN_PARTS_MIN     64   /* at most max(this, 2048 / column blocks: ~2048 blocks in all) */
#define LN_PARTS_MAX     512  /* and never more than this */

/* The kernels' view of the arguments: T the tensors' storage type, A the compute type (float, or
 * double for f64), which is also the statistics' dtype. */
template <typename T> struct LnRows {
    typedef typename tsc_acc<T>::type A;
    const T *x, *w, *b, *dy;
    const T *res; /* the fused residual add (forward): NULL, or y normalises h = x + res */
    T *y, *dx, *h;
    A *mean, *rstd;
    int64_t rows, cols;
    double eps;
    bool rms;     /* RMSNorm: mean 0 (mean absent), no mean(g) term in dx */
    bool res_vec; /* x and res can be read a vector at a time (the residual form) */
};

template <typename T> LnRows<T> ln_rows(const ts_layer_norm_args *a) {
    typedef typename tsc_acc<T>::type A;
    LnRows<T> P;
    P.x = (const T *)a->x.data;
    P.w = (const T *)a->weight.data;
    P.b = (const T *)a->bias.data;
    P.dy = (const T *)a->dy.data;
    P.res = (const T *)a->residual.data;
    P.y = (T *)a->y.data;
    P.dx = (T *)a->dx.data;
    P.h = (T *)a->h.data;
    P.mean = (A *)a->mean.data;
    P.rstd = (A *)a->rstd.data;
    P.rows = a->rows;
    P.cols = a->cols;
    P.eps = a->eps;
    P.rms = a->rms;
    P.res_vec = false;
    return P;
}

/* N consecutive elements, one load (16 bytes when N > 1) */
template <typename T, int N> struct alignas(sizeof(T) * N) LnVec { T v[N]; };

template <typename T, int N>
__device__ __forceinline__ void ln_load(const T *p, int64_t c, typename tsc_acc<T>::type *out) {
    const LnVec<T, N> v = *reinterpret_cast<const LnVec<T, N> *>(p + c);
#pragma unroll
    for (int i = 0; i < N; i++) out[i] = tsc_load_acc(v.v[i]);
}

template <typename T, int N>
__device__ __forceinline__ void ln_store(T *p, int64_t c, const typename tsc_acc<T>::type *in) {
    LnVec<T, N> v;
#pragma unroll
    for (int i = 0; i < N; i++) v.v[i] = tsc_from_acc<T>(in[i]);
    *reinterpret_cast<LnVec<T, N> *>(p + c) = v;
}

/* N elements of an optional vector (weight, bias): the value `none` when it is absent */
template <typename T, int N>
__device__ __forceinline__ void ln_load_or(const T *p, int64_t c, typename tsc_acc<T>::type none,
                                           typename tsc_acc<T>::type *out) {
    if (p) {
        ln_load<T, N>(p, c, out);
    } else {
#pragma unroll
        for (int i = 0; i < N; i++) out[i] = none;
    }
}

/* two sums of a row, in double */
struct LnSums {
    double a, b;
};

/* Every lane gets the warp's sums (xor butterfly: a + b == b + a, so all lanes hold the same
 * bits). */
__device__ __forceinline__ LnSums ln_warp_sum(LnSums s) {
    for (int off = 16; off > 0; off >>= 1) {
        s.a += __shfl_xor_sync(0xffffffffu, s.a, off);
        s.b += __shfl_xor_sync(0xffffffffu, s.b, off);
    }
    return s;
}

/* The row's sums in every thread of its group (a warp, or with BLOCK the whole block: then every
 * thread must call it). */
template <bool BLOCK> __device__ __forceinline__ LnSums ln_group_sum(LnSums s) {
    s = ln_warp_sum(s);
    if (!BLOCK) return s;
    __shared__ LnSums sh[32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    if (lane == 0) sh[warp] = s;
    __syncthreads();
    LnSums r = {0, 0};
    for (int k = 0; k < nwarps; k++) r.a += sh[k].a, r.b += sh[k].b; /* same order everywhere */
    __syncthreads(); /* sh is reused by the next row */
    return r;
}

/* The rows a thread's group takes: a warp each (8 per block), or with BLOCK one per block, in a
 * grid-stride loop (uniform over the group, so its shuffles and barriers are too). */
#define LN_FOR_ROWS(BLOCK, r, lane, group)                                                         \
    const int group = BLOCK ? (int)blockDim.x : 32;                                                \
    const int lane = (int)threadIdx.x % group;                                                     \
    const int64_t per_block_ = (int64_t)blockDim.x / group;                                        \
    for (int64_t r = blockIdx.x * per_block_ + threadIdx.x / group; r < P.rows;                    \
         r += (int64_t)gridDim.x * per_block_)

template <typename T, int N, bool BLOCK> __global__ void ln_forward_kernel(LnRows<T> P) {
    typedef typename tsc_acc<T>::type A;
    const int64_t n = P.cols;
    LN_FOR_ROWS(BLOCK, r, lane, group) {
        const T *x = P.x + r * n;
        T *y = P.y + r * n;
        const int64_t c0 = (int64_t)lane * N, step = (int64_t)group * N;
        A v[N];
        if (P.res) {
            /* h = x + residual, rounded to T as ts_add rounds it (cuda_binary.cu: in A, then
             * once to T); the passes below read h back, each thread the elements it wrote */
            T *h = P.h + r * n;
            const T *res = P.res + r * n;
            for (int64_t c = c0; c < n; c += step) {
                if (P.res_vec) {
                    A q[N];
                    ln_load<T, N>(x, c, v);
                    ln_load<T, N>(res, c, q);
#pragma unroll
                    for (int i = 0; i < N; i++) v[i] += q[i];
                } else {
#pragma unroll
                    for (int i = 0; i < N; i++)
                        v[i] = tsc_load_acc(x[c + i]) + tsc_load_acc(res[c + i]);
                }
                ln_store<T, N>(h, c, v);
            }
            x = h;
        }
        LnSums s = {0, 0};
        double mean = 0; /* rms: the mean of x^2 is the variance about 0 */
        if (!P.rms) {
            for (int64_t c = c0; c < n; c += step) {
                ln_load<T, N>(x, c, v);
#pragma unroll
                for (int i = 0; i < N; i++) s.a += (double)v[i];
            }
            mean = ln_group_sum<BLOCK>(s).a / (double)n;
            s.a = 0;
        }
        for (int64_t c = c0; c < n; c += step) {
            ln_load<T, N>(x, c, v);
#pragma unroll
            for (int i = 0; i < N; i++) {
                const double d = (double)v[i] - mean;
                s.a += d * d;
            }
        }
        const double var = ln_group_sum<BLOCK>(s).a / (double)n;
        const A mt = (A)mean, rt = (A)(1.0 / sqrt(var + P.eps));
        if (lane == 0 && !P.rms) P.mean[r] = mt;
        if (lane == 0) P.rstd[r] = rt;
        for (int64_t c = c0; c < n; c += step) {
            A w[N], b[N];
            ln_load<T, N>(x, c, v);
            ln_load_or<T, N>(P.w, c, (A)1, w);
            ln_load_or<T, N>(P.b, c, (A)0, b);
#pragma unroll
            for (int i = 0; i < N; i++) v[i] = (v[i] - mt) * rt * w[i] + b[i];
            ln_store<T, N>(y, c, v);
        }
    }
}

/* dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * w, xhat = (x - mean) * rstd */
template <typename T, int N, bool BLOCK> __global__ void ln_backward_dx_kernel(LnRows<T> P) {
    typedef typename tsc_acc<T>::type A;
    const int64_t n = P.cols;
    LN_FOR_ROWS(BLOCK, r, lane, group) {
        const T *x = P.x + r * n, *dy = P.dy + r * n;
        T *dx = P.dx + r * n;
        const A mt = P.rms ? (A)0 : P.mean[r], rt = P.rstd[r];
        const int64_t c0 = (int64_t)lane * N, step = (int64_t)group * N;
        A v[N], d[N], w[N];
        LnSums s = {0, 0};
        for (int64_t c = c0; c < n; c += step) {
            ln_load<T, N>(x, c, v);
            ln_load<T, N>(dy, c, d);
            ln_load_or<T, N>(P.w, c, (A)1, w);
#pragma unroll
            for (int i = 0; i < N; i++) {
                const A g = d[i] * w[i], xh = (v[i] - mt) * rt;
                s.a += (double)g;
                s.b += (double)(g * xh);
            }
        }
        s = ln_group_sum<BLOCK>(s);
        const A c1 = P.rms ? (A)0 : (A)(s.a / (double)n), c2 = (A)(s.b / (double)n);
        for (int64_t c = c0; c < n; c += step) {
            ln_load<T, N>(x, c, v);
            ln_load<T, N>(dy, c, d);
            ln_load_or<T, N>(P.w, c, (A)1, w);
#pragma unroll
            for (int i = 0; i < N; i++) {
                const A g = d[i] * w[i], xh = (v[i] - mt) * rt;
                v[i] = rt * (g - c1 - xh * c2);
            }
            ln_store<T, N>(dx, c, v);
        }
    }
}

/* How dweight / dbias cut the rows: `parts` runs of consecutive rows (run k: rows [k * rows /
 * parts, (k + 1) * rows / parts)), from the shape alone. */
static int64_t ln_parts(int64_t rows, int64_t cols) {
    const int64_t col_blocks = (cols + LN_PART_COLS - 1) / LN_PART_COLS;
    int64_t cap = 2048 / col_blocks; /* about 2048 blocks in all */
    if (cap < LN_PARTS_MIN) cap = LN_PARTS_MIN;
    if (cap > LN_PARTS_MAX) cap = LN_PARTS_MAX;
    const int64_t p = (rows + LN_PART_ROWS_PER - 1) / LN_PART_ROWS_PER;
    return p < 1 ? 1 : p > cap ? cap : p;
}

/* Block (x: 32 columns, y: one run of rows): the run's sums of dy * xhat (into pw) and dy (pb) per
 * column, in double; pw or pb NULL: not wanted. The partial sums of run k sit at [k * cols]. */
template <typename T>
__global__ void ln_param_partials_kernel(LnRows<T> P, double *pw, double *pb, int64_t parts) {
    typedef typename tsc_acc<T>::type A;
    __shared__ double shw[LN_PART_ROWS][LN_PART_COLS], shb[LN_PART_ROWS][LN_PART_COLS];
    const int64_t n = P.cols, col = (int64_t)blockIdx.x * LN_PART_COLS + threadIdx.x;
    const int64_t part = blockIdx.y;
    const int64_t r0 = part * P.rows / parts, r1 = (part + 1) * P.rows / parts;
    double sw = 0, sb = 0;
    if (col < n)
        for (int64_t r = r0 + threadIdx.y; r < r1; r += LN_PART_ROWS) {
            const A d = tsc_load_acc(P.dy[r * n + col]);
            if (pw) {
                const A mt = P.rms ? (A)0 : P.mean[r];
                const A xh = (tsc_load_acc(P.x[r * n + col]) - mt) * P.rstd[r];
                sw += (double)(d * xh);
            }
            sb += (double)d;
        }
    shw[threadIdx.y][threadIdx.x] = sw;
    shb[threadIdx.y][threadIdx.x] = sb;
    __syncthreads();
    if (threadIdx.y != 0 || col >= n) return;
    for (int k = 1; k < LN_PART_ROWS; k++) sw += shw[k][threadIdx.x], sb += shb[k][threadIdx.x];
    if (pw) pw[part * n + col] = sw;
    if (pb) pb[part * n + col] = sb;
}

/* dweight[j] (dbias[j]) = the runs' partial sums, rounded once (halves through float, as a cast
 * from double does). Block (x: 32 columns, y: LN_PART_ROWS threads): thread y adds runs y, y + 8,
 * ... in order, then the 8 sums are added in y order: a fixed order, whatever the scheduling, and
 * 8 independent chains of loads instead of one per column. */
template <typename T>
__global__ void ln_param_combine_kernel(const double *pw, const double *pb, T *dw, T *db, int64_t n,
                                        int64_t parts) {
    typedef typename tsc_acc<T>::type A;
    __shared__ double shw[LN_PART_ROWS][LN_PART_COLS], shb[LN_PART_ROWS][LN_PART_COLS];
    const int64_t j = (int64_t)blockIdx.x * LN_PART_COLS + threadIdx.x;
    double sw = 0, sb = 0;
    if (j < n)
        for (int64_t k = threadIdx.y; k < parts; k += LN_PART_ROWS) {
            if (pw) sw += pw[k * n + j];
            if (pb) sb += pb[k * n + j];
        }
    shw[threadIdx.y][threadIdx.x] = sw;
    shb[threadIdx.y][threadIdx.x] = sb;
    __syncthreads();
    if (threadIdx.y != 0 || j >= n) return;
    for (int k = 1; k < LN_PART_ROWS; k++) sw += shw[k][threadIdx.x], sb += shb[k][threadIdx.x];
    if (dw) dw[j] = tsc_from_acc<T>((A)sw);
    if (db) db[j] = tsc_from_acc<T>((A)sb);
}

/* Whether the rows can be read and written a 16-byte vector at a time: the row length a multiple
 * of the vector and every pointer the kernel touches 16-byte aligned (NULL ones are not). */
static bool ln_aligned(int64_t cols, size_t elem, const void *const *ptrs, int n) {
    if ((cols * (int64_t)elem) % 16 != 0) return false;
    for (int i = 0; i < n; i++)
        if ((uintptr_t)ptrs[i] % 16 != 0) return false;
    return true;
}

/* Launches KERNEL<T, N, BLOCK>(P) with N a 16-byte vector where the rows allow it, else 1, and a
 * warp (or a block) per row. */
#define LN_LAUNCH_ROWS(KERNEL, T, P, vec, index)                                                   \
    do {                                                                                           \
        const bool block_ = (P).cols > LN_WARP_MAX_COLS;                                           \
        const int64_t items_ = (P).rows * (block_ ? LN_BLOCK : 32);                                \
        const unsigned grid_ = tsc_grid_size(index, items_, LN_BLOCK);                             \
        cudaStream_t st_ = tsc_stream(index);                                                      \
        constexpr int V_ = 16 / (int)sizeof(T);                                                    \
        if (vec && block_)                                                                         \
            KERNEL<T, V_, true><<<grid_, LN_BLOCK, 0, st_>>>(P);                                   \
        else if (vec)                                                                              \
            KERNEL<T, V_, false><<<grid_, LN_BLOCK, 0, st_>>>(P);                                  \
        else if (block_)                                                                           \
            KERNEL<T, 1, true><<<grid_, LN_BLOCK, 0, st_>>>(P);                                    \
        else                                                                                       \
            KERNEL<T, 1, false><<<grid_, LN_BLOCK, 0, st_>>>(P);                                   \
    } while (0)

template <typename T> void ln_forward(int index, const ts_layer_norm_args *a) {
    LnRows<T> P = ln_rows<T>(a);
    /* the vector width from the tensors the unfused kernel would see (h as x), so the row's sums
     * run in its order and give its bits; x and residual are read a vector at a time only when
     * they allow it too (element by element otherwise, into the same threads' elements) */
    const void *ptrs[] = {P.res ? P.h : P.x, P.w, P.b, P.y};
    const bool vec = ln_aligned(P.cols, sizeof(T), ptrs, 4);
    const void *in[] = {P.x, P.res};
    P.res_vec = P.res && ln_aligned(P.cols, sizeof(T), in, 2);
    LN_LAUNCH_ROWS(ln_forward_kernel, T, P, vec, index);
    tsc_launch_check("layer_norm_forward", index);
}

/* The workspace: parts * cols doubles for dweight's partial sums, then as many for dbias's (each
 * only when wanted). */
static size_t ln_workspace_bytes(const ts_layer_norm_args *a) {
    const int64_t k = (a->dweight.data != NULL) + (a->dbias.data != NULL);
    return (size_t)(k * ln_parts(a->rows, a->cols) * a->cols) * sizeof(double);
}

template <typename T> void ln_backward(int index, const ts_layer_norm_args *a, void *ws) {
    const LnRows<T> P = ln_rows<T>(a);
    if (P.dx) {
        const void *ptrs[] = {P.x, P.w, P.dy, P.dx};
        const bool vec = ln_aligned(P.cols, sizeof(T), ptrs, 4);
        LN_LAUNCH_ROWS(ln_backward_dx_kernel, T, P, vec, index);
        if (!tsc_launch_check("layer_norm_backward", index)) return;
    }
    T *dw = (T *)a->dweight.data, *db = (T *)a->dbias.data;
    if (!dw && !db) return;
    const int64_t parts = ln_parts(P.rows, P.cols);
    double *pw = dw ? (double *)ws : NULL;
    double *pb = db ? (double *)ws + (dw ? parts * P.cols : 0) : NULL;
    cudaStream_t st = tsc_stream(index);
    const dim3 grid((unsigned)((P.cols + LN_PART_COLS - 1) / LN_PART_COLS), (unsigned)parts);
    ln_param_partials_kernel<T>
        <<<grid, dim3(LN_PART_COLS, LN_PART_ROWS), 0, st>>>(P, pw, pb, parts);
    if (!tsc_launch_check("layer_norm_backward_params", index)) return;
    ln_param_combine_kernel<T>
        <<<grid.x, dim3(LN_PART_COLS, LN_PART_ROWS), 0, st>>>(pw, pb, dw, db, P.cols, parts);
    tsc_launch_check("layer_norm_backward_params", index);
}

} /* namespace */

bool tsc_layer_norm_supports(const ts_backend *be, int index, const ts_layer_norm_args *a) {
    (void)be, (void)index;
    const ts_dtype dt = a->x.dtype;
    return (dt == TS_F32 || dt == TS_F64 || dt == TS_F16 || dt == TS_BF16) && a->rows >= 1 &&
           a->cols >= 1 && (a->cols + LN_PART_COLS - 1) / LN_PART_COLS <= 0x7fffffff;
}

size_t tsc_layer_norm_workspace(const ts_backend *be, int index, const ts_layer_norm_args *a) {
    (void)be, (void)index;
    return ln_workspace_bytes(a);
}

void tsc_layer_norm_forward(const ts_backend *be, int index, const ts_layer_norm_args *a) {
    (void)be;
    if (a->rows < 1 || a->cols < 1 || !tsc_begin(index)) return;
    TSC_FLOAT_SWITCH(a->x.dtype, T, ln_forward<T>(index, a))
}

void tsc_layer_norm_backward(const ts_backend *be, int index, const ts_layer_norm_args *a,
                             void *ws) {
    (void)be;
    if (a->rows < 1 || a->cols < 1 || !tsc_begin(index)) return;
    TSC_FLOAT_SWITCH(a->x.dtype, T, ln_backward<T>(index, a, ws))
}
