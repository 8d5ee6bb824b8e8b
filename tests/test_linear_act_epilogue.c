/* test_linear_act_epilogue.c — Linear with a bias followed by relu or gelu_tanh through the
 * backend's matmul_bias_act slot (decision 0032: cuBLASLt's RELU_BIAS / GELU_BIAS epilogues on
 * CUDA; the cpu kernels in the composition's order on sim; none on the cpu, which composes), on
 * cpu, sim:0 and cuda:0 when present. The output and the gradients of x, w and b under a random
 * upstream gradient r, for float32, float64, bfloat16 and float16, against a float64 reference
 * computed here from the values the device holds, for one row, odd sizes, several blocks, an
 * empty contraction (K = 0: the composition), an input that is a transposed view and a 3-D input.
 * Also: sim's results (the slot) are the cpu's bits (the composition) for the output and all three
 * gradients, also under create_graph (second-order gradients); the slot is called exactly when it
 * should be (a bias, relu or gelu_tanh, K > 0) and never for the erf GELU, directly or through a
 * TransformerEncoderLayer or a Sequential, whose outputs and gradients on sim equal the cpu's.
 *
 * Bounds, with u_c the unit roundoff of the accumulation (float64: 2^-53; the others float32,
 * 2^-24), u_t that of the dtype for a half result's rounding (0 for float32 and float64) and u_d
 * that of the dtype the activation's ops round to (every dtype: each op's result is stored):
 *   z = x w^T + b, a sum of K + 1 terms with magnitude sum S: tz = (K + 2) u_c S + u_t (S + |z|)
 *     (test_linear_epilogue.c's bound);
 *   relu: |y - relu(z)| <= tz (1-Lipschitz, and rounding a max is exact);
 *   gelu_tanh: y = (z / 2) (1 + tanh(inner)), inner = k z (1 + 0.044715 z^2), 9 roundings: inner
 *     within 5 u_d |inner|, which tanh (slope sech^2 <= 1, |inner| sech^2(inner) < 0.45) turns into
 *     2.25 u_d; tanh's and the two sums' and the product's own roundings add at most 4 u_d |z|:
 *     |y - gelu(z)| <= 1.13 tz + 8 u_d |z| (1.13 bounds gelu_tanh's slope), on cuda:0 plus
 *     |z| / 2 2^-10.987 (TANH_APPROX below);
 *   dz = r act'(z): relu's mask is read from the device's y (y > 0 exactly where the device's
 *     z > 0), so dz is r or 0 exactly; gelu_tanh's derivative, 0.5 (1 + t) + 0.5 z sech^2 k (1 +
 *     3 0.044715 z^2), is a dozen rounded ops on terms of magnitude sum A: |dz - r act'(z)| <= |r|
 *     (0.85 tz + 16 u_d A) (0.85 bounds |gelu''|), plus u_d |dz| for dz's own rounding;
 *   dx = dz w, dw = dz^T x, db = sum dz: the products' bounds above (n + 2) u_c S + u_t (S + |s|)
 *     with dz's bound carried through (sum of tol_dz |w| / |x| / 1). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "epilogue_test_util.h"
#include "nn/layers_internal.h"
#include "ts_test.h"

/* ------------------------------------------------------------------ the slot's calls */
#define N_TYPES 8
typedef bool (*act_fn)(const ts_backend *, int, ts_epi_act, const ts_kview *, const ts_kview *,
                       const ts_kview *, const ts_kview *, const ts_epi_aux *);
static act_fn real_act[N_TYPES];
static int act_calls, act_taken[N_TYPES], act_asked[N_TYPES], gelu_calls;

static bool counting_act(const ts_backend *be, int index, ts_epi_act act, const ts_kview *out,
                         const ts_kview *a, const ts_kview *b, const ts_kview *bias,
                         const ts_epi_aux *aux) {
    act_calls++;
    act_asked[be->type]++;
    gelu_calls += act == TS_EPI_GELU_TANH;
    const bool took = real_act[be->type](be, index, act, out, a, b, bias, aux);
    act_taken[be->type] += took;
    return took;
}

static void install_counter(ts_device_type t) {
    ts_backend *be = (ts_backend *)tsi_backend_for(t);
    if (!be || !be->matmul_bias_act || (int)t >= N_TYPES || real_act[t]) return;
    real_act[t] = be->matmul_bias_act, be->matmul_bias_act = counting_act;
}

