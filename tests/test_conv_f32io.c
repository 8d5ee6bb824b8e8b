/* test_conv_f32io.c — autocast's convolution feeding a float32 layer (nn/conv.c's
 * tsi_conv2d_f32io, backend.h's conv2d_f32io): float32 x and y, bf16 products, the output and the
 * input gradient widened inside the kernels instead of by cast passes. It must give the bits of
 * what it replaces, ts_conv2d under a bf16 autocast region followed by the float32 cast of its
 * result: output, input gradient and weight gradient compared bit for bit, and held to
 * test_conv_bf16.c's bound against float64 convolutions of the bf16-rounded operands, on every
 * test device, with oneDNN
 * forced (every part on its bf16 primitives where the CPU has native bf16) and with the automatic
 * provider choice; ctest runs it again with oneDNN capped below native bf16 and with
 * TS_CONV=builtin (the bf16 kernels into a buffer, widened after).
 * Also: where it does not apply it does nothing; mistakes give conv2d's errors. A narrow ResNet-18
 * in training under autocast no longer takes it (its batch-norms take the convolutions' bf16
 * outputs: test_batch_norm_bf16.c): the same loss, gradients, running statistics and casts with
 * ts_set_eval_fusion on and off. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "amp/autocast.h"
#include "backend/cpu/conv_dnnl.h"
#include "backend/cpu/kern_conv.h"
#include "backend/cpu/matmul_dnnl.h"
#include "bf16_check.h"
#include "nn/conv_internal.h"
#include "same_bits.h"
#include "state_snapshot.h"
#include "ts_test.h"

typedef struct conv_case {
    const char *name;
    int64_t n, c, h, w, o, kh, kw;
    ts_conv2d_opts o_;
} conv_case;

typedef struct result {
    ts_tensor *y, *gx, *gw;
    ts_tensor *x, *w, *gy; /* the operands */
} result;

/* One forward and backward of case cc on dev under a bf16 autocast region, fused (f32io) or as
 * ts_conv2d then the cast to float32; the same x, w and gy each time (seeded). */
static result run_case(const conv_case *cc, ts_device dev, bool fused, uint64_t *bf16_runs) {
    const int groups = cc->o_.groups ? cc->o_.groups : 1;
    ts_manual_seed(11);
    const ts_opts on = {.device = dev};
    ts_tensor *x = ts_randn(TS_SHAPE(cc->n, cc->c, cc->h, cc->w), on);
    ts_tensor *w =
        ts_mul_scalar(ts_randn(TS_SHAPE(cc->o, cc->c / groups, cc->kh, cc->kw), on), 0.3);
    ts_set_requires_grad(x, true), ts_set_requires_grad(w, true);
    result r = {0};
    const uint64_t runs = tsi_dnnl_conv_bf16_count();
    ts_autocast_begin(dev.type, TS_BF16);
    if (fused) {
        CHECK(tsi_conv2d_f32io(x, w, cc->o_, &r.y));
    } else {
        r.y = ts_conv2d(x, w, NULL, cc->o_);
        CHECK(r.y && ts_dtype_of(r.y) == TS_BF16);
        r.y = ts_to_dtype(r.y, TS_F32);
    }
    ts_autocast_end();
    CHECK(r.y && ts_dtype_of(r.y) == TS_F32);
    ts_tensor *gy = r.y ? ts_randn(ts_shape_of(r.y), on) : NULL;
    ts_backward_with(r.y, gy);
    *bf16_runs = tsi_dnnl_conv_bf16_count() - runs;
    r.gx = ts_grad(x), r.gw = ts_grad(w);
    r.x = x, r.w = w, r.gy = gy;
    CHECK(r.gx && ts_dtype_of(r.gx) == TS_F32 && r.gw && ts_dtype_of(r.gw) == TS_F32);
    CHECK_OK();
    return r;
}

static const conv_case CASES[] = {
    {"3x3 pad 1 (ResNet)", 2, 16, 10, 10, 32, 3, 3, {.padding = {1, 1}}},
    {"stem, 3 channels", 2, 3, 12, 12, 16, 3, 3, {.padding = {1, 1}}},
    {"stride 2, 1x1 (downsample)", 2, 32, 9, 9, 16, 1, 1, {.stride = {2, 2}}},
    {"3x3 stride 2", 2, 16, 9, 9, 32, 3, 3, {.stride = {2, 2}, .padding = {1, 1}}},
    {"dilated 3x3", 1, 8, 12, 12, 8, 3, 3, {.padding = {2, 2}, .dilation = {2, 2}}},
    {"grouped (4 groups)", 2, 16, 8, 8, 24, 3, 3, {.padding = {1, 1}, .groups = 4}},
    {"long sums (k 576)", 1, 64, 6, 6, 8, 3, 3, {.padding = {1, 1}}},
};
#define N_CASES (sizeof CASES / sizeof CASES[0])

