/* qweight_only.c — weight-only quantized linear layers (torchao's int8_weight_only /
 * int4_weight_only): ts_weight_only_linear over the backend's wo_linear kernel (cpu:
 * kern_qweight_only.c), its gradient with respect to x and bias, and the two recipes that make
 * such weights from float32 ones (tessera/quant.h, docs/QUANTIZATION.md). */
#include <float.h>
#include <math.h>
#include <stdlib.h>

#include "autograd/autograd.h"
#include "backend/kernel_math.h"
#include "core/internal.h"
#include "core/quant_desc.h"
#include "ops/quant_internal.h"
#include "tessera/quant.h"
#include "tessera/reductions.h"

/* ------------------------------------------------------------------ the layer */
/* saved: the weight (slot 0); gradients: x = g @ dequant(w), bias = g summed to [N] */
static void wo_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi) {
    if (!go[0]) return;
    if (tsi_node_needs(n, 0)) {
        ts_tensor *w = tsi_node_saved(n, 0);
        if (!w) return;
        gi[0] = ts_matmul(go[0], ts_dequantize(w));
    }
    if (tsi_node_needs(n, 2)) gi[2] = tsi_sum_to(go[0], n->in_shape[2]);
}

static bool check_wo_weight(const char *op, ts_tensor *w, int64_t K) {
    if (!tsi_check_input(op, w, "weight")) return false;
    const tsi_quant *d = w->quant;
    const bool i8 =
        w->dtype == TS_QINT8 && d &&
        (d->scheme == TS_PER_TENSOR_AFFINE || (d->scheme == TS_PER_CHANNEL_AFFINE && d->axis == 0));
    const bool u4 = w->dtype == TS_QUINT4X2 && d && d->scheme == TS_PER_GROUP_AFFINE;
    if (!i8 && !u4)
        return tsi_error_set(TS_ERR_DTYPE,
                             "%s: weight must be qint8 quantized per channel along axis 0 (int8 "
                             "weight-only) or quint4x2 quantized per group (int4 weight-only); got "
                             "%s%s",
                             op, tsi_desc(w),
                             !d                                  ? ""
                             : d->scheme == TS_PER_GROUP_AFFINE  ? " per group"
                             : d->scheme == TS_PER_TENSOR_AFFINE ? " per tensor"
                                                                 : " per channel"),
               false;
    if (w->shape.ndim != 2 || w->shape.dims[1] != K)
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s: weight must be [out_features, %lld], the input's last dim (got "
                             "%s)",
                             op, (long long)K, tsi_desc(w)),
               false;
    if (u4) {
        const int64_t gs = d->group_size;
        if (gs != 32 && gs != 64 && gs != 128 && gs != 256)
            return tsi_error_set(TS_ERR_UNSUPPORTED,
                                 "%s: int4 weight group size must be 32, 64, 128 or 256 (got %lld)",
                                 op, (long long)gs),
                   false;
    }
    return true;
}

