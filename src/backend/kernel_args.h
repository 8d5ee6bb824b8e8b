/* kernel_args.h — what the backend interface (backend.h) hands its kernels: the views of raw
 * memory (ts_kview), the op enumerations (unary, binary, ternary, reduce, scan, random, linalg,
 * ...) and the argument structs of the fused kernels. Included by backend.h; a file that only
 * describes operands may include this alone. */
#ifndef TS_KERNEL_ARGS_H
#define TS_KERNEL_ARGS_H

#include "tessera.h"

/* Kernels see raw memory through views: already validated, already on the backend's device.
 * `data` points at element 0 of the view (storage base + offset applied); strides are in elements
 * and may be 0 (broadcast) but never negative. Kernels never validate user input. */
typedef struct ts_kview {
    char *data;
    ts_dtype dtype; /* never TS_DTYPE_DEFAULT */
    int ndim;
    int64_t shape[TS_MAX_DIMS];
    int64_t strides[TS_MAX_DIMS];
} ts_kview;

/* the three transforms of the fft slot */
typedef enum ts_fft_kind { TS_FFT_C2C = 0, TS_FFT_R2C, TS_FFT_C2R } ts_fft_kind;

/* The operations of the linalg slot (ts_linalg_args): batches of dense matrices, each in LAPACK's
 * sense (k = min(m, n)). Inputs are read, never written; outputs are written whole. */
typedef enum ts_linalg_op {
    /* out (m x n) = a's packed LU factors (P a = L U, L unit lower); piv (k): getrf's 1-based
     * pivot rows; info: getrf's (> 0: U[info, info] is exactly zero) */
    TS_LINALG_LU = 0,
    /* out (n x n) = a^-1 where info == 0, a's LU factors where info > 0 (getrf's) */
    TS_LINALG_INV,
    /* out (n x nrhs) = a^-1 b where info == 0, b where info > 0 (getrf's) */
    TS_LINALG_SOLVE,
    /* from a's LU factors: out2 NULL: out (batch) = det a; else out (batch) = sign of det a (0
     * when singular), out2 (batch) = log|det a| (-inf when singular). info not set. */
    TS_LINALG_DET,
    /* out (n x n) = L of a's lower triangle (a = L L^T), zeros above the diagonal; info: potrf's
     * (> 0: the leading minor of that order is not positive-definite) */
    TS_LINALG_CHOLESKY,
    /* symmetric a (its upper triangle when upper, else the lower one): out2 (n) = eigenvalues
     * ascending; out (n x n) = the eigenvectors as columns (NULL: values only); info: syevd's */
    TS_LINALG_EIGH,
    /* out2 (k) = singular values descending; out (m x ku) = U, out3 (kv x n) = V^T, ku = kv = k,
     * or m and n when full (out NULL: values only); info: > 0 when it did not converge */
    TS_LINALG_SVD,
    /* a = Q R: out (m x kq) = Q (NULL: none), out2 (kq x n) = R (zeros below the diagonal), kq =
     * m when full, else k; info not set */
    TS_LINALG_QR,
} ts_linalg_op;

typedef struct ts_linalg_args {
    ts_linalg_op op;
    const char *name;          /* the op, for error messages ("linalg.inv") */
    ts_dtype dtype;            /* TS_F32 or TS_F64: a, b and every float output */
    int64_t batch, m, n, nrhs; /* all >= 1 (nrhs: TS_LINALG_SOLVE's columns of b) */
    bool upper, full;          /* EIGH's triangle; SVD's full matrices, QR's complete mode */
    /* on the backend's device, contiguous, row-major, matrix after matrix */
    const void *a, *b;       /* b: TS_LINALG_SOLVE's right-hand sides (batch x n x nrhs) */
    void *out, *out2, *out3; /* as the op says; unused ones NULL */
    int32_t *piv;            /* TS_LINALG_LU's pivots (batch x k), on the device */
    int32_t *info;           /* on the host: batch entries, as the op says (NULL: not wanted) */
} ts_linalg_args;

/* The unary elementwise ops: unary_ops.def's rows, in its order (what each p0 / p1 means there) */
typedef enum ts_unary_op {
#define X(ID, ...) TS_U_##ID,
#include "backend/unary_ops.def"
#undef X
    /* The count. Every switch or table over the ops asserts it (_Static_assert(TS_U_COUNT == N,
     * ...), ggml's way): adding an op fails the compile at each place that must take it, until
     * that place has the op and its count is raised. */
    TS_U_COUNT
} ts_unary_op;