/* ------------------------------------------------------------------ host values */
static const double K_GELU = 0.79788456080286535588; /* sqrt(2 / pi) */
/* cuBLASLt's GELU epilogue may evaluate tanh with PTX's tanh.approx.f32, whose relative error is at
 * most 2^-10.987: y = (z / 2)(1 + tanh) then moves by up to |z| / 2 times that (cuda:0 only) */
static const double TANH_APPROX = 5.0e-4;

/* ------------------------------------------------------------------ one case */
typedef struct act_case {
    int64_t rows, in, out;
    bool transposed_x; /* x is ts_t of an [in, rows] tensor */
    bool three_d;      /* x is [2, rows / 2, in] */
} act_case;

typedef struct act_result {
    double *v[4]; /* y, gx, gw, gb */
} act_result;

static void free_result(act_result *r) {
    for (int i = 0; i < 4; i++) free(r->v[i]), r->v[i] = NULL;
}

static const char *act_name(ts_activation a) { return a == TS_ACT_RELU ? "relu" : "gelu_tanh"; }

/* The reference of y, dx, dw, db from the device's x, w, b, r and y (row-major, x [M, K]) */
static void check_reference(const act_case *c, ts_dtype dt, ts_activation act, bool lt,
                            const double *hx, const double *hw, const double *hb, const double *hr,
                            const act_result *res) {
    const int64_t M = c->rows, K = c->in, N = c->out;
    const double uc = dt == TS_F64 ? ldexp(1, -53) : ldexp(1, -24);
    const double ut = dt == TS_F16 || dt == TS_BF16 ? unit_roundoff(dt) : 0.0;
    const double ud = unit_roundoff(dt);
    const int64_t big =
        (M * N > M * K ? M * N : M * K) > N * K ? (M * N > M * K ? M * N : M * K) : N * K;
    double *want = malloc((size_t)(big + 1) * sizeof *want);
    double *tol = malloc((size_t)(big + 1) * sizeof *tol);
    double *dz = malloc((size_t)(M * N + 1) * sizeof *dz);
    double *tdz = malloc((size_t)(M * N + 1) * sizeof *tdz);
    CHECK(want && tol && dz && tdz);
    if (!want || !tol || !dz || !tdz) goto done;
    char what[64];
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            double z = hb[j], a = fabs(hb[j]);
            for (int64_t k = 0; k < K; k++)
                z += hx[i * K + k] * hw[j * K + k], a += fabs(hx[i * K + k] * hw[j * K + k]);
            const double tz = (double)(K + 2) * uc * a + ut * (a + fabs(z));
            const double r = hr[i * N + j], yd = res->v[0][i * N + j];
            if (act == TS_ACT_RELU) {
                want[i * N + j] = z > 0 ? z : 0;
                tol[i * N + j] = tz;
                dz[i * N + j] = yd > 0 ? r : 0, tdz[i * N + j] = 0;
            } else {
                const double inner = K_GELU * z * (1 + 0.044715 * z * z), t = tanh(inner);
                const double s2 = 1 - t * t;
                want[i * N + j] = 0.5 * z * (1 + t);
                tol[i * N + j] =
                    1.13 * tz + 8 * ud * fabs(z) + (lt ? 0.5 * fabs(z) * TANH_APPROX : 0);
                const double d1 = 0.5 * (1 + t),
                             d2 = 0.5 * z * s2 * K_GELU * (1 + 3 * 0.044715 * z * z);
                const double A = fabs(d1) + fabs(d2);
                dz[i * N + j] = r * (d1 + d2);
                tdz[i * N + j] = fabs(r) * (0.85 * tz + 16 * ud * A) + ud * fabs(r) * A;
            }
        }
    snprintf(what, sizeof what, "y %s %s", act_name(act), ts_dtype_name(dt));
    CHECK(within(what, res->v[0], want, tol, M * N));
    for (int64_t i = 0; i < M; i++) /* dx = dz w */
        for (int64_t k = 0; k < K; k++) {
            double s = 0, a = 0, e = 0;
            for (int64_t j = 0; j < N; j++) {
                s += dz[i * N + j] * hw[j * K + k];
                a += (fabs(dz[i * N + j]) + tdz[i * N + j]) * fabs(hw[j * K + k]);
                e += tdz[i * N + j] * fabs(hw[j * K + k]);
            }
            want[i * K + k] = s;
            tol[i * K + k] = e + (double)(N + 2) * uc * a + ut * (a + fabs(s));
        }
    snprintf(what, sizeof what, "gx %s %s", act_name(act), ts_dtype_name(dt));
    CHECK(within(what, res->v[1], want, tol, M * K));
    for (int64_t j = 0; j < N; j++) /* dw = dz^T x */
        for (int64_t k = 0; k < K; k++) {
            double s = 0, a = 0, e = 0;
            for (int64_t i = 0; i < M; i++) {
                s += dz[i * N + j] * hx[i * K + k];
                a += (fabs(dz[i * N + j]) + tdz[i * N + j]) * fabs(hx[i * K + k]);
                e += tdz[i * N + j] * fabs(hx[i * K + k]);
            }
            want[j * K + k] = s;
            tol[j * K + k] = e + (double)(M + 2) * uc * a + ut * (a + fabs(s));
        }
    snprintf(what, sizeof what, "gw %s %s", act_name(act), ts_dtype_name(dt));
    CHECK(within(what, res->v[2], want, tol, N * K));
    for (int64_t j = 0; j < N; j++) { /* db = the column sums of dz */
        double s = 0, a = 0, e = 0;
        for (int64_t i = 0; i < M; i++)
            s += dz[i * N + j], a += fabs(dz[i * N + j]) + tdz[i * N + j], e += tdz[i * N + j];
        want[j] = s;
        tol[j] = e + (double)(M + 2) * uc * a + ut * (a + fabs(s));
    }
    snprintf(what, sizeof what, "gb %s %s", act_name(act), ts_dtype_name(dt));
    CHECK(within(what, res->v[3], want, tol, N));
