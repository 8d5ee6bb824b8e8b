/* loss_linear_ce.c — torch.nn.functional.linear_cross_entropy: cross_entropy of a linear layer's
 * logits. Two forms with one result:
 *  - the reference (chunk_rows 0, and every case the chunked form does not take): linear, reshape
 *    to [N, C, d1..dK], cross_entropy_ex, each op recording its own backward;
 *  - the chunked form (chunk_rows > 0, a [C, in] weight, a [C] bias or none, input [N, in] or
 *    [in], a target that needs no gradient): the forward computes the losses chunk_rows rows at a
 *    time without a graph, and one node (LinearCrossEntropyBackward0) recomputes each chunk's
 *    logits and softmax in backward, so at most chunk_rows x C logits live at once (the point of
 *    PyTorch's LinearCrossEntropyLoss). Its gradient of the logits, per row i with upstream scale
 *    s_i, class weights w (ones without), smoothing e and C classes:
 *      class index t (not ignored): ((1 - e) w_t + e/C sum(w)) p - (1 - e) w_t onehot(t) - e/C w
 *      probabilities y:             sum(w y') p - w y',  y' = (1 - e) y + e / C
 *    times s_i (ignored rows: 0), the derivative of cross_entropy's per-row loss
 *    -(1 - e) w_t log p_t - e/C sum_c w_c log p_c (resp. -sum_c w_c y'_c log p_c). Under
 *    create_graph the node takes every row as one chunk and the same formula out of place, so its
 *    ops record the gradient's graph and it is differentiable again (PyTorch's chunked path is
 *    not). */
#include <stdlib.h>

#include "nn/functional_internal.h"

static const char *OP = "linear_cross_entropy";

/* the cross_entropy of the logits (the reference) */
static ts_tensor *reference(ts_tensor *x, ts_tensor *w, ts_tensor *b, ts_tensor *t, ts_loss_opts o,
                            ts_shape logits_shape) {
    const int64_t in = w->shape.dims[w->shape.ndim - 1];
    ts_tensor *w2 = ts_reshape(w, TS_SHAPE(-1, in));
    ts_tensor *b1 = b ? ts_reshape(b, TS_SHAPE(-1)) : NULL;
    ts_tensor *z = w2 && (!b || b1) ? ts_linear(x, w2, b1) : NULL;
    ts_tensor *zl = z ? ts_reshape(z, logits_shape) : NULL;
    return zl ? ts_cross_entropy_ex(zl, t, o) : NULL;
}

/* node->ip: 0 reduction, 1 ignore_index, 2 chunk rows, 3 probability target, 4 unbatched;
 * p[0] label smoothing; saved: 0 input (2-D), 1 weight, 2 bias, 3 target (2-D / 1-D),
 * 4 class weight, 5 the mean's divisor (0-dim) */
enum { S_X, S_W, S_B, S_T, S_CW, S_DIV, S_N };

/* softmax(x W^T + b) of one chunk, the logits freed on the way */
static ts_tensor *chunk_softmax(ts_tensor *xc, ts_tensor *w, ts_tensor *b) {
    ts_scope_begin();
    ts_tensor *P = ts_softmax(ts_linear(xc, w, b), 1);
    P = P ? ts_keep(P) : NULL;
    ts_scope_end();
    return P;
}

/* chunk_grad's steps on P: in place (a chunk then holds about two [B, C] tensors), or out of place
 * under create_graph (an in-place step would save a detached value: no double backward) */
static ts_tensor *mul_on(bool ip, ts_tensor *P, ts_tensor *b) {
    return ip ? ts_mul_(P, b) : ts_mul(P, b);
}
static ts_tensor *sub_on(bool ip, ts_tensor *P, ts_tensor *b) {
    return ip ? ts_sub_(P, b) : ts_sub(P, b);
}
static ts_tensor *add_scalar_on(bool ip, ts_tensor *P, double v) {
    return ip ? ts_add_scalar_(P, v) : ts_add_scalar(P, v);
}
static ts_tensor *scatter_add_on(bool ip, ts_tensor *P, ts_tensor *index, ts_tensor *src) {
    return ip ? ts_scatter_add_(P, 1, index, src) : ts_scatter_add(P, 1, index, src);
}

/* d loss_rows / d logits for one chunk's softmax P [B, C] (overwritten and returned where ip),
 * times the per-row upstream scale s ([B, 1] or 0-dim); see the file's comment. */
