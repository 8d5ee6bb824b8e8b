/* resnet.c — residual networks built over the public modules only, as examples of whole models
 * with PyTorch's names: torchvision's BasicBlock, Bottleneck and ResNet (resnet18/34/50, with a
 * CIFAR stem option), and He et al.'s CIFAR ResNets (resnet20) with the paper's option A shortcut.
 */
#include <stdio.h>
#include <string.h>

#include "tessera.h"

/* ------------------------------------------------------------------ blocks */
/* Each conv, bn(, relu) goes through ts_forward_conv_bn: the modules one after the other, or in
 * eval without gradients one convolution with the batch-norm folded in. */
typedef struct block {
    ts_module base;
    ts_module *conv1, *bn1, *conv2, *bn2, *conv3, *bn3, *relu; /* conv3, bn3: Bottleneck only */
    ts_module *downsample;                                     /* NULL: the identity shortcut */
} block;

static ts_tensor *shortcut(block *b, ts_tensor *x) {
    return b->downsample ? ts_forward(b->downsample, x) : x;
}

static ts_tensor *basic_block_forward(ts_module *self, ts_tensor *x) {
    block *b = (block *)self;
    ts_tensor *out = ts_forward_conv_bn(b->conv1, b->bn1, b->relu, x);
    out = ts_forward_conv_bn(b->conv2, b->bn2, NULL, out);
    return ts_forward(b->relu, ts_add(out, shortcut(b, x)));
}

static ts_tensor *bottleneck_forward(ts_module *self, ts_tensor *x) {
    block *b = (block *)self;
    ts_tensor *out = ts_forward_conv_bn(b->conv1, b->bn1, b->relu, x);
    out = ts_forward_conv_bn(b->conv2, b->bn2, b->relu, out);
    out = ts_forward_conv_bn(b->conv3, b->bn3, NULL, out);
    return ts_forward(b->relu, ts_add(out, shortcut(b, x)));
}

/* torchvision's conv3x3 and conv1x1: no bias, padding keeps the size at stride 1 */
static ts_module *conv3x3(int64_t in, int64_t out, int stride, int64_t groups) {
    return ts_conv2d_new(
        in, out, 3,
        (ts_conv2d_opts){
            .stride = {stride, stride}, .padding = {1, 1}, .groups = (int)groups, .no_bias = true});
}
static ts_module *conv1x1(int64_t in, int64_t out, int stride) {
    return ts_conv2d_new(in, out, 1, (ts_conv2d_opts){.stride = {stride, stride}, .no_bias = true});
}
static ts_module *bn(int64_t features) { return ts_batch_norm2d_new(features, (ts_norm_opts){0}); }

/* A block takes over its downsample even when it fails (one that already has a parent stays with
 * it: freeing it is refused, and the block's own error came first). */
static ts_module *drop(ts_module *downsample) {
    ts_module_free(downsample);
    return NULL;
}

/* The checks both kinds share, then the module. */
static block *block_alloc(const char *type, ts_forward_fn forward, int64_t inplanes, int64_t planes,
                          int stride, ts_module *downsample) {
    if (inplanes < 1 || planes < 1 || stride < 1)
        return ts_error_set(TS_ERR_ARG,
                            "%s: inplanes, planes and stride must be positive, got %lld, %lld "
                            "and %d",
                            type, (long long)inplanes, (long long)planes, stride),
               (block *)drop(downsample);
    block *b = ts_module_alloc(sizeof *b, type, forward);
    if (!b) drop(downsample);
    return b;
}

static ts_module *block_done(block *b, ts_module *downsample, bool ok) {
    ts_module *m = &b->base;
    if (downsample) ok = (b->downsample = ts_module_add(m, "downsample", downsample)) && ok;
    if (ok) return m;
    ts_module_free(m);
    return NULL;
}

