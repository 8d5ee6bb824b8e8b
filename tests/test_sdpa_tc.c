/* test_sdpa_tc.c — the tensor-core attention of cuda_sdpa_tc.cu (f16 / bf16, head size 64 or 128,
 * no mask, no dropout) on cuda:0: forward output, log-sum-exp and the gradients of query, key and
 * value against float64 on the same (rounded) inputs, and against the CUDA-core kernels
 * (tsc_sdpa_tc_force(0)), over causal and not, L and S in {1, 15, 64, 100, 257, 1024} (L != S
 * too: rows and keys past a tile's end, causal tiles skipped in part), batch layouts [L, E],
 * [B, L, E], [B, H, L, E] and views of [B, L, H, E] (a GPT's heads), and more batches than a
 * grid's y extent. The kernels are called through the backend's sdpa entries, as
 * attention_fused.c calls them, so that lse can be checked; a run through the public API must
 * give the very same bits. Cases the path must leave to the CUDA-core kernels (head size 32, a
 * mask, dropout, float32, rows not 16-byte aligned) are checked to stay there, and correct.
 *
 * Bounds (support/sdpa_half_bound.h, in the dtype's unit roundoff u): each result within one
 * rounding (u of itself) plus the float32 arithmetic's bound, plus for dq and dk what D taken from
 * the rounded output moves them by; the tensor-core path also rounds the weights P (operands of
 * P V and P^T dO) and dS (of dS K and dS^T Q) to the dtype: out_i moves by u sum_j P_ij |v_j|, dv_j
 * by u sum_i P_ij |dO_i|, dq_i by u max|k| sum_j |dS_ij|, dk_j by u max|q| sum_i |dS_ij| (the AMX
 * path's terms, hc.amx). lse: float scores, within the float32 arithmetic's bound.
 *
 * Skips without CUDA (a failure under TS_REQUIRE_CUDA=1). TS_TEST_SDPA_TC_DEVICE=sim:0 runs it on
 * another device (no tensor-core pass expected there), which checks the test itself on a machine
 * without a GPU. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_bridge.h"
#include "core/internal.h"
#include "nn/functional_internal.h"
#include "sdpa_half_bound.h"
#include "ts_test.h"

static ts_device dev;
static long long tc_passes = 2; /* what a forward + backward forced onto the tensor cores runs */

typedef struct tc_case {
    int nb; /* batch dims: 0, 1 or 2 ([B, H]) */
    int64_t B, H, L, S;
    bool strided; /* nb 2: views of [B, L, H, E] */
} tc_case;

typedef struct fused {
    ts_tensor *out, *lse, *dq, *dk, *dv;
    long long tc_runs; /* passes the tensor-core path ran (forward + backward: 2) */
} fused;

static ts_shape case_shape(const tc_case *c, int64_t rows, int64_t cols) {
    if (c->nb == 0) return TS_SHAPE(rows, cols);
    if (c->nb == 1) return TS_SHAPE(c->B, rows, cols);
    return TS_SHAPE(c->B, c->H, rows, cols);
}

/* N(0, 1) values rounded to dt, as float64 on the cpu */
static ts_tensor *rounded_input(const tc_case *c, int64_t rows, int64_t cols, ts_dtype dt) {
    ts_tensor *x = ts_randn(case_shape(c, rows, cols), (ts_opts){.dtype = TS_F64});
    return ts_to_dtype(ts_to_dtype(x, dt), TS_F64);
}

/* x on the device in dt, in the case's layout */
static ts_tensor *on_device(const tc_case *c, ts_tensor *x64, ts_dtype dt) {
    ts_tensor *x = ts_to(ts_to_dtype(x64, dt), dev);
    if (c->strided && c->nb == 2) /* stored [B, L, H, E], seen [B, H, L, E] */
        x = ts_permute(ts_contiguous(ts_permute(x, TS_DIMS(0, 2, 1, 3))), TS_DIMS(0, 2, 1, 3));
    return x;
}

static ts_tensor *device_bytes(size_t n) {
    return n ? ts_empty(TS_SHAPE((int64_t)n), (ts_opts){.dtype = TS_U8, .device = dev}) : NULL;
}
static void *data_of(ts_tensor *t) { return t ? t->storage->data + t->offset : NULL; }