/* act8: the int8 dynamic-activation kernel (no autograd: the caller refused a graph) */
static ts_tensor *wo_float(const char *op, ts_tensor *x, ts_tensor *w, ts_tensor *bias, bool act8) {
    const int64_t K = x->shape.dims[x->shape.ndim - 1];
    if (!check_wo_weight(op, w, K)) return NULL;
    const int64_t N = w->shape.dims[0];
    if (bias && !tsi_check_input(op, bias, "bias")) return NULL;
    if (bias && (bias->dtype != TS_F32 || bias->shape.ndim != 1 || bias->shape.dims[0] != N))
        return tsi_error_set(TS_ERR_ARG, "%s: bias must be float32 [%lld] (got %s)", op,
                             (long long)N, tsi_desc(bias)),
               NULL;
    ts_tensor *ts[3] = {x, w, bias};
    ts_device dev;
    if (!tsi_same_device(op, ts, bias ? 3 : 2, false, &dev) || !tsi_meta_refuse(op, x) ||
        !tsi_quant_kernel_ok(op, x))
        return NULL;
    const ts_backend *be = tsi_be(x);
    if (!be->wo_linear)
        return tsi_error_set(TS_ERR_UNSUPPORTED, "%s: no weight-only kernel on %s (input: %s)", op,
                             ts_device_str(dev), tsi_desc(x)),
               NULL;
    const tsi_quant_kparams *kp = tsi_quant_kparams_get(op, w->quant);
    if (!kp) return NULL;
    ts_shape os = x->shape;
    os.dims[os.ndim - 1] = N;
    ts_tensor *out = tsi_new(op, os, TS_F32, dev), *xc = NULL, *bc = NULL;
    float *sc = NULL;
    int32_t *zc = NULL;
    const int64_t M = K ? tsi_numel(x->shape) / K : 0;
    if (!out || M * N == 0) goto done;
    if (K == 0) { /* an empty sum: y = bias (or 0) */
        ts_scope_begin();
        const bool ok = ts_fill_(out, 0) && (!bias || ts_add_(out, bias));
        ts_scope_end();
        if (!ok) goto fail;
        goto done;
    }
    ts_wo_args a = {.m = M,
                    .n = N,
                    .k = K,
                    .int4 = w->dtype == TS_QUINT4X2,
                    .group_size = w->quant->group_size,
                    .w = (const uint8_t *)tsi_kview(w).data,
                    .scales = kp->scales,
                    .zero_points = kp->zero_points,
                    .y = (float *)(void *)out->storage->data,
                    .act_int8 = act8,
                    .uniform_zp = kp->uniform_zp,
                    .scales_h = w->dtype == TS_QUINT4X2 ? kp->scales_f16 : NULL};
    if (w->quant->scheme == TS_PER_TENSOR_AFFINE) { /* one parameter for every row */
        sc = malloc((size_t)N * sizeof *sc), zc = malloc((size_t)N * sizeof *zc);
        if (!sc || !zc) {
            tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op);
            goto fail;
        }
        for (int64_t n = 0; n < N; n++) sc[n] = kp->scales[0], zc[n] = kp->zero_points[0];
        a.scales = sc, a.zero_points = zc;
    }
    if (!(xc = tsi_contiguous(op, x)) || (bias && !(bc = tsi_contiguous(op, bias)))) goto fail;
    a.x = (const float *)(void *)tsi_kview(xc).data;
    a.bias = bc ? (const float *)(void *)tsi_kview(bc).data : NULL;
    if (be->wo_linear(be, tsi_dev_index(out), &a)) goto done;
fail:
    ts_release(out);
    out = NULL;
done:
    free(sc), free(zc);
    ts_release(xc), ts_release(bc);
    if (out && tsi_needs_graph(ts, 3)) {
        ts_node *n = tsi_record("WeightOnlyLinearBackward", op, wo_backward, ts, 3, out,
                                (ts_tensor *[]){w}, 1);
        if (n) n->flags |= TSI_NODE_TWICE; /* public ops, linear in g */
        if (ts_error() != TS_OK) {
            ts_release(out);
            out = NULL;
        }
    }
    return tsi_own(out);
}

ts_tensor *ts_weight_only_linear(ts_tensor *x, ts_tensor *w, ts_tensor *bias) {
    const char *op = "weight_only_linear";
    tsi_init();
    if (!tsi_check_input(op, x, "input")) return NULL;
    if (x->dtype != TS_F32 && x->dtype != TS_BF16)
        return tsi_error_set(TS_ERR_DTYPE, "%s: input must be float32 or bfloat16 (got %s)", op,
                             tsi_desc(x)),
               NULL;
    if (x->shape.ndim < 1)
        return tsi_error_set(TS_ERR_SHAPE, "%s: input must have at least one dim (got %s)", op,
                             tsi_desc(x)),
               NULL;
    if (x->dtype == TS_F32) return wo_float(op, x, w, bias, false);
    /* bfloat16: the float32 product of the widened input, rounded to bfloat16 once */
    if (bias && !tsi_check_input(op, bias, "bias")) return NULL;
    if (bias && bias->dtype != TS_BF16)
        return tsi_error_set(TS_ERR_ARG, "%s: bias must be of the input's dtype bfloat16 (got %s)",
                             op, tsi_desc(bias)),
               NULL;
    ts_scope_begin();
    ts_tensor *y = ts_to_dtype(x, TS_F32), *b = bias ? ts_to_dtype(bias, TS_F32) : NULL;
    y = y && (b || !bias) ? wo_float(op, y, w, b, false) : NULL;
    y = ts_keep(y ? ts_to_dtype(y, TS_BF16) : NULL);
    ts_scope_end();
    return y;
}

