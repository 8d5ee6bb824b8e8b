/* xformer_models.h — the models the transformer rewrites look for, each in the forms the tests
 * build (xformer_models.c, on xformer_util.h), and their float64 references. */
#ifndef TS_TEST_XFORMER_MODELS_H
#define TS_TEST_XFORMER_MODELS_H

#include "xformer_util.h"

/* ------------------------------------------------------------------ GELU */
typedef enum gelu_order {
    G_TORCH,      /* Mul(Mul(x, Add(Erf(Div(x, sqrt2)), 1)), 0.5): torch.onnx, Tessera's export */
    G_HALF_FIRST, /* Mul(Mul(x, 0.5), Add(1, Erf(Div(x, sqrt2)))): x * 0.5 * (1 + erf(...)) */
    G_RSQRT,      /* Mul(0.5, Mul(Add(Erf(Mul(1/sqrt2, x)), 1), x)): the Mul form, constants left */
    G_GROUPED,    /* Mul(x, Mul(0.5, Add(...))): x * (0.5 * (1 + erf(...))) */
} gelu_order;

typedef struct gelu_spec {
    const char *name;
    gelu_order order;
    double half, sqrt2, one; /* the constants written */
    bool erf_out;            /* the Erf's output is a graph output too: left alone */
    int one_rank;            /* the 1's rank (3: broadcasts x [N, 8] up: the replay) */
    bool fused;
} gelu_spec;

void build_gelu(const gelu_spec *s);

/* ------------------------------------------------------------------ linear */
typedef enum lin_form {
    L_MATMUL_ADD,   /* Add(MatMul(x, W), b) */
    L_BIAS_FIRST,   /* Add(b, MatMul(x, W)): torch.onnx's order */
    L_GEMM_T,       /* Gemm(x, W^T, b, transB=1): nn.Linear on a matrix */
    L_GEMM,         /* Gemm(x, W, b) */
    L_TRANSPOSED_W, /* Add(MatMul(x, Transpose(W^T)), b): Tessera's exporter */
    L_IDENTITY_W,   /* Add(MatMul(x, Identity(W)), b): a weight torch.onnx shared */
    L_BARE,         /* MatMul(x, W): no bias (a tied LM head) */
    L_X_TRANSPOSED, /* Add(MatMul(Transpose(x0, [1, 0, 2]), W), b): attention's projections */
} lin_form;

typedef struct lin_spec {
    const char *name;
    lin_form form;
    bool mm_out;  /* the MatMul's output is a graph output too: the Add stays */
    bool b_input; /* the bias is a graph input, not an initializer: the Add stays */
    bool w_input; /* the weight is a graph input: nothing is rewritten */
    int fused, removed;
} lin_spec;

enum { LB = 2, LR = 3, LK = 5, LN = 6 }; /* x [LB, LR, LK] (Gemm: [LB * LR, LK]), W [LK, LN] */
/* W [LK, LN], its transpose and the bias b [LN]: lin_weights_init fills them from fill() */
extern float lin_w[LK * LN], lin_wt[LN * LK], lin_b[LN];
void lin_weights_init(void);

void build_linear(const lin_spec *s);
/* y = x W + b in float64, and the bound (K + 2) u (|x| |W| + |b|) of a float32 evaluation */
void lin_reference(const float *x, int rows, bool bias, double *want, double *tol);

/* ------------------------------------------------------------------ attention */
typedef enum attn_form {
    A_TORCH,   /* torch.onnx: Q and K^T each scaled by sqrt(1 / sqrt(E)) from Q's shape */
    A_TESSERA, /* Tessera's exporter: MatMul(Q, K^T) * constant */
    A_DIV,     /* MatMul(Q, K^T) / constant */
} attn_form;

typedef enum mask_kind {
    M_NONE,
    M_CAUSAL_GRAPH, /* Where(Equal(Trilu(Expand(1, [L, S]), upper=0), 0), -inf, 0) */
    M_UPPER_GRAPH,  /* the same with upper=1: not causal */
    M_CAUSAL_CONST, /* a constant [L, S]: 0 on and below the diagonal, -inf above */
    M_NEAR_CONST,   /* the same with one entry changed: not causal */
    M_INPUT,        /* a float mask fed at run time, first operand of the Add */
    M_FILL_GRAPH,   /* the causal graph with -2 for -inf: an additive mask, not causal */
} mask_kind;

typedef struct attn_spec {
    const char *name;
    attn_form form;
    mask_kind mask;
    int L, S;
    bool p_out; /* the Softmax's output is a graph output too: left alone */
    int axis;   /* Softmax's axis (0: -1) */
    int fused, removed;
} attn_spec;

enum { AB = 2, AH = 2, AE = 4, AV = 3, AMAX = 6 }; /* q [AB, AH, L, AE], v [AB, AH, S, AV] */
/* the mask's [L, S] values (attn_mask_of), also fed as the M_INPUT mask */
extern float attn_mask_vals[AMAX * AMAX];

void build_attention(const attn_spec *s);
/* The mask's values for s (its [L, S] block; the graph's masks are the same numbers). */
void attn_mask_of(const attn_spec *s);
/* y = softmax(q k^T scale + mask) v in float64 along `axis` (3: keys, 1: heads) and the bound of
 * a float32 evaluation */
void attn_reference(const attn_spec *s, const float *q, const float *k, const float *v,
                    double scale, double *want, double *tol);

#endif /* TS_TEST_XFORMER_MODELS_H */
