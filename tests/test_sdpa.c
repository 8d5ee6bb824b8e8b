/* test_sdpa.c — scaled_dot_product_attention's fused kernels (flash attention: cpu and sim run the
 * same CPU kernels, under every vector ISA the host has) against the reference composition
 * (matmul, mask, softmax, dropout, matmul) evaluated in float64: outputs and the gradients of
 * query, key and value over batch layouts, masks (bool, additive, broadcast, rows with every key
 * masked), causal, L != S, head sizes that fill no vector, strided inputs; dropout draws the very
 * mask of the reference; gradcheck; results independent of the thread count; the memory an L =
 * 4096 attention needs; PyTorch's error messages. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/gemm_amx.h"
#include "backend/cpu/kern_sdpa_amx.h"
#include "backend/cpu/sdpa_select.h"
#include "nn/functional_internal.h"
#include "sdpa_half_bound.h"
#include "ts_test.h"

static ts_device devs[TS_TEST_MAX_DEVICES];
static int ndev;

/* ------------------------------------------------------------------ inputs */
typedef enum { M_NONE, M_CAUSAL, M_BOOL, M_BOOL_LS, M_ADD_KEYPAD, M_BOOL_DEAD } mask_kind;
static const char *mask_names[] = {
    "none", "causal", "bool[B..,L,S]", "bool[L,S]", "additive key padding", "bool with dead rows"};

typedef struct sdpa_case {
    int nb; /* batch dims: 0, 1 or 2 ([B, H]) */
    int64_t B, H, L, S, E, Ev;
    mask_kind mask;
    bool strided; /* q, k, v as views of [B, L, H, E] tensors (MultiheadAttention's layout) */
    double scale; /* 0: 1/sqrt(E) */
} sdpa_case;

static ts_shape qkv_shape(const sdpa_case *c, int64_t rows, int64_t cols) {
    if (c->nb == 0) return TS_SHAPE(rows, cols);
    if (c->nb == 1) return TS_SHAPE(c->B, rows, cols);
    return TS_SHAPE(c->B, c->H, rows, cols);
}

/* A float64 cpu tensor of N(0, 1) values with the case's layout. */
static ts_tensor *input(const sdpa_case *c, int64_t rows, int64_t cols) {
    if (c->strided && c->nb == 2)
        return ts_permute(ts_randn(TS_SHAPE(c->B, rows, c->H, cols), (ts_opts){.dtype = TS_F64}),
                          TS_DIMS(0, 2, 1, 3));
    return ts_randn(qkv_shape(c, rows, cols), (ts_opts){.dtype = TS_F64});
}

/* The case's mask in float64/bool on the cpu (NULL: none or causal). */
static ts_tensor *make_mask(const sdpa_case *c) {
    const int64_t L = c->L, S = c->S;
    ts_shape full = qkv_shape(c, L, S);
    switch (c->mask) {
    case M_BOOL:
        return ts_gt_scalar(ts_rand(full, (ts_opts){.dtype = TS_F64}), 0.3);
    case M_BOOL_LS:
        return ts_gt_scalar(ts_rand(TS_SHAPE(L, S), (ts_opts){.dtype = TS_F64}), 0.5);
    case M_ADD_KEYPAD: { /* [B.., 1, S]: the last third of the keys of odd batches are padding */
        ts_shape ks = qkv_shape(c, 1, S);
        ts_tensor *m = ts_zeros(ks, (ts_opts){.dtype = TS_F64});
        int64_t nbatch = ts_numel(m) / S;
        for (int64_t b = 1; b < nbatch; b += 2) {
            ts_tensor *row = ts_narrow(ts_view(m, TS_SHAPE(nbatch, S)), 0, b, 1);
            ts_fill_(ts_narrow(row, 1, S - S / 3, S / 3), -INFINITY);
        }
        ts_tensor *noise = ts_mul_scalar(ts_rand(ks, (ts_opts){.dtype = TS_F64}), 0.5);
        return ts_add(m, noise);
    }
    case M_BOOL_DEAD: { /* random, with query rows 0 and L/2 seeing no key at all */
        ts_tensor *m = ts_gt_scalar(ts_rand(full, (ts_opts){.dtype = TS_F64}), 0.2);
        ts_tensor *rows = ts_view(m, TS_SHAPE(ts_numel(m) / (L * S), L, S));
        ts_fill_(ts_select(rows, 1, 0), 0);
        ts_fill_(ts_select(rows, 1, L / 2), 0);
        return m;
    }
    default:
        return NULL;
    }
}

