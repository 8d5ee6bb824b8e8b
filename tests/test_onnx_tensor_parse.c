/* test_onnx_tensor_parse.c — ts_onnx_tensor_parse against hostile TensorProtos packed with the
 * generated protobuf-c code: a good one parses to its name and values on the device asked, every
 * prefix of it parses or is refused cleanly, bools from int32_data are 0 or 1, an empty tensor
 * needs no data; no data, raw data too short, undefined, complex and unknown types, dims that
 * overflow or are negative, rank 9, values in the wrong field, external data and segments are
 * refused with their error code and a message naming what is wrong. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ts_test.h"

#ifndef TS_HAVE_ONNX
int main(void) { return ts_test_skip("this build has no ONNX support (protobuf-c not found)"); }
#else
#include "onnx_load_base.h"

/* ------------------------------------------------------------------ TensorProtos */
static void parse_refused(const char *what, const Onnx__TensorProto *t, ts_status code,
                          const char *frag) {
    size_t len = onnx__tensor_proto__get_packed_size(t);
    uint8_t *buf = get(len);
    onnx__tensor_proto__pack(t, buf);
    char *name = (char *)"unset";
    ts_tensor *x = ts_onnx_tensor_parse(buf, len, ts_cpu(), &name);
    ts_status got = ts_error();
    bool ok = !x && !name && got == code && strstr(ts_error_message(), frag);
    ts_test_record(ok);
    if (!ok)
        ts_test_failf(__FILE__, __LINE__, "%s: expected %s with \"%s\", got %s: \"%s\"", what,
                      ts_status_string(code), frag, ts_status_string(got), ts_error_message());
    else
        printf("  %-30s %s\n", what, ts_error_message());
    ts_release(x);
    ts_error_clear();
    arena_free();
}

