/* test_onnx_export_ops.c — ts_onnx_export of one traced op at a time, where the zoo's round trip
 * (test_onnx_export.c) cannot tell a wrong form from a right one: the file is parsed with the
 * generated protobuf-c code and its nodes and attributes checked (ReduceMax over every dim, Add
 * without a Mul for alpha 1, ArgMax's keepdims, Conv's default strides and dilations,
 * GatherElements' axis, index_select's Gather, a dilated MaxPool), then loaded back and run on the
 * example beside the module, shapes equal and values within the rounding of the two computations
 * (SDPA with a float mask, causal with fewer queries than keys, Where), and the integer dtypes
 * (Cast, Add, Max, Sub in int8, uint8, int16, uint16, int32, uint32 and uint64 past 2^63, exact).
 * An input changed in place through another view is refused naming it; repeated exports of a long
 * trace leave no heap behind (glibc's count; LSan under ASan). */
#define _DEFAULT_SOURCE /* mkdtemp */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "heap_usage.h"
#include "ts_test.h"

#ifndef TS_HAVE_ONNX
int main(void) { return ts_test_skip("this build has no ONNX support (protobuf-c not found)"); }
#else
#include "onnx/onnx_internal.h"

static char dir[64];

/* ------------------------------------------------------------------ the file */
static Onnx__ModelProto *read_model(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    rewind(f);
    uint8_t *buf = malloc((size_t)(n > 0 ? n : 1));
    Onnx__ModelProto *m = NULL;
    if (buf && fread(buf, 1, (size_t)n, f) == (size_t)n)
        m = onnx__model_proto__unpack(NULL, (size_t)n, buf);
    fclose(f);
    free(buf);
    return m;
}

static int count_nodes(const Onnx__ModelProto *m, const char *op) {
    int k = 0;
    for (size_t i = 0; i < m->graph->n_node; i++) k += !strcmp(m->graph->node[i]->op_type, op);
    return k;
}

static const Onnx__NodeProto *find_node(const Onnx__ModelProto *m, const char *op) {
    for (size_t i = 0; i < m->graph->n_node; i++)
        if (!strcmp(m->graph->node[i]->op_type, op)) return m->graph->node[i];
    return NULL;
}

static const Onnx__AttributeProto *find_attr(const Onnx__NodeProto *n, const char *name) {
    for (size_t i = 0; n && i < n->n_attribute; i++)
        if (!strcmp(n->attribute[i]->name, name)) return n->attribute[i];
    return NULL;
}

/* node op has the int attribute name = v */
static bool attr_is(const Onnx__ModelProto *m, const char *op, const char *name, int64_t v) {
    const Onnx__AttributeProto *a = find_attr(find_node(m, op), name);
    return a && a->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT && a->i == v;
}

/* node op has the ints attribute name = v[0..n) */
static bool ints_are(const Onnx__ModelProto *m, const char *op, const char *name, int n,
                     const int64_t *v) {
    const Onnx__AttributeProto *a = find_attr(find_node(m, op), name);
    return a && a->n_ints == (size_t)n && !memcmp(a->ints, v, (size_t)n * sizeof *v);
}

/* ------------------------------------------------------------------ the cases */
/* no parameter and no constant: the file has no initializer at all (export.c's rotate_front once
 * passed NULL to memcpy there, which UBSan reports) */
static ts_tensor *max_plain_fwd(ts_module *s, ts_tensor *x) {
    (void)s;
    return ts_max(ts_tanh(x));
}
static bool max_plain_file(const Onnx__ModelProto *m) {
    return count_nodes(m, "ReduceMax") == 1 && m->graph->n_initializer == 0;
}

static ts_tensor *max_fwd(ts_module *s, ts_tensor *x) {
    (void)s;
    return ts_max(ts_tanh(ts_mul_scalar(x, 2)));
}
static bool max_file(const Onnx__ModelProto *m) {
    return count_nodes(m, "ReduceMax") == 1 && attr_is(m, "ReduceMax", "keepdims", 0) &&
           ints_are(m, "ReduceMax", "axes", 2, (const int64_t[]){0, 1});
}