ts_module *ts_basic_block_new(int64_t inplanes, int64_t planes, int stride, ts_module *downsample) {
    block *b = block_alloc("BasicBlock", basic_block_forward, inplanes, planes, stride, downsample);
    if (!b) return NULL;
    ts_module *m = &b->base;
    b->conv1 = ts_module_add(m, "conv1", conv3x3(inplanes, planes, stride, 1));
    b->bn1 = ts_module_add(m, "bn1", bn(planes));
    b->relu = ts_module_add(m, "relu", ts_relu_new());
    b->conv2 = ts_module_add(m, "conv2", conv3x3(planes, planes, 1, 1));
    b->bn2 = ts_module_add(m, "bn2", bn(planes));
    return block_done(b, downsample, b->conv1 && b->bn1 && b->relu && b->conv2 && b->bn2);
}

ts_module *ts_bottleneck_new(int64_t inplanes, int64_t planes, int stride, ts_module *downsample,
                             int64_t groups, int64_t width_per_group) {
    if (!groups) groups = 1;
    if (!width_per_group) width_per_group = 64;
    const int64_t width = planes * width_per_group / 64 * groups; /* torchvision's int() */
    if (planes >= 1 && (groups < 1 || width_per_group < 1 || width < 1))
        return ts_error_set(TS_ERR_ARG,
                            "Bottleneck: groups and width_per_group must be positive and give a "
                            "width of at least 1, got groups %lld, width_per_group %lld (width "
                            "%lld)",
                            (long long)groups, (long long)width_per_group, (long long)width),
               drop(downsample);
    block *b = block_alloc("Bottleneck", bottleneck_forward, inplanes, planes, stride, downsample);
    if (!b) return NULL;
    ts_module *m = &b->base;
    b->conv1 = ts_module_add(m, "conv1", conv1x1(inplanes, width, 1));
    b->bn1 = ts_module_add(m, "bn1", bn(width));
    b->conv2 = ts_module_add(m, "conv2", conv3x3(width, width, stride, groups));
    b->bn2 = ts_module_add(m, "bn2", bn(width));
    b->conv3 = ts_module_add(m, "conv3", conv1x1(width, planes * 4, 1));
    b->bn3 = ts_module_add(m, "bn3", bn(planes * 4));
    b->relu = ts_module_add(m, "relu", ts_relu_new());
    return block_done(b, downsample,
                      b->conv1 && b->bn1 && b->conv2 && b->bn2 && b->conv3 && b->bn3 && b->relu);
}

ts_module *ts_resnet_downsample_new(int64_t inplanes, int64_t outplanes, int stride) {
    ts_module *parts[2] = {conv1x1(inplanes, outplanes, stride), bn(outplanes)};
    if (parts[0] && parts[1]) return ts_sequential_new(2, parts);
    ts_module_free(parts[0]);
    ts_module_free(parts[1]);
    return NULL;
}

/* ------------------------------------------------------------------ option A shortcut */
/* He et al.'s option A: the identity, subsampled by the stride, with the new channels zero
 * (split over both sides, as the common PyTorch port's F.pad(x[:, :, ::2, ::2], (0, 0, 0, 0,
 * p, p))). Built from slices and a concatenation, so autograd needs nothing new. */
typedef struct shortcut_a {
    ts_module base;
    int64_t in, out;
    int stride;
} shortcut_a;

