/* test_eval_fused.c — the eval path of Conv2d + BatchNorm2d (+ ReLU) (src/nn/conv_bn.c): in eval
 * mode without gradients one convolution with the batch-norm folded into its weight and bias.
 *
 * Accuracy. A fused output is fl(sum_i W'_i x_i + b') with W'_i = fl(W_i s), s = gamma /
 * sqrt(var + eps) and b' rounded once from float64: K = C/groups * kh * kw products and the bias
 * summed in the dtype in any order give at most gamma_{K+1} A, the rounding of W' u A more, so
 *     |fused - exact| <= (K + 2) u A,   A = sum_i |W_i s x_i| + |b'|   (to first order in u)
 * per output element (ReLU is exact). The float64 reference's own error, (K + 8) u64 A, is added.
 * The unfused path rounds the convolution, then scale, shift and two more operations of the
 * batch-norm: it is held to the ONNX rewrite's (2K + 16) u A_u (docs/ONNX_REWRITES.md) with A_u
 * adding |mean s| and |b s|. Running variances are drawn down to 1e-4, where a forgotten eps (1e-5)
 * moves s by 5%. Whole networks (ResNet-20, a narrow ResNet-18, a CIFAR ResNet with option-B
 * downsample Sequentials) are compared with the same network in float64: the fused output's error
 * is held to that of the unfused one (4x, or 32 u of the largest output).
 *
 * Also: the folded tensors follow an optimizer step, ts_module_load_state_dict, in-place changes
 * and ts_module_to; the module's state never changes; train mode and eval with gradients run the
 * modules as before, bit for bit, and stay differentiable; a fold that is not finite runs
 * unfused; threads sharing a model fill the cache once and agree; no autograd node is made.
 *
 * Under a bf16 autocast region the fold is rounded to bf16 (from float64, through float32) and the
 * convolution runs bf16 as autocast's does: x rounded to bf16 (u_b = 2^-8), W' and b' rounded
 * (u_b + u each), products exact in float32, K + 1 terms summed in float32, the output rounded
 * once, so to first order
 *     |fused - exact| <= (3 u_b + 2 u + (K + 1) u) A + u_b^2 terms, held to (3 u_b + (K + 4) u) A
 *     + 2 u_b^2 A,
 * with the float64 reference's own error added. No autocast cast runs but the input's: the bf16
 * fold is kept beside the float32 one. Whole networks under autocast: the fused output's error
 * against float64 within 4x the unfused autocast one's (or 32 u_b of the largest output). */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "amp/autocast.h"
#include "nn/bn_fold.h"
#include "nn/layers_internal.h"
#include "same_bits.h"
#include "state_snapshot.h"
#include "ts_test.h"

/* ------------------------------------------------------------------ helpers */
/* t's values as float64 on the host (malloc'ed), *n of them */
static double *host(ts_tensor *t, int64_t *n) {
    ts_scope_begin();
    ts_tensor *h = ts_contiguous(ts_to_dtype(ts_to(t, ts_cpu()), TS_F64));
    *n = h ? ts_numel(h) : 0;
    double *v = malloc((size_t)(*n ? *n : 1) * sizeof *v);
    if (h && v && ts_copy_to_host(h, v, (size_t)*n * sizeof *v) != TS_OK) free(v), v = NULL;
    ts_scope_end();
    return v;
}

static double max_abs(ts_tensor *t) {
    int64_t n;
    double *v = host(t, &n), m = 0;
    for (int64_t i = 0; v && i < n; i++) m = fmax(m, fabs(v[i]));
    free(v);
    return m;
}

static double max_diff(ts_tensor *a, ts_tensor *b) {
    int64_t na, nb;
    double *va = host(a, &na), *vb = host(b, &nb), m = va && vb && na == nb ? 0 : INFINITY;
    for (int64_t i = 0; va && vb && na == nb && i < na; i++) m = fmax(m, fabs(va[i] - vb[i]));
    free(va), free(vb);
    return m;
}

/* equal values, NaN equal to NaN whatever its sign and payload */
static bool same_values(ts_tensor *a, ts_tensor *b) {
    int64_t na, nb;
    double *va = host(a, &na), *vb = host(b, &nb);
    bool eq = va && vb && na == nb;
    for (int64_t i = 0; eq && i < na; i++)
        eq = (isnan(va[i]) && isnan(vb[i])) || memcmp(&va[i], &vb[i], sizeof va[i]) == 0;
    free(va), free(vb);
    return eq;
}

