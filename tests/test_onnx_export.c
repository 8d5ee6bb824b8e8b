/* test_onnx_export.c — ts_onnx_export against ts_onnx_load: each model of the `tessera` zoo (MLP,
 * LeNet-5, SimpleCNN, ResNet-20, ResNet-18, GPT; small widths) and a module that runs the other
 * traced ops is exported with a dynamic batch at batch 2, loaded back, and both run on the same
 * random input at batch 2 and at batch 3, on every test device. The outputs agree within float32
 * rounding (TOL); where the import runs the same Tessera ops as the module they agree bit for bit
 * (the table says which: MLP, LeNet-5, SimpleCNN), and so does the import with the inference
 * rewrites on the blocked layout (TS_ONNX_BLOCKED=nchw); the default import, which runs dense conv
 * nets channels_last, within TOL, and for the ReLU nets without batch norm within a bound from the
 * arithmetic of a float64 reference (abs_bound_excess). Then: an op with no ONNX form and an op the
 * trace does not record are TS_ERR_UNSUPPORTED naming the op (and leave no file), the module keeps
 * its training mode, and an allocation-failure sweep over an export. */
#define _POSIX_C_SOURCE 200809L /* mkdtemp */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/env_config.h"
#include "fault_sweep.h"
#include "sweep_model.h"
#include "ts_test.h"

/* max |exported - module| / max(1, max |module|). Where the file's operators are not the module's
 * ops the import computes them with other kernels, which round differently: the ResNets'
 * adaptive_avg_pool2d(1, 1) is a GlobalAveragePool (the import's sums in another order), GPT's
 * GELU is ONNX's Div/Erf/Add/Mul/Mul (not the fused gelu kernel) and its attention the
 * MatMul/Mul/Add/Softmax/MatMul decomposition (not the fused flash kernel). */
#define TOL 1e-5

static char dir[64];

/* ------------------------------------------------------------------ the zoo (tools/tessera) */
/* The same modules as tools/tessera/models.c builds, which lives in the command, not the library.
 */
typedef struct mlp {
    ts_module base;
    ts_module *fc1, *fc2;
} mlp;

static ts_tensor *mlp_forward(ts_module *self, ts_tensor *x) {
    mlp *m = (mlp *)self;
    x = ts_flatten(x, 1, -1);
    x = ts_relu(ts_forward(m->fc1, x));
    return ts_forward(m->fc2, x);
}

static ts_module *mlp_new(void) {
    mlp *m = ts_module_alloc(sizeof *m, "MLP", mlp_forward);
    m->fc1 = ts_module_add(&m->base, "fc1", ts_linear_new(64, 32));
    m->fc2 = ts_module_add(&m->base, "fc2", ts_linear_new(32, 10));
    return &m->base;
}

typedef struct cnn {
    ts_module base;
    ts_module *conv1, *pool, *conv2, *fc1, *fc2, *fc3;
} cnn;

static ts_tensor *cnn_forward(ts_module *self, ts_tensor *x) {
    cnn *m = (cnn *)self;
    x = ts_forward(m->pool, ts_relu(ts_forward(m->conv1, x)));
    x = ts_forward(m->pool, ts_relu(ts_forward(m->conv2, x)));
    x = ts_flatten(x, 1, -1);
    x = ts_relu(ts_forward(m->fc1, x));
    x = ts_relu(ts_forward(m->fc2, x));
    return ts_forward(m->fc3, x);
}

static ts_module *cnn_new(const char *type, int64_t channels, int64_t size, int pad) {
    const int64_t h = ((size + 2 * pad - 4) / 2 - 4) / 2;
    cnn *m = ts_module_alloc(sizeof *m, type, cnn_forward);
    m->conv1 = ts_module_add(
        &m->base, "conv1", ts_conv2d_new(channels, 6, 5, (ts_conv2d_opts){.padding = {pad, pad}}));
    m->pool = ts_module_add(
        &m->base, "pool", ts_max_pool2d_new((ts_pool2d_opts){.kernel = {2, 2}, .stride = {2, 2}}));
    m->conv2 = ts_module_add(&m->base, "conv2", ts_conv2d_new(6, 16, 5, (ts_conv2d_opts){0}));
    m->fc1 = ts_module_add(&m->base, "fc1", ts_linear_new(16 * h * h, 120));
    m->fc2 = ts_module_add(&m->base, "fc2", ts_linear_new(120, 84));
    m->fc3 = ts_module_add(&m->base, "fc3", ts_linear_new(84, 10));
    return &m->base;
}