static void test_tensor_protos(void) {
    /* a good one: name and values */
    Onnx__TensorProto *t = tensor("good", FLOAT, 2, d23, w_vals, sizeof w_vals);
    size_t len = onnx__tensor_proto__get_packed_size(t);
    uint8_t *buf = get(len);
    onnx__tensor_proto__pack(t, buf);
    char *name = NULL;
    ts_tensor *x = ts_onnx_tensor_parse(buf, len, ts_sim(0), &name);
    float got[6] = {0};
    ts_scope_begin();
    CHECK(x && name && !strcmp(name, "good") && ts_device_of(x).type == TS_SIM &&
          ts_copy_to_host(ts_to(x, ts_cpu()), got, sizeof got) == TS_OK &&
          !memcmp(got, w_vals, sizeof got));
    ts_scope_end();
    free(name);
    ts_release(x);
    CHECK_OK();
    /* every prefix: a tensor or a clean refusal */
    int bad = 0;
    for (size_t n = 0; n < len; n++) {
        uint8_t *copy = malloc(n ? n : 1);
        memcpy(copy, buf, n);
        x = ts_onnx_tensor_parse(copy, n, ts_cpu(), NULL);
        if (!x && ts_error() != TS_ERR_FORMAT) bad++;
        ts_release(x);
        ts_error_clear();
        free(copy);
    }
    CHECK_EQ(bad, 0);
    arena_free();
    /* bools from int32_data are 0 or 1 */
    t = tensor("b", ONNX__TENSOR_PROTO__DATA_TYPE__BOOL, 1, (int64_t[]){3}, NULL, 0);
    t->n_int32_data = 3;
    t->int32_data = get(3 * sizeof(int32_t));
    t->int32_data[1] = 2;
    t->int32_data[2] = -1;
    buf = get(len = onnx__tensor_proto__get_packed_size(t));
    onnx__tensor_proto__pack(t, buf);
    x = ts_onnx_tensor_parse(buf, len, ts_cpu(), NULL);
    uint8_t b[3] = {9, 9, 9};
    CHECK(x && ts_dtype_of(x) == TS_BOOL && ts_copy_to_host(x, b, 3) == TS_OK && b[0] == 0 &&
          b[1] == 1 && b[2] == 1);
    ts_release(x);
    CHECK_OK();
    arena_free();
    /* an empty tensor needs no data */
    t = tensor("e", FLOAT, 2, (int64_t[]){0, 3}, NULL, 0);
    buf = get(len = onnx__tensor_proto__get_packed_size(t));
    onnx__tensor_proto__pack(t, buf);
    x = ts_onnx_tensor_parse(buf, len, ts_cpu(), NULL);
    CHECK(x && ts_numel(x) == 0 && ts_size(x, 1) == 3);
    ts_release(x);
    CHECK_OK();
    arena_free();

    CHECK(!ts_onnx_tensor_parse(NULL, 4, ts_cpu(), NULL));
    CHECK_ERR_HAS(TS_ERR_ARG, "data is NULL");
    static const char junk[] = "\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01";
    CHECK(!ts_onnx_tensor_parse(junk, sizeof junk - 1, ts_cpu(), NULL));
    CHECK_ERR_HAS(TS_ERR_FORMAT, "not a valid TensorProto");
    parse_refused("no data", tensor("s", FLOAT, 0, NULL, NULL, 0), TS_ERR_FORMAT,
                  "tensor 's' (FLOAT []): no data holds 0 bytes, its dims need 4");
    parse_refused("raw_data too short", tensor("t", FLOAT, 2, d23, w_vals, 23), TS_ERR_FORMAT,
                  "raw_data holds 23 bytes, its dims need 24");
    parse_refused("undefined type", tensor("t", 0, 2, d23, w_vals, 24), TS_ERR_FORMAT,
                  "element type UNDEFINED");
    parse_refused(
        "complex128",
        tensor("t", ONNX__TENSOR_PROTO__DATA_TYPE__COMPLEX128, 1, (int64_t[]){3}, w_vals, 24),
        TS_ERR_UNSUPPORTED, "element type COMPLEX128, which Tessera lacks");
    parse_refused("a type past the enum", tensor("t", 99, 1, (int64_t[]){3}, w_vals, 24),
                  TS_ERR_UNSUPPORTED, "element type an unknown type");
    parse_refused("dims past int64",
                  tensor("t", INT64, 2, (int64_t[]){INT64_MAX, INT64_MAX}, w_vals, 24),
                  TS_ERR_FORMAT, "the product of its dims overflows");
    parse_refused("a negative dim", tensor("t", FLOAT, 1, (int64_t[]){-1}, w_vals, 24),
                  TS_ERR_FORMAT, "has dim 0 = -1");
    parse_refused("rank 9",
                  tensor("t", FLOAT, 9, (int64_t[]){1, 1, 1, 1, 1, 1, 1, 1, 1}, w_vals, 4),
                  TS_ERR_UNSUPPORTED, "rank 9");
    t = tensor("t", INT64, 1, (int64_t[]){3}, NULL, 0);
    t->n_float_data = 3;
    t->float_data = get(3 * sizeof(float));
    parse_refused("int64 in float_data", t, TS_ERR_FORMAT,
                  "of type INT64 stores its values in float_data");
    /* each typed field holds its own types only: float in double_data, int32 in int64_data,
     * int64 in uint64_data */
    t = tensor("t", FLOAT, 1, (int64_t[]){3}, NULL, 0);
    t->n_double_data = 3;
    t->double_data = get(3 * sizeof(double));
    parse_refused("float in double_data", t, TS_ERR_FORMAT,
                  "of type FLOAT stores its values in double_data");
    t = tensor("t", ONNX__TENSOR_PROTO__DATA_TYPE__INT32, 1, (int64_t[]){3}, NULL, 0);
    t->n_int64_data = 3;
    t->int64_data = get(3 * sizeof(int64_t));
    parse_refused("int32 in int64_data", t, TS_ERR_FORMAT,
                  "of type INT32 stores its values in int64_data");
    t = tensor("t", INT64, 1, (int64_t[]){3}, NULL, 0);
    t->n_uint64_data = 3;
    t->uint64_data = get(3 * sizeof(uint64_t));
    parse_refused("int64 in uint64_data", t, TS_ERR_FORMAT,
                  "of type INT64 stores its values in uint64_data");
    t = tensor("t", FLOAT, 1, (int64_t[]){3}, NULL, 0);
    t->n_float_data = 2;
    t->float_data = get(2 * sizeof(float));
    parse_refused("float_data too short", t, TS_ERR_FORMAT,
                  "float_data holds 8 bytes, its dims need 12");
    t = tensor("t", FLOAT, 1, (int64_t[]){3}, NULL, 0);
    t->has_data_location = 1;
    t->data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
    parse_refused("external data", t, TS_ERR_FORMAT, "external data without a location");
    t = tensor("t", FLOAT, 1, (int64_t[]){3}, w_vals, 12);
    t->segment = get(sizeof *t->segment);
    onnx__tensor_proto__segment__init(t->segment);
    parse_refused("segmented", t, TS_ERR_UNSUPPORTED, "tensor 't' is segmented");
}

int main(void) {
    printf("TensorProtos refused:\n");
    test_tensor_protos();
    arena_free();
    arena_release();
    return ts_test_finish();
}
#endif
