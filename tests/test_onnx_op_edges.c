/* test_onnx_op_edges.c — ONNX operators at edges ONNX's backend suite (test_onnx_backend) does not
 * reach, where tools/mutate.sh left mutants of src/onnx/ops_*.c alive: a variadic Max / Sum with
 * an absent middle operand, Reshape-1's shape attribute one past the rank limit and longer,
 * Unsqueeze-1 without its axes,
 * QuantizeLinear without a zero point (uint8) and with a scale that fits no axis, and
 * DequantizeLinear's type-mismatch message naming both operands, ConvInteger's refusal of an
 * int16 input, QLinearConv's refusal of a per-channel x_scale, Resize-10's refusal of "cubic"
 * at load (not at run), MelWeightMatrix's float32 default, RoiAlign's batch index past the
 * batch, GridSample's reflection past a second border. One-node models built with
 * xformer_util.h's builders; every expected value is exact (small integers and halves). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ts_test.h"

#ifndef TS_HAVE_ONNX
int main(void) { return ts_test_skip("this build has no ONNX support (protobuf-c not found)"); }
#else
#include "xformer_util.h"

#define UINT8 ONNX__TENSOR_PROTO__DATA_TYPE__UINT8
#define INT8  ONNX__TENSOR_PROTO__DATA_TYPE__INT8
#define INT16 ONNX__TENSOR_PROTO__DATA_TYPE__INT16

/* t's values as doubles equal to want[0..n) */
static void check_exact(const char *what, ts_tensor *t, const double *want, int64_t n) {
    double tol[8] = {0};
    check_close(what, t, want, tol, n);
}

/* ------------------------------------------------------------------ variadic operands */
/* Max(a, "", b) and Sum(a, "", b): an absent operand is skipped */
static void test_variadic_absent(void) {
    const char *ops[2] = {"Max", "Sum"};
    const double want[2][3] = {{4, 2, 6}, {5, -1, 9}};
    for (int k = 0; k < 2; k++) {
        begin(13);
        op(ops[k], "a - b", "y");
        input("a", 1, (const int64_t[]){3});
        input("b", 1, (const int64_t[]){3});
        output("y");
        ts_module *m = load(false);
        CHECK(m);
        ts_scope_begin();
        ts_tensor *in[2] = {host_tensor(TS_SHAPE(3), (const float[]){1, 2, 3}, ts_cpu()),
                            host_tensor(TS_SHAPE(3), (const float[]){4, -3, 6}, ts_cpu())};
        ts_tensor *y = m ? run(m, 2, in) : NULL;
        check_exact(ops[k], y, want[k], 3);
        ts_scope_end();
        ts_module_free(m);
        done();
    }
}

/* ------------------------------------------------------------------ Reshape-1 */
/* opset 4: the shape is an attribute. 9 values (rank 9, one past Tessera's 8) and 10 are refused
 * by name, at load or at run. */
static void test_reshape1_rank(void) {
    const int64_t ones[10] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
    for (int count = 9; count <= 10; count++) {
        begin(4);
        attr_ints(op("Reshape", "x", "y"), "shape", (size_t)count, ones);
        input("x", 1, (const int64_t[]){1});
        output("y");
        ts_module *m = load(false);
        if (m) {
            ts_scope_begin();
            ts_tensor *x = ts_ones(TS_SHAPE(1), (ts_opts){0}), *y = NULL;
            CHECK(ts_onnx_run(m, 1, &x, 1, &y) != TS_OK && !y);
            ts_scope_end();
        }
        if (count == 9)
            CHECK_ERR_HAS(TS_ERR_SHAPE, "Reshape");
        else
            CHECK_ERR_HAS(TS_ERR_SHAPE, "attribute 'shape' has 10 values (at most 9)");
        ts_module_free(m);
        done();
    }
}

/* ------------------------------------------------------------------ Unsqueeze-1 */
/* opset 11: the axes are an attribute, required: without it the node is refused by name (an
 * operator returning false with no error of its own reads as "failed without an error") */
