/* matmul_integer_to_float.c — ts_matmul_integer_to_float (include/tessera/quant.h): ONNX's
 * MatMulInteger -> Cast -> Mul(a_scale * b_scale) [-> Add(bias)] chain in one call, as ONNX
 * Runtime's com.microsoft MatMulIntegerToFloat: the exact int32 sums of the int8 GEMM
 * (kern_qlinear.c) scaled in its epilogue, so the int32 tensor never reaches memory. Each float
 * step is the one float32 operation the unfused ops make, in their order: the same bits.
 *
 * B is read where it lies ([K, N], uint8 bytes moved down by 128 as they are packed), so the
 * kernel's cache of packed weights (keyed by B's storage) holds the panels of a constant weight
 * across calls: no transposed copy of B per call. */
#include <stdlib.h>

#include "autograd/autograd.h"
#include "backend/backend.h"
#include "core/internal.h"
#include "ops/dynamic_quantize_internal.h"
#include "ops/quant_internal.h"
#include "tessera/quant.h"

#define MIF_MAX_K 65536 /* past it an int32 partial sum of u8 x s8 products could overflow */

static bool is_8bit(const ts_tensor *t) { return t->dtype == TS_U8 || t->dtype == TS_I8; }

/* t (any device, any layout) as count values of dtype dt on the host; false with the error set */
static bool host_values(ts_tensor *t, ts_dtype dt, void *out, int64_t count) {
    ts_scope_begin();
    ts_tensor *c = ts_contiguous(ts_to(ts_to_dtype(t, dt), ts_cpu()));
    const bool ok = c && ts_copy_to_host(c, out, (size_t)count * tsi_dtype_size(dt)) == TS_OK;
    ts_scope_end();
    return ok;
}

/* the checks of one optional parameter: dtype and a count of 1 or `many` values */
static bool check_param(const char *op, ts_tensor *t, const char *what, bool is_float,
                        int64_t many) {
    if (!t) return true;
    if (!tsi_check_input(op, t, what)) return false;
    if (is_float ? t->dtype != TS_F32 : !is_8bit(t))
        return tsi_error_set(TS_ERR_DTYPE, "%s: %s must be %s (got %s)", op, what,
                             is_float ? "float32" : "uint8 or int8", tsi_desc(t)),
               false;
    const int64_t n = tsi_numel(t->shape);
    if (n != 1 && n != many)
        return tsi_error_set(TS_ERR_SHAPE, "%s: %s must hold one value%s (got %s)", op, what,
                             many > 1 ? " or one per column of b" : "", tsi_desc(t)),
               false;
    return true;
}

/* the checks of b and its parameters against a's K; N in *n_out */
static bool check_b(const char *op, int64_t K, ts_tensor *b, ts_tensor *b_scale,
                    ts_tensor *b_zero_point, ts_tensor *bias, int64_t *n_out) {
    if (!tsi_check_input(op, b, "b") || !tsi_check_input(op, b_scale, "b_scale")) return false;
    if (!is_8bit(b))
        return tsi_error_set(TS_ERR_DTYPE, "%s: b must be uint8 or int8 (got %s)", op, tsi_desc(b)),
               false;
    if (b->shape.ndim != 2 || b->shape.dims[0] != K)
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s: a [.., K] and b [K, N] expected (K = %lld, got b %s)", op,
                             (long long)K, tsi_desc(b)),
               false;
    const int64_t N = b->shape.dims[1];
    if (K > MIF_MAX_K)
        return tsi_error_set(TS_ERR_UNSUPPORTED,
                             "%s: K = %lld is over %d, past which an int32 partial sum could "
                             "overflow",
                             op, (long long)K, MIF_MAX_K),
               false;
    if (!check_param(op, b_scale, "b_scale", true, N) ||
        !check_param(op, b_zero_point, "b_zero_point", false, N))
        return false;
    if (bias && (!tsi_check_input(op, bias, "bias") || bias->dtype != TS_F32 ||
                 tsi_numel(bias->shape) != N))
        return bias
               ? tsi_error_set(TS_ERR_SHAPE, "%s: bias must be float32 of %lld values (got %s)", op,
                               (long long)N, tsi_desc(bias)),
               false : false;
    *n_out = N;
    return true;
}

/* the device checks of a and b's side; *dev their device */
static bool check_device(const char *op, ts_tensor *a, ts_tensor *const *others, int n_others,
                         ts_device *dev) {
    ts_tensor *ts[8] = {a};
    for (int i = 0; i < n_others; i++) ts[1 + i] = others[i];
    if (!tsi_same_device(op, ts, 1 + n_others, false, dev) || !tsi_meta_refuse(op, a) ||
        !tsi_meta_refuse(op, others[0]) || !tsi_quant_kernel_ok(op, a))
        return false;
    if (tsi_needs_graph(ts + 1, n_others)) /* a: bytes, or the float x quantized without one */
        return tsi_error_set(TS_ERR_UNSUPPORTED,
                             "%s: no gradient through the integer product (a scale or the bias "
                             "requires grad; run the unfused ops, or no_grad)",
                             op),
               false;
    return true;
}