static double unit_roundoff(ts_dtype dt) { return dt == TS_F64 ? ldexp(1, -53) : ldexp(1, -24); }

/* Every BatchNorm's statistics and affine parameters drawn away from their initial values
 * (mean N(0, 0.5^2), var exp(U[log_lo, 1]), weight 1 + N(0, 0.3^2), bias N(0, 0.2^2)), in place
 * without a graph. */
static void randomize_bn(ts_module *m, double log_lo) {
    ts_scope_begin();
    ts_no_grad_begin();
    ts_tensor_list sd = ts_module_state_dict(m);
    for (int i = 0; i < sd.n; i++) {
        const char *n = sd.names[i];
        ts_tensor *t = sd.tensors[i];
        size_t len = strlen(n);
        const ts_opts o = {.dtype = ts_dtype_of(t), .device = ts_device_of(t)};
        const ts_shape s = ts_shape_of(t);
#define ENDS(x) (len >= strlen(x) && !strcmp(n + len - strlen(x), x))
        if (ENDS("running_var"))
            ts_copy_(t, ts_exp(ts_add_scalar(ts_mul_scalar(ts_rand(s, o), 1 - log_lo), log_lo)));
        else if (ENDS("running_mean"))
            ts_copy_(t, ts_mul_scalar(ts_randn(s, o), 0.5));
        else if (ts_ndim(t) == 1 && ENDS("weight") && strstr(n, "bn"))
            ts_copy_(t, ts_add_scalar(ts_mul_scalar(ts_randn(s, o), 0.3), 1));
        else if (ts_ndim(t) == 1 && ENDS("bias") && strstr(n, "bn"))
            ts_copy_(t, ts_mul_scalar(ts_randn(s, o), 0.2));
#undef ENDS
    }
    ts_tensor_list_free(&sd);
    ts_no_grad_end();
    ts_scope_end();
}

/* ts_forward under no-grad, fused or not */
static ts_tensor *infer(ts_module *m, ts_tensor *x, bool fuse) {
    bool was = ts_set_eval_fusion(fuse);
    ts_no_grad_begin();
    ts_tensor *y = ts_forward(m, x);
    ts_no_grad_end();
    ts_set_eval_fusion(was);
    return y;
}

/* whether the Conv2d holds folded tensors */
static bool has_fold(ts_module *conv) {
    tsi_conv2d_parts p;
    return tsi_conv2d_parts_of(conv, &p) && *p.cache;
}

/* ------------------------------------------------------------------ one conv + bn (+ relu) */
typedef struct unit_case {
    int64_t n, c, h, w, o;
    int k, stride, pad, groups;
    bool conv_bias, affine, relu;
} unit_case;

static const unit_case UNITS[] = {
    {2, 8, 9, 10, 16, 3, 1, 1, 1, false, true, true}, /* ResNet's conv3x3 + bn + relu */
    {2, 8, 9, 10, 16, 3, 2, 1, 1, false, true, false},
    {1, 16, 6, 6, 32, 1, 2, 0, 1, false, true, false}, /* a downsample: 1x1, stride 2 */
    {2, 3, 12, 12, 24, 7, 2, 3, 1, true, true, true},  /* a stem with a conv bias */
    {2, 12, 7, 8, 12, 3, 1, 1, 4, true, false, true},  /* groups, bn without affine */
    {1, 4, 5, 5, 8, 3, 1, 1, 1, true, true, false},    /* 8 outputs: the direct kernels */
};
#define N_UNITS ((int)(sizeof UNITS / sizeof UNITS[0]))

static double worst_fused, worst_unfused; /* largest error / bound seen, printed at the end */

/* The unit's modules (seeded): Conv2d, BatchNorm2d with drawn statistics, and the ReLU when the
 * case has one, as a Sequential on dev in eval mode. */
