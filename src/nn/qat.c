/* qat.c — quantization-aware training of C modules (ts_qat_prepare; include/tessera/quant.h,
 * docs/QUANTIZATION.md, decision 0049): every built-in Linear and Conv2d gets PyTorch's x86 QAT
 * qconfig as children under PyTorch's state-dict names: `weight_fake_quant` (per-channel symmetric
 * qint8 along the output channels, a moving-average per-channel observer) and
 * `activation_post_process` (its output, per-tensor affine quint8, a moving-average observer),
 * each a FusedMovingAvgObsFakeQuantize with its observer as `activation_post_process`. The layer's
 * forward is replaced by one that fake-quantizes the weight, runs the layer's op and fake-quantizes
 * the output (PyTorch swaps nn.Conv2d for nn.qat.Conv2d); the fast paths that recognise a built-in
 * layer by its forward function then no longer take it, so none can skip the fake quantization. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "nn/layers_internal.h"
#include "nn/module_internal.h"
#include "tessera/quant.h"

/* ------------------------------------------------------------------ observers */
typedef struct obs_m {
    ts_module base;
    bool per_channel; /* along dim 0 */
    double c;         /* averaging constant */
    int eps, min, max;
} obs_m;

/* the running min / max updated by x (values only: no graph) */
static bool obs_update(obs_m *o, ts_tensor *x) {
    ts_module *m = &o->base;
    ts_tensor *mn = tsi_buffer_at(m, o->min), *mx = tsi_buffer_at(m, o->max);
    if (!o->per_channel) return ts_moving_average_minmax_update(mn, mx, x, o->c) == TS_OK;
    ts_tensor *nmin, *nmax;
    if (ts_moving_average_per_channel_minmax_update(mn, mx, x, 0, o->c, &nmin, &nmax) != TS_OK)
        return false;
    return ts_copy_(mn, nmin) && ts_copy_(mx, nmax);
}

static ts_tensor *obs_forward(ts_module *self, ts_tensor *x) {
    return self->training && !obs_update((obs_m *)self, x) ? NULL : x;
}

static ts_module *obs_new(bool per_channel, int64_t channels, double c, ts_device dev) {
    obs_m *o = ts_module_alloc(sizeof *o,
                               per_channel ? "MovingAveragePerChannelMinMaxObserver"
                                           : "MovingAverageMinMaxObserver",
                               obs_forward);
    if (!o) return NULL;
    o->per_channel = per_channel, o->c = c;
    if (!tsi_scope_open()) {
        ts_module_free(&o->base);
        return NULL;
    }
    const ts_opts f32 = {.dtype = TS_F32, .device = dev};
    const ts_shape s = per_channel ? TS_SHAPE(channels) : TS_SHAPE();
    o->eps = tsi_register_slot(&o->base, "eps", ts_full(TS_SHAPE(1), FLT_EPSILON, f32), false);
    o->min = tsi_register_slot(&o->base, "min_val", ts_full(s, INFINITY, f32), false);
    o->max = tsi_register_slot(&o->base, "max_val", ts_full(s, -INFINITY, f32), false);
    ts_scope_end();
    if (o->eps >= 0 && o->min >= 0 && o->max >= 0) return &o->base;
    ts_module_free(&o->base);
    return NULL;
}

/* ------------------------------------------------------------------ fake quantize */
typedef struct fq_m {
    ts_module base;
    bool per_channel; /* symmetric qint8 along dim 0; else affine quint8 per tensor */
    int64_t qmin, qmax;
    int fq_on, obs_on, scale, zp;
    obs_m *obs; /* the child activation_post_process */
    /* the layer it serves (weight fake quants only): its op and parameter slots */
    bool conv;
    ts_conv2d_opts o;
    int w, b;
} fq_m;

static bool flag_on(ts_module *m, int slot) {
    const double v = ts_item(tsi_buffer_at(m, slot));
    return !isnan(v) && v != 0;
}

