/* backend.h — the interface every device backend implements: memory and kernels over raw pointers.
 */
#ifndef TS_BACKEND_H
#define TS_BACKEND_H

#include "tessera.h"

/* the kernels' operands: views, op enumerations, argument structs */
#include "backend/kernel_args.h"
#include "backend/quant_args.h"

struct ts_optim_step_args; /* src/backend/optim_step.h */

typedef struct ts_backend ts_backend;

struct ts_backend {
    const char *name; /* "cpu", "sim", "cuda" */
    ts_device_type type;
    void *ctx;

    /* ---- device queries */
    int (*device_count)(const ts_backend *be);
    /* total and free bytes; free may be an estimate */
    void (*memory_info)(const ts_backend *be, int index, size_t *free_bytes, size_t *total_bytes);

    /* ---- raw memory (the caching allocator sits on top of these) */
    void *(*raw_alloc)(const ts_backend *be, int index, size_t nbytes); /* NULL on failure */
    void (*raw_free)(const ts_backend *be, int index, void *p, size_t nbytes);
    void (*copy_h2d)(const ts_backend *be, int index, void *dst, const void *src, size_t n);
    void (*copy_d2h)(const ts_backend *be, int index, void *dst, const void *src, size_t n);
    /* device -> device on the same backend (possibly different indices) */
    void (*copy_d2d)(const ts_backend *be, int dst_index, void *dst, int src_index, const void *src,
                     size_t n);
    void (*memset_zero)(const ts_backend *be, int index, void *p, size_t n);
    void (*synchronize)(const ts_backend *be, int index);