static ts_module *unit_module(const unit_case *u, uint64_t seed, ts_device dev, ts_module **conv,
                              ts_module **bn) {
    ts_manual_seed(seed);
    *conv = ts_conv2d_new(u->c, u->o, u->k,
                          (ts_conv2d_opts){.stride = {u->stride, u->stride},
                                           .padding = {u->pad, u->pad},
                                           .groups = u->groups,
                                           .no_bias = !u->conv_bias});
    *bn = ts_batch_norm2d_new(u->o, (ts_norm_opts){.no_affine = !u->affine});
    ts_module *parts[3] = {*conv, *bn, ts_relu_new()};
    ts_module *seq = ts_sequential_new(u->relu ? 3 : 2, parts);
    if (!u->relu) ts_module_free(parts[2]);
    randomize_bn(seq, -9.2); /* variances down to 1e-4 */
    ts_module_eval(ts_module_to(seq, dev));
    return seq;
}

/* The float64 reference of the unit on x64 (cpu): *ref, the magnitude A (sum |W s x| + |b'|)
 * and A_u (A + |mean s| + |b s|, the unfused path's) */
static void unit_reference(const unit_case *u, ts_module *conv, ts_module *bn, ts_tensor *x64,
                           ts_tensor **ref, ts_tensor **a, ts_tensor **au) {
    ts_no_grad_begin();
    const ts_opts f64 = {.dtype = TS_F64, .device = ts_cpu()};
    tsi_conv2d_parts cp;
    tsi_batch_norm2d_parts bp;
    CHECK(tsi_conv2d_parts_of(conv, &cp) && tsi_batch_norm2d_parts_of(bn, &bp));
#define F64(t) ((t) ? ts_to_dtype(ts_to((t), ts_cpu()), TS_F64) : NULL)
    ts_tensor *w = F64(cp.w), *b = F64(cp.b), *g = F64(bp.w), *be = F64(bp.b);
    ts_tensor *mean = F64(bp.mean), *var = F64(bp.var);
#undef F64
    if (!g) g = ts_ones(TS_SHAPE(u->o), f64);
    if (!be) be = ts_zeros(TS_SHAPE(u->o), f64);
    if (!b) b = ts_zeros(TS_SHAPE(u->o), f64);
    const ts_shape cs = TS_SHAPE(1, u->o, 1, 1);
    ts_tensor *s = ts_div(g, ts_sqrt(ts_add_scalar(var, 1e-5)));
    ts_tensor *bf = ts_add(ts_mul(ts_sub(b, mean), s), be); /* b' */
    ts_conv2d_opts co = {
        .stride = {u->stride, u->stride}, .padding = {u->pad, u->pad}, .groups = u->groups};
    ts_tensor *conv64 = ts_conv2d(x64, w, NULL, co);
    *ref = ts_add(ts_mul(conv64, ts_reshape(s, cs)), ts_reshape(bf, cs));
    if (u->relu) *ref = ts_relu(*ref);
    ts_tensor *ws = ts_abs(ts_mul(w, ts_reshape(s, TS_SHAPE(u->o, 1, 1, 1))));
    *a = ts_add(ts_conv2d(ts_abs(x64), ws, NULL, co), ts_reshape(ts_abs(bf), cs));
    *au = ts_add(*a, ts_reshape(ts_add(ts_abs(ts_mul(mean, s)), ts_abs(ts_mul(b, s))), cs));
    ts_no_grad_end();
    CHECK_OK();
}

