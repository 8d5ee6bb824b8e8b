/* layers_conv.c — the modules Conv1d, Conv3d and ConvTranspose1d / 2d / 3d over conv_nd.c and
 * conv_transpose.c (weight and bias as PyTorch names and initialises them; padding modes and
 * padding='same' through ts_pad, as PyTorch's _conv_forward). */
#include <math.h>
#include <stdio.h>

#include "nn/conv_nd_internal.h"
#include "nn/module_internal.h"

typedef struct convnd_m {
    ts_module base;
    int k;
    bool transposed;
    int64_t in, out;
    int kernel[3];
    ts_convnd_opts o; /* defaults resolved */
    int w, b;
} convnd_m;

typedef ts_tensor *(*convnd_fn)(ts_tensor *, ts_tensor *, ts_tensor *, ts_convnd_opts);

static convnd_fn fn_of(const convnd_m *m) {
    if (m->transposed)
        return m->k == 1   ? ts_conv_transpose1d
               : m->k == 2 ? ts_conv_transpose2d
                           : ts_conv_transpose3d;
    return m->k == 1 ? ts_conv1d : m->k == 2 ? NULL : ts_conv3d;
}

static ts_tensor *convnd_forward(ts_module *self, ts_tensor *x) {
    convnd_m *m = (convnd_m *)self;
    ts_tensor *w = tsi_param_at(self, m->w), *b = tsi_param_at(self, m->b);
    ts_convnd_opts o = m->o;
    if (!m->transposed && (o.padding_same || o.padding_mode != TS_PAD_CONSTANT)) {
        /* pad first (the last dim's pair first), then convolve without padding */
        int64_t pad[6];
        for (int i = 0; i < m->k; i++) {
            const int64_t total = (int64_t)o.dilation[i] * (m->kernel[i] - 1);
            const int j = 2 * (m->k - 1 - i);
            pad[j] = o.padding_same ? total / 2 : o.padding[i];
            pad[j + 1] = o.padding_same ? total - total / 2 : o.padding[i];
            o.padding[i] = 0;
        }
        x = ts_pad(x, pad, 2 * m->k, o.padding_mode, 0.0);
    }
    return fn_of(m)(x, w, b, o);
}

static int put_tuple(char *buf, size_t n, const char *name, const int *v, int k) {
    int len = snprintf(buf, n, ", %s=(", name);
    for (int i = 0; i < k && len >= 0 && (size_t)len < n; i++)
        len += snprintf(buf + len, n - (size_t)len, i ? ", %d" : "%d", v[i]);
    if (len >= 0 && (size_t)len < n)
        len += snprintf(buf + len, n - (size_t)len, k == 1 ? ",)" : ")");
    return len;
}

static bool all_are(const int *v, int k, int value) {
    for (int i = 0; i < k; i++)
        if (v[i] != value) return false;
    return true;
}

/* PyTorch's _ConvNd.extra_repr */
static void convnd_extra(ts_module *self, char *buf, size_t n) {
    convnd_m *m = (convnd_m *)self;
    const ts_convnd_opts *o = &m->o;
    size_t k = (size_t)snprintf(buf, n, "%lld, %lld", (long long)m->in, (long long)m->out);
#define MORE(expr)                                                                                 \
    do {                                                                                           \
        if (k < n) {                                                                               \
            const int r = (expr);                                                                  \
            if (r > 0) k += (size_t)r;                                                             \
        }                                                                                          \
    } while (0)
    MORE(put_tuple(buf + k, n - k, "kernel_size", m->kernel, m->k));
    MORE(put_tuple(buf + k, n - k, "stride", o->stride, m->k));
    if (o->padding_same)
        MORE(snprintf(buf + k, n - k, ", padding=same"));
    else if (!all_are(o->padding, m->k, 0))
        MORE(put_tuple(buf + k, n - k, "padding", o->padding, m->k));
    if (!all_are(o->dilation, m->k, 1))
        MORE(put_tuple(buf + k, n - k, "dilation", o->dilation, m->k));
    if (!all_are(o->output_padding, m->k, 0))
        MORE(put_tuple(buf + k, n - k, "output_padding", o->output_padding, m->k));
    if (o->groups != 1) MORE(snprintf(buf + k, n - k, ", groups=%d", o->groups));
    if (m->b < 0) MORE(snprintf(buf + k, n - k, ", bias=False"));
    static const char *const modes[] = {"zeros", "reflect", "replicate", "circular"};
    if (o->padding_mode != TS_PAD_CONSTANT)
        MORE(snprintf(buf + k, n - k, ", padding_mode=%s", modes[o->padding_mode]));
#undef MORE
}