ts_tensor *ts_int8_dynamic_activation_linear(ts_tensor *x, ts_tensor *w, ts_tensor *bias) {
    const char *op = "int8_dynamic_activation_linear";
    tsi_init();
    if (!tsi_check_input(op, x, "input")) return NULL;
    if (x->dtype != TS_F32)
        return tsi_error_set(TS_ERR_DTYPE, "%s: input must be float32 (got %s)", op, tsi_desc(x)),
               NULL;
    if (x->shape.ndim < 1)
        return tsi_error_set(TS_ERR_SHAPE, "%s: input must have at least one dim (got %s)", op,
                             tsi_desc(x)),
               NULL;
    const int64_t K = x->shape.dims[x->shape.ndim - 1];
    if (K > 65536)
        return tsi_error_set(TS_ERR_UNSUPPORTED,
                             "%s: in_features %lld is over 65536 (an int32 sum could overflow)", op,
                             (long long)K),
               NULL;
    ts_tensor *ts[3] = {x, w, bias};
    if (tsi_needs_graph(ts, 3))
        return tsi_error_set(TS_ERR_UNSUPPORTED,
                             "%s: no gradient through the activations' rounding (input or bias "
                             "requires grad; use ts_weight_only_linear to train, or no_grad)",
                             op),
               NULL;
    return wo_float(op, x, w, bias, true);
}

/* ------------------------------------------------------------------ the recipes */
/* w float32 [N, K] with finite values, on the host in *out (malloc'ed) */
static bool weight_to_host(const char *op, ts_tensor *w, float **out) {
    *out = NULL;
    if (!tsi_check_input(op, w, "weight")) return false;
    if (w->dtype != TS_F32 || w->shape.ndim != 2)
        return tsi_error_set(TS_ERR_ARG,
                             "%s: weight must be float32 [out_features, in_features] "
                             "(got %s)",
                             op, tsi_desc(w)),
               false;
    if (!tsi_meta_refuse(op, w)) return false;
    const size_t n = (size_t)tsi_numel(w->shape);
    float *h = malloc((n ? n : 1) * sizeof *h);
    if (!h) return tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op), false;
    ts_scope_begin();
    ts_status st = ts_copy_to_host(ts_contiguous(w), h, n * sizeof *h);
    ts_scope_end();
    if (st != TS_OK) return free(h), false;
    for (size_t i = 0; i < n; i++)
        if (!isfinite(h[i])) {
            const char *what = isnan(h[i]) ? "NaN" : "inf";
            free(h);
            return tsi_error_set(TS_ERR_ARG, "%s: weight %s holds %s at element %zu", op,
                                 tsi_desc(w), what, i),
                   false;
        }
    *out = h;
    return true;
}

/* quantize w with per-row (groups 1) or per-group parameters scale / zp (count params) */
static ts_tensor *quantize_with(ts_tensor *w, double *scale, int64_t *zp, int64_t N, int64_t G,
                                int64_t gs) {
    ts_scope_begin();
    const ts_shape ps = G ? TS_SHAPE(N, G) : TS_SHAPE(N);
    ts_tensor *s = ts_tensor_f64(ps, scale, (ts_opts){0}), *z = ts_tensor_i64(ps, zp, (ts_opts){0});
    if (s && !tsi_device_eq(tsi_device(w), tsi_resolve_device(ts_cpu())))
        s = ts_to(s, tsi_device(w)), z = ts_to(z, tsi_device(w));
    ts_tensor *q = !s || !z ? NULL
                   : G      ? ts_quantize_per_group(w, s, z, gs, TS_QUINT4X2)
                            : ts_quantize_per_channel(w, s, z, 0, TS_QINT8);
    q = ts_keep(q);
    ts_scope_end();
    return q;
}

