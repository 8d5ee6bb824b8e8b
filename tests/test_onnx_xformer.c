/* test_onnx_xformer.c — the transformer rewrites of ts_onnx_opts.optimize
 * (src/onnx/rewrite_xformer.c) on small models packed with protobuf-c (tests/onnx_support/
 * xformer_models.h): GELU's erf form in the orderings exporters write, MatMul + Add / Gemm / a bare
 * MatMul with initializer weights, attention as torch.onnx writes it (scales from the query's
 * shape, the causal mask built from Shape / Trilu / Where) and as Tessera's exporter writes it
 * (constant scale and mask), the head split, and the forms that must be left alone (an
 * intermediate with a second reader, constants that are not GELU's, inputs that are not
 * initializers) or must keep their mask (a mask that is not causal). Each model runs optimized and
 * plain on cpu and sim:0, twice (the second from the shape memo), against a float64 reference
 * computed here, within a bound from the float32 arithmetic; the node count falls by what was
 * rewritten. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ts_test.h"

#ifndef TS_HAVE_ONNX
int main(void) { return ts_test_skip("this build has no ONNX support (protobuf-c not found)"); }
#else
#include "onnx/onnx_internal.h"
#include "xformer_models.h"

/* ------------------------------------------------------------------ the cases */

static bool same_shape(ts_shape a, ts_shape b) {
    bool same = a.ndim == b.ndim;
    for (int d = 0; same && d < a.ndim; d++) same = a.dims[d] == b.dims[d];
    return same;
}

/* A case: the model built by `build`, inputs made by the case, the float64 reference and bound
 * of each output element. Runs plain and optimized on each device, twice (the memo's second run).
 */
typedef struct xcase {
    const char *name;
    int n_in;
    ts_shape in_shape[4];
    float *in_vals[4];
    int64_t n_out;
    double *want, *tol;
    ts_shape out_shape; /* the output's shape (ndim 0: not checked) */
    int fused;          /* fused nodes the optimized model has (of fused_type) */
    int removed;        /* nodes fewer than the plain model */
    const char *fused_type;
} xcase;

static void run_case(const xcase *c) {
    ts_device devs[TS_TEST_MAX_DEVICES];
    int nd = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    ts_module *plain = load(false), *opt = load(true);
    CHECK(plain && opt);
    if (!plain || !opt) {
        printf("  %s: %s\n", c->name, ts_error_message());
        ts_error_clear();
        ts_module_free(plain), ts_module_free(opt);
        return;
    }
    const int fused = nodes_of(opt, c->fused_type),
              removed = nodes_of(plain, NULL) - nodes_of(opt, NULL);
    CHECK_EQ(fused, c->fused);
    CHECK_EQ(removed, c->removed);
    printf("  %-34s %3d -> %3d nodes, %d %s\n", c->name, nodes_of(plain, NULL), nodes_of(opt, NULL),
           fused, c->fused_type);
    for (int d = 0; d < nd; d++) {
        ts_module_to(plain, devs[d]);
        ts_module_to(opt, devs[d]);
        for (int rep = 0; rep < 2; rep++) { /* the second in inference mode, from the memo */
            if (rep) ts_no_grad_begin();
            ts_scope_begin();
            ts_tensor *in[4];
            for (int i = 0; i < c->n_in; i++)
                in[i] = host_tensor(c->in_shape[i], c->in_vals[i], devs[d]);
            char what[160];
            snprintf(what, sizeof what, "%s plain on %s, run %d", c->name, ts_device_str(devs[d]),
                     rep);
            check_close(what, run(plain, c->n_in, in), c->want, c->tol, c->n_out);
            snprintf(what, sizeof what, "%s optimized on %s, run %d", c->name,
                     ts_device_str(devs[d]), rep);
            ts_tensor *y = run(opt, c->n_in, in);
            check_close(what, y, c->want, c->tol, c->n_out);
            if (c->out_shape.ndim) CHECK(y && same_shape(ts_shape_of(y), c->out_shape));
            ts_error_clear();
            ts_scope_end();
            if (rep) ts_no_grad_end();
        }
    }
    ts_module_free(plain);
    ts_module_free(opt);
}

