/* test_onnx_xformer.c — the transformer rewrites of ts_onnx_opts.optimize
 * (src/onnx/rewrite_xformer.c) on small models packed with protobuf-c (tests/onnx_support/
 * xformer_models.h): GELU's erf form in the orderings exporters write, MatMul + Add / Gemm / a bare
 * MatMul with initializer weights, attention as torch.onnx writes it (scales from the query's
 * shape, the causal mask built from Shape / Trilu / Where) and as Tessera's exporter writes it
 * (constant scale and mask), the head split, and the forms that must be left alone (an
 * intermediate with a second reader, constants that are not GELU's, inputs that are not
 * initializers, a Gemm with beta 2) or must keep their mask (a mask that is not causal, the causal
 * graph filling -2 where torch.onnx writes -inf). Each model runs optimized and
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
#include "onnx/memo.h"
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

/* Gemm(x, W, b) with beta 2 is x W + 2 b: not a Linear, left alone */
static void test_gemm_beta(void) {
    float x[LB * LR * LK];
    fill(x, LB * LR * LK, 2.0);
    double with_b[LB * LR * LN], tol_b[LB * LR * LN], no_b[LB * LR * LN], tol_0[LB * LR * LN];
    lin_reference(x, LB * LR, true, with_b, tol_b);
    lin_reference(x, LB * LR, false, no_b, tol_0);
    for (int i = 0; i < LB * LR * LN; i++) { /* x W + 2 b, bound (K + 2) u (|x| |W| + 2 |b|) */
        with_b[i] = 2 * with_b[i] - no_b[i];
        tol_b[i] *= 2;
    }
    begin(17);
    input("x", 2, (int64_t[]){SYM, LK});
    initializer("W", 2, (int64_t[]){LK, LN}, lin_w);
    initializer("b", 1, (int64_t[]){LN}, lin_b);
    Onnx__AttributeProto *beta =
        attr(op("Gemm", "x W b", "y"), "beta", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
    beta->f = 2.0f;
    beta->has_f = 1;
    output("y");
    xcase c = {.name = "Gemm with beta 2: kept",
               .n_in = 1,
               .in_shape = {TS_SHAPE(LB * LR, LK)},
               .in_vals = {x},
               .n_out = LB * LR * LN,
               .want = with_b,
               .tol = tol_b,
               .fused = 0,
               .removed = 0,
               .fused_type = "tessera.Linear"};
    run_case(&c);
    done();
}

/* ------------------------------------------------------------------ the flattened linear */
typedef struct flat_spec {
    const char *name;
    int64_t t2[3]; /* the second Reshape's target */
    bool flat_out; /* the flattened x is a graph output too: left alone */
    int fused, removed;
    /* t2 = [t2[0], t2[1], Shape(g)[1]] as torch.onnx builds it (1; 2: the Shape from start 1,
     * whose fused node replays), and how many Shapes become tessera.LinearShape */
    int shape_reader, lin_shapes;
} flat_spec;

/* Reshape(Gemm(Reshape(x, [-1, K]), W^T, b, transB), t2), x [L, B, K] the transpose of x0 */
static void build_flat(const flat_spec *s) {
    begin(17);
    input("x0", 3, (int64_t[]){LB, LR, LK});
    initializer("Wt", 2, (int64_t[]){LN, LK}, lin_wt);
    initializer("b", 1, (int64_t[]){LN}, lin_b);
    attr_ints(op("Transpose", "x0", "x"), "perm", 3, (int64_t[]){1, 0, 2});
    constant_ints("t1", 2, (int64_t[]){-1, LK});
    constant_ints("t2", 3, s->t2);
    op("Reshape", "x t1", "xf");
    attr_int(op("Gemm", "xf Wt b", "g"), "transB", 1);
    if (s->shape_reader) {
        Onnx__NodeProto *sh = op("Shape", "g", "sh");
        if (s->shape_reader == 2) attr_int(sh, "start", 1);
        constant_ints("ni", 1, (int64_t[]){s->shape_reader == 2 ? 0 : 1});
        op("Gather", "sh ni", "nn");
        constant_ints("lb", 2, s->t2);
        attr_int(op("Concat", "lb nn", "t2s"), "axis", 0);
        op("Reshape", "g t2s", "y");
    } else {
        op("Reshape", "g t2", "y");
    }
    output("y");
    if (s->flat_out) output("xf");
}

/* The fused node's output shape follows from the input shapes (the memo's rule; the width read
 * by a LinearShape is a function of them), and its fast path multiplies x's rows where they lie:
 * the result is [B, L, N] in memory, seen as [L, B, N] (the file's nodes copy x to [L * B, K] and
 * give a contiguous result). */
static void check_flat_fast(const float *x0, const flat_spec *s) {
    ts_module *m = load(true);
    CHECK(m != NULL);
    if (!m) return ts_error_clear();
    tso_graph *g = ((tso_model *)m)->graph;
    CHECK_EQ(nodes_of(m, "tessera.LinearShape"), s->lin_shapes);
    unsigned char *f = tso_shape_values(g);
    CHECK(f != NULL);
    for (int k = 0; f && k < g->n_nodes; k++)
        if (!strcmp(g->nodes[k].op_type, "tessera.FlatLinear"))
            CHECK_EQ(f[g->nodes[k].out[0]], TSO_SHAPE_FIXED);
        else if (!strcmp(g->nodes[k].op_type, "tessera.LinearShape"))
            CHECK_EQ(f[g->nodes[k].out[0]], TSO_SHAPE_FIXED | TSO_SHAPE_ONLY);
    free(f);
    ts_scope_begin();
    ts_tensor *in = host_tensor(TS_SHAPE(LB, LR, LK), x0, ts_cpu()), *y = run(m, 1, &in);
    CHECK(y != NULL);
    if (y && s->fused && s->t2[0] == LR) /* the rows where they lie: [B, L, N] in memory */
        CHECK(ts_stride(y, 0) == LN && ts_stride(y, 1) == LR * LN && ts_stride(y, 2) == 1);
    ts_error_clear();
    ts_scope_end();
    ts_module_free(m);
}

static void test_flat_linear(void) {
    printf("flattened linear\n");
    lin_weights_init();
    const flat_spec specs[] = {
        {"Gemm of [L, B, K] flattened, to [L, B, N]", {LR, LB, LN}, false, 1, 2, 0, 0},
        {"to [B, L, N] (replayed)", {LB, LR, LN}, false, 1, 2, 0, 0},
        {"flattened x read twice: left alone", {LR, LB, LN}, true, 0, 0, 0, 0},
        {"N read by a Shape of the Gemm", {LR, LB, 0}, false, 1, 2, 1, 1},
        {"N read by a Shape from start 1 (replayed)", {LR, LB, 0}, false, 1, 2, 2, 1},
        {"Shape read, x read twice: left alone", {LR, LB, 0}, true, 0, 0, 1, 0},
    };
    float x0[LB * LR * LK], x[LR * LB * LK];
    fill(x0, LB * LR * LK, 2.0);
    for (int b = 0; b < LB; b++) /* x [LR, LB, LK], the transpose of x0 */
        for (int r = 0; r < LR; r++)
            for (int k = 0; k < LK; k++) x[(r * LB + b) * LK + k] = x0[(b * LR + r) * LK + k];
    for (size_t i = 0; i < sizeof specs / sizeof *specs; i++) {
        const flat_spec *s = &specs[i];
        double want[LR * LB * LN], tol[LR * LB * LN];
        lin_reference(x, LR * LB, true, want, tol); /* the rows in x's order, whatever t2 */
        build_flat(s);
        check_flat_fast(x0, s);
        xcase c = {.name = s->name,
                   .n_in = 1,
                   .in_shape = {TS_SHAPE(LB, LR, LK)},
                   .in_vals = {x0},
                   .n_out = LR * LB * LN,
                   .want = want,
                   .tol = tol,
                   .out_shape = {3, {s->t2[0], s->t2[1], LN}},
                   .fused = s->fused,
                   .removed = s->removed,
                   .fused_type = "tessera.FlatLinear"};
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
        {"torch.onnx mask graph, -2 for -inf", A_TORCH, M_FILL_GRAPH, 5, 5, false, 0, 1, 6},
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
    /* head split: t2 = [Shape(g)[1], H, Shape(tr)[L's index], E] as torch.onnx builds it for the
     * keys (1: Shape(tr), 2: Shape(tr) from start = 1, whose fused node replays), and how many
     * Shapes become tessera.HeadShape */
    int shape_reader, head_shapes;
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
    if (s->shape_reader) { /* t2 = [B, H, L, E], L read from tr's shape [B*H, L, E] */
        Onnx__NodeProto *sh = op("Shape", "tr", "sh");
        if (s->shape_reader == 2) attr_int(sh, "start", 1); /* [L, E] */
        constant_ints("li", 1, (int64_t[]){s->shape_reader == 2 ? 0 : 1});
        op("Gather", "sh li", "l");
        op("Shape", "g", "sg"); /* B from g's shape, as the exporters read it */
        constant_ints("bi", 1, (int64_t[]){1});
        op("Gather", "sg bi", "b");
        constant_ints("h", 1, (int64_t[]){HH});
        constant_ints("e", 1, (int64_t[]){HE});
        attr_int(op("Concat", "b h l e", "t2s"), "axis", 0);
        op("Reshape", "tr t2s", "y");
    } else {
        op("Reshape", "tr t2", "y");
    }
    output("y");
    if (s->t_out) output("tr");
}

/* The keys' split whose L is read from the transposed keys' shape: the Shape's fused node
 * computes that shape (the one the file's nodes give, on cpu and sim:0, grad mode or not), and
 * the memo keeps what follows from it as it does in the plain model. */
static void head_shape_checks(const heads_spec *s) {
    ts_module *m[2] = {load(false), load(true)};
    CHECK(m[0] && m[1]);
    CHECK_EQ(m[1] ? nodes_of(m[1], "tessera.HeadShape") : -1, s->head_shapes);
    if (!m[0] || !m[1] || !s->shape_reader) {
        ts_error_clear();
        ts_module_free(m[0]), ts_module_free(m[1]);
        return;
    }
    float g[HL * HB * HH * HE];
    fill(g, HL * HB * HH * HE, 1.0);
    int skipped[2];
    for (int i = 0; i < 2; i++) {
        for (int rep = 0; rep < 3; rep++) {
            ts_scope_begin();
            ts_tensor *in = host_tensor(TS_SHAPE(HL, HB, HH * HE), g, ts_cpu());
            ts_tensor *y = run(m[i], 1, &in);
            CHECK(y && same_shape(ts_shape_of(y), TS_SHAPE(HB, HH, HL, HE)));
            ts_error_clear();
            ts_scope_end();
        }
        int64_t hits;
        tso_memo_stats(((tso_model *)m[i])->graph, &hits, &skipped[i]);
        CHECK_EQ(hits, 2);
    }
    /* plain: two Shapes, two Gathers, the Concat; optimized: one Shape replaced by the fused
     * node (which lets the memo live in the other Shape's state) */
    CHECK_EQ(skipped[0], 5);
    CHECK_EQ(skipped[1], 5);
    ts_module_free(m[0]);
    ts_module_free(m[1]);
}

static void test_heads(void) {
    printf("head split\n");
    const heads_spec specs[] = {
        {"Gather(x, 2) at axis 1", "tessera.Select", 0, 2, false, {0}, false, 1, 0, 0, 0},
        {"Gather(x, -1) at axis 1", "tessera.Select", 0, -1, false, {0}, false, 1, 0, 0, 0},
        {"Gather of an index [1]: left alone",
         "tessera.Select",
         0,
         1,
         true,
         {0},
         false,
         0,
         0,
         0,
         0},
        {"head split to [B, H, L, E]",
         "tessera.HeadSplit",
         1,
         0,
         false,
         {HB, HH, HL, HE},
         false,
         1,
         2,
         0,
         0},
        {"head split to [H, B, L, E] (replayed)",
         "tessera.HeadSplit",
         1,
         0,
         false,
         {HH, HB, HL, HE},
         false,
         1,
         2,
         0,
         0},
        {"Transpose read twice: left alone",
         "tessera.HeadSplit",
         1,
         0,
         false,
         {HB, HH, HL, HE},
         true,
         0,
         0,
         0,
         0},
        {"keys' split, L from Shape(tr)",
         "tessera.HeadSplit",
         1,
         0,
         false,
         {HB, HH, HL, HE},
         false,
         1,
         2,
         1,
         1},
        {"keys' split, Shape(tr) start 1 (replayed)",
         "tessera.HeadSplit",
         1,
         0,
         false,
         {HB, HH, HL, HE},
         false,
         1,
         2,
         2,
         1},
        {"keys' split, tr an output too: left alone",
         "tessera.HeadSplit",
         1,
         0,
         false,
         {HB, HH, HL, HE},
         true,
         0,
         0,
         1,
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
        if (s->form == 1) head_shape_checks(s);
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
    test_gemm_beta();
    test_flat_linear();
    test_attention();
    test_heads();
    arena_release();
    return ts_test_finish();
}
#endif
