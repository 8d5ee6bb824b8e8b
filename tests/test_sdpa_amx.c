/* test_sdpa_amx.c — bf16 attention on AMX tiles (src/backend/cpu/kern_sdpa_amx.c) on any host
 * with AVX-512: the path and gemm_amx.c under it are compiled here with TS_AMX_EMULATED (the tile
 * instructions as tests/support/amx_emulator.h), so its block products, causal blocks, masks,
 * dead rows, strided batches and edges run as on the tiles. On an AMX host test_sdpa runs the
 * library's own path on the tiles with the same bounds.
 *
 * Forward (out, lse) and backward (dq, dk, dv) against the float64 reference on the same bf16
 * inputs, within support/sdpa_half_bound.h's AMX bounds; lse against log sum e^(scores); 1 and 2
 * threads bit for bit; tsi_sdpa_amx_takes' choice (bf16 only, no dropout, L x S within
 * sdpa_select.c's amx_max_scores). */
#define _DEFAULT_SOURCE /* setenv */
#include "amx_emulated_names.h"
#include "backend/cpu/gemm_amx.c"
#include "backend/cpu/kern_sdpa_amx.c"
#include "backend/env_config.h"

#include <stdio.h>
#include <stdlib.h>

#include "core/internal.h"
#include "nn/functional_internal.h"
#include "sdpa_half_bound.h"
#include "ts_test.h"

#ifndef TS_AMX
int main(void) { return ts_test_skip("gemm_amx.c needs x86-64 Linux and GCC 11 or clang 12"); }
#else

typedef enum { M_NONE, M_CAUSAL, M_BOOL_DEAD, M_ADD } mask_kind;
static const char *mask_names[] = {"none", "causal", "bool with dead rows", "additive"};

typedef struct amx_case {
    int64_t B, H, L, S, E, Ev;
    mask_kind mask;
    bool strided; /* q, k, v, dO as views of [B, L, H, E] tensors (MultiheadAttention's) */
    double scale; /* 0: 1/sqrt(E) */
} amx_case;

/* float64 values that bf16 holds exactly: N(0, 1) rounded */
static ts_tensor *rounded(ts_shape s, bool strided) {
    if (strided) {
        ts_shape t = TS_SHAPE(s.dims[0], s.dims[2], s.dims[1], s.dims[3]);
        return ts_permute(
            ts_to_dtype(ts_to_dtype(ts_randn(t, (ts_opts){.dtype = TS_F64}), TS_BF16), TS_F64),
            TS_DIMS(0, 2, 1, 3));
    }
    return ts_to_dtype(ts_to_dtype(ts_randn(s, (ts_opts){.dtype = TS_F64}), TS_BF16), TS_F64);
}

/* the same values in bf16, in the same layout */
static ts_tensor *as_bf16(ts_tensor *t, bool strided) {
    if (!strided) return ts_contiguous(ts_to_dtype(t, TS_BF16));
    return ts_permute(ts_contiguous(ts_permute(ts_to_dtype(t, TS_BF16), TS_DIMS(0, 2, 1, 3))),
                      TS_DIMS(0, 2, 1, 3));
}

static ts_tensor *make_mask(const amx_case *c) {
    ts_shape full = TS_SHAPE(c->B, c->H, c->L, c->S);
    if (c->mask == M_BOOL_DEAD) { /* random, query rows 0 and L/2 seeing no key */
        ts_tensor *m = ts_gt_scalar(ts_rand(full, (ts_opts){.dtype = TS_F64}), 0.2);
        ts_tensor *rows = ts_view(m, TS_SHAPE(c->B * c->H, c->L, c->S));
        ts_fill_(ts_select(rows, 1, 0), 0);
        ts_fill_(ts_select(rows, 1, c->L / 2), 0);
        return m;
    }
    if (c->mask == M_ADD) /* [L, S], broadcast over the batches, in bf16's values */
        return ts_to_dtype(
            ts_to_dtype(
                ts_mul_scalar(ts_randn(TS_SHAPE(c->L, c->S), (ts_opts){.dtype = TS_F64}), 2.0),
                TS_BF16),
            TS_F64);
    return NULL;
}

