/* pool_nd.c — 1-d and 3-d max / average pooling, power-average pooling, adaptive pooling (avg
 * 1-d / 3-d, max 1-d to 3-d) and max unpooling (include/tessera/pool_norm.h), composed from the
 * 2-d pooling ops of pool.c (1-d: a height-1 view; 3-d: the pools are separable, H and W first
 * over [N, C*D, H, W], then D over [N, C, D, OH*OW]), gathers, scatters and reductions: every
 * device, autograd through those ops. */
#include <stdio.h>
#include <stdlib.h>

#include "nn/functional_internal.h"
#include "tessera/pool_norm.h"

typedef struct nd_geom {
    bool batched;
    int64_t n, c, s[3], o[3]; /* batch (1 when unbatched), channels, input and output sizes */
} nd_geom;

static const char *op_name(const char *fam, int nd, char *buf, size_t cap) {
    snprintf(buf, cap, "%s%dd", fam, nd);
    return buf;
}

static bool check_nd(const char *op, int nd) {
    if (nd >= 1 && nd <= 3) return true;
    return tsi_error_set(TS_ERR_ARG, "%s: nd must be 1, 2 or 3, got %d", op, nd), false;
}

/* [C, *S] or [N, C, *S] with S of nd dims, floating; only N may be 0 (C too when allow_empty_c) */
static bool nd_input(const char *op, ts_tensor *x, int nd, bool allow_empty_c, nd_geom *g) {
    if (!tsi_check_input(op, x, "input")) return false;
    if (!tsi_is_float(x->dtype))
        return tsi_error_set(TS_ERR_DTYPE,
                             "%s: not implemented for %s; convert it to a floating dtype first "
                             "(ts_to_dtype)",
                             op, tsi_desc(x)),
               false;
    const ts_shape s = x->shape;
    bool ok = s.ndim == nd + 1 || s.ndim == nd + 2;
    const int lead = ok ? s.ndim - nd - 1 : 0;
    for (int i = lead; ok && i < s.ndim; i++) ok = s.dims[i] > 0 || (i == lead && allow_empty_c);
    if (!ok)
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s: Expected %dD or %dD (batch mode) tensor with optional 0 dim "
                             "batch size for input, but got: %s",
                             op, nd + 1, nd + 2, tsi_shape_str(s)),
               false;
    g->batched = lead == 1;
    g->n = lead ? s.dims[0] : 1;
    g->c = s.dims[lead];
    for (int i = 0; i < nd; i++) g->s[i] = s.dims[lead + 1 + i];
    return true;
}

/* PyTorch's pooling_output_shape (as pool.c's): floor or ceil division; in ceil mode the last
 * window must start inside the input or its left padding */
static int64_t out_size(int64_t in, int64_t k, int64_t pad, int64_t s, int64_t d, bool ceil) {
    int64_t num = in + 2 * pad - d * (k - 1) - 1 + (ceil ? s - 1 : 0);
    int64_t q = num / s;
    if (num % s != 0 && num < 0) q--;
    int64_t out = q + 1;
    if (ceil && (out - 1) * s >= in + pad) out--;
    return out;
}

/* the options (defaults filled in) and output sizes; avg: no dilation */
static bool nd_params(const char *op, int nd, ts_pool_opts *o, bool avg, nd_geom *g) {
    for (int i = 0; i < nd; i++) {
        if (o->stride[i] == 0) o->stride[i] = o->kernel[i];
        if (o->dilation[i] == 0) o->dilation[i] = 1;
        const char *bad = o->kernel[i] <= 0                  ? "kernel_size"
                          : o->stride[i] <= 0                ? "stride"
                          : o->dilation[i] <= 0              ? "dilation"
                          : o->padding[i] < 0                ? "padding"
                          : avg && o->dilation[i] != 1       ? "dilation (avg pooling has none)"
                          : o->padding[i] > o->kernel[i] / 2 ? "padding (at most half the kernel)"
                                                             : NULL;
        if (bad)
            return tsi_error_set(TS_ERR_ARG,
                                 "%s: invalid %s in dim %d: kernel_size %d, stride %d, padding "
                                 "%d, dilation %d",
                                 op, bad, i, o->kernel[i], o->stride[i], o->padding[i],
                                 o->dilation[i]),
                   false;
        g->o[i] = out_size(g->s[i], o->kernel[i], o->padding[i], o->stride[i], o->dilation[i],
                           o->ceil_mode);
        if (g->o[i] < 1)
            return tsi_error_set(TS_ERR_SHAPE,
                                 "%s: given input size %lld in dim %d, the calculated output size "
                                 "%lld is too small",
                                 op, (long long)g->s[i], i, (long long)g->o[i]),
                   false;
    }
    return true;
}