/* t rounded to bf16 (what the products see), as a float64 leaf (|t| when absolute) */
static ts_tensor *f64_of(ts_tensor *t, bool absolute, bool grad) {
    ts_tensor *d = ts_to_dtype(ts_to_dtype(ts_detach(t), TS_BF16), TS_F64);
    if (absolute) d = ts_abs(d);
    d = ts_contiguous(d);
    if (grad) ts_set_requires_grad(d, true);
    return d;
}

/* The fused results against float64 convolutions of the bf16-rounded operands, within
 * test_conv_bf16.c's bound (bf16_check.h): exact products, float32 sums of K terms, one rounding
 * to bf16 (the float32 results are widened bf16 values). */
static void check_f64(const conv_case *cc, const result *f) {
    const int groups = cc->o_.groups ? cc->o_.groups : 1;
    ts_tensor *x64 = f64_of(f->x, false, true), *w64 = f64_of(f->w, false, true);
    ts_tensor *y64 = ts_conv2d(x64, w64, NULL, cc->o_);
    ts_backward_with(y64, f64_of(f->gy, false, false));
    ts_tensor *xa = f64_of(f->x, true, true), *wa = f64_of(f->w, true, true);
    ts_tensor *ya = ts_conv2d(xa, wa, NULL, cc->o_);
    ts_backward_with(ya, f64_of(f->gy, true, false));
    const ts_shape ys = ts_shape_of(y64);
    CHECK_BF16_SUM(cc->name, f->y, y64, ya, (double)(cc->c / groups * cc->kh * cc->kw));
    CHECK_BF16_SUM(cc->name, f->gx, ts_grad(x64), ts_grad(xa),
                   (double)(cc->o / groups * cc->kh * cc->kw));
    CHECK_BF16_SUM(cc->name, f->gw, ts_grad(w64), ts_grad(wa),
                   (double)(ys.dims[0] * ys.dims[2] * ys.dims[3]));
}

/* expect_runs: bf16 primitives the fused case must run (3: all three parts), or -1: any */
static void check_cases(ts_device dev, int expect_runs) {
    for (size_t i = 0; i < N_CASES; i++) {
        ts_scope_begin();
        uint64_t ran_f, ran_u;
        result f = run_case(&CASES[i], dev, true, &ran_f);
        result u = run_case(&CASES[i], dev, false, &ran_u);
        const bool y = same_bits(f.y, u.y), gx = same_bits(f.gx, u.gx), gw = same_bits(f.gw, u.gw);
        CHECK(y && gx && gw);
        check_f64(&CASES[i], &f);
        if (expect_runs >= 0 && dev.type == TS_CPU) CHECK_EQ(ran_f, (uint64_t)expect_runs);
        CHECK_EQ(ran_f, ran_u); /* the same provider for both */
        printf("%-28s %-6s y %s gx %s gw %s, %llu of 3 on oneDNN bf16\n", CASES[i].name,
               dev.type == TS_CPU ? "cpu" : "sim:0", y ? "same" : "DIFFER", gx ? "same" : "DIFFER",
               gw ? "same" : "DIFFER", (unsigned long long)ran_f);
        ts_scope_end();
        CHECK_OK();
    }
}

/* where it does not apply: false and nothing done; mistakes: conv2d's errors */
static void test_applies(ts_device dev) {
    ts_scope_begin();
    const ts_opts on = {.device = dev};
    ts_tensor *x = ts_randn(TS_SHAPE(1, 4, 6, 6), on), *w = ts_randn(TS_SHAPE(8, 4, 3, 3), on);
    ts_tensor *y = (ts_tensor *)1;
    CHECK(!tsi_conv2d_f32io(x, w, (ts_conv2d_opts){0}, &y) && !y); /* no autocast */
    ts_autocast_begin(dev.type, TS_F16);
    CHECK(!tsi_conv2d_f32io(x, w, (ts_conv2d_opts){0}, &y) && !y); /* float16 */
    ts_autocast_end();
    ts_autocast_begin(dev.type, TS_BF16);
    ts_tensor *x64 = ts_to_dtype(x, TS_F64);
    CHECK(!tsi_conv2d_f32io(x64, w, (ts_conv2d_opts){0}, &y) && !y); /* not float32 */
    CHECK(tsi_conv2d_f32io(x, w, (ts_conv2d_opts){.padding = {1, 1}}, &y) && y);
    CHECK(y && ts_ndim(y) == 4 && ts_size(y, 1) == 8 && ts_size(y, 2) == 6);
    ts_tensor *w5 = ts_randn(TS_SHAPE(8, 5, 3, 3), on);
    CHECK(tsi_conv2d_f32io(x, w5, (ts_conv2d_opts){0}, &y) && !y);
    CHECK_ERR_HAS(TS_ERR_SHAPE, "conv2d: given groups=1, weight of size");
    ts_autocast_end();
    ts_scope_end();
    CHECK_OK();
}

