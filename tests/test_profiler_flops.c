/* test_profiler_flops.c — with_flops: each op's floating-point operations and bytes moved. Ops of
 * known shapes on cpu and sim:0 (matmul with broadcast batch dims, mm, addmm (recorded as its mm
 * and add), bmm, conv2d with groups and padding, conv2d strided, linear, add with broadcasting,
 * add_scalar, scaled_dot_product_attention, a float64 mm): flops and op_bytes equal the counts
 * worked out here from the shapes the test chose (PyTorch's formulas: 2 per multiply-add); with
 * with_flops off both are 0; with_flops records the inputs without record_shapes; key averages
 * sum the flops per name; the Chrome trace carries "flops" and "op_bytes" on ops. Convolutions
 * composed of others (conv1d, conv3d, conv_transpose2d) count their FLOPs once, the ops inside
 * them none. The edge cases (a list cut with "...", an unknown type, a non-op event) through
 * tsi_prof_flops itself. */
#define _POSIX_C_SOURCE 200809L /* mkstemp */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/profiler_internal.h"
#include "json_file_util.h"
#include "tessera.h"
#include "tessera/profiler.h"
#include "ts_test.h"

/* the nth (0-based) op event called name, NULL when there is none */
static const ts_profile_event *op_event(const ts_profile *p, const char *name, int nth) {
    size_t n = 0;
    const ts_profile_event *ev = ts_profile_events(p, &n);
    for (size_t i = 0; i < n; i++)
        if (ev[i].kind == TS_PROF_OP && !strcmp(ev[i].name, name) && nth-- == 0) return &ev[i];
    return NULL;
}

static void check_op(const ts_profile *p, const char *name, int nth, int64_t flops, int64_t bytes) {
    const ts_profile_event *e = op_event(p, name, nth);
    CHECK(e != NULL);
    if (!e) {
        fprintf(stderr, "no op event %s #%d\n", name, nth);
        return;
    }
    if (e->flops != flops || e->op_bytes != bytes)
        fprintf(stderr, "%s #%d: flops %lld bytes %lld, want %lld %lld\n", name, nth,
                (long long)e->flops, (long long)e->op_bytes, (long long)flops, (long long)bytes);
    CHECK_EQ(e->flops, flops);
    CHECK_EQ(e->op_bytes, bytes);
}

/* a conv's output size: PyTorch's formula */
static int64_t conv_out(int64_t in, int64_t k, int64_t stride, int64_t pad, int64_t dil) {
    return (in + 2 * pad - dil * (k - 1) - 1) / stride + 1;
}

enum { F32 = 4, F64 = 8 };

/* the expected counts, from the shapes below */
typedef struct expect {
    int64_t matmul_f, matmul_b, bmatmul_f, bmatmul_b, mm_f, mm_b, addmm_mm_f, addmm_add_f,
        addmm_add_b, bmm_f, bmm_b, conv_g_f, conv_g_b, conv_s_f, conv_s_b, linear_f, linear_b,
        add_f, add_b, adds_f, adds_b, sdpa_f, sdpa_b, mm64_f, mm64_b;
} expect;