static void test_unsqueeze1_no_axes(void) {
    begin(11);
    op("Unsqueeze", "x", "y");
    input("x", 1, (const int64_t[]){2});
    output("y");
    ts_module *m = load(false);
    if (m) {
        ts_scope_begin();
        ts_tensor *x = ts_ones(TS_SHAPE(2), (ts_opts){0}), *y = NULL;
        CHECK(ts_onnx_run(m, 1, &x, 1, &y) != TS_OK && !y);
        ts_scope_end();
    }
    CHECK_ERR_HAS(TS_ERR_FORMAT, "(Unsqueeze): needs axes");
    ts_module_free(m);
    done();
}

/* ------------------------------------------------------------------ quantization */
/* QuantizeLinear(x, scale) without a zero point: uint8, round(x / scale) saturated to [0, 255]
 * (3 / 0.5 = 6, 1.25 / 0.5 = 2.5 rounds to even 2, 300 / 0.5 = 600 -> 255, -2 / 0.5 -> 0) */
static void test_quantize_no_zero_point(void) {
    begin(13);
    const int64_t one = 1;
    add_init(cur, data_tensor("scale", FLOAT, 0, &one, (const float[]){0.5f}, NULL));
    op("QuantizeLinear", "x scale", "y");
    input("x", 1, (const int64_t[]){4});
    output("y");
    ts_module *m = load(false);
    CHECK(m);
    ts_scope_begin();
    ts_tensor *x = host_tensor(TS_SHAPE(4), (const float[]){3, 1.25f, 300, -2}, ts_cpu());
    ts_tensor *y = m ? run(m, 1, &x) : NULL;
    CHECK(y && ts_dtype_of(y) == TS_U8);
    check_exact("QuantizeLinear without a zero point", y, (const double[]){6, 2, 255, 0}, 4);
    ts_scope_end();
    ts_module_free(m);
    done();
}

/* QuantizeLinear of x [2, 3] with a scale of 2 values: axis 1 (the default) has 3, so the scale
 * fits neither per tensor nor per axis: refused naming both */
static void test_quantize_scale_misfit(void) {
    begin(13);
    const int64_t two = 2;
    add_init(cur, data_tensor("scale", FLOAT, 1, &two, (const float[]){0.5f, 0.25f}, NULL));
    op("QuantizeLinear", "x scale", "y");
    input("x", 2, (const int64_t[]){2, 3});
    output("y");
    ts_module *m = load(false);
    CHECK(m);
    if (m) {
        ts_scope_begin();
        ts_tensor *x = ts_ones(TS_SHAPE(2, 3), (ts_opts){0}), *y = NULL;
        CHECK(ts_onnx_run(m, 1, &x, 1, &y) == TS_ERR_SHAPE && !y);
        /* ts_quantize_linear names the axis the scale must follow */
        CHECK_ERR_HAS(TS_ERR_SHAPE,
                      "must have one value or one per element of dim 1 of x float32 [2, 3]");
        ts_scope_end();
    }
    ts_module_free(m);
    done();
}

/* DequantizeLinear(x int8, scale, zero point uint8): refused naming both types */
static void test_dequantize_mismatch(void) {
    begin(13);
    const int64_t one = 1;
    add_init(cur, data_tensor("scale", FLOAT, 0, &one, (const float[]){0.5f}, NULL));
    Onnx__TensorProto *zp = tensor("zp", UINT8, 0, &one, (const uint8_t[]){3}, 1);
    add_init(cur, zp);
    op("DequantizeLinear", "x scale zp", "y");
    add_input(cur, "x", tensor_type(INT8, 1, (const int64_t[]){2}));
    output("y");
    ts_module *m = load(false);
    CHECK(m);
    if (m) {
        ts_scope_begin();
        ts_tensor *x = ts_from_data(TS_SHAPE(2), TS_I8, (const int8_t[]){1, -1}, (ts_opts){0});
        ts_tensor *y = NULL;
        CHECK(ts_onnx_run(m, 1, &x, 1, &y) == TS_ERR_ARG && !y);
        CHECK_ERR_HAS(TS_ERR_ARG, "and zero point uint8");
        ts_scope_end();
    }
    ts_module_free(m);
    done();
}