    /* ---- kernels (all on device `index`; views on that device) */
    /* dst[i] = (dst.dtype) src[i]; same shape; strided; any dtype pair */
    void (*copy)(const ts_backend *be, int index, const ts_kview *dst, const ts_kview *src);
    void (*fill)(const ts_backend *be, int index, const ts_kview *dst, double value);
    /* out = op(a); same shape; a.dtype == out.dtype except TS_U_LOGICAL_NOT (out TS_BOOL) and
     * TS_U_ABS of a complex64 / complex128 a (out float32 / float64: kernel_math_complex.h's
     * ts_cabs_f32 / f64; no other op takes a complex a); float dtypes compute in f32 (f64 for
     * f64); integer dtypes in int64 */
    void (*unary)(const ts_backend *be, int index, ts_unary_op op, const ts_kview *out,
                  const ts_kview *a, double p0, double p1);
    /* out = a op b; a, b already broadcast to out's shape (stride 0) and of one dtype;
     * out.dtype == a.dtype, or TS_BOOL for comparisons and logical ops */
    void (*binary)(const ts_backend *be, int index, ts_binary_op op, const ts_kview *out,
                   const ts_kview *a, const ts_kview *b);
    /* Optional (NULL: the front end casts the operands first): binary with out float32 (the
     * compute dtype too) and a, b each float32, f16 or bf16, a half operand widened as it is read
     * (exactly, so the same bits as the cast): a float32 tensor and a bf16 one (autocast's
     * residual adds) without a float32 copy of the bf16 one. Float results only (no comparisons) */
    void (*binary_widening)(const ts_backend *be, int index, ts_binary_op op, const ts_kview *out,
                            const ts_kview *a, const ts_kview *b);
    /* out = a op s */
    void (*binary_scalar)(const ts_backend *be, int index, ts_binary_op op, const ts_kview *out,
                          const ts_kview *a, double s);
    /* Optional (NULL: the front end composes binary ops): out = op(a, b, c, p); a, b, c and out
     * one floating dtype (f16 / bf16 compute in float), broadcast to out's shape */
    void (*ternary)(const ts_backend *be, int index, ts_ternary_op op, const ts_kview *out,
                    const ts_kview *a, const ts_kview *b, const ts_kview *c, double p);
    /* out = cond ? a : b; cond TS_BOOL; a, b, out one dtype; all broadcast to out's shape */
    void (*where)(const ts_backend *be, int index, const ts_kview *out, const ts_kview *cond,
                  const ts_kview *a, const ts_kview *b);
    /* Reduce the last `nred` dims of `in`; out has in.ndim - nred dims equal to in's leading dims.
     * Floats accumulate in double. out.dtype: float ops keep in's float dtype; SUM/PROD of integer
     * or bool input write TS_I64; ARGMAX/ARGMIN write TS_I64; MAX/MIN keep in.dtype.
     * A reduction over zero elements: SUM 0, PROD 1, MEAN/VAR/STD NaN, LOGSUMEXP -inf
     * (the front end rejects MAX/MIN/ARG* over empty). */
    void (*reduce)(const ts_backend *be, int index, ts_reduce_op op, const ts_kview *out,
                   const ts_kview *in, int nred, double param);
    /* Optional (NULL: the front end refuses, naming the op). The cumulative op along `dim` of
     * views of one shape (dim < ndim, ndim >= 1, any strides, no overlap between out and in):
     * SUM / PROD: out[i] = in[0] op ... op in[i], in converted to out.dtype's accumulation type
     * (floats: double; integers and bool: int64, wrapping) and the running value rounded to
     * out.dtype at each step; MAX / MIN: out of in.dtype (never TS_U64) and idx (TS_I64) the
     * running extreme and its index, a later equal element or a NaN taking over and a NaN staying
     * (PyTorch's cummax / cummin); LOGSUMEXP: floats, log(sum exp) in double as PyTorch's
     * _log_add_exp_helper. idx is NULL for the other ops. */
    void (*scan)(const ts_backend *be, int index, ts_scan_op op, const ts_kview *out,
                 const ts_kview *idx, const ts_kview *in, int dim);
    /* out[b] = op(a[b]) @ op(b[b]); 3-D views [B,M,K] x [B,K,N] -> [B,M,N], any strides (a batch
     * stride may be 0 for broadcast). Same dtype everywhere; f16/bf16 compute in f32. */
    void (*matmul)(const ts_backend *be, int index, const ts_kview *out, const ts_kview *a,
                   const ts_kview *b);
    /* out = a @ b + bias for one product (2-D views [M,K] x [K,N] -> [M,N] in the 3-D form of
     * matmul, batch 1), bias [N] added to every row: the product rounded, then the bias added, as
     * matmul followed by an add (the same bits), in one pass where the library can (oneDNN's bias
     * argument). f32 and f64; f16 / bf16 add the bias to the float32 sums and round once (so do
     * CUDA's every dtype: cuBLASLt's bias epilogue). NULL: the front end adds the bias itself
     * (linear's addmm). */
    void (*matmul_bias)(const ts_backend *be, int index, const ts_kview *out, const ts_kview *a,
                        const ts_kview *b, const ts_kview *bias);
    /* Optional (NULL: the front end composes matmul and reduce). Linear's weight and bias
     * gradients in one call: dw [N, K] = g^T @ x and db [N] = the sums of g's columns (over its M
     * rows), for g [M, N] and x [M, K] (2-D views, any strides; dw and db contiguous; one float
     * dtype; M, N, K >= 1). Returns true when done; false, having written nothing, where it
     * declines those views (the front end then composes) — a decision made from the views alone.
     * cuda: cuBLASLt's weight-gradient GEMM with the bias-gradient epilogue (BGRADB). */
    bool (*matmul_bgrad)(const ts_backend *be, int index, const ts_kview *dw, const ts_kview *db,
                         const ts_kview *g, const ts_kview *x);
    /* Optional (NULL: the front end composes linear and the activation). out = act(a @ b + bias)
     * with matmul_bias's views (f32, f64, f16, bf16; M, N, K >= 1), the activation applied as the
     * output is stored (decision 0032): ts_relu's or ts_gelu_tanh's (never the erf GELU). aux
     * NULL, or its data set: the activation's saved state for training (ts_epi_aux). Returns
     * true when done; false, having written nothing, where it declines (the front end then
     * composes) — a decision made from the arguments alone. cuda: cuBLASLt's RELU_BIAS /
     * GELU_BIAS epilogues, RELU_AUX_BIAS / GELU_AUX_BIAS with aux. */
    bool (*matmul_bias_act)(const ts_backend *be, int index, ts_epi_act act, const ts_kview *out,
                            const ts_kview *a, const ts_kview *b, const ts_kview *bias,
                            const ts_epi_aux *aux);
    /* Optional (NULL: the front end composes matmul, the activation's gradient and reduce). The
     * backward through matmul_bias_act's activation fused with the next layer's input-gradient
     * GEMM (decision 0032): dz [M, N1] = (g [M, N2] @ w [N2, N1]) * act'(z), act' read from aux as
     * matmul_bias_act wrote it for z [M, N1] (relu: the bit mask; gelu_tanh: the pre-activation),
     * and db [N1] = the sums of dz's columns. g and w 2-D views (any strides), dz [M, N1] and db
     * [N1] contiguous, one float dtype; M, N1, N2 >= 1. Returns true when done; false, having
     * written nothing, where it declines (the front end then composes) — a decision made from the
     * arguments alone. cuda: cuBLASLt's DRELU_BGRAD / DGELU_BGRAD epilogues. */
    bool (*matmul_dact_bgrad)(const ts_backend *be, int index, ts_epi_act act, const ts_kview *dz,
                              const ts_kview *db, const ts_kview *g, const ts_kview *w,
                              const ts_epi_aux *aux);
    /* Optional (NULL: they are): whether matmul multiplies operands of the half dtype dt (TS_F16,
     * TS_BF16) in that dtype's own instructions, rather than widening them to float32 and running
     * the float32 kernels. Where it does not, autocast gives the products float32 operands and
     * rounds their results (amp/autocast_policy.c's TSI_AC_LOWER_PRODUCT): the same float32
     * kernels without the operands' conversions (the CPU without AVX512-BF16; f16 on any CPU). */
    bool (*half_products_native)(const ts_backend *be, int index, ts_dtype dt);
    /* out = in.index_select(dim, idx); idx 1-D TS_I64 with values already checked in range */
    void (*index_select)(const ts_backend *be, int index, const ts_kview *out, const ts_kview *in,
                         int dim, const ts_kview *idx);
    /* out = in.gather(dim, idx); idx TS_I64 of out's shape, values in range */
    void (*gather)(const ts_backend *be, int index, const ts_kview *out, const ts_kview *in,
                   int dim, const ts_kview *idx);
    /* dst.scatter_add_(dim, idx, src) in place; idx TS_I64 of src's shape (or smaller, PyTorch) */
    void (*scatter_add)(const ts_backend *be, int index, const ts_kview *dst, int dim,
                        const ts_kview *idx, const ts_kview *src);
    /* Optional (NULL: the front end composes). out [B,P,R] (contiguous) = the p-norm distances of
     * the rows of x1 [B,P,M] and x2 [B,R,M] (3-D views of out's float dtype, any strides, a batch
     * stride may be 0): (sum_m |x1[b,i,m] - x2[b,j,m]|^p)^(1/p); p = 0 the count of nonzero
     * differences, p = inf their largest magnitude (NaN propagating). B, P, R, M >= 1, p >= 0.
     * Differences, powers and sums in double (cpu) or at least float (half dtypes). */
    void (*cdist)(const ts_backend *be, int index, const ts_kview *out, const ts_kview *x1,
                  const ts_kview *x2, double p);
    /* Optional (NULL: ts_embedding_bag refuses, TS_ERR_UNSUPPORTED). out [bags, D] contiguous, of
     * weight's dtype (float32 or float64) = each bag's rows of weight reduced (ts_bag_args); an
     * empty bag gives zeros. float32 accumulates in float32 (as PyTorch's cpu kernel). */
    void (*embedding_bag)(const ts_backend *be, int index, const ts_kview *out,
                          const ts_bag_args *a);
    /* Optional (NULL: the front end gathers one dim at a time with index_select). out = in
     * gathered along its last k dims (1 <= k <= 3) at once: out[..., j2, j1, j0] = in[...,
     * idx[2][j2], idx[1][j1], idx[0][j0]], idx[i] (an array of k views) 1-D TS_I64 of out's size
     * along dim ndim - 1 - i, values in range; out contiguous, in any strides, one dtype, both
     * non-empty (pad's reflect, replicate and circular modes). */
    void (*gather_dims)(const ts_backend *be, int index, const ts_kview *out, const ts_kview *in,
                        int k, const ts_kview *idx);
    /* Optional (NULL: the front end refuses the FFTs on the device). One-dimensional discrete
     * Fourier transforms of every line of in along dim into out (same ndim; every other dim
     * equal; any strides; out does not overlap in; no size is 0). n is the transform length:
     *   TS_FFT_C2C: in and out complex of one dtype, shape[dim] n for both;
     *   TS_FFT_R2C: in real (float32 / float64), out the complex dtype of its width, in.shape[dim]
     *               n, out.shape[dim] n / 2 + 1 (the non-negative frequencies);
     *   TS_FFT_C2R: in complex, out real of its width, in.shape[dim] n / 2 + 1, out.shape[dim] n
     *               (the imaginary parts of bin 0, and of bin n / 2 for even n, are ignored).
     * out[k] = scale * sum_j in[j] e^(-+2 pi i j k / n): minus when forward (R2C always, C2R
     * never). Arithmetic in the dtype's precision, twiddles computed in double. Returns false,
     * having written nothing, only when its scratch memory cannot be had. */
    bool (*fft)(const ts_backend *be, int index, const ts_kview *out, const ts_kview *in, int dim,
                ts_fft_kind kind, bool forward, double scale);
    /* Optional (NULL, as on cpu and sim: torch.linalg runs LAPACK on the host, src/ops/
     * linalg_lapack.h). Dense factorizations of a batch of matrices in their own dtype
     * (ts_linalg_args; the CUDA backend: cuSOLVER, cuda_linalg.cu). Waits for the device when
     * info is asked for. Returns false with the error set (TS_ERR_OOM, TS_ERR_CUDA naming the
     * library call) when it could not run; outputs are then undefined. */
    bool (*linalg)(const ts_backend *be, int index, const ts_linalg_args *a);
    /* softmax / log_softmax along dim; out and in same shape and float dtype */
    void (*softmax)(const ts_backend *be, int index, const ts_kview *out, const ts_kview *in,
                    int dim, bool log);
    /* Optional: the gradient gx of softmax / log_softmax along dim from its output y and the
     * output's gradient g (gx = y * (g - sum(g * y)), or g - exp(y) * sum(g)), all of one shape
     * and dtype. Returns false, having written nothing, for views or dtypes it does not take; NULL
     * or false: the front end composes the gradient of tensor ops. */
    bool (*softmax_backward)(const ts_backend *be, int index, const ts_kview *gx, const ts_kview *y,
                             const ts_kview *g, int dim, bool log);
    /* Philox-4x32-10: element i (in row-major order of out) uses counter (offset + i) under key
     * seed, so the numbers do not depend on threads or device. */
    void (*random)(const ts_backend *be, int index, ts_random_kind kind, const ts_kview *out,
                   double p0, double p1, uint64_t seed, uint64_t offset);
    /* out [N,O,OH,OW] = act(conv2d(x [N,C,H,W], w [O,C/groups,KH,KW]) + bias [O]) (bias may be
     * NULL; act: p->act, exactly ts_relu / ts_clamp of the value the plain convolution would
     * write). All views contiguous and of one float dtype; output sizes already computed by the
     * front end. */
    void (*conv2d)(const ts_backend *be, int index, const ts_kview *out, const ts_kview *x,
                   const ts_kview *w, const ts_kview *bias, const ts_conv2d_params *p);
    /* gx [N,C,H,W] = gradient of the input (overwritten) */
    void (*conv2d_backward_data)(const ts_backend *be, int index, const ts_kview *gx,
                                 const ts_kview *gout, const ts_kview *w,
                                 const ts_conv2d_params *p);
    /* gw [O,C/groups,KH,KW] = gradient of the weight (overwritten) */
    void (*conv2d_backward_weight)(const ts_backend *be, int index, const ts_kview *gw,
                                   const ts_kview *gout, const ts_kview *x,
                                   const ts_conv2d_params *p);
    /* Optional (NULL: none): whether conv2d and its backward passes take channels_last activations
     * of dtype dt — x and out, gx and gout NHWC-dense views ([n][h][w][c]), both of a pair in that
     * layout — and write them so; the front end then keeps a channels_last input's format (the
     * CPU backend: oneDNN's NHWC kernels, no reorders). Otherwise it passes NCHW views. */
    bool (*conv2d_channels_last)(const ts_backend *be, int index, ts_dtype dt);
    /* Optional (NULL: none; the CPU backend with oneDNN): inference convolutions on activations in
     * a channel-blocked layout, [N, ceil(C/B), H, W, B] with channel c at [c / B][...][c % B],
     * kept between consecutive convolutions so that no reorder runs at each (nn/conv_blocked.h,
     * the ONNX rewrite of onnx/rewrite_blocked.c). conv2d_block: the block B this device's
     * kernels want (16 with AVX-512, 8 with AVX2), 0 when it has none now (no oneDNN, TS_CONV=
     * builtin). conv2d_blocked: out = act(conv2d(x, w) + bias) as conv2d with x and / or out in
     * that layout (x_block / out_block = B, 0: plain NCHW) and float32 throughout; the padding
     * channels of x must be finite, those of out come finite. Returns false, having written
     * nothing the caller relies on, for a convolution it does not take (one the built-in kernels
     * run: the caller goes through plain layouts and conv2d, so results are conv2d's). */
    int (*conv2d_block)(const ts_backend *be);
    bool (*conv2d_blocked)(const ts_backend *be, int index, float *out, int out_block,
                           const float *x, int x_block, const float *w, const float *bias,
                           const int64_t nchw[4], const int64_t o_ohw[3], const int64_t khw[2],
                           const ts_conv2d_params *p);
    /* Optional, with conv2d_blocked: out [N, Cb, 1, 1, B] = the mean of each channel's H x W plane
     * of x [N, Cb, H, W, B] (float32, contiguous; hw = H * W > 0), each channel summed in the
     * order pool2d's float32 global average pooling sums a plain plane, so the same bits. */
    void (*global_avg_pool_blocked)(const ts_backend *be, int index, float *out, const float *x,
                                    int64_t n_cb, int64_t hw, int blk);
    /* Optional, with conv2d_blocked: out [N, Cb, H, W, B] = x [N, Cb, H, W, B] * s [N, Cb, 1, 1,
     * B] (float32, contiguous, hw = H * W): the squeeze-excitation's scale, each product as the
     * binary kernel's */
    void (*mul_channels_blocked)(const ts_backend *be, int index, float *out, const float *x,
                                 const float *s, int64_t n_cb, int64_t hw, int blk);
    /* out [N,C,OH,OW] from x [N,C,H,W]; indices (TS_I64, out's shape) for TS_POOL_MAX or NULL */
    void (*pool2d)(const ts_backend *be, int index, const ts_kview *out, const ts_kview *x,
                   const ts_kview *indices, const ts_pool2d_params *p);
    /* gx [N,C,H,W] (overwritten) from gout; max pooling uses the saved indices */
    void (*pool2d_backward)(const ts_backend *be, int index, const ts_kview *gx,
                            const ts_kview *gout, const ts_kview *indices,
                            const ts_pool2d_params *p);
    /* Optional (NULL: none): whether pool2d and pool2d_backward take channels_last activations of
     * dtype dt — x and out (and the indices), gx and gout NHWC-dense views, all of one call in
     * that layout — and write them so; the front end then keeps a channels_last input's format
     * (the CPU backend: kern_pool_nhwc.c). Otherwise it passes NCHW views. */
    bool (*pool2d_channels_last)(const ts_backend *be, int index, ts_dtype dt);
    /* Fused attention (ts_sdpa_args). sdpa_supports: whether the kernels take these dtypes and
     * shapes (else the front end composes the reference). sdpa_workspace: bytes of device memory
     * the forward (backward = false) or backward pass needs, handed to it as `ws` (64-byte
     * aligned); it also fixes a->threads. NULL entries: the reference composition is used. */
    bool (*sdpa_supports)(const ts_backend *be, int index, const ts_sdpa_args *a);
    size_t (*sdpa_workspace)(const ts_backend *be, int index, ts_sdpa_args *a, bool backward);
    void (*sdpa_forward)(const ts_backend *be, int index, const ts_sdpa_args *a, void *ws);
    void (*sdpa_backward)(const ts_backend *be, int index, const ts_sdpa_args *a, void *ws);
    /* Fused layer norm (ts_layer_norm_args). layer_norm_supports: whether the kernels take this
     * dtype and size (else the front end composes it from reductions and elementwise ops).
     * layer_norm_workspace: bytes of device memory backward needs (the partial sums of dweight
     * and dbias), handed to it as `ws` (64-byte aligned); forward needs none. NULL entries: the
     * composition is used. */
    bool (*layer_norm_supports)(const ts_backend *be, int index, const ts_layer_norm_args *a);
    size_t (*layer_norm_workspace)(const ts_backend *be, int index, const ts_layer_norm_args *a);
    void (*layer_norm_forward)(const ts_backend *be, int index, const ts_layer_norm_args *a);
    void (*layer_norm_backward)(const ts_backend *be, int index, const ts_layer_norm_args *a,
                                void *ws);
    /* Optional (NULL: the front end composes the gates of tensor ops): one LSTM / GRU step's
     * gates (ts_rnn_cell_args), forward and backward. */
    void (*rnn_cell_forward)(const ts_backend *be, int index, const ts_rnn_cell_args *a);
    void (*rnn_cell_backward)(const ts_backend *be, int index, const ts_rnn_cell_args *a);
    /* Optional (NULL: the front end runs backend/rnn_seq_loop.h's loop over every row with the
     * entries above): a layer direction's steps (ts_rnn_seq_args), forward and backward; the CPU
     * splits the batch rows, independent sequences, among its threads. */
    void (*rnn_seq_forward)(const ts_backend *be, int index, const ts_rnn_seq_args *a);
    void (*rnn_seq_backward)(const ts_backend *be, int index, const ts_rnn_seq_args *a);
    /* Fused batch norm in training mode (ts_batch_norm_args). batch_norm_supports: whether the
     * kernels take this dtype and shape (else the front end composes it from reductions and
     * elementwise ops). NULL entries: the composition is used. */
    bool (*batch_norm_supports)(const ts_backend *be, int index, const ts_batch_norm_args *a);
    void (*batch_norm_forward)(const ts_backend *be, int index, const ts_batch_norm_args *a);
    void (*batch_norm_backward)(const ts_backend *be, int index, const ts_batch_norm_args *a);
    /* Fused cross-entropy with class-index targets (ts_cross_entropy_args), every float dtype,
     * rows and classes. NULL entries (cpu, sim): the front end composes log_softmax, gather and
     * reductions (src/nn/loss_ce.c). */
    void (*cross_entropy_forward)(const ts_backend *be, int index, const ts_cross_entropy_args *a);
    void (*cross_entropy_backward)(const ts_backend *be, int index, const ts_cross_entropy_args *a);
    /* one fused optimizer step over many tensors (SGD/Adam/AdamW/RMSprop) */
    void (*optim_step)(const ts_backend *be, int index, const struct ts_optim_step_args *args);

