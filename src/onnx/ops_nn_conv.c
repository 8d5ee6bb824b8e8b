/* ops_nn_conv.c — ONNX's convolutions (Conv, ConvTranspose) and pooling (MaxPool, AveragePool,
 * LpPool, the global pools) over 1 to 6 spatial dims on Tessera's conv2d and pool2d: 1-D runs as
 * 2-D with a unit dim, and each spatial dim before the last two is a sum (max) over its kernel taps
 * of strided slices moved into the batch, so every case stays differentiable on any device. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "onnx/ops_nn.h"
#include "ops/pad_resample.h"

#define MAXSP (TS_MAX_DIMS - 2)

typedef enum auto_pad { AP_NOTSET, AP_SAME_UPPER, AP_SAME_LOWER, AP_VALID, AP_BAD } auto_pad;

/* The geometry of one convolution or pooling: per spatial dim the input size, kernel, stride,
 * dilation, pads before / after and the output size. */
typedef struct geom {
    int nsp;
    int64_t in[MAXSP], k[MAXSP], s[MAXSP], d[MAXSP], pb[MAXSP], pe[MAXSP], out[MAXSP];
} geom;

static auto_pad read_auto_pad(const tso_node *n) {
    char buf[32];
    const char *a = tso_attr_string(n, "auto_pad", "NOTSET", buf, sizeof buf);
    if (!strcmp(a, "NOTSET") || !a[0]) return AP_NOTSET;
    if (!strcmp(a, "SAME_UPPER")) return AP_SAME_UPPER;
    if (!strcmp(a, "SAME_LOWER")) return AP_SAME_LOWER;
    if (!strcmp(a, "VALID")) return AP_VALID;
    return AP_BAD;
}

static int64_t floor_div(int64_t a, int64_t b) {
    return a / b - (a % b != 0 && (a < 0) != (b < 0));
}

/* ------------------------------------------------------------------ load-time checks */
/* an ints attribute: absent, or `want` values (want < 0: any count) each >= min */
static bool check_ints(const tso_node *n, const char *name, int want, int64_t min) {
    const int64_t *v;
    int cnt = tso_attr_ints(n, name, &v);
    if (cnt < 0) return true;
    if (want >= 0 && cnt != want)
        return tso_fail(n, TS_ERR_FORMAT, "'%s' has %d values, expected %d", name, cnt, want);
    if (cnt > 2 * MAXSP)
        return tso_fail(n, TS_ERR_UNSUPPORTED, "'%s' has %d values: at most %d spatial dims", name,
                        cnt, MAXSP);
    for (int i = 0; i < cnt; i++)
        if (v[i] < min)
            return tso_fail(n, TS_ERR_FORMAT, "'%s' holds %lld (must be at least %lld)", name,
                            (long long)v[i], (long long)min);
    return true;
}

/* the spatial attributes every operator here shares */
static bool check_spatial(const tso_node *n, bool need_kernel, bool dilations) {
    if (read_auto_pad(n) == AP_BAD) {
        char buf[64];
        return tso_fail(n, TS_ERR_UNSUPPORTED,
                        "auto_pad '%s' is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID",
                        tso_attr_string(n, "auto_pad", "", buf, sizeof buf));
    }
    const int64_t *k;
    int nk = tso_attr_ints(n, "kernel_shape", &k);
    if (need_kernel && nk < 1)
        return tso_fail(n, TS_ERR_FORMAT, "needs the kernel_shape attribute");
    if (nk > MAXSP)
        return tso_fail(n, TS_ERR_UNSUPPORTED, "%d spatial dims (at most %d)", nk, MAXSP);
    if (!check_ints(n, "kernel_shape", nk, 1) || !check_ints(n, "strides", nk, 1) ||
        !check_ints(n, "dilations", nk, 1) || !check_ints(n, "pads", nk < 0 ? -1 : 2 * nk, 0))
        return false;
    const int64_t *d;
    int nd = tso_attr_ints(n, "dilations", &d);
    for (int i = 0; !dilations && i < nd; i++)
        if (d[i] != 1)
            return tso_fail(n, TS_ERR_UNSUPPORTED, "dilations are not defined for %s at opset %d",
                            n->op_type, n->opset);
    return true;
}

/* ------------------------------------------------------------------ geometry */
/* an ints attribute's value for spatial dim i (def when absent) */
static int64_t attr_at(const tso_node *n, const char *name, int i, int64_t def) {
    const int64_t *v;
    int cnt = tso_attr_ints(n, name, &v);
    return cnt > i ? v[i] : def;
}

/* The spatial dims of x [N, C, D1, ...] and the attributes: kernel (the weight's when given, else
 * kernel_shape), strides, dilations and the explicit pads; no output sizes yet. */