/* ConvInteger(x int16, w uint8): refused naming x's dtype (only uint8 and int8 are quantized) */
static void test_conv_integer_int16(void) {
    begin(10);
    const int64_t wd[4] = {1, 1, 1, 1}, xd[4] = {1, 1, 2, 2};
    add_init(cur, tensor("w", UINT8, 4, wd, (const uint8_t[]){2}, 1));
    op("ConvInteger", "x w", "y");
    add_input(cur, "x", tensor_type(INT16, 4, xd));
    output("y");
    ts_module *m = load(false);
    if (m) {
        ts_scope_begin();
        ts_tensor *x =
            ts_from_data(TS_SHAPE(1, 1, 2, 2), TS_I16, (const int16_t[]){1, 2, 3, 4}, (ts_opts){0});
        ts_tensor *y = NULL;
        CHECK(ts_onnx_run(m, 1, &x, 1, &y) != TS_OK && !y);
        ts_scope_end();
    }
    CHECK_ERR_HAS(TS_ERR_DTYPE, "x must be uint8 or int8, got int16");
    ts_module_free(m);
    done();
}

/* QLinearConv with x_scale of two values: refused naming it (x's scale is per tensor) */
static void test_qlinear_conv_x_scale(void) {
    begin(10);
    const int64_t one = 1, two = 2, wd[4] = {1, 1, 1, 1}, xd[4] = {1, 1, 2, 2};
    add_init(cur, data_tensor("xs", FLOAT, 1, &two, (const float[]){0.5f, 0.25f}, NULL));
    add_init(cur, tensor("xz", UINT8, 0, &one, (const uint8_t[]){1}, 1));
    add_init(cur, tensor("w", UINT8, 4, wd, (const uint8_t[]){2}, 1));
    add_init(cur, data_tensor("ws", FLOAT, 0, &one, (const float[]){0.5f}, NULL));
    add_init(cur, tensor("wz", UINT8, 0, &one, (const uint8_t[]){0}, 1));
    add_init(cur, data_tensor("ys", FLOAT, 0, &one, (const float[]){1.0f}, NULL));
    add_init(cur, tensor("yz", UINT8, 0, &one, (const uint8_t[]){0}, 1));
    op("QLinearConv", "x xs xz w ws wz ys yz", "y");
    add_input(cur, "x", tensor_type(UINT8, 4, xd));
    output("y");
    ts_module *m = load(false);
    if (m) {
        ts_scope_begin();
        ts_tensor *x =
            ts_from_data(TS_SHAPE(1, 1, 2, 2), TS_U8, (const uint8_t[]){1, 2, 3, 4}, (ts_opts){0});
        ts_tensor *y = NULL;
        CHECK(ts_onnx_run(m, 1, &x, 1, &y) != TS_OK && !y);
        ts_scope_end();
    }
    CHECK_ERR_HAS(TS_ERR_UNSUPPORTED, "x_scale must be one value (per tensor)");
    ts_module_free(m);
    done();
}

/* ------------------------------------------------------------------ resize */
/* Resize-10 knows nearest and linear only: "cubic" is refused when the model loads */
static void test_resize10_cubic(void) {
    begin(10);
    const int64_t four = 4;
    add_init(cur, data_tensor("scales", FLOAT, 1, &four, (const float[]){1, 1, 2, 2}, NULL));
    attr_string(op("Resize", "x scales", "y"), "mode", "cubic");
    input("x", 4, (const int64_t[]){1, 1, 2, 2});
    output("y");
    ts_module *m = load(false);
    CHECK(!m);
    CHECK_ERR_HAS(TS_ERR_UNSUPPORTED, "mode 'cubic' is not supported");
    ts_module_free(m);
    done();
}

