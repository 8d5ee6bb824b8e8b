/* ctc_loss.c — torch.nn.functional.ctc_loss (issue 76): Graves et al.'s forward-backward over the
 * extended label sequence (blank, l1, blank, l2, ..., blank) in log space, accumulated in double on
 * the host (PyTorch's CPU recursion, term for term: alpha and beta both include the frame's
 * emission). The per-element losses carry one node whose backward scales the gradient computed
 * here, exp(lp) - exp(log(sum_s alpha beta) + nll - lp), by each element's incoming gradient;
 * the reductions are public ops on them, so their gradients follow. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/autograd.h"
#include "host_values.h"

static double lse2(double a, double b) {
    const double m = a > b ? a : b;
    if (m == -INFINITY) return -INFINITY;
    return m + log(exp(a - m) + exp(b - m));
}

static double lse3(double a, double b, double c) {
    double m = a > b ? a : b;
    m = m > c ? m : c;
    if (m == -INFINITY) return -INFINITY;
    return m + log(exp(a - m) + exp(b - m) + exp(c - m));
}

/* one batch element: lp its [Tn x C] frames at stride ldt (C contiguous), lab its L labels; returns
 * the negative log likelihood and, grad not NULL, writes PyTorch's gradient into grad (same
 * layout, frames past Tn untouched: zero). work: 2 (2L + 1) Tn doubles. */
static double ctc_one(const double *lp, int64_t ldt, int64_t Tn, int64_t C, const int64_t *lab,
                      int64_t L, int64_t blank, double *work, double *grad) {
    if (Tn == 0) return L == 0 ? 0.0 : INFINITY;
    const int64_t S = 2 * L + 1;
#define EXT(s)  ((s) % 2 ? lab[(s) / 2] : blank)
#define SKIP(s) ((s) % 2 && (s) >= 3 && lab[(s) / 2] != lab[(s) / 2 - 1])
    double *al = work, *be = work + S * Tn;
    for (int64_t s = 0; s < S; s++) al[s] = s < 2 ? lp[EXT(s)] : -INFINITY;
    for (int64_t t = 1; t < Tn; t++) {
        const double *a0 = al + (t - 1) * S;
        double *a1 = al + t * S;
        for (int64_t s = 0; s < S; s++) {
            const double x = a0[s], y = s >= 1 ? a0[s - 1] : -INFINITY;
            const double z = SKIP(s) ? a0[s - 2] : -INFINITY;
            a1[s] = lse3(x, y, z) + lp[t * ldt + EXT(s)];
        }
    }
    const double *aT = al + (Tn - 1) * S;
    const double nll = -lse2(aT[S - 1], S >= 2 ? aT[S - 2] : -INFINITY);
    if (!grad) return nll;
    double *bT = be + (Tn - 1) * S;
    for (int64_t s = 0; s < S; s++) bT[s] = s >= S - 2 ? lp[(Tn - 1) * ldt + EXT(s)] : -INFINITY;
    for (int64_t t = Tn - 2; t >= 0; t--) {
        const double *b1 = be + (t + 1) * S;
        double *b0 = be + t * S;
        for (int64_t s = 0; s < S; s++) {
            const double x = b1[s], y = s + 1 < S ? b1[s + 1] : -INFINITY;
            const double z = s + 2 < S && SKIP(s + 2) ? b1[s + 2] : -INFINITY;
            b0[s] = lse3(x, y, z) + lp[t * ldt + EXT(s)];
        }
    }
    for (int64_t t = 0; t < Tn; t++) {
        double *g = grad + t * ldt;
        for (int64_t c = 0; c < C; c++) g[c] = -INFINITY; /* log sum of alpha beta per label */
        for (int64_t s = 0; s < S; s++) {
            const int64_t c = EXT(s);
            g[c] = lse2(g[c], al[t * S + s] + be[t * S + s]);
        }
        for (int64_t c = 0; c < C; c++) {
            const double l = lp[t * ldt + c];
            g[c] = exp(l) - exp(g[c] + nll - l);
        }
    }
#undef EXT
#undef SKIP
    return nll;
}