static ts_tensor *chunk_grad(ts_tensor *P, ts_tensor *t, ts_tensor *cw, double sumw, bool prob,
                             int64_t ignore, double e, ts_tensor *s, bool ip) {
    if (!P) return NULL;
    const int64_t C = P->shape.dims[1];
    if (prob) { /* sum(w y') p - w y' */
        ts_tensor *wy = ts_add_scalar(ts_mul_scalar(t, 1.0 - e), e / (double)C);
        if (cw) wy = ts_mul_(wy, ts_unsqueeze(cw, 0));
        P = mul_on(ip, P, ts_sum_dim(wy, 1, true));
        P = sub_on(ip, P, wy);
        return mul_on(ip, P, s);
    }
    /* ((1 - e) w_t + e/C sum(w)) p - e/C w, then - (1 - e) w_t at t; ignored rows zero */
    ts_tensor *ign = ts_eq_scalar(t, (double)ignore);
    ts_tensor *tc = ts_masked_fill(t, ign, 0.0); /* ignored rows point at class 0, then zeroed */
    ts_tensor *wt = cw ? ts_index_select(cw, 0, tc) : ts_ones_like(ts_to_dtype(t, P->dtype));
    ts_tensor *a = ts_unsqueeze(ts_mul_scalar(wt, 1.0 - e), 1); /* [B, 1] */
    P = mul_on(ip, P, ts_add_scalar(a, e / (double)C * sumw));
    if (e != 0.0) {
        if (cw)
            P = sub_on(ip, P, ts_unsqueeze(ts_mul_scalar(cw, e / (double)C), 0));
        else
            P = add_scalar_on(ip, P, -e / (double)C);
    }
    P = scatter_add_on(ip, P, ts_unsqueeze(tc, 1), ts_neg(a));
    ts_tensor *keep = ts_unsqueeze(ts_to_dtype(ts_logical_not(ign), P->dtype), 1);
    return mul_on(ip, P, ts_mul(keep, s));
}

/* Under create_graph: every row at once, out of place (the chunks' in-place accumulation would
 * not record the gradient's graph) */
static void whole_backward(ts_node *n, ts_tensor *x, ts_tensor *w, ts_tensor *b, ts_tensor *t,
                           ts_tensor *cw, double sumw, ts_tensor *s, ts_tensor **gi) {
    ts_tensor *P = ts_softmax(ts_linear(x, w, b), 1);
    ts_tensor *G = chunk_grad(P, t, cw, sumw, n->ip[3] != 0, n->ip[1], n->p[0], s, false);
    if (!G) return;
    if (tsi_node_needs(n, 0)) {
        ts_tensor *gx = ts_matmul(G, w);
        gi[0] = n->ip[4] ? ts_reshape(gx, n->in_shape[0]) : gx;
    }
    if (tsi_node_needs(n, 1)) gi[1] = ts_matmul(ts_t(G), x);
    if (b && tsi_node_needs(n, 2)) gi[2] = ts_sum_dim(G, 0, false);
}

static void chunked_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi) {
    if (!go[0]) return;
    ts_tensor *x = tsi_node_saved(n, S_X), *w = tsi_node_saved(n, S_W);
    ts_tensor *b = tsi_node_has_saved(n, S_B) ? tsi_node_saved(n, S_B) : NULL;
    ts_tensor *t = tsi_node_saved(n, S_T);
    ts_tensor *cw = tsi_node_has_saved(n, S_CW) ? tsi_node_saved(n, S_CW) : NULL;
    if (!x || !w || !t) return;
    const ts_reduction r = (ts_reduction)n->ip[0];
    const int64_t N = x->shape.dims[0], chunk = n->ip[2];
    const bool prob = n->ip[3] != 0;
    /* the upstream scale: per row (none) or one number (sum; mean over the divisor) */
    ts_tensor *s = go[0];
    if (r == TS_REDUCTION_MEAN) s = ts_div(s, tsi_node_saved(n, S_DIV));
    if (r == TS_REDUCTION_NONE) s = ts_reshape(s, TS_SHAPE(N, 1));
    const double sumw = cw ? ts_item(ts_sum(cw)) : (double)w->shape.dims[0]; /* sum of weights */
    if (tsi_create_graph_active()) {
        whole_backward(n, x, w, b, t, cw, sumw, s, gi);
        return;
    }
    /* the gradients accumulate in place: one input-, weight- and bias-sized tensor each */
    const ts_opts xo = {.dtype = x->dtype, .device = ts_device_of(x)};
    ts_tensor *gx = tsi_node_needs(n, 0) ? ts_zeros(x->shape, xo) : NULL;
    ts_tensor *gw = tsi_node_needs(n, 1) ? ts_zeros(w->shape, xo) : NULL;
    ts_tensor *gb = b && tsi_node_needs(n, 2) ? ts_zeros(b->shape, xo) : NULL;
    for (int64_t r0 = 0; r0 < N && ts_error() == TS_OK; r0 += chunk) {
        const int64_t nb = N - r0 < chunk ? N - r0 : chunk;
        ts_scope_begin();
        ts_tensor *xc = ts_narrow(x, 0, r0, nb);
        ts_tensor *G =
            chunk_grad(chunk_softmax(xc, w, b), ts_narrow(t, 0, r0, nb), cw, sumw, prob, n->ip[1],
                       n->p[0], r == TS_REDUCTION_NONE ? ts_narrow(s, 0, r0, nb) : s, true);
        if (gx) ts_copy_(ts_narrow(gx, 0, r0, nb), ts_matmul(G, w));
        if (gw) ts_add_(gw, ts_matmul(ts_t(G), xc));
        if (gb) ts_add_(gb, ts_sum_dim(G, 0, false));
        ts_scope_end();
    }
    if (gx) gi[0] = n->ip[4] ? ts_reshape(gx, n->in_shape[0]) : gx;
    gi[1] = gw;
    if (b) gi[2] = gb;
}