/* the 2-d options of dims (i, j) of o; i < 0: a size-1 dim (kernel 1, stride 1, no padding) */
static ts_pool2d_opts opts2(const ts_pool_opts *o, int i, int j, int divisor) {
    ts_pool2d_opts p = {
        .ceil_mode = o->ceil_mode, .exclude_pad = o->exclude_pad, .divisor_override = divisor};
    const int ix[2] = {i, j};
    for (int a = 0; a < 2; a++) {
        const int d = ix[a];
        p.kernel[a] = d < 0 ? 1 : o->kernel[d];
        p.stride[a] = d < 0 ? 1 : o->stride[d];
        p.padding[a] = d < 0 ? 0 : o->padding[d];
        p.dilation[a] = d < 0 ? 1 : o->dilation[d];
    }
    return p;
}

/* the 2-d pool: max (with indices when idx) or avg */
static ts_tensor *pool2(ts_tensor *x, bool avg, ts_pool2d_opts p, ts_tensor **idx) {
    if (!x) return NULL;
    if (avg) return ts_avg_pool2d(x, p);
    return idx ? ts_max_pool2d_with_indices(x, p, idx) : ts_max_pool2d(x, p);
}

static ts_tensor *i64_scalar(int64_t v, ts_tensor *like) {
    return ts_scalar((double)v, (ts_opts){.dtype = TS_I64, .device = ts_device_of(like)});
}

/* result shape: [N?, C, *sp] */
static ts_shape out_shape(const nd_geom *g, int nd, const int64_t *sp) {
    int64_t d[TS_MAX_DIMS] = {0};
    int k = 0;
    if (g->batched) d[k++] = g->n;
    d[k++] = g->c;
    for (int i = 0; i < nd; i++) d[k++] = sp[i];
    return ts_shape_make(k, d);
}

/* 1-d: the 2-d pool over [.., C, 1, L] */
static ts_tensor *pool1(ts_tensor *x, bool avg, const ts_pool_opts *o, int divisor,
                        ts_tensor **idx) {
    const int h = x->shape.ndim - 1;
    ts_tensor *i2 = NULL;
    ts_tensor *y = pool2(ts_unsqueeze(x, h), avg, opts2(o, -1, 0, divisor), idx ? &i2 : NULL);
    if (idx) *idx = i2 ? ts_squeeze_dim(i2, h) : NULL;
    return y ? ts_squeeze_dim(y, h) : NULL;
}

/* 3-d: H and W over [N, C*D, H, W], then D over [N, C, D, OH*OW]. A sum (divisor 1 in both
 * passes) then divided when divisor_override is set; indices combined: the D pass's row d and the
 * HW pass's position at that row. */
static ts_tensor *pool3(ts_tensor *x, bool avg, const ts_pool_opts *o, const nd_geom *g,
                        ts_tensor **idx) {
    const int64_t N = g->n, C = g->c, D = g->s[0], H = g->s[1], W = g->s[2];
    const int64_t OD = g->o[0], OH = g->o[1], OW = g->o[2];
    const int div = avg && o->divisor_override ? 1 : 0;
    ts_tensor *i1 = NULL, *i2 = NULL;
    ts_tensor *y1 =
        pool2(ts_reshape(x, TS_SHAPE(N, C * D, H, W)), avg, opts2(o, 1, 2, div), idx ? &i1 : NULL);
    ts_tensor *y2 = pool2(y1 ? ts_reshape(y1, TS_SHAPE(N, C, D, OH * OW)) : NULL, avg,
                          opts2(o, 0, -1, div), idx ? &i2 : NULL);
    if (div && y2) y2 = ts_div_scalar(y2, o->divisor_override);
    ts_shape os = out_shape(g, 3, g->o);
    if (idx) {
        *idx = NULL;
        if (i1 && i2) {
            ts_tensor *d = ts_floor_divide(i2, i64_scalar(OH * OW, i2));
            ts_tensor *hw = ts_gather(ts_reshape(i1, TS_SHAPE(N, C, D, OH * OW)), 2, d);
            ts_tensor *flat = ts_add(ts_mul(d, i64_scalar(H * W, i2)), hw);
            *idx = flat ? ts_reshape(flat, os) : NULL;
        }
        (void)OD;
    }
    return y2 ? ts_reshape(y2, os) : NULL;
}

