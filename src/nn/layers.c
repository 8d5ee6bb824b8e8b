/* layers.c — built-in modules without running state: linear, conv2d, pools, activations, flatten,
 * dropout and sequential (parameters initialised as PyTorch's reset_parameters). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn/layers_internal.h"
#include "nn/module_internal.h"

/* Frees a half-built module: constructors build inside a scope and only hand back complete ones. */
static ts_module *finish(ts_module *m, bool ok) {
    if (ok) return m;
    ts_module_free(m);
    return NULL;
}

/* PyTorch prints an int where the user gave one: C has two values, so equal ones print as one. */
static const char *pair_str(const int v[2]) {
    char *b = tsi_fmt_buf();
    if (v[0] == v[1])
        snprintf(b, TSI_FMT_BUF_LEN, "%d", v[0]);
    else
        snprintf(b, TSI_FMT_BUF_LEN, "(%d, %d)", v[0], v[1]);
    return b;
}

static const char *py_bool(bool b) { return b ? "True" : "False"; }

/* ------------------------------------------------------------------ Linear */
typedef struct linear_m {
    ts_module base;
    int64_t in, out;
    int w, b;
} linear_m;

static ts_tensor *linear_forward(ts_module *self, ts_tensor *x) {
    linear_m *m = (linear_m *)self;
    return ts_linear(x, tsi_param_at(self, m->w), tsi_param_at(self, m->b));
}

bool tsi_linear_parts_of(ts_module *m, ts_tensor **w, ts_tensor **b) {
    if (!m || m->forward != linear_forward) return false;
    *w = tsi_param_at(m, ((linear_m *)m)->w), *b = tsi_param_at(m, ((linear_m *)m)->b);
    return true;
}

static void linear_extra(ts_module *self, char *buf, size_t n) {
    linear_m *m = (linear_m *)self;
    snprintf(buf, n, "in_features=%lld, out_features=%lld, bias=%s", (long long)m->in,
             (long long)m->out, py_bool(m->b >= 0));
}

ts_module *ts_linear_new_ex(int64_t in_features, int64_t out_features, ts_linear_opts o) {
    tsi_init();
    if (in_features < 0 || out_features < 0)
        return tsi_error_set(TS_ERR_ARG,
                             "Linear: in_features and out_features must be non-negative, got %lld "
                             "and %lld",
                             (long long)in_features, (long long)out_features),
               NULL;
    if (in_features && out_features > INT64_MAX / in_features)
        return tsi_error_set(
                   TS_ERR_SHAPE,
                   "Linear: a weight of %lld x %lld has more elements than a tensor holds",
                   (long long)out_features, (long long)in_features),
               NULL;
    linear_m *m = ts_module_alloc(sizeof *m, "Linear", linear_forward);
    if (!m) return NULL;
    m->base.extra_repr = linear_extra;
    m->in = in_features;
    m->out = out_features;
    m->w = m->b = -1;
    if (!tsi_scope_open()) return finish(&m->base, false);
    ts_opts to = {.dtype = o.dtype, .device = o.device};
    ts_tensor *w = ts_empty(TS_SHAPE(out_features, in_features), to);
    m->w = tsi_register_slot(&m->base, "weight", w, true);
    /* kaiming_uniform_(a=sqrt(5)) is U(-1/sqrt(fan_in), 1/sqrt(fan_in)) */
    bool ok = m->w >= 0 && ts_init_kaiming_uniform_(w, sqrt(5.0));
    if (ok && !o.no_bias) {
        ts_tensor *b = ts_empty(TS_SHAPE(out_features), to);
        m->b = tsi_register_slot(&m->base, "bias", b, true);
        double bound = in_features > 0 ? 1.0 / sqrt((double)in_features) : 0.0;
        ok = m->b >= 0 && ts_init_uniform_(b, -bound, bound);
    }
    ts_scope_end();
    return finish(&m->base, ok);
}

ts_module *ts_linear_new(int64_t in_features, int64_t out_features) {
    return ts_linear_new_ex(in_features, out_features, (ts_linear_opts){0});
}

