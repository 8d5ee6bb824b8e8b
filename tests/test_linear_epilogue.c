/* test_linear_epilogue.c — linear with a bias through the backend's epilogue slots: the forward's
 * matmul_bias (cuBLASLt's bias epilogue on CUDA, oneDNN's bias argument on the cpu) and the
 * backward's matmul_bgrad (the weight gradient's GEMM giving the bias gradient too: cuBLASLt's
 * BGRADB on CUDA; the cpu kernels in the composition's order on sim; none on the cpu, which
 * composes), on cpu, sim:0 and cuda:0 when present. The output and the gradients of x, w and b
 * under a random upstream gradient r, for float32, float64, bfloat16 and float16, against a
 * float64 reference computed here from the values the device holds, for one row, odd sizes, an
 * empty contraction (K = 0: the bias alone), an input that is a transposed view, and no bias.
 * Also: the node is AddmmBackward0; sim's results are the cpu's bits (the same kernels in the same
 * order); matmul_bgrad is called exactly when the weight and the bias both want gradients and no
 * graph is recorded of them (not for a bias or a weight without requires_grad, nor under
 * create_graph), also for a broadcast gradient (sum(y)'s, strides 0: CUDA's slot declines it).
 *
 * Bounds, with u_c the unit roundoff of the accumulation (float64: 2^-53; the others float32,
 * 2^-24) and u_t that of the dtype (0 for float32 and float64, whose result is the accumulator's):
 * a sum of n products and terms, S the sum of their magnitudes, is within (n + 2) u_c S of the
 * exact value (a recursive or blocked sum: gamma_n, plus the product's rounding), and a half
 * result adds its roundings to the dtype, at most u_t (S + |exact|) over two (the composition
 * rounds the product, then the sum with the bias). The inputs' own rounding is not an error: the
 * reference reads back the rounded values. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "epilogue_test_util.h"
#include "ts_test.h"

/* ------------------------------------------------------------------ the slot's calls */
#define N_TYPES 8
static bool (*real_bgrad[N_TYPES])(const ts_backend *, int, const ts_kview *, const ts_kview *,
                                   const ts_kview *, const ts_kview *);
static int bgrad_calls, bgrad_taken[N_TYPES], bgrad_asked[N_TYPES];

static bool counting_bgrad(const ts_backend *be, int index, const ts_kview *dw, const ts_kview *db,
                           const ts_kview *g, const ts_kview *x) {
    bgrad_calls++;
    bgrad_asked[be->type]++;
    const bool took = real_bgrad[be->type](be, index, dw, db, g, x);
    bgrad_taken[be->type] += took;
    return took;
}

/* Wraps the slot of each backend that has one (the tables are static, writable data). */
static void install_counter(ts_device_type t) {
    ts_backend *be = (ts_backend *)tsi_backend_for(t);
    if (!be || !be->matmul_bgrad || (int)t >= N_TYPES || real_bgrad[t]) return;
    real_bgrad[t] = be->matmul_bgrad, be->matmul_bgrad = counting_bgrad;
}

/* ------------------------------------------------------------------ host values */
/* ------------------------------------------------------------------ one case */
typedef struct lin_case {
    int64_t rows, in, out;
    bool transposed_x; /* x is ts_t of an [in, rows] tensor */
    bool bias, w_grad, b_grad;
} lin_case;

typedef struct lin_result {
    double *v[4]; /* y, gx, gw, gb (NULL where not asked) */
} lin_result;

/* Runs one case on dev (values drawn from `seed`) and checks it against the float64 reference;
 * fills res (the caller frees) for the cpu / sim comparison. */