/* keeps y (and *idx when wanted) past the scope the caller opened and closes it */
static ts_tensor *finish(ts_tensor *y, ts_tensor *idx, ts_tensor **indices) {
    if (indices && y && !idx) y = NULL; /* the indices failed: the error is set */
    y = ts_keep(y);
    if (indices) {
        *indices = y ? ts_keep(idx) : NULL;
        if (y && !*indices) {
            ts_release(y);
            y = NULL;
        }
    }
    ts_scope_end();
    return y;
}

static ts_tensor *pool_nd(const char *fam, ts_tensor *x, int nd, ts_pool_opts o, bool avg,
                          ts_tensor **indices) {
    char buf[32];
    const char *op = op_name(fam, nd, buf, sizeof buf);
    tsi_init();
    if (indices) *indices = NULL;
    nd_geom g;
    if (!check_nd(op, nd) || !nd_input(op, x, nd, false, &g) || !nd_params(op, nd, &o, avg, &g))
        return NULL;
    ts_scope_begin();
    ts_tensor *idx = NULL, *y;
    if (nd == 1) {
        y = pool1(x, avg, &o, avg && o.divisor_override ? 1 : 0, indices ? &idx : NULL);
        if (y && avg && o.divisor_override) y = ts_div_scalar(y, o.divisor_override);
    } else if (nd == 2) { /* a negative divisor_override (ATen divides by any nonzero one): a sum,
                             divided */
        const bool neg = avg && o.divisor_override < 0;
        y = pool2(x, avg, opts2(&o, 0, 1, neg ? 1 : o.divisor_override), indices ? &idx : NULL);
        if (y && neg) y = ts_div_scalar(y, o.divisor_override);
    } else
        y = pool3(g.batched ? x : ts_unsqueeze(x, 0), avg, &o, &g, indices ? &idx : NULL);
    return finish(y, idx, indices);
}

ts_tensor *ts_max_pool_nd(ts_tensor *x, int nd, ts_pool_opts o, ts_tensor **indices) {
    return pool_nd("max_pool", x, nd, o, false, indices);
}

ts_tensor *ts_avg_pool_nd(ts_tensor *x, int nd, ts_pool_opts o) {
    return pool_nd("avg_pool", x, nd, o, true, NULL);
}

ts_tensor *ts_lp_pool_nd(ts_tensor *x, int nd, double p, ts_pool_opts o) {
    char buf[32];
    const char *op = op_name("lp_pool", nd, buf, sizeof buf);
    tsi_init();
    if (!check_nd(op, nd)) return NULL;
    for (int i = 0; i < nd; i++)
        if (o.padding[i] || (o.dilation[i] != 0 && o.dilation[i] != 1))
            return tsi_error_set(TS_ERR_ARG, "%s: padding and dilation are not supported", op),
                   NULL;
    if (o.exclude_pad || o.divisor_override)
        return tsi_error_set(TS_ERR_ARG,
                             "%s: count_include_pad / divisor_override are not supported", op),
               NULL;
    if (!(p == p) || p == 0)
        return tsi_error_set(TS_ERR_ARG, "%s: norm_type must be a nonzero number, got %g", op, p),
               NULL;
    nd_geom g;
    if (!nd_input(op, x, nd, false, &g) || !nd_params(op, nd, &o, true, &g)) return NULL;
    double kprod = 1;
    for (int i = 0; i < nd; i++) kprod *= o.kernel[i];
    ts_scope_begin();
    /* PyTorch's: (sign(a) * relu(|a|)).mul(prod(kernel)).pow(1 / p), a = avg_pool(x^p) */
    ts_tensor *a = ts_avg_pool_nd(ts_pow_scalar(x, p), nd, o);
    ts_tensor *r = a ? ts_mul(ts_sign(a), ts_relu(ts_abs(a))) : NULL;
    ts_tensor *y = r ? ts_pow_scalar(ts_mul_scalar(r, kprod), 1.0 / p) : NULL;
    return finish(y, NULL, NULL);
}

static bool check_out(const char *op, int nd, const int64_t *out) {
    if (!out) return tsi_error_set(TS_ERR_ARG, "%s: output_size must not be NULL", op), false;
    for (int i = 0; i < nd; i++)
        if (out[i] < 0)
            return tsi_error_set(TS_ERR_ARG,
                                 "%s: elements of output_size must be greater than or equal to 0 "
                                 "but received %lld",
                                 op, (long long)out[i]),
                   false;
    return true;
}