static expect expected(void) {
    expect x;
    /* matmul [4, 3] @ [3, 5] */
    x.matmul_f = 2 * 4 * 3 * 5;
    x.matmul_b = (4 * 3 + 3 * 5 + 4 * 5) * F32;
    /* matmul [2, 3, 4, 5] @ [5, 6]: the batch 2 * 3 broadcast */
    x.bmatmul_f = 2 * (2 * 3) * 4 * 5 * 6;
    x.bmatmul_b = (2 * 3 * 4 * 5 + 5 * 6 + 2 * 3 * 4 * 6) * F32;
    /* mm [6, 7] @ [7, 2] */
    x.mm_f = 2 * 6 * 7 * 2;
    x.mm_b = (6 * 7 + 7 * 2 + 6 * 2) * F32;
    /* addmm(c [2], a [6, 7], b [7, 2]): its mm, then the add of c expanded to [6, 2] */
    x.addmm_mm_f = 2 * 6 * 7 * 2;
    x.addmm_add_f = 6 * 2;
    x.addmm_add_b = (6 * 2 + 6 * 2 + 6 * 2) * F32;
    /* bmm [3, 4, 5] @ [3, 5, 6] */
    x.bmm_f = 2 * 3 * 4 * 5 * 6;
    x.bmm_b = (3 * 4 * 5 + 3 * 5 * 6 + 3 * 4 * 6) * F32;
    /* conv2d x [2, 8, 6, 7], w [4, 8 / 2, 3, 3], b [4], padding 1, groups 2 */
    {
        const int64_t ho = conv_out(6, 3, 1, 1, 1), wo = conv_out(7, 3, 1, 1, 1);
        const int64_t cin = 8, cout = 4, groups = 2;
        x.conv_g_f = 2 * 2 * ho * wo * 3 * 3 * cin * cout / groups;
        x.conv_g_b = (2 * 8 * 6 * 7 + 4 * 4 * 3 * 3 + 4 + 2 * cout * ho * wo) * F32;
    }
    /* conv2d x [1, 3, 9, 9], w [5, 3, 2, 2], no bias, stride 2 */
    {
        const int64_t ho = conv_out(9, 2, 2, 0, 1), wo = conv_out(9, 2, 2, 0, 1);
        x.conv_s_f = 2 * 1 * ho * wo * 2 * 2 * 3 * 5;
        x.conv_s_b = (3 * 9 * 9 + 5 * 3 * 2 * 2 + 5 * ho * wo) * F32;
    }
    /* linear x [4, 3], w [7, 3], b [7] (the bias add not counted, as PyTorch's addmm) */
    x.linear_f = 2 * 4 * 3 * 7;
    x.linear_b = (4 * 3 + 7 * 3 + 7 + 4 * 7) * F32;
    /* add [4, 1] + [1, 5]: one per output element */
    x.add_f = 4 * 5;
    x.add_b = (4 + 5 + 4 * 5) * F32;
    /* add_scalar [4, 3] + 2 */
    x.adds_f = 4 * 3;
    x.adds_b = (4 * 3 + 4 * 3) * F32;
    /* sdpa q [2, 3, 4, 8], k [2, 3, 6, 8], v [2, 3, 6, 5]: Q K^T then the weights times V */
    x.sdpa_f = 2 * (2 * 3) * 4 * 6 * 8 + 2 * (2 * 3) * 4 * 6 * 5;
    x.sdpa_b = (2 * 3 * 4 * 8 + 2 * 3 * 6 * 8 + 2 * 3 * 6 * 5 + 2 * 3 * 4 * 5) * F32;
    /* mm in float64 [3, 2] @ [2, 3] */
    x.mm64_f = 2 * 3 * 2 * 3;
    x.mm64_b = (3 * 2 + 2 * 3 + 3 * 3) * F64;
    return x;
}

