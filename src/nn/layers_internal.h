/* layers_internal.h — what the eval path's conv + batch-norm fusion (conv_bn.c) reads of the
 * built-in Conv2d, BatchNorm2d and ReLU modules (layers.c, layers2.c). Not public. */
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

bool tsi_module_is_relu(const ts_module *m);       /* a built-in ReLU */
bool tsi_module_is_sequential(const ts_module *m); /* a built-in Sequential (placement.c) */

/* The run of modules at ms[0..n) that ts_forward_conv_bn takes at once: a Conv2d, then a
 * BatchNorm2d (*bn) and / or a ReLU (*act), each NULL when absent. Returns how many modules the
 * run holds (1: ms[0] alone, not a run). Sequential's forward uses it. */
int tsi_conv_bn_span(ts_module *const *ms, int n, ts_module **bn, ts_module **act);

/* Frees a Conv2d's fold cache (its destroy hook); NULL-safe. */
void tsi_conv_bn_cache_free(struct tsi_conv_bn_cache *c);

#endif /* TS_NN_LAYERS_INTERNAL_H */
