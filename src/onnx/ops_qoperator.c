/* ops_qoperator.c — ONNX's integer operators in integer arithmetic (docs/QUANTIZATION.md, "ONNX"):
 * MatMulInteger, QLinearMatMul, ConvInteger, QLinearConv on uint8 / int8 operands.
 *
 * The products are ts_quantized_linear_acc's exact int32 sums (include/tessera/quant.h): A is a
 * per-tensor quint8 / qint8 tensor, B the weight as qint8 [N, K] per tensor or per channel (a uint8
 * B and its zero points are moved down by 128, which leaves every b - b_zp unchanged). A per-row
 * zero point of A is applied afterwards in int64: acc - a_zp[m] * sum_k (b[k, n] - b_zp[n]), then
 * wrapped to int32 as ONNX's int32 accumulation. Convolutions are an exact im2col of x (the
 * padding reads x_zp, a real zero) and the same int8 GEMM per group: ts_quantized_conv2d gives only
 * requantized outputs, in float64, not ONNX Runtime's float32 arithmetic nor ConvInteger's int32.
 *
 * Requantization is ONNX Runtime's (MLAS's MlasRequantizeOutput): the multiplier a_scale *
 * b_scale[n] / y_scale in float32, y = saturate(round_half_even((float)acc * multiplier) + y_zp);
 * a QLinearConv bias (int32) is added to acc in int32 first. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "onnx/ops_nn.h"
#include "onnx/qoperator.h"
#include "ops/quant_internal.h"
#include "tessera/quant.h"

/* ------------------------------------------------------------------ operands */
static bool check_u8(const tso_node *n, ts_tensor *t, const char *what) {
    if (!t) return tso_fail(n, TS_ERR_ARG, "the input %s is required", what);
    if (ts_dtype_of(t) != TS_U8 && ts_dtype_of(t) != TS_I8)
        return tso_fail(n, TS_ERR_DTYPE, "%s must be uint8 or int8, got %s", what, tsi_desc(t));
    return true;
}

static bool check_scale(const tso_node *n, ts_tensor *t, const char *what) {
    if (!t) return tso_fail(n, TS_ERR_ARG, "the input %s is required", what);
    if (ts_dtype_of(t) != TS_F32)
        return tso_fail(n, TS_ERR_DTYPE, "%s must be float32, got %s", what, tsi_desc(t));
    return true;
}

static bool check_one(const tso_node *n, ts_tensor *t, const char *what) {
    if (ts_numel(t) != 1)
        return tso_fail(n, TS_ERR_UNSUPPORTED, "%s must be one value (per tensor), got %s", what,
                        tsi_desc(t));
    return true;
}

/* one zero point (uint8 / int8 / int64) to the host */
static bool read_zp(const tso_node *n, ts_tensor *t, int64_t *v, const char *what) {
    if (tso_q_host_byte(t, v)) return true; /* one cpu byte: read where it lies */
    ts_tensor *t64 = ts_to_dtype(t, TS_I64);
    return t64 ? tso_read_int(n, t64, v, what) : tso_fail_pending(n);
}

/* a zero point or scale t of count values (1, or len: one per row / column / channel) as a flat
 * vector; NULL with the error naming `what` otherwise. A vector [len] or an N-D tensor whose only
 * dim past 1 is len is accepted. */
static bool flat_fits(const tso_node *n, ts_tensor *t, int64_t len, const char *what,
                      const char *per) {
    int64_t c = ts_numel(t);
    int big = 0;
    for (int d = 0; d < ts_ndim(t); d++) big += ts_size(t, d) != 1;
    if (c == 1 || (c == len && big <= 1)) return true;
    return tso_fail(n, TS_ERR_SHAPE, "%s %s does not fit: one value or one per %s (%lld) expected",
                    what, tsi_desc(t), per, (long long)len);
}
static ts_tensor *flat_param(const tso_node *n, ts_tensor *t, int64_t len, const char *what,
                             const char *per) {
    return flat_fits(n, t, len, what, per) ? ts_reshape(t, TS_SHAPE(ts_numel(t))) : NULL;
}

/* the weight w [N, K] (uint8 / int8) with its zero points (NULL: 0; 1 or N values) as a qint8
 * tensor per tensor or per channel (axis 0); uint8 moved down by 128 with its zero points */
