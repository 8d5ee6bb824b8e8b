/* test_quant_x86.c — ts_quantized_linear / ts_quantized_conv2d with a float32 bias: PyTorch's x86
 * requantization (src/ops/qrequant.c, quant_args.h), bit for bit against the definition written
 * here: the exact int64 sum of (x - x_zp)(w - w_zp), then
 *   atws = (float)x_scale * (float)w_scale[c], fmult = atws / (float)out_scale,
 *   fb = bias / atws (per channel) or bias * (float)(1.0 / atws) (per tensor),
 *   y = clamp(zp + nearbyintf(((float)acc + fb) * fmult)).
 * The scales make fmult about 0.3-0.9 and the sums small, so that rounding the bias to int32 or
 * multiplying in float64 (the int32-bias arithmetic) gives other integers on many outputs: the
 * test fails unless the kernels run this arithmetic. Every kernel: the portable and the VNNI
 * linear, and the convolution's routes (oneDNN where it fits, the own kernels forced with
 * TS_QCONV=own: VNNI, the direct depthwise loop, im2col on the portable ISA), on cpu and sim:0.
 * PyTorch's own outputs: tests/python/test_quant_x86.py. */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_isa.h"
#include "backend/cpu/qconv_dnnl.h"
#include "backend/env_config.h"
#include "fault_sweep.h"
#include "host_values.h"
#include "tessera/quant.h"
#include "ts_test.h"

static uint32_t seed = 12345;
static int64_t rnd(int64_t lo, int64_t hi) { /* uniform in [lo, hi] */
    seed = seed * 1664525u + 1013904223u;
    return lo + (int64_t)((seed >> 8) % (uint32_t)(hi - lo + 1));
}

typedef struct layer {
    bool conv, xu, per_tensor, relu, bias, w_zp;
    int64_t n, c, h, w, co, k, groups; /* linear: n rows of c in, co out */
} layer;

/* the weight's parameters and the reference's; ws / wz [co] */
static void weight_params(const layer *L, double *ws, int64_t *wz) {
    for (int64_t c = 0; c < L->co; c++) {
        ws[c] = L->per_tensor ? 0.0123 : 0.004 + 0.0005 * (double)rnd(0, 40);
        wz[c] = L->w_zp && !L->per_tensor ? rnd(-4, 4) : 0;
    }
}

static int64_t reference(const layer *L, const uint8_t *xb, const int8_t *wb, const double *ws,
                         const int64_t *wz, const float *bias, double xs, int64_t xzp, double os,
                         int64_t ozp, int64_t *want) {
    const int64_t lo = L->xu ? 0 : -128, hi = L->xu ? 255 : 127, cg = L->c / L->groups,
                  cog = L->co / L->groups, oh = L->conv ? L->h : 1, ow = L->conv ? L->w : 1,
                  pad = L->k / 2;
    const float rcp = (float)(1.0 / (double)((float)xs * (float)ws[0]));
    int64_t count = 0;
    for (int64_t n = 0; n < L->n; n++)
        for (int64_t co = 0; co < L->co; co++)
            for (int64_t oy = 0; oy < oh; oy++)
                for (int64_t ox = 0; ox < ow; ox++) {
                    int64_t acc = 0;
                    if (!L->conv) {
                        for (int64_t i = 0; i < L->c; i++) {
                            const int64_t xv = L->xu ? xb[n * L->c + i] : (int8_t)xb[n * L->c + i];
                            acc += (xv - xzp) * (wb[co * L->c + i] - wz[co]);
                        }
                    } else {
                        const int64_t g = co / cog;
                        for (int64_t ci = 0; ci < cg; ci++)
                            for (int64_t i = 0; i < L->k; i++)
                                for (int64_t j = 0; j < L->k; j++) {
                                    const int64_t y = oy - pad + i, x = ox - pad + j;
                                    if (y < 0 || y >= L->h || x < 0 || x >= L->w) continue;
                                    const int64_t at =
                                        ((n * L->c + g * cg + ci) * L->h + y) * L->w + x;
                                    const int64_t xv = L->xu ? xb[at] : (int8_t)xb[at];
                                    acc += (xv - xzp) *
                                           (wb[((co * cg + ci) * L->k + i) * L->k + j] - wz[co]);
                                }
                    }
                    const float atws = (float)xs * (float)ws[L->per_tensor ? 0 : co];
                    const float fm = atws / (float)os;
                    const float fb = !bias           ? 0.0f
                                     : L->per_tensor ? bias[co] * rcp
                                                     : bias[co] / atws;
                    float f = (float)acc + fb;
                    f *= fm;
                    int64_t q = ozp + (int64_t)nearbyintf(f);
                    const int64_t qlo = L->relu && ozp > lo ? ozp : lo;
                    want[count++] = q < qlo ? qlo : q > hi ? hi : q;
                }
    return count;
}