static ts_profile *profile_ops(ts_device dev, ts_profiler_opts opts) {
    ts_manual_seed(0);
    ts_scope_begin();
    const ts_opts o = {.device = dev};
    ts_tensor *a = ts_randn(TS_SHAPE(4, 3), o), *b = ts_randn(TS_SHAPE(3, 5), o);
    ts_tensor *ba = ts_randn(TS_SHAPE(2, 3, 4, 5), o), *bb = ts_randn(TS_SHAPE(5, 6), o);
    ts_tensor *ma = ts_randn(TS_SHAPE(6, 7), o), *mb = ts_randn(TS_SHAPE(7, 2), o);
    ts_tensor *mc = ts_randn(TS_SHAPE(2), o);
    ts_tensor *b1 = ts_randn(TS_SHAPE(3, 4, 5), o), *b2 = ts_randn(TS_SHAPE(3, 5, 6), o);
    ts_tensor *cx = ts_randn(TS_SHAPE(2, 8, 6, 7), o), *cw = ts_randn(TS_SHAPE(4, 4, 3, 3), o);
    ts_tensor *cb = ts_randn(TS_SHAPE(4), o);
    ts_tensor *sx = ts_randn(TS_SHAPE(1, 3, 9, 9), o), *sw = ts_randn(TS_SHAPE(5, 3, 2, 2), o);
    ts_tensor *lw = ts_randn(TS_SHAPE(7, 3), o), *lb = ts_randn(TS_SHAPE(7), o);
    ts_tensor *p = ts_randn(TS_SHAPE(4, 1), o), *q = ts_randn(TS_SHAPE(1, 5), o);
    ts_tensor *sq = ts_randn(TS_SHAPE(2, 3, 4, 8), o), *sk = ts_randn(TS_SHAPE(2, 3, 6, 8), o);
    ts_tensor *sv = ts_randn(TS_SHAPE(2, 3, 6, 5), o);
    ts_tensor *d1 = ts_randn(TS_SHAPE(3, 2), (ts_opts){.device = dev, .dtype = TS_F64});
    ts_tensor *d2 = ts_randn(TS_SHAPE(2, 3), (ts_opts){.device = dev, .dtype = TS_F64});
    CHECK_EQ(ts_profiler_start(&opts), TS_OK);
    CHECK(ts_matmul(a, b) != NULL);
    CHECK(ts_matmul(ba, bb) != NULL);
    CHECK(ts_mm(ma, mb) != NULL);
    CHECK(ts_addmm(mc, ma, mb, 1.0, 1.0) != NULL);
    CHECK(ts_bmm(b1, b2) != NULL);
    CHECK(ts_conv2d(cx, cw, cb, (ts_conv2d_opts){.padding = {1, 1}, .groups = 2}) != NULL);
    CHECK(ts_conv2d(sx, sw, NULL, (ts_conv2d_opts){.stride = {2, 2}}) != NULL);
    CHECK(ts_linear(a, lw, lb) != NULL);
    CHECK(ts_add(p, q) != NULL);
    CHECK(ts_add_scalar(a, 2.0) != NULL);
    CHECK(ts_scaled_dot_product_attention(sq, sk, sv, NULL, 0.0, false, 0.0) != NULL);
    CHECK(ts_mm(d1, d2) != NULL);
    CHECK(ts_relu(a) != NULL);
    CHECK_EQ(ts_profiler_stop(), TS_OK);
    ts_scope_end();
    CHECK_OK();
    return ts_profiler_take();
}

static void check_counts(ts_device dev) {
    const expect x = expected();
    ts_profile *p = profile_ops(dev, (ts_profiler_opts){.with_flops = true});
    CHECK(p != NULL);
    if (!p) return;
    check_op(p, "matmul", 0, x.matmul_f, x.matmul_b);
    check_op(p, "matmul", 1, x.bmatmul_f, x.bmatmul_b);
    check_op(p, "mm", 0, x.mm_f, x.mm_b);
    check_op(p, "mm", 1, x.addmm_mm_f, x.mm_b);
    check_op(p, "add", 0, x.addmm_add_f, x.addmm_add_b);
    check_op(p, "bmm", 0, x.bmm_f, x.bmm_b);
    check_op(p, "conv2d", 0, x.conv_g_f, x.conv_g_b);
    check_op(p, "conv2d", 1, x.conv_s_f, x.conv_s_b);
    check_op(p, "linear", 0, x.linear_f, x.linear_b);
    check_op(p, "add", 1, x.add_f, x.add_b);
    check_op(p, "add_scalar", 0, x.adds_f, x.adds_b);
    check_op(p, "scaled_dot_product_attention", 0, x.sdpa_f, x.sdpa_b);
    check_op(p, "mm", 2, x.mm64_f, x.mm64_b);
    check_op(p, "relu", 0, 0, 2 * 4 * 3 * F32); /* not counted; its bytes are */
    /* with_flops records the inputs without record_shapes */
    size_t n = 0;
    const ts_profile_event *ev = ts_profile_events(p, &n);
    const ts_profile_event *mm = op_event(p, "matmul", 0);
    CHECK(mm && !strcmp(ts_profile_event_input_dims(p, (size_t)(mm - ev)), "[[4, 3], [3, 5]]"));
    /* non-op events count nothing */
    for (size_t i = 0; i < n; i++)
        if (ev[i].kind != TS_PROF_OP) CHECK(ev[i].flops == 0 && ev[i].op_bytes == 0);
    /* key averages sum each name's flops */
    ts_profile_stat rows[128];
    int64_t nr = ts_profile_key_averages(p, false, rows, 128);
    CHECK(nr > 0 && nr <= 128);
    int seen = 0;
    for (int64_t r = 0; r < nr && r < 128; r++) {
        if (rows[r].kind != TS_PROF_OP) continue;
        int64_t want = -1;
        if (!strcmp(rows[r].name, "mm")) want = x.mm_f + x.addmm_mm_f + x.mm64_f;
        if (!strcmp(rows[r].name, "matmul")) want = x.matmul_f + x.bmatmul_f;
        if (!strcmp(rows[r].name, "add")) want = x.addmm_add_f + x.add_f;
        if (!strcmp(rows[r].name, "conv2d")) want = x.conv_g_f + x.conv_s_f;
        if (!strcmp(rows[r].name, "relu")) want = 0;
        if (want < 0) continue;
        seen++;
        CHECK_EQ(rows[r].flops, want);
    }
    CHECK_EQ(seen, 5);
    ts_profile_free(p);

    /* with_flops off: nothing counted, inputs recorded or not */
    for (int shapes = 0; shapes < 2; shapes++) {
        p = profile_ops(dev, (ts_profiler_opts){.record_shapes = shapes});
        CHECK(p != NULL);
        if (!p) continue;
        ev = ts_profile_events(p, &n);
        int64_t flops = 0, bytes = 0;
        for (size_t i = 0; i < n; i++) flops += ev[i].flops, bytes += ev[i].op_bytes;
        CHECK_EQ(flops, 0);
        CHECK_EQ(bytes, 0);
        CHECK(op_event(p, "matmul", 0) != NULL);
        nr = ts_profile_key_averages(p, false, rows, 128);
        for (int64_t r = 0; r < nr && r < 128; r++) CHECK_EQ(rows[r].flops, 0);
        ts_profile_free(p);
    }
}