done:
    free(want), free(tol), free(dz), free(tdz);
}

/* Runs one case on dev and checks it against the reference; fills res for the sim / cpu check. */
static void run_case(const act_case *c, ts_dtype dt, ts_activation act, ts_device dev,
                     uint64_t seed, act_result *res) {
    const int64_t M = c->rows, K = c->in, N = c->out;
    rng = seed;
    ts_scope_begin();
    ts_tensor *xl = c->transposed_x ? make(TS_SHAPE(K, M), dt, dev) : make(TS_SHAPE(M, K), dt, dev);
    ts_tensor *w = make(TS_SHAPE(N, K), dt, dev), *b = make(TS_SHAPE(N), dt, dev);
    ts_tensor *r = make(TS_SHAPE(M, N), dt, dev);
    CHECK(xl && w && b && r);
    if (!xl || !w || !b || !r) {
        ts_scope_end();
        return;
    }
    ts_set_requires_grad(xl, true), ts_set_requires_grad(w, true), ts_set_requires_grad(b, true);
    ts_tensor *x = c->transposed_x ? ts_t(xl) : xl;
    if (c->three_d) x = ts_reshape(x, TS_SHAPE(2, M / 2, K));
    const int calls0 = act_calls;
    ts_tensor *y = tsi_linear_act(x, w, b, act);
    CHECK(y != NULL);
    if (!y) {
        ts_scope_end();
        return;
    }
    /* the slot: where the device has one and K > 0 */
    const bool slot = tsi_backend_for(dev.type)->matmul_bias_act && K > 0;
    CHECK_EQ(act_calls - calls0, slot ? 1 : 0);
    if (slot && !c->three_d) CHECK_STREQ(ts_grad_fn_name(y), "LinearActBackward");
    ts_tensor *y2 = ts_reshape(y, TS_SHAPE(M, N));
    ts_tensor *ins[3] = {xl, w, b}, *grads[3] = {NULL, NULL, NULL};
    CHECK_EQ(ts_autograd_grad(&y2, &r, 1, ins, 3, (ts_grad_opts){0}, grads), TS_OK);
    ts_tensor *gx = c->transposed_x ? ts_t(grads[0]) : grads[0];
    double *hx = host(c->transposed_x ? ts_t(xl) : xl), *hw = host(w), *hb = host(b), *hr = host(r);
    res->v[0] = host(y2), res->v[1] = host(gx), res->v[2] = host(grads[1]);
    res->v[3] = host(grads[2]);
    const bool have = hx && hw && hb && hr && res->v[0] && res->v[1] && res->v[2] && res->v[3];
    CHECK(have);
    if (have) check_reference(c, dt, act, dev.type == TS_CUDA, hx, hw, hb, hr, res);
    free(hx), free(hw), free(hb), free(hr);
    CHECK_OK();
    ts_scope_end();
}