static void unit(const unit_case *u, ts_device dev, ts_dtype dt) {
    ts_scope_begin();
    ts_module *conv, *bn;
    ts_module *seq = ts_module_to_dtype(unit_module(u, 7, dev, &conv, &bn), dt);
    ts_tensor *x =
        ts_randn(TS_SHAPE(u->n, u->c, u->h, u->w), (ts_opts){.dtype = dt, .device = dev});
    ts_snapshot before = ts_snapshot_take(seq, NULL, NULL);
    const uint64_t folds = tsi_bn_fold_count();
    ts_tensor *fused = infer(seq, x, true);
    CHECK(has_fold(conv));
    CHECK(same_bits(infer(seq, x, true), fused)); /* again, from the kept fold */
    CHECK_EQ(tsi_bn_fold_count() - folds, 1);
    CHECK(ts_grad_fn_name(fused) == NULL);
    ts_tensor *unfused = infer(seq, x, false);
    ts_snapshot after = ts_snapshot_take(seq, NULL, NULL);
    ts_snapshot_check("module state after the fused forward", &after, &before);
    ts_snapshot_free(&before), ts_snapshot_free(&after);
    CHECK_OK();

    /* the float64 reference on the cpu, and the magnitudes A and A_u */
    ts_tensor *ref, *a, *au;
    unit_reference(u, conv, bn, ts_to_dtype(ts_to(x, ts_cpu()), TS_F64), &ref, &a, &au);

    const double K = (double)(u->c / u->groups * u->k * u->k), uu = unit_roundoff(dt);
    const double u64 = ldexp(1, -53);
    int64_t n, nr, na, nau, nf;
    double *vf = host(fused, &n), *vu = host(unfused, &nf), *vr = host(ref, &nr);
    double *va = host(a, &na), *vau = host(au, &nau);
    bool ok = vf && vu && vr && va && vau && n == nr && nf == n && na == n && nau == n;
    double wf = 0, wu = 0;
    for (int64_t i = 0; ok && i < n; i++) {
        const double bound_f = (K + 2) * uu * va[i] + (K + 8) * u64 * va[i];
        const double bound_u = (2 * K + 16) * uu * vau[i] + (K + 8) * u64 * vau[i];
        const double ef = fabs(vf[i] - vr[i]), eu = fabs(vu[i] - vr[i]);
        if (bound_f > 0) wf = fmax(wf, ef / bound_f);
        if (bound_u > 0) wu = fmax(wu, eu / bound_u);
        if (!(ef <= bound_f) || !(eu <= bound_u)) {
            printf("  %s %s c%lld o%lld k%d s%d g%d: element %lld fused %.9g unfused %.9g ref "
                   "%.9g, bounds %.3g %.3g\n",
                   ts_device_str(dev), ts_dtype_name(dt), (long long)u->c, (long long)u->o, u->k,
                   u->stride, u->groups, (long long)i, vf[i], vu[i], vr[i], bound_f, bound_u);
            ok = false;
        }
    }
    CHECK(ok);
    worst_fused = fmax(worst_fused, wf), worst_unfused = fmax(worst_unfused, wu);
    free(vf), free(vu), free(vr), free(va), free(vau);
    ts_module_free(seq);
    ts_scope_end();
}

/* The unit under a bf16 autocast region: float32 module, float32 input (cast by the region) */
static double worst_autocast;

static void unit_autocast(const unit_case *u, ts_device dev) {
    ts_scope_begin();
    ts_module *conv, *bn;
    ts_module *seq = unit_module(u, 17, dev, &conv, &bn);
    ts_tensor *x = ts_randn(TS_SHAPE(u->n, u->c, u->h, u->w), (ts_opts){.device = dev});
    ts_tensor *fused = NULL;
    for (int call = 0; call < 2; call++) { /* the second from the kept bf16 fold */
        const uint64_t casts = tsi_autocast_cast_count, folds = tsi_bn_fold_count();
        ts_autocast_begin(dev.type, TS_BF16);
        fused = infer(seq, x, true);
        ts_autocast_end();
        CHECK_EQ(tsi_autocast_cast_count - casts, 1); /* x alone */
        CHECK_EQ(tsi_bn_fold_count() - folds, call == 0 ? 1 : 0);
        CHECK(fused && ts_dtype_of(fused) == TS_BF16 && ts_grad_fn_name(fused) == NULL);
    }
    CHECK(has_fold(conv));
    CHECK_OK();

    /* the float64 reference of the bf16-rounded input, and A */
    ts_tensor *ref, *a, *au;
    unit_reference(u, conv, bn, ts_to_dtype(ts_to_dtype(ts_to(x, ts_cpu()), TS_BF16), TS_F64), &ref,
                   &a, &au);

    const double K = (double)(u->c / u->groups * u->k * u->k);
    const double ub = ldexp(1, -8), uu = ldexp(1, -24), u64 = ldexp(1, -53);
    int64_t n, nr, na;
    double *vf = host(fused, &n), *vr = host(ref, &nr), *va = host(a, &na);
    bool ok = vf && vr && va && n == nr && na == n;
    double worst = 0;
    for (int64_t i = 0; ok && i < n; i++) {
        const double bound = ((3 * ub + (K + 4) * uu) + 2 * ub * ub + (K + 8) * u64) * va[i];
        const double e = fabs(vf[i] - vr[i]);
        if (bound > 0) worst = fmax(worst, e / bound);
        if (!(e <= bound)) {
            printf("  autocast %s c%lld o%lld k%d s%d g%d: element %lld fused %.9g ref %.9g, "
                   "bound %.3g\n",
                   ts_device_str(dev), (long long)u->c, (long long)u->o, u->k, u->stride, u->groups,
                   (long long)i, vf[i], vr[i], bound);
            ok = false;
        }
    }
    CHECK(ok);
    worst_autocast = fmax(worst_autocast, worst);
    free(vf), free(vr), free(va);
    ts_module_free(seq);
    ts_scope_end();
}