static ts_module *lenet_new(void) { return cnn_new("LeNet5", 1, 28, 2); }
static ts_module *simplecnn_new(void) { return cnn_new("SimpleCNN", 3, 32, 0); }
/* The ResNets with NCHW activations (plain_layout): the import runs NCHW kernels, so the same bits
 * need the module on them too; resnet18_cl keeps the default channels_last activations (oneDNN's
 * NHWC kernels: the same math summed in another order, within TOL). */
static ts_module *resnet20_new(void) {
    return ts_resnet20_new(
        (ts_resnet_config){.num_classes = 10, .in_channels = 3, .width = 4, .plain_layout = true});
}
static ts_module *resnet18_new(void) {
    return ts_resnet18_new((ts_resnet_config){
        .num_classes = 10, .in_channels = 3, .width = 4, .cifar_stem = true, .plain_layout = true});
}
static ts_module *resnet18_cl_new(void) {
    return ts_resnet18_new(
        (ts_resnet_config){.num_classes = 10, .in_channels = 3, .width = 4, .cifar_stem = true});
}
static ts_module *gpt_new(void) {
    return ts_gpt_new((ts_gpt_config){
        .vocab_size = 256, .context = 12, .n_layer = 2, .n_head = 2, .n_embd = 16, .dropout = 0.1});
}

/* ------------------------------------------------------------------ the other traced ops */
/* A forward through the ops the zoo does not use (or uses only inside others): pools, joins,
 * views, reductions, softmaxes, attention with a bool mask, scalar arithmetic, GELU's tanh form. */
typedef struct sampler {
    ts_module base;
    ts_module *norm, *lin;
    ts_tensor *shift; /* [3] on the cpu, not registered: a constant with a generated name */
} sampler;

/* [9, 9] bool, a band (each query sees some keys), made in the forward from traced ops on
 * constants: the exported graph computes it (and the import folds it) */
static ts_tensor *band_mask(ts_device dev) {
    ts_tensor *i =
        ts_view(ts_arange(0, 9, 1, (ts_opts){.dtype = TS_I64, .device = dev}), TS_SHAPE(9, 1));
    ts_tensor *j = ts_arange(0, 9, 1, (ts_opts){.dtype = TS_I64, .device = dev});
    return ts_ge(ts_add_scalar(i, 2), j);
}

static ts_tensor *sampler_forward(ts_module *self, ts_tensor *x) {
    sampler *s = (sampler *)self;
    ts_tensor *a = ts_avg_pool2d(x, (ts_pool2d_opts){.kernel = {2, 2}}); /* [B, 4, 3, 3] */
    ts_tensor *parts[2] = {ts_sigmoid(a), ts_tanh(ts_mul_scalar(a, 0.5))};
    ts_tensor *c = ts_cat(parts, 2, 1); /* [B, 8, 3, 3] */
    ts_tensor *f = ts_reshape(ts_permute(c, (ts_dims){4, {0, 2, 3, 1}}), TS_SHAPE(-1, 9, 8));
    ts_tensor *g = ts_forward(s->norm, f);
    ts_tensor *mask = band_mask(ts_device_of(x));
    ts_tensor *att = ts_scaled_dot_product_attention(g, g, g, mask, 0, false, 0);
    ts_tensor *h =
        ts_add(ts_softmax(att, -1), ts_transpose(ts_log_softmax(ts_transpose(att, 1, 2), 1), 1, 2));
    ts_tensor *n = ts_narrow(h, 1, 1, 4); /* [B, 4, 8] */
    ts_tensor *j = ts_sub(ts_select(n, 2, 0), ts_mean_dim(n, -1, false));
    ts_tensor *k = ts_clamp(ts_div_scalar(ts_rsub_scalar(j, 1.0), 3.0), -0.75, 0.75);
    ts_tensor *l = ts_gelu_tanh(ts_forward(s->lin, ts_unsqueeze(k, 1))); /* [B, 1, 6] */
    ts_tensor *m = ts_sum_dim(ts_squeeze(l), 1, true);                   /* [B, 1] */
    ts_tensor *sl = ts_slice(ts_squeeze(l), 1, 1, 6, 2);                 /* [B, 3] */
    ts_tensor *y =
        ts_add(ts_mul(sl, ts_exp(ts_neg(ts_abs(m)))), ts_sqrt(ts_add_scalar(ts_square(sl), 1)));
    return ts_sub(y, ts_to(s->shift, ts_device_of(x)));
}

