/* test_mlp_fused.c — Linear, relu or gelu_tanh, Linear as one node (mlp_fused.c, decision 0032):
 * the forward through matmul_bias_act saving the activation's aux, the backward's activation
 * gradient and first bias gradient through matmul_dact_bgrad (cuBLASLt's DRELU_BGRAD /
 * DGELU_BGRAD on CUDA; the cpu kernels in the composed backward's order on sim; none on the cpu,
 * which composes), on cpu, sim:0 and cuda:0 when present. For float32, float64, bfloat16 and
 * float16: the output and the gradients of x, W1, b1, W2, b2 under a random upstream gradient r,
 * against a float64 reference computed here from the values the device holds (one row, odd sizes,
 * several blocks, a 3-D input); sim's are the cpu's bits (the composition). The slots are called
 * exactly when they should be: a graph recorded, the middle dropout the identity (p = 0, or not
 * training), relu or gelu_tanh, x / W1 / b1 wanting a gradient; never for the erf GELU or a
 * dropout that drops, in a Sequential and in a TransformerEncoderLayer. Second-order gradients
 * (create_graph) on sim against the cpu's; autocast's bfloat16 on sim against the cpu's.
 *
 * Bounds (u_c the accumulation's unit roundoff: float64 2^-53, the others float32 2^-24; u_t the
 * dtype's for a half result's rounding, 0 for float32 / float64; u_d the dtype's, which every
 * elementwise op rounds to), test_linear_act_epilogue.c's for z and the activation:
 *   z = x W1^T + b1 (K + 1 terms, magnitude sum S): tz = (K + 2) u_c S + u_t (S + |z|);
 *   h = relu(z): th = tz; gelu_tanh: th = 1.13 tz + 8 u_d |z| (+ |z| / 2 TANH_APPROX on cuda:0);
 *   y = h W2^T + b2: the product's bound with h's carried through (sum th |W2|);
 *   dh = r W2 (N terms): tdh = (N + 2) u_c S + u_t (S + |dh|);
 *   dz = dh act'(z): relu: dh or 0, both allowed (tdz = |dh| + tdh) where |z| <= tz (the mask may
 *     have either bit); gelu_tanh: act' within 0.85 tz + 16 u_d A of the exact (A the magnitude
 *     sum of its two terms), so tdz = tdh (A + e) + |dh| e + u_d (|dh| + tdh) A with e that bound
 *     (plus the tanh approximation's |dh| TANH_APPROX (0.5 + |z| k (1 + 3c z^2)) on cuda:0);
 *   dx = dz W1, dW1 = dz^T x, db1 = sum dz, dW2 = r^T h, db2 = sum r: the products' bounds with the
 *     operands' bounds carried through. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "epilogue_test_util.h"
#include "nn/layers_internal.h"
#include "ts_test.h"

/* ------------------------------------------------------------------ the slots' calls */
#define N_TYPES 8
typedef bool (*act_fn)(const ts_backend *, int, ts_epi_act, const ts_kview *, const ts_kview *,
                       const ts_kview *, const ts_kview *, const ts_epi_aux *);
typedef bool (*dact_fn)(const ts_backend *, int, ts_epi_act, const ts_kview *, const ts_kview *,
                        const ts_kview *, const ts_kview *, const ts_epi_aux *);
static act_fn real_act[N_TYPES];
static dact_fn real_dact[N_TYPES];
static int act_calls, dact_calls, dact_taken[N_TYPES], dact_asked[N_TYPES];

static bool counting_act(const ts_backend *be, int index, ts_epi_act act, const ts_kview *out,
                         const ts_kview *a, const ts_kview *b, const ts_kview *bias,
                         const ts_epi_aux *aux) {
    act_calls++;
    return real_act[be->type](be, index, act, out, a, b, bias, aux);
}

static bool counting_dact(const ts_backend *be, int index, ts_epi_act act, const ts_kview *dz,
                          const ts_kview *db, const ts_kview *g, const ts_kview *w,
                          const ts_epi_aux *aux) {
    dact_calls++;
    dact_asked[be->type]++;
    const bool took = real_dact[be->type](be, index, act, dz, db, g, w, aux);
    dact_taken[be->type] += took;
    return took;
}

static void install_counters(ts_device_type t) {
    ts_backend *be = (ts_backend *)tsi_backend_for(t);
    if (!be || (int)t >= N_TYPES) return;
    if (be->matmul_bias_act && !real_act[t])
        real_act[t] = be->matmul_bias_act, be->matmul_bias_act = counting_act;
    if (be->matmul_dact_bgrad && !real_dact[t])
        real_dact[t] = be->matmul_dact_bgrad, be->matmul_dact_bgrad = counting_dact;
}