static void test_units(void) {
    ts_device devs[TS_TEST_MAX_DEVICES];
    const int nd = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    for (int d = 0; d < nd; d++)
        for (int i = 0; i < N_UNITS; i++) {
            unit(&UNITS[i], devs[d], TS_F32);
            unit(&UNITS[i], devs[d], TS_F64);
            unit_autocast(&UNITS[i], devs[d]);
        }
    printf("conv + bn (+ relu): worst error / bound: fused %.3f of (K + 2) u A, unfused %.3f of "
           "(2K + 16) u A_u, under bf16 autocast %.3f of (3 u_b + (K + 4) u) A\n",
           worst_fused, worst_unfused, worst_autocast);
}

/* ------------------------------------------------------------------ whole networks */
typedef enum net_kind { NET_R20, NET_R18, NET_R20_B, NET_SEQ, N_NETS } net_kind;
static const char *const NET_NAMES[N_NETS] = {"resnet20", "resnet18 (width 8, cifar stem)",
                                              "resnet20 option B (downsample Sequentials)",
                                              "Sequential conv-bn-relu x2, conv-relu"};

static ts_module *net_new(net_kind k, uint64_t seed) {
    ts_manual_seed(seed);
    ts_module *m = NULL;
    switch (k) {
    case NET_R20:
        m = ts_resnet20_new((ts_resnet_config){.width = 8});
        break;
    case NET_R18:
        m = ts_resnet18_new((ts_resnet_config){.width = 8, .num_classes = 10, .cifar_stem = true});
        break;
    case NET_R20_B:
        m = ts_resnet20_new((ts_resnet_config){.width = 8, .shortcut_conv = true});
        break;
    case NET_SEQ: { /* conv-bn-relu twice, then conv-relu without a batch-norm */
        ts_module *p[8] = {
            ts_conv2d_new(3, 8, 3, (ts_conv2d_opts){.padding = {1, 1}}),
            ts_batch_norm2d_new(8, (ts_norm_opts){0}),
            ts_relu_new(),
            ts_conv2d_new(8, 16, 3, (ts_conv2d_opts){.stride = {2, 2}, .no_bias = true}),
            ts_batch_norm2d_new(16, (ts_norm_opts){0}),
            ts_relu_new(),
            ts_conv2d_new(16, 8, 3, (ts_conv2d_opts){.padding = {1, 1}}),
            ts_relu_new()};
        m = ts_sequential_new(8, p);
        break;
    }
    default:
        break;
    }
    randomize_bn(m, -1.5); /* variances from 0.22: outputs of moderate size through many layers */
    return m;
}

static void whole_net(net_kind k, ts_device dev) {
    ts_scope_begin();
    ts_module *m = ts_module_to(net_new(k, 3), dev);
    ts_module *r64 = ts_module_to_dtype(net_new(k, 4), TS_F64); /* the reference, on the cpu */
    ts_tensor_list sd = ts_module_state_dict(m);
    CHECK(ts_module_load_state_dict(r64, &sd, true) == TS_OK);
    ts_tensor_list_free(&sd);
    ts_module_eval(m), ts_module_eval(r64);
    ts_tensor *x = ts_randn(TS_SHAPE(2, 3, 16, 16), (ts_opts){.device = dev});
    ts_tensor *fused = infer(m, x, true), *unfused = infer(m, x, false);
    ts_tensor *ref = infer(r64, ts_to_dtype(ts_to(x, ts_cpu()), TS_F64), false);
    CHECK_OK();
    const double ef = max_diff(fused, ref), eu = max_diff(unfused, ref), mr = max_abs(ref);
    const double u = ldexp(1, -24);
    printf("  %s on %s: max |out| %.3g, error vs float64: fused %.3g, unfused %.3g\n", NET_NAMES[k],
           ts_device_str(dev), mr, ef, eu);
    CHECK(ef <= 4 * fmax(eu, 32 * u * mr));

    /* eval with gradients: the modules as before (bit for bit), differentiable */
    ts_tensor *xg = ts_detach(x);
    ts_set_requires_grad(xg, true);
    ts_tensor *yg = ts_forward(m, xg);
    CHECK(ts_grad_fn_name(yg) != NULL);
    CHECK(same_bits(yg, unfused));
    ts_backward(ts_sum(yg));
    ts_tensor *gx = ts_grad(xg);
    CHECK(gx && isfinite(max_abs(gx)) && max_abs(gx) > 0);
    ts_tensor *gw = ts_grad(ts_module_get(m, k == NET_SEQ ? "0.weight" : "conv1.weight"));
    CHECK(gw && max_abs(gw) > 0);
    CHECK_OK();
    ts_module_free(m), ts_module_free(r64);
    ts_scope_end();
}