/* Pointwise ops of three operands (kernel_math.h's ts_ternary_f / _d, PyTorch's formulas);
 * p the op's scalar */
typedef enum ts_ternary_op {
    TS_T_ADDCMUL,     /* a + p * b * c */
    TS_T_ADDCDIV,     /* a + p * b / c */
    TS_T_LERP,        /* a + c * (b - a) for |c| < 0.5, else b - (b - a) * (1 - c) */
    TS_T_LERP_SCALAR, /* the same with weight p (c is not read) */
    TS_T_COUNT
} ts_ternary_op;

/* embedding_bag's operands (the embedding_bag slot): the bags of rows of weight [N, D] (any
 * strides) picked by idx (1-D contiguous, TS_I64 or TS_I32, values in [0, N)). offsets.data
 * non-NULL: 1-D contiguous TS_I64 of bags + 1 entries, bag b = positions [offsets[b],
 * offsets[b + 1]) of idx (non-decreasing, within idx); NULL: bag b = positions [b * width,
 * (b + 1) * width). psw.data non-NULL (mode sum only): 1-D contiguous per-position weights of
 * weight's dtype. Positions whose index equals padding_idx (>= 0; -1 none) are left out. */
typedef struct ts_bag_args {
    ts_kview weight, idx, offsets, psw;
    int mode; /* 0 sum, 1 mean (sum / the bag's count of kept positions, 1 when none) */
    int64_t padding_idx, width, bags;
} ts_bag_args;

/* roi_align / roi_pool's operands (the roi_align and roi_pool slots, torchvision's kernels;
 * roi_math.h's arithmetic). input [N, C, H, W] and rois [K, 5] (batch index, x1, y1, x2, y2, the
 * batch indices already checked in [0, N)) contiguous, of one float dtype (TS_F32 / TS_F64);
 * output [K, C, PH, PW] contiguous. Forward: output written; roi_pool's argmax (TS_I64 [K, C,
 * PH, PW]) gets each bin's max at h * W + w within its plane, -1 for an empty bin. Backward:
 * input is the input's gradient, already zeroed, into which the output's gradient (in output) is
 * added; roi_pool reads argmax. spatial_scale is rounded to the dtype first (as torchvision). */
typedef struct ts_roi_args {
    ts_kview input, rois, output, argmax;
    double spatial_scale;
    int sampling_ratio; /* roi_align: > 0 samples per bin side; <= 0 ceil(roi size / bins) */
    bool aligned;       /* roi_align: pixel centres at +0.5 (coordinates shifted by -0.5) */
} ts_roi_args;

/* conv3d_forward's geometry: x [n, c, in[0..2]] (NCDHW), w [o, c / groups, k[0..2]], y [n, o,
 * out[0..2]]; stride s, padding p (both sides), dilation d (PyTorch's: 1 is none), per spatial dim
 */
typedef struct tsi_conv3d_geom {
    int64_t n, c, o, groups;
    int64_t in[3], out[3], k[3], s[3], p[3], d[3];
} tsi_conv3d_geom;

/* The activations of the matmul_bias_act slot (decision 0032): ts_relu's (max(z, 0), NaN stays
 * NaN) and GELU's tanh approximation (ts_gelu_tanh). PyTorch's default GELU (erf) has no
 * epilogue: cuBLASLt's is the tanh form, so it must never be asked for here. */
typedef enum ts_epi_act { TS_EPI_RELU, TS_EPI_GELU_TANH } ts_epi_act;

/* The activation's saved state for the backward, written by matmul_bias_act for out [M, N]: row i
 * at data + i * ld (the column-major aux matrix of cuBLASLt's D = out^T, ld its leading dimension),
 * ld >= N. GELU_TANH: the pre-activation z = a @ b + bias rounded to out's dtype, ld elements of
 * that dtype (a multiple of 8); the front end reads it (the composed backward) and a backward
 * slot (cuBLASLt's DGELU_BGRAD: dz = (dy @ W) * gelu'(z) and its bias gradient in one GEMM) can.
 * RELU: a bit mask, bit i * ld + j set where z[i][j] > 0 (the order of bits within a byte the
 * backend's own: cuBLASLt's DRELU_BGRAD input), ld a multiple of 128 bits; only the backend's
 * matmul_dact_bgrad reads it (the composed relu backward reads the output). */
typedef struct ts_epi_aux {
    void *data;
    int64_t ld;
} ts_epi_aux;

/* The binary elementwise ops: binary_ops.def's rows, in its order */
typedef enum ts_binary_op {
#define X(ID, ...) TS_B_##ID,
#include "backend/binary_ops.def"
#undef X
    TS_B_COUNT /* asserted by every switch or table over the ops, as TS_U_COUNT */
} ts_binary_op;