ts_tensor *ts_quantize_int8_weight_only(ts_tensor *w) {
    const char *op = "quantize_int8_weight_only";
    tsi_init();
    float *h;
    if (!weight_to_host(op, w, &h)) return NULL;
    const int64_t N = w->shape.dims[0], K = w->shape.dims[1];
    double *scale = malloc((size_t)(N ? N : 1) * sizeof *scale);
    int64_t *zp = calloc((size_t)(N ? N : 1), sizeof *zp);
    ts_tensor *q = NULL;
    if (!scale || !zp) {
        tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op);
    } else {
        for (int64_t n = 0; n < N; n++) {
            float amax = 0;
            for (int64_t k = 0; k < K; k++) amax = fmaxf(amax, fabsf(h[n * K + k]));
            const float s = amax / 127.5f; /* (quant_max - quant_min) / 2, in float32 */
            scale[n] = s > FLT_EPSILON ? s : FLT_EPSILON;
        }
        q = quantize_with(w, scale, zp, N, 0, 0);
    }
    free(h), free(scale), free(zp);
    return q; /* already owned by the caller's scope (ts_keep) */
}

/* int4 per group of w: asymmetric (int4_weight_only) or symmetric (8da4w's) */
static ts_tensor *quantize_int4(const char *op, ts_tensor *w, int64_t group_size, bool symmetric) {
    tsi_init();
    if (group_size != 32 && group_size != 64 && group_size != 128 && group_size != 256)
        return tsi_error_set(TS_ERR_ARG, "%s: group_size must be 32, 64, 128 or 256 (got %lld)", op,
                             (long long)group_size),
               NULL;
    if (!tsi_check_input(op, w, "weight")) return NULL;
    if (w->shape.ndim == 2 && w->shape.dims[1] % group_size)
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s: group_size %lld does not divide in_features (weight %s)", op,
                             (long long)group_size, tsi_desc(w)),
               NULL;
    float *h;
    if (!weight_to_host(op, w, &h)) return NULL;
    const int64_t N = w->shape.dims[0], K = w->shape.dims[1], G = K / group_size;
    const size_t cnt = (size_t)(N * G > 0 ? N * G : 1);
    double *scale = malloc(cnt * sizeof *scale);
    int64_t *zp = malloc(cnt * sizeof *zp);
    ts_tensor *q = NULL;
    if (!scale || !zp) {
        tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op);
    } else {
        /* [-8, 7] stored as q + 8; the scale rounded to float16 first, then the weights
         * quantized with that scale (decision 0051) */
        for (int64_t i = 0; i < N * G && symmetric; i++) {
            const float *v = h + i * group_size;
            float amax = 0;
            for (int64_t k = 0; k < group_size; k++) amax = fmaxf(amax, fabsf(v[k]));
            const float s = amax / 7.5f; /* (quant_max - quant_min) / 2, in float32 */
            const ts_f16_bits sh = ts_f32_to_f16(s > FLT_EPSILON ? s : FLT_EPSILON);
            if (sh >= 0x7c00u) { /* float16's inf: amax / 7.5 rounds past 65504 */
                tsi_error_set(TS_ERR_ARG,
                              "%s: weight row %lld, group %lld: max |w| %g needs a scale over "
                              "float16's largest (65504: max |w| must be below 491400)",
                              op, (long long)(i / G), (long long)(i % G), (double)amax);
                goto out;
            }
            scale[i] = ts_f16_to_f32(sh);
            zp[i] = 8;
        }
        for (int64_t i = 0; i < N * G && !symmetric; i++) {
            const float *v = h + i * group_size;
            float lo = 0, hi = 0; /* the range widened to contain 0: an integer zero point */
            for (int64_t k = 0; k < group_size; k++) lo = fminf(lo, v[k]), hi = fmaxf(hi, v[k]);
            float s = (hi - lo) / 15.0f;
            s = s > 1e-6f ? s : 1e-6f;
            const float z = -nearbyintf(lo / s);
            scale[i] = s;
            zp[i] = z < 0 ? 0 : z > 15 ? 15 : (int64_t)z;
        }
        q = quantize_with(w, scale, zp, N, G ? G : 1, group_size);
    }
out:
    free(h), free(scale), free(zp);
    return q;
}

ts_tensor *ts_quantize_int4_weight_only(ts_tensor *w, int64_t group_size) {
    return quantize_int4("quantize_int4_weight_only", w, group_size, false);
}

ts_tensor *ts_quantize_int4_symmetric_weight(ts_tensor *w, int64_t group_size) {
    return quantize_int4("quantize_int4_symmetric_weight", w, group_size, true);
}