/* ------------------------------------------------------------------ Conv2d */
typedef struct conv_m {
    ts_module base;
    int64_t in, out;
    int kernel[2];
    ts_conv2d_opts o; /* defaults resolved */
    int w, b;
    struct tsi_conv_bn_cache *fold; /* conv_bn.c: the eval path's folded weights (NULL: none) */
} conv_m;

static ts_tensor *conv_forward(ts_module *self, ts_tensor *x) {
    conv_m *m = (conv_m *)self;
    return ts_conv2d(x, tsi_param_at(self, m->w), tsi_param_at(self, m->b), m->o);
}

static void conv_destroy(ts_module *self) { tsi_conv_bn_cache_free(((conv_m *)self)->fold); }

bool tsi_conv2d_parts_of(ts_module *self, tsi_conv2d_parts *out) {
    if (!self || self->forward != conv_forward) return false;
    conv_m *m = (conv_m *)self;
    *out = (tsi_conv2d_parts){
        .w = tsi_param_at(self, m->w), .b = tsi_param_at(self, m->b), .o = m->o, .cache = &m->fold};
    return true;
}

/* Conv2d.extra_repr: the options that differ from their defaults */
static void conv_extra(ts_module *self, char *buf, size_t n) {
    conv_m *m = (conv_m *)self;
    const ts_conv2d_opts *o = &m->o;
    int k = snprintf(buf, n, "%lld, %lld, kernel_size=(%d, %d), stride=(%d, %d)", (long long)m->in,
                     (long long)m->out, m->kernel[0], m->kernel[1], o->stride[0], o->stride[1]);
    if ((o->padding[0] || o->padding[1]) && (size_t)k < n)
        k += snprintf(buf + k, n - (size_t)k, ", padding=(%d, %d)", o->padding[0], o->padding[1]);
    if ((o->dilation[0] != 1 || o->dilation[1] != 1) && (size_t)k < n)
        k +=
            snprintf(buf + k, n - (size_t)k, ", dilation=(%d, %d)", o->dilation[0], o->dilation[1]);
    if (o->groups != 1 && (size_t)k < n)
        k += snprintf(buf + k, n - (size_t)k, ", groups=%d", o->groups);
    if (m->b < 0 && (size_t)k < n) snprintf(buf + k, n - (size_t)k, ", bias=False");
}

ts_module *ts_conv2d_new2(int64_t in_channels, int64_t out_channels, int kh, int kw,
                          ts_conv2d_opts o) {
    tsi_init();
    const char *op = "Conv2d";
    for (int i = 0; i < 2; i++) {
        if (o.stride[i] < 0 || o.padding[i] < 0 || o.dilation[i] < 0)
            return tsi_error_set(TS_ERR_ARG,
                                 "%s: stride, padding and dilation must be non-negative, got "
                                 "stride=(%d, %d), padding=(%d, %d), dilation=(%d, %d)",
                                 op, o.stride[0], o.stride[1], o.padding[0], o.padding[1],
                                 o.dilation[0], o.dilation[1]),
                   NULL;
        if (!o.stride[i]) o.stride[i] = 1;
        if (!o.dilation[i]) o.dilation[i] = 1;
    }
    if (!o.groups) o.groups = 1;
    if (in_channels <= 0 || out_channels <= 0 || kh <= 0 || kw <= 0)
        return tsi_error_set(TS_ERR_ARG,
                             "%s: channels and kernel size must be positive, got in_channels=%lld, "
                             "out_channels=%lld, kernel_size=(%d, %d)",
                             op, (long long)in_channels, (long long)out_channels, kh, kw),
               NULL;
    if (o.groups < 0)
        return tsi_error_set(TS_ERR_ARG, "%s: groups must be a positive integer", op), NULL;
    if (in_channels % o.groups)
        return tsi_error_set(TS_ERR_ARG, "%s: in_channels (%lld) must be divisible by groups (%d)",
                             op, (long long)in_channels, o.groups),
               NULL;
    if (out_channels % o.groups)
        return tsi_error_set(TS_ERR_ARG, "%s: out_channels (%lld) must be divisible by groups (%d)",
                             op, (long long)out_channels, o.groups),
               NULL;
    conv_m *m = ts_module_alloc(sizeof *m, op, conv_forward);
    if (!m) return NULL;
    m->base.extra_repr = conv_extra;
    m->base.destroy = conv_destroy;
    m->in = in_channels;
    m->out = out_channels;
    m->kernel[0] = kh;
    m->kernel[1] = kw;
    m->o = o;
    m->w = m->b = -1;
    if (!tsi_scope_open()) return finish(&m->base, false);
    int64_t cin = in_channels / o.groups;
    ts_tensor *w = ts_empty(TS_SHAPE(out_channels, cin, kh, kw), (ts_opts){0});
    m->w = tsi_register_slot(&m->base, "weight", w, true);
    bool ok = m->w >= 0 && ts_init_kaiming_uniform_(w, sqrt(5.0));
    if (ok && !o.no_bias) {
        ts_tensor *b = ts_empty(TS_SHAPE(out_channels), (ts_opts){0});
        m->b = tsi_register_slot(&m->base, "bias", b, true);
        double bound = 1.0 / sqrt((double)(cin * kh * kw));
        ok = m->b >= 0 && ts_init_uniform_(b, -bound, bound);
    }
    ts_scope_end();
    return finish(&m->base, ok);
}