/* linalg.vector_norm(ord=2) over dim 1, kept: one ReduceL2 with that axis */
static ts_tensor *norm2_fwd(ts_module *s, ts_tensor *x) {
    (void)s;
    return ts_vector_norm(ts_sin(x), 2, (ts_dims){.n = 1, .d = {1}}, true, TS_DTYPE_DEFAULT);
}
static bool norm2_file(const Onnx__ModelProto *m) {
    return count_nodes(m, "ReduceL2") == 1 && attr_is(m, "ReduceL2", "keepdims", 1) &&
           ints_are(m, "ReduceL2", "axes", 1, (const int64_t[]){1});
}

static ts_tensor *alpha1_fwd(ts_module *s, ts_tensor *x) {
    (void)s;
    return ts_add_alpha(ts_sub_scalar(x, 0.5), ts_sin(x), 1);
}
static bool alpha1_file(const Onnx__ModelProto *m) {
    return count_nodes(m, "Add") == 1 && count_nodes(m, "Mul") == 0 && count_nodes(m, "Sub") == 1;
}

static ts_tensor *alpha_fwd(ts_module *s, ts_tensor *x) {
    (void)s;
    return ts_add_alpha(x, ts_sin(x), 2.5);
}
static bool alpha_file(const Onnx__ModelProto *m) {
    return count_nodes(m, "Add") == 1 && count_nodes(m, "Mul") == 1;
}

static ts_tensor *argmax_fwd(ts_module *s, ts_tensor *x) {
    (void)s;
    return ts_argmax_dim(ts_add_scalar(x, 1), 1, false);
}
static bool argmax_file(const Onnx__ModelProto *m) {
    return attr_is(m, "ArgMax", "axis", 1) && attr_is(m, "ArgMax", "keepdims", 0);
}

static ts_tensor *where_fwd(ts_module *s, ts_tensor *x) {
    (void)s;
    return ts_where(ts_gt_scalar(x, 0), ts_exp(x), ts_neg(x));
}
static bool where_file(const Onnx__ModelProto *m) { return count_nodes(m, "Where") == 1; }

/* w [2, 2, 3, 3]: a constant made in the forward; default options (stride 0 is 1) */
static ts_tensor *conv_fwd(ts_module *s, ts_tensor *x) {
    (void)s;
    float w[36];
    for (int k = 0; k < 36; k++) w[k] = (float)((k * 7) % 9 - 4) / 4;
    ts_tensor *wt =
        ts_from_data(TS_SHAPE(2, 2, 3, 3), TS_F32, w, (ts_opts){.device = ts_device_of(x)});
    return ts_conv2d(ts_mul_scalar(x, 0.5), wt, NULL, (ts_conv2d_opts){0});
}
static bool conv_file(const Onnx__ModelProto *m) {
    static const int64_t ones[2] = {1, 1}, zeros[4] = {0};
    return count_nodes(m, "Conv") == 1 && ints_are(m, "Conv", "strides", 2, ones) &&
           ints_are(m, "Conv", "dilations", 2, ones) && ints_are(m, "Conv", "pads", 4, zeros) &&
           attr_is(m, "Conv", "group", 1);
}

/* idx [2, 2] picks along dim 1 of x [2, 3] */
static ts_tensor *gather_fwd(ts_module *s, ts_tensor *x) {
    (void)s;
    const int64_t idx[4] = {2, 0, 1, 1};
    ts_tensor *it = ts_from_data(TS_SHAPE(2, 2), TS_I64, idx,
                                 (ts_opts){.dtype = TS_I64, .device = ts_device_of(x)});
    return ts_gather(ts_mul_scalar(x, 0.5), 1, it);
}
static bool gather_file(const Onnx__ModelProto *m) {
    return count_nodes(m, "GatherElements") == 1 && attr_is(m, "GatherElements", "axis", 1);
}

/* index_select along dim 1 of x [2, 3] with a constant index [3]: one Gather with axis 1 */
static ts_tensor *index_select_fwd(ts_module *s, ts_tensor *x) {
    (void)s;
    const int64_t idx[3] = {2, 0, 2};
    ts_tensor *it = ts_from_data(TS_SHAPE(3), TS_I64, idx,
                                 (ts_opts){.dtype = TS_I64, .device = ts_device_of(x)});
    return ts_index_select(ts_mul_scalar(x, 0.5), 1, it);
}
static bool index_select_file(const Onnx__ModelProto *m) {
    return count_nodes(m, "Gather") == 1 && attr_is(m, "Gather", "axis", 1);
}

