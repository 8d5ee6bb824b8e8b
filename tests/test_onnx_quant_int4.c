/* test_onnx_quant_int4.c — ONNX's 4-bit quantization (src/onnx/tensor_proto.c's INT4 / UINT4
 * decoding, src/onnx/ops_quantize.c's 4-bit and blocked QuantizeLinear / DequantizeLinear): packed
 * initializers (raw_data and int32_data, odd counts with the padding nibble set), per tensor, per
 * axis and in blocks (a last partial block), against ONNX's definition computed here in float64
 * from float32 operands (exact: (q - zp) * scale is one float32 product; x / scale one float32
 * division, rounded half to even and saturated to [-8, 7] / [0, 15]); then malformed files and
 * arguments: a wrong byte count, a scale that does not fit the blocks, a zero scale, an
 * output_dtype Tessera lacks, a 4-bit Constant. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ts_test.h"

#ifndef TS_HAVE_ONNX
int main(void) { return ts_test_skip("this build has no ONNX support (protobuf-c not found)"); }
#else
#include "onnx_op_util.h"

enum { INT4 = 22, UINT4 = 21 };

/* a 4-bit initializer of dims, values v packed two a byte low nibble first (raw_data, or one byte
 * per int32_data entry); the padding nibble of an odd count set to 0xF; nbytes_delta changes the
 * byte count (malformed files) */
static void init_4bit(model *b, const char *name, int type, int nd, const int64_t *dims,
                      const int *v, bool int32_data, int nbytes_delta) {
    int64_t n = 1;
    for (int d = 0; d < nd; d++) n *= dims[d];
    size_t nb = (size_t)((n + 1) / 2 + nbytes_delta);
    Onnx__TensorProto *t = part(sizeof *t);
    onnx__tensor_proto__init(t);
    t->name = text(name);
    t->has_data_type = 1;
    t->data_type = type;
    t->n_dims = (size_t)nd;
    t->dims = part((size_t)(nd ? nd : 1) * sizeof *t->dims);
    memcpy(t->dims, dims, (size_t)nd * sizeof *dims);
    uint8_t *bytes = part(nb + 1);
    for (int64_t i = 0; i < n && (size_t)(i / 2) < nb; i++)
        bytes[i / 2] |= (uint8_t)((v[i] & 15) << (i % 2 ? 4 : 0));
    if (n % 2 && (size_t)(n / 2) < nb) bytes[n / 2] |= 0xF0; /* padding: must be ignored */
    if (int32_data) {
        t->n_int32_data = nb;
        t->int32_data = part((nb + 1) * sizeof *t->int32_data);
        for (size_t i = 0; i < nb; i++) t->int32_data[i] = bytes[i];
    } else {
        t->has_raw_data = 1;
        t->raw_data.len = nb;
        t->raw_data.data = bytes;
    }
    b->g.initializer[b->g.n_initializer++] = t;
}

static void init_f32_dims(model *b, const char *name, int nd, const int64_t *dims, const float *v) {
    int64_t n = 1;
    for (int d = 0; d < nd; d++) n *= dims[d];
    init_f32(b, name, n, v);
    Onnx__TensorProto *t = b->g.initializer[b->g.n_initializer - 1];
    t->n_dims = (size_t)nd;
    t->dims = part((size_t)(nd ? nd : 1) * sizeof *t->dims);
    memcpy(t->dims, dims, (size_t)nd * sizeof *dims);
}

static int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

/* DequantizeLinear of a [5, 3] int4 / uint4 weight (15 values: odd, the padding nibble set),
 * blocks of 2 along axis 0 (3 blocks, the last partial) or per axis 1 or per tensor */
