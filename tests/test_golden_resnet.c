/* test_golden_resnet.c — Tessera's ResNets against PyTorch (tests/golden/resnet.safetensors from
 * tools/gen_golden_resnet.py): state dicts saved by PyTorch for resnet18 (ImageNet and CIFAR stems)
 * and resnet20 (option A and B shortcuts) load strictly, and give PyTorch's eval-mode logits,
 * train-mode logits, loss and gradients and running statistics after the train-mode forward, in
 * float32 (within 1e-4) and float64 (the float32 rounding of PyTorch's float64 results), on cpu,
 * sim:0 and cuda:0 when present; likewise a net of grouped Bottlenecks. A full-width resnet20 takes
 * its weights from a formula both sides compute. Interop with full-size models
 * (tools/check_resnet_torch.py): TS_RESNET_LOAD=file  checks a state dict saved by PyTorch
 * (resnet18 or resnet20) and its outputs, written by check_resnet_torch.py save TS_RESNET_SAVE=file
 * writes a Tessera resnet18 or resnet20 (TS_RESNET_MODEL) state dict, an input and its eval-mode
 * logits for check_resnet_torch.py check */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "golden_util.h"
#include "ts_test.h"

static const ts_tensor_list *F; /* the open golden file */

static ts_tensor *get(const char *p, const char *what) {
    char key[600];
    snprintf(key, sizeof key, "%s.%s", p, what);
    return ts_tensor_list_get(F, key);
}

/* ------------------------------------------------------------------ formula weights */
/* tools/gen_golden_resnet.py's hash_u and formula_value: integer hashing, then the same float64
 * operations in the same order, so both sides hold the same float32 weights. */
static uint32_t fnv1a(const char *s) {
    uint32_t h = 2166136261u;
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 16777619u;
    return h;
}

static double hash_u(uint32_t h, int64_t i) {
    uint32_t x = (uint32_t)(i + 1) * 0x9E3779B1u + h;
    x ^= x >> 16;
    x *= 0x85EBCA6Bu;
    x ^= x >> 13;
    x *= 0xC2B2AE35u;
    x ^= x >> 16;
    return (double)x / 4294967296.0 * 2.0 - 1.0;
}

static bool ends_with(const char *s, const char *tail) {
    size_t n = strlen(s), k = strlen(tail);
    return n >= k && !strcmp(s + n - k, tail);
}

static float formula_value(const char *name, ts_shape s, int64_t i) {
    const double u = hash_u(fnv1a(name), i);
    if (s.ndim == 4) return (float)(u * sqrt(6.0 / (double)(s.dims[1] * s.dims[2] * s.dims[3])));
    if (ends_with(name, "running_var")) return (float)(1.0 + 0.25 * (u + 1.0));
    if (ends_with(name, "running_mean") || ends_with(name, "bias")) return (float)(0.1 * u);
    if (!strncmp(name, "fc.weight", 9)) return (float)(u / sqrt((double)s.dims[1]));
    return (float)(1.0 + 0.1 * u);
}

static ts_status formula_fill(ts_module *m) {
    ts_tensor_list sd = ts_module_state_dict(m), vals = {0};
    for (int k = 0; k < sd.n; k++) {
        ts_shape s = ts_shape_of(sd.tensors[k]);
        int64_t n = ts_numel(sd.tensors[k]);
        if (ends_with(sd.names[k], "num_batches_tracked")) {
            ts_tensor_list_add(&vals, sd.names[k], sd.tensors[k]);
            continue;
        }
        float *v = malloc((size_t)n * sizeof *v);
        for (int64_t i = 0; i < n; i++) v[i] = formula_value(sd.names[k], s, i);
        ts_tensor *t = ts_tensor_f32(s, v, (ts_opts){0});
        ts_tensor_list_add(&vals, sd.names[k], t);
        ts_release(t);
        free(v);
    }
    ts_status st = ts_module_load_state_dict(m, &vals, true);
    ts_tensor_list_free(&vals);
    ts_tensor_list_free(&sd);
    return st;
}

/* ------------------------------------------------------------------ the cases */
typedef struct rcase {
    const char *p;
    ts_resnet_config c;
    char kind;    /* '8' ts_resnet18, 'c' ts_resnet20, 'b' Bottlenecks [1, 1, 1, 1] */
    bool formula; /* weights from formula_fill, not the file */
} rcase;

static ts_module *make(const rcase *c) {
    if (c->kind == 'c') return ts_resnet20_new(c->c);
    if (c->kind == 'b') return ts_resnet_new(TS_BOTTLENECK, (const int[]){1, 1, 1, 1}, c->c);
    return ts_resnet18_new(c->c);
}

/* Every element within rtol * |want| + scale * max |want|: float32 round-off grows with the size of
 * the sums, not with each element, so near-zero entries are held to the tensor's scale. */