static const act_case CASES[] = {
    /* rows, in, out, transposed x, 3-D */
    {1, 5, 3, false, false},    /* one row */
    {7, 13, 11, false, false},  /* odd sizes */
    {33, 65, 17, false, false}, /* odd, several blocks */
    {4, 0, 6, false, false},    /* K = 0: the bias alone, composed */
    {9, 12, 5, true, false},    /* x a transposed view */
    {6, 10, 9, false, true},    /* x [2, 3, 10] */
};
#define N_CASES (sizeof CASES / sizeof CASES[0])

static void test_devices(void) {
    ts_device devs[TS_TEST_MAX_DEVICES];
    const int nd = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    const ts_dtype dts[] = {TS_F32, TS_F64, TS_BF16, TS_F16};
    const ts_activation acts[] = {TS_ACT_RELU, TS_ACT_GELU_TANH};
    for (size_t a = 0; a < 2; a++)
        for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++)
            for (size_t c = 0; c < N_CASES; c++) {
                const act_case *lc = &CASES[c];
                act_result cpu_res = {{NULL}};
                for (int i = 0; i < nd; i++) {
                    act_result res = {{NULL}};
                    const int fails = ts_test_failed_count();
                    run_case(lc, dts[d], acts[a], devs[i], 2000 + 31 * c + 7 * d + a, &res);
                    if (devs[i].type == TS_SIM) { /* the composition's bits */
                        const int64_t M = lc->rows, K = lc->in, N = lc->out;
                        const int64_t n[4] = {M * N, M * K, N * K, N};
                        for (int k = 0; k < 4; k++) CHECK(same(res.v[k], cpu_res.v[k], n[k]));
                    }
                    if (ts_test_failed_count() != fails)
                        printf("  case %zu (%lld x %lld x %lld) %s %s on %s\n", c,
                               (long long)lc->rows, (long long)lc->in, (long long)lc->out,
                               act_name(acts[a]), ts_dtype_name(dts[d]), ts_device_str(devs[i]));
                    if (devs[i].type == TS_CPU)
                        cpu_res = res;
                    else
                        free_result(&res);
                }
                free_result(&cpu_res);
            }
}

/* The erf GELU never takes the slot (cuBLASLt's GELU is the tanh form); no bias neither. */
static void test_never_taken(void) {
    ts_device devs[TS_TEST_MAX_DEVICES];
    const int nd = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    for (int i = 0; i < nd; i++) {
        ts_scope_begin();
        rng = 99;
        ts_tensor *x = make(TS_SHAPE(4, 6), TS_F32, devs[i]),
                  *w = make(TS_SHAPE(5, 6), TS_F32, devs[i]);
        ts_tensor *b = make(TS_SHAPE(5), TS_F32, devs[i]);
        const int calls0 = act_calls;
        ts_tensor *y = tsi_linear_act(x, w, b, TS_ACT_GELU);
        ts_tensor *y0 = tsi_linear_act(x, w, NULL, TS_ACT_RELU);
        CHECK(y && y0);
        CHECK_EQ(act_calls - calls0, 0);
        double *hy = host(y), *hc = host(ts_gelu(ts_linear(x, w, b)));
        CHECK(same(hy, hc, 20)); /* the erf GELU's own composition */
        free(hy), free(hc);
        CHECK_OK();
        ts_scope_end();
    }
}

/* Second-order gradients through the node (create_graph), x 2-D or a view of it as [1, 5, 7] (a
 * node between x and the fused one): the gradient's graph reaches x, w and b. d/d(x, w, b) of
 * sum(gx^2), gx = d sum(y r) / dx. relu: sim's are the cpu's bits (the composition's ops).
 * gelu_tanh: the node writes its derivative out where the composition differentiates nine ops:
 * float64 sums of at most M N K = 210 products of factors bounded by 8 (|z| <= K + 1) and 1.2
 * (gelu_tanh's first three derivatives), some 60 roundings on either side: within 60 * 2^-53 * 210
 * * 8^2 * 1.2^3 < 2e-10 of each other. */
