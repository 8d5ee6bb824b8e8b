/* norm_embedding_layers.c — built-in normalisation and lookup modules: batch_norm1d/2d, layer_norm,
 * embedding. */
#include <math.h>
#include <stdlib.h>

#include "nn/layers_internal.h"
#include "nn/module_internal.h"

static ts_module *finish(ts_module *m, bool ok) {
    if (ok) return m;
    ts_module_free(m);
    return NULL;
}

static const char *py_bool(bool b) { return b ? "True" : "False"; }

/* ------------------------------------------------------------------ BatchNorm1d / 2d */
typedef struct bn_m {
    ts_module base;
    int64_t features;
    double eps, momentum;
    bool affine, track;
    int dims; /* 1 or 2 */
    int w, b, mean, var, count;
} bn_m;

static ts_tensor *bn_forward(ts_module *self, ts_tensor *x) {
    bn_m *m = (bn_m *)self;
    int nd = x->shape.ndim;
    if (m->dims == 2 && nd != 4)
        return tsi_error_set(TS_ERR_SHAPE, "BatchNorm2d: expected 4D input (got %dD input)", nd),
               NULL;
    if (m->dims == 1 && nd != 2 && nd != 3)
        return tsi_error_set(TS_ERR_SHAPE, "BatchNorm1d: expected 2D or 3D input (got %dD input)",
                             nd),
               NULL;
    ts_tensor *mean = tsi_buffer_at(self, m->mean), *var = tsi_buffer_at(self, m->var);
    ts_tensor *count = tsi_buffer_at(self, m->count);
    if (self->training && count) {
        ts_no_grad_begin();
        ts_add_scalar_(count, 1);
        ts_no_grad_end();
    }
    /* without running statistics, batch statistics are used in eval too (PyTorch) */
    bool batch_stats = self->training || (!mean && !var);
    return ts_batch_norm(x, mean, var, tsi_param_at(self, m->w), tsi_param_at(self, m->b),
                         batch_stats, m->momentum, m->eps);
}

bool tsi_batch_norm2d_parts_of(ts_module *self, tsi_batch_norm2d_parts *out) {
    if (!self || self->forward != bn_forward || ((bn_m *)self)->dims != 2) return false;
    bn_m *m = (bn_m *)self;
    *out = (tsi_batch_norm2d_parts){.w = tsi_param_at(self, m->w),
                                    .b = tsi_param_at(self, m->b),
                                    .mean = tsi_buffer_at(self, m->mean),
                                    .var = tsi_buffer_at(self, m->var),
                                    .eps = m->eps};
    return true;
}

static void bn_extra(ts_module *self, char *buf, size_t n) {
    bn_m *m = (bn_m *)self;
    char eps[40], mom[40];
    tsi_py_float(m->eps, eps, sizeof eps);
    tsi_py_float(m->momentum, mom, sizeof mom);
    snprintf(buf, n, "%lld, eps=%s, momentum=%s, affine=%s, track_running_stats=%s",
             (long long)m->features, eps, mom, py_bool(m->affine), py_bool(m->track));
}

static ts_module *bn_new(const char *name, int dims, int64_t features, ts_norm_opts o) {
    tsi_init();
    if (features <= 0)
        return tsi_error_set(TS_ERR_ARG, "%s: num_features must be positive, got %lld", name,
                             (long long)features),
               NULL;
    if (o.eps < 0 || o.momentum < 0 || o.momentum > 1)
        return tsi_error_set(TS_ERR_ARG,
                             "%s: eps must be >= 0 and momentum in [0, 1], got %g and %g", name,
                             o.eps, o.momentum),
               NULL;
    bn_m *m = ts_module_alloc(sizeof *m, name, bn_forward);
    if (!m) return NULL;
    m->base.extra_repr = bn_extra;
    m->features = features;
    m->eps = o.eps ? o.eps : 1e-5;
    m->momentum = o.momentum || o.momentum_set ? o.momentum : 0.1;
    m->affine = !o.no_affine;
    m->track = !o.no_running_stats;
    m->dims = dims;
    m->w = m->b = m->mean = m->var = m->count = -1;
    if (!tsi_scope_open()) return finish(&m->base, false);
    bool ok = true;
    ts_module *b = &m->base;
    if (m->affine) {
        m->w = tsi_register_slot(b, "weight", ts_ones(TS_SHAPE(features), (ts_opts){0}), true);
        m->b = tsi_register_slot(b, "bias", ts_zeros(TS_SHAPE(features), (ts_opts){0}), true);
        ok = m->w >= 0 && m->b >= 0;
    }
    if (ok && m->track) {
        m->mean =
            tsi_register_slot(b, "running_mean", ts_zeros(TS_SHAPE(features), (ts_opts){0}), false);
        m->var =
            tsi_register_slot(b, "running_var", ts_ones(TS_SHAPE(features), (ts_opts){0}), false);
        m->count = tsi_register_slot(b, "num_batches_tracked",
                                     ts_zeros(TS_SHAPE(), (ts_opts){.dtype = TS_I64}), false);
        ok = m->mean >= 0 && m->var >= 0 && m->count >= 0;
    }
    ts_scope_end();
    return finish(b, ok);
}