ts_module *ts_conv2d_new(int64_t in_channels, int64_t out_channels, int kernel_size,
                         ts_conv2d_opts o) {
    return ts_conv2d_new2(in_channels, out_channels, kernel_size, kernel_size, o);
}

/* ------------------------------------------------------------------ pools */
typedef struct pool_m {
    ts_module base;
    ts_pool2d_opts o; /* defaults resolved */
    int64_t out_h, out_w;
} pool_m;

static ts_tensor *max_pool_forward(ts_module *self, ts_tensor *x) {
    return ts_max_pool2d(x, ((pool_m *)self)->o);
}
static ts_tensor *avg_pool_forward(ts_module *self, ts_tensor *x) {
    return ts_avg_pool2d(x, ((pool_m *)self)->o);
}
static ts_tensor *adaptive_forward(ts_module *self, ts_tensor *x) {
    pool_m *m = (pool_m *)self;
    return ts_adaptive_avg_pool2d(x, m->out_h, m->out_w);
}

static void max_pool_extra(ts_module *self, char *buf, size_t n) {
    const ts_pool2d_opts *o = &((pool_m *)self)->o;
    snprintf(buf, n, "kernel_size=%s, stride=%s, padding=%s, dilation=%s, ceil_mode=%s",
             pair_str(o->kernel), pair_str(o->stride), pair_str(o->padding), pair_str(o->dilation),
             py_bool(o->ceil_mode));
}
static void avg_pool_extra(ts_module *self, char *buf, size_t n) {
    const ts_pool2d_opts *o = &((pool_m *)self)->o;
    snprintf(buf, n, "kernel_size=%s, stride=%s, padding=%s", pair_str(o->kernel),
             pair_str(o->stride), pair_str(o->padding));
}
/* nn.AdaptiveAvgPool2d((1, 1)) (ResNet's head) is the common spelling: always a tuple */
static void adaptive_extra(ts_module *self, char *buf, size_t n) {
    pool_m *m = (pool_m *)self;
    snprintf(buf, n, "output_size=(%lld, %lld)", (long long)m->out_h, (long long)m->out_w);
}

static ts_module *pool_new(const char *name, ts_pool2d_opts o, bool avg) {
    tsi_init();
    for (int i = 0; i < 2; i++) {
        if (o.kernel[i] <= 0 || o.stride[i] < 0 || o.padding[i] < 0 || o.dilation[i] < 0)
            return tsi_error_set(TS_ERR_ARG,
                                 "%s: kernel_size must be positive and stride, padding, dilation "
                                 "non-negative, got kernel_size=(%d, %d), stride=(%d, %d), "
                                 "padding=(%d, %d), dilation=(%d, %d)",
                                 name, o.kernel[0], o.kernel[1], o.stride[0], o.stride[1],
                                 o.padding[0], o.padding[1], o.dilation[0], o.dilation[1]),
                   NULL;
    }
    for (int i = 0; i < 2; i++) {
        if (!o.stride[i]) o.stride[i] = o.kernel[i];
        if (!o.dilation[i]) o.dilation[i] = 1;
    }
    pool_m *m = ts_module_alloc(sizeof *m, name, avg ? avg_pool_forward : max_pool_forward);
    if (!m) return NULL;
    m->base.extra_repr = avg ? avg_pool_extra : max_pool_extra;
    m->o = o;
    return &m->base;
}