static void test_create_graph(void) {
    ts_device devs[TS_TEST_MAX_DEVICES];
    const int nd = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    const ts_activation acts[] = {TS_ACT_RELU, TS_ACT_GELU_TANH};
    for (int a = 0; a < 4; a++) {
        const ts_activation act = acts[a % 2];
        const bool three_d = a >= 2;
        double *ref[3] = {NULL, NULL, NULL};
        for (int i = 0; i < nd; i++) {
            ts_scope_begin();
            rng = 123;
            ts_tensor *x = make(TS_SHAPE(5, 7), TS_F64, devs[i]);
            ts_tensor *w = make(TS_SHAPE(6, 7), TS_F64, devs[i]),
                      *b = make(TS_SHAPE(6), TS_F64, devs[i]);
            ts_tensor *r = make(TS_SHAPE(5, 6), TS_F64, devs[i]);
            ts_set_requires_grad(x, true), ts_set_requires_grad(w, true),
                ts_set_requires_grad(b, true);
            ts_tensor *y = three_d ? tsi_linear_act(ts_reshape(x, TS_SHAPE(1, 5, 7)), w, b, act)
                                   : tsi_linear_act(x, w, b, act);
            if (three_d) r = ts_reshape(r, TS_SHAPE(1, 5, 6));
            ts_tensor *gx = NULL;
            CHECK_EQ(ts_autograd_grad(&y, &r, 1, &x, 1, (ts_grad_opts){.create_graph = true}, &gx),
                     TS_OK);
            ts_tensor *l = gx ? ts_sum(ts_square(gx)) : NULL, *ins[3] = {x, w, b};
            ts_tensor *g2[3] = {NULL, NULL, NULL};
            CHECK_EQ(
                ts_autograd_grad(&l, NULL, 1, ins, 3, (ts_grad_opts){.allow_unused = true}, g2),
                TS_OK);
            double *h[3] = {g2[0] ? host(g2[0]) : NULL, g2[1] ? host(g2[1]) : NULL,
                            g2[2] ? host(g2[2]) : NULL};
            CHECK(h[0] && h[1] && h[2]); /* relu's too: zeros through y, as PyTorch's */
            const int64_t n[3] = {35, 42, 6};
            for (int k = 0; devs[i].type == TS_SIM && k < 3; k++) {
                bool ok = h[k] && ref[k];
                for (int64_t q = 0; ok && q < n[k]; q++)
                    ok = act == TS_ACT_RELU ? h[k][q] == ref[k][q]
                                            : fabs(h[k][q] - ref[k][q]) <= 2e-10;
                CHECK(ok);
                if (!ok) printf("  %s: second-order gradient %d\n", act_name(act), k);
            }
            if (devs[i].type == TS_CPU)
                for (int k = 0; k < 3; k++) ref[k] = h[k];
            else
                for (int k = 0; k < 3; k++) free(h[k]);
            CHECK_OK();
            ts_scope_end();
        }
        for (int k = 0; k < 3; k++) free(ref[k]);
    }
}

/* The transformer MLP (linear1 + activation) takes the slot for relu and gelu_tanh, never for the
 * erf GELU; sim's output and gradients are the cpu's bits. */
static void test_transformer(void) {
    ts_device devs[TS_TEST_MAX_DEVICES];
    const int nd = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    const ts_activation acts[] = {TS_ACT_RELU, TS_ACT_GELU, TS_ACT_GELU_TANH};
    for (int a = 0; a < 3; a++) {
        double *ref[2] = {NULL, NULL};
        for (int i = 0; i < nd; i++) {
            ts_scope_begin();
            ts_transformer_opts o = {
                .dim_feedforward = 24, .has_dropout = true, .dropout = 0, .activation = acts[a]};
            ts_manual_seed(7);
            ts_module *layer = ts_transformer_encoder_layer_new(8, 2, o);
            CHECK(layer != NULL);
            if (!layer) {
                ts_scope_end();
                continue;
            }
            layer = ts_module_to(layer, devs[i]);
            rng = 5;
            ts_tensor *src = make(TS_SHAPE(3 * 2, 8), TS_F32, devs[i]);
            src = ts_reshape(src, TS_SHAPE(3, 2, 8));
            ts_set_requires_grad(src, true);
            const int calls0 = act_calls, gelu0 = gelu_calls;
            ts_tensor *y = ts_forward(layer, src);
            const bool slot = tsi_backend_for(devs[i].type)->matmul_bias_act != NULL;
            CHECK_EQ(act_calls - calls0, slot && acts[a] != TS_ACT_GELU ? 1 : 0);
            CHECK_EQ(gelu_calls - gelu0, slot && acts[a] == TS_ACT_GELU_TANH ? 1 : 0);
            ts_tensor *gs = NULL, *l = y ? ts_sum(ts_square(y)) : NULL;
            CHECK_EQ(ts_autograd_grad(&l, NULL, 1, &src, 1, (ts_grad_opts){0}, &gs), TS_OK);
            double *h[2] = {host(y), host(gs)};
            CHECK(h[0] && h[1]);
            if (devs[i].type == TS_SIM)
                for (int k = 0; k < 2; k++) CHECK(same(h[k], ref[k], 48));
            if (devs[i].type == TS_CPU)
                ref[0] = h[0], ref[1] = h[1];
            else
                free(h[0]), free(h[1]);
            ts_module_free(layer);
            CHECK_OK();
            ts_scope_end();
        }
        free(ref[0]), free(ref[1]);
    }
}

