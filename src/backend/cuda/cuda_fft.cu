/* cuda_fft.cu — the fft slot (backend.h) on CUDA through cuFFT: one batched plan (cufftPlanMany
 * over 64-bit sizes) for all the lines along dim, on the backend's stream, its work area from the
 * caching allocator. Lines that are not contiguous rows (dim not last, strides with gaps, a
 * misaligned start) are first gathered into contiguous scratch by a small kernel, and written
 * back, scaled, by the same kernel; C2R always goes through a copy (cuFFT overwrites a C2R
 * input), in which the imaginary parts of bin 0 and bin n / 2 are zeroed (the slot ignores them).
 * Idle plans are kept in a small pool keyed by (device, n, batch, type), taken out while in use so
 * that no two threads share one. */
#include <pthread.h>

#include "backend/cuda/cuda_compute.h"
#include "backend/cuda/cuda_fft.h"

/* after kernel_math.h (as cuda_matmul.cu does with cublas_v2.h) */
#include <cufft.h>

namespace {

/* ------------------------------------------------------------------ plans */
#define FFT_POOL 8 /* idle plans kept, all devices together */

struct FftKey {
    int device;
    long long n, batch;
    cufftType type;
};

struct FftPlan {
    FftKey key;
    cufftHandle h;
    size_t ws; /* work area bytes */
};

static pthread_mutex_t g_fft_lock = PTHREAD_MUTEX_INITIALIZER;
static FftPlan g_fft_idle[FFT_POOL]; /* oldest first */
static int g_fft_nidle;

static const char *fft_status_name(cufftResult r) {
    switch (r) {
    case CUFFT_INVALID_PLAN:
        return "CUFFT_INVALID_PLAN";
    case CUFFT_ALLOC_FAILED:
        return "CUFFT_ALLOC_FAILED";
    case CUFFT_INVALID_VALUE:
        return "CUFFT_INVALID_VALUE";
    case CUFFT_INTERNAL_ERROR:
        return "CUFFT_INTERNAL_ERROR";
    case CUFFT_EXEC_FAILED:
        return "CUFFT_EXEC_FAILED";
    case CUFFT_SETUP_FAILED:
        return "CUFFT_SETUP_FAILED";
    case CUFFT_INVALID_SIZE:
        return "CUFFT_INVALID_SIZE";
    case CUFFT_NOT_SUPPORTED:
        return "CUFFT_NOT_SUPPORTED";
    default:
        return "cuFFT error";
    }
}

static bool fft_ok(cufftResult r, const char *what, int index) {
    if (r == CUFFT_SUCCESS) return true;
    tsi_error_set(TS_ERR_CUDA, "fft: cuFFT %s: %s (%d) (cuda:%d)", what, fft_status_name(r), (int)r,
                  index);
    return false;
}

static bool key_eq(const FftKey &a, const FftKey &b) {
    return a.device == b.device && a.n == b.n && a.batch == b.batch && a.type == b.type;
}

/* An idle plan for key, or a new one (made current device: the caller's). *oom: plan creation ran
 * out of memory (the slot's false). */
static bool plan_acquire(const FftKey &key, FftPlan *out, bool *oom) {
    *oom = false;
    pthread_mutex_lock(&g_fft_lock);
    for (int i = g_fft_nidle - 1; i >= 0; i--)
        if (key_eq(g_fft_idle[i].key, key)) {
            *out = g_fft_idle[i];
            for (int j = i; j + 1 < g_fft_nidle; j++) g_fft_idle[j] = g_fft_idle[j + 1];
            g_fft_nidle--;
            pthread_mutex_unlock(&g_fft_lock);
            return true;
        }
    pthread_mutex_unlock(&g_fft_lock);
    out->key = key;
    if (!fft_ok(cufftCreate(&out->h), "plan", key.device)) return false;
    long long n = key.n;
    cufftResult r = cufftSetAutoAllocation(out->h, 0);
    if (r == CUFFT_SUCCESS)
        r = cufftMakePlanMany64(out->h, 1, &n, NULL, 1, n, NULL, 1, n, key.type, key.batch,
                                &out->ws);
    if (r != CUFFT_SUCCESS) {
        *oom = r == CUFFT_ALLOC_FAILED;
        if (*oom)
            tsi_error_set(TS_ERR_OOM, "fft: cuFFT could not allocate a plan (cuda:%d)", key.device);
        else
            fft_ok(r, "plan", key.device);
        cufftDestroy(out->h);
        return false;
    }
    return true;
}

static void plan_release(const FftPlan &p) {
    FftPlan drop;
    bool evict = false;
    pthread_mutex_lock(&g_fft_lock);
    if (g_fft_nidle == FFT_POOL) {
        drop = g_fft_idle[0];
        evict = true;
        for (int j = 0; j + 1 < g_fft_nidle; j++) g_fft_idle[j] = g_fft_idle[j + 1];
        g_fft_nidle--;
    }
    g_fft_idle[g_fft_nidle++] = p;
    pthread_mutex_unlock(&g_fft_lock);
    if (evict) cufftDestroy(drop.h);
}

/* ------------------------------------------------------------------ strided lines */
/* Lines of cnt elements: line l's element j at offset(l) + j * sd (elements of W scalars), l
 * unravelled over shape[0..nd) row-major with strides so. */
struct FftLines {
    int nd;
    int64_t sd;
    int64_t shape[TS_MAX_DIMS], so[TS_MAX_DIMS];
};

__device__ __forceinline__ int64_t line_at(const FftLines &L, int64_t l) {
    int64_t off = 0;
    for (int d = L.nd - 1; d >= 0; d--) {
        off += l % L.shape[d] * L.so[d];
        l /= L.shape[d];
    }
    return off;
}

/* dst line element = scale * src line element; zero_at >= 0 (complex): the imaginary parts of
 * elements 0 and zero_at are written as 0 */
template <typename T, int W>
__global__ void fft_copy_kernel(T *dst, FftLines dl, const T *src, FftLines sl, int64_t lines,
                                int64_t cnt, T scale, int64_t zero_at) {
    const int64_t total = lines * cnt;
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < total;
         e += (int64_t)gridDim.x * blockDim.x) {
        const int64_t l = e / cnt, j = e % cnt;
        const int64_t d = (line_at(dl, l) + j * dl.sd) * W, s = (line_at(sl, l) + j * sl.sd) * W;
        dst[d] = scale * src[s];
        if (W == 2)
            dst[d + 1] = zero_at >= 0 && (j == 0 || j == zero_at) ? T(0) : scale * src[s + 1];
    }
}