ts_module *ts_max_pool2d_new(ts_pool2d_opts o) { return pool_new("MaxPool2d", o, false); }
ts_module *ts_avg_pool2d_new(ts_pool2d_opts o) { return pool_new("AvgPool2d", o, true); }

ts_module *ts_adaptive_avg_pool2d_new(int64_t out_h, int64_t out_w) {
    tsi_init();
    if (out_h <= 0 || out_w <= 0)
        return tsi_error_set(TS_ERR_ARG,
                             "AdaptiveAvgPool2d: output_size must be positive, got (%lld, %lld)",
                             (long long)out_h, (long long)out_w),
               NULL;
    pool_m *m = ts_module_alloc(sizeof *m, "AdaptiveAvgPool2d", adaptive_forward);
    if (!m) return NULL;
    m->base.extra_repr = adaptive_extra;
    m->out_h = out_h;
    m->out_w = out_w;
    return &m->base;
}

/* ------------------------------------------------------------------ activations and reshapes */
typedef struct simple_m {
    ts_module base;
    int a, b; /* softmax dim; flatten start and end */
    double p; /* dropout probability */
} simple_m;

static ts_tensor *identity_forward(ts_module *self, ts_tensor *x) { return x; }
static ts_tensor *relu_forward(ts_module *self, ts_tensor *x) { return ts_relu(x); }
bool tsi_module_is_relu(const ts_module *m) { return m && m->forward == relu_forward; }
static ts_tensor *gelu_forward(ts_module *self, ts_tensor *x) { return ts_gelu(x); }
static ts_tensor *sigmoid_forward(ts_module *self, ts_tensor *x) { return ts_sigmoid(x); }
static ts_tensor *tanh_forward(ts_module *self, ts_tensor *x) { return ts_tanh(x); }
static ts_tensor *softmax_forward(ts_module *self, ts_tensor *x) {
    return ts_softmax(x, ((simple_m *)self)->a);
}
static ts_tensor *flatten_forward(ts_module *self, ts_tensor *x) {
    simple_m *m = (simple_m *)self;
    return ts_flatten(x, m->a, m->b);
}
static ts_tensor *dropout_forward(ts_module *self, ts_tensor *x) {
    return ts_dropout(x, ((simple_m *)self)->p, self->training);
}
bool tsi_module_dropout_identity(const ts_module *m) {
    return m && m->forward == dropout_forward && !m->impl->hooks && !m->impl->place_input &&
           (!m->training || ((const simple_m *)m)->p == 0);
}

static void gelu_extra(ts_module *self, char *buf, size_t n) {
    snprintf(buf, n, "approximate='none'");
}
static void softmax_extra(ts_module *self, char *buf, size_t n) {
    snprintf(buf, n, "dim=%d", ((simple_m *)self)->a);
}
static void flatten_extra(ts_module *self, char *buf, size_t n) {
    simple_m *m = (simple_m *)self;
    snprintf(buf, n, "start_dim=%d, end_dim=%d", m->a, m->b);
}
static void dropout_extra(ts_module *self, char *buf, size_t n) {
    char p[40];
    tsi_py_float(((simple_m *)self)->p, p, sizeof p);
    snprintf(buf, n, "p=%s, inplace=False", p);
}

static simple_m *simple_new(const char *name, ts_forward_fn fwd,
                            void (*extra)(ts_module *, char *, size_t)) {
    simple_m *m = ts_module_alloc(sizeof *m, name, fwd);
    if (m) m->base.extra_repr = extra;
    return m;
}

ts_module *ts_identity_new(void) {
    return (ts_module *)simple_new("Identity", identity_forward, NULL);
}
ts_module *ts_relu_new(void) { return (ts_module *)simple_new("ReLU", relu_forward, NULL); }
ts_module *ts_gelu_new(void) { return (ts_module *)simple_new("GELU", gelu_forward, gelu_extra); }
ts_module *ts_sigmoid_new(void) {
    return (ts_module *)simple_new("Sigmoid", sigmoid_forward, NULL);
}
ts_module *ts_tanh_new(void) { return (ts_module *)simple_new("Tanh", tanh_forward, NULL); }