static void sampler_destroy(ts_module *self) { ts_release(((sampler *)self)->shift); }

static ts_module *sampler_new(void) {
    sampler *s = ts_module_alloc(sizeof *s, "Sampler", sampler_forward);
    s->norm = ts_module_add(&s->base, "norm", ts_layer_norm_new(TS_SHAPE(8), (ts_norm_opts){0}));
    s->lin = ts_module_add(&s->base, "lin", ts_linear_new(4, 6));
    s->shift = ts_randn(TS_SHAPE(3), (ts_opts){.device = ts_cpu()}); /* outside a scope: owned */
    s->base.destroy = sampler_destroy;
    return &s->base;
}

/* ------------------------------------------------------------------ helpers */
/* Random running statistics and a little noise on every weight, so that eval-mode BatchNorm and
 * the rest do real work (fresh BatchNorms are the identity). */
static void perturb(ts_module *m) {
    ts_tensor_list sd = ts_module_state_dict(m);
    ts_no_grad_begin();
    ts_scope_begin();
    for (int i = 0; i < sd.n; i++) {
        ts_tensor *t = sd.tensors[i];
        const ts_dtype dt = ts_dtype_of(t);
        if (dt != TS_F32 && dt != TS_F64) continue;
        if (strstr(sd.names[i], "running_var"))
            ts_copy_(t, ts_add_scalar(ts_rand_like(t), 0.5));
        else
            ts_add_(t, ts_mul_scalar(ts_randn_like(t), 0.05));
    }
    ts_scope_end();
    ts_no_grad_end();
    ts_tensor_list_free(&sd);
}

static ts_tensor *host_f64(ts_tensor *t, int64_t *n) {
    *n = ts_numel(t);
    return ts_to(ts_contiguous(ts_to_dtype(t, TS_F64)), ts_cpu());
}

/* max |a - b| / max(1, max |b|); *same: bit for bit */
static double rel_err(ts_tensor *a, ts_tensor *b, bool *same) {
    int64_t na, nb;
    ts_tensor *ha = host_f64(a, &na), *hb = host_f64(b, &nb);
    *same = false;
    if (!ha || !hb || na != nb) return INFINITY;
    double *va = malloc((size_t)na * sizeof *va), *vb = malloc((size_t)nb * sizeof *vb);
    double diff = 0, scale = 1;
    ts_copy_to_host(ha, va, (size_t)na * sizeof *va);
    ts_copy_to_host(hb, vb, (size_t)nb * sizeof *vb);
    *same = true;
    for (int64_t i = 0; i < na; i++) {
        diff = fmax(diff, fabs(va[i] - vb[i]));
        scale = fmax(scale, fabs(vb[i]));
        *same = *same && memcmp(&va[i], &vb[i], sizeof *va) == 0;
    }
    free(va);
    free(vb);
    return isnan(diff) ? INFINITY : diff / scale;
}

static ts_tensor *input_for(ts_shape s, bool tokens, int64_t batch, ts_device dev) {
    s.dims[0] = batch;
    if (tokens) return ts_randint(0, 256, s, (ts_opts){.device = dev});
    return ts_randn(s, (ts_opts){.device = dev});
}

/* ReLU nets without batch norm (MLP, LeNet-5, SimpleCNN): a float32 forward y of x is within
 * gamma_n M of the exact one, M the float64 forward of the same module on |x| with |W| and |b|
 * (Relu is then the identity and max pooling monotone, so M bounds every magnitude met), n the sum
 * over the weights of K + 1 (the K products and the bias one output of that layer sums; the
 * layers run in sequence, so their errors add), gamma_n = n u / (1 - n u). Returns the worst
 * |y - exact| / (gamma_n M), exact from m in float64; m is left in float64 on the cpu with its
 * parameters' absolute values. */