/* ------------------------------------------------------------------ GELU */
static void test_gelu(void) {
    printf("GELU\n");
    const double r2 = sqrt(2.0);
    const gelu_spec specs[] = {
        {"gelu torch order", G_TORCH, 0.5, r2, 1, false, 0, true},
        {"gelu x * 0.5 first", G_HALF_FIRST, 0.5, r2, 1, false, 0, true},
        {"gelu Mul by 1/sqrt2, constants left", G_RSQRT, 0.5, r2, 1, false, 0, true},
        {"gelu x * (0.5 * (1 + erf))", G_GROUPED, 0.5, r2, 1, false, 0, true},
        {"gelu 1 of rank 3 (replayed)", G_TORCH, 0.5, r2, 1, false, 3, true},
        {"gelu with 0.6: left alone", G_TORCH, 0.6, r2, 1, false, 0, false},
        {"gelu with sqrt2 = 1.5: left alone", G_TORCH, 0.5, 1.5, 1, false, 0, false},
        {"gelu with 1 + 1e-6: left alone", G_TORCH, 0.5, r2, 1 + 1e-6, false, 0, false},
        {"gelu Erf read twice: left alone", G_TORCH, 0.5, r2, 1, true, 0, false},
    };
    enum { N = 3, C = 8 };
    float x[N * C];
    fill(x, N * C, 4.0);
    x[0] = 0, x[1] = -30, x[2] = 30; /* erf saturates; GELU's tails */
    for (size_t i = 0; i < sizeof specs / sizeof *specs; i++) {
        const gelu_spec *s = &specs[i];
        double want[N * C], tol[N * C];
        for (int j = 0; j < N * C; j++) {
            const double v = x[j];
            want[j] = v * s->half * (s->one + erf(v / s->sqrt2));
            /* each of the five ops (or ts_gelu) rounds: a few units of the result, and the erf's
             * few units (its argument's rounding through a slope <= 2 / sqrt(pi)) times x / 2 */
            tol[j] = 16 * U * (fabs(want[j]) + fabs(v)) + 1e-37;
        }
        build_gelu(s);
        xcase c = {.name = s->name,
                   .n_in = 1,
                   .in_shape = {TS_SHAPE(N, C)},
                   .in_vals = {x},
                   .n_out = N * C,
                   .out_shape = s->one_rank == 3 ? TS_SHAPE(1, N, C) : TS_SHAPE(N, C),
                   .want = want,
                   .tol = tol,
                   .fused = s->fused,
                   .removed = s->fused ? 4 : 0,
                   .fused_type = "tessera.Gelu"};
        run_case(&c);
        done();
    }
}

/* ------------------------------------------------------------------ linear */
static void test_linear(void) {
    printf("linear\n");
    lin_weights_init();
    const lin_spec specs[] = {
        {"Add(MatMul(x, W), b)", L_MATMUL_ADD, false, false, false, 1, 1},
        {"Add(b, MatMul(x, W))", L_BIAS_FIRST, false, false, false, 1, 1},
        {"Gemm(x, W^T, b), transB", L_GEMM_T, false, false, false, 1, 0},
        {"Gemm(x, W, b)", L_GEMM, false, false, false, 1, 0},
        {"MatMul(x, Transpose(W^T)) + b", L_TRANSPOSED_W, false, false, false, 1, 2},
        {"MatMul(x, Identity(W)) + b", L_IDENTITY_W, false, false, false, 1, 1},
        {"MatMul(x, W), no bias", L_BARE, false, false, false, 1, 0},
        {"MatMul(Transpose(x0), W) + b", L_X_TRANSPOSED, false, false, false, 1, 1},
        {"MatMul read twice: the Add stays", L_MATMUL_ADD, true, false, false, 1, 0},
        {"bias an input: the Add stays", L_MATMUL_ADD, false, true, false, 1, 0},
        {"weight an input: left alone", L_MATMUL_ADD, false, false, true, 0, 0},
    };
    float x[LB * LR * LK], xt[LB * LR * LK];
    fill(x, LB * LR * LK, 2.0);
    for (int b = 0; b < LB; b++) /* x0 [LR, LB, LK] whose transpose is x */
        for (int r = 0; r < LR; r++)
            for (int k = 0; k < LK; k++) xt[(r * LB + b) * LK + k] = x[(b * LR + r) * LK + k];
    for (size_t i = 0; i < sizeof specs / sizeof *specs; i++) {
        const lin_spec *s = &specs[i];
        double want[LB * LR * LN], tol[LB * LR * LN];
        lin_reference(x, LB * LR, s->form != L_BARE && !s->b_input, want, tol);
        if (s->b_input) /* the bias fed is lin_b: the same values */
            lin_reference(x, LB * LR, true, want, tol);
        const bool gemm = s->form == L_GEMM || s->form == L_GEMM_T;
        const bool tr = s->form == L_X_TRANSPOSED; /* fed x0, whose transpose is x */
        build_linear(s);
        xcase c = {.name = s->name,
                   .n_in = 1 + s->w_input + s->b_input,
                   .in_shape = {gemm ? TS_SHAPE(LB * LR, LK)
                                : tr ? TS_SHAPE(LR, LB, LK)
                                     : TS_SHAPE(LB, LR, LK)},
                   .in_vals = {tr ? xt : x},
                   .n_out = LB * LR * LN,
                   .want = want,
                   .tol = tol,
                   .fused = s->fused,
                   .removed = s->removed,
                   .fused_type = "tessera.Linear"};
        int k = 1;
        if (s->w_input) c.in_shape[k] = TS_SHAPE(LK, LN), c.in_vals[k++] = lin_w;
        if (s->b_input) c.in_shape[k] = TS_SHAPE(LN), c.in_vals[k++] = lin_b;
        run_case(&c);
        done();
    }
}