/* the layer on device dev, its integers in got (NCHW / [n, co]); NULL: failed */
static ts_tensor *run(const layer *L, ts_device dev, const uint8_t *xb, const int8_t *wb,
                      const double *ws, const int64_t *wz, const float *bias, double xs,
                      int64_t xzp, double os, int64_t ozp) {
    const ts_shape xsh = L->conv ? TS_SHAPE(L->n, L->c, L->h, L->w) : TS_SHAPE(L->n, L->c),
                   wsh = L->conv ? TS_SHAPE(L->co, L->c / L->groups, L->k, L->k)
                                 : TS_SHAPE(L->co, L->c);
    ts_tensor *x = ts_make_per_tensor_quantized_tensor(
        ts_from_data(xsh, L->xu ? TS_U8 : TS_I8, xb, (ts_opts){0}), xs, xzp);
    ts_tensor *wi = ts_from_data(wsh, TS_I8, wb, (ts_opts){0});
    ts_tensor *w = L->per_tensor ? ts_make_per_tensor_quantized_tensor(wi, ws[0], 0)
                                 : ts_make_per_channel_quantized_tensor(
                                       wi, ts_tensor_f64(TS_SHAPE(L->co), ws, (ts_opts){0}),
                                       ts_tensor_i64(TS_SHAPE(L->co), wz, (ts_opts){0}), 0);
    /* no bias: zeros, which select the x86 arithmetic and add nothing */
    ts_tensor *b = bias ? ts_tensor_f32(TS_SHAPE(L->co), bias, (ts_opts){0})
                        : ts_zeros(TS_SHAPE(L->co), (ts_opts){0});
    x = ts_to(x, dev), w = ts_to(w, dev), b = ts_to(b, dev);
    const int64_t one[2] = {1, 1}, pad[2] = {L->k / 2, L->k / 2};
    ts_tensor *y = L->conv
                       ? ts_quantized_conv2d(x, w, b, one, pad, one, L->groups, os, ozp, L->relu)
                       : ts_quantized_linear(x, w, b, os, ozp, L->relu);
    return y ? ts_to(ts_int_repr(y), ts_cpu()) : NULL;
}