/* The reductions: reduce_ops.def's rows, in its order */
typedef enum ts_reduce_op {
#define X(ID, ...) TS_R_##ID,
#include "backend/reduce_ops.def"
#undef X
    TS_R_COUNT /* asserted by every switch or table over the ops, as TS_U_COUNT */
} ts_reduce_op;

typedef enum ts_scan_op {
    TS_SCAN_SUM,
    TS_SCAN_PROD,
    TS_SCAN_MAX,
    TS_SCAN_MIN,
    TS_SCAN_LOGSUMEXP,
} ts_scan_op;

typedef enum ts_random_kind {
    TS_RAND_UNIFORM,   /* p0 = low, p1 = high: [low, high) */
    TS_RAND_NORMAL,    /* p0 = mean, p1 = std */
    TS_RAND_BERNOULLI, /* p0 = probability; writes 0/1 */
    TS_RAND_RANDINT,   /* p0 = low, p1 = high: integers in [low, high) */
} ts_random_kind;

/* The activation a forward convolution applies to each output (bias added) as it writes it. */
typedef enum ts_conv_act {
    TS_CONV_ACT_NONE = 0,
    TS_CONV_ACT_RELU, /* ts_relu's: max(y, 0), NaN stays NaN */
    TS_CONV_ACT_CLIP, /* ts_clamp's: min(max(y, lo), hi), NaN stays NaN, lo > hi gives hi */
    /* ONNX's HardSigmoid, min(max(alpha * y + beta, 0), 1), and HardSwish, y times that (alpha
     * 1/6, beta 1/2), with alpha in act_lo and beta in act_hi; within float32 rounding of the
     * composed ops (an FMA, or oneDNN's y * relu6(y + 3) / 6), NaN stays NaN. The CPU backend
     * only: the front end composes them on other devices. */
    TS_CONV_ACT_HARDSIGMOID,
    TS_CONV_ACT_HARDSWISH,
} ts_conv_act;

typedef struct ts_conv2d_params {
    int stride[2], padding[2], dilation[2], groups;
    /* forward only (the backward passes get NONE and uid 0) */
    ts_conv_act act;
    double act_lo, act_hi; /* CLIP's bounds, NAN: that side unbounded; HARD*'s alpha and beta */
    /* The weight's identity, for caches of its transformed forms (oneDNN's blocked layout): its
     * storage's uid, that storage's version and its offset in elements. The front end sets
     * weight_uid only when the weight can't change during the call and is not being trained (grad
     * mode off, or it does not require grad), it is contiguous in its own storage and Tessera owns
     * that memory; 0: cache nothing. */
    uint64_t weight_uid, weight_version;
    int64_t weight_offset;
} ts_conv2d_params;

typedef enum ts_pool_kind {
    TS_POOL_MAX,             /* writes argmax indices (flat h*W+w within the plane) when given */
    TS_POOL_AVG,             /* count_include_pad=True */
    TS_POOL_AVG_EXCLUDE_PAD, /* count_include_pad=False */
    TS_POOL_ADAPTIVE_AVG,    /* windows [floor(i*H/OH), ceil((i+1)*H/OH)); kernel/stride unused */
} ts_pool_kind;

typedef struct ts_pool2d_params {
    int kernel[2], stride[2], padding[2], dilation[2];
    ts_pool_kind kind;
    int divisor; /* > 0: every average window's divisor (avg_pool2d's divisor_override) */
} ts_pool2d_params;

/* Fused scaled dot-product attention (flash attention: tiles, online softmax, the L x S matrix
 * never in memory). Views, all on the backend's device, of one float dtype except mask and lse:
 *   q [B.., L, E], k [B.., S, E], v [B.., S, Ev], out [B.., L, Ev]: the same batch dims B.. (ndim
 *   2..8), any strides with the last dim's stride 1;
 *   lse [B.., L] contiguous: each row's log-sum-exp of its scaled, masked scores (f64 for f64
 *   inputs, f32 otherwise); +inf for a row whose every score is masked (its output is 0, as
 *   PyTorch);
 *   mask NULL or [B.., L, S] broadcast (strides may be 0): TS_BOOL (false = masked out) or the
 *   inputs' dtype (added to the scores);
 *   dout like out; dq, dk, dv contiguous, overwritten.
 * Dropout (dropout_p > 0) drops attention weights with Philox: weight (b, i, j), b the row-major
 * index of B.., uses stream position offset + (b * L + i) * S + j, kept when u24(word 0) <
 * 1 - dropout_p and then scaled by 1 / (1 - dropout_p) — exactly ts_dropout's mask on the L x S
 * weights of the reference composition. Causal: query i sees keys j <= i (top-left). */
