/* cuda_compute.h — what the CUDA compute-kernel files (reduce, matmul, conv, pool, index, softmax,
 * optim, amp) share: element types and conversions, strided offsets, launch helpers, and the entry
 * points that cuda_compute.cu installs. Compiled by nvcc as C++17; no C++ runtime (no new, no
 * exceptions, no std::), so the library still links as plain C. */
#ifndef TS_CUDA_COMPUTE_H
#define TS_CUDA_COMPUTE_H

#include <stdint.h>

#include "backend/cuda/cuda_dtype.cuh"
#include "backend/cuda/cuda_internal.h"
#include "backend/kernel_math.h"

/* ------------------------------------------------------------------ element types
 * tsc_f16, tsc_bf16, tsc_b8 (tag types: f16 and bf16 share a bit width, bool loads as x != 0) and
 * tsc_dtype_size come from cuda_dtype.cuh, shared with the elementwise kernels; conversions go
 * through kernel_math.h, which keeps them bit-identical to the CPU backend. */
static inline bool tsc_is_float(ts_dtype dt) {
    return dt == TS_F32 || dt == TS_F64 || dt == TS_F16 || dt == TS_BF16;
}

/* host and device, inline: these also run on the host in tests (cuda_emulation.cu) */
#define TSC_HDI static __host__ __device__ __forceinline__

/* loads: to float (f32/f16/bf16 compute), double (reductions of every float dtype, and integers
 * where the CPU uses double), int64 (integer accumulation) */
TSC_HDI float tsc_to_float(float v) { return v; }
TSC_HDI float tsc_to_float(double v) { return (float)v; }
TSC_HDI float tsc_to_float(tsc_f16 v) { return ts_f16_to_f32(v.bits); }
TSC_HDI float tsc_to_float(tsc_bf16 v) { return ts_bf16_to_f32(v.bits); }

TSC_HDI double tsc_to_double(float v) { return v; }
TSC_HDI double tsc_to_double(double v) { return v; }
TSC_HDI double tsc_to_double(tsc_f16 v) { return ts_f16_to_f32(v.bits); }
TSC_HDI double tsc_to_double(tsc_bf16 v) { return ts_bf16_to_f32(v.bits); }
TSC_HDI double tsc_to_double(int64_t v) { return (double)v; }
TSC_HDI double tsc_to_double(int32_t v) { return (double)v; }
TSC_HDI double tsc_to_double(uint8_t v) { return (double)v; }
TSC_HDI double tsc_to_double(tsc_b8 v) { return v.v != 0 ? 1.0 : 0.0; }
TSC_HDI double tsc_to_double(int8_t v) { return (double)v; }
TSC_HDI double tsc_to_double(int16_t v) { return (double)v; }
TSC_HDI double tsc_to_double(uint16_t v) { return (double)v; }
TSC_HDI double tsc_to_double(uint32_t v) { return (double)v; }
TSC_HDI double tsc_to_double(uint64_t v) { return (double)v; }

TSC_HDI int64_t tsc_to_i64(int64_t v) { return v; }
TSC_HDI int64_t tsc_to_i64(int32_t v) { return v; }
TSC_HDI int64_t tsc_to_i64(uint8_t v) { return v; }
TSC_HDI int64_t tsc_to_i64(tsc_b8 v) { return v.v != 0; }
TSC_HDI int64_t tsc_to_i64(int8_t v) { return v; }
TSC_HDI int64_t tsc_to_i64(int16_t v) { return v; }
TSC_HDI int64_t tsc_to_i64(uint16_t v) { return v; }
TSC_HDI int64_t tsc_to_i64(uint32_t v) { return v; }
TSC_HDI int64_t tsc_to_i64(uint64_t v) { return (int64_t)v; } /* the bits */

/* The compute type of a float storage type: double for f64, float otherwise. */
template <typename T> struct tsc_acc { typedef float type; };
template <> struct tsc_acc<double> { typedef double type; };