static int layer_case(const layer *L) {
    const int64_t nx = L->conv ? L->n * L->c * L->h * L->w : L->n * L->c,
                  nw = L->conv ? L->co * (L->c / L->groups) * L->k * L->k : L->co * L->c,
                  ny = L->conv ? L->n * L->co * L->h * L->w : L->n * L->co;
    uint8_t *xb = malloc((size_t)nx);
    int8_t *wb = malloc((size_t)nw);
    double *ws = malloc((size_t)L->co * sizeof *ws);
    int64_t *wz = malloc((size_t)L->co * sizeof *wz), *want = malloc((size_t)ny * sizeof *want);
    double *got = malloc((size_t)ny * sizeof *got); /* integers, exact in float64 */
    float *bias = malloc((size_t)L->co * sizeof *bias);
    /* small sums: x within 6 of its zero point, w within 5 of its */
    const int64_t xzp = L->xu ? 128 : -3;
    for (int64_t i = 0; i < nx; i++) xb[i] = (uint8_t)(xzp + rnd(-6, 6));
    weight_params(L, ws, wz);
    for (int64_t i = 0; i < nw; i++) wb[i] = (int8_t)rnd(-5, 5);
    for (int64_t c = 0; c < L->co; c++) bias[c] = (float)rnd(-4000, 4000) * 1.37e-5f;
    const double xs = 0.031, os = L->per_tensor ? 0.00071 : 0.00043;
    const int64_t ozp = L->xu ? 90 : -10;
    const int64_t count =
        reference(L, xb, wb, ws, wz, L->bias ? bias : NULL, xs, xzp, os, ozp, want);
    int bad = 0;
    for (int d = 0; d < 2; d++) {
        ts_scope_begin();
        ts_tensor *y = run(L, d ? ts_sim(0) : ts_cpu(), xb, wb, ws, wz, L->bias ? bias : NULL, xs,
                           xzp, os, ozp);
        CHECK(y != NULL);
        CHECK_OK();
        if (y) CHECK(ts_test_read_f64(y, got, ny));
        for (int64_t i = 0; y && i < count; i++)
            if (got[i] != (double)want[i] && bad++ < 3)
                fprintf(stderr,
                        "%s %s%s%s%s %s: output %lld is %lld, PyTorch's x86 arithmetic %lld\n",
                        L->conv ? "conv" : "linear", L->xu ? "quint8" : "qint8",
                        L->per_tensor ? " per tensor" : " per channel", L->relu ? " relu" : "",
                        L->bias ? " bias" : " zero bias", d ? "sim:0" : "cpu", (long long)i,
                        (long long)got[i], (long long)want[i]);
        ts_scope_end();
    }
    free(xb), free(wb), free(ws), free(wz), free(want), free(got), free(bias);
    return bad;
}

/* outputs on which the int32-bias float64 arithmetic differs from this one: the cases above must
 * have many, or they would not tell the two apart */
static void test_discriminates(void) {
    const float xs = 0.031f, ws = 0.0123f;
    const double os = 0.00071;
    int differ = 0;
    for (int64_t acc = -40; acc <= 40; acc++)
        for (int b = -4000; b <= 4000; b += 97) {
            const float bias = (float)b * 1.37e-5f, atws = xs * ws;
            const float f = ((float)acc + bias * (float)(1.0 / (double)atws)) * (atws / (float)os);
            const double bi = nearbyint((double)bias / (0.031 * 0.0123));
            differ += nearbyintf(f) != nearbyint(((double)acc + bi) * (0.031 * 0.0123 / os));
        }
    printf("the int32-bias arithmetic differs on %d of %d sums\n", differ, 81 * 83);
    CHECK(differ > 81 * 83 / 20);
}

static void test_layers(void) {
    int bad = 0;
    const uint64_t dnnl0 = tsi_qconv_dnnl_count();
    for (int isa = 0; isa < 2; isa++) {
        atomic_store(&tsi_cpu_isa_chosen, isa == 0 ? TS_ISA_GENERIC : (int)tsi_cpu_isa_host());
        for (int route = 0; route < 2; route++) {
            if (route)
                setenv("TS_QCONV", "own", 1);
            else
                unsetenv("TS_QCONV");
            tsi_env_reload(TSI_ENV_QCONV);
            for (int v = 0; v < 32; v++) {
                const bool xu = v & 1, pt = v & 2, relu = v & 4, bias = v & 8, wzp = v & 16;
                const layer lin = {false, xu, pt, relu, bias, wzp, 9, 37, 1, 1, 21, 1, 1};
                const layer dense = {true, xu, pt, relu, bias, wzp, 2, 6, 7, 5, 10, 3, 1};
                const layer grouped = {true, xu, pt, relu, bias, wzp, 1, 8, 6, 6, 12, 3, 2};
                const layer dw = {true, xu, pt, relu, bias, wzp, 2, 16, 9, 8, 16, 3, 16};
                const layer pw = {true, xu, pt, relu, bias, wzp, 1, 32, 7, 7, 24, 1, 1};
                if (!route) bad += layer_case(&lin);
                bad +=
                    layer_case(&dense) + layer_case(&grouped) + layer_case(&dw) + layer_case(&pw);
            }
        }
    }
    atomic_store(&tsi_cpu_isa_chosen, -1);
    unsetenv("TS_QCONV");
    tsi_env_reload(TSI_ENV_QCONV);
    CHECK_EQ(bad, 0);
    /* the oneDNN route took the symmetric-weight convs where it exists */
    if (tsi_qconv_dnnl_available()) CHECK(tsi_qconv_dnnl_count() > dnnl0);
}

