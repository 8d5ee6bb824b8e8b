/* test_quant_lstm.c — ts_dynamic_quantized_lstm against a float64 reference of the same quantized
 * arithmetic written here: the layer input quantized once (ts_choose_qparams_per_tensor +
 * ts_quantize_per_tensor, both tested in test_quant.c), h quantized at each step, exact integer
 * dot products, gates and cell in float64. The reference is teacher-forced: step t reads the
 * h_{t-1} the implementation produced (its output), so that both quantize the same float32 h and
 * only float32 rounding separates them (a flipped rounding of h would otherwise move a gate by a
 * whole quantum). The bound, per step: the gate pre-activations are two float32 roundings of
 * float64 values and one float32 add (<= 3u (|gx| + |gh|), u = 2^-24); sigmoid / tanh in float32
 * add a few u (their slopes are <= 1); c' = f c + i g adds 3u (|c| + 1) and the activations'
 * errors times |c| + 1; h = o tanh(c') adds 4u. Summed generously: eps_t = 32 u (1 + |c| +
 * |gx| + |gh|) per element; |dc_t| <= |dc_{t-1}| + eps_t (f <= 1), |dh_t| <= |dc_t| + eps_t.
 * Multi-layer, batch_first, unbatched and bias-free runs are checked bit for bit against
 * compositions of single-layer runs. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tessera/quant.h"
#include "tessera/views.h"
#include "ts_test.h"

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static double rnd(double lo, double hi) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return lo + (hi - lo) * (double)(rng >> 11) / 9007199254740992.0;
}

enum { I = 5, H = 6, T = 7, B = 3, G = 4 * H };
#define U (1.0 / 16777216.0)

/* one layer-direction's parameters, as integers and scales (weights' zero point 0) */
typedef struct dirp {
    int8_t wih[G * 2 * H], whh[G * H]; /* wih [G, in], in <= 2H */
    double sih[G], shh[G];             /* scale per output row (all equal when per tensor) */
    float bih[G], bhh[G];
    ts_tensor *t[4]; /* w_ih, w_hh, b_ih, b_hh */
} dirp;

static ts_tensor *qweight(const int8_t *w, const double *s, int64_t rows, int64_t cols,
                          bool per_channel) {
    ts_tensor *r = ts_from_data(TS_SHAPE(rows, cols), TS_I8, w, (ts_opts){0});
    if (!per_channel) return ts_make_per_tensor_quantized_tensor(r, s[0], 0);
    int64_t zp[G] = {0};
    return ts_make_per_channel_quantized_tensor(r, ts_tensor_f64(TS_SHAPE(rows), s, (ts_opts){0}),
                                                ts_tensor_i64(TS_SHAPE(rows), zp, (ts_opts){0}), 0);
}

static void make_dir(dirp *p, int64_t in, bool per_channel) {
    const double s0 = rnd(0.002, 0.006);
    for (int n = 0; n < G; n++) {
        p->sih[n] = per_channel ? rnd(0.002, 0.006) : s0;
        p->shh[n] = per_channel ? rnd(0.002, 0.006) : s0 * 1.5;
        p->bih[n] = (float)rnd(-0.3, 0.3);
        p->bhh[n] = (float)rnd(-0.3, 0.3);
        for (int k = 0; k < in; k++) p->wih[n * in + k] = (int8_t)lround(rnd(-127, 127));
        for (int k = 0; k < H; k++) p->whh[n * H + k] = (int8_t)lround(rnd(-127, 127));
    }
    p->t[0] = qweight(p->wih, p->sih, G, in, per_channel);
    p->t[1] = qweight(p->whh, p->shh, G, H, per_channel);
    p->t[2] = ts_tensor_f32(TS_SHAPE(G), p->bih, (ts_opts){0});
    p->t[3] = ts_tensor_f32(TS_SHAPE(G), p->bhh, (ts_opts){0});
}