/* Sequential(Linear, ReLU / GELU tanh) runs the pair through the slot, Sequential(Linear, GELU)
 * (erf) never; sim's outputs and input gradients are the cpu's bits. */
static void test_sequential(void) {
    ts_device devs[TS_TEST_MAX_DEVICES];
    const int nd = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    for (int a = 0; a < 3; a++) {
        double *ref[2] = {NULL, NULL};
        for (int i = 0; i < nd; i++) {
            ts_scope_begin();
            ts_manual_seed(11);
            ts_module *lin = ts_linear_new_ex(6, 10, (ts_linear_opts){.device = devs[i]});
            ts_module *act = a == 0   ? ts_relu_new()
                             : a == 1 ? ts_gelu_new_ex(TS_GELU_TANH)
                                      : ts_gelu_new();
            ts_module *seq = ts_sequential_new(2, (ts_module *const[]){lin, act});
            CHECK(seq != NULL);
            rng = 17;
            ts_tensor *x = make(TS_SHAPE(4, 6), TS_F32, devs[i]), *gx = NULL;
            ts_set_requires_grad(x, true);
            const int calls0 = act_calls;
            ts_tensor *y = seq ? ts_forward(seq, x) : NULL;
            const bool slot = tsi_backend_for(devs[i].type)->matmul_bias_act != NULL;
            CHECK_EQ(act_calls - calls0, slot && a < 2 ? 1 : 0);
            ts_tensor *l = y ? ts_sum(ts_square(y)) : NULL;
            CHECK_EQ(ts_autograd_grad(&l, NULL, 1, &x, 1, (ts_grad_opts){0}, &gx), TS_OK);
            double *h[2] = {host(y), host(gx)};
            CHECK(h[0] && h[1]);
            const int64_t n[2] = {40, 24};
            if (devs[i].type == TS_SIM)
                for (int k = 0; k < 2; k++) CHECK(same(h[k], ref[k], n[k]));
            if (devs[i].type == TS_CPU)
                ref[0] = h[0], ref[1] = h[1];
            else
                free(h[0]), free(h[1]);
            ts_module_free(seq);
            CHECK_OK();
            ts_scope_end();
        }
        free(ref[0]), free(ref[1]);
    }
}

int main(void) {
    ts_device devs[TS_TEST_MAX_DEVICES];
    const int nd = ts_test_devices(devs, TS_TEST_MAX_DEVICES); /* configures sim:0 */
    install_counter(TS_SIM);
    install_counter(TS_CUDA);
    const ts_backend *sim = tsi_backend_for(TS_SIM);
    CHECK(sim && sim->matmul_bias_act); /* sim tests the front end's use of the slot */
    CHECK(!tsi_backend_for(TS_CPU)->matmul_bias_act); /* the cpu composes: the reference bits */
    bool cuda = false;
    for (int i = 0; i < nd; i++) cuda |= devs[i].type == TS_CUDA;
    if (!cuda) printf("cuda:0 absent: its cases skipped\n");
    test_devices();
    test_never_taken();
    test_create_graph();
    test_transformer();
    test_sequential();
    CHECK_EQ(act_taken[TS_SIM], act_asked[TS_SIM]); /* sim never declines these */
    if (real_act[TS_CUDA])
        printf("cuda:0: matmul_bias_act (cuBLASLt RELU/GELU_BIAS) took %d of %d calls\n",
               act_taken[TS_CUDA], act_asked[TS_CUDA]);
    return ts_test_finish();
}
