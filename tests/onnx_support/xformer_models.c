/* xformer_models.c — the models the transformer rewrites look for (GELU's erf form, linear layers,
 * attention as torch.onnx and Tessera's exporter write it), in each form the tests build, and
 * their float64 references with bounds on a float32 evaluation. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "xformer_models.h"

/* ------------------------------------------------------------------ GELU */
void build_gelu(const gelu_spec *s) {
    begin(17);
    input("x", 2, (int64_t[]){SYM, 8});
    constant("half", s->half, 0);
    constant("one", s->one, 0);
    if (s->one_rank == 3) {
        const float one = (float)s->one;
        constant_tensor("one3", 3, (int64_t[]){1, 1, 1}, &one);
    }
    const char *one = s->one_rank == 3 ? "one3" : "one";
    char add[64];
    if (s->order == G_RSQRT) {
        constant("rs", 1.0 / s->sqrt2, 0);
        op("Mul", "rs x", "d");
    } else {
        constant("s2", s->sqrt2, 0);
        op("Div", "x s2", "d");
    }
    op("Erf", "d", "e");
    snprintf(add, sizeof add, s->order == G_HALF_FIRST ? "%s e" : "e %s", one);
    op("Add", add, "a");
    /* the two Muls of each order: their inputs and output */
    static const char *const muls[][2][2] = {
        [G_TORCH] = {{"x a", "m"}, {"m half", "y"}},
        [G_HALF_FIRST] = {{"x half", "m"}, {"m a", "y"}},
        [G_RSQRT] = {{"a x", "m"}, {"half m", "y"}},
        [G_GROUPED] = {{"half a", "m"}, {"x m", "y"}},
    };
    for (int i = 0; i < 2; i++) op("Mul", muls[s->order][i][0], muls[s->order][i][1]);
    output("y");
    if (s->erf_out) output("e");
}

/* ------------------------------------------------------------------ linear */
float lin_w[LK * LN], lin_wt[LN * LK], lin_b[LN];

void lin_weights_init(void) {
    fill(lin_w, LK * LN, 1.0);
    fill(lin_b, LN, 1.0);
    for (int k = 0; k < LK; k++)
        for (int n = 0; n < LN; n++) lin_wt[n * LK + k] = lin_w[k * LN + n];
}

void build_linear(const lin_spec *s) {
    const bool gemm = s->form == L_GEMM || s->form == L_GEMM_T;
    begin(17);
    if (s->form == L_X_TRANSPOSED)
        input("x0", 3, (int64_t[]){LR, SYM, LK});
    else if (gemm)
        input("x", 2, (int64_t[]){SYM, LK});
    else
        input("x", 3, (int64_t[]){SYM, LR, LK});
    const bool nk = s->form == L_GEMM_T || s->form == L_TRANSPOSED_W;
    if (s->w_input)
        input("W", 2, (int64_t[]){LK, LN});
    else
        initializer(nk ? "Wt" : "W", 2, nk ? (int64_t[]){LN, LK} : (int64_t[]){LK, LN},
                    nk ? lin_wt : lin_w);
    if (s->b_input)
        input("b", 1, (int64_t[]){LN});
    else if (s->form != L_BARE)
        initializer("b", 1, (int64_t[]){LN}, lin_b);
    if (gemm) {
        Onnx__NodeProto *n = op("Gemm", s->form == L_GEMM_T ? "x Wt b" : "x W b", "y");
        if (s->form == L_GEMM_T) attr_int(n, "transB", 1);
        output("y");
        return;
    }
    const char *w = "W";
    if (s->form == L_TRANSPOSED_W)
        attr_ints(op("Transpose", "Wt", "Wn"), "perm", 2, (int64_t[]){1, 0}), w = "Wn";
    if (s->form == L_IDENTITY_W) op("Identity", "W", "Wi"), w = "Wi";
    if (s->form == L_X_TRANSPOSED)
        attr_ints(op("Transpose", "x0", "x"), "perm", 3, (int64_t[]){1, 0, 2});
    char mm[64];
    snprintf(mm, sizeof mm, "x %s", w);
    op("MatMul", mm, s->form == L_BARE ? "y" : "m");
    if (s->form != L_BARE) op("Add", s->form == L_BIAS_FIRST ? "b m" : "m b", "y");
    output("y");
    if (s->mm_out) output("m");
}

