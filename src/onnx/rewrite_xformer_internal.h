/* rewrite_xformer_internal.h — what the transformer rewrites' two halves share: the fused nodes'
 * state and operator (rewrite_xformer.c: the fast paths a fused node runs, and the building of a
 * fused node from a pattern of nodes) and the matchers (rewrite_xformer_match.c: the patterns,
 * found in the graph, and the passes). */
#ifndef TS_ONNX_REWRITE_XFORMER_INTERNAL_H
#define TS_ONNX_REWRITE_XFORMER_INTERNAL_H

#include "onnx/onnx_internal.h"

#define XF_MAX_NODES 12 /* the largest pattern: attention with every optional part */
#define XF_MAX_IO    16 /* an operator may read absent trailing inputs up to here (run.c) */

typedef enum xf_kind {
    XF_GELU,
    XF_LINEAR,
    XF_ATTN,
    XF_SELECT,
    XF_HEADS,
    XF_HEAD_SHAPE,
    XF_FLAT_LINEAR,
    XF_LIN_SHAPE
} xf_kind;

/* A fused node's state: the replaced nodes in graph order, and where the fast path finds its
 * operands among the fused node's inputs (-1: absent). */
typedef struct xf_state {
    xf_kind kind;
    int n_steps;
    tso_node steps[XF_MAX_NODES];
    /* GELU: x; the constants' dtype and highest rank (x must have at least it) */
    int x;
    ts_dtype const_dtype;
    int const_rank;
    /* LINEAR: x @ w + b (b may be absent); w_nk: w is [N, K] (Gemm's transB, or a Transpose of
     * the weight taken in); gemm: x must be a matrix, as Gemm's A */
    int w, b;
    bool w_nk, gemm;
    /* ATTN: softmax(Q K^T * scales + mask) V. sq, sk, ss scale Q, K^T and the scores (Mul, or Div
     * when *_div); k_rank > 0: in[k] is K's source, K^T = Transpose(in[k], k_perm); else in[k] is
     * K^T itself */
    int q, k, v, sq, sk, ss, mask;
    bool q_div, k_div, s_div, causal;
    int k_rank, axis;
    int64_t k_perm[TS_MAX_DIMS];
    /* SELECT: Gather(in[x], index) at axis (the attribute), index a constant scalar. HEADS:
     * Reshape(Transpose(Reshape(in[x], in[sq]), [1, 0, 2]), in[sk]) (the head split). HEAD_SHAPE:
     * Shape(Transpose(Reshape(in[x], in[sq]), [1, 0, 2])). FLAT_LINEAR: Reshape(Linear(Reshape(
     * in[x], in[sq]), in[w], in[b]), in[sk]). LIN_SHAPE: Shape(Linear(Reshape(in[x], in[sq]),
     * in[w], ...)) */
    int64_t index;
} xf_state;

typedef struct pattern {
    int nodes[XF_MAX_NODES]; /* graph indices of the nodes replaced */
    int n;
} pattern;

/* A value the fast path reads and the field of the state that gets its position among the fused
 * node's inputs. */
typedef struct role {
    int value;
    int *field;
} role;

typedef struct matcher {
    tso_graph *g;
    bool *dead;
    unsigned char *shape; /* tso_shape_values: what is a function of the input shapes */
} matcher;

/* the fused operators, by kind ("tessera.Gelu", ...) */
extern const tso_op_def tso_xf_defs[];
/* a new state of kind (operand positions -1); NULL with TS_ERR_OOM */
xf_state *tso_xf_state_new(xf_kind kind);
void tso_xf_free(void *state); /* a fused node's free_state */
void tso_xf_take_node(pattern *p, int k);
int tso_xf_position(const int *ins, int n, int v); /* v's place in ins, -1 when absent */
/* "<the last replaced node's label>, fused as tessera.X", malloc'ed (NULL: out of memory) */
char *tso_xf_label(const char *last_label, xf_kind kind);
/* The fused node of state s (whose last step is the node it stands for), taking label and io (its
 * n_in inputs, then its one output) */
tso_node tso_xf_node(xf_state *s, char *label, int *io, int n_in);
/* Replaces the pattern's nodes by one fused node at its last node's place; the others are marked
 * dead. false with TS_ERR_OOM, the graph unchanged. Takes s (freed when no node is made). */
bool tso_xf_fuse(tso_graph *g, bool *dead, pattern *p, xf_state *s, const role *roles, int n_roles);

#endif /* TS_ONNX_REWRITE_XFORMER_INTERNAL_H */