static void test_refusals(void) {
    ts_scope_begin();
    const int64_t one[2] = {1, 1}, zero[2] = {0, 0};
    ts_tensor *x = ts_make_per_tensor_quantized_tensor(
        ts_zeros(TS_SHAPE(1, 2, 3, 3), (ts_opts){.dtype = TS_U8}), 0.1, 0);
    ts_tensor *w = ts_make_per_tensor_quantized_tensor(
        ts_zeros(TS_SHAPE(3, 2, 1, 1), (ts_opts){.dtype = TS_I8}), 0.1, 0);
    ts_tensor *b64 = ts_zeros(TS_SHAPE(3), (ts_opts){.dtype = TS_F64}),
              *b32 = ts_zeros(TS_SHAPE(3), (ts_opts){0});
    CHECK(!ts_quantized_conv2d(x, w, b64, one, zero, one, 1, 0.2, 5, false));
    CHECK_ERR_HAS(TS_ERR_ARG, "quantized_conv2d: bias must be int32 or float32 [3]");
    CHECK(!ts_quantized_conv2d(x, w, ts_zeros(TS_SHAPE(4), (ts_opts){0}), one, zero, one, 1, 0.2, 5,
                               false));
    CHECK_ERR_HAS(TS_ERR_ARG, "bias must be int32 or float32 [3]");
    const float m = 0.5f;
    CHECK(!ts_qlinear_conv2d(x, w, b32, one, zero, one, 1,
                             ts_tensor_f32(TS_SHAPE(1), &m, (ts_opts){0}), 0, TS_U8, false));
    CHECK_ERR_HAS(TS_ERR_ARG, "qlinear_conv2d: bias must be int32 [3]");
    ts_tensor *xl = ts_make_per_tensor_quantized_tensor(
        ts_zeros(TS_SHAPE(2, 4), (ts_opts){.dtype = TS_U8}), 0.1, 0);
    ts_tensor *wl = ts_make_per_tensor_quantized_tensor(
        ts_zeros(TS_SHAPE(3, 4), (ts_opts){.dtype = TS_I8}), 0.1, 0);
    CHECK(!ts_quantized_linear(xl, wl, b64, 0.2, 5, false));
    CHECK_ERR_HAS(TS_ERR_ARG, "quantized_linear: bias must be int32 or float32 [3]");
    CHECK(!ts_quantized_linear_acc(xl, wl, b32));
    CHECK_ERR_HAS(TS_ERR_ARG, "quantized_linear_acc: bias must be int32 [3]");
    CHECK(ts_quantized_linear(xl, wl, b32, 0.2, 5, false) != NULL);
    /* no output features: an empty [2, 0] output, the float bias empty too */
    ts_tensor *w0 = ts_make_per_tensor_quantized_tensor(
        ts_zeros(TS_SHAPE(0, 4), (ts_opts){.dtype = TS_I8}), 0.1, 0);
    ts_tensor *y0 = ts_quantized_linear(xl, w0, ts_zeros(TS_SHAPE(0), (ts_opts){0}), 0.2, 5, false);
    CHECK(y0 && ts_numel(y0) == 0 && ts_shape_of(y0).dims[1] == 0);
    /* a NaN in the float bias: that channel's outputs the range's low end on every route (the
     * vector kernels' max / min and the scalar and CUDA loops alike), no undefined cast */
    const float bn[3] = {NAN, 0.0f, INFINITY};
    for (int isa = 0; isa < 2; isa++) {
        atomic_store(&tsi_cpu_isa_chosen, isa == 0 ? TS_ISA_GENERIC : (int)tsi_cpu_isa_host());
        double v[6];
        ts_tensor *yn = ts_quantized_linear(xl, wl, ts_tensor_f32(TS_SHAPE(3), bn, (ts_opts){0}),
                                            0.2, 5, false);
        CHECK(yn && ts_test_read_f64(ts_int_repr(yn), v, 6));
        CHECK(v[0] == 0 && v[3] == 0 && v[1] == 5 && v[4] == 5 && v[2] == 255 && v[5] == 255);
    }
    atomic_store(&tsi_cpu_isa_chosen, -1);
    CHECK_OK();
    ts_scope_end();
}