/* x float32 [rows, k] quantized as the layer does: integers minus the zero point into q */
static double quantize_ref(const float *x, int64_t rows, int64_t k, int32_t *q) {
    ts_scope_begin();
    ts_tensor *t = ts_tensor_f32(TS_SHAPE(rows, k), x, (ts_opts){0});
    double s = 0;
    int64_t zp = 0;
    CHECK(ts_choose_qparams_per_tensor(t, TS_QUINT8, true, &s, &zp) == TS_OK);
    uint8_t *u = malloc((size_t)(rows * k));
    ts_copy_to_host(ts_int_repr(ts_quantize_per_tensor(t, s, zp, TS_QUINT8)), u,
                    (size_t)(rows * k));
    for (int64_t i = 0; i < rows * k; i++) q[i] = (int32_t)u[i] - (int32_t)zp;
    free(u);
    ts_scope_end();
    return (double)(float)s; /* fbgemm's float scale */
}

/* Teacher-forced check of one direction: x [T, B, in] the layer's input, out [T, B, D*H] and
 * cn [B, H] the implementation's, h0 / c0 [B, H] */
static void check_direction(const float *x, int64_t in, const dirp *p, int dir, int D,
                            const float *h0, const float *c0, const float *out, const float *cn) {
    int32_t xq[T * B * 2 * H], hq[B * H];
    const double xs = quantize_ref(x, T * B, in, xq);
    double c[B * H], err[B * H];
    float hprev[B * H];
    for (int i = 0; i < B * H; i++) c[i] = c0[i], hprev[i] = h0[i], err[i] = 0;
    double worst = 0;
    for (int s = 0; s < T; s++) {
        const int t = dir ? T - 1 - s : s;
        const double hs = quantize_ref(hprev, B, H, hq);
        for (int b = 0; b < B; b++) {
            double g[G], mag[G];
            for (int n = 0; n < G; n++) {
                int64_t ax = 0, ah = 0;
                for (int k = 0; k < in; k++)
                    ax += (int64_t)xq[(t * B + b) * in + k] * p->wih[n * in + k];
                for (int k = 0; k < H; k++) ah += (int64_t)hq[b * H + k] * p->whh[n * H + k];
                const double gx = (double)ax * xs * p->sih[n] + p->bih[n];
                const double gh = (double)ah * hs * p->shh[n] + p->bhh[n];
                g[n] = gx + gh;
                mag[n] = fabs(gx) + fabs(gh);
            }
            for (int j = 0; j < H; j++) {
                const double ig = 1 / (1 + exp(-g[j])), fg = 1 / (1 + exp(-g[H + j]));
                const double cg = tanh(g[2 * H + j]), og = 1 / (1 + exp(-g[3 * H + j]));
                const int e = b * H + j;
                double m = 0;
                for (int q = 0; q < 4; q++) m = fmax(m, mag[q * H + j]);
                const double eps = 32 * U * (1 + fabs(c[e]) + m);
                c[e] = fg * c[e] + ig * cg;
                err[e] += eps;
                const double h = og * tanh(c[e]);
                const float got = out[(t * B + b) * D * H + dir * H + j];
                const double d = fabs(got - h);
                worst = fmax(worst, d / (err[e] + eps));
                if (d > err[e] + eps) CHECK_NEAR(got, h, err[e] + eps);
                hprev[e] = got; /* teacher forcing */
            }
        }
    }
    for (int e = 0; e < B * H; e++)
        if (fabs(cn[e] - c[e]) > err[e]) CHECK_NEAR(cn[e], c[e], err[e]);
    CHECK(worst <= 1);
}

static void host(ts_tensor *t, float *v, size_t n) { ts_copy_to_host(ts_contiguous(t), v, n * 4); }