/* a dilated max pool (kernel 2, dilation 2, stride 1) over x [1, 1, 5, 5]: MaxPool carries
 * dilations (an average pool could not before opset 19, a max pool can) */
static ts_tensor *max_pool_dilated_fwd(ts_module *s, ts_tensor *x) {
    (void)s;
    return ts_max_pool2d(ts_tanh(x),
                         (ts_pool2d_opts){.kernel = {2, 2}, .stride = {1, 1}, .dilation = {2, 2}});
}
static bool max_pool_dilated_file(const Onnx__ModelProto *m) {
    static const int64_t twos[2] = {2, 2};
    return count_nodes(m, "MaxPool") == 1 && ints_are(m, "MaxPool", "dilations", 2, twos) &&
           ints_are(m, "MaxPool", "kernel_shape", 2, twos);
}

/* linear with a 1-D weight [3] and a 0-d bias over x [2, 3]: MatMul then Add, never Gemm (whose
 * B must be 2-D) */
static ts_tensor *linear_1d_fwd(ts_module *s, ts_tensor *x) {
    (void)s;
    const float wv[3] = {0.5f, -1.25f, 2.0f}, bv = 0.75f;
    const ts_opts o = {.device = ts_device_of(x)};
    ts_tensor *w = ts_from_data(TS_SHAPE(3), TS_F32, wv, o);
    return ts_linear(ts_tanh(x), w, ts_from_data(TS_SHAPE(), TS_F32, &bv, o));
}
static bool linear_1d_file(const Onnx__ModelProto *m) {
    return count_nodes(m, "MatMul") == 1 && count_nodes(m, "Add") == 1 &&
           count_nodes(m, "Gemm") == 0;
}

/* attention over x [2, 3, 4] with an additive float mask [3, 3] (q, k, v different tensors) */
static ts_tensor *sdpa_mask_fwd(ts_module *s, ts_tensor *x) {
    (void)s;
    const float mv[9] = {0, -1, -2, 0.5f, 0, -1, 1, 0.25f, 0};
    ts_tensor *mask =
        ts_from_data(TS_SHAPE(3, 3), TS_F32, mv, (ts_opts){.device = ts_device_of(x)});
    return ts_scaled_dot_product_attention(x, ts_mul_scalar(x, 0.5), ts_tanh(x), mask, 0, false, 0);
}
static bool sdpa_mask_file(const Onnx__ModelProto *m) {
    return count_nodes(m, "Softmax") == 1 && count_nodes(m, "Add") == 1;
}

/* causal attention of 2 queries over 3 keys (top-left aligned: a [2, 3] mask) */
static ts_tensor *sdpa_causal_fwd(ts_module *s, ts_tensor *x) {
    (void)s;
    return ts_scaled_dot_product_attention(ts_narrow(x, 1, 0, 2), x, ts_sigmoid(x), NULL, 0, true,
                                           0);
}
static bool sdpa_causal_file(const Onnx__ModelProto *m) { return count_nodes(m, "Softmax") == 1; }

/* Integer dtypes: x [2, 3] (multiples of 1/4 in [-5/4, 5/4]) -> |x| * 4 cast to dt (0..5), plus a
 * constant C near the top of dt's range (uint64: 2^63 + 4096, past int64), Max with C + 2, minus C:
 * the Cast's `to`, the constants' and the output's dtype must be dt's, and the values (2..5) equal,
 * which they are only if every step kept dt's arithmetic (a wrap, a signed uint64 or a float
 * detour would move them). */
static ts_tensor *int_chain(ts_tensor *x, ts_dtype dt, uint64_t big) {
    uint64_t raw[2] = {0};
    ts_tensor *c[2];
    for (int k = 0; k < 2; k++) {
        const uint64_t v = big + 2 * (uint64_t)k;
        const size_t sz = ts_dtype_size(dt);
        memcpy(raw + k, &v, sz); /* little-endian: the low bytes are the narrower type's value */
        c[k] = ts_from_data(TS_SHAPE(1), dt, raw + k, (ts_opts){.device = ts_device_of(x)});
    }
    ts_tensor *a = ts_to_dtype(ts_mul_scalar(ts_abs(x), 4), dt);
    return ts_sub(ts_maximum(ts_add(a, c[0]), c[1]), c[0]);
}
#define INT_CASE(name, dt, big)                                                                    \
    static ts_tensor *name##_fwd(ts_module *s, ts_tensor *x) {                                     \
        (void)s;                                                                                   \
        return int_chain(x, dt, big);                                                              \
    }                                                                                              \
    static bool name##_file(const Onnx__ModelProto *m) { return int_file(m, dt); }