static bool has_slots(ts_device d) {
    const ts_backend *be = tsi_backend_for(d.type);
    return be->matmul_bias_act && be->matmul_dact_bgrad;
}

/* ------------------------------------------------------------------ host values */
static const double K_GELU = 0.79788456080286535588, C_GELU = 0.044715;
/* cuBLASLt's GELU may use PTX's tanh.approx.f32: relative error at most 2^-10.987 (cuda:0 only) */
static const double TANH_APPROX = 5.0e-4;

/* ------------------------------------------------------------------ the module */
static const char *act_name(ts_activation a) {
    return a == TS_ACT_RELU ? "relu" : a == TS_ACT_GELU ? "gelu" : "gelu_tanh";
}

/* Sequential(Linear(in, hid), act, [Dropout(p) where p >= 0,] Linear(hid, out)) */
static ts_module *mlp_new(int64_t in, int64_t hid, int64_t out, ts_activation act, double p,
                          ts_dtype dt, ts_device dev) {
    ts_manual_seed(11);
    const ts_linear_opts o = {.dtype = dt, .device = dev};
    ts_module *ms[4];
    int n = 0;
    ms[n++] = ts_linear_new_ex(in, hid, o);
    ms[n++] = act == TS_ACT_RELU   ? ts_relu_new()
              : act == TS_ACT_GELU ? ts_gelu_new()
                                   : ts_gelu_new_ex(TS_GELU_TANH);
    if (p >= 0) ms[n++] = ts_dropout_new(p);
    ms[n++] = ts_linear_new_ex(hid, out, o);
    return ts_sequential_new(n, ms);
}

/* the parameters in order: W1, b1, W2, b2 */
static void params_of(ts_module *seq, ts_tensor **p) {
    ts_tensor_list l = ts_module_named_parameters(seq);
    for (int i = 0; i < 4; i++) p[i] = i < l.n ? l.tensors[i] : NULL;
    ts_tensor_list_free(&l);
}

/* ------------------------------------------------------------------ one case */
typedef struct mlp_case {
    int64_t rows, in, hid, out;
    bool three_d; /* x is [2, rows / 2, in] */
} mlp_case;

enum { R_Y, R_GX, R_GW1, R_GB1, R_GW2, R_GB2, N_RES };
typedef struct mlp_result {
    double *v[N_RES];
} mlp_result;

static void free_result(mlp_result *r) {
    for (int i = 0; i < N_RES; i++) free(r->v[i]), r->v[i] = NULL;
}

typedef struct host_in {
    const double *x, *w1, *b1, *w2, *b2, *r;
} host_in;

/* a product's reference: s = sum_t p[t] q[t] (+ b), with p's bounds tp carried through */
typedef struct acc {
    double s, a, e;
} acc;
static void acc_add(acc *c, double p, double tp, double q) {
    c->s += p * q, c->a += (fabs(p) + tp) * fabs(q), c->e += tp * fabs(q);
}
static double acc_tol(const acc *c, int64_t n, double uc, double ut) {
    return c->e + (double)(n + 2) * uc * c->a + ut * (c->a + fabs(c->s));
}