static ts_tensor *shortcut_a_forward(ts_module *self, ts_tensor *x) {
    shortcut_a *s = (shortcut_a *)self;
    if (ts_ndim(x) != 4 || ts_size(x, 1) != s->in)
        return ts_error_set(TS_ERR_SHAPE,
                            "ShortcutA: expected an input [N, %lld, H, W], got %d dims with %lld "
                            "channels",
                            (long long)s->in, ts_ndim(x),
                            (long long)(ts_ndim(x) > 1 ? ts_size(x, 1) : 0)),
               NULL;
    ts_tensor *sub =
        ts_slice(ts_slice(x, 2, 0, ts_size(x, 2), s->stride), 3, 0, ts_size(x, 3), s->stride);
    if (!sub || s->out == s->in) return sub;
    const int64_t front = (s->out - s->in) / 2, back = s->out - s->in - front;
    ts_shape sh = ts_shape_of(sub);
    ts_opts o = {.dtype = ts_dtype_of(x), .device = ts_device_of(x)};
    sh.dims[1] = front;
    ts_tensor *zf = ts_zeros(sh, o);
    sh.dims[1] = back;
    ts_tensor *parts[3] = {zf, sub, ts_zeros(sh, o)};
    return ts_cat(parts, 3, 1);
}

static void shortcut_a_extra(ts_module *self, char *buf, size_t n) {
    shortcut_a *s = (shortcut_a *)self;
    snprintf(buf, n, "%lld, %lld, stride=%d", (long long)s->in, (long long)s->out, s->stride);
}

static ts_module *shortcut_a_new(int64_t in, int64_t out, int stride) {
    shortcut_a *s = ts_module_alloc(sizeof *s, "ShortcutA", shortcut_a_forward);
    if (!s) return NULL;
    s->base.extra_repr = shortcut_a_extra;
    s->in = in, s->out = out, s->stride = stride;
    return &s->base;
}

/* ------------------------------------------------------------------ the networks */
typedef struct resnet {
    ts_module base;
    ts_module *conv1, *bn1, *relu, *maxpool; /* maxpool: NULL in the paper's CIFAR nets */
    ts_module *layer[4];                     /* layer1..layer4 (layer1..3 for CIFAR) */
    int blocks[4];                           /* the blocks of each */
    ts_module *avgpool, *fc;
    bool channels_last; /* the config's !plain_layout */
} resnet;

static ts_tensor *resnet_forward(ts_module *self, ts_tensor *x) {
    resnet *r = (resnet *)self;
    /* NHWC from the stem on: every layer then keeps it (a CUDA convolution returns NCHW) */
    if (r->channels_last && x && ts_ndim(x) == 4) x = ts_contiguous_format(x, TS_CHANNELS_LAST);
    x = ts_forward_conv_bn(r->conv1, r->bn1, r->relu, x);
    if (r->maxpool) x = ts_forward(r->maxpool, x);
    for (int i = 0; i < 4 && r->layer[i]; i++) x = ts_forward(r->layer[i], x);
    x = ts_flatten(ts_forward(r->avgpool, x), 1, -1);
    return ts_forward(r->fc, x);
}

/* What the builders share, resolved from the config. */
typedef struct plan {
    ts_resnet_block kind;
    int stages;
    const int *layers;
    bool paper_cifar; /* He et al.'s CIFAR nets: no maxpool, option A unless shortcut_conv */
    ts_resnet_config c;
} plan;

/* torchvision's _make_layer: `blocks` blocks of `planes`, the first with the stride and, where
 * the shape changes, a downsample. *inplanes becomes the stage's output channels. */
static ts_module *make_layer(const plan *p, int64_t *inplanes, int64_t planes, int blocks,
                             int stride) {
    const int64_t expansion = p->kind == TS_BOTTLENECK ? 4 : 1;
    ts_module *seq = ts_sequential_new(0, NULL);
    for (int i = 0; seq && i < blocks; i++) {
        const int s = i == 0 ? stride : 1;
        ts_module *down = NULL;
        if (s != 1 || *inplanes != planes * expansion) {
            down = p->paper_cifar && !p->c.shortcut_conv
                       ? shortcut_a_new(*inplanes, planes * expansion, s)
                       : ts_resnet_downsample_new(*inplanes, planes * expansion, s);
            if (!down) break;
        }
        ts_module *b =
            p->kind == TS_BOTTLENECK
                ? ts_bottleneck_new(*inplanes, planes, s, down, p->c.groups, p->c.width_per_group)
                : ts_basic_block_new(*inplanes, planes, s, down);
        char name[16];
        snprintf(name, sizeof name, "%d", i);
        if (!ts_module_add(seq, name, b)) break;
        *inplanes = planes * expansion;
        if (i + 1 == blocks) return seq;
    }
    ts_module_free(seq);
    return NULL;
}