static bool int_file(const Onnx__ModelProto *m, ts_dtype dt) {
    const int32_t t = tso_dtype_to_onnx(dt);
    const Onnx__TypeProto *o = m->graph->n_output == 1 ? m->graph->output[0]->type : NULL;
    return attr_is(m, "Cast", "to", t) && count_nodes(m, "Max") == 1 &&
           count_nodes(m, "Sub") == 1 && o && o->tensor_type && o->tensor_type->elem_type == t;
}
INT_CASE(int8, TS_I8, 120)
INT_CASE(int16, TS_I16, 32000)
INT_CASE(uint16, TS_U16, 65000)
INT_CASE(int32, TS_I32, 2147483000)
INT_CASE(uint32, TS_U32, 4294967000u)
INT_CASE(uint64, TS_U64, (UINT64_C(1) << 63) + 4096)
INT_CASE(uint8, TS_U8, 250)

typedef struct export_case {
    const char *what;
    ts_forward_fn fwd;
    ts_shape in;
    bool (*file_ok)(const Onnx__ModelProto *m);
    /* |imported - module| <= tol * eps * max(1, max |module|): 0 where both run the same kernel
     * (or exact ops); else the rounding of the two orders of the longest sum (see the row) */
    double tol;
} export_case;

#define SHP(...)                                                                                   \
    {                                                                                              \
        .ndim = sizeof((int64_t[]){__VA_ARGS__}) / 8, .dims = { __VA_ARGS__ }                      \
    }

static const export_case cases[] = {
    {"max", max_fwd, SHP(2, 3), max_file, 0},
    {"max without any initializer", max_plain_fwd, SHP(2, 3), max_plain_file, 0},
    /* a sum of 3 squares in double against the importer's: the result's rounding each side */
    {"vector_norm(2), dim 1, keepdim", norm2_fwd, SHP(2, 3), norm2_file, 2},
    {"add_alpha, alpha 1", alpha1_fwd, SHP(2, 3), alpha1_file, 0},
    /* x + 2.5 * s: fused (one rounding of the product kept) or Mul then Add: 2 roundings */
    {"add_alpha, alpha 2.5", alpha_fwd, SHP(2, 3), alpha_file, 2},
    {"argmax_dim(1), keepdim false", argmax_fwd, SHP(2, 3), argmax_file, 0},
    {"where", where_fwd, SHP(2, 3), where_file, 0},
    /* 18-term sums in either kernel's order: 2 * 18 roundings */
    {"conv2d, default options", conv_fwd, SHP(1, 2, 5, 5), conv_file, 36},
    {"gather(1)", gather_fwd, SHP(2, 3), gather_file, 0},
    {"index_select(1)", index_select_fwd, SHP(2, 3), index_select_file, 0},
    /* the same tanh kernel on both sides, then a max: exact */
    {"max_pool2d, dilation 2", max_pool_dilated_fwd, SHP(1, 1, 5, 5), max_pool_dilated_file, 0},
    /* a 3-term dot in either order, then the bias: 2 * 3 roundings */
    {"linear, a 1-D weight and a 0-d bias", linear_1d_fwd, SHP(2, 3), linear_1d_file, 6},
    /* the fused kernel against MatMul, Mul, Add, Softmax, MatMul: sums of E = 4 and S = 3 terms,
     * the softmax's exp, sum and division, on each side */
    {"sdpa, a float mask", sdpa_mask_fwd, SHP(2, 3, 4), sdpa_mask_file, 2 * (4 + 3 + 8)},
    {"sdpa, causal, 2 queries 3 keys", sdpa_causal_fwd, SHP(2, 3, 4), sdpa_causal_file,
     2 * (4 + 3 + 8)},
    /* integer arithmetic is exact on both sides */
    {"int8 Cast, Add, Max, Sub", int8_fwd, SHP(2, 3), int8_file, 0},
    {"uint8 Cast, Add, Max, Sub", uint8_fwd, SHP(2, 3), uint8_file, 0},
    {"int16 Cast, Add, Max, Sub", int16_fwd, SHP(2, 3), int16_file, 0},
    {"uint16 Cast, Add, Max, Sub", uint16_fwd, SHP(2, 3), uint16_file, 0},
    {"int32 Cast, Add, Max, Sub", int32_fwd, SHP(2, 3), int32_file, 0},
    {"uint32 Cast, Add, Max, Sub", uint32_fwd, SHP(2, 3), uint32_file, 0},
    {"uint64 past 2^63", uint64_fwd, SHP(2, 3), uint64_file, 0},
};