/* ------------------------------------------------------------------ comparison */

/* max |got - want| <= tol, reported with the case */
static void close_to(const char *what, const char *label, ts_tensor *got, ts_tensor *want,
                     double tol) {
    ts_tensor *d = got && want ? ts_sub(ts_to_dtype(ts_to(got, ts_cpu()), TS_F64), want) : NULL;
    /* positions where both are 0 from a dead row compare as 0 - 0; NaN anywhere fails */
    double err = d ? ts_item(ts_max(ts_abs(d))) : NAN;
    bool ok = err <= tol;
    ts_test_record(ok);
    if (!ok)
        ts_test_failf(__FILE__, __LINE__, "%s %s: max error %.3g > tolerance %.3g%s", label, what,
                      err, tol, ts_test_error_str());
}

/* The arithmetic's error bound in dt's unit roundoff (support/sdpa_half_bound.h) */
static double bound(ts_dtype dt, const sdpa_case *c, double A, double scale_of) {
    const double u = dt == TS_F64   ? ldexp(1, -53)
                     : dt == TS_F32 ? ldexp(1, -24)
                     : dt == TS_F16 ? ldexp(1, -11)
                                    : ldexp(1, -8);
    return sdpa_arith_bound(u, c->L, c->S, c->E, c->Ev, A, scale_of);
}