/* y = x W + b in float64, and the bound (K + 2) u (|x| |W| + |b|) of a float32 evaluation */
void lin_reference(const float *x, int rows, bool bias, double *want, double *tol) {
    for (int r = 0; r < rows; r++)
        for (int n = 0; n < LN; n++) {
            double y = bias ? lin_b[n] : 0, a = bias ? fabs(lin_b[n]) : 0;
            for (int k = 0; k < LK; k++) {
                y += (double)x[r * LK + k] * lin_w[k * LN + n];
                a += fabs((double)x[r * LK + k] * lin_w[k * LN + n]);
            }
            want[r * LN + n] = y;
            tol[r * LN + n] = (LK + 2) * U * a + 1e-37;
        }
}

/* ------------------------------------------------------------------ attention */
/* the torch.onnx scale: Sqrt(Cast(Div(1, Sqrt(Cast(Slice(Shape(q), -1, end)))))) */
static void torch_scale(void) {
    op("Shape", "q", "q_shape");
    constant_ints("last", 1, (int64_t[]){-1});
    constant_ints("end", 1, (int64_t[]){BIGEND});
    op("Slice", "q_shape last end", "e_dim");
    attr_int(op("Cast", "e_dim", "e_f"), "to", FLOAT);
    op("Sqrt", "e_f", "e_sqrt");
    constant("one", 1.0, 1);
    op("Div", "one e_sqrt", "inv");
    attr_int(op("Cast", "inv", "scale"), "to", FLOAT);
    op("Sqrt", "scale", "s1");
    op("Sqrt", "scale", "s2");
}

/* the causal mask torch.onnx builds from Q's and K's shapes (upper: Trilu's attribute; fill:
 * the value above the diagonal, -inf in torch.onnx's) */
static void torch_mask(int upper, double fill) {
    constant_ints("m2", 1, (int64_t[]){-2});
    constant_ints("m1", 1, (int64_t[]){-1});
    op("Shape", "q", "qs");
    op("Shape", "k", "ks");
    op("Slice", "qs m2 m1", "l_dim");
    op("Slice", "ks m2 m1", "s_dim");
    attr_int(op("Concat", "l_dim s_dim", "mask_shape"), "axis", 0);
    constant("ones", 1.0, 1);
    op("Expand", "ones mask_shape", "full");
    attr_int(op("Trilu", "full", "tril"), "upper", upper);
    constant("zero", 0.0, 1);
    op("Equal", "tril zero", "above");
    constant("ninf", fill, 1);
    constant("zero2", 0.0, 1);
    op("Where", "above ninf zero2", "mask");
}

float attn_mask_vals[AMAX * AMAX];

void build_attention(const attn_spec *s) {
    begin(17);
    input("q", 4, (int64_t[]){SYM, AH, SYM, AE});
    input("k", 4, (int64_t[]){SYM, AH, SYM, AE});
    input("v", 4, (int64_t[]){SYM, AH, SYM, AV});
    if (s->mask == M_INPUT) input("mask", 2, (int64_t[]){s->L, s->S});
    /* torch.onnx's scale before K's Transpose: a Transpose that is not the graph's first node is
     * taken in too */
    if (s->form == A_TORCH) torch_scale();
    attr_ints(op("Transpose", "k", "kt"), "perm", 4, (int64_t[]){0, 1, 3, 2});
    const char *scores = "scores";
    if (s->form == A_TORCH) {
        op("Mul", "q s1", "qs1");
        op("Mul", "kt s2", "ks2");
        op("MatMul", "qs1 ks2", "scores");
    } else {
        op("MatMul", "q kt", "raw");
        constant("c", s->form == A_DIV ? 2.0 : 0.5, 0);
        op(s->form == A_DIV ? "Div" : "Mul", "raw c", "scores");
    }
    if (s->mask == M_CAUSAL_GRAPH || s->mask == M_UPPER_GRAPH || s->mask == M_FILL_GRAPH)
        torch_mask(s->mask == M_UPPER_GRAPH, s->mask == M_FILL_GRAPH ? -2.0 : -INFINITY);
    if (s->mask == M_CAUSAL_CONST || s->mask == M_NEAR_CONST)
        constant_tensor("mask", 2, (int64_t[]){s->L, s->S}, attn_mask_vals);
    if (s->mask != M_NONE) {
        op("Add", s->mask == M_INPUT ? "mask scores" : "scores mask", "masked");
        scores = "masked";
    }
    char sm[64];
    snprintf(sm, sizeof sm, "%s", scores);
    attr_int(op("Softmax", sm, "p"), "axis", s->axis ? s->axis : -1);
    op("MatMul", "p v", "y");
    output("y");
    if (s->p_out) output("p");
}