typedef struct amx_results {
    ts_tensor *out, *lse, *dq, *dk, *dv;
} amx_results;

static ts_tensor *empty(ts_shape s, ts_dtype dt) { return ts_zeros(s, (ts_opts){.dtype = dt}); }

/* the emulated path on bf16 q, k, v, mask (bf16 values or bool) and dO, with `threads` threads */
static amx_results run_path(const amx_case *c, ts_tensor *q, ts_tensor *k, ts_tensor *v,
                            ts_tensor *mask, ts_tensor *g, int threads) {
    amx_results r;
    r.out = empty(TS_SHAPE(c->B, c->H, c->L, c->Ev), TS_BF16);
    r.lse = empty(TS_SHAPE(c->B, c->H, c->L), TS_F32);
    r.dq = empty(ts_shape_of(q), TS_BF16);
    r.dk = empty(ts_shape_of(k), TS_BF16);
    r.dv = empty(ts_shape_of(v), TS_BF16);
    ts_sdpa_args a = {.causal = c->mask == M_CAUSAL, .threads = threads};
    a.scale = c->scale > 0 ? c->scale : 1 / sqrt((double)c->E);
    tsi_kview_fill(&a.q, q), tsi_kview_fill(&a.k, k), tsi_kview_fill(&a.v, v);
    tsi_kview_fill(&a.out, r.out), tsi_kview_fill(&a.lse, r.lse), tsi_kview_fill(&a.dout, g);
    tsi_kview_fill(&a.dq, r.dq), tsi_kview_fill(&a.dk, r.dk), tsi_kview_fill(&a.dv, r.dv);
    if (mask) {
        ts_shape ms = TS_SHAPE(c->B, c->H, c->L, c->S);
        tsi_kview_fill_broadcast(&a.mask, mask, &ms);
        a.has_mask = true;
    }
    const bool takes = tsi_sdpa_amx_takes(&a);
    ts_test_record(takes);
    if (!takes) ts_test_failf(__FILE__, __LINE__, "the AMX path declines a bf16 case");
    for (int bwd = 0; bwd < 2; bwd++) {
        const size_t bytes = tsi_sdpa_amx_workspace(&a, threads, bwd);
        void *ws = aligned_alloc(64, (bytes + 63) & ~(size_t)63);
        if (bwd)
            tsi_sdpa_amx_backward(&a, ws);
        else
            tsi_sdpa_amx_forward(&a, ws);
        free(ws);
    }
    return r;
}

/* a contiguous copy of t's elements on the host (malloc'ed) */
static void *host(ts_tensor *t, size_t *bytes) {
    ts_tensor *c = ts_contiguous(t);
    *bytes = (size_t)ts_numel(c) * ts_dtype_size(c->dtype);
    void *p = malloc(*bytes);
    ts_copy_to_host(c, p, *bytes);
    return p;
}

static bool same_bits(ts_tensor *a, ts_tensor *b) {
    size_t na, nb;
    void *pa = host(a, &na), *pb = host(b, &nb);
    const bool same = na == nb && memcmp(pa, pb, na) == 0;
    free(pa), free(pb);
    return same;
}

/* lse = log sum_j e^(scale q k_j (+ mask)) over the keys a query sees, in float64 on the host;
 * +inf for a row that sees none. The kernel's scores are float32 dot products of exact
 * products (within E 2^-24 of their |terms|), its sum and log float32. */