/* The network under a bf16 autocast region: fused against unfused, both against float64 */
static void whole_net_autocast(net_kind k, ts_device dev) {
    ts_scope_begin();
    ts_module *m = ts_module_to(net_new(k, 3), dev);
    ts_module *r64 = ts_module_to_dtype(net_new(k, 4), TS_F64);
    ts_tensor_list sd = ts_module_state_dict(m);
    CHECK(ts_module_load_state_dict(r64, &sd, true) == TS_OK);
    ts_tensor_list_free(&sd);
    ts_module_eval(m), ts_module_eval(r64);
    ts_tensor *x = ts_randn(TS_SHAPE(2, 3, 16, 16), (ts_opts){.device = dev});
    ts_autocast_begin(dev.type, TS_BF16);
    ts_tensor *fused = infer(m, x, true), *unfused = infer(m, x, false);
    ts_autocast_end();
    ts_tensor *ref = infer(r64, ts_to_dtype(ts_to(x, ts_cpu()), TS_F64), false);
    CHECK_OK();
    const double ef = max_diff(fused, ref), eu = max_diff(unfused, ref), mr = max_abs(ref);
    printf("  %s on %s under bf16 autocast: max |out| %.3g, error vs float64: fused %.3g, "
           "unfused %.3g\n",
           NET_NAMES[k], ts_device_str(dev), mr, ef, eu);
    CHECK(ef <= 4 * fmax(eu, 32 * ldexp(1, -8) * mr));
    ts_module_free(m), ts_module_free(r64);
    ts_scope_end();
}

static void test_whole_nets(void) {
    ts_device devs[TS_TEST_MAX_DEVICES];
    const int nd = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    for (int d = 0; d < nd; d++)
        for (int k = 0; k < N_NETS; k++) {
            whole_net((net_kind)k, devs[d]);
            whole_net_autocast((net_kind)k, devs[d]);
        }
}

/* ------------------------------------------------------------------ train mode */
/* One training forward and backward of a fresh model (seed 5): its output, input gradient and
 * state (parameters with gradients, running statistics) */
typedef struct train_out {
    ts_tensor *y, *gx;
    ts_snapshot state;
} train_out;

static train_out train_step(net_kind k, ts_device dev, bool eval_first, bool fuse) {
    bool was = ts_set_eval_fusion(fuse);
    ts_module *m = ts_module_to(net_new(k, 5), dev);
    ts_manual_seed(6);
    ts_tensor *x = ts_randn(TS_SHAPE(2, 3, 16, 16), (ts_opts){.device = dev});
    if (eval_first) { /* fills the fold caches, then back to training */
        ts_module_eval(m);
        infer(m, x, true);
        ts_module_train(m, true);
    }
    ts_set_requires_grad(x, true);
    train_out r = {.y = ts_forward(m, x)};
    ts_backward(ts_sum(ts_mul(r.y, r.y)));
    r.gx = ts_grad(x);
    r.state = ts_snapshot_with_grads(m);
    ts_module_free(m);
    ts_set_eval_fusion(was);
    return r;
}