TSC_HDI float tsc_load_acc(float v) { return v; }
TSC_HDI double tsc_load_acc(double v) { return v; }
TSC_HDI float tsc_load_acc(tsc_f16 v) { return ts_f16_to_f32(v.bits); }
TSC_HDI float tsc_load_acc(tsc_bf16 v) { return ts_bf16_to_f32(v.bits); }

/* stores from the compute type back to a float storage type (round to nearest even) */
template <typename T>
__host__ __device__ __forceinline__ T tsc_from_acc(typename tsc_acc<T>::type v);
template <> __host__ __device__ __forceinline__ float tsc_from_acc<float>(float v) { return v; }
template <> __host__ __device__ __forceinline__ double tsc_from_acc<double>(double v) { return v; }
template <> __host__ __device__ __forceinline__ tsc_f16 tsc_from_acc<tsc_f16>(float v) {
    tsc_f16 r;
    r.bits = ts_f32_to_f16(v);
    return r;
}
template <> __host__ __device__ __forceinline__ tsc_bf16 tsc_from_acc<tsc_bf16>(float v) {
    tsc_bf16 r;
    r.bits = ts_f32_to_bf16(v);
    return r;
}

/* Stores a double / int64 into an element of any dtype, with the CPU backend's conversions
 * (kern_reduce_state.c): float->int through ts_d2i64 & co., bool as != 0. */
TSC_HDI void tsc_store_double(char *p, ts_dtype dt, double v) { tsc_store_as(p, dt, v); }

TSC_HDI void tsc_store_i64(char *p, ts_dtype dt, int64_t v) { tsc_store_as(p, dt, v); }

/* Runs BODY with T bound to the storage type of a float dtype (f32, f64, f16, bf16). */
#define TSC_FLOAT_SWITCH(dt, T, ...)                                                               \
    switch (dt) {                                                                                  \
    case TS_F32: {                                                                                 \
        typedef float T;                                                                           \
        __VA_ARGS__;                                                                               \
    } break;                                                                                       \
    case TS_F64: {                                                                                 \
        typedef double T;                                                                          \
        __VA_ARGS__;                                                                               \
    } break;                                                                                       \
    case TS_F16: {                                                                                 \
        typedef tsc_f16 T;                                                                         \
        __VA_ARGS__;                                                                               \
    } break;                                                                                       \
    case TS_BF16: {                                                                                \
        typedef tsc_bf16 T;                                                                        \
        __VA_ARGS__;                                                                               \
    } break;                                                                                       \
    default:                                                                                       \
        break;                                                                                     \
    }

/* ------------------------------------------------------------------ strided offsets */
/* Up to TS_MAX_DIMS dims with the strides of one or two views: offsets of a row-major linear
 * index. Passed to kernels by value. */
typedef struct tsc_dims {
    int nd;
    int64_t shape[TS_MAX_DIMS];
    int64_t s0[TS_MAX_DIMS], s1[TS_MAX_DIMS];
} tsc_dims;

TSC_HDI int64_t tsc_offset(const tsc_dims &d, int64_t lin) {
    int64_t off = 0;
    for (int k = d.nd - 1; k >= 0; k--) {
        const int64_t n = d.shape[k];
        off += (lin % n) * d.s0[k];
        lin /= n;
    }
    return off;
}

TSC_HDI void tsc_offset2(const tsc_dims &d, int64_t lin, int64_t *o0, int64_t *o1) {
    int64_t a = 0, b = 0;
    for (int k = d.nd - 1; k >= 0; k--) {
        const int64_t n = d.shape[k], i = lin % n;
        lin /= n;
        a += i * d.s0[k];
        b += i * d.s1[k];
    }
    *o0 = a;
    *o1 = b;
}

/* Drops size-1 dims and merges neighbours that are contiguous in both stride sets, keeping
 * row-major linear indices; an empty shape gives one dim of size 0, a 0-dim one a dim of 1.
 * s1 may be NULL (one view). */
tsc_dims tsc_coalesce(int nd, const int64_t *shape, const int64_t *s0, const int64_t *s1);