/* torchvision's init: convs kaiming_normal_(fan_out, relu); BatchNorm already holds 1 and 0; with
 * zero_init_residual each block's last BatchNorm weight is 0, so every block starts as its
 * shortcut. */
static bool init_weights(ts_module *m, const plan *p) {
    ts_tensor_list ps = ts_module_named_parameters(m);
    bool ok = ps.n > 0;
    const char *last_bn = p->kind == TS_BOTTLENECK ? ".bn3.weight" : ".bn2.weight";
    const size_t nl = strlen(last_bn);
    for (int i = 0; ok && i < ps.n; i++) {
        const char *n = ps.names[i];
        const size_t len = strlen(n);
        if (ts_ndim(ps.tensors[i]) == 4)
            ok = ts_init_kaiming_normal_(ps.tensors[i], 0, TS_FAN_OUT) != NULL;
        else if (p->c.zero_init_residual && len > nl && !strcmp(n + len - nl, last_bn))
            ok = ts_init_zeros_(ps.tensors[i]) != NULL;
    }
    ts_tensor_list_free(&ps);
    return ok;
}

static ts_module *build(plan p) {
    ts_resnet_config *c = &p.c;
    if (!c->num_classes) c->num_classes = p.paper_cifar ? 10 : 1000;
    if (!c->in_channels) c->in_channels = 3;
    if (!c->width) c->width = p.paper_cifar ? 16 : 64;
    if (!c->groups) c->groups = 1;
    if (!c->width_per_group) c->width_per_group = 64;
    const char *op = p.paper_cifar ? "resnet_cifar" : "resnet";
    if (c->num_classes < 1 || c->in_channels < 1 || c->width < 1 || c->groups < 1 ||
        c->width_per_group < 1)
        return ts_error_set(TS_ERR_ARG,
                            "%s: num_classes, in_channels, width, groups and width_per_group must "
                            "be positive (0: default), got %lld, %lld, %lld, %lld and %lld",
                            op, (long long)c->num_classes, (long long)c->in_channels,
                            (long long)c->width, (long long)c->groups,
                            (long long)c->width_per_group),
               NULL;
    if (p.kind == TS_BASIC_BLOCK && (c->groups != 1 || c->width_per_group != 64))
        return ts_error_set(TS_ERR_ARG,
                            "%s: BasicBlock only supports groups=1 and width_per_group=64, got "
                            "%lld and %lld",
                            op, (long long)c->groups, (long long)c->width_per_group),
               NULL;
    if (p.kind != TS_BASIC_BLOCK && p.kind != TS_BOTTLENECK)
        return ts_error_set(TS_ERR_ARG, "%s: block must be TS_BASIC_BLOCK or TS_BOTTLENECK, got %d",
                            op, (int)p.kind),
               NULL;
    for (int i = 0; i < p.stages; i++)
        if (p.layers[i] < 1)
            return ts_error_set(TS_ERR_ARG, "%s: layers[%d] must be at least 1, got %d", op, i,
                                p.layers[i]),
                   NULL;

    resnet *r = ts_module_alloc(sizeof *r, "ResNet", resnet_forward);
    if (!r) return NULL;
    ts_module *m = &r->base;
    r->channels_last = !c->plain_layout;
    const bool small = p.paper_cifar || c->cifar_stem;
    r->conv1 = ts_module_add(
        m, "conv1",
        small ? conv3x3(c->in_channels, c->width, 1, 1)
              : ts_conv2d_new(
                    c->in_channels, c->width, 7,
                    (ts_conv2d_opts){.stride = {2, 2}, .padding = {3, 3}, .no_bias = true}));
    r->bn1 = ts_module_add(m, "bn1", bn(c->width));
    r->relu = ts_module_add(m, "relu", ts_relu_new());
    bool ok = r->conv1 && r->bn1 && r->relu;
    if (ok && !p.paper_cifar) {
        ts_module *pool = c->cifar_stem
                              ? ts_identity_new()
                              : ts_max_pool2d_new((ts_pool2d_opts){
                                    .kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}});
        ok = (r->maxpool = ts_module_add(m, "maxpool", pool)) != NULL;
    }
    int64_t inplanes = c->width;
    for (int i = 0; ok && i < p.stages; i++) {
        char name[16];
        snprintf(name, sizeof name, "layer%d", i + 1);
        r->layer[i] = ts_module_add(
            m, name, make_layer(&p, &inplanes, c->width << i, p.layers[i], i ? 2 : 1));
        r->blocks[i] = p.layers[i];
        ok = r->layer[i] != NULL;
    }
    if (ok) {
        r->avgpool = ts_module_add(m, "avgpool", ts_adaptive_avg_pool2d_new(1, 1));
        r->fc = ts_module_add(m, "fc", ts_linear_new(inplanes, c->num_classes));
        ok = r->avgpool && r->fc && init_weights(m, &p);
    }
    if (!ok) {
        ts_module_free(m);
        return NULL;
    }
    return m;
}