static bool check_opts(const char *op, int k, bool transposed, int64_t in, int64_t out,
                       const int *kernel, ts_convnd_opts *o) {
    if (in <= 0 || out <= 0)
        return tsi_error_set(TS_ERR_ARG,
                             "%s: in_channels and out_channels must be positive, got %lld and "
                             "%lld",
                             op, (long long)in, (long long)out),
               false;
    for (int i = 0; i < k; i++) {
        if (!kernel || kernel[i] <= 0)
            return tsi_error_set(TS_ERR_ARG, "%s: kernel_size must be positive", op), false;
        if (o->stride[i] < 0 || o->padding[i] < 0 || o->dilation[i] < 0 || o->output_padding[i] < 0)
            return tsi_error_set(TS_ERR_ARG,
                                 "%s: stride, padding, dilation and output_padding must be "
                                 "non-negative",
                                 op),
                   false;
        if (!o->stride[i]) o->stride[i] = 1;
        if (!o->dilation[i]) o->dilation[i] = 1;
        if (o->output_padding[i] && !transposed)
            return tsi_error_set(TS_ERR_ARG, "%s: output_padding is only for ConvTranspose", op),
                   false;
        if (o->output_padding[i] >= o->stride[i] && o->output_padding[i] >= o->dilation[i])
            return tsi_error_set(TS_ERR_ARG,
                                 "%s: output padding must be smaller than either stride or "
                                 "dilation",
                                 op),
                   false;
        if (o->padding_same && o->stride[i] != 1)
            return tsi_error_set(TS_ERR_ARG,
                                 "%s: padding='same' is not supported for strided convolutions",
                                 op),
                   false;
    }
    if (!o->groups) o->groups = 1;
    if (o->groups < 0 || in % o->groups || out % o->groups)
        return tsi_error_set(TS_ERR_ARG,
                             "%s: in_channels (%lld) and out_channels (%lld) must be divisible "
                             "by groups (%d)",
                             op, (long long)in, (long long)out, o->groups),
               false;
    if ((unsigned)o->padding_mode > TS_PAD_CIRCULAR)
        return tsi_error_set(TS_ERR_ARG, "%s: unknown padding_mode %d", op, (int)o->padding_mode),
               false;
    if (transposed && (o->padding_mode != TS_PAD_CONSTANT || o->padding_same))
        return tsi_error_set(TS_ERR_ARG,
                             "%s: Only \"zeros\" padding mode and numeric padding are supported "
                             "for %s",
                             op, op),
               false;
    if (o->padding_same)
        for (int i = 0; i < k; i++) o->padding[i] = 0;
    return true;
}

static ts_module *convnd_new(const char *op, int k, bool transposed, int64_t in, int64_t out,
                             const int *kernel, ts_convnd_opts o) {
    tsi_init();
    if (!check_opts(op, k, transposed, in, out, kernel, &o)) return NULL;
    convnd_m *m = ts_module_alloc(sizeof *m, op, convnd_forward);
    if (!m) return NULL;
    m->base.extra_repr = convnd_extra;
    m->k = k;
    m->transposed = transposed;
    m->in = in;
    m->out = out;
    m->o = o;
    m->w = m->b = -1;
    int64_t dims[5] = {transposed ? in : out, (transposed ? out : in) / o.groups}, fan_in = dims[1];
    for (int i = 0; i < k; i++)
        m->kernel[i] = kernel[i], dims[2 + i] = kernel[i], fan_in *= kernel[i];
    ts_shape ws = TS_SHAPE(dims[0], dims[1], dims[2], dims[3], dims[4]);
    ws.ndim = k + 2;
    if (!tsi_scope_open()) {
        ts_module_free(&m->base);
        return NULL;
    }
    ts_tensor *w = ts_empty(ws, (ts_opts){0});
    m->w = tsi_register_slot(&m->base, "weight", w, true);
    bool ok = m->w >= 0 && ts_init_kaiming_uniform_(w, sqrt(5.0));
    if (ok && !o.no_bias) {
        ts_tensor *b = ts_empty(TS_SHAPE(out), (ts_opts){0});
        m->b = tsi_register_slot(&m->base, "bias", b, true);
        ok = m->b >= 0 &&
             ts_init_uniform_(b, -1.0 / sqrt((double)fan_in), 1.0 / sqrt((double)fan_in));
    }
    ts_scope_end();
    if (ok) return &m->base;
    ts_module_free(&m->base);
    return NULL;
}

ts_module *ts_conv1d_new(int64_t in_channels, int64_t out_channels, const int kernel[1],
                         ts_convnd_opts o) {
    return convnd_new("Conv1d", 1, false, in_channels, out_channels, kernel, o);
}

ts_module *ts_conv3d_new(int64_t in_channels, int64_t out_channels, const int kernel[3],
                         ts_convnd_opts o) {
    return convnd_new("Conv3d", 3, false, in_channels, out_channels, kernel, o);
}

ts_module *ts_conv_transpose1d_new(int64_t in_channels, int64_t out_channels, const int kernel[1],
                                   ts_convnd_opts o) {
    return convnd_new("ConvTranspose1d", 1, true, in_channels, out_channels, kernel, o);
}

ts_module *ts_conv_transpose2d_new(int64_t in_channels, int64_t out_channels, const int kernel[2],
                                   ts_convnd_opts o) {
    return convnd_new("ConvTranspose2d", 2, true, in_channels, out_channels, kernel, o);
}

ts_module *ts_conv_transpose3d_new(int64_t in_channels, int64_t out_channels, const int kernel[3],
                                   ts_convnd_opts o) {
    return convnd_new("ConvTranspose3d", 3, true, in_channels, out_channels, kernel, o);
}