static bool close_to(const char *what, ts_tensor *got, ts_tensor *want, double rtol, double scale) {
    if (!got || !want) return ts_golden_close(what, got, want, rtol, 0);
    ts_scope_begin();
    double big = ts_item(ts_max(ts_abs(ts_to_dtype(want, TS_F64))));
    ts_scope_end();
    return ts_golden_close(what, got, want, rtol, scale * big);
}

/* Tolerances: float32 against float64 results, 1e-4 (the bar; gradients 1e-3 of the
 * element plus 1e-4 of the tensor's largest); float64 against those results rounded to float32,
 * whose relative error is at most 2^-24 per element. */
typedef struct tol {
    double out, grad, scale, sq;
} tol;
static const tol TOL32 = {1e-4, 1e-3, 1e-4, 1e-3};
static const tol TOL64 = {1e-6, 1e-6, 1e-9, 1e-9};

static void check_case(const rcase *c, ts_device dev, ts_dtype dt) {
    const tol t = dt == TS_F64 ? TOL64 : TOL32;
    const char *p = c->p;
    ts_module *m = make(c);
    bool ok = m != NULL;
    if (c->formula) {
        ok = ok && formula_fill(m) == TS_OK;
    } else if (ok) {
        char pre[64];
        snprintf(pre, sizeof pre, "%s.model.", p);
        ts_tensor_list sd = ts_golden_prefix(F, pre);
        ok = sd.n > 0 && ts_module_load_state_dict(m, &sd, true) == TS_OK;
        ts_tensor_list_free(&sd);
    }
    CHECK_OK();
    ts_module_to_dtype(ts_module_to(m, dev), dt);
    ts_scope_begin();
    ts_tensor *x = ts_to_dtype(ts_to(get(p, "input"), dev), dt);
    ts_tensor *y = ts_to(get(p, "target"), dev);
    ts_module_eval(m);
    ts_no_grad_begin();
    ts_tensor *le = ts_forward(m, x);
    ts_no_grad_end();
    ok &= close_to("logits_eval", le, get(p, "logits_eval"), t.out, t.scale);
    ts_module_train(m, true);
    ts_tensor *lt = ts_forward(m, x);
    ts_tensor *loss = ts_cross_entropy(lt, y);
    ts_backward(loss);
    CHECK_OK();
    ok &= close_to("logits_train", lt, get(p, "logits_train"), t.out, t.scale);
    ok &= close_to("loss", loss, get(p, "loss"), t.out, 0);
    /* every gradient: in full where the file has it, its sum of squares always */
    ts_tensor_list ps = ts_module_named_parameters(m);
    const int nparam = ps.n;
    int full = 0;
    for (int i = 0; i < ps.n; i++) {
        char key[256];
        snprintf(key, sizeof key, "grad.%s", ps.names[i]);
        ts_tensor *g = ts_grad(ps.tensors[i]), *want = get(p, key);
        if (want) ok &= close_to(key, g, want, t.grad, t.scale), full++;
        snprintf(key, sizeof key, "gradsq.%s", ps.names[i]);
        ok &= ts_golden_close(key, g ? ts_sum(ts_square(ts_to_dtype(g, TS_F64))) : NULL,
                              get(p, key), t.sq, 0);
    }
    ts_tensor_list_free(&ps);
    /* the running statistics the train-mode forward left (num_batches_tracked exactly) */
    ts_tensor_list bs = ts_module_named_buffers(m);
    for (int i = 0; i < bs.n; i++) {
        char key[256];
        snprintf(key, sizeof key, "after.%s", bs.names[i]);
        ok &= close_to(key, bs.tensors[i], get(p, key), t.out, t.scale);
    }
    const int nbuf = bs.n;
    ts_tensor_list_free(&bs);
    CHECK_OK();
    ts_scope_end();
    ts_module_free(m);
    printf("golden %s %-5s %s: eval and train logits, loss, %d gradients (%d in full), %d "
           "buffers: %s\n",
           p, ts_device_str(dev), ts_dtype_name(dt), nparam, full, nbuf, ok ? "ok" : "MISMATCH");
    CHECK(ok);
    CHECK(nbuf > 0 && full > 0);
}

/* ------------------------------------------------------------------ full-size interop */
static ts_module *full_model(const char *name) {
    if (!strcmp(name, "resnet20")) return ts_resnet20_new((ts_resnet_config){0});
    return ts_resnet18_new((ts_resnet_config){0});
}

/* A state dict saved by PyTorch (check_resnet_torch.py save): loads strictly and gives its eval
 * logits, train logits and running statistics after the train-mode forward. */