static void run_case(const sdpa_case *c, ts_dtype dt, ts_device dev) {
    char label[200];
    snprintf(label, sizeof label,
             "[nb %d B %lld H %lld L %lld S %lld E %lld Ev %lld, mask %s%s, %s, %s]", c->nb,
             (long long)c->B, (long long)c->H, (long long)c->L, (long long)c->S, (long long)c->E,
             (long long)c->Ev, mask_names[c->mask], c->strided ? ", strided" : "",
             ts_dtype_name(dt), ts_device_str(dev));
    ts_scope_begin();
    ts_tensor *q64 = input(c, c->L, c->E), *k64 = input(c, c->S, c->E);
    ts_tensor *v64 = input(c, c->S, c->Ev), *m64 = make_mask(c);
    const bool causal = c->mask == M_CAUSAL;
    /* the reference, float64 on the cpu */
    ts_tensor *qr = ts_detach(q64), *kr = ts_detach(k64), *vr = ts_detach(v64);
    ts_set_requires_grad(qr, true), ts_set_requires_grad(kr, true), ts_set_requires_grad(vr, true);
    ts_tensor *ref = tsi_sdpa_reference(qr, kr, vr, m64, 0, causal, c->scale);
    ts_tensor *gout64 = ts_randn(ts_shape_of(ref), (ts_opts){.dtype = TS_F64});
    ts_backward_with(ref, gout64);
    /* the fused kernels on dev in dt, from the same values */
    ts_tensor *q = ts_detach(ts_to(ts_to_dtype(q64, dt), dev));
    ts_tensor *k = ts_detach(ts_to(ts_to_dtype(k64, dt), dev));
    ts_tensor *v = ts_detach(ts_to(ts_to_dtype(v64, dt), dev));
    if (c->strided && c->nb == 2) { /* keep the strided layout on the device */
        q = ts_detach(
            ts_permute(ts_contiguous(ts_permute(q, TS_DIMS(0, 2, 1, 3))), TS_DIMS(0, 2, 1, 3)));
        k = ts_detach(
            ts_permute(ts_contiguous(ts_permute(k, TS_DIMS(0, 2, 1, 3))), TS_DIMS(0, 2, 1, 3)));
        v = ts_detach(
            ts_permute(ts_contiguous(ts_permute(v, TS_DIMS(0, 2, 1, 3))), TS_DIMS(0, 2, 1, 3)));
    }
    ts_set_requires_grad(q, true), ts_set_requires_grad(k, true), ts_set_requires_grad(v, true);
    ts_tensor *m = m64 ? ts_to(m64->dtype == TS_BOOL ? m64 : ts_to_dtype(m64, dt), dev) : NULL;
    ts_tensor *out = ts_scaled_dot_product_attention(q, k, v, m, 0, causal, c->scale);
    const char *fn = out ? ts_grad_fn_name(out) : NULL;
    bool fused = fn && !strcmp(fn, "ScaledDotProductFlashAttentionBackward0");
    /* the CUDA kernels take head sizes up to 128 (cuda_sdpa.cu); larger ones the composition */
    const bool want_fused = dev.type != TS_CUDA || (c->E <= 128 && c->Ev <= 128);
    if (!want_fused) fused = fn != NULL;
    ts_test_record(fused);
    if (!fused)
        ts_test_failf(__FILE__, __LINE__, "%s: not the fused kernel (grad_fn %s)%s", label,
                      fn ? fn : "none", ts_test_error_str());
    ts_backward_with(out, ts_to(ts_to_dtype(gout64, dt), dev));
    CHECK_OK();
    /* A: the largest sum of |q_e k_e| * scale over a score */
    const double scale = c->scale > 0 ? c->scale : 1 / sqrt((double)c->E);
    const double A =
        scale * (double)c->E * sdpa_max_abs(q64) * sdpa_max_abs(k64) / sqrt((double)c->E);
    close_to("output", label, out, ref, bound(dt, c, A, sdpa_max_abs(v64)));
    /* gradients are compared at their own size or, where they cancel to ~0 (one key: the
     * weights cannot move), at the size of the terms that cancel: dO v k * scale */
    const double terms = sdpa_max_abs(gout64) * sdpa_max_abs(v64) *
                         fmax(sdpa_max_abs(q64), sdpa_max_abs(k64)) * scale;
    close_to("grad query", label, ts_grad(q), ts_grad(qr),
             bound(dt, c, A, sdpa_max_abs(ts_grad(qr)) + terms));
    close_to("grad key", label, ts_grad(k), ts_grad(kr),
             bound(dt, c, A, sdpa_max_abs(ts_grad(kr)) + terms));
    close_to("grad value", label, ts_grad(v), ts_grad(vr),
             bound(dt, c, A, sdpa_max_abs(ts_grad(vr)) + sdpa_max_abs(gout64)));
    ts_scope_end();
}

static ts_tensor *rounded64(ts_tensor *t, ts_dtype dt) {
    return t ? ts_to_dtype(ts_to_dtype(t, dt), TS_F64) : NULL;
}

/* The cpu kernels compute f16 / bf16 attention in float32 on the widened elements and round each
 * output and gradient element once: against float64 on the very same (rounded) inputs, every
 * element is within one rounding of its exact value (the unit roundoff: 2^-8 relative for bf16,
 * 2^-11 for f16) plus the float32 arithmetic's bound, but for one more term in the gradients of
 * query and key: backward takes D_i = sum_e dO_ie out_ie from the saved, rounded output (as every
 * flash attention does), |dD_i| <= u sum_e |dO_ie| |out_ie|, and dq_i = scale sum_j P_ij (dP_ij -
 * D_i) k_j moves by at most scale |dD| max|k| (the weights sum to 1), dk_j by scale max|dD|
 * max|q| sum_i P_ij (the sums measured on the float64 reference: support/sdpa_half_bound.c).
 * Planted: the weights' or a packed operand's values off by 0.2%, dv rounded twice, a column of
 * dk lost: all far past the bound; D off by 1% fails (32 checks) and by 0.3% (10); before the
 * bounds took the measured sums (u Ev max|dO| max|v| and L in place of the column sum), D off
 * by 1% passed.
 * On a host with AMX, bf16 attention of up to amx_max_scores scores (sdpa_select.c) takes the tiles
 * (kern_sdpa_amx.c), which also round the weights P and dS to bf16 as operands of their
 * products: support/sdpa_half_bound.h has the bounds of both paths. */