/* the product once checked: a's scale as and zero point az on the host; x_sums (NULL: the kernel
 * makes them) a's row sums when a is contiguous uint8 */
static ts_tensor *product(const char *op, ts_tensor *a, float as, int32_t az, ts_tensor *b,
                          ts_tensor *b_scale, ts_tensor *b_zero_point, ts_tensor *bias,
                          const int64_t *x_sums, ts_device dev) {
    const int64_t K = b->shape.dims[0], N = b->shape.dims[1];
    ts_shape os = a->shape;
    os.dims[os.ndim - 1] = N;
    int64_t M = 1;
    for (int d = 0; d < a->shape.ndim - 1; d++) M *= a->shape.dims[d];
    ts_tensor *out = tsi_new(op, os, TS_F32, dev), *ac = NULL, *bc = NULL;
    const int64_t nn = N ? N : 1;
    float *fmul = malloc((size_t)nn * sizeof *fmul), *bs = malloc((size_t)nn * sizeof *bs);
    float *fadd = bias ? malloc((size_t)nn * sizeof *fadd) : NULL;
    int32_t *wzp = malloc((size_t)nn * sizeof *wzp);
    if (!out) goto fail;
    if (!fmul || !bs || !wzp || (bias && !fadd)) {
        tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op);
        goto fail;
    }
    if (M * N == 0) goto done;
    /* the parameters on the host: the multiplier as * b_scale[n] in float32 (the graph's Mul of
     * the two scales), B's zero points moved as its bytes are */
    const int64_t nbs = tsi_numel(b_scale->shape),
                  nbz = b_zero_point ? tsi_numel(b_zero_point->shape) : 0;
    if (!host_values(b_scale, TS_F32, bs, nbs) ||
        (b_zero_point && !host_values(b_zero_point, TS_I32, wzp, nbz)) ||
        (bias && !host_values(bias, TS_F32, fadd, N)))
        goto fail;
    const bool bu8 = b->dtype == TS_U8;
    for (int64_t n = N - 1; n >= 0; n--) {
        fmul[n] = as * bs[nbs == 1 ? 0 : n];
        wzp[n] = (b_zero_point ? wzp[nbz == 1 ? 0 : n] : 0) - (bu8 ? 128 : 0);
    }
    if (!(ac = tsi_contiguous(op, a))) goto fail;
    bc = b->strides[0] >= 0 && b->strides[1] >= 0 ? ts_retain(b) : tsi_contiguous(op, b);
    if (!bc) goto fail;
    ts_qlinear_args q = {.m = M, .n = N, .k = K};
    q.x = tsi_kview(ac).data;
    q.x_unsigned = a->dtype == TS_U8;
    q.x_zp = az;
    q.x_sums = q.x_unsigned && ac == a ? x_sums : NULL;
    q.w = (const int8_t *)tsi_kview(bc).data;
    q.w_strided = true;
    q.w_sn = bc->strides[1], q.w_sk = bc->strides[0];
    q.w_flip = bu8 ? 0x80 : 0;
    q.w_zp = wzp;
    q.out_f = (float *)(void *)out->storage->data;
    q.fmul = fmul;
    q.fadd = fadd;
    const ts_storage *st = bc->storage; /* B's own memory, not exported: its panels are cached */
    if (st->alloc && !st->release && !atomic_load(&st->exported)) {
        q.w_uid = st->uid;
        q.w_version = (uint64_t)atomic_load(&st->version);
        q.w_offset = bc->offset;
    }
    if (tsi_be(out)->qlinear(tsi_be(out), tsi_dev_index(out), &q)) goto done;
fail:
    ts_release(out);
    out = NULL;
done:
    free(fmul), free(bs), free(fadd), free(wzp);
    ts_release(ac), ts_release(bc);
    return out;
}

ts_tensor *ts_matmul_integer_to_float(ts_tensor *a, ts_tensor *a_scale, ts_tensor *a_zero_point,
                                      ts_tensor *b, ts_tensor *b_scale, ts_tensor *b_zero_point,
                                      ts_tensor *bias) {
    const char *op = "matmul_integer_to_float";
    tsi_init();
    if (!tsi_check_input(op, a, "a") || !tsi_check_input(op, b, "b") ||
        !tsi_check_input(op, a_scale, "a_scale") || !tsi_check_input(op, b_scale, "b_scale"))
        return NULL;
    if (!is_8bit(a))
        return tsi_error_set(TS_ERR_DTYPE, "%s: a must be uint8 or int8 (got %s)", op, tsi_desc(a)),
               NULL;
    if (a->shape.ndim < 1)
        return tsi_error_set(TS_ERR_SHAPE, "%s: a [.., K] expected (got a %s)", op, tsi_desc(a)),
               NULL;
    int64_t N;
    if (!check_b(op, a->shape.dims[a->shape.ndim - 1], b, b_scale, b_zero_point, bias, &N) ||
        !check_param(op, a_scale, "a_scale", true, 1) ||
        !check_param(op, a_zero_point, "a_zero_point", false, 1))
        return NULL;
    ts_tensor *others[6] = {b, a_scale, b_scale, a_zero_point, b_zero_point, bias};
    ts_device dev;
    if (!check_device(op, a, others, 6, &dev)) return NULL;
    float as = 0;
    int32_t az = 0;
    if (!host_values(a_scale, TS_F32, &as, 1) ||
        (a_zero_point && !host_values(a_zero_point, TS_I32, &az, 1)))
        return NULL;
    return tsi_own(product(op, a, as, az, b, b_scale, b_zero_point, bias, NULL, dev));
}