static ts_tensor *qweight(const tso_node *n, ts_tensor *w, ts_tensor *zp) {
    const bool u8 = ts_dtype_of(w) == TS_U8;
    int64_t rows = ts_size(w, 0);
    ts_tensor *r = u8 ? ts_to_dtype(ts_sub_scalar(ts_to_dtype(w, TS_I16), 128), TS_I8) : w;
    ts_tensor *z = zp ? ts_to_dtype(zp, TS_I64) : NULL;
    if (z && u8) z = ts_sub_scalar(z, 128);
    if (!r || (zp && !z)) return tso_fail_pending(n), NULL;
    if (!z || ts_numel(z) == 1) {
        int64_t v = u8 ? -128 : 0;
        if (z && !read_zp(n, z, &v, "the weight's zero point")) return NULL;
        return ts_make_per_tensor_quantized_tensor(r, 1.0, v);
    }
    ts_tensor *ones = ts_ones(TS_SHAPE(rows), (ts_opts){.dtype = TS_F64});
    return ts_make_per_channel_quantized_tensor(r, ones, ts_to(z, ts_cpu()), 0);
}

/* the activation a [.., K] as a per-tensor quantized tensor with zero point zp (0 when NULL) */
static ts_tensor *qact(const tso_node *n, ts_tensor *a, ts_tensor *zp) {
    int64_t v = 0;
    if (zp && !read_zp(n, zp, &v, "the zero point of A")) return NULL;
    return ts_make_per_tensor_quantized_tensor(ts_contiguous(a), 1.0, v);
}

/* an exact sum in int64 -> int32, wrapping as ONNX's int32 accumulation */
static ts_tensor *wrap32(ts_tensor *acc) { return ts_to_dtype(acc, TS_I32); }

/* ------------------------------------------------------------------ A @ B in integers */
/* sum_k (a[.., m, k] - a_zp) (b[.., k, n] - b_zp[n]) as int32 [.., M, N] (numpy's matmul shapes);
 * a_zp: NULL, one value or one per row (M); b_zp: NULL, one value or one per column (N) */
static ts_tensor *node_qweight(const tso_node *n, ts_tensor *w_in, ts_tensor *zp_in, ts_tensor *ws,
                               ts_tensor *wzp);

static ts_tensor *int_matmul(const tso_node *n, ts_tensor *a, ts_tensor *azp, ts_tensor *b,
                             ts_tensor *bzp) {
    ts_tensor *const b_in = b, *const bzp_in = bzp; /* the node's inputs: node_qweight's key */
    const bool a1 = ts_ndim(a) == 1, b1 = ts_ndim(b) == 1;
    if (ts_ndim(a) < 1 || ts_ndim(b) < 1)
        return tso_fail(n, TS_ERR_SHAPE, "A %s and B %s must have a dim at least", tsi_desc(a),
                        tsi_desc(b)),
               NULL;
    if (a1) a = ts_unsqueeze(a, 0);
    if (b1) b = ts_unsqueeze(b, 1);
    int ra = ts_ndim(a), rb = ts_ndim(b);
    int64_t m = ts_size(a, ra - 2), k = ts_size(a, ra - 1), cols = ts_size(b, rb - 1);
    if (ts_size(b, rb - 2) != k)
        return tso_fail(n, TS_ERR_SHAPE, "A %s and B %s do not multiply", tsi_desc(a), tsi_desc(b)),
               NULL;
    if (azp && !(azp = flat_param(n, azp, m, "a_zero_point", "row of A"))) return NULL;
    if (bzp && !(bzp = flat_param(n, bzp, cols, "b_zero_point", "column of B"))) return NULL;
    const bool per_row = azp && ts_numel(azp) > 1;
    ts_tensor *xzp = per_row ? NULL : azp;
    ts_tensor *acc;
    if (rb == 2) {
        /* a weight (the same B at every run) transposed and packed once: node_qweight's cache */
        ts_tensor *qw = node_qweight(n, b_in, bzp_in, ts_transpose(b, 0, 1), bzp);
        acc = qw ? ts_quantized_linear_acc(qact(n, a, xzp), qw, NULL) : NULL;
        ts_release(qw);
    } else {
        /* batched B: numpy's broadcast of the batch dims, one product per batch */
        ts_shape sa = ts_shape_of(a), sb = ts_shape_of(b), bs = {0};
        int nb = (ra > rb ? ra : rb) - 2;
        bs.ndim = nb;
        int64_t count = 1;
        for (int d = 0; d < nb; d++) {
            int da = d - (nb - (ra - 2)), db = d - (nb - (rb - 2));
            int64_t x = da >= 0 ? sa.dims[da] : 1, y = db >= 0 ? sb.dims[db] : 1;
            if (x != y && x != 1 && y != 1)
                return tso_fail(n, TS_ERR_SHAPE, "the batch dims of A %s and B %s do not broadcast",
                                tsi_desc(a), tsi_desc(b)),
                       NULL;
            bs.dims[d] = x == 1 ? y : x;
            count *= bs.dims[d];
        }
        if (count > 65536)
            return tso_fail(n, TS_ERR_UNSUPPORTED, "%lld batches of B", (long long)count), NULL;
        ts_shape ea = bs, eb = bs;
        ea.ndim = eb.ndim = nb + 2;
        ea.dims[nb] = m, ea.dims[nb + 1] = k, eb.dims[nb] = k, eb.dims[nb + 1] = cols;
        ts_tensor *a3 = ts_reshape(ts_contiguous(ts_expand(a, ea)), TS_SHAPE(count, m, k));
        ts_tensor *b3 = ts_reshape(ts_contiguous(ts_expand(b, eb)), TS_SHAPE(count, k, cols));
        ts_tensor **parts = calloc((size_t)count, sizeof *parts);
        if (!parts) return tso_fail(n, TS_ERR_OOM, "out of host memory"), NULL;
        bool ok = a3 && b3;
        for (int64_t i = 0; ok && i < count; i++)
            ok = (parts[i] = ts_quantized_linear_acc(
                      qact(n, ts_select(a3, 0, i), xzp),
                      qweight(n, ts_transpose(ts_select(b3, 0, i), 0, 1), bzp), NULL)) != NULL;
        ts_shape es = ea;
        es.dims[nb + 1] = cols;
        acc = ok ? ts_reshape(ts_stack(parts, (int)count, 0), es) : NULL;
        free(parts);
    }
    if (acc && per_row) {
        /* (a - a_zp[m]) . (b - b_zp) = a . (b - b_zp) - a_zp[m] * colsum(b - b_zp) */
        ts_tensor *bc = ts_to_dtype(b, TS_I64);
        if (bzp) bc = ts_sub(bc, ts_to_dtype(bzp, TS_I64));
        ts_tensor *colsum = ts_sum_dim(bc, rb - 2, true); /* [.., 1, N] */
        ts_tensor *zr = ts_reshape(ts_to_dtype(azp, TS_I64), TS_SHAPE(m, 1));
        acc = wrap32(ts_sub(ts_to_dtype(acc, TS_I64), ts_mul(zr, colsum)));
    }
    if (acc && a1) acc = ts_squeeze_dim(acc, ts_ndim(acc) - 2);
    if (acc && b1) acc = ts_squeeze_dim(acc, ts_ndim(acc) - 1);
    return acc ? acc : (tso_fail_pending(n), NULL);
}