/* the sweep of fault_sweep.h over the float-bias conv and linear: each failed allocation
 * reported (TS_ERR_OOM naming the op, nothing leaked) or absorbed (another route, an uncached
 * weight), and every result the fault-free run's integers */
typedef struct x86_sweep {
    bool lin;
    ts_tensor *x, *w, *b, *want, *y;
} x86_sweep;

static ts_tensor *x86_layer(const x86_sweep *s) {
    const int64_t one[2] = {1, 1};
    return s->lin ? ts_quantized_linear(s->x, s->w, s->b, 0.0005, 60, false)
                  : ts_quantized_conv2d(s->x, s->w, s->b, one, one, one, 1, 0.0005, 60, false);
}

static void *x86_setup(bool lin) {
    x86_sweep *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->lin = lin;
    ts_scope_begin();
    s->x = ts_retain(ts_make_per_tensor_quantized_tensor(
        ts_full(lin ? TS_SHAPE(3, 5) : TS_SHAPE(1, 4, 5, 5), 130, (ts_opts){.dtype = TS_U8}), 0.03,
        128));
    s->w = ts_retain(
        ts_make_per_tensor_quantized_tensor(ts_full(lin ? TS_SHAPE(6, 5) : TS_SHAPE(6, 4, 3, 3),
                                                    lin ? -2 : 3, (ts_opts){.dtype = TS_I8}),
                                            0.01, 0));
    s->b = ts_retain(ts_full(TS_SHAPE(6), 0.0037, (ts_opts){0}));
    s->want = ts_retain(x86_layer(s));
    ts_scope_end();
    return s;
}
static void *conv_setup(void) { return x86_setup(false); }
static void *linear_setup(void) { return x86_setup(true); }

static bool x86_run(void *p) {
    x86_sweep *s = p;
    ts_release(s->y);
    ts_scope_begin();
    s->y = ts_retain(x86_layer(s));
    ts_scope_end();
    return s->y && ts_error() == TS_OK;
}

static void x86_check(void *p, bool ok) {
    x86_sweep *s = p;
    if (!ok) return;
    enum { N = 150 }; /* the conv's 6 x 5 x 5 outputs, the linear's 3 x 6 */
    double a[N], b[N];
    const int64_t n = ts_numel(s->want);
    ts_scope_begin();
    CHECK(n <= N && ts_test_read_f64(ts_int_repr(s->y), a, n) &&
          ts_test_read_f64(ts_int_repr(s->want), b, n) && !memcmp(a, b, (size_t)n * sizeof *a));
    ts_scope_end();
}

static void x86_teardown(void *p) {
    x86_sweep *s = p;
    ts_release(s->x), ts_release(s->w), ts_release(s->b), ts_release(s->want), ts_release(s->y);
    free(s);
}

static void test_out_of_memory(void) {
    for (int lin = 0; lin < 2; lin++) {
        const ts_sweep_case c = {.name = lin ? "quantized_linear, float bias"
                                             : "quantized_conv2d, float bias",
                                 .setup = lin ? linear_setup : conv_setup,
                                 .run = x86_run,
                                 .teardown = x86_teardown,
                                 .check = x86_check};
        const ts_sweep_stats st = ts_fault_sweep(&c, 100);
        CHECK(st.oom >= 2 && st.oom == st.errors);
    }
}

int main(void) {
    ts_sim_configure(1, 0);
    test_discriminates();
    test_layers();
    test_refusals();
    test_out_of_memory();
    return ts_test_finish();
}