static bool geom_read(const tso_node *n, ts_tensor *x, ts_tensor *w, geom *g) {
    int nd = ts_ndim(x);
    g->nsp = nd - 2;
    if (g->nsp < 1 || g->nsp > MAXSP)
        return tso_fail(n, TS_ERR_SHAPE,
                        "expected an input [N, C, D1, ...] with 1 to %d spatial dims, got %s",
                        MAXSP, tsi_desc(x));
    if (w && ts_ndim(w) != nd)
        return tso_fail(n, TS_ERR_SHAPE, "the weight %s does not fit the input %s", tsi_desc(w),
                        tsi_desc(x));
    const int64_t *ks, *pads;
    int nk = tso_attr_ints(n, "kernel_shape", &ks), np = tso_attr_ints(n, "pads", &pads);
    if (!w && nk < 0) return tso_fail(n, TS_ERR_ARG, "the kernel_shape attribute is required");
    if (nk >= 0 && nk != g->nsp)
        return tso_fail(n, TS_ERR_SHAPE,
                        "kernel_shape has %d dims, the input %s has %d spatial dims", nk,
                        tsi_desc(x), g->nsp);
    if (np >= 0 && np != 2 * g->nsp)
        return tso_fail(n, TS_ERR_SHAPE, "pads has %d values for %d spatial dims", np, g->nsp);
    const char *lists[2] = {"strides", "dilations"};
    for (int i = 0; i < 2; i++) {
        const int64_t *v;
        int cnt = tso_attr_ints(n, lists[i], &v);
        if (cnt >= 0 && cnt != g->nsp)
            return tso_fail(n, TS_ERR_SHAPE, "%s has %d values for %d spatial dims", lists[i], cnt,
                            g->nsp);
    }
    for (int i = 0; i < g->nsp; i++) {
        g->in[i] = ts_size(x, 2 + i);
        g->k[i] = w ? ts_size(w, 2 + i) : ks[i];
        if (w && ((nk >= 0 && ks[i] != g->k[i]) || g->k[i] < 1))
            return tso_fail(n, TS_ERR_SHAPE, "the weight %s does not match kernel_shape",
                            tsi_desc(w));
        g->s[i] = attr_at(n, "strides", i, 1);
        g->d[i] = attr_at(n, "dilations", i, 1);
        g->pb[i] = np < 0 ? 0 : pads[i];
        g->pe[i] = np < 0 ? 0 : pads[g->nsp + i];
    }
    return true;
}

/* n x c x prod(dims) within the cap (no overflow on the way: each factor is checked first) */
static bool within_cap(const tso_node *n, const char *what, int64_t lead, const int64_t *dims,
                       int nd) {
    const int64_t cap = tso_max_node_elements();
    int64_t total = lead < 1 ? 1 : lead;
    for (int i = 0; i < nd && total <= cap; i++) {
        const int64_t d = dims[i] < 1 ? 1 : dims[i];
        total = d > cap / total + 1 ? cap + 1 : total * d;
    }
    if (total > cap)
        return tso_fail(n, TS_ERR_UNSUPPORTED,
                        "its %s would exceed %lld elements (TS_ONNX_MAX_NODE_ELEMENTS)", what,
                        (long long)cap);
    return true;
}

/* geom_read, then the pads auto_pad asks for and the output sizes; ceil_mode rounds them up
 * (pooling) */
static bool geom_make(const tso_node *n, ts_tensor *x, ts_tensor *w, bool ceil_mode, geom *g) {
    if (!geom_read(n, x, w, g)) return false;
    auto_pad ap = read_auto_pad(n);
    for (int i = 0; i < g->nsp; i++) {
        int64_t eff = (g->k[i] - 1) * g->d[i] + 1;
        if (ap == AP_SAME_UPPER || ap == AP_SAME_LOWER) {
            g->out[i] = (g->in[i] + g->s[i] - 1) / g->s[i];
            int64_t total = (g->out[i] - 1) * g->s[i] + eff - g->in[i];
            if (total < 0) total = 0;
            g->pb[i] = ap == AP_SAME_UPPER ? total / 2 : total - total / 2;
            g->pe[i] = total - g->pb[i];
            continue;
        }
        if (ap == AP_VALID) g->pb[i] = g->pe[i] = 0;
        int64_t span = g->in[i] + g->pb[i] + g->pe[i] - eff;
        if (span < 0)
            return tso_fail(
                n, TS_ERR_SHAPE,
                "the kernel (%lld with dilation %lld) is larger than the padded input %s",
                (long long)g->k[i], (long long)g->d[i], tsi_desc(x));
        g->out[i] = (ceil_mode ? (span + g->s[i] - 1) / g->s[i] : span / g->s[i]) + 1;
        /* ceil_mode: a last window starting past the input and its front padding is dropped (as
         * ONNX's reference and onnxruntime; PyTorch's rule) */
        if (ceil_mode && (g->out[i] - 1) * g->s[i] >= g->in[i] + g->pb[i]) g->out[i]--;
    }
    /* the output, the padded input and a convolution's im2col workspace (kernel x output) per
     * image and channel: hostile pads, strides and kernels are refused before any allocation */
    const ts_shape xs = ts_shape_of(x);
    const int64_t nc = xs.ndim >= 2 ? xs.dims[0] * xs.dims[1] : 1;
    const int64_t no = w && xs.ndim >= 2 ? xs.dims[0] * ts_shape_of(w).dims[0] : nc;
    int64_t padded[MAXSP], work[2 * MAXSP];
    for (int i = 0; i < g->nsp; i++) {
        padded[i] = g->in[i] + g->pb[i] + g->pe[i];
        work[i] = g->out[i], work[g->nsp + i] = g->k[i];
    }
    return within_cap(n, "output", no, g->out, g->nsp) &&
           within_cap(n, "padded input", nc, padded, g->nsp) &&
           within_cap(n, "workspace", xs.ndim >= 2 ? xs.dims[1] : 1, work, 2 * g->nsp);
}