/* one bidirectional layer, per tensor and per channel, against the reference */
static void test_reference(bool per_channel) {
    ts_scope_begin();
    dirp p[2];
    float x[T * B * I], h0[2 * B * H], c0[2 * B * H], out[T * B * 2 * H], cn[2 * B * H];
    for (int i = 0; i < T * B * I; i++) x[i] = (float)rnd(-2, 2);
    for (int i = 0; i < 2 * B * H; i++) h0[i] = (float)rnd(-0.5, 0.5), c0[i] = (float)rnd(-1, 1);
    make_dir(&p[0], I, per_channel);
    make_dir(&p[1], I, per_channel);
    ts_tensor *ps[8];
    for (int i = 0; i < 8; i++) ps[i] = p[i / 4].t[i % 4];
    ts_tensor *hn = NULL, *cnt = NULL;
    ts_tensor *y = ts_dynamic_quantized_lstm(
        ts_tensor_f32(TS_SHAPE(T, B, I), x, (ts_opts){0}),
        ts_tensor_f32(TS_SHAPE(2, B, H), h0, (ts_opts){0}),
        ts_tensor_f32(TS_SHAPE(2, B, H), c0, (ts_opts){0}), ps, 8,
        (ts_dqlstm_opts){
            .num_layers = 1, .bidirectional = true, .bias = true, .reduce_range = true},
        &hn, &cnt);
    CHECK_OK();
    if (y) {
        host(y, out, T * B * 2 * H);
        host(cnt, cn, 2 * B * H);
        float hnv[2 * B * H];
        host(hn, hnv, 2 * B * H);
        for (int d = 0; d < 2; d++)
            check_direction(x, I, &p[d], d, 2, h0 + d * B * H, c0 + d * B * H, out, cn + d * B * H);
        /* h_n: the forward direction's last step, the reverse one's first */
        for (int b = 0; b < B; b++)
            for (int j = 0; j < H; j++) {
                CHECK(hnv[b * H + j] == out[((T - 1) * B + b) * 2 * H + j]);
                CHECK(hnv[B * H + b * H + j] == out[b * 2 * H + H + j]);
            }
    }
    ts_scope_end();
}

static bool same(ts_tensor *a, ts_tensor *b) {
    ts_scope_begin();
    bool r = a && b && ts_numel(a) == ts_numel(b);
    if (r) {
        size_t n = (size_t)ts_numel(a);
        float *u = malloc(n * 4 + 4), *v = malloc(n * 4 + 4);
        host(a, u, n);
        host(b, v, n);
        r = memcmp(u, v, n * 4) == 0;
        free(u);
        free(v);
    }
    ts_scope_end();
    return r;
}

/* two bidirectional layers = layer 0 then layer 1 on its output (states sliced per layer);
 * batch_first = the transposed run; unbatched = B 1; bias=false = zero biases */