typedef struct ts_sdpa_args {
    ts_kview q, k, v, out, lse, mask, dout, dq, dk, dv;
    bool has_mask, causal;
    double scale, dropout_p;
    uint64_t seed, offset;
    int threads; /* set by sdpa_workspace; the kernels use that many */
} ts_sdpa_args;

/* Fused layer normalisation (PyTorch's native_layer_norm) over rows of `cols` elements: rows =
 * the product of the leading dims, cols = that of the normalised ones. Every view is contiguous,
 * on the backend's device, of one float dtype T, except mean and rstd (f64 for f64 inputs, f32
 * otherwise):
 *   x, y, dy, dx [rows, cols]; weight, bias, dweight, dbias [cols]; mean, rstd [rows].
 * A view whose data is NULL is absent (no weight, no bias) or not wanted (dx, dweight, dbias).
 * Forward: mean = the row's mean, rstd = 1 / sqrt(biased variance + eps), y = (x - mean) * rstd
 * * weight + bias. Backward, from x, dy, weight, mean and rstd: with xhat = (x - mean) * rstd and
 * g = dy * weight, dx = rstd * (g - mean(g) - xhat * mean(g * xhat)) (means over the row),
 * dweight = the sum over rows of dy * xhat, dbias = that of dy. rows, cols >= 1.
 * rms (RMSNorm, src/nn/rms_norm.c): no mean subtracted and no bias (mean, bias, dbias absent):
 * rstd = 1 / sqrt(mean(x^2) + eps), y = x * rstd * weight; backward with g = dy * weight,
 * dx = rstd * (g - x * rstd^2 * mean(g * x)), dweight = the sum over rows of dy * x * rstd. */
typedef struct ts_layer_norm_args {
    ts_kview x, weight, bias, y, mean, rstd, dy, dx, dweight, dbias;
    int64_t rows, cols;
    double eps;
    bool rms;
    /* Fused residual add (optional): when residual's data is non-NULL the forward normalises
     * h = x + residual instead of x, the sum rounded to T as ts_add rounds it, and writes h
     * (residual and h [rows, cols], T). Backward is unchanged: it reads h as its x (the front
     * end passes h as x), residual and h absent. */
    ts_kview residual, h;
} ts_layer_norm_args;

/* Fused recurrent-cell gates, one time step of nn.LSTM / nn.GRU (src/nn/rnn_cell_fused.c, the
 * formulas of backend/rnn_cell_math.h). Every view is contiguous, on the backend's device, of one
 * dtype (f32 or f64); rows B >= 1, hidden H >= 1; a view whose data is NULL is absent.
 *   LSTM (lstm true): xw, gh [B, 4H], the pre-activations being xw + gh (gates i, f, g, o);
 *     state = c_prev [B, H]. Forward writes h, c [B, H] and saved [B, 5H] (per row the activated
 *     i, f, g, o, then tanh(c)). Backward reads saved, state and dh, dc [B, H] (absent: zeros)
 *     and writes dxw [B, 4H] (the pre-activations' gradient: xw's and gh's) and dstate [B, H]
 *     (absent: not wanted).
 *   GRU: xw, gh [B, 3H] (gates r, z, n; gh includes b_hh), state = h_prev [B, H]. Forward writes
 *     h and saved [B, 4H] (per row r, z, n, then gh's n part). Backward reads saved, state, dh
 *     and writes dxw, dgh [B, 3H] (equal but for the n part) and dstate (the part through z).
 * float32 takes its sigmoid and tanh from the same code as the unary ops, so h and c have the
 * bits of the composed ops. */
typedef struct ts_rnn_cell_args {
    ts_kview xw, gh, state, h, c, saved, dh, dc, dxw, dgh, dstate;
    int64_t rows, hidden;
    bool lstm;
} ts_rnn_cell_args;