/* ceil_mode's last windows reach past the end padding: how far, per dim */
static void overhang(const geom *g, int64_t *extra) {
    for (int i = 0; i < g->nsp; i++) {
        int64_t reach = (g->out[i] - 1) * g->s[i] + (g->k[i] - 1) * g->d[i] + 1;
        int64_t e = reach - (g->in[i] + g->pb[i] + g->pe[i]);
        extra[i] = e > 0 ? e : 0;
    }
}

/* Tessera's pool2d / conv2d pad both sides alike, at most half the kernel for pooling */
static bool native_pads(const geom *g, const int64_t *extra, bool pool) {
    if (g->nsp > 2) return false;
    for (int i = 0; i < g->nsp; i++)
        if (g->pb[i] != g->pe[i] || g->pb[i] < 0 || (extra && extra[i]) ||
            (pool && g->pb[i] > g->k[i] / 2))
            return false;
    return true;
}

/* x with pads before[i] / after[i] of value v on its spatial dims (NULL after: the same) */
static ts_tensor *pad_spatial(ts_tensor *x, int nsp, const int64_t *before, const int64_t *after,
                              double v) {
    for (int i = 0; x && i < nsp; i++)
        x = tsi_pad_constant_dim(x, 2 + i, before ? before[i] : 0, after[i], v);
    return x;
}

/* [N, C, O0, rest...] -> [N * O0, C, rest...]: the leading spatial dim joins the batch */
static ts_tensor *to_batch(ts_tensor *x) {
    ts_shape s = ts_shape_of(x);
    ts_dims p = {.n = s.ndim};
    p.d[0] = 0, p.d[1] = 2, p.d[2] = 1;
    for (int i = 3; i < s.ndim; i++) p.d[i] = i;
    ts_shape r = {.ndim = s.ndim - 1};
    r.dims[0] = s.dims[0] * s.dims[2], r.dims[1] = s.dims[1];
    for (int i = 3; i < s.ndim; i++) r.dims[i - 1] = s.dims[i];
    return ts_reshape(ts_permute(x, p), r);
}

/* the inverse: [N * O0, C, rest...] -> [N, C, O0, rest...] */
static ts_tensor *from_batch(ts_tensor *y, int64_t n, int64_t o0) {
    if (!y) return NULL;
    ts_shape s = ts_shape_of(y);
    ts_shape r = {.ndim = s.ndim + 1};
    r.dims[0] = n, r.dims[1] = o0;
    for (int i = 1; i < s.ndim; i++) r.dims[i + 1] = s.dims[i];
    ts_dims p = {.n = r.ndim};
    p.d[0] = 0, p.d[1] = 2, p.d[2] = 1;
    for (int i = 3; i < r.ndim; i++) p.d[i] = i;
    return ts_permute(ts_reshape(y, r), p);
}

/* the slice of spatial dim 2 that kernel tap j reads: [N, C, out0, rest...] */
static ts_tensor *tap_slice(ts_tensor *x, const geom *g, int64_t j) {
    int64_t start = j * g->d[0];
    return ts_slice(x, 2, start, start + (g->out[0] - 1) * g->s[0] + 1, g->s[0]);
}

/* the geometry without its leading spatial dim */
static geom geom_rest(const geom *g) {
    geom r = {.nsp = g->nsp - 1};
    for (int i = 0; i < r.nsp; i++) {
        r.in[i] = g->in[i + 1], r.k[i] = g->k[i + 1], r.s[i] = g->s[i + 1], r.d[i] = g->d[i + 1];
        r.pb[i] = g->pb[i + 1], r.pe[i] = g->pe[i + 1], r.out[i] = g->out[i + 1];
    }
    return r;
}