/* ------------------------------------------------------------------ requantization */
/* ONNX Runtime's: saturate(round_half_even((float)acc * mult) + zp), mult float32 broadcasting
 * against acc, as zp's type (one value, uint8 or int8); relu: the lower bound raised to zp */
static ts_tensor *requantize(const tso_node *n, ts_tensor *acc, ts_tensor *mult, ts_tensor *zp,
                             bool relu) {
    int64_t z;
    if (!read_zp(n, zp, &z, "y_zero_point")) return NULL;
    const bool s8 = ts_dtype_of(zp) == TS_I8;
    double lo = s8 ? -128 : 0, hi = s8 ? 127 : 255;
    if (relu && (double)z > lo) lo = (double)z;
    ts_tensor *y = ts_round(ts_mul(ts_to_dtype(acc, TS_F32), mult));
    y = ts_add_scalar(ts_to_dtype(y, TS_F64), (double)z);
    return ts_to_dtype(ts_clamp(y, lo, hi), s8 ? TS_I8 : TS_U8);
}

/* ------------------------------------------------------------------ MatMulInteger, QLinearMatMul
 */
TSO_RUN(run_matmul_integer) {
    (void)c;
    ts_tensor *azp = tso_nn_opt(n, in, 2), *bzp = tso_nn_opt(n, in, 3);
    if (!check_u8(n, in[0], "A") || !check_u8(n, in[1], "B") ||
        (azp && !check_u8(n, azp, "a_zero_point")) || (bzp && !check_u8(n, bzp, "b_zero_point")))
        return false;
    out[0] = int_matmul(n, in[0], azp, in[1], bzp);
    return out[0] != NULL;
}