    /* ---- mixed precision (GradScaler), PyTorch's _amp_foreach_non_finite_check_and_unscale_ and
     * _amp_update_scale_. found_inf, inv_scale, scale: one-element f32 views on the device;
     * growth_tracker: one-element i32 view. */
    /* Multiplies every element of each grads[i] (float dtypes, any strides) by *inv_scale in place
     * and sets *found_inf = 1.0f when any element of any of them is Inf or NaN (it never resets
     * found_inf to 0). */
    void (*amp_unscale)(const ts_backend *be, int index, const ts_kview *grads, int n,
                        const ts_kview *found_inf, const ts_kview *inv_scale);
    /* found_inf != 0: scale *= backoff, tracker = 0; otherwise tracker += 1 and when it reaches
     * growth_interval: scale *= growth (only while the result stays finite), tracker = 0. */
    void (*amp_update_scale)(const ts_backend *be, int index, const ts_kview *scale,
                             const ts_kview *growth_tracker, const ts_kview *found_inf,
                             double growth_factor, double backoff_factor, int growth_interval);

    /* ---- captured steps as device graphs (optional; NULL, as on cpu and sim: a replay runs the
     * recorded calls one by one). graph_build runs body(ctx), which makes the recorded calls on
     * this backend, under the device's own capture (CUDA: a stream capture on a side stream) and
     * returns the graph, to be launched whole; NULL with the error pending when the capture or its
     * instantiation failed. While body runs, random draws (random, sdpa dropout) are given seed 0
     * and their offset relative to the graph: the graph adds the seed and base that each
     * graph_launch passes, read on the device. Scratch memory and tables the kernels make during
     * the build are the graph's. graph_destroy waits for the launches in flight and frees all
     * that. */
    void *(*graph_build)(const ts_backend *be, int index, void (*body)(void *ctx), void *ctx);
    bool (*graph_launch)(const ts_backend *be, int index, void *graph, uint64_t seed,
                         uint64_t base);
    void (*graph_destroy)(const ts_backend *be, int index, void *graph);