/* node: saved [0] the gradient for an incoming gradient of 1 per element ([T, N, C] or [T, C]) */
static void ctc_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi) {
    ts_tensor *g = tsi_node_saved(n, 0);
    if (!go[0] || !g) return;
    if (g->shape.ndim == 3) { /* [N] -> [1, N, 1] */
        const int64_t N = g->shape.dims[1];
        gi[0] = ts_mul(g, ts_reshape(go[0], TS_SHAPE(1, N, 1)));
    } else {
        gi[0] = ts_mul(g, go[0]);
    }
}

static ts_tensor *finish(ts_tensor *y) {
    y = ts_error() == TS_OK && y ? ts_keep(y) : NULL;
    ts_scope_end();
    return y;
}

#define FAIL(code, ...) (tsi_error_set(code, __VA_ARGS__), (ts_tensor *)NULL)

/* the labels of every element, gathered into one array with offsets; false + error */
static bool gather_labels(const char *op, ts_tensor *targets, bool batched, const int64_t *tl,
                          int64_t N, int64_t C, int64_t **labs, int64_t *off) {
    const int tnd = targets->shape.ndim;
    if (!tsi_is_int(targets->dtype))
        return tsi_error_set(TS_ERR_DTYPE, "%s: targets must be integral, got %s", op,
                             tsi_desc(targets)),
               false;
    if (batched ? tnd != 1 && tnd != 2 : tnd != 1)
        return tsi_error_set(TS_ERR_SHAPE, "%s: targets must be %s, got %s", op,
                             batched ? "[N, S] or 1-D" : "1-D (unbatched log_probs)",
                             tsi_desc(targets)),
               false;
    const bool padded = batched && tnd == 2;
    int64_t total = 0;
    for (int64_t b = 0; b < N; b++) off[b] = total, total += tl[b];
    off[N] = total;
    if (padded && targets->shape.dims[0] != N)
        return tsi_error_set(TS_ERR_SHAPE, "%s: targets has %lld rows for a batch of %lld", op,
                             (long long)targets->shape.dims[0], (long long)N),
               false;
    const int64_t width = padded ? targets->shape.dims[1] : targets->shape.dims[0];
    for (int64_t b = 0; b < N; b++)
        if (padded ? tl[b] > width : false)
            return tsi_error_set(TS_ERR_SHAPE, "%s: target length %lld exceeds targets' width %lld",
                                 op, (long long)tl[b], (long long)width),
                   false;
    if (!padded && total > width)
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s: the target lengths add up to %lld, more than the %lld "
                             "concatenated targets",
                             op, (long long)total, (long long)width),
               false;
    int64_t *all = tsi_host_values(op, targets, TS_I64);
    if (!all) return false;
    int64_t *out = malloc((size_t)(total ? total : 1) * sizeof *out);
    if (!out) return free(all), tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op), false;
    for (int64_t b = 0; b < N; b++)
        for (int64_t k = 0; k < tl[b]; k++) {
            const int64_t v = padded ? all[b * width + k] : all[off[b] + k];
            if (v < 0 || v >= C) {
                free(all), free(out);
                return tsi_error_set(TS_ERR_ARG,
                                     "%s: target labels must be in [0, %lld), got %lld (element "
                                     "%lld)",
                                     op, (long long)C, (long long)v, (long long)b),
                       false;
            }
            out[off[b] + k] = v;
        }
    free(all);
    *labs = out;
    return true;
}

