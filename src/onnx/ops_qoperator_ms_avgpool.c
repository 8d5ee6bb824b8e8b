/* ops_qoperator_ms_avgpool.c — com.microsoft's QLinearAveragePool as ONNX Runtime 1.32's CPU
 * kernel (contrib_ops/cpu/quantization/qlinear_pool.cc) computes it, in float32:
 * x = x_scale * (float)(X - x_zp), each window's values summed in row-major order (the first
 * spatial dim outermost), divided by the kernel's size (count_include_pad 1) or by the count of
 * the window's input values, then Y = saturate(round_half_even(sum / y_scale + (float)y_zp)).
 * Windows: ONNX's pads and strides (1 to 3 spatial dims), ceil_mode's last window dropped when it
 * starts past the input and its front padding; channels_last 1 reads X as NHWC. A kernel covering
 * the whole image with no pads is ORT's global average pool (ops_qoperator_ms_pool.c).
 *
 * The sums as ORT's loop makes them: one float32 add per kernel tap over every output at once,
 * padding adding 0 (x + 0 == x in float32, so skipping it and adding it agree). */
#include <stdlib.h>
#include <string.h>

#include "onnx/ops_nn.h"
#include "onnx/qoperator_ms.h"
#include "ops/pad_resample.h"

enum { MAXSP = 3 };

typedef struct avg_geom {
    int nsp;
    int64_t in[MAXSP], k[MAXSP], s[MAXSP], pb[MAXSP], pe[MAXSP], out[MAXSP];
} avg_geom;

/* kernel_shape (required), strides, pads; dilations 1 and auto_pad NOTSET only */
static bool read_geom(const tso_node *n, ts_tensor *xc, avg_geom *g) {
    g->nsp = ts_ndim(xc) - 2;
    if (g->nsp < 1 || g->nsp > MAXSP)
        return tso_fail(n, TS_ERR_UNSUPPORTED,
                        "X %s: 1 to 3 spatial dims (after a batch and a channel dim) only",
                        tsi_desc(xc));
    char buf[32];
    const char *ap = tso_attr_string(n, "auto_pad", "NOTSET", buf, sizeof buf);
    if (strcmp(ap, "NOTSET") != 0)
        return tso_fail(n, TS_ERR_UNSUPPORTED, "auto_pad '%s': only NOTSET (explicit pads) runs",
                        ap);
    const int64_t *k, *s, *p, *d;
    const int nk = tso_attr_ints(n, "kernel_shape", &k), ns = tso_attr_ints(n, "strides", &s),
              np = tso_attr_ints(n, "pads", &p), nd = tso_attr_ints(n, "dilations", &d);
    if (nk < 0) return tso_fail(n, TS_ERR_ARG, "the attribute kernel_shape is required");
    if (nk != g->nsp)
        return tso_fail(n, TS_ERR_ARG, "kernel_shape has %d values for X %s (%d spatial dims)", nk,
                        tsi_desc(xc), g->nsp);
    if (ns >= 0 && ns != g->nsp)
        return tso_fail(n, TS_ERR_ARG, "strides has %d values for %d spatial dims", ns, g->nsp);
    if (np >= 0 && np != 2 * g->nsp)
        return tso_fail(n, TS_ERR_ARG, "pads has %d values for %d spatial dims", np, g->nsp);
    for (int i = 0; i < nd; i++)
        if (d[i] != 1)
            return tso_fail(n, TS_ERR_UNSUPPORTED, "dilations %lld: only 1 runs", (long long)d[i]);
    for (int i = 0; i < g->nsp; i++) {
        g->in[i] = ts_size(xc, 2 + i);
        g->k[i] = k[i];
        g->s[i] = ns < 0 ? 1 : s[i];
        g->pb[i] = np < 0 ? 0 : p[i];
        g->pe[i] = np < 0 ? 0 : p[g->nsp + i];
        if (g->k[i] < 1 || g->s[i] < 1 || g->pb[i] < 0 || g->pe[i] < 0)
            return tso_fail(n, TS_ERR_ARG,
                            "kernel %lld, stride %lld, pads %lld / %lld on spatial dim %d: "
                            "kernels and strides must be positive, pads not negative",
                            (long long)g->k[i], (long long)g->s[i], (long long)g->pb[i],
                            (long long)g->pe[i], i);
        if (g->pb[i] >= g->k[i] || g->pe[i] >= g->k[i])
            return tso_fail(n, TS_ERR_ARG,
                            "pads %lld / %lld on spatial dim %d: pads must be "
                            "smaller than the kernel (%lld)",
                            (long long)g->pb[i], (long long)g->pe[i], i, (long long)g->k[i]);
        const int64_t span = g->in[i] + g->pb[i] + g->pe[i] - g->k[i];
        if (span < 0 || g->in[i] < 1)
            return tso_fail(n, TS_ERR_SHAPE,
                            "the kernel %lld is larger than spatial dim %d of X "
                            "%s with its pads",
                            (long long)g->k[i], i, tsi_desc(xc));
        const bool ceil_mode = tso_attr_int(n, "ceil_mode", 0) != 0;
        g->out[i] = (ceil_mode ? (span + g->s[i] - 1) / g->s[i] : span / g->s[i]) + 1;
        if (ceil_mode && (g->out[i] - 1) * g->s[i] >= g->in[i] + g->pb[i]) g->out[i]--;
    }
    return true;
}