/* n == 1 (the transform is the identity): out = scale * in, a real input's imaginary part 0, a
 * real output's the real part */
template <typename T>
__global__ void fft_len1_kernel(T *dst, FftLines dl, int wout, const T *src, FftLines sl, int win,
                                int64_t lines, T scale) {
    for (int64_t l = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; l < lines;
         l += (int64_t)gridDim.x * blockDim.x) {
        const T *s = src + line_at(sl, l) * win;
        T *d = dst + line_at(dl, l) * wout;
        d[0] = scale * s[0];
        if (wout == 2) d[1] = win == 2 ? scale * s[1] : T(0);
    }
}

template <typename T> __global__ void fft_scale_kernel(T *p, int64_t count, T scale) {
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < count;
         e += (int64_t)gridDim.x * blockDim.x)
        p[e] *= scale;
}

/* the lines of view v along dim (cnt elements each) */
static FftLines lines_of(const ts_kview *v, int dim) {
    FftLines L;
    L.nd = 0, L.sd = v->strides[dim];
    for (int d = 0; d < v->ndim; d++)
        if (d != dim) L.shape[L.nd] = v->shape[d], L.so[L.nd] = v->strides[d], L.nd++;
    if (L.nd == 0) L.shape[0] = 1, L.so[0] = 0, L.nd = 1;
    return L;
}