/* the trace's op events: "flops" where counted (only there), "op_bytes" */
static void check_trace(void) {
    const expect x = expected();
    ts_profile *p = profile_ops(ts_cpu(), (ts_profiler_opts){.with_flops = true});
    CHECK(p != NULL);
    if (!p) return;
    char path[] = "/tmp/ts_prof_flops_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0) {
        ts_profile_free(p);
        return;
    }
    close(fd);
    CHECK_EQ(ts_profile_export_chrome(p, path), TS_OK);
    cJSON *j = read_json(path);
    remove(path);
    CHECK(j != NULL);
    const cJSON *evs = cJSON_GetObjectItem(j, "traceEvents");
    int conv = 0, relu = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, evs) {
        const cJSON *name = cJSON_GetObjectItem(e, "name"), *cat = cJSON_GetObjectItem(e, "cat");
        if (!cJSON_IsString(cat) || strcmp(cat->valuestring, "cpu_op")) continue;
        const cJSON *args = cJSON_GetObjectItem(e, "args");
        const cJSON *fl = cJSON_GetObjectItem(args, "flops"),
                    *by = cJSON_GetObjectItem(args, "op_bytes");
        if (!strcmp(name->valuestring, "conv2d") && conv++ == 0) {
            CHECK(cJSON_IsNumber(fl) && fl->valuedouble == (double)x.conv_g_f);
            CHECK(cJSON_IsNumber(by) && by->valuedouble == (double)x.conv_g_b);
        }
        if (!strcmp(name->valuestring, "relu")) {
            relu++;
            CHECK(fl == NULL); /* not counted: no "flops" */
            CHECK(cJSON_IsNumber(by) && by->valuedouble == 2 * 4 * 3 * F32);
        }
    }
    CHECK_EQ(conv, 2);
    CHECK_EQ(relu, 1);
    cJSON_Delete(j);
    ts_profile_free(p);
}

/* an op event named name with inputs dims / types and result shape, through tsi_prof_flops */
static ts_profile_event counted(const char *name, const char *dims, const char *types,
                                const char *shape) {
    ts_profile_event e = {.kind = TS_PROF_OP};
    snprintf(e.name, sizeof e.name, "%s", name);
    snprintf(e.shape, sizeof e.shape, "%s", shape);
    tsi_prof_inputs in;
    snprintf(in.dims, sizeof in.dims, "%s", dims);
    snprintf(in.types, sizeof in.types, "%s", types);
    tsi_prof_flops(&e, &in);
    return e;
}