static void test_train_untouched(void) {
    ts_device devs[TS_TEST_MAX_DEVICES];
    const int nd = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    for (int d = 0; d < nd; d++)
        for (int k = 0; k < N_NETS; k++) {
            ts_scope_begin();
            train_out off = train_step((net_kind)k, devs[d], false, false);
            train_out on = train_step((net_kind)k, devs[d], false, true);
            train_out after_eval = train_step((net_kind)k, devs[d], true, true);
            CHECK(same_bits(on.y, off.y) && same_bits(on.gx, off.gx));
            CHECK(same_bits(after_eval.y, off.y) && same_bits(after_eval.gx, off.gx));
            ts_snapshot_check("train with fusion on", &on.state, &off.state);
            ts_snapshot_check("train after a fused eval", &after_eval.state, &off.state);
            ts_snapshot_free(&off.state), ts_snapshot_free(&on.state);
            ts_snapshot_free(&after_eval.state);
            CHECK_OK();
            ts_scope_end();
        }
}

/* Train mode without gradients (batch statistics, running statistics updated): the modules as
 * before, fusion on or off, after a fused eval or not. */
static void test_train_no_grad(void) {
    for (int k = 0; k < N_NETS; k++) {
        ts_scope_begin();
        ts_tensor *y[3];
        ts_snapshot st[3];
        for (int i = 0; i < 3; i++) {
            ts_module *m = net_new((net_kind)k, 12);
            ts_manual_seed(13);
            ts_tensor *x = ts_randn(TS_SHAPE(2, 3, 16, 16), (ts_opts){0});
            if (i == 2) {
                ts_module_eval(m);
                infer(m, x, true);
                ts_module_train(m, true);
            }
            y[i] = infer(m, x, i != 0);
            st[i] = ts_snapshot_take(m, NULL, NULL);
            ts_module_free(m);
        }
        CHECK(same_bits(y[1], y[0]) && same_bits(y[2], y[0]));
        ts_snapshot_check("train mode under no-grad, fusion on", &st[1], &st[0]);
        ts_snapshot_check("train mode under no-grad after a fused eval", &st[2], &st[0]);
        for (int i = 0; i < 3; i++) ts_snapshot_free(&st[i]);
        CHECK_OK();
        ts_scope_end();
    }
}

/* ------------------------------------------------------------------ the cache follows changes */
/* fused and unfused agree (1e-5 of the output's largest magnitude: the bounds above, loosely;
 * a stale fold is off by tens of percent here) */
static bool agree(ts_module *m, ts_tensor *x, const char *what) {
    ts_tensor *f = infer(m, x, true), *u = infer(m, x, false);
    const double d = max_diff(f, u), mu = max_abs(u);
    const bool ok = d <= 1e-5 * mu && mu > 0;
    if (!ok) printf("  after %s: fused and unfused differ by %.3g (max |out| %.3g)\n", what, d, mu);
    return ok;
}

static void invalidation(net_kind k, ts_device dev) {
    ts_scope_begin();
    ts_module *m = ts_module_to(net_new(k, 8), dev);
    ts_module_eval(m);
    ts_tensor *x = ts_randn(TS_SHAPE(2, 3, 16, 16), (ts_opts){.device = dev});
    CHECK(agree(m, x, "the first call"));

    /* an optimizer step (training forward: the running statistics change too) */
    ts_optim *opt = ts_sgd_new(m, (ts_sgd_opts){.lr = 0.1});
    ts_module_train(m, true);
    ts_backward(ts_mean(ts_mul(ts_forward(m, x), ts_forward(m, x))));
    CHECK(ts_optim_step(opt) == TS_OK);
    ts_optim_free(opt);
    ts_module_eval(m);
    CHECK(agree(m, x, "an optimizer step"));

    /* load_state_dict from another model */
    ts_module *other = ts_module_to(net_new(k, 9), dev);
    ts_tensor_list sd = ts_module_state_dict(other);
    CHECK(ts_module_load_state_dict(m, &sd, true) == TS_OK);
    ts_tensor_list_free(&sd);
    ts_module_free(other);
    CHECK(agree(m, x, "load_state_dict"));

    /* in place, on each kind of source: a running variance, a BatchNorm weight, a conv weight */
    const char *net_names[3] = {"bn1.running_var", "bn1.weight", "conv1.weight"};
    const char *seq_names[3] = {"1.running_var", "1.weight", "0.weight"};
    for (int i = 0; i < 3; i++) {
        const char *n = k == NET_SEQ ? seq_names[i] : net_names[i];
        ts_no_grad_begin();
        ts_mul_scalar_(ts_module_get(m, n), i == 0 ? 4.0 : -1.5);
        ts_no_grad_end();
        CHECK(agree(m, x, n));
    }

    /* moved to another device and back (new storage) */
    ts_device other_dev = dev.type == TS_CPU ? ts_sim(0) : ts_cpu();
    ts_module_to(m, other_dev);
    CHECK(agree(m, ts_to(x, other_dev), "ts_module_to"));
    ts_no_grad_begin();
    ts_mul_scalar_(ts_module_get(m, k == NET_SEQ ? "1.running_mean" : "bn1.running_mean"), 3);
    ts_no_grad_end();
    ts_module_to(m, dev);
    CHECK(agree(m, x, "ts_module_to and back"));
    CHECK_OK();
    ts_module_free(m);
    ts_scope_end();
}