/* contiguous [lines, cnt] */
static FftLines dense_lines(int64_t lines, int64_t cnt) {
    FftLines L;
    L.nd = 1, L.sd = 1, L.shape[0] = lines, L.so[0] = cnt;
    return L;
}

/* v's lines along dim are the rows of a contiguous [lines, cnt] block at an address cuFFT takes */
static bool dense_rows(const ts_kview *v, int dim, size_t align) {
    if (((uintptr_t)v->data & (align - 1)) != 0) return false;
    if (v->shape[dim] != 1 && v->strides[dim] != 1) return false;
    int64_t expect = v->shape[dim];
    for (int d = v->ndim - 1; d >= 0; d--) {
        if (d == dim) continue;
        if (v->shape[d] != 1 && v->strides[d] != expect) return false;
        expect *= v->shape[d];
    }
    return true;
}

template <typename T, int W>
static bool copy_lines(int index, T *dst, const FftLines &dl, const T *src, const FftLines &sl,
                       int64_t lines, int64_t cnt, double scale, int64_t zero_at) {
    fft_copy_kernel<T, W>
        <<<tsc_grid(lines * cnt, TSC_THREADS), TSC_THREADS, 0, tsc_stream(index)>>>(
            dst, dl, src, sl, lines, cnt, (T)scale, zero_at);
    return tsc_launch_check("fft", index);
}

template <typename T>
static bool copy_any(int index, int w, char *dst, const FftLines &dl, const char *src,
                     const FftLines &sl, int64_t lines, int64_t cnt, double scale,
                     int64_t zero_at) {
    if (w == 2)
        return copy_lines<T, 2>(index, (T *)dst, dl, (const T *)src, sl, lines, cnt, scale,
                                zero_at);
    return copy_lines<T, 1>(index, (T *)dst, dl, (const T *)src, sl, lines, cnt, scale, -1);
}

static cufftType type_of(ts_fft_kind kind, bool dbl) {
    switch (kind) {
    case TS_FFT_R2C:
        return dbl ? CUFFT_D2Z : CUFFT_R2C;
    case TS_FFT_C2R:
        return dbl ? CUFFT_Z2D : CUFFT_C2R;
    default:
        return dbl ? CUFFT_Z2Z : CUFFT_C2C;
    }
}

static cufftResult exec(const FftPlan &p, void *in, void *out, bool forward) {
    const int dir = forward ? CUFFT_FORWARD : CUFFT_INVERSE;
    switch (p.key.type) {
    case CUFFT_C2C:
        return cufftExecC2C(p.h, (cufftComplex *)in, (cufftComplex *)out, dir);
    case CUFFT_Z2Z:
        return cufftExecZ2Z(p.h, (cufftDoubleComplex *)in, (cufftDoubleComplex *)out, dir);
    case CUFFT_R2C:
        return cufftExecR2C(p.h, (cufftReal *)in, (cufftComplex *)out);
    case CUFFT_D2Z:
        return cufftExecD2Z(p.h, (cufftDoubleReal *)in, (cufftDoubleComplex *)out);
    case CUFFT_C2R:
        return cufftExecC2R(p.h, (cufftComplex *)in, (cufftReal *)out);
    default:
        return cufftExecZ2D(p.h, (cufftDoubleComplex *)in, (cufftDoubleReal *)out);
    }
}

} /* namespace */