static double abs_bound_excess(ts_module *m, ts_tensor *y, ts_tensor *x) {
    ts_no_grad_begin();
    m = ts_module_to_dtype(ts_module_to(m, ts_cpu()), TS_F64);
    ts_tensor *x64 = ts_to_dtype(ts_to(x, ts_cpu()), TS_F64);
    ts_tensor *want = ts_forward(m, x64);
    ts_tensor_list ps = ts_module_named_parameters(m);
    double n = 0;
    for (int i = 0; i < ps.n; i++) {
        ts_tensor *p = ps.tensors[i];
        if (ts_ndim(p) >= 2) n += (double)ts_numel(p) / (double)ts_size(p, 0) + 1;
        ts_abs_(p);
    }
    ts_tensor_list_free(&ps);
    ts_tensor *mag = ts_forward(m, ts_abs(x64));
    const double u = 0x1p-24, gamma = n * u / (1 - n * u);
    ts_tensor *d = ts_abs(ts_sub(ts_to_dtype(ts_to(y, ts_cpu()), TS_F64), want));
    ts_tensor *r = ts_max(ts_div(d, ts_mul_scalar(mag, gamma)));
    ts_no_grad_end();
    return r && !ts_error() ? ts_item(r) : INFINITY;
}

/* ------------------------------------------------------------------ export and compare */
typedef struct zoo_case {
    const char *name;
    ts_module *(*make)(void);
    ts_shape in;    /* dim 0 is the batch */
    bool tokens;    /* int64 tokens in [0, 256) */
    bool same_bits; /* the import runs the very kernels the module ran */
    bool abs_bound; /* a ReLU net without batch norm: abs_bound_excess applies */
} zoo_case;

static void export_case(const zoo_case *c, ts_device dev) {
    char path[128];
    snprintf(path, sizeof path, "%s/%s.onnx", dir, c->name);
    ts_manual_seed(3);
    ts_module *m = c->make();
    perturb(m);
    m = ts_module_to(m, dev);
    CHECK_OK();
    ts_scope_begin();
    ts_tensor *x2 = input_for(c->in, c->tokens, 2, dev), *x3 = input_for(c->in, c->tokens, 3, dev);
    CHECK(m->training); /* exported in eval mode, then left in training mode */
    ts_status st = ts_onnx_export(m, 1, &x2, path, (ts_onnx_export_opts){.dynamic_batch = true});
    CHECK(st == TS_OK);
    CHECK(m->training);
    ts_module *g = st == TS_OK ? ts_onnx_load(path, (ts_onnx_opts){.device = dev}) : NULL;
    if (!g) {
        printf("  %-10s %-6s export or load failed: %s\n", c->name, ts_device_str(dev),
               ts_error_message());
        CHECK_OK();
    } else {
        ts_module_eval(m);
        ts_no_grad_begin();
        bool same2, same3;
        /* the file's graph against the modules one by one (the eval path's conv + batch-norm
         * folding off): the same kernels */
        const bool fusion = ts_set_eval_fusion(false);
        const double e2 = rel_err(ts_forward(g, x2), ts_forward(m, x2), &same2);
        const double e3 = rel_err(ts_forward(g, x3), ts_forward(m, x3), &same3);
        ts_set_eval_fusion(fusion);
        /* the graph with the inference rewrites against the modules' eval path: the same fold
         * (nn/bn_fold.h) and the same fused convolutions, so the same bits (the GPT's rewrites
         * change its rounding), on the layout the module ran (TS_ONNX_BLOCKED=nchw: the blocked
         * layout, whose kernels are the plain ones') */
        setenv("TS_ONNX_BLOCKED", "nchw", 1);
        tsi_env_reload(TSI_ENV_ONNX_BLOCKED); /* the library read its environment at start-up */
        ts_module *go = c->same_bits
                            ? ts_onnx_load(path, (ts_onnx_opts){.device = dev, .optimize = true})
                            : NULL;
        unsetenv("TS_ONNX_BLOCKED");
        tsi_env_reload(TSI_ENV_ONNX_BLOCKED);
        bool same_o2 = true, same_o3 = true;
        if (go) {
            rel_err(ts_forward(go, x2), ts_forward(m, x2), &same_o2);
            rel_err(ts_forward(go, x3), ts_forward(m, x3), &same_o3);
        }
        if (c->same_bits && !(go && same_o2 && same_o3))
            printf("  %s: the optimized import differs from the eval path\n", c->name);
        CHECK(!c->same_bits || (go && same_o2 && same_o3));
        ts_module_free(go);
        /* the default layout (dense conv nets channels_last where oneDNN's NHWC kernels are
         * native): the same math summed in another order, within TOL */
        ts_module *gd = ts_onnx_load(path, (ts_onnx_opts){.device = dev, .optimize = true});
        ts_tensor *yd3 = gd ? ts_forward(gd, x3) : NULL;
        bool same_d;
        const double ed = yd3 ? rel_err(yd3, ts_forward(m, x3), &same_d) : INFINITY;
        if (!(ed <= TOL)) printf("  %s: the default import is %.3g off\n", c->name, ed);
        CHECK(ed <= TOL);
        ts_module_free(gd);
        /* and against float64 within the arithmetic's bound (m is then float64, the weights |.|) */
        if (c->abs_bound) {
            const double eb = yd3 ? abs_bound_excess(m, yd3, x3) : INFINITY;
            printf("  %-10s %-6s default import against float64: |error| / bound %.3g\n", c->name,
                   ts_device_str(dev), eb);
            CHECK(eb <= 1);
        }
        ts_no_grad_end();
        struct stat sb;
        stat(path, &sb);
        printf("  %-10s %-6s %9lld bytes  batch 2: %.2e%s  batch 3: %.2e%s\n", c->name,
               ts_device_str(dev), (long long)sb.st_size, e2, same2 ? " (same bits)" : "", e3,
               same3 ? " (same bits)" : "");
        CHECK(e2 <= TOL);
        CHECK(e3 <= TOL);
        if (c->same_bits) CHECK(same2 && same3);
        CHECK_OK();
    }
    ts_scope_end();
    ts_module_free(g);
    ts_module_free(m);
}