static void test_dequantize(ts_device dev, bool s4, bool int32_data, int mode) {
    ts_scope_begin();
    const int64_t wd[2] = {5, 3};
    int q[15], zp[9];
    float sc[9];
    for (int i = 0; i < 15; i++) q[i] = s4 ? (i * 5) % 16 - 8 : (i * 7) % 16;
    for (int i = 0; i < 9; i++) {
        zp[i] = s4 ? i % 16 - 8 : (i * 3) % 16;
        sc[i] = 0.1f * (float)(i + 1);
    }
    model *m = model_new("DequantizeLinear", "", 17, "w s z", "y");
    const int64_t blk[2] = {3, 3}, ax[1] = {3}, one[1] = {1};
    if (mode == 0) { /* blocks */
        init_4bit(m, "w", s4 ? INT4 : UINT4, 2, wd, q, int32_data, 0);
        init_f32_dims(m, "s", 2, blk, sc);
        init_4bit(m, "z", s4 ? INT4 : UINT4, 2, blk, zp, int32_data, 0);
        a_int(m, "axis", 0), a_int(m, "block_size", 2);
    } else if (mode == 1) { /* per axis 1 */
        init_4bit(m, "w", s4 ? INT4 : UINT4, 2, wd, q, int32_data, 0);
        init_f32_dims(m, "s", 1, ax, sc);
        init_4bit(m, "z", s4 ? INT4 : UINT4, 1, ax, zp, int32_data, 0);
        a_int(m, "axis", 1);
    } else { /* per tensor */
        init_4bit(m, "w", s4 ? INT4 : UINT4, 2, wd, q, int32_data, 0);
        init_f32_dims(m, "s", 1, one, sc);
        init_4bit(m, "z", s4 ? INT4 : UINT4, 1, one, zp, int32_data, 0);
    }
    double want[15];
    for (int i = 0; i < 15; i++) {
        const int r = i / 3, c = i % 3;
        const int k = mode == 0 ? (r / 2) * 3 + c : mode == 1 ? c : 0;
        want[i] = (float)((float)(q[i] - zp[k]) * sc[k]);
    }
    ts_module *mod = load(m, dev);
    CHECK(mod != NULL);
    ts_tensor *y = NULL;
    if (mod) {
        CHECK(run(mod, 0, NULL, 1, &y));
        char what[64];
        snprintf(what, sizeof what, "DQ %s %s mode %d", s4 ? "int4" : "uint4",
                 int32_data ? "int32_data" : "raw_data", mode);
        check_values(y, TS_F32, TS_SHAPE(5, 3), want, NULL, what);
        ts_module_free(mod);
    }
    model_free();
    ts_scope_end();
}

/* QuantizeLinear of x [4, 6] to int4 / uint4 (the zero point's type) in blocks of 4 along axis 1
 * (2 blocks, the last partial), or per tensor through output_dtype with no zero point; x holds
 * ties (odd halves of the scale) and values past both ends */
static void test_quantize(ts_device dev, bool s4, bool blocked) {
    ts_scope_begin();
    float x[24], sc[8];
    int zp[8];
    for (int i = 0; i < 24; i++) x[i] = 0.25f * (float)(i - 12) * (float)(1 + (i % 5)) + 0.125f;
    for (int i = 0; i < 8; i++) sc[i] = i % 2 ? 0.25f : 0.5f, zp[i] = s4 ? i - 4 : i * 2;
    model *m = model_new("QuantizeLinear", "", 17, blocked ? "x s z" : "x s", "y");
    const int64_t bd[2] = {4, 2}, one[1] = {1};
    if (blocked) {
        init_f32_dims(m, "s", 2, bd, sc);
        init_4bit(m, "z", s4 ? INT4 : UINT4, 2, bd, zp, false, 0);
        a_int(m, "axis", 1), a_int(m, "block_size", 4);
    } else {
        init_f32_dims(m, "s", 1, one, sc);
        a_int(m, "output_dtype", s4 ? INT4 : UINT4);
    }
    double want[24];
    const int lo = s4 ? -8 : 0, hi = s4 ? 7 : 15;
    for (int i = 0; i < 24; i++) {
        const int k = blocked ? (i / 6) * 2 + (i % 6) / 4 : 0;
        const float d = x[i] / sc[k]; /* float32 */
        want[i] = clampi((int)nearbyint(d) + (blocked ? zp[k] : 0), lo, hi);
    }
    ts_module *mod = load(m, dev);
    CHECK(mod != NULL);
    if (mod) {
        ts_tensor *in = tensor(dev, TS_F32, TS_SHAPE(4, 6), x), *y = NULL;
        CHECK(run(mod, 1, &in, 1, &y));
        check_values(y, s4 ? TS_I8 : TS_U8, TS_SHAPE(4, 6), want, NULL,
                     blocked ? "Q int4 blocked" : "Q output_dtype");
        ts_module_free(mod);
    }
    model_free();
    ts_scope_end();
}