/* ------------------------------------------------------------------ attention */
static void test_attention(void) {
    printf("attention\n");
    const attn_spec specs[] = {
        {"torch.onnx, causal mask graph", A_TORCH, M_CAUSAL_GRAPH, 5, 5, false, 0, 1, 6},
        {"torch.onnx, causal, L 3 < S 5", A_TORCH, M_CAUSAL_GRAPH, 3, 5, false, 0, 1, 6},
        {"torch.onnx, no mask", A_TORCH, M_NONE, 5, 5, false, 0, 1, 5},
        {"torch.onnx, upper=1 mask: kept", A_TORCH, M_UPPER_GRAPH, 5, 5, false, 0, 1, 6},
        {"Tessera export, causal constant", A_TESSERA, M_CAUSAL_CONST, 4, 4, false, 0, 1, 5},
        {"near-causal constant: kept", A_TESSERA, M_NEAR_CONST, 4, 4, false, 0, 1, 5},
        {"Div, mask input first", A_DIV, M_INPUT, 4, 6, false, 0, 1, 5},
        {"Softmax over heads (replayed)", A_TESSERA, M_NONE, 4, 4, false, 1, 1, 4},
        {"Softmax read twice: left alone", A_TESSERA, M_CAUSAL_CONST, 4, 4, true, 0, 0, 0},
    };
    for (size_t i = 0; i < sizeof specs / sizeof *specs; i++) {
        const attn_spec *s = &specs[i];
        float q[AB * AH * AMAX * AE], k[AB * AH * AMAX * AE], v[AB * AH * AMAX * AV];
        fill(q, AB * AH * s->L * AE, 2.0);
        fill(k, AB * AH * s->S * AE, 2.0);
        fill(v, AB * AH * s->S * AV, 1.0);
        attn_mask_of(s);
        const double scale = s->form == A_TORCH ? 1 / sqrt((double)AE) : 0.5;
        double want[AB * AH * AMAX * AV], tol[AB * AH * AMAX * AV];
        attn_reference(s, q, k, v, scale, want, tol);
        build_attention(s);
        xcase c = {.name = s->name,
                   .n_in = 3 + (s->mask == M_INPUT),
                   .in_shape = {TS_SHAPE(AB, AH, s->L, AE), TS_SHAPE(AB, AH, s->S, AE),
                                TS_SHAPE(AB, AH, s->S, AV), TS_SHAPE(s->L, s->S)},
                   .in_vals = {q, k, v, attn_mask_vals},
                   .n_out = AB * AH * s->L * AV,
                   .want = want,
                   .tol = tol,
                   .fused = s->fused,
                   .removed = s->removed,
                   .fused_type = "tessera.Attention"};
        run_case(&c);
        done();
    }
}

/* ------------------------------------------------------------------ the head split */
typedef struct heads_spec {
    const char *name;
    const char *fused_type;
    int form;      /* 0: Gather(x, i), 1: the head split of g [L, B, D] */
    int64_t index; /* Gather: the index (a constant scalar, or [1] when vector) */
    bool vector;   /* Gather: the index is [1], not a scalar: left alone */
    int64_t t2[4]; /* head split: the second Reshape's target ([B, H, L, E] or another) */
    bool t_out;    /* head split: the Transpose's output is a graph output too: left alone */
    int fused, removed;
} heads_spec;