static void check_reference(const mlp_case *c, ts_dtype dt, ts_activation act, bool lt,
                            const host_in *hi, const mlp_result *res) {
    const int64_t M = c->rows, K = c->in, H = c->hid, N = c->out;
    const double uc = dt == TS_F64 ? ldexp(1, -53) : ldexp(1, -24);
    const double ut = dt == TS_F16 || dt == TS_BF16 ? unit_roundoff(dt) : 0.0;
    const double ud = unit_roundoff(dt);
    int64_t big = M * K;
    const int64_t sizes[] = {M * H, M * N, H * K, H * N};
    for (int i = 0; i < 4; i++) big = sizes[i] > big ? sizes[i] : big;
    double *h = malloc((size_t)(M * H) * sizeof *h), *th = malloc((size_t)(M * H) * sizeof *th);
    double *dz = malloc((size_t)(M * H) * sizeof *dz), *tdz = malloc((size_t)(M * H) * sizeof *tdz);
    double *want = malloc((size_t)big * sizeof *want), *tol = malloc((size_t)big * sizeof *tol);
    CHECK(h && th && dz && tdz && want && tol);
    if (!h || !th || !dz || !tdz || !want || !tol) goto done;
    char what[64];
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < H; j++) {
            acc zc = {hi->b1[j], fabs(hi->b1[j]), 0};
            for (int64_t k = 0; k < K; k++) acc_add(&zc, hi->x[i * K + k], 0, hi->w1[j * K + k]);
            const double z = zc.s, tz = acc_tol(&zc, K, uc, ut);
            acc dh = {0, 0, 0};
            for (int64_t o = 0; o < N; o++) acc_add(&dh, hi->r[i * N + o], 0, hi->w2[o * H + j]);
            const double tdh = acc_tol(&dh, N, uc, ut);
            const int64_t q = i * H + j;
            if (act == TS_ACT_RELU) {
                h[q] = z > 0 ? z : 0, th[q] = tz;
                dz[q] = z > 0 ? dh.s : 0;
                tdz[q] = fabs(z) <= tz ? fabs(dh.s) + tdh : z > 0 ? tdh : 0;
            } else {
                const double t = tanh(K_GELU * z * (1 + C_GELU * z * z));
                h[q] = 0.5 * z * (1 + t);
                th[q] = 1.13 * tz + 8 * ud * fabs(z) + (lt ? 0.5 * fabs(z) * TANH_APPROX : 0);
                const double d1 = 0.5 * (1 + t),
                             d2 = 0.5 * z * (1 - t * t) * K_GELU * (1 + 3 * C_GELU * z * z);
                const double A = fabs(d1) + fabs(d2), e = 0.85 * tz + 16 * ud * A;
                dz[q] = dh.s * (d1 + d2);
                tdz[q] = tdh * (A + e) + fabs(dh.s) * e + ud * (fabs(dh.s) + tdh) * A +
                         (lt ? fabs(dh.s) * TANH_APPROX *
                                   (0.5 + fabs(z) * K_GELU * (1 + 3 * C_GELU * z * z))
                             : 0);
            }
        }
    for (int64_t i = 0; i < M; i++) /* y = h W2^T + b2 */
        for (int64_t o = 0; o < N; o++) {
            acc s = {hi->b2[o], fabs(hi->b2[o]), 0};
            for (int64_t j = 0; j < H; j++)
                acc_add(&s, h[i * H + j], th[i * H + j], hi->w2[o * H + j]);
            want[i * N + o] = s.s, tol[i * N + o] = acc_tol(&s, H, uc, ut);
        }
    snprintf(what, sizeof what, "y %s %s", act_name(act), ts_dtype_name(dt));
    CHECK(within(what, res->v[R_Y], want, tol, M * N));
    for (int64_t i = 0; i < M; i++) /* dx = dz W1 */
        for (int64_t k = 0; k < K; k++) {
            acc s = {0, 0, 0};
            for (int64_t j = 0; j < H; j++)
                acc_add(&s, dz[i * H + j], tdz[i * H + j], hi->w1[j * K + k]);
            want[i * K + k] = s.s, tol[i * K + k] = acc_tol(&s, H, uc, ut);
        }
    snprintf(what, sizeof what, "gx %s %s", act_name(act), ts_dtype_name(dt));
    CHECK(within(what, res->v[R_GX], want, tol, M * K));
    for (int64_t j = 0; j < H; j++) /* dW1 = dz^T x */
        for (int64_t k = 0; k < K; k++) {
            acc s = {0, 0, 0};
            for (int64_t i = 0; i < M; i++)
                acc_add(&s, dz[i * H + j], tdz[i * H + j], hi->x[i * K + k]);
            want[j * K + k] = s.s, tol[j * K + k] = acc_tol(&s, M, uc, ut);
        }
    snprintf(what, sizeof what, "gw1 %s %s", act_name(act), ts_dtype_name(dt));
    CHECK(within(what, res->v[R_GW1], want, tol, H * K));
    for (int64_t j = 0; j < H; j++) { /* db1 = the column sums of dz */
        acc s = {0, 0, 0};
        for (int64_t i = 0; i < M; i++) acc_add(&s, dz[i * H + j], tdz[i * H + j], 1.0);
        want[j] = s.s, tol[j] = acc_tol(&s, M, uc, ut);
    }
    snprintf(what, sizeof what, "gb1 %s %s", act_name(act), ts_dtype_name(dt));
    CHECK(within(what, res->v[R_GB1], want, tol, H));
    for (int64_t o = 0; o < N; o++) /* dW2 = r^T h */
        for (int64_t j = 0; j < H; j++) {
            acc s = {0, 0, 0};
            for (int64_t i = 0; i < M; i++)
                acc_add(&s, h[i * H + j], th[i * H + j], hi->r[i * N + o]);
            want[o * H + j] = s.s, tol[o * H + j] = acc_tol(&s, M, uc, ut);
        }
    snprintf(what, sizeof what, "gw2 %s %s", act_name(act), ts_dtype_name(dt));
    CHECK(within(what, res->v[R_GW2], want, tol, N * H));
    for (int64_t o = 0; o < N; o++) { /* db2 = the column sums of r */
        acc s = {0, 0, 0};
        for (int64_t i = 0; i < M; i++) acc_add(&s, hi->r[i * N + o], 0, 1.0);
        want[o] = s.s, tol[o] = acc_tol(&s, M, uc, ut);
    }
    snprintf(what, sizeof what, "gb2 %s %s", act_name(act), ts_dtype_name(dt));
    CHECK(within(what, res->v[R_GB2], want, tol, N));