/* malformed files (a wrong byte count), refused at load */
static void test_load_errors(void) {
    const int64_t d3[1] = {3};
    const int v[24] = {0};
    float s[12] = {1, 1, 1};
    /* a wrong byte count: 3 int4 values need 2 bytes */
    model *m = model_new("DequantizeLinear", "", 17, "w s", "y");
    init_4bit(m, "w", INT4, 1, d3, v, false, 1);
    init_f32(m, "s", 1, s);
    refused(m, TS_ERR_FORMAT, "raw_data holds 3 bytes, its dims need 2");
    model_free();
    m = model_new("DequantizeLinear", "", 17, "w s", "y");
    init_4bit(m, "w", UINT4, 1, d3, v, true, -1);
    init_f32(m, "s", 1, s);
    refused(m, TS_ERR_FORMAT, "int32_data holds 1 bytes, its dims need 2");
    model_free();
    model_free();
}

static void test_run_errors(ts_device dev) {
    ts_scope_begin();
    const int64_t one[1] = {1};
    float s1[1] = {1};
    ts_tensor *x = ts_ones(TS_SHAPE(2, 3), (ts_opts){.device = dev});
    const int64_t d4[2] = {4, 6}, bad[2] = {4, 3};
    const int v[24] = {0};
    float s[12] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
    /* scales that do not fit blocks of 4 along axis 1 of [4, 6] (ceil(6 / 4) = 2 wanted) */
    model *m = model_new("DequantizeLinear", "", 17, "w s", "y");
    init_4bit(m, "w", INT4, 2, d4, v, false, 0);
    init_f32_dims(m, "s", 2, bad, s);
    a_int(m, "axis", 1), a_int(m, "block_size", 4);
    fails(m, dev, 0, NULL, TS_ERR_SHAPE, "in blocks of 4 on axis 1 (x's dims with ceil(6 / 4) = 2");
    model_free();
    /* a zero scale in QuantizeLinear to int4 (all initializers: folding leaves the failing node to
     * the run) */
    m = model_new("QuantizeLinear", "", 17, "x s z", "y");
    const float x24[24] = {0};
    init_f32_dims(m, "x", 2, d4, x24);
    float zs[1] = {0};
    init_f32_dims(m, "s", 1, one, zs);
    init_4bit(m, "z", INT4, 1, one, v, false, 0);
    fails(m, dev, 0, NULL, TS_ERR_ARG, "y_scale[0] is 0");
    model_free();
    /* output_dtype FLOAT8E4M3FN (17): not held */
    m = model_new("QuantizeLinear", "", 17, "x s", "y");
    init_f32_dims(m, "s", 1, one, s1);
    a_int(m, "output_dtype", 17);
    fails(m, dev, 1, &x, TS_ERR_UNSUPPORTED, "output_dtype 17 (FLOAT8E4M3FN)");
    model_free();
    /* output_dtype int4 with a uint8 zero point: they disagree */
    m = model_new("QuantizeLinear", "", 17, "x s z", "y");
    init_f32_dims(m, "s", 1, one, s1);
    a_int(m, "output_dtype", INT4);
    ts_tensor *in[2] = {x, ts_zeros(TS_SHAPE(), (ts_opts){.dtype = TS_U8, .device = dev})};
    fails(m, dev, 2, in, TS_ERR_ARG, "output_dtype 22 and the zero point's type UINT8 differ");
    model_free();
    /* a negative block size */
    m = model_new("DequantizeLinear", "", 17, "x s", "y");
    init_f32_dims(m, "s", 1, one, s1);
    a_int(m, "block_size", -2);
    ts_tensor *q = ts_zeros(TS_SHAPE(2, 3), (ts_opts){.dtype = TS_I8, .device = dev});
    fails(m, dev, 1, &q, TS_ERR_ARG, "block_size -2 is negative");
    model_free();
    ts_scope_end();
}

static void on_device(ts_device dev) {
    for (int s4 = 0; s4 < 2; s4++) {
        for (int mode = 0; mode < 3; mode++) test_dequantize(dev, s4, mode == 1, mode);
        test_dequantize(dev, s4, true, 0);
        test_quantize(dev, s4, true);
        test_quantize(dev, s4, false);
    }
    test_run_errors(dev);
}

int main(void) { return op_test_main(test_load_errors, on_device); }
#endif