/* ------------------------------------------------------------------ convolution */
/* conv2d's options for a geometry of 1 or 2 spatial dims (1-D: the unit dim first); the pads when
 * conv2d takes them natively, else none (the input is padded first) */
static ts_conv2d_opts conv2d_opts(const geom *g, bool native, int64_t group) {
    ts_conv2d_opts o = {.stride = {1, 1}, .dilation = {1, 1}, .groups = (int)group};
    int off = 2 - g->nsp;
    for (int i = 0; i < g->nsp; i++) {
        o.stride[off + i] = (int)g->s[i];
        o.dilation[off + i] = (int)g->d[i];
        o.padding[off + i] = native ? (int)g->pb[i] : 0;
    }
    return o;
}

/* conv of x [N, C, sp...] (padded, or with pads conv2d takes natively when `native`) with
 * w [O, C / group, k...]; b [O] or NULL */
static ts_tensor *conv_nd(ts_tensor *x, ts_tensor *w, ts_tensor *b, const geom *g, bool native,
                          int64_t group) {
    if (g->nsp <= 2) {
        ts_conv2d_opts o = conv2d_opts(g, native, group);
        if (g->nsp == 2) return ts_conv2d(x, w, b, o);
        return ts_squeeze_dim(ts_conv2d(ts_unsqueeze(x, 2), ts_unsqueeze(w, 2), b, o), 2);
    }
    geom r = geom_rest(g);
    ts_tensor *acc = NULL;
    for (int64_t j = 0; j < g->k[0]; j++) {
        ts_tensor *y =
            conv_nd(to_batch(tap_slice(x, g, j)), ts_select(w, 2, j), NULL, &r, false, group);
        y = from_batch(y, ts_size(x, 0), g->out[0]);
        acc = !y ? NULL : acc ? ts_add(acc, y) : y;
        if (!acc) return NULL;
    }
    if (b) acc = ts_add(acc, ts_reshape(b, tso_nn_along(g->nsp + 2, 1, ts_size(b, 0))));
    return acc;
}

/* conv with the geometry's pads: natively where conv2d can, else padded with zeros first */
static ts_tensor *conv_padded(ts_tensor *x, ts_tensor *w, ts_tensor *b, const geom *g,
                              int64_t group) {
    if (native_pads(g, NULL, false)) return conv_nd(x, w, b, g, true, group);
    return conv_nd(pad_spatial(x, g->nsp, g->pb, g->pe, 0), w, b, g, false, group);
}

static bool check_group(const tso_node *n) {
    if (tso_attr_int(n, "group", 1) < 1)
        return tso_fail(n, TS_ERR_FORMAT, "group must be positive, got %lld",
                        (long long)tso_attr_int(n, "group", 1));
    return true;
}

TSO_NN_CHECK(tso_nn_check_conv) { return check_spatial(n, false, true) && check_group(n); }

TSO_NN_RUN(tso_nn_run_conv) {
    (void)c;
    ts_tensor *x = in[0], *w = in[1], *b = tso_nn_opt(n, in, 2);
    geom g;
    if (!geom_make(n, x, w, false, &g)) return false;
    out[0] = conv_padded(x, w, b, &g, tso_attr_int(n, "group", 1));
    return out[0] || tso_fail_pending(n);
}

bool tso_nn_conv2d_setup(const tso_node *n, ts_tensor **x, ts_tensor **w, ts_conv2d_opts *o,
                         bool *one_d) {
    geom g;
    if (!geom_make(n, *x, *w, false, &g)) return false;
    if (g.nsp > 2)
        return tso_fail(n, TS_ERR_UNSUPPORTED,
                        "a fused convolution has 1 or 2 spatial dims, got %s", tsi_desc(*x));
    bool native = native_pads(&g, NULL, false);
    *o = conv2d_opts(&g, native, tso_attr_int(n, "group", 1));
    *one_d = g.nsp == 1;
    ts_tensor *xp = native ? *x : pad_spatial(*x, g.nsp, g.pb, g.pe, 0);
    if (!xp) return tso_fail_pending(n);
    *x = *one_d ? ts_unsqueeze(xp, 2) : xp;
    if (*one_d) *w = ts_unsqueeze(*w, 2);
    return (*x && *w) || tso_fail_pending(n);
}

/* ------------------------------------------------------------------ transposed convolution */
static bool check_output_lists(const tso_node *n) {
    return check_ints(n, "output_padding", -1, 0) && check_ints(n, "output_shape", -1, 1);
}