bool tso_q_run_linear_matmul(const tso_node *n, ts_tensor *const *in, ts_tensor **out, bool relu) {
    if (!check_u8(n, in[0], "a") || !check_scale(n, in[1], "a_scale") ||
        !check_u8(n, in[2], "a_zero_point") || !check_u8(n, in[3], "b") ||
        !check_scale(n, in[4], "b_scale") || !check_u8(n, in[5], "b_zero_point") ||
        !check_scale(n, in[6], "y_scale") || !check_u8(n, in[7], "y_zero_point") ||
        !check_one(n, in[6], "y_scale") || !check_one(n, in[7], "y_zero_point"))
        return false;
    int ra = ts_ndim(in[0]), rb = ts_ndim(in[3]);
    int64_t rows = ra >= 2 ? ts_size(in[0], ra - 2) : 1,
            cols = rb >= 2 ? ts_size(in[3], rb - 1) : 1;
    ts_tensor *sa = flat_param(n, in[1], rows, "a_scale", "row of a");
    ts_tensor *sb = sa ? flat_param(n, in[4], cols, "b_scale", "column of b") : NULL;
    if (!sb) return false;
    ts_tensor *acc = int_matmul(n, in[0], in[2], in[3], in[5]);
    if (!acc) return false;
    /* a_scale * b_scale / y_scale in float32, in ONNX Runtime's order */
    ts_tensor *ma =
        ts_numel(sa) == 1 ? ts_reshape(sa, TS_SHAPE()) : ts_reshape(sa, TS_SHAPE(rows, 1));
    ts_tensor *mult = ts_div(ts_mul(ma, ts_numel(sb) == 1 ? ts_reshape(sb, TS_SHAPE()) : sb),
                             ts_reshape(in[6], TS_SHAPE()));
    if (mult && ts_ndim(mult) == 2 && (ra == 1 || rb == 1))
        mult = ts_reshape(mult, TS_SHAPE(ts_numel(mult))); /* a vector operand: its dim dropped */
    out[0] = mult ? requantize(n, acc, mult, ts_reshape(in[7], TS_SHAPE()), relu) : NULL;
    return out[0] || tso_fail_pending(n);
}

bool tso_q_run_gemm(const tso_node *n, ts_tensor *const *in, ts_tensor **out) {
    if (!check_u8(n, in[0], "a") || !check_scale(n, in[1], "a_scale") ||
        !check_u8(n, in[2], "a_zero_point") || !check_u8(n, in[3], "b") ||
        !check_scale(n, in[4], "b_scale") || !check_u8(n, in[5], "b_zero_point") ||
        !check_scale(n, in[6], "y_scale") || !check_u8(n, in[7], "y_zero_point") ||
        !check_one(n, in[1], "a_scale") || !check_one(n, in[2], "a_zero_point") ||
        !check_one(n, in[6], "y_scale") || !check_one(n, in[7], "y_zero_point"))
        return false;
    if (tso_attr_int(n, "transA", 0) || tso_attr_float(n, "alpha", 1) != 1 ||
        tso_attr_float(n, "beta", 1) != 1)
        return tso_fail(n, TS_ERR_UNSUPPORTED,
                        "transA, alpha and beta: only 0, 1 and 1 run in integers");
    ts_tensor *a = in[0], *b = in[3], *bias = n->n_in > 8 ? tso_nn_opt(n, in, 8) : NULL;
    const bool tb = tso_attr_int(n, "transB", 0) != 0;
    if (ts_ndim(a) != 2 || ts_ndim(b) != 2 || ts_size(b, tb ? 1 : 0) != ts_size(a, 1))
        return tso_fail(n, TS_ERR_SHAPE, "A %s and B %s (transB %d) do not multiply", tsi_desc(a),
                        tsi_desc(b), (int)tb);
    int64_t cols = ts_size(b, tb ? 0 : 1);
    if (bias && (ts_dtype_of(bias) != TS_I32 || ts_numel(bias) != cols))
        return tso_fail(n, TS_ERR_SHAPE, "the bias C must be int32 of %lld values, got %s",
                        (long long)cols, tsi_desc(bias));
    ts_tensor *sb = flat_param(n, in[4], cols, "b_scale", "column of B");
    ts_tensor *bzp = sb ? flat_param(n, in[5], cols, "b_zero_point", "column of B") : NULL;
    if (!bzp) return false;
    ts_tensor *w = tb ? b : ts_transpose(b, 0, 1);
    ts_tensor *qw = node_qweight(n, b, in[5], w, bzp); /* kept across runs: packed once */
    ts_tensor *acc = qw ? ts_quantized_linear_acc(qact(n, a, in[2]), qw,
                                                  bias ? ts_reshape(bias, TS_SHAPE(cols)) : NULL)
                        : NULL;
    ts_release(qw);
    ts_tensor *mult = ts_div(
        ts_mul(ts_reshape(in[1], TS_SHAPE()), ts_numel(sb) == 1 ? ts_reshape(sb, TS_SHAPE()) : sb),
        ts_reshape(in[6], TS_SHAPE()));
    out[0] = acc && mult ? requantize(n, acc, mult, ts_reshape(in[7], TS_SHAPE()), false) : NULL;
    return out[0] || tso_fail_pending(n);
}