ts_tensor *ts_adaptive_avg_pool_nd(ts_tensor *x, int nd, const int64_t *out) {
    char buf[40];
    const char *op = op_name("adaptive_avg_pool", nd, buf, sizeof buf);
    tsi_init();
    nd_geom g;
    if (!check_nd(op, nd) || !nd_input(op, x, nd, true, &g) || !check_out(op, nd, out)) return NULL;
    if (nd == 2) return ts_adaptive_avg_pool2d(x, out[0], out[1]);
    ts_scope_begin();
    ts_tensor *y;
    if (nd == 1) {
        const int h = x->shape.ndim - 1;
        y = ts_adaptive_avg_pool2d(ts_unsqueeze(x, h), 1, out[0]);
        y = y ? ts_squeeze_dim(y, h) : NULL;
    } else { /* separable: H and W, then D */
        const int64_t N = g.n, C = g.c;
        ts_tensor *y1 = ts_adaptive_avg_pool2d(
            ts_reshape(x, TS_SHAPE(N, C * g.s[0], g.s[1], g.s[2])), out[1], out[2]);
        y = y1 ? ts_adaptive_avg_pool2d(ts_reshape(y1, TS_SHAPE(N, C, g.s[0], out[1] * out[2])),
                                        out[0], out[1] * out[2])
               : NULL;
        y = y ? ts_reshape(y, out_shape(&g, 3, out)) : NULL;
    }
    return finish(y, NULL, NULL);
}

/* adaptive max pooling: every output's window (PyTorch's start floor(i * in / out), end
 * ceil((i + 1) * in / out) in each dim) as a row of K flat input positions, short windows padded
 * with their last position (a repeat never changes the maximum, and the first maximum in
 * row-major order stays first); one index_select gathers all rows, max over each. */
static ts_tensor *adaptive_max(const char *op, ts_tensor *x, int nd, const nd_geom *g,
                               const int64_t *out, ts_tensor **idx) {
    int64_t k[3] = {1, 1, 1}, q = 1, kk = 1, p = 1;
    for (int i = 0; i < nd; i++) {
        for (int64_t o = 0; o < out[i]; o++) {
            const int64_t s = o * g->s[i] / out[i], e = ((o + 1) * g->s[i] + out[i] - 1) / out[i];
            if (e - s > k[i]) k[i] = e - s;
        }
        q *= out[i], kk *= k[i], p *= g->s[i];
    }
    int64_t *tab = malloc((size_t)(q * kk > 0 ? q * kk : 1) * sizeof *tab);
    if (!tab) return tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op), NULL;
    for (int64_t r = 0; r < q * kk; r++) { /* r = (output position, window offset), row-major */
        int64_t orem = r / kk, krem = r % kk, flat = 0;
        int64_t oi[3], ki[3];
        for (int i = nd - 1; i >= 0; i--) {
            oi[i] = orem % out[i], orem /= out[i];
            ki[i] = krem % k[i], krem /= k[i];
        }
        for (int i = 0; i < nd; i++) {
            const int64_t s = oi[i] * g->s[i] / out[i];
            const int64_t e = ((oi[i] + 1) * g->s[i] + out[i] - 1) / out[i];
            const int64_t pos = s + ki[i] < e ? s + ki[i] : e - 1;
            flat = flat * g->s[i] + pos;
        }
        tab[r] = flat;
    }
    ts_tensor *t = ts_from_data(TS_SHAPE(q * kk), TS_I64, tab,
                                (ts_opts){.dtype = TS_I64, .device = ts_device_of(x)});
    free(tab);
    const int64_t B = g->n, C = g->c;
    ts_tensor *rows = t ? ts_index_select(ts_reshape(x, TS_SHAPE(B, C, p)), 2, t) : NULL;
    ts_tensor *am = NULL;
    ts_tensor *v = rows ? ts_max_dim(ts_reshape(rows, TS_SHAPE(B, C, q, kk)), 3, false, &am) : NULL;
    const ts_shape os = out_shape(g, nd, out);
    if (idx) {
        ts_tensor *tq =
            v ? ts_expand(ts_reshape(t, TS_SHAPE(1, 1, q, kk)), TS_SHAPE(B, C, q, kk)) : NULL;
        ts_tensor *sel = tq ? ts_gather(tq, 3, ts_unsqueeze(am, 3)) : NULL;
        *idx = sel ? ts_reshape(sel, os) : NULL;
    }
    return v ? ts_reshape(v, os) : NULL;
}