/* Forward and backward through the backend's sdpa entries, the tensor-core path forced on (tc 1)
 * or off (0); g: dO on the device. */
static fused run_entries(ts_tensor *q, ts_tensor *k, ts_tensor *v, ts_tensor *g, bool causal,
                         double scale, int tc) {
    fused f = {0};
    tsc_sdpa_tc_force(tc);
    const long long runs0 = tsc_sdpa_tc_runs();
    const int nd = ts_ndim(q);
    ts_shape os = ts_shape_of(q), ls = ts_shape_of(q);
    os.dims[nd - 1] = ts_size(v, nd - 1);
    ls.ndim--;
    const ts_dtype dt = ts_dtype_of(q);
    f.out = ts_empty(os, (ts_opts){.dtype = dt, .device = dev});
    f.lse = ts_empty(ls, (ts_opts){.dtype = TS_F32, .device = dev});
    f.dq = ts_empty(ts_shape_of(q), (ts_opts){.dtype = dt, .device = dev});
    f.dk = ts_empty(ts_shape_of(k), (ts_opts){.dtype = dt, .device = dev});
    f.dv = ts_empty(ts_shape_of(v), (ts_opts){.dtype = dt, .device = dev});
    ts_sdpa_args a = {.causal = causal};
    a.scale = scale > 0 ? scale : 1 / sqrt((double)ts_size(q, nd - 1));
    tsi_kview_fill(&a.q, q), tsi_kview_fill(&a.k, k), tsi_kview_fill(&a.v, v);
    tsi_kview_fill(&a.out, f.out), tsi_kview_fill(&a.lse, f.lse);
    const ts_backend *be = tsi_be(q);
    const int idx = tsi_dev_index(q);
    CHECK(be->sdpa_supports(be, idx, &a));
    ts_tensor *ws = device_bytes(be->sdpa_workspace(be, idx, &a, false));
    be->sdpa_forward(be, idx, &a, data_of(ws));
    tsi_kview_fill(&a.dout, g);
    tsi_kview_fill(&a.dq, f.dq), tsi_kview_fill(&a.dk, f.dk), tsi_kview_fill(&a.dv, f.dv);
    ws = device_bytes(be->sdpa_workspace(be, idx, &a, true));
    be->sdpa_backward(be, idx, &a, data_of(ws));
    CHECK_OK();
    f.tc_runs = tsc_sdpa_tc_runs() - runs0;
    tsc_sdpa_tc_force(-1);
    return f;
}

/* the float64 log-sum-exp of each row's scaled (causal: masked) scores */
static ts_tensor *reference_lse(ts_tensor *q64, ts_tensor *k64, bool causal, double scale) {
    const int nd = ts_ndim(q64);
    const int64_t L = ts_size(q64, nd - 2), S = ts_size(k64, nd - 2);
    ts_tensor *s = ts_mul_scalar(ts_matmul(q64, ts_transpose(k64, -2, -1)), scale);
    if (causal) {
        ts_tensor *cols = ts_arange(0, (double)S, 1, (ts_opts){.dtype = TS_F64});
        ts_tensor *rows = ts_unsqueeze(ts_arange(0, (double)L, 1, (ts_opts){.dtype = TS_F64}), 1);
        s = ts_masked_fill(s, ts_gt(cols, rows), -INFINITY);
    }
    return ts_logsumexp_dim(s, -1, false);
}