TSO_NN_CHECK(tso_nn_check_conv_transpose) {
    return check_spatial(n, false, true) && check_group(n) && check_output_lists(n);
}

/* x with s - 1 zeros after each element along dim (the stride of a transposed conv) */
static ts_tensor *spread(ts_tensor *x, int dim, int64_t s) {
    if (s == 1 || !x) return x;
    ts_shape sh = ts_shape_of(x);
    int64_t len = sh.dims[dim];
    ts_shape zs = {.ndim = sh.ndim + 1};
    for (int i = 0, j = 0; i < zs.ndim; i++) zs.dims[i] = i == dim + 1 ? s - 1 : sh.dims[j++];
    ts_tensor *parts[2] = {
        ts_unsqueeze(x, dim + 1),
        ts_zeros(zs, (ts_opts){.dtype = ts_dtype_of(x), .device = ts_device_of(x)})};
    if (!parts[0] || !parts[1]) return NULL;
    sh.dims[dim] = len * s;
    return ts_slice(ts_reshape(ts_cat(parts, 2, dim + 1), sh), dim, 0, (len - 1) * s + 1, 1);
}

/* w [C, O / group, k...] -> [O, C / group, k...] with every spatial dim reversed: the kernel of the
 * ordinary convolution a transposed one is */
static ts_tensor *transpose_kernel(ts_tensor *w, int64_t group) {
    ts_shape s = ts_shape_of(w);
    int64_t cg = s.dims[0] / group, og = s.dims[1];
    ts_shape s5 = {.ndim = s.ndim + 1};
    s5.dims[0] = group, s5.dims[1] = cg, s5.dims[2] = og;
    for (int i = 2; i < s.ndim; i++) s5.dims[i + 1] = s.dims[i];
    ts_dims p = {.n = s5.ndim};
    p.d[0] = 0, p.d[1] = 2, p.d[2] = 1;
    for (int i = 3; i < s5.ndim; i++) p.d[i] = i;
    ts_shape r = s;
    r.dims[0] = group * og, r.dims[1] = cg;
    ts_tensor *k = ts_reshape(ts_permute(ts_reshape(w, s5), p), r);
    for (int i = 2; k && i < s.ndim; i++)
        k = ts_index_select(k, i, tso_nn_arange(s.dims[i] - 1, s.dims[i], -1, ts_device_of(w)));
    return k;
}

/* pads from output_shape or auto_pad SAME (the total split as ONNX's shape inference does) */
static bool transpose_pads(const tso_node *n, geom *g, const int64_t *opad) {
    const int64_t *os;
    int nos = tso_attr_ints(n, "output_shape", &os);
    auto_pad ap = read_auto_pad(n);
    if (nos > 0 && nos != g->nsp && nos != g->nsp + 2)
        return tso_fail(n, TS_ERR_SHAPE, "output_shape has %d values for %d spatial dims", nos,
                        g->nsp);
    for (int i = 0; i < g->nsp; i++) {
        int64_t target;
        if (nos > 0)
            target = os[nos - g->nsp + i];
        else if (ap == AP_SAME_UPPER || ap == AP_SAME_LOWER)
            target = g->in[i] * g->s[i];
        else
            continue;
        int64_t total = g->s[i] * (g->in[i] - 1) + opad[i] + (g->k[i] - 1) * g->d[i] + 1 - target;
        int64_t half = floor_div(total, 2);
        g->pb[i] = ap == AP_SAME_UPPER ? half : total - half;
        g->pe[i] = total - g->pb[i];
    }
    return true;
}

TSO_NN_RUN(tso_nn_run_conv_transpose) {
    (void)c;
    ts_tensor *x = in[0], *w = in[1], *b = tso_nn_opt(n, in, 2);
    int64_t group = tso_attr_int(n, "group", 1);
    geom g;
    if (!geom_read(n, x, w, &g)) return false;
    if (ts_size(x, 1) != ts_size(w, 0) || ts_size(w, 0) % group)
        return tso_fail(n, TS_ERR_SHAPE, "the weight %s does not fit the input %s with group %lld",
                        tsi_desc(w), tsi_desc(x), (long long)group);
    int64_t opad[MAXSP];
    for (int i = 0; i < g.nsp; i++) opad[i] = attr_at(n, "output_padding", i, 0);
    if (read_auto_pad(n) == AP_VALID)
        for (int i = 0; i < g.nsp; i++) g.pb[i] = g.pe[i] = 0;
    if (!transpose_pads(n, &g, opad)) return false;
    /* the equivalent conv: the input spread by the strides, padded by the kernel's extent less
     * the pads (cropped where negative), stride 1, the same dilations */
    geom cg = g;
    for (int i = 0; i < g.nsp; i++) {
        int64_t ext = (g.k[i] - 1) * g.d[i];
        cg.pb[i] = ext - g.pb[i];
        cg.pe[i] = ext - g.pe[i] + opad[i];
        cg.s[i] = 1;
        cg.out[i] = g.s[i] * (g.in[i] - 1) + opad[i] + ext + 1 - g.pb[i] - g.pe[i];
        if (cg.out[i] < 1)
            return tso_fail(n, TS_ERR_SHAPE, "the output would be empty along spatial dim %d", i);
    }
    ts_tensor *xs = x;
    for (int i = 0; xs && i < g.nsp; i++) xs = spread(xs, 2 + i, g.s[i]);
    ts_tensor *k = transpose_kernel(w, group);
    out[0] = xs && k ? conv_padded(xs, k, b, &cg, group) : NULL;
    return out[0] || tso_fail_pending(n);
}