enum { HL = 3, HB = 2, HH = 3, HE = 4 }; /* g [HL, HB, HH * HE] */

static void build_heads(const heads_spec *s) {
    begin(17);
    if (s->form == 0) {
        input("x", 3, (int64_t[]){SYM, 3, 4});
        const int64_t i = s->index, one = 1;
        Onnx__NodeProto *c = op("Constant", "", "i");
        attr(c, "value", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR)->t =
            data_tensor("i", INT64, s->vector ? 1 : 0, &one, NULL, &i);
        attr_int(op("Gather", "x i", "y"), "axis", 1);
        output("y");
        return;
    }
    input("g", 3, (int64_t[]){SYM, HB, HH * HE});
    constant_ints("t1", 3, (int64_t[]){0, -1, HE}); /* [L, B*H, E]: a 0 and a -1 resolved */
    constant_ints("t2", 4, s->t2);
    op("Reshape", "g t1", "r1");
    attr_ints(op("Transpose", "r1", "tr"), "perm", 3, (int64_t[]){1, 0, 2});
    op("Reshape", "tr t2", "y");
    output("y");
    if (s->t_out) output("tr");
}

static void test_heads(void) {
    printf("head split\n");
    const heads_spec specs[] = {
        {"Gather(x, 2) at axis 1", "tessera.Select", 0, 2, false, {0}, false, 1, 0},
        {"Gather(x, -1) at axis 1", "tessera.Select", 0, -1, false, {0}, false, 1, 0},
        {"Gather of an index [1]: left alone", "tessera.Select", 0, 1, true, {0}, false, 0, 0},
        {"head split to [B, H, L, E]",
         "tessera.HeadSplit",
         1,
         0,
         false,
         {HB, HH, HL, HE},
         false,
         1,
         2},
        {"head split to [H, B, L, E] (replayed)",
         "tessera.HeadSplit",
         1,
         0,
         false,
         {HH, HB, HL, HE},
         false,
         1,
         2},
        {"Transpose read twice: left alone",
         "tessera.HeadSplit",
         1,
         0,
         false,
         {HB, HH, HL, HE},
         true,
         0,
         0},
    };
    float x[2 * 3 * 4], g[HL * HB * HH * HE];
    fill(x, 2 * 3 * 4, 1.0);
    fill(g, HL * HB * HH * HE, 1.0);
    for (size_t i = 0; i < sizeof specs / sizeof *specs; i++) {
        const heads_spec *s = &specs[i];
        double want[HL * HB * HH * HE], tol[HL * HB * HH * HE] = {0}; /* no arithmetic: exact */
        int64_t n;
        if (s->form == 0) { /* y[b, c] = x[b, index, c] (with its dim when a vector index) */
            const int64_t at = s->index < 0 ? s->index + 3 : s->index;
            for (int b = 0; b < 2; b++)
                for (int c = 0; c < 4; c++) want[b * 4 + c] = x[(b * 3 + at) * 4 + c];
            n = 2 * 4;
        } else { /* the transposed [B*H, L, E]'s values in order, whatever the last target */
            for (int m = 0; m < HB * HH; m++)
                for (int l = 0; l < HL; l++)
                    for (int e = 0; e < HE; e++)
                        want[(m * HL + l) * HE + e] = g[(l * HB * HH + m) * HE + e];
            n = HL * HB * HH * HE;
        }
        build_heads(s);
        xcase c = {.name = s->name,
                   .n_in = 1,
                   .in_shape = {s->form == 0 ? TS_SHAPE(2, 3, 4) : TS_SHAPE(HL, HB, HH * HE)},
                   .in_vals = {s->form == 0 ? x : g},
                   .n_out = n,
                   .want = want,
                   .tol = tol,
                   .out_shape = s->form == 0
                                    ? (s->vector ? TS_SHAPE(2, 1, 4) : TS_SHAPE(2, 4))
                                    : (ts_shape){4, {s->t2[0], s->t2[1], s->t2[2], s->t2[3]}},
                   .fused = s->fused,
                   .removed = s->removed,
                   .fused_type = s->fused_type};
        run_case(&c);
        done();
    }
}

int main(void) {
    ts_sim_configure(1, 0);
    test_gelu();
    test_linear();
    test_attention();
    test_heads();
    arena_release();
    return ts_test_finish();
}
#endif