/* the chunked form: x [N, in] (unbatched: [1, in] and t [1] / [1, C]) */
static ts_tensor *chunked(ts_tensor *x0, ts_tensor *w, ts_tensor *b, ts_tensor *t0, ts_loss_opts o,
                          bool prob, int64_t chunk) {
    const bool unbatched = x0->shape.ndim == 1;
    const int64_t ignore = o.has_ignore_index ? o.ignore_index : -100;
    ts_tensor *ins[3] = {x0, w, b};
    const bool graph = tsi_needs_graph(ins, 3);
    ts_scope_begin();
    ts_tensor *x = unbatched ? ts_unsqueeze(x0, 0) : x0;
    ts_tensor *t = unbatched ? ts_unsqueeze(t0, 0) : t0;
    const int64_t N = x ? x->shape.dims[0] : 0;
    ts_tensor *rows = NULL, *div = NULL, *y = NULL;
    ts_no_grad_begin();
    {
        const int64_t nch = N > 0 ? (N + chunk - 1) / chunk : 0;
        ts_tensor **parts = nch ? calloc((size_t)nch, sizeof *parts) : NULL;
        if (nch && !parts) tsi_error_set(TS_ERR_OOM, "%s: out of host memory", OP);
        ts_loss_opts ro = o;
        ro.reduction = TS_REDUCTION_NONE;
        for (int64_t c = 0, r0 = 0; c < nch && ts_error() == TS_OK; c++, r0 += chunk) {
            const int64_t nb = N - r0 < chunk ? N - r0 : chunk;
            ts_scope_begin(); /* one chunk's logits at a time: freed before the next */
            ts_tensor *l = ts_cross_entropy_ex(ts_linear(ts_narrow(x, 0, r0, nb), w, b),
                                               ts_narrow(t, 0, r0, nb), ro);
            parts[c] = l ? ts_keep(l) : NULL;
            ts_scope_end();
        }
        if (!nch) /* no rows: cross_entropy's own answer on empty logits */
            rows = ts_cross_entropy_ex(ts_linear(x, w, b), t, ro);
        else if (ts_error() == TS_OK)
            rows = nch == 1 ? parts[0] : ts_cat(parts, (int)nch, 0);
        free(parts);
        /* mean: over the rows (probabilities) or the weights of the targets not ignored */
        if (o.reduction == TS_REDUCTION_MEAN && rows) {
            if (prob)
                div = ts_scalar((double)N,
                                (ts_opts){.dtype = rows->dtype, .device = ts_device_of(rows)});
            else {
                ts_tensor *ign = ts_eq_scalar(t, (double)ignore);
                ts_tensor *tc = ts_masked_fill(t, ign, 0.0);
                ts_tensor *wt = o.weight
                                    ? ts_to_dtype(ts_index_select(o.weight, 0, tc), rows->dtype)
                                    : ts_ones_like(rows);
                div = ts_sum(ts_masked_fill(wt, ign, 0.0));
            }
        }
        if (rows)
            y = o.reduction == TS_REDUCTION_NONE ? (unbatched ? ts_reshape(rows, TS_SHAPE()) : rows)
                : o.reduction == TS_REDUCTION_SUM ? ts_sum(rows)
                                                  : ts_div(ts_sum(rows), div);
        if (y && ts_error() == TS_OK) y = ts_contiguous(y);
    }
    ts_no_grad_end();
    if (y && graph && ts_error() == TS_OK) {
        ts_tensor *saves[S_N] = {x, w, b, t, o.weight, div};
        ts_node *n =
            tsi_record("LinearCrossEntropyBackward0", OP, chunked_backward, ins, 3, y, saves, S_N);
        if (n) {
            n->ip[0] = o.reduction, n->ip[1] = ignore, n->ip[2] = chunk, n->ip[3] = prob,
            n->ip[4] = unbatched, n->p[0] = o.label_smoothing;
            n->flags |= TSI_NODE_TWICE; /* whole_backward under create_graph */
        }
    }
    y = ts_error() == TS_OK && y ? ts_keep(y) : NULL;
    ts_scope_end();
    return y;
}