    /* ---- binary_cross_entropy (optional; NULL: the front end composes public ops and checks no
     * value): out = the unweighted loss of input x and target t (bce_math.h's ts_bce_f / _d); out,
     * x, t one floating dtype (f16 / bf16 compute in float) and out's shape. Returns bce_math.h's
     * TS_BCE_BAD_INPUT | TS_BCE_BAD_TARGET for values outside [0, 1] (NaN included), read in the
     * same pass; only a backend whose kernels finish before they return may have it. */
    int (*bce)(const ts_backend *be, int index, const ts_kview *out, const ts_kview *x,
               const ts_kview *t);

    /* ---- conv3d's float32 forward as one primitive (optional; NULL or false: the front end
     * composes conv2d over depth slices, as it does for gradients, float64 and the other devices):
     * y = conv3d(x, w) + b on contiguous NCDHW / OIDHW float32 views (b->data NULL: no bias).
     * Returns false, having written nothing the caller relies on, when it declines the shape or
     * its memory runs out. The cpu's: oneDNN's 3-d primitive (conv3d_dnnl.c). */
    bool (*conv3d_forward)(const ts_backend *be, int index, const tsi_conv3d_geom *g,
                           const ts_kview *x, const ts_kview *w, const ts_kview *b,
                           const ts_kview *y);