static ts_tensor *example(ts_shape s) {
    int64_t n = 1;
    for (int d = 0; d < s.ndim; d++) n *= s.dims[d];
    float *v = malloc((size_t)n * sizeof *v);
    for (int64_t k = 0; k < n; k++) v[k] = (float)((k * 5) % 11 - 5) / 4;
    ts_tensor *x = ts_from_data(s, TS_F32, v, (ts_opts){0});
    free(v);
    return x;
}

/* same shape and dtype, values within tol * eps * max(1, max |b|) */
static bool close_to(ts_tensor *a, ts_tensor *b, double tol, double *err) {
    *err = INFINITY;
    ts_shape sa = ts_shape_of(a), sb = ts_shape_of(b);
    if (sa.ndim != sb.ndim || ts_dtype_of(a) != ts_dtype_of(b)) return false;
    for (int d = 0; d < sa.ndim; d++)
        if (sa.dims[d] != sb.dims[d]) return false;
    int64_t n = ts_numel(a);
    double *va = malloc((size_t)(n ? n : 1) * sizeof *va), *vb = malloc((size_t)(n ? n : 1) * 8);
    bool ok = ts_copy_to_host(ts_contiguous(ts_to_dtype(a, TS_F64)), va, (size_t)n * 8) == TS_OK &&
              ts_copy_to_host(ts_contiguous(ts_to_dtype(b, TS_F64)), vb, (size_t)n * 8) == TS_OK;
    double diff = 0, scale = 1;
    for (int64_t k = 0; ok && k < n; k++) {
        diff = fmax(diff, fabs(va[k] - vb[k]));
        scale = fmax(scale, fabs(vb[k]));
        ok = va[k] == va[k];
    }
    free(va);
    free(vb);
    *err = diff / scale;
    return ok && diff <= tol * FLT_EPSILON * scale;
}

static void check_export(const export_case *c) {
    char path[128];
    snprintf(path, sizeof path, "%s/op.onnx", dir);
    ts_module *m = ts_module_alloc(sizeof(ts_module), "Op", c->fwd);
    ts_scope_begin();
    ts_tensor *x = example(c->in);
    CHECK(ts_onnx_export(m, 1, &x, path, (ts_onnx_export_opts){0}) == TS_OK);
    Onnx__ModelProto *mp = read_model(path);
    CHECK(mp && c->file_ok(mp));
    ts_module *g = ts_onnx_load(path, (ts_onnx_opts){0});
    CHECK(g != NULL);
    double err = INFINITY;
    if (g) {
        ts_module_eval(m);
        ts_no_grad_begin();
        CHECK(close_to(ts_forward(g, x), ts_forward(m, x), c->tol, &err));
        ts_no_grad_end();
    }
    printf("  %-32s %3zu nodes, max relative difference %.2e\n", c->what,
           mp ? mp->graph->n_node : 0, err);
    CHECK_OK();
    if (mp) onnx__model_proto__free_unpacked(mp, NULL);
    ts_scope_end();
    ts_module_free(g);
    ts_module_free(m);
    unlink(path);
}

/* ------------------------------------------------------------------ refusals */
/* y = relu(x), then y changed through a view of its storage, then read: the graph would read the
 * value before the change */