ts_tensor *ts_linear_cross_entropy(ts_tensor *input, ts_tensor *weight, ts_tensor *bias,
                                   ts_tensor *target, ts_loss_opts o, int64_t chunk_rows) {
    tsi_init();
    if (!tsi_check_input(OP, input, "input") || !tsi_check_input(OP, weight, "linear_weight") ||
        !tsi_check_input(OP, target, "target") ||
        (bias && !tsi_check_input(OP, bias, "linear_bias")))
        return NULL;
    if (input->shape.ndim < 1 || input->shape.ndim > 2)
        return tsi_error_set(TS_ERR_SHAPE, "%s: expected input with dimensionality 1 or 2, got %d",
                             OP, input->shape.ndim),
               NULL;
    if (weight->shape.ndim < 2)
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s: expected linear_weight with dimensionality at least 2, got %d",
                             OP, weight->shape.ndim),
               NULL;
    const int wd = weight->shape.ndim;
    const int64_t in = input->shape.dims[input->shape.ndim - 1], C = weight->shape.dims[0];
    if (in != weight->shape.dims[wd - 1])
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s: expected equal input and linear_weight last dimensions "
                             "(in_features), got %lld and %lld, respectively",
                             OP, (long long)in, (long long)weight->shape.dims[wd - 1]),
               NULL;
    /* the bias: [C, d1..dK], the weight's shape without in_features */
    ts_shape bs = weight->shape;
    bs.ndim = wd - 1;
    if (bias) {
        bool eq = bias->shape.ndim == bs.ndim;
        for (int i = 0; eq && i < bs.ndim; i++) eq = bias->shape.dims[i] == bs.dims[i];
        if (!eq)
            return tsi_error_set(TS_ERR_SHAPE, "%s: expected linear_bias shape %s, got %s", OP,
                                 tsi_shape_str(bs), tsi_shape_str(bias->shape)),
                   NULL;
    }
    const bool batched = input->shape.ndim == 2;
    if (wd > 2 && !batched)
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s: K-dimensional loss defined by linear_weight shape %s requires "
                             "batched input, (N, %lld), got unbatched input with shape %s",
                             OP, tsi_shape_str(weight->shape), (long long)in,
                             tsi_shape_str(input->shape)),
               NULL;
    /* the logits' shape: [N, C, d1..dK] or [C] */
    ts_shape ls = {0};
    if (batched) ls.dims[ls.ndim++] = input->shape.dims[0];
    for (int i = 0; i < bs.ndim; i++) ls.dims[ls.ndim++] = bs.dims[i];
    bool prob = target->shape.ndim == ls.ndim;
    for (int i = 0; prob && i < ls.ndim; i++) prob = target->shape.dims[i] == ls.dims[i];
    if (prob && o.has_ignore_index)
        return tsi_error_set(TS_ERR_ARG,
                             "%s: ignore_index cannot be specified when target contains "
                             "probabilities",
                             OP),
               NULL;
    if (chunk_rows < 0)
        return tsi_error_set(TS_ERR_ARG, "%s: chunk_rows must be >= 0, but got %lld", OP,
                             (long long)chunk_rows),
               NULL;
    (void)C;
    const bool chunk_ok = chunk_rows > 0 && wd == 2 && !target->requires_grad &&
                          (prob ? tsi_is_float(target->dtype) : target->dtype == TS_I64) &&
                          input->dtype == weight->dtype && (!bias || bias->dtype == input->dtype) &&
                          (!prob || target->dtype == input->dtype) &&
                          (!o.weight || o.weight->dtype == input->dtype) &&
                          tsi_is_float(input->dtype);
    ts_tensor *y;
    if (chunk_ok) {
        ts_tensor *all[5] = {input, weight, bias, target, o.weight};
        ts_device dev;
        if (!tsi_same_device(OP, all, 5, false, &dev)) return NULL;
        y = chunked(input, weight, bias, target, o, prob, chunk_rows);
        return y;
    }
    ts_scope_begin();
    y = reference(input, weight, bias, target, o, ls);
    y = ts_error() == TS_OK && y ? ts_keep(y) : NULL;
    ts_scope_end();
    return y;
}