static void load_from_torch(const char *path) {
    ts_tensor_list file = {0};
    CHECK(ts_safetensors_load(path, ts_cpu(), &file) == TS_OK);
    F = &file;
    const bool r20 = ts_tensor_list_get(&file, "model.layer4.0.conv1.weight") == NULL;
    ts_module *m = full_model(r20 ? "resnet20" : "resnet18");
    ts_tensor_list sd = ts_golden_prefix(&file, "model.");
    bool ok = ts_module_load_state_dict(m, &sd, true) == TS_OK;
    ts_tensor_list_free(&sd);
    CHECK_OK();
    ts_scope_begin();
    ts_tensor *x = ts_tensor_list_get(&file, "input");
    ts_module_eval(m);
    ts_no_grad_begin();
    ok &= close_to("logits_eval", ts_forward(m, x), ts_tensor_list_get(&file, "logits_eval"),
                   TOL32.out, TOL32.scale);
    ts_module_train(m, true);
    ok &= close_to("logits_train", ts_forward(m, x), ts_tensor_list_get(&file, "logits_train"),
                   TOL32.out, TOL32.scale);
    ts_no_grad_end();
    ts_tensor_list bs = ts_module_named_buffers(m);
    for (int i = 0; i < bs.n; i++) {
        char key[256];
        snprintf(key, sizeof key, "after.%s", bs.names[i]);
        ok &= close_to(key, bs.tensors[i], ts_tensor_list_get(&file, key), TOL32.out, TOL32.scale);
    }
    const int nbuf = bs.n;
    ts_tensor_list_free(&bs);
    CHECK_OK();
    ts_scope_end();
    printf("%s: PyTorch's %s (%lld parameters) loaded strictly; eval and train logits, %d "
           "buffers after the train-mode forward: %s\n",
           path, r20 ? "resnet20" : "resnet18", (long long)ts_module_num_parameters(m), nbuf,
           ok ? "ok" : "MISMATCH");
    CHECK(ok);
    ts_module_free(m);
    ts_tensor_list_free(&file);
}

/* A Tessera model's state dict (running statistics from two train-mode forwards), an input and its
 * eval logits, for check_resnet_torch.py check. */
static void save_for_torch(const char *path, const char *name) {
    ts_manual_seed(7);
    ts_module *m = full_model(name);
    ts_scope_begin();
    ts_tensor *x = ts_randn(TS_SHAPE(2, 3, 64, 64), (ts_opts){0});
    ts_no_grad_begin();
    for (int i = 0; i < 2; i++) ts_forward(m, ts_randn(TS_SHAPE(4, 3, 64, 64), (ts_opts){0}));
    ts_module_eval(m);
    ts_tensor *logits = ts_forward(m, x);
    ts_no_grad_end();
    ts_tensor_list sd = ts_module_state_dict(m);
    ts_tensor_list out = ts_golden_prefix(&sd, "");
    ts_tensor_list_add(&out, "input", x);
    ts_tensor_list_add(&out, "logits_eval", logits);
    CHECK(ts_safetensors_save(path, &out, NULL, 0) == TS_OK);
    ts_tensor_list_free(&out);
    ts_tensor_list_free(&sd);
    ts_scope_end();
    ts_module_free(m);
    printf("wrote %s, Tessera's %s (%s)\n", path, name, ts_error() ? ts_error_message() : "ok");
}

int main(void) {
    static const rcase CASES[] = {
        {"r18n", {.width = 4, .num_classes = 10}, '8', false},
        {"r18c", {.width = 4, .num_classes = 10, .in_channels = 1, .cifar_stem = true}, '8', false},
        {"rbtl", {.width = 4, .num_classes = 10, .groups = 2, .width_per_group = 32}, 'b', false},
        {"r20n", {.width = 4}, 'c', false},
        {"r20b", {.width = 4, .shortcut_conv = true}, 'c', false},
        {"r20f", {0}, 'c', true},
    };
    const char *load = getenv("TS_RESNET_LOAD"), *save = getenv("TS_RESNET_SAVE");
    if (load && *load) load_from_torch(load);
    if (save && *save) {
        const char *name = getenv("TS_RESNET_MODEL");
        save_for_torch(save, name && *name ? name : "resnet18");
    }
    if ((load && *load) || (save && *save)) return ts_test_finish();

    ts_tensor_list file;
    if (!ts_golden_load(__FILE__, "resnet", &file)) {
        return ts_test_finish();
    }
    F = &file;
    ts_device devices[TS_TEST_MAX_DEVICES];
    const int ndev = ts_test_devices(devices, TS_TEST_MAX_DEVICES);
    for (size_t i = 0; i < sizeof CASES / sizeof *CASES; i++)
        for (int d = 0; d < ndev; d++) {
            check_case(&CASES[i], devices[d], TS_F32);
            if (devices[d].type != TS_CUDA) check_case(&CASES[i], devices[d], TS_F64);
        }
    ts_tensor_list_free(&file);
    return ts_test_finish();
}