TSO_RUN(run_qlinear_matmul) {
    (void)c;
    return tso_q_run_linear_matmul(n, in, out, false);
}

/* ------------------------------------------------------------------ convolutions */
/* sum over the window of (x - x_zp)(w - w_zp[m]) as int32 [N, M, spatial...]: 1-D or 2-D, the
 * node's Conv attributes; x_zp one value, w_zp one value or one per output channel */
static ts_tensor *int_conv(const tso_node *n, ts_tensor *x, ts_tensor *xzp, ts_tensor *w,
                           ts_tensor *wzp) {
    if (ts_ndim(x) < 3 || ts_ndim(w) != ts_ndim(x))
        return tso_fail(n, TS_ERR_SHAPE,
                        "expected x [N, C, D1, ...] and w [M, C / group, k1, ...], got %s and %s",
                        tsi_desc(x), tsi_desc(w)),
               NULL;
    if (ts_ndim(x) > 4)
        return tso_fail(n, TS_ERR_UNSUPPORTED,
                        "kernel_shape: %d spatial dims (1 or 2 run in integers)", ts_ndim(x) - 2),
               NULL;
    if (xzp && !check_one(n, xzp, "x_zero_point")) return NULL;
    int64_t mo = ts_size(w, 0);
    if (wzp && !(wzp = flat_param(n, wzp, mo, "w_zero_point", "output channel"))) return NULL;
    int64_t z = 0;
    if (xzp && !read_zp(n, xzp, &z, "x_zero_point")) return NULL;
    /* x - x_zp in float32 (exact), so that padding, a zero, is the real zero */
    ts_tensor *xc = ts_sub_scalar(ts_to_dtype(x, TS_F32), (double)z), *wk = w;
    ts_conv2d_opts o;
    bool one_d;
    if (!xc || !tso_nn_conv2d_setup(n, &xc, &wk, &o, &one_d)) return tso_fail_pending(n), NULL;
    int kern[2] = {(int)ts_size(wk, 2), (int)ts_size(wk, 3)};
    int64_t nb = ts_size(xc, 0), ch = ts_size(xc, 1), g = o.groups;
    if (g < 1 || ch % g || mo % g || ts_size(wk, 1) * g != ch)
        return tso_fail(n, TS_ERR_SHAPE, "group %lld does not fit x %s and w %s", (long long)g,
                        tsi_desc(x), tsi_desc(w)),
               NULL;
    int64_t oh = (ts_size(xc, 2) + 2 * o.padding[0] - o.dilation[0] * (kern[0] - 1) - 1) /
                     o.stride[0] +
                 1,
            ow = (ts_size(xc, 3) + 2 * o.padding[1] - o.dilation[1] * (kern[1] - 1) - 1) /
                     o.stride[1] +
                 1;
    /* the patches [N, C kh kw, L] back in x's integers, then [N, L, C kh kw] */
    ts_conv2d_opts io = o;
    io.groups = 0;
    ts_tensor *cols =
        ts_to_dtype(ts_add_scalar(ts_im2col(xc, kern, io), (double)z), ts_dtype_of(x));
    cols = ts_transpose(cols, 1, 2);
    int64_t kk = ts_size(wk, 1) * kern[0] * kern[1], mg = mo / g;
    ts_tensor *w2 = ts_reshape(ts_contiguous(wk), TS_SHAPE(mo, kk));
    ts_tensor **parts = calloc((size_t)g, sizeof *parts);
    if (!parts) return tso_fail(n, TS_ERR_OOM, "out of host memory"), NULL;
    bool ok = cols && w2;
    for (int64_t i = 0; ok && i < g; i++) {
        ts_tensor *zi = wzp && ts_numel(wzp) > 1 ? ts_narrow(wzp, 0, i * mg, mg) : wzp;
        ts_tensor *xi = g == 1 ? cols : ts_narrow(cols, 2, i * kk, kk);
        ts_tensor *wi = g == 1 ? w2 : ts_narrow(w2, 0, i * mg, mg);
        ok = (parts[i] = ts_quantized_linear_acc(qact(n, xi, xzp),
                                                 qweight(n, ts_contiguous(wi), zi), NULL)) != NULL;
    }
    ts_tensor *acc = ok ? (g == 1 ? parts[0] : ts_cat(parts, (int)g, 2)) : NULL;
    free(parts);
    acc = ts_reshape(ts_transpose(acc, 1, 2), TS_SHAPE(nb, mo, oh, ow));
    if (acc && one_d) acc = ts_squeeze_dim(acc, 2);
    return acc ? acc : (tso_fail_pending(n), NULL);
}

