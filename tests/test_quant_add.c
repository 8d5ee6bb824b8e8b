/* test_quant_add.c — ts_quantized_add / add_relu's one pass (kern_qlinear_add.c's torch mode, cpu
 * and sim) against its definition run op by op: ts_dequantize, ts_add, ts_relu,
 * ts_quantize_per_tensor (which test_quant_ops.c and tests/python/test_quant_static.py check
 * against references and PyTorch). Every byte equal: quint8 and qint8, relu, lengths around the
 * 16-lane vectors and the parallel blocks, scales that saturate, on the portable loop and on
 * AVX-512, on cpu and sim:0. (The op-by-op path itself runs on devices without the kernel.) */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_isa.h"
#include "fault_sweep.h"
#include "host_values.h"
#include "tessera/quant.h"
#include "ts_test.h"

static uint32_t seed = 777;
static int64_t rnd(int64_t lo, int64_t hi) {
    seed = seed * 1664525u + 1013904223u;
    return lo + (int64_t)((seed >> 8) % (uint32_t)(hi - lo + 1));
}

static int64_t numel(ts_shape s) {
    int64_t n = 1;
    for (int i = 0; i < s.ndim; i++) n *= s.dims[i];
    return n;
}

static ts_tensor *quantized(ts_shape s, bool sgn, double scale, int64_t zp) {
    const int64_t n = numel(s);
    uint8_t *v = malloc((size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++) v[i] = (uint8_t)rnd(0, 255);
    ts_tensor *t = ts_make_per_tensor_quantized_tensor(
        ts_from_data(s, sgn ? TS_I8 : TS_U8, v, (ts_opts){0}), scale, zp);
    free(v);
    return t;
}

/* a qint32 tensor of s (values well inside int32) */
static ts_tensor *quantized32(ts_shape s, double scale, int64_t zp) {
    const int64_t n = numel(s);
    int32_t *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    for (int64_t i = 0; i < n; i++) v[i] = (int32_t)rnd(-100000, 100000);
    ts_tensor *t =
        ts_make_per_tensor_quantized_tensor(ts_from_data(s, TS_I32, v, (ts_opts){0}), scale, zp);
    free(v);
    return t;
}

/* the integers of a quantized tensor as doubles (exact) */
static bool ints(ts_tensor *q, double *out, int64_t n) {
    return q && ts_test_read_f64(ts_to(ts_int_repr(q), ts_cpu()), out, n);
}

/* y (ts_quantized_add's) against the ops one after another, every integer */
static int same_as_ops(ts_tensor *y, ts_tensor *a, ts_tensor *b, double so, int64_t zo, bool relu,
                       ts_dtype dt) {
    ts_tensor *d = ts_add(ts_dequantize(a), ts_dequantize(b));
    ts_tensor *want = ts_quantize_per_tensor(relu ? ts_relu(d) : d, so, zo, dt);
    const int64_t n = want ? ts_numel(want) : 0;
    double *g = malloc((size_t)(n ? n : 1) * sizeof *g),
           *w = malloc((size_t)(n ? n : 1) * sizeof *w);
    int bad = 0;
    CHECK(y && want && ts_numel(y) == n);
    if (y && want && ints(y, g, n) && ints(want, w, n))
        for (int64_t i = 0; i < n; i++) bad += g[i] != w[i];
    else
        bad++;
    free(g), free(w);
    return bad;
}

static int add_case(ts_shape s, bool sgn, bool relu, double so, int64_t zo, ts_device dev) {
    const int64_t n = numel(s);
    ts_scope_begin();
    ts_tensor *a = ts_to(
        quantized(s, sgn, 0.0123 + 0.001 * (double)rnd(0, 9), rnd(-5, 5) + (sgn ? 0 : 128)), dev);
    ts_tensor *b = ts_to(quantized(s, sgn, 0.0371, sgn ? -20 : 100), dev);
    ts_tensor *y = ts_quantized_add(a, b, so, zo, relu);
    ts_tensor *d = ts_add(ts_dequantize(a), ts_dequantize(b));
    if (relu) d = ts_relu(d);
    ts_tensor *want = ts_quantize_per_tensor(d, so, zo, sgn ? TS_QINT8 : TS_QUINT8);
    double *g = malloc((size_t)(n ? n : 1) * sizeof *g),
           *w = malloc((size_t)(n ? n : 1) * sizeof *w);
    int bad = 0;
    CHECK(y != NULL && want != NULL);
    if (y && want && ints(y, g, n) && ints(want, w, n)) {
        int64_t z = 0;
        CHECK(ts_q_scale(y) == so && ts_q_zero_point(y, &z) == TS_OK && z == zo);
        for (int64_t i = 0; i < n; i++)
            if (g[i] != w[i] && bad++ < 3)
                fprintf(stderr, "quantized_add%s %s n %lld on %s: [%lld] %g, op by op %g\n",
                        relu ? "_relu" : "", sgn ? "qint8" : "quint8", (long long)n,
                        ts_device_str(dev), (long long)i, g[i], w[i]);
    }
    CHECK_OK();
    free(g), free(w);
    ts_scope_end();
    return bad;
}

static void test_one_pass(void) {
    static const int64_t lens[] = {1, 15, 16, 17, 63, 64, 65, 300, 4096 + 33, 300001};
    int bad = 0;
    for (int isa = 0; isa < 2; isa++) {
        atomic_store(&tsi_cpu_isa_chosen, isa == 0 ? TS_ISA_GENERIC : (int)tsi_cpu_isa_host());
        for (size_t l = 0; l < sizeof lens / sizeof lens[0]; l++)
            for (int v = 0; v < 8; v++) {
                const bool sgn = v & 1, relu = v & 2, sat = v & 4;
                /* sat: an output scale that pushes most sums past the byte range */
                const double so = sat ? 0.0009 : 0.045;
                const int64_t zo = sgn ? -7 : 60;
                bad += add_case(TS_SHAPE(lens[l]), sgn, relu, so, zo, ts_cpu());
                if (l == 8) bad += add_case(TS_SHAPE(lens[l]), sgn, relu, so, zo, ts_sim(0));
            }
    }
    atomic_store(&tsi_cpu_isa_chosen, -1);
    CHECK_EQ(bad, 0);
}

/* channels_last operands: two quantized convolutions' outputs (channels_last where the device's
 * route prefers it, as PyTorch's x86 conv): the one pass keeps the layout, the same integers */
static void test_channels_last(void) {
    int bad = 0;
    for (int v = 0; v < 4; v++) {
        const bool sgn = v & 1, relu = v & 2;
        ts_scope_begin();
        const ts_shape xs = TS_SHAPE(2, 8, 9, 7), ws = TS_SHAPE(16, 8, 3, 3);
        ts_tensor *x = quantized(xs, sgn, 0.02, sgn ? 0 : 128);
        ts_tensor *w1 = quantized(ws, true, 0.01, 0), *w2 = quantized(ws, true, 0.013, 0);
        const int64_t one[2] = {1, 1};
        ts_tensor *a =
                      ts_quantized_conv2d(x, w1, NULL, one, one, one, 1, 0.05, sgn ? 0 : 70, false),
                  *b =
                      ts_quantized_conv2d(x, w2, NULL, one, one, one, 1, 0.04, sgn ? 3 : 90, false);
        CHECK(a && b);
        if (a && b) {
            const bool cl = ts_is_contiguous_format(a, TS_CHANNELS_LAST) && !ts_is_contiguous(a);
            ts_tensor *y = ts_quantized_add(a, b, 0.06, sgn ? -5 : 64, relu);
            ts_tensor *d = ts_add(ts_dequantize(a), ts_dequantize(b));
            ts_tensor *want = ts_quantize_per_tensor(relu ? ts_relu(d) : d, 0.06, sgn ? -5 : 64,
                                                     sgn ? TS_QINT8 : TS_QUINT8);
            enum { N = 2 * 16 * 9 * 7 };
            static double g[N], w[N];
            CHECK(y && ints(y, g, N) && ints(want, w, N));
            for (int i = 0; i < N; i++) bad += g[i] != w[i];
            CHECK(!y || ts_is_contiguous_format(y, TS_CHANNELS_LAST) == cl);
            printf("quantized conv outputs %s\n", cl ? "channels_last" : "NCHW");
        }
        CHECK_OK();
        ts_scope_end();
    }
    CHECK_EQ(bad, 0);
}

/* a channels_last operand with an NCHW one (either order): the ops' path, the same integers; and
 * qint32 operands, which the one pass does not take */
static void test_other_operands(void) {
    int bad = 0;
    const int64_t one[2] = {1, 1};
    for (int v = 0; v < 4; v++) {
        const bool relu = v & 1, swap = v & 2;
        ts_scope_begin();
        ts_tensor *x = quantized(TS_SHAPE(1, 8, 6, 5), false, 0.02, 128);
        ts_tensor *c = ts_quantized_conv2d(x, quantized(TS_SHAPE(8, 8, 3, 3), true, 0.01, 0), NULL,
                                           one, one, one, 1, 0.05, 70, false);
        ts_tensor *n = quantized(TS_SHAPE(1, 8, 6, 5), false, 0.03, 100);
        ts_tensor *a = swap ? n : c, *b = swap ? c : n;
        bad += same_as_ops(ts_quantized_add(a, b, 0.06, 64, relu), a, b, 0.06, 64, relu, TS_QUINT8);
        ts_tensor *p = quantized32(TS_SHAPE(300), 0.001, 5),
                  *q = quantized32(TS_SHAPE(300), 0.003, -9);
        bad += same_as_ops(ts_quantized_add(p, q, 0.002, 7, relu), p, q, 0.002, 7, relu, TS_QINT32);
        CHECK_OK();
        ts_scope_end();
    }
    CHECK_EQ(bad, 0);
}

/* the sweep of fault_sweep.h over one add: each failed allocation reported (TS_ERR_OOM naming
 * the op, nothing leaked), the next run succeeds, and every result is the ops' integers */
typedef struct add_sweep {
    ts_tensor *a, *b, *y;
} add_sweep;

static void *add_setup(void) {
    add_sweep *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    ts_scope_begin();
    s->a = ts_retain(quantized(TS_SHAPE(2, 40), false, 0.02, 128));
    s->b = ts_retain(quantized(TS_SHAPE(2, 40), false, 0.03, 100));
    ts_scope_end();
    return s;
}

static bool add_run(void *p) {
    add_sweep *s = p;
    ts_release(s->y);
    ts_scope_begin();
    s->y = ts_retain(ts_quantized_add(s->a, s->b, 0.05, 60, true));
    ts_scope_end();
    return s->y && ts_error() == TS_OK;
}

static void add_check(void *p, bool ok) {
    add_sweep *s = p;
    if (!ok) return;
    ts_scope_begin();
    CHECK_EQ(same_as_ops(s->y, s->a, s->b, 0.05, 60, true, TS_QUINT8), 0);
    ts_scope_end();
}

static void add_teardown(void *p) {
    add_sweep *s = p;
    ts_release(s->a), ts_release(s->b), ts_release(s->y);
    free(s);
}

static void test_out_of_memory(void) {
    const ts_sweep_case c = {.name = "quantized_add_relu, one pass",
                             .setup = add_setup,
                             .run = add_run,
                             .teardown = add_teardown,
                             .check = add_check};
    const ts_sweep_stats st = ts_fault_sweep(&c, 50);
    CHECK(st.oom >= 1 && st.oom == st.errors);
}

int main(void) {
    ts_sim_configure(1, 0);
    test_one_pass();
    test_channels_last();
    test_other_operands();
    test_out_of_memory();
    return ts_test_finish();
}