ts_module *ts_softmax_new(int dim) {
    simple_m *m = simple_new("Softmax", softmax_forward, softmax_extra);
    if (m) m->a = dim;
    return (ts_module *)m;
}

ts_module *ts_flatten_new(int start_dim, int end_dim) {
    simple_m *m = simple_new("Flatten", flatten_forward, flatten_extra);
    if (m) {
        m->a = start_dim;
        m->b = end_dim;
    }
    return (ts_module *)m;
}

ts_module *ts_dropout_new(double p) {
    tsi_init();
    if (!(p >= 0 && p <= 1))
        return tsi_error_set(TS_ERR_ARG,
                             "Dropout: dropout probability has to be between 0 and 1, but got %g",
                             p),
               NULL;
    simple_m *m = simple_new("Dropout", dropout_forward, dropout_extra);
    if (m) m->p = p;
    return (ts_module *)m;
}

/* ------------------------------------------------------------------ Sequential */
/* A run Conv2d, BatchNorm2d, ReLU (or two of them, the Conv2d first) goes through
 * ts_forward_conv_bn: one fused convolution in eval without gradients, the modules one after the
 * other otherwise. */
static ts_tensor *sequential_forward(ts_module *self, ts_tensor *x) {
    const tsi_named *c = &self->impl->children;
    ts_module *const *ms = (ts_module *const *)c->items;
    for (int i = 0; i < c->n && x;) {
        ts_module *bn, *act, *drop;
        ts_activation la;
        const int span = tsi_conv_bn_span(ms + i, c->n - i, &bn, &act);
        const int mlp = span == 1 ? tsi_mlp_span(ms + i, c->n - i, &la, &drop) : 0;
        if (mlp > 0) { /* mlp_fused.c */
            x = tsi_forward_mlp(ms[i], la, drop, ms[i + mlp - 1], x);
            i += mlp;
            continue;
        }
        if (span == 1 && tsi_linear_act_span(ms + i, c->n - i, &la)) { /* linear_act_fused.c */
            x = tsi_forward_linear_act(ms[i], la, x);
            i += 2;
            continue;
        }
        x = span > 1 ? ts_forward_conv_bn(ms[i], bn, act, x) : ts_forward(ms[i], x);
        i += span;
    }
    return x;
}

bool tsi_module_is_sequential(const ts_module *m) { return m && m->forward == sequential_forward; }

ts_module *ts_sequential_append(ts_module *seq, ts_module *m) {
    if (seq && seq->forward != sequential_forward) {
        tsi_error_set(TS_ERR_ARG, "sequential_append: %s is not a Sequential", seq->type_name);
        if (m && !m->impl->parent) ts_module_free(m); /* ownership passed to us either way */
        return seq;
    }
    char name[24];
    snprintf(name, sizeof name, "%d", seq ? seq->impl->children.n : 0);
    ts_module_add(seq, name, m);
    return seq;
}

ts_module *ts_sequential_new(int n, ts_module *const *modules) {
    tsi_init();
    ts_module *seq = ts_module_alloc(sizeof(ts_module), "Sequential", sequential_forward);
    int i = 0;
    if (n < 0 || (n > 0 && !modules)) {
        tsi_error_set(TS_ERR_ARG, "sequential_new: n is %d and modules is %s", n,
                      modules ? "given" : "NULL");
        ts_module_free(seq);
        return NULL;
    }
    for (; seq && i < n; i++) {
        char name[24];
        snprintf(name, sizeof name, "%d", i);
        if (!ts_module_add(seq, name, modules[i])) break;
    }
    if (seq && i == n) return seq;
    /* we own every module handed in: free those not consumed yet (once each, and never one that
     * another module owns) */
    ts_module_free(seq);
    for (int j = seq ? i + 1 : 0; j < n; j++) {
        bool seen = false;
        for (int k = 0; k < j && !seen; k++) seen = modules[k] == modules[j];
        if (modules[j] && !seen && !modules[j]->impl->parent) ts_module_free(modules[j]);
    }
    return NULL;
}