TSO_RUN(run_conv_integer) {
    (void)c;
    ts_tensor *xzp = tso_nn_opt(n, in, 2), *wzp = tso_nn_opt(n, in, 3);
    if (!check_u8(n, in[0], "x") || !check_u8(n, in[1], "w") ||
        (xzp && !check_u8(n, xzp, "x_zero_point")) || (wzp && !check_u8(n, wzp, "w_zero_point")))
        return false;
    out[0] = int_conv(n, in[0], xzp, in[1], wzp);
    return out[0] != NULL;
}

/* The node's weight as qweight makes it, kept in the node's state while the inputs it came from
 * stay the same tensors (held) with the same data and version: the same storage at every run, so
 * that the kernels' cache of packed weights (keyed by storage) hits. Returned retained. */
typedef struct qconv_state {
    ts_tensor *w, *zp, *qw;
    uint64_t wv, zv;
    uintptr_t wd, zd;
    /* the requantization multiplier x_scale * w_scale / y_scale of the scales in[1], in[4],
     * in[6] (held, with their versions and data), NULL until made */
    ts_tensor *sc[3], *mult;
    uint64_t scv[3];
    uintptr_t scd[3];
    /* the options tso_nn_conv2d_setup read for a 2-D input of shape gx and a weight of shape gw
     * that it left as they were (no padding of its own): the attributes are the node's, so the
     * two shapes key them (geom_ok false until read) */
    bool geom_ok;
    ts_shape gx, gw;
    ts_conv2d_opts geom;
} qconv_state;

static void qconv_state_free(void *p) {
    qconv_state *s = p;
    if (!s) return;
    ts_release(s->w), ts_release(s->zp), ts_release(s->qw), ts_release(s->mult);
    for (int i = 0; i < 3; i++) ts_release(s->sc[i]);
    free(s);
}

static pthread_mutex_t qconv_state_lock = PTHREAD_MUTEX_INITIALIZER;

/* the node's cached weight for these inputs (retained), NULL when there is none */
static ts_tensor *node_qweight_cached(const tso_node *n, ts_tensor *w_in, ts_tensor *zp_in) {
    tso_node *nm = (tso_node *)n; /* the state is the node's own cache */
    ts_tensor *q = NULL;
    pthread_mutex_lock(&qconv_state_lock);
    const qconv_state *s = nm->free_state == qconv_state_free ? nm->state : NULL;
    const uintptr_t zd = zp_in ? ts_data_ptr(zp_in) : 0; /* no zero point: none */
    if (s && s->w == w_in && s->zp == zp_in && s->wv == ts_version(w_in) &&
        s->zv == ts_version(zp_in) && s->wd == ts_data_ptr(w_in) && s->zd == zd)
        q = ts_retain(s->qw);
    pthread_mutex_unlock(&qconv_state_lock);
    return q;
}

static ts_tensor *node_qweight(const tso_node *n, ts_tensor *w_in, ts_tensor *zp_in, ts_tensor *ws,
                               ts_tensor *wzp) {
    tso_node *nm = (tso_node *)n;
    ts_tensor *q = node_qweight_cached(n, w_in, zp_in);
    if (q) return q;
    q = qweight(n, ts_contiguous(ws), wzp); /* the scope's */
    if (!q || (nm->state && nm->free_state != qconv_state_free)) return ts_retain(q);
    qconv_state *f = malloc(sizeof *f);
    if (!f) return ts_retain(q);
    *f = (qconv_state){.w = ts_retain(w_in), .zp = ts_retain(zp_in), .qw = ts_retain(q)};
    f->wv = ts_version(w_in), f->zv = ts_version(zp_in), f->wd = ts_data_ptr(w_in);
    f->zd = zp_in ? ts_data_ptr(zp_in) : 0;
    pthread_mutex_lock(&qconv_state_lock);
    qconv_state *old = nm->free_state == qconv_state_free ? nm->state : NULL;
    nm->state = f;
    nm->free_state = qconv_state_free;
    pthread_mutex_unlock(&qconv_state_lock);
    qconv_state_free(old);
    return ts_retain(q);
}

/* the node's cached convolution options for x and w (false: none cached for these shapes) */
static bool node_geom_get(const tso_node *n, ts_tensor *x, ts_tensor *w, ts_conv2d_opts *o) {
    tso_node *nm = (tso_node *)n;
    pthread_mutex_lock(&qconv_state_lock);
    const qconv_state *s = nm->free_state == qconv_state_free ? nm->state : NULL;
    const bool hit = s && s->geom_ok && tsi_shape_equal(s->gx, ts_shape_of(x)) &&
                     tsi_shape_equal(s->gw, ts_shape_of(w));
    if (hit) *o = s->geom;
    pthread_mutex_unlock(&qconv_state_lock);
    return hit;
}