static ts_tensor *stale_fwd(ts_module *s, ts_tensor *x) {
    (void)s;
    ts_tensor *y = ts_relu(x);
    ts_no_grad_begin(); /* (the traced input requires grad) */
    ts_mul_(ts_view(y, TS_SHAPE(6)), ts_full(TS_SHAPE(6), 2, (ts_opts){0}));
    ts_no_grad_end();
    return ts_add(y, ts_exp(x));
}

static void test_stale_input(void) {
    char path[128];
    snprintf(path, sizeof path, "%s/stale.onnx", dir);
    ts_module *m = ts_module_alloc(sizeof(ts_module), "Stale", stale_fwd);
    ts_scope_begin();
    ts_tensor *x = example(TS_SHAPE(2, 3));
    CHECK(ts_onnx_export(m, 1, &x, path, (ts_onnx_export_opts){0}) == TS_ERR_UNSUPPORTED);
    printf("  refused: %s\n", ts_error_message());
    CHECK_ERR_HAS(TS_ERR_UNSUPPORTED, "op 'add' has no ONNX form here: input 0 was changed in "
                                      "place (through another view of its storage) after the op "
                                      "that made it");
    CHECK(access(path, F_OK) != 0);
    ts_scope_end();
    ts_module_free(m);
}

/* avg_pool2d with a divisor_override: AveragePool divides by the window, so the export refuses
 * (it wrote the plain average before: a wrong number in the file) */
static ts_tensor *divisor_fwd(ts_module *s, ts_tensor *x) {
    (void)s;
    return ts_avg_pool2d(x, (ts_pool2d_opts){.kernel = {2, 2}, .divisor_override = 3});
}

static void test_avg_pool_divisor_refused(void) {
    char path[128];
    snprintf(path, sizeof path, "%s/divisor.onnx", dir);
    ts_module *m = ts_module_alloc(sizeof(ts_module), "Divisor", divisor_fwd);
    ts_scope_begin();
    ts_tensor *x = example(TS_SHAPE(1, 2, 4, 4));
    CHECK(ts_onnx_export(m, 1, &x, path, (ts_onnx_export_opts){0}) == TS_ERR_UNSUPPORTED);
    CHECK_ERR_HAS(TS_ERR_UNSUPPORTED, "divisor_override 3 (AveragePool divides by the window)");
    CHECK(access(path, F_OK) != 0);
    ts_scope_end();
    ts_module_free(m);
}

/* ------------------------------------------------------------------ no heap left behind */

/* 200 ops: the trace's tables grow several times */
static ts_tensor *long_fwd(ts_module *s, ts_tensor *x) {
    (void)s;
    for (int i = 0; i < 200; i++) x = ts_add_scalar(ts_mul_scalar(x, 0.5), 1);
    return x;
}

static void test_no_heap_growth(void) {
    enum { WARM = 8, ROUNDS = 32, SLACK_PER_ROUND = 64 };
    char path[128];
    snprintf(path, sizeof path, "%s/long.onnx", dir);
    ts_module *m = ts_module_alloc(sizeof(ts_module), "Long", long_fwd);
    ts_tensor *x = example(TS_SHAPE(2, 3));
    int64_t before = 0;
    for (int i = 0; i < WARM + ROUNDS; i++) {
        if (i == WARM) before = ts_heap_in_use();
        CHECK(ts_onnx_export(m, 1, &x, path, (ts_onnx_export_opts){0}) == TS_OK);
    }
    const int64_t after = ts_heap_in_use();
    CHECK_OK();
    ts_release(x);
    ts_module_free(m);
    unlink(path);
    if (before < 0) {
        printf("heap growth: not measured here (glibc's mallinfo2 missing, or LSan's job)\n");
        return;
    }
    printf("heap growth over %d exports of 400 ops: %lld bytes\n", ROUNDS,
           (long long)(after - before));
    CHECK(after - before <= ROUNDS * SLACK_PER_ROUND);
}

int main(void) {
    strcpy(dir, "/tmp/ts_onnx_export_ops_XXXXXX");
    if (!mkdtemp(dir)) return ts_test_skip("cannot create a scratch folder");
    printf("exported, parsed and loaded back:\n");
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) check_export(&cases[i]);
    test_stale_input();
    test_avg_pool_divisor_refused();
    test_no_heap_growth();
    rmdir(dir);
    return ts_test_finish();
}
#endif