ts_module *ts_batch_norm1d_new(int64_t num_features, ts_norm_opts o) {
    return bn_new("BatchNorm1d", 1, num_features, o);
}
ts_module *ts_batch_norm2d_new(int64_t num_features, ts_norm_opts o) {
    return bn_new("BatchNorm2d", 2, num_features, o);
}

/* ------------------------------------------------------------------ LayerNorm */
typedef struct ln_m {
    ts_module base;
    ts_shape shape;
    double eps;
    int w, b;
} ln_m;

static ts_tensor *ln_forward(ts_module *self, ts_tensor *x) {
    ln_m *m = (ln_m *)self;
    return ts_layer_norm(x, m->shape, tsi_param_at(self, m->w), tsi_param_at(self, m->b), m->eps);
}

bool tsi_layer_norm_parts_of(ts_module *self, tsi_layer_norm_parts *out) {
    if (!self || self->forward != ln_forward || self->impl->hooks || self->impl->place_input ||
        self->impl->checkpoint)
        return false;
    ln_m *m = (ln_m *)self;
    *out = (tsi_layer_norm_parts){.shape = m->shape,
                                  .w = tsi_param_at(self, m->w),
                                  .b = tsi_param_at(self, m->b),
                                  .eps = m->eps};
    return true;
}

static void ln_extra(ts_module *self, char *buf, size_t n) {
    ln_m *m = (ln_m *)self;
    char eps[40];
    tsi_py_float(m->eps, eps, sizeof eps);
    size_t k = 0;
    for (int i = 0; i < m->shape.ndim && k < n; i++)
        k +=
            (size_t)snprintf(buf + k, n - k, "%s%lld", i ? ", " : "(", (long long)m->shape.dims[i]);
    if (k < n)
        snprintf(buf + k, n - k, "%s), eps=%s, elementwise_affine=%s%s",
                 m->shape.ndim == 1 ? "," : "", eps, py_bool(m->w >= 0),
                 m->w >= 0 && m->b < 0 ? ", bias=False" : "");
}

ts_module *ts_layer_norm_new(ts_shape normalized_shape, ts_norm_opts o) {
    tsi_init();
    const char *op = "LayerNorm";
    if (!tsi_check_shape(op, normalized_shape)) return NULL;
    bool positive = normalized_shape.ndim > 0;
    for (int i = 0; i < normalized_shape.ndim; i++) positive &= normalized_shape.dims[i] > 0;
    if (!positive)
        return tsi_error_set(TS_ERR_ARG,
                             "%s: normalized_shape must have at least one dim, all positive; got "
                             "%s",
                             op, tsi_shape_str(normalized_shape)),
               NULL;
    if (o.eps < 0)
        return tsi_error_set(TS_ERR_ARG, "%s: eps must be >= 0, got %g", op, o.eps), NULL;
    ln_m *m = ts_module_alloc(sizeof *m, op, ln_forward);
    if (!m) return NULL;
    m->base.extra_repr = ln_extra;
    m->shape = normalized_shape;
    m->eps = o.eps ? o.eps : 1e-5;
    m->w = m->b = -1;
    bool ok = true;
    if (!o.no_affine) {
        if (!tsi_scope_open()) return finish(&m->base, false);
        m->w = tsi_register_slot(&m->base, "weight", ts_ones(normalized_shape, (ts_opts){0}), true);
        if (!o.no_bias)
            m->b =
                tsi_register_slot(&m->base, "bias", ts_zeros(normalized_shape, (ts_opts){0}), true);
        ok = m->w >= 0 && (o.no_bias || m->b >= 0);
        ts_scope_end();
    }
    return finish(&m->base, ok);
}

/* ------------------------------------------------------------------ Embedding */
typedef struct emb_m {
    ts_module base;
    int64_t num, dim;
    int w;
} emb_m;

static ts_tensor *emb_forward(ts_module *self, ts_tensor *x) {
    return ts_embedding(tsi_param_at(self, ((emb_m *)self)->w), x);
}

static void emb_extra(ts_module *self, char *buf, size_t n) {
    emb_m *m = (emb_m *)self;
    snprintf(buf, n, "%lld, %lld", (long long)m->num, (long long)m->dim);
}

ts_module *ts_embedding_new(int64_t num_embeddings, int64_t embedding_dim) {
    tsi_init();
    if (num_embeddings <= 0 || embedding_dim <= 0)
        return tsi_error_set(TS_ERR_ARG,
                             "Embedding: num_embeddings and embedding_dim must be positive, got "
                             "%lld and %lld",
                             (long long)num_embeddings, (long long)embedding_dim),
               NULL;
    emb_m *m = ts_module_alloc(sizeof *m, "Embedding", emb_forward);
    if (!m) return NULL;
    m->base.extra_repr = emb_extra;
    m->num = num_embeddings;
    m->dim = embedding_dim;
    if (!tsi_scope_open()) return finish(&m->base, false);
    ts_tensor *w = ts_empty(TS_SHAPE(num_embeddings, embedding_dim), (ts_opts){0});
    m->w = tsi_register_slot(&m->base, "weight", w, true);
    bool ok = m->w >= 0 && ts_init_normal_(w, 0.0, 1.0);
    ts_scope_end();
    return finish(&m->base, ok);
}