static void check_formulas(void) {
    /* conv_transpose2d x [2, 4, 5, 5], w [4, 6 / 2, 3, 3], groups 2, stride 2: each input
     * element times each of its Cout / groups * 3 * 3 taps */
    ts_profile_event e = counted("conv_transpose2d", "[[2, 4, 5, 5], [4, 3, 3, 3]]",
                                 "[\"float32\", \"float32\"]", "[2, 6, 11, 11] float32");
    CHECK_EQ(e.flops, 2 * (2 * 4 * 5 * 5) * (6 / 2) * 3 * 3);
    CHECK_EQ(e.op_bytes, (2 * 4 * 5 * 5 + 4 * 3 * 3 * 3 + 2 * 6 * 11 * 11) * F32);
    /* conv3d x [1, 2, 4, 4, 4], w [3, 2, 2, 2, 2], b [3] -> [1, 3, 3, 3, 3] */
    e = counted("conv3d", "[[1, 2, 4, 4, 4], [3, 2, 2, 2, 2], [3]]",
                "[\"float32\", \"float32\", \"float32\"]", "[1, 3, 3, 3, 3] float32");
    CHECK_EQ(e.flops, 2 * (3 * 3 * 3) * 1 * 3 * 2 * (2 * 2 * 2));
    /* matmul of a vector by a batch of matrices: [5] @ [2, 5, 3] -> [2, 3] */
    e = counted("matmul", "[[5], [2, 5, 3]]", "[\"float16\", \"float16\"]", "[2, 3] float16");
    CHECK_EQ(e.flops, 2 * 2 * 5 * 3);
    CHECK_EQ(e.op_bytes, (5 + 2 * 5 * 3 + 2 * 3) * 2);
    /* a batch of matrices by a vector: [2, 3, 4] @ [4] -> [2, 3], no N */
    e = counted("matmul", "[[2, 3, 4], [4]]", "[\"float32\", \"float32\"]", "[2, 3] float32");
    CHECK_EQ(e.flops, 2 * 2 * 3 * 4);
    /* a list cut with "...": the formula's inputs are there, the bytes are unknown (0) */
    e = counted("matmul", "[[4, 3], [3, 5], \"...\"]", "[\"float32\", \"float32\", \"...\"]",
                "[4, 5] float32");
    CHECK_EQ(e.flops, 2 * 4 * 3 * 5);
    CHECK_EQ(e.op_bytes, 0);
    /* a type the profiler does not know: bytes unknown */
    e = counted("add", "[[4], [4]]", "[\"float32\", \"float8\"]", "[4] float32");
    CHECK_EQ(e.flops, 4);
    CHECK_EQ(e.op_bytes, 0);
    /* no inputs recorded: an element-wise op still has its result; a product nothing */
    e = counted("mul", "", "", "[3, 3] float32");
    CHECK_EQ(e.flops, 9);
    CHECK_EQ(e.op_bytes, 9 * F32);
    e = counted("mm", "", "", "[3, 3] float32");
    CHECK_EQ(e.flops, 0);
    /* an empty result: no products, the inputs' bytes still moved ([0, 3] @ [3, 4]) */
    e = counted("mm", "[[0, 3], [3, 4]]", "[\"float32\", \"float32\"]", "[0, 4] float32");
    CHECK_EQ(e.flops, 0);
    CHECK_EQ(e.op_bytes, 3 * 4 * F32);
    /* not the op's usual ranks: scaled_dot_product_attention with a 1-d value counts none */
    e = counted("scaled_dot_product_attention", "[[2, 4], [3, 4], [3]]",
                "[\"float32\", \"float32\", \"float32\"]", "[2] float32");
    CHECK_EQ(e.flops, 0);
    /* not an op */
    e = (ts_profile_event){.kind = TS_PROF_RANGE, .name = "mm", .shape = "[3, 3] float32"};
    tsi_prof_flops(&e, NULL);
    CHECK_EQ(e.flops, 0);
    CHECK_EQ(e.op_bytes, 0);
}

