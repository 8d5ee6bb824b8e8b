/* backend.h — the interface every device backend implements: memory and kernels over raw pointers.
 */
#ifndef TS_BACKEND_H
#define TS_BACKEND_H

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

typedef enum ts_unary_op {
    TS_U_NEG,
    TS_U_ABS,
    TS_U_EXP,
    TS_U_LOG,
    TS_U_LOG1P,
    TS_U_SQRT,
    TS_U_RSQRT,
    TS_U_SIN,
    TS_U_COS,
    TS_U_TAN,
    TS_U_ASIN,
    TS_U_ACOS,
    TS_U_ATAN,
    TS_U_SINH,
    TS_U_COSH,
    TS_U_ASINH,
    TS_U_ACOSH,
    TS_U_ATANH,
    TS_U_ERF,
    TS_U_TANH,
    TS_U_SIGMOID,
    TS_U_RELU,
    TS_U_GELU,
    TS_U_SILU,
    TS_U_SOFTPLUS,
    TS_U_SIGN,
    TS_U_FLOOR,
    TS_U_CEIL,
    TS_U_ROUND,
    TS_U_RECIPROCAL,
    TS_U_SQUARE,
    TS_U_LOGICAL_NOT,
    TS_U_CLAMP, /* p0 = min, p1 = max; NAN = unbounded side */
    /* issue 52's special functions (kernel_math.h); float dtypes (the front ends promote) */
    TS_U_EXPM1,
    TS_U_EXP2,
    TS_U_LOG2,
    TS_U_LOG10,
    TS_U_ERFC,
    TS_U_LGAMMA,
    TS_U_TRUNC,
    TS_U_DIGAMMA,
    TS_U_ERFINV,
    TS_U_I0,
    TS_U_I0E,
    TS_U_I1,
    TS_U_I1E,
    TS_U_SINC,
    TS_U_FRAC,
    TS_U_DEG2RAD,
    TS_U_RAD2DEG,
    TS_U_POLYGAMMA,      /* p0 = n (an integer >= 0) */
    TS_U_LOGIT,          /* p0 = eps: x clamped to [eps, 1 - eps] first; NAN or < 0: not clamped */
    TS_U_NAN_TO_NUM,     /* NaN -> p0, +inf -> p1 */
    TS_U_NEGINF_TO,      /* -inf -> p0 (nan_to_num's second pass) */
    TS_U_NAN_TO_NUM_SYM, /* NaN -> p0, +inf -> p1, -inf -> -p1 (nan_to_num in one pass) */
    /* issue 52's activations (kernel_math_act.h); float dtypes (the front ends refuse others) */
    TS_U_ELU,        /* p0 = alpha, p1 = the input's scale (elu 1, celu 1 / alpha) */
    TS_U_SELU,       /* no numbers */
    TS_U_HARDTANH,   /* p0 = min_val, p1 = max_val */
    TS_U_HARDSHRINK, /* p0 = lambd */
    TS_U_SOFTSHRINK, /* p0 = lambd */
    TS_U_THRESHOLD,  /* p0 = threshold, p1 = value */
    TS_U_LOGSIGMOID, /* no numbers (nor the ones below) */
    TS_U_MISH,
    TS_U_HARDSIGMOID,
    TS_U_HARDSWISH,
    TS_U_LEAKY_RELU, /* p0 = negative_slope */
    /* torch.special's remaining functions (kernel_math_special.h); float dtypes (the front ends
     * promote) */
    TS_U_NDTR,
    TS_U_NDTRI,
    TS_U_LOG_NDTR,
    TS_U_ERFCX,
    TS_U_ENTR,
    TS_U_BESSEL_J0,
    TS_U_BESSEL_J1,
    TS_U_BESSEL_Y0,
    TS_U_BESSEL_Y1,
    TS_U_BESSEL_K0,
    TS_U_BESSEL_K1,
    TS_U_BESSEL_K0E, /* e^x K0(x) */
    TS_U_BESSEL_K1E,
    TS_U_SPH_BESSEL_J0,
    TS_U_AIRY_AI,
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

typedef enum ts_binary_op {
    TS_B_ADD,
    TS_B_SUB,
    TS_B_MUL,
    TS_B_DIV,
    TS_B_POW,
    TS_B_MAX,
    TS_B_MIN,
    TS_B_FMOD,
    TS_B_EQ,
    TS_B_NE,
    TS_B_LT,
    TS_B_LE,
    TS_B_GT,
    TS_B_GE, /* out dtype TS_BOOL */
    TS_B_AND,
    TS_B_OR, /* out dtype TS_BOOL */
    TS_B_RSUB,
    TS_B_RDIV,
    TS_B_RPOW, /* reversed: s - a, s / a, s ** a (scalar forms) */
    /* fused activation backwards, float dtypes (kernel_math.h): a = the incoming gradient,
     * b = relu output, sigmoid output, tanh output, gelu input, silu input */
    TS_B_RELU_BWD,
    TS_B_SIGMOID_BWD,
    TS_B_TANH_BWD,
    TS_B_GELU_BWD,
    TS_B_SILU_BWD,
    /* torch.floor_divide and torch.remainder (the divisor's sign); integers: x // 0 and x % 0
     * give 0 (a kernel must not trap) */
    TS_B_FLOORDIV,
    TS_B_REM,
    /* issue 52 (kernel_math.h's TS_SPECIAL_BINARY); float dtypes (the front ends promote) */
    TS_B_XLOGY,
    TS_B_XLOG1PY,
    TS_B_HYPOT,
    TS_B_COPYSIGN,
    TS_B_ATAN2,
    TS_B_NEXTAFTER,
    TS_B_LOGADDEXP,
    TS_B_LOGADDEXP2,
    /* issue 52: bitwise ops on integers and bool (shifts: integers; PyTorch's out-of-range
     * shifts: << gives 0, >> the sign), and torch.div(rounding_mode='trunc') (integers: x / 0
     * gives 0, the front end refuses it) */
    TS_B_BITAND,
    TS_B_BITOR,
    TS_B_BITXOR,
    TS_B_LSHIFT,
    TS_B_RSHIFT,
    TS_B_DIVTRUNC,
    /* torch.special's remaining functions of two arguments (kernel_math_special.h's
     * TS_SPECIAL_MORE_BINARY); float dtypes (the front ends promote); the polynomials take
     * b = n, truncated to an integer */
    TS_B_ZETA,
    TS_B_IGAMMA,
    TS_B_IGAMMAC,
    TS_B_CHEB_T,
    TS_B_CHEB_U,
    TS_B_CHEB_V,
    TS_B_CHEB_W,
    TS_B_SCHEB_T,
    TS_B_SCHEB_U,
    TS_B_SCHEB_V,
    TS_B_SCHEB_W,
    TS_B_HERMITE_H,
    TS_B_HERMITE_HE,
    TS_B_LAGUERRE_L,
    TS_B_LEGENDRE_P,
    TS_B_COUNT
} ts_binary_op;

typedef enum ts_reduce_op {
    TS_R_SUM,
    TS_R_PROD,
    TS_R_MEAN,
    TS_R_MAX,
    TS_R_MIN,
    TS_R_VAR, /* param = correction (Bessel: 1) */
    TS_R_STD, /* param = correction */
    TS_R_LOGSUMEXP,
    TS_R_ARGMAX,
    TS_R_ARGMIN, /* out dtype TS_I64; index within the flattened reduced dims; first
                    occurrence; NaN counts as the maximum/minimum like PyTorch */
    TS_R_NORM2,  /* sqrt of the sum of squares (linalg.vector_norm's 2-norm), float inputs only */
    TS_R_COUNT
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