bool tsc_fft(const ts_backend *be, int index, const ts_kview *out, const ts_kview *in, int dim,
             ts_fft_kind kind, bool forward, double scale) {
    (void)be;
    const bool dbl = kind == TS_FFT_R2C ? in->dtype == TS_F64 : in->dtype == TS_C128;
    const int win = kind == TS_FFT_R2C ? 1 : 2, wout = kind == TS_FFT_C2R ? 1 : 2;
    const size_t sc = dbl ? sizeof(double) : sizeof(float);
    const int64_t n = kind == TS_FFT_C2R ? out->shape[dim] : in->shape[dim];
    const int64_t nin = in->shape[dim], nout = out->shape[dim];
    int64_t lines = 1;
    for (int d = 0; d < in->ndim; d++)
        if (d != dim) lines *= in->shape[d];
    if (lines <= 0 || n <= 0) return true;
    if (!tsc_begin(index)) return true;
    if (n == 1) { /* the identity: no plan */
        const FftLines sl = lines_of(in, dim), dl = lines_of(out, dim);
        const unsigned grid = tsc_grid(lines, TSC_THREADS);
        cudaStream_t st = tsc_stream(index);
        if (dbl)
            fft_len1_kernel<double><<<grid, TSC_THREADS, 0, st>>>(
                (double *)out->data, dl, wout, (const double *)in->data, sl, win, lines, scale);
        else
            fft_len1_kernel<float><<<grid, TSC_THREADS, 0, st>>>((float *)out->data, dl, wout,
                                                                 (const float *)in->data, sl, win,
                                                                 lines, (float)scale);
        tsc_launch_check("fft", index);
        return true;
    }
    const bool in_dense = kind != TS_FFT_C2R && dense_rows(in, dim, 2 * sc);
    const bool out_dense = dense_rows(out, dim, 2 * sc);
    const FftKey key = {index, (long long)n, (long long)lines, type_of(kind, dbl)};
    FftPlan plan;
    bool oom;
    if (!plan_acquire(key, &plan, &oom)) return !oom;
    const size_t in_bytes = in_dense ? 0 : (size_t)(lines * nin * win) * sc;
    const size_t out_bytes = out_dense ? 0 : (size_t)(lines * nout * wout) * sc;
    /* one block: the gathered input, the output, the work area (each 256-byte aligned) */
    const size_t a_in = (in_bytes + 255) & ~(size_t)255, a_out = (out_bytes + 255) & ~(size_t)255;
    const size_t total = a_in + a_out + plan.ws;
    char *scratch = total ? (char *)tsc_scratch_alloc(index, total) : NULL;
    if (total && !scratch) {
        plan_release(plan);
        return false;
    }
    char *src = in_dense ? in->data : scratch, *dst = out_dense ? out->data : scratch + a_in;
    bool ok = true;
    if (!in_dense) {
        const FftLines sl = lines_of(in, dim), dl = dense_lines(lines, nin);
        const int64_t zero_at = kind == TS_FFT_C2R ? (n % 2 == 0 ? n / 2 : 0) : -1;
        ok = dbl ? copy_any<double>(index, win, src, dl, in->data, sl, lines, nin, 1.0, zero_at)
                 : copy_any<float>(index, win, src, dl, in->data, sl, lines, nin, 1.0, zero_at);
    }
    if (ok && plan.ws)
        ok = fft_ok(cufftSetWorkArea(plan.h, scratch + a_in + a_out), "work area", index);
    if (ok) ok = fft_ok(cufftSetStream(plan.h, tsc_stream(index)), "stream", index);
    if (ok) ok = fft_ok(exec(plan, src, dst, forward), "exec", index);
    if (ok && !out_dense) {
        const FftLines sl = dense_lines(lines, nout), dl = lines_of(out, dim);
        ok = dbl ? copy_any<double>(index, wout, out->data, dl, dst, sl, lines, nout, scale, -1)
                 : copy_any<float>(index, wout, out->data, dl, dst, sl, lines, nout, scale, -1);
    } else if (ok && scale != 1.0) {
        const int64_t count = lines * nout * wout;
        const unsigned grid = tsc_grid(count, TSC_THREADS);
        if (dbl)
            fft_scale_kernel<double>
                <<<grid, TSC_THREADS, 0, tsc_stream(index)>>>((double *)dst, count, scale);
        else
            fft_scale_kernel<float>
                <<<grid, TSC_THREADS, 0, tsc_stream(index)>>>((float *)dst, count, (float)scale);
        tsc_launch_check("fft", index);
    }
    if (scratch) tsc_scratch_free(index, scratch);
    plan_release(plan);
    return true;
}