/* ------------------------------------------------------------------ pooling */
typedef enum pool_kind { P_MAX, P_AVG } pool_kind;

/* max or mean over each window of x [N, C, sp...] (padded, or with symmetric pads pool2d takes
 * natively when `native`) */
static ts_tensor *pool_nd(ts_tensor *x, pool_kind kind, const geom *g, bool native,
                          bool exclude_pad) {
    if (g->nsp <= 2) {
        ts_pool2d_opts o = {
            .kernel = {1, 1}, .stride = {1, 1}, .dilation = {1, 1}, .exclude_pad = exclude_pad};
        int off = 2 - g->nsp;
        for (int i = 0; i < g->nsp; i++) {
            o.kernel[off + i] = (int)g->k[i];
            o.stride[off + i] = (int)g->s[i];
            o.dilation[off + i] = (int)g->d[i];
            o.padding[off + i] = native ? (int)g->pb[i] : 0;
        }
        ts_tensor *x4 = g->nsp == 1 ? ts_unsqueeze(x, 2) : x;
        ts_tensor *y = kind == P_MAX ? ts_max_pool2d(x4, o) : ts_avg_pool2d(x4, o);
        return g->nsp == 1 ? ts_squeeze_dim(y, 2) : y;
    }
    geom r = geom_rest(g);
    ts_tensor *acc = NULL;
    for (int64_t j = 0; j < g->k[0]; j++) {
        ts_tensor *y = pool_nd(to_batch(tap_slice(x, g, j)), kind, &r, false, false);
        y = from_batch(y, ts_size(x, 0), g->out[0]);
        acc = !y ? NULL : !acc ? y : kind == P_MAX ? ts_maximum(acc, y) : ts_add(acc, y);
        if (!acc) return NULL;
    }
    return kind == P_MAX ? acc : ts_div_scalar(acc, (double)g->k[0]);
}

/* the mean over each window as ONNX counts it: the pads count when count_include_pad, the part
 * of a ceil_mode window past the end padding never */
static ts_tensor *avg_pool(ts_tensor *x, const geom *g, bool include_pad) {
    int64_t extra[MAXSP];
    overhang(g, extra);
    if (native_pads(g, extra, true)) return pool_nd(x, P_AVG, g, true, !include_pad);
    bool padded = false;
    for (int i = 0; i < g->nsp; i++) padded |= g->pb[i] || g->pe[i] || extra[i];
    ts_tensor *xp = pad_spatial(pad_spatial(x, g->nsp, g->pb, g->pe, 0), g->nsp, NULL, extra, 0);
    ts_tensor *sum = pool_nd(xp, P_AVG, g, false, false);
    if (!padded || !sum) return sum;
    /* the share of each window that counts: the same mean over a mask */
    ts_shape ms = {.ndim = g->nsp + 2, .dims = {1, 1}};
    for (int i = 0; i < g->nsp; i++) ms.dims[2 + i] = g->in[i];
    ts_tensor *mask = ts_ones(ms, (ts_opts){.dtype = ts_dtype_of(x), .device = ts_device_of(x)});
    mask = pad_spatial(pad_spatial(mask, g->nsp, g->pb, g->pe, include_pad ? 1 : 0), g->nsp, NULL,
                       extra, 0);
    ts_tensor *share = mask ? pool_nd(mask, P_AVG, g, false, false) : NULL;
    return share ? ts_div(sum, share) : NULL;
}

/* dilations (opset 19) are refused: ts_avg_pool2d has none */
TSO_NN_CHECK(tso_nn_check_avg_pool) { return check_spatial(n, true, false); }

TSO_NN_RUN(tso_nn_run_avg_pool) {
    (void)c;
    geom g;
    if (!geom_make(n, in[0], NULL, tso_attr_int(n, "ceil_mode", 0) != 0, &g)) return false;
    out[0] = avg_pool(in[0], &g, tso_attr_int(n, "count_include_pad", 0) != 0);
    return out[0] || tso_fail_pending(n);
}