/* ------------------------------------------------------------------ refusals */
static ts_tensor *var_forward(ts_module *self, ts_tensor *x) {
    (void)self;
    return ts_var_dim(ts_relu(x), 1, true, 1);
}
static ts_tensor *scatter_forward(ts_module *self, ts_tensor *x) {
    (void)self;
    ts_tensor *idx = ts_zeros(ts_shape_of(x), (ts_opts){.dtype = TS_I64});
    return ts_relu(ts_scatter_add(ts_zeros_like(x), 0, idx, ts_exp(x)));
}
static ts_tensor *dropout_forward(ts_module *self, ts_tensor *x) {
    (void)self;
    return ts_dropout(ts_relu(x), 0.5, true); /* the functional form drops in eval mode too */
}

static void check_refused(ts_forward_fn fwd, const char *fragment) {
    char path[128];
    snprintf(path, sizeof path, "%s/refused.onnx", dir);
    ts_module *m = ts_module_alloc(sizeof(ts_module), "Refused", fwd);
    ts_scope_begin();
    ts_tensor *x = ts_randn(TS_SHAPE(2, 3), (ts_opts){0});
    CHECK(ts_onnx_export(m, 1, &x, path, (ts_onnx_export_opts){0}) == TS_ERR_UNSUPPORTED);
    printf("  refused: %s\n", ts_error_message());
    CHECK_ERR_HAS(TS_ERR_UNSUPPORTED, fragment);
    CHECK(access(path, F_OK) != 0); /* nothing written */
    ts_scope_end();
    ts_module_free(m);
}

static void test_refusals(void) {
    check_refused(var_forward, "'var'");           /* traced, no ONNX operator */
    check_refused(scatter_forward, "scatter_add"); /* not traced: named by its autograd node */
    check_refused(dropout_forward, "dropout");
    /* arguments */
    ts_module *m = mlp_new();
    ts_scope_begin();
    ts_tensor *x = ts_randn(TS_SHAPE(2, 64), (ts_opts){0});
    CHECK(ts_onnx_export(m, 2, &x, "x.onnx", (ts_onnx_export_opts){0}) == TS_ERR_ARG);
    ts_error_clear();
    CHECK(ts_onnx_export(m, 1, &x, "x.onnx", (ts_onnx_export_opts){.opset = 13}) ==
          TS_ERR_UNSUPPORTED);
    ts_error_clear();
    ts_scope_end();
    ts_module_free(m);
}