/* PyTorch's fused fake quant: the observer sees x, then scale / zero_point become fbgemm's
 * ChooseQuantizationParams of its running range (ts_choose_qparams_minmax; the per-channel
 * weights' symmetric), then x is fake quantized with them (when enabled). Observers run in
 * training only, and the qparams change only when they do (PyTorch recomputes them from the same
 * range on every call: the same values). */
static ts_tensor *fq_forward(ts_module *self, ts_tensor *x) {
    fq_m *f = (fq_m *)self;
    ts_tensor *scale = tsi_buffer_at(self, f->scale), *zp = tsi_buffer_at(self, f->zp);
    if (self->training && flag_on(self, f->obs_on)) {
        obs_m *o = f->obs;
        if (!obs_update(o, x)) return NULL;
        ts_tensor *s, *z;
        if (ts_choose_qparams_minmax(tsi_buffer_at(&o->base, o->min),
                                     tsi_buffer_at(&o->base, o->max), f->qmin, f->qmax,
                                     f->per_channel, &s, &z) != TS_OK ||
            !ts_copy_(scale, s) || !ts_copy_(zp, z))
            return NULL;
    }
    if (!flag_on(self, f->fq_on)) return x;
    if (f->per_channel)
        return ts_fake_quantize_per_channel_affine(x, scale, zp, 0, f->qmin, f->qmax);
    const double sc = ts_item(scale), z = ts_item(zp);
    if (ts_error()) return NULL;
    return ts_fake_quantize_per_tensor_affine(x, sc, (int64_t)z, f->qmin, f->qmax);
}

static void fq_extra(ts_module *self, char *buf, size_t n) {
    fq_m *f = (fq_m *)self;
    snprintf(buf, n, "dtype=torch.%s, quant_min=%lld, quant_max=%lld, qscheme=torch.%s",
             f->per_channel ? "qint8" : "quint8", (long long)f->qmin, (long long)f->qmax,
             f->per_channel ? "per_channel_symmetric" : "per_tensor_affine");
}

static fq_m *fq_new(bool per_channel, int64_t channels, int64_t qmin, int64_t qmax, double c,
                    ts_device dev) {
    fq_m *f = ts_module_alloc(sizeof *f, "FusedMovingAvgObsFakeQuantize", fq_forward);
    if (!f) return NULL;
    f->base.extra_repr = fq_extra;
    f->per_channel = per_channel, f->qmin = qmin, f->qmax = qmax, f->w = f->b = -1;
    if (!tsi_scope_open()) {
        ts_module_free(&f->base);
        return NULL;
    }
    /* PyTorch's buffers: fake_quant_enabled and observer_enabled int64 [1] (the fused module's);
     * scale / zero_point one per channel from the start (PyTorch's start at [1] and grow on the
     * first batch: these load a trained PyTorch state dict as they are) */
    const ts_opts i64 = {.dtype = TS_I64, .device = dev};
    const ts_shape s = TS_SHAPE(per_channel ? channels : 1);
    f->fq_on =
        tsi_register_slot(&f->base, "fake_quant_enabled", ts_full(TS_SHAPE(1), 1, i64), false);
    f->obs_on =
        tsi_register_slot(&f->base, "observer_enabled", ts_full(TS_SHAPE(1), 1, i64), false);
    f->scale = tsi_register_slot(&f->base, "scale",
                                 ts_ones(s, (ts_opts){.dtype = TS_F32, .device = dev}), false);
    f->zp = tsi_register_slot(&f->base, "zero_point",
                              ts_zeros(s, (ts_opts){.dtype = TS_I32, .device = dev}), false);
    ts_scope_end();
    f->obs =
        ts_module_add(&f->base, "activation_post_process", obs_new(per_channel, channels, c, dev));
    if (f->fq_on >= 0 && f->obs_on >= 0 && f->scale >= 0 && f->zp >= 0 && f->obs) return f;
    ts_module_free(&f->base);
    return NULL;
}