static void run_case(const lin_case *c, ts_dtype dt, ts_device dev, uint64_t seed, lin_result *res,
                     bool create_graph) {
    const int64_t M = c->rows, K = c->in, N = c->out;
    rng = seed;
    ts_scope_begin();
    ts_tensor *xl = c->transposed_x ? make(TS_SHAPE(K, M), dt, dev) : make(TS_SHAPE(M, K), dt, dev);
    ts_tensor *w = make(TS_SHAPE(N, K), dt, dev);
    ts_tensor *b = c->bias ? make(TS_SHAPE(N), dt, dev) : NULL;
    ts_tensor *r = make(TS_SHAPE(M, N), dt, dev);
    CHECK(xl && w && r && (b || !c->bias));
    if (!xl || !w || !r || (c->bias && !b)) {
        ts_scope_end();
        return;
    }
    ts_set_requires_grad(xl, true);
    ts_set_requires_grad(w, c->w_grad);
    if (b) ts_set_requires_grad(b, c->b_grad);
    ts_tensor *x = c->transposed_x ? ts_t(xl) : xl;
    ts_tensor *y = ts_linear(x, w, b);
    CHECK(y != NULL);
    if (!y) {
        ts_scope_end();
        return;
    }
    if (c->bias && K > 0) CHECK_STREQ(ts_grad_fn_name(y), "AddmmBackward0");
    ts_tensor *ins[3] = {xl, w, b}, *grads[3] = {NULL, NULL, NULL};
    int n_in = 1;
    if (c->w_grad) ins[n_in++] = w;
    if (b && c->b_grad) ins[n_in++] = b;
    const int calls0 = bgrad_calls;
    CHECK_EQ(
        ts_autograd_grad(&y, &r, 1, ins, n_in, (ts_grad_opts){.create_graph = create_graph}, grads),
        TS_OK);
    /* the slot: where the device has one, both wanted, and no graph of the gradients */
    const bool wants = c->bias && c->w_grad && c->b_grad && K > 0 && !create_graph;
    const ts_backend *be = tsi_backend_for(dev.type);
    CHECK_EQ(bgrad_calls - calls0, wants && be->matmul_bgrad ? 1 : 0);
    ts_tensor *gw = c->w_grad ? grads[1] : NULL, *gb = b && c->b_grad ? grads[n_in - 1] : NULL;
    ts_tensor *gx = c->transposed_x ? ts_t(grads[0]) : grads[0];

    /* the reference, from the values on the device */
    double *hx = host(x), *hw = host(w), *hb = b ? host(b) : NULL, *hr = host(r);
    res->v[0] = host(y), res->v[1] = host(gx);
    res->v[2] = gw ? host(gw) : NULL, res->v[3] = gb ? host(gb) : NULL;
    const int64_t cap =
        (M * N > M * K ? M * N : M * K) > N * K ? (M * N > M * K ? M * N : M * K) : N * K;
    double *want = malloc((size_t)(cap + 1) * sizeof *want),
           *tol = malloc((size_t)(cap + 1) * sizeof *tol);
    const bool have = hx && hw && hr && (hb || !b) && res->v[0] && res->v[1] &&
                      (res->v[2] || !gw) && (res->v[3] || !gb) && want && tol;
    CHECK(have);
    const double uc = dt == TS_F64 ? ldexp(1, -53) : ldexp(1, -24);
    const double ut = dt == TS_F16 || dt == TS_BF16 ? unit_roundoff(dt) : 0.0;
    char what[64];
    snprintf(what, sizeof what, "y %s", ts_dtype_name(dt));
    if (have) { /* y = x w^T + b */
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
                double s = b ? hb[j] : 0, a = b ? fabs(hb[j]) : 0;
                for (int64_t k = 0; k < K; k++)
                    s += hx[i * K + k] * hw[j * K + k], a += fabs(hx[i * K + k] * hw[j * K + k]);
                want[i * N + j] = s;
                tol[i * N + j] = (double)(K + 2) * uc * a + ut * (a + fabs(s));
            }
        CHECK(within(what, res->v[0], want, tol, M * N));
        for (int64_t i = 0; i < M; i++) /* gx = r w */
            for (int64_t k = 0; k < K; k++) {
                double s = 0, a = 0;
                for (int64_t j = 0; j < N; j++)
                    s += hr[i * N + j] * hw[j * K + k], a += fabs(hr[i * N + j] * hw[j * K + k]);
                want[i * K + k] = s;
                tol[i * K + k] = (double)(N + 2) * uc * a + ut * (a + fabs(s));
            }
        snprintf(what, sizeof what, "gx %s", ts_dtype_name(dt));
        CHECK(within(what, res->v[1], want, tol, M * K));
        if (gw) { /* gw = r^T x */
            for (int64_t j = 0; j < N; j++)
                for (int64_t k = 0; k < K; k++) {
                    double s = 0, a = 0;
                    for (int64_t i = 0; i < M; i++)
                        s += hr[i * N + j] * hx[i * K + k],
                            a += fabs(hr[i * N + j] * hx[i * K + k]);
                    want[j * K + k] = s;
                    tol[j * K + k] = (double)(M + 2) * uc * a + ut * (a + fabs(s));
                }
            snprintf(what, sizeof what, "gw %s", ts_dtype_name(dt));
            CHECK(within(what, res->v[2], want, tol, N * K));
        }
        if (gb) { /* gb = the column sums of r */
            for (int64_t j = 0; j < N; j++) {
                double s = 0, a = 0;
                for (int64_t i = 0; i < M; i++) s += hr[i * N + j], a += fabs(hr[i * N + j]);
                want[j] = s;
                tol[j] = (double)(M + 2) * uc * a + ut * (a + fabs(s));
            }
            snprintf(what, sizeof what, "gb %s", ts_dtype_name(dt));
            CHECK(within(what, res->v[3], want, tol, N));
        }
    }
    free(hx), free(hw), free(hb), free(hr), free(want), free(tol);
    CHECK_OK();
    ts_scope_end();
}

static void free_result(lin_result *r) {
    for (int i = 0; i < 4; i++) free(r->v[i]), r->v[i] = NULL;
}

static const lin_case CASES[] = {
    /* rows, in, out, transposed x, bias, w grad, b grad */
    {1, 5, 3, false, true, true, true},    /* one row */
    {7, 13, 11, false, true, true, true},  /* odd sizes */
    {33, 65, 17, false, true, true, true}, /* odd, several blocks */
    {64, 96, 40, false, true, true, true}, /* the library's GEMMs */
    {4, 0, 6, false, true, true, true},    /* K = 0: the bias alone */
    {9, 12, 5, true, true, true, true},    /* x a transposed view */
    {6, 10, 7, false, false, true, false}, /* no bias */
    {8, 9, 10, false, true, true, false},  /* a bias that wants no gradient */
    {8, 9, 10, false, true, false, true},  /* a frozen weight */
};
#define N_CASES (sizeof CASES / sizeof CASES[0])