ts_status ts_dynamic_quantize_matmul_to_float(ts_tensor *x, int count, ts_tensor *const *b,
                                              ts_tensor *const *b_scale,
                                              ts_tensor *const *b_zero_point,
                                              ts_tensor *const *bias, ts_tensor **out) {
    const char *op = "dynamic_quantize_matmul_to_float";
    tsi_init();
    if (!out || !b || !b_scale || count < 1)
        return tsi_error_set(TS_ERR_ARG,
                             "%s: count >= 1 and the b, b_scale and out arrays expected", op);
    for (int i = 0; i < count; i++) out[i] = NULL;
    if (!tsi_check_input(op, x, "x")) return ts_error();
    if (x->dtype != TS_F32)
        return tsi_error_set(TS_ERR_DTYPE, "%s: x must be float32 (got %s)", op, tsi_desc(x));
    if (x->shape.ndim < 1)
        return tsi_error_set(TS_ERR_SHAPE, "%s: x [.., K] expected (got x %s)", op, tsi_desc(x));
    const int64_t K = x->shape.dims[x->shape.ndim - 1];
    ts_device dev;
    for (int i = 0; i < count; i++) {
        int64_t N;
        ts_tensor *bz = b_zero_point ? b_zero_point[i] : NULL, *bb = bias ? bias[i] : NULL;
        ts_tensor *others[4] = {b[i], b_scale[i], bz, bb};
        if (!check_b(op, K, b[i], b_scale[i], bz, bb, &N) || !check_device(op, x, others, 4, &dev))
            return ts_error();
    }
    const int64_t n = tsi_numel(x->shape), M = K ? n / K : 0;
    bool ok = true, done = false;
    if (tsi_device(x).type == TS_CPU && tsi_is_contiguous(x) && n > 0) {
        /* x quantized once as DynamicQuantizeLinear does it, each row's byte sum made in the
         * same pass; every product reads those bytes and sums */
        const float *xd = (const float *)tsi_kview(x).data;
        float sc, zf;
        uint8_t zq;
        if (tsi_dql_params(xd, n, &sc, &zf, &zq)) {
            done = true;
            ts_tensor *y = tsi_new(op, x->shape, TS_U8, dev);
            int64_t *sums = malloc((size_t)(M ? M : 1) * sizeof *sums);
            if (!y || !sums) {
                if (y && !sums) tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op);
                ok = false;
            } else {
                tsi_dql_quantize_rows(xd, M, K, sc, zf, (uint8_t *)y->storage->data, sums);
                for (int i = 0; ok && i < count; i++) {
                    out[i] = product(op, y, sc, zq, b[i], b_scale[i],
                                     b_zero_point ? b_zero_point[i] : NULL, bias ? bias[i] : NULL,
                                     sums, dev);
                    ok = out[i] != NULL;
                }
                for (int i = 0; i < count; i++) /* owned once all are made */
                    out[i] = ok ? tsi_own(out[i]) : (ts_release(out[i]), NULL);
            }
            free(sums);
            ts_release(y);
        }
    }
    if (!done) { /* other devices, NaN or infinities: the two ops (the same bytes where finite) */
        ts_scope_begin();
        ts_tensor *s = NULL, *z = NULL, *y = ts_dynamic_quantize_linear(x, &s, &z);
        ok = y != NULL;
        for (int i = 0; ok && i < count; i++) {
            out[i] = ts_matmul_integer_to_float(y, s, z, b[i], b_scale[i],
                                                b_zero_point ? b_zero_point[i] : NULL,
                                                bias ? bias[i] : NULL);
            ok = out[i] != NULL;
        }
        for (int i = 0; i < count; i++) /* kept once all are made (else the scope frees them) */
            out[i] = ok ? ts_keep(out[i]) : NULL;
        ok = ok && ts_error() == TS_OK;
        ts_scope_end();
    }
    if (!ok) {
        for (int i = 0; i < count; i++) out[i] = NULL;
        return ts_error() != TS_OK ? ts_error() : tsi_error_set(TS_ERR_OOM, "%s: failed", op);
    }
    return TS_OK;
}