/* Convolutions built of others (conv1d of conv2d, conv3d of conv2d off the cpu's oneDNN path,
 * the transposed ones of products and adds): each is an op event of its own with the FLOPs of its
 * formula, and the ops inside it count none, so the profile's total counts each product once. */
static void check_composed_convs(ts_device dev) {
    ts_manual_seed(0);
    ts_scope_begin();
    const ts_opts o = {.device = dev};
    ts_tensor *x1 = ts_randn(TS_SHAPE(2, 4, 11), o), *w1 = ts_randn(TS_SHAPE(6, 2, 3), o);
    ts_tensor *x3 = ts_randn(TS_SHAPE(1, 3, 5, 6, 7), o),
              *w3 = ts_randn(TS_SHAPE(4, 3, 2, 3, 2), o);
    ts_tensor *xt = ts_randn(TS_SHAPE(2, 5, 4, 3), o), *wt = ts_randn(TS_SHAPE(5, 3, 3, 2), o);
    CHECK_EQ(ts_profiler_start(&(ts_profiler_opts){.with_flops = true}), TS_OK);
    CHECK(ts_conv1d(x1, w1, NULL, (ts_convnd_opts){.stride = {2}, .padding = {1}, .groups = 2}) !=
          NULL);
    CHECK(ts_conv3d(x3, w3, NULL, (ts_convnd_opts){.padding = {1, 0, 1}}) != NULL);
    CHECK(ts_conv_transpose2d(xt, wt, NULL, (ts_convnd_opts){.stride = {2, 1}}) != NULL);
    CHECK_EQ(ts_profiler_stop(), TS_OK);
    ts_scope_end();
    CHECK_OK();
    ts_profile *p = ts_profiler_take();
    CHECK(p != NULL);
    if (!p) return;
    /* 2 * output elements * (Cin / groups) * kernel elements */
    const int64_t l1 = conv_out(11, 3, 2, 1, 1);
    const int64_t f1 = 2 * (2 * 6 * l1) * 2 * 3;
    const int64_t b1 = (2 * 4 * 11 + 6 * 2 * 3 + 2 * 6 * l1) * F32;
    const int64_t d3 = conv_out(5, 2, 1, 1, 1), h3 = conv_out(6, 3, 1, 0, 1),
                  w3o = conv_out(7, 2, 1, 1, 1);
    const int64_t f3 = 2 * (4 * d3 * h3 * w3o) * 3 * (2 * 3 * 2);
    const int64_t b3 = (3 * 5 * 6 * 7 + 4 * 3 * 2 * 3 * 2 + 4 * d3 * h3 * w3o) * F32;
    /* transposed: 2 * input elements * (Cout / groups) * kernel elements; out (4-1)*2+3, 3+2-1 */
    const int64_t ft = 2 * (2 * 5 * 4 * 3) * 3 * (3 * 2);
    const int64_t bt = (2 * 5 * 4 * 3 + 5 * 3 * 3 * 2 + 2 * 3 * 9 * 4) * F32;
    check_op(p, "conv1d", 0, f1, b1);
    check_op(p, "conv3d", 0, f3, b3);
    check_op(p, "conv_transpose2d", 0, ft, bt);
    size_t n = 0;
    const ts_profile_event *ev = ts_profile_events(p, &n);
    int64_t total = 0;
    int inner = 0;
    for (size_t i = 0; i < n; i++) {
        if (ev[i].kind != TS_PROF_OP) continue;
        total += ev[i].flops;
        inner += ev[i].depth > 0 && !strcmp(ev[i].name, "conv2d");
    }
    CHECK_EQ(total, f1 + f3 + ft);
    CHECK(inner >= 1); /* conv1d's conv2d at least: counted as zero inside it */
    ts_profile_free(p);
}

int main(void) {
    check_formulas();
    check_counts(ts_cpu());
    check_composed_convs(ts_cpu());
    if (ts_device_count(TS_SIM) >= 1) { /* ctest sets TS_SIM_DEVICES */
        check_counts(ts_sim(0));
        check_composed_convs(ts_sim(0));
    }
    check_trace();
    return ts_test_finish();
}