ts_module *ts_resnet_new(ts_resnet_block kind, const int layers[4], ts_resnet_config c) {
    if (!layers) return ts_error_set(TS_ERR_ARG, "resnet: layers is NULL"), NULL;
    return build((plan){.kind = kind, .stages = 4, .layers = layers, .c = c});
}

ts_module *ts_resnet18(ts_resnet_config c) {
    return ts_resnet_new(TS_BASIC_BLOCK, (const int[]){2, 2, 2, 2}, c);
}
ts_module *ts_resnet34(ts_resnet_config c) {
    return ts_resnet_new(TS_BASIC_BLOCK, (const int[]){3, 4, 6, 3}, c);
}
ts_module *ts_resnet50(ts_resnet_config c) {
    return ts_resnet_new(TS_BOTTLENECK, (const int[]){3, 4, 6, 3}, c);
}

ts_module *ts_resnet_cifar(int depth, ts_resnet_config c) {
    if (depth < 8 || (depth - 2) % 6)
        return ts_error_set(TS_ERR_ARG,
                            "resnet_cifar: depth must be 6n + 2 with n >= 1 (20, 32, 44, 56, "
                            "110), got %d",
                            depth),
               NULL;
    const int n = (depth - 2) / 6;
    const int layers[3] = {n, n, n};
    return build(
        (plan){.kind = TS_BASIC_BLOCK, .stages = 3, .layers = layers, .paper_cifar = true, .c = c});
}

ts_module *ts_resnet20(ts_resnet_config c) { return ts_resnet_cifar(20, c); }

ts_status ts_resnet_checkpoint_blocks(ts_module *m, int every) {
    if (!m || m->forward != resnet_forward)
        return ts_error_set(TS_ERR_ARG, "resnet_checkpoint_blocks: expected a ResNet, got %s",
                            m ? m->type_name : "NULL");
    if (every < 0)
        return ts_error_set(TS_ERR_ARG, "resnet_checkpoint_blocks: every must be >= 0, got %d",
                            every);
    const resnet *r = (const resnet *)m;
    for (int i = 0, k = 0; i < 4 && r->layer[i]; i++)
        for (int j = 0; j < r->blocks[i]; j++, k++) {
            char name[16];
            snprintf(name, sizeof name, "%d", j);
            ts_module_set_checkpoint(ts_module_child(r->layer[i], name),
                                     every > 0 && k % every == 0);
        }
    return ts_error();
}
