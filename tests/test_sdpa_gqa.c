/* test_sdpa_gqa.c — ts_scaled_dot_product_attention_ex's enable_gqa (src/nn/attention.c): key and
 * value with fewer heads than the query, against a float64 loop in which query head h reads key
 * head h / (hq / hk) (plain and causal, on every device), ts_gradcheck in q, k and v, the plain
 * path when the heads agree or enable_gqa is off, and the refusal of heads that do not divide. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "host_read_util.h"
#include "tessera.h"
#include "ts_test.h"

enum { B = 2, HQ = 4, L = 3, S = 5, E = 4 };
static ts_device devs[TS_TEST_MAX_DEVICES];
static int ndev;

static void fill(double *v, int64_t n, int seed) {
    for (int64_t i = 0; i < n; i++) v[i] = sin(1.3 * (double)(i + 1) + 0.7 * seed);
}
static ts_tensor *mk(ts_shape s, const double *v, ts_device d, bool rg) {
    ts_tensor *t = ts_detach(ts_to(ts_tensor_f64(s, v, (ts_opts){.dtype = TS_F64}), d));
    if (rg) ts_set_requires_grad(t, true);
    return t;
}

/* out [B, HQ, L, E]: q [B, HQ, L, E], k [B, hk, S, E], v [B, hv, S, E] */
static void ref_attn(const double *q, const double *k, const double *v, int hk, int hv, bool causal,
                     double *out) {
    const double scale = 1 / sqrt((double)E);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < HQ; h++)
            for (int i = 0; i < L; i++) {
                const double *qi = q + ((b * HQ + h) * L + i) * E;
                const int kh = h / (HQ / hk), vh = h / (HQ / hv);
                double sc[S], mx = -INFINITY, sum = 0;
                for (int j = 0; j < S; j++) {
                    const double *kj = k + ((b * hk + kh) * S + j) * E;
                    double d = 0;
                    for (int e = 0; e < E; e++) d += qi[e] * kj[e];
                    sc[j] = causal && j > i ? -INFINITY : d * scale;
                    mx = fmax(mx, sc[j]);
                }
                for (int j = 0; j < S; j++) sum += sc[j] = exp(sc[j] - mx);
                for (int e = 0; e < E; e++) {
                    double acc = 0;
                    for (int j = 0; j < S; j++)
                        acc += sc[j] / sum * v[((b * hv + vh) * S + j) * E + e];
                    out[((b * HQ + h) * L + i) * E + e] = acc;
                }
            }
}

static void test_values(void) {
    double q[B * HQ * L * E], k[B * HQ * S * E], v[B * HQ * S * E], ref[B * HQ * L * E];
    fill(q, B * HQ * L * E, 1), fill(k, B * HQ * S * E, 2), fill(v, B * HQ * S * E, 3);
    const int heads[3][2] = {{1, 1}, {2, 4}, {4, 2}}; /* (hk, hv) */
    for (int di = 0; di < ndev; di++)
        for (int c = 0; c < 3; c++)
            for (int causal = 0; causal < 2; causal++) {
                ts_scope_begin();
                const int hk = heads[c][0], hv = heads[c][1];
                ts_tensor *y = ts_scaled_dot_product_attention_ex(
                    mk(TS_SHAPE(B, HQ, L, E), q, devs[di], false),
                    mk(TS_SHAPE(B, hk, S, E), k, devs[di], false),
                    mk(TS_SHAPE(B, hv, S, E), v, devs[di], false), NULL, 0, causal, 0, true);
                ref_attn(q, k, v, hk, hv, causal, ref);
                /* sums of S products and a softmax: 1e-14 of values of order 1 */
                bool ok = y && near_all(y, ref, B * HQ * L * E, 1e-14);
                ts_test_record(ok);
                if (!ok)
                    ts_test_failf(__FILE__, __LINE__, "gqa hk %d hv %d causal %d on %s%s", hk, hv,
                                  causal, ts_device_str(devs[di]), ts_test_error_str());
                ts_error_clear();
                ts_scope_end();
            }
    /* equal heads: the plain op; enable_gqa off: fewer heads are a shape error as before */
    ts_scope_begin();
    ref_attn(q, k, v, HQ, HQ, false, ref);
    ts_tensor *qt = mk(TS_SHAPE(B, HQ, L, E), q, ts_cpu(), false);
    ts_tensor *kt = mk(TS_SHAPE(B, HQ, S, E), k, ts_cpu(), false);
    ts_tensor *vt = mk(TS_SHAPE(B, HQ, S, E), v, ts_cpu(), false);
    CHECK(near_all(ts_scaled_dot_product_attention_ex(qt, kt, vt, NULL, 0, false, 0, true), ref,
                   B * HQ * L * E, 1e-14));
    ts_tensor *k2 = mk(TS_SHAPE(B, 2, S, E), k, ts_cpu(), false);
    CHECK(ts_scaled_dot_product_attention_ex(qt, k2, vt, NULL, 0, false, 0, false) == NULL);
    CHECK(ts_error() != TS_OK);
    ts_error_clear();
    ts_tensor *k3 = mk(TS_SHAPE(B, 3, S, E), k, ts_cpu(), false);
    CHECK(ts_scaled_dot_product_attention_ex(qt, k3, vt, NULL, 0, false, 0, true) == NULL);
    CHECK_ERR_HAS(TS_ERR_SHAPE, "must be a multiple");
    ts_scope_end();
}

static ts_tensor *g_fn(ts_tensor *const *in, int n, void *ctx) {
    (void)n;
    return ts_scaled_dot_product_attention_ex(in[0], in[1], in[2], NULL, 0, ctx != NULL, 0, true);
}

static void test_grads(void) {
    double q[64], k[64], v[64];
    fill(q, 64, 4), fill(k, 64, 5), fill(v, 64, 6);
    const ts_gradcheck_opts go = {.eps = 1e-6, .atol = 1e-6, .rtol = 1e-5};
    for (int di = 0; di < ndev; di++)
        for (int causal = 0; causal < 2; causal++) {
            ts_scope_begin();
            ts_tensor *in[3] = {mk(TS_SHAPE(1, 4, 2, 3), q, devs[di], true),
                                mk(TS_SHAPE(1, 2, 3, 3), k, devs[di], true),
                                mk(TS_SHAPE(1, 1, 3, 2), v, devs[di], true)};
            bool ok = ts_gradcheck(g_fn, causal ? (void *)1 : NULL, in, 3, go);
            ts_scope_end();
            ts_test_record(ok);
            if (!ok)
                ts_test_failf(__FILE__, __LINE__, "gradcheck gqa causal %d on %s%s", causal,
                              ts_device_str(devs[di]), ts_test_error_str());
            ts_error_clear();
        }
}

int main(void) {
    ndev = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    test_values();
    test_grads();
    CHECK_OK();
    return ts_test_finish();
}