ts_tensor *ts_adaptive_max_pool_nd(ts_tensor *x, int nd, const int64_t *out, ts_tensor **indices) {
    char buf[40];
    const char *op = op_name("adaptive_max_pool", nd, buf, sizeof buf);
    tsi_init();
    if (indices) *indices = NULL;
    nd_geom g;
    if (!check_nd(op, nd) || !nd_input(op, x, nd, false, &g) || !check_out(op, nd, out))
        return NULL;
    ts_scope_begin();
    ts_tensor *idx = NULL;
    ts_tensor *y = adaptive_max(op, x, nd, &g, out, indices ? &idx : NULL);
    return finish(y, idx, indices);
}

/* max_unpool's backward: the output gradient gathered at the saved [B, C, S] indices */
static void unpool_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi) {
    ts_tensor *idx = tsi_node_saved(n, 0);
    if (!go[0] || !idx || !tsi_node_needs(n, 0)) return;
    ts_tensor *g = ts_reshape(go[0], TS_SHAPE(n->ip[0], n->ip[1], n->ip[2]));
    gi[0] = g ? ts_reshape(ts_gather(g, 2, idx), n->in_shape[0]) : NULL;
}

ts_tensor *ts_max_unpool_nd(ts_tensor *x, ts_tensor *indices, int nd, const int64_t *out) {
    char buf[32];
    const char *op = op_name("max_unpool", nd, buf, sizeof buf);
    tsi_init();
    nd_geom g;
    if (!check_nd(op, nd) || !tsi_check_input(op, indices, "indices") ||
        !nd_input(op, x, nd, false, &g) || !check_out(op, nd, out))
        return NULL;
    ts_tensor *both[2] = {x, indices};
    ts_device dev;
    if (!tsi_same_device(op, both, 2, false, &dev)) return NULL;
    if (indices->dtype != TS_I64)
        return tsi_error_set(TS_ERR_DTYPE, "%s: expected indices of dtype int64, got %s", op,
                             tsi_desc(indices)),
               NULL;
    bool same = indices->shape.ndim == x->shape.ndim;
    for (int i = 0; same && i < x->shape.ndim; i++)
        same = indices->shape.dims[i] == x->shape.dims[i];
    if (!same)
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s: Expected shape of indices to be same as that of the input "
                             "tensor (%s) but got indices tensor with shape: %s",
                             op, tsi_shape_str(x->shape), tsi_shape_str(indices->shape)),
               NULL;
    int64_t p = 1, s = 1, ignored = 0, bad = 0;
    for (int i = 0; i < nd; i++) p *= out[i], s *= g.s[i];
    if (!tsi_nn_index_scan(op, indices, p, false, 0, &ignored, &bad)) {
        if (bad < 0 || bad >= p) /* else the copy failed: its error is set */
            tsi_error_set(TS_ERR_ARG,
                          "%s: Found an invalid max index: %lld (output volumes are of size %lld)",
                          op, (long long)bad, (long long)p);
        return NULL;
    }
    ts_scope_begin();
    const int64_t B = g.n, C = g.c;
    ts_tensor *z = ts_zeros(TS_SHAPE(B, C, p), (ts_opts){.dtype = x->dtype, .device = dev});
    ts_tensor *flat = ts_contiguous(ts_reshape(indices, TS_SHAPE(B, C, s)));
    ts_tensor *y = z && flat
                       ? ts_scatter(z, 2, flat, ts_reshape(ts_detach(x), TS_SHAPE(B, C, s)), NULL)
                       : NULL;
    y = y ? ts_contiguous(ts_reshape(y, out_shape(&g, nd, out))) : NULL;
    if (y) { /* every input gets the gradient at its index, duplicates too (PyTorch's gather) */
        static const char *const names[] = {"", "MaxUnpool1DBackward0", "MaxUnpool2DBackward0",
                                            "MaxUnpool3DBackward0"};
        ts_node *n = tsi_record(names[nd], op, unpool_backward, &x, 1, y, &flat, 1);
        if (n) n->ip[0] = B, n->ip[1] = C, n->ip[2] = p, n->flags |= TSI_NODE_TWICE; /* gather */
    }
    return finish(y, NULL, NULL);
}