/* ------------------------------------------------------------------ signal and detection */
/* MelWeightMatrix without output_datatype: float32 (ONNX's default, 1), [dft / 2 + 1, bins] */
static void test_mel_default_dtype(void) {
    begin(17);
    const int64_t one = 1;
    add_init(cur, data_tensor("bins", INT64, 0, &one, NULL, (const int64_t[]){4}));
    add_init(cur, data_tensor("dft", INT64, 0, &one, NULL, (const int64_t[]){16}));
    add_init(cur, data_tensor("rate", INT64, 0, &one, NULL, (const int64_t[]){8000}));
    add_init(cur, data_tensor("lo", FLOAT, 0, &one, (const float[]){0}, NULL));
    add_init(cur, data_tensor("hi", FLOAT, 0, &one, (const float[]){4000}, NULL));
    op("MelWeightMatrix", "bins dft rate lo hi", "y");
    output("y");
    ts_module *m = load(false);
    CHECK(m);
    ts_scope_begin();
    ts_tensor *y = m ? run(m, 0, NULL) : NULL;
    CHECK(y && ts_dtype_of(y) == TS_F32 && ts_ndim(y) == 2 && ts_size(y, 0) == 9 &&
          ts_size(y, 1) == 4);
    ts_scope_end();
    ts_module_free(m);
    done();
}

/* RoiAlign with a batch index two past a batch of one: refused naming the index */
static void test_roi_align_batch_index(void) {
    begin(16);
    const int64_t rd[2] = {1, 4}, one = 1;
    add_init(cur, data_tensor("rois", FLOAT, 2, rd, (const float[]){0, 0, 2, 2}, NULL));
    add_init(cur, data_tensor("bi", INT64, 1, &one, NULL, (const int64_t[]){2}));
    op("RoiAlign", "x rois bi", "y");
    input("x", 4, (const int64_t[]){1, 1, 4, 4});
    output("y");
    ts_module *m = load(false);
    CHECK(m);
    if (m) {
        ts_scope_begin();
        ts_tensor *x = ts_ones(TS_SHAPE(1, 1, 4, 4), (ts_opts){0}), *y = NULL;
        CHECK(ts_onnx_run(m, 1, &x, 1, &y) == TS_ERR_ARG && !y);
        CHECK_ERR_HAS(TS_ERR_ARG, "batch index 2 out of range");
        ts_scope_end();
    }
    ts_module_free(m);
    done();
}

/* GridSample (nearest, reflection, align_corners) of a row 10 20 30 40 at x = 3.2: unnormalised
 * (3.2 + 1) / 2 * 3 = 6.3, one full range (3) past the right border and 0.3 more, so reflected
 * twice: 0 + 0.3 (ONNX's _gs_reflect, an odd count from x_min), the nearest pixel 0: 10 */
static void test_grid_sample_reflect_twice(void) {
    begin(16);
    const int64_t gd[4] = {1, 1, 1, 2};
    add_init(cur, data_tensor("grid", FLOAT, 4, gd, (const float[]){3.2f, 0}, NULL));
    Onnx__NodeProto *g = op("GridSample", "x grid", "y");
    attr_string(g, "mode", "nearest");
    attr_string(g, "padding_mode", "reflection");
    attr_int(g, "align_corners", 1);
    input("x", 4, (const int64_t[]){1, 1, 1, 4});
    output("y");
    ts_module *m = load(false);
    CHECK(m);
    ts_scope_begin();
    ts_tensor *x = host_tensor(TS_SHAPE(1, 1, 1, 4), (const float[]){10, 20, 30, 40}, ts_cpu());
    ts_tensor *y = m ? run(m, 1, &x) : NULL;
    check_exact("GridSample reflected twice", y, (const double[]){10}, 1);
    ts_scope_end();
    ts_module_free(m);
    done();
}

int main(void) {
    test_variadic_absent();
    test_reshape1_rank();
    test_unsqueeze1_no_axes();
    test_quantize_no_zero_point();
    test_quantize_scale_misfit();
    test_dequantize_mismatch();
    test_conv_integer_int16();
    test_qlinear_conv_x_scale();
    test_resize10_cubic();
    test_mel_default_dtype();
    test_roi_align_batch_index();
    test_grid_sample_reflect_twice();
    arena_release();
    return ts_test_finish();
}
#endif