/* pooling runs on floating tensors: integers are pooled in a floating type that holds them */
static ts_dtype pool_dtype(ts_dtype dt) {
    if (ts_dtype_is_floating(dt)) return dt;
    return dt == TS_U8 || dt == TS_BOOL ? TS_F32 : TS_F64;
}

TSO_NN_CHECK(tso_nn_check_max_pool) {
    if (!check_spatial(n, true, true)) return false;
    int64_t so = tso_attr_int(n, "storage_order", 0);
    if (so != 0 && so != 1)
        return tso_fail(n, TS_ERR_FORMAT, "storage_order must be 0 or 1, got %lld", (long long)so);
    return true;
}

/* the flat index ONNX's MaxPool gives each window's maximum: (n * C + c) * prod(in) plus the
 * spatial offset, row-major (storage_order 0) or column-major (1); taps [N, C, K, out...] are the
 * windows' values in kernel order and arg the tap holding each maximum */
static ts_tensor *max_indices(const tso_node *n, const geom *g, ts_tensor *x, ts_tensor *arg) {
    ts_device dev = ts_device_of(x);
    bool colmajor = tso_attr_int(n, "storage_order", 0) == 1;
    int64_t stride[MAXSP], plane = 1;
    for (int i = colmajor ? 0 : g->nsp - 1; colmajor ? i < g->nsp : i >= 0;
         i += colmajor ? 1 : -1) {
        stride[i] = plane;
        plane *= g->in[i];
    }
    /* each tap's offset from its window's first element, in kernel order */
    int64_t taps = 1;
    for (int i = 0; i < g->nsp; i++) taps *= g->k[i];
    int64_t *off = malloc((size_t)taps * sizeof *off);
    if (!off) return tsi_error_set(TS_ERR_OOM, "MaxPool: out of host memory"), NULL;
    for (int64_t t = 0; t < taps; t++) {
        int64_t rest = t, o = 0;
        for (int i = g->nsp - 1; i >= 0; i--) {
            o += (rest % g->k[i]) * g->d[i] * stride[i];
            rest /= g->k[i];
        }
        off[t] = o;
    }
    ts_tensor *offs =
        ts_from_data(TS_SHAPE(taps), TS_I64, off, (ts_opts){.dtype = TS_I64, .device = dev});
    free(off);
    /* each window's first element, and the batch and channel offsets */
    int nd = g->nsp + 2;
    ts_tensor *idx = ts_reshape(ts_index_select(offs, 0, ts_flatten(arg, 0, -1)), ts_shape_of(arg));
    for (int i = 0; idx && i < g->nsp; i++) {
        ts_tensor *pos = ts_mul_scalar(
            ts_sub_scalar(tso_nn_arange(0, g->out[i], g->s[i], dev), g->pb[i]), (double)stride[i]);
        idx = ts_add(idx, ts_reshape(pos, tso_nn_along(nd, 2 + i, g->out[i])));
    }
    int64_t nc = ts_size(x, 0) * ts_size(x, 1);
    ts_shape ncs = tso_nn_along(nd, 1, ts_size(x, 1));
    ncs.dims[0] = ts_size(x, 0);
    return idx ? ts_add(idx, ts_reshape(tso_nn_arange(0, nc, plane, dev), ncs)) : NULL;
}

/* MaxPool with its Indices output: every window's values stacked along a new dim (one slice per
 * kernel tap), their max and argmax (the first of equal maxima, as NumPy's) */
static bool max_pool_with_indices(const tso_node *n, const geom *g, ts_tensor *xp, ts_tensor *x,
                                  ts_tensor **y, ts_tensor **idx) {
    int64_t taps = 1;
    for (int i = 0; i < g->nsp; i++) taps *= g->k[i];
    ts_tensor **slices = calloc((size_t)taps, sizeof *slices);
    if (!slices) return tsi_error_set(TS_ERR_OOM, "MaxPool: out of host memory"), false;
    bool ok = true;
    for (int64_t t = 0; ok && t < taps; t++) {
        ts_tensor *s = xp;
        int64_t rest = t;
        for (int i = g->nsp - 1; s && i >= 0; i--) {
            int64_t j = rest % g->k[i], start = j * g->d[i];
            rest /= g->k[i];
            s = ts_slice(s, 2 + i, start, start + (g->out[i] - 1) * g->s[i] + 1, g->s[i]);
        }
        ok = (slices[t] = s) != NULL;
    }
    ts_tensor *arg = NULL;
    *y = ok ? ts_max_dim(ts_stack(slices, (int)taps, 2), 2, false, &arg) : NULL;
    free(slices);
    *idx = *y ? max_indices(n, g, x, arg) : NULL;
    return *y && *idx;
}