static void run_half_case(const sdpa_case *c, ts_dtype dt, ts_device dev) {
    char label[200];
    snprintf(label, sizeof label, "[half: L %lld S %lld E %lld Ev %lld, mask %s, %s, %s]",
             (long long)c->L, (long long)c->S, (long long)c->E, (long long)c->Ev,
             mask_names[c->mask], ts_dtype_name(dt), ts_device_str(dev));
    ts_scope_begin();
    ts_tensor *q64 = rounded64(input(c, c->L, c->E), dt),
              *k64 = rounded64(input(c, c->S, c->E), dt);
    ts_tensor *v64 = rounded64(input(c, c->S, c->Ev), dt), *m64 = make_mask(c);
    if (m64 && m64->dtype != TS_BOOL) m64 = rounded64(m64, dt);
    const bool causal = c->mask == M_CAUSAL;
    ts_tensor *qr = ts_detach(q64), *kr = ts_detach(k64), *vr = ts_detach(v64);
    ts_set_requires_grad(qr, true), ts_set_requires_grad(kr, true), ts_set_requires_grad(vr, true);
    ts_tensor *ref = tsi_sdpa_reference(qr, kr, vr, m64, 0, causal, c->scale);
    ts_tensor *g64 = rounded64(ts_randn(ts_shape_of(ref), (ts_opts){.dtype = TS_F64}), dt);
    ts_backward_with(ref, g64);
    ts_tensor *q = ts_detach(ts_to(ts_to_dtype(q64, dt), dev));
    ts_tensor *k = ts_detach(ts_to(ts_to_dtype(k64, dt), dev));
    ts_tensor *v = ts_detach(ts_to(ts_to_dtype(v64, dt), dev));
    ts_set_requires_grad(q, true), ts_set_requires_grad(k, true), ts_set_requires_grad(v, true);
    ts_tensor *m = m64 ? ts_to(m64->dtype == TS_BOOL ? m64 : ts_to_dtype(m64, dt), dev) : NULL;
    ts_tensor *out = ts_scaled_dot_product_attention(q, k, v, m, 0, causal, c->scale);
    ts_backward_with(out, ts_to(ts_to_dtype(g64, dt), dev));
    CHECK_OK();
    const double u = dt == TS_BF16 ? ldexp(1, -8) : ldexp(1, -11); /* unit roundoff */
    sdpa_half_case hc;
    sdpa_half_measure(&hc, q64, k64, v64, g64, m64, causal, c->scale, ref, ts_grad(qr), ts_grad(kr),
                      ts_grad(vr));
    hc.amx = dt == TS_BF16 && tsi_amx_gemm_ready() &&
             c->L * c->S <= tsi_sdpa_limits_get()->amx_max_scores;
    const sdpa_half_tol tol = sdpa_half_tolerances(u, &hc);
    sdpa_close_rel("output", label, out, ref, u, tol.out);
    sdpa_close_rel("grad query", label, ts_grad(q), ts_grad(qr), u, tol.dq);
    sdpa_close_rel("grad key", label, ts_grad(k), ts_grad(kr), u, tol.dk);
    sdpa_close_rel("grad value", label, ts_grad(v), ts_grad(vr), u, tol.dv);
    ts_scope_end();
}