static void run_case(const tc_case *c, ts_dtype dt, int64_t E, bool causal) {
    char label[200];
    snprintf(label, sizeof label, "[nb %d B %lld H %lld L %lld S %lld E %lld%s%s, %s]", c->nb,
             (long long)c->B, (long long)c->H, (long long)c->L, (long long)c->S, (long long)E,
             causal ? ", causal" : "", c->strided ? ", strided" : "", ts_dtype_name(dt));
    ts_scope_begin();
    ts_tensor *q64 = rounded_input(c, c->L, E, dt), *k64 = rounded_input(c, c->S, E, dt);
    ts_tensor *v64 = rounded_input(c, c->S, E, dt), *g64 = rounded_input(c, c->L, E, dt);
    /* the reference, float64 on the cpu */
    ts_tensor *qr = ts_detach(q64), *kr = ts_detach(k64), *vr = ts_detach(v64);
    ts_set_requires_grad(qr, true), ts_set_requires_grad(kr, true), ts_set_requires_grad(vr, true);
    ts_tensor *ref = tsi_sdpa_reference(qr, kr, vr, NULL, 0, causal, 0);
    ts_backward_with(ref, g64);
    const double scale = 1 / sqrt((double)E);
    ts_tensor *lse_ref = reference_lse(q64, k64, causal, scale);
    /* both paths on the device */
    ts_tensor *q = on_device(c, q64, dt), *k = on_device(c, k64, dt), *v = on_device(c, v64, dt);
    ts_tensor *g = ts_to(ts_to_dtype(g64, dt), dev);
    fused tc = run_entries(q, k, v, g, causal, 0, 1);
    fused old = run_entries(q, k, v, g, causal, 0, 0);
    CHECK_OK();
    ts_test_record(tc.tc_runs == tc_passes && old.tc_runs == 0);
    if (tc.tc_runs != tc_passes || old.tc_runs != 0)
        ts_test_failf(__FILE__, __LINE__, "%s: tensor-core passes %lld forced on, %lld off", label,
                      tc.tc_runs, old.tc_runs);
    /* bounds */
    const double u = dt == TS_BF16 ? ldexp(1, -8) : ldexp(1, -11), f32 = ldexp(1, -24);
    sdpa_half_case hc;
    sdpa_half_measure(&hc, q64, k64, v64, g64, NULL, causal, 0, ref, ts_grad(qr), ts_grad(kr),
                      ts_grad(vr));
    hc.amx = false;
    const sdpa_half_tol tol_old = sdpa_half_tolerances(u, &hc);
    hc.amx = true; /* P and dS rounded to the dtype as operands */
    const sdpa_half_tol tol = sdpa_half_tolerances(u, &hc);
    const double A = scale * (double)E * hc.q * hc.k / sqrt((double)E);
    const double tol_lse = sdpa_arith_bound(f32, c->L, c->S, E, E, A, 1 + sdpa_max_abs(lse_ref));
    ts_tensor *want[5] = {ref, lse_ref, ts_grad(qr), ts_grad(kr), ts_grad(vr)};
    ts_tensor *got[5] = {tc.out, tc.lse, tc.dq, tc.dk, tc.dv};
    ts_tensor *got_old[5] = {old.out, old.lse, old.dq, old.dk, old.dv};
    const double tols[5] = {tol.out, tol_lse, tol.dq, tol.dk, tol.dv};
    const double tols_old[5] = {tol_old.out, tol_lse, tol_old.dq, tol_old.dk, tol_old.dv};
    static const char *what[5] = {"output", "lse", "grad query", "grad key", "grad value"};
    for (int i = 0; i < 5; i++) {
        const double rel = i == 1 ? 0 : u; /* lse is float, not rounded to the dtype */
        sdpa_close_rel(what[i], label, got[i], want[i], rel, tols[i]);
        char w[64];
        snprintf(w, sizeof w, "%s (cuda cores)", what[i]);
        sdpa_close_rel(w, label, got_old[i], want[i], rel, tols_old[i]);
        /* and the two paths against each other: within the sum of their distances from exact */
        snprintf(w, sizeof w, "%s (tensor cores vs cuda cores)", what[i]);
        sdpa_close_rel(w, label, got[i], ts_to_dtype(ts_to(got_old[i], ts_cpu()), TS_F64),
                       2.1 * rel, 1.1 * (tols[i] + tols_old[i]));
    }
    ts_scope_end();
}

static void test_against_reference(void) {
    static const int64_t LS[][2] = {{1, 1},     {15, 15},     {64, 64},  {100, 257},
                                    {257, 100}, {1024, 1024}, {1, 257},  {257, 1},
                                    {15, 1024}, {1024, 64},   {64, 100}, {100, 15}};
    static const int64_t BH[][2] = {{1, 1}, {2, 3}, {3, 2}, {1, 4}};
    const ts_dtype dts[2] = {TS_F16, TS_BF16};
    int count = 0;
    for (size_t p = 0; p < sizeof LS / sizeof LS[0]; p++)
        for (int d = 0; d < 2; d++)
            for (int e = 0; e < 2; e++)
                for (int causal = 0; causal < 2; causal++) {
                    const size_t bh = (p + (size_t)d + (size_t)e) % 4;
                    tc_case c = {2,        BH[bh][0], BH[bh][1],
                                 LS[p][0], LS[p][1],  (p + causal) % 2 == 0};
                    if (LS[p][0] * LS[p][1] >= 1024 * 64)
                        c.B = 1, c.H = 2; /* keep the host quick */
                    if (p % 5 == 3) c.nb = 1, c.strided = false;
                    if (p % 5 == 4 && e == 0) c.nb = 0, c.strided = false;
                    ts_manual_seed(1000 + (uint64_t)count++);
                    run_case(&c, dts[d], e ? 128 : 64, causal != 0);
                }
    /* more batches than a grid's y extent (65535): blocks walk the batch */
    const tc_case many = {1, 66000, 1, 3, 5, false};
    ts_manual_seed(77);
    run_case(&many, TS_F16, 64, true);
    printf("%d cases against float64 and the CUDA-core kernels\n", count + 1);
}