done:
    free(h), free(th), free(dz), free(tdz), free(want), free(tol);
}

/* Runs one case on dev and checks it against the reference; fills res for the sim / cpu check. */
static void run_case(const mlp_case *c, ts_dtype dt, ts_activation act, ts_device dev,
                     uint64_t seed, mlp_result *res) {
    const int64_t M = c->rows, K = c->in, H = c->hid, N = c->out;
    ts_scope_begin();
    ts_module *seq = mlp_new(K, H, N, act, -1, dt, dev);
    rng = seed;
    ts_tensor *x = make(TS_SHAPE(M, K), dt, dev), *r = make(TS_SHAPE(M, N), dt, dev);
    ts_tensor *p[4];
    if (seq) params_of(seq, p);
    CHECK(seq && x && r && p[0] && p[1] && p[2] && p[3]);
    if (!seq || !x || !r || !p[3]) {
        ts_module_free(seq);
        ts_scope_end();
        return;
    }
    ts_set_requires_grad(x, true);
    ts_tensor *xin = c->three_d ? ts_reshape(x, TS_SHAPE(2, M / 2, K)) : x;
    const int a0 = act_calls, d0 = dact_calls;
    ts_tensor *y = ts_forward(seq, xin);
    CHECK(y != NULL);
    const bool slot = has_slots(dev);
    CHECK_EQ(act_calls - a0, tsi_backend_for(dev.type)->matmul_bias_act ? 1 : 0);
    if (slot && !c->three_d && y) CHECK_STREQ(ts_grad_fn_name(y), "MlpBackward");
    ts_tensor *y2 = y ? ts_reshape(y, TS_SHAPE(M, N)) : NULL;
    ts_tensor *ins[5] = {x, p[0], p[1], p[2], p[3]}, *g[5] = {NULL};
    CHECK_EQ(ts_autograd_grad(&y2, &r, 1, ins, 5, (ts_grad_opts){0}, g), TS_OK);
    CHECK_EQ(dact_calls - d0, slot ? 1 : 0);
    double *hx = host(x), *hw1 = host(p[0]), *hb1 = host(p[1]), *hw2 = host(p[2]);
    double *hb2 = host(p[3]), *hr = host(r);
    res->v[R_Y] = host(y2);
    for (int i = 0; i < 5; i++) res->v[R_GX + i] = host(g[i]);
    bool have = hx && hw1 && hb1 && hw2 && hb2 && hr;
    for (int i = 0; i < N_RES; i++) have = have && res->v[i];
    CHECK(have);
    const host_in hi = {hx, hw1, hb1, hw2, hb2, hr};
    if (have) check_reference(c, dt, act, dev.type == TS_CUDA, &hi, res);
    free(hx), free(hw1), free(hb1), free(hw2), free(hb2), free(hr);
    ts_module_free(seq);
    CHECK_OK();
    ts_scope_end();
}