static inline int64_t tsc_numel(const ts_kview *v) {
    int64_t n = 1;
    for (int d = 0; d < v->ndim; d++) n *= v->shape[d];
    return n;
}

static inline bool tsc_is_contiguous(const ts_kview *v) {
    int64_t expect = 1;
    for (int d = v->ndim - 1; d >= 0; d--) {
        if (v->shape[d] != 1 && v->strides[d] != expect) return false;
        expect *= v->shape[d];
    }
    return true;
}

/* ------------------------------------------------------------------ launches */
#define TSC_THREADS 256
/* Grids are capped (kernels loop with a grid stride), which keeps huge tensors within the grid
 * limits and bounds the block count of a launch. */
#define TSC_MAX_BLOCKS (1 << 20)

static inline unsigned tsc_grid(int64_t work, int threads) {
    int64_t b = (work + threads - 1) / threads;
    if (b < 1) b = 1;
    return (unsigned)(b > TSC_MAX_BLOCKS ? TSC_MAX_BLOCKS : b);
}

/* Makes `index` current; false (error recorded) when that fails. */
static inline bool tsc_begin(int index) { return tsc_set_device(index); }

/* ------------------------------------------------------------------ entry points */
#ifdef __cplusplus
extern "C" {
#endif

void tsc_reduce(const ts_backend *be, int index, ts_reduce_op op, const ts_kview *out,
                const ts_kview *in, int nred, double param);
/* cuda_scan.cu */
void tsc_scan(const ts_backend *be, int index, ts_scan_op op, const ts_kview *out,
              const ts_kview *idx, const ts_kview *in, int dim);
void tsc_matmul(const ts_backend *be, int index, const ts_kview *out, const ts_kview *a,
                const ts_kview *b);
/* cuda_matmul_lt.cu: linear's GEMMs with cuBLASLt's bias, bias-gradient and activation epilogues */
void tsc_matmul_bias(const ts_backend *be, int index, const ts_kview *out, const ts_kview *a,
                     const ts_kview *b, const ts_kview *bias);
bool tsc_matmul_bgrad(const ts_backend *be, int index, const ts_kview *dw, const ts_kview *db,
                      const ts_kview *g, const ts_kview *x);
bool tsc_matmul_bias_act(const ts_backend *be, int index, ts_epi_act act, const ts_kview *out,
                         const ts_kview *a, const ts_kview *b, const ts_kview *bias,
                         const ts_epi_aux *aux);
bool tsc_matmul_dact_bgrad(const ts_backend *be, int index, ts_epi_act act, const ts_kview *dz,
                           const ts_kview *db, const ts_kview *g, const ts_kview *w,
                           const ts_epi_aux *aux);
/* cuda_embedding_bag.cu */
void tsc_embedding_bag(const ts_backend *be, int index, const ts_kview *out, const ts_bag_args *a);
/* cuda_roi.cu, cuda_nms.cu: torchvision.ops' roi_align, roi_pool and nms */
void tsc_roi_align(const ts_backend *be, int index, const ts_roi_args *a, bool backward);
void tsc_roi_pool(const ts_backend *be, int index, const ts_roi_args *a, bool backward);
bool tsc_nms(const ts_backend *be, int index, const ts_kview *keep, const ts_kview *boxes,
             const ts_kview *cls, double iou_threshold);
/* cuda_quant.cu: quantize / dequantize / fake quantize, and the int8 linear layer */
void tsc_quant(const ts_backend *be, int index, const ts_quant_args *a);
bool tsc_qlinear(const ts_backend *be, int index, const ts_qlinear_args *a);
bool tsc_wo_linear(const ts_backend *be, int index, const ts_wo_args *a);
/* cuda_cdist.cu */
void tsc_cdist(const ts_backend *be, int index, const ts_kview *out, const ts_kview *x1,
               const ts_kview *x2, double p);
void tsc_gather_dims(const ts_backend *be, int index, const ts_kview *out, const ts_kview *in,
                     int k, const ts_kview *idx);
/* cuda_rnn_cell.cu */
void tsc_rnn_cell_forward(const ts_backend *be, int index, const ts_rnn_cell_args *a);
void tsc_rnn_cell_backward(const ts_backend *be, int index, const ts_rnn_cell_args *a);
void tsc_index_select(const ts_backend *be, int index, const ts_kview *out, const ts_kview *in,
                      int dim, const ts_kview *idx);
void tsc_gather(const ts_backend *be, int index, const ts_kview *out, const ts_kview *in, int dim,
                const ts_kview *idx);
void tsc_scatter_add(const ts_backend *be, int index, const ts_kview *dst, int dim,
                     const ts_kview *idx, const ts_kview *src);
void tsc_softmax(const ts_backend *be, int index, const ts_kview *out, const ts_kview *in, int dim,
                 bool log);
bool tsc_softmax_backward(const ts_backend *be, int index, const ts_kview *gx, const ts_kview *y,
                          const ts_kview *g, int dim, bool log);
void tsc_conv2d(const ts_backend *be, int index, const ts_kview *out, const ts_kview *x,
                const ts_kview *w, const ts_kview *bias, const ts_conv2d_params *p);
void tsc_conv2d_backward_data(const ts_backend *be, int index, const ts_kview *gx,
                              const ts_kview *gout, const ts_kview *w, const ts_conv2d_params *p);
void tsc_conv2d_backward_weight(const ts_backend *be, int index, const ts_kview *gw,
                                const ts_kview *gout, const ts_kview *x, const ts_conv2d_params *p);
bool tsc_conv2d_channels_last(const ts_backend *be, int index, ts_dtype dt);
void tsc_pool2d(const ts_backend *be, int index, const ts_kview *out, const ts_kview *x,
                const ts_kview *indices, const ts_pool2d_params *p);
void tsc_pool2d_backward(const ts_backend *be, int index, const ts_kview *gx, const ts_kview *gout,
                         const ts_kview *indices, const ts_pool2d_params *p);
void tsc_optim_step(const ts_backend *be, int index, const struct ts_optim_step_args *args);
bool tsc_sdpa_supports(const ts_backend *be, int index, const ts_sdpa_args *a);
size_t tsc_sdpa_workspace(const ts_backend *be, int index, ts_sdpa_args *a, bool backward);
void tsc_sdpa_forward(const ts_backend *be, int index, const ts_sdpa_args *a, void *ws);
void tsc_sdpa_backward(const ts_backend *be, int index, const ts_sdpa_args *a, void *ws);
void tsc_cross_entropy_forward(const ts_backend *be, int index, const ts_cross_entropy_args *a);
void tsc_cross_entropy_backward(const ts_backend *be, int index, const ts_cross_entropy_args *a);
bool tsc_batch_norm_supports(const ts_backend *be, int index, const ts_batch_norm_args *a);
void tsc_batch_norm_forward(const ts_backend *be, int index, const ts_batch_norm_args *a);
void tsc_batch_norm_backward(const ts_backend *be, int index, const ts_batch_norm_args *a);
bool tsc_layer_norm_supports(const ts_backend *be, int index, const ts_layer_norm_args *a);
size_t tsc_layer_norm_workspace(const ts_backend *be, int index, const ts_layer_norm_args *a);
void tsc_layer_norm_forward(const ts_backend *be, int index, const ts_layer_norm_args *a);
void tsc_layer_norm_backward(const ts_backend *be, int index, const ts_layer_norm_args *a,
                             void *ws);
void tsc_amp_unscale(const ts_backend *be, int index, const ts_kview *grads, int n,
                     const ts_kview *found_inf, const ts_kview *inv_scale);
void tsc_amp_update_scale(const ts_backend *be, int index, const ts_kview *scale,
                          const ts_kview *growth_tracker, const ts_kview *found_inf,
                          double growth_factor, double backoff_factor, int growth_interval);

#ifdef __cplusplus
}
#endif

#endif /* TS_CUDA_COMPUTE_H */
