/* layers_internal.h — what the eval path's conv + batch-norm fusion (conv_bn.c) reads of the
 * built-in Conv2d, BatchNorm2d and ReLU modules (layers.c, norm_embedding_layers.c). Not public. */
#ifndef TS_NN_LAYERS_INTERNAL_H
#define TS_NN_LAYERS_INTERNAL_H

#include "tessera.h"

struct tsi_conv_bn_cache; /* conv_bn.c: a Conv2d's folded weight and bias, kept across calls */

/* A built-in Conv2d's weight, bias (NULL: none), options (defaults resolved) and the slot of its
 * fold cache; false for any other module. */
typedef struct tsi_conv2d_parts {
    ts_tensor *w, *b;
    ts_conv2d_opts o;
    struct tsi_conv_bn_cache **cache;
} tsi_conv2d_parts;
bool tsi_conv2d_parts_of(ts_module *m, tsi_conv2d_parts *out);

/* A built-in BatchNorm2d's affine weight and bias (NULL without affine), running mean and
 * variance (NULL without running statistics) and eps; false for any other module. */
typedef struct tsi_batch_norm2d_parts {
    ts_tensor *w, *b, *mean, *var;
    double eps;
} tsi_batch_norm2d_parts;
bool tsi_batch_norm2d_parts_of(ts_module *m, tsi_batch_norm2d_parts *out);

/* A built-in Linear's weight and bias (NULL: none); false for any other module. */
bool tsi_linear_parts_of(ts_module *m, ts_tensor **w, ts_tensor **b);
/* linear_act_fused.c: act(Linear(x)) with the backend's matmul_bias_act where it takes them (a
 * built-in Linear with a bias and no hooks, relu or gelu_tanh), else the modules' composition;
 * tsi_linear_act the same for ts_linear's tensors. */
ts_tensor *tsi_forward_linear_act(ts_module *linear, ts_activation act, ts_tensor *x);
ts_tensor *tsi_linear_act(ts_tensor *x, ts_tensor *w, ts_tensor *b, ts_activation act);
/* Whether ms[0..n) starts with a built-in Linear and a built-in ReLU or GELU(approximate='tanh')
 * without hooks (*act: which), the pair Sequential's forward runs as tsi_forward_linear_act. */
bool tsi_linear_act_span(ts_module *const *ms, int n, ts_activation *act);
bool tsi_module_is_gelu_tanh(const ts_module *m); /* a built-in GELU(approximate='tanh') */
/* mlp_fused.c: linear2(dropout(act(linear1(x)))) as one node where the backend has
 * matmul_bias_act and a graph is recorded (its backward: matmul_dact_bgrad where the backend has
 * it), dropout NULL or the identity; else the modules' composition. */
ts_tensor *tsi_forward_mlp(ts_module *linear1, ts_activation act, ts_module *dropout,
                           ts_module *linear2, ts_tensor *x);
/* How many of ms[0..n) Sequential's forward runs as tsi_forward_mlp (a Linear, a ReLU or
 * GELU(approximate='tanh'), optionally a Dropout, a Linear, none with hooks): 0 where they are not
 * such a run; *act, *dropout (NULL: none) what it holds. */
int tsi_mlp_span(ts_module *const *ms, int n, ts_activation *act, ts_module **dropout);
/* A built-in Dropout that is the identity now: no hooks, p == 0 or not training. */
bool tsi_module_dropout_identity(const ts_module *m);
/* A built-in LayerNorm's normalized_shape, weight and bias (NULL: none) and eps, when
 * ts_forward of it would run just ts_layer_norm with them (no hooks, ts_module_place's among them,
 * no placed input, no checkpoint: transformer.c then fuses it with the residual add before it);
 * false otherwise and for any other module. */
typedef struct tsi_layer_norm_parts {
    ts_shape shape;
    ts_tensor *w, *b;
    double eps;
} tsi_layer_norm_parts;
bool tsi_layer_norm_parts_of(ts_module *m, tsi_layer_norm_parts *out);

bool tsi_module_is_relu(const ts_module *m);       /* a built-in ReLU */
bool tsi_module_is_sequential(const ts_module *m); /* a built-in Sequential (placement.c) */

/* The run of modules at ms[0..n) that ts_forward_conv_bn takes at once: a Conv2d, then a
 * BatchNorm2d (*bn) and / or a ReLU (*act), each NULL when absent. Returns how many modules the
 * run holds (1: ms[0] alone, not a run). Sequential's forward uses it. */
int tsi_conv_bn_span(ts_module *const *ms, int n, ts_module **bn, ts_module **act);

/* Frees a Conv2d's fold cache (its destroy hook); NULL-safe. */
void tsi_conv_bn_cache_free(struct tsi_conv_bn_cache *c);

#endif /* TS_NN_LAYERS_INTERNAL_H */
