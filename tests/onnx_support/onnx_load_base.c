/* onnx_load_base.c — the base model of the ONNX loader tests (test_onnx_load,
 * test_onnx_load_external), built with onnx_build.h, and the two outcomes a case expects of a
 * model's bytes: it loads and computes the base model's output, or it is refused with a code and
 * a message. */
#include <stdio.h>
#include <string.h>

#include "onnx_load_base.h"
#include "ts_test.h"

/* ------------------------------------------------------------------ the base model
 * y = Relu(x + w), x and w float [2, 3], w = -3..2: with x = 1, y = 0 0 0 1 2 3. */
const int64_t d23[2] = {2, 3};
const float w_vals[6] = {-3, -2, -1, 0, 1, 2};
const float y_vals[6] = {0, 0, 0, 1, 2, 3};

Onnx__GraphProto *base_graph(void) {
    Onnx__GraphProto *g = graph();
    add_init(g, tensor("w", FLOAT, 2, d23, w_vals, sizeof w_vals));
    add_input(g, "x", tensor_type(FLOAT, 2, d23));
    node(g, "Add", "add0", "x,w", "a");
    node(g, "Relu", "relu0", "a", "y");
    add_output(g, "y", tensor_type(FLOAT, 2, d23));
    return g;
}

/* Runs a one-input model on x = 1 ([2, 3]) and compares with y_vals. */
bool runs_right(ts_module *m) {
    ts_scope_begin();
    ts_tensor *x = ts_ones(TS_SHAPE(2, 3), (ts_opts){0}), *y = NULL;
    float got[6] = {0};
    bool ok = ts_onnx_run(m, 1, &x, 1, &y) == TS_OK && ts_numel(y) == 6 &&
              ts_copy_to_host(y, got, sizeof got) == TS_OK && !memcmp(got, y_vals, sizeof got);
    ts_scope_end();
    return ok;
}

/* A model's bytes must load and compute y_vals (base_dir for its external data). */
void loads(const char *what, const Onnx__ModelProto *m, const char *dir) {
    size_t len;
    uint8_t *buf = pack(m, &len);
    ts_module *mod = ts_onnx_load_buffer(buf, len, dir, (ts_onnx_opts){0});
    bool ok = mod && runs_right(mod);
    ts_test_record(ok);
    if (!ok)
        ts_test_failf(__FILE__, __LINE__, "%s: expected to load and run%s", what,
                      ts_test_error_str());
    ts_module_free(mod);
    ts_error_clear();
    arena_free();
}

/* A model's bytes must be refused with code and a message containing frag. */
void refused(const char *what, const Onnx__ModelProto *m, const char *dir, ts_status code,
             const char *frag) {
    size_t len;
    uint8_t *buf = pack(m, &len);
    ts_module *mod = ts_onnx_load_buffer(buf, len, dir, (ts_onnx_opts){0});
    ts_status got = ts_error();
    const char *msg = ts_error_message();
    bool ok = !mod && got == code && strstr(msg, frag);
    ts_test_record(ok);
    if (!ok)
        ts_test_failf(__FILE__, __LINE__, "%s: expected %s with \"%s\", got %s%s: \"%s\"", what,
                      ts_status_string(code), frag, mod ? "a model and " : "",
                      ts_status_string(got), msg);
    else
        printf("  %-30s %s\n", what, msg);
    ts_module_free(mod);
    ts_error_clear();
    arena_free();
}

/* the base model with its initializer w replaced */
Onnx__ModelProto *with_w(Onnx__TensorProto *w) {
    Onnx__GraphProto *g = base_graph();
    g->initializer[0] = w;
    return model(g, OPSET);
}