TSO_NN_RUN(tso_nn_run_max_pool) {
    (void)c;
    ts_tensor *x = in[0];
    ts_dtype dt = ts_dtype_of(x), pdt = pool_dtype(dt);
    geom g;
    if (!geom_make(n, x, NULL, tso_attr_int(n, "ceil_mode", 0) != 0, &g)) return false;
    ts_tensor *xf = pdt == dt ? x : ts_to_dtype(x, pdt);
    int64_t extra[MAXSP];
    overhang(&g, extra);
    ts_tensor *y, *idx = NULL;
    if (tso_nn_wants(n, 1)) {
        ts_tensor *xp = pad_spatial(pad_spatial(xf, g.nsp, g.pb, g.pe, -INFINITY), g.nsp, NULL,
                                    extra, -INFINITY);
        if (!xp || !max_pool_with_indices(n, &g, xp, x, &y, &idx)) return tso_fail_pending(n);
    } else if (native_pads(&g, extra, true)) {
        y = pool_nd(xf, P_MAX, &g, true, false);
    } else {
        ts_tensor *xp = pad_spatial(pad_spatial(xf, g.nsp, g.pb, g.pe, -INFINITY), g.nsp, NULL,
                                    extra, -INFINITY);
        y = xp ? pool_nd(xp, P_MAX, &g, false, false) : NULL;
    }
    out[0] = y && pdt != dt ? ts_to_dtype(y, dt) : y;
    if (n->n_out > 1) out[1] = idx;
    return out[0] || tso_fail_pending(n);
}

/* LpPool: (sum over the window of |x|^p)^(1/p), the pads adding zeros */
TSO_NN_CHECK(tso_nn_check_lp_pool) {
    if (!check_spatial(n, true, false)) return false; /* dilations (opset 18): refused */
    if (tso_attr_float(n, "p", 2.0f) <= 0)
        return tso_fail(n, TS_ERR_FORMAT, "p must be positive, got %g",
                        tso_attr_float(n, "p", 2.0f));
    return true;
}

static double lp_exponent(const tso_node *n) { return tso_attr_float(n, "p", 2.0f); }

TSO_NN_RUN(tso_nn_run_lp_pool) {
    (void)c;
    geom g;
    if (!geom_make(n, in[0], NULL, false, &g)) return false;
    double p = lp_exponent(n), area = 1;
    for (int i = 0; i < g.nsp; i++) area *= (double)g.k[i];
    ts_tensor *xp = pad_spatial(ts_pow_scalar(ts_abs(in[0]), p), g.nsp, g.pb, g.pe, 0);
    ts_tensor *mean = xp ? pool_nd(xp, P_AVG, &g, false, false) : NULL;
    out[0] = mean ? ts_pow_scalar(ts_mul_scalar(mean, area), 1.0 / p) : NULL;
    return out[0] || tso_fail_pending(n);
}

/* ------------------------------------------------------------------ global pooling */
static bool spatial_dims(const tso_node *n, ts_tensor *x, ts_dims *d) {
    int nd = ts_ndim(x);
    if (nd < 3)
        return tso_fail(n, TS_ERR_SHAPE, "expected an input [N, C, D1, ...], got %s", tsi_desc(x));
    d->n = nd - 2;
    for (int i = 2; i < nd; i++) d->d[i - 2] = i;
    return true;
}

TSO_NN_RUN(tso_nn_run_global_avg_pool) {
    (void)c;
    ts_dims d;
    if (!spatial_dims(n, in[0], &d)) return false;
    /* 2-D float: the kernel ts_adaptive_avg_pool2d(x, 1, 1) runs, so a model Tessera exported
     * (its adaptive pool written as GlobalAveragePool) comes back with the same bits */
    if (d.n == 2 && ts_dtype_is_floating(ts_dtype_of(in[0])))
        out[0] = ts_adaptive_avg_pool2d(in[0], 1, 1);
    else
        out[0] = ts_mean_dims(in[0], d, true);
    return out[0] || tso_fail_pending(n);
}

TSO_NN_RUN(tso_nn_run_global_max_pool) {
    (void)c;
    ts_dims d;
    if (!spatial_dims(n, in[0], &d)) return false;
    out[0] = ts_amax_dims(in[0], d, true);
    return out[0] || tso_fail_pending(n);
}

TSO_NN_RUN(tso_nn_run_global_lp_pool) {
    (void)c;
    ts_dims d;
    if (!spatial_dims(n, in[0], &d)) return false;
    double p = lp_exponent(n);
    out[0] = ts_pow_scalar(ts_sum_dims(ts_pow_scalar(ts_abs(in[0]), p), d, true), 1.0 / p);
    return out[0] || tso_fail_pending(n);
}