static void test_invalidation(void) {
    ts_device devs[TS_TEST_MAX_DEVICES];
    const int nd = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    for (int d = 0; d < nd; d++) {
        invalidation(NET_R20, devs[d]);
        invalidation(NET_SEQ, devs[d]);
    }
}

/* ------------------------------------------------------------------ a fold that is not finite */
static void test_not_finite(void) {
    ts_scope_begin();
    ts_manual_seed(10);
    ts_module *p[3] = {ts_conv2d_new(3, 8, 3, (ts_conv2d_opts){0}),
                       ts_batch_norm2d_new(8, (ts_norm_opts){0}), ts_relu_new()};
    ts_module *m = ts_sequential_new(3, p);
    randomize_bn(m, -1.5);
    ts_module_eval(m);
    ts_no_grad_begin();
    ts_fill_(ts_select(ts_module_get(m, "1.running_var"), 0, 2), -1.0); /* sqrt of < 0 */
    ts_no_grad_end();
    ts_tensor *x = ts_randn(TS_SHAPE(1, 3, 8, 8), (ts_opts){0});
    ts_tensor *f = infer(m, x, true), *u = infer(m, x, false);
    CHECK(same_values(f, u)); /* the modules ran: NaN where they give it */
    int64_t n, nans = 0;
    double *v = host(f, &n);
    for (int64_t i = 0; v && i < n; i++) nans += isnan(v[i]);
    free(v);
    CHECK_EQ(nans, 6 * 6); /* channel 2 of the one image */
    CHECK_OK();
    ts_module_free(m);
    ts_scope_end();
}

/* ------------------------------------------------------------------ threads, bookkeeping */
typedef struct thread_arg {
    ts_module *m;
    ts_tensor *x, *y;
} thread_arg;

static void *thread_run(void *p) {
    thread_arg *a = p;
    a->y = infer(a->m, a->x, true); /* outside any scope: this thread owns it */
    return NULL;
}

static void test_threads_and_bookkeeping(void) {
    ts_scope_begin();
    ts_module *m = net_new(NET_R20, 11);
    ts_module_eval(m);
    ts_tensor *x = ts_randn(TS_SHAPE(2, 3, 16, 16), (ts_opts){0});
    thread_arg args[2] = {{m, x, NULL}, {m, x, NULL}};
    pthread_t th[2];
    for (int i = 0; i < 2; i++) CHECK(pthread_create(&th[i], NULL, thread_run, &args[i]) == 0);
    for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
    ts_tensor *y = infer(m, x, true);
    CHECK(same_bits(args[0].y, y) && same_bits(args[1].y, y));
    ts_release(args[0].y), ts_release(args[1].y);

    /* no autograd node and nothing left behind: the live tensors before and after a forward */
    ts_mem_stats s0, s1;
    ts_memory_stats(ts_cpu(), &s0);
    ts_scope_begin();
    ts_tensor *y2 = infer(m, x, true);
    CHECK(ts_grad_fn_name(y2) == NULL && !ts_requires_grad(y2));
    ts_scope_end();
    ts_memory_stats(ts_cpu(), &s1);
    CHECK_EQ(s1.live_tensors, s0.live_tensors);
    CHECK_OK();
    ts_module_free(m);
    ts_scope_end();
}

int main(void) {
    test_units();
    test_whole_nets();
    test_train_untouched();
    test_train_no_grad();
    test_invalidation();
    test_not_finite();
    test_threads_and_bookkeeping();
    return ts_test_finish();
}