static void test_devices(void) {
    ts_device devs[TS_TEST_MAX_DEVICES];
    const int nd = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    const ts_dtype dts[] = {TS_F32, TS_F64, TS_BF16, TS_F16};
    for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++) {
        for (size_t c = 0; c < N_CASES; c++) {
            const lin_case *lc = &CASES[c];
            lin_result cpu_res = {{NULL}};
            for (int i = 0; i < nd; i++) {
                lin_result res = {{NULL}};
                const int fails = ts_test_failed_count();
                run_case(lc, dts[d], devs[i], 1000 + 17 * c + d, &res, false);
                if (ts_test_failed_count() != fails)
                    printf("  case %zu (%lld x %lld x %lld) %s on %s\n", c, (long long)lc->rows,
                           (long long)lc->in, (long long)lc->out, ts_dtype_name(dts[d]),
                           ts_device_str(devs[i]));
                if (devs[i].type == TS_CPU) {
                    cpu_res = res;
                    continue;
                }
                if (devs[i].type == TS_SIM) { /* the cpu's kernels in the cpu's order */
                    const int64_t M = lc->rows, K = lc->in, N = lc->out;
                    const int64_t n[4] = {M * N, M * K, N * K, N};
                    for (int k = 0; k < 4; k++) CHECK(same(res.v[k], cpu_res.v[k], n[k]));
                }
                free_result(&res);
            }
            free_result(&cpu_res);
        }
    }
}

/* create_graph: the gradients' graph is recorded by public ops, so the slot is not taken */
static void test_create_graph(void) {
    ts_device devs[TS_TEST_MAX_DEVICES];
    const int nd = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    for (int i = 0; i < nd; i++) {
        lin_result res = {{NULL}};
        run_case(&CASES[1], TS_F32, devs[i], 77, &res, true);
        free_result(&res);
    }
}

/* The gradient of sum(y): g is ones broadcast (strides 0, 0), which CUDA's slot declines and
 * sim's takes: gb = M in every entry and gw[j, k] = the sum of x's column k, both exact. */
static void test_broadcast_gradient(void) {
    ts_device devs[TS_TEST_MAX_DEVICES];
    const int nd = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    const int64_t M = 5, K = 3, N = 4;
    for (int i = 0; i < nd; i++) {
        ts_scope_begin();
        const ts_opts o = {.dtype = TS_F64, .device = devs[i]};
        ts_tensor *x = ts_mul_scalar(ts_arange(0, (double)(M * K), 1, o), 0.5);
        x = ts_reshape(x, TS_SHAPE(M, K));
        ts_tensor *w = ts_ones(TS_SHAPE(N, K), o), *b = ts_zeros(TS_SHAPE(N), o);
        ts_set_requires_grad(w, true), ts_set_requires_grad(b, true);
        const int calls0 = bgrad_calls;
        CHECK_EQ(ts_backward(ts_sum(ts_linear(x, w, b))), TS_OK);
        CHECK_EQ(bgrad_calls - calls0, tsi_backend_for(devs[i].type)->matmul_bgrad ? 1 : 0);
        double *gw = host(ts_grad(w)), *gb = host(ts_grad(b));
        CHECK(gw && gb);
        for (int64_t j = 0; gw && gb && j < N; j++) {
            CHECK_EQ(gb[j], (double)M);
            for (int64_t k = 0; k < K; k++) /* 0.5 (k + K (0 + 1 + ... + M - 1)) summed */
                CHECK_EQ(gw[j * K + k], 0.5 * (double)(M * k + K * M * (M - 1) / 2));
        }
        free(gw), free(gb);
        CHECK_OK();
        ts_scope_end();
    }
}

int main(void) {
    ts_device devs[TS_TEST_MAX_DEVICES];
    (void)ts_test_devices(devs, TS_TEST_MAX_DEVICES); /* starts the library, configures sim:0 */
    install_counter(TS_SIM);
    install_counter(TS_CUDA);
    const ts_backend *sim = tsi_backend_for(TS_SIM);
    CHECK(sim && sim->matmul_bgrad); /* sim tests the front end's use of the slot */
    test_devices();
    test_create_graph();
    test_broadcast_gradient();
    CHECK_EQ(bgrad_taken[TS_SIM], bgrad_asked[TS_SIM]); /* sim never declines */
    /* CUDA declines views cuBLASLt's heuristic has no algorithm for (the composition follows,
     * checked above all the same): how often it took the calls, for the GPU run's log */
    if (real_bgrad[TS_CUDA])
        printf("cuda:0: matmul_bgrad (cuBLASLt BGRADB) took %d of %d calls\n", bgrad_taken[TS_CUDA],
               bgrad_asked[TS_CUDA]);
    return ts_test_finish();
}