static const mlp_case CASES[] = {
    /* rows, in, hid, out, 3-D */
    {1, 5, 3, 4, false},     /* one row */
    {7, 13, 11, 5, false},   /* odd sizes */
    {33, 20, 65, 17, false}, /* odd, several blocks, a mask row over 64 bits */
    {6, 10, 9, 7, true},     /* x [2, 3, 10] */
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
                const mlp_case *lc = &CASES[c];
                const int64_t M = lc->rows, K = lc->in, H = lc->hid, N = lc->out;
                const int64_t n[N_RES] = {M * N, M * K, H * K, H, N * H, N};
                mlp_result cpu_res = {{NULL}};
                for (int i = 0; i < nd; i++) {
                    mlp_result res = {{NULL}};
                    const int fails = ts_test_failed_count();
                    run_case(lc, dts[d], acts[a], devs[i], 3000 + 31 * c + 7 * d + a, &res);
                    if (devs[i].type == TS_SIM) /* the composition's bits */
                        for (int k = 0; k < N_RES; k++) {
                            const bool ok = same(res.v[k], cpu_res.v[k], n[k]);
                            CHECK(ok);
                            if (!ok) printf("  sim differs from the cpu in result %d\n", k);
                        }
                    if (ts_test_failed_count() != fails)
                        printf("  case %zu (%lld x %lld x %lld x %lld) %s %s on %s\n", c,
                               (long long)M, (long long)K, (long long)H, (long long)N,
                               act_name(acts[a]), ts_dtype_name(dts[d]), ts_device_str(devs[i]));
                    if (devs[i].type == TS_CPU)
                        cpu_res = res;
                    else
                        free_result(&res);
                }
                free_result(&cpu_res);
            }
}

/* ------------------------------------------------------------------ when the slots are taken */
typedef struct when_case {
    const char *name;
    ts_activation act;
    double p;        /* the middle dropout's probability; < 0: none */
    bool training;   /* the Sequential's mode */
    bool x_grad;     /* x wants a gradient */
    bool w1_grad;    /* W1 and b1 want theirs */
    bool no_grad;    /* the forward under no_grad */
    int acts, dacts; /* the calls expected on a device with both slots */
    bool node;       /* y's grad_fn is MlpBackward */
} when_case;

static const when_case WHEN[] = {
    {"relu", TS_ACT_RELU, -1, true, true, true, false, 1, 1, true},
    {"gelu_tanh", TS_ACT_GELU_TANH, -1, true, true, true, false, 1, 1, true},
    {"erf gelu", TS_ACT_GELU, -1, true, true, true, false, 0, 0, false},
    {"dropout 0.3 training", TS_ACT_RELU, 0.3, true, true, true, false, 1, 0, false},
    {"dropout 0.3 eval", TS_ACT_GELU_TANH, 0.3, false, true, true, false, 1, 1, true},
    {"dropout 0 training", TS_ACT_RELU, 0, true, true, true, false, 1, 1, true},
    {"only W1 b1 want gradients", TS_ACT_RELU, -1, true, false, true, false, 1, 1, true},
    {"only x wants one", TS_ACT_GELU_TANH, -1, true, true, false, false, 1, 1, true},
    {"only W2 b2 want them", TS_ACT_RELU, -1, true, false, false, false, 1, 0, true},
    {"no_grad", TS_ACT_RELU, -1, true, true, true, true, 1, 0, false},
};

static void test_when(void) {
    ts_device devs[TS_TEST_MAX_DEVICES];
    const int nd = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    for (size_t w = 0; w < sizeof WHEN / sizeof WHEN[0]; w++) {
        const when_case *wc = &WHEN[w];
        double *ref = NULL;
        for (int i = 0; i < nd; i++) {
            ts_scope_begin();
            const int fails = ts_test_failed_count();
            ts_module *seq = mlp_new(6, 10, 4, wc->act, wc->p, TS_F32, devs[i]);
            CHECK(seq != NULL);
            if (!seq) {
                ts_scope_end();
                continue;
            }
            ts_module_train(seq, wc->training);
            ts_tensor *p[4];
            params_of(seq, p);
            ts_set_requires_grad(p[0], wc->w1_grad), ts_set_requires_grad(p[1], wc->w1_grad);
            rng = 17;
            ts_tensor *x = make(TS_SHAPE(5, 6), TS_F32, devs[i]);
            ts_set_requires_grad(x, wc->x_grad);
            const int a0 = act_calls, d0 = dact_calls;
            if (wc->no_grad) ts_no_grad_begin();
            ts_tensor *y = ts_forward(seq, x);
            if (wc->no_grad) ts_no_grad_end();
            CHECK(y != NULL);
            const bool slot = has_slots(devs[i]);
            if (y && slot)
                CHECK(wc->node ==
                      (ts_grad_fn_name(y) && !strcmp(ts_grad_fn_name(y), "MlpBackward")));
            if (y && !wc->no_grad) CHECK_EQ(ts_backward(ts_sum(ts_square(y))), TS_OK);
            const int want_a = slot ? wc->acts : 0, want_d = slot ? wc->dacts : 0;
            CHECK_EQ(act_calls - a0, want_a);
            CHECK_EQ(dact_calls - d0, want_d);
            /* the same output as the cpu's composition (a dropout that drops aside) */
            double *h = host(y);
            CHECK(h != NULL);
            if (devs[i].type == TS_SIM && (wc->p <= 0 || !wc->training)) CHECK(same(h, ref, 20));
            if (ts_test_failed_count() != fails)
                printf("  when case '%s' on %s\n", wc->name, ts_device_str(devs[i]));
            if (devs[i].type == TS_CPU)
                ref = h;
            else
                free(h);
            ts_module_free(seq);
            CHECK_OK();
            ts_scope_end();
        }
        free(ref);
    }
}