static bool is_fq(const ts_module *m) { return m && m->forward == fq_forward; }

/* ------------------------------------------------------------------ the prepared layers */
static ts_module *child_named(ts_module *m, const char *name) {
    const int i = tsi_named_find(&m->impl->children, name);
    return i >= 0 ? m->impl->children.items[i] : NULL;
}

/* nn.qat.Linear / Conv2d's forward and the output's fake quant (PyTorch's observer hook, which
 * prepare puts first) */
static ts_tensor *qat_forward(ts_module *self, ts_tensor *x) {
    ts_module *wm = child_named(self, "weight_fake_quant"), *am;
    if (!is_fq(wm))
        return tsi_error_set(TS_ERR_STATE, "qat: %s's weight_fake_quant is missing",
                             self->type_name),
               NULL;
    fq_m *wf = (fq_m *)wm;
    ts_tensor *w = ts_forward(wm, tsi_param_at(self, wf->w)), *b = tsi_param_at(self, wf->b);
    if (!w) return NULL;
    ts_tensor *y = wf->conv ? ts_conv2d(x, w, b, wf->o) : ts_linear(x, w, b);
    am = child_named(self, "activation_post_process");
    return y && am ? ts_forward(am, y) : y;
}

/* ------------------------------------------------------------------ the walk */
typedef struct walk {
    const char *op;
    int layers;
    double c;
    int64_t act_qmax;
    bool check; /* first pass: only check (and count) */
} walk;

static bool path_join(char *out, size_t n, const char *path, const char *name) {
    const int k = snprintf(out, n, "%s%s%s", path, *path ? "." : "", name);
    return k >= 0 && (size_t)k < n;
}

static bool prepare_layer(walk *wk, ts_module *m, const char *path, bool conv, ts_tensor *w,
                          ts_tensor *b, const ts_conv2d_opts *o) {
    const ts_device dev = ts_device_of(w);
    if (!*path) path = "the root";
    if (wk->check) {
        if (ts_dtype_of(w) != TS_F32)
            return tsi_error_set(TS_ERR_DTYPE,
                                 "%s: %s (%s): the weight is %s; fake quantization takes float32",
                                 wk->op, path, m->type_name, ts_dtype_name(ts_dtype_of(w))),
                   false;
        if (dev.type != TS_CPU && dev.type != TS_SIM)
            return tsi_error_set(TS_ERR_UNSUPPORTED,
                                 "%s: %s (%s) is on %s; fake quantization runs on cpu and sim",
                                 wk->op, path, m->type_name, ts_device_str(dev)),
                   false;
        if (m->impl->children.n)
            return tsi_error_set(TS_ERR_STATE, "%s: %s (%s) already has children", wk->op, path,
                                 m->type_name),
                   false;
        wk->layers++;
        return true;
    }
    const int64_t out = ts_shape_of(w).dims[0];
    fq_m *wf = fq_new(true, out, -128, 127, wk->c, dev);
    fq_m *af = wf ? fq_new(false, 1, 0, wk->act_qmax, wk->c, dev) : NULL;
    if (!af) {
        if (wf) ts_module_free(&wf->base);
        return false;
    }
    wf->conv = conv;
    if (conv) wf->o = *o;
    wf->w = tsi_named_find(&m->impl->params, "weight");
    wf->b = b ? tsi_named_find(&m->impl->params, "bias") : -1;
    ts_module_train(&wf->base, m->training);
    ts_module_train(&af->base, m->training);
    if (!ts_module_add(m, "weight_fake_quant", &wf->base)) {
        ts_module_free(&af->base);
        return false;
    }
    if (!ts_module_add(m, "activation_post_process", &af->base)) return false;
    m->forward = qat_forward;
    return true;
}