/* One training step's forward and backward of a narrow ResNet-18 under autocast */
typedef struct net_out {
    ts_tensor *loss, *gx;
    ts_snapshot state;
    uint64_t casts;
} net_out;

static net_out resnet_step(ts_device dev, bool fuse) {
    const bool was = ts_set_eval_fusion(fuse);
    ts_manual_seed(5);
    ts_module *m = ts_module_to(
        ts_resnet18((ts_resnet_config){.width = 8, .num_classes = 10, .cifar_stem = true}), dev);
    ts_manual_seed(6);
    ts_tensor *x = ts_randn(TS_SHAPE(4, 3, 16, 16), (ts_opts){.device = dev});
    ts_set_requires_grad(x, true);
    net_out r = {0};
    const uint64_t c0 = tsi_autocast_cast_count;
    ts_autocast_begin(dev.type, TS_BF16);
    ts_tensor *y = ts_forward(m, x);
    r.loss = ts_sum(ts_mul(y, y));
    ts_autocast_end();
    r.casts = tsi_autocast_cast_count - c0;
    ts_backward(r.loss);
    r.gx = ts_grad(x);
    ts_tensor_list grads = {0};
    ts_tensor_list ps = ts_module_named_parameters(m);
    for (int i = 0; i < ps.n; i++) ts_tensor_list_add(&grads, ps.names[i], ts_grad(ps.tensors[i]));
    r.state = ts_snapshot_take(m, NULL, NULL);
    ts_snapshot_add(&r.state, "grad.", &grads);
    ts_tensor_list_free(&ps), ts_tensor_list_free(&grads);
    ts_module_free(m);
    ts_set_eval_fusion(was);
    return r;
}

static void test_resnet(ts_device dev) {
    ts_scope_begin();
    net_out off = resnet_step(dev, false), on = resnet_step(dev, true);
    CHECK(same_bits(on.loss, off.loss) && same_bits(on.gx, off.gx));
    ts_snapshot_check("resnet18 under autocast, eval fusion on and off", &on.state, &off.state);
    /* the activations stay bf16 from the stem's cast to the fc: the stem input's, the 20
     * convolution weights', the fc's weight and bias: 23 casts plus the loss's sum (float32) */
    printf("resnet18 width 8 under autocast (%s): casts %llu with eval fusion on, %llu off\n",
           dev.type == TS_CPU ? "cpu" : "sim:0", (unsigned long long)on.casts,
           (unsigned long long)off.casts);
    CHECK(on.casts == off.casts && on.casts == 24);
    ts_snapshot_free(&off.state), ts_snapshot_free(&on.state);
    ts_scope_end();
    CHECK_OK();
}

int main(void) {
    ts_scope_begin();
    const char *cap = getenv("ONEDNN_MAX_CPU_ISA");
    const char *conv = getenv("TS_CONV");
    const bool native = tsi_dnnl_bf16_native() && !(conv && !strcmp(conv, "builtin"));
    printf("native bf16 convolutions: %s%s%s%s%s\n", native ? "yes" : "no",
           cap ? ", ONEDNN_MAX_CPU_ISA=" : "", cap ? cap : "", conv ? ", TS_CONV=" : "",
           conv ? conv : "");
    ts_device devs[TS_TEST_MAX_DEVICES];
    const int nd = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    for (int d = 0; d < nd; d++) {
        if (devs[d].type == TS_CUDA) continue; /* no conv2d_f32io there: test_applies' case */
        if (conv) {
            check_cases(devs[d], native ? 3 : 0);
        } else {
            tsi_conv_force_provider("dnnl");
            check_cases(devs[d], native ? 3 : 0);
            tsi_conv_force_provider(NULL);
            check_cases(devs[d], -1);
        }
        test_applies(devs[d]);
        test_resnet(devs[d]);
    }
    ts_scope_end();
    return ts_test_finish();
}