/* One direction of an LSTM / GRU layer over its T steps (src/nn/rnn_seq_fused.c), the step loop of
 * backend/rnn_seq_loop.h: each step's product h w^T (+ bias) and its gates (rnn_cell_forward), and
 * backward to front each step's gates backward and the product giving the previous state's
 * gradient. Views contiguous, of one dtype (f32 or f64), G = 4 (LSTM) or 3 (GRU) gates, B rows,
 * H hidden; a view whose data is NULL is absent. In: xw [T, B, GH], w [GH, H], bias [GH] (the
 * GRU's b_hh, or absent), h0, c0 [B, H] (c0: LSTM). Forward writes y [T, B, H], cells [T, B, H]
 * (LSTM's c), saved [T, B, (G+1)H] (rnn_cell_forward's, per step), gh [B, GH] (scratch); reverse:
 * the steps from T - 1 down to 0. Backward reads those and dy [T, B, H], dhn, dcn [B, H] (each
 * absent: zeros) and writes dxw (and the GRU's dgh) [T, B, GH], dh0, dc0 [B, H] where present;
 * work [6, B, H] scratch. */
typedef struct ts_rnn_seq_args {
    ts_kview xw, w, bias, h0, c0, y, cells, saved, gh;
    ts_kview dy, dhn, dcn, dxw, dgh, dh0, dc0, work;
    int64_t steps, rows, hidden;
    bool lstm, reverse;
} ts_rnn_seq_args;

/* Fused batch normalisation in training mode (PyTorch's native_batch_norm and
 * native_batch_norm_backward) over x viewed as [n, c, hw] (hw = the product of the dims after the
 * channels, 1 for [N, C]). Every view is contiguous, on the backend's device, of one float dtype
 * T, except mean, invstd and var (f64 for f64 inputs, f32 otherwise) and, for an f16 / bf16 x
 * (PyTorch's mixed batch norm: autocast's), weight, bias, dweight and dbias, which are f32 there
 * (x, y, dy and dx of x's dtype; the math in float, each output rounded once):
 *   x, y, dy, dx: n * c * hw elements in [n, c, hw] order; weight, bias, dweight, dbias, mean,
 *   invstd, var: c elements (the kernels read only the views' data and dtype).
 * A view whose data is NULL is absent (no weight, no bias) or not wanted (var, dx, dweight,
 * dbias). Forward: per channel over its n * hw elements, mean, the biased variance var and
 * invstd = 1 / sqrt(var + eps); y = (x - mean) * invstd * weight + bias. Backward, from x, dy,
 * weight, mean and invstd: with the channel's sums sdy = sum(dy), sdx = sum(dy * (x - mean)) and
 * m = n * hw, dbias = sdy, dweight = sdx * invstd, dx = (dy - sdy / m - (x - mean) * invstd^2 *
 * sdx / m) * invstd * weight. n, c, hw >= 1 and n * hw >= 2.
 * channels_last: x, y, dy and dx are [n, hw, c] (NHWC: a channels_last tensor's memory) instead
 * of [n, c, hw]; everything else is unchanged. */
typedef struct ts_batch_norm_args {
    ts_kview x, weight, bias, y, mean, invstd, var, dy, dx, dweight, dbias;
    int64_t n, c, hw;
    double eps;
    bool channels_last;
} ts_batch_norm_args;

/* Fused cross-entropy with class-index targets (llm.c's fused classifier) over `rows` rows of
 * `classes` logits, the [rows, classes] log-probabilities never in memory. Every view is
 * contiguous and on the backend's device:
 *   logits, dlogits [rows, classes] of one float dtype T; target [rows] TS_I64;
 *   loss, lse, dloss [rows] of T's compute dtype: f64 for f64 logits, f32 otherwise (a half
 *   dtype's per-row losses are not rounded to it: the front end rounds its result once).
 * Forward writes loss and lse: with t = target[r], eps = label_smoothing, lse = the row's
 * log-sum-exp, loss = (1 - eps) * (lse - x[t]) + eps * (lse - mean_j x[j]) (the second term only
 * for eps > 0: an infinite smoothing term does not make eps = 0 NaN); loss = 0 where t ==
 * ignore_index. A row with a NaN or a +inf, or every entry -inf, has a NaN lse and (not ignored)
 * loss: log_softmax's rule. Backward, from logits, target, lse and dloss (the gradient of loss):
 * dlogits[r, j] = dloss[r] * (exp(x[r, j] - lse[r]) - (1 - eps) * [j == t] - eps / classes), the
 * whole row 0 where t == ignore_index. A t outside [0, classes) other than ignore_index (the front
 * end rejects those on the host, except while capturing, where it cannot read them) is clamped
 * into range, as the composition clamps it there: nothing is read out of bounds. rows, classes >=
 * 1. The math in T's compute dtype, each output rounded once. */
typedef struct ts_cross_entropy_args {
    ts_kview logits, target, loss, lse, dloss, dlogits;
    int64_t rows, classes, ignore_index;
    double label_smoothing;
} ts_cross_entropy_args;

#endif /* TS_KERNEL_ARGS_H */