static void check_lse(const amx_case *c, const char *label, ts_tensor *q64, ts_tensor *k64,
                      ts_tensor *m64, double scale, ts_tensor *lse) {
    size_t bq, bk, bm = 0, bl;
    double *q = host(q64, &bq), *k = host(k64, &bk);
    void *m = m64 ? host(ts_expand(m64, TS_SHAPE(c->B, c->H, c->L, c->S)), &bm) : NULL;
    float *got = host(lse, &bl);
    const double tol_s =
        4 * ldexp(1, -24) * ((double)c->E * sdpa_max_abs(q64) * sdpa_max_abs(k64) * scale);
    bool ok = true;
    double worst = 0;
    for (int64_t n = 0; n < c->B * c->H; n++)
        for (int64_t i = 0; i < c->L; i++) {
            double mx = -INFINITY, sum = 0, row[512];
            for (int64_t j = 0; j < c->S && j < 512; j++) {
                double x = 0;
                for (int64_t e = 0; e < c->E; e++)
                    x += q[(n * c->L + i) * c->E + e] * k[(n * c->S + j) * c->E + e];
                x *= scale;
                const int64_t mi = (n * c->L + i) * c->S + j;
                if (m64 && m64->dtype == TS_BOOL && !((const bool *)m)[mi]) x = -INFINITY;
                if (m64 && m64->dtype != TS_BOOL) x += ((const double *)m)[mi];
                if (c->mask == M_CAUSAL && j > i) x = -INFINITY;
                row[j] = x;
                mx = fmax(mx, x);
            }
            for (int64_t j = 0; j < c->S; j++) sum += mx > -INFINITY ? exp(row[j] - mx) : 0;
            const double want = sum > 0 ? mx + log(sum) : INFINITY;
            const double have = got[n * c->L + i];
            if (isinf(want) || isinf(have)) {
                ok = ok && want == have;
                continue;
            }
            /* each score within tol_s; the float32 sum of S terms and the log's rounding */
            const double err = fabs(have - want),
                         tol = tol_s + ldexp(1, -23) * ((double)c->S + fabs(want));
            worst = fmax(worst, err / tol);
            ok = ok && err <= tol;
        }
    ts_test_record(ok);
    if (!ok) ts_test_failf(__FILE__, __LINE__, "%s lse: off by %.3g of the bound", label, worst);
    free(q), free(k), free(m), free(got);
}

static void run_case(const amx_case *c) {
    char label[160];
    snprintf(label, sizeof label, "[B %lld H %lld L %lld S %lld E %lld Ev %lld, mask %s%s]",
             (long long)c->B, (long long)c->H, (long long)c->L, (long long)c->S, (long long)c->E,
             (long long)c->Ev, mask_names[c->mask], c->strided ? ", strided" : "");
    ts_scope_begin();
    ts_tensor *q64 = rounded(TS_SHAPE(c->B, c->H, c->L, c->E), c->strided);
    ts_tensor *k64 = rounded(TS_SHAPE(c->B, c->H, c->S, c->E), c->strided);
    ts_tensor *v64 = rounded(TS_SHAPE(c->B, c->H, c->S, c->Ev), c->strided);
    ts_tensor *g64 = rounded(TS_SHAPE(c->B, c->H, c->L, c->Ev), c->strided);
    ts_tensor *m64 = make_mask(c);
    const bool causal = c->mask == M_CAUSAL;
    ts_tensor *qr = ts_detach(q64), *kr = ts_detach(k64), *vr = ts_detach(v64);
    ts_set_requires_grad(qr, true), ts_set_requires_grad(kr, true), ts_set_requires_grad(vr, true);
    ts_tensor *ref = tsi_sdpa_reference(qr, kr, vr, m64, 0, causal, c->scale);
    ts_backward_with(ref, g64);
    ts_tensor *mask = m64 && m64->dtype != TS_BOOL ? ts_to_dtype(m64, TS_BF16) : m64;
    ts_tensor *q = as_bf16(q64, c->strided), *k = as_bf16(k64, c->strided);
    ts_tensor *v = as_bf16(v64, c->strided), *g = as_bf16(g64, c->strided);
    amx_results r = run_path(c, q, k, v, mask, g, 1);
    CHECK_OK();
    const double u = ldexp(1, -8);
    sdpa_half_case hc;
    sdpa_half_measure(&hc, q64, k64, v64, g64, m64, causal, c->scale, ref, ts_grad(qr), ts_grad(kr),
                      ts_grad(vr));
    hc.amx = true;
    const sdpa_half_tol tol = sdpa_half_tolerances(u, &hc);
    sdpa_close_rel("output", label, r.out, ref, u, tol.out);
    sdpa_close_rel("grad query", label, r.dq, ts_grad(qr), u, tol.dq);
    sdpa_close_rel("grad key", label, r.dk, ts_grad(kr), u, tol.dk);
    sdpa_close_rel("grad value", label, r.dv, ts_grad(vr), u, tol.dv);
    check_lse(c, label, q64, k64, m64, hc.scale, r.lse);
    /* two threads: the same bits */
    amx_results r2 = run_path(c, q, k, v, mask, g, 2);
    const bool same = same_bits(r.out, r2.out) && same_bits(r.lse, r2.lse) &&
                      same_bits(r.dq, r2.dq) && same_bits(r.dk, r2.dk) && same_bits(r.dv, r2.dv);
    ts_test_record(same);
    if (!same) ts_test_failf(__FILE__, __LINE__, "%s: 2 threads give other bits", label);
    ts_scope_end();
}