ts_tensor *ts_ctc_loss(ts_tensor *lp, ts_tensor *targets, const int64_t *il, const int64_t *tl,
                       int64_t n, int64_t blank, ts_reduction r, bool zero_infinity) {
    const char *op = "ctc_loss";
    tsi_init();
    if (!tsi_check_input(op, lp, "log_probs") || !tsi_check_input(op, targets, "targets"))
        return NULL;
    if (!tsi_meta_refuse(op, lp)) return NULL;
    if (!tsi_is_float(lp->dtype))
        return FAIL(TS_ERR_DTYPE, "%s: log_probs must be floating point, got %s", op, tsi_desc(lp));
    const int nd = lp->shape.ndim;
    if (nd != 2 && nd != 3)
        return FAIL(TS_ERR_SHAPE, "%s: log_probs must be [T, N, C] or [T, C], got %s", op,
                    tsi_desc(lp));
    if (r != TS_REDUCTION_MEAN && r != TS_REDUCTION_SUM && r != TS_REDUCTION_NONE)
        return FAIL(TS_ERR_ARG, "%s: reduction must be 'none', 'mean' or 'sum'", op);
    const bool batched = nd == 3;
    const int64_t T = lp->shape.dims[0], N = batched ? lp->shape.dims[1] : 1;
    const int64_t C = lp->shape.dims[nd - 1];
    if (!il || !tl)
        return FAIL(TS_ERR_ARG, "%s: input_lengths and target_lengths must not be NULL", op);
    if (n != N)
        return FAIL(TS_ERR_SHAPE,
                    "%s: input_lengths and target_lengths must have one entry per batch element "
                    "(%lld), got %lld",
                    op, (long long)N, (long long)n);
    if (blank < 0 || blank >= C)
        return FAIL(TS_ERR_ARG, "%s: blank must be in label range [0, %lld), got %lld", op,
                    (long long)C, (long long)blank);
    for (int64_t b = 0; b < N; b++) {
        if (il[b] < 0 || il[b] > T)
            return FAIL(TS_ERR_ARG,
                        "%s: input length %lld of element %lld is outside [0, %lld] (the frames "
                        "of log_probs)",
                        op, (long long)il[b], (long long)b, (long long)T);
        if (tl[b] < 0)
            return FAIL(TS_ERR_ARG, "%s: target length %lld of element %lld is negative", op,
                        (long long)tl[b], (long long)b);
    }
    if (!tsi_same_device(op, (ts_tensor *[]){lp, targets}, 2, false, &(ts_device){0})) return NULL;
    ts_scope_begin();
    int64_t *off = malloc((size_t)(N + 1) * sizeof *off), *labs = NULL;
    if (!off) return tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op), finish(NULL);
    if (!gather_labels(op, targets, batched, tl, N, C, &labs, off)) return free(off), finish(NULL);
    const bool need = tsi_needs_graph(&lp, 1);
    double *v = tsi_host_values(op, lp, TS_F64);
    int64_t Lmax = 0;
    for (int64_t b = 0; b < N; b++) Lmax = tl[b] > Lmax ? tl[b] : Lmax;
    double *work = malloc((size_t)(2 * (2 * Lmax + 1) * (T ? T : 1)) * sizeof(double));
    double *loss = malloc((size_t)(N ? N : 1) * sizeof(double));
    const int64_t TNC = T * N * C;
    double *grad = need ? calloc((size_t)(TNC ? TNC : 1), sizeof(double)) : NULL;
    ts_tensor *y = NULL, *g = NULL;
    if (!v || !work || !loss || (need && !grad)) {
        if (v) tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op);
        goto done;
    }
    for (int64_t b = 0; b < N; b++) { /* frame t of element b at v[(t N + b) C] */
        double *gb = grad ? grad + b * C : NULL;
        loss[b] = ctc_one(v + b * C, N * C, il[b], C, labs + off[b], tl[b], blank, work, gb);
        if (zero_infinity && isinf(loss[b])) {
            loss[b] = 0.0;
            if (gb)
                for (int64_t t = 0; t < T; t++) memset(gb + t * N * C, 0, (size_t)C * 8);
        }
    }
    const ts_device dev = tsi_device(lp);
    y = tsi_from_f64(batched ? TS_SHAPE(N) : TS_SHAPE(), loss, lp->dtype, dev);
    if (y && need) {
        g = tsi_from_f64(lp->shape, grad, lp->dtype, dev);
        if (!g) goto done;
        ts_node *node = tsi_record("CtcLossBackward0", op, ctc_backward, &lp, 1, y, &g, 1);
        if (node) node->flags |= TSI_NODE_ONCE;
    }
    if (y && r != TS_REDUCTION_NONE) {
        if (r == TS_REDUCTION_SUM) {
            y = ts_sum(y);
        } else {
            double *den = malloc((size_t)(N ? N : 1) * sizeof(double));
            if (!den) {
                tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op);
                y = NULL;
                goto done;
            }
            for (int64_t b = 0; b < N; b++) den[b] = tl[b] > 1 ? (double)tl[b] : 1.0;
            ts_tensor *d = tsi_from_f64(batched ? TS_SHAPE(N) : TS_SHAPE(), den, lp->dtype, dev);
            free(den);
            y = d ? ts_mean(ts_div(y, d)) : NULL;
        }
    }
done:
    free(off), free(labs), free(v), free(work), free(loss), free(grad);
    return finish(y);
}