    /* ---- layout hints, for front ends that choose an operand's layout before calling ops (the
     * ONNX import's transformer rewrites); optional, NULL: no preference. No error, no side effect.
     * hint_keys_copy: whether attention's keys, S rows lying row_bytes apart, are better copied
     * contiguous first (the cpu's: rows a multiple of 4 KiB apart share a cache set,
     * sdpa_select.h). hint_weight_transposed: whether a float32 product of rows x k by k x n runs
     * faster with the weight stored [n, k] (read transposed) than [k, n] (the cpu's: where oneDNN's
     * primitive takes the NT form and the provider's GEMM the NN one, gemm_provider.h). */
    bool (*hint_keys_copy)(const ts_backend *be, int64_t S, int64_t row_bytes);
    bool (*hint_weight_transposed)(const ts_backend *be, int64_t rows, int64_t k, int64_t n);

    /* ---- torchvision.ops (optional; NULL: the front ends refuse, TS_ERR_UNSUPPORTED) */
    /* Greedy non-maximum suppression over boxes [n, 4] (contiguous x1, y1, x2, y2, float32 /
     * float64) already sorted by decreasing score: keep (TS_BOOL [n]) gets 1 for each box that no
     * kept box before it overlaps with IoU > iou_threshold (IoU in the boxes' dtype, compared in
     * double: torchvision's cpu kernel). cls.data non-NULL: TS_I64 [n] classes, and only boxes of
     * one class suppress each other (batched_nms). Returns false, having written nothing, only when
     * its scratch memory cannot be had. */
    bool (*nms)(const ts_backend *be, int index, const ts_kview *keep, const ts_kview *boxes,
                const ts_kview *cls, double iou_threshold);
    /* roi_align's forward or backward (ts_roi_args) */
    void (*roi_align)(const ts_backend *be, int index, const ts_roi_args *a, bool backward);
    /* roi_pool's forward or backward (ts_roi_args) */
    void (*roi_pool)(const ts_backend *be, int index, const ts_roi_args *a, bool backward);