/* A static batch: the file's dims are the example's, and names and producer are the caller's. */
static void test_static_names(void) {
    char path[128];
    snprintf(path, sizeof path, "%s/static.onnx", dir);
    ts_module *m = mlp_new();
    ts_scope_begin();
    ts_tensor *x = ts_randn(TS_SHAPE(4, 1, 8, 8), (ts_opts){0});
    const char *in[] = {"pixels"}, *out[] = {"scores"};
    CHECK(ts_onnx_export(m, 1, &x, path,
                         (ts_onnx_export_opts){.input_names = in, .output_names = out}) == TS_OK);
    ts_module *g = ts_onnx_load(path, (ts_onnx_opts){0});
    CHECK(g != NULL);
    ts_onnx_value_info vi;
    if (g && ts_onnx_input_info(g, 0, &vi) == TS_OK) {
        CHECK_STREQ(vi.name, "pixels");
        CHECK_EQ(vi.ndim, 4);
        CHECK_EQ(vi.dims[0], 4);
    }
    if (g && ts_onnx_output_info(g, 0, &vi) == TS_OK) {
        CHECK_STREQ(vi.name, "scores");
        CHECK_EQ(vi.dims[1], 10);
    }
    /* the parameters keep their state-dict names */
    CHECK(g && ts_module_get(g, "fc1.weight") != NULL);
    CHECK_OK();
    ts_scope_end();
    ts_module_free(g);
    ts_module_free(m);
}

/* ------------------------------------------------------------------ export under no-grad */
/* The whole file at path (malloc'ed, *n bytes); NULL when it cannot be read */
static unsigned char *file_bytes(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    const long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = len >= 0 ? malloc((size_t)len + 1) : NULL;
    *n = b ? fread(b, 1, (size_t)len, f) : 0;
    fclose(f);
    return b;
}

/* Exported inside ts_no_grad, an eval-mode model's trace still sees each Conv2d and BatchNorm2d
 * (the eval path's fold stays off while a trace runs): the same file as exported with grad on. */
static void test_export_under_no_grad(void) {
    char a[160], b[160];
    snprintf(a, sizeof a, "%s/grad_on.onnx", dir);
    snprintf(b, sizeof b, "%s/no_grad.onnx", dir);
    ts_manual_seed(5);
    ts_module *m = resnet20_new();
    perturb(m);
    ts_module_eval(m);
    ts_scope_begin();
    ts_tensor *x = input_for(TS_SHAPE(2, 3, 16, 16), false, 2, ts_cpu());
    CHECK(ts_onnx_export(m, 1, &x, a, (ts_onnx_export_opts){0}) == TS_OK);
    ts_no_grad_begin();
    CHECK(ts_onnx_export(m, 1, &x, b, (ts_onnx_export_opts){0}) == TS_OK);
    ts_no_grad_end();
    size_t na = 0, nb = 0;
    unsigned char *fa = file_bytes(a, &na), *fb = file_bytes(b, &nb);
    CHECK(fa && fb && na == nb && na > 0 && memcmp(fa, fb, na) == 0);
    free(fa), free(fb);
    CHECK_OK();
    ts_scope_end();
    ts_module_free(m);
}

/* ------------------------------------------------------------------ allocation failures */
static char sweep_path[128];
static unsigned char *new_bytes;
static size_t new_size;
static const char OLD[] = "an older file";

static bool file_is(const unsigned char *want, size_t n) {
    FILE *f = fopen(sweep_path, "rb");
    if (!f) return false;
    unsigned char *buf = malloc(n + 1);
    size_t got = fread(buf, 1, n + 1, f);
    fclose(f);
    bool same = got == n && memcmp(buf, want, n) == 0;
    free(buf);
    return same;
}

typedef struct sw_state {
    ts_module *m;
    ts_tensor *x, *y;
} sw_state;