/* the count of input values in each output's window, [1, 1, out...] float32 on dev */
static ts_tensor *window_counts(const avg_geom *g, ts_device dev) {
    ts_shape shp = {.ndim = 2 + g->nsp};
    int64_t total = 1;
    shp.dims[0] = shp.dims[1] = 1;
    for (int i = 0; i < g->nsp; i++) shp.dims[2 + i] = g->out[i], total *= g->out[i];
    float *cnt = malloc((size_t)total * sizeof *cnt);
    if (!cnt) return NULL;
    for (int64_t j = 0; j < total; j++) {
        int64_t rest = j, c = 1;
        for (int i = g->nsp - 1; i >= 0; i--) {
            const int64_t o = rest % g->out[i], start = o * g->s[i] - g->pb[i];
            const int64_t end = start + g->k[i] < g->in[i] ? start + g->k[i] : g->in[i];
            rest /= g->out[i];
            c *= end - (start > 0 ? start : 0);
        }
        cnt[j] = (float)c;
    }
    ts_tensor *t = ts_from_data(shp, TS_F32, cnt, (ts_opts){.dtype = TS_F32, .device = dev});
    free(cnt);
    return t;
}

TSO_QMS_RUN(tso_qms_run_average_pool) {
    ts_tensor *x = in[0];
    float xs, ys;
    int64_t xz, yz;
    if (!tso_qms_unary_params(n, in, false, &xs, &xz, &ys, &yz)) return false;
    const ts_dtype dt = ts_dtype_of(x);
    const int nd = ts_ndim(x);
    if (nd < 3)
        return tso_fail(n, TS_ERR_SHAPE, "X must have a batch, a channel and spatial dims, got %s",
                        tsi_desc(x));
    const bool last = tso_attr_int(n, "channels_last", 0) != 0;
    ts_dims to_nchw = {.n = nd}, to_nhwc = {.n = nd};
    to_nchw.d[0] = to_nhwc.d[0] = 0, to_nchw.d[1] = nd - 1, to_nhwc.d[nd - 1] = 1;
    for (int i = 2; i < nd; i++) to_nchw.d[i] = i - 1, to_nhwc.d[i - 1] = i;
    ts_tensor *xc = last ? ts_permute(x, to_nchw) : x;
    if (!xc) return tso_fail_pending(n);
    avg_geom g;
    if (!read_geom(n, xc, &g)) return false;
    bool global = true;
    for (int i = 0; i < g.nsp; i++)
        global = global && g.k[i] == g.in[i] && g.pb[i] == 0 && g.pe[i] == 0;
    if (global) return tso_qms_run_global_average_pool(c, n, in, out);
    /* x_scale * (float)(X - x_zp): the float64 product of a 9-bit integer and a float32 is exact,
     * rounded once to float32 */
    ts_tensor *v = ts_to_dtype(
        ts_mul_scalar(ts_sub_scalar(ts_to_dtype(xc, TS_F64), (double)xz), (double)xs), TS_F32);
    /* pads before, and after as far as the last window reaches (ceil_mode: past pe) */
    int64_t kernel = 1;
    for (int i = 0; v && i < g.nsp; i++) {
        const int64_t reach = (g.out[i] - 1) * g.s[i] + g.k[i] - g.pb[i] - g.in[i];
        v = tsi_pad_constant_dim(v, 2 + i, g.pb[i], reach > 0 ? reach : 0, 0.0);
        kernel *= g.k[i];
    }
    ts_tensor *acc = NULL;
    for (int64_t t = 0; v && t < kernel; t++) { /* the taps in row-major order */
        int64_t rest = t, at[MAXSP];
        for (int i = g.nsp - 1; i >= 0; i--) at[i] = rest % g.k[i], rest /= g.k[i];
        ts_tensor *tap = v;
        for (int i = 0; tap && i < g.nsp; i++)
            tap = ts_slice(tap, 2 + i, at[i], at[i] + (g.out[i] - 1) * g.s[i] + 1, g.s[i]);
        acc = !acc ? ts_contiguous(tap) : ts_add(acc, tap); /* float32 adds */
        if (!acc) break;
    }
    if (!acc) return tso_fail_pending(n);
    const bool incl = tso_attr_int(n, "count_include_pad", 0) != 0;
    ts_tensor *avg = incl ? ts_div_scalar(acc, (double)(float)kernel)
                          : ts_div(acc, window_counts(&g, ts_device_of(x)));
    /* sum / y_scale, then + y_zp, each rounded to float32 */
    ts_tensor *q = ts_add_scalar(ts_div_scalar(avg, (double)ys), (double)yz);
    ts_tensor *y = tso_qms_saturate(q, dt);
    TSO_DONE(last && y ? ts_permute(y, to_nhwc) : y);
}