static void test_composition(void) {
    ts_scope_begin();
    dirp p[4];
    make_dir(&p[0], I, false);
    make_dir(&p[1], I, true);
    make_dir(&p[2], 2 * H, true);
    make_dir(&p[3], 2 * H, false);
    ts_tensor *ps[16];
    for (int i = 0; i < 16; i++) ps[i] = p[i / 4].t[i % 4];
    float xv[T * B * I], hv[4 * B * H], cv[4 * B * H];
    for (int i = 0; i < T * B * I; i++) xv[i] = (float)rnd(-2, 2);
    for (int i = 0; i < 4 * B * H; i++) hv[i] = (float)rnd(-0.5, 0.5), cv[i] = (float)rnd(-1, 1);
    ts_tensor *x = ts_tensor_f32(TS_SHAPE(T, B, I), xv, (ts_opts){0});
    ts_tensor *h0 = ts_tensor_f32(TS_SHAPE(4, B, H), hv, (ts_opts){0});
    ts_tensor *c0 = ts_tensor_f32(TS_SHAPE(4, B, H), cv, (ts_opts){0});
    ts_dqlstm_opts o = {.num_layers = 2, .bidirectional = true, .bias = true, .reduce_range = true};
    ts_tensor *hn, *cn, *hn0, *cn0, *hn1, *cn1;
    ts_tensor *y = ts_dynamic_quantized_lstm(x, h0, c0, ps, 16, o, &hn, &cn);
    CHECK_OK();
    o.num_layers = 1;
    ts_tensor *y0 = ts_dynamic_quantized_lstm(x, ts_narrow(h0, 0, 0, 2), ts_narrow(c0, 0, 0, 2), ps,
                                              8, o, &hn0, &cn0);
    ts_tensor *y1 = ts_dynamic_quantized_lstm(y0, ts_narrow(h0, 0, 2, 2), ts_narrow(c0, 0, 2, 2),
                                              ps + 8, 8, o, &hn1, &cn1);
    CHECK_OK();
    CHECK(same(y, y1));
    CHECK(same(ts_narrow(hn, 0, 0, 2), hn0) && same(ts_narrow(hn, 0, 2, 2), hn1));
    CHECK(same(ts_narrow(cn, 0, 0, 2), cn0) && same(ts_narrow(cn, 0, 2, 2), cn1));

    o.num_layers = 2;
    o.batch_first = true;
    ts_tensor *yb = ts_dynamic_quantized_lstm(ts_transpose(x, 0, 1), h0, c0, ps, 16, o, &hn1, &cn1);
    CHECK_OK();
    CHECK(same(ts_transpose(yb, 0, 1), y) && same(hn1, hn) && same(cn1, cn));

    /* unbatched: sequence 1 alone */
    o.batch_first = false;
    ts_tensor *yu = ts_dynamic_quantized_lstm(ts_select(x, 1, 1), ts_select(h0, 1, 1),
                                              ts_select(c0, 1, 1), ps, 16, o, &hn1, &cn1);
    ts_tensor *y2 = ts_dynamic_quantized_lstm(ts_narrow(x, 1, 1, 1), ts_narrow(h0, 1, 1, 1),
                                              ts_narrow(c0, 1, 1, 1), ps, 16, o, &hn0, &cn0);
    CHECK_OK();
    CHECK(ts_shape_of(yu).ndim == 2 && ts_shape_of(hn1).ndim == 2);
    CHECK(same(yu, y2) && same(hn1, hn0) && same(cn1, cn0));

    /* bias=false equals zero biases */
    ts_tensor *nb[8], *zb[16];
    ts_tensor *z = ts_zeros(TS_SHAPE(G), (ts_opts){0});
    for (int i = 0; i < 4; i++) {
        nb[2 * i] = ps[4 * i], nb[2 * i + 1] = ps[4 * i + 1];
        zb[4 * i] = ps[4 * i], zb[4 * i + 1] = ps[4 * i + 1], zb[4 * i + 2] = zb[4 * i + 3] = z;
    }
    CHECK(same(ts_dynamic_quantized_lstm(x, NULL, NULL, zb, 16, o, NULL, NULL),
               ts_dynamic_quantized_lstm(
                   x, NULL, NULL, nb, 8,
                   (ts_dqlstm_opts){.num_layers = 2, .bidirectional = true, .reduce_range = true},
                   NULL, NULL)));
    CHECK_OK();

    /* errors name the op and the argument */
    CHECK(!ts_dynamic_quantized_lstm(x, NULL, NULL, ps, 15, o, NULL, NULL));
    CHECK_ERR_HAS(TS_ERR_ARG, "15 params given");
    ts_tensor *bad[16];
    memcpy(bad, ps, sizeof bad);
    bad[8] = ts_zeros(TS_SHAPE(G, 2 * H), (ts_opts){0});
    CHECK(!ts_dynamic_quantized_lstm(x, NULL, NULL, bad, 16, o, NULL, NULL));
    CHECK_ERR_HAS(TS_ERR_DTYPE, "w_ih of layer 1 must be qint8");
    bad[8] = ps[0]; /* [G, I]: the wrong width for layer 1 */
    CHECK(!ts_dynamic_quantized_lstm(x, NULL, NULL, bad, 16, o, NULL, NULL));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "w_ih of layer 1 has shape");
    CHECK(!ts_dynamic_quantized_lstm(x, ts_zeros(TS_SHAPE(2, B, H), (ts_opts){0}), NULL, ps, 16, o,
                                     NULL, NULL));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "h0 must be float32 [4, 3, 6]");
    ts_scope_end();
}

int main(void) {
    test_reference(false);
    test_reference(true);
    test_composition();
    return ts_test_finish();
}