/* The mask's values for s (its [L, S] block; the graph's masks are the same numbers). */
void attn_mask_of(const attn_spec *s) {
    for (int i = 0; i < s->L; i++)
        for (int j = 0; j < s->S; j++) {
            float *m = &attn_mask_vals[i * s->S + j];
            switch (s->mask) {
            case M_UPPER_GRAPH:
                *m = j >= i ? 0.0f : -INFINITY;
                break;
            case M_INPUT:
                fill(m, 1, 3.0);
                if ((i + 2 * j) % 5 == 4 && j != i) *m = -INFINITY; /* never a whole row */
                break;
            case M_NONE:
                *m = 0;
                break;
            case M_FILL_GRAPH:
                *m = j <= i ? 0.0f : -2.0f;
                break;
            default:
                *m = j <= i ? 0.0f : -INFINITY;
            }
        }
    if (s->mask == M_NEAR_CONST) attn_mask_vals[0 * s->S + 1] = 0; /* query 0 sees key 1 */
}

/* y = softmax(q k^T scale + mask) v in float64 along `axis` (3: keys, 1: heads) and the bound of
 * a float32 evaluation: each score off by (E + 4) u scale sum|q||k| (+ u of the mask's add), the
 * weights by 2 max-score-error + (n + 8) u relatively, the output by that times sum p |v|. */
void attn_reference(const attn_spec *s, const float *q, const float *k, const float *v,
                    double scale, double *want, double *tol) {
    const int L = s->L, S = s->S, axis = s->axis == 1 ? 1 : 3;
    static double sc[AB][AH][AMAX][AMAX], err[AB][AH][AMAX][AMAX], p[AB][AH][AMAX][AMAX];
    for (int b = 0; b < AB; b++)
        for (int h = 0; h < AH; h++)
            for (int i = 0; i < L; i++)
                for (int j = 0; j < S; j++) {
                    double dot = 0, a = 0;
                    for (int e = 0; e < AE; e++) {
                        double t = (double)q[((b * AH + h) * L + i) * AE + e] *
                                   k[((b * AH + h) * S + j) * AE + e];
                        dot += t, a += fabs(t);
                    }
                    const double m = attn_mask_vals[i * S + j];
                    sc[b][h][i][j] = dot * scale + m;
                    err[b][h][i][j] =
                        isinf(m) ? 0 : (AE + 4) * U * a * scale + 2 * U * fabs(dot * scale + m);
                }
    for (int b = 0; b < AB; b++) /* normalise along the axis: over j (keys) or h (heads) */
        for (int h = 0; h < AH; h++)
            for (int i = 0; i < L; i++)
                for (int j = 0; j < S; j++) {
                    double mx = -INFINITY, sum = 0;
                    for (int t = 0; t < (axis == 3 ? S : AH); t++)
                        mx = fmax(mx, axis == 3 ? sc[b][h][i][t] : sc[b][t][i][j]);
                    for (int t = 0; t < (axis == 3 ? S : AH); t++)
                        sum += exp((axis == 3 ? sc[b][h][i][t] : sc[b][t][i][j]) - mx);
                    p[b][h][i][j] = exp(sc[b][h][i][j] - mx) / sum;
                }
    for (int b = 0; b < AB; b++)
        for (int h = 0; h < AH; h++)
            for (int i = 0; i < L; i++) {
                double delta = 0; /* the largest score error the weights of this row see */
                for (int j = 0; j < S; j++)
                    for (int t = 0; t < (axis == 3 ? 1 : AH); t++)
                        delta = fmax(delta, axis == 3 ? err[b][h][i][j] : err[b][t][i][j]);
                const double rel = 2 * delta + ((axis == 3 ? S : AH) + 8) * U;
                for (int d = 0; d < AV; d++) {
                    double y = 0, a = 0;
                    for (int j = 0; j < S; j++) {
                        const double vv = v[((b * AH + h) * S + j) * AV + d];
                        y += p[b][h][i][j] * vv;
                        a += p[b][h][i][j] * fabs(vv);
                    }
                    const int o = ((b * AH + h) * L + i) * AV + d;
                    want[o] = y;
                    tol[o] = rel * a + (S + 2) * U * a + 1e-30;
                }
            }
}