/* which calls take the path */
static void test_takes(void) {
    ts_scope_begin();
    ts_tensor *q = ts_zeros(TS_SHAPE(2, 64, 32), (ts_opts){.dtype = TS_BF16});
    ts_sdpa_args a = {.scale = 1};
    tsi_kview_fill(&a.q, q), tsi_kview_fill(&a.k, q), tsi_kview_fill(&a.v, q);
    CHECK(tsi_sdpa_amx_takes(&a));
    a.dropout_p = 0.1;
    CHECK(!tsi_sdpa_amx_takes(&a));
    a.dropout_p = 0;
    ts_tensor *f = ts_zeros(TS_SHAPE(2, 64, 32), (ts_opts){.dtype = TS_F32});
    tsi_kview_fill(&a.q, f);
    CHECK(!tsi_sdpa_amx_takes(&a));
    /* L x S just past the limit, and at it */
    const int64_t max_scores = tsi_sdpa_limits_get()->amx_max_scores;
    ts_tensor *lq = ts_zeros(TS_SHAPE(1, max_scores / 256 + 1, 8), (ts_opts){.dtype = TS_BF16});
    ts_tensor *lk = ts_zeros(TS_SHAPE(1, 256, 8), (ts_opts){.dtype = TS_BF16});
    tsi_kview_fill(&a.q, lq), tsi_kview_fill(&a.k, lk), tsi_kview_fill(&a.v, lk);
    CHECK(!tsi_sdpa_amx_takes(&a));
    tsi_kview_fill(&a.q, ts_narrow(lq, 1, 0, max_scores / 256));
    CHECK(tsi_sdpa_amx_takes(&a));
    ts_scope_end();
}

int main(void) {
    tsi_init_once();
    if (!getenv("TS_AMX_GEMM")) setenv("TS_AMX_GEMM", "all", 1);
    tsi_env_reload(TSI_ENV_AMX_GEMM); /* the library read its environment at start-up */
    if (!tsi_amx_emu_gemm_ready())
        return ts_test_skip("the emulated tiles need AVX-512 and no cap below it");
    test_takes();
    static const amx_case cases[] = {
        {2, 2, 64, 64, 64, 64, M_NONE, false, 0},    {2, 2, 64, 64, 64, 64, M_CAUSAL, true, 0},
        {1, 2, 130, 77, 40, 24, M_NONE, false, 0.3}, {1, 2, 77, 130, 40, 24, M_CAUSAL, false, 0},
        {1, 2, 130, 77, 40, 24, M_CAUSAL, true, 0},  {2, 1, 33, 97, 17, 9, M_BOOL_DEAD, false, 0},
        {1, 3, 50, 70, 8, 33, M_ADD, false, 0},      {1, 1, 1, 1, 1, 1, M_NONE, false, 0},
        {1, 1, 200, 1, 5, 5, M_CAUSAL, false, 0},    {1, 2, 256, 256, 64, 64, M_CAUSAL, true, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ts_manual_seed(300 + i);
        run_case(&cases[i]);
    }
    return ts_test_finish();
}
#endif