    /* ---- quantization (optional; NULL: the quantized ops refuse on this device,
     * TS_ERR_UNSUPPORTED). quant: quantize, dequantize or unpack contiguous data as quant_args.h
     * says; qlinear: the int8 product of a quantized linear layer with its epilogue. Host-side
     * parameters (scales, zero points) in the argument structs. qlinear returns false, having
     * written nothing, only when its scratch memory cannot be had (tsi_kernel_oom called). */
    void (*quant)(const ts_backend *be, int index, const ts_quant_args *a);
    bool (*qlinear)(const ts_backend *be, int index, const ts_qlinear_args *a);
    /* qconv: a quantized 2-D convolution (ts_qconv_args; false as qlinear's); qpool: max or
     * adaptive average pooling of quantized integers (ts_qpool_args) */
    bool (*qconv)(const ts_backend *be, int index, const ts_qconv_args *a);
    /* Optional (NULL: no): whether qconv runs fastest on channels_last activations (x_nhwc,
     * out_nhwc), so that a caller keeps a chain of them NHWC (decision 0053) */
    bool (*qconv_channels_last)(const ts_backend *be, int index);
    void (*qpool)(const ts_backend *be, int index, const ts_qpool_args *a);
    /* qlinear_add: ONNX Runtime's QLinearAdd on uint8 / int8 bytes (ts_qlinear_add_args) */
    void (*qlinear_add)(const ts_backend *be, int index, const ts_qlinear_add_args *a);
    /* wo_linear: a weight-only quantized linear layer (ts_wo_args; false as qlinear's) */
    bool (*wo_linear)(const ts_backend *be, int index, const ts_wo_args *a);
};

/* The registry: one backend per device type; NULL when the type is not built or not present. */
const ts_backend *tsi_backend_for(ts_device_type type);
void tsi_backend_register(const ts_backend *be);

/* The CPU kernels, shared by the cpu and sim backends. */
void tsi_cpu_kernels_install(ts_backend *be);

/* A kernel that cannot get host scratch memory, and has no slower way that gives the same
 * numbers, records TS_ERR_OOM ("<kernel>: out of host memory for N bytes of scratch") with this;
 * the op's result is then undefined and the error pending. Call it from the thread that called the
 * kernel, never inside a parallel region (an OpenMP thread's error state is not the caller's).
 * Defined by the core (src/core/error.c): kernels report no other errors. */
void tsi_kernel_oom(const char *kernel, size_t bytes); /* bytes 0: not known */

#endif /* TS_BACKEND_H */