/* ------------------------------------------------------------------ the public API */
static double max_diff(ts_tensor *a, ts_tensor *b) {
    return ts_item(ts_max(ts_abs(
        ts_sub(ts_to_dtype(ts_to(a, ts_cpu()), TS_F64), ts_to_dtype(ts_to(b, ts_cpu()), TS_F64)))));
}

/* ts_scaled_dot_product_attention on a GPT's [B, L, H, E] layout takes the tensor cores (its output
 * a [B, L, H, E] buffer seen as [B, H, L, E]) and gives the bits of the entries called directly. */
static void test_public_api(void) {
    const ts_dtype dts[2] = {TS_F16, TS_BF16};
    for (int d = 0; d < 2; d++)
        for (int causal = 0; causal < 2; causal++) {
            ts_scope_begin();
            ts_manual_seed(500 + (uint64_t)(2 * d + causal));
            const tc_case c = {2, 2, 3, 100, 100, true};
            ts_tensor *q64 = rounded_input(&c, 100, 64, dts[d]);
            ts_tensor *k64 = rounded_input(&c, 100, 64, dts[d]);
            ts_tensor *v64 = rounded_input(&c, 100, 64, dts[d]);
            ts_tensor *g64 = rounded_input(&c, 100, 64, dts[d]);
            ts_tensor *q = ts_detach(on_device(&c, q64, dts[d]));
            ts_tensor *k = ts_detach(on_device(&c, k64, dts[d]));
            ts_tensor *v = ts_detach(on_device(&c, v64, dts[d]));
            ts_tensor *g = ts_to(ts_to_dtype(g64, dts[d]), dev);
            ts_set_requires_grad(q, true), ts_set_requires_grad(k, true);
            ts_set_requires_grad(v, true);
            tsc_sdpa_tc_force(1);
            const long long r0 = tsc_sdpa_tc_runs();
            ts_tensor *out = ts_scaled_dot_product_attention(q, k, v, NULL, 0, causal != 0, 0);
            ts_backward_with(out, g);
            const long long runs = tsc_sdpa_tc_runs() - r0;
            tsc_sdpa_tc_force(-1);
            CHECK_OK();
            CHECK_EQ(runs, tc_passes);
            const char *fn = out ? ts_grad_fn_name(out) : NULL;
            CHECK(fn && !strcmp(fn, "ScaledDotProductFlashAttentionBackward0"));
            fused f = run_entries(ts_detach(q), ts_detach(k), ts_detach(v), g, causal != 0, 0, 1);
            CHECK(max_diff(out, f.out) == 0);
            CHECK(max_diff(ts_grad(q), f.dq) == 0);
            CHECK(max_diff(ts_grad(k), f.dk) == 0);
            CHECK(max_diff(ts_grad(v), f.dv) == 0);
            ts_scope_end();
        }
}

/* ------------------------------------------------------------------ what stays on cuda cores */
/* Through the public API with the path forced on: no tensor-core pass, and the result within
 * the CUDA-core kernels' bound (cases: 0 head size 32, 1 a bool mask, 2 dropout (output only
 * checked to run), 3 float32, 4 rows of 65 elements (q misaligned), 5 Ev != E). */