/* The encoder and decoder layers' feed-forward block: one node where its dropout is the identity (p
 * = 0, or eval), the composition where it drops; never for the erf GELU. Output and input gradient
 * on sim are the cpu's bits wherever no dropout drops. */
static void test_transformer(void) {
    ts_device devs[TS_TEST_MAX_DEVICES];
    const int nd = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    const ts_activation acts[] = {TS_ACT_RELU, TS_ACT_GELU, TS_ACT_GELU_TANH};
    for (int a = 0; a < 6; a++)
        for (int mode = 0; mode < 3; mode++) { /* p 0 training, p 0.2 training, p 0.2 eval */
            const bool decoder = a >= 3;
            double *ref[2] = {NULL, NULL};
            const double p = mode == 0 ? 0 : 0.2;
            for (int i = 0; i < nd; i++) {
                ts_scope_begin();
                ts_transformer_opts o = {.dim_feedforward = 24,
                                         .has_dropout = true,
                                         .dropout = p,
                                         .activation = acts[a % 3]};
                ts_manual_seed(7);
                ts_module *layer = decoder ? ts_transformer_decoder_layer_new(8, 2, o)
                                           : ts_transformer_encoder_layer_new(8, 2, o);
                CHECK(layer != NULL);
                if (!layer) {
                    ts_scope_end();
                    continue;
                }
                layer = ts_module_to(layer, devs[i]);
                ts_module_train(layer, mode != 2);
                rng = 5;
                ts_tensor *src =
                    ts_reshape(make(TS_SHAPE(6, 8), TS_F32, devs[i]), TS_SHAPE(3, 2, 8));
                ts_set_requires_grad(src, true);
                const int d0 = dact_calls;
                ts_tensor *mem =
                    decoder ? ts_reshape(make(TS_SHAPE(8, 8), TS_F32, devs[i]), TS_SHAPE(4, 2, 8))
                            : NULL;
                ts_tensor *y = decoder ? ts_transformer_decoder_layer(layer, src, mem, NULL)
                                       : ts_forward(layer, src);
                ts_tensor *gs = NULL, *l = y ? ts_sum(ts_square(y)) : NULL;
                CHECK_EQ(ts_autograd_grad(&l, NULL, 1, &src, 1, (ts_grad_opts){0}, &gs), TS_OK);
                const bool want = has_slots(devs[i]) && acts[a % 3] != TS_ACT_GELU && mode != 1;
                CHECK_EQ(dact_calls - d0, want ? 1 : 0);
                double *h[2] = {host(y), host(gs)};
                CHECK(h[0] && h[1]);
                if (devs[i].type == TS_SIM && mode != 1)
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

/* Second-order gradients through the node (create_graph): d/d(x, W1, b1, W2, b2) of sum(gx^2),
 * gx = d sum(y r) / dx, float64, sim against the cpu. relu: the composition's very ops, the same
 * bits. gelu_tanh: the node's gradient writes the derivative out where the composition
 * differentiates nine ops: sums of at most M H K N = 840 products of factors bounded by 4 (|z|,
 * |h| <= 1 + K / sqrt(K)), 1 (|W|, |r|) and 1.2 (gelu_tanh's first three derivatives), some 100
 * roundings on either side: within 100 * 2^-53 * 840 * 4^2 * 1.2^3 < 3e-10 of each other. */
static void test_create_graph(void) {
    ts_device devs[TS_TEST_MAX_DEVICES];
    const int nd = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    const ts_activation acts[] = {TS_ACT_RELU, TS_ACT_GELU_TANH};
    for (int a = 0; a < 2; a++) {
        double *ref[5] = {NULL};
        for (int i = 0; i < nd; i++) {
            ts_scope_begin();
            ts_module *seq = mlp_new(7, 6, 4, acts[a], -1, TS_F64, devs[i]);
            ts_tensor *p[4] = {NULL};
            if (seq) params_of(seq, p);
            rng = 123;
            ts_tensor *x = make(TS_SHAPE(5, 7), TS_F64, devs[i]);
            ts_tensor *r = make(TS_SHAPE(5, 4), TS_F64, devs[i]);
            ts_set_requires_grad(x, true);
            ts_tensor *y = seq ? ts_forward(seq, x) : NULL, *gx = NULL;
            CHECK_EQ(ts_autograd_grad(&y, &r, 1, &x, 1, (ts_grad_opts){.create_graph = true}, &gx),
                     TS_OK);
            ts_tensor *l = gx ? ts_sum(ts_square(gx)) : NULL, *ins[5] = {x, p[0], p[1], p[2], p[3]};
            ts_tensor *g2[5] = {NULL};
            CHECK_EQ(
                ts_autograd_grad(&l, NULL, 1, ins, 5, (ts_grad_opts){.allow_unused = true}, g2),
                TS_OK);
            const int64_t n[5] = {35, 42, 6, 24, 4};
            double *h[5];
            for (int k = 0; k < 5; k++) h[k] = g2[k] ? host(g2[k]) : NULL;
            CHECK(h[0] && h[1] && h[2] && h[3]); /* b2 gets none: gx does not depend on it */
            for (int k = 0; devs[i].type == TS_SIM && k < 4; k++) {
                bool ok = h[k] && ref[k];
                for (int64_t q = 0; ok && q < n[k]; q++)
                    ok = acts[a] == TS_ACT_RELU ? h[k][q] == ref[k][q]
                                                : fabs(h[k][q] - ref[k][q]) <= 3e-10;
                CHECK(ok);
                if (!ok) printf("  %s: second-order gradient %d\n", act_name(acts[a]), k);
            }
            if (devs[i].type == TS_CPU)
                for (int k = 0; k < 5; k++) ref[k] = h[k];
            else
                for (int k = 0; k < 5; k++) free(h[k]);
            ts_module_free(seq);
            CHECK_OK();
            ts_scope_end();
        }
        for (int k = 0; k < 5; k++) free(ref[k]);
    }
}

/* One autocast (bfloat16) forward and backward of a float32 MLP on dev; the output and the
 * gradients of x, W1, b1, W2, b2 into h. */
static void autocast_run(ts_activation act, ts_device dev, double **h) {
    ts_scope_begin();
    ts_module *seq = mlp_new(12, 20, 7, act, -1, TS_F32, dev);
    ts_tensor *p[4] = {NULL};
    if (seq) params_of(seq, p);
    rng = 77;
    ts_tensor *x = make(TS_SHAPE(9, 12), TS_F32, dev);
    ts_set_requires_grad(x, true);
    ts_autocast_begin(dev.type, TS_BF16);
    ts_tensor *y = seq ? ts_forward(seq, x) : NULL;
    ts_autocast_end();
    CHECK(y && ts_dtype_of(y) == TS_BF16);
    ts_tensor *l = y ? ts_sum(ts_square(ts_to_dtype(y, TS_F32))) : NULL;
    ts_tensor *ins[5] = {x, p[0], p[1], p[2], p[3]}, *g[5] = {NULL};
    CHECK_EQ(ts_autograd_grad(&l, NULL, 1, ins, 5, (ts_grad_opts){0}, g), TS_OK);
    h[0] = host(y);
    for (int k = 0; k < 5; k++) h[k + 1] = host(g[k]);
    ts_module_free(seq);
    CHECK_OK();
    ts_scope_end();
}

/* Under autocast (bfloat16 on sim) the float32 MLP runs as one node on the cast tensors where the
 * products are bfloat16's own (sim's are: it has no half_products_native), one dact call; its
 * output and gradients (x's, the float32 parameters') are the bits of the modules' composition on
 * sim itself (the slots removed for that run: the cpu's products may widen to float32 where sim's
 * do not). */
static void test_autocast(void) {
    const ts_device sim = {TS_SIM, 0};
    if (ts_device_count(TS_SIM) < 1) return; /* TS_TEST_ONLY_CUDA without sim devices */
    ts_backend *be = (ts_backend *)tsi_backend_for(TS_SIM);
    const bool native = !be->half_products_native || be->half_products_native(be, 0, TS_BF16);
    const ts_activation acts[] = {TS_ACT_RELU, TS_ACT_GELU_TANH};
    const int64_t n[6] = {63, 108, 240, 20, 140, 7};
    for (int a = 0; a < 2; a++) {
        double *h[6] = {NULL}, *ref[6] = {NULL};
        const int d0 = dact_calls;
        autocast_run(acts[a], sim, h);
        CHECK_EQ(dact_calls - d0, native ? 1 : 0);
        act_fn act = be->matmul_bias_act;
        dact_fn dact = be->matmul_dact_bgrad;
        be->matmul_bias_act = NULL, be->matmul_dact_bgrad = NULL; /* the composition */
        autocast_run(acts[a], sim, ref);
        be->matmul_bias_act = act, be->matmul_dact_bgrad = dact;
        for (int k = 0; k < 6; k++) {
            const bool ok = same(h[k], ref[k], n[k]);
            CHECK(ok);
            if (!ok)
                printf("  autocast %s: result %d differs from the composition's\n",
                       act_name(acts[a]), k);
        }
        for (int k = 0; k < 6; k++) free(h[k]), free(ref[k]);
    }
}

/* A checkpointed Sequential (ts_module_set_checkpoint): the node's saved tensors are recomputed in
 * the backward; the gradients on sim are the cpu's bits and the slot is called once. */
static void test_checkpoint(void) {
    ts_device devs[TS_TEST_MAX_DEVICES];
    const int nd = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    for (int a = 0; a < 2; a++) {
        double *ref[5] = {NULL};
        for (int i = 0; i < nd; i++) {
            ts_scope_begin();
            ts_module *seq =
                mlp_new(6, 10, 4, a ? TS_ACT_GELU_TANH : TS_ACT_RELU, -1, TS_F32, devs[i]);
            CHECK(seq && ts_module_set_checkpoint(seq, true) == TS_OK);
            ts_tensor *p[4] = {NULL};
            if (seq) params_of(seq, p);
            rng = 31;
            ts_tensor *x = make(TS_SHAPE(5, 6), TS_F32, devs[i]);
            ts_set_requires_grad(x, true);
            const int d0 = dact_calls;
            ts_tensor *y = seq ? ts_forward(seq, x) : NULL;
            ts_tensor *l = y ? ts_sum(ts_square(y)) : NULL;
            ts_tensor *ins[5] = {x, p[0], p[1], p[2], p[3]}, *g[5] = {NULL};
            CHECK_EQ(ts_autograd_grad(&l, NULL, 1, ins, 5, (ts_grad_opts){0}, g), TS_OK);
            CHECK_EQ(dact_calls - d0, has_slots(devs[i]) ? 1 : 0);
            const int64_t n[5] = {30, 60, 10, 40, 4};
            double *h[5];
            for (int k = 0; k < 5; k++) h[k] = host(g[k]);
            for (int k = 0; devs[i].type == TS_SIM && k < 5; k++) CHECK(same(h[k], ref[k], n[k]));
            if (devs[i].type == TS_CPU)
                for (int k = 0; k < 5; k++) ref[k] = h[k];
            else
                for (int k = 0; k < 5; k++) free(h[k]);
            ts_module_free(seq);
            CHECK_OK();
            ts_scope_end();
        }
        for (int k = 0; k < 5; k++) free(ref[k]);
    }
}

int main(void) {
    ts_device devs[TS_TEST_MAX_DEVICES];
    const int nd = ts_test_devices(devs, TS_TEST_MAX_DEVICES); /* configures sim:0 */
    install_counters(TS_SIM);
    install_counters(TS_CUDA);
    const ts_backend *sim = tsi_backend_for(TS_SIM);
    CHECK(sim && sim->matmul_bias_act && sim->matmul_dact_bgrad); /* sim runs the front end's use */
    CHECK(!tsi_backend_for(TS_CPU)->matmul_dact_bgrad); /* the cpu composes: the reference bits */
    bool cuda = false;
    for (int i = 0; i < nd; i++) cuda |= devs[i].type == TS_CUDA;
    if (!cuda) printf("cuda:0 absent: its cases skipped\n");
    test_devices();
    test_when();
    test_transformer();
    test_create_graph();
    test_autocast();
    test_checkpoint();
    CHECK_EQ(dact_taken[TS_SIM], dact_asked[TS_SIM]); /* sim never declines these */
    if (real_dact[TS_CUDA])
        printf("cuda:0: matmul_dact_bgrad (cuBLASLt DRELU/DGELU_BGRAD) took %d of %d calls\n",
               dact_taken[TS_CUDA], dact_asked[TS_CUDA]);
    return ts_test_finish();
}