static void *sw_setup(void) {
    FILE *f = fopen(sweep_path, "wb");
    if (f) {
        fwrite(OLD, 1, sizeof OLD, f);
        fclose(f);
    }
    sw_state *s = calloc(1, sizeof *s);
    s->m = sweep_mlp_new(ts_cpu());
    sweep_batch_new(ts_cpu(), &s->x, &s->y);
    return s;
}

static bool sw_run(void *p) {
    sw_state *s = p;
    return ts_onnx_export(s->m, 1, &s->x, sweep_path,
                          (ts_onnx_export_opts){.dynamic_batch = true}) == TS_OK &&
           ts_error() == TS_OK;
}

static void sw_check(void *p, bool ok) {
    (void)p;
    /* a failed export leaves the old file (or the new one when only the folder's fsync failed) */
    if (ok)
        CHECK(file_is(new_bytes, new_size));
    else
        CHECK(file_is((const unsigned char *)OLD, sizeof OLD) || file_is(new_bytes, new_size));
}

static ts_snapshot sw_snap(void *p) { return ts_snapshot_take(((sw_state *)p)->m, NULL, NULL); }

static void sw_teardown(void *p) {
    sw_state *s = p;
    ts_release(s->x);
    ts_release(s->y);
    ts_module_free(s->m);
    free(s);
}

static void test_fault_sweep(void) {
    snprintf(sweep_path, sizeof sweep_path, "%s/sweep.onnx", dir);
    /* the file a fault-free export writes (exports are deterministic) */
    sw_state *s = sw_setup();
    CHECK(sw_run(s));
    sw_teardown(s);
    FILE *f = fopen(sweep_path, "rb");
    if (f) {
        fseek(f, 0, SEEK_END);
        new_size = (size_t)ftell(f);
        rewind(f);
        new_bytes = malloc(new_size);
        if (fread(new_bytes, 1, new_size, f) != new_size) new_size = 0;
        fclose(f);
    }
    CHECK(new_size > 0);
    ts_sweep_case c = {.name = "onnx export",
                       .setup = sw_setup,
                       .run = sw_run,
                       .teardown = sw_teardown,
                       .snap = sw_snap,
                       .check = sw_check};
    ts_fault_sweep(&c, 20000);
    free(new_bytes);
}

int main(void) {
    strcpy(dir, "/tmp/ts_onnx_export_XXXXXX");
    if (!mkdtemp(dir)) return ts_test_skip("cannot create a scratch folder");
    if (ts_onnx_num_inputs(NULL) < 0 && ts_error() == TS_ERR_UNSUPPORTED &&
        strstr(ts_error_message(), "no ONNX support")) {
        ts_error_clear();
        return ts_test_skip("this build has no ONNX support");
    }
    ts_error_clear();
    ts_device devs[TS_TEST_MAX_DEVICES];
    const int nd = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    const zoo_case cases[] = {
        {"mlp", mlp_new, TS_SHAPE(2, 1, 8, 8), false, true, true},
        {"lenet", lenet_new, TS_SHAPE(2, 1, 28, 28), false, true, true},
        {"simplecnn", simplecnn_new, TS_SHAPE(2, 3, 32, 32), false, true, true},
        {"resnet20", resnet20_new, TS_SHAPE(2, 3, 16, 16), false, true, false},
        {"resnet18", resnet18_new, TS_SHAPE(2, 3, 16, 16), false, true, false},
        {"resnet18_cl", resnet18_cl_new, TS_SHAPE(2, 3, 16, 16), false, false, false},
        /* GELU and attention come back as their ONNX decompositions, not the fused kernels */
        {"gpt", gpt_new, TS_SHAPE(2, 12), true, false, false},
        {"sampler", sampler_new, TS_SHAPE(2, 4, 6, 6), false, true, false},
    };
    printf("exported (dynamic batch, at batch 2) and loaded back; max relative difference:\n");
    for (int d = 0; d < nd; d++)
        for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) export_case(&cases[i], devs[d]);
    test_static_names();
    test_export_under_no_grad();
    test_refusals();
    test_fault_sweep();
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (getenv("TS_TEST_KEEP")) /* for a look at the files (tools/check_onnx_export.py) */
        printf("files kept in %s\n", dir);
    else if (system(cmd) != 0)
        printf("note: could not remove %s\n", dir);
    return ts_test_finish();
}