static void test_fallbacks(void) {
    for (int kind = 0; kind < 6; kind++) {
        ts_scope_begin();
        ts_manual_seed(900 + (uint64_t)kind);
        const ts_dtype dt = kind == 3 ? TS_F32 : TS_F16;
        const int64_t E = kind == 0 ? 32 : 64, Ev = kind == 5 ? 128 : E, L = 70, S = 90;
        const tc_case c = {2, 2, 2, L, S, false};
        ts_tensor *q64 = rounded_input(&c, L, E, TS_F16), *k64 = rounded_input(&c, S, E, TS_F16);
        ts_tensor *v64 = rounded_input(&c, S, Ev, TS_F16), *g64 = rounded_input(&c, L, Ev, TS_F16);
        ts_tensor *m64 =
            kind == 1 ? ts_gt_scalar(ts_rand(TS_SHAPE(L, S), (ts_opts){.dtype = TS_F64}), 0.3)
                      : NULL;
        ts_tensor *qr = ts_detach(q64), *kr = ts_detach(k64), *vr = ts_detach(v64);
        ts_set_requires_grad(qr, true), ts_set_requires_grad(kr, true);
        ts_set_requires_grad(vr, true);
        ts_tensor *ref = tsi_sdpa_reference(qr, kr, vr, m64, 0, false, 0);
        ts_backward_with(ref, g64);
        ts_tensor *q = ts_to(ts_to_dtype(q64, dt), dev);
        if (kind == 4) { /* the same values at element 1 of rows of 65 */
            ts_tensor *wide =
                ts_zeros(TS_SHAPE(2, 2, L, E + 1), (ts_opts){.dtype = dt, .device = dev});
            ts_copy_(ts_narrow(wide, 3, 1, E), q);
            q = ts_narrow(wide, 3, 1, E);
        }
        q = ts_detach(q);
        ts_tensor *k = ts_detach(ts_to(ts_to_dtype(k64, dt), dev));
        ts_tensor *v = ts_detach(ts_to(ts_to_dtype(v64, dt), dev));
        ts_set_requires_grad(q, true), ts_set_requires_grad(k, true), ts_set_requires_grad(v, true);
        ts_tensor *m = m64 ? ts_to(m64, dev) : NULL;
        tsc_sdpa_tc_force(1);
        const long long r0 = tsc_sdpa_tc_runs();
        ts_tensor *out = ts_scaled_dot_product_attention(q, k, v, m, kind == 2 ? 0.2 : 0, false, 0);
        ts_backward_with(out, ts_to(ts_to_dtype(g64, dt), dev));
        const long long runs = tsc_sdpa_tc_runs() - r0;
        tsc_sdpa_tc_force(-1);
        CHECK_OK();
        ts_test_record(runs == 0);
        if (runs != 0)
            ts_test_failf(__FILE__, __LINE__, "fallback case %d took the tensor cores", kind);
        if (kind != 2) {
            char label[64];
            snprintf(label, sizeof label, "[fallback case %d]", kind);
            const double u = dt == TS_F32 ? ldexp(1, -24) : ldexp(1, -11);
            sdpa_half_case hc;
            sdpa_half_measure(&hc, q64, k64, v64, g64, m64, false, 0, ref, ts_grad(qr), ts_grad(kr),
                              ts_grad(vr));
            hc.amx = false;
            const sdpa_half_tol t = sdpa_half_tolerances(u, &hc);
            sdpa_close_rel("output", label, out, ref, u, t.out);
            sdpa_close_rel("grad query", label, ts_grad(q), ts_grad(qr), u, t.dq);
            sdpa_close_rel("grad key", label, ts_grad(k), ts_grad(kr), u, t.dk);
            sdpa_close_rel("grad value", label, ts_grad(v), ts_grad(vr), u, t.dv);
        }
        ts_scope_end();
    }
}

int main(void) {
    const char *env = getenv("TS_TEST_SDPA_TC_DEVICE");
    if (env && *env) {
        if (ts_device_parse(env, &dev) != TS_OK || !ts_device_is_available(dev))
            return ts_test_skip("TS_TEST_SDPA_TC_DEVICE=%s is not available", env);
        if (dev.type != TS_CUDA) tc_passes = 0;
    } else if (ts_cuda_is_available()) {
        dev = ts_cuda(0);
    } else {
        return ts_test_skip_no_cuda("test_sdpa_tc: the tensor-core attention is not run here");
    }
    printf("device under test: %s\n", ts_device_str(dev));
    test_against_reference();
    test_public_api();
    test_fallbacks();
    return ts_test_finish();
}