static bool walk_tree(walk *wk, ts_module *m, const char *path) {
    if (m->forward == qat_forward || is_fq(m) || m->forward == obs_forward)
        return tsi_error_set(TS_ERR_STATE,
                             "%s: the model is already prepared for QAT (%s is a QAT module)",
                             wk->op, *path ? path : "the root"),
               false;
    ts_tensor *w, *b;
    tsi_conv2d_parts cp;
    if (tsi_linear_parts_of(m, &w, &b)) return prepare_layer(wk, m, path, false, w, b, NULL);
    if (tsi_conv2d_parts_of(m, &cp)) return prepare_layer(wk, m, path, true, cp.w, cp.b, &cp.o);
    if (wk->check) /* a weight QAT would leave in float would make every accuracy a guess */
        for (int i = 0; i < m->impl->params.n; i++) {
            ts_tensor *p = m->impl->params.items[i];
            if (p && ts_ndim(p) >= 2)
                return tsi_error_set(TS_ERR_UNSUPPORTED,
                                     "%s: %s (%s) has the %d-dim parameter '%s', which QAT cannot "
                                     "fake-quantize (only Linear and Conv2d are prepared)",
                                     wk->op, *path ? path : "the root", m->type_name, ts_ndim(p),
                                     m->impl->params.names[i]),
                       false;
        }
    for (int i = 0; i < m->impl->children.n; i++) {
        char sub[512];
        if (!path_join(sub, sizeof sub, path, m->impl->children.names[i]))
            return tsi_error_set(TS_ERR_ARG, "%s: module path too long under %s", wk->op, path),
                   false;
        if (!walk_tree(wk, m->impl->children.items[i], sub)) return false;
    }
    return true;
}

ts_status ts_qat_prepare(ts_module *model, ts_qat_opts opts) {
    const char *op = "qat_prepare";
    tsi_init();
    if (!model) return tsi_error_set(TS_ERR_ARG, "%s: model is NULL", op);
    const double c = opts.averaging_constant == 0 ? 0.01 : opts.averaging_constant;
    if (!(c > 0 && c <= 1))
        return tsi_error_set(TS_ERR_ARG, "%s: averaging_constant must be in (0, 1] (got %g)", op,
                             opts.averaging_constant);
    walk wk = {.op = op, .c = c, .act_qmax = opts.no_reduce_range ? 255 : 127, .check = true};
    if (!walk_tree(&wk, model, "")) return ts_error();
    if (!wk.layers)
        return tsi_error_set(TS_ERR_ARG, "%s: the model (%s) has no Linear or Conv2d to prepare",
                             op, model->type_name);
    wk.check = false;
    return walk_tree(&wk, model, "") ? TS_OK : ts_error();
}

/* ------------------------------------------------------------------ switches */
static int set_flags(ts_module *m, bool observer, double v) {
    int n = 0;
    if (is_fq(m)) {
        fq_m *f = (fq_m *)m;
        if (!ts_fill_(tsi_buffer_at(m, observer ? f->obs_on : f->fq_on), v)) return -1;
        n++;
    }
    for (int i = 0; i < m->impl->children.n; i++) {
        const int k = set_flags(m->impl->children.items[i], observer, v);
        if (k < 0) return -1;
        n += k;
    }
    return n;
}

static ts_status switch_all(const char *op, ts_module *model, bool observer, double v) {
    tsi_init();
    if (!model) return tsi_error_set(TS_ERR_ARG, "%s: model is NULL", op);
    if (!tsi_scope_open()) return ts_error(); /* fill_'s returned references */
    const int n = set_flags(model, observer, v);
    ts_scope_end();
    if (n < 0) return ts_error();
    if (!n)
        return tsi_error_set(TS_ERR_ARG, "%s: the model (%s) is not prepared for QAT", op,
                             model->type_name);
    return TS_OK;
}

ts_status ts_qat_freeze_observers(ts_module *model, bool frozen) {
    return switch_all("qat_freeze_observers", model, true, frozen ? 0 : 1);
}

ts_status ts_qat_enable_fake_quant(ts_module *model, bool on) {
    return switch_all("qat_enable_fake_quant", model, false, on ? 1 : 0);
}