/* kept in the node's state once node_qweight has made it */
static void node_geom_put(const tso_node *n, ts_tensor *x, ts_tensor *w, const ts_conv2d_opts *o) {
    tso_node *nm = (tso_node *)n;
    pthread_mutex_lock(&qconv_state_lock);
    qconv_state *s = nm->free_state == qconv_state_free ? nm->state : NULL;
    if (s) s->geom_ok = true, s->gx = ts_shape_of(x), s->gw = ts_shape_of(w), s->geom = *o;
    pthread_mutex_unlock(&qconv_state_lock);
}

/* The multiplier x_scale * w_scale / y_scale (w_scale flat: one value or mo, checked), as a
 * reference the caller releases: the node's cached one while the three scales are the same tensors
 * with the same data and versions (made at the first run after node_qweight made the node's
 * state). */
static ts_tensor *node_mult(const tso_node *n, ts_tensor *const *in, int64_t mo) {
    tso_node *nm = (tso_node *)n;
    ts_tensor *const sc[3] = {in[1], in[4], in[6]};
    ts_tensor *m = NULL;
    pthread_mutex_lock(&qconv_state_lock);
    qconv_state *s = nm->free_state == qconv_state_free ? nm->state : NULL;
    bool same = s && s->mult;
    for (int i = 0; same && i < 3; i++)
        same =
            s->sc[i] == sc[i] && s->scv[i] == ts_version(sc[i]) && s->scd[i] == ts_data_ptr(sc[i]);
    if (same) m = ts_retain(s->mult);
    pthread_mutex_unlock(&qconv_state_lock);
    if (m) return m;
    ts_tensor *sw = flat_param(n, in[4], mo, "w_scale", "output channel");
    if (!sw) return NULL;
    m = ts_div(
        ts_mul(ts_reshape(in[1], TS_SHAPE()), ts_numel(sw) == 1 ? ts_reshape(sw, TS_SHAPE()) : sw),
        ts_reshape(in[6], TS_SHAPE())); /* the scope's */
    if (!m) return NULL;
    pthread_mutex_lock(&qconv_state_lock);
    s = nm->free_state == qconv_state_free ? nm->state : NULL;
    if (s) {
        ts_release(s->mult);
        s->mult = ts_retain(m);
        for (int i = 0; i < 3; i++) {
            ts_release(s->sc[i]);
            s->sc[i] = ts_retain(sc[i]), s->scv[i] = ts_version(sc[i]);
            s->scd[i] = ts_data_ptr(sc[i]);
        }
    }
    pthread_mutex_unlock(&qconv_state_lock);
    return ts_retain(m);
}

/* QLinearConv in one call of ts_qlinear_conv2d (the int8 kernels, ORT's float32 requantization),
 * when the pads are symmetric (ONNX's asymmetric pads would pad x with 0, not x_zp: those take
 * int_conv's route, *done left false). sw: w_scale flat. */