static void test_against_reference(void) {
    static const sdpa_case cases[] = {
        {2, 2, 3, 64, 64, 64, 64, M_NONE, false, 0},
        {2, 2, 3, 64, 64, 64, 64, M_CAUSAL, true, 0},
        {2, 1, 2, 130, 77, 40, 24, M_NONE, false, 0.3},
        {2, 1, 2, 77, 130, 40, 24, M_CAUSAL, false, 0},
        {2, 1, 2, 130, 77, 40, 24, M_CAUSAL, false, 0},
        {2, 2, 2, 65, 97, 16, 16, M_BOOL, false, 0},
        {1, 3, 1, 50, 70, 8, 33, M_BOOL_LS, false, 0},
        {2, 2, 2, 40, 96, 32, 32, M_ADD_KEYPAD, true, 0},
        {2, 2, 2, 33, 33, 17, 9, M_BOOL_DEAD, false, 0},
        {0, 1, 1, 1, 1, 1, 1, M_NONE, false, 0},
        {0, 1, 1, 5, 3, 2, 130, M_CAUSAL, false, 0},
        {1, 2, 1, 200, 1, 5, 5, M_NONE, false, 0},
        {2, 1, 1, 129, 129, 128, 128, M_CAUSAL, false, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (int d = 0; d < ndev; d++) {
            ts_manual_seed(100 + i);
            run_case(&cases[i], TS_F64, devs[d]);
            ts_manual_seed(100 + i);
            run_case(&cases[i], TS_F32, devs[d]);
            /* the kernels also take f16 and bf16 (computing in float) */
            ts_manual_seed(100 + i);
            run_case(&cases[i], TS_F16, devs[d]);
            ts_manual_seed(100 + i);
            run_case(&cases[i], TS_BF16, devs[d]);
            if (devs[d].type == TS_CUDA) continue;
            ts_manual_seed(200 + i);
            run_half_case(&cases[i], TS_BF16, devs[d]);
            ts_manual_seed(200 + i);
            run_half_case(&cases[i], TS_F16, devs[d]);
        }
}

/* ------------------------------------------------------------------ dropout */
/* The fused kernels draw the weights' dropout mask from the counters the reference's ts_dropout
 * would use, so from one generator state both give the same output and gradients, and leave the
 * generator at the same place. */
static void test_dropout(void) {
    for (int d = 0; d < ndev; d++) {
        ts_scope_begin();
        ts_manual_seed(7);
        ts_tensor *q = ts_randn(TS_SHAPE(2, 2, 70, 24), (ts_opts){.dtype = TS_F64});
        ts_tensor *k = ts_randn(TS_SHAPE(2, 2, 90, 24), (ts_opts){.dtype = TS_F64});
        ts_tensor *v = ts_randn(TS_SHAPE(2, 2, 90, 20), (ts_opts){.dtype = TS_F64});
        ts_tensor *g = ts_randn(TS_SHAPE(2, 2, 70, 20), (ts_opts){.dtype = TS_F64});
        ts_tensor *r[2][4], *after[2];
        for (int fused = 0; fused < 2; fused++) {
            ts_device dev = fused ? devs[d] : ts_cpu();
            ts_tensor *qq = ts_detach(ts_to(q, dev)), *kk = ts_detach(ts_to(k, dev));
            ts_tensor *vv = ts_detach(ts_to(v, dev));
            ts_set_requires_grad(qq, true), ts_set_requires_grad(kk, true);
            ts_set_requires_grad(vv, true);
            ts_manual_seed(99);
            ts_tensor *o = fused ? ts_scaled_dot_product_attention(qq, kk, vv, NULL, 0.3, false, 0)
                                 : tsi_sdpa_reference(qq, kk, vv, NULL, 0.3, false, 0);
            after[fused] = ts_rand(TS_SHAPE(4), (ts_opts){.dtype = TS_F64});
            ts_backward_with(o, ts_to(g, dev));
            r[fused][0] = o, r[fused][1] = ts_grad(qq), r[fused][2] = ts_grad(kk);
            r[fused][3] = ts_grad(vv);
        }
        CHECK_OK();
        const char *what[4] = {"dropout output", "dropout grad query", "dropout grad key",
                               "dropout grad value"};
        for (int i = 0; i < 4; i++)
            close_to(what[i], ts_device_str(devs[d]), r[1][i], r[0][i],
                     1e-12 * sdpa_max_abs(r[0][i]));
        close_to("generator after dropout", ts_device_str(devs[d]), after[1], after[0], 0);
        /* and the mask is not all-or-nothing: some weights dropped, output differs from p = 0 */
        ts_tensor *o0 = ts_scaled_dot_product_attention(q, k, v, NULL, 0, false, 0);
        CHECK(ts_item(ts_max(ts_abs(ts_sub(o0, ts_to(r[1][0], ts_cpu()))))) > 0.01);
        ts_scope_end();
    }
}

/* ------------------------------------------------------------------ gradcheck */
typedef struct gc_ctx {
    ts_tensor *mask;
    bool causal;
    double p;
} gc_ctx;

static ts_tensor *sdpa_fn(ts_tensor *const *in, int n, void *ctx) {
    gc_ctx *c = ctx;
    (void)n;
    if (c->p > 0) ts_manual_seed(5); /* the same dropout mask on every evaluation */
    return ts_scaled_dot_product_attention(in[0], in[1], in[2], c->mask, c->p, c->causal, 0);
}

static void test_gradcheck(void) {
    for (int d = 0; d < ndev; d++) {
        ts_device dev = devs[d];
        for (int kind = 0; kind < 4; kind++) {
            ts_scope_begin();
            ts_manual_seed(11 + kind);
            ts_opts o = {.dtype = TS_F64, .device = dev, .requires_grad = true};
            ts_tensor *in[3] = {ts_randn(TS_SHAPE(2, 5, 3), o), ts_randn(TS_SHAPE(2, 7, 3), o),
                                ts_randn(TS_SHAPE(2, 7, 4), o)};
            gc_ctx c = {.causal = kind == 1, .p = kind == 3 ? 0.4 : 0};
            if (kind == 2) { /* additive, with one query row seeing nothing */
                c.mask = ts_randn(TS_SHAPE(5, 7), (ts_opts){.dtype = TS_F64, .device = dev});
                ts_fill_(ts_select(c.mask, 0, 3), -INFINITY);
            }
            bool ok = ts_gradcheck(sdpa_fn, &c, in, 3, (ts_gradcheck_opts){0});
            ts_test_record(ok);
            if (!ok) {
                ts_test_failf(__FILE__, __LINE__, "gradcheck sdpa kind %d on %s failed%s", kind,
                              ts_device_str(dev), ts_test_error_str());
                ts_error_clear();
            }
            ts_scope_end();
        }
    }
}

/* ------------------------------------------------------------------ threads, memory, errors */
static void test_thread_independence(void) {
    ts_scope_begin();
    ts_manual_seed(3);
    ts_tensor *q = ts_randn(TS_SHAPE(2, 1, 300, 64), (ts_opts){.requires_grad = true});
    ts_tensor *k = ts_randn(TS_SHAPE(2, 1, 300, 64), (ts_opts){.requires_grad = true});
    ts_tensor *v = ts_randn(TS_SHAPE(2, 1, 300, 64), (ts_opts){.requires_grad = true});
    const int saved = ts_get_num_threads();
    float res[2][4][2 * 300 * 64];
    for (int t = 0; t < 2; t++) {
        ts_set_num_threads(t + 1);
        ts_tensor *o = ts_scaled_dot_product_attention(q, k, v, NULL, 0, true, 0);
        ts_backward_with(o, ts_ones_like(o));
        ts_tensor *r[4] = {o, ts_grad(q), ts_grad(k), ts_grad(v)};
        for (int i = 0; i < 4; i++)
            CHECK(ts_copy_to_host(r[i], res[t][i], sizeof res[t][i]) == TS_OK);
        ts_set_grad(q, NULL), ts_set_grad(k, NULL), ts_set_grad(v, NULL);
    }
    ts_set_num_threads(saved);
    for (int i = 0; i < 4; i++) CHECK(!memcmp(res[0][i], res[1][i], sizeof res[0][i]));
    ts_scope_end();
}

/* Forward and backward at L = 4096, head size 64: the fused kernels' extra memory stays under a
 * quarter of one L x L float32 matrix (the reference composition would need several). */
static void test_memory(void) {
    const int64_t L = 4096, E = 64;
    ts_scope_begin();
    ts_manual_seed(4);
    ts_tensor *q = ts_randn(TS_SHAPE(1, 1, L, E), (ts_opts){.requires_grad = true});
    ts_tensor *k = ts_randn(TS_SHAPE(1, 1, L, E), (ts_opts){.requires_grad = true});
    ts_tensor *v = ts_randn(TS_SHAPE(1, 1, L, E), (ts_opts){.requires_grad = true});
    ts_tensor *g = ts_randn(TS_SHAPE(1, 1, L, E), (ts_opts){0});
    ts_mem_stats before, after;
    CHECK(ts_memory_stats(ts_cpu(), &before) == TS_OK);
    CHECK(ts_memory_reset_peak(ts_cpu()) == TS_OK);
    ts_tensor *o = ts_scaled_dot_product_attention(q, k, v, NULL, 0, true, 0);
    ts_backward_with(o, g);
    CHECK_OK();
    CHECK(ts_memory_stats(ts_cpu(), &after) == TS_OK);
    const double extra = (double)after.peak_allocated - (double)before.allocated;
    const double limit = (double)(L * L * 4) / 4;
    printf("L = %lld attention forward + backward: %.1f MiB extra peak (limit %.1f MiB)\n",
           (long long)L, extra / 1048576, limit / 1048576);
    CHECK(extra < limit);
    CHECK(ts_grad(q) && ts_grad(k) && ts_grad(v));
    ts_scope_end();
}

static void test_errors(void) {
    ts_scope_begin();
    ts_tensor *q = ts_randn(TS_SHAPE(2, 4, 8), (ts_opts){0});
    ts_tensor *k = ts_randn(TS_SHAPE(2, 5, 8), (ts_opts){0});
    ts_tensor *v = ts_randn(TS_SHAPE(2, 5, 6), (ts_opts){0});
    ts_tensor *bad = ts_randn(TS_SHAPE(2, 5, 7), (ts_opts){0});
    CHECK(!ts_scaled_dot_product_attention(q, bad, v, NULL, 0, false, 0));
    CHECK(strstr(ts_error_message(), "query [2, 4, 8], key [2, 5, 7] and value [2, 5, 6]"));
    CHECK_ERR(TS_ERR_SHAPE);
    ts_tensor *m = ts_ones(TS_SHAPE(4, 5), (ts_opts){.dtype = TS_BOOL});
    CHECK(!ts_scaled_dot_product_attention(q, k, v, m, 0, true, 0));
    CHECK(strstr(ts_error_message(), "Explicit attn_mask should not be set when is_causal=True"));
    CHECK_ERR(TS_ERR_ARG);
    CHECK(!ts_scaled_dot_product_attention(q, ts_to_dtype(k, TS_F64), v, NULL, 0, false, 0));
    CHECK(strstr(ts_error_message(), "key.dtype: float64"));
    CHECK_ERR(TS_ERR_DTYPE);
    ts_tensor *qs = ts_to(q, ts_sim(0));
    CHECK(!ts_scaled_dot_product_attention(qs, k, v, NULL, 0, false, 0));
    CHECK(strstr(ts_error_message(), "sim:0 and cpu"));
    CHECK_ERR(TS_ERR_DEVICE);
    CHECK(!ts_scaled_dot_product_attention(q, k, v, ts_ones(TS_SHAPE(3, 5), (ts_opts){0}), 0, false,
                                           0));
    CHECK_ERR(TS_ERR_SHAPE);
    CHECK(!ts_scaled_dot_product_attention(q, k, v, NULL, 1.5, false, 0));
    CHECK_ERR(TS_ERR_ARG);
    ts_scope_end();
}

int main(void) {
    if (ts_test_isa_gate()) return 77;
    ndev = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    test_against_reference();
    test_dropout();
    test_gradcheck();
    test_thread_independence();
    test_memory();
    test_errors();
    return ts_test_finish();
}