static bool direct_qconv(const tso_node *n, ts_tensor *const *in, ts_tensor *b, bool relu,
                         ts_tensor **out, bool *done) {
    ts_tensor *x = in[0], *w = in[3];
    if (ts_ndim(x) < 3 || ts_ndim(w) != ts_ndim(x) || ts_ndim(x) > 4)
        return true; /* int_conv's errors */
    int64_t mo = ts_size(w, 0), z = 0, yz = 0;
    if (!check_one(n, in[2], "x_zero_point")) return false;
    if (!flat_fits(n, in[5], mo, "w_zero_point", "output channel") ||
        !read_zp(n, in[2], &z, "x_zero_point") || !read_zp(n, in[7], &yz, "y_zero_point"))
        return false;
    ts_tensor *xs = x, *ws = w;
    ts_conv2d_opts o;
    bool one_d = false;
    if (!node_geom_get(n, x, w, &o)) { /* the attributes read once per node and shapes */
        if (!tso_nn_conv2d_setup(n, &xs, &ws, &o, &one_d)) return false;
        if (ts_size(xs, ts_ndim(xs) - 1) != ts_size(x, ts_ndim(x) - 1) ||
            (!one_d && ts_size(xs, 2) != ts_size(x, 2)))
            return true; /* padded here with 0: not x_zp */
        if (!one_d && xs == x && ws == w) node_geom_put(n, x, w, &o);
    }
    /* channels_last where the device prefers it (decision 0053): the output follows the input's
     * format, so only a chain's first convolution transposes (an NCHW input as the kernel pads
     * it, other strides by a copy); the bytes are viewed, not copied */
    ts_tensor *xl = xs;
    const bool cl = !one_d && ts_ndim(xs) == 4 && tsi_qconv_prefers_channels_last(xs);
    if (cl && !ts_is_contiguous(xs)) xl = ts_contiguous_format(xs, TS_CHANNELS_LAST);
    ts_tensor *qx = xl ? tsi_quantized_view("qlinear_conv2d", xl, 1.0, z) : NULL;
    /* the flat zero points made only when the node's weight is not cached */
    ts_tensor *qw = node_qweight_cached(n, w, in[5]);
    if (!qw) {
        ts_tensor *wzp = flat_param(n, in[5], mo, "w_zero_point", "output channel");
        qw = wzp ? node_qweight(n, w, in[5], ws, wzp) : NULL;
    }
    ts_tensor *mult = qw ? node_mult(n, in, mo) : NULL; /* after the state node_qweight made */
    if (!mult || !qx || !qw) return ts_release(qw), ts_release(mult), tso_fail_pending(n);
    const int64_t st[2] = {o.stride[0], o.stride[1]}, pd[2] = {o.padding[0], o.padding[1]},
                  dl[2] = {o.dilation[0], o.dilation[1]};
    ts_tensor *y = (cl ? tsi_qlinear_conv2d_cl
                       : ts_qlinear_conv2d)(qx, qw, b, st, pd, dl, o.groups, mult, yz,
                                            ts_dtype_of(in[7]) == TS_I8 ? TS_I8 : TS_U8, relu);
    ts_release(qw), ts_release(mult);
    if (y && one_d) y = ts_squeeze_dim(y, 2);
    if (!y) return tso_fail_pending(n);
    out[0] = y;
    *done = true;
    return true;
}

bool tso_q_run_linear_conv(const tso_node *n, ts_tensor *const *in, ts_tensor **out, bool relu) {
    if (!check_u8(n, in[0], "x") || !check_scale(n, in[1], "x_scale") ||
        !check_u8(n, in[2], "x_zero_point") || !check_u8(n, in[3], "w") ||
        !check_scale(n, in[4], "w_scale") || !check_u8(n, in[5], "w_zero_point") ||
        !check_scale(n, in[6], "y_scale") || !check_u8(n, in[7], "y_zero_point") ||
        !check_one(n, in[1], "x_scale") || !check_one(n, in[6], "y_scale") ||
        !check_one(n, in[7], "y_zero_point"))
        return false;
    ts_tensor *b = tso_nn_opt(n, in, 8);
    int64_t mo = ts_size(in[3], 0);
    if (b && (ts_dtype_of(b) != TS_I32 || ts_ndim(b) != 1 || ts_size(b, 0) != mo))
        return tso_fail(n, TS_ERR_SHAPE, "the bias B must be int32 [%lld], got %s", (long long)mo,
                        tsi_desc(b));
    if (!flat_fits(n, in[4], mo, "w_scale", "output channel")) return false;
    bool done = false;
    if (!direct_qconv(n, in, b, relu, out, &done)) return false;
    if (done) return true;
    ts_tensor *sw = flat_param(n, in[4], mo, "w_scale", "output channel");
    if (!sw) return false;
    ts_tensor *acc = int_conv(n, in[0], in[2], in[3], in[5]);
    if (!acc) return false;
    ts_shape col = tso_nn_along(ts_ndim(acc), 1, mo);
    if (b) acc = wrap32(ts_add(ts_to_dtype(acc, TS_I64), ts_reshape(ts_to_dtype(b, TS_I64), col)));
    ts_tensor *mult =
        ts_div(ts_mul(ts_reshape(in[1], TS_SHAPE()),
                      ts_numel(sw) == 1 ? ts_reshape(sw, TS_SHAPE()) : ts_reshape(sw, col)),
               ts_reshape(in[6], TS_SHAPE()));
    out[0] = acc && mult ? requantize(n, acc, mult, ts_reshape(in[7], TS_SHAPE()), relu) : NULL;
    return out[0] || tso_fail_pending(n);
}

TSO_RUN(run_qlinear_conv) {
    (void)c;
    return tso_q_run_linear_conv(n, in, out, false);
}

/* ------------------------------------------------------------------ the table */
const tso_op_def tso_ops_quant[] = {
    {"MatMulInteger", 10, run_matmul_integer, NULL, false},
    {"QLinearMatMul", 10, run_qlinear_matmul, NULL, false},
    {"ConvInteger", 10, run_conv_integer, tso_nn_check_conv, false},
    {"QLinearConv", 10, run_qlinear_conv, tso_nn_check_conv, false},
    {NULL, 0, NULL, NULL, false},
};
